//! Everything a reconcile touches, in one place, so tests can build it around a mocked API; and
//! the background workers that send what reconciles queued.

use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use kube::Client;
use tokio_util::sync::CancellationToken;

use super::metrics::ReconcilerMetrics;
use super::outbox::{self, Outbox};
use super::plan::PlanConfig;
use super::writer::{Key, StatusWriter};
use crate::backoff::Failures;
use crate::clock::Clock;
use crate::controller::Shared;
use crate::controller::calendars::CalendarIndex;
use crate::controller::owner_index::OwnerIndex;
use crate::controller::priority::Gate;
use crate::controller::shard::ShardView;
use crate::controller::workloads::{AllowedKinds, Workloads};
use crate::task::{TaskError, TaskSet};
use crate::telemetry::Throttle;

/// Status writers running at once.
pub const STATUS_WRITERS: usize = 16;
/// Outbox workers (Events, history deletes) running at once.
pub const OUTBOX_WORKERS: usize = 16;
/// The name the status writers are supervised by.
pub const STATUS_WRITER: &str = "status writer";
/// The name the outbox's workers are supervised by.
pub const OUTBOX: &str = "outbox";
/// After the controller stops, how long the background workers may still send what is queued.
pub const FLUSH: Duration = Duration::from_secs(2);

/// Everything a reconcile needs.
pub struct Context {
    /// API client.
    pub client: Client,
    /// The one source of "now".
    pub clock: Arc<dyn Clock>,
    /// Metrics.
    pub metrics: ReconcilerMetrics,
    /// Plan settings.
    pub config: PlanConfig,
    /// Jobs by owner.
    pub index: OwnerIndex,
    /// Creates first: the slot's requests are urgent, the rest waits.
    pub gate: Gate,
    /// Events and history deletes, sent later.
    pub outbox: Outbox,
    /// Status writes, and the freshest view of each CronJob.
    pub status: StatusWriter,
    /// Asks for a reconcile of a CronJob.
    pub reconcile: UnboundedSender<Key>,
    /// Consecutive failed reconciles per CronJob, for backoff.
    pub failures: Failures<Key>,
    /// Keeps failure logs to a trickle during an outage.
    pub log: Throttle,
    /// Which CronJobs this replica schedules (all without `--sharding`).
    pub shard: ShardView,
    /// The Calendars, and which CronJobs name each.
    pub calendars: CalendarIndex,
    /// The workload kinds the CronJobs name, and their watches.
    pub workloads: Workloads,
    /// The CronJobs' completion rules, compiled.
    pub completions: super::kind::Completions,
    /// The Job templates found valid lately, not checked again.
    pub verdicts: super::template::Verdicts,
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

/// The workers that send what reconciles queued: status writes and the outbox.
#[derive(Debug)]
pub struct Background {
    status: StatusWriter,
    outbox: outbox::Workers,
}

impl Background {
    /// Run the status writers and the outbox's workers in `tasks` until its stop, then send
    /// what is still queued for at most [`FLUSH`].
    pub fn spawn(self, tasks: &mut TaskSet<TaskError>) {
        let stop = tasks.stop();
        let status = self.status.run(STATUS_WRITERS, stop.clone(), FLUSH);
        tasks.spawn(STATUS_WRITER, async move {
            status.await;
            Ok(())
        });
        let outbox = self.outbox.run(OUTBOX_WORKERS, stop, FLUSH);
        tasks.spawn(OUTBOX, async move {
            outbox.await;
            Ok(())
        });
    }
}

impl Context {
    /// Whether this replica schedules `cj` (always without `--sharding`).
    pub fn owns(&self, cj: &impl kube::Resource) -> bool {
        self.shard.owns_cronjob(cj)
    }

    /// A context for `shared`'s client, clock and replica, reading workloads from `index` and
    /// creating those of the `allowed` kinds; with the background workers to run beside the
    /// controller and the stream of CronJobs to reconcile again (conflicting status writes,
    /// failed deletes, recovered watches, workload kinds found or lost).
    pub fn new(
        shared: &Shared,
        metrics: ReconcilerMetrics,
        config: PlanConfig,
        index: OwnerIndex,
        allowed: AllowedKinds,
    ) -> (Self, Background, UnboundedReceiver<Key>) {
        let client = shared.client.clone();
        let (reconcile, requests) = unbounded();
        let recorder = crate::controller::recorder(client.clone(), shared.instance.clone());
        let (outbox, workers) = outbox::outbox(
            outbox::CAPACITY,
            client.clone(),
            recorder,
            index.clone(),
            shared.gate.clone(),
            reconcile.clone(),
            metrics.outbox_dropped.clone(),
            metrics.deleted(super::metrics::DELETED_HISTORY),
        );
        let status = StatusWriter::new(client.clone(), shared.gate.clone(), reconcile.clone());
        let workloads = Workloads::new(
            client.clone(),
            shared.scope.clone(),
            shared.shard.clone(),
            index.clone(),
            allowed,
            reconcile.clone(),
            CancellationToken::new(),
        );
        let ctx = Self {
            client,
            clock: Arc::clone(&shared.clock),
            metrics,
            config,
            index,
            gate: shared.gate.clone(),
            outbox,
            status: status.clone(),
            reconcile,
            failures: Failures::default(),
            log: Throttle::default(),
            shard: shared.shard.clone(),
            calendars: CalendarIndex::default(),
            workloads,
            completions: super::kind::Completions::default(),
            verdicts: super::template::Verdicts::default(),
        };
        let background = Background {
            status,
            outbox: workers,
        };
        (ctx, background, requests)
    }
}
