//! Answers to rerank requests in Cohere's and Jina's shape (`query`,
//! `documents`, `top_n` → `results: [{index, relevance_score}]`, best
//! first), deterministic: a document's score is the share of the query's
//! distinct words it contains, so a test can tell which order a rerank
//! gives without a model.

use std::collections::BTreeSet;

use serde_json::{json, Value};

/// The answer's body, or why the request is refused (as Cohere refuses it).
pub(crate) fn answer(request: &Value) -> Result<Vec<u8>, String> {
    let query = request.get("query").and_then(Value::as_str).ok_or("`query` is required")?;
    let documents = request.get("documents").and_then(Value::as_array).ok_or("`documents` is required")?;
    let texts = documents
        .iter()
        .map(|d| match d {
            Value::String(s) => Some(s.as_str()),
            // Cohere's v1 and Jina also take {"text": ...}.
            _ => d.get("text").and_then(Value::as_str),
        })
        .collect::<Option<Vec<&str>>>()
        .ok_or("every document must be a string or {\"text\": ...}")?;
    let top_n = match request.get("top_n") {
        None | Some(Value::Null) => texts.len(),
        Some(n) => n.as_u64().filter(|&n| n >= 1).ok_or("`top_n` must be a positive integer")? as usize,
    };
    let asked = words(query);
    let mut results: Vec<(usize, f64)> = texts
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let shared = asked.intersection(&words(text)).count();
            (i, if asked.is_empty() { 0.0 } else { shared as f64 / asked.len() as f64 })
        })
        .collect();
    results.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    results.truncate(top_n);
    let results: Vec<Value> = results.iter().map(|(i, s)| json!({"index": i, "relevance_score": s})).collect();
    let body = json!({"id": "mock-rerank", "results": results, "meta": {"billed_units": {"search_units": 1}}});
    Ok(serde_json::to_vec(&body).unwrap_or_default())
}

/// The distinct lower-case words of `text` longer than two letters.
fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2).map(str::to_lowercase).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_sharing_more_of_the_query_rank_first() {
        let request = json!({"query": "Where did Scrooge's partner Marley die?",
            "documents": ["A Christmas carol.", "Marley was dead: Scrooge's partner.", {"text": "Marley's ghost"}]});
        let body: Value = serde_json::from_slice(&answer(&request).unwrap()).unwrap();
        let order: Vec<u64> =
            body["results"].as_array().unwrap().iter().map(|r| r["index"].as_u64().unwrap()).collect();
        assert_eq!(order, [1, 2, 0]);
        assert!(answer(&json!({"query": "q"})).unwrap_err().contains("documents"));
    }
}
