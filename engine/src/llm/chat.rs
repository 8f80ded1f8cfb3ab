//! A configured chat model: limits, retries and the cache around the HTTP
//! transport, and the rule that makes the cache trustworthy: an answer is
//! checked for its purpose ([`AnswerCheck`]) before it is cached or used.
//! An unusable answer is asked again — as is (a glitch), then with what was
//! wrong (corrective) or a larger `max_tokens` (cut off) — and, if it stays
//! unusable, the call fails naming why; it is never cached.

use std::sync::Arc;

use serde_json::Value;

use super::answer::{self, AnswerCheck, Invalid, InvalidKind};
use super::cache::{Checked, Lookup, ResponseCache};
use super::http::{ChatReply, Transport};
use super::retry::{CallScope, Policy};
use super::{count_prompt_tokens, with_call_args, Completion, LlmError, Message, UsageCounters};
use crate::settings::ModelConfig;
use graphrag_operations::tokenizer::Encoding;

/// A usable answer: what the model said and the value its check made of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer<T> {
    /// The answer as the server sent it (or the cache kept it).
    pub completion: Completion,
    /// What the call's check made of it (the text, a parsed JSON object, …).
    pub value: T,
    /// Answered by the cache: no model call was made.
    pub from_cache: bool,
}

/// Attempts at a usable answer after the first unusable one.
const ANSWER_RETRIES: u32 = 2;

/// How a corrective retry begins (the mock server recognises it).
pub(crate) const CORRECTION: &str = "Your previous answer could not be used";

/// The most of an unusable answer a corrective retry quotes back.
const QUOTED_ANSWER_CHARS: usize = 4000;

/// One call's sampling settings in place of the model's (a search step's
/// own temperature or answer length); `None` keeps the model's value.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CallOptions {
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Nucleus sampling.
    pub top_p: Option<f64>,
    /// The answer's `max_tokens`.
    pub max_tokens: Option<u32>,
}

/// One chat model of the settings, ready to call: its transport, limits,
/// retries and circuit breaker, and the cache of its answers. Clones made
/// with `within`, `with_options` or a partition share the limits and breaker.
pub struct ChatModel {
    id: String,
    config: ModelConfig,
    transport: Arc<Transport>,
    policy: Arc<Policy>,
    cache: Option<Arc<ResponseCache>>,
    scope: CallScope,
}

impl ChatModel {
    /// The model `id` of the settings, with its own limits and circuit
    /// breaker; errors when its settings cannot make a client (see [`LlmError::Config`]).
    pub fn new(id: &str, config: &ModelConfig, cache: Option<Arc<ResponseCache>>) -> Result<Self, LlmError> {
        Ok(ChatModel {
            id: id.to_string(),
            transport: Arc::new(Transport::new(id, config)?),
            policy: Arc::new(Policy::new(id, config)),
            config: config.clone(),
            cache,
            scope: CallScope::default(),
        })
    }

    /// The same model (same limits and circuit breaker) caching its answers
    /// in the partition `name` of the cache (a step's `model_instance_name`).
    pub(crate) fn in_partition(&self, name: &str) -> ChatModel {
        ChatModel {
            id: self.id.clone(),
            config: self.config.clone(),
            transport: self.transport.clone(),
            policy: self.policy.clone(),
            cache: self.cache.as_ref().map(|c| Arc::new(c.partition(name))),
            scope: self.scope.clone(),
        }
    }

    /// The same model whose calls are bounded by `scope` (one query's
    /// cancellation and retry budget).
    pub fn within(&self, scope: &CallScope) -> ChatModel {
        ChatModel { scope: scope.clone(), ..self.with_options(&CallOptions::default()) }
    }

    /// The same model (same limits, circuit breaker and cache) asked with
    /// `options` in place of its own sampling settings.
    pub fn with_options(&self, options: &CallOptions) -> ChatModel {
        let mut config = self.config.clone();
        config.temperature = options.temperature.unwrap_or(config.temperature);
        config.top_p = options.top_p.unwrap_or(config.top_p);
        config.max_tokens = options.max_tokens.or(config.max_tokens);
        ChatModel {
            id: self.id.clone(),
            config,
            transport: self.transport.clone(),
            policy: self.policy.clone(),
            cache: self.cache.clone(),
            scope: self.scope.clone(),
        }
    }

    /// Its id in the settings (`default_completion_model`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What the answers depend on besides the messages (model and sampling
    /// parameters; the API key is masked), for step hashes.
    pub fn fingerprint(&self) -> String {
        serde_json::to_string(&self.request_body(&[], false, self.config.max_tokens)).unwrap_or_default()
    }

    fn cache_key(&self, body: &Value) -> String {
        ResponseCache::key(&["chat", &self.config.model, &body.to_string()])
    }

    /// Whether this exact request has a usable answer in the cache (no tokens spent).
    pub fn is_cached<T, F>(&self, messages: &[Message], json: bool, check: &AnswerCheck<F>) -> bool
    where
        F: Fn(&str) -> Result<T, String>,
    {
        let key = self.cache_key(&self.request_body(messages, json, self.config.max_tokens));
        self.cache.as_ref().is_some_and(|c| matches!(c.get(&key, |a: &Completion| check.check(a)), Lookup::Hit(_)))
    }

    /// The cached usable answer to this exact request, counted as a cache
    /// hit; `None` when the cache has none (no model call is made): how a
    /// model stage's shard reads an earlier wave's answers.
    pub fn cached_answer<T, F>(
        &self,
        messages: &[Message],
        json: bool,
        usage: &UsageCounters,
        check: &AnswerCheck<F>,
    ) -> Option<Answer<T>>
    where
        F: Fn(&str) -> Result<T, String>,
    {
        self.cached(&self.cache_key(&self.request_body(messages, json, self.config.max_tokens)), usage, check)
    }

    /// A chat completion that passes `check`: from the cache when this
    /// request was answered usably before, else from the model (see the
    /// module doc for what happens to an unusable answer). `json` asks for
    /// JSON mode where the model supports it.
    pub async fn chat<T, F>(
        &self,
        messages: &[Message],
        json: bool,
        usage: &UsageCounters,
        check: &AnswerCheck<F>,
    ) -> Result<Answer<T>, LlmError>
    where
        F: Fn(&str) -> Result<T, String>,
    {
        let body = self.request_body(messages, json, self.config.max_tokens);
        let key = self.cache_key(&body);
        if let Some(hit) = self.cached(&key, usage, check) {
            return Ok(hit);
        }
        let result = async {
            // Counting a long prompt's tokens is CPU on the request path: only
            // when a token limit needs it.
            let tokens = if self.policy.counts_prompt_tokens() { count_prompt_tokens(messages) } else { 0 };
            let mut request = body;
            let mut attempt = 1;
            loop {
                let keep = |reply: ChatReply| match reply {
                    ChatReply::Completion(completion) => self.keep(&key, completion, usage, check),
                    ChatReply::Oversized { limit } => {
                        usage.record_call(&self.id, 0, 0);
                        let reason = format!("the response is larger than {} MB, the most read", limit >> 20);
                        Err((Invalid { kind: InvalidKind::Oversized, reason }, Completion::default()))
                    }
                };
                let (invalid, completion) =
                    match self.policy.send(usage, tokens, &self.scope, || self.transport.chat(&request), keep).await? {
                        Ok(answer) => return Ok(answer),
                        Err(unusable) => unusable,
                    };
                usage.record_invalid(&self.id, invalid.kind);
                if attempt > ANSWER_RETRIES {
                    usage.record_answer_failure(&self.id);
                    tracing::info!("model {}: {invalid} (after {attempt} attempts)", self.id);
                    return Err(LlmError::InvalidAnswer {
                        model: self.id.clone(),
                        kind: invalid.kind.as_str(),
                        reason: invalid.reason,
                        attempts: attempt,
                    });
                }
                tracing::info!("model {}: {invalid}; asking again ({attempt}/{ANSWER_RETRIES})", self.id);
                request = self.retry_body(messages, json, attempt, &invalid, &completion, check.expected());
                attempt += 1;
            }
        }
        .await;
        self.policy.settle(result)
    }

    /// The request after unusable answer number `attempt`: the same request
    /// first (a glitch); then a cut-off answer gets a larger max_tokens where
    /// one is set, and any other answer a corrective turn saying what was wrong.
    fn retry_body(
        &self,
        messages: &[Message],
        json: bool,
        attempt: u32,
        invalid: &Invalid,
        completion: &Completion,
        expected: &str,
    ) -> Value {
        let max_tokens = self.config.max_tokens;
        match invalid.kind {
            InvalidKind::Truncated => {
                self.request_body(messages, json, max_tokens.map(|m| m.saturating_mul(1 << attempt.min(4))))
            }
            _ if attempt == 1 => self.request_body(messages, json, max_tokens),
            _ => {
                let mut corrected = messages.to_vec();
                let quoted: String = completion.content.chars().take(QUOTED_ANSWER_CHARS).collect();
                corrected.push(Message::assistant(quoted));
                corrected.push(Message::user(format!(
                    "{CORRECTION}: {}. Reply again to the request above with {expected}, complete and in exactly the format it asks for.",
                    invalid.reason
                )));
                self.request_body(&corrected, json, max_tokens)
            }
        }
    }

    /// A usable cached answer to `key`, counting what was found.
    fn cached<T, F>(&self, key: &str, usage: &UsageCounters, check: &AnswerCheck<F>) -> Option<Answer<T>>
    where
        F: Fn(&str) -> Result<T, String>,
    {
        let hit = self.cache.as_ref()?.get(key, |c: &Completion| check.check(c)).hit(usage, &self.id)?;
        usage.record_cache_hit(&self.id);
        let (completion, value) = hit.into_parts();
        Some(Answer { completion, value, from_cache: true })
    }

    /// Counts an answer, checks it and caches it if usable; runs while its
    /// concurrency slot is held (see [`Policy::send`]).
    fn keep<T, F>(
        &self,
        key: &str,
        completion: Completion,
        usage: &UsageCounters,
        check: &AnswerCheck<F>,
    ) -> Result<Answer<T>, (Invalid, Completion)>
    where
        F: Fn(&str) -> Result<T, String>,
    {
        usage.record_call(&self.id, completion.prompt_tokens, completion.completion_tokens);
        let checked = Checked::new(completion, |c: &Completion| check.check(c)).map_err(|(c, e)| (e, c))?;
        if let Some(cache) = &self.cache {
            cache.put(key, &checked);
        }
        let (completion, value) = checked.into_parts();
        Ok(Answer { completion, value, from_cache: false })
    }

    /// A completion streamed to `on_delta` as it is generated (a cached
    /// answer arrives in one piece). Retries happen only before the first
    /// piece; the answer is cached when it passes the text check (a cut-off
    /// one is shown, with a warning, and not cached).
    pub async fn chat_stream(
        &self,
        messages: &[Message],
        usage: &UsageCounters,
        on_delta: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Completion, LlmError> {
        let check = answer::text();
        let body = self.request_body(messages, false, self.config.max_tokens);
        let key = self.cache_key(&body);
        if let Some(hit) = self.cached(&key, usage, &check) {
            on_delta(&hit.completion.content);
            return Ok(hit.completion);
        }
        let result = self.stream(&key, body, messages, usage, on_delta).await;
        self.policy.settle(result)
    }

    /// Streams request `body` (cached under `key`), retrying until the first piece.
    async fn stream(
        &self,
        key: &str,
        body: Value,
        messages: &[Message],
        usage: &UsageCounters,
        on_delta: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Completion, LlmError> {
        let check = answer::text();
        let mut stream_body = body;
        stream_body["stream"] = true.into();
        stream_body["stream_options"] = serde_json::json!({"include_usage": true});
        let tokens = count_prompt_tokens(messages);
        let started = std::time::Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let wait = {
                let _permit = self.policy.permit(tokens, &self.scope).await?;
                let result = self.scope.run(self.transport.chat_stream(&stream_body, on_delta)).await?;
                let result = result.map(|mut completion| {
                    // Servers that send no usage chunk: estimate it.
                    if completion.prompt_tokens == 0 {
                        completion.prompt_tokens = tokens;
                    }
                    if completion.completion_tokens == 0 {
                        completion.completion_tokens = Encoding::O200kBase.count(&completion.content) as u64;
                    }
                    match self.keep(key, completion, usage, &check) {
                        Ok(answer) => answer.completion,
                        Err((invalid, completion)) => {
                            usage.record_invalid(&self.id, invalid.kind);
                            tracing::warn!("model {}: the streamed answer is a {invalid}; it is not cached", self.id);
                            completion
                        }
                    }
                });
                match result {
                    Ok(completion) => return Ok(completion),
                    Err(f) => self.policy.after_failure(usage, attempt, started.elapsed(), f, &self.scope)?,
                }
            };
            self.scope.sleep(wait).await?;
        }
    }

    /// A chat call whose answer must be a JSON object (JSON mode where the
    /// model supports it, tolerant parsing always).
    pub async fn chat_json(&self, messages: &[Message], usage: &UsageCounters) -> Result<Value, LlmError> {
        Ok(self.chat_json_with(messages, usage, &answer::json_object()).await?.value)
    }

    /// A JSON chat call whose object must pass `check` (e.g. a report's
    /// required fields); counts answers whose JSON needed repair.
    pub async fn chat_json_with<T, F>(
        &self,
        messages: &[Message],
        usage: &UsageCounters,
        check: &AnswerCheck<F>,
    ) -> Result<Answer<T>, LlmError>
    where
        F: Fn(&str) -> Result<(T, bool), String>,
    {
        let answer = self.chat(messages, true, usage, check).await?;
        let (value, repaired) = answer.value;
        if repaired {
            usage.record_json_repair(&self.id);
        }
        Ok(Answer { completion: answer.completion, value, from_cache: answer.from_cache })
    }

    fn request_body(&self, messages: &[Message], json: bool, max_tokens: Option<u32>) -> Value {
        let mut body = serde_json::json!({
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "top_p": self.config.top_p,
        });
        if let Some(max) = max_tokens {
            body["max_tokens"] = max.into();
        }
        if json && self.config.model_supports_json {
            body["response_format"] = serde_json::json!({"type": "json_object"});
        }
        with_call_args(body, &self.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_options_replace_the_model_s_sampling_for_one_call() {
        let cfg = ModelConfig { max_tokens: Some(500), ..ModelConfig::default() };
        let model = ChatModel::new("m", &cfg, None).unwrap();
        let ask = [Message::user("hi")];
        let plain = model.with_options(&CallOptions::default()).request_body(&ask, false, Some(500));
        assert_eq!(plain, model.request_body(&ask, false, Some(500)), "no options: the model's own body");
        let options = CallOptions { temperature: Some(0.4), top_p: Some(0.9), max_tokens: Some(50) };
        let own = model.with_options(&options);
        let body = own.request_body(&ask, false, own.config.max_tokens);
        let sampling = (body["temperature"].as_f64(), body["top_p"].as_f64(), body["max_tokens"].as_u64());
        assert_eq!(sampling, (Some(0.4), Some(0.9), Some(50)));
    }

    #[test]
    fn retries_ask_as_is_then_with_more_tokens_or_a_correction() {
        let cfg = ModelConfig { max_tokens: Some(100), ..ModelConfig::default() };
        let model = ChatModel::new("m", &cfg, None).unwrap();
        let asked = [Message::user("Extract the records.")];
        let answer = Completion { content: "garbage".into(), ..Completion::default() };
        let cut = Invalid { kind: InvalidKind::Truncated, reason: "cut off".into() };
        let retry = |attempt, invalid: &Invalid| model.retry_body(&asked, false, attempt, invalid, &answer, "records");
        assert_eq!(
            (retry(1, &cut)["max_tokens"].clone(), retry(2, &cut)["max_tokens"].clone()),
            (200.into(), 400.into())
        );
        let bad = Invalid::malformed("no records");
        assert_eq!(retry(1, &bad), model.request_body(&asked, false, Some(100)), "first the same request");
        let corrected = retry(2, &bad);
        let messages = corrected["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[1]["content"], "garbage");
        let correction = messages[2]["content"].as_str().unwrap();
        assert!(correction.starts_with(CORRECTION) && correction.contains("no records"), "{correction}");
    }

    #[test]
    fn call_args_go_into_every_request_and_win() {
        let mut call_args = serde_json::Map::new();
        call_args.insert("seed".into(), 42.into());
        call_args.insert("temperature".into(), 0.7.into());
        call_args.insert("organization".into(), "org-1".into());
        let cfg = ModelConfig { call_args, ..ModelConfig::default() };
        let model = ChatModel::new("m", &cfg, None).unwrap();
        let body = model.request_body(&[Message::user("hi")], true, None);
        assert_eq!((body["seed"].clone(), body["temperature"].clone()), (42.into(), 0.7.into()));
        assert!(body.get("organization").is_none(), "a header, not a body key");
        assert_ne!(model.fingerprint(), ChatModel::new("m", &ModelConfig::default(), None).unwrap().fingerprint());
    }
}
