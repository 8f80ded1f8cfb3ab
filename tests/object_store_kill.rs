//! An index and an update on S3 (moto on loopback), on Azure Blob
//! (Azurite, fewer kills) and on GCS (fake-gcs-server, fewer kills) killed
//! (SIGKILL) at random moments: the version
//! published before stays readable and whole
//! (manifest and tables) throughout, the rerun completes, equals the same
//! project indexed uninterrupted in a local folder, and asks the model
//! nothing whose answer the killed run had written to the cache (which it
//! does within a second; answers of that last second are asked again).

mod common;

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant, SystemTime};

use common::object_servers::{self, ObjectServer, MOTO_KEY_ID, MOTO_SECRET};
use common::published::{published, Files};
use common::{documents, project, put, run_ok, text};
use graphrag_engine::storage::{publish, Storage};
use graphrag_mock_llm::{FaultKind, FaultRule, MockConfig, MockServer, MockStats};

/// Requests of the start-up check before a run (one chat, one embedding).
const CHECKS: u32 = 2;

/// Answers a run received: every chat answer and every embedded text is one
/// cache entry.
fn answers(stats: &MockStats) -> u64 {
    stats.by_kind.values().sum::<u64>() + stats.embedded_texts
}

/// The keys of a storage section on a test server's bucket or container
/// (all but `base_dir`), and the environment its clients need.
struct Backend {
    keys: Vec<String>,
    env: Vec<(&'static str, String)>,
}

/// moto's bucket `graphrag`; credentials as the AWS SDKs read them.
fn on_moto(moto: &ObjectServer) -> Backend {
    moto.create_bucket("graphrag");
    let keys = vec!["type: s3".into(), "bucket: graphrag".into(), format!("endpoint_url: {}", moto.endpoint())];
    let env = vec![("AWS_ACCESS_KEY_ID", MOTO_KEY_ID.into()), ("AWS_SECRET_ACCESS_KEY", MOTO_SECRET.into())];
    Backend { keys, env }
}

/// Azurite's container `graphrag`, reached by `graphrag init`'s blob keys.
fn on_azurite(azurite: &ObjectServer) -> Backend {
    azurite.create_container("graphrag");
    let keys = vec![
        "type: blob".into(),
        format!("connection_string: \"{}\"", azurite.azurite_connection_string()),
        "container_name: graphrag".into(),
    ];
    Backend { keys, env: Vec::new() }
}

/// fake-gcs-server's bucket `graphrag`, its key (object_store reads it from
/// the environment) in this process's environment too, which reads the
/// bucket: this binary has one GCS test.
fn on_fake_gcs(server: &ObjectServer) -> Backend {
    server.create_bucket("graphrag");
    let env = server.gcs_environment().to_vec();
    for (key, value) in &env {
        std::env::set_var(key, value);
    }
    Backend { keys: vec!["type: gcs".into(), "bucket: graphrag".into()], env }
}

impl Backend {
    /// The storage section under `prefix` (`indent`: its depth).
    fn section(&self, prefix: &str, indent: &str) -> String {
        self.keys.iter().chain([&format!("base_dir: {prefix}")]).map(|line| format!("{indent}{line}\n")).collect()
    }
}

/// moto's credentials in this process too (its clients read the bucket),
/// set once, before either test starts a client.
fn aws_credentials() {
    static SET: Once = Once::new();
    SET.call_once(|| {
        std::env::set_var("AWS_ACCESS_KEY_ID", MOTO_KEY_ID);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", MOTO_SECRET);
    });
}

struct OnStore {
    root: tempfile::TempDir,
    storage: Storage,
    env: Vec<(&'static str, String)>,
    /// Answers per cache segment read so far (a segment never changes).
    segments: RefCell<HashMap<String, u64>>,
}

impl OnStore {
    /// The model's answers cached in the bucket: the lines of its segments
    /// (a line per answer) and any answer kept as an object of its own.
    fn cache_entries(&self) -> u64 {
        let cache = self.storage.cache.remote().unwrap();
        let mut segments = self.segments.borrow_mut();
        let mut answers = 0;
        for listed in cache.list("").unwrap() {
            if !listed.key.ends_with(".answers") {
                answers += 1;
                continue;
            }
            answers += *segments.entry(listed.key.clone()).or_insert_with(|| {
                let segment = cache.get(&listed.key).unwrap().unwrap();
                segment.iter().filter(|&&b| b == b'\n').count() as u64
            });
        }
        answers
    }
}

/// What a reader sees now: the published version and its files (fetched
/// afresh), or None before the first publication.
fn published_on_store(s3: &OnStore, readers: &Path) -> Option<(u64, Files)> {
    let output = s3.storage.output.remote().unwrap();
    let manifest = publish::manifest(output).unwrap()?;
    let fresh = tempfile::tempdir_in(readers).unwrap();
    let (copy, version) = publish::fetch(output, fresh.path()).unwrap().unwrap();
    assert!(version >= manifest.version, "a fetch after reading version {} got {version}", manifest.version);
    Some((version, published(&copy)))
}

/// `graphrag-rs <command>` on the S3 project, killed (SIGKILL) while its
/// request `answered + 1` hangs, once every answer it received is in the
/// bucket's cache (a run writes its answers in segments, within a second of
/// receiving them); `during` runs while it hangs. Returns the answers it cached.
fn kill_at(mock: &MockServer, s3: &OnStore, command: &str, answered: u32, during: impl Fn()) -> u64 {
    let cached_before = s3.cache_entries();
    mock.reset_stats();
    mock.set_faults(vec![FaultRule::always(FaultKind::Hang).after(answered)]);
    let mut child: Child = Command::new(env!("CARGO_BIN_EXE_graphrag-rs"))
        .args(["-q", command, "--root", s3.root.path().to_str().unwrap()])
        .envs(s3.env.iter().cloned())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !mock.wait_for_requests(u64::from(answered) + 1, Duration::from_millis(100)) {
        let exited = child.try_wait().unwrap();
        assert!(
            exited.is_none() && Instant::now() < deadline,
            "{command} never sent request {} ({exited:?})",
            answered + 1
        );
    }
    // The request that hangs may arrive while the last answered one's
    // answer is still being made on the other slot.
    assert!(mock.wait_for_answers(u64::from(answered), Duration::from_secs(30)), "{command}: answers never made");
    // The start-up check's answers (one chat, one text) are not cached.
    let received = answers(&mock.stats()) - u64::from(CHECKS);
    let deadline = Instant::now() + Duration::from_secs(30);
    while s3.cache_entries() < cached_before + received && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    during();
    child.kill().unwrap();
    child.wait().unwrap();
    mock.set_faults(Vec::new());
    mock.reset_stats();
    s3.cache_entries() - cached_before
}

/// Kills per run on S3 (the 20, fewer where a run has fewer requests).
const KILLS: usize = 20;

/// Kills per run on Azurite and on fake-gcs-server: the same code path, a
/// few moments keep CI short.
const EMULATOR_KILLS: usize = 4;

/// Up to `kills` kill moments at distinct random requests of the first
/// four fifths of a run of `total` requests, from a seed printed so that a
/// failure can be replayed. Each is given as the request number in the run
/// that resumes after the kills before it (which asks only what they had
/// not had answered): the distance from the previous moment.
fn moments(seed: u64, total: u64, kills: usize) -> Vec<u32> {
    let span = (total - u64::from(CHECKS)) * 4 / 5;
    let mut state = seed | 1;
    let mut picked = std::collections::BTreeSet::new();
    while picked.len() < kills.min(span as usize) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        picked.insert(1 + state % span);
    }
    let mut previous = 0;
    picked
        .into_iter()
        .map(|at| {
            let answered = at - previous;
            previous = at;
            CHECKS + answered as u32
        })
        .collect()
}

#[test]
fn a_killed_index_or_update_on_s3_keeps_the_published_version_and_resumes_without_repeated_calls() {
    aws_credentials();
    let Some(moto) = object_servers::moto(&[]) else { return };
    killed_runs_keep_the_published_version(&on_moto(&moto), KILLS);
}

#[test]
fn a_killed_index_or_update_on_azurite_keeps_the_published_version_and_resumes_without_repeated_calls() {
    aws_credentials();
    let Some(azurite) = object_servers::azurite() else { return };
    killed_runs_keep_the_published_version(&on_azurite(&azurite), EMULATOR_KILLS);
}

#[test]
fn a_killed_index_or_update_on_gcs_keeps_the_published_version_and_resumes_without_repeated_calls() {
    aws_credentials();
    let Some(server) = object_servers::gcs() else { return };
    killed_runs_keep_the_published_version(&on_fake_gcs(&server), EMULATOR_KILLS);
}

/// Index and update on `backend`, each killed at `kills` random moments.
fn killed_runs_keep_the_published_version(backend: &Backend, kills: usize) {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let docs = documents();
    let seed = std::env::var("KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().subsec_nanos().into());
    eprintln!("kill moments from KILL_SEED={seed}");

    // The project on the store: the same model settings, input, output and cache there.
    let root = project(&mock, &[], 1);
    let settings = root.path().join("settings.yaml");
    let sections = format!(
        "input_storage:\n{}output_storage:\n{}cache:\n  type: json\n  storage:\n{}",
        backend.section("input", "  "),
        backend.section("output", "  "),
        backend.section("cache", "    ")
    );
    std::fs::write(&settings, std::fs::read_to_string(&settings).unwrap() + &sections).unwrap();
    let loaded = graphrag_engine::settings::load(root.path()).unwrap_or_else(|e| panic!("{e}"));
    let storage = Storage::open(root.path(), &loaded.settings).unwrap();
    let s3 = OnStore { root, storage, env: backend.env.clone(), segments: RefCell::default() };
    let input = s3.storage.input.remote().unwrap();
    for (name, body) in &docs[..4] {
        input.put(name, body.clone().into_bytes().into()).unwrap();
    }

    // The reference: the same documents in a local folder, carrying the
    // objects' times (documents' creation_date), indexed uninterrupted.
    let reference = project(&mock, &docs[..4], 1);
    let same_times = |reference: &Path| {
        for listed in input.list("").unwrap() {
            let file = std::fs::File::options().write(true).open(reference.join("input").join(&listed.key));
            file.unwrap().set_modified(listed.modified).unwrap();
        }
    };
    same_times(reference.path());
    mock.reset_stats();
    run_ok("index", reference.path());
    let index_answers = answers(&mock.stats());
    let index_requests = mock.stats().requests;
    let readers = tempfile::tempdir().unwrap();

    // The first index, killed at random moments: nothing is published meanwhile.
    let mut cached = 0;
    for answered in moments(seed, index_requests, kills) {
        cached += kill_at(&mock, &s3, "index", answered, || {
            assert_eq!(published_on_store(&s3, readers.path()), None, "nothing published by a killed first index");
        });
    }
    let resumed = Command::new(env!("CARGO_BIN_EXE_graphrag-rs"))
        .args(["-q", "index", "--resume", "--root", s3.root.path().to_str().unwrap()])
        .envs(s3.env.iter().cloned())
        .output()
        .unwrap();
    assert!(resumed.status.success(), "index --resume: {}", text(&resumed));
    assert_eq!(answers(&mock.stats()), index_answers - cached, "the resumed index asks only what no killed run had");
    let (version, first) = published_on_store(&s3, readers.path()).unwrap();
    assert_eq!(version, 1);

    // The update (+1 document), killed at random moments: version 1 stays whole.
    input.put(&docs[4].0, docs[4].1.clone().into_bytes().into()).unwrap();
    put(reference.path(), &docs[4]);
    same_times(reference.path());
    mock.reset_stats();
    run_ok("update", reference.path());
    let update_answers = answers(&mock.stats());
    let update_requests = mock.stats().requests;
    let mut cached = 0;
    eprintln!("{index_requests} requests to index, {update_requests} to update");
    for answered in moments(seed.rotate_left(17), update_requests, kills) {
        let still_first = || {
            let seen = published_on_store(&s3, readers.path());
            assert!(seen == Some((1, first.clone())), "version 1, whole, while an update runs");
        };
        cached += kill_at(&mock, &s3, "update", answered, still_first);
        still_first();
    }
    run_ok("update", s3.root.path());
    assert_eq!(answers(&mock.stats()), update_answers - cached, "the update asks only what no killed run had");
    let (version, second) = published_on_store(&s3, readers.path()).unwrap();
    assert_eq!(version, 2);
    assert_eq!(
        second,
        published(&reference.path().join("output")),
        "the index on the store is the local one, byte for byte"
    );
}
