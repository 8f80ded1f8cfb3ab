//! `--method light` end to end against the mock LLM server: LightRAG's
//! economics (descriptions merged by the model only from
//! `force_llm_summary_on_merge` on, no community reports), the query
//! methods that work on it, and a clear refusal from those that need
//! community reports.

mod common;

use common::{documents, graphrag, kind, project, put, read, tables, text};
use graphrag_engine::table::{string_lists, strings};
use graphrag_mock_llm::{MockConfig, MockServer};

#[test]
fn a_light_index_answers_local_basic_hybrid_mix_and_ppr_and_updates() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let docs = documents();
    let p = project(&mock, &docs[..4], 4);
    let root = p.path().to_str().unwrap();
    // A low threshold, so that this small corpus has elements on both sides of it; entity
    // resolution off, so that the raw graph's description counts are the summarised ones.
    let settings = p.path().join("settings.yaml");
    let s = std::fs::read_to_string(&settings).unwrap()
        + "summarize_descriptions:\n  force_llm_summary_on_merge: 3\nsnapshots:\n  raw_graph: true\nresolve_entities:\n  enabled: false\n";
    std::fs::write(&settings, s).unwrap();
    mock.reset_stats();
    let o = graphrag(&["-q", "index", "--root", root, "--method", "light"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = tables(p.path());
    for absent in ["communities", "community_reports"] {
        assert!(!out.contains_key(absent), "a light index has no {absent}");
    }
    let stats = mock.stats();
    assert_eq!(kind(&stats, "community_report_graph") + kind(&stats, "community_report_text"), 0);

    // Descriptions: the model merges elements with 3 or more, fewer are joined.
    let raw = &out["raw_entities"];
    let counts: Vec<usize> = string_lists(raw, "raw_entities", "descriptions").unwrap().iter().map(Vec::len).collect();
    let raw_rels = &out["raw_relationships"];
    let rel_counts = string_lists(raw_rels, "raw_relationships", "descriptions").unwrap();
    let merged =
        counts.iter().chain(rel_counts.iter().map(Vec::len).collect::<Vec<_>>().iter()).filter(|&&n| n >= 3).count();
    assert!(merged > 0, "some elements have 3 or more descriptions");
    assert_eq!(kind(&stats, "summarize_descriptions"), merged as u64, "one model call per element with >= 3");
    let (titles, descs) =
        (strings(raw, "raw_entities", "title").unwrap(), string_lists(raw, "raw_entities", "descriptions").unwrap());
    let entities = &out["entities"];
    let final_desc: std::collections::BTreeMap<&str, &str> = strings(entities, "entities", "title")
        .unwrap()
        .into_iter()
        .zip(strings(entities, "entities", "description").unwrap())
        .collect();
    let two = descs.iter().position(|d| d.len() == 2).expect("an entity with two descriptions");
    assert_eq!(final_desc[titles[two]], descs[two].join("\n"), "two descriptions are joined, not summarised");

    for method in ["local", "basic", "hybrid", "mix", "ppr", "dense", "bm25"] {
        let q = graphrag(&["query", "--root", root, "--method", method, "--context-only", "Who is Marley?"]);
        assert!(q.status.success(), "{method}: {}", text(&q));
    }
    for method in ["global", "drift"] {
        let q = graphrag(&["query", "--root", root, "--method", method, "Who is Marley?"]);
        assert!(!q.status.success(), "{method} needs community reports");
        let said = text(&q);
        assert!(said.contains("no community reports") || said.contains("has none"), "{method}: {said}");
        assert!(said.contains("--method light") && said.contains("--method standard"), "{method}: {said}");
    }

    // `update` keeps the light pipeline (the one the index was built with).
    put(p.path(), &docs[4]);
    mock.reset_stats();
    let u = graphrag(&["-q", "update", "--root", root]);
    assert!(u.status.success(), "{}", text(&u));
    let stats = mock.stats();
    assert_eq!(kind(&stats, "community_report_graph"), 0);
    assert!(kind(&stats, "extract_graph") > 0);
    let status = read(&p.path().join("output/document_status.parquet"));
    assert_eq!(strings(&status, "s", "status").unwrap(), ["processed"; 5]);
    assert!(!p.path().join("output/community_reports.parquet").exists());
}
