//! `kubectl kronjob list | history | next NAME | suspend | resume | trigger` against the scripted API:
//! the exact requests each command makes and what it prints.

#[path = "support/mod.rs"]
mod support;

use clap::Parser;
use http::StatusCode;
use jiff::Timestamp;
use kronjob::api::CronJob;
use kronjob::cli::{CliError, history, list, next, suspend, trigger};
use serde_json::{Value, json};
use support::api_script::{Expect, mock_user_client};
use support::fixtures::*;

const CRONJOBS: &str = "/apis/batch.kronjob.dev/v1/namespaces/ns/cronjobs";
const JOBS: &str = "/apis/batch/v1/namespaces/ns/jobs";
/// `labelSelector=batch.kronjob.dev/cronjob`, URL-encoded.
const HAS_CRONJOB_LABEL: &str = "&labelSelector=batch.kronjob.dev%2Fcronjob";

#[derive(Parser, Debug)]
struct Cli<T: clap::Args> {
    #[command(flatten)]
    args: T,
}

fn parse<T: clap::Args>(argv: &[&str]) -> T {
    let mut full = vec!["kubectl-kronjob"];
    full.extend_from_slice(argv);
    Cli::<T>::try_parse_from(full).expect("arguments").args
}

fn now() -> Timestamp {
    t("2016-05-19T10:05:00Z")
}

fn list_of(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "7"}, "items": items})
}

fn json_of<T: serde::Serialize>(object: &T) -> Value {
    serde_json::to_value(object).expect("JSON")
}

/// What a command printed on stdout and stderr.
#[derive(Debug, Default)]
struct Printed {
    out: String,
    err: String,
}

/// The README's examples are this output, verbatim.
fn shown_in_readme(output: &str) {
    let readme = include_str!("../README.md");
    assert!(readme.contains(output), "README.md shows:\n{output}");
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).expect("utf-8")
}

fn hourly() -> CronJob {
    cronjob("0 * * * *")
        .named("hourly")
        .created_at("2016-05-15T10:05:00Z")
}

fn nightly() -> CronJob {
    cronjob("30 2 * * *").named("nightly").zone("Europe/Berlin")
}

async fn run_list(argv: &[&str], script: Vec<Expect>) -> (Result<(), CliError>, Printed) {
    let (client, server) = mock_user_client();
    let server = server.run(script);
    let args: list::ListArgs = parse(argv);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let result = list::run(client, &args, now(), &mut out, &mut err).await;
    server.await.expect("the API saw what it expected");
    let printed = Printed {
        out: text(out),
        err: text(err),
    };
    (result, printed)
}

#[tokio::test]
async fn list_reads_the_cronjobs_then_their_jobs_in_one_request() {
    let jobs = vec![
        json_of(
            &job("hourly-1")
                .owned_by("hourly-uid")
                .complete_at("2016-05-19T10:02:00Z"),
        ),
        json_of(
            &job("nightly-1")
                .owned_by("nightly-uid")
                .failed_at("2016-05-19T00:31:00Z"),
        ),
    ];
    let (result, printed) = run_list(
        &["-n", "ns"],
        vec![
            Expect::get(CRONJOBS).ok(list_of(
                "CronJobList",
                vec![json_of(&hourly()), json_of(&nightly())],
            )),
            Expect::get(JOBS)
                .query(HAS_CRONJOB_LABEL)
                .ok(list_of("JobList", jobs)),
        ],
    )
    .await;
    result.expect("list");
    assert_eq!(
        printed.out,
        "\
NAME      SCHEDULE     TIMEZONE        SUSPEND   ACTIVE   QUEUED   PENDING   LAST RUN            NEXT RUN   AGE
hourly    0 * * * *    <none>          false     0        0        <none>    3m ago (Complete)   in 55m     4d
nightly   30 2 * * *   Europe/Berlin   false     0        0        <none>    9h ago (Failed)     in 14h     6m
"
    );
    assert_eq!(printed.err, "");
    shown_in_readme(&printed.out);
}

#[tokio::test]
async fn list_all_namespaces_reads_cluster_wide_and_adds_the_namespace() {
    let elsewhere = {
        let mut cj = hourly();
        cj.metadata.namespace = Some("team-b".into());
        cj
    };
    let (result, printed) = run_list(
        &["-A", "-o", "wide"],
        vec![
            Expect::get("/apis/batch.kronjob.dev/v1/cronjobs")
                .ok(list_of("CronJobList", vec![json_of(&elsewhere)])),
            Expect::get("/apis/batch/v1/jobs")
                .query(HAS_CRONJOB_LABEL)
                .ok(list_of("JobList", vec![])),
        ],
    )
    .await;
    result.expect("list");
    assert_eq!(
        printed.out,
        "\
NAMESPACE   NAME     SCHEDULE    TIMEZONE   SUSPEND   ACTIVE   QUEUED   PENDING   LAST RUN   NEXT RUN   AGE   CONTAINERS   IMAGES    LAST SUCCESS
team-b      hourly   0 * * * *   <none>     false     0        0        <none>    <none>     in 55m     4d    c            busybox   <none>
"
    );
}

#[tokio::test]
async fn list_passes_the_selector_and_prints_a_list_as_json() {
    let (result, printed) = run_list(
        &["-n", "ns", "-l", "team=a", "-o", "json"],
        vec![
            Expect::get(CRONJOBS)
                .query("&labelSelector=team%3Da")
                .ok(list_of("CronJobList", vec![json_of(&hourly())])),
        ],
    )
    .await;
    result.expect("list");
    let printed: Value = serde_json::from_str(&printed.out).expect("JSON");
    assert_eq!(printed["kind"], "List");
    assert_eq!(printed["items"][0]["metadata"]["name"], "hourly");
    assert_eq!(printed["items"][0]["kind"], "CronJob");
}

#[tokio::test]
async fn list_with_nothing_found_says_so_on_stderr() {
    // Without -n: the namespace of the kubeconfig context ("default" for the mock client).
    let (result, printed) = run_list(
        &[],
        vec![
            Expect::get("/apis/batch.kronjob.dev/v1/namespaces/default/cronjobs")
                .ok(list_of("CronJobList", vec![])),
        ],
    )
    .await;
    result.expect("list");
    assert_eq!(printed.out, "");
    assert_eq!(printed.err, "No resources found in default namespace.\n");
}

#[tokio::test]
async fn list_without_the_crd_says_it_is_missing() {
    let (result, _) = run_list(
        &["-n", "ns"],
        vec![Expect::get(CRONJOBS).fails(StatusCode::NOT_FOUND, "NotFound")],
    )
    .await;
    let err = result.expect_err("no CRD");
    assert_eq!(
        err.to_string(),
        "the CronJob CRD (cronjobs.batch.kronjob.dev) is not installed in this cluster: kubectl apply -f crd/"
    );
    assert_eq!(err.exit_code(), 1);
}

#[test]
fn list_refuses_a_bad_selector_as_a_usage_error() {
    let err = Cli::<list::ListArgs>::try_parse_from(["kubectl-kronjob", "-l", "team in prod"])
        .expect_err("bad selector");
    assert_eq!(err.exit_code(), 2);
}

async fn run_history(argv: &[&str], script: Vec<Expect>) -> (Result<(), CliError>, Printed) {
    let (client, server) = mock_user_client();
    let server = server.run(script);
    let args: history::HistoryArgs = parse(argv);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let result = history::run(client, &args, now(), &mut out, &mut err).await;
    server.await.expect("the API saw what it expected");
    let printed = Printed {
        out: text(out),
        err: text(err),
    };
    (result, printed)
}

#[tokio::test]
async fn history_shows_the_jobs_the_cronjob_controls_newest_first() {
    let jobs = vec![
        json_of(
            &job("cj-24394200")
                .scheduled_for("2016-05-19T10:00:00Z")
                .started_at("2016-05-19T10:00:01Z")
                .failed_at("2016-05-19T10:02:31Z"),
        ),
        json_of(&job("copied-label").owned_by("someone-else-uid")),
        json_of(
            &job("cj-mo7f5ao")
                .manual()
                .started_at("2016-05-19T10:04:00Z"),
        ),
    ];
    let mut jobs = jobs;
    jobs[0]["metadata"]["creationTimestamp"] = json!("2016-05-19T10:00:00Z");
    jobs[2]["metadata"]["creationTimestamp"] = json!("2016-05-19T10:04:00Z");
    let (result, printed) = run_history(
        &["cj", "-n", "ns"],
        vec![
            Expect::get(&format!("{CRONJOBS}/cj")).ok(json_of(&cronjob("0 * * * *"))),
            Expect::get(JOBS)
                .query("&labelSelector=batch.kronjob.dev%2Fcronjob%3Dcj")
                .ok(list_of("JobList", jobs)),
        ],
    )
    .await;
    result.expect("history");
    assert_eq!(
        printed.out,
        "\
NAME          KIND   SCHEDULED              RESULT    START       DURATION
cj-mo7f5ao    Job    manual                 Running   60s ago     60s
cj-24394200   Job    2016-05-19T10:00:00Z   Failed    4m59s ago   2m30s
"
    );
    shown_in_readme(&printed.out);
}

#[tokio::test]
async fn history_of_a_missing_cronjob_is_the_servers_error() {
    let (result, printed) = run_history(
        &["gone", "-n", "ns"],
        vec![Expect::get(&format!("{CRONJOBS}/gone")).fails(StatusCode::NOT_FOUND, "NotFound")],
    )
    .await;
    let err = result.expect_err("not found");
    assert_eq!(err.to_string(), "mock NotFound");
    assert_eq!(err.exit_code(), 1);
    assert_eq!(printed.out, "");
}

#[tokio::test]
async fn history_without_runs_says_so() {
    let (result, printed) = run_history(
        &["cj", "-n", "ns"],
        vec![
            Expect::get(&format!("{CRONJOBS}/cj")).ok(json_of(&cronjob("0 * * * *"))),
            Expect::get(JOBS)
                .query("&labelSelector=batch.kronjob.dev%2Fcronjob%3Dcj")
                .ok(list_of("JobList", vec![])),
        ],
    )
    .await;
    result.expect("history");
    assert_eq!(printed.out, "");
    assert_eq!(
        printed.err,
        "No runs of cronjob.batch.kronjob.dev/cj in ns namespace.\n"
    );
}

async fn run_next(argv: &[&str], cj: CronJob) -> (Result<(), CliError>, Printed) {
    let (client, server) = mock_user_client();
    let server = server.run(vec![
        Expect::get(&format!("{CRONJOBS}/cj")).ok(json_of(&cj)),
    ]);
    let args: next::NextArgs = parse(argv);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let result = next::run_cronjob(client, &args, now(), &mut out, &mut err).await;
    server.await.expect("the API saw what it expected");
    let printed = Printed {
        out: text(out),
        err: text(err),
    };
    (result, printed)
}

#[tokio::test]
async fn next_of_a_cronjob_prints_its_zone_and_utc() {
    let (result, printed) = run_next(
        &[
            "cj",
            "-n",
            "ns",
            "--count",
            "2",
            "--from",
            "2024-03-30T12:00:00Z",
        ],
        cronjob("30 2 * * *").zone("Europe/Berlin"),
    )
    .await;
    result.expect("next");
    // 02:30 does not exist in Berlin on 2024-03-31: it runs at 03:00, right after the jump.
    assert_eq!(
        printed.out,
        "\
Europe/Berlin               UTC
2024-03-31T03:00:00+02:00   2024-03-31T01:00:00Z
2024-04-01T02:30:00+02:00   2024-04-01T00:30:00Z
"
    );
    assert_eq!(printed.err, "");
    shown_in_readme(&printed.out);
}

#[tokio::test]
async fn next_of_a_cronjob_with_several_schedules_merges_them() {
    let (result, printed) = run_next(
        &[
            "cj",
            "-n",
            "ns",
            "--count",
            "5",
            "--from",
            "2024-01-15T10:00:00Z",
        ],
        cronjob("unused").schedules(&["*/2 * * * *", "*/3 * * * *"]),
    )
    .await;
    result.expect("next");
    assert_eq!(
        printed.out,
        "\
UTC
2024-01-15T10:02:00Z
2024-01-15T10:03:00Z
2024-01-15T10:04:00Z
2024-01-15T10:06:00Z
2024-01-15T10:08:00Z
"
    );
}

#[tokio::test]
async fn list_shows_the_first_of_several_schedules_and_how_many_more() {
    let several = cronjob("unused").named("several").schedules(&[
        "*/2 * * * *",
        "*/3 * * * *",
        "0 12 * * SUN",
    ]);
    let (result, printed) = run_list(
        &["-n", "ns"],
        vec![
            Expect::get(CRONJOBS).ok(list_of("CronJobList", vec![json_of(&several)])),
            Expect::get(JOBS)
                .query(HAS_CRONJOB_LABEL)
                .ok(list_of("JobList", vec![])),
        ],
    )
    .await;
    result.expect("list");
    assert_eq!(
        printed.out,
        "\
NAME      SCHEDULE           TIMEZONE   SUSPEND   ACTIVE   QUEUED   PENDING   LAST RUN   NEXT RUN   AGE
several   */2 * * * * (+2)   <none>     false     0        0        <none>    <none>     in 60s     6m
"
    );
}

#[tokio::test]
async fn next_from_before_the_cronjob_existed_or_last_ran_shows_its_schedule_then() {
    let argv = [
        "cj",
        "-n",
        "ns",
        "--count",
        "2",
        "--from",
        "2024-03-30T12:00:00Z",
    ];
    let created = cronjob("30 2 * * *")
        .zone("Europe/Berlin")
        .created_at("2026-11-25T14:00:00Z");
    let ran = created.clone().last_scheduled("2026-11-26T01:30:00Z");
    for cj in [created, ran] {
        let (result, printed) = run_next(&argv, cj).await;
        result.expect("next");
        assert_eq!(
            printed.out,
            "\
Europe/Berlin               UTC
2024-03-31T03:00:00+02:00   2024-03-31T01:00:00Z
2024-04-01T02:30:00+02:00   2024-04-01T00:30:00Z
"
        );
    }
}

#[tokio::test]
async fn next_of_a_cronjob_hashes_h_with_its_namespace_and_name() {
    let (result, printed) =
        run_next(&["cj", "-n", "ns", "--count", "1"], cronjob("H H * * *")).await;
    result.expect("next");
    let mut bare = Vec::new();
    let bare_args: next::NextArgs =
        parse(&["--schedule", "H H * * *", "--name", "ns/cj", "--count", "1"]);
    next::run(&bare_args, now(), &mut bare).expect("next --schedule");
    assert_eq!(printed.out, format!("UTC\n{}", text(bare)));
}

#[tokio::test]
async fn next_of_an_every_cronjob_keeps_the_controllers_grid() {
    // Created 09:59, last ran 10:01: every 90 minutes from there, not from now (10:05).
    let cj = cronjob("@every 90m").last_scheduled("2016-05-19T10:01:00Z");
    let (result, printed) = run_next(&["cj", "-n", "ns", "--count", "2"], cj).await;
    result.expect("next");
    assert_eq!(
        printed.out,
        "UTC\n2016-05-19T11:31:00Z\n2016-05-19T13:01:00Z\n"
    );
}

#[tokio::test]
async fn next_of_a_suspended_cronjob_warns() {
    let (result, printed) = run_next(
        &["cj", "-n", "ns", "--count", "1"],
        cronjob("0 * * * *").suspended(),
    )
    .await;
    result.expect("next");
    assert_eq!(printed.out, "UTC\n2016-05-19T11:00:00Z\n");
    assert_eq!(
        printed.err,
        "warning: cronjob.batch.kronjob.dev/cj is suspended: it runs at these times only once resumed\n"
    );
}

#[tokio::test]
async fn next_of_a_cronjob_with_a_bad_schedule_fails() {
    let (result, _) = run_next(&["cj", "-n", "ns"], cronjob("0 0 30 2 *")).await;
    let err = result.expect_err("never fires");
    assert_eq!(err.to_string(), "schedule \"0 0 30 2 *\" never fires");
    assert_eq!(err.exit_code(), 1);
}

#[tokio::test]
async fn suspend_and_resume_patch_spec_suspend_and_say_so() {
    for (suspend, word) in [(true, "suspended"), (false, "resumed")] {
        let (client, server) = mock_user_client();
        // Twice: the same request and the same answer (nothing more changes).
        let patch = || {
            Expect::patch(&format!("{CRONJOBS}/cj"))
                .body(json!({"spec": {"suspend": suspend}}))
                .ok(json_of(&cronjob("0 * * * *")))
        };
        let server = server.run(vec![patch(), patch()]);
        let args: suspend::SuspendArgs = parse(&["cj", "-n", "ns"]);
        let mut out = Vec::new();
        for _ in 0..2 {
            suspend::run(client.clone(), &args, suspend, &mut out)
                .await
                .expect("patch");
        }
        server.await.expect("the API saw what it expected");
        assert_eq!(
            text(out),
            format!("cronjob.batch.kronjob.dev/cj {word}\ncronjob.batch.kronjob.dev/cj {word}\n")
        );
        shown_in_readme(&format!("cronjob.batch.kronjob.dev/cj {word}"));
    }
}

#[tokio::test]
async fn suspend_of_a_missing_cronjob_fails() {
    let (client, server) = mock_user_client();
    let server = server.run(vec![
        Expect::patch(&format!("{CRONJOBS}/gone")).fails(StatusCode::NOT_FOUND, "NotFound"),
    ]);
    let args: suspend::SuspendArgs = parse(&["gone", "-n", "ns"]);
    let mut out = Vec::new();
    let err = suspend::run(client, &args, true, &mut out)
        .await
        .expect_err("not found");
    server.await.expect("the API saw what it expected");
    assert_eq!(err.to_string(), "mock NotFound");
    assert!(out.is_empty());
}

/// The manual run requested at [`now`]: `cj-m` and the request's unix seconds in base 36.
const MANUAL_JOB: &str = "cj-mo7f5cc";

fn trigger_requested() -> Expect {
    Expect::patch(&format!("{CRONJOBS}/cj"))
        .body(json!({"metadata": {"resourceVersion": "1", "annotations": {"batch.kronjob.dev/trigger": "2016-05-19T10:05:00Z"}}}))
        .ok(json_of(&cronjob("0 * * * *")))
}

async fn run_trigger(argv: &[&str], expected: Vec<Expect>) -> (Result<(), CliError>, String) {
    let (client, server) = mock_user_client();
    let server = server.run(expected);
    let args: trigger::TriggerArgs = parse(argv);
    let mut out = Vec::new();
    let result = trigger::run(client, &args, now(), &mut out).await;
    server.await.expect("the API saw what it expected");
    (result, text(out))
}

#[tokio::test(start_paused = true)]
async fn trigger_asks_the_manager_and_waits_for_the_job() {
    let job = format!("{JOBS}/{MANUAL_JOB}");
    let (result, out) = run_trigger(
        &["cj", "-n", "ns"],
        vec![
            Expect::get(&format!("{CRONJOBS}/cj")).ok(json_of(&cronjob("0 * * * *"))),
            trigger_requested(),
            Expect::get(&job).fails(StatusCode::NOT_FOUND, "NotFound"),
            Expect::get(&job).ok(json_of(&support::fixtures::job(MANUAL_JOB).manual())),
        ],
    )
    .await;
    result.expect("trigger");
    assert_eq!(out, format!("job.batch/{MANUAL_JOB} created\n"));
    shown_in_readme(&out);
}

#[tokio::test(start_paused = true)]
async fn trigger_joins_a_pending_request_instead_of_asking_again() {
    let mut pending = cronjob("0 * * * *");
    pending.metadata.annotations.get_or_insert_default().insert(
        "batch.kronjob.dev/trigger".into(),
        "2016-05-19T10:05:00Z".into(),
    );
    let (result, out) = run_trigger(
        &["cj", "-n", "ns"],
        vec![
            Expect::get(&format!("{CRONJOBS}/cj")).ok(json_of(&pending)),
            Expect::get(&format!("{JOBS}/{MANUAL_JOB}"))
                .ok(json_of(&support::fixtures::job(MANUAL_JOB))),
        ],
    )
    .await;
    result.expect("trigger");
    assert_eq!(out, format!("job.batch/{MANUAL_JOB} created\n"));
}

#[tokio::test(start_paused = true)]
async fn trigger_without_a_manager_fails_after_the_wait_and_says_why() {
    let job = format!("{JOBS}/{MANUAL_JOB}");
    let mut expected = vec![
        Expect::get(&format!("{CRONJOBS}/cj")).ok(json_of(&cronjob("0 * * * *"))),
        trigger_requested(),
    ];
    // 2 s, looked for every 500 ms: at 0, 0.5, 1, 1.5 and 2 s.
    for _ in 0..5 {
        expected.push(Expect::get(&job).fails(StatusCode::NOT_FOUND, "NotFound"));
    }
    let (result, out) = run_trigger(&["cj", "-n", "ns", "--wait", "2s"], expected).await;
    let err = result.expect_err("no manager");
    assert_eq!(err.exit_code(), 1);
    assert!(
        err.to_string().starts_with(&format!(
            "job.batch/{MANUAL_JOB} was not created within 2s: is the kronjob manager running?"
        )),
        "{err}"
    );
    assert!(out.is_empty());
}

#[tokio::test]
async fn trigger_with_no_wait_only_asks() {
    let (result, out) = run_trigger(
        &["cj", "-n", "ns", "--wait", "0"],
        vec![
            Expect::get(&format!("{CRONJOBS}/cj")).ok(json_of(&cronjob("0 * * * *"))),
            trigger_requested(),
        ],
    )
    .await;
    result.expect("trigger");
    assert_eq!(
        out,
        format!(
            "cronjob.batch.kronjob.dev/cj triggered: the manager creates job.batch/{MANUAL_JOB}\n"
        )
    );
}

#[tokio::test]
async fn trigger_of_a_missing_cronjob_fails_without_asking() {
    let (result, _) = run_trigger(
        &["gone", "-n", "ns"],
        vec![Expect::get(&format!("{CRONJOBS}/gone")).fails(StatusCode::NOT_FOUND, "NotFound")],
    )
    .await;
    assert_eq!(result.expect_err("not found").to_string(), "mock NotFound");
}

/// `cj` asking for runs at `times` (the annotation's value).
fn pending(times: &str) -> Value {
    let mut cj = cronjob("0 * * * *");
    cj.metadata
        .annotations
        .get_or_insert_default()
        .insert("batch.kronjob.dev/trigger".into(), times.into());
    json_of(&cj)
}

/// The merge patch writing the annotation `value` onto resourceVersion 1.
fn asked(value: Value) -> Expect {
    Expect::patch(&format!("{CRONJOBS}/cj"))
        .body(json!({"metadata": {"resourceVersion": "1", "annotations": {"batch.kronjob.dev/trigger": value}}}))
        .ok(json_of(&cronjob("0 * * * *")))
}

#[tokio::test]
async fn trigger_in_leaves_a_run_pending_without_waiting() {
    let (result, out) = run_trigger(
        &["cj", "-n", "ns", "--in", "90m"],
        vec![
            Expect::get(&format!("{CRONJOBS}/cj")).ok(json_of(&cronjob("0 * * * *"))),
            asked(json!("2016-05-19T11:35:00Z")),
        ],
    )
    .await;
    result.expect("trigger --in");
    let job = kronjob::workload::manual_name("cj", t("2016-05-19T11:35:00Z"));
    assert_eq!(
        out,
        format!(
            "cronjob.batch.kronjob.dev/cj runs at 2016-05-19T11:35:00Z: pending, the manager creates job.batch/{job} then\n"
        )
    );
}

#[tokio::test]
async fn trigger_at_a_time_past_runs_now_beside_the_pending_runs() {
    let job = kronjob::workload::manual_name("cj", t("2016-05-19T10:00:00Z"));
    let (result, out) = run_trigger(
        &[
            "cj",
            "-n",
            "ns",
            "--at",
            "2016-05-19T12:00:00+02:00",
            "--wait",
            "0",
        ],
        vec![
            Expect::get(&format!("{CRONJOBS}/cj")).ok(pending("2016-05-20T08:00:00Z")),
            // Past: unless it ran already, it runs now.
            Expect::get(&format!("{JOBS}/{job}")).fails(StatusCode::NOT_FOUND, "NotFound"),
            asked(json!("2016-05-19T10:00:00Z,2016-05-20T08:00:00Z")),
        ],
    )
    .await;
    result.expect("a time past runs now");
    assert_eq!(
        out,
        format!("cronjob.batch.kronjob.dev/cj triggered: the manager creates job.batch/{job}\n")
    );
}

#[tokio::test]
async fn trigger_at_a_local_time_is_in_the_cronjobs_zone() {
    let mut berlin = cronjob("0 * * * *").zone("Europe/Berlin");
    berlin.metadata.resource_version = Some("1".into());
    let (result, out) = run_trigger(
        &["cj", "-n", "ns", "--at", "2016-05-19T21:30"],
        vec![
            Expect::get(&format!("{CRONJOBS}/cj")).ok(json_of(&berlin)),
            // 21:30 in Berlin (summer time) is 19:30 UTC.
            asked(json!("2016-05-19T19:30:00Z")),
        ],
    )
    .await;
    result.expect("trigger --at local");
    assert!(
        out.contains("runs at 2016-05-19T19:30:00Z: pending"),
        "{out}"
    );
}

#[tokio::test]
async fn trigger_at_a_pending_time_writes_nothing_and_names_the_others() {
    let (result, out) = run_trigger(
        &["cj", "-n", "ns", "--at", "2016-05-19T11:00:00Z"],
        vec![
            Expect::get(&format!("{CRONJOBS}/cj"))
                .ok(pending("2016-05-19T11:00:00Z,2016-05-19T12:00:00Z")),
        ],
    )
    .await;
    result.expect("already pending");
    assert!(
        out.contains("runs at 2016-05-19T11:00:00Z: pending"),
        "{out}"
    );
    assert!(out.contains("also pending: 2016-05-19T12:00:00Z"), "{out}");
}

#[tokio::test]
async fn trigger_retries_a_write_that_raced_another_change() {
    let (result, _) = run_trigger(
        &["cj", "-n", "ns", "--in", "1h"],
        vec![
            Expect::get(&format!("{CRONJOBS}/cj")).ok(json_of(&cronjob("0 * * * *"))),
            Expect::patch(&format!("{CRONJOBS}/cj")).fails(StatusCode::CONFLICT, "Conflict"),
            Expect::get(&format!("{CRONJOBS}/cj")).ok(json_of(&cronjob("0 * * * *"))),
            asked(json!("2016-05-19T11:05:00Z")),
        ],
    )
    .await;
    result.expect("retried");
}

#[tokio::test]
async fn trigger_refuses_more_than_ten_pending_runs_and_times_beyond_a_year() {
    let ten = (1..=10)
        .map(|d| format!("2016-06-{d:02}T00:00:00Z"))
        .collect::<Vec<_>>()
        .join(",");
    let (result, _) = run_trigger(
        &["cj", "-n", "ns", "--in", "1h"],
        vec![Expect::get(&format!("{CRONJOBS}/cj")).ok(pending(&ten))],
    )
    .await;
    let err = result.expect_err("full");
    assert_eq!(err.exit_code(), 1);
    assert!(err.to_string().contains("has 10 runs pending"), "{err}");
    for far in [vec!["--in", "8785h"], vec!["--at", "2017-05-20T10:05:01Z"]] {
        let mut argv = vec!["cj", "-n", "ns"];
        argv.extend(far);
        let (result, _) = run_trigger(
            &argv,
            vec![Expect::get(&format!("{CRONJOBS}/cj")).ok(json_of(&cronjob("0 * * * *")))],
        )
        .await;
        let err = result.expect_err("too far");
        assert_eq!(err.exit_code(), 2, "{err}");
        assert!(err.to_string().contains("more than a year ahead"), "{err}");
    }
}

#[test]
fn trigger_refuses_a_bad_time_or_duration_as_a_usage_error() {
    for argv in [
        vec!["kubectl-kronjob", "cj", "--at", "tomorrow"],
        vec!["kubectl-kronjob", "cj", "--in", "2 days"],
        vec!["kubectl-kronjob", "cj", "--in", "-5m"],
        vec![
            "kubectl-kronjob",
            "cj",
            "--at",
            "2016-05-19T11:00:00Z",
            "--in",
            "1h",
        ],
        vec!["kubectl-kronjob", "cj", "--cancel", "--in", "1h"],
    ] {
        let err = Cli::<trigger::TriggerArgs>::try_parse_from(&argv).expect_err("refused");
        assert_eq!(err.exit_code(), 2, "{argv:?}");
    }
}

#[tokio::test]
async fn trigger_cancel_removes_a_pending_run() {
    let job = kronjob::workload::manual_name("cj", t("2016-05-19T11:00:00Z"));
    let (result, out) = run_trigger(
        &["cj", "-n", "ns", "--cancel", "--at", "2016-05-19T11:00:00Z"],
        vec![
            Expect::get(&format!("{CRONJOBS}/cj"))
                .ok(pending("2016-05-19T11:00:00Z,2016-05-19T12:00:00Z")),
            asked(json!("2016-05-19T12:00:00Z")),
            Expect::get(&format!("{JOBS}/{job}")).fails(StatusCode::NOT_FOUND, "NotFound"),
        ],
    )
    .await;
    result.expect("cancelled");
    assert_eq!(
        out,
        format!(
            "cronjob.batch.kronjob.dev/cj: the run at 2016-05-19T11:00:00Z is cancelled (job.batch/{job} is not created)\n"
        )
    );
    // Without --at: every pending run; the annotation goes.
    let (result, out) = run_trigger(
        &["cj", "-n", "ns", "--cancel"],
        vec![
            Expect::get(&format!("{CRONJOBS}/cj")).ok(pending("2016-05-19T11:00:00Z")),
            asked(Value::Null),
            Expect::get(&format!("{JOBS}/{job}")).fails(StatusCode::NOT_FOUND, "NotFound"),
        ],
    )
    .await;
    result.expect("cancelled");
    assert!(out.contains("is cancelled"), "{out}");
}

#[tokio::test]
async fn trigger_cancel_of_a_run_that_ran_or_was_never_asked_fails() {
    let job = kronjob::workload::manual_name("cj", t("2016-05-19T10:00:00Z"));
    let (result, out) = run_trigger(
        &["cj", "-n", "ns", "--cancel", "--at", "2016-05-19T10:00:00Z"],
        vec![
            Expect::get(&format!("{CRONJOBS}/cj")).ok(json_of(&cronjob("0 * * * *"))),
            Expect::get(&format!("{JOBS}/{job}"))
                .ok(json_of(&support::fixtures::job(&job).manual())),
        ],
    )
    .await;
    let err = result.expect_err("ran");
    assert_eq!(err.exit_code(), 1);
    assert_eq!(
        err.to_string(),
        format!("the run at 2016-05-19T10:00:00Z already ran: job.batch/{job}")
    );
    assert!(out.is_empty());
    let (result, _) = run_trigger(
        &["cj", "-n", "ns", "--cancel"],
        vec![Expect::get(&format!("{CRONJOBS}/cj")).ok(json_of(&cronjob("0 * * * *")))],
    )
    .await;
    let err = result.expect_err("nothing pending");
    assert_eq!(
        err.to_string(),
        "no run of cronjob.batch.kronjob.dev/cj is pending"
    );
}
