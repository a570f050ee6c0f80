//! The HTTP side: routes, the hardening layers, the handlers (a thin transport over
//! [`super::admission::admit`]) and the TLS server loop.

use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower::ServiceBuilder;
use tower::limit::GlobalConcurrencyLimitLayer;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::timeout::TimeoutLayer;

use tokio_util::sync::CancellationToken;

use super::WebhookError;
use super::admission::{
    Answer, BadRequest, Endpoint, MAX_BODY_BYTES, MUTATE_PATH, VALIDATE_PATH, admit, check_template,
};
use super::certs::Loaded;
use super::metrics::{Outcome, WebhookMetrics};
use crate::job::{TemplateDryRun, Verdict};
use crate::task::{TaskSet, Tasks};
use crate::telemetry::Throttle;

/// Longest time a request may take before it is answered with 503. The API server's own
/// timeout for the webhook is 5 s (`timeoutSeconds`).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(4);
/// Most requests handled at once; further requests wait for a slot.
pub const MAX_CONCURRENT_REQUESTS: usize = 256;
/// Path of the health endpoint.
pub const HEALTHZ_PATH: &str = "/healthz";
/// How long open connections may finish their requests after shutdown is asked for.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What the handlers share.
#[derive(Clone)]
struct AppState {
    metrics: WebhookMetrics,
    dry_run: Option<Arc<dyn TemplateDryRun>>,
    log: Arc<Throttle>,
}

/// The webhook's routes with the hardening layers: `POST` [`MUTATE_PATH`], `POST`
/// [`VALIDATE_PATH`] and `GET` [`HEALTHZ_PATH`]; the local rules only (no API server to
/// dry-run Job templates with).
pub fn router(metrics: WebhookMetrics) -> Router {
    routes(metrics, None)
}

/// [`router`], with the Job template of every CronJob the local rules allow (on create, or
/// when an update changes it) judged by the API server through `dry_run`: what batch/v1 would
/// refuse is denied.
pub fn router_with_dry_run(metrics: WebhookMetrics, dry_run: Arc<dyn TemplateDryRun>) -> Router {
    routes(metrics, Some(dry_run))
}

fn routes(metrics: WebhookMetrics, dry_run: Option<Arc<dyn TemplateDryRun>>) -> Router {
    let state = AppState {
        metrics: metrics.clone(),
        dry_run,
        log: Arc::new(Throttle::default()),
    };
    let routes = Router::new()
        .route(MUTATE_PATH, post(mutate))
        .route(VALIDATE_PATH, post(validate))
        .route(HEALTHZ_PATH, get(|| async { "ok" }))
        .with_state(state);
    harden(routes, &metrics)
}

/// Wrap `routes` in the layers every webhook route gets: a caught panic becomes a 500 answer
/// and is counted, requests time out after [`REQUEST_TIMEOUT`], and at most
/// [`MAX_CONCURRENT_REQUESTS`] run at once.
fn harden(routes: Router, metrics: &WebhookMetrics) -> Router {
    let counter = metrics.clone();
    let on_panic = move |panic: Box<dyn Any + Send>| {
        counter.panicked();
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        tracing::error!(panic = %what, "webhook handler panicked");
        error_response(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
    };
    routes.layer(
        ServiceBuilder::new()
            .layer(CatchPanicLayer::custom(on_panic))
            .layer(TimeoutLayer::with_status_code(
                StatusCode::SERVICE_UNAVAILABLE,
                REQUEST_TIMEOUT,
            ))
            .layer(GlobalConcurrencyLimitLayer::new(MAX_CONCURRENT_REQUESTS)),
    )
}

/// The name the TLS server is supervised by.
pub const SERVER: &str = "webhook server";
/// The name the certificate's refresher is supervised by.
pub const REFRESHER: &str = "certificate refresher";

/// Serve `app` over TLS on `listener` until `shutdown`, and keep the certificate fresh
/// alongside: two tasks ([`SERVER`], [`REFRESHER`], listed in `tasks`); either ending before
/// `shutdown` stops the other and is the error. `ready` gets the bound address once the
/// server accepts connections.
pub async fn run(
    listener: std::net::TcpListener,
    certs: Loaded,
    app: Router,
    ready: impl FnOnce(std::net::SocketAddr) + Send + 'static,
    shutdown: CancellationToken,
    tasks: &Tasks,
) -> Result<(), WebhookError> {
    let mut set = TaskSet::new(tasks, shutdown.clone());
    let keep_fresh = certs.keep_fresh;
    let stop = shutdown.clone();
    set.spawn(REFRESHER, async move {
        tokio::select! {
            () = keep_fresh => {}
            () = stop.cancelled() => {}
        }
        Ok(())
    });
    let server =
        axum_server::from_tcp_rustls(listener, certs.config).map_err(WebhookError::Serve)?;
    set.spawn(SERVER, serve(server, app, ready, shutdown));
    Ok(set.supervise().await?)
}

/// Serve until `shutdown`, then let open connections finish (at most [`DRAIN_TIMEOUT`]).
async fn serve(
    server: axum_server::Server<std::net::SocketAddr, axum_server::tls_rustls::RustlsAcceptor>,
    app: Router,
    ready: impl FnOnce(std::net::SocketAddr) + Send + 'static,
    shutdown: CancellationToken,
) -> Result<(), WebhookError> {
    let handle = axum_server::Handle::new();
    let announce = {
        let handle = handle.clone();
        async move {
            if let Some(addr) = handle.listening().await {
                ready(addr);
            }
            futures::future::pending::<()>().await;
        }
    };
    let stopper = {
        let handle = handle.clone();
        async move {
            shutdown.cancelled().await;
            handle.graceful_shutdown(Some(DRAIN_TIMEOUT));
            futures::future::pending::<()>().await;
        }
    };
    let serving = server.handle(handle).serve(app.into_make_service());
    tokio::select! {
        result = serving => result.map_err(WebhookError::Serve),
        () = announce => Ok(()),
        () = stopper => Ok(()),
    }
}

async fn mutate(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    handle(Endpoint::Mutate, &state, &headers, body).await
}

async fn validate(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    handle(Endpoint::Validate, &state, &headers, body).await
}

async fn handle(endpoint: Endpoint, state: &AppState, headers: &HeaderMap, body: Body) -> Response {
    let start = Instant::now();
    let (outcome, response) = match read_body(headers, body).await {
        Err(bad) => bad_request(&bad),
        Ok(bytes) => match admit(endpoint, &bytes) {
            Err(bad) => bad_request(&bad),
            Ok(answer) => respond(judge_template(state, answer).await),
        },
    };
    state
        .metrics
        .observe(endpoint.path(), outcome, start.elapsed());
    response
}

/// The API server's verdict on the template of an allowed CronJob, when there is one to ask
/// for: counted, and logged when there is none.
async fn judge_template(state: &AppState, answer: Answer) -> Answer {
    let Some(dry_run) = state.dry_run.as_ref() else {
        return answer;
    };
    let (answer, verdict) = check_template(answer, dry_run.as_ref()).await;
    if let Some(verdict) = verdict {
        state.metrics.dry_run(verdict.label());
        if let Verdict::Unknown(why) = &verdict
            && let Some(skipped) = state.log.allow("dry_run")
        {
            tracing::warn!(reason = ?why, skipped, "could not dry-run the Job template; allowing the CronJob");
        }
    }
    answer
}

fn respond(answer: Answer) -> (Outcome, Response) {
    match serde_json::to_vec(&answer.review) {
        Ok(json) => (
            answer.outcome,
            ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        ),
        Err(e) => {
            tracing::error!(error = %e, "cannot serialise the AdmissionReview answer");
            (
                Outcome::error,
                error_response(StatusCode::INTERNAL_SERVER_ERROR, "internal error"),
            )
        }
    }
}

async fn read_body(headers: &HeaderMap, body: Body) -> Result<axum::body::Bytes, BadRequest> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(BadRequest::TooLarge);
    }
    axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|e| match std::error::Error::source(&e) {
            // axum reports the limit as a "length limit exceeded" source error.
            Some(inner) if inner.to_string().contains("length limit") => BadRequest::TooLarge,
            _ => BadRequest::Read(e.to_string()),
        })
}

fn bad_request(bad: &BadRequest) -> (Outcome, Response) {
    tracing::debug!(reason = %bad, "bad admission request");
    (
        Outcome::bad_request,
        error_response(StatusCode::BAD_REQUEST, &bad.to_string()),
    )
}

/// A JSON error body `{"error": reason}` with `status`.
fn error_response(status: StatusCode, reason: &str) -> Response {
    let body = serde_json::json!({ "error": reason }).to_string();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    async fn boom() -> &'static str {
        panic!("handler bug")
    }

    #[tokio::test]
    async fn a_panicking_handler_is_caught_and_counted() {
        let mut registry = prometheus_client::registry::Registry::default();
        let metrics = WebhookMetrics::new(&mut registry);
        let routes = Router::new()
            .route("/boom", get(boom))
            .route("/fine", get(|| async { "fine" }));
        let app = harden(routes, &metrics);
        for _ in 0..2 {
            let r = app
                .clone()
                .oneshot(Request::get("/boom").body(Body::empty()).expect("request"))
                .await
                .expect("infallible");
            assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
        }
        let r = app
            .clone()
            .oneshot(Request::get("/fine").body(Body::empty()).expect("request"))
            .await
            .expect("infallible");
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(metrics.panic_count(), 2);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(text.contains("kronjob_webhook_panics_total 2"), "{text}");
    }

    async fn stuck() -> &'static str {
        tokio::time::sleep(Duration::from_secs(60)).await;
        "late"
    }

    #[tokio::test]
    async fn a_stuck_request_times_out_with_503() {
        let metrics = WebhookMetrics::new(&mut Default::default());
        let app = harden(Router::new().route("/stuck", get(stuck)), &metrics);
        let started = std::time::Instant::now();
        let r = app
            .oneshot(Request::get("/stuck").body(Body::empty()).expect("request"))
            .await
            .expect("infallible");
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        let waited = started.elapsed();
        assert!(waited >= REQUEST_TIMEOUT, "{waited:?}");
        assert!(waited < Duration::from_secs(10), "{waited:?}");
    }
}
