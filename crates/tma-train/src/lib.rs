//! Training for tma: trainers, the coordinator, model averaging and the baselines, evaluation,
//! and the run as a library object.
//!
//! * [`run::Run`] owns a run from start to end (data, run directory, config, partition record,
//!   round log, checkpoints, models, summary); the CLI and other front ends call it.
//!
//! The folders, each importing only the ones listed before it (`crates/tma-arch` checks that
//! no two folders import each other):
//!
//! | folder | what it holds |
//! |---|---|
//! | [`config`] | [`TrainConfig`]: every knob of a run, and the encoder's own options |
//! | [`data`] | [`data::prepare_with`]: the split and each trainer's part; parts spilled to disk |
//! | [`evaluation`] | metrics and [`evaluation::eval::evaluate`], inference, the evaluator thread, what a run reports ([`evaluation::record`]) |
//! | [`store`] | what is kept on disk: partition directories, the run directory ([`store::output::RunDir`]), checkpoints, TensorBoard events |
//! | [`engines`] | the round loop (trainers, coordinator, transport) and what runs it: one trait, [`engines::Engine`], implemented by [`engines::InProcess`] (threads) and, with the crate feature `mpi`, `engines::mpi::Mpi` (one process per rank); the contract with methods, [`engines::method::TrainingMethod`] |
//! | [`methods`] | the method registry and the methods: [`methods::averaging`] (RandomTMA, SuperTMA, PSGD-PA, centralized), [`methods::llcg`], [`methods::ggs`] |
//! | [`options`] | the option table and the one path from given options to a [`TrainConfig`]; the checks that depend on the method |
//! | [`run`] | [`run::Run`] and its memory estimate; [`run::Run::train_with`] runs either engine |
//!
//! Files outside the folders: [`error`](TrainError), [`clock`] (injected time), [`memory`]
//! (a process's measured memory), and [`saved`] (a saved model used after its run: evaluated
//! again on its data, or embedded).
//!
//! Source: Zhu et al., *Simplifying Distributed Neural Network Training on Massive Graphs:
//! Randomized Partitions Improve Model Aggregation*, arXiv 2305.09887.
#![warn(missing_docs)]

pub mod clock;
pub mod config;
pub mod data;
pub mod engines;
mod error;
pub mod evaluation;
pub mod memory;
pub mod methods;
pub mod options;
pub mod run;
pub mod saved;
pub mod store;

pub use clock::{Clock, ManualClock, RealClock};
pub use config::{
    AverageWeight, Featureless, Method, Metric, TargetKind, Task, TrainConfig,
    FEATURELESS_DEGREE_TO_OVERLAP, FEATURELESS_RANDOM_MIN_EDGES, FEATURELESS_RANDOM_MIN_NODES,
};
pub use data::{build_model, Prepared};
pub use error::TrainError;
pub use evaluation::eval::{evaluate, EvalResult, Split};
pub use evaluation::record::{
    Extras, FailPlan, Observer, Quiet, Resume, RoundRecord, RunResult, StopCause, StopFlag, Summary,
};
pub use methods::averaging::{average_models, Corrector};
pub use methods::{prepare, run_in_process, training_method};
pub use run::{DataSource, Engine, Run, RunSpec};
pub use store::output::RunDir;
