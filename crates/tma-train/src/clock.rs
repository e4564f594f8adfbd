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

/// When the next round of a time-based schedule is due, the previous one having formed at
/// `after`: the first slot `k * sync_every` strictly after `after`, capped at `time_limit`.
/// Slots that passed while the previous round was late (a paid round deadline, a slow
/// validation) are skipped, not made up by rounds back to back
/// (docs/decisions/0007-trainer-failures.md). A run that has formed no round yet uses its
/// start (0, or the training time a resumed run continues from).
pub fn next_round_due(after: Duration, sync_every: Duration, time_limit: Duration) -> Duration {
    if sync_every.is_zero() {
        return after.min(time_limit);
    }
    let k = after.as_nanos() / sync_every.as_nanos() + 1;
    let due = sync_every.as_nanos().saturating_mul(k);
    Duration::from_nanos(due.min(time_limit.as_nanos()) as u64)
}

/// Most rounds a ramp may cut the first span into (the shortest span is then
/// `sync_every / MAX_SYNC_RAMP`).
pub const MAX_SYNC_RAMP: u32 = 1024;

/// The ramp's slots, earliest first: the first span cut into `ramp` equal spans,
/// `sync_every * k / ramp` for `k = 1 .. ramp - 1` (`ramp - 1` extra rounds; 0 or 1: none;
/// capped at [`MAX_SYNC_RAMP`]); the regular slots `k * sync_every` follow. Frequent averaging
/// while the model learns most, then the paper's span: post-local SGD's warm-up
/// (docs/decisions/0015-averaging-ramp.md).
pub fn ramp_slots(sync_every: Duration, ramp: u32) -> impl Iterator<Item = Duration> {
    let ramp = ramp.clamp(1, MAX_SYNC_RAMP);
    (1..ramp).map(move |k| sync_every * k / ramp)
}

/// [`next_round_due`] with a ramp of `ramp` extra rounds within the first span
/// ([`ramp_slots`]; `--sync-ramp`, docs/decisions/0015-averaging-ramp.md): the first ramp
/// slot strictly after `after`, else the first regular slot after it.
pub fn next_round_due_ramped(
    after: Duration,
    sync_every: Duration,
    ramp: u32,
    time_limit: Duration,
) -> Duration {
    if !sync_every.is_zero() {
        if let Some(slot) = ramp_slots(sync_every, ramp).find(|&s| s > after) {
            return slot.min(time_limit);
        }
    }
    next_round_due(after, sync_every, time_limit)
}

/// [`skipped_slots`] of a ramped schedule: the regular slots skipped plus the ramp slots in
/// `(due, formed]` before `time_limit`.
pub fn skipped_slots_ramped(
    due: Duration,
    formed: Duration,
    sync_every: Duration,
    ramp: u32,
    time_limit: Duration,
) -> u64 {
    let last = formed.min(time_limit.saturating_sub(Duration::from_nanos(1)));
    let in_ramp = ramp_slots(sync_every, ramp)
        .filter(|&s| s > due && s <= last)
        .count() as u64;
    skipped_slots(due, formed, sync_every, time_limit) + in_ramp
}

/// Slots of a time-based schedule skipped by a round due at `due` that formed at `formed`:
/// the slots `k * sync_every` in `(due, formed]` before `time_limit`, which
/// [`next_round_due`] passes over (the time limit is the last round's own slot, never
/// skipped: a round that waited until then is the last one).
pub fn skipped_slots(
    due: Duration,
    formed: Duration,
    sync_every: Duration,
    time_limit: Duration,
) -> u64 {
    let formed = formed.min(time_limit.saturating_sub(Duration::from_nanos(1)));
    if sync_every.is_zero() || formed <= due {
        return 0;
    }
    let s = sync_every.as_nanos();
    (formed.as_nanos() / s).saturating_sub(due.as_nanos() / s) as u64
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
    fn skipped_slots_are_the_slots_passed_while_a_round_was_late() {
        let s = Duration::from_secs(5);
        let secs = Duration::from_secs_f64;
        let limit = secs(60.0);
        // the round due at 15 s formed at 30.5 s (a validation backlog): 20, 25 and 30 skipped
        assert_eq!(skipped_slots(secs(15.0), secs(30.5), s, limit), 3);
        assert_eq!(next_round_due(secs(30.5), s, limit), secs(35.0));
        // late by less than one period: nothing skipped
        assert_eq!(skipped_slots(secs(15.0), secs(19.9), s, limit), 0);
        assert_eq!(skipped_slots(secs(15.0), secs(20.0), s, limit), 1);
        assert_eq!(skipped_slots(secs(15.0), secs(14.0), s, limit), 0);
        assert_eq!(
            skipped_slots(secs(15.0), secs(40.0), Duration::ZERO, limit),
            0
        );
        // regression: a round due at 3 s that waited until the 8 s limit (validation backlog)
        // is the last round: 4, 5, 6 and 7 were skipped, the limit is its own slot
        let (one, eight) = (secs(1.0), secs(8.0));
        assert_eq!(skipped_slots(secs(3.0), secs(8.05), one, eight), 4);
        // the last round on time (due at the limit, formed just after it): nothing skipped
        assert_eq!(skipped_slots(eight, secs(8.02), one, eight), 0);
        assert_eq!(skipped_slots(secs(6.0), secs(8.02), secs(3.0), eight), 0);
    }

    #[test]
    fn ramped_schedule_slots() {
        let secs = Duration::from_secs_f64;
        let (s, limit) = (secs(10.0), secs(60.0));
        // ramp 8: every 1.25 s inside the first span, then 10, 20, ...
        let slots: Vec<Duration> = ramp_slots(s, 8).collect();
        let want: Vec<Duration> = [1.25, 2.5, 3.75, 5.0, 6.25, 7.5, 8.75]
            .into_iter()
            .map(secs)
            .collect();
        assert_eq!(slots, want);
        assert_eq!(next_round_due_ramped(secs(0.0), s, 8, limit), secs(1.25));
        assert_eq!(next_round_due_ramped(secs(1.25), s, 8, limit), secs(2.5));
        assert_eq!(next_round_due_ramped(secs(3.0), s, 8, limit), secs(3.75));
        assert_eq!(next_round_due_ramped(secs(8.75), s, 8, limit), secs(10.0));
        assert_eq!(next_round_due_ramped(secs(10.2), s, 8, limit), secs(20.0));
        // no ramp (0 or 1): the regular schedule
        assert_eq!(next_round_due_ramped(secs(0.0), s, 0, limit), secs(10.0));
        assert_eq!(next_round_due_ramped(secs(0.0), s, 1, limit), secs(10.0));
        assert_eq!(ramp_slots(s, 1).count(), 0);
        // a limit inside the ramp caps the slot
        assert_eq!(next_round_due_ramped(secs(1.3), s, 8, secs(2.0)), secs(2.0));
        // a resumed run past the ramp: regular slots
        assert_eq!(next_round_due_ramped(secs(31.0), s, 8, limit), secs(40.0));
        // capped at MAX_SYNC_RAMP
        assert_eq!(ramp_slots(s, 5000).count(), MAX_SYNC_RAMP as usize - 1);
        // the round due at 1.25 s formed at 5.5 s: 2.5, 3.75 and 5 skipped; at 11 s: the six
        // ramp slots after 1.25 s and 10
        assert_eq!(skipped_slots_ramped(secs(1.25), secs(5.5), s, 8, limit), 3);
        assert_eq!(skipped_slots_ramped(secs(1.25), secs(11.0), s, 8, limit), 7);
        assert_eq!(skipped_slots_ramped(secs(1.25), secs(2.0), s, 8, limit), 0);
        // a ramp of 1024 over 100 ms spans (a fresh user's case): the round due at the ramp
        // slot 50 ms (k = 512) formed at 480 ms passed ramp slots k = 513 ..= 1023 (511) and
        // the regular slots 100, 200, 300, 400 ms (4); the next round is due at 500 ms
        let tenth = secs(0.1);
        let due = ramp_slots(tenth, 1024).nth(511).unwrap();
        assert_eq!(due, secs(0.05));
        assert_eq!(
            skipped_slots_ramped(due, secs(0.48), tenth, 1024, limit),
            511 + 4
        );
        assert_eq!(
            next_round_due_ramped(secs(0.48), tenth, 1024, limit),
            secs(0.5)
        );
        // with 1 s spans the ramp's last slot is 999.02 ms: a round due then that formed 5 ms
        // later passed the regular slot 1 s (1 skipped); the next round is due at 2 s
        let one = secs(1.0);
        let last = ramp_slots(one, 1024).last().unwrap();
        assert_eq!(last, one * 1023 / 1024);
        let formed = last + Duration::from_millis(5);
        assert_eq!(skipped_slots_ramped(last, formed, one, 1024, limit), 1);
        assert_eq!(next_round_due_ramped(formed, one, 1024, limit), secs(2.0));
        assert_eq!(
            skipped_slots_ramped(last, last + Duration::from_micros(500), one, 1024, limit),
            0
        );
    }

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
    fn next_round_skips_the_slots_that_passed() {
        let ms = Duration::from_millis;
        let (s, t) = (ms(1000), ms(7000));
        // on time: the next slot
        assert_eq!(next_round_due(ms(0), s, t), ms(1000));
        assert_eq!(next_round_due(ms(1000), s, t), ms(2000));
        assert_eq!(next_round_due(ms(1003), s, t), ms(2000));
        // formed 2.5 s late (a paid deadline): slots 3 and 4 are skipped
        assert_eq!(next_round_due(ms(4500), s, t), ms(5000));
        // capped at the time limit, also past it
        assert_eq!(next_round_due(ms(6500), s, t), ms(7000));
        assert_eq!(next_round_due(ms(9000), s, t), ms(7000));
        // a resumed run continues from its training time
        assert_eq!(next_round_due(ms(3200), s, t), ms(4000));
    }

    #[test]
    fn manual_clock_moves_on_sleep() {
        let c = ManualClock::default();
        assert_eq!(c.elapsed(), Duration::ZERO);
        c.sleep(Duration::from_millis(1500));
        assert_eq!(c.elapsed(), Duration::from_millis(1500));
    }
}
