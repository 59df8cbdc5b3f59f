//! An upstream transport that counts the progress coming in, so that an answer waits for
//! the progress before it.

use super::*;

/// An upstream transport that counts the progress notifications coming off it, in the
/// order the messages arrive ([`Routes::progress_drained`]).
pub(crate) struct Observed<T> {
    pub(super) inner: T,
    pub(super) routes: Arc<Routes>,
}

impl<T> Observed<T> {
    pub(crate) fn new(inner: T, routes: Arc<Routes>) -> Self {
        Observed { inner, routes }
    }
}

impl<T: rmcp::transport::Transport<RoleClient>> rmcp::transport::Transport<RoleClient>
    for Observed<T>
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<rmcp::service::RxJsonRpcMessage<RoleClient>> {
        let mut message = self.inner.receive().await?;
        if let rmcp::model::JsonRpcMessage::Notification(n) = &mut message {
            if let ServerNotification::ProgressNotification(p) = &n.notification {
                self.routes.progress_seen(&p.params.progress_token);
            }
            if matches!(
                n.notification,
                ServerNotification::ProgressNotification(_)
                    | ServerNotification::LoggingMessageNotification(_)
                    | ServerNotification::ResourceUpdatedNotification(_)
            ) {
                let ticket = self.routes.ticket();
                n.notification.extensions_mut().insert(ticket);
            }
        }
        Some(message)
    }

    fn close(&mut self) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
