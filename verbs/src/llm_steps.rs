//! What the LLM verbs share: running many model calls concurrently from a
//! synchronous verb, and the fingerprint of model + prompts for --resume.

use futures_util::stream::{self, StreamExt};

use graphrag_engine::llm::{count_prompt_tokens, ChatModel, LlmError, LlmService, Message, UsageCounters};
use graphrag_engine::prompts::PromptTemplate;
use graphrag_engine::verb::LlmEstimate;
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

/// GraphRAG's gleaning conversation: the extraction prompt, then up to
/// `max_gleanings` "you missed some" turns, asking between turns whether
/// more remain (answer Y/N). Returns every answer, newline-joined.
pub async fn glean(
    model: &ChatModel,
    first: String,
    continue_prompt: &str,
    loop_prompt: &str,
    max_gleanings: u32,
    usage: &UsageCounters,
) -> Result<String, LlmError> {
    let mut messages = vec![Message::user(first)];
    let answer = model.chat(&messages, false, usage).await?;
    let mut output = answer.content.clone();
    messages.push(Message::assistant(answer.content));
    for round in 0..max_gleanings {
        messages.push(Message::user(continue_prompt));
        let more = model.chat(&messages, false, usage).await?;
        output.push('\n');
        output.push_str(&more.content);
        messages.push(Message::assistant(more.content));
        if round + 1 >= max_gleanings {
            break;
        }
        messages.push(Message::user(loop_prompt));
        let go_on = model.chat(&messages, false, usage).await?;
        if !go_on.content.trim().to_ascii_uppercase().starts_with('Y') {
            break;
        }
        messages.push(Message::assistant(go_on.content));
    }
    Ok(output)
}

/// The dry-run estimate of gleaning conversations, one per rendered first
/// prompt: at most 1 + gleanings + (gleanings - 1) loop checks each. Prompt
/// tokens count every turn's resent prompts but not the model's own earlier
/// answers, which later turns also resend: a lower bound for those turns.
pub fn estimate_gleaning(
    model: &ChatModel,
    first_prompts: &[String],
    continue_prompt: &str,
    loop_prompt: &str,
    max_gleanings: u32,
) -> LlmEstimate {
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
        if model.is_cached(&messages, false) {
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
