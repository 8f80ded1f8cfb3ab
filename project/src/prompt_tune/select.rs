//! The chunks prompt tuning reads: the project's input loaded and chunked
//! by the pipeline's own steps (its `chunk` step and the steps before it,
//! with `--chunk-size` / `--overlap` in place of `chunking.size` /
//! `chunking.overlap`), then selected (`operations::chunk_selection`).

use std::sync::Arc;

use anyhow::Context;
use arrow_array::RecordBatch;
use graphrag_engine::context::{StepCounters, VerbContext};
use graphrag_engine::llm::UsageCounters;
use graphrag_operations::chunk_selection::{self, SelectionMethod, SEED};

use super::PromptTuneOptions;
use crate::Project;

/// Every chunk of the project's input, in the pipeline's order.
pub(super) fn chunk_corpus(project: &Project) -> anyhow::Result<Vec<String>> {
    let steps = &project.plan.steps;
    let Some(chunk) = steps.iter().position(|s| s.info.name == "chunk") else {
        anyhow::bail!(
            "pipeline {} has no `chunk` step: prompt tuning reads the chunks it makes",
            project.plan.file.display()
        )
    };
    // The chunk step and every step it depends on, in plan order.
    let mut needed = vec![false; steps.len()];
    needed[chunk] = true;
    for i in (0..=chunk).rev() {
        if needed[i] {
            for &d in &steps[i].deps {
                needed[d] = true;
            }
        }
    }
    let files = project.storage.input.files();
    let mut tables: std::collections::HashMap<&str, Arc<RecordBatch>> = std::collections::HashMap::new();
    for (i, step) in steps.iter().enumerate().filter(|(i, _)| needed[*i]) {
        let inputs: Vec<Arc<RecordBatch>> = step
            .inputs
            .iter()
            .map(|t| tables.get(t.as_str()).cloned().with_context(|| format!("step `{}`: no table `{t}`", step.id)))
            .collect::<anyhow::Result<_>>()?;
        let counters = StepCounters::default();
        let ctx = VerbContext::new(&step.id, &*files, &counters);
        let outputs = step.verb.run(&inputs, &ctx).with_context(|| format!("step `{}`", step.id))?;
        for (name, table) in step.outputs.iter().zip(outputs) {
            tables.insert(name, Arc::new(table));
        }
        if i == chunk {
            let units = &tables[step.outputs[0].as_str()];
            let texts = graphrag_engine::table::strings(units, &step.outputs[0], "text")?;
            return Ok(texts.into_iter().map(str::to_string).collect());
        }
    }
    unreachable!("the chunk step is needed")
}

/// What selection picked.
pub(super) struct Selected {
    /// The chunks, in the order the prompts use them (the first ones become
    /// the extraction prompt's examples).
    pub chunks: Vec<String>,
    /// A note for the user (limit clamped, auto selection estimated).
    pub notes: Vec<String>,
}

/// The limit of `random` / `top`, within the corpus.
fn limit_within(limit: usize, n: usize, notes: &mut Vec<String>) -> usize {
    if limit > n {
        notes.push(format!("--limit {limit} is more than the corpus's {n} chunks: all {n} are used"));
    }
    limit.min(n)
}

/// The chunks `opts` selects. `auto` embeds a random subset of
/// `n_subset_max` chunks with the project's embedding model
/// (`embed_text.embedding_model_id`) and picks, per k-means cluster, the
/// chunk nearest its centre. `embed: false` (a dry run with a model that is
/// not in-process) sends nothing: it takes the `k` longest chunks of the
/// subset, the most a real selection could cost.
pub(super) fn select(
    project: &Project,
    chunks: Vec<String>,
    opts: &PromptTuneOptions,
    usage: &UsageCounters,
    embed: bool,
) -> anyhow::Result<Selected> {
    let n = chunks.len();
    if n == 0 {
        anyhow::bail!(
            "no text in the input folder {}: prompt tuning needs documents to read",
            project.storage.input.describe()
        );
    }
    let mut notes = Vec::new();
    let picked: Vec<usize> = match opts.selection_method {
        SelectionMethod::Top | SelectionMethod::Random => {
            let limit = limit_within(opts.limit, n, &mut notes);
            chunk_selection::select(n, opts.selection_method, limit)
        }
        SelectionMethod::All => chunk_selection::select(n, SelectionMethod::All, n),
        SelectionMethod::Auto => {
            let subset = chunk_selection::random_sample(n, opts.n_subset_max, SEED);
            if embed {
                let vectors = embed_chunks(project, subset.iter().map(|&i| chunks[i].as_str()), usage)?;
                chunk_selection::nearest_to_centroids(&vectors, opts.k).into_iter().map(|j| subset[j]).collect()
            } else {
                let mut longest = subset.clone();
                longest.sort_by_key(|&i| std::cmp::Reverse(chunks[i].len()));
                longest.truncate(opts.k);
                notes.push(format!(
                    "auto selection embeds {} chunks with embedding model `{}`, which a dry run does not call: the estimate assumes the {} longest of them",
                    subset.len(),
                    project.settings().embed_text.embedding_model_id,
                    longest.len()
                ));
                longest
            }
        }
    };
    let mut chunks: Vec<Option<String>> = chunks.into_iter().map(Some).collect();
    Ok(Selected { chunks: picked.into_iter().filter_map(|i| chunks[i].take()).collect(), notes })
}

/// Whether `auto` selection's embeddings are computed in-process (nothing
/// sent anywhere: a dry run computes them too).
pub(super) fn embeds_locally(project: &Project) -> bool {
    let id = &project.settings().embed_text.embedding_model_id;
    project
        .settings()
        .embedding_models
        .get(id)
        .is_some_and(|m| m.model_provider == graphrag_engine::settings::Provider::Local)
}

/// One vector per chunk: the mean of its pieces' vectors (a chunk longer
/// than the model's window is embedded in pieces, as the embed step does).
fn embed_chunks<'a>(
    project: &Project,
    chunks: impl Iterator<Item = &'a str>,
    usage: &UsageCounters,
) -> anyhow::Result<Vec<Vec<f32>>> {
    let model = project.llm.embedding_model(&project.settings().embed_text.embedding_model_id)?;
    let mut pieces = Vec::new();
    let mut owner = Vec::new();
    for (i, chunk) in chunks.enumerate() {
        for piece in model.split_to_fit(chunk)? {
            pieces.push(piece);
            owner.push(i);
        }
    }
    let vectors = project.llm.block_on(model.embed(&pieces, usage))?;
    let count = owner.last().map_or(0, |&i| i + 1);
    let dim = vectors.first().map_or(0, Vec::len);
    let mut sums = vec![vec![0f32; dim]; count];
    let mut sizes = vec![0f32; count];
    for (v, &i) in vectors.iter().zip(&owner) {
        sizes[i] += 1.0;
        for (s, x) in sums[i].iter_mut().zip(v) {
            *s += x;
        }
    }
    for (sum, size) in sums.iter_mut().zip(sizes) {
        sum.iter_mut().for_each(|s| *s /= size);
    }
    Ok(sums)
}
