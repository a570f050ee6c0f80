//! Shared e2e plumbing: a client, a throw-away namespace, and the real manager binary.

use std::future::Future;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};

/// A cluster connection and a namespace of our own.
pub struct Env {
    pub client: Client,
    pub namespace: String,
}

impl Env {
    /// Connect and create a fresh namespace. Panics unless KRONJOB_E2E=1.
    pub async fn new() -> Env {
        assert_eq!(
            std::env::var("KRONJOB_E2E").as_deref(),
            Ok("1"),
            "e2e tests run only with KRONJOB_E2E=1 and a cluster in KUBECONFIG (just e2e)"
        );
        let client = Client::try_default()
            .await
            .expect("a cluster in KUBECONFIG");
        let suffix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() % 1_000_000_000)
            .unwrap_or_default();
        let namespace = format!("kronjob-e2e-{suffix}");
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": namespace, "labels": {"app.kubernetes.io/part-of": "kronjob-e2e"}}
        }))
        .expect("namespace");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
        Env { client, namespace }
    }

    /// Delete the namespace (and everything in it).
    pub async fn cleanup(self) {
        let _ = Api::<Namespace>::all(self.client.clone())
            .delete(&self.namespace, &DeleteParams::background())
            .await;
    }
}

/// A running `kronjob run`, killed when dropped.
pub struct Manager {
    child: Child,
}

impl Manager {
    /// Start the real binary scoped to the test namespace, installing the CRD.
    pub fn spawn(env: &Env, extra: &[&str]) -> Manager {
        let mut args: Vec<String> = vec![
            "run".into(),
            "--install-crd".into(),
            "--namespace".into(),
            env.namespace.clone(),
            "--metrics-addr".into(),
            "127.0.0.1:0".into(),
            "--health-addr".into(),
            "127.0.0.1:0".into(),
            "--log-format".into(),
            "text".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new(env!("CARGO_BIN_EXE_kronjob"))
            .args(&args)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .spawn()
            .expect("start kronjob");
        Manager { child }
    }

    /// Kill the process at once (as a crashed leader would die).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Ask the process to stop (SIGTERM) and wait for it; returns its exit status code.
    pub fn terminate(&mut self) -> Option<i32> {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        self.child.wait().ok().and_then(|s| s.code())
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Wait until the CRD is established.
pub async fn wait_crd_established(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(
            api,
            "cronjobs.batch.kronjob.dev",
            conditions::is_crd_established(),
        ),
    )
    .await
    .expect("CRD established within 60 s")
    .expect("CRD watch");
}

/// Poll `check` every 500 ms until it is true or `limit` passes; `Some(elapsed)` on success.
pub async fn wait_for<F, Fut>(limit: Duration, mut check: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < limit {
        if check().await {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}
