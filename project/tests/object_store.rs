//! An index on an object store (real servers started on loopback: moto's S3,
//! Azurite, fake-gcs-server): the documents read from the bucket, the index
//! published there as a version behind a manifest, equal byte for byte to the
//! same index built in a local folder; a reader's copy of the published version.

#[path = "common/mock_settings.rs"]
mod mock_settings;
#[path = "../../tests/common/object_servers.rs"]
mod object_servers;
#[path = "../../tests/common/published.rs"]
mod published;

use std::path::Path;
use std::sync::Once;

use graphrag_engine::settings::LoadedSettings;
use graphrag_engine::storage::{publish, Storage};
use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_project::{IndexOptions, OpenOptions, Project, RunSettings, UpdateOptions};
use mock_settings::settings;
use object_servers::{ObjectServer, MOTO_KEY_ID, MOTO_SECRET};
use published::{published, Files};

/// Credentials as the AWS SDKs read them (moto accepts any); set once, before
/// any test of this binary makes a client.
fn aws_credentials() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        std::env::set_var("AWS_ACCESS_KEY_ID", MOTO_KEY_ID);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", MOTO_SECRET);
    });
}

/// A storage section on moto's bucket `bucket` under `prefix`.
fn s3(moto: &ObjectServer, bucket: &str, prefix: &str) -> String {
    format!(
        "\n    type: s3\n    bucket: {bucket}\n    base_dir: {prefix}\n    endpoint_url: {}\n    region: us-east-1\n",
        moto.endpoint()
    )
}

/// Input, output and cache on S3: (bucket, prefix) of each.
fn s3_sections(moto: &ObjectServer, [input, output, cache]: [(&str, &str); 3]) -> String {
    format!(
        "input_storage:{}output_storage:{}cache:\n  type: json\n  storage:{}",
        s3(moto, input.0, input.1),
        s3(moto, output.0, output.1),
        s3(moto, cache.0, cache.1).replace("\n    ", "\n      ")
    )
}

/// The storage sections `graphrag init` writes, with blob chosen and only the
/// connection string and container filled in.
fn blob_init_sections(azurite: &ObjectServer, container: &str) -> String {
    let blob = |base_dir: &str, indent: &str| {
        format!(
            "{indent}type: blob # [file, blob, cosmosdb]\n{indent}connection_string: \"{}\"\n{indent}container_name: \"{container}\"\n{indent}base_dir: \"{base_dir}\"\n",
            azurite.azurite_connection_string()
        )
    };
    format!(
        "input_storage:\n{}\noutput_storage:\n{}\nreporting:\n  type: file # [file, blob]\n  base_dir: \"logs\"\n\ncache:\n  type: json # [json, memory, sqlite, none]\n  storage:\n{}",
        blob("input", "  "),
        blob("output", "  "),
        blob("cache", "    ")
    )
}

/// Input, output and cache as prefixes of fake-gcs-server's `bucket`.
fn gcs_sections(bucket: &str) -> String {
    let gcs = |base_dir: &str, indent: &str| {
        format!("\n{indent}type: gcs\n{indent}bucket: {bucket}\n{indent}base_dir: {base_dir}\n")
    };
    format!(
        "input_storage:{}output_storage:{}cache:\n  type: json\n  storage:{}",
        gcs("input", "  "),
        gcs("output", "  "),
        gcs("cache", "    ")
    )
}

fn index(project: Project) {
    let opts = IndexOptions { resume: false, run: RunSettings { skip_validation: true, ..RunSettings::default() } };
    graphrag_project::index(project, &opts).unwrap_or_else(|e| panic!("{e}"));
}

const DOCS: [(&str, &str); 2] = [
    ("a.txt", "Ebenezer Scrooge kept the counting-house with Jacob Marley. "),
    ("sub/b.txt", "Bob Cratchit and Tiny Tim sat by the fire with Scrooge. "),
];

/// A project whose storage is `sections` (its documents put in its input
/// store) and its twin in local folders (the same files, carrying the
/// objects' times: documents' creation_date), both indexed with `method`.
struct Twins {
    remote: tempfile::TempDir,
    local: tempfile::TempDir,
    loaded: LoadedSettings,
    storage: Storage,
}

fn index_twins(mock: &MockServer, sections: &str, method: &str) -> Twins {
    let remote = tempfile::tempdir().unwrap();
    std::fs::write(remote.path().join("settings.yaml"), format!("{}{sections}", settings(mock))).unwrap();
    let loaded = graphrag_engine::settings::load(remote.path()).unwrap_or_else(|e| panic!("{e}"));
    let storage = Storage::open(remote.path(), &loaded.settings).unwrap();
    let local = tempfile::tempdir().unwrap();
    std::fs::write(local.path().join("settings.yaml"), settings(mock)).unwrap();
    for (name, sentence) in DOCS {
        add_document(&storage, local.path(), name, &sentence.repeat(20));
    }
    let opts = OpenOptions { method: method.into(), no_cache: false };
    index(Project::open(local.path(), &opts).unwrap());
    index(Project::open(remote.path(), &opts).unwrap());
    Twins { remote, local, loaded, storage }
}

/// Puts a document in the remote input store and the same file, with the
/// object's time, in the local project's input folder.
fn add_document(storage: &Storage, local: &Path, name: &str, text: &str) {
    let input = storage.input.remote().unwrap();
    input.put(name, text.to_string().into_bytes().into()).unwrap();
    let listed = input.list("").unwrap().into_iter().find(|o| o.key == name).unwrap();
    let path = local.join("input").join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    std::fs::File::options().write(true).open(&path).unwrap().set_modified(listed.modified).unwrap();
}

/// The version published on the remote output equals the local index byte
/// for byte; returns the readers' folder, the fetched copy and the local files.
fn assert_published_equals_local(twins: &Twins, version: u64) -> (tempfile::TempDir, std::path::PathBuf, Files) {
    let readers = tempfile::tempdir().unwrap();
    let (copy, fetched) = publish::fetch(twins.storage.output.remote().unwrap(), readers.path()).unwrap().unwrap();
    assert_eq!(fetched, version);
    let expected = published(&twins.local.path().join("output"));
    assert!(expected.iter().any(|(name, _)| name == "entities.parquet"), "{:?}", expected.iter().map(|f| &f.0));
    assert_eq!(published(&copy), expected, "the published version is the local index, byte for byte");
    assert!(
        !twins.remote.path().join("output").exists() && !twins.remote.path().join("cache").exists(),
        "nothing in local folders"
    );
    let answers = Storage::cache(twins.remote.path(), &twins.loaded.settings).unwrap();
    assert!(!answers.remote().unwrap().list("").unwrap().is_empty(), "the model's answers are cached remotely");
    (readers, copy, expected)
}

#[test]
fn an_index_on_s3_equals_the_local_one_byte_for_byte() {
    let Some(moto) = object_servers::moto(&[]) else { return };
    aws_credentials();
    let mock = MockServer::start(MockConfig::default()).unwrap();
    for bucket in ["docs", "index", "answers"] {
        moto.create_bucket(bucket);
    }
    let sections =
        s3_sections(&moto, [("docs", "project/input"), ("index", "project/output"), ("answers", "project/cache")]);
    let twins = index_twins(&mock, &sections, "fast");
    let (readers, copy, expected) = assert_published_equals_local(&twins, 1);
    let output = twins.storage.output.remote().unwrap();

    // A second run publishes version 2 from the cached answers; version 1 stays readable.
    let calls = mock.stats().requests;
    let fast = OpenOptions { method: "fast".into(), no_cache: false };
    index(Project::open(twins.remote.path(), &fast).unwrap());
    assert_eq!(mock.stats().requests, calls, "the rerun asked the model nothing");
    assert_eq!(publish::manifest(output).unwrap().unwrap().version, 2);
    assert_eq!(published(&copy), expected, "the reader's copy of version 1 is untouched");
    let (copy2, _) = publish::fetch(output, readers.path()).unwrap().unwrap();
    assert_eq!(published(&copy2), expected);

    // What a query engine or a server reads: the local copy of the published version.
    let (dir, token) = twins.storage.output.published().unwrap().unwrap();
    assert_eq!((published(&dir), token), (expected, "s3://index/project/output#2".to_string()));
}

/// The requests of a rerun from the cache (stats.json of the version it
/// published, in `copy`): some on each storage, and on the cache one GET per
/// segment at most, not one per answer.
fn assert_cached_rerun_reads_segments(twins: &Twins, copy: &Path) {
    let stats: serde_json::Value = serde_json::from_slice(&std::fs::read(copy.join("stats.json")).unwrap()).unwrap();
    let requests = &stats["storage_requests"];
    let count = |key: &str, kind: &str| requests[key][kind].as_u64().unwrap_or_else(|| panic!("{key}: {requests}"));
    for key in ["input_storage", "output_storage", "cache.storage"] {
        assert!(count(key, "gets") > 0 && count(key, "bytes_read") > 0, "{key}: {requests}");
    }
    assert_eq!(count("cache.storage", "puts"), 0, "nothing new to cache: {requests}");
    let cache = Storage::cache(twins.remote.path(), &twins.loaded.settings).unwrap();
    let segments = cache.remote().unwrap().list("").unwrap().iter().filter(|o| o.key.ends_with(".answers")).count();
    let hits: u64 = stats["llm"].as_object().unwrap().values().map(|m| m["cache_hits"].as_u64().unwrap()).sum();
    assert!(count("cache.storage", "gets") <= segments as u64, "{segments} segments: {requests}");
    assert!(hits > segments as u64, "{hits} cached answers in {segments} segments");
}

#[test]
fn an_index_on_azurite_with_graphrag_init_blob_settings_equals_the_local_one() {
    let Some(azurite) = object_servers::azurite() else { return };
    let mock = MockServer::start(MockConfig::default()).unwrap();
    azurite.create_container("graphrag");
    let twins = index_twins(&mock, &blob_init_sections(&azurite, "graphrag"), "fast");
    assert_published_equals_local(&twins, 1);
}

#[test]
fn an_index_on_gcs_equals_the_local_one_byte_for_byte() {
    let Some(server) = object_servers::gcs() else { return };
    // object_store reads the emulator's key from the process's environment,
    // which the tests' threads share: this binary has one GCS test.
    for (key, value) in server.gcs_environment() {
        std::env::set_var(key, value);
    }
    let mock = MockServer::start(MockConfig::default()).unwrap();
    server.create_bucket("graphrag");
    let twins = index_twins(&mock, &gcs_sections("graphrag"), "fast");
    let (readers, copy, expected) = assert_published_equals_local(&twins, 1);

    // A second run replaces the manifest (the generation it read as precondition).
    let calls = mock.stats().requests;
    index(Project::open(twins.remote.path(), &OpenOptions { method: "fast".into(), no_cache: false }).unwrap());
    assert_eq!(mock.stats().requests, calls, "the rerun asked the model nothing");
    let (copy2, version) = publish::fetch(twins.storage.output.remote().unwrap(), readers.path()).unwrap().unwrap();
    assert_eq!((version, published(&copy2)), (2, expected.clone()));
    assert_eq!(published(&copy), expected, "the reader's copy of version 1 is untouched");
    let (_, token) = twins.storage.output.published().unwrap().unwrap();
    assert_eq!(token, "gs://graphrag/output#2");
}

#[test]
fn a_standard_index_and_update_on_s3_equal_the_local_ones() {
    let Some(moto) = object_servers::moto(&[]) else { return };
    aws_credentials();
    let mock = MockServer::start(MockConfig::default()).unwrap();
    moto.create_bucket("graphrag");
    let sections = s3_sections(&moto, [("graphrag", "input"), ("graphrag", "output"), ("graphrag", "cache")]);
    let twins = index_twins(&mock, &sections, "standard");
    let (readers, copy, expected) = assert_published_equals_local(&twins, 1);

    // Indexed again from the cache: the model is asked nothing, the cache read by segment.
    let calls = mock.stats().requests;
    index(Project::open(twins.remote.path(), &OpenOptions { method: "standard".into(), no_cache: false }).unwrap());
    assert_eq!(mock.stats().requests, calls, "the rerun asked the model nothing");
    let (copy2, version) = publish::fetch(twins.storage.output.remote().unwrap(), readers.path()).unwrap().unwrap();
    assert_eq!((version, published(&copy2)), (2, expected.clone()));
    assert_cached_rerun_reads_segments(&twins, &copy2);

    // `update` with one more document, on both; version 1 stays as it was.
    let text = "Fezziwig danced with his apprentices at the Christmas ball. ".repeat(20);
    add_document(&twins.storage, twins.local.path(), "c.txt", &text);
    let opts = UpdateOptions {
        run: RunSettings { skip_validation: true, ..RunSettings::default() },
        ..UpdateOptions::default()
    };
    graphrag_project::update(twins.local.path(), &opts).unwrap_or_else(|e| panic!("{e}"));
    graphrag_project::update(twins.remote.path(), &opts).unwrap_or_else(|e| panic!("{e}"));
    assert_published_equals_local(&twins, 3);
    assert_eq!(published(&copy), expected, "the reader's copy of version 1 is untouched");
}

#[test]
fn a_missing_output_bucket_is_named_at_its_own_setting() {
    let Some(moto) = object_servers::moto(&[]) else { return };
    aws_credentials();
    let mock = MockServer::start(MockConfig::default()).unwrap();
    for bucket in ["docs", "answers"] {
        moto.create_bucket(bucket);
    }
    let sections = s3_sections(
        &moto,
        [("docs", "project/input"), ("no-such-index", "project/output"), ("answers", "project/cache")],
    );
    let root = tempfile::tempdir().unwrap();
    let text = format!("{}{sections}", settings(&mock));
    std::fs::write(root.path().join("settings.yaml"), &text).unwrap();
    let line = text.lines().position(|l| l.starts_with("output_storage:")).unwrap() + 1;
    let opts = OpenOptions { method: "fast".into(), no_cache: false };
    let err = format!("{:#}", Project::open(root.path(), &opts).err().expect("a missing bucket is an error"));
    assert!(err.contains(&format!("settings.yaml:{line}: `output_storage`")), "{err}");
    assert!(err.contains("no-such-index"), "{err}");
}
