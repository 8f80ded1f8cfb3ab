//! A Microsoft GraphRAG 3.3 project runs as it is: the folder `graphrag
//! init` writes (tests/fixtures/graphrag-3.3.0-init, its settings.yaml and
//! GraphRAG's own prompt files) with only `api_base` and the key set, then
//! `index`, `update` and `query` with every method, against the mock server.

use common::{graphrag, text};
use graphrag_mock_llm::{MockConfig, MockServer};
use std::fs;
use std::path::Path;

mod common;

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::write(&target, fs::read(entry.path()).unwrap()).unwrap();
        }
    }
}

/// The GraphRAG project with `api_base` added under each model, as a user
/// pointing it at a server would: the only edit to settings.yaml.
fn graphrag_project(mock: &MockServer) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/graphrag-3.3.0-init");
    copy_dir(&fixture, dir.path());
    let original = fs::read_to_string(dir.path().join("settings.yaml")).unwrap();
    let api_base = format!("    api_base: {}\n", mock.base_url());
    let mut settings = String::new();
    for line in original.split_inclusive('\n') {
        settings.push_str(line);
        if line.starts_with("    model_provider: ") {
            settings.push_str(&api_base);
        }
    }
    assert_eq!(settings.lines().count(), original.lines().count() + 2, "two lines added, nothing else changed");
    fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    fs::write(dir.path().join(".env"), "GRAPHRAG_API_KEY=sk-graphrag-user-1234\n").unwrap();
    fs::create_dir_all(dir.path().join("input")).unwrap();
    fs::write(dir.path().join("input/stave1.txt"), common::carol_passage("MARLEY'S GHOST", 6_000)).unwrap();
    dir
}

#[test]
fn a_graphrag_init_project_indexes_updates_and_answers_every_method() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = graphrag_project(&mock);
    let root = dir.path().to_str().unwrap();

    let o = graphrag(&["index", "-r", root]);
    let log = text(&o);
    assert!(o.status.success(), "{log}");
    assert!(
        log.contains("Indexed with pipeline `standard`"),
        "a configured chat model means the standard method: {log}"
    );
    // GraphRAG keeps its gleaning prompts in code: ours stand in, announced.
    assert!(log.contains("prompts/extract_graph_continue.txt is not in the project: using the built-in"), "{log}");
    assert!(!log.contains("no effect in graphrag-rs"), "nothing of `graphrag init`'s settings is ignored: {log}");
    let stats = mock.stats();
    for class in ["connection_check", "extract_graph", "summarize_descriptions", "community_report_graph"] {
        assert!(stats.by_kind.get(class).copied().unwrap_or(0) > 0, "GraphRAG's {class} prompt answered: {stats:?}");
    }
    assert_eq!(stats.by_kind.get("other"), None, "every prompt GraphRAG's files make is recognised: {stats:?}");
    for table in ["documents", "text_units", "entities", "relationships", "communities", "community_reports"] {
        assert!(dir.path().join(format!("output/{table}.parquet")).is_file(), "{table}");
    }
    // GraphRAG's cache partitions: one folder per model_instance_name.
    for partition in ["extract_graph", "summarize_descriptions", "community_reporting", "text_embedding"] {
        assert!(dir.path().join("cache").join(partition).is_dir(), "cache/{partition}");
    }

    fs::write(dir.path().join("input/stave2.txt"), common::carol_passage("THE FIRST OF THE THREE SPIRITS", 5_000))
        .unwrap();
    let o = graphrag(&["update", "-r", root]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("stave2.txt"), "{}", text(&o));

    for method in ["local", "global", "basic", "drift", "hybrid", "mix"] {
        let o = graphrag(&["query", "-r", root, "-m", method, "Who is Scrooge's late partner?"]);
        assert!(o.status.success(), "{method}: {}", text(&o));
        let answer = String::from_utf8_lossy(&o.stdout);
        assert!(!answer.trim().is_empty() && !answer.starts_with("[retrieval only"), "{method}: {answer}");
    }

    // GraphRAG's `query --data`: an output folder named on the command line.
    let elsewhere = tempfile::tempdir().unwrap();
    copy_dir(&dir.path().join("output"), &elsewhere.path().join("index"));
    let data = elsewhere.path().join("index");
    let o = graphrag(&["query", "-r", root, "--data", data.to_str().unwrap(), "-m", "basic", "Marley"]);
    assert!(o.status.success(), "{}", text(&o));

    // The key never lands in outputs, cache or logs.
    let mut stack = vec![dir.path().to_path_buf()];
    while let Some(p) = stack.pop() {
        for entry in fs::read_dir(&p).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n != ".env") {
                let bytes = fs::read(&path).unwrap();
                assert!(!String::from_utf8_lossy(&bytes).contains("sk-graphrag-user-1234"), "{}", path.display());
            }
        }
    }
}
