//! An index on an object store (a real S3 API server, moto, started on
//! loopback): the documents read from the bucket, the index published there
//! as a version behind a manifest, equal byte for byte to the same index
//! built in a local folder; a reader's copy of the published version.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use graphrag_engine::storage::{publish, Storage};
use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_project::{IndexOptions, OpenOptions, Project, RunSettings};

struct Moto(Child, String);

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// moto on a free loopback port; None (loudly) when not installed outside CI.
fn moto() -> Option<Moto> {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let spawned = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let child = match spawned {
        Ok(child) => child,
        Err(e) if std::env::var("CI").is_err() => {
            eprintln!("SKIPPED: moto_server not found ({e}): pip install \"moto[server]\"");
            return None;
        }
        Err(e) => panic!("moto_server not found under CI: {e}"),
    };
    let moto = Moto(child, format!("http://127.0.0.1:{port}"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "moto did not listen within 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(moto)
}

fn create_bucket(moto: &Moto, name: &str) {
    let url = format!("{}/{name}", moto.1);
    let created = Command::new("curl").args(["-sf", "-o", "/dev/null", "-X", "PUT", &url]).status().unwrap();
    assert!(created.success(), "creating bucket {name}");
}

/// A storage section on moto's bucket `bucket` under `prefix`.
fn s3(moto: &Moto, bucket: &str, prefix: &str) -> String {
    format!(
        "\n    type: s3\n    bucket: {bucket}\n    base_dir: {prefix}\n    endpoint_url: {}\n    region: us-east-1\n",
        moto.1
    )
}

fn settings(mock: &MockServer) -> String {
    let model = |name: &str| {
        format!(
            "    model: {name}\n    api_base: {}\n    api_key: sk-test\n    retry_base_delay: 0.001\n",
            mock.base_url()
        )
    };
    format!(
        "completion_models:\n  default_completion_model:\n{}embedding_models:\n  default_embedding_model:\n{}chunking:\n  size: 300\n  overlap: 30\n",
        model("mock-gpt"),
        model("mock-embed")
    )
}

fn index(project: Project) {
    let opts = IndexOptions { resume: false, run: RunSettings { skip_validation: true, ..RunSettings::default() } };
    graphrag_project::index(project, &opts).unwrap_or_else(|e| panic!("{e}"));
}

/// The published files of an output folder but the run's record (stats.json:
/// timings; document_status: wall-clock times).
fn published(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && !p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
        .filter(|(name, _)| name != "stats.json" && name != "document_status.parquet")
        .collect();
    files.sort();
    files
}

#[test]
fn an_index_on_s3_equals_the_local_one_byte_for_byte() {
    let Some(moto) = moto() else { return };
    // Credentials as the AWS SDKs read them (moto accepts any); this test binary's only test.
    std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing-secret");
    let mock = MockServer::start(MockConfig::default()).unwrap();
    for bucket in ["docs", "index", "answers"] {
        create_bucket(&moto, bucket);
    }
    let remote = tempfile::tempdir().unwrap();
    let on_s3 = format!(
        "{}input_storage:{}output_storage:{}cache:\n  type: json\n  storage:{}",
        settings(&mock),
        s3(&moto, "docs", "project/input"),
        s3(&moto, "index", "project/output"),
        s3(&moto, "answers", "project/cache").replace("\n    ", "\n      ")
    );
    std::fs::write(remote.path().join("settings.yaml"), on_s3).unwrap();
    let loaded = graphrag_engine::settings::load(remote.path()).unwrap_or_else(|e| panic!("{e}"));
    let storage = Storage::open(remote.path(), &loaded.settings).unwrap();
    let (input, output) = (storage.input.remote().unwrap(), storage.output.remote().unwrap());
    let docs = [
        ("a.txt", "Ebenezer Scrooge kept the counting-house with Jacob Marley. ".repeat(20)),
        ("sub/b.txt", "Bob Cratchit and Tiny Tim sat by the fire with Scrooge. ".repeat(20)),
    ];
    for (name, text) in &docs {
        input.put(name, text.clone().into_bytes().into()).unwrap();
    }
    // The local project's files carry the objects' times (documents' creation_date).
    let local = tempfile::tempdir().unwrap();
    std::fs::write(local.path().join("settings.yaml"), settings(&mock)).unwrap();
    for listed in input.list("").unwrap() {
        let path = local.path().join("input").join(&listed.key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, input.get(&listed.key).unwrap().unwrap()).unwrap();
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(listed.modified).unwrap();
    }
    let fast = OpenOptions { method: "fast".into(), no_cache: false };
    index(Project::open(local.path(), &fast).unwrap());
    index(Project::open(remote.path(), &fast).unwrap());

    let readers = tempfile::tempdir().unwrap();
    let (copy, version) = publish::fetch(output, readers.path()).unwrap().unwrap();
    assert_eq!(version, 1);
    let expected = published(&local.path().join("output"));
    assert!(expected.iter().any(|(name, _)| name == "entities.parquet"), "{:?}", expected.iter().map(|f| &f.0));
    assert_eq!(published(&copy), expected, "the version on S3 is the local index, byte for byte");
    assert!(
        !remote.path().join("output").exists() && !remote.path().join("cache").exists(),
        "nothing in local folders"
    );
    let answers = Storage::cache(remote.path(), &loaded.settings).unwrap();
    assert!(
        !answers.remote().unwrap().list("").unwrap().is_empty(),
        "the embeddings' answers are cached in the bucket"
    );

    // A second run publishes version 2 from the cached answers; version 1 stays readable.
    let calls = mock.stats().requests;
    index(Project::open(remote.path(), &fast).unwrap());
    assert_eq!(mock.stats().requests, calls, "the rerun asked the model nothing");
    assert_eq!(publish::manifest(output).unwrap().unwrap().version, 2);
    assert_eq!(published(&copy), expected, "the reader's copy of version 1 is untouched");
    let (copy2, _) = publish::fetch(output, readers.path()).unwrap().unwrap();
    assert_eq!(published(&copy2), expected);

    // What a query engine or a server reads: the local copy of the published version.
    let (dir, token) = storage.output.published().unwrap().unwrap();
    assert_eq!((published(&dir), token), (expected, "s3://index/project/output#2".to_string()));
}
