//! LightRAG's hybrid and mix retrieval: the chat model extracts high- and
//! low-level keywords; low-level keywords find entities (then their
//! relationships), high-level keywords find relationships (then their end
//! entities); mix adds the text units closest to the question. Tables are
//! packed under keyword_search.max_entity_tokens / max_relation_tokens, the
//! sources under what is left of max_total_tokens. On an index whose
//! entities have no descriptions (the fast method), entity and relationship
//! rows would be bare titles: as in local search, the whole budget then goes
//! to text units ranked by PPR search's graph walk.

use std::collections::HashSet;

use serde_json::{json, Value};

use crate::context::{
    content_words, history_text, join_parts, pack_table, rank_text_units, round_robin, MemoCounter, PackedTable,
};
use crate::data::{Field, Graph};
use crate::records::{self, ContextRecords, KeywordsRecord, MethodRecords};
use crate::retrieval::reranked_sources;
use crate::{render, Outcome, Run};
use graphrag_engine::prompts::PromptTemplate;

/// Tokens kept free for the question and the model's formatting (LightRAG's buffer).
const BUFFER_TOKENS: usize = 100;

struct Keywords {
    high: Vec<String>,
    low: Vec<String>,
    /// Why the query's own words were used, when they were.
    fallback: Option<String>,
}

fn query_words(question: &str) -> Vec<String> {
    let words = content_words(question);
    if words.is_empty() {
        vec![question.trim().to_string()]
    } else {
        words
    }
}

fn keywords(run: &Run, history: &str) -> anyhow::Result<Keywords> {
    let question = &run.req.question;
    let fallback = |why: &str| {
        let words = query_words(question);
        Keywords { high: words.clone(), low: words, fallback: Some(why.to_string()) }
    };
    if run.retrieval_only() {
        return Ok(fallback("no chat model call in retrieval-only mode"));
    }
    let ks = &run.s().keyword_search;
    let prompt = run.prompt("keyword_search.keywords_prompt", &ks.keywords_prompt)?;
    let text = render(&prompt, &[("query", json!(question)), ("history", json!(history))])?;
    let messages = vec![graphrag_engine::llm::Message::user(text)];
    match run.chat_json(messages) {
        Ok(v) => {
            let high = super::strings_of(v.get("high_level_keywords"));
            let low = super::strings_of(v.get("low_level_keywords"));
            if high.is_empty() && low.is_empty() {
                // LightRAG: a short query without keywords is searched by itself.
                let mut k = fallback("the chat model found no keywords");
                k.high.clear();
                return Ok(k);
            }
            Ok(Keywords { high, low, fallback: None })
        }
        Err(e) if super::is_bad_json(&e) => {
            run.skip("keyword extraction", e.to_string());
            Ok(fallback("the keyword extraction answer was not valid JSON"))
        }
        Err(e) => Err(e.into()),
    }
}

/// Relationships of `entities` (one hop), by combined degree then weight.
fn relationships_of(g: &Graph, entities: &[usize]) -> Vec<usize> {
    let mut seen = HashSet::new();
    let mut rels: Vec<usize> =
        entities.iter().flat_map(|&e| g.adjacency[e].iter().map(|&r| r as usize)).filter(|r| seen.insert(*r)).collect();
    rels.sort_by(|&a, &b| {
        g.combined_degree[b]
            .cmp(&g.combined_degree[a])
            .then(g.weight[b].partial_cmp(&g.weight[a]).unwrap_or(std::cmp::Ordering::Equal))
            .then(a.cmp(&b))
    });
    rels
}

/// End entities of `relationships`, in order.
fn entities_of(g: &Graph, relationships: &[usize]) -> Vec<usize> {
    let mut seen = HashSet::new();
    relationships
        .iter()
        .flat_map(|&r| {
            let (s, t) = g.ends[r];
            [s, t].into_iter().flatten().map(|e| e as usize)
        })
        .filter(|e| seen.insert(*e))
        .collect()
}

/// Token budgets of the context's parts.
struct Budgets {
    entities: usize,
    relations: usize,
    total: usize,
    /// Text chunks at most.
    chunks: usize,
    /// Whether the prompt's own tokens count against `total` (LightRAG's
    /// max_total_tokens) or only the context's (a context budget).
    prompt_counts: bool,
}

impl Budgets {
    /// keyword_search's, or a context budget split in its proportions
    /// with no cap on the number of chunks.
    fn of(run: &Run) -> Budgets {
        let ks = &run.s().keyword_search;
        match run.req.max_context_tokens {
            None => Budgets {
                entities: ks.max_entity_tokens,
                relations: ks.max_relation_tokens,
                total: ks.max_total_tokens,
                chunks: ks.chunk_top_k,
                prompt_counts: true,
            },
            Some(budget) => {
                let share = |part: usize| (budget as f64 * part as f64 / ks.max_total_tokens.max(1) as f64) as usize;
                Budgets {
                    entities: share(ks.max_entity_tokens),
                    relations: share(ks.max_relation_tokens),
                    total: budget,
                    chunks: usize::MAX,
                    prompt_counts: false,
                }
            }
        }
    }
}

pub fn run(run: &Run, mix: bool) -> anyhow::Result<Outcome> {
    let ks = &run.s().keyword_search;
    let budgets = Budgets::of(run);
    let question = &run.req.question;
    let memo = MemoCounter::default();
    let count = |t: &str| memo.count(t);
    let history = history_text(&run.req.history, run.s().local_search.conversation_history_max_turns as usize);
    let kw = keywords(run, &history)?;
    let keyword_note = kw.fallback.as_ref().map(|why| {
        format!(
            "-----Keywords-----\nkeywords taken from the question's own words ({why}): {}",
            query_words(question).join(", ")
        )
    });
    let prompt = run.prompt("keyword_search.prompt", &ks.prompt)?;
    let empty_prompt = render(
        &prompt,
        &[("response_type", json!(run.req.response_type)), ("context_data", json!("")), ("history", json!(history))],
    )?;
    let prompt_tokens = if budgets.prompt_counts { count(&empty_prompt) + count(question) + BUFFER_TOKENS } else { 0 };
    let used = prompt_tokens + keyword_note.as_deref().map_or(0, count);
    let keywords_record = KeywordsRecord {
        high_level: kw.high.clone(),
        low_level: kw.low.clone(),
        from: if kw.fallback.is_some() { "question words" } else { "chat model" },
    };
    let index = run.index();
    let g = index.graph()?;
    if !g.is_described() {
        let budget = budgets.total.saturating_sub(used);
        let query = run.embed_one(question)?;
        let ranking = super::ppr::rank_units(run, question, &query, budget)?;
        let units = index.text_units()?;
        let sources = reranked_sources(run, &units, ranking.units.into_iter().take(budgets.chunks), budget, &count)?;
        let context = join_parts([keyword_note.as_deref().unwrap_or(""), sources.text.as_str()]);
        let records = ContextRecords {
            entities: Some(Vec::new()),
            relationships: Some(Vec::new()),
            sources: Some(records::sources(&sources)),
            method: MethodRecords::Keyword { keywords: keywords_record },
            ..ContextRecords::default()
        };
        return finish(run, &prompt, history, context, records);
    }
    let entity_vectors = run.vectors(Field::EntityDescription)?;
    let relationship_vectors = index.vectors_opt(Field::RelationshipDescription);

    // One embedding request for everything this query needs.
    let mut texts = Vec::new();
    let low_at = (!kw.low.is_empty()).then(|| {
        texts.push(kw.low.join(", "));
        texts.len() - 1
    });
    let high_at = (!kw.high.is_empty()).then(|| {
        texts.push(kw.high.join(", "));
        texts.len() - 1
    });
    let query_at = mix.then(|| {
        texts.push(question.clone());
        texts.len() - 1
    });
    let vectors = run.embed(&texts)?;

    let entity_hits = |v: &[f32]| -> anyhow::Result<Vec<usize>> {
        let mut seen = HashSet::new();
        Ok(run
            .search(&entity_vectors, v, ks.top_k, None)?
            .iter()
            .filter_map(|(id, _)| g.entity_by_id.get(id).copied())
            .filter(|e| seen.insert(*e))
            .collect())
    };
    // Local (low-level): entities, then their relationships.
    let (local_entities, local_relations) = match low_at {
        Some(i) => {
            let e = entity_hits(&vectors[i])?;
            let r = relationships_of(&g, &e);
            (e, r)
        }
        None => (Vec::new(), Vec::new()),
    };
    // Global (high-level): relationships, then their end entities. Without
    // relationship vectors, the relationships of the entities matching the
    // high-level keywords stand in.
    let (global_entities, global_relations) = match high_at {
        Some(i) => {
            let rels = match &relationship_vectors {
                Some(rv) => {
                    let mut seen = HashSet::new();
                    run.search(rv, &vectors[i], ks.top_k, None)?
                        .iter()
                        .filter_map(|(id, _)| g.rel_by_id.get(id).copied())
                        .filter(|r| seen.insert(*r))
                        .collect()
                }
                None => {
                    let mut r = relationships_of(&g, &entity_hits(&vectors[i])?);
                    r.truncate(ks.top_k);
                    r
                }
            };
            (entities_of(&g, &rels), rels)
        }
        None => (Vec::new(), Vec::new()),
    };
    let entities = round_robin(&[local_entities, global_entities]);
    let relations = round_robin(&[local_relations, global_relations]);

    let entity_table = pack_table(
        "Entities",
        &["id", "entity", "type", "description", "rank"],
        entities.iter().map(|&e| {
            vec![
                g.entity_hrid[e].to_string(),
                g.title[e].clone(),
                g.entity_type[e].clone(),
                g.entity_description[e].clone(),
                g.degree[e].to_string(),
            ]
        }),
        budgets.entities,
        &count,
    );
    let relation_table = pack_table(
        "Relationships",
        &["id", "source", "target", "description", "weight", "rank"],
        relations.iter().map(|&r| {
            let mut row = super::local::relationship_row(&g, r);
            row.push(format!("{}", g.weight[r]));
            row.push(g.combined_degree[r].to_string());
            row
        }),
        budgets.relations,
        &count,
    );
    let used_entities = &entities[..entity_table.rows.len()];
    let used_relations = &relations[..relation_table.rows.len()];

    // Sources: text units of the entities and relationships in context (and,
    // for mix, the closest text units), interleaved, at most chunk_top_k.
    let entity_units: Vec<&[u32]> = used_entities.iter().map(|&e| g.entity_units[e].as_slice()).collect();
    let relation_units: Vec<&[u32]> = used_relations.iter().map(|&r| g.rel_units[r].as_slice()).collect();
    let unit_ids = |units: Vec<u32>| units.into_iter().map(|u| g.unit_id(u).to_string()).collect::<Vec<String>>();
    let mut lists = Vec::new();
    if let Some(i) = query_at {
        let tv = run.vectors(Field::TextUnitText)?;
        let n = budgets.chunks.min(index.text_units()?.hrid.len());
        lists.push(run.search(&tv, &vectors[i], n, None)?.into_iter().map(|(id, _)| id).collect());
    }
    lists.push(unit_ids(rank_text_units(&entity_units, &relation_units)));
    lists.push(unit_ids(rank_text_units(&relation_units, &[])));
    let mut chunk_ids = round_robin(&lists);
    chunk_ids.truncate(budgets.chunks);

    let used = used + entity_table.tokens + relation_table.tokens;
    let chunk_budget = budgets.total.saturating_sub(used);
    let sources = if chunk_ids.is_empty() || chunk_budget == 0 {
        PackedTable::default()
    } else {
        let units = index.text_units()?;
        let rows = chunk_ids.iter().filter_map(|id| units.by_id.get(id).copied());
        reranked_sources(run, &units, rows, chunk_budget, &count)?
    };

    let context = join_parts([
        keyword_note.as_deref().unwrap_or(""),
        entity_table.text.as_str(),
        relation_table.text.as_str(),
        sources.text.as_str(),
    ]);
    let records = ContextRecords {
        entities: Some(records::entities(&entity_table)),
        relationships: Some(records::relationships(&relation_table)),
        sources: Some(records::sources(&sources)),
        method: MethodRecords::Keyword { keywords: keywords_record },
        ..ContextRecords::default()
    };
    finish(run, &prompt, history, context, records)
}

/// The outcome of a built context: the context alone in retrieval-only
/// mode, else one answer with the keyword prompt.
fn finish(
    run: &Run,
    prompt: &PromptTemplate,
    history: String,
    context: String,
    records: ContextRecords,
) -> anyhow::Result<Outcome> {
    let context_ms = run.context_ready();
    if run.retrieval_only() {
        return Ok(Outcome { answer: None, context, records, context_ms });
    }
    let system = render(
        prompt,
        &[
            ("response_type", json!(run.req.response_type)),
            ("context_data", json!(context)),
            ("history", Value::String(history)),
        ],
    )?;
    let answer = run.chat(&run.messages(system, &run.req.question))?;
    Ok(Outcome { answer: Some(answer), context, records, context_ms })
}
