//! Sharded indexing into an object store (moto's S3 server on loopback):
//! shards, the merge's graph phase, model shards, embed shards and the merge each run on
//! another "machine" (a project folder of its own, with its own working copy
//! of the bucket), so that everything they share goes through the bucket —
//! the fragments, the staged graph, the done markers, the model cache. The
//! published version equals a single local `index` (and `update`) byte for
//! byte; a shard run again, here or elsewhere, asks nothing and rewrites
//! nothing; the merge names the shards that have not finished.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use common::object_servers::{self, ObjectServer, MOTO_KEY_ID, MOTO_SECRET};
use common::published::{published, Files};
use common::{kind, passages, project, text};
use graphrag_engine::storage::object::ObjectLocation;
use graphrag_engine::storage::publish;
use graphrag_mock_llm::{MockConfig, MockServer};

const BUCKET: &str = "shards";

/// `graphrag-rs -q ARGS --skip-validation --root ROOT` with moto's credentials, asserting success.
fn run(moto: &ObjectServer, root: &Path, args: &[&str]) -> Output {
    let o = try_run(moto, root, args);
    assert!(o.status.success(), "{args:?} in {}: {}", root.display(), text(&o));
    o
}

/// `graphrag-rs -q ARGS --skip-validation --root ROOT` of a local project, asserting success.
fn run_local(root: &Path, args: &[&str]) {
    let mut all = vec!["-q", args[0], "--skip-validation", "--root", root.to_str().unwrap()];
    all.extend_from_slice(&args[1..]);
    let o = common::graphrag(&all);
    assert!(o.status.success(), "{args:?}: {}", text(&o));
}

fn try_run(moto: &ObjectServer, root: &Path, args: &[&str]) -> Output {
    let mut all = vec!["-q", args[0], "--skip-validation", "--root", root.to_str().unwrap()];
    all.extend_from_slice(&args[1..]);
    Command::new(env!("CARGO_BIN_EXE_graphrag-rs"))
        .args(&all)
        .env("AWS_ACCESS_KEY_ID", MOTO_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", MOTO_SECRET)
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .output()
        .unwrap()
}

/// The objects under `prefix` of the test bucket.
fn location(moto: &ObjectServer, prefix: &str) -> ObjectLocation {
    common::s3_location(moto, BUCKET, prefix)
}

/// One machine of the cluster: a project folder with the documents (the same
/// files and times on every machine, as a shared input) whose index and
/// model cache are under `prefix` in the bucket.
fn machine(moto: &ObjectServer, mock: &MockServer, docs: &[(String, String)], prefix: &str) -> tempfile::TempDir {
    let p = project(mock, docs, 4);
    let s3 = |base_dir: &str, indent: &str| {
        format!(
            "{indent}type: s3\n{indent}bucket: {BUCKET}\n{indent}base_dir: {prefix}/{base_dir}\n{indent}endpoint_url: {}\n{indent}region: us-east-1\n",
            moto.endpoint()
        )
    };
    let sections =
        format!("output_storage:\n{}cache:\n  type: json\n  storage:\n{}", s3("output", "  "), s3("cache", "    "));
    let mut f = std::fs::OpenOptions::new().append(true).open(p.path().join("settings.yaml")).unwrap();
    std::io::Write::write_all(&mut f, sections.as_bytes()).unwrap();
    p
}

/// The version published under `prefix`: its number and files.
fn published_version(moto: &ObjectServer, prefix: &str) -> (u64, Files) {
    let readers = tempfile::tempdir().unwrap();
    let (copy, version) = publish::fetch(&location(moto, &format!("{prefix}/output")), readers.path())
        .unwrap()
        .expect("an index is published");
    (version, published(&copy))
}

/// The shards' objects (fragments, staged graph, markers) under `prefix`, with their bytes.
fn shard_objects(moto: &ObjectServer, prefix: &str) -> BTreeMap<String, Vec<u8>> {
    let shards = location(moto, &format!("{prefix}/output/.shards"));
    shards
        .list("")
        .unwrap()
        .into_iter()
        .map(|o| (o.key.clone(), shards.get(&o.key).unwrap().unwrap().to_vec()))
        .collect()
}

fn assert_same(got: &Files, expected: &Files, what: &str) {
    assert!(expected.iter().any(|(name, _)| name == "entities.parquet"), "{what}: no index");
    let names = |f: &Files| f.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(got), names(expected), "{what}: the same files");
    for ((name, a), (_, b)) in got.iter().zip(expected) {
        assert!(a == b, "{what}: {name} differs from the single run's");
    }
}

/// `method` indexed once locally and, in the bucket, by two document shards
/// on machines A and B, the graph phase on C with two model shards on A and
/// B at each model stage it stops before, two embed shards on A and B and
/// the merge on D; then a sharded update the same way.
fn sharded_into_a_bucket_equals_a_single_run(method: &str, prefix: &str) {
    let Some(moto) = object_servers::moto(&[]) else { return };
    moto.create_bucket(BUCKET);
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let all = passages(8, 1_200);
    let (docs, added) = all.split_at(6);
    let single = project(&mock, docs, 4);
    mock.reset_stats();
    run_local(single.path(), &["index", "--method", method]);
    let single_stats = mock.stats();
    let [a, b, c, d] = [(); 4].map(|_| machine(&moto, &mock, docs, prefix));
    let m = ["--method", method];

    mock.reset_stats();
    run(&moto, a.path(), &["index", m[0], m[1], "--shard", "0/2"]);
    run(&moto, b.path(), &["index", m[0], m[1], "--shard", "1/2"]);
    let shards = mock.stats();
    assert!(shards.embedded_texts > 0, "{method}: the shards embed their text units");
    let fragments = shard_objects(&moto, prefix);
    assert!(fragments.keys().any(|k| k.ends_with("0-of-2/done.json")), "{fragments:?}");
    assert!(fragments.keys().any(|k| k.ends_with("1-of-2/shard_text_units.parquet")), "{fragments:?}");

    // The merge on a machine that ran no shard, before and after an unfinished shard count.
    let o = try_run(&moto, d.path(), &["index", m[0], m[1], "--merge", "--shards", "3"]);
    assert!(!o.status.success() && text(&o).contains("shards 0/3, 1/3, 2/3 have not finished"), "{}", text(&o));

    mock.reset_stats();
    let mut stages = 0;
    loop {
        let graph = mock.stats().chat_requests;
        run(&moto, c.path(), &["index", m[0], m[1], "--merge", "--phase", "stage"]);
        assert_eq!(mock.stats().chat_requests, graph, "{method}: the model shards answered the stage before");
        let staged_stage = shard_objects(&moto, prefix).into_keys().any(|k| k.ends_with("/model.json"));
        if !staged_stage {
            break;
        }
        stages += 1;
        run(&moto, a.path(), &["index", m[0], m[1], "--shard", "0/2", "--phase", "model"]);
        run(&moto, b.path(), &["index", m[0], m[1], "--shard", "1/2", "--phase", "model"]);
    }
    assert!(stages > 0, "{method}: the graph phase stops before the model stages");
    assert!(publish::manifest(&location(&moto, &format!("{prefix}/output"))).unwrap().is_none(), "nothing published");
    run(&moto, a.path(), &["index", m[0], m[1], "--shard", "0/2", "--phase", "embed"]);
    run(&moto, b.path(), &["index", m[0], m[1], "--shard", "1/2", "--phase", "embed"]);
    let staged = mock.stats();
    assert!(staged.embedded_texts > 0, "{method}: the embed shards embed the graph's rows");
    mock.reset_stats();
    run(&moto, d.path(), &["index", m[0], m[1], "--merge"]);
    let merge = mock.stats();
    assert_eq!(merge.embedded_texts, 0, "{method}: the merge finds every vector in the bucket's cache");
    assert_eq!(kind(&merge, "extract_graph"), 0, "{method}: the merge extracts nothing itself");
    assert_eq!(
        shards.chat_requests + staged.chat_requests + merge.chat_requests,
        single_stats.chat_requests,
        "{method}: every chat call once"
    );
    assert_eq!(shards.embedded_texts + staged.embedded_texts, single_stats.embedded_texts, "{method}");
    let (version, files) = published_version(&moto, prefix);
    assert_eq!(version, 1);
    assert_same(&files, &published(&single.path().join("output")), &format!("{method}, 2 shards into S3"));
    assert!(
        !shard_objects(&moto, prefix)
            .keys()
            .any(|k| k.starts_with("graph") || k.contains("/embed/") || k.contains("/model/")),
        "the staged graph, the model and the embed shards are cleared once published"
    );

    // A shard run again, on its machine or on a fresh one: nothing asked, nothing rewritten.
    let before = shard_objects(&moto, prefix);
    let e = machine(&moto, &mock, docs, prefix);
    mock.reset_stats();
    run(&moto, a.path(), &["index", m[0], m[1], "--shard", "0/2"]);
    run(&moto, e.path(), &["index", m[0], m[1], "--shard", "1/2"]);
    assert_eq!(mock.stats().requests, 0, "{method}: a finished shard asks nothing");
    let after = shard_objects(&moto, prefix);
    assert_eq!(after.keys().collect::<Vec<_>>(), before.keys().collect::<Vec<_>>());
    for (key, bytes) in &after {
        assert!(key.ends_with("done.json") || bytes == &before[key], "{method}: {key} rewritten differently");
    }

    // A shard killed after its fragments went up, before its marker: not
    // finished for the merge; run again, it finishes without a model call.
    let marker = after.keys().find(|k| k.ends_with("/1-of-2/done.json")).unwrap();
    location(&moto, &format!("{prefix}/output/.shards")).delete(marker).unwrap();
    let o = try_run(&moto, e.path(), &["index", m[0], m[1], "--merge"]);
    assert!(!o.status.success() && text(&o).contains("shards 1/2 have not finished"), "{}", text(&o));
    mock.reset_stats();
    run(&moto, e.path(), &["index", m[0], m[1], "--shard", "1/2"]);
    assert_eq!(mock.stats().requests, 0, "{method}: the rerun asks nothing");
    assert_eq!(shard_objects(&moto, prefix).keys().collect::<Vec<_>>(), after.keys().collect::<Vec<_>>());

    // A sharded update: two more documents on every machine.
    for p in [&single, &a, &b, &c, &d] {
        for doc in added {
            common::put(p.path(), doc);
        }
    }
    run_local(single.path(), &["update"]);
    run(&moto, b.path(), &["update", "--shard", "0/2"]);
    run(&moto, a.path(), &["update", "--shard", "1/2"]);
    run(&moto, c.path(), &["update", "--merge"]);
    let (version, files) = published_version(&moto, prefix);
    assert_eq!(version, 2);
    assert_same(&files, &published(&single.path().join("output")), &format!("{method}, a sharded update into S3"));
}

#[test]
fn sharded_fast_index_into_s3_equals_a_single_run() {
    sharded_into_a_bucket_equals_a_single_run("fast", "fast");
}

#[test]
fn sharded_standard_index_into_s3_equals_a_single_run() {
    sharded_into_a_bucket_equals_a_single_run("standard", "standard");
}

/// `graphrag-rs -q ARGS` on a machine whose user cache (where a bucket
/// root's working copy goes) is `home`, with moto's endpoint in the environment.
fn on_machine(moto: &ObjectServer, home: &Path, args: &[&str]) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_graphrag-rs"))
        .args(args)
        .env("AWS_ACCESS_KEY_ID", MOTO_KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", MOTO_SECRET)
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("XDG_CACHE_HOME", home)
        .output()
        .unwrap();
    assert!(o.status.success(), "{args:?}: {}", text(&o));
    o
}

#[test]
fn shards_of_a_project_root_in_a_bucket_equal_a_local_index() {
    let Some(moto) = object_servers::moto(&[]) else { return };
    moto.create_bucket(BUCKET);
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let docs = passages(6, 1_200);
    // The project's settings and documents only in the bucket; its local twin
    // carries the objects' times (the documents' creation_date).
    let local = project(&mock, &docs, 4);
    let root = location(&moto, "rooted");
    root.upload(&local.path().join("settings.yaml"), "settings.yaml").unwrap();
    for (name, _) in &docs {
        root.upload(&local.path().join("input").join(name), &format!("input/{name}")).unwrap();
    }
    for listed in root.join("input").list("").unwrap() {
        let file = std::fs::File::options().write(true).open(local.path().join("input").join(&listed.key));
        file.unwrap().set_modified(listed.modified).unwrap();
    }
    mock.reset_stats();
    run_local(local.path(), &["index", "--method", "fast"]);
    let single = mock.stats();

    let url = format!("s3://{BUCKET}/rooted");
    let machines = [(); 3].map(|_| tempfile::tempdir().unwrap());
    let fast = ["-q", "index", "--skip-validation", "--method", "fast", "--root", &url];
    mock.reset_stats();
    for (k, home) in machines[..2].iter().enumerate() {
        on_machine(&moto, home.path(), &[&fast[..], &["--shard", &format!("{k}/2")]].concat());
    }
    let shards = mock.stats();
    mock.reset_stats();
    on_machine(&moto, machines[2].path(), &[&fast[..], &["--merge"]].concat());
    let merge = mock.stats();
    assert!(shards.embedded_texts > 0, "the shards embed their text units");
    assert_eq!(shards.embedded_texts + merge.embedded_texts, single.embedded_texts, "every text embedded once");
    let (version, files) = published_version(&moto, "rooted");
    assert_eq!(version, 1);
    assert_same(&files, &published(&local.path().join("output")), "fast, 2 shards of a bucket root");
}
