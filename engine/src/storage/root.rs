//! A project root in a bucket (`--root s3://bucket/prefix`, `az://`, `gs://`).
//!
//! The project's own files — the settings file, `.env`, the other files at
//! the top of the prefix (aliases, graph edits) and the `prompts/` and
//! `workflows/` folders — are copied into a local working copy
//! (`checkout`), which every command then runs in as in a project folder.
//! The working copy names its root (`REMOTE_ROOT_FILE`), so that loading
//! its settings keeps every `file` storage in the bucket, under the same
//! prefix (`settings::Settings::rebase`): input, index, cache and logs never
//! live only in the working copy.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context};
use graphrag_operations::ids::sha256_hex;

use super::object::{self, ObjectLocation};
use super::remote;
use crate::settings::{ProjectRoot, RemoteStorage, REMOTE_ROOT_FILE, SETTINGS_FILES};

/// Folders of a project root copied whole (besides the files at its top).
const PROJECT_FOLDERS: [&str; 2] = ["prompts", "workflows"];

/// The setting a root's connection errors name.
const ROOT_SETTING: &str = "--root";

/// The local folder a command runs in: a folder root as it is; a root in a
/// bucket checked out into `work_dir` (default: a folder of the user's
/// cache, `default_work_dir`).
pub fn local_root(root: &ProjectRoot, work_dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    match root {
        ProjectRoot::Folder(dir) => Ok(dir.clone()),
        ProjectRoot::Remote(remote) => {
            let (location, endpoint) = connect(remote)?;
            let dir = work_dir_or_default(remote, &endpoint, work_dir)?;
            checkout(&location, remote, &dir)?;
            Ok(dir)
        }
    }
}

/// Writes a new project into the bucket root `remote` through its working
/// copy: `scaffold` writes the files in the (cleared) working copy, which are
/// then uploaded. An existing settings file there is kept unless `force`.
pub fn init(
    remote: &RemoteStorage,
    work_dir: Option<&Path>,
    force: bool,
    scaffold: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<PathBuf> {
    let (location, endpoint) = connect(remote)?;
    let dir = work_dir_or_default(remote, &endpoint, work_dir)?;
    let top = location.list_level("")?;
    if let Some(existing) = top.iter().find(|o| SETTINGS_FILES.contains(&o.key.as_str())) {
        if !force {
            bail!(
                "{}/{} already exists: {} is a project already (use --force to overwrite its settings, prompts and workflows)",
                remote.url(),
                existing.key,
                remote.url()
            );
        }
    }
    prepare(remote, &dir, &[])?;
    scaffold(&dir)?;
    for rel in project_files(&dir)? {
        location.upload(&dir.join(&rel), &rel)?;
    }
    mark(remote, &dir)?;
    Ok(dir)
}

/// After a command wrote project files in `root` (graph_edits.yaml, tuned
/// prompts): when `root` is the working copy of a root in a bucket, each of
/// `files` (under `root`) is uploaded there, where the next checkout reads
/// it (else it would be dropped). Nothing for a project folder.
pub fn write_back(root: &Path, files: &[PathBuf]) -> anyhow::Result<()> {
    let Some(remote) = crate::settings::remote_root(root)? else { return Ok(()) };
    let (location, _) = connect(&remote)?;
    for file in files {
        let rel = file.strip_prefix(root).map_err(|_| {
            anyhow!(
                "{} is outside the working copy {} of {}: not uploaded",
                file.display(),
                root.display(),
                remote.url()
            )
        })?;
        let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        location.upload(file, &parts.join("/"))?;
    }
    Ok(())
}

/// `$XDG_CACHE_HOME/graphrag-rs/<hash>/` (`~/.cache` without it): one per
/// root URL and endpoint, so that two servers' buckets of the same name do
/// not share a copy.
pub(crate) fn default_work_dir(remote: &RemoteStorage, endpoint: &str) -> anyhow::Result<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let cache = var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|home| home.join(".cache"))).ok_or_else(|| {
        anyhow!("neither XDG_CACHE_HOME nor HOME is set: name the working copy of {} with --work-dir", remote.url())
    })?;
    let digest = sha256_hex(&[remote.url().as_bytes(), endpoint.as_bytes()]);
    Ok(cache.join("graphrag-rs").join(&digest[..16]))
}

fn work_dir_or_default(remote: &RemoteStorage, endpoint: &str, work_dir: Option<&Path>) -> anyhow::Result<PathBuf> {
    match work_dir {
        Some(dir) => Ok(dir.to_path_buf()),
        None => default_work_dir(remote, endpoint),
    }
}

/// The root's prefix, connected (one LIST: a missing bucket, refused
/// credentials or an endpoint that is down are said now, naming the URL),
/// and the endpoint it is on.
fn connect(remote: &RemoteStorage) -> anyhow::Result<(ObjectLocation, String)> {
    let owned = remote.clone();
    let connected = object::run(async move { remote::connect(ROOT_SETTING, &owned).await })?
        .with_context(|| format!("opening the project root {}", remote.url()))?;
    let endpoint = connected.endpoint().to_string();
    Ok((ObjectLocation::at(connected.store, connected.prefix, remote.url()), endpoint))
}

/// Brings the working copy `dir` to the root's project files: those gone
/// from the bucket are removed, the others downloaded.
fn checkout(location: &ObjectLocation, remote: &RemoteStorage, dir: &Path) -> anyhow::Result<()> {
    let top = location.list_level("")?;
    if !top.iter().any(|o| SETTINGS_FILES.contains(&o.key.as_str())) {
        bail!(
            "{} has no {} (nor {}): upload the project's settings file there, or run `graphrag-rs init --root {}`",
            remote.url(),
            SETTINGS_FILES[0],
            SETTINGS_FILES[1..].join(", "),
            remote.url()
        );
    }
    let mut keys: Vec<String> = top.into_iter().map(|o| o.key).collect();
    for folder in PROJECT_FOLDERS {
        keys.extend(location.list(folder)?.into_iter().map(|o| o.key));
    }
    if let Some(key) = keys.iter().find(|key| key.split('/').any(|seg| seg.is_empty() || seg == "." || seg == "..")) {
        bail!("{}/{key}: not a plain object name; rename it", remote.url());
    }
    // Files still in the bucket are replaced in place (atomically), not
    // removed first: a server running in this copy never misses one.
    prepare(remote, dir, &keys)?;
    // A command starts after these small GETs: several at a time, not one by one.
    for (key, found) in keys.iter().zip(location.get_all(&keys)?) {
        // One deleted since the listing is as good as absent.
        if let Some(bytes) = found {
            let path = dir.join(key);
            crate::store::atomic_write(&path, &bytes).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    mark(remote, dir)
}

/// Makes `dir` ready to receive the root's project files: new, or a working
/// copy of this root (never someone's other folder), cleared of those not
/// in `keep`.
fn prepare(remote: &RemoteStorage, dir: &Path, keep: &[String]) -> anyhow::Result<()> {
    let marker = dir.join(REMOTE_ROOT_FILE);
    match std::fs::read_to_string(&marker) {
        Ok(url) if url.trim() == remote.url() => {}
        Ok(url) => bail!(
            "{} is the working copy of {}, not of {}: choose another --work-dir",
            dir.display(),
            url.trim(),
            remote.url()
        ),
        Err(_) if has_entries(dir)? => bail!(
            "{} is not empty and is not a working copy of {}: choose an empty or new folder for --work-dir",
            dir.display(),
            remote.url()
        ),
        Err(_) => {
            std::fs::create_dir_all(dir).with_context(|| format!("making the working copy {}", dir.display()))?;
            // The project's .env (model keys) is copied here: only this user reads it.
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                    .with_context(|| format!("restricting {} to this user", dir.display()))?;
            }
        }
    }
    for rel in project_files(dir)?.into_iter().filter(|rel| !keep.contains(rel)) {
        std::fs::remove_file(dir.join(&rel)).with_context(|| format!("removing {}", dir.join(&rel).display()))?;
    }
    Ok(())
}

fn has_entries(dir: &Path) -> anyhow::Result<bool> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_some()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("reading {}", dir.display())),
    }
}

/// The project files of a working copy, relative, `/`-separated: the files
/// at its top and those under [`PROJECT_FOLDERS`].
fn project_files(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut files = Vec::new();
    let mut pending: Vec<(PathBuf, String)> = vec![(dir.to_path_buf(), String::new())];
    while let Some((folder, rel)) = pending.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).with_context(|| format!("reading {}", folder.display())),
        };
        for entry in entries {
            let entry = entry.with_context(|| format!("reading {}", folder.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() { name.clone() } else { format!("{rel}/{name}") };
            let kind = entry.file_type().with_context(|| format!("reading {}", entry.path().display()))?;
            if kind.is_file() {
                files.push(path);
            } else if kind.is_dir() && (!rel.is_empty() || PROJECT_FOLDERS.contains(&name.as_str())) {
                pending.push((entry.path(), path));
            }
        }
    }
    files.sort();
    Ok(files)
}

fn mark(remote: &RemoteStorage, dir: &Path) -> anyhow::Result<()> {
    let marker = dir.join(REMOTE_ROOT_FILE);
    crate::store::atomic_write(&marker, remote.url().as_bytes())
        .with_context(|| format!("writing {}", marker.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_files_are_the_top_files_and_the_project_folders() {
        let dir = tempfile::tempdir().unwrap();
        for rel in ["settings.yaml", ".env", "prompts/a.txt", "workflows/x/y.yaml", "input/doc.txt", ".graphrag-rs/k"] {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        assert_eq!(
            project_files(dir.path()).unwrap(),
            [".env", "prompts/a.txt", "settings.yaml", "workflows/x/y.yaml"]
        );
    }

    #[test]
    fn a_folder_that_is_not_a_working_copy_is_never_cleared() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        let remote = RemoteStorage::parse_url("s3://b/p").unwrap();
        let err = prepare(&remote, dir.path(), &[]).unwrap_err().to_string();
        assert!(err.contains("not a working copy of s3://b/p"), "{err}");
        assert!(dir.path().join("notes.txt").exists());
        let other = tempfile::tempdir().unwrap();
        mark(&RemoteStorage::parse_url("s3://b/other").unwrap(), other.path()).unwrap();
        let err = prepare(&remote, other.path(), &[]).unwrap_err().to_string();
        assert!(err.contains("working copy of s3://b/other, not of s3://b/p"), "{err}");
    }

    #[test]
    fn the_default_copy_depends_on_url_and_endpoint() {
        let a = RemoteStorage::parse_url("s3://b/p").unwrap();
        let b = RemoteStorage::parse_url("s3://b/q").unwrap();
        let one = default_work_dir(&a, "http://127.0.0.1:1").unwrap();
        assert_ne!(one, default_work_dir(&a, "http://127.0.0.1:2").unwrap());
        assert_ne!(one, default_work_dir(&b, "http://127.0.0.1:1").unwrap());
        assert_eq!(one, default_work_dir(&a, "http://127.0.0.1:1").unwrap());
    }
}
