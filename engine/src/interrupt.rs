//! Stopping a run cleanly (Ctrl-C, or SIGTERM: what Kubernetes, systemd and
//! container runtimes send first). Once a stop is requested, the LLM layer
//! sends no new request and waits no more between retries, while answers
//! already in flight are received, checked and cached; the pipeline starts
//! no new step, and the run ends with [`Interrupted`]. The CLI installs the
//! SIGINT and SIGTERM handler ([`install_handler`]) that stops every run of
//! the process, and exits with [`exit_code`]; a library caller running
//! several builds at once stops one of them with its [`StopFlag`] (each run
//! checks its own flag and the process-wide one), or every run with
//! [`request`] and then [`reset`] before its next run.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

static REQUESTED: AtomicBool = AtomicBool::new(false);
/// The signal that requested the stop (0: none, or [`request`]).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The error a run stopped by [`request`] ends with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("interrupted — rerun to resume")]
pub struct Interrupted;

/// Asks the run in progress to stop.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Clears a stop request, so that a library caller (a notebook, a server)
/// can run again after stopping a run. The stop is process-wide: call it
/// only once the stopped run has returned.
pub fn reset() {
    REQUESTED.store(false, Ordering::SeqCst);
    SIGNAL.store(0, Ordering::SeqCst);
}

/// Whether the process-wide stop was requested (a signal, or [`request`]).
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// The stop of one run (a build among others in a library caller's
/// process): requested for this run and its clones only. A run is also
/// stopped by the process-wide [`request`] (Ctrl-C in the CLI).
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// A flag not yet requested.
    pub fn new() -> StopFlag {
        StopFlag::default()
    }

    /// Asks the run this flag was given to stop.
    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether this run, or every run of the process, was asked to stop.
    pub fn requested(&self) -> bool {
        self.0.load(Ordering::SeqCst) || requested()
    }

    /// `Err(Interrupted)` once a stop was requested.
    pub fn check(&self) -> Result<(), Interrupted> {
        if self.requested() {
            Err(Interrupted)
        } else {
            Ok(())
        }
    }

    /// Sleeps for `wait` unless a stop is requested meanwhile.
    pub async fn sleep(&self, wait: Duration) -> Result<(), Interrupted> {
        const SLICE: Duration = Duration::from_millis(100);
        let mut left = wait;
        while !left.is_zero() {
            self.check()?;
            let step = left.min(SLICE);
            tokio::time::sleep(step).await;
            left -= step;
        }
        self.check()
    }
}

/// The exit code of a process whose run a stop ended: 128 + the signal's
/// number, as a shell reports a process that signal ended (130 after
/// Ctrl-C, 143 after SIGTERM); 130 for a stop that no signal requested.
pub fn exit_code() -> u8 {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => 128 + libc::SIGINT as u8,
        signal => 128u8.saturating_add(signal as u8),
    }
}

/// What requested the stop, for messages.
pub fn cause() -> &'static str {
    if SIGNAL.load(Ordering::SeqCst) == libc::SIGTERM {
        "SIGTERM"
    } else {
        "Ctrl-C"
    }
}

const SIGINT_MESSAGE: &[u8] =
    b"\nCtrl-C: stopping after the requests in flight are answered and cached (Ctrl-C again to quit at once)\n";
const SIGTERM_MESSAGE: &[u8] =
    b"\nSIGTERM: stopping after the requests in flight are answered and cached (a second SIGTERM quits at once)\n";

extern "C" fn on_signal(signal: libc::c_int) {
    if REQUESTED.swap(true, Ordering::SeqCst) {
        // SAFETY: _exit is async-signal-safe; every file the engine writes is
        // written atomically, so quitting here leaves no partial file.
        unsafe { libc::_exit(128 + signal) };
    }
    SIGNAL.store(signal, Ordering::SeqCst);
    let message = if signal == libc::SIGTERM { SIGTERM_MESSAGE } else { SIGINT_MESSAGE };
    // SAFETY: write(2) is async-signal-safe; the message is a static buffer.
    unsafe {
        libc::write(libc::STDERR_FILENO, message.as_ptr().cast(), message.len());
    }
}

/// Makes SIGINT (Ctrl-C) and SIGTERM request a stop; a second signal exits
/// at once (128 + its number).
pub fn install_handler() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: installs a handler that only touches atomics and calls
        // async-signal-safe functions.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_flag_stops_its_run_and_clones_only() {
        let (one, other) = (StopFlag::new(), StopFlag::new());
        let clone = one.clone();
        assert!(one.check().is_ok() && !other.requested());
        clone.request();
        assert_eq!(one.check(), Err(Interrupted));
        assert!(!other.requested(), "another run's flag is untouched");
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        assert_eq!(rt.block_on(one.sleep(Duration::from_secs(3600))), Err(Interrupted), "no wait once stopped");
        assert_eq!(rt.block_on(other.sleep(Duration::ZERO)), Ok(()));
    }
}
