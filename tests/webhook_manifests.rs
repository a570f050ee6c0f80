//! The webhook manifests agree with the code: names, paths, ports, rules and settings; and
//! they render with `kubectl kustomize`.

#[path = "support/tools.rs"]
mod tools;

use clap::Parser;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhookConfiguration,
    WebhookClientConfig,
};
use k8s_openapi::api::core::v1::Service;
use kronjob::api::{GROUP, VERSION};
use kronjob::webhook::admission::{MUTATE_PATH, VALIDATE_PATH};
use kronjob::webhook::certs::{MUTATING_CONFIG, VALIDATING_CONFIG};
use serde::Deserialize;

fn documents(path: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).expect("manifest file");
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|doc| serde_json::Value::deserialize(doc).expect("YAML document"))
        .collect()
}

fn check_rules(rules: &[RuleWithOperations]) {
    assert_eq!(rules.len(), 1);
    let rule = &rules[0];
    assert_eq!(rule.api_groups.as_deref(), Some(&[GROUP.to_string()][..]));
    assert_eq!(
        rule.api_versions.as_deref(),
        Some(&[VERSION.to_string()][..])
    );
    assert_eq!(
        rule.resources.as_deref(),
        Some(&["cronjobs".to_string()][..])
    );
    assert_eq!(
        rule.operations.as_deref(),
        Some(&["CREATE".to_string(), "UPDATE".to_string()][..])
    );
}

fn check_client(client: &WebhookClientConfig, path: &str) {
    let service = client.service.as_ref().expect("service reference");
    assert_eq!(service.name, "kronjob-webhook");
    assert_eq!(service.namespace, "kronjob-system");
    assert_eq!(service.port, Some(443));
    assert_eq!(service.path.as_deref(), Some(path));
    assert!(client.url.is_none());
}

#[test]
fn configurations_match_the_server() {
    let docs = documents("webhook/manifests.yaml");
    assert_eq!(docs.len(), 2);
    let mutating: MutatingWebhookConfiguration =
        serde_json::from_value(docs[0].clone()).expect("mutating configuration");
    let validating: ValidatingWebhookConfiguration =
        serde_json::from_value(docs[1].clone()).expect("validating configuration");
    assert_eq!(mutating.metadata.name.as_deref(), Some(MUTATING_CONFIG));
    assert_eq!(validating.metadata.name.as_deref(), Some(VALIDATING_CONFIG));

    let m = &mutating.webhooks.as_ref().expect("webhooks")[..];
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].name, "mcronjob-v1.batch.kronjob.dev");
    // Defaulting may fail open: the schema applies the same defaults (checked in tests/crd.rs).
    assert_eq!(m[0].failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(m[0].admission_review_versions, ["v1"]);
    assert_eq!(m[0].side_effects, "None");
    assert_eq!(m[0].timeout_seconds, Some(5));
    check_client(&m[0].client_config, MUTATE_PATH);
    check_rules(m[0].rules.as_deref().expect("rules"));

    let v = &validating.webhooks.as_ref().expect("webhooks")[..];
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].name, "vcronjob-v1.batch.kronjob.dev");
    assert_eq!(v[0].failure_policy.as_deref(), Some("Fail"));
    assert_eq!(v[0].admission_review_versions, ["v1"]);
    assert_eq!(v[0].side_effects, "None");
    assert_eq!(v[0].timeout_seconds, Some(5));
    check_client(&v[0].client_config, VALIDATE_PATH);
    check_rules(v[0].rules.as_deref().expect("rules"));
}

#[derive(clap::Parser)]
struct Cli {
    #[command(flatten)]
    args: kronjob::webhook::WebhookArgs,
}

#[test]
fn webhook_flags_have_their_defaults() {
    let args = Cli::parse_from(["kronjob"]).args;
    assert_eq!(args.webhook_addr.to_string(), "0.0.0.0:9443");
    assert!(!args.webhook_self_signed);
    assert_eq!(args.webhook_service_name, "kronjob-webhook");
    assert_eq!(args.webhook_mutating_configuration, MUTATING_CONFIG);
    assert_eq!(args.webhook_validating_configuration, VALIDATING_CONFIG);
    let args = Cli::parse_from([
        "kronjob",
        "--webhook-addr",
        "127.0.0.1:8443",
        "--webhook-cert-dir",
        "/certs",
        "--webhook-self-signed",
        "--webhook-namespace",
        "ops",
        "--webhook-mutating-configuration",
        "team-a-mutating",
        "--webhook-validating-configuration",
        "team-a-validating",
    ])
    .args;
    assert_eq!(args.webhook_mutating_configuration, "team-a-mutating");
    assert_eq!(args.webhook_validating_configuration, "team-a-validating");
    assert_eq!(args.webhook_addr.port(), 8443);
    assert_eq!(args.webhook_cert_dir, std::path::PathBuf::from("/certs"));
    assert!(args.webhook_self_signed);
    assert_eq!(args.webhook_namespace, "ops");
}

#[test]
fn service_targets_the_webhook_port() {
    let docs = documents("webhook/service.yaml");
    let service: Service = serde_json::from_value(docs[0].clone()).expect("service");
    assert_eq!(service.metadata.name.as_deref(), Some("kronjob-webhook"));
    assert_eq!(
        service.metadata.namespace.as_deref(),
        Some("kronjob-system")
    );
    let spec = service.spec.expect("spec");
    assert_eq!(
        spec.selector
            .expect("selector")
            .get("app.kubernetes.io/name")
            .map(String::as_str),
        Some("kronjob")
    );
    let ports = spec.ports.expect("ports");
    assert_eq!(ports[0].port, 443);
    let default_port = Cli::parse_from(["kronjob"]).args.webhook_addr.port();
    assert_eq!(
        ports[0].target_port,
        Some(
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(i32::from(default_port))
        )
    );
}

#[test]
fn kustomize_renders_base_and_cert_manager_component() {
    let kubectl = tools::tool("kubectl");
    let base = std::process::Command::new(&kubectl)
        .args(["kustomize", "webhook"])
        .output()
        .expect("run kubectl");
    assert!(
        base.status.success(),
        "{}",
        String::from_utf8_lossy(&base.stderr)
    );
    let text = String::from_utf8_lossy(&base.stdout);
    for kind in [
        "Service",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        assert!(text.contains(&format!("kind: {kind}")), "{kind} in\n{text}");
    }
    // The component needs an overlay outside webhook/ (kustomize refuses cycles).
    let overlay = std::env::temp_dir().join(format!("kronjob-kustomize-{}", std::process::id()));
    std::fs::create_dir_all(&overlay).expect("overlay dir");
    let root = std::env::current_dir().expect("cwd");
    let rel = pathdiff(&root, &overlay);
    std::fs::write(
        overlay.join("kustomization.yaml"),
        format!("resources: [{rel}/webhook]\ncomponents: [{rel}/webhook/certmanager]\n"),
    )
    .expect("write overlay");
    let out = std::process::Command::new(&kubectl)
        .arg("kustomize")
        .arg(&overlay)
        .output()
        .expect("run kubectl");
    let _ = std::fs::remove_dir_all(&overlay);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.matches("cert-manager.io/inject-ca-from: kronjob-system/kronjob-webhook-cert")
            .count(),
        2,
        "{text}"
    );
    assert!(text.contains("kind: Certificate") && text.contains("kind: Issuer"));
    assert!(text.contains("secretName: kronjob-webhook-cert"));
}

/// `target` relative to `from` (both absolute): `../..` up to `/`, then `target`.
fn pathdiff(target: &std::path::Path, from: &std::path::Path) -> String {
    let ups = from.components().count().saturating_sub(1);
    let mut rel = vec![".."; ups].join("/");
    let tail = target.to_string_lossy();
    rel.push_str(&tail);
    rel
}
