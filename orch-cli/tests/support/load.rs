//! What the load test and the cost benchmark share: a rate meter, one session's life.

use super::http::{succeeded, Client};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;

/// Runs `per_thread` jobs on each of `threads` threads; returns the jobs per second.
pub fn rate(threads: usize, per_thread: usize, job: impl Fn(usize) + Send + Sync + 'static) -> f64 {
    let job = Arc::new(job);
    let start = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let job = Arc::clone(&job);
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    job(t * per_thread + i);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a load thread");
    }
    (threads * per_thread) as f64 / start.elapsed().as_secs_f64()
}

/// One session's life: initialize, a tool call, DELETE.
pub fn session_life(addr: &str, run: usize) {
    let client = Client::connect(addr, None).expect("a session");
    assert!(succeeded(
        &client.call("browse", json!({"run": format!("churn{run}")}))
    ));
    assert_eq!(client.delete().status, 200);
}
