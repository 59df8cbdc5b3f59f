//! An upstream that is a child process: its standard input and output are the MCP
//! transport, what it writes read through [`Marked`] (a result that names a task is
//! never taken for a complete one), its standard error left to the gateway's.

use crate::unfinished::Marked;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use rmcp::RoleClient;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, ChildStdin, ChildStdout};

/// How long a closed upstream has to exit on its own before it is killed.
const EXIT_WAIT: Duration = Duration::from_secs(3);

/// A started upstream process and the transport over its standard input and output. The
/// process is killed if this is dropped before it exited.
pub(crate) struct ChildUpstream {
    child: Child,
    transport: AsyncRwTransport<RoleClient, Marked<ChildStdout>, ChildStdin>,
}

impl ChildUpstream {
    /// Starts `command` with piped standard input and output.
    pub(crate) fn spawn(mut command: tokio::process::Command) -> std::io::Result<Self> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(std::io::Error::other(
                "the child's standard streams were not piped",
            ));
        };
        Ok(ChildUpstream {
            child,
            transport: AsyncRwTransport::new_client(Marked::new(stdout), stdin),
        })
    }
}

impl Transport<RoleClient> for ChildUpstream {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    /// The MCP stdio shutdown: the child's input is closed, it has [`EXIT_WAIT`] to exit,
    /// then it is killed.
    async fn close(&mut self) -> Result<(), Self::Error> {
        self.transport.close().await?;
        match tokio::time::timeout(EXIT_WAIT, self.child.wait()).await {
            Ok(exited) => exited.map(|_| ()),
            Err(_) => self.child.kill().await,
        }
    }
}
