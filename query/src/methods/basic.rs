//! Basic search: the `basic_search.k` text units best ranked for the
//! question — by dense similarity and BM25 fused (graphrag-rs' default), or
//! by one of them — packed into `basic_search.max_context_tokens`. With a
//! context budget ([`crate::QueryRequest::max_context_tokens`]) the units
//! fill the budget in rank order instead of stopping at k.

use serde_json::json;

use crate::context::{history_table, join_parts, MemoCounter};
use crate::retrieval::{ranked_units, sources_table, Cut, Retriever};
use crate::{render, Outcome, Run};

pub fn run(run: &Run, retriever: Retriever) -> anyhow::Result<Outcome> {
    let bs = &run.s().basic_search;
    let question = &run.req.question;
    let memo = MemoCounter::default();
    let count = |t: &str| memo.count(t);
    let (budget, cut) = match run.req.max_context_tokens {
        Some(budget) => (budget, Cut::Budget(budget)),
        None => (bs.max_context_tokens, Cut::Count(bs.k)),
    };
    let ranked = ranked_units(run, retriever, question, None, cut, bs.fusion_k)?;
    let units = run.index().text_units()?;
    let history = history_table(
        &run.req.history,
        run.s().local_search.conversation_history_max_turns as usize,
        true,
        budget,
        &count,
    );
    let sources = sources_table(&units, ranked.iter().map(|h| h.0), budget.saturating_sub(history.tokens), &count);
    let context = join_parts([history.text.as_str(), sources.text.as_str()]);
    let records = json!({ "sources": sources.records(), "retrieval": retriever.name() });
    let context_ms = run.context_ready();
    if run.retrieval_only() {
        return Ok(Outcome { answer: None, context, records, context_ms });
    }
    let prompt = run.prompt("basic_search.prompt", &bs.prompt)?;
    let system = render(&prompt, &[("response_type", json!(run.req.response_type)), ("context_data", json!(context))])?;
    let answer = run.chat(&run.messages(system, question))?;
    Ok(Outcome { answer: Some(answer), context, records, context_ms })
}
