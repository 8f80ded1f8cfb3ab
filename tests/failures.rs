//! Never losing data silently, end to end against the mock LLM server: an
//! unusable answer (malformed, cut off, empty) is retried and never cached;
//! a run that cannot get one fails naming the chunks, leaves the previous
//! index byte-identical and queryable, and its rerun asks only what was not
//! answered. The same for a run that errs, is interrupted (Ctrl-C) or runs
//! out of disk; and a model that keeps failing is not called for every
//! remaining chunk.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{documents, graphrag, project, project_with, put, read, run_ok, tables, text};
use graphrag_engine::table::strings;
use graphrag_mock_llm::{Endpoint, FaultKind, FaultRule, MockConfig, MockServer};

/// Every file of the live index, by path: what "byte-identical" compares
/// (the status table, a record of runs, and the lock aside).
fn index_files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(dir: &Path, rel: &str, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in fs::read_dir(dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = format!("{rel}{name}");
            if [".update", ".lock", "document_status.parquet"].contains(&name.as_str()) {
                continue;
            }
            if entry.path().is_dir() {
                walk(&entry.path(), &format!("{path}/"), out);
            } else {
                out.insert(path, fs::read(entry.path()).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&root.join("output"), "", &mut out);
    out
}

/// Cached chat answers (one per request answered usably).
fn cached_answers(root: &Path) -> usize {
    common::cached_answers(root, |answer| answer.starts_with(b"{\"content\"")) as usize
}

/// `index` without the start-up check (its one request per endpoint,
/// never cached, would blur the request counts here).
fn index(root: &Path) -> Output {
    graphrag(&["-q", "index", "--skip-validation", "--root", root.to_str().unwrap()])
}

fn index_ok(root: &Path) {
    let o = index(root);
    assert!(o.status.success(), "index: {}", text(&o));
}

fn assert_queryable(root: &Path) {
    let q = graphrag(&["query", "--root", root.to_str().unwrap(), "--method", "local", "--context-only", "Scrooge"]);
    assert!(q.status.success(), "queryable: {}", text(&q));
}

/// The failed run's stats.json, staged beside its outputs.
fn failed_stats(root: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(root.join("output/.update/stats.json")).expect("a failed run writes stats.json"))
        .unwrap()
}

/// A copy of a project folder (outputs and cache included), its inputs
/// rewritten with their fixed modification time.
fn copy_project(from: &Path, docs: &[(String, String)]) -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        fs::create_dir_all(to).unwrap();
        for entry in fs::read_dir(from).unwrap().flatten() {
            let target = to.join(entry.file_name());
            if entry.path().is_dir() {
                copy(&entry.path(), &target);
            } else {
                fs::copy(entry.path(), &target).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    copy(from, dir.path());
    for doc in docs {
        put(dir.path(), doc);
    }
    dir
}

fn fault(kind: FaultKind, every: Option<u32>) -> FaultRule {
    let rule = FaultRule::always(kind).on(Endpoint::Chat);
    match every {
        Some(k) => rule.every(k),
        None => rule,
    }
}

/// Heals a failed or interrupted run: against a healthy server the rerun
/// completes, and every request it sends is one nobody had a usable answer
/// to (each becomes one new cache entry).
fn rerun_asks_only_what_was_not_answered(mock: &MockServer, root: &Path) {
    rerun_with_asks_only_what_was_not_answered(mock, root, &[]);
}

/// [`rerun_asks_only_what_was_not_answered`] with more `index` arguments.
fn rerun_with_asks_only_what_was_not_answered(mock: &MockServer, root: &Path, args: &[&str]) {
    mock.set_faults(Vec::new());
    mock.reset_stats();
    let cached = cached_answers(root);
    let o = graphrag(&[&["-q", "index", "--skip-validation", "--root", root.to_str().unwrap()], args].concat());
    assert!(o.status.success(), "index {args:?}: {}", text(&o));
    assert_eq!(
        mock.stats().chat_requests as usize,
        cached_answers(root) - cached,
        "requests only for what was missing"
    );
}

/// The index of three documents (what a run that adds the third must end
/// with) and the previous index, of the first two.
fn reference_and_previous(mock: &MockServer, docs: &[(String, String)]) -> (tempfile::TempDir, tempfile::TempDir) {
    let reference = project(mock, &docs[..3], 4);
    index_ok(reference.path());
    let previous = project(mock, &docs[..2], 4);
    index_ok(previous.path());
    (reference, previous)
}

#[test]
fn unusable_answers_are_retried_or_named_as_failed_and_a_rerun_heals() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let docs = documents();
    let (reference, previous) = reference_and_previous(&mock, &docs);
    let mut ridden_out = 0;
    for (name, kind) in
        [("malformed", FaultKind::Malformed), ("truncated", FaultKind::Truncated), ("mixed", FaultKind::Mixed)]
    {
        for every in [Some(3), None] {
            let case = format!("{name} answers, every {}", every.map_or("one".into(), |k| format!("{k}rd")));
            let p = copy_project(previous.path(), &docs[..3]);
            let before = index_files(p.path());
            mock.set_faults(vec![fault(kind.clone(), every)]);
            let o = index(p.path());
            if o.status.success() {
                assert!(every.is_some(), "{case}: no answer was usable, yet the run succeeded");
                assert_eq!(tables(p.path()), tables(reference.path()), "{case}: retries give the fault-free index");
                ridden_out += 1;
            } else {
                let err = String::from_utf8_lossy(&o.stderr).to_string();
                let named = ["document part2.txt, chunk ", "entity ", "relationship ", "community "];
                assert!(named.iter().any(|n| err.contains(n)), "{case}: failed items named: {err}");
                assert!(err.contains("unchanged and queryable"), "{case}: {err}");
                assert!(index_files(p.path()) == before, "{case}: the previous index is byte-identical");
                assert_queryable(p.path());
                let stats = failed_stats(p.path());
                assert_eq!(stats["status"], "failed", "{case}");
                let usage = &stats["llm"]["default_completion_model"];
                let invalid =
                    ["malformed_answers", "truncated_answers"].iter().map(|k| usage[k].as_u64().unwrap()).sum::<u64>();
                assert!(invalid > 0 && usage["answer_failures"].as_u64().unwrap() > 0, "{case}: {usage}");
                assert!(!stats["failed_items"].as_array().unwrap().is_empty(), "{case}");
                if every.is_none() {
                    assert!(err.contains("document part2.txt, chunk 1 of "), "{case}: {err}");
                }
            }
            rerun_asks_only_what_was_not_answered(&mock, p.path());
            assert_eq!(tables(p.path()), tables(reference.path()), "{case}: healed");
        }
    }
    // Every 3rd answer unusable: the retries get usable ones (a chunk could
    // still draw three in a row; not all of them).
    assert!(ridden_out >= 1, "no faulty run was ridden out by retries");
}

#[test]
fn a_failed_interrupted_or_disk_full_index_leaves_the_previous_index_byte_identical() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let docs = documents();
    let (reference, previous) = reference_and_previous(&mock, &docs);
    let before = index_files(previous.path());

    // An error: the server refuses every chat request.
    let p = copy_project(previous.path(), &docs[..3]);
    mock.set_faults(vec![FaultRule::always(FaultKind::ServerError { status: 500 }).on(Endpoint::Chat)]);
    let o = index(p.path());
    assert!(!o.status.success());
    assert!(text(&o).contains("document part2.txt, chunk 1 of"), "{}", text(&o));
    assert!(index_files(p.path()) == before, "byte-identical after an error");
    assert_queryable(p.path());
    rerun_asks_only_what_was_not_answered(&mock, p.path());
    assert_eq!(tables(p.path()), tables(reference.path()));

    // Ctrl-C, or SIGTERM (what container runtimes send first), while
    // answers are in flight: they are received and cached, the documents
    // are pending again, and the rerun (`--resume` too) asks only the rest.
    for (signal, code, rerun) in [(libc::SIGINT, 130, &[][..]), (libc::SIGTERM, 143, &["--resume"][..])] {
        let p = copy_project(previous.path(), &docs[..3]);
        let cached = cached_answers(p.path());
        mock.reset_stats();
        mock.set_latency(Duration::from_millis(300));
        let child = Command::new(env!("CARGO_BIN_EXE_graphrag-rs"))
            .args(["-q", "index", "--skip-validation", "--root", p.path().to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        assert!(mock.wait_for_requests(2, Duration::from_secs(120)), "index sent its first requests");
        // SAFETY: signals a child process this test started and still owns.
        unsafe { libc::kill(child.id() as libc::pid_t, signal) };
        let o = child.wait_with_output().unwrap();
        mock.set_latency(Duration::ZERO);
        assert_eq!(o.status.code(), Some(code), "signal {signal}: {}", text(&o));
        assert!(String::from_utf8_lossy(&o.stderr).contains("interrupted — rerun to resume"), "{}", text(&o));
        assert_eq!(
            cached_answers(p.path()) - cached,
            mock.stats().chat_requests as usize,
            "signal {signal}: every request sent was answered and cached"
        );
        assert!(index_files(p.path()) == before, "byte-identical after signal {signal}");
        let status = read(&p.path().join("output/document_status.parquet"));
        let states = strings(&status, "document_status", "status").unwrap();
        assert!(!states.contains(&"processing"), "signal {signal}: {states:?}");
        assert!(states.contains(&"pending"), "signal {signal}: {states:?}");
        assert_queryable(p.path());
        rerun_with_asks_only_what_was_not_answered(&mock, p.path(), rerun);
        assert_eq!(tables(p.path()), tables(reference.path()), "signal {signal}");
    }

    // A full disk: every write beyond a few KB fails (RLIMIT_FSIZE, EFBIG).
    let p = copy_project(previous.path(), &docs[..3]);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_graphrag-rs"));
    cmd.args(["-q", "index", "--skip-validation", "--root", p.path().to_str().unwrap()]);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit { rlim_cur: 4096, rlim_max: 4096 };
            libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    assert!(!o.status.success(), "{}", text(&o));
    assert!(index_files(p.path()) == before, "byte-identical after a full disk: {}", text(&o));
    assert_queryable(p.path());
    index_ok(p.path());
    assert_eq!(tables(p.path()), tables(reference.path()));
}

#[test]
fn tolerated_failures_are_named_and_asked_again_by_the_next_run() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let docs = documents();
    let reference = project(&mock, &docs[..1], 4);
    index_ok(reference.path());
    let p = project(&mock, &docs[..1], 4);
    let settings = fs::read_to_string(p.path().join("settings.yaml")).unwrap();
    fs::write(p.path().join("settings.yaml"), format!("{settings}failures:\n  tolerated_fraction: 1.0\n")).unwrap();
    mock.set_faults(vec![fault(FaultKind::Malformed, None)]);
    let o = index(p.path());
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("failed and were left out") && err.contains("document part0.txt, chunk 1 of"), "{err}");
    let stats: serde_json::Value =
        serde_json::from_slice(&fs::read(p.path().join("output/stats.json")).unwrap()).unwrap();
    assert_eq!(stats["status"], "completed");
    assert!(!stats["failed_items"].as_array().unwrap().is_empty());
    let status = read(&p.path().join("output/document_status.parquet"));
    let errors = status.column_by_name("error").unwrap();
    assert!(arrow_array::Array::is_valid(errors, 0), "the document's missing chunks are noted");
    rerun_asks_only_what_was_not_answered(&mock, p.path());
    assert_eq!(tables(p.path()), tables(reference.path()));
}

#[test]
fn a_model_that_keeps_failing_is_not_called_for_every_remaining_chunk() {
    let mock = MockServer::start(MockConfig {
        faults: vec![FaultRule::always(FaultKind::ServerError { status: 503 }).on(Endpoint::Chat)],
        ..MockConfig::default()
    })
    .unwrap();
    let p = project_with(&mock, &documents(), "concurrent_requests: 1\nmax_retries: 0\nmax_consecutive_failures: 3");
    let o = index(p.path());
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let chunks = failed_stats(p.path())["failed_items"].as_array().unwrap().len();
    assert!(chunks >= 8, "every chunk is a named failure: {err}");
    assert!(err.contains(&format!("{chunks} of {chunks} text units failed")), "{err}");
    assert!(err.contains("max_consecutive_failures"), "{err}");
    assert_eq!(mock.stats().chat_requests, 3, "3 failed calls, then none");
}

#[test]
fn an_api_key_in_the_api_base_query_is_never_shown() {
    // A closed port: the connection error names the URL.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    assert!(graphrag(&["init", "--root", root.to_str().unwrap()]).status.success());
    put(root, &documents()[0]);
    let settings = format!(
        "completion_models:\n  default_completion_model:\n    model: m\n    api_base: http://127.0.0.1:{port}/v1?api-key=sk-in-url-31337\n    max_retries: 1\n    retry_base_delay: 0.001\n"
    );
    fs::write(root.join("settings.yaml"), settings).unwrap();
    // Stopped by the start-up check, and, without it, by the run's own requests.
    for (extra, expected) in [(None, "nothing is listening"), (Some("--skip-validation"), "could not connect")] {
        let mut args = vec!["index", "--root", root.to_str().unwrap(), "--method", "standard"];
        args.extend(extra);
        let o = graphrag(&args);
        assert!(!o.status.success());
        let all = text(&o);
        assert!(all.contains(expected), "{all}");
        let log = fs::read_to_string(root.join("logs/indexing-engine.log")).unwrap_or_default();
        for (what, shown) in [("output", &all), ("log", &log)] {
            assert!(!shown.contains("sk-in-url-31337"), "the {what} shows the key: {shown}");
        }
    }
}

#[test]
fn global_search_without_one_usable_model_answer_fails_naming_the_calls() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let p = project(&mock, &documents()[..2], 4);
    let r = p.path().to_str().unwrap();
    index_ok(p.path());
    let query = |question: &str, extra: &[&str]| {
        graphrag(&[&["query", "--root", r, "--method", "global"], extra, &[question]].concat())
    };
    let sorry = "I am sorry but I am unable to answer";
    // No community is relevant (no rating reaches the threshold): a genuine
    // "no data" answer.
    let o = query("Zebras quantum xylophone?", &["--dynamic-community-selection"]);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains(sorry), "{}", text(&o));

    // No usable answer at all: an error naming the calls, never "sorry".
    for kind in [FaultKind::Mixed, FaultKind::Huge { bytes: 2 << 20 }] {
        mock.set_faults(vec![fault(kind.clone(), None)]);
        for (extra, calls) in [
            (&[][..], "map call 1 of "),
            (&["--json"][..], "map call 1 of "),
            (&["--streaming"][..], "map call 1 of "),
            (&["--dynamic-community-selection"][..], "community rating of community "),
        ] {
            let o = query("Who is Marley, and why does his ghost visit Scrooge?", extra);
            let case = format!("{kind:?} {extra:?}");
            assert_eq!(o.status.code(), Some(1), "{case}: {}", text(&o));
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(err.contains("global search failed: none of its") && err.contains(calls), "{case}: {err}");
            assert!(!text(&o).contains(sorry), "{case}: {}", text(&o));
        }
    }
}

#[test]
fn smaller_defects() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let docs = documents();
    let p = project(&mock, &docs[..1], 4);
    let root = p.path();
    let r = root.to_str().unwrap();
    index_ok(root);

    // A long question from a file or standard input.
    let question = "Who is Marley,\nand why does his ghost visit Scrooge?";
    fs::write(root.join("q.txt"), question).unwrap();
    let args = ["query", "--root", r, "--method", "global", "--context-only", "--json"];
    let from_file = graphrag(&[&args[..], &["--question-file", root.join("q.txt").to_str().unwrap()]].concat());
    assert!(from_file.status.success(), "{}", text(&from_file));
    let json: serde_json::Value = serde_json::from_slice(&from_file.stdout).unwrap();
    assert_eq!(json["question"], question);
    let mut child = Command::new(env!("CARGO_BIN_EXE_graphrag-rs"))
        .args([&args[..], &["--question-file", "-"]].concat())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), question.as_bytes()).unwrap();
    let from_stdin = child.wait_with_output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&from_stdin.stdout).unwrap();
    assert_eq!(json["question"], question);

    // Corrupt cache entries: one warning, the count in stats.json.
    let corrupted = corrupt_cache(&root.join("cache"));
    assert!(corrupted > 5);
    let o = graphrag(&["-q", "index", "--root", r]);
    assert!(o.status.success(), "{}", text(&o));
    let warnings = String::from_utf8_lossy(&o.stderr).matches("corrupt cache entr").count();
    assert_eq!(warnings, 1, "{}", text(&o));
    let stats: serde_json::Value = serde_json::from_slice(&fs::read(root.join("output/stats.json")).unwrap()).unwrap();
    let corrupt: u64 = stats["llm"].as_object().unwrap().values().map(|u| u["cache_corrupt"].as_u64().unwrap()).sum();
    assert_eq!(corrupt as usize, corrupted);

    // A corrupt status table does not block the next run.
    fs::write(root.join("output/document_status.parquet"), b"PAR1 garbage").unwrap();
    index_ok(root);
    run_ok("update", root);

    // Nonsense settings stop even a dry run, naming file, line and key.
    let settings = fs::read_to_string(root.join("settings.yaml")).unwrap();
    let api_base = settings.lines().find(|l| l.contains("api_base")).unwrap();
    for (bad, key) in [("    request_timeout: 0", "request_timeout"), ("    api_base: not a url", "api_base")] {
        let changed = settings.replacen(api_base, bad, 1);
        let line = changed.lines().position(|l| l == bad).unwrap() + 1;
        fs::write(root.join("settings.yaml"), changed).unwrap();
        let o = graphrag(&["index", "--root", r, "--dry-run"]);
        assert!(!o.status.success(), "{bad} accepted");
        let err = text(&o);
        assert!(err.contains(&format!("settings.yaml:{line}")) && err.contains(key), "{bad}: {err}");
    }
    // Folders a run cannot use stop it, and its dry run, naming file, line and key.
    let line = settings.lines().count() + 2;
    for (bad, key) in [
        ("output_storage:\n  base_dir: settings.yaml/output", "output_storage.base_dir"),
        ("input_storage:\n  base_dir: no-such-folder", "input_storage.base_dir"),
    ] {
        fs::write(root.join("settings.yaml"), format!("{settings}{bad}\n")).unwrap();
        for args in [&["index", "--dry-run"][..], &["index"], &["update", "--dry-run"], &["update"]] {
            let o = graphrag(&[args, &["--root", r]].concat());
            assert!(!o.status.success(), "{key} {args:?}: {}", text(&o));
            let err = text(&o);
            assert!(err.contains(&format!("settings.yaml:{line}: `{key}`: the ")), "{key} {args:?}: {err}");
        }
    }
    fs::write(root.join("settings.yaml"), format!("{settings}input:\n  file_pattern: \"(\"\n")).unwrap();
    let o = graphrag(&["index", "--root", r, "--dry-run"]);
    assert!(String::from_utf8_lossy(&o.stderr).trim_end().ends_with("unclosed group"), "{}", text(&o));

    // A logs folder that cannot be made: the error names it.
    fs::write(root.join("settings.yaml"), &settings).unwrap();
    fs::remove_dir_all(root.join("logs")).unwrap();
    fs::write(root.join("logs"), "a file where the log folder goes").unwrap();
    let o = graphrag(&["index", "--root", r]);
    assert!(!o.status.success());
    assert!(text(&o).contains(&root.join("logs").display().to_string()), "{}", text(&o));
    fs::remove_file(root.join("logs")).unwrap();

    // `update` removes the last document.
    fs::remove_file(root.join("input").join(&docs[0].0)).unwrap();
    run_ok("update", root);
    assert_eq!(read(&root.join("output/documents.parquet")).num_rows(), 0);
    assert_eq!(read(&root.join("output/entities.parquet")).num_rows(), 0);
}

/// Overwrites every cache entry with garbage; how many.
fn corrupt_cache(dir: &Path) -> usize {
    let mut n = 0;
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            n += corrupt_cache(&path);
        } else if path.extension().is_some_and(|x| x == "answers") {
            // Each answer of a segment cut short, its line whole (key, tab, answer).
            let segment = fs::read_to_string(&path).unwrap();
            let lines: Vec<String> = segment.lines().map(|l| format!("{}\t{{\"content\": trunc\n", &l[..64])).collect();
            n += lines.len();
            fs::write(&path, lines.concat()).unwrap();
        } else {
            fs::write(&path, b"{\"content\": trunc").unwrap();
            n += 1;
        }
    }
    n
}
