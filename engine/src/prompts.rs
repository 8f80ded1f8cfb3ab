//! Prompt templates: minijinja (`{{ name }}`), or a Microsoft GraphRAG prompt
//! file as is (Python `{name}` placeholders, `{{`/`}}` for literal braces).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, OnceLock};

use regex::Regex;
use serde_json::Value;

macro_rules! builtin {
    ($name:literal) => {
        ($name, include_str!(concat!("../../prompts/", $name)))
    };
}

/// (file name, template) of every prompt shipped in prompts/: what `init`
/// writes, and what a project without the file uses.
pub const BUILTIN: &[(&str, &str)] = &[
    builtin!("basic_search_system_prompt.txt"),
    builtin!("community_report_graph.txt"),
    builtin!("community_report_text.txt"),
    builtin!("drift_primer.txt"),
    builtin!("drift_query_expansion.txt"),
    builtin!("drift_reduce_prompt.txt"),
    builtin!("drift_search_system_prompt.txt"),
    builtin!("extract_claims.txt"),
    builtin!("extract_claims_continue.txt"),
    builtin!("extract_claims_loop.txt"),
    builtin!("extract_graph.txt"),
    builtin!("extract_graph_continue.txt"),
    builtin!("extract_graph_loop.txt"),
    builtin!("global_search_knowledge_system_prompt.txt"),
    builtin!("global_search_map_system_prompt.txt"),
    builtin!("global_search_reduce_system_prompt.txt"),
    builtin!("keywords_extraction.txt"),
    builtin!("local_search_system_prompt.txt"),
    builtin!("mix_search_system_prompt.txt"),
    builtin!("question_gen_system_prompt.txt"),
    builtin!("rate_community.txt"),
    builtin!("resolve_entities.txt"),
    builtin!("summarize_descriptions.txt"),
];

/// The built-in prompt `file_name` (e.g. `extract_graph_loop.txt`).
pub(crate) fn builtin(file_name: &str) -> Option<PromptTemplate> {
    BUILTIN
        .iter()
        .find(|(name, _)| *name == file_name)
        .map(|(name, text)| PromptTemplate::new(format!("<built-in {name}>"), *text))
}

/// A project's prompt file, or the built-in `fallback` (a file name of
/// [`BUILTIN`]) when the project has no such file: Microsoft GraphRAG
/// projects lack the prompts GraphRAG keeps in code (gleaning turns) and
/// those only graphrag-rs has. The fallback is announced once per path.
/// `read` gives the file's text, `None` when it does not exist.
pub fn project_prompt(
    rel_path: &str,
    fallback: Option<&str>,
    read: impl FnOnce() -> anyhow::Result<Option<String>>,
) -> anyhow::Result<PromptTemplate> {
    if let Some(text) = read()? {
        return Ok(PromptTemplate::new(rel_path, text));
    }
    let Some(template) = fallback.and_then(builtin) else {
        anyhow::bail!("prompt file {rel_path} not found");
    };
    static ANNOUNCED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    if ANNOUNCED.lock().unwrap().insert(rel_path.to_string()) {
        tracing::info!("{rel_path} is not in the project: using the built-in {}", template.source);
    }
    Ok(template)
}

/// The built-in prompt a project file stands for: the one of the same file name.
pub(crate) fn builtin_name(rel_path: &str) -> Option<&str> {
    let name = rel_path.rsplit(['/', '\\']).next()?;
    BUILTIN.iter().any(|(n, _)| *n == name).then_some(name)
}

/// A prompt's text and where it came from; rendered as minijinja, or as a
/// GraphRAG prompt file (`{name}` placeholders) when it is written so.
#[derive(Debug, Clone)]
pub struct PromptTemplate {
    /// Where it came from, for error messages.
    pub source: String,
    /// The template as written.
    pub text: String,
}

fn jinja_placeholder() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\{\{\s*[A-Za-z_][A-Za-z0-9_]*\s*(\|[^}]*)?\}\}|\{%").unwrap())
}

fn python_placeholder() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}").unwrap())
}

impl PromptTemplate {
    /// A template of `text`, named `source` in messages.
    pub fn new(source: impl Into<String>, text: impl Into<String>) -> Self {
        PromptTemplate { source: source.into(), text: text.into() }
    }

    /// GraphRAG's Python format strings have no `{{ name }}` placeholders.
    pub(crate) fn is_graphrag_format(&self) -> bool {
        !jinja_placeholder().is_match(&self.text)
    }

    /// The names the template reads: `{name}` placeholders of a GraphRAG
    /// file, or the undeclared variables of a minijinja template (without
    /// minijinja's own global functions).
    pub fn placeholders(&self) -> anyhow::Result<BTreeSet<String>> {
        if self.is_graphrag_format() {
            return Ok(python_placeholder()
                .captures_iter(&self.text)
                .filter_map(|c| c.get(1).map(|m| m.as_str().to_string()))
                .collect());
        }
        let mut env = minijinja::Environment::new();
        env.add_template("prompt", &self.text).map_err(|e| anyhow::anyhow!("prompt {}: {e}", self.source))?;
        let tmpl = env.get_template("prompt").expect("just added");
        Ok(tmpl.undeclared_variables(false).into_iter().filter(|v| env.globals().all(|(g, _)| g != v)).collect())
    }

    /// Checks, before anything is sent, that every placeholder of the
    /// template is one that `what` fills (`provided`): an error names the
    /// unknown placeholder, the prompt and the names it may use.
    pub fn check_placeholders(&self, what: &str, provided: &[&str]) -> anyhow::Result<()> {
        let unknown: Vec<String> =
            self.placeholders()?.into_iter().filter(|p| !provided.contains(&p.as_str())).collect();
        if unknown.is_empty() {
            return Ok(());
        }
        let braces = |names: &mut dyn Iterator<Item = &str>| names.map(|n| format!("{{{n}}}")).collect::<Vec<_>>();
        anyhow::bail!(
            "prompt {}: {} {} not filled by {what}, which provides {} (nothing was sent)",
            self.source,
            braces(&mut unknown.iter().map(String::as_str)).join(", "),
            if unknown.len() == 1 { "is" } else { "are" },
            braces(&mut provided.iter().copied()).join(", ")
        )
    }

    /// Renders with `vars`; a placeholder without a value is an error naming it.
    pub fn render(&self, vars: &BTreeMap<&str, Value>) -> anyhow::Result<String> {
        if self.is_graphrag_format() {
            return self.render_python(vars);
        }
        let mut env = minijinja::Environment::new();
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        env.set_keep_trailing_newline(true);
        env.add_template("prompt", &self.text).map_err(|e| anyhow::anyhow!("prompt {}: {e}", self.source))?;
        let tmpl = env.get_template("prompt").expect("just added");
        tmpl.render(vars).map_err(|e| anyhow::anyhow!("prompt {}: {e}", self.source))
    }

    fn render_python(&self, vars: &BTreeMap<&str, Value>) -> anyhow::Result<String> {
        let mut missing = None;
        let out = python_placeholder().replace_all(&self.text, |c: &regex::Captures| match c.get(1) {
            None if &c[0] == "{{" => "{".to_string(),
            None => "}".to_string(),
            Some(name) => match vars.get(name.as_str()) {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => {
                    missing.get_or_insert_with(|| name.as_str().to_string());
                    c[0].to_string()
                }
            },
        });
        match missing {
            Some(name) => anyhow::bail!("prompt {}: no value for placeholder `{{{name}}}`", self.source),
            None => Ok(out.into_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<&'static str, Value> {
        BTreeMap::from([("input_text", Value::from("Scrooge met Marley.")), ("max_length", Value::from(200))])
    }

    #[test]
    fn renders_minijinja_templates() {
        let t = PromptTemplate::new("t", "Text: {{ input_text }}\nLimit {{max_length}} words. JSON: {\"a\": 1}\n");
        assert!(!t.is_graphrag_format());
        assert_eq!(t.render(&vars()).unwrap(), "Text: Scrooge met Marley.\nLimit 200 words. JSON: {\"a\": 1}\n");
        let missing = PromptTemplate::new("t", "{{ nope }}").render(&vars()).unwrap_err();
        assert!(missing.to_string().contains("prompt t"), "{missing}");
    }

    #[test]
    fn renders_graphrag_python_format_files() {
        let t = PromptTemplate::new("g", "Return {{\"title\": \"...\"}} for {input_text} in {max_length} words");
        assert!(t.is_graphrag_format());
        assert_eq!(t.render(&vars()).unwrap(), "Return {\"title\": \"...\"} for Scrooge met Marley. in 200 words");
        let err = PromptTemplate::new("g", "{entity_types}").render(&vars()).unwrap_err();
        assert!(err.to_string().contains("{entity_types}"), "{err}");
    }

    #[test]
    fn placeholders_are_checked_before_rendering() {
        let g = PromptTemplate::new("g.txt", "{{'response': str}} {context_data} up to {followups} for {global_query}");
        let names: Vec<String> = g.placeholders().unwrap().into_iter().collect();
        assert_eq!(names, ["context_data", "followups", "global_query"]);
        assert!(g.check_placeholders("the step", &["context_data", "followups", "global_query", "extra"]).is_ok());
        let err = g.check_placeholders("DRIFT's local step", &["context_data", "global_query"]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("g.txt") && msg.contains("{followups} is not filled by DRIFT's local step"), "{msg}");
        assert!(msg.contains("provides {context_data}, {global_query}"), "{msg}");

        let j =
            PromptTemplate::new("j.txt", "{% for x in range(2) %}{{ x }}{% endfor %}{{ query | upper }} {{ extra }}");
        let names: Vec<String> = j.placeholders().unwrap().into_iter().collect();
        assert_eq!(names, ["extra", "query"]);
        assert!(j.check_placeholders("x", &["query"]).unwrap_err().to_string().contains("{extra} is not"));
    }

    #[test]
    fn shipped_prompts_are_minijinja() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../prompts");
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.ends_with(".txt") && !name.contains("loop") && !name.contains("knowledge") {
                let t = PromptTemplate::new(&name, std::fs::read_to_string(entry.path()).unwrap());
                assert!(!t.is_graphrag_format(), "{name} has no minijinja placeholder");
            }
        }
    }
}
