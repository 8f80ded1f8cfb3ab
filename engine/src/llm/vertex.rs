//! Gemini models on Google Cloud's Vertex AI:
//! `{host}/v1/projects/{project}/locations/{location}/publishers/google/models/{model}:generateContent`
//! (and `:streamGenerateContent?alt=sse`) speak the Gemini API's wire
//! (`gemini`); embeddings are `:predict` (`instances[].content`). Each
//! request carries an OAuth access token of the project's service account:
//! a JWT signed with its key (RS256, by `ring`, already built for TLS and
//! object_store) is exchanged for one at the key file's `token_uri`, and
//! the token is kept until shortly before it expires.

use std::time::{Duration, Instant, SystemTime};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use reqwest::Url;
use ring::rand::SystemRandom;
use ring::signature::{RsaKeyPair, RSA_PKCS1_SHA256};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivatePkcs8KeyDer;
use serde_json::{json, Map, Value};

use super::http::{endpoint, versioned, Failure};
use super::wire::embedding_inputs;
use super::LlmError;
use crate::settings::ModelConfig;

/// LiteLLM's region when settings and the environment name none.
const DEFAULT_LOCATION: &str = "us-central1";

/// What the access token may do: Vertex AI's calls need cloud-platform.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// Google's token endpoint, when a key file names none.
const GOOGLE_TOKEN_URI: &str = "https://oauth2.googleapis.com/token";

/// How long before its expiry a token is renewed: a request must not start
/// with a token that expires on the way (google-auth renews 3¾ minutes early).
const RENEW_BEFORE: Duration = Duration::from_secs(300);

/// The form field of the JWT-bearer grant, already form-encoded (the
/// assertion that follows is base64url and dots: nothing to encode).
const GRANT: &str = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=";

/// The region of a Vertex AI model.
pub(super) fn location(config: &ModelConfig) -> &str {
    config.vertex.location.as_deref().unwrap_or(DEFAULT_LOCATION)
}

/// The Vertex AI host of `location` (`global` has no regional host).
pub(super) fn default_base(location: &str) -> String {
    match location {
        "global" => "https://aiplatform.googleapis.com".to_string(),
        region => format!("https://{region}-aiplatform.googleapis.com"),
    }
}

/// A Vertex AI model's endpoints and the service account that calls them.
pub(super) struct Vertex {
    pub chat: Url,
    pub stream: Url,
    pub embeddings: Url,
    pub account: ServiceAccount,
}

impl Vertex {
    /// The model's endpoints under `base` (api_base: the host, or the `/v1`
    /// root; default: the region's host) and its service account, or what to set.
    pub(super) fn new(id: &str, config: &ModelConfig, base: &Url) -> Result<Vertex, LlmError> {
        let access = &config.vertex;
        let config_error = |what: String| LlmError::Config(format!("model `{id}`: {what}"));
        let credentials = access.credentials.as_ref().ok_or_else(|| {
            config_error("Vertex AI calls with a service account: set GOOGLE_APPLICATION_CREDENTIALS to its key file (in the environment or the project's .env), or call_args.vertex_credentials".into())
        })?;
        let account = ServiceAccount::load(credentials.expose()).map_err(config_error)?;
        let project = access.project.clone().or_else(|| account.project.clone()).ok_or_else(|| {
            config_error(
                "Vertex AI needs a project: set call_args.vertex_project in settings.yaml, or VERTEXAI_PROJECT".into(),
            )
        })?;
        let location = location(config);
        let root = if versioned(base) { base.clone() } else { endpoint(base, &["v1"], &[]) };
        let model = config.model.strip_prefix("models/").unwrap_or(&config.model);
        let path = ["projects", &project, "locations", location, "publishers", "google", "models"];
        let method = |name: &str, query: &[(&str, &str)]| {
            let mut segments = path.to_vec();
            let last = format!("{model}:{name}");
            segments.push(&last);
            endpoint(&root, &segments, query)
        };
        Ok(Vertex {
            chat: method("generateContent", &[]),
            stream: method("streamGenerateContent", &[("alt", "sse")]),
            embeddings: method("predict", &[]),
            account,
        })
    }
}

/// A service account's key file, as the Cloud console writes it.
#[derive(serde::Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: String,
    project_id: Option<String>,
    private_key_id: String,
    private_key: String,
    client_email: String,
    token_uri: Option<String>,
}

/// An access token and when to renew it.
struct AccessToken {
    value: String,
    renew_at: Instant,
}

/// A service account: signs its JWT assertions and keeps the access token.
pub(crate) struct ServiceAccount {
    key: RsaKeyPair,
    key_id: String,
    email: String,
    token_uri: Url,
    project: Option<String>,
    /// Held across a renewal, so that the requests that find the token stale
    /// together wait for one token request.
    token: tokio::sync::Mutex<Option<AccessToken>>,
    /// The last token a request was answered with: Vertex AI refusing it
    /// later means it was revoked or expired early, not that the account
    /// cannot call.
    answered: std::sync::Mutex<Option<String>>,
}

impl ServiceAccount {
    /// The account of a key file: its JSON, or the path to it. Errors name
    /// the path, never the file's contents.
    fn load(source: &str) -> Result<ServiceAccount, String> {
        let source = source.trim();
        let (text, shown) = if source.starts_with('{') {
            (source.to_string(), "call_args.vertex_credentials".to_string())
        } else {
            let text = std::fs::read_to_string(source)
                .map_err(|e| format!("cannot read the service account's key file {source}: {e}"))?;
            (text, format!("the key file {source}"))
        };
        // serde's messages may quote a value: only where it failed is said.
        let file: KeyFile = serde_json::from_str(&text).map_err(|e| {
            format!("{shown} is not a service account's key file (line {}, column {})", e.line(), e.column())
        })?;
        if file.kind != "service_account" {
            return Err(format!(
                "{shown} is a `{}` credential: Vertex AI is called with a service account's key file (`type: service_account`)",
                file.kind
            ));
        }
        let der = PrivatePkcs8KeyDer::from_pem_slice(file.private_key.as_bytes())
            .map_err(|_| format!("the private_key of {shown} is not a PEM PKCS#8 key"))?;
        let key = RsaKeyPair::from_pkcs8(der.secret_pkcs8_der())
            .map_err(|e| format!("the private_key of {shown} is not an RSA key ring can sign with: {e}"))?;
        let token_uri = file.token_uri.as_deref().unwrap_or(GOOGLE_TOKEN_URI);
        let token_uri = crate::api_base::parse(token_uri).map_err(|e| format!("the token_uri of {shown}: {e}"))?;
        Ok(ServiceAccount {
            key,
            key_id: file.private_key_id,
            email: file.client_email,
            token_uri,
            project: file.project_id,
            token: tokio::sync::Mutex::new(None),
            answered: std::sync::Mutex::new(None),
        })
    }

    /// The signed JWT that asks `token_uri` for an hour's access token, at
    /// `now` (seconds since the epoch).
    fn assertion(&self, now: u64) -> Result<String, String> {
        let part = |v: Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let header = part(json!({"alg": "RS256", "typ": "JWT", "kid": self.key_id}));
        let claims = part(json!({
            "iss": self.email, "scope": SCOPE, "aud": self.token_uri.as_str(), "iat": now, "exp": now + 3600,
        }));
        let message = format!("{header}.{claims}");
        let mut signature = vec![0; self.key.public().modulus_len()];
        self.key
            .sign(&RSA_PKCS1_SHA256, &SystemRandom::new(), message.as_bytes(), &mut signature)
            .map_err(|_| "cannot sign the service account's assertion".to_string())?;
        Ok(format!("{message}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }

    /// A current access token: the one kept, or a new one.
    pub(super) async fn bearer(&self, client: &reqwest::Client) -> Result<String, Failure> {
        let mut kept = self.token.lock().await;
        if let Some(token) = kept.as_ref().filter(|t| Instant::now() < t.renew_at) {
            return Ok(token.value.clone());
        }
        let token = self.request_token(client).await?;
        let value = token.value.clone();
        *kept = Some(token);
        Ok(value)
    }

    /// Notes that a request with `token` was answered.
    pub(super) fn answered(&self, token: &str) {
        let mut last = self.answered.lock().unwrap();
        if last.as_deref() != Some(token) {
            *last = Some(token.to_string());
        }
    }

    /// After Vertex AI refused `token` (401): whether asking again will use
    /// another token. A token that was answered before is forgotten (revoked,
    /// or expired early); one never answered is refused for a cause its
    /// successor would share, and asking again would only repeat it.
    pub(super) async fn forget(&self, token: &str) -> bool {
        let mut kept = self.token.lock().await;
        match kept.as_ref() {
            // Renewed, or forgotten, since the request took it.
            Some(current) if current.value != token => true,
            None => true,
            Some(_) if self.answered.lock().unwrap().as_deref() == Some(token) => {
                *kept = None;
                true
            }
            Some(_) => false,
        }
    }

    async fn request_token(&self, client: &reqwest::Client) -> Result<AccessToken, Failure> {
        let failure = |retryable: bool, status: Option<u16>, message: String| Failure {
            retryable,
            status,
            message: format!("the service account's access token ({}): {message}", self.token_uri),
            retry_after: None,
        };
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().as_secs();
        let assertion = self.assertion(now).map_err(|m| failure(false, None, m))?;
        let asked = Instant::now();
        let response = client
            .post(self.token_uri.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(format!("{GRANT}{assertion}"))
            .send()
            .await
            .map_err(|e| failure(true, None, format!("request failed: {e}")))?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            // OAuth's `error` and `error_description` (`invalid_grant`: a key
            // revoked or a clock far off; neither mends by asking again).
            let said = |k: &str| body.get(k).and_then(Value::as_str).unwrap_or("");
            let code = status.as_u16();
            let message = format!("HTTP {code}: {} {}", said("error"), said("error_description"));
            return Err(failure(code == 429 || code >= 500, Some(code), message.trim().to_string()));
        }
        let value = body.get("access_token").and_then(Value::as_str);
        let value = value.ok_or_else(|| failure(true, None, "the answer has no access_token".into()))?;
        let lifetime = Duration::from_secs(body.get("expires_in").and_then(Value::as_u64).unwrap_or(3600));
        // A short-lived token is used for half its life rather than not at all.
        let usable = lifetime.checked_sub(RENEW_BEFORE).unwrap_or(lifetime / 2).max(lifetime / 2);
        Ok(AccessToken { value: value.to_string(), renew_at: asked + usable })
    }
}

/// The `:predict` request for an OpenAI embeddings body: one instance per
/// input (`task_type` and `title` go into each), `dimensions` is
/// `outputDimensionality`, other `call_args` (`autoTruncate`) are parameters.
pub(super) fn embeddings_body(body: &Value) -> Value {
    let mut parameters = Map::new();
    let mut per_instance = Map::new();
    for (k, v) in body.as_object().into_iter().flatten() {
        match k.as_str() {
            "model" | "input" | "encoding_format" | "user" => {}
            "dimensions" => {
                parameters.insert("outputDimensionality".into(), v.clone());
            }
            "task_type" | "title" => {
                per_instance.insert(k.clone(), v.clone());
            }
            _ => {
                parameters.insert(k.clone(), v.clone());
            }
        }
    }
    let inputs = embedding_inputs(body);
    let instances: Vec<Value> = inputs
        .into_iter()
        .map(|text| {
            let mut instance = per_instance.clone();
            instance.insert("content".into(), text.into());
            Value::Object(instance)
        })
        .collect();
    let mut out = json!({ "instances": instances });
    if !parameters.is_empty() {
        out["parameters"] = Value::Object(parameters);
    }
    out
}

/// A `:predict` answer.
#[derive(serde::Deserialize)]
struct Predictions {
    predictions: Vec<Prediction>,
}

#[derive(serde::Deserialize)]
struct Prediction {
    embeddings: Embedding,
}

#[derive(serde::Deserialize)]
struct Embedding {
    values: Vec<f32>,
    #[serde(default)]
    statistics: Option<Statistics>,
}

#[derive(serde::Deserialize)]
struct Statistics {
    #[serde(default)]
    token_count: f64,
}

/// The vectors of a `:predict` answer in input order, and their tokens.
pub(super) fn embeddings(bytes: &[u8], expected: usize) -> Result<(Vec<Vec<f32>>, u64), String> {
    let answer: Predictions =
        serde_json::from_slice(bytes).map_err(|e| match serde_json::from_slice::<Value>(bytes) {
            Err(_) => format!("response is not JSON ({e})"),
            Ok(_) => "response is not an embeddings answer (predictions[].embeddings.values)".to_string(),
        })?;
    if answer.predictions.len() != expected {
        return Err(format!("{} embeddings for {expected} inputs", answer.predictions.len()));
    }
    let tokens = answer.predictions.iter().filter_map(|p| p.embeddings.statistics.as_ref()).map(|s| s.token_count);
    let tokens = tokens.sum::<f64>() as u64;
    Ok((answer.predictions.into_iter().map(|p| p.embeddings.values).collect(), tokens))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{Secret, VertexAccess};

    fn config(credentials: Option<&str>, project: Option<&str>, base: Option<&str>) -> ModelConfig {
        ModelConfig {
            model_provider: "vertex_ai".into(),
            model: "gemini-2.5-flash".into(),
            api_base: base.map(str::to_string),
            vertex: VertexAccess {
                credentials: credentials.map(Secret::from),
                project: project.map(str::to_string),
                location: Some("europe-west4".into()),
            },
            ..ModelConfig::default()
        }
    }

    fn vertex(cfg: &ModelConfig) -> Result<Vertex, LlmError> {
        let base = cfg.api_base.clone().unwrap_or_else(|| default_base(location(cfg)));
        Vertex::new("m", cfg, &crate::api_base::parse(&base).unwrap())
    }

    fn key_file() -> String {
        graphrag_mock_llm::google::test_service_account("https://oauth2.googleapis.com/token")
    }

    #[test]
    fn endpoints_are_the_region_s_and_the_project_s() {
        let v = vertex(&config(Some(&key_file()), Some("p-1"), None)).unwrap();
        let model = "https://europe-west4-aiplatform.googleapis.com/v1/projects/p-1/locations/europe-west4/publishers/google/models/gemini-2.5-flash";
        assert_eq!(v.chat.as_str(), format!("{model}:generateContent"));
        assert_eq!(v.stream.as_str(), format!("{model}:streamGenerateContent?alt=sse"));
        assert_eq!(v.embeddings.as_str(), format!("{model}:predict"));
        // The key file's project when settings name none; a proxy's /v1 root.
        let v = vertex(&config(Some(&key_file()), None, Some("http://127.0.0.1:9/v1"))).unwrap();
        assert!(v.chat.as_str().starts_with("http://127.0.0.1:9/v1/projects/graphrag-mock/"), "{}", v.chat);
        assert_eq!(default_base("global"), "https://aiplatform.googleapis.com");
    }

    #[test]
    fn what_is_missing_is_named_and_the_key_never_shown() {
        let err = |cfg: &ModelConfig| vertex(cfg).err().unwrap().to_string();
        assert!(err(&config(None, Some("p"), None)).contains("GOOGLE_APPLICATION_CREDENTIALS"));
        assert!(err(&config(Some("/no/such/key.json"), Some("p"), None)).contains("/no/such/key.json"));
        let broken = key_file().replace("\"type\"", "\"type\" 1");
        let message = err(&config(Some(&broken), Some("p"), None));
        assert!(message.contains("not a service account's key file") && !message.contains("PRIVATE KEY"), "{message}");
        let user = key_file().replace("service_account", "authorized_user");
        assert!(err(&config(Some(&user), None, None)).contains("`authorized_user`"));
    }

    #[test]
    fn predict_asks_one_instance_per_text_and_counts_its_tokens() {
        let body = json!({"model": "text-embedding-005", "input": ["a", "b"], "encoding_format": "base64", "dimensions": 256, "task_type": "RETRIEVAL_DOCUMENT"});
        assert_eq!(
            embeddings_body(&body),
            json!({
                "instances": [{"content": "a", "task_type": "RETRIEVAL_DOCUMENT"}, {"content": "b", "task_type": "RETRIEVAL_DOCUMENT"}],
                "parameters": {"outputDimensionality": 256},
            })
        );
        let answer = br#"{"predictions":[{"embeddings":{"values":[1.0,0.5],"statistics":{"token_count":3,"truncated":false}}},{"embeddings":{"values":[0.0,1.0],"statistics":{"token_count":4.0}}}]}"#;
        assert_eq!(embeddings(answer, 2).unwrap(), (vec![vec![1.0, 0.5], vec![0.0, 1.0]], 7));
        assert_eq!(embeddings(answer, 3).unwrap_err(), "2 embeddings for 3 inputs");
        assert!(embeddings(br#"{"embeddings":[]}"#, 1).unwrap_err().contains("predictions[]"));
    }

    #[test]
    fn a_refused_token_is_forgotten_only_once_it_was_answered() {
        let account = ServiceAccount::load(&key_file()).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let keep = |value: &str| {
            let token = AccessToken { value: value.into(), renew_at: Instant::now() + Duration::from_secs(60) };
            *account.token.try_lock().unwrap() = Some(token);
        };
        keep("t1");
        assert!(!runtime.block_on(account.forget("t1")), "a new token refused: not asked again");
        assert!(account.token.try_lock().unwrap().is_some());
        account.answered("t1");
        assert!(runtime.block_on(account.forget("t1")), "revoked: forgotten and asked again");
        assert!(account.token.try_lock().unwrap().is_none());
        keep("t2");
        assert!(runtime.block_on(account.forget("t1")), "already renewed");
    }

    #[test]
    fn the_assertion_is_a_jwt_for_the_token_uri() {
        let account = ServiceAccount::load(&key_file()).unwrap();
        let jwt = account.assertion(1_795_883_400).unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        let decode = |p: &str| serde_json::from_slice::<Value>(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap();
        assert_eq!(decode(parts[0]), json!({"alg": "RS256", "typ": "JWT", "kid": "mock-key-1"}));
        assert_eq!(
            decode(parts[1]),
            json!({"iss": "indexer@graphrag-mock.iam.gserviceaccount.com", "scope": SCOPE,
                   "aud": "https://oauth2.googleapis.com/token", "iat": 1_795_883_400u64, "exp": 1_795_887_000u64})
        );
        assert_eq!(URL_SAFE_NO_PAD.decode(parts[2]).unwrap().len(), 256, "a 2048-bit RSA signature");
    }
}
