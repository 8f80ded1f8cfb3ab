//! `graphrag_rs._native`: the Python bindings over the library crates
//! (`graphrag-project` runs the pipeline, `graphrag-query` answers). No
//! indexing or query logic lives here: this file converts arguments and
//! results, releases the GIL while Rust works, turns Ctrl-C
//! (KeyboardInterrupt) into a clean stop of the run or the query's model
//! calls, forwards the library's logs to Python's `logging`, and maps errors
//! to the module's exceptions. The Python package (python/graphrag_rs)
//! wraps it with DataFrames, streaming, async and progress display.
//!
//! # Modules
//!
//! pyo3 0.27 bindings, abi3 (one wheel for CPython ≥ 3.10), built by maturin as pip's PEP 517 backend (`pip
//! install ./python`; `python/pyproject.toml`). `src/lib.rs` is the native module `graphrag_rs._native` and
//! holds no indexing or query logic: `init`, `build_index`, `update_index` call `graphrag-project`
//! (`src/shards.rs`: `index_shard` and `shard_status` with a `phase` (`units`, `embed`), `merge_graph`,
//! `merge_shards`, which `python/graphrag_rs/ray.py` — the Ray driver, `python -m graphrag_rs.ray` — runs
//! as Ray tasks); `NativeIndex` holds the `graphrag_query::QueryEngine` of one publication, every table
//! read (`load_all`), and compares the output `Location`'s `published_token` (a local folder:
//! `engine::staging::fingerprint`, a few `stat` calls, the server's check too; an object store: the
//! manifest's version, one GET) before each question, reading a newer publication whole (a local folder
//! under the writer lock, kept as it is while a writer holds it). Every long call runs on a Rust thread
//! with the GIL released while the caller waits in 50 ms slices checking `Python::check_signals`: a
//! KeyboardInterrupt during `build_index` / `update_index` requests the run's own `StopFlag`
//! (`RunSettings::stop`: other builds in the process go on) and waits for the run to return (resumable
//! state); during a query it cancels the query's `CancelToken` (`QueryRequest::cancel`), which drops its
//! model calls. The Python `CancelToken` holds both, for `cancel=` from another thread or an asyncio task.
//! Step progress (`RunSettings::on_step`) goes to a Python callback; an exception from it stops that run.
//! `src/logs.rs` is the process's tracing subscriber: the library's records (INFO and above) are queued by
//! whatever thread emits them and handed to the `graphrag_rs` logger by the thread that holds the GIL in a
//! call of the module (never waiting for the GIL from a Rust thread). Errors are `GraphragError` /
//! `ConfigError` / `NoIndexError` / `CancelledError`, the library's text with its CLI advice reworded for
//! Python (`resume=True`, `force=True`). The Python face: `graphrag_rs/__init__.py` (the GraphRAG-shaped
//! `*_search(root, query) -> (response, context)` functions typed by `Protocol`s with explicit keywords,
//! their streaming twins, `build_index` with its default progress display from `_progress.py`: tqdm when
//! installed, else log lines), `_aio.py` (`twin`: the `a`-prefixed coroutine of every public function and
//! `Index` method, made from the function itself: it runs on an executor thread, the task's cancellation
//! cancels the call's token, and `CancelledError` propagates only once the worker has ended, so the writer
//! lock is free), `api.py` (GraphRAG 3.x's `graphrag.api` query coroutines, same names and parameters, over
//! `Index`), `_lightrag.py` (LightRAG's `QueryParam`, its edit dicts, `query_data` and `export_data`
//! shapes), `_index.py` (`Index`: `query` returning a `Result` that unpacks as `(response, context)`,
//! streaming through `on_token` and a queue, `aquery_streaming` with the task's cancellation reaching the
//! token, LightRAG's `insert` / `delete_document` as input-folder changes plus `update` (undone when the
//! update is stopped), the entity and relation edits checked against the published graph (`src/graph.rs`: a
//! name it lacks is refused) then kept through `graphrag_project::graph_edits::add` (native
//! `add_graph_edit`; taken back by `remove` when their update is stopped) plus `update`,
//! `get_knowledge_graph` and `to_networkx` from the entity and relationship tables), `_results.py`
//! (`Result`, `Context`: the context tables cross as the query crate's JSON records and become DataFrames
//! Python-side, columns in the context text's header order, with `in_context` on entities, relationships
//! and claims as GraphRAG), `_native.pyi` + `py.typed` (the types mypy reads). pandas, pyarrow and networkx
//! are imported only when asked for. Tests: `python/tests` (pytest, the mock server's binary on a free
//! port), run by `.ci/run`. `python/Cargo.toml` also names `hyper` (server) and `bitflags` (std) without
//! using them: that gives the dependencies the features the whole workspace turns on, so the wheel build
//! (`-p graphrag-rs-python`, what maturin runs) reuses the artifacts `cargo test --workspace` / `cargo
//! bench --workspace` built instead of compiling arrow, parquet and every graphrag crate again (keep it so
//! when a workspace crate turns on a new feature: compare `cargo tree -p graphrag-rs-python -e normal,build
//! -f "{p} [{f}]"` with the `--workspace -e normal,build,dev` one). `python/benches/query_latency.py`
//! measures `Index.query` against `benches/query.rs` on the same project.

mod graph;
mod logs;
mod prompt_tune;
mod shards;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use graphrag_engine::config_error::ConfigError as SettingsError;
use graphrag_engine::settings::ProjectRoot;
use graphrag_engine::storage::{Location, Published, Storage};
use graphrag_project::documents::{Added, InputDocuments};
use graphrag_project::{
    IndexOptions, OpenOptions, Project, ProjectError, RunError, RunReport, RunSettings, StepEvent, StepStatus,
    StopFlag, UpdateOptions,
};
use graphrag_query::{Method, QueryEngine, QueryRequest};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt};
use pyo3::prelude::*;
use pyo3::types::PyDict;

create_exception!(graphrag_rs, GraphragError, PyException, "An error of graphrag-rs (the library's message).");
create_exception!(
    graphrag_rs,
    ConfigError,
    GraphragError,
    "settings.yaml (or an argument) is invalid; the message names the file and line."
);
create_exception!(
    graphrag_rs,
    NoIndexError,
    GraphragError,
    "The project has no index yet: run build_index(root) first."
);
create_exception!(
    graphrag_rs,
    CancelledError,
    GraphragError,
    "The query was cancelled (CancelToken.cancel(), or its asyncio task was cancelled)."
);

/// How often a waiting call looks for a pending signal (Ctrl-C) and
/// forwards the library's log records.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// The library's advice names CLI commands and flags; a Python caller is
/// told the function and argument to use instead.
const PYTHON_WORDING: &[(&str, &str)] = &[
    ("`graphrag-rs index --resume`", "`build_index(root, resume=True)`"),
    ("`graphrag-rs update`", "`update_index(root)`"),
    ("use --force to overwrite", "use force=True to overwrite"),
    ("run `graphrag-rs index`", "run `build_index(root)`"),
    ("`graphrag-rs index --method ", "`build_index(root, method=…)` with "),
    ("(`--method light` makes none", "(`method=\"light\"` makes none"),
    ("index with `--method standard`", "index with `method=\"standard\"`"),
    ("run `graphrag-rs init --root DIR` to create a project", "run `init(root)` to create a project"),
];

/// The advice to create a project in a bucket names its URL: `init --root URL` becomes `init("URL")`.
const INIT_AT: &str = "`graphrag-rs init --root ";

fn python_wording(message: String) -> String {
    let mut message = PYTHON_WORDING.iter().fold(message, |m, (cli, py)| m.replace(cli, py));
    if let Some(at) = message.find(INIT_AT) {
        let url_at = at + INIT_AT.len();
        if let Some(len) = message[url_at..].find('`') {
            let call = format!("`init({:?})`", &message[url_at..url_at + len]);
            message.replace_range(at..url_at + len + 1, &call);
        }
    }
    message
}

/// The exception for a library error that is not a settings error:
/// `GraphragError`, the message worded for Python.
fn to_py(e: &anyhow::Error) -> PyErr {
    error_with(false, format!("{e:#}"))
}

/// The exception for a settings error (file, line, key): `ConfigError`.
fn settings_error(e: &SettingsError) -> PyErr {
    error_with(true, e.to_string())
}

/// The exception for opening a project (or reading a file of it):
/// `ConfigError` for its settings, else `GraphragError`.
fn project_error(e: &ProjectError) -> PyErr {
    error_with(matches!(e, ProjectError::Settings(_)), format!("{e:#}"))
}

/// The exception for a query its `CancelToken` cancelled.
fn cancelled_error(e: &anyhow::Error) -> PyErr {
    CancelledError::new_err(python_wording(format!("{e:#}")))
}

/// `ConfigError` (for a settings error) or `GraphragError` with `message`
/// worded for Python.
fn error_with(settings: bool, message: String) -> PyErr {
    let message = python_wording(message);
    if settings {
        ConfigError::new_err(message)
    } else {
        GraphragError::new_err(message)
    }
}

/// Runs `work` on its own thread with the GIL released, checking for
/// signals and forwarding log records while it runs. On a pending signal
/// (KeyboardInterrupt, or whatever the handler raised) `on_signal` is
/// called — it asks the work to stop — then the work is awaited and the
/// signal's exception returned.
fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce() -> T + Send + 'static,
    on_signal: impl FnOnce() + Send,
) -> PyResult<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    let outcome = py.detach(move || loop {
        match rx.recv_timeout(SIGNAL_POLL) {
            Ok(done) => return Ok(done),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(GraphragError::new_err("the worker thread panicked (a bug: please report it)"))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        // Logging runs Python code, where a pending signal's handler may
        // raise too: either way the work is asked to stop.
        if let Err(signal) = Python::attach(|py| py.check_signals().and_then(|()| logs::forward(py))) {
            on_signal();
            let _ = rx.recv();
            return Err(signal);
        }
    })?;
    logs::forward(py)?;
    Ok(outcome)
}

/// Stops a build or a query: `cancel()` from any thread (or an asyncio
/// task's cancellation) ends a query's model calls at once, and a build
/// cleanly (answers in flight are cached; `resume=True` continues).
#[pyclass(frozen, module = "graphrag_rs._native")]
#[derive(Default)]
struct CancelToken {
    query: graphrag_engine::cancel::CancelToken,
    build: StopFlag,
}

#[pymethods]
impl CancelToken {
    #[new]
    fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Cancels the query or build this token was given to.
    fn cancel(&self) {
        self.query.cancel();
        self.build.request();
    }

    /// Whether `cancel()` was called (or Ctrl-C stopped the build it was given to).
    #[getter]
    fn cancelled(&self) -> bool {
        self.query.is_cancelled() || self.build.requested()
    }
}

/// The step observer: `callback(step, index, total, status)` with status
/// `None` as a step starts. An exception from it stops this run (kept in
/// `raised` for the caller to re-raise).
fn observer(callback: Py<PyAny>, raised: Arc<Mutex<Option<PyErr>>>, stop: StopFlag) -> graphrag_project::StepObserver {
    Arc::new(move |ev: &StepEvent| {
        Python::attach(|py| {
            let forwarded = logs::forward(py);
            if let Err(e) = forwarded.and_then(|()| {
                callback.call1(py, (ev.step, ev.index, ev.total, ev.finished.map(StepStatus::as_str))).map(drop)
            }) {
                let mut slot = raised.lock().unwrap_or_else(|e| e.into_inner());
                if slot.is_none() {
                    *slot = Some(e);
                }
                stop.request();
            }
        })
    })
}

/// A run's outcome as a dict (or its error as an exception).
fn run_result(
    py: Python<'_>,
    result: Result<RunReport, RunError>,
    raised: &Arc<Mutex<Option<PyErr>>>,
) -> PyResult<Py<PyAny>> {
    if let Some(e) = raised.lock().unwrap_or_else(|e| e.into_inner()).take() {
        return Err(e);
    }
    let report = match result {
        Ok(report) => report,
        Err(e) if e.interrupted() => return Err(PyKeyboardInterrupt::new_err(python_wording(format!("{e}")))),
        Err(e) => return Err(error_with(e.settings(), format!("{e}"))),
    };
    let d = PyDict::new(py);
    d.set_item("pipeline", &report.plan.name)?;
    d.set_item("steps", report.plan.steps.iter().map(|s| s.info.name.to_string()).collect::<Vec<_>>())?;
    d.set_item("runtime_s", report.stats.total_runtime)?;
    d.set_item("output_dir", &report.published_to)?;
    d.set_item("documents", report.documents.as_ref().map(|b| b.num_rows()))?;
    if let Some(c) = &report.changes {
        let changes = PyDict::new(py);
        changes.set_item("added", &c.added)?;
        changes.set_item("changed", &c.changed)?;
        changes.set_item("removed", &c.removed)?;
        changes.set_item("unchanged", c.unchanged)?;
        d.set_item("changes", changes)?;
    }
    Ok(d.into_any().unbind())
}

/// The run settings of one build: its own stop flag (the token's when
/// given), stopped by the progress callback raising.
fn run_settings(
    progress: Option<Py<PyAny>>,
    cancel: Option<&CancelToken>,
    raised: &Arc<Mutex<Option<PyErr>>>,
) -> RunSettings {
    let stop = cancel.map_or_else(StopFlag::new, |t| t.build.clone());
    RunSettings {
        on_step: progress.map(|cb| observer(cb, raised.clone(), stop.clone())),
        stop,
        ..RunSettings::default()
    }
}

/// Writes a new project (settings.yaml, .env, prompts/) at `root`.
#[pyfunction]
#[pyo3(signature = (root, force = false))]
fn init(py: Python<'_>, root: PathBuf, force: bool) -> PyResult<String> {
    let opts = graphrag_project::InitOptions { force, ..Default::default() };
    let report = match parse_root(&root)? {
        ProjectRoot::Folder(dir) => graphrag_project::init(&dir, &opts).map(|r| r.root.display().to_string()),
        ProjectRoot::Remote(remote) => graphrag_engine::storage::root::init(&remote, None, force, |dir| {
            graphrag_project::init(dir, &opts).map(drop)
        })
        .map(|_| remote.url()),
    };
    logs::forward(py)?;
    report.map_err(|e| to_py(&e))
}

/// `root` as a folder or a root in a bucket (`s3://`, `az://`, `gs://`).
fn parse_root(root: &Path) -> PyResult<ProjectRoot> {
    match root.to_str() {
        Some(text) => ProjectRoot::parse(text).map_err(pyo3::exceptions::PyValueError::new_err),
        None => Ok(ProjectRoot::Folder(root.to_path_buf())),
    }
}

/// The folder a project is worked on in: `root` itself, or the working copy
/// of a root in a bucket (in the user's cache), checked out first.
fn project_folder(root: &Path) -> PyResult<PathBuf> {
    let parsed = parse_root(root)?;
    graphrag_engine::storage::root::local_root(&parsed, None).map_err(|e| to_py(&e))
}

/// Indexes `root`'s input folder (see `graphrag_rs.build_index`).
#[pyfunction]
#[pyo3(signature = (root, method = "auto", resume = false, no_cache = false, progress = None, cancel = None))]
fn build_index(
    py: Python<'_>,
    root: PathBuf,
    method: &str,
    resume: bool,
    no_cache: bool,
    progress: Option<Py<PyAny>>,
    cancel: Option<PyRef<'_, CancelToken>>,
) -> PyResult<Py<PyAny>> {
    let method = method.to_string();
    let project = py.detach(|| {
        Project::open(&project_folder(&root)?, &OpenOptions { method, no_cache }).map_err(|e| project_error(&e))
    });
    logs::forward(py)?;
    let project = project?;
    let raised = Arc::new(Mutex::new(None));
    let opts = IndexOptions { resume, run: run_settings(progress, cancel.as_deref(), &raised) };
    let stop = opts.run.stop.clone();
    let result = interruptible(py, move || graphrag_project::index(project, &opts), move || stop.request())?;
    run_result(py, result, &raised)
}

/// Updates `root`'s index for the documents added, changed and removed.
#[pyfunction]
#[pyo3(signature = (root, method = "auto", no_cache = false, progress = None, cancel = None))]
fn update_index(
    py: Python<'_>,
    root: PathBuf,
    method: &str,
    no_cache: bool,
    progress: Option<Py<PyAny>>,
    cancel: Option<PyRef<'_, CancelToken>>,
) -> PyResult<Py<PyAny>> {
    let raised = Arc::new(Mutex::new(None));
    let opts =
        UpdateOptions { method: method.to_string(), no_cache, run: run_settings(progress, cancel.as_deref(), &raised) };
    let stop = opts.run.stop.clone();
    let root = project_folder(&root)?;
    let result = interruptible(py, move || graphrag_project::update(&root, &opts), move || stop.request())?;
    run_result(py, result, &raised)
}

/// The output location of `root` (settings' `output_storage`: a folder or
/// an object store prefix).
fn output_location(root: &Path) -> PyResult<Location> {
    let loaded = graphrag_engine::settings::load(root).map_err(|e| settings_error(&e))?;
    Ok(Storage::open(root, &loaded.settings).map_err(|e| to_py(&e.into()))?.output)
}

/// The input folder of `root` and the type of file it reads (`text`, `csv`, `json`).
#[pyfunction]
fn input_settings(root: PathBuf) -> PyResult<(String, String)> {
    let root = project_folder(&root)?;
    let loaded = graphrag_engine::settings::load(&root).map_err(|e| settings_error(&e))?;
    let s = &loaded.settings;
    Ok((Storage::open(&root, s).map_err(|e| to_py(&e.into()))?.input.describe(), s.input.file_type.clone()))
}

/// The input documents of `root` (a folder, or objects under a bucket prefix).
fn input_documents(root: &Path) -> PyResult<InputDocuments> {
    let loaded = graphrag_engine::settings::load(root).map_err(|e| settings_error(&e))?;
    Ok(InputDocuments::of(&Storage::open(root, &loaded.settings).map_err(|e| to_py(&e.into()))?))
}

/// Writes the document `name` into `root`'s input, wherever it lives
/// (`Index.insert`, and a cancelled `delete_document` putting its document
/// back, byte for byte); a document of that name already there is an error.
#[pyfunction]
fn add_document(py: Python<'_>, root: PathBuf, name: &str, content: &[u8]) -> PyResult<()> {
    py.detach(|| {
        let documents = input_documents(&project_folder(&root)?)?;
        match documents.add(name, content, false).map_err(|e| to_py(&e))? {
            Added::Written => Ok(()),
            Added::NameTaken => Err(GraphragError::new_err(format!(
                "insert: {name} exists already in {} (delete_document('{name}') first, or pick another name)",
                documents.describe()
            ))),
        }
    })
}

/// Removes the document `name` from `root`'s input (`Index.delete_document`)
/// and returns its content (put back if the update is cancelled); a name
/// the input does not have is an error naming some that it has.
#[pyfunction]
fn remove_document(py: Python<'_>, root: PathBuf, name: &str) -> PyResult<Py<pyo3::types::PyBytes>> {
    let content = py.detach(|| {
        let documents = input_documents(&project_folder(&root)?)?;
        if let Some(content) = documents.read(name).map_err(|e| to_py(&e))? {
            if documents.remove(name).map_err(|e| to_py(&e))? {
                return Ok(content);
            }
        }
        let present: Vec<String> =
            documents.list().map_err(|e| to_py(&e))?.into_iter().take(20).map(|d| d.name).collect();
        Err(GraphragError::new_err(format!(
            "delete_document: no document '{name}' in {} (it has {present:?})",
            documents.describe()
        )))
    })?;
    Ok(pyo3::types::PyBytes::new(py, &content).unbind())
}

/// Adds a graph edit (`graphrag_project::graph_edits`, the server's LightRAG
/// graph paths' store) to `root`'s graph_edits.yaml, given as the file's
/// JSON form (`{"action": "edit_entity", "name": ...}`); every later index
/// and update applies it. Returns how many edits the file holds.
#[pyfunction]
fn add_graph_edit(root: PathBuf, edit_json: &str) -> PyResult<usize> {
    graphrag_project::graph_edits::add(&project_folder(&root)?, graph_edit(edit_json)?).map_err(|e| project_error(&e))
}

/// Takes back the last edit equal to the one given (its update was
/// stopped); whether there was one.
#[pyfunction]
fn remove_graph_edit(root: PathBuf, edit_json: &str) -> PyResult<bool> {
    graphrag_project::graph_edits::remove(&project_folder(&root)?, &graph_edit(edit_json)?)
        .map_err(|e| project_error(&e))
}

/// A graph edit in graph_edits.yaml's JSON form (`{"action": "edit_entity", "name": ...}`).
fn graph_edit(edit_json: &str) -> PyResult<graphrag_project::graph_edits::GraphEdit> {
    serde_json::from_str(edit_json)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("not a graph edit: {e}")))
}

/// `NoIndexError` unless `output` holds a published index (on an object
/// store: a manifest names a version).
fn require_index(root: &Path, output: &Location) -> PyResult<()> {
    match output.open_published().map_err(|e| to_py(&e))? {
        Published::Version(_) => Ok(()),
        // A writer is publishing into the folder: an index is there unless this is its first.
        Published::Busy if output.has_index().map_err(|e| to_py(&e))? => Ok(()),
        Published::Busy | Published::Nothing(_) => Err(no_index(root, output)),
    }
}

fn no_index(root: &Path, output: &Location) -> PyErr {
    NoIndexError::new_err(format!(
        "no index in {}: run build_index({:?}) first",
        output.describe(),
        graphrag_engine::settings::describe_root(root)
    ))
}

/// The folder the published index of `root` is read from (on an object
/// store, the local copy of its published version), which must exist
/// (`NoIndexError`).
fn published_dir(root: &Path) -> PyResult<PathBuf> {
    let root = project_folder(root)?;
    let output = output_location(&root)?;
    require_index(&root, &output)?;
    let Some((dir, _)) = output.published().map_err(|e| to_py(&e))? else { return Err(no_index(&root, &output)) };
    Ok(dir)
}

/// [`published_dir`] for Python (`load_tables`, the graph reads).
#[pyfunction]
fn index_dir(root: PathBuf) -> PyResult<String> {
    Ok(published_dir(&root)?.display().to_string())
}

/// One published index, every table read: all methods answer from it.
struct Loaded {
    engine: Arc<QueryEngine>,
    fingerprint: String,
}

/// Reads the index of `root` whole. `None` while a writer holds the lock
/// and `previous` is given: the caller keeps it and looks again later
/// (the publication in progress is then complete). A settings error is
/// [`ProjectError::Settings`].
fn load(root: &Path, output: &Location, previous: Option<&Loaded>) -> Result<Option<Loaded>, ProjectError> {
    let settings = graphrag_engine::settings::load(root)?.settings;
    let engine = match output.open_published()? {
        // The caller keeps its index until the publication in progress is complete.
        Published::Busy if previous.is_some() => return Ok(None),
        // Nothing loaded yet: read what is published now (the query engine
        // finishes a publication a crashed writer left half done).
        Published::Busy | Published::Nothing(_) => {
            let fingerprint = output.published_token()?;
            let engine = QueryEngine::with_settings(root, settings)?;
            engine.load_all()?;
            return Ok(Some(Loaded { engine: Arc::new(engine), fingerprint }));
        }
        Published::Version(version) => {
            // Read whole while held: no publication changes it meanwhile.
            let engine = QueryEngine::at(root, settings, version.dir())?;
            engine.load_all()?;
            Loaded { engine: Arc::new(engine), fingerprint: version.token().to_string() }
        }
    };
    Ok(Some(engine))
}

/// A project's index, loaded whole, answering many questions in-process;
/// before each one it checks (a few `stat` calls; on an object store, one
/// read of the manifest) whether a newer index was published and reads it
/// if so.
#[pyclass(frozen, module = "graphrag_rs._native")]
struct NativeIndex {
    root: PathBuf,
    output: Location,
    loaded: Mutex<Arc<Loaded>>,
}

impl NativeIndex {
    /// The index to answer from: the published one, read again when it
    /// changed since it was loaded.
    fn current(&self, py: Python<'_>, force: bool) -> PyResult<Arc<Loaded>> {
        // The lock is taken without the GIL: another thread waiting for it
        // must not hold the GIL that this one's log forwarding needs.
        let current = py.detach(|| {
            let mut slot = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
            let token = self.output.published_token().map_err(|e| to_py(&e))?;
            if !force && token == slot.fingerprint {
                return Ok(slot.clone());
            }
            require_index(&self.root, &self.output)?;
            if let Some(fresh) = load(&self.root, &self.output, Some(&slot)).map_err(|e| project_error(&e))? {
                *slot = Arc::new(fresh);
            }
            Ok(slot.clone())
        });
        logs::forward(py)?;
        current
    }
}

#[pymethods]
impl NativeIndex {
    #[new]
    fn new(py: Python<'_>, root: PathBuf) -> PyResult<NativeIndex> {
        let root = py.detach(|| project_folder(&root))?;
        let output = output_location(&root)?;
        require_index(&root, &output)?;
        let loaded = py.detach(|| load(&root, &output, None));
        logs::forward(py)?;
        let loaded = loaded.map_err(|e| project_error(&e))?.expect("loaded without a previous index");
        Ok(NativeIndex { root, output, loaded: Mutex::new(Arc::new(loaded)) })
    }

    /// Reads the published index again now (each question does when it changed).
    fn reload(&self, py: Python<'_>) -> PyResult<()> {
        self.current(py, true).map(drop)
    }

    /// The fingerprint of the index questions are answered from.
    #[getter]
    fn version(&self) -> String {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner()).fingerprint.clone()
    }

    /// Answers `question`; returns `(answer or None, context text,
    /// context records as JSON, stats as JSON, notice or None)`. `on_token`
    /// gets the answer's text pieces as the model streams them; `cancel`
    /// (or Ctrl-C) stops the query's model calls.
    #[pyo3(signature = (question, method = "local", context_only = false, community_level = None,
        response_type = None, dynamic_community_selection = false, history = None, max_context_tokens = None,
        on_token = None, cancel = None, enable_rerank = None))]
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    fn query(
        &self,
        py: Python<'_>,
        question: String,
        method: &str,
        context_only: bool,
        community_level: Option<u32>,
        response_type: Option<String>,
        dynamic_community_selection: bool,
        history: Option<Vec<(String, String)>>,
        max_context_tokens: Option<usize>,
        on_token: Option<Py<PyAny>>,
        cancel: Option<PyRef<'_, CancelToken>>,
        enable_rerank: Option<bool>,
    ) -> PyResult<(Option<String>, String, String, String, Option<String>)> {
        let method: Method = method.parse().map_err(|e| ConfigError::new_err(format!("{e:#}")))?;
        let mut req = QueryRequest::new(method, question);
        req.context_only = context_only;
        req.community_level = community_level;
        req.dynamic_community_selection = dynamic_community_selection;
        req.history = history.unwrap_or_default();
        req.max_context_tokens = max_context_tokens;
        req.rerank = enable_rerank;
        if let Some(rt) = response_type {
            req.response_type = rt;
        }
        if let Some(token) = &cancel {
            req.cancel = token.query.clone();
        }
        let engine = self.current(py, false)?.engine.clone();
        let cancelled = req.cancel.clone();
        // Retrieval alone is milliseconds of CPU: answered on this thread
        // (GIL released), as the Rust library is, without a worker thread's
        // start and hand-back. A model call can wait for seconds: that runs
        // on a worker so Ctrl-C is seen at once, and cancels the calls.
        let result = if context_only {
            let result = py.detach(move || engine.query(&req, None));
            logs::forward(py)?;
            result
        } else {
            let cancel = req.cancel.clone();
            interruptible(
                py,
                move || {
                    let mut forward = |piece: &str| {
                        if let Some(cb) = &on_token {
                            Python::attach(|py| {
                                if let Err(e) = cb.call1(py, (piece,)) {
                                    e.write_unraisable(py, None);
                                }
                            })
                        }
                    };
                    engine.query(&req, Some(&mut forward))
                },
                move || cancel.cancel(),
            )?
        };
        // Cancelled: its model calls were dropped, which is the error it ended with.
        let r = result.map_err(|e| if cancelled.is_cancelled() { cancelled_error(&e) } else { to_py(&e) })?;
        let stats = serde_json::to_string(&r.stats).map_err(|e| GraphragError::new_err(e.to_string()))?;
        Ok((r.answer, r.context, r.context_records.to_json().to_string(), stats, r.notice))
    }

    /// The titles of the documents a context's sources come from (their
    /// `id`s, as the context records' JSON has them: text), each once, in
    /// order: LightRAG's references (`query_data`). An id that is not a
    /// number names no text unit.
    fn source_documents(&self, py: Python<'_>, source_ids: Vec<String>) -> PyResult<Vec<String>> {
        let engine = self.current(py, false)?.engine.clone();
        let ids: Vec<i64> = source_ids.iter().filter_map(|id| id.trim().parse().ok()).collect();
        py.detach(|| engine.source_documents(&ids)).map_err(|e| to_py(&e))
    }

    /// The project folder.
    #[getter]
    fn root(&self) -> String {
        self.root.display().to_string()
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    logs::install();
    m.add("GraphragError", m.py().get_type::<GraphragError>())?;
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    m.add("NoIndexError", m.py().get_type::<NoIndexError>())?;
    m.add("CancelledError", m.py().get_type::<CancelledError>())?;
    m.add_function(wrap_pyfunction!(init, m)?)?;
    m.add_function(wrap_pyfunction!(build_index, m)?)?;
    m.add_function(wrap_pyfunction!(update_index, m)?)?;
    m.add_function(wrap_pyfunction!(index_dir, m)?)?;
    m.add_function(wrap_pyfunction!(input_settings, m)?)?;
    m.add_function(wrap_pyfunction!(add_document, m)?)?;
    m.add_function(wrap_pyfunction!(remove_document, m)?)?;
    m.add_function(wrap_pyfunction!(add_graph_edit, m)?)?;
    m.add_function(wrap_pyfunction!(remove_graph_edit, m)?)?;
    m.add_function(wrap_pyfunction!(graph::check_graph_edit, m)?)?;
    m.add_function(wrap_pyfunction!(graph::entity_titles, m)?)?;
    m.add_function(wrap_pyfunction!(logs::forward_logs, m)?)?;
    m.add_function(wrap_pyfunction!(prompt_tune::generate_indexing_prompts, m)?)?;
    m.add_function(wrap_pyfunction!(shards::index_shard, m)?)?;
    m.add_function(wrap_pyfunction!(shards::shard_status, m)?)?;
    m.add_function(wrap_pyfunction!(shards::merge_shards, m)?)?;
    m.add_function(wrap_pyfunction!(shards::merge_graph, m)?)?;
    m.add_class::<NativeIndex>()?;
    m.add_class::<CancelToken>()?;
    m.add("METHODS", Method::NAMES.to_vec())?;
    m.add("MAX_QUESTION_BYTES", graphrag_query::MAX_QUESTION_BYTES)?;
    Ok(())
}
