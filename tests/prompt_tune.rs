//! `graphrag-rs prompt-tune` end to end, against the project's mock server
//! (which answers prompt tuning's questions): on the example corpus and on
//! a dev corpus it writes the three prompts, `index` runs with them, and the
//! graph's entity types are the discovered ones. A GraphRAG project's
//! prompt-tune output folder is indexed as it is.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

use common::{graphrag, kind, read, text};
use graphrag_mock_llm::{Endpoint, FaultKind, FaultRule, MockConfig, MockServer};

mod common;

fn prompt_tune(root: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["prompt-tune", "--root", root.to_str().unwrap()];
    args.extend_from_slice(extra);
    graphrag(&args)
}

/// The types of the graph's entities.
fn entity_types(root: &Path) -> BTreeSet<String> {
    let entities = read(&root.join("output/entities.parquet"));
    graphrag_engine::table::strings(&entities, "entities", "type").unwrap().into_iter().map(String::from).collect()
}

/// The types `prompt-tune` reported (its `Entity types: A, B` line).
fn reported_types(stdout: &str) -> Vec<String> {
    let line = stdout.lines().find_map(|l| l.strip_prefix("Entity types: ")).expect("an entity types line");
    line.split(", ").map(String::from).collect()
}

fn file(root: &Path, rel: &str) -> String {
    fs::read_to_string(root.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Discovered types in the extraction prompt, examples from the corpus, and
/// the index built with the prompts has exactly those types.
fn check_tuned_index(root: &Path, types: &[String]) {
    let extraction = file(root, "prompts/extract_graph.txt");
    let listed = format!("exactly one of these types: [{}]", types.join(","));
    assert!(extraction.contains(&listed), "{listed} in\n{extraction}");
    assert!(extraction.contains(&format!("Entity_types: {}\nText: {{{{ input_text }}}}", types.join(","))));
    assert!(extraction.contains("Example 1:") && extraction.contains("Example 2:"), "{extraction}");
    assert!(!extraction.contains("HALVARD"), "the examples are the corpus's, not the built-in one");
    let o = graphrag(&["-q", "index", "--root", root.to_str().unwrap(), "--method", "standard"]);
    assert!(o.status.success(), "{}", text(&o));
    let found = entity_types(root);
    let allowed: BTreeSet<String> = types.iter().cloned().collect();
    assert!(!found.is_empty() && found.is_subset(&allowed), "graph types {found:?}, discovered {allowed:?}");
    assert!(read(&root.join("output/community_reports.parquet")).num_rows() > 0);
}

#[test]
fn example_corpus_prompts_are_tuned_indexed_and_rerun_from_cache() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = common::project(&mock, &common::passages(6, 2_500), 4);
    let root = dir.path();
    let original = file(root, "prompts/extract_graph.txt");

    let o = prompt_tune(root, &["--selection-method", "auto", "--k", "4"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("Read 4 of "), "{out}");
    let types = reported_types(&out);
    assert!(types.len() >= 3 && types.contains(&"CHARACTER".to_string()), "{types:?}");
    let stats = mock.stats();
    for class in ["tune_domain", "tune_language", "tune_persona", "tune_rating", "tune_entity_types", "tune_role"] {
        assert_eq!(kind(&stats, class), 1, "{class}: {:?}", stats.by_kind);
    }
    assert_eq!(kind(&stats, "extract_graph"), 4, "one few-shot example per selected chunk");
    assert!(stats.embedding_requests > 0, "auto selection embeds the chunks");

    // The replaced prompts are kept, the new ones name the domain and persona.
    let backups: Vec<_> = fs::read_dir(root.join("prompts"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("prompt-tune-backup-"))
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    assert_eq!(fs::read_to_string(backups[0].join("extract_graph.txt")).unwrap(), original);
    let domain = out.lines().find_map(|l| l.strip_prefix("Domain: ")).unwrap();
    assert!(file(root, "prompts/extract_graph.txt").contains(&format!("documents of the {domain} domain")));
    let summary = file(root, "prompts/summarize_descriptions.txt");
    assert!(summary.starts_with(&format!("You are an expert in {domain}.")), "{summary}");
    assert!(summary.contains("{{ max_length }}") && summary.contains("{{ description_list }}"));
    let report = file(root, "prompts/community_report_graph.txt");
    assert!(report.contains("IMPACT SEVERITY RATING: A float score between 0-10"), "{report}");
    assert!(report.contains(&format!("taking on this role: An analyst of {domain}")), "{report}");

    // The same run again: every answer from the cache, the same files, no new backup.
    let before = file(root, "prompts/extract_graph.txt");
    mock.reset_stats();
    let o = prompt_tune(root, &["--selection-method", "auto", "--k", "4"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(mock.stats().chat_requests, 1, "only the start-up check: {:?}", mock.stats().by_kind);
    assert_eq!(file(root, "prompts/extract_graph.txt"), before);
    assert!(text(&o).contains("Model calls: 0 "), "{}", text(&o));

    check_tuned_index(root, &types);
}

#[test]
fn dev_corpus_with_a_given_domain_and_every_chunk() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = common::project(&mock, &[], 4);
    let root = dir.path();
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hipporag-sample/sample_corpus.json");
    fs::copy(corpus, root.join("input/sample_corpus.json")).unwrap();
    let settings = file(root, "settings.yaml") + "input:\n  type: json\n  text_column: text\n  title_column: title\n";
    fs::write(root.join("settings.yaml"), settings).unwrap();

    let o =
        prompt_tune(root, &["--selection-method", "all", "--domain", "Neuroscience biographies", "--output", "tuned"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert_eq!(kind(&mock.stats(), "tune_domain"), 0, "--domain is not asked");
    assert!(out.contains("Domain: Neuroscience biographies"), "{out}");
    assert!(out.contains("index` will not read the new"), "settings name prompts/, not tuned/: {out}");
    let types = reported_types(&out);
    for name in ["extract_graph.txt", "summarize_descriptions.txt", "community_report_graph.txt"] {
        fs::copy(root.join("tuned").join(name), root.join("prompts").join(name)).unwrap();
    }
    assert!(file(root, "prompts/extract_graph.txt").contains("Neuroscience biographies domain"));
    check_tuned_index(root, &types);
}

#[test]
fn settings_entity_types_stay_a_placeholder_without_discovery() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = common::project(&mock, &common::passages(3, 2_000), 4);
    let root = dir.path();
    let o = prompt_tune(root, &["--no-discover-entity-types", "--selection-method", "top", "--limit", "2"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert_eq!(kind(&mock.stats(), "tune_entity_types"), 0);
    assert!(out.contains("Entity types: extract_graph.entity_types of settings.yaml"), "{out}");
    let extraction = file(root, "prompts/extract_graph.txt");
    assert!(extraction.contains("exactly one of these types: [{{ entity_types }}]"), "{extraction}");
    let o = graphrag(&["-q", "index", "--root", root.to_str().unwrap(), "--method", "standard"]);
    assert!(o.status.success(), "{}", text(&o));
    let defaults: BTreeSet<String> = ["ORGANIZATION", "PERSON", "GEO", "EVENT"].map(String::from).into();
    assert!(entity_types(root).is_subset(&defaults), "{:?}", entity_types(root));
}

#[test]
fn unusable_answers_are_a_named_error_and_nothing_is_written() {
    // Every chat answer after the start-up check is empty.
    let rule = FaultRule { after: Some(1), endpoint: Some(Endpoint::Chat), ..FaultRule::always(FaultKind::Empty) };
    let mock = MockServer::start(MockConfig { faults: vec![rule], ..MockConfig::default() }).unwrap();
    let dir = common::project(&mock, &common::passages(2, 2_000), 4);
    let root = dir.path();
    let original = file(root, "prompts/extract_graph.txt");
    let o = prompt_tune(root, &["--language", "English"]);
    let out = text(&o);
    assert!(!o.status.success());
    assert!(out.contains("prompt tuning, domain:") && out.contains("no usable answer"), "{out}");
    assert_eq!(file(root, "prompts/extract_graph.txt"), original);
}

#[test]
fn without_a_chat_model_a_run_says_so_and_a_dry_run_selects_with_local_embeddings() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    assert!(graphrag(&["init", "--root", root.to_str().unwrap()]).status.success());
    for doc in common::passages(4, 3_000) {
        common::put(root, &doc);
    }
    let o = prompt_tune(root, &[]);
    let out = text(&o);
    assert!(!o.status.success());
    assert!(out.contains("completion_models.default_completion_model"), "names the setting: {out}");
    assert!(out.contains("--dry-run"), "{out}");

    let o = prompt_tune(root, &["--dry-run", "--selection-method", "auto", "--k", "3", "--chunk-size", "200"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("Would read 3 of "), "{out}");
    assert!(out.contains("Embedding model `default_embedding_model`"), "{out}");
    for question in ["domain", "language", "persona", "entity types", "few-shot examples", "reporter role"] {
        assert!(out.lines().any(|l| l.trim_start().starts_with(question)), "{question} in {out}");
    }
    assert!(out.contains("A run needs a chat model"), "{out}");
    assert!(!root
        .join("prompts")
        .read_dir()
        .unwrap()
        .any(|e| { e.unwrap().file_name().to_string_lossy().starts_with("prompt-tune-backup-") }));
}

/// The folder GraphRAG 3.3's `prompt-tune --output` writes, in a GraphRAG
/// project's prompts/: `index` reads it as it is (Python `{name}`
/// placeholders, delimiters written in, no `max_length` placeholders).
#[test]
fn graphrag_prompt_tune_output_is_indexed_as_is() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = common::project(&mock, &common::passages(3, 2_000), 4);
    let root = dir.path();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/graphrag-3.3.0-prompt-tune");
    for name in ["extract_graph.txt", "summarize_descriptions.txt", "community_report_graph.txt"] {
        fs::copy(fixture.join(name), root.join("prompts").join(name)).unwrap();
    }
    let o = graphrag(&["-q", "index", "--root", root.to_str().unwrap(), "--method", "standard"]);
    assert!(o.status.success(), "{}", text(&o));
    let tuned: BTreeSet<String> =
        ["CHARACTER", "LOCATION", "ORGANIZATION", "SUPERNATURAL BEING"].map(String::from).into();
    let found = entity_types(root);
    assert!(!found.is_empty() && found.is_subset(&tuned), "{found:?}");
    assert!(read(&root.join("output/community_reports.parquet")).num_rows() > 0);
}

/// A dry run sends nothing, not even to a remote embedding model: `auto`
/// then estimates with the longest candidate chunks, and says so.
#[test]
fn a_dry_run_sends_nothing() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = common::project(&mock, &common::passages(4, 2_000), 4);
    for method in ["auto", "random"] {
        let o = prompt_tune(dir.path(), &["--dry-run", "--selection-method", method, "--k", "2", "--limit", "2"]);
        let out = text(&o);
        assert!(o.status.success(), "{out}");
        assert!(out.contains("Would read 2 of "), "{out}");
        assert_eq!(method == "auto", out.contains("which a dry run does not call"), "{out}");
        assert!(!out.contains("A run needs a chat model"), "{out}");
    }
    assert_eq!(mock.stats().requests, 0);
}
