//! `export lancedb`: the index's vectors as the LanceDB tables
//! Microsoft GraphRAG 3.3 reads, so that its Python API (`graphrag.api`'s
//! local, basic and drift search) runs on a graphrag-rs output folder.
//! The Rust LanceDB crate is too heavy to build here; the tables are written
//! by scripts/export_lancedb.py (embedded in the binary) with Python's
//! `lancedb` package. `index` and `update` export too when settings.yaml
//! has `vector_store.type: lancedb`, as GraphRAG's own settings do.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context};
use graphrag_engine::settings::Settings;
use graphrag_engine::storage::{Published, Storage};
use graphrag_engine::store;

use crate::assets::EXPORT_LANCEDB_SCRIPT;

/// The fields GraphRAG 3.3 embeds and reads, each a LanceDB table (of that
/// name unless `vector_store.index_schema` renames it).
const GRAPHRAG_FIELDS: [&str; 3] = ["entity_description", "community_full_content", "text_unit_text"];

/// Exit status of the script when lancedb or pyarrow cannot be imported.
const NO_LANCEDB: i32 = 3;

/// One table written: name, rows, vector dimension.
#[derive(Debug, Clone, PartialEq)]
pub struct Exported {
    /// The table's name (`vector_store.index_schema` may rename it).
    pub table: String,
    /// Vectors written.
    pub rows: u64,
    /// Length of each vector.
    pub dimension: u64,
}

/// The LanceDB tables a run wrote (settings' `vector_store.type: lancedb`).
#[derive(Debug, Clone, PartialEq)]
pub struct LanceDbExport {
    /// The LanceDB database folder ([`db_uri`]).
    pub db_uri: PathBuf,
    /// The tables written, one per embedded field present.
    pub tables: Vec<Exported>,
}

/// `vector_store.db_uri` (GraphRAG's default `output/lancedb`), relative to
/// the project root as GraphRAG reads it.
pub fn db_uri(root: &Path, settings: &Settings) -> PathBuf {
    root.join(settings.vector_store.db_uri.as_deref().unwrap_or("output/lancedb"))
}

/// Where an embedded field goes, as the script's `FIELD=TABLE:ID:VECTOR`
/// argument: GraphRAG's `vector_store.index_schema.<field>` (index_name,
/// id_field, vector_field), by default the field's name, `id`, `vector`.
fn table_spec(settings: &Settings, field: &str) -> String {
    match settings.vector_store.index_schema.get(field) {
        Some(s) => {
            format!("{field}={}:{}:{}", s.index_name.as_deref().unwrap_or(field), s.id_field, s.vector_field)
        }
        None => format!("{field}={field}:id:vector"),
    }
}

/// After `index` or `update`: the LanceDB tables when settings.yaml asks for
/// them. The index is complete either way, so a failure is a warning (logged)
/// that says how to export later, and `None`.
pub(crate) fn after_run(root: &Path, settings: &Settings) -> Option<LanceDbExport> {
    if settings.vector_store.kind != "lancedb" {
        return None;
    }
    let db_uri = db_uri(root, settings);
    match lancedb(root, settings, &db_uri, None) {
        Ok(tables) => Some(LanceDbExport { db_uri, tables }),
        Err(e) => {
            tracing::warn!(
                "vector_store.type is lancedb but the LanceDB tables were not written: {e:#}. The index itself is complete (graphrag-rs does not need them); write them later with `graphrag-rs export lancedb --root {}`",
                root.display()
            );
            None
        }
    }
}

/// Writes GraphRAG's LanceDB tables into `db_uri` from the published
/// index's embeddings files, running `python` (else `$GRAPHRAG_RS_PYTHON`,
/// else `python3`). Fails when there is no index or no vectors, while a run
/// publishes, or when the interpreter lacks the lancedb package (the error
/// says how to install it).
pub fn lancedb(
    root: &Path,
    settings: &Settings,
    db_uri: &Path,
    python: Option<&Path>,
) -> anyhow::Result<Vec<Exported>> {
    let output = Storage::open(root, settings)?.output;
    let version = match output.open_published()? {
        Published::Version(version) => version,
        Published::Busy => {
            bail!("another graphrag-rs run is publishing {} now: export when it is done", output.describe())
        }
        Published::Nothing(_) => bail!(
            "no index in {} to export: run `graphrag-rs index --root {}` first",
            output.describe(),
            root.display()
        ),
    };
    let present: Vec<&str> = GRAPHRAG_FIELDS
        .into_iter()
        .filter(|f| store::table_path(version.dir(), &format!("embeddings.{f}"), true).is_file())
        .collect();
    if present.is_empty() {
        bail!(
            "no vectors to export in {}: it has none of embeddings.{{{}}}.parquet (run `graphrag-rs index --root {}` first)",
            output.describe(),
            GRAPHRAG_FIELDS.join(","),
            root.display()
        );
    }
    for missing in GRAPHRAG_FIELDS.iter().filter(|f| !present.contains(f)) {
        tracing::warn!(
            "{} has no embeddings.{missing}.parquet (embed_text.names): GraphRAG's table `{missing}` is not written",
            output.describe()
        );
    }
    let python = python_interpreter(python);
    let mut child = Command::new(&python)
        .arg("-")
        .arg("--output")
        .arg(version.dir())
        .arg("--db-uri")
        .arg(db_uri)
        .args(present.iter().map(|f| table_spec(settings, f)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            anyhow::anyhow!(
                "cannot run `{}` ({e}): the LanceDB export needs Python 3 with the lancedb package; pass --python (or set GRAPHRAG_RS_PYTHON) to the interpreter of your graphrag environment",
                python.display()
            )
        })?;
    child.stdin.take().expect("piped").write_all(EXPORT_LANCEDB_SCRIPT.as_bytes())?;
    let out = child.wait_with_output().with_context(|| format!("running {}", python.display()))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => {}
        Some(NO_LANCEDB) => bail!(
            "the lancedb Python package is not installed for `{p}` ({}): run `{p} -m pip install lancedb`, or pass --python (or set GRAPHRAG_RS_PYTHON) to the interpreter of your graphrag environment",
            stderr.trim(),
            p = python.display()
        ),
        _ => bail!("the LanceDB export ({}) failed ({}): {}", python.display(), out.status, last_lines(&stderr, 8)),
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            match cols[..] {
                [table, rows, dimension] => {
                    Ok(Exported { table: table.to_string(), rows: rows.parse()?, dimension: dimension.parse()? })
                }
                _ => bail!("unexpected line from the LanceDB export: {line}"),
            }
        })
        .collect()
}

/// `--python`, else `$GRAPHRAG_RS_PYTHON`, else `python3`.
fn python_interpreter(python: Option<&Path>) -> PathBuf {
    python
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os("GRAPHRAG_RS_PYTHON").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("python3"))
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim().lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphrag_engine::settings;

    #[test]
    fn tables_are_named_as_graphrag_s_index_schema_says() {
        let text = "vector_store:\n  type: lancedb\n  index_schema:\n    entity_description:\n      index_name: ents\n      id_field: eid\n";
        let s = settings::parse(Path::new("settings.yaml"), text.to_string()).unwrap().settings;
        assert_eq!(table_spec(&s, "entity_description"), "entity_description=ents:eid:vector");
        assert_eq!(table_spec(&s, "text_unit_text"), "text_unit_text=text_unit_text:id:vector");
        assert_eq!(db_uri(Path::new("/p"), &s), Path::new("/p/output/lancedb"));
    }
}
