//! TLS for the webhook server: a rustls configuration (ring provider) from PEM. Pure: where
//! the PEM comes from is [`super::certs`]'s business.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why a certificate and key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
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

/// A rustls server configuration (ring provider, TLS 1.2 and 1.3) serving the chain in
/// `cert_pem` with the key in `key_pem`. The ALPN protocols are the server's choice
/// ([`crate::https`]): `http/1.1` only unless HTTP/2 is enabled.
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
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
