//! The compiler's pipeline, written once: every front end (build.rs through
//! [`crate::Builder`], the `orchestration!` macro in both forms, the `orch` CLI, the
//! language server, the Python and npm packages) calls [`compile`], which runs these
//! stages in this order, each once:
//!
//! ```text
//! source ─ parse ─> model::Template ─ check ─> resolved names ─ lower ─> Ir
//!        ─ build ─> tables + DynMachine ─ analyse ─> W007/W008/E023 (or orch verify's exploration)
//!        ─ finish ─> Compiled { template, ir, machine, diagnostics }
//! ```
//!
//! - **parse** (`parse::json`; the macro parses its DSL tokens itself and hands over a
//!   [`Source::Template`]): the model, every node with its [`crate::Span`]; E001–E003,
//!   E009 shapes, E021.
//! - **check** (`check`): judges only — every rule of semantics §3 that reads the
//!   template, resolving tool and step names (errors and the syntactic warnings
//!   W001–W006).
//! - **lower** (`lower`): the resolved template as an [`Ir`], spans kept; then the
//!   checks of the surface the template runs on (`surface`: W009, E024).
//! - **build**: the run-time tables and the [`DynMachine`] from the IR, once (each
//!   regex compiled once, by the checks); E019 when the tables are too large.
//! - **analyse** (`analyse`): the checks that run the machine — W007/W008 and
//!   E023 within bounds — or, for `orch verify` ([`compile_and_verify`]), the full exploration
//!   and the properties, kept in [`Compiled::verification`].
//! - **finish**: the template's allow list applied, diagnostics in source order, the
//!   IR and machine kept only when nothing is an error.

use crate::diagnostic::Diagnostic;
use crate::ir::Ir;
use crate::model::Template;
use crate::verify::explore::{self, Exploration};
use crate::verify::messages::MessageError;
use crate::verify::properties::PropertyFinding;
use orch_runtime::dynamic::DynMachine;
use std::borrow::Cow;

pub use crate::surface::Surface;

/// What to compile.
#[derive(Clone, Debug)]
pub enum Source<'a> {
    /// The text of a `template.json`. `fallback_name` names the machine when the
    /// template has neither `agentId` nor `name` (see [`crate::fallback_name`]).
    Json {
        /// The JSON text.
        text: &'a str,
        /// The machine's name when the template has none.
        fallback_name: Option<&'a str>,
    },
    /// A template a front end has already read (the `orchestration!` macro's DSL, a
    /// template built in code), with what reading it found.
    Template {
        /// The template.
        template: Box<Template>,
        /// What reading it found (errors make the result have no IR).
        diagnostics: Vec<Diagnostic>,
    },
}

/// How a template is checked ([`compile`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckOptions {
    /// Decide the template's properties (E023, within the bounds of W007). `orch verify`
    /// turns this off to decide them itself, without bounds, and `orch simulate` to
    /// replay a violating witness.
    pub prove_properties: bool,
    /// Where the template will run: the checks that depend on it (W009, E024).
    pub surface: Surface,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            prove_properties: true,
            surface: Surface::Agent,
        }
    }
}

/// The result of compiling one template.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The IR, when there was no error.
    pub ir: Option<Ir>,
    /// Every diagnostic, in source order.
    pub diagnostics: Vec<Diagnostic>,
    /// The template as read, when it could be read (positions for tools that map back
    /// to the source, the placeholder machine after an error).
    template: Option<Template>,
    /// The machine built from the IR (each regex compiled once), when there was no
    /// error.
    machine: Option<DynMachine>,
    /// `orch verify`'s exploration and properties ([`compile_and_verify`] only).
    verification: Option<Result<Verification, MessageError>>,
    /// The options it was checked with.
    options: CheckOptions,
}

/// What [`compile_and_verify`] found: every reachable state explored with the caller's options, and
/// each property decided on the same host model.
#[derive(Clone, Debug)]
pub struct Verification {
    /// The exploration (steps reachable, sequences completing, witnesses).
    pub exploration: Exploration,
    /// Each property of the template, decided.
    pub properties: Vec<PropertyFinding>,
}

impl Compiled {
    /// Was there an error?
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The options it was checked with (which surface's checks ran:
    /// [`CheckOptions::surface`]).
    pub fn options(&self) -> CheckOptions {
        self.options
    }

    /// The template as read (`None` when the source could not be read at all).
    pub fn template(&self) -> Option<&Template> {
        self.template.as_ref()
    }

    /// The machine built from the IR (its tables are the ones the generated code holds),
    /// when there was no error.
    pub fn machine(&self) -> Option<&DynMachine> {
        self.machine.as_ref()
    }

    /// A machine to run at run time (the same tables the generated code holds).
    pub fn to_machine(&self) -> Option<DynMachine> {
        self.machine.clone()
    }

    /// What [`compile_and_verify`] found (`None` after [`compile`], or when the template has
    /// errors); `Err` when the message conditions could not be analysed within the
    /// options' work.
    pub fn verification(&self) -> Option<Result<&Verification, &MessageError>> {
        self.verification.as_ref().map(Result::as_ref)
    }

    /// The IR; after an error, a machine with the template's names and no behaviour
    /// (every step without conditions, every tool allowed), so that generated code using its `Tool` and
    /// `Step` variants reports nothing else. `None` only when nothing could be read.
    pub fn ir_or_placeholder(&self) -> Option<Cow<'_, Ir>> {
        match (&self.ir, &self.template) {
            (Some(ir), _) => Some(Cow::Borrowed(ir)),
            (None, Some(t)) => Some(Cow::Owned(crate::lower::placeholder(t))),
            (None, None) => None,
        }
    }
}

/// Compiles a template: parse, check, lower, build, analyse and finish, each once, in
/// order (the [crate docs](crate) draw the pipeline).
pub fn compile(source: Source<'_>, options: CheckOptions) -> Compiled {
    run(source, options, Analysis::Lints)
}

/// Compiles a template for `orch verify`: the stages of [`compile`], the analysis being
/// the exploration of every reachable state with `options` and the template's
/// properties decided on the same host model ([`Compiled::verification`]). The bounded
/// W007/W008/E023 are not reported: the verification says the same, unbounded, with
/// witnesses.
pub fn compile_and_verify(source: Source<'_>, options: &explore::Options) -> Compiled {
    run(
        source,
        CheckOptions {
            prove_properties: false,
            ..CheckOptions::default()
        },
        Analysis::Verify(options),
    )
}

/// The analyse stage's work.
enum Analysis<'a> {
    /// The bounded checks (W007, W008, E023 with `prove_properties`).
    Lints,
    /// `orch verify`'s exploration and properties.
    Verify(&'a explore::Options),
}

fn run(source: Source<'_>, options: CheckOptions, analysis: Analysis<'_>) -> Compiled {
    let (template, read) = parse(source);
    let Some(template) = template else {
        return Compiled {
            ir: None,
            diagnostics: crate::check::allow_and_sort(&[], read),
            template: None,
            machine: None,
            verification: None,
            options,
        };
    };
    // The later stages judge what the checks resolved: a template that read with
    // errors is still checked, built and analysed as far as its own checks allow (every
    // finding is reported at once), but yields no IR.
    let resolved = crate::check::check(&template);
    let mut diagnostics = resolved.diagnostics;
    let ir = crate::lower::lower(resolved.parts);
    diagnostics.extend(crate::surface::surface_lints(&ir, options.surface));
    let machine = build(&ir, resolved.regexes, &mut diagnostics);
    let mut verification = None;
    // A step without a name (E003 when read) is left out of the analysis.
    let named = template.steps.iter().all(|s| s.name.is_some());
    if let Some(machine) = machine.as_ref().filter(|_| named) {
        match analysis {
            Analysis::Lints => diagnostics.extend(crate::analyse::analyse(
                &ir,
                machine,
                &diagnostics,
                options.prove_properties,
            )),
            Analysis::Verify(options) => {
                verification = Some(verification_of(machine, &ir, options));
            }
        }
    }
    let read_cleanly = !read.iter().any(Diagnostic::is_error);
    let mut all = read;
    all.extend(diagnostics);
    let diagnostics = crate::check::allow_and_sort(&template.allow, all);
    let ok = read_cleanly && named && !diagnostics.iter().any(Diagnostic::is_error);
    Compiled {
        machine: machine.filter(|_| ok),
        ir: ok.then_some(ir),
        diagnostics,
        template: Some(template),
        verification: verification.filter(|_| ok),
        options,
    }
}

/// The parse stage.
fn parse(source: Source<'_>) -> (Option<Template>, Vec<Diagnostic>) {
    match source {
        Source::Json {
            text,
            fallback_name,
        } => crate::parse::json::parse(text, fallback_name),
        Source::Template {
            template,
            diagnostics,
        } => (Some(*template), diagnostics),
    }
}

/// The build stage: `ir`'s tables (E019 when too large) and, when nothing so far is an
/// error, its machine with the regexes the checks compiled.
fn build(
    ir: &Ir,
    regexes: Vec<orch_runtime::compiled::MessageRegex>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<DynMachine> {
    let tables = ir.to_tables();
    diagnostics.extend(crate::check::table_size(ir, &tables));
    if diagnostics.iter().any(Diagnostic::is_error) {
        return None;
    }
    DynMachine::with_regexes(tables, regexes).ok()
}

/// `orch verify`'s analysis: the host model prepared once for the exploration and the
/// properties.
fn verification_of(
    machine: &DynMachine,
    ir: &Ir,
    options: &explore::Options,
) -> Result<Verification, MessageError> {
    let host = explore::Host::new(machine, options)?;
    Ok(Verification {
        exploration: explore::explore_with(machine, options, &host),
        properties: crate::verify::properties::check_with(machine, &ir.properties, options, &host),
    })
}
