//! Runs a validated [`Plan`]: independent steps concurrently, every output
//! persisted atomically, a state file recording each step's hash so that
//! `--resume` skips steps whose verb, args, inputs and external inputs are
//! unchanged and whose outputs are intact.
//!
//! # In detail
//!
//! executes a `Plan`: a step starts on its own thread once its inputs exist; outputs are written
//! atomically; `state.json` records each step's hash (verb, args, output names, input hashes, the verb's
//! external fingerprint — input files, model and prompt texts) for `--resume`. `estimate()` is the dry run:
//! steps that call no model run in memory, LLM steps report `llm_estimate`, and a step that calls a model
//! without one (`calls_model`: reports, summaries, embeddings) is never run by it. With
//! `RunOptions::progress` (the caller's `MultiProgress`), an overall "step i/n, elapsed" line sits above
//! one bar per running step. `RunOptions::startup_check` (the start-up check, as a closure) runs on its own
//! thread beside the steps that call no model (loading, chunking); a step whose args name a model
//! (`model_id`) starts only once it passed, and a failure ends the run with its error
//! (`RunFailure::StartupCheck`) before any such step started. stats.json records each step's `start` (seconds
//! after the run began) and the check's seconds (`startup_check`). A table stays in memory only while a
//! step that can run next reads it; a reader further down the plan reads it back from disk. Verb outputs
//! are shrunk to their contents (builders over-allocate), and Parquet is written one column chunk at a
//! time, its pages waiting in an unlinked temporary file (`store::write_table`). After each step the freed
//! heap is handed back to the system (glibc's `malloc_trim`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use arrow_array::{Array, RecordBatch, RecordBatchOptions};
use indicatif::{MultiProgress, ProgressBar, ProgressFinish, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::context::{PreviousIndex, ProjectFiles, StepCounters, VerbContext};
use crate::failures::{self, FailedItem, FailedItems};
use crate::interrupt;
use crate::llm::LlmService;
use crate::pipeline::{Plan, Step};
use crate::stats::{peak_rss_mb, RunStats, RunStatus, StepStats, StepStatus};
use crate::storage::counting::RunRequests;
use crate::storage::files::FileSource;
use crate::store;
use crate::verb::LlmEstimate;
use graphrag_operations::ids::sha256_hex;

/// Where a run reads and writes, and the models it may call.
pub struct Workspace {
    /// The folder the run writes: published tables at its top, intermediate
    /// ones under `.steps/`, state.json and stats.json.
    pub output_dir: PathBuf,
    /// The input files.
    pub files: Box<dyn FileSource>,
    /// Prompt templates and snapshot outputs; `None`: steps that need them fail.
    pub project: Option<Box<dyn ProjectFiles>>,
    /// The project's models; `None`: steps that call one fail.
    pub llm: Option<LlmService>,
    /// The index an update starts from.
    pub previous: Option<Box<dyn PreviousIndex>>,
}

impl Workspace {
    fn context<'a>(&'a self, step: &'a Step, counters: &'a StepCounters) -> VerbContext<'a> {
        VerbContext::new(&step.id, self.files.as_ref(), counters)
            .with_project(self.project.as_deref())
            .with_llm(self.llm.as_ref())
            .with_previous(self.previous.as_deref())
    }
}

/// Called with each table a step produced, once it is written.
pub type TableObserver = Arc<dyn Fn(&str, &RecordBatch) + Send + Sync>;

/// A step starting or ending, for a caller that shows progress its own way
/// (a server's status, a notebook) rather than with the progress bars.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepEvent<'a> {
    /// The step's id.
    pub step: &'a str,
    /// The step's place in the plan (0-based).
    pub index: usize,
    /// The plan's number of steps.
    pub total: usize,
    /// `None` when it starts; its status when it ends.
    pub finished: Option<StepStatus>,
}

/// Called with each [`StepEvent`], from the step's thread.
pub type StepObserver = Arc<dyn Fn(&StepEvent) + Send + Sync>;

/// The start-up check of the model endpoints (`llm::preflight`), run on its
/// own thread beside the steps that call no model (loading, chunking), so
/// that its round trip is not added to the run's. Steps that name a model
/// ([`crate::verb::Verb::model_to_call`]) start only once it passed; when it fails, none of them
/// starts and the run ends with its error ([`RunFailure::StartupCheck`]).
pub type StartupCheck = Arc<dyn Fn() -> anyhow::Result<()> + Send + Sync>;

/// Why a run ended without completing: what its caller tells apart (the
/// exit code, the note it prints, document_status) without inspecting the
/// error's text or type. Displayed as stats.json's `error`.
#[derive(Debug, thiserror::Error)]
pub enum RunFailure {
    /// A stop was requested ([`interrupt`]): no further step started.
    #[error(transparent)]
    Interrupted(#[from] interrupt::Interrupted),
    /// The [`StartupCheck`] failed: the check's own message.
    #[error("{0:#}")]
    StartupCheck(anyhow::Error),
    /// A step failed.
    #[error("{0}")]
    Step(Box<StepFailure>),
    /// The run could not start or record itself (its folder, stats.json), or
    /// what followed it failed (publishing).
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// A failed step: its error, naming the step, and what the caller reports
/// beside it.
#[derive(Debug)]
pub struct StepFailure {
    /// `step `x` (verb `y`) failed: ` and the step's error.
    pub error: anyhow::Error,
    /// The items whose model call failed beyond the tolerated fraction, text
    /// units named after their documents (what failed the step, if they did).
    pub failed_items: Option<FailedItems>,
    /// The table of the index an update builds on that the step could not read.
    pub unreadable_index_table: Option<String>,
}

impl std::fmt::Display for StepFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

/// A step's error with what its counters recorded about it.
struct StepError {
    error: anyhow::Error,
    failed_items: Option<FailedItems>,
    unreadable_index_table: Option<String>,
}

/// How to run a plan; the default runs every step, draws no progress bars
/// and tolerates no failed item.
#[derive(Clone, Default)]
pub struct RunOptions {
    /// Skip steps whose step hash and outputs match the last run's
    /// (state.json): `index --resume`.
    pub resume: bool,
    /// Where progress bars are drawn (an overall "step i/n" line and one bar
    /// per running step); the caller prints its logs through it too, so log
    /// lines land above the bars. `None`: no bars.
    pub progress: Option<MultiProgress>,
    /// Called with each table a step produced, once it is written.
    pub on_table: Option<TableObserver>,
    /// Called as each step starts and ends.
    pub on_step: Option<StepObserver>,
    /// The fraction of a step's items whose model call may fail before the
    /// step does (`failures.tolerated_fraction`).
    pub tolerated_failures: f64,
    /// Checked beside the steps that call no model; `None`: no check.
    pub startup_check: Option<StartupCheck>,
    /// This run's stop (no new step starts once requested); the
    /// process-wide one stops it too.
    pub stop: interrupt::StopFlag,
    /// The object store requests stats.json counts (`storage_requests`):
    /// to the project's storages since the run began (before its writer
    /// lease and working copy). `None`: not counted.
    pub storage_requests: Option<RunRequests>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    steps: BTreeMap<String, StepState>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct StepState {
    hash: String,
    /// sha256 of each output table's file.
    outputs: BTreeMap<String, String>,
    /// The input files the run went on without, reported again when it is skipped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    unreadable: Vec<FailedItem>,
}

fn state_path(output_dir: &Path) -> PathBuf {
    output_dir.join(".steps").join("state.json")
}

fn load_state(output_dir: &Path) -> State {
    std::fs::read(state_path(output_dir)).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
}

/// What `--resume` would do with each step, without running anything.
pub fn resume_preview(plan: &Plan, ws: &Workspace) -> anyhow::Result<Vec<bool>> {
    let state = load_state(&ws.output_dir);
    let counters = StepCounters::default();
    let mut hashes: HashMap<String, String> = HashMap::new();
    let mut skip = Vec::with_capacity(plan.steps.len());
    for step in &plan.steps {
        let ctx = ws.context(step, &counters);
        let inputs: Option<Vec<String>> = step.inputs.iter().map(|t| hashes.get(t).cloned()).collect();
        let reusable = match inputs {
            Some(inputs) => reusable_outputs(plan, ws, &state, step, &step_hash(step, &inputs, &ctx)?),
            None => None,
        };
        skip.push(reusable.is_some());
        hashes.extend(reusable.unwrap_or_default());
    }
    Ok(skip)
}

fn step_hash(step: &Step, input_hashes: &[String], ctx: &VerbContext) -> anyhow::Result<String> {
    let args = serde_json::to_string(&step.args)?;
    let external = step.verb.external_fingerprint(ctx)?.unwrap_or_default();
    let mut parts: Vec<&[u8]> = vec![step.info.name.as_bytes(), args.as_bytes(), external.as_bytes()];
    for name in &step.outputs {
        parts.push(name.as_bytes());
    }
    for h in input_hashes {
        parts.push(h.as_bytes());
    }
    Ok(sha256_hex(&parts))
}

/// The recorded output hashes of `step` if its hash is unchanged and its
/// output files are intact.
fn reusable_outputs(
    plan: &Plan,
    ws: &Workspace,
    state: &State,
    step: &Step,
    hash: &str,
) -> Option<BTreeMap<String, String>> {
    let prev = state.steps.get(&step.id)?;
    if prev.hash != hash {
        return None;
    }
    for out in &step.outputs {
        let path = store::table_path(&ws.output_dir, out, plan.is_published(out));
        if store::file_sha256(&path).as_ref() != prev.outputs.get(out) {
            return None;
        }
    }
    Some(prev.outputs.clone())
}

/// What the dry run found out about a step's LLM cost.
#[derive(Debug, Clone, PartialEq)]
pub enum StepEstimate {
    /// The step calls no model.
    NoModel,
    /// The step's own estimate from its inputs.
    Estimated(LlmEstimate),
    /// Its inputs come from a step that calls a model, so its cost is unknown before then.
    AfterModelOutput,
    /// It calls a model but has no estimate of its own: it is not run, and
    /// the steps that read its outputs are [`StepEstimate::AfterModelOutput`].
    NotEstimated,
}

/// Estimates every step's LLM calls and prompt tokens without sending
/// anything: steps that call no model are run in memory (nothing written),
/// steps that do report their estimate from their inputs, or none.
pub fn estimate(plan: &Plan, ws: &Workspace) -> anyhow::Result<Vec<StepEstimate>> {
    let mut tables: HashMap<&str, Arc<RecordBatch>> = HashMap::new();
    let mut out = Vec::with_capacity(plan.steps.len());
    for step in &plan.steps {
        let inputs: Option<Vec<Arc<RecordBatch>>> =
            step.inputs.iter().map(|t| tables.get(t.as_str()).cloned()).collect();
        let Some(inputs) = inputs else {
            out.push(StepEstimate::AfterModelOutput);
            continue;
        };
        let counters = StepCounters::default();
        let ctx = ws.context(step, &counters);
        match step.verb.llm_estimate(&inputs, &ctx)? {
            Some(e) => out.push(StepEstimate::Estimated(e)),
            None if step.verb.calls_model(&ctx)? => out.push(StepEstimate::NotEstimated),
            None => {
                let produced =
                    step.verb.run(&inputs, &ctx).with_context(|| format!("dry run of step `{}`", step.id))?;
                for (name, t) in step.outputs.iter().zip(produced) {
                    tables.insert(name, Arc::new(t));
                }
                out.push(StepEstimate::NoModel);
            }
        }
    }
    Ok(out)
}

/// What the run's loop hears from the threads it started.
enum Event {
    Step(usize, Box<StepStats>, Result<(), StepError>),
    /// The start-up check's result and its seconds.
    Checked(anyhow::Result<()>, f64),
}

struct Shared<'p> {
    plan: &'p Plan,
    ws: &'p Workspace,
    opts: &'p RunOptions,
    progress: Option<MultiProgress>,
    tables: Mutex<HashMap<String, Arc<RecordBatch>>>,
    /// Per step, whether it is done reading its inputs: a table is kept in
    /// memory only while a step that can run reads it (see `read_next`).
    finished: Mutex<Vec<bool>>,
    hashes: Mutex<HashMap<String, String>>,
    state: Mutex<State>,
}

/// Whether `table` stays in memory once step `finishing` is done with its
/// inputs: some other step that has not finished reads it and can run then
/// (its dependencies done). A reader further down the plan reads it back from
/// disk when it runs (it is always written first): keeping every table some
/// later step reads held the text units from finalize_graph to
/// community_reports, ~0.7 GB at 100 MB of input, through cluster_graph.
fn read_next(steps: &[Step], finished: &[bool], finishing: usize, table: &str) -> bool {
    steps.iter().enumerate().any(|(j, s)| {
        j != finishing
            && !finished[j]
            && s.inputs.iter().any(|t| t == table)
            && s.deps.iter().all(|&d| finished[d] || d == finishing)
    })
}

/// The table with its columns' buffers shrunk to their contents. Arrow
/// builders grow by doubling, so a verb's output can hold up to twice its
/// size, for as long as later steps keep it in memory. Columns shared with
/// another table (an input passed through) are left as they are.
fn shrunk(table: RecordBatch) -> RecordBatch {
    let (schema, mut columns, rows) = table.into_parts();
    for c in &mut columns {
        c.shrink_to_fit();
    }
    RecordBatch::try_new_with_options(schema, columns, &RecordBatchOptions::new().with_row_count(Some(rows)))
        .expect("shrinking keeps the schema and row count")
}

/// Hands the heap's free pages back to the system once a step is done.
/// glibc keeps what a step freed (the millions of small strings of an NLP
/// graph) in its heaps, where the next step's allocations do not always fit:
/// at 100 MB of input that was ~0.7 GB resident and holding nothing.
fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only touches free memory and is thread-safe.
    unsafe {
        libc::malloc_trim(0);
    }
}

impl Shared<'_> {
    /// Step `i` is done with its inputs: those no step that can run next reads leave memory.
    fn finished_reading(&self, i: usize) {
        let mut finished = self.finished.lock().unwrap();
        finished[i] = true;
        let mut tables = self.tables.lock().unwrap();
        for t in &self.plan.steps[i].inputs {
            if !read_next(&self.plan.steps, &finished, i, t) {
                tables.remove(t);
            }
        }
    }

    fn table(&self, name: &str) -> anyhow::Result<Arc<RecordBatch>> {
        if let Some(t) = self.tables.lock().unwrap().get(name) {
            return Ok(t.clone());
        }
        let path = store::table_path(&self.ws.output_dir, name, self.plan.is_published(name));
        let t = Arc::new(store::read_table(&path)?);
        self.tables.lock().unwrap().insert(name.to_string(), t.clone());
        Ok(t)
    }

    /// Runs step `i`; its stats (LLM usage included) whether or not it succeeded.
    fn execute(&self, i: usize) -> (StepStats, Result<(), StepError>) {
        let step = &self.plan.steps[i];
        let event = |finished| StepEvent { step: &step.id, index: i, total: self.plan.steps.len(), finished };
        if let Some(observe) = &self.opts.on_step {
            observe(&event(None));
        }
        let started = Instant::now();
        let counters = StepCounters::default();
        let mut stats = StepStats { verb: step.info.name.to_string(), ..StepStats::default() };
        let result = self.run_step(i, &counters, &mut stats);
        stats.overall = started.elapsed().as_secs_f64();
        stats.status = *result.as_ref().unwrap_or(&StepStatus::Failed);
        if stats.status == StepStatus::Ran {
            tracing::info!(step = %step.id, seconds = (stats.overall * 100.0).round() / 100.0, "finished");
        }
        stats.peak_rss_mb = peak_rss_mb();
        stats.warnings = counters.warnings.load(Ordering::Relaxed);
        stats.llm = counters.usage.by_model();
        stats.counts = counters.counts.lock().unwrap().clone();
        stats.llm_waves = counters.waves.counts();
        for &d in &step.deps {
            let id = &self.plan.steps[d].id;
            if !stats.after.contains(id) {
                stats.after.push(id.clone());
            }
        }
        stats.failed_items = std::mem::take(&mut *counters.failed.lock().unwrap());
        stats.unreadable_inputs = std::mem::take(&mut *counters.unreadable.lock().unwrap());
        if let Some(observe) = &self.opts.on_step {
            observe(&event(Some(stats.status)));
        }
        let result = result.map(drop).map_err(|error| StepError {
            error,
            failed_items: counters.failing.lock().unwrap().take(),
            unreadable_index_table: counters.unreadable_index_table.lock().unwrap().take(),
        });
        (stats, result)
    }

    /// Runs or skips step `i`, saying which.
    fn run_step(&self, i: usize, counters: &StepCounters, stats: &mut StepStats) -> anyhow::Result<StepStatus> {
        let step = &self.plan.steps[i];
        let ctx = self
            .ws
            .context(step, counters)
            .with_progress(self.progress.as_ref())
            .with_stop(&self.opts.stop)
            .with_tolerated_failures(self.opts.tolerated_failures);
        let input_hashes: Vec<String> = {
            let hashes = self.hashes.lock().unwrap();
            step.inputs.iter().map(|t| hashes.get(t).cloned().unwrap_or_default()).collect()
        };
        let hash = step_hash(step, &input_hashes, &ctx)?;
        if self.opts.resume {
            let state = self.state.lock().unwrap();
            let reusable = reusable_outputs(self.plan, self.ws, &state, step, &hash);
            if let Some(outputs) = reusable {
                tracing::info!(step = %step.id, "unchanged since the last run: skipped (--resume)");
                counters.unreadable.lock().unwrap().clone_from(&state.steps[&step.id].unreadable);
                drop(state);
                self.hashes.lock().unwrap().extend(outputs);
                self.finished_reading(i);
                return Ok(StepStatus::Skipped);
            }
        }
        let inputs = step.inputs.iter().map(|t| self.table(t)).collect::<anyhow::Result<Vec<_>>>()?;
        stats.rows_in = inputs.iter().map(|t| t.num_rows() as u64).sum();
        tracing::info!(step = %step.id, verb = step.info.name, "running");
        let outputs = step.verb.run(&inputs, &ctx)?;
        drop(inputs);
        self.finished_reading(i);
        if outputs.len() != step.outputs.len() {
            return Err(anyhow!(
                "verb `{}` returned {} tables, expected {}",
                step.info.name,
                outputs.len(),
                step.outputs.len()
            ));
        }
        let mut recorded = BTreeMap::new();
        for (name, table) in step.outputs.iter().zip(outputs.into_iter().map(shrunk)) {
            let path = store::table_path(&self.ws.output_dir, name, self.plan.is_published(name));
            let h = store::write_table(&path, &table)?;
            stats.rows_out += table.num_rows() as u64;
            recorded.insert(name.clone(), h.clone());
            self.hashes.lock().unwrap().insert(name.clone(), h);
            if let Some(observe) = &self.opts.on_table {
                observe(name, &table);
            }
            if read_next(&self.plan.steps, &self.finished.lock().unwrap(), i, name) {
                self.tables.lock().unwrap().insert(name.clone(), Arc::new(table));
            }
        }
        {
            let mut state = self.state.lock().unwrap();
            let unreadable = counters.unreadable.lock().unwrap().clone();
            state.steps.insert(step.id.clone(), StepState { hash, outputs: recorded, unreadable });
            let bytes = serde_json::to_vec_pretty(&*state)?;
            store::atomic_write(&state_path(&self.ws.output_dir), &bytes)?;
        }
        release_free_heap();
        Ok(StepStatus::Ran)
    }

    /// Names failed text units after their documents (the run's documents
    /// table, once the chunking step wrote it).
    fn name_failed_items(&self, items: &mut [FailedItem]) {
        if !items.iter().any(|i| i.name.starts_with(failures::TEXT_UNIT)) {
            return;
        }
        let Ok(documents) = self.table("documents") else { return };
        if let Err(e) = failures::name_text_units(items, &documents) {
            tracing::debug!("cannot name failed text units: {e:#}");
        }
    }
}

/// The overall line above the steps' bars: "step i/n" (i: the steps
/// started so far), the elapsed time, the steps running. Cleared when dropped.
fn overall_bar(multi: &MultiProgress, steps: usize) -> ProgressBar {
    let bar = multi.insert(0, ProgressBar::new(steps as u64)).with_finish(ProgressFinish::AndClear);
    bar.set_style(
        ProgressStyle::with_template("step {pos}/{len}, {elapsed} elapsed: {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.enable_steady_tick(Duration::from_millis(500));
    bar
}

/// Runs the plan. On a failing step, the steps already running finish, their
/// outputs are kept (so `--resume` continues from them), and the error names
/// the failing step; a stop request ([`interrupt`]) starts no further step.
/// stats.json is written in either case (`status`, `error`, `failed_items`).
pub fn run(plan: &Plan, ws: &Workspace, opts: &RunOptions) -> Result<RunStats, RunFailure> {
    let began = Instant::now();
    std::fs::create_dir_all(ws.output_dir.join(".steps"))
        .with_context(|| format!("creating {}", ws.output_dir.display()))?;
    store::remove_stale_temp_files(&ws.output_dir);
    store::remove_stale_temp_files(&ws.output_dir.join(".steps"));
    let shared = Shared {
        plan,
        ws,
        opts,
        progress: opts.progress.clone(),
        tables: Mutex::new(HashMap::new()),
        finished: Mutex::new(vec![false; plan.steps.len()]),
        hashes: Mutex::new(HashMap::new()),
        state: Mutex::new(load_state(&ws.output_dir)),
    };
    let n = plan.steps.len();
    let mut done = vec![false; n];
    let mut started_steps = vec![false; n];
    let mut stats = RunStats { pipeline: plan.name.clone(), ..RunStats::default() };
    let mut failure: Option<RunFailure> = None;
    let (tx, rx) = mpsc::channel::<Event>();
    let overall = shared.progress.as_ref().map(|multi| overall_bar(multi, n));
    let mut running_ids: Vec<&str> = Vec::new();
    std::thread::scope(|scope| {
        let mut running = 0;
        // Until the check passed, steps that name a model wait.
        let mut check_pending = false;
        if let Some(check) = opts.startup_check.clone() {
            check_pending = true;
            running += 1;
            let tx = tx.clone();
            scope.spawn(move || {
                let began = Instant::now();
                let result = check();
                let _ = tx.send(Event::Checked(result, began.elapsed().as_secs_f64()));
            });
        }
        loop {
            if failure.is_none() && opts.stop.requested() {
                failure = Some(RunFailure::Interrupted(interrupt::Interrupted));
            }
            if failure.is_none() {
                for (i, started) in started_steps.iter_mut().enumerate() {
                    let step = &plan.steps[i];
                    let ready =
                        step.deps.iter().all(|&d| done[d]) && !(check_pending && step.verb.model_to_call().is_some());
                    if !*started && ready {
                        *started = true;
                        running += 1;
                        running_ids.push(&step.id);
                        let tx = tx.clone();
                        let shared = &shared;
                        let offset = began.elapsed();
                        scope.spawn(move || {
                            let (mut step_stats, result) = shared.execute(i);
                            step_stats.start = offset.as_secs_f64();
                            let _ = tx.send(Event::Step(i, Box::new(step_stats), result));
                        });
                    }
                }
            }
            if running == 0 {
                break;
            }
            if let Some(bar) = &overall {
                bar.set_position(started_steps.iter().filter(|s| **s).count() as u64);
                bar.set_message(running_ids.join(", "));
            }
            let event = rx.recv().expect("a running step or the check reports");
            running -= 1;
            let (i, step_stats, result) = match event {
                Event::Checked(result, seconds) => {
                    check_pending = false;
                    stats.startup_check = Some(seconds);
                    if let Err(e) = result {
                        if matches!(failure, None | Some(RunFailure::Interrupted(_))) {
                            failure = Some(RunFailure::StartupCheck(e));
                        }
                    }
                    continue;
                }
                Event::Step(i, step_stats, result) => (i, step_stats, result),
            };
            let step = &plan.steps[i];
            // The step's answers are kept before the next steps start.
            if let Some(llm) = &ws.llm {
                llm.flush_cache();
            }
            running_ids.retain(|id| *id != step.id);
            stats.failed_items.extend(step_stats.failed_items.iter().cloned());
            stats.workflows.insert(step.id.clone(), *step_stats);
            match result {
                Ok(()) => done[i] = true,
                Err(StepError { error, mut failed_items, unreadable_index_table }) => {
                    if let Some(failed) = &mut failed_items {
                        shared.name_failed_items(&mut failed.items);
                        stats.failed_items.extend(failed.items.iter().cloned());
                    }
                    // A step that fails once a stop was requested was stopped:
                    // its model calls were refused (`LlmError::Interrupted`).
                    let interrupted = opts.stop.requested();
                    // A step's own failure outranks a stop (the run failed, whatever else stopped).
                    let outranks = match failure {
                        None => true,
                        Some(RunFailure::Interrupted(_)) => !interrupted,
                        Some(_) => false,
                    };
                    if outranks {
                        failure = Some(if interrupted {
                            RunFailure::Interrupted(interrupt::Interrupted)
                        } else {
                            // The items, named, are the step's error (`VerbContext::item_failures`).
                            let error = failed_items.clone().map_or(error, anyhow::Error::from);
                            let context = format!("step `{}` (verb `{}`) failed", step.id, step.info.name);
                            let error = error.context(context);
                            RunFailure::Step(Box::new(StepFailure { error, failed_items, unreadable_index_table }))
                        });
                    }
                }
            }
        }
    });
    shared.name_failed_items(&mut stats.failed_items);
    stats.total_runtime = began.elapsed().as_secs_f64();
    stats.sum_llm_usage();
    stats.status = match &failure {
        None => RunStatus::Completed,
        Some(RunFailure::Interrupted(_)) => RunStatus::Interrupted,
        Some(_) => RunStatus::Failed,
    };
    stats.error = failure.as_ref().map(|e| format!("{e:#}"));
    if failure.is_none() && plan.is_published("documents") {
        stats.num_documents = shared.table("documents").map(|t| t.num_rows() as u64).unwrap_or(0);
    }
    if let Some(llm) = &ws.llm {
        llm.flush_cache();
    }
    if let Some(requests) = &opts.storage_requests {
        stats.storage_requests = requests.counts();
    }
    let written = store::atomic_write(
        &ws.output_dir.join("stats.json"),
        &serde_json::to_vec_pretty(&stats).map_err(anyhow::Error::from)?,
    );
    if let Some(e) = failure {
        return Err(e);
    }
    written.map_err(anyhow::Error::from)?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::files::LocalFiles;
    use crate::test_verbs::{plan, CHECKED, MODEL_STEPS_RUN, RENDEZVOUS};

    fn workspace(dir: &Path) -> Workspace {
        Workspace {
            output_dir: dir.join("output"),
            files: Box::new(LocalFiles::new(dir.join("input"))),
            project: None,
            llm: None,
            previous: None,
        }
    }

    fn chain(value: i64, factor: i64) -> String {
        format!(
            "name: t\noutputs: [scaled]\nsteps:\n  - id: src\n    verb: source\n    outputs: [raw]\n    args: {{value: {value}}}\n  - id: scale\n    verb: scale\n    inputs: [raw]\n    outputs: [scaled]\n    args: {{factor: {factor}}}\n"
        )
    }

    /// Each step's status, by step id (the order of `workflows`).
    fn statuses(stats: &RunStats) -> Vec<(&str, StepStatus)> {
        stats.workflows.iter().map(|(k, s)| (k.as_str(), s.status)).collect()
    }

    fn scaled(ws: &Workspace) -> Vec<i64> {
        let t = store::read_table(&ws.output_dir.join("scaled.parquet")).unwrap();
        crate::table::ints(&t, "scaled", "v").unwrap()
    }

    #[test]
    fn an_optional_input_reaches_the_verb_when_listed() {
        let dir = tempfile::tempdir().unwrap();
        let ws = workspace(dir.path());
        let with_offset = chain(3, 2).replace("inputs: [raw]", "inputs: [raw, extra]")
            + "  - id: extra\n    verb: source\n    outputs: [extra]\n    args: {value: 5}\n";
        run(&plan(&with_offset).unwrap(), &ws, &RunOptions::default()).unwrap();
        assert_eq!(scaled(&ws), [3 * 2 + 5]);
        run(&plan(&chain(3, 2)).unwrap(), &ws, &RunOptions::default()).unwrap();
        assert_eq!(scaled(&ws), [3 * 2]);
    }

    #[test]
    fn shrunk_tables_are_equal_and_smaller() {
        let table = || {
            let mut ids = arrow_array::builder::StringBuilder::with_capacity(1000, 100_000);
            ids.append_value("a");
            let schema = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
                "id",
                arrow_schema::DataType::Utf8,
                false,
            )]));
            RecordBatch::try_new(schema, vec![Arc::new(ids.finish()) as arrow_array::ArrayRef]).unwrap()
        };
        let before = table().get_array_memory_size();
        let small = shrunk(table());
        assert_eq!(small, table());
        assert!(small.get_array_memory_size() * 10 < before, "{} vs {before}", small.get_array_memory_size());
    }

    #[test]
    fn tables_stay_in_memory_only_for_steps_that_can_run() {
        // src -> raw; a: raw -> x; b: x -> y; c: raw -> z.
        let p = plan(
            "name: t\noutputs: [y, z]\nsteps:\n  - {id: src, verb: source, outputs: [raw], args: {value: 1}}\n  - {id: a, verb: scale, inputs: [raw], outputs: [x], args: {factor: 2}}\n  - {id: b, verb: scale, inputs: [x], outputs: [y], args: {factor: 2}}\n  - {id: c, verb: scale, inputs: [raw], outputs: [z], args: {factor: 2}}\n",
        )
        .unwrap();
        let (src, a, b, c) = (0, 1, 2, 3);
        // When src is done, a and c can run: raw stays.
        assert!(read_next(&p.steps, &[false; 4], src, "raw"));
        // When a is done with raw, c still reads it.
        assert!(read_next(&p.steps, &[true, true, false, false], a, "raw"));
        assert!(!read_next(&p.steps, &[true, true, false, true], a, "raw"));
        // x's reader b waits for a: while a runs, x is not kept.
        assert!(!read_next(&p.steps, &[true, false, false, false], c, "x"));
        assert!(read_next(&p.steps, &[true, false, false, false], a, "x"));
        assert!(!read_next(&p.steps, &[true, true, true, true], b, "x"));
    }

    #[test]
    fn resume_skips_unchanged_and_reruns_changed_steps() {
        use StepStatus::{Ran, Skipped};
        let dir = tempfile::tempdir().unwrap();
        let ws = workspace(dir.path());
        let resume = RunOptions { resume: true, ..RunOptions::default() };
        let first = run(&plan(&chain(3, 2)).unwrap(), &ws, &resume).unwrap();
        assert_eq!(statuses(&first), [("scale", Ran), ("src", Ran)]);
        assert_eq!(scaled(&ws), [6]);
        assert!(ws.output_dir.join(".steps/raw.parquet").exists(), "intermediate table kept");

        let again = run(&plan(&chain(3, 2)).unwrap(), &ws, &resume).unwrap();
        assert_eq!(statuses(&again), [("scale", Skipped), ("src", Skipped)]);
        assert_eq!(resume_preview(&plan(&chain(3, 2)).unwrap(), &ws).unwrap(), [true, true]);

        // A changed arg reruns that step only.
        let changed = run(&plan(&chain(3, 5)).unwrap(), &ws, &resume).unwrap();
        assert_eq!(statuses(&changed), [("scale", Ran), ("src", Skipped)]);
        assert_eq!(scaled(&ws), [15]);

        // A changed upstream step reruns everything downstream.
        assert_eq!(resume_preview(&plan(&chain(4, 5)).unwrap(), &ws).unwrap(), [false, false]);
        let upstream = run(&plan(&chain(4, 5)).unwrap(), &ws, &resume).unwrap();
        assert_eq!(statuses(&upstream), [("scale", Ran), ("src", Ran)]);
        assert_eq!(scaled(&ws), [20]);

        // A damaged or missing output reruns its step.
        std::fs::write(ws.output_dir.join("scaled.parquet"), b"garbage").unwrap();
        let repaired = run(&plan(&chain(4, 5)).unwrap(), &ws, &resume).unwrap();
        assert_eq!(statuses(&repaired), [("scale", Ran), ("src", Skipped)]);
        assert_eq!(scaled(&ws), [20]);

        // Without --resume everything runs.
        let full = run(&plan(&chain(4, 5)).unwrap(), &ws, &RunOptions::default()).unwrap();
        assert_eq!(statuses(&full), [("scale", Ran), ("src", Ran)]);
        let stats: serde_json::Value =
            serde_json::from_slice(&std::fs::read(ws.output_dir.join("stats.json")).unwrap()).unwrap();
        assert_eq!(stats["workflows"]["scale"]["rows_out"], 1);
    }

    #[test]
    fn independent_steps_run_concurrently() {
        let dir = tempfile::tempdir().unwrap();
        let yaml = "name: t\noutputs: [x, y]\nsteps:\n  - id: src\n    verb: source\n    outputs: [raw]\n    args: {value: 1}\n  - id: left\n    verb: rendezvous\n    inputs: [raw]\n    outputs: [x]\n    args: {peers: 2}\n  - id: right\n    verb: rendezvous\n    inputs: [raw]\n    outputs: [y]\n    args: {peers: 2}\n";
        RENDEZVOUS.store(0, Ordering::SeqCst);
        run(&plan(yaml).unwrap(), &workspace(dir.path()), &RunOptions::default()).unwrap();
    }

    #[test]
    fn failure_names_the_step_and_keeps_finished_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let ws = workspace(dir.path());
        let yaml = "name: t\noutputs: [b]\nsteps:\n  - id: src\n    verb: source\n    outputs: [a]\n    args: {value: 1}\n  - id: boom\n    verb: fail\n    inputs: [a]\n    outputs: [b]\n";
        let err = run(&plan(yaml).unwrap(), &ws, &RunOptions::default()).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("step `boom`") && msg.contains("deliberate failure"), "{msg}");
        assert!(ws.output_dir.join(".steps/a.parquet").exists());
        assert!(!ws.output_dir.join("b.parquet").exists());
        let preview = resume_preview(&plan(yaml).unwrap(), &ws).unwrap();
        assert_eq!(preview, [true, false], "a rerun with --resume continues after the finished step");
    }

    /// src (no model) -> a step naming `model`, with the start-up check `check`.
    fn gated(dir: &Path, model: &str, check: StartupCheck) -> (Workspace, Result<RunStats, RunFailure>) {
        let ws = workspace(dir);
        let yaml = format!(
            "name: t\noutputs: [b]\nsteps:\n  - {{id: src, verb: source, outputs: [a], args: {{value: 1}}}}\n  - {{id: call, verb: model_step, inputs: [a], outputs: [b], args: {{model_id: {model}}}}}\n"
        );
        let opts = RunOptions { startup_check: Some(check), ..RunOptions::default() };
        let result = run(&plan(&yaml).unwrap(), &ws, &opts);
        (ws, result)
    }

    #[test]
    fn steps_without_a_model_run_beside_the_startup_check_and_the_others_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("output/.steps/a.parquet");
        // The check passes only once src wrote its output: the engine must run
        // src while the check is pending (one after the other, this would time out).
        let check: StartupCheck = Arc::new(move || {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !raw.exists() {
                anyhow::ensure!(Instant::now() < deadline, "src did not run beside the check");
                std::thread::yield_now();
            }
            CHECKED.lock().unwrap().push("passing".into());
            Ok(())
        });
        let (ws, result) = gated(dir.path(), "passing", check);
        let stats = result.unwrap();
        assert!(ws.output_dir.join("b.parquet").exists());
        assert!(stats.startup_check.is_some());
        assert!(stats.workflows["call"].start >= stats.workflows["src"].start);
    }

    #[test]
    fn a_failing_startup_check_fails_the_run_with_its_message_before_any_model_step() {
        let dir = tempfile::tempdir().unwrap();
        let check: StartupCheck = Arc::new(|| anyhow::bail!("settings.yaml:5: nothing is listening at 127.0.0.1:9"));
        let (ws, result) = gated(dir.path(), "failing", check);
        let err = result.unwrap_err();
        assert!(matches!(err, RunFailure::StartupCheck(_)), "{err:#}");
        assert_eq!(format!("{err:#}"), "settings.yaml:5: nothing is listening at 127.0.0.1:9");
        assert!(!MODEL_STEPS_RUN.lock().unwrap().contains(&"failing".to_string()), "the model step never started");
        assert!(!ws.output_dir.join("b.parquet").exists());
        let stats: serde_json::Value =
            serde_json::from_slice(&std::fs::read(ws.output_dir.join("stats.json")).unwrap()).unwrap();
        assert_eq!(stats["status"], "failed");
        assert!(stats["error"].as_str().unwrap().contains("nothing is listening"), "{stats}");
        assert!(stats["workflows"].get("call").is_none(), "{stats}");
    }
}
