//! First-hour mistakes end at once with one error that names the setting
//! (file, line, key) and says what to do: a server that is down (closed
//! port), an unknown host, a web page instead of the API, a base URL
//! without /v1, a rejected key; `--method auto` with such a chat model is an
//! error, not a silent fast index; `--skip-validation` bypasses the check.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use graphrag_mock_llm::{MockConfig, MockServer};

fn graphrag(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graphrag-rs")).args(args).output().expect("binary runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A project whose chat model is at `api_base` (embeddings in-process).
fn project(api_base: &str, extra: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_str().unwrap();
    assert!(graphrag(&["init", "-r", root]).status.success());
    fs::write(dir.path().join("input/a.txt"), "Scrooge and Marley kept a counting-house in London.\n").unwrap();
    let settings = format!(
        "completion_models:\n  default_completion_model:\n    model: gpt-4.1\n    api_key: sk-first-hour-42\n    api_base: {api_base}\n{extra}"
    );
    fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    dir
}

/// Runs `args` on the project; it must fail, well within the five seconds
/// a first-hour mistake may cost (the check's own limit is 4 s; the bound
/// here only proves no retry loop ran). Returns the error output.
fn fails_at_once(dir: &Path, args: &[&str]) -> String {
    let mut full = vec!["-q"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-r", dir.to_str().unwrap()]);
    let started = Instant::now();
    let o = graphrag(&full);
    let took = started.elapsed();
    assert!(!o.status.success(), "{}", text(&o));
    assert!(took < Duration::from_secs(20), "took {took:?}: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(!err.contains("sk-first-hour-42"), "{err}");
    assert!(!err.contains("retrying in"), "no retries before the error: {err}");
    assert!(err.contains("--skip-validation"), "{err}");
    err
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A plain web server (the wrong port: a dashboard, a proxy's page) that
/// answers every request with an HTML page.
fn html_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let body = "<!DOCTYPE html><html><body><h1>Welcome</h1></body></html>";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn a_server_that_is_down_is_named_with_its_setting() {
    let base = format!("http://127.0.0.1:{}/v1", closed_port());
    let dir = project(&base, "community_reports:\n  mode: extractive\n");
    let err = fails_at_once(dir.path(), &["index"]);
    assert!(err.contains("settings.yaml:5: `completion_models.default_completion_model.api_base`"), "{err}");
    assert!(err.contains("nothing is listening") && err.contains("start the model server"), "{err}");
    // `--method auto` chose standard because a chat model is configured: no silent fast index.
    assert!(err.contains("--method fast"), "{err}");
    assert!(!dir.path().join("output/entities.parquet").exists());
    // The same for update and query.
    fails_at_once(dir.path(), &["update"]);
    // With extractive reports the fast method calls no chat model: nothing to check.
    let o = graphrag(&["-q", "index", "-m", "fast", "-r", dir.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let err = fails_at_once(dir.path(), &["query", "-m", "basic", "Who?"]);
    assert!(err.contains("nothing is listening"), "{err}");
}

#[test]
fn an_unknown_host_is_named() {
    let dir = project("http://llm-server.invalid:8000/v1", "");
    let err = fails_at_once(dir.path(), &["index"]);
    assert!(err.contains("`completion_models.default_completion_model.api_base`"), "{err}");
    assert!(err.contains("llm-server.invalid"), "{err}");
}

#[test]
fn a_web_page_instead_of_the_api_is_named() {
    let dir = project(&format!("http://127.0.0.1:{}/v1", html_server()), "");
    let err = fails_at_once(dir.path(), &["index", "-m", "standard"]);
    assert!(err.contains("text/html") && err.contains("not the OpenAI API"), "{err}");
    assert!(err.contains("`completion_models.default_completion_model.api_base`"), "{err}");
    assert!(!err.contains("--method auto"), "{err}");
}

#[test]
fn a_base_url_without_v1_gets_the_fix() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let bare = mock.base_url().trim_end_matches("/v1").to_string();
    let dir = project(&bare, "");
    let err = fails_at_once(dir.path(), &["index"]);
    assert!(err.contains("HTTP 404"), "{err}");
    assert!(err.contains(&format!("set api_base to `{bare}/v1`")), "{err}");
}

#[test]
fn a_rejected_key_and_a_bad_embedding_endpoint_are_named() {
    let mock = MockServer::start(MockConfig {
        faults: vec![graphrag_mock_llm::FaultRule::always(graphrag_mock_llm::FaultKind::ServerError { status: 401 })],
        ..MockConfig::default()
    })
    .unwrap();
    let dir = project(&mock.base_url(), "");
    let err = fails_at_once(dir.path(), &["index"]);
    assert!(
        err.contains("`completion_models.default_completion_model.api_key`") && err.contains("GRAPHRAG_API_KEY"),
        "{err}"
    );
    // The check runs beside loading and chunking; no model step starts after it failed.
    assert_eq!(mock.stats().chat_requests, 1, "the check's request only");
    assert!(!err.contains("index --resume"), "the check's error alone, not a failed run's note: {err}");

    let up = MockServer::start(MockConfig::default()).unwrap();
    let embedding = format!(
        "embedding_models:\n  default_embedding_model:\n    model: text-embedding-3-small\n    api_key: k\n    api_base: http://127.0.0.1:{}/v1\n",
        closed_port()
    );
    let dir = project(&up.base_url(), &embedding);
    let err = fails_at_once(dir.path(), &["index"]);
    assert!(err.contains("settings.yaml:10: `embedding_models.default_embedding_model.api_base`"), "{err}");
}

#[test]
fn graphrag_inits_placeholder_key_is_named() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock.base_url(), "");
    let settings = fs::read_to_string(dir.path().join("settings.yaml")).unwrap();
    fs::write(dir.path().join("settings.yaml"), settings.replace("sk-first-hour-42", "${GRAPHRAG_API_KEY}")).unwrap();
    fs::write(dir.path().join(".env"), "GRAPHRAG_API_KEY=<API_KEY>\n").unwrap();
    let err = fails_at_once(dir.path(), &["index"]);
    assert!(err.contains("settings.yaml:4: `completion_models.default_completion_model.api_key`"), "{err}");
    assert!(err.contains("placeholder"), "{err}");
    assert_eq!(mock.stats().requests, 0, "nothing is sent with the placeholder");
}

#[test]
fn skip_validation_skips_the_check_and_no_cache_the_cache() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let dir = project(&mock.base_url(), "    max_retries: 0\n");
    let root = dir.path().to_str().unwrap();
    let o = graphrag(&["-q", "index", "-r", root]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(mock.stats().by_kind.get("connection_check"), Some(&1), "one check per endpoint");
    mock.reset_stats();
    let o = graphrag(&["-q", "index", "-r", root, "--skip-validation"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(mock.stats().requests, 0, "no check, and every answer comes from the cache");
    let o = graphrag(&["-q", "index", "-r", root, "--dry-run"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(mock.stats().requests, 0, "a dry run sends nothing");

    // --no-cache: every answer asked again, the cache neither read nor written.
    let cached = count_files(&dir.path().join("cache"));
    let o = graphrag(&["-q", "index", "-r", root, "--no-cache", "--skip-validation"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(mock.stats().chat_requests > 1, "{:?}", mock.stats());
    assert_eq!(count_files(&dir.path().join("cache")), cached);
}

fn count_files(dir: &Path) -> usize {
    fs::read_dir(dir).unwrap().flatten().map(|e| if e.path().is_dir() { count_files(&e.path()) } else { 1 }).sum()
}
