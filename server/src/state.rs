//! What the server holds: the loaded index (a [`Snapshot`], swapped whole
//! when a new index is published) and the writer queue that runs `update`
//! for added and deleted documents, one run at a time.
//!
//! Consistency: a snapshot reads every table and vector file at once
//! (`QueryEngine::load_all`) while holding the index's writer lock, so no
//! publication can be under way while it reads; after that, queries read
//! nothing from disk. A query takes the current `Arc<Snapshot>` and keeps it
//! to the end, so it answers from one index, old or new, never a mix.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, RwLock};
use std::time::Instant;

use graphrag_engine::settings::{self, Settings};
use graphrag_engine::storage::{Backend, Location, Published, Storage};
use graphrag_engine::store;
use graphrag_project::doc_status::{self, DocStatus};
use graphrag_project::documents::InputDocuments;
use graphrag_project::{RunSettings, StepEvent, StopFlag, UpdateOptions};
use graphrag_query::QueryEngine;
use serde_json::{json, Value};

use crate::graph::Graph;
use crate::uploads::Uploads;
use crate::ServeOptions;

/// One published index, loaded.
pub struct Snapshot {
    /// `None` before the first index exists.
    pub engine: Option<QueryEngine>,
    pub graph: Graph,
    /// The published index's document status rows, by id.
    pub statuses: BTreeMap<String, DocStatus>,
    /// The first 100 characters of each indexed document's text, by title.
    pub summaries: HashMap<String, String>,
    /// The publication it was read from (file times of its tables).
    pub fingerprint: String,
    pub loaded_at: String,
}

impl Snapshot {
    /// No index yet.
    fn empty(fingerprint: String) -> Snapshot {
        Snapshot {
            engine: None,
            graph: Graph::default(),
            statuses: BTreeMap::new(),
            summaries: HashMap::new(),
            fingerprint,
            loaded_at: now(),
        }
    }

    /// A short name of the publication it was read from: answers with the
    /// same version come from the same index.
    pub fn version(&self) -> String {
        use sha2::Digest;
        sha2::Sha256::digest(self.fingerprint.as_bytes())[..6].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The state of the writer queue, shown by `/documents/pipeline_status`.
#[derive(Default)]
pub struct Pipeline {
    pub busy: bool,
    pub job_name: String,
    pub job_start: Option<String>,
    /// A run was asked for while one ran: it runs next.
    pub request_pending: bool,
    pub step: Option<String>,
    pub step_index: usize,
    pub steps_total: usize,
    pub latest_message: String,
    pub history: VecDeque<String>,
    /// The last run's error, if it failed.
    pub last_error: Option<String>,
    /// Runs finished (successfully or not) since the server started.
    pub runs: u64,
    /// Uploaded or written input files the next run will index, by name.
    pub queued_files: Vec<String>,
    /// `/documents/cancel_pipeline` asked the running update to stop.
    pub cancel_requested: bool,
    /// The running update's own stop flag (a new one per run): cancelling
    /// it stops that update and nothing else of the process.
    pub run_stop: StopFlag,
}

const HISTORY: usize = 200;

impl Pipeline {
    pub fn message(&mut self, text: String) {
        tracing::info!("{text}");
        let stamped = format!("{} {text}", now());
        self.latest_message = stamped.clone();
        self.history.push_back(stamped);
        while self.history.len() > HISTORY {
            self.history.pop_front();
        }
    }
}

pub struct State {
    pub root: PathBuf,
    pub settings: Settings,
    /// The input documents: uploads and deletions go here, wherever the
    /// input lives (a folder or a bucket).
    pub documents: InputDocuments,
    /// Where the index is published (a folder, or an object store).
    pub output: Location,
    pub api_key: Option<String>,
    pub max_upload_bytes: usize,
    /// `serve --webui-dir`: the web UI's folder, if not the built-in one.
    pub webui_dir: Option<PathBuf>,
    /// `serve --read-only`: writes are refused (see `ServeOptions::read_only`).
    pub read_only: bool,
    snapshot: RwLock<Arc<Snapshot>>,
    pub pipeline: Mutex<Pipeline>,
    jobs: Mutex<Option<mpsc::Sender<()>>>,
    /// Serialises snapshot loads (the worker and the poller).
    loading: Mutex<()>,
    /// Upload names being written now (two uploads of one name do not race).
    pub writing: Mutex<HashMap<String, Instant>>,
    /// Track ids and refused uploads (see `uploads`).
    pub uploads: Mutex<Uploads>,
    /// The chat model's start-up check, when `serve` runs it.
    pub chat_check: StartupCheck,
}

/// The first 100 characters of each published document's text, by title
/// (what LightRAG's document lists show), read from the index itself, so a
/// listing reads no input file.
fn document_summaries(published: &Path) -> anyhow::Result<HashMap<String, String>> {
    let Some(docs) = store::read_published_table(published, "documents")? else { return Ok(HashMap::new()) };
    let titles = graphrag_engine::table::strings(&docs, "documents", "title")?;
    let texts = graphrag_engine::table::strings(&docs, "documents", "text")?;
    Ok(titles.into_iter().zip(texts).map(|(title, text)| (title.to_string(), summary(text.as_bytes()))).collect())
}

/// The first 100 characters of a text (no byte-order mark).
pub(crate) fn summary(bytes: &[u8]) -> String {
    String::from_utf8_lossy(&bytes[..bytes.len().min(400)]).trim_start_matches('\u{feff}').chars().take(100).collect()
}

/// The outcome of the chat model's start-up check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckState {
    NotRun,
    Running,
    Passed,
    Failed(String),
}

/// Where `serve` keeps the check's outcome (`State::chat_check`; run by
/// `chat_model::check_in_background`).
pub struct StartupCheck(Mutex<CheckState>);

impl Default for StartupCheck {
    fn default() -> StartupCheck {
        StartupCheck(Mutex::new(CheckState::NotRun))
    }
}

impl StartupCheck {
    pub fn get(&self) -> CheckState {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn set(&self, state: CheckState) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = state;
    }

    /// `/health`'s words for it.
    pub fn to_json(&self) -> Value {
        match self.get() {
            CheckState::NotRun => json!("not run"),
            CheckState::Running => json!("running"),
            CheckState::Passed => json!("passed"),
            CheckState::Failed(why) => json!({ "failed": why }),
        }
    }
}

pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl State {
    pub fn new(opts: &ServeOptions, api_key: Option<String>) -> anyhow::Result<Arc<State>> {
        let root = opts.root.as_path();
        let settings = settings::load(root)?.settings;
        let storage = Storage::open(root, &settings)?;
        let documents = InputDocuments::of(&storage);
        let output = storage.output;
        let empty = Snapshot::empty(String::new());
        let state = Arc::new(State {
            root: root.to_path_buf(),
            settings,
            documents,
            output,
            api_key,
            max_upload_bytes: opts.max_upload_bytes,
            webui_dir: opts.webui_dir.clone(),
            read_only: opts.read_only,
            snapshot: RwLock::new(Arc::new(empty)),
            pipeline: Mutex::new(Pipeline::default()),
            jobs: Mutex::new(None),
            loading: Mutex::new(()),
            writing: Mutex::new(HashMap::new()),
            uploads: Mutex::new(Uploads::default()),
            chat_check: Default::default(),
        });
        state.reload_if_changed()?;
        Ok(state)
    }

    /// The index queries answer from now.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The document status rows, by id: in a folder the live table, which a
    /// run keeps current as it goes; on an object store the published
    /// version's (writer and replicas alike: what they answer from).
    pub fn document_statuses(&self) -> anyhow::Result<BTreeMap<String, DocStatus>> {
        match self.output.backend() {
            Backend::Folder(dir) => doc_status::read(dir),
            Backend::ObjectStore(_) => Ok(self.snapshot().statuses.clone()),
        }
    }

    /// Loads the published index if it changed since the snapshot was read;
    /// `false` when a writer holds the lock (the next poll tries again).
    pub fn reload_if_changed(&self) -> anyhow::Result<bool> {
        let _one_at_a_time = self.loading.lock().unwrap_or_else(|e| e.into_inner());
        self.reload_locked()
    }

    /// [`State::reload_if_changed`] unless the writer thread is at work (it
    /// reloads itself when its run ends): for the poll that notices an index
    /// published by another process (`graphrag-rs update`).
    pub fn reload_if_idle(&self) -> anyhow::Result<bool> {
        match self.loading.try_lock() {
            Ok(_one_at_a_time) => self.reload_locked(),
            Err(_) => Ok(false),
        }
    }

    fn reload_locked(&self) -> anyhow::Result<bool> {
        if self.output.published_token()? == self.snapshot().fingerprint {
            return Ok(true);
        }
        match self.output.open_published()? {
            Published::Busy => Ok(false),
            Published::Nothing(token) => self.install(None, token),
            // Read whole while held: no publication changes it meanwhile.
            Published::Version(version) => self.install(Some(version.dir()), version.token().to_string()),
        }
    }

    /// Reads the published index in the local folder `published` (None: no
    /// index yet) whole and makes it the snapshot that queries answer from.
    fn install(&self, published: Option<&Path>, fingerprint: String) -> anyhow::Result<bool> {
        let started = Instant::now();
        let snapshot = match published {
            Some(dir) => {
                let engine = QueryEngine::at(&self.root, self.settings.clone(), dir)?;
                engine.load_all()?;
                Snapshot {
                    engine: Some(engine),
                    graph: Graph::load(dir)?,
                    statuses: doc_status::read(dir)?,
                    summaries: document_summaries(dir)?,
                    fingerprint,
                    loaded_at: now(),
                }
            }
            None => Snapshot::empty(fingerprint),
        };
        tracing::info!(
            entities = snapshot.graph.nodes.len(),
            "index loaded from {} in {:.2} s",
            self.output.describe(),
            started.elapsed().as_secs_f64()
        );
        *self.snapshot.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(snapshot);
        Ok(true)
    }

    /// Asks for an `update` run (after the one running, if any).
    pub fn queue_update(self: &Arc<State>, why: &str) {
        let mut p = self.pipeline.lock().unwrap_or_else(|e| e.into_inner());
        p.message(format!("update queued: {why}"));
        if p.busy {
            p.request_pending = true;
        }
        drop(p);
        let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        let sender = jobs.get_or_insert_with(|| {
            let (tx, rx) = mpsc::channel();
            let state = self.clone();
            std::thread::Builder::new()
                .name("graphrag-writer".into())
                .spawn(move || state.writer(rx))
                .expect("the writer thread starts");
            tx
        });
        let _ = sender.send(());
    }

    /// The writer thread: one `update` per batch of requests.
    fn writer(self: Arc<State>, jobs: mpsc::Receiver<()>) {
        while jobs.recv().is_ok() {
            // Requests that came in meanwhile are served by this run.
            while jobs.try_recv().is_ok() {}
            self.run_update();
        }
    }

    fn run_update(self: &Arc<State>) {
        {
            let mut p = self.pipeline.lock().unwrap_or_else(|e| e.into_inner());
            p.busy = true;
            p.request_pending = false;
            p.job_name = "update".into();
            p.job_start = Some(now());
            p.last_error = None;
            // The previous run's step is no part of this one's.
            p.step = None;
            p.step_index = 0;
            p.steps_total = 0;
            p.run_stop = StopFlag::new();
            p.message("update started".into());
        }
        let state = self.clone();
        let on_step = Arc::new(move |e: &StepEvent| {
            let mut p = state.pipeline.lock().unwrap_or_else(|e| e.into_inner());
            p.step = Some(e.step.to_string());
            p.step_index = e.index;
            p.steps_total = e.total;
            if let Some(status) = e.finished {
                p.message(format!("step {}/{} {} {status}", e.index + 1, e.total, e.step));
            }
        });
        let opts = UpdateOptions {
            run: RunSettings {
                skip_validation: true,
                on_step: Some(on_step),
                stop: self.pipeline.lock().unwrap_or_else(|e| e.into_inner()).run_stop.clone(),
                ..RunSettings::default()
            },
            ..UpdateOptions::default()
        };
        let started = Instant::now();
        // No snapshot load takes the writer lock while the update needs it.
        let one_at_a_time = self.loading.lock().unwrap_or_else(|e| e.into_inner());
        let result = graphrag_project::update(&self.root, &opts);
        let reloaded = match &result {
            Ok(_) => self.reload_locked().map_err(|e| format!("{e:#}")),
            Err(_) => Ok(true),
        };
        drop(one_at_a_time);
        let mut p = self.pipeline.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(report) => {
                let c = report.changes.unwrap_or_default();
                p.message(format!(
                    "update done in {:.1} s: {} added, {} changed, {} removed, {} unchanged",
                    started.elapsed().as_secs_f64(),
                    c.added.len(),
                    c.changed.len(),
                    c.removed.len(),
                    c.unchanged
                ));
                p.queued_files.clear();
            }
            Err(e) => {
                let text = e.to_string();
                p.message(format!("update failed: {text}"));
                p.last_error = Some(text);
            }
        }
        if let Err(e) = reloaded {
            p.message(format!("loading the new index failed: {e}"));
            p.last_error = Some(e);
        }
        p.busy = false;
        if std::mem::take(&mut p.cancel_requested) {
            p.message("update cancelled".into());
        }
        p.step = None;
        p.runs += 1;
    }

    pub fn pipeline_status(&self) -> Value {
        let p = self.pipeline.lock().unwrap_or_else(|e| e.into_inner());
        json!({
            "autoscanned": false,
            "busy": p.busy,
            "job_name": if p.busy { p.job_name.as_str() } else { "" },
            "job_start": p.job_start,
            "docs": p.queued_files.len(),
            "batchs": p.steps_total,
            // 0 until the run's plan is known (no "step 1/0").
            "cur_batch": if p.busy && p.steps_total > 0 { p.step_index + 1 } else { 0 },
            "request_pending": p.request_pending,
            "latest_message": p.latest_message,
            "history_messages": p.history.iter().collect::<Vec<_>>(),
            "update_status": {},
            "step": p.step,
            "runs": p.runs,
            "last_error": p.last_error,
        })
    }
}
