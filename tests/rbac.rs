//! The manager's RBAC grants every call the code makes, in both install paths, and nothing
//! more: every install path (kustomize and the chart, with each option) is rendered and its
//! grants must equal what its manager's flags need, by resource name where the API allows.
//!
//! The list of calls is not written by hand: every mock-API test of the manager's code records
//! the requests it sees (tests/support/api_script.rs) into the directory named by
//! `KRONJOB_API_CALL_LOG`. `just test` runs the whole suite with that set, then runs the
//! ignored test below, which requires each recorded call to be granted by `config/rbac` and by
//! the helm chart's RBAC. A new API call without a rule fails CI. Kustomize and helm must grant
//! the same rules.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

/// One grant: (apiGroup, resource, verb, resourceName or "").
type Grant = (String, String, String, String);

fn yaml_documents(text: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .filter_map(|doc| Value::deserialize(doc).ok())
        .filter(|doc| !doc.is_null())
        .collect()
}

/// The grants of the roles the manager's ServiceAccount is bound to, in `documents`.
fn manager_grants(documents: &[Value]) -> BTreeSet<Grant> {
    let bound: BTreeSet<(String, String)> = documents
        .iter()
        .filter(|d| {
            matches!(
                d["kind"].as_str(),
                Some("ClusterRoleBinding" | "RoleBinding")
            )
        })
        .filter(|d| {
            d["subjects"]
                .as_array()
                .is_some_and(|s| s.iter().any(|s| s["kind"] == "ServiceAccount"))
        })
        .map(|d| {
            (
                d["roleRef"]["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                d["roleRef"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let mut grants = BTreeSet::new();
    for role in documents.iter().filter(|d| {
        bound.contains(&(
            d["kind"].as_str().unwrap_or_default().to_string(),
            d["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        ))
    }) {
        for rule in role["rules"].as_array().into_iter().flatten() {
            let list = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            };
            let names = list("resourceNames");
            let names = if names.is_empty() {
                vec![String::new()]
            } else {
                names
            };
            for group in list("apiGroups") {
                for resource in list("resources") {
                    for verb in list("verbs") {
                        for name in &names {
                            grants.insert((
                                group.clone(),
                                resource.clone(),
                                verb.clone(),
                                name.clone(),
                            ));
                        }
                    }
                }
            }
        }
    }
    grants
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn helm() -> PathBuf {
    let local = root().join(".tools/bin/helm");
    if local.exists() {
        return local;
    }
    PathBuf::from("helm")
}

/// The chart rendered with `sets` (`--set` values).
fn helm_render(sets: &[&str]) -> Vec<Value> {
    let mut args = vec!["template", "kronjob", "--namespace", "kronjob-system"];
    for set in sets {
        args.extend(["--set", set]);
    }
    let out = Command::new(helm())
        .args(&args)
        .arg(root().join("config/helm/kronjob"))
        .output()
        .unwrap_or_else(|e| panic!("helm not found ({e}): run ./scripts/install-tools.sh"));
    assert!(
        out.status.success(),
        "helm template {sets:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_documents(&String::from_utf8_lossy(&out.stdout))
}

/// The chart with its default values.
fn helm_rbac() -> Vec<Value> {
    helm_render(&[])
}

fn kubectl() -> PathBuf {
    let local = root().join(".tools/bin/kubectl");
    if local.exists() {
        return local;
    }
    PathBuf::from("kubectl")
}

/// `kubectl kustomize` of an overlay of config/default with `components` (paths under
/// config/), written to a scratch directory.
fn kustomize_render(base: &str, components: &[&str]) -> Vec<Value> {
    let dir = root().join("target/rbac-overlays").join(format!(
        "{}-{}",
        base.replace('/', "_"),
        components.join("_").replace('/', "_")
    ));
    std::fs::create_dir_all(&dir).expect("overlay dir");
    let mut text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../../{base}\n"
    );
    if !components.is_empty() {
        text.push_str("components:\n");
        for c in components {
            text.push_str(&format!("  - ../../../{c}\n"));
        }
    }
    // Tests render the same overlays at once: each file appears whole (written aside, renamed).
    let aside = dir.join(format!(
        "kustomization.{:?}.tmp",
        std::thread::current().id()
    ));
    std::fs::write(&aside, text).expect("overlay");
    std::fs::rename(&aside, dir.join("kustomization.yaml")).expect("overlay");
    let out = Command::new(kubectl())
        .args(["kustomize", "--load-restrictor=LoadRestrictionsNone"])
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("kubectl not found ({e}): run ./scripts/install-tools.sh"));
    assert!(
        out.status.success(),
        "kustomize {base} {components:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_documents(&String::from_utf8_lossy(&out.stdout))
}

/// Every install path: (what it is, its objects).
fn install_paths() -> Vec<(String, Vec<Value>)> {
    let mut paths = Vec::new();
    for (base, components) in [
        ("config/default", vec![]),
        ("config/release", vec![]),
        ("config/default", vec!["config/ttl-pods"]),
        ("config/default", vec!["config/sharding"]),
        ("config/default", vec!["config/sharding", "config/ttl-pods"]),
        ("config/default", vec!["config/workload-kinds"]),
    ] {
        paths.push((
            format!("kustomize {base} {components:?}"),
            kustomize_render(base, &components),
        ));
    }
    for sets in [
        vec![],
        vec!["webhook.certManager.enabled=true"],
        vec!["webhook.enabled=false"],
        vec!["sharding.enabled=true"],
        vec!["leaderElection.enabled=false"],
        vec!["ttl.pods=true"],
        vec!["metrics.secure=false"],
        vec!["controller.workloadKinds={jobs.batch,jobsets.jobset.x-k8s.io,rayjobs.ray.io}"],
        vec![
            "serviceMonitor.enabled=true",
            "serviceMonitor.readerServiceAccount.name=prometheus",
        ],
        vec![
            "sharding.enabled=true",
            "ttl.pods=true",
            "webhook.certManager.enabled=true",
        ],
    ] {
        paths.push((format!("helm {sets:?}"), helm_render(&sets)));
    }
    paths
}

/// The manager's flags in a render: its Deployment's arguments.
fn manager_flags(documents: &[Value]) -> Vec<String> {
    let deployment = documents
        .iter()
        .find(|d| d["kind"] == "Deployment")
        .expect("a Deployment");
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect()
}

/// The grants a manager started with `flags` needs (the calls the code makes, see the test
/// below that checks them against the recorded calls), by resource name where the API allows.
fn needed_grants(flags: &[String]) -> BTreeSet<Grant> {
    let has = |flag: &str| flags.iter().any(|f| f == flag);
    let value = |flag: &str, default: &str| {
        flags
            .iter()
            .find_map(|f| f.strip_prefix(&format!("{flag}=")))
            .unwrap_or(default)
            .to_string()
    };
    let mut grants = BTreeSet::new();
    let mut grant = |group: &str, resource: &str, verbs: &[&str], name: &str| {
        for verb in verbs {
            grants.insert((group.into(), resource.into(), (*verb).into(), name.into()));
        }
    };
    let cronjobs = "batch.kronjob.dev";
    grant(cronjobs, "cronjobs", &["get", "list", "watch", "patch"], "");
    grant(cronjobs, "cronjobs/status", &["patch"], "");
    grant(cronjobs, "cronjobs/finalizers", &["update"], "");
    // Calendars are read cluster-wide, whatever the namespaces.
    grant(cronjobs, "calendars", &["list", "watch"], "");
    grant(
        "batch",
        "jobs",
        &["get", "list", "watch", "create", "delete"],
        "",
    );
    // The Job template check dry-runs a batch/v1 CronJob carrying the template.
    grant("batch", "cronjobs", &["create"], "");
    grant("events.k8s.io", "events", &["create", "patch"], "");
    let crd = "cronjobs.batch.kronjob.dev";
    grant(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        &["get"],
        crd,
    );
    if has("--ttl-pods") {
        grant("", "pods", &["get", "list", "watch", "delete"], "");
    }
    // Each workload kind beside Jobs: created, read, watched, deleted.
    for kind in value("--workload-kinds", "jobs.batch").split(',') {
        if let Some((resource, group)) = kind.split_once('.')
            && kind != "jobs.batch"
        {
            grant(
                group,
                resource,
                &["create", "get", "list", "watch", "delete"],
                "",
            );
        }
    }
    let webhook = flags.iter().any(|f| f.starts_with("--webhook-addr"));
    if value("--metrics-secure", "true") == "true" {
        grant("authentication.k8s.io", "tokenreviews", &["create"], "");
    }
    // Secure metrics ask whether the scraper may read them; the webhook whether a CronJob's
    // author may create its workload kind.
    if value("--metrics-secure", "true") == "true" || webhook {
        grant(
            "authorization.k8s.io",
            "subjectaccessreviews",
            &["create"],
            "",
        );
    }
    if has("--webhook-self-signed") {
        let admission = "admissionregistration.k8s.io";
        let mutating = value("--webhook-mutating-configuration", "kronjob-mutating");
        let validating = value("--webhook-validating-configuration", "kronjob-validating");
        grant(
            admission,
            "mutatingwebhookconfigurations",
            &["get", "update"],
            &mutating,
        );
        grant(
            admission,
            "mutatingwebhookconfigurations",
            &["get", "update"],
            &validating,
        );
        grant(
            admission,
            "validatingwebhookconfigurations",
            &["get", "update"],
            &mutating,
        );
        grant(
            admission,
            "validatingwebhookconfigurations",
            &["get", "update"],
            &validating,
        );
        let secret = format!(
            "{}-self-signed",
            value("--webhook-service-name", "kronjob-webhook")
        );
        grant("", "secrets", &["get", "update"], &secret);
        grant("", "secrets", &["create"], "");
    }
    let leases = "coordination.k8s.io";
    if has("--sharding") {
        // Jobs without their CronJob's shard bucket are labelled.
        grant("batch", "jobs", &["patch"], "");
        grant(
            leases,
            "leases",
            &["get", "list", "watch", "create", "update", "delete"],
            "",
        );
    } else if has("--leader-elect") {
        let lease = value("--leader-election-id", "kronjob-leader");
        grant(leases, "leases", &["get", "update"], &lease);
        grant(leases, "leases", &["create"], "");
    }
    grants
}

#[test]
fn every_install_path_grants_exactly_what_its_manager_needs() {
    for (path, documents) in install_paths() {
        let flags = manager_flags(&documents);
        let granted = manager_grants(&documents);
        let needed = needed_grants(&flags);
        let broader: Vec<_> = granted.difference(&needed).collect();
        let missing: Vec<_> = needed.difference(&granted).collect();
        assert!(
            broader.is_empty() && missing.is_empty(),
            "{path} (flags {flags:?})\n  granted beyond the need: {broader:#?}\n  needed, not granted: {missing:#?}"
        );
        // Scrapers get a role of their own, for /metrics only.
        let reader = documents
            .iter()
            .find(|d| {
                d["kind"] == "ClusterRole"
                    && d["metadata"]["name"]
                        .as_str()
                        .is_some_and(|n| n.ends_with("metrics-reader"))
            })
            .unwrap_or_else(|| panic!("{path}: no metrics-reader ClusterRole"));
        assert_eq!(
            reader["rules"],
            serde_json::json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]),
            "{path}"
        );
    }
}

#[test]
fn the_default_installs_limit_ingress_to_the_webhook_and_the_monitoring_namespace() {
    for (path, documents) in [
        (
            "kustomize config/default",
            kustomize_render("config/default", &[]),
        ),
        ("helm", helm_rbac()),
    ] {
        let policy = documents
            .iter()
            .find(|d| d["kind"] == "NetworkPolicy")
            .unwrap_or_else(|| panic!("{path}: no NetworkPolicy"));
        assert_eq!(
            policy["spec"]["policyTypes"],
            serde_json::json!(["Ingress"])
        );
        let rules = policy["spec"]["ingress"].as_array().expect("ingress");
        assert_eq!(rules.len(), 2, "{path}: {rules:?}");
        assert_eq!(rules[0]["ports"][0]["port"], "webhook", "{path}");
        assert!(
            rules[0]["from"].is_null(),
            "{path}: the API server is not a pod"
        );
        assert_eq!(rules[1]["ports"][0]["port"], "metrics", "{path}");
        assert_eq!(
            rules[1]["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            "monitoring",
            "{path}"
        );
    }
}

/// Every install path puts the manager's Lease requests (API Priority and Fairness) in the
/// `leader-election` priority level, for its own ServiceAccount and the namespace of its
/// Leases (the Deployment's), matched before the default FlowSchemas that would put them in
/// `workload-low` with its Job creates (`service-accounts`, 9000).
#[test]
fn every_install_path_keeps_the_managers_leases_out_of_the_queue_of_its_job_creates() {
    for (path, documents) in install_paths() {
        let deployment = documents
            .iter()
            .find(|d| d["kind"] == "Deployment")
            .unwrap_or_else(|| panic!("{path}: a Deployment"));
        let account = &deployment["spec"]["template"]["spec"]["serviceAccountName"];
        let namespace = &deployment["metadata"]["namespace"];
        assert!(account.is_string() && namespace.is_string(), "{path}");
        let schema = documents
            .iter()
            .find(|d| d["kind"] == "FlowSchema")
            .unwrap_or_else(|| panic!("{path}: no FlowSchema"));
        let spec = &schema["spec"];
        assert_eq!(
            spec["priorityLevelConfiguration"]["name"], "leader-election",
            "{path}"
        );
        let precedence = spec["matchingPrecedence"].as_u64().expect("precedence");
        assert!(precedence < 9000, "{path}: {precedence}");
        let rule = &spec["rules"][0];
        assert_eq!(
            rule["subjects"],
            serde_json::json!([{"kind": "ServiceAccount",
                "serviceAccount": {"name": account, "namespace": namespace}}]),
            "{path}"
        );
        assert_eq!(
            rule["resourceRules"],
            serde_json::json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                "verbs": ["*"], "namespaces": [namespace]}]),
            "{path}"
        );
    }
}

/// The RBAC request a recorded `METHOD PATH?QUERY` needs: (group, resource, verb, name).
fn needed(line: &str) -> Option<Grant> {
    let (method, target) = line.split_once(' ')?;
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", "v1", rest @ ..] => (String::new(), rest),
        ["apis", group, _version, rest @ ..] => ((*group).to_string(), rest),
        _ => return None,
    };
    let rest = match rest {
        ["namespaces", _ns, rest @ ..] if !rest.is_empty() => rest,
        other => other,
    };
    let (resource, name) = match rest {
        [resource] => ((*resource).to_string(), String::new()),
        [resource, name] => ((*resource).to_string(), (*name).to_string()),
        [resource, name, sub] => (format!("{resource}/{sub}"), (*name).to_string()),
        _ => return None,
    };
    // Every authenticated user may ask what it may do (the default ClusterRole
    // system:basic-user): the manager asks of each workload kind before watching it.
    if resource == "selfsubjectaccessreviews" {
        return None;
    }
    let watch = query
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1");
    let verb = match (method, name.is_empty()) {
        ("GET", true) if watch => "watch",
        ("GET", true) => "list",
        ("GET", false) => "get",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "deletecollection",
        ("DELETE", false) => "delete",
        _ => return None,
    };
    // A create names no object; resourceNames cannot restrict it.
    let name = if verb == "create" {
        String::new()
    } else {
        name
    };
    Some((group, resource, verb.to_string(), name))
}

fn granted(grants: &BTreeSet<Grant>, (group, resource, verb, name): &Grant) -> bool {
    let any = |g: &str, r: &str, v: &str, n: &str| {
        grants.contains(&(g.into(), r.into(), v.into(), n.into()))
    };
    [group.as_str(), "*"].iter().any(|g| {
        [resource.as_str(), "*"].iter().any(|r| {
            [verb.as_str(), "*"]
                .iter()
                .any(|v| any(g, r, v, "") || (!name.is_empty() && any(g, r, v, name)))
        })
    })
}

fn recorded_calls(dir: &Path) -> BTreeSet<String> {
    let mut calls = BTreeSet::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if let Ok(text) = std::fs::read_to_string(entry.path()) {
            calls.extend(text.lines().map(str::to_string));
        }
    }
    calls
}

#[test]
fn recorded_paths_map_to_the_rbac_requests_they_need() {
    let cases = [
        (
            "GET /apis/batch/v1/namespaces/ns/jobs/j",
            ("batch", "jobs", "get", "j"),
        ),
        (
            "GET /apis/batch/v1/namespaces/ns/jobs?labelSelector=x",
            ("batch", "jobs", "list", ""),
        ),
        (
            "GET /apis/batch/v1/jobs?watch=true&resourceVersion=1",
            ("batch", "jobs", "watch", ""),
        ),
        (
            "PATCH /apis/batch.kronjob.dev/v1/namespaces/ns/cronjobs/cj/status",
            ("batch.kronjob.dev", "cronjobs/status", "patch", "cj"),
        ),
        (
            "POST /api/v1/namespaces/ns/secrets",
            ("", "secrets", "create", ""),
        ),
        (
            "PUT /apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/v",
            (
                "admissionregistration.k8s.io",
                "validatingwebhookconfigurations",
                "update",
                "v",
            ),
        ),
        (
            "DELETE /api/v1/namespaces/ns/pods/p",
            ("", "pods", "delete", "p"),
        ),
    ];
    for (line, (g, r, v, n)) in cases {
        assert_eq!(
            needed(line),
            Some((g.into(), r.into(), v.into(), n.into())),
            "{line}"
        );
    }
    let grants = BTreeSet::from([(
        "batch".to_string(),
        "jobs".to_string(),
        "get".to_string(),
        String::new(),
    )]);
    assert!(granted(
        &grants,
        &("batch".into(), "jobs".into(), "get".into(), "any".into())
    ));
    assert!(!granted(
        &grants,
        &("batch".into(), "jobs".into(), "delete".into(), "any".into())
    ));
}

#[test]
fn kustomize_and_helm_grant_the_manager_the_same_rules() {
    let kustomize = manager_grants(&kustomize_render("config/default", &[]));
    let helm = manager_grants(&helm_rbac());
    assert!(
        !kustomize.is_empty(),
        "config/rbac binds no role to the manager"
    );
    let only_kustomize: Vec<_> = kustomize.difference(&helm).collect();
    let only_helm: Vec<_> = helm.difference(&kustomize).collect();
    assert!(
        only_kustomize.is_empty() && only_helm.is_empty(),
        "RBAC drift\n  only in config/rbac: {only_kustomize:?}\n  only in the chart: {only_helm:?}"
    );
}

/// Run by `just test` after the whole suite recorded its calls.
#[test]
#[ignore = "needs the calls recorded by the suite: run `just test`"]
fn every_recorded_api_call_is_granted_by_both_install_paths() {
    let dir = std::env::var_os("KRONJOB_API_CALL_LOG")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/api-calls"));
    let calls = recorded_calls(&dir);
    assert!(
        calls.len() >= 10,
        "only {} API calls recorded in {}: run `just test`",
        calls.len(),
        dir.display()
    );
    let needs: BTreeSet<Grant> = calls.iter().filter_map(|c| needed(c)).collect();
    // Names in the recorded calls are the tests' own: compare (group, resource, verb), over
    // the install paths with every option on.
    let unnamed = |grants: BTreeSet<Grant>| -> BTreeSet<Grant> {
        grants
            .into_iter()
            .map(|(g, r, v, _)| (g, r, v, String::new()))
            .collect()
    };
    let kustomize_all = {
        let mut all = manager_grants(&kustomize_render("config/default", &["config/ttl-pods"]));
        all.extend(manager_grants(&kustomize_render(
            "config/default",
            &["config/sharding"],
        )));
        all.extend(manager_grants(&kustomize_render(
            "config/default",
            &["config/workload-kinds"],
        )));
        unnamed(all)
    };
    let helm_all = {
        let mut all = manager_grants(&helm_render(&["ttl.pods=true"]));
        all.extend(manager_grants(&helm_render(&["sharding.enabled=true"])));
        all.extend(manager_grants(&helm_render(&[
            "controller.workloadKinds={jobs.batch,jobsets.jobset.x-k8s.io,rayjobs.ray.io}",
        ])));
        unnamed(all)
    };
    for (install, grants) in [("kustomize", &kustomize_all), ("the helm chart", &helm_all)] {
        let missing: Vec<&Grant> = needs
            .iter()
            .filter(|(g, r, v, _)| {
                !granted(grants, &(g.clone(), r.clone(), v.clone(), String::new()))
            })
            .collect();
        assert!(
            missing.is_empty(),
            "{install} does not grant (group, resource, verb, name): {missing:#?}"
        );
    }
    // And the other way: every verb the install paths grant is one the code uses
    // (cronjobs/finalizers is for clusters enforcing owner-reference permissions: Jobs carry
    // blockOwnerDeletion; the Lease and Secret updates of code paths the suite may not reach
    // are listed in needed_grants).
    let used: BTreeSet<Grant> = unnamed(needs);
    // A workload kind's rule is the one every kind of --workload-kinds gets: the suite uses it
    // on JobSets in the simulated API (create, list, watch), and tests/e2e/workloads.rs every
    // verb of it on every kind on a real API server.
    let allowed_unused: BTreeSet<Grant> = [
        ("batch.kronjob.dev", "cronjobs/finalizers", "update"),
        ("jobset.x-k8s.io", "jobsets", "get"),
        ("jobset.x-k8s.io", "jobsets", "delete"),
        ("ray.io", "rayjobs", "create"),
        ("ray.io", "rayjobs", "get"),
        ("ray.io", "rayjobs", "list"),
        ("ray.io", "rayjobs", "watch"),
        ("ray.io", "rayjobs", "delete"),
    ]
    .into_iter()
    .map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string(), String::new()))
    .collect();
    let unused: Vec<&Grant> = helm_all
        .iter()
        .chain(kustomize_all.iter())
        .filter(|g| !used.contains(*g) && !allowed_unused.contains(*g))
        .collect();
    assert!(
        unused.is_empty(),
        "granted but never called by the suite: {unused:#?}"
    );
}
