//! Query prompts: the project's files named in settings.yaml, or the shipped
//! template when the project has no such file — silently when the setting
//! keeps its default path (e.g. an output folder written by another tool),
//! with a notice otherwise (GraphRAG falls back to its built-in prompt the
//! same way: `graphrag init` writes `drift_search.reduce_prompt:
//! prompts/drift_search_reduce_prompt.txt` and no such file).

use std::path::Path;

use anyhow::Context;
use graphrag_engine::prompts::PromptTemplate;

macro_rules! shipped {
    ($name:literal) => {
        (concat!("prompts/", $name, ".txt"), include_str!(concat!("../../prompts/", $name, ".txt")))
    };
}

/// (default settings path, template) of every query prompt.
const SHIPPED: &[(&str, &str)] = &[
    shipped!("local_search_system_prompt"),
    shipped!("global_search_map_system_prompt"),
    shipped!("global_search_reduce_system_prompt"),
    shipped!("global_search_knowledge_system_prompt"),
    shipped!("basic_search_system_prompt"),
    shipped!("drift_search_system_prompt"),
    shipped!("drift_reduce_prompt"),
    shipped!("drift_primer"),
    shipped!("drift_query_expansion"),
    shipped!("keywords_extraction"),
    shipped!("mix_search_system_prompt"),
    shipped!("rate_community"),
];

/// The shipped prompt of each query prompt setting.
const BY_SETTING: &[(&str, &str)] = &[
    ("local_search.prompt", "prompts/local_search_system_prompt.txt"),
    ("global_search.map_prompt", "prompts/global_search_map_system_prompt.txt"),
    ("global_search.reduce_prompt", "prompts/global_search_reduce_system_prompt.txt"),
    ("global_search.knowledge_prompt", "prompts/global_search_knowledge_system_prompt.txt"),
    ("basic_search.prompt", "prompts/basic_search_system_prompt.txt"),
    ("drift_search.prompt", "prompts/drift_search_system_prompt.txt"),
    ("drift_search.reduce_prompt", "prompts/drift_reduce_prompt.txt"),
    ("keyword_search.keywords_prompt", "prompts/keywords_extraction.txt"),
    ("keyword_search.prompt", "prompts/mix_search_system_prompt.txt"),
];

fn shipped(path: &str) -> Option<PromptTemplate> {
    let normal = path.trim_start_matches("./");
    SHIPPED.iter().find(|(p, _)| *p == normal).map(|(p, text)| PromptTemplate::new(format!("<built-in {p}>"), *text))
}

/// Loads the prompt at `path` (relative to `root`) configured by `setting`.
pub fn load(root: &Path, setting: &str, path: &str) -> anyhow::Result<PromptTemplate> {
    let full = root.join(path);
    if full.exists() {
        let text = std::fs::read_to_string(&full)
            .with_context(|| format!("reading prompt {} (settings `{setting}`)", full.display()))?;
        return Ok(PromptTemplate::new(full.display().to_string(), text));
    }
    if let Some(prompt) = shipped(path) {
        return Ok(prompt);
    }
    match BY_SETTING.iter().find(|(s, _)| *s == setting).and_then(|(_, p)| shipped(p)) {
        Some(prompt) => {
            tracing::warn!(
                "prompt file {} (settings `{setting}`) does not exist: using the built-in prompt instead, as GraphRAG does",
                full.display()
            );
            Ok(prompt)
        }
        None => anyhow::bail!("prompt file {} not found (settings `{setting}`)", full.display()),
    }
}

/// A prompt that is not configurable in settings.yaml (shipped only, unless
/// the project has its own copy under prompts/).
pub fn fixed(root: &Path, name: &str) -> anyhow::Result<PromptTemplate> {
    load(root, name, &format!("prompts/{name}.txt"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_prompts_are_found_and_project_files_win() {
        let dir = tempfile::tempdir().unwrap();
        let p = load(dir.path(), "local_search.prompt", "prompts/local_search_system_prompt.txt").unwrap();
        assert!(p.source.contains("built-in"));
        assert!(p.text.contains("{{ context_data }}"));
        std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
        std::fs::write(dir.path().join("prompts/local_search_system_prompt.txt"), "mine {context_data}").unwrap();
        let p = load(dir.path(), "local_search.prompt", "prompts/local_search_system_prompt.txt").unwrap();
        assert_eq!(p.text, "mine {context_data}");
        let err = load(dir.path(), "rate_community", "prompts/other.txt").unwrap_err();
        assert!(err.to_string().contains("rate_community"), "{err}");
        // GraphRAG's init names a reduce prompt file it does not write: the built-in one answers.
        let p = load(dir.path(), "drift_search.reduce_prompt", "prompts/drift_search_reduce_prompt.txt").unwrap();
        assert_eq!(p.source, "<built-in prompts/drift_reduce_prompt.txt>");
        assert!(fixed(dir.path(), "rate_community").is_ok());
    }
}
