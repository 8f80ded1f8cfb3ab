//! The HTTP side: routing, fault injection, latency, OpenAI request/response
//! shapes (JSON and SSE streaming; Anthropic's and Gemini's are
//! `providers`'), statistics. The response bodies both build are `response`'s.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::answers::{self, Message};
use crate::providers::{self, GeminiMethod, Reply, Wire};
use crate::response::{json_response, raw_response, sse, Resp};
use crate::{embed, google, Endpoint, FaultKind, Shared};

/// Returned by the service to make hyper close the connection without a response.
#[derive(Debug)]
pub(crate) struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped (injected fault)")
    }
}

impl std::error::Error for Dropped {}

pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((s, _)) => s,
                    Err(_) => {
                        // e.g. too many open files: back off a little
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| handle(shared.clone(), req));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        }
    }
}

enum Route {
    Health,
    Stats,
    Reset,
    Models,
    /// Google's OAuth token endpoint (see `google`).
    Token,
    Api(Endpoint, Wire),
    NotFound,
}

fn route(path: &str, query: &str) -> Route {
    let p = path.trim_end_matches('/');
    let openai = |ep| Route::Api(ep, Wire::OpenAi { deployment: None });
    let has_api_version = query.split('&').any(|pair| pair.starts_with("api-version="));
    match p {
        "" | "/health" | "/v1/health" => return Route::Health,
        "/stats" | "/v1/stats" => return Route::Stats,
        "/stats/reset" | "/reset" | "/v1/stats/reset" => return Route::Reset,
        // The OpenAI API lives under /v1, as on OpenAI, vLLM and Ollama: a
        // base URL without it gets their 404 (clients must say so).
        "/v1/models" => return Route::Models,
        "/v1/chat/completions" => return openai(Endpoint::Chat),
        "/v1/embeddings" => return openai(Endpoint::Embeddings),
        // vLLM and Jina under /v1, Cohere under /v2, Infinity and TEI at the root.
        "/v1/rerank" | "/v2/rerank" | "/rerank" => return openai(Endpoint::Rerank),
        // Azure AI Foundry's model inference API, which asks an api-version.
        "/models/chat/completions" if has_api_version => return openai(Endpoint::Chat),
        "/models/embeddings" if has_api_version => return openai(Endpoint::Embeddings),
        "/token" => return Route::Token,
        _ => {}
    }
    if let Some((ep, wire)) = providers::route(p, query) {
        return Route::Api(ep, wire);
    }
    if let Some(rest) = p.strip_prefix("/openai/deployments/") {
        if let Some((name, tail)) = rest.split_once('/') {
            let ep = match tail {
                "chat/completions" => Some(Endpoint::Chat),
                "embeddings" => Some(Endpoint::Embeddings),
                _ => None,
            };
            if let Some(ep) = ep {
                return Route::Api(ep, Wire::OpenAi { deployment: Some(name.to_string()) });
            }
        }
    }
    Route::NotFound
}

/// An error answer in `wire`'s format (`ty` and `code`: OpenAI's).
fn error_response(wire: &Wire, status: u16, ty: &str, code: Option<&str>, message: &str) -> Resp {
    let body = providers::error_body(wire, status, ty, code, message, None);
    let mut r = json_response(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), &body);
    aws_error_type(&mut r, wire, status);
    r
}

/// AWS names the exception of an error answer in a header, not its body.
fn aws_error_type(r: &mut Resp, wire: &Wire, status: u16) {
    if matches!(wire, Wire::Bedrock { .. }) {
        let name = providers::aws_exception(status);
        let value = format!("{name}:http://internal.amazon.com/coral/com.amazon.bedrock/");
        r.headers_mut().insert("x-amzn-errortype", HeaderValue::from_str(&value).expect("ASCII"));
    }
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Resp, Dropped> {
    let method = req.method().clone();
    let route = route(req.uri().path(), req.uri().query().unwrap_or(""));
    let is_get = method == Method::GET || method == Method::HEAD;
    Ok(match route {
        Route::Health if is_get => raw_response(StatusCode::OK, "text/plain", b"ok".to_vec()),
        Route::Stats if is_get => json_response(StatusCode::OK, &*shared.stats.lock().unwrap()),
        Route::Reset if method == Method::POST || is_get => {
            crate::reset_stats(&shared);
            json_response(StatusCode::OK, &json!({"ok": true}))
        }
        Route::Models if is_get => json_response(
            StatusCode::OK,
            &json!({"object": "list", "data": [
                {"id": "mock-chat", "object": "model", "created": 0, "owned_by": "graphrag-mock-llm"},
                {"id": "mock-embedding", "object": "model", "created": 0, "owned_by": "graphrag-mock-llm"}
            ]}),
        ),
        Route::Token if method == Method::POST => {
            let headers = req.headers().clone();
            let body = req.into_body().collect().await.map_err(|_| Dropped)?.to_bytes();
            google::token(&shared.google_tokens, &headers, &body)
        }
        Route::Api(ep, wire) if method == Method::POST => {
            return api(shared, req, ep, wire).await;
        }
        Route::NotFound => error_response(
            &Wire::OpenAi { deployment: None },
            404,
            "invalid_request_error",
            Some("not_found"),
            &format!("no route for {method} {}", req.uri().path()),
        ),
        _ => error_response(
            &Wire::OpenAi { deployment: None },
            405,
            "invalid_request_error",
            Some("method_not_allowed"),
            &format!("method {method} not allowed on {}", req.uri().path()),
        ),
    })
}

/// Counts a request as in flight while alive.
struct InFlight<'a>(&'a Shared);

impl<'a> InFlight<'a> {
    fn enter(shared: &'a Shared) -> InFlight<'a> {
        let now = {
            let mut n = shared.in_flight.lock().unwrap();
            *n += 1;
            *n
        };
        let mut s = shared.stats.lock().unwrap();
        s.max_in_flight = s.max_in_flight.max(now);
        InFlight(shared)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        *self.0.in_flight.lock().unwrap() -= 1;
    }
}

async fn api(shared: Arc<Shared>, req: Request<Incoming>, endpoint: Endpoint, wire: Wire) -> Result<Resp, Dropped> {
    let arrived = tokio::time::Instant::now();
    let headers = req.headers().clone();
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return Err(Dropped),
    };
    {
        let mut s = shared.stats.lock().unwrap();
        s.requests += 1;
        match endpoint {
            Endpoint::Chat => s.chat_requests += 1,
            Endpoint::Embeddings => s.embedding_requests += 1,
            Endpoint::Rerank => s.rerank_requests += 1,
        }
        shared.counters_changed.notify_all();
    }
    let _in_flight = InFlight::enter(&shared);
    let fault = shared.pick_fault(endpoint);
    let latency = *shared.latency.lock().unwrap();
    // The answer is made first and sent `latency` after the request arrived:
    // the mock's own work (token counts of long prompts) is inside the
    // latency, as a remote server's is, instead of adding to it wave after
    // wave on the client's cores. A request that is never answered makes
    // nothing (and counts no tokens).
    let answer = match &fault {
        Some(FaultKind::DropConnection | FaultKind::Hang) => None,
        _ => {
            let made = respond(&shared, &body, endpoint, &wire, &headers, fault.as_ref());
            shared.stats.lock().unwrap().answers_made += 1;
            shared.counters_changed.notify_all();
            Some(made)
        }
    };
    let due = arrived + latency;
    if due > tokio::time::Instant::now() {
        // Not `sleep_until` of a past instant: that still waits for the next timer tick.
        tokio::time::sleep_until(due).await;
    }
    match &fault {
        Some(FaultKind::DropConnection) => return Err(Dropped),
        Some(FaultKind::Hang) => std::future::pending::<()>().await,
        Some(FaultKind::Slow { delay }) => tokio::time::sleep(*delay).await,
        _ => {}
    }
    answer.ok_or(Dropped)
}

/// The answer to one request: an injected error, or the chat or embeddings
/// answer, in the wire format it came in.
fn respond(
    shared: &Shared,
    body: &[u8],
    endpoint: Endpoint,
    wire: &Wire,
    headers: &HeaderMap,
    fault: Option<&FaultKind>,
) -> Resp {
    match fault {
        Some(FaultKind::RateLimit { retry_after_ms }) => {
            let message = format!("Rate limit reached (injected fault). Please try again in {retry_after_ms}ms.");
            let body = providers::error_body(
                wire,
                429,
                "requests",
                Some("rate_limit_exceeded"),
                &message,
                Some(*retry_after_ms),
            );
            let mut r = json_response(StatusCode::TOO_MANY_REQUESTS, &body);
            aws_error_type(&mut r, wire, 429);
            let h = r.headers_mut();
            // OpenAI sends both headers, Anthropic whole seconds only, Gemini
            // none (its body says how long), Bedrock none (a ThrottlingException).
            match wire {
                Wire::OpenAi { .. } => {
                    h.insert(RETRY_AFTER, HeaderValue::from(retry_after_ms.div_ceil(1000)));
                    h.insert("retry-after-ms", HeaderValue::from(*retry_after_ms));
                }
                Wire::Anthropic => {
                    h.insert(RETRY_AFTER, HeaderValue::from(retry_after_ms.div_ceil(1000)));
                }
                Wire::Gemini { .. } | Wire::Bedrock { .. } => {}
            }
            return r;
        }
        Some(FaultKind::ServerError { status }) => {
            let message = match status {
                529 => "Overloaded (injected fault).",
                _ => "The server had an error while processing your request (injected fault).",
            };
            return error_response(wire, *status, "server_error", None, message);
        }
        Some(FaultKind::BadRequest) => {
            return error_response(wire, 400, "invalid_request_error", None, "Invalid request (injected fault).");
        }
        _ => {}
    }
    if matches!(wire, Wire::Gemini { vertex: true, .. }) && !google::authorized(&shared.google_tokens, headers) {
        let message = "Request had invalid authentication credentials. Expected OAuth 2 access token.";
        return error_response(wire, 401, "authentication_error", None, message);
    }
    let refuse = |message: &str| error_response(wire, 400, "invalid_request_error", None, message);
    let request: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => return refuse("We could not parse the JSON body of your request."),
    };
    let request = match providers::to_openai(wire, request, headers) {
        Ok(request) => request,
        Err(message) => return refuse(&message),
    };
    let model = request.get("model").and_then(Value::as_str).map(str::to_string);
    let model = model.or_else(|| match wire {
        Wire::OpenAi { deployment } => deployment.clone(),
        _ => None,
    });
    match endpoint {
        Endpoint::Chat => match chat(shared, &request, model, fault) {
            Ok(reply) => match wire {
                Wire::OpenAi { .. } => openai_chat(&reply, &request),
                Wire::Anthropic => providers::anthropic_chat(&reply, request["stream"] == true),
                Wire::Gemini { method, .. } => providers::gemini_chat(&reply, *method),
                Wire::Bedrock { .. } => providers::converse_chat(&reply),
            },
            Err(message) => refuse(message),
        },
        Endpoint::Embeddings => {
            let (vectors, tokens) = match embed_texts(shared, &request) {
                Ok(answer) => answer,
                Err(message) => return refuse(message),
            };
            let mut body = match wire {
                Wire::Gemini { method: GeminiMethod::Predict, .. } => {
                    let texts = request.get("input").and_then(Value::as_array).into_iter().flatten();
                    let tokens = texts.map(|t| count_tokens(t.as_str().unwrap_or(""))).collect();
                    providers::vertex_predictions(vectors, tokens)
                }
                Wire::Gemini { method, .. } => providers::gemini_embeddings(vectors, *method),
                Wire::Bedrock { model, .. } => {
                    let texts: Vec<String> = request
                        .get("input")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|t| t.as_str().unwrap_or("").to_string())
                        .collect();
                    providers::bedrock_embeddings(model, vectors, texts, tokens)
                }
                _ => openai_embeddings(shared, &request, model, vectors, tokens),
            };
            match fault {
                Some(FaultKind::Malformed) => {
                    body.pop();
                    body.extend_from_slice(b"\n<!-- garbled mock output -->");
                }
                Some(FaultKind::Truncated) => body.truncate(body.len() / 2),
                _ => {}
            }
            raw_response(StatusCode::OK, "application/json", body)
        }
        Endpoint::Rerank => match crate::rerank::answer(&request) {
            Ok(mut body) => {
                if let Some(FaultKind::Malformed | FaultKind::Truncated) = fault {
                    body.truncate(body.len() / 2);
                }
                raw_response(StatusCode::OK, "application/json", body)
            }
            Err(message) => refuse(&message),
        },
    }
}

fn count_tokens(text: &str) -> u64 {
    graphrag_operations::tokenizer::Encoding::O200kBase.count(text) as u64
}

fn content_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match p {
                Value::String(s) => Some(s.as_str()),
                _ => p.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join(""),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Broken content: a JSON answer loses its closing brace and gains prose;
/// anything else becomes garbage.
fn malform(content: &str) -> String {
    let t = content.trim_end();
    if t.starts_with('{') && t.ends_with('}') {
        format!("Sure! Here is the JSON you asked for:\n{}\nLet me know if you need anything else.", &t[..t.len() - 1])
    } else {
        "\u{fffd}\u{fffd} %%% garbled mock output %%% {\"partial\": [1, 2,".to_string()
    }
}

fn cut_half(s: &str) -> String {
    let n = s.chars().count() / 2;
    s.chars().take(n).collect()
}

/// The answer to a chat request (OpenAI's form), or why it is refused.
fn chat(
    shared: &Shared,
    request: &Value,
    model: Option<String>,
    fault: Option<&FaultKind>,
) -> Result<Reply, &'static str> {
    let Some(raw_messages) = request.get("messages").and_then(Value::as_array) else {
        return Err("'messages' is a required property.");
    };
    let messages: Vec<Message> = raw_messages
        .iter()
        .map(|m| Message {
            role: m.get("role").and_then(Value::as_str).unwrap_or("user").to_string(),
            content: content_text(m.get("content").unwrap_or(&Value::Null)),
        })
        .collect();
    let ans = answers::answer(&messages, request.get("response_format"));
    let mut content = ans.content;
    let mut finish = "stop";
    match fault {
        Some(FaultKind::Malformed) => content = malform(&content),
        Some(FaultKind::Truncated) => {
            content = cut_half(&content);
            finish = "length";
        }
        Some(FaultKind::Empty) => content.clear(),
        Some(FaultKind::Huge { bytes }) => content = "ghost ".repeat(bytes / 6 + 1)[..*bytes].to_string(),
        _ => {}
    }
    let prompt_tokens: u64 = messages.iter().map(|m| count_tokens(&m.content)).sum();
    let completion_tokens = count_tokens(&content);
    {
        let mut s = shared.stats.lock().unwrap();
        s.prompt_tokens += prompt_tokens;
        s.completion_tokens += completion_tokens;
        *s.by_kind.entry(ans.class.to_string()).or_default() += 1;
    }
    if let (Some(prompts), Some(last)) = (&shared.prompts, messages.last()) {
        prompts.lock().unwrap().push((ans.class.to_string(), last.content.clone()));
    }
    let model = model.unwrap_or_else(|| "mock-chat".into());
    let digest = Sha256::digest(format!("{model}\u{1f}{content}").as_bytes());
    let id = digest[..12].iter().map(|b| format!("{b:02x}")).collect::<String>();
    let words: Vec<&str> = content.split_inclusive(char::is_whitespace).collect();
    let pieces = words.chunks(8).map(|group| group.concat()).collect();
    Ok(Reply { id, model, content, finish, prompt_tokens, completion_tokens, pieces })
}

/// A chat completion, or its stream of chunks when the request asks.
fn openai_chat(reply: &Reply, request: &Value) -> Resp {
    let (id, model) = (format!("chatcmpl-{}", reply.id), &reply.model);
    let usage = json!({
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    });
    if request.get("stream").and_then(Value::as_bool) == Some(true) {
        let include_usage = request.pointer("/stream_options/include_usage").and_then(Value::as_bool) == Some(true);
        let chunk = |delta: Value, finish: Option<&str>| {
            json!({
                "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            })
        };
        let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        for piece in &reply.pieces {
            events.push(chunk(json!({"content": piece}), None));
        }
        events.push(chunk(json!({}), Some(reply.finish)));
        if include_usage {
            events.push(json!({
                "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [], "usage": usage,
            }));
        }
        let mut q: VecDeque<Bytes> = events.iter().map(|e| Bytes::from(format!("data: {e}\n\n"))).collect();
        q.push_back(Bytes::from_static(b"data: [DONE]\n\n"));
        return sse(q);
    }
    json_response(
        StatusCode::OK,
        &json!({
            "id": id,
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": reply.finish,
            }],
            "usage": usage,
        }),
    )
}

#[derive(Serialize)]
#[serde(untagged)]
enum EmbeddingValue {
    Floats(Vec<f32>),
    Base64(String),
}

#[derive(Serialize)]
struct EmbeddingItem {
    object: &'static str,
    index: usize,
    embedding: EmbeddingValue,
}

#[derive(Serialize)]
struct EmbeddingUsage {
    prompt_tokens: u64,
    total_tokens: u64,
}

#[derive(Serialize)]
struct EmbeddingResponse {
    object: &'static str,
    data: Vec<EmbeddingItem>,
    model: String,
    usage: EmbeddingUsage,
}

fn token_ids_text(a: &[Value]) -> String {
    a.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(" ")
}

/// The vectors of an embeddings request's inputs (OpenAI's form) and their
/// tokens, or why it is refused.
fn embed_texts(shared: &Shared, request: &Value) -> Result<(Vec<Vec<f32>>, u64), &'static str> {
    let texts: Vec<String> = match request.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) if a.iter().all(Value::is_number) && !a.is_empty() => {
            vec![token_ids_text(a)]
        }
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                Value::String(s) => s.clone(),
                Value::Array(ids) => token_ids_text(ids),
                other => other.to_string(),
            })
            .collect(),
        _ => Vec::new(),
    };
    if texts.is_empty() {
        return Err("'input' is a required property and must not be empty.");
    }
    let dim = request
        .get("dimensions")
        .and_then(Value::as_u64)
        .filter(|d| (1..=65536).contains(d))
        .map_or(shared.embed_dim, |d| d as usize);
    let tokens: u64 = texts.iter().map(|t| count_tokens(t)).sum();
    {
        let mut s = shared.stats.lock().unwrap();
        s.embedded_texts += texts.len() as u64;
        s.prompt_tokens += tokens;
    }
    Ok((texts.iter().map(|t| embed::embed(t, dim)).collect(), tokens))
}

/// An OpenAI embeddings answer: numbers, or base64 when the request asks.
fn openai_embeddings(
    shared: &Shared,
    request: &Value,
    model: Option<String>,
    vectors: Vec<Vec<f32>>,
    tokens: u64,
) -> Vec<u8> {
    let base64 = request.get("encoding_format").and_then(Value::as_str) == Some("base64");
    shared.stats.lock().unwrap().base64_embedding_requests += u64::from(base64);
    let data: Vec<EmbeddingItem> = vectors
        .into_iter()
        .enumerate()
        .map(|(index, v)| EmbeddingItem {
            object: "embedding",
            index,
            embedding: if base64 { EmbeddingValue::Base64(embed::to_base64(&v)) } else { EmbeddingValue::Floats(v) },
        })
        .collect();
    let resp = EmbeddingResponse {
        object: "list",
        data,
        model: model.unwrap_or_else(|| "mock-embedding".into()),
        usage: EmbeddingUsage { prompt_tokens: tokens, total_tokens: tokens },
    };
    serde_json::to_vec(&resp).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let openai = Wire::OpenAi { deployment: None };
        assert!(matches!(route("/v1/chat/completions", ""), Route::Api(Endpoint::Chat, w) if w == openai));
        assert!(matches!(route("/v1/embeddings/", ""), Route::Api(Endpoint::Embeddings, w) if w == openai));
        assert!(matches!(route("/chat/completions", ""), Route::NotFound), "the API is under /v1 only");
        match route("/openai/deployments/gpt4o/chat/completions", "api-version=1") {
            Route::Api(Endpoint::Chat, Wire::OpenAi { deployment: Some(d) }) => assert_eq!(d, "gpt4o"),
            _ => panic!(),
        }
        assert!(matches!(
            route("/openai/deployments/emb/embeddings", ""),
            Route::Api(Endpoint::Embeddings, Wire::OpenAi { deployment: Some(_) })
        ));
        assert!(matches!(route("/v1/messages", ""), Route::Api(Endpoint::Chat, Wire::Anthropic)));
        assert!(
            matches!(route("/models/embeddings", "api-version=2024-05-01-preview"), Route::Api(Endpoint::Embeddings, w) if w == openai)
        );
        assert!(matches!(route("/models/chat/completions", ""), Route::NotFound), "api-version is required");
        assert!(matches!(route("/v2/foo", ""), Route::NotFound));
    }

    #[test]
    fn mixed_faults_take_turns() {
        let shared = crate::Shared::new(&crate::MockConfig {
            faults: vec![crate::FaultRule::always(FaultKind::Mixed).every(2)],
            ..crate::MockConfig::default()
        });
        let picked: Vec<Option<FaultKind>> = (0..8).map(|_| shared.pick_fault(Endpoint::Chat)).collect();
        let (m, t, e) = (Some(FaultKind::Malformed), Some(FaultKind::Truncated), Some(FaultKind::Empty));
        assert_eq!(picked, [None, m.clone(), None, t, None, e, None, m]);
    }

    #[test]
    fn broken_content() {
        let m = malform("{\"a\": 1}");
        assert!(serde_json::from_str::<Value>(&m).is_err());
        assert!(m.contains("{\"a\": 1"));
        assert!(serde_json::from_str::<Value>(&malform("records")).is_err());
        assert_eq!(cut_half("abcdé"), "ab");
    }
}
