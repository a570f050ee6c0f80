//! The one place the wall clock is read.
//!
//! Controllers get a [`Clock`] in their context and read it once per reconcile; the webhook and
//! the commands read the same; tests pass a [`FixedClock`].

use std::fmt::Debug;
use std::sync::Mutex;

use jiff::{SignedDuration, Timestamp};

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
}
