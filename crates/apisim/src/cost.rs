//! The cost model: request latency sampled from a log-normal body with an optional slow tail, and
//! a leaky-bucket cap on write throughput. All waiting uses `tokio::time`, so it also runs under
//! paused time.

use std::time::Duration;

use tokio::time::Instant;

/// The 99th percentile of the standard normal distribution.
const Z99: f64 = 2.326_347_874_040_841;

/// A latency distribution: a log-normal body fitted to its median and 99th percentile, and
/// optionally a slow tail: a fraction of requests that take a uniform time in a range instead
/// (a real API server's p99 comes from rare slow requests, such as etcd fsyncs, not from a wide
/// body: its mean stays close to its median).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Latency {
    /// The body's median.
    pub p50: Duration,
    /// The body's 99th percentile (taken as `p50` when smaller).
    pub p99: Duration,
    /// The fraction of requests in the slow tail (0 for none).
    pub tail: f64,
    /// The tail's range.
    pub tail_range: (Duration, Duration),
}

impl Latency {
    /// No latency at all.
    pub const ZERO: Latency = Latency::new(Duration::ZERO, Duration::ZERO);

    /// A log-normal latency with this median and 99th percentile.
    pub const fn new(p50: Duration, p99: Duration) -> Self {
        Latency {
            p50,
            p99,
            tail: 0.0,
            tail_range: (Duration::ZERO, Duration::ZERO),
        }
    }

    /// The same body, with `fraction` of requests taking a uniform time in `[min, max]`.
    pub const fn with_tail(mut self, fraction: f64, min: Duration, max: Duration) -> Self {
        self.tail = fraction;
        self.tail_range = (min, max);
        self
    }

    /// The `sigma` of the fitted log-normal (`mu` is `ln(p50)`).
    fn sigma(&self) -> f64 {
        if self.p99 <= self.p50 {
            return 0.0;
        }
        (self.p99.as_secs_f64() / self.p50.as_secs_f64()).ln() / Z99
    }

    /// The mean: the body's `p50 * exp(sigma² / 2)` blended with the tail's midpoint.
    pub fn mean(&self) -> Duration {
        let sigma = self.sigma();
        let body = self.p50.as_secs_f64() * (sigma * sigma / 2.0).exp();
        let tail = (self.tail_range.0 + self.tail_range.1).as_secs_f64() / 2.0;
        Duration::from_secs_f64(body * (1.0 - self.tail) + tail * self.tail)
    }

    /// Draws one latency.
    pub(crate) fn sample(&self, rng: &mut SplitMix64) -> Duration {
        if self.p50.is_zero() {
            return Duration::ZERO;
        }
        if self.tail > 0.0 && rng.unit() <= self.tail {
            let (min, max) = self.tail_range;
            return min + max.saturating_sub(min).mul_f64(rng.unit());
        }
        let secs = self.p50.as_secs_f64() * (self.sigma() * rng.normal()).exp();
        // Box-Muller draws are bounded (|z| < 9.5), so this is finite; cap it anyway.
        Duration::from_secs_f64(secs.min(3600.0))
    }
}

/// What requests cost: latency for writes and reads, and a cap on write throughput.
#[derive(Debug, Clone, PartialEq)]
pub struct CostModel {
    /// Latency of POST, PUT, PATCH and DELETE requests.
    pub write: Latency,
    /// Latency of GET requests (get, list, and the start of a watch).
    pub read: Latency,
    /// How late a watch delivers an event after the write that caused it (order kept).
    pub watch: Latency,
    /// The write throughput cap (a leaky bucket): `None` for no cap.
    pub writes_per_second: Option<f64>,
    /// Whether the Job controller's own writes (a Pod, an Event and the status per new Job)
    /// take their share of the cap. Off in [`CostModel::measured`]: the measured floor (1,000
    /// creates in 0.56 s) was taken with the Job controller running.
    pub job_controller_writes: bool,
    /// The seed of the latency sampler, so runs are reproducible.
    pub seed: u64,
}

impl CostModel {
    /// No latency and no cap: requests are answered at once (for unit tests).
    pub fn free() -> Self {
        CostModel {
            write: Latency::ZERO,
            read: Latency::ZERO,
            watch: Latency::ZERO,
            writes_per_second: None,
            job_controller_writes: false,
            seed: 0,
        }
    }

    /// The figures measured on a kube-apiserver 1.34 on 2 cores, as seen by a client with 16
    /// creates in flight: p50 ~8 ms, p99 ~60 ms, and 1,000 creates in 0.56 s (1,800/s), which
    /// needs a mean of about 9 ms. A service time of p50 6 ms / p99 12 ms with 1.5 % of writes
    /// taking 45-90 ms, plus the wait for the cap, reproduces all three. Reads p50 2 ms and
    /// p99 15 ms, uncapped. Watch delivery lag p50 5 ms, p99 50 ms: an assumption (a loaded API
    /// server delivers events through its watch cache tens of milliseconds after the write),
    /// not a measurement.
    pub fn measured() -> Self {
        CostModel {
            write: Latency::new(Duration::from_millis(6), Duration::from_millis(12)).with_tail(
                0.015,
                Duration::from_millis(45),
                Duration::from_millis(90),
            ),
            read: Latency::new(Duration::from_millis(2), Duration::from_millis(15)),
            watch: Latency::new(Duration::from_millis(5), Duration::from_millis(50)),
            writes_per_second: Some(1800.0),
            job_controller_writes: false,
            seed: 0x5eed_a915,
        }
    }
}

impl Default for CostModel {
    fn default() -> Self {
        CostModel::free()
    }
}

/// The splitmix64 generator: tiny, seeded, good enough for latencies and names.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.unit(), self.unit());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// The mutable part of the cost model: the sampler and the leaky bucket.
#[derive(Debug)]
pub(crate) struct CostState {
    rng: SplitMix64,
    next_write: Option<Instant>,
}

impl CostState {
    pub(crate) fn new(seed: u64) -> Self {
        CostState {
            rng: SplitMix64::new(seed),
            next_write: None,
        }
    }

    /// A watch delivery lag.
    pub(crate) fn watch_lag(&mut self, model: &CostModel) -> Duration {
        model.watch.sample(&mut self.rng)
    }

    /// Reserves this request's slot: when it may start (writes wait for their turn in the bucket)
    /// and how long it then takes.
    pub(crate) fn reserve(
        &mut self,
        model: &CostModel,
        write: bool,
    ) -> (Option<Instant>, Duration) {
        let latency = if write { model.write } else { model.read }.sample(&mut self.rng);
        let slot = match model.writes_per_second {
            Some(rate) if write && rate > 0.0 => {
                let now = Instant::now();
                let slot = self.next_write.map_or(now, |next| next.max(now));
                self.next_write = Some(slot + Duration::from_secs_f64(1.0 / rate));
                Some(slot)
            }
            _ => None,
        };
        (slot, latency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lognormal_fit_matches_percentiles() {
        let latency = Latency::new(Duration::from_millis(8), Duration::from_millis(60));
        let mut rng = SplitMix64::new(7);
        let mut samples: Vec<Duration> = (0..100_000).map(|_| latency.sample(&mut rng)).collect();
        samples.sort();
        let p50 = samples[50_000].as_secs_f64() * 1000.0;
        let p99 = samples[99_000].as_secs_f64() * 1000.0;
        assert!((p50 - 8.0).abs() < 0.3, "p50 {p50}");
        assert!((p99 - 60.0).abs() < 4.0, "p99 {p99}");
        let mean: f64 = samples.iter().map(Duration::as_secs_f64).sum::<f64>() / 100_000.0;
        assert!(
            (mean - latency.mean().as_secs_f64()).abs() < 0.0005,
            "mean {mean}"
        );
    }

    #[test]
    fn zero_latency_samples_zero() {
        assert_eq!(
            Latency::ZERO.sample(&mut SplitMix64::new(1)),
            Duration::ZERO
        );
    }
}
