//! Prometheus metrics of the CronJob reconciler.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Buckets of the creation-skew histogram, seconds (0.01 s .. 60 s).
pub const SKEW_BUCKETS: [f64; 12] = [
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
/// Buckets of the reconcile-duration histogram, seconds.
pub const DURATION_BUCKETS: [f64; 10] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

/// Label set of the error counter: a fixed category, never a message.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// See [`super::error::Error::category`].
    pub category: &'static str,
}

/// Label set of the template-check counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `valid`, `invalid`, `timeout` or `error` (see [`crate::workload::Verdict::label`]).
    pub result: &'static str,
}

/// Label set of the Job-deletion counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeleteLabels {
    /// `history` (beyond the history limits) or `replace` (concurrencyPolicy Replace).
    pub reason: &'static str,
}

/// The `reason` of a history delete.
pub const DELETED_HISTORY: &str = "history";
/// The `reason` of a Replace delete.
pub const DELETED_REPLACE: &str = "replace";

/// Label set of the queue-drop counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueDropLabels {
    /// `full`, `missed` (startingDeadlineSeconds passed in the queue) or `cleared` (the policy
    /// is no longer Enqueue).
    pub reason: &'static str,
    /// `DropOldest` or `DropNewest` for `full`, else empty.
    pub policy: &'static str,
}

/// Metrics of the CronJob reconciler. Cheap to clone (shared handles).
#[derive(Clone, Debug)]
pub struct ReconcilerMetrics {
    /// Scheduled time to Job creation, seconds.
    pub job_creation_skew: Histogram,
    /// Reconciles run.
    pub reconciles: Counter,
    /// Reconcile wall time, seconds.
    pub reconcile_duration: Histogram,
    /// Failed reconciles by error category.
    pub reconcile_errors: Family<ErrorLabels, Counter>,
    /// CronJobs in the controller's cache.
    pub managed_cronjobs: Gauge,
    /// Events and history deletes dropped because the outbox was full.
    pub outbox_dropped: Counter,
    /// Dry runs of the Job template (once per generation), by result.
    pub template_dry_runs: Family<ResultLabels, Counter>,
    /// Jobs created for a slot.
    pub jobs_created: Counter,
    /// Jobs deleted, by reason.
    pub jobs_deleted: Family<DeleteLabels, Counter>,
    /// CronJobs the failure policy suspended.
    pub suspended_after_failures: Counter,
    /// Queued slots dropped (Enqueue), by reason and `whenFull`.
    pub queue_dropped: Family<QueueDropLabels, Counter>,
    /// The per-CronJob series, read from the controller's cache at scrape time.
    pub cronjobs: super::series::CronJobSeries,
    /// Slots that fell due and did not run, by reason (`calendar`).
    pub slots_skipped: Family<SkipLabels, Counter>,
}

/// Labels of `kronjob_slots_skipped_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct SkipLabels {
    /// Why: `calendar`.
    pub reason: &'static str,
}

/// `reason` of a slot a calendar excludes.
pub const SKIPPED_CALENDAR: &str = "calendar";

impl ReconcilerMetrics {
    /// Create the metrics and register them in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self {
            job_creation_skew: Histogram::new(SKEW_BUCKETS),
            reconciles: Counter::default(),
            reconcile_duration: Histogram::new(DURATION_BUCKETS),
            reconcile_errors: Family::default(),
            managed_cronjobs: Gauge::default(),
            outbox_dropped: Counter::default(),
            template_dry_runs: Family::default(),
            jobs_created: Counter::default(),
            jobs_deleted: Family::default(),
            suspended_after_failures: Counter::default(),
            queue_dropped: Family::default(),
            cronjobs: super::series::CronJobSeries::default(),
            slots_skipped: Family::default(),
        };
        drop(m.slots_skipped.get_or_create(&SkipLabels {
            reason: SKIPPED_CALENDAR,
        }));
        // Zeros from the start, so rates exist before the first delete.
        for reason in [DELETED_HISTORY, DELETED_REPLACE] {
            drop(m.jobs_deleted.get_or_create(&DeleteLabels { reason }));
        }
        {
            use super::plan::queue::Dropped;
            use crate::api::WhenFull;
            for why in [
                Dropped::Full(WhenFull::DropOldest),
                Dropped::Full(WhenFull::DropNewest),
                Dropped::Missed,
                Dropped::Cleared,
            ] {
                drop(m.queue_dropped(why));
            }
        }
        for result in crate::workload::Verdict::LABELS {
            drop(m.template_dry_runs.get_or_create(&ResultLabels { result }));
        }
        for category in super::error::CATEGORIES {
            drop(m.reconcile_errors.get_or_create(&ErrorLabels { category }));
        }
        registry.register(
            "kronjob_job_creation_skew_seconds",
            "Time from a Job's scheduled time to its creation",
            m.job_creation_skew.clone(),
        );
        registry.register(
            "kronjob_reconciles",
            "CronJob reconciles run",
            m.reconciles.clone(),
        );
        registry.register(
            "kronjob_reconcile_duration_seconds",
            "CronJob reconcile duration",
            m.reconcile_duration.clone(),
        );
        registry.register(
            "kronjob_reconcile_errors",
            "Failed CronJob reconciles by error category",
            m.reconcile_errors.clone(),
        );
        registry.register(
            "kronjob_outbox_dropped",
            "Events and history deletes dropped because the outbox was full",
            m.outbox_dropped.clone(),
        );
        registry.register(
            "kronjob_managed_cronjobs",
            "CronJobs managed by this controller",
            m.managed_cronjobs.clone(),
        );
        registry.register(
            "kronjob_template_dry_runs",
            "Dry-run creates of a batch/v1 CronJob carrying a CronJob's Job template, once per generation, by result",
            m.template_dry_runs.clone(),
        );
        registry.register(
            "kronjob_jobs_created",
            "Jobs created for a scheduled slot",
            m.jobs_created.clone(),
        );
        registry.register(
            "kronjob_jobs_deleted",
            "Jobs deleted by the CronJob controller, by reason (history, replace)",
            m.jobs_deleted.clone(),
        );
        registry.register(
            "kronjob_cronjobs_suspended_after_failures",
            "CronJobs the controller suspended because their scheduled Jobs failed in a row (spec.failurePolicy)",
            m.suspended_after_failures.clone(),
        );
        registry.register(
            "kronjob_queue_dropped",
            "Queued slots dropped (concurrencyPolicy Enqueue), by reason (full, missed, cleared) and policy (whenFull of a full queue)",
            m.queue_dropped.clone(),
        );
        registry.register(
            "kronjob_slots_skipped",
            "Slots that fell due and ran no Job, by reason (calendar: a calendar excludes the day)",
            m.slots_skipped.clone(),
        );
        registry.register_collector(Box::new(m.cronjobs.clone()));
        m
    }

    /// Count one template dry run with this result.
    pub fn template_checked(&self, result: &'static str) {
        self.template_dry_runs
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    /// The counter of queued slots dropped for `why`.
    pub fn queue_dropped(&self, why: super::plan::queue::Dropped) -> Counter {
        self.queue_dropped
            .get_or_create(&QueueDropLabels {
                reason: why.reason(),
                policy: why.policy(),
            })
            .clone()
    }

    /// The counter of Jobs deleted for `reason` ([`DELETED_HISTORY`] or [`DELETED_REPLACE`]).
    pub fn deleted(&self, reason: &'static str) -> Counter {
        self.jobs_deleted
            .get_or_create(&DeleteLabels { reason })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_names_are_exported() {
        let mut registry = Registry::default();
        let m = ReconcilerMetrics::new(&mut registry);
        m.job_creation_skew.observe(0.3);
        m.reconcile_errors
            .get_or_create(&ErrorLabels { category: "api" })
            .inc();
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
        assert!(out.contains("kronjob_job_creation_skew_seconds_bucket{le=\"0.5\"} 1"));
        assert!(out.contains("kronjob_reconcile_errors_total{category=\"api\"} 1"));
        assert!(out.contains("kronjob_managed_cronjobs"));
        assert!(out.contains("kronjob_jobs_created_total 0"));
        assert!(out.contains("kronjob_jobs_deleted_total{reason=\"history\"} 0"));
        assert!(out.contains("kronjob_jobs_deleted_total{reason=\"replace\"} 0"));
        assert!(out.contains("kronjob_cronjobs_suspended_after_failures_total 0"));
        for category in super::super::error::CATEGORIES {
            let zero = format!("kronjob_reconcile_errors_total{{category=\"{category}\"}} ");
            assert!(
                out.contains(&zero),
                "{category} exported from the start:\n{out}"
            );
        }
        m.queue_dropped(crate::controller::cronjob::plan::queue::Dropped::Full(
            crate::api::WhenFull::DropOldest,
        ))
        .inc();
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
        assert!(
            out.contains("kronjob_queue_dropped_total{reason=\"full\",policy=\"DropOldest\"} 1"),
            "{out}"
        );
        assert!(out.contains("# TYPE kronjob_cronjob_next_schedule_time_seconds gauge"));
    }
}
