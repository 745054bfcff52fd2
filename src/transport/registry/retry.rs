//! When to try a registry request again, and how long to wait first.
//!
//! Connection errors, `408 Request Timeout`, `429 Too Many Requests` and
//! every `5xx` are worth another try; anything else is an answer. Waits
//! grow exponentially from [`RetryPolicy::base`] with "full jitter" (a
//! random point between half the step and the step, so many clients do
//! not come back in lockstep), capped at [`RetryPolicy::max_delay`]; a
//! `Retry-After` the server sent is honoured instead when it is longer.
//! Nothing is retried once [`RetryPolicy::total`] has passed since the
//! first attempt, so a transfer is bounded in time whatever the server
//! does.

use std::time::{Duration, Instant, SystemTime};

#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    pub base: Duration,
    pub max_delay: Duration,
    /// No retry starts after this long since the first attempt.
    pub total: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 6,
            base: Duration::from_millis(200),
            max_delay: Duration::from_secs(30),
            total: Duration::from_secs(600),
        }
    }
}

/// What went wrong with one attempt, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// Worth another try (connection error, 408, 429, 5xx), perhaps after
    /// the wait the server asked for.
    Transient { retry_after: Option<Duration> },
    /// An answer: trying again would get the same one.
    Final,
}

/// Whether an HTTP status is worth another try.
pub fn transient_status(code: u16) -> bool {
    code == 408 || code == 429 || (500..600).contains(&code)
}

impl RetryPolicy {
    /// The wait before attempt `attempt + 1` (after `attempt` failed ones,
    /// 1-based), or `None` to give up. `jitter` is in `[0, 1)`.
    pub fn next_delay(
        &self,
        attempt: u32,
        outcome: Attempt,
        started: Instant,
        now: Instant,
        jitter: f64,
    ) -> Option<Duration> {
        let Attempt::Transient { retry_after } = outcome else {
            return None;
        };
        if attempt >= self.max_attempts {
            return None;
        }
        let step = self
            .base
            .saturating_mul(1u32 << (attempt - 1).min(16))
            .min(self.max_delay);
        let jittered = step.mul_f64(0.5 + jitter.clamp(0.0, 1.0) / 2.0);
        let wait = match retry_after {
            // The server's wish, but not beyond what the bound allows.
            Some(ra) => ra.max(jittered),
            None => jittered,
        };
        let elapsed = now.saturating_duration_since(started);
        if elapsed + wait > self.total {
            return None;
        }
        Some(wait)
    }
}

/// Parses a `Retry-After` value: delay-seconds or an HTTP-date (RFC 9110
/// §10.2.3). A date in the past means now; garbage means no advice.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Attempt = Attempt::Transient { retry_after: None };

    #[test]
    fn backoff_grows_with_jitter_and_is_capped() {
        let p = RetryPolicy {
            max_attempts: 10,
            base: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
            total: Duration::from_secs(60),
        };
        let t0 = Instant::now();
        let d = |n, j| p.next_delay(n, T, t0, t0, j).unwrap();
        assert_eq!(d(1, 0.0), Duration::from_millis(50));
        assert_eq!(d(1, 0.999_999).as_millis(), 99);
        assert_eq!(d(2, 0.0), Duration::from_millis(100));
        assert_eq!(d(3, 0.0), Duration::from_millis(200));
        assert_eq!(d(9, 0.0), Duration::from_millis(500), "capped at max_delay");
        assert!(d(4, 0.5) > d(4, 0.0) && d(4, 0.5) < d(4, 0.9));
    }

    #[test]
    fn gives_up_on_answers_attempts_and_total_time() {
        let p = RetryPolicy {
            max_attempts: 3,
            ..RetryPolicy::default()
        };
        let t0 = Instant::now();
        assert_eq!(p.next_delay(1, Attempt::Final, t0, t0, 0.0), None);
        assert!(p.next_delay(2, T, t0, t0, 0.0).is_some());
        assert_eq!(p.next_delay(3, T, t0, t0, 0.0), None);
        let late = t0 + p.total - Duration::from_millis(10);
        assert_eq!(p.next_delay(1, T, t0, late, 0.0), None);
    }

    #[test]
    fn retry_after_is_honoured_within_the_bound() {
        let p = RetryPolicy::default();
        let t0 = Instant::now();
        let ra = |s| Attempt::Transient {
            retry_after: Some(Duration::from_secs(s)),
        };
        assert_eq!(
            p.next_delay(1, ra(7), t0, t0, 0.0),
            Some(Duration::from_secs(7))
        );
        // A wait past the total bound is not waited: the error comes now.
        assert_eq!(p.next_delay(1, ra(10_000), t0, t0, 0.0), None);
    }

    #[test]
    fn statuses() {
        for c in [408, 429, 500, 502, 503, 504, 599] {
            assert!(transient_status(c), "{c}");
        }
        for c in [200, 201, 400, 401, 403, 404, 409, 416] {
            assert!(!transient_status(c), "{c}");
        }
    }

    #[test]
    fn parses_retry_after() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            parse_retry_after("120", now),
            Some(Duration::from_secs(120))
        );
        assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        for bad in ["", "soon", "-5", "1.5"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad}");
        }
    }
}
