//! Anthropic's Messages API (`POST /v1/messages`): the system prompt beside
//! the messages, `max_tokens` required, answers as content blocks, streams
//! as typed events. Its 429 (rate limit) and 529 (overloaded) answers carry
//! `retry-after` in seconds, read by the transport like OpenAI's.

use serde_json::{json, Map, Value};

use super::wire::{split_messages, OPENAI_ONLY};
use super::Completion;
use crate::settings::ANTHROPIC_MAX_TOKENS;

/// The API version sent as `anthropic-version` (the current one; it fixes
/// the wire format, not the model).
pub(super) const VERSION: &str = "2023-06-01";

/// The Messages request for an OpenAI chat body. There is no JSON mode: the
/// prompts ask for JSON, and answers are checked (and repaired) as always.
pub(super) fn chat_body(body: &Value) -> Value {
    let (system, turns) = split_messages(body);
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, parts)| {
            let blocks: Vec<Value> = parts.into_iter().map(|text| json!({"type": "text", "text": text})).collect();
            json!({"role": role, "content": blocks})
        })
        .collect();
    let mut out = Map::new();
    for (k, v) in body.as_object().into_iter().flatten() {
        match k.as_str() {
            "messages" => {}
            // Sent, they are a 400 ("Extra inputs are not permitted").
            k if OPENAI_ONLY.contains(&k) => {}
            "max_completion_tokens" => {
                out.insert("max_tokens".into(), v.clone());
            }
            "stop" => {
                let stops = if v.is_string() { json!([v]) } else { v.clone() };
                out.insert("stop_sequences".into(), stops);
            }
            // Recent Claude models refuse temperature and top_p together;
            // 1.0 restricts nothing, so it is left out.
            "top_p" if v.as_f64() == Some(1.0) => {}
            _ => {
                out.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    out.entry("max_tokens").or_insert(ANTHROPIC_MAX_TOKENS.into());
    out.insert("messages".into(), messages.into());
    if !system.is_empty() {
        out.insert("system".into(), system.join("\n\n").into());
    }
    Value::Object(out)
}

/// What `stop_reason` says in OpenAI's words (the answer checks read those).
fn finish_reason(stop: &str) -> String {
    match stop {
        "end_turn" | "stop_sequence" => "stop",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "refusal" => "content_filter",
        other => other,
    }
    .to_string()
}

/// Input tokens, those read from and written to Anthropic's prompt cache included.
fn input_tokens(usage: &Value) -> Option<u64> {
    let n = |k: &str| usage.get(k).and_then(Value::as_u64);
    let input = n("input_tokens")?;
    Some(input + n("cache_creation_input_tokens").unwrap_or(0) + n("cache_read_input_tokens").unwrap_or(0))
}

/// A message's answer: its text blocks joined (thinking blocks are not the answer).
pub(super) fn completion(json: &Value) -> Result<Completion, String> {
    let blocks = json.get("content").and_then(Value::as_array).ok_or("response has no content blocks")?;
    let content = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b["text"].as_str());
    let usage = json.get("usage").unwrap_or(&Value::Null);
    Ok(Completion {
        content: content.collect(),
        prompt_tokens: input_tokens(usage).unwrap_or(0),
        completion_tokens: usage.get("output_tokens").and_then(Value::as_u64).unwrap_or(0),
        finish_reason: json.get("stop_reason").and_then(Value::as_str).map(finish_reason),
    })
}

/// One event of a streamed message: `message_start` (input tokens),
/// `content_block_delta` (text), `message_delta` (stop reason, output
/// tokens), `error` (an overload mid-stream); the others say nothing needed.
pub(super) fn stream_event(event: &Value, done: &mut Completion) -> Result<Option<String>, String> {
    match event.get("type").and_then(Value::as_str).unwrap_or("") {
        "message_start" => {
            let usage = event.pointer("/message/usage").unwrap_or(&Value::Null);
            done.prompt_tokens = input_tokens(usage).unwrap_or(done.prompt_tokens);
        }
        "content_block_delta" if event.pointer("/delta/type").and_then(Value::as_str) == Some("text_delta") => {
            return Ok(event.pointer("/delta/text").and_then(Value::as_str).map(str::to_string));
        }
        "message_delta" => {
            if let Some(stop) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                done.finish_reason = Some(finish_reason(stop));
            }
            if let Some(n) = event.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                done.completion_tokens = n;
            }
        }
        "error" => {
            let message = event.pointer("/error/message").and_then(Value::as_str).unwrap_or("no message");
            let kind = event.pointer("/error/type").and_then(Value::as_str).unwrap_or("error");
            return Err(format!("the server ended the stream: {kind}: {message}"));
        }
        _ => {}
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn openai_body() -> Value {
        json!({
            "model": "claude-sonnet-4-5",
            "messages": [
                {"role": "system", "content": "You extract entities."},
                {"role": "user", "content": "Text: Scrooge."},
            ],
            "temperature": 0.0,
            "top_p": 1.0,
            "response_format": {"type": "json_object"},
            "seed": 42,
            "stop": "###",
        })
    }

    #[test]
    fn requests_put_the_system_prompt_apart_and_always_say_max_tokens() {
        let body = chat_body(&openai_body());
        assert_eq!(
            body,
            json!({
                "model": "claude-sonnet-4-5",
                "system": "You extract entities.",
                "messages": [{"role": "user", "content": [{"type": "text", "text": "Text: Scrooge."}]}],
                "temperature": 0.0,
                "max_tokens": ANTHROPIC_MAX_TOKENS,
                "stop_sequences": ["###"],
            })
        );
        let mut asked = openai_body();
        asked["max_completion_tokens"] = 300.into();
        asked["top_p"] = 0.9.into();
        asked["stream"] = true.into();
        asked["stream_options"] = json!({"include_usage": true});
        let body = chat_body(&asked);
        assert_eq!((body["max_tokens"].as_u64(), body["top_p"].as_f64()), (Some(300), Some(0.9)));
        assert_eq!((body["stream"].as_bool(), body.get("stream_options")), (Some(true), None));
    }

    #[test]
    fn answers_join_their_text_blocks_and_say_why_they_stopped() {
        let answer = json!({
            "type": "message", "role": "assistant",
            "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "Scro"}, {"type": "text", "text": "oge"}],
            "stop_reason": "max_tokens",
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 3},
        });
        let c = completion(&answer).unwrap();
        assert_eq!(
            (c.content.as_str(), c.prompt_tokens, c.completion_tokens, c.finish_reason.as_deref()),
            ("Scrooge", 15, 3, Some("length"))
        );
        assert!(completion(&json!({"id": "x"})).is_err());
    }

    #[test]
    fn stream_events_give_text_tokens_and_errors() {
        let mut done = Completion::default();
        let events = [
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 12, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "ping"}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 7}}),
            json!({"type": "message_stop"}),
        ];
        let text: Vec<String> = events.iter().filter_map(|e| stream_event(e, &mut done).unwrap()).collect();
        assert_eq!(text, ["Hello"]);
        assert_eq!((done.prompt_tokens, done.completion_tokens, done.finish_reason.as_deref()), (12, 7, Some("stop")));
        let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert_eq!(
            stream_event(&overloaded, &mut done).unwrap_err(),
            "the server ended the stream: overloaded_error: Overloaded"
        );
    }
}
