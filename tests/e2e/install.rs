//! The README's install paths on a real API server: `kubectl apply -f crd/`, `kubectl apply -k
//! config/default` with the `config/release` overlay beside it, the chart rendered with `helm
//! template` and applied with kubectl, and `helm install` as the README writes it. Every
//! command exits 0 and every object it names exists on the server afterwards; two installs
//! share no object. Each case runs on a control plane of its own: the webhook configurations
//! fail closed for every CronJob of the cluster (their Deployment never runs: no kubelet).

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::runtime::wait::{await_condition, conditions::is_crd_established};
use serde_json::Value;

use crate::harness::{Ctx, Env};

crate::cases!(
    install:
    kustomize_default_and_release_overlay,
    helm_template_and_the_readme_helm_installs,
);

/// The kinds one install of the manager consists of, whatever the path.
const INSTALL_KINDS: &[&str] = &[
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Deployment",
    "Service",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
];

/// A control plane without controllers (nothing here needs them) and an Env on it.
async fn own_plane(ctx: &Ctx) -> (kronjob_envtest::ControlPlane, Env) {
    let plane = ctx
        .own_control_plane(kronjob_envtest::Options {
            controllers: Vec::new(),
            ..Default::default()
        })
        .await;
    let env = Env::on(ctx, plane.kubeconfig()).await;
    (plane, env)
}

/// Wait until the CRD is Established.
async fn wait_established(env: &Env) {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client.clone());
    let established = await_condition(crds, "cronjobs.batch.kronjob.dev", is_crd_established());
    tokio::time::timeout(Duration::from_secs(60), established)
        .await
        .expect("the CRD is Established within 60 s")
        .expect("watching the CRD");
}

/// `kind/name -> verb` of each line `kubectl apply` printed (`kind.group/name created`).
fn applied(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter_map(|line| {
            let (object, verb) = line.trim().rsplit_once(' ')?;
            Some((object.to_string(), verb.to_string()))
        })
        .collect()
}

/// Every object `kubectl apply` printed was created: none existed before, so the install
/// shares no name with what is already there.
fn all_created(what: &str, stdout: &str) {
    let lines = applied(stdout);
    assert!(!lines.is_empty(), "{what} applied nothing:\n{stdout}");
    let touched: Vec<_> = lines.iter().filter(|(_, verb)| verb != "created").collect();
    assert!(
        touched.is_empty(),
        "{what} changed objects that existed before (a name clash): {touched:?}\n{stdout}"
    );
}

/// The objects of `kubectl get <source> -o json` (exits 0 only when every object exists).
fn get_all(env: &Env, source: &[&str]) -> Vec<Value> {
    let mut args = vec!["get"];
    args.extend_from_slice(source);
    args.extend_from_slice(&["-o", "json"]);
    let out = env.kubectl_ok(&args);
    let list: Value = serde_json::from_str(&out).expect("kubectl get -o json");
    match list["items"].as_array() {
        Some(items) => items.clone(),
        None => vec![list],
    }
}

fn kinds(objects: &[Value]) -> BTreeSet<String> {
    objects
        .iter()
        .filter_map(|o| o["kind"].as_str().map(str::to_string))
        .collect()
}

fn named<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// The objects of one install, as the server holds them, are complete and wired to each
/// other: every kind of [`INSTALL_KINDS`], the webhook configurations call a Service of the
/// install, the bindings name its ServiceAccount and roles, and the Deployment runs as that
/// ServiceAccount, is told the webhook configurations' names, and (never scheduled) has no
/// ready replica.
fn check_install(what: &str, objects: &[Value]) {
    let have = kinds(objects);
    for kind in INSTALL_KINDS {
        assert!(
            have.contains(*kind),
            "{what}: no {kind} on the server: {have:?}"
        );
    }
    let services: BTreeSet<(String, String)> = named(objects, "Service")
        .iter()
        .map(|s| {
            let ns = s["metadata"]["namespace"].as_str().unwrap_or_default();
            (ns.to_string(), name(s).to_string())
        })
        .collect();
    let mut configurations = Vec::new();
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        for config in named(objects, kind) {
            configurations.push(name(config).to_string());
            for hook in config["webhooks"].as_array().into_iter().flatten() {
                let service = &hook["clientConfig"]["service"];
                let target = (
                    service["namespace"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    service["name"].as_str().unwrap_or_default().to_string(),
                );
                assert!(
                    services.contains(&target),
                    "{what}: {kind} {} calls {target:?}, not a Service of the install ({services:?})",
                    name(config)
                );
            }
        }
    }
    let accounts: BTreeSet<&str> = named(objects, "ServiceAccount")
        .into_iter()
        .map(name)
        .collect();
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        let roles: BTreeSet<&str> = named(objects, &kind.replace("Binding", ""))
            .into_iter()
            .map(name)
            .collect();
        for binding in named(objects, kind) {
            let role = binding["roleRef"]["name"].as_str().unwrap_or_default();
            assert!(
                roles.contains(role),
                "{what}: {kind} {} binds {role}",
                name(binding)
            );
            for subject in binding["subjects"].as_array().into_iter().flatten() {
                let account = subject["name"].as_str().unwrap_or_default();
                assert!(
                    accounts.contains(account),
                    "{what}: {kind} {} binds {account}, not the install's ServiceAccount",
                    name(binding)
                );
            }
        }
    }
    for deployment in named(objects, "Deployment") {
        let pod = &deployment["spec"]["template"]["spec"];
        let account = pod["serviceAccountName"].as_str().unwrap_or_default();
        assert!(accounts.contains(account), "{what}: runs as {account}");
        let args: Vec<&str> = pod["containers"][0]["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for config in &configurations {
            assert!(
                args.iter().any(|a| a.ends_with(&format!("={config}"))),
                "{what}: the manager is not told the name {config}: {args:?}"
            );
        }
        let ready = deployment["status"]["readyReplicas"].as_i64().unwrap_or(0);
        assert_eq!(ready, 0, "{what}: no kubelet, no ready replica");
    }
}

/// `kubectl apply -f crd/`, then `-k config/default`, then `-k config/release` beside it.
pub async fn kustomize_default_and_release_overlay(ctx: Ctx) {
    let (_plane, env) = own_plane(&ctx).await;
    let crd = env.kubectl_ok(&["apply", "-f", "crd/"]);
    assert_eq!(
        applied(&crd).len(),
        2,
        "the CronJob and Calendar CRDs: {crd}"
    );
    wait_established(&env).await;

    let out = env.kubectl_ok(&["apply", "-k", "config/default"]);
    let lines = applied(&out);
    // The CRD is there already (unchanged); everything else is new.
    for (object, verb) in &lines {
        if !object.starts_with("customresourcedefinition") {
            assert_eq!(verb, "created", "{object}\n{out}");
        }
    }
    let default = get_all(&env, &["-k", "config/default"]);
    assert!(kinds(&default).contains("CustomResourceDefinition"));
    assert!(kinds(&default).contains("Namespace"));
    check_install("config/default", &default);

    let out = env.kubectl_ok(&["apply", "-k", "config/release"]);
    all_created("config/release", &out);
    let release = get_all(&env, &["-k", "config/release"]);
    check_install("config/release", &release);
    // The default install is still whole and still its own after the second one.
    let again = get_all(&env, &["-k", "config/default"]);
    assert_eq!(
        identities(&again),
        identities(&default),
        "config/default after config/release"
    );
    for (before, after) in default.iter().zip(&again) {
        assert_eq!(
            before["metadata"]["resourceVersion"],
            after["metadata"]["resourceVersion"],
            "config/release changed {}/{}",
            before["kind"],
            name(before)
        );
    }
    env.cleanup().await;
}

/// (kind, namespace, name) of each object.
fn identities(objects: &[Value]) -> Vec<(String, String, String)> {
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

/// The `helm install` commands of the README (continuation lines joined), except those that
/// need cert-manager's CRDs, which this cluster does not have, and those of a published
/// release (its chart is not this checkout's).
fn readme_helm_installs() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(crate::tools::root().join("README.md")).expect("README");
    let joined = readme.replace("\\\n", " ");
    joined
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("helm install "))
        .filter(|l| !l.contains("certManager.enabled=true"))
        // A published release's chart comes from its registry, not from this checkout.
        .filter(|l| !l.contains("oci://"))
        .map(|l| l.split_whitespace().skip(2).map(str::to_string).collect())
        .collect()
}

/// The chart rendered with `helm template` and applied with kubectl; then the README's `helm
/// install` commands, in order, against the same cluster.
pub async fn helm_template_and_the_readme_helm_installs(ctx: Ctx) {
    let (_plane, env) = own_plane(&ctx).await;
    wait_established(&env).await;

    let release = "kronjob-rendered";
    let rendered = env.helm_ok(&["template", release, "config/helm/kronjob", "-n", release]);
    let file = ctx.logs.join("helm-template.yaml");
    std::fs::write(&file, &rendered).expect("write the rendered chart");
    let file = file.to_str().expect("utf-8 path");
    env.kubectl_ok(&["create", "namespace", release]);
    let out = env.kubectl_ok(&["apply", "-f", file]);
    all_created("helm template | kubectl apply", &out);
    let objects = get_all(&env, &["-f", file]);
    check_install("helm template", &objects);

    let installs = readme_helm_installs();
    assert!(
        installs.len() >= 2,
        "the README's helm installs: {installs:?}"
    );
    for install in &installs {
        let args: Vec<&str> = install.iter().map(String::as_str).collect();
        env.helm_ok(&[&["install"], args.as_slice()].concat());
        let (name, namespace) = (args[0], flag_value(&args, "-n"));
        let manifest = env.helm_ok(&["get", "manifest", name, "-n", namespace]);
        let file = ctx.logs.join(format!("helm-{name}.yaml"));
        std::fs::write(&file, &manifest).expect("write the release's manifest");
        let objects = get_all(&env, &["-f", file.to_str().expect("utf-8 path")]);
        check_install(&format!("helm install {name}"), &objects);
        let status = env.helm_ok(&["status", name, "-n", namespace, "-o", "json"]);
        let status: Value = serde_json::from_str(&status).expect("helm status -o json");
        assert_eq!(status["info"]["status"], "deployed", "{name}: {status}");
    }
    wait_established(&env).await;
    env.cleanup().await;
}

/// The value after `flag` in `args`.
fn flag_value<'a>(args: &[&'a str], flag: &str) -> &'a str {
    args.iter()
        .position(|a| *a == flag)
        .and_then(|i| args.get(i + 1))
        .copied()
        .unwrap_or_else(|| panic!("{flag} in {args:?}"))
}
