//! What the LLM verbs share: running many model calls concurrently from a
//! synchronous verb, and the fingerprint of model + prompts for --resume.

use std::collections::BTreeMap;

use arrow_array::RecordBatch;
use futures_util::stream::{self, StreamExt};
use serde_json::Value;

use graphrag_engine::context::StepCounters;
use graphrag_engine::llm::answer::{self, AnswerCheck};
use graphrag_engine::llm::{count_prompt_tokens, ChatModel, LlmError, LlmService, Message};
use graphrag_engine::prompts::PromptTemplate;
use graphrag_engine::table::strings;
use graphrag_engine::verb::LlmEstimate;
use graphrag_operations::extraction_parser::Delimiters;
use graphrag_operations::ids::sha256_hex;

/// Calls `f` for every item, at most `in_flight` at once (the model's own
/// limiter still applies), and returns the results in item order.
pub fn map_concurrently<T, R, F, Fut>(llm: &LlmService, items: Vec<T>, in_flight: usize, f: F) -> Vec<R>
where
    F: Fn(T) -> Fut,
    Fut: std::future::Future<Output = R>,
{
    llm.block_on(stream::iter(items.into_iter().map(f)).buffered(in_flight.max(1)).collect())
}

/// Hash of a model fingerprint and prompt texts: a step reruns under
/// --resume when either changes.
pub fn fingerprint(model: &str, prompts: &[&PromptTemplate]) -> String {
    let mut parts: Vec<&[u8]> = vec![model.as_bytes()];
    for p in prompts {
        parts.push(p.text.as_bytes());
    }
    sha256_hex(&parts)
}

/// How many model calls a verb keeps in flight; the model's
/// `concurrent_requests` is the real limit, this only bounds memory.
pub const IN_FLIGHT: usize = 256;

/// Records and unreadable records in an extraction answer.
pub type RecordCount = fn(&str, &Delimiters) -> (usize, usize);

/// The check of an extraction answer: records in the requested format. An
/// answer without records is usable only as the model's explicit "nothing
/// here" — the completion delimiter, with no unreadable record — never as
/// garbage that happens to parse to nothing.
pub fn records_check(d: &Delimiters, count: RecordCount) -> AnswerCheck<impl Fn(&str) -> Result<(), String>> {
    let d = d.clone();
    let expected = format!(
        "the records in the format it describes (fields separated by {}, records by {}), ending with {} — or only {} if there is nothing to extract",
        d.tuple, d.record, d.completion, d.completion
    );
    AnswerCheck::new(expected, move |text: &str| {
        if text.contains('\u{fffd}') {
            return Err("it contains undecodable characters (U+FFFD)".into());
        }
        let (found, unreadable) = count(text, &d);
        if found > 0 || (unreadable == 0 && text.contains(d.completion.as_str())) {
            return Ok(());
        }
        Err(if unreadable > 0 {
            format!("none of its {unreadable} records could be read")
        } else if text.trim().is_empty() {
            "the answer is empty".into()
        } else {
            format!("it holds no record and no {} (nothing to extract)", d.completion)
        })
    })
}

/// GraphRAG's gleaning conversation: the extraction prompt, then up to
/// `max_gleanings` "you missed some" turns, asking between turns whether
/// more remain (answer Y/N). Every answer must pass `records` (the loop
/// check Y/N). Returns every answer, newline-joined. Each turn waits for
/// the one before: turn k is counted in wave k of the step's waves.
pub async fn glean<F>(
    model: &ChatModel,
    first: String,
    continue_prompt: &str,
    loop_prompt: &str,
    max_gleanings: u32,
    counters: &StepCounters,
    records: &AnswerCheck<F>,
) -> Result<String, LlmError>
where
    F: Fn(&str) -> Result<(), String>,
{
    let (usage, waves) = (&counters.usage, &counters.waves);
    let yes_no = answer::yes_no();
    let mut messages = vec![Message::user(first)];
    let answer = model.chat(&messages, false, usage, records).await?;
    waves.record(0, &answer);
    let mut output = answer.completion.content.clone();
    messages.push(Message::assistant(answer.completion.content));
    let mut wave = 1;
    for round in 0..max_gleanings {
        messages.push(Message::user(continue_prompt));
        let more = model.chat(&messages, false, usage, records).await?;
        waves.record(wave, &more);
        wave += 1;
        output.push('\n');
        output.push_str(&more.completion.content);
        messages.push(Message::assistant(more.completion.content));
        if round + 1 >= max_gleanings {
            break;
        }
        messages.push(Message::user(loop_prompt));
        let go_on = model.chat(&messages, false, usage, &yes_no).await?;
        waves.record(wave, &go_on);
        wave += 1;
        if !go_on.value {
            break;
        }
        messages.push(Message::assistant(go_on.completion.content));
    }
    Ok(output)
}

/// The dry-run estimate of an extraction step (graph or claims): a gleaning
/// conversation per text unit of `units`, its prompts (`[first, continue,
/// loop]`) rendered with `vars` of the unit's text.
pub fn estimate_extraction<F>(
    model: &ChatModel,
    units: &RecordBatch,
    [first, cont, check]: [&PromptTemplate; 3],
    vars: impl Fn(&str) -> BTreeMap<&'static str, Value>,
    max_gleanings: u32,
    records: &AnswerCheck<F>,
) -> anyhow::Result<LlmEstimate>
where
    F: Fn(&str) -> Result<(), String>,
{
    let firsts = strings(units, "text_units", "text")?
        .iter()
        .map(|t| first.render(&vars(t)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let v = vars("");
    Ok(estimate_gleaning(model, &firsts, &cont.render(&v)?, &check.render(&v)?, max_gleanings, records))
}

/// The dry-run estimate of gleaning conversations, one per rendered first
/// prompt: at most 1 + gleanings + (gleanings - 1) loop checks each. Prompt
/// tokens count every turn's resent prompts but not the model's own earlier
/// answers, which later turns also resend: a lower bound for those turns.
fn estimate_gleaning<F>(
    model: &ChatModel,
    first_prompts: &[String],
    continue_prompt: &str,
    loop_prompt: &str,
    max_gleanings: u32,
    records: &AnswerCheck<F>,
) -> LlmEstimate
where
    F: Fn(&str) -> Result<(), String>,
{
    let g = max_gleanings as u64;
    let turns = 1 + g + g.saturating_sub(1);
    let (cont, check) =
        (count_prompt_tokens(&[Message::user(continue_prompt)]), count_prompt_tokens(&[Message::user(loop_prompt)]));
    let mut est = LlmEstimate {
        note: "gleaning turns also resend earlier answers (not counted)".into(),
        ..LlmEstimate::default()
    };
    for first in first_prompts {
        let messages = [Message::user(first.as_str())];
        est.items += 1;
        // An item whose first answer is cached was done before, follow-ups included.
        if model.is_cached(&messages, false, records) {
            est.cached_items += 1;
            continue;
        }
        let base = count_prompt_tokens(&messages);
        est.calls += turns;
        // Turn k resends the first prompt and the follow-ups before it.
        let mut history = base;
        est.prompt_tokens += base;
        for round in 0..g {
            history += cont;
            est.prompt_tokens += history;
            if round + 1 < g {
                history += check;
                est.prompt_tokens += history;
            }
        }
    }
    est
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphrag_engine::llm::{Completion, InvalidKind};
    use graphrag_operations::extraction_parser::{parse_claim_records, parse_graph_records};

    fn graph(t: &str, d: &Delimiters) -> (usize, usize) {
        let ex = parse_graph_records(t, d);
        (ex.entities.len() + ex.relationships.len(), ex.dropped)
    }

    fn claims(t: &str, d: &Delimiters) -> (usize, usize) {
        let (found, dropped) = parse_claim_records(t, d);
        (found.len(), dropped)
    }

    fn answer(content: &str) -> Completion {
        Completion { content: content.into(), finish_reason: Some("stop".into()), ..Completion::default() }
    }

    #[test]
    fn an_extraction_answer_needs_records_or_an_explicit_nothing() {
        let d = Delimiters::default();
        let check = records_check(&d, graph);
        let ok = [
            "(\"entity\"<|>SCROOGE<|>PERSON<|>A miser)\n<|COMPLETE|>",
            // No completion delimiter: small models forget it; the records count.
            "(\"entity\"<|>SCROOGE<|>PERSON<|>A miser)",
            "<|COMPLETE|>",
            "  ```\n<|COMPLETE|>\n```  ",
            "There are no entities of those types in this text.\n<|COMPLETE|>",
        ];
        for a in ok {
            assert!(check.check(&answer(a)).is_ok(), "{a}");
        }
        let bad = [
            "",
            "\u{fffd}\u{fffd} %%% garbled mock output %%% {\"partial\": [1, 2,",
            "I am sorry, I cannot help with that.",
            "(\"entity\"<|>)\n<|COMPLETE|>",
        ];
        for a in bad {
            let e = check.check(&answer(a)).unwrap_err();
            assert_eq!(e.kind, InvalidKind::Malformed, "{a}");
        }
        let cut = Completion { finish_reason: Some("length".into()), ..answer(ok[0]) };
        assert_eq!(check.check(&cut).unwrap_err().kind, InvalidKind::Truncated);
        assert!(check.expected().contains("<|COMPLETE|>"));
    }

    #[test]
    fn a_claims_answer_is_checked_the_same_way() {
        let check = records_check(&Delimiters::default(), claims);
        assert!(check.check(&answer("<|COMPLETE|>")).is_ok());
        assert!(check
            .check(&answer("(SCROOGE<|>NONE<|>FRAUD<|>TRUE<|>NONE<|>NONE<|>He lied<|>text)\n<|COMPLETE|>"))
            .is_ok());
        assert!(check.check(&answer("garbage")).is_err());
    }
}
