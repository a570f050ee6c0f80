//! The manager's RBAC in config/rbac grants every call the code makes (a missing verb is a 403
//! in the cluster, which no unit test would otherwise see).

use serde::Deserialize;
use serde_json::Value;

fn rules(file: &str) -> Vec<Value> {
    let path = format!("{}/config/rbac/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("read RBAC");
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).expect("YAML document"))
        .filter(|doc| matches!(doc["kind"].as_str(), Some("ClusterRole" | "Role")))
        .filter(|doc| doc["metadata"]["name"] == "kronjob-manager")
        .flat_map(|doc| doc["rules"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn grants(rules: &[Value], group: &str, resource: &str, verb: &str, name: Option<&str>) -> bool {
    let has = |rule: &Value, key: &str, want: &str| {
        rule[key]
            .as_array()
            .is_some_and(|list| list.iter().any(|v| v == want || v == "*"))
    };
    rules.iter().any(|rule| {
        has(rule, "apiGroups", group)
            && has(rule, "resources", resource)
            && has(rule, "verbs", verb)
            && match (rule.get("resourceNames"), name) {
                (None, _) => true,
                (Some(names), Some(n)) => {
                    names.as_array().is_some_and(|l| l.iter().any(|v| v == n))
                }
                (Some(_), None) => false,
            }
    })
}

#[test]
fn cluster_role_grants_what_the_controllers_and_webhook_call() {
    let cluster = rules("role.yaml");
    let needed: &[(&str, &str, &[&str], Option<&str>)] = &[
        (
            "batch.kronjob.dev",
            "cronjobs",
            &["get", "list", "watch"],
            None,
        ),
        ("batch.kronjob.dev", "cronjobs/status", &["patch"], None),
        // blockOwnerDeletion on the Jobs we create (OwnerReferencesPermissionEnforcement).
        (
            "batch.kronjob.dev",
            "cronjobs/finalizers",
            &["update"],
            None,
        ),
        (
            "batch",
            "jobs",
            &["get", "list", "watch", "create", "delete"],
            None,
        ),
        ("", "pods", &["get", "list", "watch", "delete"], None),
        ("events.k8s.io", "events", &["create", "patch"], None),
        (
            "apiextensions.k8s.io",
            "customresourcedefinitions",
            &["get"],
            Some("cronjobs.batch.kronjob.dev"),
        ),
        (
            "admissionregistration.k8s.io",
            "mutatingwebhookconfigurations",
            &["get", "update"],
            Some("kronjob-mutating"),
        ),
        (
            "admissionregistration.k8s.io",
            "validatingwebhookconfigurations",
            &["get", "update"],
            Some("kronjob-validating"),
        ),
    ];
    for (group, resource, verbs, name) in needed {
        for verb in *verbs {
            assert!(
                grants(&cluster, group, resource, verb, *name),
                "ClusterRole kronjob-manager lacks {verb} on {group}/{resource} {name:?}"
            );
        }
    }
    // Least privilege: the manager never writes CronJob specs.
    assert!(!grants(
        &cluster,
        "batch.kronjob.dev",
        "cronjobs",
        "update",
        None
    ));
    assert!(!grants(
        &cluster,
        "batch.kronjob.dev",
        "cronjobs",
        "patch",
        None
    ));
}

#[test]
fn namespace_role_grants_the_lease_and_the_certificate_secret() {
    let ns = rules("namespace_role.yaml");
    for verb in ["get", "create", "update", "patch"] {
        assert!(
            grants(&ns, "coordination.k8s.io", "leases", verb, None),
            "leases {verb}"
        );
    }
    for verb in ["get", "create", "update"] {
        assert!(grants(&ns, "", "secrets", verb, None), "secrets {verb}");
    }
}
