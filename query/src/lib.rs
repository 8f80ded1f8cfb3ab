//! graphrag-rs query engine: GraphRAG's local, global (map-reduce), basic and
//! DRIFT search, LightRAG's hybrid / mix keyword search, and graph-walk
//! retrieval (HippoRAG 2's Personalized PageRank) over an index's output
//! folder.
//!
//! ```no_run
//! use graphrag_query::{Method, QueryEngine, QueryRequest};
//! let engine = QueryEngine::open("my-project")?;
//! let result = engine.query(&QueryRequest::new(Method::Local, "Who is Scrooge?"), None)?;
//! println!("{}", result.answer.as_deref().unwrap_or(&result.context));
//! # anyhow::Ok(())
//! ```
//!
//! [`QueryEngine::query`] is blocking: it runs model calls on the engine's own
//! async runtime, so call it from a plain thread (inside an async program, use
//! `spawn_blocking`). Tables and vectors are loaded on first use and kept, so
//! later queries through the same engine read nothing from disk.
//!
//! # Modules (and the vector store, crate graphrag-vectors)
//!
//! The query engine: `QueryEngine` loads only the tables and vectors a method needs (once; the entities'
//! and relationships' text unit lists as numbers of the distinct ids, `table::IdNumbers`), `context.rs`
//! holds the pure packing/ranking functions, `methods/` one file per search method; every method makes
//! exactly one final chat call (`Run::chat`), streamed when the caller asks. `embeddings.rs` turns an
//! `embeddings.<field>.parquet` into a searchable store; a text unit that `embed` split into pieces (longer
//! than the embedding model's window) also has its pieces' vectors (`piece_vectors`) and scores as the best
//! of its whole vector and its pieces (MaxP). `retrieval.rs` holds the text unit rankings every method
//! shares — dense, BM25 (`Index::lexical`: lexical_index.parquet, or built in memory from text_units for an
//! older index), their reciprocal rank fusion — and the Sources table packed from a ranking, after the
//! rerank stage (`reranked_sources`: the best `rerank.candidates` chunks reordered by a rerank model,
//! engine `llm/rerank.rs`, when the query reranks; a failure keeps the order); `basic` (hybrid by default,
//! `dense`, `bm25`) is those rankings cut at k or at a budget. `data/passage_graph.rs` is the graph the walks
//! use, built once per index: one node per entity and per text unit, unit–entity edges from the entities'
//! `text_unit_ids` (the edge to the entity a unit's document title names weighted
//! `ppr_search.title_edge_weight`), entity–entity edges from relationships, the units by their document
//! titles' names (with title options), entity PageRank on demand; `Index::entity_mentions` counts once per
//! index the units holding every word of each entity's name. `methods/ppr.rs` seeds it (named entities —
//! with `ppr_search.link_threshold` also those whose name vectors are close to the question's noun phrases
//! —, entities of the best hybrid units weighted by those units' scores, each entity also by its inverse
//! document frequency over the units — with `ppr_search.specificity: words` over the units holding every
//! word of its name, from the BM25 index —, every unit by its dense and BM25 scores, with
//! `ppr_search.title_seed_weight` the units whose document title the question names), walks it
//! (`ppr_search.walk`: Personalized PageRank, MiniRAG-style paths, RAGFlow-style n-hop) — with
//! `ppr_search.bridge_units` a second time, from the entities of the first walk's best units — and fuses
//! the walks' rankings with the hybrid one (`ppr_search.walk_head`: the walk's first units ahead of the
//! fusion), then moves near copies (unit vectors within `ppr_search.duplicate_similarity`) out of the first
//! five places; the five title-dependent options come from `PprSearchConfig::tuning` (engine settings),
//! which fills those left null by whether the documents have titles (`input.title_column`; `specificity`
//! and `walk` are the enums `PprSpecificity` and `PprWalk`, parsed with the settings); `local`, `hybrid`
//! and `mix` call the same ranking on an index whose entities have no descriptions. A request's
//! `max_context_tokens` (eval's `--budget`) replaces each method's own token limits; rankings are then
//! fused over the units each would fit into the budget on its own, ten at least (`retrieval::budget_window`), as `k`
//! fuses the top k of each. A community level N means the reports of levels 0 to N, as GraphRAG 3.3's
//! `read_indexer_reports` selects them (`context::reports_up_to_level`); a level beyond the index's deepest
//! uses the deepest, with a notice (`Run::notice`, once per query). Multi-call methods (global, drift) load
//! and check their prompts' placeholders before the first call (`Run::checked_prompt`). `methods/drift.rs`
//! is GraphRAG 3.3's loop: HyDE query expansion → primer folds over the closest reports → `n_depth` rounds
//! of local searches (`local::build` with DRIFT's `local_search_*` parameters, `LocalParams`) over the
//! unasked follow-ups, drawn in a question-seeded order → reduce. `prompts.rs` falls back to the shipped
//! prompt of a setting whose file does not exist (with a notice), as GraphRAG does. The embedded vector
//! store: exact SIMD cosine search, HNSW (8-bit quantised graph, f32 re-scoring, checksummed file format)
//! from `vector_store.ann_threshold` vectors on, searched with beam `vector_store.ann_ef_search` (a beam of
//! at least n / 100 scans the 8-bit codes instead of walking the graph), a `VectorStore` trait for external
//! stores.

#![warn(missing_docs)]

pub mod context;
mod data;
mod embeddings;
mod methods;
mod prompts;
mod retrieval;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context as _};
use graphrag_engine::cancel::CancelToken;
use graphrag_engine::llm::answer::{self, AnswerCheck};
use graphrag_engine::llm::preflight::ModelKind;
use graphrag_engine::llm::{
    CallOptions, CallScope, ChatModel, LlmError, LlmService, Message, RerankModel, RetryBudget, UsageCounters,
};
use graphrag_engine::prompts::PromptTemplate;
use graphrag_engine::settings::{self, Settings};
use graphrag_engine::storage::Storage;
use serde::Serialize;
use serde_json::Value;

use data::{Field, Index, Vectors};

/// GraphRAG's answer when no map step found anything relevant.
pub const NO_DATA_ANSWER: &str = "I am sorry but I am unable to answer this question given the provided data.";

/// A search method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    /// GraphRAG local search: entities near the question and their neighbourhood.
    #[default]
    Local,
    /// GraphRAG global search: map-reduce over community reports.
    Global,
    /// Text units by dense similarity and BM25 together (dense only with
    /// `basic_search.hybrid: false`, as GraphRAG).
    Basic,
    /// GraphRAG DRIFT: primer over community reports, follow-up local searches, reduce.
    Drift,
    /// LightRAG hybrid: keyword-driven entity and relationship retrieval.
    Hybrid,
    /// LightRAG mix: hybrid plus vector-retrieved text chunks.
    Mix,
    /// Graph propagation (HippoRAG 2): text units ranked by Personalized
    /// PageRank over entities and text units, fused with basic's ranking.
    Ppr,
    /// Basic search by dense similarity alone (a baseline).
    Dense,
    /// Basic search by BM25 alone (a baseline).
    Bm25,
}

impl Method {
    /// Every method's name, as [`Method::as_str`] writes it and `FromStr`
    /// reads it (which also takes `naive` for `basic`).
    pub const NAMES: [&'static str; 9] = ["local", "global", "basic", "drift", "hybrid", "mix", "ppr", "dense", "bm25"];

    /// The method's name on the command line, in the API and in eval results.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Local => "local",
            Method::Global => "global",
            Method::Basic => "basic",
            Method::Drift => "drift",
            Method::Hybrid => "hybrid",
            Method::Mix => "mix",
            Method::Ppr => "ppr",
            Method::Dense => "dense",
            Method::Bm25 => "bm25",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Method {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Method> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "local" => Method::Local,
            "global" => Method::Global,
            "basic" | "naive" => Method::Basic,
            "drift" => Method::Drift,
            "hybrid" => Method::Hybrid,
            "mix" => Method::Mix,
            "ppr" => Method::Ppr,
            "dense" => Method::Dense,
            "bm25" => Method::Bm25,
            _ => bail!(
                "unknown query method `{s}`: expected one of {}{}",
                Method::NAMES.join(", "),
                graphrag_operations::suggest::did_you_mean(s, Method::NAMES)
            ),
        })
    }
}

/// One question.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryRequest {
    /// The search method.
    pub method: Method,
    /// The question; refused when blank or over [`MAX_QUESTION_BYTES`]
    /// ([`check_question`]).
    pub question: String,
    /// Community level for global (and the reports of local / DRIFT): as in
    /// GraphRAG, the reports at levels 0 to N; `None`: GraphRAG's default 2.
    pub community_level: Option<u32>,
    /// Target length and format of the answer ("Multiple Paragraphs").
    pub response_type: String,
    /// Retrieve only: build the context, call no chat model, `answer` is `None`.
    pub context_only: bool,
    /// Earlier messages, oldest first, as (role, content) with role `user` or
    /// `assistant`.
    pub history: Vec<(String, String)>,
    /// Global search: pick reports by LLM relevance rating from the top
    /// level down (GraphRAG's dynamic community selection) instead of one level.
    pub dynamic_community_selection: bool,
    /// A context budget in tokens that replaces the method's own
    /// (`max_context_tokens` and the like), filled in the method's rank order
    /// with no count limit on text units (`graphrag-rs eval --budget`).
    pub max_context_tokens: Option<usize>,
    /// Whether the retrieved text chunks are reranked (LightRAG's
    /// `enable_rerank`) by the model `rerank.model_id` names; `None`: as
    /// `rerank.by_default` says.
    pub rerank: Option<bool>,
    /// Cancels the query's model calls (a server's client that went away):
    /// the query then fails with `LlmError::Cancelled`. The default token is
    /// never cancelled.
    pub cancel: CancelToken,
}

impl QueryRequest {
    /// A request with GraphRAG's defaults: community level `None` (2), a
    /// [`DEFAULT_RESPONSE_TYPE`] answer, no history, no budget, reranking as
    /// the settings say, never cancelled.
    pub fn new(method: Method, question: impl Into<String>) -> QueryRequest {
        QueryRequest {
            method,
            question: question.into(),
            community_level: None,
            response_type: DEFAULT_RESPONSE_TYPE.to_string(),
            context_only: false,
            history: Vec::new(),
            dynamic_community_selection: false,
            max_context_tokens: None,
            rerank: None,
            cancel: CancelToken::default(),
        }
    }
}

/// GraphRAG's default [`QueryRequest::response_type`].
pub const DEFAULT_RESPONSE_TYPE: &str = "Multiple Paragraphs";

/// The longest question answered (16 K tokens or so): every method repeats
/// the question in each of its prompts (DRIFT in dozens), so an unbounded
/// one multiplies into millions of prompt tokens.
pub const MAX_QUESTION_BYTES: usize = 64 * 1024;

/// Why a question is not asked: the one check of a question, for the
/// engine and for every edge that wants to refuse it before any work (the
/// server answers 422 with this text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuestionRefused {
    /// Nothing but white space.
    Empty,
    /// Over [`MAX_QUESTION_BYTES`].
    TooLong {
        /// The question's length in bytes (UTF-8).
        bytes: usize,
    },
}

impl std::fmt::Display for QuestionRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QuestionRefused::Empty => f.write_str("the question is empty"),
            QuestionRefused::TooLong { bytes } => write!(
                f,
                "the question is {bytes} bytes long; at most {MAX_QUESTION_BYTES} are accepted (put long text in the input folder and index it, then ask about it)"
            ),
        }
    }
}

impl std::error::Error for QuestionRefused {}

/// Whether `question` may be asked: not blank, at most [`MAX_QUESTION_BYTES`].
pub fn check_question(question: &str) -> Result<(), QuestionRefused> {
    if question.trim().is_empty() {
        return Err(QuestionRefused::Empty);
    }
    if question.len() > MAX_QUESTION_BYTES {
        return Err(QuestionRefused::TooLong { bytes: question.len() });
    }
    Ok(())
}

/// Cost and timing of one query.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct QueryStats {
    /// Wall time of the whole query.
    pub latency_ms: f64,
    /// Time until the context was ready (tables, query embedding, retrieval, packing).
    pub context_ms: f64,
    /// Tokens of the context (o200k_base).
    pub context_tokens: u64,
    /// Chat requests answered by the server (cache hits not counted).
    pub llm_calls: u64,
    /// Prompt tokens of those requests, as the server counted them.
    pub prompt_tokens: u64,
    /// Completion tokens of those requests, as the server counted them.
    pub completion_tokens: u64,
    /// Chat answers taken from the response cache.
    pub cache_hits: u64,
    /// Embedding requests (the query embedding).
    pub embedding_calls: u64,
    /// JSON answers that needed repair (tolerant parsing).
    pub json_repairs: u64,
    /// Chat answers that were unusable (malformed, cut off, oversized) and asked again.
    pub unusable_answers: u64,
    /// Intermediate steps (global map batches, DRIFT steps, keyword extraction)
    /// whose answer was unusable and was skipped.
    pub skipped_steps: u64,
}

/// The answer and what it was based on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueryResult {
    /// `None` in retrieval-only mode.
    pub answer: Option<String>,
    /// Why no answer was generated (context-only request, or no chat model).
    pub notice: Option<String>,
    /// The context text sent to the model (or that would be sent).
    pub context: String,
    /// The rows of each context table (`entities`, `relationships`, `sources`,
    /// `reports`, `claims`, ...) with their `id` = human_readable_id, plus
    /// method-specific details.
    pub context_records: Value,
    /// What the query cost and how long it took.
    pub stats: QueryStats,
}

/// What a method hands back to [`QueryEngine::query`].
pub(crate) struct Outcome {
    pub answer: Option<String>,
    pub context: String,
    pub records: Value,
    pub context_ms: f64,
}

/// A query engine over one project (settings + output folder).
pub struct QueryEngine {
    root: PathBuf,
    settings: Settings,
    llm: LlmService,
    index: Index,
}

impl QueryEngine {
    /// Opens the project at `root`: reads settings.yaml (with `${VAR}` and
    /// .env substitution) and checks that the output folder exists. Tables are
    /// read when a query first needs them.
    pub fn open(root: impl AsRef<Path>) -> anyhow::Result<QueryEngine> {
        let root = root.as_ref();
        let loaded = settings::load(root)?;
        QueryEngine::with_settings(root, loaded.settings)
    }

    /// Like [`QueryEngine::open`] with settings built by the caller.
    pub fn with_settings(root: impl AsRef<Path>, settings: Settings) -> anyhow::Result<QueryEngine> {
        let root = root.as_ref().to_path_buf();
        let output = Storage::open(&root, &settings)?.output;
        // On an object store, a local copy of the published version.
        let Some((published, _)) = output.published()? else {
            bail!(
                "no index in {}: run `graphrag-rs index --root {}` first",
                output.describe(),
                settings::describe_root(&root)
            );
        };
        QueryEngine::at(&root, settings, &published)
    }

    /// Like [`QueryEngine::with_settings`] on the published index in the
    /// local folder `published` (a server's copy of one version).
    pub fn at(root: &Path, settings: Settings, published: &Path) -> anyhow::Result<QueryEngine> {
        let llm = LlmService::for_queries(&settings, root)?;
        let ppr = settings.ppr_search.tuning(settings.input.title_column.is_some());
        let index = Index::new(root, published, &settings.vector_store, &ppr);
        Ok(QueryEngine { root: root.to_path_buf(), settings, llm, index })
    }

    /// Reads every table and vector file of the index now, rather than on
    /// first use: after this, queries read nothing from the output folder.
    pub fn load_all(&self) -> anyhow::Result<()> {
        self.index.load_all()
    }

    /// What `basic` ranks text units by.
    fn basic_retriever(&self) -> retrieval::Retriever {
        if self.settings.basic_search.hybrid {
            retrieval::Retriever::Hybrid
        } else {
            retrieval::Retriever::Dense
        }
    }

    /// The titles of the documents that a context's source rows come from,
    /// deduplicated in order: `source_ids` are the `id` values of
    /// `context_records.sources` (text units' human_readable_id).
    pub fn source_documents(&self, source_ids: &[String]) -> anyhow::Result<Vec<String>> {
        let docs = self.index.unit_documents()?;
        let mut seen = std::collections::HashSet::new();
        Ok(source_ids
            .iter()
            .filter_map(|id| id.trim().parse::<i64>().ok())
            .filter_map(|hrid| docs.title_of_unit.get(&hrid))
            .filter(|title| seen.insert(title.as_str()))
            .cloned()
            .collect())
    }

    /// Whether `method` can generate answers (its completion model is
    /// configured); without one every query is retrieval-only.
    pub fn can_answer(&self, method: Method) -> bool {
        self.llm.has_chat_model(&self.model_ids(method).0)
    }

    /// The id (in `completion_models`) of the chat model `method` answers with.
    pub fn chat_model_id(&self, method: Method) -> String {
        self.model_ids(method).0
    }

    /// The models a query with `method` calls, for the start-up check: the
    /// chat model when the method answers (configured, not context-only),
    /// and the embedding model unless the method needs none (global search
    /// reads community reports only).
    pub fn models_used(&self, method: Method, context_only: bool) -> Vec<(ModelKind, String)> {
        let (chat, embedding, _) = self.model_ids(method);
        let mut out = Vec::new();
        if !context_only && self.llm.has_chat_model(&chat) {
            out.push((ModelKind::Chat, chat));
        }
        if method != Method::Global {
            out.push((ModelKind::Embedding, embedding));
        }
        out
    }

    /// The settings section of a method's models.
    fn section(method: Method) -> &'static str {
        match method {
            Method::Local => "local_search",
            Method::Global => "global_search",
            Method::Basic | Method::Dense | Method::Bm25 => "basic_search",
            Method::Ppr => "ppr_search",
            Method::Drift => "drift_search",
            Method::Hybrid | Method::Mix => "keyword_search",
        }
    }

    /// (completion model id, embedding model id, settings key of the latter).
    fn model_ids(&self, method: Method) -> (String, String, &'static str) {
        let s = &self.settings;
        match method {
            Method::Local => (
                s.local_search.completion_model_id.clone(),
                s.local_search.embedding_model_id.clone(),
                "local_search.embedding_model_id",
            ),
            Method::Global => (
                s.global_search.completion_model_id.clone(),
                s.local_search.embedding_model_id.clone(),
                "local_search.embedding_model_id",
            ),
            Method::Basic | Method::Dense | Method::Bm25 => (
                s.basic_search.completion_model_id.clone(),
                s.basic_search.embedding_model_id.clone(),
                "basic_search.embedding_model_id",
            ),
            Method::Ppr => (
                s.ppr_search.completion_model_id.clone(),
                s.ppr_search.embedding_model_id.clone(),
                "ppr_search.embedding_model_id",
            ),
            Method::Drift => (
                s.drift_search.completion_model_id.clone(),
                s.drift_search.embedding_model_id.clone(),
                "drift_search.embedding_model_id",
            ),
            Method::Hybrid | Method::Mix => (
                s.keyword_search.completion_model_id.clone(),
                s.keyword_search.embedding_model_id.clone(),
                "keyword_search.embedding_model_id",
            ),
        }
    }

    /// Answers one question. `on_token` receives the final answer's text piece
    /// by piece as the model streams it (a cached answer comes in one piece;
    /// nothing in retrieval-only mode).
    pub fn query<'b>(&self, req: &QueryRequest, on_token: Option<&'b mut OnToken<'b>>) -> anyhow::Result<QueryResult> {
        let started = Instant::now();
        check_question(&req.question)?;
        if req.cancel.is_cancelled() {
            return Err(graphrag_engine::llm::LlmError::Cancelled.into());
        }
        if matches!(req.method, Method::Global | Method::Drift) && !self.index.has_table("community_reports") {
            bail!(
                "{} search reads community reports, and this index has none (`--method light` makes none, as LightRAG): ask with local, basic, hybrid, mix or ppr, or index with `--method standard` for global and drift",
                req.method
            );
        }
        let (chat_id, embed_id, embed_setting) = self.model_ids(req.method);
        if !self.settings.completion_models.contains_key(&chat_id) {
            bail!(
                "{}.completion_model_id: completion model `{chat_id}` is not defined in settings.yaml (completion_models){}",
                QueryEngine::section(req.method),
                graphrag_operations::suggest::did_you_mean(
                    &chat_id,
                    self.settings.completion_models.keys().map(String::as_str)
                )
            );
        }
        if req.max_context_tokens.is_some() && req.method == Method::Global {
            bail!("global search takes no context budget: it maps over every community report of a level in batches of global_search.max_context_tokens");
        }
        let has_chat = self.llm.has_chat_model(&chat_id);
        let notice = if req.context_only {
            Some(
                "retrieval only (context-only mode): no chat model was called; this is the context it would be given"
                    .to_string(),
            )
        } else if !has_chat {
            Some(format!(
                "retrieval only: no chat model is configured (completion_models.{chat_id} has no api_key and no api_base; set GRAPHRAG_API_KEY in the project's .env); this is the retrieved context"
            ))
        } else {
            None
        };
        let retry_time = self.settings.query.max_retry_time;
        let why = format!("the query's max_retry_time of {retry_time} s is spent (settings `query.max_retry_time`)");
        let scope = CallScope {
            cancel: req.cancel.clone(),
            retry_budget: Some(RetryBudget::new(graphrag_engine::settings::duration_of_seconds(retry_time), why)),
            ..CallScope::default()
        };
        let chat = if notice.is_none() { Some(Arc::new(self.llm.chat_model(&chat_id)?.within(&scope))) } else { None };
        let run = Run {
            engine: self,
            req,
            usage: UsageCounters::default(),
            chat,
            scope,
            embed_id: embed_id.clone(),
            embed_setting,
            skipped: AtomicU64::new(0),
            started,
            notices: Mutex::new(Default::default()),
            reranked: Mutex::new(None),
            context_ms: Mutex::new(None),
            on_token: Mutex::new(on_token),
        };
        let mut outcome = match req.method {
            Method::Local => methods::local::run(&run),
            Method::Global => methods::global::run(&run),
            Method::Basic => methods::basic::run(&run, self.basic_retriever()),
            Method::Dense => methods::basic::run(&run, retrieval::Retriever::Dense),
            Method::Bm25 => methods::basic::run(&run, retrieval::Retriever::Lexical),
            Method::Ppr => methods::ppr::run(&run),
            Method::Drift => methods::drift::run(&run),
            Method::Hybrid => methods::keyword::run(&run, false),
            Method::Mix => methods::keyword::run(&run, true),
        }?;
        if let (Some(rerank), Value::Object(records)) = (run.reranked.lock().unwrap().take(), &mut outcome.records) {
            records.insert("rerank".into(), rerank);
        }
        let by_model = run.usage.by_model();
        let chat_usage = by_model.get(&chat_id).cloned().unwrap_or_default();
        let embed_usage =
            if embed_id == chat_id { Default::default() } else { by_model.get(&embed_id).cloned() }.unwrap_or_default();
        let stats = QueryStats {
            latency_ms: ms(started),
            context_ms: outcome.context_ms,
            context_tokens: context::count_tokens(&outcome.context) as u64,
            llm_calls: chat_usage.calls,
            prompt_tokens: chat_usage.prompt_tokens,
            completion_tokens: chat_usage.completion_tokens,
            cache_hits: chat_usage.cache_hits,
            embedding_calls: embed_usage.calls,
            json_repairs: chat_usage.json_repairs,
            unusable_answers: chat_usage.malformed_answers
                + chat_usage.truncated_answers
                + chat_usage.oversized_answers,
            skipped_steps: run.skipped.load(Ordering::Relaxed),
        };
        Ok(QueryResult {
            answer: outcome.answer,
            notice,
            context: outcome.context,
            context_records: outcome.records,
            stats,
        })
    }
}

fn ms(since: Instant) -> f64 {
    (since.elapsed().as_secs_f64() * 1e6).round() / 1e3
}

/// A receiver of the streamed answer, called with each piece of its text.
pub type OnToken<'a> = dyn FnMut(&str) + Send + 'a;

/// The state of one query: models, usage counters, settings shortcuts.
pub(crate) struct Run<'a, 'b> {
    pub engine: &'a QueryEngine,
    pub req: &'a QueryRequest,
    pub usage: UsageCounters,
    /// `None`: retrieval only. Bounded by `scope`.
    pub chat: Option<Arc<ChatModel>>,
    /// The query's cancellation and retry budget, for every model call.
    scope: CallScope,
    pub embed_id: String,
    pub embed_setting: &'static str,
    pub skipped: AtomicU64,
    pub started: Instant,
    /// Notices already logged (each once per query).
    notices: Mutex<std::collections::HashSet<String>>,
    /// What the rerank did, for the context records (`rerank`).
    reranked: Mutex<Option<Value>>,
    context_ms: Mutex<Option<f64>>,
    /// Where the final answer streams to, if anywhere.
    on_token: Mutex<Option<&'b mut OnToken<'b>>>,
}

impl Run<'_, '_> {
    pub fn s(&self) -> &Settings {
        &self.engine.settings
    }

    pub fn index(&self) -> &Index {
        &self.engine.index
    }

    pub fn retrieval_only(&self) -> bool {
        self.chat.is_none()
    }

    /// Marks the context as ready (first call wins) and returns the elapsed ms.
    pub fn context_ready(&self) -> f64 {
        *self.context_ms.lock().unwrap().get_or_insert_with(|| ms(self.started))
    }

    /// Logs a warning about the request once per query (a method may meet
    /// the same condition in each of its steps).
    pub fn notice(&self, message: String) {
        if self.notices.lock().unwrap().insert(message.clone()) {
            tracing::warn!("{message}");
        }
    }

    /// The rerank model when this query reranks its chunks: the request
    /// asks (`enable_rerank`, else `rerank.by_default`) and a model is set
    /// (`rerank.model_id`; asked for without one, a notice says so).
    pub fn reranker(&self) -> anyhow::Result<Option<RerankModel>> {
        let settings = &self.s().rerank;
        if !self.req.rerank.unwrap_or(settings.by_default) {
            return Ok(None);
        }
        let Some(id) = &settings.model_id else {
            if self.req.rerank == Some(true) {
                self.notice("rerank asked for, but no rerank model is configured (settings `rerank.model_id`): the chunks keep their retrieval order".into());
            }
            return Ok(None);
        };
        Ok(Some(self.engine.llm.rerank_model(id).context("settings `rerank.model_id`")?.within(&self.scope)))
    }

    /// Notes what the rerank did, for the context records.
    pub fn note_rerank(&self, record: Value) {
        *self.reranked.lock().unwrap() = Some(record);
    }

    pub fn skip(&self, what: &str, why: impl fmt::Display) {
        tracing::warn!("{what} skipped: {why}");
        self.skipped.fetch_add(1, Ordering::Relaxed);
    }

    pub fn prompt(&self, setting: &str, path: &str) -> anyhow::Result<PromptTemplate> {
        prompts::load(&self.engine.root, setting, path)
    }

    pub fn fixed_prompt(&self, name: &str) -> anyhow::Result<PromptTemplate> {
        prompts::fixed(&self.engine.root, name)
    }

    /// The prompt of `setting`, checked to use only the placeholders that
    /// `what` fills (`vars`) before any model is called.
    pub fn checked_prompt(
        &self,
        setting: &str,
        path: &str,
        what: &str,
        vars: &[&str],
    ) -> anyhow::Result<PromptTemplate> {
        let prompt = self.prompt(setting, path)?;
        prompt.check_placeholders(&format!("{what} (settings `{setting}`)"), vars)?;
        Ok(prompt)
    }

    /// [`Run::fixed_prompt`], checked like [`Run::checked_prompt`].
    pub fn checked_fixed_prompt(&self, name: &str, what: &str, vars: &[&str]) -> anyhow::Result<PromptTemplate> {
        let prompt = self.fixed_prompt(name)?;
        prompt.check_placeholders(what, vars)?;
        Ok(prompt)
    }

    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.engine.llm.block_on(f)
    }

    /// Embeddings of `texts` with the method's embedding model.
    pub fn embed(&self, texts: &[String]) -> anyhow::Result<Vec<Vec<f32>>> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let model = self
            .engine
            .llm
            .embedding_model(&self.embed_id)
            .with_context(|| format!("embedding the query (settings `{}`)", self.embed_setting))?
            .within(&self.scope);
        let vectors = self
            .block_on(model.embed(texts, &self.usage))
            .with_context(|| format!("embedding the query with `{}` ({})", self.embed_id, self.embed_setting))?;
        Ok(vectors)
    }

    pub fn embed_one(&self, text: &str) -> anyhow::Result<Vec<f32>> {
        Ok(self.embed(&[text.to_string()])?.pop().unwrap_or_default())
    }

    /// The vectors of `field` (loaded once; embedded now for an index built
    /// by Microsoft GraphRAG).
    pub fn vectors(&self, field: Field) -> anyhow::Result<Arc<Vectors>> {
        self.index().vectors_or_embed(field, |texts| self.embed(texts))
    }

    /// Top-`k` ids of `field` by similarity to `query`, with a clear error
    /// when the query embedding does not match the index's vectors.
    pub fn search(
        &self,
        vectors: &Vectors,
        query: &[f32],
        k: usize,
        allowed: Option<&std::collections::HashSet<usize>>,
    ) -> anyhow::Result<Vec<(String, f32)>> {
        let dim = vectors.dimension();
        if vectors.store.is_some() && query.len() != dim {
            bail!(
                "the query embedding from `{}` (model `{}`) has dimension {} but {} holds vectors of dimension {dim}: the index was built with another embedding model. Set `{}` (and embed_text.embedding_model_id) to the model the index was built with, or re-run `graphrag-rs index --root {}` to re-embed with the current model",
                self.embed_setting,
                self.embed_id,
                query.len(),
                vectors.path.display(),
                self.embed_setting,
                self.engine.root.display()
            );
        }
        vectors.search(query, k, allowed)
    }

    fn chat_model(&self) -> Result<&Arc<ChatModel>, LlmError> {
        self.chat.as_ref().ok_or_else(|| LlmError::Config("internal: chat call in retrieval-only mode".into()))
    }

    /// One chat call: `system` prompt, then the history (when given), then the question.
    pub fn messages(&self, system: String, user: &str) -> Vec<Message> {
        vec![Message::system(system), Message::user(user)]
    }

    /// The final answer's chat call (every method makes exactly one),
    /// streamed to the caller's `on_token` when given.
    pub fn chat(&self, messages: &[Message]) -> anyhow::Result<String> {
        self.chat_with(messages, &CallOptions::default())
    }

    /// [`Run::chat`] with the call's own sampling settings.
    pub fn chat_with(&self, messages: &[Message], options: &CallOptions) -> anyhow::Result<String> {
        let model = self.chat_model()?.with_options(options);
        let mut on_token = self.on_token.lock().unwrap();
        let completion = match on_token.as_deref_mut() {
            Some(cb) => self.block_on(model.chat_stream(messages, &self.usage, cb))?,
            None => self.block_on(model.chat(messages, false, &self.usage, &answer::text()))?.completion,
        };
        Ok(completion.content)
    }

    /// An intermediate text answer (not streamed).
    pub fn complete(&self, messages: &[Message]) -> Result<String, LlmError> {
        let model = self.chat_model()?;
        Ok(self.block_on(model.chat(messages, false, &self.usage, &answer::text()))?.completion.content)
    }

    /// Several JSON chat calls in parallel (the model's own concurrency limit
    /// applies); each result separately.
    pub fn chat_json_all(&self, calls: Vec<Vec<Message>>) -> Result<Vec<Result<Value, LlmError>>, LlmError> {
        self.chat_json_all_with(calls, &answer::json_object())
    }

    /// [`Self::chat_json_all`] with answers that must pass `check` (required fields).
    pub fn chat_json_all_with<T, F>(
        &self,
        calls: Vec<Vec<Message>>,
        check: &AnswerCheck<F>,
    ) -> Result<Vec<Result<T, LlmError>>, LlmError>
    where
        F: Fn(&str) -> Result<(T, bool), String>,
    {
        self.chat_json_calls(calls, check, &CallOptions::default(), usize::MAX)
    }

    /// [`Self::chat_json_all_with`] with the calls' own sampling settings,
    /// at most `in_flight` at once; results in the order of `calls`.
    pub fn chat_json_calls<T, F>(
        &self,
        calls: Vec<Vec<Message>>,
        check: &AnswerCheck<F>,
        options: &CallOptions,
        in_flight: usize,
    ) -> Result<Vec<Result<T, LlmError>>, LlmError>
    where
        F: Fn(&str) -> Result<(T, bool), String>,
    {
        use futures_util::StreamExt;
        let model = self.chat_model()?.with_options(options);
        let model = &model;
        let usage = &self.usage;
        let futures = calls.iter().map(|m| async move { model.chat_json_with(m, usage, check).await.map(|a| a.value) });
        Ok(self.block_on(futures_util::stream::iter(futures).buffered(in_flight.max(1)).collect()))
    }

    pub fn chat_json(&self, messages: Vec<Message>) -> Result<Value, LlmError> {
        self.chat_json_all(vec![messages])?.pop().expect("one call")
    }
}

/// Renders a prompt with string variables.
pub(crate) fn render(prompt: &PromptTemplate, vars: &[(&str, Value)]) -> anyhow::Result<String> {
    let map: BTreeMap<&str, Value> = vars.iter().map(|(k, v)| (*k, v.clone())).collect();
    prompt.render(&map)
}

#[allow(dead_code)]
fn assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<QueryEngine>();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_is_refused_blank_or_past_the_limit_in_bytes() {
        assert_eq!(check_question(" \n\t"), Err(QuestionRefused::Empty));
        assert_eq!(check_question(&"a".repeat(MAX_QUESTION_BYTES)), Ok(()));
        // Bytes, not characters: 'é' is two.
        let long = "é".repeat(MAX_QUESTION_BYTES / 2 + 1);
        assert_eq!(check_question(&long), Err(QuestionRefused::TooLong { bytes: MAX_QUESTION_BYTES + 2 }));
        assert!(check_question(&long).unwrap_err().to_string().contains("at most 65536"));
    }
}
