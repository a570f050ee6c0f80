//! `kubectl kronjob migrate` against the scripted API: the exact requests, in order, of a dry
//! run, a migration, a migration that fails in the middle and the run that finishes it, `--all`
//! with one CronJob refused, and `--revert`.

#[path = "support/mod.rs"]
mod support;

use clap::Parser;
use http::StatusCode;
use kronjob::cli::CliError;
use kronjob::cli::migrate::{MigrateArgs, run};
use serde_json::{Value, json};
use support::api_script::{Expect, mock_user_client};

const ORIGINALS: &str = "/apis/batch/v1/namespaces/ns/cronjobs";
const ORIGINAL: &str = "/apis/batch/v1/namespaces/ns/cronjobs/cj";
const MIGRATED_ALL: &str = "/apis/batch.kronjob.dev/v1/namespaces/ns/cronjobs";
const MIGRATED: &str = "/apis/batch.kronjob.dev/v1/namespaces/ns/cronjobs/cj";

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    args: MigrateArgs,
}

fn args(argv: &[&str]) -> MigrateArgs {
    let mut full = vec!["migrate"];
    full.extend_from_slice(argv);
    Cli::try_parse_from(full).expect("arguments").args
}

/// What a run printed and returned.
struct Ran {
    result: Result<(), CliError>,
    out: String,
    err: String,
}

async fn migrate(argv: &[&str], script: Vec<Expect>) -> Ran {
    let (client, server) = mock_user_client();
    let server = server.run(script);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let result = run(client, &args(argv), &mut out, &mut err).await;
    server
        .await
        .expect("the API saw exactly the requests expected");
    Ran {
        result,
        out: String::from_utf8(out).expect("utf-8"),
        err: String::from_utf8(err).expect("utf-8"),
    }
}

/// The batch/v1 CronJob `ns/NAME` as the API server returns it.
fn original(name: &str, suspend: bool, last_schedule: &str) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {
            "name": name, "namespace": "ns", "uid": format!("{name}-orig-uid"),
            "resourceVersion": "5", "labels": {"team": "a"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}
        },
        "spec": {
            "schedule": "0 * * * *", "suspend": suspend, "concurrencyPolicy": "Allow",
            "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
            "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "busybox"}],
                "restartPolicy": "OnFailure"
            }}}}
        },
        "status": {
            "lastScheduleTime": last_schedule,
            "lastSuccessfulTime": "2016-05-19T09:00:12Z"
        }
    })
}

/// The kronjob CronJob a migration of `original("cj", ..)` created, in `state`.
fn migrated(state: &str, suspend: bool, last_schedule: &str) -> Value {
    json!({
        "apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
        "metadata": {
            "name": "cj", "namespace": "ns", "uid": "cj-uid", "resourceVersion": "8",
            "labels": {"team": "a"},
            "annotations": {
                "batch.kronjob.dev/migrated-from": "batch/v1",
                "batch.kronjob.dev/migrated-from-uid": "cj-orig-uid",
                "batch.kronjob.dev/original-suspend": "false",
                "batch.kronjob.dev/migration": state
            }
        },
        "spec": {
            "schedule": "0 * * * *", "suspend": suspend, "concurrencyPolicy": "Allow",
            "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
            "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "busybox"}],
                "restartPolicy": "OnFailure"
            }}}}
        },
        "status": {
            "lastScheduleTime": last_schedule,
            "lastSuccessfulTime": "2016-05-19T09:00:12Z"
        }
    })
}

/// `PATCH path` answered with `base` with the request (a merge patch) applied.
fn patch(path: &str, base: Value) -> Expect {
    Expect::patch(path).answer(move |body| {
        let mut doc = base.clone();
        json_patch::merge(&mut doc, body);
        (StatusCode::OK, doc)
    })
}

fn not_found(path: &str) -> Expect {
    Expect::get(path).fails(StatusCode::NOT_FOUND, "NotFound")
}

fn list(kind: &str, items: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "9"}, "items": items})
}

const DRY_RUN_PLAN: &str = "\
cronjob.batch/cj -n ns: migrate
  create cronjob.batch.kronjob.dev/cj, suspended, with the spec, labels and annotations of cronjob.batch/cj
  annotation kubectl.kubernetes.io/last-applied-configuration is not copied
  copy status.lastScheduleTime 2016-05-19T09:00:00Z and status.lastSuccessfulTime 2016-05-19T09:00:12Z to cronjob.batch.kronjob.dev/cj
  suspend cronjob.batch/cj
  read cronjob.batch/cj again and copy a later status to cronjob.batch.kronjob.dev/cj (a run that started before the suspension)
  resume cronjob.batch.kronjob.dev/cj, and mark the migration complete
";

#[tokio::test]
async fn a_dry_run_reads_both_and_changes_nothing() {
    let ran = migrate(
        &["cj", "-n", "ns"],
        vec![
            Expect::get(ORIGINAL).ok(original("cj", false, "2016-05-19T09:00:00Z")),
            not_found(MIGRATED),
        ],
    )
    .await;
    ran.result.expect("a dry run succeeds");
    assert_eq!(ran.out, DRY_RUN_PLAN);
    assert_eq!(
        ran.err,
        "Dry run: nothing was changed; run again with --apply to do it.\n"
    );
    let readme = include_str!("../README.md");
    let shown = format!("{}{}", ran.out, ran.err);
    assert!(readme.contains(&shown), "README.md shows:\n{shown}");
}

/// The requests of steps 1 to 5 for `original("cj", false, ..)`, the original having run the
/// 10:00 slot between the first read and its suspension.
fn full_migration(delete: bool) -> Vec<Expect> {
    let created = migrated("in-progress", true, "2016-05-19T09:00:00Z");
    let mut script = vec![
        Expect::get(ORIGINAL).ok(original("cj", false, "2016-05-19T09:00:00Z")),
        not_found(MIGRATED),
        // 1. created suspended, annotated, without kubectl's last-applied annotation.
        Expect::post(MIGRATED_ALL).check(|body| {
            assert_eq!(body["spec"]["suspend"], true);
            assert_eq!(body["spec"]["schedule"], "0 * * * *");
            assert_eq!(body["metadata"]["labels"], json!({"team": "a"}));
            assert_eq!(
                body["metadata"]["annotations"],
                json!({
                    "batch.kronjob.dev/migrated-from": "batch/v1",
                    "batch.kronjob.dev/migrated-from-uid": "cj-orig-uid",
                    "batch.kronjob.dev/original-suspend": "false",
                    "batch.kronjob.dev/migration": "in-progress"
                })
            );
            assert!(body.get("status").is_none_or(Value::is_null));
        }),
        // 2. the status of the original.
        patch(&format!("{MIGRATED}/status"), created.clone()).body(json!({"status": {
            "lastScheduleTime": "2016-05-19T09:00:00Z",
            "lastSuccessfulTime": "2016-05-19T09:00:12Z"
        }})),
        // 3. the original suspended; it ran 10:00 meanwhile.
        patch(ORIGINAL, original("cj", false, "2016-05-19T10:00:00Z"))
            .body(json!({"metadata": {"resourceVersion": "5"}, "spec": {"suspend": true}})),
        // 4. read again (a run in flight may have finished recording): 10:00 carried.
        Expect::get(ORIGINAL).ok(original("cj", true, "2016-05-19T10:00:00Z")),
        patch(&format!("{MIGRATED}/status"), created.clone())
            .body(json!({"status": {"lastScheduleTime": "2016-05-19T10:00:00Z"}})),
    ];
    if delete {
        script.push(Expect::delete(ORIGINAL).body(json!({
            "propagationPolicy": "Orphan",
            "preconditions": {"uid": "cj-orig-uid", "resourceVersion": "5"}
        })));
    }
    // 5. resumed with the original's suspend, and marked complete, in one patch.
    script.push(patch(MIGRATED, created).body(json!({
        "metadata": {"annotations": {"batch.kronjob.dev/migration": "complete"}},
        "spec": {"suspend": false}
    })));
    script
}

#[tokio::test]
async fn apply_creates_suspended_carries_status_suspends_rereads_and_resumes() {
    let ran = migrate(&["cj", "-n", "ns", "--apply"], full_migration(false)).await;
    ran.result.expect("migrated");
    assert_eq!(
        ran.out,
        DRY_RUN_PLAN.replace(
            "cronjob.batch/cj -n ns: migrate\n",
            "cronjob.batch/cj -n ns: migrated\n"
        )
    );
    assert_eq!(ran.err, "");
}

#[tokio::test]
async fn delete_original_orphans_its_jobs_after_the_reread() {
    let ran = migrate(
        &["cj", "-n", "ns", "--apply", "--delete-original"],
        full_migration(true),
    )
    .await;
    ran.result.expect("migrated");
    assert!(
        ran.out.contains("  delete cronjob.batch/cj with propagationPolicy Orphan: its Jobs keep running and are left in place\n"),
        "{}",
        ran.out
    );
}

#[tokio::test]
async fn a_failed_suspend_leaves_the_copy_suspended_and_the_next_run_finishes() {
    let created = migrated("in-progress", true, "2016-05-19T09:00:00Z");
    let ran = migrate(
        &["cj", "-n", "ns", "--apply"],
        vec![
            Expect::get(ORIGINAL).ok(original("cj", false, "2016-05-19T09:00:00Z")),
            not_found(MIGRATED),
            Expect::post(MIGRATED_ALL),
            patch(&format!("{MIGRATED}/status"), created.clone()),
            Expect::patch(ORIGINAL).fails(StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
        ],
    )
    .await;
    let err = ran.result.expect_err("one CronJob failed");
    assert_eq!(err.exit_code(), 1);
    assert!(
        ran.out.starts_with("cronjob.batch/cj -n ns: failed\n"),
        "{}",
        ran.out
    );
    assert_eq!(
        ran.err,
        "error: cronjob.batch/cj -n ns: suspend cronjob.batch/cj failed: mock InternalError; cronjob.batch.kronjob.dev/cj stays suspended; run the migration again to finish it\n"
    );

    // The next run finds the copy in progress (suspended, status written) and finishes: no
    // second create, no status write (it is there), suspend, read again, resume.
    let ran = migrate(
        &["cj", "-n", "ns", "--apply"],
        vec![
            Expect::get(ORIGINAL).ok(original("cj", false, "2016-05-19T09:00:00Z")),
            Expect::get(MIGRATED).ok(created.clone()),
            patch(ORIGINAL, original("cj", false, "2016-05-19T09:00:00Z"))
                .body(json!({"metadata": {"resourceVersion": "5"}, "spec": {"suspend": true}})),
            Expect::get(ORIGINAL).ok(original("cj", true, "2016-05-19T09:00:00Z")),
            patch(MIGRATED, created).body(json!({
                "metadata": {"annotations": {"batch.kronjob.dev/migration": "complete"}},
                "spec": {"suspend": false}
            })),
        ],
    )
    .await;
    ran.result.expect("finished");
    assert_eq!(
        ran.out,
        "\
cronjob.batch/cj -n ns: migration finished
  finish the migration to cronjob.batch.kronjob.dev/cj, started earlier
  suspend cronjob.batch/cj
  read cronjob.batch/cj again and copy a later status to cronjob.batch.kronjob.dev/cj (a run that started before the suspension)
  resume cronjob.batch.kronjob.dev/cj, and mark the migration complete
"
    );
}

/// An edit to the batch/v1 CronJob made after the command read it and before it suspends it:
/// the suspend carries the resourceVersion that was read, so the API server refuses it (409,
/// as it answers a stale resourceVersion). The original is left as edited, the copy this run
/// created from the earlier spec (suspended: it never ran) is removed, the command says so and
/// exits 1; the next run plans from the edited spec and carries it.
#[tokio::test]
async fn an_edit_between_the_read_and_the_suspend_is_never_lost() {
    let created = migrated("in-progress", true, "2016-05-19T09:00:00Z");
    let ran = migrate(
        &["cj", "-n", "ns", "--apply"],
        vec![
            Expect::get(ORIGINAL).ok(original("cj", false, "2016-05-19T09:00:00Z")),
            not_found(MIGRATED),
            Expect::post(MIGRATED_ALL),
            patch(&format!("{MIGRATED}/status"), created.clone()),
            Expect::patch(ORIGINAL)
                .body(json!({"metadata": {"resourceVersion": "5"}, "spec": {"suspend": true}}))
                .fails(StatusCode::CONFLICT, "Conflict"),
            Expect::delete(MIGRATED).body(json!({
                "propagationPolicy": "Orphan", "preconditions": {"uid": "cj-uid"}
            })),
        ],
    )
    .await;
    let err = ran.result.expect_err("the CronJob's migration stopped");
    assert_eq!(err.exit_code(), 1);
    assert!(
        ran.out.starts_with("cronjob.batch/cj -n ns: failed\n"),
        "{}",
        ran.out
    );
    assert_eq!(
        ran.err,
        "error: cronjob.batch/cj -n ns: cronjob.batch/cj was changed after it was read: it was left as it is and cronjob.batch.kronjob.dev/cj, created from the earlier spec, was removed (it never ran); run the migration again to carry the change\n"
    );

    // The next run reads the edit (a new schedule, resourceVersion 6) and carries it.
    let mut edited = original("cj", false, "2016-05-19T09:00:00Z");
    edited["metadata"]["resourceVersion"] = json!("6");
    edited["spec"]["schedule"] = json!("30 * * * *");
    let mut created = created;
    created["spec"]["schedule"] = json!("30 * * * *");
    let ran = migrate(
        &["cj", "-n", "ns", "--apply"],
        vec![
            Expect::get(ORIGINAL).ok(edited.clone()),
            not_found(MIGRATED),
            Expect::post(MIGRATED_ALL)
                .check(|body| assert_eq!(body["spec"]["schedule"], "30 * * * *")),
            patch(&format!("{MIGRATED}/status"), created.clone()),
            patch(ORIGINAL, edited.clone())
                .body(json!({"metadata": {"resourceVersion": "6"}, "spec": {"suspend": true}})),
            Expect::get(ORIGINAL).ok(with_suspend(edited, true)),
            patch(MIGRATED, created).body(json!({
                "metadata": {"annotations": {"batch.kronjob.dev/migration": "complete"}},
                "spec": {"suspend": false}
            })),
        ],
    )
    .await;
    ran.result.expect("migrated with the edit");
}

/// The same race on `--delete-original`: the delete carries the resourceVersion last seen, an
/// edit made since refuses it, and the original stays (suspended, with the edit).
#[tokio::test]
async fn an_edit_before_the_delete_of_the_original_keeps_it() {
    let ran = migrate(
        &["cj", "-n", "ns", "--apply", "--delete-original"],
        vec![
            Expect::get(ORIGINAL).ok(original("cj", true, "2016-05-19T10:00:00Z")),
            Expect::get(MIGRATED).ok(migrated("complete", false, "2016-05-19T10:00:00Z")),
            Expect::delete(ORIGINAL)
                .body(json!({
                    "propagationPolicy": "Orphan",
                    "preconditions": {"uid": "cj-orig-uid", "resourceVersion": "5"}
                }))
                .fails(StatusCode::CONFLICT, "Conflict"),
        ],
    )
    .await;
    let err = ran.result.expect_err("the delete stopped");
    assert_eq!(err.exit_code(), 1);
    assert_eq!(
        ran.err,
        "error: cronjob.batch/cj -n ns: cronjob.batch/cj was changed after it was read and was left as it is; run the command again to plan with the change\n"
    );
}

fn with_suspend(mut object: Value, suspend: bool) -> Value {
    object["spec"]["suspend"] = json!(suspend);
    object
}

#[tokio::test]
async fn a_completed_migration_run_again_changes_nothing() {
    let ran = migrate(
        &["cj", "-n", "ns", "--apply"],
        vec![
            Expect::get(ORIGINAL).ok(original("cj", true, "2016-05-19T10:00:00Z")),
            Expect::get(MIGRATED).ok(migrated("complete", false, "2016-05-19T11:00:00Z")),
        ],
    )
    .await;
    ran.result.expect("nothing to do");
    assert_eq!(
        ran.out,
        "\
cronjob.batch/cj -n ns: unchanged
  already migrated to cronjob.batch.kronjob.dev/cj; cronjob.batch/cj stays suspended
"
    );
    assert_eq!(ran.err, "");
}

#[tokio::test]
async fn all_goes_on_past_a_taken_name_and_exits_1() {
    let native = {
        let mut cj = migrated("complete", false, "2016-05-19T11:00:00Z");
        cj["metadata"]["name"] = json!("b");
        cj["metadata"]["annotations"] = json!({});
        cj
    };
    let created = {
        let mut cj = migrated("in-progress", true, "2016-05-19T09:00:00Z");
        cj["metadata"]["name"] = json!("a");
        cj
    };
    let a = "/apis/batch.kronjob.dev/v1/namespaces/ns/cronjobs/a";
    let ran = migrate(
        &["--all", "-n", "ns", "--apply"],
        vec![
            Expect::get(ORIGINALS).ok(list(
                "CronJobList",
                vec![
                    original("b", false, "2016-05-19T09:00:00Z"),
                    original("a", true, "2016-05-19T09:00:00Z"),
                ],
            )),
            Expect::get(MIGRATED_ALL).ok(list("CronJobList", vec![native])),
            // a: already suspended, so neither suspended nor read again.
            Expect::post(MIGRATED_ALL).check(|b| {
                assert_eq!(
                    b["metadata"]["annotations"]["batch.kronjob.dev/original-suspend"],
                    "true"
                )
            }),
            patch(&format!("{a}/status"), created.clone()),
            patch(a, created).body(json!({
                "metadata": {"annotations": {"batch.kronjob.dev/migration": "complete"}},
                "spec": {"suspend": true}
            })),
            // b: refused, nothing sent.
        ],
    )
    .await;
    let err = ran.result.expect_err("b failed");
    assert_eq!(err.to_string(), "1 of 2 failed");
    assert!(
        ran.out.starts_with("cronjob.batch/a -n ns: migrated\n"),
        "{}",
        ran.out
    );
    assert!(
        ran.out.ends_with("cronjob.batch/b -n ns: skipped\n"),
        "{}",
        ran.out
    );
    assert_eq!(
        ran.err,
        "error: cronjob.batch/b -n ns: cronjob.batch.kronjob.dev/b already exists and was not migrated from cronjob.batch/b: rename or delete one of them\n"
    );
}

#[tokio::test]
async fn all_namespaces_reads_cluster_wide_and_prints_json() {
    let ran = migrate(
        &["-A", "-o", "json"],
        vec![
            Expect::get("/apis/batch/v1/cronjobs").ok(list(
                "CronJobList",
                vec![original("cj", false, "2016-05-19T09:00:00Z")],
            )),
            Expect::get("/apis/batch.kronjob.dev/v1/cronjobs").ok(list("CronJobList", vec![])),
        ],
    )
    .await;
    ran.result.expect("dry run");
    let report: Value = serde_json::from_str(&ran.out).expect("JSON");
    assert_eq!(report["dryRun"], true);
    let item = &report["items"][0];
    assert_eq!(item["namespace"], "ns");
    assert_eq!(item["name"], "cj");
    assert_eq!(item["action"], "migrate");
    assert_eq!(item["error"], Value::Null);
    assert_eq!(item["warnings"], json!([]));
    assert_eq!(item["changes"].as_array().map(Vec::len), Some(6));
    assert_eq!(item["cronjob"]["apiVersion"], "batch.kronjob.dev/v1");
    assert_eq!(item["cronjob"]["spec"]["suspend"], true);
    assert_eq!(ran.err, "", "no dry-run note in structured output");
}

#[tokio::test]
async fn nothing_to_migrate_says_so() {
    let ran = migrate(
        &["--all", "-n", "ns"],
        vec![
            Expect::get(ORIGINALS).ok(list("CronJobList", vec![])),
            Expect::get(MIGRATED_ALL).ok(list("CronJobList", vec![])),
        ],
    )
    .await;
    ran.result.expect("nothing");
    assert_eq!(ran.out, "");
    assert_eq!(ran.err, "No batch/v1 CronJobs found in ns namespace.\n");
}

#[tokio::test]
async fn revert_suspends_carries_back_resumes_the_original_and_deletes() {
    let kronjob = migrated("complete", false, "2016-05-19T11:00:00Z");
    let ran = migrate(
        &["cj", "-n", "ns", "--revert", "--apply"],
        vec![
            Expect::get(ORIGINAL).ok(original("cj", true, "2016-05-19T09:00:00Z")),
            Expect::get(MIGRATED).ok(kronjob.clone()),
            patch(MIGRATED, kronjob).body(json!({
                "metadata": {"annotations": {
                    "batch.kronjob.dev/migration": "reverting",
                    "batch.kronjob.dev/original-suspend": "false"
                }},
                "spec": {"suspend": true}
            })),
            patch(
                &format!("{ORIGINAL}/status"),
                original("cj", true, "2016-05-19T11:00:00Z"),
            )
            .body(json!({"status": {"lastScheduleTime": "2016-05-19T11:00:00Z"}})),
            patch(ORIGINAL, original("cj", false, "2016-05-19T11:00:00Z"))
                .body(json!({"spec": {"suspend": false}})),
            Expect::delete(MIGRATED).body(json!({
                "propagationPolicy": "Orphan",
                "preconditions": {"uid": "cj-uid"}
            })),
        ],
    )
    .await;
    ran.result.expect("reverted");
    assert_eq!(
        ran.out,
        "\
cronjob.batch/cj -n ns: reverted
  suspend cronjob.batch.kronjob.dev/cj
  copy status.lastScheduleTime 2016-05-19T11:00:00Z to cronjob.batch/cj
  resume cronjob.batch/cj
  delete cronjob.batch.kronjob.dev/cj with propagationPolicy Orphan: its Jobs keep running and are left in place
"
    );
}

#[tokio::test]
async fn revert_recreates_a_deleted_original_suspended_first() {
    let kronjob = migrated("complete", false, "2016-05-19T11:00:00Z");
    let ran = migrate(
        &["cj", "-n", "ns", "--revert", "--apply"],
        vec![
            not_found(ORIGINAL),
            Expect::get(MIGRATED).ok(kronjob.clone()),
            patch(MIGRATED, kronjob),
            Expect::post(ORIGINALS).check(|b| {
                assert_eq!(b["apiVersion"], "batch/v1");
                assert_eq!(b["spec"]["suspend"], true);
                assert_eq!(
                    b["metadata"],
                    json!({"name": "cj", "namespace": "ns", "labels": {"team": "a"}})
                );
            }),
            patch(
                &format!("{ORIGINAL}/status"),
                original("cj", true, "2016-05-19T11:00:00Z"),
            )
            .body(json!({"status": {
                "lastScheduleTime": "2016-05-19T11:00:00Z",
                "lastSuccessfulTime": "2016-05-19T09:00:12Z"
            }})),
            patch(ORIGINAL, original("cj", false, "2016-05-19T11:00:00Z"))
                .body(json!({"spec": {"suspend": false}})),
            Expect::delete(MIGRATED),
        ],
    )
    .await;
    ran.result.expect("reverted");
}

#[tokio::test]
async fn a_failed_revert_says_how_to_go_on() {
    let kronjob = migrated("complete", false, "2016-05-19T11:00:00Z");
    let ran = migrate(
        &["cj", "-n", "ns", "--revert", "--apply"],
        vec![
            Expect::get(ORIGINAL).ok(original("cj", true, "2016-05-19T09:00:00Z")),
            Expect::get(MIGRATED).ok(kronjob.clone()),
            patch(MIGRATED, kronjob),
            Expect::patch(&format!("{ORIGINAL}/status")).fails(StatusCode::FORBIDDEN, "Forbidden"),
        ],
    )
    .await;
    assert!(ran.result.is_err());
    assert_eq!(
        ran.err,
        "error: cronjob.batch/cj -n ns: write the status of cronjob.batch/cj failed: mock Forbidden; cronjob.batch.kronjob.dev/cj stays suspended; run the revert again to finish it\n"
    );
}

#[test]
fn usage_errors_exit_2() {
    for argv in [
        &["migrate"][..],
        &["migrate", "cj", "--all"][..],
        &["migrate", "--all", "-A"][..],
        &["migrate", "cj", "--revert", "--delete-original"][..],
        &["migrate", "cj", "-o", "table"][..],
    ] {
        let err = Cli::try_parse_from(argv).expect_err("usage error");
        assert_eq!(err.exit_code(), 2, "{argv:?}");
    }
}
