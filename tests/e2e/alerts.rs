//! The chart's alerts and dashboard in a real Prometheus (Debian's `prometheus`, installed by
//! scripts/install-tools.sh): the manager runs as the chart's Deployment runs it (its flags,
//! its ServiceAccount's token, HTTPS metrics with the self-signed certificate); Prometheus
//! scrapes it as the chart's ServiceMonitor says (HTTPS, the server name and CA of its
//! `tlsConfig`, the token of a ServiceAccount the chart binds to the metrics-reader role, honor
//! labels) and evaluates the rule groups the chart's PrometheusRule renders, with the hold
//! times shortened. Each alert is then seen firing for its real cause, and only for it:
//!
//! - `KronjobCronJobNotSucceeded`: a CronJob whose Jobs never finish, two periods old;
//! - `KronjobCronJobSuspendedAfterFailures`: a CronJob whose Job failed, with
//!   `failurePolicy.suspendAfterConsecutiveFailures: 1`;
//! - `KronjobCronJobQueueFull`: an Enqueue CronJob (`maxQueued: 1`) whose Jobs never finish;
//! - `KronjobCalendarMissing`: a CronJob naming a Calendar that does not exist;
//! - `KronjobWebhookErrors`: a request the webhook cannot read (400);
//! - `KronjobWebhookDenials`: a CronJob the webhook refuses;
//! - `KronjobNoLeader` and `KronjobCronJobSlotMissed`: the manager stopped past a slot;
//! - `KronjobJobCreationSkewHigh`: the manager started again, creating the missed slot's Job
//!   late.
//!
//! Every metric a rule or a dashboard panel queries has series in Prometheus, and every
//! panel's query (and template variable) returns data: a metric renamed in the code fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kronjob_envtest::{Proc, free_port, random_suffix};
use serde_json::{Value, json};

use crate::harness::{Ctx, Env, http_get, wait_for};

crate::cases!(alerts: every_alert_fires_for_its_cause_and_every_panel_has_data);

/// The scrape job's name: the `job` label of every series (the dashboard's `$job`).
const JOB: &str = "kronjob";

/// The chart's values for this case: the monitoring objects on, thresholds and hold times
/// short enough for a test of a few minutes.
const SETS: &[&str] = &[
    "serviceMonitor.enabled=true",
    "serviceMonitor.readerServiceAccount.name=scraper",
    "metrics.prometheusRule.enabled=true",
    "metrics.dashboard.enabled=true",
    "metrics.prometheusRule.notSucceededPeriods=2",
    "metrics.prometheusRule.missedSlotGraceSeconds=10",
    "metrics.prometheusRule.webhookDeniedPerSecond=0",
    "metrics.prometheusRule.for.notSucceeded=0s",
    "metrics.prometheusRule.for.slotMissed=4s",
    "metrics.prometheusRule.for.suspendedAfterFailures=0s",
    "metrics.prometheusRule.for.queueFull=0s",
    "metrics.prometheusRule.for.calendarMissing=0s",
    "metrics.prometheusRule.for.skew=0s",
    "metrics.prometheusRule.for.noLeader=4s",
    "metrics.prometheusRule.for.webhookErrors=0s",
    "metrics.prometheusRule.for.webhookDenials=0s",
];

/// A running Prometheus; stopped when dropped.
struct Prometheus {
    _proc: Proc,
    port: u16,
}

impl Prometheus {
    /// Start Prometheus with `config` (its data in `dir`), and wait until it answers.
    async fn start(dir: &Path, config: &Path) -> Prometheus {
        let port = free_port().expect("port");
        let binary = crate::tools::tool("prometheus");
        let mut command = Command::new(binary);
        command.args([
            format!("--config.file={}", config.display()),
            format!("--storage.tsdb.path={}", dir.join("data").display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
            "--log.level=warn".to_string(),
        ]);
        let proc = Proc::spawn("prometheus", command, &dir.join("prometheus.log"))
            .expect("start prometheus");
        let prometheus = Prometheus { _proc: proc, port };
        wait_for(Duration::from_secs(60), "Prometheus ready", || async {
            let (code, _) = http_get(port, "/-/ready").await?;
            (code == 200).then_some(())
        })
        .await;
        prometheus
    }

    /// `GET path` of the HTTP API: its `data`.
    async fn api(&self, path: &str) -> Option<Value> {
        let (code, body) = http_get(self.port, path).await?;
        let answer: Value = serde_json::from_str(&body).ok()?;
        (code == 200 && answer["status"] == "success").then(|| answer["data"].clone())
    }

    /// The instant query `promql`: its result vector.
    async fn query(&self, promql: &str) -> Vec<Value> {
        let path = format!("/api/v1/query?query={}", encode(promql));
        self.api(&path)
            .await
            .and_then(|d| d["result"].as_array().cloned())
            .unwrap_or_default()
    }

    /// The labels of each firing alert named `name`.
    async fn firing(&self, name: &str) -> Vec<BTreeMap<String, String>> {
        let Some(data) = self.api("/api/v1/alerts").await else {
            return Vec::new();
        };
        data["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["state"] == "firing" && a["labels"]["alertname"] == name)
            .filter_map(|a| serde_json::from_value(a["labels"].clone()).ok())
            .collect()
    }

    /// Wait until `name` fires for exactly the CronJobs `cronjobs` of `namespace` (by the
    /// alert's `cronjob` label), or, when `cronjobs` is empty, fires at all.
    async fn wait_firing(&self, name: &str, namespace: &str, cronjobs: &[&str], limit: Duration) {
        let want: BTreeSet<&str> = cronjobs.iter().copied().collect();
        let what = format!("{name} firing for {want:?}");
        let deadline = std::time::Instant::now() + limit;
        loop {
            let alerts = self.firing(name).await;
            let got: BTreeSet<&str> = alerts
                .iter()
                .filter(|a| a.get("namespace").map(String::as_str) == Some(namespace))
                .filter_map(|a| a.get("cronjob").map(String::as_str))
                .collect();
            let done = if want.is_empty() {
                !alerts.is_empty()
            } else {
                got == want
            };
            if done {
                return;
            }
            assert!(
                want.is_empty() || got.is_subset(&want),
                "{name} fires for {got:?}, only {want:?} have its cause: {alerts:?}"
            );
            assert!(
                std::time::Instant::now() < deadline,
                "timed out after {limit:?} waiting for {what}; firing: {alerts:?}"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// Percent-encode a query parameter.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The chart's rule groups (the PrometheusRule's spec), and the names of its alerts.
fn rule_groups(objects: &[Value]) -> (Value, BTreeSet<String>) {
    let rule = objects
        .iter()
        .find(|o| o["kind"] == "PrometheusRule")
        .expect("the chart renders a PrometheusRule");
    let groups = rule["spec"]["groups"].clone();
    let names = groups
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["alert"].as_str().map(str::to_string))
        .collect();
    (json!({ "groups": groups }), names)
}

/// The dashboard the chart's ConfigMap carries.
fn dashboard(objects: &[Value]) -> Value {
    let map = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["data"]["kronjob.json"].is_string())
        .expect("the chart renders the dashboard's ConfigMap");
    serde_json::from_str(map["data"]["kronjob.json"].as_str().unwrap_or_default())
        .expect("the dashboard is JSON")
}

/// Each panel's title and query, and each template variable's query, with the dashboard's
/// variables filled in as Grafana would for this scrape job and namespace.
fn dashboard_queries(dashboard: &Value, namespace: &str) -> Vec<(String, String)> {
    fn walk(panels: &Value, out: &mut Vec<(String, String)>) {
        for panel in panels.as_array().into_iter().flatten() {
            walk(&panel["panels"], out);
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    let title = panel["title"].as_str().unwrap_or_default().to_string();
                    out.push((title, expr.to_string()));
                }
            }
        }
    }
    let mut queries = Vec::new();
    walk(&dashboard["panels"], &mut queries);
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        // `label_values(<selector>, <label>)`: the selector must have series.
        let Some(query) = variable["definition"].as_str() else {
            continue;
        };
        if let Some(inner) = query
            .strip_prefix("label_values(")
            .and_then(|q| q.rsplit_once(','))
            .map(|(selector, _)| selector.to_string())
        {
            let name = variable["name"].as_str().unwrap_or_default();
            queries.push((format!("variable {name}"), inner));
        }
    }
    queries
        .into_iter()
        .map(|(title, q)| {
            let q = q
                .replace("$__rate_interval", "1m")
                .replace("$job", JOB)
                .replace("$namespace", namespace);
            (title, q)
        })
        .collect()
}

/// The `kronjob_*` metric names in `text`, as Prometheus stores them.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("kronjob_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_string());
        rest = &tail[end..];
    }
    names
}

/// A CronJob every minute whose Jobs stay as given (`suspend: true`: no Pod, never finishes).
fn never_finishing(name: &str) -> Value {
    let mut cj = crate::cronjob::every_minute(name, 3);
    cj["spec"]["jobTemplate"]["spec"]["suspend"] = json!(true);
    cj
}

pub async fn every_alert_fires_for_its_cause_and_every_panel_has_data(ctx: Ctx) {
    let env = Env::new(&ctx).await;
    let ns = env.namespace.clone();
    let release = format!("al-{}", random_suffix());
    let fullname = format!("{release}-kronjob");
    let objects = crate::rbac::render(&env, &release, SETS);
    env.kubectl_ok(&["create", "serviceaccount", "scraper", "-n", &ns]);
    // The chart's RBAC, the metrics-reader binding of `scraper` included.
    crate::rbac::apply_identity(&ctx, &env, &objects);
    let endpoint = crate::rbac::scrape_config(&objects, &fullname, &ns);
    let (rules, alerts) = rule_groups(&objects);
    let dashboard = dashboard(&objects);
    for alert in [
        "KronjobCronJobNotSucceeded",
        "KronjobCronJobSlotMissed",
        "KronjobCronJobSuspendedAfterFailures",
        "KronjobCronJobQueueFull",
        "KronjobCalendarMissing",
        "KronjobJobCreationSkewHigh",
        "KronjobNoLeader",
        "KronjobWebhookErrors",
        "KronjobWebhookDenials",
    ] {
        assert!(alerts.contains(alert), "the chart has {alert}: {alerts:?}");
    }

    let (mut manager, webhook_port, _) =
        crate::rbac::start_as_the_chart(&ctx, &env, &objects, &fullname, &[]);
    manager.wait_ready(Duration::from_secs(60)).await;
    let ca = endpoint.ca(&env).await;

    // Prometheus, configured as the ServiceMonitor and PrometheusRule ask.
    let dir = ctx.logs.join("prometheus");
    std::fs::create_dir_all(&dir).expect("Prometheus' folder");
    let token = env.kubectl_ok(&["create", "token", "scraper", "-n", &ns, "--duration", "1h"]);
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write a Prometheus file");
        path
    };
    let token_file = write("token", token.trim().to_string());
    let ca_file = write("ca.crt", ca);
    let rules_file = write("kronjob.rules.json", rules.to_string());
    let config = json!({
        "global": {"scrape_interval": "2s", "evaluation_interval": "2s"},
        "rule_files": [rules_file],
        "scrape_configs": [{
            "job_name": JOB,
            "scheme": "https",
            "metrics_path": endpoint.path,
            "honor_labels": true,
            "authorization": {"type": "Bearer", "credentials_file": token_file},
            "tls_config": {"ca_file": ca_file, "server_name": endpoint.server_name},
            "static_configs": [{"targets": [format!("127.0.0.1:{}", manager.metrics)]}],
        }],
    });
    let config_file = write("prometheus.json", config.to_string());
    let prometheus = Prometheus::start(&dir, &config_file).await;
    wait_for(
        Duration::from_secs(30),
        "the manager scraped (up 1)",
        || async {
            let up = prometheus.query(&format!("up{{job=\"{JOB}\"}} == 1")).await;
            (!up.is_empty()).then_some(())
        },
    )
    .await;

    // The causes: a CronJob that succeeds, one whose Jobs never finish, one that fails once
    // and is suspended by its failure policy, and an Enqueue one whose Jobs never finish with
    // room for one queued slot (full from its second slot on).
    crate::observe::not_at_the_end_of_a_minute().await;
    crate::cronjob::create(&env, crate::cronjob::every_minute("ok", 1)).await;
    crate::cronjob::create(&env, never_finishing("stuck")).await;
    let mut queued = never_finishing("queued");
    queued["spec"]["concurrencyPolicy"] = json!("Enqueue");
    queued["spec"]["queue"] = json!({"maxQueued": 1});
    crate::cronjob::create(&env, queued).await;
    let mut failing = crate::cronjob::every_minute("failing", 1);
    failing["spec"]["failurePolicy"] = json!({"suspendAfterConsecutiveFailures": 1});
    crate::cronjob::create(&env, failing).await;
    let mut closed = crate::cronjob::every_minute("closed", 1);
    closed["spec"]["calendars"] = json!([format!("missing-{ns}")]);
    crate::cronjob::create(&env, closed).await;

    let webhook_server = format!("{fullname}-webhook.{ns}.svc");
    let webhook_ca = crate::rbac::self_signed_certificate(&env, &fullname).await;
    let path = "/validate-batch-kronjob-dev-v1-cronjob";
    // A request that is no AdmissionReview: 400, counted as bad_request.
    let (status, body) = crate::webhook::post(
        &webhook_ca,
        webhook_port,
        &webhook_server,
        path,
        "{\"kind\": \"NotAReview\"".to_string(),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    // A CronJob with a schedule that does not parse: denied.
    let mut invalid = crate::cronjob::every_minute("invalid", 1);
    invalid["metadata"]["namespace"] = json!(ns);
    invalid["spec"]["schedule"] = json!("61 * * * *");
    let review = crate::webhook::review("CREATE", &ns, &invalid, None).to_string();
    let (status, body) =
        crate::webhook::post(&webhook_ca, webhook_port, &webhook_server, path, review).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"allowed\":false"), "{body}");

    let minute = Duration::from_secs(75);
    prometheus
        .wait_firing("KronjobWebhookErrors", &ns, &[], minute)
        .await;
    prometheus
        .wait_firing("KronjobWebhookDenials", &ns, &[], minute)
        .await;
    prometheus
        .wait_firing("KronjobCalendarMissing", &ns, &["closed"], minute)
        .await;

    // The first slot: `ok` succeeds, `failing` fails (and is suspended).
    let ok = wait_for(minute, "ok's Job", || async {
        env.jobs_of("ok").await.into_iter().next()
    })
    .await;
    let failed = wait_for(minute, "failing's Job", || async {
        env.jobs_of("failing").await.into_iter().next()
    })
    .await;
    let name = |job: &k8s_openapi::api::batch::v1::Job| job.metadata.name.clone().expect("name");
    env.finish_pods(&name(&ok), "Succeeded").await;
    env.finish_pods(&name(&failed), "Failed").await;
    prometheus
        .wait_firing(
            "KronjobCronJobSuspendedAfterFailures",
            &ns,
            &["failing"],
            minute,
        )
        .await;
    // `stuck` and `queued` have had no success for two of their periods (since their
    // creation); `ok` succeeds every minute and `failing` is suspended: neither fires.
    prometheus
        .wait_firing(
            "KronjobCronJobNotSucceeded",
            &ns,
            &["queued", "stuck"],
            Duration::from_secs(180),
        )
        .await;
    prometheus
        .wait_firing("KronjobCronJobQueueFull", &ns, &["queued"], minute)
        .await;
    assert!(
        prometheus
            .firing("KronjobCronJobSlotMissed")
            .await
            .is_empty(),
        "no slot missed while the manager runs"
    );
    assert!(prometheus.firing("KronjobNoLeader").await.is_empty());

    // Every metric a rule or a panel queries has series, and every panel returns data.
    let queries = dashboard_queries(&dashboard, &ns);
    let exprs = rules["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["expr"].as_str().map(str::to_string));
    let mut used = BTreeSet::new();
    for query in exprs.chain(queries.iter().map(|(_, q)| q.clone())) {
        used.extend(metric_names(&query));
    }
    assert!(used.len() >= 20, "metrics queried: {used:?}");
    let mut missing = Vec::new();
    for metric in &used {
        let series = prometheus
            .query(&format!("{{__name__=\"{metric}\",job=\"{JOB}\"}}"))
            .await;
        if series.is_empty() {
            missing.push(metric.clone());
        }
    }
    assert!(
        missing.is_empty(),
        "queried by the chart's rules or dashboard, not exported by the manager: {missing:?}"
    );
    assert!(queries.len() >= 20, "{queries:?}");
    let mut empty = Vec::new();
    for (title, query) in &queries {
        if prometheus.query(query).await.is_empty() {
            empty.push(format!("{title}: {query}"));
        }
    }
    assert!(
        empty.is_empty(),
        "dashboard queries without data: {empty:#?}"
    );

    // The manager stops past a slot: no leader, and the slots of `ok`, `queued` and `stuck`
    // are missed (`failing` is suspended). It stops well inside a minute, after the last
    // slot's Jobs and status are written and long before the next slot.
    let second = jiff::Timestamp::now().as_second().rem_euclid(60);
    if !(5..=45).contains(&second) {
        crate::harness::at_second(5).await;
    }
    assert_eq!(manager.terminate(), Some(0), "graceful stop exits 0");
    prometheus
        .wait_firing("KronjobNoLeader", &ns, &[], Duration::from_secs(60))
        .await;
    prometheus
        .wait_firing(
            "KronjobCronJobSlotMissed",
            &ns,
            &["ok", "queued", "stuck"],
            Duration::from_secs(100),
        )
        .await;

    // It starts again (as a container restarts in its Pod: where Prometheus scrapes it) and
    // creates the missed slots' Jobs late: the skew alert fires; the leader and the slots are
    // back.
    let metrics_addr = format!("--metrics-addr=127.0.0.1:{}", manager.metrics);
    let (mut manager, _, _) = crate::rbac::start_program_as_the_chart(
        &ctx,
        &env,
        &objects,
        &fullname,
        &[],
        Path::new(env!("CARGO_BIN_EXE_kronjob")),
        &[&metrics_addr],
    );
    manager.wait_ready(Duration::from_secs(60)).await;
    prometheus
        .wait_firing(
            "KronjobJobCreationSkewHigh",
            &ns,
            &[],
            Duration::from_secs(90),
        )
        .await;
    wait_for(
        Duration::from_secs(60),
        "KronjobNoLeader resolved",
        || async {
            prometheus
                .firing("KronjobNoLeader")
                .await
                .is_empty()
                .then_some(())
        },
    )
    .await;
    wait_for(
        Duration::from_secs(60),
        "KronjobCronJobSlotMissed resolved",
        || async {
            prometheus
                .firing("KronjobCronJobSlotMissed")
                .await
                .is_empty()
                .then_some(())
        },
    )
    .await;
    assert_eq!(manager.terminate(), Some(0), "graceful stop exits 0");
    drop(prometheus);
    env.cleanup().await;
}
