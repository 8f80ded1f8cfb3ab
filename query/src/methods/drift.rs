//! GraphRAG DRIFT search, run as GraphRAG 3.3 runs it:
//! 1. Query expansion (HyDE): the chat model writes a hypothetical answer to
//!    the question shaped like one of the community reports
//!    (prompts/drift_query_expansion.txt); its embedding ranks the reports.
//! 2. Primer: the `drift_k_followups` reports closest to it, split into
//!    `primer_folds` parallel calls (prompts/drift_primer.txt), each giving an
//!    intermediate answer, a score and follow-up questions.
//! 3. `n_depth` rounds: up to `drift_k_followups` of the follow-ups not asked
//!    yet each get a local search (`drift_search.prompt`, which receives the
//!    question as `global_query` and `drift_k_followups` as `followups`) that
//!    answers, scores and proposes more follow-ups.
//! 4. Reduce: the primer's and the follow-ups' answers, best scores first
//!    within `data_max_tokens`, in one final call (`drift_search.reduce_prompt`).
//!
//! Every prompt is loaded and checked for its placeholders before the first
//! call. graphrag-rs departures, so that a rerun asks the same questions and
//! hits the cache: the report imitated by the expansion is picked by a hash
//! of the question, and each round's follow-ups are drawn in an order
//! shuffled with the question as seed (GraphRAG draws both at random); a
//! follow-up whose answer is unusable is skipped and counted, not asked again.

use std::collections::HashSet;

use graphrag_engine::llm::answer::{self, AnswerCheck};
use graphrag_engine::llm::{CallOptions, Message};
use graphrag_engine::prompts::PromptTemplate;
use graphrag_engine::settings::DriftSearchConfig;
use serde_json::{json, Value};

use super::local::{self, LocalParams};
use crate::context::{join_parts, pack_table, reports_up_to_level, shuffled, MemoCounter, PackedTable};
use crate::data::{Field, Reports};
use crate::records::{self, ContextRecords, FollowUpRecord, MethodRecords, ReportRecord};
use crate::{render, Outcome, Run, DEFAULT_RESPONSE_TYPE, NO_DATA_ANSWER};

const EXPANSION_VARS: [&str; 2] = ["query", "template"];
const PRIMER_VARS: [&str; 2] = ["query", "community_reports"];
const LOCAL_VARS: [&str; 4] = ["response_type", "context_data", "global_query", "followups"];
const REDUCE_VARS: [&str; 2] = ["response_type", "context_data"];
const REPORT_HEADER: [&str; 3] = ["id", "title", "content"];

/// The four prompts of a DRIFT search, loaded and checked up front.
struct Prompts {
    expansion: PromptTemplate,
    primer: PromptTemplate,
    local: PromptTemplate,
    reduce: PromptTemplate,
}

impl Prompts {
    fn load(run: &Run, ds: &DriftSearchConfig) -> anyhow::Result<Prompts> {
        Ok(Prompts {
            expansion: run.checked_fixed_prompt("drift_query_expansion", "DRIFT's query expansion", &EXPANSION_VARS)?,
            primer: run.checked_fixed_prompt("drift_primer", "DRIFT's primer", &PRIMER_VARS)?,
            local: run.checked_prompt("drift_search.prompt", &ds.prompt, "DRIFT's follow-up step", &LOCAL_VARS)?,
            reduce: run.checked_prompt(
                "drift_search.reduce_prompt",
                &ds.reduce_prompt,
                "DRIFT's reduce step",
                &REDUCE_VARS,
            )?,
        })
    }
}

/// One question of the search: the user's (answered by the primer) or a
/// follow-up.
struct Action {
    query: String,
    answer: Option<String>,
    score: Option<f64>,
    /// Asked and answered, or asked and skipped.
    asked: bool,
}

/// The questions of a search, each once (compared without case).
#[derive(Default)]
struct Actions {
    list: Vec<Action>,
    known: HashSet<String>,
}

impl Actions {
    fn add(&mut self, query: &str) -> Option<usize> {
        let query = query.trim();
        if query.is_empty() || !self.known.insert(query.to_lowercase()) {
            return None;
        }
        self.list.push(Action { query: query.to_string(), answer: None, score: None, asked: false });
        Some(self.list.len() - 1)
    }

    fn add_follow_ups(&mut self, answer: &Value) {
        for q in super::strings_of(answer.get("follow_up_queries")) {
            self.add(&q);
        }
    }

    fn pending(&self) -> Vec<usize> {
        (0..self.list.len()).filter(|&i| !self.list[i].asked).collect()
    }
}

pub fn run(run: &Run) -> anyhow::Result<Outcome> {
    let ds = &run.s().drift_search;
    check(ds)?;
    let prompts = if run.retrieval_only() { None } else { Some(Prompts::load(run, ds)?) };
    let question = &run.req.question;
    let memo = MemoCounter::default();
    let count = |t: &str| memo.count(t);
    let index = run.index();
    let reports = index.reports()?;
    let level = super::community_level(run, &reports)?;
    let selected = reports_up_to_level(&reports.level, level);
    let report_vectors = run.vectors(Field::CommunityFullContent)?;
    let allowed: HashSet<usize> = selected.iter().filter_map(|&r| report_vectors.row_of(&reports.id[r])).collect();
    let k = ds.drift_k_followups as usize;

    // 1. The expanded query picks the primer's reports.
    let expanded = match &prompts {
        Some(p) if !selected.is_empty() => Some(expand_query(run, &p.expansion, &reports, &selected)?),
        _ => None,
    };
    // Without a model (no expansion) this is the question's own embedding.
    let query_vector = run.embed_one(expanded.as_deref().unwrap_or(question))?;
    let hits = run.search(&report_vectors, &query_vector, k, Some(&allowed))?;
    let top: Vec<usize> = hits.iter().filter_map(|(id, _)| reports.by_id.get(id).copied()).collect();
    // A request's context budget (eval's `--budget`) is shared by the primer's
    // reports and the local contexts in the proportion of their settings:
    // the primer keeps the closest reports that fit its share.
    let top = match run.req.max_context_tokens {
        Some(budget) => {
            let total = (ds.data_max_tokens + ds.local_search_max_data_tokens).max(1);
            let share = (budget as f64 * ds.data_max_tokens as f64 / total as f64) as usize;
            let fitting =
                pack_table("Reports", &REPORT_HEADER, top.iter().map(|&r| report_row(&reports, r)), share, &count);
            top[..fitting.rows.len()].to_vec()
        }
        None => top,
    };
    let fold_lists = folds(&top, ds.primer_folds as usize);
    let folds: Vec<PackedTable> = fold_lists
        .into_iter()
        .map(|fold| {
            let rows = fold.iter().map(|&r| report_row(&reports, r));
            pack_table("Reports", &REPORT_HEADER, rows, ds.primer_llm_max_tokens, &count)
        })
        .filter(|t| !t.is_empty())
        .collect();
    let local_budget = match run.req.max_context_tokens {
        Some(budget) => budget.saturating_sub(folds.iter().map(|f| f.tokens).sum()),
        None => ds.local_search_max_data_tokens,
    };
    let primer_text = join_parts(folds.iter().map(|f| f.text.as_str()));
    let report_records: Vec<ReportRecord> = folds.iter().flat_map(records::reports).collect();
    let params = LocalParams::of_drift_search(ds);

    let Some(prompts) = prompts else {
        // No follow-up questions without a model: the primer's reports plus
        // the local context of the question itself.
        let local = local::build(run, &params, question, &query_vector, local_budget, &[])?;
        let context = join_parts([primer_text.as_str(), local.text.as_str()]);
        let records =
            ContextRecords { method: MethodRecords::DriftPrimer { primer_reports: report_records }, ..local.records() };
        let context_ms = run.context_ready();
        return Ok(Outcome { answer: None, context, records, context_ms });
    };
    let context_ms = run.context_ready();

    // 2. Primer: one call per fold, in parallel.
    let mut actions = Actions::default();
    actions.add(question);
    let calls = folds
        .iter()
        .map(|fold| {
            let system =
                render(&prompts.primer, &[("query", json!(question)), ("community_reports", json!(fold.text))])?;
            Ok(run.messages(system, question))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut primer_answers = Vec::new();
    let mut primer_scores = Vec::new();
    let mut first_error = None;
    let check =
        needs_text("intermediate_answer", "the primer's JSON (`intermediate_answer`, `score`, `follow_up_queries`)");
    let results = run.chat_json_calls(calls, &check, &CallOptions::default(), ds.concurrency as usize)?;
    for (i, r) in results.into_iter().enumerate() {
        let what = format!("DRIFT primer fold {}", i + 1);
        match r {
            Ok(v) => {
                primer_answers.push(super::text_of(v.get("intermediate_answer")));
                primer_scores.extend(super::number_of(v.get("score")));
                actions.add_follow_ups(&v);
            }
            Err(e) if super::is_bad_json(&e) => {
                run.skip(&what, e.to_string());
                first_error.get_or_insert(e);
            }
            Err(e) => return Err(anyhow::Error::from(e).context("DRIFT primer call failed")),
        }
    }
    if let (true, Some(e)) = (primer_answers.is_empty(), first_error) {
        return Err(anyhow::Error::from(e).context(format!("every DRIFT primer call failed ({} folds)", folds.len())));
    }
    if let Some(primer) = actions.list.first_mut() {
        primer.asked = true;
        if !primer_answers.is_empty() {
            primer.answer = Some(primer_answers.join("\n\n"));
            primer.score =
                (!primer_scores.is_empty()).then(|| primer_scores.iter().sum::<f64>() / primer_scores.len() as f64);
        }
    }
    if actions.list.len() == 1 && ds.n_depth > 0 {
        run.notice("DRIFT: the primer proposed no follow-up questions; answering from the primer alone".to_string());
    }

    // 3. Follow-up rounds.
    let local_options = CallOptions {
        temperature: Some(ds.local_search_temperature),
        top_p: Some(ds.local_search_top_p),
        max_tokens: ds.local_search_llm_max_gen_completion_tokens.or(ds.local_search_llm_max_gen_tokens),
    };
    for round in 0..ds.n_depth {
        let pending = actions.pending();
        if pending.is_empty() {
            break;
        }
        let chosen: Vec<usize> =
            shuffled(pending.len(), seed(question, round)).into_iter().take(k).map(|i| pending[i]).collect();
        let queries: Vec<String> = chosen.iter().map(|&i| actions.list[i].query.clone()).collect();
        let vectors = run.embed(&queries)?;
        let mut calls = Vec::with_capacity(queries.len());
        for (q, v) in queries.iter().zip(&vectors) {
            let local = local::build(run, &params, q, v, local_budget, &[])?;
            let system = render(
                &prompts.local,
                &[
                    // GraphRAG asks its follow-up steps for multiple paragraphs;
                    // the user's response type shapes the final answer.
                    ("response_type", json!(DEFAULT_RESPONSE_TYPE)),
                    ("context_data", json!(local.text)),
                    ("global_query", json!(question)),
                    ("followups", json!(k)),
                ],
            )?;
            calls.push(run.messages(system, q));
        }
        let check = needs_text("response", "the step's JSON (`response`, `score`, `follow_up_queries`)");
        let results = run.chat_json_calls(calls, &check, &local_options, ds.concurrency as usize)?;
        for (&i, r) in chosen.iter().zip(results) {
            actions.list[i].asked = true;
            match r {
                Ok(v) => {
                    actions.list[i].answer = Some(super::text_of(v.get("response")));
                    actions.list[i].score = super::number_of(v.get("score"));
                    actions.add_follow_ups(&v);
                }
                Err(e) if super::is_bad_json(&e) => run.skip("DRIFT follow-up step", e.to_string()),
                Err(e) => return Err(anyhow::Error::from(e).context("DRIFT follow-up call failed")),
            }
        }
    }

    // 4. Reduce: the primer's answer first, then the follow-ups' by score.
    let mut answered: Vec<usize> = (0..actions.list.len()).filter(|&i| actions.list[i].answer.is_some()).collect();
    let rank = |i: usize| (i == 0, actions.list[i].score.unwrap_or(f64::NEG_INFINITY));
    answered.sort_by(|&a, &b| rank(b).partial_cmp(&rank(a)).unwrap_or(std::cmp::Ordering::Equal));
    let mut parts = Vec::new();
    let mut tokens = 0;
    for (i, a) in answered.iter().map(|&i| &actions.list[i]).enumerate() {
        let score = a.score.map_or("none".to_string(), |s| s.to_string());
        let part = format!(
            "----Answer {} (question: {}; score: {score})----\n{}",
            i + 1,
            a.query,
            a.answer.as_deref().unwrap_or_default()
        );
        let t = count(&part);
        if tokens + t > ds.data_max_tokens {
            break;
        }
        tokens += t;
        parts.push(part);
    }
    let reduce_data = parts.join("\n\n");
    let context = join_parts([primer_text.as_str(), reduce_data.as_str()]);
    let follow_ups = actions.list[1..]
        .iter()
        .map(|a| FollowUpRecord {
            query: a.query.clone(),
            score: a.score,
            answered: a.answer.is_some(),
            asked: a.asked,
        })
        .collect();
    let records = ContextRecords {
        reports: Some(report_records),
        method: MethodRecords::Drift {
            expanded_query: expanded,
            follow_ups,
            intermediate_answers: parts.len(),
            community_level: level,
        },
        ..ContextRecords::default()
    };
    if parts.is_empty() {
        return Ok(Outcome { answer: Some(NO_DATA_ANSWER.to_string()), context, records, context_ms });
    }
    let system = render(
        &prompts.reduce,
        &[("response_type", json!(run.req.response_type)), ("context_data", json!(reduce_data))],
    )?;
    let reduce_options = CallOptions {
        temperature: Some(ds.reduce_temperature),
        top_p: None,
        max_tokens: ds.reduce_max_completion_tokens.or(ds.reduce_max_tokens),
    };
    let answer = run.chat_with(&run.messages(system, question), &reduce_options)?;
    Ok(Outcome { answer: Some(answer), context, records, context_ms })
}

/// A JSON answer whose `key` holds a non-empty text (checked before the
/// answer is used or cached; an answer without it is asked again).
fn needs_text(
    key: &'static str,
    expected: &'static str,
) -> AnswerCheck<impl Fn(&str) -> Result<(Value, bool), String>> {
    answer::json(expected, move |v: &Value| {
        if super::text_of(v.get(key)).trim().is_empty() {
            return Err(format!("it has no `{key}`"));
        }
        Ok(v.clone())
    })
}

/// Settings DRIFT cannot run with, named before anything is spent.
fn check(ds: &DriftSearchConfig) -> anyhow::Result<()> {
    for (key, value) in [
        ("drift_k_followups", ds.drift_k_followups),
        ("primer_folds", ds.primer_folds),
        ("concurrency", ds.concurrency),
        ("local_search_n", ds.local_search_n),
    ] {
        if value == 0 {
            anyhow::bail!("drift_search.{key} is 0: it must be at least 1");
        }
    }
    Ok(())
}

/// The hypothetical answer whose embedding ranks the reports: the question
/// answered in the shape of one of the selected reports (GraphRAG's HyDE
/// step). An unusable (empty) answer falls back to the question itself.
fn expand_query(run: &Run, prompt: &PromptTemplate, reports: &Reports, selected: &[usize]) -> anyhow::Result<String> {
    let question = &run.req.question;
    let template = selected[(seed(question, u32::MAX) % selected.len() as u64) as usize];
    let text = render(prompt, &[("query", json!(question)), ("template", json!(reports.full_content[template]))])?;
    match run.complete(&[Message::user(text)]) {
        Ok(answer) => Ok(answer),
        Err(e) if super::is_bad_json(&e) => {
            // GraphRAG searches with the question itself when the expansion is empty.
            run.skip("DRIFT query expansion", format!("{e}; searching with the question itself"));
            Ok(question.clone())
        }
        Err(e) => Err(anyhow::Error::from(e).context("DRIFT query expansion failed")),
    }
}

fn report_row(reports: &Reports, r: usize) -> Vec<String> {
    vec![reports.hrid[r].to_string(), reports.title[r].clone(), reports.full_content[r].clone()]
}

/// `items` in `n` consecutive folds whose sizes differ by at most one, the
/// larger first (numpy's `array_split`, as GraphRAG splits the primer).
fn folds<T: Copy>(items: &[T], n: usize) -> Vec<Vec<T>> {
    let n = n.max(1);
    let (size, extra) = (items.len() / n, items.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    for f in 0..n {
        let end = start + size + usize::from(f < extra);
        out.push(items[start..end].to_vec());
        start = end;
    }
    out
}

/// A seed from the question (and a round), the same on every run.
fn seed(question: &str, round: u32) -> u64 {
    let hex = graphrag_operations::ids::sha256_hex(&[question.as_bytes(), &round.to_le_bytes()]);
    u64::from_str_radix(&hex[..16], 16).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_split_like_numpy() {
        assert_eq!(folds(&[1, 2, 3, 4, 5, 6, 7], 3), vec![vec![1, 2, 3], vec![4, 5], vec![6, 7]]);
        assert_eq!(folds(&[1, 2], 5), vec![vec![1], vec![2], vec![], vec![], vec![]]);
        assert_eq!(folds::<u8>(&[], 1), vec![Vec::<u8>::new()]);
    }

    #[test]
    fn follow_ups_are_kept_once_without_case() {
        let mut a = Actions::default();
        assert_eq!(a.add("Who is Scrooge?"), Some(0));
        a.add_follow_ups(&json!({"follow_up_queries": ["who is scrooge?", " What is Marley? ", "", "Who is Tim?"]}));
        let queries: Vec<&str> = a.list.iter().map(|x| x.query.as_str()).collect();
        assert_eq!(queries, ["Who is Scrooge?", "What is Marley?", "Who is Tim?"]);
        a.list[0].asked = true;
        assert_eq!(a.pending(), vec![1, 2]);
    }

    #[test]
    fn seeds_are_stable_and_differ_by_round() {
        assert_eq!(seed("q", 0), seed("q", 0));
        assert_ne!(seed("q", 0), seed("q", 1));
    }
}
