//! End-to-end: the `graphrag-rs` binary on real project folders.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use arrow_array::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_graphrag-rs"))
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("binary runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn last_line(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).trim_end().lines().last().unwrap_or("").to_string()
}

fn example_corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/christmas-carol/a_christmas_carol.txt")
}

/// A fresh project with the example corpus in input/. Embeddings are
/// switched off here (tests/index_llm.rs covers them) to keep the suite fast.
fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    let o = run(&["init", "--root", root]);
    assert!(o.status.success(), "{}", text(&o));
    fs::copy(example_corpus(), dir.path().join("input/a_christmas_carol.txt")).unwrap();
    let settings = fs::read_to_string(dir.path().join("settings.yaml")).unwrap();
    let settings = settings.replace(
        "names: [text_unit_text, entity_description, community_full_content, relationship_description]",
        "names: []",
    );
    assert!(settings.contains("names: []"));
    fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    dir
}

fn index(root: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["-q", "index", "--root", root.to_str().unwrap()];
    args.extend_from_slice(extra);
    run(&args)
}

fn read(path: &Path) -> RecordBatch {
    let f = fs::File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(f).unwrap().build().unwrap();
    let batches: Vec<_> = reader.map(|b| b.unwrap()).collect();
    arrow_select_concat(&batches)
}

fn arrow_select_concat(batches: &[RecordBatch]) -> RecordBatch {
    assert_eq!(batches.len(), 1, "small tables are one batch");
    batches[0].clone()
}

fn columns(batch: &RecordBatch) -> Vec<(String, String)> {
    batch.schema().fields().iter().map(|f| (f.name().clone(), f.data_type().to_string())).collect()
}

fn cols(spec: &[(&str, &str)]) -> Vec<(String, String)> {
    spec.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

const ID_LIST: &str = "List(Utf8)";

#[test]
fn init_refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    assert!(run(&["init", "--root", root]).status.success());
    for f in [
        "settings.yaml",
        ".env",
        "prompts/extract_graph.txt",
        "prompts/local_search_system_prompt.txt",
        "workflows/standard.yaml",
        "workflows/fast.yaml",
    ] {
        assert!(dir.path().join(f).exists(), "{f}");
    }
    assert!(dir.path().join("input").is_dir());
    assert_eq!(fs::read_to_string(dir.path().join(".env")).unwrap(), "GRAPHRAG_API_KEY=\n");

    fs::write(dir.path().join(".env"), "GRAPHRAG_API_KEY=sk-mine\n").unwrap();
    fs::write(dir.path().join("settings.yaml"), "chunking:\n  size: 300\n").unwrap();
    let o = run(&["init", "--root", root]);
    assert!(!o.status.success());
    assert!(last_line(&o).contains("--force"), "{}", text(&o));
    assert_eq!(fs::read_to_string(dir.path().join("settings.yaml")).unwrap(), "chunking:\n  size: 300\n");

    assert!(run(&["init", "--root", root, "--force"]).status.success());
    assert!(fs::read_to_string(dir.path().join("settings.yaml")).unwrap().contains("completion_models"));
    assert_eq!(fs::read_to_string(dir.path().join(".env")).unwrap(), "GRAPHRAG_API_KEY=sk-mine\n", ".env kept");
}

#[test]
fn index_writes_graphrag_tables_and_is_byte_identical_on_rerun() {
    let dir = project();
    let o = index(dir.path(), &[]);
    assert!(o.status.success(), "{}", text(&o));
    let out = dir.path().join("output");
    let docs = read(&out.join("documents.parquet"));
    assert_eq!(
        columns(&docs),
        cols(&[
            ("id", "LargeUtf8"),
            ("human_readable_id", "Int64"),
            ("title", "LargeUtf8"),
            ("text", "LargeUtf8"),
            ("text_unit_ids", ID_LIST),
            ("creation_date", "LargeUtf8"),
            ("raw_data", "Null"),
        ])
    );
    let units = read(&out.join("text_units.parquet"));
    assert_eq!(
        columns(&units),
        cols(&[
            ("id", "LargeUtf8"),
            ("human_readable_id", "Int64"),
            ("text", "LargeUtf8"),
            ("n_tokens", "Int64"),
            ("document_id", "LargeUtf8"),
            ("entity_ids", ID_LIST),
            ("relationship_ids", ID_LIST),
            ("covariate_ids", ID_LIST),
        ])
    );
    assert_eq!(docs.num_rows(), 1);
    assert!(units.num_rows() > 30, "~46k tokens in 1200-token chunks");
    let stats: serde_json::Value = serde_json::from_slice(&fs::read(out.join("stats.json")).unwrap()).unwrap();
    assert_eq!(stats["num_documents"], 1);
    // Each step's "finished" line says how long the step took: its time in stats.json.
    let log = fs::read_to_string(dir.path().join("logs/indexing-engine.log")).unwrap();
    let logged: Vec<(&str, f64)> = log
        .lines()
        .filter_map(|l| l.split_once("finished step=")?.1.split_once(" seconds="))
        .map(|(step, secs)| (step, secs.trim().parse::<f64>().unwrap()))
        .collect();
    assert_eq!(logged.len(), stats["workflows"].as_object().unwrap().len(), "{log}");
    for &(step, secs) in &logged {
        let overall = stats["workflows"][step]["overall"].as_f64().unwrap();
        assert_eq!(secs, (overall * 100.0).round() / 100.0, "{step}");
    }
    assert!(logged.iter().any(|l| l.1 > 0.0), "some step takes 10 ms or more: {log}");

    let before: Vec<Vec<u8>> =
        ["documents", "text_units"].iter().map(|t| fs::read(out.join(format!("{t}.parquet"))).unwrap()).collect();
    assert!(index(dir.path(), &[]).status.success());
    let after: Vec<Vec<u8>> =
        ["documents", "text_units"].iter().map(|t| fs::read(out.join(format!("{t}.parquet"))).unwrap()).collect();
    assert!(before == after, "rerun is byte-identical");
}

#[test]
fn resume_skips_unchanged_steps_and_reruns_after_changes() {
    let dir = project();
    assert!(index(dir.path(), &[]).status.success());
    let root = dir.path().to_str().unwrap();
    let o = run(&["index", "--root", root, "--resume"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(out.lines().any(|l| l.contains("load_documents") && l.contains("skipped")), "{out}");
    assert!(out.lines().any(|l| l.contains("chunk") && l.contains("skipped")), "{out}");

    // New chunk size: load is unchanged, chunk reruns.
    let settings = fs::read_to_string(dir.path().join("settings.yaml")).unwrap().replace("size: 1200", "size: 600");
    fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    let o = run(&["index", "--root", root, "--resume", "--dry-run"]);
    let plan = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(plan.lines().any(|l| l.contains("load_documents") && l.ends_with("skip (unchanged)")), "{plan}");
    assert!(plan.lines().any(|l| l.contains("[chunk]") && l.ends_with("run")), "{plan}");
    let o = run(&["index", "--root", root, "--resume"]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(out.lines().any(|l| l.contains("load_documents") && l.contains("skipped")), "{out}");
    assert!(out.lines().any(|l| l.contains("chunk ") && l.contains(" ran ")), "{out}");

    // A new input file: everything reruns.
    fs::write(dir.path().join("input/second.txt"), "Another short document about Bob Cratchit.").unwrap();
    let o = run(&["index", "--root", root, "--resume"]);
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    assert!(out.lines().any(|l| l.contains("load_documents") && l.contains(" ran ")), "{out}");
    assert_eq!(read(&dir.path().join("output/documents.parquet")).num_rows(), 2);
}

#[test]
fn dry_run_validates_and_writes_nothing() {
    let dir = project();
    let o = run(&["index", "--root", dir.path().to_str().unwrap(), "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Settings and pipeline are valid") && out.contains("[chunk]"), "{out}");
    assert!(!dir.path().join("output").exists());
}

#[test]
fn broken_settings_fail_with_file_line_and_key() {
    let dir = project();
    fs::write(dir.path().join("settings.yaml"), "input:\n  type: text\nchunking:\n  size: 300\n  overlapp: 20\n")
        .unwrap();
    let o = index(dir.path(), &[]);
    assert!(!o.status.success());
    let line = last_line(&o);
    assert!(
        line.starts_with("error: ") && line.contains("settings.yaml:5") && line.contains("did you mean `overlap`"),
        "{line}"
    );
    assert!(!dir.path().join("output").exists(), "nothing written");

    fs::write(
        dir.path().join("settings.yaml"),
        "completion_models:\n  default_completion_model:\n    api_key: ${NOT_SET_ANYWHERE_42}\n",
    )
    .unwrap();
    let line = last_line(&index(dir.path(), &[]));
    assert!(line.contains("settings.yaml:3") && line.contains("NOT_SET_ANYWHERE_42"), "{line}");
}

#[test]
fn broken_pipeline_fails_with_step_and_line() {
    let dir = project();
    let wf = dir.path().join("workflows/standard.yaml");
    let broken = fs::read_to_string(&wf).unwrap().replace("verb: chunk", "verb: chunker");
    fs::write(&wf, broken).unwrap();
    let line = last_line(&index(dir.path(), &["--method", "standard"]));
    assert!(
        line.contains("standard.yaml:") && line.contains("step `chunk`") && line.contains("did you mean `chunk`"),
        "{line}"
    );
}

#[test]
fn input_problems_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    assert!(run(&["init", "--root", root]).status.success());
    let line = last_line(&index(dir.path(), &[]));
    assert!(line.contains("no input files match"), "{line}");

    fs::write(dir.path().join("input/latin1.txt"), b"Caf\xe9 cr\xe8me").unwrap();
    let line = last_line(&index(dir.path(), &[]));
    assert!(line.contains("latin1.txt") && line.contains("not valid UTF-8"), "{line}");
}

#[test]
fn csv_and_jsonl_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    assert!(run(&["init", "--root", root]).status.success());
    fs::write(
        dir.path().join("input/news.csv"),
        "headline,body,source\nStorm,\"Heavy rain hit the coast, closing roads.\",wire\nVote,The council approved the budget.,paper\n",
    )
    .unwrap();
    fs::write(dir.path().join("settings.yaml"), "input:\n  type: csv\n  text_column: body\n  title_column: headline\n")
        .unwrap();
    let o = index(dir.path(), &[]);
    assert!(o.status.success(), "{}", text(&o));
    let docs = read(&dir.path().join("output/documents.parquet"));
    assert_eq!(docs.num_rows(), 2);
    assert_eq!(columns(&docs)[6].1, "Struct(\"source\": LargeUtf8)");

    fs::write(
        dir.path().join("input/more.jsonl"),
        "{\"text\": \"第一篇文章。🎄\", \"lang\": \"zh\"}\n{\"text\": \"second\"}\n",
    )
    .unwrap();
    fs::write(dir.path().join("settings.yaml"), "input:\n  type: jsonl\n").unwrap();
    let o = index(dir.path(), &["--method", "fast"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(read(&dir.path().join("output/text_units.parquet")).num_rows(), 2);
}

#[test]
fn query_without_an_index_and_update_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["query", "--root", dir.path().to_str().unwrap(), "who is Scrooge?"]);
    assert!(!o.status.success());
    assert!(last_line(&o).contains("no index in"), "{}", text(&o));
    let o = run(&["update", "--root", dir.path().to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(last_line(&o).contains("graphrag-rs init --root"), "{}", text(&o));
}

/// (alias, canonical title, method, evidence): a row of entity_aliases.
type AliasRow = (String, String, String, String);

/// Titles of the entities table and the rows of entity_aliases.
/// Runs `graphrag-rs serve` on `root` until a stderr line contains `needle`
/// (at most 60 s), then stops it; the line, or every line seen.
fn serve_until(root: &str, needle: &str) -> Result<String, Vec<String>> {
    use std::io::BufRead;
    let mut child = bin()
        .args(["serve", "--root", root, "--port", "0"])
        .env_remove("GRAPHRAG_API_KEY")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let found = loop {
        match rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(line) if line.contains(needle) => break Ok(line),
            Ok(line) => seen.push(line),
            Err(_) => break Err(seen),
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    found
}

#[test]
fn serve_says_at_start_up_whether_its_chat_model_answers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    assert!(run(&["init", "--root", root]).status.success());
    // `init` leaves GRAPHRAG_API_KEY empty in .env: no usable chat model.
    let warning = serve_until(root, "no chat model").unwrap_or_else(|seen| panic!("no line about it: {seen:?}"));
    assert!(warning.contains("WARN") && warning.contains("completion_models.default_completion_model"), "{warning}");
    assert!(warning.contains("refused (503)") && warning.contains("context-only requests are served"), "{warning}");

    // A model at a port where nothing listens: configured, and its start-up check fails.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let settings = fs::read_to_string(dir.path().join("settings.yaml")).unwrap();
    let settings = settings.replacen(
        "# api_base: http://localhost:11434/v1",
        &format!("api_base: http://127.0.0.1:{closed}/v1"),
        1,
    );
    fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    let failed = serve_until(root, "start-up check failed").unwrap_or_else(|seen| panic!("no line about it: {seen:?}"));
    assert!(
        failed.contains("WARN") && failed.contains(&format!("nothing is listening at 127.0.0.1:{closed}")),
        "{failed}"
    );
}

fn resolution(root: &Path) -> (Vec<String>, Vec<AliasRow>) {
    use graphrag_engine::table::strings;
    let out = root.join("output");
    let entities = read(&out.join("entities.parquet"));
    let titles = strings(&entities, "entities", "title").unwrap().into_iter().map(String::from).collect();
    let a = read(&out.join("entity_aliases.parquet"));
    let col = |c: &str| strings(&a, "entity_aliases", c).unwrap();
    let rows = (col("alias").into_iter().zip(col("title")).zip(col("method")).zip(col("evidence")))
        .map(|(((alias, title), method), evidence)| (alias.into(), title.into(), method.into(), evidence.into()))
        .collect();
    (titles, rows)
}

#[test]
fn entity_resolution_merges_aliases_and_update_honours_aliases_yaml() {
    let dir = project();
    let root = dir.path();
    let update = || run(&["-q", "update", "--root", root.to_str().unwrap()]);
    let o = index(root, &["--method", "fast"]);
    assert!(o.status.success(), "{}", text(&o));
    let (titles, aliases) = resolution(root);
    let has = |titles: &[String], t: &str| titles.iter().any(|x| x == t);
    let alias_of =
        |aliases: &[AliasRow], a: &str| aliases.iter().find(|r| r.0 == a).map(|r| (r.1.clone(), r.2.clone()));
    // The protagonist survives, under one node: his titled and full names are aliases.
    assert!(has(&titles, "SCROOGE"), "{titles:?}");
    assert!(!has(&titles, "MR SCROOGE") && !has(&titles, "EBENEZER SCROOGE"));
    assert_eq!(alias_of(&aliases, "MR SCROOGE"), Some(("SCROOGE".into(), "same_name".into())));
    assert_eq!(alias_of(&aliases, "JACOB MARLEY").map(|a| a.0), Some("MARLEY".into()));
    // A bare EBENEZER meets him as SCROOGE: merged by rules. A bare
    // CRATCHIT (Bob, Mrs Cratchit, the family) is left alone.
    assert_eq!(alias_of(&aliases, "EBENEZER"), Some(("SCROOGE".into(), "name_extension".into())));
    assert!(has(&titles, "CRATCHIT") && has(&titles, "BOB CRATCHIT"), "{titles:?}");
    let resolved = read(&root.join("output/entities.parquet"));

    // A mistake in aliases.yaml is an error naming its line, before any work.
    fs::write(root.join("aliases.yaml"), "same:\n  - [SCROOGE, EBENEZER]\n  - [MARLEY]\n").unwrap();
    let o = update();
    assert!(!o.status.success());
    assert!(last_line(&o).contains("aliases.yaml:3") && last_line(&o).contains("same[1]"), "{}", text(&o));

    // Force one merge, forbid another.
    fs::write(
        root.join("aliases.yaml"),
        "same:\n  - [BOB CRATCHIT, CRATCHIT]\ndifferent:\n  - [MARLEY, JACOB MARLEY]\n",
    )
    .unwrap();
    let o = update();
    assert!(o.status.success(), "{}", text(&o));
    let (titles, aliases) = resolution(root);
    assert!(!has(&titles, "CRATCHIT") && has(&titles, "BOB CRATCHIT"));
    assert_eq!(alias_of(&aliases, "CRATCHIT"), Some(("BOB CRATCHIT".into(), "aliases_file".into())));
    let forced = aliases.iter().find(|r| r.0 == "CRATCHIT").unwrap();
    assert!(forced.3.contains("aliases.yaml:2"), "{forced:?}");
    assert!(has(&titles, "MARLEY") && has(&titles, "JACOB MARLEY"), "kept apart");
    assert_eq!(alias_of(&aliases, "JACOB MARLEY"), None);

    // Without the file, update gives the rules' resolution again.
    fs::remove_file(root.join("aliases.yaml")).unwrap();
    let o = update();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(read(&root.join("output/entities.parquet")), resolved);
}

/// A fresh project of titled JSON records (`input.title_column: title`),
/// embeddings off, no pruning by degree or edge weight (a graph of a few
/// paragraphs, where a name's neighbours are mostly one-paragraph names).
fn titled_project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["init", "--root", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let path = dir.path().join("settings.yaml");
    let settings = fs::read_to_string(&path).unwrap();
    let edited = settings
        .replacen("input:\n  type: text", "input:\n  type: json", 1)
        .replacen("  # title_column: title", "  title_column: title", 1)
        .replacen("min_edge_weight_pct: 40.0", "min_edge_weight_pct: 0.0", 1)
        .replacen("min_node_degree: 1", "min_node_degree: 0", 1)
        .replace(
            "names: [text_unit_text, entity_description, community_full_content, relationship_description]",
            "names: []",
        );
    assert_eq!(edited.matches("json").count(), settings.matches("json").count() + 1, "input.type edited");
    assert!(edited.contains("  title_column: title") && edited.contains("min_edge_weight_pct: 0.0"));
    assert!(edited.contains("min_node_degree: 0"));
    fs::write(&path, edited).unwrap();
    for (name, json) in files {
        fs::write(dir.path().join("input").join(name), json).unwrap();
    }
    dir
}

#[test]
fn titled_records_link_their_units_to_the_title_and_update_equals_a_fresh_index() {
    use graphrag_engine::table::{string_lists, strings};
    let first = r#"[
        {"title": "Dracula", "text": "Harker's fiancee, Mina Murray, stays with Lucy Westenra in Whitby."},
        {"title": "Abraham Van Helsing", "text": "Van Helsing is a character of the novel Dracula by Bram Stoker."}]"#;
    let second = r#"[{"title": "Bram Stoker", "text": "He wrote Dracula in 1897, with Mina Murray in it."}]"#;
    let dir = titled_project(&[("a.json", first)]);
    let root = dir.path();
    let o = index(root, &["--method", "fast"]);
    assert!(o.status.success(), "{}", text(&o));
    // DRACULA lists the plot paragraph, which never names it: its title does.
    let units_of = |root: &Path, title: &str| -> Vec<String> {
        let (e, u) = (read(&root.join("output/entities.parquet")), read(&root.join("output/text_units.parquet")));
        let row = strings(&e, "entities", "title").unwrap().iter().position(|t| *t == title).expect(title);
        let (ids, texts) = (strings(&u, "text_units", "id").unwrap(), strings(&u, "text_units", "text").unwrap());
        let first_word = |id: &String| texts[ids.iter().position(|u| u == id).unwrap()].split(' ').next().unwrap();
        string_lists(&e, "entities", "text_unit_ids").unwrap()[row]
            .iter()
            .map(|id| first_word(id).to_string())
            .collect()
    };
    let mut dracula = units_of(root, "DRACULA");
    dracula.sort();
    assert_eq!(dracula, ["Harker's", "Van"]);

    // A new titled file by `update`: the same graph as a fresh index of both.
    fs::write(root.join("input/b.json"), second).unwrap();
    let o = run(&["-q", "update", "--root", root.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let fresh = titled_project(&[("a.json", first), ("b.json", second)]);
    let o = index(fresh.path(), &["--method", "fast"]);
    assert!(o.status.success(), "{}", text(&o));
    for table in ["text_units", "entities", "relationships", "lexical_index"] {
        let name = format!("output/{table}.parquet");
        assert_eq!(read(&root.join(&name)), read(&fresh.path().join(&name)), "{table}: update vs fresh index");
    }
    assert_eq!(units_of(root, "BRAM STOKER").len(), 2, "the new record's title joins its unit");
}
