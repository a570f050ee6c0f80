//! A replica stopped just before a slot (`--failover kill|term`): with leader election the
//! leader (the others stand by), with `--sharding` replica 0 (the others take its buckets).
//! What it reports beside the slots: when the stop came, when a standby led (or the others'
//! shares grew), when the stopped one exited, every replica's memory just before the stop, and
//! the writes the API server served per slot (its `apiserver_request_total`), so a standby's
//! cost shows.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::BoxError;
use crate::phase::secs;

/// How the replica is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stop {
    /// SIGKILL: the replica dies; a standby waits for its Lease to expire.
    Kill,
    /// SIGTERM, as a rollout stops a pod: the replica hands over and exits.
    Term,
}

/// SIGTERM on Linux.
const SIGTERM: i32 = 15;

/// The flags a replica runs with under `--failover` (unless the manager arguments shard):
/// leader election on one Lease.
pub fn leader_election_flags() -> Vec<String> {
    [
        "--leader-elect",
        "--leader-election-namespace",
        "default",
        "--leader-election-id",
        "scale-failover",
    ]
    .map(String::from)
    .into()
}

/// A running replica, as the failover sees it.
pub struct Target<'a> {
    pub name: &'a str,
    pub pid: u32,
    pub metrics: Option<u16>,
    pub rss_mib: f64,
}

/// Read a gauge of a replica's metrics.
async fn gauge(port: Option<u16>, name: &str) -> Option<f64> {
    let (code, text) = crate::process::http_get(port?, "/metrics").await?;
    (code == 200)
        .then(|| crate::process::metric_value(&text, name))
        .flatten()
}

/// What happened at the failover.
#[derive(Debug, Clone, Serialize)]
pub struct Failover {
    pub stop: Stop,
    pub slot: Timestamp,
    /// The stop, seconds after the slot (negative: before it).
    pub stopped_s: f64,
    /// The replica stopped.
    pub victim: String,
    /// When another replica led (leader election) or held more CronJobs (sharding), seconds
    /// after the slot.
    pub taken_over_s: Option<f64>,
    /// When the stopped replica's process had exited, seconds after the slot.
    pub exited_s: Option<f64>,
    /// Each replica's RSS just before the stop: (name, leads or is the victim, MiB).
    pub rss_mib: Vec<(String, bool, f64)>,
}

impl Failover {
    pub fn show(&self) -> String {
        let opt = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:+.1} s"));
        let rss: Vec<String> = self
            .rss_mib
            .iter()
            .map(|(n, victim, mib)| {
                format!(
                    "{n}{} {mib:.0} MiB",
                    if *victim { " (stopped)" } else { "" }
                )
            })
            .collect();
        format!(
            "{:?} of {} at {:+.1} s before the {} slot: taken over {}, exited {}; RSS before: {}",
            self.stop,
            self.victim,
            self.stopped_s,
            self.slot.strftime("%H:%M"),
            opt(self.taken_over_s),
            opt(self.exited_s),
            rss.join(", ")
        )
    }
}

/// Stop the leader (or, sharded, the first replica) `before` the slot, then follow the
/// takeover for up to 60 s. `exited` tells whether the victim's process has exited.
pub async fn strike(
    stop: Stop,
    before: Duration,
    slot: Timestamp,
    sharded: bool,
    targets: &[Target<'_>],
    mut exited: impl FnMut(usize) -> bool,
) -> Result<Failover, BoxError> {
    crate::phase::sleep_until(slot.checked_sub(SignedDuration::try_from(before)?)?).await;
    let mut victim = 0;
    if !sharded {
        for (i, t) in targets.iter().enumerate() {
            if gauge(t.metrics, "kronjob_leader").await == Some(1.0) {
                victim = i;
            }
        }
    }
    let shares: Vec<Option<f64>> = if sharded {
        let mut s = Vec::new();
        for t in targets {
            s.push(gauge(t.metrics, "kronjob_shard_cronjobs").await);
        }
        s
    } else {
        Vec::new()
    };
    let rss_mib = targets
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.to_string(), i == victim, t.rss_mib))
        .collect();
    let t = &targets[victim];
    match stop {
        Stop::Kill => kronjob_envtest::process::signal(t.pid, 9),
        Stop::Term => kronjob_envtest::process::signal(t.pid, SIGTERM),
    }
    let stopped = Timestamp::now();
    eprintln!("{stop:?} {} (pid {}) at {stopped}", t.name, t.pid);
    let (mut taken_over, mut exited_at) = (None, None);
    let limit = Instant::now() + Duration::from_secs(60);
    while Instant::now() < limit && (taken_over.is_none() || exited_at.is_none()) {
        if exited_at.is_none() && exited(victim) {
            exited_at = Some(Timestamp::now());
        }
        if taken_over.is_none() {
            for (i, other) in targets.iter().enumerate().filter(|(i, _)| *i != victim) {
                let took = if sharded {
                    let now = gauge(other.metrics, "kronjob_shard_cronjobs").await;
                    now.zip(shares[i]).is_some_and(|(now, was)| now > was)
                } else {
                    gauge(other.metrics, "kronjob_leader").await == Some(1.0)
                };
                if took {
                    taken_over = Some(Timestamp::now());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = |at: Timestamp| secs(at.duration_since(slot));
    Ok(Failover {
        stop,
        slot,
        stopped_s: after(stopped),
        victim: t.name.to_string(),
        taken_over_s: taken_over.map(after),
        exited_s: exited_at.map(after),
        rss_mib,
    })
}

/// The API server's count of requests by (verb, resource/subresource), writes only.
pub type Counts = BTreeMap<String, f64>;

/// The writes the API server has served so far, from its metrics.
pub async fn writes(client: &kube::Client) -> Result<Counts, BoxError> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = client.request_text(request).await?;
    Ok(parse_writes(&text))
}

fn parse_writes(text: &str) -> Counts {
    let mut counts = Counts::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |key: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{key}=\"")))
                .map(|v| v.trim_end_matches('"').to_string())
                .unwrap_or_default()
        };
        let verb = label("verb");
        if !matches!(verb.as_str(), "POST" | "PUT" | "PATCH" | "APPLY" | "DELETE") {
            continue;
        }
        let mut what = label("resource");
        let sub = label("subresource");
        if !sub.is_empty() {
            what = format!("{what}/{sub}");
        }
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        *counts.entry(format!("{verb} {what}")).or_default() += value;
    }
    counts
}

/// The writes between two readings, per CronJob, those that changed only.
pub fn per_cronjob(before: &Counts, after: &Counts, cronjobs: usize) -> Counts {
    after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0.0);
            (d > 0.0).then(|| (k.clone(), d / cronjobs.max(1) as f64))
        })
        .collect()
}

/// `POST jobs 1.00, PATCH cronjobs/status 1.00, ...`.
pub fn show_writes(counts: &Counts) -> String {
    counts
        .iter()
        .map(|(k, v)| format!("{k} {v:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_read_from_the_api_servers_metrics() {
        let text = "# TYPE apiserver_request_total counter\n\
            apiserver_request_total{code=\"201\",component=\"apiserver\",group=\"batch\",resource=\"jobs\",scope=\"resource\",subresource=\"\",verb=\"POST\",version=\"v1\"} 1000\n\
            apiserver_request_total{code=\"409\",component=\"apiserver\",group=\"batch\",resource=\"jobs\",scope=\"resource\",subresource=\"\",verb=\"POST\",version=\"v1\"} 2\n\
            apiserver_request_total{code=\"200\",component=\"apiserver\",group=\"batch.kronjob.dev\",resource=\"cronjobs\",scope=\"resource\",subresource=\"status\",verb=\"PATCH\",version=\"v1\"} 1000\n\
            apiserver_request_total{code=\"200\",component=\"apiserver\",group=\"\",resource=\"pods\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\"} 5\n";
        let counts = parse_writes(text);
        assert_eq!(counts.len(), 2, "{counts:?}");
        assert_eq!(counts["POST jobs"], 1002.0);
        let before = Counts::from([("POST jobs".to_string(), 2.0)]);
        let per = per_cronjob(&before, &counts, 1000);
        assert_eq!(per["POST jobs"], 1.0);
        assert_eq!(per["PATCH cronjobs/status"], 1.0);
        assert_eq!(
            show_writes(&per),
            "PATCH cronjobs/status 1.00, POST jobs 1.00"
        );
        assert!(leader_election_flags().contains(&"--leader-elect".to_string()));
    }
}
