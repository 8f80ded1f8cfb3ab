//! HTTP plumbing over hyper: the response body type (whole or streamed),
//! JSON answers and errors, bounded request bodies, query strings.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::Frame;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::clients::ClientConnection;

/// A response body: whole, or streamed from a channel (NDJSON, SSE).
pub enum Body {
    Full(Full<Bytes>),
    Stream(mpsc::UnboundedReceiver<Bytes>),
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(full) => Pin::new(full).poll_frame(cx),
            Body::Stream(rx) => rx.poll_recv(cx).map(|chunk| chunk.map(|b| Ok(Frame::data(b)))),
        }
    }
}

pub type Resp = Response<Body>;

/// An error answered as `{"detail": message}` (FastAPI's shape, which
/// LightRAG's clients read) with its status.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into() }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    pub fn into_response(self) -> Resp {
        let mut r = json_status(self.status, &json!({ "detail": self.message }));
        if self.status == StatusCode::UNAUTHORIZED {
            r.headers_mut().insert("www-authenticate", HeaderValue::from_static("Bearer"));
        }
        r
    }
}

/// An internal failure: logged in full, answered with its message chain
/// (which names no secret: settings errors never print them).
impl From<anyhow::Error> for ApiError {
    fn from(e: anyhow::Error) -> ApiError {
        tracing::warn!("request failed: {e:#}");
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}"))
    }
}

pub type Result<T> = std::result::Result<T, ApiError>;

pub fn with_type(status: StatusCode, content_type: &'static str, body: Body) -> Resp {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

pub fn json_status(status: StatusCode, value: &Value) -> Resp {
    with_type(status, "application/json", Body::Full(Full::new(Bytes::from(value.to_string()))))
}

pub fn json(value: Value) -> Result<Resp> {
    Ok(json_status(StatusCode::OK, &value))
}

pub fn bytes(content_type: &'static str, body: impl Into<Bytes>) -> Resp {
    with_type(StatusCode::OK, content_type, Body::Full(Full::new(body.into())))
}

/// A streamed response and the sender that feeds it.
pub fn stream(content_type: &'static str) -> (Resp, mpsc::UnboundedSender<Bytes>) {
    let (tx, rx) = mpsc::unbounded_channel();
    (with_type(StatusCode::OK, content_type, Body::Stream(rx)), tx)
}

/// How fast a request's body must arrive (set by the connection layer from
/// `serve.body_read_timeout` and `serve.body_min_rate`), in the request's
/// extensions: at least `min_bytes` in each `window`, counted from when the
/// route starts reading it; and the connection to tell once it has.
#[derive(Clone)]
pub struct BodyPace {
    pub window: Duration,
    pub min_bytes: u64,
    pub connection: Arc<ClientConnection>,
}

/// The windows of a [`BodyPace`] as a body arrives.
struct PaceWindows {
    window: Duration,
    min_bytes: u64,
    end: Instant,
    got: u64,
}

impl PaceWindows {
    fn start(pace: &BodyPace) -> PaceWindows {
        PaceWindows { window: pace.window, min_bytes: pace.min_bytes, end: Instant::now() + pace.window, got: 0 }
    }

    /// Closes the windows over by now: each must have brought its minimum
    /// (408 otherwise).
    fn roll(&mut self) -> Result<()> {
        while Instant::now() >= self.end {
            if self.got < self.min_bytes {
                return Err(ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "the request body arrived too slowly: {} bytes in {:?}, less than the {} required (settings serve.body_min_rate, serve.body_read_timeout)",
                        self.got, self.window, self.min_bytes
                    ),
                ));
            }
            self.got = 0;
            self.end += self.window;
        }
        Ok(())
    }
}

/// `future`'s output, or `None` once the stream fed by `tx` has no reader
/// (its client went away; `future` is dropped).
pub async fn until_closed<F: std::future::Future>(tx: &mpsc::UnboundedSender<Bytes>, future: F) -> Option<F::Output> {
    tokio::select! {
        out = future => Some(out),
        _ = tx.closed() => None,
    }
}

/// The request body, at most `limit` bytes (413 beyond), at its
/// [`BodyPace`] (408 below it).
pub async fn body_bytes(req: Request<Incoming>, limit: usize) -> Result<Bytes> {
    let pace = req.extensions().get::<BodyPace>().cloned();
    let mut windows = pace.as_ref().map(PaceWindows::start);
    let mut body = Limited::new(req.into_body(), limit);
    let mut data = BytesMut::new();
    loop {
        let frame = match windows.as_mut() {
            // A frame future holds nothing: dropping it at a window's end loses no data.
            Some(w) => match tokio::time::timeout_at(w.end, body.frame()).await {
                Ok(frame) => frame,
                Err(_) => {
                    w.roll()?;
                    continue;
                }
            },
            None => body.frame().await,
        };
        if let Some(w) = windows.as_mut() {
            w.roll()?;
        }
        match frame {
            None => break,
            Some(Ok(frame)) => {
                if let Ok(chunk) = frame.into_data() {
                    if let Some(w) = windows.as_mut() {
                        w.got += chunk.len() as u64;
                    }
                    data.extend_from_slice(&chunk);
                }
            }
            Some(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
                return Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("the request body is larger than the limit of {limit} bytes"),
                ))
            }
            Some(Err(e)) => return Err(ApiError::bad_request(format!("reading the request body: {e}"))),
        }
    }
    if let Some(pace) = pace {
        pace.connection.request_arrived();
    }
    Ok(data.freeze())
}

/// The body as JSON of type `T`; the error names the field that is wrong.
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T> {
    if body.is_empty() {
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "the request body is empty: expected JSON"));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, format!("invalid JSON request body: {e}")))
}

/// The value of `key` in the query string, percent-decoded.
pub fn query_param(query: Option<&str>, key: &str) -> Option<String> {
    query?.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k) == key).then(|| percent_decode(v))
    })
}

/// `%XX` escapes (and `+`, as in query strings) decoded.
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                match u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A number from the query string, with its default and bounds.
pub fn query_number(query: Option<&str>, key: &str, default: usize, max: usize) -> Result<usize> {
    match query_param(query, key) {
        None => Ok(default),
        Some(v) => match v.trim().parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("query parameter `{key}` must be a whole number from 1 to {max}, not `{v}`"),
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_params_are_decoded() {
        let q = Some("label=Ebenezer%20Scrooge&max_depth=2&x=a+b&bad=%zz%4");
        assert_eq!(query_param(q, "label").as_deref(), Some("Ebenezer Scrooge"));
        assert_eq!(query_param(q, "x").as_deref(), Some("a b"));
        assert_eq!(query_param(q, "bad").as_deref(), Some("%zz%4"));
        assert_eq!(query_param(q, "none"), None);
        assert_eq!(query_number(q, "max_depth", 3, 10).unwrap(), 2);
        assert!(query_number(Some("max_depth=0"), "max_depth", 3, 10).is_err());
        assert!(query_number(Some("max_depth=x"), "max_depth", 3, 10).is_err());
    }
}
