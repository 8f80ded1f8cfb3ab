//! A project whose root is in a bucket (`--root s3://bucket/prefix`, moto on
//! loopback): its settings and documents only in the bucket, indexed by the
//! binary equal byte for byte to the same project indexed in a local folder,
//! queried from the bucket; `init` into a bucket; a missing bucket or
//! settings file named by its URL. A root in an Azure container (Azurite) and
//! in a GCS bucket (fake-gcs-server) is indexed there.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::object_servers::{self, ObjectServer, MOTO_KEY_ID, MOTO_SECRET};
use common::published::published;
use common::{documents, passages, project, text};
use graphrag_engine::settings::{AzureAccount, RemoteService, RemoteStorage, Secret};
use graphrag_engine::storage::object::ObjectLocation;
use graphrag_engine::storage::{publish, remote};
use graphrag_mock_llm::{MockConfig, MockServer};

/// `graphrag-rs ARGS` with moto's endpoint and credentials in the
/// environment (as the AWS SDKs read them) and the user's cache in `cache`.
fn graphrag_on(moto: &ObjectServer, cache: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graphrag-rs"))
        .args(args)
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_ACCESS_KEY_ID", MOTO_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", MOTO_SECRET)
        .env("AWS_REGION", "us-east-1")
        .env("XDG_CACHE_HOME", cache)
        .output()
        .unwrap()
}

/// Kills the server when the test ends, passed or not.
struct Serving(Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The objects under `prefix` of moto's bucket `bucket`.
fn location(moto: &ObjectServer, bucket: &str, prefix: &str) -> ObjectLocation {
    common::s3_location(moto, bucket, prefix)
}

#[test]
fn a_project_root_in_a_bucket_indexes_like_a_local_folder_and_answers() {
    let Some(moto) = object_servers::moto(&[]) else { return };
    moto.create_bucket("projects");
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let url = "s3://projects/team/carol";

    // Nothing there yet: the URL and the cause are named.
    let missing = graphrag_on(&moto, cache.path(), &["-q", "index", "--root", url]);
    assert!(!missing.status.success());
    assert!(text(&missing).contains("s3://projects/team/carol has no settings.yaml"), "{}", text(&missing));
    let no_bucket = graphrag_on(&moto, cache.path(), &["-q", "index", "--root", "s3://no-such-bucket/p"]);
    assert!(!no_bucket.status.success());
    let said = text(&no_bucket);
    assert!(said.contains("s3://no-such-bucket/p") && said.contains("does not exist"), "{said}");

    // The project's settings.yaml, prompts and documents, uploaded into the bucket.
    let local = project(&mock, &documents(), 2);
    let root = location(&moto, "projects", "team/carol");
    root.upload(&local.path().join("settings.yaml"), "settings.yaml").unwrap();
    for prompt in std::fs::read_dir(local.path().join("prompts")).unwrap() {
        let name = prompt.unwrap().file_name().to_string_lossy().into_owned();
        root.upload(&local.path().join("prompts").join(&name), &format!("prompts/{name}")).unwrap();
    }
    for (name, _) in documents() {
        root.upload(&local.path().join("input").join(&name), &format!("input/{name}")).unwrap();
    }
    // The local twin carries the objects' times (documents' creation_date).
    for listed in root.join("input").list("").unwrap() {
        let file = std::fs::File::options().write(true).open(local.path().join("input").join(&listed.key));
        file.unwrap().set_modified(listed.modified).unwrap();
    }
    // Nothing published yet: the hint names the bucket, not the local working copy.
    let o = graphrag_on(&moto, cache.path(), &["query", "--method", "basic", "--root", url, "Who is Marley?"]);
    assert!(!o.status.success());
    let hint = format!("no index in {url}/output: run `graphrag-rs index --root {url}` first");
    assert!(text(&o).contains(&hint), "{}", text(&o));
    let o = graphrag_on(&moto, cache.path(), &["index", "--dry-run", "--method", "fast", "--root", url]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains(&format!("Publishes to {url}/output: ")), "the bucket, not a working copy: {}", text(&o));
    let fast = ["-q", "index", "--method", "fast", "--root"];
    let o = graphrag_on(&moto, cache.path(), &[&fast[..], &[url]].concat());
    assert!(o.status.success(), "index --root {url}: {}", text(&o));
    let o = common::graphrag(&[&fast[..], &[local.path().to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", text(&o));

    let readers = tempfile::tempdir().unwrap();
    let (copy, version) = publish::fetch(&root.join("output"), readers.path()).unwrap().expect("published");
    assert_eq!(version, 1);
    let expected = published(&local.path().join("output"));
    assert!(expected.iter().any(|(name, _)| name == "entities.parquet"));
    assert_eq!(published(&copy), expected, "the index in the bucket is the local one, byte for byte");
    // reporting (`type: file` in the settings) is in the bucket too: one log object per run,
    // a failed run's included, with its error.
    let logs = || root.join("logs").list("").unwrap();
    assert_eq!(logs().len(), 1, "the run's log is in the bucket");
    let failed = graphrag_on(&moto, cache.path(), &["-q", "index", "--method", "no-such-method", "--root", url]);
    assert!(!failed.status.success());
    let after = logs();
    assert_eq!(after.len(), 2, "the failed run's log is uploaded too");
    let texts: Vec<String> = after
        .iter()
        .map(|o| String::from_utf8_lossy(&root.join("logs").get(&o.key).unwrap().unwrap()).into_owned())
        .collect();
    assert_eq!(texts.iter().filter(|t| t.contains("unknown method `no-such-method`")).count(), 1, "{texts:?}");

    // `update --root` with one more document in the bucket equals the local update.
    let (name, body) = passages(6, 2_000).pop().unwrap();
    root.put(&format!("input/{name}"), body.clone().into_bytes().into()).unwrap();
    let added = root.join("input").list("").unwrap().into_iter().find(|o| o.key == name).unwrap();
    let file = local.path().join("input").join(&name);
    std::fs::write(&file, &body).unwrap();
    std::fs::File::options().write(true).open(&file).unwrap().set_modified(added.modified).unwrap();
    let logged = moto.log().len();
    let o = graphrag_on(&moto, cache.path(), &["-q", "update", "--root", url]);
    assert!(o.status.success(), "update --root {url}: {}", text(&o));
    // One connection (one probing LIST) per storage for the whole run.
    let requests = moto.log()[logged..].to_string();
    for storage in ["input", "output"] {
        let probe = format!("delimiter=/&list-type=2&prefix=team/carol/{storage}/ ");
        let probes = requests.lines().filter(|l| l.contains(&probe)).count();
        assert_eq!(probes, 1, "{storage} opened once by update:\n{requests}");
    }
    let o = common::graphrag(&["-q", "update", "--root", local.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let (copy, version) = publish::fetch(&root.join("output"), readers.path()).unwrap().expect("published");
    assert_eq!(version, 2);
    assert_eq!(published(&copy), published(&local.path().join("output")), "the update in the bucket is the local one");

    // Asked from the bucket: the context is the documents', the answer the model's.
    let question = ["query", "--method", "basic", "--root", url];
    let o = graphrag_on(&moto, cache.path(), &[&question[..], &["--context-only", "Who is Marley?"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("Scrooge"), "{}", text(&o));
    let o = graphrag_on(&moto, cache.path(), &[&question[..], &["Who is Marley?"]].concat());
    assert!(o.status.success() && !o.stdout.is_empty(), "{}", text(&o));
    // prompt-tune writes its prompts (and the backup of those it replaced) back into the bucket.
    let before = root.get("prompts/extract_graph.txt").unwrap().unwrap();
    let o = graphrag_on(
        &moto,
        cache.path(),
        &["-q", "prompt-tune", "--selection-method", "top", "--limit", "2", "--root", url],
    );
    assert!(o.status.success(), "prompt-tune --root {url}: {}", text(&o));
    assert_ne!(root.get("prompts/extract_graph.txt").unwrap().unwrap(), before, "the tuned prompt is in the bucket");
    let backups = root.join("prompts").list("").unwrap();
    assert!(
        backups.iter().any(|o| o.key.starts_with("prompt-tune-backup-") && o.key.ends_with("/extract_graph.txt")),
        "{backups:?}"
    );

    // Served from the bucket: the published version, read through the working copy.
    let mut serve = Command::new(env!("CARGO_BIN_EXE_graphrag-rs"));
    serve
        .args(["serve", "--port", "0", "--skip-validation", "--root", url])
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("XDG_CACHE_HOME", cache.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut server = Serving(serve.spawn().unwrap());
    // "graphrag-rs serving DIR on http://ADDR" (stdout kept open while it runs).
    let mut stdout = BufReader::new(server.0.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let addr = first.trim().rsplit("http://").next().unwrap().to_string();
    let body = r#"{"query": "Who is Marley?", "mode": "naive", "only_need_context": true}"#;
    let mut http = TcpStream::connect(&addr).unwrap_or_else(|e| panic!("{first}: {e}"));
    http.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let request = format!(
        "POST /query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    http.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    http.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains("Scrooge"), "{answer}");
    drop(server);

    // The working copy is in the user's cache, named by the URL's hash.
    let copies: Vec<_> =
        std::fs::read_dir(cache.path().join("graphrag-rs")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(copies.len(), 1, "one working copy for one root");
    let prompt = "prompts/basic_search_system_prompt.txt";
    assert_eq!(std::fs::read(copies[0].join(prompt)).unwrap(), std::fs::read(local.path().join(prompt)).unwrap());
    assert!(
        !copies[0].join("input").exists() && !copies[0].join("output").exists(),
        "no project data outside the bucket"
    );
}

#[test]
fn init_writes_the_scaffold_into_the_bucket_once() {
    let Some(moto) = object_servers::moto(&[]) else { return };
    moto.create_bucket("fresh");
    let cache = tempfile::tempdir().unwrap();
    let url = "s3://fresh/new";
    let o = graphrag_on(&moto, cache.path(), &["init", "--root", url]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("Initialised a graphrag-rs project in s3://fresh/new"), "{}", text(&o));
    let keys: Vec<String> = location(&moto, "fresh", "new").list("").unwrap().into_iter().map(|o| o.key).collect();
    for want in ["settings.yaml", ".env", "prompts/extract_graph.txt", "workflows/standard.yaml"] {
        assert!(keys.iter().any(|k| k == want), "{want} in {keys:?}");
    }
    let again = graphrag_on(&moto, cache.path(), &["init", "--root", url]);
    assert!(!again.status.success());
    assert!(text(&again).contains("s3://fresh/new/settings.yaml already exists"), "{}", text(&again));
    // A command that would write files outside the project's own says it is not built for a bucket.
    let export = graphrag_on(&moto, cache.path(), &["export", "lancedb", "--root", url]);
    assert!(!export.status.success() && text(&export).contains("is not built"), "{}", text(&export));
}

#[test]
fn a_project_root_in_an_azure_container_is_indexed_there() {
    let Some(azurite) = object_servers::azurite() else { return };
    azurite.create_container("projects");
    let connection = azurite.azurite_connection_string();
    let account = AzureAccount::ConnectionString(Secret::from(connection.as_str()));
    let service = RemoteService::AzureBlob { container: "projects".into(), account };
    let store = remote::open("test", &RemoteStorage { service, prefix: "carol".into() }).unwrap();
    let root = ObjectLocation::new(store.store, "carol", "az://projects/carol").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let url = "az://projects/carol";
    let az = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_graphrag-rs"))
            .args(args)
            .env("AZURE_STORAGE_CONNECTION_STRING", &connection)
            .env("XDG_CACHE_HOME", cache.path())
            .output()
            .unwrap()
    };
    // The scaffold `init` writes into the container, and one document.
    let o = az(&["init", "--root", url]);
    assert!(o.status.success(), "{}", text(&o));
    let (name, body) = &documents()[0];
    root.put(&format!("input/{name}"), body.clone().into_bytes().into()).unwrap();
    let o = az(&["-q", "index", "--method", "fast", "--root", url]);
    assert!(o.status.success(), "index --root {url}: {}", text(&o));
    let readers = tempfile::tempdir().unwrap();
    let (copy, version) = publish::fetch(&root.join("output"), readers.path()).unwrap().expect("published");
    assert_eq!(version, 1);
    assert!(published(&copy).iter().any(|(name, _)| name == "entities.parquet"));
    assert_eq!(root.join("logs").list("").unwrap().len(), 1, "the run's log is in the container");
}

#[test]
fn a_project_root_in_a_gcs_bucket_is_indexed_there() {
    let Some(server) = object_servers::gcs() else { return };
    server.create_bucket("projects");
    // This process reads the bucket too, and object_store reads the emulator's
    // key from the environment: this binary has one GCS test.
    let environment = server.gcs_environment();
    for (key, value) in &environment {
        std::env::set_var(key, value);
    }
    let remote = RemoteStorage { service: RemoteService::Gcs { bucket: "projects".into() }, prefix: "carol".into() };
    let store = remote::open("test", &remote).unwrap();
    let root = ObjectLocation::new(store.store, "carol", "gs://projects/carol").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let url = "gs://projects/carol";
    let gs = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_graphrag-rs"))
            .args(args)
            .envs(environment.iter().map(|(key, value)| (key, value)))
            .env("XDG_CACHE_HOME", cache.path())
            .output()
            .unwrap()
    };
    // The scaffold `init` writes into the bucket, and one document.
    let o = gs(&["init", "--root", url]);
    assert!(o.status.success(), "{}", text(&o));
    let (name, body) = &documents()[0];
    root.put(&format!("input/{name}"), body.clone().into_bytes().into()).unwrap();
    let o = gs(&["-q", "index", "--method", "fast", "--root", url]);
    assert!(o.status.success(), "index --root {url}: {}", text(&o));
    let readers = tempfile::tempdir().unwrap();
    let (copy, version) = publish::fetch(&root.join("output"), readers.path()).unwrap().expect("published");
    assert_eq!(version, 1);
    assert!(published(&copy).iter().any(|(name, _)| name == "entities.parquet"));
    assert_eq!(root.join("logs").list("").unwrap().len(), 1, "the run's log is in the bucket");
}
