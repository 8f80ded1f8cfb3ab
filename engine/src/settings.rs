//! settings.yaml: GraphRAG 3.x section names, a default for every key,
//! strict parsing (unknown keys and wrong types name the file, line and key).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize, Serializer};

use graphrag_operations::nlp_graph::{NlpGraphConfig, RegexEnglishExtractor};

use crate::config_error::ConfigError;
use crate::env;
use crate::yaml_lines;

/// A secret (API key). Never printed, logged or serialised in clear.
#[derive(Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.trim().is_empty()
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Secret(s.to_string())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_empty() { "\"\"" } else { "\"***\"" })
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if self.is_empty() { "" } else { "***" })
    }
}

macro_rules! section {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident : $ty:ty = $default:expr),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
        #[serde(default, deny_unknown_fields)]
        pub struct $name { $($(#[$fm])* pub $field: $ty),* }
        impl Default for $name {
            fn default() -> Self { Self { $($field: $default),* } }
        }
    };
}

fn s(v: &str) -> String {
    v.to_string()
}

fn prompt(name: &str) -> String {
    format!("prompts/{name}.txt")
}

section!(
    /// One model of `completion_models:` / `embedding_models:`.
    ModelConfig {
        /// openai | azure | ollama | vllm | local (in-process embeddings)
        model_provider: String = s("openai"),
        model: String = s("gpt-4.1-mini"),
        api_key: Secret = Secret::default(),
        api_base: Option<String> = None,
        api_version: Option<String> = None,
        deployment_name: Option<String> = None,
        /// Directory of a local embedding model (model_provider: local).
        model_path: Option<String> = None,
        encoding_model: String = s("o200k_base"),
        max_tokens: Option<u32> = None,
        temperature: f64 = 0.0,
        top_p: f64 = 1.0,
        request_timeout: f64 = 180.0,
        max_retries: u32 = 10,
        /// Seconds: first backoff delay (doubled per retry, with jitter, capped by max_retry_wait).
        retry_base_delay: f64 = 1.0,
        max_retry_wait: f64 = 60.0,
        concurrent_requests: u32 = 25,
        requests_per_minute: Option<u32> = None,
        tokens_per_minute: Option<u32> = None,
        model_supports_json: bool = true,
        extra_headers: BTreeMap<String, String> = BTreeMap::new(),
        /// Embeddings: texts per request and tokens per request.
        batch_size: u32 = 16,
        batch_max_tokens: u32 = 8191,
    }
);

section!(InputConfig {
    /// text | markdown | csv | json | jsonl | parquet | pdf | docx | markitdown
    /// (pdf, docx, md and txt files, as GraphRAG's markitdown reader)
    #[serde(rename = "type")]
    file_type: String = s("text"),
    /// Regex on the path relative to the input folder; default per type.
    file_pattern: Option<String> = None,
    encoding: String = s("utf-8"),
    text_column: String = s("text"),
    title_column: Option<String> = None,
    /// Extra csv/json/parquet columns kept in documents.raw_data (empty: all of them).
    metadata: Vec<String> = Vec::new(),
    /// An input file that cannot be read stops the run (false: it is named
    /// with the reason, counted, marked failed in document_status, and the
    /// run goes on with the others).
    strict: bool = false,
});

section!(StorageConfig {
    #[serde(rename = "type")]
    kind: String = s("file"),
    base_dir: String = s("output"),
});

section!(CacheConfig {
    /// json (files under base_dir) | none
    #[serde(rename = "type")]
    kind: String = s("json"),
    base_dir: String = s("cache"),
});

section!(ChunkingConfig {
    /// tokens | sentence
    #[serde(rename = "type")]
    strategy: String = s("tokens"),
    size: usize = 1200,
    overlap: usize = 100,
    encoding_model: String = s("o200k_base"),
});

section!(VectorStoreConfig {
    /// embedded: vectors in output/embeddings.<field>.parquet, HNSW indexes in
    /// output/vectors/ (external stores plug in behind the VectorStore trait).
    /// lancedb (GraphRAG's default): the same, and `index` / `update` also
    /// write GraphRAG's LanceDB tables at `db_uri` for its Python API
    /// (`graphrag-rs export lancedb`; needs Python's lancedb package).
    #[serde(rename = "type")]
    kind: String = s("embedded"),
    /// The LanceDB folder, relative to the project root (GraphRAG's default).
    db_uri: String = s("output/lancedb"),
    /// Use an approximate index (HNSW) from this many vectors on (0: always).
    /// Below 100k vectors exact search takes under ~2.5 ms on 2 cores, and is
    /// exact; see docs/benchmarks.md.
    ann_threshold: usize = 100_000,
    /// HNSW beam width per query: higher is slower and finds more of the
    /// true neighbours. From n / 100 on the index scans its 8-bit codes
    /// instead of walking the graph. (The default is the vectors crate's.)
    ann_ef_search: usize = 128,
});

section!(EmbedTextConfig {
    embedding_model_id: String = s("default_embedding_model"),
    names: Vec<String> = vec![
        s("text_unit_text"),
        s("entity_description"),
        s("community_full_content"),
        s("relationship_description"),
    ],
    /// truncate | split (split long texts and average the parts)
    long_text: String = s("split"),
});

section!(ExtractGraphConfig {
    completion_model_id: String = s("default_completion_model"),
    prompt: String = prompt("extract_graph"),
    entity_types: Vec<String> = vec![s("organization"), s("person"), s("geo"), s("event")],
    max_gleanings: u32 = 1,
});

section!(SummarizeDescriptionsConfig {
    completion_model_id: String = s("default_completion_model"),
    prompt: String = prompt("summarize_descriptions"),
    max_length: u32 = 500,
    max_input_tokens: u32 = 4000,
});

/// The fast method's defaults live with its algorithm (operations::nlp_graph).
fn nlp_graph() -> NlpGraphConfig {
    NlpGraphConfig::default()
}

fn phrases() -> RegexEnglishExtractor {
    RegexEnglishExtractor::default()
}

section!(ExtractGraphNlpConfig {
    /// Normalised PMI weights (GraphRAG's default); false: co-occurrence
    /// counts, which suit sentence windows (PMI favours pairs of rare phrases).
    normalize_edge_weights: bool = nlp_graph().normalize_edge_weights,
    /// Phrases co-occur when their sentences are fewer than this many apart
    /// (1: the same sentence, 2: the same or the next); 0: anywhere in the
    /// text unit, as GraphRAG does.
    cooccurrence_window: u32 = nlp_graph().cooccurrence_window,
    text_analyzer: TextAnalyzerConfig = TextAnalyzerConfig::default(),
});

section!(TextAnalyzerConfig {
    /// regex_english (noun phrases by rules); pluggable.
    extractor_type: String = s("regex_english"),
    max_word_length: usize = phrases().max_word_length,
    min_phrase_words: usize = phrases().min_words,
    max_phrase_words: usize = phrases().max_words,
});

section!(PruneGraphConfig {
    min_node_freq: u32 = nlp_graph().min_node_freq,
    max_node_freq_std: Option<f64> = nlp_graph().max_node_freq_std,
    min_node_degree: u32 = nlp_graph().min_node_degree,
    max_node_degree_std: Option<f64> = nlp_graph().max_node_degree_std,
    min_edge_weight_pct: f64 = nlp_graph().min_edge_weight_pct,
    remove_ego_nodes: bool = nlp_graph().remove_ego_nodes,
    lcc_only: bool = nlp_graph().lcc_only,
});

section!(ClusterGraphConfig {
    max_cluster_size: usize = 10,
    use_lcc: bool = true,
    seed: u64 = 0xDEAD_BEEF,
    resolution: f64 = 1.0,
});

section!(ExtractClaimsConfig {
    enabled: bool = false,
    completion_model_id: String = s("default_completion_model"),
    prompt: String = prompt("extract_claims"),
    description: String = s("Any claims or facts that could be relevant to information discovery."),
    max_gleanings: u32 = 1,
});

section!(CommunityReportsConfig {
    /// auto (the chat model when configured, else extractive reports) | llm | extractive
    mode: String = s("auto"),
    completion_model_id: String = s("default_completion_model"),
    graph_prompt: String = prompt("community_report_graph"),
    text_prompt: String = prompt("community_report_text"),
    max_length: u32 = 2000,
    max_input_length: u32 = 8000,
});

section!(SnapshotsConfig { graphml: bool = false, embeddings: bool = false });

section!(LocalSearchConfig {
    prompt: String = prompt("local_search_system_prompt"),
    completion_model_id: String = s("default_completion_model"),
    embedding_model_id: String = s("default_embedding_model"),
    text_unit_prop: f64 = 0.5,
    community_prop: f64 = 0.15,
    conversation_history_max_turns: u32 = 5,
    top_k_entities: usize = 10,
    top_k_relationships: usize = 10,
    max_context_tokens: usize = 12_000,
});

section!(GlobalSearchConfig {
    map_prompt: String = prompt("global_search_map_system_prompt"),
    reduce_prompt: String = prompt("global_search_reduce_system_prompt"),
    knowledge_prompt: String = prompt("global_search_knowledge_system_prompt"),
    completion_model_id: String = s("default_completion_model"),
    max_context_tokens: usize = 12_000,
    data_max_tokens: usize = 12_000,
    map_max_length: u32 = 1000,
    reduce_max_length: u32 = 2000,
    dynamic_search_threshold: u32 = 1,
    dynamic_search_keep_parent: bool = false,
    dynamic_search_num_repeats: u32 = 1,
    dynamic_search_use_summary: bool = false,
    dynamic_search_max_level: u32 = 2,
});

section!(DriftSearchConfig {
    prompt: String = prompt("drift_search_system_prompt"),
    reduce_prompt: String = prompt("drift_reduce_prompt"),
    completion_model_id: String = s("default_completion_model"),
    embedding_model_id: String = s("default_embedding_model"),
    /// Tokens of intermediate answers given to the reduce call.
    data_max_tokens: usize = 12_000,
    /// The reduce call's sampling (`reduce_max_tokens` is GraphRAG's older
    /// name for `reduce_max_completion_tokens`).
    reduce_temperature: f64 = 0.0,
    reduce_max_tokens: Option<u32> = None,
    reduce_max_completion_tokens: Option<u32> = None,
    /// DRIFT chat calls in flight at once (the model's own limits apply too).
    concurrency: u32 = 32,
    /// Primer: the `drift_k_followups` reports closest to the expanded
    /// query, split into `primer_folds` parallel calls, each given at most
    /// `primer_llm_max_tokens` of reports.
    primer_folds: u32 = 5,
    primer_llm_max_tokens: usize = 12_000,
    /// Follow-up questions answered per round, and rounds.
    drift_k_followups: u32 = 20,
    n_depth: u32 = 3,
    /// The follow-up local searches' context and sampling.
    local_search_text_unit_prop: f64 = 0.9,
    local_search_community_prop: f64 = 0.1,
    local_search_top_k_mapped_entities: usize = 10,
    local_search_top_k_relationships: usize = 10,
    local_search_max_data_tokens: usize = 12_000,
    local_search_temperature: f64 = 0.0,
    local_search_top_p: f64 = 1.0,
    /// Answers per call (GraphRAG reads the first; only 1 is sent).
    local_search_n: u32 = 1,
    local_search_llm_max_gen_tokens: Option<u32> = None,
    local_search_llm_max_gen_completion_tokens: Option<u32> = None,
});

section!(BasicSearchConfig {
    prompt: String = prompt("basic_search_system_prompt"),
    completion_model_id: String = s("default_completion_model"),
    embedding_model_id: String = s("default_embedding_model"),
    k: usize = 10,
    max_context_tokens: usize = 12_000,
});

section!(
    /// LightRAG's hybrid / mix retrieval (graphrag-rs extension).
    KeywordSearchConfig {
    keywords_prompt: String = prompt("keywords_extraction"),
    prompt: String = prompt("mix_search_system_prompt"),
    completion_model_id: String = s("default_completion_model"),
    embedding_model_id: String = s("default_embedding_model"),
    top_k: usize = 40,
    chunk_top_k: usize = 20,
    max_entity_tokens: usize = 6000,
    max_relation_tokens: usize = 8000,
    max_total_tokens: usize = 30_000,
});

fn default_completion_models() -> BTreeMap<String, ModelConfig> {
    BTreeMap::from([(s("default_completion_model"), ModelConfig::default())])
}

fn default_embedding_models() -> BTreeMap<String, ModelConfig> {
    let local = ModelConfig { model_provider: s("local"), model: s("all-MiniLM-L6-v2"), ..ModelConfig::default() };
    BTreeMap::from([(s("default_embedding_model"), local)])
}

section!(
    /// The whole settings.yaml.
    Settings {
    completion_models: BTreeMap<String, ModelConfig> = default_completion_models(),
    embedding_models: BTreeMap<String, ModelConfig> = default_embedding_models(),
    input: InputConfig = InputConfig::default(),
    input_storage: StorageConfig = StorageConfig { base_dir: s("input"), ..StorageConfig::default() },
    output_storage: StorageConfig = StorageConfig::default(),
    reporting: StorageConfig = StorageConfig { base_dir: s("logs"), ..StorageConfig::default() },
    cache: CacheConfig = CacheConfig::default(),
    chunking: ChunkingConfig = ChunkingConfig::default(),
    vector_store: VectorStoreConfig = VectorStoreConfig::default(),
    embed_text: EmbedTextConfig = EmbedTextConfig::default(),
    extract_graph: ExtractGraphConfig = ExtractGraphConfig::default(),
    summarize_descriptions: SummarizeDescriptionsConfig = SummarizeDescriptionsConfig::default(),
    extract_graph_nlp: ExtractGraphNlpConfig = ExtractGraphNlpConfig::default(),
    prune_graph: PruneGraphConfig = PruneGraphConfig::default(),
    cluster_graph: ClusterGraphConfig = ClusterGraphConfig::default(),
    extract_claims: ExtractClaimsConfig = ExtractClaimsConfig::default(),
    community_reports: CommunityReportsConfig = CommunityReportsConfig::default(),
    snapshots: SnapshotsConfig = SnapshotsConfig::default(),
    local_search: LocalSearchConfig = LocalSearchConfig::default(),
    global_search: GlobalSearchConfig = GlobalSearchConfig::default(),
    drift_search: DriftSearchConfig = DriftSearchConfig::default(),
    basic_search: BasicSearchConfig = BasicSearchConfig::default(),
    keyword_search: KeywordSearchConfig = KeywordSearchConfig::default(),
});

/// Settings as loaded from a project, with the text they came from (for
/// pointing later errors at a line).
#[derive(Debug, Clone)]
pub struct LoadedSettings {
    pub settings: Settings,
    pub file: PathBuf,
    pub text: String,
}

impl LoadedSettings {
    /// An error about `path` pointing at its line in settings.yaml.
    pub fn error_at(&self, path: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(&self.file, yaml_lines::line_of(&self.text, path), path, message)
    }
}

pub const SETTINGS_FILE: &str = "settings.yaml";

/// Loads ROOT/settings.yaml (settings.yml also accepted), substituting
/// `${VAR}` from the environment and ROOT/.env, and checks the values.
pub fn load(root: &Path) -> Result<LoadedSettings, ConfigError> {
    let file = [SETTINGS_FILE, "settings.yml"].iter().map(|n| root.join(n)).find(|p| p.exists()).ok_or_else(|| {
        ConfigError::new(
            &root.join(SETTINGS_FILE),
            None,
            "",
            "not found (run `graphrag-rs init --root DIR` to create a project)",
        )
    })?;
    let raw =
        std::fs::read_to_string(&file).map_err(|e| ConfigError::new(&file, None, "", format!("cannot read: {e}")))?;
    let dotenv = std::fs::read_to_string(root.join(".env")).map(|t| env::parse_dotenv(&t)).unwrap_or_default();
    let text = env::substitute(&raw, &file, &dotenv, |k| std::env::var(k).ok())?;
    parse(&file, text)
}

/// Parses settings text (already substituted) and checks the values.
pub fn parse(file: &Path, text: String) -> Result<LoadedSettings, ConfigError> {
    let settings: Settings = if text.trim().is_empty() {
        Settings::default()
    } else {
        let de = serde_yaml_ng::Deserializer::from_str(&text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let mut err = ConfigError::from_yaml(file, e);
            if err.line.is_none() {
                err.line = yaml_lines::line_of(&text, &err.path);
            }
            err
        })?
    };
    let loaded = LoadedSettings { settings, file: file.to_path_buf(), text };
    check(&loaded)?;
    Ok(loaded)
}

const FILE_TYPES: [&str; 9] = ["text", "markdown", "csv", "json", "jsonl", "parquet", "pdf", "docx", "markitdown"];
const CHUNK_STRATEGIES: [&str; 2] = ["tokens", "sentence"];

fn one_of(loaded: &LoadedSettings, path: &str, value: &str, allowed: &[&str]) -> Result<(), ConfigError> {
    if allowed.contains(&value) {
        return Ok(());
    }
    let hint = graphrag_operations::suggest::did_you_mean(value, allowed.iter().copied());
    Err(loaded.error_at(path, format!("`{value}` is not one of {}{hint}", allowed.join(", "))))
}

/// Checks that serde cannot express: enumerated strings, numeric relations,
/// references between sections.
fn check(loaded: &LoadedSettings) -> Result<(), ConfigError> {
    let s = &loaded.settings;
    one_of(loaded, "input.type", &s.input.file_type, &FILE_TYPES)?;
    if !s.input.encoding.eq_ignore_ascii_case("utf-8") && !s.input.encoding.eq_ignore_ascii_case("utf8") {
        return Err(loaded.error_at(
            "input.encoding",
            format!(
                "`{}` is not supported: input files must be UTF-8 (convert them, e.g. with iconv)",
                s.input.encoding
            ),
        ));
    }
    if let Some(p) = &s.input.file_pattern {
        if let Err(e) = regex::Regex::new(p) {
            return Err(loaded.error_at("input.file_pattern", format!("not a valid regular expression: {e}")));
        }
    }
    one_of(loaded, "chunking.type", &s.chunking.strategy, &CHUNK_STRATEGIES)?;
    one_of(
        loaded,
        "chunking.encoding_model",
        &s.chunking.encoding_model,
        &graphrag_operations::tokenizer::Encoding::NAMES,
    )?;
    if s.chunking.size == 0 {
        return Err(loaded.error_at("chunking.size", "must be at least 1"));
    }
    if s.chunking.overlap >= s.chunking.size {
        return Err(
            loaded.error_at("chunking.overlap", format!("must be smaller than chunking.size ({})", s.chunking.size))
        );
    }
    one_of(loaded, "cache.type", &s.cache.kind, &["json", "file", "none"])?;
    for (section, id) in [
        ("extract_graph.completion_model_id", &s.extract_graph.completion_model_id),
        ("summarize_descriptions.completion_model_id", &s.summarize_descriptions.completion_model_id),
        ("community_reports.completion_model_id", &s.community_reports.completion_model_id),
        ("extract_claims.completion_model_id", &s.extract_claims.completion_model_id),
    ] {
        model_ref(loaded, section, id, &s.completion_models)?;
    }
    model_ref(loaded, "embed_text.embedding_model_id", &s.embed_text.embedding_model_id, &s.embedding_models)?;
    Ok(())
}

fn model_ref(
    loaded: &LoadedSettings,
    path: &str,
    id: &str,
    models: &BTreeMap<String, ModelConfig>,
) -> Result<(), ConfigError> {
    if models.contains_key(id) {
        return Ok(());
    }
    let hint = graphrag_operations::suggest::did_you_mean(id, models.keys().map(String::as_str));
    let known: Vec<&str> = models.keys().map(String::as_str).collect();
    Err(loaded.error_at(path, format!("model id `{id}` is not defined (defined: {}){hint}", known.join(", "))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<LoadedSettings, ConfigError> {
        parse(Path::new("settings.yaml"), text.to_string())
    }

    #[test]
    fn empty_file_gives_defaults() {
        let s = parse_str("").unwrap().settings;
        assert_eq!(s, Settings::default());
        assert_eq!(s.chunking.size, 1200);
        assert_eq!(s.cluster_graph.seed, 0xDEADBEEF);
    }

    #[test]
    fn unknown_key_names_line_path_and_suggestion() {
        let err = parse_str("input:\n  type: text\nchunking:\n  size: 300\n  overlapp: 10\n").unwrap_err();
        let msg = err.to_string();
        assert_eq!(err.line, Some(5), "{msg}");
        assert!(msg.starts_with("settings.yaml:5"), "{msg}");
        assert!(msg.contains("chunking"), "{msg}");
        assert!(msg.contains("did you mean `overlap`"), "{msg}");
    }

    #[test]
    fn unknown_section_suggests() {
        let err = parse_str("chunkin:\n  size: 300\n").unwrap_err();
        assert_eq!(err.line, Some(1));
        assert!(err.to_string().contains("did you mean `chunking`"), "{err}");
    }

    #[test]
    fn wrong_type_names_key_path_and_line() {
        let err = parse_str("chunking:\n  type: tokens\n  size: lots\n").unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert_eq!(err.path, "chunking.size", "{err}");
        assert!(err.to_string().contains("invalid type"), "{err}");
    }

    #[test]
    fn nested_model_keys_are_checked() {
        let text = "completion_models:\n  default_completion_model:\n    model: gpt-4o\n    api_bsae: http://x\n";
        let err = parse_str(text).unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        assert!(err.path.starts_with("completion_models.default_completion_model"), "{err}");
        assert!(err.to_string().contains("did you mean `api_base`"), "{err}");
    }

    #[test]
    fn semantic_errors_point_at_lines() {
        let err = parse_str("chunking:\n  size: 100\n  overlap: 100\n").unwrap_err();
        assert_eq!((err.line, err.path.as_str()), (Some(3), "chunking.overlap"), "{err}");
        let err = parse_str("input:\n  type: txt\n").unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(err.to_string().contains("did you mean `text`"), "{err}");
        let err = parse_str("chunking:\n  encoding_model: o200k\n").unwrap_err();
        assert!(err.to_string().contains("did you mean `o200k_base`"), "{err}");
        let err = parse_str("extract_graph:\n  completion_model_id: default_completion_modle\n").unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(err.to_string().contains("did you mean `default_completion_model`"), "{err}");
        let err = parse_str("input:\n  encoding: latin-1\n").unwrap_err();
        assert!(err.to_string().contains("UTF-8"), "{err}");
    }

    #[test]
    fn malformed_yaml_names_line() {
        let err = parse_str("chunking:\n  size: 10\n bad indent: [\n").unwrap_err();
        assert!(err.line.is_some(), "{err}");
    }

    #[test]
    fn secrets_never_print() {
        let s = parse_str("completion_models:\n  default_completion_model:\n    api_key: sk-very-secret\n")
            .unwrap()
            .settings;
        let m = &s.completion_models["default_completion_model"];
        assert_eq!(m.api_key.expose(), "sk-very-secret");
        assert!(!format!("{s:?}").contains("sk-very-secret"));
        assert!(!serde_json::to_string(&s).unwrap().contains("sk-very-secret"));
    }
}
