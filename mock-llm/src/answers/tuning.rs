//! Answers to prompt tuning's questions (graphrag-rs's and Microsoft
//! GraphRAG's): domain, language, persona, report rating description,
//! entity types and reporter role. The few-shot examples are asked with an
//! extraction prompt and answered by `extraction`.

use std::collections::HashMap;

use serde_json::json;

use super::extraction::find_entities;
use crate::text::{after, before, title_case, words_lower};

/// The sample text of a tuning question: after its last `Text:`, up to the
/// closing label line when there is one.
fn sample(prompt: &str) -> &str {
    let Some(i) = prompt.rfind("Text:") else { return prompt };
    let t = &prompt[i + "Text:".len()..];
    let t = ["\nDomain:", "\nLanguage:", "\nRole:", "\nRating description:"]
        .iter()
        .filter_map(|end| t.rfind(end).map(|j| &t[..j]))
        .min_by_key(|s| s.len())
        .unwrap_or(t);
    t.trim()
}

/// The name the sample mentions most (title case), or its most frequent long word.
fn main_subject(text: &str) -> String {
    if let Some(name) = find_entities(text).ranked.first() {
        return title_case(name);
    }
    frequent_long_word(text).map(|w| title_case(&w)).unwrap_or_else(|| "General Knowledge".into())
}

/// The most frequent word of at least 7 letters (ties: the first seen).
fn frequent_long_word(text: &str) -> Option<String> {
    let words: Vec<String> = words_lower(text).into_iter().filter(|w| w.chars().count() >= 7).collect();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for w in &words {
        *counts.entry(w.as_str()).or_default() += 1;
    }
    let best = words.iter().map(|w| counts[w.as_str()]).max()?;
    words.iter().find(|w| counts[w.as_str()] == best).cloned()
}

/// The domain a later question names (`Domain: X` line, or `... of the X domain`).
fn named_domain(prompt: &str) -> String {
    if let Some(rest) = after(prompt, "\nDomain: ") {
        return rest.lines().next().unwrap_or("").trim().to_string();
    }
    if let Some(rest) = after(prompt, "documents of the ") {
        return before(rest, " domain").trim().to_string();
    }
    "the domain of the texts".into()
}

pub(super) fn domain(prompt: &str) -> String {
    format!("Writing about {}", main_subject(sample(prompt)))
}

pub(super) fn language(prompt: &str) -> String {
    let text = sample(prompt);
    let letters = text.chars().filter(|c| c.is_alphabetic()).count().max(1);
    let ascii = text.chars().filter(|c| c.is_ascii_alphabetic()).count();
    if ascii * 10 >= letters * 9 { "English" } else { "Multilingual" }.into()
}

pub(super) fn persona(prompt: &str) -> String {
    let domain = named_domain(prompt);
    format!(
        "You are an expert in {domain}. You are skilled at mapping the people, places and groups that such texts name and how they relate to each other. You help people understand the communities these entities form."
    )
}

pub(super) fn rating(prompt: &str) -> String {
    let domain = named_domain(prompt);
    format!(
        "A float score between 0-10 that represents how much a community matters to {domain}, with 1 being trivial and 10 being central to the texts."
    )
}

pub(super) fn role(prompt: &str) -> String {
    let domain = named_domain(prompt);
    format!(
        "An analyst of {domain} who reports on a community given its entities, relationships and optional claims; the report tells readers what the community means for the texts."
    )
}

/// Three general types and one of the sample's own: its most frequent long word.
pub(super) fn entity_types(prompt: &str) -> String {
    let mut types = vec!["CHARACTER".to_string(), "PLACE".to_string(), "GROUP".to_string()];
    if let Some(w) = frequent_long_word(sample(prompt)) {
        types.push(w.to_uppercase());
    }
    json!({ "entity_types": types }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "Scrooge counted his money. Scrooge and Marley were partners; Marley's counting-house stood in London. Scrooge kept counting, counting, always counting.";

    #[test]
    fn answers_follow_the_sample() {
        let domain_q = format!("name the domain of the sample text.\n\nText: {SAMPLE}\nDomain:\n");
        assert_eq!(domain(&domain_q), "Writing about Marley", "the name most often met mid-sentence");
        assert_eq!(language(&format!("Text: {SAMPLE}\nLanguage:")), "English");
        assert_eq!(language("Text: 斯克鲁奇和马利是合伙人\nLanguage:"), "Multilingual");
        let types: serde_json::Value =
            serde_json::from_str(&entity_types(&format!("List the entity types\n\nText:\n{SAMPLE}\n"))).unwrap();
        assert_eq!(types["entity_types"], json!(["CHARACTER", "PLACE", "GROUP", "COUNTING"]));
        let p = persona("Write a persona for this task: find ... in documents of the Writing about Scrooge domain.");
        assert!(p.starts_with("You are an expert in Writing about Scrooge."), "{p}");
        assert!(rating("Rate.\nDomain: Law\nText: x").contains("matters to Law,"));
        assert!(role("Write.\nDomain: Law\nText: x\nRole:").starts_with("An analyst of Law "));
    }
}

#[cfg(test)]
mod template_tests {
    use super::super::{classify, Message};

    /// Prompt tuning's own templates (project/src/prompt_tune/templates/)
    /// are classified: its questions, and the prompts it writes.
    #[test]
    fn tuning_templates_are_classified() {
        for (file, class) in [
            ("domain", "tune_domain"),
            ("language", "tune_language"),
            ("persona", "tune_persona"),
            ("rating", "tune_rating"),
            ("entity_types", "tune_entity_types"),
            ("role", "tune_role"),
            ("extract_graph", "extract_graph"),
            ("summarize_descriptions", "summarize_descriptions"),
            ("community_report_graph", "community_report_graph"),
        ] {
            let path = format!("{}/../project/src/prompt_tune/templates/{file}.txt", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(path).unwrap();
            let msgs = [Message::new("system", "You are an expert in law."), Message::new("user", &text)];
            assert_eq!(classify(&msgs), class, "{file}");
        }
    }
}
