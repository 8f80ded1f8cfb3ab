//! Text unit rankings shared by the methods: dense (the question's vector
//! against text_unit_text vectors), lexical (BM25 over lexical_index) and
//! their reciprocal rank fusion, and the Sources table packed from a
//! ranking. Units are rows of [`TextUnits`].

use std::collections::HashSet;

use graphrag_operations::rank_fusion::reciprocal_rank_fusion;

use crate::context::{pack_table, Counter, PackedTable};
use crate::data::{Field, TextUnits};
use crate::Run;

/// Text units with scores, best first.
pub type Ranking = Vec<(usize, f64)>;

/// Which rankings of text units a basic search fuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retriever {
    Dense,
    Lexical,
    /// Dense and lexical, by reciprocal rank fusion.
    Hybrid,
}

impl Retriever {
    pub fn name(self) -> &'static str {
        match self {
            Retriever::Dense => "dense",
            Retriever::Lexical => "bm25",
            Retriever::Hybrid => "hybrid (dense + bm25, reciprocal rank fusion)",
        }
    }
}

/// The `n` text units closest to `query` (the question's embedding), with
/// their cosine similarity.
pub fn dense(run: &Run, units: &TextUnits, query: &[f32], n: usize) -> anyhow::Result<Ranking> {
    let vectors = run.vectors(Field::TextUnitText)?;
    Ok(run
        .search(&vectors, query, n, None)?
        .into_iter()
        .filter_map(|(id, score)| units.by_id.get(&id).map(|&u| (u, f64::from(score))))
        .collect())
}

/// Every text unit sharing a term with `question`, by BM25 score.
pub fn lexical(run: &Run, question: &str) -> anyhow::Result<Ranking> {
    Ok(run.index().lexical()?.search(question))
}

/// The first `depth` units of each ranking fused by reciprocal rank fusion
/// (constant `k`), with their fused scores.
pub fn fuse(rankings: &[&Ranking], depth: usize, k: f64) -> Ranking {
    let lists: Vec<Vec<usize>> = rankings.iter().map(|r| r.iter().take(depth).map(|h| h.0).collect()).collect();
    let refs: Vec<&[usize]> = lists.iter().map(Vec::as_slice).collect();
    reciprocal_rank_fusion(&refs, k)
}

/// The text units of `retriever` for `question`, best first: the first
/// `depth` of each ranking (all of them when `depth` is `None`).
pub fn ranked_units(
    run: &Run,
    retriever: Retriever,
    question: &str,
    query: Option<&[f32]>,
    depth: Option<usize>,
    fusion_k: f64,
) -> anyhow::Result<Ranking> {
    let units = run.index().text_units()?;
    let n = depth.unwrap_or(units.hrid.len());
    let embed = || -> anyhow::Result<Vec<f32>> {
        match query {
            Some(q) => Ok(q.to_vec()),
            None => run.embed_one(question),
        }
    };
    Ok(match retriever {
        Retriever::Dense => dense(run, &units, &embed()?, n)?,
        Retriever::Lexical => {
            let mut r = lexical(run, question)?;
            r.truncate(n);
            r
        }
        Retriever::Hybrid => {
            let d = dense(run, &units, &embed()?, n)?;
            let l = lexical(run, question)?;
            let mut fused = fuse(&[&d, &l], n, fusion_k);
            fused.truncate(n);
            fused
        }
    })
}

/// A Sources table (`id`, `text`) of the units in `rows` order, duplicates
/// skipped, within `max_tokens` (the first unit that does not fit ends it).
pub fn sources_table(
    units: &TextUnits,
    rows: impl IntoIterator<Item = usize>,
    max_tokens: usize,
    count: Counter,
) -> PackedTable {
    let mut seen = HashSet::new();
    let rows = rows
        .into_iter()
        .filter(move |u| seen.insert(*u))
        .map(|u| vec![units.hrid[u].to_string(), units.text[u].clone()]);
    pack_table("Sources", &["id", "text"], rows, max_tokens, count)
}
