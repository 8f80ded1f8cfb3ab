//! `graphrag-rs index`: open the project, then run the pipeline or print
//! the plan (--dry-run); the work is graphrag_project's.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use crate::shard::Sharded;
use graphrag_engine::pipeline::Plan;
use graphrag_engine::settings;
use graphrag_engine::stats::RunStats;
use graphrag_project::{DryRun, IndexOptions, OpenOptions, Project, RunError, RunReport, RunSettings, StepEstimate};

pub struct IndexArgs {
    pub root: PathBuf,
    pub method: String,
    pub resume: bool,
    pub dry_run: bool,
    pub no_cache: bool,
    pub skip_validation: bool,
    pub verbosity: i8,
    pub shards: crate::shard::ShardFlags,
}

/// Loads the project's settings and starts logging: to the console, and to
/// the project's log file when `run` (not for a dry run).
pub fn start_logging(root: &Path, verbosity: i8, run: bool) -> anyhow::Result<settings::LoadedSettings> {
    let loaded = settings::load(root)?;
    if !run {
        crate::logging::init(verbosity, None)?;
        return Ok(loaded);
    }
    let log = graphrag_project::RunLog::open(root, &loaded)?;
    crate::logging::init(verbosity, Some(log.file.as_path()))?;
    crate::logging::upload_at_exit(log);
    Ok(loaded)
}

/// How a run shows its progress: bars unless quiet or not on a terminal.
pub fn run_settings(skip_validation: bool, verbosity: i8) -> RunSettings {
    RunSettings { skip_validation, progress: progress_bars(verbosity), ..RunSettings::default() }
}

pub fn run(args: &IndexArgs) -> anyhow::Result<()> {
    // Flags that do not go together fail before the project is opened.
    let sharded = args.shards.command()?;
    let loaded = start_logging(&args.root, args.verbosity, !args.dry_run)?;
    let project = Project::with_settings(
        &args.root,
        loaded,
        &OpenOptions { method: args.method.clone(), no_cache: args.no_cache },
    )?;
    if args.dry_run {
        return print_plan(&graphrag_project::index_dry_run(project, args.resume));
    }
    let opts = IndexOptions { resume: args.resume, run: run_settings(args.skip_validation, args.verbosity) };
    let report = match sharded {
        Sharded::Shard(spec, phase) => return crate::shard::run_shard(project, spec, phase, &opts, args.verbosity),
        Sharded::MergeGraph(count, stages) => {
            let staged = graphrag_project::index_merge_graph(project, count, &opts, stages)?;
            crate::shard::print_graph_staged(&staged, args.verbosity);
            return Ok(());
        }
        Sharded::Merge(count) => graphrag_project::index_merge(project, count, &opts),
        Sharded::None => graphrag_project::index(project, &opts),
    }
    .map_err(shown)?;
    if args.verbosity >= 0 {
        println!("Indexed with pipeline `{}` in {:.2} s:", report.plan.name, report.stats.total_runtime);
        print_steps(&report.plan, &report.stats);
        let published: Vec<&str> = report.plan.published.iter().map(String::as_str).collect();
        println!("Tables in {}: {}", report.published_to, published.join(", "));
        println!("Stats: {}/stats.json", report.published_to);
    }
    print_lancedb(&report, args.verbosity);
    Ok(())
}

/// The error of a failed run, its note (failed items, what was kept, what
/// to rerun) printed first, so that the error's one line stays the last.
pub fn shown(failure: RunError) -> anyhow::Error {
    if let Some(note) = &failure.note {
        tracing::error!(target: crate::logging::FILE_ONLY, "{note}");
        eprintln!("{note}");
    }
    failure.error
}

/// The LanceDB tables a run wrote (settings' `vector_store.type: lancedb`).
pub fn print_lancedb(report: &RunReport, verbosity: i8) {
    if let Some(export) = report.lancedb.as_ref().filter(|_| verbosity >= 0) {
        let names: Vec<String> = export.tables.iter().map(|t| format!("{} ({} rows)", t.table, t.rows)).collect();
        println!("LanceDB tables for GraphRAG's Python API in {}: {}", export.db_uri.display(), names.join(", "));
    }
}

/// Where the run draws its progress bars: nowhere when quiet or when
/// stderr is not a terminal.
fn progress_bars(verbosity: i8) -> Option<indicatif::MultiProgress> {
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

pub fn print_plan(dry: &DryRun) -> anyhow::Result<()> {
    let plan = &dry.plan;
    let skip = dry.skipped_steps()?;
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
    println!("Publishes to {}: {}", dry.publishes_to, published.join(", "));
    print_llm_estimate(dry)
}

/// The dry run's cost estimate: calls and prompt tokens per LLM step,
/// computed from the real inputs (steps without a model run in memory).
fn print_llm_estimate(dry: &DryRun) -> anyhow::Result<()> {
    let estimates = dry.estimate()?;
    println!("LLM estimate (nothing sent):");
    let (mut calls, mut tokens, mut cached) = (0, 0, 0);
    let (mut later, mut unestimated) = (Vec::new(), Vec::new());
    for (step, e) in dry.plan.steps.iter().zip(&estimates) {
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
            StepEstimate::NotEstimated => unestimated.push(step.id.as_str()),
            StepEstimate::NoModel => {}
        }
    }
    if calls == 0 && later.is_empty() && unestimated.is_empty() {
        println!("  no step of this pipeline calls a language model");
    } else {
        println!("  total so far: ≤ {calls} calls, ~{tokens} prompt tokens ({cached} items already cached)");
    }
    if !unestimated.is_empty() {
        println!("  call a model, not estimated: {}", unestimated.join(", "));
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
