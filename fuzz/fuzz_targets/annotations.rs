#![no_main]
//! The two annotations a user writes on a CronJob to ask for runs: the manual runs
//! (`batch.kronjob.dev/trigger`, `trigger::parse`) and a backfill (`batch.kronjob.dev/backfill`,
//! `backfill::Request::parse`), as the webhook checks them and the controller reads them, and
//! the backfill's slots (`plan_slots`).
//!
//! Input: a header line `<now> <schedule>` (now as Unix seconds or RFC 3339, `-` for the
//! default; the schedule of the CronJob a backfill walks), then the annotation's value.

use jiff::Timestamp;
use kronjob::api::backfill::{MAX_PARALLEL, Request};
use kronjob::api::trigger::{self, HORIZON, MAX_PENDING};
use kronjob::api::validation::{Operation, validate};
use kronjob::api::{ANNOTATION_BACKFILL, CronJob};
use kronjob::schedule::exclusions::Exclusions;
use kronjob::workload::backfill::{Gap, MAX_SLOTS, plan_slots};
use kronjob_fuzz::{default_now, header_and_rest, instant};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    let Some((header, value)) = header_and_rest(data) else {
        return;
    };
    let (now, schedule) = header.split_once(' ').unwrap_or((header, ""));
    let now = instant(now).unwrap_or_else(default_now);
    triggers(value, now);
    backfills(value, schedule.trim(), now);
});

/// The manual runs: at most ten, whole seconds, rising, none beyond the horizon, each entry
/// kept or refused; what the plugin writes back reads back the same.
fn triggers(value: &str, now: Timestamp) {
    let asked = trigger::parse(value, now);
    let times = &asked.times;
    assert!(times.len() <= MAX_PENDING);
    assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");
    for t in times {
        assert_eq!(t.subsec_nanosecond(), 0, "{t}");
        assert!(t.duration_since(now) <= HORIZON, "{t} beyond the horizon");
    }
    let entries = value.split(',').filter(|e| !e.trim().is_empty()).count();
    assert!(times.len() + asked.refused.len() <= entries.max(1));
    assert!(asked.due(now).all(|t| t <= now));
    assert!(asked.next(now).is_none_or(|t| t > now));
    if let Some(text) = trigger::format(times) {
        let again = trigger::parse(&text, now);
        assert_eq!(&again.times, times, "{text}");
        assert!(again.refused.is_empty(), "{text}: {:?}", again.refused);
    }
}

/// A backfill request: the webhook refuses exactly what the controller cannot read; one that
/// reads has its bounds, writes back the same, and walks at most its limit of slots, in its
/// range, rising.
fn backfills(value: &str, schedule: &str, now: Timestamp) {
    let read = Request::parse(value);
    let refused = validate(&cronjob(schedule, value), None, Operation::Create)
        .iter()
        .any(|e| e.path == format!("metadata.annotations[{ANNOTATION_BACKFILL}]"));
    assert_eq!(refused, read.is_err(), "{value:?}: {read:?}");
    let request = match read {
        Ok(request) => request,
        Err(why) => {
            assert!(!why.is_empty());
            return;
        }
    };
    assert!(request.from <= request.to);
    assert!((1..=MAX_PARALLEL).contains(&request.parallel));
    assert_eq!(Request::parse(&request.value()), Ok(request));
    let Ok(cj) = serde_json::from_value::<CronJob>(cronjob(schedule, value)) else {
        return;
    };
    let gaps = [Gap {
        after: None,
        before: Timestamp::MAX,
    }];
    let Ok(slots) = plan_slots(&cj, &request, &gaps, &Exclusions::none(), now, |_| false) else {
        return;
    };
    assert!(slots.len() <= MAX_SLOTS);
    assert!(slots.windows(2).all(|w| w[0].0 < w[1].0));
    for (slot, _) in &slots {
        assert!(
            request.from <= *slot && *slot <= request.to.min(now),
            "{slot}"
        );
    }
}

/// A CronJob with `schedule` asking for the backfill `value`.
fn cronjob(schedule: &str, value: &str) -> Value {
    let schedule = if schedule.is_empty() {
        "*/5 * * * *"
    } else {
        schedule
    };
    json!({
        "apiVersion": "batch.kronjob.dev/v1",
        "kind": "CronJob",
        "metadata": {"name": "cj", "namespace": "ns", "annotations": {ANNOTATION_BACKFILL: value}},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "OnFailure",
            "containers": [{"name": "c", "image": "busybox"}]
        }}}}},
    })
}
