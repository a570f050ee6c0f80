//! Property tests: the parser never panics; every slot returned is in the future, strictly
//! increasing, and matches the expression when checked field by field against a model built
//! here, independently of the parser and of croner.

use std::collections::BTreeSet;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use kronjob::schedule::{Schedule, SlotQuery, slots, time_zone};
use proptest::prelude::*;

/// One list element and the values it selects; `star` is robfig's star bit; `plain` says it
/// is a single value or a range (no `*`, `?` or step).
#[derive(Debug, Clone)]
struct Elem {
    text: String,
    values: BTreeSet<u32>,
    star: bool,
    plain: bool,
}

const MONTHS: [&str; 12] = [
    "JAN", "feb", "Mar", "APR", "may", "JUN", "jul", "AUG", "sep", "OCT", "nov", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "mon", "Tue", "WED", "thu", "FRI", "sat"];

fn name_of(lo: u32, field: usize) -> Option<&'static str> {
    match field {
        3 => MONTHS.get(lo as usize - 1).copied(),
        4 => DAYS.get(lo as usize).copied(),
        _ => None,
    }
}

fn elem(min: u32, max: u32, field: usize) -> impl Strategy<Value = Elem> {
    let value = min..=max;
    prop_oneof![
        Just(Elem {
            text: "*".into(),
            values: (min..=max).collect(),
            star: true,
            plain: false,
        }),
        Just(Elem {
            text: "?".into(),
            values: (min..=max).collect(),
            star: true,
            plain: false,
        }),
        (value.clone(), any::<bool>()).prop_map(move |(v, named)| {
            let text = match (named, name_of(v, field)) {
                (true, Some(n)) => n.to_string(),
                _ => v.to_string(),
            };
            Elem {
                text,
                values: BTreeSet::from([v]),
                star: false,
                plain: true,
            }
        }),
        (value.clone(), value.clone()).prop_map(|(a, b)| {
            let (a, b) = (a.min(b), a.max(b));
            Elem {
                text: format!("{a}-{b}"),
                values: (a..=b).collect(),
                star: false,
                plain: true,
            }
        }),
        (value.clone(), value.clone(), 1u32..20).prop_map(|(a, b, s)| {
            let (a, b) = (a.min(b), a.max(b));
            Elem {
                text: format!("{a}-{b}/{s}"),
                values: (a..=b).step_by(s as usize).collect(),
                star: false,
                plain: false,
            }
        }),
        (1u32..25).prop_map(move |s| Elem {
            text: format!("*/{s}"),
            values: (min..=max).step_by(s as usize).collect(),
            star: s == 1,
            plain: false,
        }),
        (value, 1u32..25).prop_map(move |(a, s)| Elem {
            text: format!("{a}/{s}"),
            values: (a..=max).step_by(s as usize).collect(),
            star: false,
            plain: false,
        }),
    ]
}

/// An expression and, per field, its values, star bit and whether it is plain.
#[derive(Debug, Clone)]
struct Model {
    expr: String,
    fields: Vec<(BTreeSet<u32>, bool, bool)>,
}

type FieldModel = (String, BTreeSet<u32>, bool, bool);

fn field(min: u32, max: u32, idx: usize) -> impl Strategy<Value = FieldModel> {
    prop::collection::vec(elem(min, max, idx), 1..=3).prop_map(|elems| {
        let text = elems
            .iter()
            .map(|e| e.text.clone())
            .collect::<Vec<_>>()
            .join(",");
        let values = elems
            .iter()
            .flat_map(|e| e.values.iter().copied())
            .collect();
        let star = elems.iter().any(|e| e.star);
        let plain = elems.iter().all(|e| e.plain);
        (text, values, star, plain)
    })
}

fn model() -> impl Strategy<Value = Model> {
    (
        field(0, 59, 0),
        field(0, 23, 1),
        field(1, 31, 2),
        field(1, 12, 3),
        field(0, 6, 4),
    )
        .prop_map(|(a, b, c, d, e)| {
            let parts = [a, b, c, d, e];
            Model {
                expr: parts
                    .iter()
                    .map(|p| p.0.clone())
                    .collect::<Vec<_>>()
                    .join(" "),
                fields: parts.into_iter().map(|p| (p.1, p.2, p.3)).collect(),
            }
        })
}

fn date_matches(m: &Model, dt: jiff::civil::DateTime) -> bool {
    let (dom, dom_star, _) = &m.fields[2];
    let (month, _, _) = &m.fields[3];
    let (dow, dow_star, _) = &m.fields[4];
    let d = dom.contains(&(dt.day() as u32));
    let w = dow.contains(&(dt.weekday().to_sunday_zero_offset() as u32));
    let day = if *dom_star || *dow_star {
        d && w
    } else {
        d || w
    };
    day && month.contains(&(dt.month() as u32))
}

fn time_matches(m: &Model, dt: jiff::civil::DateTime) -> bool {
    dt.second() == 0
        && dt.subsec_nanosecond() == 0
        && m.fields[0].0.contains(&(dt.minute() as u32))
        && m.fields[1].0.contains(&(dt.hour() as u32))
}

/// Minute and hour made of single values and ranges only (this model has no `H`).
fn is_fixed_time(m: &Model) -> bool {
    m.fields[0].2 && m.fields[1].2
}

fn instant() -> impl Strategy<Value = Timestamp> {
    // 2000-01-01 .. 2040-01-01, any second
    (946_684_800i64..2_208_988_800).prop_map(|s| Timestamp::from_second(s).expect("in range"))
}

const ZONES: [&str; 6] = [
    "UTC",
    "Asia/Kolkata",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "America/Sao_Paulo",
];

/// Checks that `t` is a slot of `m` in `tz`, independently of the implementation.
fn check_slot(m: &Model, t: Timestamp, tz: &TimeZone) -> Result<(), TestCaseError> {
    let dt = t.to_zoned(tz.clone()).datetime();
    if time_matches(m, dt) && date_matches(m, dt) {
        // A fixed-time schedule runs a repeated time on its first pass only.
        if is_fixed_time(m)
            && let jiff::tz::AmbiguousOffset::Fold { before, .. } =
                tz.to_ambiguous_timestamp(dt).offset()
        {
            prop_assert_eq!(
                before.to_timestamp(dt).ok(),
                Some(t),
                "{} at {} ({}): second pass",
                &m.expr,
                t,
                dt
            );
        }
        return Ok(());
    }
    // The only allowed exception: a fixed-time job whose times fell into a DST gap runs at
    // the first instant after the gap, so `t` is a transition and some scheduled wall time
    // just before `dt` does not exist.
    prop_assert!(is_fixed_time(m), "{} at {t} ({dt}) does not match", m.expr);
    let before = t
        .checked_sub(jiff::SignedDuration::from_secs(1))
        .expect("in range");
    let off_before = tz.to_offset(before).seconds();
    let off_at = tz.to_offset(t).seconds();
    prop_assert!(
        off_at > off_before,
        "{} at {t} ({dt}): not after a spring-forward gap",
        m.expr
    );
    let gap_start = dt
        .checked_sub(jiff::SignedDuration::from_secs(i64::from(
            off_at - off_before,
        )))
        .expect("in range");
    let mut w = gap_start;
    let mut found = false;
    while w < dt {
        found |= time_matches(m, w) && date_matches(m, w);
        w = w
            .checked_add(jiff::SignedDuration::from_mins(1))
            .expect("in range");
    }
    prop_assert!(found, "{} at {t}: no scheduled time in the gap", m.expr);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 600, ..ProptestConfig::default() })]

    #[test]
    fn parser_never_panics(s in "\\PC{0,40}") {
        let _ = Schedule::parse(&s, "ns/name");
    }

    #[test]
    fn parser_never_panics_on_cron_alphabet(s in "[0-9*?/,\\-HLW#+()@a-zA-Z ]{0,30}") {
        let _ = Schedule::parse(&s, "ns/name");
    }

    #[test]
    fn slots_are_future_increasing_and_match(m in model(), t in instant(), zi in 0usize..ZONES.len()) {
        let s = Schedule::parse(&m.expr, "ns/name")
            .map_err(|e| TestCaseError::fail(format!("{}: {e}", m.expr)))?;
        let tz = time_zone(Some(ZONES[zi])).expect("zone");
        let Some(n1) = s.next_after(t, &tz) else {
            // only if no (day, month) pair exists in AND mode
            prop_assert!(!s.ever_fires(), "{} returned None but fires", m.expr);
            return Ok(());
        };
        prop_assert!(n1 > t);
        check_slot(&m, n1, &tz)?;
        let n2 = s.next_after(n1, &tz).expect("fires again");
        prop_assert!(n2 > n1);
        check_slot(&m, n2, &tz)?;
        let n3 = s.next_after(n2, &tz).expect("fires again");
        prop_assert!(n3 > n2);
        check_slot(&m, n3, &tz)?;
        // Nothing skipped: the previous-slot search agrees with the forward search.
        prop_assert_eq!(s.prev_at_or_before(n2, &tz), Some(n2));
        let just_before_n2 = n2.checked_sub(jiff::SignedDuration::from_secs(1)).expect("range");
        prop_assert_eq!(s.prev_at_or_before(just_before_n2, &tz), Some(n1));
    }

    #[test]
    fn slots_due_is_the_latest_slot_in_window(
        m in model(), t in instant(), gap_min in 0i64..3000, zi in 0usize..ZONES.len(),
        deadline in prop::option::of(0i64..200_000),
    ) {
        let s = Schedule::parse(&m.expr, "ns/name").expect("valid");
        prop_assume!(s.ever_fires());
        let tz = time_zone(Some(ZONES[zi])).expect("zone");
        let now = t.checked_add(jiff::SignedDuration::from_mins(gap_min)).expect("range");
        let got = slots(&SlotQuery {
            schedule: &s, tz: &tz, last_schedule_time: Some(t), creation_timestamp: t,
            starting_deadline_seconds: deadline, now,
        }).expect("slots");
        // Reference: walk forward from the window start, at most 150 slots.
        let start = match deadline {
            Some(d) => t.max(now.checked_sub(jiff::SignedDuration::from_secs(d)).expect("range")),
            None => t,
        };
        let mut walked = Vec::new();
        let mut c = start;
        while walked.len() < 150 {
            match s.next_after(c, &tz) {
                Some(n) if n <= now => { walked.push(n); c = n; }
                _ => break,
            }
        }
        prop_assert_eq!(got.next, s.next_after(now, &tz));
        if walked.len() > 100 {
            prop_assert!(got.missed > 100);
            prop_assert!(got.due.is_some());
        } else {
            prop_assert_eq!(got.missed, walked.len() as u64);
            prop_assert_eq!(got.due, walked.last().copied());
        }
        if let Some(due) = got.due {
            prop_assert!(due <= now && due > start);
            prop_assert!(s.next_after(due, &tz).is_none_or(|n| n > now));
        }
    }

    #[test]
    fn every_slots_lie_on_the_anchor_grid(
        d in 1i64..100_000, t in instant(), gap in 0i64..10_000_000, deadline in prop::option::of(0i64..100_000),
    ) {
        let s = Schedule::parse(&format!("@every {d}s"), "").expect("valid");
        let now = t.checked_add(jiff::SignedDuration::from_secs(gap)).expect("range");
        let got = slots(&SlotQuery {
            schedule: &s, tz: &TimeZone::UTC, last_schedule_time: None, creation_timestamp: t,
            starting_deadline_seconds: deadline, now,
        }).expect("slots");
        let k_due = gap / d;
        let next = got.next.expect("next");
        prop_assert_eq!(next.as_second(), t.as_second() + (k_due + 1) * d);
        match got.due {
            Some(due) => {
                prop_assert_eq!(due.as_second(), t.as_second() + k_due * d);
                prop_assert!(k_due >= 1);
                if let Some(dl) = deadline { prop_assert!(due.as_second() + dl > now.as_second()); }
                prop_assert!(got.missed >= 1);
            }
            None => {
                let late = deadline.is_some_and(|dl| t.as_second() + k_due * d + dl <= now.as_second());
                prop_assert!(k_due == 0 || late);
                prop_assert_eq!(got.missed, 0);
            }
        }
    }
}

/// A model whose minute and hour are fixed-time (single values and ranges) and whose hours
/// sit where clocks change (around midnight and 01:00-03:00).
fn fixed_model() -> impl Strategy<Value = Model> {
    let minute = prop::collection::vec(
        prop_oneof![
            (0u32..60).prop_map(|v| (v.to_string(), BTreeSet::from([v]))),
            (0u32..60, 0u32..20).prop_map(|(a, n)| {
                let b = (a + n).min(59);
                (format!("{a}-{b}"), (a..=b).collect())
            }),
        ],
        1..=3,
    );
    let hour = prop::collection::vec(
        prop_oneof![
            prop::sample::select(vec![0u32, 1, 2, 3, 23])
                .prop_map(|v| (v.to_string(), BTreeSet::from([v]))),
            (0u32..4, 0u32..3).prop_map(|(a, n)| (format!("{a}-{}", a + n), (a..=a + n).collect())),
        ],
        1..=2,
    );
    (minute, hour, field(0, 6, 4)).prop_map(|(minute, hour, dow)| {
        let join = |parts: &[(String, BTreeSet<u32>)]| {
            let text = parts
                .iter()
                .map(|p| p.0.clone())
                .collect::<Vec<_>>()
                .join(",");
            let values = parts.iter().flat_map(|p| p.1.iter().copied()).collect();
            (text, values)
        };
        let (mt, mv) = join(&minute);
        let (ht, hv) = join(&hour);
        Model {
            expr: format!("{mt} {ht} * * {}", dow.0),
            fields: vec![
                (mv, false, true),
                (hv, false, true),
                ((1..=31).collect(), true, false),
                ((1..=12).collect(), true, false),
                (dow.1, dow.2, false),
            ],
        }
    })
}

/// The slots in `(from, until]`, straight from the rule's wording, walking real time minute
/// by minute: a fixed-time schedule runs when the clock reaches a matching wall-clock time it
/// has not shown before (several at once run once); an interval schedule runs whenever the
/// clock shows a matching time. (The zones below change their clocks on whole minutes.)
fn reference_slots(m: &Model, tz: &TimeZone, from: Timestamp, until: Timestamp) -> Vec<Timestamp> {
    let minute = jiff::SignedDuration::from_mins(1);
    let civil = |t: Timestamp| t.to_zoned(tz.clone()).datetime();
    let start = Timestamp::from_second(from.as_second().div_euclid(60) * 60 - 2 * 86_400)
        .expect("in range");
    let mut shown = civil(start);
    let mut out = Vec::new();
    let mut u = start;
    while u < until {
        u = u.checked_add(minute).expect("in range");
        let now = civil(u);
        let hit = if is_fixed_time(m) {
            let mut w = shown.checked_add(minute).expect("in range");
            let mut hit = false;
            while w <= now {
                hit |= time_matches(m, w) && date_matches(m, w);
                w = w.checked_add(minute).expect("in range");
            }
            hit
        } else {
            time_matches(m, now) && date_matches(m, now)
        };
        shown = shown.max(now);
        if hit && u > from && u <= until {
            out.push(u);
        }
    }
    out
}

const DST_ZONES: [&str; 5] = [
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Australia/Sydney",
];

/// A DST zone, an instant up to 30 hours before one of the first two clock changes of a year
/// there, and the instant 30 hours after that change.
fn near_transition() -> impl Strategy<Value = (usize, Timestamp, Timestamp)> {
    (
        0usize..DST_ZONES.len(),
        2000i16..2040,
        0usize..2,
        0i64..108_000,
    )
        .prop_map(|(zi, year, k, before)| {
            let tz = time_zone(Some(DST_ZONES[zi])).expect("zone");
            let jan = jiff::civil::date(year, 1, 1)
                .to_zoned(TimeZone::UTC)
                .expect("in range")
                .timestamp();
            let change = tz.following(jan).nth(k).expect("DST zone").timestamp();
            let from = change
                .checked_sub(jiff::SignedDuration::from_secs(before))
                .expect("in range");
            let until = change
                .checked_add(jiff::SignedDuration::from_hours(30))
                .expect("in range");
            (zi, from, until)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Around clock changes, next_after and prev_at_or_before give exactly the slots of the
    /// rule's wording, for fixed-time and interval schedules alike.
    #[test]
    fn slots_around_clock_changes_follow_the_rule(
        m in prop_oneof![fixed_model(), model()], (zi, from, until) in near_transition(),
    ) {
        let s = Schedule::parse(&m.expr, "ns/name")
            .map_err(|e| TestCaseError::fail(format!("{}: {e}", m.expr)))?;
        let tz = time_zone(Some(DST_ZONES[zi])).expect("zone");
        let want = reference_slots(&m, &tz, from, until);
        let mut got = Vec::new();
        let mut t = from;
        while let Some(n) = s.next_after(t, &tz) {
            if n > until {
                break;
            }
            got.push(n);
            t = n;
        }
        prop_assert_eq!(&got, &want, "{} in {} from {}", m.expr, DST_ZONES[zi], from);
        for (i, slot) in want.iter().enumerate() {
            prop_assert_eq!(s.prev_at_or_before(*slot, &tz), Some(*slot));
            if i > 0 {
                let just_before =
                    slot.checked_sub(jiff::SignedDuration::from_secs(1)).expect("range");
                prop_assert_eq!(s.prev_at_or_before(just_before, &tz), Some(want[i - 1]));
            }
        }
    }
}
