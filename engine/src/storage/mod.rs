//! Where a project's documents, index and model answers live: one
//! [`Storage`] of three [`Location`]s, opened once from the project root and
//! its settings. This is the only place that joins the root with a settings
//! `base_dir`, and (with [`crate::store::table_path`]) the only place that
//! knows a table's file name; callers name tables, never files.
//!
//! A location is a local folder, or a prefix of an object store (S3, Azure
//! Blob, GCS) with a local working copy. Its files are read and written
//! through one interface, `Store`, whose contracts (`backend.rs`) hold on
//! every backend alike: a file is written whole, `create` has one winner, a
//! listing is sorted and complete, removal is idempotent. Beyond them:
//!
//! - Publication is atomic: readers see one whole version or the one before
//!   ([`Location::open_published`] holds it still while read); a folder
//!   renames under its writer lock, a store writes `v-NNNNNN/` then one
//!   conditional manifest PUT, retried for `PUBLISH_RETRY_SECONDS`.
//! - One writer at a time ([`Location::lock_for_writing`]): a folder's flock;
//!   a store's lease, expiring `LEASE_SECONDS` after its last renewal, taken
//!   over at once from a holder on this machine whose process is gone.
//!
//! The working copy is this module's business: the runner stages and
//! commits in it (`staging`), readers keep copies of published versions in
//! it (the current and the previous).
//!
//! # In detail
//!
//! where a project's documents, index and answers live. Every backend is reached through one trait, `Store`
//! (`backend.rs`: get, put, create, exists, delete, delete_all, list, folders, join, describe), a folder
//! and `object_store`'s S3 / Azure / GCS behind it, its contracts written on it (a file is written whole;
//! `create` has one winner; listings are sorted and complete; removal is idempotent). Publication (atomic)
//! and the writer's lease (one writer at a time) differ by backend and are `Location`'s (module docs of
//! `storage/mod.rs`). Readers open the published index only through `Location::open_published`
//! (`published.rs`: a folder's version held by the writer lock while read, `Busy` while a writer publishes;
//! a store's local copy of one version) — serve's snapshots and Python's `Index` alike; writers change it
//! only through `storage::Writer` (`lock_for_writing`, then `prepare` the staging folder, `commit`,
//! `publish`). `Storage { input, output, cache }` is opened once from the root and the settings
//! (`Storage::open`: the only join of the root with a `base_dir`); each is a `Location`: a local folder, or
//! a prefix of an object store with a local copy. A `Location` shows no local path: what is read and
//! written for every machine goes through its own methods (`read`, `put`, `create`, `list`, `exists`,
//! `remove`, `remove_all`, `subfolders`, `join` for a sub-location), and the three local folders storage
//! hands out are typed by what they are for: `WorkingCopy` (`working_copy.rs`: where a run or a shard
//! writes Parquet, then `push` / `push_table` / `put_table` / `pull_table` to and from the store; for a
//! folder the folder itself), `Writer::index` and its staging (the index a run resumes from), and
//! `PublishedVersion::dir` (a reader's held copy). `Location::backend()` (`Folder(path)` | `ObjectStore`)
//! is for the callers whose work differs by kind: the answer cache's layout, the checks of a folder, a run
//! log's name and upload, and where the server reads live document statuses. Callers name tables, never
//! `.parquet` files, and no `object_store` type leaves `engine/`. `read_published` reads one file of the
//! published version (the manifest and the file, no local copy: `update --shard`'s previous method).
//! `object.rs`: `ObjectLocation` (get, ranged get, put, conditional put, list, list one level's folders,
//! delete, upload, download) over `Arc<dyn ObjectStore>`, synchronous like the engine: each request runs on
//! the module's own small runtime and is waited for over a channel (safe from any thread, a tokio worker
//! included). `publish.rs`: publication without rename — a run stages and commits in its local working copy
//! as on disk (`staging`), then uploads the published files under `v-NNNNNN/` and writes `manifest.json`
//! naming that version with a conditional put (create, or update from the e-tag read); readers read the
//! manifest first (`fetch`: a local copy per version, downloaded once, so a server's snapshot stays whole;
//! marked complete only with every file at its manifest size; once a new copy is complete, copies older
//! than the one before it are deleted), the previous version is kept and older ones deleted by the next
//! publication. Publication's storage calls (the manifest's read, uploads, the manifest's conditional put,
//! `Lease::check` before them) are retried with doubling waits within a `RetryWindow`
//! (`PUBLISH_RETRY_SECONDS`, 60 s; a `tracing::warn!` per retry naming the call and the time left; not a
//! denied access nor another writer's `Conditional::Lost`), then fail saying nothing was published; the
//! manifest carries a unique `publication` id, so a conditional put carried out whose answer was lost (its
//! retry then loses) is recognized by reading the manifest back. Cleanup of old versions after the manifest
//! only warns. One writer at a time: `lease.json` (conditional put, `LEASE_SECONDS` 30 s, renewed every 10
//! s by a thread; it records host, pid, boot id and the process's start time in clock ticks: a holder with
//! this host and boot id whose pid is gone or started at another time — a container's PID 1 — is taken over
//! at once, others when the lease expires; a refusal names the holder's process, host, since when, and the
//! seconds left). A writer first mirrors the published version into its working copy (`mirror`), which
//! `update` and `--resume` start from. `root.rs`: a project root in a bucket (`--root s3://…`):
//! `local_root` checks its project files (settings, `.env`, top-level files, `prompts/`, `workflows/`) out
//! into a local working copy marked with its URL (`settings::REMOTE_ROOT_FILE`), where `settings::load`
//! turns every `file` storage into the same folder under the root's prefix (`Settings::rebase`); `init`
//! uploads a scaffold, `write_back` the project files a command wrote (graph edits, tuned prompts).
//! `Storage::reporting`: where run logs go (`project::RunLog` uploads a run's log to a bucket at its end).
//! The answer cache on an object store is written in segments (`llm/cache_segments.rs`), the input one
//! object per document (listed once a run: `ObjectFiles` keeps its first listing for the load step's resume
//! check and load). Every store `Storage::open` connects counts its requests into the process's counters of
//! its setting and location (`counting::CountingStore::for_setting`); the runner writes those of the run's
//! own locations since it began into stats.json (`storage_requests`, from `RunOptions::storage_requests`,
//! which project/'s runs set from `Storage::remote_locations`); `scripts/shard_s3_requests.py` counts a
//! whole process's requests with a proxy in front of moto.
//!
//! object storage on Apache Arrow's `object_store` crate (features aws-base, azure-base, gcp-base, ring: no
//! aws-lc-rs C build; HTTP through reqwest on `tls`'s shared rustls config). `remote.rs`: `connect(setting,
//! &RemoteStorage)` builds the store (credentials from the environment as the cloud SDKs read them, or a
//! blob `connection_string`; connect/request timeouts, bounded retries) and makes one bounded LIST,
//! classifying failures into `RemoteError` (NoSuchBucket, AccessDenied, EndpointDown, …, each naming the
//! setting, never a secret). `counting.rs`: `CountingStore`, an `ObjectStore` decorator counting
//! GET/HEAD/PUT/LIST/DELETE/COPY requests and bytes (`RequestCounts`, serialisable for stats.json), into
//! the process's counters of a setting and location (`for_setting`; `RequestSnapshot`, `RunRequests`: the
//! runner's `storage_requests`). Tested against real servers on loopback (engine/tests/object_stores.rs;
//! tests/common/object_servers.rs starts moto's S3 server, Azurite and fake-gcs-server, skipped with a
//! message when absent, a failure under CI). fake-gcs-server lacks the XML API's upload that object_store's
//! GCS client sends, so object_servers.rs puts an `UploadAdapter` in front of it that turns that one
//! request into the JSON API's multipart upload (`ifGenerationMatch` kept: conditional puts are the
//! emulator's own); the rest reaches it unchanged. A GCS endpoint is object_store's: GOOGLE_BASE_URL or the
//! service-account key's `gcs_base_url` (`remote.rs` reads it too, to allow plain HTTP). Not tested on GCS:
//! the typed errors (fake-gcs-server answers a missing bucket's LIST with a 500, where GCS answers
//! `NoSuchBucket`, and checks no credentials). End to end: project/tests/object_store.rs (fast and standard
//! index, update, on S3, on Azurite with `graphrag init`'s blob settings and a fast index and its rerun on
//! GCS, each byte-equal to the local folder) and tests/object_store_kill.rs (index and update on S3,
//! Azurite and GCS killed by SIGKILL at seeded random moments: the published version stays whole, the rerun
//! repeats no model call), tests/object_store_root.rs (a project root in a bucket: S3; in a container and a
//! GCS bucket, indexed there), and tests/shards_object_store.rs (sharded index and update into S3, each
//! command in its own working copy, byte-equal to a local index).

mod backend;
pub mod counting;
pub mod files;
pub mod object;
pub mod publish;
mod published;
pub mod remote;
pub mod root;
mod working_copy;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::settings::{Settings, StorageConfig, StorageTarget};
use backend::remove_file_if_present;
pub(crate) use backend::Store;
use files::{FileEntry, FileSource, LocalFiles};
use graphrag_operations::ids::sha256_hex;
use object::ObjectLocation;
pub use published::{Published, PublishedVersion};
pub use working_copy::WorkingCopy;

/// The input, output (index) and cache locations of a project.
#[derive(Debug, Clone)]
pub struct Storage {
    /// `input_storage`: the documents to index.
    pub input: Location,
    /// `output_storage`: the published index.
    pub output: Location,
    /// The model answer cache (`cache`).
    pub cache: Location,
}

/// Where a project keeps the local copies of its object store locations.
const LOCAL_COPIES: &str = ".graphrag-rs";

impl Storage {
    /// The locations `settings` name: folders relative to the project
    /// `root`, or object store prefixes, each connected and checked with one
    /// request (an error names the setting and the cause).
    pub fn open(root: &Path, settings: &Settings) -> Result<Storage, OpenError> {
        let (input, output) = (&settings.input_storage, &settings.output_storage);
        Ok(Storage {
            input: location(root, "input_storage", input, root.join(&input.base_dir))?,
            output: location(root, "output_storage", output, root.join(&output.base_dir))?,
            cache: Storage::cache(root, settings)?,
        })
    }

    /// The object store locations of the project, by setting (what a run's
    /// `storage_requests` counts).
    pub fn remote_locations(&self) -> Vec<(&'static str, String)> {
        [("input_storage", &self.input), ("output_storage", &self.output), ("cache.storage", &self.cache)]
            .into_iter()
            .filter_map(|(setting, location)| Some((setting, location.remote()?.url().to_string())))
            .collect()
    }

    /// The reporting location (where run logs go): a folder, or an object
    /// store prefix the logs are uploaded to.
    pub fn reporting(root: &Path, settings: &Settings) -> Result<Location, OpenError> {
        let config = &settings.reporting;
        location(root, "reporting", config, root.join(&config.base_dir))
    }

    /// The cache location alone (the LLM layer's).
    pub fn cache(root: &Path, settings: &Settings) -> Result<Location, OpenError> {
        let dir = root.join(settings.cache.dir());
        match &settings.cache.storage {
            Some(config) => location(root, "cache.storage", config, dir),
            None => Ok(Location::folder(dir)),
        }
    }
}

/// A storage setting that could not be opened: which one (for the settings
/// file's line), and why.
#[derive(Debug, thiserror::Error)]
#[error("{cause:#}")]
pub struct OpenError {
    /// The settings key: `input_storage`, `output_storage`, `cache.storage`.
    pub key: &'static str,
    cause: anyhow::Error,
}

/// The location the storage setting `key` names: `folder`, or its object
/// store prefix, connected (with a local copy under the root).
fn location(root: &Path, key: &'static str, config: &StorageConfig, folder: PathBuf) -> Result<Location, OpenError> {
    let open = || -> anyhow::Result<Location> {
        let target = config.target().map_err(|e| anyhow::anyhow!("{key}.{}: {}", e.key, e.message))?;
        match target {
            StorageTarget::Folder(_) => Ok(Location::folder(folder)),
            StorageTarget::Remote(remote) => {
                let url = remote.url();
                // One working copy per URL: a setting moved to another bucket or
                // prefix must not start from (and upload) the old one's files.
                let copy = root.join(LOCAL_COPIES).join(format!("{key}-{}", &sha256_hex(&[url.as_bytes()])[..12]));
                let connected = object::run(async move { remote::connect(key, &remote).await })??;
                let store = std::sync::Arc::new(counting::CountingStore::for_setting(key, &url, connected.store));
                Ok(Location::object(ObjectLocation::at(store, connected.prefix, url), copy))
            }
        }
    };
    open().map_err(|cause| OpenError { key, cause })
}

/// One place files are kept: a local folder, or a prefix of an object
/// store with a local copy (the working copy a writer runs in; a reader's
/// copies of published versions beside it).
#[derive(Debug, Clone)]
pub struct Location {
    /// The folder, or the object store's working copy.
    dir: PathBuf,
    remote: Option<ObjectLocation>,
    /// Where every machine reads and writes: the folder, or the prefix.
    store: std::sync::Arc<dyn Store>,
}

/// See [`Location::backend`].
pub enum Backend<'a> {
    /// A local folder.
    Folder(&'a Path),
    /// A prefix of a bucket or container.
    ObjectStore(&'a ObjectLocation),
}

/// Versions kept before the published one, for readers that still hold them.
const KEEP_PREVIOUS_VERSIONS: u64 = 1;

/// How long a writer's lease lasts unless renewed; it is renewed every
/// third of this while the writer runs, so two renewals in a row may fail
/// (a store's blip) before it lapses. Short because it is how long the next
/// writer waits after a writer that died where its process cannot be looked
/// up (another machine: one on this machine is taken over at once).
const LEASE_SECONDS: u64 = 30;

/// How long a publication retries a failed storage call before failing the
/// run: it comes after all of the run's model work, which a storage outage
/// of a minute should not cost.
const PUBLISH_RETRY_SECONDS: u64 = 60;

/// The right to change an index, and the one way to: the local folder's
/// lock (and on an object store the writer lease), held until dropped; a
/// run stages in [`Writer::prepare`]'s folder, then [`Writer::commit`]s
/// (the working folder's index) and [`Writer::publish`]es (an object
/// store's next version).
pub struct Writer {
    _lock: crate::staging::WriterLock,
    lease: Option<publish::Lease>,
    output: Location,
}

impl Writer {
    /// The folder a run stages its outputs in: a run of a whole index
    /// starts it empty, or when resuming from the live index, once a
    /// publication a crash interrupted is finished.
    pub fn prepare(&self, resume: bool) -> anyhow::Result<PathBuf> {
        crate::staging::prepare(&self.output.dir, resume)
    }

    /// The index the run resumes from: the output folder, or on an object
    /// store its working copy, brought to the published version when the
    /// lock was taken. A run writes only under [`Writer::prepare`]'s folder.
    pub fn index(&self) -> WorkingCopy {
        self.output.working_copy()
    }

    /// The staging folder as an `update` finds it (a resumed update's steps kept).
    pub fn staging_dir(&self) -> PathBuf {
        crate::staging::dir(&self.output.dir)
    }

    /// Makes the staged outputs the working folder's index (renames, after
    /// a commit marker: all or, after a crash, finished by the next writer).
    pub fn commit(&self) -> anyhow::Result<()> {
        crate::staging::commit(&self.output.dir)
    }

    /// After [`Writer::commit`]: on an object store, uploads the committed
    /// files as the next version and points the manifest at it, retrying a
    /// failed storage call for up to `PUBLISH_RETRY_SECONDS`; a folder is
    /// published by the commit.
    pub fn publish(&self) -> anyhow::Result<()> {
        let (Some(remote), Some(lease)) = (&self.output.remote, &self.lease) else { return Ok(()) };
        let window = publish::RetryWindow::new(std::time::Duration::from_secs(PUBLISH_RETRY_SECONDS));
        lease.check(&window)?;
        let version = publish::publish(&self.output.dir, remote, KEEP_PREVIOUS_VERSIONS, &window)?;
        tracing::info!("published version {version} of {}", remote.url());
        Ok(())
    }
}

impl Location {
    /// A local folder (made when first written to).
    pub fn folder(dir: impl Into<PathBuf>) -> Location {
        let dir = dir.into();
        Location { store: std::sync::Arc::new(backend::Folder { dir: dir.clone() }), dir, remote: None }
    }

    /// A prefix of an object store, worked on in the local folder `copy`.
    pub fn object(remote: ObjectLocation, copy: impl Into<PathBuf>) -> Location {
        Location { dir: copy.into(), store: std::sync::Arc::new(remote.clone()), remote: Some(remote) }
    }

    /// What the location is, for the few callers whose work differs by
    /// kind (the answer cache's layout; the checks of a folder; a run log's
    /// upload; the server's live statuses). An object
    /// store location shows no local path: its working copy is this module's.
    pub fn backend(&self) -> Backend<'_> {
        match &self.remote {
            None => Backend::Folder(&self.dir),
            Some(remote) => Backend::ObjectStore(remote),
        }
    }

    /// The object store prefix, when the location is one.
    pub fn remote(&self) -> Option<&ObjectLocation> {
        self.remote.as_ref()
    }

    /// Whether an index is published there: a folder holds its documents
    /// table; an object store's manifest names a version (one GET).
    pub fn has_index(&self) -> anyhow::Result<bool> {
        match &self.remote {
            None => Ok(self.working_copy().has_index()),
            Some(remote) => Ok(publish::manifest(remote)?.is_some()),
        }
    }

    /// The location's local folder, to run in or to read fragments from.
    pub fn working_copy(&self) -> WorkingCopy {
        WorkingCopy { dir: self.dir.clone(), remote: self.remote.clone() }
    }

    /// The location for messages.
    pub fn describe(&self) -> String {
        self.store.describe()
    }

    /// Takes the right to change the index (or fails at once naming who has
    /// it) and, on an object store, brings the working copy to the published
    /// version, which the run then starts from.
    pub fn lock_for_writing(&self) -> anyhow::Result<Writer> {
        let lock = crate::staging::lock_for_writing(&self.dir)?;
        let lease = match &self.remote {
            None => None,
            Some(remote) => Some(publish::Lease::acquire(remote, std::time::Duration::from_secs(LEASE_SECONDS))?),
        };
        // A publication a crashed writer left half done is finished first.
        crate::staging::recover(&self.dir)?;
        if let Some(remote) = &self.remote {
            publish::mirror(remote, &self.dir)?;
        }
        Ok(Writer { _lock: lock, lease, output: self.clone() })
    }

    /// The local folder a reader reads the published index from (for an
    /// object store, its copy of the published version, downloaded once;
    /// the copy of the version before is kept, older ones deleted),
    /// with a token that changes with every publication. None when nothing
    /// is published there.
    pub fn published(&self) -> anyhow::Result<Option<(PathBuf, String)>> {
        match &self.remote {
            None => {
                // A publication a crashed writer left half done is finished
                // first (one publishing now finishes it itself).
                crate::staging::recover_if_idle(&self.dir)?;
                Ok(self.dir.is_dir().then(|| (self.dir.clone(), crate::staging::fingerprint(&self.dir))))
            }
            Some(remote) => Ok(publish::fetch(remote, &self.dir.join(READER_COPIES))?
                .map(|(dir, version)| (dir, format!("{}#{version}", remote.url())))),
        }
    }

    /// The current published version, held still to be read whole (see `published.rs`): for a folder without waiting on a writer.
    pub fn open_published(&self) -> anyhow::Result<Published> {
        if self.remote.is_some() {
            return Ok(match self.published()? {
                Some((dir, token)) => Published::Version(PublishedVersion { dir, token, _lock: None }),
                None => Published::Nothing(String::new()),
            });
        }
        let Some(lock) = crate::staging::try_lock_for_writing(&self.dir)? else { return Ok(Published::Busy) };
        crate::staging::recover(&self.dir)?;
        let token = crate::staging::fingerprint(&self.dir);
        if !self.working_copy().has_index() {
            return Ok(Published::Nothing(token));
        }
        Ok(Published::Version(PublishedVersion { dir: self.dir.clone(), token, _lock: Some(lock) }))
    }

    /// The token [`Location::published`] gives, without downloading.
    pub fn published_token(&self) -> anyhow::Result<String> {
        match &self.remote {
            None => Ok(crate::staging::fingerprint(&self.dir)),
            Some(remote) => {
                Ok(publish::manifest(remote)?.map(|m| format!("{}#{}", remote.url(), m.version)).unwrap_or_default())
            }
        }
    }

    /// The location `rel` (a `/`-separated relative path) under this one:
    /// that folder under the local folder, and on an object store the
    /// objects under that prefix.
    pub fn join(&self, rel: &str) -> Location {
        let dir = rel.split('/').filter(|p| !p.is_empty()).fold(self.dir.clone(), |dir, part| dir.join(part));
        Location { dir, remote: self.remote.as_ref().map(|r| r.join(rel)), store: self.store.join(rel) }
    }

    /// The files of the location as every machine reads and writes them
    /// (for a caller that keeps its own layout there: the answer cache).
    pub(crate) fn store(&self) -> std::sync::Arc<dyn Store> {
        self.store.clone()
    }

    /// The file `name` as every machine sees it, or `None` (`Store::get`).
    pub fn read(&self, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        self.store.get(name)
    }

    /// Writes `bytes` as the file `name` for every machine, whole
    /// (`Store::put`; on an object store no local copy is written).
    pub fn put(&self, name: &str, bytes: &[u8]) -> anyhow::Result<()> {
        self.store.put(name, bytes)
    }

    /// [`Location::put`] only if there is no file `name` yet (`Store::create`).
    pub fn create(&self, name: &str, bytes: &[u8]) -> anyhow::Result<bool> {
        self.store.create(name, bytes)
    }

    /// Every file under the location, sorted by path (`Store::list`).
    pub fn list(&self) -> anyhow::Result<Vec<FileEntry>> {
        self.store.list()
    }

    /// Whether the file `name` exists as every machine sees it (`Store::exists`).
    pub fn exists(&self, name: &str) -> anyhow::Result<bool> {
        self.store.exists(name)
    }

    /// The published file `name` (e.g. stats.json) as every machine sees
    /// it: on an object store, from the published version (the manifest and
    /// the file, no local copy), else the folder's.
    pub fn read_published(&self, name: &str) -> anyhow::Result<Option<Vec<u8>>> {
        match &self.remote {
            Some(remote) => Ok(publish::published_file(remote, name)?.map(|b| b.to_vec())),
            None => self.read(name),
        }
    }

    /// Removes the file `name` for every machine, and from an object
    /// store's working copy (nothing when it is not there).
    pub fn remove(&self, name: &str) -> anyhow::Result<()> {
        if self.remote.is_some() {
            remove_file_if_present(&self.dir.join(name))?;
        }
        self.store.delete(name)
    }

    /// Removes everything under the location, an object store's working
    /// copy included.
    pub fn remove_all(&self) -> anyhow::Result<()> {
        if self.remote.is_some() {
            backend::Folder { dir: self.dir.clone() }.delete_all()?;
        }
        self.store.delete_all()
    }

    /// The names of the folders directly under the location, sorted (`Store::folders`).
    pub fn subfolders(&self) -> anyhow::Result<Vec<String>> {
        self.store.folders()
    }

    /// The documents of an input location.
    pub fn files(&self) -> Box<dyn FileSource> {
        match &self.remote {
            None => Box::new(LocalFiles::new(&self.dir)),
            Some(remote) => Box::new(ObjectFiles { remote: remote.clone(), listed: OnceLock::new() }),
        }
    }
}

/// Where a reader's copies of published versions are kept, in the local copy.
const READER_COPIES: &str = ".versions";

/// The documents under an object store prefix.
struct ObjectFiles {
    remote: ObjectLocation,
    /// The first listing, kept: a run lists its input once (the load step's
    /// resume check and the load then see the same files), not once per
    /// look (a LIST per 1,000 documents each).
    listed: OnceLock<Vec<FileEntry>>,
}

impl FileSource for ObjectFiles {
    fn list(&self) -> anyhow::Result<Vec<FileEntry>> {
        if let Some(listed) = self.listed.get() {
            return Ok(listed.clone());
        }
        let listed: Vec<FileEntry> = self
            .remote
            .list("")?
            .into_iter()
            .map(|l| FileEntry { path: l.key, size: l.size, modified: l.modified })
            .collect();
        Ok(self.listed.get_or_init(|| listed).clone())
    }

    fn read(&self, path: &str) -> anyhow::Result<Vec<u8>> {
        match self.remote.get(path)? {
            Some(bytes) => Ok(bytes.to_vec()),
            None => anyhow::bail!("{}/{path} is gone (deleted while the run read the input)", self.remote.url()),
        }
    }

    fn describe(&self) -> String {
        self.remote.url().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store;

    #[test]
    fn locations_follow_the_settings_base_dirs() {
        let mut settings = Settings::default();
        settings.input_storage.base_dir = "docs".into();
        settings.output_storage.base_dir = "/abs/index".into();
        let storage = Storage::open(Path::new("/p"), &settings).unwrap();
        let folder = |location: &Location| match location.backend() {
            Backend::Folder(dir) => dir.to_path_buf(),
            Backend::ObjectStore(_) => panic!("a folder"),
        };
        assert_eq!(folder(&storage.input), Path::new("/p/docs"));
        assert_eq!(folder(&storage.output), Path::new("/abs/index"), "an absolute base_dir is kept");
        assert_eq!(folder(&storage.cache), Path::new("/p/cache"));
        let output = storage.output.working_copy();
        assert_eq!(output.table_path("entities"), Path::new("/abs/index/entities.parquet"));
    }

    /// What [`WorkingCopy::push`], `write`, `put_table`, `pull_table`, and
    /// [`Location::read`], `remove`, `remove_all` and `subfolders` do on
    /// `shared`, seen from `other` (the same place from another machine: the
    /// same folder, or another working copy of the same prefix).
    fn shared_files_behave_alike(shared: &Location, other: &Location) {
        let (a, b) = (shared.join("set/0-of-2"), other.join("set/0-of-2"));
        let (a_copy, b_copy) = (a.working_copy(), b.working_copy());
        assert!(a.read("done.json").unwrap().is_none());
        std::fs::create_dir_all(a_copy.path()).unwrap();
        std::fs::write(a_copy.table_path("units"), b"table").unwrap();
        a_copy.push_table("units").unwrap();
        a_copy.write("done.json", b"{}").unwrap();
        assert_eq!(b.read("done.json").unwrap().as_deref(), Some(&b"{}"[..]));
        let parts = b.store().get_all(&["done.json".into(), "none.json".into()]).unwrap();
        assert_eq!(parts, [Some(bytes::Bytes::from_static(b"{}")), None]);
        assert_eq!(b.store().get_range("done.json", 1..2).unwrap().as_deref(), Some(&b"}"[..]));
        assert_eq!(b.store().get_range("none.json", 0..1).unwrap(), None);
        assert!(b_copy.pull_table("units").unwrap());
        assert_eq!(std::fs::read(b_copy.table_path("units")).unwrap(), b"table");
        assert!(!b_copy.pull_table("none").unwrap());
        let source = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(source.path(), b"staged").unwrap();
        shared.join("set/graph").working_copy().put_table("entities", source.path()).unwrap();
        // Replaced afterwards (as the runner writes: a new file renamed over it), the copy stays.
        store::atomic_write(source.path(), b"changed after").unwrap();
        let graph = other.join("set/graph").working_copy();
        assert!(graph.pull_table("entities").unwrap());
        assert_eq!(std::fs::read(graph.table_path("entities")).unwrap(), b"staged");
        assert_eq!(other.join("set").subfolders().unwrap(), ["0-of-2", "graph"]);
        assert!(other.join("nothing").subfolders().unwrap().is_empty());
        b.remove("done.json").unwrap();
        b.remove("done.json").unwrap();
        assert!(a.read("done.json").unwrap().is_none(), "removed for every machine");
        other.join("set/graph").remove_all().unwrap();
        assert_eq!(shared.join("set").subfolders().unwrap(), ["0-of-2"]);
    }

    #[test]
    fn a_folder_is_shared_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        shared_files_behave_alike(&Location::folder(dir.path()), &Location::folder(dir.path()));
    }

    #[test]
    fn an_object_store_prefix_is_shared_through_its_objects() {
        let Some(moto) = object::testing::moto() else { return };
        let remote = moto.location("shared-files", "p/output");
        let (here, there) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let shared = Location::object(remote.clone(), here.path());
        shared_files_behave_alike(&shared, &Location::object(remote.clone(), there.path()));
        assert!(!there.path().join("set/graph").exists(), "remove_all removes the local copy too");
        let keys: Vec<String> = remote.list("").unwrap().into_iter().map(|l| l.key).collect();
        assert_eq!(keys, ["set/0-of-2/units.parquet"]);
    }

    #[test]
    fn an_object_store_input_is_listed_once_a_run() {
        let Some(moto) = object::testing::moto() else { return };
        let store = std::sync::Arc::new(counting::CountingStore::new(moto.bucket("listed-once")));
        let remote = ObjectLocation::new(store.clone(), "p/input", "s3://listed-once/p/input").unwrap();
        remote.put("a.txt", bytes::Bytes::from_static(b"a")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let input = Location::object(remote.clone(), dir.path());
        let files = input.files();
        let names = |files: &dyn FileSource| files.list().unwrap().into_iter().map(|f| f.path).collect::<Vec<_>>();
        assert_eq!(names(files.as_ref()), ["a.txt"]);
        remote.put("b.txt", bytes::Bytes::from_static(b"b")).unwrap();
        let lists = store.counts().lists;
        assert_eq!(names(files.as_ref()), ["a.txt"], "the run's listing");
        assert_eq!(store.counts().lists, lists, "not listed again");
        assert_eq!(names(input.files().as_ref()), ["a.txt", "b.txt"], "the next run lists again");
    }

    #[test]
    fn tables_are_read_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let out = Location::folder(dir.path());
        let copy = out.working_copy();
        assert!(!out.has_index().unwrap());
        assert!(copy.read_table("documents").unwrap().is_none());
        let t = arrow_array::RecordBatch::try_new(
            crate::schema::documents(arrow_schema::DataType::LargeUtf8),
            vec![
                crate::schema::text_col(["d1"]),
                crate::schema::int_col([0]),
                crate::schema::text_col(["a.txt"]),
                crate::schema::text_col(["text"]),
                crate::schema::id_list_col([Vec::<String>::new()]),
                crate::schema::text_col(["2026"]),
                crate::schema::opt_text_col([None::<String>]),
            ],
        )
        .unwrap();
        store::write_table(&copy.table_path("documents"), &t).unwrap();
        assert!(out.has_index().unwrap());
        assert_eq!(copy.read_table("documents").unwrap().unwrap().num_rows(), 1);
    }
}
