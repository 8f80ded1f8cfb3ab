//! `graphrag-rs update` and crash safety, end to end against the mock LLM
//! server: an update's graph equals a fresh index's of the new input (its
//! communities are warm-started from the previous ones), and it pays only
//! for what changed; a process killed mid-run (SIGKILL) and rerun ends
//! with the outputs of an uninterrupted run and repeats no model call.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use arrow_array::RecordBatch;
use common::{documents, graphrag, kind, passages, project, put, read, run_ok, tables, text};
use graphrag_engine::table::{ints, string_lists, strings};
use graphrag_mock_llm::{FaultKind, FaultRule, MockConfig, MockServer};

/// (level, member entity ids) → community number.
fn numbering(communities: &RecordBatch) -> BTreeMap<(i64, BTreeSet<String>), i64> {
    let levels = ints(communities, "communities", "level").unwrap();
    let numbers = ints(communities, "communities", "community").unwrap();
    let members = string_lists(communities, "communities", "entity_ids").unwrap();
    levels.into_iter().zip(members).map(|(l, m)| (l, m.into_iter().collect())).zip(numbers).collect()
}

/// The member entity ids of every level-0 community, sorted (an entity in
/// two communities is there twice).
fn level0_members(communities: &RecordBatch) -> Vec<String> {
    let levels = ints(communities, "communities", "level").unwrap();
    let members = string_lists(communities, "communities", "entity_ids").unwrap();
    let mut out: Vec<String> = levels.into_iter().zip(members).filter(|(l, _)| *l == 0).flat_map(|(_, m)| m).collect();
    out.sort_unstable();
    out
}

/// The columns of a graph table other than `description`, which an update
/// makes incrementally (history-dependent) for the elements it touched.
fn without_descriptions(t: &RecordBatch) -> RecordBatch {
    let keep: Vec<usize> = (0..t.num_columns()).filter(|&i| t.schema().field(i).name() != "description").collect();
    t.project(&keep).unwrap()
}

/// Each element's description by key (entity title, or "source|target").
fn descriptions(t: &RecordBatch, name: &str) -> BTreeMap<String, String> {
    let keys: Vec<String> = if name == "entities" {
        strings(t, name, "title").unwrap().iter().map(|s| s.to_string()).collect()
    } else {
        let (s, d) = (strings(t, name, "source").unwrap(), strings(t, name, "target").unwrap());
        s.iter().zip(d).map(|(a, b)| pair(a, b)).collect()
    };
    keys.into_iter().zip(strings(t, name, "description").unwrap().into_iter().map(str::to_string)).collect()
}

fn pair(a: &str, b: &str) -> String {
    if a <= b {
        format!("{a}|{b}")
    } else {
        format!("{b}|{a}")
    }
}

/// Per element of a merged graph table (raw_entities / raw_relationships):
/// its descriptions and, for each, the text units that gave it.
fn description_sources(t: &RecordBatch, name: &str) -> BTreeMap<String, Vec<(String, BTreeSet<String>)>> {
    let descs = string_lists(t, name, "descriptions").unwrap();
    let units = string_lists(t, name, "text_unit_ids").unwrap();
    let sources = graphrag_engine::table::int_lists(t, name, "description_sources").unwrap();
    let keys: Vec<String> = if name == "raw_entities" {
        strings(t, name, "title").unwrap().iter().map(|s| s.to_string()).collect()
    } else {
        let (s, d) = (strings(t, name, "source").unwrap(), strings(t, name, "target").unwrap());
        s.iter().zip(d).map(|(a, b)| pair(a, b)).collect()
    };
    let mut out = BTreeMap::new();
    for (i, key) in keys.into_iter().enumerate() {
        let mut per: Vec<(String, BTreeSet<String>)> = descs[i].iter().map(|d| (d.clone(), BTreeSet::new())).collect();
        for p in sources[i].chunks(2) {
            per[p[0] as usize].1.insert(units[i][p[1] as usize].clone());
        }
        out.insert(key, per);
    }
    out
}

/// (element key, description list) of a summarize_descriptions prompt.
fn summarize_request(prompt: &str) -> (String, Vec<String>) {
    let data = &prompt[prompt.rfind("-Data-").unwrap()..];
    let name = data.split("Entities:").nth(1).unwrap().lines().next().unwrap().trim();
    let list = data.split("Description List:").nth(1).unwrap();
    let list: Vec<String> = serde_json::from_str(list[..list.find("\n#######").unwrap()].trim()).unwrap();
    let key = match serde_json::from_str::<Vec<String>>(name) {
        Ok(ends) if ends.len() == 2 => pair(&ends[0], &ends[1]),
        _ => name.to_string(),
    };
    (key, list)
}

/// A community's (entity ids, relationship ids, text unit ids).
type Members = (BTreeSet<String>, BTreeSet<String>, Vec<String>);

/// The report columns an update keeps as they were for an unchanged community.
const REPORT_TEXT: [&str; 6] = ["title", "summary", "full_content", "rank", "findings", "full_content_json"];

fn report_rows(t: &RecordBatch) -> BTreeMap<i64, RecordBatch> {
    let keep: Vec<usize> = REPORT_TEXT.iter().map(|c| t.schema().index_of(c).unwrap()).collect();
    let text = t.project(&keep).unwrap();
    ints(t, "community_reports", "community")
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, c)| (c, text.slice(i, 1)))
        .collect()
}

#[test]
fn an_added_then_removed_document_pays_only_its_share_and_keeps_unchanged_work() {
    let mock = MockServer::start(MockConfig { record_prompts: true, ..MockConfig::default() }).unwrap();
    // Enough text for several communities, a few of which the last
    // document changes (and, at a material fraction of 0.1, one materially).
    let docs = passages(12, 3_000);
    let last = docs.len() - 1;
    let material_fraction = 0.1;
    let project_before = project(&mock, &docs[..last], 4);
    let root = project_before.path();
    // Entity resolution off: "untouched" below is judged per raw title, and
    // a merge would give an untouched title the new document's alias.
    let more_settings = |p: &Path| {
        let s = fs::read_to_string(p.join("settings.yaml")).unwrap()
            + &format!(
                "snapshots:\n  raw_graph: true\nupdate:\n  material_fraction: {material_fraction}\nresolve_entities:\n  enabled: false\n"
            );
        fs::write(p.join("settings.yaml"), s).unwrap();
    };
    more_settings(root);
    run_ok("index", root);
    let before = tables(root);

    let fresh_all = project(&mock, &docs, 4);
    more_settings(fresh_all.path());
    mock.reset_stats();
    run_ok("index", fresh_all.path());
    let full = mock.stats();

    // Add the last document.
    put(root, &docs[last]);
    mock.reset_stats();
    run_ok("update", root);
    let update = mock.stats();
    let after = tables(root);
    let fresh = tables(fresh_all.path());
    for table in ["documents", "text_units", "raw_entities", "raw_relationships", "lexical_index"] {
        assert_eq!(after[table], fresh[table], "{table}: update vs fresh index of the same input");
    }
    for table in ["entities", "relationships"] {
        assert_eq!(
            without_descriptions(&after[table]),
            without_descriptions(&fresh[table]),
            "{table}: the graph of an update is a fresh index's (descriptions aside)"
        );
    }
    // Communities are warm-started from the previous ones (docs/cli.md: they may
    // differ from a fresh index's): the level-0 communities hold the same
    // entities, each in exactly one.
    let members = level0_members(&after["communities"]);
    assert_eq!(members, level0_members(&fresh["communities"]), "level-0 communities: the same entities");
    assert!(members.windows(2).all(|w| w[0] != w[1]), "an entity in two level-0 communities");
    let lexical_bytes = |root: &Path| fs::read(root.join("output/lexical_index.parquet")).unwrap();
    assert_eq!(lexical_bytes(root), lexical_bytes(fresh_all.path()), "the BM25 terms are byte-identical");
    assert_eq!(after["lexical_index"].num_rows(), after["text_units"].num_rows());

    // What the update paid for: the new document's chunks, the descriptions
    // they touched, the communities they changed.
    let units = &after["text_units"];
    let new_doc = strings(&after["documents"], "documents", "id").unwrap()
        [strings(&after["documents"], "documents", "title").unwrap().iter().position(|t| *t == docs[last].0).unwrap()]
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

    // Descriptions: an element the new chunks did not touch keeps its
    // description; one they touched is summarised from its previous
    // description and only the descriptions the new chunks brought.
    for (table, raw) in [("entities", "raw_entities"), ("relationships", "raw_relationships")] {
        let (was, now) = (descriptions(&before[table], table), descriptions(&after[table], table));
        let sources = description_sources(&after[raw], raw);
        for (key, per) in &sources {
            let new: Vec<String> = per
                .iter()
                .filter(|(_, from)| from.iter().all(|u| new_units.contains(u.as_str())))
                .map(|(d, _)| d.clone())
                .collect();
            if new.is_empty() && was.contains_key(key) {
                assert_eq!(now[key], was[key], "{table} {key}: untouched, kept");
            }
        }
        let mut asked = 0;
        for prompt in mock.prompts("summarize_descriptions") {
            let (key, list) = summarize_request(&prompt);
            let Some(per) = sources.get(&key) else { continue };
            asked += 1;
            let new: Vec<String> = per
                .iter()
                .filter(|(_, from)| from.iter().all(|u| new_units.contains(u.as_str())))
                .map(|(d, _)| d.clone())
                .collect();
            match was.get(&key) {
                Some(previous) if !previous.is_empty() => {
                    let expected: Vec<String> = std::iter::once(previous.clone()).chain(new).collect();
                    assert_eq!(list, expected, "{table} {key}: the previous description and only the new ones");
                }
                _ => assert_eq!(list, per.iter().map(|(d, _)| d.clone()).collect::<Vec<_>>(), "{key}: new, all"),
            }
        }
        if table == "entities" {
            assert!(asked > 0, "the new document adds descriptions to known entities");
        }
    }
    let summaries = kind(&update, "summarize_descriptions");
    assert!(summaries > 0 && summaries < kind(&full, "summarize_descriptions"), "{summaries} summaries");

    // Reports: those of communities that changed materially are new, the
    // others are the previous index's, byte for byte.
    let (old_reports, new_reports) =
        (report_rows(&before["community_reports"]), report_rows(&after["community_reports"]));
    let membership = |t: &RecordBatch| -> BTreeMap<(i64, i64), Members> {
        let n = "communities";
        let (c, l) = (ints(t, n, "community").unwrap(), ints(t, n, "level").unwrap());
        let (e, r, u) = (
            string_lists(t, n, "entity_ids").unwrap(),
            string_lists(t, n, "relationship_ids").unwrap(),
            string_lists(t, n, "text_unit_ids").unwrap(),
        );
        (0..t.num_rows())
            .map(|i| ((c[i], l[i]), (e[i].iter().cloned().collect(), r[i].iter().cloned().collect(), u[i].clone())))
            .collect()
    };
    let (then, now) = (membership(&before["communities"]), membership(&after["communities"]));
    let degree: BTreeMap<String, i64> = strings(&after["entities"], "e", "id")
        .unwrap()
        .into_iter()
        .map(str::to_string)
        .zip(ints(&after["entities"], "e", "degree").unwrap())
        .collect();
    let turnover = |a: &BTreeSet<String>, b: &BTreeSet<String>| {
        a.symmetric_difference(b).count() as f64 / a.union(b).count().max(1) as f64
    };
    let policy = graphrag_engine::settings::UpdateConfig { material_fraction, ..Default::default() };
    assert_eq!(
        policy.community_reports,
        graphrag_operations::community_report::Refresh::Material,
        "the default policy"
    );
    let (mut kept, mut renewed) = (0, 0);
    for (key, (ents, rels, _)) in &now {
        let material = match then.get(key) {
            None => true,
            Some((e0, r0, _)) => {
                turnover(e0, ents) > policy.material_fraction
                    || turnover(r0, rels) > policy.material_fraction
                    || ents.difference(e0).any(|e| degree[e] >= i64::from(policy.material_degree))
            }
        };
        if material {
            renewed += 1;
            if then.contains_key(key) {
                assert_ne!(
                    new_reports[&key.0], old_reports[&key.0],
                    "community {key:?} changed materially: new report"
                );
            }
        } else {
            kept += 1;
            assert_eq!(
                new_reports[&key.0], old_reports[&key.0],
                "community {key:?}: the previous report, byte for byte"
            );
        }
    }
    assert!(kept > 0 && renewed > 0, "kept {kept}, renewed {renewed}");
    let reports = kind(&update, "community_report_graph");
    assert!(reports <= renewed, "{reports} reports asked for {renewed} new or materially changed communities");
    // Communities whose membership did not change keep their numbers.
    let (old_numbering, new_numbering) = (numbering(&before["communities"]), numbering(&after["communities"]));
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

    // Remove it again: the graph is the 4-document one, without new
    // extraction, and every element that lost a text unit is summarised
    // afresh: nothing of the removed document stays in a description.
    fs::remove_file(root.join("input").join(&docs[last].0)).unwrap();
    mock.reset_stats();
    run_ok("update", root);
    let removed = tables(root);
    for table in ["documents", "text_units", "entities", "relationships", "lexical_index"] {
        assert_eq!(removed[table], before[table], "{table}: after removal vs the index of the rest");
    }
    assert_eq!(kind(&mock.stats(), "extract_graph"), 0, "the remaining chunks come from the cache");
    let status = read(&root.join("output/document_status.parquet"));
    assert_eq!(strings(&status, "s", "status").unwrap(), ["processed"; 11]);
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

/// Answers in the project's cache.
fn cache_entries(root: &Path) -> u64 {
    common::cached_answers(root, |_| true)
}

/// Requests of the start-up check before a run (one chat, one embedding).
const CHECKS: u32 = 2;

/// [`hanging`], then killed (SIGKILL) once every answer it received is in
/// its cache. The chat and the embedding model each have a slot of their
/// own, so the request that hangs may be the embedding model's while the
/// chat model's last answer is still being written: killed at that instant,
/// an answer in flight is lost, which is no repeated call of a cached one.
fn kill_after(mock: &MockServer, command: &str, root: &Path, answered: u32) {
    let cached_before = cache_entries(root);
    let mut child = hanging(mock, command, root, answered);
    // The request that hangs may arrive while the last answered one's
    // answer is still being made on the other slot.
    assert!(mock.wait_for_answers(u64::from(answered), Duration::from_secs(30)), "{command}: answers never made");
    // Every chat answer and every embedded text is one entry; the start-up
    // check's (one chat, one text) are not cached.
    let stats = mock.stats();
    let received = stats.by_kind.values().sum::<u64>() + stats.embedded_texts - u64::from(CHECKS);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while cache_entries(root) < cached_before + received && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
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

#[test]
fn an_update_over_an_unreadable_table_says_the_index_needs_index_not_update() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let docs = documents();
    let p = project(&mock, &docs[..1], 4);
    run_ok("index", p.path());
    put(p.path(), &docs[1]);
    let root = p.path().to_str().unwrap();
    for table in ["entities", "communities", "community_reports"] {
        let file = p.path().join("output").join(format!("{table}.parquet"));
        let good = fs::read(&file).unwrap();
        fs::write(&file, b"garbage").unwrap();
        let o = graphrag(&["update", "--root", root]);
        let out = text(&o);
        assert!(!o.status.success(), "{table}: {out}");
        assert!(out.contains(&format!("its table `{table}` cannot be read")), "{table}: {out}");
        assert!(out.contains("`graphrag-rs index` builds it anew"), "{table}: {out}");
        assert!(!out.contains("queryable") && !out.contains("`graphrag-rs update` asks"), "{table}: {out}");
        if table == "entities" {
            let o = graphrag(&["query", "--root", root, "--method", "local", "Who is Scrooge?"]);
            let out = text(&o);
            assert!(!o.status.success() && out.contains("builds the index anew"), "a query says so too: {out}");
        }
        fs::write(&file, good).unwrap();
    }
    run_ok("update", p.path());
}
