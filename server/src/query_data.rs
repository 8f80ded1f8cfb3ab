//! `POST /query/data`: LightRAG's structured retrieval, no answer — the
//! entities, relationships, chunks and references a query retrieves, from
//! the method's context records (no chat model is called).

use std::sync::Arc;

use serde_json::{json, Value};

use crate::http::{self, Resp, Result};
use crate::query::{self, parse_query};
use crate::state::State;

/// The records of `key` (an empty list when the method has none).
fn records(all: &Value, key: &str) -> Value {
    all.get(key).filter(|v| v.is_array()).cloned().unwrap_or_else(|| json!([]))
}

pub async fn query_data(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let (mut ask, _, _) = parse_query(&state.settings, body)?;
    ask.context_only = true;
    let mode = ask.method.to_string();
    let started = std::time::Instant::now();
    let a = query::ask(state, ask, None).await?;
    let all = &a.records.to_json();
    let data = json!({
        "entities": records(all, "entities"),
        "relationships": records(all, "relationships"),
        "chunks": records(all, "sources"),
        "references": a.references,
        "reports": records(all, "reports"),
    });
    let count = |k: &str| data[k].as_array().map_or(0, Vec::len);
    http::json(json!({
        "status": "success",
        "message": "Query executed successfully",
        "data": data,
        "metadata": {
            "query_mode": mode,
            "keywords": {"high_level": [], "low_level": []},
            "processing_info": {
                "total_entities_found": count("entities"),
                "total_relations_found": count("relationships"),
                "final_chunks_count": count("chunks"),
                "response_time": started.elapsed().as_secs_f64(),
            },
            "index_version": a.index_version,
        },
    }))
}
