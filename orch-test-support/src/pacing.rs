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

/// One side's runtime in a latency benchmark (the servers', or the clients'): as many
/// worker threads as `ORCH_BENCH_WORKERS` says, else two, as `orch policy` and
/// `orch mcp` run. Its threads are named `side` (what a profile sorts by).
pub fn side_runtime(side: &str) -> tokio::runtime::Runtime {
    let workers = env_or("ORCH_BENCH_WORKERS", 2) as usize;
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name(side)
        .enable_all()
        .build()
        .expect("a benchmark's runtime")
}

/// How long before a call's start the pacer stops sleeping and spins. A thread's sleep
/// ends late on a virtual machine (measured here: 0.1 ms at the median, 0.2 ms at p99,
/// the kernel's timer slack and the vCPU's wake), and that lateness would be counted in
/// every call's latency although it is the load generator's, not the system's: sleeping
/// until this much before the start and spinning the rest starts calls within
/// microseconds of schedule, for about a sixth of a core at 1,000 calls/s.
pub const SPIN: Duration = Duration::from_micros(250);

/// What an [`open_loop`] measured.
pub struct OpenLoop {
    /// Each call's latency from its scheduled start, sorted.
    pub latencies: Vec<Duration>,
    /// How late the pacer handed each call to the runtime, sorted: the load
    /// generator's own error, included in the latencies (a late start is not forgiven).
    pub late: Vec<Duration>,
}

impl OpenLoop {
    /// The latency at percentile `p`, in milliseconds.
    pub fn ms(&self, p: f64) -> f64 {
        percentile(&self.latencies, p).as_secs_f64() * 1e3
    }
}

/// `p50 … ms, p90 … ms, p99 … ms, worst … ms over N calls (started late by the pacer: p99
/// … ms)`: how every open-loop row of the benchmarks reads.
impl std::fmt::Display for OpenLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        write!(
            f,
            "p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms, worst {:.3} ms over {} calls (started late by the pacer: p99 {:.3} ms)",
            self.ms(50.0),
            self.ms(90.0),
            self.ms(99.0),
            ms(self.latencies.last().copied().unwrap_or_default()),
            self.latencies.len(),
            ms(percentile(&self.late, 99.0)),
        )
    }
}

/// `rate` calls a second for `seconds`, call `i` being `call(i)`, each started on
/// schedule whether or not earlier ones finished: the latency of each from its scheduled
/// start. A thread of its own paces the calls (a tokio timer fires on whole
/// milliseconds, which would add up to a millisecond to every call), sleeping until
/// [`SPIN`] before each start and spinning the rest.
pub async fn open_loop<F, Fut>(rate: u64, seconds: u64, call: F) -> OpenLoop
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
        let mut late = Vec::with_capacity(total);
        for i in 0..total {
            let at = begin + interval * i as u32;
            let called = call(i);
            let now = Instant::now();
            if at > now + SPIN {
                std::thread::sleep(at - now - SPIN);
            }
            while Instant::now() < at {
                std::hint::spin_loop();
            }
            late.push(at.elapsed());
            tasks.push(handle.spawn(async move {
                called.await;
                at.elapsed()
            }));
        }
        (tasks, late)
    });
    let (tasks, mut late) = tokio::task::spawn_blocking(move || pacer.join().unwrap())
        .await
        .unwrap();
    let mut latencies = Vec::with_capacity(total);
    for task in tasks {
        latencies.push(task.await.unwrap());
    }
    latencies.sort();
    late.sort();
    OpenLoop { latencies, late }
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

/// How much the machine itself stalled a busy thread: what [`stalls`] saw.
#[derive(Debug, Clone, Copy)]
pub struct Stalls {
    /// Threads that spun, one per core.
    pub threads: usize,
    /// Gaps of over 0.1 ms between two consecutive clock reads of a spinning thread,
    /// all threads together.
    pub over_100us: usize,
    /// Gaps of over 0.5 ms.
    pub over_500us: usize,
    /// Gaps of over 1 ms.
    pub over_1ms: usize,
    /// The longest gap.
    pub longest: Duration,
}

/// One thread per core reads the clock back to back for `lasting`, counting the gaps
/// between two reads: time the thread was not running although it wanted to (the
/// scheduler gave its core to another thread, or the hypervisor took the vCPU). A
/// latency benchmark prints it so that its tail can be read against the machine's own:
/// a p99 over 10,000 calls is the 100th worst, and a machine that stalls a busy core for
/// a millisecond a few dozen times in ten seconds puts such a stall in every tail.
pub fn stalls(lasting: Duration) -> Stalls {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let gaps: Vec<Vec<Duration>> = std::thread::scope(|scope| {
        let spinners: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(move || {
                    let start = Instant::now();
                    let mut previous = start;
                    let mut gaps = Vec::new();
                    loop {
                        let now = Instant::now();
                        let gap = now - previous;
                        previous = now;
                        if gap > Duration::from_micros(100) {
                            gaps.push(gap);
                        }
                        if now - start >= lasting {
                            return gaps;
                        }
                    }
                })
            })
            .collect();
        spinners
            .into_iter()
            .map(|s| s.join().unwrap_or_default())
            .collect()
    });
    let all = || gaps.iter().flatten();
    let over = |limit: u64| all().filter(|g| **g > Duration::from_micros(limit)).count();
    Stalls {
        threads,
        over_100us: over(100),
        over_500us: over(500),
        over_1ms: over(1_000),
        longest: all().copied().max().unwrap_or_default(),
    }
}

impl std::fmt::Display for Stalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} spinning threads stalled > 0.1 ms {} times, > 0.5 ms {}, > 1 ms {}, longest {:.3} ms",
            self.threads,
            self.over_100us,
            self.over_500us,
            self.over_1ms,
            self.longest.as_secs_f64() * 1e3
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_loop_starts_every_call_and_times_each_from_its_schedule() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let paced = runtime.block_on(open_loop(100, 1, move |_| {
            let counted = Arc::clone(&counted);
            async move {
                // Every call takes at least 2 ms: each latency must show it.
                tokio::time::sleep(Duration::from_millis(2)).await;
                counted.fetch_add(1, Ordering::Relaxed);
            }
        }));
        assert_eq!(calls.load(Ordering::Relaxed), 100);
        assert_eq!(paced.latencies.len(), 100);
        assert_eq!(paced.late.len(), 100);
        assert!(paced.latencies.windows(2).all(|w| w[0] <= w[1]));
        assert!(paced.late.windows(2).all(|w| w[0] <= w[1]));
        assert!(paced.latencies[0] >= Duration::from_millis(2));
    }

    #[test]
    fn stalls_are_counted_by_length() {
        let stalls = stalls(Duration::from_millis(50));
        assert!(stalls.threads >= 1);
        assert!(stalls.over_100us >= stalls.over_500us);
        assert!(stalls.over_500us >= stalls.over_1ms);
        if stalls.over_100us == 0 {
            assert!(stalls.longest <= Duration::from_micros(100));
        } else {
            assert!(stalls.longest > Duration::from_micros(100));
        }
        assert!(stalls.to_string().contains("spinning threads stalled"));
    }
}
