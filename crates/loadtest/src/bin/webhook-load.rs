//! Load test for the admission webhook over TLS, on loopback only.
//!
//! Start a local webhook server with a throw-away CA (written to `--dir`):
//!
//! ```text
//! cargo run --release -p kronjob-loadtest --bin webhook-load -- serve --addr 127.0.0.1:9443 --dir /tmp/wh
//! ```
//!
//! and replay AdmissionReviews against it at a fixed rate:
//!
//! ```text
//! cargo run --release -p kronjob-loadtest --bin webhook-load -- load --addr 127.0.0.1:9443 --ca /tmp/wh/ca.crt \
//!     --rate 1000 --secs 20
//! ```
//!
//! The load is open-loop: request `i` is due at `start + i / rate`, and its latency is measured
//! from that due time, so a stalled server cannot hide its stall (no coordinated omission).
//! Requests alternate between the mutating and validating paths and between valid and invalid
//! CronJobs. Connections are kept alive (like the API server's), spread round-robin.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use clap::{Parser, Subcommand};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use kronjob::webhook::admission::{MUTATE_PATH, VALIDATE_PATH};
use kronjob::webhook::{WebhookArgs, WebhookMetrics};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

#[path = "../../../../tests/support/admission.rs"]
#[allow(dead_code)]
mod admission;

#[derive(Parser, Debug)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the webhook on a loopback address with a fresh CA and certificate in `dir`.
    Serve {
        #[arg(long, default_value = "127.0.0.1:9443")]
        addr: SocketAddr,
        #[arg(long)]
        dir: PathBuf,
        /// Worker threads of the server's runtime.
        #[arg(long, default_value_t = 1)]
        threads: usize,
    },
    /// Replay AdmissionReviews at `rate` per second for `secs` seconds.
    Load {
        #[arg(long, default_value = "127.0.0.1:9443")]
        addr: SocketAddr,
        /// CA certificate that signed the server's certificate.
        #[arg(long)]
        ca: PathBuf,
        /// Name the server certificate is checked against.
        #[arg(long, default_value = "localhost")]
        server_name: String,
        #[arg(long, default_value_t = 1000)]
        rate: u64,
        #[arg(long, default_value_t = 10)]
        secs: u64,
        /// Kept-alive connections.
        #[arg(long, default_value_t = 32)]
        connections: usize,
    },
}

type Error = Box<dyn std::error::Error + Send + Sync>;

fn main() -> Result<(), Error> {
    match Cli::parse().command {
        Command::Serve { addr, dir, threads } => {
            loopback_only(addr)?;
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .enable_all()
                .build()?
                .block_on(serve(addr, dir))
        }
        Command::Load {
            addr,
            ca,
            server_name,
            rate,
            secs,
            connections,
        } => {
            loopback_only(addr)?;
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(load(addr, ca, server_name, rate, secs, connections))
        }
    }
}

fn loopback_only(addr: SocketAddr) -> Result<(), Error> {
    if addr.ip().is_loopback() {
        Ok(())
    } else {
        Err(format!("{addr} is not a loopback address; this tool only runs locally").into())
    }
}

async fn serve(addr: SocketAddr, dir: PathBuf) -> Result<(), Error> {
    std::fs::create_dir_all(&dir)?;
    let ca_key = rcgen::KeyPair::generate()?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "webhook-load CA");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate()?;
    let leaf =
        rcgen::CertificateParams::new(vec!["localhost".to_string()])?.signed_by(&key, &issuer)?;
    std::fs::write(dir.join("ca.crt"), ca.pem())?;
    std::fs::write(dir.join("tls.key"), key.serialize_pem())?;
    std::fs::write(dir.join("tls.crt"), leaf.pem())?;
    eprintln!(
        "serving on https://{addr} (CA in {})",
        dir.join("ca.crt").display()
    );
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = WebhookMetrics::new(&mut registry);
    let shutdown = tokio_util::sync::CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    let args = WebhookArgs {
        webhook_addr: addr,
        webhook_cert_dir: dir,
        webhook_cert_reload_interval: Duration::from_secs(10),
        webhook_self_signed: false,
        webhook_service_name: "kronjob-webhook".into(),
        webhook_namespace: "kronjob-system".into(),
        webhook_mutating_configuration: "kronjob-mutating".into(),
        webhook_validating_configuration: "kronjob-validating".into(),
        webhook_max_connections: kronjob::https::MAX_CONNECTIONS,
        webhook_dry_runs_per_minute: kronjob::webhook::dry_run::DRY_RUNS_PER_MINUTE,
        enable_http2: false,
    };
    kronjob::webhook::serve(
        args,
        kronjob::webhook::Env::local(),
        metrics,
        |_| {},
        shutdown,
    )
    .await?;
    // The server-side view: time from request to answer inside the server, by bucket.
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)?;
    for line in text
        .lines()
        .filter(|l| l.contains("request_duration_seconds"))
    {
        println!("{line}");
    }
    Ok(())
}

fn cronjob(name: &str, schedule: &str) -> Value {
    json!({
        "apiVersion": "batch.kronjob.dev/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": "load", "labels": {"app": "load"}},
        "spec": {
            "schedule": schedule,
            "timeZone": "Europe/Paris",
            "startingDeadlineSeconds": 200,
            "jobTemplate": {"spec": {"backoffLimit": 2, "template": {"spec": {
                "restartPolicy": "OnFailure",
                "containers": [{
                    "name": "work", "image": "registry.example/work:1.2.3",
                    "command": ["/bin/work", "--once"],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}
                }]
            }}}}
        }
    })
}

fn review(i: u64, object: Value) -> Vec<u8> {
    let mut review = admission::review("CREATE", object, Value::Null);
    review["request"]["uid"] = json!(format!("00000000-0000-4000-8000-{i:012}"));
    review["request"]["userInfo"] = json!({"username": "load", "groups": ["system:authenticated"]});
    review.to_string().into_bytes()
}

/// The replayed mix: (path, body).
fn workload() -> Vec<(&'static str, Bytes)> {
    vec![
        (
            MUTATE_PATH,
            review(1, cronjob("valid", "H/15 * * * *")).into(),
        ),
        (
            VALIDATE_PATH,
            review(2, cronjob("valid", "*/5 9-17 * * MON-FRI")).into(),
        ),
        (
            VALIDATE_PATH,
            review(3, cronjob("invalid", "61 * * * *")).into(),
        ),
        (MUTATE_PATH, review(4, cronjob("again", "@hourly")).into()),
    ]
}

struct Job {
    due: Instant,
    path: &'static str,
    body: Bytes,
}

async fn connection(
    addr: SocketAddr,
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, Error> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let tls = connector.connect(name, tcp).await?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

async fn load(
    addr: SocketAddr,
    ca: PathBuf,
    server_name: String,
    rate: u64,
    secs: u64,
    connections: usize,
) -> Result<(), Error> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(&ca)? {
        roots.add(cert?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let name = ServerName::try_from(server_name)?;

    // (latency from the due time, latency from the moment the request was written).
    let (results_tx, mut results_rx) =
        mpsc::unbounded_channel::<Result<(Duration, Duration), String>>();
    let mut queues = Vec::with_capacity(connections);
    for _ in 0..connections {
        let mut sender = connection(addr, connector.clone(), name.clone()).await?;
        let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
        let results = results_tx.clone();
        tokio::spawn(async move {
            while let Some(job) = rx.recv().await {
                let mut sent = Instant::now();
                let outcome = async {
                    sender.ready().await?;
                    sent = Instant::now();
                    let request = hyper::Request::post(job.path)
                        .header("host", "localhost")
                        .header("content-type", "application/json")
                        .body(Full::new(job.body))?;
                    let response = sender.send_request(request).await?;
                    let ok = response.status().is_success();
                    response.into_body().collect().await?;
                    if ok {
                        Ok::<_, Error>(())
                    } else {
                        Err("non-200 answer".into())
                    }
                }
                .await;
                let _ = results.send(
                    outcome
                        .map(|()| (job.due.elapsed(), sent.elapsed()))
                        .map_err(|e| e.to_string()),
                );
            }
        });
        queues.push(tx);
    }
    drop(results_tx);

    let mix = workload();
    let total = rate * secs;
    let period = Duration::from_secs_f64(1.0 / rate as f64);
    // Requests are dispatched from a plain thread: its sleeps are far finer than the async
    // timer's 1 ms ticks, so the due times are kept to within tens of microseconds.
    let start = std::time::Instant::now() + Duration::from_millis(50);
    let dispatcher = std::thread::spawn(move || -> Result<(), String> {
        for i in 0..total {
            let due = start + period.mul_f64(i as f64);
            if let Some(wait) = due.checked_duration_since(std::time::Instant::now()) {
                std::thread::sleep(wait);
            }
            let (path, body) = &mix[i as usize % mix.len()];
            let job = Job {
                due: Instant::from_std(due),
                path,
                body: body.clone(),
            };
            if queues[i as usize % queues.len()].send(job).is_err() {
                return Err("a connection task stopped".into());
            }
        }
        Ok(())
    });
    let start = Instant::from_std(start);
    let mut latencies = Vec::with_capacity(total as usize);
    let mut service = Vec::with_capacity(total as usize);
    let mut errors = 0u64;
    while let Some(result) = results_rx.recv().await {
        match result {
            Ok((from_due, from_send)) => {
                latencies.push(from_due);
                service.push(from_send);
            }
            Err(e) => {
                if errors == 0 {
                    eprintln!("first error: {e}");
                }
                errors += 1;
            }
        }
    }
    let elapsed = start.elapsed();
    dispatcher.join().map_err(|_| "the dispatcher panicked")??;
    println!(
        "requests {total}  ok {}  errors {errors}  target {rate}/s  achieved {:.0}/s over {:.2}s",
        latencies.len(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    report("from due time (open loop)", &mut latencies);
    report("from write (per-request round trip over TLS)", &mut service);
    Ok(())
}

fn report(what: &str, latencies: &mut [Duration]) {
    latencies.sort();
    let pct = |p: f64| -> Duration {
        if latencies.is_empty() {
            return Duration::ZERO;
        }
        let idx = ((latencies.len() as f64 * p).ceil() as usize).clamp(1, latencies.len()) - 1;
        latencies[idx]
    };
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "latency ms {what}: p50 {:.3}  p90 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
        ms(pct(0.50)),
        ms(pct(0.90)),
        ms(pct(0.99)),
        ms(pct(0.999)),
        ms(latencies.last().copied().unwrap_or_default())
    );
}
