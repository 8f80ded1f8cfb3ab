//! CORS (settings `serve.cors_origins`), as LightRAG's server does it with
//! Starlette's middleware: any origin by default (`*`), any method and
//! header. A preflight is answered before the key check (browsers send it
//! without credentials); the answer itself still needs the key.

use hyper::body::Incoming;
use hyper::header::{
    HeaderValue, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_HEADERS,
    ACCESS_CONTROL_REQUEST_METHOD, ORIGIN, VARY,
};
use hyper::{Method, Request, StatusCode};

use crate::http::{self, ApiError, Body, Resp};

const METHODS: &str = "GET, POST, PUT, PATCH, DELETE, OPTIONS";
/// How long a browser may keep a preflight's answer (seconds).
const MAX_AGE: &str = "600";

pub(crate) struct Cors {
    any: bool,
    origins: Vec<String>,
}

impl Cors {
    /// `origins` as checked by the settings: `*` or origins.
    pub(crate) fn new(origins: &[String]) -> Cors {
        Cors { any: origins.iter().any(|o| o == "*"), origins: origins.to_vec() }
    }

    /// The `Access-Control-Allow-Origin` value for a request from `origin`,
    /// if it is allowed.
    fn allow(&self, origin: &HeaderValue) -> Option<HeaderValue> {
        if self.any {
            return Some(HeaderValue::from_static("*"));
        }
        let origin_text = origin.to_str().ok()?;
        self.origins.iter().any(|o| o.eq_ignore_ascii_case(origin_text)).then(|| origin.clone())
    }

    /// The answer to a preflight (`OPTIONS` with `Origin` and
    /// `Access-Control-Request-Method`); `None` for any other request.
    pub(crate) fn preflight(&self, req: &Request<Incoming>) -> Option<Resp> {
        let headers = req.headers();
        if req.method() != Method::OPTIONS || !headers.contains_key(ACCESS_CONTROL_REQUEST_METHOD) {
            return None;
        }
        let origin = headers.get(ORIGIN)?;
        let Some(allowed) = self.allow(origin) else {
            let shown = String::from_utf8_lossy(origin.as_bytes());
            let message = format!("origin `{shown}` is not allowed (settings serve.cors_origins)");
            return Some(ApiError::new(StatusCode::FORBIDDEN, message).into_response());
        };
        let mut resp = http::with_type(StatusCode::NO_CONTENT, "text/plain", Body::Full(Default::default()));
        let h = resp.headers_mut();
        h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, allowed);
        h.insert(ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(METHODS));
        // Any header the browser asks for (Starlette's `allow_headers=["*"]`).
        let asked = headers.get(ACCESS_CONTROL_REQUEST_HEADERS).cloned();
        h.insert(ACCESS_CONTROL_ALLOW_HEADERS, asked.unwrap_or(HeaderValue::from_static("*")));
        h.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(MAX_AGE));
        if !self.any {
            h.insert(VARY, HeaderValue::from_static("Origin"));
        }
        Some(resp)
    }

    /// Adds the CORS headers to the answer to a request from an allowed `origin`.
    pub(crate) fn decorate(&self, origin: Option<&HeaderValue>, resp: &mut Resp) {
        let Some(allowed) = origin.and_then(|o| self.allow(o)) else { return };
        let h = resp.headers_mut();
        h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, allowed);
        h.insert(ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static("*"));
        if !self.any {
            h.append(VARY, HeaderValue::from_static("Origin"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_listed_origins_are_echoed() {
        let cors = Cors::new(&["http://localhost:5173".to_string()]);
        let allowed = cors.allow(&HeaderValue::from_static("http://localhost:5173"));
        assert_eq!(allowed.as_ref().map(|v| v.to_str().unwrap()), Some("http://localhost:5173"));
        assert_eq!(cors.allow(&HeaderValue::from_static("http://evil.example")), None);
        let any = Cors::new(&["*".to_string()]);
        assert_eq!(any.allow(&HeaderValue::from_static("http://x.example")).unwrap(), "*");
        assert_eq!(Cors::new(&[]).allow(&HeaderValue::from_static("http://x.example")), None);
    }
}
