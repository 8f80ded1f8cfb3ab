//! `graphrag-rs index`: load settings and pipeline, validate, then run or
//! print the plan (--dry-run).

use std::path::{Path, PathBuf};

use anyhow::Context;
use graphrag_engine::context::{LocalFiles, LocalProject, PreviousIndex};
use graphrag_engine::doc_status;
use graphrag_engine::failures::{write_list, FailedItems};
use graphrag_engine::llm::preflight::{self, ModelKind};
use graphrag_engine::llm::LlmService;
use graphrag_engine::pipeline::{self, Plan};
use graphrag_engine::runner::{self, RunOptions, StepEstimate, Workspace};
use graphrag_engine::settings::{self, Settings};
use graphrag_engine::staging;
use graphrag_engine::stats::RunStats;
use graphrag_operations::suggest::did_you_mean;
use std::io::IsTerminal;

use crate::assets::WORKFLOWS;

pub struct IndexArgs {
    pub root: PathBuf,
    pub method: String,
    pub resume: bool,
    pub dry_run: bool,
    pub no_cache: bool,
    pub skip_validation: bool,
    pub verbosity: i8,
}

/// How a command opens a project for a run.
pub struct OpenOptions<'a> {
    pub method: &'a str,
    pub verbosity: i8,
    /// Whether the run will execute (log file); false for a dry run.
    pub run: bool,
    pub no_cache: bool,
}

/// The pipeline file and text for `--method`: a path, the project's
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
    pub root: PathBuf,
    pub loaded: settings::LoadedSettings,
    pub llm: LlmService,
    pub plan: Plan,
    pub output_dir: PathBuf,
    /// The chat model for which `--method auto` chose the standard pipeline.
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
    /// Loads settings and pipeline for `opts.method` (`auto`: standard with
    /// a chat model, fast without), logging to the project's log file for a run.
    pub fn open(root: &Path, opts: &OpenOptions) -> anyhow::Result<Project> {
        let mut loaded = settings::load(root)?;
        if opts.no_cache {
            loaded.settings.cache.kind = "none".into();
        }
        let settings = &loaded.settings;
        let log_file = root.join(&settings.reporting.base_dir).join("indexing-engine.log");
        crate::logging::init(opts.verbosity, opts.run.then_some(log_file.as_path()))?;
        if let Some(warning) = loaded.ignored_warning() {
            tracing::warn!("{warning}");
        }
        check_aliases_file(&root.join(&settings.resolve_entities.aliases_file))?;
        let llm = LlmService::from_settings(settings, root)?;
        let chat_id = &settings.extract_graph.completion_model_id;
        let auto_standard = (opts.method == "auto" && llm.has_chat_model(chat_id)).then(|| chat_id.clone());
        let method = match opts.method {
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
        let output_dir = root.join(&settings.output_storage.base_dir);
        Ok(Project { root: root.to_path_buf(), loaded, llm, plan, output_dir, auto_standard })
    }

    pub fn settings(&self) -> &Settings {
        &self.loaded.settings
    }

    /// The start-up check of the model endpoints the pipeline's steps name
    /// (their `model_id` args), skipping steps that will call none
    /// (disabled, extractive) and chat models that are not configured (those
    /// steps run without one).
    pub fn check_models(&self) -> anyhow::Result<()> {
        let s = self.settings();
        let mut targets = Vec::new();
        for step in &self.plan.steps {
            let args = &step.args;
            let arg_is = |key: &str, value: serde_json::Value| args.get(key) == Some(&value);
            // Off, extractive reports, entity resolution by rules (`auto` means
            // rules where `model_in_auto` is false: the fast pipeline).
            let calls_none = arg_is("enabled", false.into())
                || arg_is("mode", "extractive".into())
                || arg_is("mode", "rules".into())
                || (arg_is("mode", "auto".into()) && arg_is("model_in_auto", false.into()));
            let Some(id) = args.get("model_id").and_then(|v| v.as_str()).filter(|_| !calls_none) else { continue };
            if s.completion_models.contains_key(id) && self.llm.has_chat_model(id) {
                targets.push((ModelKind::Chat, id.to_string()));
            }
            if s.embedding_models.contains_key(id) {
                targets.push((ModelKind::Embedding, id.to_string()));
            }
        }
        let report = preflight::check(&self.loaded, &targets).map_err(|e| match &self.auto_standard {
            Some(chat_id) => anyhow::anyhow!(
                "{e}\n`--method auto` chose the standard pipeline because completion_models.{chat_id} is configured: fix that model, or run `--method fast` to index without a chat model"
            ),
            None => e.into(),
        })?;
        report_check(report);
        Ok(())
    }

    /// Where a run of the pipeline reads and writes: `output_dir` for its
    /// outputs, `previous` the index an update starts from.
    pub fn workspace(self, output_dir: &Path, previous: Option<Box<dyn PreviousIndex>>) -> (Plan, Workspace) {
        let ws = Workspace {
            output_dir: output_dir.to_path_buf(),
            files: Box::new(LocalFiles::new(self.root.join(&self.loaded.settings.input_storage.base_dir))),
            project: Some(Box::new(LocalProject { root: self.root.clone(), output_dir: output_dir.to_path_buf() })),
            llm: Some(self.llm),
            previous,
        };
        (self.plan, ws)
    }
}

/// The run options of a project's settings.
pub fn run_options(settings: &Settings, resume: bool, verbosity: i8) -> RunOptions {
    RunOptions {
        resume,
        progress: progress_bars(verbosity),
        tolerated_failures: settings.failures.tolerated_fraction,
        ..RunOptions::default()
    }
}

/// Reports what a failed run left: its failed items, one per line, and
/// what was kept and what to run next — before the error, whose one-line
/// cause stays the last line. An interruption is reported by main.
pub fn with_failure_note(e: anyhow::Error, output_dir: &Path, had_index: bool, rerun: &str) -> anyhow::Error {
    if graphrag_engine::interrupt::caused(&e) {
        return e;
    }
    let mut note = String::new();
    if let Some(failed) = e.chain().find_map(|c| c.downcast_ref::<FailedItems>()) {
        note.push_str(&format!("{} of {} {}s failed:", failed.items.len(), failed.total, failed.what));
        let _ = write_list(&mut note, &failed.items);
        note.push('\n');
    }
    if had_index {
        note.push_str(&format!("The previous index in {} is unchanged and queryable. ", output_dir.display()));
    }
    note.push_str(&format!(
        "This run's stats: {}. `{rerun}` asks the model only what was not answered yet.",
        staging::dir(output_dir).join("stats.json").display()
    ));
    tracing::error!(target: crate::logging::FILE_ONLY, "{note}");
    eprintln!("{note}");
    e
}

/// Logs what the start-up check found.
pub fn report_check(report: preflight::Report) {
    for w in &report.warnings {
        tracing::warn!("{w}");
    }
    if !report.checked.is_empty() {
        tracing::debug!("model endpoints answer: {}", report.checked.join(", "));
    }
}

pub fn run(args: &IndexArgs) -> anyhow::Result<()> {
    let project = Project::open(
        &args.root,
        &OpenOptions { method: &args.method, verbosity: args.verbosity, run: !args.dry_run, no_cache: args.no_cache },
    )?;
    let output_dir = project.output_dir.clone();
    let settings = project.settings().clone();
    let opts = run_options(&settings, args.resume, args.verbosity);
    if args.dry_run {
        let (plan, ws) = project.workspace(&output_dir, None);
        return print_plan(&plan, &ws, args.resume);
    }
    let _lock = staging::lock_for_writing(&output_dir)?;
    if !args.skip_validation {
        project.check_models()?;
    }
    // A finished publication is completed first. Then the run is staged
    // beside the live index and published only once every step succeeded:
    // with --resume from what an interrupted run staged, or from the live
    // index; without, from nothing.
    staging::recover(&output_dir)?;
    let staging_dir = staging::dir(&output_dir);
    if !args.resume {
        staging::discard(&output_dir)?;
    } else if !staging_dir.exists() {
        staging::seed(&output_dir)?;
    }
    let had_index = output_dir.join("documents.parquet").exists();
    let (plan, ws) = project.workspace(&staging_dir, None);
    tracing::info!(pipeline = %plan.name, steps = plan.steps.len(), "indexing {}", args.root.display());
    let (stats, _) = doc_status::run_tracked(&plan, &ws, &opts, &output_dir, || staging::commit(&output_dir))
        .map_err(|e| with_failure_note(e, &output_dir, had_index, "graphrag-rs index --resume"))?;
    warn_about_tolerated_failures(&stats);
    if args.verbosity >= 0 {
        println!("Indexed with pipeline `{}` in {:.2} s:", plan.name, stats.total_runtime);
        print_steps(&plan, &stats);
        let published: Vec<&str> = plan.published.iter().map(String::as_str).collect();
        println!("Tables in {}: {}", output_dir.display(), published.join(", "));
        println!("Stats: {}", output_dir.join("stats.json").display());
    }
    crate::export::after_run(&args.root, &settings, args.verbosity);
    Ok(())
}

/// Failed items the run tolerated (`failures.tolerated_fraction`), named:
/// shown even with -q, as the index is missing them.
pub fn warn_about_tolerated_failures(stats: &RunStats) {
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

/// Where the run draws its progress bars: nowhere when quiet or when
/// stderr is not a terminal.
pub fn progress_bars(verbosity: i8) -> Option<indicatif::MultiProgress> {
    (verbosity >= 0 && std::io::stderr().is_terminal()).then(|| crate::logging::bars().clone())
}

/// One line per step: status, seconds, rows, warnings; then the items the
/// run went on without (unreadable input files), each with its reason.
pub fn print_steps(plan: &Plan, stats: &RunStats) {
    for step in &plan.steps {
        if let Some(st) = stats.workflows.get(&step.id) {
            println!(
                "  {:<32} {:<8} {:>8.2} s  rows in {:>7}  out {:>7}{}",
                step.id,
                st.status,
                st.overall,
                st.rows_in,
                st.rows_out,
                if st.warnings > 0 { format!("  ({} warnings, see log)", st.warnings) } else { String::new() }
            );
        }
    }
    let failures: Vec<_> = stats.unreadable_inputs().collect();
    if !failures.is_empty() {
        println!(
            "{} input file(s) could not be read and were left out (failed in document_status.parquet):",
            failures.len()
        );
        for f in failures {
            println!("  {}: {}", f.name, f.error);
        }
    }
}

pub fn print_plan(plan: &Plan, ws: &Workspace, resume: bool) -> anyhow::Result<()> {
    let skip = if resume { runner::resume_preview(plan, ws)? } else { vec![false; plan.steps.len()] };
    println!("Settings and pipeline are valid.");
    println!("Pipeline `{}` ({}): {} steps", plan.name, plan.file.display(), plan.steps.len());
    for (i, (step, skip)) in plan.steps.iter().zip(skip).enumerate() {
        let action = if skip { "skip (unchanged)" } else { "run" };
        println!(
            "  {}. {} [{}] {} -> {}  {}",
            i + 1,
            step.id,
            step.info.name,
            if step.inputs.is_empty() { "-".to_string() } else { step.inputs.join(", ") },
            step.outputs.join(", "),
            action
        );
        if let Some(args) = step.args.as_object().filter(|a| !a.is_empty()) {
            println!("       args: {}", serde_json::to_string(args)?);
        }
    }
    let published: Vec<&str> = plan.published.iter().map(String::as_str).collect();
    println!("Publishes to {}: {}", ws.output_dir.display(), published.join(", "));
    print_llm_estimate(plan, ws)
}

/// The dry run's cost estimate: calls and prompt tokens per LLM step,
/// computed from the real inputs (steps without a model run in memory).
fn print_llm_estimate(plan: &Plan, ws: &Workspace) -> anyhow::Result<()> {
    let estimates = runner::estimate(plan, ws)?;
    println!("LLM estimate (nothing sent):");
    let (mut calls, mut tokens, mut cached) = (0, 0, 0);
    let mut later = Vec::new();
    for (step, e) in plan.steps.iter().zip(&estimates) {
        match e {
            StepEstimate::Estimated(e) => {
                println!(
                    "  {:<24} ≤ {} calls, ~{} prompt tokens; {} of {} items already cached ({})",
                    step.id, e.calls, e.prompt_tokens, e.cached_items, e.items, e.note
                );
                calls += e.calls;
                tokens += e.prompt_tokens;
                cached += e.cached_items;
            }
            StepEstimate::AfterModelOutput => later.push(step.id.as_str()),
            StepEstimate::NoModel => {}
        }
    }
    if calls == 0 && later.is_empty() {
        println!("  no step of this pipeline calls a language model");
    } else {
        println!("  total so far: ≤ {calls} calls, ~{tokens} prompt tokens ({cached} items already cached)");
    }
    if !later.is_empty() {
        println!("  depends on what the models return, not estimated: {}", later.join(", "));
    }
    Ok(())
}

pub fn print_verbs() {
    let registry = graphrag_verbs::registry();
    println!("Verbs in this build:");
    for name in registry.names() {
        let info = registry.info(name).expect("listed");
        println!("  {:<16} {}  ({} -> {})", name, info.about, info.inputs.join(", "), info.outputs.join(", "));
    }
}
