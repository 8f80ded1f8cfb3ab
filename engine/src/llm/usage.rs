//! Token and call accounting per model, kept per pipeline step (stats.json)
//! and per query.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::Serialize;

use super::answer::InvalidKind;

/// One model's counts over a step or a query (stats.json's `llm`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ModelUsage {
    /// Requests answered by the server (retries not counted).
    pub calls: u64,
    /// Calls answered from the answer cache (nothing sent).
    pub cache_hits: u64,
    /// Prompt tokens of the answered requests, as the server counted them.
    pub prompt_tokens: u64,
    /// Answer tokens of the answered requests, as the server counted them.
    pub completion_tokens: u64,
    /// Requests sent again after a failed attempt (HTTP error, timeout, 429).
    pub retries: u64,
    /// Milliseconds waited before those retries.
    pub retry_wait_ms: u64,
    /// Calls that failed for good (not retryable, retries or time spent).
    pub failures: u64,
    /// Answers received but cut off at the token limit (each asked again).
    pub truncated_answers: u64,
    /// Answers received but not what was asked for (each asked again).
    pub malformed_answers: u64,
    /// Answers received but too large to use (each asked again).
    pub oversized_answers: u64,
    /// Calls whose answer stayed unusable after every retry (never cached).
    pub answer_failures: u64,
    /// JSON answers that needed repair (tolerant parsing).
    pub json_repairs: u64,
    /// Cache entries that read but failed their check (asked again).
    pub cache_rejected: u64,
    /// Cache entries that did not read at all (asked again).
    pub cache_corrupt: u64,
    /// Texts embedded, whether sent to a server or computed in process.
    pub embedded_texts: u64,
    /// How the in-process embedding model computed its vectors (e.g.
    /// `int8-avx512vnni`, `bf16-avx512`, `f32`); absent when it embedded nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding_kernel: Option<String>,
}

impl ModelUsage {
    /// Adds `o`'s counts to these; `o`'s embedding kernel, if any, replaces this one.
    pub fn add(&mut self, o: &ModelUsage) {
        self.calls += o.calls;
        self.cache_hits += o.cache_hits;
        self.prompt_tokens += o.prompt_tokens;
        self.completion_tokens += o.completion_tokens;
        self.retries += o.retries;
        self.retry_wait_ms += o.retry_wait_ms;
        self.failures += o.failures;
        self.truncated_answers += o.truncated_answers;
        self.malformed_answers += o.malformed_answers;
        self.oversized_answers += o.oversized_answers;
        self.answer_failures += o.answer_failures;
        self.json_repairs += o.json_repairs;
        self.cache_rejected += o.cache_rejected;
        self.cache_corrupt += o.cache_corrupt;
        self.embedded_texts += o.embedded_texts;
        if o.embedding_kernel.is_some() {
            self.embedding_kernel.clone_from(&o.embedding_kernel);
        }
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        *self == ModelUsage::default()
    }
}

/// Thread-safe counters keyed by model id.
#[derive(Debug, Default)]
pub struct UsageCounters {
    by_model: Mutex<BTreeMap<String, ModelUsage>>,
}

impl UsageCounters {
    fn with(&self, model: &str, f: impl FnOnce(&mut ModelUsage)) {
        let mut map = self.by_model.lock().unwrap();
        f(map.entry(model.to_string()).or_default());
    }

    pub(crate) fn record_call(&self, model: &str, prompt_tokens: u64, completion_tokens: u64) {
        self.with(model, |u| {
            u.calls += 1;
            u.prompt_tokens += prompt_tokens;
            u.completion_tokens += completion_tokens;
        });
    }
    pub(crate) fn record_cache_hit(&self, model: &str) {
        self.with(model, |u| u.cache_hits += 1);
    }
    pub(crate) fn record_retry(&self, model: &str, wait: std::time::Duration) {
        self.with(model, |u| {
            u.retries += 1;
            // Saturating: a wait from a settings struct built in code may be
            // as long as a Duration holds.
            let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
            u.retry_wait_ms = u.retry_wait_ms.saturating_add(ms);
        });
    }
    pub(crate) fn record_failure(&self, model: &str) {
        self.with(model, |u| u.failures += 1);
    }
    pub(crate) fn record_invalid(&self, model: &str, kind: InvalidKind) {
        self.with(model, |u| match kind {
            InvalidKind::Truncated => u.truncated_answers += 1,
            InvalidKind::Malformed => u.malformed_answers += 1,
            InvalidKind::Oversized => u.oversized_answers += 1,
        });
    }
    pub(crate) fn record_answer_failure(&self, model: &str) {
        self.with(model, |u| u.answer_failures += 1);
    }
    pub(crate) fn record_json_repair(&self, model: &str) {
        self.with(model, |u| u.json_repairs += 1);
    }
    pub(crate) fn record_cache_rejected(&self, model: &str) {
        self.with(model, |u| u.cache_rejected += 1);
    }
    pub(crate) fn record_cache_corrupt(&self, model: &str) {
        self.with(model, |u| u.cache_corrupt += 1);
    }
    pub(crate) fn record_embedded(&self, model: &str, texts: u64) {
        self.with(model, |u| u.embedded_texts += texts);
    }
    pub(crate) fn record_embedding_kernel(&self, model: &str, kernel: &str) {
        self.with(model, |u| u.embedding_kernel = Some(kernel.to_string()));
    }

    /// The counts so far, by model id.
    pub fn by_model(&self) -> BTreeMap<String, ModelUsage> {
        self.by_model.lock().unwrap().clone()
    }

    /// The counts so far, every model's summed.
    pub fn total(&self) -> ModelUsage {
        let mut t = ModelUsage::default();
        for u in self.by_model.lock().unwrap().values() {
            t.add(u);
        }
        t
    }
}
