//! The server end to end against the mock LLM: upload → pending/processing
//! → processed → answers from the new document; delete → gone from answers
//! and tables; LightRAG's query and graph paths; Ollama's and OpenAI's chat
//! APIs as their clients read them.

mod common;

use std::collections::HashSet;
use std::net::SocketAddr;

use common::*;
use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_server::{ServeOptions, Server};
use serde_json::{json, Value};

fn documents(addr: SocketAddr) -> Vec<Value> {
    let r = get(addr, "/documents");
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    ["pending", "processing", "processed", "failed"]
        .iter()
        .flat_map(|s| v["statuses"][s].as_array().cloned().unwrap_or_default())
        .collect()
}

fn status_of(addr: SocketAddr, file: &str) -> Option<String> {
    documents(addr).into_iter().find(|d| d["file_path"] == file).map(|d| d["status"].as_str().unwrap().to_string())
}

fn ask(addr: SocketAddr, mode: &str, question: &str, context_only: bool) -> Value {
    let r = post_json(addr, "/query", &json!({"query": question, "mode": mode, "only_need_context": context_only}));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn files_of(answer: &Value) -> HashSet<String> {
    answer["references"].as_array().unwrap().iter().map(|r| r["file_path"].as_str().unwrap().to_string()).collect()
}

#[test]
fn upload_query_delete_and_chat_end_to_end() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let project = project(&mock, &[("marley.txt", carol("MARLEY'S GHOST", 1500))]);
    let root = project.path();
    index(root);
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(root) }).unwrap();
    let addr = server.addr();

    let health = get(addr, "/health").json();
    assert_eq!(health["status"], "healthy");
    assert_eq!(health["index"]["loaded"], true);
    assert!(!health.to_string().contains("sk-test"), "a secret in /health: {health}");

    // A query answers from the index, with its references.
    let before = ask(addr, "basic", "Who is Marley?", false);
    assert!(!before["response"].as_str().unwrap().is_empty());
    assert_eq!(files_of(&before), HashSet::from(["marley.txt".to_string()]));

    // Upload a document: listed as not processed yet, then processed.
    let fezziwig = carol("Old Fezziwig", 1500);
    let (ct, body) = multipart("fezziwig.txt", fezziwig.as_bytes());
    let r = request(addr, "POST", "/documents/upload", &[("Content-Type", &ct)], &body);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["status"], "success");
    let first = status_of(addr, "fezziwig.txt").expect("the upload is listed");
    assert!(first == "pending" || first == "processing", "{first}");
    // The same name again is a conflict (LightRAG 1.5.7), whatever the bytes.
    let r = request(addr, "POST", "/documents/upload", &[("Content-Type", &ct)], &body);
    assert_eq!(r.status, 409, "{}", r.text());
    let (ct2, other) = multipart("fezziwig.txt", b"other text");
    assert_eq!(request(addr, "POST", "/documents/upload", &[("Content-Type", &ct2)], &other).status, 409);
    idle_after(addr, 1);
    assert_eq!(status_of(addr, "fezziwig.txt").as_deref(), Some("processed"));
    assert_eq!(std::fs::read_to_string(root.join("input/fezziwig.txt")).unwrap(), fezziwig);

    // The new document answers (the server reloaded the published index).
    let context = ask(addr, "basic", "Who is Fezziwig?", true);
    assert!(context["response"].as_str().unwrap().contains("Fezziwig"), "{context}");
    assert!(files_of(&context).contains("fezziwig.txt"), "{context}");
    assert_eq!(context["llm_generated"], false);

    // The graph-walk method of the retrieval issue is served too.
    assert!(files_of(&ask(addr, "ppr", "Who is Fezziwig?", true)).contains("fezziwig.txt"));

    // Streamed query: NDJSON response pieces, then the references.
    let r = post_json(addr, "/query/stream", &json!({"query": "Who is Fezziwig?", "mode": "naive"}));
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/x-ndjson"));
    let lines = r.lines();
    let answer: String = lines.iter().filter_map(|l| l["response"].as_str()).collect();
    assert!(!answer.is_empty(), "{lines:?}");
    assert!(lines.last().unwrap()["references"].is_array(), "{lines:?}");

    // Graph paths.
    let labels = get(addr, "/graph/label/list").json();
    let labels: Vec<&str> = labels.as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert!(!labels.is_empty());
    let g = get(addr, &format!("/graphs?label={}&max_depth=2&max_nodes=50", labels[0].replace(' ', "%20"))).json();
    assert_eq!(g["nodes"][0]["id"], labels[0]);
    assert!(g["nodes"].as_array().unwrap().len() <= 50);
    for e in g["edges"].as_array().unwrap() {
        assert!(g["nodes"].as_array().unwrap().iter().any(|n| n["id"] == e["source"]));
    }
    let detail = get(addr, &format!("/graph/entity/detail?name={}", labels[0].replace(' ', "%20"))).json();
    assert!(!detail["text_units"].as_array().unwrap().is_empty(), "{detail}");

    // Ollama: tags, version, chat (not streamed and streamed), generate.
    let tags = get(addr, "/api/tags").json();
    assert_eq!(tags["models"][0]["name"], "graphrag-rs:latest");
    assert!(tags["models"][0]["details"]["family"].is_string());
    assert!(get(addr, "/api/version").json()["version"].is_string());
    let chat = post_json(
        addr,
        "/api/chat",
        &json!({"model": "llama3.1:8b", "stream": false,
                "messages": [{"role": "user", "content": "/local Who is Fezziwig?"}]}),
    )
    .json();
    assert_eq!(chat["model"], "llama3.1:8b");
    assert_eq!(chat["message"]["role"], "assistant");
    assert!(!chat["message"]["content"].as_str().unwrap().is_empty());
    assert_eq!(chat["done"], true);
    assert!(chat["created_at"].is_string() && chat["total_duration"].is_u64() && chat["eval_count"].is_u64());
    let r = post_json(
        addr,
        "/api/chat",
        &json!({"model": "graphrag-rs:latest", "messages": [{"role": "user", "content": "Who is Fezziwig?"}]}),
    );
    let lines = r.lines();
    assert!(lines.len() >= 2, "{lines:?}");
    assert!(lines[..lines.len() - 1].iter().all(|l| l["done"] == false && l["message"]["content"].is_string()));
    assert_eq!(lines.last().unwrap()["done"], true);
    let gen =
        post_json(addr, "/api/generate", &json!({"model": "x", "prompt": "/naivecontext Fezziwig", "stream": false}))
            .json();
    assert!(gen["response"].as_str().unwrap().contains("Fezziwig"), "{gen}");

    // OpenAI chat completions, whole and streamed (SSE).
    let c = post_json(
        addr,
        "/v1/chat/completions",
        &json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "Who is Fezziwig?"}]}),
    )
    .json();
    assert_eq!(c["object"], "chat.completion");
    assert!(!c["choices"][0]["message"]["content"].as_str().unwrap().is_empty());
    let r = post_json(
        addr,
        "/v1/chat/completions",
        &json!({"stream": true, "messages": [{"role": "user", "content": "Who is Fezziwig?"}]}),
    );
    let text = r.text();
    assert!(text.starts_with("data: ") && text.trim_end().ends_with("data: [DONE]"), "{text}");

    // Delete: gone from the tables and from answers.
    let id = documents(addr).into_iter().find(|d| d["file_path"] == "fezziwig.txt").unwrap()["id"].clone();
    let r = delete_json(addr, "/documents/delete_document", &json!({"doc_ids": [id]}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["status"], "deletion_started");
    assert!(!root.join("input/fezziwig.txt").exists());
    idle_after(addr, 2);
    assert_eq!(status_of(addr, "fezziwig.txt"), None);
    let after = ask(addr, "basic", "Who is Fezziwig?", true);
    assert_eq!(files_of(&after), HashSet::from(["marley.txt".to_string()]), "{after}");
    let docs = std::fs::read(root.join("output/documents.parquet")).unwrap();
    assert!(!String::from_utf8_lossy(&docs).contains("fezziwig.txt"));

    // Text insertion goes the same way.
    let r = post_json(addr, "/documents/text", &json!({"text": carol("Old Fezziwig", 800), "file_source": "party"}));
    assert_eq!(r.json()["status"], "success", "{}", r.text());
    idle_after(addr, 3);
    assert_eq!(status_of(addr, "party.txt").as_deref(), Some("processed"));
    drop(server);
}

#[test]
fn openapi_lists_every_path_and_the_web_ui_is_served() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let project = project(&mock, &[]);
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(project.path()) }).unwrap();
    let addr = server.addr();
    let doc = get(addr, "/openapi.json").json();
    for path in ["/documents/upload", "/query", "/query/stream", "/graphs", "/api/chat", "/v1/chat/completions"] {
        assert!(doc["paths"][path].is_object(), "{path} missing from /openapi.json");
    }
    let page = get(addr, "/webui/");
    assert_eq!(page.status, 200);
    assert!(page.text().contains("graph-canvas"));
    assert_eq!(get(addr, "/webui/app.js").status, 200);
    // No index yet: a query says what to do.
    let r = post_json(addr, "/query", &json!({"query": "anything", "mode": "local"}));
    assert_eq!(r.status, 503);
    assert!(r.json()["detail"].as_str().unwrap().contains("no index yet"));
}

#[test]
fn queries_during_an_update_answer_from_the_old_or_the_new_index_never_a_mix() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let project = project(&mock, &[("marley.txt", carol("MARLEY'S GHOST", 1500))]);
    index(project.path());
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(project.path()) }).unwrap();
    let addr = server.addr();
    let old_version = get(addr, "/health").json()["index"]["version"].as_str().unwrap().to_string();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let answers: Vec<(u16, Value)> = std::thread::scope(|s| {
        let clients: Vec<_> = (0..4)
            .map(|i| {
                let stop = &stop;
                s.spawn(move || {
                    let mut out = Vec::new();
                    let mode = ["basic", "local", "mix", "hybrid"][i];
                    while !stop.load(std::sync::atomic::Ordering::SeqCst) || out.len() < 2 {
                        let r = post_json(
                            addr,
                            "/query",
                            &json!({"query": "Who is Fezziwig?", "mode": mode, "only_need_context": true}),
                        );
                        let body = if r.status == 200 { r.json() } else { json!(r.text()) };
                        out.push((r.status, body));
                    }
                    out
                })
            })
            .collect();
        let r = post_json(
            addr,
            "/documents/text",
            &json!({"text": carol("Old Fezziwig", 1500), "file_source": "fezziwig"}),
        );
        assert_eq!(r.status, 200);
        idle_after(addr, 1);
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        clients.into_iter().flat_map(|c| c.join().unwrap()).collect()
    });
    let new_version = get(addr, "/health").json()["index"]["version"].as_str().unwrap().to_string();
    assert_ne!(old_version, new_version);
    for (status, answer) in &answers {
        assert_eq!(*status, 200, "{answer}");
        let version = answer["index_version"].as_str().unwrap();
        assert!(version == old_version || version == new_version, "{answer}");
        // The old index has no trace of the new document.
        if version == old_version {
            assert!(!files_of(answer).contains("fezziwig.txt"), "{answer}");
        }
    }
    let last = ask(addr, "basic", "Who is Fezziwig?", true);
    assert_eq!(last["index_version"], new_version.as_str());
    assert!(files_of(&last).contains("fezziwig.txt"));
}
