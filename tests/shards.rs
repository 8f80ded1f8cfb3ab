//! `index --shard K/N` + `index --merge` against a single `index`: every
//! published table byte for byte, fast and standard method (the mock LLM),
//! N = 1, 2, 4, on part of the example and on a slice of a dev corpus, with
//! and without the model stages' shards (`--merge --phase stage` stopping
//! before each, `--shard K/M --phase model`) and the embed phase (`--merge
//! --phase graph`, `--shard K/M --phase embed`); shards rerun or killed mid-run change nothing and
//! repeat no model call.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{graphrag, kind, passages, project, text};
use graphrag_mock_llm::{FaultKind, FaultRule, MockConfig, MockServer};

/// Runs `graphrag-rs -q index --skip-validation ARGS --root ROOT` (no
/// start-up check, so that the mock counts model calls alone).
fn index(root: &Path, args: &[&str]) {
    let mut all = vec!["-q", "index", "--skip-validation", "--root", root.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = graphrag(&all);
    assert!(o.status.success(), "index {args:?}: {}", text(&o));
}

/// The bytes of every published file (the Parquet tables, vector indexes),
/// but the run records: document_status.parquet (run times) and
/// stats.json (timings, calls).
fn published(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "document_status.parquet" || name == "stats.json" {
                continue;
            }
            if path.is_dir() {
                walk(&path, base, out);
            } else {
                out.insert(path.strip_prefix(base).unwrap().to_path_buf(), fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&root.join("output"), &root.join("output"), &mut out);
    assert!(out.keys().any(|p| p.ends_with("entities.parquet")), "no index in {}", root.display());
    out
}

fn assert_same_index(sharded: &Path, single: &Path, what: &str) {
    let (a, b) = (published(sharded), published(single));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "{what}: the same files");
    for (file, bytes) in &a {
        assert!(bytes == &b[file], "{what}: {} differs from the single run's", file.display());
    }
}

/// Eight documents, so that every shard of four has some.
fn docs() -> Vec<(String, String)> {
    passages(8, 1_200)
}

/// The fragment files of every shard of a project.
fn fragments(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.join("output/.shards")];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "parquet") {
                out.insert(path.clone(), fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The documents the finished shards' markers (done.json) count.
fn done_documents(root: &Path) -> usize {
    let mut total = 0;
    for shard_set in fs::read_dir(root.join("output/.shards")).unwrap().flatten() {
        for shard in fs::read_dir(shard_set.path()).unwrap().flatten() {
            let done: serde_json::Value =
                serde_json::from_slice(&fs::read(shard.path().join("done.json")).unwrap()).unwrap();
            total += done["documents"].as_u64().unwrap() as usize;
        }
    }
    total
}

/// How a sharded run is made: `units` document shards, then the merge,
/// alone or after the graph phase — with `model: Some(M)`, M model shards
/// at each model stage it stops before (`None`: it asks them itself) —
/// and (`embed: Some(M)`) M embed shards.
#[derive(Clone, Copy)]
struct Sharding {
    units: usize,
    model: Option<usize>,
    embed: Option<usize>,
}

/// Document shards and the merge alone.
fn plain(units: usize) -> Sharding {
    Sharding { units, model: None, embed: None }
}

/// The model stage the last graph phase stopped before (its `model.json`).
fn model_stage(root: &Path) -> Option<serde_json::Value> {
    let shards = fs::read_dir(root.join("output/.shards")).ok()?;
    let marker = shards.flatten().find_map(|d| fs::read(d.path().join("model.json")).ok())?;
    Some(serde_json::from_slice(&marker).unwrap())
}

/// What the graph phase and the model shards asked.
#[derive(Default, Debug)]
struct GraphPhase {
    /// `<step> wave <w>` of each stage it stopped before.
    stages: Vec<String>,
    /// Chat requests of the model shards, and of the graph phase's runs.
    shard_chat: u64,
    graph_chat: u64,
    embedded_texts: u64,
}

/// `--merge --phase stage` (by `run`: index or update) until it stages the
/// graph, with `model` model shards at each model stage it stops before;
/// with `model` 0, `--merge --phase graph` once (it asks the stages
/// itself). A model shard run again asks nothing.
fn graph_phase(mock: &MockServer, root: &Path, method: &[&str], model: usize, run: fn(&Path, &[&str])) -> GraphPhase {
    let mut seen = GraphPhase::default();
    let with = |extra: &[&str]| -> Vec<String> { method.iter().chain(extra).map(|s| s.to_string()).collect() };
    let live = || fs::read(root.join("output/entities.parquet")).ok();
    let before = live();
    loop {
        mock.reset_stats();
        let phase = if model > 0 { "stage" } else { "graph" };
        run(root, &with(&["--merge", "--phase", phase]).iter().map(String::as_str).collect::<Vec<_>>());
        let graph = mock.stats();
        seen.graph_chat += graph.chat_requests;
        seen.embedded_texts += graph.embedded_texts;
        assert!(live() == before, "the graph phase publishes nothing");
        let Some(stage) = model_stage(root) else { return seen };
        seen.stages.push(format!("{} wave {}", stage["step"].as_str().unwrap(), stage["wave"]));
        assert!(seen.stages.len() < 20, "the graph phase goes on: {:?}", seen.stages);
        mock.reset_stats();
        for k in 0..model {
            let spec = format!("{k}/{model}");
            run(root, &with(&["--shard", &spec, "--phase", "model"]).iter().map(String::as_str).collect::<Vec<_>>());
        }
        seen.shard_chat += mock.stats().chat_requests;
        if model > 0 {
            mock.reset_stats();
            let spec = format!("0/{model}");
            run(root, &with(&["--shard", &spec, "--phase", "model"]).iter().map(String::as_str).collect::<Vec<_>>());
            assert_eq!(mock.stats().requests, 0, "a finished model shard asks nothing");
        }
    }
}

/// Indexes `docs` once with `index` and once per sharding, each in a fresh
/// project (`settings`: lines appended to settings.yaml), and checks that
/// every published file is the single run's and every model call is made once.
fn sharded_equals_single(method: &str, docs: &[(String, String)], settings: &str, shardings: &[Sharding]) {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let fresh = || {
        let p = project(&mock, docs, 4);
        let mut f = fs::OpenOptions::new().append(true).open(p.path().join("settings.yaml")).unwrap();
        std::io::Write::write_all(&mut f, settings.as_bytes()).unwrap();
        p
    };
    let single = fresh();
    mock.reset_stats();
    index(single.path(), &["--method", method]);
    let single_stats = mock.stats();
    if settings == SMALL_ANN {
        let hnsw = published(single.path()).into_keys().filter(|f| f.extension().is_some_and(|x| x == "hnsw")).count();
        assert!(hnsw >= 2, "HNSW indexes of text units and entities, not {hnsw}");
    }

    for &Sharding { units: n, model, embed } in shardings {
        let what = format!("{method}, {n} shards, model shards {model:?}, embed shards {embed:?}");
        let p = fresh();
        mock.reset_stats();
        for k in 0..n {
            index(p.path(), &["--method", method, "--shard", &format!("{k}/{n}")]);
        }
        let shards = mock.stats();
        mock.reset_stats();
        if model.is_some() || embed.is_some() {
            let graph = graph_phase(&mock, p.path(), &["--method", method], model.unwrap_or(0), index);
            assert_eq!(graph.stages.is_empty(), model.is_none(), "{what}: stages only with `--phase stage`");
            if settings == SMALL_REPORT_CONTEXT {
                // The higher levels' reports wait for their sub-communities'.
                assert!(graph.stages.iter().any(|s| s == "community_reports wave 2"), "{what}: {graph:?}");
            }
            if model.is_some() {
                assert_eq!(graph.graph_chat, 0, "{what}: the model shards ask every model stage's question");
                assert!(graph.shard_chat > 0, "{what}: {graph:?}");
            }
            mock.reset_stats();
            if let Some(m) = embed {
                for k in 0..m {
                    index(p.path(), &["--method", method, "--shard", &format!("{k}/{m}"), "--phase", "embed"]);
                }
                assert!(mock.stats().embedded_texts > 0, "{what}: the embed shards embed the graph's rows");
            }
            let staged = mock.stats();
            if let Some(m) = embed {
                // An embed shard run again asks nothing.
                mock.reset_stats();
                index(p.path(), &["--method", method, "--shard", &format!("0/{m}"), "--phase", "embed"]);
                assert_eq!(mock.stats().requests, 0, "{what}: a finished embed shard asks nothing");
            }
            mock.reset_stats();
            index(p.path(), &["--method", method, "--merge"]);
            let merge = mock.stats();
            assert_eq!(merge.chat_requests, 0, "{what}: the merge finds every answer in the cache");
            if embed.is_some() {
                assert_eq!(merge.embedded_texts, 0, "{what}: the merge finds every vector in the cache");
            }
            assert_eq!(
                shards.chat_requests + graph.shard_chat + graph.graph_chat + staged.chat_requests,
                single_stats.chat_requests,
                "{what}"
            );
            assert_eq!(
                shards.embedded_texts + graph.embedded_texts + staged.embedded_texts + merge.embedded_texts,
                single_stats.embedded_texts,
                "{what}"
            );
        } else {
            index(p.path(), &["--method", method, "--merge"]);
            let merge = mock.stats();
            // Every call once: the shards' and the merge's together are the
            // single run's (embedding requests are batches; their texts count).
            assert_eq!(shards.chat_requests + merge.chat_requests, single_stats.chat_requests, "{what}");
            assert_eq!(shards.embedded_texts + merge.embedded_texts, single_stats.embedded_texts, "{what}");
            assert_eq!(kind(&merge, "extract_graph"), 0, "the merge extracts nothing itself");
        }
        assert_same_index(p.path(), single.path(), &what);

        // A shard run again: nothing asked, nothing rewritten.
        let before = fragments(p.path());
        mock.reset_stats();
        index(p.path(), &["--method", method, "--shard", &format!("0/{n}")]);
        assert_eq!(mock.stats().requests, 0, "a finished shard asks nothing");
        assert_eq!(fragments(p.path()), before, "a finished shard rewrites nothing");
        assert_eq!(done_documents(p.path()), docs.len(), "{what}: every document in one shard");
    }
}

#[test]
fn sharded_fast_index_equals_a_single_run() {
    let embed = Sharding { units: 2, model: None, embed: Some(3) };
    sharded_equals_single("fast", &docs(), "", &[plain(1), embed, plain(4)]);
}

#[test]
fn sharded_standard_index_equals_a_single_run() {
    let embed = Sharding { units: 4, model: None, embed: Some(2) };
    sharded_equals_single("standard", &docs(), "", &[plain(1), plain(2), embed]);
}

/// Reports whose context holds no more than this many tokens: the higher
/// levels' wait for their sub-communities' reports (several waves).
const SMALL_REPORT_CONTEXT: &str = "community_reports:\n  max_input_length: 400\n";

#[test]
fn sharded_model_stages_equal_a_single_run_for_any_count() {
    let shardings: Vec<Sharding> =
        [1, 2, 4].into_iter().map(|m| Sharding { units: 2, model: Some(m), embed: Some(m) }).collect();
    sharded_equals_single("standard", &dev_slice(), SMALL_REPORT_CONTEXT, &shardings);
    let docs = passages(16, 1_500);
    // The fast method with the model's reports.
    let llm_reports = "community_reports:\n  mode: llm\n  max_input_length: 400\n";
    sharded_equals_single("fast", &docs, llm_reports, &[Sharding { units: 4, model: Some(3), embed: None }]);
}

/// 150 passages of a dev corpus (2WikiMultihopQA's, tests/fixtures), one
/// document each.
fn dev_slice() -> Vec<(String, String)> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/twowiki-slice/corpus_150.json");
    let passages: Vec<serde_json::Value> = serde_json::from_slice(&fs::read(file).unwrap()).unwrap();
    passages
        .iter()
        .enumerate()
        .map(|(i, p)| {
            (format!("{i:03}.txt"), format!("{}\n{}", p["title"].as_str().unwrap(), p["text"].as_str().unwrap()))
        })
        .collect()
}

/// HNSW indexes from 20 vectors, so that the dev slice's fields have them
/// (the merge builds them over every shard's vectors).
const SMALL_ANN: &str = "vector_store:\n  ann_threshold: 20\n";

#[test]
fn sharded_dev_slice_equals_a_single_run_fast() {
    let embed = Sharding { units: 4, model: None, embed: Some(4) };
    sharded_equals_single("fast", &dev_slice(), SMALL_ANN, &[plain(1), plain(2), embed]);
}

#[test]
fn sharded_dev_slice_equals_a_single_run_standard() {
    let embed = Sharding { units: 2, model: Some(2), embed: Some(2) };
    sharded_equals_single("standard", &dev_slice(), SMALL_ANN, &[plain(1), embed, plain(4)]);
}

#[test]
fn a_shard_killed_mid_run_reruns_without_repeated_calls() {
    // One request at a time, so that every answer before the hanging one is cached.
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let docs = passages(8, 3_000);
    let single = project(&mock, &docs, 1);
    index(single.path(), &["--method", "standard"]);

    let p = project(&mock, &docs, 1);
    index(p.path(), &["--method", "standard", "--shard", "0/2"]);
    mock.reset_stats();
    index(p.path(), &["--method", "standard", "--shard", "1/2"]);
    let shard1 = mock.stats();
    assert!(shard1.chat_requests > 6, "shard 1/2 has work to interrupt ({} chat requests)", shard1.chat_requests);

    // Shard 1 again in a fresh project, killed (SIGKILL) after 5 answers, rerun.
    let killed = project(&mock, &docs, 1);
    index(killed.path(), &["--method", "standard", "--shard", "0/2"]);
    let cached = |root: &Path| common::cached_answers(root, |_| true);
    let cached_before = cached(killed.path());
    mock.reset_stats();
    mock.set_faults(vec![FaultRule::always(FaultKind::Hang).after(5)]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_graphrag-rs"))
        .args(["-q", "index", "--skip-validation", "--method", "standard", "--shard", "1/2", "--root"])
        .arg(killed.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    assert!(mock.wait_for_requests(6, Duration::from_secs(120)), "the shard never sent its 6th request");
    assert!(mock.wait_for_answers(5, Duration::from_secs(30)), "the shard's first 5 answers were never made");
    // Every answer is cached before its slot is released; wait for the
    // files, then kill (an answer of the other model in flight at that
    // instant is lost, never asked twice).
    let answered = mock.stats();
    let received = answered.by_kind.values().sum::<u64>() + answered.embedded_texts;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while cached(killed.path()) < cached_before + received && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let answered_chat = mock.stats().by_kind.values().sum::<u64>();
    mock.set_faults(Vec::new());
    mock.reset_stats();
    index(killed.path(), &["--method", "standard", "--shard", "1/2"]);
    let rerun = mock.stats();
    assert_eq!(
        answered_chat + rerun.chat_requests,
        shard1.chat_requests,
        "the rerun asks only what the killed shard had not"
    );
    assert!(rerun.embedded_texts <= shard1.embedded_texts);

    let o = graphrag(&["-q", "index", "--merge", "--shards", "3", "--root", p.path().to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(text(&o).contains("shards 0/3, 1/3, 2/3 have not finished"), "{}", text(&o));
    for root in [killed.path(), p.path()] {
        index(root, &["--method", "standard", "--merge"]);
        assert_same_index(root, single.path(), "standard, a shard killed and rerun");
    }
}

/// Graph phases with one model shard each until the stage `step` is staged.
fn graph_phase_until(root: &Path, step: &str) {
    loop {
        index(root, &["--method", "standard", "--merge", "--phase", "stage"]);
        let stage = model_stage(root).expect("a model stage");
        if stage["step"] == step {
            return;
        }
        index(root, &["--method", "standard", "--shard", "0/1", "--phase", "model"]);
    }
}

#[test]
fn a_failed_model_shard_reruns_without_repeated_calls() {
    // One request at a time, so that the answers before the failures are cached.
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let docs = passages(8, 3_000);
    let single = project(&mock, &docs, 1);
    index(single.path(), &["--method", "standard"]);
    let [clean, failed] = [(); 2].map(|_| {
        let p = project(&mock, &docs, 1);
        index(p.path(), &["--method", "standard", "--shard", "0/1"]);
        graph_phase_until(p.path(), "summarize_descriptions");
        p
    });
    mock.reset_stats();
    index(clean.path(), &["--method", "standard", "--shard", "0/1", "--phase", "model"]);
    let summaries = mock.stats().chat_requests;
    assert!(summaries > 4, "the summaries have work to fail ({summaries} requests)");

    // The model refuses every request after the third: the shard fails
    // (a model shard tolerates no failed item), its answers cached.
    mock.reset_stats();
    mock.set_faults(vec![FaultRule::always(FaultKind::BadRequest).after(3)]);
    let mut args = vec!["-q", "index", "--skip-validation", "--method", "standard", "--root"];
    args.extend([failed.path().to_str().unwrap(), "--shard", "0/1", "--phase", "model"]);
    let o = graphrag(&args);
    assert!(!o.status.success(), "a model shard with failed items fails");
    assert!(text(&o).contains("model shard 0/1 of summarize_descriptions wave 0 failed"), "{}", text(&o));
    let answered = mock.stats().answers_made - mock.stats().faults_injected;
    assert_eq!(answered, 3);
    mock.set_faults(Vec::new());
    mock.reset_stats();
    index(failed.path(), &["--method", "standard", "--shard", "0/1", "--phase", "model"]);
    assert_eq!(answered + mock.stats().chat_requests, summaries, "the rerun asks only what was not answered");
    for p in [&clean, &failed] {
        graph_phase(&mock, p.path(), &["--method", "standard"], 1, index);
        index(p.path(), &["--method", "standard", "--merge"]);
        assert_same_index(p.path(), single.path(), "standard, a model shard failed and rerun");
    }
}

/// Runs `graphrag-rs -q update --skip-validation ARGS --root ROOT`.
fn update(root: &Path, args: &[&str]) {
    let mut all = vec!["-q", "update", "--skip-validation", "--root", root.to_str().unwrap()];
    all.extend_from_slice(args);
    let o = graphrag(&all);
    assert!(o.status.success(), "update {args:?}: {}", text(&o));
}

#[test]
fn a_sharded_update_equals_a_single_update() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let all = docs();
    let (first, added) = all.split_at(6);
    let single = project(&mock, first, 4);
    let sharded = project(&mock, first, 4);
    index(single.path(), &["--method", "standard"]);
    for k in 0..2 {
        index(sharded.path(), &["--method", "standard", "--shard", &format!("{k}/2")]);
    }
    index(sharded.path(), &["--method", "standard", "--merge"]);
    assert_same_index(sharded.path(), single.path(), "standard index before the update");
    for p in [&single, &sharded] {
        for doc in added {
            common::put(p.path(), doc);
        }
    }
    mock.reset_stats();
    update(single.path(), &[]);
    let single_update = mock.stats();
    mock.reset_stats();
    for k in 0..2 {
        update(sharded.path(), &["--shard", &format!("{k}/2")]);
    }
    let shards = mock.stats();
    // The model stages in two model shards, the merge's embeddings in two embed shards.
    let graph = graph_phase(&mock, sharded.path(), &[], 2, update);
    assert_eq!(graph.graph_chat, 0, "the model shards ask every model stage's question: {graph:?}");
    mock.reset_stats();
    for k in 0..2 {
        update(sharded.path(), &["--shard", &format!("{k}/2"), "--phase", "embed"]);
    }
    let staged = mock.stats();
    mock.reset_stats();
    update(sharded.path(), &["--merge"]);
    let merge = mock.stats();
    assert_eq!(merge.chat_requests, 0, "the merge finds every answer in the cache");
    assert_eq!(merge.embedded_texts, 0, "the merge finds every vector in the cache");
    assert_eq!(
        shards.chat_requests + graph.shard_chat + staged.chat_requests,
        single_update.chat_requests,
        "only the new documents' calls"
    );
    assert_eq!(shards.embedded_texts + graph.embedded_texts + staged.embedded_texts, single_update.embedded_texts);
    assert_same_index(sharded.path(), single.path(), "standard, after a sharded update");
}

#[test]
fn shard_flags_are_checked() {
    let o = graphrag(&["index", "--shard", "2/2"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("K must be 0 to N-1"), "{}", text(&o));
    // Issue #47: a count past any use was accepted.
    let o = graphrag(&["index", "--shard", "0/4294967297"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("the shard count N must be 1 to 65536"), "{}", text(&o));
    let o = graphrag(&["index", "--merge", "--shards", "65537"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("65537"), "{}", text(&o));
    let o = graphrag(&["index", "--shard", "0/2", "--merge"]);
    assert!(!o.status.success());
    let o = graphrag(&["index", "--merge", "--phase", "embed"]);
    assert!(text(&o).contains("--phase embed goes with --shard K/N"), "{}", text(&o));
    let o = graphrag(&["index", "--shard", "0/2", "--phase", "graph"]);
    assert!(text(&o).contains("--phase graph goes with --merge"), "{}", text(&o));
    let o = graphrag(&["index", "--shard", "0/2", "--phase", "stage"]);
    assert!(text(&o).contains("--phase stage goes with --merge"), "{}", text(&o));
    let o = graphrag(&["index", "--merge", "--phase", "model"]);
    assert!(text(&o).contains("--phase model goes with --shard K/N"), "{}", text(&o));
    let o = graphrag(&["index", "--phase", "wrong"]);
    assert!(!o.status.success());
}

#[test]
fn an_embed_shard_needs_a_staged_graph_and_the_cache() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let p = project(&mock, &docs(), 4);
    let embed_shard = || {
        let mut args = vec!["-q", "index", "--skip-validation", "--method", "fast", "--root"];
        args.extend([p.path().to_str().unwrap(), "--shard", "0/2", "--phase", "embed"]);
        graphrag(&args)
    };
    let o = embed_shard();
    assert!(!o.status.success());
    assert!(text(&o).contains("no staged graph to embed"), "{}", text(&o));
    let mut f = fs::OpenOptions::new().append(true).open(p.path().join("settings.yaml")).unwrap();
    std::io::Write::write_all(&mut f, b"cache:\n  type: none\n").unwrap();
    let o = embed_shard();
    assert!(text(&o).contains("through the model cache, and cache.type is `none`"), "{}", text(&o));
}
