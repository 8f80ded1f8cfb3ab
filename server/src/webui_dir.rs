//! `serve --webui-dir DIR`: a built web UI from a folder, served at
//! `/webui/` in place of the built-in one — LightRAG's own UI (the
//! `lightrag/api/webui` folder of the lightrag-hku wheel) talks to the
//! LightRAG-compatible paths unchanged. Files are read from the folder on
//! each request (it is the operator's, and small); names are plain relative
//! paths under it, nothing outside it is served.

use std::path::{Component, Path};

use hyper::header::{HeaderValue, CACHE_CONTROL};
use hyper::StatusCode;

use crate::http::{self, ApiError, Body, Resp, Result};

/// LightRAG's index.html carries this comment where its server injects the
/// UI's runtime configuration (an empty one: the API is at the root).
const RUNTIME_CONFIG_PLACEHOLDER: &str = "<!-- __LIGHTRAG_RUNTIME_CONFIG__ -->";
const RUNTIME_CONFIG: &str = "<script>window.__LIGHTRAG_CONFIG__ = {};</script>";
/// The largest file served (the biggest of LightRAG's bundles is ~2 MB).
const MAX_FILE_BYTES: u64 = 32 << 20;

fn content_type(path: &str) -> &'static str {
    match path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).as_deref() {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("json") => "application/json",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("ico") => "image/x-icon",
        Some("woff") => "font/woff",
        Some("woff2") => "font/woff2",
        Some("ttf") => "font/ttf",
        Some("wasm") => "application/wasm",
        _ => "application/octet-stream",
    }
}

/// `path` under `/webui/` from `dir`; the folder's index.html for the UI's
/// own routes (a path without an extension), as a single-page app expects.
pub fn file(dir: &Path, path: &str) -> Result<Resp> {
    let rel = path.strip_prefix("/webui").unwrap_or(path).trim_start_matches('/');
    let rel = if rel.is_empty() || !rel.rsplit('/').next().unwrap_or("").contains('.') { "index.html" } else { rel };
    let plain = Path::new(rel).components().all(|c| matches!(c, Component::Normal(_)));
    if !plain {
        return Err(ApiError::not_found(format!("no such file: {path}")));
    }
    let full = dir.join(rel);
    let meta = std::fs::metadata(&full).map_err(|_| ApiError::not_found(format!("no such file: {path}")))?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return Err(ApiError::not_found(format!("no such file: {path}")));
    }
    let bytes = std::fs::read(&full).map_err(|e| anyhow::anyhow!("reading {}: {e}", full.display()))?;
    let kind = content_type(rel);
    let (body, cache) = if rel == "index.html" {
        let html = String::from_utf8_lossy(&bytes).replacen(RUNTIME_CONFIG_PLACEHOLDER, RUNTIME_CONFIG, 1);
        (bytes::Bytes::from(html), "no-cache")
    } else if rel.starts_with("assets/") {
        // Vite's assets carry their content hash in their names.
        (bytes::Bytes::from(bytes), "public, max-age=31536000, immutable")
    } else {
        (bytes::Bytes::from(bytes), "no-cache")
    };
    let mut r = http::with_type(StatusCode::OK, kind, Body::Full(http_body_util::Full::new(body)));
    r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_files_under_the_folder_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("assets")).unwrap();
        std::fs::write(dir.path().join("index.html"), format!("<head>{RUNTIME_CONFIG_PLACEHOLDER}</head>")).unwrap();
        std::fs::write(dir.path().join("assets/app-1.js"), "x").unwrap();
        std::fs::write(dir.path().parent().unwrap().join("secret.txt"), "no").ok();
        let index = file(dir.path(), "/webui/").unwrap();
        assert_eq!(index.headers()["content-type"], "text/html; charset=utf-8");
        assert!(file(dir.path(), "/webui/documents").is_ok(), "a UI route gets index.html");
        let js = file(dir.path(), "/webui/assets/app-1.js").unwrap();
        assert_eq!(js.headers()["content-type"], "text/javascript; charset=utf-8");
        for bad in
            ["/webui/../secret.txt", "/webui/assets/../../secret.txt", "/webui/missing.js", "/webui//etc/passwd.x"]
        {
            assert!(file(dir.path(), bad).is_err(), "{bad}");
        }
    }
}
