//! Token and call accounting per model, kept per pipeline step (stats.json)
//! and per query.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::Serialize;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ModelUsage {
    /// Requests answered by the server (retries not counted).
    pub calls: u64,
    pub cache_hits: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub retries: u64,
    pub failures: u64,
    /// JSON answers that needed repair (tolerant parsing or a corrective retry).
    pub json_repairs: u64,
    pub json_failures: u64,
    pub embedded_texts: u64,
}

impl ModelUsage {
    pub fn add(&mut self, o: &ModelUsage) {
        self.calls += o.calls;
        self.cache_hits += o.cache_hits;
        self.prompt_tokens += o.prompt_tokens;
        self.completion_tokens += o.completion_tokens;
        self.retries += o.retries;
        self.failures += o.failures;
        self.json_repairs += o.json_repairs;
        self.json_failures += o.json_failures;
        self.embedded_texts += o.embedded_texts;
    }

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

    pub fn record_call(&self, model: &str, prompt_tokens: u64, completion_tokens: u64) {
        self.with(model, |u| {
            u.calls += 1;
            u.prompt_tokens += prompt_tokens;
            u.completion_tokens += completion_tokens;
        });
    }
    pub fn record_cache_hit(&self, model: &str) {
        self.with(model, |u| u.cache_hits += 1);
    }
    pub fn record_retry(&self, model: &str) {
        self.with(model, |u| u.retries += 1);
    }
    pub fn record_failure(&self, model: &str) {
        self.with(model, |u| u.failures += 1);
    }
    pub fn record_json_repair(&self, model: &str) {
        self.with(model, |u| u.json_repairs += 1);
    }
    pub fn record_json_failure(&self, model: &str) {
        self.with(model, |u| u.json_failures += 1);
    }
    pub fn record_embedded(&self, model: &str, texts: u64) {
        self.with(model, |u| u.embedded_texts += texts);
    }

    pub fn by_model(&self) -> BTreeMap<String, ModelUsage> {
        self.by_model.lock().unwrap().clone()
    }

    pub fn total(&self) -> ModelUsage {
        let mut t = ModelUsage::default();
        for u in self.by_model.lock().unwrap().values() {
            t.add(u);
        }
        t
    }
}
