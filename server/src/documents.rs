//! LightRAG's document paths: upload, insert text, scan, list with status,
//! delete, pipeline status. A document is a file in the input folder; adding
//! or deleting one queues an `update` run (graphrag_project), whose progress
//! `document_status.parquet` records and these paths report.

use std::collections::BTreeMap;
use std::fs;
use std::sync::Arc;

use graphrag_engine::doc_status::{self, DocStatus};
use hyper::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::http::{self, ApiError, Resp, Result};
use crate::multipart;
use crate::state::State;

/// The extensions an upload may have (the formats `load_documents` reads).
pub const EXTENSIONS: [&str; 9] = ["txt", "md", "markdown", "csv", "json", "jsonl", "parquet", "pdf", "docx"];
const MAX_NAME_BYTES: usize = 200;

/// A file name safe to create inside the input folder: one plain name (no
/// folder, no `..`, not hidden), with a readable extension.
pub fn safe_name(raw: &str) -> Result<String> {
    let name = raw.trim();
    if name.is_empty() {
        return Err(ApiError::bad_request("the file name is empty"));
    }
    if name.contains('/') || name.contains('\\') || name.contains("..") || name.starts_with('.') {
        return Err(ApiError::bad_request(format!(
            "file name `{}` is not allowed: give a plain file name (no folders, no `..`, not starting with `.`)",
            name.escape_debug()
        )));
    }
    if name.chars().any(|c| c.is_control() || matches!(c, ':' | '*' | '?' | '"' | '<' | '>' | '|')) {
        return Err(ApiError::bad_request(format!(
            "file name `{}` has a character that is not allowed (control characters or : * ? \" < > |)",
            name.escape_debug()
        )));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(ApiError::bad_request(format!("the file name is longer than {MAX_NAME_BYTES} bytes")));
    }
    let ext = name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    if !EXTENSIONS.contains(&ext.as_str()) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("unsupported file type `{}`: expected one of {}", name.escape_debug(), EXTENSIONS.join(", ")),
        ));
    }
    Ok(name.to_string())
}

fn track_id(prefix: &str, seed: &[u8]) -> String {
    let hash = hex(&Sha256::digest(seed)[..6]);
    format!("{prefix}_{}_{hash}", chrono::Utc::now().format("%Y%m%d_%H%M%S"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes a new input document. Same name and same bytes: nothing to do
/// (`duplicated`); same name, other bytes: 409 unless `overwrite`.
fn write_document(state: &State, name: &str, bytes: &[u8], overwrite: bool) -> Result<&'static str> {
    let path = state.input_dir.join(name);
    {
        let mut writing = state.writing.lock().unwrap_or_else(|e| e.into_inner());
        if writing.contains_key(name) {
            return Err(ApiError::new(StatusCode::CONFLICT, format!("`{name}` is being written by another request")));
        }
        writing.insert(name.to_string(), std::time::Instant::now());
    }
    let result = (|| {
        if let Ok(existing) = fs::read(&path) {
            if existing == bytes {
                return Ok("duplicated");
            }
            if !overwrite {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    format!("a different document named `{name}` exists already: delete it first, or upload with ?overwrite=true to replace it"),
                ));
            }
        }
        let temp = state.input_dir.join(format!(".upload-{}.tmp", hex(&Sha256::digest(name.as_bytes())[..8])));
        fs::write(&temp, bytes).and_then(|_| fs::rename(&temp, &path)).map_err(|e| {
            let _ = fs::remove_file(&temp);
            ApiError::from(anyhow::anyhow!("writing {name} into the input folder: {e}"))
        })?;
        Ok("success")
    })();
    state.writing.lock().unwrap_or_else(|e| e.into_inner()).remove(name);
    result
}

fn queued(state: &Arc<State>, names: &[String]) {
    let mut p = state.pipeline.lock().unwrap_or_else(|e| e.into_inner());
    for n in names {
        if !p.queued_files.contains(n) {
            p.queued_files.push(n.clone());
        }
    }
    drop(p);
    state.queue_update(&names.join(", "));
}

fn insert_response(status: &str, message: String, track: String) -> Result<Resp> {
    http::json(json!({"status": status, "message": message, "track_id": track}))
}

/// `POST /documents/upload`: multipart, field `file` (one or more).
pub fn upload(state: &Arc<State>, content_type: Option<&str>, body: &[u8], overwrite: bool) -> Result<Resp> {
    let files = multipart::files(content_type, body)?;
    if files.is_empty() {
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "no `file` field in the multipart body"));
    }
    let mut written = Vec::new();
    let mut duplicated = Vec::new();
    let checked: Vec<(String, &[u8])> =
        files.iter().map(|f| Ok((safe_name(&f.filename)?, f.data))).collect::<Result<_>>()?;
    for (name, data) in checked {
        if data.is_empty() {
            return Err(ApiError::bad_request(format!("`{name}` is empty")));
        }
        match write_document(state, &name, data, overwrite)? {
            "duplicated" => duplicated.push(name),
            _ => written.push(name),
        }
    }
    let track = track_id("upload", written.join("/").as_bytes());
    if written.is_empty() {
        return insert_response(
            "duplicated",
            format!("{} already in the input folder with the same content", duplicated.join(", ")),
            track,
        );
    }
    queued(state, &written);
    insert_response(
        "success",
        format!("File(s) {} uploaded successfully. Processing will continue in background.", written.join(", ")),
        track,
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InsertText {
    text: String,
    #[serde(default)]
    file_source: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InsertTexts {
    texts: Vec<String>,
    #[serde(default)]
    file_sources: Option<Vec<String>>,
}

/// The input file name of an inserted text: its `file_source` as a .txt,
/// or one named by its content's hash.
fn text_name(text: &str, source: Option<&str>) -> Result<String> {
    match source.map(str::trim).filter(|s| !s.is_empty()) {
        None => Ok(format!("text-{}.txt", hex(&Sha256::digest(text.as_bytes())[..8]))),
        Some(s) => {
            let with_ext = if s.to_ascii_lowercase().ends_with(".txt") || s.to_ascii_lowercase().ends_with(".md") {
                s.to_string()
            } else {
                format!("{s}.txt")
            };
            safe_name(&with_ext)
        }
    }
}

fn insert(state: &Arc<State>, texts: &[(String, Option<String>)]) -> Result<Resp> {
    let mut names = Vec::new();
    for (text, source) in texts {
        if text.trim().is_empty() {
            return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "`text` is empty"));
        }
        names.push(text_name(text, source.as_deref())?);
    }
    let mut written = Vec::new();
    for ((text, _), name) in texts.iter().zip(&names) {
        if write_document(state, name, text.as_bytes(), false)? == "success" {
            written.push(name.clone());
        }
    }
    let track = track_id("insert", names.join("/").as_bytes());
    if written.is_empty() {
        return insert_response("duplicated", "the text(s) are in the input folder already".into(), track);
    }
    queued(state, &written);
    insert_response(
        "success",
        format!("Text(s) saved as {}. Processing will continue in background.", written.join(", ")),
        track,
    )
}

/// `POST /documents/text`.
pub fn insert_text(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: InsertText = http::parse_json(body)?;
    insert(state, &[(req.text, req.file_source)])
}

/// `POST /documents/texts`.
pub fn insert_texts(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: InsertTexts = http::parse_json(body)?;
    if req.texts.is_empty() {
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "`texts` is empty"));
    }
    let sources = req.file_sources.unwrap_or_default();
    if !sources.is_empty() && sources.len() != req.texts.len() {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("`file_sources` has {} entries for {} texts", sources.len(), req.texts.len()),
        ));
    }
    let pairs: Vec<(String, Option<String>)> =
        req.texts.into_iter().enumerate().map(|(i, t)| (t, sources.get(i).cloned())).collect();
    insert(state, &pairs)
}

/// `POST /documents/scan`: index what the input folder holds now.
pub fn scan(state: &Arc<State>) -> Result<Resp> {
    state.queue_update("scan of the input folder");
    http::json(json!({
        "status": "scanning_started",
        "message": "Scanning the input folder; new, changed and removed files are indexed in the background.",
        "track_id": track_id("scan", b"scan"),
    }))
}

/// One document as LightRAG's `DocStatusResponse`.
fn doc_json(state: &State, d: &DocStatus) -> Value {
    let path = state.input_dir.join(&d.title);
    let summary = fs::read(&path)
        .ok()
        .filter(|_| matches!(d.title.rsplit_once('.').map(|(_, e)| e), Some("txt" | "md" | "markdown")))
        // A byte order mark is no part of the text (Windows editors write one).
        .map(|b| {
            String::from_utf8_lossy(&b[..b.len().min(400)])
                .trim_start_matches('\u{feff}')
                .chars()
                .take(100)
                .collect::<String>()
        })
        .unwrap_or_default();
    json!({
        "id": d.id,
        "content_summary": summary,
        "content_length": fs::metadata(&path).map(|m| m.len()).ok(),
        "status": d.status.as_str(),
        "created_at": d.created_at,
        "updated_at": d.updated_at,
        "track_id": null,
        "chunks_count": d.text_unit_ids.len(),
        "error_msg": d.error,
        "metadata": {"run_seconds": d.run_seconds, "in_input_folder": path.exists()},
        "file_path": d.title,
    })
}

/// Every document: the status table's rows, and input files no run has
/// seen yet as `pending`.
fn all_documents(state: &State) -> Result<Vec<Value>> {
    let rows = doc_status::read(&state.output_dir)?;
    let known: std::collections::HashSet<&str> = rows.values().map(|d| d.title.as_str()).collect();
    let mut out: Vec<Value> = rows.values().map(|d| doc_json(state, d)).collect();
    let mut new_files: Vec<String> = fs::read_dir(&state.input_dir)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", state.input_dir.display()))?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.') && !known.contains(n.as_str()))
        .collect();
    new_files.sort();
    for name in new_files {
        let meta = fs::metadata(state.input_dir.join(&name)).ok();
        let id = format!("file-{}", hex(&Sha256::digest(name.as_bytes())[..8]));
        out.push(json!({
            "id": id,
            "content_summary": "",
            "content_length": meta.map(|m| m.len()),
            "status": "pending",
            "created_at": null,
            "updated_at": null,
            "track_id": null,
            "chunks_count": 0,
            "error_msg": null,
            "metadata": {"in_input_folder": true},
            "file_path": name,
        }));
    }
    Ok(out)
}

const STATUSES: [&str; 4] = ["pending", "processing", "processed", "failed"];

/// `GET /documents`: `{"statuses": {status: [document]}}`.
pub fn list(state: &State) -> Result<Resp> {
    let mut statuses: BTreeMap<&str, Vec<Value>> = STATUSES.iter().map(|s| (*s, Vec::new())).collect();
    for d in all_documents(state)? {
        let status = d["status"].as_str().unwrap_or("pending").to_string();
        if let Some(list) = statuses.get_mut(status.as_str()) {
            list.push(d);
        }
    }
    http::json(json!({ "statuses": statuses }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PageRequest {
    #[serde(default)]
    status_filter: Option<String>,
    #[serde(default = "one")]
    page: usize,
    #[serde(default = "fifty")]
    page_size: usize,
    #[serde(default = "updated_at")]
    sort_field: String,
    #[serde(default = "desc")]
    sort_direction: String,
}

fn one() -> usize {
    1
}
fn fifty() -> usize {
    50
}
fn updated_at() -> String {
    "updated_at".into()
}
fn desc() -> String {
    "desc".into()
}

/// `POST /documents/paginated`.
pub fn paginated(state: &State, body: &[u8]) -> Result<Resp> {
    let req: PageRequest = if body.is_empty() { http::parse_json(b"{}")? } else { http::parse_json(body)? };
    let unprocessable = |m: String| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, m);
    if req.page == 0 || !(10..=200).contains(&req.page_size) {
        return Err(unprocessable("`page` must be at least 1 and `page_size` from 10 to 200".into()));
    }
    if let Some(s) = req.status_filter.as_deref().filter(|s| !STATUSES.contains(s)) {
        return Err(unprocessable(format!("unknown status_filter `{s}`: expected one of {}", STATUSES.join(", "))));
    }
    if !["created_at", "updated_at", "id", "file_path"].contains(&req.sort_field.as_str()) {
        return Err(unprocessable(format!(
            "unknown sort_field `{}`: expected created_at, updated_at, id or file_path",
            req.sort_field
        )));
    }
    if !["asc", "desc"].contains(&req.sort_direction.as_str()) {
        return Err(unprocessable("`sort_direction` must be asc or desc".into()));
    }
    let all = all_documents(state)?;
    let mut counts: BTreeMap<&str, usize> = STATUSES.iter().map(|s| (*s, 0)).collect();
    for d in &all {
        *counts.entry(STATUSES.iter().find(|s| d["status"] == **s).copied().unwrap_or("pending")).or_default() += 1;
    }
    let mut docs: Vec<Value> =
        all.into_iter().filter(|d| req.status_filter.as_deref().is_none_or(|s| d["status"] == s)).collect();
    let key = |d: &Value| d[req.sort_field.as_str()].as_str().unwrap_or_default().to_string();
    docs.sort_by_key(key);
    if req.sort_direction == "desc" {
        docs.reverse();
    }
    let total = docs.len();
    let pages = total.div_ceil(req.page_size).max(1);
    let page: Vec<Value> = docs.into_iter().skip((req.page - 1) * req.page_size).take(req.page_size).collect();
    counts.insert("all", total);
    http::json(json!({
        "documents": page,
        "pagination": {
            "page": req.page,
            "page_size": req.page_size,
            "total_count": total,
            "total_pages": pages,
            "has_next": req.page < pages,
            "has_prev": req.page > 1,
        },
        "status_counts": counts,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteRequest {
    doc_ids: Vec<String>,
    /// LightRAG's flag; the file is always removed here, as the index is
    /// what the input folder holds.
    #[serde(default)]
    #[allow(dead_code)]
    delete_file: bool,
    #[serde(default)]
    #[allow(dead_code)]
    delete_llm_cache: bool,
}

/// `DELETE /documents/delete_document`: removes the documents' input files
/// and queues the update that takes them out of the index.
pub fn delete(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: DeleteRequest = http::parse_json(body)?;
    if req.doc_ids.is_empty() {
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "`doc_ids` is empty"));
    }
    let all = all_documents(state)?;
    let mut files = Vec::new();
    let mut unknown = Vec::new();
    for id in &req.doc_ids {
        match all.iter().find(|d| d["id"] == id.as_str()) {
            Some(d) => files.push(d["file_path"].as_str().unwrap_or_default().to_string()),
            None => unknown.push(id.clone()),
        }
    }
    if !unknown.is_empty() {
        return Err(ApiError::not_found(format!("no document with id {}", unknown.join(", "))));
    }
    for name in &files {
        // Only names that are plain files of the input folder are removed.
        let name = safe_name(name).map_err(|_| ApiError::bad_request(format!("cannot delete `{name}`")))?;
        let path = state.input_dir.join(&name);
        if path.exists() {
            fs::remove_file(&path).map_err(|e| anyhow::anyhow!("removing {name}: {e}"))?;
        }
    }
    state.queue_update(&format!("deleted {}", files.join(", ")));
    http::json(json!({
        "status": "deletion_started",
        "message": format!("Document(s) {} removed from the input folder; the index drops them in the background.", files.join(", ")),
        "doc_id": req.doc_ids.join(", "),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_and_readable() {
        assert_eq!(safe_name(" notes.txt ").unwrap(), "notes.txt");
        assert_eq!(safe_name("Report 2026 (draft).PDF").unwrap(), "Report 2026 (draft).PDF");
        for bad in
            ["", "../x.txt", "a/b.txt", "..\\x.txt", "/etc/passwd", ".env", "x.exe", "x", "a\u{0}.txt", "a:b.txt"]
        {
            assert!(safe_name(bad).is_err(), "{bad:?}");
        }
        assert!(safe_name(&format!("{}.txt", "a".repeat(300))).is_err());
        assert_eq!(text_name("hello", Some("note")).unwrap(), "note.txt");
        assert!(text_name("hello", None).unwrap().starts_with("text-"));
        assert!(text_name("hello", Some("../../x")).is_err());
    }
}
