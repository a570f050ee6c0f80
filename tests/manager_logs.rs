//! What a new user watching `kronjob run` in a terminal reads: when this replica starts
//! leading, and that each controller started, with what its caches found.

use std::io::Write;
use std::sync::{Arc, Mutex};

#[path = "support/mod.rs"]
mod support;

use support::manager::Booted;

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
    let manager = Booted::start(
        sim.client(),
        &[
            "--leader-elect",
            "--leader-election-namespace=kronjob-system",
            "--pod-name=kronjob-a",
            "--webhook-cert-dir=/nonexistent",
        ],
    );
    manager
        .ready_and(|| {
            lines
                .text()
                .contains("TTL-after-finished controller started")
        })
        .await;
    let result = manager.stop().await;
    assert!(result.is_ok(), "{result:?}");

    let text = lines.text();
    let line = |needle: &str| -> (usize, &str) {
        text.lines()
            .enumerate()
            .find(|(_, l)| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
    };
    let (waiting, _) = line("waiting for leadership");
    let (leading, _) = line("leading: the controllers act");
    let (cronjob, started) = line("CronJob controller started");
    let (ttl, _) = line("TTL-after-finished controller started");
    assert!(
        started.contains("cronjobs=2"),
        "the CronJobs it found: {started}"
    );
    // The caches fill while it stands by: the controllers start whether or not it leads yet.
    assert!(
        waiting < leading && waiting < cronjob && waiting < ttl,
        "waiting for leadership comes first:\n{text}"
    );
}
