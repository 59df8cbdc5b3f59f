//! A small chat-orchestration HTTP service: every request loads a session's
//! orchestration state from the store, changes it atomically (`update`), and saves it.
//! Sessions live in a MemoryStore by default, in Redis when `REDIS_URL` is set (so
//! several instances can serve the same sessions).
//!
//! Run: `cargo run -p orch-store --features redis --example chat_service`
//! (listens on 127.0.0.1:3000, or `PORT`).
//!
//! | request | does |
//! |---|---|
//! | `POST /sessions/{id}/messages` `{"message": ".."}` | a user message: transitions, resets |
//! | `GET /sessions/{id}/tools` | the tools the LLM may see now |
//! | `POST /sessions/{id}/tool-calls` `{"tool": ".."}` | check, then record a tool call (409 with the reason when not allowed) |
//! | `POST /sessions/{id}/usage` `{"prompt": n, "completion": n}` | token usage |
//! | `GET /sessions/{id}` | the AgentDock client-facing view |
//! | `DELETE /sessions/{id}` | forget the session |

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use orch_store::{MemoryStore, RedisStore, SessionStore, StoreError, Versioned};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

orch_macros::orchestration!(file = "../examples/agents/cognitive-reasoner/template.json");
use cognitive_reasoner::{Machine, Session};

/// MemoryStore or RedisStore, chosen at start-up.
enum Backend {
    Memory(MemoryStore),
    Redis(RedisStore),
}

impl SessionStore for Backend {
    async fn load(&self, id: &str) -> Result<Option<Versioned>, StoreError> {
        match self {
            Backend::Memory(s) => s.load(id).await,
            Backend::Redis(s) => s.load(id).await,
        }
    }
    async fn compare_and_set(
        &self,
        id: &str,
        expected: Option<u64>,
        bytes: Vec<u8>,
    ) -> Result<Option<u64>, StoreError> {
        match self {
            Backend::Memory(s) => s.compare_and_set(id, expected, bytes).await,
            Backend::Redis(s) => s.compare_and_set(id, expected, bytes).await,
        }
    }
    async fn store(&self, id: &str, bytes: Vec<u8>) -> Result<u64, StoreError> {
        match self {
            Backend::Memory(s) => s.store(id, bytes).await,
            Backend::Redis(s) => s.store(id, bytes).await,
        }
    }
    async fn remove(&self, id: &str) -> Result<bool, StoreError> {
        match self {
            Backend::Memory(s) => s.remove(id).await,
            Backend::Redis(s) => s.remove(id).await,
        }
    }
    async fn backoff(&self, attempt: u32) {
        match self {
            Backend::Memory(s) => s.backoff(attempt).await,
            Backend::Redis(s) => s.backoff(attempt).await,
        }
    }
}

type App = Arc<Backend>;
type Reply = (StatusCode, Json<Value>);

fn state(s: &Session) -> Value {
    json!({
        "step": s.step().map(|x| x.name()),
        "sequenceIndex": s.sequence_index(),
        "allowed": s.allowed().names().collect::<Vec<_>>(),
        "blockedOn": s.blocked_on().map(|b| b.names().collect::<Vec<_>>()),
    })
}

fn failed(e: StoreError) -> Reply {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({"error": e.to_string()})),
    )
}

#[derive(Deserialize)]
struct Message {
    message: String,
}

async fn message(State(app): State<App>, Path(id): Path<String>, Json(m): Json<Message>) -> Reply {
    match app
        .update::<Machine, _>(&id, |s| s.on_user_message(&m.message))
        .await
    {
        Ok(u) => (StatusCode::OK, Json(state(&u.session))),
        Err(e) => failed(e),
    }
}

async fn tools(State(app): State<App>, Path(id): Path<String>) -> Reply {
    match app.get::<Machine>(&id).await {
        Ok(Some(l)) => (StatusCode::OK, Json(state(&l.session))),
        Ok(None) => (StatusCode::OK, Json(state(&Session::new()))),
        Err(e) => failed(e),
    }
}

#[derive(Deserialize)]
struct ToolCall {
    tool: String,
}

async fn tool_call(
    State(app): State<App>,
    Path(id): Path<String>,
    Json(call): Json<ToolCall>,
) -> Reply {
    // Check and record in one atomic update: the check sees the same state the record
    // changes. A refused call is not recorded (the host does not run it).
    let result = app
        .update::<Machine, _>(&id, |s| match s.check_name(&call.tool) {
            Ok(()) => Ok(s.record_name(&call.tool).as_str()),
            Err(why) => Err(why.to_string()),
        })
        .await;
    match result {
        Ok(u) => match u.value {
            Ok(outcome) => (
                StatusCode::OK,
                Json(json!({"outcome": outcome, "state": state(&u.session)})),
            ),
            Err(why) => (
                StatusCode::CONFLICT,
                Json(json!({"error": why, "state": state(&u.session)})),
            ),
        },
        Err(e) => failed(e),
    }
}

#[derive(Deserialize)]
struct Usage {
    prompt: u64,
    completion: u64,
}

async fn usage(State(app): State<App>, Path(id): Path<String>, Json(u): Json<Usage>) -> Reply {
    match app
        .update::<Machine, _>(&id, |s| s.record_usage(u.prompt, u.completion))
        .await
    {
        Ok(up) => (StatusCode::OK, Json(json!(up.session.agentdock_view(&id)))),
        Err(e) => failed(e),
    }
}

async fn view(State(app): State<App>, Path(id): Path<String>) -> Reply {
    match app.get::<Machine>(&id).await {
        Ok(Some(l)) => (StatusCode::OK, Json(json!(l.session.agentdock_view(&id)))),
        Ok(None) => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("no session `{id}`")})),
        ),
        Err(e) => failed(e),
    }
}

async fn forget(State(app): State<App>, Path(id): Path<String>) -> Reply {
    match app.delete(&id).await {
        Ok(true) => (StatusCode::OK, Json(json!({"deleted": id}))),
        Ok(false) => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("no session `{id}`")})),
        ),
        Err(e) => failed(e),
    }
}

#[tokio::main]
async fn main() {
    let backend = match std::env::var("REDIS_URL") {
        Ok(url) => match RedisStore::connect(&url).await {
            Ok(r) => {
                eprintln!("sessions in Redis at {url}");
                Backend::Redis(r.namespace("chat-service"))
            }
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1);
            }
        },
        Err(_) => {
            eprintln!("sessions in memory (set REDIS_URL to share them between instances)");
            Backend::Memory(MemoryStore::new())
        }
    };
    let app = Router::new()
        .route("/sessions/{id}", get(view).delete(forget))
        .route("/sessions/{id}/messages", post(message))
        .route("/sessions/{id}/tools", get(tools))
        .route("/sessions/{id}/tool-calls", post(tool_call))
        .route("/sessions/{id}/usage", post(usage))
        .with_state(Arc::new(backend));
    let port = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(3000);
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", port)).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on 127.0.0.1:{port}: {e}");
            std::process::exit(1);
        }
    };
    eprintln!("listening on http://127.0.0.1:{port}");
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
    {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
