//! The simulator's answers: the response body (a whole JSON document or a watch stream) and
//! the JSON and error responses every route sends.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};
use http_body::{Body, Frame, SizeHint};

use crate::fault::ApiError;

/// A response body: a whole JSON document, or a watch stream.
pub struct SimBody {
    kind: BodyKind,
}

enum BodyKind {
    Full(Option<Bytes>),
    Stream(BoxStream<'static, Result<Bytes, io::Error>>),
}

impl fmt::Debug for SimBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            BodyKind::Full(b) => f
                .debug_tuple("SimBody::Full")
                .field(&b.as_ref().map(Bytes::len))
                .finish(),
            BodyKind::Stream(_) => f.write_str("SimBody::Stream"),
        }
    }
}

impl SimBody {
    fn full(bytes: impl Into<Bytes>) -> Self {
        SimBody {
            kind: BodyKind::Full(Some(bytes.into())),
        }
    }

    /// A watch stream's body.
    pub(crate) fn stream(stream: BoxStream<'static, Result<Bytes, io::Error>>) -> Self {
        SimBody {
            kind: BodyKind::Stream(stream),
        }
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match &mut self.get_mut().kind {
            BodyKind::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            BodyKind::Stream(stream) => stream
                .poll_next_unpin(cx)
                .map(|item| item.map(|r| r.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.kind, BodyKind::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            BodyKind::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            BodyKind::Stream(_) => SizeHint::default(),
        }
    }
}

/// A JSON answer with status `code`.
pub(crate) fn json_response(code: u16, body: impl Into<Bytes>) -> Response<SimBody> {
    let mut response = Response::new(SimBody::full(body));
    *response.status_mut() =
        StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// The API's Status for `error`, with its `Retry-After` if it has one.
pub(crate) fn error_response(error: &ApiError) -> Response<SimBody> {
    let mut response = json_response(error.code, error.status().to_string());
    if let Some(seconds) = error.retry_after {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}
