//! Sending a request upstream and waiting for its answer: what the upstream says about it
//! meanwhile goes to the client that sent it; a client's cancellation cancels it upstream.

use super::*;

impl<S: SessionStore + 'static> Shared<S> {
    /// Sends `request` to the upstream on `link` and waits for its answer, at most the
    /// call timeout; what the upstream says about it meanwhile (progress, questions for
    /// the human, log lines) goes to the client that sent it (`context`). When the
    /// client cancels first (or went away), the upstream is told to cancel too.
    pub(super) async fn forward(
        &self,
        link: &Link,
        request: ClientRequest,
        method: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, Unanswered> {
        let limit = self.limits.call_timeout;
        let ct = &context.ct;
        let gone = || {
            Unanswered::lost(
                Error::UpstreamGone {
                    method: method.to_owned(),
                }
                .into(),
            )
        };
        let progress_token = context.meta.get_progress_token();
        let asked_progress = progress_token.is_some();
        let origin = Origin {
            client: &context.peer,
            id: &context.id,
            progress_token,
            session: mcp_session(&context.extensions),
        };
        // The client's own `_meta` goes on (the MCP SDK took it off the request): on
        // 2026-07-28 its revision, capabilities, identity and log level, so the upstream
        // sees the client as it is, not the gateway. The SDK puts its own progress token
        // on; the gateway's trace context, when it set one, stays.
        let mut options = PeerRequestOptions::with_timeout(limit);
        let mut meta = context.meta.clone();
        let ours = match &request {
            ClientRequest::CallToolRequest(call) => call.params.meta.as_ref(),
            _ => None,
        };
        // The gateway's span context (set on a call it traces) replaces the client's:
        // the upstream's spans are children of the gateway's, in the client's trace.
        if ours.is_some_and(|m| m.0 .0.contains_key("traceparent")) {
            meta.0 .0.remove("traceparent");
            meta.0 .0.remove("tracestate");
        }
        // An upstream reached with the `initialize` handshake speaks its session's
        // revision: a 2026-07-28 client's request reaches it without the keys that name
        // another one. (The MCP SDK would otherwise send it as 2026-07-28, which such an
        // upstream refuses, and every later request on the connection too.)
        if !crate::upstream::is_modern(&link.peer) {
            for key in MODERN_REQUEST_META {
                meta.0 .0.remove(key);
            }
        }
        // A handshake session on a 2026-07-28 connection: the level it set goes with
        // every request (the upstream logs only for requests that carry one).
        if let Some(level) = link.kept.as_ref().and_then(|kept| kept.level()) {
            meta.set_log_level(level);
        }
        options.meta = Some(meta);
        // Sending may wait on the upstream's pipe; an upstream that died meanwhile ends
        // the wait (before anything was sent: the request never reached it).
        let (handle, _routed) = tokio::select! {
            biased;
            () = link.gone.cancelled() => return Err(Unanswered {
                lost: false,
                ..gone()
            }),
            sent = link.routes.send(&link.peer, request, options, Some(origin)) => {
                // A failed send may have written part of the request: its fate is
                // unknown.
                sent.map_err(|e| Unanswered::of(e, method, limit))?
            }
        };
        let (peer, request_id) = (handle.peer.clone(), handle.id.clone());
        let upstream_token = handle.progress_token.clone();
        // Biased, in this order: an answer that has arrived is taken (the call ran, so it
        // is recorded), whatever else happened at the same time; then the upstream going
        // away; the client's cancellation last (the gateway stops its client side once
        // the upstream is gone, and the client is told what happened).
        tokio::select! {
            biased;
            answer = handle.await_response() => {
                // The progress the upstream sent before its answer goes out first (to a
                // client that asked for progress; without a token nothing is relayed).
                if asked_progress {
                    link.routes.progress_drained(&upstream_token, PROGRESS_DRAIN_LIMIT).await;
                }
                answer
                    .map(with_result_type)
                    .map_err(|e| Unanswered::of(e, method, limit))
            }
            () = link.gone.cancelled() => Err(gone()),
            () = ct.cancelled() => {
                if link.gone.is_cancelled() {
                    return Err(gone());
                }
                let notification = CancelledNotification::new(CancelledNotificationParam::new(
                    Some(request_id),
                    Some("the gateway's client cancelled the request".into()),
                ));
                // The upstream may be gone; the client is answered either way.
                let _ = peer.send_notification(notification.into()).await;
                Err(Unanswered::lost(cancelled(method)))
            }
        }
    }
}

/// A forwarded request that got no result: the error the client gets, and whether the
/// request may have reached the upstream without its answer coming back (a *lost*
/// result: a timeout, the upstream gone mid-call, a cancellation) rather than being
/// answered with an error (the upstream's own) or never sent.
pub(crate) struct Unanswered {
    pub(super) error: McpError,
    pub(super) lost: bool,
}

impl Unanswered {
    pub(super) fn lost(error: McpError) -> Self {
        Unanswered { error, lost: true }
    }

    /// An rmcp failure: the upstream's own error is an answer; anything else is lost.
    pub(super) fn of(e: ServiceError, method: &str, limit: Duration) -> Self {
        let lost = !matches!(e, ServiceError::McpError(_));
        Unanswered {
            error: upstream_error(e, method, limit),
            lost,
        }
    }
}

impl From<Unanswered> for McpError {
    fn from(u: Unanswered) -> Self {
        u.error
    }
}

/// The request `_meta` keys of the revisions without sessions (2026-07-28): the
/// revision, the client's capabilities and identity, and its log level.
pub(super) const MODERN_REQUEST_META: [&str; 4] = [
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "io.modelcontextprotocol/clientInfo",
    "io.modelcontextprotocol/logLevel",
];
