//! The server on an open network: connections that never finish, idle
//! kept-alive connections, slow bodies, oversized heads, CORS, the bearer
//! scheme, and queries whose chat model fails or whose client goes away.
//! Real servers on loopback (the mock LLM for the models); every timeout
//! is set small by the test.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use graphrag_mock_llm::{Endpoint, FaultKind, FaultRule, MockConfig, MockServer};
use graphrag_server::{ServeOptions, Server};
use serde_json::json;

use common::{carol, get, project, request};

/// Appends `extra` to the project's settings and makes its models retry
/// (almost) without limit, quickly: only the query policy can end a query.
fn configure(root: &Path, extra: &str) {
    let path = root.join("settings.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replace("    concurrent_requests: 4\n", "    concurrent_requests: 4\n    max_retries: 100000\n");
    std::fs::write(&path, format!("{text}{extra}")).unwrap();
}

fn start(root: &Path, api_key: Option<&str>) -> Server {
    let opts = ServeOptions { port: 0, api_key: api_key.map(str::to_string), ..ServeOptions::new(root) };
    Server::start(opts).unwrap()
}

/// Whether the server closes `stream` before `limit` (reading and dropping
/// whatever it sends first).
fn closed_within(stream: &mut TcpStream, limit: Duration) -> bool {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return false,
            // A reset is a close too.
            Err(_) => return true,
        }
    }
}

fn status_of(head: &[u8]) -> u16 {
    String::from_utf8_lossy(head).split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0)
}

#[test]
fn slow_heads_idle_connections_and_slow_bodies_are_cut_off() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock, &[]);
    configure(dir.path(), "serve:\n  header_read_timeout: 0.5\n  body_read_timeout: 0.5\n  max_header_bytes: 8192\n");
    let server = start(dir.path(), None);
    let addr = server.addr();
    // The server's own bound is 0.5 s; the client waits up to 5 s for the close.
    let patience = Duration::from_secs(5);

    let mut silent = TcpStream::connect(addr).unwrap();
    let mut slow_head = TcpStream::connect(addr).unwrap();
    slow_head.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ").unwrap();
    assert!(closed_within(&mut silent, patience), "a connection that sends nothing is closed");
    assert!(closed_within(&mut slow_head, patience), "a head that never ends is closed");

    // A kept-alive connection is answered, then closed once idle.
    let mut kept = TcpStream::connect(addr).unwrap();
    kept.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    kept.set_read_timeout(Some(patience)).unwrap();
    let mut first = [0u8; 12];
    kept.read_exact(&mut first).unwrap();
    assert_eq!(status_of(&first), 200);
    assert!(closed_within(&mut kept, patience), "an idle kept-alive connection is closed");

    // A body that stops arriving: 408.
    let mut slow_body = TcpStream::connect(addr).unwrap();
    slow_body
        .write_all(
            b"POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"qu",
        )
        .unwrap();
    slow_body.set_read_timeout(Some(patience)).unwrap();
    let mut head = [0u8; 12];
    slow_body.read_exact(&mut head).unwrap();
    assert_eq!(status_of(&head), 408, "{}", String::from_utf8_lossy(&head));

    // A head over max_header_bytes: 431.
    let big = format!("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "a".repeat(9000));
    let answer = common::raw(addr, big.as_bytes()).expect("an answer");
    assert_eq!(answer.status, 431);
    // And the server still answers.
    assert_eq!(get(addr, "/health").status, 200);
}

#[test]
fn a_head_sent_a_byte_at_a_time_is_cut_at_the_header_timeout_counted_from_the_accept() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock, &[]);
    configure(dir.path(), "serve:\n  header_read_timeout: 1\n");
    let server = start(dir.path(), None);
    let started = Instant::now();
    let mut trickle = TcpStream::connect(server.addr()).unwrap();
    trickle.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ").unwrap();
    trickle.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    // A byte every 100 ms: a timeout reset by each byte would never end it.
    let closed_after = loop {
        let wrote = trickle.write_all(b"a");
        let read = trickle.read(&mut [0u8; 64]);
        let waiting = matches!(&read, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut));
        if !(wrote.is_ok() && waiting) || started.elapsed() > Duration::from_secs(5) {
            break started.elapsed();
        }
    };
    let expected = Duration::from_millis(900)..Duration::from_millis(1500);
    assert!(expected.contains(&closed_after), "the trickled head was cut after {closed_after:?}");
}

#[test]
fn a_slow_body_above_the_minimum_rate_is_read_whole_and_one_below_it_is_cut() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock, &[]);
    // At least 50 bytes in each 0.5 s.
    configure(dir.path(), "serve:\n  body_read_timeout: 0.5\n  body_min_rate: 100\n");
    let server = start(dir.path(), None);
    let post = |body: &[u8], piece: usize, every: Duration| {
        let started = Instant::now();
        let mut stream = TcpStream::connect(server.addr()).unwrap();
        let head = format!(
            "POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        for chunk in body.chunks(piece) {
            std::thread::sleep(every);
            if stream.write_all(chunk).is_err() {
                break;
            }
        }
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer);
        (status_of(&answer), started.elapsed(), String::from_utf8_lossy(&answer).into_owned())
    };
    // 250 bytes a second for 1.4 s: longer than a window, never below the rate.
    let body = format!("{{\"query\": \"Who is Marley?\",{}\"mode\": \"basic\"}}", " ".repeat(300));
    let (status, took, answer) = post(body.as_bytes(), 25, Duration::from_millis(100));
    assert!(took > Duration::from_millis(1000), "{took:?}");
    assert_eq!(status, 503, "read whole, then refused for want of an index: {answer}");
    // 25 bytes a second: cut at the first window's end.
    let (status, took, answer) = post(body.as_bytes(), 5, Duration::from_millis(200));
    assert_eq!(status, 408, "{answer}");
    assert!(answer.contains("serve.body_min_rate"), "{answer}");
    assert!(took < Duration::from_secs(2), "{took:?}");
}

#[test]
fn cors_preflights_need_no_key_and_the_bearer_scheme_is_any_case() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock, &[]);
    let server = start(dir.path(), Some("secret-key-1"));
    let addr = server.addr();
    let preflight = [
        ("Origin", "http://ui.example"),
        ("Access-Control-Request-Method", "POST"),
        ("Access-Control-Request-Headers", "authorization, content-type"),
    ];
    let r = request(addr, "OPTIONS", "/query", &preflight, b"");
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(r.header("access-control-allow-headers"), Some("authorization, content-type"));
    assert!(r.header("access-control-allow-methods").is_some_and(|m| m.contains("DELETE")));

    let with_origin = |auth: &str| {
        request(addr, "GET", "/documents", &[("Origin", "http://ui.example"), ("Authorization", auth)], b"")
    };
    for auth in ["Bearer secret-key-1", "bearer secret-key-1", "BEARER secret-key-1"] {
        let r = with_origin(auth);
        assert_eq!(r.status, 200, "{auth}: {}", r.text());
        assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    }
    assert_eq!(with_origin("bearer wrong-key").status, 401);
    assert_eq!(with_origin("Basic secret-key-1").status, 401);
    drop(server);

    // A list of origins: only those are allowed, echoed with Vary.
    let path = dir.path().join("settings.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{text}serve:\n  cors_origins: [\"http://localhost:5173\"]\n")).unwrap();
    let server = start(dir.path(), None);
    let addr = server.addr();
    let ask = |origin: &str| {
        request(addr, "OPTIONS", "/health", &[("Origin", origin), ("Access-Control-Request-Method", "GET")], b"")
    };
    let r = ask("http://localhost:5173");
    assert_eq!((r.status, r.header("access-control-allow-origin")), (204, Some("http://localhost:5173")));
    assert_eq!(r.header("vary"), Some("Origin"));
    let r = ask("http://evil.example");
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.text().contains("serve.cors_origins"), "{}", r.text());
    let r = request(addr, "GET", "/health", &[("Origin", "http://evil.example")], b"");
    assert_eq!((r.status, r.header("access-control-allow-origin")), (200, None));
}

/// An indexed project whose chat model then answers 500 to everything.
fn failing_chat_project(mock: &MockServer, extra: &str) -> tempfile::TempDir {
    let dir = project(mock, &[("carol.txt", carol("Marley was dead", 3000))]);
    configure(dir.path(), extra);
    common::index(dir.path());
    mock.set_faults(vec![FaultRule::always(FaultKind::ServerError { status: 500 }).on(Endpoint::Chat)]);
    mock.reset_stats();
    dir
}

#[test]
fn a_failing_chat_model_fails_the_query_within_max_retry_time() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = failing_chat_project(&mock, "query:\n  max_retry_time: 2\n");
    let server = start(dir.path(), None);
    let addr = server.addr();
    let bound = Duration::from_secs(2 + 1);
    for mode in ["basic", "mix"] {
        let started = Instant::now();
        let r = common::post_json(addr, "/query", &json!({"query": "Who is Marley?", "mode": mode}));
        let took = started.elapsed();
        assert_eq!(r.status, 500, "{mode}: {}", r.text());
        assert!(r.text().contains("query.max_retry_time"), "{mode}: {}", r.text());
        assert!(took < bound, "{mode}: failed after {took:?}, beyond max_retry_time + 1 s");
    }
    assert!(mock.stats().chat_requests > 2, "the model was retried: {:?}", mock.stats());

    // A stream says so within the same bound: an error line, then the end.
    let started = Instant::now();
    let r = common::post_json(addr, "/query/stream", &json!({"query": "Who is Marley?", "mode": "basic"}));
    assert!(started.elapsed() < bound, "the stream ended after {:?}", started.elapsed());
    assert_eq!(r.status, 200);
    let lines = r.lines();
    let last = lines.last().expect("a line");
    assert!(last["error"].as_str().is_some_and(|e| e.contains("500")), "{lines:?}");
}

/// `body` posted to `path`, waiting at most 10 s for the answer: (status,
/// answer text, how long it took).
fn post_within_10_s(addr: SocketAddr, path: &str, body: &serde_json::Value) -> (u16, String, Duration) {
    let started = Instant::now();
    let body = body.to_string();
    let mut stream = TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(format!("{head}{body}").as_bytes()).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    (status_of(&answer), String::from_utf8_lossy(&answer).into_owned(), started.elapsed())
}

#[test]
fn a_hanging_chat_model_fails_the_query_at_its_one_deadline_with_504() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock, &[("carol.txt", carol("Marley was dead", 3000))]);
    // The per-call timeout (60 s) and retry budget (20 s) are the defaults:
    // the query's own deadline is what ends it.
    configure(dir.path(), "serve:\n  query_timeout: 1.5\n");
    common::index(dir.path());
    mock.set_faults(vec![FaultRule::always(FaultKind::Hang).on(Endpoint::Chat)]);
    let server = start(dir.path(), None);
    let bound = Duration::from_millis(1500)..Duration::from_millis(3000);
    let ask = json!({"query": "Who is Marley?", "mode": "basic"});
    let (status, answer, took) = post_within_10_s(server.addr(), "/query", &ask);
    assert_eq!(status, 504, "after {took:?}: {answer}");
    assert!(answer.contains("serve.query_timeout") && answer.contains("1.5 s"), "{answer}");
    assert!(bound.contains(&took), "the query failed after {took:?}");
    // A stream says so in its last line, as promptly.
    let (status, answer, took) = post_within_10_s(server.addr(), "/query/stream", &ask);
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains("\"error\"") && answer.contains("serve.query_timeout"), "{answer}");
    assert!(bound.contains(&took), "the stream ended after {took:?}");
}

/// Sends `body` to `path` and hangs up once the mock has had 3 chat
/// requests; then the chat requests that still arrive (at most the one in
/// flight when the client left).
fn requests_after_hanging_up(addr: SocketAddr, mock: &MockServer, path: &str) -> u64 {
    mock.reset_stats();
    let body = json!({"query": "Who is Marley?", "mode": "basic"}).to_string();
    let mut client = TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    client.write_all(format!("{head}{body}").as_bytes()).unwrap();
    assert!(mock.wait_for_requests(3, Duration::from_secs(30)), "the query reached the model");
    drop(client);
    // Let a request in flight land, then count what follows: without the
    // cancellation, the retries (every ~50 ms) would go on for a minute.
    std::thread::sleep(Duration::from_millis(500));
    let before = mock.stats().chat_requests;
    std::thread::sleep(Duration::from_millis(1000));
    mock.stats().chat_requests - before
}

#[test]
fn a_client_that_hangs_up_stops_its_query_s_model_calls() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = failing_chat_project(&mock, "query:\n  max_retry_time: 60\n");
    let server = start(dir.path(), None);
    for path in ["/query/stream", "/query"] {
        let later = requests_after_hanging_up(server.addr(), &mock, path);
        assert_eq!(later, 0, "{path}: {later} model requests after the client left");
    }
}

fn folder_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| if e.path().is_dir() { folder_bytes(&e.path()) } else { e.metadata().unwrap().len() })
        .sum()
}

#[test]
fn query_answers_are_cached_within_their_byte_budget() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock, &[("carol.txt", carol("Marley was dead", 3000))]);
    let budget = 16_000;
    configure(dir.path(), &format!("query:\n  cache_max_bytes: {budget}\n"));
    common::index(dir.path());
    let server = start(dir.path(), None);
    let folder = dir.path().join("cache").join(graphrag_engine::llm::QUERY_PARTITION);
    for i in 0..40 {
        let r = common::post_json(
            server.addr(),
            "/query",
            &json!({"query": format!("Question {i}: who is Marley?"), "mode": "basic"}),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(folder_bytes(&folder) <= budget, "after {} queries: {} bytes", i + 1, folder_bytes(&folder));
    }
    assert!(folder_bytes(&folder) > budget / 2, "answers are cached: {} bytes", folder_bytes(&folder));
    // The most recent answer is still there: asking again calls no model.
    mock.reset_stats();
    let r =
        common::post_json(server.addr(), "/query", &json!({"query": "Question 39: who is Marley?", "mode": "basic"}));
    assert_eq!(r.status, 200);
    assert_eq!(mock.stats().chat_requests, 0, "{:?}", mock.stats());
}

#[test]
fn conversation_histories_are_bounded_in_messages_and_characters() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock, &[]);
    configure(dir.path(), "serve:\n  max_history_messages: 2\n  max_history_chars: 20\n");
    let server = start(dir.path(), None);
    let turn = |role: &str, content: &str| json!({"role": role, "content": content});
    let ask = |history: Vec<serde_json::Value>| {
        let body = json!({"query": "Who is Marley?", "mode": "basic", "conversation_history": history});
        common::post_json(server.addr(), "/query", &body)
    };
    let r = ask(vec![turn("user", "a"), turn("assistant", "b"), turn("user", "c")]);
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(r.text().contains("3 earlier messages") && r.text().contains("max_history_messages"), "{}", r.text());
    let r = ask(vec![turn("user", &"x".repeat(21))]);
    assert_eq!(r.status, 413, "{}", r.text());
    assert!(r.text().contains("21 characters"), "{}", r.text());
    // Within both bounds the request goes on (to "no index yet").
    let r = ask(vec![turn("user", "hello"), turn("assistant", "hi")]);
    assert_eq!(r.status, 503, "{}", r.text());
    // The OpenAI API's messages pass the same check.
    let messages: Vec<_> = (0..5).map(|i| turn(if i % 2 == 0 { "user" } else { "assistant" }, "m")).collect();
    let r = common::post_json(server.addr(), "/v1/chat/completions", &json!({"messages": messages}));
    assert_eq!(r.status, 413, "{}", r.text());
}

/// One line of a kept-alive connection, its CRLF included.
fn line_on(stream: &mut TcpStream) -> Vec<u8> {
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while !line.ends_with(b"\r\n") {
        assert_eq!(stream.read(&mut byte).unwrap(), 1, "the connection ended inside a line: {line:?}");
        line.push(byte[0]);
    }
    line
}

/// One answer read from a kept-alive connection: its head (lower-cased) and
/// body, read by its Content-Length or its chunks.
fn answer_on(stream: &mut TcpStream) -> (String, Vec<u8>) {
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        head.extend(line_on(stream));
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let mut body = Vec::new();
    if head.contains("transfer-encoding: chunked") {
        loop {
            let size = usize::from_str_radix(String::from_utf8_lossy(&line_on(stream)).trim(), 16).unwrap();
            let mut chunk = vec![0u8; size + 2];
            stream.read_exact(&mut chunk).unwrap();
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        let length =
            head.lines().find_map(|l| l.strip_prefix("content-length:")).map_or(0, |v| v.trim().parse().unwrap());
        body.resize(length, 0);
        stream.read_exact(&mut body).unwrap();
    }
    (head, body)
}

#[test]
fn a_path_that_takes_no_body_keeps_the_connection_and_a_refusal_says_it_closes() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let root = project(&mock, &[("fezziwig.txt", carol("Old Fezziwig", 1500))]);
    let server = start(root.path(), None);
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    let host = server.addr();
    // Paths that take no body, sent one anyway (as clients do: `{}`), on one connection.
    for path in ["/documents/scan", "/documents/reprocess_failed", "/documents/cancel_pipeline"] {
        let post = format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}"
        );
        stream.write_all(post.as_bytes()).unwrap();
        let (head, _) = answer_on(&mut stream);
        assert!(head.starts_with("http/1.1 200"), "{path}: {head}");
        assert!(!head.contains("connection: close"), "{path}: {head}");
    }
    stream.write_all(format!("GET /health HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes()).unwrap();
    let (head, _) = answer_on(&mut stream);
    assert!(head.starts_with("http/1.1 200"), "the connection still serves: {head}");
    // A path not offered answers 501 without reading the body: it says the connection closes.
    let post = format!("POST /documents/clear_cache HTTP/1.1\r\nHost: {host}\r\nContent-Length: 2\r\n\r\n{{}}");
    stream.write_all(post.as_bytes()).unwrap();
    let (head, _) = answer_on(&mut stream);
    assert!(head.starts_with("http/1.1 501") && head.contains("connection: close"), "{head}");
}
