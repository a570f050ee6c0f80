//! Who may read `/metrics` (the series name every namespace and CronJob): the request's bearer
//! token is authenticated with a `TokenReview` and its user authorized with a
//! `SubjectAccessReview` for `get` on the non-resource URL `/metrics`, as kubebuilder's
//! scaffold does with controller-runtime's authentication and authorization filter. Grant it
//! with the `metrics-reader` ClusterRole.
//!
//! - [`decision`]: from a request's `Authorization` header and the reviews' answers to a
//!   decision, and the bounded, short-lived cache of decisions (pure, clock injected);
//! - [`review`]: the two reviews on the API server.
//!
//! No token: 401 without asking the API server. A token the API server does not
//! authenticate: 401. Authenticated but not allowed: 403. The API server unreachable: 503.

pub mod decision;
pub mod review;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

pub use decision::{Decision, Decisions};
pub use review::Reviewer;

/// The non-resource URL the SubjectAccessReview asks about.
pub const METRICS_PATH: &str = "/metrics";
/// Most reviews in flight at once; further requests wait up to [`REVIEW_WAIT`].
pub const MAX_REVIEWS_IN_FLIGHT: usize = 4;
/// Longest wait for a place among the reviews in flight.
pub const REVIEW_WAIT: Duration = Duration::from_secs(2);

/// Decides who may read the metrics, and remembers its decisions.
pub struct Authorizer {
    reviewer: Arc<dyn Reviewer>,
    decisions: Mutex<Decisions>,
    in_flight: Semaphore,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer").finish_non_exhaustive()
    }
}

impl Authorizer {
    /// An authorizer asking `reviewer`.
    pub fn new(reviewer: Arc<dyn Reviewer>) -> Self {
        Authorizer {
            reviewer,
            decisions: Mutex::new(Decisions::default()),
            in_flight: Semaphore::new(MAX_REVIEWS_IN_FLIGHT),
        }
    }

    /// The decision for a request with `headers`.
    pub async fn decide(&self, headers: &HeaderMap) -> Decision {
        let authorization = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let Some(token) = decision::bearer_token(authorization) else {
            return Decision::Unauthenticated;
        };
        let key = decision::token_key(token);
        if let Some(known) = self.lock().get(&key, Instant::now()) {
            return known;
        }
        let Ok(Ok(_permit)) = tokio::time::timeout(REVIEW_WAIT, self.in_flight.acquire()).await
        else {
            return Decision::Unavailable;
        };
        let decided = self.review(token).await;
        self.lock().put(key, decided, Instant::now());
        decided
    }

    async fn review(&self, token: &str) -> Decision {
        let user = match self.reviewer.authenticate(token).await {
            Ok(Some(user)) => user,
            Ok(None) => return Decision::Unauthenticated,
            Err(e) => {
                tracing::warn!(error = %crate::telemetry::error_chain(&e), "TokenReview for /metrics failed");
                return Decision::Unavailable;
            }
        };
        match self.reviewer.authorize(&user, METRICS_PATH).await {
            Ok(true) => Decision::Allowed,
            Ok(false) => {
                tracing::debug!(user = %user.username.as_deref().unwrap_or_default(), "GET /metrics forbidden");
                Decision::Forbidden
            }
            Err(e) => {
                tracing::warn!(error = %crate::telemetry::error_chain(&e), "SubjectAccessReview for /metrics failed");
                Decision::Unavailable
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Decisions> {
        self.decisions.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `router` behind the authorizer: every request is decided first.
pub fn protect(router: Router, authorizer: Arc<Authorizer>) -> Router {
    router.layer(axum::middleware::from_fn(
        move |request: Request, next: Next| {
            let authorizer = Arc::clone(&authorizer);
            async move {
                match authorizer.decide(request.headers()).await {
                    Decision::Allowed => next.run(request).await,
                    refused => refusal(refused),
                }
            }
        },
    ))
}

fn refusal(decision: Decision) -> Response {
    let status = match decision {
        Decision::Unauthenticated => StatusCode::UNAUTHORIZED,
        Decision::Forbidden => StatusCode::FORBIDDEN,
        Decision::Allowed | Decision::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
    };
    let mut response = (status, status.canonical_reason().unwrap_or_default()).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::api_script::{Expect, mock_client};
    use serde_json::json;
    use tower::ServiceExt;

    fn token_review(authenticated: bool) -> serde_json::Value {
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {}, "status": {"authenticated": authenticated,
            "user": {"username": "system:serviceaccount:monitoring:prometheus",
                     "uid": "u-1", "groups": ["system:serviceaccounts"]}}})
    }

    fn access_review(allowed: bool) -> serde_json::Value {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {}, "status": {"allowed": allowed}})
    }

    async fn scrape(app: &Router, token: Option<&str>) -> StatusCode {
        let mut request = axum::http::Request::get("/metrics");
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request.body(axum::body::Body::empty()).expect("request");
        app.clone()
            .oneshot(request)
            .await
            .expect("infallible")
            .status()
    }

    /// The three scrapes against a scripted API server: exactly the reviews each needs, and
    /// a repeated token answered from the cache.
    #[tokio::test]
    async fn no_token_401_unauthorized_403_authorized_200_and_answers_are_cached() {
        let (client, script) = mock_client();
        let tokens = "/apis/authentication.k8s.io/v1/tokenreviews";
        let access = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
        let server = script.run(vec![
            Expect::post(tokens).reply(http::StatusCode::CREATED, token_review(false)),
            Expect::post(tokens).reply(http::StatusCode::CREATED, token_review(true)),
            Expect::post(access).reply(http::StatusCode::CREATED, access_review(false)),
            Expect::post(tokens).reply(http::StatusCode::CREATED, token_review(true)),
            Expect::post(access).reply(http::StatusCode::CREATED, access_review(true)),
        ]);
        let authorizer = Arc::new(Authorizer::new(Arc::new(client)));
        let app = protect(
            Router::new().route("/metrics", axum::routing::get(|| async { "series" })),
            authorizer,
        );
        assert_eq!(scrape(&app, None).await, StatusCode::UNAUTHORIZED);
        assert_eq!(scrape(&app, Some("")).await, StatusCode::UNAUTHORIZED);
        assert_eq!(scrape(&app, Some("forged")).await, StatusCode::UNAUTHORIZED);
        assert_eq!(scrape(&app, Some("no-rbac")).await, StatusCode::FORBIDDEN);
        assert_eq!(scrape(&app, Some("reader")).await, StatusCode::OK);
        // Cached: no further review (the script holds no more replies).
        for token in ["forged", "no-rbac", "reader"] {
            let again = scrape(&app, Some(token)).await;
            assert_ne!(again, StatusCode::SERVICE_UNAVAILABLE, "{token}");
        }
        server.await.expect("requests as scripted");
    }

    #[tokio::test]
    async fn an_unreachable_api_server_is_503_and_not_remembered() {
        let (client, script) = mock_client();
        let server = script.run(vec![
            Expect::post("/apis/authentication.k8s.io/v1/tokenreviews")
                .fails(http::StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
            Expect::post("/apis/authentication.k8s.io/v1/tokenreviews")
                .reply(http::StatusCode::CREATED, token_review(true)),
            Expect::post("/apis/authorization.k8s.io/v1/subjectaccessreviews")
                .reply(http::StatusCode::CREATED, access_review(true)),
        ]);
        let app = protect(
            Router::new().route("/metrics", axum::routing::get(|| async { "series" })),
            Arc::new(Authorizer::new(Arc::new(client))),
        );
        assert_eq!(
            scrape(&app, Some("t")).await,
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(scrape(&app, Some("t")).await, StatusCode::OK);
        server.await.expect("requests as scripted");
    }
}
