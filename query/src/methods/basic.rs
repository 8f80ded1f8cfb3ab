//! Basic search: the `basic_search.k` text units best ranked for the
//! question — by dense similarity and BM25 fused (graphrag-rs' default), or
//! by one of them — packed into `basic_search.max_context_tokens`. With a
//! context budget ([`crate::QueryRequest::max_context_tokens`]) the units
//! fill the budget in rank order instead of stopping at k.

use crate::context::MemoCounter;
use crate::records::{self, ContextRecords, MethodRecords};
use crate::retrieval::{ranked_units, Cut, Retriever};
use crate::{Outcome, Run};

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
    let (context, sources) = super::sources_context(run, ranked.iter().map(|h| h.0), budget, &run.req.history, &count)?;
    let records = ContextRecords {
        sources: Some(records::sources(&sources)),
        method: MethodRecords::Basic { retrieval: retriever.name() },
        ..ContextRecords::default()
    };
    super::answer(run, "basic_search.prompt", &bs.prompt, context, records)
}
