//! Load test of `serve` (loopback only, bounded; results in
//! docs/benchmarks.md): CLIENTS concurrent clients × SECONDS of mixed
//! queries (local, global, basic, hybrid, mix, drift; every question unique,
//! so no answer comes from the cache) against the example corpus's index,
//! with the mock LLM at LATENCY_MS; then the same while an upload-triggered
//! update runs, checking that no query fails and every answer comes from the
//! old or the new index (its `index_version`), and that answers from the old
//! one never cite the new document.
//!
//! usage: LATENCY_MS=200 SECONDS=60 CLIENTS=16 cargo bench -p graphrag-server --bench serve_load

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

fn run(addr: std::net::SocketAddr, clients: u64, seconds: u64, during: impl FnOnce() + Send) -> Outcome {
    let stop = AtomicBool::new(false);
    let counter = AtomicU64::new(0);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let results: Vec<Outcome> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|_| {
                let (stop, counter) = (&stop, &counter);
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
                        let r = post_json(addr, "/query", &json!({"query": q, "mode": mode}));
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

fn main() {
    let (latency, seconds, clients) = (env("LATENCY_MS", 0), env("SECONDS", 60), env("CLIENTS", 16));
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
    // Up to 64 requests in flight per model, so that the model's concurrency limit is not what is measured.
    let serving = settings
        .replace(&indexer.base_url(), &mock.base_url())
        .replace("concurrent_requests: 4", "concurrent_requests: 64");
    std::fs::write(root.join("settings.yaml"), serving).unwrap();
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(root) }).unwrap();
    let addr = server.addr();
    println!("mock latency {latency} ms, {clients} clients, {seconds} s per phase");

    let steady = run(addr, clients, seconds, || {});
    report("queries", &steady, seconds as f64);

    let old = get(addr, "/health").json()["index"]["version"].as_str().unwrap().to_string();
    let update_took = std::sync::Mutex::new(0.0);
    let during = run(addr, clients, seconds, || {
        let t = Instant::now();
        let text = "Quillfeather is the lamplighter of the street where Scrooge lives. Quillfeather lights the lamps at dusk and greets Bob Cratchit every evening.".repeat(4);
        let r = post_json(addr, "/documents/text", &json!({"text": text, "file_source": "quillfeather"}));
        assert_eq!(r.status, 200, "{}", r.text());
        wait_for("the update", || {
            let p = get(addr, "/documents/pipeline_status").json();
            (p["busy"] == false && p["runs"].as_u64().unwrap_or(0) >= 1).then_some(())
        });
        *update_took.lock().unwrap() = t.elapsed().as_secs_f64();
    });
    let new = get(addr, "/health").json()["index"]["version"].as_str().unwrap().to_string();
    let status = get(addr, "/documents/pipeline_status").json();
    report("queries during an update", &during, seconds as f64);
    let from_old = during.versions.iter().filter(|(v, _)| *v == old).count();
    let from_new = during.versions.iter().filter(|(v, _)| *v == new).count();
    let other = during.versions.len() - from_old - from_new;
    let old_citing_new = during.versions.iter().filter(|(v, cites)| *v == old && *cites).count();
    println!(
        "  update ran {:.1} s (last error: {}); answers from the old index {from_old}, the new {from_new}, any other {other}; old answers citing the new document: {old_citing_new}",
        update_took.lock().unwrap(),
        status["last_error"]
    );
    println!("  new index cites the new document: {}", during.versions.iter().any(|(v, c)| *v == new && *c));
}
