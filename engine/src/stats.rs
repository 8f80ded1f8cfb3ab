//! stats.json: per-step timings, row counts and counters (GraphRAG writes
//! the same file with `total_runtime` and per-workflow `overall`).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::failures::FailedItem;
use crate::llm::ModelUsage;
use crate::storage::counting::RequestsBySetting;

/// How a run ended, written to stats.json as `completed`, `failed` or
/// `interrupted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Every step ran or was skipped as up to date.
    Completed,
    /// The default: a run is set `completed` only once every step ran.
    #[default]
    Failed,
    /// A stop request ([`crate::interrupt`]) ended it.
    Interrupted,
}

impl RunStatus {
    /// The word stats.json holds.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, so that a width (`{:<8}`) applies as to a string.
        f.pad(self.as_str())
    }
}

/// How a step ended, written to stats.json (and shown, and passed to step
/// observers) as `ran`, `skipped` or `failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    /// Its verb ran and its outputs were written.
    Ran,
    /// `--resume` found its outputs up to date.
    Skipped,
    /// The default: a step is set `ran` or `skipped` only once it succeeded.
    #[default]
    Failed,
}

impl StepStatus {
    /// The word stats.json holds.
    pub fn as_str(self) -> &'static str {
        match self {
            StepStatus::Ran => "ran",
            StepStatus::Skipped => "skipped",
            StepStatus::Failed => "failed",
        }
    }
}

impl std::fmt::Display for StepStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One run's stats.json.
#[derive(Debug, Clone, Serialize, Default)]
pub struct RunStats {
    /// The name of the pipeline that ran (its workflows/ file).
    pub pipeline: String,
    /// A failed run's stats.json is written beside its staged outputs, not
    /// over the live index's.
    pub status: RunStatus,
    /// Why the run failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Seconds from the run's start to the writing of this file.
    pub total_runtime: f64,
    /// Seconds the start-up check of the model endpoints took (it runs
    /// beside the steps that call no model); absent when it did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_check: Option<f64>,
    /// Rows of the published `documents` table; 0 when the run failed or
    /// publishes no documents.
    pub num_documents: u64,
    /// Per step, by step id (GraphRAG's name for the map).
    pub workflows: BTreeMap<String, StepStats>,
    /// LLM usage of the whole run, per model.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub llm: BTreeMap<String, ModelUsage>,
    /// Object store requests to the run's storages per setting
    /// (`input_storage`, `output_storage`, `cache.storage`), from its start
    /// (the writer lease and working copy included) to this file's writing:
    /// the publication that follows (one PUT per published file, the
    /// manifest, the deletion of old versions) is not in it, and requests of
    /// other work of the process to the same locations (a server's queries)
    /// are. Absent when nothing is on an object store.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub storage_requests: RequestsBySetting,
    /// Items whose model call failed (tolerated ones included), named.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed_items: Vec<FailedItem>,
}

impl RunStats {
    /// Every step's unreadable input files, in step order.
    pub fn unreadable_inputs(&self) -> impl Iterator<Item = &FailedItem> {
        self.workflows.values().flat_map(|s| &s.unreadable_inputs)
    }

    /// Fills the run's per-model totals from the steps.
    pub(crate) fn sum_llm_usage(&mut self) {
        self.llm.clear();
        for step in self.workflows.values() {
            for (model, u) in &step.llm {
                self.llm.entry(model.clone()).or_default().add(u);
            }
        }
    }
}

/// One step's entry in stats.json's `workflows`.
#[derive(Debug, Clone, Serialize, Default)]
pub struct StepStats {
    /// The name of the step's verb.
    pub verb: String,
    /// How it ended.
    pub status: StepStatus,
    /// Seconds after the run began that the step started.
    pub start: f64,
    /// Seconds.
    pub overall: f64,
    /// Rows of its input tables, summed.
    pub rows_in: u64,
    /// Rows of its output tables, summed.
    pub rows_out: u64,
    /// The process's peak resident memory when the step ended (MB, Linux).
    pub peak_rss_mb: Option<f64>,
    /// Warnings its verb logged (`VerbContext::warn`).
    pub warnings: u64,
    /// LLM calls, tokens, cache hits, retries and JSON repairs per model.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub llm: BTreeMap<String, ModelUsage>,
    /// Verb-specific counts (e.g. extraction records dropped or repaired).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, u64>,
    /// Chat calls sent per dependent wave (see `context::Waves`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub llm_waves: Vec<u64>,
    /// The steps whose outputs this one reads (it starts when they are done).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// Items that failed within the tolerated fraction (listed in the run's `failed_items`).
    #[serde(skip)]
    pub failed_items: Vec<FailedItem>,
    /// Input files the step could not read and went on without (`name`: the path).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreadable_inputs: Vec<FailedItem>,
}

/// Peak resident set size of this process in MB (VmHWM), where available.
pub(crate) fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some((kb / 1024.0 * 10.0).round() / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_written_and_shown_as_their_words() {
        for (status, word) in
            [(StepStatus::Ran, "ran"), (StepStatus::Skipped, "skipped"), (StepStatus::Failed, "failed")]
        {
            assert_eq!(serde_json::to_value(status).unwrap(), word);
            assert_eq!(format!("{status:<8}|"), format!("{word:<8}|"));
        }
        for (status, word) in [
            (RunStatus::Completed, "completed"),
            (RunStatus::Failed, "failed"),
            (RunStatus::Interrupted, "interrupted"),
        ] {
            assert_eq!(serde_json::to_value(status).unwrap(), word);
            assert_eq!(status.to_string(), word);
        }
    }
}
