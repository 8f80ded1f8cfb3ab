//! GraphRAG local search: the entities closest to the question, their
//! relationships, claims, community reports and source text units, packed
//! into `local_search.max_context_tokens` with GraphRAG's proportions.
//! Three graphrag-rs departures, measured in docs/benchmarks-history.md ("Retrieval
//! recall on the dev sets"): entities the question names are selected first; the text
//! units (of the selected entities and their relationships' other ends) are
//! ordered by similarity to the question when text unit vectors exist; and
//! on an index whose entities have no descriptions (the fast method: its
//! entity and relationship rows are bare titles, its reports extracts of the
//! text units) the whole budget goes to text units ranked by the graph walk
//! of PPR search.

use std::collections::{HashMap, HashSet};

use anyhow::bail;
use serde_json::json;

use crate::context::{
    entities_named_in, history_table, join_parts, neighbour_entities, order_by_similarity, pack_table, python_float,
    rank_relationships, rank_text_units, reports_up_to_level, MemoCounter, PackedTable,
};
use crate::data::{Field, Graph};
use crate::records::{self, ContextRecords};
use crate::retrieval::reranked_sources;
use crate::{render, Outcome, Run};
use graphrag_engine::settings::{DriftSearchConfig, LocalSearchConfig};

/// A local search context.
pub struct LocalContext {
    pub text: String,
    pub reports: PackedTable,
    pub entities: PackedTable,
    pub relationships: PackedTable,
    pub claims: PackedTable,
    pub sources: PackedTable,
}

impl LocalContext {
    pub fn records(&self) -> ContextRecords {
        ContextRecords {
            entities: Some(records::entities(&self.entities)),
            relationships: Some(records::relationships(&self.relationships)),
            claims: Some(records::claims(&self.claims)),
            sources: Some(records::sources(&self.sources)),
            reports: Some(records::reports(&self.reports)),
            ..ContextRecords::default()
        }
    }
}

/// What shapes a local search context: local search's settings, or DRIFT's
/// `local_search_*` ones for its follow-up steps.
pub struct LocalParams {
    /// Where these come from in settings.yaml (`local_search.`,
    /// `drift_search.local_search_`), for errors.
    pub settings_prefix: &'static str,
    pub text_unit_prop: f64,
    pub community_prop: f64,
    pub conversation_history_max_turns: u32,
    pub top_k_entities: usize,
    pub top_k_relationships: usize,
}

impl LocalParams {
    pub fn of_local_search(s: &LocalSearchConfig) -> LocalParams {
        LocalParams {
            settings_prefix: "local_search.",
            text_unit_prop: s.text_unit_prop,
            community_prop: s.community_prop,
            conversation_history_max_turns: s.conversation_history_max_turns,
            top_k_entities: s.top_k_entities,
            top_k_relationships: s.top_k_relationships,
        }
    }

    pub fn of_drift_search(d: &DriftSearchConfig) -> LocalParams {
        LocalParams {
            settings_prefix: "drift_search.local_search_",
            text_unit_prop: d.local_search_text_unit_prop,
            community_prop: d.local_search_community_prop,
            conversation_history_max_turns: 0,
            top_k_entities: d.local_search_top_k_mapped_entities,
            top_k_relationships: d.local_search_top_k_relationships,
        }
    }
}

pub fn run(run: &Run) -> anyhow::Result<Outcome> {
    let question = &run.req.question;
    let s = &run.s().local_search;
    let query = run.embed_one(question)?;
    let params = LocalParams::of_local_search(s);
    let budget = run.req.max_context_tokens.unwrap_or(s.max_context_tokens);
    let ctx = build(run, &params, question, &query, budget, &run.req.history)?;
    let context_ms = run.context_ready();
    let records = ctx.records();
    if run.retrieval_only() {
        return Ok(Outcome { answer: None, context: ctx.text, records, context_ms });
    }
    let prompt = run.prompt("local_search.prompt", &s.prompt)?;
    let system =
        render(&prompt, &[("response_type", json!(run.req.response_type)), ("context_data", json!(ctx.text))])?;
    let answer = run.chat(&run.messages(system, question))?;
    Ok(Outcome { answer: Some(answer), context: ctx.text, records, context_ms })
}

fn entity_row(g: &Graph, e: usize) -> Vec<String> {
    vec![g.entity_hrid[e].to_string(), g.title[e].clone(), g.entity_description[e].clone(), g.degree[e].to_string()]
}

/// A relationship's id, source, target and description cells.
pub(super) fn relationship_row(g: &Graph, r: usize) -> Vec<String> {
    vec![g.rel_hrid[r].to_string(), g.source[r].clone(), g.target[r].clone(), g.rel_description[r].clone()]
}

const ENTITY_HEADER: [&str; 4] = ["id", "entity", "description", "number of relationships"];
const RELATIONSHIP_HEADER: [&str; 5] = ["id", "source", "target", "description", "weight"];
/// GraphRAG's relationship table once the first relationship has `links`
/// (its header takes the attribute columns of the first row).
const RELATIONSHIP_HEADER_WITH_LINKS: [&str; 6] = ["id", "source", "target", "description", "weight", "links"];
const CLAIM_HEADER: [&str; 8] =
    ["id", "entity", "object_id", "type", "status", "start_date", "end_date", "description"];

/// Builds GraphRAG's local context for a question and its embedding, within `max_tokens`.
pub fn build(
    run: &Run,
    s: &LocalParams,
    question: &str,
    query: &[f32],
    max_tokens: usize,
    history: &[(String, String)],
) -> anyhow::Result<LocalContext> {
    if s.text_unit_prop < 0.0 || s.community_prop < 0.0 || s.text_unit_prop + s.community_prop > 1.0 {
        bail!(
            "{p}text_unit_prop ({}) + {p}community_prop ({}) must be between 0 and 1",
            s.text_unit_prop,
            s.community_prop,
            p = s.settings_prefix
        );
    }
    let memo = MemoCounter::default();
    let count = |t: &str| memo.count(t);
    let index = run.index();
    let g = index.graph()?;
    if !g.is_described() {
        return graph_ranked_sources(run, question, query, max_tokens, history, &count);
    }
    let vectors = run.vectors(Field::EntityDescription)?;

    // Entities: those the question names (up to top_k_entities), then
    // GraphRAG's embedding matches, oversampled ×2 (deduplicated).
    let named = entities_named_in(question, &g.entity_by_key, g.max_key_words, |e| g.entity_units[e].len());
    let hits = run.search(&vectors, query, s.top_k_entities.saturating_mul(2), None)?;
    let mut seen = HashSet::new();
    let selected: Vec<usize> = named
        .into_iter()
        .take(s.top_k_entities)
        .chain(hits.iter().filter_map(|(id, _)| g.entity_by_id.get(id).copied()))
        .filter(|e| seen.insert(*e))
        .collect();

    let history = history_table(history, s.conversation_history_max_turns as usize, true, max_tokens, &count);
    let budget = max_tokens.saturating_sub(history.tokens);
    let community_tokens = (budget as f64 * s.community_prop) as usize;
    let text_unit_tokens = (budget as f64 * s.text_unit_prop) as usize;
    let local_tokens = budget.saturating_sub(community_tokens + text_unit_tokens);

    let reports = report_table(run, &g, &selected, community_tokens, &count)?;

    // Entities, relationships and claims grow together, one entity at a
    // time, until the next entity would not fit (GraphRAG's loop).
    let claims_arc = index.claims()?;
    let claims = &*claims_arc;
    let mut entities = PackedTable::default();
    let mut relationships = PackedTable::default();
    let mut claim_table = PackedTable::default();
    let mut rels_in_context: Vec<usize> = Vec::new();
    let mut links: HashMap<usize, usize> = HashMap::new();
    for n in 1..=selected.len() {
        let prefix = &selected[..n];
        let e = pack_table("Entities", &ENTITY_HEADER, prefix.iter().map(|&e| entity_row(&g, e)), local_tokens, &count);
        let ranked = rank_relationships(prefix, &g.view(), s.top_k_relationships, &mut links);
        let with_links = ranked.first().is_some_and(|r| links.contains_key(r));
        let header: &[&str] = if with_links { &RELATIONSHIP_HEADER_WITH_LINKS } else { &RELATIONSHIP_HEADER };
        let links = &links;
        let r = pack_table(
            "Relationships",
            header,
            ranked.iter().map(|&r| {
                let mut row = relationship_row(&g, r);
                // GraphRAG: `str(weight)` of a float, empty when it is 0.
                row.push(if g.weight[r] == 0.0 { String::new() } else { python_float(g.weight[r]) });
                if with_links {
                    // GraphRAG writes an empty cell for a relationship without the attribute.
                    row.push(links.get(&r).map(usize::to_string).unwrap_or_default());
                }
                row
            }),
            local_tokens,
            &count,
        );
        let claim_rows = prefix.iter().flat_map(|&e| {
            let title = &g.title[e];
            claims.by_subject.get(title).into_iter().flatten().map(move |&c| {
                vec![
                    claims.hrid[c].to_string(),
                    title.clone(),
                    claims.object[c].clone(),
                    claims.claim_type[c].clone(),
                    claims.status[c].clone(),
                    claims.start_date[c].clone(),
                    claims.end_date[c].clone(),
                    claims.description[c].clone(),
                ]
            })
        });
        let c = pack_table("Claims", &CLAIM_HEADER, claim_rows, local_tokens, &count);
        if e.tokens + r.tokens + c.tokens > local_tokens || e.rows.len() < n {
            break;
        }
        rels_in_context = ranked[..r.rows.len()].to_vec();
        (entities, relationships, claim_table) = (e, r, c);
    }

    // Sources: the selected entities' text units.
    let sources = if text_unit_tokens > 0 && !selected.is_empty() {
        let entity_units: Vec<&[u32]> = selected.iter().map(|&e| g.entity_units[e].as_slice()).collect();
        let rel_units: Vec<&[u32]> = rels_in_context.iter().map(|&r| g.rel_units[r].as_slice()).collect();
        let mut ranked: Vec<String> =
            rank_text_units(&entity_units, &rel_units).into_iter().map(|u| g.unit_id(u).to_string()).collect();
        // The graph proposes, the question orders: entity links alone favour
        // units that list many of the selected entities over the one that
        // answers. The candidates also take in the units of the entities at
        // the other end of the context's relationships (the next hop of a
        // multi-hop question). graphrag-rs: GraphRAG ranks by entity order.
        if let Some(vectors) = index.vectors_opt(Field::TextUnitText) {
            for e in neighbour_entities(&selected, &rels_in_context, &g.ends) {
                ranked.extend(g.entity_units[e].iter().map(|&u| g.unit_id(u).to_string()));
            }
            let mut seen = HashSet::new();
            ranked.retain(|id| seen.insert(id.clone()));
            let allowed: HashSet<usize> = ranked.iter().filter_map(|id| vectors.row_of(id)).collect();
            let hits = run.search(&vectors, query, allowed.len(), Some(&allowed))?;
            ranked = order_by_similarity(ranked, &hits);
        }
        let units = index.text_units()?;
        let rows = ranked.iter().filter_map(|id| units.by_id.get(id).copied());
        reranked_sources(run, &units, rows, text_unit_tokens, &count)?
    } else {
        PackedTable::default()
    };

    let text = join_parts([
        history.text.as_str(),
        reports.text.as_str(),
        entities.text.as_str(),
        relationships.text.as_str(),
        claim_table.text.as_str(),
        sources.text.as_str(),
    ]);
    Ok(LocalContext { text, reports, entities, relationships, claims: claim_table, sources })
}

/// The local context of an index without entity descriptions: the text
/// units ranked by PPR search's graph walk, filling the budget.
fn graph_ranked_sources(
    run: &Run,
    question: &str,
    query: &[f32],
    max_tokens: usize,
    history: &[(String, String)],
    count: &dyn Fn(&str) -> usize,
) -> anyhow::Result<LocalContext> {
    let ranking = super::ppr::rank_units(run, question, query, max_tokens)?;
    let (text, sources) = super::sources_context(run, ranking.units, max_tokens, history, count)?;
    Ok(LocalContext {
        text,
        reports: PackedTable::default(),
        entities: PackedTable::default(),
        relationships: PackedTable::default(),
        claims: PackedTable::default(),
        sources,
    })
}

/// Community reports of the selected entities' communities (rolled up to the
/// community level), by how many selected entities each contains, then rank.
fn report_table(
    run: &Run,
    g: &Graph,
    selected: &[usize],
    budget: usize,
    count: &dyn Fn(&str) -> usize,
) -> anyhow::Result<PackedTable> {
    let index = run.index();
    if budget == 0 || selected.is_empty() || !index.has_table("community_reports") || !index.has_table("communities") {
        return Ok(PackedTable::default());
    }
    let reports = index.reports()?;
    let communities = index.communities()?;
    let level = super::community_level(run, &reports)?;
    let kept: HashSet<usize> = reports_up_to_level(&reports.level, level).into_iter().collect();
    let mut matches: HashMap<usize, usize> = HashMap::new();
    for &e in selected {
        let mut here = HashSet::new();
        for &c in communities.of_entity.get(&g.entity_id[e]).into_iter().flatten() {
            if communities.level[c] > level {
                continue;
            }
            if let Some(&r) = reports.by_community.get(&communities.community[c]) {
                if kept.contains(&r) && here.insert(r) {
                    *matches.entry(r).or_default() += 1;
                }
            }
        }
    }
    let mut ranked: Vec<(usize, usize)> = matches.into_iter().collect();
    ranked.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then(reports.rank[b.0].partial_cmp(&reports.rank[a.0]).unwrap_or(std::cmp::Ordering::Equal))
            .then(a.0.cmp(&b.0))
    });
    let rows = ranked
        .iter()
        .map(|&(r, _)| vec![reports.hrid[r].to_string(), reports.title[r].clone(), reports.full_content[r].clone()]);
    Ok(pack_table("Reports", &["id", "title", "content"], rows, budget, count))
}
