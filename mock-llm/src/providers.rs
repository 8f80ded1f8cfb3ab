//! Anthropic's Messages API, Google's Gemini API (and Gemini on Vertex AI)
//! and Amazon Bedrock's Converse and InvokeModel APIs, as their documents describe them: each
//! request is checked for what the real API requires,
//! read into the OpenAI form the answers are made from (so every provider
//! gets the same answer to the same conversation), and the answer, its
//! stream and its errors are written back in the provider's own format.

use std::collections::VecDeque;

use bytes::Bytes;
use hyper::header::HeaderMap;
use serde_json::{json, Map, Value};

use crate::response::{json_response, sse, Resp};
use crate::Endpoint;

/// Which API a request came in through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wire {
    /// OpenAI's, with Azure's deployment name when the URL has one.
    OpenAi { deployment: Option<String> },
    /// `POST /v1/messages`.
    Anthropic,
    /// `POST /v1beta/models/{model}:{method}` (or `/v1/...`); on Vertex AI
    /// (`vertex`), `POST /v1/projects/{project}/locations/{location}/publishers/google/models/{model}:{method}`.
    Gemini { model: String, method: GeminiMethod, vertex: bool },
    /// `POST /model/{modelId}/converse`, or an embedding model's
    /// `POST /model/{modelId}/invoke` (`invoke`).
    Bedrock { model: String, invoke: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GeminiMethod {
    Generate,
    /// `streamGenerateContent`; `sse`: asked with `alt=sse` (else a JSON array of chunks).
    Stream {
        sse: bool,
    },
    Embed,
    BatchEmbed,
    /// Vertex AI's embeddings (`:predict`, `instances[].content`).
    Predict,
}

/// `%XX` sequences decoded (a Bedrock model id's `%3A`, a form's fields).
pub(crate) fn percent_decoded(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The Anthropic, Gemini and Bedrock routes (`path` without trailing slash).
pub(crate) fn route(path: &str, query: &str) -> Option<(Endpoint, Wire)> {
    if path == "/v1/messages" {
        return Some((Endpoint::Chat, Wire::Anthropic));
    }
    if let Some(rest) = path.strip_prefix("/model/") {
        let (model, method) = rest.rsplit_once('/')?;
        let model = percent_decoded(model);
        return match method {
            "converse" => Some((Endpoint::Chat, Wire::Bedrock { model, invoke: false })),
            "invoke" => Some((Endpoint::Embeddings, Wire::Bedrock { model, invoke: true })),
            _ => None,
        };
    }
    let (rest, vertex) = match vertex_model(path) {
        Some(rest) => (rest, true),
        None => (path.strip_prefix("/v1beta/models/").or_else(|| path.strip_prefix("/v1/models/"))?, false),
    };
    let (model, method) = rest.split_once(':')?;
    let sse = query.split('&').any(|pair| pair == "alt=sse");
    let (endpoint, method) = match method {
        "generateContent" => (Endpoint::Chat, GeminiMethod::Generate),
        "streamGenerateContent" => (Endpoint::Chat, GeminiMethod::Stream { sse }),
        "embedContent" if !vertex => (Endpoint::Embeddings, GeminiMethod::Embed),
        "batchEmbedContents" if !vertex => (Endpoint::Embeddings, GeminiMethod::BatchEmbed),
        "predict" if vertex => (Endpoint::Embeddings, GeminiMethod::Predict),
        _ => return None,
    };
    Some((endpoint, Wire::Gemini { model: model.to_string(), method, vertex }))
}

/// `{model}:{method}` of a Vertex AI path, `/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:{method}`.
fn vertex_model(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/v1/projects/")?;
    let mut parts = rest.splitn(6, '/');
    let (_project, locations, _location) = (parts.next()?, parts.next()?, parts.next()?);
    let (publishers, google, models) = (parts.next()?, parts.next()?, parts.next()?);
    let (publisher_path, model) = models.split_once('/')?;
    let well_formed = locations == "locations" && publishers == "publishers" && google == "google";
    (well_formed && publisher_path == "models").then_some(model)
}

/// The text of Anthropic content (a string or text blocks) or Gemini parts.
fn text_of(content: &Value, field: &str) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b.get(field).and_then(Value::as_str)).collect(),
        _ => String::new(),
    }
}

/// The OpenAI request a provider's request amounts to, or why the provider
/// would refuse it (a 400).
pub(crate) fn to_openai(wire: &Wire, request: Value, headers: &HeaderMap) -> Result<Value, String> {
    match wire {
        Wire::OpenAi { .. } => Ok(request),
        Wire::Anthropic => anthropic_request(&request, headers),
        Wire::Bedrock { model, invoke: false } => converse_request(model, &request, headers),
        Wire::Bedrock { model, invoke: true } => invoke_request(model, &request, headers),
        Wire::Gemini { model, method: GeminiMethod::Predict, .. } => predict_request(model, &request),
        Wire::Gemini { model, method: GeminiMethod::Embed, .. } => {
            Ok(json!({"model": model, "input": [gemini_text(&request)?]}))
        }
        Wire::Gemini { model, method: GeminiMethod::BatchEmbed, .. } => {
            let requests = request.get("requests").and_then(Value::as_array).ok_or("requests: required")?;
            let mut input = Vec::new();
            for r in requests {
                if r.get("model").and_then(Value::as_str) != Some(&format!("models/{model}")) {
                    return Err(format!("requests[].model must be models/{model}, the model of the URL"));
                }
                input.push(gemini_text(r)?);
            }
            let mut openai = json!({"model": model, "input": input});
            if let Some(d) = requests.first().and_then(|r| r.get("outputDimensionality")) {
                openai["dimensions"] = d.clone();
            }
            Ok(openai)
        }
        Wire::Gemini { model, method: GeminiMethod::Stream { sse: false } | GeminiMethod::Generate, .. } => {
            gemini_request(model, &request)
        }
        Wire::Gemini { model, method: GeminiMethod::Stream { sse: true }, .. } => {
            let mut openai = gemini_request(model, &request)?;
            openai["stream"] = true.into();
            Ok(openai)
        }
    }
}

fn anthropic_request(request: &Value, headers: &HeaderMap) -> Result<Value, String> {
    if !headers.contains_key("anthropic-version") {
        return Err("anthropic-version: header is required".into());
    }
    if !request.get("max_tokens").is_some_and(Value::is_u64) {
        return Err("max_tokens: Field required".into());
    }
    let mut messages = Vec::new();
    if let Some(system) = request.get("system") {
        messages.push(json!({"role": "system", "content": text_of(system, "text")}));
    }
    let turns = request.get("messages").and_then(Value::as_array).ok_or("messages: Field required")?;
    for (i, m) in turns.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if role != "user" && role != "assistant" {
            return Err(format!("messages.{i}.role: Input should be 'user' or 'assistant'"));
        }
        messages.push(json!({"role": role, "content": text_of(m.get("content").unwrap_or(&Value::Null), "text")}));
    }
    for key in ["response_format", "seed", "stream_options"] {
        if request.get(key).is_some() {
            return Err(format!("{key}: Extra inputs are not permitted"));
        }
    }
    Ok(json!({
        "model": request.get("model").cloned().unwrap_or(Value::Null),
        "messages": messages,
        "stream": request.get("stream").and_then(Value::as_bool).unwrap_or(false),
    }))
}

/// Converse's request fields; any other is refused, as Bedrock refuses it.
const CONVERSE_FIELDS: [&str; 10] = [
    "messages",
    "system",
    "inferenceConfig",
    "additionalModelRequestFields",
    "toolConfig",
    "guardrailConfig",
    "promptVariables",
    "additionalModelResponseFieldPaths",
    "requestMetadata",
    "performanceConfig",
];

/// Whether a Bedrock request is signed (the mock checks that a SigV4
/// signature is there, not its value: the engine's test compares it with botocore's).
fn signed(headers: &HeaderMap) -> Result<(), String> {
    let signed = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.starts_with("AWS4-HMAC-SHA256 Credential="));
    if !signed || !headers.contains_key("x-amz-date") {
        return Err("Missing Authentication Token".into());
    }
    Ok(())
}

/// The first key of `request` not in `fields`, refused as Bedrock refuses it.
fn only(request: &Value, fields: &[&str]) -> Result<(), String> {
    match request.as_object().into_iter().flatten().map(|(k, _)| k).find(|k| !fields.contains(&k.as_str())) {
        Some(extra) => Err(format!("extraneous key [{extra}] is not permitted")),
        None => Ok(()),
    }
}

/// A signed Converse request.
fn converse_request(model: &str, request: &Value, headers: &HeaderMap) -> Result<Value, String> {
    signed(headers)?;
    only(request, &CONVERSE_FIELDS)?;
    let mut messages = Vec::new();
    if let Some(system) = request.get("system") {
        messages.push(json!({"role": "system", "content": text_of(system, "text")}));
    }
    for m in request.get("messages").and_then(Value::as_array).ok_or("messages: required")? {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        messages.push(json!({"role": role, "content": text_of(m.get("content").unwrap_or(&Value::Null), "text")}));
    }
    Ok(json!({"model": model, "messages": messages}))
}

/// A signed InvokeModel request of an embedding model: Titan's (`inputText`,
/// one text) or Cohere's (`texts`, at most 96, and the `input_type` it requires).
fn invoke_request(model: &str, request: &Value, headers: &HeaderMap) -> Result<Value, String> {
    signed(headers)?;
    let (input, dimensions) = if model.contains("cohere.embed") {
        only(request, &["texts", "input_type", "truncate", "embedding_types", "output_dimension", "images"])?;
        let texts = request.get("texts").and_then(Value::as_array).ok_or("texts: required")?;
        if texts.is_empty() || texts.len() > 96 || !texts.iter().all(Value::is_string) {
            return Err("texts: between 1 and 96 strings".into());
        }
        let kinds = ["search_document", "search_query", "classification", "clustering"];
        if !request.get("input_type").and_then(Value::as_str).is_some_and(|t| kinds.contains(&t)) {
            return Err(format!("input_type: required, one of {}", kinds.join(", ")));
        }
        (texts.clone(), request.get("output_dimension"))
    } else if model.contains("titan-embed") {
        only(request, &["inputText", "dimensions", "normalize", "embeddingTypes"])?;
        let text = request.get("inputText").filter(|t| t.is_string()).ok_or("inputText: required")?;
        (vec![text.clone()], request.get("dimensions"))
    } else {
        return Err("The provided model identifier is invalid.".into());
    };
    let mut openai = json!({"model": model, "input": input});
    if let Some(d) = dimensions {
        openai["dimensions"] = d.clone();
    }
    Ok(openai)
}

/// A Vertex AI `:predict` request of a text-embedding model: `instances[].content`,
/// `parameters.outputDimensionality`.
fn predict_request(model: &str, request: &Value) -> Result<Value, String> {
    let instances = request.get("instances").and_then(Value::as_array).ok_or("instances: required")?;
    let mut input = Vec::new();
    for (i, instance) in instances.iter().enumerate() {
        let content = instance.get("content").and_then(Value::as_str);
        input.push(content.ok_or_else(|| format!("instances[{i}].content: required"))?);
    }
    let mut openai = json!({"model": model, "input": input});
    if let Some(d) = request.pointer("/parameters/outputDimensionality") {
        openai["dimensions"] = d.clone();
    }
    Ok(openai)
}

/// The text of a Gemini embedContent request (or one of a batch).
fn gemini_text(request: &Value) -> Result<String, String> {
    let parts = request.pointer("/content/parts").ok_or("content.parts: required")?;
    Ok(text_of(parts, "text"))
}

fn gemini_request(model: &str, request: &Value) -> Result<Value, String> {
    let mut messages = Vec::new();
    if let Some(system) = request.pointer("/systemInstruction/parts") {
        messages.push(json!({"role": "system", "content": text_of(system, "text")}));
    }
    let contents = request.get("contents").and_then(Value::as_array).ok_or("contents: required")?;
    for (i, c) in contents.iter().enumerate() {
        let role = match c.get("role").and_then(Value::as_str) {
            Some("user") | None => "user",
            Some("model") => "assistant",
            Some(other) => return Err(format!("contents[{i}].role: `{other}` is not user or model")),
        };
        messages.push(json!({"role": role, "content": text_of(c.get("parts").unwrap_or(&Value::Null), "text")}));
    }
    let mut openai = json!({"model": model, "messages": messages});
    if request.pointer("/generationConfig/responseMimeType").and_then(Value::as_str) == Some("application/json") {
        openai["response_format"] = json!({"type": "json_object"});
    }
    Ok(openai)
}

/// A chat answer before it is written in a wire format.
pub(crate) struct Reply {
    pub id: String,
    pub model: String,
    pub content: String,
    /// In OpenAI's words: `stop` or `length`.
    pub finish: &'static str,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The answer in the pieces a stream sends.
    pub pieces: Vec<String>,
}

pub(crate) fn anthropic_chat(reply: &Reply, stream: bool) -> Resp {
    let stop = if reply.finish == "length" { "max_tokens" } else { "end_turn" };
    let message = |content: Value, stop: Option<&str>, output_tokens: u64| {
        json!({
            "id": format!("msg_{}", reply.id), "type": "message", "role": "assistant", "model": reply.model,
            "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": output_tokens},
        })
    };
    if !stream {
        return json_response(
            hyper::StatusCode::OK,
            &message(json!([{"type": "text", "text": reply.content}]), Some(stop), reply.completion_tokens),
        );
    }
    let mut events = vec![
        json!({"type": "message_start", "message": message(json!([]), None, 1)}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
    ];
    for piece in &reply.pieces {
        events.push(json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}));
    }
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.push(json!({
        "type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
        "usage": {"output_tokens": reply.completion_tokens},
    }));
    events.push(json!({"type": "message_stop"}));
    sse(events
        .iter()
        .map(|e| Bytes::from(format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or(""))))
        .collect())
}

pub(crate) fn gemini_chat(reply: &Reply, method: GeminiMethod) -> Resp {
    let chunk = |text: &str, last: bool| {
        let mut candidate = json!({"content": {"role": "model", "parts": [{"text": text}]}, "index": 0});
        if last {
            candidate["finishReason"] = if reply.finish == "length" { "MAX_TOKENS" } else { "STOP" }.into();
        }
        json!({
            "candidates": [candidate],
            "usageMetadata": {
                "promptTokenCount": reply.prompt_tokens,
                "candidatesTokenCount": reply.completion_tokens,
                "totalTokenCount": reply.prompt_tokens + reply.completion_tokens,
            },
            "modelVersion": reply.model,
        })
    };
    let GeminiMethod::Stream { sse: as_events } = method else {
        return json_response(hyper::StatusCode::OK, &chunk(&reply.content, true));
    };
    let n = reply.pieces.len();
    let chunks: Vec<Value> = if n == 0 {
        vec![chunk("", true)]
    } else {
        reply.pieces.iter().enumerate().map(|(i, p)| chunk(p, i + 1 == n)).collect()
    };
    if !as_events {
        return json_response(hyper::StatusCode::OK, &chunks);
    }
    sse(chunks.iter().map(|c| Bytes::from(format!("data: {c}\r\n\r\n"))).collect::<VecDeque<_>>())
}

pub(crate) fn converse_chat(reply: &Reply) -> Resp {
    json_response(
        hyper::StatusCode::OK,
        &json!({
            "output": {"message": {"role": "assistant", "content": [{"text": reply.content}]}},
            "stopReason": if reply.finish == "length" { "max_tokens" } else { "end_turn" },
            "usage": {
                "inputTokens": reply.prompt_tokens,
                "outputTokens": reply.completion_tokens,
                "totalTokens": reply.prompt_tokens + reply.completion_tokens,
            },
            "metrics": {"latencyMs": 0},
        }),
    )
}

/// An InvokeModel answer of an embedding model: Titan's one vector and its
/// tokens, or Cohere's vectors of `texts`.
pub(crate) fn bedrock_embeddings(model: &str, vectors: Vec<Vec<f32>>, texts: Vec<String>, tokens: u64) -> Vec<u8> {
    // Typed, so that each f32 is written as an f32 (a `Value` would widen it).
    #[derive(serde::Serialize)]
    #[serde(untagged)]
    enum Answer {
        Titan {
            embedding: Vec<f32>,
            #[serde(rename = "inputTextTokenCount")]
            tokens: u64,
        },
        Cohere {
            id: String,
            embeddings: Vec<Vec<f32>>,
            texts: Vec<String>,
            response_type: &'static str,
        },
    }
    let answer = if model.contains("cohere.embed") {
        Answer::Cohere { id: "mock-embed".into(), embeddings: vectors, texts, response_type: "embeddings_floats" }
    } else {
        Answer::Titan { embedding: vectors.into_iter().next().unwrap_or_default(), tokens }
    };
    serde_json::to_vec(&answer).unwrap_or_default()
}

/// A Vertex AI `:predict` answer: each text's vector and its tokens.
pub(crate) fn vertex_predictions(vectors: Vec<Vec<f32>>, tokens: Vec<u64>) -> Vec<u8> {
    // Typed, so that each f32 is written as an f32 (a `Value` would widen it).
    #[derive(serde::Serialize)]
    struct Statistics {
        token_count: u64,
        truncated: bool,
    }
    #[derive(serde::Serialize)]
    struct Embeddings {
        values: Vec<f32>,
        statistics: Statistics,
    }
    #[derive(serde::Serialize)]
    struct Prediction {
        embeddings: Embeddings,
    }
    #[derive(serde::Serialize)]
    struct Answer {
        predictions: Vec<Prediction>,
    }
    let predictions = vectors
        .into_iter()
        .zip(tokens)
        .map(|(values, token_count)| Prediction {
            embeddings: Embeddings { values, statistics: Statistics { token_count, truncated: false } },
        })
        .collect();
    serde_json::to_vec(&Answer { predictions }).unwrap_or_default()
}

/// An embedContent or batchEmbedContents answer.
pub(crate) fn gemini_embeddings(vectors: Vec<Vec<f32>>, method: GeminiMethod) -> Vec<u8> {
    // Typed, so that each f32 is written as an f32 (a `Value` would widen it).
    #[derive(serde::Serialize)]
    struct Values {
        values: Vec<f32>,
    }
    #[derive(serde::Serialize)]
    enum Answer {
        #[serde(rename = "embedding")]
        One(Values),
        #[serde(rename = "embeddings")]
        Batch(Vec<Values>),
    }
    let mut all = vectors.into_iter().map(|values| Values { values });
    let answer = match method {
        GeminiMethod::Embed => Answer::One(all.next().unwrap_or(Values { values: Vec::new() })),
        _ => Answer::Batch(all.collect()),
    };
    // An externally tagged enum is `{"embedding": ...}` or `{"embeddings": [...]}`.
    serde_json::to_vec(&answer).unwrap_or_default()
}

/// The AWS exception Bedrock answers with `status`.
pub(crate) fn aws_exception(status: u16) -> &'static str {
    match status {
        400 => "ValidationException",
        403 => "AccessDeniedException",
        404 => "ResourceNotFoundException",
        408 => "ModelTimeoutException",
        429 => "ThrottlingException",
        503 => "ServiceUnavailableException",
        _ => "InternalServerException",
    }
}

/// An error body in the wire's format. `retry_after_ms`: a rate limit's
/// wait, which Gemini says in the body (`RetryInfo`) and the others in headers.
pub(crate) fn error_body(
    wire: &Wire,
    status: u16,
    ty: &str,
    code: Option<&str>,
    message: &str,
    retry_after_ms: Option<u64>,
) -> Value {
    match wire {
        Wire::OpenAi { .. } => json!({"error": {"message": message, "type": ty, "param": null, "code": code}}),
        // AWS's JSON errors: the message alone (the type is a header).
        Wire::Bedrock { .. } => json!({ "message": message }),
        Wire::Anthropic => {
            let kind = match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Wire::Gemini { .. } => {
            let status_name = match status {
                400 => "INVALID_ARGUMENT",
                401 => "UNAUTHENTICATED",
                403 => "PERMISSION_DENIED",
                404 => "NOT_FOUND",
                429 => "RESOURCE_EXHAUSTED",
                503 => "UNAVAILABLE",
                504 => "DEADLINE_EXCEEDED",
                _ => "INTERNAL",
            };
            let mut error = Map::new();
            error.insert("code".into(), status.into());
            error.insert("message".into(), message.into());
            error.insert("status".into(), status_name.into());
            if let Some(ms) = retry_after_ms {
                let delay = format!("{}s", ms as f64 / 1000.0);
                error.insert(
                    "details".into(),
                    json!([{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}]),
                );
            }
            json!({ "error": error })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_by_path() {
        assert_eq!(route("/v1/messages", ""), Some((Endpoint::Chat, Wire::Anthropic)));
        let gemini = |method| Wire::Gemini { model: "gemini-2.5-flash".into(), method, vertex: false };
        assert_eq!(
            route("/v1beta/models/gemini-2.5-flash:streamGenerateContent", "alt=sse"),
            Some((Endpoint::Chat, gemini(GeminiMethod::Stream { sse: true })))
        );
        assert_eq!(
            route("/v1/models/gemini-2.5-flash:batchEmbedContents", ""),
            Some((Endpoint::Embeddings, gemini(GeminiMethod::BatchEmbed)))
        );
        assert_eq!(route("/v1beta/models/gemini-2.5-flash:countTokens", ""), None);
        let vertex = "/v1/projects/p-1/locations/europe-west4/publishers/google/models/text-embedding-005:predict";
        let predict = Wire::Gemini { model: "text-embedding-005".into(), method: GeminiMethod::Predict, vertex: true };
        assert_eq!(route(vertex, ""), Some((Endpoint::Embeddings, predict)));
        assert_eq!(route("/v1/projects/p/locations/l/publishers/meta/models/m:predict", ""), None);
        assert_eq!(route("/v1beta/models/m:predict", ""), None, "predict is Vertex AI's");
        let titan = Wire::Bedrock { model: "amazon.titan-embed-text-v2:0".into(), invoke: true };
        assert_eq!(route("/model/amazon.titan-embed-text-v2%3A0/invoke", ""), Some((Endpoint::Embeddings, titan)));
    }

    #[test]
    fn requests_are_refused_as_the_real_apis_refuse_them() {
        let mut headers = HeaderMap::new();
        let ok = json!({"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
        assert!(to_openai(&Wire::Anthropic, ok.clone(), &headers).unwrap_err().contains("anthropic-version"));
        headers.insert("anthropic-version", "2023-06-01".parse().unwrap());
        let openai = to_openai(&Wire::Anthropic, ok.clone(), &headers).unwrap();
        assert_eq!(openai["messages"], json!([{"role": "user", "content": "hi"}]));
        let mut no_max = ok.clone();
        no_max.as_object_mut().unwrap().remove("max_tokens");
        assert!(to_openai(&Wire::Anthropic, no_max, &headers).unwrap_err().starts_with("max_tokens"));
        let system_turn = json!({"max_tokens": 10, "messages": [{"role": "system", "content": "x"}]});
        assert!(to_openai(&Wire::Anthropic, system_turn, &headers).is_err());
        let batch = Wire::Gemini { model: "e".into(), method: GeminiMethod::BatchEmbed, vertex: false };
        let wrong_model = json!({"requests": [{"model": "models/other", "content": {"parts": [{"text": "a"}]}}]});
        assert!(to_openai(&batch, wrong_model, &headers).is_err());
    }
}
