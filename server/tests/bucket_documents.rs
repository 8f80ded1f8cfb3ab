//! The documents API of a project whose input and index are both in an S3
//! bucket (a real moto server on loopback): an upload is written to the
//! bucket's input, indexed by the update and listed `processed` by the
//! writer and by a read-only replica; a deletion removes the object and the
//! document from the index.

#[path = "../../tests/common/object_servers.rs"]
#[allow(dead_code)] // Azurite is not used here
mod object_servers;

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use common::{carol, delete_json, get, idle_after, multipart, post_json, request, wait_for};
use graphrag_engine::storage::{Location, Storage};
use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_project::{IndexOptions, OpenOptions, Project, RunSettings};
use graphrag_server::{ServeOptions, Server};
use serde_json::{json, Value};

fn settings(mock: &MockServer, moto: &object_servers::ObjectServer) -> String {
    let storage = |section: &str, dir: &str| {
        format!(
            "{section}:\n  type: s3\n  bucket: docs\n  base_dir: team/{dir}\n  endpoint_url: {}\n  region: us-east-1\n",
            moto.endpoint()
        )
    };
    format!(
        "completion_models:\n  default_completion_model:\n    model: gpt-4.1-mini\nembedding_models:\n  default_embedding_model:\n    model: mock-embed\n    api_base: {}\n    api_key: sk-test\n    retry_base_delay: 0.001\n    max_retry_wait: 0.05\nchunking:\n  size: 300\n  overlap: 30\n{}{}serve:\n  poll_seconds: 0.2\n",
        mock.base_url(),
        storage("input_storage", "input"),
        storage("output_storage", "output"),
    )
}

/// The project's input location (the bucket's prefix), as a run opens it.
fn input(root: &Path) -> Location {
    let settings = graphrag_engine::settings::load(root).unwrap().settings;
    Storage::open(root, &settings).unwrap().input
}

fn input_names(root: &Path) -> Vec<String> {
    input(root).list().unwrap().into_iter().map(|f| f.path).collect()
}

/// Each listed document's status, by file name.
fn statuses(addr: SocketAddr) -> BTreeMap<String, String> {
    let r = post_json(addr, "/documents/paginated", &json!({"page": 1, "page_size": 100}));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["file_path"].as_str().unwrap().to_string(), d["status"].as_str().unwrap().to_string()))
        .collect()
}

fn processed(names: &[&str]) -> BTreeMap<String, String> {
    names.iter().map(|n| (n.to_string(), "processed".to_string())).collect()
}

fn version(addr: SocketAddr) -> String {
    get(addr, "/health").json()["index"]["version"].as_str().unwrap().to_string()
}

#[test]
fn documents_uploaded_to_a_bucket_input_are_indexed_listed_and_deleted() {
    let Some(moto) = object_servers::moto(&[]) else { return };
    // Credentials as the AWS SDKs read them (moto accepts any); this binary's only test.
    std::env::set_var("AWS_ACCESS_KEY_ID", object_servers::MOTO_KEY_ID);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", object_servers::MOTO_SECRET);
    moto.create_bucket("docs");
    let mock = MockServer::start(MockConfig::default()).unwrap();

    // The writer's project has no input folder: its documents are objects.
    let writer_root = tempfile::tempdir().unwrap();
    std::fs::write(writer_root.path().join("settings.yaml"), settings(&mock, &moto)).unwrap();
    input(writer_root.path()).put("fezziwig.txt", carol("Old Fezziwig", 1500).as_bytes()).unwrap();
    let fast = OpenOptions { method: "fast".into(), no_cache: false };
    let opts = IndexOptions { resume: false, run: RunSettings { skip_validation: true, ..RunSettings::default() } };
    graphrag_project::index(Project::open(writer_root.path(), &fast).unwrap(), &opts).unwrap_or_else(|e| panic!("{e}"));
    let writer = Server::start(ServeOptions { port: 0, ..ServeOptions::new(writer_root.path()) }).unwrap();
    let replica_root = tempfile::tempdir().unwrap();
    std::fs::write(replica_root.path().join("settings.yaml"), settings(&mock, &moto)).unwrap();
    let replica =
        Server::start(ServeOptions { port: 0, read_only: true, ..ServeOptions::new(replica_root.path()) }).unwrap();
    assert_eq!(statuses(writer.addr()), processed(&["fezziwig.txt"]));
    assert_eq!(statuses(replica.addr()), processed(&["fezziwig.txt"]), "a replica lists the published documents");
    let health = get(writer.addr(), "/health").json();
    assert_eq!(health["input_directory"], "s3://docs/team/input", "{health}");

    // An upload goes to the bucket, where the update lists it.
    let (content_type, body) = multipart("marley.txt", carol("Marley was dead", 1500).as_bytes());
    let r = request(writer.addr(), "POST", "/documents/upload", &[("Content-Type", &content_type)], &body);
    assert_eq!(r.status, 200, "{}", r.text());
    idle_after(writer.addr(), 1);
    assert_eq!(input_names(writer_root.path()), ["fezziwig.txt", "marley.txt"]);
    assert_eq!(statuses(writer.addr()), processed(&["fezziwig.txt", "marley.txt"]));
    let published = version(writer.addr());
    wait_for("the replica to load the new version", || (version(replica.addr()) == published).then_some(()));
    assert_eq!(
        statuses(replica.addr()),
        processed(&["fezziwig.txt", "marley.txt"]),
        "the published version says `processed` of what it indexed"
    );
    let answer: Value = post_json(
        replica.addr(),
        "/query",
        &json!({"query": "Marley was dead", "mode": "basic", "only_need_context": true}),
    )
    .json();
    assert!(answer.to_string().contains("marley.txt"), "the uploaded document is found: {answer}");

    // A name the input has already is a 409, decided by the bucket.
    let r = request(writer.addr(), "POST", "/documents/upload", &[("Content-Type", &content_type)], &body);
    assert_eq!(r.status, 409, "{}", r.text());

    // A deletion removes the object and the document.
    let documents = post_json(writer.addr(), "/documents/paginated", &json!({"page": 1, "page_size": 100})).json();
    let marley = documents["documents"].as_array().unwrap().iter().find(|d| d["file_path"] == "marley.txt").unwrap();
    let r = delete_json(writer.addr(), "/documents/delete_document", &json!({"doc_ids": [marley["id"]]}));
    assert_eq!(r.status, 200, "{}", r.text());
    idle_after(writer.addr(), 2);
    assert_eq!(input_names(writer_root.path()), ["fezziwig.txt"]);
    assert_eq!(statuses(writer.addr()), processed(&["fezziwig.txt"]));

    // The replica follows the third version and keeps two on disk: its disk does not grow.
    let published = version(writer.addr());
    wait_for("the replica to load the third version", || (version(replica.addr()) == published).then_some(()));
    assert_eq!(statuses(replica.addr()), processed(&["fezziwig.txt"]));
    assert_eq!(version_copies(replica_root.path()), ["v-000002", "v-000003"]);
}

/// The versions a reader keeps local copies of under its project folder.
fn version_copies(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap().map(Result::unwrap) {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !entry.file_type().unwrap().is_dir() {
                continue;
            }
            match name.strip_prefix("v-") {
                Some(_) => found.push(name),
                None => folders.push(entry.path()),
            }
        }
    }
    found.sort();
    found
}
