//! Creates first: the one priority rule between API requests. A Job create for a due slot is
//! *urgent*; everything that can wait (status writes, Events, history and TTL deletes) is
//! *background* and goes out only when no urgent request has been in flight for a short while.
//! At a slot where 1,000 CronJobs are due, the 1,000 Job POSTs therefore reach the API server
//! before the first status write competes with them.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use std::sync::Mutex;

use tokio::sync::Notify;
use tokio::time::Instant;

/// How long the urgent lane must have been idle before background work starts: bridges the
/// gaps between one create finishing and the next reconcile starting its own.
pub const LINGER: Duration = Duration::from_millis(50);

/// The priority gate; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    urgent: AtomicUsize,
    last_urgent: Mutex<Option<Instant>>,
    idle: Notify,
}

/// An urgent request in flight; dropping it ends it.
#[derive(Debug)]
pub struct Urgent {
    gate: Gate,
}

impl Gate {
    /// A new gate, with nothing urgent going on.
    pub fn new() -> Self {
        Self::default()
    }

    /// Mark an urgent request in flight until the guard drops.
    pub fn urgent(&self) -> Urgent {
        self.inner.urgent.fetch_add(1, Ordering::SeqCst);
        Urgent { gate: self.clone() }
    }

    /// Urgent requests in flight now.
    pub fn urgent_in_flight(&self) -> usize {
        self.inner.urgent.load(Ordering::SeqCst)
    }

    /// Wait until background work may go: no urgent request in flight for [`LINGER`].
    pub async fn background(&self) {
        loop {
            let notified = self.inner.idle.notified();
            if self.inner.urgent.load(Ordering::SeqCst) > 0 {
                notified.await;
                continue;
            }
            let quiet_since = *self
                .inner
                .last_urgent
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            match quiet_since {
                Some(at) if at.elapsed() < LINGER => {
                    tokio::time::sleep_until(at + LINGER).await;
                }
                _ => return,
            }
        }
    }
}

impl Drop for Urgent {
    fn drop(&mut self) {
        let inner = &self.gate.inner;
        if inner.urgent.fetch_sub(1, Ordering::SeqCst) == 1 {
            *inner.last_urgent.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
            inner.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn background_waits_for_urgent_work_and_the_linger() {
        let gate = Gate::new();
        // Nothing urgent: background goes at once.
        tokio::time::timeout(Duration::from_millis(1), gate.background())
            .await
            .expect("idle gate lets background through");

        let urgent = gate.urgent();
        assert_eq!(gate.urgent_in_flight(), 1);
        let waiting = tokio::spawn({
            let gate = gate.clone();
            async move {
                gate.background().await;
                Instant::now()
            }
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished(), "held while urgent work runs");
        let released = Instant::now();
        drop(urgent);
        let went = waiting.await.expect("task");
        let waited = went - released;
        assert!(
            waited >= LINGER,
            "waited only {waited:?} after the urgent lane went idle"
        );
        assert!(waited < LINGER * 3, "waited {waited:?}");
    }
}
