//! Anthropic's and Gemini's wire formats over real sockets: the same answers
//! as the OpenAI routes for the same conversation, in each API's shape, and
//! each API's error and rate-limit answers.

mod common;

use common::*;
use graphrag_mock_llm::{FaultKind, FaultRule, MockConfig, MockServer};
use serde_json::{json, Value};

const SYSTEM: &str = "You are a helpful assistant.";
const ASK: &str = "Who is Ebenezer Scrooge, and where is his counting-house?";
const VERSION: (&str, &str) = ("anthropic-version", "2023-06-01");

fn server_with(faults: Vec<FaultRule>) -> MockServer {
    MockServer::start(MockConfig { faults, ..MockConfig::default() }).unwrap()
}

fn post(s: &MockServer, path: &str, body: &Value, headers: &[(&str, &str)]) -> HttpResponse {
    request(&s.root_url(), "POST", path, Some(&body.to_string()), headers).expect("response")
}

/// The OpenAI route's answer to the same conversation.
fn openai_answer(s: &MockServer) -> String {
    let body =
        json!({"model": "m", "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ASK}]});
    chat_content(&post_json(&s.base_url(), "/v1/chat/completions", &body))
}

fn anthropic_body(stream: bool) -> Value {
    json!({
        "model": "claude-sonnet-4-5", "max_tokens": 1024, "system": SYSTEM, "stream": stream,
        "messages": [{"role": "user", "content": [{"type": "text", "text": ASK}]}],
    })
}

fn gemini_body() -> Value {
    json!({
        "systemInstruction": {"parts": [{"text": SYSTEM}]},
        "contents": [{"role": "user", "parts": [{"text": ASK}]}],
        "generationConfig": {"temperature": 0.0},
    })
}

/// The `data:` payloads of a server-sent event stream.
fn events(r: &HttpResponse) -> Vec<Value> {
    r.text().lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| serde_json::from_str(d).unwrap()).collect()
}

#[test]
fn anthropic_messages_get_the_openai_answer_as_content_blocks_and_events() {
    let s = server_with(vec![]);
    let want = openai_answer(&s);
    let r = post(&s, "/v1/messages", &anthropic_body(false), &[VERSION]);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (v["type"].as_str(), v["role"].as_str(), v["stop_reason"].as_str()),
        (Some("message"), Some("assistant"), Some("end_turn"))
    );
    assert_eq!(v["content"], json!([{"type": "text", "text": want}]));
    assert!(v["usage"]["input_tokens"].as_u64().unwrap() > 0 && v["usage"]["output_tokens"].as_u64().unwrap() > 0);

    let r = post(&s, "/v1/messages", &anthropic_body(true), &[VERSION]);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert!(r.text().starts_with("event: message_start\ndata: "), "{}", r.text());
    let events = events(&r);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"message_start"));
    assert_eq!(&kinds[kinds.len() - 3..], ["content_block_stop", "message_delta", "message_stop"]);
    let text: String = events.iter().filter_map(|e| e.pointer("/delta/text").and_then(Value::as_str)).collect();
    assert_eq!(text, want);
}

#[test]
fn anthropic_refusals_and_rate_limits_are_anthropic_s() {
    let s = server_with(vec![
        FaultRule::always(FaultKind::RateLimit { retry_after_ms: 1500 }).first(1),
        FaultRule::always(FaultKind::ServerError { status: 529 }).after(1).first(2),
    ]);
    let r = post(&s, "/v1/messages", &anthropic_body(false), &[VERSION]);
    assert_eq!((r.status, r.header("retry-after"), r.header("retry-after-ms")), (429, Some("2"), None));
    assert_eq!(r.json()["type"], "error");
    assert_eq!(r.json()["error"]["type"], "rate_limit_error");
    let r = post(&s, "/v1/messages", &anthropic_body(false), &[VERSION]);
    assert_eq!((r.status, r.json()["error"]["type"].as_str()), (529, Some("overloaded_error")));
    let r = post(&s, "/v1/messages", &anthropic_body(false), &[]);
    assert_eq!((r.status, r.json()["error"]["type"].as_str()), (400, Some("invalid_request_error")));
    let mut json_mode = anthropic_body(false);
    json_mode["response_format"] = json!({"type": "json_object"});
    let r = post(&s, "/v1/messages", &json_mode, &[VERSION]);
    assert!(r.status == 400 && r.text().contains("Extra inputs"), "{}", r.text());
}

#[test]
fn gemini_generate_content_gets_the_openai_answer_as_candidates_and_chunks() {
    let s = server_with(vec![]);
    let want = openai_answer(&s);
    let r = post(&s, "/v1beta/models/gemini-2.5-flash:generateContent", &gemini_body(), &[]);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["candidates"][0]["content"]["parts"][0]["text"], want.as_str());
    assert_eq!(
        (v["candidates"][0]["content"]["role"].as_str(), v["candidates"][0]["finishReason"].as_str()),
        (Some("model"), Some("STOP"))
    );
    assert!(v["usageMetadata"]["promptTokenCount"].as_u64().unwrap() > 0);

    let r = post(&s, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", &gemini_body(), &[]);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let chunks = events(&r);
    let text: String =
        chunks.iter().filter_map(|c| c.pointer("/candidates/0/content/parts/0/text").and_then(Value::as_str)).collect();
    assert_eq!(text, want);
    assert_eq!(chunks.last().unwrap()["candidates"][0]["finishReason"], "STOP");
    let array = post(&s, "/v1beta/models/gemini-2.5-flash:streamGenerateContent", &gemini_body(), &[]).json();
    assert_eq!(array.as_array().map(Vec::len), Some(chunks.len()), "without alt=sse: one JSON array of the chunks");

    let mut json_mode = gemini_body();
    json_mode["generationConfig"]["responseMimeType"] = "application/json".into();
    let v = post(&s, "/v1beta/models/gemini-2.5-flash:generateContent", &json_mode, &[]).json();
    let text = v["candidates"][0]["content"]["parts"][0]["text"].as_str().unwrap();
    assert!(serde_json::from_str::<Value>(text).is_ok_and(|j| j.is_object()), "JSON mode: {text}");
}

#[test]
fn gemini_embeddings_are_the_openai_vectors() {
    let s = server_with(vec![]);
    let openai =
        post_json(&s.base_url(), "/v1/embeddings", &json!({"model": "e", "input": ["Scrooge", "Marley"]})).json();
    let request = |text: &str| json!({"model": "models/gemini-embedding-001", "content": {"parts": [{"text": text}]}});
    let body = json!({"requests": [request("Scrooge"), request("Marley")]});
    let batch = post(&s, "/v1beta/models/gemini-embedding-001:batchEmbedContents", &body, &[]).json();
    for i in 0..2 {
        assert_eq!(batch["embeddings"][i]["values"], openai["data"][i]["embedding"]);
    }
    let one = post(&s, "/v1beta/models/gemini-embedding-001:embedContent", &request("Scrooge"), &[]).json();
    assert_eq!(one["embedding"]["values"], openai["data"][0]["embedding"]);
    let wrong = json!({"requests": [json!({"model": "models/other", "content": {"parts": [{"text": "x"}]}})]});
    let r = post(&s, "/v1beta/models/gemini-embedding-001:batchEmbedContents", &wrong, &[]);
    assert_eq!((r.status, r.json()["error"]["status"].as_str()), (400, Some("INVALID_ARGUMENT")));
}

#[test]
fn a_gemini_rate_limit_says_its_wait_in_the_body() {
    let s = server_with(vec![FaultRule::always(FaultKind::RateLimit { retry_after_ms: 250 })]);
    let r = post(&s, "/v1beta/models/gemini-2.5-flash:generateContent", &gemini_body(), &[]);
    assert_eq!((r.status, r.header("retry-after")), (429, None));
    let error = &r.json()["error"];
    assert_eq!((error["code"].as_u64(), error["status"].as_str()), (Some(429), Some("RESOURCE_EXHAUSTED")));
    assert_eq!(error["details"][0]["retryDelay"], "0.25s");
}

#[test]
fn bedrock_converse_wants_a_signature_and_gets_the_openai_answer() {
    let s = server_with(vec![]);
    let want = openai_answer(&s);
    let path = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse";
    let body = json!({
        "system": [{"text": SYSTEM}],
        "messages": [{"role": "user", "content": [{"text": ASK}]}],
        "inferenceConfig": {"maxTokens": 500, "temperature": 0.0},
    });
    let r = post(&s, path, &body, &[]);
    assert!(r.status == 400 && r.json()["message"] == "Missing Authentication Token", "{}", r.text());
    let signed = [
        ("authorization", "AWS4-HMAC-SHA256 Credential=AKID/20261128/us-east-1/bedrock/aws4_request, SignedHeaders=host, Signature=00"),
        ("x-amz-date", "20261128T163000Z"),
    ];
    let r = post(&s, path, &body, &signed);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["output"]["message"]["content"], json!([{"text": want}]));
    assert_eq!(v["stopReason"], "end_turn");
    assert!(v["usage"]["inputTokens"].as_u64().unwrap() > 0);
    let mut openai_style = body.clone();
    openai_style["temperature"] = 0.0.into();
    let r = post(&s, path, &openai_style, &signed);
    assert!(r.status == 400 && r.text().contains("extraneous key [temperature]"), "{}", r.text());
}
