//! Headless Chromium for the web UI tests, driven through the DevTools
//! protocol over a websocket (a minimal client: no driver binary, no
//! crate); it waits on the page's state instead of on time. The browser's
//! events (console messages, network responses) are kept for the test to
//! check.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use super::{get, wait_for};

pub fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// A DevTools protocol session on one page, over a websocket.
pub struct Cdp {
    stream: TcpStream,
    next_id: u64,
    /// Events received so far (messages without an id), in order.
    pub events: Vec<Value>,
}

impl Cdp {
    pub fn connect(ws_url: &str) -> Cdp {
        let rest = ws_url.strip_prefix("ws://").expect("a ws:// URL");
        let (host, path) = rest.split_once('/').unwrap();
        let mut stream = TcpStream::connect(host).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let handshake = format!(
            "GET /{path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        );
        stream.write_all(handshake.as_bytes()).unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8];
        while !head.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        assert!(head.starts_with(b"HTTP/1.1 101"), "{}", String::from_utf8_lossy(&head));
        Cdp { stream, next_id: 1, events: Vec::new() }
    }

    fn send_frame(&mut self, payload: &[u8]) {
        let mut frame = vec![0x81u8];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n < 65536 => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        let mask = [0x12u8, 0x34, 0x56, 0x78];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.stream.write_all(&frame).unwrap();
    }

    /// One whole message (continuation frames joined).
    fn read_message(&mut self) -> Vec<u8> {
        let mut message = Vec::new();
        loop {
            let mut h = [0u8; 2];
            self.stream.read_exact(&mut h).unwrap();
            let len = match h[1] & 0x7f {
                126 => {
                    let mut b = [0u8; 2];
                    self.stream.read_exact(&mut b).unwrap();
                    u16::from_be_bytes(b) as usize
                }
                127 => {
                    let mut b = [0u8; 8];
                    self.stream.read_exact(&mut b).unwrap();
                    u64::from_be_bytes(b) as usize
                }
                n => n as usize,
            };
            let mut payload = vec![0u8; len];
            self.stream.read_exact(&mut payload).unwrap();
            message.extend_from_slice(&payload);
            if h[0] & 0x80 != 0 {
                return message;
            }
        }
    }

    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send_frame(json!({"id": id, "method": method, "params": params}).to_string().as_bytes());
        loop {
            let v: Value = serde_json::from_slice(&self.read_message()).unwrap();
            if v["id"] == id {
                assert!(v["error"].is_null(), "{method}: {v}");
                return v["result"].clone();
            }
            if v["id"].is_null() {
                self.events.push(v);
            }
        }
    }

    /// Evaluates a JavaScript expression in the page (promises awaited).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self
            .call("Runtime.evaluate", json!({"expression": expression, "awaitPromise": true, "returnByValue": true}));
        assert!(r["exceptionDetails"].is_null(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// The text of the first element `selector` matches ("" for none).
    pub fn text(&mut self, selector: &str) -> String {
        let v = self.eval(&format!("document.querySelector({})?.textContent ?? ''", json!(selector)));
        v.as_str().unwrap_or_default().to_string()
    }

    pub fn wait_until(&mut self, what: &str, expression: &str) {
        wait_for(what, || (self.eval(expression) == json!(true)).then_some(()));
    }

    pub fn screenshot(&mut self, name: &str) {
        let r = self.call("Page.captureScreenshot", json!({"format": "png"}));
        let png = base64_decode(r["data"].as_str().unwrap());
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/webui-screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let clean: Vec<u8> = text.bytes().filter(|c| !matches!(c, b'=' | b'\n' | b'\r')).collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= (value(*c) as u32) << (18 - 6 * i);
        }
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

pub struct Browser(Child);

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The page target's websocket URL of a browser on `port`.
fn page_ws(port: u16) -> String {
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let list = get(addr, "/json/list").json();
    list.as_array().unwrap().iter().find(|t| t["type"] == "page").expect("a page")["webSocketDebuggerUrl"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Starts headless Chromium with a fresh profile in `profile` and opens a
/// DevTools session on its page.
pub fn launch(chromium: &Path, profile: &Path) -> (Browser, Cdp) {
    let browser = Browser(
        Command::new(chromium)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--window-size=1280,900",
                "--remote-debugging-port=0",
                &format!("--user-data-dir={}", profile.display()),
                "about:blank",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium starts"),
    );
    let port: u16 = wait_for("chromium's DevTools port", || {
        let text = std::fs::read_to_string(profile.join("DevToolsActivePort")).ok()?;
        text.lines().next()?.trim().parse().ok()
    });
    let page = Cdp::connect(&page_ws(port));
    (browser, page)
}

/// Chromium, or `None` with a message (a failure under CI, which installs it).
pub fn chromium_or_skip() -> Option<PathBuf> {
    let found = chromium();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is not installed (CI installs it: `apt-get install -y chromium`)"
        );
        eprintln!("skipped: no chromium on PATH (`apt-get install -y chromium` to run this test)");
    }
    found
}
