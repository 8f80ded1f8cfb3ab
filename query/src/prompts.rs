//! Query prompts: the project's files named in settings.yaml, or, as
//! GraphRAG does for its search prompts, the built-in prompt of that setting
//! when the file is not there (a GraphRAG project's
//! `prompts/drift_search_reduce_prompt.txt`, which `graphrag init` names
//! but does not write; an output folder written by another tool).

use std::path::Path;

use anyhow::Context;
use graphrag_engine::prompts::{project_prompt, PromptTemplate};

/// (setting, built-in prompt file) of every configurable query prompt.
const BUILTIN_OF_SETTING: &[(&str, &str)] = &[
    ("local_search.prompt", "local_search_system_prompt.txt"),
    ("global_search.map_prompt", "global_search_map_system_prompt.txt"),
    ("global_search.reduce_prompt", "global_search_reduce_system_prompt.txt"),
    ("global_search.knowledge_prompt", "global_search_knowledge_system_prompt.txt"),
    ("basic_search.prompt", "basic_search_system_prompt.txt"),
    ("drift_search.prompt", "drift_search_system_prompt.txt"),
    ("drift_search.reduce_prompt", "drift_reduce_prompt.txt"),
    ("keyword_search.keywords_prompt", "keywords_extraction.txt"),
    ("keyword_search.prompt", "mix_search_system_prompt.txt"),
    ("ppr_search.prompt", "basic_search_system_prompt.txt"),
];

/// Loads the prompt at `path` (relative to `root`) configured by `setting`.
pub fn load(root: &Path, setting: &str, path: &str) -> anyhow::Result<PromptTemplate> {
    let fallback = BUILTIN_OF_SETTING.iter().find(|(s, _)| *s == setting).map(|(_, file)| *file);
    let full = root.join(path);
    project_prompt(path, fallback, || {
        if !full.exists() {
            return Ok(None);
        }
        std::fs::read_to_string(&full)
            .map(Some)
            .with_context(|| format!("reading prompt {} (settings `{setting}`)", full.display()))
    })
    .with_context(|| format!("settings `{setting}`"))
}

/// A prompt that is not configurable in settings.yaml (built in, unless
/// the project has its own copy under prompts/).
pub fn fixed(root: &Path, name: &str) -> anyhow::Result<PromptTemplate> {
    let file = format!("{name}.txt");
    let full = root.join("prompts").join(&file);
    project_prompt(&format!("prompts/{file}"), Some(&file), || {
        if !full.exists() {
            return Ok(None);
        }
        std::fs::read_to_string(&full).map(Some).with_context(|| format!("reading prompt {}", full.display()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_prompts_stand_in_for_missing_files_and_project_files_win() {
        let dir = tempfile::tempdir().unwrap();
        let p = load(dir.path(), "local_search.prompt", "prompts/local_search_system_prompt.txt").unwrap();
        assert!(p.source.contains("built-in"));
        assert!(p.text.contains("{{ context_data }}"));
        std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
        std::fs::write(dir.path().join("prompts/local_search_system_prompt.txt"), "mine {context_data}").unwrap();
        let p = load(dir.path(), "local_search.prompt", "prompts/local_search_system_prompt.txt").unwrap();
        assert_eq!(p.text, "mine {context_data}");
        // The path `graphrag init` writes into settings.yaml but not onto disk.
        let p = load(dir.path(), "drift_search.reduce_prompt", "prompts/drift_search_reduce_prompt.txt").unwrap();
        assert_eq!(p.source, "<built-in drift_reduce_prompt.txt>");
        let err = load(dir.path(), "other.prompt", "prompts/other.txt").unwrap_err();
        assert!(format!("{err:#}").contains("other.prompt"), "{err:#}");
        assert!(fixed(dir.path(), "rate_community").is_ok());
    }
}
