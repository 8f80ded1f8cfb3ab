//! `graphrag-rs init`: scaffold a project folder (graphrag_project's `init`).

use std::path::PathBuf;

use graphrag_project::InitOptions;

pub struct InitArgs {
    pub root: PathBuf,
    pub options: InitOptions,
}

pub fn run(args: &InitArgs) -> anyhow::Result<()> {
    let report = graphrag_project::init(&args.root, &args.options)?;
    let root = &report.root;
    println!("Initialised a graphrag-rs project in {}", root.display());
    println!(
        "  settings.yaml, .env, aliases.yaml, prompts/ ({} templates), workflows/ (standard, fast, light), input/",
        report.prompts
    );
    println!(
        "Next: put documents in {}, then `graphrag-rs index --root {}`",
        root.join("input").display(),
        root.display()
    );
    Ok(())
}
