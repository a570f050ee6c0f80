//! Admission on the real API server: the webhook as the API server calls it (defaults, every
//! validation rule, updates, malformed requests), and the same rules with the CRD schema
//! alone, where what the schema cannot refuse must be caught by the manager instead.
//!
//! The table below has one row per rule the webhook enforces (`src/api/rules.rs`, whose rules
//! the CRD schema enforces too, and `src/api/validation.rs`, which adds what CEL cannot
//! check), and states which layer refuses it: the schema (the webhook never sees the object)
//! or the webhook only. A test below fails when a rule of the table in `rules.rs` has no row.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kronjob::api::CronJob;
use kronjob::api::defaults::spec_defaults;
use kronjob::api::rules::rules;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::harness::{Ctx, Env, metric_sum, wait_for};
use crate::webhook::Webhook;

crate::cases!(
    admission:
    webhook_fills_in_the_defaults,
    every_rule_is_refused_naming_its_field,
    without_the_webhook_the_manager_reports_what_the_schema_lets_through,
    updates_are_validated_and_stored_objects_ratchet,
    malformed_reviews_get_400_with_a_reason,
);

/// One invalid CronJob: what `spoil` does to a valid one, the field the refusal names, and
/// who refuses it.
struct Row {
    what: &'static str,
    spoil: fn(&mut Value),
    /// The field path the error message names.
    field: &'static str,
    /// Refused by the CRD schema (structural or CEL): the webhook never sees it.
    schema: bool,
    /// For a row only the webhook refuses: the `Ready` reason (and Warning Event) the manager
    /// gives the CronJob when it was stored without the webhook.
    reason: Option<&'static str>,
}

const POD_SPEC: &str = "/spec/jobTemplate/spec/template/spec";

fn set(object: &mut Value, pointer: &str, value: Value) {
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
    object
        .pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .unwrap_or_else(|| panic!("no object at {parent}"))
        .insert(key.to_string(), value);
}

/// `spec.workloadTemplate` set to `template`, instead of `spec.jobTemplate`.
fn workload(object: &mut Value, template: Value) {
    remove(object, "/spec/jobTemplate");
    set(object, "/spec/workloadTemplate", template);
}

/// `spec.schedules` set to `items`, instead of `spec.schedule`.
fn set_schedules(object: &mut Value, items: Value) {
    remove(object, "/spec/schedule");
    set(object, "/spec/schedules", items);
}

fn remove(object: &mut Value, pointer: &str) {
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
    if let Some(map) = object.pointer_mut(parent).and_then(Value::as_object_mut) {
        map.remove(key);
    }
}

macro_rules! row {
    ($what:expr, $field:expr, schema, |$o:ident| $spoil:expr) => {
        Row {
            what: $what,
            spoil: |$o| $spoil,
            field: $field,
            schema: true,
            reason: None,
        }
    };
    ($what:expr, $field:expr, webhook($reason:expr), |$o:ident| $spoil:expr) => {
        Row {
            what: $what,
            spoil: |$o| $spoil,
            field: $field,
            schema: false,
            reason: Some($reason),
        }
    };
}

/// Every rule, with one invalid value each (several for the schedule language).
fn table() -> Vec<Row> {
    vec![
        // src/api/rules.rs: the CRD schema has each of these as minimum, maxLength or CEL.
        row!("name of 53 characters", "metadata.name", schema, |o| set(
            o,
            "/metadata/name",
            json!(format!("n{}", "x".repeat(52)))
        )),
        row!("empty schedule", "spec.schedule", schema, |o| set(
            o,
            "/spec/schedule",
            json!("")
        )),
        row!(
            "schedule over 1024 characters",
            "spec.schedule",
            schema,
            |o| set(
                o,
                "/spec/schedule",
                json!(format!("0 * * * *{}", " ".repeat(1020)))
            )
        ),
        row!("TZ= prefix", "spec.schedule", schema, |o| set(
            o,
            "/spec/schedule",
            json!("TZ=UTC 0 * * * *")
        )),
        row!("CRON_TZ= prefix", "spec.schedule", schema, |o| set(
            o,
            "/spec/schedule",
            json!("CRON_TZ=Europe/Berlin 0 * * * *")
        )),
        row!(
            "time zone over 255 characters",
            "spec.timeZone",
            schema,
            |o| set(o, "/spec/timeZone", json!("Europe/".repeat(40)))
        ),
        row!("empty time zone", "spec.timeZone", schema, |o| set(
            o,
            "/spec/timeZone",
            json!("")
        )),
        row!("time zone Local", "spec.timeZone", schema, |o| set(
            o,
            "/spec/timeZone",
            json!("Local")
        )),
        row!(
            "time zone not shaped like a name",
            "spec.timeZone",
            schema,
            |o| set(o, "/spec/timeZone", json!("../etc/passwd"))
        ),
        row!(
            "negative startingDeadlineSeconds",
            "spec.startingDeadlineSeconds",
            schema,
            |o| set(o, "/spec/startingDeadlineSeconds", json!(-1))
        ),
        row!(
            "negative successfulJobsHistoryLimit",
            "spec.successfulJobsHistoryLimit",
            schema,
            |o| set(o, "/spec/successfulJobsHistoryLimit", json!(-1))
        ),
        row!(
            "negative failedJobsHistoryLimit",
            "spec.failedJobsHistoryLimit",
            schema,
            |o| set(o, "/spec/failedJobsHistoryLimit", json!(-1))
        ),
        row!(
            "a Job selector",
            "spec.jobTemplate.spec.selector",
            schema,
            |o| set(
                o,
                "/spec/jobTemplate/spec/selector",
                json!({"matchLabels": {"a": "b"}})
            )
        ),
        row!(
            "manualSelector",
            "spec.jobTemplate.spec.manualSelector",
            schema,
            |o| set(o, "/spec/jobTemplate/spec/manualSelector", json!(true))
        ),
        row!(
            "negative parallelism",
            "spec.jobTemplate.spec.parallelism",
            schema,
            |o| set(o, "/spec/jobTemplate/spec/parallelism", json!(-1))
        ),
        row!(
            "negative completions",
            "spec.jobTemplate.spec.completions",
            schema,
            |o| set(o, "/spec/jobTemplate/spec/completions", json!(-1))
        ),
        row!(
            "negative activeDeadlineSeconds",
            "spec.jobTemplate.spec.activeDeadlineSeconds",
            schema,
            |o| set(o, "/spec/jobTemplate/spec/activeDeadlineSeconds", json!(-1))
        ),
        row!(
            "negative backoffLimit",
            "spec.jobTemplate.spec.backoffLimit",
            schema,
            |o| set(o, "/spec/jobTemplate/spec/backoffLimit", json!(-1))
        ),
        row!(
            "negative ttlSecondsAfterFinished",
            "spec.jobTemplate.spec.ttlSecondsAfterFinished",
            schema,
            |o| set(
                o,
                "/spec/jobTemplate/spec/ttlSecondsAfterFinished",
                json!(-1)
            )
        ),
        row!(
            "restartPolicy Always",
            "spec.jobTemplate.spec.template.spec.restartPolicy",
            schema,
            |o| set(o, &format!("{POD_SPEC}/restartPolicy"), json!("Always"))
        ),
        row!(
            "no restartPolicy",
            "spec.jobTemplate.spec.template.spec.restartPolicy",
            schema,
            |o| remove(o, &format!("{POD_SPEC}/restartPolicy"))
        ),
        // src/api/validation.rs: required fields and the policy (the schema says so too).
        row!("no spec", "spec", schema, |o| remove(o, "/spec")),
        row!("no schedule", "spec.schedule", schema, |o| remove(
            o,
            "/spec/schedule"
        )),
        row!("schedule and schedules", "spec.schedules", schema, |o| set(
            o,
            "/spec/schedules",
            json!(["*/2 * * * *"])
        )),
        row!("empty schedules", "spec.schedules", schema, |o| {
            set_schedules(o, json!([]))
        }),
        row!("17 schedules", "spec.schedules", schema, |o| set_schedules(
            o,
            json!(vec!["0 * * * *"; 17])
        )),
        row!(
            "@every beside another schedule",
            "spec.schedules",
            schema,
            |o| set_schedules(o, json!(["@every 1h", "0 * * * *"]))
        ),
        row!("schedules not a list", "spec.schedules", schema, |o| {
            set_schedules(o, json!("0 * * * *"))
        }),
        row!(
            "an empty entry of schedules",
            "spec.schedules[1]",
            schema,
            |o| { set_schedules(o, json!(["0 * * * *", ""])) }
        ),
        row!(
            "an entry of schedules over 1024 characters",
            "spec.schedules[0]",
            schema,
            |o| set_schedules(o, json!([format!("0 * * * *{}", " ".repeat(1020))]))
        ),
        row!(
            "TZ= in an entry of schedules",
            "spec.schedules[1]",
            schema,
            |o| { set_schedules(o, json!(["0 * * * *", "TZ=UTC 0 * * * *"])) }
        ),
        row!(
            "suspendAfterConsecutiveFailures 0",
            "spec.failurePolicy.suspendAfterConsecutiveFailures",
            schema,
            |o| set(
                o,
                "/spec/failurePolicy",
                json!({"suspendAfterConsecutiveFailures": 0})
            )
        ),
        row!("a queue without Enqueue", "spec.queue", schema, |o| set(
            o,
            "/spec/queue",
            json!({"maxQueued": 2})
        )),
        row!("maxQueued 0", "spec.queue.maxQueued", schema, |o| {
            set(o, "/spec/concurrencyPolicy", json!("Enqueue"));
            set(o, "/spec/queue", json!({"maxQueued": 0}))
        }),
        row!("maxQueued 101", "spec.queue.maxQueued", schema, |o| {
            set(o, "/spec/concurrencyPolicy", json!("Enqueue"));
            set(o, "/spec/queue", json!({"maxQueued": 101}))
        }),
        row!("no jobTemplate", "spec.jobTemplate", schema, |o| remove(
            o,
            "/spec/jobTemplate"
        )),
        row!("both templates", "spec.workloadTemplate", schema, |o| set(
            o,
            "/spec/workloadTemplate",
            json!({"apiVersion": "ray.io/v1", "kind": "RayJob"})
        )),
        row!(
            "a completion rule for a Job",
            "spec.completion",
            schema,
            |o| set(
                o,
                "/spec/completion",
                json!({"succeeded": "true", "failed": "false"})
            )
        ),
        row!(
            "a workload's apiVersion that is none",
            "spec.workloadTemplate.apiVersion",
            schema,
            |o| workload(o, json!({"apiVersion": "Ray.IO/v1", "kind": "RayJob"}))
        ),
        row!(
            "a workload's apiVersion of 318 characters",
            "spec.workloadTemplate.apiVersion",
            schema,
            |o| workload(
                o,
                json!({"apiVersion": format!("{}/v1", "a".repeat(315)), "kind": "RayJob"})
            )
        ),
        row!(
            "a CronJob as the workload",
            "spec.workloadTemplate.apiVersion",
            schema,
            |o| workload(
                o,
                json!({"apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob"})
            )
        ),
        row!(
            "a Job as a workload",
            "spec.workloadTemplate.kind",
            schema,
            |o| workload(o, json!({"apiVersion": "batch/v1", "kind": "Job"}))
        ),
        row!(
            "a workload's kind that is none",
            "spec.workloadTemplate.kind",
            schema,
            |o| workload(o, json!({"apiVersion": "ray.io/v1", "kind": "Ray-Job"}))
        ),
        row!(
            "a workload's kind of 64 characters",
            "spec.workloadTemplate.kind",
            schema,
            |o| workload(
                o,
                json!({"apiVersion": "ray.io/v1", "kind": "K".repeat(64)})
            )
        ),
        row!(
            "a completion rule of 1025 characters",
            "spec.completion.succeeded",
            schema,
            |o| {
                workload(o, json!({"apiVersion": "example.com/v1", "kind": "Thing"}));
                set(
                    o,
                    "/spec/completion",
                    json!({"succeeded": "t".repeat(1025), "failed": "false"}),
                )
            }
        ),
        row!(
            "a failed rule of 1025 characters",
            "spec.completion.failed",
            schema,
            |o| {
                workload(o, json!({"apiVersion": "example.com/v1", "kind": "Thing"}));
                set(
                    o,
                    "/spec/completion",
                    json!({"succeeded": "true", "failed": "f".repeat(1025)}),
                )
            }
        ),
        row!(
            "a kind without a rule and no completion",
            "spec.completion",
            webhook("InvalidWorkload"),
            |o| workload(o, json!({"apiVersion": "example.com/v1", "kind": "Thing"}))
        ),
        row!(
            "a completion rule for a kind with one",
            "spec.completion",
            webhook("InvalidWorkload"),
            |o| {
                workload(o, json!({"apiVersion": "ray.io/v1", "kind": "RayJob"}));
                set(
                    o,
                    "/spec/completion",
                    json!({"succeeded": "true", "failed": "false"}),
                )
            }
        ),
        row!(
            "a completion rule that is no CEL",
            "spec.completion.succeeded",
            webhook("InvalidWorkload"),
            |o| {
                workload(o, json!({"apiVersion": "example.com/v1", "kind": "Thing"}));
                set(
                    o,
                    "/spec/completion",
                    json!({"succeeded": "self.status.(", "failed": "false"}),
                )
            }
        ),
        row!("schedule not a string", "spec.schedule", schema, |o| set(
            o,
            "/spec/schedule",
            json!(5)
        )),
        row!(
            "unknown concurrencyPolicy",
            "spec.concurrencyPolicy",
            schema,
            |o| set(o, "/spec/concurrencyPolicy", json!("Sometimes"))
        ),
        row!(
            "empty concurrencyPolicy",
            "spec.concurrencyPolicy",
            schema,
            |o| set(o, "/spec/concurrencyPolicy", json!(""))
        ),
        // Calendars and the window (spec.exclusions, spec.calendars, notBefore/notAfter).
        row!(
            "367 exclusion dates",
            "spec.exclusions.dates",
            schema,
            |o| {
                let dates: Vec<String> = (0..367).map(|i| format!("{}-01-01", 2000 + i)).collect();
                set(o, "/spec/exclusions", json!({ "dates": dates }))
            }
        ),
        row!(
            "an exclusion date over 10 characters",
            "spec.exclusions.dates[0]",
            schema,
            |o| set(o, "/spec/exclusions", json!({"dates": ["2026-12-24x"]}))
        ),
        row!(
            "101 exclusion ranges",
            "spec.exclusions.ranges",
            schema,
            |o| {
                let range = json!({"from": "2026-12-24", "to": "2026-12-26"});
                set(o, "/spec/exclusions", json!({ "ranges": vec![range; 101] }))
            }
        ),
        row!(
            "a range's from over 10 characters",
            "spec.exclusions.ranges[0].from",
            schema,
            |o| set(
                o,
                "/spec/exclusions",
                json!({"ranges": [{"from": "2026-12-24x", "to": "2026-12-26"}]})
            )
        ),
        row!(
            "a range's to over 10 characters",
            "spec.exclusions.ranges[0].to",
            schema,
            |o| set(
                o,
                "/spec/exclusions",
                json!({"ranges": [{"from": "2026-12-24", "to": "2026-12-26x"}]})
            )
        ),
        row!(
            "a range that ends before it starts",
            "spec.exclusions.ranges[0].to",
            schema,
            |o| set(
                o,
                "/spec/exclusions",
                json!({"ranges": [{"from": "2026-12-24", "to": "2026-12-23"}]})
            )
        ),
        row!(
            "101 yearly days",
            "spec.exclusions.yearly",
            schema,
            |o| set(
                o,
                "/spec/exclusions",
                json!({ "yearly": vec!["12-25"; 101] })
            )
        ),
        row!(
            "a yearly day over 5 characters",
            "spec.exclusions.yearly[0]",
            schema,
            |o| set(o, "/spec/exclusions", json!({"yearly": ["12-25x"]}))
        ),
        row!(
            "yearly day 02-30",
            "spec.exclusions.yearly[0]",
            schema,
            |o| set(o, "/spec/exclusions", json!({"yearly": ["02-30"]}))
        ),
        row!("17 calendars", "spec.calendars", schema, |o| {
            let names: Vec<String> = (0..17).map(|i| format!("c{i}")).collect();
            set(o, "/spec/calendars", json!(names))
        }),
        row!(
            "a calendar name over 253 characters",
            "spec.calendars[0]",
            schema,
            |o| set(o, "/spec/calendars", json!(["c".repeat(254)]))
        ),
        row!(
            "a calendar name with capitals",
            "spec.calendars[0]",
            schema,
            |o| set(o, "/spec/calendars", json!(["Holidays"]))
        ),
        row!("notAfter before notBefore", "spec.notAfter", schema, |o| {
            set(o, "/spec/notBefore", json!("2026-02-01T00:00:00Z"));
            set(o, "/spec/notAfter", json!("2026-01-01T00:00:00Z"))
        }),
        // What CEL cannot check: the schedule parses, the zone exists, the Job is valid.
        row!(
            "minute 61",
            "spec.schedule",
            webhook("InvalidSchedule"),
            |o| set(o, "/spec/schedule", json!("61 * * * *"))
        ),
        row!(
            "weekday 7",
            "spec.schedule",
            webhook("InvalidSchedule"),
            |o| set(o, "/spec/schedule", json!("0 0 * * 7"))
        ),
        row!(
            "four fields",
            "spec.schedule",
            webhook("InvalidSchedule"),
            |o| set(o, "/spec/schedule", json!("0 0 * *"))
        ),
        row!(
            "six fields",
            "spec.schedule",
            webhook("InvalidSchedule"),
            |o| set(o, "/spec/schedule", json!("0 0 0 * * *"))
        ),
        row!(
            "unknown descriptor",
            "spec.schedule",
            webhook("InvalidSchedule"),
            |o| set(o, "/spec/schedule", json!("@fortnightly"))
        ),
        row!(
            "bad @every",
            "spec.schedule",
            webhook("InvalidSchedule"),
            |o| set(o, "/spec/schedule", json!("@every 5 minutes"))
        ),
        row!(
            "unknown month name",
            "spec.schedule",
            webhook("InvalidSchedule"),
            |o| set(o, "/spec/schedule", json!("0 0 1 FOO *"))
        ),
        row!(
            "step of zero",
            "spec.schedule",
            webhook("InvalidSchedule"),
            |o| set(o, "/spec/schedule", json!("*/0 * * * *"))
        ),
        row!(
            "H range backwards",
            "spec.schedule",
            webhook("InvalidSchedule"),
            |o| set(o, "/spec/schedule", json!("H(30-10) * * * *"))
        ),
        row!(
            "H range past the field",
            "spec.schedule",
            webhook("InvalidSchedule"),
            |o| set(o, "/spec/schedule", json!("H(0-60) * * * *"))
        ),
        row!(
            "H step of zero",
            "spec.schedule",
            webhook("InvalidSchedule"),
            |o| set(o, "/spec/schedule", json!("H/0 * * * *"))
        ),
        row!(
            "H without its parentheses",
            "spec.schedule",
            webhook("InvalidSchedule"),
            |o| set(o, "/spec/schedule", json!("H0-29 * * * *"))
        ),
        row!(
            "minute 61 in the second of schedules",
            "spec.schedules[1]",
            webhook("InvalidSchedule"),
            |o| set_schedules(o, json!(["*/2 * * * *", "61 * * * *"]))
        ),
        row!(
            "H step of zero in schedules",
            "spec.schedules[0]",
            webhook("InvalidSchedule"),
            |o| set_schedules(o, json!(["H/0 * * * *", "0 * * * *"]))
        ),
        row!(
            "unknown time zone",
            "spec.timeZone",
            webhook("UnknownTimeZone"),
            |o| set(o, "/spec/timeZone", json!("Mars/Olympus_Mons"))
        ),
        row!(
            "Job template the API server refuses",
            "spec.jobTemplate.spec.template.spec.containers[0].image",
            webhook("InvalidJobTemplate"),
            |o| remove(o, &format!("{POD_SPEC}/containers/0/image"))
        ),
    ]
}

/// A valid CronJob named `name` on `* * * * *`.
fn valid(name: &str) -> Value {
    crate::cronjob::every_minute(name, 3)
}

/// Row `i`'s CronJob, named after the row (unless the row spoils the name).
fn manifest(i: usize, row: &Row) -> Value {
    let mut object = valid(&format!("row-{i:02}"));
    (row.spoil)(&mut object);
    object
}

fn dynamic(env: &Env) -> Api<DynamicObject> {
    let resource = ApiResource::erase::<CronJob>(&());
    Api::namespaced_with(env.client.clone(), &env.namespace, &resource)
}

/// Create `object` as raw JSON (typed structs could not hold the invalid values).
async fn create(api: &Api<DynamicObject>, object: &Value) -> Result<DynamicObject, kube::Error> {
    let object: DynamicObject = serde_json::from_value(object.clone()).expect("an object");
    api.create(&PostParams::default(), &object).await
}

/// Check that `result` is the refusal row `i` calls for: an Invalid answer whose message names
/// the field, given by the webhook exactly when the schema cannot refuse the row. `None` when
/// it holds, else what is wrong.
fn check_refusal(
    i: usize,
    row: &Row,
    webhook: bool,
    result: Result<DynamicObject, kube::Error>,
) -> Option<String> {
    let status = match result {
        Ok(_) => return Some(format!("row {i} ({}): accepted", row.what)),
        Err(kube::Error::Api(status)) => status,
        Err(e) => return Some(format!("row {i} ({}): {e}", row.what)),
    };
    let message = &status.message;
    let by_webhook = message.contains("admission webhook");
    let problems = [
        (!message.contains(&format!("{}: ", row.field)))
            .then(|| format!("does not name {}", row.field)),
        (by_webhook == row.schema).then(|| {
            let who = if by_webhook {
                "the webhook"
            } else {
                "the schema"
            };
            format!("refused by {who}")
        }),
        (by_webhook && !webhook).then(|| "a webhook answered, none is installed".to_string()),
    ];
    let problems: Vec<String> = problems.into_iter().flatten().collect();
    (!problems.is_empty()).then(|| {
        format!(
            "row {i} ({}): {} (code {}): {message}",
            row.what,
            problems.join(", "),
            status.code
        )
    })
}

/// Every rule of `src/api/rules.rs` has a row naming its field (`[*]`, each item of a list,
/// is named by an index).
fn check_coverage(table: &[Row]) {
    for rule in rules() {
        let path = rule.path();
        let names = |field: &str| match path.split_once("[*]") {
            Some((list, rest)) => field
                .strip_prefix(list)
                .and_then(|f| f.strip_prefix('['))
                .and_then(|f| f.split_once(']'))
                .is_some_and(|(index, after)| index.parse::<usize>().is_ok() && after == rest),
            None => field == path,
        };
        assert!(
            table.iter().any(|row| names(row.field)),
            "no row of the table breaks the rule on {path}"
        );
    }
}

/// (a) A CronJob without the defaulted fields and one with them `null` come back with the
/// defaults: the schema fills in absent fields; the webhook fills in the nullable ones sent as
/// `null` (the schema alone keeps a `null` there, as a namespace the webhook does not cover
/// shows) and says so in its metrics.
pub async fn webhook_fills_in_the_defaults(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let webhook = Webhook::start(&ctx, &env, &[]).await;
    let api = dynamic(&env);
    let fields: Vec<&str> = spec_defaults().iter().map(|d| d.field).collect();
    let patched = |text: &str| {
        metric_sum(
            text,
            "kronjob_webhook_request_duration_seconds_count",
            &[("result", "patched")],
        )
    };
    let before = patched(&webhook.manager.metrics_text().await);
    let mut absent = valid("absent");
    let mut nulls = valid("nulls");
    for field in &fields {
        remove(&mut absent, &format!("/spec/{field}"));
        set(&mut nulls, &format!("/spec/{field}"), Value::Null);
    }
    for object in [&absent, &nulls] {
        let created = create(&api, object).await.expect("created");
        let spec = &created.data["spec"];
        for default in spec_defaults() {
            assert_eq!(
                spec[default.field], default.value,
                "{}: {}",
                default.field, created.data
            );
        }
    }
    let after = patched(&webhook.manager.metrics_text().await);
    assert!(
        after > before,
        "the webhook patched the nulls: {before} -> {after}"
    );
    // Where the webhook is not called, the nullable fields stay null: it is the webhook that
    // filled them in above.
    let bare = Env::new(&ctx).await;
    let created = create(&dynamic(&bare), &nulls).await.expect("created");
    let kept: Vec<&str> = fields
        .iter()
        .copied()
        .filter(|f| created.data["spec"][*f].is_null())
        .collect();
    assert!(
        !kept.is_empty(),
        "the schema alone defaults every null: {}",
        created.data
    );
    bare.cleanup().await;
    webhook.uninstall().await;
    env.cleanup().await;
}

/// (b) With the webhook installed every row is refused, the message naming the row's field,
/// by the webhook exactly for the rows the schema cannot refuse.
pub async fn every_rule_is_refused_naming_its_field(ctx: Ctx) {
    let table = table();
    check_coverage(&table);
    let env = Env::new(&ctx).await;
    let webhook = Webhook::start(&ctx, &env, &[]).await;
    let api = dynamic(&env);
    let mut failures = Vec::new();
    for (i, row) in table.iter().enumerate() {
        let result = create(&api, &manifest(i, row)).await;
        failures.extend(check_refusal(i, row, true, result));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    webhook.uninstall().await;
    env.cleanup().await;
}

/// (c) Without the webhook the schema refuses its rows just the same, and takes the others;
/// the manager then gives each of those `Ready=False` with the row's reason and one Warning
/// Event, creates no Job past the next slot, and neither fails nor loops.
pub async fn without_the_webhook_the_manager_reports_what_the_schema_lets_through(ctx: Ctx) {
    let table = table();
    let env = Env::new(&ctx).await;
    let mut manager = env.manager(&[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    let api = dynamic(&env);
    let mut failures = Vec::new();
    let mut stored = Vec::new();
    for (i, row) in table.iter().enumerate() {
        let object = manifest(i, row);
        let result = create(&api, &object).await;
        if row.schema {
            failures.extend(check_refusal(i, row, false, result));
        } else {
            match result {
                Ok(created) => {
                    stored.push((created.metadata.name.clone().unwrap_or_default(), row))
                }
                Err(e) => failures.push(format!("row {i} ({}): refused: {e}", row.what)),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let cronjobs = env.api::<CronJob>();
    for (name, row) in &stored {
        let reason = row.reason.expect("a webhook row has a reason");
        let message = wait_for(
            Duration::from_secs(30),
            &format!("{name}: Ready=False {reason}"),
            || async {
                let status = cronjobs.get_status(name).await.ok()?.status?;
                let ready = status.conditions.into_iter().find(|c| c.type_ == "Ready")?;
                (ready.status == "False" && ready.reason == reason).then_some(ready.message)
            },
        )
        .await;
        assert!(!message.is_empty(), "{name}: Ready=False without a message");
    }
    // Past the next slot of the valid schedules.
    let started = tokio::time::Instant::now();
    tokio::time::sleep(Duration::from_secs(65)).await;
    let jobs = env
        .api::<k8s_openapi::api::batch::v1::Job>()
        .list(&ListParams::default())
        .await
        .expect("list Jobs")
        .items;
    assert!(jobs.is_empty(), "Jobs were created: {jobs:?}");
    let events = env
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .expect("list Events")
        .items;
    for (name, row) in &stored {
        let reason = row.reason.expect("a reason");
        let warnings: Vec<&Event> = events
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
            .filter(|e| e.type_.as_deref() == Some("Warning"))
            .collect();
        assert_eq!(warnings.len(), 1, "{name}: one Warning Event: {warnings:?}");
        assert_eq!(warnings[0].reason.as_deref(), Some(reason), "{name}");
        let count = warnings[0].series.as_ref().map_or(1, |s| s.count);
        assert_eq!(count, 1, "{name}: the Warning repeats: {warnings:?}");
    }
    let metrics = manager.metrics_text().await;
    let errors = metric_sum(&metrics, "kronjob_reconcile_errors_total", &[]);
    assert_eq!(errors, 0.0, "{metrics}");
    let reconciles = metric_sum(&metrics, "kronjob_reconciles_total", &[]);
    // One reconcile for each creation; a second for a status write seen late at most.
    let limit = 2.0 * stored.len() as f64;
    assert!(
        reconciles <= limit,
        "{reconciles} reconciles of {} CronJobs in {:?}: a loop",
        stored.len(),
        started.elapsed()
    );
    // Start, stop and at most a line per CronJob: no line per retry.
    let log = manager.log();
    assert!(
        log.lines().count() <= stored.len() + 8,
        "a noisy log:\n{log}"
    );
    assert_eq!(manager.terminate(), Some(0), "still running, stops cleanly");
    env.cleanup().await;
}

/// (d) A valid update is allowed; updates that make the CronJob invalid are refused (by the
/// webhook for what the schema cannot see). A CronJob stored while the webhook was absent,
/// with an unknown zone, can still be changed elsewhere (the zone is judged only when it
/// changes, as upstream), but not given another unknown zone.
pub async fn updates_are_validated_and_stored_objects_ratchet(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let api = dynamic(&env);
    let mut legacy = valid("legacy");
    set(&mut legacy, "/spec/timeZone", json!("Mars/Olympus_Mons"));
    create(&api, &legacy)
        .await
        .expect("stored without the webhook");
    let webhook = Webhook::start(&ctx, &env, &[]).await;
    create(&api, &valid("upd")).await.expect("a valid CronJob");
    let pp = PatchParams::default();
    let patch = |spec: Value| Patch::Merge(json!({"spec": spec}));
    api.patch(
        "upd",
        &pp,
        &patch(json!({"schedule": "*/5 * * * *", "suspend": true})),
    )
    .await
    .expect("a valid update is allowed");
    let refused = [
        (json!({"schedule": "61 * * * *"}), "spec.schedule", true),
        (json!({"schedule": "0 0 * * 7"}), "spec.schedule", true),
        (
            json!({"timeZone": "Mars/Olympus_Mons"}),
            "spec.timeZone",
            true,
        ),
        (
            json!({"startingDeadlineSeconds": -5}),
            "spec.startingDeadlineSeconds",
            false,
        ),
        (
            json!({"concurrencyPolicy": "Sometimes"}),
            "spec.concurrencyPolicy",
            false,
        ),
        (json!({"queue": {"maxQueued": 2}}), "spec.queue", false),
        (
            json!({"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.36", "env": [{"name": "MY=VAR"}]}]}}}}}),
            "spec.jobTemplate.spec.template.spec.containers[0].env[0].name",
            true,
        ),
    ];
    for (spec, field, by_webhook) in refused {
        let err = api
            .patch("upd", &pp, &patch(spec.clone()))
            .await
            .expect_err(&format!("{spec} is refused"));
        let kube::Error::Api(status) = err else {
            panic!("{spec}: {err}");
        };
        assert!(
            status.message.contains(&format!("{field}: ")),
            "{spec}: {}",
            status.message
        );
        assert_eq!(
            status.message.contains("admission webhook"),
            by_webhook,
            "{spec}: {}",
            status.message
        );
    }
    let stored = api.get("upd").await.expect("get");
    assert_eq!(
        stored.data["spec"]["schedule"], "*/5 * * * *",
        "{}",
        stored.data
    );
    assert!(stored.data["spec"]["startingDeadlineSeconds"].is_null());

    api.patch("legacy", &pp, &patch(json!({"suspend": true})))
        .await
        .expect("an unchanged zone is not judged again");
    let err = api
        .patch("legacy", &pp, &patch(json!({"timeZone": "Mars/Phobos"})))
        .await
        .expect_err("a changed zone is judged");
    assert!(err.to_string().contains("spec.timeZone: "), "{err}");
    webhook.uninstall().await;
    env.cleanup().await;
}

/// (e) Requests that are not admission reviews, POSTed over TLS to the webhook's port, get 400
/// with the reason, and are counted; the webhook keeps answering the API server.
pub async fn malformed_reviews_get_400_with_a_reason(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let webhook = Webhook::start(&ctx, &env, &[]).await;
    let review = crate::webhook::review("CREATE", &env.namespace, &valid("x"), None);
    let mut no_request = review.clone();
    remove(&mut no_request, "/request");
    let mut not_an_object = review.clone();
    set(&mut not_an_object, "/request/object", json!("a string"));
    let cases = [
        (
            "not JSON",
            "{\"apiVersion\": ".to_string(),
            "request body is not JSON",
        ),
        (
            "another kind",
            json!({"apiVersion": "v1", "kind": "Pod"}).to_string(),
            "expected an admission.k8s.io/v1 AdmissionReview",
        ),
        (
            "no request",
            no_request.to_string(),
            "AdmissionReview has no request",
        ),
        (
            "request not an object",
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": 5})
                .to_string(),
            "malformed AdmissionReview request",
        ),
    ];
    for path in [
        "/validate-batch-kronjob-dev-v1-cronjob",
        "/mutate-batch-kronjob-dev-v1-cronjob",
    ] {
        for (what, body, reason) in &cases {
            let (status, answer) =
                crate::webhook::post(&webhook.ca, webhook.port, "127.0.0.1", path, body.clone())
                    .await;
            assert_eq!(status, 400, "{path} {what}: {answer}");
            let answer: Value = serde_json::from_str(&answer).expect("a JSON error");
            let error = answer["error"].as_str().unwrap_or_default();
            assert!(error.contains(reason), "{path} {what}: {answer}");
        }
    }
    // A review whose object is not an object is well-formed: it is answered, and denied.
    let (status, answer) = crate::webhook::post(
        &webhook.ca,
        webhook.port,
        "127.0.0.1",
        "/validate-batch-kronjob-dev-v1-cronjob",
        not_an_object.to_string(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let answer: Value = serde_json::from_str(&answer).expect("an AdmissionReview");
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    assert_eq!(answer["response"]["status"]["code"], 400, "{answer}");

    let metrics = webhook.manager.metrics_text().await;
    let bad = metric_sum(
        &metrics,
        "kronjob_webhook_request_duration_seconds_count",
        &[("result", "bad_request")],
    );
    assert_eq!(bad, 2.0 * cases.len() as f64, "{metrics}");
    create(&dynamic(&env), &valid("after"))
        .await
        .expect("the webhook still admits");
    webhook.uninstall().await;
    env.cleanup().await;
}
