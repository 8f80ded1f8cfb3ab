//! `graphrag-rs cache import FOLDER`: the answers of a local cache folder
//! copied into the project's cache on an object store
//! (`ResponseCache::import`), which reads no folder's layout.

use std::path::Path;

use graphrag_engine::llm::ResponseCache;
use graphrag_engine::settings;
use graphrag_engine::storage::Storage;

pub fn import(root: &Path, folder: &Path, verbosity: i8) -> anyhow::Result<()> {
    crate::logging::init(verbosity, None)?;
    let settings = settings::load(root)?.settings;
    let cache = Storage::cache(root, &settings)?;
    let imported = ResponseCache::import(folder, &cache)?;
    if verbosity >= 0 {
        println!(
            "{} answers of {} copied into {} ({} segments); {} files not JSON left out",
            imported.answers,
            folder.display(),
            cache.describe(),
            imported.segments,
            imported.skipped
        );
    }
    Ok(())
}
