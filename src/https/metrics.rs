//! The connection metrics of the HTTPS servers: connections open, and closed by reason.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Why a connection closed, the `reason` label.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // The variant names are the label values.
pub enum Closed {
    /// The client closed it, or the server after its last answer.
    done,
    /// No TLS handshake within the limit.
    handshake_timeout,
    /// The TLS handshake failed.
    handshake_error,
    /// No request headers within the limit (a slow client, or an idle keep-alive connection).
    header_timeout,
    /// A protocol or I/O error.
    error,
    /// Still open when the drain time after shutdown ran out.
    shutdown,
    /// Closed, idle, to make room for a new connection at the cap.
    evicted,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabel {
    server: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClosedLabels {
    server: &'static str,
    reason: Closed,
}

/// Connection metrics of every HTTPS server, registered once; [`HttpsMetrics::server`] gives
/// one server's share. Cheap to clone.
#[derive(Clone, Debug)]
pub struct HttpsMetrics {
    open: Family<ServerLabel, Gauge>,
    closed: Family<ClosedLabels, Counter>,
}

impl HttpsMetrics {
    /// Register `kronjob_https_connections{server}` and
    /// `kronjob_https_connections_closed_total{server,reason}`.
    pub fn new(registry: &mut Registry) -> Self {
        let metrics = HttpsMetrics {
            open: Family::default(),
            closed: Family::default(),
        };
        registry.register(
            "kronjob_https_connections",
            "Connections open on an HTTPS server (webhook, metrics)",
            metrics.open.clone(),
        );
        registry.register(
            "kronjob_https_connections_closed",
            "Connections closed by an HTTPS server or its clients, by reason",
            metrics.closed.clone(),
        );
        metrics
    }

    /// The metrics of the server called `server` (the `server` label), at zero.
    pub fn server(&self, server: &'static str) -> ServerMetrics {
        drop(self.open.get_or_create(&ServerLabel { server }));
        for reason in [
            Closed::done,
            Closed::handshake_timeout,
            Closed::header_timeout,
            Closed::evicted,
        ] {
            drop(self.closed.get_or_create(&ClosedLabels { server, reason }));
        }
        ServerMetrics {
            server,
            metrics: self.clone(),
        }
    }
}

/// One server's connection metrics.
#[derive(Clone, Debug)]
pub struct ServerMetrics {
    server: &'static str,
    metrics: HttpsMetrics,
}

impl ServerMetrics {
    /// Metrics registered nowhere (tests, tools).
    pub fn unregistered(server: &'static str) -> Self {
        HttpsMetrics::new(&mut Registry::default()).server(server)
    }

    pub(super) fn opened(&self) -> OpenGuard {
        self.metrics
            .open
            .get_or_create(&ServerLabel {
                server: self.server,
            })
            .inc();
        OpenGuard(self.clone())
    }

    pub(super) fn closed(&self, reason: Closed) {
        self.metrics
            .closed
            .get_or_create(&ClosedLabels {
                server: self.server,
                reason,
            })
            .inc();
    }

    /// Connections closed so far for `reason`.
    pub fn closed_count(&self, reason: Closed) -> u64 {
        self.metrics
            .closed
            .get_or_create(&ClosedLabels {
                server: self.server,
                reason,
            })
            .get()
    }

    /// Connections open now.
    pub fn open_count(&self) -> i64 {
        self.metrics
            .open
            .get_or_create(&ServerLabel {
                server: self.server,
            })
            .get()
    }
}

/// Decrements the open-connections gauge when the connection ends, however it ends.
pub(super) struct OpenGuard(ServerMetrics);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        let m = &self.0;
        m.metrics
            .open
            .get_or_create(&ServerLabel { server: m.server })
            .dec();
    }
}
