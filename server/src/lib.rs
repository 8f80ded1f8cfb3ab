//! `graphrag-rs serve`: one process that keeps an index loaded and answers
//! over HTTP — LightRAG's REST paths (documents, query, graph), Ollama's and
//! OpenAI's chat APIs, and a web UI at `/webui/`.
//!
//! ```no_run
//! let server = graphrag_server::Server::start(graphrag_server::ServeOptions::new("my-project"))?;
//! println!("listening on http://{}", server.addr());
//! server.wait();
//! # anyhow::Ok(())
//! ```
//!
//! Queries run on blocking threads against an immutable [`state::Snapshot`]
//! of the index; a new publication (an update queued by an upload or a
//! delete, or `graphrag-rs update` run beside the server) is loaded whole
//! and swapped in. Adding or deleting documents writes the input folder and
//! queues an `update` (graphrag_project) on the one writer thread.
//!
//! # Modules
//!
//! `graphrag-rs serve` on plain hyper (already in the tree for mock-llm; no framework). `lib.rs`
//! (`Server::start(ServeOptions)`: binds, routes, checks the API key, refuses writes on a `--read-only`
//! replica (`writes`), polls every `serve.poll_seconds` for an index published by another process),
//! `listener.rs` (the connection layer, settings `serve`: accept loop with a connection cap and a pause on
//! EMFILE-like errors, hyper's header read timeout — also the idle keep-alive limit — and head size limit,
//! the body deadline `http::body_bytes` enforces, a send timeout on each connection's writes
//! (`SendTimeout`, for clients that stop reading), CORS preflights before the key check via `cors.rs`),
//! `state.rs` (the `Snapshot` — a `QueryEngine` with every table and vector read at once
//! (`QueryEngine::load_all`) while holding the index's writer lock, so it is one publication, plus the
//! explorer's `Graph` — swapped whole in an `RwLock<Arc<_>>`; a query keeps the `Arc` it started with, so
//! it never sees two indexes; the writer thread that runs `graphrag_project::update` for queued document
//! changes, one run per batch of requests, and the pipeline status its step callback feeds), `documents.rs`
//! (LightRAG's document paths; names sanitised, input/ only; uploads checked against the project's input
//! settings (`graphrag_project::InputFiles`), content duplicates recorded failed), `uploads.rs` (track ids
//! and refused uploads, for the server's lifetime), `query.rs` (`/query`, `/query/stream`, graph paths;
//! queries run on blocking threads), `query_data.rs` (`/query/data`), `chat.rs` (Ollama and OpenAI chat:
//! mode prefixes, content parts, `/api/show`, `/v1/models/{model}`, stream usage, errors in each API's
//! shape), `chat_model.rs` (whether the default method has a usable chat model — `/health`, the start-up
//! log — and the 503 that refuses a question without one), `graph.rs` (neighbourhoods for `/graphs`),
//! `graph_routes.rs` (label popular/search, graph editing into `graph_edits.yaml`), `auth.rs` (LightRAG's
//! `/auth-status`, `/login`, `/auth/verify`: guest mode, its 403s for its UI), `multipart.rs`,
//! `openapi.rs` + `openapi_schemas.rs` (the route table with each body's JSON schema, also used to answer 405 vs 404,
//! and LightRAG's paths not offered, answered 501 with the reason), `api_docs.rs` + `api_docs.html`
//! (`/docs`), `webui_dir.rs` (`--webui-dir`: a built UI such as LightRAG's served from a folder), `http.rs`
//! (bodies, bounded reads, JSON errors `{"detail"}`), `webui.rs` + `webui/` (plain HTML/JS/CSS embedded
//! with `include_str!`, no build step; `webui/vendor/` holds marked and DOMPurify copied unchanged from
//! npm, for answers rendered as Markdown; the graph is a canvas with a small force layout over the
//! requested subgraph only). Tests: `server/tests/api.rs` (end to end on the mock LLM, and queries during
//! an update), `chat_api.rs` (message shapes, model paths, stream usage, no usable chat model; it runs
//! `sdk_clients.py`, the official `openai` and `ollama` Python clients in a scripted session),
//! `lightrag_api.rs` (LightRAG's paths, upload statuses, graph edits surviving an update), `bad_input.rs`
//! (malformed requests), `webui_browser.rs` and `lightrag_webui_browser.rs` (the built-in UI, and
//! LightRAG's own UI from the lightrag-hku wheel, in headless Chromium over the DevTools protocol of
//! `tests/common/browser.rs`, screenshots in target/webui-screenshots/); `benches/serve_load.rs` the load
//! test.

mod api_docs;
mod auth;
mod chat;
pub mod chat_model;
mod clients;
mod cors;
mod documents;
mod graph;
mod graph_routes;
mod http;
mod listener;
mod multipart;
mod openapi;
mod openapi_schemas;
mod query;
mod query_data;
pub mod state;
mod uploads;
mod webui;
mod webui_dir;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, StatusCode};
use serde_json::json;

use crate::http::{ApiError, Resp, Result};
use crate::state::State;

/// The largest JSON request body (bytes).
const MAX_JSON_BYTES: usize = 4 << 20;

/// The longest a dropped [`Server`] waits for its runtime's threads.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);

/// How `serve` runs.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub root: PathBuf,
    pub host: String,
    /// 0: any free port (tests).
    pub port: u16,
    /// Required on every path but `/health` and the web UI's files, as
    /// `X-API-Key` or `Authorization: Bearer`; `None`: the project's
    /// `GRAPHRAG_API_KEY_SERVER` (environment or .env), if set.
    pub api_key: Option<String>,
    /// The largest upload (bytes).
    pub max_upload_bytes: usize,
    /// A built web UI served at `/webui/` instead of the built-in one
    /// (e.g. LightRAG's, from the lightrag-hku wheel).
    pub webui_dir: Option<PathBuf>,
    /// `serve --read-only`: a replica that answers queries from the
    /// published index and refuses every write (403); the project's writer
    /// is another `serve`.
    pub read_only: bool,
}

impl ServeOptions {
    pub fn new(root: impl AsRef<Path>) -> ServeOptions {
        ServeOptions {
            root: root.as_ref().to_path_buf(),
            host: "127.0.0.1".into(),
            port: 9621,
            api_key: None,
            max_upload_bytes: 100 << 20,
            webui_dir: None,
            read_only: false,
        }
    }
}

/// The API key from the environment or the project's .env.
fn configured_key(root: &Path) -> Option<String> {
    const VAR: &str = "GRAPHRAG_API_KEY_SERVER";
    std::env::var(VAR)
        .ok()
        .or_else(|| {
            let text = std::fs::read_to_string(root.join(".env")).ok()?;
            graphrag_engine::env::parse_dotenv(&text).remove(VAR)
        })
        .filter(|k| !k.trim().is_empty())
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    state: Arc<State>,
    runtime: Option<tokio::runtime::Runtime>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Server {
    /// Loads the index (if any), binds, and serves on its own threads.
    pub fn start(opts: ServeOptions) -> anyhow::Result<Server> {
        let api_key = opts.api_key.clone().filter(|k| !k.is_empty()).or_else(|| configured_key(&opts.root));
        if let Some(dir) = opts.webui_dir.as_ref().filter(|d| !d.join("index.html").is_file()) {
            anyhow::bail!("--webui-dir {}: no index.html there (give the folder of a built web UI)", dir.display());
        }
        let state = State::new(&opts, api_key)?;
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("graphrag-serve").build()?;
        // In the runtime's context: the listener registers with its reactor.
        let socket = runtime
            .block_on(async { listener::bind(&opts.host, opts.port) })
            .map_err(|e| anyhow::anyhow!("binding {}:{}: {e}", opts.host, opts.port))?;
        let addr = socket.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let serving = state.clone();
        let limits = listener::Limits::from_settings(&state.settings.serve);
        runtime.spawn(listener::serve(socket, limits, serving, stopped));
        let polling = state.clone();
        // A setting too large for a Duration waits as long as one can.
        let poll = graphrag_engine::settings::duration_of_seconds(state.settings.serve.poll_seconds);
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(poll).await;
                let state = polling.clone();
                let result = tokio::task::spawn_blocking(move || state.reload_if_idle()).await;
                if let Ok(Err(e)) = result {
                    tracing::warn!("loading the published index: {e:#}");
                }
            }
        });
        Ok(Server { addr, state, runtime: Some(runtime), stop: Some(stop) })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn state(&self) -> &Arc<State> {
        &self.state
    }

    /// Serves until the process ends.
    pub fn wait(mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.block_on(std::future::pending::<()>());
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(rt) = self.runtime.take() {
            // Waits (bounded) for the runtime's threads to drop their tasks
            // while `self.state` still holds the index: its last reference
            // then goes here, not on a runtime thread, where dropping the
            // LLM layer's own runtime panics.
            rt.shutdown_timeout(SHUTDOWN_WAIT);
        }
    }
}

/// Whether the request carries the key (`X-API-Key`, or a bearer token).
fn authorised(state: &State, req: &Request<Incoming>) -> bool {
    let Some(key) = &state.api_key else { return true };
    let given = req.headers().get("x-api-key").and_then(|v| v.to_str().ok()).map(str::to_string).or_else(|| {
        req.headers().get(AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(auth::bearer_token).map(str::to_string)
    });
    // Compared in constant time: the answer's timing says nothing of the key.
    given
        .is_some_and(|g| g.len() == key.len() && g.bytes().zip(key.bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0)
}

pub(crate) async fn handle(state: Arc<State>, req: Request<Incoming>) -> Resp {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let sends_body = sends_body(req.headers());
    let mut resp = match route(&state, req).await {
        Ok(r) => r,
        Err(e) => {
            if e.status.is_server_error() {
                tracing::warn!("{method} {path}: {}", e.message);
            }
            e.into_response()
        }
    };
    // A refusal may answer before the request's body was read, and a body
    // left unread ends the kept-alive connection: the client is told, so
    // that it sends its next request on a new one (not into a closed socket).
    if sends_body && !resp.status().is_success() {
        resp.headers_mut().insert(hyper::header::CONNECTION, hyper::header::HeaderValue::from_static("close"));
    }
    resp
}

/// Whether a request's head announces a body.
fn sends_body(headers: &hyper::HeaderMap) -> bool {
    let length = headers.get(hyper::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok());
    length.is_some_and(|n| n > 0) || headers.contains_key(hyper::header::TRANSFER_ENCODING)
}

/// A LightRAG path graphrag-rs does not offer: 501 with the reason.
fn not_offered(method: &str, path: &str) -> ApiError {
    let reason = openapi::not_offered(method, path).unwrap_or_default();
    ApiError::new(StatusCode::NOT_IMPLEMENTED, format!("{method} {path} is not offered by graphrag-rs: {reason}"))
}

fn method_not_allowed(method: &Method, path: &str) -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, format!("{method} is not allowed on {path}"))
}

async fn route(state: &Arc<State>, req: Request<Incoming>) -> Result<Resp> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().map(str::to_string);
    let q = query.as_deref();
    // Public: the health check and the web UI's own files (they hold no data).
    match path.as_str() {
        "/health" if method == Method::GET => return health(state),
        "/" => return Ok(webui::redirect()),
        p if p == "/webui" || p.starts_with("/webui/") => match &state.webui_dir {
            Some(dir) => return webui_dir::file(dir, p),
            None => return webui::file(p),
        },
        // LightRAG's auth paths, the UI customisation and the API's
        // description: public as in LightRAG (they hold no data).
        "/auth-status" if method == Method::GET => return auth::status(state),
        "/login" if method == Method::POST => return auth::login(state),
        "/ui/customization" if method == Method::GET => return api_docs::ui_customization(),
        p if p.starts_with("/ui/customization/assets/") => {
            return Err(ApiError::not_found("Unknown asset: no UI customisation bundle is configured"))
        }
        "/openapi.json" if method == Method::GET => return http::json(openapi::document()),
        "/docs" if method == Method::GET => return Ok(api_docs::page()),
        _ => {}
    }
    if !authorised(state, &req) {
        return Err(auth::refusal(req.headers()));
    }
    if state.read_only && writes(&method, &path) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "this server is a read-only replica (serve --read-only): {method} {path} changes the index; send writes to the project's writer (its serve without --read-only)"
            ),
        ));
    }
    let content_type = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
    let json_body = |req| http::body_bytes(req, MAX_JSON_BYTES);
    let known = openapi::ROUTES.iter().any(|r| openapi::template_matches(r.path, &path));
    if let (&Method::GET, Some(track)) = (&method, path.strip_prefix("/documents/track_status/")) {
        return documents::track_status(state, &http::percent_decode(track));
    }
    match (&method, path.as_str()) {
        (&Method::GET, "/auth/verify") => auth::verify(),
        (&Method::GET, "/documents") => documents::list(state),
        // Paths that take no body read any that is sent, so the connection stays usable.
        (&Method::DELETE, "/documents") => json_body(req).await.and_then(|_| documents::clear(state)),
        (&Method::GET, "/documents/status_counts") => documents::status_counts(state),
        (&Method::GET, "/documents/supported_file_types") => documents::supported_file_types(state),
        (&Method::POST, "/documents/reprocess_failed") => {
            json_body(req).await.and_then(|_| documents::reprocess_failed(state))
        }
        (&Method::POST, "/documents/cancel_pipeline") => {
            json_body(req).await.and_then(|_| documents::cancel_pipeline(state))
        }
        (&Method::POST, "/query/data") => query_data::query_data(state, &json_body(req).await?).await,
        (&Method::GET, "/graph/label/popular") => graph_routes::popular(state, q),
        (&Method::GET, "/graph/label/search") => graph_routes::search(state, q),
        (&Method::POST, "/graph/entity/edit") => graph_routes::edit_entity(state, &json_body(req).await?),
        (&Method::POST, "/graph/entity/create") => graph_routes::create_entity(state, &json_body(req).await?),
        (&Method::DELETE, "/graph/entity/delete") => graph_routes::delete_entity(state, &json_body(req).await?),
        (&Method::POST, "/graph/entities/merge") => graph_routes::merge_entities(state, &json_body(req).await?),
        (&Method::POST, "/graph/relation/edit") => graph_routes::edit_relation(state, &json_body(req).await?),
        (&Method::POST, "/graph/relation/create") => graph_routes::create_relation(state, &json_body(req).await?),
        (&Method::DELETE, "/graph/relation/delete") => graph_routes::delete_relation(state, &json_body(req).await?),
        (m, p) if openapi::not_offered(m.as_str(), p).is_some() => Err(not_offered(m.as_str(), p)),
        (&Method::POST, "/documents/paginated") => documents::paginated(state, &json_body(req).await?),
        (&Method::GET, "/documents/pipeline_status") => http::json(state.pipeline_status()),
        (&Method::POST, "/documents/upload") => {
            let overwrite = http::query_param(q, "overwrite").is_some_and(|v| v == "true" || v == "1");
            let body = http::body_bytes(req, state.max_upload_bytes).await?;
            documents::upload(state, content_type.as_deref(), &body, overwrite)
        }
        (&Method::POST, "/documents/text") => documents::insert_text(state, &json_body(req).await?),
        (&Method::POST, "/documents/texts") => documents::insert_texts(state, &json_body(req).await?),
        (&Method::POST, "/documents/scan") => json_body(req).await.and_then(|_| documents::scan(state)),
        (&Method::DELETE, "/documents/delete_document") => documents::delete(state, &json_body(req).await?),
        (&Method::POST, "/query") => query::query(state, &json_body(req).await?).await,
        (&Method::POST, "/query/stream") => query::query_stream(state, &json_body(req).await?).await,
        (&Method::GET, "/graph/label/list") => query::labels(state, q),
        (&Method::GET, "/graphs") => query::graphs(state, q),
        (&Method::GET, "/graph/entity/detail") => query::entity_detail(state, q),
        (&Method::GET, "/graph/entity/exists") => query::entity_exists(state, q),
        (&Method::GET, "/api/version") => chat::version(),
        (&Method::GET, "/api/tags") => chat::tags(),
        (&Method::GET, "/api/ps") => chat::ps(),
        (&Method::POST, "/api/chat") => chat::ollama_chat(state, &json_body(req).await?).await,
        (&Method::POST, "/api/generate") => chat::ollama_generate(state, &json_body(req).await?).await,
        (&Method::POST, "/api/show") => chat::ollama_show(&json_body(req).await?),
        (&Method::GET, "/v1/models") => chat::openai_models(),
        (&Method::GET, p) if p.starts_with("/v1/models/") => {
            chat::openai_model(&http::percent_decode(&p["/v1/models/".len()..]))
        }
        (&Method::POST, "/v1/chat/completions") => chat::openai_chat(state, &json_body(req).await?).await,
        _ if known => Err(method_not_allowed(&method, &path)),
        _ => Err(ApiError::not_found(format!("no such path: {path} (the API is described at /openapi.json)"))),
    }
}

/// Whether a request changes the input or the index (refused by a
/// read-only replica).
fn writes(method: &Method, path: &str) -> bool {
    const WRITES: &[(Method, &str)] = &[
        (Method::DELETE, "/documents"),
        (Method::POST, "/documents/reprocess_failed"),
        (Method::POST, "/documents/cancel_pipeline"),
        (Method::POST, "/documents/upload"),
        (Method::POST, "/documents/text"),
        (Method::POST, "/documents/texts"),
        (Method::POST, "/documents/scan"),
        (Method::DELETE, "/documents/delete_document"),
        (Method::POST, "/graph/entity/edit"),
        (Method::POST, "/graph/entity/create"),
        (Method::DELETE, "/graph/entity/delete"),
        (Method::POST, "/graph/entities/merge"),
        (Method::POST, "/graph/relation/edit"),
        (Method::POST, "/graph/relation/create"),
        (Method::DELETE, "/graph/relation/delete"),
    ];
    WRITES.iter().any(|(m, p)| m == method && *p == path)
}

/// `GET /health`: status and configuration, no secret.
fn health(state: &State) -> Result<Resp> {
    let snapshot = state.snapshot();
    let s = &state.settings;
    let busy = state.pipeline.lock().unwrap_or_else(|e| e.into_inner()).busy;
    let chat = chat_model::ChatModelStatus::of(s);
    http::json(json!({
        "status": "healthy",
        "working_directory": state.root.display().to_string(),
        "input_directory": state.documents.describe(),
        "configuration": {
            // The model questions are answered with; null without a usable one.
            "llm_model": chat.model,
            "chat_model": chat.to_json(&state.chat_check),
            "embedding_model": s.embedding_models.get(&s.embed_text.embedding_model_id).map(|m| m.model.clone()),
            "max_upload_bytes": state.max_upload_bytes,
            "auth_mode": if state.api_key.is_some() { "api_key" } else { "disabled" },
            "poll_seconds": s.serve.poll_seconds,
        },
        "index": {
            "loaded": snapshot.engine.is_some(),
            "loaded_at": snapshot.loaded_at,
            "version": snapshot.version(),
            "entities": snapshot.graph.nodes.len(),
            "relationships": snapshot.graph.edges.len(),
        },
        // A replica answers queries only; the writer also takes documents.
        "role": if state.read_only { "read-only replica" } else { "writer" },
        "pipeline_busy": busy,
        "core_version": env!("CARGO_PKG_VERSION"),
        "api_version": env!("CARGO_PKG_VERSION"),
    }))
}
