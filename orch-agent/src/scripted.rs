//! A scripted model for tests and examples: it answers each round (model call) with the next
//! planned response and remembers every request it was sent.

use crate::model::{
    EventList, FinishReason, Model, ModelError, ModelEvent, ModelRequest, ToolCall,
};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// One planned answer of a [`ScriptedModel`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Planned {
    /// Text to stream.
    pub text: String,
    /// Tool calls to make: (name, JSON arguments).
    pub calls: Vec<(String, String)>,
    /// Tokens to report: (prompt, completion).
    pub usage: (u64, u64),
    /// Ids given to calls by their position in `calls` (the others get `call_<n>`).
    pub ids: Vec<(usize, String)>,
}

impl Planned {
    /// A text answer.
    pub fn text(text: &str) -> Self {
        Planned {
            text: text.to_owned(),
            ..Planned::default()
        }
    }

    /// A call of `tool` with `arguments` (JSON text).
    pub fn call(tool: &str, arguments: &str) -> Self {
        Planned {
            calls: vec![(tool.to_owned(), arguments.to_owned())],
            ..Planned::default()
        }
    }

    /// Adds another tool call to the same round.
    #[must_use]
    pub fn and_call(mut self, tool: &str, arguments: &str) -> Self {
        self.calls.push((tool.to_owned(), arguments.to_owned()));
        self
    }

    /// Gives the last call added the id `id` (a model that reuses ids is tried with
    /// this).
    #[must_use]
    pub fn with_id(mut self, id: &str) -> Self {
        let last = self.calls.len().saturating_sub(1);
        self.ids.push((last, id.to_owned()));
        self
    }

    /// Sets the tokens this round reports.
    #[must_use]
    pub fn usage(mut self, prompt: u64, completion: u64) -> Self {
        self.usage = (prompt, completion);
        self
    }
}

/// A model that plays back planned answers, one per round (and answers "(no more
/// planned responses)" when the plan runs out).
#[derive(Clone, Default)]
pub struct ScriptedModel {
    plan: Arc<Mutex<VecDeque<Planned>>>,
    requests: Arc<Mutex<Vec<ModelRequest>>>,
    calls: Arc<Mutex<u64>>,
}

impl ScriptedModel {
    /// A model that will answer with `plan`, in order.
    pub fn new(plan: impl IntoIterator<Item = Planned>) -> Self {
        ScriptedModel {
            plan: Arc::new(Mutex::new(plan.into_iter().collect())),
            ..ScriptedModel::default()
        }
    }

    /// Appends planned answers.
    pub fn push(&self, more: impl IntoIterator<Item = Planned>) {
        self.plan
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(more);
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Model for ScriptedModel {
    type Stream = EventList;

    async fn complete(&self, request: ModelRequest) -> Result<EventList, ModelError> {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(request);
        let planned = self
            .plan
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
            .unwrap_or_else(|| Planned::text("(no more planned responses)"));
        let mut n = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        let mut events = Vec::new();
        // Stream the text in two pieces, as a provider would (split on a character
        // boundary: text is not bytes).
        let mut half = planned.text.len() / 2;
        while !planned.text.is_char_boundary(half) {
            half += 1;
        }
        let (a, b) = planned.text.split_at(half);
        for part in [a, b] {
            if !part.is_empty() {
                events.push(ModelEvent::TextDelta(part.to_owned()));
            }
        }
        let has_calls = !planned.calls.is_empty();
        for (position, (name, arguments)) in planned.calls.into_iter().enumerate() {
            *n += 1;
            let given = planned.ids.iter().rev().find(|(p, _)| *p == position);
            events.push(ModelEvent::ToolCall(ToolCall {
                id: given.map_or_else(|| format!("call_{n}"), |(_, id)| id.clone()),
                name,
                arguments,
            }));
        }
        events.push(ModelEvent::Usage {
            prompt: planned.usage.0,
            completion: planned.usage.1,
        });
        events.push(ModelEvent::Finish(if has_calls {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        }));
        Ok(EventList::new(events))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn non_ascii_text_streams_in_two_whole_pieces() {
        use crate::{Model, ModelEvent, ModelRequest, ModelStream, ToolChoice};
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for text in ["é", "日本語のテキスト", "a🚀b", "ÅÅÅ"] {
            let model = super::ScriptedModel::new([super::Planned::text(text)]);
            let request = ModelRequest {
                messages: Vec::new(),
                tools: Vec::new(),
                tool_choice: ToolChoice::Auto,
            };
            let joined: String = rt.block_on(async {
                let mut stream = model.complete(request).await.unwrap();
                let mut out = String::new();
                while let Some(Ok(e)) = stream.next().await {
                    if let ModelEvent::TextDelta(t) = e {
                        out.push_str(&t);
                    }
                }
                out
            });
            assert_eq!(joined, text);
        }
    }
}
