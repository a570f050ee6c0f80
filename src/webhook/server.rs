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
    Answer, BadRequest, Endpoint, MAX_BODY_BYTES, MUTATE_PATH, VALIDATE_PATH, admit,
};
use super::api::AdmissionApi;
use super::budget::{BodyBudget, MAX_JSON_VALUES, Reservation, json_values};
use super::certs::Loaded;
use super::dry_run::{Budgeted, DRY_RUNS_PER_MINUTE};
use super::judge::Judge;
use super::metrics::{Outcome, WebhookMetrics};
use crate::https::{Limits, Server, ServerMetrics};
use crate::task::{TaskSet, Tasks};
use crate::telemetry::Throttle;
use crate::workload::Verdict;
use crate::workload::allowed::AllowedKinds;

/// Longest time a request may take before it is answered with 503. The API server's own
/// timeout for the webhook is 5 s (`timeoutSeconds`).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(4);
/// When, after a request arrived, the webhook's requests to the API server for it give up (a
/// dry run then allows, an access check refuses), so the answer comes before
/// [`REQUEST_TIMEOUT`].
pub const CHECKS_DEADLINE: Duration = Duration::from_millis(3500);
/// Most requests handled at once; further requests wait for a slot.
pub const MAX_CONCURRENT_REQUESTS: usize = 256;
/// Longest time a request body may take to arrive once its headers have (slow clients get
/// 408).
pub const BODY_READ_TIMEOUT: Duration = Duration::from_secs(3);
/// Path of the health endpoint.
pub const HEALTHZ_PATH: &str = "/healthz";
/// How long open connections may finish their requests after shutdown is asked for.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// What the handlers share.
#[derive(Clone)]
struct AppState {
    metrics: WebhookMetrics,
    judge: Option<Arc<Judge>>,
    budget: BodyBudget,
    log: Arc<Throttle>,
}

/// The webhook's routes with the hardening layers: `POST` [`MUTATE_PATH`], `POST`
/// [`VALIDATE_PATH`] and `GET` [`HEALTHZ_PATH`]; the local rules only (no API server to ask).
pub fn router(metrics: WebhookMetrics) -> Router {
    routes(metrics, None)
}

/// [`router`], with the template of every CronJob the local rules allow (on create, or when an
/// update changes it) judged by the API server through `api` (see [`super::judge`]): what the
/// API server would refuse is denied. Its requests are deduplicated and limited (see
/// [`super::dry_run`]), dry runs to [`DRY_RUNS_PER_MINUTE`]; the kinds allowed are the
/// default `--workload-kinds` (batch/v1 Jobs only).
pub fn router_with_dry_run(metrics: WebhookMetrics, api: Arc<dyn AdmissionApi>) -> Router {
    router_with_api(metrics, api, DRY_RUNS_PER_MINUTE, AllowedKinds::default())
}

/// [`router_with_dry_run`] with at most `per_minute` dry runs a minute and the kinds `allowed`
/// (`--workload-kinds`).
pub fn router_with_api(
    metrics: WebhookMetrics,
    api: Arc<dyn AdmissionApi>,
    per_minute: u32,
    allowed: AllowedKinds,
) -> Router {
    let judge = Judge {
        api: Budgeted::new(api, per_minute, metrics.clone()),
        allowed,
    };
    routes(metrics, Some(Arc::new(judge)))
}

fn routes(metrics: WebhookMetrics, judge: Option<Arc<Judge>>) -> Router {
    let state = AppState {
        metrics: metrics.clone(),
        judge,
        budget: BodyBudget::default(),
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

/// Serve `app` over TLS on `listener` until `shutdown` (see [`crate::https`]), and keep the
/// certificate fresh alongside: two tasks ([`SERVER`], [`REFRESHER`], listed in `tasks`);
/// either ending before `shutdown` stops the other and is the error. `ready` gets the bound
/// address once the server accepts connections.
pub async fn run(
    listener: std::net::TcpListener,
    certs: Loaded,
    app: Router,
    (limits, connections): (Limits, ServerMetrics),
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
    let server = Server {
        app,
        tls: certs.config,
        limits,
        metrics: connections,
        drain: DRAIN_TIMEOUT,
    };
    set.spawn(SERVER, async move {
        crate::https::serve(listener, server, ready, shutdown)
            .await
            .map_err(WebhookError::Serve)
    });
    Ok(set.supervise().await?)
}

async fn mutate(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    handle(Endpoint::Mutate, &state, &headers, body).await
}

async fn validate(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    handle(Endpoint::Validate, &state, &headers, body).await
}

async fn handle(endpoint: Endpoint, state: &AppState, headers: &HeaderMap, body: Body) -> Response {
    let start = Instant::now();
    let (outcome, response) = match receive(state, headers, body).await {
        Err(refused) => reject(state, &refused),
        Ok((bytes, reservation)) => {
            let decided = admit(endpoint, &bytes);
            drop(bytes);
            let answer = match decided {
                Err(bad) => reject(state, &Refused::Malformed(bad)),
                Ok(answer) => {
                    let until = tokio::time::Instant::from_std(start) + CHECKS_DEADLINE;
                    respond(judge_template(state, answer, until).await)
                }
            };
            drop(reservation);
            answer
        }
    };
    state
        .metrics
        .observe(endpoint.path(), outcome, start.elapsed());
    response
}

/// The API server's judgement of the template of an allowed CronJob, when there is one to ask
/// for (its requests count themselves, see [`Budgeted`]); a dry run without verdict is logged.
async fn judge_template(state: &AppState, answer: Answer, until: tokio::time::Instant) -> Answer {
    let Some(judge) = state.judge.as_ref() else {
        return answer;
    };
    let (answer, verdict) = judge.judge(answer, until).await;
    if let Some(Verdict::Unknown(why)) = &verdict
        && let Some(skipped) = state.log.allow("dry_run")
    {
        tracing::warn!(reason = ?why, skipped, "could not dry-run the template; allowing the CronJob");
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

/// Why a request was refused before admission.
#[derive(Debug)]
enum Refused {
    /// Not an admission review (400).
    Malformed(BadRequest),
    /// The body is larger than [`MAX_BODY_BYTES`], or holds more than [`MAX_JSON_VALUES`]
    /// values (413).
    TooLarge,
    /// The body did not arrive within [`BODY_READ_TIMEOUT`] (408).
    Slow,
    /// The memory budget of bodies in flight stayed spent (429).
    Busy,
}

impl Refused {
    fn status(&self) -> StatusCode {
        match self {
            Refused::Malformed(_) => StatusCode::BAD_REQUEST,
            Refused::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Refused::Slow => StatusCode::REQUEST_TIMEOUT,
            Refused::Busy => StatusCode::TOO_MANY_REQUESTS,
        }
    }

    /// The `reason` label of `kronjob_webhook_rejected_requests_total`.
    fn reason(&self) -> &'static str {
        match self {
            Refused::Malformed(_) => "malformed",
            Refused::TooLarge => "too_large",
            Refused::Slow => "slow",
            Refused::Busy => "busy",
        }
    }

    fn message(&self) -> String {
        match self {
            Refused::Malformed(bad) => bad.to_string(),
            Refused::TooLarge => BadRequest::TooLarge.to_string(),
            Refused::Slow => format!(
                "the request body did not arrive within {}s",
                BODY_READ_TIMEOUT.as_secs()
            ),
            Refused::Busy => "too many request bodies in flight; retry".to_string(),
        }
    }
}

/// The body, read within [`BODY_READ_TIMEOUT`] once its share of the memory budget is
/// reserved (the reservation comes with it).
async fn receive(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<(axum::body::Bytes, Reservation), Refused> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(Refused::TooLarge);
    }
    let declared = declared.and_then(|n| usize::try_from(n).ok());
    let reservation = state.budget.reserve(declared).await.ok_or(Refused::Busy)?;
    let limit = declared.unwrap_or(MAX_BODY_BYTES);
    let read = tokio::time::timeout(BODY_READ_TIMEOUT, axum::body::to_bytes(body, limit));
    match read.await {
        Err(_) => Err(Refused::Slow),
        Ok(Ok(bytes)) if json_values(&bytes) > MAX_JSON_VALUES => Err(Refused::TooLarge),
        Ok(Ok(bytes)) => Ok((bytes, reservation)),
        Ok(Err(e)) => Err(match std::error::Error::source(&e) {
            // axum reports the limit as a "length limit exceeded" source error.
            Some(inner) if inner.to_string().contains("length limit") => Refused::TooLarge,
            _ => Refused::Malformed(BadRequest::Read(e.to_string())),
        }),
    }
}

fn reject(state: &AppState, refused: &Refused) -> (Outcome, Response) {
    tracing::debug!(reason = %refused.message(), "admission request refused");
    state.metrics.rejected(refused.reason());
    (
        Outcome::bad_request,
        error_response(refused.status(), &refused.message()),
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
