//! The Kubernetes client of every command: the kubeconfig (or the in-cluster service
//! account), with kronjob's retry policy instead of kube's default one.
//!
//! kube retries 429, 503 and 504 up to 15 times with a delay growing to 1,000 s, which can hold
//! a request for minutes, well past a CronJob's slot. Ours retries those at most 4 times (100 ms
//! doubling to 2 s, with jitter), and honours the server's `Retry-After` (API Priority and
//! Fairness): the caller sees the error within seconds and its own backoff takes over.

use std::time::Duration;

use kube::client::ClientBuilder;
use kube::client::retry::RetryPolicy;
use kube::{Client, Config};
use tower::buffer::BufferLayer;
use tower::retry::RetryLayer;

use super::ManagerError;

/// Requests queued for the HTTP client at most (in flight requests do not count).
const BUFFER: usize = 1024;
/// Most retries of one request answered 429, 503 or 504.
pub const MAX_RETRIES: u32 = 4;

/// The retry layer every client of the manager uses.
pub fn retry_layer() -> RetryLayer<RetryPolicy> {
    match RetryPolicy::new(
        Duration::from_millis(100),
        Duration::from_secs(2),
        MAX_RETRIES,
        true,
    ) {
        Ok(policy) => RetryLayer::new(policy),
        // The constants above are valid (min below max, both non-zero): unreachable.
        Err(_) => RetryLayer::new(RetryPolicy::default()),
    }
}

/// A client for the cluster in KUBECONFIG (or ~/.kube/config), or the in-cluster one.
pub async fn client() -> Result<Client, ManagerError> {
    let mut config = Config::infer().await.map_err(ManagerError::NoConfig)?;
    if config.accept_invalid_certs {
        tracing::warn!(
            server = %config.cluster_url,
            "the kubeconfig skips TLS verification (insecure-skip-tls-verify): the API server's identity is not checked"
        );
    }
    config.default_retry = false;
    let builder = ClientBuilder::try_from(config).map_err(ManagerError::Client)?;
    // Retrying needs a service it can clone; kube's is boxed, so it goes behind a buffer.
    let buffered = builder.with_layer(&BufferLayer::new(BUFFER));
    Ok(buffered.with_layer(&retry_layer()).build())
}
