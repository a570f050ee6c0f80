//! Prometheus metrics of the webhook server.

use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// How a request ended, the `result` label.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // The variant names are the label values.
pub enum Outcome {
    /// Admitted unchanged.
    allowed,
    /// Refused (invalid object, or an object that could not be decoded).
    denied,
    /// Admitted with a defaulting patch.
    patched,
    /// Not an admission review at all: HTTP 400.
    bad_request,
    /// The webhook itself failed.
    error,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    path: &'static str,
    result: Outcome,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DryRunLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// Every `reason` of `kronjob_webhook_rejected_requests_total`.
pub const REJECTED_REASONS: [&str; 4] = ["malformed", "too_large", "slow", "busy"];
/// Every `reason` of `kronjob_webhook_dry_runs_skipped_total`.
pub const SKIPPED_REASONS: [&str; 3] = ["cached", "rate_limited", "busy"];
/// Every `result` of `kronjob_webhook_access_reviews_total`.
pub const ACCESS_RESULTS: [&str; 4] = ["allowed", "denied", "cached", "unchecked"];

/// Upper bounds of the latency buckets, in seconds: 50 µs to 1 s.
const BUCKETS: [f64; 14] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The webhook's metrics, registered in the manager's registry. Cheap to clone (shared cells).
#[derive(Clone, Debug)]
pub struct WebhookMetrics {
    duration: Family<RequestLabels, Histogram, fn() -> Histogram>,
    panics: Counter,
    dry_runs: Family<DryRunLabels, Counter>,
    skipped: Family<ReasonLabels, Counter>,
    rejected: Family<ReasonLabels, Counter>,
    access: Family<DryRunLabels, Counter>,
}

impl WebhookMetrics {
    /// Create the metrics and register them:
    /// `kronjob_webhook_request_duration_seconds{path,result}` and
    /// `kronjob_webhook_panics_total` and `kronjob_webhook_dry_run_total{result}`.
    pub fn new(registry: &mut Registry) -> Self {
        let duration = Family::<RequestLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        let panics = Counter::default();
        // Zeros from the start for the results the alerts watch, so a rate over them has
        // series (and an increase from 0) before the first such answer.
        for path in [
            super::admission::MUTATE_PATH,
            super::admission::VALIDATE_PATH,
        ] {
            for result in [Outcome::denied, Outcome::bad_request, Outcome::error] {
                drop(duration.get_or_create(&RequestLabels { path, result }));
            }
        }
        registry.register(
            "kronjob_webhook_request_duration_seconds",
            "Time to answer an admission request, by path and result",
            duration.clone(),
        );
        registry.register(
            "kronjob_webhook_panics",
            "Handler panics caught by the webhook server",
            panics.clone(),
        );
        let dry_runs = Family::<DryRunLabels, Counter>::default();
        // Zeros from the start, so rates and alerts have series before the first dry run.
        for result in crate::workload::Verdict::LABELS {
            drop(dry_runs.get_or_create(&DryRunLabels { result }));
        }
        registry.register(
            "kronjob_webhook_dry_run",
            "Dry-run creates of a new or changed template (a batch/v1 CronJob carrying a Job template, or a workload of its kind), by result (valid, invalid, timeout, error)",
            dry_runs.clone(),
        );
        let skipped = Family::<ReasonLabels, Counter>::default();
        for reason in SKIPPED_REASONS {
            drop(skipped.get_or_create(&ReasonLabels { reason }));
        }
        registry.register(
            "kronjob_webhook_dry_runs_skipped",
            "Templates the webhook did not dry-run: cached (already checked), rate_limited or busy",
            skipped.clone(),
        );
        let rejected = Family::<ReasonLabels, Counter>::default();
        for reason in REJECTED_REASONS {
            drop(rejected.get_or_create(&ReasonLabels { reason }));
        }
        registry.register(
            "kronjob_webhook_rejected_requests",
            "Requests refused before admission: malformed (400), too_large (413), slow (408), busy (429)",
            rejected.clone(),
        );
        let access = Family::<DryRunLabels, Counter>::default();
        for result in ACCESS_RESULTS {
            drop(access.get_or_create(&DryRunLabels { result }));
        }
        registry.register(
            "kronjob_webhook_access_reviews",
            "Checks that a CronJob's author may create its workload's kind: allowed, denied (refused), cached (answered before), unchecked (rate limited, busy or failed: refused)",
            access.clone(),
        );
        WebhookMetrics {
            duration,
            panics,
            dry_runs,
            skipped,
            rejected,
            access,
        }
    }

    /// Count a Job template not dry-run, and why (one of [`SKIPPED_REASONS`]).
    pub fn dry_run_skipped(&self, reason: &'static str) {
        self.skipped.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Count a request refused before admission (one of [`REJECTED_REASONS`]).
    pub fn rejected(&self, reason: &'static str) {
        self.rejected.get_or_create(&ReasonLabels { reason }).inc();
    }

    /// Requests refused so far for `reason`.
    pub fn rejected_count(&self, reason: &'static str) -> u64 {
        self.rejected.get_or_create(&ReasonLabels { reason }).get()
    }

    /// Record one answered request.
    pub fn observe(&self, path: &'static str, result: Outcome, elapsed: Duration) {
        self.duration
            .get_or_create(&RequestLabels { path, result })
            .observe(elapsed.as_secs_f64());
    }

    /// Count a caught panic.
    pub fn panicked(&self) {
        self.panics.inc();
    }

    /// Count one dry run of a Job template with this result.
    pub fn dry_run(&self, result: &'static str) {
        self.dry_runs.get_or_create(&DryRunLabels { result }).inc();
    }

    /// Count one check of an author's access (one of [`ACCESS_RESULTS`]).
    pub fn access_review(&self, result: &'static str) {
        self.access.get_or_create(&DryRunLabels { result }).inc();
    }

    /// Number of panics caught so far.
    pub fn panic_count(&self) -> u64 {
        self.panics.get()
    }
}
