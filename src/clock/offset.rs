//! How far the API server's clock is from ours, from the `Date` header of its responses (pure:
//! the times are passed in).
//!
//! A response's `Date` is the server's clock in whole seconds (truncated), read while the
//! request was between our send and our receipt. So one response says the offset (server
//! minus ours) lies in `[date - received, date + 1 - sent]`: about a second wide. Responses
//! come every second or so (the Lease alone renews every second), each at another fraction of
//! the server's second, so their intersection narrows to a few milliseconds. Between
//! responses the interval widens by [`DRIFT`] per second, in case the clocks drift apart; a
//! response that does not fit the interval at all means a clock stepped (NTP, a suspended
//! machine, another API server behind a load balancer), and the estimate starts over from it.

use jiff::Timestamp;

/// The fastest two clocks are taken to drift apart while no response narrows the estimate:
/// 500 µs per second, far more than any crystal (NTP keeps them within far less).
pub const DRIFT: f64 = 5e-4;

/// The offset of the API server's clock from ours (server minus ours), in seconds: it lies
/// between `low` and `high`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Offset {
    /// The least it can be.
    pub low: f64,
    /// The most it can be.
    pub high: f64,
}

impl Offset {
    /// The estimate: the middle of the interval.
    pub fn middle(&self) -> f64 {
        (self.low + self.high) / 2.0
    }

    /// How far the true offset can be from [`Offset::middle`]: half the interval.
    pub fn uncertainty(&self) -> f64 {
        (self.high - self.low) / 2.0
    }

    /// How far the clocks are apart at least (0 when they may agree).
    pub fn certainly_apart(&self) -> f64 {
        (self.middle().abs() - self.uncertainty()).max(0.0)
    }

    fn widened(self, by: f64) -> Offset {
        Offset {
            low: self.low - by,
            high: self.high + by,
        }
    }
}

/// What one response tells: when its request was sent and its answer received (our clock),
/// and its `Date` (the server's clock, whole seconds since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Our clock when the request was sent.
    pub sent: Timestamp,
    /// Our clock when the answer came.
    pub received: Timestamp,
    /// The answer's `Date`, seconds since the epoch.
    pub date: i64,
}

impl Sample {
    /// The offsets this response allows; `None` when our clock went back while it was in
    /// flight (it tells nothing then).
    pub fn bounds(&self) -> Option<Offset> {
        let date = i128::from(self.date) * 1_000_000_000;
        let seconds = |nanos: i128| nanos as f64 / 1e9;
        let low = seconds(date - self.received.as_nanosecond());
        let high = seconds(date + 1_000_000_000 - self.sent.as_nanosecond());
        (low <= high).then_some(Offset { low, high })
    }
}

/// The offset as the responses so far narrow it.
#[derive(Debug, Default, Clone)]
pub struct Estimate {
    /// The interval, and when (seconds on a monotonic scale) it was last narrowed.
    known: Option<(Offset, f64)>,
}

impl Estimate {
    /// Take in a response that arrived at `at` (seconds on a monotonic scale): the interval
    /// after it.
    pub fn observe(&mut self, at: f64, sample: Sample) -> Option<Offset> {
        let Some(new) = sample.bounds() else {
            return self.at(at);
        };
        let merged = match self.at(at) {
            Some(old) => {
                let low = old.low.max(new.low);
                let high = old.high.min(new.high);
                // Disjoint: a clock stepped; what was known no longer holds.
                if low <= high {
                    Offset { low, high }
                } else {
                    new
                }
            }
            None => new,
        };
        self.known = Some((merged, at));
        Some(merged)
    }

    /// The interval at `at`: the last one widened by the drift since.
    pub fn at(&self, at: f64) -> Option<Offset> {
        let (offset, then) = self.known?;
        Some(offset.widened(DRIFT * (at - then).max(0.0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    fn sample(sent: &str, received: &str, date: &str) -> Sample {
        Sample {
            sent: t(sent),
            received: t(received),
            date: t(date).as_second(),
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn one_response_bounds_the_offset_within_a_second_and_its_round_trip() {
        // (sent, received, Date) -> (low, high)
        let cases = [
            // Clocks agree: the server read 10:00:00.x while we were between .2 and .3.
            (
                "2024-01-01T10:00:00.2Z",
                "2024-01-01T10:00:00.3Z",
                "2024-01-01T10:00:00Z",
                -0.3,
                0.8,
            ),
            // We are 90 s ahead.
            (
                "2024-01-01T10:01:30.2Z",
                "2024-01-01T10:01:30.3Z",
                "2024-01-01T10:00:00Z",
                -90.3,
                -89.2,
            ),
            // We are 5 s behind, and the request took 2 s.
            (
                "2024-01-01T09:59:55Z",
                "2024-01-01T09:59:57Z",
                "2024-01-01T10:00:01Z",
                4.0,
                7.0,
            ),
        ];
        for (sent, received, date, low, high) in cases {
            let b = sample(sent, received, date).bounds().expect("bounds");
            assert!(close(b.low, low) && close(b.high, high), "{sent}: {b:?}");
        }
        // Our clock went back by more than a second while the request was in flight.
        let back = sample(
            "2024-01-01T10:00:05Z",
            "2024-01-01T10:00:02Z",
            "2024-01-01T10:00:03Z",
        );
        assert_eq!(back.bounds(), None);
    }

    #[test]
    fn responses_at_other_fractions_of_the_servers_second_narrow_it_to_the_round_trip() {
        // We are 5 s ahead of the server (offset -5); each request takes 10 ms and reaches
        // the server halfway; the server's Date truncates its clock to the second.
        let mut e = Estimate::default();
        let mut last = None;
        for i in 0..40 {
            let server = 1_700_000_000.0 + f64::from(i) * 1.37;
            let sent = server + 5.0 - 0.005;
            let s = Sample {
                sent: Timestamp::from_nanosecond((sent * 1e9) as i128).expect("ts"),
                received: Timestamp::from_nanosecond(((sent + 0.010) * 1e9) as i128).expect("ts"),
                date: server.floor() as i64,
            };
            last = e.observe(f64::from(i) * 1.37, s);
        }
        let o = last.expect("known");
        assert!(o.low <= -5.0 && -5.0 <= o.high, "{o:?}");
        assert!(o.uncertainty() < 0.05, "{o:?}");
        assert!(o.certainly_apart() > 4.9, "{o:?}");
    }

    #[test]
    fn the_interval_widens_with_time_and_a_step_starts_over() {
        let mut e = Estimate::default();
        let first = sample(
            "2024-01-01T10:00:00.2Z",
            "2024-01-01T10:00:00.3Z",
            "2024-01-01T10:00:00Z",
        );
        e.observe(0.0, first);
        // 100 s later, unchanged but for the drift allowance.
        let later = e.at(100.0).expect("known");
        assert!(
            close(later.low, -0.3 - 0.05) && close(later.high, 0.8 + 0.05),
            "{later:?}"
        );
        // Our clock stepped 60 s ahead: the new response fits nothing known; it alone counts.
        let stepped = sample(
            "2024-01-01T10:01:10.2Z",
            "2024-01-01T10:01:10.3Z",
            "2024-01-01T10:00:10Z",
        );
        let o = e.observe(110.0, stepped).expect("known");
        assert!(close(o.low, -60.3) && close(o.high, -59.2), "{o:?}");
        assert!(close(o.middle(), -59.75) && close(o.uncertainty(), 0.55));
        assert!(close(o.certainly_apart(), 59.2));
        // Nothing known yet: no estimate.
        assert_eq!(Estimate::default().at(5.0), None);
    }
}
