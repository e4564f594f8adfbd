//! The in-process engine: M trainer threads, each in its own rayon pool, and the coordinator
//! on the calling thread, connected by [`InProcess`]. The MPI engine (feature `mpi`) runs the
//! same [`coordinate`] and trainer loops over `crate::mpi_cluster`.

use crate::clock::Clock;
use crate::cluster::InProcess;
use crate::config::{AverageWeight, TrainConfig};
use crate::coordinator::{coordinate, Coordinated};
use crate::data::{build_model, Prepared};
use crate::gate::StepGate;
use crate::method::{ExchangeInputs, TrainingMethod};
use crate::record::{Extras, FailPlan, Observer, Resume, RunResult};
use crate::trainer::{Trainer, TrainerExit};
use crate::TrainError;
use std::sync::Arc;
use tma_graph::seed::{self, Purpose};

/// Threads each trainer's pool gets: an equal share of `threads` (at least one).
pub fn trainer_threads(threads: usize, num_trainers: usize) -> usize {
    (threads / num_trainers.max(1)).max(1)
}

/// The step gate of `num_trainers` in-process trainers on `threads` worker threads: `None`
/// when every trainer has a thread of its own, else a gate of `threads` permits
/// ([`crate::gate`]).
pub fn step_gate(threads: usize, num_trainers: usize) -> Option<Arc<StepGate>> {
    (crate::gate::concurrent_steps(threads, num_trainers) < num_trainers)
        .then(|| Arc::new(StepGate::new(threads)))
}

/// Total worker threads a config asks for (0 = all cores).
pub fn total_threads(cfg: &TrainConfig) -> usize {
    cfg.worker_threads()
}

/// Averaging weight of a trainer with `num_nodes` nodes and `num_edges` arcs: 1 (uniform, the
/// paper's plain mean), its nodes, or its arcs, per `w`. The coordinator normalizes over the
/// trainers present in a round.
pub fn average_weight(w: AverageWeight, num_nodes: usize, num_edges: usize) -> f64 {
    match w {
        AverageWeight::Uniform => 1.0,
        AverageWeight::Nodes => num_nodes as f64,
        AverageWeight::Edges => num_edges as f64,
    }
}

/// [`average_weight`] of every trainer of `prep`; 0 for a trainer without training examples
/// (it joins every round, but its parameters, the last average, do not enter the mean).
pub fn average_weights(cfg: &TrainConfig, prep: &Prepared) -> Vec<f64> {
    prep.trainers
        .iter()
        .map(|t| {
            if t.num_examples() == 0 {
                0.0
            } else {
                average_weight(cfg.average_weight, t.num_nodes(), t.num_edges())
            }
        })
        .collect()
}

/// The initial parameters of a run: drawn from the [`Purpose::ModelInit`] stream of `cfg.seed`.
pub fn initial_params(cfg: &TrainConfig, model: &tma_nn::Model) -> tma_nn::ParamSet {
    model.init_params(&mut seed::rng(cfg.seed, Purpose::ModelInit))
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
    let (mut coord, endpoints) = InProcess::new(m);
    let threads = total_threads(cfg);
    let share = trainer_threads(threads, m);
    let eval_pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("tma-eval-{i}"))
        .build()
        .map_err(|e| TrainError::Config(format!("thread pool: {e}")))?;
    let mut exchange = method.exchange(ExchangeInputs {
        prep,
        cfg,
        model: &model,
        init: &init,
        weights: average_weights(cfg, prep),
    });
    // more trainers than threads: at most `threads` steps at once, the trainers' models
    // sharing the buffers of that many steps (crate::gate)
    let gate = step_gate(threads, m);
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
            if let Some(g) = &gate {
                trainer.set_step_gate(g.clone());
            }
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
        let ctx = Coordinated {
            prep,
            cfg,
            model: &model,
            clock: &*clock,
            eval_pool: &eval_pool,
            stop: extras.stop.as_deref(),
        };
        let result = coordinate(
            &mut coord,
            &mut *exchange,
            &ctx,
            init.clone(),
            observer,
            extras.resume,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_gate_only_when_trainers_outnumber_threads() {
        // 4 trainers on 2 threads: 2 steps at once; on 4 or 8 threads, none
        assert_eq!(step_gate(2, 4).map(|g| g.permits()), Some(2));
        assert_eq!(step_gate(1, 2).map(|g| g.permits()), Some(1));
        assert!(step_gate(4, 4).is_none());
        assert!(step_gate(8, 4).is_none());
        assert!(step_gate(2, 1).is_none());
        // (0 threads is read as 1)
        assert_eq!(step_gate(0, 3).map(|g| g.permits()), Some(1));
        assert_eq!(trainer_threads(2, 4), 1);
    }
}
