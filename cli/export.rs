//! `graphrag-rs export lancedb`: GraphRAG 3.3's LanceDB tables of the
//! index's vectors (graphrag_project's `export`).

use std::path::PathBuf;

use graphrag_engine::settings;
use graphrag_project::export;

pub struct ExportArgs {
    pub root: PathBuf,
    pub db_uri: Option<PathBuf>,
    pub python: Option<PathBuf>,
    pub verbosity: i8,
}

pub fn run(args: &ExportArgs) -> anyhow::Result<()> {
    crate::logging::init(args.verbosity, None)?;
    let settings = settings::load(&args.root)?.settings;
    let db_uri = args.db_uri.clone().unwrap_or_else(|| export::db_uri(&args.root, &settings));
    let tables = export::lancedb(&args.root, &settings, &db_uri, args.python.as_deref())?;
    if args.verbosity >= 0 {
        println!("LanceDB tables in {} (GraphRAG 3.3's layout):", db_uri.display());
        for t in &tables {
            println!("  {:<24} {:>8} rows  dimension {}", t.table, t.rows, t.dimension);
        }
    }
    Ok(())
}
