//! What the LLM verbs share: running many model calls concurrently from a
//! synchronous verb, and the fingerprint of model + prompts for --resume.

use futures_util::stream::{self, StreamExt};

use graphrag_engine::llm::{ChatModel, LlmError, LlmService, Message, UsageCounters};
use graphrag_engine::prompts::PromptTemplate;
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
