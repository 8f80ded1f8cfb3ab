//! Per-model limits: at most `concurrent_requests` in flight, and token
//! buckets for requests and tokens per period (`rate_limit`, or
//! requests/tokens per minute; prompt tokens counted before sending).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, SemaphorePermit};

use crate::settings::{ModelConfig, RateLimit};

struct Bucket {
    capacity: f64,
    available: f64,
    per_second: f64,
    last: Instant,
}

impl Bucket {
    /// A full bucket of `limit` refilled evenly over its period.
    fn new(rate: RateLimit) -> Self {
        Bucket {
            capacity: rate.limit as f64,
            available: rate.limit as f64,
            per_second: rate.limit as f64 / rate.period_seconds.max(1) as f64,
            last: Instant::now(),
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.duration_since(self.last).as_secs_f64();
        self.available = (self.available + elapsed * self.per_second).min(self.capacity);
        self.last = now;
    }

    /// Time until `cost` is available (a cost above capacity waits for a full bucket).
    fn wait_for(&self, cost: f64) -> Duration {
        let cost = cost.min(self.capacity);
        if self.available >= cost {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((cost - self.available) / self.per_second)
        }
    }
}

pub(crate) struct Limiter {
    in_flight: Semaphore,
    requests: Option<Mutex<Bucket>>,
    tokens: Option<Mutex<Bucket>>,
}

impl Limiter {
    pub(crate) fn new(config: &ModelConfig) -> Self {
        Limiter {
            in_flight: Semaphore::new(config.concurrency() as usize),
            requests: config.request_limit().map(|r| Mutex::new(Bucket::new(r))),
            tokens: config.token_limit().map(|t| Mutex::new(Bucket::new(t))),
        }
    }

    /// Whether a tokens-per-period limit is set.
    pub(crate) fn limits_tokens(&self) -> bool {
        self.tokens.is_some()
    }

    /// Waits for a concurrency slot and for both buckets to allow one request
    /// of `prompt_tokens`, then takes them. Hold the permit for the request.
    pub(crate) async fn acquire(&self, prompt_tokens: u64) -> SemaphorePermit<'_> {
        let permit = self.in_flight.acquire().await.expect("semaphore never closed");
        loop {
            let wait = self.try_take(prompt_tokens as f64);
            if wait.is_zero() {
                return permit;
            }
            if wait >= Duration::from_secs(5) {
                tracing::warn!(
                    "waiting {:.0} s for the rate limit (requests_per_minute / tokens_per_minute)",
                    wait.as_secs_f64()
                );
            }
            tokio::time::sleep(wait).await;
        }
    }

    fn try_take(&self, cost: f64) -> Duration {
        let now = Instant::now();
        let mut req = self.requests.as_ref().map(|b| b.lock().unwrap());
        let mut tok = self.tokens.as_ref().map(|b| b.lock().unwrap());
        let mut wait = Duration::ZERO;
        if let Some(b) = req.as_mut() {
            b.refill(now);
            wait = wait.max(b.wait_for(1.0));
        }
        if let Some(b) = tok.as_mut() {
            b.refill(now);
            wait = wait.max(b.wait_for(cost));
        }
        if wait.is_zero() {
            if let Some(b) = req.as_mut() {
                b.available -= 1.0;
            }
            if let Some(b) = tok.as_mut() {
                b.available -= cost.min(b.capacity);
            }
        }
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_limit_and_refill() {
        let mut b = Bucket::new(RateLimit { limit: 60, period_seconds: 60 });
        assert_eq!(b.wait_for(60.0), Duration::ZERO);
        b.available = 0.0;
        assert_eq!(b.wait_for(1.0), Duration::from_secs(1));
        let later = b.last + Duration::from_secs(30);
        b.refill(later);
        assert!((b.available - 30.0).abs() < 1e-9);
        assert_eq!(b.wait_for(1000.0), Duration::from_secs(30), "over-capacity cost waits for a full bucket");
    }

    #[test]
    fn request_bucket_blocks_after_limit() {
        let cfg = ModelConfig { requests_per_minute: Some(2), ..ModelConfig::default() };
        let l = Limiter::new(&cfg);
        assert!(l.try_take(10.0).is_zero());
        assert!(l.try_take(10.0).is_zero());
        let wait = l.try_take(10.0);
        assert!(wait > Duration::from_secs(25), "{wait:?}");
    }

    #[test]
    fn graphrag_rate_limit_period_sets_the_refill() {
        let rl = crate::settings::RateLimitConfig {
            period_in_seconds: Some(10),
            requests_per_period: Some(1),
            ..Default::default()
        };
        let l = Limiter::new(&ModelConfig { rate_limit: Some(rl), ..ModelConfig::default() });
        assert!(l.try_take(10.0).is_zero());
        let wait = l.try_take(10.0);
        assert!(wait > Duration::from_secs(9) && wait <= Duration::from_secs(10), "{wait:?}");
    }
}
