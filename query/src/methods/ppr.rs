//! graphrag-rs PPR search: HippoRAG 2's graph propagation without its LLM
//! steps. Text units are ranked by a walk over the graph of entities and
//! text units ([`crate::data::passage_graph`]), that ranking is fused with the
//! hybrid (dense + BM25) ranking by reciprocal rank fusion (each ranking's
//! units that would fill the budget on their own), and the units are packed
//! into `ppr_search.max_context_tokens` as a Sources table answered with
//! basic search's prompt.
//!
//! The walk starts from:
//! - **passages**: every text unit, weighted by the mean of its min-max
//!   normalised dense similarity (HippoRAG 2) and BM25 score, times
//!   `passage_node_weight`;
//! - **seed entities**: those the question names (weight 1), with
//!   `link_threshold` set those whose names are close to a noun phrase of
//!   the question by the embedding model (weight: the cosine similarity —
//!   [`linked_entities`]; HippoRAG links the query's named entities to graph
//!   nodes by their embeddings; off by default: it lost questions on 2Wiki,
//!   docs/benchmarks-history.md), and those of the `linking_top_k` best
//!   hybrid-ranked units (weight: the unit's passage
//!   score, as above, over the best of theirs — [`seed_units`]), each
//!   times its [`specificity`] (inverse document frequency, where HippoRAG
//!   divides by the number of text units; `specificity: words` counts the
//!   units holding every word of the name, `passage_graph::mention_units`), the
//!   `linking_top_k` heaviest kept.
//!   HippoRAG 2 takes its seeds from the entities of LLM-extracted facts,
//!   weighted by the facts' similarity to the question; without a chat
//!   model the names in the question and the entities of the best passages
//!   stand in. (Weighting those by their own vector's similarity to the
//!   question measured worse on every dev set: docs/benchmarks-history.md.)
//!
//! With `title_seed_weight` the units whose document title the question
//! names are seeds too ([`units_titled_in`]: titles as first-class nodes,
//! for the names the fast graph pruned or never extracted). With
//! `walk_head` the walk's first units come before the fused ranking
//! ([`walk_first`]); `title_edge_weight` weighs the passage graph's title
//! edges ([`crate::data::passage_graph`]). With `bridge_units` a second walk
//! starts from the entities of the first walk's best units too
//! ([`walk_units`]) and its ranking is fused as a third; with
//! `duplicate_similarity` a near copy of a unit ranked before it leaves the
//! context's first units ([`distinct_head`]).
//!
//! `ppr_search.walk` picks the walk: `ppr` (Personalized PageRank,
//! HippoRAG 2), `nhop` (RAGFlow: the seeds and their neighbours up to two
//! hops, `sim / (2 + hop)` times their entity PageRank, summed into their
//! units) or `paths` (MiniRAG-style: paths of one and two relationships from
//! each seed, scored by the seed weight and the question-similarity of the
//! entities on them, credited to the units where consecutive entities of
//! the path meet). docs/benchmarks-history.md compares them.

use std::collections::HashMap;

use graphrag_engine::settings::{PprSpecificity, PprWalk};
use graphrag_operations::nlp_graph::{PhraseExtractor, RegexEnglishExtractor};
use graphrag_operations::pagerank::{MAX_ITERATIONS, TOLERANCE};

use crate::context::{entities_named_in, MemoCounter};
use crate::data::passage_graph::PassageGraph;
use crate::data::{Field, Graph};
use crate::records::{self, ContextRecords, MethodRecords, SeedRecord};
use crate::retrieval::{self, budget_window, Ranking};
use crate::{Outcome, Run};

/// Neighbours followed per entity by the `nhop` and `paths` walks (the
/// heaviest edges first): RAGFlow and MiniRAG keep a few per node too.
const FANOUT: usize = 10;

/// Entities looked up per noun phrase of the question by
/// [`linked_entities`]: a phrase names one thing, so its few nearest names
/// are its candidates (its spelling variants, its longer or shorter forms).
const LINKS_PER_PHRASE: usize = 3;

/// Entities seeding the second walk of `ppr_search.bridge_units`: twice
/// `linking_top_k`'s default, since the walk's first units bring the
/// entities of two or three passages where the hybrid's bring one's.
const BRIDGE_SEEDS: usize = 10;

/// The context's first units, where `ppr_search.duplicate_similarity`
/// moves a near copy of an earlier unit out (R@5's five), and the units
/// looked at to fill them.
const DISTINCT_HEAD: usize = 5;
const DISTINCT_WINDOW: usize = 2 * DISTINCT_HEAD;

/// Every text unit that the walk or the hybrid ranking reaches, best first,
/// and the seed entities with their weights.
pub struct GraphRanking {
    pub units: Vec<usize>,
    pub seeds: Vec<(usize, f64)>,
}

pub fn run(run: &Run) -> anyhow::Result<Outcome> {
    let ps = &run.s().ppr_search;
    let question = &run.req.question;
    let budget = run.req.max_context_tokens.unwrap_or(ps.max_context_tokens);
    let memo = MemoCounter::default();
    let count = |t: &str| memo.count(t);
    let query = run.embed_one(question)?;
    let ranking = rank_units(run, question, &query, budget)?;
    let (context, sources) =
        super::sources_context(run, ranking.units.iter().copied(), budget, &run.req.history, &count)?;
    let g = run.index().graph()?;
    let seeds = ranking
        .seeds
        .iter()
        .map(|&(e, w)| SeedRecord { id: g.entity_hrid[e], entity: g.title[e].clone(), weight: w })
        .collect();
    let records = ContextRecords {
        sources: Some(records::sources(&sources)),
        method: MethodRecords::Ppr { seeds, walk: ps.walk },
        ..ContextRecords::default()
    };
    super::answer(run, "ppr_search.prompt", &ps.prompt, context, records)
}

/// Ranks the text units for `question` (embedded as `query`) by
/// `ppr_search.walk` fused with the hybrid ranking, for a context of
/// `budget` tokens (the fusions' window, [`retrieval::budget_window`]).
pub fn rank_units(run: &Run, question: &str, query: &[f32], budget: usize) -> anyhow::Result<GraphRanking> {
    let ps = &run.s().ppr_search;
    let tuning = ps.tuning(run.s().input.title_column.is_some());
    let index = run.index();
    let units = index.text_units()?;
    let g = index.graph()?;
    let pg = index.passage_graph()?;
    let n = units.hrid.len();
    let dense = retrieval::dense(run, &units, query, n)?;
    let lexical = retrieval::lexical(run, question)?;
    let hybrid = retrieval::fuse(&[&dense, &lexical], budget_window(&units, &[&dense, &lexical], budget), ps.fusion_k);
    let passage = passage_scores(n, &dense, &lexical);
    let linked = match ps.link_threshold {
        Some(threshold) => linked_entities(run, &g, question, threshold)?,
        None => Vec::new(),
    };
    let units_seeding = seed_units(&hybrid, &passage, ps.linking_top_k);
    let words = match tuning.specificity {
        PprSpecificity::Entities => None,
        PprSpecificity::Words => Some(index.entity_mentions()?),
    };
    let mentions = |e: usize| words.as_ref().map_or(pg.entity_units[e].len(), |w| w[e]);
    let named = entities_named_in(question, &g.entity_by_key, g.max_key_words, |e| g.entity_units[e].len());
    let mut seeds = seed_entities(&pg, &named, &linked, &units_seeding, ps.linking_top_k, &mentions);
    if let Some(threshold) = ps.synonym_threshold {
        seeds = with_synonyms(run, &g, seeds, threshold)?;
    }
    let named_units = if tuning.title_seed_weight > 0.0 { units_titled_in(&pg, question) } else { Vec::new() };
    let unit_seeds: Vec<(usize, f64)> = named_units.iter().map(|&u| (u, tuning.title_seed_weight)).collect();
    // The question's relevance to every entity (a vector search) is the same for both walks: once.
    let relevance = match ps.walk {
        PprWalk::Paths => Some(entity_relevance(run, &g, query)?),
        PprWalk::Ppr | PprWalk::Nhop => None,
    };
    let walk_from = |seeds: &[(usize, f64)]| -> Ranking {
        ranked_units(match ps.walk {
            PprWalk::Ppr => {
                personalized_pagerank(&pg, seeds, &unit_seeds, &passage, ps.damping, ps.passage_node_weight)
            }
            PprWalk::Nhop => nhop(&pg, seeds),
            PprWalk::Paths => paths(&pg, seeds, relevance.as_ref().expect("computed above for paths")),
        })
    };
    let walked = walk_from(&seeds);
    let bridged = match tuning.bridge_units {
        0 => None,
        count => {
            let from = walk_units(&walked, count);
            let more = seed_entities(&pg, &[], &[], &from, BRIDGE_SEEDS, &mentions);
            Some(walk_from(&merged_seeds(&seeds, &more)))
        }
    };
    let rankings: Vec<&Ranking> = [Some(&walked), bridged.as_ref(), Some(&hybrid)].into_iter().flatten().collect();
    let fused = retrieval::fuse(&rankings, budget_window(&units, &rankings, budget), ps.fusion_k);
    let mut ranked = walk_first(&walked, &fused, tuning.walk_head);
    if let Some(threshold) = ps.duplicate_similarity {
        let vectors = run.vectors(Field::TextUnitText)?;
        let vector = |u: usize| Some(vectors.store.as_ref()?.collection().vector(vectors.row_of(&units.id[u])?));
        ranked = distinct_head(ranked, &vector, threshold);
    }
    Ok(GraphRanking { units: ranked, seeds })
}

/// The units with a positive score, best first (ties by row).
fn ranked_units(scores: Vec<f64>) -> Ranking {
    let mut ranking: Ranking = scores.into_iter().enumerate().filter(|(_, s)| *s > 0.0).collect();
    ranking.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranking
}

/// The walk's first `count` units, each weighted by its walk score over the
/// first's: the seeds of the second walk (`ppr_search.bridge_units`). The
/// first walk starts from the question's names and its best passages, and
/// reaches a chain's second passage through the entity they share; its
/// third and fourth passages hang on entities of the second, which the
/// first walk reaches too weakly (docs/benchmarks-history.md, "Eleventh
/// round").
pub fn walk_units(walked: &Ranking, count: usize) -> Vec<(usize, f64)> {
    let best = walked.first().map_or(0.0, |h| h.1);
    walked.iter().take(count).map(|&(u, s)| (u, if best > 0.0 { s / best } else { 1.0 })).collect()
}

/// `seeds` and `more`, each entity with the larger of its weights, heaviest first.
pub fn merged_seeds(seeds: &[(usize, f64)], more: &[(usize, f64)]) -> Vec<(usize, f64)> {
    let mut weight: HashMap<usize, f64> = HashMap::new();
    for &(e, w) in seeds.iter().chain(more) {
        let slot = weight.entry(e).or_insert(w);
        *slot = slot.max(w);
    }
    let mut out: Vec<(usize, f64)> = weight.into_iter().collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// `ranked` with its first [`DISTINCT_HEAD`] places given to units that are
/// not near copies of one placed before them: a unit among the first
/// [`DISTINCT_WINDOW`] whose vector has a cosine similarity of at least
/// `threshold` with that of a unit already placed (the vectors are
/// normalised) moves after the head, in its order. MuSiQue's corpus holds
/// several versions of one Wikipedia paragraph (two of Buckingham House,
/// two of Neil Patrick Harris's biography): the second took the place of
/// the chain's next passage. A unit without a vector is never moved.
pub fn distinct_head<'a>(
    ranked: Vec<usize>,
    vector: &dyn Fn(usize) -> Option<&'a [f32]>,
    threshold: f64,
) -> Vec<usize> {
    let mut head: Vec<usize> = Vec::with_capacity(DISTINCT_HEAD);
    let mut moved = Vec::new();
    let window = ranked.len().min(DISTINCT_WINDOW);
    for &u in &ranked[..window] {
        let copy = head.len() < DISTINCT_HEAD
            && vector(u).is_some_and(|v| {
                head.iter().filter_map(|&h| vector(h)).any(|w| f64::from(graphrag_vectors::dot(v, w)) >= threshold)
            });
        if head.len() < DISTINCT_HEAD && !copy {
            head.push(u);
        } else {
            moved.push(u);
        }
    }
    head.into_iter().chain(moved).chain(ranked[window..].iter().copied()).collect()
}

/// The first `head` units of the walk, then the others of `fused` in its
/// order. The fusion ranks the units both rankings list above the walk's
/// second hop, which the hybrid ranking rarely lists: HippoRAG ranks by the
/// walk alone, which here loses the hybrid's best units further down
/// (docs/benchmarks-history.md, "Tenth round").
pub fn walk_first(walked: &Ranking, fused: &Ranking, head: usize) -> Vec<usize> {
    let first: Vec<usize> = walked.iter().take(head).map(|h| h.0).collect();
    first.iter().copied().chain(fused.iter().map(|f| f.0).filter(|u| !first.contains(u))).collect()
}

/// Per text unit: the mean of its dense similarity scaled to 0..1 over all
/// units (HippoRAG 2's min-max) and its BM25 score over the best one's
/// (units without a shared term score 0).
pub fn passage_scores(units: usize, dense: &Ranking, lexical: &Ranking) -> Vec<f64> {
    let mut out = vec![0.0; units];
    for ranking in [dense, lexical] {
        let (mut lo, hi) =
            ranking.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), h| (lo.min(h.1), hi.max(h.1)));
        if ranking.len() < units {
            lo = lo.min(0.0);
        }
        for &(u, s) in ranking {
            out[u] += if hi > lo { (s - lo) / (hi - lo) } else { 1.0 } / 2.0;
        }
    }
    out
}

/// The units whose entities seed the walk: the `top_k` first of the hybrid
/// ranking, each weighted by its passage score over the best of theirs.
/// Scores, not the fused ranking's: reciprocal rank fusion gives the first
/// five units 1/61 … 1/65, nearly one weight for all, so the rarest
/// entities of the fifth unit outweighed the first unit's; HippoRAG 2
/// weights its seeds by similarity scores, which say how far ahead the
/// first is (docs/benchmarks-history.md, "Fourth round").
pub fn seed_units(hybrid: &Ranking, passage: &[f64], top_k: usize) -> Vec<(usize, f64)> {
    let top: Vec<usize> = hybrid.iter().take(top_k).map(|h| h.0).collect();
    let best = top.iter().map(|&u| passage[u]).fold(0.0, f64::max);
    top.into_iter().map(|u| (u, if best > 0.0 { passage[u] / best } else { 1.0 })).collect()
}

/// The seed entities (see the module docs), heaviest first: those the
/// question names (`named`), those `linked` to its phrases
/// ([`linked_entities`]), and those of the weighted `units`
/// ([`seed_units`]); `mentions(e)`: the text units entity `e` counts as
/// mentioned in, for its [`specificity`].
pub fn seed_entities(
    pg: &PassageGraph,
    named: &[usize],
    linked: &[(usize, f64)],
    units: &[(usize, f64)],
    top_k: usize,
    mentions: &dyn Fn(usize) -> usize,
) -> Vec<(usize, f64)> {
    let mut weight: HashMap<usize, f64> = HashMap::new();
    let mut offer = |e: usize, w: f64| {
        let slot = weight.entry(e).or_insert(0.0);
        *slot = slot.max(w * specificity(mentions(e), pg.units()));
    };
    for &e in named {
        offer(e, 1.0);
    }
    for &(e, similarity) in linked {
        offer(e, similarity);
    }
    for &(u, w) in units {
        for (e, _) in pg.graph.neighbours(pg.unit_node(u)) {
            offer(e, w);
        }
    }
    let mut seeds: Vec<(usize, f64)> = weight.into_iter().collect();
    seeds.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    seeds.truncate(top_k);
    seeds
}

/// Entities whose names the embedding model puts within `threshold` cosine
/// similarity of a noun phrase of `question`, with that similarity (the
/// best over the phrases). String matching ([`entities_named_in`]) misses a
/// name the question spells otherwise ("Shelly's Manne-Hole" for SHELLY
/// MANNE); HippoRAG links the query's entities to nodes by embedding them. The phrases are the fast
/// graph's own (the rule-based extractor, [`question_phrases`]), embedded
/// as its entity names are (`TITLE:description`, empty description). No
/// entity vectors (an index without entity_description embeddings): none.
fn linked_entities(run: &Run, g: &Graph, question: &str, threshold: f64) -> anyhow::Result<Vec<(usize, f64)>> {
    let Some(vectors) = run.index().vectors_opt(Field::EntityDescription) else { return Ok(Vec::new()) };
    let texts: Vec<String> = question_phrases(question).into_iter().map(|p| format!("{p}:")).collect();
    let mut hits = Vec::with_capacity(texts.len());
    for v in run.embed(&texts)? {
        let near = run.search(&vectors, &v, LINKS_PER_PHRASE, None)?;
        hits.push(near.into_iter().filter_map(|(id, s)| Some((*g.entity_by_id.get(&id)?, f64::from(s)))).collect());
    }
    Ok(strongest_links(&hits, threshold))
}

/// The noun phrases of a question, each once, in order, as the fast
/// graph's extractor finds them in a text unit (upper-case).
pub fn question_phrases(question: &str) -> Vec<String> {
    let mut phrases: Vec<String> = Vec::new();
    for m in RegexEnglishExtractor::default().extract(question).mentions {
        if !phrases.contains(&m.phrase) {
            phrases.push(m.phrase);
        }
    }
    phrases
}

/// From each phrase's nearest entities with their similarities, those at
/// `threshold` or above, each with its best similarity, strongest first.
pub fn strongest_links(hits: &[Vec<(usize, f64)>], threshold: f64) -> Vec<(usize, f64)> {
    let mut best: HashMap<usize, f64> = HashMap::new();
    for &(e, s) in hits.iter().flatten().filter(|h| h.1 >= threshold) {
        let slot = best.entry(e).or_insert(s);
        *slot = slot.max(s);
    }
    let mut out: Vec<(usize, f64)> = best.into_iter().collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

/// How specific an entity named in `units` of `total` text units is: its
/// inverse document frequency over that of an entity named in one unit
/// (1 for one unit, 0 for every unit). HippoRAG's node specificity is
/// 1 / units, which ranks an entity of two units 2.5 × above one of five:
/// the names left out of the seeds were the bridges (a novel named by its
/// characters' paragraphs), the ones kept abbreviations and common words of
/// two paragraphs. Measured against 1 / units on every dev set:
/// docs/benchmarks-history.md, "Fifth round".
pub fn specificity(units: usize, total: usize) -> f64 {
    let total = total.max(2) as f64;
    (total / units.max(1) as f64).ln().max(0.0) / total.ln()
}

/// Entities listed as synonyms of each seed (HippoRAG 2's synonym edges,
/// followed from the seeds only): those whose vectors (entity_description)
/// have a cosine similarity of at least `threshold` with the seed's, at most
/// `FANOUT` per seed, join the seeds with the seed's weight times the
/// similarity. No entity vectors: the seeds as they are.
fn with_synonyms(run: &Run, g: &Graph, seeds: Vec<(usize, f64)>, threshold: f64) -> anyhow::Result<Vec<(usize, f64)>> {
    let Some(vectors) = run.index().vectors_opt(Field::EntityDescription) else { return Ok(seeds) };
    let Some(store) = &vectors.store else { return Ok(seeds) };
    let mut weight: HashMap<usize, f64> = seeds.iter().copied().collect();
    for &(e, w) in &seeds {
        let Some(row) = vectors.row_of(&g.entity_id[e]) else { continue };
        let near = run.search(&vectors, store.collection().vector(row), FANOUT + 1, None)?;
        for (id, score) in near.into_iter().filter(|h| f64::from(h.1) >= threshold) {
            if let Some(&other) = g.entity_by_id.get(&id) {
                let slot = weight.entry(other).or_insert(0.0);
                *slot = slot.max(w * f64::from(score));
            }
        }
    }
    let mut out: Vec<(usize, f64)> = weight.into_iter().collect();
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(out)
}

/// The text units whose document title the question names (as a run of its
/// words, [`entities_named_in`]'s matching), each unit once.
pub fn units_titled_in(pg: &PassageGraph, question: &str) -> Vec<usize> {
    let mut units: Vec<usize> = entities_named_in(question, &pg.units_by_title, pg.max_title_words, |_| 1);
    units.sort_unstable();
    units.dedup();
    units
}

/// HippoRAG 2: Personalized PageRank restarting at the seed entities, the
/// `unit_seeds` (text units with weights) and, `passage_weight` times their
/// passage score, at every text unit.
fn personalized_pagerank(
    pg: &PassageGraph,
    seeds: &[(usize, f64)],
    unit_seeds: &[(usize, f64)],
    passage: &[f64],
    damping: f64,
    passage_weight: f64,
) -> Vec<f64> {
    let mut reset = vec![0.0; pg.graph.nodes()];
    for &(e, w) in seeds {
        reset[e] = w;
    }
    for (u, &s) in passage.iter().enumerate() {
        reset[pg.unit_node(u)] = s * passage_weight;
    }
    for &(u, w) in unit_seeds {
        reset[pg.unit_node(u)] += w;
    }
    let p = pg.graph.personalized_pagerank(&reset, damping, TOLERANCE, MAX_ITERATIONS);
    p[pg.entities..].to_vec()
}

/// The `FANOUT` heaviest entity neighbours of entity `e`.
fn entity_neighbours(pg: &PassageGraph, e: usize) -> Vec<usize> {
    let mut n: Vec<(usize, f64)> = pg.graph.neighbours(e).filter(|&(x, _)| x < pg.entities).collect();
    n.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    n.dedup_by_key(|x| x.0);
    n.into_iter().take(FANOUT).map(|x| x.0).collect()
}

/// RAGFlow's n-hop ranking: a seed scores `sim × pagerank`, an entity `h`
/// hops from it `sim / (2 + h − 1) × pagerank` (h = 1, 2), summed over
/// seeds and paths; a text unit scores the sum over its entities.
fn nhop(pg: &PassageGraph, seeds: &[(usize, f64)]) -> Vec<f64> {
    let rank = pg.entity_pagerank();
    let mut entity = vec![0.0; pg.entities];
    for &(s, sim) in seeds {
        entity[s] += sim * rank[s];
        for a in entity_neighbours(pg, s) {
            entity[a] += sim / 2.0 * rank[a];
            for b in entity_neighbours(pg, a).into_iter().filter(|&b| b != s) {
                entity[b] += sim / 3.0 * rank[b];
            }
        }
    }
    let mut units = vec![0.0; pg.units()];
    for (e, &score) in entity.iter().enumerate().filter(|(_, s)| **s > 0.0) {
        for &u in &pg.entity_units[e] {
            units[u as usize] += score;
        }
    }
    units
}

/// Cosine similarity of each entity's vector (entity_description) to the
/// question, 0 when negative or missing.
fn entity_relevance(run: &Run, g: &Graph, query: &[f32]) -> anyhow::Result<Vec<f64>> {
    let vectors = run.vectors(Field::EntityDescription)?;
    let mut relevance = vec![0.0; g.title.len()];
    for (id, score) in run.search(&vectors, query, g.title.len(), None)? {
        if let Some(&e) = g.entity_by_id.get(&id) {
            relevance[e] = f64::from(score).max(0.0);
        }
    }
    Ok(relevance)
}

/// Units listing both entities (their sorted unit lists' intersection).
fn shared_units<'a>(pg: &'a PassageGraph, a: usize, b: usize) -> impl Iterator<Item = u32> + 'a {
    let other = &pg.entity_units[b];
    pg.entity_units[a].iter().copied().filter(move |u| other.binary_search(u).is_ok())
}

/// MiniRAG-style path scoring: each path of one or two relationships from a
/// seed scores the seed weight times the mean question-relevance of the
/// entities after the seed; each step of the path credits its score to the
/// text units where its two entities meet (the evidence of that step).
fn paths(pg: &PassageGraph, seeds: &[(usize, f64)], relevance: &[f64]) -> Vec<f64> {
    let mut units = vec![0.0; pg.units()];
    for &(s, w) in seeds {
        for &u in &pg.entity_units[s] {
            units[u as usize] += w;
        }
        for a in entity_neighbours(pg, s) {
            let one = w * relevance[a];
            for u in shared_units(pg, s, a) {
                units[u as usize] += one;
            }
            for b in entity_neighbours(pg, a).into_iter().filter(|&b| b != s) {
                let two = w * (relevance[a] + relevance[b]) / 2.0;
                for u in shared_units(pg, s, a).chain(shared_units(pg, a, b)) {
                    units[u as usize] += two;
                }
            }
        }
    }
    units
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passage_scores_average_normalised_dense_and_bm25() {
        let dense = vec![(2, 0.75), (0, 0.5), (1, 0.25)];
        let lexical = vec![(0, 6.0), (2, 3.0)];
        let s = passage_scores(3, &dense, &lexical);
        // dense: (0.5, 0, 1); bm25 over the best, unit 1 unmatched: (1, 0, 0.5)
        assert_eq!(s, vec![0.75, 0.0, 0.75]);
        assert_eq!(passage_scores(2, &vec![], &vec![]), vec![0.0, 0.0]);
    }

    #[test]
    fn specificity_is_idf_over_that_of_one_unit() {
        assert_eq!(specificity(1, 100), 1.0);
        assert_eq!(specificity(100, 100), 0.0);
        assert!((specificity(10, 100) - 0.5).abs() < 1e-12);
        // Five units vs two of 1,890 (MuSiQue): 0.87 of its weight, not 0.4.
        let ratio = specificity(5, 1890) / specificity(2, 1890);
        assert!((0.86..0.87).contains(&ratio), "{ratio}");
        // Degenerate indexes: no division by zero, never negative.
        assert_eq!(specificity(0, 0), 1.0);
        assert_eq!(specificity(3, 1), 0.0);
    }

    /// Five units: 0 names the film and its director, 1 is the director's
    /// own paragraph (named by the title), 2 and 3 share a common phrase with
    /// unit 0, 4 is unrelated. Entities: 0 FILM, 1 DIRECTOR, 2 COUNTRY.
    fn film_graph() -> PassageGraph {
        PassageGraph::from_lists(vec![vec![0], vec![0, 1], vec![0, 2, 3]], 5, vec![(0, 1, 1.0), (1, 2, 1.0)], &[], 1.0)
    }

    /// The walk over [`film_graph`] with HippoRAG's damping and passage weight.
    fn walk_film(seeds: &[(usize, f64)], passage: &[f64]) -> Vec<f64> {
        personalized_pagerank(&film_graph(), seeds, &[], passage, 0.5, 0.05)
    }

    fn ranked(scores: &[f64]) -> Vec<usize> {
        let mut r: Vec<usize> = (0..scores.len()).filter(|&u| scores[u] > 0.0).collect();
        r.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        r
    }

    #[test]
    fn the_walk_reaches_the_bridge_paragraph_from_a_named_seed() {
        // The question names the film; the passage scores favour a paragraph
        // sharing only the common phrase (unit 2) over the director's (unit 1).
        let passage = [1.0, 0.1, 0.5, 0.0, 0.0];
        let scores = walk_film(&[(0, 1.0)], &passage);
        assert_eq!(ranked(&scores)[..2], [0, 1], "{scores:?}");
        // Without seeds the walk ranks by the passage scores and their neighbours.
        let flat = walk_film(&[], &passage);
        assert_eq!(ranked(&flat)[0], 0);
        assert!(flat[2] > flat[1], "{flat:?}");
        // Unit 4 has no entity and no score: nothing reaches it.
        assert_eq!(scores[4], 0.0);
    }

    #[test]
    fn a_linked_entity_seeds_its_own_paragraph() {
        // Seeded at DIRECTOR (as a phrase of the question linked to it), the
        // director's paragraph comes before the ones that only share COUNTRY.
        let scores = walk_film(&[(1, 0.8)], &[0.2, 0.0, 0.2, 0.2, 0.0]);
        assert_eq!(ranked(&scores)[..2], [0, 1], "{scores:?}");
        assert!(scores[1] > scores[2] && scores[1] > scores[3], "{scores:?}");
    }

    #[test]
    fn a_heavy_title_edge_sends_the_walk_to_the_passage_about_the_name() {
        // Entity 0 DIRECTOR is named by unit 0 (the film's passage, first
        // hop), units 2 and 3 (other films' casts) and unit 1, the passage
        // titled by the director's name (the second hop). The passage
        // scores favour the casts, which share the question's words.
        let lists = vec![vec![0, 1, 2, 3]];
        let passage = [1.0, 0.0, 0.3, 0.3];
        let walk = |title_weight: f64| {
            let pg = PassageGraph::from_lists(lists.clone(), 4, vec![], &[(0, 1)], title_weight);
            personalized_pagerank(&pg, &[(0, 1.0)], &[], &passage, 0.5, 0.05)
        };
        let plain = walk(1.0);
        assert_eq!(ranked(&plain), [0, 2, 3, 1], "{plain:?}");
        let titled = walk(5.0);
        assert_eq!(ranked(&titled), [1, 0, 2, 3], "{titled:?}");
    }

    #[test]
    fn units_whose_title_the_question_names_seed_the_walk() {
        // Units 0 and 1 are titled "Alberto Casado Cerviño" and "Arjun Naidu
        // (cricketer)", named by the question but entities of no graph (each
        // occurs in one unit: pruned); units 2 and 3 share a common phrase.
        let mut pg = PassageGraph::from_lists(vec![vec![2, 3]], 4, vec![], &[], 1.0);
        pg.units_by_title = HashMap::from([
            ("alberto casado cerviño".to_string(), vec![0]),
            ("arjun naidu cricketer".to_string(), vec![1]),
            ("arjun naidu".to_string(), vec![1]),
            ("film".to_string(), vec![3]),
        ]);
        pg.max_title_words = 3;
        let question = "Who was born first out of Alberto Casado Cerviño and Arjun Naidu?";
        assert_eq!(units_titled_in(&pg, question), [0, 1]);
        assert!(units_titled_in(&pg, "Who was born first?").is_empty());
        // Seeded with weight 1, both come before the units the passage scores favour.
        let passage = [0.1, 0.0, 0.9, 0.8];
        let seeds = [(0, 1.0), (1, 1.0)];
        let scores = personalized_pagerank(&pg, &[], &seeds, &passage, 0.5, 0.05);
        assert_eq!(ranked(&scores)[..2], [0, 1], "{scores:?}");
        let unseeded = personalized_pagerank(&pg, &[], &[], &passage, 0.5, 0.05);
        assert_eq!(ranked(&unseeded)[0], 2, "{unseeded:?}");
    }

    /// A three-passage chain and its distractors. Entities: 0 the painting
    /// the question names, 1 its painter, 2 the painter's city, 3 a phrase
    /// of other paragraphs. Unit 0 (the painting: entities 0, 1) is the
    /// first hop; unit 1 (the painter's biography, titled by his name: 1,
    /// 2) the second; unit 2 (the castle in the city: 2) the third; units
    /// 3–6 (3) share the question's words; units 7–9 are other paragraphs
    /// of the city (2).
    fn chain_graph() -> PassageGraph {
        let lists = vec![vec![0], vec![0, 1], vec![1, 2, 7, 8, 9], vec![3, 4, 5, 6]];
        PassageGraph::from_lists(lists, 10, vec![], &[(1, 1)], 5.0)
    }

    #[test]
    fn a_second_walk_from_the_first_walks_units_reaches_the_third_hop() {
        let pg = chain_graph();
        let passage = [0.9, 0.2, 0.3, 0.4, 0.4, 0.35, 0.35, 0.0, 0.0, 0.0];
        let walk = |seeds: &[(usize, f64)]| ranked_units(personalized_pagerank(&pg, seeds, &[], &passage, 0.5, 0.05));
        let seeds = vec![(0, 1.0)];
        let first = walk(&seeds);
        let rank_of = |r: &Ranking, u: usize| r.iter().position(|h| h.0 == u).unwrap();
        assert_eq!(first[0].0, 0, "{first:?}");
        // From the painting alone, the castle is behind the paragraphs that mention the painting.
        assert!(rank_of(&first, 2) > 5, "{first:?}");
        // The first walk's two best units (the painting and the painter's
        // biography, reached through the painter) seed the second walk with
        // their entities: the city's castle comes before the distractors.
        let from = walk_units(&first, 2);
        assert_eq!(from.iter().map(|f| f.0).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(from[0].1, 1.0);
        let more = seed_entities(&pg, &[], &[], &from, BRIDGE_SEEDS, &|e| pg.entity_units[e].len());
        let second = walk(&merged_seeds(&seeds, &more));
        assert!(rank_of(&second, 2) < rank_of(&first, 2), "{first:?}\n{second:?}");
        assert!(rank_of(&second, 2) <= 3, "{second:?}");
    }

    #[test]
    fn merged_seeds_keep_each_entity_once_at_its_larger_weight() {
        let merged = merged_seeds(&[(1, 1.0), (2, 0.5)], &[(2, 0.8), (3, 0.2), (1, 0.4)]);
        assert_eq!(merged, vec![(1, 1.0), (2, 0.8), (3, 0.2)]);
        assert!(merged_seeds(&[], &[]).is_empty());
        assert_eq!(walk_units(&vec![(4, 0.2), (1, 0.1), (3, 0.05)], 2), vec![(4, 1.0), (1, 0.5)]);
        assert!(walk_units(&vec![], 3).is_empty());
    }

    #[test]
    fn a_near_copy_of_an_earlier_unit_leaves_the_head() {
        // Unit 1 is a near copy of unit 0 (cosine 0.98), unit 3 of unit 2
        // (0.96); unit 4 has no vector.
        let norm = |v: [f32; 2]| {
            let n = (v[0] * v[0] + v[1] * v[1]).sqrt();
            [v[0] / n, v[1] / n]
        };
        let vectors: Vec<[f32; 2]> = vec![
            norm([1.0, 0.0]),
            norm([0.98, (1.0f32 - 0.98 * 0.98).sqrt()]),
            norm([0.0, 1.0]),
            norm([(1.0f32 - 0.96 * 0.96).sqrt(), 0.96]),
        ];
        let vector = |u: usize| vectors.get(u).map(|v| v.as_slice());
        let ranked: Vec<usize> = (0..12).collect();
        let out = distinct_head(ranked.clone(), &vector, 0.95);
        assert_eq!(out[..DISTINCT_HEAD], [0, 2, 4, 5, 6], "{out:?}");
        // The copies follow the head in their order, then the rest as it was.
        assert_eq!(out[DISTINCT_HEAD..], [1, 3, 7, 8, 9, 10, 11], "{out:?}");
        // Below the threshold nothing moves; a short ranking stays whole.
        assert_eq!(distinct_head(ranked.clone(), &vector, 0.99), ranked);
        assert_eq!(distinct_head(vec![1, 0], &vector, 0.95), [1, 0]);
        assert!(distinct_head(vec![], &vector, 0.95).is_empty());
    }

    #[test]
    fn the_walks_head_comes_first_then_the_fusion_without_repeats() {
        let walked = vec![(4, 0.5), (2, 0.3), (7, 0.1)];
        let fused = vec![(2, 0.03), (9, 0.02), (4, 0.02), (1, 0.01)];
        assert_eq!(walk_first(&walked, &fused, 0), [2, 9, 4, 1]);
        assert_eq!(walk_first(&walked, &fused, 2), [4, 2, 9, 1]);
        // A head longer than the walk: all of the walk, then the rest.
        assert_eq!(walk_first(&walked, &fused, 10), [4, 2, 7, 9, 1]);
    }

    #[test]
    fn question_phrases_are_the_extractors_noun_phrases_once() {
        assert_eq!(
            question_phrases("Which 2009 animated film is from Japan, Summer Wars or The Secret of Kells?"),
            ["JAPAN", "SUMMER WARS", "SECRET OF KELLS"]
        );
        assert_eq!(
            // Each phrase once; a lone common noun ("wife") is not a phrase.
            question_phrases("Is Roman Polanski older than Emmanuelle Seigner, the wife of Roman Polanski?"),
            ["ROMAN POLANSKI", "EMMANUELLE SEIGNER"]
        );
        assert!(question_phrases("Who is he?").is_empty());
    }

    #[test]
    fn strongest_links_keep_each_entity_once_above_the_threshold() {
        // Phrase 1 near entities 4 (0.95) and 7 (0.72); phrase 2 near 7 (0.81) and 2 (0.6).
        let hits = vec![vec![(4, 0.95), (7, 0.72)], vec![(7, 0.81), (2, 0.6)]];
        assert_eq!(strongest_links(&hits, 0.7), vec![(4, 0.95), (7, 0.81)]);
        assert_eq!(strongest_links(&hits, 0.9), vec![(4, 0.95)]);
        assert!(strongest_links(&[], 0.7).is_empty());
    }

    #[test]
    fn seed_units_are_the_first_units_weighted_by_their_scores() {
        // Fused order 3, 0, 1, 2; passage scores say unit 3 is far ahead.
        let hybrid = vec![(3, 0.0164), (0, 0.0161), (1, 0.0159), (2, 0.0156)];
        let passage = [0.4, 0.2, 0.9, 0.8];
        assert_eq!(seed_units(&hybrid, &passage, 3), vec![(3, 1.0), (0, 0.5), (1, 0.25)]);
        // No score anywhere: every unit weighs 1, as with equal scores.
        assert_eq!(seed_units(&hybrid, &[0.0; 4], 2), vec![(3, 1.0), (0, 1.0)]);
        assert!(seed_units(&vec![], &passage, 5).is_empty());
    }
}
