//! Answers to extraction prompts: entities and relationships, claims, and gleaning.

use super::{Message, CLASSIFICATION};
use crate::text::{after, before_last, candidates, clean_field, first_words, h64, sentences, title_case};

const DEFAULT_TUPLE: &str = "<|>";
const DEFAULT_RECORD: &str = "##";
const DEFAULT_COMPLETION: &str = "<|COMPLETE|>";
const MAX_ENTITIES: usize = 12;
const MAX_RELATIONSHIPS: usize = 24;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Delims {
    pub(super) tuple: String,
    pub(super) record: String,
    pub(super) completion: String,
}

impl Delims {
    fn all(&self) -> [&str; 3] {
        [&self.tuple, &self.record, &self.completion]
    }
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let rest = after(text, start)?;
    rest.find(end).map(|j| &rest[..j])
}

/// Reads the rendered delimiters from an extraction prompt.
pub(super) fn read_delims(prompt: &str) -> Delims {
    let tuple = between(prompt, "<entity_name>", "<entity_type>")
        .or_else(|| between(prompt, "<subject_entity>", "<object_entity>"))
        .map(str::trim)
        .filter(|s| !s.is_empty() && s.len() < 20)
        .unwrap_or(DEFAULT_TUPLE)
        .to_string();
    let mut record = DEFAULT_RECORD.to_string();
    for marker in ["** between records", "** as the list delimiter"] {
        if let Some(i) = prompt.find(marker) {
            if let Some(j) = prompt[..i].rfind("**") {
                let r = prompt[j + 2..i].trim();
                if !r.is_empty() && r.len() < 20 {
                    record = r.to_string();
                    break;
                }
            }
        }
    }
    let mut completion = DEFAULT_COMPLETION.to_string();
    for marker in ["When the list is complete, write ", "When finished, output "] {
        if let Some(rest) = after(prompt, marker) {
            let c = rest.lines().next().unwrap_or("").trim();
            if !c.is_empty() && c.len() < 40 {
                completion = c.to_string();
                break;
            }
        }
    }
    Delims { tuple, record, completion }
}

/// The input text of an extraction prompt: after `Text:` in the real-data
/// section, up to the template's final `Output:`.
pub(super) fn extraction_input(prompt: &str) -> &str {
    let rd = after(prompt, "-Real Data-").unwrap_or(prompt);
    // GraphRAG's prompt tuning writes the labels in lower case.
    let t = after(rd, "Text:").or_else(|| after(rd, "text:")).unwrap_or(rd);
    let t = before_last(t, if t.contains("Output:") { "Output:" } else { "output:" });
    t.trim().trim_end_matches('#').trim()
}

pub(super) fn entity_types(prompt: &str) -> Vec<String> {
    let rd = after(prompt, "-Real Data-").unwrap_or(prompt);
    let line = after(rd, "Entity_types:")
        .or_else(|| after(rd, "entity_types:"))
        .map(|r| r.lines().next().unwrap_or(""))
        .or_else(|| between(prompt, "exactly one of these types: [", "]"))
        .unwrap_or("");
    let types: Vec<String> = line
        .trim()
        .trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .map(|t| t.trim().trim_matches(|c| c == '"' || c == '\'').to_uppercase())
        .filter(|t| !t.is_empty())
        .collect();
    if types.is_empty() {
        ["ORGANIZATION", "PERSON", "GEO", "EVENT"].iter().map(|s| s.to_string()).collect()
    } else {
        types
    }
}

pub(super) struct Found<'a> {
    sentences: Vec<&'a str>,
    /// Entity names per sentence (deduplicated within the sentence).
    per_sentence: Vec<Vec<String>>,
    /// Ranked: most frequent first, then by first appearance.
    pub(super) ranked: Vec<String>,
    first_sentence: std::collections::HashMap<String, usize>,
}

pub(super) fn find_entities(text: &str) -> Found<'_> {
    let sents = sentences(text);
    // words written in lower case somewhere: a sentence-initial "Yesterday"
    // whose lower-case form also occurs is an ordinary word.
    let lower_words: std::collections::HashSet<&str> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && w.chars().all(|c| !c.is_uppercase()))
        .collect();
    let raw: Vec<Vec<crate::text::Candidate>> = sents.iter().map(|s| candidates(s)).collect();
    // A single capitalised word that starts a sentence ("According", "Okafor")
    // is kept only when the name also appears elsewhere: mid-sentence, or as a
    // word of a longer name ("Ines Okafor").
    let confirmed: std::collections::HashSet<String> = raw
        .iter()
        .flatten()
        .filter(|c| !c.initial_single)
        .flat_map(|c| std::iter::once(c.name.as_str()).chain(c.name.split(' ')))
        .map(str::to_string)
        .collect();
    let mut per_sentence = Vec::new();
    let mut freq: std::collections::HashMap<String, usize> = Default::default();
    let mut first: std::collections::HashMap<String, usize> = Default::default();
    let mut order: Vec<String> = Vec::new();
    for (si, cands) in raw.into_iter().enumerate() {
        let mut names: Vec<String> = Vec::new();
        for c in cands {
            if c.initial_single
                && (lower_words.contains(c.name.to_lowercase().as_str()) || !confirmed.contains(c.name.as_str()))
            {
                continue;
            }
            if !names.contains(&c.name) {
                names.push(c.name);
            }
        }
        for n in &names {
            *freq.entry(n.clone()).or_default() += 1;
            if !first.contains_key(n) {
                first.insert(n.clone(), si);
                order.push(n.clone());
            }
        }
        per_sentence.push(names);
    }
    let mut ranked = order;
    ranked.sort_by_key(|n| (std::cmp::Reverse(freq[n]), first[n]));
    Found { sentences: sents, per_sentence, ranked, first_sentence: first }
}

fn entity_record(d: &Delims, name: &str, etype: &str, desc: &str) -> String {
    let td = &d.tuple;
    format!("(\"entity\"{td}{name}{td}{etype}{td}{})", clean_field(desc, &d.all()))
}

fn pick_type(types: &[String], name: &str) -> String {
    types[(h64(name) % types.len() as u64) as usize].clone()
}

fn join_records(d: &Delims, records: &[String]) -> String {
    if records.is_empty() {
        return d.completion.clone();
    }
    format!("{}\n{}", records.join(&format!("\n{}\n", d.record)), d.completion)
}

pub(super) fn extract_graph(prompt: &str) -> String {
    let d = read_delims(prompt);
    let types = entity_types(prompt);
    let text = extraction_input(prompt);
    let found = find_entities(text);
    let keep: Vec<&String> = found.ranked.iter().take(MAX_ENTITIES).collect();
    // entities in order of first appearance
    let mut ents: Vec<&String> = keep.clone();
    ents.sort_by_key(|n| found.first_sentence[*n]);
    let mut records = Vec::new();
    for name in &ents {
        let s = found.sentences[found.first_sentence[*name]];
        records.push(entity_record(&d, name, &pick_type(&types, name), s));
    }
    let td = &d.tuple;
    let mut seen_pairs = std::collections::HashSet::new();
    let mut rels = 0;
    'outer: for (si, names) in found.per_sentence.iter().enumerate() {
        let in_keep: Vec<&String> = names.iter().filter(|n| keep.contains(n)).collect();
        for i in 0..in_keep.len() {
            for j in i + 1..in_keep.len() {
                let (a, b) = (in_keep[i], in_keep[j]);
                let key = if a < b { (a, b) } else { (b, a) };
                if !seen_pairs.insert(key) {
                    continue;
                }
                let strength = 1 + h64(&format!("{a}|{b}")) % 10;
                records.push(format!(
                    "(\"relationship\"{td}{a}{td}{b}{td}{}{td}{strength})",
                    clean_field(found.sentences[si], &d.all())
                ));
                rels += 1;
                if rels >= MAX_RELATIONSHIPS {
                    break 'outer;
                }
            }
        }
    }
    join_records(&d, &records)
}

/// The first system/user message of the conversation matching `class`.
fn original_prompt<'a>(messages: &'a [Message], class: &str) -> &'a str {
    let rule = CLASSIFICATION.iter().find(|r| r.class == class);
    messages
        .iter()
        .filter(|m| m.role != "assistant")
        .find(|m| rule.is_some_and(|r| r.phrases.iter().any(|p| m.content.contains(p))))
        .map_or("", |m| m.content.as_str())
}

fn assistant_text(messages: &[Message]) -> String {
    messages.iter().filter(|m| m.role == "assistant").map(|m| m.content.as_str()).collect::<Vec<_>>().join("\n")
}

pub(super) fn extract_graph_glean(messages: &[Message]) -> String {
    let prompt = original_prompt(messages, "extract_graph");
    let d = read_delims(prompt);
    let types = entity_types(prompt);
    let found = find_entities(extraction_input(prompt));
    let said = assistant_text(messages);
    let td = &d.tuple;
    let records: Vec<String> = found
        .ranked
        .iter()
        .filter(|n| !said.contains(&format!("{td}{n}{td}")))
        .take(2)
        .map(|n| {
            let s = found.sentences[found.first_sentence[n]];
            entity_record(&d, n, &pick_type(&types, n), s)
        })
        .collect();
    join_records(&d, &records)
}

/// `Y` on the first loop check when the previous gleaning answer added records,
/// `N` otherwise: deterministic and finite.
pub(super) fn gleaning_loop(messages: &[Message], class: &str) -> String {
    let (extract_class, continue_class) = if class == "extract_graph_loop" {
        ("extract_graph", "extract_graph_continue")
    } else {
        ("extract_claims", "extract_claims_continue")
    };
    let matches = |m: &Message, c: &str| {
        m.role == "user"
            && CLASSIFICATION
                .iter()
                .find(|r| r.class == c)
                .is_some_and(|r| r.phrases.iter().any(|p| m.content.contains(p)))
    };
    let loops = messages.iter().filter(|m| matches(m, class)).count();
    let continues = messages.iter().filter(|m| matches(m, continue_class)).count();
    let d = read_delims(original_prompt(messages, extract_class));
    let last_added =
        messages.iter().rev().find(|m| m.role == "assistant").is_some_and(|m| m.content.contains(&d.tuple));
    if loops == 1 && continues >= 1 && last_added {
        "Y".into()
    } else {
        "N".into()
    }
}

const CLAIM_TYPES: &[&str] = &["REPORTED ACTIVITY", "PUBLIC STATEMENT", "ASSOCIATION"];
const CLAIM_STATUS: &[&str] = &["TRUE", "SUSPECTED", "FALSE"];

/// An ISO date (YYYY-MM-DD) in the sentence, as a timestamp.
fn iso_date(s: &str) -> Option<String> {
    s.split(|c: char| !(c.is_ascii_digit() || c == '-'))
        .find(|w| {
            let b = w.as_bytes();
            w.len() == 10
                && b[4] == b'-'
                && b[7] == b'-'
                && w.chars().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
        })
        .map(|w| format!("{w}T00:00:00"))
}

/// Candidate claims: (subject, object, sentence), one per subject.
pub(super) fn claim_candidates(text: &str) -> Vec<(String, String, String)> {
    let found = find_entities(text);
    let mut out: Vec<(String, String, String)> = Vec::new();
    for (si, names) in found.per_sentence.iter().enumerate() {
        let Some(subj) = names.first() else { continue };
        if out.iter().any(|c| &c.0 == subj) {
            continue;
        }
        let obj = names.get(1).cloned().unwrap_or_else(|| "NONE".into());
        out.push((subj.clone(), obj, found.sentences[si].to_string()));
    }
    out
}

pub(super) fn claim_record(d: &Delims, (subj, obj, s): &(String, String, String)) -> String {
    let td = &d.tuple;
    let h = h64(s);
    let ty = CLAIM_TYPES[(h % CLAIM_TYPES.len() as u64) as usize];
    let status = CLAIM_STATUS[((h >> 8) % CLAIM_STATUS.len() as u64) as usize];
    let date = iso_date(s).unwrap_or_else(|| "NONE".into());
    let sentence = clean_field(s, &d.all());
    format!(
        "({subj}{td}{obj}{td}{ty}{td}{status}{td}{date}{td}{date}{td}{} is the subject of a claim: {}{td}{})",
        title_case(subj),
        first_words(&sentence, 40),
        sentence
    )
}

pub(super) fn extract_claims(prompt: &str) -> String {
    let d = read_delims(prompt);
    let text = extraction_input(prompt);
    let n = (h64(text) % 3) as usize;
    let records: Vec<String> = claim_candidates(text).iter().take(n).map(|c| claim_record(&d, c)).collect();
    join_records(&d, &records)
}

pub(super) fn extract_claims_glean(messages: &[Message]) -> String {
    let prompt = original_prompt(messages, "extract_claims");
    let d = read_delims(prompt);
    let said = assistant_text(messages);
    let records: Vec<String> = claim_candidates(extraction_input(prompt))
        .iter()
        .filter(|c| !said.contains(&format!("({}{}", c.0, d.tuple)))
        .take(1)
        .map(|c| claim_record(&d, c))
        .collect();
    join_records(&d, &records)
}
