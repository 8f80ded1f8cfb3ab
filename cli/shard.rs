//! `graphrag-rs index --shard K/N` and `index --merge`: the map and reduce
//! of a sharded index (graphrag_project's `index_shard` / `index_merge`).

use clap::Args;
use graphrag_project::{IndexOptions, Project, ShardReport, ShardSpec};

#[derive(Args, Clone, Default)]
pub struct ShardFlags {
    /// Run shard K of N (K = 0 to N-1): load, chunk and the per-text-unit steps (extraction,
    /// claims, text unit embeddings) for the documents whose id hashes to K, into
    /// output/.shards/; the live index is not touched. Shards may run at once, on machines
    /// sharing the project folder. Then `--merge`.
    #[arg(long, value_name = "K/N", conflicts_with_all = ["merge", "dry_run"])]
    pub shard: Option<ShardSpec>,
    /// Merge the finished shards' fragments and run the steps over the whole corpus, publishing
    /// an index equal to a single `index` run.
    #[arg(long, conflicts_with = "dry_run")]
    pub merge: bool,
    /// With --merge: the shard count to merge (needed only when fragments of several counts exist).
    #[arg(long, value_name = "N", requires = "merge", value_parser = clap::value_parser!(u64).range(1..))]
    pub shards: Option<u64>,
}

/// Runs one shard and prints its line.
pub fn run_shard(project: Project, spec: ShardSpec, opts: &IndexOptions, verbosity: i8) -> anyhow::Result<()> {
    let report = graphrag_project::index_shard(project, spec, &opts.run)?;
    print_shard(&report, verbosity);
    Ok(())
}

/// A finished shard's line.
pub fn print_shard(report: &ShardReport, verbosity: i8) {
    if verbosity >= 0 {
        println!(
            "Shard {}/{}: {} documents, {} text units in {:.2} s; {} model calls, {} cache hits. Fragments in {}",
            report.shard,
            report.shards,
            report.documents,
            report.text_units,
            report.seconds,
            report.model_calls,
            report.cache_hits,
            report.dir.display()
        );
    }
}
