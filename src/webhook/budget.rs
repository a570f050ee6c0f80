//! The memory budget of request bodies in flight. A request reserves what its body will cost
//! before it is read: its length (from `Content-Length`, else the largest body allowed) times
//! [`DECODE_FACTOR`], since decoding JSON into values costs several times its text. The
//! reservation is held until the answer is sent; a request that cannot reserve within
//! [`WAIT`] is refused (429).
//!
//! Two lanes, so that large bodies never hold up ordinary reviews: bodies up to
//! [`SMALL_BODY`] reserve from a budget of their own ([`SMALL_LANE`]); larger ones share
//! [`LARGE_LANE`], which holds one largest body at a time. Together they bound what bodies in
//! flight cost at [`SMALL_LANE`] + [`LARGE_LANE`] whatever the traffic.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::admission::MAX_BODY_BYTES;

/// What decoding a body costs, as a multiple of its length. Measured on 3 MiB reviews
/// (`admit` on both endpoints, peak RSS): a long string costs 2.3x, but many tiny values cost
/// far more (an array of zeros 48x, of empty objects 37x, an object of short keys 40x), so
/// bodies with more than [`MAX_JSON_VALUES`] values are refused and the factor covers the
/// rest: at most 100,000 values (~10 MiB decoded) plus strings at 2.3x stay within 12x of a
/// 3 MiB body.
pub const DECODE_FACTOR: usize = 12;
/// Most JSON values (scalars, arrays, objects) a body may hold; a CronJob review holds a few
/// thousand.
pub const MAX_JSON_VALUES: usize = 100_000;
/// Bodies up to this length use the small lane.
pub const SMALL_BODY: usize = 256 * 1024;
/// Budget of the small lane, bytes: 5 largest small bodies at once, or hundreds of ordinary
/// reviews (a few KiB each).
pub const SMALL_LANE: usize = 16 * 1024 * 1024;
/// Budget of the large lane, bytes: one largest body (3 MiB, decoded) at a time.
pub const LARGE_LANE: usize = MAX_BODY_BYTES * DECODE_FACTOR;
/// Longest wait for a reservation.
pub const WAIT: Duration = Duration::from_secs(1);
/// Reservations are counted in units of this many bytes.
const UNIT: usize = 1024;

/// The two lanes. Cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct BodyBudget {
    small: Arc<Semaphore>,
    large: Arc<Semaphore>,
}

impl Default for BodyBudget {
    fn default() -> Self {
        BodyBudget {
            small: Arc::new(Semaphore::new(SMALL_LANE / UNIT)),
            large: Arc::new(Semaphore::new(LARGE_LANE / UNIT)),
        }
    }
}

/// A reservation, given back when dropped.
#[derive(Debug)]
pub struct Reservation(#[allow(dead_code)] OwnedSemaphorePermit);

/// The lane and units a body of `length` bytes (`None`: unknown) reserves.
pub fn cost(length: Option<usize>) -> (bool, u32) {
    let length = length.unwrap_or(MAX_BODY_BYTES).min(MAX_BODY_BYTES);
    let small = length <= SMALL_BODY;
    let lane = if small { SMALL_LANE } else { LARGE_LANE };
    let units = (length * DECODE_FACTOR)
        .div_ceil(UNIT)
        .clamp(1, lane / UNIT);
    (small, u32::try_from(units).unwrap_or(u32::MAX))
}

impl BodyBudget {
    /// Reserve for a body of `length` bytes, waiting at most [`WAIT`]; `None` when the budget
    /// stays spent.
    pub async fn reserve(&self, length: Option<usize>) -> Option<Reservation> {
        let (small, units) = cost(length);
        let lane = if small { &self.small } else { &self.large };
        let permit = tokio::time::timeout(WAIT, Arc::clone(lane).acquire_many_owned(units));
        match permit.await {
            Ok(Ok(permit)) => Some(Reservation(permit)),
            _ => None,
        }
    }
}

/// How many JSON values `body` holds, roughly (commas, colons and opening brackets outside
/// strings, plus one): linear, allocation-free, to refuse a body before decoding it.
pub fn json_values(body: &[u8]) -> usize {
    let (mut count, mut in_string, mut escaped) = (1usize, false, false);
    for &byte in body {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b',' | b'[' | b'{' => count += 1,
            _ => {}
        }
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_counted_outside_strings() {
        assert_eq!(json_values(b"0"), 1);
        assert_eq!(json_values(b"[0,0,0]"), 4);
        assert_eq!(json_values(br#"{"a":"x,y[{","b":[1,2]}"#), 5);
        assert_eq!(json_values(br#"["a\",b", 1]"#), 3);
        let zeros = format!("[{}0]", "0,".repeat(200_000));
        assert!(json_values(zeros.as_bytes()) > MAX_JSON_VALUES);
    }

    #[test]
    fn costs_by_lane() {
        assert_eq!(cost(Some(0)), (true, 1));
        assert_eq!(cost(Some(4096)), (true, 48));
        assert_eq!(cost(Some(SMALL_BODY)), (true, 3072));
        let (small, units) = cost(Some(SMALL_BODY + 1));
        assert!(!small);
        assert_eq!(units as usize, (SMALL_BODY + 1) * DECODE_FACTOR / UNIT + 1);
        assert_eq!(cost(None), (false, (LARGE_LANE / UNIT) as u32));
        assert_eq!(cost(Some(usize::MAX)), cost(None));
    }

    #[tokio::test(start_paused = true)]
    async fn large_bodies_take_turns_and_never_block_small_ones() {
        let budget = BodyBudget::default();
        let first = budget.reserve(Some(MAX_BODY_BYTES)).await;
        assert!(first.is_some());
        assert!(
            budget.reserve(Some(SMALL_BODY + 1)).await.is_none(),
            "the large lane is spent until the first is done"
        );
        let mut small = Vec::new();
        for _ in 0..150 {
            small.push(budget.reserve(Some(8 * 1024)).await.expect("small lane"));
        }
        drop(first);
        assert!(budget.reserve(Some(MAX_BODY_BYTES)).await.is_some());
    }
}
