//! Two installs coexist: two helm releases in one namespace, and config/default next to the
//! config/release overlay, render no object twice (cluster-scoped names included), and each
//! manager is told its own names: the webhook configurations whose caBundle it keeps, the
//! Service its certificate is for, and its Lease.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::tools;

/// (kind, namespace, name) of every object.
fn identities(objects: &[Value]) -> BTreeSet<(String, String, String)> {
    objects
        .iter()
        .map(|o| {
            let field = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (
                field(&o["kind"]),
                field(&o["metadata"]["namespace"]),
                field(&o["metadata"]["name"]),
            )
        })
        .collect()
}

fn helm_release(release: &str, extra: &[&str]) -> Vec<Value> {
    let chart = tools::root().join("config/helm/kronjob");
    let mut args = vec![
        "template",
        release,
        chart.to_str().expect("utf-8 path"),
        "--namespace",
        "kronjob-system",
    ];
    args.extend_from_slice(extra);
    tools::yaml_documents(&tools::run(&tools::tool("helm"), &args))
}

fn kustomize(dir: &str) -> Vec<Value> {
    let path = tools::root().join(dir);
    let text = tools::run(
        &tools::tool("kubectl"),
        &["kustomize", path.to_str().expect("utf-8 path")],
    );
    tools::yaml_documents(&text)
}

fn one<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = objects.iter().filter(|o| o["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind}");
    found[0]
}

/// The value of `--flag=value` in the manager's arguments.
fn flag(objects: &[Value], name: &str) -> Option<String> {
    let deployment = one(objects, "Deployment");
    let prefix = format!("--{name}=");
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .find_map(|a| a.strip_prefix(&prefix).map(str::to_string))
}

fn name(object: &Value) -> String {
    object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The manager is told the names its install renders, and may update those configurations
/// when it keeps their caBundle (self-signed mode).
fn check_wiring(install: &str, objects: &[Value]) {
    let mutating = name(one(objects, "MutatingWebhookConfiguration"));
    let validating = name(one(objects, "ValidatingWebhookConfiguration"));
    assert_eq!(
        flag(objects, "webhook-mutating-configuration").as_deref(),
        Some(mutating.as_str()),
        "{install}"
    );
    assert_eq!(
        flag(objects, "webhook-validating-configuration").as_deref(),
        Some(validating.as_str()),
        "{install}"
    );
    let service = flag(objects, "webhook-service-name").expect("--webhook-service-name");
    assert!(
        objects
            .iter()
            .any(|o| o["kind"] == "Service" && name(o) == service),
        "{install}: --webhook-service-name={service} names no Service"
    );
    let self_signed =
        one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .is_some_and(|a| a.iter().any(|a| a == "--webhook-self-signed"));
    if !self_signed {
        // cert-manager injects the caBundle; the manager never touches the configurations.
        return;
    }
    let manager_role = objects
        .iter()
        .find(|o| o["kind"] == "ClusterRole" && name(o).ends_with("-manager"))
        .expect("manager ClusterRole");
    let granted: BTreeSet<&str> = manager_role["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["resourceNames"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    for config in [&mutating, &validating] {
        assert!(
            granted.contains(config.as_str()),
            "{install}: the manager may not update {config}: {granted:?}"
        );
    }
}

fn assert_coexist(a: (&str, &[Value]), b: (&str, &[Value])) {
    let shared: Vec<_> = identities(a.1)
        .intersection(&identities(b.1))
        .cloned()
        .collect();
    assert!(
        shared.is_empty(),
        "{} and {} both render {shared:?}",
        a.0,
        b.0
    );
    // The leader Lease, or with --sharding the group whose Leases a replica joins.
    let lease = |objects: &[Value]| {
        flag(objects, "leader-election-id")
            .or_else(|| flag(objects, "shard-group"))
            .expect("a Lease name or a shard group")
    };
    assert_ne!(lease(a.1), lease(b.1), "{} and {} share a Lease", a.0, b.0);
    if let (Some(x), Some(y)) = (flag(a.1, "shard-group"), flag(b.1, "shard-group")) {
        assert_ne!(x, y, "{} and {} share a shard group", a.0, b.0);
    }
    check_wiring(a.0, a.1);
    check_wiring(b.0, b.1);
}

#[test]
fn two_helm_releases_in_one_namespace_share_no_name() {
    let a = helm_release("team-a", &["--set", "controller.selector=team=a"]);
    let b = helm_release("team-b", &["--set", "controller.selector=team=b"]);
    assert_coexist(("release team-a", &a), ("release team-b", &b));
    // Sharded releases form a group each.
    let sharded = ["--set", "sharding.enabled=true", "--set", "replicaCount=3"];
    let a = helm_release("team-a", &sharded);
    let b = helm_release("team-b", &sharded);
    for objects in [&a, &b] {
        assert!(
            flag(objects, "leader-election-id").is_none(),
            "no leader election"
        );
    }
    assert_coexist(("team-a (sharded)", &a), ("team-b (sharded)", &b));
    // Also with cert-manager, which names a Certificate and an Issuer.
    let cm = ["--set", "webhook.certManager.enabled=true"];
    let a = helm_release("team-a", &cm);
    let b = helm_release("team-b", &cm);
    assert_coexist(("team-a (cert-manager)", &a), ("team-b (cert-manager)", &b));
}

#[test]
fn the_default_release_keeps_its_names() {
    // Upgrading the release `kronjob` keeps its webhook configurations and its Lease.
    let objects = helm_release("kronjob", &[]);
    assert_eq!(
        name(one(&objects, "MutatingWebhookConfiguration")),
        kronjob::webhook::certs::MUTATING_CONFIG
    );
    assert_eq!(
        name(one(&objects, "ValidatingWebhookConfiguration")),
        kronjob::webhook::certs::VALIDATING_CONFIG
    );
    assert_eq!(
        flag(&objects, "leader-election-id").as_deref(),
        Some("kronjob-leader")
    );
}

#[test]
fn the_webhook_object_selector_reaches_both_webhooks() {
    let objects = helm_release(
        "team-a",
        &["--set", "webhook.objectSelector.matchLabels.team=a"],
    );
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        assert_eq!(
            one(&objects, kind)["webhooks"][0]["objectSelector"]["matchLabels"]["team"],
            "a",
            "{kind}"
        );
    }
}

#[test]
fn kustomize_default_and_release_overlay_share_no_name() {
    let default = kustomize("config/default");
    let release = kustomize("config/release");
    // The CRD is installed once, by config/default.
    let crds = |o: &[Value]| {
        o.iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .count()
    };
    assert_eq!(crds(&release), 0, "config/release must not own the CRD");
    let default: Vec<Value> = default
        .into_iter()
        .filter(|o| o["kind"] != "CustomResourceDefinition")
        .collect();
    assert_coexist(("config/default", &default), ("config/release", &release));
    assert_eq!(
        flag(&release, "selector").as_deref(),
        Some("team=a"),
        "the overlay selects its CronJobs"
    );
}

/// The manager container's environment variables named `name`.
fn env_values(objects: &[Value], name: &str) -> Vec<String> {
    let deployment = one(objects, "Deployment");
    deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["name"] == name)
        .map(|e| e["value"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// By default the chart leaves RUST_LOG unset, so the manager's own default filter (which
/// quiets the Kubernetes client) applies; `logging.level` sets it when given.
#[test]
fn rust_log_is_set_only_when_logging_level_is() {
    let default = helm_release("kronjob", &[]);
    assert_eq!(env_values(&default, "RUST_LOG"), Vec::<String>::new());
    let debug = helm_release("kronjob", &["--set", r"logging.level=info\,kronjob=debug"]);
    assert_eq!(env_values(&debug, "RUST_LOG"), vec!["info,kronjob=debug"]);
}
