//! The wire formats of the providers' APIs. Every request is made in the
//! OpenAI form first (the form `call_args`, the cache key, step hashes and
//! corrective retries are written in), and translated here, at the edge,
//! into the provider's own body; its answers, stream events and error
//! details are read back into the same [`Completion`] and vectors. Limits,
//! retries, the cache and token accounting (`retry`, `chat`, `embedding`)
//! are the same for every provider.

use std::time::Duration;

use serde_json::Value;

use super::{anthropic, bedrock, gemini, openai, vertex, Completion};

/// The texts of an OpenAI embeddings body (`input`: one string, or a list).
pub(super) fn embedding_inputs(body: &Value) -> Vec<&str> {
    match body.get("input") {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        Some(Value::String(text)) => vec![text],
        _ => Vec::new(),
    }
}

/// OpenAI chat parameters that Anthropic's Messages API and Bedrock's
/// Converse have no counterpart for: left out, so a GraphRAG `call_args`
/// written for OpenAI works unchanged on them.
pub(super) const OPENAI_ONLY: [&str; 10] = [
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "n",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "user",
    "response_format",
    "stream_options",
];
use crate::settings::Provider;

/// Which API a model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wire {
    /// OpenAI's chat completions and embeddings (OpenAI, Azure, vLLM, Ollama, ...).
    OpenAi,
    /// Anthropic's Messages API (chat only).
    Anthropic,
    /// Gemini's generateContent and batchEmbedContents.
    Gemini,
    /// Gemini on Vertex AI: Gemini's generateContent, Vertex AI's `:predict`.
    Vertex,
    /// Bedrock's Converse (answers are not streamed) and its embedding models' InvokeModel.
    Bedrock,
}

impl Wire {
    pub(crate) fn of(provider: &Provider) -> Wire {
        match provider {
            Provider::Anthropic => Wire::Anthropic,
            Provider::Gemini => Wire::Gemini,
            Provider::Bedrock => Wire::Bedrock,
            Provider::VertexAi => Wire::Vertex,
            _ => Wire::OpenAi,
        }
    }

    /// The chat request body for `body` (OpenAI's form; `"stream": true` when streamed).
    pub(crate) fn chat_body(self, body: &Value) -> Value {
        match self {
            Wire::OpenAi => body.clone(),
            Wire::Anthropic => anthropic::chat_body(body),
            Wire::Gemini | Wire::Vertex => gemini::chat_body(body),
            Wire::Bedrock => bedrock::chat_body(body),
        }
    }

    /// Whether answers come as server-sent events when asked to stream
    /// (Bedrock's ConverseStream is AWS's binary event stream, not read here:
    /// its answer is asked whole and handed on in one piece).
    pub(crate) fn streams(self) -> bool {
        self != Wire::Bedrock
    }

    /// The embeddings request body for `body` (OpenAI's form).
    pub(crate) fn embeddings_body(self, body: &Value) -> Value {
        match self {
            Wire::Gemini => gemini::embeddings_body(body),
            Wire::Vertex => vertex::embeddings_body(body),
            Wire::Bedrock => bedrock::embeddings_body(body),
            Wire::OpenAi | Wire::Anthropic => body.clone(),
        }
    }

    /// A chat answer; the error says what is missing.
    pub(crate) fn completion(self, json: &Value) -> Result<Completion, String> {
        match self {
            Wire::OpenAi => openai::completion(json),
            Wire::Anthropic => anthropic::completion(json),
            Wire::Gemini | Wire::Vertex => gemini::completion(json),
            Wire::Bedrock => bedrock::completion(json),
        }
    }

    /// Reads one server-sent event of a streamed answer into `done` (tokens,
    /// finish reason); returns the text it adds. An error event is an error.
    pub(crate) fn stream_event(self, event: &Value, done: &mut Completion) -> Result<Option<String>, String> {
        match self {
            Wire::OpenAi => Ok(openai::stream_event(event, done)),
            Wire::Anthropic => anthropic::stream_event(event, done),
            Wire::Gemini | Wire::Vertex => gemini::stream_event(event, done),
            Wire::Bedrock => Err("Bedrock's answers are not read as server-sent events".into()),
        }
    }

    /// The vectors of an embeddings answer, in input order, and the prompt
    /// tokens the server reports (0: not reported).
    pub(crate) fn embeddings(self, bytes: &[u8], expected: usize) -> Result<(Vec<Vec<f32>>, u64), String> {
        match self {
            Wire::Gemini => gemini::embeddings(bytes, expected),
            Wire::Vertex => vertex::embeddings(bytes, expected),
            Wire::Bedrock => bedrock::embeddings(bytes, expected),
            Wire::OpenAi | Wire::Anthropic => openai::embeddings(bytes, expected),
        }
    }

    /// How long an error answer's body asks to wait (Gemini says it there,
    /// not in a header).
    pub(crate) fn retry_delay(self, error: &Value) -> Option<Duration> {
        match self {
            Wire::Gemini | Wire::Vertex => gemini::retry_delay(error),
            Wire::OpenAi | Wire::Anthropic | Wire::Bedrock => None,
        }
    }

    /// Whether a successful answer has this API's shape (the start-up check).
    pub(crate) fn is_answer(self, embeddings: bool, json: &Value) -> bool {
        let found = |pointer: &str| json.pointer(pointer).is_some();
        match (self, embeddings) {
            (Wire::OpenAi | Wire::Anthropic, true) => {
                json.pointer("/data/0/embedding").is_some_and(|e| e.is_array() || e.is_string())
            }
            (Wire::OpenAi, false) => found("/choices/0"),
            (Wire::Anthropic, false) => found("/content"),
            (Wire::Gemini, true) => found("/embeddings/0/values"),
            (Wire::Gemini | Wire::Vertex, false) => found("/candidates/0"),
            (Wire::Vertex, true) => found("/predictions/0/embeddings/values"),
            (Wire::Bedrock, false) => found("/output/message"),
            (Wire::Bedrock, true) => found("/embedding") || found("/embeddings"),
        }
    }

    /// The API's name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Wire::OpenAi => "the OpenAI API",
            Wire::Anthropic => "Anthropic's Messages API",
            Wire::Gemini => "the Gemini API",
            Wire::Vertex => "Vertex AI",
            Wire::Bedrock => "Amazon Bedrock's API",
        }
    }
}

/// The messages of an OpenAI body as (role, text), system messages apart:
/// Anthropic and Gemini take the system prompt beside the conversation, and
/// a conversation of turns that alternate, so consecutive turns of one role
/// are joined (as separate parts).
pub(super) fn split_messages(body: &Value) -> (Vec<String>, Vec<(String, Vec<String>)>) {
    let mut system = Vec::new();
    let mut turns: Vec<(String, Vec<String>)> = Vec::new();
    for m in body.get("messages").and_then(Value::as_array).into_iter().flatten() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
        let text = m.get("content").and_then(Value::as_str).unwrap_or("").to_string();
        match role {
            "system" | "developer" => system.push(text),
            _ => match turns.last_mut() {
                Some((last, parts)) if last == role => parts.push(text),
                _ => turns.push((role.to_string(), vec![text])),
            },
        }
    }
    (system, turns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn system_prompts_go_apart_and_turns_of_one_role_are_joined() {
        let body = json!({"messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "a"},
            {"role": "user", "content": "b"},
            {"role": "assistant", "content": "c"},
        ]});
        let (system, turns) = split_messages(&body);
        assert_eq!(system, ["be brief"]);
        assert_eq!(
            turns,
            [("user".to_string(), vec!["a".to_string(), "b".into()]), ("assistant".into(), vec!["c".into()])]
        );
    }
}
