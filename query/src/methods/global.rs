//! GraphRAG global search: the community reports of every level up to the
//! requested one (or chosen by LLM relevance ratings, top-down), with
//! GraphRAG's columns (`id|title|occurrence weight|content|rank`), packed
//! into batches, one map call per batch in parallel (JSON key points with
//! scores), the surviving points ranked and packed into one reduce call.

use std::collections::{BTreeSet, HashMap, HashSet};

use graphrag_engine::llm::LlmError;
use serde_json::{json, Value};

use crate::context::{
    history_table, join_parts, pack_batches, pack_points, pack_table, parse_points, reports_up_to_level, shuffled,
    MemoCounter, PackedTable, Point,
};
use crate::data::Reports;
use crate::records::{self, ContextRecords, MethodRecords, PointRecord};
use crate::{render, Outcome, Run, NO_DATA_ANSWER};

const HEADER: [&str; 5] = ["id", "title", "occurrence weight", "content", "rank"];
const MAP_VARS: [&str; 2] = ["context_data", "max_length"];
const REDUCE_VARS: [&str; 3] = ["report_data", "response_type", "max_length"];

/// GraphRAG's `random_state` for shuffling reports into batches.
const SHUFFLE_SEED: u64 = 86;

pub fn run(run: &Run) -> anyhow::Result<Outcome> {
    let gs = &run.s().global_search;
    let question = &run.req.question;
    let memo = MemoCounter::default();
    let count = |t: &str| memo.count(t);
    // Prompts first: a placeholder no step fills is an error before any call.
    let prompts = if run.retrieval_only() {
        None
    } else {
        let map =
            run.checked_prompt("global_search.map_prompt", &gs.map_prompt, "global search's map step", &MAP_VARS)?;
        let reduce = run.checked_prompt(
            "global_search.reduce_prompt",
            &gs.reduce_prompt,
            "global search's reduce step",
            &REDUCE_VARS,
        )?;
        Some((map, reduce))
    };
    let reports = run.index().reports()?;
    let level = super::community_level(run, &reports)?;

    let (selected, selection) = if run.req.dynamic_community_selection && !run.retrieval_only() {
        (dynamic_selection(run, &reports)?, "dynamic".to_string())
    } else if run.req.dynamic_community_selection {
        let how = format!("levels 0 to {level} (dynamic community selection needs a chat model)");
        (reports_up_to_level(&reports.level, level), how)
    } else {
        (reports_up_to_level(&reports.level, level), format!("levels 0 to {level}"))
    };
    let weights = occurrence_weights(run, &reports, &selected)?;

    // Batches of global_search.max_context_tokens (GraphRAG's context builder
    // budget), reports shuffled with a fixed seed so every batch mixes
    // high- and low-ranked reports, as GraphRAG does.
    let history = history_table(
        &run.req.history,
        run.s().local_search.conversation_history_max_turns as usize,
        true,
        gs.max_context_tokens,
        &count,
    );
    let order: Vec<usize> = shuffled(selected.len(), SHUFFLE_SEED).into_iter().map(|i| selected[i]).collect();
    let rows = order.iter().map(|&r| {
        vec![
            reports.hrid[r].to_string(),
            reports.title[r].clone(),
            python_float(weights.get(&r).copied().unwrap_or(0.0)),
            reports.full_content[r].clone(),
            python_float(reports.rank[r]),
        ]
    });
    let batches: Vec<PackedTable> =
        pack_batches("Reports", &HEADER, rows, gs.max_context_tokens.saturating_sub(history.tokens), &count)
            .into_iter()
            .map(|b| by_weight_and_rank(b, &count))
            .collect();
    let batch_texts: Vec<String> =
        batches.iter().map(|b| join_parts([history.text.as_str(), b.text.as_str()])).collect();
    let context = batch_texts.join("\n\n");
    let mut records = ContextRecords {
        reports: Some(batches.iter().flat_map(records::reports).collect()),
        method: MethodRecords::Global {
            batches: batches.len(),
            community_selection: selection,
            community_level: level,
            points: None,
        },
        ..ContextRecords::default()
    };
    let context_ms = run.context_ready();
    if run.retrieval_only() {
        return Ok(Outcome { answer: None, context, records, context_ms });
    }
    if batches.is_empty() {
        return Ok(Outcome { answer: Some(NO_DATA_ANSWER.to_string()), context, records, context_ms });
    }

    // Map.
    let (map_prompt, reduce_prompt) = prompts.expect("a chat model answers");
    let calls = batch_texts
        .iter()
        .map(|b| {
            let system = render(&map_prompt, &[("context_data", json!(b)), ("max_length", json!(gs.map_max_length))])?;
            Ok(run.messages(system, question))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let check = graphrag_engine::llm::answer::json("a JSON object with a `points` list, no other text", |v: &Value| {
        v.get("points")
            .and_then(Value::as_array)
            .map(|_| v.clone())
            .ok_or_else(|| "it has no `points` list".to_string())
    });
    let results = run.chat_json_all_with(calls, &check)?;
    let total = results.len();
    let mut points: Vec<Point> = Vec::new();
    // Calls without a usable answer: skipped while others answered, the
    // query's error when none did (no answer is not "no relevant data").
    let mut failed: Vec<(String, Option<LlmError>)> = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        let what = format!("global search map call {} of {total}", i + 1);
        let why = match r {
            Ok(v) => match parse_points(&v, i + 1) {
                Some(p) => {
                    points.extend(p);
                    continue;
                }
                None => ("the answer has no `points` list".to_string(), None),
            },
            Err(e) => (super::with_causes(&e), Some(e)),
        };
        run.skip(&what, &why.0);
        failed.push((format!("{what}: {}", why.0), why.1));
    }
    if failed.len() == total {
        return Err(every_call_failed("map", failed));
    }

    // Reduce.
    let (report_data, used) = pack_points(points, gs.data_max_tokens, &count);
    if let MethodRecords::Global { points, .. } = &mut records.method {
        let used =
            used.iter().map(|p| PointRecord { analyst: p.analyst, score: p.score, description: p.description.clone() });
        *points = Some(used.collect());
    }
    if used.is_empty() {
        return Ok(Outcome { answer: Some(NO_DATA_ANSWER.to_string()), context, records, context_ms });
    }
    let system = render(
        &reduce_prompt,
        &[
            ("report_data", json!(report_data)),
            ("response_type", json!(run.req.response_type)),
            ("max_length", json!(gs.reduce_max_length)),
        ],
    )?;
    let answer = run.chat(&run.messages(system, question))?;
    Ok(Outcome { answer: Some(answer), context, records, context_ms })
}

/// The error of a step whose every model call (`failed`: what each was and
/// why it failed) went without a usable answer: an interruption stays one
/// (the caller exits as after Ctrl-C), anything else names every call.
fn every_call_failed(step: &str, failed: Vec<(String, Option<LlmError>)>) -> anyhow::Error {
    let n = failed.len();
    let mut interrupted = None;
    let mut named = Vec::with_capacity(n);
    for (what, error) in failed {
        match error {
            Some(e @ LlmError::Interrupted(_)) => interrupted = Some(e),
            _ => named.push(what),
        }
    }
    if let Some(e) = interrupted {
        return e.into();
    }
    // The first few say why; the same cause usually fails them all.
    const SHOWN: usize = 10;
    let more = if named.len() > SHOWN { format!("; and {} more", named.len() - SHOWN) } else { String::new() };
    named.truncate(SHOWN);
    anyhow::anyhow!(
        "global search failed: none of its {n} {step} call(s) got a usable answer from the chat model, so there is nothing to answer from ({}{more})",
        named.join("; ")
    )
}

/// GraphRAG's `occurrence weight` of each selected report: how many distinct
/// text units its community's entities come from, divided by the largest
/// such count among the selected reports. Empty without entities or
/// communities (GraphRAG then leaves the column empty too).
fn occurrence_weights(run: &Run, reports: &Reports, selected: &[usize]) -> anyhow::Result<HashMap<usize, f64>> {
    let index = run.index();
    if selected.is_empty() || !index.has_table("entities") || !index.has_table("communities") {
        return Ok(HashMap::new());
    }
    let graph = index.graph()?;
    let communities = index.communities()?;
    let wanted: HashMap<i64, usize> = selected.iter().map(|&r| (reports.community[r], r)).collect();
    let mut units: HashMap<usize, HashSet<u32>> = HashMap::new();
    for (entity, rows) in &communities.of_entity {
        let Some(&e) = graph.entity_by_id.get(entity) else { continue };
        for &c in rows {
            if let Some(&r) = wanted.get(&communities.community[c]) {
                units.entry(r).or_default().extend(graph.entity_units[e].iter().copied());
            }
        }
    }
    let max = units.values().map(HashSet::len).max().unwrap_or(0).max(1) as f64;
    Ok(selected.iter().map(|&r| (r, units.get(&r).map_or(0, HashSet::len) as f64 / max)).collect())
}

/// A batch's rows by occurrence weight, then rank, both descending (stable),
/// as GraphRAG orders each batch.
fn by_weight_and_rank(batch: PackedTable, count: &dyn Fn(&str) -> usize) -> PackedTable {
    let number = |row: &[String], i: usize| row.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    let mut rows = batch.rows;
    rows.sort_by(|a, b| {
        (number(b, 2), number(b, 4)).partial_cmp(&(number(a, 2), number(a, 4))).unwrap_or(std::cmp::Ordering::Equal)
    });
    pack_table(&batch.name, &HEADER, rows, usize::MAX, count)
}

/// A number as Python's `str(float)` writes it (`8.0`, `0.25`): GraphRAG's
/// report tables show ranks and weights that way.
fn python_float(x: f64) -> String {
    let s = format!("{x}");
    if x.is_finite() && !s.contains(['.', 'e']) {
        format!("{s}.0")
    } else {
        s
    }
}

/// GraphRAG's dynamic community selection: rate the level-0 reports with the
/// chat model (rate_community prompt, `dynamic_search_num_repeats` votes);
/// a report rated ≥ `dynamic_search_threshold` is kept and its children are
/// rated next (the parent dropped unless `dynamic_search_keep_parent`), down
/// to `dynamic_search_max_level`. When nothing at a level is relevant, the
/// next level is rated in full.
fn dynamic_selection(run: &Run, reports: &Reports) -> anyhow::Result<Vec<usize>> {
    let gs = &run.s().global_search;
    let prompt = run.fixed_prompt("rate_community")?;
    let max_level = i64::from(gs.dynamic_search_max_level);
    let mut children: HashMap<i64, Vec<usize>> = HashMap::new();
    for r in 0..reports.len() {
        if reports.parent[r] >= 0 {
            children.entry(reports.parent[r]).or_default().push(r);
        }
    }
    let at_level = |l: i64| (0..reports.len()).filter(|&r| reports.level[r] == l).collect::<Vec<_>>();
    let mut queue = at_level(0);
    let mut relevant: BTreeSet<usize> = BTreeSet::new();
    let mut level = 0;
    let repeats = gs.dynamic_search_num_repeats.max(1) as usize;
    let mut rated = 0;
    let mut failed: Vec<(String, Option<LlmError>)> = Vec::new();
    while !queue.is_empty() {
        let mut calls = Vec::new();
        for &r in &queue {
            let description =
                if gs.dynamic_search_use_summary { &reports.summary[r] } else { &reports.full_content[r] };
            let system = render(&prompt, &[("description", json!(description)), ("query", json!(run.req.question))])?;
            for _ in 0..repeats {
                calls.push(run.messages(system.clone(), &run.req.question));
            }
        }
        let mut results = run.chat_json_all(calls)?;
        let mut next = Vec::new();
        for &r in &queue {
            let mut votes: HashMap<i64, usize> = HashMap::new();
            for res in results.drain(..repeats) {
                let what = format!("community rating of community {}", reports.community[r]);
                let (why, error) = match res {
                    Ok(v) => match super::number_of(v.get("rating")) {
                        Some(x) => {
                            *votes.entry(x.round() as i64).or_default() += 1;
                            rated += 1;
                            continue;
                        }
                        None => ("the answer has no `rating`".to_string(), None),
                    },
                    Err(e) => (super::with_causes(&e), Some(e)),
                };
                run.skip(&what, &why);
                failed.push((format!("{what}: {why}"), error));
            }
            // Majority vote; ties go to the higher rating.
            let rating = votes.iter().max_by_key(|(rating, n)| (**n, **rating)).map_or(0, |(rating, _)| *rating);
            if rating >= i64::from(gs.dynamic_search_threshold) {
                relevant.insert(r);
                for &c in children.get(&reports.community[r]).into_iter().flatten() {
                    if reports.level[c] <= max_level {
                        next.push(c);
                    }
                }
                if !gs.dynamic_search_keep_parent && reports.parent[r] >= 0 {
                    if let Some(&p) = reports.by_community.get(&reports.parent[r]) {
                        relevant.remove(&p);
                    }
                }
            }
        }
        queue = next;
        level += 1;
        if queue.is_empty() && relevant.is_empty() && level <= max_level {
            queue = at_level(level);
        }
    }
    if rated == 0 && !failed.is_empty() {
        return Err(every_call_failed("community rating", failed));
    }
    Ok(relevant.into_iter().collect())
}
