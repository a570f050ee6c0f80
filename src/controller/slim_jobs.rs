//! The controllers' reads and creates of Jobs in protobuf: a layer of the manager's client.
//!
//! A Job read (a get, a list, a watch) or created (the answer to the POST) through this layer
//! is asked for in protobuf, and the answer made into JSON of a slim Job
//! ([`super::cache::protobuf`]): the API server encodes protobuf for a fraction of what JSON
//! costs it (on a 2-core server in a burst of 10,000 creates, serving kronjob's Job watch as
//! JSON took ~6% of its CPU, in protobuf about half that), and the manager reads only the
//! fields it keeps, skipping the rest by length. A created Job is sent in protobuf too
//! ([`crate::proto`]): decoding the bodies took 11.5% of the server's CPU in such a burst as
//! JSON, 4.5% as protobuf.
//! A Job the protobuf schema cannot write (a field newer than it) is sent as the JSON it was.
//!
//! Only what reads Jobs slim may use a client with this layer: in the manager every get, list,
//! watch and create of Jobs is of a [`super::cache::SlimJob`]. Requests asking for
//! another media type (metadata-only watches), other verbs, dry runs and other resources pass
//! untouched, and so does any answer that is not protobuf (a server or a proxy answering JSON).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{FutureExt, StreamExt, TryStreamExt};
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use tower::{BoxError, Layer, Service};

use super::cache::protobuf::{self, Frames, MEDIA_TYPE};

/// The response body of the layer.
pub type SlimBody = UnsyncBoxBody<Bytes, BoxError>;

/// What the layer asks for: protobuf, JSON when the server cannot.
const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf, application/json";

/// Ask for Jobs in protobuf and read the answers slim (see the module).
#[derive(Debug, Clone, Copy, Default)]
pub struct SlimJobsLayer;

impl<S> Layer<S> for SlimJobsLayer {
    type Service = SlimJobs<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SlimJobs { inner }
    }
}

/// The service of [`SlimJobsLayer`].
#[derive(Debug, Clone)]
pub struct SlimJobs<S> {
    inner: S,
}

/// Whether a request reads or creates Jobs (`GET` or `POST` on `/apis/batch/v1/jobs`,
/// `/apis/batch/v1/namespaces/NS/jobs` or one Job of those, no subresource), is not a dry run and
/// asks for JSON or nothing in particular.
pub fn is_slim_job_request<B>(request: &Request<B>) -> bool {
    if !matches!(*request.method(), Method::GET | Method::POST) {
        return false;
    }
    let accepts_json = request
        .headers()
        .get(ACCEPT)
        .is_none_or(|a| a.as_bytes() == b"application/json" || a.as_bytes() == b"*/*");
    if !accepts_json {
        return false;
    }
    let uri = request.uri();
    if uri.query().is_some_and(|q| q.contains("dryRun")) {
        return false;
    }
    let Some(rest) = uri.path().strip_prefix("/apis/batch/v1/") else {
        return false;
    };
    let rest = match rest.strip_prefix("namespaces/") {
        Some(namespaced) => match namespaced.split_once('/') {
            Some((namespace, rest)) if !namespace.is_empty() => rest,
            _ => return false,
        },
        None => rest,
    };
    match rest.strip_prefix("jobs") {
        Some("") => true,
        Some(name) => name
            .strip_prefix('/')
            .is_some_and(|n| !n.is_empty() && !n.contains('/')),
        None => false,
    }
}

fn is_protobuf<B>(response: &Response<B>) -> Option<bool> {
    let content_type = response.headers().get(CONTENT_TYPE)?.to_str().ok()?;
    let (media, params) = content_type
        .split_once(';')
        .map_or((content_type, ""), |(m, p)| (m, p));
    if media.trim() != MEDIA_TYPE {
        return None;
    }
    Some(params.replace(' ', "").contains("stream=watch"))
}

impl<S, B> Service<Request<kube::client::Body>> for SlimJobs<S>
where
    S: Service<Request<kube::client::Body>, Response = Response<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = Response<SlimBody>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: Request<kube::client::Body>) -> Self::Future {
        let slim = is_slim_job_request(&request);
        if slim {
            request
                .headers_mut()
                .insert(ACCEPT, HeaderValue::from_static(ACCEPT_PROTOBUF));
            if request.method() == Method::POST {
                send_protobuf(&mut request);
            }
        }
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await.map_err(Into::into)?;
            match is_protobuf(&response).filter(|_| slim) {
                None => Ok(response.map(|b| b.map_err(Into::into).boxed_unsync())),
                Some(true) => Ok(json(response, watch_body)),
                Some(false) => {
                    let (parts, body) = response.into_parts();
                    let bytes = body.collect().await.map_err(Into::into)?.to_bytes();
                    let body = protobuf::object_to_json(&bytes)?;
                    let body = Full::new(Bytes::from(body)).map_err(|e| match e {});
                    Ok(json(Response::from_parts(parts, body), |b| {
                        b.boxed_unsync()
                    }))
                }
            }
        })
    }
}

/// The JSON Job `request` creates, written in protobuf instead; left as it is when its body is
/// not JSON held whole, or the protobuf schema cannot write it.
fn send_protobuf(request: &mut Request<kube::client::Body>) {
    let is_json = request
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|c| c.as_bytes() == b"application/json");
    if !is_json {
        return;
    }
    // A body held whole gives its bytes at once; a streamed one is left alone.
    let Some(Some(Ok(json))) = request
        .body()
        .try_clone()
        .map(|b| b.collect_bytes().now_or_never())
    else {
        return;
    };
    let Ok(job) = serde_json::from_slice::<serde_json::Value>(&json) else {
        return;
    };
    match crate::proto::job(&job) {
        Ok(bytes) => {
            let headers = request.headers_mut();
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static(crate::proto::MEDIA_TYPE),
            );
            headers.remove(CONTENT_LENGTH);
            *request.body_mut() = kube::client::Body::from(bytes);
        }
        Err(e) => tracing::debug!(error = %e, "Job sent as JSON"),
    }
}

/// `response` with its body made by `body`, marked as JSON of unknown length.
fn json<B>(response: Response<B>, body: impl FnOnce(B) -> SlimBody) -> Response<SlimBody> {
    let (mut parts, b) = response.into_parts();
    parts.headers.remove(CONTENT_LENGTH);
    parts
        .headers
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, body(b))
}

/// A protobuf watch stream as JSON lines, one per event, written as its frame arrives. An
/// error of the stream is passed on as it is (kube tells a resumable end by it); a frame that
/// cannot be read ends the stream with an error; bytes left at the end that make no whole frame
/// are dropped, as a JSON stream's incomplete last line is.
fn watch_body<B>(body: B) -> SlimBody
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let chunks = body.into_data_stream().map_err(Into::into).boxed();
    let events = futures::stream::try_unfold(
        (chunks, Frames::default()),
        |(mut chunks, mut frames)| async move {
            loop {
                if let Some(frame) = frames.next_frame()? {
                    let mut line = Vec::with_capacity(frame.len().min(4096));
                    protobuf::watch_event_to_json(&frame, &mut line)?;
                    return Ok(Some((Bytes::from(line), (chunks, frames))));
                }
                match chunks.next().await {
                    Some(chunk) => frames.push(&chunk?),
                    None => return Ok::<_, BoxError>(None),
                }
            }
        },
    );
    StreamBody::new(events.map_ok(http_body::Frame::data)).boxed_unsync()
}

#[cfg(test)]
#[path = "slim_jobs_tests.rs"]
mod tests;
