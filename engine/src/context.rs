//! What a verb may use besides its input tables: read access to the input
//! files, progress bars and warning counters. Verbs never open files
//! themselves, so storage can change (object stores) without touching them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use anyhow::Context;
use arrow_array::RecordBatch;
use indicatif::{MultiProgress, ProgressBar, ProgressFinish, ProgressStyle};

use crate::llm::{LlmService, UsageCounters};
use crate::prompts::{self, PromptTemplate};

/// One file of the input storage.
#[derive(Debug, Clone)]
pub struct FileEntry {
    /// Path relative to the input folder, `/`-separated.
    pub path: String,
    pub size: u64,
    pub modified: SystemTime,
}

/// Read-only access to the input documents.
pub trait FileSource: Send + Sync {
    /// Every file, sorted by path.
    fn list(&self) -> anyhow::Result<Vec<FileEntry>>;
    fn read(&self, path: &str) -> anyhow::Result<Vec<u8>>;
    /// Where the files are, for messages.
    fn describe(&self) -> String;
}

/// Files under a local folder.
pub struct LocalFiles {
    pub root: PathBuf,
}

impl FileSource for LocalFiles {
    fn list(&self) -> anyhow::Result<Vec<FileEntry>> {
        if !self.root.is_dir() {
            anyhow::bail!("input folder {} does not exist", self.root.display());
        }
        let mut out = Vec::new();
        walk(&self.root, &self.root, &mut out)?;
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn read(&self, path: &str) -> anyhow::Result<Vec<u8>> {
        let full = self.root.join(path);
        std::fs::read(&full).with_context(|| format!("reading {}", full.display()))
    }

    fn describe(&self) -> String {
        self.root.display().to_string()
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<FileEntry>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        let meta = entry.metadata()?;
        let p = entry.path();
        if meta.is_dir() {
            walk(root, &p, out)?;
        } else if meta.is_file() {
            let rel = p.strip_prefix(root).unwrap_or(&p);
            let rel: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            out.push(FileEntry {
                path: rel.join("/"),
                size: meta.len(),
                modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            });
        }
    }
    Ok(())
}

/// Counters a verb bumps; they end up in stats.json.
#[derive(Debug, Default)]
pub struct StepCounters {
    pub warnings: AtomicU64,
    /// LLM calls, tokens, cache hits, retries, per model.
    pub usage: UsageCounters,
    /// Verb-specific counts (records dropped or repaired, ...).
    pub counts: Mutex<BTreeMap<String, u64>>,
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
    pub root: PathBuf,
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
        crate::store::write_table(&self.output_dir.join(format!("{name}.parquet")), table).map(|_| ())
    }
}

/// The published tables of the index an update starts from (read-only).
pub trait PreviousIndex: Send + Sync {
    /// The table, or `None` when that index has none.
    fn table(&self, name: &str) -> anyhow::Result<Option<RecordBatch>>;
    /// A hash of the table's file (for step hashes), `None` when absent.
    fn fingerprint(&self, name: &str) -> Option<String>;
}

/// The published tables of an index folder.
pub struct PublishedTables {
    pub output_dir: PathBuf,
}

impl PreviousIndex for PublishedTables {
    fn table(&self, name: &str) -> anyhow::Result<Option<RecordBatch>> {
        let path = crate::store::table_path(&self.output_dir, name, true);
        if !path.exists() {
            return Ok(None);
        }
        crate::store::read_table(&path).map(Some)
    }

    fn fingerprint(&self, name: &str) -> Option<String> {
        crate::store::file_sha256(&crate::store::table_path(&self.output_dir, name, true))
    }
}

pub struct VerbContext<'a> {
    pub step_id: &'a str,
    pub files: &'a dyn FileSource,
    pub counters: &'a StepCounters,
    project: Option<&'a dyn ProjectFiles>,
    llm: Option<&'a LlmService>,
    progress: Option<&'a MultiProgress>,
    previous: Option<&'a dyn PreviousIndex>,
}

impl<'a> VerbContext<'a> {
    pub fn new(step_id: &'a str, files: &'a dyn FileSource, counters: &'a StepCounters) -> Self {
        VerbContext { step_id, files, counters, project: None, llm: None, progress: None, previous: None }
    }

    pub fn with_project(mut self, project: Option<&'a dyn ProjectFiles>) -> Self {
        self.project = project;
        self
    }

    pub fn with_llm(mut self, llm: Option<&'a LlmService>) -> Self {
        self.llm = llm;
        self
    }

    pub fn with_progress(mut self, progress: Option<&'a MultiProgress>) -> Self {
        self.progress = progress;
        self
    }

    pub fn with_previous(mut self, previous: Option<&'a dyn PreviousIndex>) -> Self {
        self.previous = previous;
        self
    }

    /// The index this run updates, if it is an update (`None` for `index`,
    /// whose outputs depend on the inputs alone).
    pub fn previous(&self) -> Option<&'a dyn PreviousIndex> {
        self.previous
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

    /// Logs a warning and counts it for stats.json.
    pub fn warn(&self, message: impl std::fmt::Display) {
        self.counters.warnings.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(step = self.step_id, "{message}");
    }
}
