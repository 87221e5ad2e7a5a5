//! A token-bucket rate limiter for outgoing API calls.
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One bucket: `capacity` tokens, refilled at `rate` tokens per second.
#[derive(Debug, Clone)]
pub struct Bucket {
    capacity: f64,
    tokens: f64,
    rate: f64,
    last: Instant,
}

impl Bucket {
    pub fn new(capacity: f64, rate: f64) -> Self {
        Bucket { capacity, tokens: capacity, rate, last: Instant::now() }
    }

    /// Adds the tokens earned since the last call.
    fn refill(&mut self, now: Instant) {
        let elapsed = now.duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.capacity);
        self.last = now;
    }

    pub fn try_take(&mut self, now: Instant) -> bool {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    pub fn wait_time(&self) -> Duration {
        if self.tokens >= 1.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64((1.0 - self.tokens) / self.rate)
    }
}

pub struct Limiter {
    buckets: HashMap<String, Bucket>,
    capacity: f64,
    rate: f64,
}

impl Limiter {
    pub fn new(capacity: f64, rate: f64) -> Self {
        Limiter { buckets: HashMap::new(), capacity, rate }
    }

    pub fn allow(&mut self, key: &str) -> bool {
        let (capacity, rate) = (self.capacity, self.rate);
        let bucket = self
            .buckets
            .entry(key.to_string())
            .or_insert_with(|| Bucket::new(capacity, rate));
        bucket.try_take(Instant::now())
    }
}

pub fn describe(limiter: &Limiter) -> String {
    format!("{} keys, {} per second", limiter.buckets.len(), limiter.rate)
}
