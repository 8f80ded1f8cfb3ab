//! The connection layer: accepting and serving HTTP/1.1 connections within
//! the limits of settings `serve`, before any request reaches a route (so
//! before the key check: these bounds protect a server open to anyone).
//!
//! - At most `max_connections` connections are served at once; the accept
//!   loop waits for one to close before it accepts more (the rest wait in
//!   the kernel's listen queue).
//! - An accept that fails for want of a resource (no descriptor left:
//!   EMFILE, ENFILE; no memory) pauses the loop, never retried at once: a
//!   busy loop would starve every connection, `/health` included.
//! - hyper's own limits: `header_read_timeout` (which hyper also applies to
//!   the wait for a kept-alive connection's next request, so it is the idle
//!   timeout as well) and `max_header_size` (431 beyond).
//! - Request bodies must arrive within `body_read_timeout` of the headers:
//!   the deadline travels in the request's extensions to
//!   [`crate::http::body_bytes`], which answers 408 past it.
//! - A response the client stops reading fails after `send_timeout` without
//!   progress ([`SendTimeout`]), which closes the connection: a client with
//!   a tiny receive window cannot hold its slot forever.
//! - CORS: preflights are answered here, before the key check, and
//!   answers to allowed origins carry the CORS headers.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use graphrag_engine::settings::{duration_of_seconds, ServeConfig};
use hyper::body::Incoming;
use hyper::header::ORIGIN;
use hyper::server::conn::http1;
use hyper::Request;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{oneshot, Semaphore};
use tokio::time::{Instant, Sleep};

use crate::cors::Cors;
use crate::http::BodyDeadline;
use crate::state::State;

/// The pause after an accept that failed for want of a resource: long
/// enough to cost no CPU, short enough to resume soon after a connection
/// closes and frees a descriptor.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// What bounds the connections (settings `serve`).
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
    pub send_timeout: Duration,
    pub max_connections: usize,
    pub max_header_bytes: usize,
}

impl Limits {
    pub(crate) fn from_settings(s: &ServeConfig) -> Limits {
        Limits {
            header_read_timeout: duration_of_seconds(s.header_read_timeout),
            body_read_timeout: duration_of_seconds(s.body_read_timeout),
            send_timeout: duration_of_seconds(s.send_timeout),
            max_connections: s.max_connections as usize,
            max_header_bytes: s.max_header_bytes,
        }
    }
}

/// Accepts and serves connections until `stopped` fires.
pub(crate) async fn serve(listener: TcpListener, limits: Limits, state: Arc<State>, stopped: oneshot::Receiver<()>) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(limits.max_header_bytes);
    let cors = Arc::new(Cors::new(&state.settings.serve.cors_origins));
    let mut paused_since: Option<Instant> = None;
    tokio::pin!(stopped);
    loop {
        let slot = tokio::select! {
            _ = &mut stopped => return,
            slot = slots.clone().acquire_owned() => slot.expect("the semaphore is never closed"),
        };
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            // The client gave up before it was accepted: nothing to wait for.
            Err(e) if is_connection_error(&e) => continue,
            Err(e) => {
                if paused_since.is_none() {
                    tracing::warn!(
                        "accepting a connection failed: {e}; pausing accepts until it succeeds again (out of file descriptors? raise `ulimit -n` above serve.max_connections ({}) plus the index's files)",
                        limits.max_connections
                    );
                    paused_since = Some(Instant::now());
                }
                drop(slot);
                tokio::select! {
                    _ = &mut stopped => return,
                    _ = tokio::time::sleep(ACCEPT_PAUSE) => continue,
                }
            }
        };
        if let Some(since) = paused_since.take() {
            tracing::info!("accepting connections again after {:.1} s", since.elapsed().as_secs_f64());
        }
        let _ = stream.set_nodelay(true);
        let (state, cors, builder) = (state.clone(), cors.clone(), builder.clone());
        let (body_read_timeout, send_timeout) = (limits.body_read_timeout, limits.send_timeout);
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(BodyDeadline(Instant::now() + body_read_timeout));
                let (state, cors) = (state.clone(), cors.clone());
                async move {
                    if let Some(preflight) = cors.preflight(&req) {
                        return Ok::<_, Infallible>(preflight);
                    }
                    let origin = req.headers().get(ORIGIN).cloned();
                    let mut resp = crate::handle(state, req).await;
                    cors.decorate(origin.as_ref(), &mut resp);
                    Ok(resp)
                }
            });
            let io = TokioIo::new(SendTimeout::new(stream, send_timeout));
            if let Err(e) = builder.serve_connection(io, service).await {
                tracing::debug!("connection closed: {e}");
            }
        });
    }
}

/// An accept error about the one connection (its client went away), after
/// which the next accept may succeed at once.
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset)
}

/// A connection whose writes fail with `TimedOut` once they have waited
/// `limit` without progress (the client's receive window stayed full).
struct SendTimeout<T> {
    inner: T,
    limit: Duration,
    /// Armed when a write first has to wait; disarmed by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<T> SendTimeout<T> {
    fn new(inner: T, limit: Duration) -> SendTimeout<T> {
        SendTimeout { inner, limit, stalled: None }
    }

    /// `result` of a write or flush, with the stall clock run on `Pending`.
    fn watch<R>(&mut self, cx: &mut Context<'_>, result: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if result.is_ready() {
            self.stalled = None;
            return result;
        }
        let limit = self.limit;
        let stalled = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {limit:?} (settings serve.send_timeout)"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for SendTimeout<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for SendTimeout<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, result)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn a_write_the_client_does_not_read_fails_after_the_limit_and_progress_resets_it() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let limit = Duration::from_millis(200);
            // Nobody reads: the 4 kB pipe fills and the write fails.
            let (ours, _theirs) = tokio::io::duplex(4096);
            let mut conn = SendTimeout::new(ours, limit);
            let write = tokio::time::timeout(Duration::from_secs(10), conn.write_all(&[7u8; 64 << 10]));
            let err = write.await.expect("the stalled write ended").unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::TimedOut);
            assert!(err.to_string().contains("serve.send_timeout"), "{err}");

            // A slow reader that keeps reading: every stall is shorter than the limit.
            let (ours, mut theirs) = tokio::io::duplex(4096);
            let reader = tokio::spawn(async move {
                let mut got = 0;
                let mut buf = [0u8; 4096];
                while got < 64 << 10 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    got += theirs.read(&mut buf).await.unwrap();
                }
                got
            });
            let mut conn = SendTimeout::new(ours, limit);
            conn.write_all(&[7u8; 64 << 10]).await.unwrap();
            assert_eq!(reader.await.unwrap(), 64 << 10);
        });
    }
}
