//! Publishing an index to an object store, which has no rename: a run's
//! published files are uploaded under a new version prefix (`v-000007/`),
//! then one small manifest object (`manifest.json`) naming that version is
//! written with a conditional put (create for the first, else update from
//! the e-tag read), so a reader, who reads the manifest first, sees one whole
//! version or the one before, never a mix. The previous `keep_previous`
//! versions stay readable for readers that still hold them; older ones are
//! deleted by the publication after them.
//!
//! One writer at a time holds the lease (`lease.json`, written the same
//! conditional way, with an expiry it renews); a second writer fails with
//! who holds it. A holder killed on this machine (its process is gone) is
//! taken over at once; one on another machine when its lease expires.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
}

fn version_dir(version: u64) -> String {
    format!("v-{version:06}")
}

fn version_of_dir(name: &str) -> Option<u64> {
    name.strip_prefix("v-")?.parse().ok()
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
pub fn published_file(remote: &ObjectLocation, name: &str) -> anyhow::Result<Option<Bytes>> {
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

/// Publishes the published files of the local folder `dir` as the next
/// version of `remote`, then deletes the versions older than the
/// `keep_previous` before it. Returns the new version.
pub fn publish(dir: &Path, remote: &ObjectLocation, keep_previous: u64) -> anyhow::Result<u64> {
    let current = remote.get_versioned(MANIFEST)?;
    let previous: Option<Manifest> = current
        .as_ref()
        .map(|c| serde_json::from_slice(&c.bytes))
        .transpose()
        .with_context(|| format!("{}/{MANIFEST} is not a manifest", remote.url()))?;
    let version = previous.as_ref().map_or(1, |m| m.version + 1);
    let target = remote.join(&version_dir(version));
    let mut files = BTreeMap::new();
    for (name, path, size) in published_files(dir)? {
        target.upload(&path, &name)?;
        files.insert(name, size);
    }
    let manifest = Manifest { version, files };
    let bytes = Bytes::from(serde_json::to_vec_pretty(&manifest)?);
    if let Conditional::Lost = remote.put_if(MANIFEST, bytes, current.map(|c| c.version))? {
        bail!(
            "another writer published {} while this run was publishing (version {version} not published): run again",
            remote.url()
        );
    }
    note_mirrored(dir, remote, version)?;
    let oldest_kept = version.saturating_sub(keep_previous);
    let mut stale = std::collections::BTreeSet::new();
    for listed in remote.list("")? {
        if let Some(v) = listed.key.split('/').next().and_then(version_of_dir).filter(|v| *v < oldest_kept) {
            stale.insert(v);
            remote.delete(&listed.key)?;
        }
    }
    if !stale.is_empty() {
        tracing::info!("deleted {} old version(s) of {}", stale.len(), remote.url());
    }
    Ok(version)
}

/// Makes the local folder `dir` mirror the published version of `remote`
/// (a writer's working copy, before a run): its published files are
/// replaced by the version's when it mirrors another one. Returns the
/// version mirrored (None: nothing is published).
pub fn mirror(remote: &ObjectLocation, dir: &Path) -> anyhow::Result<Option<u64>> {
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
/// `copies` (one folder per version, downloaded once): its folder and
/// version, or None when nothing is published.
pub fn fetch(remote: &ObjectLocation, copies: &Path) -> anyhow::Result<Option<(PathBuf, u64)>> {
    let Some(m) = manifest(remote)? else { return Ok(None) };
    let dir = copies.join(version_dir(m.version));
    if !dir.join(COMPLETE).exists() {
        download_version(remote, &m, &dir)?;
        crate::store::atomic_write(&dir.join(COMPLETE), b"")?;
    }
    Ok(Some((dir, m.version)))
}

/// Who holds a lease, and until when (seconds since the epoch).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LeaseBody {
    holder: String,
    host: String,
    pid: u32,
    expires: u64,
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default()
}

impl LeaseBody {
    /// A holder that no longer holds: expired, or a process of this machine
    /// that has ended (killed).
    fn is_stale(&self) -> bool {
        self.expires <= now_secs() || (self.host == host_name() && !Path::new(&format!("/proc/{}", self.pid)).exists())
    }
}

/// The right to publish to a location, renewed while held and given back
/// on drop.
pub struct Lease {
    remote: ObjectLocation,
    holder: String,
    stop: Arc<(Mutex<bool>, Condvar)>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

impl Lease {
    /// Takes the lease of `remote` for `ttl` (renewed every third of it),
    /// or fails naming its holder.
    pub fn acquire(remote: &ObjectLocation, ttl: Duration) -> anyhow::Result<Lease> {
        // Unique to this taking of the lease, even within one process and second.
        static TAKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = TAKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let holder = format!("{}:{}:{}:{n}", host_name(), std::process::id(), now_secs());
        write_lease(remote, &holder, ttl, true)?;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let renewer = {
            let (remote, holder, stop) = (remote.clone(), holder.clone(), stop.clone());
            std::thread::spawn(move || {
                let (lock, wake) = &*stop;
                let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
                while !*stopped {
                    stopped = wake.wait_timeout(stopped, ttl / 3).unwrap_or_else(|e| e.into_inner()).0;
                    if !*stopped {
                        if let Err(e) = write_lease(&remote, &holder, ttl, false) {
                            tracing::warn!("renewing the writer lease of {}: {e:#}", remote.url());
                        }
                    }
                }
            })
        };
        Ok(Lease { remote: remote.clone(), holder, stop, renewer: Some(renewer) })
    }

    /// Fails unless this lease is still the one in the store (checked
    /// before publishing).
    pub fn check(&self) -> anyhow::Result<()> {
        let held = read_lease(&self.remote)?.map(|(body, _)| body.holder);
        if held.as_deref() != Some(self.holder.as_str()) {
            bail!("the writer lease of {} was lost (held now by {held:?}): nothing published", self.remote.url());
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
        if self.check().is_ok() {
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

/// Writes the lease for `holder`: taking it (`take`: only if free or stale)
/// or renewing it (only if still `holder`'s).
fn write_lease(remote: &ObjectLocation, holder: &str, ttl: Duration, take: bool) -> anyhow::Result<()> {
    let current = read_lease(remote)?;
    if let Some((body, _)) = &current {
        let ours = body.holder == holder;
        if !(ours || take && body.is_stale()) {
            let left = body.expires.saturating_sub(now_secs());
            bail!(
                "another `graphrag-rs index` or `update` ({}, process {} on {}) is writing {}: wait until it ends (its lease expires in {left} s unless renewed)",
                body.holder,
                body.pid,
                body.host,
                remote.url()
            );
        }
    }
    let body = LeaseBody {
        holder: holder.to_string(),
        host: host_name(),
        pid: std::process::id(),
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
    use super::super::object::testing::moto;
    use super::*;

    #[test]
    fn versions_are_published_whole_and_old_ones_deleted() {
        let Some(moto) = moto() else { return };
        let remote = moto.location("publish", "p/output");
        let work = tempfile::tempdir().unwrap();
        let readers = tempfile::tempdir().unwrap();
        assert!(fetch(&remote, readers.path()).unwrap().is_none());
        assert_eq!(mirror(&remote, work.path()).unwrap(), None);
        std::fs::write(work.path().join("entities.parquet"), b"e1").unwrap();
        std::fs::create_dir(work.path().join(".steps")).unwrap();
        std::fs::write(work.path().join(".steps/x.parquet"), b"private").unwrap();
        assert_eq!(publish(work.path(), &remote, 1).unwrap(), 1);
        let (dir, v) = fetch(&remote, readers.path()).unwrap().unwrap();
        assert_eq!((std::fs::read(dir.join("entities.parquet")).unwrap(), v), (b"e1".to_vec(), 1));
        assert!(!dir.join(".steps").exists(), "hidden work is not published");
        std::fs::write(work.path().join("entities.parquet"), b"e2").unwrap();
        assert_eq!(publish(work.path(), &remote, 1).unwrap(), 2);
        assert_eq!(std::fs::read(dir.join("entities.parquet")).unwrap(), b"e1", "a reader's version stays whole");
        assert_eq!(publish(work.path(), &remote, 1).unwrap(), 3);
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

    #[test]
    fn one_writer_holds_the_lease() {
        let Some(moto) = moto() else { return };
        let remote = moto.location("lease", "p/output");
        let lease = Lease::acquire(&remote, Duration::from_secs(60)).unwrap();
        lease.check().unwrap();
        let err = Lease::acquire(&remote, Duration::from_secs(60)).err().unwrap().to_string();
        assert!(err.contains("is writing s3://lease/p/output"), "{err}");
        drop(lease);
        let again = Lease::acquire(&remote, Duration::from_secs(60)).unwrap();
        // A holder of this machine whose process is gone is taken over.
        let dead = LeaseBody { holder: "h:1:0".into(), host: host_name(), pid: u32::MAX, expires: now_secs() + 600 };
        remote.put(LEASE, Bytes::from(serde_json::to_vec(&dead).unwrap())).unwrap();
        assert!(again.check().is_err(), "a lease overwritten is lost");
        drop(again);
        Lease::acquire(&remote, Duration::from_secs(60)).unwrap();
    }
}
