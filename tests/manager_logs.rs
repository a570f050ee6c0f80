//! What a new user watching `kronjob run` in a terminal reads: when this replica starts
//! leading, and that each controller started, with what its caches found.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

#[path = "support/mod.rs"]
mod support;

use support::http::{free_port, get};

#[derive(clap::Parser, Debug)]
struct RunOnly {
    #[command(flatten)]
    args: kronjob::manager::RunArgs,
}

/// The log lines written so far (this test binary's only subscriber writes here).
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log lock").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Lines {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log lock")).into_owned()
    }
}

#[tokio::test]
async fn the_log_says_when_this_replica_leads_and_each_controller_started_with_its_cronjobs() {
    use clap::Parser;
    let lines = Lines::default();
    let writer = lines.clone();
    tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_env_filter("info")
        .init();
    let sim = kronjob_apisim::ApiSim::new(kronjob_apisim::CostModel::free());
    for name in ["hourly", "nightly"] {
        sim.insert(support::sim::cronjob_json(
            "ns",
            name,
            "0 0 1 1 *",
            "2024-01-01T09:00:00Z",
            None,
        ));
    }
    let health_port = free_port();
    let args = RunOnly::try_parse_from([
        "run".to_string(),
        "--leader-elect".to_string(),
        "--leader-election-namespace=kronjob-system".to_string(),
        "--pod-name=kronjob-a".to_string(),
        format!("--health-addr=127.0.0.1:{health_port}"),
        "--metrics-addr=127.0.0.1:0".to_string(),
        "--webhook-cert-dir=/nonexistent".to_string(),
    ])
    .expect("flags parse")
    .args;
    let shutdown = CancellationToken::new();
    let manager = tokio::spawn(kronjob::manager::run_with(
        args,
        sim.client(),
        shutdown.clone(),
    ));
    let health = SocketAddr::from(([127, 0, 0, 1], health_port));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let ready = tokio::net::TcpStream::connect(health).await.is_ok()
            && get(health, "/readyz").await.0 == 200;
        let text = lines.text();
        if ready && text.contains("TTL-after-finished controller started") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "ready; log:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    shutdown.cancel();
    let result = tokio::time::timeout(Duration::from_secs(20), manager)
        .await
        .expect("stops")
        .expect("join");
    assert!(result.is_ok(), "{result:?}");

    let text = lines.text();
    let line = |needle: &str| -> (usize, &str) {
        text.lines()
            .enumerate()
            .find(|(_, l)| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
    };
    let (leading, _) = line("leading: starting controllers");
    let (cronjob, started) = line("CronJob controller started");
    let (ttl, _) = line("TTL-after-finished controller started");
    assert!(
        started.contains("cronjobs=2"),
        "the CronJobs it found: {started}"
    );
    assert!(
        leading < cronjob && leading < ttl,
        "leading comes first:\n{text}"
    );
}
