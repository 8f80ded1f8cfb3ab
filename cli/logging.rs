//! Logs: human-readable on stderr (level from -v/-q) and a full log file in
//! the project's reporting folder.

use std::fs::{self, File};
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use indicatif::MultiProgress;

use anyhow::Context;

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt;
use tracing_subscriber::prelude::*;

/// Log target written to the log file but not to the console.
pub const FILE_ONLY: &str = "graphrag_rs::file_only";

/// Where progress bars are drawn (stderr). Console log lines go through it
/// too, so they are printed above the bars instead of through them.
pub fn bars() -> &'static MultiProgress {
    static BARS: OnceLock<MultiProgress> = OnceLock::new();
    BARS.get_or_init(MultiProgress::new)
}

/// Writes one log event to stderr with the progress bars out of the way.
struct AboveBars;

impl Write for AboveBars {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        bars().suspend(|| std::io::stderr().write_all(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// The log of this run, uploaded by [`finish`] when reporting is in a bucket.
static RUN_LOG: OnceLock<graphrag_project::RunLog> = OnceLock::new();

pub fn upload_at_exit(log: graphrag_project::RunLog) {
    let _ = RUN_LOG.set(log);
}

/// At the end of the command, whether it succeeded or not: the run's log to
/// the reporting bucket.
pub fn finish() -> anyhow::Result<()> {
    RUN_LOG.get().map_or(Ok(()), graphrag_project::RunLog::upload)
}

pub fn init(verbosity: i8, log_file: Option<&Path>) -> anyhow::Result<()> {
    let console = match verbosity {
        i8::MIN..=-1 => LevelFilter::WARN,
        0 => LevelFilter::INFO,
        1 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    };
    let file_layer = match log_file {
        Some(path) => {
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir).with_context(|| {
                    format!("creating the log folder {} (reporting.base_dir in settings.yaml)", dir.display())
                })?;
            }
            let file = File::options().create(true).append(true).open(path).with_context(|| {
                format!("opening the log file {} (reporting.base_dir in settings.yaml)", path.display())
            })?;
            Some(fmt::layer().with_ansi(false).with_writer(Arc::new(file)).with_filter(console.max(LevelFilter::INFO)))
        }
        None => None,
    };
    let _ = tracing_subscriber::registry()
        .with(
            fmt::layer()
                .with_writer(|| AboveBars)
                .with_ansi(std::io::stderr().is_terminal())
                .with_target(false)
                .compact()
                .with_filter(console)
                .with_filter(tracing_subscriber::filter::filter_fn(|m| m.target() != FILE_ONLY)),
        )
        .with(file_layer)
        .try_init();
    Ok(())
}
