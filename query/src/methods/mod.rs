//! One module per search method; shared helpers here.

pub mod basic;
pub mod drift;
pub mod global;
pub mod keyword;
pub mod local;
pub mod ppr;

use serde_json::{json, Value};

use crate::context::{history_table, join_parts, Counter, PackedTable};
use crate::data::Reports;
use crate::records::ContextRecords;
use crate::retrieval::reranked_sources;
use crate::{render, Outcome, Run};

/// A context of the text units `rows`, in order, as one Sources table after
/// the conversation history's user turns, within `budget` tokens.
pub fn sources_context(
    run: &Run,
    rows: impl IntoIterator<Item = usize>,
    budget: usize,
    history: &[(String, String)],
    count: Counter,
) -> anyhow::Result<(String, PackedTable)> {
    let turns = run.s().local_search.conversation_history_max_turns as usize;
    let history = history_table(history, turns, true, budget, count);
    let units = run.index().text_units()?;
    let sources = reranked_sources(run, &units, rows, budget.saturating_sub(history.tokens), count)?;
    Ok((join_parts([history.text.as_str(), sources.text.as_str()]), sources))
}

/// The outcome of a method whose context is built: the context alone in
/// retrieval-only mode, else one answer with the prompt of `setting`.
pub fn answer(
    run: &Run,
    setting: &str,
    prompt_path: &str,
    context: String,
    records: ContextRecords,
) -> anyhow::Result<Outcome> {
    let context_ms = run.context_ready();
    if run.retrieval_only() {
        return Ok(Outcome { answer: None, context, records, context_ms });
    }
    let prompt = run.prompt(setting, prompt_path)?;
    let system = render(&prompt, &[("response_type", json!(run.req.response_type)), ("context_data", json!(context))])?;
    let answer = run.chat(&run.messages(system, &run.req.question))?;
    Ok(Outcome { answer: Some(answer), context, records, context_ms })
}

/// GraphRAG's default community level.
pub const DEFAULT_COMMUNITY_LEVEL: i64 = 2;

/// The community level of the request (`None`: GraphRAG's default 2). As
/// in GraphRAG 3.3, level N selects the reports at levels 0 to N, so a level
/// deeper than the index's deepest selects what its deepest does: that
/// level is used, with a notice.
pub fn community_level(run: &Run, reports: &Reports) -> anyhow::Result<i64> {
    let Some(requested) = run.req.community_level.map(i64::from) else {
        return Ok(DEFAULT_COMMUNITY_LEVEL);
    };
    match reports.max_level() {
        Some(max) if requested > max => {
            run.notice(format!(
                "community level {requested}: this index's community reports have levels 0 to {max}, so level {max} is used (the same reports: every level up to it)"
            ));
            Ok(max)
        }
        None => {
            run.notice(format!("community level {requested}: this index has no community reports"));
            Ok(requested)
        }
        Some(_) => Ok(requested),
    }
}

/// A JSON value as a string (strings as is, others serialised).
pub fn text_of(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// A JSON number (or numeric string).
pub fn number_of(v: Option<&Value>) -> Option<f64> {
    match v? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A list of strings (a JSON array, or one comma-separated string).
pub fn strings_of(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::Array(a)) => {
            a.iter().map(|x| text_of(Some(x)).trim().to_string()).filter(|x| !x.is_empty()).collect()
        }
        Some(Value::String(s)) => s.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect(),
        _ => Vec::new(),
    }
}

/// Whether an error is a model answer that stayed unusable (not the JSON
/// asked for; skipped and counted) rather than a failure to reach the model.
pub fn is_bad_json(e: &graphrag_engine::llm::LlmError) -> bool {
    matches!(e, graphrag_engine::llm::LlmError::InvalidAnswer { .. })
}

/// A model call's error with its causes, as `{:#}` of the `anyhow::Error`
/// it becomes shows it (a stopped call names the stop).
pub fn with_causes(e: &graphrag_engine::llm::LlmError) -> String {
    format!("{:#}", anyhow::Error::from(e.clone()))
}
