//! Text unit rankings shared by the methods: dense (the question's vector
//! against text_unit_text vectors), lexical (BM25 over lexical_index) and
//! their reciprocal rank fusion, and the Sources table packed from a
//! ranking. Units are rows of [`TextUnits`].

use std::collections::HashSet;

use graphrag_engine::llm::{LlmError, RerankModel};
use graphrag_operations::rank_fusion::reciprocal_rank_fusion;

use crate::context::{pack_table, Counter, PackedTable};
use crate::data::{Field, TextUnits};
use crate::records::RerankRecord;
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

/// The first `window` units of each ranking fused by reciprocal rank fusion
/// (constant `k`), with their fused scores.
pub fn fuse(rankings: &[&Ranking], window: usize, k: f64) -> Ranking {
    let lists: Vec<Vec<usize>> = rankings.iter().map(|r| r.iter().take(window).map(|h| h.0).collect()).collect();
    let refs: Vec<&[usize]> = lists.iter().map(Vec::as_slice).collect();
    reciprocal_rank_fusion(&refs, k)
}

/// The fusion window for a context budget: the most units any one of the
/// rankings fits into `budget` tokens from its first. Each ranking
/// contributes what it would return for the budget on its own, as
/// Elasticsearch's `rank_window_size` defaults to the result size (and a
/// count `k` fuses the top k of each); fusing whole rankings instead lets
/// middling units that both rankings list push out either ranking's best
/// (docs/benchmarks-history.md measures both). The window is at least
/// [`MIN_FUSION_WINDOW`] units.
pub fn budget_window(units: &TextUnits, rankings: &[&Ranking], budget: usize) -> usize {
    let fitting = rankings.iter().map(|r| units.fitting(r.iter().map(|h| h.0), budget)).max().unwrap_or(0);
    fitting.max(MIN_FUSION_WINDOW)
}

/// The fewest units of each ranking a fusion looks at. Where a few long
/// units fill the budget (LiHua-World's chat logs at 2,000 tokens: four to
/// six), a unit one ranking places just below that cut counts for nothing,
/// so the fusion could not lift a unit both rankings place well but not
/// first (docs/benchmarks.md: R@2 and R@5 rose on LiHua-World; the other six
/// sets' windows were already this wide).
pub const MIN_FUSION_WINDOW: usize = 10;

/// Where a ranking is cut: after k units, or once a token budget is filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    Count(usize),
    Budget(usize),
}

/// The text units of `retriever` for `question` (embedded as `query`, or
/// now), best first; with a [`Cut::Count`] only that many.
pub fn ranked_units(
    run: &Run,
    retriever: Retriever,
    question: &str,
    query: Option<&[f32]>,
    cut: Cut,
    fusion_k: f64,
) -> anyhow::Result<Ranking> {
    let units = run.index().text_units()?;
    let n = match cut {
        Cut::Count(k) => k,
        Cut::Budget(_) => units.hrid.len(),
    };
    let embed = || -> anyhow::Result<Vec<f32>> {
        match query {
            Some(q) => Ok(q.to_vec()),
            None => run.embed_one(question),
        }
    };
    let mut ranked = match retriever {
        Retriever::Dense => dense(run, &units, &embed()?, n)?,
        Retriever::Lexical => lexical(run, question)?,
        Retriever::Hybrid => {
            let d = dense(run, &units, &embed()?, n)?;
            let l = lexical(run, question)?;
            let window = match cut {
                Cut::Count(k) => k,
                Cut::Budget(budget) => budget_window(&units, &[&d, &l], budget),
            };
            fuse(&[&d, &l], window, fusion_k)
        }
    };
    ranked.truncate(n);
    Ok(ranked)
}

/// [`sources_table`] of `rows` (text units, best first) after the query's
/// rerank, when it reranks ([`Run::reranker`]); else the table of `rows` as
/// they are, packed lazily as ever.
pub fn reranked_sources(
    run: &Run,
    units: &TextUnits,
    rows: impl IntoIterator<Item = usize>,
    max_tokens: usize,
    count: Counter,
) -> anyhow::Result<PackedTable> {
    let rows = match run.reranker()? {
        Some(model) => reranked(run, &model, units, rows)?,
        None => return Ok(sources_table(units, rows, max_tokens, count)),
    };
    Ok(sources_table(units, rows, max_tokens, count))
}

/// `rows` (duplicates dropped) with the first `rerank.candidates` reordered
/// by `model`, most relevant first; the rest keep their order. A rerank that
/// fails (the endpoint down, an unusable answer) leaves the order as
/// retrieved, with a notice; a cancelled query stops here.
fn reranked(
    run: &Run,
    model: &RerankModel,
    units: &TextUnits,
    rows: impl IntoIterator<Item = usize>,
) -> anyhow::Result<Vec<usize>> {
    let mut seen = HashSet::new();
    let mut rows: Vec<usize> = rows.into_iter().filter(|u| seen.insert(*u)).collect();
    let n = (run.s().rerank.candidates as usize).min(rows.len());
    let texts: Vec<String> = rows[..n].iter().map(|&u| units.text[u].clone()).collect();
    match run.block_on(model.rerank(&run.req.question, &texts, &run.usage)) {
        Ok(scores) => {
            let mut head: Vec<(usize, f64)> = rows[..n].iter().copied().zip(scores).collect();
            // Stable: equal scores keep the retrieval order.
            head.sort_by(|a, b| b.1.total_cmp(&a.1));
            rows.splice(..n, head.into_iter().map(|(u, _)| u));
            run.note_rerank(RerankRecord { model: model.id().to_string(), reranked: n, error: None });
        }
        Err(e @ LlmError::Cancelled) => return Err(e.into()),
        Err(e) => {
            run.notice(format!(
                "the rerank model `{}` failed, so the chunks keep their retrieval order: {e}",
                model.id()
            ));
            run.note_rerank(RerankRecord { model: model.id().to_string(), reranked: 0, error: Some(e.to_string()) });
        }
    }
    Ok(rows)
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
