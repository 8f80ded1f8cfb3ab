//! `/query`, `/query/stream` (LightRAG's shapes) and the graph paths, over
//! the loaded snapshot. A query runs on a blocking thread with the snapshot
//! it started with (see `state`).

use std::str::FromStr;
use std::sync::Arc;

use bytes::Bytes;
use graphrag_engine::cancel::CancelToken;
use graphrag_engine::settings::{duration_of_seconds, ServeConfig, Settings};
use graphrag_query::records::ContextRecords;
use graphrag_query::{Method, QueryRequest, DEFAULT_RESPONSE_TYPE};
use hyper::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::http::{self, ApiError, Resp, Result};
use crate::state::{Snapshot, State};

/// One question to the index, from any of the APIs.
pub struct Ask {
    pub method: Method,
    pub question: String,
    pub history: Vec<(String, String)>,
    pub context_only: bool,
    pub response_type: Option<String>,
    pub community_level: Option<u32>,
    /// A context budget below the method's own (LightRAG's `max_total_tokens`).
    pub max_context_tokens: Option<usize>,
    /// LightRAG's `enable_rerank`; `None`: settings `rerank.by_default`.
    pub rerank: Option<bool>,
}

pub struct Answer {
    /// The model's answer, or the context when none was generated.
    pub text: String,
    /// Whether a model wrote `text`.
    pub llm_generated: bool,
    pub references: Vec<Value>,
    /// What the context was built from; its JSON is made where a response carries it.
    pub records: ContextRecords,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// The publication it was answered from (see `Snapshot::version`).
    pub index_version: String,
}

/// A method name as LightRAG's `mode` (`naive` = basic); `bypass` is refused.
pub fn method(mode: &str) -> Result<Method> {
    if mode.eq_ignore_ascii_case("bypass") {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "mode `bypass` (the LLM without the index) is not served: use local, global, basic (naive), drift, hybrid, mix or ppr",
        ));
    }
    Method::from_str(mode).map_err(|e| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, format!("{e:#}")))
}

/// Receives the answer piece by piece as the model streams it.
pub type Tokens = Box<dyn FnMut(&str) + Send>;

/// Answers `ask` on a blocking thread, within `serve.query_timeout` (504
/// past it). Dropping the returned future (a client that went away, or the
/// deadline) cancels the query's model calls.
pub async fn ask(state: &Arc<State>, ask: Ask, tokens: Option<Tokens>) -> Result<Answer> {
    check_history(&state.settings.serve, &ask.history)?;
    // The query crate's own check, before any work: one limit everywhere.
    graphrag_query::check_question(&ask.question)
        .map_err(|refused| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, refused.to_string()))?;
    let snapshot = state.snapshot();
    let cancel = CancelToken::new();
    let _cancel_when_dropped = cancel.cancel_on_drop();
    // One deadline for the whole query: a model that hangs would otherwise
    // hold it for a request timeout, and again for each retry that starts
    // within query.max_retry_time.
    let limit = state.settings.serve.query_timeout;
    let answering = tokio::task::spawn_blocking(move || answer(&snapshot, ask, tokens, cancel));
    match tokio::time::timeout(duration_of_seconds(limit), answering).await {
        Ok(joined) => joined.map_err(|e| ApiError::from(anyhow::anyhow!("the query stopped: {e}")))?,
        Err(_) => Err(ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "the query did not finish within its deadline of {limit} s (settings serve.query_timeout), and its model calls were stopped: is the model answering? A slow one needs a longer serve.query_timeout"
            ),
        )),
    }
}

/// The history a request may carry (settings `serve.max_history_messages`
/// and `max_history_chars`): every API's messages pass here.
fn check_history(limits: &ServeConfig, history: &[(String, String)]) -> Result<()> {
    let chars: usize = history.iter().map(|(_, content)| content.chars().count()).sum();
    let too_long = if history.len() > limits.max_history_messages {
        Some(format!("{} earlier messages, more than the {} allowed", history.len(), limits.max_history_messages))
    } else if chars > limits.max_history_chars {
        Some(format!("earlier messages of {chars} characters, more than the {} allowed", limits.max_history_chars))
    } else {
        None
    };
    match too_long {
        Some(what) => Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the conversation history is too long: {what} (settings serve.max_history_messages, serve.max_history_chars)"),
        )),
        None => Ok(()),
    }
}

fn answer(snapshot: &Snapshot, ask: Ask, mut tokens: Option<Tokens>, cancel: CancelToken) -> Result<Answer> {
    let engine = snapshot.engine.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "there is no index yet: upload or insert documents (or POST /documents/scan) and wait until they are processed",
        )
    })?;
    let mut req = QueryRequest::new(ask.method, ask.question);
    req.history = ask.history;
    req.context_only = ask.context_only;
    req.community_level = ask.community_level;
    req.max_context_tokens = ask.max_context_tokens;
    req.rerank = ask.rerank;
    req.response_type = ask.response_type.unwrap_or_else(|| DEFAULT_RESPONSE_TYPE.to_string());
    req.cancel = cancel;
    let streamed = tokens.is_some();
    let mut send = |piece: &str| {
        if let Some(f) = tokens.as_mut() {
            f(piece)
        }
    };
    let result = engine.query(&req, streamed.then_some(&mut send as &mut _))?;
    let references = engine
        .source_documents(&result.context_records.source_ids())?
        .into_iter()
        .enumerate()
        .map(|(i, file)| json!({"reference_id": (i + 1).to_string(), "file_path": file}))
        .collect();
    let llm_generated = result.answer.is_some();
    Ok(Answer {
        text: result.answer.unwrap_or(result.context),
        llm_generated,
        references,
        records: result.context_records,
        prompt_tokens: result.stats.prompt_tokens,
        completion_tokens: result.stats.completion_tokens,
        index_version: snapshot.version(),
    })
}

#[derive(Deserialize)]
struct Message {
    role: String,
    content: String,
}

/// LightRAG's `QueryRequest`; its other retrieval knobs (top_k, the entity
/// and relation token budgets, keywords) are accepted and left to
/// settings.yaml.
#[derive(Deserialize)]
struct QueryBody {
    query: String,
    #[serde(default = "default_mode")]
    mode: String,
    #[serde(default)]
    only_need_context: Option<bool>,
    #[serde(default)]
    only_need_prompt: Option<bool>,
    #[serde(default)]
    response_type: Option<String>,
    #[serde(default)]
    conversation_history: Option<Vec<Message>>,
    #[serde(default)]
    include_references: Option<bool>,
    /// LightRAG: answer from these documents only. Not offered (the index
    /// has no per-document filter): refused unless empty.
    #[serde(default)]
    ids: Option<Vec<String>>,
    /// LightRAG: the most tokens of context; a bound on the method's own
    /// budget ([`context_bound`]).
    #[serde(default)]
    max_total_tokens: Option<usize>,
    /// LightRAG: rerank the retrieved chunks with the rerank model
    /// (settings `rerank.model_id`); default `rerank.by_default`.
    #[serde(default)]
    enable_rerank: Option<bool>,
    /// graphrag-rs: the community level of global / local / drift.
    #[serde(default)]
    community_level: Option<u32>,
    /// graphrag-rs: add the context records (entities, relationships,
    /// sources, reports) to the answer.
    #[serde(default)]
    include_context_records: Option<bool>,
}

fn default_mode() -> String {
    "mix".into()
}

pub(crate) fn parse_query(settings: &Settings, body: &[u8]) -> Result<(Ask, bool, bool)> {
    let q: QueryBody = http::parse_json(body)?;
    if q.only_need_prompt == Some(true) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "only_need_prompt is not served: use only_need_context for the retrieved context",
        ));
    }
    if q.ids.as_ref().is_some_and(|ids| !ids.is_empty()) {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "ids is not served: a query cannot be limited to some documents (the index answers from all of them); send null or [], or index those documents in a project of their own",
        ));
    }
    let method = method(&q.mode)?;
    let history = q.conversation_history.unwrap_or_default().into_iter().map(|m| (m.role, m.content)).collect();
    let ask = Ask {
        max_context_tokens: context_bound(settings, method, q.max_total_tokens)?,
        method,
        question: q.query,
        history,
        context_only: q.only_need_context.unwrap_or(false),
        response_type: q.response_type,
        community_level: q.community_level,
        rerank: q.enable_rerank,
    };
    Ok((ask, q.include_references.unwrap_or(true), q.include_context_records.unwrap_or(false)))
}

/// LightRAG's `max_total_tokens` as a bound on the context: the context
/// budget of the request when it is below the method's own (its settings),
/// none otherwise, so that the LightRAG web UI's default (30,000, above
/// every default budget) changes nothing.
fn context_bound(s: &Settings, method: Method, max_total_tokens: Option<usize>) -> Result<Option<usize>> {
    let Some(bound) = max_total_tokens else { return Ok(None) };
    let refuse = |why: String| Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, format!("max_total_tokens: {why}")));
    if bound == 0 {
        return refuse("0 tokens of context leave nothing to answer from: give at least 1".into());
    }
    let own = match method {
        Method::Global => {
            let batch = s.global_search.max_context_tokens;
            if bound < batch {
                return refuse(format!(
                    "global search sends the community reports in batches of global_search.max_context_tokens ({batch}) tokens, one model call each, and cannot keep to {bound}: lower that setting, or ask with another mode"
                ));
            }
            return Ok(None);
        }
        Method::Local => s.local_search.max_context_tokens,
        Method::Basic | Method::Dense | Method::Bm25 => s.basic_search.max_context_tokens,
        Method::Ppr => s.ppr_search.max_context_tokens,
        Method::Hybrid | Method::Mix => s.keyword_search.max_total_tokens,
        // The primer's reports and the follow-up local searches share it.
        Method::Drift => s.drift_search.data_max_tokens + s.drift_search.local_search_max_data_tokens,
    };
    Ok((bound < own).then_some(bound))
}

/// `POST /query`.
pub async fn query(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let (ask, references, records) = parse_query(&state.settings, body)?;
    crate::chat_model::require(state, ask.method, ask.context_only)?;
    let started = std::time::Instant::now();
    let a = self::ask(state, ask, None).await?;
    let mut out = json!({
        "response": a.text,
        "response_time": started.elapsed().as_secs_f64(),
        "llm_generated": a.llm_generated,
        "index_version": a.index_version,
    });
    if references {
        out["references"] = Value::Array(a.references);
    }
    if records {
        out["context_records"] = a.records.to_json();
    }
    http::json(out)
}

/// `POST /query/stream`: NDJSON lines `{"response": piece}` as the answer
/// streams, then `{"references": [...]}` (LightRAG sends those first; here
/// they are known once retrieval ends, so they come last), or `{"error": …}`.
pub async fn query_stream(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let (ask, references, records) = parse_query(&state.settings, body)?;
    crate::chat_model::require(state, ask.method, ask.context_only)?;
    let (resp, tx) = http::stream("application/x-ndjson");
    let line = |v: Value| Bytes::from(format!("{v}\n"));
    let pieces = tx.clone();
    let tokens: Tokens = Box::new(move |piece| {
        let _ = pieces.send(line(json!({ "response": piece })));
    });
    let state = state.clone();
    tokio::spawn(async move {
        // A client that goes away drops the answer's receiver: the query is
        // dropped with it, which cancels its model calls.
        let Some(answered) = http::until_closed(&tx, self::ask(&state, ask, Some(tokens))).await else { return };
        match answered {
            Ok(a) => {
                if !a.llm_generated {
                    let _ = tx.send(line(json!({"response": a.text, "llm_generated": a.llm_generated})));
                }
                let mut tail = json!({});
                if references {
                    tail["references"] = Value::Array(a.references);
                }
                if records {
                    tail["context_records"] = a.records.to_json();
                }
                if tail.as_object().is_some_and(|o| !o.is_empty()) {
                    let _ = tx.send(line(tail));
                }
            }
            Err(e) => {
                let _ = tx.send(line(json!({ "error": e.message })));
            }
        }
    });
    Ok(resp)
}

/// `GET /graph/label/list`: every entity name, most connected first.
pub fn labels(state: &State, query: Option<&str>) -> Result<Resp> {
    let snapshot = state.snapshot();
    let limit = http::query_number(query, "limit", usize::MAX, usize::MAX)?;
    let search = http::query_param(query, "q");
    http::json(json!(snapshot.graph.labels(search.as_deref(), limit)))
}

/// `GET /graphs?label=…&max_depth=…&max_nodes=…`.
pub fn graphs(state: &State, query: Option<&str>) -> Result<Resp> {
    let label = http::query_param(query, "label")
        .filter(|l| !l.trim().is_empty())
        .ok_or_else(|| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "query parameter `label` is required"))?;
    let depth = http::query_number(query, "max_depth", 3, 10)?;
    let nodes = http::query_number(query, "max_nodes", 1000, 10_000)?;
    let snapshot = state.snapshot();
    match snapshot.graph.subgraph(label.trim(), depth, nodes) {
        Some(g) => http::json(g),
        // LightRAG answers an unknown label with an empty graph.
        None => http::json(json!({"nodes": [], "edges": [], "is_truncated": false})),
    }
}

/// `GET /graph/entity/detail?name=…`: an entity, its relationships and its
/// source text units (the explorer's node panel).
pub fn entity_detail(state: &State, query: Option<&str>) -> Result<Resp> {
    let name = http::query_param(query, "name")
        .ok_or_else(|| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "query parameter `name` is required"))?;
    let snapshot = state.snapshot();
    match snapshot.graph.entity_detail(&name) {
        Some(d) => http::json(d),
        None => Err(ApiError::not_found(format!("no entity named `{name}`"))),
    }
}

/// `GET /graph/entity/exists?name=…` (LightRAG).
pub fn entity_exists(state: &State, query: Option<&str>) -> Result<Resp> {
    let name = http::query_param(query, "name")
        .ok_or_else(|| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "query parameter `name` is required"))?;
    http::json(json!({"exists": state.snapshot().graph.find(&name).is_some()}))
}
