//! The mock's HTTP responses: the body type (one buffer, or chunks for
//! SSE) and the JSON, raw and event-stream answers that the server and the
//! provider formats (`providers`, `google`) build.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde::Serialize;

/// Response body: one buffer (with Content-Length) or several chunks
/// (chunked transfer encoding, used for SSE).
pub(crate) enum MockBody {
    Full(Option<Bytes>),
    Chunks(VecDeque<Bytes>),
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let next = match self.get_mut() {
            MockBody::Full(b) => b.take(),
            MockBody::Chunks(q) => q.pop_front(),
        };
        Poll::Ready(next.map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        match self {
            MockBody::Full(b) => b.is_none(),
            MockBody::Chunks(q) => q.is_empty(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            MockBody::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            MockBody::Chunks(_) => SizeHint::default(),
        }
    }
}

/// A response of the mock server.
pub(crate) type Resp = Response<MockBody>;

/// A JSON answer with `status`.
pub(crate) fn json_response(status: StatusCode, body: &impl Serialize) -> Resp {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut r = Response::new(MockBody::Full(Some(Bytes::from(bytes))));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// A body of `content_type` as given (the health check's `ok`).
pub(crate) fn raw_response(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Resp {
    let mut r = Response::new(MockBody::Full(Some(Bytes::from(body))));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// A stream of server-sent events (chunked transfer encoding).
pub(crate) fn sse(events: VecDeque<Bytes>) -> Resp {
    let mut r = Response::new(MockBody::Chunks(events));
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}
