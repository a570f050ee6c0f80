//! Everything a reconcile touches, in one place, so tests can build it around a mocked API.

use std::sync::Arc;

use kube::Client;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::ObjectRef;

use super::metrics::ReconcilerMetrics;
use super::plan::PlanConfig;
use crate::api::CronJob;
use crate::clock::Clock;
use crate::controller::backoff::Failures;
use crate::controller::index::OwnerIndex;
use crate::telemetry::Throttle;

/// Everything a reconcile needs.
pub struct Context {
    /// API client.
    pub client: Client,
    /// Event publisher.
    pub recorder: Recorder,
    /// The one source of "now".
    pub clock: Arc<dyn Clock>,
    /// Metrics.
    pub metrics: ReconcilerMetrics,
    /// Plan settings.
    pub config: PlanConfig,
    /// Jobs by owner.
    pub index: OwnerIndex,
    /// Consecutive failed reconciles per CronJob, for backoff.
    pub failures: Failures<ObjectRef<CronJob>>,
    /// Keeps failure logs to a trickle during an outage.
    pub log: Throttle,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("clock", &self.clock)
            .field("config", &self.config)
            .field("index_len", &self.index.len())
            .finish_non_exhaustive()
    }
}

impl Context {
    /// A context; `index` is the owner index the controller's Job watch keeps current and
    /// `instance` this replica's name on Events (the pod name).
    pub fn new(
        client: Client,
        clock: Arc<dyn Clock>,
        metrics: ReconcilerMetrics,
        config: PlanConfig,
        index: OwnerIndex,
        instance: Option<String>,
    ) -> Self {
        Self {
            recorder: crate::controller::recorder(client.clone(), instance),
            client,
            clock,
            metrics,
            config,
            index,
            failures: Failures::default(),
            log: Throttle::default(),
        }
    }
}
