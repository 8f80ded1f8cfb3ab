//! One scenario, unchanged over four backends — a folder, S3 (moto), Azure
//! Blob (Azurite) and GCS (fake-gcs-server), real servers on loopback —
//! with the input, the output and the answer cache in the store: a project
//! indexed there, served by a writer and a read-only replica; an upload is
//! written to the store's input, indexed and listed `processed` by both; a
//! graph edit is applied; a deletion removes the object and the document;
//! the replica follows each publication and keeps two versions on disk.
//! Every table the scenario publishes (but those holding the input's file
//! times and the run's: documents, their status, stats.json) equals the
//! folder run's, byte for byte.

#[path = "../../tests/common/object_servers.rs"]
mod object_servers;
#[path = "../../tests/common/published.rs"]
mod published;

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;

use common::{carol, delete_json, get, idle_after, multipart, post_json, request, wait_for};
use graphrag_engine::storage::{Location, Published, Storage};
use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_project::{IndexOptions, OpenOptions, Project, RunSettings};
use graphrag_server::{ServeOptions, Server};
use object_servers::ObjectServer;
use serde_json::{json, Value};

/// Where a scenario keeps its project's data.
enum Backend {
    Folder,
    S3(ObjectServer),
    Azure(ObjectServer),
    /// Its clients find fake-gcs-server through the environment: held to keep it running.
    Gcs {
        _server: ObjectServer,
    },
}

const BUCKET: &str = "scenario";

impl Backend {
    /// The storage section of `dir` (input, output, cache) on this backend,
    /// indented by `indent`.
    fn section(&self, dir: &str, indent: &str) -> String {
        let lines: Vec<String> = match self {
            Backend::Folder => vec!["type: file".into(), format!("base_dir: data/{dir}")],
            Backend::S3(moto) => vec![
                "type: s3".into(),
                format!("bucket: {BUCKET}"),
                format!("base_dir: team/{dir}"),
                format!("endpoint_url: {}", moto.endpoint()),
                "region: us-east-1".into(),
            ],
            Backend::Azure(azurite) => vec![
                "type: blob".into(),
                format!("connection_string: \"{}\"", azurite.azurite_connection_string()),
                format!("container_name: {BUCKET}"),
                format!("base_dir: team/{dir}"),
            ],
            Backend::Gcs { .. } => {
                vec!["type: gcs".into(), format!("bucket: {BUCKET}"), format!("base_dir: team/{dir}")]
            }
        };
        lines.iter().map(|l| format!("{indent}{l}\n")).collect()
    }

    fn settings(&self, mock: &MockServer) -> String {
        format!(
            "completion_models:\n  default_completion_model:\n    model: gpt-4.1-mini\nembedding_models:\n  default_embedding_model:\n    model: mock-embed\n    api_base: {}\n    api_key: sk-test\n    retry_base_delay: 0.001\n    max_retry_wait: 0.05\nchunking:\n  size: 300\n  overlap: 30\ninput_storage:\n{}output_storage:\n{}cache:\n  type: json\n  storage:\n{}serve:\n  poll_seconds: 0.2\n",
            mock.base_url(),
            self.section("input", "  "),
            self.section("output", "  "),
            self.section("cache", "    "),
        )
    }

    /// The input as users name it.
    fn input_url(&self, root: &Path) -> String {
        match self {
            Backend::Folder => root.join("data/input").display().to_string(),
            Backend::S3(_) => format!("s3://{BUCKET}/team/input"),
            Backend::Azure(_) => format!("az://{BUCKET}/team/input"),
            Backend::Gcs { .. } => format!("gs://{BUCKET}/team/input"),
        }
    }
}

/// The project's storage, as a run opens it.
fn storage(root: &Path) -> Storage {
    let settings = graphrag_engine::settings::load(root).unwrap_or_else(|e| panic!("{e}")).settings;
    Storage::open(root, &settings).unwrap()
}

fn input(root: &Path) -> Location {
    storage(root).input
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

/// Waits (bounded) until the replica answers from the writer's version.
fn replica_follows(writer: SocketAddr, replica: SocketAddr) {
    let published = version(writer);
    wait_for("the replica to load the new version", || (version(replica) == published).then_some(()));
}

/// The published tables of the project's index, read as a new reader would
/// (held still while read), but documents.parquet: its creation dates are
/// the input's file or object times.
fn published_tables(root: &Path) -> published::Files {
    let Published::Version(version) = storage(root).output.open_published().unwrap() else {
        panic!("nothing published")
    };
    published::published(version.dir()).into_iter().filter(|(name, _)| name != "documents.parquet").collect()
}

/// The scenario; returns the published tables it ends with.
fn scenario(backend: &Backend, mock: &MockServer) -> published::Files {
    let writer_root = tempfile::tempdir().unwrap();
    std::fs::write(writer_root.path().join("settings.yaml"), backend.settings(mock)).unwrap();
    input(writer_root.path()).put("fezziwig.txt", carol("Old Fezziwig", 1500).as_bytes()).unwrap();
    let fast = OpenOptions { method: "fast".into(), no_cache: false };
    let opts = IndexOptions { resume: false, run: RunSettings { skip_validation: true, ..RunSettings::default() } };
    graphrag_project::index(Project::open(writer_root.path(), &fast).unwrap(), &opts).unwrap_or_else(|e| panic!("{e}"));
    let writer = Server::start(ServeOptions { port: 0, ..ServeOptions::new(writer_root.path()) }).unwrap();
    let replica_root = tempfile::tempdir().unwrap();
    // A folder project's replica reads the writer's folder.
    let replica_settings = match backend {
        Backend::Folder => backend
            .settings(mock)
            .replace("base_dir: data/", &format!("base_dir: {}/data/", writer_root.path().display())),
        _ => backend.settings(mock),
    };
    std::fs::write(replica_root.path().join("settings.yaml"), replica_settings).unwrap();
    let replica =
        Server::start(ServeOptions { port: 0, read_only: true, ..ServeOptions::new(replica_root.path()) }).unwrap();
    let (w, r) = (writer.addr(), replica.addr());
    assert_eq!(statuses(w), processed(&["fezziwig.txt"]));
    assert_eq!(statuses(r), processed(&["fezziwig.txt"]), "a replica lists the published documents");
    let health = get(w, "/health").json();
    assert_eq!(health["input_directory"], backend.input_url(writer_root.path()).as_str(), "{health}");

    // An upload goes to the store's input, where the update lists it.
    let (content_type, body) = multipart("marley.txt", carol("Marley was dead", 1500).as_bytes());
    let answer = request(w, "POST", "/documents/upload", &[("Content-Type", &content_type)], &body);
    assert_eq!(answer.status, 200, "{}", answer.text());
    idle_after(w, 1);
    assert_eq!(input_names(writer_root.path()), ["fezziwig.txt", "marley.txt"]);
    assert_eq!(statuses(w), processed(&["fezziwig.txt", "marley.txt"]));
    replica_follows(w, r);
    assert_eq!(statuses(r), processed(&["fezziwig.txt", "marley.txt"]), "the version says `processed`");
    // Asked with the document's own opening (the mock's embeddings are not semantic).
    let opening: String = carol("Marley was dead", 1500).chars().take(200).collect();
    let context: Value =
        post_json(r, "/query", &json!({"query": opening, "mode": "basic", "only_need_context": true})).json();
    assert!(context["references"].to_string().contains("marley.txt"), "the uploaded document is found: {context}");
    // A name the input has already is a 409, decided by the store.
    let again = request(w, "POST", "/documents/upload", &[("Content-Type", &content_type)], &body);
    assert_eq!(again.status, 409, "{}", again.text());

    // A graph edit, applied by the update it queues and published with it.
    let labels = get(w, "/graph/label/list?limit=1").json();
    let entity = labels[0].as_str().unwrap_or_else(|| panic!("an entity: {labels}")).to_string();
    let edit = json!({"entity_name": entity, "updated_data": {"description": "A kind employer."}});
    let answer = post_json(w, "/graph/entity/edit", &edit);
    assert_eq!(answer.status, 200, "{}", answer.text());
    idle_after(w, 2);
    replica_follows(w, r);
    let node = get(r, &format!("/graph/entity/detail?name={}", entity.replace(' ', "%20"))).json();
    assert!(node.to_string().contains("A kind employer."), "the replica has the edit: {node}");

    // A deletion removes the object and the document.
    let listed = post_json(w, "/documents/paginated", &json!({"page": 1, "page_size": 100})).json();
    let marley = listed["documents"].as_array().unwrap().iter().find(|d| d["file_path"] == "marley.txt").unwrap();
    let answer = delete_json(w, "/documents/delete_document", &json!({"doc_ids": [marley["id"]]}));
    assert_eq!(answer.status, 200, "{}", answer.text());
    idle_after(w, 3);
    assert_eq!(input_names(writer_root.path()), ["fezziwig.txt"]);
    assert_eq!(statuses(w), processed(&["fezziwig.txt"]));
    replica_follows(w, r);
    assert_eq!(statuses(r), processed(&["fezziwig.txt"]));
    if !matches!(backend, Backend::Folder) {
        // Four versions published; the replica's disk holds the last two.
        assert_eq!(version_copies(replica_root.path()), ["v-000003", "v-000004"]);
    }
    drop((writer, replica));
    published_tables(writer_root.path())
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

/// The scenario on `backend`, compared with the same on a folder.
fn same_as_on_a_folder(backend: Backend) {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let expected = scenario(&Backend::Folder, &mock);
    assert!(expected.iter().any(|(name, _)| name == "entities.parquet"), "{:?}", expected.len());
    assert_eq!(scenario(&backend, &mock), expected, "the store's index is the folder's, byte for byte");
}

#[test]
fn on_s3() {
    let Some(moto) = object_servers::moto(&[]) else { return };
    // Credentials as the AWS SDKs read them (moto accepts any).
    std::env::set_var("AWS_ACCESS_KEY_ID", object_servers::MOTO_KEY_ID);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", object_servers::MOTO_SECRET);
    moto.create_bucket(BUCKET);
    same_as_on_a_folder(Backend::S3(moto));
}

#[test]
fn on_azure_blob() {
    let Some(azurite) = object_servers::azurite() else { return };
    azurite.create_container(BUCKET);
    same_as_on_a_folder(Backend::Azure(azurite));
}

#[test]
fn on_gcs() {
    let Some(gcs) = object_servers::gcs() else { return };
    for (key, value) in gcs.gcs_environment() {
        std::env::set_var(key, value);
    }
    gcs.create_bucket(BUCKET);
    same_as_on_a_folder(Backend::Gcs { _server: gcs });
}
