//! What the latency benchmarks share (`orch-policy/benches/ext_mcp.rs`,
//! `orch-mcp/benches/added_latency.rs`): calls started on schedule, each timed from its
//! scheduled start, and the percentiles of the result (an open loop); and callers that
//! call back to back, for the saturation throughput (a closed loop).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Is this `cargo bench` (which passes `--bench`)? `cargo test --benches` runs a bench
/// binary with no arguments: it must not load the machine with a debug build then.
pub fn benchmarking() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// The number in environment variable `name`, else `default`.
pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `rate` calls a second for `seconds`, call `i` being `call(i)`, each started on
/// schedule whether or not earlier ones finished: the latency of each from its scheduled
/// start, sorted. A thread of its own paces the calls (a tokio timer fires on whole
/// milliseconds, which would add up to a millisecond to every call).
pub async fn open_loop<F, Fut>(rate: u64, seconds: u64, call: F) -> Vec<Duration>
where
    F: Fn(usize) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let total = (rate * seconds) as usize;
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let handle = tokio::runtime::Handle::current();
    let pacer = std::thread::spawn(move || {
        let begin = Instant::now() + Duration::from_millis(10);
        let mut tasks = Vec::with_capacity(total);
        for i in 0..total {
            let at = begin + interval * i as u32;
            let now = Instant::now();
            if at > now {
                std::thread::sleep(at - now);
            }
            let called = call(i);
            tasks.push(handle.spawn(async move {
                called.await;
                at.elapsed()
            }));
        }
        tasks
    });
    let tasks = tokio::task::spawn_blocking(move || pacer.join().unwrap())
        .await
        .unwrap();
    let mut latencies = Vec::with_capacity(total);
    for task in tasks {
        latencies.push(task.await.unwrap());
    }
    latencies.sort();
    latencies
}

/// The `p`th percentile of sorted `samples` (nearest rank).
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * samples.len() as f64).ceil() as usize;
    samples[rank.clamp(1, samples.len()) - 1]
}

/// `callers` tasks, each calling back to back for `lasting` (caller `c`'s `n`th call is
/// `call(c, n)`): the calls completed per second, all callers together.
pub async fn closed_loop<F, Fut>(callers: usize, lasting: Duration, call: F) -> f64
where
    F: Fn(usize, usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let call = Arc::new(call);
    let start = Instant::now();
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(callers);
    for caller in 0..callers {
        let call = Arc::clone(&call);
        let done = Arc::clone(&done);
        tasks.push(tokio::spawn(async move {
            let mut n = 0;
            while start.elapsed() < lasting {
                call(caller, n).await;
                n += 1;
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}
