//! The questions prompt tuning asks the chat model, in GraphRAG's order —
//! domain and language, persona, then the report rating description, the
//! entity types and the reporter role, then few-shot examples — and the
//! check every answer passes before it is used (an unusable answer is asked
//! again, never cached, and in the end a named error).

use std::collections::BTreeMap;

use futures_util::future::{join3, join_all};
use graphrag_engine::interrupt::Interrupted;
use graphrag_engine::llm::{answer, AnswerCheck, ChatModel, LlmError, Message, UsageCounters};
use graphrag_engine::prompts::PromptTemplate;
use graphrag_operations::extraction_parser::{parse_graph_records, Delimiters};
use serde_json::Value;

use super::templates::{self, EntityTypes, Example, MAX_ENTITY_TYPES};

/// Chunks that get a few-shot example (GraphRAG's `MAX_EXAMPLES`).
pub(super) const MAX_EXAMPLES: usize = 5;

/// The longest domain / language label accepted, in characters.
const MAX_LABEL_CHARS: usize = 120;
/// The longest persona, role or rating description accepted, in characters.
const MAX_PROSE_CHARS: usize = 4000;
/// The longest entity type accepted, in characters (a longer one is a sentence).
const MAX_TYPE_CHARS: usize = 60;

/// What the model said, checked.
#[derive(Debug, Clone)]
pub(super) struct Answers {
    pub domain: String,
    pub language: String,
    pub persona: String,
    pub rating_description: String,
    pub role: String,
    pub entity_types: EntityTypes,
    pub examples: Vec<Example>,
}

/// What the caller fixed instead of asking (`--domain`, `--language`,
/// `--no-discover-entity-types`).
pub(super) struct Given<'a> {
    pub domain: Option<&'a str>,
    pub language: Option<&'a str>,
    pub discover_entity_types: bool,
    /// settings' `extract_graph.entity_types`: the examples' types when not discovered.
    pub settings_types: &'a [String],
    pub min_examples_required: usize,
}

fn decoded(text: &str) -> Result<(), String> {
    if text.contains('\u{fffd}') {
        return Err("it contains undecodable characters (U+FFFD)".into());
    }
    Ok(())
}

/// A one-line label (`Domain: Victorian fiction` → `Victorian fiction`).
pub(super) fn parse_label(text: &str, label: &str) -> Result<String, String> {
    decoded(text)?;
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    let line = match line.split_once(':') {
        Some((head, rest)) if head.trim().trim_matches('*').eq_ignore_ascii_case(label) => rest,
        _ => line,
    };
    let value = line.trim().trim_matches(|c: char| matches!(c, '"' | '\'' | '*' | '`' | '.') || c.is_whitespace());
    if value.is_empty() {
        return Err(format!("the answer names no {}", label.to_lowercase()));
    }
    if value.chars().count() > MAX_LABEL_CHARS {
        return Err(format!("the {} is longer than {MAX_LABEL_CHARS} characters", label.to_lowercase()));
    }
    Ok(value.to_string())
}

fn label_check(label: &'static str) -> AnswerCheck<impl Fn(&str) -> Result<String, String>> {
    AnswerCheck::new(format!("only the {}, on one line", label.to_lowercase()), move |t: &str| parse_label(t, label))
}

/// Prose (persona, role, rating description): non-empty and of a sane length.
pub(super) fn parse_prose(text: &str, what: &str) -> Result<String, String> {
    decoded(text)?;
    let t = text.trim();
    if t.is_empty() {
        return Err("the answer is empty".into());
    }
    if t.chars().count() > MAX_PROSE_CHARS {
        return Err(format!("the {what} is longer than {MAX_PROSE_CHARS} characters"));
    }
    Ok(t.to_string())
}

fn prose_check(what: &'static str) -> AnswerCheck<impl Fn(&str) -> Result<String, String>> {
    AnswerCheck::new(format!("only the {what}"), move |t: &str| parse_prose(t, what))
}

/// The `entity_types` list of a JSON answer, cleaned: upper case (as the
/// extraction parser stores types), without the characters that would
/// break the prompt's type list or a record, without duplicates, at most
/// [`MAX_ENTITY_TYPES`]. No usable type is an error, never an empty list.
pub(super) fn parse_entity_types(v: &Value) -> Result<Vec<String>, String> {
    let Some(items) = v.get("entity_types").and_then(Value::as_array) else {
        return Err("no `entity_types` list in the JSON object".into());
    };
    let mut types: Vec<String> = Vec::new();
    for item in items {
        let Some(s) = item.as_str() else { continue };
        let cleaned: String = s
            .chars()
            .map(|c| if "<>|#,{}[]()\"'`*".contains(c) || c.is_control() { ' ' } else { c })
            .collect::<String>()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_uppercase();
        if cleaned.is_empty() || cleaned.chars().count() > MAX_TYPE_CHARS || types.contains(&cleaned) {
            continue;
        }
        types.push(cleaned);
    }
    types.truncate(MAX_ENTITY_TYPES);
    if types.is_empty() {
        return Err(format!(
            "the `entity_types` list has no usable type (each a short name of a kind of thing, at most {MAX_TYPE_CHARS} characters)"
        ));
    }
    Ok(types)
}

/// An example answer: its records of the prompt's types (relationships
/// between them); at least one entity.
pub(super) fn parse_example(text: &str, types: &[String]) -> Result<Example, String> {
    decoded(text)?;
    let found = parse_graph_records(text, &Delimiters::default());
    let entities: Vec<_> = found.entities.into_iter().filter(|e| types.contains(&e.entity_type)).collect();
    if entities.is_empty() {
        return Err(format!("it has no entity record of the types {}", types.join(",")));
    }
    let known = |name: &str| entities.iter().any(|e| e.name == name);
    let relationships = found.relationships.into_iter().filter(|r| known(&r.source) && known(&r.target)).collect();
    Ok(Example { text: String::new(), entities, relationships })
}

/// A question without an answer: the run was stopped (which ends prompt
/// tuning), or the call failed (which a few-shot example may).
#[derive(Debug, thiserror::Error)]
enum AskError {
    #[error(transparent)]
    Interrupted(#[from] Interrupted),
    #[error("prompt tuning, {what}: {error}")]
    Failed { what: String, error: LlmError },
}

/// One model call; an error names the question.
async fn ask<T, F>(
    model: &ChatModel,
    what: &str,
    messages: Vec<Message>,
    json: bool,
    usage: &UsageCounters,
    check: &AnswerCheck<F>,
) -> Result<T, AskError>
where
    F: Fn(&str) -> Result<T, String>,
{
    match model.chat(&messages, json, usage, check).await {
        Ok(answer) => Ok(answer.value),
        Err(LlmError::Interrupted(stopped)) => Err(stopped.into()),
        Err(error) => Err(AskError::Failed { what: what.to_string(), error }),
    }
}

/// The messages of each question (also what a dry run counts).
pub(super) mod messages {
    use super::*;

    pub fn domain(sample: &str) -> Vec<Message> {
        vec![Message::user(templates::fill(templates::DOMAIN, &[("input_text", sample)]))]
    }
    pub fn language(sample: &str) -> Vec<Message> {
        vec![Message::user(templates::fill(templates::LANGUAGE, &[("input_text", sample)]))]
    }
    pub fn persona(domain: &str) -> Vec<Message> {
        let task = templates::task(domain);
        vec![Message::user(templates::fill(templates::PERSONA, &[("task", &task), ("domain", domain)]))]
    }
    pub fn rating(persona: &str, domain: &str, sample: &str) -> Vec<Message> {
        let text = templates::fill(templates::RATING, &[("domain", domain), ("input_text", sample)]);
        vec![Message::system(persona), Message::user(text)]
    }
    pub fn entity_types(persona: &str, domain: &str, sample: &str) -> Vec<Message> {
        let (task, max) = (templates::task(domain), MAX_ENTITY_TYPES.to_string());
        let text = templates::fill(
            templates::ENTITY_TYPES,
            &[("task", &task), ("domain", domain), ("max_types", &max), ("input_text", sample)],
        );
        vec![Message::system(persona), Message::user(text)]
    }
    pub fn role(persona: &str, domain: &str, sample: &str) -> Vec<Message> {
        let text = templates::fill(templates::ROLE, &[("domain", domain), ("input_text", sample)]);
        vec![Message::system(persona), Message::user(text)]
    }
    /// The extraction prompt with the built-in example, over `chunk`.
    pub fn example(persona: &str, domain: &str, language: &str, types: &[String], chunk: &str) -> Vec<Message> {
        let listed = EntityTypes::Discovered(types.to_vec());
        let template = templates::extract_graph(domain, language, &listed, &[templates::seed_example_block()]);
        let d = Delimiters::default();
        let vars: BTreeMap<&str, Value> = BTreeMap::from([
            ("input_text", Value::from(chunk)),
            ("tuple_delimiter", Value::from(d.tuple.as_str())),
            ("record_delimiter", Value::from(d.record.as_str())),
            ("completion_delimiter", Value::from(d.completion.as_str())),
        ]);
        let text = PromptTemplate::new("<prompt tuning's example prompt>", template)
            .render(&vars)
            .expect("the example prompt has every variable it reads");
        vec![Message::system(persona), Message::user(text)]
    }
}

/// The text the one-shot questions read: the selected chunks, joined.
pub(super) fn sample_text(chunks: &[String]) -> String {
    chunks.join("\n\n")
}

/// Asks every question (the ones `given` does not answer), checking each answer.
pub(super) async fn ask_all(
    model: &ChatModel,
    chunks: &[String],
    given: &Given<'_>,
    usage: &UsageCounters,
) -> anyhow::Result<Answers> {
    let sample = sample_text(chunks);
    let domain_q = async {
        match given.domain {
            Some(d) => Ok(d.to_string()),
            None => ask(model, "domain", messages::domain(&sample), false, usage, &label_check("Domain")).await,
        }
    };
    let language_q = async {
        match given.language {
            Some(l) => Ok(l.to_string()),
            None => ask(model, "language", messages::language(&sample), false, usage, &label_check("Language")).await,
        }
    };
    let (domain, language) = futures_util::future::join(domain_q, language_q).await;
    let (domain, language) = (domain?, language?);

    let persona = ask(model, "persona", messages::persona(&domain), false, usage, &prose_check("persona")).await?;

    let (rating_check, role_check) = (prose_check("rating description"), prose_check("role"));
    let rating_q = ask(
        model,
        "report rating description",
        messages::rating(&persona, &domain, &sample),
        false,
        usage,
        &rating_check,
    );
    let role_q = ask(model, "reporter role", messages::role(&persona, &domain, &sample), false, usage, &role_check);
    let types_q = async {
        if !given.discover_entity_types {
            return Ok(None);
        }
        let check = answer::json("only the JSON object {\"entity_types\": [...]}, no other text", parse_entity_types);
        let asked = model.chat_json_with(&messages::entity_types(&persona, &domain, &sample), usage, &check).await;
        match asked {
            Ok(a) => Ok(Some(a.value)),
            Err(LlmError::Interrupted(stopped)) => Err(stopped.into()),
            Err(e) => Err(anyhow::anyhow!("prompt tuning, entity types: {e}")),
        }
    };
    let (rating_description, role, discovered) = join3(rating_q, role_q, types_q).await;
    let (rating_description, role, discovered) = (rating_description?, role?, discovered?);

    let example_types: Vec<String> = match &discovered {
        Some(types) => types.clone(),
        None => given.settings_types.iter().map(|t| t.to_uppercase()).collect(),
    };
    let examples = ask_examples(model, &persona, &domain, &language, &example_types, chunks, given, usage).await?;
    let entity_types = match discovered {
        Some(types) => EntityTypes::Discovered(types),
        None => EntityTypes::FromSettings,
    };
    Ok(Answers { domain, language, persona, rating_description, role, entity_types, examples })
}

/// Few-shot examples from the first [`MAX_EXAMPLES`] chunks. A chunk whose
/// answer stays unusable is named in a warning; fewer usable examples than
/// `min_examples_required` (or than the chunks, if fewer) is an error.
#[allow(clippy::too_many_arguments)]
async fn ask_examples(
    model: &ChatModel,
    persona: &str,
    domain: &str,
    language: &str,
    types: &[String],
    chunks: &[String],
    given: &Given<'_>,
    usage: &UsageCounters,
) -> anyhow::Result<Vec<Example>> {
    let check = AnswerCheck::new(
        format!("only entity and relationship records of the types {}, as the prompt shows", types.join(",")),
        |t: &str| parse_example(t, types),
    );
    let asked = chunks.iter().take(MAX_EXAMPLES).enumerate().map(|(i, chunk)| {
        let check = &check;
        async move {
            let what = format!("few-shot example from selected chunk {}", i + 1);
            let m = messages::example(persona, domain, language, types, chunk);
            let example: Result<Example, AskError> = ask(model, &what, m, false, usage, check).await;
            example.map(|e| Example { text: chunk.clone(), ..e })
        }
    });
    let mut examples = Vec::new();
    let mut failures = Vec::new();
    for result in join_all(asked).await {
        match result {
            Ok(e) => examples.push(e),
            Err(e @ AskError::Interrupted(_)) => return Err(e.into()),
            Err(e) => failures.push(e),
        }
    }
    let needed = given.min_examples_required.min(chunks.len().min(MAX_EXAMPLES));
    if examples.len() < needed {
        let reasons: Vec<String> = failures.iter().map(|e| format!("{e:#}")).collect();
        anyhow::bail!(
            "prompt tuning: {} usable few-shot examples, {needed} required (--min-examples-required): {}",
            examples.len(),
            reasons.join("; ")
        );
    }
    for e in &failures {
        tracing::warn!("{e:#} (left out of the extraction prompt)");
    }
    Ok(examples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_one_line() {
        assert_eq!(parse_label("Domain: Victorian fiction.\n", "Domain").unwrap(), "Victorian fiction");
        assert_eq!(parse_label("\n\n\"English\"\nbecause...", "Language").unwrap(), "English");
        assert_eq!(parse_label("**Domain**: Law", "Domain").unwrap(), "Law");
        assert_eq!(parse_label("Medicine: cardiology", "Domain").unwrap(), "Medicine: cardiology");
        assert!(parse_label("  \n ", "Domain").unwrap_err().contains("names no domain"));
        assert!(parse_label(&"x".repeat(200), "Domain").unwrap_err().contains("longer than"));
        assert!(parse_label("Engl\u{fffd}sh", "Language").is_err());
    }

    #[test]
    fn entity_types_are_cleaned_and_never_empty() {
        let v =
            serde_json::json!({"entity_types": ["person", "Military Unit", "PERSON", "<|>", "a, b", 3, "place (geo)"]});
        assert_eq!(parse_entity_types(&v).unwrap(), ["PERSON", "MILITARY UNIT", "A B", "PLACE GEO"]);
        for bad in [
            serde_json::json!({"entity_types": []}),
            serde_json::json!({"types": ["x"]}),
            serde_json::json!({"entity_types": ["##", ""]}),
        ] {
            assert!(parse_entity_types(&bad).is_err(), "{bad}");
        }
        let many: Vec<String> = (0..40).map(|i| format!("type {i}")).collect();
        assert_eq!(parse_entity_types(&serde_json::json!({ "entity_types": many })).unwrap().len(), MAX_ENTITY_TYPES);
    }

    proptest::proptest! {
        /// Whatever the model says, a label is one non-empty, short line, or an error.
        #[test]
        fn labels_are_one_short_line_or_an_error(answer in "(?s).{0,200}") {
            if let Ok(label) = parse_label(&answer, "Domain") {
                proptest::prop_assert!(!label.is_empty() && !label.contains('\n'));
                proptest::prop_assert!(label.chars().count() <= MAX_LABEL_CHARS);
            }
        }

        /// Entity types are never an empty list, and never break the prompt's list or a record.
        #[test]
        fn entity_types_are_usable_or_an_error(items in proptest::collection::vec("(?s).{0,30}", 0..20)) {
            if let Ok(types) = parse_entity_types(&serde_json::json!({ "entity_types": items })) {
                proptest::prop_assert!(!types.is_empty() && types.len() <= MAX_ENTITY_TYPES);
                let breaking = ['<', '>', '|', '#', ',', '{', '}', '\n'];
                for t in &types {
                    let usable = !t.is_empty() && !t.contains(breaking);
                    proptest::prop_assert!(usable, "{:?}", t);
                }
            }
        }
    }

    #[test]
    fn examples_keep_records_of_the_asked_types() {
        let types = vec!["CHARACTER".to_string(), "PLACE".to_string()];
        let answer = "(\"entity\"<|>SCROOGE<|>CHARACTER<|>A miser)\n##\n(\"entity\"<|>LONDON<|>PLACE<|>A city)\n##\n(\"entity\"<|>FOG<|>WEATHER<|>Fog)\n##\n(\"relationship\"<|>SCROOGE<|>LONDON<|>Lives there<|>7)\n##\n(\"relationship\"<|>SCROOGE<|>FOG<|>Walks in it<|>2)\n<|COMPLETE|>";
        let ex = parse_example(answer, &types).unwrap();
        let names: Vec<&str> = ex.entities.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["SCROOGE", "LONDON"]);
        assert_eq!(ex.relationships.len(), 1);
        assert!(parse_example("(\"entity\"<|>FOG<|>WEATHER<|>Fog)", &types).unwrap_err().contains("CHARACTER,PLACE"));
        assert!(parse_example("no records at all", &types).is_err());
    }
}
