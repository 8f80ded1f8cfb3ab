//! Stopping the model calls of one request, not of the whole process (that
//! is [`crate::interrupt`]): a server cancels a query whose client went
//! away, a library caller a query it no longer wants. Model calls made
//! under a cancelled token send no new request, drop the one in flight (its
//! connection is closed) and stop waiting between retries; they fail with
//! [`crate::llm::LlmError::Cancelled`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::Notify;

/// A cancellation flag shared by its clones. The default token is never
/// cancelled unless [`CancelToken::cancel`] is called on it or a clone.
#[derive(Clone, Default)]
pub struct CancelToken(Arc<Inner>);

#[derive(Default)]
struct Inner {
    cancelled: AtomicBool,
    notify: Notify,
}

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> CancelToken {
        CancelToken::default()
    }

    /// Cancels the calls made under this token and its clones (at once for
    /// those waiting for it).
    pub fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }

    /// Whether [`CancelToken::cancel`] was called on it or a clone.
    pub fn is_cancelled(&self) -> bool {
        self.0.cancelled.load(Ordering::SeqCst)
    }

    /// Completes once the token is cancelled.
    pub(crate) async fn cancelled(&self) {
        loop {
            // Registered before the flag is read: a cancel() in between wakes it.
            let notified = self.0.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }

    /// Runs `future` unless the token is cancelled first (`None`; the future
    /// is dropped, which closes a request it had in flight).
    pub async fn run<F: std::future::Future>(&self, future: F) -> Option<F::Output> {
        tokio::select! {
            biased;
            _ = self.cancelled() => None,
            out = future => Some(out),
        }
    }

    /// A guard that cancels the token when dropped: tie a request's model
    /// calls to the future that waits for their answer, so that dropping it
    /// (a client that disconnected) stops them.
    pub fn cancel_on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(self.clone())
    }
}

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CancelToken").field(&self.is_cancelled()).finish()
    }
}

/// Two tokens are equal when they are clones of one another.
impl PartialEq for CancelToken {
    fn eq(&self, other: &CancelToken) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// See [`CancelToken::cancel_on_drop`].
pub struct CancelOnDrop(CancelToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_cancel_stops_a_waiting_future_and_reaches_clones() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let token = CancelToken::new();
        let clone = token.clone();
        assert_eq!(token, clone);
        assert_ne!(token, CancelToken::new());
        let out = rt.block_on(async {
            let waiting = tokio::spawn({
                let t = clone.clone();
                async move { t.run(tokio::time::sleep(Duration::from_secs(3600))).await }
            });
            tokio::task::yield_now().await;
            token.cancel();
            waiting.await.unwrap()
        });
        assert_eq!(out, None, "the hour-long wait was dropped");
        assert!(clone.is_cancelled());
        assert_eq!(rt.block_on(clone.run(async { 7 })), None, "nothing runs under a cancelled token");
        assert_eq!(rt.block_on(CancelToken::new().run(async { 7 })), Some(7));
    }

    #[test]
    fn the_guard_cancels_when_dropped() {
        let token = CancelToken::new();
        let guard = token.cancel_on_drop();
        assert!(!token.is_cancelled());
        drop(guard);
        assert!(token.is_cancelled());
    }
}
