//! Chat APIs over the index, for clients that speak only those: Ollama's
//! (`/api/version`, `/api/tags`, `/api/chat`, `/api/generate`; the model is
//! `graphrag-rs:latest`, and a request naming any model is answered) and
//! OpenAI's `/v1/chat/completions`. As in LightRAG, a message starting
//! with `/local `, `/global `, `/naive `, `/basic `, `/drift `, `/hybrid `
//! or `/mix ` picks the search method (default mix); `/localcontext` and
//! the like return the retrieved context instead of an answer.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use graphrag_query::Method;
use hyper::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};

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
    #[serde(default)]
    content: String,
}

/// The question (the last user message, its prefix read) and the history.
fn conversation(messages: Vec<ChatMessage>) -> Result<Ask> {
    let Some(last) = messages.iter().rposition(|m| m.role == "user") else {
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "`messages` has no user message"));
    };
    let (method, context_only, question) = parse_prefix(&messages[last].content)?;
    let history = messages[..last]
        .iter()
        .filter(|m| m.role == "user" || m.role == "assistant")
        .map(|m| (m.role.clone(), m.content.clone()))
        .collect();
    Ok(Ask { method, question, history, context_only, response_type: None, community_level: None })
}

pub fn version() -> Result<Resp> {
    http::json(json!({ "version": OLLAMA_VERSION }))
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
    let req: OllamaChat = http::parse_json(body)?;
    let ask = conversation(req.messages)?;
    let model = req.model.unwrap_or_else(|| MODEL.into());
    ollama(state, ask, req.stream.unwrap_or(true), model, chat_piece).await
}

/// `POST /api/generate`: the prompt as a question to the index (the
/// system prompt, if any, is left out: the search methods have their own).
pub async fn ollama_generate(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: OllamaGenerate = http::parse_json(body)?;
    let _ = req.system;
    let (method, context_only, question) = parse_prefix(&req.prompt)?;
    let ask = Ask { method, question, history: Vec::new(), context_only, response_type: None, community_level: None };
    let model = req.model.unwrap_or_else(|| MODEL.into());
    ollama(state, ask, req.stream.unwrap_or(true), model, generate_piece).await
}

#[derive(Deserialize)]
struct OpenAiChat {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    stream: Option<bool>,
}

/// `GET /v1/models`.
pub fn openai_models() -> Result<Resp> {
    http::json(
        json!({"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "graphrag-rs"}]}),
    )
}

/// `POST /v1/chat/completions` (SSE when `"stream": true`).
pub async fn openai_chat(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: OpenAiChat = http::parse_json(body)?;
    let ask = conversation(req.messages)?;
    let model = req.model.unwrap_or_else(|| MODEL.into());
    let created = chrono::Utc::now().timestamp();
    let id = format!("chatcmpl-{created}{:x}", std::process::id());
    if !req.stream.unwrap_or(false) {
        let a = query::ask(state, ask, None).await?;
        return http::json(json!({
            "id": id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": a.text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": a.prompt_tokens, "completion_tokens": a.completion_tokens,
                      "total_tokens": a.prompt_tokens + a.completion_tokens},
        }));
    }
    let (resp, tx) = http::stream("text/event-stream");
    let chunk = move |delta: Value, finish: Value| {
        let v = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        Bytes::from(format!("data: {v}\n\n"))
    };
    let _ = tx.send(chunk(json!({"role": "assistant", "content": ""}), Value::Null));
    let pieces = tx.clone();
    let piece_chunk = chunk.clone();
    let tokens: Tokens = Box::new(move |text| {
        let _ = pieces.send(piece_chunk(json!({ "content": text }), Value::Null));
    });
    let state = state.clone();
    tokio::spawn(async move {
        let Some(answered) = http::until_closed(&tx, query::ask(&state, ask, Some(tokens))).await else { return };
        match answered {
            Ok(a) => {
                if !a.llm_generated {
                    let _ = tx.send(chunk(json!({ "content": a.text }), Value::Null));
                }
                let _ = tx.send(chunk(json!({}), json!("stop")));
            }
            Err(e) => {
                let _ = tx.send(Bytes::from(format!("data: {}\n\n", json!({"error": {"message": e.message}}))));
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
}
