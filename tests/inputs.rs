//! Input files users bring (GraphRAG's `markitdown` type: PDF, DOCX,
//! Markdown, text together): an unreadable file is named with the reason,
//! counted in stats.json, `failed` in document_status.parquet, and the run
//! goes on with the others, also when `--resume` skips the loading step;
//! `input.strict: true` stops the run before anything is sent.

use std::fs;
use std::path::Path;

use common::{graphrag, read, text};
use graphrag_mock_llm::{MockConfig, MockServer};

mod common;

fn fixture(name: &str) -> Vec<u8> {
    fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/inputs").join(name)).unwrap()
}

/// The values of a (large) string column, nulls as `None`.
fn strings(batch: &arrow_array::RecordBatch, name: &str) -> Vec<Option<String>> {
    use arrow_array::{Array, LargeStringArray, StringArray};
    let c = batch.column_by_name(name).unwrap();
    let value = |i: usize| -> Option<String> {
        if let Some(s) = c.as_any().downcast_ref::<LargeStringArray>() {
            return s.is_valid(i).then(|| s.value(i).to_string());
        }
        let s = c.as_any().downcast_ref::<StringArray>().expect("a string column");
        s.is_valid(i).then(|| s.value(i).to_string())
    };
    (0..batch.num_rows()).map(value).collect()
}

/// (title, status, error) of each row of document_status.parquet, by title.
fn document_status(out: &Path) -> Vec<(String, String, Option<String>)> {
    let batch = read(&out.join("document_status.parquet"));
    let (titles, statuses, errors) = (strings(&batch, "title"), strings(&batch, "status"), strings(&batch, "error"));
    let mut rows: Vec<_> = (0..batch.num_rows())
        .map(|i| (titles[i].clone().unwrap(), statuses[i].clone().unwrap(), errors[i].clone()))
        .collect();
    rows.sort();
    rows
}

fn project(mock: &MockServer, extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    assert!(graphrag(&["init", "--root", dir.path().to_str().unwrap()]).status.success());
    let input = dir.path().join("input");
    fs::write(input.join("report.pdf"), fixture("report.pdf")).unwrap();
    fs::write(input.join("report.docx"), fixture("report.docx")).unwrap();
    fs::write(input.join("notes.md"), "# Notes\n\nScrooge met Marley's ghost in London on Christmas Eve.\n").unwrap();
    fs::write(input.join("broken.pdf"), b"%PDF-1.4 this file was cut short").unwrap();
    let settings = format!(
        "embedding_models:\n  default_embedding_model:\n    model_provider: openai\n    model: mock-embed\n    api_key: test\n    api_base: {}\ninput:\n  type: markitdown\n{extra}",
        mock.base_url()
    );
    fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    dir
}

#[test]
fn an_unreadable_file_is_named_counted_and_left_out() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock, "");
    let root = dir.path().to_str().unwrap();
    let o = graphrag(&["index", "--root", root, "--method", "fast"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("1 input file(s) could not be read") && out.contains("broken.pdf: the PDF"), "{out}");
    let output = dir.path().join("output");
    let status = document_status(&output);
    let titles: Vec<(&str, &str)> = status.iter().map(|(t, s, _)| (t.as_str(), s.as_str())).collect();
    assert_eq!(
        titles,
        [
            ("broken.pdf", "failed"),
            ("notes.md", "processed"),
            ("report.docx", "processed"),
            ("report.pdf", "processed")
        ]
    );
    assert!(status[0].2.as_deref().is_some_and(|e| e.contains("PDF")), "{status:?}");
    let stats: serde_json::Value = serde_json::from_slice(&fs::read(output.join("stats.json")).unwrap()).unwrap();
    let step = &stats["workflows"]["load_documents"];
    assert_eq!(step["counts"]["unreadable_files"], 1, "{step}");
    assert_eq!(step["unreadable_inputs"][0]["name"], "broken.pdf", "{step}");

    // Resumed: the loading step is skipped, its failure is still reported.
    let o = graphrag(&["index", "--root", root, "--method", "fast", "--resume"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("broken.pdf: the PDF"), "{}", text(&o));
    assert_eq!(document_status(&output)[0].1, "failed");
    // Removed: its row goes.
    fs::remove_file(dir.path().join("input/broken.pdf")).unwrap();
    assert!(graphrag(&["index", "--root", root, "--method", "fast"]).status.success());
    assert!(document_status(&output).iter().all(|(_, s, _)| s == "processed"));
}

#[test]
fn strict_input_stops_before_anything_is_sent() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock, "  strict: true\n");
    let o = graphrag(&["index", "--root", dir.path().to_str().unwrap(), "--method", "fast", "--skip-validation"]);
    assert!(!o.status.success());
    let err = text(&o);
    assert!(err.contains("input file `broken.pdf`") && err.contains("input.strict is true"), "{err}");
    assert_eq!(mock.stats().requests, 0, "nothing was sent");
}

#[test]
fn odd_names_and_odd_files_are_indexed_apart_named_or_skipped_with_a_warning() {
    use std::os::unix::ffi::OsStrExt;
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock, "");
    let root = dir.path().to_str().unwrap();
    let input = dir.path().join("input");
    for f in ["report.pdf", "report.docx", "notes.md", "broken.pdf"] {
        fs::remove_file(input.join(f)).unwrap();
    }
    // A latin-1 name, and the UTF-8 name a lossy listing would give it.
    fs::write(input.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt")), "Scrooge met Marley's ghost.").unwrap();
    fs::write(input.join("caf\u{fffd}.txt"), "Bob Cratchit kept the counting-house fire.").unwrap();
    // Neither is a file to read: never opened, each named in a warning.
    let fifo = std::ffi::CString::new(input.join("pipe.txt").as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    std::os::unix::fs::symlink("/dev/zero", input.join("zero.txt")).unwrap();
    let o = graphrag(&["index", "--root", root, "--method", "fast"]);
    assert!(o.status.success(), "{}", text(&o));
    for skipped in ["pipe.txt", "zero.txt"] {
        assert!(text(&o).lines().any(|l| l.contains(skipped) && l.contains("not a regular file")), "{}", text(&o));
    }
    let docs = read(&dir.path().join("output/documents.parquet"));
    assert_eq!(strings(&docs, "title"), [Some("caf\\xE9.txt".into()), Some("caf\u{fffd}.txt".into())]);
    let texts = strings(&docs, "text");
    assert!(texts[0].as_deref().unwrap().contains("Marley") && texts[1].as_deref().unwrap().contains("Cratchit"));

    // A CSV quote never closed: the file is a named failure, not one
    // document swallowing the records after the quote.
    let csv = tempfile::tempdir().unwrap();
    assert!(graphrag(&["init", "--root", csv.path().to_str().unwrap()]).status.success());
    let settings =
        fs::read_to_string(dir.path().join("settings.yaml")).unwrap().replace("type: markitdown", "type: csv");
    fs::write(csv.path().join("settings.yaml"), settings).unwrap();
    fs::write(csv.path().join("input/good.csv"), "title,text\nA,Scrooge and Marley\n").unwrap();
    fs::write(csv.path().join("input/bad.csv"), "title,text\nB,\"Fezziwig's ball\nC,Belle\nD,Fred\n").unwrap();
    let o = graphrag(&["index", "--root", csv.path().to_str().unwrap(), "--method", "fast"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("bad.csv: invalid CSV: the quoted field that starts on line 2 is never closed"),
        "{}",
        text(&o)
    );
    let status = document_status(&csv.path().join("output"));
    assert_eq!(
        status.iter().map(|(t, s, _)| (t.as_str(), s.as_str())).collect::<Vec<_>>(),
        [("bad.csv", "failed"), ("good.csv", "processed")]
    );
}
