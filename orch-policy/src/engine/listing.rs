//! A `tools/list` response filtered to what the run allows now.

use super::admission::failed;
use super::prelude::*;
use super::state::Engine;

impl<S: SessionStore + 'static> Engine<S> {
    /// The response phase of `tools/list`: the list filtered to what the run allows now
    /// (`None` when nothing is removed).
    pub(super) async fn filter_list(
        &self,
        response: &McpResponse,
    ) -> Result<Option<Vec<u8>>, CheckError> {
        let run = self.run_of(response.metadata_context.as_ref())?;
        let mut result: Value = serde_json::from_slice(&response.mcp_response)
            .map_err(|e| Invalid::ListNotJson(e.to_string()))?;
        let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
            return Err(Invalid::ListNoTools.into());
        };
        let mut names = Vec::with_capacity(tools.len());
        for tool in tools.iter() {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                return Err(Invalid::ListToolNoName.into());
            };
            names.push(self.judged_name(name, &response.service_names).to_owned());
        }
        let policy = Policy::new(names.clone()).in_mode(self.options.mode);
        let record = match self.store.load(&run).await {
            Err(e) => return Err(failed(&run, RunError::Store(e))),
            Ok(None) => Record::default(),
            Ok(Some(v)) => Record::decode(&v.bytes)
                .map_err(|e| failed(&run, RunError::corrupt(e.to_string(), e)))?,
        };
        let session = self
            .restore(record.snapshot.as_deref(), &policy)
            .map_err(|e| failed(&run, e))?;
        let allowed = policy.offered(&session);
        let before = tools.len();
        let mut keep = names.iter().map(|n| allowed.contains(n));
        tools.retain(|_| keep.next().unwrap_or(false));
        if tools.len() == before {
            return Ok(None);
        }
        Ok(Some(result.to_string().into_bytes()))
    }

    /// The name a listed tool is judged by: agentgateway prefixes each tool with its
    /// target (`<target>_<tool>`) when it multiplexes several, and strips the prefix
    /// before a call reaches the request phase; a template names tools without it.
    pub(super) fn judged_name<'n>(&self, name: &'n str, services: &[String]) -> &'n str {
        if services.len() < 2 || self.machine.tools().iter().any(|t| t == name) {
            return name;
        }
        services
            .iter()
            .find_map(|s| name.strip_prefix(s.as_str())?.strip_prefix('_'))
            .unwrap_or(name)
    }
}
