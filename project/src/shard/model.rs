//! The third map of a sharded index: the model stages of the graph phase
//! (entity-resolution questions, description summaries, community reports),
//! whose calls are not one text unit's.
//!
//! `--merge --phase stage` stops before each step of the merge that
//! shares out its model calls ([`Verb::shards_model_calls`]) and whose
//! answers it has not been through yet: it runs the steps that do not depend
//! on it, copies the step's input tables beside the shards
//! (`model/<step>/inputs/`) and writes `model.json` (the step, the wave, the
//! tables' hashes) — a *model stage*. `--shard K/M --phase model` runs the
//! step over those tables with [`ItemShard`] K of M: the verb asks the model
//! only for its items whose key hashes to K (an entity's or a relationship's
//! name, a question batch's first pair, a community's number), each answer
//! validated by the verb's own check before it is cached, as in any run. The
//! next `--merge --phase stage` resumes the staged steps, runs the stage's
//! step — every answer is in the cache, so it asks nothing — and stops before
//! the next stage; with no stage left it stages the graph as `--merge
//! --phase graph` does (which, run at any point, goes on to the end, asking
//! the stages left itself). Community reports come in dependent waves (a report whose
//! context is too long holds its sub-communities' reports): the shards of
//! wave w ask for the reports of wave w, read the earlier waves' from the
//! cache, and say how many waves there are; the graph phase then stages
//! wave w + 1 (nothing to run) until the last.
//!
//! Why the cache is the channel, and no fragments of answers: the step that
//! assembles the stage's output is the step a single `index` runs, on the
//! same tables, with every answer from the cache, so the published index is
//! the single run's whatever M (and whatever a shard's retries did); a
//! rerun, a killed shard or another machine asks nothing the cache holds;
//! and nothing new is kept (no table of answers beside the cache, no second
//! code path per verb that could drift from the first). The cost: the cache
//! must be on and shared by the machines (as for the embed phase), and the
//! graph phase renders the stage's prompts again to find their answers (CPU,
//! no model call).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use arrow_array::RecordBatch;
use graphrag_engine::context::{ItemShard, PreviousIndex, VerbContext};
use graphrag_engine::pipeline::{Plan, Step};
use graphrag_engine::runner;
use graphrag_engine::storage::Location;
use graphrag_engine::store;
use graphrag_engine::verb::Verb;
use graphrag_operations::ids::sha256_hex;
use serde::{Deserialize, Serialize};

use super::embed::{require_cache, staged_step};
use super::{relink, shard_location, ShardPhase, ShardReport, ShardSpec, DONE};
use crate::project::Project;
use crate::run::{run_options, RunSettings};

/// The marker of the model stage the graph phase stopped before.
const MODEL: &str = "model.json";

/// A model stage: a step of the merge whose model calls the model shards
/// ask, one wave of them (what `model.json` holds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelStage {
    /// The step's id in the pipeline.
    pub step: String,
    /// The wave the shards ask (0 first; reports may have more).
    pub wave: usize,
    /// The staged tables the step reads: sha256 of each file.
    pub tables: BTreeMap<String, String>,
}

impl ModelStage {
    /// Where the stage's inputs and shards are: per step and inputs, so
    /// that the shards of inputs staged before are never taken for these.
    fn location(&self, base: &Location) -> Location {
        let described = serde_json::to_string(&self.tables).expect("json");
        let key = sha256_hex(&[self.step.as_bytes(), described.as_bytes()]);
        base.join(&format!("model/{}-{}", self.step, &key[..16]))
    }

    /// The shards of this stage's wave.
    pub(super) fn shards(&self, base: &Location) -> Location {
        self.location(base).join(&format!("w{}", self.wave))
    }

    /// What the shards' lines call it.
    fn name(&self) -> String {
        format!("{} wave {}", self.step, self.wave)
    }
}

/// Whether a step is a model stage: its verb shares out its model calls,
/// and it calls a model with these args.
fn is_stage(step: &Step) -> bool {
    step.verb.shards_model_calls() && step.verb.model_to_call().is_some()
}

/// The model stage the last graph phase stopped before, if any.
pub(super) fn read_marker(base: &Location) -> anyhow::Result<Option<ModelStage>> {
    Ok(base.read(MODEL)?.and_then(|bytes| serde_json::from_slice(&bytes).ok()))
}

/// After the merge published, or once the graph phase got past every
/// stage: the marker, the staged inputs and the shards' markers go (their
/// answers are in the cache).
pub(super) fn clear(base: &Location) -> anyhow::Result<()> {
    base.remove(MODEL)?;
    base.join("model").remove_all()
}

/// What the graph phase does next.
pub(super) enum Next {
    /// The next wave of the stage the last one stopped before: nothing to run.
    Wave(ModelStage),
    /// Stop before the model stage at this position of the steps.
    Stage(usize),
    /// Run every step (no stage left, or not asked to stop at one).
    All,
}

/// Decides what the graph phase runs of `steps` (the merge's, but the
/// global embeddings): everything unless it `stop_at_stages`; else the
/// stages up to the one the last graph phase stopped before are behind it,
/// past the last wave of that one the next stage is next, and with
/// `graph_done` (the graph phase finished before) none.
pub(super) fn next(base: &Location, steps: &[Step], stop_at_stages: bool, graph_done: bool) -> anyhow::Result<Next> {
    if !stop_at_stages {
        return Ok(Next::All);
    }
    let stages: Vec<usize> = (0..steps.len()).filter(|&i| is_stage(&steps[i])).collect();
    let pending = read_marker(base)?.and_then(|s| steps.iter().position(|t| t.id == s.step).map(|i| (s, i)));
    let behind = match pending {
        Some((stage, at)) => {
            if stage.wave + 1 < waves(base, &stage)? {
                return Ok(Next::Wave(ModelStage { wave: stage.wave + 1, ..stage }));
            }
            stages.iter().position(|&i| i == at).map_or(0, |p| p + 1)
        }
        None if graph_done => stages.len(),
        None => 0,
    };
    Ok(stages.get(behind).map_or(Next::All, |&i| Next::Stage(i)))
}

/// The waves of a stage, as its finished shards counted them (1 when none
/// finished: the graph phase then asks what is left itself).
fn waves(base: &Location, stage: &ModelStage) -> anyhow::Result<usize> {
    let shards = stage.shards(base);
    let mut most = 1;
    for name in shards.subfolders()? {
        if let Some(marker) = shards.join(&name).read(DONE)? {
            if let Ok(report) = serde_json::from_slice::<ShardReport>(&marker) {
                most = most.max(report.waves);
            }
        }
    }
    Ok(most)
}

/// `steps` but the one at `stage` and those that depend on it, relinked.
pub(super) fn before_stage(steps: Vec<Step>, stage: usize) -> anyhow::Result<Vec<Step>> {
    let mut after = vec![false; steps.len()];
    after[stage] = true;
    // Steps may be listed before the steps they read: until nothing changes.
    let mut changed = true;
    while changed {
        changed = false;
        for (i, step) in steps.iter().enumerate() {
            if !after[i] && step.deps.iter().any(|&d| after[d]) {
                after[i] = true;
                changed = true;
            }
        }
    }
    let mut kept: Vec<Step> = steps.into_iter().zip(after).filter(|(_, a)| !a).map(|(s, _)| s).collect();
    relink(&mut kept)?;
    Ok(kept)
}

/// Stages the input tables of step `step` (files of the graph phase's
/// staging folder, by `path_of`) for the model shards, and the stage's
/// marker, last.
pub(super) fn stage(
    base: &Location,
    step: &str,
    inputs: &[String],
    path_of: impl Fn(&str) -> std::path::PathBuf,
) -> anyhow::Result<ModelStage> {
    let mut stage = ModelStage { step: step.to_string(), wave: 0, tables: BTreeMap::new() };
    for table in inputs {
        let path = path_of(table);
        let hash = store::file_sha256(&path).with_context(|| format!("reading {}", path.display()))?;
        stage.tables.insert(table.clone(), hash);
    }
    let copies = stage.location(base).join("inputs").working_copy();
    for table in inputs {
        copies.put_table(table, &path_of(table))?;
    }
    save(base, &stage)?;
    Ok(stage)
}

/// Writes the marker of the stage the graph phase stopped before.
pub(super) fn save(base: &Location, stage: &ModelStage) -> anyhow::Result<()> {
    base.put(MODEL, &serde_json::to_vec_pretty(stage)?)
}

/// A model stage's step run as one shard of it ([`ItemShard`]).
struct AskShard {
    inner: Box<dyn Verb>,
    shard: ItemShard,
}

impl Verb for AskShard {
    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        self.inner.run(inputs, &ctx.with_item_shard(self.shard))
    }

    fn external_fingerprint(&self, ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        let inner = self.inner.external_fingerprint(ctx)?.unwrap_or_default();
        Ok(Some(format!("{inner} shard {}/{} wave {}", self.shard.index, self.shard.count, self.shard.wave)))
    }

    fn model_to_call(&self) -> Option<&str> {
        self.inner.model_to_call()
    }
}

/// `index --shard K/M --phase model` (and `update`'s, with the index it
/// updates as `previous`): asks the model for the staged stage's items of
/// shard K (see the module docs), into the cache. A shard that finished
/// before is not run again. Errors name the shard and the stage.
pub(crate) fn model_shard(
    mut project: Project,
    spec: ShardSpec,
    run: &RunSettings,
    previous: Option<Box<dyn PreviousIndex>>,
) -> anyhow::Result<ShardReport> {
    require_cache(&project, "model")?;
    project.llm.stop_with(&run.stop);
    let began = Instant::now();
    let base = super::shards_location(&project.storage.output, &project.plan);
    let Some(stage) = read_marker(&base)? else {
        bail!(
            "no model stage staged for these settings and pipeline: run the shards (`--shard K/N`), then `--merge --phase stage`, which stops before each model stage"
        )
    };
    let shard = shard_location(&stage.shards(&base), spec);
    if let Some(marker) = shard.read(DONE)? {
        if let Ok(report) = serde_json::from_slice::<ShardReport>(&marker) {
            return Ok(ShardReport { fragments: shard.describe(), ..report });
        }
    }
    let dir = shard.working_copy().path().to_path_buf();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // The step runs again (its answers from the cache) to count its waves.
    let mut run_opts = run_options(&project, false, run);
    run_opts.tolerated_failures = 0.0;
    let (plan, ws) = project.workspace(&dir, previous);
    let Some(mut step) = plan.steps.into_iter().find(|s| s.id == stage.step) else {
        bail!("the pipeline has no step `{}` (changed since `--merge --phase stage`?): run it again", stage.step)
    };
    let inputs = stage.location(&base).join("inputs").working_copy();
    let mut steps: Vec<Step> = Vec::new();
    for (table, hash) in &stage.tables {
        steps.push(staged_step(&inputs, table, hash, None)?);
    }
    let shard_of_stage = ItemShard { index: spec.index, count: spec.count, wave: stage.wave };
    step.verb =
        Box::new(AskShard { inner: std::mem::replace(&mut step.verb, Box::new(super::NoVerb)), shard: shard_of_stage });
    let id = step.id.clone();
    steps.push(step);
    relink(&mut steps)?;
    let plan = Plan { steps, published: Default::default(), ..plan };
    let stats = runner::run(&plan, &ws, &run_opts)
        .map_err(|e| anyhow::Error::from(e).context(format!("model shard {spec} of {} failed", stage.name())))?;
    let waves = stats.workflows.get(&id).and_then(|s| s.counts.get("model_waves").copied()).unwrap_or(1);
    ShardReport {
        stage: stage.name(),
        waves: waves.max(1) as usize,
        ..ShardReport::finished(ShardPhase::Model, spec, began, &stats, &shard)
    }
    .save(&shard)
}
