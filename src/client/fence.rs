//! Writes fenced off by a deadline: the leader's controllers write only while its Lease is
//! certainly its own.
//!
//! The leader opens the [`Fence`] until its renew deadline, counted from the *sending* of its
//! last renewal that succeeded, and moves it on with every renewal. The [`fenced`] client
//! refuses every write (anything but `GET`) once the deadline has passed, and gives up on a
//! write still unanswered at the deadline. Another replica takes the Lease only after it has
//! seen the Lease unchanged for the lease duration, and it can see that renewal no earlier
//! than the API server stored it, after it was sent: so the leader's writes end at least
//! lease duration minus renew deadline (5 s by default) before another can start. A write
//! given up on at the deadline may still reach the API server later (a network that held it):
//! a Job's fixed name per slot makes a second create of the slot fail (`AlreadyExists`) for as
//! long as the first Job exists (see docs/faults.md).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;
use tokio::time::Instant;
use tower::{BoxError, Service};

/// A write refused, or given up on, because the fence's deadline passed.
#[derive(Debug, thiserror::Error)]
#[error(
    "not writing: this replica no longer certainly leads (its lease was not renewed within the renew deadline)"
)]
pub struct Fenced;

/// Until when writes may be sent; closed (no writes) until opened. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct Fence(Arc<(Mutex<State>, tokio::sync::Notify)>);

#[derive(Debug, Default)]
struct State {
    deadline: Option<Instant>,
    /// No new write is sent; those in flight go on until the deadline.
    refusing: bool,
    /// Writes sent and not yet answered or given up on.
    in_flight: usize,
    /// Writes given up on (at the deadline, or dropped unanswered) since the fence was opened:
    /// the API server may still carry them out.
    abandoned: usize,
}

/// A write sent: counted as abandoned if dropped before it was answered.
struct Sent<'a> {
    fence: &'a Fence,
    answered: bool,
}

impl Drop for Sent<'_> {
    fn drop(&mut self) {
        let mut state = self.fence.state();
        state.in_flight -= 1;
        if !self.answered {
            state.abandoned += 1;
        }
        drop(state);
        self.fence.0.1.notify_waiters();
    }
}

impl Fence {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Allow writes until `deadline`. Opening a closed fence starts a new term: nothing was
    /// abandoned in it yet.
    pub fn open_until(&self, deadline: Instant) {
        let mut state = self.state();
        if state.deadline.is_none() {
            state.abandoned = 0;
        }
        state.deadline = Some(deadline);
        state.refusing = false;
    }

    /// Send no new write; those in flight may finish (until the deadline).
    pub fn refuse_new(&self) {
        self.state().refusing = true;
    }

    /// Wait until no write is in flight, for `limit` at most: whether none is.
    pub async fn settled(&self, limit: std::time::Duration) -> bool {
        let until = Instant::now() + limit;
        loop {
            let ended = self.0.1.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            if self.state().in_flight == 0 {
                return true;
            }
            tokio::select! {
                () = ended => {}
                () = tokio::time::sleep_until(until) => return self.state().in_flight == 0,
            }
        }
    }

    /// Allow no more writes.
    pub fn close(&self) {
        self.state().deadline = None;
    }

    /// Whether a write was given up on unanswered since the fence was opened (it may still
    /// reach the API server).
    pub fn abandoned(&self) -> bool {
        self.state().abandoned > 0
    }

    /// The deadline, while it has not passed.
    pub fn deadline(&self) -> Option<Instant> {
        let deadline = self.state().deadline?;
        (Instant::now() < deadline).then_some(deadline)
    }

    /// Whether writes may be sent now.
    pub fn is_open(&self) -> bool {
        !self.state().refusing && self.deadline().is_some()
    }

    /// Run `write` while the fence is open: [`Fenced`] if it is closed, or closes before
    /// `write` is done (then `write` is dropped, and counted as abandoned).
    pub async fn guard<T, E>(
        &self,
        write: impl Future<Output = Result<T, E>>,
    ) -> Result<T, BoxError>
    where
        E: Into<BoxError>,
    {
        let mut deadline = {
            let mut state = self.state();
            match state.deadline.filter(|d| Instant::now() < *d) {
                Some(deadline) if !state.refusing => {
                    state.in_flight += 1;
                    deadline
                }
                _ => return Err(Fenced.into()),
            }
        };
        let mut sent = Sent {
            fence: self,
            answered: false,
        };
        tokio::pin!(write);
        loop {
            tokio::select! {
                done = &mut write => {
                    sent.answered = true;
                    return done.map_err(Into::into);
                }
                () = tokio::time::sleep_until(deadline) => {}
            }
            // Moved on by a renewal meanwhile, or passed.
            match self.deadline() {
                Some(later) => deadline = later,
                None => return Err(Fenced.into()),
            }
        }
    }
}

/// `client` with its writes behind `fence` (reads, watches included, pass as they are).
pub fn fenced(client: Client, fence: Fence) -> Client {
    let namespace = client.default_namespace().to_string();
    Client::new(FencedService { client, fence }, namespace)
}

#[derive(Clone)]
struct FencedService {
    client: Client,
    fence: Fence,
}

impl Service<Request<Body>> for FencedService {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let client = self.client.clone();
        let fence = self.fence.clone();
        Box::pin(async move {
            if request.method() == Method::GET {
                return client.send(request).await.map_err(Into::into);
            }
            fence.guard(client.send(request)).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_write_runs_while_open_is_refused_when_closed_and_given_up_at_the_deadline() {
        let fence = Fence::default();
        let quick = || async { Ok::<_, BoxError>(7) };
        assert!(!fence.is_open());
        let refused = fence.guard(quick()).await.expect_err("closed at first");
        assert!(refused.is::<Fenced>(), "{refused}");
        fence.open_until(Instant::now() + Duration::from_secs(10));
        assert_eq!(fence.guard(quick()).await.expect("open"), 7);
        // A write answered after 4 s, while renewals move the deadline on: it completes.
        let slow = async {
            tokio::time::sleep(Duration::from_secs(14)).await;
            Ok::<_, BoxError>(8)
        };
        let renewer = {
            let fence = fence.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(5)).await;
                fence.open_until(Instant::now() + Duration::from_secs(10));
            })
        };
        assert_eq!(fence.guard(slow).await.expect("renewed meanwhile"), 8);
        renewer.await.expect("renewer");
        // Deadline now 15 s after the start, 1 s away: a write that hangs is given up on then,
        // not later.
        let started = Instant::now();
        let hangs = std::future::pending::<Result<(), BoxError>>();
        let given_up = fence.guard(hangs).await.expect_err("past the deadline");
        assert!(given_up.is::<Fenced>());
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        assert!(!fence.is_open());
        fence.open_until(Instant::now() + Duration::from_secs(10));
        fence.close();
        assert!(fence.guard(quick()).await.is_err(), "closed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_dropped_or_given_up_unanswered_counts_as_abandoned_until_a_new_term() {
        let fence = Fence::default();
        fence.open_until(Instant::now() + Duration::from_secs(10));
        let quick = fence.guard(async { Ok::<_, BoxError>(1) }).await;
        assert_eq!(quick.expect("answered"), 1);
        assert!(!fence.abandoned(), "every write was answered");
        // Dropped unanswered (its task stopped by the drain's limit): it may still land.
        let dropped = tokio::time::timeout(
            Duration::from_millis(100),
            fence.guard(std::future::pending::<Result<(), BoxError>>()),
        );
        assert!(dropped.await.is_err());
        assert!(fence.abandoned());
        // Renewed: the same term, still abandoned.
        fence.open_until(Instant::now() + Duration::from_secs(10));
        assert!(fence.abandoned());
        // Closed and opened again: a new term.
        fence.close();
        fence.open_until(Instant::now() + Duration::from_secs(10));
        assert!(!fence.abandoned());
        // Given up on at the deadline.
        fence.open_until(Instant::now() + Duration::from_secs(1));
        let hung = fence
            .guard(std::future::pending::<Result<(), BoxError>>())
            .await;
        assert!(hung.expect_err("past the deadline").is::<Fenced>());
        assert!(fence.abandoned());
    }

    #[tokio::test(start_paused = true)]
    async fn refusing_new_writes_lets_those_in_flight_finish_and_says_when_none_is_left() {
        let fence = Fence::default();
        fence.open_until(Instant::now() + Duration::from_secs(10));
        assert!(fence.settled(Duration::ZERO).await, "nothing in flight");
        let in_flight = {
            let fence = fence.clone();
            tokio::spawn(async move {
                let slow = async {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    Ok::<_, BoxError>(9)
                };
                fence
                    .guard(slow)
                    .await
                    .expect("sent before refusing: finishes")
            })
        };
        tokio::task::yield_now().await;
        fence.refuse_new();
        assert!(!fence.is_open());
        let refused = fence.guard(async { Ok::<_, BoxError>(1) }).await;
        assert!(refused.expect_err("refused").is::<Fenced>());
        let started = Instant::now();
        assert!(
            !fence.settled(Duration::from_millis(500)).await,
            "in flight at 0.5 s"
        );
        assert!(
            fence.settled(Duration::from_secs(5)).await,
            "answered at 1 s"
        );
        assert_eq!(started.elapsed(), Duration::from_secs(1));
        assert_eq!(in_flight.await.expect("joined"), 9);
        assert!(!fence.abandoned(), "refused writes were never sent");
    }
}
