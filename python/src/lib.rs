//! `graphrag_rs._native`: the Python bindings over the library crates
//! (`graphrag-project` runs the pipeline, `graphrag-query` answers). No
//! indexing or query logic lives here: this file converts arguments and
//! results, releases the GIL while Rust works, turns Ctrl-C
//! (KeyboardInterrupt) into a clean stop of the run, and maps errors to the
//! module's exceptions. The Python package (python/graphrag_rs) wraps it with
//! DataFrames, streaming and logging.

mod prompt_tune;

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use graphrag_engine::config_error::ConfigError as SettingsError;
use graphrag_project::{
    IndexOptions, OpenOptions, Project, RunError, RunReport, RunSettings, StepEvent, UpdateOptions,
};
use graphrag_query::{Method, QueryEngine, QueryRequest};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt};
use pyo3::prelude::*;
use pyo3::types::PyDict;

create_exception!(graphrag_rs, GraphragError, PyException, "An error of graphrag-rs (the CLI's message).");
create_exception!(
    graphrag_rs,
    ConfigError,
    GraphragError,
    "settings.yaml (or an argument) is invalid; the message names the file and line."
);

/// How often a waiting call looks for a pending signal (Ctrl-C).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// The exception for a library error: `ConfigError` when a settings error
/// is in its chain, else `GraphragError`; the message as the CLI prints it.
fn to_py(e: &anyhow::Error) -> PyErr {
    error_with(e, format!("{e:#}"))
}

/// [`to_py`]'s exception type with another message.
fn error_with(e: &anyhow::Error, message: String) -> PyErr {
    if e.chain().any(|c| c.downcast_ref::<SettingsError>().is_some()) {
        ConfigError::new_err(message)
    } else {
        GraphragError::new_err(message)
    }
}

/// Runs `work` on its own thread with the GIL released, checking for
/// signals while it runs. On a pending signal (KeyboardInterrupt, or
/// whatever the handler raised) `on_signal` is called once — it asks the
/// work to stop — then the work is awaited and the signal's exception
/// returned (with `on_signal: None`, returned at once, the work left to finish).
fn interruptible<T: Send + 'static>(
    py: Python<'_>,
    work: impl FnOnce() -> T + Send + 'static,
    on_signal: Option<fn()>,
) -> PyResult<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(work());
    });
    py.detach(move || loop {
        match rx.recv_timeout(SIGNAL_POLL) {
            Ok(done) => return Ok(done),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(GraphragError::new_err("the worker thread panicked (a bug: please report it)"))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if let Err(signal) = Python::attach(|py| py.check_signals()) {
            if let Some(stop) = on_signal {
                stop();
                let _ = rx.recv();
                graphrag_project::clear_stop();
            }
            return Err(signal);
        }
    })
}

/// The step observer: `callback(step, index, total, status)` with status
/// `None` as a step starts. An exception from it stops the run (kept in
/// `raised` for the caller to re-raise).
fn observer(callback: Py<PyAny>, raised: Arc<Mutex<Option<PyErr>>>) -> graphrag_project::StepObserver {
    Arc::new(move |ev: &StepEvent| {
        Python::attach(|py| {
            if let Err(e) = callback.call1(py, (ev.step, ev.index, ev.total, ev.finished)) {
                let mut slot = raised.lock().unwrap();
                if slot.is_none() {
                    *slot = Some(e);
                }
                graphrag_project::stop();
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
    if let Some(e) = raised.lock().unwrap().take() {
        graphrag_project::clear_stop();
        return Err(e);
    }
    let report = match result {
        Ok(report) => report,
        Err(e) if e.interrupted() => {
            graphrag_project::clear_stop();
            return Err(PyKeyboardInterrupt::new_err(format!("{e}")));
        }
        Err(e) => return Err(error_with(&e.error, format!("{e}"))),
    };
    let d = PyDict::new(py);
    d.set_item("pipeline", &report.plan.name)?;
    d.set_item("steps", report.plan.steps.iter().map(|s| s.info.name.to_string()).collect::<Vec<_>>())?;
    d.set_item("runtime_s", report.stats.total_runtime)?;
    d.set_item("output_dir", report.output_dir.display().to_string())?;
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

fn run_settings(progress: Option<Py<PyAny>>, raised: &Arc<Mutex<Option<PyErr>>>) -> RunSettings {
    RunSettings { on_step: progress.map(|cb| observer(cb, raised.clone())), ..RunSettings::default() }
}

/// Writes a new project (settings.yaml, .env, prompts/) at `root`.
#[pyfunction]
#[pyo3(signature = (root, force = false))]
fn init(root: std::path::PathBuf, force: bool) -> PyResult<String> {
    let opts = graphrag_project::InitOptions { force, ..Default::default() };
    let report = graphrag_project::init(&root, &opts).map_err(|e| to_py(&e))?;
    Ok(report.root.display().to_string())
}

/// Indexes `root`'s input folder (see `graphrag_rs.build_index`).
#[pyfunction]
#[pyo3(signature = (root, method = "auto".to_string(), resume = false, no_cache = false, progress = None))]
fn build_index(
    py: Python<'_>,
    root: std::path::PathBuf,
    method: String,
    resume: bool,
    no_cache: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let project = Project::open(&root, &OpenOptions { method, no_cache }).map_err(|e| to_py(&e))?;
    let raised = Arc::new(Mutex::new(None));
    let opts = IndexOptions { resume, run: run_settings(progress, &raised) };
    let result = interruptible(py, move || graphrag_project::index(project, &opts), Some(graphrag_project::stop))?;
    run_result(py, result, &raised)
}

/// Updates `root`'s index for the documents added, changed and removed.
#[pyfunction]
#[pyo3(signature = (root, method = "auto".to_string(), no_cache = false, progress = None))]
fn update_index(
    py: Python<'_>,
    root: std::path::PathBuf,
    method: String,
    no_cache: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let raised = Arc::new(Mutex::new(None));
    let opts = UpdateOptions { method, no_cache, run: run_settings(progress, &raised) };
    let result = interruptible(py, move || graphrag_project::update(&root, &opts), Some(graphrag_project::stop))?;
    run_result(py, result, &raised)
}

/// The output folder of `root` (settings' `output_storage.base_dir`).
#[pyfunction]
fn output_dir(root: std::path::PathBuf) -> PyResult<String> {
    let loaded = graphrag_engine::settings::load(&root).map_err(|e| to_py(&e.into()))?;
    Ok(root.join(&loaded.settings.output_storage.base_dir).display().to_string())
}

/// Whether a stop was asked of the run in progress (Ctrl-C seen, or the
/// progress callback raised) and not yet cleared.
#[pyfunction]
fn stop_requested() -> bool {
    graphrag_engine::interrupt::requested()
}

/// A project's index, loaded once, answering many questions in-process.
#[pyclass(frozen, module = "graphrag_rs._native")]
struct NativeIndex {
    engine: Arc<QueryEngine>,
}

#[pymethods]
impl NativeIndex {
    #[new]
    fn new(py: Python<'_>, root: std::path::PathBuf) -> PyResult<NativeIndex> {
        let engine = py.detach(|| QueryEngine::open(&root)).map_err(|e| to_py(&e))?;
        Ok(NativeIndex { engine: Arc::new(engine) })
    }

    /// Answers `question`; returns `(answer or None, context text,
    /// context records as JSON, stats as JSON, notice or None)`. `on_token`
    /// gets the answer's text pieces as the model streams them.
    #[pyo3(signature = (question, method = "local", context_only = false, community_level = None,
        response_type = None, dynamic_community_selection = false, on_token = None))]
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
        on_token: Option<Py<PyAny>>,
    ) -> PyResult<(Option<String>, String, String, String, Option<String>)> {
        let method: Method = method.parse().map_err(|e| ConfigError::new_err(format!("{e:#}")))?;
        let mut req = QueryRequest::new(method, question);
        req.context_only = context_only;
        req.community_level = community_level;
        req.dynamic_community_selection = dynamic_community_selection;
        if let Some(rt) = response_type {
            req.response_type = rt;
        }
        let engine = self.engine.clone();
        // Retrieval alone is milliseconds of CPU: answered on this thread
        // (GIL released), as the Rust library is, without a worker thread's
        // start and hand-back. A model call can wait for seconds: that runs
        // on a worker so Ctrl-C is seen at once.
        let result = if context_only {
            py.detach(move || engine.query(&req, None))
        } else {
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
                None,
            )?
        };
        let r = result.map_err(|e| to_py(&e))?;
        let stats = serde_json::to_string(&r.stats).map_err(|e| GraphragError::new_err(e.to_string()))?;
        Ok((r.answer, r.context, r.context_records.to_string(), stats, r.notice))
    }

    /// The project folder.
    #[getter]
    fn root(&self) -> String {
        self.engine.root().display().to_string()
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("GraphragError", m.py().get_type::<GraphragError>())?;
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    m.add_function(wrap_pyfunction!(init, m)?)?;
    m.add_function(wrap_pyfunction!(build_index, m)?)?;
    m.add_function(wrap_pyfunction!(update_index, m)?)?;
    m.add_function(wrap_pyfunction!(output_dir, m)?)?;
    m.add_function(wrap_pyfunction!(stop_requested, m)?)?;
    m.add_function(wrap_pyfunction!(prompt_tune::generate_indexing_prompts, m)?)?;
    m.add_class::<NativeIndex>()?;
    m.add("METHODS", Method::NAMES.to_vec())?;
    Ok(())
}
