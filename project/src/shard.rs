//! Sharded indexing: `index --shard K/N` (map) and `index --merge` (reduce).
//!
//! A shard loads the input, keeps the documents whose id hashes to it
//! ([`shard_of`]), chunks them, and runs the steps that work one text unit at
//! a time: graph extraction (LLM with gleaning), claims, the text units'
//! embeddings. It writes the per-unit steps' outputs as fragment tables
//! (Parquet) under `.shards/<key>/K-of-N/` of the output location and a
//! `done.json` marker, written last; its model answers go to the project's
//! cache like any run's. The output location is a folder every worker
//! mounts or an object store prefix: a shard runs in its local folder (an
//! object store's working copy) and then uploads its fragments and marker
//! there, and the merge downloads the finished shards' fragments (those of
//! a shard that ran in the same working copy are there already), so the
//! same code serves both. The merge
//! loads and chunks the whole input again (cheap, and what fixes the text
//! units' corpus-wide order and `human_readable_id`s), takes the per-unit
//! steps' outputs from the fragments, put back in the single run's row order
//! (the order of the text units), and runs every other step — resolution,
//! summaries, clustering, reports, the other embeddings, the lexical index —
//! as `index` does, publishing through the same staging and commit. So the
//! published tables are those of a single-process `index`: a per-unit step
//! gives each unit the same rows whatever else it ran with, and every model
//! call's cache key is its request alone, never the shard count.
//!
//! The per-item embeddings of the global tables (entity descriptions,
//! relationship descriptions, community reports) can be sharded too, in a
//! second map ([`embed`]): `index --merge --phase graph` runs the merge's
//! steps but those embeddings and stages them (nothing published);
//! `index --shard K/N --phase embed` embeds the staged rows whose id hashes
//! to K into the model cache, where every vector is kept under its text (so
//! its key does not depend on N); the last `index --merge` resumes from the
//! staged steps and its embed steps find every vector in the cache. Without
//! the middle phases the merge embeds them itself, as before.
//!
//! The model calls of the merge's global steps — entity-resolution
//! questions, description summaries, community reports — are sharded in a
//! third map ([`model`]): `--merge --phase graph` stops before each such step
//! with its inputs staged, `index --shard K/N --phase model` asks the
//! step's items whose key hashes to K into the cache, and the next
//! `--merge --phase graph` runs the step from the cache and goes on.
//!
//! What is not sharded, and why: claims' ids and numbers count claims over
//! the whole corpus, so the shards make the claim calls and the merge asks
//! the cache again (no model call); the fast method's noun-phrase graph
//! settles capitalised words by their case in the whole corpus and prunes
//! the whole graph, so it runs in the merge.
//!
//! Shards never take the writer lock (they do not touch the live index) and
//! run in their own folders, so any number run at once, on one machine or on
//! several sharing the project folder or the bucket. A shard is resumable:
//! its folder is a run's output folder, rerun with `--resume`, so a shard run
//! twice, or killed and rerun, recomputes nothing it finished and asks the
//! model nothing it answered (on another machine, nothing the shared cache
//! holds); its marker goes first and comes back last, so the merge never
//! reads a shard half written.

mod embed;
mod model;

use embed::embed_shard;
pub use embed::{index_merge_graph, update_merge_graph, GraphStaged};
use model::model_shard;
pub use model::ModelStage;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{anyhow, bail, ensure, Context};
use arrow_array::cast::AsArray;
use arrow_array::types::Float32Type;
use arrow_array::{Array, BooleanArray, RecordBatch, UInt32Array};
use graphrag_engine::context::{PreviousIndex, PublishedTables, VerbContext};
use graphrag_engine::pipeline::{Plan, Step};
use graphrag_engine::runner;
use graphrag_engine::stats::RunStats;
use graphrag_engine::storage::Location;
use graphrag_engine::table::strings;
use graphrag_engine::verb::Verb;
use graphrag_engine::{schema, store};
use graphrag_operations::ids::sha256_hex;
use serde::{Deserialize, Serialize};

use crate::project::Project;
use crate::run::{
    index_with, open_for_update, update_with, IndexOptions, RunError, RunReport, RunSettings, UpdateOptions,
};

/// The most shards a sharded run may have: far more than machines that
/// would share one input, and a merge looks for every one of them (on an
/// object store, one GET each).
pub const MAX_SHARDS: usize = 65_536;

/// `count` if it is a number of shards (1 to [`MAX_SHARDS`]), else why not.
fn shard_count(count: usize) -> Result<usize, String> {
    if (1..=MAX_SHARDS).contains(&count) {
        return Ok(count);
    }
    Err(format!("the shard count N must be 1 to {MAX_SHARDS}"))
}

/// Shard `index` of `count` (0-based), as `K/N` on the command line; made
/// by parsing `K/N`, which checks that K < N ≤ [`MAX_SHARDS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardSpec {
    /// K, 0 to `count` - 1.
    pub(crate) index: usize,
    /// N, the number of shards.
    pub(crate) count: usize,
}

impl FromStr for ShardSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<ShardSpec, String> {
        let bad = || format!("`{s}` is not a shard: write K/N, the shard K (0 to N-1) of N, e.g. 0/4");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (usize, usize) =
            (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        shard_count(count).map_err(|why| format!("shard {index}/{count}: {why}"))?;
        if index >= count {
            return Err(format!("shard {index}/{count}: K must be 0 to N-1 ({})", count - 1));
        }
        Ok(ShardSpec { index, count })
    }
}

impl fmt::Display for ShardSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

pub(crate) use graphrag_operations::ids::shard_of;

/// What a step of the pipeline is in a sharded run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Loading and chunking: run by every shard (on its documents) and by the merge.
    Prefix,
    /// One text unit at a time: run by the shards; the merge takes its outputs from their fragments.
    PerUnit,
    /// One text unit at a time, but numbered corpus-wide (claims): run by
    /// the shards for its model calls, and again by the merge from the cache.
    PerUnitCached,
    /// Over the whole corpus: the merge's.
    Global,
}

fn role(step: &Step) -> Role {
    let single_input = step.inputs.len() == 1;
    match step.info.name {
        "load_documents" | "chunk" => Role::Prefix,
        "entity_extract" if single_input => Role::PerUnit,
        "embed" if single_input && step.args.get("field").and_then(|f| f.as_str()) == Some("text_unit_text") => {
            Role::PerUnit
        }
        "extract_claims" if single_input => Role::PerUnitCached,
        _ => Role::Global,
    }
}

/// Whether a step is one of the merge's per-item embeddings (entity and
/// relationship descriptions, reports), which the embed phase shards.
fn is_global_embed(step: &Step) -> bool {
    step.info.name == "embed" && role(step) == Role::Global
}

/// An embed step that saves no HNSW index: a shard's vectors are a part of
/// the field's, whose index the merge builds over all of them.
fn without_ann_index(step: &mut Step) -> anyhow::Result<()> {
    if step.info.name != "embed" {
        return Ok(());
    }
    step.args["ann_threshold"] = 0.into();
    step.verb = graphrag_verbs::registry()
        .build("embed", step.args.clone())
        .expect("embed is a registered verb")
        .map_err(|e| anyhow!("step `{}`: {}: {}", step.id, e.path, e.message))?;
    Ok(())
}

/// Points each step's `deps` at the steps (by position in `steps`) that
/// write its inputs, after steps were left out.
fn relink(steps: &mut [Step]) -> anyhow::Result<()> {
    let producer: HashMap<String, usize> =
        steps.iter().enumerate().flat_map(|(i, s)| s.outputs.iter().map(move |o| (o.clone(), i))).collect();
    for step in steps.iter_mut() {
        step.deps = step
            .inputs
            .iter()
            .map(|t| {
                producer
                    .get(t)
                    .copied()
                    .ok_or_else(|| anyhow!("step `{}` reads `{t}`, which no step before writes", step.id))
            })
            .collect::<anyhow::Result<_>>()?;
    }
    Ok(())
}

/// The name of the text units table the chunk step writes.
fn chunk_units(plan: &Plan) -> anyhow::Result<String> {
    plan.steps
        .iter()
        .find(|s| s.info.name == "chunk")
        .and_then(|s| s.outputs.first().cloned())
        .ok_or_else(|| anyhow!("pipeline `{}` has no `chunk` step: it cannot be sharded", plan.name))
}

/// The name of the documents table the chunk step writes (with its text unit ids).
fn chunk_documents(plan: &Plan) -> anyhow::Result<String> {
    plan.steps
        .iter()
        .find(|s| s.info.name == "chunk")
        .and_then(|s| s.outputs.get(1).cloned())
        .ok_or_else(|| anyhow!("pipeline `{}` has no `chunk` step writing documents: it cannot be sharded", plan.name))
}

/// Where every shard of this pipeline and these settings is kept, under the
/// output location: a hash of the shard steps' verbs, args and tables (the
/// input files are checked by each shard's resume and by the merge).
fn shards_location(output: &Location, plan: &Plan) -> Location {
    let described: Vec<serde_json::Value> = plan
        .steps
        .iter()
        .filter(|s| role(s) != Role::Global)
        .map(|s| serde_json::json!([s.id, s.info.name, s.args, s.inputs, s.outputs]))
        .collect();
    let text = serde_json::to_string(&described).expect("json");
    let key = sha256_hex(&[plan.name.as_bytes(), text.as_bytes()]);
    output.join(&format!(".shards/{}", &key[..16]))
}

fn shard_location(base: &Location, spec: ShardSpec) -> Location {
    base.join(&format!("{}-of-{}", spec.index, spec.count))
}

const DONE: &str = "done.json";
/// The ids of a shard's text units, for the merge's check that the shards
/// cover the input exactly.
const UNITS: &str = "shard_text_units";

/// Which map a shard runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShardPhase {
    /// The per-document steps (`--shard K/N`).
    #[default]
    Units,
    /// The embeddings of the staged global tables' rows (`--shard K/N --phase embed`).
    Embed,
    /// The model calls of the staged model stage (`--shard K/N --phase model`).
    Model,
}

/// What a finished shard did (its `done.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShardReport {
    /// The map it ran (absent from an older marker: `units`).
    #[serde(default)]
    pub phase: ShardPhase,
    /// K.
    pub shard: usize,
    /// N.
    pub shards: usize,
    /// The units phase: the documents of the shard.
    pub documents: usize,
    /// The units phase: their text units.
    pub text_units: usize,
    /// The embed phase: the texts it embedded (or found in the cache).
    #[serde(default)]
    pub embedded_texts: usize,
    /// The shard's wall time, in seconds.
    pub seconds: f64,
    /// The model phase: the stage it answered (`<step> wave <w>`).
    #[serde(default)]
    pub stage: String,
    /// The model phase: the waves that step's calls come in.
    #[serde(default)]
    pub waves: usize,
    /// Requests the model servers answered (cache hits not counted).
    pub model_calls: u64,
    /// Model requests the cache answered.
    pub cache_hits: u64,
    /// Where its fragments are (a folder, or an object store prefix).
    #[serde(skip)]
    pub fragments: String,
}

/// Keeps the documents of one shard from the load step's output.
struct ShardFilter {
    inner: Box<dyn Verb>,
    spec: ShardSpec,
    /// The titles of the shard's documents, for its errors.
    titles: Arc<Mutex<Vec<String>>>,
}

impl Verb for ShardFilter {
    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let mut outputs = self.inner.run(inputs, ctx)?;
        let docs = &outputs[0];
        let ids = strings(docs, "documents", "id")?;
        let keep: BooleanArray = ids.iter().map(|id| Some(shard_of(id, self.spec.count) == self.spec.index)).collect();
        let kept = arrow_select::filter::filter_record_batch(docs, &keep)?;
        *self.titles.lock().unwrap() = strings(&kept, "documents", "title")?.iter().map(|t| t.to_string()).collect();
        outputs[0] = kept;
        Ok(outputs)
    }

    fn external_fingerprint(&self, ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        let inner = self.inner.external_fingerprint(ctx)?.unwrap_or_default();
        Ok(Some(format!("{inner} shard {}", self.spec)))
    }
}

/// The plan of one shard: loading (its documents only), chunking, and the
/// per-unit steps reading the chunks; the per-unit steps' outputs are its
/// fragments (published in its folder).
fn shard_plan(plan: Plan, spec: ShardSpec, titles: Arc<Mutex<Vec<String>>>) -> anyhow::Result<Plan> {
    let units = chunk_units(&plan)?;
    let mut steps: Vec<Step> = Vec::new();
    let mut published = std::collections::BTreeSet::new();
    for mut step in plan.steps {
        match role(&step) {
            Role::Global => continue,
            Role::Prefix if step.info.name == "load_documents" => {
                let inner = std::mem::replace(&mut step.verb, Box::new(NoVerb));
                step.verb = Box::new(ShardFilter { inner, spec, titles: titles.clone() });
            }
            Role::Prefix => {}
            // In the fast pipeline the text units' embeddings read the final
            // text units, whose ids and texts are the chunks'.
            Role::PerUnit => {
                step.inputs = vec![units.clone()];
                without_ann_index(&mut step)?;
                published.extend(step.outputs.iter().cloned());
            }
            Role::PerUnitCached => step.inputs = vec![units.clone()],
        }
        steps.push(step);
    }
    relink(&mut steps)?;
    Ok(Plan { name: plan.name, description: plan.description, file: plan.file, steps, published })
}

/// A placeholder while a step's verb is being wrapped; never run.
struct NoVerb;

impl Verb for NoVerb {
    fn run(&self, _: &[Arc<RecordBatch>], _: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        unreachable!("a verb being wrapped is never run")
    }
}

/// Runs shard `spec` of the project's input (see the module docs) and
/// returns what it did; a shard that finished before with the same input
/// and settings is not run again (only checked). Errors name the shard and
/// its documents.
pub(crate) fn index_shard(mut project: Project, spec: ShardSpec, run: &RunSettings) -> anyhow::Result<ShardReport> {
    project.llm.stop_with(&run.stop);
    let began = Instant::now();
    let shard = shard_location(&shards_location(&project.storage.output, &project.plan), spec);
    let work = shard.working_copy();
    let dir = work.path().to_path_buf();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // Done again only once this run succeeded (the input may have changed).
    shard.remove(DONE)?;
    let mut run_opts = crate::run::run_options(&project, true, run);
    // A unit whose model call failed would be missing from the fragments,
    // and the merge cannot tell it from a unit with nothing in it: a shard
    // tolerates no failed item (the error names them; a rerun asks only those).
    run_opts.tolerated_failures = 0.0;
    let titles = Arc::new(Mutex::new(Vec::new()));
    let (plan, ws) = project.workspace(&dir, None);
    let plan = shard_plan(plan, spec, titles.clone())?;
    let units = chunk_units(&plan)?;
    let named = |e: anyhow::Error| {
        let titles = titles.lock().unwrap();
        let which = if titles.is_empty() { "documents not loaded yet".to_string() } else { titles.join(", ") };
        e.context(format!("shard {spec} failed (its documents: {which})"))
    };
    let stats = runner::run(&plan, &ws, &run_opts).map_err(|e| named(e.into()))?;
    // The shard's documents, also when its steps were all done before.
    let documents = store::read_table(&store::table_path(&dir, &chunk_documents(&plan)?, false))?;
    *titles.lock().unwrap() = strings(&documents, "documents", "title")?.iter().map(|t| t.to_string()).collect();
    let text_units = store::read_table(&store::table_path(&dir, &units, false)).map_err(named)?;
    let ids = strings(&text_units, "text_units", "id")?;
    let ids_table = RecordBatch::try_new(
        Arc::new(arrow_schema::Schema::new(vec![schema::text_field("id")])),
        vec![schema::text_col(&ids)],
    )?;
    store::write_table(&work.table_path(UNITS), &ids_table)?;
    for table in plan.published.iter().map(String::as_str).chain([UNITS]) {
        work.push_table(table)?;
    }
    let documents = titles.lock().unwrap().len();
    ShardReport {
        documents,
        text_units: ids.len(),
        ..ShardReport::finished(ShardPhase::Units, spec, began, &stats, &shard)
    }
    .save(&shard)
}

impl ShardReport {
    /// The report of a shard that just finished, its counts zero.
    fn finished(phase: ShardPhase, spec: ShardSpec, began: Instant, stats: &RunStats, at: &Location) -> ShardReport {
        ShardReport {
            phase,
            shard: spec.index,
            shards: spec.count,
            documents: 0,
            text_units: 0,
            embedded_texts: 0,
            stage: String::new(),
            waves: 0,
            seconds: began.elapsed().as_secs_f64(),
            model_calls: stats.llm.values().map(|u| u.calls).sum(),
            cache_hits: stats.llm.values().map(|u| u.cache_hits).sum(),
            fragments: at.describe(),
        }
    }

    /// Writes the report as its shard's `done.json`, after everything else
    /// the shard wrote: the shard is finished.
    fn save(self, shard: &Location) -> anyhow::Result<ShardReport> {
        shard.working_copy().write(DONE, &serde_json::to_vec_pretty(&self)?)?;
        Ok(self)
    }
}

/// A finished shard: its report and its marker's bytes.
struct Finished {
    report: ShardReport,
    marker: Vec<u8>,
    location: Location,
}

/// The finished shards of `count`, by index (`None`: not finished), as
/// every machine sees them (on an object store, one GET per shard).
fn finished_shards(base: &Location, count: usize) -> anyhow::Result<Vec<Option<Finished>>> {
    (0..shard_count(count).map_err(|why| anyhow!("{count} shards: {why}"))?)
        .map(|index| {
            let location = shard_location(base, ShardSpec { index, count });
            let Some(marker) = location.read(DONE)? else { return Ok(None) };
            // A marker that does not parse (written by another version) is no finished shard.
            let Ok(report) = serde_json::from_slice::<ShardReport>(&marker) else { return Ok(None) };
            let report = ShardReport { fragments: location.describe(), ..report };
            Ok(Some(Finished { report, marker, location }))
        })
        .collect()
}

/// Which shards of `count` of a phase have finished, for a driver that
/// reruns only the others.
pub fn shard_status(project: &Project, count: usize, phase: ShardPhase) -> anyhow::Result<Vec<Option<ShardReport>>> {
    let base = shards_location(&project.storage.output, &project.plan);
    let finished = match phase {
        ShardPhase::Units => finished_shards(&base, count)?,
        ShardPhase::Embed => finished_shards(&embed::location(&base), count)?,
        ShardPhase::Model => match model::read_marker(&base)? {
            Some(stage) => finished_shards(&stage.shards(&base), count)?,
            None => (0..count).map(|_| None).collect(),
        },
    };
    Ok(finished.into_iter().map(|f| f.map(|f| f.report)).collect())
}

/// The shard counts that have fragments for this pipeline and settings.
fn shard_counts(base: &Location) -> anyhow::Result<Vec<usize>> {
    let mut counts: Vec<usize> = base
        .subfolders()?
        .iter()
        .filter_map(|name| shard_count(name.split_once("-of-")?.1.parse().ok()?).ok())
        .collect();
    counts.sort_unstable();
    counts.dedup();
    Ok(counts)
}

impl Finished {
    /// Brings the shard's `tables` into its local folder, unless the folder
    /// holds them already: its marker is this very run's (the shard ran in
    /// this folder, or they were brought before). The marker is written
    /// locally after them.
    fn fetch(&self, tables: &[&str]) -> anyhow::Result<()> {
        let copy = self.location.working_copy();
        if copy.read_here(DONE).as_ref() == Some(&self.marker) {
            return Ok(());
        }
        for table in tables {
            if !copy.pull_table(table)? {
                bail!(
                    "shard {}/{} is marked finished but its fragment `{table}` is missing: run the shard again",
                    self.report.shard,
                    self.report.shards
                );
            }
        }
        copy.write_here(DONE, &self.marker)?;
        Ok(())
    }
}

/// A per-unit step's outputs, from the fragments, in the order of the text
/// units it reads (the single run's order).
struct FromFragments {
    step: String,
    /// Per output, the shards' fragments.
    fragments: Vec<Vec<RecordBatch>>,
    /// Every shard's text unit ids.
    shard_units: Arc<HashSet<String>>,
    /// An embed step's field and `ann_threshold`: its HNSW index is built
    /// here, over every shard's vectors (the shards build none).
    ann_index: Option<(String, usize)>,
}

impl Verb for FromFragments {
    fn run(&self, inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let ids = strings(&inputs[0], "text_units", "id")?;
        let position: HashMap<&str, u32> = ids.iter().enumerate().map(|(i, id)| (*id, i as u32)).collect();
        let missing = ids.iter().filter(|id| !self.shard_units.contains(**id)).count();
        let extra = self.shard_units.iter().filter(|id| !position.contains_key(id.as_str())).count();
        ensure!(
            missing == 0 && extra == 0,
            "the shards' fragments do not match the input ({missing} text units of the input in no shard, {extra} shard text units not in the input): the input or the settings changed after the shards ran; run the shards again"
        );
        let outputs: Vec<RecordBatch> =
            self.fragments.iter().map(|parts| self.ordered(parts, &position)).collect::<anyhow::Result<_>>()?;
        // The vectors are copied out only for an index that will be built.
        let ann_index = self
            .ann_index
            .as_ref()
            .filter(|(_, threshold)| graphrag_verbs::embed::builds_ann_index(outputs[0].num_rows(), *threshold));
        if let Some((field, ann_threshold)) = ann_index {
            let table = &outputs[0];
            let ids: Vec<String> = strings(table, field, "id")?.into_iter().map(str::to_string).collect();
            let vectors = table.column_by_name("vector").ok_or_else(|| anyhow!("`{field}` has no vector column"))?;
            let vectors = vectors.as_fixed_size_list();
            let mut flat: Vec<f32> = Vec::new();
            for row in 0..vectors.len() {
                flat.extend_from_slice(vectors.value(row).as_primitive::<Float32Type>().values());
            }
            let dim = vectors.value_length() as usize;
            graphrag_verbs::embed::save_ann_index(field, &ids, &flat, dim, *ann_threshold, ctx)?;
        }
        Ok(outputs)
    }
}

impl FromFragments {
    fn ordered(&self, parts: &[RecordBatch], position: &HashMap<&str, u32>) -> anyhow::Result<RecordBatch> {
        // An empty shard's embeddings have no dimension: its schema differs.
        let non_empty: Vec<&RecordBatch> = parts.iter().filter(|p| p.num_rows() > 0).collect();
        let Some(first) = non_empty.first().copied().or(parts.first()) else {
            bail!("step `{}` has no fragments", self.step)
        };
        let all = arrow_select::concat::concat_batches(&first.schema(), non_empty.iter().copied())?;
        let key = if all.schema().index_of("text_unit_id").is_ok() { "text_unit_id" } else { "id" };
        let keys = strings(&all, &self.step, key)?;
        let mut rows: Vec<(u32, u32)> = Vec::with_capacity(keys.len());
        for (row, unit) in keys.iter().enumerate() {
            let pos = position.get(unit).ok_or_else(|| {
                anyhow!("step `{}`: a fragment row names text unit {unit}, which the input does not have", self.step)
            })?;
            rows.push((*pos, row as u32));
        }
        // A unit's rows keep the order its shard wrote them in (one unit is in one shard).
        rows.sort_by_key(|&(pos, row)| (pos, row));
        let take = UInt32Array::from_iter_values(rows.into_iter().map(|(_, row)| row));
        Ok(arrow_select::take::take_record_batch(&all, &take)?)
    }
}

/// Merges the fragments of every shard of one count (`count`, or the only
/// count that has fragments) into the index, as `index` would publish it
/// (see the module docs). Fails, naming them, when shards are missing.
pub fn index_merge(project: Project, count: Option<usize>, opts: &IndexOptions) -> Result<RunReport, RunError> {
    let base = shards_location(&project.storage.output, &project.plan);
    // After `--phase graph` the merge resumes from the staged steps.
    let opts = IndexOptions { resume: opts.resume || embed::graph_staged(&base)?, ..opts.clone() };
    let report = index_with(project, &opts, |plan, output| from_fragments(plan, output, count).map(|_| ()))?;
    embed::clear(&base)?;
    Ok(report)
}

/// Runs shard `spec` of `phase` and returns what it did: the per-document
/// steps (`Units`), the staged model stage's calls (`Model`) or the staged
/// global rows' embeddings (`Embed`); see the crate docs. A shard that
/// finished before with the same input and settings is only checked. Errors
/// name the shard.
pub fn run_shard(
    project: Project,
    spec: ShardSpec,
    phase: ShardPhase,
    run: &RunSettings,
) -> anyhow::Result<ShardReport> {
    match phase {
        ShardPhase::Units => index_shard(project, spec, run),
        ShardPhase::Embed => embed_shard(project, spec, run),
        ShardPhase::Model => model_shard(project, spec, run, None),
    }
}

/// Runs shard `spec` of `phase` of an update (`update --shard K/N [--phase
/// embed]`): [`run_shard`] with the pipeline the index was built with. A
/// units shard's documents are all mapped again; the unchanged ones' model
/// answers come from the cache.
pub fn update_shard(
    root: &Path,
    spec: ShardSpec,
    phase: ShardPhase,
    opts: &UpdateOptions,
) -> anyhow::Result<ShardReport> {
    let (project, _) = open_for_update(root, opts, true)?;
    if phase == ShardPhase::Model {
        // Summaries and reports of an update depend on the index it updates.
        let index = project.storage.output.working_copy();
        let previous = project.has_index().then(|| Box::new(PublishedTables(index)) as Box<dyn PreviousIndex>);
        return model_shard(project, spec, &opts.run, previous);
    }
    run_shard(project, spec, phase, &opts.run)
}

/// The update of the published index from the shards' fragments
/// (`update --merge`): [`crate::update`] with the per-unit steps' outputs
/// taken from the fragments.
pub fn update_merge(root: &Path, count: Option<usize>, opts: &UpdateOptions) -> Result<RunReport, RunError> {
    let base = std::cell::OnceCell::new();
    let report = update_with(root, opts, &|plan, output| {
        let _ = base.set(from_fragments(plan, output, count)?);
        Ok(())
    })?;
    if let Some(base) = base.get() {
        embed::clear(base)?;
    }
    Ok(report)
}

/// Gives the plan's per-unit steps their outputs from the fragments of
/// every shard of `count` (or of the only count there is), brought into the
/// local folder first; returns where the shards are.
fn from_fragments(plan: &mut Plan, output: &Location, count: Option<usize>) -> anyhow::Result<Location> {
    let base = shards_location(output, plan);
    let count = match (count, &shard_counts(&base)?[..]) {
        (Some(n), _) | (None, &[n]) => n,
        (None, []) => bail!(
            "no shards to merge in {} for these settings and pipeline: run `--shard K/N` for K = 0 to N-1 first",
            base.describe()
        ),
        (None, several) => {
            bail!("shards of several counts ({several:?}) in {}: name the one to merge (--shards N)", base.describe())
        }
    };
    let finished = finished_shards(&base, count)?;
    let missing: Vec<String> =
        finished.iter().enumerate().filter(|(_, r)| r.is_none()).map(|(k, _)| format!("{k}/{count}")).collect();
    ensure!(
        missing.is_empty(),
        "shards {} have not finished: run them (`--shard K/N`), then merge",
        missing.join(", ")
    );
    let per_unit: Vec<&Step> = plan.steps.iter().filter(|s| role(s) == Role::PerUnit).collect();
    let tables: Vec<&str> = per_unit.iter().flat_map(|s| s.outputs.iter().map(String::as_str)).chain([UNITS]).collect();
    let shards: Vec<Location> =
        finished.into_iter().flatten().map(|f| f.fetch(&tables).map(|()| f.location)).collect::<anyhow::Result<_>>()?;
    let mut shard_units = HashSet::new();
    for shard in &shards {
        let table = store::read_table(&shard.working_copy().table_path(UNITS))?;
        shard_units.extend(strings(&table, UNITS, "id")?.into_iter().map(str::to_string));
    }
    let shard_units = Arc::new(shard_units);
    for step in plan.steps.iter_mut().filter(|s| role(s) == Role::PerUnit) {
        let fragments = step
            .outputs
            .iter()
            .map(|out| shards.iter().map(|shard| store::read_table(&shard.working_copy().table_path(out))).collect())
            .collect::<anyhow::Result<_>>()?;
        let ann_index = (step.info.name == "embed").then(|| {
            let field = step.args["field"].as_str().unwrap_or_default().to_string();
            (field, step.args["ann_threshold"].as_u64().unwrap_or(0) as usize)
        });
        step.verb =
            Box::new(FromFragments { step: step.id.clone(), fragments, shard_units: shard_units.clone(), ann_index });
    }
    tracing::info!(shards = count, "merging the fragments of {count} shards from {}", base.describe());
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_specs_parse_and_refuse() {
        assert_eq!("1/4".parse::<ShardSpec>().unwrap(), ShardSpec { index: 1, count: 4 });
        assert_eq!("0/1".parse::<ShardSpec>().unwrap(), ShardSpec { index: 0, count: 1 });
        for bad in ["4/4", "1/0", "x/2", "3", "-1/2", ""] {
            assert!(bad.parse::<ShardSpec>().is_err(), "{bad}");
        }
        // Issue #47: a count past any use was accepted (and a merge would
        // look for every one of its shards).
        let err = "0/4294967297".parse::<ShardSpec>().unwrap_err();
        assert_eq!(err, "shard 0/4294967297: the shard count N must be 1 to 65536");
        assert_eq!("65535/65536".parse::<ShardSpec>().unwrap(), ShardSpec { index: 65_535, count: MAX_SHARDS });
        assert!("0/65537".parse::<ShardSpec>().is_err());
        assert_eq!("4/4".parse::<ShardSpec>().unwrap_err(), "shard 4/4: K must be 0 to N-1 (3)");
    }

    proptest::proptest! {
        #[test]
        fn shard_specs_round_trip(k in 0usize..10_000, extra in 1usize..10_000) {
            let spec = ShardSpec { index: k, count: k + extra };
            proptest::prop_assert_eq!(spec.to_string().parse::<ShardSpec>(), Ok(spec));
        }

        #[test]
        fn any_text_parses_to_a_valid_shard_or_an_error(text in "\\PC{0,12}") {
            if let Ok(spec) = text.parse::<ShardSpec>() {
                proptest::prop_assert!(spec.index < spec.count);
            }
        }
    }

    #[test]
    fn every_document_has_one_shard_that_depends_on_its_id_alone() {
        let ids: Vec<String> = (0..400).map(|i| format!("doc{i}")).collect();
        for n in [1, 2, 3, 4, 7] {
            let mut sizes = vec![0; n];
            for id in &ids {
                let k = shard_of(id, n);
                assert_eq!(k, shard_of(id, n));
                sizes[k] += 1;
            }
            // A hash spreads them: no shard is empty or holds most of them.
            assert!(sizes.iter().all(|&s| s > 0 && (n == 1 || s < 400 * 2 / n)), "{n}: {sizes:?}");
        }
    }
}
