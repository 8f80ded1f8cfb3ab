//! Prompt classification and deterministic answers: every answer is a pure
//! function of the request messages (and `response_format`).

mod extraction;
mod query;
mod reports;
#[cfg(test)]
mod tests;
mod tuning;

use serde_json::{json, Map, Value};

use extraction::{extract_claims, extract_claims_glean, extract_graph, extract_graph_glean, gleaning_loop};
use query::{
    data_answer, drift_expand, drift_primer, drift_reduce, drift_search, global_map, global_reduce, keywords,
    question_gen, rate_community,
};
use reports::{community_report_graph, community_report_text, resolve_entities, summarize};

use crate::text::first_words;

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
    // Prompt tuning's questions (project/src/prompt_tune/templates/, GraphRAG's prompt_tune/prompt/).
    ClassRule {
        class: "tune_domain",
        scope: Scope::Prompt,
        phrases: &["name the domain of the sample text", "assigning a descriptive domain"],
    },
    ClassRule {
        class: "tune_language",
        scope: Scope::Prompt,
        phrases: &["Name the language the sample text", "primary language of the provided texts"],
    },
    ClassRule {
        class: "tune_persona",
        scope: Scope::Prompt,
        phrases: &["Write a persona for an expert assistant", "description of an expert who could help solve"],
    },
    ClassRule {
        class: "tune_rating",
        scope: Scope::Prompt,
        phrases: &["Describe how to rate the importance of a community", "rating the importance of a given text"],
    },
    ClassRule {
        class: "tune_entity_types",
        scope: Scope::Prompt,
        phrases: &["List the entity types worth extracting", "identify the entity types present in the following text"],
    },
    ClassRule {
        class: "tune_role",
        scope: Scope::Prompt,
        phrases: &[
            "Write the role of the analyst who will report on communities",
            "creating a role definition that will be tasked with community analysis",
        ],
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
    ClassRule {
        class: "community_report_graph",
        scope: Scope::Prompt,
        // GraphRAG's prompt tuning writes a report prompt with "REPORT RATING" in its place.
        phrases: &["IMPACT SEVERITY RATING", "Write a comprehensive assessment report of a community"],
    },
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
        "tune_domain" => tuning::domain(prompt),
        "tune_language" => tuning::language(prompt),
        "tune_persona" => tuning::persona(prompt),
        "tune_rating" => tuning::rating(prompt),
        "tune_entity_types" => tuning::entity_types(prompt),
        "tune_role" => tuning::role(prompt),
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

// JSON mode

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
