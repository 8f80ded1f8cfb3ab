//! The web UI's files, embedded in the binary (plain HTML, CSS and
//! JavaScript: no build step). `vendor/` holds two libraries copied
//! unchanged from their npm packages (see vendor/README.md): marked renders
//! answers' Markdown, DOMPurify sanitises the HTML it makes.

use hyper::header::{HeaderValue, CACHE_CONTROL, LOCATION};
use hyper::StatusCode;

use crate::http::{self, ApiError, Body, Resp, Result};

const INDEX: &str = include_str!("../webui/index.html");
const APP: &str = include_str!("../webui/app.js");
const STYLE: &str = include_str!("../webui/style.css");
const MARKED: &str = include_str!("../webui/vendor/marked.umd.js");
const PURIFY: &str = include_str!("../webui/vendor/purify.min.js");

pub fn redirect() -> Resp {
    let mut r =
        http::with_type(StatusCode::FOUND, "text/plain", Body::Full(http_body_util::Full::new("/webui/".into())));
    r.headers_mut().insert(LOCATION, HeaderValue::from_static("/webui/"));
    r
}

pub fn file(path: &str) -> Result<Resp> {
    let (content_type, text) = match path {
        "/webui" | "/webui/" | "/webui/index.html" => ("text/html; charset=utf-8", INDEX),
        "/webui/app.js" => ("text/javascript; charset=utf-8", APP),
        "/webui/style.css" => ("text/css; charset=utf-8", STYLE),
        "/webui/vendor/marked.umd.js" => ("text/javascript; charset=utf-8", MARKED),
        "/webui/vendor/purify.min.js" => ("text/javascript; charset=utf-8", PURIFY),
        _ => return Err(ApiError::not_found(format!("no such file: {path}"))),
    };
    let mut r = http::bytes(content_type, text);
    r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(r)
}
