//! The admission webhook as the API server calls it: the manager serves it on 127.0.0.1 with a
//! certificate from a throw-away CA, and the project's own webhook configurations
//! (`webhook/manifests.yaml`) are installed with a `url:` client config, the CA as `caBundle`,
//! and a namespace selector so only the case's namespace is affected.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kronjob_envtest::free_port;
use kube::api::{Api, DeleteParams, PostParams};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, SanType};
use serde_json::{Value, json};

use crate::harness::{CASE_LABEL, Ctx, Env, Manager};

/// A manager serving the webhook for the Env's namespace, and the configurations that send
/// that namespace's CronJob writes to it.
pub struct Webhook {
    /// The manager (stopped when this is dropped).
    #[allow(dead_code)]
    pub manager: Manager,
    /// The loopback port it serves on.
    #[allow(dead_code)]
    pub port: u16,
    /// The PEM of the CA its certificate (for `127.0.0.1`) is signed by.
    #[allow(dead_code)]
    pub ca: String,
    names: String,
    client: kube::Client,
}

impl Webhook {
    /// Start a manager with `extra` flags serving the webhook, install the configurations and
    /// wait until the API server calls it.
    pub async fn start(ctx: &Ctx, env: &Env, extra: &[&str]) -> Webhook {
        let dir = ctx.logs.join(format!("webhook-certs-{}", env.namespace));
        std::fs::create_dir_all(&dir).expect("cert folder");
        let ca = write_serving_pair(&dir);
        let port = free_port().expect("port");
        let addr = format!("127.0.0.1:{port}");
        let mut args = vec![
            "--webhook-addr",
            addr.as_str(),
            "--webhook-cert-dir",
            dir.to_str().expect("utf-8 path"),
        ];
        args.extend_from_slice(extra);
        let mut manager = env.manager(&args);
        manager.wait_ready(Duration::from_secs(60)).await;
        let names = format!("{}-webhook", env.namespace);
        install(ctx, env, &names, port, &ca).await;
        Webhook {
            manager,
            port,
            ca,
            names,
            client: env.client.clone(),
        }
    }

    /// Remove the configurations.
    pub async fn uninstall(&self) {
        let dp = DeleteParams::default();
        let _ = Api::<MutatingWebhookConfiguration>::all(self.client.clone())
            .delete(&self.names, &dp)
            .await;
        let _ = Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
            .delete(&self.names, &dp)
            .await;
    }
}

/// Write `tls.crt` and `tls.key` for 127.0.0.1 into `dir`, signed by a new CA; the CA's PEM.
pub fn write_serving_pair(dir: &Path) -> String {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA");
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().expect("key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.subject_alt_names = vec![SanType::IpAddress([127, 0, 0, 1].into())];
    let cert = params
        .signed_by(&key, &issuer)
        .expect("serving certificate");
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).expect("write key");
    std::fs::write(dir.join("tls.crt"), cert.pem()).expect("write certificate");
    ca_cert.pem()
}

/// The project's webhook configurations, renamed to `name`, pointed at 127.0.0.1:`port` and
/// limited to the Env's namespace.
async fn install(ctx: &Ctx, env: &Env, name: &str, port: u16, ca: &str) {
    let text = std::fs::read_to_string(crate::tools::root().join("webhook/manifests.yaml"))
        .expect("webhook/manifests.yaml");
    let docs = crate::tools::yaml_documents(&text);
    let label = ctx.label();
    let pp = PostParams::default();
    for mut doc in docs {
        // Both kinds share the fields changed here; edit them as JSON, create them typed.
        doc["metadata"]["name"] = json!(name);
        doc["metadata"]["labels"] = json!({CASE_LABEL: label});
        for hook in doc["webhooks"].as_array_mut().into_iter().flatten() {
            let path = hook["clientConfig"]["service"]["path"]
                .as_str()
                .unwrap_or_default();
            hook["clientConfig"] = json!({
                "url": format!("https://127.0.0.1:{port}{path}"),
                "caBundle": ByteString(ca.as_bytes().to_vec()),
            });
            hook["namespaceSelector"] =
                json!({"matchLabels": {"kubernetes.io/metadata.name": env.namespace}});
        }
        match doc["kind"].as_str() {
            Some("MutatingWebhookConfiguration") => {
                let config: MutatingWebhookConfiguration =
                    serde_json::from_value(doc).expect("mutating configuration");
                Api::<MutatingWebhookConfiguration>::all(env.client.clone())
                    .create(&pp, &config)
                    .await
                    .expect("create the mutating configuration");
            }
            Some("ValidatingWebhookConfiguration") => {
                let config: ValidatingWebhookConfiguration =
                    serde_json::from_value(doc).expect("validating configuration");
                Api::<ValidatingWebhookConfiguration>::all(env.client.clone())
                    .create(&pp, &config)
                    .await
                    .expect("create the validating configuration");
            }
            _ => {}
        }
    }
    // The API server picks configurations up within a moment: wait until a server-side dry
    // run of an invalid CronJob is refused by the webhook.
    let cronjobs = env.api::<kronjob::api::CronJob>();
    let probe: kronjob::api::CronJob = serde_json::from_value(serde_json::json!({
        "apiVersion": "batch.kronjob.dev/v1", "kind": "CronJob",
        "metadata": {"name": "webhook-probe"},
        "spec": {"schedule": "* * * * *", "timeZone": "Mars/Olympus", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}}}}}
    }))
    .expect("probe");
    crate::harness::wait_for(
        Duration::from_secs(30),
        "the API server to call the webhook",
        || {
            let cronjobs = cronjobs.clone();
            let probe = probe.clone();
            async move {
                match cronjobs
                    .create(
                        &PostParams {
                            dry_run: true,
                            ..Default::default()
                        },
                        &probe,
                    )
                    .await
                {
                    Err(kube::Error::Api(s)) if s.message.contains("admission webhook") => Some(()),
                    _ => None,
                }
            }
        },
    )
    .await;
}

/// An `AdmissionReview` of a CronJob as the API server sends it: `operation` (`CREATE` or
/// `UPDATE`) of `object` (with `old` on update) in `namespace`.
pub fn review(operation: &str, namespace: &str, object: &Value, old: Option<&Value>) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "3f7c1a52-0d4e-4b8e-9a51-6c2d3e4f5a6b",
            "kind": {"group": "batch.kronjob.dev", "version": "v1", "kind": "CronJob"},
            "resource": {"group": "batch.kronjob.dev", "version": "v1", "resource": "cronjobs"},
            "requestKind": {"group": "batch.kronjob.dev", "version": "v1", "kind": "CronJob"},
            "requestResource": {"group": "batch.kronjob.dev", "version": "v1", "resource": "cronjobs"},
            "name": object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default(),
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "admin", "groups": ["system:masters", "system:authenticated"]},
            "object": object,
            "oldObject": old,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
        }
    })
}

/// POST `body` to `path` of a webhook on 127.0.0.1:`port` over TLS, trusting only `ca` and
/// checking the certificate is for `server_name`: the HTTP status and the body.
pub async fn post(
    ca: &str,
    port: u16,
    server_name: &str,
    path: &str,
    body: String,
) -> (u16, String) {
    let client = crate::tls_support::Client::new(ca);
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let (status, body) = client.post(addr, server_name, path, body).await;
    (status, String::from_utf8_lossy(&body).into_owned())
}
