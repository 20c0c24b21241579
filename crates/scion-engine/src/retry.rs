//! The one retry policy for a compare-and-swap that lost its race: every read-modify-write
//! of a ref or of the manifest, and every head publish, retries through [`CasRetry`].
//!
//! Racers that retry at once collide again at once (a lease renewal and a touch can burn
//! eight tries in a millisecond), so each retry waits first: exponentially longer each
//! time, capped, with jitter so that two racers that collided do not wake together.

use std::time::Duration;

/// How often a compare-and-swap is tried in all, the first try included.
pub(crate) const CAS_TRIES: u32 = 8;

/// The first wait; each next one doubles, up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(2);
const MAX_WAIT: Duration = Duration::from_millis(100);

/// The tries of one compare-and-swap. Call [`CasRetry::again`] after each lost race.
#[derive(Debug, Default)]
pub(crate) struct CasRetry {
    retries: u32,
}

impl CasRetry {
    /// The first try.
    pub fn new() -> Self {
        Self::default()
    }

    /// After a lost race: false when the tries are spent; else waits and returns true.
    pub fn again(&mut self) -> bool {
        if self.retries + 1 >= CAS_TRIES {
            return false;
        }
        let wait = self.wait();
        self.retries += 1;
        std::thread::sleep(wait);
        true
    }

    /// The wait before the next try: half the backoff fixed, half drawn at random.
    fn wait(&self) -> Duration {
        let backoff = FIRST_WAIT
            .saturating_mul(1 << self.retries.min(16))
            .min(MAX_WAIT);
        let mut b = [0u8; 4];
        let random = match getrandom::fill(&mut b) {
            Ok(()) => u32::from_le_bytes(b),
            Err(_) => u32::MAX / 2,
        };
        let half = backoff / 2;
        half + half.mul_f64(f64::from(random) / f64::from(u32::MAX))
    }
}

/// Retry a whole write operation when its freshly drawn segment id turned out taken.
pub(crate) fn with_fresh_ids<T>(
    mut f: impl FnMut() -> crate::EngineResult<T>,
) -> crate::EngineResult<T> {
    let mut tries = 0;
    loop {
        match f() {
            Err(crate::EngineError::SegmentCollision { .. }) if tries < 3 => tries += 1,
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_gives_up_after_the_tries_and_waits_longer_each_time() {
        let mut r = CasRetry::new();
        let mut waits = Vec::new();
        while r.retries + 1 < CAS_TRIES {
            waits.push(r.wait());
            assert!(r.again());
        }
        assert!(!r.again(), "the tries are spent");
        assert_eq!(r.retries + 1, CAS_TRIES);
        for (i, w) in waits.iter().enumerate() {
            let backoff = FIRST_WAIT.saturating_mul(1 << i).min(MAX_WAIT);
            assert!(*w >= backoff / 2 && *w <= backoff, "wait {i}: {w:?}");
        }
    }
}
