//! The rerank stage end to end against the mock server's `/v1/rerank`
//! (Cohere's and Jina's shape; the mock scores a chunk by the share of the
//! question's words it holds): every method that packs text chunks reorders
//! them by the model's scores, `enable_rerank` turns it off, and a failing
//! endpoint leaves the retrieval order.

mod common;

use common::*;
use graphrag_mock_llm::{Endpoint, FaultKind, FaultRule, MockServer};
use graphrag_query::{Method, QueryEngine, QueryRequest, QueryResult};
use std::collections::BTreeSet;

const QUESTION: &str = "How is Scrooge related to Bob Cratchit and his son Tiny Tim?";

/// The chunk methods, and the setting that names the rerank model.
const METHODS: [Method; 5] = [Method::Basic, Method::Local, Method::Hybrid, Method::Mix, Method::Ppr];

fn rerank_settings(mock: &MockServer) -> String {
    format!(
        "rerank_models:\n  default_rerank_model:\n    model_provider: jina\n    model: mock-rerank\n    api_key: test-key\n    api_base: {}\n    max_retries: 0\nrerank:\n  model_id: default_rerank_model\n",
        mock.base_url()
    )
}

/// A project whose settings name the mock's rerank model.
fn reranking_project() -> Project {
    let p = Project::new(true, "");
    let settings = std::fs::read_to_string(p.dir.path().join("settings.yaml")).unwrap();
    std::fs::write(p.dir.path().join("settings.yaml"), settings + &rerank_settings(&p.mock)).unwrap();
    p
}

fn retrieve(engine: &QueryEngine, method: Method, rerank: Option<bool>) -> QueryResult {
    let mut req = QueryRequest::new(method, QUESTION);
    req.context_only = true;
    req.rerank = rerank;
    engine.query(&req, None).unwrap_or_else(|e| panic!("{method}: {e:#}"))
}

/// The mock's score of `text`: the share of the question's words it holds.
fn mock_score(text: &str) -> f64 {
    let words = |t: &str| -> BTreeSet<String> {
        t.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2).map(str::to_lowercase).collect()
    };
    let asked = words(QUESTION);
    asked.intersection(&words(text)).count() as f64 / asked.len() as f64
}

#[test]
fn every_chunk_method_orders_its_chunks_by_the_rerank_models_scores() {
    let p = reranking_project();
    let engine = p.engine();
    let mut reordered = Vec::new();
    for method in METHODS {
        let before = p.mock.stats().rerank_requests;
        let r = retrieve(&engine, method, None);
        assert_eq!(
            r.context_records.to_json()["rerank"]["model"],
            "default_rerank_model",
            "{method}: {}",
            r.context_records.to_json()
        );
        let reranked = r.context_records.to_json()["rerank"]["reranked"].as_u64().unwrap() as usize;
        assert!(reranked >= 1, "{method}: {}", r.context_records.to_json());
        assert_eq!(p.mock.stats().rerank_requests, before + 1, "{method}: one rerank request");
        let scores: Vec<f64> = record_column(&r, "sources", "text").iter().map(|t| mock_score(t)).collect();
        let head = &scores[..reranked.min(scores.len())];
        assert!(head.windows(2).all(|w| w[0] >= w[1]), "{method}: sources by the model's score: {scores:?}");
        // Asked not to, the query keeps the retrieval order and asks nothing.
        let plain = retrieve(&engine, method, Some(false));
        assert!(plain.context_records.to_json().get("rerank").is_none(), "{method}");
        assert_eq!(p.mock.stats().rerank_requests, before + 1, "{method}: no request with enable_rerank false");
        if record_ids(&r, "sources") != record_ids(&plain, "sources") {
            reordered.push(method);
        }
    }
    // The index's retrieval order is not the model's everywhere: a rerank that did nothing would show here.
    assert!(!reordered.is_empty(), "no method's order changed");
}

#[test]
fn a_failing_rerank_model_leaves_the_retrieval_order() {
    let p = reranking_project();
    let engine = p.engine();
    p.mock.set_faults(vec![FaultRule::always(FaultKind::BadRequest).on(Endpoint::Rerank)]);
    for method in METHODS {
        let r = retrieve(&engine, method, Some(true));
        let error = r.context_records.rerank.as_ref().and_then(|r| r.error.clone()).unwrap_or_default();
        assert!(error.contains("400"), "{method}: the failure is named: {}", r.context_records.to_json());
        assert_eq!(r.context_records.to_json()["rerank"]["reranked"], 0, "{method}");
        let plain = retrieve(&engine, method, Some(false));
        assert_eq!(record_ids(&r, "sources"), record_ids(&plain, "sources"), "{method}: the retrieval order");
    }
}

#[test]
fn rerank_asked_for_without_a_model_keeps_the_retrieval_order() {
    let p = Project::new(true, "");
    let engine = p.engine();
    let r = retrieve(&engine, Method::Basic, Some(true));
    assert!(r.context_records.to_json().get("rerank").is_none(), "{}", r.context_records.to_json());
    assert_eq!(p.mock.stats().rerank_requests, 0);
}
