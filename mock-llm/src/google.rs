//! Google's OAuth 2.0 token endpoint for service accounts (`POST /token`,
//! the JWT-bearer grant Vertex AI clients use), and a service account whose
//! key file points at it. The mock checks the assertion's form and claims
//! and keeps it; whether its RS256 signature verifies is the engine test's
//! to check, against [`TEST_SERVICE_ACCOUNT_PUBLIC_KEY`]. Vertex AI's routes
//! take only the access tokens issued here.

use base64::Engine as _;
use hyper::header::HeaderMap;
use serde_json::{json, Value};

use crate::response::{json_response, Resp};

/// The test service account's RSA public key (PKCS#1, PEM). A key made for
/// these tests: it opens no account anywhere.
pub const TEST_SERVICE_ACCOUNT_PUBLIC_KEY: &str = include_str!("../keys/test-service-account-public-key.pem");

const PRIVATE_KEY: &str = include_str!("../keys/test-service-account-key.pem");

/// The scope a Vertex AI client asks for.
pub const CLOUD_PLATFORM_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// How long an issued access token lives, as Google's do.
const TOKEN_SECONDS: u64 = 3600;

/// The key file (`GOOGLE_APPLICATION_CREDENTIALS`) of the test service
/// account, its `token_uri` the mock's.
pub fn test_service_account(token_uri: &str) -> String {
    json!({
        "type": "service_account",
        "project_id": "graphrag-mock",
        "private_key_id": "mock-key-1",
        "private_key": PRIVATE_KEY,
        "client_email": "indexer@graphrag-mock.iam.gserviceaccount.com",
        "client_id": "100000000000000000001",
        "token_uri": token_uri,
    })
    .to_string()
}

/// The JSON of one base64url part of a JWT.
fn jwt_part(part: &str) -> Result<Value, String> {
    let bytes =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).map_err(|e| format!("not base64url: {e}"))?;
    serde_json::from_slice(&bytes).map_err(|e| format!("not JSON: {e}"))
}

/// Why Google would refuse this assertion, if it would (the signature aside).
fn check_assertion(assertion: &str, audience: &str) -> Result<(), String> {
    let parts: Vec<&str> = assertion.split('.').collect();
    let [header, claims, signature] = parts[..] else { return Err("the assertion is not a signed JWT".into()) };
    let header = jwt_part(header)?;
    if header.get("alg").and_then(Value::as_str) != Some("RS256") || header.get("kid").is_none() {
        return Err("the JWT header must name alg RS256 and the key's kid".into());
    }
    let claims = jwt_part(claims)?;
    let text = |k: &str| claims.get(k).and_then(Value::as_str);
    let time = |k: &str| claims.get(k).and_then(Value::as_u64);
    if !text("iss").is_some_and(|iss| iss.ends_with(".iam.gserviceaccount.com")) {
        return Err("iss must be the service account's email".into());
    }
    if text("scope") != Some(CLOUD_PLATFORM_SCOPE) {
        return Err(format!("scope must be {CLOUD_PLATFORM_SCOPE}"));
    }
    if text("aud") != Some(audience) {
        return Err(format!("aud must be the token URI, {audience}"));
    }
    match (time("iat"), time("exp")) {
        (Some(iat), Some(exp)) if exp > iat && exp - iat <= TOKEN_SECONDS => {}
        _ => return Err("Invalid JWT: iat and exp must be within an hour of each other".into()),
    }
    if signature.is_empty() {
        return Err("Invalid JWT Signature.".into());
    }
    Ok(())
}

/// The answer to a token request: an access token for a well-formed
/// JWT-bearer grant (kept, with the assertion), else OAuth's `invalid_grant`.
pub(crate) fn token(issued: &std::sync::Mutex<Vec<(String, String)>>, headers: &HeaderMap, body: &[u8]) -> Resp {
    let form = String::from_utf8_lossy(body);
    let field = |name: &str| {
        form.split('&')
            .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
            .map(crate::providers::percent_decoded)
    };
    let host = headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("");
    let refused = |description: String| {
        json_response(
            hyper::StatusCode::BAD_REQUEST,
            &json!({"error": "invalid_grant", "error_description": description}),
        )
    };
    if field("grant_type").as_deref() != Some("urn:ietf:params:oauth:grant-type:jwt-bearer") {
        return refused("grant_type must be urn:ietf:params:oauth:grant-type:jwt-bearer".into());
    }
    let assertion = field("assertion").unwrap_or_default();
    if let Err(why) = check_assertion(&assertion, &format!("http://{host}/token")) {
        return refused(why);
    }
    let mut issued = issued.lock().unwrap();
    let access_token = format!("ya29.mock-access-token-{}", issued.len() + 1);
    issued.push((assertion, access_token.clone()));
    json_response(
        hyper::StatusCode::OK,
        &json!({"access_token": access_token, "expires_in": TOKEN_SECONDS, "token_type": "Bearer"}),
    )
}

/// Whether a request carries an access token issued by [`token`].
pub(crate) fn authorized(issued: &std::sync::Mutex<Vec<(String, String)>>, headers: &HeaderMap) -> bool {
    let bearer = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    bearer.is_some_and(|token| !token.is_empty() && issued.lock().unwrap().iter().any(|(_, t)| t == token))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(v: Value) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    }

    #[test]
    fn assertions_are_checked_for_their_claims() {
        let aud = "http://127.0.0.1:1/token";
        let header = part(json!({"alg": "RS256", "typ": "JWT", "kid": "k"}));
        let claims = |scope: &str, exp: u64| {
            part(json!({"iss": "a@p.iam.gserviceaccount.com", "scope": scope, "aud": aud, "iat": 100, "exp": exp}))
        };
        let jwt = |claims: String| format!("{header}.{claims}.c2ln");
        assert_eq!(check_assertion(&jwt(claims(CLOUD_PLATFORM_SCOPE, 3700)), aud), Ok(()));
        assert!(check_assertion(&jwt(claims("email", 3700)), aud).unwrap_err().contains("scope"));
        assert!(check_assertion(&jwt(claims(CLOUD_PLATFORM_SCOPE, 7200)), aud).unwrap_err().contains("hour"));
        assert!(check_assertion(&jwt(claims(CLOUD_PLATFORM_SCOPE, 3700)), "http://other/token").is_err());
        assert!(check_assertion("a.b", aud).is_err());
    }
}
