//! Chat APIs over the index, for clients that speak only those: Ollama's
//! (`/api/version`, `/api/tags`, `/api/chat`, `/api/generate`; the model is
//! `graphrag-rs:latest`, and a request naming any model is answered) and
//! OpenAI's `/v1/chat/completions`. As in LightRAG, a message starting
//! with `/local `, `/global `, `/naive `, `/basic `, `/drift `, `/hybrid `
//! or `/mix ` picks the search method (default mix); `/localcontext` and
//! the like return the retrieved context instead of an answer.
//!
//! Messages come as the SDKs send them: `content` a string, a list of
//! parts (text parts joined; image parts refused with 422) or null.
//! `/api/show` and `/v1/models/{model}` describe the one model;
//! `stream_options.include_usage` closes an OpenAI stream with the usage,
//! and Ollama's closing object has `prompt_eval_count` / `eval_count`.
//! Errors come in each API's own shape (`{"error": …}`), which its clients
//! read. Without a usable chat model questions are refused (`chat_model`).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use graphrag_query::Method;
use hyper::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::chat_model;
use crate::http::{self, ApiError, Resp, Result};
use crate::query::{self, Ask, Tokens};
use crate::state::State;

pub const MODEL: &str = "graphrag-rs:latest";
/// The Ollama version reported: one whose API this follows.
const OLLAMA_VERSION: &str = "0.9.0";

/// The method a message's prefix names, whether it asks for the context
/// only, and the question without the prefix.
pub fn parse_prefix(message: &str) -> Result<(Method, bool, String)> {
    let trimmed = message.trim_start();
    if let Some(rest) = trimmed.strip_prefix('/') {
        let word: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
        let (name, context_only) = match word.strip_suffix("context") {
            Some(name) if !name.is_empty() => (name, true),
            _ => (word.as_str(), false),
        };
        if let Ok(method) = query::method(name) {
            let question = rest[word.len()..].trim().to_string();
            return Ok((method, context_only, question));
        }
        if name.eq_ignore_ascii_case("bypass") {
            query::method(name)?;
        }
    }
    Ok((Method::Mix, false, message.trim().to_string()))
}

#[derive(Deserialize)]
struct ChatMessage {
    role: String,
    /// A string, a list of content parts (OpenAI), or null (an assistant
    /// turn that called tools): read by [`message_text`].
    #[serde(default)]
    content: Value,
    /// Ollama's base64 images of the message.
    #[serde(default)]
    images: Option<Vec<Value>>,
}

fn unprocessable(message: String) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)
}

/// A message's text: the string, the text parts joined by new lines, or ""
/// for null. Images are refused: answers come from the indexed text only.
fn message_text(i: usize, m: &ChatMessage) -> Result<String> {
    if m.images.as_ref().is_some_and(|images| !images.is_empty()) {
        return Err(unprocessable(format!(
            "messages[{i}].images: images are not served (the index answers from text only)"
        )));
    }
    match &m.content {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (j, part) in parts.iter().enumerate() {
                let at = format!("messages[{i}].content[{j}]");
                match part["type"].as_str() {
                    Some("text") => match part["text"].as_str() {
                        Some(text) => texts.push(text),
                        None => return Err(unprocessable(format!("{at}: a text part needs `text`, a string"))),
                    },
                    Some(kind @ ("image_url" | "image" | "input_image")) => {
                        return Err(unprocessable(format!(
                            "{at}: `{kind}` parts are not served (the index answers from text only): send text parts"
                        )))
                    }
                    Some(kind) => {
                        return Err(unprocessable(format!("{at}: `{kind}` parts are not served: send text parts")))
                    }
                    None => return Err(unprocessable(format!("{at}: a content part needs `type` (\"text\")"))),
                }
            }
            Ok(texts.join("\n"))
        }
        _ => Err(unprocessable(format!("messages[{i}].content must be a string, a list of content parts or null"))),
    }
}

/// The question (the last user message, its prefix read) and the history.
fn conversation(messages: Vec<ChatMessage>) -> Result<Ask> {
    let Some(last) = messages.iter().rposition(|m| m.role == "user") else {
        return Err(unprocessable("`messages` has no user message".into()));
    };
    let (method, context_only, question) = parse_prefix(&message_text(last, &messages[last])?)?;
    let mut history = Vec::new();
    for (i, m) in messages[..last].iter().enumerate() {
        if m.role == "user" || m.role == "assistant" {
            history.push((m.role.clone(), message_text(i, m)?));
        }
    }
    Ok(Ask {
        method,
        question,
        history,
        context_only,
        response_type: None,
        community_level: None,
        max_context_tokens: None,
        rerank: None,
    })
}

pub fn version() -> Result<Resp> {
    http::json(json!({ "version": OLLAMA_VERSION }))
}

/// Whether `name` is the model served (Ollama reads a name without a tag as `:latest`).
fn is_served_model(name: &str) -> bool {
    name.strip_suffix(":latest").unwrap_or(name) == MODEL.trim_end_matches(":latest")
}

/// An error as Ollama answers it, `{"error": message}`: its clients read
/// that key (`ollama.ResponseError`).
fn ollama_errors(result: Result<Resp>) -> Result<Resp> {
    result.or_else(|e| Ok(shaped_error(&e, json!({ "error": e.message }))))
}

/// An error as OpenAI answers it, `{"error": {message, type, param, code}}`:
/// the SDKs raise it with that message.
fn openai_errors(result: Result<Resp>) -> Result<Resp> {
    result.or_else(|e| {
        let kind = if e.status.is_server_error() { "server_error" } else { "invalid_request_error" };
        let code = (e.status == StatusCode::NOT_FOUND).then_some("model_not_found");
        Ok(shaped_error(&e, json!({"error": {"message": e.message, "type": kind, "param": null, "code": code}})))
    })
}

fn shaped_error(e: &ApiError, body: Value) -> Resp {
    if e.status.is_server_error() {
        tracing::warn!("{}", e.message);
    }
    http::json_status(e.status, &body)
}

fn model_details() -> Value {
    json!({
        "parent_model": "",
        "format": "graphrag",
        "family": "graphrag-rs",
        "families": ["graphrag-rs"],
        "parameter_size": "",
        "quantization_level": "",
    })
}

/// `GET /api/tags`.
pub fn tags() -> Result<Resp> {
    http::json(json!({
        "models": [{
            "name": MODEL,
            "model": MODEL,
            "modified_at": "2026-01-01T00:00:00Z",
            "size": 0,
            "digest": "0000000000000000000000000000000000000000000000000000000000000000",
            "details": model_details(),
        }]
    }))
}

/// `GET /api/ps`: the one model, always loaded.
pub fn ps() -> Result<Resp> {
    http::json(json!({
        "models": [{
            "name": MODEL, "model": MODEL, "size": 0, "size_vram": 0,
            "digest": "0000000000000000000000000000000000000000000000000000000000000000",
            "details": model_details(), "expires_at": "2099-01-01T00:00:00Z",
        }]
    }))
}

#[derive(Deserialize)]
struct OllamaShow {
    #[serde(default)]
    model: Option<String>,
    /// The field's name before Ollama 0.4.
    #[serde(default)]
    name: Option<String>,
}

/// `POST /api/show`: the served model's card; 404 for another name.
pub fn ollama_show(body: &[u8]) -> Result<Resp> {
    ollama_errors(show(body))
}

fn show(body: &[u8]) -> Result<Resp> {
    let req: OllamaShow = http::parse_json(body)?;
    let name = req.model.or(req.name).ok_or_else(|| unprocessable("`model` is required".into()))?;
    if !is_served_model(&name) {
        return Err(ApiError::not_found(format!("model '{name}' not found (this server serves {MODEL})")));
    }
    http::json(json!({
        "modelfile": format!("# {MODEL}: answers from a graphrag-rs index (a /local, /global, /naive, /drift, /hybrid or /mix prefix picks the search method)"),
        "parameters": "",
        "template": "{{ .Prompt }}",
        "details": model_details(),
        "model_info": {"general.architecture": "graphrag-rs", "general.basename": "graphrag-rs"},
        "capabilities": ["completion"],
        "modified_at": "2026-01-01T00:00:00Z",
    }))
}

#[derive(Deserialize)]
struct OllamaChat {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    stream: Option<bool>,
}

#[derive(Deserialize)]
struct OllamaGenerate {
    #[serde(default)]
    model: Option<String>,
    prompt: String,
    #[serde(default)]
    system: Option<String>,
    #[serde(default)]
    stream: Option<bool>,
}

fn nanos(since: Instant) -> u64 {
    since.elapsed().as_nanos() as u64
}

/// Ollama's closing statistics.
fn ollama_done(mut v: Value, started: Instant, a: Option<&query::Answer>) -> Value {
    let o = v.as_object_mut().expect("an object");
    o.insert("done".into(), json!(true));
    o.insert("done_reason".into(), json!("stop"));
    o.insert("total_duration".into(), json!(nanos(started)));
    o.insert("load_duration".into(), json!(0));
    o.insert("prompt_eval_count".into(), json!(a.map_or(0, |a| a.prompt_tokens)));
    o.insert("prompt_eval_duration".into(), json!(0));
    o.insert("eval_count".into(), json!(a.map_or(0, |a| a.completion_tokens)));
    o.insert("eval_duration".into(), json!(nanos(started)));
    v
}

/// Answers an Ollama request: one object, or NDJSON pieces and a closing
/// object. `piece` wraps a piece of text as the API's object.
async fn ollama(
    state: &Arc<State>,
    ask: Ask,
    stream: bool,
    model: String,
    piece: fn(&str, &str, &str) -> Value,
) -> Result<Resp> {
    chat_model::require(state, ask.method, ask.context_only)?;
    let started = Instant::now();
    let created = || crate::state::now();
    if !stream {
        let a = query::ask(state, ask, None).await?;
        return http::json(ollama_done(piece(&model, &created(), &a.text), started, Some(&a)));
    }
    let (resp, tx) = http::stream("application/x-ndjson");
    let line = |v: Value| Bytes::from(format!("{v}\n"));
    let pieces = tx.clone();
    let piece_model = model.clone();
    let tokens: Tokens = Box::new(move |text| {
        let mut v = piece(&piece_model, &created(), text);
        v["done"] = json!(false);
        let _ = pieces.send(line(v));
    });
    let state = state.clone();
    tokio::spawn(async move {
        let Some(answered) = http::until_closed(&tx, query::ask(&state, ask, Some(tokens))).await else { return };
        match answered {
            Ok(a) => {
                if !a.llm_generated {
                    let mut v = piece(&model, &created(), &a.text);
                    v["done"] = json!(false);
                    let _ = tx.send(line(v));
                }
                let _ = tx.send(line(ollama_done(piece(&model, &created(), ""), started, Some(&a))));
            }
            Err(e) => {
                let _ = tx.send(line(json!({ "error": e.message })));
            }
        }
    });
    Ok(resp)
}

fn chat_piece(model: &str, created: &str, text: &str) -> Value {
    json!({"model": model, "created_at": created, "message": {"role": "assistant", "content": text}})
}

fn generate_piece(model: &str, created: &str, text: &str) -> Value {
    json!({"model": model, "created_at": created, "response": text})
}

/// `POST /api/chat` (streams unless `"stream": false`, as Ollama).
pub async fn ollama_chat(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    ollama_errors(
        async {
            let req: OllamaChat = http::parse_json(body)?;
            let ask = conversation(req.messages)?;
            let model = req.model.unwrap_or_else(|| MODEL.into());
            ollama(state, ask, req.stream.unwrap_or(true), model, chat_piece).await
        }
        .await,
    )
}

/// `POST /api/generate`: the prompt as a question to the index (the
/// system prompt, if any, is left out: the search methods have their own).
pub async fn ollama_generate(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    ollama_errors(
        async {
            let req: OllamaGenerate = http::parse_json(body)?;
            let _ = req.system;
            let (method, context_only, question) = parse_prefix(&req.prompt)?;
            let ask = Ask {
                method,
                question,
                history: Vec::new(),
                context_only,
                response_type: None,
                community_level: None,
                max_context_tokens: None,
                rerank: None,
            };
            let model = req.model.unwrap_or_else(|| MODEL.into());
            ollama(state, ask, req.stream.unwrap_or(true), model, generate_piece).await
        }
        .await,
    )
}

#[derive(Deserialize)]
struct OpenAiChat {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
}

#[derive(Deserialize)]
struct StreamOptions {
    /// A closing chunk with the usage (and `"usage": null` on the others).
    #[serde(default)]
    include_usage: bool,
}

fn model_object() -> Value {
    json!({"id": MODEL, "object": "model", "created": 0, "owned_by": "graphrag-rs"})
}

/// `GET /v1/models`.
pub fn openai_models() -> Result<Resp> {
    http::json(json!({"object": "list", "data": [model_object()]}))
}

/// `GET /v1/models/{model}` (`model` percent-decoded); 404 for another.
pub fn openai_model(model: &str) -> Result<Resp> {
    openai_errors(if is_served_model(model) {
        http::json(model_object())
    } else {
        Err(ApiError::not_found(format!("The model `{model}` does not exist: this server serves {MODEL}")))
    })
}

fn usage(a: &query::Answer) -> Value {
    json!({"prompt_tokens": a.prompt_tokens, "completion_tokens": a.completion_tokens,
           "total_tokens": a.prompt_tokens + a.completion_tokens})
}

/// `POST /v1/chat/completions` (SSE when `"stream": true`).
pub async fn openai_chat(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    openai_errors(chat_completions(state, body).await)
}

async fn chat_completions(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: OpenAiChat = http::parse_json(body)?;
    let ask = conversation(req.messages)?;
    chat_model::require(state, ask.method, ask.context_only)?;
    let model = req.model.unwrap_or_else(|| MODEL.into());
    let created = chrono::Utc::now().timestamp();
    let id = format!("chatcmpl-{created}{:x}", std::process::id());
    if !req.stream.unwrap_or(false) {
        let a = query::ask(state, ask, None).await?;
        return http::json(json!({
            "id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": a.text}, "finish_reason": "stop"}],
            "usage": usage(&a),
        }));
    }
    let include_usage = req.stream_options.is_some_and(|o| o.include_usage);
    let (resp, tx) = http::stream("text/event-stream");
    let event = |v: Value| Bytes::from(format!("data: {v}\n\n"));
    let chunk = move |choices: Value, usage: Option<Value>| {
        let mut v = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                           "choices": choices});
        if include_usage {
            v["usage"] = usage.unwrap_or(Value::Null);
        }
        event(v)
    };
    let delta = |delta: Value, finish: Value| json!([{"index": 0, "delta": delta, "finish_reason": finish}]);
    let _ = tx.send(chunk(delta(json!({"role": "assistant", "content": ""}), Value::Null), None));
    let pieces = tx.clone();
    let piece_chunk = chunk.clone();
    let tokens: Tokens = Box::new(move |text| {
        let _ = pieces.send(piece_chunk(delta(json!({ "content": text }), Value::Null), None));
    });
    let state = state.clone();
    tokio::spawn(async move {
        let Some(answered) = http::until_closed(&tx, query::ask(&state, ask, Some(tokens))).await else { return };
        match answered {
            Ok(a) => {
                if !a.llm_generated {
                    let _ = tx.send(chunk(delta(json!({ "content": a.text }), Value::Null), None));
                }
                let _ = tx.send(chunk(delta(json!({}), json!("stop")), None));
                if include_usage {
                    let _ = tx.send(chunk(json!([]), Some(usage(&a))));
                }
            }
            Err(e) => {
                let _ = tx.send(event(json!({"error": {"message": e.message, "type": "server_error"}})));
            }
        }
        let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n"));
    });
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_pick_the_method() {
        let p = |m: &str| parse_prefix(m).unwrap();
        assert_eq!(p("/local Who is Scrooge?"), (Method::Local, false, "Who is Scrooge?".into()));
        assert_eq!(p("/naive x"), (Method::Basic, false, "x".into()));
        assert_eq!(p("/globalcontext x"), (Method::Global, true, "x".into()));
        assert_eq!(p("Who is Scrooge?"), (Method::Mix, false, "Who is Scrooge?".into()));
        assert_eq!(p("/unknown x"), (Method::Mix, false, "/unknown x".into()));
        assert!(parse_prefix("/bypass x").is_err());
    }

    fn message(v: Value) -> ChatMessage {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn content_is_a_string_text_parts_or_null() {
        let text = |v: Value| message_text(0, &message(v));
        assert_eq!(text(json!({"role": "user", "content": "hi"})).unwrap(), "hi");
        assert_eq!(text(json!({"role": "assistant", "content": null})).unwrap(), "");
        assert_eq!(text(json!({"role": "assistant"})).unwrap(), "");
        let parts = json!({"role": "user", "content": [{"type": "text", "text": "/local Who"}, {"type": "text", "text": "is Scrooge?"}]});
        assert_eq!(text(parts).unwrap(), "/local Who\nis Scrooge?");
    }

    #[test]
    fn images_and_malformed_parts_are_refused_by_their_place() {
        let err = |v: Value| message_text(2, &message(v)).unwrap_err();
        let image = json!({"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "image_url", "image_url": {"url": "data:"}}]});
        let e = err(image);
        assert_eq!(e.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(e.message.contains("messages[2].content[1]") && e.message.contains("image_url"), "{}", e.message);
        assert!(err(json!({"role": "user", "content": "x", "images": ["aGk="]}))
            .message
            .contains("messages[2].images"));
        assert!(err(json!({"role": "user", "content": [{"type": "input_audio"}]})).message.contains("input_audio"));
        assert!(err(json!({"role": "user", "content": [{"type": "text"}]})).message.contains("needs `text`"));
        assert!(err(json!({"role": "user", "content": [{"text": "x"}]})).message.contains("needs `type`"));
        assert!(err(json!({"role": "user", "content": 5})).message.contains("must be a string"));
        // An empty image list is no image.
        assert_eq!(message_text(0, &message(json!({"role": "user", "content": "x", "images": []}))).unwrap(), "x");
    }

    #[test]
    fn the_history_reads_parts_too() {
        let ask = conversation(vec![
            message(json!({"role": "system", "content": [{"type": "image_url"}]})),
            message(json!({"role": "user", "content": [{"type": "text", "text": "first"}]})),
            message(json!({"role": "assistant", "content": null})),
            message(json!({"role": "user", "content": [{"type": "text", "text": "/naive second"}]})),
        ])
        .unwrap();
        assert_eq!(ask.method, Method::Basic);
        assert_eq!(ask.question, "second");
        assert_eq!(ask.history, vec![("user".into(), "first".into()), ("assistant".into(), String::new())]);
    }

    #[test]
    fn the_served_model_is_named_with_or_without_its_tag() {
        assert!(is_served_model("graphrag-rs:latest") && is_served_model("graphrag-rs"));
        assert!(!is_served_model("graphrag-rs:7b") && !is_served_model("llama3"));
    }
}
