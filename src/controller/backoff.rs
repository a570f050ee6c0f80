//! Retry timing for every controller, defined once on `backon`'s exponential backoff:
//!
//! - [`watch_backoff`]: how fast a watch reconnects after the API server went away. kube-runtime's
//!   default grows to 30 s and adds up to 100 % on top, so a watch could stay down a minute after
//!   an outage ended, and due Jobs with it. Ours: 250 ms doubling to 2 s, plus up to 100 %
//!   jitter (so at most 4 s between attempts), reset once a watch has been healthy for 2 minutes.
//! - [`retry_delay`]: when to retry one object whose reconcile failed: 1 s doubling to 5 min,
//!   plus up to 100 % jitter. Callers cap it further (the CronJob reconciler never waits past the
//!   CronJob's next slot).
//! - [`Failures`]: consecutive failures per object, the input of [`retry_delay`].

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::watcher::ExponentialBackoff;

/// First watch reconnect delay (before jitter).
pub const WATCH_MIN_DELAY: Duration = Duration::from_millis(250);
/// Largest watch reconnect delay before jitter.
pub const WATCH_MAX_DELAY: Duration = Duration::from_secs(2);
/// Healthy time after which a watch's delay starts from [`WATCH_MIN_DELAY`] again.
pub const WATCH_RESET_AFTER: Duration = Duration::from_secs(120);
/// First retry of a failed reconcile (before jitter).
pub const RETRY_MIN_DELAY: Duration = Duration::from_secs(1);
/// Largest retry delay of a failed reconcile, before jitter.
pub const RETRY_MAX_DELAY: Duration = Duration::from_secs(300);
/// Objects tracked by one [`Failures`] at most; beyond, the oldest knowledge is dropped (a
/// retry then starts from the first delay again, which is harmless).
const FAILURES_CAP: usize = 10_000;

fn builder(min: Duration, max: Duration) -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(min)
        .with_max_delay(max)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
}

/// The backoff every watch of the manager uses.
pub fn watch_backoff() -> ResetTimerBackoff<ExponentialBackoff> {
    ResetTimerBackoff::new(
        ExponentialBackoff::from(builder(WATCH_MIN_DELAY, WATCH_MAX_DELAY)),
        WATCH_RESET_AFTER,
    )
}

/// The delay before retrying an object after its `attempt`th consecutive failure (1-based):
/// between `d` and `2d` where `d` is 1 s doubled `attempt - 1` times, at most 5 min.
pub fn retry_delay(attempt: u32) -> Duration {
    // The delay reaches its cap after 9 doublings; more steps change nothing but cost time.
    let index = attempt.saturating_sub(1).min(12) as usize;
    builder(RETRY_MIN_DELAY, RETRY_MAX_DELAY)
        .build()
        .nth(index)
        .unwrap_or(RETRY_MAX_DELAY)
}

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
        assert!(retry_delay(u32::MAX) <= RETRY_MAX_DELAY * 2);
    }

    #[test]
    fn watch_backoff_grows_to_its_cap_and_resets() {
        let mut b = watch_backoff();
        let first = b.next().expect("never ends");
        assert!(
            first >= WATCH_MIN_DELAY && first <= WATCH_MIN_DELAY * 2,
            "{first:?}"
        );
        let mut last = first;
        for _ in 0..10 {
            last = b.next().expect("never ends");
        }
        assert!(
            last >= WATCH_MAX_DELAY && last <= WATCH_MAX_DELAY * 2,
            "{last:?}"
        );
        b.reset();
        let again = b.next().expect("never ends");
        assert!(again <= WATCH_MIN_DELAY * 2, "reset starts over: {again:?}");
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
