//! Malformed and hostile requests: each gets a 4xx with a JSON message, the
//! server stays up, and nothing is written outside the input folder.

mod common;

use std::collections::BTreeSet;
use std::path::Path;

use common::*;
use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_server::{ServeOptions, Server};

const KEY: &str = "test-key-123";

/// Every file under `dir`, relative.
fn tree(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.insert(p.strip_prefix(dir).unwrap().display().to_string());
        }
    }
    out
}

#[test]
fn malformed_requests_get_4xx_json_and_change_nothing() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let project = project(&mock, &[]);
    let root = project.path();
    let before = tree(root);
    let opts = ServeOptions { port: 0, api_key: Some(KEY.into()), max_upload_bytes: 4096, ..ServeOptions::new(root) };
    let server = Server::start(opts).unwrap();
    let addr = server.addr();
    let auth = ("X-API-Key", KEY);
    let json_ct = ("Content-Type", "application/json");
    let upload = |name: &str, data: &[u8]| {
        let (ct, body) = multipart(name, data);
        request(addr, "POST", "/documents/upload", &[auth, ("Content-Type", &ct)], &body)
    };
    let post = |path: &str, body: &str| request(addr, "POST", path, &[auth, json_ct], body.as_bytes());
    let huge_query = format!("{{\"query\": \"{}\"}}", "a".repeat(200_000));
    let huge_body = vec![b'x'; 5 << 20];
    let (multi_ct, _) = multipart("a.txt", b"x");

    let cases: Vec<(&str, Response, u16)> = vec![
        ("no key", get(addr, "/documents"), 401),
        ("wrong key", request(addr, "GET", "/documents", &[("X-API-Key", "nope")], b""), 401),
        ("wrong bearer", request(addr, "GET", "/api/tags", &[("Authorization", "Bearer nope")], b""), 401),
        ("key as basic auth", request(addr, "GET", "/api/tags", &[("Authorization", "Basic dGVzdA==")], b""), 401),
        ("no key on /query", post_json(addr, "/query", &serde_json::json!({"query": "x"})), 401),
        ("bad JSON", post("/query", "{\"query\": "), 422),
        ("empty body", post("/query", ""), 422),
        ("query of the wrong type", post("/query", "{\"query\": 5}"), 422),
        ("query missing", post("/query", "{\"mode\": \"local\"}"), 422),
        ("unknown mode", post("/query", "{\"query\": \"x\", \"mode\": \"nonsense\"}"), 422),
        ("bypass mode", post("/query", "{\"query\": \"x\", \"mode\": \"bypass\"}"), 422),
        ("only_need_prompt", post("/query", "{\"query\": \"x\", \"only_need_prompt\": true}"), 422),
        ("empty query", post("/query", "{\"query\": \"   \"}"), 422),
        ("history of the wrong type", post("/query", "{\"query\": \"x\", \"conversation_history\": \"hi\"}"), 422),
        ("query over the length limit", post("/query", &huge_query), 422),
        ("body over the JSON limit", request(addr, "POST", "/query", &[auth, json_ct], &huge_body), 413),
        ("unknown path", request(addr, "GET", "/nothing/here", &[auth], b""), 404),
        ("GET on a POST path", request(addr, "GET", "/query", &[auth], b""), 405),
        ("PUT on /documents", request(addr, "PUT", "/documents", &[auth], b""), 405),
        ("unknown HTTP method", request(addr, "BREW", "/query", &[auth], b""), 405),
        ("upload that is not multipart", request(addr, "POST", "/documents/upload", &[auth, json_ct], b"{}"), 415),
        ("multipart without boundary", request(addr, "POST", "/documents/upload", &[auth, ("Content-Type", "multipart/form-data")], b"--x\r\n"), 422),
        ("truncated multipart", request(addr, "POST", "/documents/upload", &[auth, ("Content-Type", &multi_ct)], b"--graphragTestBoundary7MA4YWxk\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nno end"), 422),
        ("path traversal upload", upload("../../evil.txt", b"x"), 400),
        ("absolute path upload", upload("/tmp/evil.txt", b"x"), 400),
        ("backslash traversal upload", upload("..\\evil.txt", b"x"), 400),
        ("hidden file upload", upload(".env", b"GRAPHRAG_API_KEY=x"), 400),
        ("unsupported type", upload("evil.exe", b"MZ"), 415),
        ("empty file", upload("empty.txt", b""), 400),
        ("white space only", upload("blank.TXT", b" \n\t \r\n"), 422),
        ("upload over the size limit", upload("big.txt", &vec![b'a'; 10_000]), 413),
        ("text missing", post("/documents/text", "{\"file_source\": \"a\"}"), 422),
        ("text with a traversal source", post("/documents/text", "{\"text\": \"x\", \"file_source\": \"../../evil\"}"), 400),
        ("texts not a list", post("/documents/texts", "{\"texts\": \"x\"}"), 422),
        ("texts and sources of other lengths", post("/documents/texts", "{\"texts\": [\"a\", \"b\"], \"file_sources\": [\"a\"]}"), 422),
        ("unknown field", post("/documents/text", "{\"text\": \"x\", \"evil\": 1}"), 422),
        ("delete ids of the wrong type", request(addr, "DELETE", "/documents/delete_document", &[auth, json_ct], b"{\"doc_ids\": \"nope\"}"), 422),
        ("page size 0", post("/documents/paginated", "{\"page_size\": 0}"), 422),
        ("unknown status filter", post("/documents/paginated", "{\"status_filter\": \"done\"}"), 422),
        ("graph without label", request(addr, "GET", "/graphs", &[auth], b""), 422),
        ("graph depth not a number", request(addr, "GET", "/graphs?label=x&max_depth=abc", &[auth], b""), 422),
        ("graph nodes over the limit", request(addr, "GET", "/graphs?label=x&max_nodes=99999999", &[auth], b""), 422),
        ("chat without messages", post("/api/chat", "{\"model\": \"x\"}"), 422),
        ("chat without a user message", post("/api/chat", "{\"messages\": [{\"role\": \"system\", \"content\": \"x\"}]}"), 422),
        ("generate without prompt", post("/api/generate", "{\"model\": \"x\"}"), 422),
        ("OpenAI chat with bad JSON", post("/v1/chat/completions", "[1, 2"), 422),
    ];
    assert!(cases.len() >= 30);
    for (what, r, status) in &cases {
        assert_eq!(r.status, *status, "{what}: {}", r.text());
        assert_eq!(r.header("content-type"), Some("application/json"), "{what}");
        // LightRAG's `{"detail"}`; the chat paths answer in their API's shape.
        let body = r.json();
        let detail = [&body["detail"], &body["error"], &body["error"]["message"]]
            .into_iter()
            .find_map(|v| v.as_str().map(str::to_string));
        assert!(detail.is_some_and(|d| !d.is_empty() && !d.contains(KEY)), "{what}: {}", r.text());
    }
    // Not HTTP at all: the connection is refused an answer or gets a 400.
    if let Some(r) = raw(addr, b"GARBAGE\r\n\r\n") {
        assert_eq!(r.status, 400);
    }
    // Still up, and nothing was written: not outside the project, not in it.
    assert_eq!(get(addr, "/health").status, 200);
    assert_eq!(request(addr, "GET", "/api/tags", &[("Authorization", &format!("Bearer {KEY}"))], b"").status, 200);
    drop(server);
    let mut after = tree(root);
    for log in ["logs", "output", "output/.lock"] {
        after.remove(log);
    }
    assert_eq!(after, before, "files written in the project");
    assert!(!root.parent().unwrap().join("evil.txt").exists() && !Path::new("/tmp/evil.txt").exists());
}
