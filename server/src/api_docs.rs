//! `/docs`: a small page that renders `/openapi.json` (no CDN, no
//! framework), and LightRAG's `/ui/customization` (none configured).

use hyper::header::{HeaderValue, CACHE_CONTROL};
use serde_json::json;

use crate::http::{self, Resp, Result};

const PAGE: &str = include_str!("api_docs.html");

/// `GET /docs`.
pub fn page() -> Resp {
    http::bytes("text/html; charset=utf-8", PAGE)
}

/// `GET /ui/customization`: LightRAG's answer without a customisation
/// bundle (its web UI asks on load).
pub fn ui_customization() -> Result<Resp> {
    let mut r = http::json(json!({
        "customized": false,
        "brand": {"title": "graphrag-rs", "description": "graphrag-rs index served through LightRAG's API"},
    }))?;
    r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(r)
}
