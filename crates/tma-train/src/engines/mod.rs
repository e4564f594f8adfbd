//! Engines: what runs a prepared run's trainers and its coordinator. One trait, [`Engine`],
//! with two implementations:
//!
//! * [`InProcess`] ([`in_process`]): M trainer threads in this process, connected to the
//!   coordinator by [`crate::engines::cluster::InProcess`];
//! * `Mpi` (module `mpi`, crate feature `mpi`): one process per rank under `mpirun` / `srun`;
//!   rank 0 runs the coordinator through this trait, ranks `1..=M` each run one trainer on its
//!   own part of a partition directory (`mpi::launch` tells a process which it is).
//!
//! [`crate::run::Run::train_with`] runs either. What both share is written once, here: the
//! averaging-weight rule ([`average_weight`], [`weights_of`]), the initial model
//! ([`initial_params`]), and the coordinator's round loop and exchange
//! ([`coordinate_prepared`] over [`crate::engines::coordinator::coordinate`]); who takes part in a round
//! is [`crate::engines::cluster::Roster`] in both transports.

pub mod cluster;
pub mod coordinator;
pub mod gate;
pub mod in_process;
pub mod method;
#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "mpi")]
pub mod mpi_cluster;
pub mod plateau;
pub mod trainer;

pub use in_process::{run_in_process, InProcess};

use crate::clock::Clock;
use crate::config::{AverageWeight, TrainConfig};
use crate::data::{build_model, Prepared};
use crate::engines::cluster::CoordinatorEndpoint;
use crate::engines::coordinator::{coordinate, Coordinated};
use crate::engines::gate::StepGate;
use crate::engines::method::{ExchangeInputs, TrainingMethod};
use crate::evaluation::record::{Observer, Resume, RunResult, StopFlag};
use crate::store::Manifest;
use crate::TrainError;
use std::path::Path;
use std::sync::Arc;
use tma_graph::seed::{self, Purpose};

/// Runs the trainers and the coordinator of a prepared run. Implemented by [`InProcess`] and,
/// with the crate feature `mpi`, by `mpi::Mpi` (rank 0 of an MPI job).
pub trait Engine {
    /// Runs the round loop of `ctx` to its end (time limit, stop request, or every trainer
    /// lost) and returns the coordinator's result; the run ([`crate::run::Run::train_with`])
    /// records every round through `ctx.observer` and writes the models and the summary after.
    ///
    /// # Errors
    /// [`TrainError::AllTrainersFailed`] when no trainer is left to average; the observer's
    /// error; engine-specific start-up errors (a thread pool, MPI ranks that do not join).
    fn run(&mut self, ctx: EngineContext<'_>) -> Result<RunResult, TrainError>;

    /// The role recorded for this process in `summary.json` `memory` when the engine reports
    /// no process figures itself: `in-process`, or `coordinator` for MPI's rank 0.
    fn role(&self) -> &'static str;
}

/// What an engine gets from [`crate::run::Run::train_with`].
pub struct EngineContext<'a> {
    /// The training method (from [`crate::methods::training_method`]).
    pub method: &'a dyn TrainingMethod,
    /// The prepared data (under MPI: the coordinator's only; `trainers` is empty).
    pub prep: &'a Prepared,
    /// The partition directory and its manifest, when the run trains on one (MPI's only
    /// source of the trainers' part sizes).
    pub partitions: Option<(&'a Path, &'a Manifest)>,
    /// The resolved configuration (the user's seed, never changed).
    pub cfg: &'a TrainConfig,
    /// The training clock.
    pub clock: Arc<dyn Clock>,
    /// Receives every round (the run's recorder, wrapping the caller's observer).
    pub observer: &'a mut dyn Observer,
    /// Where a resumed run continues from.
    pub resume: Option<Resume>,
    /// The seed segment of the trainers' random streams: 0 for a fresh run, the checkpointed
    /// round for a resumed one (a resumed run does not replay the samples of its first
    /// segment).
    pub segment: u64,
    /// The run's stop request ([`crate::run::Run::stop_on`]), for the coordinator's loop.
    pub stop: Option<StopFlag>,
}

/// Threads each trainer's pool gets: an equal share of `threads` (at least one).
pub fn trainer_threads(threads: usize, num_trainers: usize) -> usize {
    (threads / num_trainers.max(1)).max(1)
}

/// The step gate of `num_trainers` in-process trainers on `threads` worker threads: `None`
/// when every trainer has a thread of its own, else a gate of `threads` permits
/// ([`crate::engines::gate`]).
pub fn step_gate(threads: usize, num_trainers: usize) -> Option<Arc<StepGate>> {
    (crate::engines::gate::concurrent_steps(threads, num_trainers) < num_trainers)
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

/// The one averaging-weight rule of every engine: [`average_weight`] of each trainer given
/// as `(training examples, nodes, arcs)`, and 0 for a trainer without training examples (it
/// joins every round, but its parameters, the last average, do not enter the mean).
pub fn weights_of(
    cfg: &TrainConfig,
    trainers: impl Iterator<Item = (usize, usize, usize)>,
) -> Vec<f64> {
    trainers
        .map(|(examples, nodes, edges)| match examples {
            0 => 0.0,
            _ => average_weight(cfg.average_weight, nodes, edges),
        })
        .collect()
}

/// [`weights_of`] the trainers of `prep` (in-process: every trainer's data is here).
pub fn average_weights(cfg: &TrainConfig, prep: &Prepared) -> Vec<f64> {
    weights_of(
        cfg,
        prep.trainers
            .iter()
            .map(|t| (t.num_examples(), t.num_nodes(), t.num_edges())),
    )
}

/// [`weights_of`] the parts of a partition directory's manifest (MPI's rank 0 holds no part).
pub fn manifest_weights(cfg: &TrainConfig, m: &Manifest) -> Vec<f64> {
    weights_of(
        cfg,
        m.parts
            .iter()
            .map(|p| (p.num_train, p.num_nodes, p.num_edges)),
    )
}

/// The initial parameters of a run: drawn from the [`Purpose::ModelInit`] stream of `cfg.seed`.
pub fn initial_params(cfg: &TrainConfig, model: &tma_nn::Model) -> tma_nn::ParamSet {
    model.init_params(&mut seed::rng(cfg.seed, Purpose::ModelInit))
}

/// The coordinator's side of every engine: builds the model and its initial parameters, the
/// method's exchange over the trainers' averaging `weights`, an evaluation pool of `threads`,
/// and runs [`coordinate`] over `endpoint` until the run ends. `trainer_gate`: the step gate
/// of trainers that share the evaluation's cores (in-process), held while a validation runs.
///
/// # Errors
/// As [`coordinate`]; [`TrainError::Config`] if the pool cannot be built.
pub fn coordinate_prepared(
    endpoint: &mut dyn CoordinatorEndpoint,
    ctx: EngineContext<'_>,
    weights: Vec<f64>,
    threads: usize,
    trainer_gate: Option<&StepGate>,
) -> Result<RunResult, TrainError> {
    let cfg = ctx.cfg;
    let model = build_model(cfg, ctx.prep.model_shape())?;
    let init = initial_params(cfg, &model);
    let eval_pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("tma-eval-{i}"))
        .build()
        .map_err(|e| TrainError::Config(format!("thread pool: {e}")))?;
    let mut exchange = ctx.method.exchange(ExchangeInputs {
        prep: ctx.prep,
        cfg,
        model: &model,
        init: &init,
        weights,
    });
    let coordinated = Coordinated {
        prep: ctx.prep,
        cfg,
        model: &model,
        clock: &*ctx.clock,
        eval_pool: &eval_pool,
        stop: ctx.stop.as_deref(),
        sync_ramp: ctx.method.info().sync_ramp(cfg),
        trainer_gate,
    };
    coordinate(
        endpoint,
        &mut *exchange,
        &coordinated,
        init.clone(),
        ctx.observer,
        ctx.resume,
    )
}

/// This process's rank when an MPI launcher started it (Open MPI, PMIx, PMI / Hydra, Slurm),
/// read from the launcher's environment: known before MPI is initialized, and without the
/// `mpi` feature. `None` outside a launcher.
pub fn launcher_rank() -> Option<u64> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse().ok())
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

    #[test]
    fn one_weight_rule_for_every_engine() {
        let mut cfg = TrainConfig::default();
        let parts = [(10, 100, 900), (0, 50, 400), (3, 20, 30)];
        cfg.average_weight = AverageWeight::Uniform;
        assert_eq!(weights_of(&cfg, parts.into_iter()), vec![1.0, 0.0, 1.0]);
        cfg.average_weight = AverageWeight::Nodes;
        assert_eq!(weights_of(&cfg, parts.into_iter()), vec![100.0, 0.0, 20.0]);
        cfg.average_weight = AverageWeight::Edges;
        assert_eq!(weights_of(&cfg, parts.into_iter()), vec![900.0, 0.0, 30.0]);
    }
}
