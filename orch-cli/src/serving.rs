//! What the serving commands (`orch mcp`, `orch policy`, `orch resolve`) share: the
//! async runtime and telemetry they run in, the signal that stops them, and the Redis
//! store their flags name.

use crate::USAGE_OR_IO;
use orch_store::RedisStore;

/// What a gateway command (`program`, exported as OpenTelemetry service `service`)
/// runs in: its span and metric export to `otlp` while the guard lives, and a
/// two-thread async runtime. `Err` is the exit code, the error printed.
pub(crate) fn start(
    program: &str,
    service: &str,
    otlp: Option<&str>,
) -> Result<(Option<orch_agent::otel::OtelGuard>, tokio::runtime::Runtime), u8> {
    let otel = match otlp {
        None => None,
        Some(url) => match orch_agent::otel::init_otlp(url, service) {
            Ok(guard) => Some(guard),
            Err(e) => {
                orch_runtime::eprintln_printable!("error: {program}: --otlp-endpoint: {e}");
                return Err(USAGE_OR_IO);
            }
        },
    };
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => Ok((otel, runtime)),
        Err(e) => {
            orch_runtime::eprintln_printable!(
                "error: {program}: cannot start the async runtime: {e}"
            );
            Err(USAGE_OR_IO)
        }
    }
}

/// Completes on Ctrl-C or SIGTERM.
pub(crate) async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    () = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => ctrl_c.await,
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await;
}

/// The Redis store `--redis URL` or `--redis-cluster URL...` name, connected (or why
/// not), and how to name it in messages; `None` when neither is given (memory).
pub(crate) async fn connect_redis(
    url: Option<&str>,
    cluster: &[String],
) -> Option<(Result<RedisStore, orch_store::StoreError>, String)> {
    match (url, cluster) {
        (Some(url), _) => Some((RedisStore::connect(url).await, format!("Redis at {url}"))),
        (None, []) => None,
        (None, seeds) => {
            let refs: Vec<&str> = seeds.iter().map(String::as_str).collect();
            Some((
                RedisStore::connect_cluster(&refs).await,
                format!("the Redis Cluster at {}", seeds.join(", ")),
            ))
        }
    }
}

/// `--mode`: `enforce` or `observe`.
pub(crate) fn parse_mode(s: &str) -> Result<orch_agent::Mode, String> {
    s.parse()
        .map_err(|e: orch_agent::UnknownMode| e.to_string())
}
