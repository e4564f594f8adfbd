//! The transport between the coordinator and its trainers (ARCHITECTURE.md, invariants: trainers never
//! talk to each other; only trainer <-> coordinator, through this one abstraction).
//!
//! [`InProcess`] implements it with threads and channels. An MPI implementation (one process
//! per rank) plugs in behind the same two traits, so the algorithm code in
//! [`crate::engines::coordinator`] and [`crate::engines::trainer`] runs unchanged over both.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a trainer tells the coordinator when it joins a round.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrainerReport {
    /// Optimizer steps since this trainer started (after `--resume`, since the resume; the
    /// coordinator adds the checkpointed count, [`crate::evaluation::record::Resume::steps`]).
    pub steps: u64,
    /// Completed passes over the trainer's training data.
    pub epochs: u64,
    /// Sum and count of mini-batch losses since the previous round.
    pub loss_sum: f64,
    /// Number of losses summed in `loss_sum`.
    pub loss_count: u64,
}

/// A trainer's copy of its current parameters for a validation check between averaging
/// rounds (`--val-check-interval`): taken after the step in progress, never answered, so the
/// trainer goes on at once with its own parameters (the check does not change training).
#[derive(Clone, Debug)]
pub struct CheckDeposit {
    /// The check it answers (1-based, as called by [`CoordinatorEndpoint::call_check`]).
    pub id: u64,
    /// The trainer's parameters, flat in `ParamSet` order.
    pub params: Vec<f32>,
    /// Its optimizer steps since it started (as [`TrainerReport::steps`]).
    pub steps: u64,
    /// Its completed passes over its training data.
    pub epochs: u64,
}

/// One trainer's contribution to a round.
#[derive(Clone, Debug)]
pub struct Contribution {
    /// The trainer index.
    pub trainer: usize,
    /// Its parameters (or, for GGS, its gradient), flat in `ParamSet` order.
    pub params: Vec<f32>,
    /// Its counters since the previous exchange.
    pub report: TrainerReport,
}

/// The coordinator's answer to a trainer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Continue training from these (averaged) parameters.
    Continue(Arc<Vec<f32>>),
    /// The run is over; these are the final parameters.
    Stop(Arc<Vec<f32>>),
}

/// A trainer's side of the transport.
pub trait TrainerEndpoint: Send {
    /// Waits for the initial parameters (identical on every trainer). `None` if the
    /// coordinator is gone.
    fn initial_params(&mut self) -> Option<Arc<Vec<f32>>>;
    /// The latest round the coordinator has called (0 = none). Cheap: checked after every step.
    fn due_round(&self) -> u64;
    /// Whether the round called is the last one, to be joined at once whatever the step-count
    /// schedule (`sync_every_steps`): the time limit has passed.
    fn due_now(&self) -> bool {
        false
    }
    /// Joins round `round`: sends the local parameters and report, blocks for the reply.
    /// `None` if the coordinator is gone.
    fn join_round(&mut self, round: u64, params: &[f32], report: TrainerReport) -> Option<Reply>;
    /// The latest validation check the coordinator has called (0 = none, or a transport
    /// without checks). Cheap: checked after every step.
    fn due_check(&self) -> u64 {
        0
    }
    /// Leaves a copy of the parameters for check `id` and returns at once (no reply).
    fn deposit_check(&mut self, _id: u64, _params: &[f32], _steps: u64, _epochs: u64) {}
}

/// The coordinator's side of the transport.
pub trait CoordinatorEndpoint {
    /// Number of trainers started (alive or not).
    fn num_trainers(&self) -> usize;
    /// Sends the initial parameters to every trainer.
    fn broadcast_initial(&mut self, params: Arc<Vec<f32>>);
    /// Announces round `round` to all trainers.
    fn call_round(&mut self, round: u64);
    /// Announces `round` again as the last one: trainers join it at once, whatever their
    /// step-count schedule ([`TrainerEndpoint::due_now`]).
    fn call_final(&mut self, round: u64) {
        self.call_round(round);
    }
    /// Collects contributions to `round` by [`Roster`]'s rule: waits for the trainers it
    /// expects (alive and in step with the previous round) until all of them have answered or
    /// `timeout` has passed; if nothing has arrived by then, waits on for the first answer
    /// while any trainer is alive, but at most `until` from the call when given (empty only
    /// when none is alive, or `until` passed). Trainers that died, stalled or
    /// answered too late are simply absent (a missing trainer is data, not an error). Stale
    /// answers are answered at once with `latest`, the current averaged model; parked ones with
    /// the round's model at the next [`CoordinatorEndpoint::reply`].
    fn gather(
        &mut self,
        round: u64,
        timeout: Duration,
        latest: &Arc<Vec<f32>>,
        until: Option<Duration>,
    ) -> Vec<Contribution>;
    /// Sends `reply` to the listed trainers.
    fn reply(&mut self, to: &[usize], reply: Reply);
    /// Whether trainer `t` is still alive (has not exited or failed).
    fn is_alive(&self, t: usize) -> bool;
    /// Between rounds: answers stale contributions that have arrived with `latest` (the
    /// current averaged model) at once, so a trainer that wakes up after missing rounds rejoins
    /// at the next one. Cheap; the coordinator calls it while it waits for a round's due time.
    fn answer_late(&mut self, _latest: &Arc<Vec<f32>>) {}
    /// Whether this transport carries validation checks between rounds
    /// (`--val-check-interval`; the in-process one does, MPI does not).
    fn supports_checks(&self) -> bool {
        false
    }
    /// Asks every trainer for a copy of its parameters after its current step (check `id`,
    /// increasing from 1); nothing is sent back.
    fn call_check(&mut self, _id: u64) {}
    /// Takes the deposits for check `id` that have arrived since the last call (non-blocking;
    /// each trainer's at most once), as `(trainer, deposit)`.
    fn collect_check(&mut self, _id: u64) -> Vec<(usize, CheckDeposit)> {
        Vec::new()
    }
}

/// The rule both transports follow for who takes part in a round (ARCHITECTURE.md: trainers
/// never talk to each other, so this is all the coordinator decides).
///
/// * A round waits only for the trainers it **expects**: those that took part in the previous
///   round (were sent its averaged model) or were given the current model since. A trainer that
///   misses a round's deadline (dead, stalled, slow) is not waited for again, so a lost trainer
///   costs one deadline, once, and the schedule holds.
/// * A contribution is **fresh**, and enters the round being gathered, only if it answers that
///   round and comes from an expected trainer.
/// * A contribution to the round being gathered from a trainer that missed the previous round
///   derives from an older average: it is **parked**, i.e. left out of the mean, and the trainer
///   gets the round's averaged model with the participants, then takes part from the next round
///   on. (Only when a round has nothing else at its deadline do parked contributions form it:
///   the trainers that answered are all there is.)
/// * Any other contribution (to an older round, or between rounds) is **stale**: it is answered
///   at once with the current averaged model ([`Verdict::CatchUp`]) and the trainer is expected
///   from the next round on.
/// * A trainer that missed the deadline of [`crate::config::LATE_LIMIT`] rounds it was expected in, without
///   a fresh contribution in between, **stays slow**: no round waits for it until it is back
///   in step, i.e. until a contribution of its reaches a round in time (fresh, it enters that
///   round as any other). A slow link once made every third round wait a full
///   `--round-timeout` for the same trainer each time it caught up.
#[derive(Clone, Debug)]
pub struct Roster {
    /// The round each trainer is expected to contribute to next.
    next: Vec<u64>,
    /// Deadlines each trainer missed since its last fresh contribution.
    misses: Vec<u32>,
    /// Whether each trainer's contribution entered the round being gathered.
    fresh: Vec<bool>,
    /// The round being gathered, or the last one gathered between rounds.
    round: u64,
    /// Whether a round is being gathered (between rounds every contribution is stale).
    gathering: bool,
    started: bool,
}

/// What [`Roster::admit`] makes of a contribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// It enters the round being gathered.
    Fresh,
    /// Left out of the round's mean; its trainer gets the round's averaged model with the
    /// participants (unless nothing else arrived, see [`Roster`]).
    Park,
    /// Stale: answer it at once with the current averaged model.
    CatchUp,
}

impl Roster {
    /// A roster of `n` trainers, all expected in the first round gathered.
    pub fn new(n: usize) -> Roster {
        Roster {
            next: vec![0; n],
            misses: vec![0; n],
            fresh: vec![false; n],
            round: 0,
            gathering: false,
            started: false,
        }
    }

    /// Starts gathering `round` (the first call expects every trainer in it).
    pub fn begin(&mut self, round: u64) {
        if !self.started {
            self.next.iter_mut().for_each(|x| *x = round);
            self.started = true;
        }
        self.round = round;
        self.gathering = true;
        self.fresh.iter_mut().for_each(|f| *f = false);
    }

    /// The round has formed: contributions from now on are stale until the next
    /// [`Roster::begin`]. A trainer it expected that did not answer in time has missed a
    /// deadline.
    pub fn end(&mut self) {
        if self.gathering {
            for t in 0..self.next.len() {
                if self.next[t] == self.round && !self.fresh[t] {
                    self.misses[t] = self.misses[t].saturating_add(1);
                }
            }
        }
        self.gathering = false;
    }

    /// Whether the round being gathered waits for trainer `t` (liveness aside): it is due in
    /// this round and has not missed [`crate::config::LATE_LIMIT`] deadlines since its last fresh
    /// contribution.
    pub fn expects(&self, t: usize) -> bool {
        self.gathering && self.next[t] == self.round && self.misses[t] < crate::config::LATE_LIMIT
    }

    /// Whether trainer `t` stays slow: no round waits for it until it is back in step.
    pub fn is_slow(&self, t: usize) -> bool {
        self.misses[t] >= crate::config::LATE_LIMIT
    }

    /// Trainer `t` answered round `round`: see [`Verdict`]. A trainer that is not fresh is
    /// expected from the next round on.
    pub fn admit(&mut self, t: usize, round: u64) -> Verdict {
        if self.gathering && round == self.round && self.next[t] == self.round {
            self.fresh[t] = true;
            self.misses[t] = 0;
            return Verdict::Fresh;
        }
        self.next[t] = self.round + 1;
        if self.gathering && round == self.round {
            Verdict::Park
        } else {
            Verdict::CatchUp
        }
    }

    /// Trainer `t` was sent the averaged model of the round gathered last.
    pub fn took_part(&mut self, t: usize) {
        self.next[t] = self.round + 1;
    }
}

/// Contributions of one round as a transport collects them: fresh ones, and parked ones
/// (see [`Roster`]) whose trainers are answered with the round's model.
#[derive(Default)]
pub struct Gathered {
    /// Fresh contributions, by trainer.
    pub fresh: Vec<Option<Contribution>>,
    /// Parked contributions.
    pub parked: Vec<Contribution>,
}

impl Gathered {
    /// Nothing collected for `n` trainers.
    pub fn new(n: usize) -> Gathered {
        Gathered {
            fresh: vec![None; n],
            parked: Vec::new(),
        }
    }

    /// Whether the round could form now (something arrived).
    pub fn any(&self) -> bool {
        !self.parked.is_empty() || self.fresh.iter().any(Option::is_some)
    }

    /// Files `c` under `verdict` (a stale one is dropped: the caller has answered it).
    pub fn file(&mut self, verdict: Verdict, c: Contribution) {
        match verdict {
            Verdict::Fresh => {
                let t = c.trainer;
                self.fresh[t] = Some(c);
            }
            Verdict::Park => self.parked.push(c),
            Verdict::CatchUp => {}
        }
    }

    /// The round's contributions (the fresh ones; the parked ones when nothing fresh came)
    /// and the trainers to answer with the round's model besides them.
    pub fn finish(self) -> (Vec<Contribution>, Vec<usize>) {
        let fresh: Vec<Contribution> = self.fresh.into_iter().flatten().collect();
        if fresh.is_empty() {
            (self.parked, Vec::new())
        } else {
            let extra = self.parked.iter().map(|c| c.trainer).collect();
            (fresh, extra)
        }
    }
}

struct Msg {
    trainer: usize,
    round: u64,
    params: Vec<f32>,
    report: TrainerReport,
}

/// In-process transport: trainers are threads of this process.
pub struct InProcess {
    roster: Roster,
    /// Trainers whose parked contribution is answered with the next reply.
    parked: Vec<usize>,
    due: Arc<AtomicU64>,
    now: Arc<AtomicBool>,
    alive: Vec<Arc<AtomicBool>>,
    to_trainer: Vec<Sender<Reply>>,
    from_trainers: Receiver<Msg>,
    initial: Vec<Sender<Arc<Vec<f32>>>>,
    checks: Arc<CheckBoard>,
}

/// Validation checks of [`InProcess`]: the check called, and one deposit slot per trainer.
struct CheckBoard {
    due: AtomicU64,
    slots: Mutex<Vec<Option<CheckDeposit>>>,
}

/// Trainer end of [`InProcess`]. Dropping it (the trainer exits or fails) marks it dead.
pub struct InProcessTrainer {
    id: usize,
    due: Arc<AtomicU64>,
    now: Arc<AtomicBool>,
    alive: Arc<AtomicBool>,
    to_coord: Sender<Msg>,
    replies: Receiver<Reply>,
    initial: Receiver<Arc<Vec<f32>>>,
    checks: Arc<CheckBoard>,
}

impl InProcess {
    /// Creates the coordinator end and `n` trainer ends.
    pub fn new(n: usize) -> (InProcess, Vec<InProcessTrainer>) {
        let due = Arc::new(AtomicU64::new(0));
        let now = Arc::new(AtomicBool::new(false));
        let (tx, rx) = channel();
        let checks = Arc::new(CheckBoard {
            due: AtomicU64::new(0),
            slots: Mutex::new(vec![None; n]),
        });
        let mut trainers = Vec::with_capacity(n);
        let mut alive = Vec::with_capacity(n);
        let mut to_trainer = Vec::with_capacity(n);
        let mut initial = Vec::with_capacity(n);
        for id in 0..n {
            let (rtx, rrx) = channel();
            let (itx, irx) = channel();
            let a = Arc::new(AtomicBool::new(true));
            alive.push(a.clone());
            to_trainer.push(rtx);
            initial.push(itx);
            trainers.push(InProcessTrainer {
                id,
                due: due.clone(),
                now: now.clone(),
                alive: a,
                to_coord: tx.clone(),
                replies: rrx,
                initial: irx,
                checks: checks.clone(),
            });
        }
        (
            InProcess {
                roster: Roster::new(n),
                parked: Vec::new(),
                due,
                now,
                alive,
                to_trainer,
                from_trainers: rx,
                initial,
                checks,
            },
            trainers,
        )
    }
}

impl Drop for InProcessTrainer {
    fn drop(&mut self) {
        self.alive.store(false, Ordering::SeqCst);
    }
}

impl TrainerEndpoint for InProcessTrainer {
    fn initial_params(&mut self) -> Option<Arc<Vec<f32>>> {
        self.initial.recv().ok()
    }
    fn due_round(&self) -> u64 {
        self.due.load(Ordering::Acquire)
    }
    fn due_now(&self) -> bool {
        self.now.load(Ordering::Acquire)
    }
    fn join_round(&mut self, round: u64, params: &[f32], report: TrainerReport) -> Option<Reply> {
        self.to_coord
            .send(Msg {
                trainer: self.id,
                round,
                params: params.to_vec(),
                report,
            })
            .ok()?;
        self.replies.recv().ok()
    }
    fn due_check(&self) -> u64 {
        self.checks.due.load(Ordering::Acquire)
    }
    fn deposit_check(&mut self, id: u64, params: &[f32], steps: u64, epochs: u64) {
        let d = CheckDeposit {
            id,
            params: params.to_vec(),
            steps,
            epochs,
        };
        if let Ok(mut slots) = self.checks.slots.lock() {
            slots[self.id] = Some(d);
        }
    }
}

impl CoordinatorEndpoint for InProcess {
    fn num_trainers(&self) -> usize {
        self.alive.len()
    }
    fn broadcast_initial(&mut self, params: Arc<Vec<f32>>) {
        for s in &self.initial {
            let _ = s.send(params.clone());
        }
    }
    fn call_round(&mut self, round: u64) {
        self.due.store(round, Ordering::Release);
    }
    fn call_final(&mut self, round: u64) {
        self.now.store(true, Ordering::Release);
        self.call_round(round);
    }
    fn gather(
        &mut self,
        round: u64,
        timeout: Duration,
        latest: &Arc<Vec<f32>>,
        until: Option<Duration>,
    ) -> Vec<Contribution> {
        let n = self.alive.len();
        self.roster.begin(round);
        let mut got = Gathered::new(n);
        let start = Instant::now();
        let deadline = start + timeout;
        let give_up = until.map(|u| start + u);
        loop {
            let waiting = (0..n)
                .any(|t| got.fresh[t].is_none() && self.roster.expects(t) && self.is_alive(t));
            let now = Instant::now();
            // a round forms when every expected trainer has answered, or at its deadline; one
            // with nothing yet waits for the first answer while anyone is alive (and `until`
            // has not passed)
            if (got.any() && (!waiting || now >= deadline))
                || !(0..n).any(|t| self.is_alive(t))
                || (!got.any() && give_up.is_some_and(|g| now >= g))
            {
                break;
            }
            let wait = if waiting && now < deadline {
                (deadline - now).min(Duration::from_millis(20))
            } else {
                Duration::from_millis(20)
            };
            match self.from_trainers.recv_timeout(wait) {
                Ok(m) => {
                    let verdict = self.roster.admit(m.trainer, m.round);
                    if verdict == Verdict::CatchUp {
                        let _ = self.to_trainer[m.trainer].send(Reply::Continue(latest.clone()));
                    }
                    got.file(
                        verdict,
                        Contribution {
                            trainer: m.trainer,
                            params: m.params,
                            report: m.report,
                        },
                    );
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        self.roster.end();
        let (contribs, parked) = got.finish();
        self.parked = parked;
        contribs
    }
    fn reply(&mut self, to: &[usize], reply: Reply) {
        let parked = std::mem::take(&mut self.parked);
        for &t in to.iter().chain(&parked) {
            if matches!(reply, Reply::Continue(_)) {
                self.roster.took_part(t);
            }
            let _ = self.to_trainer[t].send(reply.clone());
        }
    }
    fn answer_late(&mut self, latest: &Arc<Vec<f32>>) {
        while let Ok(m) = self.from_trainers.try_recv() {
            self.roster.admit(m.trainer, m.round);
            let _ = self.to_trainer[m.trainer].send(Reply::Continue(latest.clone()));
        }
    }
    fn is_alive(&self, t: usize) -> bool {
        self.alive[t].load(Ordering::SeqCst)
    }
    fn supports_checks(&self) -> bool {
        true
    }
    fn call_check(&mut self, id: u64) {
        self.checks.due.store(id, Ordering::Release);
    }
    fn collect_check(&mut self, id: u64) -> Vec<(usize, CheckDeposit)> {
        let Ok(mut slots) = self.checks.slots.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (t, slot) in slots.iter_mut().enumerate() {
            if slot.as_ref().is_some_and(|d| d.id == id) {
                out.extend(slot.take().map(|d| (t, d)));
            } else if slot.as_ref().is_some_and(|d| d.id < id) {
                // a deposit for an earlier check that was given up
                *slot = None;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_deposits_are_taken_once_and_stale_ones_dropped() {
        let (mut coord, mut trainers) = InProcess::new(3);
        assert!(coord.supports_checks());
        assert_eq!(trainers[0].due_check(), 0);
        coord.call_check(1);
        assert!(trainers.iter().all(|t| t.due_check() == 1));
        trainers[0].deposit_check(1, &[1.0, 2.0], 5, 1);
        trainers[2].deposit_check(1, &[3.0, 4.0], 7, 2);
        let got = coord.collect_check(1);
        let summary: Vec<(usize, u64, u64, Vec<f32>)> = got
            .into_iter()
            .map(|(t, d)| (t, d.id, d.steps, d.params))
            .collect();
        assert_eq!(
            summary,
            vec![(0, 1, 5, vec![1.0, 2.0]), (2, 1, 7, vec![3.0, 4.0])]
        );
        // taken: not returned again
        assert!(coord.collect_check(1).is_empty());
        // a copy for check 1 arriving after check 2 was called is dropped, not mixed in
        trainers[1].deposit_check(1, &[9.0, 9.0], 6, 1);
        coord.call_check(2);
        assert!(coord.collect_check(2).is_empty());
        trainers[1].deposit_check(2, &[5.0, 6.0], 8, 1);
        let got = coord.collect_check(2);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].0, got[0].1.params.clone()), (1, vec![5.0, 6.0]));
    }

    #[test]
    fn dead_trainer_is_absent_and_does_not_hang() {
        let (mut coord, mut trainers) = InProcess::new(3);
        let dead = trainers.remove(1); // trainer 1
        drop(dead);
        coord.call_round(1);
        let mut handles = Vec::new();
        for mut t in trainers {
            handles.push(std::thread::spawn(move || {
                assert_eq!(t.due_round(), 1);
                let r = t.join_round(1, &[t.id as f32], TrainerReport::default());
                matches!(r, Some(Reply::Continue(_)))
            }));
        }
        let latest = Arc::new(vec![0f32]);
        let got = coord.gather(1, Duration::from_secs(10), &latest, None);
        let mut ids: Vec<usize> = got.iter().map(|c| c.trainer).collect();
        ids.sort();
        assert_eq!(ids, vec![0, 2]);
        assert!(!coord.is_alive(1));
        coord.reply(&ids, Reply::Continue(Arc::new(vec![1.0])));
        for h in handles {
            assert!(h.join().unwrap());
        }
    }

    #[test]
    fn roster_rule_fresh_park_catch_up() {
        let mut r = Roster::new(3);
        r.begin(5); // the first round gathered (e.g. after a resume) expects everyone
        assert!((0..3).all(|t| r.expects(t)));
        assert_eq!(r.admit(0, 5), Verdict::Fresh);
        assert_eq!(r.admit(1, 5), Verdict::Fresh);
        r.end(); // trainer 2 missed round 5
        r.took_part(0);
        r.took_part(1);
        r.begin(6);
        assert!(r.expects(0) && r.expects(1) && !r.expects(2));
        // trainer 2 answers round 5 late: stale, caught up, expected from round 7
        assert_eq!(r.admit(2, 5), Verdict::CatchUp);
        assert!(!r.expects(2));
        // ... and joins round 6 from the current model at once: parked, not in the mean
        assert_eq!(r.admit(2, 6), Verdict::Park);
        assert_eq!(r.admit(0, 6), Verdict::Fresh);
        r.end();
        r.took_part(0);
        r.took_part(2); // parked: answered with round 6's model
                        // between rounds every answer is stale
        assert_eq!(r.admit(1, 6), Verdict::CatchUp);
        r.begin(7);
        assert!((0..3).all(|t| r.expects(t)));
        assert_eq!(r.admit(2, 7), Verdict::Fresh);
    }

    /// Regression (issue 29, item 4): a trainer that stays slow (impaired link) was waited for a
    /// full `--round-timeout` every time it caught up. After two missed deadlines no round
    /// waits for it; a contribution that reaches a round in time still enters it, and from
    /// then on it is waited for again.
    #[test]
    fn a_trainer_late_twice_is_not_waited_for_until_back_in_step() {
        let mut r = Roster::new(2);
        let round = |r: &mut Roster, k: u64, fresh: &[usize]| {
            r.begin(k);
            for &t in fresh {
                assert_eq!(r.admit(t, k), Verdict::Fresh, "round {k} trainer {t}");
            }
            r.end();
            for &t in fresh {
                r.took_part(t);
            }
        };
        round(&mut r, 1, &[0, 1]);
        // trainer 1 misses round 2's deadline (waited for: its first miss)
        r.begin(2);
        assert!(r.expects(1));
        assert_eq!(r.admit(0, 2), Verdict::Fresh);
        r.end();
        r.took_part(0);
        // its round-2 answer comes during round 3: stale, caught up, expected in round 4
        r.begin(3);
        assert!(!r.expects(1));
        assert_eq!(r.admit(1, 2), Verdict::CatchUp);
        assert_eq!(r.admit(0, 3), Verdict::Fresh);
        r.end();
        r.took_part(0);
        // round 4 waits for it once more, and it misses again: slow from now on
        r.begin(4);
        assert!(r.expects(1) && !r.is_slow(1));
        assert_eq!(r.admit(0, 4), Verdict::Fresh);
        r.end();
        r.took_part(0);
        assert!(r.is_slow(1));
        r.begin(5);
        assert_eq!(r.admit(1, 4), Verdict::CatchUp);
        assert_eq!(r.admit(0, 5), Verdict::Fresh);
        r.end();
        r.took_part(0);
        // due in round 6 but not waited for (before the fix: waited a full deadline again)
        r.begin(6);
        assert!(!r.expects(1), "a slow trainer is not waited for");
        assert!(r.expects(0));
        // ... yet its answer in time is fresh: back in step, waited for again
        assert_eq!(r.admit(1, 6), Verdict::Fresh);
        assert_eq!(r.admit(0, 6), Verdict::Fresh);
        r.end();
        r.took_part(0);
        r.took_part(1);
        assert!(!r.is_slow(1));
        r.begin(7);
        assert!(r.expects(0) && r.expects(1));
    }

    /// Joins `round` on a thread; the thread returns the endpoint and the reply.
    fn join(
        mut t: InProcessTrainer,
        round: u64,
    ) -> std::thread::JoinHandle<(InProcessTrainer, Option<Reply>)> {
        std::thread::spawn(move || {
            let r = t.join_round(round, &[t.id as f32], TrainerReport::default());
            (t, r)
        })
    }

    fn continued(
        h: std::thread::JoinHandle<(InProcessTrainer, Option<Reply>)>,
    ) -> (InProcessTrainer, f32) {
        match h.join().unwrap() {
            (t, Some(Reply::Continue(p))) => (t, p[0]),
            (_, r) => panic!("expected a Continue reply, got {r:?}"),
        }
    }

    fn ids(c: &[Contribution]) -> Vec<usize> {
        let mut v: Vec<usize> = c.iter().map(|c| c.trainer).collect();
        v.sort();
        v
    }

    /// The rule of issue 14 in the in-process engine: a stalled trainer misses rounds without
    /// delaying them (after the first deadline nobody waits for it), gets the current model
    /// when it wakes up, and takes part again from the next round; one that answers the round
    /// being gathered out of step is parked and gets that round's model.
    #[test]
    fn stalled_trainer_misses_rounds_then_rejoins_with_the_current_model() {
        let (mut coord, trainers) = InProcess::new(3);
        let [t0, t1, t2]: [InProcessTrainer; 3] = trainers.try_into().ok().unwrap();
        let timeout = Duration::from_millis(300);
        let model = |x: f32| Arc::new(vec![x]);

        // round 1: trainer 1 stalls; the round forms at its deadline
        coord.call_round(1);
        let (h0, h2) = (join(t0, 1), join(t2, 1));
        let start = Instant::now();
        let got = coord.gather(1, timeout, &model(0.0), None);
        assert!(start.elapsed() >= timeout);
        assert_eq!(ids(&got), vec![0, 2]);
        coord.reply(&[0, 2], Reply::Continue(model(1.0)));
        let ((t0, a), (t2, b)) = (continued(h0), continued(h2));
        assert_eq!((a, b), (1.0, 1.0));

        // round 2: not waited for again (forms as soon as 0 and 2 answered)
        coord.call_round(2);
        let (h0, h2) = (join(t0, 2), join(t2, 2));
        let start = Instant::now();
        let got = coord.gather(2, timeout, &model(1.0), None);
        assert!(start.elapsed() < timeout, "{:?}", start.elapsed());
        assert_eq!(ids(&got), vec![0, 2]);
        coord.reply(&[0, 2], Reply::Continue(model(2.0)));
        let ((t0, _), (t2, _)) = (continued(h0), continued(h2));

        // trainer 1 wakes up between rounds and answers round 1: it gets the current model
        let h1 = join(t1, 1);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !h1.is_finished() {
            assert!(
                Instant::now() < deadline,
                "late answer not taken between rounds"
            );
            coord.answer_late(&model(2.0));
            std::thread::sleep(Duration::from_millis(5));
        }
        let (t1, p) = continued(h1);
        assert_eq!(p, 2.0);

        // round 3: all three again; trainer 2 stalls
        coord.call_round(3);
        let (h0, h1) = (join(t0, 3), join(t1, 3));
        let got = coord.gather(3, timeout, &model(2.0), None);
        assert_eq!(ids(&got), vec![0, 1]);
        coord.reply(&[0, 1], Reply::Continue(model(3.0)));
        let ((t0, _), (t1, _)) = (continued(h0), continued(h1));

        // round 4: trainer 2 answers it out of step (it missed round 3): parked, not in the
        // mean, and answered with round 4's model together with the participants
        coord.call_round(4);
        let h2 = join(t2, 4);
        std::thread::sleep(Duration::from_millis(50));
        let (h0, h1) = (join(t0, 4), join(t1, 4));
        let got = coord.gather(4, timeout, &model(3.0), None);
        assert_eq!(ids(&got), vec![0, 1]);
        coord.reply(&[0, 1], Reply::Continue(model(4.0)));
        let ((t0, _), (t1, _), (t2, p)) = (continued(h0), continued(h1), continued(h2));
        assert_eq!(p, 4.0);

        // round 5: everyone takes part
        coord.call_round(5);
        let hs = [join(t0, 5), join(t1, 5), join(t2, 5)];
        let got = coord.gather(5, timeout, &model(4.0), None);
        assert_eq!(ids(&got), vec![0, 1, 2]);
        coord.reply(&[0, 1, 2], Reply::Continue(model(5.0)));
        let mut ts: Vec<InProcessTrainer> = hs.into_iter().map(|h| continued(h).0).collect();

        // round 6: only trainer 1 is left and answers after the deadline: a round nobody has
        // answered waits for the first answer while anyone is alive
        let t1 = ts.remove(1);
        drop(ts);
        coord.call_round(6);
        let late = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(600));
            continued(join(t1, 6))
        });
        let start = Instant::now();
        let got = coord.gather(6, timeout, &model(5.0), None);
        assert!(start.elapsed() >= Duration::from_millis(600));
        assert_eq!(ids(&got), vec![1]);
        coord.reply(&[1], Reply::Continue(model(6.0)));
        assert_eq!(late.join().unwrap().1, 6.0);
    }
}
