//! Training for tma: trainers, the coordinator, model averaging, evaluation, run outputs.
//!
//! * [`data::prepare`] splits the dataset, partitions it and builds each trainer's data.
//! * [`coordinator::run_in_process`] runs M trainer threads and the coordinator over the
//!   in-process transport ([`cluster::InProcess`]); [`coordinator::coordinate`] is the
//!   coordinator's loop over any [`cluster::CoordinatorEndpoint`].
//! * [`averaging::average_models`] is the model-averaging operator.
//! * [`eval`] holds the metrics, [`output::RunDir`] the run directory.
//!
//! Source: Zhu et al., *Simplifying Distributed Neural Network Training on Massive Graphs:
//! Randomized Partitions Improve Model Aggregation*, arXiv 2305.09887.

pub mod averaging;
pub mod checkpoint;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod coordinator;
pub mod data;
pub mod eval;
pub mod ggs;
pub mod llcg;
#[cfg(feature = "mpi")]
pub mod mpi_cluster;
pub mod output;
pub mod store;
pub mod trainer;

pub use averaging::average_models;
pub use clock::{Clock, ManualClock, RealClock};
pub use config::{AverageWeight, Method, Task, TrainConfig};
pub use coordinator::{
    evaluate, run_in_process, Corrector, EvalResult, Extras, FailPlan, Observer, Quiet, Resume,
    RoundRecord, RunResult, Split, Summary,
};
pub use data::{prepare, Prepared};
pub use output::RunDir;

use std::path::PathBuf;

/// Errors of a training run.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("{0}")]
    Data(String),
    #[error("partitioning failed: {0}")]
    Partition(String),
    #[error("model: {0}")]
    Model(String),
    #[error("every trainer failed before the first averaging round; nothing to average")]
    AllTrainersFailed,
    #[error(
        "run directory {0} already exists and is not empty (choose another --out, or remove it)"
    )]
    RunDirExists(PathBuf),
    #[error(transparent)]
    Store(#[from] store::StoreError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
