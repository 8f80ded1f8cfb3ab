//! How one model's requests are sent: under its limits, retried with
//! backoff when the failure is transient, within a time budget, and not at
//! all once the model has failed too often in a row (circuit breaker).
//! Every wait is bounded (`max_retry_wait`, also for a server's
//! Retry-After; `max_retry_time` per request) and long ones are shown even
//! with `-q`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::SemaphorePermit;

use super::http::Failure;
use super::limiter::Limiter;
use super::{LlmError, UsageCounters};
use crate::cancel::CancelToken;
use crate::interrupt::StopFlag;
use crate::settings::{duration_of_seconds, ModelConfig};

/// The bounds of one request's model calls (a query's): a token that
/// cancels them, and a time budget for retrying shared by all of them. The
/// default (indexing) has neither: each call is bounded by its model's own
/// `max_retry_time` only. `stop` is the run's stop (a build's: no new
/// request, no more waiting, answers in flight still received).
#[derive(Debug, Clone, Default)]
pub struct CallScope {
    /// Cancels the scope's calls (a query whose client went away).
    pub cancel: CancelToken,
    /// Bounds the retries of all the scope's calls together; `None`: each
    /// call has its model's `max_retry_time`.
    pub retry_budget: Option<RetryBudget>,
    /// The run's stop.
    pub stop: StopFlag,
}

/// No retry starts later than `limit` after the first failure of any call
/// of the scope (counted from there, not from the request's start, so that
/// a long request that met no failure still retries a late one).
#[derive(Debug, Clone)]
pub struct RetryBudget {
    limit: Duration,
    /// What set it, named when it ends retrying (`query.max_retry_time is 20 s`).
    why: String,
    first_failure: Arc<OnceLock<Instant>>,
}

impl RetryBudget {
    /// A budget of `limit`; `why` names what set it in the error that ends
    /// retrying (`query.max_retry_time is 20 s`).
    pub fn new(limit: Duration, why: impl Into<String>) -> RetryBudget {
        RetryBudget { limit, why: why.into(), first_failure: Arc::default() }
    }

    /// Whether a retry after `wait` starts within the budget (a failure
    /// just happened: the first one starts the clock).
    fn allows(&self, wait: Duration) -> bool {
        let first = *self.first_failure.get_or_init(Instant::now);
        // An end past what an Instant holds is no bound; a wait past it is.
        match (first.checked_add(self.limit), Instant::now().checked_add(wait)) {
            (None, _) => true,
            (Some(end), start) => start.is_some_and(|start| start <= end),
        }
    }
}

impl CallScope {
    /// `future` unless the scope is cancelled first.
    pub(crate) async fn run<F: std::future::Future>(&self, future: F) -> Result<F::Output, LlmError> {
        self.cancel.run(future).await.ok_or(LlmError::Cancelled)
    }

    /// Waits `wait` before a retry, unless the run is stopped or the scope cancelled.
    pub(crate) async fn sleep(&self, wait: Duration) -> Result<(), LlmError> {
        self.run(self.stop.sleep(wait)).await?.map_err(LlmError::Interrupted)
    }
}

/// Waits at least this long are logged as warnings (shown with `-q`).
const VISIBLE_WAIT: Duration = Duration::from_secs(5);

/// A model's limits, retry policy and circuit breaker, shared by its calls.
pub(crate) struct Policy {
    id: String,
    config: ModelConfig,
    limiter: Limiter,
    breaker: Breaker,
}

impl Policy {
    pub(crate) fn new(id: &str, config: &ModelConfig) -> Self {
        Policy {
            id: id.to_string(),
            config: config.clone(),
            limiter: Limiter::new(config),
            breaker: Breaker::new(config.max_consecutive_failures),
        }
    }

    /// Whether requests need their prompt tokens counted before they are
    /// sent (a tokens-per-period limit is set); else [`Policy::permit`]
    /// ignores them.
    pub(crate) fn counts_prompt_tokens(&self) -> bool {
        self.limiter.limits_tokens()
    }

    /// A concurrency slot with the rate limits' allowance for a request of
    /// `tokens` prompt tokens; fails once the run is stopped or the breaker open.
    pub(crate) async fn permit(&self, tokens: u64, scope: &CallScope) -> Result<SemaphorePermit<'_>, LlmError> {
        scope.stop.check().map_err(LlmError::Interrupted)?;
        if scope.cancel.is_cancelled() {
            return Err(LlmError::Cancelled);
        }
        self.breaker.check(&self.id)?;
        let permit = scope.run(self.limiter.acquire(tokens)).await?;
        // What happened while this request queued: a stop, or the breaker opening.
        scope.stop.check().map_err(LlmError::Interrupted)?;
        self.breaker.check(&self.id)?;
        Ok(permit)
    }

    /// Runs `call` until it succeeds or its failure is final, and returns
    /// `keep` of its result. `keep` (checking, counting, caching) runs while
    /// the concurrency slot is held, so a process killed at any point has
    /// cached every answer whose successor request was sent. A cancelled
    /// `scope` drops the request in flight.
    pub(crate) async fn send<T, R, F, Fut>(
        &self,
        usage: &UsageCounters,
        tokens: u64,
        scope: &CallScope,
        mut call: F,
        mut keep: impl FnMut(T) -> R,
    ) -> Result<R, LlmError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, Failure>>,
    {
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            // The failure is judged while the slot is held, so that the next
            // request in line sees the breaker open if this one opened it.
            let wait = {
                let _permit = self.permit(tokens, scope).await?;
                match scope.run(call()).await? {
                    Ok(v) => return Ok(keep(v)),
                    Err(f) => self.after_failure(usage, attempt, started.elapsed(), f, scope)?,
                }
            };
            scope.sleep(wait).await?;
        }
    }

    /// What to do after attempt `attempt` failed, `elapsed` after the
    /// first began: the wait before the next try, or the error to return (not
    /// retryable, retries or time budget spent, the model's or the scope's).
    /// Counts both; a final error counts for the circuit breaker.
    pub(crate) fn after_failure(
        &self,
        usage: &UsageCounters,
        attempt: u32,
        elapsed: Duration,
        failure: Failure,
        scope: &CallScope,
    ) -> Result<Duration, LlmError> {
        let (id, config) = (&self.id, &self.config);
        let max_attempts = config.retry_policy().max_retries + 1;
        let wait = backoff(config, attempt, failure.retry_after);
        let error = if !failure.retryable {
            LlmError::Rejected { model: id.clone(), status: failure.status.unwrap_or(0), message: failure.message }
        } else if attempt >= max_attempts {
            LlmError::Exhausted { model: id.clone(), attempts: attempt, last: failure.message }
        } else if elapsed.saturating_add(wait) > duration_of_seconds(config.max_retry_time) {
            let last = format!(
                "{} (retrying stopped after {:.0} s: max_retry_time is {} s)",
                failure.message,
                elapsed.as_secs_f64(),
                config.max_retry_time
            );
            LlmError::Exhausted { model: id.clone(), attempts: attempt, last }
        } else if let Some(budget) = scope.retry_budget.as_ref().filter(|b| !b.allows(wait)) {
            let last = format!("{} (retrying stopped: {})", failure.message, budget.why);
            LlmError::Exhausted { model: id.clone(), attempts: attempt, last }
        } else {
            usage.record_retry(id, wait);
            let message = format!(
                "model {id}: attempt {attempt}/{max_attempts} failed ({}); retrying in {:.1} s",
                failure.message,
                wait.as_secs_f64()
            );
            // Visible by default, and long waits even with -q: a server that is
            // down or throttling should not look like a hang.
            if wait >= VISIBLE_WAIT {
                tracing::warn!("{message}");
            } else {
                tracing::info!("{message}");
            }
            return Ok(wait);
        };
        usage.record_failure(id);
        self.breaker.failed(id, &error);
        Err(error)
    }

    /// Counts the outcome of one model call for the circuit breaker: a
    /// success closes the count, an answer that stayed unusable adds to it
    /// (failed requests were counted by [`Self::after_failure`]).
    pub(crate) fn settle<R>(&self, result: Result<R, LlmError>) -> Result<R, LlmError> {
        match &result {
            Ok(_) => self.breaker.succeeded(),
            Err(e @ LlmError::InvalidAnswer { .. }) => self.breaker.failed(&self.id, e),
            Err(_) => {}
        }
        result
    }

    /// [`Self::settle`] for a call whose answer is read and checked once, by
    /// `send`'s `keep` (embeddings, rerank scores: no repair prompt): an
    /// answer that did not pass is a malformed one, counted in `usage` and by
    /// the breaker.
    pub(crate) fn settle_checked<R>(
        &self,
        usage: &UsageCounters,
        result: Result<Result<R, String>, LlmError>,
    ) -> Result<R, LlmError> {
        let result = match result {
            Ok(answer) => answer.map_err(|reason| {
                usage.record_invalid(&self.id, super::InvalidKind::Malformed);
                usage.record_answer_failure(&self.id);
                LlmError::InvalidAnswer { model: self.id.clone(), kind: "malformed", reason, attempts: 1 }
            }),
            Err(e) => Err(e),
        };
        self.settle(result)
    }
}

/// Stops calling a model after `limit` calls in a row failed for good: a
/// dead endpoint, a wrong model name or a model that only writes garbage
/// would otherwise be asked once per remaining item.
struct Breaker {
    limit: u32,
    consecutive: AtomicU32,
    open: Mutex<Option<String>>,
}

impl Breaker {
    fn new(limit: u32) -> Self {
        Breaker { limit: limit.max(1), consecutive: AtomicU32::new(0), open: Mutex::new(None) }
    }

    fn check(&self, id: &str) -> Result<(), LlmError> {
        match &*self.open.lock().unwrap() {
            Some(last) => Err(LlmError::Stopped { model: id.to_string(), failures: self.limit, last: last.clone() }),
            None => Ok(()),
        }
    }

    fn succeeded(&self) {
        self.consecutive.store(0, Ordering::SeqCst);
    }

    fn failed(&self, id: &str, error: &LlmError) {
        if self.consecutive.fetch_add(1, Ordering::SeqCst) + 1 >= self.limit {
            let mut open = self.open.lock().unwrap();
            if open.is_none() {
                tracing::warn!(
                    "model {id}: {} calls in a row failed; no further requests are sent this run (max_consecutive_failures). Last: {error}",
                    self.limit
                );
                *open = Some(error.to_string());
            }
        }
    }
}

/// The model's backoff (exponential, with jitter, capped: see
/// `RetryPolicy`). A server's Retry-After is honoured up to the same cap
/// (`max_retry_wait`, or GraphRAG's `retry.max_delay`): past it, the request
/// is retried sooner (and may be refused again) rather than stalling the run.
pub(crate) fn backoff(config: &ModelConfig, attempt: u32, retry_after: Option<Duration>) -> Duration {
    let policy = config.retry_policy();
    let cap = duration_of_seconds(policy.max_delay);
    retry_after.unwrap_or_else(|| duration_of_seconds(policy.wait(attempt, jitter_fraction()))).min(cap)
}

/// A fraction in [0, 1) from the clock: jitter only needs to decorrelate
/// concurrent retries, not to be reproducible.
fn jitter_fraction() -> f64 {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let mut x = nanos as u64 ^ 0x9E37_79B9_7F4A_7C15;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    (x % 10_000) as f64 / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(retry_after: Option<Duration>) -> Failure {
        Failure { retryable: true, status: Some(429), message: "HTTP 429".into(), retry_after }
    }

    #[test]
    fn backoff_grows_and_every_wait_is_capped_retry_after_included() {
        let cfg = ModelConfig { retry_base_delay: 1.0, max_retry_wait: 10.0, ..ModelConfig::default() };
        let b1 = backoff(&cfg, 1, None);
        assert!(b1 >= Duration::from_millis(500) && b1 <= Duration::from_secs(1), "{b1:?}");
        let b3 = backoff(&cfg, 3, None);
        assert!(b3 >= Duration::from_secs(2) && b3 <= Duration::from_secs(4), "{b3:?}");
        assert!(backoff(&cfg, 20, None) <= Duration::from_secs(10));
        assert_eq!(backoff(&cfg, 1, Some(Duration::from_secs(7))), Duration::from_secs(7));
        // One 429 with Retry-After: 600 costs at most max_retry_wait.
        let cfg = ModelConfig { max_retry_wait: 2.0, ..cfg };
        assert_eq!(backoff(&cfg, 1, Some(Duration::from_secs(600))), Duration::from_secs(2));
    }

    #[test]
    fn the_time_budget_ends_retrying() {
        let cfg = ModelConfig { max_retry_wait: 2.0, max_retry_time: 10.0, max_retries: 100, ..ModelConfig::default() };
        let policy = Policy::new("m", &cfg);
        let usage = UsageCounters::default();
        let none = CallScope::default();
        let wait =
            policy.after_failure(&usage, 1, Duration::from_secs(3), failure(Some(Duration::from_secs(600))), &none);
        assert_eq!(wait.unwrap(), Duration::from_secs(2));
        let err = policy.after_failure(&usage, 5, Duration::from_secs(9), failure(None), &none).unwrap_err();
        assert!(matches!(err, LlmError::Exhausted { attempts: 5, .. }), "{err}");
        assert!(err.to_string().contains("max_retry_time is 10 s"), "{err}");
        let u = usage.total();
        assert_eq!((u.retries, u.retry_wait_ms, u.failures), (1, 2000, 1));
    }

    #[test]
    fn durations_beyond_a_duration_never_panic() {
        // A ModelConfig built in code is not validated: 1e20 s (past a
        // Duration's 1.8e19 s) in every key, and a Retry-After as long as
        // any, still give a wait.
        let huge = 1e20;
        let cfg = ModelConfig {
            max_retry_wait: huge,
            max_retry_time: huge,
            retry_base_delay: huge,
            max_retries: 100,
            ..ModelConfig::default()
        };
        let policy = Policy::new("m", &cfg);
        let usage = UsageCounters::default();
        let scope = CallScope { retry_budget: Some(RetryBudget::new(Duration::MAX, "no end")), ..CallScope::default() };
        let wait = policy.after_failure(&usage, 1, Duration::from_secs(3), failure(Some(Duration::MAX)), &scope);
        assert_eq!(wait.unwrap(), Duration::MAX, "capped by max_retry_wait, itself past a Duration");
        let wait = policy.after_failure(&usage, 2, Duration::from_secs(3), failure(None), &scope).unwrap();
        assert!(wait <= Duration::from_secs(86_400), "{wait:?}");
        assert_eq!(usage.total().retry_wait_ms, u64::MAX, "the total saturates");
    }

    #[test]
    fn a_scope_s_budget_counts_from_its_first_failure_across_calls() {
        let cfg =
            ModelConfig { max_retry_wait: 2.0, max_retry_time: 300.0, max_retries: 100, ..ModelConfig::default() };
        let policy = Policy::new("m", &cfg);
        let usage = UsageCounters::default();
        let why = "query.max_retry_time is 1 s";
        let scope =
            CallScope { retry_budget: Some(RetryBudget::new(Duration::from_secs(1), why)), ..CallScope::default() };
        // However long the request ran before, its first failure may be retried.
        let soon = Duration::from_millis(10);
        assert_eq!(
            policy.after_failure(&usage, 1, Duration::from_secs(60), failure(Some(soon)), &scope).unwrap(),
            soon
        );
        // Another call of the scope: the clock runs from that first failure.
        let err = policy.after_failure(&usage, 1, Duration::ZERO, failure(Some(Duration::from_secs(2))), &scope);
        let err = err.unwrap_err();
        assert!(matches!(err, LlmError::Exhausted { attempts: 1, .. }) && err.to_string().contains(why), "{err}");
    }

    /// What a console at `-q` (warnings and errors) shows.
    #[derive(Clone, Default)]
    struct Quiet(std::sync::Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Quiet {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn long_waits_show_even_when_quiet() {
        let policy = Policy::new("m", &ModelConfig { max_retry_wait: 60.0, ..ModelConfig::default() });
        let quiet = Quiet::default();
        let console = tracing_subscriber::fmt()
            .with_writer({
                let q = quiet.clone();
                move || q.clone()
            })
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(console, || {
            let usage = UsageCounters::default();
            for secs in [10, 1] {
                let wait = policy.after_failure(
                    &usage,
                    1,
                    Duration::ZERO,
                    failure(Some(Duration::from_secs(secs))),
                    &CallScope::default(),
                );
                assert_eq!(wait.unwrap(), Duration::from_secs(secs));
            }
        });
        let shown = String::from_utf8(quiet.0.lock().unwrap().clone()).unwrap();
        assert!(shown.contains("retrying in 10.0 s"), "{shown}");
        assert!(!shown.contains("retrying in 1.0 s"), "{shown}");
    }

    #[test]
    fn not_retryable_failures_end_at_once() {
        let policy = Policy::new("m", &ModelConfig::default());
        let usage = UsageCounters::default();
        let f = Failure { retryable: false, status: Some(401), message: "HTTP 401: bad key".into(), retry_after: None };
        let err = policy.after_failure(&usage, 1, Duration::ZERO, f, &CallScope::default()).unwrap_err();
        assert!(matches!(err, LlmError::Rejected { status: 401, .. }), "{err}");
        assert_eq!(usage.total().retries, 0);
    }

    #[test]
    fn the_breaker_opens_after_consecutive_final_failures_only() {
        let cfg = ModelConfig { max_consecutive_failures: 3, max_retries: 0, ..ModelConfig::default() };
        let policy = Policy::new("m", &cfg);
        let usage = UsageCounters::default();
        let request_failed = || {
            let f = Failure { retryable: true, status: Some(503), message: "down".into(), retry_after: None };
            assert!(policy.after_failure(&usage, 1, Duration::ZERO, f, &CallScope::default()).is_err());
        };
        let unusable = || -> Result<(), LlmError> {
            Err(LlmError::InvalidAnswer { model: "m".into(), kind: "malformed", reason: "garbage".into(), attempts: 3 })
        };
        request_failed();
        assert!(policy.settle(unusable()).is_err());
        policy.settle(Ok(())).unwrap();
        request_failed();
        let _ = policy.settle(unusable());
        let _ = policy.settle(Err::<(), _>(LlmError::Interrupted(crate::interrupt::Interrupted)));
        assert!(policy.breaker.check("m").is_ok(), "two in a row since the last success");
        request_failed();
        let err = policy.breaker.check("m").unwrap_err();
        assert!(matches!(err, LlmError::Stopped { failures: 3, .. }), "{err}");
        assert!(err.to_string().contains("down"), "{err}");
    }
}
