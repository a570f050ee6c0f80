//! TLS for the webhook server: rustls with the ring provider, certificates from PEM, and
//! reloading a certificate directory without dropping the listener.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// File name of the serving certificate chain in the certificate directory.
pub const CERT_FILE: &str = "tls.crt";
/// File name of the private key in the certificate directory.
pub const KEY_FILE: &str = "tls.key";
/// How often the certificate directory is re-read.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// Why a certificate and key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The certificate PEM holds no certificate or does not parse.
    #[error("invalid certificate PEM")]
    Certificate(#[source] rustls_pki_types::pem::Error),
    /// The certificate PEM holds no certificate.
    #[error("the certificate PEM holds no certificate")]
    NoCertificate,
    /// The key PEM holds no key or does not parse.
    #[error("invalid private key PEM")]
    Key(#[source] rustls_pki_types::pem::Error),
    /// rustls refused the pair (for example, the key does not match the certificate).
    #[error("rustls refused the certificate and key")]
    Rustls(#[source] rustls::Error),
}

/// A rustls server configuration (ring provider, TLS 1.2 and 1.3, ALPN h2 and http/1.1)
/// serving the chain in `cert_pem` with the key in `key_pem`.
pub fn server_config(cert_pem: &[u8], key_pem: &[u8]) -> Result<Arc<ServerConfig>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(TlsError::Certificate)?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(TlsError::Key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Rustls)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(TlsError::Rustls)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The PEM contents of `tls.crt` and `tls.key` in `dir`.
pub async fn read_pair(dir: &Path) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
    let read = |name: &'static str| {
        let path = dir.join(name);
        async move {
            tokio::fs::read(&path)
                .await
                .map_err(|source| TlsError::Read { path, source })
        }
    };
    Ok((read(CERT_FILE).await?, read(KEY_FILE).await?))
}

/// Load the pair in `dir` as an axum-server configuration.
pub async fn load_dir(dir: &Path) -> Result<(RustlsConfig, (Vec<u8>, Vec<u8>)), TlsError> {
    let pair = read_pair(dir).await?;
    let config = server_config(&pair.0, &pair.1)?;
    Ok((RustlsConfig::from_config(config), pair))
}

/// Re-read `dir` every `every` and swap the served certificate when the files changed. The
/// listener keeps running; connections already open keep their certificate. A pair that does
/// not load is logged and the previous one stays in use. `current` is the pair served now.
/// Runs until dropped (spawn it and abort it when the server stops).
pub async fn watch_dir(
    dir: PathBuf,
    config: RustlsConfig,
    mut current: (Vec<u8>, Vec<u8>),
    every: Duration,
) {
    // The last pair that failed, so a bad pair is reported once rather than every tick.
    let mut rejected: Option<(Vec<u8>, Vec<u8>)> = None;
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let pair = match read_pair(&dir).await {
            Ok(pair) => pair,
            Err(e) => {
                tracing::warn!(error = %e, dir = %dir.display(), "cannot read the webhook certificate; keeping the current one");
                continue;
            }
        };
        if pair == current || rejected.as_ref() == Some(&pair) {
            continue;
        }
        match server_config(&pair.0, &pair.1) {
            Ok(new) => {
                config.reload_from_config(new);
                tracing::info!(dir = %dir.display(), "webhook certificate reloaded");
                current = pair;
                rejected = None;
            }
            Err(e) => {
                tracing::error!(error = %e, source = ?std::error::Error::source(&e), dir = %dir.display(), "new webhook certificate is unusable; keeping the current one");
                rejected = Some(pair);
            }
        }
    }
}
