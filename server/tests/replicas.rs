//! Serving from object storage, replicated: one writer `serve` and two
//! `serve --read-only` replicas on one S3 bucket (a real moto server on
//! loopback). A document inserted through the writer is published to the
//! bucket and found by both replicas within their poll interval; the
//! replicas refuse writes; queries across publications never fail and each
//! answers from exactly one version.

#[path = "../../tests/common/object_servers.rs"]
#[allow(dead_code)] // Azurite is not used here
mod object_servers;

mod common;

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{carol, delete_json, get, idle_after, post_json, project};
use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_project::{IndexOptions, OpenOptions, Project, RunSettings};
use graphrag_server::{ServeOptions, Server};
use serde_json::{json, Value};

/// How often the replicas look for a new publication (seconds).
const POLL_SECONDS: f64 = 0.2;

/// Settings of a project whose index is published to `bucket` on moto
/// (embeddings from the mock server; no chat model: the fast method and
/// context-only queries need none).
fn settings(mock: &MockServer, moto: &object_servers::ObjectServer, bucket: &str) -> String {
    format!(
        "completion_models:\n  default_completion_model:\n    model: gpt-4.1-mini\nembedding_models:\n  default_embedding_model:\n    model: mock-embed\n    api_base: {}\n    api_key: sk-test\n    retry_base_delay: 0.001\n    max_retry_wait: 0.05\nchunking:\n  size: 300\n  overlap: 30\noutput_storage:\n  type: s3\n  bucket: {bucket}\n  base_dir: shared/output\n  endpoint_url: {}\n  region: us-east-1\nserve:\n  poll_seconds: {POLL_SECONDS}\n",
        mock.base_url(),
        moto.endpoint()
    )
}

fn version(addr: SocketAddr) -> String {
    get(addr, "/health").json()["index"]["version"].as_str().unwrap().to_string()
}

fn context(addr: SocketAddr, question: &str) -> (u16, Value) {
    let r = post_json(addr, "/query", &json!({"query": question, "mode": "basic", "only_need_context": true}));
    let body = if r.status == 200 { r.json() } else { json!(r.text()) };
    (r.status, body)
}

fn files_of(answer: &Value) -> BTreeSet<String> {
    answer["references"].as_array().unwrap().iter().map(|r| r["file_path"].as_str().unwrap().to_string()).collect()
}

/// The documents the writer has indexed.
fn indexed(addr: SocketAddr) -> BTreeSet<String> {
    let r = post_json(addr, "/documents/paginated", &json!({"page": 1, "page_size": 100}));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["documents"].as_array().unwrap().iter().map(|d| d["file_path"].as_str().unwrap().to_string()).collect()
}

/// Waits (bounded: a few poll intervals and a load) until `addr` answers from `want`.
fn until_version(addr: SocketAddr, want: &str) -> Duration {
    let started = Instant::now();
    while version(addr) != want {
        assert!(started.elapsed() < Duration::from_secs(30), "the replica at {addr} did not load version {want}");
        std::thread::sleep(Duration::from_millis(20));
    }
    started.elapsed()
}

fn replica(root: &Path) -> Server {
    Server::start(ServeOptions { port: 0, read_only: true, ..ServeOptions::new(root) }).unwrap()
}

#[test]
fn replicas_on_one_bucket_follow_the_writer_and_refuse_writes() {
    let Some(moto) = object_servers::moto(&[]) else { return };
    // Credentials as the AWS SDKs read them (moto accepts any); this binary's only test.
    std::env::set_var("AWS_ACCESS_KEY_ID", object_servers::MOTO_KEY_ID);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", object_servers::MOTO_SECRET);
    moto.create_bucket("index");
    let mock = MockServer::start(MockConfig::default()).unwrap();

    // The writer: its documents in its own folder, its index published to the bucket.
    let writer_root = project(&mock, &[("fezziwig.txt", carol("Old Fezziwig", 1500))]);
    std::fs::write(writer_root.path().join("settings.yaml"), settings(&mock, &moto, "index")).unwrap();
    let fast = OpenOptions { method: "fast".into(), no_cache: false };
    let opts = IndexOptions { resume: false, run: RunSettings { skip_validation: true, ..RunSettings::default() } };
    graphrag_project::index(Project::open(writer_root.path(), &fast).unwrap(), &opts).unwrap_or_else(|e| panic!("{e}"));
    let writer = Server::start(ServeOptions { port: 0, ..ServeOptions::new(writer_root.path()) }).unwrap();

    // Two replicas: the same settings, no documents of their own.
    let replica_roots: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    for root in &replica_roots {
        std::fs::write(root.path().join("settings.yaml"), settings(&mock, &moto, "index")).unwrap();
    }
    let replicas: Vec<Server> = replica_roots.iter().map(|r| replica(r.path())).collect();
    let addrs: Vec<SocketAddr> = replicas.iter().map(Server::addr).collect();

    let first = version(writer.addr());
    let mut docs_of: HashMap<String, BTreeSet<String>> = HashMap::new();
    docs_of.insert(first.clone(), indexed(writer.addr()));
    for &addr in &addrs {
        let health = get(addr, "/health").json();
        assert_eq!(health["role"], "read-only replica", "{health}");
        assert_eq!(health["index"]["loaded"], true, "a replica loads the published version at start: {health}");
        assert_eq!(health["index"]["version"], first.as_str());
    }
    assert_eq!(get(writer.addr(), "/health").json()["role"], "writer");

    // Every write is refused by a replica, naming its role; nothing is queued.
    for (method, path, body) in [
        ("POST", "/documents/text", json!({"text": "Marley was dead.", "file_source": "marley"})),
        ("POST", "/documents/scan", json!({})),
        ("DELETE", "/documents/delete_document", json!({"doc_ids": ["x"]})),
        ("DELETE", "/documents", json!({})),
        ("POST", "/graph/entity/create", json!({"entity_name": "X", "entity_data": {}})),
        ("POST", "/documents/cancel_pipeline", json!({})),
    ] {
        let r = match method {
            "POST" => post_json(addrs[0], path, &body),
            _ => delete_json(addrs[0], path, &body),
        };
        assert_eq!(r.status, 403, "{method} {path}: {}", r.text());
        let detail = r.json()["detail"].as_str().unwrap().to_string();
        assert!(detail.contains("read-only replica") && detail.contains("writer"), "{detail}");
    }
    let p = get(addrs[0], "/documents/pipeline_status").json();
    assert_eq!((p["runs"].as_u64(), p["busy"].as_bool()), (Some(0), Some(false)), "{p}");

    // Three publications by the writer under a steady load on both replicas.
    let inserts = [
        ("marley", carol("Marley was dead", 1500)),
        ("cratchit", carol("Bob Cratchit", 1500)),
        ("tiny-tim", carol("Tiny Tim", 1500)),
    ];
    let stop = AtomicBool::new(false);
    let answers: Vec<(u16, Value)> = std::thread::scope(|s| {
        let clients: Vec<_> = addrs
            .iter()
            .map(|&addr| {
                let stop = &stop;
                s.spawn(move || {
                    let mut out = Vec::new();
                    while !stop.load(Ordering::SeqCst) {
                        out.push(context(addr, "Who are Fezziwig, Marley, Bob Cratchit and Tiny Tim?"));
                    }
                    out
                })
            })
            .collect();
        for (i, (name, text)) in inserts.iter().enumerate() {
            let r = post_json(writer.addr(), "/documents/text", &json!({"text": text, "file_source": name}));
            assert_eq!(r.status, 200, "{}", r.text());
            idle_after(writer.addr(), i as u64 + 1);
            let published = version(writer.addr());
            docs_of.insert(published.clone(), indexed(writer.addr()));
            for &addr in &addrs {
                until_version(addr, &published);
                let (status, answer) =
                    context(addr, &format!("{name}: {}", text.chars().take(200).collect::<String>()));
                assert_eq!(status, 200, "{answer}");
                assert!(
                    files_of(&answer).iter().any(|f| f.contains(name)),
                    "the replica at {addr} finds the document {name} just published: {answer}"
                );
            }
        }
        stop.store(true, Ordering::SeqCst);
        clients.into_iter().flat_map(|c| c.join().unwrap()).collect()
    });
    assert_eq!(docs_of.len(), 4, "four versions: {docs_of:?}");
    assert!(answers.len() >= 6, "the load ran: {} queries", answers.len());
    let mut seen = BTreeSet::new();
    for (status, answer) in &answers {
        assert_eq!(*status, 200, "no failed query: {answer}");
        let version = answer["index_version"].as_str().unwrap();
        let docs = docs_of.get(version).unwrap_or_else(|| panic!("an answer from an unknown version: {answer}"));
        let files = files_of(answer);
        assert!(!files.is_empty() && files.is_subset(docs), "{files:?} all of version {version} ({docs:?})");
        seen.insert(version.to_string());
    }
    eprintln!("{} queries on the replicas, from {} versions", answers.len(), seen.len());
    drop(replicas);
    drop(writer);
}
