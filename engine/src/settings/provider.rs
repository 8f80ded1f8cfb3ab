//! `model_provider`: which API a model is called through, parsed once when
//! the settings are read. GraphRAG 3.3 names providers as LiteLLM does, and
//! LiteLLM's `provider/model` form (`model: anthropic/claude-...`) is
//! settled here too, so that the LLM layer sees one provider and a bare
//! model name.

use serde::{Deserialize, Serialize};

use super::Secret;

/// A model's provider. Serialised as the name written in settings.yaml.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Provider {
    /// OpenAI's API.
    OpenAi,
    /// Azure OpenAI: deployment URLs, the `api-key` header.
    Azure,
    /// Azure AI Foundry's model inference API (OpenAI's wire at `/models`).
    AzureAi,
    /// Anthropic's Messages API.
    Anthropic,
    /// Google's Gemini API (generativelanguage.googleapis.com).
    Gemini,
    /// Amazon Bedrock's Converse and InvokeModel APIs, requests signed with AWS credentials.
    Bedrock,
    /// Gemini models on Google Cloud's Vertex AI, with a service account's
    /// OAuth access tokens.
    VertexAi,
    /// The in-process embedding model.
    Local,
    /// Another OpenAI-compatible server, by the name written (ollama, vllm,
    /// ...); a name graphrag-rs does not know is refused by the settings check.
    Compatible(String),
}

impl Provider {
    /// The name settings.yaml holds.
    pub fn as_str(&self) -> &str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Azure => "azure",
            Provider::AzureAi => "azure_ai",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
            Provider::Bedrock => "bedrock",
            Provider::VertexAi => "vertex_ai",
            Provider::Local => "local",
            Provider::Compatible(name) => name,
        }
    }

    /// The environment variable its API key is read from when settings.yaml
    /// gives none (the variables GraphRAG's LiteLLM reads).
    pub(crate) fn key_variable(&self) -> Option<&'static str> {
        match self {
            Provider::Anthropic => Some("ANTHROPIC_API_KEY"),
            Provider::Gemini => Some("GEMINI_API_KEY"),
            Provider::AzureAi => Some("AZURE_AI_API_KEY"),
            _ => None,
        }
    }

    /// Why the provider cannot embed with `model`, if it cannot.
    pub(crate) fn embeddings_refusal(&self, model: &str) -> Option<&'static str> {
        match self {
            Provider::Anthropic => Some("Anthropic has no embeddings API"),
            Provider::Bedrock if BedrockEmbedder::of(model).is_none() => Some(
                "Bedrock embeds with Amazon Titan Text Embeddings (amazon.titan-embed-text-v2:0, ...) or Cohere Embed (cohere.embed-english-v3, cohere.embed-v4:0, ...) models",
            ),
            _ => None,
        }
    }
}

/// The embedding models Bedrock serves through InvokeModel, by the request
/// body each takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BedrockEmbedder {
    /// Amazon Titan Text Embeddings (`amazon.titan-embed-text-v2:0`, v1):
    /// `inputText`, one text per request.
    Titan,
    /// Cohere Embed (`cohere.embed-english-v3`, `-multilingual-v3`, `v4:0`):
    /// `texts`, up to 96 per request.
    Cohere,
}

impl BedrockEmbedder {
    /// The family of a model id, an inference profile's (`us.cohere.embed-v4:0`) or an ARN.
    pub fn of(model: &str) -> Option<BedrockEmbedder> {
        if model.contains("amazon.titan-embed-text") || model.contains("amazon.titan-embed-g1-text") {
            Some(BedrockEmbedder::Titan)
        } else if model.contains("cohere.embed") {
            Some(BedrockEmbedder::Cohere)
        } else {
            None
        }
    }

    /// The most texts one request takes.
    pub(crate) fn most_texts(self) -> u32 {
        match self {
            BedrockEmbedder::Titan => 1,
            BedrockEmbedder::Cohere => 96,
        }
    }
}

impl From<&str> for Provider {
    fn from(name: &str) -> Self {
        match name {
            "openai" => Provider::OpenAi,
            "azure" => Provider::Azure,
            "azure_ai" => Provider::AzureAi,
            "anthropic" => Provider::Anthropic,
            "gemini" => Provider::Gemini,
            "bedrock" => Provider::Bedrock,
            "vertex_ai" => Provider::VertexAi,
            "local" => Provider::Local,
            other => Provider::Compatible(other.to_string()),
        }
    }
}

impl From<String> for Provider {
    fn from(name: String) -> Self {
        Provider::from(name.as_str())
    }
}

impl From<Provider> for String {
    fn from(p: Provider) -> String {
        p.as_str().to_string()
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a Bedrock model signs its requests with: the AWS variables of the
/// environment or the project's .env (`AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), else the keys of the
/// shared files' profile (`AWS_PROFILE`, see `aws_profile`), as the AWS
/// SDKs' chain takes them; and the region of `call_args.aws_region_name`
/// (LiteLLM's) or `AWS_REGION_NAME`, `AWS_REGION`, `AWS_DEFAULT_REGION`,
/// else the profile's. Never written out.
#[derive(Debug, Clone, PartialEq)]
pub struct AwsAccess {
    /// `AWS_ACCESS_KEY_ID`, or the profile's.
    pub key_id: String,
    /// `AWS_SECRET_ACCESS_KEY`, or the profile's.
    pub secret: Secret,
    /// For temporary credentials (`AWS_SESSION_TOKEN`).
    pub session_token: Option<Secret>,
    /// `None`: no region anywhere, which a Bedrock call reports as an error.
    pub region: Option<String>,
}

impl AwsAccess {
    /// The access of `lookup`'s variables; None without a key pair.
    pub(super) fn from_environment(
        lookup: &impl Fn(&str) -> Option<String>,
        region: Option<String>,
    ) -> Option<AwsAccess> {
        let var = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let profile = super::aws_profile::profile(lookup);
        let region = region
            .or_else(|| ["AWS_REGION_NAME", "AWS_REGION", "AWS_DEFAULT_REGION"].iter().find_map(|v| var(v)))
            .or(profile.region);
        // The environment's keys win, as a pair: a key id of one source
        // never signs with the secret of another.
        let (key_id, secret, session_token) = match (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
            (Some(key_id), Some(secret)) => (key_id, secret, var("AWS_SESSION_TOKEN")),
            _ => (profile.key_id?, profile.secret?, profile.session_token),
        };
        Some(AwsAccess {
            key_id,
            secret: Secret::from(secret.as_str()),
            session_token: session_token.map(|t| Secret::from(t.as_str())),
            region,
        })
    }
}

/// What a Vertex AI model authenticates and addresses with, as LiteLLM
/// takes them: `call_args.vertex_credentials` (a service account's key file,
/// its path or its JSON) or `GOOGLE_APPLICATION_CREDENTIALS` (its path);
/// the project of `call_args.vertex_project`, `VERTEXAI_PROJECT` or
/// `GOOGLE_CLOUD_PROJECT` (else the key file's); the region of
/// `call_args.vertex_location`, `VERTEXAI_LOCATION` or
/// `GOOGLE_CLOUD_LOCATION` (else LiteLLM's default, us-central1). The
/// `vertex_*` keys are taken out of call_args when the settings are read:
/// they address the request, and the key must never be in a request body,
/// a cache key or a step hash.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VertexAccess {
    /// The service account's key file: its path or its JSON.
    pub credentials: Option<Secret>,
    /// The Google Cloud project; `None`: the key file's.
    pub project: Option<String>,
    /// The region; `None`: us-central1.
    pub location: Option<String>,
}

impl VertexAccess {
    /// The `vertex_*` keys of `call_args`, taken out of it.
    pub(super) fn take_call_args(call_args: &mut serde_json::Map<String, serde_json::Value>) -> VertexAccess {
        let mut take = |key: &str| match call_args.remove(key)? {
            serde_json::Value::String(s) => Some(s),
            // LiteLLM takes the key file's JSON as an object too.
            object @ serde_json::Value::Object(_) => Some(object.to_string()),
            other => Some(other.to_string()),
        };
        VertexAccess {
            credentials: take("vertex_credentials").map(|c| Secret::from(c.as_str())),
            project: take("vertex_project"),
            location: take("vertex_location"),
        }
    }

    /// What settings left unset, from `lookup`'s variables.
    pub(super) fn fill_from_environment(&mut self, lookup: &impl Fn(&str) -> Option<String>) {
        let var = |names: &[&str]| names.iter().find_map(|n| lookup(n).filter(|v| !v.trim().is_empty()));
        if self.credentials.is_none() {
            self.credentials = var(&["GOOGLE_APPLICATION_CREDENTIALS"]).map(|p| Secret::from(p.as_str()));
        }
        if self.project.is_none() {
            self.project = var(&["VERTEXAI_PROJECT", "GOOGLE_CLOUD_PROJECT"]);
        }
        if self.location.is_none() {
            self.location = var(&["VERTEXAI_LOCATION", "GOOGLE_CLOUD_LOCATION"]);
        }
    }
}

/// LiteLLM's `provider/model` form: `(provider, model)` when `model` begins
/// with the name of a provider in `known` and the model is meant for it:
/// its `model_provider` is that provider, or the default (openai) with no
/// api_base. Behind an api_base (OpenRouter, a LiteLLM proxy)
/// `anthropic/claude-...` is that server's own model name, sent as it is.
pub(super) fn split_model<'m>(
    provider: &Provider,
    model: &'m str,
    api_base: Option<&str>,
    known: &[&str],
) -> Option<(Provider, &'m str)> {
    let (prefix, rest) = model.split_once('/')?;
    if rest.is_empty() || !known.contains(&prefix) || prefix == "local" {
        return None;
    }
    let named = Provider::from(prefix);
    let meant = named == *provider || (*provider == Provider::OpenAi && api_base.is_none());
    meant.then_some((named, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: [&str; 4] = ["openai", "anthropic", "gemini", "ollama"];

    #[test]
    fn names_round_trip() {
        for name in ["openai", "azure", "azure_ai", "anthropic", "gemini", "bedrock", "vertex_ai", "local", "ollama"] {
            assert_eq!(Provider::from(name).as_str(), name);
            assert_eq!(String::from(Provider::from(name)), name);
        }
        assert_eq!(Provider::from("vllm"), Provider::Compatible("vllm".into()));
    }

    #[test]
    fn litellm_model_names_carry_their_provider() {
        let split = |p: &str, m: &'static str, base: Option<&str>| split_model(&p.into(), m, base, &KNOWN);
        assert_eq!(
            split("openai", "anthropic/claude-sonnet-4-5", None),
            Some((Provider::Anthropic, "claude-sonnet-4-5"))
        );
        assert_eq!(split("gemini", "gemini/gemini-2.5-flash", None), Some((Provider::Gemini, "gemini-2.5-flash")));
        assert_eq!(split("openai", "openai/gpt-4o", None), Some((Provider::OpenAi, "gpt-4o")));
        // A gateway's own model names, and names that are no provider's.
        assert_eq!(split("openai", "anthropic/claude-3-haiku", Some("https://openrouter.ai/api/v1")), None);
        assert_eq!(split("ollama", "anthropic/claude", None), None);
        assert_eq!(split("openai", "meta-llama/Llama-3-8B", None), None);
        assert_eq!(split("openai", "anthropic/", None), None);
        assert_eq!(split("openai", "gpt-4o", None), None);
    }
}
