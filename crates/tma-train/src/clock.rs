//! Injected time (ARCHITECTURE.md, invariants): schedules are tested without sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A monotone clock measuring time since the start of a run.
pub trait Clock: Send + Sync {
    /// Time elapsed since the clock started.
    fn elapsed(&self) -> Duration;
    /// Block the calling thread for `d` (a manual clock returns at once).
    fn sleep(&self, d: Duration);
}

/// Wall-clock time.
pub struct RealClock {
    start: Instant,
}

impl RealClock {
    /// A clock starting now.
    pub fn start() -> Self {
        RealClock {
            start: Instant::now(),
        }
    }
}

impl Clock for RealClock {
    fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d)
    }
}

/// A clock that moves only when told to (tests); `sleep` advances it.
#[derive(Clone, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.nanos.fetch_add(d.as_nanos() as u64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn elapsed(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
    fn sleep(&self, d: Duration) {
        self.advance(d);
        std::thread::yield_now();
    }
}

/// Round `k` (1-based) of a time-based schedule is due at `k * sync_every`; the last round
/// is at `time_limit`. Returns the due time of round `k`, capped at the limit.
pub fn round_due_at(k: u64, sync_every: Duration, time_limit: Duration) -> Duration {
    sync_every
        .checked_mul(k as u32)
        .unwrap_or(time_limit)
        .min(time_limit)
}

/// Number of rounds a time-based schedule makes within `time_limit` (the last one at the limit).
pub fn num_rounds(sync_every: Duration, time_limit: Duration) -> u64 {
    let n = time_limit.as_nanos().div_ceil(sync_every.as_nanos());
    n.max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_values() {
        let s = Duration::from_secs(2);
        let t = Duration::from_secs(7);
        assert_eq!(num_rounds(s, t), 4);
        assert_eq!(round_due_at(1, s, t), Duration::from_secs(2));
        assert_eq!(round_due_at(3, s, t), Duration::from_secs(6));
        assert_eq!(round_due_at(4, s, t), Duration::from_secs(7));
        assert_eq!(num_rounds(s, Duration::from_secs(6)), 3);
    }

    #[test]
    fn manual_clock_moves_on_sleep() {
        let c = ManualClock::default();
        assert_eq!(c.elapsed(), Duration::ZERO);
        c.sleep(Duration::from_millis(1500));
        assert_eq!(c.elapsed(), Duration::from_millis(1500));
    }
}
