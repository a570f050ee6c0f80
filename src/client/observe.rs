//! What the client sees of the API server: throttling (429 answers, time spent waiting to retry,
//! how long requests take) as metrics, and the `Date` of every answer for the manager's
//! [`ApiServerClock`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use jiff::Timestamp;
use kube::client::Body;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tower::Service;

use crate::clock::{ApiServerClock, Clock, SystemClock};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// The label of a request: its method (`GET`, `POST`, `PUT`, `PATCH`, `DELETE`), or `WATCH`
/// for a watch (whose answer starts at once and streams).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    method: &'static str,
}

/// Every method [`RequestLabels`] names, exported at zero from the start.
const METHODS: [&str; 6] = ["GET", "WATCH", "POST", "PUT", "PATCH", "DELETE"];

impl RequestLabels {
    fn of(request: &Request<Body>) -> Self {
        let watch = request
            .uri()
            .query()
            .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
        let method = match *request.method() {
            _ if watch => "WATCH",
            Method::GET => "GET",
            Method::POST => "POST",
            Method::PUT => "PUT",
            Method::PATCH => "PATCH",
            Method::DELETE => "DELETE",
            _ => "other",
        };
        Self { method }
    }
}

/// Buckets of [`Observer`]'s request durations, seconds: a quick answer takes milliseconds; a
/// request queued by API Priority and Fairness or retried after a 429 takes seconds.
const DURATION_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The client's metrics and the clock its answers measure; cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Observer {
    throttled: Counter,
    retry_wait: Counter<f64, AtomicU64>,
    duration: Family<RequestLabels, Histogram>,
    clock: Arc<ApiServerClock>,
}

impl Default for Observer {
    fn default() -> Self {
        Self::new(Arc::default())
    }
}

impl Observer {
    /// Metrics at zero, and answers' `Date` going to `clock`.
    pub fn new(clock: Arc<ApiServerClock>) -> Self {
        let duration: Family<RequestLabels, Histogram> =
            Family::new_with_constructor(|| Histogram::new(DURATION_BUCKETS.iter().copied()));
        for method in METHODS {
            drop(duration.get_or_create(&RequestLabels { method }));
        }
        Self {
            throttled: Counter::default(),
            retry_wait: Counter::default(),
            duration,
            clock,
        }
    }

    /// The clock the answers measure.
    pub fn clock(&self) -> &Arc<ApiServerClock> {
        &self.clock
    }

    /// Register the metrics.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "kronjob_api_throttled",
            "Answers 429 Too Many Requests from the API server (API Priority and Fairness, a server shutting down, a watch cache initializing), each try counted",
            self.throttled.clone(),
        );
        registry.register(
            "kronjob_api_retry_wait_seconds",
            "Seconds the client waited before trying a request again (the server's Retry-After, or its own backoff)",
            self.retry_wait.clone(),
        );
        registry.register(
            "kronjob_api_request_duration_seconds",
            "From sending a request to its answer (a watch: to its start), retries and their waits included, by method",
            self.duration.clone(),
        );
        registry.register_collector(Box::new(OffsetGauges(Arc::clone(&self.clock))));
    }

    /// The client waited `delay` before trying a request again.
    pub(super) fn waited(&self, delay: Duration) {
        self.retry_wait.inc_by(delay.as_secs_f64());
    }

    /// One try's answer, sent at `sent` (system clock).
    fn answered(&self, sent: Timestamp, status: StatusCode, date: Option<Timestamp>) {
        if status == StatusCode::TOO_MANY_REQUESTS {
            self.throttled.inc();
        }
        if let Some(date) = date {
            self.clock.observe(sent, SystemClock.now(), date);
        }
    }
}

/// `kronjob_clock_offset_seconds` and its uncertainty, read at scrape time; absent until a
/// response has told them.
#[derive(Debug)]
struct OffsetGauges(Arc<ApiServerClock>);

impl prometheus_client::collector::Collector for OffsetGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(offset) = self.0.offset() else {
            return Ok(());
        };
        let gauges = [
            (
                "kronjob_clock_offset_seconds",
                "The API server's clock minus this process's, estimated from the Date of its answers",
                offset.middle(),
            ),
            (
                "kronjob_clock_offset_uncertainty_seconds",
                "How far the true offset may be from kronjob_clock_offset_seconds, either way",
                offset.uncertainty(),
            ),
        ];
        for (name, help, value) in gauges {
            let gauge = ConstGauge::new(value);
            let metric = encoder.encode_descriptor(name, help, None, gauge.metric_type())?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
}

/// The `Date` header of an answer.
fn date<B>(response: &Response<B>) -> Option<Timestamp> {
    let text = response.headers().get(http::header::DATE)?.to_str().ok()?;
    jiff::fmt::rfc2822::DateTimeParser::new()
        .parse_timestamp(text)
        .ok()
}

/// Every try of a request (inside the retries): 429s counted, the `Date` measured.
#[derive(Debug, Clone)]
pub struct Tries<S> {
    pub(super) inner: S,
    pub(super) observer: Observer,
}

impl<S, B> Service<Request<Body>> for Tries<S>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Future: Send + 'static,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<B>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let sent = SystemClock.now();
        let answer = self.inner.call(request);
        let observer = self.observer.clone();
        Box::pin(async move {
            let response = answer.await?;
            observer.answered(sent, response.status(), date(&response));
            Ok(response)
        })
    }
}

/// Every request as its caller sees it (outside the retries): how long it took.
#[derive(Debug, Clone)]
pub struct Requests<S> {
    pub(super) inner: S,
    pub(super) observer: Observer,
}

impl<S, B> Service<Request<Body>> for Requests<S>
where
    S: Service<Request<Body>, Response = Response<B>>,
    S::Future: Send + 'static,
{
    type Response = Response<B>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<B>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let labels = RequestLabels::of(&request);
        let started = tokio::time::Instant::now();
        let answer = self.inner.call(request);
        let duration = self.observer.duration.clone();
        Box::pin(async move {
            let response = answer.await;
            duration
                .get_or_create(&labels)
                .observe(started.elapsed().as_secs_f64());
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answers_date_measures_the_api_servers_clock_and_a_429_is_counted() {
        let response = Response::builder()
            .status(StatusCode::TOO_MANY_REQUESTS)
            .header(http::header::DATE, "Sun, 06 Nov 1994 08:49:37 GMT")
            .body(())
            .expect("response");
        let stamp = date(&response).expect("an HTTP date");
        assert_eq!(stamp.to_string(), "1994-11-06T08:49:37Z");
        let observer = Observer::default();
        let sent = SystemClock.now();
        observer.answered(sent, response.status(), Some(stamp));
        assert_eq!(observer.throttled.get(), 1);
        // The server's clock is decades behind ours: the offset says so, within a second.
        let offset = observer.clock().offset().expect("measured");
        let behind = sent.duration_since(stamp).as_secs_f64();
        assert!(
            offset.low <= -behind + 1.0 && offset.high >= -behind - 0.1,
            "{offset:?}"
        );
        assert!(offset.uncertainty() < 0.6, "{offset:?}");
        let garbled = Response::builder()
            .header(http::header::DATE, "yesterday")
            .body(())
            .expect("response");
        assert_eq!(date(&garbled), None);
    }

    #[test]
    fn a_watch_is_told_apart_from_a_get() {
        let request = |method: Method, uri: &str| {
            Request::builder()
                .method(method)
                .uri(uri)
                .body(Body::empty())
                .expect("request")
        };
        let method = |r: &Request<Body>| RequestLabels::of(r).method;
        assert_eq!(
            method(&request(
                Method::GET,
                "/api/v1/pods?watch=true&resourceVersion=1"
            )),
            "WATCH"
        );
        assert_eq!(
            method(&request(Method::GET, "/api/v1/pods?limit=500")),
            "GET"
        );
        assert_eq!(
            method(&request(Method::POST, "/api/v1/namespaces/a/pods")),
            "POST"
        );
    }
}
