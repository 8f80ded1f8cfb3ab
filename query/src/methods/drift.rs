//! GraphRAG DRIFT search, simplified: a primer over the community reports
//! closest to the question (embedded as is; GraphRAG first expands it into a
//! hypothetical answer), split into `primer_folds` parallel primer calls; then
//! up to `n_depth` rounds of local searches for the follow-up questions (at
//! most `drift_k_followups` in all, first come first served), each returning
//! an answer, a score and more follow-ups; then one reduce call over all
//! intermediate answers.

use std::collections::{HashSet, VecDeque};

use serde_json::{json, Value};

use crate::context::{join_parts, pack_table, reports_at_level, MemoCounter, PackedTable};
use crate::data::Field;
use crate::{render, Outcome, Run, NO_DATA_ANSWER};

struct Intermediate {
    query: String,
    answer: String,
    score: f64,
}

pub fn run(run: &Run) -> anyhow::Result<Outcome> {
    let ds = &run.s().drift_search;
    let question = &run.req.question;
    let memo = MemoCounter::default();
    let count = |t: &str| memo.count(t);
    let index = run.index();
    let reports = index.reports()?;
    let level = super::community_level(run, &reports)?;
    let report_vectors = run.vectors(Field::CommunityFullContent)?;
    let query = run.embed_one(question)?;

    // Primer reports: the closest reports among those of the community level.
    let allowed: HashSet<usize> = reports_at_level(&reports.level, &reports.community, &reports.parent, level)
        .into_iter()
        .filter_map(|r| report_vectors.row_of(&reports.id[r]))
        .collect();
    let k = (ds.drift_k_followups as usize).max(1);
    let hits = run.search(&report_vectors, &query, k, Some(&allowed))?;
    let top: Vec<usize> = hits.iter().filter_map(|(id, _)| reports.by_id.get(id).copied()).collect();
    let report_row =
        |r: usize| vec![reports.hrid[r].to_string(), reports.title[r].clone(), reports.full_content[r].clone()];
    // A context budget is shared by the primer reports and the local
    // contexts in the proportion of their settings.
    let (primer_budget, local_budget) = match run.req.max_context_tokens {
        None => (ds.data_max_tokens, ds.local_search_max_data_tokens),
        Some(budget) => {
            let total = (ds.data_max_tokens + ds.local_search_max_data_tokens).max(1);
            ((budget as f64 * ds.data_max_tokens as f64 / total as f64) as usize, budget)
        }
    };
    let primer_table =
        pack_table("Reports", &["id", "title", "content"], top.iter().map(|&r| report_row(r)), primer_budget, &count);
    let local_budget = match run.req.max_context_tokens {
        Some(_) => local_budget.saturating_sub(primer_table.tokens),
        None => local_budget,
    };

    if run.retrieval_only() {
        // No follow-up questions without a model: the primer reports plus the
        // local context of the question itself.
        let local = super::local::build(run, question, &query, local_budget, &run.req.history)?;
        let context = join_parts([primer_table.text.as_str(), local.text.as_str()]);
        let mut records = local.records();
        records["primer_reports"] = primer_table.records();
        let context_ms = run.context_ready();
        return Ok(Outcome { answer: None, context, records, context_ms });
    }
    let context_ms = run.context_ready();

    // Primer: folds of the top reports, in parallel.
    let used_reports = &top[..primer_table.rows.len()];
    let folds = (ds.primer_folds as usize).clamp(1, used_reports.len().max(1));
    let primer_prompt = run.fixed_prompt("drift_primer")?;
    let mut calls = Vec::new();
    for f in 0..folds {
        let (start, end) = (f * used_reports.len() / folds, (f + 1) * used_reports.len() / folds);
        if start == end {
            continue;
        }
        let table: PackedTable = pack_table(
            "Reports",
            &["id", "title", "content"],
            used_reports[start..end].iter().map(|&r| report_row(r)),
            usize::MAX,
            &count,
        );
        let system = render(&primer_prompt, &[("query", json!(question)), ("community_reports", json!(table.text))])?;
        calls.push(run.messages(system, question));
    }
    let mut answers: Vec<Intermediate> = Vec::new();
    let mut queue: VecDeque<String> = VecDeque::new();
    let mut asked: HashSet<String> = HashSet::new();
    asked.insert(question.trim().to_lowercase());
    let mut enqueue = |queue: &mut VecDeque<String>, v: &Value| {
        for q in super::strings_of(v.get("follow_up_queries")) {
            if asked.insert(q.to_lowercase()) {
                queue.push_back(q);
            }
        }
    };
    for (i, r) in run.chat_json_all(calls)?.into_iter().enumerate() {
        match r {
            Ok(v) => {
                let answer = super::text_of(v.get("intermediate_answer"));
                if answer.trim().is_empty() {
                    run.skip(&format!("DRIFT primer fold {}", i + 1), "the answer has no `intermediate_answer`");
                    continue;
                }
                let score = super::number_of(v.get("score")).unwrap_or(0.0);
                answers.push(Intermediate { query: question.clone(), answer, score });
                enqueue(&mut queue, &v);
            }
            Err(e) if super::is_bad_json(&e) => run.skip(&format!("DRIFT primer fold {}", i + 1), format!("{e:#}")),
            Err(e) => return Err(e.context("DRIFT primer call failed")),
        }
    }

    // Follow-up local searches.
    let local_prompt = run.prompt("drift_search.prompt", &ds.prompt)?;
    let mut budget = ds.drift_k_followups as usize;
    let mut followups: Vec<Value> = Vec::new();
    for _depth in 0..ds.n_depth {
        let n = budget.min(queue.len());
        if n == 0 {
            break;
        }
        budget -= n;
        let round: Vec<String> = queue.drain(..n).collect();
        let vectors = run.embed(&round)?;
        let mut calls = Vec::new();
        for (q, v) in round.iter().zip(&vectors) {
            let local = super::local::build(run, q, v, local_budget, &[])?;
            let system = render(
                &local_prompt,
                &[
                    ("response_type", json!(run.req.response_type)),
                    ("context_data", json!(local.text)),
                    ("global_query", json!(question)),
                ],
            )?;
            calls.push(run.messages(system, q));
        }
        for (q, r) in round.iter().zip(run.chat_json_all(calls)?) {
            match r {
                Ok(v) => {
                    let answer = super::text_of(v.get("response"));
                    let score = super::number_of(v.get("score")).unwrap_or(0.0);
                    followups.push(json!({"query": q, "score": score}));
                    if answer.trim().is_empty() {
                        run.skip("DRIFT local step", "the answer has no `response`");
                        continue;
                    }
                    answers.push(Intermediate { query: q.clone(), answer, score });
                    enqueue(&mut queue, &v);
                }
                Err(e) if super::is_bad_json(&e) => run.skip("DRIFT local step", format!("{e:#}")),
                Err(e) => return Err(e.context("DRIFT local search call failed")),
            }
        }
    }

    // Reduce: primer answers first, then the local answers by score.
    let primer_count = answers.iter().take_while(|a| a.query == *question).count();
    answers[primer_count..].sort_by(|a, b| b.score.partial_cmp(&a.score).unwrap_or(std::cmp::Ordering::Equal));
    let mut parts = Vec::new();
    let mut tokens = 0;
    for (i, a) in answers.iter().enumerate() {
        let part = format!("----Answer {} (question: {}; score: {})----\n{}", i + 1, a.query, a.score, a.answer);
        let t = count(&part);
        if tokens + t > ds.data_max_tokens {
            break;
        }
        tokens += t;
        parts.push(part);
    }
    let reduce_data = parts.join("\n\n");
    let context = join_parts([primer_table.text.as_str(), reduce_data.as_str()]);
    let records = json!({
        "reports": primer_table.records(),
        "follow_ups": followups,
        "intermediate_answers": parts.len(),
    });
    if parts.is_empty() {
        return Ok(Outcome { answer: Some(NO_DATA_ANSWER.to_string()), context, records, context_ms });
    }
    let reduce_prompt = run.prompt("drift_search.reduce_prompt", &ds.reduce_prompt)?;
    let system = render(
        &reduce_prompt,
        &[("response_type", json!(run.req.response_type)), ("context_data", json!(reduce_data))],
    )?;
    let answer = run.chat(&run.messages(system, question))?;
    Ok(Outcome { answer: Some(answer), context, records, context_ms })
}
