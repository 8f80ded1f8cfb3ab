//! OpenAI-compatible HTTP transport (OpenAI, Azure OpenAI, vLLM, Ollama's
//! /v1, DeepSeek, ...). Classifies failures as retryable or not; the API key
//! is sent in a header and scrubbed from every message, as are the values
//! of api_base's query string (Azure-style `?api-key=`). Endpoint URLs are
//! built with a URL type from api_base, its query kept; response bodies are
//! read up to a size limit.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use reqwest::Url;
use serde_json::Value;

use super::answer::MAX_ANSWER_BYTES;
use super::{Completion, LlmError};
use crate::api_base::{self, redact, PUBLIC_PARAMS};
use crate::settings::{duration_of_seconds, ModelConfig};

/// The largest chat response body read: room for an answer of
/// [`MAX_ANSWER_BYTES`] with JSON escaping. A larger one is not read to the end.
const MAX_CHAT_BODY_BYTES: usize = 4 * MAX_ANSWER_BYTES;
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
    chat_url: Url,
    embeddings_url: Url,
    /// The API key and api_base's query values: never shown.
    secrets: Vec<String>,
}

/// The API base a provider uses when settings give none.
fn default_api_base(provider: &str) -> Option<&'static str> {
    match provider {
        "openai" => Some("https://api.openai.com/v1"),
        "ollama" => Some("http://localhost:11434/v1"),
        "vllm" => Some("http://localhost:8000/v1"),
        "deepseek" => Some("https://api.deepseek.com/v1"),
        _ => None,
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
        let base = match (&config.api_base, default_api_base(provider)) {
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
        let (chat_url, embeddings_url) = if provider == "azure" {
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
        } else {
            if !secret.is_empty() {
                headers.insert(AUTHORIZATION, sensitive(&format!("Bearer {secret}"), id)?);
            }
            (endpoint(&base, &["chat", "completions"], &[]), endpoint(&base, &["embeddings"], &[]))
        };
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
        Ok(Transport { client, chat_url, embeddings_url, secrets })
    }

    pub(crate) async fn chat(&self, body: &Value) -> Result<ChatReply, Failure> {
        let Some(bytes) = self.post_bytes(&self.chat_url, body, MAX_CHAT_BODY_BYTES).await? else {
            return Ok(ChatReply::Oversized { limit: MAX_CHAT_BODY_BYTES });
        };
        let json = json(&bytes)?;
        let content = json
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| Failure {
                retryable: true,
                status: None,
                message: "response has no choices[0].message.content".into(),
                retry_after: None,
            })?
            .to_string();
        let usage = |k: &str| json.pointer(&format!("/usage/{k}")).and_then(Value::as_u64);
        Ok(ChatReply::Completion(Completion {
            prompt_tokens: usage("prompt_tokens").unwrap_or(0),
            completion_tokens: usage("completion_tokens").unwrap_or(0),
            content,
            finish_reason: json.pointer("/choices/0/finish_reason").and_then(Value::as_str).map(str::to_string),
        }))
    }

    /// Embeddings of `texts` in order, and the prompt tokens the server reports.
    pub(crate) async fn embed(&self, body: &Value, expected: usize) -> Result<(Vec<Vec<f32>>, u64), Failure> {
        let limit = expected.max(1).saturating_mul(MAX_EMBEDDING_BODY_BYTES_PER_TEXT);
        let bytes = self.post_bytes(&self.embeddings_url, body, limit).await?.ok_or_else(|| Failure {
            // Not retried: a server that answers this much will again.
            retryable: false,
            status: None,
            message: format!("the response is larger than {} MB, the most read", limit >> 20),
            retry_after: None,
        })?;
        let bad = |m: &str| Failure { retryable: true, status: None, message: m.to_string(), retry_after: None };
        // Read straight into vectors (megabytes of numbers at 3072 dimensions);
        // an answer of another shape is read again as JSON to say what is wrong.
        let (items, tokens) = match serde_json::from_slice::<EmbeddingResponse>(&bytes) {
            Ok(r) => (r.data, r.usage.and_then(|u| u.prompt_tokens).unwrap_or(0)),
            Err(_) => return Err(bad(&embedding_defect(&json(&bytes)?))),
        };
        let mut out = vec![Vec::new(); expected];
        for (pos, item) in items.into_iter().enumerate() {
            *out.get_mut(item.index.unwrap_or(pos)).ok_or_else(|| bad("embedding index out of range"))? =
                item.embedding;
        }
        if out.iter().any(Vec::is_empty) {
            return Err(bad("response is missing embeddings for some inputs"));
        }
        Ok((out, tokens))
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
        let response = self.client.post(url.clone()).json(body).send().await.map_err(|e| Failure {
            retryable: !is_permanent(&e),
            status: None,
            message: self.scrub(&describe_send_error(&e)),
            retry_after: None,
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers());
        let text = response.text().await.unwrap_or_default();
        let code = status.as_u16();
        let server_message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v.pointer("/error/message").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| text.chars().take(300).collect());
        Err(Failure {
            // Other 4xx (bad key, unknown model, bad request) will not change.
            retryable: code == 408 || code == 429 || code >= 500,
            status: Some(code),
            message: self.scrub(&format!("HTTP {code}: {server_message}")),
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
        let mut response = self.send(&self.chat_url, body).await?;
        let mut content = String::new();
        let (mut prompt_tokens, mut completion_tokens) = (0, 0);
        let mut finish_reason = None;
        let mut pending: Vec<u8> = Vec::new();
        let broken = |m: String| Failure { retryable: false, status: None, message: m, retry_after: None };
        loop {
            let chunk =
                response.chunk().await.map_err(|e| broken(self.scrub(&format!("the answer stream broke: {e}"))))?;
            let Some(chunk) = chunk else { break };
            if content.len() > MAX_ANSWER_BYTES {
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
                if let Some(delta) = event.pointer("/choices/0/delta/content").and_then(Value::as_str) {
                    if !delta.is_empty() {
                        on_delta(delta);
                        content.push_str(delta);
                    }
                }
                if let Some(reason) = event.pointer("/choices/0/finish_reason").and_then(Value::as_str) {
                    finish_reason = Some(reason.to_string());
                }
                if let Some(u) = event.get("usage").filter(|u| u.is_object()) {
                    prompt_tokens = u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(prompt_tokens);
                    completion_tokens = u.get("completion_tokens").and_then(Value::as_u64).unwrap_or(completion_tokens);
                }
            }
        }
        Ok(Completion { content, prompt_tokens, completion_tokens, finish_reason })
    }

    /// One request whose answer is returned as it came, for the start-up
    /// check to judge (`preflight`); nothing is retried or cached.
    pub(crate) async fn probe(&self, embeddings: bool, body: &Value) -> Probe {
        let url = if embeddings { &self.embeddings_url } else { &self.chat_url };
        let shown = redact(url);
        let response = match self.client.post(url.clone()).json(body).send().await {
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

/// An answer's body as JSON.
fn json(bytes: &[u8]) -> Result<Value, Failure> {
    serde_json::from_slice(bytes).map_err(|e| Failure {
        retryable: true,
        status: None,
        message: format!("response is not JSON ({e})"),
        retry_after: None,
    })
}

/// An OpenAI embeddings answer.
#[derive(serde::Deserialize)]
struct EmbeddingResponse {
    data: Vec<EmbeddingItem>,
    usage: Option<EmbeddingUsage>,
}

#[derive(serde::Deserialize)]
struct EmbeddingItem {
    index: Option<usize>,
    #[serde(deserialize_with = "numbers_or_base64")]
    embedding: Vec<f32>,
}

/// A vector given as a list of numbers or as base64 of little-endian f32
/// (`encoding_format: base64`).
fn numbers_or_base64<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f32>, D::Error> {
    struct Vector;
    impl<'de> serde::de::Visitor<'de> for Vector {
        type Value = Vec<f32>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of numbers or base64 of little-endian f32")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<f32>, A::Error> {
            let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            while let Some(x) = seq.next_element()? {
                v.push(x);
            }
            Ok(v)
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Vec<f32>, E> {
            decode_base64_f32(text).map_err(E::custom)
        }
    }
    d.deserialize_any(Vector)
}

/// The f32 values of `text`, standard base64 of their little-endian bytes.
fn decode_base64_f32(text: &str) -> Result<Vec<f32>, String> {
    use base64::Engine as _;
    let bytes =
        base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| format!("embedding is not base64 ({e})"))?;
    if bytes.len() % 4 != 0 {
        return Err(format!("base64 embedding of {} bytes is not a list of f32", bytes.len()));
    }
    Ok(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

#[derive(serde::Deserialize)]
struct EmbeddingUsage {
    prompt_tokens: Option<u64>,
}

/// What is wrong with an embeddings answer that is JSON but not of the expected shape.
fn embedding_defect(json: &Value) -> String {
    let Some(data) = json.get("data").and_then(Value::as_array) else { return "response has no data array".into() };
    for item in data {
        match item.get("embedding") {
            Some(Value::Array(numbers)) if !numbers.iter().all(Value::is_number) => {
                return "embedding is not a list of numbers".into();
            }
            Some(Value::String(text)) => {
                if let Err(e) = decode_base64_f32(text) {
                    return e;
                }
            }
            Some(Value::Array(_)) => {}
            _ => return "data item has no embedding".into(),
        }
    }
    "response is not an embeddings answer (data[].embedding, data[].index)".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<Vec<Vec<f32>>, String> {
        serde_json::from_str::<EmbeddingResponse>(body)
            .map(|r| r.data.into_iter().map(|i| i.embedding).collect())
            .map_err(|_| embedding_defect(&serde_json::from_str(body).unwrap()))
    }

    #[test]
    fn embeddings_are_read_as_numbers_or_base64() {
        // 1.0 and -2.5 as little-endian f32: 00 00 80 3f, 00 00 20 c0.
        let numbers = parse(r#"{"data":[{"index":0,"embedding":[1.0,-2.5]}]}"#).unwrap();
        let base64 = parse(r#"{"data":[{"index":0,"embedding":"AACAPwAAIMA="}]}"#).unwrap();
        assert_eq!(numbers, vec![vec![1.0, -2.5]]);
        assert_eq!(base64, numbers);
    }

    #[test]
    fn broken_base64_embeddings_say_what_is_wrong() {
        let not_base64 = parse(r#"{"data":[{"embedding":"not base64!"}]}"#).unwrap_err();
        assert!(not_base64.starts_with("embedding is not base64"), "{not_base64}");
        // Six bytes: one f32 and half of another.
        let ragged = parse(r#"{"data":[{"embedding":"AACAPwAA"}]}"#).unwrap_err();
        assert_eq!(ragged, "base64 embedding of 6 bytes is not a list of f32");
        let words = parse(r#"{"data":[{"embedding":["a"]}]}"#).unwrap_err();
        assert_eq!(words, "embedding is not a list of numbers");
    }

    proptest::proptest! {
        #[test]
        fn base64_vectors_decode_bit_for_bit(v in proptest::collection::vec(proptest::num::f32::ANY, 0..64)) {
            // Encoded as the mock server answers `encoding_format: base64`.
            let back = decode_base64_f32(&graphrag_mock_llm::embed::to_base64(&v)).unwrap();
            proptest::prop_assert_eq!(back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), v.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
        }

        #[test]
        fn any_text_decodes_or_fails_cleanly(text in "\\PC{0,40}") {
            let _ = decode_base64_f32(&text);
        }
    }

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
        assert_eq!(t.embeddings_url.as_str(), "https://api.openai.com/v1/embeddings");
        let missing = ModelConfig { api_version: None, ..azure };
        assert!(Transport::new("m", &missing).is_err());
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
