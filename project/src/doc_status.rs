//! The document status table, `output/document_status.parquet` (LightRAG's
//! doc_status): one row per input document with where it is in indexing —
//! `pending` (a run that had it stopped; the next one retries it),
//! `processing` (chunked, the rest of the pipeline running), `processed`
//! (in the published index) or `failed` (with the error) — its content
//! hash (the document id), chunk ids and times. The only output with wall-
//! clock times, so it is outside the byte-identical-outputs guarantee.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arrow_array::RecordBatch;
use arrow_schema::{Schema, SchemaRef};

use graphrag_engine::failures::FailedItem;
use graphrag_engine::pipeline::Plan;
use graphrag_engine::runner::{self, RunFailure, RunOptions, Workspace};
use graphrag_engine::schema::{float_col, float_field, id_list_col, id_list_field, opt_text_col, text_col, text_field};
use graphrag_engine::stats::RunStats;
use graphrag_engine::store;
use graphrag_engine::table::{floats, string_lists, strings};
use graphrag_engine::{interrupt, staging};

/// The table's file in the output folder: written there as a run goes
/// (never staged: `staging` leaves it live).
pub(crate) const FILE: &str = staging::DOCUMENT_STATUS_FILE;
/// The table's name (its file is [`FILE`]).
const TABLE: &str = "document_status";

/// Where a document is in indexing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Not indexed yet: new, or its run was stopped (the next run takes it).
    Pending,
    /// Chunked by the run in progress.
    Processing,
    /// In the published index.
    Processed,
    /// Its run failed, or its file could not be read ([`DocStatus::error`]).
    Failed,
}

impl Status {
    /// The name stored in the table (LightRAG's): `pending`, `processing`,
    /// `processed` or `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Processing => "processing",
            Status::Processed => "processed",
            Status::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Status {
        match s {
            "processing" => Status::Processing,
            "processed" => Status::Processed,
            "failed" => Status::Failed,
            _ => Status::Pending,
        }
    }
}

/// One document's row of the table.
#[derive(Debug, Clone, PartialEq)]
pub struct DocStatus {
    /// The document id: a hash of its content (of its path, for a file that
    /// could not be read).
    pub id: String,
    /// Its title as the documents table has it (for an unreadable file, the
    /// file's path).
    pub title: String,
    /// Where it is in indexing.
    pub status: Status,
    /// Its chunks, once chunked.
    pub text_unit_ids: Vec<String>,
    /// When the document (this content) was first seen, RFC 3339 UTC.
    pub created_at: String,
    /// The last status change.
    pub updated_at: String,
    /// Wall time of the run that last changed its status, in seconds.
    pub run_seconds: f64,
    /// Why it failed (its failed chunks' names and errors, one per line, or
    /// the run's error); for a pending document, that its run was stopped.
    pub error: Option<String>,
}

impl DocStatus {
    /// A document this run sees for the first time.
    fn first_seen(id: String, title: &str, now: &str) -> DocStatus {
        DocStatus {
            id,
            title: title.to_string(),
            status: Status::Pending,
            text_unit_ids: Vec::new(),
            created_at: now.to_string(),
            updated_at: now.to_string(),
            run_seconds: 0.0,
            error: None,
        }
    }
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        text_field("id"),
        text_field("title"),
        text_field("status"),
        id_list_field("text_unit_ids"),
        text_field("created_at"),
        text_field("updated_at"),
        float_field("run_seconds"),
        arrow_schema::Field::new("error", arrow_schema::DataType::LargeUtf8, true),
    ]))
}

/// The status rows a run keeps current in the index folder `output_dir`
/// (a folder output, or a writer's working copy), by id; empty when there
/// are none.
pub fn read(output_dir: &Path) -> anyhow::Result<BTreeMap<String, DocStatus>> {
    let Some(t) = store::read_published_table(output_dir, TABLE)? else { return Ok(BTreeMap::new()) };
    let name = "document_status";
    let (ids, titles, statuses) = (strings(&t, name, "id")?, strings(&t, name, "title")?, strings(&t, name, "status")?);
    let units = string_lists(&t, name, "text_unit_ids")?;
    let (created, updated) = (strings(&t, name, "created_at")?, strings(&t, name, "updated_at")?);
    let seconds = floats(&t, name, "run_seconds")?;
    let errors = t.column_by_name("error").and_then(|c| c.as_any().downcast_ref::<arrow_array::LargeStringArray>());
    let mut out = BTreeMap::new();
    for i in 0..t.num_rows() {
        let error = errors.and_then(|e| arrow_array::Array::is_valid(e, i).then(|| e.value(i).to_string()));
        out.insert(
            ids[i].to_string(),
            DocStatus {
                id: ids[i].to_string(),
                title: titles[i].to_string(),
                status: Status::parse(statuses[i]),
                text_unit_ids: units[i].clone(),
                created_at: created[i].to_string(),
                updated_at: updated[i].to_string(),
                run_seconds: seconds[i],
                error,
            },
        );
    }
    Ok(out)
}

/// Writes the rows (atomically), ordered by title then id.
fn write(output_dir: &Path, rows: &BTreeMap<String, DocStatus>) -> anyhow::Result<()> {
    let mut rows: Vec<&DocStatus> = rows.values().collect();
    rows.sort_by(|a, b| (&a.title, &a.id).cmp(&(&b.title, &b.id)));
    let table = RecordBatch::try_new(
        schema(),
        vec![
            text_col(rows.iter().map(|r| &r.id)),
            text_col(rows.iter().map(|r| &r.title)),
            text_col(rows.iter().map(|r| r.status.as_str())),
            id_list_col(rows.iter().map(|r| r.text_unit_ids.clone())),
            text_col(rows.iter().map(|r| &r.created_at)),
            text_col(rows.iter().map(|r| &r.updated_at)),
            float_col(rows.iter().map(|r| r.run_seconds)),
            opt_text_col(rows.iter().map(|r| r.error.clone())),
        ],
    )?;
    store::write_table(&output_dir.join(FILE), &table)?;
    Ok(())
}

/// The status rows' changes over one run, kept in memory and written at
/// each change.
struct Tracker {
    output_dir: std::path::PathBuf,
    rows: BTreeMap<String, DocStatus>,
    started: std::time::Instant,
}

impl Tracker {
    /// Starts a run: documents a stopped run left `processing` or `failed`
    /// become `pending`. A status table that cannot be read is rebuilt from
    /// the live index's documents (all `processed`), with a warning: it is a
    /// record of runs, and must not stop the next one.
    fn start(output_dir: &Path) -> anyhow::Result<Tracker> {
        let mut rows = match read(output_dir) {
            Ok(rows) => rows,
            Err(e) => {
                let rebuilt = rebuilt_from_index(output_dir);
                tracing::warn!(
                    "{} cannot be read ({e:#}): rebuilding it from the index ({} documents; the history of earlier runs is lost)",
                    output_dir.join(FILE).display(),
                    rebuilt.len()
                );
                rebuilt
            }
        };
        let now = now_rfc3339();
        for r in rows.values_mut().filter(|r| matches!(r.status, Status::Processing | Status::Failed)) {
            r.status = Status::Pending;
            r.updated_at = now.clone();
        }
        let tracker = Tracker { output_dir: output_dir.to_path_buf(), rows, started: std::time::Instant::now() };
        tracker.save()?;
        Ok(tracker)
    }

    /// The run's documents are known (chunked): those not in the index yet
    /// are `processing`.
    fn documents_known(&mut self, documents: &RecordBatch) -> anyhow::Result<()> {
        let now = now_rfc3339();
        for (id, title, units) in document_rows(documents)? {
            let row = self.rows.entry(id.clone()).or_insert_with(|| DocStatus::first_seen(id, &title, &now));
            if row.status != Status::Processed {
                row.status = Status::Processing;
                row.title = title;
                row.text_unit_ids = units;
                row.updated_at = now.clone();
            }
        }
        self.save()
    }

    /// The run published `documents`: they are `processed`, documents no
    /// longer in the input are dropped. A document with chunks the run
    /// tolerated as failed keeps their names as its error. The input files
    /// the run could not read are `failed` with the reason, while they stay so.
    fn succeeded<'f>(
        &mut self,
        documents: &RecordBatch,
        failed_items: &[FailedItem],
        unreadable: impl IntoIterator<Item = &'f FailedItem>,
    ) -> anyhow::Result<()> {
        let now = now_rfc3339();
        let seconds = self.started.elapsed().as_secs_f64();
        let mut rows = BTreeMap::new();
        for (id, title, units) in document_rows(documents)? {
            let mut row = self.rows.remove(&id).unwrap_or_else(|| DocStatus::first_seen(id.clone(), &title, &now));
            if row.status != Status::Processed {
                row.updated_at = now.clone();
                row.run_seconds = seconds;
            }
            row.status = Status::Processed;
            row.title = title;
            row.text_unit_ids = units;
            row.error = own_failures(&row.text_unit_ids, failed_items);
            rows.insert(id, row);
        }
        for f in unreadable {
            let mut row = self.rows.remove(&f.id).unwrap_or_else(|| DocStatus::first_seen(f.id.clone(), &f.name, &now));
            row.status = Status::Failed;
            row.title = f.name.clone();
            row.error = Some(f.error.clone());
            row.updated_at = now.clone();
            row.run_seconds = seconds;
            rows.insert(f.id.clone(), row);
        }
        self.rows = rows;
        self.save()
    }

    /// The run failed: documents it was processing, or was to retry, are
    /// `failed`; a document with failed chunks gets their names as its error,
    /// the others the run's error.
    fn failed(&mut self, error: &str, failed_items: &[FailedItem]) -> anyhow::Result<()> {
        let now = now_rfc3339();
        let seconds = self.started.elapsed().as_secs_f64();
        for r in self.rows.values_mut().filter(|r| matches!(r.status, Status::Processing | Status::Pending)) {
            r.status = Status::Failed;
            r.error = Some(own_failures(&r.text_unit_ids, failed_items).unwrap_or_else(|| error.to_string()));
            r.updated_at = now.clone();
            r.run_seconds = seconds;
        }
        self.save()
    }

    /// The run was stopped (Ctrl-C): documents it was processing are
    /// `pending` again, for the next run.
    fn interrupted(&mut self) -> anyhow::Result<()> {
        let now = now_rfc3339();
        for r in self.rows.values_mut().filter(|r| r.status == Status::Processing) {
            r.status = Status::Pending;
            r.error = Some(interrupt::Interrupted.to_string());
            r.updated_at = now.clone();
        }
        self.save()
    }

    fn save(&self) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.output_dir)?;
        write(&self.output_dir, &self.rows)
    }
}

/// Runs `plan`, keeping the status table in `output_dir` (the live index)
/// current: documents are `processing` once chunked, `processed` once
/// `commit` made the run's outputs the live index, `failed` otherwise.
/// Then `publish` (an object store's upload of the folder as the next
/// version) publishes the table with the rest, so a published version says
/// `processed` of its documents wherever it is read. Returns the run's stats
/// and the published documents table (if the pipeline publishes one).
pub(crate) fn run_tracked(
    plan: &Plan,
    ws: &Workspace,
    opts: &RunOptions,
    output_dir: &Path,
    commit: impl FnOnce() -> anyhow::Result<()>,
    publish: impl FnOnce() -> anyhow::Result<()>,
) -> Result<(RunStats, Option<RecordBatch>), RunFailure> {
    let tracker = Arc::new(Mutex::new(Tracker::start(output_dir)?));
    let mut opts = opts.clone();
    let observer = tracker.clone();
    opts.on_table = Some(Arc::new(move |name: &str, table: &RecordBatch| {
        if name == "documents" {
            if let Err(e) = observer.lock().unwrap().documents_known(table) {
                tracing::warn!("could not update {FILE}: {e:#}");
            }
        }
    }));
    let outcome = runner::run(plan, ws, &opts).and_then(|stats| Ok(commit().map(|()| stats)?));
    let mut tracker = tracker.lock().unwrap();
    match outcome {
        Ok(stats) => {
            let documents = store::read_published_table(output_dir, "documents")?;
            if let Some(documents) = &documents {
                tracker.succeeded(documents, &stats.failed_items, stats.unreadable_inputs())?;
            }
            // Not published, the committed run stays in the folder (an object
            // store's working copy, which the next run starts from and
            // publishes): its statuses stay with it.
            publish()?;
            Ok((stats, documents))
        }
        Err(e @ RunFailure::Interrupted(_)) => {
            tracker.interrupted()?;
            Err(e)
        }
        Err(e) => {
            let items = match &e {
                RunFailure::Step(step) => step.failed_items.as_ref().map(|f| f.items.as_slice()),
                _ => None,
            };
            tracker.failed(&format!("{e:#}"), items.unwrap_or_default())?;
            Err(e)
        }
    }
}

/// The failed items among a document's chunks, one per line.
fn own_failures(units: &[String], failed_items: &[FailedItem]) -> Option<String> {
    let own: Vec<String> =
        failed_items.iter().filter(|f| units.contains(&f.id)).map(|f| format!("{}: {}", f.name, f.error)).collect();
    (!own.is_empty()).then(|| own.join("\n"))
}

/// Status rows for the documents of the index in `output_dir`: `processed`.
fn rebuilt_from_index(output_dir: &Path) -> BTreeMap<String, DocStatus> {
    let now = now_rfc3339();
    let Ok(documents) = store::read_table(&store::table_path(output_dir, "documents", true)) else {
        return BTreeMap::new();
    };
    document_rows(&documents)
        .unwrap_or_default()
        .into_iter()
        .map(|(id, title, units)| {
            let mut row = DocStatus::first_seen(id.clone(), &title, &now);
            row.status = Status::Processed;
            row.text_unit_ids = units;
            (id, row)
        })
        .collect()
}

fn document_rows(documents: &RecordBatch) -> anyhow::Result<Vec<(String, String, Vec<String>)>> {
    let ids = strings(documents, "documents", "id")?;
    let titles = strings(documents, "documents", "title")?;
    let units = string_lists(documents, "documents", "text_unit_ids")?;
    Ok(ids.iter().zip(titles).zip(units).map(|((i, t), u)| (i.to_string(), t.to_string(), u)).collect())
}

/// Now, as `YYYY-MM-DDTHH:MM:SSZ`.
fn now_rfc3339() -> String {
    let secs = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    rfc3339(secs)
}

/// Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic Gregorian).
fn rfc3339(secs: u64) -> String {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use graphrag_engine::schema;

    fn documents(rows: &[(&str, &str, &[&str])]) -> RecordBatch {
        let n = rows.len();
        RecordBatch::try_new(
            schema::documents(arrow_schema::DataType::LargeUtf8),
            vec![
                text_col(rows.iter().map(|r| r.0)),
                schema::int_col(0..n as i64),
                text_col(rows.iter().map(|r| r.1)),
                text_col(vec!["text"; n]),
                id_list_col(rows.iter().map(|r| r.2.iter().map(|s| s.to_string()).collect::<Vec<_>>())),
                text_col(vec!["2026-01-01"; n]),
                opt_text_col(vec![None; n]),
            ],
        )
        .unwrap()
    }

    fn statuses(out: &Path) -> Vec<(String, &'static str)> {
        read(out).unwrap().into_values().map(|r| (r.title, r.status.as_str())).collect()
    }

    #[test]
    fn a_document_goes_from_processing_to_processed_and_a_removed_one_disappears() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let mut run = Tracker::start(out).unwrap();
        run.documents_known(&documents(&[("d1", "a.txt", &["u1"]), ("d2", "b.txt", &["u2", "u3"])])).unwrap();
        assert_eq!(statuses(out), [("a.txt".into(), "processing"), ("b.txt".into(), "processing")]);
        run.succeeded(&documents(&[("d1", "a.txt", &["u1"]), ("d2", "b.txt", &["u2", "u3"])]), &[], []).unwrap();
        let rows = read(out).unwrap();
        assert_eq!(rows["d2"].text_unit_ids, ["u2", "u3"]);
        assert_eq!(rows["d2"].status, Status::Processed);

        // b.txt changed (new content, new id), a.txt was removed, the run failed.
        let mut run = Tracker::start(out).unwrap();
        run.documents_known(&documents(&[("d3", "b.txt", &["u4"])])).unwrap();
        run.failed("step `extract_graph` failed: 500", &[]).unwrap();
        let rows = read(out).unwrap();
        assert_eq!(rows["d3"].status, Status::Failed);
        assert_eq!(rows["d3"].error.as_deref(), Some("step `extract_graph` failed: 500"));
        assert_eq!(rows["d1"].status, Status::Processed, "the live index still has it");

        // The next run starts by marking the failed document pending, then succeeds.
        let mut run = Tracker::start(out).unwrap();
        assert_eq!(read(out).unwrap()["d3"].status, Status::Pending);
        run.succeeded(&documents(&[("d3", "b.txt", &["u4"])]), &[], []).unwrap();
        assert_eq!(statuses(out), [("b.txt".into(), "processed")]);
        assert_eq!(read(out).unwrap()["d3"].error, None);
    }

    #[test]
    fn failed_chunks_are_named_on_their_documents_and_an_interruption_leaves_them_pending() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let docs = documents(&[("d1", "a.txt", &["u1", "u2"]), ("d2", "b.txt", &["u3"])]);
        let mut run = Tracker::start(out).unwrap();
        run.documents_known(&docs).unwrap();
        let item = FailedItem {
            step: "extract_graph".into(),
            id: "u2".into(),
            name: "document a.txt, chunk 2 of 2".into(),
            error: "malformed answer".into(),
        };
        run.failed("2 of 3 text units failed", std::slice::from_ref(&item)).unwrap();
        let rows = read(out).unwrap();
        assert_eq!(rows["d1"].error.as_deref(), Some("document a.txt, chunk 2 of 2: malformed answer"));
        assert_eq!(rows["d2"].error.as_deref(), Some("2 of 3 text units failed"));

        let mut run = Tracker::start(out).unwrap();
        run.documents_known(&docs).unwrap();
        run.interrupted().unwrap();
        let rows = read(out).unwrap();
        assert!(rows.values().all(|r| r.status == Status::Pending), "{rows:?}");
        assert_eq!(rows["d1"].error.as_deref(), Some("interrupted — rerun to resume"));

        // Tolerated: processed, the missing chunk noted.
        let mut run = Tracker::start(out).unwrap();
        run.succeeded(&docs, &[item], []).unwrap();
        let rows = read(out).unwrap();
        assert_eq!(rows["d1"].status, Status::Processed);
        assert_eq!(rows["d1"].error.as_deref(), Some("document a.txt, chunk 2 of 2: malformed answer"));
        assert_eq!(rows["d2"].error, None);
    }

    #[test]
    fn a_corrupt_status_table_is_rebuilt_from_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let docs = documents(&[("d1", "a.txt", &["u1"])]);
        store::write_table(&out.join("documents.parquet"), &docs).unwrap();
        std::fs::write(out.join(FILE), b"PAR1 not really parquet").unwrap();
        let mut run = Tracker::start(out).unwrap();
        assert_eq!(statuses(out), [("a.txt".into(), "processed")]);
        run.succeeded(&docs, &[], []).unwrap();
        assert_eq!(statuses(out), [("a.txt".into(), "processed")]);
    }

    #[test]
    fn an_unreadable_input_file_is_a_failed_row_until_it_is_fixed_or_removed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path();
        let bad = FailedItem {
            step: "load_documents".into(),
            id: "h1".into(),
            name: "scan.pdf".into(),
            error: "no text layer".into(),
        };
        let docs = documents(&[("d1", "a.txt", &["u1"])]);
        Tracker::start(out).unwrap().succeeded(&docs, &[], [&bad]).unwrap();
        let rows = read(out).unwrap();
        assert_eq!((rows["h1"].status, rows["h1"].title.as_str()), (Status::Failed, "scan.pdf"));
        assert_eq!(rows["h1"].error.as_deref(), Some("no text layer"));
        assert!(rows["h1"].text_unit_ids.is_empty());
        // Still unreadable at the next run: still failed; then removed: gone.
        Tracker::start(out).unwrap().succeeded(&docs, &[], [&bad]).unwrap();
        assert_eq!(statuses(out), [("a.txt".into(), "processed"), ("scan.pdf".into(), "failed")]);
        Tracker::start(out).unwrap().succeeded(&docs, &[], []).unwrap();
        assert_eq!(statuses(out), [("a.txt".into(), "processed")]);
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_369_872), "2026-11-22T17:51:12Z");
    }
}
