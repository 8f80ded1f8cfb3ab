//! Amazon Bedrock's Converse API (`POST /model/{modelId}/converse`) and its
//! embedding models' InvokeModel (`POST /model/{modelId}/invoke`), every
//! request signed with AWS Signature Version 4 by the `aws-sigv4` crate
//! (the AWS SDKs' own signer) from the credentials of the environment or
//! the project's .env. The system prompt is `system`, sampling is
//! `inferenceConfig`, the answer is content blocks; an embedding request is
//! the model family's own body (Titan's `inputText`, Cohere's `texts`).

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use serde_json::{json, Map, Value};

use super::wire::{embedding_inputs, split_messages, OPENAI_ONLY};
use super::Completion;
use crate::settings::{AwsAccess, BedrockEmbedder};

/// The service name requests are signed for.
const SERVICE: &str = "bedrock";

/// OpenAI parameters and the `inferenceConfig` field each is.
const INFERENCE: [(&str, &str); 5] = [
    ("temperature", "temperature"),
    ("top_p", "topP"),
    ("max_tokens", "maxTokens"),
    ("max_completion_tokens", "maxTokens"),
    ("stop", "stopSequences"),
];

/// Keys that are no model parameter (the model is in the URL, the region
/// picks the host); with [`OPENAI_ONLY`] they are left out, the rest go to
/// `additionalModelRequestFields`, the model's own (`top_k`, ...).
const NOT_TAKEN: [&str; 4] = ["model", "messages", "stream", "aws_region_name"];

/// Bedrock's runtime endpoint in `region`.
pub(super) fn default_base(region: &str) -> String {
    format!("https://bedrock-runtime.{region}.amazonaws.com")
}

/// A model id as a URL path segment: everything but unreserved characters
/// percent-encoded (`anthropic.claude-3-haiku-20240307-v1:0` has a colon),
/// as the AWS SDKs send it.
pub(super) fn path_segment(model: &str) -> String {
    model
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The Converse request for an OpenAI chat body.
pub(super) fn chat_body(body: &Value) -> Value {
    let (system, turns) = split_messages(body);
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|(role, parts)| {
            let blocks: Vec<Value> = parts.into_iter().map(|text| json!({ "text": text })).collect();
            json!({"role": role, "content": blocks})
        })
        .collect();
    let mut inference = Map::new();
    let mut additional = Map::new();
    for (k, v) in body.as_object().into_iter().flatten() {
        if let Some((_, field)) = INFERENCE.iter().find(|(openai, _)| openai == k) {
            let v = if k == "stop" && v.is_string() { json!([v]) } else { v.clone() };
            inference.insert(field.to_string(), v);
        } else if !NOT_TAKEN.contains(&k.as_str()) && !OPENAI_ONLY.contains(&k.as_str()) {
            additional.insert(k.clone(), v.clone());
        }
    }
    let mut out = json!({ "messages": messages });
    if !system.is_empty() {
        out["system"] = json!([{ "text": system.join("\n\n") }]);
    }
    if !inference.is_empty() {
        out["inferenceConfig"] = Value::Object(inference);
    }
    if !additional.is_empty() {
        out["additionalModelRequestFields"] = Value::Object(additional);
    }
    out
}

/// Keys of an OpenAI embeddings body that are no model parameter.
const NOT_EMBEDDING_PARAMETERS: [&str; 6] =
    ["model", "input", "encoding_format", "user", "aws_region_name", "dimensions"];

/// The InvokeModel request for an OpenAI embeddings body: Titan's
/// (`inputText`, the first text: Titan's batches are of one) or Cohere's
/// (`texts`, `input_type` `search_document` unless call_args say, as
/// LiteLLM's); `dimensions` is Titan's `dimensions`, Cohere v4's
/// `output_dimension`; other `call_args` (`normalize`, `truncate`, ...) are sent as written.
pub(super) fn embeddings_body(body: &Value) -> Value {
    let model = body.get("model").and_then(Value::as_str).unwrap_or("");
    let mut out: Map<String, Value> = body
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !NOT_EMBEDDING_PARAMETERS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let inputs = embedding_inputs(body);
    let dimensions = body.get("dimensions").cloned();
    match BedrockEmbedder::of(model) {
        Some(BedrockEmbedder::Cohere) => {
            out.insert("texts".into(), inputs.into());
            out.entry("input_type").or_insert_with(|| "search_document".into());
            if let Some(d) = dimensions {
                out.insert("output_dimension".into(), d);
            }
        }
        // Refused by the settings check for other models; Titan's form.
        Some(BedrockEmbedder::Titan) | None => {
            out.insert("inputText".into(), inputs.first().copied().unwrap_or("").into());
            if let Some(d) = dimensions {
                out.insert("dimensions".into(), d);
            }
        }
    }
    Value::Object(out)
}

/// An InvokeModel answer of an embedding model.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum EmbeddingAnswer {
    Titan {
        embedding: Vec<f32>,
        #[serde(rename = "inputTextTokenCount", default)]
        tokens: u64,
    },
    Cohere {
        embeddings: CohereVectors,
    },
}

/// Cohere's vectors: floats, or by type when `embedding_types` was asked.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum CohereVectors {
    Floats(Vec<Vec<f32>>),
    ByType { float: Vec<Vec<f32>> },
}

/// The vectors of an InvokeModel answer in input order, and the tokens
/// Titan reports (Cohere's are in a header, not read: estimated).
pub(super) fn embeddings(bytes: &[u8], expected: usize) -> Result<(Vec<Vec<f32>>, u64), String> {
    let answer: EmbeddingAnswer =
        serde_json::from_slice(bytes).map_err(|e| match serde_json::from_slice::<Value>(bytes) {
            Err(_) => format!("response is not JSON ({e})"),
            Ok(_) => "response is not an embeddings answer (Titan's embedding, Cohere's embeddings)".to_string(),
        })?;
    let (vectors, tokens) = match answer {
        EmbeddingAnswer::Titan { embedding, tokens } => (vec![embedding], tokens),
        EmbeddingAnswer::Cohere { embeddings: CohereVectors::Floats(v) | CohereVectors::ByType { float: v } } => (v, 0),
    };
    if vectors.len() != expected {
        return Err(format!("{} embeddings for {expected} inputs", vectors.len()));
    }
    Ok((vectors, tokens))
}

/// A Converse answer; `stopReason` in OpenAI's words.
pub(super) fn completion(json: &Value) -> Result<Completion, String> {
    let blocks = json
        .pointer("/output/message/content")
        .and_then(Value::as_array)
        .ok_or("response has no output.message.content")?;
    let n = |k: &str| json.pointer(&format!("/usage/{k}")).and_then(Value::as_u64).unwrap_or(0);
    let finish = json.get("stopReason").and_then(Value::as_str).map(|stop| {
        match stop {
            "end_turn" | "stop_sequence" => "stop",
            "max_tokens" => "length",
            "content_filtered" | "guardrail_intervened" => "content_filter",
            other => other,
        }
        .to_string()
    });
    Ok(Completion {
        content: blocks.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect(),
        prompt_tokens: n("inputTokens"),
        completion_tokens: n("outputTokens"),
        finish_reason: finish,
    })
}

/// Signs requests with one model's credentials.
pub(crate) struct Signer {
    identity: Identity,
    region: String,
}

impl Signer {
    pub(super) fn new(aws: &AwsAccess, region: &str) -> Signer {
        let token = aws.session_token.as_ref().map(|t| t.expose().to_string());
        let credentials = Credentials::new(&aws.key_id, aws.secret.expose(), token, None, "graphrag-rs settings");
        Signer { identity: credentials.into(), region: region.to_string() }
    }

    /// The headers that sign a POST of `body` to `url` with `headers` at
    /// `time`: `authorization`, `x-amz-date` and, with a session token,
    /// `x-amz-security-token`.
    pub(super) fn sign(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        time: SystemTime,
    ) -> Result<Vec<(String, String)>, String> {
        let params = v4::SigningParams::builder()
            .identity(&self.identity)
            .region(&self.region)
            .name(SERVICE)
            .time(time)
            .settings(SigningSettings::default())
            .build()
            .map_err(|e| format!("cannot sign the request: {e}"))?
            .into();
        let request = SignableRequest::new("POST", url, headers.iter().copied(), SignableBody::Bytes(body))
            .map_err(|e| format!("cannot sign the request: {e}"))?;
        let (instructions, _) =
            sign(request, &params).map_err(|e| format!("cannot sign the request: {e}"))?.into_parts();
        Ok(instructions.headers().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Secret;

    #[test]
    fn requests_speak_of_system_inference_config_and_the_model_s_own_fields() {
        let openai = json!({
            "model": "anthropic.claude-3-haiku-20240307-v1:0",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Who?"}],
            "temperature": 0.0, "top_p": 1.0, "max_tokens": 300, "stop": "###",
            "seed": 1, "top_k": 40, "aws_region_name": "eu-west-1", "response_format": {"type": "json_object"},
        });
        assert_eq!(
            chat_body(&openai),
            json!({
                "messages": [{"role": "user", "content": [{"text": "Who?"}]}],
                "system": [{"text": "Be brief."}],
                "inferenceConfig": {"temperature": 0.0, "topP": 1.0, "maxTokens": 300, "stopSequences": ["###"]},
                "additionalModelRequestFields": {"top_k": 40},
            })
        );
        assert_eq!(path_segment("anthropic.claude-3-haiku-20240307-v1:0"), "anthropic.claude-3-haiku-20240307-v1%3A0");
    }

    #[test]
    fn embedding_requests_are_each_family_s_own_and_so_are_their_answers() {
        let body = |model: &str| json!({"model": model, "input": ["a"], "encoding_format": "base64", "dimensions": 256, "normalize": true});
        assert_eq!(
            embeddings_body(&body("amazon.titan-embed-text-v2:0")),
            json!({"inputText": "a", "dimensions": 256, "normalize": true})
        );
        let mut cohere = body("us.cohere.embed-v4:0");
        cohere["input"] = json!(["a", "b"]);
        assert_eq!(
            embeddings_body(&cohere),
            json!({"texts": ["a", "b"], "input_type": "search_document", "output_dimension": 256, "normalize": true})
        );
        cohere["input_type"] = "clustering".into();
        assert_eq!(embeddings_body(&cohere)["input_type"], "clustering", "call_args win");
        let titan = br#"{"embedding":[0.5,1.0],"inputTextTokenCount":3}"#;
        assert_eq!(embeddings(titan, 1).unwrap(), (vec![vec![0.5, 1.0]], 3));
        let floats = br#"{"id":"x","embeddings":[[1.0],[0.5]],"texts":["a","b"],"response_type":"embeddings_floats"}"#;
        assert_eq!(embeddings(floats, 2).unwrap(), (vec![vec![1.0], vec![0.5]], 0));
        let by_type = br#"{"embeddings":{"float":[[1.0]]},"response_type":"embeddings_by_type"}"#;
        assert_eq!(embeddings(by_type, 1).unwrap().0, vec![vec![1.0]]);
        assert_eq!(embeddings(titan, 2).unwrap_err(), "1 embeddings for 2 inputs");
        assert!(embeddings(br#"{"data":[]}"#, 1).unwrap_err().contains("Titan's embedding"));
    }

    #[test]
    fn answers_join_their_text_blocks() {
        let answer = json!({
            "output": {"message": {"role": "assistant", "content": [{"text": "Scro"}, {"text": "oge"}]}},
            "stopReason": "max_tokens", "usage": {"inputTokens": 9, "outputTokens": 2, "totalTokens": 11},
        });
        let c = completion(&answer).unwrap();
        assert_eq!(
            (c.content.as_str(), c.prompt_tokens, c.completion_tokens, c.finish_reason.as_deref()),
            ("Scrooge", 9, 2, Some("length"))
        );
        assert!(completion(&json!({"message": "x"})).is_err());
    }

    /// botocore's `SigV4Auth` (the AWS CLI's and boto3's signer) on the
    /// same request, time and credentials: its Authorization header, or
    /// None where python3 with botocore is missing.
    fn botocore_authorization(url: &str, body: &str, token: Option<&str>) -> Option<String> {
        let script = r#"
import sys, datetime
from unittest import mock
try:
    import botocore.auth
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
except ImportError:
    sys.exit(3)
url, body, token = sys.argv[1], sys.argv[2], (sys.argv[3] or None)
request = AWSRequest(method="POST", url=url, data=body.encode(), headers={"content-type": "application/json"})
now = datetime.datetime(2026, 11, 28, 16, 30, 0)
# botocore reads the clock through get_current_datetime (recent versions) or datetime.utcnow (older).
if hasattr(botocore.auth, "get_current_datetime"):
    clock = mock.patch.object(botocore.auth, "get_current_datetime", return_value=now)
else:
    clock = mock.patch.object(botocore.auth, "datetime", **{"datetime.utcnow.return_value": now})
with clock:
    SigV4Auth(Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token), "bedrock", "us-east-1").add_auth(request)
print(request.headers["Authorization"])
"#;
        let out =
            std::process::Command::new("python3").args(["-c", script, url, body, token.unwrap_or("")]).output().ok()?;
        if !out.status.success() {
            assert_eq!(out.status.code(), Some(3), "botocore failed: {}", String::from_utf8_lossy(&out.stderr));
            return None;
        }
        Some(String::from_utf8(out.stdout).unwrap().trim().to_string())
    }

    #[test]
    fn the_authorization_header_is_botocore_s() {
        let time = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_795_883_400); // 2026-11-28T16:30:00Z
        let url = format!(
            "{}/model/{}/converse",
            default_base("us-east-1"),
            path_segment("anthropic.claude-3-haiku-20240307-v1:0")
        );
        let body = r#"{"messages":[{"role":"user","content":[{"text":"Who is Scrooge?"}]}]}"#;
        for token in [None, Some("FQoGZXIvYXdzEXAMPLETOKEN")] {
            let aws = AwsAccess {
                key_id: "AKIDEXAMPLE".into(),
                secret: Secret::from("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
                session_token: token.map(Secret::from),
                region: None,
            };
            let signed = Signer::new(&aws, "us-east-1")
                .sign(&url, &[("content-type", "application/json")], body.as_bytes(), time)
                .unwrap();
            let header = |name: &str| signed.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
            assert_eq!(header("x-amz-date").as_deref(), Some("20261128T163000Z"));
            assert_eq!(header("x-amz-security-token").as_deref(), token);
            let ours = header("authorization").unwrap();
            assert!(
                ours.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261128/us-east-1/bedrock/aws4_request"),
                "{ours}"
            );
            match botocore_authorization(&url, body, token) {
                Some(theirs) => assert_eq!(ours, theirs),
                None => eprintln!(
                    "python3 with botocore is missing: the signature is not compared (`pip install botocore`)"
                ),
            }
        }
    }
}
