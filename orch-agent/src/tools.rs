//! Tool implementations the agent can execute: name, description, JSON-schema
//! parameters and an async handler.

use crate::model::ToolSpec;
use std::future::Future;
use std::pin::Pin;

/// What a handler returns: the tool's output, or an error message for the model.
pub type ToolResult = Result<String, String>;

type Handler = Box<
    dyn Fn(serde_json::Value) -> Pin<Box<dyn Future<Output = ToolResult> + Send>> + Send + Sync,
>;

/// A registered tool.
pub struct Tool {
    /// How it is offered to the model.
    pub spec: ToolSpec,
    handler: Handler,
}

impl Tool {
    /// Runs the tool.
    pub async fn call(&self, arguments: serde_json::Value) -> ToolResult {
        (self.handler)(arguments).await
    }
}

/// The tools the host can execute.
///
/// ```
/// let mut tools = orch_agent::ToolRegistry::new();
/// tools.register(
///     "search",
///     "Search the corpus",
///     serde_json::json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
///     |args| async move { Ok(format!("results for {}", args["query"])) },
/// );
/// assert!(tools.get("search").is_some());
/// ```
#[derive(Default)]
pub struct ToolRegistry {
    tools: Vec<Tool>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers (or replaces) a tool.
    pub fn register<F, Fut>(
        &mut self,
        name: &str,
        description: &str,
        parameters: serde_json::Value,
        handler: F,
    ) -> &mut Self
    where
        F: Fn(serde_json::Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ToolResult> + Send + 'static,
    {
        let tool = Tool {
            spec: ToolSpec {
                name: name.to_owned(),
                description: description.to_owned(),
                parameters,
            },
            handler: Box::new(move |args| Box::pin(handler(args))),
        };
        match self.tools.iter_mut().find(|t| t.spec.name == name) {
            Some(t) => *t = tool,
            None => self.tools.push(tool),
        }
        self
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.spec.name == name)
    }

    /// Every tool's name, in registration order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.spec.name.as_str())
    }

    /// The specs of the tools whose names are in `names`, in registration order.
    pub fn specs<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Vec<ToolSpec> {
        let wanted: Vec<&str> = names.into_iter().collect();
        self.tools
            .iter()
            .filter(|t| wanted.contains(&t.spec.name.as_str()))
            .map(|t| t.spec.clone())
            .collect()
    }
}
