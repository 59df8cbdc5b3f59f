//! For the policy-server tests (`orch-policy`'s and the `orch policy` command's): the
//! templates, a server on a loopback port, and a client that drives both ExtMcp phases as
//! agentgateway does (the run named in `metadata_context`, the request phase's token fed
//! back in the response phase); and a server that allows everything without looking, the
//! floor the benchmarks read `orch policy` against.

use orch_policy::wire::ext_mcp_client::ExtMcpClient;
use orch_policy::wire::{
    authorization_error::Code, mcp_request_result, mcp_response_result, AuthorizationError,
    McpRequest, McpRequestResult, McpResponse, McpResponseResult,
};
use orch_policy::{Options, PolicyServer, TOKEN_FIELD};
use orch_store::SessionStore;
use prost_types::value::Kind;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use tonic::transport::Channel;

/// A refund line: look the order up (any time in `Help`), which moves the run to
/// `Refund`, where the refund comes before the confirmation email. Knowledge-base tools
/// the template does not declare (`kb_*`) are allowed by pattern, `kb_admin_*` denied.
pub const REFUND_LINE: &str = r#"{
  "name": "refund-line",
  "tools": ["lookup_order", "issue_refund", "send_email", "close_ticket"],
  "orchestration": {
    "steps": [
      {"name": "Help", "isDefault": true,
       "availableTools": {"allowed": ["lookup_order", "kb_*"], "denied": ["kb_admin_*"]}},
      {"name": "Refund", "conditions": [{"type": "tool_used", "value": "lookup_order"}],
       "sequence": ["issue_refund", "send_email"],
       "availableTools": {"allowed": ["issue_refund", "send_email", "close_ticket", "kb_*"]}}
    ]
  }
}"#;

/// [`REFUND_LINE`] where a human approves every refund.
pub const GATED_REFUND: &str = r#"{
  "name": "gated-refund",
  "tools": ["lookup_order", "issue_refund", "send_email"],
  "orchestration": {
    "approve": ["issue_refund"],
    "steps": [
      {"name": "Help", "isDefault": true, "availableTools": {"allowed": ["lookup_order"]}},
      {"name": "Refund", "conditions": [{"type": "tool_used", "value": "lookup_order"}],
       "sequence": ["issue_refund", "send_email"]}
    ]
  }
}"#;

/// A policy server for `template` over `store`, serving on a free loopback port: its
/// URL (the server runs until the test's runtime ends).
pub async fn start<S: SessionStore + 'static>(
    template: &str,
    store: S,
    options: Options,
) -> String {
    let compiled = orch_codegen::compile_json(template, None);
    let server = PolicyServer::new(&compiled, store, options).expect("a valid template");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    url
}

/// What the gateway would send on for a call.
#[derive(Debug)]
pub enum Checked {
    /// Passed: the token to feed back, and the params sent upstream instead (if any).
    Admitted(Option<String>, Option<Value>),
    /// Rejected.
    Rejected(AuthorizationError),
}

impl Checked {
    /// The admitted call's token (panics on a rejection).
    pub fn token(&self) -> Option<String> {
        match self {
            Checked::Admitted(token, _) => token.clone(),
            Checked::Rejected(e) => panic!("expected an admitted call, got {e:?}"),
        }
    }

    /// The rejection (panics on an admitted call).
    pub fn error(&self) -> &AuthorizationError {
        match self {
            Checked::Rejected(e) => e,
            Checked::Admitted(..) => panic!("expected a rejection, got {self:?}"),
        }
    }

    /// Was the call admitted?
    pub fn is_admitted(&self) -> bool {
        matches!(self, Checked::Admitted(..))
    }

    /// The rejection's code.
    pub fn code(&self) -> Code {
        Code::try_from(self.error().code).unwrap()
    }

    /// The rejection's `mcp_error`, parsed.
    pub fn data(&self) -> Value {
        serde_json::from_slice(self.error().mcp_error.as_deref().expect("mcp_error")).unwrap()
    }
}

/// What the response phase answered.
#[derive(Debug, PartialEq)]
pub enum Answered {
    /// The result passes as it is.
    Pass,
    /// The result passes changed to this.
    Mutated(Value),
    /// The result is rejected with this code and message.
    Rejected(Code, String),
}

/// A gateway's view of one run: the ExtMcp client, the run's name.
#[derive(Clone)]
pub struct Gateway {
    /// The ExtMcp client.
    pub client: ExtMcpClient<Channel>,
    /// The run named in each request's metadata (`None`: none named).
    pub run: Option<String>,
    /// The metadata key that names the run.
    pub run_key: String,
    /// The services the requests name.
    pub services: Vec<String>,
}

impl Gateway {
    /// A gateway's view of run `run` through the policy server at `url`.
    pub async fn connect(url: &str, run: &str) -> Gateway {
        Gateway {
            client: ExtMcpClient::connect(url.to_owned()).await.unwrap(),
            run: Some(run.to_owned()),
            run_key: "run".into(),
            services: vec!["backend".into()],
        }
    }

    /// The same connection, for another run.
    pub fn for_run(&self, run: &str) -> Gateway {
        Gateway {
            run: Some(run.to_owned()),
            ..self.clone()
        }
    }

    /// The `metadata_context` the gateway's CEL builds: the run, and the token.
    pub fn context(&self, token: Option<&str>) -> prost_types::Struct {
        let mut fields = BTreeMap::new();
        if let Some(run) = &self.run {
            fields.insert(self.run_key.clone(), string(run));
        }
        if let Some(token) = token {
            fields.insert(TOKEN_FIELD.to_owned(), string(token));
        }
        prost_types::Struct { fields }
    }

    /// The request phase of a call with these raw params.
    pub async fn request_raw(&mut self, method: &str, params: Option<Vec<u8>>) -> Checked {
        let result = self.check_request(method, params).await;
        match result.result.expect("a result") {
            mcp_request_result::Result::Pass(_) => {
                Checked::Admitted(token_of(&result.metadata), None)
            }
            mcp_request_result::Result::Mutated(bytes) => Checked::Admitted(
                token_of(&result.metadata),
                Some(serde_json::from_slice(&bytes).unwrap()),
            ),
            mcp_request_result::Result::Error(e) => Checked::Rejected(e),
        }
    }

    /// The request phase of a `tools/call` with these raw params: the params sent on
    /// instead, byte for byte, when the call was admitted with a change.
    pub async fn mutated_raw(&mut self, params: Vec<u8>) -> Option<Vec<u8>> {
        let result = self.check_request("tools/call", Some(params)).await;
        match result.result.expect("a result") {
            mcp_request_result::Result::Mutated(bytes) => Some(bytes),
            _ => None,
        }
    }

    /// `CheckRequest` of `method` with these raw params, for this run.
    async fn check_request(
        &mut self,
        method: &str,
        params: Option<Vec<u8>>,
    ) -> orch_policy::wire::McpRequestResult {
        let request = McpRequest {
            service_names: self.services.clone(),
            method: method.into(),
            metadata_context: Some(self.context(None)),
            mcp_request: params,
            headers: vec![],
        };
        self.client
            .check_request(request)
            .await
            .unwrap()
            .into_inner()
    }

    /// The request phase of `tools/call` of `tool` with `arguments`.
    pub async fn call(&mut self, tool: &str, arguments: Value) -> Checked {
        let params = json!({"name": tool, "arguments": arguments});
        self.request_raw("tools/call", Some(params.to_string().into_bytes()))
            .await
    }

    /// The response phase of `tools/call` with `result`, the token fed back.
    pub async fn respond(&mut self, token: Option<&str>, result: Value) -> Answered {
        self.response("tools/call", token, result).await
    }

    /// The response phase of `method`.
    pub async fn response(&mut self, method: &str, token: Option<&str>, result: Value) -> Answered {
        let response = McpResponse {
            service_names: self.services.clone(),
            method: method.into(),
            metadata_context: Some(self.context(token)),
            mcp_response: result.to_string().into_bytes(),
        };
        let result = self
            .client
            .check_response(response)
            .await
            .unwrap()
            .into_inner();
        match result.result.expect("a result") {
            mcp_response_result::Result::Pass(_) => Answered::Pass,
            mcp_response_result::Result::Mutated(bytes) => {
                Answered::Mutated(serde_json::from_slice(&bytes).unwrap())
            }
            mcp_response_result::Result::Error(e) => {
                Answered::Rejected(Code::try_from(e.code).unwrap(), e.reason)
            }
        }
    }

    /// Both phases of a call that succeeds upstream: `Ok` when it was admitted (and its
    /// result recorded), the rejection otherwise.
    pub async fn run_tool(&mut self, tool: &str) -> Result<(), AuthorizationError> {
        match self.call(tool, json!({})).await {
            Checked::Admitted(token, _) => {
                let answered = self.respond(token.as_deref(), ok_result()).await;
                assert_eq!(answered, Answered::Pass, "the result of `{tool}` passes");
                Ok(())
            }
            Checked::Rejected(e) => Err(e),
        }
    }

    /// The tools a `tools/list` result of `names` comes back with.
    pub async fn list(&mut self, names: &[&str]) -> Vec<String> {
        let tools: Vec<Value> = names
            .iter()
            .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
            .collect();
        match self
            .response("tools/list", None, json!({"tools": tools}))
            .await
        {
            Answered::Pass => names.iter().map(|n| (*n).to_owned()).collect(),
            Answered::Mutated(v) => v["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect(),
            other => panic!("tools/list: {other:?}"),
        }
    }
}

/// A tool result that is not an error.
pub fn ok_result() -> Value {
    json!({"content": [{"type": "text", "text": "done"}]})
}

/// A tool result that says the tool failed.
pub fn error_result() -> Value {
    json!({"content": [{"type": "text", "text": "it broke"}], "isError": true})
}

/// A protobuf string value.
pub fn string(s: &str) -> prost_types::Value {
    prost_types::Value {
        kind: Some(Kind::StringValue(s.to_owned())),
    }
}

fn token_of(metadata: &Option<prost_types::Struct>) -> Option<String> {
    match metadata.as_ref()?.fields.get(TOKEN_FIELD)?.kind.as_ref()? {
        Kind::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

/// Is `log` (the tools a run recorded, in order) a serial order the template allows:
/// replayed from a fresh session, every tool allowed when it ran?
pub fn allowed_serially(template: &str, log: &[String]) -> Result<(), String> {
    let machine = orch_codegen::compile_json(template, None)
        .to_machine()
        .unwrap();
    let mut session = machine.session();
    for (i, tool) in log.iter().enumerate() {
        if let Err(denied) = session.check(tool) {
            return Err(format!(
                "call {i} (`{tool}`) was not allowed then: {denied:?}; log {log:?}"
            ));
        }
        session.record(tool);
    }
    Ok(())
}

/// One in-memory store that a surface writes and the test reads: the gateways use only
/// the store's primitive operations, forwarded here.
#[derive(Clone, Default)]
pub struct Shared(pub std::sync::Arc<orch_store::MemoryStore>);

impl orch_store::SessionStore for Shared {
    async fn load(
        &self,
        id: &str,
    ) -> Result<Option<orch_store::Versioned>, orch_store::StoreError> {
        self.0.load(id).await
    }

    async fn compare_and_set(
        &self,
        id: &str,
        expected: Option<u64>,
        bytes: Vec<u8>,
    ) -> Result<Option<u64>, orch_store::StoreError> {
        self.0.compare_and_set(id, expected, bytes).await
    }

    async fn store(&self, id: &str, bytes: Vec<u8>) -> Result<u64, orch_store::StoreError> {
        self.0.store(id, bytes).await
    }

    async fn remove(&self, id: &str) -> Result<bool, orch_store::StoreError> {
        self.0.remove(id).await
    }
}

/// A policy server that allows everything without looking, answering as orch does for
/// an admitted call (a token in the request phase's metadata). With a store, each check
/// also writes the run's key once (`floor:{run}`, the run named in `metadata_context`
/// under `run`) with a value of a given size: one store round trip per phase, what a
/// check costs the store at the least.
pub struct AllowAll<S = orch_store::MemoryStore> {
    writes: Option<(S, usize)>,
}

impl<S: SessionStore> AllowAll<S> {
    /// One unconditional write of `bytes` bytes under the run's key, when there is a store.
    async fn write(&self, context: Option<&prost_types::Struct>) -> Result<(), tonic::Status> {
        let Some((store, bytes)) = &self.writes else {
            return Ok(());
        };
        let run = match context
            .and_then(|c| c.fields.get("run"))
            .and_then(|v| v.kind.as_ref())
        {
            Some(Kind::StringValue(run)) => run.as_str(),
            _ => "",
        };
        store
            .store(&format!("floor:{run}"), vec![b'x'; *bytes])
            .await
            .map(|_| ())
            .map_err(|e| tonic::Status::unavailable(e.to_string()))
    }
}

#[tonic::async_trait]
impl<S: SessionStore + Send + Sync + 'static> orch_policy::wire::ext_mcp_server::ExtMcp
    for AllowAll<S>
{
    async fn check_request(
        &self,
        request: tonic::Request<McpRequest>,
    ) -> Result<tonic::Response<McpRequestResult>, tonic::Status> {
        self.write(request.get_ref().metadata_context.as_ref())
            .await?;
        let mut fields = std::collections::BTreeMap::new();
        fields.insert(TOKEN_FIELD.to_owned(), string("0123456789abcdef"));
        Ok(tonic::Response::new(McpRequestResult {
            header_mutation: None,
            metadata: Some(prost_types::Struct { fields }),
            result: Some(mcp_request_result::Result::Pass(Default::default())),
        }))
    }

    async fn check_response(
        &self,
        response: tonic::Request<McpResponse>,
    ) -> Result<tonic::Response<McpResponseResult>, tonic::Status> {
        self.write(response.get_ref().metadata_context.as_ref())
            .await?;
        Ok(tonic::Response::new(McpResponseResult {
            result: Some(mcp_response_result::Result::Pass(Default::default())),
        }))
    }
}

/// [`AllowAll`] served as `orch policy` serves (HTTP/2, `TCP_NODELAY`): its URL.
pub async fn serve_allow_all() -> String {
    serve_allowing(AllowAll::<orch_store::MemoryStore> { writes: None }).await
}

/// [`AllowAll`] writing `bytes` bytes to `store` in each check: its URL.
pub async fn serve_allow_all_writing<S: SessionStore + Send + Sync + 'static>(
    store: S,
    bytes: usize,
) -> String {
    serve_allowing(AllowAll {
        writes: Some((store, bytes)),
    })
    .await
}

async fn serve_allowing<S: SessionStore + Send + Sync + 'static>(server: AllowAll<S>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    use tokio_stream::StreamExt;
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).map(|accepted| {
        accepted.inspect(|stream| {
            let _ = stream.set_nodelay(true);
        })
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(orch_policy::wire::ext_mcp_server::ExtMcpServer::new(server))
            .serve_with_incoming(incoming),
    );
    url
}
