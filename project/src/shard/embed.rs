//! The second map of a sharded index: the per-item embeddings of the global
//! tables (entity and relationship descriptions, community reports).
//!
//! `--merge --phase graph` runs the merge's steps but those embeddings into
//! the staging folder (nothing is published), puts a copy of the staged
//! tables they read beside the shards (`graph/`: on an object store, for
//! the embed shards of every machine) and writes `graph.json`, their
//! hashes, last. `--shard K/N --phase embed` runs
//! the embed steps over the staged rows whose id hashes to K: each vector
//! goes to the project's model cache under its text, as every embedding
//! does, so the key does not depend on N or on the rows embedded with it.
//! The last `--merge` resumes from the staged steps (unchanged, so skipped)
//! and runs the embed steps, which find every vector in the cache: the
//! published tables are the single run's. The cache is the channel, so the
//! embed phase needs it on (`cache.type: json`, the default) and shared by
//! the machines (a shared folder, or `cache.storage` in the bucket).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, ensure, Context};
use arrow_array::{BooleanArray, RecordBatch};
use graphrag_engine::context::{PreviousIndex, PublishedTables, VerbContext};
use graphrag_engine::pipeline::{Plan, Step};
use graphrag_engine::runner;
use graphrag_engine::stats::RunStats;
use graphrag_engine::storage::{Location, WorkingCopy};
use graphrag_engine::table::strings;
use graphrag_engine::verb::{Verb, VerbInfo};
use graphrag_engine::{staging, store};
use serde::{Deserialize, Serialize};

use super::model::{self, ModelStage, Next};
use super::{
    from_fragments, is_global_embed, relink, shard_location, shard_of, shards_location, without_ann_index, ShardPhase,
    ShardReport, ShardSpec, DONE,
};
use crate::project::Project;
use crate::run::{open_for_update, run_options, IndexOptions, RunSettings, UpdateOptions};

/// The marker `--phase graph` leaves in the shards' folder.
const GRAPH: &str = "graph.json";

/// The embed shards' folder (beside the unit shards' `K-of-N` folders).
pub(super) fn location(base: &Location) -> Location {
    base.join("embed")
}

/// Where `--phase graph` puts the staged tables the embed shards read.
fn staged_tables(base: &Location) -> Location {
    base.join("graph")
}

/// What `--phase graph` staged: the graph for the embed shards (its
/// `graph.json`), or the inputs of the model stage it stopped before.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GraphStaged {
    /// The model stage it stopped before (`--shard K/M --phase model`
    /// next, then `--merge --phase stage` again); `None`: the graph is staged.
    #[serde(skip)]
    pub model_stage: Option<ModelStage>,
    /// The staged tables the embed steps read: sha256 of each file.
    pub(crate) tables: BTreeMap<String, String>,
    /// Their rows (the texts the embed shards share out, at most).
    pub rows: BTreeMap<String, usize>,
    /// The staged run's stats.
    #[serde(skip)]
    pub stats: RunStats,
    /// Where the staged run is (the next `--merge` resumes from it).
    #[serde(skip)]
    pub staging_dir: PathBuf,
}

/// Whether `--phase graph` staged the graph, or stopped before a model
/// stage, and the merge has not published it yet.
pub(super) fn graph_staged(base: &Location) -> anyhow::Result<bool> {
    Ok(base.read(GRAPH)?.is_some() || model::read_marker(base)?.is_some())
}

/// After the merge published: the markers, the staged tables' copies and the
/// embed and model shards' folders go (their answers are in the cache).
pub(super) fn clear(base: &Location) -> anyhow::Result<()> {
    clear_embed(base)?;
    model::clear(base)
}

/// The graph's marker, its staged tables' copies and the embed shards' folders.
fn clear_embed(base: &Location) -> anyhow::Result<()> {
    base.remove(GRAPH)?;
    staged_tables(base).remove_all()?;
    location(base).remove_all()
}

/// Refuses a shard `--phase` that hands its answers to the merge through
/// the model cache when the cache is off.
pub(super) fn require_cache(project: &Project, phase: &str) -> anyhow::Result<()> {
    let cache = &project.settings().cache;
    if !cache.enabled() {
        bail!(
            "`--phase {phase}` hands its answers to the merge through the model cache, and cache.type is `{}` in settings.yaml: set it to `json` (the default), or merge without the {phase} phase",
            cache.kind
        );
    }
    Ok(())
}

/// `index --merge --phase graph`: the merge of the finished shards of
/// `count` (or of the only count there is), without the per-item
/// embeddings, staged for the embed shards and the last `--merge`; with
/// `model_stages` (`--phase stage`), only up to the next model stage, staged
/// for the model shards (see [`model`]).
pub fn index_merge_graph(
    project: Project,
    count: Option<usize>,
    opts: &IndexOptions,
    model_stages: bool,
) -> anyhow::Result<GraphStaged> {
    // After a model stage it goes on from what it staged.
    let base = shards_location(&project.storage.output, &project.plan);
    let resume = opts.resume || model::read_marker(&base)?.is_some();
    let writer = project.storage.output.lock_for_writing()?;
    writer.prepare(resume)?;
    let staged = stage_graph(project, None, resume, &opts.run, count, model_stages);
    drop(writer);
    staged
}

/// `update --merge --phase graph`: as [`index_merge_graph`], for an update
/// (which always resumes from what is staged).
pub fn update_merge_graph(
    root: &Path,
    count: Option<usize>,
    opts: &UpdateOptions,
    model_stages: bool,
) -> anyhow::Result<GraphStaged> {
    let (project, writer) = open_for_update(root, opts, false)?;
    let index = project.storage.output.working_copy();
    let previous = project.has_index().then(|| Box::new(PublishedTables(index.clone())) as Box<dyn PreviousIndex>);
    let staged = stage_graph(project, previous, true, &opts.run, count, model_stages);
    drop(writer);
    staged
}

/// Runs the merge's plan but the per-item embeddings into the staging
/// folder, up to the next model stage (with `model_stages`; see [`model`])
/// or to the end, and records what the model shards or the embed shards read.
fn stage_graph(
    mut project: Project,
    previous: Option<Box<dyn PreviousIndex>>,
    resume: bool,
    run: &RunSettings,
    count: Option<usize>,
    model_stages: bool,
) -> anyhow::Result<GraphStaged> {
    project.llm.stop_with(&run.stop);
    let output = project.storage.output.clone();
    let run_opts = run_options(&project, resume, run);
    let staging_dir = staging::dir(output.working_copy().path());
    // The cache is the model shards' channel: without it, no stage.
    let stop_at_stages = model_stages && project.settings().cache.enabled();
    let (mut plan, ws) = project.workspace(&staging_dir, previous);
    let base = shards_location(&output, &plan);
    let (embeds, mut steps): (Vec<Step>, Vec<Step>) = plan.steps.into_iter().partition(is_global_embed);
    relink(&mut steps)?;
    let mut staged = GraphStaged {
        model_stage: None,
        tables: BTreeMap::new(),
        rows: BTreeMap::new(),
        stats: RunStats::default(),
        staging_dir: staging_dir.clone(),
    };
    let next = model::next(&base, &steps, stop_at_stages, base.read(GRAPH)?.is_some())?;
    if let Next::Wave(stage) = next {
        model::save(&base, &stage)?;
        return Ok(GraphStaged { model_stage: Some(stage), ..staged });
    }
    plan.steps = steps;
    from_fragments(&mut plan, &output, count)?;
    let left_out: BTreeSet<&String> = embeds.iter().flat_map(|s| &s.outputs).collect();
    let stop_before = match next {
        Next::Stage(at) => {
            let step = &plan.steps[at];
            let stage = (step.id.clone(), step.inputs.clone());
            plan.steps = model::before_stage(std::mem::take(&mut plan.steps), at)?;
            Some(stage)
        }
        _ => None,
    };
    let produced: BTreeSet<&String> = plan.steps.iter().flat_map(|s| &s.outputs).collect();
    let published = plan.published.iter().filter(|t| !left_out.contains(t) && produced.contains(t)).cloned().collect();
    let plan = Plan { published, ..plan };
    let stats = runner::run(&plan, &ws, &run_opts)?;
    if let Some((step, inputs)) = stop_before {
        clear_embed(&base)?;
        let path_of = |t: &str| store::table_path(&staging_dir, t, plan.is_published(t));
        let stage = model::stage(&base, &step, &inputs, path_of)?;
        return Ok(GraphStaged { model_stage: Some(stage), stats, ..staged });
    }
    staged.stats = stats;
    for table in embeds.iter().flat_map(|s| &s.inputs) {
        let path = store::table_path(&staging_dir, table, plan.is_published(table));
        let hash = store::file_sha256(&path).with_context(|| format!("reading {}", path.display()))?;
        staged.rows.insert(table.clone(), store::read_table(&path)?.num_rows());
        staged.tables.insert(table.clone(), hash);
    }
    // Embed shards of another staging embedded other rows: they run again
    // (those of this one, staged again unchanged, are kept).
    if read_marker(&base)?.map(|before| before.tables) != Some(staged.tables.clone()) {
        clear_embed(&base)?;
        let copies = staged_tables(&base).working_copy();
        for table in staged.tables.keys() {
            copies.put_table(table, &store::table_path(&staging_dir, table, plan.is_published(table)))?;
        }
    }
    base.put(GRAPH, &serde_json::to_vec_pretty(&staged)?)?;
    model::clear(&base)?;
    Ok(staged)
}

/// The marker of the last `--phase graph`, if there is one.
fn read_marker(base: &Location) -> anyhow::Result<Option<GraphStaged>> {
    Ok(base.read(GRAPH)?.and_then(|bytes| serde_json::from_slice(&bytes).ok()))
}

/// A staged table, or its rows whose id hashes to one shard.
struct StagedRows {
    path: PathBuf,
    /// The file's sha256 when `--phase graph` staged it.
    hash: String,
    /// The shard whose rows are kept (an embed shard); `None`: all (a model shard).
    spec: Option<ShardSpec>,
}

const STAGED_ROWS: VerbInfo = VerbInfo {
    name: "staged_rows",
    about: "a table the graph phase staged, or the rows of it that belong to one shard",
    inputs: &[],
    outputs: &["table"],
};

impl Verb for StagedRows {
    fn run(&self, _: &[Arc<RecordBatch>], _: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        ensure!(
            store::file_sha256(&self.path).as_deref() == Some(self.hash.as_str()),
            "{} is not what `--merge --phase graph` staged (another one since?): run `--merge --phase graph` again, then the shards",
            self.path.display()
        );
        let table = store::read_table(&self.path)?;
        let Some(spec) = self.spec else { return Ok(vec![table]) };
        let ids = strings(&table, &self.path.display().to_string(), "id")?;
        let keep: BooleanArray = ids.iter().map(|id| Some(shard_of(id, spec.count) == spec.index)).collect();
        Ok(vec![arrow_select::filter::filter_record_batch(&table, &keep)?])
    }

    fn external_fingerprint(&self, _: &VerbContext) -> anyhow::Result<Option<String>> {
        Ok(Some(match self.spec {
            Some(spec) => format!("{} shard {spec}", self.hash),
            None => self.hash.clone(),
        }))
    }
}

/// The step that gives a shard the staged table `table` of `copies` (or
/// its rows of shard `spec`), brought from the shared location unless the
/// local copy is it already.
pub(super) fn staged_step(
    copies: &WorkingCopy,
    table: &str,
    hash: &str,
    spec: Option<ShardSpec>,
) -> anyhow::Result<Step> {
    let path = copies.table_path(table);
    if store::file_sha256(&path).as_deref() != Some(hash) && !copies.pull_table(table)? {
        bail!("{} is missing: run `--merge --phase graph` again, then the shards", path.display());
    }
    Ok(Step {
        id: format!("staged_{table}"),
        info: STAGED_ROWS,
        inputs: Vec::new(),
        outputs: vec![table.to_string()],
        args: serde_json::json!({}),
        verb: Box::new(StagedRows { path, hash: hash.to_string(), spec }),
        line: None,
        deps: Vec::new(),
    })
}

/// `index --shard K/N --phase embed`: embeds the staged rows of shard K
/// into the model cache (see the module docs); a finished shard is only
/// checked. Errors name the shard.
pub(crate) fn embed_shard(mut project: Project, spec: ShardSpec, run: &RunSettings) -> anyhow::Result<ShardReport> {
    require_cache(&project, "embed")?;
    project.llm.stop_with(&run.stop);
    let began = Instant::now();
    let base = shards_location(&project.storage.output, &project.plan);
    let Some(staged) = read_marker(&base)? else {
        if let Some(stage) = model::read_marker(&base)? {
            bail!(
                "the graph phase stopped before the model stage `{}`: run `--shard K/N --phase model` for K = 0 to N-1, then `--merge --phase stage` again until it stages the graph (or `--merge --phase graph`, which asks the stages left itself)",
                stage.step
            )
        }
        bail!(
            "no staged graph to embed for these settings and pipeline: run the shards (`--shard K/N`), then `--merge --phase graph`, then `--shard K/N --phase embed`"
        )
    };
    let shard = shard_location(&location(&base), spec);
    let dir = shard.working_copy().path().to_path_buf();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    shard.remove(DONE)?;
    let mut run_opts = run_options(&project, true, run);
    run_opts.tolerated_failures = 0.0;
    let copies = staged_tables(&base).working_copy();
    let (plan, ws) = project.workspace(&dir, None);
    let mut steps: Vec<Step> = Vec::new();
    for (table, hash) in &staged.tables {
        steps.push(staged_step(&copies, table, hash, Some(spec))?);
    }
    let mut embeds: Vec<Step> = plan.steps.into_iter().filter(is_global_embed).collect();
    for step in &mut embeds {
        without_ann_index(step)?;
    }
    let outputs: Vec<String> = embeds.iter().flat_map(|s| s.outputs.clone()).collect();
    steps.extend(embeds);
    relink(&mut steps)?;
    let plan = Plan { steps, published: BTreeSet::new(), ..plan };
    let stats = runner::run(&plan, &ws, &run_opts)
        .map_err(|e| anyhow::Error::from(e).context(format!("embed shard {spec} failed")))?;
    let mut embedded_texts = 0;
    for table in &outputs {
        embedded_texts += store::read_table(&store::table_path(&dir, table, false))?.num_rows();
    }
    ShardReport { embedded_texts, ..ShardReport::finished(ShardPhase::Embed, spec, began, &stats, &shard) }.save(&shard)
}
