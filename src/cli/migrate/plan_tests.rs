//! The migration plan from JSON inputs, table-driven.

use serde_json::{Value, json};

use super::*;

const NS: &str = "ns";
const NAME: &str = "cj";

/// A batch/v1 CronJob as the API server returns it (kubectl-applied, with the nulls and empty
/// objects older clients leave in templates).
fn original() -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {
            "name": NAME, "namespace": NS, "uid": "orig-uid", "resourceVersion": "9",
            "creationTimestamp": "2016-05-01T00:00:00Z",
            "labels": {"team": "a"},
            "annotations": {"note": "kept", LAST_APPLIED: "{\"spec\":{}}"}
        },
        "spec": {
            "schedule": "0 * * * *",
            "concurrencyPolicy": "Forbid",
            "suspend": false,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": {
                "metadata": {"creationTimestamp": null},
                "spec": {"template": {
                    "metadata": {"creationTimestamp": null},
                    "spec": {
                        "containers": [{"name": "c", "image": "busybox", "resources": {}}],
                        "restartPolicy": "OnFailure"
                    }
                }}
            }
        },
        "status": {
            "lastScheduleTime": "2016-05-19T09:00:00Z",
            "lastSuccessfulTime": "2016-05-19T09:00:12Z"
        }
    })
}

fn with(mut value: Value, pointer: &str, set: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
    let parent = value.pointer_mut(parent).expect("parent exists");
    parent[key] = set;
    value
}

use crate::testing::fixtures::t;

fn migrate(original: &Value, migrated: Option<&CronJob>, delete_original: bool) -> Plan {
    let found = Found {
        original: Some(original),
        migrated,
    };
    plan_migration(NS, NAME, found, Options { delete_original })
}

/// The kronjob CronJob a fresh migration creates, as the API server would return it later:
/// with a UID, in `state`, with `spec.suspend` as given.
fn migrated(state: State, suspend: bool) -> CronJob {
    let mut cj = migrate(&original(), None, false).target.expect("a target");
    cj.metadata.uid = Some("new-uid".into());
    cj.spec.suspend = Some(suspend);
    cj.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(ANNOTATION_MIGRATION.into(), state.as_str().into());
    cj
}

#[test]
fn a_fresh_migration_creates_suspended_carries_status_suspends_rereads_and_resumes() {
    let plan = migrate(&original(), None, false);
    assert_eq!(plan.action, Action::Migrate);
    assert_eq!(plan.error, None);
    assert_eq!(
        plan.steps,
        vec![
            Step::Create,
            Step::WriteMigratedStatus,
            Step::SuspendOriginal,
            Step::Recheck,
            Step::Complete { suspend: false },
        ]
    );
    assert_eq!(
        plan.changes,
        vec![
            "create cronjob.batch.kronjob.dev/cj, suspended, with the spec, labels and annotations of cronjob.batch/cj",
            "annotation kubectl.kubernetes.io/last-applied-configuration is not copied",
            "copy status.lastScheduleTime 2016-05-19T09:00:00Z and status.lastSuccessfulTime 2016-05-19T09:00:12Z to cronjob.batch.kronjob.dev/cj",
            "suspend cronjob.batch/cj",
            "read cronjob.batch/cj again and copy a later status to cronjob.batch.kronjob.dev/cj (a run that started before the suspension)",
            "resume cronjob.batch.kronjob.dev/cj, and mark the migration complete",
        ]
    );
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
    assert_eq!(
        plan.original_times,
        Times {
            last_schedule: Some(t("2016-05-19T09:00:00Z")),
            last_successful: Some(t("2016-05-19T09:00:12Z")),
        }
    );
    assert_eq!(plan.original_uid.as_deref(), Some("orig-uid"));
}

#[test]
fn the_target_has_the_spec_labels_and_annotations_and_records_the_migration() {
    let target = migrate(&original(), None, false).target.expect("target");
    let got = serde_json::to_value(&target).expect("JSON");
    assert_eq!(
        got,
        json!({
            "apiVersion": "batch.kronjob.dev/v1",
            "kind": "CronJob",
            "metadata": {
                "name": "cj", "namespace": "ns",
                "labels": {"team": "a"},
                "annotations": {
                    "note": "kept",
                    "batch.kronjob.dev/migrated-from": "batch/v1",
                    "batch.kronjob.dev/migrated-from-uid": "orig-uid",
                    "batch.kronjob.dev/original-suspend": "false",
                    "batch.kronjob.dev/migration": "in-progress"
                }
            },
            "spec": {
                "schedule": "0 * * * *",
                "concurrencyPolicy": "Forbid",
                "suspend": true,
                "successfulJobsHistoryLimit": 3,
                "failedJobsHistoryLimit": 1,
                "jobTemplate": {
                    "metadata": {},
                    "spec": {"template": {
                        "metadata": {},
                        "spec": {
                            "containers": [{"name": "c", "image": "busybox", "resources": {}}],
                            "restartPolicy": "OnFailure"
                        }
                    }}
                }
            }
        })
    );
}

/// One variation of the batch/v1 CronJob and what its plan must say.
struct Case {
    name: &'static str,
    original: Value,
    delete_original: bool,
    steps: Option<Vec<Step>>,
    change: Option<&'static str>,
    warning: Option<&'static str>,
    error: Option<&'static str>,
}

fn case(name: &'static str, original: Value) -> Case {
    Case {
        name,
        original,
        delete_original: false,
        steps: None,
        change: None,
        warning: None,
        error: None,
    }
}

#[test]
fn fresh_migrations_table() {
    let long = "a".repeat(53);
    let cases = vec![
        Case {
            steps: Some(vec![
                Step::Create,
                Step::WriteMigratedStatus,
                Step::Complete { suspend: true },
            ]),
            change: Some(
                "leave cronjob.batch.kronjob.dev/cj suspended, as the original was, and mark the migration complete",
            ),
            ..case(
                "a suspended original stays suspended, no suspend or re-read",
                with(original(), "/spec/suspend", json!(true)),
            )
        },
        Case {
            delete_original: true,
            steps: Some(vec![
                Step::Create,
                Step::WriteMigratedStatus,
                Step::SuspendOriginal,
                Step::Recheck,
                Step::DeleteOriginal,
                Step::Complete { suspend: false },
            ]),
            change: Some(
                "delete cronjob.batch/cj with propagationPolicy Orphan: its Jobs keep running and are left in place",
            ),
            ..case(
                "--delete-original suspends, re-reads, then deletes",
                original(),
            )
        },
        Case {
            change: Some(
                "spec.schedule \"CRON_TZ=Europe/Berlin 30 2 * * *\" becomes \"30 2 * * *\" with spec.timeZone \"Europe/Berlin\" (kronjob refuses TZ= prefixes)",
            ),
            ..case(
                "a CRON_TZ prefix becomes timeZone",
                with(
                    original(),
                    "/spec/schedule",
                    json!("CRON_TZ=Europe/Berlin 30 2 * * *"),
                ),
            )
        },
        Case {
            error: Some(
                "spec.schedule \"TZ=UTC 0 * * * *\" carries a time zone prefix and spec.timeZone is \"Europe/Paris\" too: remove one of them first",
            ),
            ..case(
                "a TZ prefix and a timeZone",
                with(
                    with(original(), "/spec/schedule", json!("TZ=UTC 0 * * * *")),
                    "/spec/timeZone",
                    json!("Europe/Paris"),
                ),
            )
        },
        Case {
            error: Some(
                "cannot migrate: CronJob.batch.kronjob.dev \"cj\" is invalid: spec.timeZone: Invalid value: \"Mars/Base\": unknown time zone Mars/Base",
            ),
            ..case(
                "a prefix naming an unknown zone",
                with(
                    original(),
                    "/spec/schedule",
                    json!("TZ=Mars/Base 0 * * * *"),
                ),
            )
        },
        Case {
            error: Some(
                "cannot migrate: CronJob.batch.kronjob.dev \"cj\" is invalid: spec.schedule: Invalid value: \"0 * * * * *\": expected exactly 5 fields, found 6: [0 * * * * *]",
            ),
            ..case(
                "a schedule kronjob refuses",
                with(original(), "/spec/schedule", json!("0 * * * * *")),
            )
        },
        Case {
            warning: Some(
                "spec.jobTemplate.spec.template.spec.containers[0].futureField is not a field of Kubernetes 1.33's types: it is dropped",
            ),
            ..case(
                "an unknown template field is reported",
                with(
                    original(),
                    "/spec/jobTemplate/spec/template/spec/containers/0/futureField",
                    json!({"on": true}),
                ),
            )
        },
        Case {
            warning: Some(
                "cronjob.batch/cj has 1 running Job(s) and concurrencyPolicy Forbid: cronjob.batch.kronjob.dev/cj does not see them, so its next run neither waits for nor replaces them",
            ),
            ..case(
                "running Jobs and Forbid",
                with(
                    original(),
                    "/status/active",
                    json!([{"kind": "Job", "name": "cj-1"}]),
                ),
            )
        },
        Case {
            warning: Some(
                "cronjob.batch/cj is owned by Application reports: its owner may undo the suspension or recreate it",
            ),
            ..case(
                "an owner",
                with(
                    original(),
                    "/metadata/ownerReferences",
                    json!([{"kind": "Application", "name": "reports", "apiVersion": "x/v1", "uid": "u"}]),
                ),
            )
        },
        Case {
            error: Some(
                "spec of cronjob.batch/cj does not read as a CronJob spec: invalid type: integer `5`, expected a string",
            ),
            ..case(
                "a schedule that is not a string",
                with(
                    original(),
                    "/spec",
                    json!({"schedule": 5, "jobTemplate": {}}),
                ),
            )
        },
    ];
    for c in cases {
        let plan = migrate(&c.original, None, c.delete_original);
        assert_eq!(plan.error.as_deref(), c.error, "{}", c.name);
        if c.error.is_some() {
            assert_eq!(plan.action, Action::Skip, "{}", c.name);
            assert!(plan.steps.is_empty(), "{}", c.name);
            continue;
        }
        assert_eq!(plan.action, Action::Migrate, "{}", c.name);
        if let Some(steps) = c.steps {
            assert_eq!(plan.steps, steps, "{}", c.name);
        }
        if let Some(change) = c.change {
            assert!(
                plan.changes.iter().any(|l| l == change),
                "{}: {:#?}",
                c.name,
                plan.changes
            );
        }
        match c.warning {
            Some(warning) => assert_eq!(plan.warnings, vec![warning], "{}", c.name),
            None => assert!(plan.warnings.is_empty(), "{}: {:?}", c.name, plan.warnings),
        }
    }
    let named = with(original(), "/metadata/name", json!(long));
    let plan = plan_migration(
        NS,
        &long,
        Found {
            original: Some(&named),
            migrated: None,
        },
        Options::default(),
    );
    let error = plan.error.expect("too long");
    assert!(
        error.ends_with("metadata.name: Invalid value: \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": must be no more than 52 characters"),
        "{error}"
    );
}

#[test]
fn the_zone_prefix_moves_only_when_alone() {
    let mut zoned = with(
        original(),
        "/spec/schedule",
        json!("TZ=Asia/Tokyo 0 9 * * 1-5"),
    );
    zoned = with(zoned, "/spec/concurrencyPolicy", json!("Allow"));
    let target = migrate(&zoned, None, false).target.expect("target");
    assert_eq!(target.spec.schedule.as_deref(), Some("0 9 * * 1-5"));
    assert_eq!(target.spec.time_zone.as_deref(), Some("Asia/Tokyo"));
}

/// One state of both CronJobs and the plan of `migrate` for it; what it leaves out is absent:
/// no `--delete-original`, nothing to do, no step, no error.
struct Again {
    name: &'static str,
    original: Option<Value>,
    migrated: Option<CronJob>,
    delete_original: bool,
    action: Action,
    steps: Vec<Step>,
    error: Option<&'static str>,
}

impl Default for Again {
    fn default() -> Self {
        Again {
            name: "",
            original: None,
            migrated: None,
            delete_original: false,
            action: Action::None,
            steps: Vec::new(),
            error: None,
        }
    }
}

#[test]
fn running_again_finishes_repairs_or_leaves_alone() {
    let suspended = with(original(), "/spec/suspend", json!(true));
    let stranger = {
        let mut cj = migrated(State::Complete, false);
        cj.metadata.annotations = None;
        cj
    };
    let from_another = {
        let mut cj = migrated(State::Complete, false);
        cj.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ANNOTATION_MIGRATED_FROM_UID.into(), "older-uid".into());
        cj
    };
    let cases = vec![
        Again {
            name: "interrupted before the original was suspended",
            original: Some(original()),
            migrated: Some(migrated(State::InProgress, true)),
            action: Action::Finish,
            steps: vec![
                Step::WriteMigratedStatus,
                Step::SuspendOriginal,
                Step::Recheck,
                Step::Complete { suspend: false },
            ],
            ..Again::default()
        },
        Again {
            name: "interrupted after the original was suspended",
            original: Some(suspended.clone()),
            migrated: Some(migrated(State::InProgress, true)),
            action: Action::Finish,
            steps: vec![Step::WriteMigratedStatus, Step::Complete { suspend: false }],
            ..Again::default()
        },
        Again {
            name: "interrupted after the original was deleted",
            original: None,
            migrated: Some(migrated(State::InProgress, true)),
            delete_original: true,
            action: Action::Finish,
            steps: vec![Step::Complete { suspend: false }],
            ..Again::default()
        },
        Again {
            name: "complete: nothing to do",
            original: Some(suspended.clone()),
            migrated: Some(migrated(State::Complete, false)),
            ..Again::default()
        },
        Again {
            name: "complete and the original deleted: nothing to do",
            original: None,
            migrated: Some(migrated(State::Complete, false)),
            delete_original: true,
            ..Again::default()
        },
        Again {
            name: "complete, now with --delete-original",
            original: Some(suspended.clone()),
            migrated: Some(migrated(State::Complete, false)),
            delete_original: true,
            action: Action::DeleteOriginal,
            steps: vec![Step::DeleteOriginal],
            ..Again::default()
        },
        Again {
            name: "complete but the original was resumed: suspend it again",
            original: Some(original()),
            migrated: Some(migrated(State::Complete, false)),
            action: Action::Finish,
            steps: vec![Step::SuspendOriginal, Step::Recheck],
            ..Again::default()
        },
        Again {
            name: "the name is taken by a CronJob of our own",
            original: Some(original()),
            migrated: Some(stranger),
            action: Action::Skip,
            error: Some(
                "cronjob.batch.kronjob.dev/cj already exists and was not migrated from cronjob.batch/cj: rename or delete one of them",
            ),
            ..Again::default()
        },
        Again {
            name: "migrated from an earlier CronJob of the same name",
            original: Some(original()),
            migrated: Some(from_another),
            action: Action::Skip,
            error: Some(
                "cronjob.batch.kronjob.dev/cj was migrated from another cronjob.batch/cj (uid older-uid, this one is orig-uid)",
            ),
            ..Again::default()
        },
        Again {
            name: "a revert is in progress",
            original: Some(suspended),
            migrated: Some(migrated(State::Reverting, true)),
            action: Action::Skip,
            error: Some(
                "a revert of cronjob.batch.kronjob.dev/cj is in progress: run with --revert to finish it",
            ),
            ..Again::default()
        },
        Again {
            name: "only a kronjob CronJob created as such",
            original: None,
            migrated: Some({
                let mut cj = migrated(State::Complete, false);
                cj.metadata.annotations = None;
                cj
            }),
            action: Action::Skip,
            error: Some("cronjob.batch/cj not found"),
            ..Again::default()
        },
        Again {
            name: "neither exists",
            original: None,
            migrated: None,
            action: Action::Skip,
            error: Some("cronjob.batch/cj not found"),
            ..Again::default()
        },
    ];
    for c in cases {
        let found = Found {
            original: c.original.as_ref(),
            migrated: c.migrated.as_ref(),
        };
        let options = Options {
            delete_original: c.delete_original,
        };
        let plan = plan_migration(NS, NAME, found, options);
        assert_eq!(plan.action, c.action, "{}", c.name);
        assert_eq!(plan.steps, c.steps, "{}", c.name);
        assert_eq!(plan.error.as_deref(), c.error, "{}", c.name);
        assert!(plan.target.is_none(), "{}: creates nothing", c.name);
    }
}

#[test]
fn a_resumed_original_is_a_warning() {
    let plan = migrate(&original(), Some(&migrated(State::Complete, false)), false);
    assert_eq!(
        plan.warnings,
        vec![
            "cronjob.batch/cj was resumed after the migration: both controllers would run it; it is suspended again"
        ]
    );
}

/// One state of both CronJobs and the plan of `migrate --revert` for it.
struct Back {
    name: &'static str,
    original: Option<Value>,
    migrated: Option<CronJob>,
    action: Action,
    steps: Vec<Step>,
}

#[test]
fn revert_table() {
    let suspended = with(original(), "/spec/suspend", json!(true));
    let cases = vec![
        Back {
            name: "complete: suspend, carry back, resume the original, delete",
            original: Some(suspended.clone()),
            migrated: Some(migrated(State::Complete, false)),
            action: Action::Revert,
            steps: vec![
                Step::SuspendMigrated {
                    record: Some(false),
                },
                Step::WriteOriginalStatus,
                Step::RestoreOriginal { suspend: false },
                Step::DeleteMigrated,
            ],
        },
        Back {
            name: "complete and suspended since: the original stays suspended",
            original: Some(suspended.clone()),
            migrated: Some(migrated(State::Complete, true)),
            action: Action::Revert,
            steps: vec![
                Step::SuspendMigrated { record: Some(true) },
                Step::WriteOriginalStatus,
                Step::DeleteMigrated,
            ],
        },
        Back {
            name: "in progress: the recorded suspend is restored",
            original: Some(suspended.clone()),
            migrated: Some(migrated(State::InProgress, true)),
            action: Action::Revert,
            steps: vec![
                Step::SuspendMigrated { record: None },
                Step::WriteOriginalStatus,
                Step::RestoreOriginal { suspend: false },
                Step::DeleteMigrated,
            ],
        },
        Back {
            name: "a revert interrupted after the suspension",
            original: Some(suspended),
            migrated: Some(migrated(State::Reverting, true)),
            action: Action::Revert,
            steps: vec![
                Step::WriteOriginalStatus,
                Step::RestoreOriginal { suspend: false },
                Step::DeleteMigrated,
            ],
        },
        Back {
            name: "a revert interrupted after the original was resumed",
            original: Some(original()),
            migrated: Some(migrated(State::Reverting, true)),
            action: Action::Revert,
            steps: vec![Step::WriteOriginalStatus, Step::DeleteMigrated],
        },
        Back {
            name: "the original was deleted: recreate it",
            original: None,
            migrated: Some(migrated(State::Complete, false)),
            action: Action::Revert,
            steps: vec![
                Step::SuspendMigrated {
                    record: Some(false),
                },
                Step::RecreateOriginal,
                Step::WriteOriginalStatus,
                Step::RestoreOriginal { suspend: false },
                Step::DeleteMigrated,
            ],
        },
        Back {
            name: "never migrated: nothing to do",
            original: Some(original()),
            migrated: None,
            action: Action::None,
            steps: vec![],
        },
    ];
    for c in cases {
        let found = Found {
            original: c.original.as_ref(),
            migrated: c.migrated.as_ref(),
        };
        let plan = plan_revert(NS, NAME, found);
        assert_eq!(plan.error, None, "{}", c.name);
        assert_eq!(plan.action, c.action, "{}", c.name);
        assert_eq!(plan.steps, c.steps, "{}", c.name);
    }
}

#[test]
fn revert_recreates_the_original_from_the_kronjob_spec() {
    let mut cj = migrated(State::Complete, false);
    cj.spec.time_zone = Some("Europe/Berlin".into());
    let plan = plan_revert(
        NS,
        NAME,
        Found {
            original: None,
            migrated: Some(&cj),
        },
    );
    let recreate = plan.recreate.expect("recreated");
    assert_eq!(recreate["apiVersion"], "batch/v1");
    assert_eq!(
        recreate["metadata"],
        json!({
            "name": "cj", "namespace": "ns", "labels": {"team": "a"}, "annotations": {"note": "kept"}
        })
    );
    assert_eq!(recreate["spec"]["suspend"], true);
    assert_eq!(recreate["spec"]["timeZone"], "Europe/Berlin");
    assert_eq!(
        recreate["spec"]["jobTemplate"],
        serde_json::to_value(&cj.spec.job_template).expect("JSON")
    );
}

#[test]
fn revert_refusals() {
    let mut hashed = migrated(State::Complete, false);
    hashed.spec.schedule = Some("H * * * *".into());
    let mut native = migrated(State::Complete, false);
    native.metadata.annotations = None;
    let mut several = migrated(State::Complete, false);
    several.spec.schedule = None;
    several.spec.schedules = Some(vec!["0 9 * * *".into(), "0 17 * * *".into()]);
    let mut queued = migrated(State::Complete, false);
    queued.spec.concurrency_policy = crate::api::ConcurrencyPolicy::Enqueue;
    let mut jobsets = migrated(State::Complete, false);
    jobsets.spec.job_template = None;
    jobsets.spec.workload_template = Some(crate::api::WorkloadTemplate {
        api_version: "jobset.x-k8s.io/v1alpha2".into(),
        kind: "JobSet".into(),
        ..Default::default()
    });
    let mut calendared = migrated(State::Complete, false);
    calendared.spec.calendars = Some(vec!["holidays".into()]);
    calendared.spec.not_after = Some(crate::testing::fixtures::time("2030-01-01T00:00:00Z"));
    let mut excluded = migrated(State::Complete, false);
    excluded.spec.exclusions = Some(crate::api::CalendarSpec {
        yearly: vec!["12-25".into()],
        ..Default::default()
    });
    let mut triggered = migrated(State::Complete, false);
    triggered
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(
            crate::api::ANNOTATION_TRIGGER.into(),
            "2016-05-19T12:00:00Z,2016-05-20T08:00:00Z".into(),
        );
    let mut backfilling = migrated(State::Complete, false);
    backfilling
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(
            crate::api::ANNOTATION_BACKFILL.into(),
            r#"{"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z","parallel":1}"#.into(),
        );
    let suspended_original = json!({"spec": {"suspend": true}});
    let cases = [
        (
            None,
            Some(&backfilling),
            r#"cronjob.batch.kronjob.dev/cj has a backfill in progress (batch.kronjob.dev/backfill: {"from":"2026-01-01T00:00:00Z","to":"2026-01-02T00:00:00Z","parallel":1}), which batch/v1 cannot run: wait for it to finish, or remove the annotation to cancel it"#,
        ),
        (
            None,
            Some(&calendared),
            "cronjob.batch/cj no longer exists and cronjob.batch.kronjob.dev/cj sets spec.calendars and spec.notAfter, which batch/v1 does not know (a batch/v1 CronJob would run the slots they keep from running): remove them first",
        ),
        (
            None,
            Some(&excluded),
            "cronjob.batch/cj no longer exists and cronjob.batch.kronjob.dev/cj sets spec.exclusions, which batch/v1 does not know (a batch/v1 CronJob would run the slots they keep from running): remove it first",
        ),
        (
            None,
            Some(&triggered),
            "cronjob.batch.kronjob.dev/cj has manual runs pending (2016-05-19T12:00:00Z, 2016-05-20T08:00:00Z), which batch/v1 cannot hold: let them run, or cancel them first (kubectl kronjob trigger cj --cancel)",
        ),
        (
            Some(&suspended_original),
            Some(&triggered),
            "cronjob.batch.kronjob.dev/cj has manual runs pending (2016-05-19T12:00:00Z, 2016-05-20T08:00:00Z), which batch/v1 cannot hold: let them run, or cancel them first (kubectl kronjob trigger cj --cancel)",
        ),
        (
            None,
            Some(&jobsets),
            "cronjob.batch/cj no longer exists and cronjob.batch.kronjob.dev/cj runs jobset.x-k8s.io/v1alpha2 JobSet, which a batch/v1 CronJob cannot run: it runs Jobs only",
        ),
        (
            None,
            Some(&queued),
            "cronjob.batch/cj no longer exists and cronjob.batch.kronjob.dev/cj has concurrencyPolicy Enqueue, which batch/v1 does not know: set Forbid, Allow or Replace first (its queued slots are dropped then)",
        ),
        (
            None,
            Some(&hashed),
            "cronjob.batch/cj no longer exists and cronjob.batch.kronjob.dev/cj uses H in its schedule, which batch/v1 does not know",
        ),
        (
            None,
            Some(&several),
            "cronjob.batch/cj no longer exists and cronjob.batch.kronjob.dev/cj has 2 schedules; a batch/v1 CronJob has one",
        ),
        (
            None,
            Some(&native),
            "cronjob.batch.kronjob.dev/cj was not migrated from batch/v1: nothing to revert",
        ),
        (None, None, "cronjob.batch.kronjob.dev/cj not found"),
    ];
    for (original, migrated, want) in cases {
        let plan = plan_revert(NS, NAME, Found { original, migrated });
        assert_eq!(plan.action, Action::Skip, "{want}");
        assert_eq!(plan.error.as_deref(), Some(want));
        assert!(plan.steps.is_empty());
    }
}

#[test]
fn revert_warns_of_every_spec_change_that_stays_behind() {
    // The same spec read back (defaults, nulls and empty objects as the API server stores
    // them; a different suspend): nothing to warn about.
    let plan = plan_revert(
        NS,
        NAME,
        Found {
            original: Some(&original()),
            migrated: Some(&migrated(State::Complete, true)),
        },
    );
    assert_eq!(plan.warnings, Vec::<String>::new());

    let mut cj = migrated(State::Complete, false);
    cj.spec.schedule = Some("H * * * *".into());
    cj.spec.time_zone = Some("Europe/Berlin".into());
    cj.spec.starting_deadline_seconds = Some(30);
    let template = cj.spec.job_template.as_mut().expect("a Job template");
    let pod = template.spec.as_mut().expect("job spec");
    pod.backoff_limit = Some(2);
    let containers = &mut pod.template.spec.as_mut().expect("pod spec").containers;
    containers[0].image = Some("alpine:3".into());
    let plan = plan_revert(
        NS,
        NAME,
        Found {
            original: Some(&original()),
            migrated: Some(&cj),
        },
    );
    let keeps = "cronjob.batch/cj keeps its own";
    let (k, b) = ("cronjob.batch.kronjob.dev/cj", "cronjob.batch/cj");
    assert_eq!(
        plan.warnings,
        vec![
            format!("spec.jobTemplate.spec.backoffLimit is 2 in {k} and not set in {b}: {keeps}"),
            format!(
                "spec.jobTemplate.spec.template.spec.containers[0].image is \"alpine:3\" in {k} and \"busybox\" in {b}: {keeps}"
            ),
            format!("spec.schedule is \"H * * * *\" in {k} and \"0 * * * *\" in {b}: {keeps}"),
            format!("spec.startingDeadlineSeconds is 30 in {k} and not set in {b}: {keeps}"),
            format!("spec.timeZone is \"Europe/Berlin\" in {k} and not set in {b}: {keeps}"),
        ]
    );
    // Warnings only: the revert goes on.
    assert_eq!(plan.action, Action::Revert);
}

#[test]
fn an_original_changed_since_an_earlier_run_created_the_copy_is_not_finished() {
    let copy = migrated(State::InProgress, true);
    let unchanged = migrate(&original(), Some(&copy), false);
    assert_eq!(unchanged.action, Action::Finish, "{:?}", unchanged.error);
    let edited = with(original(), "/spec/schedule", json!("30 * * * *"));
    let plan = migrate(&edited, Some(&copy), false);
    assert_eq!(plan.action, Action::Skip);
    assert!(plan.steps.is_empty());
    assert_eq!(
        plan.error.as_deref(),
        Some(
            "cronjob.batch/cj was changed after cronjob.batch.kronjob.dev/cj was created from it (spec.schedule is \"30 * * * *\" in cronjob.batch/cj and \"0 * * * *\" in cronjob.batch.kronjob.dev/cj); finishing would lose the change: delete cronjob.batch.kronjob.dev/cj (created suspended by an earlier run, it never ran) and run the migration again"
        )
    );
    // A completed migration is the kronjob CronJob's own from then on: no such check.
    let done = migrated(State::Complete, false);
    let plan = migrate(&edited, Some(&done), false);
    assert_ne!(plan.action, Action::Skip, "{:?}", plan.error);
}

#[test]
fn times_carry_only_what_is_later() {
    let a = Times {
        last_schedule: Some(t("2016-05-19T10:00:00Z")),
        last_successful: Some(t("2016-05-19T09:00:10Z")),
    };
    let b = Times {
        last_schedule: Some(t("2016-05-19T09:00:00Z")),
        last_successful: None,
    };
    assert_eq!(a.newer_than(b), a);
    assert!(b.newer_than(a).is_empty());
    assert!(a.newer_than(a).is_empty());
    assert_eq!(b.max(a), a);
    assert_eq!(
        b.status_patch(),
        json!({"status": {"lastScheduleTime": "2016-05-19T09:00:00Z"}})
    );
    assert_eq!(
        a.status_patch(),
        json!({"status": {"lastScheduleTime": "2016-05-19T10:00:00Z", "lastSuccessfulTime": "2016-05-19T09:00:10Z"}})
    );
    assert_eq!(
        Times::of_json(&original()).max(Times::default()),
        Times::of_json(&original())
    );
    assert!(Times::of_json(&json!({"status": {"lastScheduleTime": "garbage"}})).is_empty());
}

#[test]
fn lost_paths_table() {
    let cases = [
        (json!({"a": 1}), json!({"a": 1}), vec![]),
        (json!({"a": 1, "b": 2}), json!({"a": 1}), vec!["t.b"]),
        (json!({"a": null, "b": {}, "c": []}), json!({}), vec![]),
        (
            json!({"a": {"x": 1, "y": 2}}),
            json!({"a": {"x": 1}}),
            vec!["t.a.y"],
        ),
        (
            json!({"l": [{"x": 1, "z": 3}, {"x": 2}]}),
            json!({"l": [{"x": 1}, {"x": 2}]}),
            vec!["t.l[0].z"],
        ),
        (json!({"l": [1, 2]}), json!({"l": [1]}), vec!["t.l[1]"]),
        (json!({"n": "100m"}), json!({"n": 0.1}), vec![]),
    ];
    for (original, kept, want) in cases {
        let mut got = Vec::new();
        lost_paths(&original, &kept, "t", &mut got);
        assert_eq!(got, want, "{original} vs {kept}");
    }
}

#[test]
fn record_of_reads_the_annotations() {
    assert_eq!(
        record_of(&migrated(State::Complete, false)),
        Some(Record {
            state: State::Complete,
            from_uid: Some("orig-uid".into()),
            original_suspend: false,
        })
    );
    let mut unknown = migrated(State::Complete, false);
    unknown
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(ANNOTATION_MIGRATION.into(), "someday".into());
    assert_eq!(
        record_of(&unknown).map(|r| r.state),
        Some(State::InProgress)
    );
    let mut other = migrated(State::Complete, false);
    other
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(ANNOTATION_MIGRATED_FROM.into(), "batch/v1beta1".into());
    assert_eq!(record_of(&other), None);
}

#[test]
fn a_single_entry_of_schedules_comes_back_as_schedule_and_the_failure_policy_stays_behind() {
    let mut cj = migrated(State::Complete, false);
    cj.spec.schedule = None;
    cj.spec.schedules = Some(vec!["0 9 * * *".into()]);
    cj.spec.failure_policy = Some(crate::api::FailurePolicy {
        suspend_after_consecutive_failures: Some(3),
    });
    let plan = plan_revert(
        NS,
        NAME,
        Found {
            original: None,
            migrated: Some(&cj),
        },
    );
    let spec = &plan.recreate.expect("recreated")["spec"];
    assert_eq!(spec["schedule"], "0 9 * * *");
    assert!(spec.get("schedules").is_none(), "{spec}");
    assert!(spec.get("failurePolicy").is_none(), "{spec}");
}

#[test]
fn revert_warns_that_several_schedules_stay_behind() {
    let mut cj = migrated(State::Complete, false);
    cj.spec.schedule = None;
    cj.spec.schedules = Some(vec!["0 * * * *".into(), "30 * * * *".into()]);
    let plan = plan_revert(
        NS,
        NAME,
        Found {
            original: Some(&original()),
            migrated: Some(&cj),
        },
    );
    let (k, b) = ("cronjob.batch.kronjob.dev/cj", "cronjob.batch/cj");
    let keeps = format!("{b} keeps its own");
    assert_eq!(
        plan.warnings,
        vec![
            format!("spec.schedule is not set in {k} and is \"0 * * * *\" in {b}: {keeps}"),
            format!(
                "spec.schedules is [\"0 * * * *\",\"30 * * * *\"] in {k} and not set in {b}: {keeps}"
            ),
        ]
    );
}
