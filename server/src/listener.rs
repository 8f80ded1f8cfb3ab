//! The connection layer: accepting and serving HTTP/1.1 connections within
//! the limits of settings `serve`, before any request reaches a route (so
//! before the key check: these bounds protect a server open to anyone).
//!
//! - At most `max_connections` connections are served at once; the accept
//!   loop waits for one to close before it accepts more (the rest wait in
//!   the kernel's listen queue).
//! - One client holds at most `max_connections_per_client` of them, and at
//!   most `max_pending_connections_per_client` that have not yet sent a
//!   whole request ([`crate::clients`]); a connection beyond either is
//!   answered 429 and closed at once, so a client that floods or stalls
//!   connections never fills the slots the others need.
//! - An accept that fails for want of a resource (no descriptor left:
//!   EMFILE, ENFILE; no memory) pauses the loop, never retried at once: a
//!   busy loop would starve every connection, `/health` included.
//! - hyper's own limits: `header_read_timeout`, one deadline for the whole
//!   head from the first read (so from the accept, not reset by each byte;
//!   hyper also applies it to the wait for a kept-alive connection's next
//!   request, so it is the idle timeout as well), and `max_header_size`
//!   (431 beyond).
//! - Request bodies must arrive at `body_min_rate` bytes a second over each
//!   `body_read_timeout`: the rule travels in the request's extensions to
//!   [`crate::http::body_bytes`], which answers 408 to a body below it (a
//!   total deadline would cut a large upload on a slow link, or hold a
//!   stalled one for as long).
//! - A response the client stops reading fails after `send_timeout` without
//!   progress ([`SendTimeout`]), which closes the connection: a client with
//!   a tiny receive window cannot hold its slot forever.
//! - CORS: preflights are answered here, before the key check, and
//!   answers to allowed origins carry the CORS headers.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::ToSocketAddrs;
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
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{oneshot, Semaphore};
use tokio::time::{Instant, Sleep};

use crate::clients::Clients;
use crate::cors::Cors;
use crate::http::BodyPace;
use crate::state::State;

/// The pause after an accept that failed for want of a resource: long
/// enough to cost no CPU, short enough to resume soon after a connection
/// closes and frees a descriptor.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// The listen queue's length: connections the kernel completes while the
/// accept loop is busy. std's 128 overflowed when one client reopened
/// hundreds of refused connections at once, and the kernel then dropped
/// other clients' handshakes, which their systems retried only a second
/// later. The kernel caps it at net.core.somaxconn (4096 on Linux since 5.4).
const LISTEN_BACKLOG: u32 = 4096;

/// Listens on `host:port`: the first of the addresses `host` resolves to
/// that binds, as std's `TcpListener::bind` does, with a listen queue of
/// [`LISTEN_BACKLOG`].
pub(crate) fn bind(host: &str, port: u16) -> io::Result<TcpListener> {
    let mut last = io::Error::new(io::ErrorKind::InvalidInput, "the host resolves to no address");
    for addr in (host, port).to_socket_addrs()? {
        let socket = if addr.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }?;
        // As std: a restarted server binds its port while the last one's connections linger in TIME_WAIT.
        socket.set_reuseaddr(true)?;
        match socket.bind(addr).and_then(|()| socket.listen(LISTEN_BACKLOG)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// What bounds the connections (settings `serve`).
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub header_read_timeout: Duration,
    pub body_read_timeout: Duration,
    pub body_min_rate: u64,
    pub send_timeout: Duration,
    pub max_connections: usize,
    pub max_connections_per_client: u32,
    pub max_pending_connections_per_client: u32,
    pub max_header_bytes: usize,
}

impl Limits {
    pub(crate) fn from_settings(s: &ServeConfig) -> Limits {
        Limits {
            header_read_timeout: duration_of_seconds(s.header_read_timeout),
            body_read_timeout: duration_of_seconds(s.body_read_timeout),
            body_min_rate: s.body_min_rate,
            send_timeout: duration_of_seconds(s.send_timeout),
            max_connections: s.max_connections as usize,
            max_connections_per_client: s.max_connections_per_client,
            max_pending_connections_per_client: s.max_pending_connections_per_client,
            max_header_bytes: s.max_header_bytes,
        }
    }

    /// What each window of a request body must bring.
    fn body_pace(&self) -> (Duration, u64) {
        let window = self.body_read_timeout;
        // At least a byte: a window that may bring nothing would let a body stall for ever.
        let min_bytes = (self.body_min_rate as f64 * window.as_secs_f64()).ceil().max(1.0) as u64;
        (window, min_bytes)
    }
}

/// Accepts and serves connections until `stopped` fires.
pub(crate) async fn serve(listener: TcpListener, limits: Limits, state: Arc<State>, stopped: oneshot::Receiver<()>) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let clients = Clients::new(limits.max_connections_per_client, limits.max_pending_connections_per_client);
    let (body_window, body_min_bytes) = limits.body_pace();
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
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
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
        let connection = match clients.admit(peer.ip()) {
            Ok(connection) => Arc::new(connection),
            Err(why) => {
                refuse(&stream, &why);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (state, cors, builder) = (state.clone(), cors.clone(), builder.clone());
        let send_timeout = limits.send_timeout;
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                use http_body::Body as _;
                if req.body().is_end_stream() {
                    connection.request_arrived();
                }
                let pace = BodyPace { window: body_window, min_bytes: body_min_bytes, connection: connection.clone() };
                req.extensions_mut().insert(pace);
                let (state, cors, connection) = (state.clone(), cors.clone(), connection.clone());
                async move {
                    let resp = match cors.preflight(&req) {
                        Some(preflight) => preflight,
                        None => {
                            let origin = req.headers().get(ORIGIN).cloned();
                            let mut resp = crate::handle(state, req).await;
                            cors.decorate(origin.as_ref(), &mut resp);
                            resp
                        }
                    };
                    // Answered: the request no longer counts as pending, even if
                    // its body was left unread (hyper then drains or closes it).
                    connection.request_arrived();
                    Ok::<_, Infallible>(resp)
                }
            });
            let io = TokioIo::new(SendTimeout::new(stream, send_timeout));
            if let Err(e) = builder.serve_connection(io, service).await {
                tracing::debug!("connection closed: {e}");
            }
        });
    }
}

/// Answers a connection refused by its client's bound: 429 with the reason,
/// written if the socket takes it at once (it is new: its send buffer is
/// empty), then closed. Never waits: a flood of refusals costs the accept
/// loop a write and a close each.
fn refuse(stream: &tokio::net::TcpStream, why: &str) {
    let body = serde_json::json!({ "detail": format!("too many connections: {why}") }).to_string();
    let answer = format!(
        "HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.try_write(answer.as_bytes());
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
