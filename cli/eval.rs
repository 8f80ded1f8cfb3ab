//! `graphrag-rs eval`: retrieval recall (and optionally answer EM / F1) of
//! query methods on a question set with gold passages or gold documents, or
//! (`--gold answer`) the gold answer's terms.
//! The scoring is `graphrag_operations::eval_score`; this module runs the
//! queries, aggregates per method, k and question type, and reports.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use graphrag_engine::settings::Settings;
use graphrag_operations::eval_score::{answer_terms_found, document_found, exact_match, token_f1, ContextText};
use graphrag_query::records::SourceRecord;
use graphrag_query::{Method, QueryEngine, QueryRequest};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub struct EvalArgs {
    pub root: PathBuf,
    pub questions: PathBuf,
    /// Comma-separated methods.
    pub methods: String,
    /// Comma-separated k values; `None`: the settings' own.
    pub k: Option<String>,
    /// Comma-separated context budgets in tokens; `None`: the settings' own.
    pub budgets: Option<String>,
    pub output: Option<PathBuf>,
    pub limit: Option<usize>,
    pub answers: bool,
    pub gold: GoldMode,
    pub verbosity: i8,
}

/// What a retrieved context is scored against (`--gold`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GoldMode {
    /// Gold passages, else gold documents; questions with neither are not scored.
    Evidence,
    /// The terms of the gold answer (or its best alias), for question sets
    /// without gold evidence; questions without an answer are not scored.
    Answer,
}

/// One entry of a question file (`../shared/eval/*/dev/questions.json`).
#[derive(Debug, Clone, Deserialize)]
pub struct Question {
    #[serde(deserialize_with = "id_string")]
    pub id: String,
    pub question: String,
    #[serde(default)]
    pub answer: Option<String>,
    #[serde(default)]
    pub answer_aliases: Vec<String>,
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    #[serde(default)]
    pub gold_docs: Vec<String>,
    #[serde(default)]
    pub gold_passages: Vec<String>,
}

/// Ids are strings or numbers in the wild.
fn id_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => s,
        other => other.to_string(),
    })
}

/// The score of one question under one method and k.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct QuestionScore {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub method: String,
    pub k: Option<usize>,
    /// The context budget the method packed to (`--budget`).
    pub budget: Option<usize>,
    /// `passages`, `documents`, `answer` (its terms), or `none` (nothing to
    /// score against: not scored).
    pub gold: &'static str,
    /// Per gold item, whether it was retrieved.
    pub found: Vec<bool>,
    /// Per gold item, the position (from 1) of the first text unit of the
    /// context's Sources that holds it on its own; `None` when none does (not
    /// retrieved, or found only across several units).
    pub ranks: Vec<Option<usize>>,
    pub recall: Option<f64>,
    /// Recall among the first 2, 5 and 10 text units of the context's
    /// Sources (the method's own rank order).
    pub recall_at: [Option<f64>; 3],
    pub context_tokens: u64,
    pub latency_ms: f64,
    pub answer: Option<String>,
    pub exact_match: Option<f64>,
    pub f1: Option<f64>,
}

/// One line of the table: a method, k and question type (`all` = every type).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SummaryRow {
    pub method: String,
    pub k: Option<usize>,
    pub budget: Option<usize>,
    #[serde(rename = "type")]
    pub kind: String,
    pub questions: usize,
    /// Questions with gold evidence (the ones recall is averaged over).
    pub scored: usize,
    pub recall: Option<f64>,
    pub all_found: Option<f64>,
    /// Mean recall among the first 2, 5 and 10 source text units.
    pub recall_at_2: Option<f64>,
    pub recall_at_5: Option<f64>,
    pub recall_at_10: Option<f64>,
    pub context_tokens: f64,
    pub latency_p50_ms: f64,
    pub latency_p95_ms: f64,
    pub exact_match: Option<f64>,
    pub f1: Option<f64>,
}

/// The depths of the recall@k columns.
pub const RECALL_DEPTHS: [usize; 3] = [2, 5, 10];

/// Scores a retrieved context against a question's gold evidence: gold
/// passages when it has any, else gold documents against `titles` (the
/// context's source documents); with [`GoldMode::Answer`], against the terms
/// of its answer and aliases.
pub fn score_retrieval(q: &Question, context: &str, titles: &[String], mode: GoldMode) -> (&'static str, Vec<bool>) {
    if mode == GoldMode::Answer {
        let found = answer_terms_found(context, &gold_answers(q));
        return (if found.is_empty() { "none" } else { "answer" }, found);
    }
    if !q.gold_passages.is_empty() {
        let ctx = ContextText::new(context);
        ("passages", q.gold_passages.iter().map(|p| ctx.contains_passage(p)).collect())
    } else if !q.gold_docs.is_empty() {
        ("documents", q.gold_docs.iter().map(|d| document_found(d, titles)).collect())
    } else {
        ("none", Vec::new())
    }
}

/// The question's answer and its aliases.
fn gold_answers(q: &Question) -> Vec<String> {
    q.answer.iter().chain(&q.answer_aliases).cloned().collect()
}

/// Nearest-rank percentile (`p` in 0..=100) of `values`; 0 when empty.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

/// Rows per (method, k, budget): first `all`, then each question type in
/// name order when there is more than one.
pub fn summarize(scores: &[QuestionScore]) -> Vec<SummaryRow> {
    // (method, k, budget) groups in order of first appearance.
    type Key<'a> = (&'a str, Option<usize>, Option<usize>);
    let mut keys: Vec<Key> = Vec::new();
    for s in scores {
        let key = (s.method.as_str(), s.k, s.budget);
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    let mut rows = Vec::new();
    for key in keys {
        let group: Vec<&QuestionScore> = scores.iter().filter(|s| (s.method.as_str(), s.k, s.budget) == key).collect();
        let mut by_type: BTreeMap<&str, Vec<&QuestionScore>> = BTreeMap::new();
        for s in &group {
            by_type.entry(s.kind.as_str()).or_default().push(s);
        }
        rows.push(summary_row(key, "all", &group));
        if by_type.len() > 1 {
            for (kind, members) in by_type {
                rows.push(summary_row(key, kind, &members));
            }
        }
    }
    rows
}

fn summary_row(
    (method, k, budget): (&str, Option<usize>, Option<usize>),
    kind: &str,
    scores: &[&QuestionScore],
) -> SummaryRow {
    let scored: Vec<&&QuestionScore> = scores.iter().filter(|s| s.recall.is_some()).collect();
    let latencies: Vec<f64> = scores.iter().map(|s| s.latency_ms).collect();
    let at = |i: usize| mean(scored.iter().filter_map(|s| s.recall_at[i]));
    SummaryRow {
        method: method.to_string(),
        k,
        budget,
        kind: kind.to_string(),
        questions: scores.len(),
        scored: scored.len(),
        recall: mean(scored.iter().filter_map(|s| s.recall)),
        all_found: mean(scored.iter().map(|s| if s.found.iter().all(|f| *f) { 1.0 } else { 0.0 })),
        recall_at_2: at(0),
        recall_at_5: at(1),
        recall_at_10: at(2),
        context_tokens: mean(scores.iter().map(|s| s.context_tokens as f64)).unwrap_or(0.0),
        latency_p50_ms: percentile(&latencies, 50.0),
        latency_p95_ms: percentile(&latencies, 95.0),
        exact_match: mean(scores.iter().filter_map(|s| s.exact_match)),
        f1: mean(scores.iter().filter_map(|s| s.f1)),
    }
}

/// The summary as an aligned text table.
pub fn format_table(rows: &[SummaryRow]) -> String {
    let with_answers = rows.iter().any(|r| r.exact_match.is_some());
    let mut header = vec![
        "method",
        "k",
        "budget",
        "type",
        "n",
        "recall",
        "all found",
        "R@2",
        "R@5",
        "R@10",
        "ctx tokens",
        "p50 ms",
        "p95 ms",
    ];
    if with_answers {
        header.extend(["EM", "F1"]);
    }
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.3}"));
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
    for r in rows {
        let mut line = vec![
            r.method.clone(),
            r.k.map_or("-".to_string(), |k| k.to_string()),
            r.budget.map_or("-".to_string(), |b| b.to_string()),
            r.kind.clone(),
            if r.scored == r.questions { r.questions.to_string() } else { format!("{}/{}", r.scored, r.questions) },
            opt(r.recall),
            opt(r.all_found),
            opt(r.recall_at_2),
            opt(r.recall_at_5),
            opt(r.recall_at_10),
            format!("{:.0}", r.context_tokens),
            format!("{:.0}", r.latency_p50_ms),
            format!("{:.0}", r.latency_p95_ms),
        ];
        if with_answers {
            line.extend([opt(r.exact_match), opt(r.f1)]);
        }
        lines.push(line);
    }
    let widths: Vec<usize> =
        (0..lines[0].len()).map(|c| lines.iter().map(|l| l[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for line in &lines {
        let cells: Vec<String> =
            line.iter()
                .enumerate()
                .map(|(c, v)| {
                    if c == 0 || c == 3 {
                        format!("{v:<w$}", w = widths[c])
                    } else {
                        format!("{v:>w$}", w = widths[c])
                    }
                })
                .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The settings with `k` applied to every method's vector-search size (see
/// `graphrag-rs eval --help`): basic's text units (its token cap lifted, so
/// that k decides), local's (and DRIFT's) entities, mix's text chunks.
/// LightRAG's keyword top_k (entities and relationships per keyword level)
/// is left as set.
pub fn with_k(mut settings: Settings, k: usize) -> Settings {
    settings.basic_search.k = k;
    settings.basic_search.max_context_tokens = usize::MAX;
    settings.local_search.top_k_entities = k;
    settings.keyword_search.chunk_top_k = k;
    settings
}

/// Why `eval` does not score a method, if it does not.
pub fn unscorable(method: Method) -> Option<&'static str> {
    (method == Method::Global).then_some(
        "global search retrieves nothing to score: its context is every community report of a level, packed into map batches, whatever the question; recall would count what the reports happen to quote. Compare global answers with `graphrag-rs query --method global` instead",
    )
}

fn parse_list<T: std::str::FromStr>(list: &str, what: &str) -> anyhow::Result<Vec<T>>
where
    T::Err: std::fmt::Display,
{
    let items: Vec<T> = list
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<T>().map_err(|e| anyhow::anyhow!("{what} `{s}`: {e}")))
        .collect::<anyhow::Result<_>>()?;
    if items.is_empty() {
        bail!("no {what} given");
    }
    Ok(items)
}

fn load_questions(path: &Path) -> anyhow::Result<Vec<Question>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{}: expected a JSON list of {{id, question, answer, answer_aliases, type, gold_docs, gold_passages}}",
            path.display()
        )
    })
}

pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    crate::logging::init(args.verbosity, None)?;
    let methods: Vec<Method> = parse_list(&args.methods, "method")?;
    if let Some((method, why)) = methods.iter().find_map(|&m| unscorable(m).map(|why| (m, why))) {
        bail!("--method {method}: {why}");
    }
    let ks: Vec<Option<usize>> = match &args.k {
        Some(list) => parse_list::<usize>(list, "k")?.into_iter().map(Some).collect(),
        None => vec![None],
    };
    let budgets: Vec<Option<usize>> = match &args.budgets {
        Some(list) => parse_list::<usize>(list, "budget")?.into_iter().map(Some).collect(),
        None => vec![None],
    };
    if budgets.contains(&Some(0)) || ks.contains(&Some(0)) {
        bail!("--k and --budget take numbers of at least 1");
    }
    let mut questions = load_questions(&args.questions)?;
    if let Some(limit) = args.limit {
        questions.truncate(limit);
    }
    if questions.is_empty() {
        bail!("{} has no questions", args.questions.display());
    }
    let settings = crate::query::project_settings(&args.root, None)?.settings;

    let mut scores = Vec::new();
    for &k in &ks {
        let engine_settings = match k {
            Some(k) => with_k(settings.clone(), k),
            None => settings.clone(),
        };
        let engine = QueryEngine::with_settings(&args.root, engine_settings)?;
        for &budget in &budgets {
            for &method in &methods {
                if args.answers && !engine.can_answer(method) {
                    bail!("--answers: {method} search has no chat model configured (set GRAPHRAG_API_KEY in the project's .env)");
                }
                let run = Run { engine: &engine, method, k, budget, answers: args.answers, gold: args.gold };
                // Tables and vectors load on the first query: a warm-up keeps
                // that one-off cost out of the latencies.
                let warm_up = QueryRequest { context_only: true, ..run.request(&questions[0]) };
                engine.query(&warm_up, None).with_context(|| format!("{method} search"))?;
                tracing::info!(
                    "{method} search{}{}: {} questions",
                    k.map_or(String::new(), |k| format!(" k={k}")),
                    budget.map_or(String::new(), |b| format!(" budget={b}")),
                    questions.len()
                );
                for q in &questions {
                    scores.push(run.score(q)?);
                }
            }
        }
    }

    let summary = summarize(&scores);
    let mut out = std::io::stdout().lock();
    write!(out, "{}", format_table(&summary))?;
    out.flush()?;
    if let Some(path) = &args.output {
        let report = json!({
            "questions_file": args.questions.display().to_string(),
            "root": args.root.display().to_string(),
            "questions": questions.len(),
            "methods": methods,
            "k": ks,
            "budgets": budgets,
            "summary": summary,
            "per_question": scores,
        });
        let text = serde_json::to_string_pretty(&report)? + "\n";
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// One method at one k and budget.
struct Run<'a> {
    engine: &'a QueryEngine,
    method: Method,
    k: Option<usize>,
    budget: Option<usize>,
    answers: bool,
    gold: GoldMode,
}

impl Run<'_> {
    fn request(&self, q: &Question) -> QueryRequest {
        QueryRequest {
            context_only: !self.answers,
            max_context_tokens: self.budget,
            ..QueryRequest::new(self.method, q.question.clone())
        }
    }

    fn score(&self, q: &Question) -> anyhow::Result<QuestionScore> {
        let method = self.method;
        let started = Instant::now();
        let result =
            self.engine.query(&self.request(q), None).with_context(|| format!("{method} search, question {}", q.id))?;
        let latency_ms = started.elapsed().as_secs_f64() * 1e3;
        let sources: &[SourceRecord] = result.context_records.sources.as_deref().unwrap_or_default();
        let by_documents = self.gold == GoldMode::Evidence && q.gold_passages.is_empty() && !q.gold_docs.is_empty();
        // Gold evidence in a context, or in the first `depth` source units.
        let judge = |context: &str, rows: &[SourceRecord]| -> anyhow::Result<(&'static str, Vec<bool>)> {
            let titles = if by_documents {
                let ids: Vec<i64> = rows.iter().map(|row| row.id).collect();
                self.engine.source_documents(&ids)?
            } else {
                Vec::new()
            };
            Ok(score_retrieval(q, context, &titles, self.gold))
        };
        let (gold, found) = judge(&result.context, sources)?;
        let recall = share(&found);
        let ranks = first_positions(found.len(), sources, |row| Ok(judge(&row.text, std::slice::from_ref(row))?.1))?;
        let mut recall_at = [None; 3];
        if recall.is_some() {
            for (slot, depth) in recall_at.iter_mut().zip(RECALL_DEPTHS) {
                let top = &sources[..depth.min(sources.len())];
                let text: Vec<&str> = top.iter().map(|row| row.text.as_str()).collect();
                *slot = share(&judge(&text.join("\n"), top)?.1);
            }
        }
        let golds = gold_answers(q);
        let (exact, f1) = match (&result.answer, golds.is_empty()) {
            (Some(a), false) => (Some(exact_match(a, &golds)), Some(token_f1(a, &golds))),
            _ => (None, None),
        };
        Ok(QuestionScore {
            id: q.id.clone(),
            kind: q.kind.clone().unwrap_or_else(|| "-".to_string()),
            method: method.to_string(),
            k: self.k,
            budget: self.budget,
            gold,
            found,
            ranks,
            recall,
            recall_at,
            context_tokens: result.stats.context_tokens,
            latency_ms,
            answer: result.answer,
            exact_match: exact,
            f1,
        })
    }
}

/// Per gold item (of `golds`), the position from 1 of the first of `rows`
/// that `holds` it (`holds(row)` says, per gold item, whether the row holds
/// it); `None` where no row does.
fn first_positions<R>(
    golds: usize,
    rows: &[R],
    mut holds: impl FnMut(&R) -> anyhow::Result<Vec<bool>>,
) -> anyhow::Result<Vec<Option<usize>>> {
    let mut positions = vec![None; golds];
    for (i, row) in rows.iter().enumerate() {
        if positions.iter().all(Option::is_some) {
            break;
        }
        for (position, held) in positions.iter_mut().zip(holds(row)?) {
            if held && position.is_none() {
                *position = Some(i + 1);
            }
        }
    }
    Ok(positions)
}

/// The share of true values; `None` for none.
fn share(found: &[bool]) -> Option<f64> {
    (!found.is_empty()).then(|| found.iter().filter(|f| **f).count() as f64 / found.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(passages: &[&str], docs: &[&str]) -> Question {
        Question {
            id: "q1".into(),
            question: "?".into(),
            answer: None,
            answer_aliases: Vec::new(),
            kind: None,
            gold_docs: docs.iter().map(|s| s.to_string()).collect(),
            gold_passages: passages.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn score(method: &str, kind: &str, found: &[bool], tokens: u64, ms: f64) -> QuestionScore {
        QuestionScore {
            id: "q".into(),
            kind: kind.into(),
            method: method.into(),
            k: None,
            budget: None,
            gold: if found.is_empty() { "none" } else { "passages" },
            found: found.to_vec(),
            ranks: found.iter().map(|&f| f.then_some(1)).collect(),
            recall: share(found),
            recall_at: [share(&found[..found.len().min(1)]), share(found), share(found)],
            context_tokens: tokens,
            latency_ms: ms,
            answer: None,
            exact_match: None,
            f1: None,
        }
    }

    #[test]
    fn each_gold_item_is_ranked_at_the_first_row_holding_it() {
        // Rows hold gold items {1}, {0, 1}, {} ; item 2 is in none.
        let rows = [vec![false, true, false], vec![true, true, false], vec![false, false, false]];
        let mut asked = 0;
        let ranks = first_positions(3, &rows, |r| {
            asked += 1;
            Ok(r.clone())
        })
        .unwrap();
        assert_eq!(ranks, vec![Some(2), Some(1), None]);
        assert_eq!(asked, 3);
        // Once every item has a position the remaining rows are not judged.
        let mut asked = 0;
        let ranks = first_positions(2, &rows, |r| {
            asked += 1;
            Ok(r[..2].to_vec())
        })
        .unwrap();
        assert_eq!((ranks, asked), (vec![Some(2), Some(1)], 2));
        assert!(first_positions(0, &rows, |_| Ok(vec![])).unwrap().is_empty());
    }

    #[test]
    fn questions_parse_with_numeric_ids_and_null_fields() {
        let qs: Vec<Question> = serde_json::from_str(
            r#"[{"id": 3, "question": "Who?", "answer": null, "type": null, "gold_docs": ["a.txt"], "gold_passages": [], "evidence": {}}]"#,
        )
        .unwrap();
        assert_eq!(qs[0].id, "3");
        assert_eq!(qs[0].kind, None);
        assert_eq!(qs[0].gold_docs, vec!["a.txt"]);
    }

    #[test]
    fn passages_are_preferred_and_documents_are_the_fallback() {
        let q = question(&["The Exies were an American rock band from Los Angeles."], &["The Exies"]);
        let (gold, found) = score_retrieval(
            &q,
            "id|text\n1|the exies were an American rock band from Los Angeles",
            &[],
            GoldMode::Evidence,
        );
        assert_eq!((gold, found), ("passages", vec![true]));
        let q = question(&[], &["LiHua-World/week3/20260121_1000.txt", "LiHua-World/week26/20260701_1000.txt"]);
        let titles = vec!["LiHua-World/week3/20260121_1000.txt".to_string()];
        assert_eq!(score_retrieval(&q, "", &titles, GoldMode::Evidence), ("documents", vec![true, false]));
        assert_eq!(score_retrieval(&question(&[], &[]), "", &titles, GoldMode::Evidence), ("none", vec![]));
    }

    #[test]
    fn answer_mode_scores_the_answer_terms_whatever_the_evidence() {
        let mut q = question(&["A gold passage that is not in the context."], &[]);
        q.answer = Some("Basal cell carcinoma".into());
        q.answer_aliases = vec!["BCC".into()];
        let context = "id|text\n4|The most common skin cancer is basal cell carcinoma.";
        assert_eq!(score_retrieval(&q, context, &[], GoldMode::Answer), ("answer", vec![true, true, true]));
        assert_eq!(score_retrieval(&q, context, &[], GoldMode::Evidence), ("passages", vec![false]));
        assert_eq!(score_retrieval(&q, "id|text\n5|BCC for short", &[], GoldMode::Answer), ("answer", vec![true]));
        // No answer: not scored.
        assert_eq!(score_retrieval(&question(&[], &[]), context, &[], GoldMode::Answer), ("none", vec![]));
    }

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 10.0);
        assert_eq!(percentile(&v, 95.0), 19.0);
        assert_eq!(percentile(&[7.0], 95.0), 7.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    #[test]
    fn summary_is_per_method_then_per_type_and_skips_unscored_recall() {
        let scores = vec![
            score("basic", "2hop", &[true, false], 100, 10.0),
            score("basic", "3hop", &[true, true, true], 300, 30.0),
            score("basic", "3hop", &[], 200, 20.0),
            score("local", "2hop", &[false, false], 1000, 5.0),
        ];
        let rows = summarize(&scores);
        let keys: Vec<(&str, &str)> = rows.iter().map(|r| (r.method.as_str(), r.kind.as_str())).collect();
        assert_eq!(keys, vec![("basic", "all"), ("basic", "2hop"), ("basic", "3hop"), ("local", "all")]);
        let all = &rows[0];
        assert_eq!((all.questions, all.scored), (3, 2));
        assert_eq!(all.recall, Some(0.75));
        assert_eq!(all.all_found, Some(0.5));
        assert_eq!(all.context_tokens, 200.0);
        assert_eq!(all.latency_p50_ms, 20.0);
        assert_eq!(rows[3].recall, Some(0.0));
        assert_eq!(all.exact_match, None);
    }

    #[test]
    fn table_is_aligned_and_marks_unscored_questions() {
        let rows = summarize(&[score("basic", "-", &[true], 1234, 12.4), score("basic", "-", &[], 10, 3.0)]);
        let table = format_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("method  k  budget  type"), "{table}");
        assert!(lines[1].contains(" 1/2 ") && lines[1].contains("1.000"), "{table}");
        assert_eq!(lines[0].find("ctx tokens").map(|i| i + "ctx tokens".len()), lines[1].find("622").map(|i| i + 3));
    }

    #[test]
    fn k_sets_every_methods_vector_search_size() {
        let s = with_k(Settings::default(), 7);
        assert_eq!((s.basic_search.k, s.local_search.top_k_entities, s.keyword_search.chunk_top_k), (7, 7, 7));
        // k, not basic's token cap, decides; mix's keyword retrieval is left alone.
        assert_eq!(s.basic_search.max_context_tokens, usize::MAX);
        assert_eq!(s.keyword_search.top_k, Settings::default().keyword_search.top_k);
    }

    #[test]
    fn global_is_refused_with_a_reason() {
        let why = unscorable(Method::Global).unwrap();
        assert!(why.contains("every community report"), "{why}");
        assert!(unscorable(Method::Ppr).is_none() && unscorable(Method::Basic).is_none());
    }
}
