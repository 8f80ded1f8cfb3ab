//! The LLM layer against the project's mock OpenAI-compatible server:
//! limits, retries, fault handling, JSON repair, caching, secrets.

use std::path::Path;
use std::time::Duration;

use graphrag_engine::llm::answer::{self, AnswerCheck};
use graphrag_engine::llm::{ChatModel, EmbeddingModel, LlmError, Message, ResponseCache, UsageCounters};
use graphrag_engine::settings::{ModelConfig, Secret};
use graphrag_mock_llm::{FaultKind, FaultRule, MockConfig, MockServer};
use std::sync::Arc;

const KEY: &str = "sk-test-do-not-leak-4242";

fn server(latency_ms: u64, faults: Vec<FaultRule>) -> MockServer {
    MockServer::start(MockConfig { latency: Duration::from_millis(latency_ms), faults, ..MockConfig::default() })
        .expect("mock server starts")
}

fn config(mock: &MockServer) -> ModelConfig {
    ModelConfig {
        model: "mock-chat".into(),
        api_base: Some(mock.base_url()),
        api_key: Secret::from(KEY),
        retry_base_delay: 0.001,
        max_retry_wait: 0.05,
        max_retries: 8,
        request_timeout: 5.0,
        ..ModelConfig::default()
    }
}

fn fault(kind: FaultKind, first: u32) -> FaultRule {
    FaultRule { kind, first: Some(first), every: None, after: None, endpoint: None }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

fn ask(i: usize) -> Vec<Message> {
    vec![
        Message::system("You are a helpful assistant."),
        Message::user(format!("Question number {i}: who is Scrooge?")),
    ]
}

fn model(cfg: &ModelConfig, cache: Option<&Path>) -> Arc<ChatModel> {
    Arc::new(ChatModel::new("default_completion_model", cfg, cache.map(|d| Arc::new(ResponseCache::new(d)))).unwrap())
}

/// Asks question `i` of a model without cache, for a plain-text answer.
fn ask_text(cfg: &ModelConfig, i: usize, usage: &UsageCounters) -> Result<String, LlmError> {
    runtime().block_on(model(cfg, None).chat(&ask(i), false, usage, &answer::text())).map(|a| a.completion.content)
}

/// Sends `n` distinct chat requests concurrently.
fn chat_many(model: &Arc<ChatModel>, n: usize, usage: &UsageCounters) -> Vec<Result<String, LlmError>> {
    let rt = runtime();
    rt.block_on(async {
        let calls = (0..n).map(|i| {
            let model = model.clone();
            async move { model.chat(&ask(i), false, usage, &answer::text()).await.map(|a| a.completion.content) }
        });
        futures_util::future::join_all(calls).await
    })
}

#[test]
fn concurrency_never_exceeds_the_limit() {
    let mock = server(20, vec![]);
    let cfg = ModelConfig { concurrent_requests: Some(3), ..config(&mock) };
    let usage = UsageCounters::default();
    let results = chat_many(&model(&cfg, None), 24, &usage);
    assert!(results.iter().all(Result::is_ok));
    let stats = mock.stats();
    assert_eq!(stats.chat_requests, 24);
    assert!(stats.max_in_flight <= 3, "max in flight {}", stats.max_in_flight);
    assert!(stats.max_in_flight >= 2, "requests did overlap: {}", stats.max_in_flight);
    assert_eq!(usage.total().calls, 24);
    assert!(usage.total().prompt_tokens > 24 * 10);
}

#[test]
fn a_429_storm_with_retry_after_is_ridden_out() {
    let mock = server(0, vec![fault(FaultKind::RateLimit { retry_after_ms: 5 }, 12)]);
    let usage = UsageCounters::default();
    let results = chat_many(&model(&config(&mock), None), 4, &usage);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    assert_eq!(mock.stats().faults_injected, 12);
    assert_eq!(usage.total().retries, 12);
    assert_eq!(usage.total().calls, 4);
}

#[test]
fn dropped_connections_and_server_errors_are_retried() {
    let mock = server(
        0,
        // Every rule counts every request: requests 1-2 dropped, 3-4 get a 503.
        vec![fault(FaultKind::DropConnection, 2), fault(FaultKind::ServerError { status: 503 }, 4)],
    );
    let usage = UsageCounters::default();
    let results = chat_many(&model(&config(&mock), None), 1, &usage);
    assert!(results[0].is_ok(), "{results:?}");
    assert_eq!(usage.total().retries, 4);
}

#[test]
fn a_timeout_is_retried() {
    let mock = server(0, vec![fault(FaultKind::Slow { delay: Duration::from_secs(3) }, 1)]);
    let cfg = ModelConfig { request_timeout: 0.3, ..config(&mock) };
    let usage = UsageCounters::default();
    let results = chat_many(&model(&cfg, None), 1, &usage);
    assert!(results[0].is_ok(), "{results:?}");
    assert_eq!(usage.total().retries, 1);
}

#[test]
fn a_non_retryable_400_fails_fast_with_the_server_message() {
    let mock = server(0, vec![fault(FaultKind::BadRequest, 1)]);
    let usage = UsageCounters::default();
    let results = chat_many(&model(&config(&mock), None), 1, &usage);
    let err = results[0].as_ref().unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, LlmError::Rejected { status: 400, .. }), "{msg}");
    assert!(msg.contains("400"), "{msg}");
    assert!(!msg.contains(KEY));
    assert_eq!(mock.stats().chat_requests, 1, "no retry of a 400");
    assert_eq!(usage.total().failures, 1);
}

#[test]
fn giving_up_after_max_retries_says_so() {
    let mock = server(0, vec![fault(FaultKind::ServerError { status: 500 }, 100)]);
    let cfg = ModelConfig { max_retries: 2, ..config(&mock) };
    let usage = UsageCounters::default();
    let err = chat_many(&model(&cfg, None), 1, &usage).remove(0).unwrap_err();
    assert!(matches!(err, LlmError::Exhausted { attempts: 3, .. }), "{err}");
    assert_eq!(mock.stats().chat_requests, 3);
}

fn report() -> Vec<Message> {
    vec![Message::user(
        "Write a community report as JSON with title, summary, rating, rating_explanation and findings.\n\n-Data-\nEntities\nid,entity,description\n1,SCROOGE,a miser\n",
    )]
}

#[test]
fn malformed_or_cut_off_json_is_asked_again() {
    // (Small slips — fences, prose, trailing commas — are repaired: see llm::answer's tests.)
    let mock = server(0, vec![fault(FaultKind::Malformed, 1)]);
    let usage = UsageCounters::default();
    let value = runtime().block_on(model(&config(&mock), None).chat_json(&report(), &usage)).expect("asked again");
    assert!(value.is_object(), "{value}");
    assert_eq!((usage.total().malformed_answers, mock.stats().chat_requests), (1, 2));

    // A cut-off answer might repair into valid JSON that lacks the end: asked again.
    let mock = server(0, vec![fault(FaultKind::Truncated, 1)]);
    let usage = UsageCounters::default();
    let value = runtime().block_on(model(&config(&mock), None).chat_json(&report(), &usage)).expect("asked again");
    assert!(value.is_object(), "{value}");
    assert_eq!((usage.total().truncated_answers, mock.stats().chat_requests), (1, 2));
}

/// Accepts anything: what caching used to be.
fn anything() -> AnswerCheck<impl Fn(&str) -> Result<(), String>> {
    AnswerCheck::new("anything", |_: &str| Ok(()))
}

#[test]
fn an_unusable_answer_is_asked_again_and_never_cached() {
    let cache = tempfile::tempdir().unwrap();
    // Malformed twice: a plain retry, then a corrective one, which the mock
    // answers like the first request.
    let mock = server(0, vec![fault(FaultKind::Malformed, 2)]);
    let usage = UsageCounters::default();
    let m = model(&config(&mock), Some(cache.path()));
    let got = runtime().block_on(m.chat(&ask(1), false, &usage, &answer::text())).unwrap();
    assert_eq!(mock.stats().chat_requests, 3);
    assert_eq!((usage.total().malformed_answers, usage.total().answer_failures), (2, 0));
    let healthy = server(0, vec![]);
    let fresh =
        runtime().block_on(model(&config(&healthy), None).chat(&ask(1), false, &usage, &answer::text())).unwrap();
    assert_eq!(got.completion.content, fresh.completion.content, "the corrected answer is the fault-free one");

    // Every answer unusable: a named failure, nothing cached, the next run asks again.
    let mock = server(0, vec![FaultRule::always(FaultKind::Mixed)]);
    let m = model(&config(&mock), Some(cache.path()));
    let usage = UsageCounters::default();
    let err = runtime().block_on(m.chat(&ask(2), false, &usage, &answer::text())).unwrap_err();
    assert!(matches!(err, LlmError::InvalidAnswer { attempts: 3, .. }), "{err}");
    let u = usage.total();
    assert_eq!((u.malformed_answers, u.truncated_answers, u.answer_failures), (2, 1, 1), "{u:?}");
    mock.set_faults(vec![]);
    mock.reset_stats();
    runtime().block_on(m.chat(&ask(2), false, &UsageCounters::default(), &answer::text())).unwrap();
    assert_eq!(mock.stats().chat_requests, 1, "nothing unusable was cached");

    // An entry a looser check let in (an older version's cache) is asked again.
    mock.set_faults(vec![fault(FaultKind::Empty, 1)]);
    runtime().block_on(m.chat(&ask(3), false, &UsageCounters::default(), &anything())).unwrap();
    mock.reset_stats();
    let usage = UsageCounters::default();
    runtime().block_on(m.chat(&ask(3), false, &usage, &answer::text())).unwrap();
    assert_eq!((mock.stats().chat_requests, usage.total().cache_rejected), (1, 1));
}

#[test]
fn answer_size_is_capped() {
    // Over the answer limit: unusable, asked again.
    let mock = server(0, vec![fault(FaultKind::Huge { bytes: answer::MAX_ANSWER_BYTES + 10 }, 1)]);
    let usage = UsageCounters::default();
    ask_text(&config(&mock), 1, &usage).unwrap();
    assert_eq!(usage.total().oversized_answers, 1);
    // A body of megabytes is not read to the end: an oversized answer too,
    // asked again, not a failed call.
    let mock = server(0, vec![fault(FaultKind::Huge { bytes: 5 << 20 }, 1)]);
    let usage = UsageCounters::default();
    ask_text(&config(&mock), 1, &usage).unwrap();
    assert_eq!(mock.stats().chat_requests, 2);
    let total = usage.total();
    assert_eq!((total.oversized_answers, total.failures, total.answer_failures), (1, 0, 0), "{total:?}");
    // Every time: the call fails naming the size, counted as unusable answers.
    let mock = server(0, vec![FaultRule::always(FaultKind::Huge { bytes: 5 << 20 })]);
    let usage = UsageCounters::default();
    let err = ask_text(&config(&mock), 1, &usage).unwrap_err();
    assert!(matches!(err, LlmError::InvalidAnswer { .. }) && err.to_string().contains("larger than 4 MB"), "{err}");
    assert_eq!((usage.total().oversized_answers, usage.total().failures), (3, 0));
}

#[test]
fn a_429_with_retry_after_600_waits_at_most_max_retry_wait() {
    // The cap is what bounds the wait, whatever the server asks for: the
    // issue's case (max_retry_wait: 2) is computed in retry.rs's unit test;
    // here the whole client path runs with a 50 ms cap so no test waits long.
    let mock = server(0, vec![fault(FaultKind::RateLimit { retry_after_ms: 600_000 }, 1)]);
    let cfg = ModelConfig { max_retry_wait: 0.05, ..config(&mock) };
    let usage = UsageCounters::default();
    let started = std::time::Instant::now();
    ask_text(&cfg, 1, &usage).unwrap();
    assert_eq!(usage.total().retry_wait_ms, 50);
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
}

#[test]
fn tls_errors_and_bad_requests_fail_at_once() {
    // https:// to a plain-HTTP server: a TLS failure, not retried.
    let mock = server(0, vec![]);
    let cfg = ModelConfig { api_base: Some(mock.base_url().replace("http://", "https://")), ..config(&mock) };
    let usage = UsageCounters::default();
    let err = ask_text(&cfg, 1, &usage).unwrap_err();
    assert!(matches!(err, LlmError::Rejected { .. }), "{err}");
    assert_eq!(usage.total().retries, 0, "{err}");
    // A 404 (a wrong path) is not retried either.
    let cfg = ModelConfig { api_base: Some(format!("{}/nowhere", mock.base_url())), ..config(&mock) };
    let err = ask_text(&cfg, 1, &usage).unwrap_err();
    assert!(matches!(err, LlmError::Rejected { status: 404, .. }), "{err}");
    assert_eq!(mock.stats().chat_requests, 0);
}

#[test]
fn a_second_run_is_served_from_the_cache_and_the_key_is_never_stored() {
    let mock = server(0, vec![]);
    let cache = tempfile::tempdir().unwrap();
    let first = UsageCounters::default();
    let answers = chat_many(&model(&config(&mock), Some(cache.path())), 10, &first);
    assert_eq!(mock.stats().chat_requests, 10);

    mock.reset_stats();
    let second = UsageCounters::default();
    let again = chat_many(&model(&config(&mock), Some(cache.path())), 10, &second);
    assert_eq!(mock.stats().requests, 0, "zero HTTP requests on the second run");
    assert_eq!(second.total().cache_hits, 10);
    assert_eq!(
        answers.iter().map(|a| a.as_ref().unwrap()).collect::<Vec<_>>(),
        again.iter().map(|a| a.as_ref().unwrap()).collect::<Vec<_>>()
    );
    for entry in walk(cache.path()) {
        let text = std::fs::read_to_string(&entry).unwrap();
        assert!(!text.contains(KEY), "{} holds the API key", entry.display());
    }
}

#[test]
fn embeddings_are_batched_and_cached() {
    let mock = server(0, vec![fault(FaultKind::RateLimit { retry_after_ms: 1 }, 1)]);
    let cache = tempfile::tempdir().unwrap();
    let cfg = ModelConfig { model: "mock-embed".into(), batch_size: 4, ..config(&mock) };
    let texts: Vec<String> = (0..10).map(|i| format!("text number {i} about ghosts")).collect();
    let usage = UsageCounters::default();
    let m = EmbeddingModel::new("e", &cfg, Some(Arc::new(ResponseCache::new(cache.path())))).unwrap();
    let vectors = runtime().block_on(m.embed(&texts, &usage)).unwrap();
    assert_eq!(vectors.len(), 10);
    assert!(vectors.iter().all(|v| v.len() == 384));
    assert_eq!(mock.stats().embedding_requests, 3 + 1, "3 batches + 1 rate-limited retry");
    assert_eq!(usage.total().embedded_texts, 10);

    mock.reset_stats();
    let again = runtime().block_on(m.embed(&texts, &UsageCounters::default())).unwrap();
    assert_eq!(again, vectors);
    assert_eq!(mock.stats().requests, 0);
}

#[test]
fn embeddings_read_the_same_as_base64_or_numbers() {
    let mock = server(0, vec![]);
    let texts: Vec<String> = (0..3).map(|i| format!("vector {i} of the ghost")).collect();
    let expected: Vec<Vec<f32>> = texts.iter().map(|t| graphrag_mock_llm::embed(t, 384)).collect();
    let base64 = ModelConfig { model: "mock-embed".into(), ..config(&mock) };
    let mut numbers = base64.clone();
    numbers.call_args.insert("encoding_format".into(), serde_json::json!("float"));
    for (cfg, base64_requests) in [(base64, 1), (numbers, 0)] {
        mock.reset_stats();
        let m = EmbeddingModel::new("e", &cfg, None).unwrap();
        let vectors = runtime().block_on(m.embed(&texts, &UsageCounters::default())).unwrap();
        assert_eq!(mock.stats().base64_embedding_requests, base64_requests);
        assert_eq!(
            vectors,
            expected,
            "encoding_format {}",
            cfg.call_args.get("encoding_format").map_or("base64".into(), |v| v.to_string())
        );
    }
}

#[test]
fn a_model_without_a_server_is_a_clear_error() {
    let err = ChatModel::new("m", &ModelConfig { model_provider: "custom".into(), ..ModelConfig::default() }, None)
        .err()
        .expect("no api_base for a custom provider");
    assert!(err.to_string().contains("api_base"), "{err}");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn streaming_delivers_the_answer_in_pieces_and_caches_it() {
    let mock = server(0, vec![]);
    let cache = tempfile::tempdir().unwrap();
    let m = model(&config(&mock), Some(cache.path()));
    let usage = UsageCounters::default();
    let mut pieces: Vec<String> = Vec::new();
    let streamed = runtime()
        .block_on(m.chat_stream(&ask(7), &usage, &mut |d: &str| pieces.push(d.to_string())))
        .expect("streamed answer");
    assert!(pieces.len() > 1, "several pieces: {pieces:?}");
    assert_eq!(pieces.concat(), streamed.content);
    assert!(streamed.prompt_tokens > 0 && streamed.completion_tokens > 0);
    let plain = runtime().block_on(m.chat(&ask(7), false, &UsageCounters::default(), &answer::text())).unwrap();
    assert_eq!(plain.completion.content, streamed.content, "a streamed answer is cached like any other");
    assert_eq!(mock.stats().chat_requests, 1);
}

#[test]
fn the_start_up_check_asks_again_after_a_dropped_connection_and_names_a_cut_short_body() {
    use graphrag_engine::llm::preflight::{check, ModelKind};
    use graphrag_mock_llm::Endpoint;
    let mock = server(0, vec![FaultRule::always(FaultKind::DropConnection).first(1).on(Endpoint::Chat)]);
    let dir = tempfile::tempdir().unwrap();
    let model = |name: &str| format!("    model: {name}\n    api_base: {}\n    api_key: {KEY}\n", mock.base_url());
    let settings = format!(
        "completion_models:\n  default_completion_model:\n{}embedding_models:\n  default_embedding_model:\n{}",
        model("mock-chat"),
        model("mock-embed")
    );
    std::fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    let loaded = graphrag_engine::settings::load(dir.path()).unwrap();
    let targets = [
        (ModelKind::Chat, "default_completion_model".to_string()),
        (ModelKind::Embedding, "default_embedding_model".to_string()),
    ];

    // One dropped connection: asked again, and the endpoint is fine.
    let report = check(&loaded, &targets).unwrap();
    assert_eq!((report.checked.len(), report.warnings.len()), (2, 0), "{report:?}");
    assert_eq!(mock.stats().chat_requests, 2, "the dropped probe was asked again");

    // Dropped every time: the run goes on and retries, as after a 500.
    mock.set_faults(vec![FaultRule::always(FaultKind::DropConnection).on(Endpoint::Chat)]);
    let report = check(&loaded, &targets).unwrap();
    assert!(report.warnings.iter().any(|w| w.contains("closed the connection") && w.contains("retries")), "{report:?}");

    // A cut-short or garbled embeddings body is said to be one.
    for (fault, defect) in [(FaultKind::Truncated, "cut short"), (FaultKind::Malformed, "malformed")] {
        mock.set_faults(vec![FaultRule::always(fault).on(Endpoint::Embeddings)]);
        let report = check(&loaded, &targets).unwrap();
        let warning = report.warnings.join("\n");
        assert!(warning.contains(defect) && !warning.contains("web page"), "{defect}: {warning}");
    }
}

/// `config` for `provider`'s own API at the mock server's address.
fn native(mock: &MockServer, provider: &str, model: &str) -> ModelConfig {
    ModelConfig {
        model_provider: provider.into(),
        model: model.into(),
        api_base: Some(mock.root_url()),
        ..config(mock)
    }
}

/// What the OpenAI path answers question `i` (the mock answers every API alike).
fn openai_text(mock: &MockServer, i: usize) -> String {
    ask_text(&config(mock), i, &UsageCounters::default()).unwrap()
}

#[test]
fn anthropic_and_gemini_answer_as_the_openai_path_streamed_or_not() {
    let mock = server(0, vec![]);
    for cfg in [native(&mock, "anthropic", "claude-sonnet-4-5"), native(&mock, "gemini", "gemini-2.5-flash")] {
        let usage = UsageCounters::default();
        let provider = cfg.model_provider.to_string();
        assert_eq!(ask_text(&cfg, 3, &usage).unwrap(), openai_text(&mock, 3), "{provider}");
        let counted = usage.total();
        assert!(counted.prompt_tokens > 0 && counted.completion_tokens > 0, "{provider}: {counted:?}");
        let mut pieces: Vec<String> = Vec::new();
        let streamed = runtime()
            .block_on(model(&cfg, None).chat_stream(&ask(4), &usage, &mut |d: &str| pieces.push(d.to_string())))
            .unwrap();
        assert!(pieces.len() > 1, "{provider}: {pieces:?}");
        assert_eq!((pieces.concat(), streamed.content.clone()), (openai_text(&mock, 4), openai_text(&mock, 4)));
        assert_eq!(streamed.finish_reason.as_deref(), Some("stop"), "{provider}");
        // Tokens as the stream reports them, not an estimate of the answer alone.
        assert!(streamed.prompt_tokens > 10, "{provider}: {streamed:?}");
    }
    // Gemini's JSON mode (responseMimeType) gives an object, as response_format does.
    let json =
        runtime().block_on(model(&native(&mock, "gemini", "g"), None).chat_json(&report(), &UsageCounters::default()));
    assert!(json.unwrap().is_object());
}

#[test]
fn an_anthropic_429_waits_its_retry_after_and_a_529_overload_is_retried() {
    let mock = server(
        0,
        vec![
            fault(FaultKind::RateLimit { retry_after_ms: 1000 }, 1),
            FaultRule::always(FaultKind::ServerError { status: 529 }).after(1).first(3),
        ],
    );
    let cfg = ModelConfig { max_retry_wait: 5.0, ..native(&mock, "anthropic", "claude-haiku-4-5") };
    let usage = UsageCounters::default();
    assert_eq!(ask_text(&cfg, 1, &usage).unwrap(), openai_text(&mock, 1));
    let counted = usage.total();
    assert_eq!(counted.retries, 3, "one 429 and two 529s: {counted:?}");
    // retry-after: 1 (whole seconds, as Anthropic sends it) is waited in
    // full; the 529s wait the backoff (milliseconds here).
    assert!((1000..1100).contains(&counted.retry_wait_ms), "{counted:?}");
}

#[test]
fn a_gemini_429_waits_the_retry_delay_of_its_body() {
    let mock = server(0, vec![fault(FaultKind::RateLimit { retry_after_ms: 250 }, 2)]);
    let cfg = ModelConfig { max_retry_wait: 5.0, ..native(&mock, "gemini", "gemini-2.5-flash") };
    let usage = UsageCounters::default();
    ask_text(&cfg, 1, &usage).unwrap();
    assert_eq!((usage.total().retries, usage.total().retry_wait_ms), (2, 500));
}

#[test]
fn gemini_embeddings_are_the_openai_vectors_and_are_cached() {
    let mock = server(0, vec![]);
    let texts: Vec<String> = (0..5).map(|i| format!("Marley was dead, number {i}")).collect();
    let embed = |cfg: &ModelConfig, usage: &UsageCounters| {
        let m = EmbeddingModel::new("e", cfg, None).unwrap();
        runtime().block_on(m.embed(&texts, usage)).unwrap()
    };
    let openai = embed(&config(&mock), &UsageCounters::default());
    let gemini_cfg = ModelConfig { batch_size: 2, ..native(&mock, "gemini", "gemini-embedding-001") };
    let usage = UsageCounters::default();
    assert_eq!(embed(&gemini_cfg, &usage), openai);
    assert_eq!(mock.stats().embedding_requests, 1 + 3, "batches of two");
    assert!(usage.total().prompt_tokens > 0, "Gemini reports none: estimated");
}

#[test]
fn the_start_up_check_speaks_each_api_and_keys_come_from_the_environment() {
    use graphrag_engine::llm::preflight::{check, ModelKind};
    let mock = server(0, vec![]);
    let dir = tempfile::tempdir().unwrap();
    // LiteLLM's `provider/model` names; keys only in the project's .env.
    let settings = format!(
        "completion_models:\n  default_completion_model:\n    model_provider: anthropic\n    model: anthropic/claude-sonnet-4-5\n    api_base: {root}\nembedding_models:\n  default_embedding_model:\n    model_provider: gemini\n    model: gemini/gemini-embedding-001\n    api_base: {root}\n",
        root = mock.root_url()
    );
    std::fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    std::fs::write(dir.path().join(".env"), format!("ANTHROPIC_API_KEY={KEY}\nGEMINI_API_KEY={KEY}-g\n")).unwrap();
    let loaded = graphrag_engine::settings::load(dir.path()).unwrap();
    let chat = &loaded.settings.completion_models["default_completion_model"];
    let embedding = &loaded.settings.embedding_models["default_embedding_model"];
    assert_eq!((chat.model.as_str(), chat.api_key.expose(), chat.max_tokens), ("claude-sonnet-4-5", KEY, Some(4096)));
    assert_eq!((embedding.model.as_str(), embedding.api_key.expose()), ("gemini-embedding-001", &*format!("{KEY}-g")));
    let targets = [
        (ModelKind::Chat, "default_completion_model".to_string()),
        (ModelKind::Embedding, "default_embedding_model".to_string()),
    ];
    let report = check(&loaded, &targets).unwrap();
    assert_eq!(report.checked.len(), 2, "{report:?}");
    assert!(report.checked[0].ends_with("/v1/messages"), "{report:?}");
    assert!(report.checked[1].ends_with("/v1beta/models/gemini-embedding-001:batchEmbedContents"), "{report:?}");
}

#[test]
fn bedrock_converse_is_signed_and_answers_as_the_openai_path() {
    use graphrag_engine::settings::AwsAccess;
    let mock = server(0, vec![fault(FaultKind::RateLimit { retry_after_ms: 1 }, 1)]);
    let aws = AwsAccess {
        key_id: "AKIDEXAMPLE".into(),
        secret: Secret::from(KEY),
        session_token: None,
        region: Some("us-east-1".into()),
    };
    let cfg =
        ModelConfig { aws: Some(aws.clone()), ..native(&mock, "bedrock", "anthropic.claude-3-haiku-20240307-v1:0") };
    let usage = UsageCounters::default();
    assert_eq!(ask_text(&cfg, 2, &usage).unwrap(), openai_text(&mock, 2), "signed, or the mock refuses it");
    assert_eq!(usage.total().retries, 1, "a ThrottlingException (429) is retried");
    mock.set_faults(vec![fault(FaultKind::BadRequest, 1)]);
    let err = ask_text(&cfg, 3, &usage).unwrap_err().to_string();
    assert!(err.contains("HTTP 400 ValidationException: Invalid request"), "the exception is named: {err}");
    // Converse is not read as a stream: the answer arrives whole, in one piece.
    let mut pieces: Vec<String> = Vec::new();
    let streamed = runtime()
        .block_on(model(&cfg, None).chat_stream(&ask(5), &usage, &mut |d: &str| pieces.push(d.to_string())))
        .unwrap();
    assert_eq!((pieces, streamed.prompt_tokens > 0), (vec![openai_text(&mock, 5)], true));
    // Without credentials or a region: one error saying what to set.
    let no_keys = ModelConfig { aws: None, ..cfg.clone() };
    let err = ChatModel::new("m", &no_keys, None).err().unwrap().to_string();
    assert!(err.contains("AWS_ACCESS_KEY_ID"), "{err}");
    let no_region = ModelConfig { aws: Some(AwsAccess { region: None, ..aws }), ..cfg };
    let err = ChatModel::new("m", &no_region, None).err().unwrap().to_string();
    assert!(err.contains("aws_region_name") && !err.contains(KEY), "{err}");
}

/// A Vertex AI model at the mock, with the test service account's key file
/// (written into `dir`, its token_uri the mock's).
fn vertex(mock: &MockServer, dir: &Path, model: &str) -> ModelConfig {
    use graphrag_engine::settings::VertexAccess;
    let key_file = dir.join("service-account.json");
    std::fs::write(&key_file, graphrag_mock_llm::google::test_service_account(&mock.token_uri())).unwrap();
    let access = VertexAccess {
        credentials: Some(Secret::from(key_file.to_str().unwrap())),
        project: Some("graphrag-test".into()),
        location: Some("europe-west4".into()),
    };
    ModelConfig { vertex: access, ..native(mock, "vertex_ai", model) }
}

/// Whether `jwt`'s RS256 signature verifies against the test service
/// account's public key (PKCS#1, as `openssl rsa -RSAPublicKey_out` wrote it).
fn signed_by_the_test_key(jwt: &str) -> bool {
    use base64::Engine as _;
    use ring::signature::{UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA256};
    let pem = graphrag_mock_llm::google::TEST_SERVICE_ACCOUNT_PUBLIC_KEY;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let public = base64::engine::general_purpose::STANDARD.decode(body).unwrap();
    let (message, signature) = jwt.rsplit_once('.').unwrap();
    let signature = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(signature).unwrap();
    UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, public).verify(message.as_bytes(), &signature).is_ok()
}

#[test]
fn vertex_ai_answers_as_the_openai_path_with_one_access_token_signed_by_the_service_account() {
    let mock = server(0, vec![fault(FaultKind::RateLimit { retry_after_ms: 1 }, 1)]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = vertex(&mock, dir.path(), "gemini-2.5-flash");
    let usage = UsageCounters::default();
    // Eight requests at once: the first token request is the only one.
    let answers = chat_many(&model(&cfg, None), 8, &usage);
    let want: Vec<String> = (0..8).map(|i| openai_text(&mock, i)).collect();
    assert_eq!(answers.into_iter().collect::<Result<Vec<_>, _>>().unwrap(), want);
    assert_eq!(usage.total().retries, 1, "a RESOURCE_EXHAUSTED (429) is retried");
    let mut pieces: Vec<String> = Vec::new();
    let streamed = runtime()
        .block_on(model(&cfg, None).chat_stream(&ask(4), &usage, &mut |d: &str| pieces.push(d.to_string())))
        .unwrap();
    assert!(pieces.len() > 1 && streamed.content == want[4], "{pieces:?}");
    // text-embedding models answer `:predict`, with their tokens.
    let texts: Vec<String> = (0..5).map(|i| format!("Marley was dead, number {i}")).collect();
    let embed = |cfg: &ModelConfig, usage: &UsageCounters| {
        runtime().block_on(EmbeddingModel::new("e", cfg, None).unwrap().embed(&texts, usage)).unwrap()
    };
    let embedding_usage = UsageCounters::default();
    mock.reset_stats();
    let vectors = embed(&vertex(&mock, dir.path(), "text-embedding-005"), &embedding_usage);
    assert_eq!(embedding_usage.total().prompt_tokens, mock.stats().prompt_tokens, "as the server counted them");
    assert_eq!(vectors, embed(&config(&mock), &UsageCounters::default()));

    // One token per model (the chat model, a second chat model, the embedding model).
    let assertions = mock.token_assertions();
    assert_eq!(assertions.len(), 3, "{assertions:?}");
    assert!(assertions.iter().all(|jwt| signed_by_the_test_key(jwt)), "RS256 with the key file's key");
    let forged = assertions[0].replacen('.', ".e30", 1);
    assert!(!signed_by_the_test_key(&forged), "the check can fail");

    // A key file missing or naming no project: one error saying what to set.
    let none = ModelConfig { vertex: Default::default(), ..cfg.clone() };
    let err = ChatModel::new("m", &none, None).err().unwrap().to_string();
    assert!(err.contains("GOOGLE_APPLICATION_CREDENTIALS"), "{err}");
}

#[test]
fn azure_ai_foundry_answers_and_embeds_as_the_openai_path() {
    let mock = server(0, vec![]);
    let cfg = ModelConfig {
        api_base: Some(format!("{}/models", mock.root_url())),
        api_version: Some("2024-05-01-preview".into()),
        ..native(&mock, "azure_ai", "Llama-3.3-70B-Instruct")
    };
    let usage = UsageCounters::default();
    assert_eq!(
        ask_text(&cfg, 6, &usage).unwrap(),
        openai_text(&mock, 6),
        "the api-version is asked, or the route is not found"
    );
    let texts = vec!["Marley was dead".to_string(), "to begin with".to_string()];
    let embed = |cfg: &ModelConfig| {
        runtime()
            .block_on(EmbeddingModel::new("e", cfg, None).unwrap().embed(&texts, &UsageCounters::default()))
            .unwrap()
    };
    assert_eq!(embed(&cfg), embed(&config(&mock)));
}

#[test]
fn bedrock_embeds_with_titan_and_cohere_through_signed_invoke_model() {
    use graphrag_engine::settings::AwsAccess;
    let mock = server(0, vec![]);
    let aws = AwsAccess {
        key_id: "AKIDEXAMPLE".into(),
        secret: Secret::from(KEY),
        session_token: None,
        region: Some("us-east-1".into()),
    };
    let texts: Vec<String> = (0..5).map(|i| format!("Marley was dead, number {i}")).collect();
    let embed = |cfg: &ModelConfig, usage: &UsageCounters| {
        runtime().block_on(EmbeddingModel::new("e", cfg, None).unwrap().embed(&texts, usage)).unwrap()
    };
    let openai = embed(&config(&mock), &UsageCounters::default());
    // Titan takes one text per request (the settings make its batches so).
    let titan = ModelConfig {
        aws: Some(aws.clone()),
        batch_size: 1,
        ..native(&mock, "bedrock", "amazon.titan-embed-text-v2:0")
    };
    let usage = UsageCounters::default();
    mock.reset_stats();
    mock.set_faults(vec![fault(FaultKind::RateLimit { retry_after_ms: 1 }, 1)]);
    assert_eq!(embed(&titan, &usage), openai, "signed, or the mock refuses it");
    assert_eq!(usage.total().retries, 1, "a ThrottlingException (429) is retried");
    assert_eq!(usage.total().prompt_tokens, mock.stats().prompt_tokens, "Titan's inputTextTokenCount");
    let cohere = ModelConfig { aws: Some(aws), batch_size: 96, ..native(&mock, "bedrock", "cohere.embed-english-v3") };
    mock.reset_stats();
    assert_eq!(embed(&cohere, &UsageCounters::default()), openai);
    assert_eq!(mock.stats().embedding_requests, 1, "Cohere's texts in one request");
}

#[test]
fn a_revoked_vertex_ai_token_is_replaced_and_the_request_asked_again() {
    let mock = server(0, vec![]);
    let dir = tempfile::tempdir().unwrap();
    let chat = model(&vertex(&mock, dir.path(), "gemini-2.5-flash"), None);
    let ask_once = |i: usize, usage: &UsageCounters| {
        runtime().block_on(chat.chat(&ask(i), false, usage, &answer::text())).unwrap().completion.content
    };
    assert_eq!(ask_once(1, &UsageCounters::default()), openai_text(&mock, 1));
    mock.revoke_tokens();
    let usage = UsageCounters::default();
    assert_eq!(ask_once(2, &usage), openai_text(&mock, 2));
    assert_eq!((usage.total().retries, mock.token_assertions().len()), (1, 2), "one 401, one new token");
}
