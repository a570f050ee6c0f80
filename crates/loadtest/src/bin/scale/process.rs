//! What a controller process costs (memory and CPU, from /proc) and what it answers on its
//! probe and metrics ports.

use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;

/// How often a controller process's memory and CPU are sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// Memory and CPU of a process, from /proc.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct ProcSample {
    pub rss_mib: f64,
    pub hwm_mib: f64,
    pub cpu_s: f64,
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

fn proc_sample(pid: u32, ticks: f64) -> Option<ProcSample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse::<f64>().ok()
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(ProcSample {
        rss_mib: kib("VmRSS:")? / 1024.0,
        hwm_mib: kib("VmHWM:")? / 1024.0,
        cpu_s: (utime + stime) / ticks,
    })
}

/// The sum of several processes' samples (the replicas of a phase).
pub fn total<'a>(samples: impl IntoIterator<Item = &'a ProcSample>) -> ProcSample {
    samples
        .into_iter()
        .fold(ProcSample::default(), |sum, s| ProcSample {
            rss_mib: sum.rss_mib + s.rss_mib,
            hwm_mib: sum.hwm_mib + s.hwm_mib,
            cpu_s: sum.cpu_s + s.cpu_s,
        })
}

/// Samples a process every [`SAMPLE_EVERY`]; keeps the largest RSS seen.
#[derive(Debug, Clone)]
pub struct Sampler {
    pid: u32,
    ticks: f64,
    peak_rss: Arc<Mutex<f64>>,
    last: Arc<Mutex<ProcSample>>,
}

impl Sampler {
    pub fn start(pid: u32) -> Sampler {
        let s = Sampler {
            pid,
            ticks: clock_ticks(),
            peak_rss: Arc::default(),
            last: Arc::default(),
        };
        let bg = s.clone();
        tokio::spawn(async move {
            loop {
                if let Some(now) = proc_sample(bg.pid, bg.ticks) {
                    let mut peak = bg.peak_rss.lock().unwrap_or_else(|e| e.into_inner());
                    *peak = peak.max(now.rss_mib);
                    *bg.last.lock().unwrap_or_else(|e| e.into_inner()) = now;
                }
                tokio::time::sleep(SAMPLE_EVERY).await;
            }
        });
        s
    }

    /// Now (the last sample once the process is gone).
    pub fn now(&self) -> ProcSample {
        proc_sample(self.pid, self.ticks)
            .unwrap_or_else(|| *self.last.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The largest RSS seen: the larger of the samples and `end`'s VmHWM.
    pub fn peak_mib(&self, end: &ProcSample) -> f64 {
        let peak = *self.peak_rss.lock().unwrap_or_else(|e| e.into_inner());
        peak.max(end.hwm_mib)
    }
}

/// `GET path` on a loopback port over plain HTTP: the status code and the whole answer.
pub async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut body = Vec::new();
    stream.read_to_end(&mut body).await.ok()?;
    let text = String::from_utf8_lossy(&body).into_owned();
    let code = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, text))
}

/// The value of metric `name` in a Prometheus text (summed over its label sets); `None` when
/// the text has no sample of it.
pub fn metric_value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let value = match rest.strip_prefix('{') {
                Some(labelled) => labelled.rsplit_once('}')?.1,
                None => rest.strip_prefix(' ')?,
            };
            value.split_whitespace().next()?.parse::<f64>().ok()
        })
        .reduce(|a, b| a + b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_of_this_process_and_a_sum() {
        let s = proc_sample(std::process::id(), clock_ticks()).expect("/proc");
        assert!(s.rss_mib > 0.0 && s.hwm_mib >= s.rss_mib);
        let a = ProcSample {
            rss_mib: 1.0,
            hwm_mib: 2.0,
            cpu_s: 3.0,
        };
        let sum = total(&[a, a]);
        assert_eq!((sum.rss_mib, sum.hwm_mib, sum.cpu_s), (2.0, 4.0, 6.0));
    }

    #[test]
    fn gauges_are_read_from_the_metrics_text() {
        let text = "HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\n\
            # HELP kronjob_shard_cronjobs CronJobs this replica schedules.\n\
            # TYPE kronjob_shard_cronjobs gauge\n\
            kronjob_shard_cronjobs 3334\n\
            kronjob_shard_cronjobs_total 7\n\
            kronjob_queue{name=\"a b\"} 2\n\
            kronjob_queue{name=\"c\"} 3 1700000000\n\
            # EOF\n";
        assert_eq!(metric_value(text, "kronjob_shard_cronjobs"), Some(3334.0));
        assert_eq!(metric_value(text, "kronjob_queue"), Some(5.0));
        assert_eq!(metric_value(text, "kronjob_shard"), None);
        assert_eq!(metric_value("", "kronjob_shard_cronjobs"), None);
    }
}
