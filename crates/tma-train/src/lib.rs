//! Training for tma: trainers, the coordinator, model averaging and the baselines, evaluation,
//! and the run as a library object.
//!
//! * [`run::Run`] owns a run from start to end (data, run directory, config, partition record,
//!   round log, checkpoints, models, summary); the CLI and other front ends call it.
//! * [`methods`] maps each [`Method`] to its [`method::TrainingMethod`]: a data layout, a
//!   trainer loop and a coordinator [`method::Exchange`]. Implementations: [`averaging`]
//!   (RandomTMA, SuperTMA, PSGD-PA, centralized), [`llcg`], [`ggs`].
//! * [`data::prepare_with`] splits the dataset and lays it out over the trainers.
//! * [`engine`] runs the trainers and the coordinator ([`coordinator::coordinate`]) of a
//!   prepared run, behind one trait ([`engine::Engine`]): [`engine::InProcess`] (threads over
//!   [`cluster::InProcess`]) or, with the crate feature `mpi`, `engine::mpi::Mpi` (one process
//!   per rank over `mpi_cluster`); [`run::Run::train_with`] runs either.
//! * [`eval`] holds the metrics and [`eval::evaluate`]; [`output::RunDir`] the run directory;
//!   [`checkpoint`] the per-round state; [`store`] partition directories on disk.
//! * [`saved`] uses a saved model after its run: evaluated again on its data, or embedded.
//!
//! Source: Zhu et al., *Simplifying Distributed Neural Network Training on Massive Graphs:
//! Randomized Partitions Improve Model Aggregation*, arXiv 2305.09887.
#![warn(missing_docs)]

pub mod averaging;
pub mod checkpoint;
pub mod clock;
pub mod cluster;
pub mod config;
mod config_checks;
pub mod coordinator;
pub mod data;
pub mod encoder_options;
pub mod engine;
mod error;
pub mod eval;
mod evaluator;
pub mod gate;
pub mod ggs;
pub mod infer;
pub mod llcg;
pub mod memory;
pub mod method;
pub mod methods;
#[cfg(feature = "mpi")]
pub mod mpi_cluster;
pub mod options;
pub mod output;
pub mod record;
pub mod run;
pub mod saved;
pub mod spill;
pub mod store;
pub mod tensorboard;
pub mod trainer;

pub use averaging::{average_models, Corrector};
pub use clock::{Clock, ManualClock, RealClock};
pub use config::{AverageWeight, Method, Metric, TargetKind, Task, TrainConfig};
pub use data::{build_model, Prepared};
pub use error::TrainError;
pub use eval::{evaluate, EvalResult, Split};
pub use methods::{prepare, run_in_process, training_method};
pub use output::RunDir;
pub use record::{
    Extras, FailPlan, Observer, Quiet, Resume, RoundRecord, RunResult, StopCause, StopFlag, Summary,
};
pub use run::{DataSource, Engine, Run, RunSpec};
