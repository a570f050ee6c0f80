//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's algorithm
//! (`tools/leaderelection`): every retry period a follower reads the Lease and takes it when it
//! is free or has not changed for a whole lease duration (measured on the follower's own clock,
//! so clock skew between replicas does not matter); the leader renews it every retry period
//! and steps down when it could not renew within the renew deadline. Every write carries the
//! resourceVersion it was based on, so two replicas can never both win.
//!
//! The leader fences itself: its renew deadline counts from the *sending* of its last renewal
//! that succeeded, on its monotonic clock, and no request, however long it hangs (a network
//! that stops forwarding without closing connections), holds it past that deadline. At the
//! deadline the controllers' writes stop ([`Fence`]: refused, and given up on when in flight)
//! and the controllers are cancelled, at least lease duration minus renew deadline (5 s by
//! default) before another replica can take over. Every request of the election is bounded
//! too (half the renew deadline), so a replica cut off rejoins as a follower within seconds of
//! the network's return.
//!
//! On shutdown the leader releases the Lease (empty holder), and a standby takes over at its
//! next retry, within one retry period (1 s by default). This is why kronjob does not use
//! kube-lease-manager: its followers sleep until the lease expires, so a released lease is only
//! noticed after the whole lease duration.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::health::Health;
use crate::client::Fence;
use crate::clock::Clock;
use crate::task::TaskError;

/// Leader election settings (client-go defaults, with a 1 s retry period for fast handover).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity.
    pub identity: String,
    /// How long a lease lasts without renewal.
    pub duration: Duration,
    /// How long the leader keeps trying to renew before it steps down (< `duration`).
    pub renew_deadline: Duration,
    /// How often followers try to acquire and the leader renews.
    pub retry_period: Duration,
}

/// One replica's view of the Lease.
struct Elector {
    api: Api<Lease>,
    config: LeaseConfig,
    clock: Arc<dyn Clock>,
    /// The last Lease seen, and when (our monotonic clock) its record last changed.
    observed: Option<(Lease, Instant)>,
}

fn holder(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()?
        .holder_identity
        .as_deref()
        .filter(|h| !h.is_empty())
}

/// The parts of a Lease that tell whether its holder is alive: a change resets the expiry.
fn record(lease: &Lease) -> Option<LeaseSpec> {
    lease.spec.clone()
}

impl Elector {
    fn new(api: Api<Lease>, config: LeaseConfig, clock: Arc<dyn Clock>) -> Self {
        Self {
            api,
            config,
            clock,
            observed: None,
        }
    }

    fn holds(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|(l, _)| holder(l) == Some(self.config.identity.as_str()))
    }

    fn observe(&mut self, lease: Lease) {
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|(old, _)| record(old) != record(&lease));
        let at = match &self.observed {
            Some((_, at)) if !changed => *at,
            _ => Instant::now(),
        };
        self.observed = Some((lease, at));
    }

    fn spec(&self, previous: Option<&LeaseSpec>) -> LeaseSpec {
        let now = MicroTime(self.clock.now());
        let duration = i32::try_from(self.config.duration.as_secs()).unwrap_or(i32::MAX);
        let mine = previous.and_then(|s| s.holder_identity.as_deref())
            == Some(self.config.identity.as_str());
        let transitions = previous.and_then(|s| s.lease_transitions).unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(duration),
            acquire_time: if mine {
                previous.and_then(|s| s.acquire_time.clone())
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(if mine || previous.is_none() {
                transitions
            } else {
                transitions + 1
            }),
            ..LeaseSpec::default()
        }
    }

    /// One attempt to acquire or renew: `Ok(true)` when this replica holds the Lease now.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        // The leader renews on top of what it last wrote; a conflict means someone else wrote.
        if self.holds()
            && let Some((lease, _)) = &self.observed
        {
            let mut renewed = lease.clone();
            renewed.spec = Some(self.spec(lease.spec.as_ref()));
            match self
                .api
                .replace(&self.config.name, &PostParams::default(), &renewed)
                .await
            {
                Ok(written) => {
                    self.observe(written);
                    return Ok(true);
                }
                Err(kube::Error::Api(s)) if s.is_conflict() => self.observed = None,
                Err(e) => return Err(e),
            }
        }
        let Some(current) = self.api.get_opt(&self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(self.spec(None)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(created);
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(false),
                Err(e) => Err(e),
            };
        };
        self.observe(current.clone());
        let taken = holder(&current).is_some_and(|h| h != self.config.identity);
        if taken {
            let valid_for = current
                .spec
                .as_ref()
                .and_then(|s| s.lease_duration_seconds)
                .map_or(self.config.duration, |s| {
                    Duration::from_secs(u64::try_from(s).unwrap_or(0))
                });
            let changed_at = self.observed.as_ref().map_or_else(Instant::now, |o| o.1);
            if changed_at.elapsed() < valid_for {
                return Ok(false);
            }
        }
        let mut acquired = current.clone();
        acquired.spec = Some(self.spec(current.spec.as_ref()));
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &acquired)
            .await
        {
            Ok(written) => {
                self.observe(written);
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.is_conflict() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Give the Lease up, if held: an empty holder with a 1 s duration, as client-go does, so
    /// a standby takes it at its next retry.
    async fn release(&mut self) -> Result<(), kube::Error> {
        let Some((lease, _)) = self
            .observed
            .take()
            .filter(|(l, _)| holder(l) == Some(self.config.identity.as_str()))
        else {
            return Ok(());
        };
        let now = MicroTime(self.clock.now());
        let mut released = lease.clone();
        released.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            lease_transitions: lease.spec.as_ref().and_then(|s| s.lease_transitions),
            ..LeaseSpec::default()
        });
        self.api
            .replace(&self.config.name, &PostParams::default(), &released)
            .await
            .map(|_| ())
    }
}

/// Run `work` whenever this replica leads, until `shutdown`; without a lease config the
/// replica leads for its whole life. `work` starts before this replica leads and is told
/// through its `leading` receiver when it does: a standby keeps its caches warm and acts the
/// moment it holds the Lease. While it leads, `fence` is open until its renew deadline; when
/// leadership is lost, `fence` closes, `work`'s token is cancelled and a new standby `work`
/// starts (nothing of a term that led carries over); on shutdown the leader stops acting and
/// writing, releases the Lease once its writes in flight are answered, and lets `work` drain.
/// `work` failing (a controller stopped on its own) ends the election with its error.
pub async fn lead<F, Fut>(
    api: Option<Api<Lease>>,
    config: Option<LeaseConfig>,
    clock: Arc<dyn Clock>,
    health: Arc<Health>,
    fence: Fence,
    shutdown: CancellationToken,
    mut work: F,
) -> Result<(), TaskError>
where
    F: FnMut(CancellationToken, watch::Receiver<bool>) -> Fut,
    Fut: Future<Output = Result<(), TaskError>>,
{
    let (Some(api), Some(config)) = (api, config) else {
        health.set_leader(true);
        let (_leads, leading) = watch::channel(true);
        let result = work(shutdown.child_token(), leading).await;
        health.set_leader(false);
        return result;
    };
    let mut elector = Elector::new(api, config.clone(), clock);
    info!(lease = %config.name, namespace = %config.namespace, identity = %config.identity, "waiting for leadership");
    loop {
        let (leads, leading) = watch::channel(false);
        let token = shutdown.child_token();
        let running = work(token.clone(), leading);
        tokio::pin!(running);
        // Stand by (the controllers' caches filling) until the Lease is ours.
        let acquired = tokio::select! {
            result = &mut running => {
                // Stopped with the process, or a standby's controllers ended on their own.
                result?;
                if shutdown.is_cancelled() {
                    return Ok(());
                }
                return Err(TaskError::Ended(super::tasks::CONTROLLERS));
            }
            acquired = follow(&mut elector, &config, &fence, &shutdown) => acquired,
        };
        if !acquired {
            token.cancel();
            return running.await;
        }
        info!(identity = %config.identity, "leading: the controllers act");
        health.set_leader(true);
        leads.send_replace(true);
        let outcome = tokio::select! {
            result = &mut running => Some(result),
            lost = renew_until_lost(&mut elector, &config, &fence, &shutdown) => {
                if let Some(why) = lost {
                    // The fence closed at the deadline already; the controllers stop now.
                    fence.close();
                    warn!(identity = %config.identity, why, "lost leadership: stopping controllers");
                }
                None
            }
        };
        if outcome.is_none() && shutdown.is_cancelled() {
            // A graceful stop (a rollout): hand over now, not after the drain.
            leads.send_replace(false);
            hand_over(&mut elector, &config, &fence).await;
        }
        let result = match outcome {
            Some(result) => result,
            None => {
                token.cancel();
                running.await
            }
        };
        health.set_leader(false);
        fence.close();
        if shutdown.is_cancelled() || result.is_err() {
            // Drained: nothing of this term writes any more.
            release(&mut elector, &config, &fence).await;
            return result;
        }
    }
}

/// How long a leader stopping gracefully waits for its writes in flight before it hands over.
pub const HANDOVER_SETTLE: Duration = Duration::from_secs(2);

/// A graceful stop of the leader: send no new write (the status writes and Events still
/// queued from the last slot are left to the next leader, which reconciles every CronJob when
/// it takes over), wait for the writes in flight to be answered ([`HANDOVER_SETTLE`] at most),
/// close the fence and release the Lease; a standby takes over at its next retry instead of
/// after this replica's drain (at a slot's scale, its queued status writes alone take tens of
/// seconds).
async fn hand_over(elector: &mut Elector, config: &LeaseConfig, fence: &Fence) {
    fence.refuse_new();
    if !fence.settled(HANDOVER_SETTLE).await {
        warn!(lease = %config.name, "writes still unanswered at the handover: given up on");
    }
    fence.close();
    release(elector, config, fence).await;
}

/// Release the Lease if this replica still holds it, so a standby takes over at its next retry,
/// unless a write of the term was given up on unanswered (the drain's limit, a hung request):
/// the API server may still carry it out, so the Lease is left to expire, and a standby takes
/// it no earlier than a lease duration after the last renewal, as when the leader dies.
async fn release(elector: &mut Elector, config: &LeaseConfig, fence: &Fence) {
    if !elector.holds() {
        return;
    }
    if fence.abandoned() {
        warn!(lease = %config.name, "a write was given up on unanswered: the lease is left to expire");
        elector.observed = None;
        return;
    }
    match elector.release().await {
        Ok(()) => info!(lease = %config.name, "lease released"),
        Err(e) => warn!(error = %e, lease = %config.name, "cannot release the lease"),
    }
}

/// Follow until this replica holds the Lease (`true`, with `fence` open until its renew
/// deadline) or the process stops (`false`).
async fn follow(
    elector: &mut Elector,
    config: &LeaseConfig,
    fence: &Fence,
    shutdown: &CancellationToken,
) -> bool {
    loop {
        let sent = Instant::now();
        match attempt(elector, config, None, shutdown).await {
            Attempt::Held => {
                fence.open_until(sent + config.renew_deadline);
                return true;
            }
            Attempt::NotHeld | Attempt::Failed => {}
            Attempt::Shutdown => return false,
        }
        tokio::select! {
            () = shutdown.cancelled() => return false,
            () = tokio::time::sleep(crate::backoff::lease_retry(config.retry_period)) => {}
        }
    }
}

/// How one try to acquire or renew ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// This replica holds the Lease.
    Held,
    /// Another replica holds it.
    NotHeld,
    /// The API server could not be asked, or did not answer in time.
    Failed,
    /// The process is stopping.
    Shutdown,
}

/// Try to acquire or renew, for half the renew deadline at most, and never past `deadline`.
async fn attempt(
    elector: &mut Elector,
    config: &LeaseConfig,
    deadline: Option<Instant>,
    shutdown: &CancellationToken,
) -> Attempt {
    let mut limit = Instant::now() + config.renew_deadline / 2;
    if let Some(deadline) = deadline {
        limit = limit.min(deadline);
    }
    tokio::select! {
        () = shutdown.cancelled() => Attempt::Shutdown,
        tried = tokio::time::timeout_at(limit, elector.try_acquire_or_renew()) => match tried {
            Ok(Ok(true)) => Attempt::Held,
            Ok(Ok(false)) => Attempt::NotHeld,
            Ok(Err(e)) => {
                warn!(error = %e, lease = %config.name, "cannot read, take or renew the lease");
                Attempt::Failed
            }
            Err(_) => {
                warn!(lease = %config.name, "the API server did not answer about the lease in time");
                Attempt::Failed
            }
        },
    }
}

/// Renew every retry period, moving `fence` on to each successful renewal's send plus the
/// renew deadline; return when shutdown is asked for (`None`), or why leadership is lost: no
/// renewal succeeded by the deadline (another replica may take over a lease duration after
/// the last one), or another replica holds the Lease.
async fn renew_until_lost(
    elector: &mut Elector,
    config: &LeaseConfig,
    fence: &Fence,
    shutdown: &CancellationToken,
) -> Option<&'static str> {
    loop {
        let Some(deadline) = fence.deadline() else {
            return Some("no renewal succeeded within the renew deadline");
        };
        let next = (Instant::now() + config.retry_period).min(deadline);
        tokio::select! {
            () = shutdown.cancelled() => return None,
            () = tokio::time::sleep_until(next) => {}
        }
        if Instant::now() >= deadline {
            continue;
        }
        let sent = Instant::now();
        match attempt(elector, config, Some(deadline), shutdown).await {
            Attempt::Held => fence.open_until(sent + config.renew_deadline),
            Attempt::NotHeld => return Some("another replica holds the lease"),
            Attempt::Failed => {}
            Attempt::Shutdown => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FixedClock;
    use crate::testing::api_script::{Expect, mock_client};
    use crate::testing::fixtures::t;
    use http::StatusCode;
    use serde_json::json;

    const PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/lead";

    fn config(identity: &str) -> LeaseConfig {
        LeaseConfig {
            name: "lead".into(),
            namespace: "ns".into(),
            identity: identity.into(),
            duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(1),
        }
    }

    fn lease(holder: &str, rv: &str) -> serde_json::Value {
        lease_for(holder, rv, 15)
    }

    fn lease_for(holder: &str, rv: &str, seconds: i32) -> serde_json::Value {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "lead", "namespace": "ns", "resourceVersion": rv},
               "spec": {"holderIdentity": holder, "leaseDurationSeconds": seconds,
                        "renewTime": "2024-01-01T00:00:00.000000Z", "leaseTransitions": 2}})
    }

    fn elector(identity: &str) -> (Elector, crate::testing::api_script::Script) {
        let (client, script) = mock_client();
        let clock = Arc::new(FixedClock::new(t("2024-01-01T00:00:10Z")));
        (
            Elector::new(Api::namespaced(client, "ns"), config(identity), clock),
            script,
        )
    }

    #[tokio::test]
    async fn a_missing_lease_is_created_and_then_renewed_without_a_read() {
        let (mut e, script) = elector("me");
        let verdict = script.run(vec![
            Expect::get(PATH).fails(StatusCode::NOT_FOUND, "NotFound"),
            Expect::post("/apis/coordination.k8s.io/v1/namespaces/ns/leases").check(|b| {
                assert_eq!(b["spec"]["holderIdentity"], "me");
                assert_eq!(b["spec"]["leaseDurationSeconds"], 15);
                assert_eq!(b["spec"]["leaseTransitions"], 0);
            }),
            // Renewal: one PUT on top of what was written, with its resourceVersion.
            Expect::put(PATH).check(|b| {
                assert_eq!(b["metadata"]["resourceVersion"], "2");
                assert_eq!(b["spec"]["holderIdentity"], "me");
                assert_eq!(b["spec"]["leaseTransitions"], 0);
            }),
        ]);
        assert!(e.try_acquire_or_renew().await.expect("acquire"));
        assert!(e.try_acquire_or_renew().await.expect("renew"));
        drop(e);
        verdict.await.expect("requests as scripted");
    }

    #[tokio::test]
    async fn a_held_lease_is_left_alone_until_it_stops_changing_for_a_whole_duration() {
        // The holder's lease lasts 1 s (its own duration counts, as in client-go).
        let held = || lease_for("other", "5", 1);
        let (mut e, script) = elector("me");
        let renewed = json!({"spec": {"renewTime": "2024-01-01T00:00:01.000000Z"}});
        let mut changed = held();
        json_patch::merge(&mut changed, &renewed);
        let verdict = script.run(vec![
            Expect::get(PATH).ok(held()),
            // The holder renewed: the record changed, so the wait starts over.
            Expect::get(PATH).ok(changed.clone()),
            Expect::get(PATH).ok(changed.clone()),
            // Unchanged for a whole duration of our own clock: expired, taken with the read
            // version.
            Expect::get(PATH).ok(changed),
            Expect::put(PATH).check(|b| {
                assert_eq!(b["metadata"]["resourceVersion"], "5");
                assert_eq!(b["spec"]["holderIdentity"], "me");
                assert_eq!(
                    b["spec"]["leaseTransitions"], 3,
                    "a new holder counts a transition"
                );
            }),
        ]);
        assert!(!e.try_acquire_or_renew().await.expect("read"));
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(
            !e.try_acquire_or_renew()
                .await
                .expect("changed: not expired")
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(
            !e.try_acquire_or_renew()
                .await
                .expect("0.7 s unchanged: not expired")
        );
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(e.try_acquire_or_renew().await.expect("take over"));
        drop(e);
        verdict.await.expect("requests as scripted");
    }

    #[tokio::test]
    async fn a_released_lease_is_taken_at_once_and_a_lost_race_is_not_an_error() {
        let (mut e, script) = elector("me");
        let verdict = script.run(vec![
            Expect::get(PATH).ok(lease("", "7")),
            Expect::put(PATH).fails(StatusCode::CONFLICT, "Conflict"),
            Expect::get(PATH).ok(lease("", "8")),
            Expect::put(PATH).check(|b| assert_eq!(b["metadata"]["resourceVersion"], "8")),
        ]);
        assert!(!e.try_acquire_or_renew().await.expect("lost race"));
        assert!(e.try_acquire_or_renew().await.expect("acquired"));
        drop(e);
        verdict.await.expect("requests as scripted");
    }

    #[tokio::test]
    async fn release_empties_the_holder_and_only_the_holder_releases() {
        let (mut e, script) = elector("me");
        let verdict = script.run(vec![
            Expect::get(PATH).ok(lease("me", "3")),
            Expect::put(PATH),
            Expect::put(PATH).check(|b| {
                assert!(b["spec"]["holderIdentity"].is_null(), "{b}");
                assert_eq!(b["spec"]["leaseDurationSeconds"], 1);
            }),
        ]);
        assert!(e.try_acquire_or_renew().await.expect("acquire"));
        e.release().await.expect("release");
        // Released: a second release writes nothing.
        e.release().await.expect("no-op");
        drop(e);
        verdict.await.expect("requests as scripted");
    }

    /// A scripted API server that can also leave a request unanswered: for each request in
    /// turn, `Some((status, body))` answers it, `None` holds it forever (a network that stopped
    /// forwarding). Returns the times (since `start`) the requests came, with their method.
    fn server(
        mut handle: tower_test::mock::Handle<
            http::Request<kube::client::Body>,
            http::Response<kube::client::Body>,
        >,
        start: Instant,
        mut answer: impl FnMut(&http::Method, usize) -> Option<(StatusCode, serde_json::Value)>
        + Send
        + 'static,
    ) -> tokio::task::JoinHandle<Vec<(http::Method, Duration)>> {
        tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut held = Vec::new();
            while let Some((request, send)) = handle.next_request().await {
                let method = request.method().clone();
                seen.push((method.clone(), start.elapsed()));
                match answer(&method, seen.len()) {
                    Some((status, body)) => send.send_response(
                        http::Response::builder()
                            .status(status)
                            .body(kube::client::Body::from(body.to_string().into_bytes()))
                            .expect("response"),
                    ),
                    None => held.push(send),
                }
            }
            seen
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_whose_renewal_hangs_fences_itself_at_its_renew_deadline() {
        let (service, handle) = tower_test::mock::pair();
        let client = kube::Client::new(service, "ns");
        let start = Instant::now();
        // Acquired at 0 s, renewed at 1, 2 and 3 s; from the renewal at 4 s on, nothing is
        // answered any more.
        let requests = server(handle, start, |method, n| match (method.as_str(), n) {
            ("GET", 1) => Some((
                StatusCode::NOT_FOUND,
                crate::testing::api_script::status_body(StatusCode::NOT_FOUND, "NotFound"),
            )),
            ("POST", 2) => Some((StatusCode::CREATED, lease("me", "1"))),
            ("PUT", 3..=5) => Some((StatusCode::OK, lease("me", &n.to_string()))),
            _ => None,
        });
        let clock = Arc::new(FixedClock::new(t("2024-01-01T00:00:10Z")));
        let fence = Fence::default();
        let shutdown = CancellationToken::new();
        let stopped = Arc::new(std::sync::Mutex::new(None));
        let work = {
            let stopped = Arc::clone(&stopped);
            let fence = fence.clone();
            move |token: CancellationToken, mut leading: watch::Receiver<bool>| {
                let stopped = Arc::clone(&stopped);
                let fence = fence.clone();
                async move {
                    tokio::select! {
                        led = leading.wait_for(|leads| *leads) => {
                            led.expect("told");
                        }
                        // A standby term that never led.
                        () = token.cancelled() => return Ok(()),
                    }
                    assert!(fence.is_open(), "the fence opens before the work acts");
                    token.cancelled().await;
                    *stopped.lock().expect("lock") = Some((start.elapsed(), fence.is_open()));
                    Ok(())
                }
            }
        };
        let health = Health::new(false);
        let elected = tokio::spawn(lead(
            Some(Api::namespaced(client, "ns")),
            Some(config("me")),
            clock,
            Arc::clone(&health),
            fence.clone(),
            shutdown.clone(),
            work,
        ));
        // Just before the deadline (the last renewal answered was sent at 3 s, plus 10 s) the
        // fence is open; at it, closed and the work cancelled.
        tokio::time::sleep_until(start + Duration::from_millis(12_900)).await;
        assert!(fence.is_open(), "open until the renew deadline");
        assert!(health.is_leader());
        tokio::time::sleep_until(start + Duration::from_millis(13_100)).await;
        assert!(!fence.is_open(), "closed at the renew deadline");
        assert!(!health.is_leader());
        let (at, open) = stopped.lock().expect("lock").expect("work stopped");
        assert_eq!(
            at,
            Duration::from_secs(13),
            "cancelled at the deadline, not later"
        );
        assert!(!open, "writes stopped before the work was told to stop");
        // A follower takes over no earlier than 15 s after it saw the last renewal, which the
        // server stored after 3 s: 5 s after this replica stopped.
        assert!(at + Duration::from_secs(5) <= Duration::from_secs(3) + Duration::from_secs(15));
        // Cut off, it keeps trying as a follower, each request given up on after 5 s.
        tokio::time::sleep_until(start + Duration::from_secs(30)).await;
        shutdown.cancel();
        elected.await.expect("joined").expect("no error");
        let seen = requests.await.expect("server");
        let times: Vec<u64> = seen.iter().map(|(_, at)| at.as_secs()).collect();
        // Renewals at 1..4 s; the one at 4 s hangs until 9 s, the next is sent at 10 s and
        // hangs until the deadline; then the follower's reads, each given up on after 5 s.
        assert_eq!(&times[..6], &[0, 0, 1, 2, 3, 4], "{seen:?}");
        assert_eq!(times[6], 10, "{seen:?}");
        assert!(times[7] >= 13 && times[7] <= 15, "{seen:?}");
        for pair in times[7..].windows(2) {
            assert!(pair[1] - pair[0] >= 5 && pair[1] - pair[0] <= 7, "{seen:?}");
        }
    }
}
