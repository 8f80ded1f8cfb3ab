//! `generate_indexing_prompts`: GraphRAG's `api.generate_indexing_prompts`
//! over `graphrag_project::prompt_tune`, with the project's root in place of
//! GraphRAG's config object.

use std::path::PathBuf;

use graphrag_project::prompt_tune::{self, PromptTuneOptions, SelectionMethod};
use graphrag_project::{ProjectError, StopFlag};
use pyo3::exceptions::{PyKeyboardInterrupt, PyValueError};
use pyo3::prelude::*;

use crate::{interruptible, project_error, CancelToken};

/// Prompts adapted to `root`'s corpus: ((extract_graph, summarize_descriptions,
/// community_report_graph), warnings). `output` (relative to `root`) also
/// writes them there; the warnings name settings that point at other files.
#[pyfunction]
#[pyo3(signature = (
    root,
    limit = prompt_tune::defaults::LIMIT,
    selection_method = "random",
    domain = None,
    language = None,
    max_tokens = prompt_tune::defaults::MAX_TOKENS,
    discover_entity_types = true,
    min_examples_required = prompt_tune::defaults::MIN_EXAMPLES_REQUIRED,
    n_subset_max = prompt_tune::defaults::N_SUBSET_MAX,
    k = prompt_tune::defaults::K,
    chunk_size = None,
    overlap = None,
    output = None,
    skip_validation = false,
    cancel = None,
))]
#[allow(clippy::too_many_arguments)]
pub fn generate_indexing_prompts(
    py: Python<'_>,
    root: PathBuf,
    limit: usize,
    selection_method: &str,
    domain: Option<String>,
    language: Option<String>,
    max_tokens: usize,
    discover_entity_types: bool,
    min_examples_required: usize,
    n_subset_max: usize,
    k: usize,
    chunk_size: Option<usize>,
    overlap: Option<usize>,
    output: Option<PathBuf>,
    skip_validation: bool,
    cancel: Option<PyRef<'_, CancelToken>>,
) -> PyResult<((String, String, String), Vec<String>)> {
    let selection_method: SelectionMethod = selection_method.parse().map_err(PyValueError::new_err)?;
    let opts = PromptTuneOptions {
        domain,
        language,
        selection_method,
        limit,
        max_tokens,
        chunk_size,
        overlap,
        n_subset_max,
        k,
        min_examples_required,
        discover_entity_types,
        skip_validation,
    };
    // This tuning's own stop (the token's when given): Ctrl-C or cancel()
    // ends its model calls, not other runs of the process.
    let stop = cancel.map_or_else(StopFlag::new, |t| t.build.clone());
    let (work_stop, stopped) = (stop.clone(), stop.clone());
    let work = move || -> Result<_, ProjectError> {
        let tuned = prompt_tune::generate_prompts_until(&root, &opts, &work_stop)?;
        let warnings = match output {
            Some(dir) => prompt_tune::write_prompts(&root, &tuned, &root.join(dir))?.warnings,
            None => Vec::new(),
        };
        Ok(((tuned.extract_graph, tuned.summarize_descriptions, tuned.community_report_graph), warnings))
    };
    match interruptible(py, work, move || stop.request())? {
        Ok(tuned) => Ok(tuned),
        // Stopped by its token: as a stopped build, KeyboardInterrupt (its
        // model calls were refused, which is the error it ended with).
        Err(e) if stopped.requested() => Err(PyKeyboardInterrupt::new_err(format!("{e:#}"))),
        Err(e) => Err(project_error(&e)),
    }
}
