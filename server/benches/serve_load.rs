//! Load test of `serve` (loopback only, bounded; results in
//! docs/benchmarks.md): CLIENTS concurrent clients × SECONDS of mixed
//! queries (local, global, basic, hybrid, mix, drift; every question unique,
//! so no answer comes from the cache) against the example corpus's index,
//! with the mock LLM at LATENCY_MS (CONTEXT_ONLY=1: retrieval only, no model
//! call); then the same while a document is uploaded and, once indexed,
//! deleted again (two updates), checking that no query fails, that every
//! answer comes from one of the three indexes (its `index_version`), and
//! that only answers from the index holding the new document cite it. Ends
//! with the process's resident memory (server and clients: one process).
//!
//! usage: LATENCY_MS=200 SECONDS=60 CLIENTS=16 CONTEXT_ONLY=0 cargo bench -p graphrag-server --bench serve_load

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_server::{ServeOptions, Server};
use serde_json::json;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Numbers the questions of every phase: no question is asked twice, so
/// neither its answer nor its embedding comes from the cache.
static QUESTIONS: AtomicU64 = AtomicU64::new(0);

const METHODS: [&str; 6] = ["local", "global", "basic", "hybrid", "mix", "drift"];

struct Outcome {
    latencies: Vec<f64>,
    /// (method, latency ms) of each query.
    by_method: Vec<(&'static str, f64)>,
    errors: Vec<String>,
    versions: Vec<(String, bool)>,
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn run(
    addr: std::net::SocketAddr,
    clients: u64,
    seconds: u64,
    context_only: bool,
    during: impl FnOnce() + Send,
) -> Outcome {
    let stop = AtomicBool::new(false);
    let counter = &QUESTIONS;
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let results: Vec<Outcome> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|_| {
                let stop = &stop;
                s.spawn(move || {
                    let mut o = Outcome {
                        latencies: Vec::new(),
                        by_method: Vec::new(),
                        errors: Vec::new(),
                        versions: Vec::new(),
                    };
                    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
                        let n = counter.fetch_add(1, Ordering::Relaxed);
                        let mode = METHODS[n as usize % METHODS.len()];
                        let q = format!("Question {n}: what does Scrooge learn, and who is Quillfeather?");
                        let started = Instant::now();
                        let ask = json!({"query": q, "mode": mode, "only_need_context": context_only});
                        let r = post_json(addr, "/query", &ask);
                        let ms = started.elapsed().as_secs_f64() * 1e3;
                        o.latencies.push(ms);
                        o.by_method.push((mode, ms));
                        if r.status != 200 {
                            o.errors.push(format!("{mode}: {} {}", r.status, r.text()));
                            continue;
                        }
                        let v = r.json();
                        let cites_new = v["references"]
                            .as_array()
                            .is_some_and(|refs| refs.iter().any(|x| x["file_path"] == "quillfeather.txt"));
                        o.versions.push((v["index_version"].as_str().unwrap_or_default().to_string(), cites_new));
                    }
                    o
                })
            })
            .collect();
        during();
        let out = handles.into_iter().map(|h| h.join().unwrap()).collect();
        stop.store(true, Ordering::Relaxed);
        out
    });
    let mut all = Outcome { latencies: Vec::new(), by_method: Vec::new(), errors: Vec::new(), versions: Vec::new() };
    for r in results {
        all.latencies.extend(r.latencies);
        all.by_method.extend(r.by_method);
        all.errors.extend(r.errors);
        all.versions.extend(r.versions);
    }
    all.latencies.sort_by(|a, b| a.partial_cmp(b).unwrap());
    all
}

fn report(label: &str, o: &Outcome, seconds: f64) {
    println!(
        "{label}: {} queries in {seconds:.0} s = {:.1} q/s; latency p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms; {} errors",
        o.latencies.len(),
        o.latencies.len() as f64 / seconds,
        percentile(&o.latencies, 0.5),
        percentile(&o.latencies, 0.99),
        o.latencies.last().copied().unwrap_or(0.0),
        o.errors.len()
    );
    let per_method: Vec<String> = METHODS
        .iter()
        .map(|m| {
            let mut l: Vec<f64> = o.by_method.iter().filter(|(x, _)| x == m).map(|(_, ms)| *ms).collect();
            l.sort_by(|a, b| a.partial_cmp(b).unwrap());
            format!("{m} {:.0}", percentile(&l, 0.5))
        })
        .collect();
    println!("  p50 by method (ms): {}", per_method.join(", "));
    for e in o.errors.iter().take(5) {
        println!("  error: {e}");
    }
}

/// A line of /proc/self/status (`VmRSS`, `VmHWM`) in MB.
fn memory_mb(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok());
    kb.unwrap_or(0.0) / 1024.0
}

/// Waits until the writer has finished `runs` update runs; their last error.
fn updated(addr: std::net::SocketAddr, runs: u64) -> serde_json::Value {
    wait_for("the update", || {
        let p = get(addr, "/documents/pipeline_status").json();
        (p["busy"] == false && p["runs"].as_u64().unwrap_or(0) >= runs).then_some(())
    });
    get(addr, "/documents/pipeline_status").json()["last_error"].clone()
}

fn version(addr: std::net::SocketAddr) -> String {
    get(addr, "/health").json()["index"]["version"].as_str().unwrap().to_string()
}

fn main() {
    let (latency, seconds, clients) = (env("LATENCY_MS", 0), env("SECONDS", 60), env("CLIENTS", 16));
    let context_only = env("CONTEXT_ONLY", 0) == 1;
    // The index is built with a mock at 0 ms; the server's queries go to one at LATENCY_MS.
    let indexer = MockServer::start(MockConfig::default()).unwrap();
    let corpus = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/christmas-carol/a_christmas_carol.txt"),
    )
    .unwrap();
    let project = project(&indexer, &[("a_christmas_carol.txt", corpus)]);
    let root = project.path();
    let started = Instant::now();
    index(root);
    println!("indexed the example corpus in {:.1} s", started.elapsed().as_secs_f64());
    let mock =
        MockServer::start(MockConfig { latency: Duration::from_millis(latency), ..MockConfig::default() }).unwrap();
    let settings = std::fs::read_to_string(root.join("settings.yaml")).unwrap();
    // Up to 64 requests in flight per model, so that the model's concurrency limit is not what is measured;
    // every client is 127.0.0.1, so one client's connection bounds are the server's own.
    let serving = settings
        .replace(&indexer.base_url(), &mock.base_url())
        .replace("concurrent_requests: 4", "concurrent_requests: 64");
    let one_client = "serve:\n  max_connections_per_client: 256\n  max_pending_connections_per_client: 256\n";
    std::fs::write(root.join("settings.yaml"), format!("{serving}{one_client}")).unwrap();
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(root) }).unwrap();
    let addr = server.addr();
    let answers = if context_only { "context only" } else { "answers" };
    println!("mock latency {latency} ms, {clients} clients, {answers}, {seconds} s per phase");

    let steady = run(addr, clients, seconds, context_only, || {});
    report("queries", &steady, seconds as f64);

    let old = version(addr);
    let versions = std::sync::Mutex::new((String::new(), String::new(), 0.0, 0.0));
    let during = run(addr, clients, seconds, context_only, || {
        let t = Instant::now();
        let text = "Quillfeather is the lamplighter of the street where Scrooge lives. Quillfeather lights the lamps at dusk and greets Bob Cratchit every evening.".repeat(4);
        let (content_type, body) = multipart("quillfeather.txt", text.as_bytes());
        let r = request(addr, "POST", "/documents/upload", &[("Content-Type", content_type.as_str())], &body);
        assert_eq!(r.status, 200, "{}", r.text());
        let error = updated(addr, 1);
        assert!(error.is_null(), "the upload's update failed: {error}");
        let (with_doc, upload_s) = (version(addr), t.elapsed().as_secs_f64());
        let t = Instant::now();
        let listed = get(addr, "/documents").json();
        let id = ["processed", "pending", "processing", "failed"]
            .iter()
            .flat_map(|s| listed["statuses"][s].as_array().cloned().unwrap_or_default())
            .find(|d| d["file_path"] == "quillfeather.txt")
            .map(|d| d["id"].clone())
            .expect("the uploaded document is listed");
        let r = delete_json(addr, "/documents/delete_document", &json!({"doc_ids": [id]}));
        assert_eq!(r.status, 200, "{}", r.text());
        let error = updated(addr, 2);
        assert!(error.is_null(), "the delete's update failed: {error}");
        *versions.lock().unwrap() = (with_doc, version(addr), upload_s, t.elapsed().as_secs_f64());
    });
    let (with_doc, after_delete, upload_s, delete_s) = versions.into_inner().unwrap();
    report("queries during an upload and a delete", &during, seconds as f64);
    let count = |v: &str| during.versions.iter().filter(|(x, _)| x == v).count();
    let known = [&old, &with_doc, &after_delete];
    let other = during.versions.iter().filter(|(v, _)| !known.contains(&v)).count();
    let wrongly_citing = during.versions.iter().filter(|(v, cites)| *cites && *v != with_doc).count();
    println!(
        "  upload indexed in {upload_s:.1} s, delete in {delete_s:.1} s; answers from the index before {}, with the document {}, after its delete {}, any other {other}; answers citing it from an index without it: {wrongly_citing}",
        count(&old),
        count(&with_doc),
        count(&after_delete)
    );
    println!("  resident memory now {:.0} MB, peak {:.0} MB", memory_mb("VmRSS"), memory_mb("VmHWM"));
}
