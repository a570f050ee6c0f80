//! How fast watches reconnect after the API server comes back. kube-runtime's default grows to
//! 30 s and adds up to 100 % jitter on top, so a watch could stay down a minute after an outage
//! ended, and due Jobs with it. Ours: 500 ms doubling to 5 s, ±20 % jitter, reset once a watch
//! has been healthy for 2 minutes.

use std::hash::BuildHasher;
use std::time::Duration;

use kube::runtime::utils::{Backoff, ResetTimerBackoff};

/// First delay.
pub const MIN_DELAY: Duration = Duration::from_millis(500);
/// Largest delay before jitter.
pub const MAX_DELAY: Duration = Duration::from_secs(5);
/// Healthy time after which the delay starts from [`MIN_DELAY`] again.
pub const RESET_AFTER: Duration = Duration::from_secs(120);

/// Exponential backoff with bounded jitter (the random part comes from std's per-process
/// random hasher keys, so replicas do not reconnect in lockstep).
#[derive(Debug, Clone, Default)]
pub struct WatchBackoff {
    attempt: u32,
    random: std::collections::hash_map::RandomState,
}

impl WatchBackoff {
    /// The delay of attempt `n` (0-based) before jitter.
    pub fn base_delay(n: u32) -> Duration {
        MIN_DELAY
            .saturating_mul(2u32.saturating_pow(n.min(16)))
            .min(MAX_DELAY)
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let base = Self::base_delay(self.attempt);
        // A factor in [0.8, 1.2).
        let unit = (self.random.hash_one(self.attempt) % 10_000) as f64 / 10_000.0;
        self.attempt = self.attempt.saturating_add(1);
        Some(base.mul_f64(0.8 + 0.4 * unit))
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.attempt = 0;
    }
}

/// The backoff every watch of the manager uses.
pub fn watch_backoff() -> ResetTimerBackoff<WatchBackoff> {
    ResetTimerBackoff::new(WatchBackoff::default(), RESET_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_to_the_cap_with_bounded_jitter_and_resets() {
        let mut b = WatchBackoff::default();
        let bases = [0.5, 1.0, 2.0, 4.0, 5.0, 5.0, 5.0];
        for base in bases {
            let d = b.next().expect("never ends").as_secs_f64();
            assert!(
                (base * 0.8..base * 1.2).contains(&d),
                "{d} s not within 20 % of {base} s"
            );
        }
        for _ in 0..100 {
            assert!(b.next().expect("never ends") < Duration::from_secs(6));
        }
        b.reset();
        assert!(b.next().expect("never ends") < Duration::from_millis(600));
    }

    #[test]
    fn base_delay_saturates() {
        assert_eq!(WatchBackoff::base_delay(0), MIN_DELAY);
        assert_eq!(WatchBackoff::base_delay(3), Duration::from_secs(4));
        assert_eq!(WatchBackoff::base_delay(u32::MAX), MAX_DELAY);
    }
}
