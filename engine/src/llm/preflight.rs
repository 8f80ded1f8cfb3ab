//! The start-up check: before `index`, `update` or `query` spends anything,
//! one request to each model endpoint the run will use, so that the usual
//! first-hour mistakes (server down, wrong port or host, a web page instead
//! of the API, a base URL without /v1, a rejected key) end in seconds with
//! one error naming the settings key and the fix, instead of minutes of
//! retries.
//!
//! The request is the run's own kind of request, made tiny: a chat
//! completion of one token, or the embedding of one short text. It checks
//! what a `GET /models` would not (the model name, the key's access to it,
//! the answer's shape) on every OpenAI-compatible server, Azure's
//! deployment URLs included, for a few tokens. It goes around the LLM
//! layer: no retries, no cache (its answer is not a model answer for the
//! run), its own short timeout.

use std::time::Duration;

use serde_json::{json, Value};

use super::http::{Probe, SendFailure, Transport};
use super::wire::Wire;
use crate::config_error::ConfigError;
use crate::settings::{LoadedSettings, ModelConfig, Provider};

/// Each request's limit; the endpoints are checked at once, so the whole
/// check ends within it.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(4);

/// The check's chat message and embedding input (the mock server knows it).
pub(crate) const MESSAGE: &str = "graphrag-rs connection check: reply with OK.";

/// The API key `graphrag init` writes into .env for the user to replace.
const INIT_PLACEHOLDER: &str = "<API_KEY>";

/// Which kind of model a settings entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    /// A `completion_models` entry.
    Chat,
    /// An `embedding_models` entry.
    Embedding,
}

impl ModelKind {
    fn section(self) -> &'static str {
        match self {
            ModelKind::Chat => "completion_models",
            ModelKind::Embedding => "embedding_models",
        }
    }
}

/// What the check found.
#[derive(Debug, Default)]
pub struct Report {
    /// Endpoints that answered as the OpenAI API does.
    pub checked: Vec<String>,
    /// Answers that let the run go on but deserve a line (a 5xx at start-up).
    pub warnings: Vec<String>,
}

/// Checks the models `targets` of `loaded` (an in-process embedding model
/// needs no check and is skipped). The first failure is an error with the
/// settings file, line and key, and what to do.
pub fn check(loaded: &LoadedSettings, targets: &[(ModelKind, String)]) -> Result<Report, ConfigError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ConfigError::new(&loaded.file, None, "", format!("cannot start the async runtime: {e}")))?;
    let mut seen = Vec::new();
    let mut probes = Vec::new();
    for (kind, id) in targets {
        if seen.contains(&(*kind, id)) {
            continue;
        }
        seen.push((*kind, id));
        let models = match kind {
            ModelKind::Chat => &loaded.settings.completion_models,
            ModelKind::Embedding => &loaded.settings.embedding_models,
        };
        let Some(config) = models.get(id) else { continue };
        if *kind == ModelKind::Embedding && config.model_provider == Provider::Local {
            continue;
        }
        let path = format!("{}.{id}", kind.section());
        if config.api_key.expose().trim() == INIT_PLACEHOLDER {
            return Err(loaded.error_at(
                &format!("{path}.api_key"),
                format!("the API key is `{INIT_PLACEHOLDER}`, the placeholder `graphrag init` writes into .env: set GRAPHRAG_API_KEY there to your key (`--skip-validation` skips this check)"),
            ));
        }
        let short = ModelConfig { request_timeout: TIMEOUT.as_secs_f64(), ..config.clone() };
        let transport = Transport::new(id, &short).map_err(|e| loaded.error_at(&path, format!("{e}")))?;
        probes.push((path, *kind, config, transport, body(*kind, config)));
    }
    let answers = runtime.block_on(futures_util::future::join_all(
        probes.iter().map(|(_, kind, _, transport, body)| probe(transport, *kind == ModelKind::Embedding, body)),
    ));
    let mut report = Report::default();
    for ((path, kind, config, _, _), answer) in probes.iter().zip(answers) {
        match judge(*kind, config, answer) {
            Verdict::Ok(url) => report.checked.push(url),
            Verdict::Warn(w) => report.warnings.push(format!("{path}: {w}")),
            Verdict::Fail { key, message } => {
                let at = if key.is_empty() { path.clone() } else { format!("{path}.{key}") };
                return Err(loaded.error_at(&at, format!("{message} (`--skip-validation` skips this check)")));
            }
        }
    }
    Ok(report)
}

/// Probes asked again after a dropped connection (a proxy's or a server's
/// restart, a stale keep-alive): the run retries those, so one must not
/// stop it.
const DROPPED_RETRIES: u32 = 2;

/// One endpoint's probe, asked again (after a short pause) while the
/// connection drops without an answer.
async fn probe(transport: &Transport, embeddings: bool, body: &Value) -> Probe {
    let mut attempt = 0;
    loop {
        let probe = transport.probe(embeddings, body).await;
        if attempt == DROPPED_RETRIES || !matches!(probe, Probe::NoAnswer { cause: SendFailure::Dropped, .. }) {
            return probe;
        }
        attempt += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The check's request body: the run's parameters (model, call_args), one token.
fn body(kind: ModelKind, config: &ModelConfig) -> Value {
    match kind {
        ModelKind::Chat => super::with_call_args(
            json!({
                "model": config.model,
                "messages": [{"role": "user", "content": MESSAGE}],
                "max_tokens": 1,
            }),
            config,
        ),
        ModelKind::Embedding => super::embedding_request(config, &[MESSAGE]),
    }
}

#[derive(Debug, PartialEq)]
enum Verdict {
    Ok(String),
    Warn(String),
    /// `key`: the model's settings key to point at (empty: the model itself).
    Fail {
        key: &'static str,
        message: String,
    },
}

fn fail(key: &'static str, message: String) -> Verdict {
    Verdict::Fail { key, message }
}

/// The settings key a connection problem is about: api_base when the
/// settings give one, else the provider whose default address was used.
fn address_key(config: &ModelConfig) -> &'static str {
    if config.api_base.is_some() {
        "api_base"
    } else {
        "model_provider"
    }
}

/// Whether the configured base URL lacks the /v1 that OpenAI-compatible
/// servers serve their API under (Azure's deployment URLs and Azure AI's
/// endpoints have none).
fn lacks_v1(config: &ModelConfig) -> bool {
    let Some(base) = &config.api_base else { return false };
    let path = base.split("://").nth(1).unwrap_or(base).split_once('/').map(|(_, p)| p).unwrap_or("");
    Wire::of(&config.model_provider) == Wire::OpenAi
        && !matches!(config.model_provider, Provider::Azure | Provider::AzureAi)
        && !path.trim_end_matches('/').split('/').any(|seg| seg == "v1")
}

/// `base` with /v1 appended to its path, its query values masked.
fn with_v1(base: &str) -> String {
    match crate::api_base::parse(base) {
        Ok(url) => crate::api_base::redact(&super::http::endpoint(&url, &["v1"], &[])),
        Err(_) => format!("{}/v1", base.split('?').next().unwrap_or("").trim_end_matches('/')),
    }
}

fn server_message(body: &str) -> String {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .or_else(|| v.get("error"))
                .or_else(|| v.get("message"))
                .map(|m| m.as_str().map(str::to_string).unwrap_or_else(|| m.to_string()))
        })
        .unwrap_or_else(|| body.chars().take(200).collect::<String>().trim().to_string())
}

fn judge(kind: ModelKind, config: &ModelConfig, probe: Probe) -> Verdict {
    let key = address_key(config);
    let (url, status, content_type, body) = match probe {
        Probe::NoAnswer { url, cause: SendFailure::Dropped, detail } => {
            return Verdict::Warn(format!(
                "{url} closed the connection without an answer at start-up, {} times ({detail}); the run retries",
                DROPPED_RETRIES + 1
            ));
        }
        Probe::NoAnswer { url, cause, detail } => {
            let host = url.split("://").nth(1).unwrap_or(&url).split('/').next().unwrap_or("").to_string();
            return fail(
                key,
                match cause {
                    SendFailure::Refused => format!(
                        "nothing is listening at {host} ({url}: connection refused): start the model server, or correct the host and port of {key}"
                    ),
                    SendFailure::Dns => format!(
                        "cannot resolve the host of {url} ({host}): correct the host name in {key}, or check the network"
                    ),
                    SendFailure::Timeout => format!(
                        "no answer from {url} within {} s: is the server up, and is this its address?",
                        TIMEOUT.as_secs()
                    ),
                    SendFailure::Dropped | SendFailure::Other => format!("cannot reach {url}: {detail}"),
                },
            );
        }
        Probe::Answer { url, status, content_type, body } => (url, status, content_type, body),
    };
    let json: Option<Value> = serde_json::from_str(&body).ok();
    let v1_hint = |config: &ModelConfig| {
        if lacks_v1(config) {
            format!(
                ": OpenAI-compatible servers (OpenAI, vLLM, Ollama, LM Studio) serve the API under /v1, so set api_base to `{}`",
                with_v1(config.api_base.as_deref().unwrap_or(""))
            )
        } else {
            String::new()
        }
    };
    let looks_like_json = content_type.contains("json") || body.trim_start().starts_with(['{', '[']);
    if let (None, true) = (&json, looks_like_json) {
        // The API's kind of answer, broken on the way or by the server: not
        // a wrong address.
        let defect = match serde_json::from_str::<Value>(&body) {
            Err(e) if e.is_eof() => format!("cut short: it ends after {} bytes", body.len()),
            Err(e) => format!("malformed: {e}"),
            Ok(_) => "unreadable".to_string(),
        };
        let what = format!("{url} answered HTTP {status} with a JSON body that is {defect}");
        return if (200..300).contains(&status) || status >= 500 {
            Verdict::Warn(format!("{what}; the run retries such answers"))
        } else {
            fail(key, what)
        };
    }
    if json.is_none() {
        let what = if content_type.is_empty() { "a non-JSON answer".to_string() } else { format!("`{content_type}`") };
        let hint = v1_hint(config);
        let hint = if hint.is_empty() {
            format!(": {key} must be the OpenAI-compatible API's base URL (e.g. http://localhost:11434/v1 for Ollama), not a web page or another service's port")
        } else {
            hint
        };
        let api = Wire::of(&config.model_provider).name();
        return fail(key, format!("{url} answered HTTP {status} with {what}, not {api}{hint}"));
    }
    let message = server_message(&body);
    match status {
        200..=299 => {
            let wire = Wire::of(&config.model_provider);
            if json.as_ref().is_some_and(|j| wire.is_answer(kind == ModelKind::Embedding, j)) {
                Verdict::Ok(url)
            } else {
                let expected = if kind == ModelKind::Chat { "a chat completion" } else { "embeddings" };
                let server = if wire == Wire::OpenAi { "an OpenAI-compatible server" } else { wire.name() };
                fail(key, format!("{url} answered JSON that is not {expected}: {key} must point at {server}"))
            }
        }
        401 | 403 => {
            if config.model_provider == Provider::Bedrock {
                return fail(
                    "model_provider",
                    format!("Bedrock refused the request (HTTP {status} from {url}: {message}): check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, the region, and the account's access to model `{}`", config.model),
                );
            }
            if config.model_provider == Provider::VertexAi {
                return fail(
                    "model_provider",
                    format!("Vertex AI refused the request (HTTP {status} from {url}: {message}): check that the service account of GOOGLE_APPLICATION_CREDENTIALS (or call_args.vertex_credentials) may use Vertex AI (role roles/aiplatform.user) in the project and region of the URL"),
                );
            }
            let from = match config.model_provider.key_variable() {
                Some(var) => format!("{var} in the environment or the project's .env"),
                None => "GRAPHRAG_API_KEY in the project's .env".to_string(),
            };
            fail(
                "api_key",
                format!("the server rejected the API key (HTTP {status} from {url}: {message}): set api_key ({from})"),
            )
        }
        404 if lacks_v1(config) => fail(key, format!("{url} does not exist (HTTP 404){}", v1_hint(config))),
        404 => fail(
            "model",
            format!(
                "HTTP 404 from {url} ({message}): is model `{}` served there (Ollama: `ollama pull {}`), and is {key} right?",
                config.model, config.model
            ),
        ),
        429 if body.contains("insufficient_quota") => {
            fail("api_key", format!("the account of this API key has no quota left (HTTP 429 from {url}: {message})"))
        }
        400 | 422 if kind == ModelKind::Embedding && asks_base64(config) && body.contains("encoding_format") => fail(
            "call_args",
            format!(
                "the server does not take `encoding_format: base64` (HTTP {status} from {url}: {message}): set `encoding_format: float` under this model's call_args"
            ),
        ),
        500..=599 => Verdict::Warn(format!("HTTP {status} from {url} at start-up ({message}); the run retries")),
        // The server speaks the API; a disagreement about a parameter (400,
        // 422) or a rate limit (429) is the run's to report or wait out.
        _ => Verdict::Ok(url),
    }
}

/// Whether the embeddings requests of `config` ask for base64 (the default).
fn asks_base64(config: &ModelConfig) -> bool {
    config.call_args.get("encoding_format").is_none_or(|f| f == "base64")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, content_type: &str, body: &str) -> Probe {
        Probe::Answer {
            url: "http://h:1/v1/chat/completions".into(),
            status,
            content_type: content_type.into(),
            body: body.into(),
        }
    }

    fn with_base(base: &str) -> ModelConfig {
        ModelConfig { api_base: Some(base.into()), ..ModelConfig::default() }
    }

    #[test]
    fn v1_is_looked_for_in_the_path() {
        assert!(lacks_v1(&with_base("http://localhost:11434")));
        assert!(lacks_v1(&with_base("http://localhost:11434/api/")));
        assert!(!lacks_v1(&with_base("http://localhost:11434/v1/")));
        assert!(!lacks_v1(&with_base("https://x.example/openai/v1")));
        assert!(!lacks_v1(&ModelConfig::default()), "the provider's default base is right");
        let azure = ModelConfig { model_provider: "azure".into(), ..with_base("https://r.openai.azure.com") };
        assert!(!lacks_v1(&azure));
    }

    #[test]
    fn answers_are_judged() {
        let cfg = with_base("http://h:1/v1");
        let ok = judge(
            ModelKind::Chat,
            &cfg,
            answer(200, "application/json", r#"{"choices":[{"message":{"content":"OK"}}]}"#),
        );
        assert!(matches!(ok, Verdict::Ok(_)));
        let html = judge(ModelKind::Chat, &cfg, answer(200, "text/html", "<html>hi</html>"));
        assert!(
            matches!(&html, Verdict::Fail { key: "api_base", message } if message.contains("text/html")),
            "{html:?}"
        );
        let bare = with_base("http://h:1");
        let not_found = judge(ModelKind::Chat, &bare, answer(404, "text/plain", "404 page not found"));
        assert!(
            matches!(&not_found, Verdict::Fail { key: "api_base", message } if message.contains("`http://h:1/v1`")),
            "{not_found:?}"
        );
        let keyed = with_base("http://h:1/?api-key=sk-in-url-555");
        let not_found = judge(ModelKind::Chat, &keyed, answer(404, "text/plain", "404 page not found"));
        assert!(
            matches!(&not_found, Verdict::Fail { message, .. } if message.contains("`http://h:1/v1?api-key=***`") && !message.contains("sk-in-url")),
            "{not_found:?}"
        );
        let model =
            judge(ModelKind::Chat, &cfg, answer(404, "application/json", r#"{"error":{"message":"model not found"}}"#));
        assert!(matches!(&model, Verdict::Fail { key: "model", message } if message.contains("model not found")));
        let key = judge(ModelKind::Chat, &cfg, answer(401, "application/json", r#"{"error":{"message":"bad key"}}"#));
        assert!(matches!(key, Verdict::Fail { key: "api_key", .. }));
        let param =
            judge(ModelKind::Chat, &cfg, answer(400, "application/json", r#"{"error":{"message":"max_tokens"}}"#));
        assert!(matches!(param, Verdict::Ok(_)), "a parameter quarrel is not a connection problem");
        assert!(matches!(judge(ModelKind::Chat, &cfg, answer(503, "application/json", "{}")), Verdict::Warn(_)));
        let not_embeddings = judge(ModelKind::Embedding, &cfg, answer(200, "application/json", r#"{"choices":[]}"#));
        assert!(matches!(not_embeddings, Verdict::Fail { .. }));
    }

    #[test]
    fn embedding_check_asks_base64_and_names_call_args_when_refused() {
        let cfg = with_base("http://h:1/v1");
        assert_eq!(body(ModelKind::Embedding, &cfg)["encoding_format"], "base64");
        let float = ModelConfig {
            call_args: [("encoding_format".to_string(), json!("float"))].into_iter().collect(),
            ..cfg.clone()
        };
        assert_eq!(body(ModelKind::Embedding, &float)["encoding_format"], "float");
        for embedding in [r#""AACAPw==""#, "[1.0]"] {
            let ok = format!(r#"{{"data":[{{"index":0,"embedding":{embedding}}}]}}"#);
            assert!(matches!(judge(ModelKind::Embedding, &cfg, answer(200, "application/json", &ok)), Verdict::Ok(_)));
        }
        let refused = r#"{"error":{"message":"unsupported encoding_format: base64"}}"#;
        let v = judge(ModelKind::Embedding, &cfg, answer(422, "application/json", refused));
        assert!(
            matches!(&v, Verdict::Fail { key: "call_args", message } if message.contains("encoding_format: float")),
            "{v:?}"
        );
        let still = judge(ModelKind::Embedding, &float, answer(422, "application/json", refused));
        assert!(matches!(still, Verdict::Ok(_)), "already asking for numbers: the run reports the server's words");
    }

    #[test]
    fn a_cut_short_or_malformed_json_body_is_reported_as_such() {
        let cfg = with_base("http://h:1/v1");
        let full = r#"{"object":"list","data":[{"index":0,"embedding":[0.1,0.2]}]}"#;
        let cut = judge(ModelKind::Embedding, &cfg, answer(200, "application/json", &full[..full.len() / 2]));
        assert!(matches!(&cut, Verdict::Warn(w) if w.contains("cut short") && w.contains("retries")), "{cut:?}");
        let garbled = format!("{}\n<!-- garbled -->", &full[..full.len() - 1]);
        let bad = judge(ModelKind::Embedding, &cfg, answer(200, "application/json", &garbled));
        assert!(matches!(&bad, Verdict::Warn(w) if w.contains("malformed")), "{bad:?}");
        for v in [&cut, &bad] {
            assert!(!format!("{v:?}").contains("web page"), "{v:?}");
        }
    }

    #[test]
    fn a_dropped_connection_is_retried_by_the_run_like_a_server_error() {
        let dropped = Probe::NoAnswer {
            url: "http://127.0.0.1:9/v1/x".into(),
            cause: SendFailure::Dropped,
            detail: "connection closed before message completed".into(),
        };
        let v = judge(ModelKind::Chat, &with_base("http://127.0.0.1:9/v1"), dropped);
        assert!(
            matches!(&v, Verdict::Warn(w) if w.contains("closed the connection") && w.contains("retries")),
            "{v:?}"
        );
    }

    #[test]
    fn unreachable_servers_name_the_address_key() {
        let refused = Probe::NoAnswer {
            url: "http://127.0.0.1:9/v1/x".into(),
            cause: SendFailure::Refused,
            detail: String::new(),
        };
        let v = judge(ModelKind::Chat, &with_base("http://127.0.0.1:9/v1"), refused);
        assert!(matches!(&v, Verdict::Fail { key: "api_base", message } if message.contains("127.0.0.1:9")), "{v:?}");
        let dns = Probe::NoAnswer {
            url: "https://api.openai.com/v1/x".into(),
            cause: SendFailure::Dns,
            detail: String::new(),
        };
        let v = judge(ModelKind::Chat, &ModelConfig::default(), dns);
        assert!(
            matches!(&v, Verdict::Fail { key: "model_provider", message } if message.contains("api.openai.com")),
            "{v:?}"
        );
    }
}
