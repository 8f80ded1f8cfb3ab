//! `graphrag-rs init`: scaffold a project folder (graphrag_project's `init`),
//! or a project root in a bucket (written through its working copy).

use std::path::PathBuf;

use graphrag_engine::settings::ProjectRoot;
use graphrag_project::InitOptions;

pub struct InitArgs {
    pub root: ProjectRoot,
    pub work_dir: Option<PathBuf>,
    pub options: InitOptions,
}

pub fn run(args: &InitArgs) -> anyhow::Result<()> {
    let (shown, input, prompts) = match &args.root {
        ProjectRoot::Folder(dir) => {
            let report = graphrag_project::init(dir, &args.options)?;
            let root = report.root.display().to_string();
            (root.clone(), report.root.join("input").display().to_string(), report.prompts)
        }
        ProjectRoot::Remote(remote) => {
            let mut prompts = 0;
            graphrag_engine::storage::root::init(remote, args.work_dir.as_deref(), args.options.force, |dir| {
                prompts = graphrag_project::init(dir, &args.options)?.prompts;
                Ok(())
            })?;
            (remote.url(), format!("{}/input/", remote.url()), prompts)
        }
    };
    println!("Initialised a graphrag-rs project in {shown}");
    println!(
        "  settings.yaml, .env, aliases.yaml, prompts/ ({prompts} templates), workflows/ (standard, fast, light), input/"
    );
    println!("Next: put documents in {input}, then `graphrag-rs index --root {shown}`");
    Ok(())
}
