//! Lowering: a checked template, its names resolved, to the [`Ir`]. Decides nothing:
//! every rule has been applied by then.

use crate::ident;
use crate::ir::{Ir, IrGate, IrLost, IrStep, IrStepSpans, IrTool, ToolBits};
use crate::limits::{MAX_TEMPLATE_STEPS, MAX_TOOLS};
use crate::model::{Step, Template};
use crate::resolved::{Parts, StepInfo};
use orch_runtime::compiled::is_pattern;
use std::collections::HashMap;

/// Builds the IR.
pub(crate) fn lower(p: Parts<'_>) -> Ir {
    let idents: HashMap<&str, &String> = p
        .step_names
        .iter()
        .map(|n| n.value.as_str())
        .zip(&p.step_idents)
        .collect();
    let step_ident =
        |name: &str| -> String { idents.get(name).map_or_else(String::new, |s| (*s).clone()) };
    let patterns = |s: &StepInfo<'_>, allow: bool| -> Vec<String> {
        s.patterns
            .iter()
            .filter(|(_, is_allow, _)| *is_allow == allow)
            .map(|(p, _, _)| p.value.clone())
            .collect()
    };
    Ir {
        name: p.machine.name,
        module: p.machine.module,
        description: p.description,
        tools: p
            .tools
            .iter()
            .zip(p.tool_idents)
            .map(|(t, ident)| IrTool {
                name: t.value.clone(),
                ident,
                span: t.span,
            })
            .collect(),
        steps: p
            .steps
            .iter()
            .map(|s| IrStep {
                name: s.name.to_owned(),
                ident: s
                    .model
                    .name
                    .as_ref()
                    .map(|n| step_ident(&n.value))
                    .unwrap_or_default(),
                description: s.model.description.clone(),
                conditions: s.conditions.clone(),
                static_set: s.static_set.clone(),
                allow_all: s.allow_all,
                allow_patterns: patterns(s, true),
                deny_patterns: patterns(s, false),
                sequence: s.sequence.clone(),
                reset: s.reset,
                approve: s.approve.clone(),
                spans: IrStepSpans {
                    step: s.model.span,
                    name: s.model.name.as_ref().map_or(s.model.span, |n| n.span),
                    conditions: s.condition_spans.clone(),
                },
            })
            .collect(),
        default_step: p.default_step,
        history: p.history,
        contains: p.contains,
        regexes: p.regexes,
        max_rounds: p.max_rounds,
        approve: p.approve,
        lost: p.lost,
        properties: p.properties,
        arg_rules: p.arg_rules,
        memory: p.memory,
    }
}

/// A machine with the template's tool and step names and no behaviour (every step
/// without conditions, every tool allowed), for front ends to emit after an error, so
/// that code using `Tool::X`/`Step::Y` does not produce a cascade of unrelated errors.
pub fn placeholder(t: &Template) -> Ir {
    let mut tools: Vec<IrTool> = Vec::new();
    let mentions = t.steps.iter().flat_map(Step::tool_mentions);
    for n in t.universe.iter().flatten().chain(mentions) {
        let Some(ident) = ident::variant(&n.value) else {
            continue;
        };
        if !is_pattern(&n.value) && !tools.iter().any(|t| t.ident == ident) {
            tools.push(IrTool {
                name: n.value.clone(),
                ident,
                span: n.span,
            });
        }
    }
    let mut steps: Vec<IrStep> = Vec::new();
    for s in &t.steps {
        let Some(name) = &s.name else { continue };
        let Some(ident) = ident::variant(&name.value) else {
            continue;
        };
        if steps.iter().any(|x| x.ident == ident) {
            continue;
        }
        steps.push(IrStep {
            name: name.value.clone(),
            ident,
            description: s.description.clone(),
            conditions: Vec::new(),
            static_set: ToolBits::full(tools.len().min(MAX_TOOLS)),
            allow_all: true,
            allow_patterns: Vec::new(),
            deny_patterns: Vec::new(),
            sequence: Vec::new(),
            reset: 0,
            approve: IrGate::default(),
            spans: IrStepSpans {
                step: s.span,
                name: name.span,
                conditions: Vec::new(),
            },
        });
    }
    let name = t
        .name
        .as_ref()
        .map_or_else(|| "machine".to_owned(), |n| n.value.clone());
    tools.truncate(MAX_TOOLS);
    steps.truncate(MAX_TEMPLATE_STEPS);
    Ir {
        module: ident::module(&name).unwrap_or_else(|| "machine".to_owned()),
        name,
        description: t.description.clone(),
        tools,
        steps,
        default_step: None,
        history: 10,
        contains: Vec::new(),
        regexes: Vec::new(),
        max_rounds: None,
        approve: IrGate::default(),
        lost: IrLost::default(),
        properties: Vec::new(),
        arg_rules: Vec::new(),
        memory: Default::default(),
    }
}
