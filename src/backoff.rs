//! Every retry timing of kronjob: one backoff family with named settings.
//!
//! The family is `backon`'s exponential backoff, doubling from a first delay to a cap, each
//! delay plus up to 100 % jitter.
//!
//! - [`WATCH`]: how fast a watch reconnects after the API server went away. kube-runtime's
//!   default grows to 30 s and adds up to 100 % on top, so a watch could stay down a minute after
//!   an outage ended, and due Jobs with it. Ours: 250 ms doubling to 2 s (so at most 4 s between
//!   attempts), reset once a watch has been healthy for [`WATCH_RESET_AFTER`]; see
//!   [`watch_backoff`].
//! - [`RECONCILE`]: when to retry one object whose reconcile, status write or delete failed:
//!   1 s doubling to 5 min; see [`retry_delay`]. Callers cap it further (the CronJob reconciler
//!   never waits past the CronJob's next slot).
//! - [`CLIENT`]: the client's own retries of a request answered 429, 503 or 504: 100 ms
//!   doubling to 2 s, at most [`CLIENT_RETRIES`] times (see [`crate::client`]).
//! - [`lease_retry`]: a leader-election or shard Lease's retry period plus up to 20 %, so
//!   replicas started together spread their requests.
//!
//! [`Failures`] counts consecutive failures per object, the input of [`retry_delay`].

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::watcher::ExponentialBackoff;

/// One setting of the family: the first delay and the cap, before jitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exponential {
    /// First delay (before jitter).
    pub first: Duration,
    /// Largest delay (before jitter).
    pub cap: Duration,
}

impl Exponential {
    /// The backoff: doubling from `first` to `cap`, each delay plus up to 100 % jitter, never
    /// ending.
    pub fn builder(self) -> ExponentialBuilder {
        ExponentialBuilder::default()
            .with_min_delay(self.first)
            .with_max_delay(self.cap)
            .with_factor(2.0)
            .with_jitter()
            .without_max_times()
    }

    /// The delay before attempt `attempt + 1`, after `attempt` consecutive failures
    /// (1-based): between `d` and `2d` where `d` is `first` doubled `attempt - 1` times, at
    /// most `cap`.
    pub fn delay(self, attempt: u32) -> Duration {
        // Any cap is reached after a few dozen doublings; more steps change nothing but cost
        // time.
        let index = attempt.saturating_sub(1).min(40) as usize;
        self.builder().build().nth(index).unwrap_or(self.cap)
    }
}

/// Watch reconnects.
pub const WATCH: Exponential = Exponential {
    first: Duration::from_millis(250),
    cap: Duration::from_secs(2),
};
/// Healthy time after which a watch's delay starts from [`WATCH`]'s first again.
pub const WATCH_RESET_AFTER: Duration = Duration::from_secs(120);
/// Retries of an object whose reconcile (or deferred write) failed.
pub const RECONCILE: Exponential = Exponential {
    first: Duration::from_secs(1),
    cap: Duration::from_secs(300),
};
/// The client's retries of a request the API server asked to be retried (429, 503, 504).
pub const CLIENT: Exponential = Exponential {
    first: Duration::from_millis(100),
    cap: Duration::from_secs(2),
};
/// Most retries of one request by the client.
pub const CLIENT_RETRIES: u32 = 4;
/// The share of a Lease's retry period that is jittered: it waits 80 % of the period, then
/// up to twice the remaining 20 % ([`lease_retry`]).
const LEASE_JITTERED_SHARE: f64 = 0.2;

/// The backoff every watch of the manager uses.
pub fn watch_backoff() -> ResetTimerBackoff<ExponentialBackoff> {
    ResetTimerBackoff::new(ExponentialBackoff::from(WATCH.builder()), WATCH_RESET_AFTER)
}

/// The delay before retrying an object after its `attempt`th consecutive failure (1-based):
/// [`RECONCILE`]'s.
pub fn retry_delay(attempt: u32) -> Duration {
    RECONCILE.delay(attempt)
}

/// How long a Lease follower waits before its next try: `period` plus up to 20 % (the
/// jittered fifth doubles at most), so replicas spread their requests.
pub fn lease_retry(period: Duration) -> Duration {
    let jittered = period.mul_f64(LEASE_JITTERED_SHARE);
    let fixed = period.saturating_sub(jittered);
    let share = Exponential {
        first: jittered,
        cap: jittered,
    };
    fixed + share.delay(1)
}

/// Objects tracked by one [`Failures`] at most; beyond, the oldest knowledge is dropped (a
/// retry then starts from the first delay again, which is harmless).
const FAILURES_CAP: usize = 10_000;

/// Consecutive failures per object.
#[derive(Debug)]
pub struct Failures<K> {
    counts: Mutex<HashMap<K, u32>>,
}

impl<K> Default for Failures<K> {
    fn default() -> Self {
        Self {
            counts: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Hash + Eq + Clone> Failures<K> {
    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<K, u32>> {
        // A panic elsewhere while holding the lock leaves a valid map: keep using it.
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Count one more failure of `key`; returns how many in a row.
    pub fn record(&self, key: &K) -> u32 {
        let mut counts = self.counts();
        if counts.len() >= FAILURES_CAP && !counts.contains_key(key) {
            counts.clear();
        }
        let n = counts.entry(key.clone()).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    /// `key` succeeded: its next failure starts from the first delay again.
    pub fn clear(&self, key: &K) {
        let mut counts = self.counts();
        if !counts.is_empty() {
            counts.remove(key);
        }
    }

    /// Consecutive failures of `key` so far.
    pub fn get(&self, key: &K) -> u32 {
        self.counts().get(key).copied().unwrap_or(0)
    }

    /// Every object whose last attempt failed.
    pub fn failing(&self) -> Vec<K> {
        self.counts().keys().cloned().collect()
    }

    /// Keep only the objects for which `keep` is true (drop deleted ones).
    pub fn retain(&self, keep: impl Fn(&K) -> bool) {
        let mut counts = self.counts();
        if !counts.is_empty() {
            counts.retain(|k, _| keep(k));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::utils::Backoff;

    #[test]
    fn retry_delay_doubles_with_jitter_up_to_the_cap() {
        let bases = [
            1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 300.0, 300.0,
        ];
        for (i, base) in bases.iter().enumerate() {
            let attempt = u32::try_from(i + 1).expect("small");
            for _ in 0..20 {
                let d = retry_delay(attempt).as_secs_f64();
                assert!(
                    (*base..=base * 2.0).contains(&d),
                    "attempt {attempt}: {d} s outside [{base}, {}]",
                    base * 2.0
                );
            }
        }
        assert!(retry_delay(u32::MAX) <= RECONCILE.cap * 2);
    }

    #[test]
    fn watch_backoff_grows_to_its_cap_and_resets() {
        let mut b = watch_backoff();
        let first = b.next().expect("never ends");
        assert!(
            first >= WATCH.first && first <= WATCH.first * 2,
            "{first:?}"
        );
        let mut last = first;
        for _ in 0..10 {
            last = b.next().expect("never ends");
        }
        assert!(last >= WATCH.cap && last <= WATCH.cap * 2, "{last:?}");
        b.reset();
        let again = b.next().expect("never ends");
        assert!(again <= WATCH.first * 2, "reset starts over: {again:?}");
    }

    #[test]
    fn client_and_lease_delays_stay_in_their_bounds() {
        for attempt in 1..=CLIENT_RETRIES {
            let d = CLIENT.delay(attempt);
            let base = CLIENT.first * 2u32.pow(attempt - 1);
            assert!(
                d >= base.min(CLIENT.cap) && d <= base.min(CLIENT.cap) * 2,
                "{d:?}"
            );
        }
        let period = Duration::from_secs(1);
        let delays: Vec<Duration> = (0..200).map(|_| lease_retry(period)).collect();
        for d in &delays {
            assert!(*d >= period && *d <= period.mul_f64(1.2), "{d:?}");
        }
        assert!(
            delays.iter().any(|d| *d != delays[0]),
            "jittered, not fixed: {delays:?}"
        );
    }

    #[test]
    fn failures_count_clear_and_forget() {
        let f = Failures::<String>::default();
        assert_eq!(f.record(&"a".into()), 1);
        assert_eq!(f.record(&"a".into()), 2);
        assert_eq!(f.record(&"b".into()), 1);
        let mut failing = f.failing();
        failing.sort();
        assert_eq!(failing, ["a", "b"]);
        f.clear(&"a".into());
        assert_eq!(f.get(&"a".into()), 0);
        f.retain(|k| k != "b");
        assert!(f.failing().is_empty());
    }
}
