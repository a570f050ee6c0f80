//! The manager as the chart runs it, with nothing but the chart's RBAC: the chart rendered with
//! a release of the case's own into the case's namespace, its ServiceAccount, ClusterRole,
//! Role and bindings applied, a token for the ServiceAccount from the TokenRequest API, and
//! `kronjob run` with the flags and environment of the chart's Deployment. Everything the
//! manager does must then work (Jobs, status, Events, history, TTL, the leader Lease, a
//! manual run, the self-signed webhook certificate and the webhook's dry run) without one
//! `forbidden` in its log: a rule missing from the chart fails this case.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kronjob::api::CronJob;
use kronjob_envtest::{free_port, random_suffix};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

use crate::harness::{CASE_LABEL, Ctx, Env, Manager, metric_sum, wait_for};

crate::cases!(
    rbac:
    manager_runs_with_the_charts_rbac,
    metrics_need_a_token_the_charts_metrics_reader_allows,
);

/// The objects the chart renders for `release` in the Env's namespace, with the manager's
/// default Job TTL set and the values `sets` (`key=value`).
pub(crate) fn render(env: &Env, release: &str, sets: &[&str]) -> Vec<Value> {
    let mut args = vec![
        "template",
        release,
        "config/helm/kronjob",
        "-n",
        &env.namespace,
        "--set",
        "controller.defaultJobTTL=5s",
    ];
    for set in sets {
        args.extend(["--set", set]);
    }
    let rendered = env.helm_ok(&args);
    crate::tools::yaml_documents(&rendered)
}

/// Apply the chart's ServiceAccount and RBAC objects, and its webhook configurations with a
/// namespace selector that matches no namespace (so that the API server never calls them: the
/// manager only keeps their caBundle current). Cluster-scoped objects carry the case's label.
pub(crate) fn apply_identity(ctx: &Ctx, env: &Env, objects: &[Value]) {
    let kinds = [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ];
    let mut selected: Vec<Value> = objects
        .iter()
        .filter(|o| kinds.contains(&o["kind"].as_str().unwrap_or_default()))
        .cloned()
        .collect();
    for object in &mut selected {
        object["metadata"]["labels"][CASE_LABEL] = json!(ctx.label());
        for hook in object["webhooks"].as_array_mut().into_iter().flatten() {
            hook["namespaceSelector"] =
                json!({"matchLabels": {"e2e.kronjob.dev/no-namespace": "true"}});
        }
    }
    let applied: Vec<&str> = selected.iter().filter_map(|o| o["kind"].as_str()).collect();
    for kind in kinds {
        assert!(applied.contains(&kind), "the chart renders no {kind}");
    }
    let file = ctx.logs.join("chart-identity.json");
    let list = json!({"apiVersion": "v1", "kind": "List", "items": selected});
    std::fs::write(&file, list.to_string()).expect("write the chart's RBAC");
    env.kubectl_ok(&["apply", "-f", file.to_str().expect("utf-8 path")]);
}

/// The chart Deployment's manager container: its args (without those the harness sets:
/// addresses and log format; nor those starting with one of `dropped`) and the names of the
/// env vars it takes from the Pod.
pub(crate) fn deployment_args(
    objects: &[Value],
    dropped: &[&str],
) -> (Vec<String>, Vec<(String, String)>) {
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("the chart renders a Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let harness_owned = [
        "--metrics-addr",
        "--health-addr",
        "--webhook-addr",
        "--log-format",
    ];
    let args: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .filter(|a| *a != "run")
        .filter(|a| {
            !harness_owned
                .iter()
                .chain(dropped)
                .any(|h| a.starts_with(h))
        })
        .map(str::to_string)
        .collect();
    let field_refs: Vec<(String, String)> = container["env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let path = e.pointer("/valueFrom/fieldRef/fieldPath")?.as_str()?;
            Some((e["name"].as_str()?.to_string(), path.to_string()))
        })
        .collect();
    (args, field_refs)
}

/// A CronJob on `* * * * *`, keeping no successful Job; its Jobs set their own long TTL, so
/// only the history limit removes them.
fn scheduled(name: &str) -> Value {
    let mut cj = crate::cronjob::every_minute(name, 0);
    cj["spec"]["jobTemplate"]["spec"]["ttlSecondsAfterFinished"] = json!(3600);
    cj
}

/// A suspended CronJob keeping every Job: only manual runs, removed by their (default) TTL.
fn manual(name: &str) -> Value {
    let mut cj = crate::cronjob::every_minute(name, 10);
    cj["spec"]["suspend"] = json!(true);
    cj
}

/// `kronjob run` as the chart's Deployment runs it: with its ServiceAccount's token, its args
/// (less those starting with one of `dropped`) and its environment; the manager, its webhook
/// port and its Pod name.
pub(crate) fn start_as_the_chart(
    ctx: &Ctx,
    env: &Env,
    objects: &[Value],
    fullname: &str,
    dropped: &[&str],
) -> (Manager, u16, String) {
    let program = std::path::Path::new(env!("CARGO_BIN_EXE_kronjob"));
    start_program_as_the_chart(ctx, env, objects, fullname, dropped, program, &[])
}

/// The same with the `kronjob` binary `program` and the arguments `more` added.
pub(crate) fn start_program_as_the_chart(
    ctx: &Ctx,
    env: &Env,
    objects: &[Value],
    fullname: &str,
    dropped: &[&str],
    program: &std::path::Path,
    more: &[&str],
) -> (Manager, u16, String) {
    let (chart_args, field_refs) = deployment_args(objects, dropped);
    let account = objects
        .iter()
        .find(|o| o["kind"] == "ServiceAccount")
        .and_then(|o| o["metadata"]["name"].as_str())
        .expect("the ServiceAccount's name")
        .to_string();
    let kubeconfig = env.service_account_kubeconfig(&account, &ctx.logs.join("sa.kubeconfig"));
    let pod_name = format!("{fullname}-7d9f8-abcde");
    let vars: Vec<(&str, &str)> = field_refs
        .iter()
        .map(|(name, path)| match path.as_str() {
            "metadata.name" => (name.as_str(), pod_name.as_str()),
            "metadata.namespace" => (name.as_str(), env.namespace.as_str()),
            other => panic!("the Deployment passes {other}: add it here"),
        })
        .collect();
    let webhook_port = free_port().expect("port");
    let webhook_addr = format!("127.0.0.1:{webhook_port}");
    let mut args: Vec<&str> = chart_args.iter().map(String::as_str).collect();
    args.extend(["--webhook-addr", webhook_addr.as_str()]);
    args.extend_from_slice(more);
    for expected in [
        "--leader-elect",
        "--webhook-self-signed",
        "--default-job-ttl=5s",
    ] {
        assert!(args.contains(&expected), "chart args {args:?}");
    }
    let manager = env.manager_program(program, &kubeconfig, &args, &vars);
    (manager, webhook_port, pod_name)
}

pub async fn manager_runs_with_the_charts_rbac(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let ns = env.namespace.clone();
    let release = format!("rb-{}", random_suffix());
    let fullname = format!("{release}-kronjob");
    let objects = render(&env, &release, &[]);
    apply_identity(&ctx, &env, &objects);
    // This case reads /metrics over plain HTTP; the next one scrapes it as the chart serves it.
    let (mut manager, webhook_port, pod_name) =
        start_as_the_chart(&ctx, &env, &objects, &fullname, &["--metrics-secure"]);
    manager.wait_ready(Duration::from_secs(60)).await;

    let cronjobs = env.api::<CronJob>();
    crate::cronjob::create(&env, scheduled("scheduled")).await;
    crate::cronjob::create(&env, manual("manual")).await;

    leader_lease(&env, &format!("{fullname}-leader"), &pod_name).await;
    let ca = self_signed_certificate(&env, &fullname).await;
    webhook_dry_run(
        &env,
        &ca,
        webhook_port,
        &format!("{fullname}-webhook.{ns}.svc"),
    )
    .await;
    manual_run_expires(&env, &manager).await;
    scheduled_run_trimmed(&env, &cronjobs).await;
    events_published(&env).await;

    let metrics = manager.metrics_text().await;
    assert_eq!(
        metric_sum(&metrics, "kronjob_leader", &[]),
        1.0,
        "{metrics}"
    );
    let log = manager.log();
    for needle in ["forbidden", "Forbidden", "code: 403", "403 Forbidden"] {
        assert!(
            !log.contains(needle),
            "the manager was refused ({needle}):\n{log}"
        );
    }
    for metric in ["kronjob_reconcile_errors_total", "kronjob_ttl_errors_total"] {
        let errors = metric_sum(&metrics, metric, &[]);
        assert_eq!(errors, 0.0, "{metric}:\n{metrics}");
    }
    assert_eq!(manager.terminate(), Some(0), "graceful stop exits 0");
    env.cleanup().await;
}

/// The leader Lease of the release, in the case's namespace, held by this replica.
async fn leader_lease(env: &Env, name: &str, holder: &str) {
    let leases = env.api::<Lease>();
    wait_for(Duration::from_secs(30), "the leader Lease", || async {
        let lease = leases.get(name).await.ok()?;
        let spec = lease.spec?;
        (spec.holder_identity.as_deref() == Some(holder)).then_some(())
    })
    .await;
}

/// The self-signed certificate's Secret in the case's namespace, and its CA in both webhook
/// configurations of the release; the CA's PEM.
pub(crate) async fn self_signed_certificate(env: &Env, fullname: &str) -> String {
    let secrets = env.api::<Secret>();
    let secret = format!("{fullname}-webhook-self-signed");
    let ca = wait_for(
        Duration::from_secs(30),
        "the certificate Secret",
        || async {
            let s = secrets.get(&secret).await.ok()?;
            let ca = s.data?.get("ca.crt")?.0.clone();
            String::from_utf8(ca).ok()
        },
    )
    .await;
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(env.client.clone());
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(env.client.clone());
    wait_for(Duration::from_secs(30), "the caBundles", || async {
        let m = mutating.get(&format!("{fullname}-mutating")).await.ok()?;
        let v = validating
            .get(&format!("{fullname}-validating"))
            .await
            .ok()?;
        let bundles: Vec<Option<Vec<u8>>> = m
            .webhooks
            .iter()
            .flatten()
            .map(|w| w.client_config.ca_bundle.clone().map(|b| b.0))
            .chain(
                v.webhooks
                    .iter()
                    .flatten()
                    .map(|w| w.client_config.ca_bundle.clone().map(|b| b.0)),
            )
            .collect();
        (bundles.len() == 2 && bundles.iter().all(|b| b.as_deref() == Some(ca.as_bytes())))
            .then_some(())
    })
    .await;
    ca
}

/// The webhook, called over TLS as the API server would call the release's Service, denies a
/// CronJob whose Job template the API server refuses: the manager's dry-run create of the Job
/// works with the ServiceAccount's permissions.
async fn webhook_dry_run(env: &Env, ca: &str, port: u16, server_name: &str) {
    let mut cj = crate::cronjob::every_minute("refused", 3);
    cj["metadata"]["namespace"] = json!(env.namespace);
    cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "MY=VAR", "value": "1"}]);
    let body = crate::webhook::review("CREATE", &env.namespace, &cj, None).to_string();
    let path = "/validate-batch-kronjob-dev-v1-cronjob";
    let (status, answer) = crate::webhook::post(ca, port, server_name, path, body).await;
    assert_eq!(status, 200, "{answer}");
    let answer: Value = serde_json::from_str(&answer).expect("an AdmissionReview");
    assert_eq!(answer["response"]["allowed"], false, "{answer}");
    let message = answer["response"]["status"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("spec.jobTemplate.spec.template.spec.containers[0].env[0].name"),
        "{answer}"
    );
}

/// `kubectl kronjob trigger` on the suspended CronJob: the manager creates the run with the
/// chart's default TTL and removes the request; once its Pod succeeds the TTL controller
/// deletes it.
async fn manual_run_expires(env: &Env, manager: &Manager) {
    let out = env.plugin_ok(&["trigger", "manual", "-n", &env.namespace, "--wait", "30s"]);
    let jobs = env.jobs_of("manual").await;
    assert_eq!(jobs.len(), 1, "{out}");
    let job = jobs[0].name_any();
    let ttl = jobs[0]
        .spec
        .as_ref()
        .and_then(|s| s.ttl_seconds_after_finished);
    assert_eq!(ttl, Some(5), "the chart's --default-job-ttl");
    env.finish_pods(&job, "Succeeded").await;
    wait_for(Duration::from_secs(60), "the TTL deletion", || async {
        env.jobs_of("manual").await.is_empty().then_some(())
    })
    .await;
    let metrics = manager.metrics_text().await;
    let deleted = metric_sum(&metrics, "kronjob_ttl_deletions_total", &[("kind", "job")]);
    assert_eq!(deleted, 1.0, "{metrics}");
}

/// The scheduled CronJob's Job: created, its status written, finished, and deleted by the
/// history limit of 0.
async fn scheduled_run_trimmed(env: &Env, cronjobs: &Api<CronJob>) {
    let job = wait_for(Duration::from_secs(75), "the slot's Job", || async {
        env.jobs_of("scheduled").await.into_iter().next()
    })
    .await;
    let name = job.name_any();
    wait_for(Duration::from_secs(15), "status.active", || async {
        let status = cronjobs.get_status("scheduled").await.ok()?.status?;
        status
            .active
            .iter()
            .any(|r| r.name.as_deref() == Some(name.as_str()))
            .then_some(())
    })
    .await;
    env.finish_pods(&name, "Succeeded").await;
    wait_for(Duration::from_secs(60), "lastSuccessfulTime", || async {
        cronjobs
            .get_status("scheduled")
            .await
            .ok()?
            .status?
            .last_successful_time
            .map(|_| ())
    })
    .await;
    wait_for(Duration::from_secs(30), "the history trim", || async {
        let left = env.jobs_of("scheduled").await;
        (!left.iter().any(|j| j.name_any() == name)).then_some(())
    })
    .await;
}

/// The Events the reconciler publishes, on the CronJobs.
async fn events_published(env: &Env) {
    let events = env.api::<Event>();
    let want = [
        ("scheduled", "SuccessfulCreate"),
        ("scheduled", "SawCompletedJob"),
        ("scheduled", "SuccessfulDelete"),
        ("manual", "SuccessfulCreate"),
    ];
    wait_for(Duration::from_secs(30), "the Events", || async {
        let list = events.list(&ListParams::default()).await.ok()?.items;
        let seen: Vec<(String, String)> = list
            .iter()
            .filter_map(|e| {
                let on = e.regarding.as_ref()?.name.clone()?;
                Some((on, e.reason.clone()?))
            })
            .collect();
        want.iter()
            .all(|(on, reason)| seen.iter().any(|(o, r)| o == on && r == reason))
            .then_some(())
    })
    .await;
}

/// `/metrics` as the chart serves and scrapes it: the chart (ServiceMonitor on, its reader
/// ServiceAccount `scraper`) rendered and its RBAC applied, `kronjob run` with the
/// Deployment's flags (`--metrics-secure=true`, the self-signed certificate) and its
/// ServiceAccount's token, so the TokenReview and SubjectAccessReview run with the chart's
/// grants. Scraped as the ServiceMonitor says (scheme, path, port, the server name and the CA
/// of `tlsConfig`, a ServiceAccount token as bearer): no token is 401, a token of a
/// ServiceAccount without the grant 403, and one bound to the chart's metrics-reader
/// ClusterRole (by the chart's binding) 200 with the exposition text.
pub async fn metrics_need_a_token_the_charts_metrics_reader_allows(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let release = format!("mr-{}", random_suffix());
    let fullname = format!("{release}-kronjob");
    let objects = render(
        &env,
        &release,
        &[
            "serviceMonitor.enabled=true",
            "serviceMonitor.readerServiceAccount.name=scraper",
        ],
    );
    let reader_binding = format!("{fullname}-metrics-reader");
    let (binding, identity): (Vec<Value>, Vec<Value>) = objects.iter().cloned().partition(|o| {
        o["kind"] == "ClusterRoleBinding" && o["metadata"]["name"] == reader_binding
    });
    assert_eq!(
        binding.len(),
        1,
        "the chart binds the reader ServiceAccount"
    );
    apply_identity(&ctx, &env, &identity);
    let endpoint = scrape_config(&objects, &fullname, &env.namespace);
    let (mut manager, _, _) = start_as_the_chart(&ctx, &env, &objects, &fullname, &[]);
    manager.wait_ready(Duration::from_secs(60)).await;

    let ca = endpoint.ca(&env).await;
    let scrape = |token: Option<String>| {
        let (ca, server_name, path) = (
            ca.clone(),
            endpoint.server_name.clone(),
            endpoint.path.clone(),
        );
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], manager.metrics));
        async move {
            let client = crate::tls_support::Client::new(&ca);
            let (status, body) = client
                .get(addr, &server_name, &path, token.as_deref())
                .await;
            (status, String::from_utf8_lossy(&body).into_owned())
        }
    };
    let (status, body) = scrape(None).await;
    assert_eq!(status, 401, "no token: {body}");
    assert!(!body.contains("kronjob_"), "{body}");

    env.kubectl_ok(&["create", "serviceaccount", "scraper", "-n", &env.namespace]);
    let token = || {
        let out = env.kubectl_ok(&["create", "token", "scraper", "-n", &env.namespace]);
        Some(out.trim().to_string())
    };
    let (status, body) = scrape(token()).await;
    assert_eq!(status, 403, "a token without the grant: {body}");
    assert!(!body.contains("kronjob_"), "{body}");

    let mut binding = binding.into_iter().next().expect("the binding");
    binding["metadata"]["labels"][CASE_LABEL] = json!(ctx.label());
    let file = ctx.logs.join("metrics-reader-binding.json");
    std::fs::write(&file, binding.to_string()).expect("write the binding");
    env.kubectl_ok(&["apply", "-f", file.to_str().expect("utf-8 path")]);
    // A new token: the refusal of the first is remembered for a few seconds.
    let (status, body) = wait_for(Duration::from_secs(30), "a 200 for the bound token", || {
        let scraped = scrape(token());
        async move {
            let (status, body) = scraped.await;
            (status == 200).then_some((status, body))
        }
    })
    .await;
    assert_eq!(status, 200);
    assert!(body.contains("# TYPE kronjob_leader gauge"), "{body}");
    assert!(
        body.contains("kronjob_https_connections{server=\"metrics\"}"),
        "{body}"
    );
    let log = manager.log();
    assert!(!log.contains("TokenReview for /metrics failed"), "{log}");
    assert!(
        !log.contains("SubjectAccessReview for /metrics failed"),
        "{log}"
    );
    assert_eq!(manager.terminate(), Some(0), "graceful stop exits 0");
    env.cleanup().await;
}

/// How the chart's ServiceMonitor scrapes the manager.
pub(crate) struct ScrapeConfig {
    pub path: String,
    pub server_name: String,
    pub ca_secret: String,
    pub ca_key: String,
}

impl ScrapeConfig {
    /// The CA (PEM) in the Secret the ServiceMonitor names, once the manager has written it.
    pub async fn ca(&self, env: &Env) -> String {
        wait_for(
            Duration::from_secs(30),
            "the CA in the Secret the ServiceMonitor names",
            || {
                let secrets = env.api::<Secret>();
                let (name, key) = (self.ca_secret.clone(), self.ca_key.clone());
                async move {
                    let data = secrets.get(&name).await.ok()?.data?;
                    String::from_utf8(data.get(&key)?.0.clone()).ok()
                }
            },
        )
        .await
    }
}

/// The ServiceMonitor's endpoint, checked against the rest of the chart: HTTPS with a
/// ServiceAccount token, on the metrics Service's port that reaches the manager's
/// `--metrics-addr`, verifying the webhook's certificate (the name it is issued for, the CA of
/// the Secret the manager writes).
pub(crate) fn scrape_config(objects: &[Value], fullname: &str, namespace: &str) -> ScrapeConfig {
    let find = |kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("the chart renders {kind} {name}"))
    };
    let monitor = find("ServiceMonitor", fullname);
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["scheme"], "https", "{endpoint}");
    assert_eq!(
        endpoint["bearerTokenFile"], "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "{endpoint}"
    );
    assert!(
        endpoint["tlsConfig"]["insecureSkipVerify"].is_null(),
        "{endpoint}"
    );
    let service = find("Service", &format!("{fullname}-metrics"));
    let port = service["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == endpoint["port"])
        .unwrap_or_else(|| panic!("the metrics Service has the port {}", endpoint["port"]));
    let container = &find("Deployment", fullname)["spec"]["template"]["spec"]["containers"][0];
    let container_port = container["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == port["targetPort"])
        .expect("the Service's targetPort names a container port");
    let listen = format!("--metrics-addr=:{}", container_port["containerPort"]);
    let args: Vec<&str> = container["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    assert!(args.contains(&listen.as_str()), "{listen} in {args:?}");
    assert!(args.contains(&"--metrics-secure=true"), "{args:?}");
    let server_name = endpoint["tlsConfig"]["serverName"]
        .as_str()
        .expect("tlsConfig.serverName");
    assert_eq!(server_name, format!("{fullname}-webhook.{namespace}.svc"));
    let ca = &endpoint["tlsConfig"]["ca"]["secret"];
    assert_eq!(
        ca["name"],
        format!("{fullname}-webhook-self-signed"),
        "{ca}"
    );
    let reader = find("ClusterRoleBinding", &format!("{fullname}-metrics-reader"));
    assert_eq!(
        reader["subjects"],
        json!([{"kind": "ServiceAccount", "name": "scraper", "namespace": namespace}])
    );
    assert_eq!(
        reader["roleRef"]["name"],
        format!("{fullname}-metrics-reader")
    );
    ScrapeConfig {
        path: endpoint["path"].as_str().expect("path").to_string(),
        server_name: server_name.to_string(),
        ca_secret: ca["name"].as_str().expect("the CA's Secret").to_string(),
        ca_key: ca["key"].as_str().expect("the CA's key").to_string(),
    }
}
