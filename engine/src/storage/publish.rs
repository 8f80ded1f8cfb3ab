//! Publishing an index to an object store, which has no rename: a run's
//! published files are uploaded under a new version prefix (`v-000007/`),
//! then one small manifest object (`manifest.json`) naming that version is
//! written with a conditional put (create for the first, else update from
//! the e-tag read), so a reader, who reads the manifest first, sees one whole
//! version or the one before, never a mix. The previous `keep_previous`
//! versions stay readable for readers that still hold them; older ones are
//! deleted by the publication after them. A reader's local copies keep the
//! version it reads and the one before (a snapshot still open on it), no
//! older one.
//!
//! A publication comes after all of a run's model work, so a storage call
//! of it that fails (a network blip, a store's short outage, past the
//! client's own few retries) is retried with growing waits for a bounded
//! time (`RetryWindow`, each retry a warning), then fails saying so; the
//! manifest is written last, so a publication that fails before it leaves
//! the previous version published, whole. A manifest write whose answer was
//! lost (written, though the writer was not told) is recognized by the
//! manifest read back: it names this publication.
//!
//! One writer at a time holds the lease (`lease.json`, written the same
//! conditional way, with an expiry it renews); a second writer fails naming
//! the holder and when its lease expires. A holder of this machine (same
//! host name and boot) whose process has ended is taken over at once: the
//! lease names the process by pid and start time, as a pid is reused (a
//! container's entrypoint is always PID 1); one on another machine when its
//! lease expires.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::object::{Conditional, ObjectLocation};

const MANIFEST: &str = "manifest.json";
const LEASE: &str = "lease.json";
/// The local copy's note of the version it mirrors.
const MIRRORED: &str = ".published-version";
/// Written last into a reader's copy of a version.
const COMPLETE: &str = ".complete";

/// What `manifest.json` says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Counts publications: 1, 2, …
    pub version: u64,
    /// The published files of the version, with their sizes.
    pub files: BTreeMap<String, u64>,
    /// Unique to the publication that wrote it ("" in manifests from before
    /// it was written): a writer whose conditional put was carried out but
    /// its answer lost finds its own manifest by it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub publication: String,
}

fn version_dir(version: u64) -> String {
    format!("v-{version:06}")
}

fn version_of_dir(name: &str) -> Option<u64> {
    name.strip_prefix("v-")?.parse().ok()
}

/// How long a publication keeps retrying a storage call that fails for a
/// reason that may pass (not a denied access, not another writer): waits
/// doubling from `first_wait` up to `longest_wait`, until `total` has passed
/// since the call first failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryWindow {
    pub total: Duration,
    pub first_wait: Duration,
    pub longest_wait: Duration,
}

impl RetryWindow {
    /// Retries for `total`, the waits from a quarter second up to 8 s.
    pub fn new(total: Duration) -> RetryWindow {
        RetryWindow { total, first_wait: Duration::from_millis(250), longest_wait: Duration::from_secs(8) }
    }

    /// No retry.
    pub(crate) const NONE: RetryWindow =
        RetryWindow { total: Duration::ZERO, first_wait: Duration::ZERO, longest_wait: Duration::ZERO };
}

/// Whether a failed storage call may succeed when tried again: a failure of
/// the store or the way to it (a connection, a timeout, a 5xx answer), not
/// one it will answer the same way (access denied, an invalid key), nor a
/// failure that is not the store's (a file that does not parse).
fn may_pass(err: &anyhow::Error) -> bool {
    use object_store::Error as E;
    err.chain().filter_map(|cause| cause.downcast_ref::<E>()).any(|e| {
        !matches!(
            e,
            E::PermissionDenied { .. }
                | E::Unauthenticated { .. }
                | E::InvalidPath { .. }
                | E::NotSupported { .. }
                | E::NotImplemented { .. }
                | E::UnknownConfigurationKey { .. }
        )
    })
}

/// `call`'s answer, the call retried within `window` while it fails for a
/// reason that may pass (each retry a warning naming `what` failed on
/// `remote` and how long it is still tried).
fn retrying<T>(
    remote: &ObjectLocation,
    window: &RetryWindow,
    what: &str,
    mut call: impl FnMut() -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let mut failing_since = None;
    let mut wait = window.first_wait;
    loop {
        let err = match call() {
            Ok(answer) => return Ok(answer),
            Err(err) => err,
        };
        let since = *failing_since.get_or_insert_with(Instant::now);
        let left = window.total.saturating_sub(since.elapsed());
        if !may_pass(&err) || window.total.is_zero() {
            return Err(err);
        }
        if left.is_zero() {
            return Err(
                err.context(format!("{what} still failed after retrying for {:.0} s", window.total.as_secs_f64()))
            );
        }
        let now = wait.min(left);
        tracing::warn!(
            "publishing to {}: {what} failed ({err:#}); retrying in {:.1} s, and for {:.0} s more before giving up",
            remote.url(),
            now.as_secs_f64(),
            left.as_secs_f64()
        );
        std::thread::sleep(now);
        wait = (wait * 2).min(window.longest_wait);
    }
}

/// The published manifest of `remote`, if any.
pub fn manifest(remote: &ObjectLocation) -> anyhow::Result<Option<Manifest>> {
    let Some(bytes) = remote.get(MANIFEST)? else { return Ok(None) };
    let m = serde_json::from_slice(&bytes).with_context(|| format!("{}/{MANIFEST} is not a manifest", remote.url()))?;
    Ok(Some(m))
}

/// The file `name` of the published version of `remote` (two GETs: the
/// manifest, the file), without a local copy; None when nothing is
/// published or the version has no such file.
pub(crate) fn published_file(remote: &ObjectLocation, name: &str) -> anyhow::Result<Option<Bytes>> {
    let Some(m) = manifest(remote)? else { return Ok(None) };
    if !m.files.contains_key(name) {
        return Ok(None);
    }
    remote.get(&format!("{}/{name}", version_dir(m.version)))
}

/// The files a run publishes from its local output folder: the top-level
/// files (tables, stats.json, document status), not its hidden work
/// (`.steps`, `.update`, the lock) nor folders (a LanceDB export).
fn published_files(dir: &Path) -> anyhow::Result<Vec<(String, PathBuf, u64)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = entry.metadata()?;
        if name.starts_with('.') || !meta.is_file() || crate::store::is_temp_file(&name) {
            continue;
        }
        files.push((name, entry.path(), meta.len()));
    }
    files.sort();
    Ok(files)
}

/// Unique to one publication (or taking of a lease), even within one
/// process and second: host, process, time and a count.
fn unique_name() -> String {
    static TAKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = TAKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}:{}:{}:{n}", host_name(), std::process::id(), now_secs())
}

/// Publishes the published files of the local folder `dir` as the next
/// version of `remote`, then deletes the versions older than the
/// `keep_previous` before it. A storage call that fails is retried within
/// `window`. Returns the new version.
pub(crate) fn publish(
    dir: &Path,
    remote: &ObjectLocation,
    keep_previous: u64,
    window: &RetryWindow,
) -> anyhow::Result<u64> {
    let current = retrying(remote, window, "reading the manifest", || remote.get_versioned(MANIFEST))
        .with_context(|| format!("publishing to {}: nothing was published", remote.url()))?;
    let previous: Option<Manifest> = current
        .as_ref()
        .map(|c| serde_json::from_slice(&c.bytes))
        .transpose()
        .with_context(|| format!("{}/{MANIFEST} is not a manifest", remote.url()))?;
    let version = previous.as_ref().map_or(1, |m| m.version + 1);
    let nothing_published = || {
        let readers_see = previous.as_ref().map_or("nothing".to_string(), |m| format!("version {}", m.version));
        format!(
            "publishing version {version} to {}: nothing was published (readers still see {readers_see})",
            remote.url()
        )
    };
    let target = remote.join(&version_dir(version));
    let mut files = BTreeMap::new();
    for (name, path, size) in published_files(dir)? {
        let bytes = Bytes::from(std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?);
        retrying(remote, window, &format!("uploading {name}"), || target.put(&name, bytes.clone()))
            .with_context(nothing_published)?;
        files.insert(name, size);
    }
    let ours = Manifest { version, files, publication: unique_name() };
    let bytes = Bytes::from(serde_json::to_vec_pretty(&ours)?);
    let expected = current.map(|c| c.version);
    // Any failed try may have been carried out with its answer lost; the
    // try after it then loses to it, and the store's client may retry on
    // its own too: a lost conditional put reads the manifest back.
    let mut uncertain = false;
    let written = retrying(remote, window, "writing the manifest", || {
        let tried = remote.put_if(MANIFEST, bytes.clone(), expected.clone());
        uncertain |= tried.is_err();
        match tried? {
            Conditional::Written => Ok(true),
            Conditional::Lost => Ok(manifest(remote)?.as_ref() == Some(&ours)),
        }
    });
    match written {
        Ok(true) => {}
        Ok(false) => bail!(
            "another writer published {} while this run was publishing (version {version} not published): run again",
            remote.url()
        ),
        Err(e) if uncertain => {
            return Err(e).with_context(|| {
                format!(
                    "publishing version {version} to {}: the manifest's write was not confirmed, so readers see version {version} or still the one before: run again",
                    remote.url()
                )
            })
        }
        Err(e) => return Err(e).with_context(nothing_published),
    }
    note_mirrored(dir, remote, version)?;
    // The version is published: old versions left by a failure here are
    // deleted by the next publication, which lists them all again.
    if let Err(e) = delete_old_versions(remote, version.saturating_sub(keep_previous), window) {
        tracing::warn!("deleting old versions of {} (the next publication tries again): {e:#}", remote.url());
    }
    Ok(version)
}

/// Deletes the versions of `remote` before `oldest_kept`.
fn delete_old_versions(remote: &ObjectLocation, oldest_kept: u64, window: &RetryWindow) -> anyhow::Result<()> {
    let mut stale = std::collections::BTreeSet::new();
    for listed in retrying(remote, window, "listing old versions", || remote.list(""))? {
        if let Some(v) = listed.key.split('/').next().and_then(version_of_dir).filter(|v| *v < oldest_kept) {
            stale.insert(v);
            retrying(remote, window, "deleting an old version", || remote.delete(&listed.key))?;
        }
    }
    if !stale.is_empty() {
        tracing::info!("deleted {} old version(s) of {}", stale.len(), remote.url());
    }
    Ok(())
}

/// Makes the local folder `dir` mirror the published version of `remote`
/// (a writer's working copy, before a run): its published files are
/// replaced by the version's when it mirrors another one. Returns the
/// version mirrored (None: nothing is published).
pub(crate) fn mirror(remote: &ObjectLocation, dir: &Path) -> anyhow::Result<Option<u64>> {
    let Some(m) = manifest(remote)? else { return Ok(None) };
    if std::fs::read_to_string(dir.join(MIRRORED)).ok() == Some(mirror_note(remote, m.version)) {
        return Ok(Some(m.version));
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (_, path, _) in published_files(dir)? {
        std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
    }
    download_version(remote, &m, dir)?;
    note_mirrored(dir, remote, m.version)?;
    Ok(Some(m.version))
}

/// What a working copy notes of the version it mirrors: location and
/// version (a folder once used for another bucket mirrors nothing of this one).
fn mirror_note(remote: &ObjectLocation, version: u64) -> String {
    format!("{}#{version}", remote.url())
}

fn note_mirrored(dir: &Path, remote: &ObjectLocation, version: u64) -> anyhow::Result<()> {
    Ok(crate::store::atomic_write(&dir.join(MIRRORED), mirror_note(remote, version).as_bytes())?)
}

fn download_version(remote: &ObjectLocation, m: &Manifest, dir: &Path) -> anyhow::Result<()> {
    let source = remote.join(&version_dir(m.version));
    for name in m.files.keys() {
        if !source.download(name, &dir.join(name))? {
            bail!("{}/{name} is missing: version {} is incomplete", source.url(), m.version);
        }
    }
    Ok(())
}

/// A reader's local copy of the published version of `remote`, under
/// `copies` (one folder per version, downloaded once; the folder of the
/// version before stays for a snapshot still reading it, older ones are
/// deleted once a new one is complete): its folder and version, or None
/// when nothing is published.
pub fn fetch(remote: &ObjectLocation, copies: &Path) -> anyhow::Result<Option<(PathBuf, u64)>> {
    let Some(m) = manifest(remote)? else { return Ok(None) };
    let dir = copies.join(version_dir(m.version));
    if !dir.join(COMPLETE).exists() {
        download_version(remote, &m, &dir)?;
        // Another reader of the same copies that fetched a later version
        // may have deleted this folder while its files came: a copy is
        // marked complete only with every file there, at its size.
        for (name, size) in &m.files {
            let there = std::fs::metadata(dir.join(name)).map(|meta| meta.len()).ok();
            if there != Some(*size) {
                bail!(
                    "the copy of version {} of {} lost {name} while downloading: fetch again",
                    m.version,
                    remote.url()
                );
            }
        }
        crate::store::atomic_write(&dir.join(COMPLETE), b"")?;
        remove_old_copies(copies, m.version);
    }
    Ok(Some((dir, m.version)))
}

/// Deletes the version folders under `copies` older than the newest complete
/// one before `current` (failures are warnings: the next version tries again).
/// Later ones stay: another reader of the same copies may be downloading one.
fn remove_old_copies(copies: &Path, current: u64) {
    let versions: Vec<(u64, PathBuf)> = match std::fs::read_dir(copies) {
        Ok(entries) => entries
            .filter_map(|entry| {
                let entry = entry.ok()?;
                let version = version_of_dir(&entry.file_name().to_string_lossy())?;
                entry.file_type().ok()?.is_dir().then(|| (version, entry.path()))
            })
            .collect(),
        Err(e) => {
            tracing::warn!("listing the version copies in {}: {e}", copies.display());
            return;
        }
    };
    let previous =
        versions.iter().filter(|(v, dir)| *v < current && dir.join(COMPLETE).exists()).map(|(v, _)| *v).max();
    for (version, dir) in versions {
        if version < current && Some(version) != previous {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!("deleting the old version copy {}: {e}", dir.display());
            }
        }
    }
}

/// Who holds a lease, and until when (seconds since the epoch). The
/// fields after `pid` are absent from leases written before them.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LeaseBody {
    holder: String,
    host: String,
    pid: u32,
    /// The kernel's id of the boot the holder runs in: with the host name,
    /// whether the holder's pid can be looked up here.
    #[serde(default)]
    boot_id: String,
    /// When the holder's process started, in clock ticks since boot (field
    /// 22 of `/proc/<pid>/stat`): a later process with the same pid (a
    /// container's entrypoint is always PID 1) started at another time.
    #[serde(default)]
    started: u64,
    /// When the lease was taken (seconds since the epoch).
    #[serde(default)]
    taken: u64,
    expires: u64,
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default()
}

/// The id the kernel draws at each boot ("" where there is none to read):
/// the same in every container of one machine, another after a reboot.
fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|id| id.trim().to_string()).unwrap_or_default()
}

/// When a process started, in clock ticks since boot, from its
/// `/proc/<pid>/stat`: field 22, counted after the command name, which is
/// in parentheses and may hold spaces and parentheses itself.
fn start_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Fields from the third (the state) on.
    after_name.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// This process's start, as [`start_ticks`] reads it (0 where unknown).
fn own_start_ticks() -> u64 {
    std::fs::read_to_string("/proc/self/stat").ok().as_deref().and_then(start_ticks).unwrap_or(0)
}

impl LeaseBody {
    /// A holder that no longer holds: expired, or one whose process has ended.
    fn is_stale(&self) -> bool {
        self.expires <= now_secs() || self.holder_ended()
    }

    /// Whether the holder is a process of this machine that has ended (it
    /// was killed): no process has its pid, or the one that has it started
    /// at another time. A lease from before boot ids were recorded is
    /// judged by its host name and pid alone.
    fn holder_ended(&self) -> bool {
        if self.host.is_empty() || self.host != host_name() {
            return false;
        }
        let this_boot = boot_id();
        if self.boot_id.is_empty() {
            return !this_boot.is_empty() && !Path::new(&format!("/proc/{}", self.pid)).exists();
        }
        if self.boot_id != this_boot {
            return false;
        }
        match std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) {
            Err(e) => e.kind() == std::io::ErrorKind::NotFound,
            Ok(stat) => self.started != 0 && start_ticks(&stat).is_some_and(|started| started != self.started),
        }
    }

    /// Who holds it, for messages: process, host, and since when.
    fn describe(&self) -> String {
        let since = chrono::DateTime::from_timestamp(self.taken as i64, 0)
            .filter(|_| self.taken != 0)
            .map(|t| format!(" (since {})", t.format("%Y-%m-%d %H:%M:%S UTC")))
            .unwrap_or_default();
        format!("process {} on {}{since}", self.pid, self.host)
    }
}

/// The right to publish to a location, renewed while held and given back
/// on drop.
pub(crate) struct Lease {
    remote: ObjectLocation,
    holder: String,
    stop: Arc<(Mutex<bool>, Condvar)>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

impl Lease {
    /// Takes the lease of `remote` for `ttl` (renewed every third of it),
    /// or fails naming its holder.
    pub(crate) fn acquire(remote: &ObjectLocation, ttl: Duration) -> anyhow::Result<Lease> {
        let holder = unique_name();
        let taken = now_secs();
        write_lease(remote, &holder, taken, ttl, true)?;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let renewer = {
            let (remote, holder, stop) = (remote.clone(), holder.clone(), stop.clone());
            std::thread::spawn(move || {
                let (lock, wake) = &*stop;
                let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
                while !*stopped {
                    stopped = wake.wait_timeout(stopped, ttl / 3).unwrap_or_else(|e| e.into_inner()).0;
                    if !*stopped {
                        // A failed renewal is tried again a third of the
                        // lease later: two may fail before it expires.
                        if let Err(e) = write_lease(&remote, &holder, taken, ttl, false) {
                            tracing::warn!("renewing the writer lease of {}: {e:#}", remote.url());
                        }
                    }
                }
            })
        };
        Ok(Lease { remote: remote.clone(), holder, stop, renewer: Some(renewer) })
    }

    /// Fails unless this lease is still the one in the store (checked
    /// before publishing), its reading retried within `window`.
    pub fn check(&self, window: &RetryWindow) -> anyhow::Result<()> {
        let held = retrying(&self.remote, window, "reading the writer lease", || read_lease(&self.remote))
            .with_context(|| format!("checking the writer lease of {}: nothing published", self.remote.url()))?
            .map(|(body, _)| body);
        if held.as_ref().map(|body| body.holder.as_str()) != Some(self.holder.as_str()) {
            let now = held.map_or("by nobody".to_string(), |body| format!("by {}", body.describe()));
            bail!("the writer lease of {} was lost (held now {now}): nothing published", self.remote.url());
        }
        Ok(())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let (lock, wake) = &*self.stop;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        wake.notify_all();
        if let Some(renewer) = self.renewer.take() {
            let _ = renewer.join();
        }
        if self.check(&RetryWindow::NONE).is_ok() {
            if let Err(e) = self.remote.delete(LEASE) {
                tracing::warn!("giving back the writer lease of {}: {e:#}", self.remote.url());
            }
        }
    }
}

fn read_lease(remote: &ObjectLocation) -> anyhow::Result<Option<(LeaseBody, object_store::UpdateVersion)>> {
    let Some(current) = remote.get_versioned(LEASE)? else { return Ok(None) };
    let body =
        serde_json::from_slice(&current.bytes).with_context(|| format!("{}/{LEASE} is not a lease", remote.url()))?;
    Ok(Some((body, current.version)))
}

/// Writes the lease for `holder` (taken at `taken`), expiring `ttl` from
/// now: taking it (`take`: only if free or stale) or renewing it (only if
/// still `holder`'s).
fn write_lease(remote: &ObjectLocation, holder: &str, taken: u64, ttl: Duration, take: bool) -> anyhow::Result<()> {
    let current = read_lease(remote)?;
    if let Some((body, _)) = &current {
        let ours = body.holder == holder;
        if !(ours || take && body.is_stale()) {
            let left = body.expires.saturating_sub(now_secs());
            bail!(
                "the writer lease of {} is held by {}; it expires in {left} s unless renewed (its holder, a `graphrag-rs index` or `update`, renews it while it runs): try again then",
                remote.url(),
                body.describe()
            );
        }
    }
    let body = LeaseBody {
        holder: holder.to_string(),
        host: host_name(),
        pid: std::process::id(),
        boot_id: boot_id(),
        started: own_start_ticks(),
        taken,
        expires: now_secs() + ttl.as_secs().max(1),
    };
    match remote.put_if(LEASE, Bytes::from(serde_json::to_vec(&body)?), current.map(|(_, v)| v))? {
        Conditional::Written => Ok(()),
        Conditional::Lost => {
            bail!("another writer took the writer lease of {} first: wait until it ends", remote.url())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::object::testing::{every_store, moto, OutageProxy};
    use super::*;

    /// A window short enough for a test: retries for `secs`.
    fn window(secs: f64) -> RetryWindow {
        RetryWindow {
            total: Duration::from_secs_f64(secs),
            first_wait: Duration::from_millis(100),
            longest_wait: Duration::from_millis(500),
        }
    }

    #[test]
    fn versions_are_published_whole_and_old_ones_deleted() {
        let Some(moto) = moto() else { return };
        let remote = moto.location("publish", "p/output");
        let work = tempfile::tempdir().unwrap();
        let readers = tempfile::tempdir().unwrap();
        let window = window(5.0);
        assert!(fetch(&remote, readers.path()).unwrap().is_none());
        assert_eq!(mirror(&remote, work.path()).unwrap(), None);
        std::fs::write(work.path().join("entities.parquet"), b"e1").unwrap();
        std::fs::create_dir(work.path().join(".steps")).unwrap();
        std::fs::write(work.path().join(".steps/x.parquet"), b"private").unwrap();
        assert_eq!(publish(work.path(), &remote, 1, &window).unwrap(), 1);
        let (dir, v) = fetch(&remote, readers.path()).unwrap().unwrap();
        assert_eq!((std::fs::read(dir.join("entities.parquet")).unwrap(), v), (b"e1".to_vec(), 1));
        assert!(!dir.join(".steps").exists(), "hidden work is not published");
        std::fs::write(work.path().join("entities.parquet"), b"e2").unwrap();
        assert_eq!(publish(work.path(), &remote, 1, &window).unwrap(), 2);
        assert_eq!(std::fs::read(dir.join("entities.parquet")).unwrap(), b"e1", "a reader's version stays whole");
        assert_eq!(publish(work.path(), &remote, 1, &window).unwrap(), 3);
        let versions: std::collections::BTreeSet<String> = remote
            .list("")
            .unwrap()
            .into_iter()
            .filter_map(|l| l.key.split_once('/').map(|k| k.0.to_string()))
            .collect();
        assert_eq!(versions.into_iter().collect::<Vec<_>>(), ["v-000002", "v-000003"], "one previous version kept");
        // A working copy elsewhere mirrors the latest version.
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("stale.parquet"), b"old").unwrap();
        assert_eq!(mirror(&remote, other.path()).unwrap(), Some(3));
        assert!(!other.path().join("stale.parquet").exists());
        assert_eq!(std::fs::read(other.path().join("entities.parquet")).unwrap(), b"e2");
    }

    /// The version folders under a reader's `copies`.
    fn copies_of(copies: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(copies)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("v-"))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_reader_keeps_the_current_and_the_previous_version_only() {
        let Some(moto) = moto() else { return };
        let remote = moto.location("reader-copies", "p/output");
        let (work, readers) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for n in 1..=4u64 {
            std::fs::write(work.path().join("entities.parquet"), format!("e{n}")).unwrap();
            std::fs::write(work.path().join("stats.json"), format!("{{\"n\": {n}}}")).unwrap();
            assert_eq!(publish(work.path(), &remote, 3, &window(5.0)).unwrap(), n);
            let (dir, version) = fetch(&remote, readers.path()).unwrap().unwrap();
            assert_eq!(version, n);
            assert_eq!(std::fs::read(dir.join("entities.parquet")).unwrap(), format!("e{n}").as_bytes());
            assert!(dir.join("stats.json").is_file() && dir.join(COMPLETE).is_file(), "the current copy is whole");
            let expected: Vec<String> = (n.saturating_sub(1).max(1)..=n).map(version_dir).collect();
            assert_eq!(copies_of(readers.path()), expected, "after fetching version {n}");
        }
        // The previous copy (a snapshot may still read it) is whole too.
        assert_eq!(std::fs::read(readers.path().join("v-000003/entities.parquet")).unwrap(), b"e3");
    }

    #[test]
    fn one_writer_holds_the_lease() {
        let Some(moto) = moto() else { return };
        let remote = moto.location("lease", "p/output");
        let lease = Lease::acquire(&remote, Duration::from_secs(60)).unwrap();
        lease.check(&RetryWindow::NONE).unwrap();
        let err = Lease::acquire(&remote, Duration::from_secs(60)).err().unwrap().to_string();
        let me = format!("held by process {} on {}", std::process::id(), host_name());
        assert!(err.contains("the writer lease of s3://lease/p/output") && err.contains(&me), "{err}");
        drop(lease);
        let again = Lease::acquire(&remote, Duration::from_secs(60)).unwrap();
        // A holder of this machine whose process is gone is taken over.
        let dead = serde_json::json!({
            "holder": "h:1:0", "host": host_name(), "pid": u32::MAX, "boot_id": boot_id(), "started": 1,
            "expires": now_secs() + 600,
        });
        remote.put(LEASE, Bytes::from(dead.to_string())).unwrap();
        assert!(again.check(&RetryWindow::NONE).is_err(), "a lease overwritten is lost");
        drop(again);
        Lease::acquire(&remote, Duration::from_secs(60)).unwrap();
    }

    /// Takes the lease over from `body` (written as `lease.json`), or the error.
    fn take_over(remote: &ObjectLocation, body: serde_json::Value) -> Result<Lease, String> {
        remote.put(LEASE, Bytes::from(body.to_string())).unwrap();
        Lease::acquire(remote, Duration::from_secs(60)).map_err(|e| format!("{e:#}"))
    }

    #[test]
    fn a_holder_whose_pid_now_names_another_process_is_taken_over_at_once() {
        let Some(moto) = moto() else { return };
        let remote = moto.location("lease-pid-reused", "p/output");
        let started = own_start_ticks();
        assert_ne!(started, 0, "this process's start time is read");
        // A container's entrypoint killed: PID 1 of a new container (here
        // this machine's PID 1, or this very process) runs, started later.
        for pid in [1, std::process::id()] {
            let body = serde_json::json!({
                "holder": format!("h:{pid}:0"), "host": host_name(), "pid": pid, "boot_id": boot_id(),
                "started": started + 12_345, "taken": now_secs() - 5, "expires": now_secs() + 600,
            });
            let lease = take_over(&remote, body).unwrap_or_else(|e| panic!("pid {pid}: {e}"));
            drop(lease);
        }
        // The same process, started when it did, still holds it.
        let body = serde_json::json!({
            "holder": "h:self:0", "host": host_name(), "pid": std::process::id(), "boot_id": boot_id(),
            "started": started, "expires": now_secs() + 600,
        });
        let err = take_over(&remote, body).err().unwrap();
        assert!(err.contains(&format!("held by process {} on", std::process::id())), "{err}");
        // A lease from before the start time and boot were recorded: judged
        // by host and pid, as then.
        let old =
            serde_json::json!({"holder": "h:1:0", "host": host_name(), "pid": u32::MAX, "expires": now_secs() + 600});
        drop(take_over(&remote, old).unwrap());
        let old = serde_json::json!({"holder": "h:1:0", "host": host_name(), "pid": 1, "expires": now_secs() + 600});
        assert!(take_over(&remote, old).is_err(), "a live pid of an old lease still holds");
    }

    #[test]
    fn a_lease_of_another_machine_is_refused_until_it_expires_on_every_store() {
        for store in every_store() {
            let remote = store.location("lease-other-host", "p/output");
            // Same host name and pid as this process, but another boot (a
            // machine rebooted, or one of the same name): not looked up here.
            for (host, boot) in [("other-host".to_string(), boot_id()), (host_name(), "another-boot".to_string())] {
                let body = serde_json::json!({
                    "holder": "o:7:0", "host": host, "pid": 7, "boot_id": boot, "started": 99,
                    "taken": 1_700_000_000, "expires": now_secs() + 25,
                });
                let err = take_over(&remote, body).err().unwrap();
                let held = format!("held by process 7 on {host} (since 2023-11-14 22:13:20 UTC)");
                assert!(err.contains(&held), "{:?}: {err}", store.kind);
                assert!(
                    err.contains("it expires in 2") && err.contains(" s unless renewed"),
                    "{:?}: {err}",
                    store.kind
                );
                assert!(!err.contains("is writing"), "{err}");
            }
            let expired = serde_json::json!({
                "holder": "o:7:0", "host": "other-host", "pid": 7, "boot_id": "x", "started": 99, "expires": now_secs() - 1,
            });
            let lease = take_over(&remote, expired).unwrap_or_else(|e| panic!("{:?}: {e}", store.kind));
            lease.check(&RetryWindow::NONE).unwrap();
            // Held now: the next writer is refused, and proceeds once it is dropped.
            assert!(Lease::acquire(&remote, Duration::from_secs(60)).is_err(), "{:?}", store.kind);
            drop(lease);
            drop(Lease::acquire(&remote, Duration::from_secs(60)).unwrap());
        }
    }

    #[test]
    fn start_ticks_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 10000 300";
        assert_eq!(start_ticks(stat), Some(987654));
        assert_eq!(start_ticks("garbage"), None);
    }

    /// A file each of `names` in `dir`, its contents its name and `n`.
    fn write_files(dir: &Path, names: &[&str], n: u64) {
        for name in names {
            std::fs::write(dir.join(name), format!("{name} {n}")).unwrap();
        }
    }

    /// Whether `copy` holds version `n` of the files `names` whole.
    fn assert_whole(copy: &Path, names: &[&str], n: u64) {
        for name in names {
            assert_eq!(std::fs::read_to_string(copy.join(name)).unwrap(), format!("{name} {n}"), "{name}");
        }
    }

    /// What `work` answers, and the warnings it logged on this thread. (Each
    /// test that logs a retry captures it so: a callsite first reached on a
    /// thread without a subscriber may stay off for the other threads.)
    fn warnings_of<T>(work: impl FnOnce() -> T) -> (T, String) {
        #[derive(Clone, Default)]
        struct Captured(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Captured {
            fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(bytes);
                Ok(bytes.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let captured = Captured::default();
        let console = tracing_subscriber::fmt()
            .with_writer({
                let captured = captured.clone();
                move || captured.clone()
            })
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .finish();
        let answer = tracing::subscriber::with_default(console, work);
        let warned = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        (answer, warned)
    }

    #[test]
    fn a_publication_rides_out_a_storage_outage_on_every_store() {
        for store in every_store() {
            let direct = store.location("outage", "p/output");
            let proxy = OutageProxy::start(store.server.port);
            let remote = store.location_through(&proxy, "outage", "p/output");
            let (work, readers) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
            let names = ["documents.parquet", "entities.parquet", "stats.json"];
            write_files(work.path(), &names, 1);
            assert_eq!(publish(work.path(), &remote, 1, &window(20.0)).unwrap(), 1);
            // The store goes away at the second upload, before it arrives.
            write_files(work.path(), &names, 2);
            let upload = store.upload_line("outage", "p/output/v-000002/entities.parquet");
            proxy.fail_at(&upload, false, Duration::from_millis(1500));
            let (published, warned) = warnings_of(|| publish(work.path(), &remote, 1, &window(20.0)));
            assert_eq!(published.unwrap_or_else(|e| panic!("{:?}: {e:#}", store.kind)), 2);
            assert_eq!(proxy.outages(), 1, "{:?}", store.kind);
            let failed = format!("publishing to {}: uploading entities.parquet failed", remote.url());
            assert!(
                warned.contains(&failed) && warned.contains("s more before giving up"),
                "each retry is a warning saying what failed and for how long it is retried: {warned}"
            );
            let (copy, version) = fetch(&direct, readers.path()).unwrap().unwrap();
            assert_eq!(version, 2);
            assert_whole(&copy, &names, 2);
            // The manifest's write is carried out but its answer lost (then the
            // store is away a while): the retry finds its own manifest.
            write_files(work.path(), &names, 3);
            proxy.fail_at(&store.upload_line("outage", "p/output/manifest.json"), true, Duration::from_millis(1500));
            assert_eq!(publish(work.path(), &remote, 1, &window(20.0)).unwrap(), 3, "{:?}", store.kind);
            assert_eq!(proxy.outages(), 2, "{:?}", store.kind);
            let (copy, version) = fetch(&direct, readers.path()).unwrap().unwrap();
            assert_eq!(version, 3);
            assert_whole(&copy, &names, 3);
        }
    }

    #[test]
    fn a_publication_gives_up_after_its_retry_window_with_nothing_published() {
        let Some(moto) = moto() else { return };
        let direct = moto.location("long-outage", "p/output");
        let proxy = OutageProxy::start(moto.port);
        let remote = moto.location_through(&proxy, "long-outage", "p/output");
        let work = tempfile::tempdir().unwrap();
        let names = ["documents.parquet", "entities.parquet"];
        write_files(work.path(), &names, 1);
        assert_eq!(publish(work.path(), &remote, 1, &window(1.0)).unwrap(), 1);
        write_files(work.path(), &names, 2);
        proxy.fail_at("PUT /long-outage/p/output/v-000002/entities.parquet", false, Duration::from_secs(30));
        let started = Instant::now();
        let (published, warned) = warnings_of(|| publish(work.path(), &remote, 1, &window(1.5)));
        let err = format!("{:#}", published.unwrap_err());
        assert!(warned.contains("uploading entities.parquet failed"), "{warned}");
        assert!(started.elapsed() < Duration::from_secs(10), "gave up after {:?}", started.elapsed());
        assert!(err.contains("s3://long-outage/p/output") && err.contains("nothing was published"), "{err}");
        assert!(err.contains("still failed after retrying"), "{err}");
        assert_eq!(manifest(&direct).unwrap().unwrap().version, 1, "readers still see version 1");
    }
}
