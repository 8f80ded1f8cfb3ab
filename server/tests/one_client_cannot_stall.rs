//! One client cannot stall the server (issue #47, item 1). An attacker —
//! one client, at 127.0.0.2 — holds connections that send half a head, or
//! uploads that send their headers and then nothing, and reopens each as
//! the server ends it; meanwhile another client (127.0.0.1) asks `/health`
//! every 100 ms, and each answer must come within 1 s. Before the
//! per-client bounds, the attacker's connections filled the 256 slots and
//! `/health` waited in the listen queue for one of them to time out.
//!
//! The header and body timeouts are 1.5 s here (not the defaults), so that
//! held connections are cut and reopened within each few-second attack; on
//! the old server that alone kept `/health` waiting beyond 1 s.

mod common;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_server::{ServeOptions, Server};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const HALF_A_HEAD: &[u8] = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ";
const UPLOAD_HEAD: &[u8] = b"POST /documents/upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 1048576\r\n\r\n";
/// Long enough for the held connections to be cut and reopened.
const ATTACK: Duration = Duration::from_millis(2500);
const HEALTH_BOUND: Duration = Duration::from_secs(1);

/// A server whose header and body timeouts are 1.5 s, the per-client
/// bounds left at their defaults.
fn start(mock: &MockServer) -> (tempfile::TempDir, Server) {
    let dir = common::project(mock, &[]);
    let path = dir.path().join("settings.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}serve:\n  header_read_timeout: 1.5\n  body_read_timeout: 1.5\n")).unwrap();
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(dir.path()) }).unwrap();
    (dir, server)
}

/// The soft limit on open files raised to `needed` (the attacker's sockets
/// and the server's share this process), within the hard limit.
fn raise_open_files(needed: u64) {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
    if limit.rlim_cur < needed {
        limit.rlim_cur = needed.min(limit.rlim_max);
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    }
    assert!(
        limit.rlim_cur >= needed,
        "the hard limit on open files ({}) is below the {needed} this test needs",
        limit.rlim_max
    );
}

/// How the server ended the attacker's connections.
#[derive(Default, Debug)]
struct Tally {
    opened: AtomicU64,
    /// Ended within 0.5 s: refused by the client's bound (429; a refused
    /// connection whose request the server did not read may be reset
    /// before the answer is read).
    refused: AtomicU64,
    /// Held, then ended by the header or body timeout (1.5 s).
    held: AtomicU64,
    /// Of those, ended with 408: a body below the minimum rate.
    timed_out: AtomicU64,
}

impl Tally {
    fn get(&self) -> [u64; 4] {
        [&self.opened, &self.refused, &self.held, &self.timed_out].map(|n| n.load(Ordering::SeqCst))
    }
}

/// `connections` connections from [`ATTACKER`], each sending `request` and
/// then nothing, reopened as soon as the server ends it, until the returned
/// runtime is dropped.
fn attack(server: SocketAddr, connections: usize, request: &'static [u8]) -> (tokio::runtime::Runtime, Arc<Tally>) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let tally = Arc::new(Tally::default());
    for _ in 0..connections {
        let tally = tally.clone();
        runtime.spawn(async move {
            loop {
                let socket = tokio::net::TcpSocket::new_v4().unwrap();
                socket.bind(SocketAddr::new(ATTACKER, 0)).unwrap();
                let Ok(mut stream) = socket.connect(server).await else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let opened = Instant::now();
                tally.opened.fetch_add(1, Ordering::SeqCst);
                let _ = stream.write_all(request).await;
                let mut answer = Vec::new();
                let _ = stream.read_to_end(&mut answer).await;
                let held = opened.elapsed() > Duration::from_millis(500);
                let counter = if held { &tally.held } else { &tally.refused };
                counter.fetch_add(1, Ordering::SeqCst);
                if held && answer.starts_with(b"HTTP/1.1 408") {
                    tally.timed_out.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
    }
    (runtime, tally)
}

/// One `GET /health` from 127.0.0.1: how long its whole answer took.
fn health(server: SocketAddr) -> Duration {
    let started = Instant::now();
    let patience = Duration::from_secs(5);
    let mut stream = TcpStream::connect_timeout(&server, patience).expect("connecting for /health");
    stream.set_read_timeout(Some(patience)).unwrap();
    stream.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    let took = started.elapsed();
    assert!(read.is_ok() && answer.starts_with(b"HTTP/1.1 200"), "/health got no answer in {took:?}: {read:?}");
    took
}

/// `/health` asked every 100 ms while `attack` runs for [`ATTACK`]: the
/// slowest answer, checked within [`HEALTH_BOUND`].
fn health_during(server: SocketAddr, what: &str, attack: (tokio::runtime::Runtime, Arc<Tally>)) -> [u64; 4] {
    let (runtime, tally) = attack;
    let until = Instant::now() + ATTACK;
    let mut slowest = Duration::ZERO;
    let mut asked = 0;
    while Instant::now() < until {
        let took = health(server);
        assert!(took < HEALTH_BOUND, "{what}: /health took {took:?}; the attacker's connections: {tally:?}");
        slowest = slowest.max(took);
        asked += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    runtime.shutdown_timeout(Duration::from_secs(1));
    let [opened, refused, held, timed_out] = tally.get();
    eprintln!(
        "{what}: {asked} /health, the slowest {slowest:?}; the attacker opened {opened} connections: {refused} refused at once, {held} held until a timeout ({timed_out} with 408)"
    );
    tally.get()
}

/// Once the attacker has gone, its address is served again: the server
/// counted its connections down to none.
fn served_again(server: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let answer = loop {
        let answer = runtime.block_on(async {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind(SocketAddr::new(ATTACKER, 0)).unwrap();
            let mut stream = socket.connect(server).await.unwrap();
            stream.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
            let mut answer = Vec::new();
            let _ = stream.read_to_end(&mut answer).await;
            answer
        });
        if answer.starts_with(b"HTTP/1.1 200") || Instant::now() > deadline {
            break answer;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
}

#[test]
fn half_sent_heads_from_one_client_leave_health_answering_within_a_second() {
    raise_open_files(4096);
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let (_dir, server) = start(&mock);
    let addr = server.addr();
    for connections in [300, 1000] {
        let what = format!("{connections} half-sent heads");
        let [_, refused, held, _] = health_during(addr, &what, attack(addr, connections, HALF_A_HEAD));
        assert!(refused > 0, "{what}: the client's bound refused some");
        assert!(held > 0, "{what}: the held ones were cut at the header timeout and reopened");
        served_again(addr);
    }
}

#[test]
fn uploads_that_stop_after_their_headers_leave_health_answering_within_a_second() {
    raise_open_files(4096);
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let (_dir, server) = start(&mock);
    let addr = server.addr();
    let [_, refused, _, timed_out] = health_during(addr, "260 stalled uploads", attack(addr, 260, UPLOAD_HEAD));
    assert!(refused > 0, "the client's bound refused some");
    assert!(timed_out > 0, "the held ones were cut (408) by the body's minimum rate and reopened");
    served_again(addr);
}
