//! `kubectl kronjob next --schedule EXPR` (the times of a bare expression; `next NAME` reads a
//! CronJob from the cluster and is tested in cli_plugin.rs).

use clap::Parser;
use jiff::Timestamp;
use kronjob::cli::next::{NextArgs, NextError, run};

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    next: NextArgs,
}

/// `argv[0]` is the schedule, as `kubectl kronjob next --schedule EXPR ...`.
fn args(argv: &[&str]) -> NextArgs {
    let mut full = vec!["next", "--schedule"];
    full.extend_from_slice(argv);
    Cli::try_parse_from(full).expect("arguments").next
}

fn now() -> Timestamp {
    "2024-01-15T10:07:30Z".parse().expect("now")
}

fn output(argv: &[&str]) -> Result<String, NextError> {
    let mut out = Vec::new();
    run(&args(argv), now(), &mut out)?;
    Ok(String::from_utf8(out).expect("utf-8"))
}

#[test]
fn prints_five_utc_times_from_now_by_default() {
    assert_eq!(
        output(&["*/5 * * * *"]).expect("ok"),
        "2024-01-15T10:10:00Z\n2024-01-15T10:15:00Z\n2024-01-15T10:20:00Z\n2024-01-15T10:25:00Z\n2024-01-15T10:30:00Z\n"
    );
}

#[test]
fn from_count_and_zone() {
    assert_eq!(
        output(&[
            "30 2 * * *",
            "--time-zone",
            "America/New_York",
            "--from",
            "2024-03-09T12:00:00Z",
            "--count",
            "2"
        ])
        .expect("ok"),
        "2024-03-10T07:00:00Z\n2024-03-11T06:30:00Z\n"
    );
    assert_eq!(
        output(&[
            "@hourly",
            "--from",
            "2024-01-15T10:00:00+01:00",
            "--count",
            "1"
        ])
        .expect("ok"),
        "2024-01-15T10:00:00Z\n"
    );
    assert_eq!(output(&["@daily", "--count", "0"]).expect("ok"), "");
}

#[test]
fn every_counts_from_the_start() {
    assert_eq!(
        output(&["@every 90m", "--count", "2"]).expect("ok"),
        "2024-01-15T11:37:30Z\n2024-01-15T13:07:30Z\n"
    );
}

#[test]
fn h_needs_a_name_and_is_stable() {
    let err = output(&["H H * * *"]).expect_err("needs --name");
    assert!(matches!(err, NextError::MissingName(_)), "{err:?}");
    let a = output(&["H H * * *", "--name", "default/backup", "--count", "3"]).expect("ok");
    let b = output(&["H H * * *", "--name", "default/backup", "--count", "3"]).expect("ok");
    assert_eq!(a, b);
    // minute 13, hour 7 for this key (pinned in tests/schedule_parse.rs)
    assert!(a.starts_with("2024-01-16T07:13:00Z\n"), "{a}");
}

#[test]
fn errors_carry_the_parse_message() {
    let cases: &[(&[&str], &str)] = &[
        (&["61 * * * *"], "end of range (61) above maximum (59): 61"),
        (
            &["* * * * * *"],
            "expected exactly 5 fields, found 6: [* * * * * *]",
        ),
        (&["@reboot"], "unrecognized descriptor: @reboot"),
        (
            &["* * * * *", "--time-zone", "Europe/Pariss"],
            "unknown time zone Europe/Pariss",
        ),
        (&["0 0 30 2 *"], "schedule \"0 0 30 2 *\" never fires"),
    ];
    for (argv, want) in cases {
        let err = output(argv).expect_err(want);
        assert_eq!(err.to_string(), *want);
    }
    let err = output(&["* * * * *", "--from", "yesterday"]).expect_err("bad --from");
    assert!(matches!(err, NextError::From { .. }), "{err:?}");
    assert!(
        err.to_string().starts_with("invalid --from \"yesterday\""),
        "{err}"
    );
    let err = output(&["* * * * *", "--time-zone", "Local"]).expect_err("Local");
    assert!(matches!(err, NextError::Zone(_)), "{err:?}");
}

#[test]
fn a_cronjob_name_or_a_schedule_but_not_both() {
    for argv in [
        &["next"][..],
        &["next", "cj", "--schedule", "@daily"][..],
        &["next", "cj", "--time-zone", "UTC"][..],
        &["next", "cj", "--name", "ns/cj"][..],
    ] {
        let err = Cli::try_parse_from(argv).expect_err("usage error");
        assert_eq!(err.exit_code(), 2, "{argv:?}");
    }
    let named = Cli::try_parse_from(["next", "cj", "-n", "team", "--count", "3"]).expect("ok");
    assert_eq!(named.next.cronjob(), Some("cj"));
    assert_eq!(named.next.kube().namespace.as_deref(), Some("team"));
}

#[test]
fn several_schedules_are_merged_and_an_error_names_the_entry() {
    let merged = output(&[
        "*/2 * * * *",
        "--schedule",
        "*/3 * * * *",
        "--from",
        "2024-01-15T10:00:00Z",
        "--count",
        "5",
    ])
    .expect("ok");
    assert_eq!(
        merged,
        "2024-01-15T10:02:00Z\n2024-01-15T10:03:00Z\n2024-01-15T10:04:00Z\n2024-01-15T10:06:00Z\n2024-01-15T10:08:00Z\n"
    );
    let cases: &[(&[&str], &str)] = &[
        (
            &["0 * * * *", "--schedule", "61 * * * *"],
            "\"61 * * * *\": end of range (61) above maximum (59): 61",
        ),
        (
            &["0 * * * *", "--schedule", "@every 1h"],
            "\"@every 1h\" cannot be combined with other schedules: @every runs relative to the last run, which the others move",
        ),
        (
            &["H * * * *", "--schedule", "0 9 * * *"],
            "schedule [\"H * * * *\", \"0 9 * * *\"] uses H: pass --name NAMESPACE/NAME to pick its times",
        ),
        (
            &["0 0 30 2 *", "--schedule", "0 0 31 4 *"],
            "schedule [\"0 0 30 2 *\", \"0 0 31 4 *\"] never fires",
        ),
    ];
    for (argv, want) in cases {
        let err = output(argv).expect_err(want);
        assert_eq!(err.to_string(), *want);
    }
}
