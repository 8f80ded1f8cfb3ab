//! What a Microsoft GraphRAG 3.3 project brings that has no effect here:
//! keys that are accepted so its settings file runs as it is, and listed
//! once, with their lines, in one warning. (Backends that are not
//! implemented are errors: see `check`.)

use std::path::Path;

use super::{Settings, StorageType};

/// A GraphRAG key present in the settings file that has no effect here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IgnoredKey {
    /// Dotted key path.
    pub path: String,
    /// 1-based line in the settings file, when found.
    pub line: Option<usize>,
    /// Why it has no effect.
    pub reason: &'static str,
}

const METRICS: &str = "GraphRAG's metrics services (graphrag-rs counts calls, tokens, cache hits and retries per model in output/stats.json)";
const MOCK: &str = "answers of GraphRAG's `type: mock` models";
const ASYNC: &str = "model calls run on graphrag-rs's own async runtime";
const NLP_THREADS: &str = "the noun-phrase extractor uses every core";
const SPACY: &str =
    "spaCy parser settings (regex_english here uses its own rules and stop words; max_word_length applies)";
const REMOTE_STORAGE: &str = "remote storage keys, unused with `type: file`";
const UPDATE_OUTPUT: &str =
    "`update` stages its work in the output folder's .update/ and publishes it atomically; the previous index stays live until then";
const TABLE_PROVIDER: &str = "CosmosDB table keys (tables are Parquet files)";
const SQLITE: &str = "sqlite caches only";
const REMOTE_VECTORS: &str = "keys of azure_ai_search / cosmosdb vector stores";

/// The ignored keys present in `s` (lines are found later, from the text).
pub(super) fn ignored_keys(s: &Settings) -> Vec<IgnoredKey> {
    let mut out = Vec::new();
    // The keys among `keys` (name, present) that are present, under `prefix`.
    let mut note = |prefix: &str, keys: &[(&str, bool)], reason: &'static str| {
        for (key, _) in keys.iter().filter(|(_, present)| *present) {
            let path = if key.is_empty() { prefix.to_string() } else { format!("{prefix}.{key}") };
            out.push(IgnoredKey { path, line: None, reason });
        }
    };
    for (kind, models) in [("completion_models", &s.completion_models), ("embedding_models", &s.embedding_models)] {
        for (id, m) in models {
            let prefix = format!("{kind}.{id}");
            note(&prefix, &[("metrics", m.metrics.is_some())], METRICS);
            note(&prefix, &[("mock_responses", m.mock_responses.is_some())], MOCK);
        }
    }
    note("async_mode", &[("", s.async_mode.is_some())], ASYNC);
    let nlp = &s.extract_graph_nlp;
    note("extract_graph_nlp", &[("async_mode", nlp.async_mode.is_some())], ASYNC);
    note("extract_graph_nlp", &[("concurrent_requests", nlp.concurrent_requests.is_some())], NLP_THREADS);
    let ta = &nlp.text_analyzer;
    let spacy = [
        ("model_name", ta.model_name.is_some()),
        ("word_delimiter", ta.word_delimiter.is_some()),
        ("include_named_entities", ta.include_named_entities.is_some()),
        ("exclude_nouns", ta.exclude_nouns.is_some()),
        ("exclude_entity_tags", ta.exclude_entity_tags.is_some()),
        ("exclude_pos_tags", ta.exclude_pos_tags.is_some()),
        ("noun_phrase_tags", ta.noun_phrase_tags.is_some()),
        ("noun_phrase_grammars", ta.noun_phrase_grammars.is_some()),
    ];
    note("extract_graph_nlp.text_analyzer", &spacy, SPACY);
    let storages = [
        Some(("input_storage", &s.input_storage)),
        Some(("output_storage", &s.output_storage)),
        Some(("reporting", &s.reporting)),
        s.cache.storage.as_ref().map(|st| ("cache.storage", st)),
    ];
    // Under a remote type, a key of another backend is an error (`check`).
    for (prefix, st) in storages.into_iter().flatten().filter(|(_, st)| st.kind == StorageType::File) {
        let keys: Vec<(&str, bool)> = st.remote_keys().into_iter().map(|k| (k, true)).collect();
        note(prefix, &keys, REMOTE_STORAGE);
    }
    note("update_output_storage", &[("", s.update_output_storage.is_some())], UPDATE_OUTPUT);
    let tp = &s.table_provider;
    let cosmos_tables = [
        ("batch_size", tp.batch_size.is_some()),
        ("container_name", tp.container_name.is_some()),
        ("legacy_container", tp.legacy_container.is_some()),
    ];
    note("table_provider", &cosmos_tables, TABLE_PROVIDER);
    note("cache", &[("database_name", s.cache.database_name.is_some())], SQLITE);
    let vs = &s.vector_store;
    let remote_vectors = [
        ("url", vs.url.is_some()),
        ("api_key", vs.api_key.is_some()),
        ("audience", vs.audience.is_some()),
        ("connection_string", vs.connection_string.is_some()),
        ("database_name", vs.database_name.is_some()),
    ];
    note("vector_store", &remote_vectors, REMOTE_VECTORS);
    out
}

/// One warning listing every ignored key with its line, grouped by reason.
pub(super) fn ignored_warning(file: &Path, keys: &[IgnoredKey]) -> Option<String> {
    if keys.is_empty() {
        return None;
    }
    let mut reasons: Vec<&'static str> = Vec::new();
    for k in keys {
        if !reasons.contains(&k.reason) {
            reasons.push(k.reason);
        }
    }
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut text = format!(
        "{}: {} GraphRAG {} no effect in graphrag-rs and {} ignored:",
        file.display(),
        keys.len(),
        if keys.len() == 1 { "key has" } else { "keys have" },
        if keys.len() == 1 { "is" } else { "are" }
    );
    for reason in reasons {
        let listed: Vec<String> = keys
            .iter()
            .filter(|k| k.reason == reason)
            .map(|k| match k.line {
                Some(line) => format!("{}:{line} `{}`", name, k.path),
                None => format!("`{}`", k.path),
            })
            .collect();
        text.push_str(&format!("\n  {} — {reason}", listed.join(", ")));
    }
    Some(text)
}
