//! Input formats that are not plain text: the text of a DOCX (its
//! paragraphs, tab and line breaks), of a PDF (per page), and the rows of a
//! Parquet file (every column as a string). Each returns an error that says
//! why a file cannot be read, for the run's list of unreadable files.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Cursor, Read};

use anyhow::{anyhow, bail, Context};
use arrow_array::{Array, RecordBatch};

/// One record of a table-like input (csv, json, jsonl, parquet): column →
/// text, nulls left out.
pub type Record = BTreeMap<String, String>;

/// The body text of a Word document (word/document.xml): one line per
/// paragraph, `w:tab` as a tab, `w:br`/`w:cr` as a line break.
pub fn docx_text(bytes: &[u8]) -> anyhow::Result<String> {
    let mut archive = zip::ZipArchive::new(Cursor::new(bytes)).map_err(|e| anyhow!("not a DOCX (zip) file: {e}"))?;
    let mut xml = String::new();
    archive
        .by_name("word/document.xml")
        .map_err(|e| anyhow!("not a Word document (no word/document.xml: {e})"))?
        .read_to_string(&mut xml)
        .context("word/document.xml is not readable UTF-8")?;
    let doc = roxmltree::Document::parse(&xml).map_err(|e| anyhow!("word/document.xml is not valid XML: {e}"))?;
    let mut out = String::new();
    for node in doc.descendants() {
        match node.tag_name().name() {
            "p" => {
                let mut paragraph = String::new();
                for part in node.descendants() {
                    match part.tag_name().name() {
                        "t" => paragraph.push_str(part.text().unwrap_or_default()),
                        "tab" => paragraph.push('\t'),
                        "br" | "cr" => paragraph.push('\n'),
                        _ => {}
                    }
                }
                // A paragraph inside another (a text box) is part of the outer one's text.
                if node.ancestors().skip(1).all(|a| a.tag_name().name() != "p") {
                    out.push_str(paragraph.trim_end());
                    out.push('\n');
                }
            }
            _ => continue,
        }
    }
    Ok(out)
}

/// The text of a PDF, page by page (blank line between pages).
pub fn pdf_text(bytes: &[u8]) -> anyhow::Result<String> {
    let text = quietly(|| pdf_extract::extract_text_from_mem(bytes))
        .map_err(|panic| anyhow!("the PDF could not be parsed ({panic})"))?
        .map_err(|e| anyhow!("the PDF could not be read: {e}"))?;
    if text.trim().is_empty() {
        bail!("the PDF has no text layer (a scanned document needs OCR first)");
    }
    Ok(text)
}

/// The columns of a Parquet file (every one, nulls or not) and its rows as
/// column → text (numbers, dates and nested values as Arrow displays them;
/// nulls left out).
pub fn parquet_rows(bytes: Vec<u8>) -> anyhow::Result<(BTreeSet<String>, Vec<Record>)> {
    use arrow_cast::display::{ArrayFormatter, FormatOptions};
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
        .map_err(|e| anyhow!("not a readable Parquet file: {e}"))?;
    let columns = builder.schema().fields().iter().map(|f| f.name().clone()).collect();
    let reader = builder.build().map_err(|e| anyhow!("not a readable Parquet file: {e}"))?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch: RecordBatch = batch.map_err(|e| anyhow!("Parquet data could not be decoded: {e}"))?;
        let schema = batch.schema();
        let options = FormatOptions::default();
        let columns = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow!("a Parquet column cannot be shown as text: {e}"))?;
        for i in 0..batch.num_rows() {
            let mut row = BTreeMap::new();
            for (field, (column, fmt)) in schema.fields().iter().zip(batch.columns().iter().zip(&columns)) {
                if column.is_valid(i) {
                    row.insert(field.name().clone(), fmt.value(i).to_string());
                }
            }
            rows.push(row);
        }
    }
    Ok((columns, rows))
}

thread_local! {
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f`, turning a panic into an error message without printing it: a
/// malformed PDF can make the PDF parser panic, and one bad file must not
/// stop (or litter the console of) a run over many.
fn quietly<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !QUIET.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
    QUIET.with(|q| q.set(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.with(|q| q.set(false));
    result.map_err(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "the parser panicked".to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::input_fixture as fixture;

    #[test]
    fn docx_paragraphs_tabs_and_breaks() {
        let text = docx_text(&fixture("report.docx")).unwrap();
        assert!(text.contains("The Halvard Port Authority expanded the northern terminal in 2021."), "{text}");
        assert!(text.contains("Director:\tInes Okafor"), "{text}");
        assert!(text.contains("Funded by\nthe Coastal Development Bank & partners."), "{text}");
        let err = docx_text(b"not a zip").unwrap_err();
        assert!(err.to_string().contains("not a DOCX"), "{err}");
    }

    #[test]
    fn pdf_text_of_every_page() {
        let text = pdf_text(&fixture("report.pdf")).unwrap();
        assert!(text.contains("Halvard Port Authority"), "{text}");
        assert!(text.contains("Coastal Development Bank"), "{text}");
        let err = pdf_text(b"%PDF-1.4 truncated").unwrap_err();
        assert!(err.to_string().contains("PDF"), "{err}");
    }

    #[test]
    fn panics_become_errors() {
        assert_eq!(quietly(|| 3), Ok(3));
        assert_eq!(quietly(|| -> u8 { panic!("bad xref") }), Err("bad xref".to_string()));
    }
}
