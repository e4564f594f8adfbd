//! The in-process engine: M trainer threads, each in its own rayon pool, and the coordinator
//! on the calling thread, connected by [`crate::engines::cluster::InProcess`]. More trainers than
//! threads pass a first-come step gate and share one buffer pool (docs/decisions/0020).

use super::{
    average_weights, coordinate_prepared, initial_params, step_gate, total_threads,
    trainer_threads, Engine, EngineContext,
};
use crate::clock::Clock;
use crate::config::TrainConfig;
use crate::data::{build_model, Prepared};
use crate::engines::cluster::InProcess as Channels;
use crate::engines::method::TrainingMethod;
use crate::engines::trainer::{Trainer, TrainerExit};
use crate::evaluation::record::{Extras, FailPlan, Observer, Resume, RunResult};
use crate::TrainError;
use std::sync::Arc;

/// The in-process [`Engine`]: trainer threads of this process. `fail` injects trainer
/// failures (`--fail`): trainer `t` stops at the given training time.
#[derive(Clone, Debug, Default)]
pub struct InProcess {
    /// Injected failures.
    pub fail: FailPlan,
}

impl InProcess {
    /// An in-process engine with the failures `fail` injected.
    pub fn new(fail: FailPlan) -> InProcess {
        InProcess { fail }
    }
}

impl Engine for InProcess {
    fn run(&mut self, ctx: EngineContext<'_>) -> Result<RunResult, TrainError> {
        run_in_process(
            ctx.method,
            ctx.prep,
            ctx.cfg,
            &self.fail,
            ctx.clock,
            ctx.observer,
            Extras {
                resume: ctx.resume,
                stop: ctx.stop,
            },
        )
    }

    fn role(&self) -> &'static str {
        "in-process"
    }
}

/// Runs a prepared job of `method` with in-process trainers (threads): one thread per
/// `prep.trainers` entry, each inside its own rayon pool sized to its share of the cores, and
/// the coordinator on the calling thread with an evaluation pool of all the threads. Time
/// counts from `clock`'s start. Trainers that fail (injected with `fail`, or a panic) are
/// listed with their time in the summary.
///
/// # Errors
/// [`TrainError::AllTrainersFailed`] if no trainer is left to average; the observer's error;
/// [`TrainError::Config`] if a thread pool cannot be built.
pub fn run_in_process(
    method: &dyn TrainingMethod,
    prep: &Prepared,
    cfg: &TrainConfig,
    fail: &FailPlan,
    clock: Arc<dyn Clock>,
    observer: &mut dyn Observer,
    extras: Extras,
) -> Result<RunResult, TrainError> {
    let model = build_model(cfg, prep.model_shape())?;
    let init = initial_params(cfg, &model);
    let m = prep.trainers.len();
    let segment = extras.resume.as_ref().map_or(0, |r| r.round);
    let (mut coord, endpoints) = Channels::new(m);
    let threads = total_threads(cfg);
    let share = trainer_threads(threads, m);
    // more trainers than threads: at most `threads` steps at once, the trainers' models
    // sharing the buffers of that many steps (crate::engines::gate)
    let gate = step_gate(threads, m);
    // every trainer passes a gate (the step gate above, else one that limits nothing) that the
    // evaluator holds while it validates: the trainers share its cores
    // (docs/decisions/0029-validation-first.md)
    let hold_gate = gate
        .clone()
        .unwrap_or_else(|| Arc::new(crate::engines::gate::StepGate::new(m)));
    let mut models: Vec<tma_nn::Model> = match &gate {
        Some(g) => {
            // (the pool lives as long as a trainer's model: freed when the last one exits)
            let base = model.clone();
            (0..m).map(|_| base.sharing_buffers(g.permits())).collect()
        }
        None => (0..m).map(|_| model.clone()).collect(),
    };
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(m);
        for (data, mut ep) in prep.trainers.iter().zip(endpoints) {
            let trainer_model = models.pop().expect("one model per trainer");
            let mut trainer =
                Trainer::with_segment(data.clone(), trainer_model, init.clone(), cfg, segment);
            trainer.set_exclude_targets(cfg.excludes_targets(prep.structural()));
            trainer.set_step_gate(hold_gate.clone());
            trainer.continue_epochs(Resume::epochs_of(extras.resume.as_ref(), data.trainer));
            let clock = clock.clone();
            let fail_at = fail.get(&data.trainer).copied();
            let id = data.trainer;
            handles.push(
                std::thread::Builder::new()
                    .name(format!("tma-trainer-{id}"))
                    .spawn_scoped(scope, move || {
                        let pool = rayon::ThreadPoolBuilder::new()
                            .num_threads(share)
                            .thread_name(move |i| format!("tma-trainer-{id}-{i}"))
                            .build()
                            .expect("trainer thread pool");
                        let exit = pool.install(|| {
                            method.run_trainer(trainer, &mut ep, clock.clone(), fail_at)
                        });
                        (exit, clock.elapsed())
                    })
                    .expect("spawn trainer thread"),
            );
        }
        let ctx = EngineContext {
            method,
            prep,
            partitions: None,
            cfg,
            clock: clock.clone(),
            observer,
            resume: extras.resume,
            segment,
            stop: extras.stop,
        };
        let result = coordinate_prepared(
            &mut coord,
            ctx,
            average_weights(cfg, prep),
            threads,
            Some(&hold_gate),
        );
        let mut failed = Vec::new();
        for (t, h) in handles.into_iter().enumerate() {
            match h.join() {
                Ok((TrainerExit::Failed(_), at)) => failed.push((t, at.as_secs_f64())),
                Ok(_) => {}
                Err(_) => failed.push((t, f64::NAN)),
            }
        }
        result.map(|mut r| {
            r.summary.failed_trainers = failed;
            r
        })
    })
}
