//! The build.rs API.

use crate::diagnostic::{self, Diagnostic};
use crate::emit::{self, Origin};
use std::fmt;
use std::path::{Path, PathBuf};

/// Compiles templates to Rust modules in `$OUT_DIR/orch/`, for
/// `orch::include_machine!`.
///
/// ```no_run
/// // build.rs (as `orch_build::Builder`)
/// orch_codegen::Builder::new()
///     .template("agents/cognitive-reasoner/template.json")
///     .compile()
///     .expect("orchestration templates");
/// ```
///
/// For each template it prints `cargo:rerun-if-changed=<path>` and every warning as
/// `cargo:warning=path:line:col: warning[W…]: …`. On an error nothing is written and
/// the `Err` renders every diagnostic with its `path:line:column` and source snippet
/// (its `Debug` is that text too, so `.expect(..)` shows it as is).
#[derive(Clone, Debug, Default)]
pub struct Builder {
    templates: Vec<PathBuf>,
    out_dir: Option<PathBuf>,
    deny_warnings: bool,
    cargo: Option<bool>,
    runtime: Option<String>,
}

/// What [`Builder::compile`] produced.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// One entry per template: (machine name, module name, generated file).
    pub machines: Vec<(String, String, PathBuf)>,
    /// The warnings, rendered one per line.
    pub warnings: Vec<String>,
}

/// Why [`Builder::compile`] failed: every error (and, under `deny_warnings`, warning),
/// rendered, and the same as data.
#[derive(Clone, PartialEq, Eq)]
pub struct BuildError {
    /// What kind of failure it is.
    pub kind: BuildErrorKind,
    /// The rendered diagnostics and I/O problems.
    pub rendered: String,
    /// How many errors.
    pub errors: usize,
    /// The templates' diagnostics that failed the build (errors, and warnings under
    /// `deny_warnings`), each with the template's path as shown.
    pub diagnostics: Vec<(String, Diagnostic)>,
}

/// The kinds of [`BuildError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildErrorKind {
    /// The builder is set up wrongly: a runtime path that is not a Rust path, no
    /// `OUT_DIR` and no `out_dir`.
    Config,
    /// A template could not be read (missing, not UTF-8), has errors (see
    /// [`BuildError::diagnostics`]), or two templates compile to one machine.
    Templates,
    /// A generated file could not be written.
    Io,
}

impl BuildError {
    fn config(rendered: String) -> Self {
        BuildError {
            kind: BuildErrorKind::Config,
            rendered,
            errors: 1,
            diagnostics: Vec::new(),
        }
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rendered)
    }
}

impl fmt::Debug for BuildError {
    /// The rendered text, so that `.expect()` in build.rs prints readable diagnostics.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} error(s) in orchestration templates\n\n{}",
            self.errors, self.rendered
        )
    }
}

impl std::error::Error for BuildError {}

impl Builder {
    /// A builder with no templates.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a template file (relative paths are relative to the package root, where
    /// build scripts run).
    #[must_use]
    pub fn template(mut self, path: impl AsRef<Path>) -> Self {
        self.templates.push(path.as_ref().to_owned());
        self
    }

    /// Adds several template files.
    #[must_use]
    pub fn templates<P: AsRef<Path>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
        self.templates
            .extend(paths.into_iter().map(|p| p.as_ref().to_owned()));
        self
    }

    /// Where to write the modules (default: `$OUT_DIR/orch`).
    #[must_use]
    pub fn out_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.out_dir = Some(dir.as_ref().to_owned());
        self
    }

    /// Treat warnings as errors.
    #[must_use]
    pub fn deny_warnings(mut self, yes: bool) -> Self {
        self.deny_warnings = yes;
        self
    }

    /// Print `cargo:` directives (default: when running under cargo, i.e. `OUT_DIR` is set).
    #[must_use]
    pub fn cargo_directives(mut self, yes: bool) -> Self {
        self.cargo = Some(yes);
        self
    }

    /// The path the generated code names the runtime by (default
    /// [`emit::DEFAULT_RUNTIME`], `::orch`): `"::orch_runtime"` for a crate that
    /// depends on the runtime crate alone, or a re-export such as `"crate::orch"`.
    #[must_use]
    pub fn runtime_path(mut self, path: impl Into<String>) -> Self {
        self.runtime = Some(path.into());
        self
    }

    /// Compiles every template; writes nothing unless all succeed.
    pub fn compile(self) -> Result<Report, BuildError> {
        let runtime = self.runtime.as_deref().unwrap_or(emit::DEFAULT_RUNTIME);
        let Some(rt) = emit::runtime_path(runtime) else {
            return Err(BuildError::config(format!(
                "error: `runtime_path(\"{runtime}\")` is not a Rust path (expected something like `::orch`)\n"
            )));
        };
        let cargo = self
            .cargo
            .unwrap_or_else(|| std::env::var_os("OUT_DIR").is_some());
        let out_dir = match (&self.out_dir, std::env::var_os("OUT_DIR")) {
            (Some(d), _) => d.clone(),
            (None, Some(d)) => PathBuf::from(d).join("orch"),
            (None, None) => return Err(BuildError::config(
                "error: OUT_DIR is not set (not running in a build script); call `.out_dir(..)`"
                    .into(),
            )),
        };
        let mut rendered = String::new();
        let mut errors = 0usize;
        let mut failed: Vec<(String, Diagnostic)> = Vec::new();
        let mut report = Report::default();
        let mut outputs: Vec<(Vec<String>, String, String, String)> = Vec::new();
        let mut taken: std::collections::HashMap<String, String> = std::collections::HashMap::new();
        for path in &self.templates {
            let shown = path.display().to_string();
            if cargo {
                println!("cargo:rerun-if-changed={}", one_cargo_line(&shown));
            }
            let source = match read_template(path, &shown) {
                Ok(source) => source,
                Err(why) => {
                    errors += 1;
                    rendered.push_str(&why);
                    continue;
                }
            };
            let fallback = crate::fallback_name(path);
            let compiled = crate::compile_json(&source, fallback.as_deref());
            let fallback = fallback.clone();
            let text = diagnostic::SourceText::new(&source);
            for d in &compiled.diagnostics {
                let fatal = d.is_error() || self.deny_warnings;
                if fatal {
                    errors += 1;
                    rendered.push_str(&diagnostic::render(d, &shown, &text, false));
                    rendered.push('\n');
                    failed.push((shown.clone(), d.clone()));
                } else {
                    let line = diagnostic::one_line(d, &shown, &text);
                    if cargo {
                        println!("cargo:warning={}", one_cargo_line(&line));
                    }
                    report.warnings.push(line);
                }
            }
            let Some(ir) = &compiled.ir else { continue };
            if compiled
                .diagnostics
                .iter()
                .any(|d: &Diagnostic| self.deny_warnings && !d.is_error())
            {
                continue;
            }
            let code = emit::pretty(&compiled, Origin::File(&shown), &rt);
            // `include_machine!` finds it by module name, by machine name, or by the
            // template's file name (its directory for `template.json`).
            let mut keys = vec![ir.module.clone()];
            for key in [Some(ir.name.clone()), fallback] {
                if let Some(key) = key.filter(|k| is_file_key(k) && !keys.contains(k)) {
                    keys.push(key);
                }
            }
            // Two templates must not share a file (or `include_machine!` key): the second
            // would silently replace the first.
            let mut clash = None;
            for key in &keys {
                if let Some(other) = taken.get(key) {
                    clash = Some((key.clone(), other.clone()));
                    break;
                }
            }
            if let Some((key, other)) = clash {
                errors += 1;
                rendered.push_str(&format!(
                    "error: {other} and {shown} both compile to the machine `{key}` (`include_machine!(\"{key}\")` could not tell them apart)\n  = help: give one of them another `agentId`\n"
                ));
                continue;
            }
            for key in &keys {
                taken.insert(key.clone(), shown.clone());
            }
            outputs.push((keys, code, ir.name.clone(), ir.module.clone()));
        }
        if errors > 0 {
            return Err(BuildError {
                kind: BuildErrorKind::Templates,
                rendered,
                errors,
                diagnostics: failed,
            });
        }
        write_outputs(&out_dir, outputs, &mut report)?;
        Ok(report)
    }
}

/// The text of the template at `path` (`shown` in messages), or the error line to
/// render.
fn read_template(path: &Path, shown: &str) -> Result<String, String> {
    match std::fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|e| {
            format!(
                "error: {shown}: not UTF-8 text (invalid byte at offset {})\n",
                e.utf8_error().valid_up_to()
            )
        }),
        Err(e) => Err(format!("error: {shown}: cannot read the template: {e}\n")),
    }
}

/// Writes each generated module under each of its keys in `out_dir` (a file whose
/// content is unchanged is left alone, keeping its timestamp, so dependents are not
/// rebuilt), and lists the machines in `report`.
fn write_outputs(
    out_dir: &Path,
    outputs: Vec<(Vec<String>, String, String, String)>,
    report: &mut Report,
) -> Result<(), BuildError> {
    let io = |e: std::io::Error, what: &Path| BuildError {
        kind: BuildErrorKind::Io,
        rendered: format!("error: cannot write {}: {e}\n", what.display()),
        errors: 1,
        diagnostics: Vec::new(),
    };
    std::fs::create_dir_all(out_dir).map_err(|e| io(e, out_dir))?;
    for (keys, code, name, module) in outputs {
        let mut first = None;
        for key in keys {
            let file = out_dir.join(format!("{key}.rs"));
            if std::fs::read_to_string(&file).ok().as_deref() != Some(code.as_str()) {
                std::fs::write(&file, &code).map_err(|e| io(e, &file))?;
            }
            first.get_or_insert(file);
        }
        if let Some(file) = first {
            report.machines.push((name, module, file));
        }
    }
    Ok(())
}

/// `text` as one line for a `cargo:` directive: a newline (or any control character)
/// in a name or a path must not end the directive and start another one that cargo
/// would obey (`cargo:rustc-cfg=...`), so each is written as an escape.
fn one_cargo_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Can `name` be used as a file name in `$OUT_DIR/orch/`?
fn is_file_key(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}
