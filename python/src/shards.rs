//! Sharded indexing for a driver (`graphrag_rs.ray`): one shard of a phase
//! (units, model, embed), the shards' status, the graph phase, the merge —
//! the library functions `graphrag-rs index --shard K/N [--phase …]` and
//! `--merge [--phase graph]` call.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use graphrag_project::{IndexOptions, OpenOptions, Project, ShardPhase, ShardReport, ShardSpec};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::{interruptible, logs, project_error, run_result, run_settings, to_py};

fn report_dict<'py>(py: Python<'py>, r: &ShardReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("phase", phase_name(r.phase))?;
    d.set_item("shard", r.shard)?;
    d.set_item("shards", r.shards)?;
    d.set_item("documents", r.documents)?;
    d.set_item("text_units", r.text_units)?;
    d.set_item("embedded_texts", r.embedded_texts)?;
    d.set_item("stage", &r.stage)?;
    d.set_item("waves", r.waves)?;
    d.set_item("seconds", r.seconds)?;
    d.set_item("model_calls", r.model_calls)?;
    d.set_item("cache_hits", r.cache_hits)?;
    d.set_item("fragments", &r.fragments)?;
    Ok(d)
}

fn phase_name(phase: ShardPhase) -> &'static str {
    match phase {
        ShardPhase::Units => "units",
        ShardPhase::Embed => "embed",
        ShardPhase::Model => "model",
    }
}

/// A shard phase's name (`units`, `model`, `embed`), parsed once here.
fn shard_phase(name: &str) -> PyResult<ShardPhase> {
    match name {
        "units" => Ok(ShardPhase::Units),
        "model" => Ok(ShardPhase::Model),
        "embed" => Ok(ShardPhase::Embed),
        other => Err(pyo3::exceptions::PyValueError::new_err(format!(
            "`{other}` is not a shard phase: expected units, model or embed"
        ))),
    }
}

/// The project at `root`: a folder, or a root in a bucket checked out into
/// this machine's working copy.
fn open(py: Python<'_>, root: &std::path::Path, method: &str) -> PyResult<Project> {
    let method = method.to_string();
    let project = py.detach(|| {
        Project::open(&crate::project_folder(root)?, &OpenOptions { method, no_cache: false })
            .map_err(|e| project_error(&e))
    });
    logs::forward(py)?;
    project
}

/// Runs shard `shard` of `shards` of `root`'s input (as `graphrag-rs index
/// --shard K/N [--phase model|embed]`) and returns its report (phase,
/// documents, text_units, embedded_texts, stage, waves, seconds,
/// model_calls, cache_hits, dir).
#[pyfunction]
#[pyo3(signature = (root, shard, shards, method = "auto", phase = "units"))]
pub fn index_shard(
    py: Python<'_>,
    root: PathBuf,
    shard: usize,
    shards: usize,
    method: &str,
    phase: &str,
) -> PyResult<Py<PyAny>> {
    let spec: ShardSpec = format!("{shard}/{shards}").parse().map_err(pyo3::exceptions::PyValueError::new_err)?;
    let phase = shard_phase(phase)?;
    let project = open(py, &root, method)?;
    let raised = Arc::new(Mutex::new(None));
    let run = run_settings(None, None, &raised);
    let stop = run.stop.clone();
    let shard = move || graphrag_project::run_shard(project, spec, phase, &run);
    let report = interruptible(py, shard, move || stop.request())?.map_err(|e| to_py(&e))?;
    Ok(report_dict(py, &report)?.into_any().unbind())
}

/// The finished shards of `shards` of a phase (their reports; None: not finished).
#[pyfunction]
#[pyo3(signature = (root, shards, method = "auto", phase = "units"))]
pub fn shard_status(
    py: Python<'_>,
    root: PathBuf,
    shards: usize,
    method: &str,
    phase: &str,
) -> PyResult<Vec<Option<Py<PyAny>>>> {
    let phase = shard_phase(phase)?;
    let project = open(py, &root, method)?;
    graphrag_project::shard_status(&project, shards, phase)
        .map_err(|e| to_py(&e))?
        .iter()
        .map(|r| r.as_ref().map(|r| report_dict(py, r).map(|d| d.into_any().unbind())).transpose())
        .collect()
}

/// Merges the finished shards into the published index (as `graphrag-rs
/// index --merge`); the result is `build_index`'s.
#[pyfunction]
#[pyo3(signature = (root, shards = None, method = "auto", progress = None))]
pub fn merge_shards(
    py: Python<'_>,
    root: PathBuf,
    shards: Option<usize>,
    method: &str,
    progress: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let project = open(py, &root, method)?;
    let raised = Arc::new(Mutex::new(None));
    let opts = IndexOptions { resume: false, run: run_settings(progress, None, &raised) };
    let stop = opts.run.stop.clone();
    let result =
        interruptible(py, move || graphrag_project::index_merge(project, shards, &opts), move || stop.request())?;
    let calls = result.as_ref().map(|r| step_calls(&r.stats)).unwrap_or_default();
    let d = run_result(py, result, &raised)?;
    d.bind(py).set_item("model_calls", calls)?;
    Ok(d)
}

/// The steps of a run that called a model, with the calls the model answered.
fn step_calls(stats: &graphrag_engine::stats::RunStats) -> Vec<(String, u64)> {
    stats
        .workflows
        .iter()
        .map(|(step, s)| (step.clone(), s.llm.values().map(|u| u.calls).sum::<u64>()))
        .filter(|(_, calls)| *calls > 0)
        .collect()
}

/// Stages the merge's steps but the per-item embeddings — with `stages`,
/// up to the next model stage — (as `graphrag-rs index --merge --phase
/// graph|stage --resume`: what is staged already and unchanged is kept, with
/// its finished embed shards); returns the model stage it stopped before
/// (`stage`: step and wave, or None when the graph is staged for the embed
/// shards), the staged tables' rows, the model calls of each step it ran
/// (`model_calls`: step → calls the model answered) and the seconds it took.
#[pyfunction]
#[pyo3(signature = (root, shards = None, method = "auto", stages = false))]
pub fn merge_graph(
    py: Python<'_>,
    root: PathBuf,
    shards: Option<usize>,
    method: &str,
    stages: bool,
) -> PyResult<Py<PyAny>> {
    let project = open(py, &root, method)?;
    let raised = Arc::new(Mutex::new(None));
    let opts = IndexOptions { resume: true, run: run_settings(None, None, &raised) };
    let stop = opts.run.stop.clone();
    let staged = interruptible(
        py,
        move || graphrag_project::index_merge_graph(project, shards, &opts, stages),
        move || stop.request(),
    )?
    .map_err(|e| to_py(&e))?;
    let d = PyDict::new(py);
    let stage = staged.model_stage.as_ref().map(|s| (s.step.clone(), s.wave));
    d.set_item("stage", stage)?;
    d.set_item("rows", staged.rows.into_iter().collect::<Vec<_>>())?;
    d.set_item("model_calls", step_calls(&staged.stats))?;
    d.set_item("runtime_s", staged.stats.total_runtime)?;
    Ok(d.into_any().unbind())
}
