//! What a verb may use besides its input tables: read access to the input
//! files (a `storage::files::FileSource`), progress bars and warning counters. Verbs never open files
//! themselves, so storage can change (object stores) without touching them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use anyhow::Context;
use arrow_array::RecordBatch;
use indicatif::{MultiProgress, ProgressBar, ProgressFinish, ProgressStyle};

use crate::failures::{FailedItem, FailedItems};
use crate::interrupt::{Interrupted, StopFlag};
use crate::llm::{Answer, LlmService, UsageCounters};
use crate::prompts::{self, PromptTemplate};
use crate::storage::files::FileSource;

/// A step's model calls (those the cache did not answer) per dependent wave:
/// a call of wave k+1 waits for an answer of wave k (a gleaning turn for the
/// first extraction answer, a summary round for the previous round, a
/// report for its sub-communities' reports). No step can take less than
/// ⌈calls / concurrency⌉ round trips per wave: the benchmark's
/// critical-path bound is made of these (stats.json `llm_waves`).
#[derive(Debug, Default)]
pub struct Waves(Mutex<Vec<u64>>);

impl Waves {
    /// Counts `answer` in wave `wave` unless the cache gave it.
    pub fn record<T>(&self, wave: usize, answer: &Answer<T>) {
        if answer.from_cache {
            return;
        }
        let mut waves = self.0.lock().unwrap();
        if waves.len() <= wave {
            waves.resize(wave + 1, 0);
        }
        waves[wave] += 1;
    }

    /// Calls per wave so far, wave 0 first (stats.json `llm_waves`).
    pub fn counts(&self) -> Vec<u64> {
        self.0.lock().unwrap().clone()
    }
}

/// Counters a verb bumps; they end up in stats.json.
#[derive(Debug, Default)]
pub struct StepCounters {
    /// Warnings logged through [`VerbContext::warn`].
    pub warnings: AtomicU64,
    /// LLM calls, tokens, cache hits, retries, per model.
    pub usage: UsageCounters,
    /// Model calls per dependent wave.
    pub waves: Waves,
    /// Verb-specific counts (records dropped or repaired, ...).
    pub counts: Mutex<BTreeMap<String, u64>>,
    /// Items that failed within the tolerated fraction (the step went on).
    pub failed: Mutex<Vec<FailedItem>>,
    /// Input files that could not be read (the step went on without them).
    pub unreadable: Mutex<Vec<FailedItem>>,
    /// The items that failed the step ([`VerbContext::item_failures`]): the
    /// runner reports the step's failure with them.
    pub(crate) failing: Mutex<Option<FailedItems>>,
    /// A table of the index an update builds on that the step could not
    /// read ([`Previous::table`]).
    pub unreadable_index_table: Mutex<Option<String>>,
}

/// Project files a verb may read (prompt templates) or write besides tables
/// (snapshots such as GraphML), resolved by the engine.
pub trait ProjectFiles: Send + Sync {
    /// The text of a project file; `None` when there is no such file.
    fn read_text(&self, rel_path: &str) -> anyhow::Result<Option<String>>;
    /// Writes `name` into the output folder atomically.
    fn write_output(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()>;
    /// Writes a table into the output folder as `<name>.parquet`, atomically.
    fn write_table(&self, name: &str, table: &RecordBatch) -> anyhow::Result<()>;
}

/// Project files of a local project folder.
pub struct LocalProject {
    /// The project folder, which `read_text` paths are relative to.
    pub root: PathBuf,
    /// Where outputs are written: the run's staging folder.
    pub output_dir: PathBuf,
}

impl ProjectFiles for LocalProject {
    fn read_text(&self, rel_path: &str) -> anyhow::Result<Option<String>> {
        let path = self.root.join(rel_path);
        if !path.exists() {
            return Ok(None);
        }
        std::fs::read_to_string(&path).map(Some).with_context(|| format!("reading {}", path.display()))
    }

    fn write_output(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        let path = self.output_dir.join(name);
        crate::store::atomic_write(&path, bytes).with_context(|| format!("writing {}", path.display()))
    }

    fn write_table(&self, name: &str, table: &RecordBatch) -> anyhow::Result<()> {
        crate::store::write_table(&crate::store::table_path(&self.output_dir, name, true), table).map(|_| ())
    }
}

/// The published tables of the index an update starts from (read-only).
pub trait PreviousIndex: Send + Sync {
    /// The table, or `None` when that index has none.
    fn table(&self, name: &str) -> Result<Option<RecordBatch>, UnreadableIndexTable>;
    /// A hash of the table's file (for step hashes), `None` when absent.
    fn fingerprint(&self, name: &str) -> Option<String>;
}

/// The tables of the index a run resumes from.
pub struct PublishedTables(pub crate::storage::WorkingCopy);

/// A table of the index an update builds on that cannot be read: the index
/// is not queryable as it is, and only a whole `index` rebuilds it.
#[derive(Debug, thiserror::Error)]
#[error("the index's table `{table}` cannot be read: {cause:#}")]
pub struct UnreadableIndexTable {
    /// The table's name (`entities`, …).
    pub table: String,
    cause: anyhow::Error,
}

impl PreviousIndex for PublishedTables {
    fn table(&self, name: &str) -> Result<Option<RecordBatch>, UnreadableIndexTable> {
        self.0.read_table(name).map_err(|cause| UnreadableIndexTable { table: name.to_string(), cause })
    }

    fn fingerprint(&self, name: &str) -> Option<String> {
        crate::store::file_sha256(&self.0.table_path(name))
    }
}

/// The index an update builds on, as a step reads it: a table it cannot
/// read is recorded in the step's counters, for the runner to report
/// ([`crate::runner::StepFailure::unreadable_index_table`]).
#[derive(Clone, Copy)]
pub struct Previous<'a> {
    index: &'a dyn PreviousIndex,
    counters: &'a StepCounters,
}

impl Previous<'_> {
    /// The table, or `None` when that index has none.
    pub fn table(&self, name: &str) -> Result<Option<RecordBatch>, UnreadableIndexTable> {
        self.index.table(name).inspect_err(|e| {
            *self.counters.unreadable_index_table.lock().unwrap() = Some(e.table.clone());
        })
    }

    /// A hash of the table's file (for step hashes), `None` when absent.
    pub fn fingerprint(&self, name: &str) -> Option<String> {
        self.index.fingerprint(name)
    }
}

/// One shard of a model stage (`index --shard K/N --phase model`): the
/// verb asks the model only for its items whose key hashes to `index` of
/// `count` ([`graphrag_operations::ids::shard_of`]) and, when its calls come
/// in dependent waves (reports after their sub-communities' reports), only
/// those of `wave`, reading the earlier waves' answers from the cache. What
/// it returns then is no step's output (its other items are left out or as
/// without a model); its answers, cached, are what the shard is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemShard {
    /// K: the shard (0 to `count` - 1).
    pub index: usize,
    /// N: the model stage's shards.
    pub count: usize,
    /// The wave of the step's calls this shard asks (0: those that wait for no other answer).
    pub wave: usize,
}

impl ItemShard {
    /// Whether the item with `key` is this shard's.
    pub fn asks(&self, key: &str) -> bool {
        graphrag_operations::ids::shard_of(key, self.count) == self.index
    }
}

/// What one step's verb gets besides its input tables. The engine builds it
/// for each step; a verb's tests build it with [`VerbContext::new`] and only
/// what they need.
#[derive(Clone, Copy)]
pub struct VerbContext<'a> {
    /// The step's id in the pipeline (for messages, progress and counters).
    pub step_id: &'a str,
    /// The project's input files.
    pub files: &'a dyn FileSource,
    /// Where the step's counts go (stats.json).
    pub counters: &'a StepCounters,
    project: Option<&'a dyn ProjectFiles>,
    llm: Option<&'a LlmService>,
    progress: Option<&'a MultiProgress>,
    previous: Option<&'a dyn PreviousIndex>,
    stop: Option<&'a StopFlag>,
    tolerated_failures: f64,
    item_shard: Option<ItemShard>,
}

impl<'a> VerbContext<'a> {
    /// A context without project files, models, progress bars or a previous
    /// index (each an error or absent when asked for), tolerating no failed item.
    pub fn new(step_id: &'a str, files: &'a dyn FileSource, counters: &'a StepCounters) -> Self {
        VerbContext {
            step_id,
            files,
            counters,
            project: None,
            llm: None,
            progress: None,
            previous: None,
            stop: None,
            tolerated_failures: 0.0,
            item_shard: None,
        }
    }

    /// This context for one shard of a model stage (see [`ItemShard`]).
    pub fn with_item_shard(mut self, shard: ItemShard) -> Self {
        self.item_shard = Some(shard);
        self
    }

    /// The model stage's shard this step runs, if it runs one (see [`ItemShard`]).
    pub fn item_shard(&self) -> Option<ItemShard> {
        self.item_shard
    }

    /// Whether this step asks the model for the item with `key`: always,
    /// unless it runs one shard of a model stage and the item is another's.
    pub fn asks(&self, key: &str) -> bool {
        self.item_shard.is_none_or(|s| s.asks(key))
    }

    /// The fraction of a step's items whose model call may fail before the
    /// step does (`failures.tolerated_fraction`).
    pub(crate) fn with_tolerated_failures(mut self, fraction: f64) -> Self {
        self.tolerated_failures = fraction;
        self
    }

    /// Prompt templates and the output folder ([`Self::prompt`], [`Self::write_output`]).
    pub fn with_project(mut self, project: Option<&'a dyn ProjectFiles>) -> Self {
        self.project = project;
        self
    }

    /// The project's models ([`Self::llm`]).
    pub fn with_llm(mut self, llm: Option<&'a LlmService>) -> Self {
        self.llm = llm;
        self
    }

    pub(crate) fn with_progress(mut self, progress: Option<&'a MultiProgress>) -> Self {
        self.progress = progress;
        self
    }

    pub(crate) fn with_previous(mut self, previous: Option<&'a dyn PreviousIndex>) -> Self {
        self.previous = previous;
        self
    }

    /// The run's stop ([`Self::item_failures`] ends the step as stopped
    /// once it is requested); without one, the process-wide stop.
    pub(crate) fn with_stop(mut self, stop: &'a StopFlag) -> Self {
        self.stop = Some(stop);
        self
    }

    /// The index this run updates, if it is an update (`None` for `index`,
    /// whose outputs depend on the inputs alone).
    pub fn previous(&self) -> Option<Previous<'a>> {
        self.previous.map(|index| Previous { index, counters: self.counters })
    }

    fn project(&self) -> anyhow::Result<&'a dyn ProjectFiles> {
        self.project.ok_or_else(|| {
            anyhow::anyhow!("step `{}` needs project files, which this run was started without", self.step_id)
        })
    }

    /// A prompt template, by its path relative to the project root; the
    /// built-in prompt of the same file name when the project has no such
    /// file (announced once).
    pub fn prompt(&self, rel_path: &str) -> anyhow::Result<PromptTemplate> {
        let project = self.project()?;
        prompts::project_prompt(rel_path, prompts::builtin_name(rel_path), || project.read_text(rel_path))
    }

    /// The text of a project file (e.g. the aliases file), by its path
    /// relative to the project root; `None` when there is no such file.
    pub fn project_file(&self, rel_path: &str) -> anyhow::Result<Option<String>> {
        self.project()?.read_text(rel_path)
    }

    /// Writes a file (e.g. a GraphML snapshot) into the output folder.
    pub fn write_output(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        self.project()?.write_output(name, bytes)
    }

    /// Writes a snapshot table into the output folder as `<name>.parquet`.
    pub fn write_table(&self, name: &str, table: &RecordBatch) -> anyhow::Result<()> {
        self.project()?.write_table(name, table)
    }

    /// Adds `n` to a named counter of this step (reported in stats.json).
    pub fn count(&self, name: &str, n: u64) {
        *self.counters.counts.lock().unwrap().entry(name.to_string()).or_default() += n;
    }

    /// The project's models (chat and embedding).
    pub fn llm(&self) -> anyhow::Result<&'a LlmService> {
        self.llm.ok_or_else(|| {
            anyhow::anyhow!("step `{}` needs the LLM layer, which this run was started without", self.step_id)
        })
    }

    /// A progress bar of `len` items for this step (hidden when quiet or not a terminal).
    pub fn progress(&self, len: u64, what: &str) -> ProgressBar {
        let Some(multi) = self.progress else {
            return ProgressBar::hidden();
        };
        // Cleared when dropped: a step that fails leaves no stale bar.
        let bar = multi.add(ProgressBar::new(len).with_finish(ProgressFinish::AndClear));
        bar.set_style(
            ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} {msg} ({elapsed}, eta {eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix(self.step_id.to_string());
        bar.set_message(what.to_string());
        bar
    }

    /// The fraction of this step's items that may fail (see [`Self::item_failures`]).
    pub fn tolerated_failures(&self) -> f64 {
        self.tolerated_failures
    }

    /// Reports this step's items whose model call failed, of `total` items
    /// of kind `what` (singular): each as (id, name, error). Once a stop was
    /// requested the step ends as interrupted (the model layer refuses new
    /// calls, so their failures are the stop's); more than the tolerated
    /// fraction fail the step with [`FailedItems`], which are also kept in
    /// the counters (`failing`) for the runner, that names them and makes
    /// them the step's error (return this error as the step's); fewer are
    /// logged, named in stats.json, and the step goes on without them.
    /// Counted as `<plural>_failed` (`text_units_failed`).
    pub fn item_failures(
        &self,
        what: &'static str,
        total: usize,
        failed: Vec<(String, String, anyhow::Error)>,
    ) -> anyhow::Result<()> {
        if failed.is_empty() {
            return Ok(());
        }
        if self.stop.map_or_else(crate::interrupt::requested, StopFlag::requested) {
            return Err(Interrupted.into());
        }
        self.count(&format!("{}_failed", crate::failures::plural(what).replace(' ', "_")), failed.len() as u64);
        let items: Vec<FailedItem> = failed
            .into_iter()
            .map(|(id, name, e)| FailedItem { step: self.step_id.to_string(), id, name, error: format!("{e:#}") })
            .collect();
        let fraction = items.len() as f64 / total.max(1) as f64;
        if fraction <= self.tolerated_failures {
            for item in &items {
                self.warn(format!("{}: {} (tolerated: failures.tolerated_fraction)", item.name, item.error));
            }
            self.counters.failed.lock().unwrap().extend(items);
            return Ok(());
        }
        let failing = FailedItems { what, total, tolerated_fraction: self.tolerated_failures, items };
        *self.counters.failing.lock().unwrap() = Some(failing.clone());
        Err(failing.into())
    }

    /// An input file this step could not read and goes on without (`id`:
    /// its row in document_status): logged as a warning, listed with the
    /// reason in stats.json (`unreadable_inputs`) and document_status.
    pub fn unreadable_input(&self, path: &str, id: String, error: String) {
        self.warn(format!("input file `{path}` cannot be read: {error}"));
        let item = FailedItem { step: self.step_id.to_string(), id, name: path.to_string(), error };
        self.counters.unreadable.lock().unwrap().push(item);
    }

    /// Logs a warning and counts it for stats.json.
    pub fn warn(&self, message: impl std::fmt::Display) {
        self.counters.warnings.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(step = self.step_id, "{message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::files::LocalFiles;

    #[test]
    fn failed_items_fail_the_step_beyond_the_tolerated_fraction() {
        let files = LocalFiles::new("/nonexistent");
        let counters = StepCounters::default();
        let failed = |n: usize| -> Vec<(String, String, anyhow::Error)> {
            (0..n).map(|i| (format!("u{i}"), format!("text unit u{i}"), anyhow::anyhow!("malformed answer"))).collect()
        };
        let ctx = VerbContext::new("extract_graph", &files, &counters).with_tolerated_failures(0.25);
        ctx.item_failures("text unit", 8, failed(2)).unwrap();
        assert_eq!(counters.failed.lock().unwrap().len(), 2, "tolerated: kept for stats.json");
        assert_eq!(counters.counts.lock().unwrap()["text_units_failed"], 2);
        let err = ctx.item_failures("text unit", 8, failed(3)).unwrap_err();
        let items = counters.failing.lock().unwrap().take().expect("kept for the runner");
        assert_eq!((items.items.len(), items.total), (3, 8));
        assert_eq!(items.items[0].step, "extract_graph");
        assert_eq!(err.to_string(), items.to_string(), "the step's error");
        let strict = VerbContext::new("extract_graph", &files, &counters);
        assert!(strict.item_failures("text unit", 1000, failed(1)).is_err(), "none tolerated by default");
        assert_eq!(counters.failing.lock().unwrap().take().map(|f| f.items.len()), Some(1));
        let stop = StopFlag::new();
        stop.request();
        let stopped = ctx.with_stop(&stop).item_failures("text unit", 8, failed(1)).unwrap_err();
        assert_eq!(stopped.to_string(), Interrupted.to_string(), "a stopped step's failures are the stop's");
        assert!(counters.failing.lock().unwrap().is_none());
    }
}
