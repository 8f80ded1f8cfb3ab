//! `completion_models:` / `embedding_models:` entries: our keys and GraphRAG
//! 3.x's (`retry`, `rate_limit`, `call_args`, `auth_method`, ...), and the
//! effective retry and rate-limit policy they make together.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use graphrag_local_embed::Precision;

use super::{s, AwsAccess, Provider, Secret, Unused, VertexAccess};

/// Concurrent requests per model when neither the model nor the top-level
/// `concurrent_requests` says (GraphRAG's default).
pub(crate) const DEFAULT_CONCURRENCY: u32 = 25;

section!(
    /// One model of `completion_models:` / `embedding_models:`.
    ModelConfig {
        /// GraphRAG's client type: `litellm` (any OpenAI-compatible server).
        #[serde(rename = "type")]
        client_type: String = s("litellm"),
        /// openai | azure | anthropic | gemini | ollama | vllm | deepseek | ... |
        /// local (in-process embeddings); see `Provider`.
        model_provider: Provider = Provider::OpenAi,
        /// The model's name at the provider (or a local model's).
        model: String = s("gpt-4.1-mini"),
        /// The key sent to the server; for Anthropic, Gemini and Azure AI, when
        /// empty, their environment variable's (`ANTHROPIC_API_KEY`, …).
        api_key: Secret = Secret::default(),
        /// api_key | azure_managed_identity (not supported here).
        auth_method: String = s("api_key"),
        /// The server's base URL (default: the provider's).
        api_base: Option<String> = None,
        /// Azure OpenAI's `api-version`.
        api_version: Option<String> = None,
        /// Azure OpenAI's deployment (default: `model`).
        #[serde(alias = "azure_deployment_name")]
        deployment_name: Option<String> = None,
        /// Directory of a local embedding model (model_provider: local).
        model_path: Option<String> = None,
        /// Arithmetic of a local embedding model (dense layers and attention):
        /// f32 | int8 | bf16 | auto (int8 where the CPU has VNNI int8 instructions, else f32).
        /// A change of precision is a change of model: vectors are re-embedded.
        precision: Precision = Precision::Auto,
        /// The tokenizer prompts are counted with (`o200k_base`, `cl100k_base`).
        encoding_model: String = s("o200k_base"),
        /// The answer's `max_tokens`; null: none sent (Anthropic: 4096).
        max_tokens: Option<u32> = None,
        /// Sampling temperature sent with every chat request.
        temperature: f64 = 0.0,
        /// Nucleus sampling sent with every chat request.
        top_p: f64 = 1.0,
        /// Extra request parameters sent with every request (GraphRAG's
        /// `call_args`: `max_completion_tokens`, `seed`, `temperature`, ...);
        /// they win over the keys above. `organization` becomes the
        /// OpenAI-Organization header.
        call_args: Map<String, Value> = Map::new(),
        /// Seconds one request may take.
        request_timeout: f64 = 180.0,
        /// Retries of a failed request (transient failures only).
        max_retries: u32 = 10,
        /// Seconds: first backoff delay (doubled per retry, with jitter, capped by max_retry_wait).
        retry_base_delay: f64 = 1.0,
        /// Seconds: the longest wait before a retry, a server's Retry-After
        /// included (GraphRAG's `retry.max_delay`, when given, instead).
        max_retry_wait: f64 = 60.0,
        /// Seconds: a request stops retrying when its next attempt would start
        /// later than this after its first (waits and failed attempts together).
        max_retry_time: f64 = 300.0,
        /// Calls in a row that fail for good (after their retries) before the
        /// model is not called again this run (circuit breaker).
        max_consecutive_failures: u32 = 5,
        /// GraphRAG's retry section; when present it replaces max_retries,
        /// retry_base_delay and max_retry_wait.
        retry: Option<RetryConfig> = None,
        /// Requests in flight at once; default: the top-level `concurrent_requests`.
        concurrent_requests: Option<u32> = None,
        /// Request rate limit; null: none.
        requests_per_minute: Option<u32> = None,
        /// Prompt token rate limit; null: none.
        tokens_per_minute: Option<u32> = None,
        /// GraphRAG's rate_limit section (requests and tokens per period).
        rate_limit: Option<RateLimitConfig> = None,
        /// Ask for JSON answers with `response_format` where a call wants JSON.
        model_supports_json: bool = true,
        /// HTTP headers sent with every request.
        extra_headers: std::collections::BTreeMap<String, String> = Default::default(),
        /// Embeddings: texts per request and tokens per request
        /// (`embed_text.batch_size` / `batch_max_tokens` override them).
        batch_size: u32 = 16,
        /// Embeddings: tokens per request.
        batch_max_tokens: u32 = 8191,
        /// GraphRAG's metrics services (accepted, no effect).
        metrics: Option<Unused> = None,
        /// GraphRAG's mock provider answers (accepted, no effect).
        mock_responses: Option<Unused> = None,
        /// A Bedrock model's AWS credentials and region, from the environment
        /// (not a settings key: see `AwsAccess`).
        #[serde(skip)]
        aws: Option<AwsAccess> = None,
        /// A Vertex AI model's service account, project and region, from
        /// call_args and the environment (see `VertexAccess`).
        #[serde(skip)]
        vertex: VertexAccess = VertexAccess::default(),
    }
);

section!(
    /// GraphRAG's `retry:` of a model.
    RetryConfig {
        /// exponential_backoff | immediate
        #[serde(rename = "type")]
        kind: String = s("exponential_backoff"),
        /// Default 7 (GraphRAG's).
        max_retries: Option<u32> = None,
        /// The wait before retry n is base_delay^n seconds (default 2.0).
        base_delay: Option<f64> = None,
        /// Adds up to one second at random to each wait (default true).
        jitter: Option<bool> = None,
        /// Cap on one wait, seconds (default: the model's max_retry_wait, 60 s).
        max_delay: Option<f64> = None,
    }
);

section!(
    /// GraphRAG's `rate_limit:` of a model (a sliding window; here a token
    /// bucket refilled over the period, which admits the same average rate).
    RateLimitConfig {
        /// sliding_window
        #[serde(rename = "type")]
        kind: String = s("sliding_window"),
        /// The window's length (default 60).
        period_in_seconds: Option<u32> = None,
        /// Requests per window; null: no limit.
        requests_per_period: Option<u32> = None,
        /// Prompt tokens per window; null: no limit.
        tokens_per_period: Option<u32> = None,
    }
);

/// How a model retries: the number of retries and the wait before each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RetryPolicy {
    pub max_retries: u32,
    /// Seconds before the first retry.
    pub first_delay: f64,
    /// Each further retry waits this many times longer.
    pub factor: f64,
    /// Cap on one wait, seconds.
    pub max_delay: f64,
    pub jitter: Jitter,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Jitter {
    None,
    /// The wait times a random factor in [0.5, 1) (graphrag-rs's keys).
    Proportional,
    /// Plus a random [0, 1) seconds (GraphRAG's `retry.jitter`).
    UpToOneSecond,
}

/// A longest single wait, so that no setting can overflow a Duration.
const MAX_ONE_WAIT: f64 = 86_400.0;

impl RetryPolicy {
    /// The wait before retry `n` (1-based), given `random` in [0, 1).
    pub fn wait(&self, n: u32, random: f64) -> f64 {
        let grown = self.first_delay.max(0.0) * self.factor.max(1.0).powi(n.saturating_sub(1).min(60) as i32);
        let jittered = match self.jitter {
            Jitter::None => grown,
            Jitter::Proportional => grown * (0.5 + 0.5 * random),
            Jitter::UpToOneSecond => grown + random,
        };
        jittered.min(self.max_delay.max(0.0)).min(MAX_ONE_WAIT)
    }
}

/// A request or token limit per period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RateLimit {
    pub limit: u32,
    pub period_seconds: u32,
}

impl ModelConfig {
    /// Whether a chat model can reach a server: an API key (AWS credentials
    /// for Bedrock, a service account for Vertex AI), or an explicit
    /// api_base (local servers need no key).
    /// Without either, queries are retrieval-only and the fast pipeline is
    /// the one that indexes.
    pub fn chat_configured(&self) -> bool {
        !self.api_key.is_empty() || self.api_base.is_some() || self.aws.is_some() || self.vertex.credentials.is_some()
    }

    /// Requests in flight at once.
    pub fn concurrency(&self) -> u32 {
        self.concurrent_requests.unwrap_or(DEFAULT_CONCURRENCY).max(1)
    }

    /// The retry policy: GraphRAG's `retry:` when given, else ours.
    pub(crate) fn retry_policy(&self) -> RetryPolicy {
        match &self.retry {
            Some(r) if r.kind == "immediate" => RetryPolicy {
                max_retries: r.max_retries.unwrap_or(7),
                first_delay: 0.0,
                factor: 1.0,
                max_delay: 0.0,
                jitter: Jitter::None,
            },
            Some(r) => {
                let base = r.base_delay.unwrap_or(2.0);
                RetryPolicy {
                    max_retries: r.max_retries.unwrap_or(7),
                    first_delay: base,
                    factor: base,
                    // Every wait is bounded: GraphRAG's default is none.
                    max_delay: r.max_delay.unwrap_or(self.max_retry_wait),
                    jitter: if r.jitter.unwrap_or(true) { Jitter::UpToOneSecond } else { Jitter::None },
                }
            }
            None => RetryPolicy {
                max_retries: self.max_retries,
                first_delay: self.retry_base_delay,
                factor: 2.0,
                max_delay: self.max_retry_wait,
                jitter: Jitter::Proportional,
            },
        }
    }

    /// Requests per period: `rate_limit.requests_per_period` or `requests_per_minute`.
    pub(crate) fn request_limit(&self) -> Option<RateLimit> {
        self.limit(|r| r.requests_per_period, self.requests_per_minute)
    }

    /// Prompt tokens per period: `rate_limit.tokens_per_period` or `tokens_per_minute`.
    pub(crate) fn token_limit(&self) -> Option<RateLimit> {
        self.limit(|r| r.tokens_per_period, self.tokens_per_minute)
    }

    fn limit(&self, graphrag: impl Fn(&RateLimitConfig) -> Option<u32>, per_minute: Option<u32>) -> Option<RateLimit> {
        let from_section = self.rate_limit.as_ref().and_then(|r| {
            graphrag(r).map(|limit| RateLimit { limit, period_seconds: r.period_in_seconds.unwrap_or(60) })
        });
        from_section
            .or(per_minute.map(|limit| RateLimit { limit, period_seconds: 60 }))
            .filter(|l| l.limit > 0 && l.period_seconds > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphrag_retry_waits_grow_as_base_delay_to_the_n() {
        let cfg = ModelConfig {
            retry: Some(RetryConfig { jitter: Some(false), ..RetryConfig::default() }),
            ..ModelConfig::default()
        };
        let p = cfg.retry_policy();
        assert_eq!(p.max_retries, 7);
        assert_eq!([1, 2, 3, 7].map(|n| p.wait(n, 0.5)), [2.0, 4.0, 8.0, 60.0], "capped by max_retry_wait");
        let uncapped = RetryConfig { jitter: Some(false), max_delay: Some(1000.0), ..RetryConfig::default() };
        let p = ModelConfig { retry: Some(uncapped), ..ModelConfig::default() }.retry_policy();
        assert_eq!(p.wait(7, 0.5), 128.0);
        let capped = RetryConfig { base_delay: Some(3.0), max_delay: Some(10.0), ..RetryConfig::default() };
        let p = ModelConfig { retry: Some(capped), ..ModelConfig::default() }.retry_policy();
        assert_eq!(p.wait(1, 0.25), 3.25, "jitter adds up to a second");
        assert_eq!(p.wait(3, 0.25), 10.0);
        let immediate = RetryConfig { kind: s("immediate"), max_retries: Some(3), ..RetryConfig::default() };
        let p = ModelConfig { retry: Some(immediate), ..ModelConfig::default() }.retry_policy();
        assert_eq!((p.max_retries, p.wait(2, 0.9)), (3, 0.0));
    }

    #[test]
    fn our_retry_keys_without_a_retry_section() {
        let cfg = ModelConfig { retry_base_delay: 1.0, max_retry_wait: 10.0, max_retries: 4, ..ModelConfig::default() };
        let p = cfg.retry_policy();
        assert_eq!(p.max_retries, 4);
        assert_eq!(p.wait(1, 0.0), 0.5);
        assert_eq!(p.wait(3, 0.999_999_9).round(), 4.0);
        assert_eq!(p.wait(20, 0.5), 10.0);
    }

    #[test]
    fn rate_limits_from_either_form() {
        let rl = RateLimitConfig { period_in_seconds: Some(10), requests_per_period: Some(5), ..Default::default() };
        let cfg = ModelConfig { rate_limit: Some(rl), tokens_per_minute: Some(1000), ..ModelConfig::default() };
        assert_eq!(cfg.request_limit(), Some(RateLimit { limit: 5, period_seconds: 10 }));
        assert_eq!(cfg.token_limit(), Some(RateLimit { limit: 1000, period_seconds: 60 }));
        assert_eq!(ModelConfig::default().request_limit(), None);
        assert_eq!(ModelConfig::default().concurrency(), DEFAULT_CONCURRENCY);
    }
}
