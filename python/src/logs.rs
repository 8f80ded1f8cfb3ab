//! The library's `tracing` records (warnings about ignored settings keys,
//! progress of a run, retries) delivered to Python's `logging` as records of
//! the `graphrag_rs` logger. A record is queued by whichever thread emits it
//! and handed to Python by the thread that holds the GIL for a call of this
//! module ([`forward`]): an emitting thread never waits for the GIL, so a
//! log line can never deadlock against a Python thread.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::Mutex;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// Records kept while no call forwards them; the oldest are dropped beyond
/// (and their number logged when forwarding resumes).
const QUEUE_CAP: usize = 10_000;

struct Queue {
    records: VecDeque<(u8, String)>,
    dropped: u64,
}

static QUEUE: Mutex<Queue> = Mutex::new(Queue { records: VecDeque::new(), dropped: 0 });

/// Python's level number for a tracing level.
fn python_level(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 40,
        Level::WARN => 30,
        Level::INFO => 20,
        Level::DEBUG => 10,
        Level::TRACE => 5,
    }
}

/// The event's `message` followed by its other fields as `key=value`.
#[derive(Default)]
struct Message {
    text: String,
    fields: String,
}

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.text.push_str(value);
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.text, "{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

struct PythonLogging;

impl<S: Subscriber> Layer<S> for PythonLogging {
    fn enabled(&self, metadata: &Metadata<'_>, _: Context<'_, S>) -> bool {
        // The library's own records at INFO and above (not its HTTP client's).
        *metadata.level() <= Level::INFO && metadata.target().starts_with("graphrag")
    }

    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let mut message = Message::default();
        event.record(&mut message);
        message.text.push_str(&message.fields);
        let mut queue = QUEUE.lock().unwrap_or_else(|e| e.into_inner());
        if queue.records.len() >= QUEUE_CAP {
            queue.records.pop_front();
            queue.dropped += 1;
        }
        queue.records.push_back((python_level(event.metadata().level()), message.text));
    }
}

/// Makes this layer the process's tracing subscriber (unless the embedding
/// program installed one already).
pub fn install() {
    let _ = tracing_subscriber::registry().with(PythonLogging).try_init();
}

/// Hands the queued records to the `graphrag_rs` logger. A handler's
/// error is reported as unraisable; a KeyboardInterrupt (a signal handled
/// while the records were logged) is returned, for the caller to stop on.
pub fn forward(py: Python<'_>) -> PyResult<()> {
    let (records, dropped) = {
        let mut queue = QUEUE.lock().unwrap_or_else(|e| e.into_inner());
        if queue.records.is_empty() {
            return Ok(());
        }
        (std::mem::take(&mut queue.records), std::mem::take(&mut queue.dropped))
    };
    let logged = (|| -> PyResult<()> {
        let logger = py.import("logging")?.call_method1("getLogger", ("graphrag_rs",))?;
        if dropped > 0 {
            logger.call_method1(
                "warning",
                (format!("{dropped} log records were dropped (more than {QUEUE_CAP} queued)"),),
            )?;
        }
        for (level, text) in records {
            logger.call_method1("log", (level, text))?;
        }
        Ok(())
    })();
    match logged {
        Err(e) if !e.is_instance_of::<PyException>(py) => Err(e),
        Err(e) => {
            e.write_unraisable(py, None);
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

/// Delivers the library's queued log records to the `graphrag_rs` logger
/// now (each call of this module does it too).
#[pyfunction]
pub fn forward_logs(py: Python<'_>) -> PyResult<()> {
    forward(py)
}
