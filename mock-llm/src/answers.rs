//! Prompt classification and deterministic answers: every answer is a pure
//! function of the request messages (and `response_format`).

use serde_json::{json, Map, Value};

use crate::text::{
    after, after_last, before, before_last, candidates, citation, clean_field, content_words, first_words, h64,
    parse_tables, sentences, title_case, Table,
};

/// One chat message (text content only; multi-part content is concatenated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Message {
        Message { role: role.to_string(), content: content.to_string() }
    }
}

/// Where a classification phrase is looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only the last user message (gleaning follow-ups, which come after the
    /// original extraction prompt in the same conversation).
    LastUser,
    /// Any system or user message.
    Prompt,
}

/// One row of the classification table: the first rule (in order) one of whose
/// phrases occurs (case-sensitive) in the scope decides the prompt class.
#[derive(Debug, Clone, Copy)]
pub struct ClassRule {
    pub class: &'static str,
    pub scope: Scope,
    /// Alternatives: our template's phrase first, then Microsoft GraphRAG's /
    /// LightRAG's original wording where it differs.
    pub phrases: &'static [&'static str],
}

/// The classification table. Update the phrases here when prompts/*.txt change.
pub const CLASSIFICATION: &[ClassRule] = &[
    // graphrag-rs's start-up check of a model endpoint (engine/src/llm/preflight.rs).
    ClassRule { class: "connection_check", scope: Scope::LastUser, phrases: &["graphrag-rs connection check"] },
    ClassRule {
        class: "extract_graph_loop",
        scope: Scope::LastUser,
        phrases: &[
            "Some entities or relationships may still be missing",
            "Answer Y if there are still entities or relationships",
        ],
    },
    ClassRule {
        class: "extract_claims_loop",
        scope: Scope::LastUser,
        phrases: &[
            "Some claims may still be missing",
            "Answer Y if there are still entities that need to be added",
            "Answer YES",
        ],
    },
    ClassRule {
        class: "extract_graph_continue",
        scope: Scope::LastUser,
        phrases: &["left out MANY entities and relationships", "MANY entities and relationships were missed"],
    },
    ClassRule {
        class: "extract_claims_continue",
        scope: Scope::LastUser,
        phrases: &["left out MANY claims", "MANY entities were missed"],
    },
    ClassRule { class: "extract_claims", scope: Scope::Prompt, phrases: &["Claim description:"] },
    ClassRule {
        class: "extract_graph",
        scope: Scope::Prompt,
        phrases: &["Find every entity of those types", "identify all entities of those types from the text"],
    },
    ClassRule {
        class: "summarize_descriptions",
        scope: Scope::Prompt,
        phrases: &[
            "writes one comprehensive summary from several descriptions",
            "comprehensive summary of the data provided below",
        ],
    },
    ClassRule { class: "resolve_entities", scope: Scope::Prompt, phrases: &["refer to the same real-world entity"] },
    ClassRule { class: "community_report_graph", scope: Scope::Prompt, phrases: &["IMPACT SEVERITY RATING"] },
    ClassRule { class: "community_report_text", scope: Scope::Prompt, phrases: &["IMPORTANCE RATING"] },
    ClassRule {
        class: "drift_expand",
        scope: Scope::Prompt,
        phrases: &["Write a hypothetical answer to this query", "Create a hypothetical answer to the following query"],
    },
    ClassRule {
        class: "drift_primer",
        scope: Scope::Prompt,
        phrases: &["reasons over a knowledge graph to answer", "designed to reason over a knowledge graph"],
    },
    ClassRule {
        class: "drift_search",
        scope: Scope::Prompt,
        phrases: &["This question is part of a broader research question", "'follow_up_queries'"],
    },
    ClassRule {
        class: "drift_reduce",
        scope: Scope::Prompt,
        phrases: &[
            "combining the intermediate answers gathered during a multi-step search",
            "responding to questions about data in the reports provided",
        ],
    },
    ClassRule {
        class: "global_map",
        scope: Scope::Prompt,
        phrases: &[
            "Produce a list of key points that answer the user's question",
            "list of key points that responds to the user's question",
        ],
    },
    ClassRule {
        class: "global_reduce",
        scope: Scope::Prompt,
        phrases: &["combining the views of several analysts", "synthesizing perspectives from multiple analysts"],
    },
    ClassRule { class: "keywords_extraction", scope: Scope::Prompt, phrases: &["high_level_keywords"] },
    ClassRule {
        class: "rate_community",
        scope: Scope::Prompt,
        phrases: &["Rate, on a scale from 0 to 5, how relevant", "how relevant or helpful is the provided information"],
    },
    ClassRule {
        class: "question_gen",
        scope: Scope::Prompt,
        phrases: &["candidate questions that the user might ask next", "generating a bulleted list of"],
    },
    ClassRule {
        class: "mix_search",
        scope: Scope::Prompt,
        phrases: &["using a knowledge graph and a set of document passages"],
    },
    ClassRule {
        class: "basic_search",
        scope: Scope::Prompt,
        phrases: &["answers questions about the source passages provided below", "[Data: Sources (record ids)]"],
    },
    ClassRule {
        class: "local_search",
        scope: Scope::Prompt,
        phrases: &["answers questions about the data in the tables provided below", "---Data tables---"],
    },
];

/// How graphrag-rs begins a corrective retry.
pub const CORRECTION: &str = "Your previous answer could not be used";

/// Class of any request that no rule matches.
pub const OTHER: &str = "other";

/// The prompt class of a conversation (a name from [`CLASSIFICATION`] or
/// [`OTHER`]).
pub fn classify(messages: &[Message]) -> &'static str {
    classify_at(messages).0
}

/// Class plus the index of the message that matched.
fn classify_at(messages: &[Message]) -> (&'static str, Option<usize>) {
    let last_user = messages.iter().rposition(|m| m.role == "user");
    for rule in CLASSIFICATION {
        let hit = |i: usize| rule.phrases.iter().any(|p| messages[i].content.contains(p));
        match rule.scope {
            Scope::LastUser => {
                if let Some(i) = last_user {
                    if hit(i) {
                        return (rule.class, Some(i));
                    }
                }
            }
            Scope::Prompt => {
                if let Some(i) = (0..messages.len()).find(|&i| messages[i].role != "assistant" && hit(i)) {
                    return (rule.class, Some(i));
                }
            }
        }
    }
    (OTHER, None)
}

/// A chat answer: its prompt class and message content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatAnswer {
    pub class: &'static str,
    pub content: String,
}

/// The deterministic answer to a conversation. `response_format` is the
/// request's `response_format` value, if any: when it asks for JSON the
/// content is always JSON.
pub fn answer(messages: &[Message], response_format: Option<&Value>) -> ChatAnswer {
    // A client's corrective retry (its unusable answer, then "Your previous
    // answer could not be used: ..."): answered as the request before it.
    if let [earlier @ .., last_answer, correction] = messages {
        if last_answer.role == "assistant" && correction.role == "user" && correction.content.starts_with(CORRECTION) {
            return answer(earlier, response_format);
        }
    }
    let (class, idx) = classify_at(messages);
    let prompt = idx.map_or("", |i| messages[i].content.as_str());
    let last_user_idx = messages.iter().rposition(|m| m.role == "user");
    let query = match last_user_idx {
        Some(i) if Some(i) != idx => messages[i].content.as_str(),
        _ => "",
    };
    let content = match class {
        "connection_check" => "OK".to_string(),
        "extract_graph" => extract_graph(prompt),
        "extract_graph_continue" => extract_graph_glean(messages),
        "extract_graph_loop" => gleaning_loop(messages, class),
        "extract_claims" => extract_claims(prompt),
        "extract_claims_continue" => extract_claims_glean(messages),
        "extract_claims_loop" => gleaning_loop(messages, class),
        "summarize_descriptions" => summarize(prompt),
        "resolve_entities" => resolve_entities(prompt),
        "community_report_graph" => community_report_graph(prompt),
        "community_report_text" => community_report_text(prompt),
        "global_map" => global_map(prompt, query),
        "global_reduce" => global_reduce(prompt, query),
        "keywords_extraction" => keywords(prompt),
        "rate_community" => rate_community(prompt, query),
        "drift_expand" => drift_expand(prompt),
        "drift_primer" => drift_primer(prompt),
        "drift_search" => drift_search(prompt, query),
        "drift_reduce" => drift_reduce(prompt, query),
        "question_gen" => question_gen(prompt),
        "local_search" => data_answer("Local search", prompt, query),
        "basic_search" => data_answer("Basic search", prompt, query),
        "mix_search" => data_answer("Mix search", prompt, query),
        _ => {
            let last = last_user_idx.map_or("", |i| messages[i].content.as_str());
            format!("This is a deterministic mock answer to: {}", first_words(last, 30))
        }
    };
    ChatAnswer { class, content: enforce_json(content, response_format) }
}

// ---------------------------------------------------------------------------
// JSON mode
// ---------------------------------------------------------------------------

fn enforce_json(content: String, response_format: Option<&Value>) -> String {
    let Some(rf) = response_format else {
        return content;
    };
    let ty = rf.get("type").and_then(Value::as_str).unwrap_or("");
    if ty != "json_object" && ty != "json_schema" {
        return content;
    }
    if serde_json::from_str::<Value>(&content).is_ok_and(|v| v.is_object()) {
        return content;
    }
    let schema = rf.get("json_schema").and_then(|s| s.get("schema"));
    let value = match schema {
        Some(s) if ty == "json_schema" => instantiate(s, &content, 0),
        _ => json!({ "answer": content }),
    };
    let value = if value.is_object() { value } else { json!({ "answer": value }) };
    value.to_string()
}

/// A value that conforms to (simple) JSON schemas, strings filled from `text`.
fn instantiate(schema: &Value, text: &str, depth: usize) -> Value {
    if depth > 8 {
        return Value::Null;
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array).and_then(|a| a.first()) {
        return e.clone();
    }
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(first) = schema.get(key).and_then(Value::as_array).and_then(|a| a.first()) {
            return instantiate(first, text, depth + 1);
        }
    }
    let ty = match schema.get("type") {
        Some(Value::String(s)) => s.as_str(),
        Some(Value::Array(a)) => a.iter().find_map(Value::as_str).unwrap_or("string"),
        _ if schema.get("properties").is_some() => "object",
        _ => "string",
    };
    match ty {
        "object" => {
            let mut m = Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, sub) in props {
                    m.insert(k.clone(), instantiate(sub, text, depth + 1));
                }
            }
            Value::Object(m)
        }
        "array" => match schema.get("items") {
            Some(items) => Value::Array(vec![instantiate(items, text, depth + 1)]),
            None => Value::Array(vec![]),
        },
        "integer" => json!(schema.get("minimum").and_then(Value::as_i64).unwrap_or(0)),
        "number" => json!(schema.get("minimum").and_then(Value::as_f64).unwrap_or(0.0)),
        "boolean" => Value::Bool(false),
        "null" => Value::Null,
        _ => Value::String(first_words(text, 30)),
    }
}

// ---------------------------------------------------------------------------
// extraction
// ---------------------------------------------------------------------------

const DEFAULT_TUPLE: &str = "<|>";
const DEFAULT_RECORD: &str = "##";
const DEFAULT_COMPLETION: &str = "<|COMPLETE|>";
const MAX_ENTITIES: usize = 12;
const MAX_RELATIONSHIPS: usize = 24;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Delims {
    tuple: String,
    record: String,
    completion: String,
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
fn read_delims(prompt: &str) -> Delims {
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
fn extraction_input(prompt: &str) -> &str {
    let rd = after(prompt, "-Real Data-").unwrap_or(prompt);
    let t = after(rd, "Text:").unwrap_or(rd);
    let t = before_last(t, "Output:");
    t.trim().trim_end_matches('#').trim()
}

fn entity_types(prompt: &str) -> Vec<String> {
    let rd = after(prompt, "-Real Data-").unwrap_or(prompt);
    let line = after(rd, "Entity_types:")
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

struct Found<'a> {
    sentences: Vec<&'a str>,
    /// Entity names per sentence (deduplicated within the sentence).
    per_sentence: Vec<Vec<String>>,
    /// Ranked: most frequent first, then by first appearance.
    ranked: Vec<String>,
    first_sentence: std::collections::HashMap<String, usize>,
}

fn find_entities(text: &str) -> Found<'_> {
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

fn extract_graph(prompt: &str) -> String {
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

fn extract_graph_glean(messages: &[Message]) -> String {
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
fn gleaning_loop(messages: &[Message], class: &str) -> String {
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
fn claim_candidates(text: &str) -> Vec<(String, String, String)> {
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

fn claim_record(d: &Delims, (subj, obj, s): &(String, String, String)) -> String {
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

fn extract_claims(prompt: &str) -> String {
    let d = read_delims(prompt);
    let text = extraction_input(prompt);
    let n = (h64(text) % 3) as usize;
    let records: Vec<String> = claim_candidates(text).iter().take(n).map(|c| claim_record(&d, c)).collect();
    join_records(&d, &records)
}

fn extract_claims_glean(messages: &[Message]) -> String {
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

// ---------------------------------------------------------------------------
// summaries and reports
// ---------------------------------------------------------------------------

fn number_after(text: &str, markers: &[&str]) -> Option<usize> {
    markers.iter().find_map(|m| {
        let rest = after(text, m)?;
        let digits: String = rest.trim_start().chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })
}

fn summarize(prompt: &str) -> String {
    let data = after_last(prompt, "-Data-").unwrap_or(prompt);
    let name = after(data, "Entities:").map(|r| r.lines().next().unwrap_or("").trim()).unwrap_or("");
    let list = after(data, "Description List:").unwrap_or("");
    let list = before(list, "\n#######").trim();
    let max = number_after(prompt, &["Keep the summary under ", "length to "]).unwrap_or(500);
    let items: Vec<String> = match serde_json::from_str::<Value>(list) {
        Ok(Value::Array(a)) => a.iter().map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).collect(),
        _ => list.lines().map(|l| l.trim().trim_start_matches(['-', '*']).trim().to_string()).collect(),
    };
    let mut seen: Vec<String> = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    for it in items {
        let t = it.split_whitespace().collect::<Vec<_>>().join(" ");
        if t.is_empty() || seen.contains(&t.to_lowercase()) {
            continue;
        }
        seen.push(t.to_lowercase());
        let t = if t.ends_with(['.', '!', '?']) { t } else { format!("{t}.") };
        parts.push(t);
    }
    if parts.is_empty() {
        return format!("{} has no recorded description.", name.trim());
    }
    let joined = parts.join(" ");
    let words: Vec<&str> = joined.split_whitespace().collect();
    words[..words.len().min(max.max(1))].join(" ")
}

/// Entity resolution questions (`Question N:` then `A: "NAME" ...` and
/// `B: "NAME" ...` lines): yes when the two names share a word (ignoring
/// case), one `N: yes|no` line per question.
fn resolve_entities(prompt: &str) -> String {
    let questions = after_last(prompt, "-Questions-").unwrap_or(prompt);
    let name = |line: &str| line.split('"').nth(1).unwrap_or("").to_lowercase();
    let mut out = Vec::new();
    let mut a: Option<String> = None;
    for line in questions.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("A: ") {
            a = Some(name(rest));
        } else if let (Some(rest), Some(first)) = (line.strip_prefix("B: "), a.take()) {
            let second = name(rest);
            let words: Vec<&str> = first.split_whitespace().collect();
            let same = second.split_whitespace().any(|w| words.contains(&w));
            out.push(format!("{}: {}", out.len() + 1, if same { "yes" } else { "no" }));
        }
    }
    out.join("\n")
}

fn report_input(prompt: &str) -> &str {
    let rd = after(prompt, "# Real Data").unwrap_or(prompt);
    let t = after(rd, "Text:").unwrap_or(rd);
    let t = before(t, "The report should include the following sections");
    before_last(t, "Output:").trim()
}

fn find_table<'a>(tables: &'a [Table], name: &str) -> Option<&'a Table> {
    tables.iter().find(|t| t.name == name && !t.rows.is_empty())
}

fn rating(input: &str) -> f64 {
    (h64(input) % 101) as f64 / 10.0
}

fn title_from(names: &[String], fallback: &str) -> String {
    match names {
        [] => fallback.to_string(),
        [a] => title_case(a),
        [a, b, ..] => format!("{} and {}", title_case(a), title_case(b)),
    }
}

fn list_names(names: &[String], n: usize) -> String {
    let v: Vec<String> = names.iter().take(n).map(|s| title_case(s)).collect();
    match v.len() {
        0 => "no named entities".into(),
        1 => v[0].clone(),
        k => format!("{} and {}", v[..k - 1].join(", "), v[k - 1]),
    }
}

fn report_json(title: String, summary: String, input: &str, expl: String, findings: Vec<(String, String)>) -> String {
    let findings: Vec<Value> = findings.into_iter().map(|(s, e)| json!({"summary": s, "explanation": e})).collect();
    json!({
        "title": title,
        "summary": summary,
        "rating": rating(input),
        "rating_explanation": expl,
        "findings": findings,
    })
    .to_string()
}

fn community_report_graph(prompt: &str) -> String {
    let input = report_input(prompt);
    let tables = parse_tables(input);
    let empty = Table::default();
    let ents = find_table(&tables, "Entities").unwrap_or(&empty);
    let rels = find_table(&tables, "Relationships").unwrap_or(&empty);
    let claims = find_table(&tables, "Claims").unwrap_or(&empty);
    let mut names: Vec<String> =
        (0..ents.rows.len()).map(|i| ents.cell(i, &["entity", "title", "name"])).filter(|n| !n.is_empty()).collect();
    if names.is_empty() {
        let found = find_entities(input);
        names = found.ranked.into_iter().take(5).collect();
    }
    let cite_all = citation(&[("Entities", ents.ids()), ("Relationships", rels.ids())]);
    let first_desc = ents.cell(0, &["description"]);
    let summary = format!(
        "The community is centred on {}, with {} entities and {} relationships. {} {}",
        list_names(&names, 3),
        ents.rows.len().max(names.len()),
        rels.rows.len(),
        first_words(&first_desc, 25),
        cite_all
    )
    .split_whitespace()
    .collect::<Vec<_>>()
    .join(" ");
    let mut findings: Vec<(String, String)> = Vec::new();
    for i in 0..ents.rows.len().min(5) {
        let name = ents.cell(i, &["entity", "title", "name"]);
        let id = ents.rows[i][0].clone();
        let rel_ids: Vec<String> = (0..rels.rows.len())
            .filter(|&r| rels.cell(r, &["source"]) == name || rels.cell(r, &["target"]) == name)
            .map(|r| rels.rows[r][0].clone())
            .collect();
        let desc = ents.cell(i, &["description"]);
        let desc = if desc.is_empty() {
            format!("{} is a member of the community", title_case(&name))
        } else {
            first_words(&desc, 40)
        };
        findings.push((
            format!("The role of {}", title_case(&name)),
            format!("{desc} {}", citation(&[("Entities", vec![id]), ("Relationships", rel_ids)])),
        ));
    }
    if !claims.rows.is_empty() && findings.len() < 5 {
        findings.push((
            "Claims about the community".into(),
            format!(
                "The data records {} claims about members of the community. {}",
                claims.rows.len(),
                citation(&[("Claims", claims.ids())])
            ),
        ));
    }
    if findings.len() < 2 && !rels.rows.is_empty() {
        findings.push((
            "How the entities are connected".into(),
            format!(
                "{} {}",
                first_words(&rels.cell(0, &["description"]), 40),
                citation(&[("Relationships", rels.ids())])
            ),
        ));
    }
    while findings.len() < 2 {
        findings.push((
            "Limited data".into(),
            format!("The community data lists few records about {}. {cite_all}", list_names(&names, 2))
                .trim()
                .to_string(),
        ));
    }
    report_json(
        title_from(&names, "Community Overview"),
        summary,
        input,
        format!(
            "The rating reflects the {} entities and {} relationships of the community.",
            ents.rows.len().max(names.len()),
            rels.rows.len()
        ),
        findings,
    )
}

fn community_report_text(prompt: &str) -> String {
    let input = report_input(prompt);
    let tables = parse_tables(input);
    let src = find_table(&tables, "Sources").or_else(|| tables.iter().find(|t| !t.rows.is_empty()));
    let passages: Vec<(String, String)> = match src {
        Some(t) => (0..t.rows.len())
            .map(|i| {
                let text = t.cell(i, &["text", "content", "chunk"]);
                let text = if text.is_empty() { t.rows[i].last().cloned().unwrap_or_default() } else { text };
                (t.rows[i][0].clone(), text)
            })
            .collect(),
        None => vec![(String::new(), input.to_string())],
    };
    let all_text: String = passages.iter().map(|p| p.1.as_str()).collect::<Vec<_>>().join("\n");
    let names: Vec<String> = find_entities(&all_text).ranked.into_iter().take(5).collect();
    let ids: Vec<String> = passages.iter().map(|p| p.0.clone()).filter(|i| !i.is_empty()).collect();
    let summary = format!(
        "The {} source passages of this community concern {}. {}",
        passages.len(),
        list_names(&names, 4),
        citation(&[("Sources", ids.clone())])
    )
    .trim()
    .to_string();
    let mut findings: Vec<(String, String)> = Vec::new();
    for (id, text) in passages.iter().take(5) {
        let first = sentences(text).first().copied().unwrap_or("").to_string();
        if first.is_empty() {
            continue;
        }
        let cite = if id.is_empty() { String::new() } else { citation(&[("Sources", vec![id.clone()])]) };
        findings.push((first_words(&first, 8), format!("{} {cite}", first_words(&first, 40)).trim().to_string()));
    }
    while findings.len() < 2 {
        findings.push((
            "Limited source material".into(),
            format!(
                "The passages provide little detail beyond {}. {}",
                list_names(&names, 2),
                citation(&[("Sources", ids.clone())])
            )
            .trim()
            .to_string(),
        ));
    }
    report_json(
        title_from(&names, "Source Passages Overview"),
        summary,
        input,
        format!(
            "The rating reflects the {} passages and the {} named entities they mention.",
            passages.len(),
            names.len()
        ),
        findings,
    )
}

// ---------------------------------------------------------------------------
// query-time prompts
// ---------------------------------------------------------------------------

fn global_map(prompt: &str, query: &str) -> String {
    let tables = parse_tables(prompt);
    let reports = find_table(&tables, "Reports")
        .or_else(|| tables.iter().find(|t| t.col(&["title"]).is_some() && !t.rows.is_empty()));
    let mut points = Vec::new();
    if let Some(t) = reports {
        for i in 0..t.rows.len().min(5) {
            let id = t.rows[i][0].clone();
            let title = t.cell(i, &["title"]);
            let content = t.cell(i, &["content", "summary", "full_content"]);
            let text = format!("{title}: {}", first_words(&content, 25));
            points.push(json!({
                "description": format!("{} {}", text.trim().trim_end_matches(':'), citation(&[("Reports", vec![id.clone()])])),
                "score": 10 + h64(&format!("{id}\u{1f}{query}")) % 90,
            }));
        }
    }
    if points.is_empty() {
        points.push(json!({
            "description": "I don't know: the provided reports do not cover this question.",
            "score": 0,
        }));
    }
    json!({ "points": points }).to_string()
}

fn global_reduce(prompt: &str, query: &str) -> String {
    let data = after(prompt, "---Analyst Reports---").unwrap_or(prompt);
    let data = before(data, "---Goal---");
    let points: Vec<&str> = data
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("----Analyst") && !l.starts_with("Importance Score"))
        .take(5)
        .collect();
    if points.is_empty() {
        return "I don't know: the reports do not contain enough information to answer this question.".into();
    }
    let mut out = format!("## Answer\n\nThe key points that bear on \"{}\" are:\n\n", first_words(query, 20));
    for p in points {
        out.push_str(&format!("- {p}\n"));
    }
    out
}

fn keywords(prompt: &str) -> String {
    let rd = after(prompt, "---Real Data---").unwrap_or(prompt);
    let q = after_last(rd, "Query:").unwrap_or(rd);
    let q = before_last(q, "Output:").trim().trim_matches('"').trim();
    let mut low: Vec<String> = Vec::new();
    for s in sentences(q) {
        for c in candidates(s) {
            let n = title_case(&c.name);
            if !low.contains(&n) {
                low.push(n);
            }
        }
    }
    let low_words: Vec<String> = low.iter().flat_map(|n| crate::text::words_lower(n)).collect();
    let high: Vec<String> = content_words(q)
        .into_iter()
        .filter(|w| w.chars().count() >= 4 && !low_words.contains(w))
        .take(5)
        .map(|w| title_case(&w))
        .collect();
    json!({ "high_level_keywords": high, "low_level_keywords": low }).to_string()
}

fn rate_community(prompt: &str, query: &str) -> String {
    let info = after(prompt, "---Information---").map(|r| before(r, "---Question---")).unwrap_or(prompt);
    let q = after(prompt, "---Question---").map(|r| before(r, "---Output---")).unwrap_or(query);
    let qw = content_words(q);
    let iw = content_words(info);
    let shared: Vec<&String> = qw.iter().filter(|w| iw.contains(w)).collect();
    let rating = shared.len().min(5);
    let reason = if shared.is_empty() {
        "The information shares no key terms with the question.".to_string()
    } else {
        format!(
            "The information shares {} key term(s) with the question: {}.",
            shared.len(),
            shared.iter().take(5).map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        )
    };
    json!({ "reason": reason, "rating": rating }).to_string()
}

/// Report ids and names mentioned in a block of community reports.
fn report_refs(text: &str) -> (Vec<String>, Vec<String>) {
    let tables = parse_tables(text);
    let mut ids: Vec<String> = tables.iter().find(|t| !t.rows.is_empty()).map(Table::ids).unwrap_or_default();
    if ids.is_empty() {
        for line in text.lines() {
            let l = line.trim();
            let l = l
                .strip_prefix("id:")
                .or_else(|| l.strip_prefix("id="))
                .or_else(|| l.strip_prefix("Report "))
                .unwrap_or(l)
                .trim();
            let digits: String = l.chars().take_while(char::is_ascii_digit).collect();
            let rest = &l[digits.len()..];
            if !digits.is_empty()
                && (rest.is_empty() || rest.starts_with([',', '|', ':', ')']))
                && !ids.contains(&digits)
            {
                ids.push(digits);
            }
        }
    }
    let names = find_entities(text).ranked.into_iter().take(5).collect();
    (ids, names)
}

fn drift_primer(prompt: &str) -> String {
    let (q, reports) = if let Some(r) = after(prompt, "Query:") {
        (before(r, "Community reports:"), after(r, "Community reports:").unwrap_or(""))
    } else if let Some(r) = after(prompt, "For the query:") {
        (before(r, "The top-ranked"), after(r, "The top-ranked").unwrap_or(""))
    } else {
        ("", prompt)
    };
    let q = q.trim();
    let (ids, names) = report_refs(reports);
    let answer = format!(
        "# Primer\n\nThe top-ranked community reports for \"{}\" concern {}. {}",
        first_words(q, 20),
        list_names(&names, 3),
        citation(&[("Reports", ids)])
    );
    let topic = first_words(q.trim_end_matches('?'), 8);
    let mut follow: Vec<String> =
        names.iter().take(5).map(|n| format!("What is the role of {} in {topic}?", title_case(n))).collect();
    let generic = [
        format!("Who are the main actors in {topic}?"),
        format!("Which events shaped {topic}?"),
        format!("Where did {topic} take place?"),
        format!("What were the consequences of {topic}?"),
        format!("How are the organizations involved in {topic} connected?"),
    ];
    for g in generic {
        if follow.len() >= 5 {
            break;
        }
        follow.push(g);
    }
    json!({
        "intermediate_answer": answer,
        "score": 20 + h64(q) % 60,
        "follow_up_queries": follow,
    })
    .to_string()
}

/// A hypothetical answer shaped like the report to imitate: its title line
/// over the query's words (HyDE answers are guesses, not data).
fn drift_expand(prompt: &str) -> String {
    let (q, template) = if let Some(r) = after(prompt, "Write a hypothetical answer to this query:") {
        (before(r, "\n"), after(r, "Report to imitate:").unwrap_or(""))
    } else if let Some(r) = after(prompt, "Create a hypothetical answer to the following query:") {
        (before(r, "\n"), after(r, "structure of the template below:").unwrap_or(""))
    } else {
        ("", prompt)
    };
    let heading = template.lines().map(str::trim).find(|l| l.starts_with('#')).unwrap_or("# Report");
    format!(
        "{heading}\n\nA hypothetical answer to \"{}\": {} are at the centre of it.",
        first_words(q.trim(), 30),
        list_names(&content_words(q).into_iter().take(3).collect::<Vec<_>>(), 3)
    )
}

/// The number in "up to N follow-up questions" of a DRIFT step prompt, if any.
fn follow_up_limit(prompt: &str) -> Option<usize> {
    prompt.match_indices("up to ").find_map(|(i, m)| {
        let tail = &prompt[i + m.len()..];
        let n: String = tail.chars().take_while(char::is_ascii_digit).collect();
        tail[n.len()..].trim_start().starts_with("follow-up").then(|| n.parse().ok()).flatten()
    })
}

fn drift_search(prompt: &str, query: &str) -> String {
    let response = data_answer("DRIFT local search", prompt, query);
    let tables = parse_tables(prompt);
    let names: Vec<String> = find_table(&tables, "Entities")
        .map(|t| (0..t.rows.len()).map(|i| t.cell(i, &["entity", "title"])).collect())
        .unwrap_or_default();
    let ql = query.to_lowercase();
    let fresh: Vec<&String> = names.iter().filter(|n| !n.is_empty() && !ql.contains(&n.to_lowercase())).collect();
    let n_follow = ((h64(query) % 3) as usize).min(follow_up_limit(prompt).unwrap_or(usize::MAX));
    let follow: Vec<String> =
        fresh.iter().take(n_follow).map(|n| format!("What else is known about {}?", title_case(n))).collect();
    json!({
        "response": response,
        "score": 10 + h64(&format!("{query}\u{1f}{prompt}")) % 80,
        "follow_up_queries": follow,
    })
    .to_string()
}

fn drift_reduce(prompt: &str, query: &str) -> String {
    let data = after(prompt, "---Intermediate Answers---").unwrap_or(prompt);
    let data = before(data, "---Goal---");
    let mut refs: Vec<String> = Vec::new();
    let mut rest = data;
    while let Some(i) = rest.find("[Data:") {
        let tail = &rest[i..];
        let Some(j) = tail.find(']') else { break };
        let r = tail[..=j].to_string();
        if !refs.contains(&r) {
            refs.push(r);
        }
        rest = &tail[j + 1..];
    }
    if data.trim().is_empty() {
        return "I don't know: the intermediate answers do not contain enough information.".into();
    }
    let mut out = format!(
        "## Answer\n\nCombining the findings of the search, the answer to \"{}\" draws on the following evidence.\n\n",
        first_words(query, 20)
    );
    if refs.is_empty() {
        out.push_str(&format!("- {}\n", first_words(data.trim(), 30)));
    }
    for r in refs.iter().take(5) {
        out.push_str(&format!("- Supporting evidence {r}\n"));
    }
    out
}

fn row_label(t: &Table, i: usize) -> String {
    if t.name == "Sources" {
        return format!("Source {}", t.rows[i][0]);
    }
    let name = t.cell(i, &["entity", "title", "name"]);
    if !name.is_empty() {
        return name;
    }
    let (s, tg) = (t.cell(i, &["source"]), t.cell(i, &["target"]));
    if !s.is_empty() && !tg.is_empty() {
        return format!("{s} → {tg}");
    }
    first_words(&t.rows[i].last().cloned().unwrap_or_default(), 8)
}

fn row_text(t: &Table, i: usize) -> String {
    let d = t.cell(i, &["description", "summary", "content", "text"]);
    if d.is_empty() {
        t.rows[i].last().cloned().unwrap_or_default()
    } else {
        d
    }
}

/// A markdown answer citing the ids of the tables in the context.
fn data_answer(kind: &str, prompt: &str, query: &str) -> String {
    let tables: Vec<Table> = parse_tables(prompt).into_iter().filter(|t| !t.rows.is_empty()).collect();
    if tables.is_empty() {
        return format!(
            "I don't know: the provided data does not contain information about \"{}\".",
            first_words(query, 20)
        );
    }
    let parts: Vec<(&str, Vec<String>)> = tables.iter().map(|t| (t.name.as_str(), t.ids())).collect();
    let main = &tables[0];
    let labels: Vec<String> = (0..main.rows.len().min(3)).map(|i| row_label(main, i)).collect();
    let mut out = format!(
        "## {kind} answer\n\nThe data most relevant to \"{}\" concerns {}. {}\n\n",
        first_words(query, 20),
        labels.join("; "),
        citation(&parts)
    );
    for (i, label) in labels.iter().enumerate() {
        out.push_str(&format!(
            "- **{label}**: {} {}\n",
            first_words(&row_text(main, i), 25),
            citation(&[(main.name.as_str(), vec![main.rows[i][0].clone()])])
        ));
    }
    out
}

fn question_gen(prompt: &str) -> String {
    let n = number_after(prompt, &["bulleted list of "]).unwrap_or(5).clamp(1, 20);
    let tables = parse_tables(prompt);
    let mut names: Vec<String> = find_table(&tables, "Entities")
        .map(|t| (0..t.rows.len()).map(|i| t.cell(i, &["entity", "title"])).filter(|s| !s.is_empty()).collect())
        .unwrap_or_default();
    if names.is_empty() {
        let ctx = after(prompt, "---Data tables---").unwrap_or(prompt);
        let ctx = before(ctx, "---Goal---");
        names = find_entities(ctx).ranked.into_iter().take(5).collect();
    }
    let names: Vec<String> = names.iter().map(|n| title_case(n)).collect();
    let mut out = Vec::new();
    for i in 0..n {
        let q = if names.is_empty() {
            [
                "What are the main themes of the data?",
                "Who are the key actors?",
                "Which events matter most?",
                "How are the main topics connected?",
                "What are the most important facts?",
            ][i % 5]
                .to_string()
        } else {
            let a = &names[i % names.len()];
            let b = &names[(i + 1) % names.len()];
            match i % 4 {
                0 => format!("What is the role of {a}?"),
                1 if a != b => format!("How is {a} related to {b}?"),
                2 => format!("What are the most important facts about {a}?"),
                _ => format!("Why is {a} significant?"),
            }
        };
        out.push(format!("- {q}"));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(template: &str, vars: &[(&str, &str)]) -> String {
        let mut s = template.to_string();
        for (k, v) in vars {
            s = s.replace(&format!("{{{{ {k} }}}}"), v);
        }
        s
    }

    fn prompt(name: &str) -> String {
        std::fs::read_to_string(format!("{}/../prompts/{name}.txt", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    const DELIMS: [(&str, &str); 3] =
        [("tuple_delimiter", "<|>"), ("record_delimiter", "##"), ("completion_delimiter", "<|COMPLETE|>")];

    /// (prompt file, class) of every prompt that is one system message.
    const ONE_MESSAGE_PROMPTS: [(&str, &str); 18] = [
        ("extract_graph", "extract_graph"),
        ("extract_claims", "extract_claims"),
        ("summarize_descriptions", "summarize_descriptions"),
        ("community_report_graph", "community_report_graph"),
        ("community_report_text", "community_report_text"),
        ("global_search_map_system_prompt", "global_map"),
        ("global_search_reduce_system_prompt", "global_reduce"),
        ("local_search_system_prompt", "local_search"),
        ("basic_search_system_prompt", "basic_search"),
        ("mix_search_system_prompt", "mix_search"),
        ("drift_query_expansion", "drift_expand"),
        ("drift_primer", "drift_primer"),
        ("drift_search_system_prompt", "drift_search"),
        ("drift_reduce_prompt", "drift_reduce"),
        ("keywords_extraction", "keywords_extraction"),
        ("rate_community", "rate_community"),
        ("question_gen_system_prompt", "question_gen"),
        ("resolve_entities", "resolve_entities"),
    ];

    #[test]
    fn every_template_is_classified() {
        for (file, class) in ONE_MESSAGE_PROMPTS {
            let p = render(&prompt(file), &DELIMS);
            let msgs = [Message::new("system", &p), Message::new("user", "What happened?")];
            assert_eq!(classify(&msgs), class, "{file}");
        }
        let ext = render(&prompt("extract_graph"), &DELIMS);
        for (file, class) in
            [("extract_graph_continue", "extract_graph_continue"), ("extract_graph_loop", "extract_graph_loop")]
        {
            let msgs = [
                Message::new("user", &ext),
                Message::new("assistant", "x"),
                Message::new("user", &render(&prompt(file), &DELIMS)),
            ];
            assert_eq!(classify(&msgs), class, "{file}");
        }
        let cl = render(&prompt("extract_claims"), &DELIMS);
        for (file, class) in
            [("extract_claims_continue", "extract_claims_continue"), ("extract_claims_loop", "extract_claims_loop")]
        {
            let msgs = [
                Message::new("user", &cl),
                Message::new("assistant", "x"),
                Message::new("user", &render(&prompt(file), &DELIMS)),
            ];
            assert_eq!(classify(&msgs), class, "{file}");
        }
        assert_eq!(classify(&[Message::new("user", "hello")]), OTHER);
    }

    /// Microsoft GraphRAG 3.3's own prompt files, as `graphrag init` writes
    /// them (tests/fixtures), are classified too: a GraphRAG project runs
    /// against the mock as it is.
    #[test]
    fn graphrag_prompt_files_are_classified() {
        let dir = format!("{}/../tests/fixtures/graphrag-3.3.0-init/prompts", env!("CARGO_MANIFEST_DIR"));
        let mut seen = 0;
        for (file, class) in ONE_MESSAGE_PROMPTS {
            // GraphRAG has no file for the prompts only graphrag-rs has.
            let Ok(p) = std::fs::read_to_string(format!("{dir}/{file}.txt")) else { continue };
            seen += 1;
            let msgs = [Message::new("system", &p), Message::new("user", "What happened?")];
            assert_eq!(classify(&msgs), class, "GraphRAG's {file}.txt");
        }
        assert_eq!(seen, 12, "GraphRAG's prompt files");
        assert_eq!(
            classify(&[Message::new("user", "graphrag-rs connection check: reply with OK.")]),
            "connection_check"
        );
    }

    const CHUNK: &str = "The Halvard Port Authority said on Monday that its director, Ines Okafor, will lead the expansion of the northern terminal in Brennick. The work is funded by the Coastal Development Bank. Okafor met Tomas Reyes in Brennick.";

    fn extraction_prompt(td: &str) -> String {
        render(
            &prompt("extract_graph"),
            &[
                ("tuple_delimiter", td),
                ("record_delimiter", "@@"),
                ("completion_delimiter", "<DONE>"),
                ("entity_types", "ORGANIZATION,PERSON,GEO"),
                ("input_text", CHUNK),
            ],
        )
    }

    #[test]
    fn extraction_reads_delimiters_and_text() {
        let p = extraction_prompt("{~}");
        let d = read_delims(&p);
        assert_eq!(d, Delims { tuple: "{~}".into(), record: "@@".into(), completion: "<DONE>".into() });
        assert_eq!(extraction_input(&p), CHUNK);
        assert_eq!(entity_types(&p), vec!["ORGANIZATION", "PERSON", "GEO"]);
        let out = answer(&[Message::new("user", &p)], None).content;
        assert!(out.ends_with("\n<DONE>"), "{out}");
        for n in
            ["HALVARD PORT AUTHORITY", "INES OKAFOR", "BRENNICK", "COASTAL DEVELOPMENT BANK", "TOMAS REYES", "OKAFOR"]
        {
            assert!(out.contains(&format!("(\"entity\"{{~}}{n}{{~}}")), "{n}: {out}");
        }
        assert!(!out.contains("{~}MONDAY{~}"));
        assert!(out.contains("(\"relationship\"{~}OKAFOR{~}TOMAS REYES{~}"), "{out}");
        assert!(out.contains("\n@@\n"));
        assert!(!out.contains("Example"));
    }

    #[test]
    fn gleaning_adds_few_records_then_stops() {
        let p = extraction_prompt("<|>");
        let first = answer(&[Message::new("user", &p)], None).content;
        let cont = render(&prompt("extract_graph_continue"), &DELIMS);
        let lp = prompt("extract_graph_loop");
        let mut msgs = vec![Message::new("user", &p), Message::new("assistant", &first), Message::new("user", &cont)];
        let g = answer(&msgs, None);
        assert_eq!(g.class, "extract_graph_continue");
        // all 6 entities fit in the first answer: nothing to add
        assert_eq!(g.content, "<DONE>");
        msgs.push(Message::new("assistant", &g.content));
        msgs.push(Message::new("user", &lp));
        assert_eq!(answer(&msgs, None).content, "N");

        // with a first answer that missed records, gleaning adds up to two, then Y, then N
        let mut msgs = vec![
            Message::new("user", &p),
            Message::new("assistant", "(\"entity\"<|>BRENNICK<|>GEO<|>a town)\n<DONE>"),
            Message::new("user", &cont),
        ];
        let g = answer(&msgs, None).content;
        assert_eq!(g.matches("(\"entity\"").count(), 2, "{g}");
        assert!(!g.contains("<|>BRENNICK<|>"));
        msgs.push(Message::new("assistant", &g));
        msgs.push(Message::new("user", &lp));
        assert_eq!(answer(&msgs, None).content, "Y");
        msgs.push(Message::new("assistant", "Y"));
        msgs.push(Message::new("user", &cont));
        let g2 = answer(&msgs, None).content;
        msgs.push(Message::new("assistant", &g2));
        msgs.push(Message::new("user", &lp));
        assert_eq!(answer(&msgs, None).content, "N");
    }

    #[test]
    fn claims_format() {
        let p = render(
            &prompt("extract_claims"),
            &[
                ("tuple_delimiter", "<|>"),
                ("record_delimiter", "##"),
                ("completion_delimiter", "<|COMPLETE|>"),
                ("entity_specs", "organization, person"),
                ("claim_description", "red flags"),
                ("input_text", CHUNK),
            ],
        );
        // the answer has 0-2 records, each with 8 fields
        let out = answer(&[Message::new("user", &p)], None).content;
        assert!(out.ends_with("<|COMPLETE|>"));
        for rec in out.trim_end_matches("<|COMPLETE|>").split("##") {
            let rec = rec.trim();
            if !rec.is_empty() {
                assert_eq!(rec.split("<|>").count(), 8, "{rec}");
            }
        }
        let c = claim_candidates(CHUNK);
        let r = claim_record(&read_delims(&p), &c[0]);
        assert!(r.starts_with("(HALVARD PORT AUTHORITY<|>INES OKAFOR<|>"), "{r}");
    }

    #[test]
    fn summary_dedups_and_truncates() {
        let p = render(
            &prompt("summarize_descriptions"),
            &[
                ("entity_name", "ACME"),
                ("description_list", "[\"ACME is a firm\", \"acme is a firm\", \"ACME makes rockets.\"]"),
                ("max_length", "6"),
            ],
        );
        let a = answer(&[Message::new("user", &p)], None);
        assert_eq!(a.class, "summarize_descriptions");
        assert_eq!(a.content, "ACME is a firm. ACME makes");
    }

    #[test]
    fn entity_pairs_are_answered_by_shared_words() {
        let questions = "Question 1:\n  A: \"SCROOGE\" (PERSON): a miser\n  B: \"MR SCROOGE\"\nQuestion 2:\n  A: \"MARLEY\"\n  B: \"BOB\"\n";
        let p = render(&prompt("resolve_entities"), &[("questions", questions)]);
        let a = answer(&[Message::new("user", &p)], None);
        assert_eq!(a.class, "resolve_entities");
        assert_eq!(a.content, "1: yes\n2: no");
        assert_eq!(
            graphrag_operations::entity_resolution::decisions::parse_decisions(&a.content, 2),
            Ok(vec![true, false])
        );
    }

    #[test]
    fn community_report_cites_input_ids() {
        let input = "-----Entities-----\nid,entity,description\n3,RIVERSIDE,a cooperative\n8,EASTFIELD MARKET,a market\n\n-----Relationships-----\nid,source,target,description\n14,RIVERSIDE,EASTFIELD MARKET,sells at\n";
        let p = render(&prompt("community_report_graph"), &[("input_text", input), ("max_report_length", "1500")]);
        let a = answer(&[Message::new("user", &p)], None);
        assert_eq!(a.class, "community_report_graph");
        let v: Value = serde_json::from_str(&a.content).unwrap();
        assert_eq!(v["title"], "Riverside and Eastfield Market");
        let f = v["findings"].as_array().unwrap();
        assert!((2..=5).contains(&f.len()));
        assert!(f[0]["explanation"].as_str().unwrap().contains("[Data: Entities (3); Relationships (14)]"));
        assert!(!a.content.contains("Eastfield Town Council"), "example data leaked");
        let r = v["rating"].as_f64().unwrap();
        assert!((0.0..=10.0).contains(&r));

        let text_input =
            "-----SOURCES-----\nid|text\n0|Mei Lindqvist studies optics in Uppsala.\n1|Tomas Reyes builds sensors.\n";
        let p = render(&prompt("community_report_text"), &[("input_text", text_input), ("max_report_length", "1500")]);
        let v: Value = serde_json::from_str(&answer(&[Message::new("user", &p)], None).content).unwrap();
        assert!(v["summary"].as_str().unwrap().contains("[Data: Sources (0, 1)]"));
        assert_eq!(v["findings"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn query_answers() {
        let ctx = "-----Reports-----\nid|title|occurrence weight|content|rank\n5|Port expansion|1.0|The port grows.|8\n9|Bank loans|0.5|Loans fund it.|6\n";
        let p = render(&prompt("global_search_map_system_prompt"), &[("context_data", ctx), ("max_length", "500")]);
        let out = answer(&[Message::new("system", &p), Message::new("user", "What grows?")], None).content;
        let v: Value = serde_json::from_str(&out).unwrap();
        let pts = v["points"].as_array().unwrap();
        assert_eq!(pts.len(), 2);
        assert!(pts[0]["description"].as_str().unwrap().ends_with("[Data: Reports (5)]"));

        let p = render(
            &prompt("keywords_extraction"),
            &[("history", ""), ("query", "How did the closure of the Brennick steelworks affect jobs?")],
        );
        let v: Value = serde_json::from_str(&answer(&[Message::new("user", &p)], None).content).unwrap();
        assert_eq!(v["low_level_keywords"], json!(["Brennick"]));
        assert!(v["high_level_keywords"].as_array().unwrap().contains(&json!("Closure")));

        let p = render(
            &prompt("rate_community"),
            &[
                ("description", "The port of Brennick will expand soon."),
                ("query", "Why does the Brennick port expand?"),
            ],
        );
        let v: Value = serde_json::from_str(&answer(&[Message::new("user", &p)], None).content).unwrap();
        assert_eq!(v["rating"], 3);

        let local = "-----Entities-----\nid|entity|description|number of relationships\n7|BRENNICK|a town|3\n-----Sources-----\nid|text\n2|Brennick text\n";
        let p = render(
            &prompt("local_search_system_prompt"),
            &[("context_data", local), ("response_type", "one paragraph")],
        );
        let out = answer(&[Message::new("system", &p), Message::new("user", "Where?")], None).content;
        assert!(out.contains("[Data: Entities (7); Sources (2)]"), "{out}");

        let p = render(&prompt("drift_primer"), &[("query", "What happened in Brennick?"), ("community_reports", ctx)]);
        let v: Value = serde_json::from_str(&answer(&[Message::new("user", &p)], None).content).unwrap();
        assert!(v["follow_up_queries"].as_array().unwrap().len() >= 5);
        assert!(v["intermediate_answer"].as_str().unwrap().contains("[Data: Reports (5, 9)]"));

        let p = render(
            &prompt("drift_search_system_prompt"),
            &[("context_data", local), ("response_type", "x"), ("global_query", "g"), ("followups", "1")],
        );
        assert_eq!(follow_up_limit(&p), Some(1));
        let v: Value =
            serde_json::from_str(&answer(&[Message::new("system", &p), Message::new("user", "Where?")], None).content)
                .unwrap();
        assert!(v["response"].is_string() && v["score"].is_u64() && v["follow_up_queries"].is_array());
        assert!(v["follow_up_queries"].as_array().unwrap().len() <= 1);

        let report = "# Brennick harbour\n\nThe harbour of Brennick ...";
        let p = render(&prompt("drift_query_expansion"), &[("query", "Who runs the port?"), ("template", report)]);
        let a = answer(&[Message::new("user", &p)], None);
        assert_eq!(a.class, "drift_expand");
        assert!(
            a.content.starts_with("# Brennick harbour\n") && a.content.contains("Who runs the port?"),
            "{}",
            a.content
        );
        // GraphRAG's own expansion prompt (inline in its code) is answered the same way.
        let graphrag = format!("Create a hypothetical answer to the following query: Who runs the port?\n\nFormat it to follow the structure of the template below:\n\n{report}\n\nEnsure that ...");
        let a = answer(&[Message::new("user", &graphrag)], None);
        assert!(a.class == "drift_expand" && a.content.contains("Who runs the port?"), "{}", a.content);

        let p = render(&prompt("question_gen_system_prompt"), &[("context_data", local), ("question_count", "3")]);
        let out = answer(&[Message::new("system", &p), Message::new("user", "Q?")], None).content;
        assert_eq!(out.lines().count(), 3);
        assert!(out.contains("Brennick"));
    }

    #[test]
    fn json_mode_always_returns_json() {
        let rf = json!({"type": "json_object"});
        let a = answer(&[Message::new("user", "hello there")], Some(&rf));
        assert!(serde_json::from_str::<Value>(&a.content).unwrap().is_object());
        let rf = json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"n": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}}}});
        let v: Value = serde_json::from_str(&answer(&[Message::new("user", "hi")], Some(&rf)).content).unwrap();
        assert_eq!(v["n"], 0);
        assert_eq!(v["tags"], json!(["This is a deterministic mock answer to: hi"]));
    }

    #[test]
    fn a_corrective_retry_is_answered_like_the_request_before_it() {
        let p = extraction_prompt("<|>");
        let first = answer(&[Message::new("user", &p)], None);
        let corrected = answer(
            &[
                Message::new("user", &p),
                Message::new("assistant", "garbled"),
                Message::new("user", &format!("{CORRECTION}: it holds no record. Reply again.")),
            ],
            None,
        );
        assert_eq!(corrected, first);
    }
}
