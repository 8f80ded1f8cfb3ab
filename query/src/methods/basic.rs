//! Basic search: the `basic_search.k` text units closest to the question.

use serde_json::json;

use crate::context::{history_table, join_parts, pack_table, MemoCounter};
use crate::data::Field;
use crate::{render, Outcome, Run};

pub fn run(run: &Run) -> anyhow::Result<Outcome> {
    let bs = &run.s().basic_search;
    let question = &run.req.question;
    let memo = MemoCounter::default();
    let count = |t: &str| memo.count(t);
    let query = run.embed_one(question)?;
    let vectors = run.vectors(Field::TextUnitText)?;
    let hits = run.search(&vectors, &query, bs.k, None)?;
    let units = run.index().text_units()?;
    let history = history_table(
        &run.req.history,
        run.s().local_search.conversation_history_max_turns as usize,
        true,
        bs.max_context_tokens,
        &count,
    );
    let rows = hits
        .iter()
        .filter_map(|(id, _)| units.by_id.get(id))
        .map(|&u| vec![units.hrid[u].to_string(), units.text[u].clone()]);
    let sources =
        pack_table("Sources", &["id", "text"], rows, bs.max_context_tokens.saturating_sub(history.tokens), &count);
    let context = join_parts([history.text.as_str(), sources.text.as_str()]);
    let records = json!({ "sources": sources.records() });
    let context_ms = run.context_ready();
    if run.retrieval_only() {
        return Ok(Outcome { answer: None, context, records, context_ms });
    }
    let prompt = run.prompt("basic_search.prompt", &bs.prompt)?;
    let system = render(&prompt, &[("response_type", json!(run.req.response_type)), ("context_data", json!(context))])?;
    let answer = run.chat(&run.messages(system, question))?;
    Ok(Outcome { answer: Some(answer), context, records, context_ms })
}
