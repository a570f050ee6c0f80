//! Every folder the README tells users to `kubectl apply -f` holds plain manifests that kubectl
//! reads whole, and renders the same objects with `kubectl apply -k`.
//!
//! `kubectl apply -f DIR` reads every `.json`, `.yaml` and `.yml` file in DIR as Kubernetes
//! objects; a kustomization file among them makes it fail ("no matches for kind
//! Kustomization") after applying the rest. Kustomize also accepts its file named
//! `Kustomization`, which `-f` skips, so a folder can serve both.

#[path = "support/tools.rs"]
mod tools;

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

/// The folders in `kubectl apply -f DIR` commands of the README.
fn readme_apply_f_dirs() -> BTreeSet<String> {
    let readme = std::fs::read_to_string(tools::root().join("README.md")).expect("README.md");
    readme
        .split("kubectl apply -f ")
        .skip(1)
        .filter_map(|rest| rest.split([' ', '`', '\n']).next())
        .filter(|target| tools::root().join(target).is_dir())
        .map(|target| target.trim_end_matches('/').to_string())
        .collect()
}

/// What `kubectl apply -f dir` reads: the documents of its `.json`, `.yaml` and `.yml` files.
fn read_like_apply_f(dir: &Path) -> Vec<(String, Value)> {
    let mut documents = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        let read = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "json" | "yaml" | "yml"));
        if read {
            let text = std::fs::read_to_string(&path).expect("read manifest");
            for doc in tools::yaml_documents(&text) {
                documents.push((path.display().to_string(), doc));
            }
        }
    }
    documents
}

/// (apiVersion, kind, namespace, name) of a Kubernetes object.
fn identity(object: &Value) -> (String, String, String, String) {
    let field = |v: &Value| v.as_str().unwrap_or_default().to_string();
    (
        field(&object["apiVersion"]),
        field(&object["kind"]),
        field(&object["metadata"]["namespace"]),
        field(&object["metadata"]["name"]),
    )
}

#[test]
fn the_readme_applies_crd_and_samples_with_dash_f() {
    let dirs = readme_apply_f_dirs();
    for expected in ["crd", "config/samples"] {
        assert!(
            dirs.contains(expected),
            "README applies {expected}/: {dirs:?}"
        );
    }
}

#[test]
fn folders_applied_with_dash_f_hold_only_kubernetes_objects() {
    for dir in readme_apply_f_dirs() {
        let documents = read_like_apply_f(&tools::root().join(&dir));
        assert!(!documents.is_empty(), "{dir}/ holds no manifest");
        for (file, object) in documents {
            let (api_version, kind, _, name) = identity(&object);
            assert!(
                !api_version.is_empty() && !kind.is_empty() && !name.is_empty(),
                "{file}: not a Kubernetes object (apiVersion, kind and metadata.name)"
            );
            assert!(
                !api_version.starts_with("kustomize.config.k8s.io"),
                "{file}: kubectl apply -f {dir}/ would fail on this {kind}; name it Kustomization"
            );
        }
    }
}

#[test]
fn dash_k_renders_the_same_objects_as_dash_f() {
    let kubectl = tools::tool("kubectl");
    for dir in readme_apply_f_dirs() {
        let path = tools::root().join(&dir);
        let by_f: BTreeSet<_> = read_like_apply_f(&path)
            .iter()
            .map(|(_, object)| identity(object))
            .collect();
        let rendered = tools::run(&kubectl, &["kustomize", &path.display().to_string()]);
        let by_k: BTreeSet<_> = tools::yaml_documents(&rendered)
            .iter()
            .map(identity)
            .collect();
        assert_eq!(by_f, by_k, "kubectl apply -f {dir}/ and -k {dir}/ differ");
    }
}
