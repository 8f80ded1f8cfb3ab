//! The LLM and embedding layer: every model call of the index and the query
//! engine goes through here. It owns concurrency and rate limits, retries
//! and their bounds, the checks every answer must pass before it is used or
//! cached, the response cache, JSON repair and token accounting.

pub mod answer;
mod anthropic;
mod bedrock;
mod cache;
mod cache_budget;
mod cache_folder;
mod cache_held;
mod cache_segments;
mod chat;
mod embedding;
mod gemini;
mod http;
mod limiter;
mod openai;
pub mod preflight;
pub mod rerank;
mod retry;
mod service;
mod usage;
mod vertex;
mod wire;

pub use answer::{AnswerCheck, Invalid, InvalidKind};
pub use cache::{Checked, Imported, Lookup, ResponseCache};
pub use chat::{Answer, CallOptions, ChatModel};
pub use embedding::EmbeddingModel;
pub use rerank::RerankModel;
pub use retry::{CallScope, RetryBudget};
pub use service::{LlmService, QUERY_PARTITION};
pub use usage::{ModelUsage, UsageCounters};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::interrupt::Interrupted;
use crate::settings::ModelConfig;
use graphrag_operations::tokenizer::Encoding;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn system(content: impl Into<String>) -> Self {
        Message { role: "system".into(), content: content.into() }
    }
    pub fn user(content: impl Into<String>) -> Self {
        Message { role: "user".into(), content: content.into() }
    }
    pub fn assistant(content: impl Into<String>) -> Self {
        Message { role: "assistant".into(), content: content.into() }
    }
}

/// What a chat call returns (and the cache stores).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub content: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Why the model stopped (`stop`, `length`, ...), when the server says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
}

/// Why a call failed after retries; the API key never appears in it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    #[error("{model}: request rejected ({status}): {message}")]
    Rejected { model: String, status: u16, message: String },
    #[error("{model}: gave up after {attempts} attempts: {last}")]
    Exhausted { model: String, attempts: u32, last: String },
    #[error("{model}: no usable answer after {attempts} attempts ({kind} answer: {reason})")]
    InvalidAnswer { model: String, kind: &'static str, reason: String, attempts: u32 },
    #[error("{model}: not called: {failures} calls in a row failed (max_consecutive_failures); the last: {last}")]
    Stopped { model: String, failures: u32, last: String },
    /// The run was stopped: its source is the run's [`Interrupted`], which
    /// `interrupt::caused` finds in an error's chain.
    #[error("the model call was stopped")]
    Interrupted(#[source] Interrupted),
    /// The request the call served was cancelled (see `crate::cancel`).
    #[error("cancelled: the request was abandoned")]
    Cancelled,
    #[error("{0}")]
    Config(String),
}

/// Prompt tokens of a message list as OpenAI counts them (content plus a
/// small per-message overhead), used for token-per-minute limits and
/// estimates before anything is sent.
pub fn count_prompt_tokens(messages: &[Message]) -> u64 {
    messages.iter().map(|m| Encoding::O200kBase.count(&m.content) as u64 + 4).sum::<u64>() + 3
}

/// An embeddings request for `inputs`. Vectors are asked for as base64 of
/// little-endian f32, as OpenAI's Python client (GraphRAG's and LightRAG's)
/// asks: a quarter of the bytes of decimal numbers for the server to write
/// and for us to read. Servers that ignore the parameter answer numbers
/// (Ollama did: ollama/ollama#6934), which are read as well;
/// `call_args: {encoding_format: float}` asks for numbers.
pub(crate) fn embedding_request(config: &ModelConfig, inputs: &[&str]) -> Value {
    with_call_args(serde_json::json!({ "model": config.model, "input": inputs, "encoding_format": "base64" }), config)
}

/// The request body with the model's `call_args` (GraphRAG's extra request
/// parameters) merged in; they win over the keys already there.
/// `organization` is a header (see `http`), not a body key.
pub(crate) fn with_call_args(mut body: Value, config: &ModelConfig) -> Value {
    for (k, v) in &config.call_args {
        if k != http::ORGANIZATION_ARG {
            body[k.as_str()] = v.clone();
        }
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_tokens_include_overhead() {
        let n = count_prompt_tokens(&[Message::system("hello world"), Message::user("hi")]);
        assert_eq!(n, 2 + 4 + 1 + 4 + 3);
    }
}
