//! `graphrag-rs update` and crash safety, end to end against the mock LLM
//! server: an update equals a fresh index of the new input and pays only
//! for what changed; a process killed mid-run (SIGKILL) and rerun ends
//! with the outputs of an uninterrupted run and repeats no model call.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use arrow_array::RecordBatch;
use common::{documents, graphrag, kind, project, put, read, run_ok, tables, text};
use graphrag_engine::table::{ints, string_lists, strings};
use graphrag_mock_llm::{FaultKind, FaultRule, MockConfig, MockServer};

/// (level, member entity ids) → community number.
fn numbering(communities: &RecordBatch) -> BTreeMap<(i64, BTreeSet<String>), i64> {
    let levels = ints(communities, "communities", "level").unwrap();
    let numbers = ints(communities, "communities", "community").unwrap();
    let members = string_lists(communities, "communities", "entity_ids").unwrap();
    levels.into_iter().zip(members).map(|(l, m)| (l, m.into_iter().collect())).zip(numbers).collect()
}

#[test]
fn an_added_then_removed_document_matches_fresh_indexes_and_costs_only_its_share() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let docs = documents();
    let project4 = project(&mock, &docs[..4], 4);
    let root = project4.path();
    run_ok("index", root);
    let before = tables(root);

    let fresh5 = project(&mock, &docs, 4);
    mock.reset_stats();
    run_ok("index", fresh5.path());
    let full = mock.stats();

    // Add the fifth document.
    put(root, &docs[4]);
    mock.reset_stats();
    run_ok("update", root);
    let update = mock.stats();
    let after = tables(root);
    let fresh = tables(fresh5.path());
    for table in ["documents", "text_units", "entities", "relationships", "lexical_index"] {
        assert_eq!(after[table], fresh[table], "{table}: update vs fresh index of the same input");
    }
    let lexical_bytes = |root: &Path| fs::read(root.join("output/lexical_index.parquet")).unwrap();
    assert_eq!(lexical_bytes(root), lexical_bytes(fresh5.path()), "the BM25 terms are byte-identical");
    assert_eq!(after["lexical_index"].num_rows(), after["text_units"].num_rows());

    // What the update paid for: the new document's chunks, the descriptions
    // they touched, the communities they changed.
    let units = &after["text_units"];
    let new_doc = strings(&after["documents"], "documents", "id").unwrap()
        [strings(&after["documents"], "documents", "title").unwrap().iter().position(|t| *t == docs[4].0).unwrap()]
    .to_string();
    let new_units: HashSet<&str> = strings(units, "text_units", "id")
        .unwrap()
        .into_iter()
        .zip(strings(units, "text_units", "document_id").unwrap())
        .filter(|(_, d)| *d == new_doc)
        .map(|(u, _)| u)
        .collect();
    assert!(!new_units.is_empty());
    assert_eq!(kind(&update, "extract_graph"), new_units.len() as u64, "extraction runs on the new chunks only");
    let touched = |t: &str| -> Vec<String> {
        let ids = strings(&after[t], t, "id").unwrap();
        let srcs = string_lists(&after[t], t, "text_unit_ids").unwrap();
        ids.iter()
            .zip(srcs)
            .filter(|(_, s)| s.iter().any(|u| new_units.contains(u.as_str())))
            .map(|(i, _)| i.to_string())
            .collect()
    };
    let (touched_entities, touched_relationships) = (touched("entities"), touched("relationships"));
    assert!(
        kind(&update, "summarize_descriptions") <= (touched_entities.len() + touched_relationships.len()) as u64,
        "summaries only for descriptions the new document added to"
    );
    let old_numbering = numbering(&before["communities"]);
    let new_numbering = numbering(&after["communities"]);
    let changed_communities = new_numbering
        .keys()
        .filter(|(level, members)| {
            !old_numbering.contains_key(&(*level, members.clone()))
                || members.iter().any(|m| touched_entities.contains(m))
        })
        .count();
    let reports = kind(&update, "community_report_graph") + kind(&update, "community_report_text");
    let levels = new_numbering.keys().map(|(l, _)| *l).max().unwrap_or(0) as usize + 1;
    assert!(
        reports <= (changed_communities * levels) as u64,
        "{reports} reports regenerated for {changed_communities} changed communities"
    );
    // Communities whose membership did not change keep their numbers.
    for (key, number) in &new_numbering {
        if let Some(old) = old_numbering.get(key) {
            assert_eq!(old, number, "community {key:?} was renumbered");
        }
    }
    assert!(
        update.chat_requests * 3 < full.chat_requests,
        "update: {} chat calls, full index: {}",
        update.chat_requests,
        full.chat_requests
    );

    // Remove it again: the graph is the 4-document one, without new extraction.
    fs::remove_file(root.join("input").join(&docs[4].0)).unwrap();
    mock.reset_stats();
    run_ok("update", root);
    let removed = tables(root);
    for table in ["documents", "text_units", "entities", "relationships", "lexical_index"] {
        assert_eq!(removed[table], before[table], "{table}: after removal vs the index of the rest");
    }
    assert_eq!(kind(&mock.stats(), "extract_graph"), 0, "the remaining chunks come from the cache");
    let status = read(&root.join("output/document_status.parquet"));
    assert_eq!(strings(&status, "s", "status").unwrap(), ["processed"; 4]);
}

/// Starts `graphrag-rs <command>` and returns it once the server has
/// answered `answered` requests and received the next, which hangs.
fn hanging(mock: &MockServer, command: &str, root: &Path, answered: u32) -> Child {
    mock.reset_stats();
    mock.set_faults(vec![FaultRule::always(FaultKind::Hang).after(answered)]);
    let child = Command::new(env!("CARGO_BIN_EXE_graphrag-rs"))
        .args(["-q", command, "--root", root.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let reached = mock.wait_for_requests(u64::from(answered) + 1, Duration::from_secs(120));
    assert!(reached, "{command} never sent request {}", answered + 1);
    child
}

/// Requests of the start-up check before a run (one chat, one embedding).
const CHECKS: u32 = 2;

/// [`hanging`], then killed (SIGKILL).
fn kill_after(mock: &MockServer, command: &str, root: &Path, answered: u32) {
    let mut child = hanging(mock, command, root, answered);
    child.kill().unwrap();
    child.wait().unwrap();
    mock.set_faults(Vec::new());
    mock.reset_stats();
}

#[test]
fn one_index_or_update_at_a_time() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let p = project(&mock, &documents()[..2], 1);
    let root = p.path().to_str().unwrap();
    let mut running = hanging(&mock, "index", p.path(), CHECKS + 2);
    for command in ["index", "update"] {
        // Were the second one let through, it would hang on the mock too.
        let mut second = Command::new(env!("CARGO_BIN_EXE_graphrag-rs"))
            .args(["-q", command, "--root", root])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while second.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                second.kill().unwrap();
                panic!("a second {command} ran beside the first");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let o = second.wait_with_output().unwrap();
        assert!(!o.status.success(), "a second {command} ran beside the first");
        assert!(text(&o).contains("another `graphrag-rs index` or `update` is changing"), "{}", text(&o));
    }
    let dry = graphrag(&["-q", "update", "--root", root, "--dry-run"]);
    assert!(dry.status.success(), "a dry run needs no lock: {}", text(&dry));
    running.kill().unwrap();
    running.wait().unwrap();
    mock.set_faults(Vec::new());
    run_ok("index", p.path());
}

#[test]
fn a_killed_index_or_update_resumes_with_identical_outputs_and_no_repeated_calls() {
    // One request at a time, so that every answer before the hanging
    // request is cached when the process dies.
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let docs = documents();

    let reference = project(&mock, &docs, 1);
    mock.reset_stats();
    run_ok("index", reference.path());
    let index_requests = mock.stats().requests;

    let killed = project(&mock, &docs, 1);
    kill_after(&mock, "index", killed.path(), CHECKS + 5);
    run_ok("index", killed.path());
    assert_eq!(mock.stats().requests, index_requests - 5, "the rerun asks only what the killed run had not");
    assert_eq!(tables(killed.path()), tables(reference.path()));

    // Updates: one uninterrupted, one killed, failed, then resumed.
    let (uninterrupted, interrupted) = (project(&mock, &docs[..4], 1), project(&mock, &docs[..4], 1));
    run_ok("index", uninterrupted.path());
    run_ok("index", interrupted.path());
    let before = tables(interrupted.path());
    for p in [&uninterrupted, &interrupted] {
        put(p.path(), &docs[4]);
    }
    mock.reset_stats();
    run_ok("update", uninterrupted.path());
    let update_requests = mock.stats().requests;

    let root = interrupted.path();
    kill_after(&mock, "update", root, CHECKS + 1);
    assert_eq!(tables(root), before, "the previous index is untouched by the killed update");
    let q = graphrag(&["query", "--root", root.to_str().unwrap(), "--method", "local", "--context-only", "Scrooge"]);
    assert!(q.status.success(), "still queryable: {}", text(&q));

    mock.set_faults(vec![FaultRule::always(FaultKind::BadRequest)]);
    let failed = graphrag(&["-q", "update", "--root", root.to_str().unwrap()]);
    assert!(!failed.status.success());
    assert!(text(&failed).contains("unchanged and queryable"), "{}", text(&failed));
    let status = read(&root.join("output/document_status.parquet"));
    let by_title: BTreeMap<&str, &str> =
        strings(&status, "s", "title").unwrap().into_iter().zip(strings(&status, "s", "status").unwrap()).collect();
    assert_eq!(by_title[docs[4].0.as_str()], "failed");
    assert_eq!(by_title[docs[0].0.as_str()], "processed");
    assert_eq!(tables(root), before);

    mock.set_faults(Vec::new());
    mock.reset_stats();
    run_ok("update", root);
    assert_eq!(mock.stats().requests, update_requests - 1, "nothing answered before the kill is asked again");
    assert_eq!(tables(root), tables(uninterrupted.path()));
}

#[test]
fn update_refuses_to_run_without_a_cache() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let p = project(&mock, &documents()[..1], 4);
    run_ok("index", p.path());
    let settings = p.path().join("settings.yaml");
    let mut s = fs::read_to_string(&settings).unwrap();
    s.push_str("cache:\n  type: none\n");
    fs::write(&settings, s).unwrap();
    let o = graphrag(&["update", "--root", p.path().to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(text(&o).contains("cache.type"), "{}", text(&o));
}
