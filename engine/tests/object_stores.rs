//! The object-store connector against real servers on loopback: moto's S3
//! server, Azurite and fake-gcs-server (behind the upload adapter of
//! tests/common/object_servers.rs). Reads, writes, listings and both conditional-put modes
//! (what publication by manifest and the writer's lease rely on), and the
//! typed errors: a missing bucket, refused credentials, an endpoint that is
//! down. Skipped with a message where the servers are not installed, except
//! under CI.

#[path = "../../tests/common/object_servers.rs"]
mod object_servers;

use std::time::{Duration, Instant};

use futures_util::TryStreamExt;
use graphrag_engine::settings::{AzureAccount, RemoteService, RemoteStorage, Secret, Settings, StorageTarget};
use graphrag_engine::storage::counting::CountingStore;
use graphrag_engine::storage::remote::{connect, RemoteError, RemoteStore};
use object_servers::{ObjectServer, MOTO_KEY_ID, MOTO_SECRET};
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};

/// moto takes any key; every test sets the same values (the environment is
/// the process's, shared by the tests' threads). The environment's endpoints
/// point nowhere: each test's `endpoint_url` setting must win over them.
fn aws_environment() {
    std::env::set_var("AWS_ACCESS_KEY_ID", MOTO_KEY_ID);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", MOTO_SECRET);
    std::env::set_var("AWS_REGION", "us-east-1");
    std::env::set_var("AWS_ENDPOINT_URL", "http://127.0.0.1:9");
    std::env::set_var("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9");
}

fn s3(server: &ObjectServer, bucket: &str, prefix: &str) -> RemoteStorage {
    aws_environment();
    let service = RemoteService::S3 { bucket: bucket.into(), endpoint_url: Some(server.endpoint()), region: None };
    RemoteStorage { service, prefix: prefix.into() }
}

fn blob(connection_string: String, container: &str, prefix: &str) -> RemoteStorage {
    let account = AzureAccount::ConnectionString(Secret::from(connection_string.as_str()));
    RemoteStorage { service: RemoteService::AzureBlob { container: container.into(), account }, prefix: prefix.into() }
}

/// A prefix of fake-gcs-server's `bucket`. object_store reads the emulator's
/// key from the process's environment, which the tests' threads share: this
/// binary has one GCS test.
fn gcs(server: &ObjectServer, bucket: &str, prefix: &str) -> RemoteStorage {
    for (key, value) in server.gcs_environment() {
        std::env::set_var(key, value);
    }
    RemoteStorage { service: RemoteService::Gcs { bucket: bucket.into() }, prefix: prefix.into() }
}

fn put_mode(mode: PutMode) -> PutOptions {
    PutOptions { mode, ..PutOptions::default() }
}

/// What storage-core's publication does with a store: objects under a
/// version prefix, a manifest created once and then replaced only by the
/// writer that read its e-tag.
async fn exercise(remote: &RemoteStore) {
    let store = CountingStore::new(remote.store.clone());
    let table = remote.prefix.clone().join("v-1").join("entities.parquet");
    store.put(&table, PutPayload::from_static(b"PAR1 table bytes")).await.unwrap();
    assert_eq!(store.get(&table).await.unwrap().bytes().await.unwrap(), "PAR1 table bytes");
    assert_eq!(store.get_range(&table, 0..4).await.unwrap(), "PAR1", "ranged read (Parquet footers)");

    let manifest = remote.prefix.clone().join("manifest.json");
    let first = store.put_opts(&manifest, "v-1".into(), put_mode(PutMode::Create)).await.unwrap();
    let again = store.put_opts(&manifest, "v-x".into(), put_mode(PutMode::Create)).await;
    assert!(matches!(again, Err(object_store::Error::AlreadyExists { .. })), "Create over a manifest: {again:?}");

    let read = store.get(&manifest).await.unwrap();
    let version = UpdateVersion { e_tag: read.meta.e_tag.clone(), version: read.meta.version.clone() };
    assert_eq!(read.bytes().await.unwrap(), "v-1");
    assert_eq!(version.e_tag, first.e_tag, "the e-tag a put returns is the one a get reads");
    store.put_opts(&manifest, "v-2".into(), put_mode(PutMode::Update(version.clone()))).await.unwrap();
    let stale = store.put_opts(&manifest, "v-3".into(), put_mode(PutMode::Update(version))).await;
    assert!(matches!(stale, Err(object_store::Error::Precondition { .. })), "Update with a stale e-tag: {stale:?}");
    assert_eq!(store.get(&manifest).await.unwrap().bytes().await.unwrap(), "v-2", "the stale writer changed nothing");

    let mut names: Vec<String> =
        store.list(Some(&remote.prefix)).map_ok(|m| m.location.to_string()).try_collect().await.unwrap();
    names.sort();
    let under = |name: &str| format!("{}/{name}", remote.prefix);
    assert_eq!(names, [under("manifest.json"), under("v-1/entities.parquet")]);
    let level = store.list_with_delimiter(Some(&remote.prefix)).await.unwrap();
    assert_eq!(level.common_prefixes, [remote.prefix.clone().join("v-1")]);

    store.delete(&table).await.unwrap();
    assert!(matches!(store.head(&table).await, Err(object_store::Error::NotFound { .. })));
    let counts = store.counts();
    assert_eq!((counts.puts, counts.lists, counts.deletes, counts.heads), (5, 2, 1, 1), "{counts:?}");
    assert_eq!(counts.gets, 4, "{counts:?}");
}

#[tokio::test]
async fn s3_on_moto_reads_writes_lists_and_puts_conditionally() {
    let Some(moto) = object_servers::moto(&[]) else { return };
    moto.create_bucket("graphrag");
    let remote = connect("output_storage", &s3(&moto, "graphrag", "project/output")).await.unwrap();
    exercise(&remote).await;
}

#[tokio::test]
async fn blob_on_azurite_reads_writes_lists_and_puts_conditionally() {
    let Some(azurite) = object_servers::azurite() else { return };
    azurite.create_container("graphrag");
    let remote =
        connect("output_storage", &blob(azurite.azurite_connection_string(), "graphrag", "output")).await.unwrap();
    exercise(&remote).await;
}

/// GCS's conditional puts are generation preconditions: Create is
/// `x-goog-if-generation-match: 0`, Update the generation a get read.
#[tokio::test]
async fn gcs_on_fake_gcs_server_reads_writes_lists_and_puts_conditionally() {
    let Some(server) = object_servers::gcs() else { return };
    server.create_bucket("graphrag");
    let remote = connect("output_storage", &gcs(&server, "graphrag", "project/output")).await.unwrap();
    assert_eq!(remote.endpoint(), server.endpoint(), "the key's gcs_base_url, plain HTTP allowed");
    exercise(&remote).await;
}

#[tokio::test]
async fn a_missing_bucket_or_container_is_named_with_its_setting() {
    let Some(moto) = object_servers::moto(&[]) else { return };
    let err = connect("output_storage", &s3(&moto, "no-such-bucket", "output")).await.unwrap_err();
    assert!(matches!(err, RemoteError::NoSuchBucket { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.starts_with("output_storage: S3 bucket `no-such-bucket`") && text.contains("does not exist"),
        "{text}"
    );

    let Some(azurite) = object_servers::azurite() else { return };
    let err =
        connect("cache.storage", &blob(azurite.azurite_connection_string(), "absent", "cache")).await.unwrap_err();
    assert!(matches!(err, RemoteError::NoSuchBucket { .. }), "{err:?}");
    assert!(err.to_string().starts_with("cache.storage: blob container `absent`"), "{err}");
}

#[tokio::test]
async fn refused_credentials_are_access_denied_and_never_in_the_message() {
    // moto checks credentials against its (empty) IAM users from the first request on.
    let Some(moto) = object_servers::moto(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")]) else { return };
    let err = connect("input_storage", &s3(&moto, "graphrag", "input")).await.unwrap_err();
    assert!(matches!(err, RemoteError::AccessDenied { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.starts_with("input_storage: access to S3 bucket `graphrag`"), "{text}");
    assert!(!text.contains(MOTO_SECRET), "{text}");

    let Some(azurite) = object_servers::azurite() else { return };
    azurite.create_container("graphrag");
    let wrong_key = "d3JvbmcgZGV2ZWxvcG1lbnQga2V5IGZvciB0aGUgdGVzdCBvbmx5IQ==";
    let connection = azurite.azurite_connection_string().replace(object_servers::AZURITE_KEY, wrong_key);
    let err = connect("output_storage", &blob(connection, "graphrag", "output")).await.unwrap_err();
    assert!(matches!(err, RemoteError::AccessDenied { .. }), "{err:?}");
    let text = format!("{err} {err:?}");
    assert!(!text.contains(wrong_key) && !text.contains(object_servers::AZURITE_KEY), "{text}");
}

#[tokio::test]
async fn an_endpoint_that_is_down_is_named_within_seconds() {
    aws_environment();
    let port = object_servers::free_port();
    let service = RemoteService::S3 {
        bucket: "graphrag".into(),
        endpoint_url: Some(format!("http://127.0.0.1:{port}")),
        region: None,
    };
    let start = Instant::now();
    let err = connect("output_storage", &RemoteStorage { service, prefix: "output".into() }).await.unwrap_err();
    // Bounded retries and the probe's own limit (10 s), not object_store's default 3 minutes.
    assert!(start.elapsed() < Duration::from_secs(15), "{:?}", start.elapsed());
    assert!(matches!(err, RemoteError::EndpointDown { .. }), "{err:?}");
    assert!(err.to_string().contains(&format!("127.0.0.1:{port}")), "{err}");
}

/// `graphrag init` 3.3's settings.yaml with input, output and cache switched
/// to blob storage the way its comment says (type, connection_string and
/// container_name; base_dir kept): each section reaches its own prefix of one
/// Azurite container.
#[tokio::test]
async fn graphrag_init_blob_settings_reach_azurite() {
    let Some(azurite) = object_servers::azurite() else { return };
    azurite.create_container("graphrag");
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/graphrag-3.3.0-init/settings.yaml");
    let init = std::fs::read_to_string(fixture).unwrap();
    let blob_keys = format!(
        "type: blob\n{indent}connection_string: \"{}\"\n{indent}container_name: graphrag",
        azurite.azurite_connection_string(),
        indent = "  "
    );
    let text =
        init.replace("type: file # [file, blob, cosmosdb]\n  base_dir:", &format!("{blob_keys}\n  base_dir:")).replace(
            "type: file # [file, blob, cosmosdb]\n    base_dir:",
            &format!("{}\n    base_dir:", blob_keys.replace("\n  ", "\n    ")),
        );
    assert_eq!(text.matches("type: blob").count(), 3, "{text}");
    let settings: Settings = serde_yaml_ng::from_str(&text).unwrap();
    let cache = settings.cache.storage.as_ref().unwrap();
    for (setting, section) in [
        ("input_storage", &settings.input_storage),
        ("output_storage", &settings.output_storage),
        ("cache.storage", cache),
    ] {
        let StorageTarget::Remote(remote) = section.target().unwrap() else { panic!("{setting}: not remote") };
        let store = connect(setting, &remote).await.unwrap();
        store.store.put(&store.prefix.clone().join("probe.txt"), setting.into()).await.unwrap();
    }
    let container =
        connect("output_storage", &blob(azurite.azurite_connection_string(), "graphrag", "")).await.unwrap();
    let mut names: Vec<String> =
        container.store.list(None).map_ok(|m| m.location.to_string()).try_collect().await.unwrap();
    names.sort();
    assert_eq!(names, ["cache/probe.txt", "input/probe.txt", "output/probe.txt"]);
}

/// A setting moved to another prefix gets a working copy of its own: the
/// first prefix's files are never where a run on the second starts from
/// (or what it uploads).
#[test]
fn each_object_store_prefix_has_its_own_working_copy() {
    let Some(moto) = object_servers::moto(&[]) else { return };
    moto.create_bucket("copies");
    aws_environment();
    let root = tempfile::tempdir().unwrap();
    let output_dir = |prefix: &str| {
        let text = format!(
            "output_storage:\n  type: s3\n  bucket: copies\n  base_dir: {prefix}\n  endpoint_url: {}\n",
            moto.endpoint()
        );
        let settings: Settings = serde_yaml_ng::from_str(&text).unwrap();
        graphrag_engine::storage::Storage::open(root.path(), &settings)
            .unwrap()
            .output
            .working_copy()
            .path()
            .to_path_buf()
    };
    let (first, second) = (output_dir("index-a"), output_dir("index-b"));
    assert_ne!(first, second);
    assert_eq!(first, output_dir("index-a"), "one prefix, one copy");
    assert!(first.starts_with(root.path().join(".graphrag-rs")), "{}", first.display());
}
