//! Every `graphrag-rs` command line the documentation shows runs. The
//! commands are read from the ```sh and ```bash blocks of README.md and
//! docs/*.md (not docs/benchmarks*.md, which are measurement logs) and run in
//! the order each file gives them, in a temporary folder of that file's own:
//!
//! - A command line clap refuses (a flag renamed or removed, a value no longer
//!   accepted: exit status 2) fails the test, whatever the command.
//! - Commands on a local project (`demo`, or the placeholder `DIR`) must
//!   succeed. The project is the one the file's own `init` made, or one made
//!   for it; either way its models are then the mock server of crate
//!   graphrag-mock-llm and its input three passages of the example corpus.
//!   `--shard K/N` runs the N shards K = 0..N-1; `serve` (with `--port 0`
//!   added unless it names a port) must start and print its web UI address.
//! - Commands that need something outside this machine are checked for their
//!   command line only, and for failing for that outside thing: a project root
//!   in a bucket (`s3://…`) is reached at a closed local port and must fail
//!   with "cannot be reached", not with a usage error; `export lancedb` must
//!   succeed where Python's lancedb package is installed, else fail naming it.
//!   Ray's driver (`python -m graphrag_rs.ray`) is not a `graphrag-rs` command
//!   and is left to scripts/ray_shards_test.py.
//!
//! A command line this harness cannot read (a `$(…)` substitution, a pipe, a
//! redirection) fails the test by name, so that a new kind of example is
//! either written plainly or taught to the harness.
//!
//! A second test holds the synopsis of docs/cli.md to the binary's `--help`:
//! every flag it lists for a command is one that command takes.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use graphrag_mock_llm::{MockConfig, MockServer};

const BIN: &str = env!("CARGO_BIN_EXE_graphrag-rs");

/// The bound on one command (a standard index of three short passages
/// against the mock takes a few seconds in a debug build).
const COMMAND_LIMIT: Duration = Duration::from_secs(120);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and docs/*.md but the benchmark logs, sorted.
fn doc_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with("benchmarks"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// A command of the documentation: where it is, and its words after the
/// program's name.
#[derive(Debug, Clone)]
struct DocCommand {
    place: String,
    args: Vec<String>,
}

/// The `graphrag-rs` commands of a Markdown text's sh and bash blocks
/// (`&&` chains split, comments dropped, `\` continuations joined).
fn commands(name: &str, text: &str) -> Vec<DocCommand> {
    let mut out = Vec::new();
    let mut in_shell = None;
    let mut pending = String::new();
    let mut first_line = 0;
    for (i, line) in text.lines().enumerate() {
        let fence = line.trim_start().strip_prefix("```");
        match (fence, in_shell) {
            (Some(lang), None) => {
                in_shell = Some(matches!(lang.trim(), "sh" | "bash"));
                continue;
            }
            (Some(_), Some(_)) => {
                in_shell = None;
                continue;
            }
            (None, Some(true)) => {}
            _ => continue,
        }
        if pending.is_empty() {
            first_line = i + 1;
        }
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        let full = std::mem::take(&mut pending) + line;
        let place = format!("{name}:{first_line}");
        let words = words(&full).unwrap_or_else(|e| panic!("{place}: {e}: {full}"));
        for segment in words.split(|w| w == "&&") {
            let Some((program, args)) = segment.split_first() else { continue };
            if program != "graphrag-rs" && !program.ends_with("/graphrag-rs") {
                continue;
            }
            if let Some(bad) = args
                .iter()
                .find(|a| ["|", ">", "<", ";", "||"].contains(&a.as_str()) || a.contains("$(") || a.contains('`'))
            {
                panic!("{place}: `{bad}`: this harness runs plain command lines only: {full}");
            }
            out.push(DocCommand { place: place.clone(), args: args.to_vec() });
        }
    }
    out
}

/// A shell line's words: whitespace-separated, single and double quotes
/// grouping, a `#` at the start of a word beginning a comment.
fn words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '#' if word.is_none() => break,
            c if c.is_whitespace() => out.extend(word.take()),
            '"' | '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some(q) if q == c => break,
                        Some(other) => w.push(other),
                        None => return Err(format!("unclosed {c}")),
                    }
                }
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    out.extend(word);
    Ok(out)
}

/// What a command must do here.
#[derive(Debug, PartialEq)]
enum Expect {
    Succeeds,
    /// Starts serving (prints its web UI's address), then is stopped.
    Serves,
    /// Fails, with this in its error output (the outside thing it needs).
    FailsFor(&'static str),
}

fn root_of(args: &[String]) -> Option<&str> {
    args.windows(2).find(|w| w[0] == "--root" || w[0] == "-r").map(|w| w[1].as_str())
}

fn is_bucket(root: &str) -> bool {
    ["s3://", "az://", "gs://"].iter().any(|scheme| root.starts_with(scheme))
}

fn lancedb_installed() -> bool {
    Command::new("python3").args(["-c", "import lancedb"]).output().is_ok_and(|o| o.status.success())
}

fn expectation(args: &[String]) -> Expect {
    if root_of(args).is_some_and(is_bucket) {
        return Expect::FailsFor("cannot be reached");
    }
    match args.first().map(String::as_str) {
        Some("serve") => Expect::Serves,
        Some("export") if !lancedb_installed() => Expect::FailsFor("pip install lancedb"),
        _ => Expect::Succeeds,
    }
}

/// The command lines a documented one stands for: `DIR` is the project
/// `demo`, `--shard K/N` is each of the N shards.
fn instances(args: &[String]) -> Vec<Vec<String>> {
    let args: Vec<String> = args.iter().map(|a| if a == "DIR" { "demo".to_string() } else { a.clone() }).collect();
    let shard = args.windows(2).position(|w| w[0] == "--shard" && w[1].starts_with("K/"));
    let Some(at) = shard else { return vec![args] };
    let n: u32 = args[at + 1][2..].parse().expect("--shard K/N with a number N");
    (0..n)
        .map(|k| {
            let mut one = args.clone();
            one[at + 1] = format!("{k}/{n}");
            one
        })
        .collect()
}

/// A port nothing listens on (the bucket endpoint of the bucket examples).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// One documentation file's working folder: its projects and the files its
/// commands name.
struct Workspace {
    dir: tempfile::TempDir,
    mock_settings: String,
    endpoint: String,
    prepared: Vec<String>,
}

impl Workspace {
    fn new(mock: &MockServer) -> Self {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("question.txt"), "Who is Scrooge?\n").unwrap();
        let questions = serde_json::json!([
            {"id": "q1", "question": "Who was Marley?", "answer": "Scrooge's partner", "answer_aliases": [],
             "type": "single", "gold_docs": ["part0.txt"], "gold_passages": []}
        ]);
        fs::write(dir.path().join("questions.json"), questions.to_string()).unwrap();
        Workspace {
            dir,
            mock_settings: common::mock_settings(mock, "concurrent_requests: 4"),
            endpoint: format!("http://127.0.0.1:{}", closed_port()),
            prepared: Vec::new(),
        }
    }

    fn command(&self, args: &[String]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args).current_dir(self.dir.path());
        c.env("XDG_CACHE_HOME", self.dir.path().join("xdg-cache"))
            .env("GRAPHRAG_MODEL_CACHE_DIR", "off")
            .env("AWS_ENDPOINT_URL", &self.endpoint)
            .env("AWS_ACCESS_KEY_ID", "docs-test")
            .env("AWS_SECRET_ACCESS_KEY", "docs-test")
            .env("AWS_REGION", "us-east-1")
            .env_remove("GRAPHRAG_API_KEY");
        c
    }

    /// Makes `root` (a folder under the workspace) a project on the mock
    /// server with three passages of input, once: `init` first where the
    /// documentation did not run it.
    fn prepare(&mut self, root: &str) {
        if self.prepared.iter().any(|r| r == root) {
            return;
        }
        let path = self.dir.path().join(root);
        if !path.join("settings.yaml").exists() {
            let o = self.command(&["init".into(), "--root".into(), root.into()]).output().unwrap();
            assert!(o.status.success(), "init --root {root}: {}", common::text(&o));
        }
        fs::write(path.join("settings.yaml"), &self.mock_settings).unwrap();
        for doc in common::passages(3, 600) {
            common::put(&path, &doc);
        }
        self.prepared.push(root.to_string());
    }

    /// Runs one command line and says what was wrong with it, if anything.
    fn check(&mut self, place: &str, args: &[String]) -> Option<String> {
        let shown = format!("{place}: graphrag-rs {}", args.join(" "));
        let local_root = root_of(args).filter(|r| !is_bucket(r)).map(str::to_string);
        let is_init = args.first().is_some_and(|a| a == "init");
        if let (Some(root), false) = (&local_root, is_init) {
            self.prepare(root);
        }
        let expect = expectation(args);
        let outcome = if expect == Expect::Serves { self.serve(args) } else { self.run(args) };
        let (code, output) = match outcome {
            Ok(done) => done,
            Err(why) => return Some(format!("{shown}\n  {why}")),
        };
        if code == Some(2) {
            return Some(format!("{shown}\n  the CLI refused the command line:\n{output}"));
        }
        let wrong = match expect {
            Expect::Succeeds | Expect::Serves if code != Some(0) => Some("it failed".to_string()),
            Expect::FailsFor(_) if code == Some(0) => Some("it succeeded without what it needs".to_string()),
            Expect::FailsFor(needle) if !output.contains(needle) => Some(format!("its error does not say `{needle}`")),
            _ => None,
        };
        if let (Some(root), true, None) = (&local_root, is_init, &wrong) {
            // The documentation's own project: its models are now the mock's.
            self.prepare(root);
        }
        wrong.map(|why| format!("{shown}\n  {why}:\n{output}"))
    }

    /// Runs a command to its end, within [`COMMAND_LIMIT`].
    fn run(&self, args: &[String]) -> Result<(Option<i32>, String), String> {
        let child = self.command(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let pid = child.id();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(child.wait_with_output()));
        match rx.recv_timeout(COMMAND_LIMIT) {
            Ok(output) => {
                let o: Output = output.unwrap();
                Ok((o.status.code(), common::text(&o)))
            }
            Err(_) => {
                // SAFETY: kill(2) on the pid of our own child, which has not been waited for.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                Err(format!("still running after {COMMAND_LIMIT:?}"))
            }
        }
    }

    /// Starts `serve` on a free port, waits for its web UI's address, stops it.
    fn serve(&self, args: &[String]) -> Result<(Option<i32>, String), String> {
        let mut args = args.to_vec();
        if !args.iter().any(|a| a == "--port") {
            args.extend(["--port".to_string(), "0".to_string()]);
        }
        let errors = self.dir.path().join("serve.stderr");
        let stderr = fs::File::create(&errors).unwrap();
        let mut child = self.command(&args).stdout(Stdio::piped()).stderr(stderr).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut seen = String::new();
        let started = loop {
            match rx.recv_timeout(COMMAND_LIMIT) {
                Ok(line) if line.contains("web UI: http://") => break true,
                Ok(line) => seen += &(line + "\n"),
                Err(_) => break false,
            }
        };
        let exited = child.try_wait().unwrap();
        child.kill().ok();
        child.wait().unwrap();
        seen += &fs::read_to_string(&errors).unwrap();
        match (started, exited) {
            (true, _) => Ok((Some(0), seen)),
            (false, Some(status)) => Ok((status.code(), seen)),
            (false, None) => Err(format!("no web UI address within {COMMAND_LIMIT:?}:\n{seen}")),
        }
    }
}

#[test]
fn every_documented_command_runs() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let mut found = BTreeMap::new();
    let mut problems = Vec::new();
    for file in doc_files() {
        let name = file.strip_prefix(repo()).unwrap().display().to_string();
        let cmds = commands(&name, &fs::read_to_string(&file).unwrap());
        if cmds.is_empty() {
            continue;
        }
        found.insert(name, cmds.len());
        let mut workspace = Workspace::new(&mock);
        for cmd in &cmds {
            for args in instances(&cmd.args) {
                problems.extend(workspace.check(&cmd.place, &args));
            }
        }
    }
    // The pages that show commands today: a harness that stopped finding
    // them would pass on nothing.
    for page in ["README.md", "docs/cli.md", "docs/cluster.md", "docs/prompt-tune.md"] {
        assert!(found.contains_key(page), "no command found in {page}: {found:?}");
    }
    assert!(problems.is_empty(), "{} documented command(s) do not run:\n\n{}", problems.len(), problems.join("\n\n"));
}

/// The check above tells a refused command line from a failed run: a flag
/// the CLI does not have is a problem even where the command may fail.
#[test]
fn a_flag_the_cli_lacks_is_caught() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let mut workspace = Workspace::new(&mock);
    let renamed: Vec<String> =
        ["query", "--root", "s3://my-bucket/carol", "--context-olny", "Who?"].map(String::from).into();
    let problem = workspace.check("here", &renamed).expect("a misspelt flag is a problem");
    assert!(problem.contains("refused the command line") && problem.contains("--context-olny"), "{problem}");
}

#[test]
fn the_harness_reads_shell_lines_as_a_shell_does() {
    let text = "```sh\n./target/release/graphrag-rs init --root demo && cp a b && graphrag-rs query -r demo \"Who is it?\"   # a comment\ngraphrag-rs index \\\n  --root DIR --shard K/2\n```\n```\ngraphrag-rs not-shell\n```\n";
    let cmds = commands("t.md", text);
    let args: Vec<Vec<String>> = cmds.iter().map(|c| c.args.clone()).collect();
    assert_eq!(
        args,
        vec![
            vec!["init", "--root", "demo"],
            vec!["query", "-r", "demo", "Who is it?"],
            vec!["index", "--root", "DIR", "--shard", "K/2"],
        ]
    );
    assert_eq!(cmds[2].place, "t.md:3");
    assert_eq!(
        instances(&cmds[2].args),
        vec![vec!["index", "--root", "demo", "--shard", "0/2"], vec!["index", "--root", "demo", "--shard", "1/2"]]
    );
}

/// The flags (`--long`, `-s`) a synopsis line lists.
fn flags(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in text.split(|c: char| c.is_whitespace() || "[]|".contains(c)) {
        let word = raw.trim_end_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-');
        let is_flag =
            word.starts_with("--") && word.len() > 2 || word.len() == 2 && word.starts_with('-') && word != "--";
        if is_flag && word[1..].chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            out.push(word.to_string());
        }
    }
    out
}

fn help(command: &[&str]) -> String {
    let mut args = command.to_vec();
    args.push("--help");
    let o = Command::new(BIN).args(&args).output().unwrap();
    assert!(o.status.success(), "{args:?}: {}", common::text(&o));
    String::from_utf8(o.stdout).unwrap()
}

/// Whether `--help` lists `flag` as an option (`-r, --root <ROOT>`, `--resume`).
fn offers(help: &str, flag: &str) -> bool {
    help.split(|c: char| c.is_whitespace() || c == ',' || c == '=').any(|w| w == flag)
}

#[test]
fn the_synopsis_of_docs_cli_names_only_flags_the_commands_take() {
    let cli = fs::read_to_string(repo().join("docs/cli.md")).unwrap();
    let start = cli.find("```\ngraphrag-rs init").expect("docs/cli.md opens with the synopsis") + 4;
    let synopsis = &cli[start..start + cli[start..].find("```").unwrap()];
    // A command's entry: its line and the indented lines under it.
    let mut entries: Vec<(Vec<&str>, String)> = Vec::new();
    for line in synopsis.lines() {
        if let Some(rest) = line.strip_prefix("graphrag-rs ") {
            let name: Vec<&str> =
                rest.split_whitespace().take_while(|w| w.chars().all(|c| c.is_ascii_lowercase() || c == '-')).collect();
            entries.push((name, rest.to_string()));
        } else if let Some(flags) = line.strip_prefix("global flags:") {
            entries.push((Vec::new(), flags.to_string()));
        } else if line.starts_with(' ') {
            let last = entries.last_mut().expect("a continuation under a command");
            last.1 = format!("{} {line}", last.1);
        }
    }
    let names: Vec<String> = entries.iter().map(|(n, _)| n.join(" ")).collect();
    for expected in [
        "init",
        "index",
        "query",
        "eval",
        "update",
        "prompt-tune",
        "export lancedb",
        "serve",
        "verbs",
        "cache import",
        "",
    ] {
        assert!(names.iter().any(|n| n == expected), "the synopsis lost `{expected}`: {names:?}");
    }
    let mut unknown = Vec::new();
    for (name, text) in &entries {
        let help = help(name);
        // (`-vv`, `-v` twice, is no flag of its own and not read as one.)
        for flag in flags(text) {
            if !offers(&help, &flag) {
                unknown.push(format!("graphrag-rs {} {flag}", name.join(" ")));
            }
        }
    }
    assert!(unknown.is_empty(), "docs/cli.md's synopsis names flags the CLI does not take: {unknown:?}");
}

#[test]
fn synopsis_flags_are_read_with_their_brackets_and_values_off() {
    assert_eq!(
        flags("[-r DIR] [--shard K/N [--phase embed] | --merge] [--discover-entity-types|--no-discover-entity-types] -v / -vv"),
        vec!["-r", "--shard", "--phase", "--merge", "--discover-entity-types", "--no-discover-entity-types", "-v"]
    );
    assert!(offers("  -r, --root <ROOT>  The project", "-r"));
    assert!(!offers("  --rooted", "--root"));
}
