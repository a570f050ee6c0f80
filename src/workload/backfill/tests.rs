use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::api::CronJobStatus;
use crate::testing::fixtures::{CREATED, cronjob, t};

fn gap(after: Option<&str>, before: &str) -> Gap {
    Gap {
        after: after.map(t),
        before: t(before),
    }
}

#[test]
fn requests_parse_and_refuse_what_makes_no_range() {
    let ok = Request::parse(
        r#"{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T01:00:00Z","parallel":3}"#,
    )
    .expect("valid");
    assert_eq!(ok.parallel, 3);
    assert_eq!(Request::parse(&ok.value()), Ok(ok), "the value reads back");
    let one = Request::parse(r#"{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:00:00Z"}"#)
        .expect("parallel defaults");
    assert_eq!(one.parallel, 1);
    let refused = [
        ("not json", "not a JSON object"),
        (r#"{"to":"2026-01-01T00:00:00Z"}"#, "\"from\""),
        (
            r#"{"from":"yesterday","to":"2026-01-01T00:00:00Z"}"#,
            "RFC 3339",
        ),
        (
            r#"{"from":"2026-01-02T00:00:00Z","to":"2026-01-01T00:00:00Z"}"#,
            "before",
        ),
        (
            r#"{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:00:00Z","parallel":0}"#,
            "1 to 10",
        ),
        (
            r#"{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:00:00Z","parallel":11}"#,
            "1 to 10",
        ),
        (
            r#"{"from":"2026-01-01T00:00:00Z","to":"2026-01-01T00:00:00Z","parallel":"2"}"#,
            "number",
        ),
    ];
    for (value, says) in refused {
        let e = Request::parse(value).expect_err(value);
        assert!(e.contains(says), "{value}: {e}");
    }
}

#[test]
fn gaps_add_merge_and_forget_the_oldest() {
    let cases: [(&str, Vec<Gap>, Gap, Vec<Gap>); 5] = [
        (
            "into nothing",
            vec![],
            gap(Some("2026-01-01T10:00:00Z"), "2026-01-01T11:00:00Z"),
            vec![gap(Some("2026-01-01T10:00:00Z"), "2026-01-01T11:00:00Z")],
        ),
        (
            "after the creation gap, apart",
            vec![gap(None, "2026-01-01T09:00:01Z")],
            gap(Some("2026-01-01T10:00:00Z"), "2026-01-01T11:00:00Z"),
            vec![
                gap(None, "2026-01-01T09:00:01Z"),
                gap(Some("2026-01-01T10:00:00Z"), "2026-01-01T11:00:00Z"),
            ],
        ),
        (
            "overlapping the creation gap: one range",
            vec![gap(None, "2026-01-01T09:00:01Z")],
            gap(Some("2026-01-01T09:00:00Z"), "2026-01-01T11:00:00Z"),
            vec![gap(None, "2026-01-01T11:00:00Z")],
        ),
        (
            "touching at a slot that ran: two ranges",
            vec![gap(Some("2026-01-01T08:00:00Z"), "2026-01-01T09:00:00Z")],
            gap(Some("2026-01-01T09:00:00Z"), "2026-01-01T11:00:00Z"),
            vec![
                gap(Some("2026-01-01T08:00:00Z"), "2026-01-01T09:00:00Z"),
                gap(Some("2026-01-01T09:00:00Z"), "2026-01-01T11:00:00Z"),
            ],
        ),
        (
            "empty ranges are dropped",
            vec![],
            gap(Some("2026-01-01T11:00:00Z"), "2026-01-01T11:00:00Z"),
            vec![],
        ),
    ];
    for (what, gaps, new, want) in cases {
        assert_eq!(add(&gaps, new), want, "{what}");
    }
    let mut gaps = Vec::new();
    for h in 0..25 {
        gaps = add(
            &gaps,
            Gap {
                after: Some(t("2026-01-01T00:00:00Z") + SignedDuration::from_hours(h)),
                before: t("2026-01-01T00:30:00Z") + SignedDuration::from_hours(h),
            },
        );
    }
    assert_eq!(gaps.len(), MAX_MISSED_RANGES);
    assert_eq!(
        gaps[0].after,
        Some(t("2026-01-01T05:00:00Z")),
        "the oldest five are forgotten"
    );
}

#[test]
fn subtracting_what_ran_splits_a_range_at_most_once() {
    let whole = gap(Some("2026-01-01T10:00:00Z"), "2026-01-01T11:00:00Z");
    let cases = [
        (
            "the middle",
            ("2026-01-01T10:10:00Z", "2026-01-01T10:20:00Z"),
            vec![
                gap(Some("2026-01-01T10:00:00Z"), "2026-01-01T10:10:00Z"),
                gap(Some("2026-01-01T10:20:00Z"), "2026-01-01T11:00:00Z"),
            ],
        ),
        (
            "from before it",
            ("2026-01-01T09:00:00Z", "2026-01-01T10:20:00Z"),
            vec![gap(Some("2026-01-01T10:20:00Z"), "2026-01-01T11:00:00Z")],
        ),
        (
            "all of it",
            ("2026-01-01T09:00:00Z", "2026-01-01T12:00:00Z"),
            vec![],
        ),
        (
            "outside it",
            ("2026-01-01T12:00:00Z", "2026-01-01T13:00:00Z"),
            vec![whole],
        ),
        (
            "its end bound only (not in it)",
            ("2026-01-01T11:00:00Z", "2026-01-01T11:30:00Z"),
            vec![whole],
        ),
    ];
    for (what, (from, through), want) in cases {
        assert_eq!(subtract(&[whole], t(from), t(through)), want, "{what}");
        for s in [
            "2026-01-01T10:05:00Z",
            "2026-01-01T10:15:00Z",
            "2026-01-01T10:50:00Z",
        ] {
            let ran = t(from) <= t(s) && t(s) <= t(through);
            assert_eq!(
                contains(&subtract(&[whole], t(from), t(through)), t(s)),
                !ran,
                "{what}: {s}"
            );
        }
    }
    let open = gap(None, "2026-01-01T10:00:01Z");
    assert_eq!(
        subtract(
            &[open],
            t("2026-01-01T09:50:00Z"),
            t("2026-01-01T09:52:00Z")
        ),
        vec![
            gap(None, "2026-01-01T09:50:00Z"),
            gap(Some("2026-01-01T09:52:00Z"), "2026-01-01T10:00:01Z"),
        ]
    );
}

#[test]
fn before_anything_is_recorded_only_the_slots_up_to_creation_never_ran() {
    let cj = cronjob("* * * * *");
    let created = t(CREATED);
    let gaps = missed(&cj);
    assert!(
        contains(&gaps, created),
        "the creation minute itself never ran"
    );
    assert!(contains(&gaps, created - SignedDuration::from_hours(48)));
    assert!(!contains(&gaps, created + SignedDuration::from_secs(60)));

    let mut migrated = cronjob("* * * * *");
    migrated.metadata.annotations = Some(BTreeMap::from([(
        MIGRATED_FROM.to_string(),
        "batch/v1".to_string(),
    )]));
    assert!(
        missed(&migrated).is_empty(),
        "batch/v1's past is unknown: it ran"
    );

    let mut recorded = cronjob("* * * * *");
    recorded.status = Some(CronJobStatus {
        missed: Some(vec![]),
        ..Default::default()
    });
    assert!(
        missed(&recorded).is_empty(),
        "a record replaces the creation rule"
    );
}

#[test]
fn slots_of_a_range_oldest_first_bounded_and_once_on_a_dst_day() {
    let cj = cronjob("*/15 * * * *");
    let (schedule, tz) = schedule_of(&cj).expect("schedule");
    let got = slots_between(
        &schedule,
        &tz,
        t("2026-01-01T10:00:00Z"),
        t("2026-01-01T10:45:00Z"),
        10,
    )
    .expect("few");
    let want: Vec<Timestamp> = ["10:00", "10:15", "10:30", "10:45"]
        .iter()
        .map(|hm| t(&format!("2026-01-01T{hm}:00Z")))
        .collect();
    assert_eq!(got, want, "both ends are in the range");
    assert_eq!(
        slots_between(
            &schedule,
            &tz,
            t("2026-01-01T10:00:00Z"),
            t("2026-01-02T10:00:00Z"),
            10
        ),
        Err(11)
    );

    let mut berlin = cronjob("30 2 * * *");
    berlin.spec.time_zone = Some("Europe/Berlin".into());
    let (schedule, tz) = schedule_of(&berlin).expect("schedule");
    // 29 March 2026: 02:00 becomes 03:00; the 02:30 slot runs once, at 03:00 (01:00 UTC).
    let got = slots_between(
        &schedule,
        &tz,
        t("2026-03-28T00:00:00Z"),
        t("2026-03-30T23:00:00Z"),
        10,
    )
    .expect("few");
    assert_eq!(
        got,
        vec![
            t("2026-03-28T01:30:00Z"),
            t("2026-03-29T01:00:00Z"),
            t("2026-03-30T00:30:00Z"),
        ]
    );

    let every = cronjob("@every 1h");
    assert!(schedule_of(&every).expect_err("@every").contains("@every"));
}

/// A backfill from the first instant there is (the webhook reads it as RFC 3339) panicked the
/// controller, which stepped a nanosecond back from it.
#[test]
fn a_range_from_the_first_instant_walks_its_slots_without_overflow() {
    let request =
        Request::parse(r#"{"from":"-009999-01-02T01:59:59Z","to":"-009999-01-02T02:00:00Z"}"#)
            .expect("the webhook admits it");
    assert_eq!(request.from, Timestamp::MIN);
    let (schedule, tz) = schedule_of(&cronjob("* * * * *")).expect("schedule");
    assert_eq!(
        slots_between(&schedule, &tz, request.from, request.to, 10),
        Ok(vec![])
    );
}

/// A CronJob created at the last instant there is panicked the controller, which stepped a
/// second past it for the end of the slots that never ran.
#[test]
fn a_creation_at_the_last_instant_misses_every_slot_up_to_it() {
    let mut cj = cronjob("* * * * *");
    cj.metadata.creation_timestamp = Some(Time(Timestamp::MAX));
    let gaps = missed(&cj);
    assert_eq!(
        gaps,
        vec![Gap {
            after: None,
            before: Timestamp::MAX
        }]
    );
}

#[test]
fn a_range_plan_runs_only_missed_slots_without_a_job() {
    let mut cj = cronjob("*/10 * * * *");
    cj.status = Some(CronJobStatus {
        last_schedule_time: Some(Time(t("2026-01-01T12:00:00Z"))),
        missed: Some(vec![]),
        ..Default::default()
    });
    let gaps = vec![gap(Some("2026-01-01T10:00:00Z"), "2026-01-01T11:00:00Z")];
    let request =
        Request::new(t("2026-01-01T09:40:00Z"), t("2026-01-01T13:00:00Z"), 2).expect("ok");
    let now = t("2026-01-01T11:15:00Z");
    let exists = |s: Timestamp| s == t("2026-01-01T10:20:00Z");
    let got = plan_slots(&cj, &request, &gaps, &Exclusions::none(), now, exists).expect("plan");
    let want = [
        ("09:40", SlotState::AlreadyRan),
        ("09:50", SlotState::AlreadyRan),
        ("10:00", SlotState::AlreadyRan),
        ("10:10", SlotState::Run),
        ("10:20", SlotState::JobExists),
        ("10:30", SlotState::Run),
        ("10:40", SlotState::Run),
        ("10:50", SlotState::Run),
        ("11:00", SlotState::AlreadyRan),
        ("11:10", SlotState::AlreadyRan),
    ];
    let want: Vec<(Timestamp, SlotState)> = want
        .iter()
        .map(|(hm, s)| (t(&format!("2026-01-01T{hm}:00Z")), s.clone()))
        .collect();
    assert_eq!(got, want, "clamped to now, oldest first");
    let huge = Request::new(t("2025-01-01T00:00:00Z"), t("2026-01-01T00:00:00Z"), 1).expect("ok");
    let e =
        plan_slots(&cj, &huge, &gaps, &Exclusions::none(), now, |_| false).expect_err("too long");
    assert!(e.contains("1000"), "{e}");
}

#[test]
fn a_backfill_never_runs_a_slot_its_calendars_or_window_rule_out() {
    use crate::schedule::exclusions::{Skip, Source};
    let mut cj = cronjob("0 12 * * *");
    cj.spec.time_zone = Some("Europe/Berlin".into());
    let days = crate::api::CalendarSpec {
        dates: vec!["2026-01-03".into()],
        ..Default::default()
    };
    cj.spec.exclusions = Some(days.clone());
    cj.spec.not_after = Some(Time(t("2026-01-05T00:00:00Z")));
    let exclusions = Exclusions::none().with(Source::Inline, days.days()).with(
        Source::Calendar("holidays".into()),
        {
            crate::api::CalendarSpec {
                yearly: vec!["01-02".into()],
                ..Default::default()
            }
            .days()
        },
    );
    let gaps = vec![gap(None, "2026-02-01T00:00:00Z")];
    let request =
        Request::new(t("2026-01-01T00:00:00Z"), t("2026-01-06T00:00:00Z"), 1).expect("ok");
    let got = plan_slots(
        &cj,
        &request,
        &gaps,
        &exclusions,
        t("2026-01-20T00:00:00Z"),
        |_| false,
    )
    .expect("plan");
    let date = |d: &str| d.parse::<jiff::civil::Date>().expect("date");
    let want = vec![
        (t("2026-01-01T11:00:00Z"), SlotState::Run),
        (
            t("2026-01-02T11:00:00Z"),
            SlotState::Excluded(Skip {
                source: Source::Calendar("holidays".into()),
                date: date("2026-01-02"),
            }),
        ),
        (
            t("2026-01-03T11:00:00Z"),
            SlotState::Excluded(Skip {
                source: Source::Inline,
                date: date("2026-01-03"),
            }),
        ),
        (t("2026-01-04T11:00:00Z"), SlotState::Run),
        (t("2026-01-05T11:00:00Z"), SlotState::OutsideWindow),
    ];
    assert_eq!(got, want);
    assert_eq!(
        got[1].1.describe(),
        "skip: Calendar holidays excludes 2026-01-02"
    );
}
