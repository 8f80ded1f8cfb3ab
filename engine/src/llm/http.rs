//! OpenAI-compatible HTTP transport (OpenAI, Azure OpenAI, vLLM, Ollama's
//! /v1, DeepSeek, ...). Classifies failures as retryable or not; the API key
//! is sent in a header and scrubbed from every message.

use std::sync::Once;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use serde_json::Value;

use super::{Completion, LlmError};
use crate::settings::ModelConfig;

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
    chat_url: String,
    embeddings_url: String,
    secret: String,
}

fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
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

impl Transport {
    pub(crate) fn new(id: &str, config: &ModelConfig) -> Result<Self, LlmError> {
        install_crypto_provider();
        let provider = config.model_provider.as_str();
        let base = match (&config.api_base, default_api_base(provider)) {
            (Some(b), _) => b.trim_end_matches('/').to_string(),
            (None, Some(d)) => d.to_string(),
            (None, None) => {
                return Err(LlmError::Config(format!(
                    "model `{id}`: model_provider `{provider}` needs api_base in settings.yaml"
                )))
            }
        };
        let secret = config.api_key.expose().trim().to_string();
        let mut headers = HeaderMap::new();
        let (chat_url, embeddings_url) = if provider == "azure" {
            let deployment = config.deployment_name.clone().unwrap_or_else(|| config.model.clone());
            let version = config.api_version.clone().ok_or_else(|| {
                LlmError::Config(format!("model `{id}`: Azure OpenAI needs api_version in settings.yaml"))
            })?;
            if !secret.is_empty() {
                headers.insert("api-key", sensitive(&secret, id)?);
            }
            let root = format!("{base}/openai/deployments/{deployment}");
            (
                format!("{root}/chat/completions?api-version={version}"),
                format!("{root}/embeddings?api-version={version}"),
            )
        } else {
            if !secret.is_empty() {
                headers.insert(AUTHORIZATION, sensitive(&format!("Bearer {secret}"), id)?);
            }
            (format!("{base}/chat/completions"), format!("{base}/embeddings"))
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
            .default_headers(headers)
            .timeout(Duration::from_secs_f64(config.request_timeout.max(0.001)))
            .build()
            .map_err(|e| LlmError::Config(format!("model `{id}`: cannot build HTTP client: {e}")))?;
        Ok(Transport { client, chat_url, embeddings_url, secret })
    }

    pub(crate) async fn chat(&self, body: &Value) -> Result<Completion, Failure> {
        let json = self.post(&self.chat_url, body).await?;
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
        Ok(Completion {
            prompt_tokens: usage("prompt_tokens").unwrap_or(0),
            completion_tokens: usage("completion_tokens").unwrap_or(0),
            content,
        })
    }

    /// Embeddings of `texts` in order, and the prompt tokens the server reports.
    pub(crate) async fn embed(&self, body: &Value, expected: usize) -> Result<(Vec<Vec<f32>>, u64), Failure> {
        let json = self.post(&self.embeddings_url, body).await?;
        let bad = |m: &str| Failure { retryable: true, status: None, message: m.to_string(), retry_after: None };
        let data = json.get("data").and_then(Value::as_array).ok_or_else(|| bad("response has no data array"))?;
        let mut out = vec![Vec::new(); expected];
        for (pos, item) in data.iter().enumerate() {
            let index = item.get("index").and_then(Value::as_u64).map(|i| i as usize).unwrap_or(pos);
            let vector = item
                .get("embedding")
                .and_then(Value::as_array)
                .ok_or_else(|| bad("data item has no embedding"))?
                .iter()
                .map(|v| v.as_f64().map(|f| f as f32))
                .collect::<Option<Vec<f32>>>()
                .ok_or_else(|| bad("embedding is not a list of numbers"))?;
            *out.get_mut(index).ok_or_else(|| bad("embedding index out of range"))? = vector;
        }
        if out.iter().any(Vec::is_empty) {
            return Err(bad("response is missing embeddings for some inputs"));
        }
        let tokens = json.pointer("/usage/prompt_tokens").and_then(Value::as_u64).unwrap_or(0);
        Ok((out, tokens))
    }

    async fn post(&self, url: &str, body: &Value) -> Result<Value, Failure> {
        let response = self.send(url, body).await?;
        let status = response.status();
        let text = response.text().await.map_err(|e| Failure {
            retryable: true,
            status: Some(status.as_u16()),
            message: self.scrub(&format!("reading the response failed: {e}")),
            retry_after: None,
        })?;
        serde_json::from_str(&text).map_err(|e| Failure {
            retryable: true,
            status: Some(status.as_u16()),
            message: format!("response is not JSON ({e})"),
            retry_after: None,
        })
    }

    /// Sends a request; a non-success status becomes a classified failure.
    async fn send(&self, url: &str, body: &Value) -> Result<reqwest::Response, Failure> {
        let response = self.client.post(url).json(body).send().await.map_err(|e| Failure {
            retryable: true,
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
            retryable: code == 408 || code == 409 || code == 429 || code >= 500,
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
        let mut pending: Vec<u8> = Vec::new();
        let broken = |m: String| Failure { retryable: false, status: None, message: m, retry_after: None };
        loop {
            let chunk =
                response.chunk().await.map_err(|e| broken(self.scrub(&format!("the answer stream broke: {e}"))))?;
            let Some(chunk) = chunk else { break };
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
                if let Some(u) = event.get("usage").filter(|u| u.is_object()) {
                    prompt_tokens = u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(prompt_tokens);
                    completion_tokens = u.get("completion_tokens").and_then(Value::as_u64).unwrap_or(completion_tokens);
                }
            }
        }
        Ok(Completion { content, prompt_tokens, completion_tokens })
    }

    /// One request whose answer is returned as it came, for the start-up
    /// check to judge (`preflight`); nothing is retried or cached.
    pub(crate) async fn probe(&self, embeddings: bool, body: &Value) -> Probe {
        let url = if embeddings { &self.embeddings_url } else { &self.chat_url };
        let response = match self.client.post(url).json(body).send().await {
            Ok(r) => r,
            Err(e) => {
                let cause = if e.is_timeout() {
                    SendFailure::Timeout
                } else if error_chain(&e).contains("dns error") {
                    SendFailure::Dns
                } else if io_kind(&e) == Some(std::io::ErrorKind::ConnectionRefused) {
                    SendFailure::Refused
                } else {
                    SendFailure::Other
                };
                return Probe::NoAnswer { url: url.clone(), cause, detail: self.scrub(&error_chain(&e)) };
            }
        };
        let status = response.status().as_u16();
        let content_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let body = response.text().await.unwrap_or_default();
        Probe::Answer { url: url.clone(), status, content_type, body: self.scrub(&body) }
    }

    /// Removes the API key from text that may echo it.
    fn scrub(&self, text: &str) -> String {
        if self.secret.len() < 4 {
            return text.to_string();
        }
        text.replace(&self.secret, "***")
    }
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
        .map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1000.0))
        .or_else(|| get(RETRY_AFTER.as_str()).map(|s| Duration::from_secs_f64(s.max(0.0))))
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
            t.chat_url,
            "https://x.openai.azure.com/openai/deployments/dep/chat/completions?api-version=2024-10-21"
        );
        let t = Transport::new("m", &ModelConfig::default()).unwrap();
        assert_eq!(t.embeddings_url, "https://api.openai.com/v1/embeddings");
        let missing = ModelConfig { api_version: None, ..azure };
        assert!(Transport::new("m", &missing).is_err());
    }
}
