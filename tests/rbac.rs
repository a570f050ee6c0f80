//! The manager's RBAC grants every call the code makes, in both install paths.
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

fn kustomize_rbac() -> Vec<Value> {
    let dir = root().join("config/rbac");
    let mut documents = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("config/rbac") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.ends_with(".yaml") && name != "kustomization.yaml" {
            documents.extend(yaml_documents(
                &std::fs::read_to_string(&path).expect("read"),
            ));
        }
    }
    documents
}

fn helm() -> PathBuf {
    let local = root().join(".tools/bin/helm");
    if local.exists() {
        return local;
    }
    PathBuf::from("helm")
}

/// The chart rendered with every optional permission on (Pod TTLs, self-signed certificates).
fn helm_rbac() -> Vec<Value> {
    let out = Command::new(helm())
        .args([
            "template",
            "kronjob",
            "--namespace",
            "kronjob-system",
            "--set",
            "ttl.pods=true",
        ])
        .arg(root().join("config/helm/kronjob"))
        .output()
        .unwrap_or_else(|e| panic!("helm not found ({e}): run ./scripts/install-tools.sh"));
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    yaml_documents(&String::from_utf8_lossy(&out.stdout))
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
    let kustomize = manager_grants(&kustomize_rbac());
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
    for (install, grants) in [
        ("config/rbac", manager_grants(&kustomize_rbac())),
        ("the helm chart", manager_grants(&helm_rbac())),
    ] {
        let missing: Vec<&Grant> = needs.iter().filter(|n| !granted(&grants, n)).collect();
        assert!(
            missing.is_empty(),
            "{install} does not grant (group, resource, verb, name): {missing:#?}"
        );
    }
}
