#![no_main]
//! Who may read `/metrics`: a request's `Authorization` headers through the metrics server's
//! guard (`metrics_auth::protect`, `Authorizer`), against a reviewer that answers by a rule,
//! compared with a model of the decision; asked twice, the second answer comes from the cache.
//!
//! Input: the `Authorization` header values, one per line (a request may carry several).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use axum::Router;
use axum::body::Body;
use futures::future::BoxFuture;
use http::{HeaderValue, Request, StatusCode, header};
use k8s_openapi::api::authentication::v1::UserInfo;
use kronjob::metrics_auth::decision::MAX_TOKEN_BYTES;
use kronjob::metrics_auth::{Authorizer, Reviewer, protect};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime")
});

/// Answers by the token: one ending in `!` cannot be reviewed (the API server is away); one
/// starting with `sa-` authenticates as itself; a user whose name holds `reader` may read.
#[derive(Debug, Default)]
struct Rule {
    reviews: AtomicUsize,
    tokens: Mutex<Vec<String>>,
}

impl Reviewer for Rule {
    fn authenticate<'a>(
        &'a self,
        token: &'a str,
    ) -> BoxFuture<'a, Result<Option<UserInfo>, kube::Error>> {
        self.reviews.fetch_add(1, Ordering::Relaxed);
        self.tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(token.to_string());
        let answer = if token.ends_with('!') {
            Err(kube::Error::TlsRequired)
        } else {
            Ok(token.starts_with("sa-").then(|| UserInfo {
                username: Some(token.to_string()),
                ..UserInfo::default()
            }))
        };
        Box::pin(async move { answer })
    }

    fn authorize<'a>(
        &'a self,
        user: &'a UserInfo,
        _path: &'a str,
    ) -> BoxFuture<'a, Result<bool, kube::Error>> {
        self.reviews.fetch_add(1, Ordering::Relaxed);
        let allowed = user
            .username
            .as_deref()
            .is_some_and(|u| u.contains("reader"));
        Box::pin(async move { Ok(allowed) })
    }
}

fuzz_target!(|data: &[u8]| {
    let values: Vec<HeaderValue> = data
        .split(|b| *b == b'\n')
        .filter_map(|line| HeaderValue::from_bytes(line).ok())
        .collect();
    let token = model_token(values.first());
    let want = match token.as_deref() {
        None => StatusCode::UNAUTHORIZED,
        Some(t) if t.ends_with('!') => StatusCode::SERVICE_UNAVAILABLE,
        Some(t) if !t.starts_with("sa-") => StatusCode::UNAUTHORIZED,
        Some(t) if t.contains("reader") => StatusCode::OK,
        Some(_) => StatusCode::FORBIDDEN,
    };
    let rule = Arc::new(Rule::default());
    let app = protect(
        Router::new().route("/metrics", axum::routing::get(|| async { "series" })),
        Arc::new(Authorizer::new(Arc::clone(&rule) as Arc<dyn Reviewer>)),
    );
    let first = scrape(&app, &values);
    assert_eq!(first, want, "{values:?}");
    let asked = rule.reviews.load(Ordering::Relaxed);
    match &token {
        None => assert_eq!(asked, 0, "a request without a token was reviewed"),
        Some(t) => {
            let tokens = rule.tokens.lock().unwrap_or_else(|e| e.into_inner());
            assert_eq!(
                tokens.as_slice(),
                std::slice::from_ref(t),
                "the token reviewed"
            );
        }
    }
    assert_eq!(scrape(&app, &values), want, "asked again: {values:?}");
    if want != StatusCode::SERVICE_UNAVAILABLE {
        assert_eq!(
            rule.reviews.load(Ordering::Relaxed),
            asked,
            "not remembered"
        );
    }
});

/// The bearer token of the first `Authorization` header, by the rule the docs state: the
/// scheme `Bearer` in any case, a space, and a token of 1 to 16 KiB, surrounding blanks
/// trimmed.
fn model_token(value: Option<&HeaderValue>) -> Option<String> {
    let text = value?.to_str().ok()?.trim();
    let (scheme, token) = text.split_once(' ')?;
    let token = token.trim();
    let usable = scheme.eq_ignore_ascii_case("bearer")
        && !token.is_empty()
        && token.len() <= MAX_TOKEN_BYTES;
    usable.then(|| token.to_string())
}

/// The status of `GET /metrics` with these `Authorization` headers; a 401 asks for a bearer
/// token.
fn scrape(app: &Router, values: &[HeaderValue]) -> StatusCode {
    let mut request = Request::get("/metrics");
    for value in values {
        request = request.header(header::AUTHORIZATION, value.clone());
    }
    let request = request.body(Body::empty()).expect("a request");
    let response = RUNTIME
        .block_on(app.clone().oneshot(request))
        .expect("infallible");
    if response.status() == StatusCode::UNAUTHORIZED {
        assert_eq!(
            response.headers().get(header::WWW_AUTHENTICATE),
            Some(&HeaderValue::from_static("Bearer"))
        );
    }
    response.status()
}
