//! Per-CronJob series (`kronjob_cronjob_*{namespace,cronjob}`), as kube-state-metrics exports
//! `kube_cronjob_*` for `batch/v1`: read from the controller's CronJob cache at scrape time, so
//! a reconcile keeps no books and a deleted CronJob's series disappear with it. Only the
//! replica whose controller runs (the leader) has a cache, so only it exports them; with
//! `--sharding`, each replica exports the CronJobs of its share, so no series is exported twice.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use jiff::Timestamp;
use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use super::plan::scheduling::inputs_of;
use crate::controller::cache::CachedCronJob;
use crate::controller::shard::ShardView;

/// Default of `--cronjob-metrics-limit`.
pub const DEFAULT_LIMIT: usize = 10_000;

/// Name of the gauge of CronJobs left out by the limit.
pub const OMITTED: &str = "kronjob_cronjob_series_omitted";

/// One per-CronJob gauge: its name, help, and value from the CronJob and its period (none: no
/// sample for that CronJob).
struct Gauge {
    name: &'static str,
    help: &'static str,
    value: fn(&CachedCronJob, Option<i64>) -> Option<i64>,
}

/// Every per-CronJob gauge, in exposition order.
const GAUGES: [Gauge; 13] = [
    Gauge {
        name: "kronjob_cronjob_next_schedule_time_seconds",
        help: "status.nextScheduleTime, Unix seconds (absent while suspended or invalid)",
        value: |cj, _| status_time(cj, |s| s.next_schedule_time.as_ref()),
    },
    Gauge {
        name: "kronjob_cronjob_last_schedule_time_seconds",
        help: "status.lastScheduleTime, Unix seconds",
        value: |cj, _| status_time(cj, |s| s.last_schedule_time.as_ref()),
    },
    Gauge {
        name: "kronjob_cronjob_last_successful_time_seconds",
        help: "status.lastSuccessfulTime, Unix seconds",
        value: |cj, _| status_time(cj, |s| s.last_successful_time.as_ref()),
    },
    Gauge {
        name: "kronjob_cronjob_last_failed_time_seconds",
        help: "status.lastFailureTime, Unix seconds",
        value: |cj, _| status_time(cj, |s| s.last_failure_time.as_ref()),
    },
    Gauge {
        name: "kronjob_cronjob_created_time_seconds",
        help: "metadata.creationTimestamp, Unix seconds",
        value: |cj, _| {
            cj.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| seconds(t.0))
        },
    },
    Gauge {
        name: "kronjob_cronjob_period_seconds",
        help: "Seconds from the next slot to the one after it, the shortest of several schedules' (absent while there is no next slot)",
        value: |_, period| period,
    },
    Gauge {
        name: "kronjob_cronjob_active_jobs",
        help: "status.activeCount: Jobs of the CronJob still running",
        value: |cj, _| Some(cj.status_fields().map_or(0, |s| i64::from(s.active_count))),
    },
    Gauge {
        name: "kronjob_cronjob_queued",
        help: "status.queuedCount: slots waiting in the queue (concurrencyPolicy Enqueue)",
        value: |cj, _| Some(cj.status_fields().map_or(0, |s| i64::from(s.queued_count))),
    },
    Gauge {
        name: "kronjob_cronjob_queue_limit",
        help: "spec.queue.maxQueued with its default (only for concurrencyPolicy Enqueue)",
        value: |cj, _| {
            (cj.spec.concurrency_policy == crate::api::ConcurrencyPolicy::Enqueue).then(|| {
                let limit = cj.spec.queue.clone().unwrap_or_default().limit();
                i64::try_from(limit).unwrap_or(i64::MAX)
            })
        },
    },
    Gauge {
        name: "kronjob_cronjob_suspended",
        help: "1 if spec.suspend is true, else 0",
        value: |cj, _| Some(i64::from(cj.spec.is_suspended())),
    },
    Gauge {
        name: "kronjob_cronjob_suspended_after_failures",
        help: "1 if spec.suspend is true and status.consecutiveFailures reached spec.failurePolicy.suspendAfterConsecutiveFailures, else 0",
        value: |cj, _| Some(i64::from(suspended_after_failures(cj))),
    },
    Gauge {
        name: "kronjob_cronjob_consecutive_failures",
        help: "status.consecutiveFailures: scheduled Jobs that failed in a row",
        value: |cj, _| {
            Some(
                cj.status_fields()
                    .map_or(0, |s| i64::from(s.consecutive_failures)),
            )
        },
    },
    Gauge {
        name: "kronjob_cronjob_calendar_missing",
        help: "1 while a Calendar named in spec.calendars does not exist (Ready=False reason CalendarNotFound: no slot runs), else 0; only for CronJobs naming Calendars",
        value: |cj, _| {
            cj.spec.calendars.as_ref().filter(|c| !c.is_empty())?;
            let reason = cj
                .status
                .as_ref()
                .and_then(|s| s.condition_reason(super::status::CONDITION_READY));
            Some(i64::from(
                reason == Some(super::status::reason::CALENDAR_NOT_FOUND),
            ))
        },
    },
];

/// Whether the CronJob is suspended with its failure policy's count reached: what the
/// `Ready` condition reports as `SuspendedAfterFailures`.
fn suspended_after_failures(cj: &CachedCronJob) -> bool {
    let limit = cj
        .spec
        .failure_policy
        .as_ref()
        .and_then(|p| p.suspend_after_consecutive_failures);
    let failures = cj.status_fields().map_or(0, |s| s.consecutive_failures);
    cj.spec.is_suspended() && limit.is_some_and(|limit| limit >= 1 && failures >= limit)
}

fn seconds(t: Timestamp) -> i64 {
    t.as_second()
}

fn status_time(
    cj: &CachedCronJob,
    field: impl Fn(
        &crate::api::CronJobStatus,
    ) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
) -> Option<i64> {
    cj.status_fields().and_then(field).map(|t| seconds(t.0))
}

/// The gap from `status.nextScheduleTime` to the slot after it: the CronJob's period (for an
/// irregular schedule such as weekdays only, the current gap; with several schedules, the
/// shortest of their gaps, see [`crate::schedule::Schedule::period_at`]).
fn period(cj: &CachedCronJob) -> Option<i64> {
    let next = cj.status_fields()?.next_schedule_time.as_ref()?.0;
    let (schedule, tz) = inputs_of(
        cj.spec.schedule_exprs(),
        cj.spec.time_zone.as_deref(),
        cj.metadata.namespace.as_deref().unwrap_or_default(),
        cj.metadata.name.as_deref().unwrap_or_default(),
    )
    .ok()?;
    Some(schedule.period_at(next, &tz)?.as_secs())
}

#[derive(Debug, Default)]
struct Source {
    store: Option<Store<CachedCronJob>>,
    limit: usize,
    /// Which CronJobs are this replica's to export.
    shard: ShardView,
    /// Counts attachments, so a guard only detaches its own cache.
    generation: u64,
}

/// What a CronJob's period depends on besides its name: recomputed only when one changes.
#[derive(Debug, Clone, PartialEq)]
struct PeriodInputs {
    schedule: Option<String>,
    schedules: Option<Vec<String>>,
    time_zone: Option<String>,
    next: Timestamp,
}

/// Periods by (namespace, name), from the last scrape.
type Periods = HashMap<(String, String), (PeriodInputs, Option<i64>)>;

/// The per-CronJob series: a [`Collector`] over whichever CronJob cache is attached. Cheap to
/// clone (a shared handle); with no cache attached (a standby replica) it exports the
/// descriptors only.
#[derive(Debug, Clone, Default)]
pub struct CronJobSeries {
    source: Arc<RwLock<Source>>,
    /// Parsing a schedule costs far more than reading a status: periods are kept between
    /// scrapes until the schedule, time zone or next slot changes.
    periods: Arc<Mutex<Periods>>,
}

/// Detaches the cache from [`CronJobSeries`] when dropped (the controller stopped).
#[derive(Debug)]
#[must_use = "the cache is detached when this is dropped"]
pub struct Attached {
    source: Arc<RwLock<Source>>,
    generation: u64,
}

impl Drop for Attached {
    fn drop(&mut self) {
        let mut source = self.source.write().unwrap_or_else(|e| e.into_inner());
        if source.generation == self.generation {
            source.store = None;
        }
    }
}

impl CronJobSeries {
    /// Export the CronJobs of `store` that `shard` says are this replica's, at most `limit` of
    /// them (by namespace and name; 0: none), until the returned guard is dropped.
    pub fn attach(&self, store: Store<CachedCronJob>, limit: usize, shard: ShardView) -> Attached {
        let mut source = self.source.write().unwrap_or_else(|e| e.into_inner());
        let generation = source.generation.wrapping_add(1);
        *source = Source {
            store: Some(store),
            limit,
            shard,
            generation,
        };
        Attached {
            source: Arc::clone(&self.source),
            generation,
        }
    }

    /// The CronJobs to export, sorted by namespace and name, and how many the limit left out.
    fn snapshot(&self) -> (Vec<Arc<CachedCronJob>>, usize) {
        let (store, limit, shard) = {
            let source = self.source.read().unwrap_or_else(|e| e.into_inner());
            (source.store.clone(), source.limit, source.shard.clone())
        };
        let Some(store) = store else {
            return (Vec::new(), 0);
        };
        let mut cronjobs = store.state();
        cronjobs.retain(|cj| shard.owns_cronjob(cj.as_ref()));
        cronjobs.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
        let omitted = cronjobs.len().saturating_sub(limit);
        cronjobs.truncate(limit);
        (cronjobs, omitted)
    }

    /// The period of each CronJob of `rows`, from the last scrape's when its inputs are the
    /// same; the cache keeps only these CronJobs.
    fn periods(&self, rows: &[(&str, &str, &CachedCronJob)]) -> Vec<Option<i64>> {
        let mut cache = self.periods.lock().unwrap_or_else(|e| e.into_inner());
        let mut fresh = Periods::with_capacity(rows.len());
        let periods = rows
            .iter()
            .map(|(namespace, name, cj)| {
                let next = cj.status_fields()?.next_schedule_time.as_ref()?.0;
                let inputs = PeriodInputs {
                    schedule: cj.spec.schedule.clone(),
                    schedules: cj.spec.schedules.clone(),
                    time_zone: cj.spec.time_zone.clone(),
                    next,
                };
                let key = ((*namespace).to_string(), (*name).to_string());
                let value = match cache.remove(&key) {
                    Some((seen, value)) if seen == inputs => value,
                    _ => period(cj),
                };
                fresh.insert(key, (inputs, value));
                value
            })
            .collect();
        *cache = fresh;
        periods
    }
}

impl Collector for CronJobSeries {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (cronjobs, omitted) = self.snapshot();
        let rows: Vec<_> = cronjobs
            .iter()
            .filter_map(|cj| {
                let namespace = cj.metadata.namespace.as_deref()?;
                let name = cj.metadata.name.as_deref()?;
                Some((namespace, name, cj.as_ref()))
            })
            .collect();
        let periods = self.periods(&rows);
        for gauge in &GAUGES {
            let mut family =
                encoder.encode_descriptor(gauge.name, gauge.help, None, MetricType::Gauge)?;
            for ((namespace, name, cj), period) in rows.iter().zip(&periods) {
                if let Some(value) = (gauge.value)(cj, *period) {
                    let labels = [("namespace", *namespace), ("cronjob", *name)];
                    ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        let omitted = ConstGauge::new(i64::try_from(omitted).unwrap_or(i64::MAX));
        omitted.encode(encoder.encode_descriptor(
            OMITTED,
            "CronJobs left out of the kronjob_cronjob_* series by --cronjob-metrics-limit",
            None,
            omitted.metric_type(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{CronJob, CronJobSpec, CronJobStatus};
    use kube::runtime::watcher::Event;
    use prometheus_client::registry::Registry;

    use crate::testing::fixtures::time as ts;

    fn cronjob(namespace: &str, name: &str, schedule: &str, status: CronJobStatus) -> CronJob {
        let spec: CronJobSpec = serde_json::from_value(serde_json::json!({
            "schedule": schedule,
            "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}},
        }))
        .expect("spec");
        let mut cj = CronJob::new(name, spec);
        cj.metadata.namespace = Some(namespace.into());
        cj.metadata.creation_timestamp = Some(ts("2024-01-01T00:00:00Z"));
        cj.status = Some(status);
        cj
    }

    fn store(cronjobs: Vec<CronJob>) -> Store<CachedCronJob> {
        let (reader, mut writer) = kube::runtime::reflector::store();
        writer.apply_watcher_event(&Event::Init);
        for cj in cronjobs {
            let cached = CachedCronJob::of(&cj).expect("cached");
            writer.apply_watcher_event(&Event::InitApply(cached));
        }
        writer.apply_watcher_event(&Event::InitDone);
        reader
    }

    fn encode(series: &CronJobSeries) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(series.clone()));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
        out
    }

    fn sample() -> Vec<CronJob> {
        let running = CronJobStatus {
            active_count: 2,
            consecutive_failures: 2,
            last_schedule_time: Some(ts("2024-01-01T10:00:00Z")),
            last_successful_time: Some(ts("2024-01-01T09:00:30Z")),
            last_failure_time: Some(ts("2024-01-01T08:00:10Z")),
            next_schedule_time: Some(ts("2024-01-01T11:00:00Z")),
            ..CronJobStatus::default()
        };
        let mut suspended = cronjob("a", "nightly", "0 3 * * *", CronJobStatus::default());
        suspended.spec.suspend = Some(true);
        // Listed out of order: the exposition is sorted by namespace, then name.
        vec![cronjob("b", "hourly", "0 * * * *", running), suspended]
    }

    #[test]
    fn with_sharding_each_replica_exports_its_share_and_no_series_twice() {
        use crate::controller::shard::{Assignment, ShardMetrics};
        let cronjobs: Vec<CronJob> = (0..40)
            .map(|i| {
                cronjob(
                    "ns",
                    &format!("cj-{i}"),
                    "0 * * * *",
                    CronJobStatus::default(),
                )
            })
            .collect();
        let members = || ["replica-a".to_string(), "replica-b".to_string()];
        let exported = |me: &str| -> Vec<String> {
            let (_publish, assignment) =
                tokio::sync::watch::channel(Arc::new(Assignment::new(me, members())));
            let shard = ShardView::sharded(assignment, ShardMetrics::default());
            let series = CronJobSeries::default();
            let _attached = series.attach(store(cronjobs.clone()), DEFAULT_LIMIT, shard);
            encode(&series)
                .lines()
                .filter(|l| l.starts_with("kronjob_cronjob_suspended{"))
                .map(str::to_string)
                .collect()
        };
        let (a, b) = (exported("replica-a"), exported("replica-b"));
        assert!(!a.is_empty() && !b.is_empty(), "both replicas export some");
        assert!(a.iter().all(|line| !b.contains(line)), "no CronJob twice");
        assert_eq!(a.len() + b.len(), cronjobs.len(), "every CronJob once");
    }

    #[test]
    fn suspended_after_failures_needs_the_suspension_and_the_policys_count() {
        // (suspend, policy limit, consecutive failures, exported value)
        let table = [
            (true, Some(3), 3, 1),
            (true, Some(3), 4, 1),
            (true, Some(3), 2, 0),
            (false, Some(3), 3, 0),
            (true, None, 5, 0),
            (true, Some(0), 0, 0),
            (true, Some(1), 1, 1),
        ];
        for (suspend, limit, failures, want) in table {
            let status = CronJobStatus {
                consecutive_failures: failures,
                ..CronJobStatus::default()
            };
            let mut cj = cronjob("n", "c", "* * * * *", status);
            cj.spec.suspend = Some(suspend);
            cj.spec.failure_policy = limit.map(|limit| crate::api::FailurePolicy {
                suspend_after_consecutive_failures: Some(limit),
            });
            let series = CronJobSeries::default();
            let _attached = series.attach(store(vec![cj]), DEFAULT_LIMIT, ShardView::default());
            let line = format!(
                "kronjob_cronjob_suspended_after_failures{{namespace=\"n\",cronjob=\"c\"}} {want}\n"
            );
            let out = encode(&series);
            assert!(
                out.contains(&line),
                "suspend {suspend}, limit {limit:?}, failures {failures}: {out}"
            );
        }
    }

    #[test]
    fn exports_each_cronjob_sorted_with_namespace_and_cronjob_labels() {
        let series = CronJobSeries::default();
        let _attached = series.attach(store(sample()), DEFAULT_LIMIT, ShardView::default());
        let want = "\
# HELP kronjob_cronjob_next_schedule_time_seconds status.nextScheduleTime, Unix seconds (absent while suspended or invalid)
# TYPE kronjob_cronjob_next_schedule_time_seconds gauge
kronjob_cronjob_next_schedule_time_seconds{namespace=\"b\",cronjob=\"hourly\"} 1704106800
# HELP kronjob_cronjob_last_schedule_time_seconds status.lastScheduleTime, Unix seconds
# TYPE kronjob_cronjob_last_schedule_time_seconds gauge
kronjob_cronjob_last_schedule_time_seconds{namespace=\"b\",cronjob=\"hourly\"} 1704103200
# HELP kronjob_cronjob_last_successful_time_seconds status.lastSuccessfulTime, Unix seconds
# TYPE kronjob_cronjob_last_successful_time_seconds gauge
kronjob_cronjob_last_successful_time_seconds{namespace=\"b\",cronjob=\"hourly\"} 1704099630
# HELP kronjob_cronjob_last_failed_time_seconds status.lastFailureTime, Unix seconds
# TYPE kronjob_cronjob_last_failed_time_seconds gauge
kronjob_cronjob_last_failed_time_seconds{namespace=\"b\",cronjob=\"hourly\"} 1704096010
# HELP kronjob_cronjob_created_time_seconds metadata.creationTimestamp, Unix seconds
# TYPE kronjob_cronjob_created_time_seconds gauge
kronjob_cronjob_created_time_seconds{namespace=\"a\",cronjob=\"nightly\"} 1704067200
kronjob_cronjob_created_time_seconds{namespace=\"b\",cronjob=\"hourly\"} 1704067200
# HELP kronjob_cronjob_period_seconds Seconds from the next slot to the one after it, the shortest of several schedules' (absent while there is no next slot)
# TYPE kronjob_cronjob_period_seconds gauge
kronjob_cronjob_period_seconds{namespace=\"b\",cronjob=\"hourly\"} 3600
# HELP kronjob_cronjob_active_jobs status.activeCount: Jobs of the CronJob still running
# TYPE kronjob_cronjob_active_jobs gauge
kronjob_cronjob_active_jobs{namespace=\"a\",cronjob=\"nightly\"} 0
kronjob_cronjob_active_jobs{namespace=\"b\",cronjob=\"hourly\"} 2
# HELP kronjob_cronjob_queued status.queuedCount: slots waiting in the queue (concurrencyPolicy Enqueue)
# TYPE kronjob_cronjob_queued gauge
kronjob_cronjob_queued{namespace=\"a\",cronjob=\"nightly\"} 0
kronjob_cronjob_queued{namespace=\"b\",cronjob=\"hourly\"} 0
# HELP kronjob_cronjob_queue_limit spec.queue.maxQueued with its default (only for concurrencyPolicy Enqueue)
# TYPE kronjob_cronjob_queue_limit gauge
# HELP kronjob_cronjob_suspended 1 if spec.suspend is true, else 0
# TYPE kronjob_cronjob_suspended gauge
kronjob_cronjob_suspended{namespace=\"a\",cronjob=\"nightly\"} 1
kronjob_cronjob_suspended{namespace=\"b\",cronjob=\"hourly\"} 0
# HELP kronjob_cronjob_suspended_after_failures 1 if spec.suspend is true and status.consecutiveFailures reached spec.failurePolicy.suspendAfterConsecutiveFailures, else 0
# TYPE kronjob_cronjob_suspended_after_failures gauge
kronjob_cronjob_suspended_after_failures{namespace=\"a\",cronjob=\"nightly\"} 0
kronjob_cronjob_suspended_after_failures{namespace=\"b\",cronjob=\"hourly\"} 0
# HELP kronjob_cronjob_consecutive_failures status.consecutiveFailures: scheduled Jobs that failed in a row
# TYPE kronjob_cronjob_consecutive_failures gauge
kronjob_cronjob_consecutive_failures{namespace=\"a\",cronjob=\"nightly\"} 0
kronjob_cronjob_consecutive_failures{namespace=\"b\",cronjob=\"hourly\"} 2
# HELP kronjob_cronjob_calendar_missing 1 while a Calendar named in spec.calendars does not exist (Ready=False reason CalendarNotFound: no slot runs), else 0; only for CronJobs naming Calendars
# TYPE kronjob_cronjob_calendar_missing gauge
# HELP kronjob_cronjob_series_omitted CronJobs left out of the kronjob_cronjob_* series by --cronjob-metrics-limit
# TYPE kronjob_cronjob_series_omitted gauge
kronjob_cronjob_series_omitted 0
# EOF
";
        assert_eq!(encode(&series), want);
    }

    #[test]
    fn the_limit_keeps_the_first_cronjobs_and_counts_the_rest() {
        let series = CronJobSeries::default();
        let _attached = series.attach(store(sample()), 1, ShardView::default());
        let out = encode(&series);
        assert!(
            out.contains("kronjob_cronjob_suspended{namespace=\"a\",cronjob=\"nightly\"} 1\n"),
            "{out}"
        );
        assert!(!out.contains("cronjob=\"hourly\""), "{out}");
        assert!(out.contains("kronjob_cronjob_series_omitted 1\n"), "{out}");

        let off = series.attach(store(sample()), 0, ShardView::default());
        let out = encode(&series);
        assert!(!out.contains("cronjob=\""), "{out}");
        assert!(out.contains("kronjob_cronjob_series_omitted 2\n"), "{out}");

        // A guard dropped after a newer attachment leaves the newer cache in place.
        let newer = series.attach(store(sample()), DEFAULT_LIMIT, ShardView::default());
        drop(off);
        assert!(encode(&series).contains("cronjob=\"hourly\""));
        drop(newer);
        assert!(!encode(&series).contains("cronjob=\""));
    }

    #[test]
    fn detaching_the_cache_removes_every_cronjob() {
        let series = CronJobSeries::default();
        let attached = series.attach(store(sample()), DEFAULT_LIMIT, ShardView::default());
        assert!(encode(&series).contains("cronjob=\"hourly\""));
        drop(attached);
        let out = encode(&series);
        assert!(!out.contains("cronjob=\""), "{out}");
        assert!(
            out.contains("# TYPE kronjob_cronjob_active_jobs gauge\n"),
            "descriptors stay: {out}"
        );
        assert!(out.contains("kronjob_cronjob_series_omitted 0\n"), "{out}");
    }

    #[test]
    fn a_kept_period_is_recomputed_when_the_schedule_changes() {
        let status = CronJobStatus {
            next_schedule_time: Some(ts("2024-01-01T11:00:00Z")),
            ..CronJobStatus::default()
        };
        let hourly = cronjob("n", "c", "0 * * * *", status.clone());
        let series = CronJobSeries::default();
        let line = |out: &str| {
            out.lines()
                .find(|l| l.starts_with("kronjob_cronjob_period_seconds{"))
                .map(str::to_string)
        };
        let _attached = series.attach(
            store(vec![hourly.clone()]),
            DEFAULT_LIMIT,
            ShardView::default(),
        );
        let want = "kronjob_cronjob_period_seconds{namespace=\"n\",cronjob=\"c\"} 3600";
        assert_eq!(line(&encode(&series)).as_deref(), Some(want));
        assert_eq!(line(&encode(&series)).as_deref(), Some(want), "kept");
        let every_five = cronjob("n", "c", "*/5 * * * *", status);
        let _attached = series.attach(store(vec![every_five]), DEFAULT_LIMIT, ShardView::default());
        let want = "kronjob_cronjob_period_seconds{namespace=\"n\",cronjob=\"c\"} 300";
        assert_eq!(line(&encode(&series)).as_deref(), Some(want));
        let _attached = series.attach(store(Vec::new()), DEFAULT_LIMIT, ShardView::default());
        assert_eq!(line(&encode(&series)), None);
        let cached = series.periods.lock().expect("lock").len();
        assert_eq!(cached, 0, "a deleted CronJob's period is dropped");
    }

    fn period(cj: &CronJob) -> Option<i64> {
        super::period(&CachedCronJob::of(cj).expect("cached"))
    }

    #[test]
    fn period_follows_the_schedule_and_its_time_zone() {
        let status = |next: &str| CronJobStatus {
            next_schedule_time: Some(ts(next)),
            ..CronJobStatus::default()
        };
        let weekdays = cronjob("n", "w", "0 9 * * 1-5", status("2024-01-05T09:00:00Z"));
        assert_eq!(period(&weekdays), Some(3 * 24 * 3600), "Friday to Monday");
        let every = cronjob("n", "e", "@every 90m", status("2024-01-01T01:30:00Z"));
        assert_eq!(period(&every), Some(5400));
        let mut dst = cronjob("n", "d", "30 3 * * *", status("2024-03-30T02:30:00Z"));
        dst.spec.time_zone = Some("Europe/Berlin".into());
        assert_eq!(period(&dst), Some(23 * 3600), "the night clocks go forward");
        let mut several = cronjob("n", "m", "0 9 * * *", status("2024-01-01T09:00:00Z"));
        several.spec.schedule = None;
        several.spec.schedules = Some(vec!["0 9 * * *".into(), "*/20 * * * *".into()]);
        assert_eq!(
            period(&several),
            Some(1200),
            "the shortest of the schedules"
        );
        let invalid = cronjob("n", "i", "not a schedule", status("2024-01-01T00:00:00Z"));
        assert_eq!(period(&invalid), None);
        let idle = cronjob("n", "s", "0 * * * *", CronJobStatus::default());
        assert_eq!(period(&idle), None);
    }
}
