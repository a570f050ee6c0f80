//! The one place the wall clock is read.
//!
//! Controllers get a [`Clock`] in their context and read it once per reconcile; the webhook and
//! the commands read the same; tests pass a [`FixedClock`]. The manager's clock is
//! [`ApiServerClock`]: the system clock corrected by its measured offset from the API server's
//! ([`offset`]), so that slots run by the cluster's time whatever the node's clock says.

pub mod offset;

use std::fmt::Debug;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use tracing::{info, warn};

use offset::{Estimate, Offset, Sample};

/// A source of the current time.
pub trait Clock: Send + Sync + Debug {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that says what it is told; for tests.
#[derive(Debug)]
pub struct FixedClock(Mutex<Timestamp>);

impl FixedClock {
    /// A clock standing at `now`.
    pub fn new(now: Timestamp) -> Self {
        Self(Mutex::new(now))
    }

    /// Move the clock to `now`.
    pub fn set(&self, now: Timestamp) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = now;
    }

    /// Move the clock forward by `by`.
    pub fn advance(&self, by: SignedDuration) {
        let mut t = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *t = t.saturating_add(by).unwrap_or(*t);
    }
}

impl Clock for FixedClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// How far apart the clocks must certainly be for the manager to log it.
pub const SKEW_LOGGED: f64 = 2.0;
/// How often the log says so again while it lasts.
const SKEW_LOGGED_EVERY: Duration = Duration::from_secs(600);

/// The API server's clock as the manager's responses measure it: the system clock plus the
/// least offset the API server's `Date` headers allow (so the manager never acts before the
/// API server's clock reaches a time: late by at most the estimate's uncertainty, a few
/// milliseconds once a few dozen responses came); the system clock alone until the first
/// response.
///
/// kronjob schedules by the API server's clock rather than the node's: every time the user
/// reads (a Job's `creationTimestamp`, a Pod's start, a Job's `completionTime`, which the TTL
/// counts from) is the control plane's, and replicas on nodes whose clocks disagree then
/// agree on when a slot is due, so a handover neither runs a slot early nor skips one.
#[derive(Debug)]
pub struct ApiServerClock {
    /// The monotonic scale of the estimate.
    origin: Instant,
    state: Mutex<Measured>,
}

#[derive(Debug, Default)]
struct Measured {
    estimate: Estimate,
    /// When the skew was last logged as large (monotonic), while it is.
    logged: Option<Instant>,
}

impl Default for ApiServerClock {
    fn default() -> Self {
        Self {
            origin: Instant::now(),
            state: Mutex::default(),
        }
    }
}

impl ApiServerClock {
    /// Take in one response (sent and received by the system clock, with its `Date`); log when
    /// the clocks are found more than [`SKEW_LOGGED`] apart, every 10 minutes while they stay
    /// so, and when they agree again.
    pub fn observe(&self, sent: Timestamp, received: Timestamp, date: Timestamp) {
        let sample = Sample {
            sent,
            received,
            date: date.as_second(),
        };
        let now = Instant::now();
        let at = now.duration_since(self.origin).as_secs_f64();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(offset) = state.estimate.observe(at, sample) else {
            return;
        };
        let apart = offset.certainly_apart() > SKEW_LOGGED;
        match state.logged {
            None if apart => {}
            Some(then) if apart && now.duration_since(then) >= SKEW_LOGGED_EVERY => {}
            Some(_) if !apart => {
                state.logged = None;
                info!(
                    offset_seconds = offset.middle(),
                    uncertainty_seconds = offset.uncertainty(),
                    "the system clock agrees with the API server's again"
                );
                return;
            }
            _ => return,
        }
        state.logged = Some(now);
        warn!(
            offset_seconds = offset.middle(),
            uncertainty_seconds = offset.uncertainty(),
            "the system clock is off from the API server's (offset = API server minus system clock): kronjob schedules by the API server's clock; fix the node's time synchronization"
        );
    }

    /// The offset now (API server minus the system clock), once a response has told it.
    pub fn offset(&self) -> Option<Offset> {
        let at = self.origin.elapsed().as_secs_f64();
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.estimate.at(at)
    }
}

impl Clock for ApiServerClock {
    fn now(&self) -> Timestamp {
        let now = SystemClock.now();
        let Some(offset) = self.offset() else {
            return now;
        };
        let by = SignedDuration::try_from_secs_f64(offset.low).unwrap_or_default();
        now.saturating_add(by).unwrap_or(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_clock_moves_only_when_told() {
        let t0: Timestamp = "2024-01-15T10:00:00Z".parse().expect("timestamp");
        let clock = FixedClock::new(t0);
        assert_eq!(clock.now(), t0);
        clock.advance(SignedDuration::from_secs(90));
        assert_eq!(clock.now().to_string(), "2024-01-15T10:01:30Z");
        clock.set(t0);
        assert_eq!(clock.now(), t0);
    }

    #[test]
    fn the_api_server_clock_is_the_system_clock_until_a_response_and_never_ahead_after() {
        let clock = ApiServerClock::default();
        let before = Timestamp::now();
        let now = clock.now();
        assert!(now >= before && now <= Timestamp::now(), "{now}");
        assert_eq!(clock.offset(), None);
        // The server says it is 90 s earlier than our clock, give or take the second.
        let sent = Timestamp::now();
        let received = sent + SignedDuration::from_millis(20);
        let date = Timestamp::from_second(sent.as_second() - 90).expect("ts");
        clock.observe(sent, received, date);
        let offset = clock.offset().expect("measured");
        assert!(offset.low <= -89.0 && offset.high >= -91.0 && offset.high <= -89.0);
        // Corrected by the low bound: the server's clock reads at least this.
        let corrected = clock.now();
        let shift = corrected.duration_since(Timestamp::now()).as_secs_f64();
        assert!((-91.1..=-89.9).contains(&shift), "{shift}");
        assert!(shift <= offset.low + 0.1, "{shift} {offset:?}");
    }
}
