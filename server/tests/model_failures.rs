//! A query whose model calls all fail is an error naming them (a 500, or a
//! streamed `error` line), never an answer saying the index has no data.

mod common;

use common::*;
use graphrag_mock_llm::{Endpoint, FaultKind, FaultRule, MockConfig, MockServer};
use graphrag_server::{ServeOptions, Server};
use serde_json::json;

#[test]
fn global_search_without_one_usable_map_answer_is_an_error_status() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let project = project(&mock, &[("marley.txt", carol("MARLEY'S GHOST", 3000))]);
    index(project.path());
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(project.path()) }).unwrap();
    let addr = server.addr();
    let ask = |question: &str| post_json(addr, "/query", &json!({"query": question, "mode": "global"}));

    let ok = ask("Who is Marley?");
    assert_eq!(ok.status, 200, "{}", ok.text());

    // Another question: its map calls are not in the cache.
    mock.set_faults(vec![FaultRule::always(FaultKind::Malformed).on(Endpoint::Chat)]);
    let failed = ask("Why does Marley's ghost visit Scrooge?");
    assert_eq!(failed.status, 500, "{}", failed.text());
    let detail = failed.json()["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("global search failed") && detail.contains("map call 1 of "), "{detail}");
    assert!(!detail.contains("sk-test"), "{detail}");

    // Streamed: an `error` line, no answer.
    let streamed =
        post_json(addr, "/query/stream", &json!({"query": "What did Marley's ghost say?", "mode": "global"}));
    let lines = streamed.lines();
    assert!(lines.iter().all(|l| l.get("response").is_none()), "{lines:?}");
    assert!(lines.iter().any(|l| l["error"].as_str().is_some_and(|e| e.contains("map call 1 of "))), "{lines:?}");
}
