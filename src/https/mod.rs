//! The HTTPS server loop of the admission webhook and of the secure `/metrics` endpoint,
//! hardened against hostile clients:
//!
//! - at most [`Limits::max_connections`] connections are open. At the cap, a new connection
//!   takes the place of the one idle longest (idle for [`MIN_IDLE`] at least; those that never
//!   sent a request go first; one answering a request never goes), so connections that say
//!   nothing cannot lock the API server out ([`connections`]); with none idle, further connections
//!   wait in the kernel's backlog until one closes;
//! - a TLS handshake not finished within [`Limits::handshake_timeout`] closes the connection;
//! - a request's headers must arrive within [`Limits::header_read_timeout`], counted from the
//!   connection's start or the end of its previous response: the same timer closes idle
//!   keep-alive connections; a request head is at most [`MAX_HEAD_BYTES`];
//! - HTTP/1.1 only (ALPN offers `http/1.1`) unless [`Limits::http2`]: HTTP/2's rapid-reset
//!   attack (CVE-2023-44487) cannot reach a server that does not speak it;
//! - on shutdown, the listener closes, idle connections close, and those answering a request
//!   close once it is answered, within the drain time; then the rest are dropped. Connections
//!   are tasks of the server's own, so they never outlive it (a server task that is aborted
//!   takes its connections with it).
//!
//! Every connection is counted when it opens and when it closes, by why it closed. An idle TLS
//! connection costs about 23 KiB (measured), one holding a full request head under 60 KiB, so
//! the cap bounds what connections cost at about 60 MiB.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum_server::tls_rustls::RustlsConfig;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use rustls::ServerConfig;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;

pub use connections::MIN_IDLE;
pub use metrics::{Closed, HttpsMetrics, ServerMetrics};

use connections::{Room, Tenant};

pub mod connections;
mod metrics;

/// Default for [`Limits::max_connections`].
pub const MAX_CONNECTIONS: usize = 1024;
/// Default for [`Limits::handshake_timeout`].
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Default for [`Limits::header_read_timeout`].
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head (request line and headers) read, in bytes.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Most concurrent HTTP/2 streams of one connection (when HTTP/2 is on).
pub const MAX_STREAMS: u32 = 64;
/// Most streams a client may reset before they are answered, per HTTP/2 connection.
pub const MAX_PENDING_RESETS: usize = 20;

/// What a server allows its clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once; further ones wait in the listen backlog.
    pub max_connections: usize,
    /// Longest TLS handshake.
    pub handshake_timeout: Duration,
    /// Longest wait for a request's headers, idle keep-alive time included.
    pub header_read_timeout: Duration,
    /// Offer HTTP/2 (ALPN `h2`) besides HTTP/1.1.
    pub http2: bool,
}

impl Limits {
    /// The defaults, with or without HTTP/2.
    pub const fn standard(http2: bool) -> Self {
        Limits {
            max_connections: MAX_CONNECTIONS,
            handshake_timeout: HANDSHAKE_TIMEOUT,
            header_read_timeout: HEADER_READ_TIMEOUT,
            http2,
        }
    }
}

/// The served TLS configuration with this server's ALPN protocols. The certificate reloads in
/// place (a new [`ServerConfig`] in `tls`); the copy with the protocols is made once per reload.
struct Alpn {
    tls: RustlsConfig,
    protocols: Vec<Vec<u8>>,
    derived: Mutex<Option<(Arc<ServerConfig>, Arc<ServerConfig>)>>,
}

impl Alpn {
    fn new(tls: RustlsConfig, http2: bool) -> Self {
        let mut protocols = Vec::new();
        if http2 {
            protocols.push(b"h2".to_vec());
        }
        protocols.push(b"http/1.1".to_vec());
        Alpn {
            tls,
            protocols,
            derived: Mutex::new(None),
        }
    }

    fn acceptor(&self) -> TlsAcceptor {
        let inner = self.tls.get_inner();
        let mut derived = self.derived.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((source, config)) = derived.as_ref()
            && Arc::ptr_eq(source, &inner)
        {
            return TlsAcceptor::from(Arc::clone(config));
        }
        let mut config = (*inner).clone();
        config.alpn_protocols = self.protocols.clone();
        let config = Arc::new(config);
        *derived = Some((inner, Arc::clone(&config)));
        TlsAcceptor::from(config)
    }
}

/// The HTTP side of a connection: HTTP/1.1 with the header-read timeout, and HTTP/2 (when
/// allowed) with bounded streams and resets.
fn http_builder(limits: &Limits) -> Builder<TokioExecutor> {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(MAX_HEAD_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS)
        .max_pending_accept_reset_streams(MAX_PENDING_RESETS)
        .max_header_list_size(MAX_HEAD_BYTES as u32)
        .keep_alive_interval(limits.header_read_timeout)
        .keep_alive_timeout(limits.header_read_timeout);
    if limits.http2 {
        builder
    } else {
        builder.http1_only()
    }
}

/// One server: what it serves and how.
pub struct Server {
    /// The routes.
    pub app: Router,
    /// The certificate (reloaded in place).
    pub tls: RustlsConfig,
    /// What clients are allowed.
    pub limits: Limits,
    /// Its connection metrics.
    pub metrics: ServerMetrics,
    /// How long open connections may finish after `shutdown`.
    pub drain: Duration,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Serve `server` on `listener` until `shutdown`; `ready` gets the bound address once
/// connections are accepted. Then the listener closes, open connections finish their requests
/// within the drain time and close, and the rest are dropped.
pub async fn serve(
    listener: std::net::TcpListener,
    server: Server,
    ready: impl FnOnce(SocketAddr),
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    ready(listener.local_addr()?);
    let slots = Arc::new(Semaphore::new(server.limits.max_connections.max(1)));
    let room = Room::default();
    let alpn = Alpn::new(server.tls.clone(), server.limits.http2);
    let builder = Arc::new(http_builder(&server.limits));
    let (draining, dropped) = (CancellationToken::new(), CancellationToken::new());
    // The connections belong to the server: dropped with it, however it ends.
    let mut connections = JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => break,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors and the like: wait instead of spinning.
                tracing::debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let slot = tokio::select! {
            slot = place(&slots, &room) => slot,
            () = shutdown.cancelled() => break,
        };
        let connection = Connection {
            acceptor: alpn.acceptor(),
            builder: Arc::clone(&builder),
            app: server.app.clone(),
            tenant: room.enter(),
            draining: draining.clone(),
            dropped: dropped.clone(),
            handshake_timeout: server.limits.handshake_timeout,
            metrics: server.metrics.clone(),
            _slot: slot,
        };
        connections.spawn(connection.run(tcp));
    }
    drop(listener);
    draining.cancel();
    let drained = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(server.drain, drained).await.is_err() {
        dropped.cancel();
        while connections.join_next().await.is_some() {}
    }
    Ok(())
}

/// A place under the cap for the connection just accepted: a free one, or the place of an
/// idle connection closed for it ([`connections`]); until then, nothing more is accepted.
async fn place(slots: &Arc<Semaphore>, room: &Room) -> OwnedSemaphorePermit {
    loop {
        if let Ok(slot) = Arc::clone(slots).try_acquire_owned() {
            return slot;
        }
        let now = std::time::Instant::now();
        let pause = match room.make_room(now) {
            // The closed connection gives its place back as soon as it has closed.
            connections::Choice::Close(_) => Duration::from_secs(1),
            connections::Choice::Wait(at) => at.saturating_duration_since(now),
            // Every connection is answering a request: the first to end frees its place.
            connections::Choice::None => Duration::from_secs(1),
        };
        let waited = tokio::select! {
            slot = Arc::clone(slots).acquire_owned() => slot.ok(),
            () = tokio::time::sleep(pause) => None,
        };
        if let Some(slot) = waited {
            return slot;
        }
    }
}

/// One accepted connection and what it needs.
struct Connection {
    acceptor: TlsAcceptor,
    builder: Arc<Builder<TokioExecutor>>,
    app: Router,
    /// Its place among the open connections (and whether it is to close for a newcomer).
    tenant: Tenant,
    /// The server stops: finish the request in flight, then close.
    draining: CancellationToken,
    /// The drain time is over: close now.
    dropped: CancellationToken,
    handshake_timeout: Duration,
    metrics: ServerMetrics,
    /// Its place under the connection cap, given back when the connection ends.
    _slot: OwnedSemaphorePermit,
}

impl Connection {
    async fn run(self, tcp: tokio::net::TcpStream) {
        let metrics = self.metrics.clone();
        let dropped = self.dropped.clone();
        let _open = metrics.opened();
        let reason = tokio::select! {
            reason = self.exchange(tcp) => reason,
            () = dropped.cancelled() => Closed::shutdown,
        };
        metrics.closed(reason);
    }

    async fn exchange(self, tcp: tokio::net::TcpStream) -> Closed {
        let (_slot, tenant) = (self._slot, self.tenant);
        let closing = async {
            tokio::select! {
                () = tenant.closed().cancelled() => Closed::evicted,
                () = self.draining.cancelled() => Closed::shutdown,
            }
        };
        let handshake = tokio::time::timeout(self.handshake_timeout, self.acceptor.accept(tcp));
        let tls = tokio::select! {
            tls = handshake => match tls {
                Err(_) => return Closed::handshake_timeout,
                Ok(Err(_)) => return Closed::handshake_error,
                Ok(Ok(tls)) => tls,
            },
            reason = closing => return reason,
        };
        let requests = tenant.handle();
        let app = self.app;
        let service = tower::service_fn(move |request| {
            let started = requests.request();
            let answer = tower::ServiceExt::oneshot(app.clone(), request);
            async move {
                let answered = answer.await;
                drop(started);
                answered
            }
        });
        let connection = self
            .builder
            .serve_connection(TokioIo::new(tls), TowerToHyperService::new(service))
            .into_owned();
        let mut connection = std::pin::pin!(connection);
        // Asked to close (for a newcomer, or at shutdown): the request in flight, if any, is
        // answered first; an idle connection closes at once.
        let closed = tokio::select! {
            result = connection.as_mut() => return outcome(result),
            () = tenant.closed().cancelled() => Closed::evicted,
            () = self.draining.cancelled() => Closed::done,
        };
        connection.as_mut().graceful_shutdown();
        match connection.await {
            Ok(()) => closed,
            Err(e) => reason_of(e.as_ref()),
        }
    }
}

/// Why a connection that served HTTP ended with `result`.
fn outcome(result: Result<(), Box<dyn std::error::Error + Send + Sync>>) -> Closed {
    match result {
        Ok(()) => Closed::done,
        Err(e) => reason_of(e.as_ref()),
    }
}

/// Why a connection that served HTTP ended with `error`.
fn reason_of(error: &(dyn std::error::Error + 'static)) -> Closed {
    match error.downcast_ref::<hyper::Error>() {
        Some(e) if e.is_timeout() => Closed::header_timeout,
        Some(e) if e.is_incomplete_message() || e.is_closed() => Closed::done,
        _ => Closed::error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls_pki_types::pem::PemObject;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server on loopback with a generated certificate for `localhost`; its address, the
    /// CA to trust, its metrics and the token that stops it.
    async fn start(limits: Limits) -> (SocketAddr, String, ServerMetrics, CancellationToken) {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let names = ["localhost".to_string()];
        let bundle =
            crate::webhook::certs::self_signed::issue_bundle(&names, jiff::Timestamp::now())
                .expect("certificate");
        let config = crate::webhook::tls::server_config(
            bundle.cert_pem.as_bytes(),
            bundle.key_pem.as_bytes(),
        )
        .expect("tls");
        let listener = crate::listen::bind("127.0.0.1:0".parse().expect("addr")).expect("bind");
        let addr = listener.local_addr().expect("addr");
        let metrics = ServerMetrics::unregistered("test");
        let server = Server {
            app: Router::new()
                .route("/", axum::routing::get(|| async { "hi" }))
                .route(
                    "/slow",
                    axum::routing::get(|| async {
                        tokio::time::sleep(Duration::from_secs(2)).await;
                        "slow"
                    }),
                ),
            tls: RustlsConfig::from_config(config),
            limits,
            metrics: metrics.clone(),
            drain: Duration::from_secs(1),
        };
        let stop = CancellationToken::new();
        tokio::spawn(serve(listener, server, |_| {}, stop.clone()));
        (addr, bundle.ca_cert_pem, metrics, stop)
    }

    fn connector(ca_pem: &str, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.expect("CA")).expect("root");
        }
        let mut config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }

    async fn tls(
        addr: SocketAddr,
        connector: &tokio_rustls::TlsConnector,
    ) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
        connector.connect(name, tcp).await.expect("handshake")
    }

    fn limits(max_connections: usize, timeout: Duration) -> Limits {
        Limits {
            max_connections,
            handshake_timeout: timeout,
            header_read_timeout: timeout,
            http2: false,
        }
    }

    #[tokio::test]
    async fn http2_is_not_offered_unless_enabled() {
        let (addr, ca, _, stop) = start(limits(8, Duration::from_secs(5))).await;
        let client = connector(&ca, &[b"h2", b"http/1.1"]);
        let stream = tls(addr, &client).await;
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
        stop.cancel();
        let (addr, ca, _, stop) = start(Limits::standard(true)).await;
        let stream = tls(addr, &connector(&ca, &[b"h2", b"http/1.1"])).await;
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        stop.cancel();
    }

    #[tokio::test]
    async fn idle_connections_are_closed_after_the_header_read_timeout() {
        let timeout = Duration::from_millis(300);
        let (addr, ca, metrics, stop) = start(limits(8, timeout)).await;
        let client = connector(&ca, &[b"http/1.1"]);
        // Open, then say nothing: closed by the server.
        let mut idle = tls(addr, &client).await;
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(5), idle.read(&mut buf)).await;
        assert!(
            matches!(read, Ok(Ok(0)) | Ok(Err(_))),
            "closed by the server: {read:?}"
        );
        // A request, then idle: the same timer closes the kept-alive connection.
        let mut kept = tls(addr, &client).await;
        kept.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await
            .expect("write");
        let n = kept.read(&mut buf).await.expect("answer");
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        let mut rest = Vec::new();
        let closed =
            tokio::time::timeout(Duration::from_secs(5), kept.read_to_end(&mut rest)).await;
        assert!(closed.is_ok(), "the idle keep-alive connection was closed");
        // A TCP connection that never starts TLS: closed after the handshake timeout.
        let mut raw = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let read = tokio::time::timeout(Duration::from_secs(5), raw.read(&mut buf)).await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(metrics.closed_count(Closed::header_timeout) >= 2);
        assert_eq!(metrics.closed_count(Closed::handshake_timeout), 1);
        assert_eq!(metrics.open_count(), 0);
        stop.cancel();
    }

    /// Whether the server closed `stream` within `limit` (an EOF or a reset).
    async fn closed_by_server(
        stream: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
        limit: Duration,
    ) -> bool {
        let mut buf = [0u8; 64];
        matches!(
            tokio::time::timeout(limit, stream.read(&mut buf)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }

    #[tokio::test]
    async fn at_the_cap_the_longest_idle_connection_gives_way_and_a_busy_one_never_does() {
        let (addr, ca, metrics, stop) = start(limits(2, Duration::from_secs(30))).await;
        let client = connector(&ca, &[b"http/1.1"]);
        let mut first = tls(addr, &client).await;
        let mut second = tls(addr, &client).await;
        // A third: the first, idle longest, is closed for it once idle for MIN_IDLE.
        let started = std::time::Instant::now();
        let third = tokio::time::timeout(Duration::from_secs(5), tls(addr, &client)).await;
        let mut third = third.expect("the third connection gets a place");
        assert!(started.elapsed() >= MIN_IDLE / 2, "{:?}", started.elapsed());
        assert!(closed_by_server(&mut first, Duration::from_secs(2)).await);
        assert_eq!(metrics.closed_count(Closed::evicted), 1);
        // The second answers a slow request; the third is served and then idle.
        second
            .write_all(b"GET /slow HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await
            .expect("write");
        third
            .write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await
            .expect("write");
        let mut buf = [0u8; 256];
        let n = third.read(&mut buf).await.expect("answer");
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        // A fourth takes the place of the third, never of the second, busy.
        let fourth = tokio::time::timeout(Duration::from_secs(5), tls(addr, &client)).await;
        assert!(fourth.is_ok(), "the fourth connection gets a place");
        assert!(closed_by_server(&mut third, Duration::from_secs(2)).await);
        let n = second.read(&mut buf).await.expect("the slow answer");
        let answer = String::from_utf8_lossy(&buf[..n]);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert_eq!(metrics.closed_count(Closed::evicted), 2);
        assert_eq!(metrics.open_count(), 2);
        stop.cancel();
    }

    #[tokio::test]
    async fn with_every_connection_busy_a_new_one_waits_until_one_closes() {
        let (addr, ca, metrics, stop) = start(limits(1, Duration::from_secs(30))).await;
        let client = connector(&ca, &[b"http/1.1"]);
        let mut first = tls(addr, &client).await;
        first
            .write_all(b"GET /slow HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
            .await
            .expect("write");
        // Busy for 2 s: the second waits, then gets the place once the first closes.
        let waited = tokio::time::timeout(Duration::from_millis(1500), tls(addr, &client)).await;
        assert!(
            waited.is_err(),
            "no place while the only connection is busy"
        );
        let second = tokio::time::timeout(Duration::from_secs(5), tls(addr, &client)).await;
        assert!(second.is_ok(), "a place once the first closed");
        assert_eq!(metrics.closed_count(Closed::evicted), 0);
        stop.cancel();
    }
}
