//! End-to-end tests of the mock server over real sockets (127.0.0.1 only).

mod common;

use std::time::{Duration, Instant};

use common::*;
use graphrag_mock_llm::{Endpoint, FaultKind, FaultRule, MockConfig, MockServer};
use graphrag_operations::tokenizer::Encoding;
use serde_json::{json, Value};

fn server() -> MockServer {
    MockServer::start(MockConfig::default()).unwrap()
}

fn server_with(faults: Vec<FaultRule>) -> MockServer {
    MockServer::start(MockConfig { faults, ..MockConfig::default() }).unwrap()
}

const CHAT: &str = "/v1/chat/completions";
const EMB: &str = "/v1/embeddings";

#[test]
fn chat_answer_is_deterministic_and_openai_shaped() {
    let s = server();
    let base = s.base_url();
    assert!(base.starts_with("http://127.0.0.1:") && base.ends_with("/v1"));
    let body = chat_body(&extraction_prompt());
    let a = post_json(&base, CHAT, &body);
    let b = post_json(&base, CHAT, &body);
    assert_eq!(a.status, 200);
    assert_eq!(a.header("content-type"), Some("application/json"));
    assert_eq!(a.body, b.body, "same request, same bytes");
    let v = a.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["created"], 0);
    assert_eq!(v["model"], "gpt-4o-mini");
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(v["choices"][0]["index"], 0);
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    let content = chat_content(&a);
    let enc = Encoding::O200kBase;
    assert_eq!(v["usage"]["prompt_tokens"], enc.count(&extraction_prompt()) as u64);
    assert_eq!(v["usage"]["completion_tokens"], enc.count(&content) as u64);
    assert_eq!(
        v["usage"]["total_tokens"].as_u64().unwrap(),
        v["usage"]["prompt_tokens"].as_u64().unwrap() + v["usage"]["completion_tokens"].as_u64().unwrap()
    );
}

#[test]
fn extraction_answer_has_records_for_capitalised_names() {
    let s = server();
    let out = chat_content(&post_json(&s.base_url(), CHAT, &chat_body(&extraction_prompt())));
    assert!(out.ends_with("\n<|COMPLETE|>"), "{out}");
    let records: Vec<&str> = out.trim_end_matches("<|COMPLETE|>").split("\n##\n").map(str::trim).collect();
    let mut entities = Vec::new();
    for r in &records {
        assert!(r.starts_with('(') && r.ends_with(')'), "{r}");
        let fields: Vec<&str> = r[1..r.len() - 1].split("<|>").collect();
        match fields[0] {
            "\"entity\"" => {
                assert_eq!(fields.len(), 4, "{r}");
                assert!(["ORGANIZATION", "PERSON", "GEO"].contains(&fields[2]), "{r}");
                assert!(CHUNK.contains(fields[3].trim_end_matches('.')), "{r}");
                entities.push(fields[1].to_string());
            }
            "\"relationship\"" => {
                assert_eq!(fields.len(), 5, "{r}");
                let strength: u32 = fields[4].parse().unwrap();
                assert!((1..=10).contains(&strength));
            }
            other => panic!("unexpected record type {other}"),
        }
    }
    for name in ["HALVARD PORT AUTHORITY", "INES OKAFOR", "BRENNICK", "COASTAL DEVELOPMENT BANK", "OKAFOR"] {
        assert!(entities.contains(&name.to_string()), "{name} in {entities:?}");
    }
    assert!(!entities.contains(&"MONDAY".to_string()));
    assert!(!entities.contains(&"THE".to_string()));
    assert!(out.contains("(\"relationship\"<|>HALVARD PORT AUTHORITY<|>INES OKAFOR<|>"));
    assert_eq!(s.stats().by_kind.get("extract_graph"), Some(&1));
}

#[test]
fn community_report_is_valid_json() {
    let s = server();
    let input = "-----Entities-----\nid,entity,description\n3,HALVARD PORT AUTHORITY,runs the port\n8,INES OKAFOR,director\n\n-----Relationships-----\nid,source,target,description\n14,INES OKAFOR,HALVARD PORT AUTHORITY,directs\n";
    let p = render("community_report_graph", &[("input_text", input), ("max_report_length", "1500")]);
    let mut body = chat_body(&p);
    body["response_format"] = json!({"type": "json_object"});
    let v: Value = serde_json::from_str(&chat_content(&post_json(&s.base_url(), CHAT, &body))).expect("report JSON");
    for key in ["title", "summary", "rating", "rating_explanation", "findings"] {
        assert!(v.get(key).is_some(), "missing {key}: {v}");
    }
    assert!(v["title"].as_str().unwrap().contains("Halvard Port Authority"));
    let rating = v["rating"].as_f64().unwrap();
    assert!((0.0..=10.0).contains(&rating));
    let findings = v["findings"].as_array().unwrap();
    assert!((2..=5).contains(&findings.len()));
    for f in findings {
        assert!(f["summary"].is_string() && f["explanation"].is_string());
    }
    assert!(v.to_string().contains("[Data: Entities (3); Relationships (14)]"));
}

fn cos(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn vectors(v: &Value) -> Vec<Vec<f32>> {
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect())
        .collect()
}

#[test]
fn embeddings_have_dimension_norm_and_meaning() {
    let s = MockServer::start(MockConfig { embed_dim: 96, ..MockConfig::default() }).unwrap();
    let texts = [
        "The port authority expands the container terminal in Brennick",
        "Brennick port authority expanding its container terminal",
        "A recipe for sourdough bread with rye flour",
    ];
    let r = post_json(&s.base_url(), EMB, &json!({"model": "text-embedding-3-small", "input": texts}));
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["object"], "list");
    assert_eq!(v["model"], "text-embedding-3-small");
    let vs = vectors(&v);
    assert_eq!(vs.len(), 3);
    for (i, e) in vs.iter().enumerate() {
        assert_eq!(v["data"][i]["index"], i);
        assert_eq!(v["data"][i]["object"], "embedding");
        assert_eq!(e.len(), 96);
        let norm: f32 = e.iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-3, "norm {norm}");
    }
    assert!(cos(&vs[0], &vs[1]) > cos(&vs[0], &vs[2]) + 0.2);
    let tokens: u64 = texts.iter().map(|t| Encoding::O200kBase.count(t) as u64).sum();
    assert_eq!(v["usage"]["prompt_tokens"], tokens);

    // a single string; same text → same vector
    let one = post_json(&s.base_url(), EMB, &json!({"input": texts[0]})).json();
    assert_eq!(vectors(&one)[0], vs[0]);
    assert_eq!(one["model"], "mock-embedding");
    // base64: 96 little-endian f32 = 384 bytes = 512 base64 chars
    let b64 = post_json(&s.base_url(), EMB, &json!({"input": [texts[0]], "encoding_format": "base64"})).json();
    assert_eq!(b64["data"][0]["embedding"].as_str().unwrap().len(), 512);
    let st = s.stats();
    assert_eq!(st.embedding_requests, 3);
    assert_eq!(st.embedded_texts, 5);
    assert_eq!(st.chat_requests, 0);
}

#[test]
fn rate_limit_first_n_with_retry_headers() {
    let s = server_with(vec![FaultRule::always(FaultKind::RateLimit { retry_after_ms: 1500 }).first(2)]);
    let body = chat_body("hello");
    for _ in 0..2 {
        let r = post_json(&s.base_url(), CHAT, &body);
        assert_eq!(r.status, 429);
        assert_eq!(r.header("retry-after"), Some("2"));
        assert_eq!(r.header("retry-after-ms"), Some("1500"));
        assert_eq!(r.json()["error"]["code"], "rate_limit_exceeded");
        assert!(r.json()["error"]["message"].is_string());
    }
    assert_eq!(post_json(&s.base_url(), CHAT, &body).status, 200);
    let st = s.stats();
    assert_eq!(st.faults_injected, 2);
    assert_eq!(st.requests, 3);
    assert_eq!(st.by_kind.get("other"), Some(&1));
}

#[test]
fn every_kth_request_and_endpoint_filter() {
    let s = server_with(vec![FaultRule::always(FaultKind::ServerError { status: 503 }).every(3).on(Endpoint::Chat)]);
    let body = chat_body("hello");
    let statuses: Vec<u16> = (0..7).map(|_| post_json(&s.base_url(), CHAT, &body).status).collect();
    assert_eq!(statuses, vec![200, 200, 503, 200, 200, 503, 200]);
    // embeddings are not counted by a chat-only rule
    for _ in 0..3 {
        assert_eq!(post_json(&s.base_url(), EMB, &json!({"input": "x"})).status, 200);
    }
    assert_eq!(s.stats().faults_injected, 2);

    // set_faults replaces the rules and restarts their counters
    s.set_faults(vec![FaultRule::always(FaultKind::ServerError { status: 500 }).every(2)]);
    let statuses: Vec<u16> = (0..4).map(|_| post_json(&s.base_url(), EMB, &json!({"input": "x"})).status).collect();
    assert_eq!(statuses, vec![200, 500, 200, 500]);
    let r = post_json(&s.base_url(), CHAT, &body);
    assert_eq!(r.status, 200, "5th request overall, 5th of the rule: odd");
    s.set_faults(vec![]);
    assert_eq!(post_json(&s.base_url(), CHAT, &body).status, 200);
}

#[test]
fn bad_request_and_server_error_bodies() {
    let s = server_with(vec![
        FaultRule::always(FaultKind::BadRequest).first(1),
        FaultRule::always(FaultKind::ServerError { status: 500 }).first(2),
    ]);
    let body = chat_body("hello");
    let r = post_json(&s.base_url(), CHAT, &body);
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["type"], "invalid_request_error");
    assert!(r.json()["error"]["message"].is_string());
    // the second rule counted the first request too: this is its second
    let r = post_json(&s.base_url(), CHAT, &body);
    assert_eq!(r.status, 500);
    assert_eq!(r.json()["error"]["type"], "server_error");
    assert_eq!(post_json(&s.base_url(), CHAT, &body).status, 200);

    // a body that is not JSON is a real 400
    let r = request(&s.base_url(), "POST", CHAT, Some("{not json"), &[]).unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["type"], "invalid_request_error");
}

#[test]
fn drop_closes_without_response() {
    let s = server_with(vec![FaultRule::always(FaultKind::DropConnection).first(1)]);
    let body = chat_body("hello").to_string();
    let r = request(&s.base_url(), "POST", CHAT, Some(&body), &[]);
    assert!(r.is_err(), "expected no response");
    let r = request(&s.base_url(), "POST", CHAT, Some(&body), &[]).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(s.stats().faults_injected, 1);
}

#[test]
fn slow_delays_the_answer() {
    let s = server_with(vec![FaultRule::always(FaultKind::Slow { delay: Duration::from_millis(150) }).first(1)]);
    let body = chat_body("hello");
    let t = Instant::now();
    let slow = post_json(&s.base_url(), CHAT, &body);
    assert!(t.elapsed() >= Duration::from_millis(150));
    let t = Instant::now();
    let fast = post_json(&s.base_url(), CHAT, &body);
    assert!(t.elapsed() < Duration::from_millis(150));
    assert_eq!(slow.body, fast.body);
}

#[test]
fn malformed_and_truncated_content() {
    let input = "-----Entities-----\nid,entity,description\n1,ACME,a firm\n";
    let p = render("community_report_graph", &[("input_text", input), ("max_report_length", "100")]);
    let body = chat_body(&p);
    let s = server();
    let good = chat_content(&post_json(&s.base_url(), CHAT, &body));
    assert!(serde_json::from_str::<Value>(&good).is_ok());

    s.set_faults(vec![FaultRule::always(FaultKind::Malformed).first(1)]);
    let r = post_json(&s.base_url(), CHAT, &body);
    assert_eq!(r.status, 200);
    let bad = chat_content(&r);
    assert!(serde_json::from_str::<Value>(&bad).is_err(), "{bad}");

    s.set_faults(vec![FaultRule::always(FaultKind::Truncated).first(1)]);
    let r = post_json(&s.base_url(), CHAT, &body);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["choices"][0]["finish_reason"], "length");
    let cut = chat_content(&r);
    assert_eq!(cut.chars().count(), good.chars().count() / 2);
    assert!(good.starts_with(&cut));

    // embeddings: the body itself is broken
    s.set_faults(vec![
        FaultRule::always(FaultKind::Malformed).first(1).on(Endpoint::Embeddings),
        FaultRule::always(FaultKind::Truncated).on(Endpoint::Embeddings),
    ]);
    for _ in 0..2 {
        let r = post_json(&s.base_url(), EMB, &json!({"input": "abc"}));
        assert_eq!(r.status, 200);
        assert!(serde_json::from_slice::<Value>(&r.body).is_err());
    }
    assert_eq!(s.stats().faults_injected, 4);
}

#[test]
fn max_in_flight_sees_concurrent_requests() {
    let s = MockServer::start(MockConfig { latency: Duration::from_millis(100), ..MockConfig::default() }).unwrap();
    let base = s.base_url();
    let t = Instant::now();
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let base = base.clone();
            std::thread::spawn(move || {
                if i % 2 == 0 {
                    post_json(&base, CHAT, &chat_body("hello")).status
                } else {
                    post_json(&base, EMB, &json!({"input": "hello"})).status
                }
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), 200);
    }
    let elapsed = t.elapsed();
    assert!(elapsed >= Duration::from_millis(100));
    assert!(elapsed < Duration::from_millis(350), "requests were serialised: {elapsed:?}");
    let st = s.stats();
    assert!(st.max_in_flight >= 2, "{st:?}");
    assert!(st.max_in_flight <= 4);
    s.reset_stats();
    assert_eq!(s.stats().max_in_flight, 0);
}

#[test]
fn stats_health_routes_and_auth() {
    let s = server();
    let base = s.base_url();
    let h = get(&base, "/health");
    assert_eq!((h.status, h.text().as_str()), (200, "ok"));
    let body = chat_body("What is the capital of Brennick?").to_string();
    let secret = "Bearer sk-mock-secret-12345";
    let r = request(&base, "POST", CHAT, Some(&body), &[("Authorization", secret)]).unwrap();
    assert_eq!(r.status, 200);
    assert!(!r.text().contains("sk-mock-secret"));
    assert!(r.headers.iter().all(|(_, v)| !v.contains("sk-mock-secret")));

    // Azure-style paths; the deployment name is the model when the body has none
    let azure = json!({"messages": [{"role": "user", "content": "hi"}]});
    let r = post_json(&base, "/openai/deployments/my-gpt/chat/completions?api-version=2024-06-01", &azure);
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["model"], "my-gpt");
    let r =
        post_json(&base, "/openai/deployments/my-emb/embeddings?api-version=2024-06-01", &json!({"input": ["a", "b"]}));
    assert_eq!(r.json()["data"].as_array().unwrap().len(), 2);

    let nf = get(&base, "/v1/nothing");
    assert_eq!(nf.status, 404);
    assert!(nf.json()["error"]["message"].is_string());
    assert_eq!(get(&base, "/v1/chat/completions").status, 405);

    let st = s.stats();
    assert_eq!(st.requests, 3);
    assert_eq!(st.chat_requests, 2);
    assert_eq!(st.embedding_requests, 1);
    assert_eq!(st.embedded_texts, 2);
    assert_eq!(st.by_kind.get("other"), Some(&2));
    assert!(st.prompt_tokens > 0 && st.completion_tokens > 0);
    let http_stats = get(&base, "/stats").json();
    assert_eq!(http_stats, serde_json::to_value(&st).unwrap());
    assert!(!http_stats.to_string().contains("sk-mock-secret"));

    s.reset_stats();
    let st = s.stats();
    assert_eq!((st.requests, st.prompt_tokens, st.by_kind.len()), (0, 0, 0));
    assert_eq!(post_json(&base, "/stats/reset", &json!({})).status, 200);
}

#[test]
fn streaming_sends_sse_chunks_then_done() {
    let s = server();
    let p = extraction_prompt();
    let plain = chat_content(&post_json(&s.base_url(), CHAT, &chat_body(&p)));
    let mut body = chat_body(&p);
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let r = post_json(&s.base_url(), CHAT, &body);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let text = r.text();
    let events: Vec<&str> =
        text.split("\n\n").filter(|e| !e.is_empty()).map(|e| e.strip_prefix("data: ").expect("data: prefix")).collect();
    assert_eq!(*events.last().unwrap(), "[DONE]");
    let mut content = String::new();
    let mut content_chunks = 0;
    let mut finish = None;
    let mut usage = None;
    for e in &events[..events.len() - 1] {
        let v: Value = serde_json::from_str(e).unwrap();
        assert_eq!(v["object"], "chat.completion.chunk");
        if let Some(c) = v["choices"][0]["delta"]["content"].as_str() {
            if !c.is_empty() {
                content_chunks += 1;
            }
            content.push_str(c);
        }
        if let Some(f) = v["choices"][0]["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
        if v["usage"].is_object() {
            usage = Some(v["usage"].clone());
        }
    }
    assert_eq!(content, plain);
    assert!(content_chunks >= 3, "{content_chunks} chunks");
    assert_eq!(finish.as_deref(), Some("stop"));
    assert_eq!(usage.unwrap()["completion_tokens"], Encoding::O200kBase.count(&plain) as u64);
}

#[test]
fn drop_shuts_the_server_down() {
    let s = server();
    let host = host_of(&s.base_url());
    assert_eq!(get(&s.base_url(), "/health").status, 200);
    let t = Instant::now();
    drop(s);
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(std::net::TcpStream::connect(&host).is_err());
}

#[test]
fn binary_prints_its_url_and_serves() {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_graphrag-mock-llm"))
        .args(["--port", "0", "--embed-dim", "8", "--fault", "429:first=1"])
        .env_remove("MOCK_PORT")
        .env_remove("MOCK_FAULTS")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("listening on ").unwrap_or_else(|| panic!("{line:?}")).to_string();
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/v1"));
    let first = post_json(&url, EMB, &json!({"input": "x"}));
    let second = post_json(&url, EMB, &json!({"input": "x"}));
    child.kill().unwrap();
    let _ = child.wait();
    assert_eq!(first.status, 429);
    assert_eq!(vectors(&second.json())[0].len(), 8);
}
