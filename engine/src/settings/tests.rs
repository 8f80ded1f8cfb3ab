//! Settings parsing: errors that name the place, GraphRAG 3.3 projects as they are.

use super::*;

fn parse_str(text: &str) -> Result<LoadedSettings, ConfigError> {
    parse(Path::new("settings.yaml"), text.to_string())
}

#[test]
fn empty_file_gives_defaults() {
    let s = parse_str("").unwrap().settings;
    let mut defaults = Settings::default();
    defaults.resolve();
    assert_eq!(s, defaults);
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
fn embedding_precision_parses_into_an_enum_and_refuses_the_rest() {
    let at = |p: &str| {
        format!("embedding_models:\n  default_embedding_model:\n    model_provider: local\n    precision: {p}\n")
    };
    let all =
        [("f32", Precision::F32), ("int8", Precision::Int8), ("bf16", Precision::Bf16), ("auto", Precision::Auto)];
    for (text, want) in all {
        let s = parse_str(&at(text)).unwrap().settings;
        assert_eq!(s.embedding_models["default_embedding_model"].precision, want);
    }
    assert_eq!(parse_str("").unwrap().settings.embedding_models["default_embedding_model"].precision, Precision::Auto);
    for bad in ["int4", "fp32", "fp16"] {
        let err = parse_str(&at(bad)).unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
        assert_eq!(err.path, "embedding_models.default_embedding_model.precision", "{err}");
        let text = err.to_string();
        assert!(["f32", "int8", "bf16", "auto"].iter().all(|p| text.contains(p)), "{err}");
    }
    let remote = "embedding_models:\n  e:\n    model_provider: openai\n    model: text-embedding-3-small\n    api_key: k\n    precision: int8\n";
    let err = parse_str(remote).unwrap_err();
    assert_eq!((err.line, err.path.as_str()), (Some(6), "embedding_models.e.precision"), "{err}");
    assert!(err.to_string().contains("model_provider: local"), "{err}");
}

#[test]
fn malformed_yaml_names_line() {
    let err = parse_str("chunking:\n  size: 10\n bad indent: [\n").unwrap_err();
    assert!(err.line.is_some(), "{err}");
}

#[test]
fn secrets_never_print() {
    let s =
        parse_str("completion_models:\n  default_completion_model:\n    api_key: sk-very-secret\n").unwrap().settings;
    let m = &s.completion_models["default_completion_model"];
    assert_eq!(m.api_key.expose(), "sk-very-secret");
    assert!(!format!("{s:?}").contains("sk-very-secret"));
    assert!(!serde_json::to_string(&s).unwrap().contains("sk-very-secret"));
}

// ---------------------------------------------------------------------------
// A Microsoft GraphRAG 3.3 project as it is (tests/fixtures, see SOURCE.md)
// ---------------------------------------------------------------------------

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures").join(name)
}

/// A fixture's settings with `${GRAPHRAG_API_KEY}` substituted.
fn load_fixture(file: &Path) -> LoadedSettings {
    let raw = std::fs::read_to_string(file).unwrap();
    let vars = BTreeMap::from([("GRAPHRAG_API_KEY".to_string(), "sk-fixture".to_string())]);
    let text = env::substitute(&raw, file, &vars, |_| None).unwrap();
    parse(file, text).unwrap_or_else(|e| panic!("{e}"))
}

/// Every key path of a YAML document with its value (sections included).
fn key_paths(value: &serde_yaml_ng::Value, prefix: &str, out: &mut Vec<(String, serde_yaml_ng::Value)>) {
    if let serde_yaml_ng::Value::Mapping(map) = value {
        for (k, v) in map {
            let key = k.as_str().expect("string keys");
            let path = if prefix.is_empty() { key.to_string() } else { format!("{prefix}.{key}") };
            out.push((path.clone(), v.clone()));
            key_paths(v, &path, out);
        }
    }
}

#[test]
fn graphrag_init_project_parses_with_nothing_ignored() {
    let loaded = load_fixture(&fixture("graphrag-3.3.0-init/settings.yaml"));
    let s = &loaded.settings;
    assert!(loaded.ignored.is_empty(), "{:?}", loaded.ignored);
    assert_eq!(loaded.ignored_warning(), None);
    let chat = &s.completion_models["default_completion_model"];
    assert_eq!((chat.model.as_str(), chat.api_key.expose()), ("gpt-4.1", "sk-fixture"));
    assert_eq!(chat.retry_policy().max_retries, 7, "GraphRAG's exponential_backoff default");
    assert_eq!(s.embedding_models["default_embedding_model"].model, "text-embedding-3-large");
    assert_eq!((s.vector_store.kind.as_str(), s.vector_store.db_uri.as_deref()), ("lancedb", Some("output/lancedb")));
    assert_eq!(s.cache.dir(), "cache");
    assert_eq!(s.drift_search.reduce_prompt, "prompts/drift_search_reduce_prompt.txt");
}

/// Every key of GraphRAG 3.3.0's fully resolved configuration is either
/// honoured (the parsed settings hold its value at the same path) or
/// listed in the one warning; none is rejected.
#[test]
fn graphrag_full_config_every_key_is_honoured_or_listed_as_ignored() {
    let file = fixture("graphrag-3.3.0-full-config.yaml");
    let loaded = load_fixture(&file);
    let yaml: serde_yaml_ng::Value = serde_yaml_ng::from_str(&loaded.text).unwrap();
    let mut keys = Vec::new();
    key_paths(&yaml, "", &mut keys);
    assert!(keys.len() > 200, "{} keys", keys.len());
    let parsed = serde_json::to_value(&loaded.settings).unwrap();
    let ignored: Vec<&str> = loaded.ignored.iter().map(|k| k.path.as_str()).collect();
    let mut honoured = 0;
    for (path, value) in &keys {
        if ignored.iter().any(|i| path == i || path.starts_with(&format!("{i}."))) {
            continue;
        }
        let got = path.split('.').try_fold(&parsed, |v, k| v.get(k));
        let got = got.unwrap_or_else(|| panic!("`{path}` is neither honoured nor listed as ignored"));
        if path.ends_with(".api_key") {
            assert_eq!(got, "***", "secrets are kept, not shown");
        } else if !value.is_mapping() {
            let expected: serde_json::Value = serde_json::to_value(value).unwrap();
            let same = match (got.as_f64(), expected.as_f64()) {
                (Some(a), Some(b)) => a == b,
                _ => *got == expected,
            };
            assert!(same, "`{path}`: settings hold {got}, the file says {expected}");
        }
        honoured += 1;
    }
    assert!(honoured > 150, "{honoured} honoured");
    // The ignored keys, each with its line, in one warning.
    for k in &loaded.ignored {
        assert!(k.line.is_some(), "{k:?}");
    }
    let warning = loaded.ignored_warning().unwrap();
    assert!(
        warning.contains("graphrag-3.3.0-full-config.yaml:12 `completion_models.default_completion_model.metrics`"),
        "{warning}"
    );
    assert!(warning.contains(":34 `async_mode`"), "{warning}");
    assert!(warning.contains("`extract_graph_nlp.text_analyzer.noun_phrase_grammars`"), "{warning}");
    assert!(warning.contains("`update_output_storage`"), "{warning}");
    assert_eq!(warning.matches("GraphRAG keys have no effect").count(), 1);
    // Keys with a meaning here are honoured, not just stored.
    let s = &loaded.settings;
    assert_eq!(s.completion_models["default_completion_model"].concurrency(), 25, "top-level concurrent_requests");
    assert_eq!(s.embedding_models["default_embedding_model"].batch_size, 16, "embed_text.batch_size");
    assert_eq!(s.embedding_models["default_embedding_model"].batch_max_tokens, 8191);
    assert_eq!(s.extract_graph.model_instance_name, "extract_graph");
    assert_eq!(s.drift_search.concurrency, 32);
    assert_eq!(s.drift_search.local_search_top_k_mapped_entities, 10);
}

#[test]
fn graphrag_keys_with_a_meaning_change_what_runs() {
    let text = "concurrent_requests: 7\ncompletion_models:\n  default_completion_model:\n    call_args: {seed: 42, max_completion_tokens: 900}\n    retry: {type: exponential_backoff, max_retries: 3, base_delay: 3.0, max_delay: 20}\n    rate_limit: {period_in_seconds: 10, requests_per_period: 5, tokens_per_period: 5000}\nembedding_models:\n  default_embedding_model:\n    model: e\n    concurrent_requests: 2\nembed_text:\n  batch_size: 4\n  batch_max_tokens: 1000\n";
    let s = parse_str(text).unwrap().settings;
    let chat = &s.completion_models["default_completion_model"];
    assert_eq!(chat.concurrency(), 7);
    assert_eq!(chat.call_args["seed"], 42);
    let p = chat.retry_policy();
    assert_eq!((p.max_retries, p.first_delay, p.factor, p.max_delay), (3, 3.0, 3.0, 20.0));
    assert_eq!(chat.request_limit(), Some(RateLimit { limit: 5, period_seconds: 10 }));
    assert_eq!(chat.token_limit(), Some(RateLimit { limit: 5000, period_seconds: 10 }));
    let embed = &s.embedding_models["default_embedding_model"];
    assert_eq!((embed.concurrency(), embed.batch_size, embed.batch_max_tokens), (2, 4, 1000));
}

#[test]
fn unimplemented_backends_are_errors_that_name_key_and_alternatives() {
    for (text, path, line) in [
        ("input_storage:\n  type: cosmosdb\n", "input_storage.type", 2),
        ("reporting:\n  type: cosmosdb\n", "reporting.type", 2),
        ("vector_store:\n  type: cosmosdb\n", "vector_store.type", 2),
        ("vector_store:\n  type: azure_ai_search\n  url: https://x\n", "vector_store.type", 2),
        ("table_provider:\n  type: cosmosdb\n", "table_provider.type", 2),
        ("cache:\n  type: sqlite\n", "cache.type", 2),
        (
            "completion_models:\n  default_completion_model:\n    auth_method: azure_managed_identity\n",
            "completion_models.default_completion_model.auth_method",
            3,
        ),
        (
            "completion_models:\n  default_completion_model:\n    type: mock\n",
            "completion_models.default_completion_model.type",
            3,
        ),
    ] {
        let err = parse_str(text).unwrap_err();
        let msg = err.to_string();
        assert_eq!((err.path.as_str(), err.line), (path, Some(line)), "{msg}");
        assert!(msg.contains("not implemented") && msg.contains("supported:"), "{msg}");
    }
    let err = parse_str("workflows: [load_input_documents, create_base_text_units]\n").unwrap_err();
    assert!(err.to_string().contains("--method path/to/it.yaml"), "{err}");
    // lancedb, GraphRAG's default, is accepted.
    assert!(parse_str("vector_store:\n  type: lancedb\n  db_uri: output/lancedb\n").is_ok());
}

#[test]
fn graphrag_value_rules_are_checked() {
    let model = |body: &str| format!("completion_models:\n  default_completion_model:\n{body}");
    let err = parse_str(&model("    retry:\n      base_delay: 0.5\n")).unwrap_err();
    assert!(err.to_string().contains("greater than 1.0"), "{err}");
    let err = parse_str(&model("    retry:\n      type: linear\n")).unwrap_err();
    assert!(err.to_string().contains("exponential_backoff"), "{err}");
    let err = parse_str(&model("    rate_limit:\n      period_in_seconds: 60\n")).unwrap_err();
    assert!(err.to_string().contains("requests_per_period or tokens_per_period"), "{err}");
    let err =
        parse_str(&model("    requests_per_minute: 10\n    rate_limit:\n      requests_per_period: 5\n")).unwrap_err();
    assert!(err.to_string().contains("keep one"), "{err}");
    let err = parse_str("extract_graph:\n  model_instance_name: ../x\n").unwrap_err();
    assert_eq!(err.line, Some(2), "{err}");
    let err = parse_str("vector_store:\n  index_schema:\n    entity_descriptions: {}\n").unwrap_err();
    assert!(err.to_string().contains("did you mean `entity_description`"), "{err}");
    let err = parse_str("cache:\n  base_dir: a\n  storage:\n    base_dir: b\n").unwrap_err();
    assert!(err.to_string().contains("keep one"), "{err}");
    // A typo stays an error even among GraphRAG's keys.
    let err = parse_str(&model("    retyr:\n      type: exponential_backoff\n")).unwrap_err();
    assert!(err.to_string().contains("did you mean `retry`"), "{err}");
}

#[test]
fn settings_json_is_read_and_its_errors_have_lines() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("settings.json"),
        "{\n  \"chunking\": {\n    \"size\": 300,\n    \"overlap\": 30\n  },\n  \"concurrent_requests\": 4\n}\n",
    )
    .unwrap();
    let loaded = load(dir.path()).unwrap();
    assert_eq!(loaded.settings.chunking.size, 300);
    assert_eq!(loaded.settings.completion_models["default_completion_model"].concurrency(), 4);
    std::fs::write(dir.path().join("settings.json"), "{\n  \"chunking\": {\n    \"sise\": 300\n  }\n}\n").unwrap();
    let err = load(dir.path()).unwrap_err();
    assert_eq!(err.line, Some(3), "{err}");
    assert!(err.to_string().contains("did you mean `size`"), "{err}");
    std::fs::write(
        dir.path().join("settings.json"),
        "{\n  \"chunking\": {\n    \"size\": 10,\n    \"overlap\": 20\n  }\n}\n",
    )
    .unwrap();
    let err = load(dir.path()).unwrap_err();
    assert_eq!((err.path.as_str(), err.line), ("chunking.overlap", Some(4)), "{err}");
    std::fs::write(dir.path().join("settings.json"), "{\n  \"chunking\": {\n    \"size\": 10,\n  }\n}\n").unwrap();
    let err = load(dir.path()).unwrap_err();
    assert_eq!(err.line, Some(4), "malformed JSON names its line: {err}");
    // settings.yml is found too, before settings.json (GraphRAG's order).
    std::fs::write(dir.path().join("settings.yml"), "chunking:\n  size: 500\n").unwrap();
    assert_eq!(load(dir.path()).unwrap().settings.chunking.size, 500);
}

#[test]
fn nonsense_values_are_rejected_with_file_line_and_key() {
    let model = |line: &str| format!("completion_models:\n  default_completion_model:\n    model: m\n    {line}\n");
    let key = |k: &str| format!("completion_models.default_completion_model.{k}");
    let cases: Vec<(String, String, usize)> = vec![
        (model("request_timeout: 0"), key("request_timeout"), 4),
        (model("request_timeout: -5"), key("request_timeout"), 4),
        (model("request_timeout: .nan"), key("request_timeout"), 4),
        (model("api_base: not a url"), key("api_base"), 4),
        (model("concurrent_requests: 0"), key("concurrent_requests"), 4),
        (model("requests_per_minute: 0"), key("requests_per_minute"), 4),
        (model("tokens_per_minute: 0"), key("tokens_per_minute"), 4),
        (model("temperature: 99"), key("temperature"), 4),
        (model("model_provider: skynet"), key("model_provider"), 4),
        (model("model_provider: local"), key("model_provider"), 4),
        (model("max_retry_time: 0"), key("max_retry_time"), 4),
        (model("max_retry_wait: .inf"), key("max_retry_wait"), 4),
        (model("max_consecutive_failures: 0"), key("max_consecutive_failures"), 4),
        ("vector_store:\n  ann_ef_search: 0\n".into(), "vector_store.ann_ef_search".into(), 2),
        ("extract_graph:\n  entity_types: []\n".into(), "extract_graph.entity_types".into(), 2),
        ("summarize_descriptions:\n  max_length: 0\n".into(), "summarize_descriptions.max_length".into(), 2),
        ("community_reports:\n  max_length: 0\n".into(), "community_reports.max_length".into(), 2),
        ("prune_graph:\n  min_edge_weight_pct: 150\n".into(), "prune_graph.min_edge_weight_pct".into(), 2),
        // The pruning options are declared once (operations' `nlp_prune_options!`),
        // and a bad value of each still names its file, line and full key.
        ("prune_graph:\n  lcc_only: true\n  min_node_freq: lots\n".into(), "prune_graph.min_node_freq".into(), 3),
        ("prune_graph:\n  max_node_degree_std: high\n".into(), "prune_graph.max_node_degree_std".into(), 2),
        ("prune_graph:\n  remove_ego_nodes: 3\n".into(), "prune_graph.remove_ego_nodes".into(), 2),
        ("local_search:\n  text_unit_prop: 2.5\n".into(), "local_search.text_unit_prop".into(), 2),
        (
            "local_search:\n  text_unit_prop: 0.7\n  community_prop: 0.5\n".into(),
            "local_search.community_prop".into(),
            3,
        ),
        ("failures:\n  tolerated_fraction: 1.5\n".into(), "failures.tolerated_fraction".into(), 2),
        ("chunking:\n  size: 500\n  type: words\n".into(), "chunking.type".into(), 3),
        ("resolve_entities:\n  mode: rulez\n".into(), "resolve_entities.mode".into(), 2),
        ("community_reports:\n  mode: extract\n".into(), "community_reports.mode".into(), 2),
        ("update:\n  community_reports: some\n".into(), "update.community_reports".into(), 2),
        ("embed_text:\n  long_text: cut\n".into(), "embed_text.long_text".into(), 2),
        ("embed_text:\n  names: [text_unit_text, entity_desc]\n".into(), "embed_text.names[1]".into(), 2),
        (
            "extract_graph_nlp:\n  text_analyzer:\n    extractor_type: syntactic_parser\n".into(),
            "extract_graph_nlp.text_analyzer.extractor_type".into(),
            3,
        ),
    ];
    for (text, key, line) in cases {
        let err = parse_str(&text).expect_err(&text);
        assert_eq!((err.path.as_str(), err.line), (key.as_str(), Some(line)), "{err}");
        assert!(err.to_string().starts_with(&format!("settings.yaml:{line}")), "{err}");
    }
    let skynet = parse_str(&model("model_provider: skynet")).unwrap_err().to_string();
    assert!(skynet.contains("openai") && skynet.contains("skynet"), "{skynet}");
    let typo = parse_str("prune_graph:\n  min_node_frq: 1\n").unwrap_err().to_string();
    assert!(typo.starts_with("settings.yaml:2") && typo.contains("did you mean `min_node_freq`"), "{typo}");
    let mode = parse_str("resolve_entities:\n  mode: rulez\n").unwrap_err().to_string();
    assert!(mode.contains("unknown variant `rulez`") && mode.contains("did you mean `rules`"), "{mode}");
    let rpm = parse_str(&model("requests_per_minute: 0")).unwrap_err().to_string();
    assert!(rpm.contains("leave it out for no limit"), "{rpm}");
    // Sane values still pass, a local embedding model included.
    let ok = "completion_models:\n  default_completion_model:\n    model_provider: ollama\n    api_base: http://localhost:11434/v1\n    temperature: 0.7\n    requests_per_minute: 60\nlocal_search:\n  text_unit_prop: 0.6\n  community_prop: 0.4\nfailures:\n  tolerated_fraction: 0.05\n";
    parse_str(ok).unwrap();
}

#[test]
fn a_bad_file_pattern_ends_with_its_one_line_cause() {
    let err = parse_str("input:\n  file_pattern: \"(\"\n").unwrap_err();
    let msg = err.to_string();
    assert_eq!(msg.lines().count(), 1, "{msg}");
    assert!(msg.ends_with("unclosed group"), "{msg}");
    assert_eq!(err.line, Some(2));
}

#[test]
fn an_empty_prompt_file_is_an_error_naming_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("settings.yaml"), "extract_graph:\n  prompt: prompts/mine.txt\n").unwrap();
    std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
    std::fs::write(dir.path().join("prompts/mine.txt"), " \n").unwrap();
    let err = load(dir.path()).unwrap_err();
    assert_eq!((err.path.as_str(), err.line), ("extract_graph.prompt", Some(2)), "{err}");
    assert!(err.to_string().contains("is empty"), "{err}");
    std::fs::write(dir.path().join("prompts/mine.txt"), "Extract {{ input_text }}").unwrap();
    load(dir.path()).unwrap();
}

#[test]
fn retrieval_settings_are_checked() {
    let s = parse_str("").unwrap().settings;
    assert!(s.basic_search.hybrid);
    assert_eq!((s.ppr_search.walk, s.ppr_search.damping, s.ppr_search.passage_node_weight), (PprWalk::Ppr, 0.5, 0.05));
    let err = parse_str("ppr_search:\n  walk: pagerank\n").unwrap_err();
    assert_eq!((err.line, err.path.as_str()), (Some(2), "ppr_search.walk"), "{err}");
    assert!(err.to_string().contains("ppr") && err.to_string().contains("nhop"), "{err}");
    assert_eq!(parse_str("ppr_search:\n  walk: nhop\n").unwrap().settings.ppr_search.walk, PprWalk::Nhop);
    for (text, path) in [
        ("ppr_search:\n  damping: 1.0\n", "ppr_search.damping"),
        ("ppr_search:\n  damping: 0\n", "ppr_search.damping"),
        ("basic_search:\n  fusion_k: 0\n", "basic_search.fusion_k"),
        ("basic_search:\n  k: 0\n", "basic_search.k"),
        ("ppr_search:\n  passage_node_weight: -1\n", "ppr_search.passage_node_weight"),
        ("ppr_search:\n  synonym_threshold: 1.5\n", "ppr_search.synonym_threshold"),
        ("ppr_search:\n  link_threshold: 0\n", "ppr_search.link_threshold"),
        ("ppr_search:\n  specificity: idf\n", "ppr_search.specificity"),
        ("ppr_search:\n  title_edge_weight: 0\n", "ppr_search.title_edge_weight"),
        ("ppr_search:\n  walk_head: -1\n", "ppr_search.walk_head"),
        ("ppr_search:\n  title_seed_weight: -0.5\n", "ppr_search.title_seed_weight"),
        ("ppr_search:\n  duplicate_similarity: 0\n", "ppr_search.duplicate_similarity"),
        ("ppr_search:\n  duplicate_similarity: 1.2\n", "ppr_search.duplicate_similarity"),
        ("ppr_search:\n  bridge_units: -1\n", "ppr_search.bridge_units"),
    ] {
        assert_eq!(parse_str(text).unwrap_err().path, path, "{text}");
    }
    assert_eq!(
        parse_str("ppr_search:\n  synonym_threshold: 0.8\n").unwrap().settings.ppr_search.synonym_threshold,
        Some(0.8)
    );
    assert_eq!(parse_str("").unwrap().settings.ppr_search.link_threshold, None);
    // Left null, the title-dependent options follow whether documents have titles.
    let ps = parse_str("").unwrap().settings.ppr_search;
    let plain = PprTuning {
        specificity: PprSpecificity::Entities,
        title_edge_weight: 1.0,
        title_seed_weight: 0.0,
        walk_head: 0,
        bridge_units: 0,
    };
    assert_eq!(ps.tuning(false), plain);
    let titled = PprTuning {
        specificity: PprSpecificity::Words,
        title_edge_weight: 5.0,
        title_seed_weight: 0.3,
        walk_head: 4,
        bridge_units: 4,
    };
    assert_eq!(ps.tuning(true), titled);
    assert_eq!(ps.duplicate_similarity, Some(0.95));
    // Set, they are kept either way.
    let ps = parse_str(
        "ppr_search:\n  specificity: words\n  title_edge_weight: 5\n  walk_head: 2\n  bridge_units: 0\n  duplicate_similarity: null\n",
    )
    .unwrap()
    .settings
    .ppr_search;
    let set = PprTuning {
        specificity: PprSpecificity::Words,
        title_edge_weight: 5.0,
        title_seed_weight: 0.0,
        walk_head: 2,
        bridge_units: 0,
    };
    assert_eq!(ps.tuning(false), set);
    assert_eq!(ps.tuning(true), PprTuning { title_seed_weight: 0.3, ..set });
    assert_eq!(ps.duplicate_similarity, None);
    // The specificity is an enum parsed once: a misspelt value names its line and key.
    let err = parse_str("ppr_search:\n  walk: ppr\n  specificity: word\n").unwrap_err();
    assert_eq!((err.line, err.path.as_str()), (Some(3), "ppr_search.specificity"), "{err}");
    assert!(err.to_string().contains("did you mean `words`"), "{err}");
    assert_eq!(
        parse_str("ppr_search:\n  link_threshold: 0.7\n").unwrap().settings.ppr_search.link_threshold,
        Some(0.7)
    );
}

#[test]
fn query_and_serve_settings_are_checked_with_their_lines() {
    let s = parse_str("").unwrap().settings;
    assert_eq!((s.query.request_timeout, s.query.max_retry_time), (60.0, 20.0));
    assert_eq!(s.serve.cors_origins, ["*"]);
    let text = "query:\n  max_retry_time: 5\nserve:\n  header_read_timeout: 2\n  cors_origins: [\"http://localhost:5173\", \"https://ui.example.org:8443\"]\n";
    let s = parse_str(text).unwrap().settings;
    assert_eq!((s.query.max_retry_time, s.serve.header_read_timeout, s.serve.cors_origins.len()), (5.0, 2.0, 2));
    for (text, path, line) in [
        ("query:\n  request_timeout: 0\n", "query.request_timeout", 2),
        ("query:\n  max_retry_time: -1\n", "query.max_retry_time", 2),
        ("serve:\n  header_read_timeout: .nan\n", "serve.header_read_timeout", 2),
        ("serve:\n  body_read_timeout: 0\n", "serve.body_read_timeout", 2),
        ("serve:\n  send_timeout: -2\n", "serve.send_timeout", 2),
        ("serve:\n  poll_seconds: 0\n", "serve.poll_seconds", 2),
        ("serve:\n  max_connections: 0\n", "serve.max_connections", 2),
        ("serve:\n  max_connections_per_client: 0\n", "serve.max_connections_per_client", 2),
        ("serve:\n  max_pending_connections_per_client: 0\n", "serve.max_pending_connections_per_client", 2),
        ("serve:\n  body_min_rate: 0\n", "serve.body_min_rate", 2),
        ("serve:\n  query_timeout: 0\n", "serve.query_timeout", 2),
        ("serve:\n  max_header_bytes: 1024\n", "serve.max_header_bytes", 2),
        ("serve:\n  cors_origins:\n    - \"*\"\n    - http://localhost:5173/\n", "serve.cors_origins[1]", 4),
        ("serve:\n  cors_origins: [localhost]\n", "serve.cors_origins[0]", 2),
    ] {
        let err = parse_str(text).unwrap_err();
        assert_eq!((err.path.as_str(), err.line), (path, Some(line)), "{text}: {err}");
    }
    let err = parse_str("serve:\n  max_conections: 3\n").unwrap_err();
    assert!(err.to_string().contains("max_connections"), "did you mean: {err}");
}

#[test]
fn storage_sections_are_checked_key_by_key() {
    for (text, path, line, want) in [
        ("output_storage:\n  type: blob\n  base_dir: output\n", "output_storage.container_name", 1, "is required"),
        ("cache:\n  storage:\n    type: s3\n    container_name: c\n", "cache.storage.container_name", 4, "`type: s3`"),
        ("input_storage:\n  type: gcs\n  bucket: docs\n  region: x\n", "input_storage.region", 4, "base_dir, bucket"),
        (
            "reporting:\n  type: s3\n  bucket: logs\n  endpoint_url: minio:9000\n",
            "reporting.endpoint_url",
            4,
            "not an http:// or https:// URL",
        ),
        ("output_storage:\n  type: bob\n", "output_storage.type", 2, "did you mean `blob`"),
        (
            "output_storage:\n  type: blob\n  container_name: ab\n",
            "output_storage.container_name",
            3,
            "`ab` is not a valid blob container name: Azure's are 3-63 characters",
        ),
    ] {
        let err = parse_str(text).unwrap_err();
        let msg = err.to_string();
        assert_eq!((err.path.as_str(), err.line), (path, Some(line)), "{msg}");
        assert!(msg.contains(want), "{msg}");
    }
    // Complete remote sections (graphrag init's blob keys; S3's) are read by the storage
    // layer, reporting's too (the run's log is uploaded there).
    parse_str("output_storage:\n  type: blob\n  connection_string: \"AccountName=a;AccountKey=k\"\n  container_name: graphrag\n  base_dir: output\n").unwrap();
    parse_str("input_storage:\n  base_dir: input\n  type: s3\n  bucket: docs\n  region: eu-west-1\n").unwrap();
    parse_str("reporting:\n  type: gcs\n  bucket: logs\n  base_dir: logs\n").unwrap();
    // update_output_storage is never read: any type `graphrag init` and a type switch give is
    // accepted, and named (at its line) in the one ignored-keys warning, its secret not shown.
    for kind in ["blob", "cosmosdb", "s3"] {
        let text = format!("update_output_storage:\n  type: {kind}\n  connection_string: \"AccountName=a;AccountKey=k\"\n  container_name: c\n");
        let loaded = parse_str(&text).unwrap_or_else(|e| panic!("{kind}: {e}"));
        let warning = loaded.ignored_warning().unwrap();
        assert!(warning.contains("settings.yaml:1 `update_output_storage`"), "{warning}");
        assert!(!warning.contains("AccountKey=k"), "{warning}");
    }
    // Remote keys under `type: file` are listed as ignored, secrets included (by name only).
    let loaded = parse_str("output_storage:\n  type: file\n  connection_string: s3kr1t\n  bucket: b\n").unwrap();
    let warning = loaded.ignored_warning().unwrap();
    assert!(warning.contains("`output_storage.connection_string`") && warning.contains("`output_storage.bucket`"));
    assert!(!warning.contains("s3kr1t") && !format!("{:?}", loaded.settings).contains("s3kr1t"), "{warning}");
}

#[test]
fn a_working_copy_of_a_bucket_root_keeps_file_storages_in_the_bucket() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".graphrag-rs")).unwrap();
    std::fs::write(dir.path().join(REMOTE_ROOT_FILE), "s3://projects/team/carol\n").unwrap();
    let text = "input_storage:\n  base_dir: ./docs\noutput_storage:\n  type: blob\n  container_name: idx\n  base_dir: out\ncache:\n  type: json\n  base_dir: answers\n";
    std::fs::write(dir.path().join("settings.yaml"), text).unwrap();
    let loaded = load(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let s = &loaded.settings;
    let in_bucket = |prefix: &str| {
        StorageTarget::Remote(RemoteStorage {
            service: RemoteService::S3 { bucket: "projects".into(), endpoint_url: None, region: None },
            prefix: prefix.into(),
        })
    };
    assert_eq!(s.input_storage.target().unwrap(), in_bucket("team/carol/docs"));
    assert_eq!(s.reporting.target().unwrap(), in_bucket("team/carol/logs"));
    assert_eq!(s.cache.storage.as_ref().unwrap().target().unwrap(), in_bucket("team/carol/answers"));
    assert_eq!(s.output_storage.kind, StorageType::Blob, "a storage of its own type stays where it is");
    assert_eq!(loaded.file, Path::new("s3://projects/team/carol/settings.yaml"), "messages name the URL");

    // A folder above the root is nowhere in a bucket: its line is named.
    std::fs::write(dir.path().join("settings.yaml"), "reporting:\n  base_dir: ../logs\n").unwrap();
    let err = load(dir.path()).unwrap_err();
    assert_eq!((err.path.as_str(), err.line), ("reporting.base_dir", Some(2)), "{err}");
    assert!(err.to_string().starts_with("s3://projects/team/carol/settings.yaml:2"), "{err}");
    assert!(err.message.contains("outside the project root"), "{err}");
}

/// Every setting given in seconds, as a dotted path.
const DURATION_KEYS: [&str; 13] = [
    "completion_models.default_completion_model.request_timeout",
    "completion_models.default_completion_model.retry_base_delay",
    "completion_models.default_completion_model.max_retry_wait",
    "completion_models.default_completion_model.max_retry_time",
    "embedding_models.default_embedding_model.retry.base_delay",
    "embedding_models.default_embedding_model.retry.max_delay",
    "query.request_timeout",
    "query.max_retry_time",
    "serve.header_read_timeout",
    "serve.body_read_timeout",
    "serve.send_timeout",
    "serve.query_timeout",
    "serve.poll_seconds",
];

/// settings.yaml setting the dotted `path` to `value` (NaN and the
/// infinities as YAML writes them).
fn yaml_setting(path: &str, value: f64) -> String {
    let mut text = String::new();
    let keys: Vec<&str> = path.split('.').collect();
    for (depth, key) in keys.iter().enumerate() {
        text += &format!("{}{key}:", "  ".repeat(depth));
        text += if depth + 1 < keys.len() { "\n" } else { " " };
    }
    let value = match value {
        v if v.is_nan() => ".nan".to_string(),
        v if v == f64::INFINITY => ".inf".to_string(),
        v if v == f64::NEG_INFINITY => "-.inf".to_string(),
        v => format!("{v:?}"),
    };
    text + &value + "\n"
}

/// The durations that loaded settings give, in seconds, converted as the
/// program converts them.
fn converted_durations(s: &Settings) -> Vec<std::time::Duration> {
    let mut seconds = vec![
        s.query.request_timeout,
        s.query.max_retry_time,
        s.serve.header_read_timeout,
        s.serve.body_read_timeout,
        s.serve.send_timeout,
        s.serve.query_timeout,
        s.serve.poll_seconds,
    ];
    for m in s.completion_models.values().chain(s.embedding_models.values()) {
        seconds.extend([
            m.request_timeout,
            m.max_retry_time,
            m.retry_policy().max_delay,
            m.retry_policy().wait(1, 0.5),
        ]);
    }
    seconds.into_iter().map(std::time::Duration::from_secs_f64).collect()
}

#[test]
fn a_duration_beyond_a_year_names_its_file_line_and_key() {
    // Issue #47: 1e20 s is finite but beyond a Duration (about 1.8e19 s):
    // it was accepted, then panicked where it became one.
    for path in DURATION_KEYS {
        let text = yaml_setting(path, 1e20);
        let err = parse_str(&text).expect_err(path);
        assert_eq!(err.path, path, "{err}");
        assert_eq!(err.line, Some(path.split('.').count()), "{err}");
        assert!(err.to_string().starts_with(&format!("settings.yaml:{}", path.split('.').count())), "{err}");
        assert!(err.message.contains("at most 31536000"), "{err}");
        let year = parse_str(&yaml_setting(path, MAX_SECONDS)).unwrap_or_else(|e| panic!("{e}"));
        assert!(converted_durations(&year.settings).iter().all(|d| d.as_secs_f64() <= MAX_SECONDS));
    }
    let text = "completion_models:\n  default_completion_model:\n    rate_limit:\n      period_in_seconds: 4000000000\n      requests_per_period: 5\n";
    let err = parse_str(text).unwrap_err();
    assert_eq!(
        (err.path.as_str(), err.line),
        ("completion_models.default_completion_model.rate_limit.period_in_seconds", Some(4)),
        "{err}"
    );
}

#[test]
fn duration_of_seconds_never_panics() {
    use std::time::Duration;
    assert_eq!(duration_of_seconds(1.5), Duration::from_millis(1500));
    assert_eq!(duration_of_seconds(1e20), Duration::MAX);
    assert_eq!(duration_of_seconds(f64::INFINITY), Duration::MAX);
    assert_eq!(duration_of_seconds(f64::NAN), Duration::ZERO);
    assert_eq!(duration_of_seconds(-1.0), Duration::ZERO);
}

proptest::proptest! {
    /// Any number in any duration key loads, as a value that becomes a
    /// Duration, or is a ConfigError naming the key: never a panic.
    #[test]
    fn any_number_in_a_duration_key_loads_or_is_an_error(
        key in proptest::sample::select(DURATION_KEYS.to_vec()),
        value in proptest::prop_oneof![
            proptest::num::f64::ANY,
            proptest::sample::select(vec![1e20, 1.8e19, 1.9e19, 3.2e7, 1e-300, 5e-324, -0.0, 0.0, -1.0, -1e308, f64::MAX]),
        ],
    ) {
        match parse_str(&yaml_setting(key, value)) {
            Ok(loaded) => {
                let durations = converted_durations(&loaded.settings);
                proptest::prop_assert!(durations.iter().all(|d| d.as_secs_f64() <= MAX_SECONDS), "{key}: {value}");
            }
            Err(e) => proptest::prop_assert_eq!(e.path, key),
        }
    }
}

#[test]
fn anthropic_and_gemini_are_providers_and_anthropic_embeds_nothing() {
    let chat =
        "completion_models:\n  default_completion_model:\n    model_provider: anthropic\n    model: claude-sonnet-4-5\n    api_key: k\n";
    let loaded = parse_str(chat).unwrap();
    let model = &loaded.settings.completion_models["default_completion_model"];
    assert_eq!((&model.model_provider, model.max_tokens), (&Provider::Anthropic, Some(ANTHROPIC_MAX_TOKENS)));
    let gemini =
        "embedding_models:\n  default_embedding_model:\n    model_provider: gemini\n    model: gemini-embedding-001\n    api_key: k\n";
    assert_eq!(
        parse_str(gemini).unwrap().settings.embedding_models["default_embedding_model"].model_provider,
        Provider::Gemini
    );
    let embed = "embedding_models:\n  default_embedding_model:\n    model: claude-x\n    model_provider: anthropic\n";
    let err = parse_str(embed).unwrap_err();
    assert_eq!(
        (err.path.as_str(), err.line),
        ("embedding_models.default_embedding_model.model_provider", Some(4)),
        "{err}"
    );
    assert!(err.to_string().contains("Anthropic has no embeddings API"), "{err}");
    // Anthropic's temperature ends at 1 (OpenAI's at 2).
    let hot = format!("{chat}    temperature: 1.5\n");
    assert_eq!(parse_str(&hot).unwrap_err().path, "completion_models.default_completion_model.temperature");
}

#[test]
fn keys_come_from_the_provider_s_variable_only_when_settings_give_none() {
    let text = "completion_models:\n  default_completion_model:\n    model: anthropic/claude-haiku-4-5\n  g:\n    model_provider: gemini\n    model: gemini-2.5-flash\n    api_key: from-settings\n  o:\n    model: gpt-4o\n";
    let mut settings = parse_str(text).unwrap().settings;
    settings.keys_from_environment(|var| Some(format!("{var}-value")));
    let key = |id: &str| settings.completion_models[id].api_key.expose().to_string();
    assert_eq!(key("default_completion_model"), "ANTHROPIC_API_KEY-value", "LiteLLM's form names the provider");
    assert_eq!(key("g"), "from-settings");
    assert_eq!(key("o"), "", "GraphRAG's OpenAI key is named in settings.yaml");
}

#[test]
fn bedrock_takes_the_aws_variables_and_the_region_of_call_args_first() {
    let text = "completion_models:\n  default_completion_model:\n    model: bedrock/anthropic.claude-3-haiku-20240307-v1:0\n    call_args:\n      aws_region_name: eu-west-3\n";
    let mut settings = parse_str(text).unwrap().settings;
    let vars = |var: &str| match var {
        "AWS_ACCESS_KEY_ID" => Some("AKID".to_string()),
        "AWS_SECRET_ACCESS_KEY" => Some("secret-key-1".to_string()),
        "AWS_REGION" => Some("us-east-1".to_string()),
        _ => None,
    };
    settings.keys_from_environment(vars);
    let model = &settings.completion_models["default_completion_model"];
    assert_eq!(
        (&model.model_provider, model.model.as_str()),
        (&Provider::Bedrock, "anthropic.claude-3-haiku-20240307-v1:0")
    );
    let aws = model.aws.as_ref().unwrap();
    assert_eq!(
        (aws.key_id.as_str(), aws.secret.expose(), aws.region.as_deref()),
        ("AKID", "secret-key-1", Some("eu-west-3"))
    );
    assert!(model.chat_configured(), "AWS credentials are its key");
    assert!(!format!("{model:?}").contains("secret-key-1"));
    let embed = "embedding_models:\n  default_embedding_model:\n    model_provider: bedrock\n    model: amazon.titan-embed-text-v2:0\n";
    let batch = |text: &str| parse_str(text).unwrap().settings.embedding_models["default_embedding_model"].batch_size;
    assert_eq!(batch(embed), 1, "Titan embeds one text per request");
    assert_eq!(batch(&embed.replace("amazon.titan-embed-text-v2:0", "us.cohere.embed-v4:0")), 16);
    assert_eq!(
        batch(
            &format!("{embed}    batch_size: 200\n").replace("amazon.titan-embed-text-v2:0", "cohere.embed-english-v3")
        ),
        96
    );
    let err = parse_str(&embed.replace("amazon.titan-embed-text-v2:0", "anthropic.claude-3-haiku")).unwrap_err();
    assert!(err.to_string().contains("Titan Text Embeddings"), "{err}");
}

#[test]
fn vertex_ai_takes_its_vertex_call_args_out_of_the_request_and_the_rest_from_the_environment() {
    let text = "completion_models:\n  default_completion_model:\n    model: vertex_ai/gemini-2.5-flash\n    call_args:\n      vertex_project: from-settings\n      vertex_credentials: {\"type\": \"service_account\"}\n      seed: 1\n";
    let mut settings = parse_str(text).unwrap().settings;
    let vars = |var: &str| match var {
        "GOOGLE_APPLICATION_CREDENTIALS" => Some("/keys/sa.json".to_string()),
        "GOOGLE_CLOUD_PROJECT" => Some("from-environment".to_string()),
        "VERTEXAI_LOCATION" => Some("europe-west4".to_string()),
        _ => None,
    };
    settings.keys_from_environment(vars);
    let model = &settings.completion_models["default_completion_model"];
    assert_eq!((&model.model_provider, model.model.as_str()), (&Provider::VertexAi, "gemini-2.5-flash"));
    assert_eq!(model.call_args.keys().collect::<Vec<_>>(), ["seed"], "the rest is sent");
    let access = &model.vertex;
    assert_eq!(
        (access.credentials.as_ref().map(|c| c.expose()), access.project.as_deref(), access.location.as_deref()),
        (Some(r#"{"type":"service_account"}"#), Some("from-settings"), Some("europe-west4"))
    );
    assert!(model.chat_configured(), "the service account is its key");
    assert!(!format!("{model:?}").contains("service_account"), "never shown");
    let plain =
        "completion_models:\n  default_completion_model:\n    model_provider: vertex_ai\n    model: gemini-2.5-flash\n";
    let mut settings = parse_str(plain).unwrap().settings;
    settings.keys_from_environment(vars);
    let credentials = settings.completion_models["default_completion_model"].vertex.credentials.clone();
    assert_eq!(credentials.as_ref().map(|c| c.expose()), Some("/keys/sa.json"));
}

#[test]
fn azure_ai_takes_litellm_s_key_and_endpoint_variables() {
    let text = "completion_models:\n  default_completion_model:\n    model: azure_ai/mistral-large-2411\n";
    let mut settings = parse_str(text).unwrap().settings;
    settings.keys_from_environment(|var| Some(format!("{var}-value")));
    let model = &settings.completion_models["default_completion_model"];
    assert_eq!((&model.model_provider, model.model.as_str()), (&Provider::AzureAi, "mistral-large-2411"));
    assert_eq!(
        (model.api_key.expose(), model.api_base.as_deref()),
        ("AZURE_AI_API_KEY-value", Some("AZURE_AI_API_BASE-value"))
    );
}

#[test]
fn bedrock_takes_the_keys_of_the_aws_profile_when_the_environment_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials");
    std::fs::write(&credentials, "[work]\naws_access_key_id = AKIDWORK\naws_secret_access_key = work-secret\n")
        .unwrap();
    let config = dir.path().join("config");
    std::fs::write(&config, "[profile work]\nregion = ap-southeast-2\n").unwrap();
    let text =
        "completion_models:\n  default_completion_model:\n    model: bedrock/anthropic.claude-3-haiku-20240307-v1:0\n";
    let access = |env_keys: bool| {
        let mut settings = parse_str(text).unwrap().settings;
        settings.keys_from_environment(|var: &str| match var {
            "AWS_SHARED_CREDENTIALS_FILE" => Some(credentials.display().to_string()),
            "AWS_CONFIG_FILE" => Some(config.display().to_string()),
            "AWS_PROFILE" => Some("work".to_string()),
            "AWS_ACCESS_KEY_ID" if env_keys => Some("AKIDENV".to_string()),
            "AWS_SECRET_ACCESS_KEY" if env_keys => Some("env-secret".to_string()),
            _ => None,
        });
        let aws = settings.completion_models["default_completion_model"].aws.clone().unwrap();
        (aws.key_id, aws.secret.expose().to_string(), aws.region)
    };
    assert_eq!(access(false), ("AKIDWORK".into(), "work-secret".into(), Some("ap-southeast-2".into())));
    assert_eq!(
        access(true),
        ("AKIDENV".into(), "env-secret".into(), Some("ap-southeast-2".into())),
        "the environment's first"
    );
}

#[test]
fn rerank_settings_name_a_rerank_model_a_provider_with_rerank_and_its_address() {
    let model = |provider: &str, base: &str| {
        format!("rerank_models:\n  r:\n    model_provider: {provider}\n    model: m\n{base}rerank:\n  model_id: r\n")
    };
    let loaded = parse_str(&model("cohere", "")).unwrap();
    assert_eq!(loaded.settings.rerank.model_id.as_deref(), Some("r"));
    assert!(loaded.settings.rerank.by_default && loaded.settings.rerank.candidates == 40);
    let err = parse_str(&model("cohre", "")).unwrap_err();
    assert_eq!((err.line, err.path.as_str()), (Some(3), "rerank_models.r.model_provider"), "{err}");
    assert!(err.to_string().contains("did you mean `cohere`"), "{err}");
    let err = parse_str(&model("vllm", "")).unwrap_err();
    assert!(err.path == "rerank_models.r.api_base" && err.to_string().contains("needs api_base"), "{err}");
    parse_str(&model("vllm", "    api_base: http://localhost:8000/v1\n")).unwrap();
    let err = parse_str("rerank:\n  model_id: nothing\n").unwrap_err();
    assert_eq!((err.line, err.path.as_str()), (Some(2), "rerank.model_id"), "{err}");
    for bad in [0, 1001] {
        let err = parse_str(&format!("rerank:\n  candidates: {bad}\n")).unwrap_err();
        assert_eq!(err.path, "rerank.candidates", "{err}");
    }
}
