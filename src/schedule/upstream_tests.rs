//! Upstream Kubernetes' `TestMostRecentScheduleTime` (`pkg/controller/cronjob/utils_test.go`)
//! ported onto [`slots`]: each row named as upstream names its case, with upstream's
//! expectations: the most recent unmet slot, how many were missed (none, a few, more than
//! 100) and whether the schedule is refused. Rows on which kronjob deliberately differs say so
//! and are listed in `docs/upstream-differences.md`.
//!
//! Upstream's function also returns the start of its search window (`earliestTime`); kronjob
//! keeps it internal, so rows check it through what it decides (see the document).

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

use super::{Schedule, SlotQuery, slots};
use crate::testing::upstream::undocumented;

/// Upstream's classes of missed slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Missed {
    /// At most one slot since the anchor.
    None,
    /// Two to 100.
    Few,
    /// More than 100 (`TooManyMissedTimes`).
    Many,
}

impl Missed {
    fn of(count: u64) -> Self {
        match count {
            0 | 1 => Missed::None,
            2..=100 => Missed::Few,
            _ => Missed::Many,
        }
    }
}

struct Row {
    name: &'static str,
    schedule: &'static str,
    created: Timestamp,
    last: Option<Timestamp>,
    deadline: Option<i64>,
    /// Upstream's `includeStartingDeadlineSeconds`: without it the deadline is ignored.
    include_deadline: bool,
    now: Timestamp,
    recent: Option<Timestamp>,
    missed: Missed,
    error: bool,
    /// kronjob's most recent slot where it deliberately differs, and why.
    differs: Option<(&'static str, Option<Timestamp>)>,
}

fn top() -> Timestamp {
    "2016-05-19T10:00:00Z".parse().expect("timestamp")
}

fn after_top(d: SignedDuration) -> Timestamp {
    top() + d
}

fn m(n: i64) -> SignedDuration {
    SignedDuration::from_mins(n)
}

fn h(n: i64) -> SignedDuration {
    SignedDuration::from_hours(n)
}

fn row(name: &'static str, schedule: &'static str, now: Timestamp) -> Row {
    Row {
        name,
        schedule,
        created: top(),
        last: None,
        deadline: None,
        include_deadline: false,
        now,
        recent: None,
        missed: Missed::None,
        error: false,
        differs: None,
    }
}

impl Row {
    fn created(mut self, at: Timestamp) -> Self {
        self.created = at;
        self
    }
    fn last(mut self, at: Timestamp) -> Self {
        self.last = Some(at);
        self
    }
    fn deadline(mut self, seconds: i64, included: bool) -> Self {
        self.deadline = Some(seconds);
        self.include_deadline = included;
        self
    }
    fn recent(mut self, at: Timestamp, missed: Missed) -> Self {
        self.recent = Some(at);
        self.missed = missed;
        self
    }
    fn missed(mut self, missed: Missed) -> Self {
        self.missed = missed;
        self
    }
    fn error(mut self) -> Self {
        self.error = true;
        self
    }
    fn differs(mut self, why: &'static str, recent: Option<Timestamp>) -> Self {
        self.differs = Some((why, recent));
        self
    }
}

#[test]
fn most_recent_schedule_time() {
    let half_past = after_top(m(30));
    let rows = [
        row(
            "now before next schedule",
            "0 * * * *",
            after_top(m(0) + SignedDuration::from_secs(30)),
        ),
        row(
            "now just after next schedule",
            "0 * * * *",
            after_top(m(61)),
        )
        .recent(after_top(m(60)), Missed::None),
        row("missed 5 schedules", "0 * * * *", after_top(m(301)))
            .created(after_top(SignedDuration::from_secs(10)))
            .recent(after_top(m(300)), Missed::Few),
        row(
            "complex schedule",
            "30 6-16/4 * * 1-5",
            after_top(h(24) + m(31)),
        )
        .last(half_past)
        .recent(after_top(h(24) + m(30)), Missed::Few),
        // Upstream finds no slot: it estimates the slots from the first interval (an hour)
        // and overshoots Friday 12:30. kronjob counts them and runs Friday 12:30.
        row(
            "another complex schedule",
            "30 10,11,12 * * 1-5",
            after_top(h(30) + m(30)),
        )
        .last(half_past)
        .missed(Missed::Few)
        .differs("estimate", Some(after_top(h(26) + m(30)))),
        row(
            "complex schedule with longer diff between executions",
            "30 6-16/4 * * 1-5",
            after_top(h(96) + m(31)),
        )
        .last(half_past)
        .recent(after_top(h(96) + m(30)), Missed::Few),
        row(
            "complex schedule with shorter diff between executions",
            "30 6-16/4 * * 1-5",
            after_top(h(24) + m(31)),
        )
        .recent(after_top(h(24) + m(30)), Missed::Few),
        row("@every schedule", "@every 1h", after_top(h(7 * 24)))
            .created(after_top(m(-59)))
            .last(after_top(m(1)))
            .deadline(10, false)
            .recent(after_top(h(6 * 24 + 23) + m(1)), Missed::Many),
        row("rogue cronjob", "59 23 31 2 *", after_top(h(1)))
            .created(after_top(SignedDuration::from_secs(10)))
            .error(),
        row(
            "earliestTime being CreationTimestamp and LastScheduleTime",
            "0 * * * *",
            after_top(SignedDuration::from_secs(30)),
        )
        .last(top()),
        row(
            "earliestTime being LastScheduleTime",
            "*/5 * * * *",
            after_top(m(31)),
        )
        .last(half_past),
        row(
            "earliestTime being LastScheduleTime (within StartingDeadlineSeconds)",
            "*/5 * * * *",
            after_top(m(31)),
        )
        .last(half_past)
        .deadline(60, false),
        row(
            "earliestTime being LastScheduleTime (outside StartingDeadlineSeconds)",
            "*/5 * * * *",
            after_top(m(32)),
        )
        .last(half_past)
        .deadline(60, true),
    ];
    let mut failures = Vec::new();
    for r in &rows {
        let schedule = Schedule::parse(r.schedule, "").expect(r.name);
        let got = slots(&SlotQuery {
            schedule: &schedule,
            tz: &TimeZone::UTC,
            last_schedule_time: r.last,
            creation_timestamp: r.created,
            starting_deadline_seconds: r.deadline.filter(|_| r.include_deadline),
            now: r.now,
        });
        let recent = r.differs.map_or(r.recent, |(_, kronjob)| kronjob);
        let ok = match &got {
            Err(_) => r.error,
            Ok(s) => !r.error && s.due == recent && Missed::of(s.missed) == r.missed,
        };
        if !ok {
            failures.push(format!(
                "{}: got {got:?}; want recent {recent:?}, missed {:?}, error {}",
                r.name, r.missed, r.error
            ));
        }
    }
    let cases: Vec<_> = rows
        .iter()
        .map(|r| (r.name, r.differs.map(|d| d.0)))
        .collect();
    failures.extend(undocumented("TestMostRecentScheduleTime", &cases));
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    assert_eq!(rows.len(), 13, "ported cases");
}
