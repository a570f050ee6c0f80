//! The process's metrics registry and its Prometheus text encoding.
//!
//! Each subsystem registers its
//! own metrics (with the `kronjob_` prefix) into the one registry at start.

use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

/// Content type of the OpenMetrics text exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The shared, read-only registry once every subsystem has registered.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
}

impl Metrics {
    /// Freeze a registry for serving.
    pub fn new(registry: Registry) -> Self {
        Self {
            registry: Arc::new(registry),
        }
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        encode(&mut out, &self.registry)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;

    #[test]
    fn encodes_registered_metrics() {
        let mut registry = Registry::default();
        let counter: Counter = Counter::default();
        registry.register("kronjob_example", "An example", counter.clone());
        counter.inc_by(3);
        let text = Metrics::new(registry).encode().expect("encodes");
        assert!(text.contains("kronjob_example_total 3"), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }
}
