//! End-to-end indexing with an LLM: the binary against the project's mock
//! OpenAI-compatible server (deterministic answers, fault injection).

use std::fs;
use std::path::Path;
use std::process::Output;

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use common::{graphrag, read, text};
use graphrag_mock_llm::{FaultKind, FaultRule, MockConfig, MockServer};

mod common;

fn columns(batch: &RecordBatch) -> Vec<String> {
    batch.schema().fields().iter().map(|f| format!("{}:{}", f.name(), f.data_type())).collect()
}

/// The first ~12 KB of A Christmas Carol (after the Gutenberg header).
fn sample_text() -> String {
    common::carol_passage("MARLEY'S GHOST", 12_000)
}

/// A project whose chat model is the mock server.
fn project(mock: &MockServer) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    assert!(graphrag(&["init", "--root", root]).status.success());
    fs::write(dir.path().join("input/carol.txt"), sample_text()).unwrap();
    fs::write(dir.path().join(".env"), "GRAPHRAG_API_KEY=sk-test-secret-777\n").unwrap();
    let settings = format!(
        "completion_models:\n  default_completion_model:\n    model: mock-gpt\n    api_base: {}\n    api_key: ${{GRAPHRAG_API_KEY}}\n    retry_base_delay: 0.001\n    max_retry_wait: 0.05\nchunking:\n  size: 300\n  overlap: 30\nextract_claims:\n  enabled: true\nsnapshots:\n  graphml: true\n  raw_graph: true\n",
        mock.base_url()
    );
    fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    dir
}

fn index(root: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["-q", "index", "--root", root.to_str().unwrap()];
    args.extend_from_slice(extra);
    graphrag(&args)
}

fn stats(root: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(root.join("output/stats.json")).unwrap()).unwrap()
}

#[test]
fn standard_pipeline_builds_the_graph_and_reruns_from_cache() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock);
    let o = index(dir.path(), &["--method", "standard"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = dir.path().join("output");

    let entities = read(&out.join("entities.parquet"));
    assert_eq!(
        columns(&entities),
        [
            "id:LargeUtf8",
            "human_readable_id:Int64",
            "title:LargeUtf8",
            "type:LargeUtf8",
            "description:LargeUtf8",
            "text_unit_ids:List(Utf8)",
            "frequency:Int64",
            "degree:Int64"
        ]
    );
    let relationships = read(&out.join("relationships.parquet"));
    assert_eq!(
        columns(&relationships),
        [
            "id:LargeUtf8",
            "human_readable_id:Int64",
            "source:LargeUtf8",
            "target:LargeUtf8",
            "description:LargeUtf8",
            "weight:Float64",
            "combined_degree:Int64",
            "text_unit_ids:List(Utf8)"
        ]
    );
    assert!(entities.num_rows() >= 5, "{} entities", entities.num_rows());
    assert!(relationships.num_rows() >= 3);
    let titles = graphrag_engine::table::strings(&entities, "entities", "title").unwrap();
    assert!(titles.contains(&"SCROOGE"), "{titles:?}");
    let communities = read(&out.join("communities.parquet"));
    assert_eq!(
        columns(&communities),
        [
            "id:LargeUtf8",
            "human_readable_id:Int64",
            "community:Int64",
            "level:Int64",
            "parent:Int64",
            "children:List(Int64)",
            "title:LargeUtf8",
            "entity_ids:List(Utf8)",
            "relationship_ids:List(Utf8)",
            "text_unit_ids:List(Utf8)",
            "period:LargeUtf8",
            "size:Int64"
        ]
    );
    assert!(communities.num_rows() >= 1);
    let reports = read(&out.join("community_reports.parquet"));
    let report_columns: Vec<String> =
        columns(&reports).iter().map(|c| c.split(':').next().unwrap().to_string()).collect();
    assert_eq!(
        report_columns,
        [
            "id",
            "human_readable_id",
            "community",
            "level",
            "parent",
            "children",
            "title",
            "summary",
            "full_content",
            "rank",
            "rating_explanation",
            "findings",
            "full_content_json",
            "period",
            "size"
        ]
    );
    assert_eq!(reports.num_rows(), communities.num_rows());
    let explanations = graphrag_engine::table::strings(&reports, "community_reports", "rating_explanation").unwrap();
    assert!(explanations.iter().all(|e| !e.contains("Extractive")), "LLM reports when a chat model is configured");
    let contents = graphrag_engine::table::strings(&reports, "community_reports", "full_content").unwrap();
    assert!(contents.iter().all(|c| c.starts_with("# ")));
    let covariates = read(&out.join("covariates.parquet"));
    assert_eq!(columns(&covariates).len(), 12);
    assert!(out.join("graph.graphml").exists());
    // snapshots.raw_graph: the merged graph before summaries, as GraphRAG's raw_entities / raw_relationships.
    // Entity resolution merged some of them (the mock says yes to names sharing a word): each is a
    // row of entity_aliases.
    let raw = read(&out.join("raw_entities.parquet"));
    let aliases = read(&out.join("entity_aliases.parquet"));
    assert!(aliases.num_rows() > 0);
    assert_eq!(raw.num_rows(), entities.num_rows() + aliases.num_rows());
    assert!(read(&out.join("raw_relationships.parquet")).num_rows() > 0);

    // Referential integrity: endpoints are entities, every id list resolves.
    let ids_of = |t: &RecordBatch, name: &str| -> std::collections::HashSet<String> {
        graphrag_engine::table::strings(t, name, "id").unwrap().into_iter().map(String::from).collect()
    };
    let lists = |t: &RecordBatch, name: &str, col: &str| graphrag_engine::table::string_lists(t, name, col).unwrap();
    let units_t = read(&out.join("text_units.parquet"));
    let docs_t = read(&out.join("documents.parquet"));
    let (entity_ids, rel_ids, unit_ids) =
        (ids_of(&entities, "entities"), ids_of(&relationships, "relationships"), ids_of(&units_t, "text_units"));
    let titles_set: std::collections::HashSet<&str> = titles.iter().copied().collect();
    for col in ["source", "target"] {
        for end in graphrag_engine::table::strings(&relationships, "relationships", col).unwrap() {
            assert!(titles_set.contains(end), "relationship endpoint {end} is not an entity");
        }
    }
    let resolve = |lists: Vec<Vec<String>>, known: &std::collections::HashSet<String>, what: &str| {
        for id in lists.iter().flatten() {
            assert!(known.contains(id), "{what}: dangling id {id}");
        }
    };
    resolve(lists(&units_t, "text_units", "entity_ids"), &entity_ids, "text_units.entity_ids");
    resolve(lists(&units_t, "text_units", "relationship_ids"), &rel_ids, "text_units.relationship_ids");
    resolve(lists(&docs_t, "documents", "text_unit_ids"), &unit_ids, "documents.text_unit_ids");
    resolve(lists(&entities, "entities", "text_unit_ids"), &unit_ids, "entities.text_unit_ids");
    resolve(lists(&relationships, "relationships", "text_unit_ids"), &unit_ids, "relationships.text_unit_ids");
    resolve(lists(&communities, "communities", "entity_ids"), &entity_ids, "communities.entity_ids");
    resolve(lists(&communities, "communities", "relationship_ids"), &rel_ids, "communities.relationship_ids");
    resolve(lists(&communities, "communities", "text_unit_ids"), &unit_ids, "communities.text_unit_ids");
    let covariate_ids = ids_of(&read(&out.join("covariates.parquet")), "covariates");
    resolve(lists(&units_t, "text_units", "covariate_ids"), &covariate_ids, "text_units.covariate_ids");

    // Text units now point at what was extracted from them.
    let units = read(&out.join("text_units.parquet"));
    let linked = graphrag_engine::table::string_lists(&units, "text_units", "entity_ids").unwrap();
    assert!(linked.iter().filter(|l| !l.is_empty()).count() >= units.num_rows() / 2);

    let s = stats(dir.path());
    let calls = s["llm"]["default_completion_model"]["calls"].as_u64().unwrap();
    let units_n = units.num_rows() as u64;
    assert!(calls >= 2 * units_n, "extraction + gleaning per chunk: {calls} calls for {units_n} chunks");
    assert!(s["workflows"]["extract_graph"]["llm"]["default_completion_model"]["prompt_tokens"].as_u64().unwrap() > 0);
    let requests = mock.stats().chat_requests;
    assert_eq!(requests, calls + 1, "the model calls, and the start-up check of the endpoint");

    // Same inputs: byte-identical tables, every answer from the cache.
    let before: Vec<Vec<u8>> = ["entities", "relationships", "text_units"]
        .iter()
        .map(|t| fs::read(out.join(format!("{t}.parquet"))).unwrap())
        .collect();
    mock.reset_stats();
    let o = index(dir.path(), &["--method", "standard"]);
    assert!(o.status.success(), "{}", text(&o));
    let rerun = mock.stats();
    assert_eq!(rerun.requests, 1, "a second run sends nothing but the start-up check");
    assert_eq!(rerun.by_kind.get("connection_check"), Some(&1));
    assert_eq!(stats(dir.path())["llm"]["default_completion_model"]["cache_hits"].as_u64().unwrap(), calls);
    let after: Vec<Vec<u8>> = ["entities", "relationships", "text_units"]
        .iter()
        .map(|t| fs::read(out.join(format!("{t}.parquet"))).unwrap())
        .collect();
    assert!(before == after, "byte-identical outputs");

    // The key never lands in outputs, cache or logs.
    for path in walk(dir.path()) {
        if path.file_name().is_some_and(|n| n == ".env") {
            continue;
        }
        let bytes = fs::read(&path).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("sk-test-secret-777"), "{} leaks the key", path.display());
    }
}

#[test]
fn faults_are_ridden_out_and_malformed_records_counted() {
    let mock = MockServer::start(MockConfig {
        faults: vec![
            // The first request is the start-up check, which a 429 does not stop.
            FaultRule {
                kind: FaultKind::RateLimit { retry_after_ms: 2 },
                first: Some(4),
                every: None,
                after: None,
                endpoint: None,
            },
            // Requests 5 and 10 only: a chunk has at most two cut-off answers, so its
            // third attempt is usable whatever the order the requests arrive in.
            FaultRule { kind: FaultKind::Truncated, first: Some(10), every: Some(5), after: None, endpoint: None },
        ],
        ..MockConfig::default()
    })
    .unwrap();
    let dir = project(&mock);
    // 4 requests in flight (tests/failures.rs covers a chunk that stays cut off).
    let settings = fs::read_to_string(dir.path().join("settings.yaml")).unwrap();
    let settings = settings.replace("max_retry_wait: 0.05", "max_retry_wait: 0.05\n    concurrent_requests: 4");
    fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    let o = index(dir.path(), &["--method", "standard"]);
    assert!(o.status.success(), "{}", text(&o));
    let s = stats(dir.path());
    let usage = &s["llm"]["default_completion_model"];
    assert!(usage["retries"].as_u64().unwrap() >= 3, "{s}");
    assert!(usage["truncated_answers"].as_u64().unwrap() >= 1, "{s}");
    assert!(read(&dir.path().join("output/entities.parquet")).num_rows() > 0);
}

#[test]
fn a_down_server_fails_with_a_clear_message_and_resume_finishes_later() {
    let mock = MockServer::start(MockConfig {
        faults: vec![FaultRule::always(FaultKind::ServerError { status: 503 })],
        ..MockConfig::default()
    })
    .unwrap();
    let dir = project(&mock);
    let settings = fs::read_to_string(dir.path().join("settings.yaml"))
        .unwrap()
        .replace("max_retry_wait: 0.05", "max_retry_wait: 0.05\n    max_retries: 2");
    fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    let o = index(dir.path(), &["--method", "standard"]);
    assert!(!o.status.success());
    let last = String::from_utf8_lossy(&o.stderr).trim_end().lines().last().unwrap_or("").to_string();
    // Extraction and claims run concurrently; either reports the outage first.
    assert!((last.contains("extract_graph") || last.contains("extract_claims")) && last.contains("503"), "{last}");
    assert!(!last.contains("sk-test-secret-777"));

    mock.set_faults(vec![]);
    mock.reset_stats();
    let o = index(dir.path(), &["--method", "standard", "--resume"]);
    assert!(o.status.success(), "{}", text(&o));
    let s = stats(dir.path());
    assert_eq!(s["workflows"]["chunk"]["status"], "skipped");
    assert_eq!(s["workflows"]["extract_graph"]["status"], "ran");
}

#[test]
fn fast_method_needs_no_llm() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    assert!(graphrag(&["init", "--root", root]).status.success());
    fs::write(dir.path().join("input/carol.txt"), sample_text()).unwrap();
    // Three text units are too few for GraphRAG's pruning default (phrases in two units or more):
    // keep every phrase here.
    let settings = fs::read_to_string(dir.path().join("settings.yaml")).unwrap();
    let settings = settings.replace("  min_node_freq: 2", "  min_node_freq: 1");
    fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    // No API key: `auto` picks the fast method.
    let o = index(dir.path(), &[]);
    assert!(o.status.success(), "{}", text(&o));
    let entities = read(&dir.path().join("output/entities.parquet"));
    let titles = graphrag_engine::table::strings(&entities, "entities", "title").unwrap();
    assert!(titles.iter().any(|t| t.contains("SCROOGE")), "{titles:?}");
    assert!(read(&dir.path().join("output/relationships.parquet")).num_rows() > 0);
    assert_eq!(stats(dir.path())["pipeline"], "fast");
    let reports = read(&dir.path().join("output/community_reports.parquet"));
    assert!(reports.num_rows() > 0);
    let explanations = graphrag_engine::table::strings(&reports, "community_reports", "rating_explanation").unwrap();
    assert!(explanations.iter().all(|e| e.starts_with("Extractive report")), "labelled as extractive");
    // Local embeddings (all-MiniLM-L6-v2, 384 dimensions) of every text unit.
    let vectors = read(&dir.path().join("output/embeddings.text_unit_text.parquet"));
    assert_eq!(columns(&vectors)[..2], ["id:LargeUtf8", "vector:FixedSizeList(384 x Float32)"]);
    assert_eq!(vectors.num_rows(), read(&dir.path().join("output/text_units.parquet")).num_rows());
    // Units of 1,200 tokens exceed the model's 256 word-pieces: each keeps its pieces' vectors.
    let pieces = vectors.column_by_name("piece_vectors").expect("piece_vectors column");
    let pieces = pieces.as_list::<i32>();
    for row in 0..pieces.len() {
        let list = pieces.value(row);
        assert!(list.len() >= 2, "unit {row} has {} piece vectors", list.len());
        assert_eq!(list.as_fixed_size_list().value_length(), 384);
    }
    // stats.json names the kernel that computed the vectors (`precision: auto`).
    let auto = graphrag_engine::settings::Precision::Auto.kernel();
    assert_eq!(embedding_kernels(dir.path()), [auto.name()]);

    // A change of precision is a change of model: `update` re-embeds every
    // text (no cached vector of the other precision is reused) and the
    // vectors stay within int8's tolerance of f32's (cosine ≥ 0.99).
    let settings = fs::read_to_string(dir.path().join("settings.yaml")).unwrap();
    let other = if auto.name() == "f32" { "int8" } else { "f32" };
    let settings = settings.replace("    precision: auto\n", &format!("    precision: {other}\n"));
    assert!(settings.contains(&format!("precision: {other}")));
    fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    let o = graphrag(&["-q", "update", "--root", root]);
    assert!(o.status.success(), "{}", text(&o));
    use graphrag_engine::settings::Precision;
    let kernel = if other == "f32" { Precision::F32 } else { Precision::Int8 }.kernel();
    assert_eq!(embedding_kernels(dir.path()), [kernel.name()]);
    let usage = &stats(dir.path())["llm"]["default_embedding_model"];
    assert_eq!(usage["cache_hits"], 0, "{usage}");
    let after = read(&dir.path().join("output/embeddings.text_unit_text.parquet"));
    let (a, b) = (unit_vectors(&vectors), unit_vectors(&after));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_ne!(x, y, "re-embedded at the other precision");
        let cosine: f32 = x.iter().zip(y).map(|(p, q)| p * q).sum();
        assert!(cosine >= 0.99, "cosine {cosine} between f32 and int8 vectors");
    }

    // bf16 is a model of its own too: `update` re-embeds every text again,
    // and its vectors stay within bf16's tolerance of f32's (cosine ≥ 0.999).
    let settings = fs::read_to_string(dir.path().join("settings.yaml")).unwrap();
    let settings = settings.replace(&format!("    precision: {other}\n"), "    precision: bf16\n");
    assert!(settings.contains("precision: bf16"));
    fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    let o = graphrag(&["-q", "update", "--root", root]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(embedding_kernels(dir.path()), [Precision::Bf16.kernel().name()]);
    let usage = &stats(dir.path())["llm"]["default_embedding_model"];
    assert_eq!(usage["cache_hits"], 0, "{usage}");
    let bf16 = unit_vectors(&read(&dir.path().join("output/embeddings.text_unit_text.parquet")));
    let f32_vectors = if other == "f32" { &b } else { &a };
    assert_eq!(bf16.len(), f32_vectors.len());
    for ((x, y), z) in bf16.iter().zip(f32_vectors).zip(&b) {
        assert_ne!(x, z, "re-embedded at bf16");
        let cosine: f32 = x.iter().zip(y).map(|(p, q)| p * q).sum();
        assert!(cosine >= 0.999, "cosine {cosine} between f32 and bf16 vectors");
    }

    let o = index(dir.path(), &["--method", "standard"]);
    assert!(!o.status.success());
    let err = text(&o);
    assert!(err.contains("no chat model configured") && err.contains("--method fast"), "{err}");
}

/// The `embedding_kernel` of every step of stats.json that embedded texts.
fn embedding_kernels(root: &Path) -> Vec<String> {
    let s = stats(root);
    let steps = s["workflows"].as_object().unwrap().values();
    let kernels = steps.filter_map(|w| w["llm"]["default_embedding_model"]["embedding_kernel"].as_str());
    let mut kernels: Vec<String> = kernels.map(String::from).collect();
    kernels.dedup();
    kernels
}

/// The `vector` column of an embeddings table.
fn unit_vectors(batch: &RecordBatch) -> Vec<Vec<f32>> {
    let list = batch.column_by_name("vector").unwrap().as_fixed_size_list();
    (0..list.len()).map(|i| list.value(i).as_primitive::<arrow_array::types::Float32Type>().values().to_vec()).collect()
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn dry_run_estimates_calls_and_tokens_without_sending_anything() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock);
    let o = index(dir.path(), &["--method", "standard", "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let line = out.lines().find(|l| l.trim_start().starts_with("extract_graph ")).unwrap_or_else(|| panic!("{out}"));
    // 1 extraction + 1 gleaning turn per chunk (max_gleanings 1).
    let calls: u64 = line.split("≤ ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(calls >= 2 && calls.is_multiple_of(2), "{line}");
    assert!(line.contains("0 of") && line.contains("prompt tokens"), "{line}");
    assert!(line.contains("extract_graph"));
    assert!(out.contains("depends on what the models return"), "{out}");
    assert_eq!(mock.stats().requests, 0, "a dry run sends nothing");
    assert!(!dir.path().join("output/entities.parquet").exists());

    assert!(index(dir.path(), &["--method", "standard"]).status.success());
    let chunks = read(&dir.path().join("output/text_units.parquet")).num_rows() as u64;
    assert_eq!(calls, 2 * chunks);
    let o = index(dir.path(), &["--method", "standard", "--dry-run"]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(out.contains(&format!("≤ 0 calls, ~0 prompt tokens; {chunks} of {chunks} items already cached")), "{out}");
}

#[test]
fn dry_run_of_the_fast_method_runs_no_step_that_calls_a_model() {
    // The fast method with a chat model configured writes LLM community
    // reports: the dry run must neither send them nor embed anything.
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock);
    let o = index(dir.path(), &["--method", "fast", "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let line = out.lines().find(|l| l.contains("call a model, not estimated:")).unwrap_or_else(|| panic!("{out}"));
    assert!(line.contains("community_reports") && line.contains("embed_text_unit_text"), "{line}");
    assert!(!out.contains("no step of this pipeline calls a language model"), "{out}");
    assert_eq!(mock.stats().requests, 0, "a dry run sends nothing");
    assert!(!dir.path().join("output").join("entities.parquet").exists());
}
