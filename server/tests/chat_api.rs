//! The chat APIs as clients use them: OpenAI's and Ollama's message shapes
//! (content parts, null content, images refused), `/v1/models/{model}`,
//! `/api/show`, usage at the end of streams, errors in each API's shape;
//! the official `openai` and `ollama` Python clients in a scripted session
//! (server/tests/sdk_clients.py); and a project without a usable chat
//! model, whose questions are refused while its context is served.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use graphrag_mock_llm::{MockConfig, MockServer};
use graphrag_server::{chat_model, ServeOptions, Server};
use serde_json::{json, Value};

/// The `data:` events of an SSE body, `[DONE]` left out.
fn events(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

fn chat(addr: SocketAddr, path: &str, body: Value) -> Response {
    post_json(addr, path, &body)
}

/// Whether python3 can import the official clients; under CI it must.
fn python_clients() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import openai, ollama"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok || std::env::var_os("CI").is_none(),
        "python3 with the openai and ollama packages is required under CI (pip install openai ollama)"
    );
    if !ok {
        eprintln!("skipped the Python clients' session: `pip install openai ollama` to run it");
    }
    ok
}

/// Runs server/tests/sdk_clients.py `mode` against `addr` (at most 120 s).
fn run_sdk_session(mode: &str, addr: SocketAddr) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk_clients.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .args([mode, &format!("http://{addr}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 starts");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the Python clients' session ({mode}) did not end within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    let mut err = String::new();
    use std::io::Read;
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "the Python clients' session ({mode}) failed:\n{out}\n{err}");
    assert!(out.contains(&format!("{mode}: ok")), "{out}\n{err}");
}

#[test]
fn chat_apis_take_messages_as_the_sdks_send_them() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    // A byte order mark before the text: no part of the document's summary.
    let marley = format!("\u{feff}{}", carol("MARLEY'S GHOST", 1500));
    let project = project(&mock, &[("marley.txt", marley), ("fezziwig.txt", carol("Old Fezziwig", 1500))]);
    index(project.path());
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(project.path()) }).unwrap();
    let addr = server.addr();

    let health = get(addr, "/health").json();
    assert_eq!(health["configuration"]["llm_model"], "mock-gpt", "{health}");
    assert_eq!(health["configuration"]["chat_model"]["configured"], true, "{health}");
    assert_eq!(health["configuration"]["chat_model"]["startup_check"], "not run", "{health}");
    chat_model::check_in_background(server.state().clone()).expect("a check to run").join().unwrap();
    assert_eq!(get(addr, "/health").json()["configuration"]["chat_model"]["startup_check"], "passed");

    let docs = get(addr, "/documents").json();
    let marley = docs["statuses"]["processed"].as_array().unwrap().iter().find(|d| d["file_path"] == "marley.txt");
    let summary = marley.expect("marley.txt is processed")["content_summary"].as_str().unwrap().to_string();
    assert!(summary.starts_with("MARLEY"), "{summary:?}");

    // OpenAI: content as a list of text parts, null content in the history.
    let r = chat(
        addr,
        "/v1/chat/completions",
        json!({"model": "graphrag-rs:latest", "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": "Who is Marley?"},
            {"role": "assistant", "content": null},
            {"role": "user", "content": [{"type": "text", "text": "/naive Who is"}, {"type": "text", "text": "Fezziwig?"}]},
        ]}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let c = r.json();
    assert!(!c["choices"][0]["message"]["content"].as_str().unwrap().is_empty(), "{c}");
    assert!(c["usage"]["total_tokens"].as_u64().unwrap() > 0, "{c}");

    // Images are refused in each API's error shape.
    let image = json!([{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]);
    let r = chat(addr, "/v1/chat/completions", json!({"messages": [{"role": "user", "content": image}]}));
    assert_eq!(r.status, 422);
    let e = r.json();
    assert_eq!(e["error"]["type"], "invalid_request_error", "{e}");
    assert!(e["error"]["message"].as_str().unwrap().contains("messages[0].content[1]"), "{e}");
    let r = chat(addr, "/api/chat", json!({"messages": [{"role": "user", "content": "x", "images": ["AA=="]}]}));
    assert_eq!(r.status, 422);
    assert!(r.json()["error"].as_str().unwrap().contains("images are not served"), "{}", r.text());

    // The model: listed, retrieved by id (encoded or not), 404 for another.
    for id in ["graphrag-rs:latest", "graphrag-rs%3Alatest", "graphrag-rs"] {
        let r = get(addr, &format!("/v1/models/{id}"));
        assert_eq!(r.status, 200, "{id}: {}", r.text());
        assert_eq!(r.json()["id"], "graphrag-rs:latest");
    }
    let r = get(addr, "/v1/models/gpt-4o");
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], "model_not_found");
    let show = chat(addr, "/api/show", json!({"model": "graphrag-rs"}));
    assert_eq!(show.status, 200, "{}", show.text());
    let show = show.json();
    assert_eq!(show["details"]["family"], "graphrag-rs");
    assert_eq!(show["capabilities"], json!(["completion"]));
    assert_eq!(chat(addr, "/api/show", json!({"name": "graphrag-rs:latest"})).status, 200);
    let r = chat(addr, "/api/show", json!({"model": "llama3"}));
    assert_eq!(r.status, 404);
    assert!(r.json()["error"].as_str().unwrap().contains("model 'llama3' not found"));

    // An OpenAI stream with include_usage: `usage: null` on every chunk, then
    // one chunk with no choices and the usage. (A cached answer costs no
    // tokens: each question whose usage is checked is a new one.)
    let question = json!([{"role": "user", "content": "/naive Who is Fezziwig?"}]);
    let r = chat(
        addr,
        "/v1/chat/completions",
        json!({"stream": true, "stream_options": {"include_usage": true}, "messages": question}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().trim_end().ends_with("data: [DONE]"));
    let chunks = events(&r.text());
    let (last, pieces) = chunks.split_last().unwrap();
    assert_eq!(last["choices"], json!([]), "{last}");
    assert!(last["usage"]["completion_tokens"].as_u64().unwrap() > 0, "{last}");
    assert!(pieces.iter().all(|c| c["usage"].is_null() && c["choices"].as_array().unwrap().len() == 1));
    let text: String = pieces.iter().filter_map(|c| c["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(!text.is_empty());
    // Without it, no usage at all (as OpenAI).
    let r = chat(addr, "/v1/chat/completions", json!({"stream": true, "messages": question}));
    assert!(events(&r.text()).iter().all(|c| c.get("usage").is_none()), "{}", r.text());

    // Ollama's closing object counts the tokens, streamed or not.
    let r = chat(
        addr,
        "/api/chat",
        json!({"model": "graphrag-rs", "messages": [{"role": "user", "content": "/naive Who is old Fezziwig?"}]}),
    );
    let lines = r.lines();
    let done = lines.last().unwrap();
    assert_eq!(done["done"], true);
    assert!(done["eval_count"].as_u64().unwrap() > 0 && done["prompt_eval_count"].as_u64().unwrap() > 0, "{done}");
    let r = chat(
        addr,
        "/api/generate",
        json!({"model": "graphrag-rs", "prompt": "/naive Where does Fezziwig work?", "stream": false}),
    );
    let g = r.json();
    assert!(g["eval_count"].as_u64().unwrap() > 0 && !g["response"].as_str().unwrap().is_empty(), "{g}");

    if python_clients() {
        run_sdk_session("answers", addr);
    }
}

#[test]
fn without_a_chat_model_questions_are_refused_and_the_context_is_served() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let project = project_without_chat_model(&mock);
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(project.path()) }).unwrap();
    let addr = server.addr();

    let health = get(addr, "/health").json();
    let config = &health["configuration"];
    assert!(config["llm_model"].is_null(), "{health}");
    assert_eq!(config["chat_model"]["configured"], false, "{health}");
    assert!(chat_model::check_in_background(server.state().clone()).is_none(), "nothing to check");
    assert_eq!(config["chat_model"]["startup_check"], "not run", "{health}");
    assert!(config["chat_model"]["detail"].as_str().unwrap().contains("completion_models.default_completion_model"));
    assert!(!health.to_string().contains("gpt-4.1-mini"), "{health}");

    let says_how = |detail: &str| {
        assert!(detail.contains("no api_key and no api_base"), "{detail}");
        assert!(detail.contains("only_need_context"), "{detail}");
    };
    let question = |stream: bool| json!({"query": "Who is Fezziwig?", "mode": "basic", "stream": stream});
    for path in ["/query", "/query/stream"] {
        let r = chat(addr, path, question(false));
        assert_eq!(r.status, 503, "{path}: {}", r.text());
        says_how(r.json()["detail"].as_str().unwrap());
    }
    let messages = json!([{"role": "user", "content": "Who is Fezziwig?"}]);
    for stream in [false, true] {
        let r = chat(addr, "/api/chat", json!({"messages": messages, "stream": stream}));
        assert_eq!(r.status, 503, "{}", r.text());
        says_how(r.json()["error"].as_str().unwrap());
        let r = chat(addr, "/api/generate", json!({"prompt": "Who is Fezziwig?", "stream": stream}));
        assert_eq!(r.status, 503, "{}", r.text());
        let r = chat(addr, "/v1/chat/completions", json!({"messages": messages, "stream": stream}));
        assert_eq!(r.status, 503, "{}", r.text());
        assert_eq!(r.json()["error"]["type"], "server_error");
        says_how(r.json()["error"]["message"].as_str().unwrap());
    }

    // Asking for the context is served, labelled as such.
    let r = chat(addr, "/query", json!({"query": "Who is Fezziwig?", "mode": "basic", "only_need_context": true}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["llm_generated"], false);
    assert!(r.json()["response"].as_str().unwrap().contains("Fezziwig"));
    let r = chat(
        addr,
        "/api/chat",
        json!({"stream": false, "messages": [{"role": "user", "content": "/basiccontext Who is Fezziwig?"}]}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["message"]["content"].as_str().unwrap().contains("Fezziwig"));

    if python_clients() {
        run_sdk_session("no-model", addr);
    }
}

#[test]
fn a_chat_model_that_does_not_answer_fails_its_start_up_check() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let project = project(&mock, &[]);
    let settings = std::fs::read_to_string(project.path().join("settings.yaml")).unwrap();
    let chat_at_closed_port = settings.replacen(&mock.base_url(), &format!("http://127.0.0.1:{closed}/v1"), 1);
    std::fs::write(project.path().join("settings.yaml"), chat_at_closed_port).unwrap();
    let server = Server::start(ServeOptions { port: 0, ..ServeOptions::new(project.path()) }).unwrap();
    chat_model::check_in_background(server.state().clone()).expect("a check to run").join().unwrap();
    let health = get(server.addr(), "/health").json();
    let failed =
        health["configuration"]["chat_model"]["startup_check"]["failed"].as_str().unwrap_or_default().to_string();
    assert!(failed.contains("completion_models.default_completion_model"), "{health}");
    assert!(!failed.contains("sk-test"), "{failed}");
    // Configured all the same: questions are not refused for it (the server may come up).
    assert_eq!(health["configuration"]["chat_model"]["configured"], true);
}
