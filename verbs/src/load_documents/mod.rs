//! `load_documents`: input files → documents (text, markdown, csv, json,
//! jsonl, parquet, pdf, docx, or GraphRAG's `markitdown`: pdf, docx, md and
//! txt files together). A file that cannot be read is named with the reason
//! and left out (counted in stats.json, `failed` in document_status), or, with
//! `strict`, stops the run. A record of a csv, json, jsonl or parquet file
//! whose text is null or missing (its file has the text column) is named and
//! skipped, the file's other records indexed (`unreadable_records` in
//! stats.json), or, with `strict`, stops the run.

mod formats;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use anyhow::{anyhow, bail};
use arrow_array::{Array, ArrayRef, NullArray, RecordBatch, StructArray};
use arrow_schema::{DataType, Fields};
use rayon::prelude::*;
use regex::Regex;
use serde::Deserialize;

use graphrag_engine::context::VerbContext;
use graphrag_engine::schema;
use graphrag_engine::settings::InputConfig;
use graphrag_engine::storage::files::FileEntry;
use graphrag_engine::verb::{Verb, VerbDef, VerbInfo};
use graphrag_operations::ids::{sha256_hex, sha512_hex};
use graphrag_operations::suggest::did_you_mean;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileType {
    Text,
    Markdown,
    Csv,
    Json,
    Jsonl,
    Parquet,
    Pdf,
    Docx,
    /// GraphRAG's reader of documents converted to text (by their extension).
    Markitdown,
}

impl FileType {
    /// The name settings.yaml gives it (`input.type`).
    fn name(self) -> &'static str {
        match self {
            FileType::Text => "text",
            FileType::Markdown => "markdown",
            FileType::Csv => "csv",
            FileType::Json => "json",
            FileType::Jsonl => "jsonl",
            FileType::Parquet => "parquet",
            FileType::Pdf => "pdf",
            FileType::Docx => "docx",
            FileType::Markitdown => "markitdown",
        }
    }

    /// The files it reads without an `input.file_pattern`: by extension, in
    /// any case (`A.TXT` too, as LightRAG's uploads): the server accepts an
    /// upload by this pattern, so one it accepts is also one a run indexes.
    fn default_pattern(self) -> &'static str {
        match self {
            FileType::Text => r"(?i).*\.txt$",
            FileType::Markdown => r"(?i).*\.(md|markdown)$",
            FileType::Csv => r"(?i).*\.csv$",
            FileType::Json => r"(?i).*\.json$",
            FileType::Jsonl => r"(?i).*\.jsonl$",
            FileType::Parquet => r"(?i).*\.parquet$",
            FileType::Pdf => r"(?i).*\.pdf$",
            FileType::Docx => r"(?i).*\.docx$",
            FileType::Markitdown => r"(?i).*\.(pdf|docx|md|markdown|txt)$",
        }
    }

    /// The extensions (lowercase, no dot) of the files it reads.
    fn extensions(self) -> &'static [&'static str] {
        match self {
            FileType::Text => &["txt"],
            FileType::Markdown => &["md", "markdown"],
            FileType::Csv => &["csv"],
            FileType::Json => &["json"],
            FileType::Jsonl => &["jsonl"],
            FileType::Parquet => &["parquet"],
            FileType::Pdf => &["pdf"],
            FileType::Docx => &["docx"],
            FileType::Markitdown => &["pdf", "docx", "md", "markdown", "txt"],
        }
    }

    /// The type of one file of a `markitdown` input, by its extension.
    fn of_document(path: &str) -> anyhow::Result<FileType> {
        let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
        Ok(match ext.as_str() {
            "pdf" => FileType::Pdf,
            "docx" => FileType::Docx,
            "md" | "markdown" => FileType::Markdown,
            "txt" => FileType::Text,
            _ => bail!(
                "`.{ext}` files cannot be converted here (input.type markitdown reads pdf, docx, md, markdown, txt)"
            ),
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoadDocuments {
    pub file_type: FileType,
    /// Regex on the path relative to the input folder (default per file type).
    pub file_pattern: Option<String>,
    pub text_column: String,
    /// csv/json column holding the title; default: the file name.
    pub title_column: Option<String>,
    /// csv/json column holding the document id; default: a hash of the text.
    pub id_column: Option<String>,
    /// csv/json columns kept in raw_data; empty: every column but text and title.
    pub metadata: Vec<String>,
    /// An unreadable file stops the run instead of being left out.
    pub strict: bool,
}

impl Default for LoadDocuments {
    fn default() -> Self {
        let s = InputConfig::default();
        LoadDocuments {
            file_type: FileType::Text,
            file_pattern: s.file_pattern,
            text_column: s.text_column,
            title_column: s.title_column,
            id_column: s.id_column,
            metadata: s.metadata,
            strict: s.strict,
        }
    }
}

impl VerbDef for LoadDocuments {
    const INFO: VerbInfo = VerbInfo {
        name: "load_documents",
        about: "read the input files into a documents table",
        inputs: &[],
        outputs: &["documents"],
    };

    fn check(&self) -> Result<(), String> {
        self.pattern().map(|_| ())
    }
}

/// Which files the project's `input` settings read: what a server checks
/// before it accepts an upload (a file the run would not read is refused,
/// not left pending).
pub struct InputFiles {
    file_type: FileType,
    pattern: Regex,
    /// `input.file_pattern` as written, if set.
    custom_pattern: Option<String>,
}

impl InputFiles {
    pub fn from_settings(input: &InputConfig) -> anyhow::Result<InputFiles> {
        use serde::de::IntoDeserializer;
        let file_type = FileType::deserialize(input.file_type.as_str().into_deserializer())
            .map_err(|e: serde::de::value::Error| anyhow!("input.type: {e}"))?;
        let p = input.file_pattern.as_deref().unwrap_or(file_type.default_pattern());
        let pattern = Regex::new(p)
            .map_err(|e| anyhow!("input.file_pattern {}", graphrag_engine::settings::regex_error(p, &e)))?;
        Ok(InputFiles { file_type, pattern, custom_pattern: input.file_pattern.clone() })
    }

    /// Whether a file of this path (relative to the input folder) is read.
    pub fn reads(&self, path: &str) -> bool {
        // A pattern decides, but `markitdown` converts only the types it knows.
        self.pattern.is_match(path) && (self.file_type != FileType::Markitdown || FileType::of_document(path).is_ok())
    }

    /// The extensions (dotted, lowercase) of files it reads.
    pub fn extensions(&self) -> Vec<String> {
        self.file_type.extensions().iter().filter(|e| self.reads(&format!("x.{e}"))).map(|e| format!(".{e}")).collect()
    }

    /// `input.type: text` (and the pattern, if one is set): for messages.
    pub fn describe(&self) -> String {
        match &self.custom_pattern {
            None => format!("input.type: {}", self.file_type.name()),
            Some(p) => format!("input.type: {}, input.file_pattern: {p}", self.file_type.name()),
        }
    }
}

/// One document before ids are assigned.
struct RawDoc {
    /// From `id_column`; else the id is a hash of the text.
    id: Option<String>,
    title: String,
    text: String,
    raw_data: Option<BTreeMap<String, String>>,
    creation_date: String,
}

impl LoadDocuments {
    fn pattern(&self) -> Result<Regex, String> {
        let p = self.file_pattern.as_deref().unwrap_or(self.file_type.default_pattern());
        Regex::new(p).map_err(|e| format!("file_pattern {}", graphrag_engine::settings::regex_error(p, &e)))
    }

    fn matching_files(&self, ctx: &VerbContext) -> anyhow::Result<Vec<FileEntry>> {
        let re = self.pattern().map_err(|e| anyhow!(e))?;
        Ok(ctx.files.list()?.into_iter().filter(|f| re.is_match(&f.path)).collect())
    }

    /// The documents of one file; an error says why the file cannot be read
    /// (the caller names the file).
    fn parse_file(&self, file: &FileEntry, bytes: Vec<u8>, ctx: &VerbContext) -> anyhow::Result<Vec<RawDoc>> {
        let creation_date =
            chrono::DateTime::<chrono::Utc>::from(file.modified).format("%Y-%m-%d %H:%M:%S %z").to_string();
        let doc = |id: Option<String>, title: String, text: String, raw_data| RawDoc {
            id,
            title,
            text,
            raw_data,
            creation_date: creation_date.clone(),
        };
        let file_type = match self.file_type {
            FileType::Markitdown => FileType::of_document(&file.path)?,
            other => other,
        };
        // `columns`: every column of the file, also those null in some rows
        // (a row without its text is then that row's problem, not the file's).
        let (columns, rows): (BTreeSet<String>, Vec<formats::Record>) = match file_type {
            FileType::Pdf => return Ok(vec![doc(None, file.path.clone(), formats::pdf_text(&bytes)?, None)]),
            FileType::Docx => return Ok(vec![doc(None, file.path.clone(), formats::docx_text(&bytes)?, None)]),
            FileType::Parquet => formats::parquet_rows(bytes)?,
            _ => {
                let text = String::from_utf8(bytes).map_err(|e| {
                    anyhow!(
                        "not valid UTF-8 (first invalid byte at offset {}); convert it to UTF-8 (e.g. `iconv -f latin1 -t utf-8`)",
                        e.utf8_error().valid_up_to()
                    )
                })?;
                let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
                match file_type {
                    FileType::Csv => {
                        let rows = csv_rows(text)?;
                        (rows.iter().flat_map(|r| r.keys().cloned()).collect(), rows)
                    }
                    FileType::Json => {
                        let value: serde_json::Value =
                            serde_json::from_str(text).map_err(|e| anyhow!("line {}: invalid JSON: {e}", e.line()))?;
                        let values = match value {
                            serde_json::Value::Array(items) => items,
                            other => vec![other],
                        };
                        let rows = values.iter().map(json_row).collect::<Result<_, _>>().map_err(|e| anyhow!(e))?;
                        (json_columns(&values), rows)
                    }
                    FileType::Jsonl => {
                        let (values, rows): (Vec<_>, Vec<_>) = text
                            .lines()
                            .enumerate()
                            .filter(|(_, l)| !l.trim().is_empty())
                            .map(|(i, l)| {
                                let value = serde_json::from_str::<serde_json::Value>(l)
                                    .map_err(|e| anyhow!("line {}: invalid JSON: {e}", i + 1))?;
                                let row = json_row(&value).map_err(|e| anyhow!("line {}: {e}", i + 1))?;
                                Ok((value, row))
                            })
                            .collect::<anyhow::Result<Vec<_>>>()?
                            .into_iter()
                            .unzip();
                        (json_columns(&values), rows)
                    }
                    _ => return Ok(vec![doc(None, file.path.clone(), text.to_string(), None)]),
                }
            }
        };
        let mut docs = Vec::with_capacity(rows.len());
        for (i, mut row) in rows.into_iter().enumerate() {
            let Some(text) = row.remove(&self.text_column) else {
                if columns.contains(&self.text_column) {
                    // One row without its text: the other rows are still documents.
                    let why = format!("record {}: no text (null or missing in column `{}`)", i + 1, self.text_column);
                    if self.strict {
                        bail!("{why}");
                    }
                    ctx.warn(format!(
                        "input file `{}` {why}, skipped; the file's other records are indexed",
                        file.path
                    ));
                    ctx.count("unreadable_records", 1);
                    continue;
                }
                let columns: Vec<&str> = columns.iter().map(String::as_str).collect();
                bail!(
                    "record {}: no text column `{}`{} (columns: {}); set input.text_column",
                    i + 1,
                    self.text_column,
                    did_you_mean(&self.text_column, columns.iter().copied()),
                    columns.join(", ")
                );
            };
            let id =
                match &self.id_column {
                    Some(c) => Some(row.remove(c).filter(|id| !id.trim().is_empty()).ok_or_else(|| {
                        anyhow!("record {}: no value in the id column `{c}` (input.id_column)", i + 1)
                    })?),
                    None => None,
                };
            let title = match &self.title_column {
                // A null title in a file that has the column: the file's name, as without one.
                Some(c) if columns.contains(c) => row.remove(c).unwrap_or_else(|| file.path.clone()),
                Some(c) => bail!("record {}: no title column `{c}`", i + 1),
                None => file.path.clone(),
            };
            if !self.metadata.is_empty() {
                row.retain(|k, _| self.metadata.contains(k));
            }
            if text.trim().is_empty() {
                ctx.warn(format!("input file `{}` record {}: empty text, skipped", file.path, i + 1));
                continue;
            }
            docs.push(doc(id, title, text, Some(row)));
        }
        Ok(docs)
    }
}

fn csv_rows(text: &str) -> anyhow::Result<Vec<BTreeMap<String, String>>> {
    // The csv reader ends a quoted field that is never closed at the end of
    // the file: every record after it would become that field's text.
    if let Some(line) = unclosed_quote(text) {
        bail!(
            "invalid CSV: the quoted field that starts on line {line} is never closed, so every line after it would be read as part of it (close the quote; a quote inside a quoted field is written \"\")"
        );
    }
    let mut reader = csv::ReaderBuilder::new().flexible(false).from_reader(text.as_bytes());
    let headers = reader.headers()?.clone();
    reader
        .records()
        .map(|r| {
            let r = r.map_err(|e| anyhow!("invalid CSV: {e}"))?;
            Ok(headers.iter().zip(r.iter()).map(|(h, v)| (h.to_string(), v.to_string())).collect())
        })
        .collect()
}

/// The line (1-based) where a quoted field that never ends begins, read
/// as the csv reader does (RFC 4180: a field starting with `"` is quoted up
/// to a `"` not followed by another; a `"` inside an unquoted field is a
/// character), if there is one.
fn unclosed_quote(text: &str) -> Option<usize> {
    #[derive(PartialEq)]
    enum State {
        FieldStart,
        Unquoted,
        Quoted,
        QuoteInQuoted,
    }
    let mut state = State::FieldStart;
    let mut opened_at = 0;
    for (i, b) in text.bytes().enumerate() {
        state = match (state, b) {
            (State::FieldStart, b'"') => {
                opened_at = i;
                State::Quoted
            }
            (State::Quoted, b'"') => State::QuoteInQuoted,
            (State::Quoted, _) => State::Quoted,
            (State::QuoteInQuoted, b'"') => State::Quoted,
            (_, b',' | b'\n' | b'\r') => State::FieldStart,
            _ => State::Unquoted,
        };
    }
    (state == State::Quoted).then(|| text.as_bytes()[..opened_at].iter().filter(|&&b| b == b'\n').count() + 1)
}

/// Every key of the JSON objects, also those whose value is null.
fn json_columns(values: &[serde_json::Value]) -> BTreeSet<String> {
    values.iter().filter_map(serde_json::Value::as_object).flat_map(|o| o.keys().cloned()).collect()
}

/// A JSON object as column → string (non-string values as compact JSON).
fn json_row(value: &serde_json::Value) -> Result<BTreeMap<String, String>, String> {
    let obj = value.as_object().ok_or_else(|| format!("expected a JSON object per document, found {value}"))?;
    Ok(obj
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| {
            let s = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), s)
        })
        .collect())
}

/// raw_data: a struct of the extra columns (strings), or all-null when no
/// document has any (plain text input), as in GraphRAG.
fn raw_data_column(docs: &[RawDoc]) -> (DataType, ArrayRef) {
    let mut names: Vec<&str> = Vec::new();
    let mut seen = HashSet::new();
    for d in docs {
        for k in d.raw_data.iter().flat_map(|m| m.keys()) {
            if seen.insert(k.as_str()) {
                names.push(k);
            }
        }
    }
    if names.is_empty() {
        return (DataType::Null, Arc::new(NullArray::new(docs.len())));
    }
    let fields: Fields = names.iter().map(|n| schema::text_field(n)).collect();
    let children: Vec<ArrayRef> = names
        .iter()
        .map(|n| schema::opt_text_col(docs.iter().map(|d| d.raw_data.as_ref().and_then(|m| m.get(*n).cloned()))))
        .collect();
    let nulls: arrow_array::BooleanArray = docs.iter().map(|d| Some(d.raw_data.is_some())).collect();
    let array = StructArray::new(fields.clone(), children, Some(nulls.values().clone().into()));
    (DataType::Struct(fields), Arc::new(array))
}

impl Verb for LoadDocuments {
    fn external_fingerprint(&self, ctx: &VerbContext) -> anyhow::Result<Option<String>> {
        let listing: Vec<String> = self
            .matching_files(ctx)?
            .iter()
            .map(|f| {
                let mtime = f.modified.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
                format!("{}\t{}\t{mtime}", f.path, f.size)
            })
            .collect();
        Ok(Some(sha256_hex(&[listing.join("\n").as_bytes()])))
    }

    fn run(&self, _inputs: &[Arc<RecordBatch>], ctx: &VerbContext) -> anyhow::Result<Vec<RecordBatch>> {
        let files = self.matching_files(ctx)?;
        // An update may remove every document: it publishes an empty index.
        let updating = ctx.previous().is_some();
        if files.is_empty() && !updating {
            bail!(
                "no input files match `{}` in {} (input.type is {}; put documents there or change input.file_pattern)",
                self.pattern().map_err(|e| anyhow!(e))?.as_str(),
                ctx.files.describe(),
                self.file_type.name()
            );
        }
        let bar = ctx.progress(files.len() as u64, "files");
        let per_file: Vec<anyhow::Result<Vec<RawDoc>>> = files
            .par_iter()
            .map(|f| {
                let bytes = ctx.files.read(&f.path)?;
                let docs = if bytes.iter().all(|b| b.is_ascii_whitespace()) {
                    ctx.warn(format!("input file `{}` is empty, skipped", f.path));
                    Vec::new()
                } else {
                    self.parse_file(f, bytes, ctx)?
                };
                bar.inc(1);
                Ok(docs)
            })
            .collect();
        bar.finish_and_clear();

        let mut ids = Vec::new();
        let mut seen = HashSet::new();
        let mut docs = Vec::new();
        let mut unreadable: Vec<String> = Vec::new();
        for (file, result) in files.iter().zip(per_file) {
            let file_docs = match result {
                Ok(d) => d,
                Err(e) if self.strict => bail!(
                    "input file `{}`: {e:#} (input.strict is true: fix or remove the file, or set input.strict: false to index the other files)",
                    file.path
                ),
                Err(e) => {
                    unreadable.push(format!("{}: {e:#}", file.path));
                    let id = sha512_hex(&[b"unreadable input file\0", file.path.as_bytes()]);
                    ctx.unreadable_input(&file.path, id, format!("{e:#}"));
                    continue;
                }
            };
            for d in file_docs {
                if let Some(id) = &d.id {
                    if !seen.insert(id.clone()) {
                        bail!(
                            "two documents have the id `{id}` (input.id_column): ids must be unique (the second is `{}`)",
                            d.title
                        );
                    }
                    ids.push(id.clone());
                    docs.push(d);
                    continue;
                }
                let id = sha512_hex(&[d.text.as_bytes()]);
                if seen.insert(id.clone()) {
                    ids.push(id);
                    docs.push(d);
                } else {
                    ctx.warn(format!("document `{}` has the same text as an earlier one, skipped", d.title));
                }
            }
        }
        if !unreadable.is_empty() {
            ctx.count("unreadable_files", unreadable.len() as u64);
            if docs.is_empty() {
                bail!("no input file could be read: {}", unreadable.join("; "));
            }
        }
        if docs.is_empty() && !updating {
            bail!("every input file is empty: nothing to index in {}", ctx.files.describe());
        }
        if docs.is_empty() {
            ctx.warn(format!(
                "no documents in {}: the update removes every document from the index",
                ctx.files.describe()
            ));
        }
        let (raw_type, raw_data) = raw_data_column(&docs);
        let n = docs.len();
        let table = RecordBatch::try_new(
            schema::documents(raw_type),
            vec![
                schema::text_col(&ids),
                schema::int_col(0..n as i64),
                schema::text_col(docs.iter().map(|d| &d.title)),
                schema::text_col(docs.iter().map(|d| &d.text)),
                schema::id_list_col(vec![Vec::<String>::new(); n]),
                schema::text_col(docs.iter().map(|d| &d.creation_date)),
                raw_data,
            ],
        )?;
        debug_assert_eq!(table.column(6).len(), n);
        Ok(vec![table])
    }
}

impl FileType {
    #[cfg(test)]
    fn all() -> [FileType; 9] {
        use FileType::*;
        [Text, Markdown, Csv, Json, Jsonl, Parquet, Pdf, Docx, Markitdown]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{input_fixture as fixture, run_verb, MemFiles};
    use graphrag_engine::table::strings;

    fn load(args: serde_json::Value, files: &[(&str, &[u8])]) -> anyhow::Result<(RecordBatch, u64)> {
        let verb: LoadDocuments = serde_json::from_value(args).unwrap();
        let (mut out, warnings) = run_verb(&verb, &[], &MemFiles::new(files))?;
        Ok((out.remove(0), warnings))
    }

    #[test]
    fn text_files_sorted_with_hash_ids_and_empty_skipped() {
        let (t, warnings) = load(
            serde_json::json!({}),
            &[
                ("b.txt", b"second doc"),
                ("a.txt", "first doc \u{1F384}".as_bytes()),
                ("empty.txt", b"  \n"),
                ("x.md", b"ignored"),
            ],
        )
        .unwrap();
        assert_eq!(strings(&t, "d", "title").unwrap(), vec!["a.txt", "b.txt"]);
        assert_eq!(strings(&t, "d", "id").unwrap()[1], sha512_hex(&[b"second doc"]));
        assert_eq!(warnings, 1);
        assert_eq!(t.schema(), schema::documents(DataType::Null));
        assert_eq!(strings(&t, "d", "creation_date").unwrap()[0], "1970-01-01 00:00:00 +0000");
    }

    #[test]
    fn csv_with_columns_and_metadata() {
        let csv = b"headline,body,author,year\nFirst,Some text here,Ann,2001\nSecond,\"Other, quoted\",Bob,2002\nThird,,Cy,2003\n";
        let (t, warnings) = load(
            serde_json::json!({"file_type": "csv", "text_column": "body", "title_column": "headline", "metadata": ["author"]}),
            &[("news.csv", csv)],
        )
        .unwrap();
        assert_eq!(strings(&t, "d", "title").unwrap(), vec!["First", "Second"]);
        assert_eq!(strings(&t, "d", "text").unwrap(), vec!["Some text here", "Other, quoted"]);
        assert_eq!(warnings, 1, "empty third row is skipped with a warning");
        let raw = t.column_by_name("raw_data").unwrap().as_any().downcast_ref::<StructArray>().unwrap();
        assert_eq!(raw.fields().len(), 1);
        assert_eq!(raw.fields()[0].name(), "author");
    }

    #[test]
    fn a_csv_quote_never_closed_fails_the_file_instead_of_swallowing_the_records_after_it() {
        let csv = b"title,text\nA,\"first text\nB,second text\nC,third text\n";
        let err = load(serde_json::json!({"file_type": "csv", "strict": true}), &[("news.csv", csv)]).unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("news.csv") && msg.contains("starts on line 2 is never closed"), "{msg}");
        // Quotes that are closed, doubled or inside an unquoted field are fine.
        let fine = b"title,text\nA,\"a \"\"quoted\"\" word,\nand a line\"\nB,5\" tall\n";
        let (t, _) = load(serde_json::json!({"file_type": "csv"}), &[("ok.csv", fine)]).unwrap();
        assert_eq!(strings(&t, "d", "text").unwrap(), ["a \"quoted\" word,\nand a line", "5\" tall"]);
    }

    proptest::proptest! {
        /// Whatever the csv writer writes has every quote closed; cut inside
        /// a quoted field, the field's first line is named.
        #[test]
        fn quotes_are_read_as_the_csv_reader_reads_them(
            rows in proptest::collection::vec(proptest::collection::vec("[a-z\",\n ]{0,8}", 2), 1..6),
        ) {
            let mut w = csv::Writer::from_writer(Vec::new());
            for r in &rows {
                w.write_record(r).unwrap();
            }
            let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
            proptest::prop_assert_eq!(unclosed_quote(&text), None);
            let cut = format!("{text}x,\"open\nnext,line\n");
            let line = text.matches('\n').count() + 1;
            proptest::prop_assert_eq!(unclosed_quote(&cut), Some(line));
        }
    }

    #[test]
    fn id_column_gives_the_ids_and_must_be_unique() {
        let csv = b"doc_id,text\nd-1,first text\nd-2,second text\n";
        let args = serde_json::json!({"file_type": "csv", "id_column": "doc_id"});
        let (t, _) = load(args.clone(), &[("a.csv", csv)]).unwrap();
        assert_eq!(strings(&t, "d", "id").unwrap(), vec!["d-1", "d-2"]);
        let raw = t.column_by_name("raw_data").unwrap().as_any().downcast_ref::<StructArray>();
        assert!(raw.is_none_or(|r| r.column_by_name("doc_id").is_none()), "the id is not kept twice");
        let twice = load(args.clone(), &[("a.csv", b"doc_id,text\nd-1,one\nd-1,two\n")]).unwrap_err();
        assert!(format!("{twice:#}").contains("`d-1`"), "{twice:#}");
        let missing = load(args, &[("a.csv", b"doc_id,text\n,one\n")]).unwrap_err();
        assert!(format!("{missing:#}").contains("id column `doc_id`"), "{missing:#}");
    }

    #[test]
    fn json_and_jsonl() {
        let json =
            br#"[{"text": "alpha doc", "title": "A", "tags": ["x"]}, {"text": "beta doc", "title": "B", "n": 3}]"#;
        let (t, _) =
            load(serde_json::json!({"file_type": "json", "title_column": "title"}), &[("docs.json", json)]).unwrap();
        assert_eq!(strings(&t, "d", "title").unwrap(), vec!["A", "B"]);
        let raw = t.column_by_name("raw_data").unwrap().as_any().downcast_ref::<StructArray>().unwrap();
        let names: Vec<&str> = raw.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, vec!["tags", "n"]);

        let jsonl = b"{\"text\": \"one\"}\n\n{\"text\": \"two\"}\n";
        let (t, _) = load(serde_json::json!({"file_type": "jsonl"}), &[("d.jsonl", jsonl)]).unwrap();
        assert_eq!(strings(&t, "d", "text").unwrap(), vec!["one", "two"]);
        assert_eq!(strings(&t, "d", "title").unwrap(), vec!["d.jsonl", "d.jsonl"]);

        let err = load(serde_json::json!({"file_type": "jsonl"}), &[("bad.jsonl", b"{\"text\": \"ok\"}\n{broken\n")])
            .unwrap_err();
        assert!(err.to_string().contains("bad.jsonl: line 2: invalid JSON"), "{err}");
        let err =
            load(serde_json::json!({"file_type": "jsonl", "text_column": "txt"}), &[("d.jsonl", b"{\"text\": \"x\"}")])
                .unwrap_err();
        assert!(err.to_string().contains("did you mean `text`"), "{err}");
    }

    #[test]
    fn non_utf8_names_the_file() {
        let err = load(serde_json::json!({}), &[("latin.txt", b"caf\xe9 au lait")]).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("latin.txt") && msg.contains("UTF-8") && msg.contains("offset 3"), "{msg}");
    }

    #[test]
    fn no_matching_files_is_a_clear_error() {
        let err = load(serde_json::json!({}), &[("notes.md", b"x")]).unwrap_err();
        assert!(
            err.to_string().contains("no input files match") && err.to_string().contains("input.type is text;"),
            "{err}"
        );
        for ft in FileType::all() {
            assert!(Regex::new(ft.default_pattern()).is_ok());
        }
    }

    #[test]
    fn input_files_follow_type_and_pattern() {
        let input = |t: &str, p: Option<&str>| InputConfig {
            file_type: t.into(),
            file_pattern: p.map(str::to_string),
            ..InputConfig::default()
        };
        let text = InputFiles::from_settings(&input("text", None)).unwrap();
        assert!(text.reads("a.txt") && !text.reads("a.md") && !text.reads("a.pdf"));
        // Issue #47: an upload `A.TXT` was refused (415); it is read, and
        // indexed by the load step, which matches by the same pattern.
        assert!(text.reads("A.TXT") && text.reads("b.Txt"));
        let (t, _) = load(serde_json::json!({}), &[("A.TXT", b"upper case name"), ("b.md", b"not text")]).unwrap();
        assert_eq!(strings(&t, "d", "title").unwrap(), vec!["A.TXT"]);
        for ft in FileType::all() {
            let ext = ft.extensions()[0].to_ascii_uppercase();
            let files = InputFiles::from_settings(&input(ft.name(), None)).unwrap();
            assert!(files.reads(&format!("X.{ext}")), "{}: X.{ext}", ft.name());
        }
        // A pattern of the project's own is used as written.
        let lower = InputFiles::from_settings(&input("text", Some(r".*\.txt$"))).unwrap();
        assert!(!lower.reads("A.TXT"));
        assert_eq!(text.extensions(), [".txt"]);
        assert_eq!(text.describe(), "input.type: text");
        let any = InputFiles::from_settings(&input("markitdown", None)).unwrap();
        assert!(any.reads("A.PDF") && any.reads("b.md") && !any.reads("c.csv"));
        let logs = InputFiles::from_settings(&input("text", Some(r".*\.(txt|log)$"))).unwrap();
        assert!(logs.reads("x.log") && logs.describe().contains("file_pattern"));
        assert!(InputFiles::from_settings(&input("word", None)).is_err());
    }

    #[test]
    fn pdf_docx_and_markitdown_inputs() {
        let (pdf, docx) = (fixture("report.pdf"), fixture("report.docx"));
        let (t, _) =
            load(serde_json::json!({"file_type": "pdf"}), &[("a/Report.PDF", &pdf), ("b.docx", &docx)]).unwrap();
        assert_eq!(strings(&t, "d", "title").unwrap(), vec!["a/Report.PDF"]);
        assert!(strings(&t, "d", "text").unwrap()[0].contains("Coastal Development Bank"));
        let (t, _) = load(serde_json::json!({"file_type": "docx"}), &[("a.pdf", &pdf), ("b.docx", &docx)]).unwrap();
        assert_eq!(strings(&t, "d", "title").unwrap(), vec!["b.docx"]);
        // GraphRAG's markitdown type: every supported document kind at once.
        let files: &[(&str, &[u8])] = &[
            ("a.pdf", &pdf),
            ("b.docx", &docx),
            ("c.md", b"# Notes\nmarkdown"),
            ("d.txt", b"plain"),
            ("e.xlsx", b"x"),
        ];
        let (t, _) = load(serde_json::json!({"file_type": "markitdown"}), files).unwrap();
        assert_eq!(strings(&t, "d", "title").unwrap(), vec!["a.pdf", "b.docx", "c.md", "d.txt"]);
    }

    #[test]
    fn parquet_rows_with_text_title_and_metadata_columns() {
        let bytes = fixture("records.parquet");
        let args = serde_json::json!({"file_type": "parquet", "text_column": "body", "title_column": "headline"});
        let (t, _) = load(args, &[("records.parquet", &bytes)]).unwrap();
        assert_eq!(strings(&t, "d", "title").unwrap(), vec!["Terminal expansion", "Bank loan"]);
        assert!(strings(&t, "d", "text").unwrap()[1].starts_with("The Coastal Development Bank lent"));
        let raw = t.column_by_name("raw_data").unwrap().as_any().downcast_ref::<StructArray>().unwrap();
        let names: Vec<&str> = raw.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, vec!["tags", "year"]);
        let tags = raw.column(0).as_any().downcast_ref::<arrow_array::LargeStringArray>().unwrap();
        assert_eq!((tags.value(0), tags.is_null(1)), ("[port, terminal]", true));
        let err = load(serde_json::json!({"file_type": "parquet"}), &[("r.parquet", &bytes)]).unwrap_err();
        assert!(err.to_string().contains("no text column `text`"), "{err}");
        // zstd, polars' default compression.
        let zstd = fixture("records_zstd.parquet");
        let args = serde_json::json!({"file_type": "parquet", "text_column": "body", "title_column": "headline"});
        let (t, _) = load(args, &[("z.parquet", &zstd)]).unwrap();
        assert_eq!(strings(&t, "d", "title").unwrap(), vec!["Terminal expansion"]);
    }

    #[test]
    fn unreadable_files_are_named_and_left_out_unless_strict() {
        let pdf = fixture("report.pdf");
        let files: &[(&str, &[u8])] = &[("bad.pdf", b"%PDF-1.4 cut short"), ("good.pdf", &pdf), ("scan.pdf", b"x")];
        let verb: LoadDocuments = serde_json::from_value(serde_json::json!({"file_type": "pdf"})).unwrap();
        let (out, counters) = crate::testing::run_verb_counters(&verb, &[], &MemFiles::new(files));
        assert_eq!(strings(&out.unwrap()[0], "d", "title").unwrap(), vec!["good.pdf"]);
        let failures = counters.unreadable.lock().unwrap().clone();
        let names: Vec<&str> = failures.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["bad.pdf", "scan.pdf"]);
        assert!(failures.iter().all(|f| f.error.contains("PDF") && f.id.len() == 128), "{failures:?}");
        assert_eq!(counters.counts.lock().unwrap()["unreadable_files"], 2);

        let strict: LoadDocuments =
            serde_json::from_value(serde_json::json!({"file_type": "pdf", "strict": true})).unwrap();
        let err = run_verb(&strict, &[], &MemFiles::new(files)).unwrap_err().to_string();
        assert!(err.contains("input file `bad.pdf`") && err.contains("input.strict is true"), "{err}");
    }

    /// A Parquet file with a `text` and a `title` column, made here: `None` is a null.
    fn parquet_file(texts: &[Option<&str>], titles: &[Option<&str>]) -> Vec<u8> {
        let batch = RecordBatch::try_from_iter([
            ("text", Arc::new(arrow_array::StringArray::from(texts.to_vec())) as ArrayRef),
            ("title", Arc::new(arrow_array::StringArray::from(titles.to_vec())) as ArrayRef),
        ])
        .unwrap();
        let mut bytes = Vec::new();
        let mut writer = parquet::arrow::ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        bytes
    }

    #[test]
    fn a_record_with_a_null_text_is_skipped_and_named_and_the_others_are_indexed() {
        // Issue #47: one null in the text column refused the whole file as
        // having "no text column `text`".
        let parquet = parquet_file(&[Some("alpha doc"), None, Some("gamma doc")], &[Some("A"), Some("B"), None]);
        let json = br#"[{"text": "delta doc"}, {"text": null, "title": "E"}, {"title": "F"}]"#;
        let jsonl = b"{\"text\": \"zeta doc\", \"title\": \"Z\"}\n{\"text\": null}\n";
        for (file_type, name, bytes, want, skipped) in [
            ("parquet", "docs.parquet", &parquet[..], vec!["alpha doc", "gamma doc"], 1),
            ("json", "docs.json", &json[..], vec!["delta doc"], 2),
            ("jsonl", "docs.jsonl", &jsonl[..], vec!["zeta doc"], 1),
        ] {
            let args = serde_json::json!({"file_type": file_type, "title_column": "title"});
            let verb: LoadDocuments = serde_json::from_value(args).unwrap();
            let (out, counters) = crate::testing::run_verb_counters(&verb, &[], &MemFiles::new(&[(name, bytes)]));
            let out = out.unwrap_or_else(|e| panic!("{file_type}: {e:#}"));
            assert_eq!(strings(&out[0], "d", "text").unwrap(), want, "{file_type}");
            assert_eq!(counters.counts.lock().unwrap()["unreadable_records"], skipped, "{file_type}");
            assert!(counters.unreadable.lock().unwrap().is_empty(), "{file_type}: the file is not unreadable");
        }
        // A null title is the file's name, as without a title column.
        let verb: LoadDocuments =
            serde_json::from_value(serde_json::json!({"file_type": "parquet", "title_column": "title"})).unwrap();
        let (out, _) = run_verb(&verb, &[], &MemFiles::new(&[("docs.parquet", &parquet)])).unwrap();
        assert_eq!(strings(&out[0], "d", "title").unwrap(), vec!["A", "docs.parquet"]);
        // strict: the run stops, naming the file and the record.
        let strict: LoadDocuments =
            serde_json::from_value(serde_json::json!({"file_type": "parquet", "strict": true})).unwrap();
        let err = run_verb(&strict, &[], &MemFiles::new(&[("docs.parquet", &parquet)])).unwrap_err();
        let err = format!("{err:#}");
        assert!(
            err.contains("input file `docs.parquet`: record 2: no text (null or missing in column `text`)"),
            "{err}"
        );
        // A file without the column at all is still refused, naming its columns.
        let err = load(serde_json::json!({"file_type": "parquet", "text_column": "body"}), &[("d.parquet", &parquet)])
            .unwrap_err();
        assert!(
            err.to_string().contains("no text column `body`") && err.to_string().contains("columns: text, title"),
            "{err}"
        );
    }

    #[test]
    fn duplicate_texts_are_kept_once() {
        let (t, warnings) = load(serde_json::json!({}), &[("a.txt", b"same"), ("b.txt", b"same")]).unwrap();
        assert_eq!(t.num_rows(), 1);
        assert_eq!(warnings, 1);
    }
}
