//! The coordinator: starts the trainers from identical weights, exchanges with them on the
//! method's schedule (every `sync_every` of wall-clock time for model averaging), has each
//! round's model validated by the evaluator thread while the trainers go on, keeps the best,
//! stops at `time_limit`, then tests the final and the best model.
//!
//! The loop is written against [`Exchange`] and [`CoordinatorEndpoint`] only: it does not know
//! which method or transport it runs.

use crate::clock::{next_round_due, next_round_due_ramped, skipped_slots_ramped, Clock};
use crate::config::TrainConfig;
use crate::data::Prepared;
use crate::engines::cluster::{Contribution, CoordinatorEndpoint, Reply};
use crate::engines::gate::StepGate;
use crate::engines::method::{Exchange, Schedule};
use crate::engines::plateau::{Held, PlateauHold};
use crate::evaluation::eval::{evaluate_with, EvalResult, Split};
use crate::evaluation::evaluator::{with_evaluator, Best, Book, EvalWith, Evaluator, PendingRound};
use crate::evaluation::record::{
    Correction, Late, Observer, Resume, RoundRecord, RunResult, StopCause, Summary,
};
use crate::TrainError;
use std::sync::Arc;
use std::time::Duration;
use tma_nn::{Model, ParamSet};

/// What the coordinator works with, besides its transport and the method's exchange.
pub struct Coordinated<'a> {
    /// Evaluation data (and, for LLCG, the whole training graph).
    pub prep: &'a Prepared,
    /// The run's configuration (`sync_every`, `time_limit`, `sync_every_steps`).
    pub cfg: &'a TrainConfig,
    /// The model.
    pub model: &'a Model,
    /// Training time.
    pub clock: &'a dyn Clock,
    /// Threads for combining and evaluating (the coordinator's share of the cores).
    pub eval_pool: &'a rayon::ThreadPool,
    /// A stop request (Ctrl-C): when set, the round in flight is formed at once and is the last.
    pub stop: Option<&'a std::sync::atomic::AtomicBool>,
    /// The averaging ramp (`MethodInfo::sync_ramp`: 0 or 1 = none).
    pub sync_ramp: u32,
    /// The step gate of trainers that share the evaluation's cores (the in-process engine's):
    /// held while a validation is queued or running and lifted when a round is due
    /// (docs/decisions/0029-validation-first.md); None for trainers with cores of their own.
    pub trainer_gate: Option<&'a StepGate>,
}

impl Coordinated<'_> {
    /// Whether the caller asked the run to stop early.
    fn stop_requested(&self) -> bool {
        self.stop
            .is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// How long the coordinator waits for the trainers' contributions to one exchange before it
/// goes on without the missing ones: `round_timeout` (see [`crate::engines::cluster::Roster`] for whom
/// it waits).
pub fn gather_timeout(cfg: &TrainConfig) -> Duration {
    cfg.round_timeout
}

/// The coordinator's loop over any transport and any method.
///
/// Starts from `init` (or from `resume`), exchanges on `exchange`'s [`Schedule`], and hands
/// every round to the evaluator; rounds reach `observer` in order as their validation
/// completes. Round `k + 1` is due at the first slot `j * sync_every` after round `k` formed
/// ([`next_round_due`]); the last round is the first formed at or after `time_limit`. A run
/// whose trainers are all lost before `time_limit` ends there, its summary marked interrupted
/// ([`StopCause::TrainersLost`]).
///
/// # Errors
/// The first error `observer` returned (the run stops after the round in flight);
/// [`TrainError::AllTrainersFailed`] when no round was ever validated.
pub fn coordinate(
    coord: &mut dyn CoordinatorEndpoint,
    exchange: &mut dyn Exchange,
    ctx: &Coordinated<'_>,
    init: ParamSet,
    observer: &mut dyn Observer,
    resume: Option<Resume>,
) -> Result<RunResult, TrainError> {
    let cfg = ctx.cfg;
    let clock = ctx.clock;
    let n = coord.num_trainers();
    let timeout = gather_timeout(cfg);
    let mut model = init;
    // steps since the start of the run = a trainer's own count + its count at the resume point
    let step_offsets = Resume::step_offsets(resume.as_ref(), n);
    // epochs: the resumed trainers continue their own counts (Resume::epochs)
    let resumed_epochs: Vec<u64> = (0..n)
        .map(|t| Resume::epochs_of(resume.as_ref(), t))
        .collect();
    let mut round = 0u64;
    let mut best: Option<Best> = None;
    // whether a resumed run's best model so far was a check (until a better one comes)
    let resumed_best_check = resume.as_ref().is_some_and(|r| r.best_check);
    // training time of the resumed round (the summary's when this process forms none)
    let resumed_at = resume.as_ref().map(|r| r.elapsed);
    let mut hold = PlateauHold::new(cfg.plateau_patience);
    if let Some(r) = resume {
        model.data.copy_from_slice(&r.params);
        hold = PlateauHold::resumed(cfg.plateau_patience, r.plateau, &r.params);
        round = r.round;
        best = r.best.map(|(k, v, p)| (k, v, Arc::new(p)));
    }
    exchange.start(&model);
    coord.broadcast_initial(Arc::new(model.data.clone()));
    let paced = exchange.schedule() == Schedule::PerRound;
    let step_mode = cfg.sync_every_steps > 0;
    // training time of the last round formed (the run's start before the first one)
    let last_formed = clock.elapsed();

    let template = model.clone();
    // the threads that combine a round's contributions (the average; LLCG's correction):
    // not the evaluation's, which a validation may hold for longer than a round's span
    let combine_pool = rayon::ThreadPoolBuilder::new()
        .num_threads(ctx.eval_pool.current_num_threads())
        .thread_name(|i| format!("tma-combine-{i}"))
        .build()
        .map_err(|e| TrainError::Config(format!("thread pool: {e}")))?;
    let infer = cfg.infer_options();
    // validation checks between rounds: averaging methods on the wall-clock schedule
    let mut checks = (!cfg.val_check_interval.is_zero() && paced && !step_mode).then(|| Checks {
        interval: cfg.val_check_interval,
        next_due: next_round_due(last_formed, cfg.val_check_interval, cfg.time_limit),
        id: 0,
        pending: None,
        timeout,
        model: model.clone(),
    });
    // (a transport without checks: Run::start refuses the option for it; here they are off)
    if !coord.supports_checks() {
        checks = None;
    }
    let mut rounds = Rounds {
        coord,
        exchange,
        ctx,
        n,
        timeout,
        paced,
        step_mode,
        last_steps: step_offsets.clone(),
        step_offsets,
        combine_pool,
        checks,
        model,
        round,
        last_epochs: resumed_epochs,
        last_formed,
        // when the last validation (a round's or a check's) was started: the ramp's budget
        last_val_at: last_formed,
        loss: (0.0, 0),
        all_lost: false,
        ended_by_request: false,
        hold,
        held: None,
        correction: None,
        called_late: Duration::ZERO,
        resumed_best_check,
    };
    let hold = ctx.trainer_gate.map(|g| move |held: bool| g.hold(held));
    let ((), book) = with_evaluator(
        ctx.model,
        ctx.prep,
        EvalWith {
            pool: ctx.eval_pool,
            opts: &infer,
            gate: hold.as_ref().map(|h| h as &dyn Fn(bool)),
        },
        &template,
        observer,
        best,
        |ev| rounds.run(ev),
    );
    // every trainer lost before the time limit: the run is incomplete (it can be resumed)
    let lost_early = rounds.all_lost && clock.elapsed() < cfg.time_limit;
    finish_run(
        ctx,
        n,
        book,
        rounds.model,
        RunEnd {
            last_steps: rounds.last_steps,
            ended_early: if lost_early {
                Some(StopCause::TrainersLost)
            } else if rounds.ended_by_request {
                Some(StopCause::StopRequest)
            } else {
                None
            },
            resumed_best_check,
            round: rounds.round,
            last_formed: resumed_at.unwrap_or(rounds.last_formed),
        },
    )
}

/// The coordinator's loop ([`coordinate`]): its transport and exchange, what stays fixed for
/// the run, and what each round carries to the next.
struct Rounds<'a, 'c> {
    coord: &'a mut dyn CoordinatorEndpoint,
    exchange: &'a mut dyn Exchange,
    ctx: &'a Coordinated<'c>,
    /// Trainers started.
    n: usize,
    /// How long a gather waits for the trainers ([`gather_timeout`]).
    timeout: Duration,
    /// Rounds on the wall-clock (or step-count) schedule: `Schedule::PerRound`.
    paced: bool,
    /// The step-count schedule (`sync_every_steps > 0`).
    step_mode: bool,
    /// Each trainer's steps at the resume point (0 for a fresh run).
    step_offsets: Vec<u64>,
    /// The threads that combine a round's contributions.
    combine_pool: rayon::ThreadPool,
    /// Validation checks between rounds, when on.
    checks: Option<Checks>,
    /// The current model.
    model: ParamSet,
    /// Rounds formed (across resumes).
    round: u64,
    /// Steps of each trainer since the start of the run, as of its last contribution.
    last_steps: Vec<u64>,
    /// Epochs of each trainer, as of its last contribution.
    last_epochs: Vec<u64>,
    /// Training time of the last round formed (the run's start before the first one).
    last_formed: Duration,
    /// When the last validation (a round's or a check's) was started.
    last_val_at: Duration,
    /// The training loss summed over the contributions since the last round formed, and the
    /// count it sums.
    loss: (f64, u64),
    /// The gather that ended the loop had nobody left to hear from (every trainer lost).
    all_lost: bool,
    /// The last round was formed early on a stop request, before the time limit (a request
    /// that comes after the last round is formed, during the final validation, ends nothing
    /// early).
    ended_by_request: bool,
    /// The plateau hold (docs/decisions/0037-plateau-hold.md).
    hold: PlateauHold,
    /// The hold made at the round being formed: the best model's round and whether it was
    /// the check after that round; said in the round's record.
    held: Option<(u64, bool)>,
    /// What the exchange's correction did at the round being formed (LLCG), for its record.
    correction: Option<Correction>,
    /// How far past its due time the round being formed was called ([`Rounds::wait_until`]
    /// held it for the evaluator), for its record's `late`.
    called_late: Duration,
    /// Whether the best model a resumed run brought was a check.
    resumed_best_check: bool,
}

impl Rounds<'_, '_> {
    /// The rounds, each handed to `ev`, until the last one (the first formed at or after the
    /// time limit, or on a stop request), every trainer is lost, or a validation failed; then
    /// every live trainer is told to stop.
    fn run(&mut self, ev: &mut Evaluator<'_>) {
        let (cfg, clock) = (self.ctx.cfg, self.ctx.clock);
        let mut exchange_id = 0u64;
        loop {
            // the first slot after the last round: slots that passed while it was late are
            // skipped (clock::next_round_due)
            let round_due = next_round_due_ramped(
                self.last_formed,
                cfg.sync_every,
                self.ctx.sync_ramp,
                cfg.time_limit,
            );
            // a ramp round (docs/decisions/0015-averaging-ramp.md): its validation is
            // skipped where validation would take over a quarter of the time since the last
            let ramp_round = self.paced && !self.step_mode && round_due < cfg.sync_every;
            // step-count schedule and gradient exchanges: at once (trainers join a round
            // after their steps)
            let due = if self.paced && !self.step_mode {
                round_due
            } else {
                Duration::ZERO
            };
            self.wait_until(ev, due);
            self.called_late = clock.elapsed().saturating_sub(due);
            // a check still waiting for copies is superseded by the round
            if let Some(c) = self.checks.as_mut() {
                c.pending = None;
            }
            // the last round is the first one formed at or after the time limit, whether it
            // was scheduled there or the rounds before it ran late
            let mut stop = (self.paced && due >= cfg.time_limit)
                || clock.elapsed() >= cfg.time_limit
                || self.ctx.stop_requested();
            // averaging rounds are numbered as rounds (across resumes); gradient exchanges
            // count from 1 in each process lifetime
            exchange_id = if self.paced {
                self.round + 1
            } else {
                exchange_id + 1
            };
            let contribs = self.gather(exchange_id);
            let elapsed = clock.elapsed();
            stop |= elapsed >= cfg.time_limit;
            self.ended_by_request = stop
                && elapsed < cfg.time_limit
                && !(self.paced && due >= cfg.time_limit)
                && self.ctx.stop_requested();
            if contribs.is_empty() {
                // nobody left: every trainer is gone
                self.all_lost = true;
                break;
            }
            let participants = self.combine_and_reply(ev, &contribs, stop, elapsed);
            if self.paced || elapsed >= round_due || stop {
                self.form_round(ev, participants, elapsed, round_due, ramp_round, stop);
            }
            if stop || ev.failed() {
                break;
            }
        }
        // tell anyone still waiting (e.g. a trainer that missed the last round) to stop
        let everyone: Vec<usize> = (0..self.n).filter(|&t| self.coord.is_alive(t)).collect();
        self.coord
            .reply(&everyone, Reply::Stop(self.exchange.idle_reply()));
        self.coord.call_round(u64::MAX);
    }

    /// Waits until training time `due` (or a stop request), keeping validation up (with two
    /// rounds waiting for the evaluator, it waits for one, except at the time limit),
    /// running the validation checks between rounds and answering trainers that wake up
    /// late, in slices of at most 20 ms.
    fn wait_until(&mut self, ev: &mut Evaluator<'_>, due: Duration) {
        let (cfg, clock) = (self.ctx.cfg, self.ctx.clock);
        loop {
            ev.poll();
            // validation must keep up: with two rounds to validate waiting for it, wait for
            // one (rounds slow down to the evaluator's pace instead of piling up models),
            // except for the final round at the time limit; rounds recorded without
            // validation queue behind a running one without holding the next round (a
            // fresh-clone trial: one such round held the next for 28 s of a 29 s validation,
            // and the trainers went unaveraged)
            if ev.validations_queued() >= 2 && clock.elapsed() < cfg.time_limit {
                // (in slices, so that a trainer waking up is answered meanwhile)
                if !ev.wait_one_for(Duration::from_millis(200)) {
                    self.coord.answer_late(&self.exchange.idle_reply());
                }
                continue;
            }
            let now = clock.elapsed();
            if now >= due || self.ctx.stop_requested() {
                // the round's trainers must reach it, whatever the evaluator is doing
                ev.let_trainers_step();
                break;
            }
            // a validation check between rounds (`--val-check-interval`)
            if let Some(c) = self.checks.as_mut() {
                if let Some(p) = c.step(
                    &mut *self.coord,
                    (&*self.exchange, &self.hold),
                    now,
                    due,
                    self.round,
                    ev.in_flight(),
                ) {
                    let mut p = p;
                    for (s, &t) in p.record.steps.iter_mut().zip(&p.record.participants) {
                        *s += self.step_offsets[t];
                    }
                    ev.submit(p);
                    self.last_val_at = now;
                }
            }
            // a trainer waking up after missed rounds gets the current model now
            self.coord.answer_late(&self.exchange.idle_reply());
            clock.sleep((due - now).min(Duration::from_millis(20)));
        }
    }

    /// Calls exchange `exchange_id` and gathers the trainers' contributions (empty: nobody
    /// left). A step-count round waits for its trainers' steps, but never past the time
    /// limit: then it is called again as the last one, which every trainer joins at once
    /// whatever its step count.
    fn gather(&mut self, exchange_id: u64) -> Vec<Contribution> {
        let (cfg, clock) = (self.ctx.cfg, self.ctx.clock);
        self.coord.call_round(exchange_id);
        let until = self
            .step_mode
            .then(|| cfg.time_limit.saturating_sub(clock.elapsed()));
        let mut contribs = self.coord.gather(
            exchange_id,
            self.timeout,
            &self.exchange.idle_reply(),
            until,
        );
        if contribs.is_empty()
            && self.step_mode
            && clock.elapsed() >= cfg.time_limit
            && (0..self.n).any(|t| self.coord.is_alive(t))
        {
            self.coord.call_final(exchange_id);
            contribs =
                self.coord
                    .gather(exchange_id, self.timeout, &self.exchange.idle_reply(), None);
        }
        contribs
    }

    /// Combines `contribs` (never empty) into the model on the combining threads, replies to
    /// their trainers (`Stop` when `stop`, else `Continue`) and counts their steps, epochs and
    /// training loss. Returns the participating trainers.
    fn combine_and_reply(
        &mut self,
        ev: &Evaluator<'_>,
        contribs: &[Contribution],
        stop: bool,
        elapsed: Duration,
    ) -> Vec<usize> {
        let (exchange, model) = (&mut *self.exchange, &mut self.model);
        // on its own threads: on the evaluation's, a round waited for a running
        // validation to finish while its trainers waited for the round's reply
        let mut payload = self
            .combine_pool
            .install(|| exchange.combine(contribs, model));
        self.correction = exchange.correction();
        // the plateau hold (docs/decisions/0037-plateau-hold.md): wall-clock averaging only
        if self.paced && !self.step_mode && exchange.sends_the_model() {
            let book = ev.book();
            let best = book
                .best
                .as_ref()
                .map(|(r, v, p)| (*r, v.value, p.as_slice()));
            let held =
                self.hold
                    .adjust(&mut model.data, elapsed.as_secs_f64(), &book.records, best);
            if held != Held::Unchanged {
                payload = exchange.replace(model);
            }
            if let Held::Restored { round, .. } = held {
                // the best model was a check when the last new best accepted was one (none
                // since the resume: the resumed run's best)
                let check = book
                    .records
                    .iter()
                    .rev()
                    .find(|r| r.is_best)
                    .map_or(self.resumed_best_check, |r| r.check);
                self.held = Some((round, check));
            }
        }
        let participants: Vec<usize> = contribs.iter().map(|c| c.trainer).collect();
        self.coord.reply(
            &participants,
            if stop {
                Reply::Stop(payload)
            } else {
                Reply::Continue(payload)
            },
        );
        for c in contribs {
            self.last_steps[c.trainer] = self.step_offsets[c.trainer] + c.report.steps;
            self.last_epochs[c.trainer] = c.report.epochs;
            self.loss.0 += c.report.loss_sum;
            self.loss.1 += c.report.loss_count;
        }
        participants
    }

    /// Forms the next round at training time `elapsed` from the combined model: its record
    /// (`participants`, the trainers missing, the slots skipped since `round_due`, the mean
    /// training loss since the last round) goes to `ev`, to be validated when
    /// [`Rounds::validates`] says so.
    fn form_round(
        &mut self,
        ev: &mut Evaluator<'_>,
        participants: Vec<usize>,
        elapsed: Duration,
        round_due: Duration,
        ramp_round: bool,
        stop: bool,
    ) {
        let cfg = self.ctx.cfg;
        self.round += 1;
        self.last_formed = elapsed;
        let held = self.held.take();
        let missing: Vec<usize> = (0..self.n).filter(|t| !participants.contains(t)).collect();
        // time-based slots that passed while this round waited: skipped, and
        // said in the round's record (clock::next_round_due)
        let skipped_slots = if self.paced && !self.step_mode {
            skipped_slots_ramped(
                round_due,
                elapsed,
                cfg.sync_every,
                self.ctx.sync_ramp,
                cfg.time_limit,
            )
        } else {
            0
        };
        let (loss_sum, loss_count) = self.loss;
        // how far past its due time the round formed
        let late_by = elapsed.saturating_sub(round_due);
        let record = RoundRecord {
            round: self.round,
            elapsed_s: elapsed.as_secs_f64(),
            steps: participants.iter().map(|&t| self.last_steps[t]).collect(),
            epochs: participants.iter().map(|&t| self.last_epochs[t]).collect(),
            participants,
            missing,
            train_loss: if loss_count > 0 {
                loss_sum / loss_count as f64
            } else {
                f64::NAN
            },
            val: EvalResult::default(),
            eval_s: 0.0,
            eval_cpu_s: 0.0,
            is_best: false,
            skipped_slots,
            // where the time went when the round was late by a slot or more (the last
            // round, due at the time limit, skips no slot: late by a whole span counts)
            late: (skipped_slots > 0
                || (self.paced && !self.step_mode && late_by >= cfg.sync_every))
                .then(|| {
                    let held = self.called_late.min(late_by);
                    Late {
                        validation_s: held.as_secs_f64(),
                        trainers_s: (late_by - held).as_secs_f64(),
                    }
                }),
            check: false,
            server_step: (self.hold.scale() < 1.0).then(|| self.hold.scale()),
            restored: held.map(|(r, _)| r),
            restored_check: held.is_some_and(|(_, check)| check),
            correction: self.correction.take(),
        };
        self.loss = (0.0, 0);
        let validate = self.validates(ev, &record, elapsed, ramp_round, stop);
        if validate {
            self.last_val_at = elapsed;
        }
        ev.submit(PendingRound {
            validate,
            record,
            params: Arc::new(self.model.data.clone()),
        });
    }

    /// Whether the round just formed (`record`, at `elapsed`) is validated: the last one
    /// (`stop`) always; others every `eval_every` rounds while validation is cheap next to the
    /// training between validations ([`EVAL_SHARE`]; under the wall-clock schedule), a ramp
    /// round also only when none is in flight and the model carries real training.
    fn validates(
        &self,
        ev: &Evaluator<'_>,
        record: &RoundRecord,
        elapsed: Duration,
        ramp_round: bool,
        stop: bool,
    ) -> bool {
        // a round is validated only while validation stays cheap next to the
        // training between validations: none queued or running, and the last one
        // took at most a quarter of the time since the last was started (rounds or
        // checks); with the ramp's short spans, every few rounds
        let since = elapsed.saturating_sub(self.last_val_at).as_secs_f64();
        // before any validation has been timed, a ramp round is validated only
        // once its model carries real training: on a big graph the first
        // validation can take minutes, and it read a model of one step per trainer
        let untrained = ev.last_eval_s().is_none()
            && (record.steps.iter().sum::<u64>()
                < RAMP_FIRST_EVAL_STEPS * record.steps.len().max(1) as u64);
        // (not under the step-count schedule: it is there to compare runs round by round,
        // which the timing of a validation must not change)
        let costly = !self.step_mode
            && validation_is_costly(ev.last_eval_s(), since, ev.validation_backlog_s());
        let ramp_skip = ramp_round && (ev.in_flight() > 0 || untrained);
        stop || (!ramp_skip && !costly && self.round.is_multiple_of(self.ctx.cfg.eval_every.max(1)))
    }
}

/// The share of the time between validations a round's validation may take (the last
/// validation's wall time against the time since the last one was started): above it the
/// round is averaged and recorded without validation. It held the averaging ramp's rounds
/// only until 2026-12-06; a 30M-arc link run (500 validation positives, 1000 negatives each:
/// ~12 s per validation, rounds every ~12 s) then spent three quarters of its CPU time
/// validating (docs/decisions/0036-validation-share.md).
const EVAL_SHARE: f64 = 0.25;

/// Whether the last validation (`last_eval_s`, its wall time; `None` before the first has
/// finished) took more than [`EVAL_SHARE`] of the `since_s` seconds since the last one was
/// started: the round is then recorded without validation. So are validations still queued
/// or running for more than that share (`backlog_s`: wall seconds since the oldest of them
/// was queued), whether or not one has finished before (the first validations of the
/// 1.29B-arc link run of docs/results-scale.md took 83-326 s; a round formed while the first
/// ran was queued behind it, and the trainers, held while a validation is queued, spent ~7
/// minutes mostly waiting).
fn validation_is_costly(last_eval_s: Option<f64>, since_s: f64, backlog_s: Option<f64>) -> bool {
    [last_eval_s, backlog_s]
        .iter()
        .any(|s| s.is_some_and(|e| e > EVAL_SHARE * since_s))
}

/// Mean optimizer steps per participating trainer a ramp round needs before the run's first
/// validation (a later round is judged by [`EVAL_SHARE`] instead); grid rounds need none.
const RAMP_FIRST_EVAL_STEPS: u64 = 8;

/// How the coordinator's loop ended, for [`finish_run`].
struct RunEnd {
    /// Steps of each trainer since the start of the run, as of its last round.
    last_steps: Vec<u64>,
    /// Why the run ended before its time limit (None: it reached it).
    ended_early: Option<StopCause>,
    /// A resumed run's best model so far was a check between rounds.
    resumed_best_check: bool,
    /// The last round formed (across resumes): the resumed round when this process formed none.
    round: u64,
    /// Training time of the resumed round (for a run that formed none in this process).
    last_formed: Duration,
}

/// Validation checks between averaging rounds (`--val-check-interval`): the coordinator's
/// side. A check is called at each slot `k * interval` that comes before the next round while
/// the evaluator is idle (a check never queues behind a validation: it is skipped instead);
/// it forms when every live trainer has left a copy of its parameters (or at the round
/// timeout, from those that have), and is dropped when the round comes first.
struct Checks {
    interval: Duration,
    next_due: Duration,
    id: u64,
    pending: Option<PendingCheck>,
    timeout: Duration,
    /// The check's model (a buffer reused from check to check).
    model: ParamSet,
}

/// A check called and waiting for the trainers' copies.
struct PendingCheck {
    id: u64,
    called: Duration,
    got: Vec<(usize, crate::engines::cluster::CheckDeposit)>,
}

impl Checks {
    /// Advances the checks at training time `now` (`round_due`: the next round; `round`: rounds
    /// formed so far; `in_flight`: validations queued). A check's model is the one a round
    /// formed now would send: `model_of`'s exchange combines the trainers' copies and its
    /// plateau hold applies its step. Returns a formed check to validate, its `steps` counted
    /// since this process started.
    fn step(
        &mut self,
        coord: &mut dyn CoordinatorEndpoint,
        model_of: (&dyn Exchange, &PlateauHold),
        now: Duration,
        round_due: Duration,
        round: u64,
        in_flight: usize,
    ) -> Option<PendingRound> {
        let (exchange, hold) = model_of;
        if let Some(p) = self.pending.as_mut() {
            p.got.extend(coord.collect_check(p.id));
            let n = coord.num_trainers();
            let waiting = (0..n).any(|t| coord.is_alive(t) && !p.got.iter().any(|(g, _)| *g == t));
            if waiting && now < p.called + self.timeout {
                return None;
            }
            let p = self.pending.take()?;
            if p.got.is_empty() {
                return None;
            }
            let mut got = p.got;
            got.sort_by_key(|(t, _)| *t);
            let models: Vec<(usize, &[f32])> =
                got.iter().map(|(t, d)| (*t, d.params.as_slice())).collect();
            if !exchange.check_model(&models, &mut self.model) {
                return None;
            }
            // a round formed now would apply the plateau hold's step
            let server_step = hold.preview(&mut self.model.data);
            let participants: Vec<usize> = got.iter().map(|(t, _)| *t).collect();
            let record = RoundRecord {
                round,
                elapsed_s: now.as_secs_f64(),
                missing: (0..n).filter(|t| !participants.contains(t)).collect(),
                steps: got.iter().map(|(_, d)| d.steps).collect(),
                epochs: got.iter().map(|(_, d)| d.epochs).collect(),
                participants,
                train_loss: f64::NAN,
                val: EvalResult::default(),
                eval_s: 0.0,
                eval_cpu_s: 0.0,
                is_best: false,
                skipped_slots: 0,
                late: None,
                check: true,
                server_step,
                restored: None,
                restored_check: false,
                correction: None,
            };
            return Some(PendingRound {
                record,
                params: Arc::new(self.model.data.clone()),
                validate: true,
            });
        }
        if now < self.next_due {
            return None;
        }
        // the next slot after now (slots missed while a validation ran are skipped)
        self.next_due = next_round_due(now, self.interval, Duration::MAX);
        // a check slot at or past the round's due time is the round's; none while the
        // evaluator is busy
        if now + Duration::from_millis(1) >= round_due || in_flight > 0 {
            return None;
        }
        self.id += 1;
        coord.call_check(self.id);
        self.pending = Some(PendingCheck {
            id: self.id,
            called: now,
            got: Vec::new(),
        });
        None
    }
}

/// Ends a run: tests the final and the best model and assembles the [`RunResult`].
///
/// # Errors
/// The observer's error, if any; [`TrainError::AllTrainersFailed`] when no round was ever
/// validated.
fn finish_run(
    ctx: &Coordinated<'_>,
    num_trainers: usize,
    book: Book,
    current: ParamSet,
    end: RunEnd,
) -> Result<RunResult, TrainError> {
    let RunEnd {
        last_steps,
        ended_early,
        resumed_best_check,
        round,
        last_formed,
    } = end;
    let Book {
        records,
        best,
        error,
    } = book;
    if let Some(e) = error {
        return Err(e);
    }
    let Some((best_round, best_val, best_data)) = best else {
        return Err(TrainError::AllTrainersFailed);
    };
    let mut best_params = current.clone();
    best_params.data.copy_from_slice(&best_data);
    // the best model was a check between rounds: the last record marked best in this process
    // lifetime, or else the resumed checkpoint's best
    let best_check = records
        .iter()
        .rev()
        .find(|r| r.is_best)
        .map_or(resumed_best_check, |r| r.check);
    let (model, prep) = (ctx.model, ctx.prep);
    let infer = ctx.cfg.infer_options();
    // a resumed run that formed no round (its trainers lost at once): the final model is the
    // resumed one, validated here (its summary used to say 0 rounds and val 0 over a good one)
    let final_val = match records.iter().rev().find(|r| !r.check) {
        Some(r) => r.val.clone(),
        None => ctx
            .eval_pool
            .install(|| evaluate_with(model, &current, prep, Split::Val, &infer)),
    };
    let final_test = ctx
        .eval_pool
        .install(|| evaluate_with(model, &current, prep, Split::Test, &infer));
    // the best model is often the last one: its test result is the final model's (exact
    // evaluation is deterministic), so the whole test split is not evaluated twice
    let best_test = if best_params.data == current.data {
        final_test.clone()
    } else {
        ctx.eval_pool
            .install(|| evaluate_with(model, &best_params, prep, Split::Test, &infer))
    };
    let summary = Summary {
        method: ctx.cfg.method.to_string(),
        task: ctx.cfg.task.to_string(),
        num_trainers,
        rounds: if records.is_empty() {
            round
        } else {
            records
                .last()
                .map_or(0, |r| r.round)
                .max(records.iter().filter(|r| !r.check).count() as u64)
        },
        metric: prep.metric.resolve(prep.eval.target_kind()).to_string(),
        train_time_s: records
            .last()
            .map_or(last_formed.as_secs_f64(), |r| r.elapsed_s),
        final_val,
        final_test,
        best_round,
        best_check,
        best_val,
        best_test,
        steps_per_trainer: last_steps,
        failed_trainers: Vec::new(),
        partition_hash: prep.partition_hash.clone(),
        interrupted: ended_early.is_some(),
        interrupted_by: ended_early,
        warnings: Vec::new(),
        removed_on_load: prep.removed.clone(),
        memory: Vec::new(),
        checkpoints_superseded: 0,
        matmul_products: String::new(),
    };
    Ok(RunResult {
        rounds: records,
        summary,
        final_params: current,
        best_params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_is_validated_only_while_validation_takes_at_most_a_quarter_of_the_time() {
        // nothing timed yet: validate
        assert!(!validation_is_costly(None, 0.1, None));
        assert!(!validation_is_costly(Some(3.0), 12.0, None));
        assert!(validation_is_costly(Some(3.01), 12.0, None));
        // regression (issue 30, the MAG-like row): a validation queued or running for more
        // than the share, the first of the run or a later one, is costly: the round is not
        // queued behind it; one just queued (a small graph's) is not
        assert!(validation_is_costly(None, 5.0, Some(5.0)));
        assert!(validation_is_costly(Some(0.5), 100.0, Some(25.01)));
        assert!(!validation_is_costly(None, 5.0, Some(1.25)));
        assert!(!validation_is_costly(Some(0.5), 100.0, Some(0.01)));
        // the 30M-arc link run of decision 0036: validations of ~12 s, rounds every ~12.3 s;
        // before, every round was validated (three quarters of the CPU time); now one round
        // in four, the first after 48 s have passed since the last validation started
        let (mut last_val_at, mut validated) = (0.0, Vec::new());
        for round in 1..=12 {
            let at = 12.3 * round as f64;
            if !validation_is_costly(Some(12.0), at - last_val_at, None) {
                last_val_at = at;
                validated.push(round);
            }
        }
        assert_eq!(validated, vec![4, 8, 12]);
    }
}
