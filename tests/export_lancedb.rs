//! The LanceDB export for GraphRAG's Python API: `index` with
//! `vector_store.type: lancedb` and `export lancedb` write GraphRAG 3.3's
//! tables (names, columns, one row per vector), checked with Python's
//! lancedb package. Without lancedb the check fails when CI is set (.ci/run
//! installs it) and is skipped locally with a message.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::text;
use graphrag_mock_llm::{MockConfig, MockServer};
use parquet::file::reader::{FileReader, SerializedFileReader};

mod common;

fn graphrag(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_graphrag-rs"));
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("binary runs")
}

/// A fast-method project whose embeddings come from the mock server, with
/// GraphRAG's vector store settings.
fn project(mock: &MockServer) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    assert!(graphrag(&["init", "--root", root], &[]).status.success());
    fs::write(dir.path().join("input/carol.txt"), common::carol_passage("MARLEY'S GHOST", 8_000)).unwrap();
    let settings = format!(
        "embedding_models:\n  default_embedding_model:\n    model_provider: openai\n    model: mock-embed\n    api_key: test\n    api_base: {}\nchunking:\n  size: 300\n  overlap: 30\nvector_store:\n  type: lancedb\n  db_uri: output/lancedb\n",
        mock.base_url()
    );
    fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    dir
}

/// A stand-in interpreter that answers as the script does without lancedb.
fn python_without_lancedb(dir: &Path) -> PathBuf {
    let path = dir.join("python-without-lancedb");
    fs::write(
        &path,
        "#!/bin/sh\ncat > /dev/null\necho \"cannot import lancedb: No module named 'lancedb'\" >&2\nexit 3\n",
    )
    .unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// The interpreter the export uses, when it has lancedb. Under CI=true a
/// missing lancedb is a failure; locally the test is skipped.
fn python_with_lancedb() -> Option<String> {
    let python = std::env::var("GRAPHRAG_RS_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let ok = Command::new(&python).args(["-c", "import lancedb"]).output().is_ok_and(|o| o.status.success());
    if ok {
        return Some(python);
    }
    let fix = format!("`{python} -m pip install lancedb` (or set GRAPHRAG_RS_PYTHON to an interpreter that has it)");
    if std::env::var_os("CI").is_some() {
        panic!("the LanceDB export test needs Python's lancedb package: {fix}");
    }
    eprintln!("skipped: the LanceDB export check needs Python's lancedb package: {fix}");
    None
}

fn parquet_rows(path: &Path) -> u64 {
    let reader = SerializedFileReader::new(fs::File::open(path).unwrap()).unwrap();
    reader.metadata().file_metadata().num_rows() as u64
}

const COLUMNS: &str = "id,vector,create_date,update_date,create_date_year,create_date_month,create_date_month_name,create_date_day,create_date_day_of_week,create_date_hour,create_date_quarter,update_date_year,update_date_month,update_date_month_name,update_date_day,update_date_day_of_week,update_date_hour,update_date_quarter";

/// (table, columns, rows, vector type) of every table in the LanceDB folder.
fn lancedb_tables(python: &str, db: &Path) -> Vec<(String, String, u64, String)> {
    let script = "import sys, lancedb\ndb = lancedb.connect(sys.argv[1])\nnames = db.list_tables().tables if hasattr(db, 'list_tables') else db.table_names()\nfor name in sorted(names):\n    t = db.open_table(name)\n    print(name, ','.join(t.schema.names), t.count_rows(), t.schema.field('vector').type, sep='\\t')\n# lancedb's threads can abort the interpreter's shutdown (see scripts/export_lancedb.py)\nsys.stdout.flush()\nimport os\nos._exit(0)\n";
    let o = Command::new(python).args(["-c", script]).arg(db).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            (c[0].to_string(), c[1].to_string(), c[2].parse().unwrap(), c[3].to_string())
        })
        .collect()
}

#[test]
fn index_writes_graphrag_s_lancedb_tables_when_settings_ask() {
    let Some(python) = python_with_lancedb() else { return };
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock);
    let root = dir.path().to_str().unwrap();
    let o = graphrag(&["index", "--root", root, "--method", "fast"], &[("GRAPHRAG_RS_PYTHON", &python)]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("LanceDB tables for GraphRAG's Python API"), "{}", text(&o));
    let out = dir.path().join("output");
    let tables = lancedb_tables(&python, &out.join("lancedb"));
    let names: Vec<&str> = tables.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(names, ["community_full_content", "entity_description", "text_unit_text"], "{tables:?}");
    for (name, columns, rows, vector) in &tables {
        assert_eq!(columns, COLUMNS, "{name}");
        assert_eq!(*rows, parquet_rows(&out.join(format!("embeddings.{name}.parquet"))), "{name}");
        assert!(*rows > 0, "{name}");
        assert!(vector.starts_with("fixed_size_list<item: float>[") && vector.ends_with("]"), "{name}: {vector}");
    }
    // One vector per entity, report and text unit of the index.
    let rows = |t: &str| tables.iter().find(|x| x.0 == t).unwrap().2;
    assert_eq!(rows("entity_description"), parquet_rows(&out.join("entities.parquet")));
    assert_eq!(rows("community_full_content"), parquet_rows(&out.join("community_reports.parquet")));
    assert_eq!(rows("text_unit_text"), parquet_rows(&out.join("text_units.parquet")));

    // `export lancedb` writes them again, elsewhere if asked.
    let elsewhere = dir.path().join("elsewhere");
    let o = graphrag(
        &["export", "lancedb", "--root", root, "--db-uri", elsewhere.to_str().unwrap(), "--python", &python],
        &[],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(lancedb_tables(&python, &elsewhere), tables);
}

#[test]
fn without_lancedb_export_says_what_to_install_and_index_still_succeeds() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock);
    let root = dir.path().to_str().unwrap();
    let fake = python_without_lancedb(dir.path());
    let fake = fake.to_str().unwrap();
    let o = graphrag(&["index", "--root", root, "--method", "fast"], &[("GRAPHRAG_RS_PYTHON", fake)]);
    assert!(o.status.success(), "the index is complete without LanceDB: {}", text(&o));
    let msg = text(&o);
    assert!(msg.contains("pip install lancedb") && msg.contains("graphrag-rs export lancedb --root"), "{msg}");

    let o = graphrag(&["export", "lancedb", "--root", root, "--python", fake], &[]);
    assert!(!o.status.success());
    assert!(text(&o).contains(&format!("{fake} -m pip install lancedb")), "{}", text(&o));
    let o = graphrag(&["export", "lancedb", "--root", root, "--python", "/nonexistent/python3"], &[]);
    assert!(!o.status.success());
    assert!(text(&o).contains("cannot run `/nonexistent/python3`"), "{}", text(&o));

    let empty = tempfile::tempdir().unwrap();
    assert!(graphrag(&["init", "--root", empty.path().to_str().unwrap()], &[]).status.success());
    fs::create_dir_all(empty.path().join("output")).unwrap();
    // An output folder with no index in it: the export reads the published index, and there is none.
    let o = graphrag(&["export", "lancedb", "--root", empty.path().to_str().unwrap()], &[]);
    assert!(!o.status.success());
    assert!(text(&o).contains("no index in") && text(&o).contains("run `graphrag-rs index --root"), "{}", text(&o));
}
