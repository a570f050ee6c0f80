//! The manager under a hostile mix on a control plane of the case's own: 100 CronJobs on
//! `* * * * *`, the webhook served over TLS, and for 70 s, from loopback, 800 TLS connections
//! opened and left idle (each opened again once the server closes it), 64 clients POSTing
//! 3 MiB JSON bodies in a loop, and 8 clients sending forged AdmissionReviews (never from the
//! API server) for CronJobs whose templates are all different. The load runs in this process,
//! on a runtime of its own.
//!
//! What must hold: the manager's peak RSS (VmHWM) stays under 200 MiB; open connections never
//! exceed the cap and idle ones are closed after the header-read timeout; at most 50 template
//! dry runs reach the API server in any minute (counted by the manager, and by the API server's
//! audit log, where the webhook's dry runs carry a user agent of their own); a legitimate
//! CronJob create through the API server is answered within 2 s; the slot's 100 Jobs are
//! created within 15 s of it. The figures are printed for docs/security.md.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::batch::v1::Job;
use kronjob::api::CronJob;
use kube::ResourceExt;
use kube::api::{ListParams, PostParams};
use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_util::sync::CancellationToken;

use crate::harness::{Ctx, Env, at_second, metric_sum, slot_of};
use crate::webhook::Webhook;

crate::cases!(hostile: the_manager_survives_a_hostile_mix);

/// CronJobs the manager schedules during the attack.
const CRONJOBS: usize = 100;
/// Idle TLS connections the attacker keeps open.
const IDLE_CONNECTIONS: usize = 800;
/// Clients POSTing [`BIG_BODY`] in a loop.
const BIG_BODY_CLIENTS: usize = 64;
/// Size of their bodies.
const BIG_BODY: usize = 3 * 1024 * 1024;
/// Clients sending forged AdmissionReviews, each with a new template.
const FORGED_CLIENTS: usize = 8;
/// How long the attack lasts.
const ATTACK: Duration = Duration::from_secs(70);
/// Peak RSS allowed, KiB.
const RSS_LIMIT_KIB: f64 = 200.0 * 1024.0;
/// Template dry runs allowed in any minute.
const DRY_RUNS_PER_MINUTE: f64 = 50.0;
/// Longest time for a legitimate CronJob create (two webhook calls) during the attack.
const REVIEW_WITHIN: Duration = Duration::from_secs(2);
/// Latest a slot's Job may be created, seconds after the slot: the slot runs in its minute,
/// not starved by the attack. The CI machine runs the rest of the suite beside this case's
/// control plane, so the bound leaves room for a loaded API server; the printed skew is the
/// measurement (docs/security.md).
const SLOT_WITHIN: i64 = 15;
/// The webhook's connection cap (`--webhook-max-connections`' default).
const CAP: usize = kronjob::https::MAX_CONNECTIONS;
/// The header-read timeout, and what a loaded machine may add to it.
const HEADER_TIMEOUT: Duration = kronjob::https::HEADER_READ_TIMEOUT;
const SLACK: Duration = Duration::from_secs(5);
/// When the API server's dry runs are first counted: inside the first minute of the attack, with
/// room for the sampling loop's own second, so that the count covers less than 60 s and must be
/// within the per-minute limit (a count taken at 61 s may rightly hold a few sent at 60 s).
const FIRST_WINDOW: Duration = Duration::from_secs(55);
/// What the case's API server audits: every create of a batch/v1 CronJob (where template dry
/// runs go), its metadata only, once answered.
const AUDIT_POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    verbs: ["create"]
    resources:
      - group: "batch"
        resources: ["cronjobs"]
  - level: None
"#;

pub async fn the_manager_survives_a_hostile_mix(ctx: Ctx) {
    let audit = ctx.logs.join("hostile-audit");
    std::fs::create_dir_all(&audit).expect("the audit folder");
    let (policy, audit_log) = (audit.join("policy.yaml"), audit.join("audit.log"));
    std::fs::write(&policy, AUDIT_POLICY).expect("the audit policy");
    let options = kronjob_envtest::Options {
        apiserver_args: vec![
            format!("--audit-policy-file={}", policy.display()),
            format!("--audit-log-path={}", audit_log.display()),
        ],
        ..Default::default()
    };
    let plane = ctx.own_control_plane(options).await;
    let env = Env::on(&ctx, plane.kubeconfig()).await;
    for i in 0..CRONJOBS {
        let name = format!("cj-{i:03}");
        crate::cronjob::create(&env, crate::cronjob::quiet_every_minute(&name)).await;
    }
    let webhook = Webhook::start(&ctx, &env, &[]).await;
    let pid = webhook.manager.pid();
    let before = Sample::take(&webhook, pid, Duration::ZERO).await;
    let api_before = dry_runs_of(&audit_log, kronjob::manager::WEBHOOK_AGENT);

    // The attack starts at second 40: the next slot falls 20 s into it.
    let minute = at_second(40).await;
    let slot = minute + 1;
    let attack = Attack::start(webhook.port, &webhook.ca, &env.namespace);
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut reviews = Vec::new();
    let mut api_first_minute = None;
    let mut next_review = Duration::from_secs(5);
    while started.elapsed() < ATTACK {
        samples.push(Sample::take(&webhook, pid, started.elapsed()).await);
        if started.elapsed() >= next_review {
            let number = reviews.len();
            reviews.push(tokio::spawn(legitimate_create(env.api(), number)));
            next_review += Duration::from_secs(10);
        }
        if api_first_minute.is_none() && started.elapsed() >= FIRST_WINDOW {
            let api = dry_runs_of(&audit_log, kronjob::manager::WEBHOOK_AGENT);
            api_first_minute = Some(api - api_before);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let load = attack.stop();
    let after = Sample::take(&webhook, pid, started.elapsed()).await;
    let api_total = dry_runs_of(&audit_log, kronjob::manager::WEBHOOK_AGENT) - api_before;
    let controller = dry_runs_of(&audit_log, kronjob::manager::CONTROLLERS_AGENT);
    eprintln!(
        "hostile mix: the API server answered {api_total} of the webhook's dry runs during the attack ({api_before} before it), and {controller} of the controller's template checks"
    );
    assert!(
        controller > 0.0,
        "the controller's template checks of the 100 CronJobs are in the audit log under their own user agent"
    );
    samples.push(after.clone());
    let mut latencies = Vec::new();
    for review in reviews {
        latencies.push(review.await.expect("the legitimate create's task"));
    }
    let skews = slot_skews(&env, slot).await;
    let text = webhook.manager.metrics_text().await;

    let report = Report {
        before,
        after,
        samples,
        latencies,
        skews,
        api_first_minute: api_first_minute.unwrap_or(api_total),
        api_total,
        load,
        text,
    };
    eprintln!("{}", report.summary());
    report.check();
    webhook.uninstall().await;
    env.cleanup().await;
    drop(plane);
}

/// What the case reads from the manager once a second.
#[derive(Debug, Clone)]
struct Sample {
    at: Duration,
    open: f64,
    dry_runs: f64,
    rss_kib: f64,
    hwm_kib: f64,
}

impl Sample {
    async fn take(webhook: &Webhook, pid: u32, at: Duration) -> Sample {
        let text = webhook.manager.metrics_text().await;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let kib = |field: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        Sample {
            at,
            open: metric_sum(&text, "kronjob_https_connections", &[("server", "webhook")]),
            dry_runs: metric_sum(&text, "kronjob_webhook_dry_run_total", &[]),
            rss_kib: kib("VmRSS:"),
            hwm_kib: kib("VmHWM:"),
        }
    }
}

/// Template dry runs the API server has answered so far with the user agent of the manager's
/// `part` ([`kronjob::manager::WEBHOOK_AGENT`] or [`kronjob::manager::CONTROLLERS_AGENT`]):
/// `dryRun=All` creates of batch/v1 CronJobs in its audit log (written before each answer).
fn dry_runs_of(audit_log: &Path, part: &str) -> f64 {
    let agent = kronjob::client::user_agent(part);
    let text = std::fs::read_to_string(audit_log).unwrap_or_default();
    let dry_runs = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| {
            event["stage"] == "ResponseComplete"
                && event["verb"] == "create"
                && event["objectRef"]["apiGroup"] == "batch"
                && event["objectRef"]["resource"] == "cronjobs"
                && event["userAgent"] == agent.as_str()
                && event["requestURI"]
                    .as_str()
                    .is_some_and(|uri| uri.contains("dryRun=All"))
        })
        .count();
    dry_runs as f64
}

/// Create a CronJob with a template of its own through the API server (which calls both
/// webhooks): how long it took, or why it failed.
async fn legitimate_create(api: kube::Api<CronJob>, number: usize) -> Result<Duration, String> {
    let mut manifest = crate::cronjob::quiet_every_minute(&format!("legit-{number}"));
    manifest["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["env"] =
        json!([{"name": "RUN", "value": number.to_string()}]);
    let cronjob: CronJob = serde_json::from_value(manifest).expect("a CronJob");
    let started = Instant::now();
    match api.create(&PostParams::default(), &cronjob).await {
        Ok(_) => Ok(started.elapsed()),
        Err(e) => Err(format!("after {:?}: {e}", started.elapsed())),
    }
}

/// For each of the slot's Jobs, seconds from the slot to its creation.
async fn slot_skews(env: &Env, slot: i64) -> Vec<(String, i64)> {
    let jobs = env
        .api::<Job>()
        .list(&ListParams::default().labels("batch.kronjob.dev/cronjob"))
        .await
        .expect("list Jobs")
        .items;
    jobs.iter()
        .filter(|j| slot_of(j) == Some(slot) && j.name_any().starts_with("cj-"))
        .filter_map(|j| {
            let created = j.creation_timestamp()?.0.as_second();
            Some((j.name_any(), created - slot * 60))
        })
        .collect()
}

/// What the case measured.
struct Report {
    before: Sample,
    after: Sample,
    samples: Vec<Sample>,
    latencies: Vec<Result<Duration, String>>,
    skews: Vec<(String, i64)>,
    api_first_minute: f64,
    api_total: f64,
    load: Arc<Load>,
    text: String,
}

impl Report {
    /// Most dry runs the manager counted within any 60 s of the attack.
    fn worst_minute(&self) -> f64 {
        let mut worst: f64 = 0.0;
        for (i, first) in self.samples.iter().enumerate() {
            for later in &self.samples[i..] {
                if later.at.saturating_sub(first.at) <= Duration::from_secs(60) {
                    worst = worst.max(later.dry_runs - first.dry_runs);
                }
            }
        }
        worst
    }

    fn max_of(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        self.samples.iter().map(f).fold(0.0, f64::max)
    }

    fn summary(&self) -> String {
        let mib = |kib: f64| kib / 1024.0;
        let latencies: Vec<String> = self
            .latencies
            .iter()
            .map(|l| match l {
                Ok(d) => format!("{:.2}s", d.as_secs_f64()),
                Err(e) => format!("failed ({e})"),
            })
            .collect();
        let closed = |reason: &str| {
            metric_sum(
                &self.text,
                "kronjob_https_connections_closed_total",
                &[("server", "webhook"), ("reason", reason)],
            )
        };
        let rejected = |reason: &str| {
            metric_sum(
                &self.text,
                "kronjob_webhook_rejected_requests_total",
                &[("reason", reason)],
            )
        };
        let skipped = |reason: &str| {
            metric_sum(
                &self.text,
                "kronjob_webhook_dry_runs_skipped_total",
                &[("reason", reason)],
            )
        };
        format!(
            "hostile mix: manager RSS {:.1} MiB before, peak (VmHWM) {:.1} MiB, {:.1} MiB at the end\n\
             hostile mix: webhook connections open at most {} (cap {CAP}); the attacker held {} TLS \
             connections in all, the longest {:.1} s after its handshake, {} closed by the server; \
             closed by reason: evicted {}, header_timeout {}, handshake_timeout {}, done {}, error {}\n\
             hostile mix: template dry runs: {} by the manager in 70 s (at most {} in any 60 s), \
             {} reached the API server in the first 60 s, {} in 70 s; skipped: rate_limited {}, \
             cached {}, busy {}\n\
             hostile mix: forged reviews answered {} (allowed {}, denied {}); big bodies answered \
             {} ({}); rejected: too_large {}, busy {}, slow {}, malformed {}; failed requests {}\n\
             hostile mix: legitimate creates during the attack: {}\n\
             hostile mix: the slot's Jobs: {} of {CRONJOBS}, created {} s after the slot at the latest",
            mib(self.before.rss_kib),
            mib(self.after.hwm_kib),
            mib(self.after.rss_kib),
            self.max_of(|s| s.open),
            self.load.idle_held.load(Ordering::Relaxed),
            self.load.idle_longest_ms.load(Ordering::Relaxed) as f64 / 1000.0,
            self.load.idle_closed.load(Ordering::Relaxed),
            closed("evicted"),
            closed("header_timeout"),
            closed("handshake_timeout"),
            closed("done"),
            closed("error"),
            self.after.dry_runs - self.before.dry_runs,
            self.worst_minute(),
            self.api_first_minute,
            self.api_total,
            skipped("rate_limited"),
            skipped("cached"),
            skipped("busy"),
            self.load.forged_answered.load(Ordering::Relaxed),
            self.load.forged_allowed.load(Ordering::Relaxed),
            self.load.forged_denied.load(Ordering::Relaxed),
            self.load.big_answered.load(Ordering::Relaxed),
            self.load.big_statuses(),
            rejected("too_large"),
            rejected("busy"),
            rejected("slow"),
            rejected("malformed"),
            self.load.failed.load(Ordering::Relaxed),
            latencies.join(", "),
            self.skews.len(),
            self.skews.iter().map(|(_, s)| *s).max().unwrap_or(-1),
        )
    }

    fn check(&self) {
        let summary = self.summary();
        // The attack happened.
        assert!(
            self.load.idle_held.load(Ordering::Relaxed) >= IDLE_CONNECTIONS as u64,
            "the idle connections were opened\n{summary}"
        );
        assert!(
            self.load.forged_answered.load(Ordering::Relaxed) > 50,
            "forged reviews were answered\n{summary}"
        );
        assert!(
            self.load.big_answered.load(Ordering::Relaxed) > 0,
            "big bodies were answered\n{summary}"
        );
        // Memory.
        assert!(
            self.after.hwm_kib < RSS_LIMIT_KIB,
            "peak RSS under 200 MiB\n{summary}"
        );
        // Connections: the cap holds, idle ones are closed after the header-read timeout.
        assert!(
            self.max_of(|s| s.open) <= CAP as f64,
            "the cap holds\n{summary}"
        );
        assert!(
            self.load.idle_closed.load(Ordering::Relaxed) > 0,
            "idle connections are closed by the server\n{summary}"
        );
        let timed_out = metric_sum(
            &self.text,
            "kronjob_https_connections_closed_total",
            &[("server", "webhook"), ("reason", "header_timeout")],
        );
        assert!(timed_out > 0.0, "closed for their silence\n{summary}");
        let longest = Duration::from_millis(self.load.idle_longest_ms.load(Ordering::Relaxed));
        assert!(
            longest <= HEADER_TIMEOUT + SLACK,
            "no idle connection is held past the header-read timeout\n{summary}"
        );
        // Dry runs: at most 50 in any minute, as the manager and the API server count them.
        assert!(
            self.worst_minute() <= DRY_RUNS_PER_MINUTE,
            "at most 50 dry runs a minute\n{summary}"
        );
        assert!(
            self.api_first_minute <= DRY_RUNS_PER_MINUTE,
            "at most 50 dry runs reached the API server in the first 55 s\n{summary}"
        );
        assert!(self.after.dry_runs > self.before.dry_runs, "{summary}");
        // The legitimate path and the slot.
        assert!(!self.latencies.is_empty(), "{summary}");
        for latency in &self.latencies {
            assert!(
                latency.as_ref().is_ok_and(|d| *d < REVIEW_WITHIN),
                "every legitimate create within 2 s\n{summary}"
            );
        }
        assert_eq!(self.skews.len(), CRONJOBS, "every slot's Job\n{summary}");
        for (job, skew) in &self.skews {
            assert!(
                (0..=SLOT_WITHIN).contains(skew),
                "{job} created {skew} s after its slot\n{summary}"
            );
        }
    }
}

/// What the load generator saw.
#[derive(Debug, Default)]
struct Load {
    idle_held: AtomicU64,
    idle_closed: AtomicU64,
    idle_longest_ms: AtomicU64,
    forged_answered: AtomicU64,
    forged_allowed: AtomicU64,
    forged_denied: AtomicU64,
    big_answered: AtomicU64,
    big_by_status: [AtomicU64; 6],
    failed: AtomicUsize,
}

impl Load {
    const STATUSES: [u16; 6] = [200, 400, 408, 413, 429, 503];

    fn big_status(&self, status: u16) {
        self.big_answered.fetch_add(1, Ordering::Relaxed);
        if let Some(i) = Self::STATUSES.iter().position(|s| *s == status) {
            self.big_by_status[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn big_statuses(&self) -> String {
        Self::STATUSES
            .iter()
            .zip(&self.big_by_status)
            .map(|(s, n)| format!("{s}: {}", n.load(Ordering::Relaxed)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The load, on a runtime of its own in a thread of its own.
struct Attack {
    stop: CancellationToken,
    thread: std::thread::JoinHandle<()>,
    load: Arc<Load>,
}

impl Attack {
    fn start(port: u16, ca: &str, namespace: &str) -> Attack {
        let stop = CancellationToken::new();
        let load = Arc::new(Load::default());
        let target = Target {
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            connector: crate::tls_support::Client::new(ca).connector(),
            namespace: namespace.to_string(),
        };
        let (token, counts) = (stop.clone(), Arc::clone(&load));
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("the attack's runtime");
            runtime.block_on(target.run(counts, token));
        });
        Attack { stop, thread, load }
    }

    fn stop(self) -> Arc<Load> {
        self.stop.cancel();
        self.thread.join().expect("the attack's thread");
        self.load
    }
}

/// Where the attack goes.
#[derive(Clone)]
struct Target {
    addr: std::net::SocketAddr,
    connector: TlsConnector,
    namespace: String,
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

impl Target {
    async fn run(self, load: Arc<Load>, stop: CancellationToken) {
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..IDLE_CONNECTIONS {
            tasks.spawn(self.clone().idle(Arc::clone(&load), stop.clone()));
        }
        let bodies = [long_string_review(&self.namespace), many_values()];
        for i in 0..BIG_BODY_CLIENTS {
            let body = bodies[i % 2].clone();
            tasks.spawn(self.clone().big(body, Arc::clone(&load), stop.clone()));
        }
        for client in 0..FORGED_CLIENTS {
            tasks.spawn(self.clone().forged(client, Arc::clone(&load), stop.clone()));
        }
        while tasks.join_next().await.is_some() {}
    }

    /// A TLS connection to the webhook, or none (within 30 s, or before `stop`).
    async fn connect(
        &self,
        stop: &CancellationToken,
    ) -> Option<tokio_rustls::client::TlsStream<TcpStream>> {
        let connect = async {
            let tcp = TcpStream::connect(self.addr).await.ok()?;
            let name = ServerName::try_from("127.0.0.1").ok()?;
            self.connector.connect(name, tcp).await.ok()
        };
        tokio::select! {
            tls = tokio::time::timeout(Duration::from_secs(30), connect) => tls.ok().flatten(),
            () = stop.cancelled() => None,
        }
    }

    /// Open a connection, say nothing, and open another once the server closes it.
    async fn idle(self, load: Arc<Load>, stop: CancellationToken) {
        while !stop.is_cancelled() {
            let Some(mut tls) = self.connect(&stop).await else {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            load.idle_held.fetch_add(1, Ordering::Relaxed);
            let held = Instant::now();
            let mut byte = [0u8; 1];
            tokio::select! {
                _ = tls.read(&mut byte) => {
                    load.idle_closed.fetch_add(1, Ordering::Relaxed);
                    let ms = u64::try_from(held.elapsed().as_millis()).unwrap_or(u64::MAX);
                    load.idle_longest_ms.fetch_max(ms, Ordering::Relaxed);
                }
                () = stop.cancelled() => {}
            }
        }
    }

    /// An HTTP/1.1 connection to the webhook, or none.
    async fn sender(&self, stop: &CancellationToken) -> Option<Sender> {
        let tls = self.connect(stop).await?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .ok()?;
        tokio::spawn(connection);
        Some(sender)
    }

    /// POST `body` to the validating path, the status (none when the connection failed).
    async fn post(sender: &mut Sender, body: Bytes) -> Option<(u16, Bytes)> {
        sender.ready().await.ok()?;
        let request = hyper::Request::post("/validate-batch-kronjob-dev-v1-cronjob")
            .header("host", "127.0.0.1")
            .header("content-type", "application/json")
            .body(Full::new(body))
            .ok()?;
        let response = tokio::time::timeout(Duration::from_secs(30), sender.send_request(request))
            .await
            .ok()?
            .ok()?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.ok()?.to_bytes();
        Some((status, body))
    }

    /// POST `body` (3 MiB) again and again, on a new connection whenever the server closes one.
    async fn big(self, body: Bytes, load: Arc<Load>, stop: CancellationToken) {
        let mut sender: Option<Sender> = None;
        while !stop.is_cancelled() {
            let Some(current) = sender.as_mut() else {
                sender = self.sender(&stop).await;
                continue;
            };
            let sent = tokio::select! {
                sent = Self::post(current, body.clone()) => sent,
                () = stop.cancelled() => break,
            };
            match sent {
                Some((status, _)) => load.big_status(status),
                None => {
                    load.failed.fetch_add(1, Ordering::Relaxed);
                    sender = None;
                }
            }
        }
    }

    /// Send forged reviews of CronJobs, each with a template never seen before.
    async fn forged(self, client: usize, load: Arc<Load>, stop: CancellationToken) {
        let mut sender: Option<Sender> = None;
        let mut n = 0usize;
        while !stop.is_cancelled() {
            let Some(current) = sender.as_mut() else {
                sender = self.sender(&stop).await;
                continue;
            };
            n += 1;
            let body = forged_review(&self.namespace, client, n);
            let sent = tokio::select! {
                sent = Self::post(current, body) => sent,
                () = stop.cancelled() => break,
            };
            let Some((status, answer)) = sent else {
                load.failed.fetch_add(1, Ordering::Relaxed);
                sender = None;
                continue;
            };
            load.forged_answered.fetch_add(1, Ordering::Relaxed);
            let allowed = serde_json::from_slice::<Value>(&answer)
                .ok()
                .and_then(|a| a["response"]["allowed"].as_bool());
            match (status, allowed) {
                (200, Some(true)) => load.forged_allowed.fetch_add(1, Ordering::Relaxed),
                _ => load.forged_denied.fetch_add(1, Ordering::Relaxed),
            };
        }
    }
}

/// A review of a CronJob whose template no other review had: its image names the client and
/// the request.
fn forged_review(namespace: &str, client: usize, n: usize) -> Bytes {
    let mut cronjob = crate::cronjob::every_minute(&format!("forged-{client}-{n}"), 1);
    cronjob["metadata"]["namespace"] = json!(namespace);
    cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"] =
        json!(format!("registry.example/forged-{client}:{n}"));
    let review = crate::webhook::review("CREATE", namespace, &cronjob, None);
    Bytes::from(review.to_string())
}

/// A review just under 3 MiB: a CronJob with one long annotation (decoded at about 2.3x).
fn long_string_review(namespace: &str) -> Bytes {
    let mut cronjob = crate::cronjob::every_minute("big", 1);
    cronjob["metadata"]["namespace"] = json!(namespace);
    let review = crate::webhook::review("CREATE", namespace, &cronjob, None);
    let room = BIG_BODY - review.to_string().len() - 64;
    cronjob["metadata"]["annotations"] = json!({ "padding": "x".repeat(room) });
    let review = crate::webhook::review("CREATE", namespace, &cronjob, None).to_string();
    assert!(review.len() <= BIG_BODY, "{}", review.len());
    Bytes::from(review)
}

/// Just under 3 MiB of tiny JSON values (the costliest to decode: refused before decoding).
fn many_values() -> Bytes {
    let mut body = String::with_capacity(BIG_BODY);
    body.push('[');
    while body.len() < BIG_BODY - 4 {
        body.push_str("0,");
    }
    body.push('0');
    body.push(']');
    Bytes::from(body)
}
