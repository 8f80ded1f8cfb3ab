//! settings.yaml (or .yml, .json): every key of GraphRAG 3.3's settings and
//! graphrag-rs's own, a default for each, strict parsing (unknown keys and
//! wrong types name the file, line and key, with a "did you mean").
//!
//! `models` and `sections` hold the structs, `check` the checks serde cannot
//! express, `compat` what a GraphRAG project may bring that has no effect
//! here (one warning) or is not implemented (an error).
//!
//! # In detail
//!
//! `Settings`: one serde struct per GraphRAG 3.3 section (`sections.rs`; the models' entries and their
//! effective retry / rate-limit policy in `models.rs`), `deny_unknown_fields`, a default for every key,
//! every key of GraphRAG 3.3's resolved configuration among them. `load()` finds settings.yaml / .yml /
//! .json, substitutes `${VAR}` (`env.rs`: process env over `DIR/.env`), parses with serde_yaml_ng or
//! serde_json + serde_path_to_error, `check()`s what serde cannot (`check.rs`: values, references, backends
//! that are not implemented → errors naming what is supported) and `resolve()`s keys that set others
//! (top-level `concurrent_requests` → each model, `embed_text.batch_*` → its model). `compat.rs` lists the
//! GraphRAG keys present that have no effect here (`Unused` fields), for one warning with their lines.
//! `Secret` keeps API keys and connection strings out of Debug and serialisation. `storage.rs`: the storage
//! sections, `type` parsed once into `StorageType` (file | blob | s3 | gcs | cosmosdb), and
//! `StorageConfig::target()` → `StorageTarget` (a folder, or a `RemoteStorage`: bucket/container + object
//! prefix; also parsed from `s3://`, `az://`, `gs://` URLs; a bucket or container name its service would
//! refuse is a key error naming the rule, `NameRule`), whose key errors `check.rs` turns into file/line/key
//! errors.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize, Serializer};

use crate::config_error::ConfigError;
use crate::env;
use crate::yaml_lines;

/// A secret (API key). Never printed, logged or serialised in clear.
#[derive(Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The secret in clear, for the one place that sends it (a header, a signature).
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// Whether it is empty or only whitespace: not set.
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

pub(crate) fn s(v: &str) -> String {
    v.to_string()
}

/// A GraphRAG key that is accepted and has no effect here: any value, kept
/// only to say so (see `compat::ignored_keys`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(transparent)]
pub struct Unused(serde_json::Value);

mod aws_profile;
mod check;
mod compat;
mod models;
mod provider;
mod sections;
mod storage;

pub use check::regex_error;
pub(crate) use compat::IgnoredKey;
pub(crate) use models::RateLimit;
pub(crate) use models::DEFAULT_CONCURRENCY;
pub use models::{ModelConfig, Precision, RateLimitConfig, RetryConfig};
pub(crate) use provider::BedrockEmbedder;
pub use provider::{AwsAccess, Provider, VertexAccess};
pub use sections::*;
pub(crate) use storage::REMOTE_ROOT_FILE;
pub use storage::{
    AzureAccount, ProjectRoot, RemoteService, RemoteStorage, StorageConfig, StorageKeyError, StorageTarget, StorageType,
};

fn default_completion_models() -> BTreeMap<String, ModelConfig> {
    BTreeMap::from([(s("default_completion_model"), ModelConfig::default())])
}

fn default_embedding_models() -> BTreeMap<String, ModelConfig> {
    let local = ModelConfig { model_provider: Provider::Local, model: s("all-MiniLM-L6-v2"), ..ModelConfig::default() };
    BTreeMap::from([(s("default_embedding_model"), local)])
}

section!(
    /// The whole settings file: GraphRAG 3.3's sections and keys, and ours.
    Settings {
    /// Chat models by id; steps and queries name them (`completion_model_id`).
    completion_models: BTreeMap<String, ModelConfig> = default_completion_models(),
    /// Embedding models by id (`embedding_model_id`).
    embedding_models: BTreeMap<String, ModelConfig> = default_embedding_models(),
    /// Models that rerank retrieved text chunks (graphrag-rs extension:
    /// Cohere's and Jina's `/rerank`, as vLLM, TEI and Infinity serve it).
    rerank_models: BTreeMap<String, ModelConfig> = BTreeMap::new(),
    /// Default `concurrent_requests` of every model that sets none.
    concurrent_requests: u32 = DEFAULT_CONCURRENCY,
    /// Accepted for GraphRAG, no effect.
    async_mode: Option<Unused> = None,
    /// The input documents.
    input: InputConfig = InputConfig::default(),
    /// Where the input files are (default: the `input` folder).
    input_storage: StorageConfig = StorageConfig::under("input"),
    /// Where the index is published (default: the `output` folder).
    output_storage: StorageConfig = StorageConfig::default(),
    /// GraphRAG's incremental index folder; `update` here stages in output/.update/.
    update_output_storage: Option<StorageConfig> = None,
    /// GraphRAG's table format (Parquet only).
    table_provider: TableProviderConfig = TableProviderConfig::default(),
    /// Where the log files go (default: the `logs` folder).
    reporting: StorageConfig = StorageConfig::under("logs"),
    /// The model answer cache.
    cache: CacheConfig = CacheConfig::default(),
    /// How documents are split into text units.
    chunking: ChunkingConfig = ChunkingConfig::default(),
    /// Where embeddings are stored and searched.
    vector_store: VectorStoreConfig = VectorStoreConfig::default(),
    /// GraphRAG's explicit workflow list (not supported: pipelines are files here).
    workflows: Option<Vec<String>> = None,
    /// The embed steps.
    embed_text: EmbedTextConfig = EmbedTextConfig::default(),
    /// Graph extraction by the chat model.
    extract_graph: ExtractGraphConfig = ExtractGraphConfig::default(),
    /// Merging descriptions into one.
    summarize_descriptions: SummarizeDescriptionsConfig = SummarizeDescriptionsConfig::default(),
    /// Graph extraction without a model (the fast method).
    extract_graph_nlp: ExtractGraphNlpConfig = ExtractGraphNlpConfig::default(),
    /// Pruning of the fast method's graph.
    prune_graph: PruneGraphConfig = PruneGraphConfig::default(),
    /// Entity resolution.
    resolve_entities: ResolveEntitiesConfig = ResolveEntitiesConfig::default(),
    /// Community detection.
    cluster_graph: ClusterGraphConfig = ClusterGraphConfig::default(),
    /// Claim extraction.
    extract_claims: ExtractClaimsConfig = ExtractClaimsConfig::default(),
    /// Community reports.
    community_reports: CommunityReportsConfig = CommunityReportsConfig::default(),
    /// What `update` writes again.
    update: UpdateConfig = UpdateConfig::default(),
    /// Extra outputs.
    snapshots: SnapshotsConfig = SnapshotsConfig::default(),
    /// Local search.
    local_search: LocalSearchConfig = LocalSearchConfig::default(),
    /// Global search.
    global_search: GlobalSearchConfig = GlobalSearchConfig::default(),
    /// DRIFT search.
    drift_search: DriftSearchConfig = DriftSearchConfig::default(),
    /// Basic search.
    basic_search: BasicSearchConfig = BasicSearchConfig::default(),
    /// LightRAG-style keyword (hybrid / mix) search.
    keyword_search: KeywordSearchConfig = KeywordSearchConfig::default(),
    /// Graph-propagation search.
    ppr_search: PprSearchConfig = PprSearchConfig::default(),
    /// What a run tolerates.
    failures: FailuresConfig = FailuresConfig::default(),
    /// Bounds of model calls at query time.
    query: QueryConfig = QueryConfig::default(),
    /// Reranking of retrieved chunks.
    rerank: RerankConfig = RerankConfig::default(),
    /// The HTTP server's limits.
    serve: ServeConfig = ServeConfig::default(),
});

/// A chat model's answer length on Anthropic when settings give none:
/// within every Claude model's output limit, long enough for extraction.
pub(crate) const ANTHROPIC_MAX_TOKENS: u32 = 4096;

impl Settings {
    /// LiteLLM's `provider/model` names become the provider and the bare
    /// model (see `provider::split_model`), and a Vertex AI model's
    /// `vertex_*` call_args its `vertex` access, before anything else reads them.
    fn split_model_names(&mut self) {
        for model in self.completion_models.values_mut().chain(self.embedding_models.values_mut()) {
            let split = provider::split_model(
                &model.model_provider,
                &model.model,
                model.api_base.as_deref(),
                &check::PROVIDERS,
            );
            if let Some((provider, name)) = split {
                model.model = name.to_string();
                model.model_provider = provider;
            }
            if model.model_provider == Provider::VertexAi {
                model.vertex = VertexAccess::take_call_args(&mut model.call_args);
            }
        }
    }

    /// A model without an api_key takes its provider's variable
    /// (`ANTHROPIC_API_KEY`, `GEMINI_API_KEY`, `AZURE_AI_API_KEY`; an
    /// azure_ai model without api_base `AZURE_AI_API_BASE`) from `lookup`, a Bedrock
    /// model the AWS credentials (see `AwsAccess`) and a Vertex AI model
    /// what settings left unset of its access (see `VertexAccess`), as
    /// GraphRAG's LiteLLM does.
    pub(crate) fn keys_from_environment(&mut self, lookup: impl Fn(&str) -> Option<String>) {
        for model in self.completion_models.values_mut().chain(self.embedding_models.values_mut()) {
            if model.model_provider == Provider::Bedrock {
                let region = model.call_args.get("aws_region_name").and_then(|r| r.as_str()).map(str::to_string);
                model.aws = AwsAccess::from_environment(&lookup, region);
            }
            if model.model_provider == Provider::VertexAi {
                model.vertex.fill_from_environment(&lookup);
            }
            // LiteLLM's variable for an Azure AI endpoint.
            if model.model_provider == Provider::AzureAi && model.api_base.is_none() {
                model.api_base = lookup("AZURE_AI_API_BASE").filter(|b| !b.trim().is_empty());
            }
            if let (true, Some(var)) = (model.api_key.is_empty(), model.model_provider.key_variable()) {
                if let Some(key) = lookup(var).filter(|k| !k.trim().is_empty()) {
                    model.api_key = Secret(key);
                }
            }
        }
    }

    /// Settles what one key implies for another: a model's concurrency from
    /// the top-level `concurrent_requests`, the embedding batch sizes from
    /// `embed_text` (within what a Bedrock embedding model takes).
    fn resolve(&mut self) {
        let default_concurrency = self.concurrent_requests;
        for model in self.completion_models.values_mut().chain(self.embedding_models.values_mut()) {
            model.concurrent_requests.get_or_insert(default_concurrency);
        }
        for model in self.completion_models.values_mut() {
            // Anthropic requires max_tokens; set here, it is the model's own
            // (in step hashes, doubled for a cut-off answer's retry).
            if model.model_provider == Provider::Anthropic {
                model.max_tokens.get_or_insert(ANTHROPIC_MAX_TOKENS);
            }
        }
        if let Some(model) = self.embedding_models.get_mut(&self.embed_text.embedding_model_id) {
            if let Some(n) = self.embed_text.batch_size {
                model.batch_size = n;
            }
            if let Some(n) = self.embed_text.batch_max_tokens {
                model.batch_max_tokens = n;
            }
        }
        // Bedrock's embedding models take a fixed number of texts at most
        // (Titan one): a larger batch could only be refused.
        for model in self.embedding_models.values_mut().filter(|m| m.model_provider == Provider::Bedrock) {
            if let Some(family) = BedrockEmbedder::of(&model.model) {
                model.batch_size = model.batch_size.min(family.most_texts());
            }
        }
    }
}

/// Settings as loaded from a project, with the text they came from (for
/// pointing later errors at a line).
#[derive(Debug, Clone)]
pub struct LoadedSettings {
    /// The settings, checked, with keys from the environment filled in.
    pub settings: Settings,
    /// The file they were read from (or where it would be), as messages name it.
    pub file: PathBuf,
    /// The file's text after `${VAR}` substitution (empty for the defaults):
    /// what [`LoadedSettings::error_at`] finds lines in.
    pub text: String,
    /// GraphRAG keys present in the file that have no effect here.
    pub(crate) ignored: Vec<IgnoredKey>,
}

impl LoadedSettings {
    /// The defaults, for a project without a settings file (`file`: where it would be).
    pub fn defaults(file: &Path) -> Self {
        LoadedSettings {
            settings: Settings::default(),
            file: file.to_path_buf(),
            text: String::new(),
            ignored: Vec::new(),
        }
    }

    /// An error about `path` pointing at its line in the settings file.
    pub fn error_at(&self, path: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(&self.file, yaml_lines::line_of(&self.text, path), path, message)
    }

    /// The one warning listing the ignored GraphRAG keys, if any.
    pub fn ignored_warning(&self) -> Option<String> {
        compat::ignored_warning(&self.file, &self.ignored)
    }
}

/// The longest duration any setting may give, in seconds (one year): far
/// beyond any useful timeout or wait, far below what a `Duration` holds
/// (about 1.8e19 s), so no validated setting can overflow one.
pub(crate) const MAX_SECONDS: f64 = 31_536_000.0;

/// `secs` as a Duration that never panics: NaN and negatives are zero, and
/// anything too large for a Duration is `Duration::MAX`. For values that may
/// come from elsewhere than validated settings (a server's Retry-After, a
/// settings struct built in code).
pub fn duration_of_seconds(secs: f64) -> std::time::Duration {
    if secs.is_nan() || secs <= 0.0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::try_from_secs_f64(secs).unwrap_or(std::time::Duration::MAX)
}

/// The settings file `init` writes and messages name.
pub const SETTINGS_FILE: &str = "settings.yaml";

/// The settings files a project may have, in the order they are looked for
/// (GraphRAG's order).
pub(crate) const SETTINGS_FILES: [&str; 3] = [SETTINGS_FILE, "settings.yml", "settings.json"];

/// The project's settings file, if it has one.
pub fn find(root: &Path) -> Option<PathBuf> {
    SETTINGS_FILES.iter().map(|n| root.join(n)).find(|p| p.is_file())
}

/// Loads ROOT/settings.yaml (or settings.yml, settings.json), substituting
/// `${VAR}` from the environment and ROOT/.env, and checks the values.
///
/// When ROOT is the working copy of a root in a bucket (it has
/// `REMOTE_ROOT_FILE`), errors name the file by its URL, and the `file`
/// storages become prefixes under that root (`Settings::rebase`).
pub fn load(root: &Path) -> Result<LoadedSettings, ConfigError> {
    let remote_root = remote_root(root)?;
    let file = find(root).ok_or_else(|| {
        ConfigError::new(
            &root.join(SETTINGS_FILE),
            None,
            "",
            "not found (run `graphrag-rs init --root DIR` to create a project)",
        )
    })?;
    let raw =
        std::fs::read_to_string(&file).map_err(|e| ConfigError::new(&file, None, "", format!("cannot read: {e}")))?;
    // Messages name the file where its owner keeps it.
    let shown = match &remote_root {
        Some(remote) => {
            PathBuf::from(format!("{}/{}", remote.url(), file.file_name().unwrap_or_default().to_string_lossy()))
        }
        None => file,
    };
    let dotenv = std::fs::read_to_string(root.join(".env")).map(|t| env::parse_dotenv(&t)).unwrap_or_default();
    let lookup = |k: &str| std::env::var(k).ok().or_else(|| dotenv.get(k).cloned());
    let text = env::substitute(&raw, &shown, &dotenv, |k| std::env::var(k).ok())?;
    let mut loaded = parse(&shown, text)?;
    loaded.settings.keys_from_environment(lookup);
    check::prompt_files(&loaded, root)?;
    if let Some(remote) = remote_root {
        let rebased = loaded.settings.rebase(&remote);
        rebased.map_err(|(section, e)| loaded.error_at(&format!("{section}.{}", e.key), e.message))?;
    }
    Ok(loaded)
}

/// The bucket root whose working copy `root` is, if it is one.
pub(crate) fn remote_root(root: &Path) -> Result<Option<RemoteStorage>, ConfigError> {
    let marker = root.join(REMOTE_ROOT_FILE);
    match std::fs::read_to_string(&marker) {
        Ok(url) => RemoteStorage::parse_url(url.trim()).map(Some).map_err(|e| ConfigError::new(&marker, None, "", e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ConfigError::new(&marker, None, "", format!("cannot read: {e}"))),
    }
}

/// The project root as its user named it, for messages and the commands
/// they suggest: a bucket root's URL (not its local working copy), else
/// the folder.
pub fn describe_root(root: &Path) -> String {
    match remote_root(root) {
        Ok(Some(remote)) => remote.url(),
        _ => root.display().to_string(),
    }
}

impl Settings {
    /// The storages of a project whose root is the bucket prefix `root`:
    /// every `file` one (input, output, reporting, the cache) becomes the
    /// same folder name under that prefix on the same store. The error names
    /// the section.
    pub(crate) fn rebase(&mut self, root: &RemoteStorage) -> Result<(), (&'static str, StorageKeyError)> {
        self.input_storage.rebase(root).map_err(|e| ("input_storage", e))?;
        self.output_storage.rebase(root).map_err(|e| ("output_storage", e))?;
        self.reporting.rebase(root).map_err(|e| ("reporting", e))?;
        // A cache folder named by cache.base_dir alone is reported at its line.
        let section = if self.cache.storage.is_some() { "cache.storage" } else { "cache" };
        if self.cache.storage.is_none() && self.cache.enabled() {
            self.cache.storage = Some(StorageConfig::under(self.cache.dir()));
            self.cache.base_dir = None;
        }
        if let Some(cache) = &mut self.cache.storage {
            cache.rebase(root).map_err(|e| (section, e))?;
        }
        Ok(())
    }
}

/// Parses settings text (already substituted; JSON when the file name ends
/// in `.json`, else YAML) and checks the values.
pub fn parse(file: &Path, text: String) -> Result<LoadedSettings, ConfigError> {
    let located = |mut err: ConfigError| {
        if err.line.is_none() {
            err.line = yaml_lines::line_of(&text, &err.path);
        }
        err
    };
    let mut settings: Settings = if text.trim().is_empty() {
        Settings::default()
    } else if file.extension().is_some_and(|e| e == "json") {
        let mut de = serde_json::Deserializer::from_str(&text);
        serde_path_to_error::deserialize(&mut de).map_err(|e| located(ConfigError::from_json(file, e)))?
    } else {
        let de = serde_yaml_ng::Deserializer::from_str(&text);
        serde_path_to_error::deserialize(de).map_err(|e| located(ConfigError::from_yaml(file, e)))?
    };
    settings.split_model_names();
    let ignored = compat::ignored_keys(&settings);
    let mut loaded = LoadedSettings { settings, file: file.to_path_buf(), text, ignored };
    check::check(&loaded)?;
    loaded.settings.resolve();
    for key in &mut loaded.ignored {
        key.line = yaml_lines::line_of(&loaded.text, &key.path);
    }
    Ok(loaded)
}

#[cfg(test)]
mod tests;
