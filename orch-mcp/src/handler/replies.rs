//! What the gateway answers with itself: refusals as tool results, the fields of a
//! result it relays, and the errors it says in its own words.

use super::*;

/// A call the gateway answers itself, with a tool result whose `isError` is true: the
/// text for the model, and the same facts as data for the client (`structuredContent`).
pub(crate) struct RefusalResult {
    pub(super) message: String,
    pub(super) detail: serde_json::Value,
}

impl RefusalResult {
    /// The refusal of `tool` by the workflow in `session`, as the gateway answers it.
    pub(super) fn by_workflow(policy: &Policy, session: &DynSession<'_>, refusal: Refusal) -> Self {
        let detail = policy.workflow_refusal_data(&refusal, Some(session));
        RefusalResult {
            message: refusal.reason,
            detail,
        }
    }

    pub(super) fn new(
        tool: &str,
        reason: &str,
        message: String,
        session: Option<&DynSession<'_>>,
        policy: &Policy,
    ) -> Self {
        let detail = policy.refusal_data(tool, reason, &message, session);
        RefusalResult { message, detail }
    }

    /// The tool result the client gets: the facts (`{"tool", "reason", …}`) in `_meta`
    /// under [`REFUSAL_META_KEY`] always (the question it waits on, if any, under
    /// [`APPROVAL_META_KEY`]), and as `structuredContent` (`{"refusal": …}`) unless the tool
    /// declares an `outputSchema` (`structured` false), which they would not match (an
    /// SDK that checks results against it would reject the refusal).
    pub(super) fn into_result(self, structured: bool) -> CallToolResult {
        let mut result = CallToolResult::error(vec![ContentBlock::text(self.message)]);
        let facts = self.detail.get("refusal").cloned().unwrap_or_default();
        let meta = result.meta.get_or_insert_default();
        meta.insert(REFUSAL_META_KEY.to_owned(), facts);
        if let Some(approval) = self.detail.get("approval") {
            meta.insert(APPROVAL_META_KEY.to_owned(), approval.clone());
        }
        if structured {
            result.structured_content = Some(self.detail);
        }
        result
    }
}

/// Where a refusal's facts are in the result's `_meta` (docs/mcp.md, "Refusals").
pub(crate) const REFUSAL_META_KEY: &str = "orch/refusal";

/// Where the question a refused call waits on is in the result's `_meta`
/// (docs/approvals.md, "Approvers elsewhere").
pub(crate) const APPROVAL_META_KEY: &str = "orch/approval";

/// Where 2026-07-28 results name their server.
pub(super) const SERVER_INFO_META_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// The `resultType` and `_meta` of a result the gateway answers or relays, if its kind
/// has them.
pub(super) fn fields_of(
    result: &mut ServerResult,
) -> Option<(&mut Option<ResultType>, &mut Option<MetaObject>)> {
    Some(match result {
        ServerResult::CompleteResult(r) => (&mut r.result_type, &mut r.meta),
        ServerResult::GetPromptResult(r) => (&mut r.result_type, &mut r.meta),
        ServerResult::ListPromptsResult(r) => (&mut r.result_type, &mut r.meta),
        ServerResult::ListResourcesResult(r) => (&mut r.result_type, &mut r.meta),
        ServerResult::ListResourceTemplatesResult(r) => (&mut r.result_type, &mut r.meta),
        ServerResult::ReadResourceResult(r) => (&mut r.result_type, &mut r.meta),
        ServerResult::ListToolsResult(r) => (&mut r.result_type, &mut r.meta),
        ServerResult::CallToolResult(r) => (&mut r.result_type, &mut r.meta),
        _ => return None,
    })
}

/// An upstream result as a result of the 2026-07-28 revision: an upstream on a
/// handshake revision sends no `resultType`, which means `complete` there. (The MCP SDK
/// drops the field again for clients on a handshake revision.)
pub(super) fn with_result_type(mut result: ServerResult) -> ServerResult {
    if let Some((result_type, _)) = fields_of(&mut result) {
        result_type.get_or_insert(ResultType::COMPLETE);
    }
    result
}

/// A JSON-RPC error for the client from a failed upstream request of `method`: the
/// upstream's own error as it is, a timeout as one that says so, anything else (the
/// connection is gone) as an internal error that says so.
pub(crate) fn upstream_error(e: ServiceError, method: &str, limit: Duration) -> McpError {
    match e {
        ServiceError::McpError(e) => e,
        ServiceError::Timeout { .. } => Error::UpstreamTimeout {
            method: method.to_owned(),
            limit,
        }
        .into(),
        other => Error::UpstreamUnavailable {
            why: other.to_string(),
        }
        .into(),
    }
}

pub(super) fn cancelled(what: &str) -> McpError {
    Error::Cancelled {
        method: what.to_owned(),
    }
    .into()
}

pub(super) fn ended(id: &str) -> McpError {
    Error::Ended { id: id.to_owned() }.into()
}

pub(crate) fn store_error(e: StoreError) -> McpError {
    Error::Store(e).into()
}

pub(super) fn corrupt(id: &str, why: &str) -> McpError {
    Error::Corrupt {
        id: id.to_owned(),
        why: why.to_owned(),
    }
    .into()
}

/// A failure of the run protocol for session `id`, as the client gets it.
pub(super) fn run_error(id: &str, e: RunError) -> McpError {
    match e {
        RunError::Ended => ended(id),
        RunError::Store(e) => store_error(e),
        RunError::Corrupt { why, .. } => corrupt(id, &why),
        RunError::Conflict { attempts } => Error::Conflict {
            id: id.to_owned(),
            attempts,
        }
        .into(),
    }
}

/// The answer to a call whose approval the human dismissed: not run, nothing held.
pub(super) fn dismissed(tool: &str, policy: &Policy, structured: bool) -> CallToolResult {
    let message = format!(
        "error: `{tool}` was not run: it needs a human's approval, and the human dismissed the question without answering"
    );
    RefusalResult::new(tool, "needs_approval", message, None, policy).into_result(structured)
}

pub(super) fn unexpected(method: &str) -> McpError {
    Error::UpstreamUnexpected {
        method: method.to_owned(),
    }
    .into()
}
