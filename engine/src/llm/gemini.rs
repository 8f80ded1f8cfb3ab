//! Google's Gemini API: `models/{model}:generateContent` (and
//! `:streamGenerateContent?alt=sse`), `:batchEmbedContents`. The system
//! prompt is `systemInstruction`, the assistant's turns are the `model`'s,
//! sampling is `generationConfig` (JSON mode: `responseMimeType`), and a
//! 429 says how long to wait in its body (`RetryInfo.retryDelay`).

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::wire::{embedding_inputs, split_messages};
use super::Completion;
use crate::settings::duration_of_seconds;

/// OpenAI parameters and the `generationConfig` field each is.
const GENERATION: [(&str, &str); 8] = [
    ("temperature", "temperature"),
    ("top_p", "topP"),
    ("max_tokens", "maxOutputTokens"),
    ("max_completion_tokens", "maxOutputTokens"),
    ("seed", "seed"),
    ("presence_penalty", "presencePenalty"),
    ("frequency_penalty", "frequencyPenalty"),
    ("n", "candidateCount"),
];

/// Request fields that stand beside `generationConfig`, given as
/// `call_args` in Gemini's own words.
const TOP_LEVEL: [&str; 5] = ["safetySettings", "tools", "toolConfig", "cachedContent", "labels"];

/// Keys of the OpenAI body that are not parameters (the model is in the
/// URL), or that Gemini has no counterpart for.
const NOT_TAKEN: [&str; 8] =
    ["model", "messages", "stream", "stream_options", "response_format", "logit_bias", "user", "encoding_format"];

/// The generateContent request for an OpenAI chat body.
pub(super) fn chat_body(body: &Value) -> Value {
    let (system, turns) = split_messages(body);
    let contents: Vec<Value> = turns
        .into_iter()
        .map(|(role, parts)| {
            let role = if role == "assistant" { "model" } else { "user" };
            let parts: Vec<Value> = parts.into_iter().map(|text| json!({"text": text})).collect();
            json!({"role": role, "parts": parts})
        })
        .collect();
    let mut out = Map::new();
    let mut generation = Map::new();
    for (k, v) in body.as_object().into_iter().flatten() {
        if let Some((_, field)) = GENERATION.iter().find(|(openai, _)| openai == k) {
            generation.insert(field.to_string(), v.clone());
        } else if k == "stop" {
            let stops = if v.is_string() { json!([v]) } else { v.clone() };
            generation.insert("stopSequences".into(), stops);
        } else if TOP_LEVEL.contains(&k.as_str()) {
            out.insert(k.clone(), v.clone());
        } else if !NOT_TAKEN.contains(&k.as_str()) {
            // Gemini's own generationConfig fields (topK, thinkingConfig, ...).
            generation.insert(k.clone(), v.clone());
        }
    }
    let json_mode = body.pointer("/response_format/type").and_then(Value::as_str);
    if matches!(json_mode, Some("json_object" | "json_schema")) {
        generation.insert("responseMimeType".into(), "application/json".into());
    }
    out.insert("contents".into(), contents.into());
    if !system.is_empty() {
        out.insert("systemInstruction".into(), json!({"parts": [{"text": system.join("\n\n")}]}));
    }
    if !generation.is_empty() {
        out.insert("generationConfig".into(), Value::Object(generation));
    }
    Value::Object(out)
}

/// The batchEmbedContents request for an OpenAI embeddings body: one
/// request per input; `dimensions` is `outputDimensionality`, and other
/// `call_args` (`taskType`, ...) go into each request.
pub(super) fn embeddings_body(body: &Value) -> Value {
    let model = body.get("model").and_then(Value::as_str).unwrap_or("");
    let model = if model.starts_with("models/") { model.to_string() } else { format!("models/{model}") };
    let mut extra = Map::new();
    for (k, v) in body.as_object().into_iter().flatten() {
        match k.as_str() {
            "input" => {}
            "dimensions" => {
                extra.insert("outputDimensionality".into(), v.clone());
            }
            "task_type" => {
                extra.insert("taskType".into(), v.clone());
            }
            k if NOT_TAKEN.contains(&k) => {}
            _ => {
                extra.insert(k.clone(), v.clone());
            }
        }
    }
    let inputs = embedding_inputs(body);
    let requests: Vec<Value> = inputs
        .into_iter()
        .map(|text| {
            let mut request = extra.clone();
            request.insert("model".into(), model.clone().into());
            request.insert("content".into(), json!({"parts": [{"text": text}]}));
            Value::Object(request)
        })
        .collect();
    json!({ "requests": requests })
}

/// What `finishReason` says in OpenAI's words (the answer checks read those).
fn finish_reason(reason: &str) -> String {
    match reason {
        "STOP" => "stop".to_string(),
        "MAX_TOKENS" => "length".to_string(),
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" | "IMAGE_SAFETY" => {
            "content_filter".to_string()
        }
        other => other.to_ascii_lowercase(),
    }
}

/// The text of the first candidate (a thinking model's thoughts are not the answer).
fn candidate_text(json: &Value) -> Option<String> {
    let parts = json.pointer("/candidates/0/content/parts")?.as_array()?;
    Some(
        parts
            .iter()
            .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
    )
}

/// Reads `usageMetadata` (cumulative in a stream) into `done`; a thinking
/// model's thoughts are billed as output.
fn read_usage(json: &Value, done: &mut Completion) {
    let Some(usage) = json.get("usageMetadata") else { return };
    let n = |k: &str| usage.get(k).and_then(Value::as_u64);
    done.prompt_tokens = n("promptTokenCount").unwrap_or(done.prompt_tokens);
    if let Some(out) = n("candidatesTokenCount") {
        done.completion_tokens = out + n("thoughtsTokenCount").unwrap_or(0);
    }
}

/// A generateContent answer. A prompt blocked before any candidate is an
/// empty answer withheld by the content filter (asked again, then failed).
pub(super) fn completion(json: &Value) -> Result<Completion, String> {
    let mut done = Completion::default();
    read_usage(json, &mut done);
    if json.pointer("/promptFeedback/blockReason").is_some() && json.pointer("/candidates/0").is_none() {
        done.finish_reason = Some("content_filter".into());
        return Ok(done);
    }
    let candidate = json.pointer("/candidates/0").ok_or("response has no candidates")?;
    done.finish_reason = candidate.get("finishReason").and_then(Value::as_str).map(finish_reason);
    // A candidate cut off before its first word has no parts.
    done.content = candidate_text(json).unwrap_or_default();
    Ok(done)
}

/// One chunk of a streamed answer: a GenerateContentResponse of its own.
pub(super) fn stream_event(event: &Value, done: &mut Completion) -> Result<Option<String>, String> {
    if let Some(message) = event.pointer("/error/message").and_then(Value::as_str) {
        return Err(format!("the server ended the stream: {message}"));
    }
    read_usage(event, done);
    if let Some(reason) = event.pointer("/candidates/0/finishReason").and_then(Value::as_str) {
        done.finish_reason = Some(finish_reason(reason));
    }
    Ok(candidate_text(event).filter(|t| !t.is_empty()))
}

/// A batchEmbedContents answer.
#[derive(serde::Deserialize)]
struct BatchEmbeddings {
    embeddings: Vec<Embedding>,
}

#[derive(serde::Deserialize)]
struct Embedding {
    values: Vec<f32>,
}

/// The vectors of a batchEmbedContents answer, in input order (Gemini
/// reports no tokens for them).
pub(super) fn embeddings(bytes: &[u8], expected: usize) -> Result<(Vec<Vec<f32>>, u64), String> {
    let answer: BatchEmbeddings =
        serde_json::from_slice(bytes).map_err(|e| match serde_json::from_slice::<Value>(bytes) {
            Err(_) => format!("response is not JSON ({e})"),
            Ok(_) => "response is not an embeddings answer (embeddings[].values)".to_string(),
        })?;
    if answer.embeddings.len() != expected {
        return Err(format!("{} embeddings for {expected} inputs", answer.embeddings.len()));
    }
    Ok((answer.embeddings.into_iter().map(|e| e.values).collect(), 0))
}

/// `RetryInfo.retryDelay` of an error answer (`"37s"`, `"0.5s"`).
pub(super) fn retry_delay(error: &Value) -> Option<Duration> {
    let details = error.pointer("/error/details")?.as_array()?;
    let delay = details.iter().find_map(|d| d.get("retryDelay").and_then(Value::as_str))?;
    delay.trim().strip_suffix('s')?.parse::<f64>().ok().map(duration_of_seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_speak_of_contents_system_instruction_and_generation_config() {
        let openai = json!({
            "model": "gemini-2.5-flash",
            "messages": [
                {"role": "system", "content": "You extract entities."},
                {"role": "user", "content": "Text: Scrooge."},
                {"role": "assistant", "content": "garbage"},
                {"role": "user", "content": "Again."},
            ],
            "temperature": 0.0,
            "top_p": 1.0,
            "max_tokens": 500,
            "response_format": {"type": "json_object"},
            "topK": 40,
            "safetySettings": [],
        });
        assert_eq!(
            chat_body(&openai),
            json!({
                "contents": [
                    {"role": "user", "parts": [{"text": "Text: Scrooge."}]},
                    {"role": "model", "parts": [{"text": "garbage"}]},
                    {"role": "user", "parts": [{"text": "Again."}]},
                ],
                "systemInstruction": {"parts": [{"text": "You extract entities."}]},
                "generationConfig": {
                    "temperature": 0.0, "topP": 1.0, "maxOutputTokens": 500, "topK": 40,
                    "responseMimeType": "application/json",
                },
                "safetySettings": [],
            })
        );
    }

    #[test]
    fn embeddings_are_asked_one_request_per_text() {
        let body = json!({"model": "gemini-embedding-001", "input": ["a", "b"], "encoding_format": "base64", "dimensions": 768});
        let request = |text: &str| json!({"model": "models/gemini-embedding-001", "content": {"parts": [{"text": text}]}, "outputDimensionality": 768});
        assert_eq!(embeddings_body(&body), json!({"requests": [request("a"), request("b")]}));
        let (vectors, tokens) =
            embeddings(br#"{"embeddings":[{"values":[1.0,0.5]},{"values":[0.0,1.0]}]}"#, 2).unwrap();
        assert_eq!((vectors, tokens), (vec![vec![1.0, 0.5], vec![0.0, 1.0]], 0));
        assert_eq!(embeddings(br#"{"embeddings":[{"values":[1.0]}]}"#, 2).unwrap_err(), "1 embeddings for 2 inputs");
        assert!(embeddings(br#"{"data":[]}"#, 1).unwrap_err().contains("embeddings[].values"));
    }

    #[test]
    fn answers_skip_thoughts_and_say_why_they_stopped() {
        let answer = json!({
            "candidates": [{"content": {"role": "model", "parts": [{"text": "plan", "thought": true}, {"text": "Scrooge"}]}, "finishReason": "MAX_TOKENS"}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 3, "thoughtsTokenCount": 2},
        });
        let c = completion(&answer).unwrap();
        assert_eq!(
            (c.content.as_str(), c.prompt_tokens, c.completion_tokens, c.finish_reason.as_deref()),
            ("Scrooge", 10, 5, Some("length"))
        );
        let blocked = completion(&json!({"promptFeedback": {"blockReason": "SAFETY"}})).unwrap();
        assert_eq!((blocked.content.as_str(), blocked.finish_reason.as_deref()), ("", Some("content_filter")));
        assert!(completion(&json!({})).is_err());
    }

    #[test]
    fn a_429_says_how_long_to_wait_in_its_body() {
        let error = json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure"},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"},
        ]}});
        assert_eq!(retry_delay(&error), Some(Duration::from_millis(1500)));
        assert_eq!(retry_delay(&json!({"error": {"code": 500}})), None);
    }
}
