//! Room under the connection cap. Which connections are open and since when each has been
//! idle (no request in flight); and, when a new connection waits at the cap, which one to close
//! for it, as nginx reuses its idle keep-alive connections when it runs out: the one idle
//! longest among those that never sent a request (the cheapest attack holds connections
//! without a word), else among the others; never one with a request in flight, nor one idle
//! for less than [`MIN_IDLE`] (a real client sends its request right after the handshake).
//! Without this, connections that say nothing would hold every place until their header-read
//! timeout, and newcomers, the API server's among them, would queue behind them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// How long a connection must have been idle before it may be closed for a newcomer.
pub const MIN_IDLE: Duration = Duration::from_secs(1);

/// What a connection is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activity {
    /// Requests being answered.
    pub in_flight: usize,
    /// Since when it has had none (its start, or the end of its last answer).
    pub idle_since: Instant,
    /// It was answered at least once.
    pub served: bool,
}

/// Which connection to close for a newcomer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// This one.
    Close(u64),
    /// None yet; the first becomes closable then.
    Wait(Instant),
    /// None: every connection has a request in flight.
    None,
}

/// The connection to close at `now` among `open`: the idle longest of those that never
/// served a request, else of the others, idle for `min_idle` at least.
pub fn choose(open: &[(u64, Activity)], now: Instant, min_idle: Duration) -> Choice {
    let idle = || open.iter().filter(|(_, a)| a.in_flight == 0);
    let closable = idle()
        .filter(|(_, a)| now.saturating_duration_since(a.idle_since) >= min_idle)
        .min_by_key(|(id, a)| (a.served, a.idle_since, *id));
    if let Some((id, _)) = closable {
        return Choice::Close(*id);
    }
    match idle().map(|(_, a)| a.idle_since).min() {
        Some(since) => Choice::Wait(since + min_idle),
        None => Choice::None,
    }
}

/// The open connections of one server. Cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct Room(Arc<Mutex<Open>>);

#[derive(Debug, Default)]
struct Open {
    next: u64,
    tenants: HashMap<u64, (Activity, CancellationToken)>,
}

impl Room {
    fn lock(&self) -> MutexGuard<'_, Open> {
        // A panic elsewhere while holding the lock leaves a valid map: keep using it.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A connection that starts now.
    pub fn enter(&self) -> Tenant {
        let closed = CancellationToken::new();
        let mut open = self.lock();
        let id = open.next;
        open.next += 1;
        let activity = Activity {
            in_flight: 0,
            idle_since: Instant::now(),
            served: false,
        };
        open.tenants.insert(id, (activity, closed.clone()));
        Tenant {
            handle: Handle {
                room: self.clone(),
                id,
            },
            closed,
        }
    }

    /// Close one connection for a newcomer, if one may be ([`choose`]); what was chosen.
    pub fn make_room(&self, now: Instant) -> Choice {
        let open = self.lock();
        let activities: Vec<(u64, Activity)> =
            open.tenants.iter().map(|(id, (a, _))| (*id, *a)).collect();
        let choice = choose(&activities, now, MIN_IDLE);
        if let Choice::Close(id) = choice
            && let Some((_, closed)) = open.tenants.get(&id)
        {
            closed.cancel();
        }
        choice
    }

    /// Connections open now.
    pub fn len(&self) -> usize {
        self.lock().tenants.len()
    }

    /// Whether none is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One open connection's place in the [`Room`], left when dropped.
#[derive(Debug)]
pub struct Tenant {
    handle: Handle,
    closed: CancellationToken,
}

impl Tenant {
    /// Cancelled when the connection is to close for a newcomer.
    pub fn closed(&self) -> &CancellationToken {
        &self.closed
    }

    /// What the connection's requests report their start and end to.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }
}

impl Drop for Tenant {
    fn drop(&mut self) {
        let Handle { room, id } = &self.handle;
        room.lock().tenants.remove(id);
    }
}

/// A connection's place, as its requests see it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Handle {
    room: Room,
    id: u64,
}

impl Handle {
    /// A request starts; it ends when the returned guard is dropped.
    pub fn request(&self) -> Request {
        self.update(|a| a.in_flight += 1);
        Request(self.clone())
    }

    fn update(&self, change: impl FnOnce(&mut Activity)) {
        if let Some((activity, _)) = self.room.lock().tenants.get_mut(&self.id) {
            change(activity);
        }
    }
}

/// A request in flight on a connection; its end makes the connection idle again.
#[derive(Debug)]
pub struct Request(Handle);

impl Drop for Request {
    fn drop(&mut self) {
        let now = Instant::now();
        self.0.update(|a| {
            a.in_flight = a.in_flight.saturating_sub(1);
            if a.in_flight == 0 {
                a.idle_since = now;
            }
            a.served = true;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, ms: u64) -> Instant {
        start + Duration::from_millis(ms)
    }

    #[test]
    fn the_longest_idle_silent_connection_goes_first() {
        let t0 = Instant::now();
        let idle = |ms, served| Activity {
            in_flight: 0,
            idle_since: at(t0, ms),
            served,
        };
        let busy = Activity {
            in_flight: 1,
            idle_since: t0,
            served: true,
        };
        let now = at(t0, 5_000);
        let min = Duration::from_secs(1);
        type Case = (&'static str, Vec<(u64, Activity)>, Choice);
        let cases: Vec<Case> = vec![
            ("nobody", vec![], Choice::None),
            ("only busy ones", vec![(1, busy), (2, busy)], Choice::None),
            (
                "the longest idle of the silent ones, before any that was served",
                vec![
                    (1, idle(0, true)),
                    (2, idle(2_000, false)),
                    (3, idle(1_000, false)),
                    (4, busy),
                ],
                Choice::Close(3),
            ),
            (
                "a served one when no silent one may go",
                vec![(1, idle(1_000, true)), (2, idle(4_500, false)), (3, busy)],
                Choice::Close(1),
            ),
            (
                "none idle long enough: when the first will be",
                vec![(1, idle(4_200, true)), (2, idle(4_500, false)), (3, busy)],
                Choice::Wait(at(t0, 5_200)),
            ),
            (
                "exactly the minimum is enough",
                vec![(7, idle(4_000, false))],
                Choice::Close(7),
            ),
        ];
        for (what, open, want) in cases {
            assert_eq!(choose(&open, now, min), want, "{what}");
        }
    }

    #[test]
    fn requests_make_a_connection_busy_then_idle_and_served() {
        let room = Room::default();
        let first = room.enter();
        let second = room.enter();
        assert_eq!(room.len(), 2);
        let later = Instant::now() + Duration::from_secs(10);
        // Both silent: the first in goes first.
        let request = second.handle().request();
        assert_eq!(room.make_room(later), Choice::Close(first.handle.id));
        assert!(first.closed().is_cancelled());
        assert!(!second.closed().is_cancelled());
        drop(first);
        assert_eq!(room.len(), 1);
        // The second is answering: nobody may go.
        assert_eq!(room.make_room(later), Choice::None);
        drop(request);
        // Idle again, served, idle since just now.
        match room.make_room(Instant::now()) {
            Choice::Wait(when) => assert!(when > Instant::now()),
            other => panic!("{other:?}"),
        }
        assert_eq!(room.make_room(later), Choice::Close(second.handle.id));
        drop(second);
        assert!(room.is_empty());
    }
}
