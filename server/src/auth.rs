//! LightRAG's auth paths, as its web UI uses them: `/auth-status` and
//! `/login` hand out a guest token, `/auth/verify` checks the API key.
//!
//! graphrag-rs has one credential, the API key; there are no user accounts
//! (LightRAG's `AUTH_ACCOUNTS`), so it always answers as a LightRAG server
//! without accounts does: guest mode. The guest token is a JWT-shaped
//! token (the UI reads its `exp`) that grants nothing by itself: without a
//! key every path is open anyway, and with a key every request must carry
//! the key (`X-API-Key`, which LightRAG's UI asks for and sends, or a
//! bearer token). A request that presents a guest token without the key
//! is refused with LightRAG's 403 details, on which the UI opens its API
//! key dialog (a 401 would send it back to its login page, in a loop).

use base64::Engine;
use hyper::header::HeaderMap;
use hyper::StatusCode;
use serde_json::json;

use crate::http::{self, ApiError, Resp, Result};
use crate::state::State;

/// How long a guest token is valid (LightRAG's default guest expiry).
const GUEST_HOURS: i64 = 24;

/// An unsigned JWT `{"sub": "guest", "role": "guest", "exp": …}`: the UI
/// decodes it to know the session is a guest's and when to renew it.
pub fn guest_token() -> String {
    let b64 = |v: serde_json::Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let exp = chrono::Utc::now().timestamp() + GUEST_HOURS * 3600;
    let header = b64(json!({"alg": "none", "typ": "JWT"}));
    let payload = b64(json!({"sub": "guest", "role": "guest", "exp": exp, "metadata": {"auth_mode": "disabled"}}));
    format!("{header}.{payload}.")
}

/// Whether a bearer token is one of [`guest_token`]'s.
fn is_guest_token(token: &str) -> bool {
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(""), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .is_some_and(|v| v["role"] == "guest")
}

/// The answer to a request without the key: LightRAG's 403 details for its
/// web UI (a guest token and no valid key), 401 for every other client.
pub fn refusal(headers: &HeaderMap) -> ApiError {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    refusal_of(header("authorization").and_then(bearer_token), header("x-api-key"))
}

/// The token of an `Authorization: Bearer <token>` value (the scheme in any case).
pub(crate) fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

fn refusal_of(bearer: Option<&str>, x_api_key: Option<&str>) -> ApiError {
    if bearer.is_some_and(is_guest_token) {
        let detail = if x_api_key.is_some() { "Invalid API Key" } else { "API Key required" };
        return ApiError::new(StatusCode::FORBIDDEN, detail);
    }
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "an API key is required: send it as the X-API-Key header (or Authorization: Bearer)",
    )
}

fn versions() -> serde_json::Value {
    json!({
        "core_version": env!("CARGO_PKG_VERSION"),
        "api_version": env!("CARGO_PKG_VERSION"),
        "webui_title": "graphrag-rs",
        "webui_description": "graphrag-rs index served through LightRAG's API",
        "ai_content_notice_enabled": false,
    })
}

/// `GET /auth-status` (public): guest mode, with a guest token.
pub fn status(state: &State) -> Result<Resp> {
    let mut out = versions();
    let o = out.as_object_mut().expect("an object");
    o.insert("auth_configured".into(), json!(false));
    o.insert("access_token".into(), json!(guest_token()));
    o.insert("token_type".into(), json!("bearer"));
    o.insert("auth_mode".into(), json!("disabled"));
    let message = if state.api_key.is_some() {
        "No user accounts: guest access; every request needs the API key (X-API-Key)."
    } else {
        "Authentication is disabled. Using guest access."
    };
    o.insert("message".into(), json!(message));
    http::json(out)
}

/// `POST /login` (public): there are no accounts, so any form gets the
/// guest token, as LightRAG answers without `AUTH_ACCOUNTS`.
pub fn login(state: &State) -> Result<Resp> {
    status(state)
}

/// `GET /auth/verify` (behind the key check): the credentials are good.
pub fn verify() -> Result<Resp> {
    http::json(json!({"status": "ok"}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_read_in_any_case() {
        for value in ["Bearer k1", "bearer k1", "BEARER  k1 ", " Bearer k1"] {
            assert_eq!(bearer_token(value), Some("k1"), "{value:?}");
        }
        assert_eq!(bearer_token("Basic k1"), None);
        assert_eq!(bearer_token("Bearerk1"), None);
    }

    #[test]
    fn guest_tokens_are_recognised_and_grant_nothing() {
        let token = guest_token();
        assert_eq!(token.split('.').count(), 3);
        assert!(is_guest_token(&token));
        assert!(!is_guest_token("the-api-key"));
        assert!(!is_guest_token("a.b.c"));
        assert_eq!(refusal_of(Some(&token), None).status, StatusCode::FORBIDDEN);
        assert_eq!(refusal_of(Some(&token), None).message, "API Key required");
        assert_eq!(refusal_of(Some(&token), Some("wrong")).message, "Invalid API Key");
        assert_eq!(refusal_of(Some("wrong"), None).status, StatusCode::UNAUTHORIZED);
        assert_eq!(refusal_of(None, None).status, StatusCode::UNAUTHORIZED);
    }
}
