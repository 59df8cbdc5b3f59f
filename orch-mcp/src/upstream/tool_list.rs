//! The upstream's tools as one connection last listed them.

use super::*;

/// The upstream's tools as one connection last listed them: read without waiting,
/// replaced whole when a re-fetch succeeds.
pub(crate) struct ToolList {
    pub(super) tools: Mutex<Arc<Vec<Tool>>>,
}

impl ToolList {
    pub(crate) fn new(tools: Vec<Tool>) -> Self {
        ToolList {
            tools: Mutex::new(Arc::new(tools)),
        }
    }

    /// The last list.
    pub(crate) fn get(&self) -> Arc<Vec<Tool>> {
        Arc::clone(&self.tools.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Lists the tools again on `peer` within `limit`: on success the new list replaces
    /// the old; on failure the last good list stays, stderr says so, and `Err` is
    /// returned.
    pub(crate) async fn refresh(&self, peer: &Peer<RoleClient>, limit: Duration) -> Result<(), ()> {
        let fetched = tokio::time::timeout(limit, peer.list_all_tools()).await;
        let why = match fetched {
            Ok(Ok(tools)) => {
                *self.tools.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(tools);
                return Ok(());
            }
            Ok(Err(e)) => crate::handler::upstream_error(e, "tools/list", limit)
                .message
                .into_owned(),
            Err(_) => format!("no answer within {} s", limit.as_secs_f64()),
        };
        orch_runtime::eprintln_printable!(
            "orch mcp: warning: the upstream MCP server said its tools changed, but listing them again failed ({why}); still serving the last list ({} tools)",
            self.get().len()
        );
        Err(())
    }
}
