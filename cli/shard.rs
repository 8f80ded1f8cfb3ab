//! `graphrag-rs index --shard K/N` and `index --merge`: the map and reduce
//! of a sharded index (graphrag_project's `index_shard` / `index_merge`), and
//! the phases between them (`--merge --phase graph`, `--shard K/N --phase
//! model` and `--phase embed`).

use clap::{Args, ValueEnum};
use graphrag_project::{GraphStaged, IndexOptions, Project, ShardPhase, ShardReport, ShardSpec};

#[derive(Args, Clone, Default)]
pub struct ShardFlags {
    /// Run shard K of N (K = 0 to N-1): load, chunk and the per-text-unit steps (extraction,
    /// claims, text unit embeddings) for the documents whose id hashes to K, into
    /// output/.shards/ (uploaded when the output is in a bucket); the live index is not touched.
    /// Shards may run at once, on machines sharing the project folder or the bucket. Then `--merge`.
    #[arg(long, value_name = "K/N", conflicts_with_all = ["merge", "dry_run"])]
    pub shard: Option<ShardSpec>,
    /// Merge the finished shards' fragments and run the steps over the whole corpus, publishing
    /// an index equal to a single `index` run.
    #[arg(long, conflicts_with = "dry_run")]
    pub merge: bool,
    /// With --merge: the shard count to merge (needed only when fragments of several counts exist).
    #[arg(long, value_name = "N", requires = "merge", value_parser = clap::value_parser!(u64).range(1..=graphrag_project::MAX_SHARDS as u64))]
    pub shards: Option<u64>,
    /// Shards the merge's model work: `--merge --phase stage` runs the merge's steps up to the
    /// next model stage (resolution questions, summaries, reports, a wave at a time) and stages its
    /// inputs, `--shard K/N --phase model` asks the stage's items of shard K into the model cache,
    /// and `--merge --phase stage` again goes on, until it stages the graph (`--merge --phase
    /// graph` stages it at once, asking the model stages left itself); then `--shard K/N --phase
    /// embed` embeds the staged rows of shard K (entity and relationship descriptions, reports)
    /// into the cache, and `--merge` publishes.
    #[arg(long, value_enum, conflicts_with = "dry_run")]
    pub phase: Option<Phase>,
}

/// `--phase`: which part of a sharded run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Phase {
    /// With --shard (the default): the per-document steps.
    Units,
    /// With --shard: the embeddings of the staged graph's rows of shard K.
    Embed,
    /// With --shard: the model calls of the staged model stage's items of shard K.
    Model,
    /// With --merge: the merge's steps but the per-item embeddings, staged, not published.
    Graph,
    /// With --merge: as graph, but only up to the next model stage, whose inputs are staged.
    Stage,
}

/// What a sharded command runs, from its flags.
pub enum Sharded {
    Shard(ShardSpec, ShardPhase),
    /// `--merge --phase graph` (false) or `--phase stage` (true: up to the next model stage).
    MergeGraph(Option<usize>, bool),
    Merge(Option<usize>),
    /// Not a sharded command.
    None,
}

impl ShardFlags {
    /// The command these flags ask for; a `--phase` that does not go with
    /// `--shard` or `--merge` is an error naming the one it goes with.
    pub fn command(&self) -> anyhow::Result<Sharded> {
        let count = self.shards.map(|n| n as usize);
        Ok(match (self.shard, self.merge, self.phase) {
            (Some(spec), _, None | Some(Phase::Units)) => Sharded::Shard(spec, ShardPhase::Units),
            (Some(spec), _, Some(Phase::Embed)) => Sharded::Shard(spec, ShardPhase::Embed),
            (Some(spec), _, Some(Phase::Model)) => Sharded::Shard(spec, ShardPhase::Model),
            (_, true, Some(Phase::Graph)) => Sharded::MergeGraph(count, false),
            (_, true, Some(Phase::Stage)) => Sharded::MergeGraph(count, true),
            (_, true, None) => Sharded::Merge(count),
            (None, false, None) => Sharded::None,
            (_, _, Some(phase @ (Phase::Graph | Phase::Stage))) => {
                anyhow::bail!("--phase {} goes with --merge", phase.to_possible_value().expect("named").get_name())
            }
            (_, _, Some(phase)) => {
                anyhow::bail!("--phase {} goes with --shard K/N", phase.to_possible_value().expect("named").get_name())
            }
        })
    }
}

/// Runs one shard and prints its line.
pub fn run_shard(
    project: Project,
    spec: ShardSpec,
    phase: ShardPhase,
    opts: &IndexOptions,
    verbosity: i8,
) -> anyhow::Result<()> {
    let report = graphrag_project::run_shard(project, spec, phase, &opts.run)?;
    print_shard(&report, verbosity);
    Ok(())
}

/// A finished shard's line.
pub fn print_shard(report: &ShardReport, verbosity: i8) {
    if verbosity < 0 {
        return;
    }
    if report.phase == ShardPhase::Embed {
        println!(
            "Embed shard {}/{}: {} texts in {:.2} s; {} model calls, {} cache hits. Vectors in the model cache",
            report.shard, report.shards, report.embedded_texts, report.seconds, report.model_calls, report.cache_hits
        );
    } else if report.phase == ShardPhase::Model {
        println!(
            "Model shard {}/{} of {}: {:.2} s; {} model calls, {} cache hits. Answers in the model cache; next: `--merge --phase stage`",
            report.shard, report.shards, report.stage, report.seconds, report.model_calls, report.cache_hits
        );
    } else {
        println!(
            "Shard {}/{}: {} documents, {} text units in {:.2} s; {} model calls, {} cache hits. Fragments in {}",
            report.shard,
            report.shards,
            report.documents,
            report.text_units,
            report.seconds,
            report.model_calls,
            report.cache_hits,
            report.fragments
        );
    }
}

/// What `--merge --phase graph` staged, and what to run next.
pub fn print_graph_staged(staged: &GraphStaged, verbosity: i8) {
    if verbosity < 0 {
        return;
    }
    if let Some(stage) = &staged.model_stage {
        println!(
            "Staged the merge's steps up to the model stage `{}` (wave {}) in {:.2} s. Next: `--shard K/N --phase model` for K = 0 to N-1, then `--merge --phase stage` again",
            stage.step, stage.wave, staged.stats.total_runtime
        );
        return;
    }
    let rows: Vec<String> = staged.rows.iter().map(|(t, n)| format!("{t} {n} rows")).collect();
    println!(
        "Staged the merge's graph steps in {:.2} s in {} ({}). Next: `--shard K/N --phase embed` for K = 0 to N-1, then `--merge`",
        staged.stats.total_runtime,
        staged.staging_dir.display(),
        rows.join(", ")
    );
}
