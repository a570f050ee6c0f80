//! Logging: `tracing`, human text on a terminal and JSON otherwise.
//!
//! The format can be asked for; the level comes from `RUST_LOG` (default [`DEFAULT_FILTER`]).

use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

/// How log lines are written.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human text on a terminal, JSON otherwise.
    #[default]
    Auto,
    /// Human-readable text.
    Text,
    /// One JSON object per line.
    Json,
}

impl LogFormat {
    /// The format to use given whether stderr is a terminal.
    pub fn resolve(self, terminal: bool) -> LogFormat {
        match self {
            LogFormat::Auto if terminal => LogFormat::Text,
            LogFormat::Auto => LogFormat::Json,
            other => other,
        }
    }
}

/// The log filter when `RUST_LOG` is unset: `info`, without the client library's line per
/// failed request (kronjob reports API errors itself, rate-limited, with what it was doing),
/// its line per connection when the kubeconfig skips TLS verification (said once at start),
/// and the runtime's span around every reconcile: kronjob's own lines name the CronJob, and the
/// span cost ~5% of the manager's CPU while 10,000 CronJobs fell due at once (its fields
/// formatted at each reconcile, entered and left at each poll). `RUST_LOG=info` brings it back.
pub const DEFAULT_FILTER: &str = "info,kube_client::client::builder=off,kube_client::client::tls=error,kube_runtime::controller=warn";

/// Install the global subscriber. Calling it twice keeps the first one.
pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_span_events(FmtSpan::NONE);
    let _ = match format.resolve(std::io::stderr().is_terminal()) {
        LogFormat::Json => builder
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
        _ => builder.try_init(),
    };
}

/// At most one log line per key and interval, so an outage gives a steady trickle of warnings
/// rather than one per object and retry; the lines that were held back are counted.
#[derive(Debug)]
pub struct Throttle {
    every: Duration,
    last: Mutex<HashMap<&'static str, (Instant, u64)>>,
}

impl Throttle {
    /// One line per key every `every`.
    pub fn new(every: Duration) -> Self {
        Self {
            every,
            last: Mutex::new(HashMap::new()),
        }
    }

    /// `Some(held back since the last line)` when a line for `key` may be written now.
    pub fn allow(&self, key: &'static str) -> Option<u64> {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        match last.get_mut(key) {
            Some((at, held)) if now.duration_since(*at) < self.every => {
                *held += 1;
                None
            }
            Some((at, held)) => {
                let skipped = *held;
                (*at, *held) = (now, 0);
                Some(skipped)
            }
            None => {
                last.insert(key, (now, 0));
                Some(0)
            }
        }
    }
}

impl Default for Throttle {
    /// One line per key every 10 s.
    fn default() -> Self {
        Self::new(Duration::from_secs(10))
    }
}

/// An error with its sources, `a: b: c`, for one log line or one stderr line.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_filter_keeps_kronjob_at_info_and_drops_the_reconcile_span() {
        use tracing_subscriber::layer::SubscriberExt;
        let filter = EnvFilter::try_new(DEFAULT_FILTER).expect("every directive parses");
        let subscriber = tracing_subscriber::registry().with(filter);
        tracing::subscriber::with_default(subscriber, || {
            let reconcile =
                tracing::info_span!(target: "kube_runtime::controller", "reconciling object");
            assert!(
                reconcile.is_disabled(),
                "the runtime's span per reconcile is off"
            );
            let ours = tracing::info_span!(target: "kronjob::controller::cronjob", "ours");
            assert!(!ours.is_disabled(), "kronjob's own info is on");
            let runtime_warn = tracing::warn_span!(target: "kube_runtime::controller", "warned");
            assert!(!runtime_warn.is_disabled(), "the runtime's warnings stay");
        });
    }

    #[test]
    fn throttle_lets_one_line_through_per_interval_and_counts_the_rest() {
        let t = Throttle::new(Duration::from_millis(200));
        assert_eq!(t.allow("watch"), Some(0));
        assert_eq!(t.allow("watch"), None);
        assert_eq!(t.allow("watch"), None);
        assert_eq!(t.allow("reconcile"), Some(0), "keys are independent");
        std::thread::sleep(Duration::from_millis(250));
        assert_eq!(t.allow("watch"), Some(2), "two lines were held back");
        assert_eq!(t.allow("watch"), None);
    }

    #[test]
    fn auto_is_text_on_a_terminal_and_json_elsewhere() {
        assert_eq!(LogFormat::Auto.resolve(true), LogFormat::Text);
        assert_eq!(LogFormat::Auto.resolve(false), LogFormat::Json);
        assert_eq!(LogFormat::Json.resolve(true), LogFormat::Json);
        assert_eq!(LogFormat::Text.resolve(false), LogFormat::Text);
    }
}
