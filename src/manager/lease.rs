//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's algorithm
//! (`tools/leaderelection`): every retry period a follower reads the Lease and takes it when it
//! is free or has not changed for a whole lease duration (measured on the follower's own clock,
//! so clock skew between replicas does not matter); the leader renews it every retry period
//! and steps down when it could not renew within the renew deadline. Every write carries the
//! resourceVersion it was based on, so two replicas can never both win.
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
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::health::Health;
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
/// replica leads for its whole life. When leadership is lost, `work`'s token is cancelled and
/// the replica waits to lead again; on shutdown the Lease is released once `work` has drained.
/// `work` failing (a controller stopped on its own) ends the election with its error.
pub async fn lead<F, Fut>(
    api: Option<Api<Lease>>,
    config: Option<LeaseConfig>,
    clock: Arc<dyn Clock>,
    health: Arc<Health>,
    shutdown: CancellationToken,
    mut work: F,
) -> Result<(), TaskError>
where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), TaskError>>,
{
    let (Some(api), Some(config)) = (api, config) else {
        health.set_leader(true);
        let result = work(shutdown.child_token()).await;
        health.set_leader(false);
        return result;
    };
    let mut elector = Elector::new(api, config.clone(), clock);
    info!(lease = %config.name, namespace = %config.namespace, identity = %config.identity, "waiting for leadership");
    loop {
        // Follow until the Lease is ours.
        loop {
            match elector.try_acquire_or_renew().await {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => warn!(error = %e, lease = %config.name, "cannot read or take the lease"),
            }
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                () = tokio::time::sleep(crate::backoff::lease_retry(config.retry_period)) => {}
            }
        }
        info!(identity = %config.identity, "leading: starting controllers");
        health.set_leader(true);
        let token = shutdown.child_token();
        let running = work(token.clone());
        tokio::pin!(running);
        let outcome = tokio::select! {
            result = &mut running => Some(result),
            () = renew_until_lost(&mut elector, &config, &shutdown) => None,
        };
        let result = match outcome {
            Some(result) => result,
            None => {
                if !shutdown.is_cancelled() {
                    warn!(identity = %config.identity, "lost leadership: stopping controllers");
                }
                token.cancel();
                running.await
            }
        };
        health.set_leader(false);
        if shutdown.is_cancelled() || result.is_err() {
            match elector.release().await {
                Ok(()) => info!(lease = %config.name, "lease released"),
                Err(e) => warn!(error = %e, lease = %config.name, "cannot release the lease"),
            }
            return result;
        }
    }
}

/// Renew every retry period; return when shutdown is asked for, or when no renewal succeeded
/// within the renew deadline (another replica may take over after the lease duration).
async fn renew_until_lost(
    elector: &mut Elector,
    config: &LeaseConfig,
    shutdown: &CancellationToken,
) {
    let mut renewed = Instant::now();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(config.retry_period) => {}
        }
        match elector.try_acquire_or_renew().await {
            Ok(true) => renewed = Instant::now(),
            Ok(false) => return,
            Err(e) => warn!(error = %e, lease = %config.name, "cannot renew the lease"),
        }
        if renewed.elapsed() >= config.renew_deadline {
            return;
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
}
