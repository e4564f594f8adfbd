//! Training for tma: trainers, the coordinator, model averaging and the baselines, evaluation,
//! and the run as a library object.
//!
//! * [`run::Run`] owns a run from start to end (data, run directory, config, partition record,
//!   round log, checkpoints, models, summary); the CLI and other front ends call it.
//! * [`methods`] maps each [`Method`] to its [`method::TrainingMethod`]: a data layout, a
//!   trainer loop and a coordinator [`method::Exchange`]. Implementations: [`averaging`]
//!   (RandomTMA, SuperTMA, PSGD-PA, centralized), [`llcg`], [`ggs`].
//! * [`data::prepare_with`] splits the dataset and lays it out over the trainers.
//! * [`engine::run_in_process`] runs M trainer threads and the coordinator
//!   ([`coordinator::coordinate`]) over the in-process transport ([`cluster::InProcess`]).
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
pub mod coordinator;
pub mod data;
pub mod engine;
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
pub mod output;
pub mod record;
pub mod run;
pub mod saved;
pub mod spill;
pub mod store;
pub mod trainer;

pub use averaging::{average_models, Corrector};
pub use clock::{Clock, ManualClock, RealClock};
pub use config::{AverageWeight, Method, Metric, TargetKind, Task, TrainConfig};
pub use data::{build_model, Prepared};
pub use eval::{evaluate, EvalResult, Split};
pub use methods::{prepare, run_in_process, training_method};
pub use output::RunDir;
pub use record::{
    Extras, FailPlan, Observer, Quiet, Resume, RoundRecord, RunResult, StopCause, StopFlag, Summary,
};
pub use run::{DataSource, Engine, Run, RunSpec};

use std::path::PathBuf;

/// Errors of a training run.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// An option value or combination that cannot work; the message names the option.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The data does not fit the task (e.g. a node task without labels).
    #[error("{0}")]
    Data(String),
    /// A dataset directory could not be loaded.
    #[error("cannot load dataset {path}: {source}")]
    Dataset {
        /// The directory.
        path: PathBuf,
        /// What was wrong.
        #[source]
        source: tma_graph::GraphError,
    },
    /// Partitioning failed.
    #[error("partitioning failed: {0}")]
    Partition(#[from] tma_partition::PartitionError),
    /// A model file could not be read or written.
    #[error("model: {0}")]
    Model(#[from] tma_nn::NnError),
    /// No trainer was left to average before the first round.
    #[error("every trainer failed before the first averaging round; nothing to average")]
    AllTrainersFailed,
    /// The run directory holds files of another run.
    #[error(
        "run directory {0} already exists and is not empty (choose another --out, or remove it)"
    )]
    RunDirExists(PathBuf),
    /// A partition directory is missing, corrupt or of another version.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}
