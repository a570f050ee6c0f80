//! Shared e2e plumbing: the cluster a case runs on, a namespace of its own, the real manager
//! binary, kubectl and the plugin, and Pods finished as a kubelet would.

// A toolbox for the cases: not every case uses every tool.
#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kronjob_envtest::{Proc, free_port, random_suffix};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions::is_crd_established};
use kube::{Client, ResourceExt};
use serde_json::json;

/// The label on every namespace a case makes: the runner deletes them when the case ends.
pub const CASE_LABEL: &str = "e2e.kronjob.dev/case";
/// Longest wait for the real Job controller to finish a Job whose Pods a case finished.
pub const JOB_CONTROLLER: Duration = Duration::from_secs(60);

/// What a case is given: the shared cluster's kubeconfig, where its logs go, its name.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Admin kubeconfig of the shared control plane.
    pub kubeconfig: PathBuf,
    /// This case's log folder (manager logs), printed when the case fails.
    pub logs: PathBuf,
    /// The case's name.
    pub case: &'static str,
}

impl Ctx {
    /// A label value for the case (names may hold `::`).
    pub fn label(&self) -> String {
        label_value(self.case)
    }

    /// A control plane of the case's own, for what would disturb the other cases (killing the
    /// API server, installing cluster-wide webhooks), with the CRD installed and Established.
    pub async fn own_control_plane(
        &self,
        options: kronjob_envtest::Options,
    ) -> kronjob_envtest::ControlPlane {
        let assets = kronjob_envtest::Assets::from_env()
            .expect("KUBEBUILDER_ASSETS")
            .expect("KUBEBUILDER_ASSETS is set when cases run");
        let plane = kronjob_envtest::ControlPlane::start(&assets, options)
            .await
            .expect("start a control plane of the case's own");
        let kubectl = crate::tools::tool("kubectl");
        let kubeconfig = plane.kubeconfig().display().to_string();
        crate::tools::run(
            &kubectl,
            &["--kubeconfig", &kubeconfig, "apply", "-f", "crd/"],
        );
        let crds: Api<CustomResourceDefinition> =
            Api::all(plane.client().await.expect("admin client"));
        let established = await_condition(crds, "cronjobs.batch.kronjob.dev", is_crd_established());
        tokio::time::timeout(Duration::from_secs(60), established)
            .await
            .expect("the CRD established within 60 s")
            .expect("the CRD's watch");
        plane
    }
}

/// `case` as a label value: at most 63 of `[A-Za-z0-9._-]`.
pub fn label_value(case: &str) -> String {
    let value: String = case
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    value
        .chars()
        .rev()
        .take(63)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<String>()
        .trim_matches('_')
        .to_string()
}

/// A namespace of the case's own on a cluster, and the tools pointed at it.
pub struct Env {
    /// Admin client.
    pub client: Client,
    /// The namespace.
    pub namespace: String,
    /// The admin kubeconfig.
    pub kubeconfig: PathBuf,
    logs: PathBuf,
    managers: AtomicUsize,
}

impl Env {
    /// A fresh namespace on the shared cluster.
    pub async fn new(ctx: &Ctx) -> Env {
        Env::on(ctx, &ctx.kubeconfig).await
    }

    /// A fresh namespace on the cluster of `kubeconfig`.
    pub async fn on(ctx: &Ctx, kubeconfig: &Path) -> Env {
        let client = kronjob_envtest::client_from(kubeconfig)
            .await
            .expect("admin client");
        let short: String = ctx
            .case
            .rsplit("::")
            .next()
            .unwrap_or("case")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .take(20)
            .collect::<String>()
            .to_ascii_lowercase();
        let namespace = format!("e2e-{short}-{}", random_suffix());
        let ns: Namespace = serde_json::from_value(json!({
            "metadata": {"name": namespace, "labels": {CASE_LABEL: ctx.label()}}
        }))
        .expect("namespace");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
        Env {
            client,
            namespace,
            kubeconfig: kubeconfig.to_path_buf(),
            logs: ctx.logs.clone(),
            managers: AtomicUsize::new(0),
        }
    }

    /// An API handle for namespaced objects of this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Start `kronjob run` scoped to this namespace (the CRD already installed), with `extra`
    /// flags, as the admin.
    pub fn manager(&self, extra: &[&str]) -> Manager {
        self.manager_as(&self.kubeconfig, extra)
    }

    /// The same, with the identity of `kubeconfig`.
    pub fn manager_as(&self, kubeconfig: &Path, extra: &[&str]) -> Manager {
        self.manager_with_env(kubeconfig, extra, &[])
    }

    /// The same, with environment variables `vars` set (e.g. the `POD_NAME` and
    /// `POD_NAMESPACE` a Deployment passes).
    pub fn manager_with_env(
        &self,
        kubeconfig: &Path,
        extra: &[&str],
        vars: &[(&str, &str)],
    ) -> Manager {
        self.manager_program(
            Path::new(env!("CARGO_BIN_EXE_kronjob")),
            kubeconfig,
            extra,
            vars,
        )
    }

    /// The same with another `kronjob` binary: `program` (e.g. the image's).
    pub fn manager_program(
        &self,
        program: &Path,
        kubeconfig: &Path,
        extra: &[&str],
        vars: &[(&str, &str)],
    ) -> Manager {
        let n = self.managers.fetch_add(1, Ordering::Relaxed);
        let log = self.logs.join(format!("manager-{n}.log"));
        Manager::spawn_program(program, kubeconfig, &self.namespace, extra, vars, &log)
    }

    /// A token for the ServiceAccount `name` of this namespace from the TokenRequest API
    /// (`kubectl create token`), and a kubeconfig at `path` that authenticates with it
    /// against this cluster.
    pub fn service_account_kubeconfig(&self, name: &str, path: &Path) -> PathBuf {
        let token = self.kubectl_ok(&[
            "create",
            "token",
            name,
            "-n",
            &self.namespace,
            "--duration",
            "1h",
        ]);
        write_token_kubeconfig(&self.kubeconfig, token.trim(), &self.namespace, path);
        path.to_path_buf()
    }

    /// Run kubectl against this cluster (`-n` is not added).
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.command(&crate::tools::tool("kubectl"), args)
    }

    /// Run the `kubectl-kronjob` plugin against this cluster (`-n` is not added).
    pub fn plugin(&self, args: &[&str]) -> Output {
        self.command(Path::new(env!("CARGO_BIN_EXE_kubectl-kronjob")), args)
    }

    /// Run helm against this cluster.
    pub fn helm(&self, args: &[&str]) -> Output {
        self.command(&crate::tools::tool("helm"), args)
    }

    /// Run helm and return its stdout; panic with its stderr when it fails.
    pub fn helm_ok(&self, args: &[&str]) -> String {
        ok(&self.helm(args), "helm", args)
    }

    fn command(&self, program: &Path, args: &[&str]) -> Output {
        Command::new(program)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .current_dir(crate::tools::root())
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", program.display()))
    }

    /// Run kubectl and return its stdout; panic with its stderr when it fails.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        ok(&self.kubectl(args), "kubectl", args)
    }

    /// Run the plugin and return its stdout; panic with its stderr when it fails.
    pub fn plugin_ok(&self, args: &[&str]) -> String {
        ok(&self.plugin(args), "kubectl-kronjob", args)
    }

    /// The Jobs in this namespace controlled by the CronJob `cronjob` (by label), sorted by
    /// name.
    pub async fn jobs_of(&self, cronjob: &str) -> Vec<Job> {
        let mut jobs = self
            .api::<Job>()
            .list(&ListParams::default().labels(&format!("batch.kronjob.dev/cronjob={cronjob}")))
            .await
            .expect("list Jobs")
            .items;
        jobs.sort_by_key(|j| j.name_any());
        jobs
    }

    /// Finish the Job `job` as a kubelet would: wait for its Pods (the Job controller makes
    /// them) and set each one's phase to `phase` (`Succeeded` or `Failed`); the Job controller
    /// then finishes the Job with its real conditions.
    pub async fn finish_pods(&self, job: &str, phase: &str) {
        let pods: Api<Pod> = self.api();
        let selector = format!("batch.kubernetes.io/job-name={job}");
        let list = wait_for(Duration::from_secs(60), "the Job's Pods", || {
            let pods = pods.clone();
            let selector = selector.clone();
            async move {
                let items = pods
                    .list(&ListParams::default().labels(&selector))
                    .await
                    .ok()?
                    .items;
                (!items.is_empty()).then_some(items)
            }
        })
        .await;
        for pod in list {
            set_pod_phase(&pods, &pod.name_any(), phase).await;
        }
    }

    /// [`finish_pods`](Self::finish_pods), then wait (up to 60 s: the Job controller is slower
    /// on a loaded control plane) until the Job controller has finished the Job, so that what a
    /// case times next is kronjob's reaction alone.
    pub async fn finish_job(&self, job: &str, phase: &str) {
        self.finish_pods(job, phase).await;
        self.wait_job_finished(job, JOB_CONTROLLER).await;
    }

    /// Wait until the Job `job` has the condition `Complete` or `Failed` set to True.
    pub async fn wait_job_finished(&self, job: &str, limit: Duration) -> String {
        let jobs: Api<Job> = self.api();
        wait_for(limit, &format!("Job {job} finished"), || {
            let jobs = jobs.clone();
            async move {
                let j = jobs.get(job).await.ok()?;
                j.status?.conditions?.into_iter().find_map(|c| {
                    ((c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
                        .then_some(c.type_)
                })
            }
        })
        .await
    }

    /// Delete the namespace (and everything in it).
    pub async fn cleanup(self) {
        let _ = Api::<Namespace>::all(self.client.clone())
            .delete(&self.namespace, &DeleteParams::background())
            .await;
    }
}

/// Write a kubeconfig at `path` for the cluster of the kubeconfig `admin` (its server and CA),
/// authenticating with `token`, with `namespace` as its default.
pub fn write_token_kubeconfig(admin: &Path, token: &str, namespace: &str, path: &Path) {
    let text = std::fs::read_to_string(admin).expect("read the admin kubeconfig");
    let mut config: serde_json::Value =
        serde_yaml_ng::from_str(&text).expect("the admin kubeconfig is YAML or JSON");
    config["users"] = json!([{"name": "token", "user": {"token": token}}]);
    for context in config["contexts"].as_array_mut().into_iter().flatten() {
        context["context"]["user"] = json!("token");
        context["context"]["namespace"] = json!(namespace);
    }
    std::fs::write(path, config.to_string()).expect("write a kubeconfig");
}

/// Set a Pod's phase through its status, as the kubelet reports a container's end.
pub async fn set_pod_phase(pods: &Api<Pod>, name: &str, phase: &str) {
    let now = jiff::Timestamp::now().to_string();
    let (reason, exit) = if phase == "Succeeded" {
        ("Completed", 0)
    } else {
        ("Error", 1)
    };
    let status = json!({"status": {
        "phase": phase,
        "containerStatuses": [{
            "name": "c", "image": "busybox:1.36", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": exit, "reason": reason, "startedAt": now, "finishedAt": now}}
        }]
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap_or_else(|e| panic!("set Pod {name} {phase}: {e}"));
}

fn ok(out: &Output, program: &str, args: &[&str]) -> String {
    assert!(
        out.status.success(),
        "{program} {}: exit {:?}\n{}{}",
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A running `kronjob run`; stopped when dropped.
#[derive(Debug)]
pub struct Manager {
    proc: Proc,
    /// Port of `/healthz` and `/readyz`.
    pub health: u16,
    /// Port of `/metrics`.
    pub metrics: u16,
}

impl Manager {
    /// Start the real binary with `kubeconfig`, scoped to `namespace`, logging to `log`.
    pub fn spawn(kubeconfig: &Path, namespace: &str, extra: &[&str], log: &Path) -> Manager {
        Manager::spawn_with_env(kubeconfig, namespace, extra, &[], log)
    }

    /// The same, with the environment variables `vars` set.
    pub fn spawn_with_env(
        kubeconfig: &Path,
        namespace: &str,
        extra: &[&str],
        vars: &[(&str, &str)],
        log: &Path,
    ) -> Manager {
        let program = Path::new(env!("CARGO_BIN_EXE_kronjob"));
        Manager::spawn_program(program, kubeconfig, namespace, extra, vars, log)
    }

    /// The same with the `kronjob` binary `program`.
    pub fn spawn_program(
        program: &Path,
        kubeconfig: &Path,
        namespace: &str,
        extra: &[&str],
        vars: &[(&str, &str)],
        log: &Path,
    ) -> Manager {
        let health = free_port().expect("port");
        // A case may give the metrics address (`--metrics-addr=127.0.0.1:PORT`), e.g. to
        // restart a manager where Prometheus scrapes it.
        let given = extra
            .iter()
            .find_map(|a| a.strip_prefix("--metrics-addr="))
            .map(|addr| {
                addr.rsplit(':')
                    .next()
                    .and_then(|p| p.parse::<u16>().ok())
                    .unwrap_or_else(|| panic!("--metrics-addr={addr}: no port"))
            });
        let metrics = given.unwrap_or_else(|| free_port().expect("port"));
        let mut args: Vec<String> = vec![
            "run".into(),
            "--namespace".into(),
            namespace.into(),
            "--health-addr".into(),
            format!("127.0.0.1:{health}"),
            "--log-format".into(),
            "text".into(),
        ];
        if given.is_none() {
            args.extend(["--metrics-addr".into(), format!("127.0.0.1:{metrics}")]);
        }
        // The cases read /metrics over plain HTTP (`metrics_text`), unless they ask for more.
        if !extra.iter().any(|a| a.starts_with("--metrics-secure")) {
            args.push("--metrics-secure=false".into());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut command = Command::new(program);
        command
            .args(&args)
            .env("KUBECONFIG", kubeconfig)
            .env("NO_COLOR", "1")
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .envs(vars.iter().copied());
        let proc = Proc::spawn("kronjob run", command, log).expect("start kronjob run");
        Manager {
            proc,
            health,
            metrics,
        }
    }

    /// Wait until `/readyz` answers 200 (caches synced on the leader, webhook serving).
    pub async fn wait_ready(&mut self, limit: Duration) {
        let port = self.health;
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.proc.exited() {
                panic!("the manager exited ({status}):\n{}", self.proc.log_tail(40));
            }
            if http_get(port, "/readyz")
                .await
                .is_some_and(|(code, _)| code == 200)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!(
            "the manager was not ready within {limit:?}:\n{}",
            self.proc.log_tail(40)
        );
    }

    /// Kill at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        self.proc.kill();
    }

    /// Ask it to stop (SIGTERM) and wait up to 20 s; its exit code.
    pub fn terminate(&mut self) -> Option<i32> {
        self.proc
            .terminate(Duration::from_secs(20))
            .and_then(|s| s.code())
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// Its exit status, if it has exited.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.proc.exited()
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.proc.log()).unwrap_or_default()
    }

    /// `GET /metrics` (plain HTTP): the exposition text.
    pub async fn metrics_text(&self) -> String {
        http_get(self.metrics, "/metrics")
            .await
            .map(|(_, body)| body)
            .unwrap_or_default()
    }
}

/// A plain HTTP/1.0 GET on 127.0.0.1: the status code and body.
pub async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut response))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&response);
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((code, body))
}

/// The sum of the samples of metric `name` in the exposition `text` whose labels include
/// every pair of `labels` (0 when there is none).
pub fn metric_sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, rest) = match series.split_once('{') {
                Some((metric, rest)) => (metric, rest),
                None => (series, ""),
            };
            let matches = metric == name
                && labels
                    .iter()
                    .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
            matches.then(|| value.parse::<f64>().ok()).flatten()
        })
        .sum()
}

/// Poll `probe` every 250 ms until it gives a value; panic naming `what` after `limit`.
pub async fn wait_for<T, F, Fut>(limit: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Minutes since the epoch of the slot a Job named `<cronjob>-<minutes>` ran for.
pub fn slot_of(job: &Job) -> Option<i64> {
    job.metadata
        .name
        .as_deref()?
        .rsplit('-')
        .next()?
        .parse()
        .ok()
}

/// The current minute since the epoch.
pub fn this_minute() -> i64 {
    jiff::Timestamp::now().as_second().div_euclid(60)
}

/// Sleep until the wall clock reads second `second` of a minute, so that what follows has
/// the rest of the minute before the next slot. Returns the minute it waited for.
pub async fn at_second(second: i64) -> i64 {
    let now = jiff::Timestamp::now();
    let secs = now.as_second();
    let minute = secs.div_euclid(60);
    let target = if secs.rem_euclid(60) <= second {
        minute * 60 + second
    } else {
        (minute + 1) * 60 + second
    };
    let wait = jiff::Timestamp::from_second(target)
        .expect("time")
        .duration_since(now);
    tokio::time::sleep(Duration::try_from(wait).unwrap_or_default()).await;
    target.div_euclid(60)
}

/// Apply a CronJob manifest (server-side apply, as `kubectl apply --server-side`).
pub async fn apply<K>(api: &Api<K>, object: serde_json::Value) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = object["metadata"]["name"]
        .as_str()
        .expect("metadata.name")
        .to_string();
    api.patch(
        &name,
        &PatchParams::apply("kronjob-e2e").force(),
        &Patch::Apply(&object),
    )
    .await
    .unwrap_or_else(|e| panic!("apply {name}: {e}"))
}
