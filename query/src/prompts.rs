//! Query prompts: the project's files named in settings.yaml, or the shipped
//! template when the setting keeps its default path and the project has no
//! such file (e.g. an output folder written by another tool).

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
    shipped!("keywords_extraction"),
    shipped!("mix_search_system_prompt"),
    shipped!("rate_community"),
];

/// Loads the prompt at `path` (relative to `root`) configured by `setting`.
pub fn load(root: &Path, setting: &str, path: &str) -> anyhow::Result<PromptTemplate> {
    let full = root.join(path);
    if full.exists() {
        let text = std::fs::read_to_string(&full)
            .with_context(|| format!("reading prompt {} (settings `{setting}`)", full.display()))?;
        return Ok(PromptTemplate::new(full.display().to_string(), text));
    }
    let normal = path.trim_start_matches("./");
    match SHIPPED.iter().find(|(p, _)| *p == normal) {
        Some((p, text)) => Ok(PromptTemplate::new(format!("<built-in {p}>"), *text)),
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
        let err = load(dir.path(), "basic_search.prompt", "prompts/other.txt").unwrap_err();
        assert!(err.to_string().contains("basic_search.prompt"), "{err}");
        assert!(fixed(dir.path(), "rate_community").is_ok());
    }
}
