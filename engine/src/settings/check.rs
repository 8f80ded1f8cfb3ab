//! Checks serde cannot express: enumerated strings, numeric relations,
//! references between sections, and backends that are not implemented.

use std::collections::BTreeMap;

use graphrag_operations::suggest::did_you_mean;

use super::{LoadedSettings, ModelConfig, StorageConfig, MAX_SECONDS};
use crate::config_error::ConfigError;
use crate::embedded_fields::EmbeddedField;

const FILE_TYPES: [&str; 9] = ["text", "markdown", "csv", "json", "jsonl", "parquet", "pdf", "docx", "markitdown"];
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

/// A duration setting: more than 0 seconds and at most `MAX_SECONDS` (one
/// year; a larger one would overflow a Duration somewhere past 1.8e19 s).
fn positive(loaded: &LoadedSettings, path: &str, value: f64) -> Result<(), ConfigError> {
    seconds(loaded, path, value, false)
}

/// A duration setting in seconds, within 0 (excluded unless `zero_allowed`)
/// and `MAX_SECONDS`.
fn seconds(loaded: &LoadedSettings, path: &str, value: f64, zero_allowed: bool) -> Result<(), ConfigError> {
    let low_ok = value > 0.0 || (zero_allowed && value == 0.0);
    if value.is_finite() && low_ok && value <= MAX_SECONDS {
        return Ok(());
    }
    let low = if zero_allowed { "at least 0" } else { "more than 0" };
    Err(loaded.error_at(
        path,
        format!(
            "{value} is not a valid value: it must be a number of seconds, {low} and at most {MAX_SECONDS} (one year)"
        ),
    ))
}

/// A storage section: its keys make a folder or a bucket prefix.
fn storage(loaded: &LoadedSettings, path: &str, st: &StorageConfig) -> Result<(), ConfigError> {
    st.target().map_err(|e| loaded.error_at(&format!("{path}.{}", e.key), e.message))?;
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
            return Err(loaded.error_at("input.file_pattern", regex_error(p, &e)));
        }
    }
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
            check_model_values(loaded, &format!("{kind}.{id}"), model, kind == "embedding_models")?;
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
    check_rerank(loaded)?;
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
    check_ranges(loaded)
}

fn check_storage(loaded: &LoadedSettings) -> Result<(), ConfigError> {
    let s = &loaded.settings;
    storage(loaded, "input_storage", &s.input_storage)?;
    storage(loaded, "output_storage", &s.output_storage)?;
    // update_output_storage is not read (any type): `update` stages in the
    // output location and publishes there; the ignored-keys warning says so.
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
        "json keeps the model answers in segment files under the cache folder",
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
    let fields = EmbeddedField::ALL.map(EmbeddedField::name);
    for name in vs.index_schema.keys() {
        if !fields.contains(&name.as_str()) {
            let hint = did_you_mean(name, fields);
            return Err(loaded.error_at(
                &format!("vector_store.index_schema.{name}"),
                format!("`{name}` is not an embedding name{hint}; embeddings: {}", fields.join(", ")),
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
            if let Some(b) = r.base_delay.filter(|b| *b <= 1.0 || !b.is_finite() || *b > MAX_SECONDS) {
                return Err(loaded.error_at(
                    &at("base_delay"),
                    format!(
                        "must be greater than 1.0 and at most {MAX_SECONDS} (one year), not {b}: the wait before retry n is base_delay^n seconds"
                    ),
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
        if let Some(period) = rl.period_in_seconds.filter(|p| *p == 0 || f64::from(*p) > MAX_SECONDS) {
            return Err(loaded.error_at(
                &at("period_in_seconds"),
                format!("{period} is not a valid value: it must be at least 1 and at most {MAX_SECONDS} (one year)"),
            ));
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

/// A regex error in one line, ending with its cause (`unclosed group`):
/// the regex crate's own message spans lines, with the cause last.
pub fn regex_error(pattern: &str, e: &regex::Error) -> String {
    let text = e.to_string();
    let cause = text.lines().rev().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    format!("`{pattern}` is not a valid regular expression: {}", cause.trim_start_matches("error: "))
}

/// Providers graphrag-rs calls: Anthropic's, Gemini's (also on Vertex AI)
/// and Bedrock's own APIs, and over
/// the OpenAI API those it knows the address of and any other
/// OpenAI-compatible server given an api_base.
pub(super) const PROVIDERS: [&str; 20] = [
    "openai",
    "anthropic",
    "gemini",
    "bedrock",
    "vertex_ai",
    "azure",
    "azure_ai",
    "ollama",
    "vllm",
    "hosted_vllm",
    "lm_studio",
    "deepseek",
    "openrouter",
    "groq",
    "together_ai",
    "mistral",
    "fireworks_ai",
    "deepinfra",
    "xai",
    "openai_compatible",
];

/// A number setting that must be finite and within `min..=max` (`min`
/// excluded when `open_min`).
fn in_range(
    loaded: &LoadedSettings,
    path: &str,
    value: f64,
    (min, max): (f64, f64),
    open_min: bool,
) -> Result<(), ConfigError> {
    let low_ok = if open_min { value > min } else { value >= min };
    if value.is_finite() && low_ok && value <= max {
        return Ok(());
    }
    let low = if open_min { format!("more than {min}") } else { format!("at least {min}") };
    let range = if max.is_finite() { format!("{low} and at most {max}") } else { low };
    Err(loaded.error_at(path, format!("{value} is not a valid value: it must be {range}")))
}

fn at_least_one(loaded: &LoadedSettings, path: &str, value: u64, why: &str) -> Result<(), ConfigError> {
    if value >= 1 {
        return Ok(());
    }
    Err(loaded.error_at(path, format!("0 is not a valid value: it must be at least 1{why}")))
}

/// A model's values: a provider it can call, a URL, numbers in their ranges
/// (nonsense is rejected, never clamped).
fn check_model_values(
    loaded: &LoadedSettings,
    path: &str,
    m: &ModelConfig,
    embedding: bool,
) -> Result<(), ConfigError> {
    let key = |k: &str| format!("{path}.{k}");
    let provider = m.model_provider.as_str();
    let callable = PROVIDERS.contains(&provider) || (embedding && provider == "local");
    if !callable {
        let mut known: Vec<&str> = PROVIDERS.to_vec();
        if embedding {
            known.push("local");
        }
        let hint = did_you_mean(provider, known.iter().copied());
        let what =
            if provider == "local" { " (`local` is the in-process embedding model, not a chat model)" } else { "" };
        return Err(loaded.error_at(
            &key("model_provider"),
            format!("`{provider}` is not a provider graphrag-rs can call{what}: one of {}{hint}", known.join(", ")),
        ));
    }
    if let (true, Some(why)) = (embedding, m.model_provider.embeddings_refusal(&m.model)) {
        return Err(loaded.error_at(
            &key("model_provider"),
            format!("`{provider}` cannot embed: {why}; embed with another provider (openai, gemini, local, ...)"),
        ));
    }
    if let Some(base) = &m.api_base {
        crate::api_base::parse(base).map_err(|e| loaded.error_at(&key("api_base"), e))?;
    }
    // Anthropic's range is narrower than OpenAI's, and its API refuses more.
    let max_temperature = if m.model_provider == super::Provider::Anthropic { 1.0 } else { 2.0 };
    if provider != "local" && m.precision != super::Precision::Auto {
        return Err(loaded.error_at(
            &key("precision"),
            "applies only to the in-process embedding model (model_provider: local); remove it",
        ));
    }
    in_range(loaded, &key("temperature"), m.temperature, (0.0, max_temperature), false)?;
    in_range(loaded, &key("top_p"), m.top_p, (0.0, 1.0), false)?;
    seconds(loaded, &key("retry_base_delay"), m.retry_base_delay, true)?;
    seconds(loaded, &key("max_retry_wait"), m.max_retry_wait, true)?;
    seconds(loaded, &key("max_retry_time"), m.max_retry_time, false)?;
    at_least_one(loaded, &key("max_consecutive_failures"), m.max_consecutive_failures.into(), "")?;
    let no_limit = " (leave it out for no limit)";
    if let Some(r) = m.requests_per_minute {
        at_least_one(loaded, &key("requests_per_minute"), r.into(), no_limit)?;
    }
    if let Some(t) = m.tokens_per_minute {
        at_least_one(loaded, &key("tokens_per_minute"), t.into(), no_limit)?;
    }
    if let Some(t) = m.max_tokens {
        at_least_one(loaded, &key("max_tokens"), t.into(), " (leave it out for the server's default)")?;
    }
    at_least_one(loaded, &key("batch_size"), m.batch_size.into(), "")?;
    at_least_one(loaded, &key("batch_max_tokens"), m.batch_max_tokens.into(), "")
}

/// Numbers that must be positive, fractions and percentages.
fn check_ranges(loaded: &LoadedSettings) -> Result<(), ConfigError> {
    let s = &loaded.settings;
    at_least_one(loaded, "vector_store.ann_ef_search", s.vector_store.ann_ef_search as u64, "")?;
    let types = &s.extract_graph.entity_types;
    if types.is_empty() || types.iter().any(|t| t.trim().is_empty()) {
        return Err(loaded.error_at(
            "extract_graph.entity_types",
            "must list at least one entity type, none empty (e.g. [organization, person, geo, event])",
        ));
    }
    let words = " (words)";
    at_least_one(loaded, "summarize_descriptions.max_length", s.summarize_descriptions.max_length.into(), words)?;
    at_least_one(
        loaded,
        "summarize_descriptions.max_input_tokens",
        s.summarize_descriptions.max_input_tokens.into(),
        "",
    )?;
    if s.summarize_descriptions.force_llm_summary_on_merge < 2 {
        return Err(loaded.error_at(
            "summarize_descriptions.force_llm_summary_on_merge",
            format!(
                "{} is not a valid value: it must be at least 2 (a single description is used as it is)",
                s.summarize_descriptions.force_llm_summary_on_merge
            ),
        ));
    }
    at_least_one(loaded, "community_reports.max_length", s.community_reports.max_length.into(), words)?;
    at_least_one(loaded, "community_reports.max_input_length", s.community_reports.max_input_length.into(), "")?;
    at_least_one(loaded, "global_search.map_max_length", s.global_search.map_max_length.into(), words)?;
    at_least_one(loaded, "global_search.reduce_max_length", s.global_search.reduce_max_length.into(), words)?;
    in_range(loaded, "prune_graph.min_edge_weight_pct", s.prune_graph.min_edge_weight_pct, (0.0, 100.0), false)?;
    let local = &s.local_search;
    in_range(loaded, "local_search.text_unit_prop", local.text_unit_prop, (0.0, 1.0), false)?;
    in_range(loaded, "local_search.community_prop", local.community_prop, (0.0, 1.0), false)?;
    if local.text_unit_prop + local.community_prop > 1.0 {
        return Err(loaded.error_at(
            "local_search.community_prop",
            format!(
                "local_search.text_unit_prop ({}) + local_search.community_prop ({}) is more than 1: together they are shares of one context window",
                local.text_unit_prop, local.community_prop
            ),
        ));
    }
    let update = &s.update;
    in_range(loaded, "update.material_fraction", update.material_fraction, (0.0, 1.0), false)?;
    at_least_one(loaded, "update.material_degree", update.material_degree.into(), "")?;
    in_range(loaded, "failures.tolerated_fraction", s.failures.tolerated_fraction, (0.0, 1.0), false)?;
    check_retrieval(loaded)?;
    check_query_and_serve(loaded)
}

/// The smallest `serve.max_header_bytes` (hyper's smallest read buffer).
pub(crate) const MIN_HEADER_BYTES: usize = 8192;

fn check_query_and_serve(loaded: &LoadedSettings) -> Result<(), ConfigError> {
    let (q, sv) = (&loaded.settings.query, &loaded.settings.serve);
    positive(loaded, "query.request_timeout", q.request_timeout)?;
    positive(loaded, "query.max_retry_time", q.max_retry_time)?;
    positive(loaded, "serve.header_read_timeout", sv.header_read_timeout)?;
    positive(loaded, "serve.body_read_timeout", sv.body_read_timeout)?;
    positive(loaded, "serve.send_timeout", sv.send_timeout)?;
    positive(loaded, "serve.query_timeout", sv.query_timeout)?;
    positive(loaded, "serve.poll_seconds", sv.poll_seconds)?;
    at_least_one(loaded, "serve.body_min_rate", sv.body_min_rate, "")?;
    at_least_one(loaded, "serve.max_connections", sv.max_connections.into(), "")?;
    at_least_one(loaded, "serve.max_connections_per_client", sv.max_connections_per_client.into(), "")?;
    at_least_one(loaded, "serve.max_pending_connections_per_client", sv.max_pending_connections_per_client.into(), "")?;
    if sv.max_header_bytes < MIN_HEADER_BYTES {
        return Err(loaded.error_at(
            "serve.max_header_bytes",
            format!("{} is too small: it must be at least {MIN_HEADER_BYTES}", sv.max_header_bytes),
        ));
    }
    for (i, origin) in sv.cors_origins.iter().enumerate() {
        if let Err(why) = cors_origin(origin) {
            return Err(loaded.error_at(&format!("serve.cors_origins[{i}]"), why));
        }
    }
    Ok(())
}

/// `*`, or an origin as a browser sends it: scheme, host and port only.
fn cors_origin(origin: &str) -> Result<(), String> {
    if origin == "*" {
        return Ok(());
    }
    let help = "an origin is `*` or a scheme and host with an optional port, such as `http://localhost:5173` (no path, no trailing slash)";
    let rest = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.contains(['/', '?', '#', ' ', '*']) => Ok(()),
        _ => Err(format!("`{origin}` is not an origin: {help}")),
    }
}

/// basic_search's fusion and ppr_search.
fn check_retrieval(loaded: &LoadedSettings) -> Result<(), ConfigError> {
    let s = &loaded.settings;
    let ps = &s.ppr_search;
    let inf = f64::INFINITY;
    at_least_one(loaded, "basic_search.k", s.basic_search.k as u64, "")?;
    in_range(loaded, "basic_search.fusion_k", s.basic_search.fusion_k, (0.0, inf), true)?;
    in_range(loaded, "ppr_search.damping", ps.damping, (0.0, 1.0), true)?;
    if ps.damping >= 1.0 {
        return Err(loaded.error_at(
            "ppr_search.damping",
            "1 is not a valid value: it must be less than 1 (a walk that never restarts ignores the question)",
        ));
    }
    in_range(loaded, "ppr_search.passage_node_weight", ps.passage_node_weight, (0.0, inf), false)?;
    if let Some(t) = ps.synonym_threshold {
        in_range(loaded, "ppr_search.synonym_threshold", t, (0.0, 1.0), true)?;
    }
    if let Some(t) = ps.link_threshold {
        in_range(loaded, "ppr_search.link_threshold", t, (0.0, 1.0), true)?;
    }
    if let Some(w) = ps.title_edge_weight {
        in_range(loaded, "ppr_search.title_edge_weight", w, (0.0, inf), true)?;
    }
    if let Some(w) = ps.title_seed_weight {
        in_range(loaded, "ppr_search.title_seed_weight", w, (0.0, inf), false)?;
    }
    if let Some(t) = ps.duplicate_similarity {
        in_range(loaded, "ppr_search.duplicate_similarity", t, (0.0, 1.0), true)?;
    }
    in_range(loaded, "ppr_search.fusion_k", ps.fusion_k, (0.0, inf), true)
}

/// Settings keys that name prompt files, with their values.
fn prompt_settings(s: &super::Settings) -> [(&'static str, &str); 15] {
    [
        ("extract_graph.prompt", &s.extract_graph.prompt),
        ("summarize_descriptions.prompt", &s.summarize_descriptions.prompt),
        ("extract_claims.prompt", &s.extract_claims.prompt),
        ("community_reports.graph_prompt", &s.community_reports.graph_prompt),
        ("community_reports.text_prompt", &s.community_reports.text_prompt),
        ("local_search.prompt", &s.local_search.prompt),
        ("global_search.map_prompt", &s.global_search.map_prompt),
        ("global_search.reduce_prompt", &s.global_search.reduce_prompt),
        ("global_search.knowledge_prompt", &s.global_search.knowledge_prompt),
        ("drift_search.prompt", &s.drift_search.prompt),
        ("drift_search.reduce_prompt", &s.drift_search.reduce_prompt),
        ("basic_search.prompt", &s.basic_search.prompt),
        ("keyword_search.keywords_prompt", &s.keyword_search.keywords_prompt),
        ("keyword_search.prompt", &s.keyword_search.prompt),
        ("ppr_search.prompt", &s.ppr_search.prompt),
    ]
}

/// A prompt file that exists but holds nothing would send the model an
/// empty request: an error naming the setting (a missing file falls back
/// to the built-in prompt where it is used).
pub(super) fn prompt_files(loaded: &LoadedSettings, root: &std::path::Path) -> Result<(), ConfigError> {
    for (key, rel) in prompt_settings(&loaded.settings) {
        let path = root.join(rel);
        if std::fs::read_to_string(&path).is_ok_and(|t| t.trim().is_empty()) {
            return Err(loaded.error_at(key, format!("the prompt file {} is empty", path.display())));
        }
    }
    Ok(())
}

/// Servers whose `/rerank` a rerank model is called at (Cohere's and Jina's
/// shape: query, documents, top_n → index, relevance_score).
pub(super) const RERANK_PROVIDERS: [&str; 6] =
    ["cohere", "jina", "vllm", "hosted_vllm", "infinity", "openai_compatible"];

/// The rerank models (a provider with `/rerank`, an address) and the query
/// setting that names one.
fn check_rerank(loaded: &LoadedSettings) -> Result<(), ConfigError> {
    let s = &loaded.settings;
    for (id, model) in &s.rerank_models {
        let path = format!("rerank_models.{id}");
        check_model(loaded, &path, model)?;
        let provider = model.model_provider.as_str();
        if !RERANK_PROVIDERS.contains(&provider) {
            let hint = did_you_mean(provider, RERANK_PROVIDERS.iter().copied());
            return Err(loaded.error_at(
                &format!("{path}.model_provider"),
                format!(
                    "`{provider}` is not a rerank provider graphrag-rs can call: one of {}{hint}",
                    RERANK_PROVIDERS.join(", ")
                ),
            ));
        }
        if let Some(base) = &model.api_base {
            crate::api_base::parse(base).map_err(|e| loaded.error_at(&format!("{path}.api_base"), e))?;
        } else if !matches!(provider, "cohere" | "jina") {
            return Err(loaded.error_at(
                &format!("{path}.api_base"),
                format!(
                    "a `{provider}` rerank model needs api_base (the server's address, e.g. http://localhost:8000/v1)"
                ),
            ));
        }
    }
    if let Some(id) = &s.rerank.model_id {
        model_ref(loaded, "rerank.model_id", id, &s.rerank_models)?;
    }
    at_least_one(loaded, "rerank.candidates", u64::from(s.rerank.candidates), "")?;
    // Cohere's limit per request; more would be one request it refuses.
    if s.rerank.candidates > MAX_RERANK_CANDIDATES {
        return Err(loaded.error_at(
            "rerank.candidates",
            format!("{} is not a valid value: it must be at most {MAX_RERANK_CANDIDATES}", s.rerank.candidates),
        ));
    }
    Ok(())
}

/// The most documents one rerank request carries.
const MAX_RERANK_CANDIDATES: u32 = 1000;

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
