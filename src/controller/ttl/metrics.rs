//! Prometheus metrics of the TTL controller.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The kind of object the TTL controller handles; also the `kind` metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// A `batch/v1` Job.
    Job,
    /// A core/v1 Pod.
    Pod,
    /// A workload of another kind a CronJob runs.
    Workload,
}

impl ObjectKind {
    /// The label value: `job`, `pod` or `workload`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Job => "job",
            Self::Pod => "pod",
            Self::Workload => "workload",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ErrorLabels {
    kind: &'static str,
    category: &'static str,
}

type HistogramFamily = Family<KindLabels, Histogram, fn() -> Histogram>;

/// Metrics of the TTL-after-finished controller. Cheap to clone: every metric is shared.
#[derive(Debug, Clone)]
pub struct TtlMetrics {
    delay: HistogramFamily,
    deletions: Family<KindLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
}

fn delay_histogram() -> Histogram {
    // 0.1 s .. ~27 min, as upstream's ttl_after_finished_controller_job_deletion_duration_seconds.
    Histogram::new(exponential_buckets(0.1, 2.0, 14))
}

impl TtlMetrics {
    /// Create the metrics and register them:
    /// - `kronjob_ttl_deletion_delay_seconds{kind}`: histogram of delete time minus expiry time;
    /// - `kronjob_ttl_deletions_total{kind}`: objects deleted because their TTL expired;
    /// - `kronjob_ttl_errors_total{kind,category}`: failed reconciles, by a fixed category.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = Self {
            delay: HistogramFamily::new_with_constructor(delay_histogram),
            deletions: Family::default(),
            errors: Family::default(),
        };
        registry.register(
            "kronjob_ttl_deletion_delay_seconds",
            "Seconds between a finished object's TTL expiry and its deletion by kronjob",
            metrics.delay.clone(),
        );
        registry.register(
            "kronjob_ttl_deletions",
            "Finished objects deleted by kronjob because their TTL expired",
            metrics.deletions.clone(),
        );
        registry.register(
            "kronjob_ttl_errors",
            "Errors of the TTL-after-finished controller, by category",
            metrics.errors.clone(),
        );
        // Export zeros from the start, so dashboards and alerts see the series before the
        // first deletion.
        for kind in [ObjectKind::Job, ObjectKind::Pod, ObjectKind::Workload] {
            let labels = KindLabels {
                kind: kind.as_str(),
            };
            drop(metrics.delay.get_or_create(&labels));
            drop(metrics.deletions.get_or_create(&labels));
            for category in super::CATEGORIES {
                drop(metrics.errors.get_or_create(&ErrorLabels {
                    kind: kind.as_str(),
                    category,
                }));
            }
        }
        metrics
    }

    /// Record one deletion, `delay_seconds` after expiry (negative values count as 0).
    pub(crate) fn deleted(&self, kind: ObjectKind, delay_seconds: f64) {
        let labels = KindLabels {
            kind: kind.as_str(),
        };
        self.delay
            .get_or_create(&labels)
            .observe(delay_seconds.max(0.0));
        self.deletions.get_or_create(&labels).inc();
    }

    /// Record one error of a fixed `category`.
    pub(crate) fn error(&self, kind: ObjectKind, category: &'static str) {
        self.errors
            .get_or_create(&ErrorLabels {
                kind: kind.as_str(),
                category,
            })
            .inc();
    }
}
