//! The LLM and embedding layer: every model call of the index and the query
//! engine goes through here. It owns concurrency and rate limits, retries
//! and their bounds, the checks every answer must pass before it is used or
//! cached, the response cache, JSON repair and token accounting.
//!
//! # In detail
//!
//! `ChatModel` (`chat.rs`: OpenAI-compatible chat over reqwest+rustls; every call names the `AnswerCheck`
//! its answer must pass, and an unusable answer is asked again — as is, then corrective or with a larger
//! `max_tokens` — and never cached; `chat_json`/`chat_json_with` for JSON objects with required fields;
//! `chat_stream`; `call_args` merged into every body; `with_options(CallOptions)`: the same model asked
//! with one call's own temperature / top_p / max_tokens, e.g. DRIFT's `local_search_*` and `reduce_*`
//! settings), `answer` (the checks: cut off (`finish_reason: length`), over 1 MB, or not what was asked:
//! text, JSON + schema, Y/N; extraction's record check lives in `verbs/llm_steps.rs`), `EmbeddingModel`
//! (HTTP batched by count and tokens, vectors asked as base64 and read as base64 or numbers (`http.rs`), or
//! the local model at its `precision`, whose `Kernel::vector_identity` (`@int8-attn`, `@bf16`) int8 and
//! bf16 add to the cache key and the fingerprint (f32 keys unchanged); vectors checked: one dimension,
//! finite), `retry` (`Policy`: the limiter, the model's `RetryPolicy` with every wait capped by
//! `max_retry_wait` (or GraphRAG's `retry.max_delay`) — a server's Retry-After included —, the
//! `max_retry_time` budget, not-retryable failures (4xx but 408/429, bad URL, TLS) ending at once, long
//! waits logged as warnings, and the circuit breaker: `max_consecutive_failures` calls in a row failed for
//! good → no more calls this run; a `CallScope` — a query's cancel token and `RetryBudget` (no retry later
//! than its limit after the query's first failure) — bounds the calls of one model made `within` it),
//! `LlmService::for_queries` (the query policy: settings `query` lower every model's timeout and retry
//! budget, no breaker, answers in the size-bounded `query` partition of the cache: in a folder its oldest
//! segments deleted first), `limiter` (concurrency semaphore + requests/tokens-per-period buckets),
//! `http` (transport: URLs built with `Url` from `api_base`, query kept; bodies read up to a limit; the key
//! and api_base's query values scrubbed from every message, `api_base.rs`), `wire` (each provider's wire
//! format: requests are made in OpenAI's form — the form of cache keys, step hashes, `call_args` and
//! corrective retries — and translated at the transport: `openai.rs`, `anthropic.rs` (Messages API),
//! `gemini.rs` (generateContent, batchEmbedContents), `bedrock.rs` (Converse, each request SigV4-signed by
//! `aws-sigv4`), `vertex.rs` (Gemini on Vertex AI: its URLs, `:predict` embeddings, and the service
//! account's access token, an RS256 JWT signed by `ring` exchanged at its token URI and kept until near
//! expiry); answers, stream events, embeddings and a 429's wait read back into one `Completion`; the
//! provider is `settings::Provider`, parsed once), `cache` (`ResponseCache`: `put` takes only a `Checked`
//! value and `get` re-runs the caller's check; corrupt entries are counted, one warning; a step's partition
//! `<model_instance_name>/` reads the root's answers too; one implementation for a local folder and an object store,
//! reached through the location's `storage::Store`: `cache_segments` (`SegmentAnswers`): each process writes its
//! own segment files (`<partition>/segments/<writer>-<n>.answers`, a line per answer: key, tab, compact JSON or
//! `#f32le:` + base64 for an embedding vector, `cache_vector`), one at a time per partition, each whole (a
//! folder: renamed into place, synced; a store: one PUT), at each step's end (`LlmService::flush_cache`,
//! called by the runner), every second by a thread while answers wait, at 2,000 answers / 16 MiB, and when the
//! cache is dropped (a process killed loses its last second of answers; a torn line is a miss); a reader lists
//! a partition's `segments/` once (a miss then costs nothing) and reads them 16 at a time, later segments
//! replacing earlier answers; a segment is deleted only by its writer, which folds its own small consecutive
//! segments into runs of up to 16 MiB once it has 64 in a partition (folded written first, under a name that
//! sorts where the run's last did; a reader that finds a listed segment gone lists again), or, in a bounded
//! folder (the query cache), as the oldest of the partition past its bound; readers never write or delete;
//! `cache_folder` (`LegacyFiles`) reads the one-JSON-file-per-answer layout (`DIR/[<partition>/]<xx>/<key>.json`)
//! older versions wrote in a folder, after the segments; `ResponseCache::import` (CLI `cache import`) copies a
//! local cache folder (segments and old files) into a bucket; `cache_held` (`Held`): the answers
//! held in memory, by key and segment line; bounded (the query cache, `ResponseCache::bounded`) it counts
//! each entry and loaded answer against `query.cache_max_bytes`, unloads the least recently used answers
//! first (read again with one ranged GET of their line; gone, folded since: asked again), then forgets
//! entries), `usage` (calls/tokens/cache hits/retries and waits/unusable answers by kind per model →
//! stats.json), `service` (`LlmService`: the project's models + the tokio runtime that synchronous verbs
//! `block_on`; `chat_model_for(id, partition)`), `preflight` (the start-up check: one 1-token chat /
//! one-text embedding per endpoint a run uses, its own 4 s timeout, no cache, no retry but of a dropped
//! connection; judges the answer — refused, DNS, timeout, HTML, 404 without /v1, 401 — into one
//! `ConfigError` with the settings key and the fix; a 5xx, a connection dropped three times or a cut-short
//! or malformed JSON body into a warning, as the run retries those).

pub mod answer;
mod anthropic;
mod bedrock;
mod cache;
mod cache_folder;
mod cache_held;
mod cache_segments;
mod cache_vector;
mod chat;
mod embedding;
mod gemini;
mod http;
mod limiter;
mod openai;
pub mod preflight;
mod rerank;
mod retry;
mod service;
mod usage;
mod vertex;
mod wire;

pub use answer::{AnswerCheck, Invalid, InvalidKind};
pub use cache::{Imported, ResponseCache};
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

/// One message of a chat request, in OpenAI's form (each provider's wire
/// format is translated from it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The message's text.
    pub content: String,
}

impl Message {
    /// A `system` message: the instructions that frame the conversation.
    pub fn system(content: impl Into<String>) -> Self {
        Message { role: "system".into(), content: content.into() }
    }
    /// A `user` message: what is asked.
    pub fn user(content: impl Into<String>) -> Self {
        Message { role: "user".into(), content: content.into() }
    }
    /// An `assistant` message: an earlier answer of the model.
    pub fn assistant(content: impl Into<String>) -> Self {
        Message { role: "assistant".into(), content: content.into() }
    }
}

/// What a chat call returns (and the cache stores).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The answer's text (a streamed answer's, whole).
    pub content: String,
    /// Prompt tokens, as the server counted them (0 when it did not say).
    pub prompt_tokens: u64,
    /// Answer tokens, as the server counted them (0 when it did not say).
    pub completion_tokens: u64,
    /// Why the model stopped (`stop`, `length`, ...), when the server says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
}

/// Why a call failed after retries; the API key never appears in it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    /// A failure retrying cannot mend (a 4xx but 408 and 429, a bad URL, TLS).
    #[error("{model}: request rejected ({status}): {message}")]
    Rejected {
        /// The model's id in settings.
        model: String,
        /// The HTTP status; 0 when the request got no answer.
        status: u16,
        /// What the server or the transport said.
        message: String,
    },
    /// Transient failures until the retries (`max_retries`) or the time to
    /// retry in (`max_retry_time`, a query's budget) ran out.
    #[error("{model}: gave up after {attempts} attempts: {last}")]
    Exhausted {
        /// The model's id in settings.
        model: String,
        /// Requests sent, the first included.
        attempts: u32,
        /// The last failure, and why retrying stopped.
        last: String,
    },
    /// Answers came back, but none passed the call's check ([`AnswerCheck`]).
    #[error("{model}: no usable answer after {attempts} attempts ({kind} answer: {reason})")]
    InvalidAnswer {
        /// The model's id in settings.
        model: String,
        /// The last answer's defect ([`InvalidKind::as_str`]).
        kind: &'static str,
        /// What the check found wrong with it.
        reason: String,
        /// Answers received.
        attempts: u32,
    },
    /// Not sent: the model's circuit breaker is open for the rest of the run.
    #[error("{model}: not called: {failures} calls in a row failed (max_consecutive_failures); the last: {last}")]
    Stopped {
        /// The model's id in settings.
        model: String,
        /// Calls in a row that failed for good.
        failures: u32,
        /// The last of those failures.
        last: String,
    },
    /// The run was stopped ([`Interrupted`]): a caller that tells a stop
    /// apart checks its stop flag, which the error's chain need not reach.
    #[error("the model call was stopped")]
    Interrupted(#[source] Interrupted),
    /// The request the call served was cancelled (see `crate::cancel`).
    #[error("cancelled: the request was abandoned")]
    Cancelled,
    /// The model cannot be called as configured: not defined, no
    /// credentials or region, a bad `api_base` or header, a local model that
    /// does not load. The message names the model.
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
