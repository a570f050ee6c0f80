//! Test PKI (an rcgen CA) and a verifying TLS client (tokio-rustls + hyper), ring only.

// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// A CA that signs serving certificates.
pub struct Pki {
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    pub fn new() -> Self {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, "test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).expect("CA cert");
        Pki {
            ca_pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    /// Issue a serving certificate for `name` and write `tls.crt`/`tls.key` to `dir`; returns
    /// the certificate's DER.
    pub fn write_leaf(&self, dir: &Path, name: &str) -> Vec<u8> {
        let key = KeyPair::generate().expect("leaf key");
        let params = CertificateParams::new(vec![name.to_string()]).expect("params");
        let cert = params.signed_by(&key, &self.issuer).expect("leaf");
        // Write the key first, then the certificate: the reloader must cope with a
        // half-written pair (it keeps the old one until both match).
        std::fs::write(dir.join("tls.key"), key.serialize_pem()).expect("write key");
        std::fs::write(dir.join("tls.crt"), cert.pem()).expect("write cert");
        cert.der().to_vec()
    }
}

pub fn temp_dir(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    let dir = std::env::temp_dir().join(format!(
        "kronjob-webhook-{tag}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A TLS client that trusts only the given CA.
pub struct Client {
    connector: TlsConnector,
}

impl Client {
    pub fn new(ca_pem: &str) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.expect("CA PEM")).expect("root");
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocols")
        .with_root_certificates(roots)
        .with_no_client_auth();
        Client {
            connector: TlsConnector::from(Arc::new(config)),
        }
    }

    /// The connector (for clients that manage their own connections).
    pub fn connector(&self) -> TlsConnector {
        self.connector.clone()
    }

    pub async fn try_connect(
        &self,
        addr: SocketAddr,
        name: &str,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(addr).await?;
        let server_name = ServerName::try_from(name.to_string()).expect("server name");
        self.connector.connect(server_name, tcp).await
    }

    /// The leaf certificate the server presents on a new connection.
    pub async fn peer_leaf(&self, addr: SocketAddr) -> Vec<u8> {
        let tls = self
            .try_connect(addr, "localhost")
            .await
            .expect("TLS handshake");
        tls.get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
            .expect("peer certificate")
            .to_vec()
    }

    /// POST `body` as JSON over a new verified connection; (status, body).
    pub async fn post(
        &self,
        addr: SocketAddr,
        name: &str,
        path: &str,
        body: String,
    ) -> (u16, Vec<u8>) {
        let tls = self.try_connect(addr, name).await.expect("TLS handshake");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .expect("HTTP handshake");
        tokio::spawn(conn);
        let request = hyper::Request::post(path)
            .header("host", name)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
            .expect("request");
        let response = sender.send_request(request).await.expect("response");
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (status, body.to_vec())
    }
}

impl Client {
    /// GET `path` over a new verified connection, with `token` as bearer when given; (status,
    /// body).
    pub async fn get(
        &self,
        addr: SocketAddr,
        name: &str,
        path: &str,
        token: Option<&str>,
    ) -> (u16, Vec<u8>) {
        let tls = self.try_connect(addr, name).await.expect("TLS handshake");
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .expect("HTTP handshake");
        tokio::spawn(conn);
        let mut request = hyper::Request::get(path).header("host", name);
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let request = request.body(Full::new(Bytes::new())).expect("request");
        let response = sender.send_request(request).await.expect("response");
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (status, body.to_vec())
    }
}

/// The real webhook server on an ephemeral loopback port, serving the pair in `dir` (re-read
/// every `reload`): its address, the token that stops it, and its task.
pub async fn serve_dir(
    dir: &Path,
    reload: std::time::Duration,
) -> (
    SocketAddr,
    tokio_util::sync::CancellationToken,
    tokio::task::JoinHandle<Result<(), kronjob::webhook::WebhookError>>,
) {
    serve_dir_with(dir, reload, kronjob::webhook::Env::local()).await
}

/// [`serve_dir`] with `env` (an API server to ask, the kinds allowed).
pub async fn serve_dir_with(
    dir: &Path,
    reload: std::time::Duration,
    env: kronjob::webhook::Env,
) -> (
    SocketAddr,
    tokio_util::sync::CancellationToken,
    tokio::task::JoinHandle<Result<(), kronjob::webhook::WebhookError>>,
) {
    let args = kronjob::webhook::WebhookArgs {
        webhook_addr: "127.0.0.1:0".parse().expect("addr"),
        webhook_cert_dir: dir.to_path_buf(),
        webhook_cert_reload_interval: reload,
        webhook_self_signed: false,
        webhook_service_name: "kronjob-webhook".into(),
        webhook_namespace: "kronjob-system".into(),
        webhook_mutating_configuration: "kronjob-mutating".into(),
        webhook_validating_configuration: "kronjob-validating".into(),
        webhook_max_connections: kronjob::https::MAX_CONNECTIONS,
        webhook_dry_runs_per_minute: kronjob::webhook::dry_run::DRY_RUNS_PER_MINUTE,
        enable_http2: false,
    };
    let metrics = kronjob::webhook::WebhookMetrics::new(&mut Default::default());
    let stop = tokio_util::sync::CancellationToken::new();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(kronjob::webhook::serve(
        args,
        env,
        metrics,
        move |addr| {
            let _ = tx.send(addr);
        },
        stop.clone(),
    ));
    let addr = tokio::time::timeout(std::time::Duration::from_secs(10), rx)
        .await
        .expect("webhook ready within 10 s")
        .expect("webhook announced its address");
    (addr, stop, server)
}
