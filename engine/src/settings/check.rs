//! Checks serde cannot express: enumerated strings, numeric relations,
//! references between sections, and backends that are not implemented.

use std::collections::BTreeMap;

use graphrag_operations::suggest::did_you_mean;

use super::{LoadedSettings, ModelConfig, StorageConfig};
use crate::config_error::ConfigError;
use crate::embedded_fields::FIELDS;

const FILE_TYPES: [&str; 5] = ["text", "markdown", "csv", "json", "jsonl"];
const CHUNK_STRATEGIES: [&str; 2] = ["tokens", "sentence"];
const CACHE_TYPES: [&str; 4] = ["json", "file", "memory", "none"];

fn one_of(loaded: &LoadedSettings, path: &str, value: &str, allowed: &[&str]) -> Result<(), ConfigError> {
    if allowed.contains(&value) {
        return Ok(());
    }
    let hint = did_you_mean(value, allowed.iter().copied());
    Err(loaded.error_at(path, format!("`{value}` is not one of {}{hint}", allowed.join(", "))))
}

/// A GraphRAG backend that graphrag-rs does not implement: an error naming
/// what is supported, never a silent fallback.
fn backend(
    loaded: &LoadedSettings,
    path: &str,
    value: &str,
    supported: &[&str],
    help: &str,
) -> Result<(), ConfigError> {
    if supported.contains(&value) {
        return Ok(());
    }
    let hint = did_you_mean(value, supported.iter().copied());
    Err(loaded.error_at(
        path,
        format!("`{value}` is not implemented in graphrag-rs{hint}; supported: {}. {help}", supported.join(", ")),
    ))
}

fn utf8(loaded: &LoadedSettings, path: &str, encoding: &str) -> Result<(), ConfigError> {
    if encoding.eq_ignore_ascii_case("utf-8") || encoding.eq_ignore_ascii_case("utf8") {
        return Ok(());
    }
    Err(loaded.error_at(
        path,
        format!("`{encoding}` is not supported: input files must be UTF-8 (convert them, e.g. with iconv)"),
    ))
}

fn positive(loaded: &LoadedSettings, path: &str, value: f64) -> Result<(), ConfigError> {
    if value > 0.0 && value.is_finite() {
        return Ok(());
    }
    Err(loaded.error_at(path, format!("must be a positive number of seconds, not {value}")))
}

fn storage(loaded: &LoadedSettings, path: &str, st: &StorageConfig) -> Result<(), ConfigError> {
    backend(
        loaded,
        &format!("{path}.type"),
        &st.kind,
        &["file"],
        "graphrag-rs reads and writes local folders: mount the container (e.g. with blobfuse2) and set base_dir to that folder",
    )?;
    if let Some(enc) = &st.encoding {
        utf8(loaded, &format!("{path}.encoding"), enc)?;
    }
    Ok(())
}

pub(super) fn check(loaded: &LoadedSettings) -> Result<(), ConfigError> {
    let s = &loaded.settings;
    one_of(loaded, "input.type", &s.input.file_type, &FILE_TYPES)?;
    utf8(loaded, "input.encoding", &s.input.encoding)?;
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
    check_storage(loaded)?;
    check_vector_store(loaded)?;
    if s.workflows.as_ref().is_some_and(|w| !w.is_empty()) {
        return Err(loaded.error_at(
            "workflows",
            "a workflow list is not implemented in graphrag-rs: the steps of a run are a pipeline file; copy workflows/standard.yaml, keep the steps you want and run `graphrag-rs index --method path/to/it.yaml`",
        ));
    }
    if s.concurrent_requests == 0 {
        return Err(loaded.error_at("concurrent_requests", "must be at least 1"));
    }
    for (kind, models) in [("completion_models", &s.completion_models), ("embedding_models", &s.embedding_models)] {
        for (id, model) in models {
            check_model(loaded, &format!("{kind}.{id}"), model)?;
        }
    }
    for (section, id) in [
        ("extract_graph.completion_model_id", &s.extract_graph.completion_model_id),
        ("summarize_descriptions.completion_model_id", &s.summarize_descriptions.completion_model_id),
        ("community_reports.completion_model_id", &s.community_reports.completion_model_id),
        ("extract_claims.completion_model_id", &s.extract_claims.completion_model_id),
        ("resolve_entities.completion_model_id", &s.resolve_entities.completion_model_id),
    ] {
        model_ref(loaded, section, id, &s.completion_models)?;
    }
    model_ref(loaded, "embed_text.embedding_model_id", &s.embed_text.embedding_model_id, &s.embedding_models)?;
    for (path, name) in [
        ("extract_graph.model_instance_name", &s.extract_graph.model_instance_name),
        ("summarize_descriptions.model_instance_name", &s.summarize_descriptions.model_instance_name),
        ("extract_claims.model_instance_name", &s.extract_claims.model_instance_name),
        ("community_reports.model_instance_name", &s.community_reports.model_instance_name),
        ("resolve_entities.model_instance_name", &s.resolve_entities.model_instance_name),
        ("embed_text.model_instance_name", &s.embed_text.model_instance_name),
    ] {
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if name.is_empty() || !name.chars().all(plain) || name.chars().all(|c| c == '.') {
            return Err(loaded.error_at(
                path,
                format!("`{name}` is not a plain name (letters, digits, _ - .): it names a folder of the cache"),
            ));
        }
    }
    one_of(loaded, "resolve_entities.mode", &s.resolve_entities.mode, &["auto", "rules", "llm"])?;
    if s.resolve_entities.batch_size == 0 {
        return Err(loaded.error_at("resolve_entities.batch_size", "must be at least 1"));
    }
    for (path, value) in [
        ("embed_text.batch_size", s.embed_text.batch_size),
        ("embed_text.batch_max_tokens", s.embed_text.batch_max_tokens),
    ] {
        if value == Some(0) {
            return Err(loaded.error_at(path, "must be at least 1"));
        }
    }
    Ok(())
}

fn check_storage(loaded: &LoadedSettings) -> Result<(), ConfigError> {
    let s = &loaded.settings;
    storage(loaded, "input_storage", &s.input_storage)?;
    storage(loaded, "output_storage", &s.output_storage)?;
    if let Some(st) = &s.update_output_storage {
        storage(loaded, "update_output_storage", st)?;
    }
    storage(loaded, "reporting", &s.reporting)?;
    backend(
        loaded,
        "table_provider.type",
        &s.table_provider.kind,
        &["parquet"],
        "graphrag-rs writes GraphRAG's tables as Parquet files",
    )?;
    backend(
        loaded,
        "cache.type",
        &s.cache.kind,
        &CACHE_TYPES,
        "json keeps one file per model answer under the cache folder",
    )?;
    if let Some(st) = &s.cache.storage {
        storage(loaded, "cache.storage", st)?;
        if let Some(dir) = s.cache.base_dir.as_ref().filter(|d| **d != st.base_dir) {
            return Err(loaded.error_at(
                "cache.base_dir",
                format!("`{dir}` differs from cache.storage.base_dir `{}`: keep one of them", st.base_dir),
            ));
        }
    }
    Ok(())
}

fn check_vector_store(loaded: &LoadedSettings) -> Result<(), ConfigError> {
    let vs = &loaded.settings.vector_store;
    backend(
        loaded,
        "vector_store.type",
        &vs.kind,
        &["embedded", "lancedb"],
        "The embedded store (exact search, HNSW from vector_store.ann_threshold vectors) serves every query; lancedb is accepted as GraphRAG's default and served by it",
    )?;
    for name in vs.index_schema.keys() {
        if !FIELDS.contains(&name.as_str()) {
            let hint = did_you_mean(name, FIELDS.iter().copied());
            return Err(loaded.error_at(
                &format!("vector_store.index_schema.{name}"),
                format!("`{name}` is not an embedding name{hint}; embeddings: {}", FIELDS.join(", ")),
            ));
        }
    }
    Ok(())
}

fn check_model(loaded: &LoadedSettings, path: &str, m: &ModelConfig) -> Result<(), ConfigError> {
    backend(
        loaded,
        &format!("{path}.type"),
        &m.client_type,
        &["litellm"],
        "graphrag-rs calls any OpenAI-compatible server; for tests, point api_base at graphrag-mock-llm",
    )?;
    backend(
        loaded,
        &format!("{path}.auth_method"),
        &m.auth_method,
        &["api_key"],
        "set api_key (for Azure OpenAI, the resource's key)",
    )?;
    positive(loaded, &format!("{path}.request_timeout"), m.request_timeout)?;
    if m.concurrent_requests == Some(0) {
        return Err(loaded.error_at(&format!("{path}.concurrent_requests"), "must be at least 1"));
    }
    if let Some(r) = &m.retry {
        let at = |key: &str| format!("{path}.retry.{key}");
        one_of(loaded, &at("type"), &r.kind, &["exponential_backoff", "immediate"])?;
        if r.kind == "exponential_backoff" {
            if let Some(b) = r.base_delay.filter(|b| *b <= 1.0 || !b.is_finite()) {
                return Err(loaded.error_at(
                    &at("base_delay"),
                    format!("must be greater than 1.0, not {b}: the wait before retry n is base_delay^n seconds"),
                ));
            }
        }
        if let Some(d) = r.max_delay {
            positive(loaded, &at("max_delay"), d)?;
        }
    }
    if let Some(rl) = &m.rate_limit {
        let at = |key: &str| format!("{path}.rate_limit.{key}");
        one_of(loaded, &at("type"), &rl.kind, &["sliding_window"])?;
        if rl.period_in_seconds == Some(0) {
            return Err(loaded.error_at(&at("period_in_seconds"), "must be at least 1"));
        }
        for (key, value, ours) in [
            ("requests_per_period", rl.requests_per_period, ("requests_per_minute", m.requests_per_minute)),
            ("tokens_per_period", rl.tokens_per_period, ("tokens_per_minute", m.tokens_per_minute)),
        ] {
            if value == Some(0) {
                return Err(loaded.error_at(&at(key), "must be at least 1 (leave it out for no limit)"));
            }
            if value.is_some() && ours.1.is_some() {
                return Err(loaded.error_at(
                    &format!("{path}.{}", ours.0),
                    format!("both {} and rate_limit.{key} are set: keep one of them", ours.0),
                ));
            }
        }
        if rl.requests_per_period.is_none() && rl.tokens_per_period.is_none() {
            return Err(loaded.error_at(&format!("{path}.rate_limit"), "set requests_per_period or tokens_per_period"));
        }
    }
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
    let hint = did_you_mean(id, models.keys().map(String::as_str));
    let known: Vec<&str> = models.keys().map(String::as_str).collect();
    Err(loaded.error_at(path, format!("model id `{id}` is not defined (defined: {}){hint}", known.join(", "))))
}
