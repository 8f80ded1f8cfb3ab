//! `graphrag-rs init`: scaffold a project folder.

use std::fs;
use std::path::Path;

use anyhow::{bail, Context};
use graphrag_engine::settings::SETTINGS_FILE;
use graphrag_engine::store::atomic_write;

use crate::assets::{PROMPTS, SETTINGS_EXAMPLE, WORKFLOWS};

pub fn run(root: &Path, force: bool) -> anyhow::Result<()> {
    let settings = root.join(SETTINGS_FILE);
    if settings.exists() && !force {
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
    write(SETTINGS_FILE, SETTINGS_EXAMPLE)?;
    for (name, text) in PROMPTS {
        write(&format!("prompts/{name}"), text)?;
    }
    for (method, text) in WORKFLOWS {
        write(&format!("workflows/{method}.yaml"), text)?;
    }
    if !root.join(".env").exists() {
        write(".env", "GRAPHRAG_API_KEY=\n")?;
    }
    fs::create_dir_all(root.join("input"))?;
    println!("Initialised a graphrag-rs project in {}", root.display());
    println!("  settings.yaml, .env, prompts/ ({} templates), workflows/ (standard, fast), input/", PROMPTS.len());
    println!(
        "Next: put documents in {}, then `graphrag-rs index --root {}`",
        root.join("input").display(),
        root.display()
    );
    Ok(())
}
