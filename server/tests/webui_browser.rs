//! The web UI in a real browser: headless Chromium (Debian's `chromium`)
//! loads /webui/, uploads a file, waits until it is processed (the pipeline
//! line never reads "step n/0"), searches entities (one request per pause
//! in typing), opens the graph explorer on an entity and on an unknown name
//! (a message, not "0 nodes"), and runs a query whose Markdown answer is
//! rendered; against a server without a chat model, the query panel says so
//! and shows the context; screenshots go to target/webui-screenshots/. Driven through the DevTools protocol over a
//! websocket (a minimal client below): it needs no driver binary and no
//! crate, and it can wait on the page's state instead of on time.
//!
//! Without chromium the test is skipped with a message, except under CI
//! (`CI` set), where it fails: .ci/run installs chromium.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;
use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_server::{ServeOptions, Server};
use serde_json::{json, Value};

fn chromium() -> Option<PathBuf> {
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
struct Cdp {
    stream: TcpStream,
    next_id: u64,
}

impl Cdp {
    fn connect(ws_url: &str) -> Cdp {
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
        Cdp { stream, next_id: 1 }
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

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send_frame(json!({"id": id, "method": method, "params": params}).to_string().as_bytes());
        loop {
            let v: Value = serde_json::from_slice(&self.read_message()).unwrap();
            if v["id"] == id {
                assert!(v["error"].is_null(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Evaluates a JavaScript expression in the page (promises awaited).
    fn eval(&mut self, expression: &str) -> Value {
        let r = self
            .call("Runtime.evaluate", json!({"expression": expression, "awaitPromise": true, "returnByValue": true}));
        assert!(r["exceptionDetails"].is_null(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// The text of the first element `selector` matches ("" for none).
    fn text(&mut self, selector: &str) -> String {
        let v = self.eval(&format!("document.querySelector({})?.textContent ?? ''", json!(selector)));
        v.as_str().unwrap_or_default().to_string()
    }

    fn wait_until(&mut self, what: &str, expression: &str) {
        wait_for(what, || (self.eval(expression) == json!(true)).then_some(()));
    }

    fn screenshot(&mut self, name: &str) {
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

struct Browser(Child);

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

#[test]
fn the_web_ui_uploads_explores_and_queries_in_chromium() {
    let Some(chromium) = chromium() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "chromium is not installed (CI installs it: `apt-get install -y chromium`)"
        );
        eprintln!("skipped: no chromium on PATH (`apt-get install -y chromium` to run this test)");
        return;
    };
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let project = project(&mock, &[("marley.txt", carol("MARLEY'S GHOST", 1500))]);
    index(project.path());
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(project.path()) }).unwrap();
    let addr = server.addr();
    let profile = tempfile::tempdir().unwrap();
    let upload = profile.path().join("fezziwig.txt");
    std::fs::write(&upload, carol("Old Fezziwig", 1500)).unwrap();
    let browser = Browser(
        Command::new(chromium)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--window-size=1280,900",
                "--remote-debugging-port=0",
                &format!("--user-data-dir={}", profile.path().display()),
                "about:blank",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromium starts"),
    );
    let port: u16 = wait_for("chromium's DevTools port", || {
        let text = std::fs::read_to_string(profile.path().join("DevToolsActivePort")).ok()?;
        text.lines().next()?.trim().parse().ok()
    });
    let mut page = Cdp::connect(&page_ws(port));
    page.call("Page.enable", json!({}));
    page.call("Page.navigate", json!({"url": format!("http://{addr}/webui/")}));
    page.wait_until("the documents list", "!!document.querySelector('#doc-table tbody tr[data-file=\"marley.txt\"]')");

    // Every pipeline line the page shows, to check none reads "step n/0".
    page.eval(
        "window.pipelineLines = []; new MutationObserver(() => pipelineLines.push(document.querySelector('#pipeline').textContent)).observe(document.querySelector('#pipeline'), {childList: true, characterData: true, subtree: true}); true",
    );

    // Upload through the file input and the Upload button.
    let doc = page.call("DOM.getDocument", json!({}));
    let input = page.call("DOM.querySelector", json!({"nodeId": doc["root"]["nodeId"], "selector": "#file-input"}));
    page.call("DOM.setFileInputFiles", json!({"nodeId": input["nodeId"], "files": [upload.display().to_string()]}));
    page.eval("document.querySelector('#upload-btn').click(); true");
    page.wait_until(
        "the upload to be processed",
        "document.querySelector('#doc-table tbody tr[data-file=\"fezziwig.txt\"]')?.dataset.status === 'processed'",
    );
    page.screenshot("1-documents");
    let lines = page.eval("pipelineLines");
    assert!(!lines.as_array().unwrap().is_empty());
    assert!(lines.as_array().unwrap().iter().all(|l| !l.as_str().unwrap().contains("/0 ")), "{lines}");

    // Entity search: typing a name key by key asks the server once, after the pause.
    page.eval(
        "window.labelRequests = 0; const realFetch = window.fetch; window.fetch = (url, opts) => { if (String(url).includes('/graph/label/list')) labelRequests++; return realFetch(url, opts); }; document.querySelector('#tab-graph').click(); document.querySelector('#entity-search').focus(); true",
    );
    for key in ["f", "e", "z", "z", "i"] {
        page.call("Input.insertText", json!({ "text": key }));
    }
    page.wait_until("the suggestions", "document.querySelectorAll('#entity-list option').length > 0");
    assert_eq!(page.eval("labelRequests"), json!(1));

    // The graph explorer on an entity of the new document.
    let labels = get(addr, "/graph/label/list?q=fezziwig").json();
    let entity = labels[0].as_str().expect("an entity of the uploaded document").to_string();
    page.eval(&format!(
        "document.querySelector('#tab-graph').click(); document.querySelector('#entity-search').value = {}; document.querySelector('#show-graph').click(); true",
        json!(entity)
    ));
    page.wait_until("the node details", "!!document.querySelector('#node-details h3')");
    let shown = page.eval("document.querySelector('#node-details h3').textContent");
    assert_eq!(shown, json!(entity));
    assert!(page.eval("document.querySelectorAll('#node-details .unit').length").as_u64().unwrap() >= 1);
    page.screenshot("2-graph");

    // An unknown name: a message saying so, not an empty canvas.
    page.eval(
        "document.querySelector('#entity-search').value = 'Nobody Of That Name'; document.querySelector('#show-graph').click(); true",
    );
    page.wait_until(
        "the empty-graph message",
        "document.querySelector('#graph-info').textContent.includes('No entity named')",
    );
    assert!(page.text("#node-details").contains("Nobody Of That Name"));
    page.screenshot("2b-unknown-entity");

    // A streamed query with its context records.
    page.eval(
        "document.querySelector('#tab-query').click(); document.querySelector('#query-text').value = 'Who is Fezziwig?'; document.querySelector('#query-method').value = 'basic'; document.querySelector('#query-run').click(); true",
    );
    page.wait_until("the answer", "document.querySelector('#query-answer').dataset.done === '1'");
    let answer = page.eval("document.querySelector('#query-answer').textContent");
    assert!(!answer.as_str().unwrap().is_empty() && !answer.as_str().unwrap().starts_with("Error"), "{answer}");
    // The mock model answers in Markdown: rendered as HTML, no `##` left.
    assert!(page.eval("document.querySelectorAll('#query-answer h2').length").as_u64().unwrap() >= 1, "{answer}");
    assert!(!answer.as_str().unwrap().contains("## "), "{answer}");
    assert!(page
        .eval("document.querySelector('#query-references').textContent")
        .as_str()
        .unwrap()
        .contains("fezziwig.txt"));
    assert!(page.eval("document.querySelectorAll('#query-records table').length").as_u64().unwrap() >= 1);
    page.screenshot("3-query");

    // Context only: shown as the retrieved context, labelled, not rendered as an answer.
    page.eval(
        "document.querySelector('#query-context-only').checked = true; document.querySelector('#query-run').click(); true",
    );
    page.wait_until("the context", "document.querySelector('#query-answer').dataset.done === '1'");
    assert!(page.text("#query-answer .notice").contains("Retrieved context"));
    assert!(page.text("#query-answer pre.context").contains("Fezziwig"));

    // A server without a usable chat model: the query panel says so and
    // asks for the context, which it shows.
    let bare = project_without_chat_model(&mock);
    let bare_server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(bare.path()) }).unwrap();
    page.call("Page.navigate", json!({"url": format!("http://{}/webui/", bare_server.addr())}));
    page.wait_until(
        "the no-model notice",
        "!!document.querySelector('#query-notice')?.textContent.includes('no api_key')",
    );
    assert_eq!(page.eval("document.querySelector('#query-context-only').checked"), json!(true));
    page.eval(
        "document.querySelector('#tab-query').click(); document.querySelector('#query-text').value = 'Who is Fezziwig?'; document.querySelector('#query-method').value = 'basic'; document.querySelector('#query-run').click(); true",
    );
    page.wait_until("the context", "document.querySelector('#query-answer').dataset.done === '1'");
    assert!(page.text("#query-answer pre.context").contains("Fezziwig"));
    page.screenshot("4-no-chat-model");
    drop(browser);
}
