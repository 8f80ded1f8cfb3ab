//! LightRAG's document paths: upload, insert text, scan, list with status,
//! delete, pipeline status. A document is a file of the project's input
//! (a folder, or objects under a bucket prefix: `graphrag_project::documents`
//! reads and writes both); adding or deleting one queues an `update` run
//! (graphrag_project), whose progress `document_status.parquet` records and
//! these paths report.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use graphrag_project::doc_status::DocStatus;
use graphrag_project::documents::{Added, InputDocument};
use graphrag_project::InputFiles;
use hyper::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::http::{self, ApiError, Resp, Result};
use crate::multipart;
use crate::state::{now, summary, State};
use crate::uploads::FailedUpload;

const MAX_NAME_BYTES: usize = 200;

/// A file name safe to create inside the input folder: one plain name (no
/// folder, no `..`, not hidden, no control or reserved characters).
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
    Ok(name.to_string())
}

/// The files the project's `input` settings read.
fn input_files(state: &State) -> Result<InputFiles> {
    Ok(InputFiles::from_settings(&state.settings.input)?)
}

/// 415 for a file the project's input settings would not read: accepting
/// it would leave it `pending` for ever.
fn readable(files: &InputFiles, name: &str) -> Result<()> {
    if files.reads(name) {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        format!(
            "`{}` is not read by this project ({}): upload {} files, or change the project's input settings",
            name.escape_debug(),
            files.describe(),
            files.extensions().join(", ")
        ),
    ))
}

fn track_id(prefix: &str, seed: &[u8]) -> String {
    let hash = hex(&Sha256::digest(seed)[..6]);
    format!("{prefix}_{}_{hash}", chrono::Utc::now().format("%Y%m%d_%H%M%S"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A request's own track id: its names and the time, so that two requests
/// never share one.
fn new_track_id(prefix: &str, names: &[String]) -> String {
    let seed = format!("{}{:?}", names.join("/"), std::time::SystemTime::now());
    track_id(prefix, seed.as_bytes())
}

/// The input documents by name.
fn input_documents(state: &State) -> Result<BTreeMap<String, InputDocument>> {
    Ok(state.documents.list()?.into_iter().map(|d| (d.name.clone(), d)).collect())
}

/// The document among `present`'s `candidates` whose bytes are `bytes`:
/// the pipeline would skip a second copy of a content, so it is refused.
/// Only documents of the same size are read.
fn duplicate_of(
    state: &State,
    present: &BTreeMap<String, InputDocument>,
    bytes: &[u8],
    candidates: impl Fn(&str) -> bool,
) -> Result<Option<String>> {
    for doc in present.values() {
        if !candidates(&doc.name) || doc.size != bytes.len() as u64 {
            continue;
        }
        if state.documents.read(&doc.name)?.is_some_and(|b| b == bytes) {
            return Ok(Some(doc.name.clone()));
        }
    }
    Ok(None)
}

/// The id the document lists give an input file: its status row's, or one
/// from its name while no run has seen it.
fn document_id(rows: &BTreeMap<String, DocStatus>, name: &str) -> String {
    rows.values()
        .find(|d| d.title == name)
        .map(|d| d.id.clone())
        .unwrap_or_else(|| format!("file-{}", hex(&Sha256::digest(name.as_bytes())[..8])))
}

/// 409: LightRAG's answer to a name the input has already.
fn name_taken(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        format!("the input already contains `{name}`: delete that document first, or upload with ?overwrite=true to replace it"),
    )
}

/// Writes a new input document; a document of the same name is a 409
/// unless `overwrite` (LightRAG: delete it first).
fn write_document(state: &State, name: &str, bytes: &[u8], overwrite: bool) -> Result<()> {
    {
        let mut writing = state.writing.lock().unwrap_or_else(|e| e.into_inner());
        if writing.contains_key(name) {
            return Err(ApiError::new(StatusCode::CONFLICT, format!("`{name}` is being written by another request")));
        }
        writing.insert(name.to_string(), std::time::Instant::now());
    }
    let result = match state.documents.add(name, bytes, overwrite) {
        Ok(Added::Written) => Ok(()),
        Ok(Added::NameTaken) => Err(name_taken(name)),
        Err(e) => Err(ApiError::from(e.context(format!("writing {name} into {}", state.documents.describe())))),
    };
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

/// Writes accepted documents (name, bytes), in order: a content another
/// input file has already is not written but recorded `failed` with the
/// reason, under the request's track id. Then queues the update; answers
/// LightRAG's `InsertResponse`.
fn accept(state: &Arc<State>, prefix: &str, docs: Vec<(String, &[u8])>, overwrite: bool, note: &str) -> Result<Resp> {
    let names: Vec<String> = docs.iter().map(|(n, _)| n.clone()).collect();
    let track = new_track_id(prefix, &names);
    let mut written = Vec::new();
    let mut duplicates = Vec::new();
    let present = input_documents(state)?;
    if let Some((name, _)) = docs.iter().find(|(name, _)| !overwrite && present.contains_key(name)) {
        return Err(name_taken(name));
    }
    for (name, bytes) in docs {
        if let Some(earlier) = duplicate_of(state, &present, bytes, |other| !overwrite || other != name)? {
            let rows = state.document_statuses()?;
            let original = document_id(&rows, &earlier);
            let failure = FailedUpload {
                id: format!("dup-{}", hex(&Sha256::digest(format!("{track}/{name}").as_bytes())[..8])),
                file_path: name.clone(),
                content_length: bytes.len(),
                summary: summary(bytes),
                error: format!("duplicate: content already exists as `{earlier}`. Original doc_id: {original}"),
                created_at: now(),
                track_id: track.clone(),
                metadata: json!({"is_duplicate": true, "original_doc_id": original, "original_file_path": earlier}),
            };
            duplicates.push(format!("{name} (same content as {earlier})"));
            state.uploads.lock().unwrap_or_else(|e| e.into_inner()).fail(failure);
            continue;
        }
        write_document(state, &name, bytes, overwrite)?;
        written.push(name);
    }
    state.uploads.lock().unwrap_or_else(|e| e.into_inner()).track(&track, &written);
    if !written.is_empty() {
        queued(state, &written);
    }
    let (status, message) = match (written.is_empty(), duplicates.is_empty()) {
        (false, true) => {
            ("success", format!("{} accepted; processing continues in the background.{note}", written.join(", ")))
        }
        (false, false) => (
            "partial_success",
            format!("{} accepted; failed as duplicates: {}.{note}", written.join(", "), duplicates.join(", ")),
        ),
        (true, _) => ("failure", format!("failed as duplicates: {}", duplicates.join(", "))),
    };
    http::json(json!({"status": status, "message": message, "track_id": track}))
}

/// `POST /documents/upload`: multipart, field `file` (one or more). A file
/// the project does not read is refused (415) before anything is written.
pub fn upload(state: &Arc<State>, content_type: Option<&str>, body: &[u8], overwrite: bool) -> Result<Resp> {
    let files = multipart::files(content_type, body)?;
    if files.is_empty() {
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "no `file` field in the multipart body"));
    }
    let reads = input_files(state)?;
    let mut docs = Vec::new();
    for f in &files {
        let name = safe_name(&f.filename)?;
        readable(&reads, &name)?;
        if f.data.is_empty() {
            return Err(ApiError::bad_request(format!("`{name}` is empty")));
        }
        // A text of white space alone chunks to nothing and would stay `pending` for ever;
        // `/documents/text` refuses the same text.
        let plain_text = matches!(
            name.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).as_deref(),
            Some("txt" | "md" | "markdown")
        );
        if plain_text && std::str::from_utf8(f.data).is_ok_and(|t| t.trim().is_empty()) {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("`{name}` has no text (only white space)"),
            ));
        }
        docs.push((name, f.data));
    }
    accept(state, "upload", docs, overwrite, "")
}

/// LightRAG's per-request chunking (`{strategy, params}`): accepted, not
/// applied; the index is chunked by the project's `chunking` settings.
#[derive(Deserialize)]
struct Chunking {
    #[serde(default)]
    #[allow(dead_code)]
    strategy: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    params: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InsertText {
    text: String,
    #[serde(default)]
    file_source: Option<String>,
    #[serde(default)]
    chunking: Option<Chunking>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InsertTexts {
    texts: Vec<String>,
    #[serde(default)]
    file_sources: Option<Vec<String>>,
    #[serde(default)]
    chunking: Option<Chunking>,
}

/// The input file name of an inserted text: its `file_source` (given the
/// project's text extension unless it has one the project reads), or one
/// named by its content's hash.
fn text_name(reads: &InputFiles, text: &str, source: Option<&str>) -> Result<String> {
    let ext = ["txt", "md"].into_iter().find(|e| reads.reads(&format!("x.{e}"))).ok_or_else(|| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("texts cannot be inserted: this project ({}) reads no .txt or .md files", reads.describe()),
        )
    })?;
    let name = match source.map(str::trim).filter(|s| !s.is_empty()) {
        None => format!("text-{}.{ext}", hex(&Sha256::digest(text.as_bytes())[..8])),
        Some(s) if reads.reads(s) => s.to_string(),
        Some(s) => format!("{s}.{ext}"),
    };
    safe_name(&name)
}

const CHUNKING_NOTE: &str =
    " The request's `chunking` is not applied: the index is chunked by the project's `chunking` settings.";

fn insert(state: &Arc<State>, texts: &[(String, Option<String>)], chunking: bool) -> Result<Resp> {
    let reads = input_files(state)?;
    let mut docs = Vec::new();
    for (text, source) in texts {
        if text.trim().is_empty() {
            return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "`text` is empty"));
        }
        docs.push((text_name(&reads, text, source.as_deref())?, text.as_bytes()));
    }
    accept(state, "insert", docs, false, if chunking { CHUNKING_NOTE } else { "" })
}

/// `POST /documents/text`.
pub fn insert_text(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: InsertText = http::parse_json(body)?;
    insert(state, &[(req.text, req.file_source)], req.chunking.is_some())
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
    insert(state, &pairs, req.chunking.is_some())
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

/// One document as LightRAG's `DocStatusResponse`: its summary from the
/// published index, its length from the input (`present`).
fn doc_json(
    d: &DocStatus,
    present: &BTreeMap<String, InputDocument>,
    summaries: &HashMap<String, String>,
    track: Option<&str>,
) -> Value {
    let file = present.get(&d.title);
    json!({
        "id": d.id,
        "content_summary": summaries.get(&d.title).cloned().unwrap_or_default(),
        "content_length": file.map(|f| f.size),
        "status": d.status.as_str(),
        "created_at": d.created_at,
        "updated_at": d.updated_at,
        "track_id": track,
        "chunks_count": d.text_unit_ids.len(),
        "error_msg": d.error,
        "metadata": {"run_seconds": d.run_seconds, "in_input_folder": file.is_some()},
        "file_path": d.title,
    })
}

/// Every document: the status table's rows, input files no run has seen
/// yet as `pending`, and uploads refused after they were accepted
/// (`failed`).
fn all_documents(state: &State) -> Result<Vec<Value>> {
    let rows = state.document_statuses()?;
    let present = input_documents(state)?;
    let summaries = &state.snapshot().summaries;
    let uploads = state.uploads.lock().unwrap_or_else(|e| e.into_inner());
    let known: HashSet<&str> = rows.values().map(|d| d.title.as_str()).collect();
    let mut out: Vec<Value> =
        rows.values().map(|d| doc_json(d, &present, summaries, uploads.track_of(&d.title))).collect();
    let reads = input_files(state)?;
    for (name, file) in present.iter().filter(|(n, _)| !known.contains(n.as_str())) {
        let created =
            chrono::DateTime::<chrono::Utc>::from(file.modified).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let why = left_out(state, &present, &reads, name, &known)?;
        out.push(json!({
            "id": document_id(&rows, name),
            "content_summary": "",
            "content_length": file.size,
            "status": if why.is_some() { "failed" } else { "pending" },
            "created_at": created,
            "updated_at": created,
            "track_id": uploads.track_of(name),
            "chunks_count": 0,
            "error_msg": why,
            "metadata": {"in_input_folder": true},
            "file_path": name,
        }));
    }
    out.extend(uploads.failed.iter().map(FailedUpload::json));
    Ok(out)
}

/// Why an input file no run has indexed never will be, once no update is
/// running or queued for it (a file put in the folder by hand, or by
/// another process): a type the input settings skip, or the content of
/// another input file (a run keeps one copy). `None`: it waits for a run.
fn left_out(
    state: &State,
    present: &BTreeMap<String, InputDocument>,
    reads: &InputFiles,
    name: &str,
    indexed: &HashSet<&str>,
) -> Result<Option<String>> {
    {
        let p = state.pipeline.lock().unwrap_or_else(|e| e.into_inner());
        if p.busy || p.request_pending || p.queued_files.iter().any(|q| q == name) {
            return Ok(None);
        }
    }
    if !reads.reads(name) {
        return Ok(Some(format!(
            "not read by this project ({}): it reads {}",
            reads.describe(),
            reads.extensions().join(", ")
        )));
    }
    let Some(bytes) = state.documents.read(name)? else { return Ok(None) };
    let earlier = duplicate_of(state, present, &bytes, |other| indexed.contains(other))?;
    Ok(earlier.map(|earlier| format!("duplicate: content already exists as `{earlier}`, which is indexed")))
}

/// The statuses documents have here (LightRAG's parsing, analyzing and
/// preprocessed stages do not exist: a filter on them matches nothing).
const STATUSES: [&str; 4] = ["pending", "processing", "processed", "failed"];
/// Every status LightRAG 1.5.7 accepts in a filter.
const LIGHTRAG_STATUSES: [&str; 7] =
    ["pending", "parsing", "analyzing", "processing", "preprocessed", "processed", "failed"];

fn counts(all: &[Value]) -> BTreeMap<&'static str, usize> {
    let mut counts: BTreeMap<&str, usize> = STATUSES.iter().map(|s| (*s, 0)).collect();
    for d in all {
        *counts.entry(STATUSES.iter().find(|s| d["status"] == **s).copied().unwrap_or("pending")).or_default() += 1;
    }
    counts.insert("all", all.len());
    counts
}

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

/// `GET /documents/status_counts`.
pub fn status_counts(state: &State) -> Result<Resp> {
    http::json(json!({"status_counts": counts(&all_documents(state)?)}))
}

/// `GET /documents/track_status/{track_id}`: the documents one request
/// added (unknown or forgotten ids: an empty list, as LightRAG).
pub fn track_status(state: &State, track: &str) -> Result<Resp> {
    let track = track.trim();
    if track.is_empty() {
        return Err(ApiError::bad_request("the track id is empty"));
    }
    let docs: Vec<Value> = all_documents(state)?.into_iter().filter(|d| d["track_id"] == track).collect();
    let mut summary: BTreeMap<String, usize> = BTreeMap::new();
    for d in &docs {
        *summary.entry(d["status"].as_str().unwrap_or("pending").to_string()).or_default() += 1;
    }
    http::json(json!({"track_id": track, "total_count": docs.len(), "status_summary": summary, "documents": docs}))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PageRequest {
    /// LightRAG's single filter, ignored when `status_filters` is set.
    #[serde(default)]
    status_filter: Option<String>,
    #[serde(default)]
    status_filters: Option<Vec<String>>,
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
    let filters: Option<Vec<String>> = match (req.status_filters, req.status_filter) {
        (Some(list), _) => Some(list),
        (None, Some(one)) => Some(vec![one]),
        (None, None) => None,
    };
    let filters: Option<Vec<String>> = filters.map(|l| l.iter().map(|s| s.to_ascii_lowercase()).collect());
    if let Some(s) = filters.iter().flatten().find(|s| !LIGHTRAG_STATUSES.contains(&s.as_str())) {
        return Err(unprocessable(format!(
            "unknown status filter `{s}`: expected one of {}",
            LIGHTRAG_STATUSES.join(", ")
        )));
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
    let counts = counts(&all);
    let mut docs: Vec<Value> = all
        .into_iter()
        .filter(|d| filters.as_ref().is_none_or(|f| f.iter().any(|s| d["status"] == s.as_str())))
        .collect();
    let key = |d: &Value| d[req.sort_field.as_str()].as_str().unwrap_or_default().to_string();
    docs.sort_by_key(key);
    if req.sort_direction == "desc" {
        docs.reverse();
    }
    let total = docs.len();
    let pages = total.div_ceil(req.page_size).max(1);
    let page: Vec<Value> = docs.into_iter().skip((req.page - 1) * req.page_size).take(req.page_size).collect();
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

/// `GET /documents/supported_file_types`: what the project's input
/// settings read (an upload of anything else is refused with 415).
pub fn supported_file_types(state: &State) -> Result<Resp> {
    let reads = input_files(state)?;
    let extensions = reads.extensions();
    http::json(json!({
        "supported_extensions": extensions,
        "engines": {"graphrag-rs": extensions},
        "input": reads.describe(),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeleteRequest {
    doc_ids: Vec<String>,
    /// LightRAG's flags; the file is always removed here, as the index is
    /// what the input folder holds, and the LLM cache is kept (it makes a
    /// re-index of the same text free).
    #[serde(default)]
    #[allow(dead_code)]
    delete_file: bool,
    #[serde(default)]
    #[allow(dead_code)]
    delete_llm_cache: bool,
}

/// Removes input documents by name (only names the input lists).
fn remove_files(state: &State, files: &[String]) -> Result<()> {
    let present = input_documents(state)?;
    for name in files.iter().filter(|name| present.contains_key(name.as_str())) {
        state.documents.remove(name).map_err(|e| e.context(format!("removing {name}")))?;
    }
    Ok(())
}

/// `DELETE /documents/delete_document`: removes the documents' input files
/// and queues the update that takes them out of the index. Ids of no
/// document are named in the message, not an error (LightRAG answers 200).
pub fn delete(state: &Arc<State>, body: &[u8]) -> Result<Resp> {
    let req: DeleteRequest = http::parse_json(body)?;
    if req.doc_ids.is_empty() {
        return Err(ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "`doc_ids` is empty"));
    }
    let all = all_documents(state)?;
    let mut files = Vec::new();
    let mut failed_records = Vec::new();
    let mut unknown = Vec::new();
    for id in &req.doc_ids {
        match all.iter().find(|d| d["id"] == id.as_str()) {
            Some(d) if id.starts_with("dup-") => failed_records.push(d["id"].as_str().unwrap_or_default().to_string()),
            Some(d) => files.push(d["file_path"].as_str().unwrap_or_default().to_string()),
            None => unknown.push(id.clone()),
        }
    }
    state.uploads.lock().unwrap_or_else(|e| e.into_inner()).failed.retain(|f| !failed_records.contains(&f.id));
    remove_files(state, &files)?;
    if !files.is_empty() {
        state.queue_update(&format!("deleted {}", files.join(", ")));
    }
    let mut message = if files.is_empty() && failed_records.is_empty() {
        "No document was deleted.".to_string()
    } else {
        format!(
            "Document(s) {} removed; the index drops them in the background.",
            files.iter().chain(&failed_records).cloned().collect::<Vec<_>>().join(", ")
        )
    };
    if !unknown.is_empty() {
        message.push_str(&format!(" No document has the id {}.", unknown.join(", ")));
    }
    http::json(json!({"status": "deletion_started", "message": message, "doc_id": req.doc_ids.join(", ")}))
}

/// `DELETE /documents`: every document out of the input folder, and an
/// update that publishes the empty index.
pub fn clear(state: &Arc<State>) -> Result<Resp> {
    if state.pipeline.lock().unwrap_or_else(|e| e.into_inner()).busy {
        return http::json(json!({
            "status": "busy",
            "message": "An update is running: cancel it (POST /documents/cancel_pipeline) or wait, then clear.",
        }));
    }
    let files: Vec<String> = input_documents(state)?.into_keys().collect();
    remove_files(state, &files)?;
    state.uploads.lock().unwrap_or_else(|e| e.into_inner()).clear();
    state.queue_update("every document cleared");
    http::json(json!({
        "status": "success",
        "message": format!("{} document(s) removed from the input folder; the update publishes the empty index.", files.len()),
    }))
}

/// `POST /documents/reprocess_failed`: an update run; documents whose run
/// failed are indexed again (a file that cannot be read stays failed until
/// it is replaced).
pub fn reprocess_failed(state: &Arc<State>) -> Result<Resp> {
    state.queue_update("reprocess failed documents");
    http::json(json!({
        "status": "reprocessing_started",
        "message": "An update runs: documents whose indexing failed are processed again.",
        "track_id": track_id("retry", b"retry"),
    }))
}

/// `POST /documents/cancel_pipeline`: stops the running update between
/// steps (the published index stays as it was; documents it had are
/// `pending` and the next update retries them).
pub fn cancel_pipeline(state: &Arc<State>) -> Result<Resp> {
    let mut p = state.pipeline.lock().unwrap_or_else(|e| e.into_inner());
    if !p.busy {
        return http::json(json!({"status": "not_busy", "message": "No update is running."}));
    }
    p.message("cancellation requested".into());
    p.cancel_requested = true;
    // This run's own flag: queries and later runs are untouched.
    p.run_stop.request();
    drop(p);
    http::json(json!({
        "status": "cancellation_requested",
        "message": "The update stops after the model calls in flight; the published index stays as it was.",
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain() {
        assert_eq!(safe_name(" notes.txt ").unwrap(), "notes.txt");
        assert_eq!(safe_name("Report 2026 (draft).PDF").unwrap(), "Report 2026 (draft).PDF");
        for bad in ["", "../x.txt", "a/b.txt", "..\\x.txt", "/etc/passwd", ".env", "a\u{0}.txt", "a:b.txt"] {
            assert!(safe_name(bad).is_err(), "{bad:?}");
        }
        assert!(safe_name(&format!("{}.txt", "a".repeat(300))).is_err());
    }

    #[test]
    fn uploads_and_texts_follow_the_input_settings() {
        let text = InputFiles::from_settings(&Default::default()).unwrap();
        assert!(readable(&text, "a.txt").is_ok());
        let refused = readable(&text, "a.md").unwrap_err();
        assert_eq!(refused.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert!(
            refused.message.contains(".txt") && refused.message.contains("input.type: text"),
            "{}",
            refused.message
        );
        assert_eq!(text_name(&text, "hello", Some("note")).unwrap(), "note.txt");
        assert_eq!(text_name(&text, "hello", Some("note.txt")).unwrap(), "note.txt");
        assert_eq!(text_name(&text, "hello", Some("note.md")).unwrap(), "note.md.txt");
        assert!(text_name(&text, "hello", None).unwrap().starts_with("text-"));
        assert!(text_name(&text, "hello", Some("../../x")).is_err());
        assert_eq!(summary("\u{feff}Hello".as_bytes()), "Hello");
    }
}
