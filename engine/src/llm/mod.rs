//! The LLM and embedding layer: every model call of the index and the query
//! engine goes through here. It owns concurrency and rate limits, retries,
//! the response cache, JSON repair and token accounting.

mod cache;
mod embedding;
mod http;
mod limiter;
pub mod preflight;
mod service;
mod usage;

pub use cache::ResponseCache;
pub use embedding::EmbeddingModel;
pub use service::LlmService;
pub use usage::{ModelUsage, UsageCounters};

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::settings::ModelConfig;
use graphrag_operations::json_repair;
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

/// One call's sampling settings in place of the model's (a search step's
/// own temperature or answer length); `None` keeps the model's value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CallOptions {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
}

/// What a chat call returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    pub content: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// Why a call failed after retries; the API key never appears in it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LlmError {
    #[error("{model}: request rejected ({status}): {message}")]
    Rejected { model: String, status: u16, message: String },
    #[error("{model}: gave up after {attempts} attempts: {last}")]
    Exhausted { model: String, attempts: u32, last: String },
    #[error("{model}: answer is not valid JSON even after a corrective retry: {reason}")]
    BadJson { model: String, reason: String },
    #[error("{0}")]
    Config(String),
}

/// Prompt tokens of a message list as OpenAI counts them (content plus a
/// small per-message overhead), used for token-per-minute limits and
/// estimates before anything is sent.
pub fn count_prompt_tokens(messages: &[Message]) -> u64 {
    messages.iter().map(|m| Encoding::O200kBase.count(&m.content) as u64 + 4).sum::<u64>() + 3
}

/// A configured chat model: limits, retries and cache around the HTTP transport.
pub struct ChatModel {
    id: String,
    config: ModelConfig,
    transport: Arc<http::Transport>,
    limiter: Arc<limiter::Limiter>,
    cache: Option<Arc<ResponseCache>>,
}

impl ChatModel {
    pub fn new(id: &str, config: &ModelConfig, cache: Option<Arc<ResponseCache>>) -> Result<Self, LlmError> {
        Ok(ChatModel {
            id: id.to_string(),
            transport: Arc::new(http::Transport::new(id, config)?),
            limiter: Arc::new(limiter::Limiter::new(config)),
            config: config.clone(),
            cache,
        })
    }

    /// The same model (same limits) caching its answers in the partition
    /// `name` of the cache (a step's `model_instance_name`).
    pub fn in_partition(&self, name: &str) -> ChatModel {
        ChatModel {
            id: self.id.clone(),
            config: self.config.clone(),
            transport: self.transport.clone(),
            limiter: self.limiter.clone(),
            cache: self.cache.as_ref().map(|c| Arc::new(c.partition(name))),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// What the answers depend on besides the messages (model and sampling
    /// parameters; the API key is masked), for step hashes.
    pub fn fingerprint(&self) -> String {
        serde_json::to_string(&self.request_body(&[], false, &CallOptions::default())).unwrap_or_default()
    }

    /// A chat completion, from the cache when the same request was answered before.
    fn cache_key(&self, body: &Value) -> String {
        ResponseCache::key(&["chat", &self.config.model, &body.to_string()])
    }

    /// Whether this exact request is answered from the cache (no tokens spent).
    pub fn is_cached(&self, messages: &[Message], json: bool) -> bool {
        let key = self.cache_key(&self.request_body(messages, json, &CallOptions::default()));
        self.cache.as_ref().is_some_and(|c| c.get::<Completion>(&key).is_some())
    }

    pub async fn chat(&self, messages: &[Message], json: bool, usage: &UsageCounters) -> Result<Completion, LlmError> {
        self.chat_with(messages, json, &CallOptions::default(), usage).await
    }

    /// [`ChatModel::chat`] with this call's own sampling settings.
    pub async fn chat_with(
        &self,
        messages: &[Message],
        json: bool,
        options: &CallOptions,
        usage: &UsageCounters,
    ) -> Result<Completion, LlmError> {
        let body = self.request_body(messages, json, options);
        let key = self.cache_key(&body);
        if let Some(cache) = &self.cache {
            if let Some(hit) = cache.get::<Completion>(&key) {
                usage.record_cache_hit(&self.id);
                return Ok(hit);
            }
        }
        let prompt_estimate = count_prompt_tokens(messages);
        let keep = |completion: &Completion| self.keep(&key, completion, usage);
        retrying(&self.id, &self.config, usage, &self.limiter, prompt_estimate, || self.transport.chat(&body), keep)
            .await
    }

    /// Counts and caches an answer; called while its concurrency slot is
    /// still held (see [`retrying`]).
    fn keep(&self, key: &str, completion: &Completion, usage: &UsageCounters) {
        usage.record_call(&self.id, completion.prompt_tokens, completion.completion_tokens);
        if let Some(cache) = &self.cache {
            cache.put(key, completion);
        }
    }

    /// A chat completion streamed to `on_delta` as it is generated (a cached
    /// answer arrives in one piece). Retries happen only before the first
    /// piece; the complete answer is cached like any other.
    pub async fn chat_stream(
        &self,
        messages: &[Message],
        usage: &UsageCounters,
        on_delta: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Completion, LlmError> {
        self.chat_stream_with(messages, &CallOptions::default(), usage, on_delta).await
    }

    /// [`ChatModel::chat_stream`] with this call's own sampling settings.
    pub async fn chat_stream_with(
        &self,
        messages: &[Message],
        options: &CallOptions,
        usage: &UsageCounters,
        on_delta: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Completion, LlmError> {
        let body = self.request_body(messages, false, options);
        let key = self.cache_key(&body);
        if let Some(hit) = self.cache.as_ref().and_then(|c| c.get::<Completion>(&key)) {
            usage.record_cache_hit(&self.id);
            on_delta(&hit.content);
            return Ok(hit);
        }
        let mut stream_body = body.clone();
        stream_body["stream"] = true.into();
        stream_body["stream_options"] = serde_json::json!({"include_usage": true});
        let prompt_estimate = count_prompt_tokens(messages);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = {
                let _permit = self.limiter.acquire(prompt_estimate).await;
                let result = self.transport.chat_stream(&stream_body, on_delta).await;
                result.map(|mut completion| {
                    // Servers that send no usage chunk: estimate it.
                    if completion.prompt_tokens == 0 {
                        completion.prompt_tokens = prompt_estimate;
                    }
                    if completion.completion_tokens == 0 {
                        completion.completion_tokens = Encoding::O200kBase.count(&completion.content) as u64;
                    }
                    self.keep(&key, &completion, usage);
                    completion
                })
            };
            match result {
                Ok(completion) => return Ok(completion),
                Err(f) => tokio::time::sleep(after_failure(&self.id, &self.config, usage, attempt, f)?).await,
            }
        }
    }

    /// A chat call whose answer must be a JSON object: JSON mode where the
    /// model supports it, tolerant parsing always, and one corrective retry
    /// when the answer cannot be repaired.
    pub async fn chat_json(&self, messages: &[Message], usage: &UsageCounters) -> Result<Value, LlmError> {
        self.chat_json_with(messages, &CallOptions::default(), usage).await
    }

    /// [`ChatModel::chat_json`] with this call's own sampling settings.
    pub async fn chat_json_with(
        &self,
        messages: &[Message],
        options: &CallOptions,
        usage: &UsageCounters,
    ) -> Result<Value, LlmError> {
        let first = self.chat_with(messages, true, options, usage).await?;
        match json_repair::parse_object(&first.content) {
            Ok(parsed) => {
                if !parsed.repairs.is_empty() {
                    usage.record_json_repair(&self.id);
                }
                Ok(parsed.value)
            }
            Err(reason) => {
                tracing::debug!(model = %self.id, "unparseable JSON answer ({reason}), sending a corrective retry");
                let mut retry = messages.to_vec();
                retry.push(Message::assistant(first.content));
                retry.push(Message::user(format!(
                    "Your previous answer could not be parsed as JSON ({reason}). Reply again with only the complete JSON object, no other text."
                )));
                let second = self.chat_with(&retry, true, options, usage).await?;
                match json_repair::parse_object(&second.content) {
                    Ok(parsed) => {
                        usage.record_json_repair(&self.id);
                        Ok(parsed.value)
                    }
                    Err(reason) => {
                        usage.record_json_failure(&self.id);
                        Err(LlmError::BadJson { model: self.id.clone(), reason })
                    }
                }
            }
        }
    }

    fn request_body(&self, messages: &[Message], json: bool, options: &CallOptions) -> Value {
        let mut body = serde_json::json!({
            "model": self.config.model,
            "messages": messages,
            "temperature": options.temperature.unwrap_or(self.config.temperature),
            "top_p": options.top_p.unwrap_or(self.config.top_p),
        });
        if let Some(max) = options.max_tokens.or(self.config.max_tokens) {
            body["max_tokens"] = max.into();
        }
        if json && self.config.model_supports_json {
            body["response_format"] = serde_json::json!({"type": "json_object"});
        }
        with_call_args(body, &self.config)
    }
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

/// Runs `call` under the model's limits, retrying retryable failures with
/// backoff until `max_retries` is spent; counts retries and failures.
/// `keep` (counting, caching) runs on the answer before the concurrency
/// slot is released, so a process killed at any point has cached every
/// answer whose successor request was sent.
pub(crate) async fn retrying<T, F, Fut>(
    id: &str,
    config: &ModelConfig,
    usage: &UsageCounters,
    limiter: &limiter::Limiter,
    tokens: u64,
    mut call: F,
    keep: impl Fn(&T),
) -> Result<T, LlmError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, http::Failure>>,
{
    let mut attempt = 0;
    loop {
        attempt += 1;
        let result = {
            let _permit = limiter.acquire(tokens).await;
            let result = call().await;
            if let Ok(v) = &result {
                keep(v);
            }
            result
        };
        match result {
            Ok(v) => return Ok(v),
            Err(f) => tokio::time::sleep(after_failure(id, config, usage, attempt, f)?).await,
        }
    }
}

/// What to do after attempt `attempt` failed: the wait before the next try,
/// or the error to return (not retryable, or retries spent). Counts both.
fn after_failure(
    id: &str,
    config: &ModelConfig,
    usage: &UsageCounters,
    attempt: u32,
    failure: http::Failure,
) -> Result<Duration, LlmError> {
    let max_attempts = config.retry_policy().max_retries + 1;
    if !failure.retryable {
        usage.record_failure(id);
        return Err(LlmError::Rejected {
            model: id.to_string(),
            status: failure.status.unwrap_or(0),
            message: failure.message,
        });
    }
    if attempt >= max_attempts {
        usage.record_failure(id);
        return Err(LlmError::Exhausted { model: id.to_string(), attempts: attempt, last: failure.message });
    }
    usage.record_retry(id);
    let wait = backoff(config, attempt, failure.retry_after);
    // Visible by default: a server that is down should not look like a hang.
    tracing::info!(
        "model {id}: attempt {attempt}/{max_attempts} failed ({}); retrying in {:.1} s",
        failure.message,
        wait.as_secs_f64()
    );
    Ok(wait)
}

/// The model's backoff (exponential, with jitter, capped: see
/// `RetryPolicy`); a server's Retry-After wins (it knows when capacity returns).
fn backoff(config: &ModelConfig, attempt: u32, retry_after: Option<Duration>) -> Duration {
    retry_after.unwrap_or_else(|| Duration::from_secs_f64(config.retry_policy().wait(attempt, jitter_fraction())))
}

/// A fraction in [0, 1) from the clock: jitter only needs to decorrelate
/// concurrent retries, not to be reproducible.
fn jitter_fraction() -> f64 {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let mut x = nanos as u64 ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    (x % 10_000) as f64 / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_caps_and_honours_retry_after() {
        let cfg = ModelConfig { retry_base_delay: 1.0, max_retry_wait: 10.0, ..ModelConfig::default() };
        let b1 = backoff(&cfg, 1, None);
        assert!(b1 >= Duration::from_millis(500) && b1 <= Duration::from_secs(1), "{b1:?}");
        let b3 = backoff(&cfg, 3, None);
        assert!(b3 >= Duration::from_secs(2) && b3 <= Duration::from_secs(4), "{b3:?}");
        assert!(backoff(&cfg, 20, None) <= Duration::from_secs(10));
        assert_eq!(backoff(&cfg, 1, Some(Duration::from_secs(7))), Duration::from_secs(7));
        // A Retry-After longer than the cap is still honoured: the server decides.
        assert_eq!(backoff(&cfg, 1, Some(Duration::from_secs(30))), Duration::from_secs(30));
    }

    #[test]
    fn call_args_go_into_every_request_and_win() {
        let mut call_args = serde_json::Map::new();
        call_args.insert("seed".into(), 42.into());
        call_args.insert("temperature".into(), 0.7.into());
        call_args.insert("organization".into(), "org-1".into());
        let cfg = ModelConfig { call_args, ..ModelConfig::default() };
        let model = ChatModel::new("m", &cfg, None).unwrap();
        let body = model.request_body(&[Message::user("hi")], true, &CallOptions::default());
        assert_eq!((body["seed"].clone(), body["temperature"].clone()), (42.into(), 0.7.into()));
        assert!(body.get("organization").is_none(), "a header, not a body key");
        assert_ne!(model.fingerprint(), ChatModel::new("m", &ModelConfig::default(), None).unwrap().fingerprint());
    }

    #[test]
    fn call_options_replace_the_model_s_sampling_for_one_call() {
        let cfg = ModelConfig { max_tokens: Some(500), ..ModelConfig::default() };
        let model = ChatModel::new("m", &cfg, None).unwrap();
        let plain = model.request_body(&[Message::user("hi")], false, &CallOptions::default());
        assert_eq!(
            (plain["temperature"].as_f64(), plain["top_p"].as_f64(), plain["max_tokens"].as_u64()),
            (Some(0.0), Some(1.0), Some(500))
        );
        let options = CallOptions { temperature: Some(0.4), top_p: Some(0.9), max_tokens: Some(50) };
        let own = model.request_body(&[Message::user("hi")], false, &options);
        assert_eq!(
            (own["temperature"].as_f64(), own["top_p"].as_f64(), own["max_tokens"].as_u64()),
            (Some(0.4), Some(0.9), Some(50))
        );
    }

    #[test]
    fn prompt_tokens_include_overhead() {
        let n = count_prompt_tokens(&[Message::system("hello world"), Message::user("hi")]);
        assert_eq!(n, 2 + 4 + 1 + 4 + 3);
    }
}
