//! Each provider's own API end to end: the binary indexes passages of the
//! example corpus with the standard method and answers queries through
//! Anthropic's Messages API, Gemini's API, Bedrock's Converse API, Gemini
//! on Vertex AI and Azure AI Foundry (the mock server speaks them all,
//! with the same answers as its OpenAI routes), and gets the graph and the
//! answers the OpenAI-compatible path gets; a rate limit's wait, in each
//! API's way of saying it, is honoured and counted.

mod common;

use std::fs;
use std::path::Path;

use common::{documents, graphrag, put, run_ok, tables, text};
use graphrag_mock_llm::{Endpoint, FaultKind, FaultRule, MockConfig, MockServer};

const KEY: &str = "sk-test-provider-secret-4711";

/// A model entry: `provider`'s API at the mock server, the key given in settings.yaml.
fn model(mock: &MockServer, provider: &str, name: &str) -> String {
    // The OpenAI path's api_base ends with /v1; Anthropic's and Gemini's SDKs take the host.
    let base = if provider == "openai" { mock.base_url() } else { mock.root_url() };
    format!(
        "    model_provider: {provider}\n    model: {name}\n    api_base: {base}\n    api_key: {KEY}\n    retry_base_delay: 0.001\n    max_retry_wait: 5\n    concurrent_requests: 4\n"
    )
}

/// A project of three passages whose chat and embedding models are these providers'.
fn project(mock: &MockServer, chat: (&str, &str), embedding: (&str, &str)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    assert!(graphrag(&["init", "--root", dir.path().to_str().unwrap()]).status.success());
    for doc in &documents()[..3] {
        put(dir.path(), doc);
    }
    let settings = format!(
        "completion_models:\n  default_completion_model:\n{}embedding_models:\n  default_embedding_model:\n{}chunking:\n  size: 300\n  overlap: 30\n",
        model(mock, chat.0, chat.1),
        model(mock, embedding.0, embedding.1)
    );
    fs::write(dir.path().join("settings.yaml"), settings).unwrap();
    dir
}

fn index(root: &Path) {
    run_ok("index", root);
}

fn chat_usage(root: &Path) -> serde_json::Value {
    let stats: serde_json::Value = serde_json::from_slice(&fs::read(root.join("output/stats.json")).unwrap()).unwrap();
    stats["llm"]["default_completion_model"].clone()
}

/// The answers of a local and a global search (the chat model writes both).
fn answers(root: &Path) -> Vec<String> {
    ["local", "global"]
        .iter()
        .map(|method| {
            let o = graphrag(&["-q", "query", "--root", root.to_str().unwrap(), "--method", method, "Who is Scrooge?"]);
            assert!(o.status.success(), "query --method {method}: {}", text(&o));
            String::from_utf8_lossy(&o.stdout).into_owned()
        })
        .collect()
}

/// Files under `root` (its .env and settings aside) that hold `secret`.
fn leaks(root: &Path, secret: &str) -> Vec<String> {
    fn walk(dir: &Path, secret: &str, out: &mut Vec<String>) {
        for entry in fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, secret, out);
            } else if path.file_name().is_some_and(|n| n != "settings.yaml" && n != ".env")
                && String::from_utf8_lossy(&fs::read(&path).unwrap()).contains(secret)
            {
                out.push(path.display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(root, secret, &mut out);
    out
}

#[test]
fn each_provider_builds_the_graph_of_the_openai_path_and_answers_alike() {
    let mock = MockServer::start(MockConfig::default()).unwrap();
    let reference = project(&mock, ("openai", "mock-gpt"), ("openai", "mock-embed"));
    index(reference.path());
    let want = tables(reference.path());
    assert!(want["entities"].num_rows() > 0 && want["community_reports"].num_rows() > 0);
    let want_answers = answers(reference.path());

    // Anthropic chats (it has no embeddings); its 429s say `retry-after: 1`
    // in whole seconds. Request 1 is the start-up check.
    let rate_limit = |retry_after_ms| {
        FaultRule::always(FaultKind::RateLimit { retry_after_ms }).after(1).first(3).on(Endpoint::Chat)
    };
    mock.set_faults(vec![rate_limit(1000)]);
    let anthropic = project(&mock, ("anthropic", "anthropic/claude-haiku-4-5"), ("openai", "mock-embed"));
    index(anthropic.path());
    let usage = chat_usage(anthropic.path());
    assert_eq!((usage["retries"].as_u64(), usage["retry_wait_ms"].as_u64()), (Some(2), Some(2000)), "{usage}");
    assert_eq!(tables(anthropic.path()), want, "Anthropic: the OpenAI path's graph");

    // Gemini chats and embeds; its 429s say `retryDelay: 0.25s` in the body.
    mock.set_faults(vec![rate_limit(250)]);
    let gemini = project(&mock, ("gemini", "gemini-2.5-flash"), ("gemini", "gemini-embedding-001"));
    index(gemini.path());
    let usage = chat_usage(gemini.path());
    assert_eq!((usage["retries"].as_u64(), usage["retry_wait_ms"].as_u64()), (Some(2), Some(500)), "{usage}");
    assert_eq!(tables(gemini.path()), want, "Gemini: the OpenAI path's graph and vectors");

    // Bedrock chats through Converse and embeds with Titan through
    // InvokeModel (one text a request), each request signed with the AWS
    // credentials of the project's .env, in the region of call_args (the
    // chat model's) or of the .env (the embedding model's).
    // Its 429s are ThrottlingExceptions without a wait: retried with backoff.
    mock.set_faults(vec![rate_limit(1000)]);
    let bedrock = project(
        &mock,
        ("bedrock", "anthropic.claude-3-haiku-20240307-v1:0"),
        ("bedrock", "amazon.titan-embed-text-v2:0"),
    );
    let settings = fs::read_to_string(bedrock.path().join("settings.yaml")).unwrap();
    let region = "    concurrent_requests: 4\n    call_args:\n      aws_region_name: us-east-1\n";
    fs::write(bedrock.path().join("settings.yaml"), settings.replacen("    concurrent_requests: 4\n", region, 1))
        .unwrap();
    let env = format!("AWS_ACCESS_KEY_ID=AKIDEXAMPLE\nAWS_SECRET_ACCESS_KEY={KEY}\nAWS_REGION=eu-west-1\n");
    fs::write(bedrock.path().join(".env"), env).unwrap();
    index(bedrock.path());
    assert_eq!(chat_usage(bedrock.path())["retries"].as_u64(), Some(2), "{}", chat_usage(bedrock.path()));
    assert_eq!(tables(bedrock.path()), want, "Bedrock: the OpenAI path's graph and vectors");
    mock.set_faults(Vec::new());

    // Vertex AI chats and embeds (`:predict`) with the access token of the
    // service account whose key file GOOGLE_APPLICATION_CREDENTIALS names;
    // the project and region come from the .env too.
    let vertex = project(&mock, ("vertex_ai", "vertex_ai/gemini-2.5-flash"), ("vertex_ai", "text-embedding-005"));
    let keys = tempfile::tempdir().unwrap();
    let key_file = keys.path().join("service-account.json");
    fs::write(&key_file, graphrag_mock_llm::google::test_service_account(&mock.token_uri())).unwrap();
    let env = format!(
        "GOOGLE_APPLICATION_CREDENTIALS={}\nVERTEXAI_PROJECT=graphrag-test\nVERTEXAI_LOCATION=europe-west4\n",
        key_file.display()
    );
    fs::write(vertex.path().join(".env"), env).unwrap();
    index(vertex.path());
    assert_eq!(tables(vertex.path()), want, "Vertex AI: the OpenAI path's graph and vectors");
    assert!(!mock.token_assertions().is_empty(), "the service account's token was asked for");

    // Azure AI Foundry's model inference API: OpenAI's wire under the
    // resource's /models, with an api-version, the key as its api-key header.
    let azure_ai = project(&mock, ("azure_ai", "Llama-3.3-70B-Instruct"), ("azure_ai", "mock-embed"));
    let settings = fs::read_to_string(azure_ai.path().join("settings.yaml")).unwrap();
    let root = mock.root_url();
    let foundry = format!("api_base: {root}/models\n    api_version: 2024-05-01-preview\n");
    fs::write(azure_ai.path().join("settings.yaml"), settings.replace(&format!("api_base: {root}\n"), &foundry))
        .unwrap();
    index(azure_ai.path());
    assert_eq!(tables(azure_ai.path()), want, "azure_ai: the OpenAI path's graph and vectors");

    mock.reset_stats();
    let roots = [
        ("anthropic", anthropic.path()),
        ("gemini", gemini.path()),
        ("bedrock", bedrock.path()),
        ("vertex_ai", vertex.path()),
        ("azure_ai", azure_ai.path()),
    ];
    for (provider, root) in roots {
        assert_eq!(answers(root), want_answers, "{provider}: the OpenAI path's answers");
        assert_eq!(leaks(root, KEY), Vec::<String>::new(), "{provider}: the key is in no output, cache or log");
    }
    assert_eq!(leaks(vertex.path(), "PRIVATE KEY"), Vec::<String>::new(), "nor the service account's");
    assert!(mock.stats().chat_requests >= 6, "the queries asked the models: {:?}", mock.stats());
}
