//! `orch`: check, explain, graph, simulate, verify and generate orchestration
//! templates; print their JSON Schema; serve them to editors (`orch lsp`); enforce them
//! between MCP clients and servers (`orch mcp`).
//!
//! Exit status: 0 clean, 1 errors in a template (or warnings under `--deny-warnings`,
//! or a template that cannot be compiled for graph/simulate/gen), 2 usage or I/O
//! problems (missing or unreadable files, bad events).

mod approvals;
mod audit_commands;
mod audit_log;
mod check_command;
mod console;
mod console_command;
mod graph;
mod input;
mod learn_command;
mod mcp;
mod policy;
mod report;
mod resolve;
mod serving;
mod simulate;
mod verify;
mod whatif_command;

use clap::{Parser, Subcommand, ValueEnum};
use orch_codegen::diagnostic;
use orch_codegen::{Code, Compiled, Diagnostic, Severity};
use orch_runtime::printable::{printable, printable_lines};
use std::io::{IsTerminal, Read, Write};
use std::path::Path;
use std::process::ExitCode;

use audit_commands::*;
use check_command::*;

/// Check, draw, simulate and generate AgentDock-style orchestration templates.
#[derive(Parser, Debug)]
#[command(name = "orch", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Report every error and warning of one or more templates, rustc-style.
    Check {
        /// Template files (template.json, or a bare {"steps": [...]} object).
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
        /// Output format: `human` (snippets), `json` (one object per diagnostic per
        /// line), `sarif` (SARIF 2.1.0, for code scanning) or `github` (GitHub Actions
        /// annotations).
        #[arg(long, value_enum, default_value_t = CheckFormat::Human)]
        format: CheckFormat,
        /// Treat warnings as errors (exit status 1).
        #[arg(long)]
        deny_warnings: bool,
        /// Colors in human output.
        #[arg(long, value_enum, default_value_t = Color::Auto)]
        color: Color,
    },
    /// Explain a diagnostic code (E015, W001, or a name like unknown_tool), with a wrong
    /// and a fixed example.
    Explain {
        /// The code or name.
        code: String,
    },
    /// Print the state diagram of a template (Mermaid or Graphviz DOT).
    Graph {
        /// The template file.
        file: String,
        /// Diagram language.
        #[arg(long, value_enum, default_value_t = GraphFormat::Mermaid)]
        format: GraphFormat,
    },
    /// Run events through a template and print the trace as JSON lines (docs/semantics.md §10).
    ///
    /// EVENTS holds one event per line: {"message": "..."}, {"tool": "name"},
    /// {"usage": {"prompt": n, "completion": n}}, {"available": ["name", ...]},
    /// {"reset": true}. Use `-` for standard input. Without EVENTS and with a terminal
    /// on standard input, starts an interactive session.
    Simulate {
        /// The template file.
        file: String,
        /// The events file (JSON lines), or `-` for standard input.
        events: Option<String>,
    },
    /// Explore every state a session of each template can reach, and report, with a
    /// shortest witness (events `orch simulate` replays), which steps can become active
    /// and which sequences can complete. Exit 0 when every step is reachable and every
    /// sequence can complete, 1 otherwise (or when the exploration stopped early), 2 on
    /// usage or I/O errors.
    Verify {
        /// Template files.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
        /// Output format: `human` or `json` (one object per finding per line).
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
        /// The host may record any tool of the universe, allowed or not (AgentDock's
        /// hosts do not enforce); by default it records only tools `allowed()` admits.
        #[arg(long)]
        permissive: bool,
        /// The host's tools, comma-separated (default: every tool of the template).
        #[arg(long, value_name = "NAMES", value_delimiter = ',')]
        available: Option<Vec<String>>,
        /// Stop after this many distinct states (undecided steps are then reported
        /// as unknown, never as unreachable).
        #[arg(long, value_name = "N", default_value_t = 20_000)]
        max_states: usize,
        /// Stop after this much work (units counted, not time: the same template always
        /// gets the same answer); undecided steps are then reported as unknown.
        #[arg(
            long,
            value_name = "UNITS",
            default_value_t = orch_codegen::verify::explore::DEFAULT_WORK
        )]
        max_work: u64,
    },
    /// Print the JSON Schema (draft 2020-12) of template.json, for editors and CI
    /// validators: `"$schema"` in a template, or a schema mapping in the editor.
    Schema,
    /// Run the language server over standard input and output (for editors):
    /// diagnostics as you type, hover on step names, go to definition.
    Lsp,
    /// Serve an MCP server's tools to MCP clients under a template: list only the tools
    /// the workflow allows now, refuse out-of-order calls before they reach the server
    /// (docs/mcp.md). Over stdio to one client by default, over Streamable HTTP with
    /// `--listen`. The upstream server is COMMAND (after `--`), or `--upstream-url`.
    Mcp(Box<mcp::Args>),
    /// Serve agentgateway's ExtMcp policy service under a template (docs/gateways.md):
    /// the gateway asks before every MCP tool call goes upstream and after its result
    /// comes back; calls the workflow refuses never reach the upstream, across any
    /// number of instances sharing Redis.
    Policy(Box<policy::Args>),
    /// Resolve a workflow run held on a lost result (docs/protocol.md#lost-results):
    /// the held call ran (`--ran`) or did not (`--not-run`), written into the store the
    /// gateways share. Exit 0 when it was held and is resolved, 1 when it is not held.
    Resolve(Box<resolve::Args>),
    /// List, show and answer the questions about gated calls at a gateway's approvals
    /// API (`orch mcp --approvals`, `orch policy --approvals`; docs/approvals.md).
    Approvals(Box<approvals::Args>),
    /// Serve the console (runs, questions, the decision log, the templates) over the
    /// store the gateways share, or over Restate's durable runs (docs/console.md).
    Console(Box<console_command::Args>),
    /// Decision logs (docs/audit.md).
    Audit {
        #[command(subcommand)]
        action: AuditAction,
    },
    /// `orch replay TEMPLATE LOG`: re-derive every decision of a decision log from its
    /// events alone, under the template it was written with, and report the first
    /// record that does not follow (another template, a tampered log) with its line;
    /// exit 0 when every record follows, 1 at the first that does not.
    ///
    /// `orch replay LOG --template NEW.json`: what-if — judge the log's calls under
    /// another template (or version), as the runs actually went, and report every call
    /// it decides otherwise and the totals ("would refuse 12 of 40,312 calls: 9 by
    /// `argument known-recipient`, ..."). LOG may also be an OpenAI or Anthropic
    /// transcript, as `orch check-trace` reads them. Exit 0 when no call that ran would
    /// be refused or asked about, 1 when some would (docs/rollout.md).
    ///
    /// Both exit 2 on usage or I/O errors.
    Replay {
        /// The template file, then the log; with --template, the log alone.
        file: String,
        /// The decision log (JSON lines), or `-` for standard input.
        log: Option<String>,
        /// What-if: the template to judge the log's calls under.
        #[arg(long, value_name = "NEW.json")]
        template: Option<String>,
        /// Output format: `human`, `json` (one object; for a what-if one object per
        /// changed call and `{"summary": ...}` last) or `sarif` (a what-if only).
        #[arg(long, value_enum, default_value_t = whatif_command::ReplayFormat::Human)]
        format: whatif_command::ReplayFormat,
    },
    /// Grade a recorded conversation against a template: which tool calls the workflow
    /// would have refused and why, which of them ran anyway, which steps were visited,
    /// which properties the executions violate. TRACE is OpenAI chat-completions
    /// messages, Anthropic messages (a JSON array, or an object with `messages`), or
    /// orch's decision records (JSON lines); `-` reads standard input. Exit 0 when the
    /// trace follows the workflow, 1 when it does not, 2 on usage or I/O errors.
    CheckTrace {
        /// The template file.
        file: String,
        /// The transcript.
        trace: String,
        /// Output format: `human` or `json` (one object).
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
    /// A first template from what agents did: decision logs (observe mode keeps every
    /// call's arguments) or OpenAI/Anthropic transcripts. It keeps the tools that ran,
    /// the orders that held in every run (as steps), the argument values that were few
    /// or shared a domain (as rules), and proposes approvals for tools whose names say
    /// they change something — each explained in its description. Checked before it is
    /// written: it compiles and admits every call it learned from. Exit 0 when written,
    /// 1 when that check fails, 2 on usage or I/O errors (docs/rollout.md).
    Learn(Box<learn_command::Args>),
    /// Print the Rust module that build.rs would generate for a template.
    Gen {
        /// The template file.
        file: String,
        /// The path the generated code names the runtime by: `::orch` for a crate that
        /// depends on `orch`, `::orch_runtime` for one that depends on the runtime crate
        /// alone.
        #[arg(long, default_value = orch_codegen::emit::DEFAULT_RUNTIME, value_parser = parse_runtime_path)]
        runtime_path: String,
    },
}

/// `orch audit` actions.
#[derive(Subcommand, Debug)]
enum AuditAction {
    /// Make an Ed25519 key pair for signed checkpoints: PREFIX.key (the private key,
    /// PKCS#8 PEM, readable by its owner only) for `orch mcp`/`orch policy
    /// --audit-key`, and PREFIX.pub (the public key, SPKI PEM) for `orch audit verify
    /// --public-key`. Refuses to overwrite. Exit 0, or 2 on I/O errors.
    Keygen {
        /// Where to write: PREFIX.key and PREFIX.pub.
        prefix: String,
    },
    /// Check that a chained decision log is untampered: every record carries its own
    /// hash and the previous record's, and numbers follow one another; prints the
    /// number of records and the head (the last record's hash) to anchor. Records cut off
    /// the end are caught against what was anchored before (`--expect-head`,
    /// `--expect-count`). Exit 0 when the chain holds, 1 at the first record that breaks
    /// it, 2 on usage or I/O errors.
    Verify {
        /// The decision log (JSON lines), or `-` for standard input.
        log: String,
        /// The head an earlier verification printed (or a published one): some record
        /// must hash to it — with `--expect-count`, the record at that count.
        #[arg(long, value_name = "HASH")]
        expect_head: Option<String>,
        /// How many records the log had when it was anchored: it must have at least as
        /// many.
        #[arg(long, value_name = "N")]
        expect_count: Option<u64>,
        /// Check every checkpoint's signature against this public key (SPKI PEM, as
        /// `orch audit keygen` writes it); give it again for each key while keys are
        /// rotated. A log with records but no checkpoint then fails, and records after
        /// the last checkpoint are reported as unanchored.
        #[arg(long, value_name = "FILE")]
        public_key: Vec<String>,
        /// Output format: `human` or `json` (one object).
        #[arg(long, value_enum, default_value_t = Format::Human)]
        format: Format,
    },
}

/// `--runtime-path`: a Rust path, or an error clap reports.
fn parse_runtime_path(s: &str) -> Result<String, String> {
    match orch_codegen::emit::runtime_path(s) {
        Some(_) => Ok(s.to_owned()),
        None => Err(format!(
            "`{s}` is not a Rust path (expected something like `::orch`)"
        )),
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Human,
    Json,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum CheckFormat {
    Human,
    Json,
    Sarif,
    Github,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Color {
    Auto,
    Always,
    Never,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum GraphFormat {
    Mermaid,
    Dot,
}

const OK: u8 = 0;
const FOUND_ERRORS: u8 = 1;
const USAGE_OR_IO: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { USAGE_OR_IO } else { OK });
        }
    };
    let code = match cli.command {
        Command::Check {
            files,
            format,
            deny_warnings,
            color,
        } => check(&files, format, deny_warnings, color),
        Command::Explain { code } => explain(&code),
        Command::Graph { file, format } => with_template(&file, |c| {
            let ir =
                c.ir.as_ref()
                    .expect("with_template passes compiled templates only");
            let text = match format {
                GraphFormat::Mermaid => graph::mermaid(ir, &c.diagnostics),
                GraphFormat::Dot => graph::dot(ir, &c.diagnostics),
            };
            print_out(&text)
        }),
        Command::Gen { file, runtime_path } => with_template(&file, |c| {
            let rt = orch_codegen::emit::runtime_path(&runtime_path)
                .expect("clap checked the runtime path");
            print_out(&orch_codegen::emit::pretty(
                c,
                orch_codegen::emit::Origin::File(&file),
                &rt,
            ))
        }),
        Command::Simulate { file, events } => simulate_cmd(&file, events.as_deref()),
        Command::Schema => print_out(orch_codegen::TEMPLATE_SCHEMA),
        Command::Lsp => match orch_cli::lsp::run_stdio() {
            Ok(()) => OK,
            Err(e) => {
                eprintln!("error: orch lsp: {e}");
                USAGE_OR_IO
            }
        },
        Command::Mcp(args) => mcp::run(*args),
        Command::Policy(args) => policy::run(*args),
        Command::Resolve(args) => resolve::run(*args),
        Command::Approvals(args) => approvals::run(*args),
        Command::Console(args) => console_command::run(&args),
        Command::Audit {
            action:
                AuditAction::Verify {
                    log,
                    expect_head,
                    expect_count,
                    public_key,
                    format,
                },
        } => {
            let anchor = orch_agent::audit::Anchor {
                head: expect_head.map(|h| h.trim().to_ascii_lowercase()),
                count: expect_count,
            };
            audit_verify_cmd(&log, &anchor, &public_key, format)
        }
        Command::Audit {
            action: AuditAction::Keygen { prefix },
        } => audit_keygen_cmd(&prefix),
        Command::Replay {
            file,
            log,
            template,
            format,
        } => match (log, template, format) {
            (None, Some(template), format) => whatif_command::whatif_cmd(&template, &file, format),
            (Some(_), Some(_), _) => {
                eprintln!("error: with --template, give the log alone: `orch replay LOG --template NEW.json`");
                USAGE_OR_IO
            }
            (None, None, _) => {
                eprintln!("error: give the template and the log (`orch replay TEMPLATE LOG`), or the log and --template NEW.json");
                USAGE_OR_IO
            }
            (Some(_), None, whatif_command::ReplayFormat::Sarif) => {
                eprintln!("error: --format sarif is for a what-if replay (--template)");
                USAGE_OR_IO
            }
            (Some(log), None, whatif_command::ReplayFormat::Json) => {
                replay_cmd(&file, &log, Format::Json)
            }
            (Some(log), None, whatif_command::ReplayFormat::Human) => {
                replay_cmd(&file, &log, Format::Human)
            }
        },
        Command::Learn(args) => learn_command::run(&args),
        Command::CheckTrace {
            file,
            trace,
            format,
        } => check_trace_cmd(&file, &trace, format),
        Command::Verify {
            files,
            format,
            permissive,
            available,
            max_states,
            max_work,
        } => verify_cmd(&files, format, permissive, available, max_states, max_work),
    };
    ExitCode::from(code)
}

/// Writes to stdout; a closed pipe (`orch gen x | head`) is not an error.
fn print_out(text: &str) -> u8 {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => OK,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => OK,
        Err(e) => {
            eprintln!("error: cannot write the output: {e}");
            USAGE_OR_IO
        }
    }
}

fn compile_file(path: &str) -> Result<(String, Compiled), input::InputError> {
    compile_file_as(
        path,
        &Pipeline::Check(orch_codegen::CheckOptions::default()),
    )
}

/// What a command compiles a template for.
pub(crate) enum Pipeline {
    /// `orch check` and the commands that run the machine.
    Check(orch_codegen::CheckOptions),
    /// `orch verify`: the analysis is the exploration with these options.
    Verify(orch_codegen::verify::explore::Options),
}

fn compile_file_as(
    path: &str,
    pipeline: &Pipeline,
) -> Result<(String, Compiled), input::InputError> {
    let source = input::read_text(path)?;
    let fallback = orch_codegen::fallback_name(Path::new(path));
    let json = orch_codegen::Source::Json {
        text: &source,
        fallback_name: fallback.as_deref(),
    };
    let compiled = match pipeline {
        Pipeline::Check(options) => orch_codegen::compile(json, *options),
        Pipeline::Verify(options) => orch_codegen::compile_and_verify(json, options),
    };
    Ok((source, compiled))
}

/// Compiles `path` and runs `f` on it; on I/O problems or template errors prints them.
fn with_template(path: &str, f: impl FnOnce(&Compiled) -> u8) -> u8 {
    with_template_as(
        path,
        &Pipeline::Check(orch_codegen::CheckOptions::default()),
        |_, compiled| f(compiled),
    )
}

/// [`with_template`] compiled for `pipeline` (`orch verify` and `orch simulate` decide
/// the properties themselves: a violated one does not stop them); `f` also gets the
/// template's text.
pub(crate) fn with_template_as(
    path: &str,
    pipeline: &Pipeline,
    f: impl FnOnce(&str, &Compiled) -> u8,
) -> u8 {
    let (source, compiled) = match compile_file_as(path, pipeline) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return USAGE_OR_IO;
        }
    };
    let text = diagnostic::SourceText::new(&source);
    if compiled.ir.is_none() {
        let color = std::io::stderr().is_terminal();
        for d in &compiled.diagnostics {
            eprintln!("{}", diagnostic::render(d, path, &text, color));
        }
        let n = compiled.diagnostics.iter().filter(|d| d.is_error()).count();
        eprintln!("error: {path} has {n} error(s); run `orch check {path}` for details");
        return FOUND_ERRORS;
    }
    for d in &compiled.diagnostics {
        eprintln!("{}", diagnostic::one_line(d, path, &text));
    }
    f(&source, &compiled)
}

fn verify_cmd(
    files: &[String],
    format: Format,
    permissive: bool,
    available: Option<Vec<String>>,
    max_states: usize,
    max_work: u64,
) -> u8 {
    let mut worst = OK;
    for path in files {
        let pipeline = Pipeline::Verify(verify::options(
            permissive,
            available.clone(),
            max_states,
            max_work,
        ));
        let code = with_template_as(path, &pipeline, |source, compiled| {
            let (found, props) = match compiled.verification() {
                Some(Ok(v)) => (&v.exploration, &v.properties[..]),
                Some(Err(e)) => {
                    eprintln!("error: {path}: {e:?}");
                    return FOUND_ERRORS;
                }
                None => {
                    eprintln!("error: {path}: the template could not be loaded");
                    return FOUND_ERRORS;
                }
            };
            let ir = compiled.ir.as_ref();
            let text = match format {
                Format::Json => {
                    let findings = orch_codegen::verify::report::findings(found, props);
                    verify::json_lines(path, &findings).join("\n") + "\n"
                }
                Format::Human => {
                    verify::properties_human(path, source, ir, props)
                        + &verify::human(path, source, ir, found)
                }
            };
            let property_fails = props.iter().any(|p| p.holds != Some(true));
            match print_out(&text) {
                OK if verify::has_findings(found) || property_fails => FOUND_ERRORS,
                code => code,
            }
        });
        worst = worst.max(code);
    }
    worst
}

/// The pipeline of `orch simulate`: the properties are left to it.
const LEAVE_PROPERTIES: Pipeline = Pipeline::Check(orch_codegen::CheckOptions {
    prove_properties: false,
    surface: orch_codegen::Surface::Agent,
});

fn simulate_cmd(path: &str, events: Option<&str>) -> u8 {
    with_template_as(path, &LEAVE_PROPERTIES, |_, compiled| {
        let Some(machine) = compiled.to_machine() else {
            eprintln!("error: {path}: the template could not be loaded");
            return FOUND_ERRORS;
        };
        let mut session = machine.session();
        let stdin = std::io::stdin();
        if events.is_none() && stdin.is_terminal() {
            let mut out = std::io::stdout();
            return match simulate::interactive(&mut session, stdin.lock(), &mut out) {
                Ok(()) => OK,
                Err(e) => {
                    eprintln!("error: {e}");
                    USAGE_OR_IO
                }
            };
        }
        let (name, mut input): (String, Box<dyn std::io::BufRead>) = match events {
            None | Some("-") => ("<stdin>".to_owned(), Box::new(stdin.lock())),
            Some(p) => match input::open_text(p) {
                Ok(f) => (p.to_owned(), Box::new(std::io::BufReader::new(f))),
                Err(e) => {
                    eprintln!("error: {e}");
                    return USAGE_OR_IO;
                }
            },
        };
        let mut out = std::io::stdout().lock();
        match simulate::run(&mut session, &name, &mut input, &mut out) {
            Ok(()) => OK,
            // A closed pipe (`orch simulate t.json ev | head`) is not an error.
            Err(simulate::RunError::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => OK,
            Err(e) => {
                eprintln!("error: {}", printable(&e.to_string()));
                USAGE_OR_IO
            }
        }
    })
}
