//! Opening a project for a run: its settings, models and pipeline.

use std::path::{Path, PathBuf};

use anyhow::Context;
use graphrag_engine::config_error::ConfigError;
use graphrag_engine::context::{LocalProject, PreviousIndex};
use graphrag_engine::llm::preflight::{self, ModelKind};
use graphrag_engine::llm::LlmService;
use graphrag_engine::pipeline::{self, Plan};
use graphrag_engine::runner::Workspace;
use graphrag_engine::settings::{self, LoadedSettings, Settings};
use graphrag_engine::storage::{Backend, OpenError, Storage, WorkingCopy};
use graphrag_operations::suggest::did_you_mean;

use crate::assets::WORKFLOWS;

/// How a project is opened for a run.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// The pipeline: `auto` (standard when a chat model is configured, else
    /// fast), `standard`, `fast`, a `workflows/<name>.yaml` of the project, or
    /// a path to a pipeline .yaml.
    pub method: String,
    /// Neither read nor write the model answer cache.
    pub no_cache: bool,
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions { method: "auto".into(), no_cache: false }
    }
}

/// Where a run logs, for a caller that logs to a file: the reporting
/// folder's `indexing-engine.log`; with `reporting` in a bucket, a file of
/// this run's own in its local copy, uploaded at the end ([`RunLog::upload`])
/// as one object per run, as GraphRAG's blob reporting does.
pub struct RunLog {
    /// The file the caller's logger appends to.
    pub file: PathBuf,
    upload: Option<(WorkingCopy, String)>,
}

/// The local log file's name.
const LOG_FILE: &str = "indexing-engine.log";

impl RunLog {
    /// The run log of `root`'s settings (connecting to a reporting bucket:
    /// an error names the setting and its line).
    pub fn open(root: &Path, loaded: &LoadedSettings) -> Result<RunLog, ConfigError> {
        let location =
            Storage::reporting(root, &loaded.settings).map_err(|e| loaded.error_at("reporting", format!("{e:#}")))?;
        let copy = location.working_copy();
        Ok(match location.backend() {
            Backend::Folder(_) => RunLog { file: copy.path().join(LOG_FILE), upload: None },
            Backend::ObjectStore(_) => {
                let started = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
                let name = format!("indexing-engine-{started}-{}.log", std::process::id());
                RunLog { file: copy.path().join(&name), upload: Some((copy, name)) }
            }
        })
    }

    /// Uploads the log of a run whose reporting is in a bucket, then removes
    /// the local file (a folder's log stays where it is). On failure the
    /// file is kept and the error names both places.
    pub fn upload(&self) -> anyhow::Result<()> {
        let Some((copy, name)) = &self.upload else { return Ok(()) };
        if !self.file.exists() {
            return Ok(());
        }
        copy.push(name)
            .with_context(|| format!("uploading the run's log {name} (it is kept in {})", self.file.display()))?;
        std::fs::remove_file(&self.file).with_context(|| format!("removing {}", self.file.display()))
    }
}

/// The storage `loaded` names, opened once for a run (each object store
/// connected with one request); an error names the setting and its line.
pub(crate) fn open_storage(root: &Path, loaded: &LoadedSettings) -> Result<Storage, ConfigError> {
    // The line of the setting that failed (its message names the cause).
    Storage::open(root, &loaded.settings).map_err(|e: OpenError| loaded.error_at(e.key, e.to_string()))
}

/// The folders a run reads and writes, checked before anything runs (a dry
/// run too): the input folder exists, and the output folder is one this
/// process can write in, or can be made. Errors name the settings key and
/// its line.
pub(crate) fn check_folders(storage: &Storage, loaded: &LoadedSettings) -> Result<(), ConfigError> {
    let Backend::Folder(input) = storage.input.backend() else { return Ok(()) };
    let input_error =
        |why: String| loaded.error_at("input_storage.base_dir", format!("the input folder {} {why}", input.display()));
    match std::fs::metadata(input) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(input_error("is a file: point input_storage.base_dir at the folder of the documents".into()))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(input_error(
            "does not exist: create it and put the documents there, or point input_storage.base_dir at their folder"
                .into(),
        )),
        Err(e) => return Err(input_error(format!("cannot be read: {e}"))),
    }
    let Backend::Folder(output) = storage.output.backend() else { return Ok(()) };
    writable_folder(output).map_err(|why| {
        loaded.error_at("output_storage.base_dir", format!("the output folder {} {why}", output.display()))
    })
}

/// Why `dir` cannot hold the index: it, or else the nearest folder above it
/// that exists (where it would be made), must be a folder this process can
/// write in — tried with a file made and removed at once (permissions alone
/// do not tell: a read-only mount, root's rights).
fn writable_folder(dir: &Path) -> Result<(), String> {
    let mut existing = dir;
    loop {
        match std::fs::metadata(existing) {
            Ok(m) if m.is_dir() => break,
            Ok(_) if existing == dir => return Err("is a file, not a folder".into()),
            Ok(_) => return Err(format!("cannot be made: {} is a file, not a folder", existing.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match existing.parent() {
                Some(parent) if !parent.as_os_str().is_empty() => existing = parent,
                _ => return Err("cannot be made: no folder above it exists".into()),
            },
            Err(e) => return Err(format!("cannot be read: {e}")),
        }
    }
    let probe = existing.join(format!(".graphrag-rs-write-check-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) if existing == dir => Err(format!("is not writable: {e}")),
        Err(e) => Err(format!("cannot be made in {}, which is not writable: {e}", existing.display())),
    }
}

/// The pipeline file and text for `method`: a path, the project's
/// workflows/<method>.yaml, or the shipped default.
fn pipeline_source(root: &Path, method: &str) -> anyhow::Result<(PathBuf, String)> {
    let as_path = Path::new(method);
    if method.ends_with(".yaml") || method.ends_with(".yml") {
        let text = std::fs::read_to_string(as_path).with_context(|| format!("reading pipeline {method}"))?;
        return Ok((as_path.to_path_buf(), text));
    }
    let in_project = root.join("workflows").join(format!("{method}.yaml"));
    if in_project.exists() {
        let text = std::fs::read_to_string(&in_project).with_context(|| format!("reading {}", in_project.display()))?;
        return Ok((in_project, text));
    }
    match WORKFLOWS.iter().find(|(m, _)| *m == method) {
        Some((_, text)) => Ok((PathBuf::from(format!("<built-in {method}.yaml>")), text.to_string())),
        None => anyhow::bail!(
            "unknown method `{method}`: expected auto, standard, fast, light, a workflows/<name>.yaml in the project, or a path to a pipeline .yaml{}",
            did_you_mean(method, WORKFLOWS.iter().map(|(m, _)| *m))
        ),
    }
}

/// A project opened for a run: its settings, models and pipeline.
pub struct Project {
    /// The project folder.
    pub(crate) root: PathBuf,
    /// settings.yaml, loaded (with the lines of its keys, for errors).
    pub(crate) loaded: LoadedSettings,
    /// The models the pipeline calls, with their cache and limits.
    pub(crate) llm: LlmService,
    /// The pipeline a run of this project runs: its steps in order.
    pub plan: Plan,
    /// Where the documents, the index and the answers are.
    pub(crate) storage: Storage,
    /// The chat model for which `auto` chose the standard pipeline.
    auto_standard: Option<String>,
}

/// The project's aliases file (entity merges forced or forbidden), checked
/// before anything is spent: a mistake in it is an error naming its line.
fn check_aliases_file(path: &Path) -> anyhow::Result<()> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(graphrag_engine::aliases_file::parse(&text, path).map(|_| ())?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
    }
}

impl Project {
    /// Loads the settings of `root` (settings.yaml with `${VAR}` and .env
    /// substitution), then [`Project::with_settings`].
    pub fn open(root: &Path, opts: &OpenOptions) -> anyhow::Result<Project> {
        Project::with_settings(root, settings::load(root)?, opts)
    }

    /// [`Project::open`] with settings already loaded (a caller that changed
    /// them first): opens the storage they name, checks its folders (the
    /// input exists, the output is writable), checks aliases.yaml and
    /// graph_edits.yaml, builds the models and loads the pipeline of
    /// `opts.method`. A configuration error names its key and line.
    pub fn with_settings(root: &Path, loaded: LoadedSettings, opts: &OpenOptions) -> anyhow::Result<Project> {
        let storage = open_storage(root, &loaded)?;
        check_folders(&storage, &loaded)?;
        Project::with_storage(root, loaded, storage, opts)
    }

    /// Builds the models and loads the pipeline for `opts.method` (`auto`:
    /// standard with a chat model, fast without), on `storage` (opened and
    /// checked from these settings). Settings keys that have no effect are
    /// logged as one warning.
    pub(crate) fn with_storage(
        root: &Path,
        mut loaded: LoadedSettings,
        storage: Storage,
        opts: &OpenOptions,
    ) -> anyhow::Result<Project> {
        if opts.no_cache {
            loaded.settings.cache.kind = "none".into();
        }
        let settings = &loaded.settings;
        if let Some(warning) = loaded.ignored_warning() {
            tracing::warn!("{warning}");
        }
        check_aliases_file(&root.join(&settings.resolve_entities.aliases_file))?;
        // The graph edits file too (finalize_graph applies it after the model calls).
        crate::graph_edits::read(root)?;
        let llm = LlmService::with_cache(settings, settings.cache.enabled().then_some(&storage.cache))?;
        let chat_id = &settings.extract_graph.completion_model_id;
        let auto_standard = (opts.method == "auto" && llm.has_chat_model(chat_id)).then(|| chat_id.clone());
        let method = match opts.method.as_str() {
            "auto" if llm.has_chat_model(chat_id) => "standard",
            "auto" => {
                tracing::info!(
                    "no chat model configured (completion_models.{chat_id}): using the fast method (noun-phrase graph, no LLM)"
                );
                "fast"
            }
            other => other,
        };
        let (pipeline_file, text) = pipeline_source(root, method)?;
        let plan = pipeline::load(&pipeline_file, &text, settings, &graphrag_verbs::registry())?;
        Ok(Project { root: root.to_path_buf(), loaded, llm, plan, storage, auto_standard })
    }

    /// The loaded settings.
    pub(crate) fn settings(&self) -> &Settings {
        &self.loaded.settings
    }

    /// Whether the index a run would start from holds one (on an object
    /// store, as the working copy has it: brought up to date by a writer).
    pub(crate) fn has_index(&self) -> bool {
        self.storage.output.working_copy().has_index()
    }

    /// The start-up check of the model endpoints the pipeline's steps call
    /// ([`graphrag_engine::verb::Verb::model_to_call`]: none for a step its
    /// args rule out calling one, disabled or extractive), skipping chat
    /// models that are not configured (those steps run without one), ready
    /// to run on its own thread.
    pub(crate) fn models_check(&self) -> ModelsCheck {
        let s = self.settings();
        let mut targets = Vec::new();
        for step in &self.plan.steps {
            let Some(id) = step.verb.model_to_call() else { continue };
            if s.completion_models.contains_key(id) && self.llm.has_chat_model(id) {
                targets.push((ModelKind::Chat, id.to_string()));
            }
            if s.embedding_models.contains_key(id) {
                targets.push((ModelKind::Embedding, id.to_string()));
            }
        }
        ModelsCheck { loaded: self.loaded.clone(), targets, auto_standard: self.auto_standard.clone() }
    }

    /// Where a run of the pipeline reads and writes: `output_dir` for its
    /// outputs, `previous` the index an update starts from.
    pub(crate) fn workspace(self, output_dir: &Path, previous: Option<Box<dyn PreviousIndex>>) -> (Plan, Workspace) {
        let ws = Workspace {
            output_dir: output_dir.to_path_buf(),
            files: self.storage.input.files(),
            project: Some(Box::new(LocalProject { root: self.root.clone(), output_dir: output_dir.to_path_buf() })),
            llm: Some(self.llm),
            previous,
        };
        (self.plan, ws)
    }
}

/// The start-up check of a project's model endpoints ([`Project::models_check`]).
pub(crate) struct ModelsCheck {
    loaded: LoadedSettings,
    targets: Vec<(ModelKind, String)>,
    /// The chat model for which `auto` chose the standard pipeline.
    auto_standard: Option<String>,
}

impl ModelsCheck {
    /// One tiny request per endpoint; the first failure is an error naming
    /// the settings key and the fix. Its warnings are logged.
    pub(crate) fn run(&self) -> anyhow::Result<()> {
        let report = preflight::check(&self.loaded, &self.targets).map_err(|e| match &self.auto_standard {
            Some(chat_id) => anyhow::anyhow!(
                "{e}\n`--method auto` chose the standard pipeline because completion_models.{chat_id} is configured: fix that model, or run `--method fast` to index without a chat model"
            ),
            None => e.into(),
        })?;
        log_check(report);
        Ok(())
    }
}

/// Logs what a start-up check found: its warnings, and (at debug level) the
/// endpoints that answered. `graphrag-rs query` runs its own check and logs
/// it through this.
pub fn log_check(report: preflight::Report) {
    for w in &report.warnings {
        tracing::warn!("{w}");
    }
    if !report.checked.is_empty() {
        tracing::debug!("model endpoints answer: {}", report.checked.join(", "));
    }
}
