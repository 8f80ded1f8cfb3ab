//! Running a project's pipeline: `index` (from nothing, or `--resume`),
//! `update` (the previous index as the starting point), and the dry run.
//! Both stage their outputs and publish them at once
//! (`graphrag_engine::staging`), under the writer lock, keeping
//! document_status.parquet current (`crate::doc_status`).
//!
//! The update: the pipeline runs again over the whole input, into
//! `output/.update/`: unchanged documents give the same chunks, hence the
//! same prompts, which the LLM cache answers (no tokens); merged
//! descriptions, communities and reports that did not change give the same
//! prompts again; clustering is warm-started from the previous communities
//! so untouched ones keep their members and numbers (and so their cached
//! reports). Only when every step succeeded are the staged tables published
//! together; until then the previous index stays live, and a rerun resumes
//! from the staged steps.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use arrow_array::RecordBatch;
use graphrag_engine::context::PublishedTables;
use graphrag_engine::failures::{plural, write_list};
use graphrag_engine::pipeline::Plan;
use graphrag_engine::runner::{self, RunFailure, RunOptions, StepEstimate, StepObserver, Workspace};
use graphrag_engine::settings;
use graphrag_engine::stats::RunStats;
use graphrag_engine::storage::counting::{RequestSnapshot, RunRequests};
use graphrag_engine::storage::{Location, Writer};
use graphrag_engine::table::strings;
use graphrag_engine::{interrupt, staging};

use crate::doc_status;
use indicatif::MultiProgress;

use crate::export::{self, LanceDbExport};
use crate::project::{OpenOptions, Project};

/// How a run reports progress and what it checks first.
#[derive(Clone, Default)]
pub struct RunSettings {
    /// Skip the start-up check (one tiny request per model endpoint the run
    /// uses, which turns a server that is down into one clear error at once).
    pub skip_validation: bool,
    /// Where to draw progress bars; `None`: none.
    pub progress: Option<MultiProgress>,
    /// Called as each step starts and ends.
    pub on_step: Option<StepObserver>,
    /// Stops this run (and no other run of the process) cleanly when
    /// requested; [`crate::stop`] stops every run.
    pub stop: interrupt::StopFlag,
}

/// How [`crate::index`] runs.
#[derive(Clone, Default)]
pub struct IndexOptions {
    /// Start from what an interrupted run staged (or the live index), skipping
    /// the steps whose verb, args and inputs are unchanged.
    pub resume: bool,
    /// Progress, start-up check and stop flag.
    pub run: RunSettings,
}

/// How [`crate::update`] runs.
#[derive(Clone)]
pub struct UpdateOptions {
    /// `auto`: the pipeline the index was built with; else as [`OpenOptions::method`].
    pub method: String,
    /// Neither read nor write the model answer cache (every document is paid for again).
    pub no_cache: bool,
    /// Progress, start-up check and stop flag.
    pub run: RunSettings,
}

impl Default for UpdateOptions {
    fn default() -> UpdateOptions {
        UpdateOptions { method: "auto".into(), no_cache: false, run: RunSettings::default() }
    }
}

/// A run that published its index.
pub struct RunReport {
    /// The steps that ran, in order.
    pub plan: Plan,
    /// Per-step timings, model usage and the items failures tolerated (the
    /// published stats.json).
    pub stats: RunStats,
    /// Where the index was published: its folder, or its object store URL.
    pub published_to: String,
    /// The documents published (`None` for a pipeline without a documents table).
    pub documents: Option<RecordBatch>,
    /// `update`: the documents added, changed and removed.
    pub changes: Option<Changes>,
    /// The LanceDB tables written when settings.yaml asks for them.
    pub lancedb: Option<LanceDbExport>,
}

/// A run that failed or was stopped. The previous index is unchanged;
/// `note` says what the run left (its failed items, where its stats are,
/// what to run next), for the caller to show before the error.
#[derive(Debug)]
pub struct RunError {
    /// Why the run ended.
    pub error: anyhow::Error,
    /// What the run left and what to run next, shown before the error;
    /// `None` for an interruption or a failed start-up check.
    pub note: Option<String>,
    pub(crate) kind: RunErrorKind,
}

/// What ended a run (read through [`RunError::interrupted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunErrorKind {
    /// Stopped ([`interrupt::request`], or the run's stop flag).
    Interrupted,
    /// Any other failure.
    Failed,
}

impl RunError {
    /// Whether the run was stopped ([`interrupt::request`]) rather than failed.
    pub fn interrupted(&self) -> bool {
        self.kind == RunErrorKind::Interrupted
    }
}

impl From<anyhow::Error> for RunError {
    fn from(error: anyhow::Error) -> RunError {
        RunError { error, note: None, kind: RunErrorKind::Failed }
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(note) = &self.note {
            writeln!(f, "{note}")?;
        }
        write!(f, "{:#}", self.error)
    }
}

/// So that a caller can put a failed run behind `?` in its own error type;
/// the run's error is the source.
impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        let error: &(dyn std::error::Error + Send + Sync + 'static) = self.error.as_ref();
        Some(error)
    }
}

/// Documents added, changed (same title, new content), removed and
/// unchanged between two documents tables.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Changes {
    /// Titles of the documents new in the input.
    pub added: Vec<String>,
    /// Titles whose content changed.
    pub changed: Vec<String>,
    /// Titles no longer in the input.
    pub removed: Vec<String>,
    /// How many documents are the same as before.
    pub unchanged: usize,
}

/// A pipeline that would run, for its plan and estimates (nothing written,
/// nothing sent).
pub struct DryRun {
    /// The steps the run would run, in order.
    pub plan: Plan,
    pub(crate) workspace: Workspace,
    /// Where the run would publish: the output folder, or its bucket URL.
    pub publishes_to: String,
    resume: bool,
}

impl DryRun {
    /// Per step, whether the run would skip it as unchanged.
    pub fn skipped_steps(&self) -> anyhow::Result<Vec<bool>> {
        if self.resume {
            runner::resume_preview(&self.plan, &self.workspace)
        } else {
            Ok(vec![false; self.plan.steps.len()])
        }
    }

    /// Calls and prompt tokens per LLM step, computed from the real inputs
    /// (steps without a model run in memory).
    pub fn estimate(&self) -> anyhow::Result<Vec<StepEstimate>> {
        runner::estimate(&self.plan, &self.workspace)
    }
}

/// The run options of a project's settings, with the start-up check of its
/// models unless `run.skip_validation` (it runs beside the steps that call no
/// model, and those that do wait for it: [`runner::StartupCheck`]).
pub(crate) fn run_options(project: &Project, resume: bool, run: &RunSettings) -> RunOptions {
    let startup_check: Option<runner::StartupCheck> = (!run.skip_validation).then(|| {
        let check = project.models_check();
        Arc::new(move || check.run()) as runner::StartupCheck
    });
    RunOptions {
        resume,
        progress: run.progress.clone(),
        on_step: run.on_step.clone(),
        tolerated_failures: project.settings().failures.tolerated_fraction,
        startup_check,
        stop: run.stop.clone(),
        storage_requests: Some(RunRequests {
            since: RequestSnapshot::now(),
            locations: project.storage.remote_locations(),
        }),
        ..RunOptions::default()
    }
}

/// The plan `index` would run, without running it.
pub fn index_dry_run(project: Project, resume: bool) -> DryRun {
    let index = project.storage.output.working_copy();
    let publishes_to = project.storage.output.describe();
    let (plan, workspace) = project.workspace(index.path(), None);
    DryRun { plan, workspace, publishes_to, resume }
}

/// Indexes the input folder: the run is staged beside the live index and
/// published only once every step succeeded (with `resume`, from what an
/// interrupted run staged, or from the live index; without, from nothing).
/// Blocks until done; `opts.run.stop` (or [`interrupt::request`], every
/// run) stops it cleanly.
pub fn index(project: Project, opts: &IndexOptions) -> Result<RunReport, RunError> {
    index_with(project, opts, |_, _| Ok(()))
}

/// Adapts a run's plan before it runs (given the output location).
pub(crate) type AdaptPlan<'a> = &'a dyn Fn(&mut Plan, &Location) -> anyhow::Result<()>;

/// [`index`] with the plan adapted first (the merge of shards gives some
/// steps their outputs from the shards' fragments: `crate::shard`).
pub(crate) fn index_with(
    mut project: Project,
    opts: &IndexOptions,
    adapt: impl FnOnce(&mut Plan, &Location) -> anyhow::Result<()>,
) -> Result<RunReport, RunError> {
    project.llm.stop_with(&opts.run.stop);
    let settings = project.settings().clone();
    let run_opts = run_options(&project, opts.resume, &opts.run);
    let output = project.storage.output.clone();
    let writer = output.lock_for_writing()?;
    let staging_dir = writer.prepare(opts.resume)?;
    let index = writer.index();
    let had_index = index.has_index();
    let root = project.root.clone();
    let (mut plan, ws) = project.workspace(&staging_dir, None);
    adapt(&mut plan, &output)?;
    tracing::info!(pipeline = %plan.name, steps = plan.steps.len(), "indexing {}", root.display());
    let (stats, documents) =
        doc_status::run_tracked(&plan, &ws, &run_opts, index.path(), || writer.commit(), || writer.publish())
            .map_err(|e| failed(e, &output, had_index, "graphrag-rs index --resume"))?;
    warn_about_tolerated_failures(&stats);
    // The export reads the published version, as every reader does.
    drop(writer);
    let lancedb = export::after_run(&root, &settings);
    Ok(RunReport { plan, stats, published_to: output.describe(), documents, changes: None, lancedb })
}

/// Output folder, writer lock (none for a dry run) and project of an update.
pub(crate) fn open_for_update(
    root: &Path,
    opts: &UpdateOptions,
    dry_run: bool,
) -> anyhow::Result<(Project, Option<Writer>)> {
    let loaded = settings::load(root)?;
    let storage = crate::project::open_storage(root, &loaded)?;
    // Before the writer lock, which makes the output folder.
    crate::project::check_folders(&storage, &loaded)?;
    let output = storage.output.clone();
    let index = output.working_copy();
    // A dry run changes nothing: it neither takes the writer lock nor waits for it.
    let lock = if dry_run {
        staging::recover_if_idle(index.path())?;
        None
    } else {
        Some(output.lock_for_writing()?)
    };
    let method = match opts.method.as_str() {
        // A dry run or a shard (no lock) has no working copy brought up to
        // date: on an object store it reads the published version's stats.
        "auto" if lock.is_some() => previous_method(index.read_here(STATS)),
        "auto" => previous_method(output.read_published(STATS)?),
        other => Some(other.to_string()),
    }
    .unwrap_or_else(|| "auto".into());
    let project = Project::with_storage(root, loaded, storage, &OpenOptions { method, no_cache: opts.no_cache })?;
    let cache = &project.settings().cache;
    // --no-cache asks for it; a cache.type that keeps nothing is more likely an oversight.
    if !cache.enabled() && project.has_index() && !opts.no_cache {
        anyhow::bail!(
            "`update` reuses the cached model answers of unchanged documents, and cache.type is `{}` in settings.yaml, so it would pay for every document again: set cache.type to `json` (the default), or run `graphrag-rs index`",
            cache.kind
        );
    }
    Ok((project, lock))
}

/// The plan `update` would run (with the uncached model calls it would
/// make), without running it.
pub fn update_dry_run(root: &Path, opts: &UpdateOptions) -> anyhow::Result<DryRun> {
    let (project, _) = open_for_update(root, opts, true)?;
    let index = project.storage.output.working_copy();
    let publishes_to = project.storage.output.describe();
    let previous = project.has_index().then(|| Box::new(PublishedTables(index.clone())) as _);
    let (plan, workspace) = project.workspace(&staging::dir(index.path()), previous);
    Ok(DryRun { plan, workspace, publishes_to, resume: true })
}

/// Brings the index up to date with the input folder (new, changed and
/// removed documents), reusing cached model answers for everything
/// unchanged; the previous index stays live until it succeeds. Steps an
/// interrupted update finished are kept (resume). Blocks until done;
/// `opts.run.stop` (or [`interrupt::request`], every run) stops it cleanly.
pub fn update(root: &Path, opts: &UpdateOptions) -> Result<RunReport, RunError> {
    update_with(root, opts, &|_, _| Ok(()))
}

/// [`update`] with the plan adapted first (`crate::shard`'s merge).
pub(crate) fn update_with(root: &Path, opts: &UpdateOptions, adapt: AdaptPlan) -> Result<RunReport, RunError> {
    let since = RequestSnapshot::now();
    let (mut project, writer) = open_for_update(root, opts, false)?;
    let writer = writer.context("an update holds the writer lock")?;
    let output = project.storage.output.clone();
    project.llm.stop_with(&opts.run.stop);
    let index = writer.index();
    let has_index = index.has_index();
    let settings = project.settings().clone();
    let requests = RunRequests { since, locations: project.storage.remote_locations() };
    let run_opts = RunOptions { storage_requests: Some(requests), ..run_options(&project, true, &opts.run) };
    let previous = has_index.then(|| Box::new(PublishedTables(index.clone())) as _);
    let (mut plan, ws) = project.workspace(&writer.staging_dir(), previous);
    adapt(&mut plan, &output)?;
    if !has_index {
        tracing::info!("no index in {} yet: indexing every document", output.describe());
    }
    let before = if has_index { index.read_table("documents")? } else { None };
    let (stats, documents) =
        doc_status::run_tracked(&plan, &ws, &run_opts, index.path(), || writer.commit(), || writer.publish())
            .map_err(|e| failed(e, &output, has_index, "graphrag-rs update"))?;
    warn_about_tolerated_failures(&stats);
    let changes = documents.as_ref().map(|after| changes(before.as_ref(), after)).transpose()?;
    drop(writer);
    let lancedb = export::after_run(root, &settings);
    Ok(RunReport { plan, stats, published_to: output.describe(), documents, changes, lancedb })
}

/// A published index's run record.
const STATS: &str = "stats.json";

/// The pipeline the previous index was built with (from its stats.json),
/// when it is one `--method` can name.
fn previous_method(stats: Option<Vec<u8>>) -> Option<String> {
    let stats: serde_json::Value = serde_json::from_slice(&stats?).ok()?;
    let name = stats.get("pipeline")?.as_str()?;
    matches!(name, "standard" | "fast" | "light").then(|| name.to_string())
}

fn changes(before: Option<&RecordBatch>, after: &RecordBatch) -> anyhow::Result<Changes> {
    let by_title = |t: &RecordBatch| -> anyhow::Result<BTreeMap<String, BTreeSet<String>>> {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (id, title) in strings(t, "documents", "id")?.into_iter().zip(strings(t, "documents", "title")?) {
            m.entry(title.to_string()).or_default().insert(id.to_string());
        }
        Ok(m)
    };
    let old = before.map(by_title).transpose()?.unwrap_or_default();
    let new = by_title(after)?;
    let mut c = Changes::default();
    for (title, ids) in &new {
        match old.get(title) {
            None => c.added.push(title.clone()),
            Some(prev) if prev != ids => c.changed.push(title.clone()),
            Some(_) => c.unchanged += 1,
        }
    }
    c.removed = old.keys().filter(|t| !new.contains_key(*t)).cloned().collect();
    Ok(c)
}

/// A failed run's error with its note: its failed items, one per line, and
/// what was kept and what to run next. An interruption has no note.
fn failed(failure: RunFailure, output: &Location, had_index: bool, rerun: &str) -> RunError {
    let (failed_items, unreadable_table) = match &failure {
        RunFailure::Interrupted(_) => {
            return RunError { error: failure.into(), note: None, kind: RunErrorKind::Interrupted };
        }
        // A failed start-up check is about the settings, not the run: its error alone.
        RunFailure::StartupCheck(_) => return RunError::from(anyhow::Error::from(failure)),
        RunFailure::Step(step) => (step.failed_items.as_ref(), step.unreadable_index_table.clone()),
        RunFailure::Other(_) => (None, None),
    };
    let mut note = String::new();
    if let Some(failed) = failed_items {
        note.push_str(&format!("{} of {} {} failed:", failed.items.len(), failed.total, plural(failed.what)));
        let _ = write_list(&mut note, &failed.items);
        note.push('\n');
    }
    let error = anyhow::Error::from(failure);
    let with_note = |note: String| RunError { error, note: Some(note), kind: RunErrorKind::Failed };
    // What an update builds on is broken: neither queryable nor repaired by another update.
    if let Some(table) = unreadable_table {
        note.push_str(&format!(
            "The index in {} cannot be queried or updated while its table `{table}` cannot be read: `graphrag-rs index` builds it anew from the input (the model's answers cached so far are reused).",
            output.describe(),
        ));
        return with_note(note);
    }
    if had_index {
        note.push_str(&format!("The previous index in {} is unchanged and queryable. ", output.describe()));
    }
    note.push_str(&format!(
        "This run's stats: {}. `{rerun}` asks the model only what was not answered yet.",
        staging::dir(output.working_copy().path()).join("stats.json").display()
    ));
    with_note(note)
}

/// Failed items the run tolerated (`failures.tolerated_fraction`), named:
/// a warning, as the index is missing them.
fn warn_about_tolerated_failures(stats: &RunStats) {
    if stats.failed_items.is_empty() {
        return;
    }
    let mut list = String::new();
    let _ = write_list(&mut list, &stats.failed_items);
    tracing::warn!(
        "{} items failed and were left out (tolerated by failures.tolerated_fraction); the next run asks them again:{list}",
        stats.failed_items.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphrag_engine::schema;

    #[test]
    fn a_run_error_is_a_std_error_whose_source_is_the_runs_error() {
        let e = RunError {
            error: anyhow::anyhow!("step `x` failed"),
            note: Some("kept".into()),
            kind: RunErrorKind::Failed,
        };
        let as_std: &dyn std::error::Error = &e;
        assert_eq!(as_std.source().map(ToString::to_string).as_deref(), Some("step `x` failed"));
        assert_eq!(as_std.to_string(), "kept\nstep `x` failed");
    }

    fn docs(rows: &[(&str, &str)]) -> RecordBatch {
        let n = rows.len();
        RecordBatch::try_new(
            schema::documents(arrow_schema::DataType::LargeUtf8),
            vec![
                schema::text_col(rows.iter().map(|r| r.0)),
                schema::int_col(0..n as i64),
                schema::text_col(rows.iter().map(|r| r.1)),
                schema::text_col(vec!["t"; n]),
                schema::id_list_col(vec![Vec::<String>::new(); n]),
                schema::text_col(vec!["2026"; n]),
                schema::opt_text_col(vec![None; n]),
            ],
        )
        .unwrap()
    }

    #[test]
    fn changes_by_title_and_content() {
        let before = docs(&[("1", "a.txt"), ("2", "b.txt"), ("3", "c.txt")]);
        let after = docs(&[("1", "a.txt"), ("4", "b.txt"), ("5", "d.txt")]);
        let c = changes(Some(&before), &after).unwrap();
        assert_eq!(
            c,
            Changes {
                added: vec!["d.txt".into()],
                changed: vec!["b.txt".into()],
                removed: vec!["c.txt".into()],
                unchanged: 1
            }
        );
        assert_eq!(changes(None, &after).unwrap().added.len(), 3);
    }
}
