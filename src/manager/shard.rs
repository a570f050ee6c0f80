//! Membership of a shard group (`--sharding`): every replica holds its own
//! `coordination.k8s.io/v1` Lease, `<group>-shard-<identity>`, labelled
//! [`GROUP_LABEL`]`=<group>`, renews it every third of its duration, and watches the group's
//! Leases. The members are the holders of the Leases renewed within their duration; whenever
//! they change, the new [`Assignment`] is published to the controllers.
//!
//! A replica that dies stops renewing, and the others drop it once its Lease has expired (the
//! lease duration, 15 s by default). On shutdown a replica deletes its Lease after its
//! controllers have drained, and the others take its CronJobs over at once. A replica that
//! cannot renew its own Lease for a whole duration drops itself, so it stops scheduling when
//! the others take over its CronJobs. Expiry compares `renewTime` with this replica's clock:
//! replicas' clocks must agree within the lease duration minus the renew period (10 s).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::clock::Clock;
use crate::controller::shard::{Assignment, ShardMetrics};

/// The label that groups the Leases of one shard group.
pub const GROUP_LABEL: &str = "batch.kronjob.dev/shard-group";
/// How often the members are recomputed from the watched Leases (expiry needs no event).
pub const RECOMPUTE_EVERY: Duration = Duration::from_secs(1);

/// Settings of one replica's membership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardConfig {
    /// The group: replicas of one release share it.
    pub group: String,
    /// Namespace of the Leases.
    pub namespace: String,
    /// This replica's identity.
    pub identity: String,
    /// How long a Lease lasts without renewal: a dead replica loses its CronJobs after this.
    pub duration: Duration,
}

impl ShardConfig {
    /// The name of this replica's Lease.
    pub fn lease_name(&self) -> String {
        format!("{}-shard-{}", self.group, self.identity)
    }

    /// How often the Lease is renewed: a third of its duration.
    pub fn renew_every(&self) -> Duration {
        self.duration / 3
    }

    fn selector(&self) -> String {
        format!("{GROUP_LABEL}={}", self.group)
    }
}

/// The holders of `leases` renewed within their duration at `now`, sorted.
pub fn live_members<'a>(
    leases: impl IntoIterator<Item = &'a Lease>,
    now: Timestamp,
) -> Vec<String> {
    let mut members: Vec<String> = leases
        .into_iter()
        .filter_map(|lease| {
            let spec = lease.spec.as_ref()?;
            let holder = spec.holder_identity.as_deref().filter(|h| !h.is_empty())?;
            let renewed = spec.renew_time.as_ref()?.0;
            let seconds = i64::from(spec.lease_duration_seconds?.max(0));
            let expires = renewed
                .checked_add(SignedDuration::from_secs(seconds))
                .ok()?;
            (expires > now).then(|| holder.to_string())
        })
        .collect();
    members.sort();
    members.dedup();
    members
}

/// This replica's Lease: writes it, and knows when it last did.
struct Own {
    api: Api<Lease>,
    config: ShardConfig,
    clock: Arc<dyn Clock>,
    /// The Lease as last written (its resourceVersion for the next renewal).
    written: Option<Lease>,
    /// When the last renewal succeeded (this replica's monotonic clock).
    renewed: Option<Instant>,
}

impl Own {
    fn spec(&self) -> LeaseSpec {
        let now = MicroTime(self.clock.now());
        let acquired = self
            .written
            .as_ref()
            .and_then(|l| l.spec.as_ref()?.acquire_time.clone());
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(self.config.duration.as_secs()).unwrap_or(i32::MAX),
            ),
            acquire_time: Some(acquired.unwrap_or_else(|| now.clone())),
            renew_time: Some(now),
            ..LeaseSpec::default()
        }
    }

    /// Renew on top of the last write; after a conflict or a deletion, read and write again
    /// (create when missing).
    async fn renew(&mut self) -> Result<(), kube::Error> {
        let name = self.config.lease_name();
        let params = PostParams::default();
        if let Some(mut lease) = self.written.take() {
            lease.spec = Some(self.spec());
            match self.api.replace(&name, &params, &lease).await {
                Ok(written) => return self.wrote(written),
                Err(kube::Error::Api(s)) if s.is_conflict() || s.is_not_found() => {}
                Err(e) => {
                    self.written = Some(lease);
                    return Err(e);
                }
            }
        }
        let written = match self.api.get_opt(&name).await? {
            Some(mut lease) => {
                lease.spec = Some(self.spec());
                self.api.replace(&name, &params, &lease).await?
            }
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(name),
                        namespace: Some(self.config.namespace.clone()),
                        labels: Some(BTreeMap::from([(
                            GROUP_LABEL.to_string(),
                            self.config.group.clone(),
                        )])),
                        ..ObjectMeta::default()
                    },
                    spec: Some(self.spec()),
                };
                self.api.create(&params, &lease).await?
            }
        };
        self.wrote(written)
    }

    fn wrote(&mut self, lease: Lease) -> Result<(), kube::Error> {
        self.written = Some(lease);
        self.renewed = Some(Instant::now());
        Ok(())
    }

    /// Whether this replica's own Lease is live by its own clock.
    fn live(&self) -> bool {
        self.renewed
            .is_some_and(|at| at.elapsed() < self.config.duration)
    }

    /// Delete the Lease, so the others take over at once.
    async fn release(&mut self) {
        let name = self.config.lease_name();
        self.renewed = None;
        match self.api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => info!(lease = %name, "shard lease released"),
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => warn!(error = %e, lease = %name, "cannot release the shard lease"),
        }
    }
}

/// The members at `now`: the other live holders in `leases`, and this replica while its own
/// renewals are current.
fn members(leases: &Store<Lease>, own: &Own) -> Assignment {
    let state = leases.state();
    let me = own.config.identity.as_str();
    let others = live_members(state.iter().map(|l| l.as_ref()), own.clock.now())
        .into_iter()
        .filter(|m| m != me);
    let mine = own.live().then(|| me.to_string());
    Assignment::new(me, others.chain(mine))
}

/// Hold this replica's Lease and publish the group's assignment on `publish` until `release`
/// is cancelled (after the controllers have drained); then delete the Lease.
pub async fn membership(
    api: Api<Lease>,
    config: ShardConfig,
    clock: Arc<dyn Clock>,
    publish: watch::Sender<Arc<Assignment>>,
    metrics: ShardMetrics,
    release: CancellationToken,
) {
    let (leases, writer) = reflector::store::<Lease>();
    // Nothing is published before the group's Leases have been listed once: a replica that
    // joins must not take every CronJob for itself while it has not seen the others yet.
    let listed = std::sync::atomic::AtomicBool::new(false);
    let events = watcher(
        api.clone(),
        watcher::Config::default().labels(&config.selector()),
    )
    .backoff(crate::backoff::watch_backoff())
    .reflect(writer)
    .for_each(|event| {
        match event {
            Ok(watcher::Event::InitDone) => listed.store(true, Ordering::Relaxed),
            Ok(_) => {}
            Err(e) => warn!(error = %e, "shard lease watch failed; retrying"),
        }
        futures::future::ready(())
    });
    // The watch retries for ever; should it end, the periodic recomputation goes on.
    let events = async {
        events.await;
        futures::future::pending::<()>().await;
    };
    tokio::pin!(events);
    info!(group = %config.group, identity = %config.identity, lease = %config.lease_name(), "joining the shard group");
    let mut own = Own {
        api,
        config: config.clone(),
        clock,
        written: None,
        renewed: None,
    };
    let mut renew = tokio::time::interval(config.renew_every());
    let mut recompute = tokio::time::interval(RECOMPUTE_EVERY);
    loop {
        tokio::select! {
            () = release.cancelled() => break,
            () = &mut events => {}
            _ = renew.tick() => {
                if let Err(e) = own.renew().await {
                    warn!(error = %e, lease = %config.lease_name(), "cannot renew the shard lease");
                }
            }
            _ = recompute.tick() => {}
        }
        if !listed.load(Ordering::Relaxed) {
            continue;
        }
        let next = members(&leases, &own);
        if next.members() != publish.borrow().members() {
            info!(members = ?next.members(), member = next.is_member(), "shard group changed");
            metrics
                .members
                .set(i64::try_from(next.members().len()).unwrap_or(i64::MAX));
            publish.send_replace(Arc::new(next));
        }
    }
    publish.send_replace(Arc::new(Assignment::new(&config.identity, Vec::new())));
    own.release().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::t;

    fn lease(holder: &str, renewed: &str, seconds: i32) -> Lease {
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                renew_time: Some(MicroTime(t(renewed))),
                lease_duration_seconds: Some(seconds),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn members_are_the_holders_of_leases_renewed_within_their_duration() {
        let leases = [
            lease("b", "2024-01-01T10:00:00Z", 15),
            lease("a", "2024-01-01T10:00:05Z", 15),
            // Expired exactly now: gone.
            lease("dead", "2024-01-01T09:59:55Z", 15),
            lease("", "2024-01-01T10:00:05Z", 15),
            Lease::default(),
        ];
        assert_eq!(live_members(&leases, t("2024-01-01T10:00:10Z")), ["a", "b"]);
        assert_eq!(live_members(&leases, t("2024-01-01T10:00:15Z")), ["a"]);
        assert!(live_members(&leases, t("2024-01-01T10:00:20Z")).is_empty());
    }

    #[test]
    fn a_replica_names_its_lease_after_its_group_and_renews_three_times_per_duration() {
        let config = ShardConfig {
            group: "team-a-kronjob".into(),
            namespace: "ns".into(),
            identity: "team-a-kronjob-5d8-x2".into(),
            duration: Duration::from_secs(15),
        };
        assert_eq!(
            config.lease_name(),
            "team-a-kronjob-shard-team-a-kronjob-5d8-x2"
        );
        assert_eq!(config.renew_every(), Duration::from_secs(5));
        assert_eq!(
            config.selector(),
            "batch.kronjob.dev/shard-group=team-a-kronjob"
        );
    }
}
