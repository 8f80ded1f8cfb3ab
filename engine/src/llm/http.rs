//! The HTTP transport of every provider (OpenAI-compatible servers, Azure
//! OpenAI, Azure AI, Anthropic, Gemini, Bedrock, Vertex AI: their wire
//! formats are `wire`'s). Classifies failures as retryable or not; the API
//! key is sent in a header (or signs the request, or gets a service
//! account's token) and scrubbed from every message, as are the values of
//! api_base's query string (Azure-style `?api-key=`). Endpoint URLs are
//! built with a URL type from api_base, its query kept; response bodies are
//! read up to a size limit.

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use reqwest::Url;
use serde_json::Value;

use super::answer::MAX_ANSWER_BYTES;
use super::bedrock::{self, Signer};
use super::vertex::{self, ServiceAccount, Vertex};
use super::wire::Wire;
use super::{anthropic, Completion, LlmError};
use crate::api_base::{self, redact, PUBLIC_PARAMS};
use crate::settings::{duration_of_seconds, AwsAccess, ModelConfig, Provider};

/// The largest chat response body read: room for an answer of
/// [`MAX_ANSWER_BYTES`] with JSON escaping. A larger one is not read to the end.
const MAX_CHAT_BODY_BYTES: usize = 4 * MAX_ANSWER_BYTES;
/// Per reranked document: its index and score, or the document itself
/// echoed back (`return_documents` is asked off, yet some servers send it).
const MAX_RERANK_BODY_BYTES_PER_DOCUMENT: usize = 64 << 10;
/// Per embedded text: 65,536 dimensions written out as JSON numbers.
const MAX_EMBEDDING_BODY_BYTES_PER_TEXT: usize = 2 << 20;

/// What a chat request got.
#[derive(Debug)]
pub(crate) enum ChatReply {
    Completion(Completion),
    /// A body longer than `limit` bytes (a runaway generation), read no
    /// further: an oversized answer, asked again like any unusable one.
    Oversized {
        limit: usize,
    },
}

/// A failed attempt.
#[derive(Debug)]
pub(crate) struct Failure {
    pub retryable: bool,
    pub status: Option<u16>,
    pub message: String,
    pub retry_after: Option<Duration>,
}

/// The `call_args` key sent as the OpenAI-Organization header (as the
/// OpenAI client does), not in the body.
pub(crate) const ORGANIZATION_ARG: &str = "organization";

pub(crate) struct Transport {
    client: reqwest::Client,
    wire: Wire,
    chat_url: Url,
    /// Where streamed chats go (Gemini's is another method; else `chat_url`).
    stream_url: Url,
    /// None: the provider has no embeddings API (Anthropic).
    embeddings_url: Option<Url>,
    /// api_base's `rerank` (Cohere's and Jina's shape, which vLLM, TEI and
    /// Infinity serve); None on the native APIs, which have none.
    rerank_url: Option<Url>,
    /// What each request is authorised with when a header set once does
    /// not do; None: the key is a header.
    auth: Option<RequestAuth>,
    /// The API key and api_base's query values: never shown.
    secrets: Vec<String>,
}

/// How a request proves who sends it, request by request.
enum RequestAuth {
    /// Bedrock's SigV4 signature of the request.
    Sigv4(Signer),
    /// Vertex AI's OAuth access token of a service account (boxed: its RSA
    /// key is large, and a transport has one).
    Google(Box<ServiceAccount>),
}

/// The Azure AI model inference API's version when settings name none (the
/// `azure-ai-inference` SDK's).
const AZURE_AI_API_VERSION: &str = "2024-05-01-preview";

/// The API base a provider uses when settings give none.
fn default_api_base(provider: &str) -> Option<&'static str> {
    match provider {
        "openai" => Some("https://api.openai.com/v1"),
        "anthropic" => Some("https://api.anthropic.com"),
        "gemini" => Some("https://generativelanguage.googleapis.com"),
        "ollama" => Some("http://localhost:11434/v1"),
        "vllm" => Some("http://localhost:8000/v1"),
        "deepseek" => Some("https://api.deepseek.com/v1"),
        "cohere" => Some("https://api.cohere.com/v2"),
        "jina" => Some("https://api.jina.ai/v1"),
        _ => None,
    }
}

/// A Bedrock model's AWS access and region, or what to set.
fn aws_access<'c>(id: &str, config: &'c ModelConfig) -> Result<(&'c AwsAccess, String), LlmError> {
    let access = config.aws.as_ref().ok_or_else(|| {
        LlmError::Config(format!(
            "model `{id}`: Bedrock signs requests with AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN for temporary ones) in the environment or the project's .env, or name a profile of ~/.aws/credentials with its keys in AWS_PROFILE (an SSO or role profile: its keys are what `aws configure export-credentials --profile NAME --format env` prints)"
        ))
    })?;
    let region = access.region.clone().ok_or_else(|| {
        LlmError::Config(format!(
            "model `{id}`: Bedrock needs a region: set call_args.aws_region_name in settings.yaml, or AWS_REGION"
        ))
    })?;
    Ok((access, region))
}

/// Whether `base`'s path already ends with an API version segment
/// (`/v1`, `/v1beta`): the address of the API, not of its host.
pub(super) fn versioned(base: &Url) -> bool {
    base.path_segments().and_then(|mut s| s.rfind(|seg| !seg.is_empty())).is_some_and(|seg| seg.starts_with("v1"))
}

/// The chat, streamed chat and embeddings URLs of Anthropic, Gemini and
/// Bedrock. api_base is the API's host (the SDKs' base URL) or, for
/// Anthropic and Gemini, its versioned root.
fn native_urls(wire: Wire, base: &Url, model: &str) -> (Url, Url, Option<Url>) {
    match wire {
        Wire::Bedrock => {
            // Set as a path, the model id's percent-encoding is kept as is.
            let method = |name: &str| {
                let mut url = base.clone();
                let model = bedrock::path_segment(model);
                url.set_path(&format!("{}/model/{model}/{name}", base.path().trim_end_matches('/')));
                url
            };
            (method("converse"), method("converse"), Some(method("invoke")))
        }
        Wire::Anthropic => {
            let chat = endpoint(base, if versioned(base) { &["messages"] } else { &["v1", "messages"] }, &[]);
            (chat.clone(), chat, None)
        }
        _ => {
            let root = if versioned(base) { base.clone() } else { endpoint(base, &["v1beta"], &[]) };
            let model = model.strip_prefix("models/").unwrap_or(model);
            let method =
                |name: &str, query: &[(&str, &str)]| endpoint(&root, &["models", &format!("{model}:{name}")], query);
            (
                method("generateContent", &[]),
                method("streamGenerateContent", &[("alt", "sse")]),
                Some(method("batchEmbedContents", &[])),
            )
        }
    }
}

/// `base` with `segments` appended to its path and `query` to its query.
pub(crate) fn endpoint(base: &Url, segments: &[&str], query: &[(&str, &str)]) -> Url {
    let mut url = base.clone();
    url.path_segments_mut().expect("checked: can be a base").pop_if_empty().extend(segments);
    if !query.is_empty() {
        let mut pairs = url.query_pairs_mut();
        for (k, v) in query {
            pairs.append_pair(k, v);
        }
    }
    url
}

impl Transport {
    pub(crate) fn new(id: &str, config: &ModelConfig) -> Result<Self, LlmError> {
        let provider = config.model_provider.as_str();
        let wire = Wire::of(&config.model_provider);
        let aws = match wire {
            Wire::Bedrock => Some(aws_access(id, config)?),
            _ => None,
        };
        let default = match &aws {
            Some((_, region)) => Some(bedrock::default_base(region)),
            None if wire == Wire::Vertex => Some(vertex::default_base(vertex::location(config))),
            None => default_api_base(provider).map(str::to_string),
        };
        let base = match (&config.api_base, &default) {
            (Some(b), _) => b.as_str(),
            (None, Some(d)) => d,
            (None, None) => {
                return Err(LlmError::Config(format!(
                    "model `{id}`: model_provider `{provider}` needs api_base in settings.yaml"
                )))
            }
        };
        let base = api_base::parse(base).map_err(|e| LlmError::Config(format!("model `{id}`: api_base {e}")))?;
        let mut secrets: Vec<String> = base
            .query_pairs()
            .filter(|(k, v)| !PUBLIC_PARAMS.contains(&k.as_ref()) && v.len() >= 4)
            .map(|(_, v)| v.into_owned())
            .collect();
        secrets.extend(base.password().map(str::to_string));
        let secret = config.api_key.expose().trim().to_string();
        if secret.len() >= 4 {
            secrets.push(secret.clone());
        }
        let mut headers = HeaderMap::new();
        let (chat_url, embeddings_url) = if let Some((access, region)) = aws {
            secrets.push(access.secret.expose().to_string());
            secrets.extend(access.session_token.as_ref().map(|t| t.expose().to_string()));
            let urls = native_urls(wire, &base, &config.model);
            let mut transport = Transport::build(id, config, headers, wire, urls, secrets)?;
            transport.auth = Some(RequestAuth::Sigv4(Signer::new(access, &region)));
            return Ok(transport);
        } else if wire == Wire::Vertex {
            let vertex = Vertex::new(id, config, &base)?;
            let urls = (vertex.chat, vertex.stream, Some(vertex.embeddings));
            let mut transport = Transport::build(id, config, headers, wire, urls, secrets)?;
            transport.auth = Some(RequestAuth::Google(Box::new(vertex.account)));
            return Ok(transport);
        } else if wire != Wire::OpenAi {
            let (chat, stream, embeddings) = native_urls(wire, &base, &config.model);
            let key_header = if wire == Wire::Anthropic { "x-api-key" } else { "x-goog-api-key" };
            if !secret.is_empty() {
                headers.insert(key_header, sensitive(&secret, id)?);
            }
            if wire == Wire::Anthropic {
                headers.insert("anthropic-version", HeaderValue::from_static(anthropic::VERSION));
            }
            return Transport::build(id, config, headers, wire, (chat, stream, embeddings), secrets);
        } else if config.model_provider == Provider::Azure {
            let deployment = config.deployment_name.clone().unwrap_or_else(|| config.model.clone());
            let version = config.api_version.clone().ok_or_else(|| {
                LlmError::Config(format!("model `{id}`: Azure OpenAI needs api_version in settings.yaml"))
            })?;
            if !secret.is_empty() {
                headers.insert("api-key", sensitive(&secret, id)?);
            }
            let query = [("api-version", version.as_str())];
            (
                endpoint(&base, &["openai", "deployments", &deployment, "chat", "completions"], &query),
                endpoint(&base, &["openai", "deployments", &deployment, "embeddings"], &query),
            )
        } else if config.model_provider == Provider::AzureAi {
            // A Foundry resource serves the model inference API under
            // /models, with an api-version; a serverless endpoint at its root.
            let foundry = base.host_str().is_some_and(|h| h.ends_with(".services.ai.azure.com"));
            let under_models = base.path().trim_end_matches('/').ends_with("/models");
            let root = if foundry && !under_models { endpoint(&base, &["models"], &[]) } else { base.clone() };
            let version = config.api_version.as_deref().or(foundry.then_some(AZURE_AI_API_VERSION));
            let query: Vec<(&str, &str)> = version.map(|v| ("api-version", v)).into_iter().collect();
            // The header each kind of endpoint documents (LiteLLM's choice too).
            if !secret.is_empty() && foundry {
                headers.insert("api-key", sensitive(&secret, id)?);
            } else if !secret.is_empty() {
                headers.insert(AUTHORIZATION, sensitive(&format!("Bearer {secret}"), id)?);
            }
            (endpoint(&root, &["chat", "completions"], &query), endpoint(&root, &["embeddings"], &query))
        } else {
            if !secret.is_empty() {
                headers.insert(AUTHORIZATION, sensitive(&format!("Bearer {secret}"), id)?);
            }
            (endpoint(&base, &["chat", "completions"], &[]), endpoint(&base, &["embeddings"], &[]))
        };
        let urls = (chat_url.clone(), chat_url, Some(embeddings_url));
        let transport = Transport::build(id, config, headers, wire, urls, secrets)?;
        // The rerank providers (cohere, jina, vllm, ...) are all OpenAI-compatible servers.
        let rerank_url =
            matches!(config.model_provider, Provider::Compatible(_)).then(|| endpoint(&base, &["rerank"], &[]));
        Ok(Transport { rerank_url, ..transport })
    }

    /// The transport with `headers` and the settings' own headers.
    fn build(
        id: &str,
        config: &ModelConfig,
        mut headers: HeaderMap,
        wire: Wire,
        (chat_url, stream_url, embeddings_url): (Url, Url, Option<Url>),
        secrets: Vec<String>,
    ) -> Result<Self, LlmError> {
        if let Some(org) = config.call_args.get(ORGANIZATION_ARG).and_then(Value::as_str) {
            let value = HeaderValue::from_str(org)
                .map_err(|_| LlmError::Config(format!("model `{id}`: invalid call_args.organization")))?;
            headers.insert("openai-organization", value);
        }
        for (k, v) in &config.extra_headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| LlmError::Config(format!("model `{id}`: invalid header name `{k}` in extra_headers")))?;
            let value = HeaderValue::from_str(v)
                .map_err(|_| LlmError::Config(format!("model `{id}`: invalid value for header `{k}`")))?;
            headers.insert(name, value);
        }
        let client = reqwest::Client::builder()
            .tls_backend_preconfigured(crate::tls::client_config())
            .default_headers(headers)
            .timeout(duration_of_seconds(config.request_timeout))
            .build()
            .map_err(|e| LlmError::Config(format!("model `{id}`: cannot build HTTP client: {e}")))?;
        Ok(Transport { client, wire, chat_url, stream_url, embeddings_url, rerank_url: None, auth: None, secrets })
    }

    /// A POST of `body` to `url`: signed, or with a current access token
    /// (returned too), when the provider asks that.
    async fn post(&self, url: &Url, body: &Value) -> Result<(reqwest::RequestBuilder, Option<String>), Failure> {
        let request = self.client.post(url.clone());
        let signer = match &self.auth {
            None => return Ok((request.json(body), None)),
            Some(RequestAuth::Google(account)) => {
                let token = account.bearer(&self.client).await?;
                // reqwest marks the header sensitive.
                return Ok((request.bearer_auth(&token).json(body), Some(token)));
            }
            Some(RequestAuth::Sigv4(signer)) => signer,
        };
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        let json = "application/json";
        let signed = signer.sign(url.as_str(), &[("content-type", json)], &bytes, SystemTime::now());
        let signed =
            signed.map_err(|message| Failure { retryable: false, status: None, message, retry_after: None })?;
        let mut request = request.header(CONTENT_TYPE, json).body(bytes);
        for (name, value) in signed {
            let mut value = HeaderValue::from_str(&value).map_err(|_| Failure {
                retryable: false,
                status: None,
                message: format!("the signature's {name} header is not a header value"),
                retry_after: None,
            })?;
            value.set_sensitive(true);
            request = request.header(name, value);
        }
        Ok((request, None))
    }

    /// A chat request of `body` (OpenAI's form, translated for the provider).
    pub(crate) async fn chat(&self, body: &Value) -> Result<ChatReply, Failure> {
        let body = self.wire.chat_body(body);
        let Some(bytes) = self.post_bytes(&self.chat_url, &body, MAX_CHAT_BODY_BYTES).await? else {
            return Ok(ChatReply::Oversized { limit: MAX_CHAT_BODY_BYTES });
        };
        let completion = self.wire.completion(&json(&bytes)?).map_err(unusable)?;
        Ok(ChatReply::Completion(completion))
    }

    /// The embeddings URL, or the failure of a provider without embeddings.
    fn embeddings_url(&self) -> Result<&Url, Failure> {
        self.embeddings_url.as_ref().ok_or_else(|| Failure {
            retryable: false,
            status: None,
            message: format!("{} has no embeddings endpoint", self.wire.name()),
            retry_after: None,
        })
    }

    /// Embeddings of the inputs of `body` (OpenAI's form) in order, and the
    /// prompt tokens the server reports.
    pub(crate) async fn embed(&self, body: &Value, expected: usize) -> Result<(Vec<Vec<f32>>, u64), Failure> {
        let limit = expected.max(1).saturating_mul(MAX_EMBEDDING_BODY_BYTES_PER_TEXT);
        let body = self.wire.embeddings_body(body);
        let bytes = self.post_bytes(self.embeddings_url()?, &body, limit).await?.ok_or_else(|| Failure {
            // Not retried: a server that answers this much will again.
            retryable: false,
            status: None,
            message: format!("the response is larger than {} MB, the most read", limit >> 20),
            retry_after: None,
        })?;
        self.wire.embeddings(&bytes, expected).map_err(unusable)
    }

    /// The relevance score of each of the `expected` documents of `body`
    /// (a rerank request), by the document's position.
    pub(crate) async fn rerank(&self, body: &Value, expected: usize) -> Result<Vec<f64>, Failure> {
        let url = self.rerank_url.as_ref().ok_or_else(|| Failure {
            retryable: false,
            status: None,
            message: format!("{} has no rerank endpoint", self.wire.name()),
            retry_after: None,
        })?;
        let limit = expected.max(1).saturating_mul(MAX_RERANK_BODY_BYTES_PER_DOCUMENT);
        let bytes = self.post_bytes(url, body, limit).await?.ok_or_else(|| Failure {
            retryable: false,
            status: None,
            message: format!("the rerank response is larger than {limit} bytes, the most read"),
            retry_after: None,
        })?;
        super::rerank::scores(&json(&bytes)?, expected).map_err(unusable)
    }

    /// The body of the answer to `body`; `None` when it is longer than
    /// `limit` bytes (read no further).
    async fn post_bytes(&self, url: &Url, body: &Value, limit: usize) -> Result<Option<Vec<u8>>, Failure> {
        let mut response = self.send(url, body).await?;
        let status = Some(response.status().as_u16());
        let mut bytes: Vec<u8> = Vec::new();
        loop {
            let chunk = response.chunk().await.map_err(|e| Failure {
                retryable: true,
                status,
                message: self.scrub(&format!("reading the response failed: {e}")),
                retry_after: None,
            })?;
            let Some(chunk) = chunk else { break };
            if bytes.len() + chunk.len() > limit {
                return Ok(None);
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Some(bytes))
    }

    /// Sends a request; a non-success status becomes a classified failure.
    async fn send(&self, url: &Url, body: &Value) -> Result<reqwest::Response, Failure> {
        let (request, token) = self.post(url, body).await?;
        let response = request.send().await.map_err(|e| Failure {
            retryable: !is_permanent(&e),
            status: None,
            message: self.scrub(&describe_send_error(&e)),
            retry_after: None,
        })?;
        let status = response.status();
        let account = match (&self.auth, &token) {
            (Some(RequestAuth::Google(account)), Some(token)) => Some((account, token.as_str())),
            _ => None,
        };
        if status.is_success() {
            if let Some((account, token)) = account {
                account.answered(token);
            }
            return Ok(response);
        }
        let retry_after = retry_after(response.headers());
        // AWS names the exception in a header (`ThrottlingException:http://...`).
        let exception = response.headers().get("x-amzn-errortype").and_then(|v| v.to_str().ok());
        let exception = exception.and_then(|t| t.split(':').next()).map(|t| format!(" {t}")).unwrap_or_default();
        let text = response.text().await.unwrap_or_default();
        let code = status.as_u16();
        let error = serde_json::from_str::<Value>(&text).ok();
        let retry_after = retry_after.or_else(|| error.as_ref().and_then(|e| self.wire.retry_delay(e)));
        // `error.message` (OpenAI's, Anthropic's, Google's) or `message` (AWS's).
        let server_message = error
            .and_then(|v| {
                v.pointer("/error/message").or_else(|| v.get("message")).and_then(Value::as_str).map(str::to_string)
            })
            .unwrap_or_else(|| text.chars().take(300).collect());
        // A service account's token refused: asked again if another one will be used.
        let renewed = match account {
            Some((account, token)) if code == 401 => account.forget(token).await,
            _ => false,
        };
        Err(Failure {
            // Other 4xx (bad key, unknown model, bad request) will not change;
            // 5xx include Anthropic's 529 (overloaded).
            retryable: code == 408 || code == 429 || code >= 500 || renewed,
            status: Some(code),
            message: self.scrub(&format!("HTTP {code}{exception}: {server_message}")),
            retry_after,
        })
    }

    /// A streamed chat completion (server-sent events): `on_delta` gets the
    /// answer's pieces as they arrive. Failures before the first piece are
    /// retryable like any request; a stream broken midway is not (the
    /// caller has already shown part of the answer).
    pub(crate) async fn chat_stream(
        &self,
        body: &Value,
        on_delta: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Completion, Failure> {
        if !self.wire.streams() {
            return match self.chat(body).await? {
                ChatReply::Completion(whole) => {
                    on_delta(&whole.content);
                    Ok(whole)
                }
                ChatReply::Oversized { limit } => Err(Failure {
                    retryable: false,
                    status: None,
                    message: format!("the answer is larger than {} MB, the most read", limit >> 20),
                    retry_after: None,
                }),
            };
        }
        let mut response = self.send(&self.stream_url, &self.wire.chat_body(body)).await?;
        let mut done = Completion::default();
        let mut pending: Vec<u8> = Vec::new();
        let broken = |m: String| Failure { retryable: false, status: None, message: m, retry_after: None };
        loop {
            let chunk =
                response.chunk().await.map_err(|e| broken(self.scrub(&format!("the answer stream broke: {e}"))))?;
            let Some(chunk) = chunk else { break };
            if done.content.len() > MAX_ANSWER_BYTES {
                return Err(broken(format!("the answer is longer than {MAX_ANSWER_BYTES} bytes, the most accepted")));
            }
            pending.extend_from_slice(&chunk);
            while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line);
                let Some(data) = line.trim().strip_prefix("data:").map(str::trim) else { continue };
                if data == "[DONE]" {
                    continue;
                }
                let event: Value = serde_json::from_str(data).map_err(|e| broken(format!("bad stream event ({e})")))?;
                if let Some(delta) = self.wire.stream_event(&event, &mut done).map_err(|e| broken(self.scrub(&e)))? {
                    on_delta(&delta);
                    done.content.push_str(&delta);
                }
            }
        }
        Ok(done)
    }

    /// One request whose answer is returned as it came, for the start-up
    /// check to judge (`preflight`); nothing is retried or cached.
    pub(crate) async fn probe(&self, embeddings: bool, body: &Value) -> Probe {
        let (url, body) = match embeddings {
            true => match self.embeddings_url() {
                Ok(url) => (url, self.wire.embeddings_body(body)),
                Err(f) => return Probe::NoAnswer { url: String::new(), cause: SendFailure::Other, detail: f.message },
            },
            false => (&self.chat_url, self.wire.chat_body(body)),
        };
        let shown = redact(url);
        let request = match self.post(url, &body).await {
            Ok((request, _)) => request,
            Err(f) => return Probe::NoAnswer { url: shown, cause: SendFailure::Other, detail: f.message },
        };
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                let cause = if e.is_timeout() {
                    SendFailure::Timeout
                } else if error_chain(&e).contains("dns error") {
                    SendFailure::Dns
                } else if io_kind(&e) == Some(std::io::ErrorKind::ConnectionRefused) {
                    SendFailure::Refused
                } else if dropped(&e) {
                    SendFailure::Dropped
                } else {
                    SendFailure::Other
                };
                return Probe::NoAnswer { url: shown, cause, detail: self.scrub(&error_chain(&e)) };
            }
        };
        let status = response.status().as_u16();
        let content_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        match response.text().await {
            Ok(body) => Probe::Answer { url: shown, status, content_type, body: self.scrub(&body) },
            Err(e) => Probe::NoAnswer {
                url: shown,
                cause: if e.is_timeout() { SendFailure::Timeout } else { SendFailure::Dropped },
                detail: self.scrub(&format!("HTTP {status}, then reading the body failed: {}", error_chain(&e))),
            },
        }
    }

    /// Removes the API key and api_base's query values from text that may echo them.
    fn scrub(&self, text: &str) -> String {
        let mut text = text.to_string();
        for secret in &self.secrets {
            text = text.replace(secret.as_str(), "***");
            // reqwest shows URLs percent-encoded.
            let encoded: String = url_encode(secret);
            if encoded != *secret {
                text = text.replace(&encoded, "***");
            }
        }
        text
    }
}

fn url_encode(s: &str) -> String {
    reqwest::Url::parse_with_params("http://x/", [("v", s)])
        .ok()
        .and_then(|u| u.query().map(|q| q.trim_start_matches("v=").to_string()))
        .unwrap_or_else(|| s.to_string())
}

/// A send error no retry fixes: a request that cannot be built (bad URL) or
/// a TLS failure (certificate, protocol: e.g. https:// to an http server).
fn is_permanent(e: &reqwest::Error) -> bool {
    if e.is_builder() {
        return true;
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        // I/O errors nest (the connector wraps the TLS stream's), and hide
        // what they wrap from `source()`.
        let mut inner: &(dyn std::error::Error + 'static) = s;
        while let Some(wrapped) = inner.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            inner = wrapped;
        }
        if inner.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        source = s.source();
    }
    false
}

fn sensitive(value: &str, id: &str) -> Result<HeaderValue, LlmError> {
    let mut v = HeaderValue::from_str(value)
        .map_err(|_| LlmError::Config(format!("model `{id}`: api_key contains characters not allowed in a header")))?;
    v.set_sensitive(true);
    Ok(v)
}

/// Why a request got no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendFailure {
    Refused,
    Dns,
    Timeout,
    /// The connection closed (or was reset) before the whole answer came.
    Dropped,
    Other,
}

/// What one probing request got.
#[derive(Debug)]
pub(crate) enum Probe {
    NoAnswer { url: String, cause: SendFailure, detail: String },
    Answer { url: String, status: u16, content_type: String, body: String },
}

/// An error and its causes, `: `-joined (reqwest's Display includes the
/// URL, never the key, which is a header).
fn error_chain(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(&format!(": {s}"));
        source = s.source();
    }
    msg
}

/// The kind of the I/O error under a request error, if any.
fn io_kind(e: &reqwest::Error) -> Option<std::io::ErrorKind> {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        source = s.source();
    }
    None
}

/// Whether the server (or something between) closed the connection before
/// answering: a dropped connection, as opposed to one never made.
fn dropped(e: &reqwest::Error) -> bool {
    use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset, UnexpectedEof};
    matches!(io_kind(e), Some(ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof))
        || error_chain(e).contains("connection closed before message completed")
}

fn describe_send_error(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    format!("{kind}: {}", error_chain(e))
}

/// `retry-after-ms` (OpenAI, Azure) or `Retry-After` in seconds.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).and_then(|s| s.trim().parse::<f64>().ok());
    get("retry-after-ms")
        .map(|ms| duration_of_seconds(ms / 1000.0))
        .or_else(|| get(RETRY_AFTER.as_str()).map(duration_of_seconds))
}

/// An answer without what it must have: asked again, like a glitch.
fn unusable(message: String) -> Failure {
    Failure { retryable: true, status: None, message, retry_after: None }
}

/// An answer's body as JSON.
fn json(bytes: &[u8]) -> Result<Value, Failure> {
    serde_json::from_slice(bytes).map_err(|e| Failure {
        retryable: true,
        status: None,
        message: format!("response is not JSON ({e})"),
        retry_after: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_prefers_milliseconds() {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(150)));
    }

    #[test]
    fn a_retry_after_beyond_a_duration_is_the_longest_one_not_a_panic() {
        // The server chooses these: 1e30 s and inf parse as f64.
        for (value, want) in
            [("1e30", Duration::MAX), ("inf", Duration::MAX), ("NaN", Duration::ZERO), ("-5", Duration::ZERO)]
        {
            let mut h = HeaderMap::new();
            h.insert(RETRY_AFTER, HeaderValue::from_static(value));
            assert_eq!(retry_after(&h), Some(want), "{value}");
        }
    }

    #[test]
    fn azure_and_openai_urls() {
        let azure = ModelConfig {
            model_provider: "azure".into(),
            api_base: Some("https://x.openai.azure.com/".into()),
            api_version: Some("2024-10-21".into()),
            deployment_name: Some("dep".into()),
            ..ModelConfig::default()
        };
        let t = Transport::new("m", &azure).unwrap();
        assert_eq!(
            t.chat_url.as_str(),
            "https://x.openai.azure.com/openai/deployments/dep/chat/completions?api-version=2024-10-21"
        );
        let t = Transport::new("m", &ModelConfig::default()).unwrap();
        assert_eq!(t.embeddings_url.unwrap().as_str(), "https://api.openai.com/v1/embeddings");
        let missing = ModelConfig { api_version: None, ..azure };
        assert!(Transport::new("m", &missing).is_err());
    }

    #[test]
    fn anthropic_and_gemini_urls_from_their_host_or_their_versioned_root() {
        let native = |provider: &str, model: &str, base: Option<&str>| {
            let cfg = ModelConfig {
                model_provider: provider.into(),
                model: model.into(),
                api_base: base.map(str::to_string),
                ..ModelConfig::default()
            };
            let t = Transport::new("m", &cfg).unwrap();
            (t.chat_url.to_string(), t.stream_url.to_string(), t.embeddings_url.map(|u| u.to_string()))
        };
        let messages = "https://api.anthropic.com/v1/messages".to_string();
        assert_eq!(native("anthropic", "claude-haiku-4-5", None), (messages.clone(), messages, None));
        assert_eq!(native("anthropic", "c", Some("http://127.0.0.1:9/v1/")).0, "http://127.0.0.1:9/v1/messages");
        let google = "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash";
        assert_eq!(
            native("gemini", "models/gemini-2.5-flash", None),
            (
                format!("{google}:generateContent"),
                format!("{google}:streamGenerateContent?alt=sse"),
                Some(format!("{google}:batchEmbedContents"))
            )
        );
        assert_eq!(
            native("gemini", "g", Some("http://127.0.0.1:9/v1")).0,
            "http://127.0.0.1:9/v1/models/g:generateContent"
        );
    }

    #[test]
    fn azure_ai_urls_of_a_foundry_resource_and_of_a_serverless_endpoint() {
        let urls = |base: &str, version: Option<&str>| {
            let cfg = ModelConfig {
                model_provider: "azure_ai".into(),
                api_base: Some(base.into()),
                api_version: version.map(str::to_string),
                api_key: "k-123456".into(),
                ..ModelConfig::default()
            };
            let t = Transport::new("m", &cfg).unwrap();
            (t.chat_url.to_string(), t.embeddings_url.unwrap().to_string())
        };
        let foundry = "https://res.services.ai.azure.com/models";
        let want = (
            format!("{foundry}/chat/completions?api-version=2024-05-01-preview"),
            format!("{foundry}/embeddings?api-version=2024-05-01-preview"),
        );
        assert_eq!(urls("https://res.services.ai.azure.com", None), want);
        assert_eq!(urls("https://res.services.ai.azure.com/models/", None), want);
        assert_eq!(
            urls("https://llama.eastus2.models.ai.azure.com", None).0,
            "https://llama.eastus2.models.ai.azure.com/chat/completions"
        );
        assert!(urls(foundry, Some("2025-01-01")).0.ends_with("?api-version=2025-01-01"));
        let none = ModelConfig { model_provider: "azure_ai".into(), ..ModelConfig::default() };
        assert!(Transport::new("m", &none).err().unwrap().to_string().contains("api_base"));
    }

    #[test]
    fn vertex_ai_urls_of_the_region_s_host() {
        let cfg = ModelConfig {
            model_provider: "vertex_ai".into(),
            model: "gemini-2.5-flash".into(),
            vertex: crate::settings::VertexAccess {
                credentials: Some(graphrag_mock_llm::google::test_service_account("http://x/token").as_str().into()),
                project: None,
                location: Some("global".into()),
            },
            ..ModelConfig::default()
        };
        let t = Transport::new("m", &cfg).unwrap();
        assert_eq!(
            t.chat_url.as_str(),
            "https://aiplatform.googleapis.com/v1/projects/graphrag-mock/locations/global/publishers/google/models/gemini-2.5-flash:generateContent"
        );
    }

    #[test]
    fn api_base_query_is_kept_in_urls_and_never_shown() {
        let cfg = ModelConfig {
            api_base: Some("https://gw.example.com/v1/?api-key=sk-in-the-url-123&region=eu".into()),
            ..ModelConfig::default()
        };
        let t = Transport::new("m", &cfg).unwrap();
        assert_eq!(
            t.chat_url.as_str(),
            "https://gw.example.com/v1/chat/completions?api-key=sk-in-the-url-123&region=eu"
        );
        let message = format!("error sending request for url ({})", t.chat_url);
        assert!(!t.scrub(&message).contains("sk-in-the-url-123"), "{}", t.scrub(&message));
        assert_eq!(redact(&t.chat_url), "https://gw.example.com/v1/chat/completions?api-key=***&region=***");
        let encoded = "https://gw.example.com/?key=a%2Fb%2Bc";
        let t = Transport::new("m", &ModelConfig { api_base: Some(encoded.into()), ..ModelConfig::default() }).unwrap();
        assert!(!t.scrub(&format!("url ({})", t.chat_url)).contains("a%2Fb"), "{}", t.scrub(t.chat_url.as_ref()));
    }

    #[test]
    fn bad_api_bases_are_config_errors_without_their_query() {
        for bad in ["not a url", "ftp://x.example.com/v1", "localhost:8000/v1?key=sk-secret-999"] {
            let cfg = ModelConfig { api_base: Some(bad.into()), ..ModelConfig::default() };
            let err = Transport::new("m", &cfg).err().unwrap_or_else(|| panic!("{bad} accepted")).to_string();
            assert!(err.contains("api_base"), "{err}");
            assert!(!err.contains("sk-secret-999"), "{err}");
        }
    }
}
