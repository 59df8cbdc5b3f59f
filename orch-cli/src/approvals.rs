//! Approvers elsewhere, on the command line: the flags `orch mcp` and `orch policy`
//! share to serve the approvals API ([`ServeArgs`]), and `orch approvals
//! list|show|approve|reject`, its client.

use crate::{OK, USAGE_OR_IO};
use orch_approvals::client::{Client, ClientError};
use orch_approvals::jwt::{Jwks, Trust};
use orch_approvals::{Approvals, Approvers, JwtRoles, Webhook};
use serde_json::Value;
use std::io::Write;
use std::sync::Arc;

/// The flags that serve the approvals API beside a gateway.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct ServeArgs {
    /// Post questions about gated calls for approvers who are not the agent's user, and
    /// serve the approvals API at ADDR (port 0 picks a free one; the bound address is
    /// printed on stdout as `approvals listening on HOST:PORT`). Needs --approvers or
    /// --approver-jwks (docs/approvals.md).
    #[arg(long, value_name = "ADDR")]
    pub(crate) approvals: Option<String>,
    #[command(flatten)]
    pub(crate) who: WhoArgs,
}

/// Who may call the approvals API, and where it announces questions.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct WhoArgs {
    /// Operator tokens of the approvals API: a file of lines `NAME ROLE TOKEN`, ROLE
    /// `approver` or `viewer`.
    #[arg(long, value_name = "FILE", env = "ORCH_APPROVERS_FILE")]
    pub(crate) approvers: Option<String>,
    /// Take approvers' bearer JWTs from the identity provider whose JSON Web Key Set is
    /// at this URL or in this file (with --approver-issuer and --approver-audience).
    #[arg(long, value_name = "URL|FILE")]
    pub(crate) approver_jwks: Option<String>,
    /// The `iss` every approver JWT must carry.
    #[arg(long, value_name = "ISS", requires = "approver_jwks")]
    pub(crate) approver_issuer: Option<String>,
    /// An `aud` every approver JWT must carry.
    #[arg(long, value_name = "AUD", requires = "approver_jwks")]
    pub(crate) approver_audience: Option<String>,
    /// The JWT claim that lists the holder's roles.
    #[arg(long, value_name = "CLAIM", default_value = "roles")]
    pub(crate) approver_role_claim: String,
    /// Announce each new question and each answer as JSON to this URL (signed with the
    /// secret in the environment variable ORCH_WEBHOOK_SECRET, when set).
    #[arg(long, value_name = "URL")]
    pub(crate) webhook: Option<String>,
}

impl WhoArgs {
    /// The webhook `--webhook` names, signed with the secret in ORCH_WEBHOOK_SECRET
    /// when it is set.
    pub(crate) fn webhook(&self) -> Result<Option<Webhook>, String> {
        let secret = std::env::var("ORCH_WEBHOOK_SECRET").ok();
        self.webhook
            .as_deref()
            .map(|url| Webhook::new(url, secret.as_deref()))
            .transpose()
    }
}

/// What the flags set up: the posting options and the API's listener and callers.
pub(crate) struct Served {
    /// How questions are posted.
    pub(crate) webhook: Option<Webhook>,
    /// The API's listener and who may call it.
    pub(crate) listener: tokio::net::TcpListener,
    /// Who may call the API.
    pub(crate) approvers: Arc<Approvers>,
    /// The address the listener is bound to.
    pub(crate) local: std::net::SocketAddr,
    /// What the console shows besides the runs: the template's report and the decision
    /// log (set by the gateway that serves it).
    pub(crate) pages: crate::console::Pages,
}

impl Served {
    /// The console and API over `desk`'s runs, with the pages the gateway set.
    pub(crate) fn console(self, api: Approvals) -> (tokio::net::TcpListener, Approvals) {
        let mut api = api.with_templates(self.pages.templates);
        if let Some(log) = self.pages.log {
            api = api.with_decision_log(log);
        }
        (self.listener, api)
    }
}

/// Reads the flags, binds the API's address and prints it: `Ok(None)` without
/// --approvals. `agent_token`: the gateway's own credential for agents, which may never
/// answer; `template` and `audit`: what the console shows besides the runs.
pub(crate) async fn setup(
    args: &ServeArgs,
    agent_token: Option<&str>,
    template: &str,
    audit: &crate::audit_log::AuditArgs,
) -> Result<Option<Served>, String> {
    let Some(addr) = &args.approvals else {
        let who = &args.who;
        for (flag, given) in [
            ("--approvers", who.approvers.is_some()),
            ("--approver-jwks", who.approver_jwks.is_some()),
            ("--webhook", who.webhook.is_some()),
        ] {
            if given {
                return Err(format!("{flag} needs --approvals ADDR"));
            }
        }
        return Ok(None);
    };
    let mut served = bind(addr, &args.who, agent_token).await?;
    served.pages = crate::console::gateway_pages(template, audit)?;
    Ok(Some(served))
}

/// Reads who may call the API, binds its address and prints it.
pub(crate) async fn bind(
    addr: &str,
    who: &WhoArgs,
    agent_token: Option<&str>,
) -> Result<Served, String> {
    let mut approvers = Approvers::new();
    if let Some(path) = &who.approvers {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the approvers file {path}: {e}"))?;
        approvers = approvers
            .tokens_from(&text)
            .map_err(|e| format!("the approvers file {path}: {e}"))?;
        if agent_token.is_some_and(|agent| text.split_whitespace().any(|word| word == agent)) {
            return Err(format!(
                "the approvers file {path} holds the gateway's own token for agents: an agent's credential may never answer its own questions"
            ));
        }
    }
    if let Some(jwks) = &who.approver_jwks {
        let (Some(issuer), Some(audience)) = (&who.approver_issuer, &who.approver_audience) else {
            return Err("--approver-jwks needs --approver-issuer and --approver-audience".into());
        };
        let jwks = match jwks.starts_with("http://") || jwks.starts_with("https://") {
            true => Jwks::Url(jwks.clone()),
            false => Jwks::File(jwks.into()),
        };
        let trust = Trust {
            jwks,
            issuer: issuer.clone(),
            audience: audience.clone(),
        };
        let mut roles = JwtRoles::new(trust);
        roles.claim = who.approver_role_claim.clone();
        approvers = approvers.jwt(roles).await?;
    }
    if approvers.is_empty() {
        return Err(
            "the approvals API needs who may answer: --approvers FILE (operator tokens) or --approver-jwks".into(),
        );
    }
    let webhook = who.webhook()?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen for the approvals API at {addr}: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot listen for the approvals API at {addr}: {e}"))?;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "approvals listening on {local}");
    let _ = out.flush();
    Ok(Served {
        webhook,
        listener,
        approvers: Arc::new(approvers),
        local,
        pages: crate::console::Pages::default(),
    })
}

/// Serves the approvals API in the background until the process is asked to stop.
pub(crate) fn spawn(listener: tokio::net::TcpListener, approvals: Approvals) {
    tokio::spawn(async move {
        if let Err(e) = orch_approvals::serve(listener, approvals, crate::serving::shutdown()).await
        {
            orch_runtime::eprintln_printable!("error: the approvals API stopped: {e}");
        }
    });
}

/// `orch approvals`: what to do.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum Action {
    /// List the questions waiting for an approver.
    List,
    /// Show one question: the run, the step, the tool, the exact arguments, where their
    /// values came from, when it expires.
    Show {
        /// The question's id (`q-...`).
        id: String,
    },
    /// Approve the call a question is about: it runs once when it comes again.
    Approve {
        /// The question's id (`q-...`).
        id: String,
        /// Why (kept in the decision log).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Reject it: the same call is refused until the run's next event.
    Reject {
        /// The question's id (`q-...`).
        id: String,
        /// Why (told to the model, kept in the decision log).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Serve the approvals API for durable runs on Restate (their questions listed with
    /// Restate's SQL introspection, answered through its ingress) until Ctrl-C or
    /// SIGTERM.
    Serve(Box<RestateArgs>),
}

/// `orch approvals serve`: the API in front of a Restate server.
#[derive(clap::Args, Debug)]
pub(crate) struct RestateArgs {
    /// Serve the API at ADDR (printed on stdout as `approvals listening on HOST:PORT`).
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: String,
    /// Restate's admin API, e.g. http://127.0.0.1:9070.
    #[arg(long, value_name = "URL")]
    pub(crate) restate_admin: String,
    /// Restate's ingress, e.g. http://127.0.0.1:8080.
    #[arg(long, value_name = "URL")]
    pub(crate) restate_ingress: String,
    #[command(flatten)]
    pub(crate) who: WhoArgs,
}

/// How often `orch approvals serve` looks for new questions to announce.
const ANNOUNCE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Serves the approvals API over a Restate server's runs, announcing new questions to
/// the webhook as they are seen.
fn serve_restate(args: &RestateArgs) -> u8 {
    let (_otel, runtime) = match crate::serving::start("orch approvals", "orch-approvals", None) {
        Ok(started) => started,
        Err(code) => return code,
    };
    let served = runtime.block_on(async {
        let desk =
            orch_approvals::restate::RestateDesk::new(&args.restate_admin, &args.restate_ingress)?;
        let desk = Arc::new(desk);
        let served = bind(&args.listen, &args.who, None).await?;
        if let Some(webhook) = served.webhook.clone() {
            tokio::spawn(announce_new(Arc::clone(&desk), webhook));
        }
        let api = Approvals::new(desk, served.approvers, served.webhook);
        orch_runtime::eprintln_printable!(
            "orch approvals: serving the approvals API for the runs of Restate at {}",
            args.restate_ingress
        );
        orch_approvals::serve(served.listener, api, crate::serving::shutdown())
            .await
            .map_err(|e| format!("the approvals API stopped: {e}"))
    });
    match served {
        Ok(()) => OK,
        Err(why) => {
            orch_runtime::eprintln_printable!("error: orch approvals serve: {why}");
            USAGE_OR_IO
        }
    }
}

/// Announces each pending question the first time it is seen (a question seen before
/// this process started is announced again: at least once).
pub(crate) async fn announce_new(
    desk: Arc<orch_approvals::restate::RestateDesk>,
    webhook: Webhook,
) {
    use orch_approvals::Desk;
    let mut seen = std::collections::HashSet::new();
    loop {
        match desk.questions().await {
            Ok(questions) => {
                let pending: Vec<_> = questions
                    .into_iter()
                    .filter(|q| q.state == orch_run::approvals::PostedState::Pending)
                    .collect();
                for question in &pending {
                    if seen.insert(question.id.clone()) {
                        webhook.announce(orch_approvals::webhook::Event::Asked, question);
                    }
                }
                seen.retain(|id| pending.iter().any(|q| q.id == *id));
            }
            Err(why) => orch_runtime::eprintln_printable!(
                "orch approvals: warning: the questions cannot be read now: {why}"
            ),
        }
        tokio::time::sleep(ANNOUNCE_EVERY).await;
    }
}

/// The command line of `orch approvals`.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub(crate) action: Action,
    /// The approvals API (what `orch mcp --approvals` or `orch policy --approvals`
    /// serves), e.g. http://127.0.0.1:7070.
    #[arg(long, value_name = "URL", env = "ORCH_APPROVALS_URL", global = true)]
    pub(crate) url: Option<String>,
    /// A file holding the bearer token (else the environment variable
    /// ORCH_APPROVALS_TOKEN).
    #[arg(long, value_name = "FILE", global = true)]
    pub(crate) token_file: Option<String>,
    /// Print the API's JSON instead of text.
    #[arg(long, global = true)]
    pub(crate) json: bool,
}

/// Runs `orch approvals`: 0 done, 1 refused by the API (not found, answered already,
/// not allowed), 2 no URL or token, or the API not reached.
pub(crate) fn run(args: Args) -> u8 {
    let request = match &args.action {
        Action::Serve(serve) => return serve_restate(serve),
        Action::List => Request::List,
        Action::Show { id } => Request::Show(id),
        Action::Approve { id, reason } => Request::Answer(id, true, reason.as_deref()),
        Action::Reject { id, reason } => Request::Answer(id, false, reason.as_deref()),
    };
    let client = match client(&args) {
        Ok(client) => client,
        Err(why) => {
            orch_runtime::eprintln_printable!("error: orch approvals: {why}");
            return USAGE_OR_IO;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            orch_runtime::eprintln_printable!("error: orch approvals: {e}");
            return USAGE_OR_IO;
        }
    };
    let answered = runtime.block_on(async {
        match request {
            Request::List => client.list().await,
            Request::Show(id) => client.show(id).await,
            Request::Answer(id, approve, reason) => client.answer(id, approve, reason).await,
        }
    });
    match answered {
        Ok(body) => {
            let text = match (args.json, request) {
                (true, _) => body.to_string(),
                (false, Request::List) => list_text(&body),
                (false, _) => question_text(&body),
            };
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", orch_runtime::printable::printable_lines(&text));
            OK
        }
        Err(refused @ ClientError::Refused { .. }) => {
            if let (true, ClientError::Refused { body, .. }) = (args.json, &refused) {
                let _ = writeln!(std::io::stdout().lock(), "{body}");
            }
            orch_runtime::eprintln_printable!("error: {refused}");
            crate::FOUND_ERRORS
        }
        Err(e) => {
            orch_runtime::eprintln_printable!("error: orch approvals: {e}");
            USAGE_OR_IO
        }
    }
}

/// A request of `orch approvals` to the API.
#[derive(Clone, Copy)]
enum Request<'a> {
    List,
    Show(&'a str),
    /// The question, approve or not, the reason.
    Answer(&'a str, bool, Option<&'a str>),
}

/// The client the flags name: the API's URL and the bearer token.
fn client(args: &Args) -> Result<Client, String> {
    let url = args
        .url
        .as_deref()
        .ok_or("give the API's address with --url or ORCH_APPROVALS_URL")?;
    let token = match &args.token_file {
        Some(path) => std::fs::read_to_string(path)
            .map(|t| t.trim().to_owned())
            .map_err(|e| format!("cannot read the token file {path}: {e}"))?,
        None => std::env::var("ORCH_APPROVALS_TOKEN")
            .map_err(|_| "give a bearer token with --token-file or ORCH_APPROVALS_TOKEN")?,
    };
    Client::new(url, &token).map_err(|e| e.to_string())
}

fn text(value: &Value, key: &str) -> String {
    match value.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => "-".to_owned(),
        Some(other) => other.to_string(),
    }
}

/// One line per question: id, tool, step, run, expiry.
fn list_text(body: &Value) -> String {
    let questions = body
        .get("questions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if questions.is_empty() {
        return "no question is waiting".to_owned();
    }
    let mut out = String::new();
    for q in questions {
        out.push_str(&format!(
            "{}  {}  step {}  run {}  expires {}\n",
            text(q, "id"),
            text(q, "tool"),
            text(q, "step"),
            text(q, "run"),
            text(q, "expiresMs")
        ));
    }
    out.pop();
    out
}

/// A question in full.
fn question_text(q: &Value) -> String {
    let mut out = format!(
        "question {} ({})\nrun: {}\ntemplate: {}\nstep: {}\ntool: {}\narguments: {}\n",
        text(q, "id"),
        text(q, "state"),
        text(q, "run"),
        text(q, "template"),
        text(q, "step"),
        text(q, "tool"),
        text(q, "arguments"),
    );
    if let Some(origins) = q.get("origins").and_then(Value::as_array) {
        out.push_str("where its values were seen:\n");
        for line in origins {
            out.push_str(&format!("- {}\n", line.as_str().unwrap_or_default()));
        }
    }
    out.push_str(&format!("expires: {} ms", text(q, "expiresMs")));
    if let Some(answer) = q.get("answer") {
        out.push_str(&format!(
            "\nanswered by {} at {} ms{}",
            text(answer, "by"),
            text(answer, "atMs"),
            match answer.get("reason").and_then(Value::as_str) {
                Some(reason) => format!(": {reason}"),
                None => String::new(),
            }
        ));
    }
    out
}
