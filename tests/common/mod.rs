//! Helpers of the end-to-end tests that run the binary against the mock
//! LLM server (each test crate uses some of them).
#![allow(dead_code)]

pub mod object_servers;
pub mod published;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use arrow_array::RecordBatch;
use graphrag_mock_llm::MockServer;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

pub fn graphrag(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graphrag-rs")).args(args).output().expect("binary runs")
}

pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Runs `graphrag-rs -q <command> --root ROOT`, asserting success.
pub fn run_ok(command: &str, root: &Path) -> Output {
    let o = graphrag(&["-q", command, "--root", root.to_str().unwrap()]);
    assert!(o.status.success(), "{command}: {}", text(&o));
    o
}

pub fn read(path: &Path) -> RecordBatch {
    let f = fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let builder = ParquetRecordBatchReaderBuilder::try_new(f).unwrap();
    let schema = builder.schema().clone();
    let batches: Vec<_> = builder.build().unwrap().map(|b| b.unwrap()).collect();
    arrow_select::concat::concat_batches(&schema, &batches).unwrap()
}

/// Every published table but the status table (the one with wall-clock times).
pub fn tables(root: &Path) -> BTreeMap<String, RecordBatch> {
    let mut out = BTreeMap::new();
    for entry in fs::read_dir(root.join("output")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".parquet") && name != "document_status.parquet" {
            out.insert(name.trim_end_matches(".parquet").to_string(), read(&path));
        }
    }
    out
}

/// Five documents: consecutive passages of A Christmas Carol, so they
/// share characters (entities with several sources).
pub fn documents() -> Vec<(String, String)> {
    passages(5, 2_000)
}

/// `n` consecutive passages of about `size` bytes of A Christmas Carol,
/// from MARLEY'S GHOST on, as part0.txt, part1.txt, ...
pub fn passages(n: usize, size: usize) -> Vec<(String, String)> {
    let full = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/christmas-carol/a_christmas_carol.txt"),
    )
    .unwrap();
    let mut at = full.find("MARLEY'S GHOST").unwrap();
    (0..n)
        .map(|i| {
            let mut end = (at + size).min(full.len());
            while !full.is_char_boundary(end) {
                end -= 1;
            }
            let passage = full[at..end].to_string();
            at = end;
            (format!("part{i}.txt"), passage)
        })
        .collect()
}

/// Writes an input document with a fixed modification time (the documents'
/// creation_date), as if every copy were the same file.
pub fn put(root: &Path, (name, body): &(String, String)) {
    let path = root.join("input").join(name);
    fs::write(&path, body).unwrap();
    let fixed = std::time::UNIX_EPOCH + Duration::from_secs(1_767_225_600);
    fs::File::options().write(true).open(&path).unwrap().set_modified(fixed).unwrap();
}

/// A project whose models are the mock server, with these documents.
pub fn project(mock: &MockServer, docs: &[(String, String)], concurrency: u32) -> tempfile::TempDir {
    project_with(mock, docs, &format!("concurrent_requests: {concurrency}"))
}

/// [`project`] with more settings for both models (`key: value` lines).
pub fn project_with(mock: &MockServer, docs: &[(String, String)], model_settings: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    assert!(graphrag(&["init", "--root", root]).status.success());
    for doc in docs {
        put(dir.path(), doc);
    }
    fs::write(dir.path().join("settings.yaml"), mock_settings(mock, model_settings)).unwrap();
    dir
}

/// A settings.yaml whose chat and embedding models are the mock server, with
/// more settings for both models (`key: value` lines).
pub fn mock_settings(mock: &MockServer, model_settings: &str) -> String {
    let extra: String = model_settings.lines().map(|l| format!("    {}\n", l.trim())).collect();
    let model = |name: &str| {
        format!(
            "    model: {name}\n    api_base: {}\n    api_key: sk-test\n    retry_base_delay: 0.001\n    max_retry_wait: 0.05\n{extra}",
            mock.base_url()
        )
    };
    format!(
        "completion_models:\n  default_completion_model:\n{}embedding_models:\n  default_embedding_model:\n{}chunking:\n  size: 300\n  overlap: 30\n",
        model("mock-gpt"),
        model("mock-embed")
    )
}

pub fn kind(stats: &graphrag_mock_llm::MockStats, class: &str) -> u64 {
    stats.by_kind.get(class).copied().unwrap_or(0)
}

/// `len` bytes (to a character boundary) of the example corpus, A Christmas
/// Carol, from the first occurrence of `from`.
pub fn carol_passage(from: &str, len: usize) -> String {
    let full = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/christmas-carol/a_christmas_carol.txt"),
    )
    .unwrap();
    let start = full.find(from).unwrap_or_else(|| panic!("`{from}` is not in the example corpus"));
    let mut end = (start + len).min(full.len());
    while !full.is_char_boundary(end) {
        end -= 1;
    }
    full[start..end].to_string()
}

/// Answers in the project's cache (every folder below `cache/`) whose
/// stored form `keep` accepts: each line of a segment (`*.answers`: key,
/// tab, answer) and each file of an older version's layout (`*.json`).
pub fn cached_answers(root: &Path, keep: impl Fn(&[u8]) -> bool + Copy) -> u64 {
    fn walk(dir: &Path, keep: impl Fn(&[u8]) -> bool + Copy) -> u64 {
        let Ok(entries) = fs::read_dir(dir) else { return 0 };
        let count = |path: &Path| -> u64 {
            let Ok(bytes) = fs::read(path) else { return 0 };
            match path.extension().and_then(|x| x.to_str()) {
                Some("json") => u64::from(keep(&bytes)),
                Some("answers") => bytes
                    .split(|&b| b == b'\n')
                    .filter_map(|line| line.iter().position(|&b| b == b'\t').map(|tab| &line[tab + 1..]))
                    .filter(|answer| keep(answer))
                    .count() as u64,
                _ => 0,
            }
        };
        entries.flatten().map(|e| if e.path().is_dir() { walk(&e.path(), keep) } else { count(&e.path()) }).sum()
    }
    walk(&root.join("cache"), keep)
}

/// The objects under `prefix` of moto's bucket `bucket`, as the tests' own
/// client sees them (the credentials set once in this process's environment,
/// as the AWS SDKs and the children read them).
pub fn s3_location(
    moto: &object_servers::ObjectServer,
    bucket: &str,
    prefix: &str,
) -> graphrag_engine::storage::object::ObjectLocation {
    use graphrag_engine::settings::{RemoteService, RemoteStorage};
    static CREDENTIALS: std::sync::Once = std::sync::Once::new();
    CREDENTIALS.call_once(|| {
        std::env::set_var("AWS_ACCESS_KEY_ID", object_servers::MOTO_KEY_ID);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", object_servers::MOTO_SECRET);
    });
    let service = RemoteService::S3 {
        bucket: bucket.into(),
        endpoint_url: Some(moto.endpoint()),
        region: Some("us-east-1".into()),
    };
    let store =
        graphrag_engine::storage::remote::open("test", &RemoteStorage { service, prefix: prefix.into() }).unwrap();
    graphrag_engine::storage::object::ObjectLocation::new(store.store, prefix, format!("s3://{bucket}/{prefix}"))
        .unwrap()
}
