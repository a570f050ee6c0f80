//! Certificates from a directory (`tls.crt`, `tls.key`; a Secret mounted by cert-manager or by
//! hand), re-read periodically so a renewed pair is served without a restart.

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;

use super::CertError;
use crate::webhook::tls::server_config;

/// File name of the serving certificate chain in the certificate directory.
pub const CERT_FILE: &str = "tls.crt";
/// File name of the private key in the certificate directory.
pub const KEY_FILE: &str = "tls.key";

type Pair = (Vec<u8>, Vec<u8>);

/// The PEM contents of `tls.crt` and `tls.key` in `dir`.
pub async fn read_pair(dir: &Path) -> Result<Pair, CertError> {
    let read = |name: &'static str| {
        let path = dir.join(name);
        async move {
            tokio::fs::read(&path)
                .await
                .map_err(|source| CertError::Read { path, source })
        }
    };
    Ok((read(CERT_FILE).await?, read(KEY_FILE).await?))
}

/// Load the pair in `dir`: the configuration to serve, and the pair it came from.
pub async fn load(dir: &Path) -> Result<(RustlsConfig, Pair), CertError> {
    let pair = read_pair(dir).await?;
    let config = server_config(&pair.0, &pair.1)?;
    Ok((RustlsConfig::from_config(config), pair))
}

/// Re-read `dir` every `every` and swap the served certificate when the files changed. The
/// listener keeps running; connections already open keep their certificate. A pair that does
/// not load is logged once and the previous one stays in use. `current` is the pair served now.
/// Runs until dropped.
pub async fn keep_fresh(dir: PathBuf, config: RustlsConfig, mut current: Pair, every: Duration) {
    let mut rejected: Option<Pair> = None;
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
