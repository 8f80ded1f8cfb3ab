//! The sections of settings.yaml other than the models: GraphRAG 3.x's names
//! and keys (with their defaults), and graphrag-rs's own additions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use graphrag_operations::chunking::Strategy;
use graphrag_operations::community_report::{Refresh, ReportMode};
use graphrag_operations::entity_resolution::ResolveMode;
use graphrag_operations::nlp_graph::{ExtractorType, NlpGraphConfig, RegexEnglishExtractor};

use crate::embedded_fields::{EmbeddedField, LongText};

use super::{s, Secret, StorageConfig, Unused};

fn prompt(name: &str) -> String {
    format!("prompts/{name}.txt")
}

section!(
    /// The input documents: their format, which files, which columns.
    InputConfig {
    /// text | markdown | csv | json | jsonl | parquet | pdf | docx | markitdown
    /// (pdf, docx, md and txt files, as GraphRAG's markitdown reader)
    #[serde(rename = "type")]
    file_type: String = s("text"),
    /// Regex on the path relative to the input folder; default per type.
    file_pattern: Option<String> = None,
    /// The input files' text encoding.
    encoding: String = s("utf-8"),
    /// csv/json column holding each document's text.
    text_column: String = s("text"),
    /// csv/json column holding each document's title (default: the file name).
    title_column: Option<String> = None,
    /// csv/json column holding each document's id (default: a hash of its text).
    id_column: Option<String> = None,
    /// Extra csv/json/parquet columns kept in documents.raw_data (empty: all of them).
    metadata: Vec<String> = Vec::new(),
    /// An input file that cannot be read stops the run (false: it is named
    /// with the reason, counted, marked failed in document_status, and the
    /// run goes on with the others).
    strict: bool = false,
});

section!(
    /// GraphRAG's table provider: Parquet files (the only kind here).
    TableProviderConfig {
    /// `parquet`.
    #[serde(rename = "type")]
    kind: String = s("parquet"),
    /// Accepted for GraphRAG, no effect.
    batch_size: Option<Unused> = None,
    /// Accepted for GraphRAG, no effect.
    container_name: Option<Unused> = None,
    /// Accepted for GraphRAG, no effect.
    legacy_container: Option<Unused> = None,
});

section!(
    /// The model answer cache: its kind and where it lives.
    CacheConfig {
    /// json (the answers in segment files under the cache folder) | memory | none
    #[serde(rename = "type")]
    kind: String = s("json"),
    /// The cache folder (graphrag-rs's key; GraphRAG's is `storage.base_dir`).
    base_dir: Option<String> = None,
    /// The cache's storage section (GraphRAG's key): a folder or an object store; its `base_dir` wins over `base_dir`.
    storage: Option<StorageConfig> = None,
    /// sqlite caches only.
    database_name: Option<Unused> = None,
});

impl CacheConfig {
    /// The cache folder, relative to the project root.
    pub fn dir(&self) -> &str {
        self.storage.as_ref().map(|st| st.base_dir.as_str()).or(self.base_dir.as_deref()).unwrap_or("cache")
    }

    /// Whether model answers are kept on disk.
    pub fn enabled(&self) -> bool {
        self.kind == "json" || self.kind == "file"
    }
}

section!(
    /// How documents are split into text units.
    ChunkingConfig {
    /// tokens | sentence
    #[serde(rename = "type")]
    strategy: Strategy = Strategy::Tokens,
    /// Tokens per chunk, at most.
    size: usize = 1200,
    /// Tokens a chunk repeats from the end of the one before.
    overlap: usize = 100,
    /// The tokenizer chunks are counted with (`o200k_base`, `cl100k_base`).
    encoding_model: String = s("o200k_base"),
    /// Document fields (`title`, `creation_date`, `id`, or a raw_data column)
    /// written as `field: value.` lines at the head of each chunk.
    prepend_metadata: Option<Vec<String>> = None,
});

section!(
    /// One embedding's table in an external vector store (GraphRAG's `index_schema`).
    IndexSchemaConfig {
    /// The table's name in the store (default: GraphRAG's for the field).
    index_name: Option<String> = None,
    /// The name of the id column.
    id_field: String = s("id"),
    /// The name of the vector column.
    vector_field: String = s("vector"),
    /// The vectors' dimension (default: the store's `vector_size`).
    vector_size: Option<usize> = None,
    /// Further columns, name to type (GraphRAG's key).
    fields: BTreeMap<String, String> = BTreeMap::new(),
});

section!(
    /// Where the embeddings are stored and searched.
    VectorStoreConfig {
    /// embedded: vectors in `output/embeddings.<field>.parquet`, HNSW indexes in
    /// output/vectors/ (external stores plug in behind the VectorStore trait).
    /// lancedb (GraphRAG's default) is served by the same embedded store,
    /// and `index` / `update` also write GraphRAG's LanceDB tables at
    /// `db_uri` (named by `index_schema.<field>.index_name`) for its Python
    /// API (`graphrag-rs export lancedb`; needs Python's lancedb package).
    #[serde(rename = "type")]
    kind: String = s("embedded"),
    /// Use an approximate index (HNSW) from this many vectors on (0: always).
    /// Below 100k vectors exact search takes under ~2.5 ms on 2 cores, and is
    /// exact; see docs/benchmarks.md.
    ann_threshold: usize = 100_000,
    /// HNSW beam width per query: higher is slower and finds more of the
    /// true neighbours. From n / 100 on the index scans its 8-bit codes
    /// instead of walking the graph. (The default is the vectors crate's.)
    ann_ef_search: usize = 128,
    /// LanceDB folder (GraphRAG: output/lancedb).
    db_uri: Option<String> = None,
    /// The vectors' dimension, when a store needs it before the first vector.
    vector_size: Option<usize> = None,
    /// Per embedded field (`text_unit_text`, …), its table in the store.
    index_schema: BTreeMap<String, IndexSchemaConfig> = BTreeMap::new(),
    /// Azure AI Search / CosmosDB keys: rejected with those types, ignored otherwise.
    url: Option<Unused> = None,
    /// Azure AI Search's key: rejected with that type, ignored otherwise.
    api_key: Option<Secret> = None,
    /// Accepted for GraphRAG, no effect.
    audience: Option<Unused> = None,
    /// CosmosDB's connection string: rejected with that type, ignored otherwise.
    connection_string: Option<Secret> = None,
    /// Accepted for GraphRAG, no effect.
    database_name: Option<Unused> = None,
});

section!(
    /// The embed steps: which texts, with which model, in what batches.
    EmbedTextConfig {
    /// The `embedding_models` entry that embeds.
    embedding_model_id: String = s("default_embedding_model"),
    /// The cache folder of this step's answers (`cache/<name>/`), as GraphRAG partitions its cache.
    model_instance_name: String = s("text_embedding"),
    /// Texts and tokens per request (default: the model's batch_size / batch_max_tokens).
    batch_size: Option<u32> = None,
    /// Tokens per request (default: the model's `batch_max_tokens`).
    batch_max_tokens: Option<u32> = None,
    /// The fields embedded (`text_unit_text`, `entity_description`, …).
    names: Vec<EmbeddedField> = vec![
        EmbeddedField::TextUnitText,
        EmbeddedField::EntityDescription,
        EmbeddedField::CommunityFullContent,
        EmbeddedField::RelationshipDescription,
    ],
    /// truncate | split (split long texts and average the parts)
    long_text: LongText = LongText::Split,
});

section!(
    /// Graph extraction by the chat model (the standard method).
    ExtractGraphConfig {
    /// The `completion_models` entry that extracts.
    completion_model_id: String = s("default_completion_model"),
    /// The cache folder of this step's answers (`cache/<name>/`).
    model_instance_name: String = s("extract_graph"),
    /// The extraction prompt, relative to the project root.
    prompt: String = prompt("extract_graph"),
    /// The kinds of entity the prompt asks for.
    entity_types: Vec<String> = vec![s("organization"), s("person"), s("geo"), s("event")],
    /// Further turns asking for entities the first answer missed (0: none).
    max_gleanings: u32 = 1,
});

section!(
    /// Merging an entity's or relationship's descriptions into one.
    SummarizeDescriptionsConfig {
    /// The `completion_models` entry that summarises.
    completion_model_id: String = s("default_completion_model"),
    /// The cache folder of this step's answers (`cache/<name>/`).
    model_instance_name: String = s("summarize_descriptions"),
    /// The summary prompt, relative to the project root.
    prompt: String = prompt("summarize_descriptions"),
    /// The summary's length the prompt asks for, in words.
    max_length: u32 = 500,
    /// The most tokens of descriptions one prompt carries; more are summarised in rounds.
    max_input_tokens: u32 = 4000,
    /// The light pipeline (`--method light`) asks the model to merge an
    /// element's descriptions only from this many on, joining fewer
    /// (LightRAG's `force_llm_summary_on_merge`); the standard pipeline
    /// summarises every element with two or more, as GraphRAG.
    force_llm_summary_on_merge: u32 = 8,
});

/// The fast method's defaults live with its algorithm (operations::nlp_graph).
fn nlp_graph() -> NlpGraphConfig {
    NlpGraphConfig::default()
}

fn phrases() -> RegexEnglishExtractor {
    RegexEnglishExtractor::default()
}

section!(
    /// Graph extraction without a model (the fast method): noun phrases and their co-occurrence.
    ExtractGraphNlpConfig {
    /// Normalised PMI weights (GraphRAG's default); false: co-occurrence
    /// counts, which suit sentence windows (PMI favours pairs of rare phrases).
    normalize_edge_weights: bool = nlp_graph().normalize_edge_weights,
    /// Phrases co-occur when their sentences are fewer than this many apart
    /// (1: the same sentence, 2: the same or the next); 0: anywhere in the
    /// text unit, as GraphRAG does.
    cooccurrence_window: u32 = nlp_graph().cooccurrence_window,
    /// How noun phrases are found.
    text_analyzer: TextAnalyzerConfig = TextAnalyzerConfig::default(),
    /// Accepted for GraphRAG, no effect.
    concurrent_requests: Option<Unused> = None,
    /// Accepted for GraphRAG, no effect.
    async_mode: Option<Unused> = None,
});

section!(
    /// The fast method's noun-phrase extractor.
    TextAnalyzerConfig {
    /// regex_english (noun phrases by rules); GraphRAG's spaCy extractors
    /// (syntactic_parser, cfg) are not available.
    extractor_type: ExtractorType = ExtractorType::RegexEnglish,
    /// Longer words are not part of a phrase.
    max_word_length: usize = phrases().max_word_length,
    /// Fewest words of a phrase.
    min_phrase_words: usize = phrases().min_words,
    /// Most words of a phrase.
    max_phrase_words: usize = phrases().max_words,
    /// spaCy parser settings (accepted, no effect).
    model_name: Option<Unused> = None,
    /// Accepted for GraphRAG, no effect.
    word_delimiter: Option<Unused> = None,
    /// Accepted for GraphRAG, no effect.
    include_named_entities: Option<Unused> = None,
    /// Accepted for GraphRAG, no effect.
    exclude_nouns: Option<Unused> = None,
    /// Accepted for GraphRAG, no effect.
    exclude_entity_tags: Option<Unused> = None,
    /// Accepted for GraphRAG, no effect.
    exclude_pos_tags: Option<Unused> = None,
    /// Accepted for GraphRAG, no effect.
    noun_phrase_tags: Option<Unused> = None,
    /// Accepted for GraphRAG, no effect.
    noun_phrase_grammars: Option<Unused> = None,
});

section!(
    /// Pruning of the fast method's graph before clustering (GraphRAG's keys and defaults).
    PruneGraphConfig {
    /// Entities in fewer text units are dropped.
    min_node_freq: u32 = nlp_graph().min_node_freq,
    /// Entities more frequent than the mean plus this many standard deviations are dropped; null: none.
    max_node_freq_std: Option<f64> = nlp_graph().max_node_freq_std,
    /// Entities with fewer relationships are dropped.
    min_node_degree: u32 = nlp_graph().min_node_degree,
    /// Entities with more relationships than the mean plus this many standard deviations are dropped; null: none.
    max_node_degree_std: Option<f64> = nlp_graph().max_node_degree_std,
    /// Relationships below this percentile of weight are dropped.
    min_edge_weight_pct: f64 = nlp_graph().min_edge_weight_pct,
    /// Drop the entity with the most relationships.
    remove_ego_nodes: bool = nlp_graph().remove_ego_nodes,
    /// Keep only the largest connected component.
    lcc_only: bool = nlp_graph().lcc_only,
});

section!(
    /// Entity resolution (graphrag-rs): the `resolve_entities` step merges
    /// the names of one real-world thing into one entity, before clustering.
    ResolveEntitiesConfig {
    /// Merge what the rules (or the chat model) find to be one entity;
    /// false: only the merges the aliases file asks for.
    enabled: bool = true,
    /// auto (the chat model decides when one is configured, in the standard
    /// method; rules in the fast one) | rules | llm
    mode: ResolveMode = ResolveMode::Auto,
    /// The `completion_models` entry that decides (llm mode).
    completion_model_id: String = s("default_completion_model"),
    /// The cache folder of this step's answers (`cache/<name>/`).
    model_instance_name: String = s("resolve_entities"),
    /// The prompt that asks whether names are one entity, relative to the project root.
    prompt: String = prompt("resolve_entities"),
    /// Merges the user forces (`same:`) or forbids (`different:`), relative
    /// to the project root; optional.
    aliases_file: String = s("aliases.yaml"),
    /// Candidate pairs per prompt (llm mode).
    batch_size: usize = 20,
});

section!(
    /// Hierarchical Leiden clustering of the graph into communities.
    ClusterGraphConfig {
    /// Communities larger than this are split into a further level.
    max_cluster_size: usize = 10,
    /// Cluster only the largest connected component.
    use_lcc: bool = true,
    /// The Leiden algorithm's random seed: the same graph and seed give the same communities.
    seed: u64 = 0xDEAD_BEEF,
    /// Leiden's resolution: higher gives more, smaller communities.
    resolution: f64 = 1.0,
});

section!(
    /// Claim extraction (covariates).
    ExtractClaimsConfig {
    /// Whether the claims step runs (GraphRAG's covariates).
    enabled: bool = false,
    /// The `completion_models` entry that extracts.
    completion_model_id: String = s("default_completion_model"),
    /// The cache folder of this step's answers (`cache/<name>/`).
    model_instance_name: String = s("extract_claims"),
    /// The claims prompt, relative to the project root.
    prompt: String = prompt("extract_claims"),
    /// What counts as a claim, filled into the prompt.
    description: String = s("Any claims or facts that could be relevant to information discovery."),
    /// Further turns asking for claims the first answer missed (0: none).
    max_gleanings: u32 = 1,
});

section!(
    /// Community reports.
    CommunityReportsConfig {
    /// auto (the chat model when configured, else extractive reports) | llm | extractive
    mode: ReportMode = ReportMode::Auto,
    /// The `completion_models` entry that writes the reports.
    completion_model_id: String = s("default_completion_model"),
    /// The cache folder of this step's answers (`cache/<name>/`).
    model_instance_name: String = s("community_reporting"),
    /// The report prompt of the graph-based reports, relative to the project root.
    graph_prompt: String = prompt("community_report_graph"),
    /// The report prompt of the text-based reports (the fast method), relative to the project root.
    text_prompt: String = prompt("community_report_text"),
    /// The report's length the prompt asks for, in words.
    max_length: u32 = 2000,
    /// The most tokens of a community's context in one prompt.
    max_input_length: u32 = 8000,
});

section!(
    /// What `graphrag-rs update` writes again (graphrag-rs).
    UpdateConfig {
    /// Which community reports an update writes again: `all` (every report
    /// whose input changed, as a fresh index), `changed` (communities whose
    /// members or relationships changed) or `material` (those that changed
    /// materially: see the two keys below); the others are kept.
    community_reports: Refresh = Refresh::Material,
    /// `material`: more than this fraction of a community's members, or of
    /// its relationships, came or went.
    material_fraction: f64 = 0.3,
    /// `material`: the community gained an entity with at least this many
    /// relationships.
    material_degree: u32 = 10,
});

section!(
    /// Extra outputs of a run.
    SnapshotsConfig {
    /// Also write the graph as graph.graphml.
    graphml: bool = false,
    /// GraphRAG's key, no effect: the embeddings are always published
    /// (`embeddings.<field>.parquet`).
    embeddings: bool = false,
    /// Also publish the extracted graph before merging and summarising
    /// (raw_entities.parquet, raw_relationships.parquet).
    raw_graph: bool = false,
});

section!(
    /// Local search (GraphRAG's keys and defaults).
    LocalSearchConfig {
    /// The answer prompt, relative to the project root.
    prompt: String = prompt("local_search_system_prompt"),
    /// The `completion_models` entry that answers.
    completion_model_id: String = s("default_completion_model"),
    /// The `embedding_models` entry that embeds the question.
    embedding_model_id: String = s("default_embedding_model"),
    /// The share of the context tokens given to text units.
    text_unit_prop: f64 = 0.5,
    /// The share of the context tokens given to community reports.
    community_prop: f64 = 0.15,
    /// The most earlier turns of a conversation in the context.
    conversation_history_max_turns: u32 = 5,
    /// Entities taken as the question's, by similarity.
    top_k_entities: usize = 10,
    /// Relationships kept per selected entity.
    top_k_relationships: usize = 10,
    /// The context's size, in tokens.
    max_context_tokens: usize = 12_000,
});

section!(
    /// Global search (GraphRAG's keys and defaults).
    GlobalSearchConfig {
    /// The map prompt, relative to the project root.
    map_prompt: String = prompt("global_search_map_system_prompt"),
    /// The reduce prompt, relative to the project root.
    reduce_prompt: String = prompt("global_search_reduce_system_prompt"),
    /// The general-knowledge instruction added to the reduce prompt, relative to the project root.
    knowledge_prompt: String = prompt("global_search_knowledge_system_prompt"),
    /// The `completion_models` entry that answers.
    completion_model_id: String = s("default_completion_model"),
    /// The reduce step's context, in tokens.
    max_context_tokens: usize = 12_000,
    /// The community reports per map call, in tokens.
    data_max_tokens: usize = 12_000,
    /// A map answer's length the prompt asks for, in words.
    map_max_length: u32 = 1000,
    /// The answer's length the prompt asks for, in words.
    reduce_max_length: u32 = 2000,
    /// Dynamic community selection: the lowest rating (0 to 10) of a report kept.
    dynamic_search_threshold: u32 = 1,
    /// Dynamic selection: keep a relevant report beside its children (else they replace it).
    dynamic_search_keep_parent: bool = false,
    /// Dynamic selection: ratings asked per report (votes).
    dynamic_search_num_repeats: u32 = 1,
    /// Dynamic selection: rate the reports' summaries, not their full text.
    dynamic_search_use_summary: bool = false,
    /// Dynamic selection: the deepest community level rated.
    dynamic_search_max_level: u32 = 2,
});

section!(
    /// GraphRAG 3.3's drift_search keys, with its defaults.
    DriftSearchConfig {
    /// The local step's prompt, relative to the project root.
    prompt: String = prompt("drift_search_system_prompt"),
    /// The reduce prompt, relative to the project root.
    reduce_prompt: String = prompt("drift_reduce_prompt"),
    /// The `completion_models` entry that answers.
    completion_model_id: String = s("default_completion_model"),
    /// The `embedding_models` entry that embeds the questions.
    embedding_model_id: String = s("default_embedding_model"),
    /// The reduce step's context, in tokens.
    data_max_tokens: usize = 12_000,
    /// The reduce answer's `max_tokens`; null: the model's.
    reduce_max_tokens: Option<u32> = None,
    /// The reduce call's temperature.
    reduce_temperature: f64 = 0.0,
    /// The reduce answer's `max_completion_tokens`; null: none sent.
    reduce_max_completion_tokens: Option<u32> = None,
    /// Local searches in flight at once.
    concurrency: u32 = 32,
    /// Follow-up questions answered per round (and primer reports).
    drift_k_followups: u32 = 20,
    /// Groups the primer's reports are split into, one call each.
    primer_folds: u32 = 5,
    /// The reports of one primer call, in tokens.
    primer_llm_max_tokens: usize = 12_000,
    /// Rounds of follow-up questions.
    n_depth: u32 = 3,
    /// A local step's share of context tokens given to text units.
    local_search_text_unit_prop: f64 = 0.9,
    /// A local step's share of context tokens given to community reports.
    local_search_community_prop: f64 = 0.1,
    /// A local step's entities taken as the question's.
    local_search_top_k_mapped_entities: usize = 10,
    /// A local step's relationships kept per entity.
    local_search_top_k_relationships: usize = 10,
    /// A local step's context, in tokens.
    local_search_max_data_tokens: usize = 12_000,
    /// A local step's temperature.
    local_search_temperature: f64 = 0.0,
    /// A local step's top_p.
    local_search_top_p: f64 = 1.0,
    /// A local step's `n` (answers asked per call).
    local_search_n: u32 = 1,
    /// A local step's `max_tokens`; null: the model's.
    local_search_llm_max_gen_tokens: Option<u32> = None,
    /// A local step's `max_completion_tokens`; null: none sent.
    local_search_llm_max_gen_completion_tokens: Option<u32> = None,
});

section!(
    /// Basic search: retrieved text units as the context (GraphRAG's keys and defaults).
    BasicSearchConfig {
    /// The answer prompt, relative to the project root.
    prompt: String = prompt("basic_search_system_prompt"),
    /// The `completion_models` entry that answers.
    completion_model_id: String = s("default_completion_model"),
    /// The `embedding_models` entry that embeds the question.
    embedding_model_id: String = s("default_embedding_model"),
    /// Text units retrieved.
    k: usize = 10,
    /// The context's size, in tokens.
    max_context_tokens: usize = 12_000,
    /// graphrag-rs: rank text units by dense similarity and BM25 together
    /// (reciprocal rank fusion of the top k of each); false: dense only, as
    /// GraphRAG.
    hybrid: bool = true,
    /// The constant of reciprocal rank fusion (60: Cormack et al.'s).
    fusion_k: f64 = graphrag_operations::rank_fusion::RRF_K,
});

/// The graph walk of `ppr_search.walk`, parsed once here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PprWalk {
    /// Personalized PageRank (HippoRAG 2).
    Ppr,
    /// MiniRAG-style scoring of the paths from the seed entities.
    Paths,
    /// RAGFlow-style n-hop neighbours weighted by entity PageRank.
    Nhop,
}

/// How rare a seed entity is (`ppr_search.specificity`), parsed once here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PprSpecificity {
    /// By the text units the entity lists.
    Entities,
    /// By the text units whose text holds every word of its name, at least
    /// those it lists.
    Words,
}

section!(
    /// graphrag-rs: graph-propagation search (HippoRAG 2): text units ranked
    /// by a walk over the graph of entities and text units, fused with the
    /// hybrid (dense + BM25) ranking, packed into max_context_tokens.
    PprSearchConfig {
    /// The answer prompt (basic search's: it cites Sources).
    prompt: String = prompt("basic_search_system_prompt"),
    /// The `completion_models` entry that answers.
    completion_model_id: String = s("default_completion_model"),
    /// The `embedding_models` entry that embeds the question.
    embedding_model_id: String = s("default_embedding_model"),
    /// The context's size, in tokens.
    max_context_tokens: usize = 12_000,
    /// ppr: HippoRAG 2's Personalized PageRank; paths: MiniRAG-style scoring
    /// of the paths from the seed entities; nhop: RAGFlow-style n-hop
    /// neighbours weighted by entity PageRank.
    walk: PprWalk = PprWalk::Ppr,
    /// Probability of following an edge rather than restarting (HippoRAG's 0.5).
    damping: f64 = 0.5,
    /// Weight of the text units' dense and BM25 scores in the restart
    /// distribution, against the seed entities' (HippoRAG 2's 0.05).
    passage_node_weight: f64 = 0.05,
    /// Seed entities kept (HippoRAG's linking_top_k): the most specific of
    /// those the question names and those of the best-ranked text units.
    linking_top_k: usize = 5,
    /// Entities whose names' vectors have at least this cosine similarity
    /// with a noun phrase of the question are named by it (HippoRAG links
    /// the query's entities to nodes by their embeddings), e.g. 0.7; null:
    /// names matched as strings only (measured better on 2Wiki:
    /// docs/benchmarks-history.md, "Ninth round").
    link_threshold: Option<f64> = None,
    /// Entities whose vectors have at least this cosine similarity with a
    /// seed's join the seeds (HippoRAG 2's synonym edges, 0.8 there,
    /// followed from the seeds only); null: none.
    synonym_threshold: Option<f64> = None,
    /// The constant of reciprocal rank fusion of the walk's and the hybrid ranking.
    fusion_k: f64 = graphrag_operations::rank_fusion::RRF_K,
    /// How rare a seed entity is (its inverse document frequency): entities:
    /// by the text units it lists; words: by the text units whose text holds
    /// every word of its name, at least those, so that a common word the
    /// fast extractor found capitalised in two units (FILM) is not taken
    /// for a rare name. null: words where the documents have titles
    /// (`input.title_column`), entities otherwise ([`PprSearchConfig::tuning`]).
    specificity: Option<PprSpecificity> = None,
    /// Weight of the edge between a text unit and the entity its document's
    /// title names (`input.title_column`), against 1 for its other entities:
    /// more than 1 sends the walk from a name to the passage about it rather
    /// than to the passages mentioning it; 1: no difference. null: 5 with
    /// titles, 1 without.
    title_edge_weight: Option<f64> = None,
    /// Restart weight of a text unit whose document title the question
    /// names (`input.title_column`), against 1 for an entity it names: the
    /// passage about a name the fast graph pruned (it occurs in no other
    /// unit) is still a seed; 0: none. null: 0.3 with titles, 0 without.
    title_seed_weight: Option<f64> = None,
    /// The first this many text units are the walk's best, the rest the
    /// fused ranking's; 0: all fused. null: 4 with titles, 0 without.
    walk_head: Option<usize> = None,
    /// The walk's first this many text units seed a second walk (their
    /// entities, weighted by the units' walk scores), whose ranking joins
    /// the fusion: it reaches the third and fourth passages of a chain that
    /// the walk from the question reaches too weakly; 0: one walk. null: 4
    /// with titles, 0 without.
    bridge_units: Option<usize> = None,
    /// A text unit whose vector has at least this cosine similarity with a
    /// unit ranked before it among the context's first units (another copy
    /// or version of the same paragraph) moves after them, so that those
    /// places go to other evidence; null: no such check.
    duplicate_similarity: Option<f64> = Some(0.95),
});

/// The `ppr_search` options that depend on whether the documents have
/// titles, as a query uses them ([`PprSearchConfig::tuning`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PprTuning {
    /// `ppr_search.specificity`, resolved.
    pub specificity: PprSpecificity,
    /// `ppr_search.title_edge_weight`, resolved.
    pub title_edge_weight: f64,
    /// `ppr_search.title_seed_weight`, resolved.
    pub title_seed_weight: f64,
    /// `ppr_search.walk_head`, resolved.
    pub walk_head: usize,
    /// `ppr_search.bridge_units`, resolved.
    pub bridge_units: usize,
}

impl PprSearchConfig {
    /// The options set, and for those left null the values measured best on
    /// titled corpora (the Wikipedia-style dev sets: R@2 and R@5 up on all
    /// six) or, without titles, the plain walk (the chat logs of LiHua-World
    /// lose with a walk head, word specificity and a bridge walk):
    /// docs/benchmarks-history.md, "Tenth round" and "Eleventh round".
    pub fn tuning(&self, titled: bool) -> PprTuning {
        let pick = |set: Option<f64>, with: f64, without: f64| set.unwrap_or(if titled { with } else { without });
        let specificity = if titled { PprSpecificity::Words } else { PprSpecificity::Entities };
        PprTuning {
            specificity: self.specificity.unwrap_or(specificity),
            title_edge_weight: pick(self.title_edge_weight, 5.0, 1.0),
            title_seed_weight: pick(self.title_seed_weight, 0.3, 0.0),
            walk_head: self.walk_head.unwrap_or(if titled { 4 } else { 0 }),
            bridge_units: self.bridge_units.unwrap_or(if titled { 4 } else { 0 }),
        }
    }
}

section!(
    /// LightRAG's hybrid / mix retrieval (graphrag-rs extension).
    KeywordSearchConfig {
    /// The prompt that asks for the question's keywords, relative to the project root.
    keywords_prompt: String = prompt("keywords_extraction"),
    /// The answer prompt, relative to the project root.
    prompt: String = prompt("mix_search_system_prompt"),
    /// The `completion_models` entry that answers.
    completion_model_id: String = s("default_completion_model"),
    /// The `embedding_models` entry that embeds the keywords and the question.
    embedding_model_id: String = s("default_embedding_model"),
    /// Entities and relationships retrieved (LightRAG's `top_k`).
    top_k: usize = 40,
    /// Text chunks retrieved (LightRAG's `chunk_top_k`).
    chunk_top_k: usize = 20,
    /// The entities' share of the context, in tokens.
    max_entity_tokens: usize = 6000,
    /// The relationships' share of the context, in tokens.
    max_relation_tokens: usize = 8000,
    /// The whole context's size, in tokens.
    max_total_tokens: usize = 30_000,
});

section!(
    /// What a run tolerates (graphrag-rs extension).
    FailuresConfig {
    /// The fraction (0 to 1) of a step's items — text units to extract,
    /// descriptions to summarise, community reports — whose model answer may
    /// stay unusable or whose call may fail before the run fails. The failed
    /// items are named in stats.json either way, and the next run asks them again.
    tolerated_fraction: f64 = 0.0,
});

section!(
    /// Model calls at query time (`graphrag-rs query`, `serve`, the Python
    /// package): bounds of their own, apart from indexing's retry policy
    /// (graphrag-rs extension).
    QueryConfig {
    /// The longest one model request of a query may take, in seconds (the
    /// model's own request_timeout when that is shorter).
    request_timeout: f64 = 60.0,
    /// The longest a query keeps retrying failed model calls, in seconds,
    /// counted from its first failed call: no retry starts later, so a
    /// model that fails makes the query fail after about this long.
    max_retry_time: f64 = 20.0,
    /// The most bytes of query answers kept in the response cache
    /// (`<cache folder>/query/`; on an object store, held in memory); the
    /// least recently used go first. 0: query answers are not cached.
    cache_max_bytes: u64 = 64 << 20,
});

section!(
    /// Reranking of the text chunks a query retrieved, as LightRAG's
    /// `enable_rerank` does (graphrag-rs extension): the best-ranked chunks
    /// are reordered by a rerank model before the context is packed.
    RerankConfig {
    /// The `rerank_models` entry that reranks; none: no query is reranked.
    model_id: Option<String> = None,
    /// How many of a query's best-ranked chunks the model reorders; the
    /// rest follow in their retrieval order.
    candidates: u32 = 40,
    /// Whether a query that does not say (`enable_rerank`) is reranked.
    by_default: bool = true,
});

section!(
    /// `graphrag-rs serve`'s connections and requests (graphrag-rs extension).
    ServeConfig {
    /// Seconds a client has to send a request's whole head (request line
    /// and headers), counted from the accept, not from its last byte: a head
    /// sent a byte at a time is cut as soon as a silent one. Also how long a
    /// kept-alive connection may stay idle before its next request.
    header_read_timeout: f64 = 5.0,
    /// A request body (an upload) must bring at least `body_min_rate` bytes
    /// a second over each window of this many seconds: one that stalls is
    /// cut (408) within this long, however large the upload and however
    /// long it takes at the rate.
    body_read_timeout: f64 = 10.0,
    /// The slowest a request body may arrive, bytes a second (measured over
    /// each `body_read_timeout`).
    body_min_rate: u64 = 1024,
    /// Seconds a response may wait for a client that reads none of it
    /// before the connection is closed.
    send_timeout: f64 = 60.0,
    /// Connections served at once; more wait in the listen queue.
    max_connections: u32 = 256,
    /// Connections one client (an IP address; for IPv6 its /64) may hold
    /// open at once; more are refused with 429, so that one client cannot
    /// take the `max_connections` slots from the others. Behind a reverse
    /// proxy every connection is the proxy's: raise it to `max_connections`.
    max_connections_per_client: u32 = 64,
    /// Connections one client may hold that have not yet sent a whole
    /// request (head and body): slow or stalled senders; more are refused
    /// with 429.
    max_pending_connections_per_client: u32 = 32,
    /// The largest request head (request line and headers), bytes (at least 8192).
    max_header_bytes: usize = 32 << 10,
    /// The longest a question to the server may take (`/query`,
    /// `/query/stream`, `/query/data`, the Ollama and OpenAI chat paths),
    /// seconds: one deadline for the whole query, inside which its model
    /// calls' `query.request_timeout` and `query.max_retry_time` run. Past
    /// it the query's model calls are dropped and it fails with 504 (a
    /// stream with an error line). 60 s: what a reverse proxy waits by
    /// default (nginx's proxy_read_timeout) before it answers 504 itself.
    query_timeout: f64 = 60.0,
    /// The most earlier messages a query or chat request may carry.
    max_history_messages: usize = 200,
    /// The most characters those messages may hold together.
    max_history_chars: usize = 400_000,
    /// Web origins allowed to call the API from a browser (CORS): `*` (any,
    /// LightRAG's default) or origins such as `http://localhost:5173`;
    /// empty: none.
    cors_origins: Vec<String> = vec![s("*")],
    /// Seconds between two looks for an index published by another process
    /// (`graphrag-rs update`, or the writer of a replicated project).
    poll_seconds: f64 = 2.0,
});
