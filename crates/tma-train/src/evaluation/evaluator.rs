//! The evaluator: validates each round's averaged model on its own thread, so a slow
//! evaluation never delays the next round, keeps the best model and hands the rounds, in
//! order, to the [`Observer`]. One evaluator serves every method.

use crate::data::Prepared;
use crate::evaluation::eval::{evaluate_with, EvalResult, Split};
use crate::evaluation::infer::InferOptions;
use crate::evaluation::record::{Observer, RoundRecord};
use crate::TrainError;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::Instant;
use tma_nn::{Model, ParamSet};

/// A round waiting for its validation result.
pub(crate) struct PendingRound {
    /// The round (its `val`, `eval_s` and `is_best` are filled in by the evaluator).
    pub(crate) record: RoundRecord,
    /// The round's averaged parameters.
    pub(crate) params: Arc<Vec<f32>>,
    /// Whether to validate it (`--eval-every`); a round that is not validated keeps a NaN
    /// `val.value` (null in JSON) and is never the best.
    pub(crate) validate: bool,
}

/// The best round so far: number, validation result, parameters.
pub(crate) type Best = (u64, EvalResult, Arc<Vec<f32>>);

/// What the evaluator has accepted so far.
pub(crate) struct Book {
    /// Validated rounds, in order.
    pub(crate) records: Vec<RoundRecord>,
    /// The best round.
    pub(crate) best: Option<Best>,
    /// The first error an observer returned.
    pub(crate) error: Option<TrainError>,
}

/// The coordinator's handle on the evaluator thread.
pub(crate) struct Evaluator<'o> {
    /// Holds (`true`) or lifts the in-process trainers' steps while a validation is queued or
    /// running (validation first: docs/decisions/0029-validation-first.md).
    gate: Option<HoldSteps<'o>>,
    jobs: Option<Sender<PendingRound>>,
    done: Receiver<PendingRound>,
    in_flight: usize,
    /// Of those, the rounds to validate (queued or running): when each was queued (wall
    /// clock), oldest first.
    validating: std::collections::VecDeque<std::time::Instant>,
    observer: &'o mut dyn Observer,
    book: Book,
    /// Wall seconds of the last validation accepted (None before the first).
    last_eval_s: Option<f64>,
}

impl Evaluator<'_> {
    /// Queues a round for validation; one to validate holds the trainers' step gate (if any)
    /// until the evaluator is idle again or [`Evaluator::let_trainers_step`].
    pub(crate) fn submit(&mut self, p: PendingRound) {
        let validate = p.validate;
        if let Some(j) = &self.jobs {
            if j.send(p).is_ok() {
                self.in_flight += 1;
                if validate {
                    self.validating.push_back(std::time::Instant::now());
                    self.hold_trainers(true);
                }
            }
        }
    }

    /// Lifts the hold on the trainers' step gate (a round is due: its trainers must reach it
    /// whatever the evaluator is doing).
    pub(crate) fn let_trainers_step(&mut self) {
        self.hold_trainers(false);
    }

    fn hold_trainers(&self, held: bool) {
        if let Some(hold) = self.gate {
            hold(held);
        }
    }

    /// Rounds queued and not yet accepted.
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Rounds to validate queued or running (not yet accepted).
    pub(crate) fn validations_queued(&self) -> usize {
        self.validating.len()
    }

    /// Wall seconds since the oldest validation still queued or running was queued (None
    /// when none is): a lower bound of what the validations outstanding cost.
    pub(crate) fn validation_backlog_s(&self) -> Option<f64> {
        self.validating.front().map(|t| t.elapsed().as_secs_f64())
    }

    /// Wall seconds the last accepted validation took (None before the first).
    pub(crate) fn last_eval_s(&self) -> Option<f64> {
        self.last_eval_s
    }

    /// Accepts every round whose validation has finished.
    pub(crate) fn poll(&mut self) {
        while let Ok(p) = self.done.try_recv() {
            self.accept(p);
        }
    }

    /// Waits at most `d` for the next validated round and accepts it; returns whether one
    /// came (the caller keeps its transport alive in between).
    pub(crate) fn wait_one_for(&mut self, d: std::time::Duration) -> bool {
        match self.done.recv_timeout(d) {
            Ok(p) => {
                self.accept(p);
                true
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => false,
            // the evaluator thread is gone: nothing more will come
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                self.in_flight = 0;
                self.validating.clear();
                self.hold_trainers(false);
                true
            }
        }
    }

    /// The rounds accepted so far and the best model.
    pub(crate) fn book(&self) -> &Book {
        &self.book
    }

    /// Whether an observer has failed (the run should stop).
    pub(crate) fn failed(&self) -> bool {
        self.book.error.is_some()
    }

    fn accept(&mut self, mut p: PendingRound) {
        self.in_flight -= 1;
        if p.validate {
            self.validating.pop_front();
        }
        if self.in_flight == 0 {
            self.hold_trainers(false);
        }
        let is_best = p.validate
            && crate::evaluation::eval::improves(
                p.record.val.value,
                self.book.best.as_ref().map(|(_, b, _)| b.value),
            );
        if is_best {
            self.book.best = Some((p.record.round, p.record.val.clone(), p.params.clone()));
        }
        p.record.is_best = is_best;
        if p.validate {
            self.last_eval_s = Some(p.record.eval_s);
        }
        let r = self
            .observer
            .on_round(&p.record)
            .and_then(|()| self.observer.on_round_model(&p.record, &p.params));
        if let Err(e) = r {
            self.book.error.get_or_insert(e);
        }
        self.book.records.push(p.record);
    }

    /// Stops taking rounds and accepts every round still queued.
    fn close(&mut self) {
        self.jobs = None;
        while self.in_flight > 0 {
            let Ok(p) = self.done.recv() else { break };
            self.accept(p);
        }
        self.hold_trainers(false);
    }
}

/// How validation runs: the threads it runs on and its inference options.
pub(crate) struct EvalWith<'a> {
    /// Threads of the evaluation (the coordinator's share of the cores).
    pub(crate) pool: &'a rayon::ThreadPool,
    /// How it computes the outputs it needs.
    pub(crate) opts: &'a InferOptions,
    /// Holds (`true`) or lifts the steps of trainers that share the evaluation's cores
    /// (in-process: their step gate) while a validation is queued or running; None where the
    /// trainers have cores of their own.
    pub(crate) gate: Option<HoldSteps<'a>>,
}

/// Holds (`true`) or lifts (`false`) the training steps of the trainers that share the
/// evaluation's cores (the in-process engine's step gate, `crate::engines::gate::StepGate::hold`).
pub(crate) type HoldSteps<'a> = &'a dyn Fn(bool);

/// Runs `body` with an evaluator thread validating (as `eval` says) the rounds it submits,
/// then waits for the rounds still queued. `best` is the best round a resumed run had.
/// Returns `body`'s result and the [`Book`] of accepted rounds.
pub(crate) fn with_evaluator<R>(
    model: &Model,
    prep: &Prepared,
    eval: EvalWith<'_>,
    template: &ParamSet,
    observer: &mut dyn Observer,
    best: Option<Best>,
    body: impl FnOnce(&mut Evaluator<'_>) -> R,
) -> (R, Book) {
    let EvalWith {
        pool: eval_pool,
        opts,
        gate,
    } = eval;
    let (job_tx, job_rx) = channel::<PendingRound>();
    let (done_tx, done_rx) = channel::<PendingRound>();
    std::thread::scope(|scope| {
        let mut params = template.clone();
        std::thread::Builder::new()
            .name("tma-evaluator".into())
            .spawn_scoped(scope, move || {
                for mut job in job_rx {
                    if !job.validate {
                        job.record.val.value = f64::NAN;
                        if done_tx.send(job).is_err() {
                            break;
                        }
                        continue;
                    }
                    params.data.copy_from_slice(&job.params);
                    let cpu0 = pool_cpu_s(eval_pool);
                    let t0 = Instant::now();
                    job.record.val =
                        eval_pool.install(|| evaluate_with(model, &params, prep, Split::Val, opts));
                    job.record.eval_s = t0.elapsed().as_secs_f64();
                    // a mapped evaluation graph: the pages this validation read leave the
                    // process's RSS (they stay in the page cache for the next one), so the
                    // coordinator's resident set does not grow towards the whole graph over
                    // the rounds (no-op for owned arrays)
                    prep.graph.release_pages();
                    prep.features.release_pages();
                    job.record.eval_cpu_s = match (cpu0, pool_cpu_s(eval_pool)) {
                        (Some(a), Some(b)) => (b - a).max(0.0),
                        _ => job.record.eval_s * eval_pool.current_num_threads() as f64,
                    };
                    if done_tx.send(job).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn evaluator thread");
        let mut ev = Evaluator {
            gate,
            jobs: Some(job_tx),
            done: done_rx,
            in_flight: 0,
            validating: Default::default(),
            last_eval_s: None,
            observer,
            book: Book {
                records: Vec::new(),
                best,
                error: None,
            },
        };
        let r = body(&mut ev);
        ev.close();
        (r, ev.book)
    })
}

/// CPU time of the calling thread, seconds (Linux: `/proc/thread-self/schedstat`, nanoseconds
/// on CPU; `None` where that file cannot be read).
fn thread_cpu_s() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns as f64 * 1e-9)
}

/// Summed CPU time of every thread of `pool` (each thread reads its own), seconds. The pool's
/// threads only evaluate (and combine models between rounds), so the difference over one
/// validation is what that validation took from the shared cores.
fn pool_cpu_s(pool: &rayon::ThreadPool) -> Option<f64> {
    pool.broadcast(|_| thread_cpu_s())
        .into_iter()
        .sum::<Option<f64>>()
}
