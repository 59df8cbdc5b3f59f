//! A session's in-memory worker let go when the session is idle: none of its requests
//! open (a response still streaming counts) and none for the idle time. The MCP SDK's own
//! timer counts only messages, so a request that took longer than it without one — a
//! slow tool, a call waiting for its approver — had its stream closed with no answer.
//! The session itself lives in the store; its next request restores the worker.

use super::prelude::*;
use std::time::Instant;

/// When each session's requests were last open, and how many are open now.
pub(crate) struct Activity {
    sessions: std::sync::Mutex<HashMap<String, Use>>,
    /// How long a session with nothing open keeps its worker.
    idle: Duration,
}

/// One session's use: requests open, and since when it has had none (or was first seen).
struct Use {
    open: usize,
    since: Instant,
}

/// A request of a session, open as long as this lives (held by its response's body).
pub(crate) struct Open {
    activity: Arc<Activity>,
    session: String,
}

impl Drop for Open {
    fn drop(&mut self) {
        let mut sessions = self.activity.lock();
        if let Some(used) = sessions.get_mut(&self.session) {
            used.open = used.open.saturating_sub(1);
            used.since = Instant::now();
        }
    }
}

impl Activity {
    /// Activity kept for workers idle at most `idle`.
    pub(crate) fn new(idle: Duration) -> Arc<Self> {
        Arc::new(Activity {
            sessions: std::sync::Mutex::default(),
            idle,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Use>> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A request of `session` begins.
    pub(crate) fn open(self: &Arc<Self>, session: &str) -> Open {
        let mut sessions = self.lock();
        let used = sessions.entry(session.to_owned()).or_insert(Use {
            open: 0,
            since: Instant::now(),
        });
        used.open += 1;
        Open {
            activity: Arc::clone(self),
            session: session.to_owned(),
        }
    }

    /// Of the sessions whose workers are `workers`, those idle for the idle time (now
    /// forgotten here); what is kept of sessions without a worker and nothing open is
    /// dropped, and a worker never seen starts its clock `now`.
    fn idle_among(&self, workers: &[SessionId], now: Instant) -> Vec<SessionId> {
        let mut sessions = self.lock();
        let mut idle = Vec::new();
        for id in workers {
            let used = sessions.entry(id.to_string()).or_insert(Use {
                open: 0,
                since: now,
            });
            if used.open == 0 && now.duration_since(used.since) >= self.idle {
                idle.push(id.clone());
            }
        }
        let live: std::collections::HashSet<&str> = workers.iter().map(|w| &**w).collect();
        sessions.retain(|id, used| {
            used.open > 0
                || (now.duration_since(used.since) < self.idle && live.contains(id.as_str()))
        });
        idle
    }
}

/// Every so often (a quarter of the idle time, between 0.1 and 5 s), closes the workers
/// of idle sessions; ends with the session manager.
pub(crate) async fn let_idle_go(
    activity: Arc<Activity>,
    manager: std::sync::Weak<LocalSessionManager>,
) {
    let tick = (activity.idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
    loop {
        tokio::time::sleep(tick).await;
        let Some(manager) = manager.upgrade() else {
            return;
        };
        let workers: Vec<SessionId> = manager.sessions.read().await.keys().cloned().collect();
        for id in activity.idle_among(&workers, Instant::now()) {
            let _ = manager.close_session(&id).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session with a request open is never idle, however long the request takes; it
    /// is idle the idle time after its last request ends.
    #[test]
    fn open_requests_keep_a_session_busy() {
        let idle = Duration::from_secs(10);
        let activity = Activity::new(idle);
        let workers: [SessionId; 1] = ["s".into()];
        let open = activity.open("s");
        let later = |by: Duration| Instant::now() + by;
        assert!(activity.idle_among(&workers, later(idle * 6)).is_empty());
        drop(open);
        assert!(activity.idle_among(&workers, Instant::now()).is_empty());
        let idle_now = activity.idle_among(&workers, later(idle * 2));
        assert_eq!(idle_now, workers.to_vec());
        // Forgotten once let go; a session without a worker is not kept.
        drop(activity.open("gone"));
        assert!(activity.idle_among(&[], later(idle * 2)).is_empty());
        assert!(activity.lock().is_empty());
    }
}
