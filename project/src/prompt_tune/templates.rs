//! The texts of prompt tuning: the questions it asks the model
//! (templates/{domain,language,persona,rating,entity_types,role}.txt) and
//! the prompts it writes (templates/{extract_graph,example,
//! summarize_descriptions,community_report_graph}.txt).
//!
//! A template's `<<name>>` markers are filled in one pass (a value that
//! itself contains `<<x>>` is not filled again). The prompts it writes are
//! minijinja templates: their `{{ name }}` placeholders are left for the
//! pipeline, and every value put in them — corpus text, model answers — is
//! escaped so that it reads as literal text.

use std::sync::OnceLock;

use graphrag_operations::extraction_parser::{EntityRecord, RelationshipRecord};
use regex::Regex;

pub(super) const DOMAIN: &str = include_str!("templates/domain.txt");
pub(super) const LANGUAGE: &str = include_str!("templates/language.txt");
pub(super) const PERSONA: &str = include_str!("templates/persona.txt");
pub(super) const RATING: &str = include_str!("templates/rating.txt");
pub(super) const ENTITY_TYPES: &str = include_str!("templates/entity_types.txt");
pub(super) const ROLE: &str = include_str!("templates/role.txt");

const EXTRACT_GRAPH: &str = include_str!("templates/extract_graph.txt");
const EXAMPLE: &str = include_str!("templates/example.txt");
const SUMMARIZE_DESCRIPTIONS: &str = include_str!("templates/summarize_descriptions.txt");
const COMMUNITY_REPORT_GRAPH: &str = include_str!("templates/community_report_graph.txt");

/// The task the persona and the entity types are asked for (GraphRAG's
/// `DEFAULT_TASK`, in our words).
pub(super) fn task(domain: &str) -> String {
    format!("find the relations and the structure of the communities of interest in documents of the {domain} domain.")
}

/// The most entity types asked for.
pub(super) const MAX_ENTITY_TYPES: usize = 12;

fn marker() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"<<([a-z_]+)>>").unwrap())
}

/// `template` with each `<<name>>` replaced by its value in `values` (one
/// pass). Every marker must have a value: templates and callers are ours.
pub(super) fn fill(template: &str, values: &[(&str, &str)]) -> String {
    marker()
        .replace_all(template, |c: &regex::Captures| {
            values
                .iter()
                .find(|(name, _)| *name == &c[1])
                .map(|(_, v)| v.to_string())
                .unwrap_or_else(|| panic!("template marker <<{}>> has no value", &c[1]))
        })
        .into_owned()
}

/// `text` as literal text of a minijinja template: a `{` that would open a
/// tag (`{{`, `{%`, `{#`) or that ends the text (the template may go on
/// with `{`) is written as the expression `{{ "{" }}`.
pub(super) fn jinja_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '{' && matches!(chars.peek(), Some('{' | '%' | '#') | None) {
            out.push_str("{{ \"{\" }}");
        } else {
            out.push(c);
        }
    }
    out
}

/// [`fill`] for a minijinja template: the values are escaped.
fn fill_literal(template: &str, values: &[(&str, &str)]) -> String {
    let escaped: Vec<(&str, String)> = values.iter().map(|(k, v)| (*k, jinja_literal(v))).collect();
    let refs: Vec<(&str, &str)> = escaped.iter().map(|(k, v)| (*k, v.as_str())).collect();
    fill(template, &refs)
}

/// How the extraction prompt names the entity types: the discovered ones
/// written in, or the `{{ entity_types }}` placeholder (settings'
/// `extract_graph.entity_types`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum EntityTypes {
    /// The types the model named, written into the prompt.
    Discovered(Vec<String>),
    /// The placeholder, filled from the settings when the prompt is used.
    FromSettings,
}

impl EntityTypes {
    /// The text of the prompt's type list (already minijinja).
    fn prompt_text(&self) -> String {
        match self {
            EntityTypes::Discovered(types) => jinja_literal(&types.join(",")),
            EntityTypes::FromSettings => "{{ entity_types }}".into(),
        }
    }
}

/// One few-shot example: a chunk and the records the model extracted from it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Example {
    pub text: String,
    pub entities: Vec<EntityRecord>,
    pub relationships: Vec<RelationshipRecord>,
}

/// A field of a record, on one line, without the delimiters' characters
/// breaking the record.
fn field(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The example's records in the extraction format, with the delimiters as
/// the pipeline's placeholders (the same as the prompt's instructions).
fn records(example: &Example) -> String {
    let t = "{{ tuple_delimiter }}";
    let mut lines = Vec::new();
    for e in &example.entities {
        let (name, ty, desc) = (field(&e.name), field(&e.entity_type), field(&e.description));
        let (name, ty, desc) = (jinja_literal(&name), jinja_literal(&ty), jinja_literal(&desc));
        lines.push(format!("(\"entity\"{t}{name}{t}{ty}{t}{desc})"));
    }
    for r in &example.relationships {
        let (src, dst, desc) = (field(&r.source), field(&r.target), field(&r.description));
        let (src, dst, desc) = (jinja_literal(&src), jinja_literal(&dst), jinja_literal(&desc));
        let strength = r.strength.round().clamp(1.0, 10.0) as i64;
        lines.push(format!("(\"relationship\"{t}{src}{t}{dst}{t}{desc}{t}{strength})"));
    }
    lines.join("\n{{ record_delimiter }}\n")
}

/// The text of example number `n` (1-based).
pub(super) fn example_block(n: usize, types: &EntityTypes, example: &Example) -> String {
    let number = n.to_string();
    fill(
        EXAMPLE,
        &[
            ("n", &number),
            ("entity_types", &types.prompt_text()),
            ("input_text", &jinja_literal(&example.text)),
            ("records", &records(example)),
        ],
    )
}

/// The extraction prompt with `examples` (the blocks of [`example_block`]).
pub(super) fn extract_graph(domain: &str, language: &str, types: &EntityTypes, examples: &[String]) -> String {
    let (domain, language) = (jinja_literal(domain), jinja_literal(language));
    let listed = types.prompt_text();
    let blocks = examples.concat();
    fill(
        EXTRACT_GRAPH,
        &[("domain", &domain), ("language", &language), ("entity_types", &listed), ("examples", &blocks)],
    )
}

/// A built-in example for the prompt that asks the model for the corpus's
/// own examples (the project's extraction prompt has the same one).
pub(super) fn seed_example() -> Example {
    let entity = |name: &str, ty: &str, description: &str| EntityRecord {
        name: name.into(),
        entity_type: ty.into(),
        description: description.into(),
    };
    Example {
        text: "The Halvard Port Authority said on Monday that its director, Ines Okafor, will lead the expansion of the northern container terminal in Brennick. The work is funded by the Coastal Development Bank.".into(),
        entities: vec![
            entity("HALVARD PORT AUTHORITY", "ORGANIZATION", "The Halvard Port Authority is expanding the northern container terminal in Brennick"),
            entity("INES OKAFOR", "PERSON", "Ines Okafor is the director of the Halvard Port Authority and leads the terminal expansion"),
            entity("BRENNICK", "GEO", "Brennick is where the northern container terminal is being expanded"),
            entity("COASTAL DEVELOPMENT BANK", "ORGANIZATION", "The Coastal Development Bank funds the terminal expansion"),
        ],
        relationships: vec![
            RelationshipRecord {
                source: "INES OKAFOR".into(),
                target: "HALVARD PORT AUTHORITY".into(),
                description: "Ines Okafor is the director of the Halvard Port Authority".into(),
                strength: 9.0,
            },
            RelationshipRecord {
                source: "COASTAL DEVELOPMENT BANK".into(),
                target: "HALVARD PORT AUTHORITY".into(),
                description: "The Coastal Development Bank funds the Port Authority's expansion".into(),
                strength: 8.0,
            },
        ],
    }
}

/// The seed example's block: its own types, whatever the corpus's are.
pub(super) fn seed_example_block() -> String {
    let types = EntityTypes::Discovered(vec!["ORGANIZATION".into(), "PERSON".into(), "GEO".into()]);
    example_block(1, &types, &seed_example())
}

pub(super) fn summarize_descriptions(persona: &str, domain: &str, language: &str) -> String {
    fill_literal(SUMMARIZE_DESCRIPTIONS, &[("persona", persona), ("domain", domain), ("language", language)])
}

pub(super) fn community_report_graph(
    persona: &str,
    role: &str,
    rating_description: &str,
    domain: &str,
    language: &str,
) -> String {
    fill_literal(
        COMMUNITY_REPORT_GRAPH,
        &[
            ("persona", persona),
            ("role", role),
            ("rating_description", rating_description),
            ("domain", domain),
            ("language", language),
        ],
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use graphrag_engine::prompts::PromptTemplate;
    use serde_json::Value;

    use super::*;

    fn render(template: &str, vars: &[(&'static str, &str)]) -> String {
        let vars: BTreeMap<&str, Value> = vars.iter().map(|(k, v)| (*k, Value::from(*v))).collect();
        PromptTemplate::new("t", template).render(&vars).unwrap()
    }

    #[test]
    fn literal_text_survives_minijinja() {
        for text in ["{{ x }}", "{% if %}", "{# c #}", "a {b} c", "ends with {", "}} and {{{", "{{-", "plain"] {
            let template = format!("{}{{{{ v }}}}", jinja_literal(text));
            assert_eq!(render(&template, &[("v", "!")]), format!("{text}!"), "{text}");
        }
    }

    proptest::proptest! {
        /// Any text — braces, tags, comments, a trailing `{` — reads back as itself.
        #[test]
        fn any_text_is_literal(text in "[{}%#a -]{0,40}") {
            let template = format!("{}{{{{ v }}}}", jinja_literal(&text));
            proptest::prop_assert_eq!(render(&template, &[("v", "!")]), format!("{text}!"));
        }
    }

    #[test]
    fn markers_are_filled_once() {
        assert_eq!(fill("<<a>> and <<b>>", &[("a", "<<b>>"), ("b", "B")]), "<<b>> and B");
    }

    #[test]
    fn extraction_prompt_keeps_the_pipeline_placeholders() {
        let ex = Example { text: "Scrooge {{ and }} Marley".into(), ..seed_example() };
        let types = EntityTypes::Discovered(vec!["CHARACTER".into(), "SPIRIT".into()]);
        let prompt = extract_graph("Victorian {% fiction", "English", &types, &[example_block(1, &types, &ex)]);
        let t = PromptTemplate::new("extract_graph.txt", prompt.as_str());
        let names: Vec<String> = t.placeholders().unwrap().into_iter().collect();
        assert_eq!(names, ["completion_delimiter", "input_text", "record_delimiter", "tuple_delimiter"]);
        let out = render(
            &prompt,
            &[
                ("input_text", "REAL"),
                ("tuple_delimiter", "<|>"),
                ("record_delimiter", "##"),
                ("completion_delimiter", "<|COMPLETE|>"),
            ],
        );
        assert!(out.contains("Victorian {% fiction domain"), "{out}");
        assert!(out.contains("exactly one of these types: [CHARACTER,SPIRIT]"));
        assert!(out.contains("Text:\nScrooge {{ and }} Marley\n"));
        assert!(out.contains("(\"entity\"<|>INES OKAFOR<|>PERSON<|>"));
        assert!(out.contains("<|>9)\n##\n(\"relationship\"<|>COASTAL DEVELOPMENT BANK"));
        assert!(out
            .trim_end()
            .ends_with("Entity_types: CHARACTER,SPIRIT\nText: REAL\n######################\nOutput:"));

        let from_settings = extract_graph("d", "English", &EntityTypes::FromSettings, &[]);
        let t = PromptTemplate::new("extract_graph.txt", from_settings);
        assert!(t.placeholders().unwrap().contains("entity_types"));
    }

    #[test]
    fn summary_and_report_prompts_keep_their_placeholders() {
        let s = summarize_descriptions("You are {{ an expert }}.", "law", "French");
        let names: Vec<String> = PromptTemplate::new("s", s.as_str()).placeholders().unwrap().into_iter().collect();
        assert_eq!(names, ["description_list", "entity_name", "max_length"]);
        assert!(render(&s, &[("description_list", "[]"), ("entity_name", "X"), ("max_length", "5")])
            .starts_with("You are {{ an expert }}.\n"));
        let r = community_report_graph("You are a lawyer.", "A legal analyst.", "A float score {#}", "law", "French");
        let names: Vec<String> = PromptTemplate::new("r", r.as_str()).placeholders().unwrap().into_iter().collect();
        assert_eq!(names, ["input_text", "max_report_length"]);
        let out = render(&r, &[("input_text", "T"), ("max_report_length", "1500")]);
        assert!(out.contains("IMPACT SEVERITY RATING: A float score {#}\n"), "{out}");
        assert!(out.contains("taking on this role: A legal analyst.\n"));
    }
}
