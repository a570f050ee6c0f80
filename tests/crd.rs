//! The generated CRD: names, fields, defaults, columns, rules, size, freshness of the committed
//! file, structural schema, and lossless round-trip of a full Job template.

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::JobTemplateSpec;
use kronjob::api::crdgen::{CRD_FILE, crd, crd_yaml};
use kronjob::api::rules::{Check, rules};
use serde_json::{Value, json};

#[path = "support/mod.rs"]
mod support;

use support::fixtures::{CronJobFixture, cronjob, manifest};

fn schema() -> Value {
    let crd = crd().expect("CRD generates");
    let version = &crd.spec.versions[0];
    serde_json::to_value(
        version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("schema"),
    )
    .expect("schema is JSON")
}

fn node<'a>(schema: &'a Value, path: &[&str]) -> &'a Value {
    let mut n = schema;
    for key in path {
        if n.get("properties").is_none() && n.get("items").is_some() {
            n = &n["items"];
        }
        n = n
            .get("properties")
            .and_then(|p| p.get(*key))
            .unwrap_or_else(|| panic!("no schema node at {path:?} (stopped at {key})"));
    }
    n
}

#[test]
fn names_scope_and_subresources() {
    let crd = crd().expect("CRD generates");
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("cronjobs.batch.kronjob.dev")
    );
    assert_eq!(crd.spec.group, "batch.kronjob.dev");
    assert_eq!(crd.spec.scope, "Namespaced");
    let names = &crd.spec.names;
    assert_eq!(names.kind, "CronJob");
    assert_eq!(names.plural, "cronjobs");
    assert_eq!(names.singular.as_deref(), Some("cronjob"));
    assert_eq!(names.short_names.as_deref(), Some(&["kcj".to_string()][..]));
    assert_eq!(
        names.categories.as_deref(),
        Some(&["kronjob".to_string()][..])
    );
    assert_eq!(crd.spec.versions.len(), 1);
    let v = &crd.spec.versions[0];
    assert_eq!(v.name, "v1");
    assert!(v.served && v.storage);
    assert!(
        v.subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some(),
        "status subresource"
    );
}

#[test]
fn printer_columns() {
    let crd = crd().expect("CRD generates");
    let cols: Vec<(String, String, String)> = crd.spec.versions[0]
        .additional_printer_columns
        .as_ref()
        .expect("columns")
        .iter()
        .map(|c| (c.name.to_uppercase(), c.type_.clone(), c.json_path.clone()))
        .collect();
    let want = [
        ("SCHEDULE", "string", ".status.schedule"),
        ("TIMEZONE", "string", ".spec.timeZone"),
        ("SUSPEND", "boolean", ".spec.suspend"),
        ("ACTIVE", "integer", ".status.activeCount"),
        ("QUEUED", "integer", ".status.queuedCount"),
        ("LAST SCHEDULE", "date", ".status.lastScheduleTime"),
        ("NEXT SCHEDULE", "string", ".status.nextScheduleTime"),
        ("AGE", "date", ".metadata.creationTimestamp"),
    ];
    let want: Vec<(String, String, String)> = want
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect();
    assert_eq!(cols, want);
}

/// kubectl renders a `date` column as the time elapsed since it, and `<invalid>` when that is
/// negative: a date column may only show a time that has already happened.
#[test]
fn no_date_column_shows_a_time_that_can_lie_in_the_future() {
    // Times that record something that happened: the object's creation, a slot that was run,
    // a Job that succeeded.
    let past_only = BTreeSet::from([
        ".metadata.creationTimestamp",
        ".status.lastScheduleTime",
        ".status.lastSuccessfulTime",
    ]);
    let crd = crd().expect("CRD generates");
    for version in &crd.spec.versions {
        for column in version.additional_printer_columns.iter().flatten() {
            if column.type_ == "date" {
                assert!(
                    past_only.contains(column.json_path.as_str()),
                    "{} ({}) is a date column over a time that can lie in the future",
                    column.name,
                    column.json_path
                );
            }
        }
    }
}

#[test]
fn spec_fields_types_defaults_and_required() {
    let s = schema();
    let spec = node(&s, &["spec"]);
    let required: BTreeSet<&str> = spec
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    // `schedule` or `schedules`, `jobTemplate` or `workloadTemplate`: rules say which (exactly
    // one of each).
    assert!(required.is_empty(), "{required:?}");
    assert_eq!(node(&s, &["spec", "schedule"])["type"], "string");
    let schedules = node(&s, &["spec", "schedules"]);
    assert_eq!(schedules["type"], "array");
    assert_eq!(schedules["items"]["type"], "string");
    assert_eq!(schedules["maxItems"], 16);
    assert_eq!(schedules["items"]["maxLength"], 1024);
    // Not nullable: the API server prunes a `null` there, so `has()` and the webhook agree.
    for field in ["schedule", "schedules"] {
        assert!(
            node(&s, &["spec", field]).get("nullable").is_none(),
            "{field}"
        );
    }
    let failures = node(
        &s,
        &["spec", "failurePolicy", "suspendAfterConsecutiveFailures"],
    );
    assert_eq!(failures["type"], "integer");
    assert_eq!(failures["minimum"].as_f64(), Some(1.0));
    assert_eq!(node(&s, &["spec", "timeZone"])["type"], "string");
    let deadline = node(&s, &["spec", "startingDeadlineSeconds"]);
    assert_eq!(deadline["type"], "integer");
    assert_eq!(deadline["format"], "int64");
    assert_eq!(deadline["minimum"].as_f64(), Some(0.0));
    let policy = node(&s, &["spec", "concurrencyPolicy"]);
    assert_eq!(
        policy["enum"],
        json!(["Allow", "Forbid", "Replace", "Enqueue"])
    );
    let max_queued = node(&s, &["spec", "queue", "maxQueued"]);
    assert_eq!(max_queued["minimum"].as_f64(), Some(1.0));
    assert_eq!(max_queued["maximum"].as_f64(), Some(100.0));
    assert_eq!(
        node(&s, &["spec", "queue", "whenFull"])["enum"],
        json!(["DropOldest", "DropNewest"])
    );
    assert_eq!(policy["default"], "Allow");
    assert_eq!(node(&s, &["spec", "suspend"])["default"], false);
    for (field, default) in [
        ("successfulJobsHistoryLimit", 3),
        ("failedJobsHistoryLimit", 1),
    ] {
        let n = node(&s, &["spec", field]);
        assert_eq!(n["default"], default, "{field}");
        assert_eq!(n["format"], "int32", "{field}");
        assert_eq!(n["minimum"].as_f64(), Some(0.0), "{field}");
    }
    // Our own fields keep their documentation for `kubectl explain`.
    for field in [
        "schedule",
        "schedules",
        "timeZone",
        "jobTemplate",
        "concurrencyPolicy",
        "failurePolicy",
    ] {
        assert!(
            node(&s, &["spec", field])["description"].is_string(),
            "{field} has a description"
        );
    }
}

#[test]
fn status_fields() {
    let s = schema();
    for field in [
        "active",
        "activeCount",
        "lastScheduleTime",
        "lastSuccessfulTime",
        "lastFailureTime",
        "nextScheduleTime",
        "observedGeneration",
        "schedule",
        "consecutiveFailures",
        "conditions",
    ] {
        let n = node(&s, &["status", field]);
        assert!(n["description"].is_string(), "status.{field} documented");
    }
    assert_eq!(node(&s, &["status", "activeCount"])["type"], "integer");
    assert_eq!(
        node(&s, &["status", "lastScheduleTime"])["format"],
        "date-time"
    );
    let conditions = node(&s, &["status", "conditions"]);
    assert_eq!(conditions["x-kubernetes-list-type"], "map");
    assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
    // batch/v1 omits `active` when no Job runs: the API server must not default it to [].
    assert!(
        node(&s, &["status", "active"]).get("default").is_none(),
        "status.active has a schema default"
    );
}

#[test]
fn committed_crd_is_fresh_and_small() {
    let path = format!("{}/crd/{CRD_FILE}", env!("CARGO_MANIFEST_DIR"));
    let committed = std::fs::read_to_string(&path).expect("crd/ file exists");
    let generated = crd_yaml().expect("YAML");
    assert!(
        committed == generated,
        "{path} is stale: run `just generate` (or `kronjob crd > {path}`)"
    );
    assert!(
        generated.len() < 200_000,
        "the CRD is {} bytes; client-side kubectl apply needs it well under 262,144",
        generated.len()
    );
    // The YAML parses back to the same CRD.
    let parsed: Value = serde_yaml_ng::from_str(&generated).expect("YAML parses");
    let direct = serde_json::to_value(crd().expect("CRD")).expect("JSON");
    assert_eq!(parsed, direct);
}

#[test]
fn committed_calendar_crd_is_fresh_and_its_rules_are_the_exclusions() {
    use kronjob::api::crdgen::{CALENDAR_CRD_FILE, calendar_crd_yaml};
    for dir in ["crd", "config/helm/kronjob/crds"] {
        let path = format!("{}/{dir}/{CALENDAR_CRD_FILE}", env!("CARGO_MANIFEST_DIR"));
        let committed = std::fs::read_to_string(&path).expect("committed Calendar CRD");
        assert!(
            committed == calendar_crd_yaml().expect("YAML"),
            "{path} is stale: run `just generate`"
        );
    }
    let crd: Value = serde_yaml_ng::from_str(&calendar_crd_yaml().expect("YAML")).expect("YAML");
    assert_eq!(crd["spec"]["scope"], "Cluster");
    assert_eq!(crd["spec"]["names"]["shortNames"], json!(["kcal"]));
    let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    assert_structural(schema, "");
    let spec = &schema["properties"]["spec"]["properties"];
    assert_eq!(spec["dates"]["maxItems"], 366);
    assert_eq!(spec["dates"]["items"]["format"], "date");
    assert_eq!(spec["ranges"]["maxItems"], 100);
    assert_eq!(spec["yearly"]["maxItems"], 100);
    // The rules agree with the Rust predicates on a corpus.
    let base = json!({"apiVersion": "batch.kronjob.dev/v1", "kind": "Calendar",
        "metadata": {"name": "holidays"}, "spec": {"dates": ["2026-12-24"],
        "ranges": [{"from": "2026-12-24", "to": "2026-12-26"}], "yearly": ["12-25"]}});
    let bad_range = {
        let mut o = base.clone();
        o["spec"]["ranges"] = json!([{"from": "2026-12-24", "to": "2026-12-01"}]);
        o
    };
    let bad_yearly = {
        let mut o = base.clone();
        o["spec"]["yearly"] = json!(["04-31"]);
        o
    };
    for (object, failing) in [(&base, 0), (&bad_range, 1), (&bad_yearly, 1)] {
        let cel = cel_failures(schema, object);
        let rust: BTreeSet<(String, String)> = kronjob::api::rules::calendar_rules()
            .iter()
            .filter_map(|rule| match rule.check {
                Check::Cel { rule: cel, .. } => Some((rule, cel)),
                _ => None,
            })
            .flat_map(|(rule, cel)| {
                rule.locations(object)
                    .into_iter()
                    .filter(|(_, at)| !rule.holds(at))
                    .map(move |(path, _)| (path, cel.to_string()))
            })
            .collect();
        assert_eq!(cel, rust, "{object}");
        assert_eq!(cel.len(), failing, "{object}");
    }
}

#[test]
fn helm_chart_crd_copy_is_fresh_when_present() {
    let chart = format!(
        "{}/config/helm/kronjob/crds/{CRD_FILE}",
        env!("CARGO_MANIFEST_DIR")
    );
    if let Ok(copy) = std::fs::read_to_string(&chart) {
        assert!(
            copy == crd_yaml().expect("YAML"),
            "{chart} is stale: run `just generate`"
        );
    }
}

/// Every node of a structural schema has a type (or is int-or-string / preserve-unknown),
/// arrays have items, and nothing uses $ref or the forbidden combinators with types.
fn assert_structural(n: &Value, path: &str) {
    let obj = n
        .as_object()
        .unwrap_or_else(|| panic!("{path}: not an object"));
    assert!(!obj.contains_key("$ref"), "{path}: $ref");
    for comb in ["anyOf", "oneOf", "allOf", "not"] {
        assert!(!obj.contains_key(comb), "{path}: {comb}");
    }
    let int_or_string = obj.get("x-kubernetes-int-or-string") == Some(&json!(true));
    let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    if int_or_string {
        assert!(
            !obj.contains_key("type"),
            "{path}: int-or-string with a type"
        );
    } else {
        assert!(obj.contains_key("type") || preserve, "{path}: missing type");
    }
    if obj.get("type") == Some(&json!("array")) {
        assert!(obj.contains_key("items"), "{path}: array without items");
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            assert_structural(v, &format!("{path}.{k}"));
        }
    }
    if let Some(items) = obj.get("items") {
        assert_structural(items, &format!("{path}[]"));
    }
    if let Some(add) = obj.get("additionalProperties").filter(|a| a.is_object()) {
        assert_structural(add, &format!("{path}{{}}"));
    }
}

#[test]
fn schema_is_structural() {
    let s = schema();
    assert_structural(&s, "");
}

/// Prune `value` like the API server does with a structural schema: unknown object fields go.
fn prune(value: &Value, schema: &Value) -> Value {
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true))
        && schema.get("properties").is_none()
    {
        return value.clone();
    }
    match value {
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                if let Some(prop) = schema.get("properties").and_then(|p| p.get(k)) {
                    out.insert(k.clone(), prune(v, prop));
                } else if let Some(add) = schema.get("additionalProperties") {
                    if add.is_object() {
                        out.insert(k.clone(), prune(v, add));
                    } else if add == &json!(true) {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| schema.get("items").map_or(v.clone(), |s| prune(v, s)))
                .collect(),
        ),
        other => other.clone(),
    }
}

fn full_job_template() -> Value {
    json!({
        "metadata": {
            "labels": {"app": "report", "tier": "batch"},
            "annotations": {"example.com/owner": "team-a"}
        },
        "spec": {
            "backoffLimit": 4,
            "activeDeadlineSeconds": 600,
            "ttlSecondsAfterFinished": 3600,
            "completions": 1,
            "parallelism": 1,
            "podFailurePolicy": {"rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
            ]},
            "template": {
                "metadata": {"labels": {"app": "report"}, "annotations": {"sidecar": "off"}},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": "reporter",
                    "containers": [{
                        "name": "main",
                        "image": "busybox:1.36",
                        "command": ["/bin/sh", "-c"],
                        "args": ["date; echo hello"],
                        "env": [
                            {"name": "MODE", "value": "full"},
                            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "tok", "key": "t"}}}
                        ],
                        "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "1", "memory": "64Mi"}},
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "cfg", "mountPath": "/etc/cfg", "readOnly": true}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
                        "readinessProbe": {"tcpSocket": {"port": 8080}},
                        "securityContext": {"runAsNonRoot": true, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}
                    }],
                    "volumes": [
                        {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
                        {"name": "cfg", "configMap": {"name": "report-config", "items": [{"key": "a", "path": "a.conf"}]}},
                        {"name": "pvc", "persistentVolumeClaim": {"claimName": "reports"}}
                    ],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}
                    ]}}},
                    "tolerations": [{"key": "batch", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
                    "nodeSelector": {"pool": "batch"}
                }
            }
        }
    })
}

#[test]
fn full_job_template_round_trips_through_serde_and_schema() {
    let template = full_job_template();
    // serde: k8s-openapi's JobTemplateSpec keeps every field.
    let typed: JobTemplateSpec = serde_json::from_value(template.clone()).expect("decodes");
    assert_eq!(serde_json::to_value(&typed).expect("encodes"), template);
    // schema: pruning against our CRD keeps every field.
    let s = schema();
    let jt = node(&s, &["spec", "jobTemplate"]);
    assert_eq!(prune(&template, jt), template);
    // and the pruner does prune: an unknown field is dropped.
    let mut typo = template.clone();
    typo["spec"]["backofLimit"] = json!(3);
    assert_eq!(prune(&typo, jt), template);
}

#[test]
fn int_or_string_and_embedded_metadata() {
    let s = schema();
    let container = &[
        "spec",
        "jobTemplate",
        "spec",
        "template",
        "spec",
        "containers",
    ];
    let mut limits = container.to_vec();
    limits.extend(["resources", "limits"]);
    let limits = node(&s, &limits);
    assert_eq!(
        limits["additionalProperties"]["x-kubernetes-int-or-string"],
        true
    );
    let mut port = container.to_vec();
    port.extend(["livenessProbe", "httpGet", "port"]);
    assert_eq!(node(&s, &port)["x-kubernetes-int-or-string"], true);
    for meta in [
        &["spec", "jobTemplate", "metadata"][..],
        &["spec", "jobTemplate", "spec", "template", "metadata"][..],
    ] {
        let mut p = meta.to_vec();
        p.push("labels");
        assert_eq!(node(&s, &p)["type"], "object");
        p.pop();
        p.push("annotations");
        assert_eq!(node(&s, &p)["type"], "object");
    }
    // Embedded types carry no descriptions below their own; that keeps the CRD small.
    let mut jt = node(&s, &["spec", "jobTemplate"]).clone();
    assert!(jt["description"].is_string());
    jt.as_object_mut().map(|m| m.remove("description"));
    assert!(
        !serde_json::to_string(&jt)
            .expect("json")
            .contains("\"description\"")
    );
}

#[test]
fn ephemeral_containers_are_rejected_by_the_schema() {
    let s = schema();
    let n = node(
        &s,
        &[
            "spec",
            "jobTemplate",
            "spec",
            "template",
            "spec",
            "ephemeralContainers",
        ],
    );
    assert_eq!(n["maxItems"], 0);
}

/// A CronJob as its author writes it, with the full Job template.
fn valid_cronjob() -> Value {
    let mut cj = cronjob("*/5 * * * *").named("report").zone("Europe/Berlin");
    cj.spec.job_template = serde_json::from_value(full_job_template()).expect("a Job template");
    manifest(&cj)
}

/// (reported field, CEL rule) of every failing CEL rule, according to kube-cel on the generated
/// CRD.
fn cel_failures(schema: &Value, object: &Value) -> BTreeSet<(String, String)> {
    match kube::core::cel::Validator::new().validate(schema, object, None) {
        Ok(()) => BTreeSet::new(),
        Err(errors) => errors
            .into_vec()
            .into_iter()
            .map(|e| (e.field_path.trim_start_matches('.').to_string(), e.rule))
            .collect(),
    }
}

/// The same, according to the Rust predicates of the rule table: the field is the one the
/// webhook reports, which the CRD's `fieldPath` makes the API server report too.
fn rust_failures(object: &Value) -> BTreeSet<(String, String)> {
    rules()
        .iter()
        .filter_map(|rule| {
            let Check::Cel { rule: cel, .. } = rule.check else {
                return None;
            };
            let failing: Vec<(String, String)> = rule
                .locations(object)
                .into_iter()
                .filter(|(_, at)| !rule.holds(at))
                .map(|(path, _)| (path, cel.to_string()))
                .collect();
            Some(failing)
        })
        .flatten()
        .collect()
}

#[test]
fn cel_rules_and_rust_checks_agree() {
    let s = schema();
    let base = valid_cronjob();
    assert_eq!(cel_failures(&s, &base), BTreeSet::new(), "base is valid");
    type Edit = fn(&mut Value);
    let edits: Vec<(&str, Edit)> = vec![
        ("name 52", |o| o["metadata"]["name"] = json!("a".repeat(52))),
        ("name 53", |o| o["metadata"]["name"] = json!("a".repeat(53))),
        ("empty schedule", |o| o["spec"]["schedule"] = json!("")),
        ("TZ=", |o| o["spec"]["schedule"] = json!("TZ=UTC * * * * *")),
        ("CRON_TZ=", |o| {
            o["spec"]["schedule"] = json!("CRON_TZ=Europe/Paris 0 * * * *")
        }),
        ("empty zone", |o| o["spec"]["timeZone"] = json!("")),
        ("Local", |o| o["spec"]["timeZone"] = json!("Local")),
        ("LOCAL", |o| o["spec"]["timeZone"] = json!("LOCAL")),
        ("dotdot", |o| o["spec"]["timeZone"] = json!("../etc/passwd")),
        ("dash", |o| o["spec"]["timeZone"] = json!("-Europe/Berlin")),
        ("long part", |o| {
            o["spec"]["timeZone"] = json!("Europe/Aaaaaaaaaaaaaaa")
        }),
        ("space", |o| {
            o["spec"]["timeZone"] = json!("Europe/New York")
        }),
        ("good zone", |o| {
            o["spec"]["timeZone"] = json!("America/Argentina/Salta")
        }),
        ("selector", |o| {
            o["spec"]["jobTemplate"]["spec"]["selector"] = json!({"matchLabels": {"a": "b"}})
        }),
        ("manualSelector true", |o| {
            o["spec"]["jobTemplate"]["spec"]["manualSelector"] = json!(true)
        }),
        ("manualSelector false", |o| {
            o["spec"]["jobTemplate"]["spec"]["manualSelector"] = json!(false)
        }),
        ("no restartPolicy", |o| {
            if let Some(spec) = o["spec"]["jobTemplate"]["spec"]["template"]["spec"].as_object_mut()
            {
                spec.remove("restartPolicy");
            }
        }),
        ("Always", |o| {
            o["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = json!("Always")
        }),
        ("OnFailure", |o| {
            o["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] =
                json!("OnFailure")
        }),
        ("schedules instead", |o| {
            let spec = o["spec"].as_object_mut().expect("spec");
            spec.remove("schedule");
            spec.insert("schedules".into(), json!(["*/2 * * * *", "*/3 * * * *"]));
        }),
        ("both", |o| o["spec"]["schedules"] = json!(["0 * * * *"])),
        ("neither", |o| {
            o["spec"].as_object_mut().expect("spec").remove("schedule");
        }),
        ("an empty list", |o| {
            o["spec"].as_object_mut().expect("spec").remove("schedule");
            o["spec"]["schedules"] = json!([]);
        }),
        ("@every with another", |o| {
            o["spec"].as_object_mut().expect("spec").remove("schedule");
            o["spec"]["schedules"] = json!(["@every 1h", "0 * * * *"]);
        }),
        ("@every alone in a list", |o| {
            o["spec"].as_object_mut().expect("spec").remove("schedule");
            o["spec"]["schedules"] = json!(["@every 1h"]);
        }),
        ("bad entries", |o| {
            o["spec"].as_object_mut().expect("spec").remove("schedule");
            o["spec"]["schedules"] = json!(["0 * * * *", "", "TZ=UTC 0 * * * *"]);
        }),
        ("a queue without Enqueue", |o| {
            o["spec"]["concurrencyPolicy"] = json!("Forbid");
            o["spec"]["queue"] = json!({"maxQueued": 2});
        }),
        ("a queue with Enqueue", |o| {
            o["spec"]["concurrencyPolicy"] = json!("Enqueue");
            o["spec"]["queue"] = json!({"maxQueued": 2, "whenFull": "DropNewest"});
        }),
        ("good exclusions", |o| {
            o["spec"]["exclusions"] = json!({"dates": ["2026-12-24"], "ranges": [{"from": "2026-12-24", "to": "2026-12-26"}], "yearly": ["12-25", "02-29"]});
            o["spec"]["calendars"] = json!(["holidays", "de.by"]);
            o["spec"]["notBefore"] = json!("2026-01-01T00:00:00Z");
            o["spec"]["notAfter"] = json!("2026-12-31T23:00:00Z");
        }),
        ("a range ending before it starts", |o| {
            o["spec"]["exclusions"] =
                json!({"ranges": [{"from": "2026-12-24", "to": "2026-12-23"}]});
        }),
        ("bad yearly days", |o| {
            o["spec"]["exclusions"] = json!({"yearly": ["02-30", "13-01", "4-1", "12-25"]});
        }),
        ("bad calendar names", |o| {
            o["spec"]["calendars"] = json!(["Holidays", "-x", "ok"])
        }),
        ("a window ending before it starts", |o| {
            o["spec"]["notBefore"] = json!("2026-01-02T00:00:00Z");
            o["spec"]["notAfter"] = json!("2026-01-01T00:00:00Z");
        }),
        ("an empty window", |o| {
            o["spec"]["notBefore"] = json!("2026-01-01T00:00:00Z");
            o["spec"]["notAfter"] = json!("2026-01-01T00:00:00Z");
        }),
        ("a workload instead", |o| {
            let spec = o["spec"].as_object_mut().expect("spec");
            spec.remove("jobTemplate");
            spec.insert(
                "workloadTemplate".into(),
                json!({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": {"replicatedJobs": []}}),
            );
        }),
        ("a workload of a core kind, with a rule", |o| {
            let spec = o["spec"].as_object_mut().expect("spec");
            spec.remove("jobTemplate");
            spec.insert(
                "workloadTemplate".into(),
                json!({"apiVersion": "v1", "kind": "Pod"}),
            );
            spec.insert(
                "completion".into(),
                json!({"succeeded": "self.status.phase == 'Succeeded'", "failed": "self.status.phase == 'Failed'"}),
            );
        }),
        ("both templates", |o| {
            o["spec"]["workloadTemplate"] = json!({"apiVersion": "ray.io/v1", "kind": "RayJob"});
        }),
        ("no template", |o| {
            o["spec"]
                .as_object_mut()
                .expect("spec")
                .remove("jobTemplate");
        }),
        ("a completion rule for a Job", |o| {
            o["spec"]["completion"] = json!({"succeeded": "true", "failed": "false"});
        }),
        ("bad workload names", |o| {
            let spec = o["spec"].as_object_mut().expect("spec");
            spec.remove("jobTemplate");
            spec.insert(
                "workloadTemplate".into(),
                json!({"apiVersion": "Ray.IO/v1", "kind": "Ray-Job"}),
            );
        }),
        ("a Job as a workload", |o| {
            let spec = o["spec"].as_object_mut().expect("spec");
            spec.remove("jobTemplate");
            spec.insert(
                "workloadTemplate".into(),
                json!({"apiVersion": "batch/v1", "kind": "Job"}),
            );
        }),
        ("a CronJob as a workload", |o| {
            let spec = o["spec"].as_object_mut().expect("spec");
            spec.remove("jobTemplate");
            spec.insert(
                "workloadTemplate".into(),
                json!({"apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob"}),
            );
        }),
        ("everything", |o| {
            o["metadata"]["name"] = json!("b".repeat(60));
            o["spec"]["schedule"] = json!("TZ=x");
            o["spec"]["timeZone"] = json!("local");
            o["spec"]["jobTemplate"]["spec"]["selector"] = json!({});
            o["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        }),
    ];
    let mut failing_cases = 0;
    for (name, edit) in edits {
        let mut object = base.clone();
        edit(&mut object);
        let cel = cel_failures(&s, &object);
        let rust = rust_failures(&object);
        assert_eq!(
            cel, rust,
            "case {name}: CEL (left) and Rust (right) disagree"
        );
        if !cel.is_empty() {
            failing_cases += 1;
        }
    }
    assert!(failing_cases >= 19, "the corpus exercises the rules");
}

#[test]
fn every_cel_rule_is_exercised_by_some_failure() {
    // A rule whose CEL never fails on anything would be dead; check each rule's predicate
    // rejects at least its canonical bad value, so the agreement test is meaningful.
    let bad: Vec<(&[&str], Value)> = vec![
        (&[], json!({"metadata": {"name": "x".repeat(53)}})),
        (&["spec"], json!({})),
        (&["spec"], json!({"queue": {}})),
        (
            &["spec"],
            json!({"jobTemplate": {}, "workloadTemplate": {}}),
        ),
        (&["spec"], json!({"jobTemplate": {}, "completion": {}})),
        (
            &["spec", "workloadTemplate"],
            json!({"apiVersion": "batch/v1", "kind": "Job"}),
        ),
        (
            &["spec", "workloadTemplate"],
            json!({"apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob"}),
        ),
        (&["spec", "workloadTemplate", "apiVersion"], json!("v1x")),
        (&["spec", "workloadTemplate", "kind"], json!("Ray-Job")),
        (&["spec"], json!({"schedule": "x", "schedules": ["x"]})),
        (&["spec", "schedules"], json!([])),
        (
            &["spec", "exclusions", "ranges", "*"],
            json!({"from": "2026-01-02", "to": "2026-01-01"}),
        ),
        (&["spec", "exclusions", "yearly", "*"], json!("02-30")),
        (&["spec", "calendars", "*"], json!("Holidays")),
        (
            &["spec"],
            json!({"notBefore": "2026-01-02T00:00:00Z", "notAfter": "2026-01-01T00:00:00Z"}),
        ),
        (&["spec", "schedules"], json!(["@every 1h", "0 * * * *"])),
        (&["spec", "schedules", "*"], json!("")),
        (&["spec", "schedules", "*"], json!("TZ=UTC 0 * * * *")),
        (&["spec", "schedule"], json!("")),
        (&["spec", "schedule"], json!("TZ=UTC 0 * * * *")),
        (&["spec", "timeZone"], json!("")),
        (&["spec", "timeZone"], json!("Local")),
        (&["spec", "timeZone"], json!("../x")),
        (&["spec", "jobTemplate", "spec", "selector"], json!({})),
        (
            &["spec", "jobTemplate", "spec", "manualSelector"],
            json!(true),
        ),
        (
            &["spec", "jobTemplate", "spec", "template", "spec"],
            json!({}),
        ),
    ];
    for rule in rules() {
        if let Check::Cel { rule: cel, .. } = rule.check {
            let rejected = bad.iter().any(|(at, v)| *at == rule.at && !rule.holds(v));
            assert!(rejected, "rule {cel} at {:?} is never exercised", rule.at);
        }
    }
}

#[test]
fn samples_decode_pass_the_schema_rules_and_lose_nothing() {
    let s = schema();
    let dir = format!("{}/config/samples", env!("CARGO_MANIFEST_DIR"));
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("samples dir") {
        let path = entry.expect("entry").path();
        let name = path.display().to_string();
        if !name.ends_with(".yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read sample");
        let object: Value = serde_yaml_ng::from_str(&text).expect("sample is YAML");
        let typed: kronjob::api::CronJob =
            serde_json::from_value(object.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(typed.metadata.name.is_some(), "{name} has a name");
        assert_eq!(cel_failures(&s, &object), BTreeSet::new(), "{name}");
        assert_eq!(
            prune(&object["spec"], node(&s, &["spec"])),
            object["spec"],
            "{name}"
        );
        seen += 1;
    }
    assert!(seen >= 2, "samples found: {seen}");
}

#[test]
fn schema_defaults_equal_the_webhook_defaults() {
    let schema = schema();
    for d in kronjob::api::defaults::spec_defaults() {
        let node = node(&schema, &["spec", d.field]);
        assert_eq!(
            node.get("default"),
            Some(&d.value),
            "schema default of spec.{}",
            d.field
        );
    }
}
