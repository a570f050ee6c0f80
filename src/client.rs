//! The Kubernetes client of both binaries, with kronjob's retry policy.
//!
//! The configuration is the kubeconfig (or the in-cluster service account), and the retry
//! policy is kronjob's instead of kube's default one.
//!
//! - [`observe`]: throttling made visible (429s, retry waits, request durations) and the
//!   `Date` of every answer measured for the manager's clock;
//! - [`fence`]: the leader's writes fenced off by its renew deadline.
//!
//! kube retries 429, 503 and 504 up to 15 times with a delay growing to 1,000 s, which can hold
//! a request for minutes, well past a CronJob's slot. Ours ([`Retry`]) retries those at most 4
//! times (100 ms doubling to 2 s, with jitter: [`crate::backoff::CLIENT`]), and honours the
//! server's `Retry-After` (API Priority and Fairness) up to [`RETRY_AFTER_LIMIT`]: the caller
//! sees the error within seconds and its own backoff takes over.

use std::path::PathBuf;
use std::time::Duration;

use http::header::{HeaderValue, USER_AGENT};
use http::{Request, Response, StatusCode};
use kube::client::{Body, ClientBuilder, DynBody};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use tower::buffer::BufferLayer;
use tower::retry::{Policy, RetryLayer};
use tower::util::BoxService;
use tower::{BoxError, Service};

pub mod fence;
pub mod observe;

pub use fence::{Fence, Fenced, fenced};
pub use observe::Observer;

/// Why no client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No Kubernetes configuration could be found.
    #[error(
        "no Kubernetes configuration: set KUBECONFIG or create ~/.kube/config, or run inside a cluster"
    )]
    NoConfig(#[source] kube::config::InferConfigError),
    /// The kubeconfig named by `--kubeconfig` or `--context` could not be loaded.
    #[error("cannot load the kubeconfig")]
    Kubeconfig(#[source] kube::config::KubeconfigError),
    /// The client could not be built from the configuration.
    #[error("cannot build a Kubernetes client")]
    Client(#[source] kube::Error),
}

/// Requests queued for the HTTP client at most (in flight requests do not count).
const BUFFER: usize = 1024;
/// Most retries of one request answered 429, 503 or 504.
pub const MAX_RETRIES: u32 = crate::backoff::CLIENT_RETRIES;
/// Longest `Retry-After` honoured: a longer one is cut to this (the caller's own backoff is
/// the better judge of a long wait).
pub const RETRY_AFTER_LIMIT: Duration = Duration::from_secs(30);

/// The retry policy of every client: a request answered 429, 503 or 504 is tried again after
/// [`crate::backoff::CLIENT`]'s delay, or the server's `Retry-After` when that is longer, at
/// most [`MAX_RETRIES`] times; nothing else is retried. With an [`Observer`], the waits are
/// counted.
#[derive(Debug, Clone, Default)]
pub struct Retry {
    attempts: u32,
    observer: Option<Observer>,
}

impl Retry {
    fn delay<B>(&self, response: &Response<B>) -> Option<Duration> {
        let status = response.status();
        let retried = status == StatusCode::TOO_MANY_REQUESTS
            || status == StatusCode::SERVICE_UNAVAILABLE
            || status == StatusCode::GATEWAY_TIMEOUT;
        if !retried || self.attempts >= MAX_RETRIES {
            return None;
        }
        let server = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(Duration::ZERO, |s| {
                Duration::from_secs(s).min(RETRY_AFTER_LIMIT)
            });
        Some(crate::backoff::CLIENT.delay(self.attempts + 1).max(server))
    }
}

impl<B> Policy<Request<Body>, Response<B>, BoxError> for Retry {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        _request: &mut Request<Body>,
        result: &mut Result<Response<B>, BoxError>,
    ) -> Option<Self::Future> {
        let delay = self.delay(result.as_ref().ok()?)?;
        self.attempts += 1;
        if let Some(observer) = &self.observer {
            observer.waited(delay);
        }
        Some(tokio::time::sleep(delay))
    }

    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        // Only a body held in full can be sent again (every body kube sends is).
        let body = request.body().try_clone()?;
        let mut copy = Request::new(body);
        *copy.method_mut() = request.method().clone();
        *copy.uri_mut() = request.uri().clone();
        *copy.version_mut() = request.version();
        *copy.headers_mut() = request.headers().clone();
        *copy.extensions_mut() = request.extensions().clone();
        Some(copy)
    }
}

/// The retry layer every client uses.
pub fn retry_layer() -> RetryLayer<Retry> {
    RetryLayer::new(Retry::default())
}

/// The same, counting its waits in `observer`.
fn observed_retry_layer(observer: Option<&Observer>) -> RetryLayer<Retry> {
    RetryLayer::new(Retry {
        attempts: 0,
        observer: observer.cloned(),
    })
}

/// Whether the API server refused a create because its namespace is being deleted (a 403
/// with the cause `NamespaceTerminating`): nothing can be created there again, so retrying
/// only costs the API server.
pub fn namespace_terminating(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.details.as_ref().is_some_and(|d| d.causes.iter().any(|c| c.reason == "NamespaceTerminating")))
}

/// Where a client's configuration comes from, as kubectl's `--kubeconfig` and `--context`
/// choose it. The default is the manager's: KUBECONFIG (or ~/.kube/config) with its current
/// context, else the in-cluster service account.
#[derive(Debug, Clone, Default)]
pub struct ClientOptions {
    /// Read this kubeconfig file instead of KUBECONFIG or ~/.kube/config.
    pub kubeconfig: Option<PathBuf>,
    /// Use this context of the kubeconfig instead of its current one.
    pub context: Option<String>,
    /// The `User-Agent` of every request ([`user_agent`]); none by default.
    pub user_agent: Option<String>,
    /// Where the client's metrics and the `Date` of its answers go (the manager's); none by
    /// default.
    pub observer: Option<Observer>,
}

/// `kronjob/VERSION (part)`: which part of kronjob sent a request, as the API server's audit
/// log records it (`userAgent`).
pub fn user_agent(part: &str) -> String {
    format!("kronjob/{} ({part})", env!("CARGO_PKG_VERSION"))
}

/// A client for the cluster in KUBECONFIG (or ~/.kube/config), or the in-cluster one.
pub async fn client() -> Result<Client, ClientError> {
    client_with(&ClientOptions::default()).await
}

/// A client configured as `options` say, with kronjob's retry policy.
pub async fn client_with(options: &ClientOptions) -> Result<Client, ClientError> {
    Ok(observed(builder(options).await?, options.observer.as_ref()))
}

/// kube's HTTP client, boxed.
type BaseService = BoxService<Request<Body>, Response<Box<DynBody>>, BoxError>;

async fn builder(options: &ClientOptions) -> Result<ClientBuilder<BaseService>, ClientError> {
    let mut config = config(options).await?;
    let agent = options.user_agent.as_deref().map(HeaderValue::from_str);
    if let Some(Ok(agent)) = agent {
        config.headers.push((USER_AGENT, agent));
    }
    if config.accept_invalid_certs {
        tracing::warn!(
            server = %config.cluster_url,
            "the kubeconfig skips TLS verification (insecure-skip-tls-verify): the API server's identity is not checked"
        );
    }
    config.default_retry = false;
    ClientBuilder::try_from(config).map_err(ClientError::Client)
}

/// The client of `builder` with kronjob's retry policy in front of it.
pub fn with_retries<Svc, B>(builder: ClientBuilder<Svc>) -> Client
where
    Svc: Service<Request<kube::client::Body>, Response = Response<B>> + Send + 'static,
    Svc::Future: Send + 'static,
    Svc::Error: Into<BoxError> + Send + Sync,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    observed(builder, None)
}

/// [`with_retries`], with every try and request seen by `observer`.
pub fn observed<Svc, B>(builder: ClientBuilder<Svc>, observer: Option<&Observer>) -> Client
where
    Svc: Service<Request<kube::client::Body>, Response = Response<B>> + Send + 'static,
    Svc::Future: Send + 'static,
    Svc::Error: Into<BoxError> + Send + Sync,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    // Retrying needs a service it can clone; kube's is boxed, so it goes behind a buffer.
    let buffered = builder.with_layer(&BufferLayer::new(BUFFER));
    let Some(observer) = observer else {
        return buffered.with_layer(&retry_layer()).build();
    };
    let tries = buffered.with_layer(&tower::layer::layer_fn(|inner| observe::Tries {
        inner,
        observer: observer.clone(),
    }));
    let retried = tries.with_layer(&observed_retry_layer(Some(observer)));
    retried
        .with_layer(&tower::layer::layer_fn(|inner| observe::Requests {
            inner,
            observer: observer.clone(),
        }))
        .build()
}

async fn config(options: &ClientOptions) -> Result<Config, ClientError> {
    let kube_options = KubeConfigOptions {
        context: options.context.clone(),
        ..KubeConfigOptions::default()
    };
    let mut config = match &options.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(ClientError::Kubeconfig)?;
            Config::from_custom_kubeconfig(kubeconfig, &kube_options)
                .await
                .map_err(ClientError::Kubeconfig)?
        }
        None if options.context.is_some() => Config::from_kubeconfig(&kube_options)
            .await
            .map_err(ClientError::Kubeconfig)?,
        None => return Config::infer().await.map_err(ClientError::NoConfig),
    };
    config.apply_debug_overrides();
    Ok(config)
}
