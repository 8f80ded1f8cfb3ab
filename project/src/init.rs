//! `init`: scaffold a project folder.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use graphrag_engine::prompts::BUILTIN as PROMPTS;
use graphrag_engine::settings::{self, SETTINGS_FILE};
use graphrag_engine::store::atomic_write;

use crate::assets::{ALIASES_EXAMPLE, PROMPTS_README, SETTINGS_EXAMPLE, WORKFLOWS};

/// What [`init`] writes (`graphrag-rs init`'s flags).
#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    /// Overwrite settings.yaml, prompts/ and workflows/ of an existing project
    /// (.env and input/ are kept).
    pub force: bool,
    /// The chat model's name (`-m`, as `graphrag init -m`).
    pub model: Option<String>,
    /// The embedding model's name, or `local` (`-e`).
    pub embedding: Option<String>,
}

/// What `init` wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct InitReport {
    /// The project folder written.
    pub root: PathBuf,
    /// Prompt templates written under prompts/.
    pub prompts: usize,
}

/// The example's chat model line, and its embedding model (the local one).
const CHAT_MODEL_LINE: &str = "    model: gpt-4.1-mini\n";
const LOCAL_EMBEDDING: &str = "    model_provider: local\n    model: all-MiniLM-L6-v2\n    api_key: ${GRAPHRAG_API_KEY}  # unused by `local`; GraphRAG's load_config asks every model for one\n";

/// The settings `init` writes: the example, with the models asked for.
fn settings_text(model: Option<&str>, embedding: Option<&str>) -> String {
    let mut text = SETTINGS_EXAMPLE.to_string();
    if let Some(m) = model {
        text = text.replacen(CHAT_MODEL_LINE, &format!("    model: {m}\n"), 1);
    }
    if let Some(e) = embedding.filter(|e| !matches!(*e, "local" | "all-MiniLM-L6-v2")) {
        let remote = format!("    model_provider: openai\n    model: {e}\n    api_key: ${{GRAPHRAG_API_KEY}}\n");
        text = text.replacen(LOCAL_EMBEDDING, &remote, 1);
    }
    text
}

/// Writes settings.yaml, .env (unless present), prompts/, workflows/ and
/// input/ under `root`; refuses an existing project unless `force`.
pub fn init(root: &Path, opts: &InitOptions) -> anyhow::Result<InitReport> {
    let settings = settings::find(root).unwrap_or_else(|| root.join(SETTINGS_FILE));
    if settings.exists() && !opts.force {
        bail!(
            "{} already exists: {} is a project already (use --force to overwrite its settings, prompts and workflows)",
            settings.display(),
            root.display()
        );
    }
    let write = |rel: &str, text: &str| -> anyhow::Result<()> {
        let path = root.join(rel);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        atomic_write(&path, text.as_bytes()).with_context(|| format!("writing {}", path.display()))
    };
    write(SETTINGS_FILE, &settings_text(opts.model.as_deref(), opts.embedding.as_deref()))?;
    for (name, text) in PROMPTS {
        write(&format!("prompts/{name}"), text)?;
    }
    write("prompts/README.md", PROMPTS_README)?;
    for (method, text) in WORKFLOWS {
        write(&format!("workflows/{method}.yaml"), text)?;
    }
    if !root.join(".env").exists() {
        write(".env", "GRAPHRAG_API_KEY=\n")?;
    }
    // The user's merges: never overwritten.
    if !root.join("aliases.yaml").exists() {
        write("aliases.yaml", ALIASES_EXAMPLE)?;
    }
    fs::create_dir_all(root.join("input"))?;
    Ok(InitReport { root: root.to_path_buf(), prompts: PROMPTS.len() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_asked_for_are_written() {
        assert!(SETTINGS_EXAMPLE.contains(CHAT_MODEL_LINE) && SETTINGS_EXAMPLE.contains(LOCAL_EMBEDDING));
        let text = settings_text(Some("llama3.1"), Some("nomic-embed-text"));
        let s = settings::parse(std::path::Path::new("settings.yaml"), text.replace("${GRAPHRAG_API_KEY}", "k"))
            .unwrap()
            .settings;
        assert_eq!(s.completion_models["default_completion_model"].model, "llama3.1");
        let e = &s.embedding_models["default_embedding_model"];
        assert_eq!(
            (e.model_provider.as_str(), e.model.as_str(), e.api_key.expose()),
            ("openai", "nomic-embed-text", "k")
        );
        assert_eq!(settings_text(None, Some("local")), SETTINGS_EXAMPLE);
    }

    #[test]
    fn init_writes_a_project_and_refuses_to_overwrite_one() {
        let dir = tempfile::tempdir().unwrap();
        let report = init(dir.path(), &InitOptions::default()).unwrap();
        assert_eq!(report.prompts, PROMPTS.len());
        assert!(dir.path().join("settings.yaml").exists() && dir.path().join("input").is_dir());
        assert!(dir.path().join("workflows/fast.yaml").exists());
        let again = init(dir.path(), &InitOptions::default()).unwrap_err().to_string();
        assert!(again.contains("already exists"), "{again}");
        assert!(init(dir.path(), &InitOptions { force: true, ..InitOptions::default() }).is_ok());
    }
}
