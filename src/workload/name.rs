//! Job names. Both derive from the run they are for, so creating the Job of a run twice hits
//! `AlreadyExists` and a run never happens twice, whoever sees it (a second replica, a restart,
//! or a batch/v1 CronJob migrated mid-slot).

use jiff::Timestamp;

/// The Job of the slot `scheduled`: `<cronjob>-<unix seconds / 60>`, as upstream.
pub fn scheduled_name(cronjob: &str, scheduled: Timestamp) -> String {
    format!("{cronjob}-{}", scheduled.as_second() / 60)
}

/// The Job of the manual run requested at `requested`: `<cronjob>-m<unix seconds, base 36>`.
/// At most 61 characters for a CronJob name of 52, the longest valid one (a Job's name may
/// have 63), and never the name of a scheduled run (`<cronjob>-<digits>`).
pub fn manual_name(cronjob: &str, requested: Timestamp) -> String {
    let mut secs = requested.as_second().unsigned_abs();
    let mut digits = Vec::new();
    loop {
        let d = u8::try_from(secs % 36).unwrap_or(0);
        digits.push(if d < 10 { b'0' + d } else { b'a' + d - 10 });
        secs /= 36;
        if secs == 0 {
            break;
        }
    }
    digits.reverse();
    format!("{cronjob}-m{}", String::from_utf8_lossy(&digits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::fixtures::t;

    #[test]
    fn scheduled_names_use_unix_minutes() {
        // 2016-05-19T10:00:00Z = 1463652000 s = 24394200 min (upstream's test fixture time).
        let cases = [
            ("mycronjob", "2016-05-19T10:00:00Z", "mycronjob-24394200"),
            ("mycronjob", "2016-05-19T10:00:59Z", "mycronjob-24394200"),
            ("a", "1970-01-01T00:01:00Z", "a-1"),
        ];
        for (cronjob, at, want) in cases {
            assert_eq!(scheduled_name(cronjob, t(at)), want, "{cronjob} {at}");
        }
    }

    #[test]
    fn manual_names_fit_every_valid_cronjob_name_and_differ_from_scheduled_ones() {
        let longest = "a".repeat(52);
        let name = manual_name(&longest, t("2026-11-25T09:40:12Z"));
        assert_eq!(name, format!("{longest}-mtp1xj0"));
        assert!(name.len() <= 63, "{}", name.len());
        // Base 36 keeps to 7 digits for thousands of years.
        let far = manual_name(&longest, t("4000-01-01T00:00:00Z"));
        assert!(far.len() <= 63, "{far}");
        assert_eq!(manual_name("cj", t("1970-01-01T00:00:35Z")), "cj-mz");
        assert_eq!(manual_name("cj", t("1970-01-01T00:00:36Z")), "cj-m10");
        assert_eq!(manual_name("cj", t("1970-01-01T00:00:00Z")), "cj-m0");
    }
}
