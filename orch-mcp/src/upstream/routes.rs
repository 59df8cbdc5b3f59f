//! Routing what the upstream says about a request (progress, questions, log lines) to
//! the client request it belongs to, in order with the answers.

use super::*;

/// How long a relayed notification waits for the ones before it to be relayed.
pub(super) const TURN_LIMIT: Duration = Duration::from_secs(5);

/// The client requests forwarded on one upstream connection and not yet answered: what
/// the upstream says about one of them (progress, a question for the human, a log line)
/// goes to the client that made it, under that client's own identifiers.
#[derive(Default)]
pub(crate) struct Routes {
    // A tokio lock: a route is written while its request is being sent, so that a
    // notification about the request cannot be read before the route exists.
    pub(super) table: tokio::sync::Mutex<Vec<Route>>,
    /// Requests answered whose route is still in `table` (its removal waits for the
    /// lock, in a task): never taken for a request in flight, so that a question the
    /// upstream asks meanwhile goes to the one request really in flight.
    pub(super) answered: Mutex<Vec<RequestId>>,
    /// Progress notifications per upstream token: how many came off the wire (counted
    /// in order with the responses, by [`Observed`]) and how many have been relayed (the
    /// MCP SDK handles notifications in tasks of their own, so a request's answer can be
    /// at hand before the progress that preceded it has gone out).
    pub(super) progress: Mutex<std::collections::HashMap<ProgressToken, (u64, u64)>>,
    /// Woken whenever a progress notification has been relayed.
    pub(super) progress_relayed: tokio::sync::Notify,
    /// The notifications relayed to a client (progress, log lines, resource updates) in
    /// the order they came off the wire: tickets handed out by [`Observed`] as they
    /// arrive, and how many have had their turn (the MCP SDK handles each in a task of
    /// its own, so without turns they would race each other to the client).
    pub(super) order: Mutex<(u64, u64)>,
    /// Woken whenever a notification has had its turn.
    pub(super) turned: tokio::sync::Notify,
}

/// A relayed notification's place in its connection's wire order.
#[derive(Clone, Copy)]
pub(super) struct Ticket(u64);

/// A notification's turn to be relayed; the next one's comes when this is dropped.
pub(super) struct Turn<'a> {
    pub(super) routes: &'a Routes,
    pub(super) ticket: u64,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        {
            let mut order = self
                .routes
                .order
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            order.1 = order.1.max(self.ticket + 1);
        }
        self.routes.turned.notify_waiters();
    }
}

/// One forwarded request.
pub(super) struct Route {
    /// Its id on the upstream connection.
    pub(super) upstream_id: RequestId,
    /// The progress token the MCP SDK put on it upstream.
    pub(super) upstream_token: ProgressToken,
    /// The client that sent it, its id there, and the progress token it asked for.
    pub(super) client: Peer<RoleServer>,
    pub(super) client_id: RequestId,
    pub(super) client_token: Option<ProgressToken>,
    /// The client's MCP session (over HTTP).
    pub(super) session: Option<Arc<str>>,
}

/// Removes a route when its request is answered (or its task dropped).
pub(crate) struct Routed {
    pub(super) routes: Arc<Routes>,
    pub(super) upstream_id: RequestId,
}

impl Drop for Routed {
    fn drop(&mut self) {
        let routes = Arc::clone(&self.routes);
        let id = self.upstream_id.clone();
        // Usually uncontended: taken at once; else a task removes it, and until then
        // the route is marked answered.
        if let Ok(mut table) = routes.table.try_lock() {
            table.retain(|r| r.upstream_id != id);
            return;
        }
        routes
            .answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(id.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                routes.table.lock().await.retain(|r| r.upstream_id != id);
                routes
                    .answered
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .retain(|a| *a != id);
            });
        }
    }
}

/// The client a forwarded request came from, as [`Routes::send`] needs it.
pub(crate) struct Origin<'a> {
    pub(crate) client: &'a Peer<RoleServer>,
    pub(crate) id: &'a RequestId,
    pub(crate) progress_token: Option<ProgressToken>,
    /// The client's MCP session (over HTTP).
    pub(crate) session: Option<&'a str>,
}

impl Routes {
    /// Sends `request` on `peer` and routes what the upstream says about it to `origin`
    /// until the returned guard is dropped.
    pub(crate) async fn send(
        self: &Arc<Self>,
        peer: &Peer<RoleClient>,
        request: ClientRequest,
        options: PeerRequestOptions,
        origin: Option<Origin<'_>>,
    ) -> Result<(RequestHandle<RoleClient>, Option<Routed>), ServiceError> {
        let Some(origin) = origin else {
            return Ok((peer.send_cancellable_request(request, options).await?, None));
        };
        let mut table = self.table.lock().await;
        let handle = peer.send_cancellable_request(request, options).await?;
        table.push(Route {
            upstream_id: handle.id.clone(),
            upstream_token: handle.progress_token.clone(),
            client: origin.client.clone(),
            client_id: origin.id.clone(),
            client_token: origin.progress_token,
            session: origin.session.map(Arc::from),
        });
        let routed = Routed {
            routes: Arc::clone(self),
            upstream_id: handle.id.clone(),
        };
        Ok((handle, Some(routed)))
    }

    /// The next place in wire order.
    pub(super) fn ticket(&self) -> Ticket {
        let mut order = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        order.0 += 1;
        Ticket(order.0 - 1)
    }

    /// Waits until every notification that came off the wire before `ticket`'s has been
    /// relayed (at most [`TURN_LIMIT`]: one whose handler never ran holds up no other
    /// for longer). `None` (a notification without a ticket): no wait.
    pub(super) async fn turn(&self, ticket: Option<&Ticket>) -> Option<Turn<'_>> {
        let Ticket(ticket) = *ticket?;
        let mine = async {
            loop {
                let turned = self.turned.notified();
                tokio::pin!(turned);
                turned.as_mut().enable();
                if self.order.lock().unwrap_or_else(PoisonError::into_inner).1 >= ticket {
                    return;
                }
                turned.await;
            }
        };
        let _ = tokio::time::timeout(TURN_LIMIT, mine).await;
        Some(Turn {
            routes: self,
            ticket,
        })
    }

    /// A progress notification with `token` came off the wire.
    pub(super) fn progress_seen(&self, token: &ProgressToken) {
        let mut counts = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        counts.entry(token.clone()).or_default().0 += 1;
    }

    /// A progress notification with `token` has been relayed (or dropped: no one asked
    /// for it).
    pub(super) fn progress_done(&self, token: &ProgressToken, routed: bool) {
        {
            let mut counts = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(count) = counts.get_mut(token) {
                count.1 += 1;
                // Progress for no request in flight: nobody waits for it.
                if !routed && count.1 >= count.0 {
                    counts.remove(token);
                }
            }
        }
        self.progress_relayed.notify_waiters();
    }

    /// Waits until every progress notification with `token` that came before the
    /// request's answer has been relayed, so the client gets them before the answer (at
    /// most `limit`, against a relay that never finishes); then forgets the token.
    pub(crate) async fn progress_drained(&self, token: &ProgressToken, limit: Duration) {
        let drained = async {
            loop {
                let relayed = self.progress_relayed.notified();
                tokio::pin!(relayed);
                relayed.as_mut().enable();
                {
                    let mut counts = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
                    match counts.get(token) {
                        Some((seen, done)) if done < seen => {}
                        _ => {
                            counts.remove(token);
                            return;
                        }
                    }
                }
                relayed.await;
            }
        };
        if tokio::time::timeout(limit, drained).await.is_err() {
            let mut counts = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
            counts.remove(token);
        }
    }

    /// The client and its progress token for the upstream's progress `token`.
    pub(super) async fn progress(
        &self,
        token: &ProgressToken,
    ) -> Option<(Peer<RoleServer>, ProgressToken)> {
        let table = self.table.lock().await;
        let route = table.iter().find(|r| r.upstream_token == *token)?;
        Some((route.client.clone(), route.client_token.clone()?))
    }

    /// The client request an upstream request or notification belongs to: the one whose
    /// response stream it came on (`origin`, over HTTP), else the only one in flight;
    /// with its client, and that client's session.
    pub(super) async fn owner(&self, origin: Option<&RequestId>) -> Option<Owner> {
        let table = self.table.lock().await;
        let only_in_flight = || {
            let answered = self.answered.lock().unwrap_or_else(PoisonError::into_inner);
            let mut live = table.iter().filter(|r| !answered.contains(&r.upstream_id));
            match (live.next(), live.next()) {
                (Some(only), None) => Some(only),
                _ => None,
            }
        };
        let route = match origin {
            Some(id) => table.iter().find(|r| r.upstream_id == *id),
            None => None,
        }
        .or_else(only_in_flight)?;
        Some(Owner {
            client: route.client.clone(),
            request: Some(route.client_id.clone()),
            session: route.session.clone(),
        })
    }
}

/// Where something the upstream says goes: a client, the request of its it is about
/// (if any), and the client's MCP session (over HTTP).
pub(crate) struct Owner {
    pub(super) client: Peer<RoleServer>,
    pub(super) request: Option<RequestId>,
    pub(super) session: Option<Arc<str>>,
}
