//! A `tools/call` whose client goes away before the answer is cancelled, so that its
//! lease is released at once.

use super::prelude::*;

/// Tells session `session` that the client of request `request_id` went away: the
/// handler's cancellation token fires, the upstream is told, the lease is released.
pub(super) async fn cancel_call(
    manager: Arc<LocalSessionManager>,
    session: String,
    request_id: RequestId,
) {
    let notification = ClientNotification::CancelledNotification(CancelledNotification::new(
        CancelledNotificationParam::new(
            Some(request_id),
            Some("the client went away before the answer".into()),
        ),
    ));
    let message = ClientJsonRpcMessage::notification(notification);
    let _ = manager.accept_message(&session.into(), message).await;
}

/// A response body that runs `on_abandon` when it is dropped before its end (the
/// client's connection closed before the answer was sent), and holds `held` and `open`
/// as long as it lives.
pub(super) struct Watched {
    pub(super) inner: Body,
    pub(super) done: bool,
    pub(super) on_abandon: Option<Box<dyn FnOnce() + Send>>,
    pub(super) _held: Option<crate::instances::Holding>,
    /// The request of its session, open until the body is done or dropped.
    pub(super) _open: Option<super::idle::Open>,
}

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.done = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        if !self.done && !http_body::Body::is_end_stream(&self.inner) {
            if let Some(f) = self.on_abandon.take() {
                f();
            }
        }
    }
}
