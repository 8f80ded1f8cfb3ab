//! `graphrag-rs update`: brings the index up to date with the input folder
//! (new, changed and removed documents) without paying for unchanged work.
//!
//! The pipeline runs again over the whole input, into `output/.update/`:
//! unchanged documents give the same chunks, hence the same prompts, which
//! the LLM cache answers (no tokens); merged descriptions, communities and
//! reports that did not change give the same prompts again; clustering is
//! warm-started from the previous communities so untouched ones keep their
//! members and numbers (and so their cached reports). Only when every step
//! succeeded are the staged tables published together; until then the
//! previous index stays live, and a rerun resumes from the staged steps.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::bail;
use arrow_array::RecordBatch;
use graphrag_engine::context::PublishedTables;
use graphrag_engine::pipeline::Plan;
use graphrag_engine::stats::RunStats;
use graphrag_engine::table::strings;
use graphrag_engine::{doc_status, settings, staging, store};

use crate::index::{
    print_plan, print_steps, run_options, warn_about_tolerated_failures, with_failure_note, OpenOptions, Project,
};

pub struct UpdateArgs {
    pub root: PathBuf,
    pub method: String,
    pub dry_run: bool,
    pub no_cache: bool,
    pub skip_validation: bool,
    pub verbosity: i8,
}

pub fn run(args: &UpdateArgs) -> anyhow::Result<()> {
    let output_dir = args.root.join(settings::load(&args.root)?.settings.output_storage.base_dir);
    // A dry run changes nothing: it neither takes the writer lock nor waits for it.
    let _lock = if args.dry_run {
        staging::recover_if_idle(&output_dir)?;
        None
    } else {
        let lock = staging::lock_for_writing(&output_dir)?;
        staging::recover(&output_dir)?;
        Some(lock)
    };
    let has_index = output_dir.join("documents.parquet").exists();
    let method = match args.method.as_str() {
        "auto" if has_index => previous_method(&output_dir).unwrap_or_else(|| "auto".into()),
        other => other.to_string(),
    };
    let project = Project::open(
        &args.root,
        &OpenOptions { method: &method, verbosity: args.verbosity, run: !args.dry_run, no_cache: args.no_cache },
    )?;
    let opts = run_options(project.settings(), true, args.verbosity);
    let cache = &project.settings().cache;
    // --no-cache asks for it; a cache.type that keeps nothing is more likely an oversight.
    if !cache.enabled() && has_index && !args.no_cache {
        bail!(
            "`update` reuses the cached model answers of unchanged documents, and cache.type is `{}` in settings.yaml, so it would pay for every document again: set cache.type to `json` (the default), or run `graphrag-rs index`",
            cache.kind
        );
    }
    if !args.dry_run && !args.skip_validation {
        project.check_models()?;
    }
    let staging_dir = staging::dir(&output_dir);
    let settings = project.settings().clone();
    let previous = has_index.then(|| Box::new(PublishedTables { output_dir: output_dir.clone() }) as _);
    let (plan, ws) = project.workspace(&staging_dir, previous);
    if args.dry_run {
        return print_plan(&plan, &ws, true);
    }
    if !has_index {
        tracing::info!("no index in {} yet: indexing every document", output_dir.display());
    }
    let before = if has_index { Some(store::read_table(&output_dir.join("documents.parquet"))?) } else { None };
    // Steps an interrupted update finished are kept (resume).
    let (stats, after) = doc_status::run_tracked(&plan, &ws, &opts, &output_dir, || staging::commit(&output_dir))
        .map_err(|e| with_failure_note(e, &output_dir, has_index, "graphrag-rs update"))?;
    warn_about_tolerated_failures(&stats);
    if args.verbosity >= 0 {
        print_summary(&plan, &stats, before.as_ref(), after.as_ref())?;
    }
    crate::export::after_run(&args.root, &settings, args.verbosity);
    Ok(())
}

/// The pipeline the previous index was built with (from its stats.json),
/// when it is one `--method` can name.
fn previous_method(output_dir: &Path) -> Option<String> {
    let stats: serde_json::Value = serde_json::from_slice(&std::fs::read(output_dir.join("stats.json")).ok()?).ok()?;
    let name = stats.get("pipeline")?.as_str()?;
    matches!(name, "standard" | "fast" | "light").then(|| name.to_string())
}

/// Documents added, changed (same title, new content), removed and
/// unchanged between two documents tables.
#[derive(Debug, Default, PartialEq)]
struct Changes {
    added: Vec<String>,
    changed: Vec<String>,
    removed: Vec<String>,
    unchanged: usize,
}

fn changes(before: Option<&RecordBatch>, after: &RecordBatch) -> anyhow::Result<Changes> {
    let by_title = |t: &RecordBatch| -> anyhow::Result<BTreeMap<String, BTreeSet<String>>> {
        let mut m: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (id, title) in strings(t, "documents", "id")?.into_iter().zip(strings(t, "documents", "title")?) {
            m.entry(title.to_string()).or_default().insert(id.to_string());
        }
        Ok(m)
    };
    let old = before.map(by_title).transpose()?.unwrap_or_default();
    let new = by_title(after)?;
    let mut c = Changes::default();
    for (title, ids) in &new {
        match old.get(title) {
            None => c.added.push(title.clone()),
            Some(prev) if prev != ids => c.changed.push(title.clone()),
            Some(_) => c.unchanged += 1,
        }
    }
    c.removed = old.keys().filter(|t| !new.contains_key(*t)).cloned().collect();
    Ok(c)
}

fn print_summary(
    plan: &Plan,
    stats: &RunStats,
    before: Option<&RecordBatch>,
    after: Option<&RecordBatch>,
) -> anyhow::Result<()> {
    println!("Updated with pipeline `{}` in {:.2} s:", plan.name, stats.total_runtime);
    if let Some(after) = after {
        let c = changes(before, after)?;
        let list = |v: &[String]| if v.is_empty() { String::new() } else { format!(" ({})", v.join(", ")) };
        println!("  documents: {} added{}", c.added.len(), list(&c.added));
        println!("             {} changed{}", c.changed.len(), list(&c.changed));
        println!("             {} removed{}", c.removed.len(), list(&c.removed));
        println!("             {} unchanged", c.unchanged);
    }
    for (model, u) in &stats.llm {
        println!(
            "  {model}: {} calls ({} prompt tokens), {} answered from the cache",
            u.calls, u.prompt_tokens, u.cache_hits
        );
    }
    print_steps(plan, stats);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphrag_engine::schema;

    fn docs(rows: &[(&str, &str)]) -> RecordBatch {
        let n = rows.len();
        RecordBatch::try_new(
            schema::documents(arrow_schema::DataType::LargeUtf8),
            vec![
                schema::text_col(rows.iter().map(|r| r.0)),
                schema::int_col(0..n as i64),
                schema::text_col(rows.iter().map(|r| r.1)),
                schema::text_col(vec!["t"; n]),
                schema::id_list_col(vec![Vec::<String>::new(); n]),
                schema::text_col(vec!["2026"; n]),
                schema::opt_text_col(vec![None; n]),
            ],
        )
        .unwrap()
    }

    #[test]
    fn changes_by_title_and_content() {
        let before = docs(&[("1", "a.txt"), ("2", "b.txt"), ("3", "c.txt")]);
        let after = docs(&[("1", "a.txt"), ("4", "b.txt"), ("5", "d.txt")]);
        let c = changes(Some(&before), &after).unwrap();
        assert_eq!(
            c,
            Changes {
                added: vec!["d.txt".into()],
                changed: vec!["b.txt".into()],
                removed: vec!["c.txt".into()],
                unchanged: 1
            }
        );
        assert_eq!(changes(None, &after).unwrap().added.len(), 3);
    }
}
