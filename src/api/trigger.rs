//! The runs asked for with `kubectl kronjob trigger`: the CronJob's [`ANNOTATION_TRIGGER`]
//! holds the times they were asked for, RFC 3339, comma-separated, at most [`MAX_PENDING`] of
//! them. A time not after now is due (a run now, or one whose time has come); a later one waits
//! for its time (`trigger --at` / `--in`). Each runs as the Job named after its time, so a time
//! runs once however often it is seen. Pure: the time is given.

use jiff::{SignedDuration, Timestamp};

use super::ANNOTATION_TRIGGER;

/// The most runs a CronJob holds asked for at once.
pub const MAX_PENDING: usize = 10;

/// How far ahead a run may be asked for: a year (366 days).
pub const HORIZON: SignedDuration = SignedDuration::from_hours(366 * 24);

/// The annotation read: the times asked for, and the entries refused.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requests {
    /// The times asked for, whole seconds, oldest first, each once.
    pub times: Vec<Timestamp>,
    /// Each entry refused, with why (not a time, beyond the horizon, beyond the most).
    pub refused: Vec<String>,
}

impl Requests {
    /// The times due at `now` (not after it), oldest first.
    pub fn due(&self, now: Timestamp) -> impl Iterator<Item = Timestamp> + '_ {
        self.times.iter().copied().filter(move |t| *t <= now)
    }

    /// The first time still to come after `now`.
    pub fn next(&self, now: Timestamp) -> Option<Timestamp> {
        self.times.iter().copied().find(|t| *t > now)
    }
}

/// One time as the annotation holds it, whole seconds (a Job's name holds whole seconds).
pub fn floor(at: Timestamp) -> Timestamp {
    let mut secs = at.as_second();
    if at.subsec_nanosecond() < 0 {
        secs -= 1;
    }
    Timestamp::from_second(secs).unwrap_or(at)
}

/// The runs asked for on `cj` at `now`: its annotation read with [`parse`]; none without one.
pub fn requests_of(cj: &super::CronJob, now: Timestamp) -> Requests {
    cj.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_TRIGGER))
        .map(|v| parse(v, now))
        .unwrap_or_default()
}

/// Read the annotation's `value` at `now`: every entry an RFC 3339 time no later than
/// [`HORIZON`] after `now`; of more than [`MAX_PENDING`], the earliest are kept.
pub fn parse(value: &str, now: Timestamp) -> Requests {
    let mut requests = Requests::default();
    for entry in value.split(',').map(str::trim) {
        if entry.is_empty() && !value.trim().is_empty() {
            continue;
        }
        match entry.parse::<Timestamp>() {
            Err(_) => requests.refused.push(format!(
                "{entry:?} is not an RFC 3339 time (annotation {ANNOTATION_TRIGGER})"
            )),
            Ok(at) if at.duration_since(now) > HORIZON => requests
                .refused
                .push(format!("{entry} is more than a year ahead")),
            Ok(at) => requests.times.push(floor(at)),
        }
    }
    requests.times.sort();
    requests.times.dedup();
    for extra in requests
        .times
        .split_off(requests.times.len().min(MAX_PENDING))
    {
        requests.refused.push(format!(
            "{extra} is beyond the {MAX_PENDING} runs a CronJob may have asked for"
        ));
    }
    requests
}

/// The annotation's value holding `times` (oldest first); `None` when there are none.
pub fn format(times: &[Timestamp]) -> Option<String> {
    let mut times = times.to_vec();
    times.sort();
    times.dedup();
    (!times.is_empty()).then(|| {
        times
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().expect("time")
    }

    const NOW: &str = "2026-11-28T19:00:00Z";

    #[test]
    fn parse_table() {
        let now = t(NOW);
        let eleven = (1..=11)
            .map(|d| format!("2026-12-{d:02}T00:00:00Z"))
            .collect::<Vec<_>>()
            .join(",");
        type Case = (&'static str, String, Vec<&'static str>, usize);
        let cases: Vec<Case> = vec![
            (
                "one, as `trigger` writes it",
                "2026-11-28T18:59:00Z".into(),
                vec!["2026-11-28T18:59:00Z"],
                0,
            ),
            (
                "several, any order, spaces",
                "2026-11-29T08:00:00Z, 2026-11-28T20:00:00Z".into(),
                vec!["2026-11-28T20:00:00Z", "2026-11-29T08:00:00Z"],
                0,
            ),
            (
                "an offset and a fraction: whole seconds, UTC",
                "2026-11-28T21:30:05.9+01:00".into(),
                vec!["2026-11-28T20:30:05Z"],
                0,
            ),
            (
                "the same second twice",
                "2026-11-28T20:00:00Z,2026-11-28T20:00:00.5Z".into(),
                vec!["2026-11-28T20:00:00Z"],
                0,
            ),
            (
                "not a time: refused, the others kept",
                "now,2026-11-28T20:00:00Z".into(),
                vec!["2026-11-28T20:00:00Z"],
                1,
            ),
            ("empty", "".into(), vec![], 1),
            (
                "a year ahead is fine",
                "2027-11-29T19:00:00Z".into(),
                vec!["2027-11-29T19:00:00Z"],
                0,
            ),
            (
                "beyond the horizon",
                "2027-11-29T19:00:01Z".into(),
                vec![],
                1,
            ),
            (
                "long past: due",
                "2020-01-01T00:00:00Z".into(),
                vec!["2020-01-01T00:00:00Z"],
                0,
            ),
            (
                "eleven: the earliest ten kept",
                eleven,
                vec![
                    "2026-12-01T00:00:00Z",
                    "2026-12-02T00:00:00Z",
                    "2026-12-03T00:00:00Z",
                    "2026-12-04T00:00:00Z",
                    "2026-12-05T00:00:00Z",
                    "2026-12-06T00:00:00Z",
                    "2026-12-07T00:00:00Z",
                    "2026-12-08T00:00:00Z",
                    "2026-12-09T00:00:00Z",
                    "2026-12-10T00:00:00Z",
                ],
                1,
            ),
        ];
        for (what, value, want, refused) in cases {
            let got = parse(&value, now);
            let want: Vec<Timestamp> = want.into_iter().map(t).collect();
            assert_eq!(got.times, want, "{what}");
            assert_eq!(got.refused.len(), refused, "{what}: {:?}", got.refused);
        }
    }

    #[test]
    fn due_and_next_at_the_edge() {
        let requests = parse("2026-11-28T19:00:00Z,2026-11-28T19:05:00Z", t(NOW));
        let cases = [
            (
                "before",
                "2026-11-28T18:59:59Z",
                0,
                Some("2026-11-28T19:00:00Z"),
            ),
            (
                "at",
                "2026-11-28T19:00:00Z",
                1,
                Some("2026-11-28T19:05:00Z"),
            ),
            (
                "after",
                "2026-11-28T19:00:00.5Z",
                1,
                Some("2026-11-28T19:05:00Z"),
            ),
            ("both", "2026-11-28T19:05:00Z", 2, None),
        ];
        for (what, now, due, next) in cases {
            let now = t(now);
            assert_eq!(requests.due(now).count(), due, "{what}");
            assert_eq!(requests.next(now), next.map(t), "{what}");
        }
    }

    #[test]
    fn format_round_trips() {
        let times = [t("2026-11-29T08:00:00Z"), t("2026-11-28T20:00:00Z")];
        let value = format(&times).expect("value");
        assert_eq!(value, "2026-11-28T20:00:00Z,2026-11-29T08:00:00Z");
        assert_eq!(parse(&value, t(NOW)).times, vec![times[1], times[0]]);
        assert_eq!(format(&[]), None);
    }
}
