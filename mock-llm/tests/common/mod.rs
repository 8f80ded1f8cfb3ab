//! A tiny blocking HTTP/1.1 client over std::net::TcpStream (Connection: close),
//! and prompt rendering helpers for the tests.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

/// "http://127.0.0.1:PORT/v1" → "127.0.0.1:PORT"
pub fn host_of(base_url: &str) -> String {
    let rest = base_url.strip_prefix("http://").expect("http url");
    rest.split('/').next().unwrap().to_string()
}

/// Sends one request; Err when the server closes without a (complete) response.
pub fn request(
    base_url: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
    extra_headers: &[(&str, &str)],
) -> std::io::Result<HttpResponse> {
    let host = host_of(base_url);
    assert!(host.starts_with("127.0.0.1:"), "tests talk to 127.0.0.1 only");
    let mut s = TcpStream::connect(&host)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let body = body.unwrap_or("");
    let mut req =
        format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    if !body.is_empty() {
        req.push_str("Content-Type: application/json\r\n");
    }
    for (k, v) in extra_headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    parse_response(&raw)
}

fn eof(msg: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, msg.to_string())
}

fn parse_response(raw: &[u8]) -> std::io::Result<HttpResponse> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| eof("no response head"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| eof("bad head"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status: u16 =
        status_line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| eof("bad status line"))?;
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_string(), v.trim().to_string())).collect();
    let rest = &raw[end + 4..];
    let chunked =
        headers.iter().any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        let mut out = Vec::new();
        let mut pos = 0;
        loop {
            let nl = rest[pos..].windows(2).position(|w| w == b"\r\n").ok_or_else(|| eof("bad chunk"))?;
            let size_s = std::str::from_utf8(&rest[pos..pos + nl]).unwrap_or("");
            let size = usize::from_str_radix(size_s.trim(), 16).map_err(|_| eof("bad chunk size"))?;
            pos += nl + 2;
            if size == 0 {
                break;
            }
            out.extend_from_slice(&rest[pos..pos + size]);
            pos += size + 2;
        }
        out
    } else {
        rest.to_vec()
    };
    Ok(HttpResponse { status, headers, body })
}

pub fn post_json(base_url: &str, path: &str, body: &serde_json::Value) -> HttpResponse {
    request(base_url, "POST", path, Some(&body.to_string()), &[]).expect("response")
}

pub fn get(base_url: &str, path: &str) -> HttpResponse {
    request(base_url, "GET", path, None, &[]).expect("response")
}

/// A chat request with one user message.
pub fn chat_body(content: &str) -> serde_json::Value {
    serde_json::json!({
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": content}],
        "temperature": 0.0,
    })
}

pub fn chat_content(resp: &HttpResponse) -> String {
    resp.json()["choices"][0]["message"]["content"].as_str().expect("content").to_string()
}

/// Renders a prompt template of the project (`{{ name }}` placeholders).
pub fn render(name: &str, vars: &[(&str, &str)]) -> String {
    let path = format!("{}/../prompts/{name}.txt", env!("CARGO_MANIFEST_DIR"));
    let mut s = std::fs::read_to_string(path).expect("prompt template");
    for (k, v) in vars {
        s = s.replace(&format!("{{{{ {k} }}}}"), v);
    }
    s
}

pub const DELIMS: [(&str, &str); 3] =
    [("tuple_delimiter", "<|>"), ("record_delimiter", "##"), ("completion_delimiter", "<|COMPLETE|>")];

pub const CHUNK: &str = "The Halvard Port Authority said on Monday that its director, Ines Okafor, \
will lead the expansion of the northern container terminal in Brennick. The work is funded by the \
Coastal Development Bank, which approved a loan last month. Okafor expects the new terminal to \
double the port's capacity by 2028.";

pub fn extraction_prompt() -> String {
    let mut vars = DELIMS.to_vec();
    vars.push(("entity_types", "ORGANIZATION,PERSON,GEO"));
    vars.push(("input_text", CHUNK));
    render("extract_graph", &vars)
}
