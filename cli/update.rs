//! `graphrag-rs update`: brings the index up to date with the input folder
//! (new, changed and removed documents) without paying for unchanged work;
//! the work is graphrag_project's (see its `update`).

use std::path::PathBuf;

use graphrag_project::{RunReport, UpdateOptions};

use crate::index::{print_lancedb, print_plan, print_steps, run_settings, shown, start_logging};
use crate::shard::Sharded;

pub struct UpdateArgs {
    pub shards: crate::shard::ShardFlags,
    pub root: PathBuf,
    pub method: String,
    pub dry_run: bool,
    pub no_cache: bool,
    pub skip_validation: bool,
    pub verbosity: i8,
}

pub fn run(args: &UpdateArgs) -> anyhow::Result<()> {
    // Flags that do not go together fail before the project is opened.
    let sharded = args.shards.command()?;
    start_logging(&args.root, args.verbosity, !args.dry_run)?;
    let opts = UpdateOptions {
        method: args.method.clone(),
        no_cache: args.no_cache,
        run: run_settings(args.skip_validation, args.verbosity),
    };
    if args.dry_run {
        return print_plan(&graphrag_project::update_dry_run(&args.root, &opts)?);
    }
    let report = match sharded {
        Sharded::Shard(spec, phase) => {
            let report = graphrag_project::update_shard(&args.root, spec, phase, &opts)?;
            crate::shard::print_shard(&report, args.verbosity);
            return Ok(());
        }
        Sharded::MergeGraph(count, stages) => {
            let staged = graphrag_project::update_merge_graph(&args.root, count, &opts, stages)?;
            crate::shard::print_graph_staged(&staged, args.verbosity);
            return Ok(());
        }
        Sharded::Merge(count) => graphrag_project::update_merge(&args.root, count, &opts),
        Sharded::None => graphrag_project::update(&args.root, &opts),
    }
    .map_err(shown)?;
    if args.verbosity >= 0 {
        print_summary(&report);
    }
    print_lancedb(&report, args.verbosity);
    Ok(())
}

fn print_summary(report: &RunReport) {
    println!("Updated with pipeline `{}` in {:.2} s:", report.plan.name, report.stats.total_runtime);
    if let Some(c) = &report.changes {
        let list = |v: &[String]| if v.is_empty() { String::new() } else { format!(" ({})", v.join(", ")) };
        println!("  documents: {} added{}", c.added.len(), list(&c.added));
        println!("             {} changed{}", c.changed.len(), list(&c.changed));
        println!("             {} removed{}", c.removed.len(), list(&c.removed));
        println!("             {} unchanged", c.unchanged);
    }
    for (model, u) in &report.stats.llm {
        println!(
            "  {model}: {} calls ({} prompt tokens), {} answered from the cache",
            u.calls, u.prompt_tokens, u.cache_hits
        );
    }
    print_steps(&report.plan, &report.stats);
}
