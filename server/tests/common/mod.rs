//! Helpers of the server's tests: a project on the mock LLM, and a small
//! HTTP/1.1 client over a TCP stream (so that malformed requests can be sent
//! as they are).
#![allow(dead_code)]

pub mod browser;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use graphrag_mock_llm::MockServer;
use graphrag_project::{IndexOptions, OpenOptions, Project, RunSettings};
use serde_json::Value;

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The NDJSON lines of a streamed body.
    pub fn lines(&self) -> Vec<Value> {
        self.text().lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
    }
}

/// Sends raw bytes and reads the whole answer (the connection is closed).
pub fn raw(addr: SocketAddr, request: &[u8]) -> Option<Response> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let _ = s.write_all(request);
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    // Until the body is complete (a server may keep the connection open).
    while !complete(&buf) {
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    parse(&buf)
}

fn complete(buf: &[u8]) -> bool {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { return false };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let body = &buf[end + 4..];
    if let Some(len) = head.lines().find_map(|l| l.strip_prefix("content-length:")) {
        return body.len() >= len.trim().parse::<usize>().unwrap_or(0);
    }
    head.contains("transfer-encoding: chunked") && body.ends_with(b"0\r\n\r\n")
}

fn parse(buf: &[u8]) -> Option<Response> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let mut lines = head.lines();
    let status = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':').map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))).collect();
    let mut body = buf[end + 4..].to_vec();
    let chunked = headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        while let Some(nl) = rest.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(String::from_utf8_lossy(&rest[..nl]).trim(), 16).unwrap_or(0);
            if size == 0 {
                break;
            }
            out.extend_from_slice(&rest[nl + 2..nl + 2 + size]);
            rest = &rest[nl + 2 + size + 2..];
        }
        body = out;
    }
    Some(Response { status, headers, body })
}

pub fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    raw(addr, &bytes).unwrap_or_else(|| panic!("{method} {path}: no HTTP answer"))
}

pub fn get(addr: SocketAddr, path: &str) -> Response {
    request(addr, "GET", path, &[], b"")
}

pub fn post_json(addr: SocketAddr, path: &str, body: &Value) -> Response {
    request(addr, "POST", path, &[("Content-Type", "application/json")], body.to_string().as_bytes())
}

pub fn delete_json(addr: SocketAddr, path: &str, body: &Value) -> Response {
    request(addr, "DELETE", path, &[("Content-Type", "application/json")], body.to_string().as_bytes())
}

/// A multipart body with one file part, and its Content-Type.
pub fn multipart(filename: &str, data: &[u8]) -> (String, Vec<u8>) {
    let boundary = "graphragTestBoundary7MA4YWxk";
    let mut body =
        format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\nContent-Type: text/plain\r\n\r\n")
            .into_bytes();
    body.extend_from_slice(data);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// `len` bytes of A Christmas Carol from the first occurrence of `from`.
pub fn carol(from: &str, len: usize) -> String {
    let full = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/christmas-carol/a_christmas_carol.txt"),
    )
    .unwrap();
    let start = full.find(from).unwrap();
    let mut end = (start + len).min(full.len());
    while !full.is_char_boundary(end) {
        end -= 1;
    }
    full[start..end].to_string()
}

/// A project whose models are the mock server, with these documents, not indexed.
pub fn project(mock: &MockServer, docs: &[(&str, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    graphrag_project::init(dir.path(), &graphrag_project::InitOptions::default()).unwrap();
    for (name, text) in docs {
        std::fs::write(dir.path().join("input").join(name), text).unwrap();
    }
    let model = |name: &str| {
        format!(
            "    model: {name}\n    api_base: {}\n    api_key: sk-test\n    retry_base_delay: 0.001\n    max_retry_wait: 0.05\n    concurrent_requests: 4\n",
            mock.base_url()
        )
    };
    let settings = format!(
        "completion_models:\n  default_completion_model:\n{}embedding_models:\n  default_embedding_model:\n{}chunking:\n  size: 300\n  overlap: 30\n",
        model("mock-gpt"),
        model("mock-embed")
    );
    std::fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    dir
}

/// Indexes the project through the library.
pub fn index(root: &Path) {
    let project = Project::open(root, &OpenOptions::default()).unwrap();
    let opts = IndexOptions { resume: false, run: RunSettings { skip_validation: true, ..RunSettings::default() } };
    graphrag_project::index(project, &opts).unwrap_or_else(|e| panic!("{e}"));
}

/// Polls `check` until it gives a value (at most 120 s: a hung update fails the test).
pub fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    wait_or_explain(&mut (), what, |_| check(), |_| String::new())
}

/// [`wait_for`] on `state`, whose failure adds what `explain` tells of the
/// state it gave up in (for waits on what another process does).
pub fn wait_or_explain<S, T>(
    state: &mut S,
    what: &str,
    mut check: impl FnMut(&mut S) -> Option<T>,
    explain: impl FnOnce(&mut S) -> String,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(v) = check(state) {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("timed out waiting for {what}\n{}", explain(state));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Waits until the server has finished `runs` update runs (at most 120 s),
/// and checks that the last one did not fail.
pub fn idle_after(addr: SocketAddr, runs: u64) {
    wait_for("the update run", || {
        let p = get(addr, "/documents/pipeline_status").json();
        (p["busy"] == false && p["runs"].as_u64().unwrap() >= runs).then_some(())
    });
    let p = get(addr, "/documents/pipeline_status").json();
    assert!(p["last_error"].is_null(), "the update failed: {p}");
}

/// A fast index (no chat model needed) of a project whose completion model
/// has neither a key nor a base; embeddings from the mock server.
pub fn project_without_chat_model(mock: &MockServer) -> tempfile::TempDir {
    let dir = project(mock, &[("fezziwig.txt", carol("Old Fezziwig", 1500))]);
    let embed = format!(
        "    model: mock-embed\n    api_base: {}\n    api_key: sk-test\n    retry_base_delay: 0.001\n    max_retry_wait: 0.05\n",
        mock.base_url()
    );
    let settings = format!(
        "completion_models:\n  default_completion_model:\n    model: gpt-4.1-mini\nembedding_models:\n  default_embedding_model:\n{embed}chunking:\n  size: 300\n  overlap: 30\n"
    );
    std::fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    let project = Project::open(dir.path(), &OpenOptions { method: "fast".into(), no_cache: false }).unwrap();
    let opts = IndexOptions { resume: false, run: RunSettings { skip_validation: true, ..RunSettings::default() } };
    graphrag_project::index(project, &opts).unwrap_or_else(|e| panic!("{e}"));
    dir
}
