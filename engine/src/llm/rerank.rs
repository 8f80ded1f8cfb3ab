//! Rerank models: how relevant each retrieved chunk is to the question,
//! asked of a server's `/rerank` in Cohere's and Jina's shape (`query`,
//! `documents`, `top_n` → `results: [{index, relevance_score}]`), which
//! vLLM, TEI and Infinity serve too. Limits, retries, the call scope (a
//! query's deadline and cancellation) and the cache are the other models';
//! an answer is checked whole (every document scored once, finite scores)
//! before it is used or cached.

use std::sync::Arc;

use serde_json::{json, Value};

use super::cache::{Checked, ResponseCache};
use super::http::Transport;
use super::retry::{CallScope, Policy};
use super::{LlmError, UsageCounters};
use crate::settings::ModelConfig;
use graphrag_operations::tokenizer::Encoding;

/// One rerank model of the settings (`/rerank`, Cohere's and Jina's form):
/// its transport, limits, retries and answer cache.
pub struct RerankModel {
    id: String,
    model: String,
    transport: Arc<Transport>,
    policy: Arc<Policy>,
    cache: Option<Arc<ResponseCache>>,
    scope: CallScope,
}

impl RerankModel {
    pub(crate) fn new(id: &str, config: &ModelConfig, cache: Option<Arc<ResponseCache>>) -> Result<Self, LlmError> {
        Ok(RerankModel {
            id: id.to_string(),
            model: config.model.clone(),
            transport: Arc::new(Transport::new(id, config)?),
            policy: Arc::new(Policy::new(id, config)),
            cache,
            scope: CallScope::default(),
        })
    }

    /// The same model whose calls are bounded by `scope` (see `ChatModel::within`).
    pub fn within(&self, scope: &CallScope) -> RerankModel {
        RerankModel {
            id: self.id.clone(),
            model: self.model.clone(),
            transport: self.transport.clone(),
            policy: self.policy.clone(),
            cache: self.cache.clone(),
            scope: scope.clone(),
        }
    }

    /// Its id in the settings (`rerank_models`).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The relevance of each of `documents` to `query` (same order; higher
    /// is more relevant).
    pub async fn rerank(&self, query: &str, documents: &[String], usage: &UsageCounters) -> Result<Vec<f64>, LlmError> {
        if documents.is_empty() {
            return Ok(Vec::new());
        }
        let n = documents.len();
        let mut parts: Vec<&str> = vec!["rerank", &self.model, query];
        parts.extend(documents.iter().map(String::as_str));
        let key = ResponseCache::key(&parts);
        if let Some(cache) = &self.cache {
            if let Some(hit) = cache.get(&key, |s: &Vec<f64>| usable(s, n)).hit(usage, &self.id) {
                return Ok(hit.into_parts().0);
            }
        }
        let tokens = documents.iter().chain([&query.to_string()]).map(|t| Encoding::Cl100kBase.count(t) as u64).sum();
        let body = json!({
            "model": self.model,
            "query": query,
            "documents": documents,
            "top_n": n,
            "return_documents": false,
        });
        let keep = |scores: Vec<f64>| {
            usage.record_call(&self.id, tokens, 0);
            let checked = Checked::new(scores, |s: &Vec<f64>| usable(s, n)).map_err(|(_, e)| e)?;
            if let Some(cache) = &self.cache {
                cache.put(&key, &checked);
            }
            Ok::<_, String>(checked.into_parts().0)
        };
        let call = || self.transport.rerank(&body, n);
        self.policy.settle_checked(usage, self.policy.send(usage, tokens, &self.scope, call, keep).await)
    }
}

/// Scores worth keeping: one finite number per document.
fn usable(scores: &[f64], expected: usize) -> Result<(), String> {
    if scores.len() != expected {
        return Err(format!("{} scores for {expected} documents", scores.len()));
    }
    if !scores.iter().all(|s| s.is_finite()) {
        return Err("a score that is not a finite number".into());
    }
    Ok(())
}

/// The score of each of the `expected` documents from a rerank answer:
/// `{"results": [{"index", "relevance_score"}]}` (Cohere, Jina, vLLM,
/// Infinity) or TEI's bare `[{"index", "score"}]`. Every document must be
/// scored exactly once.
pub(crate) fn scores(answer: &Value, expected: usize) -> Result<Vec<f64>, String> {
    let results = match answer {
        Value::Array(results) => results,
        _ => answer
            .get("results")
            .and_then(Value::as_array)
            .ok_or_else(|| "the rerank answer has no `results` list".to_string())?,
    };
    let mut scores: Vec<Option<f64>> = vec![None; expected];
    for result in results {
        let index = result.get("index").and_then(Value::as_u64).ok_or("a rerank result without an `index`")?;
        let score = result
            .get("relevance_score")
            .or_else(|| result.get("score"))
            .and_then(Value::as_f64)
            .ok_or_else(|| format!("rerank result {index} has no score"))?;
        let slot = usize::try_from(index)
            .ok()
            .and_then(|i| scores.get_mut(i))
            .ok_or_else(|| format!("rerank result index {index} is not one of the {expected} documents"))?;
        if slot.replace(score).is_some() {
            return Err(format!("document {index} is scored twice"));
        }
    }
    let scored = scores.iter().flatten().count();
    if scored != expected {
        return Err(format!("the rerank answer scores {scored} of the {expected} documents"));
    }
    Ok(scores.into_iter().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn cohere_jina_and_tei_answers_are_read_by_index() {
        let cohere = json!({"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.2}]});
        assert_eq!(scores(&cohere, 2).unwrap(), [0.2, 0.9]);
        let tei = json!([{"index": 0, "score": 0.5}, {"index": 1, "score": 0.7}]);
        assert_eq!(scores(&tei, 2).unwrap(), [0.5, 0.7]);
    }

    #[test]
    fn an_answer_that_misses_or_repeats_a_document_is_refused() {
        let missing = json!({"results": [{"index": 0, "relevance_score": 0.9}]});
        assert!(scores(&missing, 2).unwrap_err().contains("scores 1 of the 2"));
        let twice = json!({"results": [{"index": 0, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}]});
        assert!(scores(&twice, 2).unwrap_err().contains("twice"));
        let outside = json!({"results": [{"index": 5, "relevance_score": 0.9}]});
        assert!(scores(&outside, 1).unwrap_err().contains("not one of"));
        assert!(scores(&json!({"data": []}), 1).unwrap_err().contains("no `results`"));
        assert!(usable(&[f64::NAN], 1).is_err());
    }

    proptest! {
        /// Any permutation of scored indexes reads back as the scores by position;
        /// anything else is an error, never a panic.
        #[test]
        fn any_order_of_results_reads_back_by_position(raw in proptest::collection::vec(-10.0f64..10.0, 0..20), seed in 0u64..1000) {
            let n = raw.len();
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by_key(|i| (*i as u64).wrapping_mul(seed + 7) % 101);
            let results: Vec<Value> = order.iter().map(|&i| json!({"index": i, "relevance_score": raw[i]})).collect();
            prop_assert_eq!(scores(&json!({"results": results}), n).unwrap(), raw);
        }

        #[test]
        fn arbitrary_answers_never_panic(text in ".{0,200}", n in 0usize..5) {
            if let Ok(value) = serde_json::from_str::<Value>(&text) {
                let _ = scores(&value, n);
            }
        }
    }
}
