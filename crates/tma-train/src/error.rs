//! The crate's errors: [`TrainError`] of a run, and [`StoreError`] of a partition directory
//! (re-exported as `store::StoreError`). They depend on no module of the crate, so every
//! module can return them without an import cycle.

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
    /// The engine could not run the job: MPI ranks that cannot start, join or load their
    /// part, a lost coordinator; the message names the rank and its host.
    #[error("{0}")]
    Engine(String),
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
    Store(#[from] StoreError),
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

/// Errors reading or writing a partition directory; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file could not be read, written or renamed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        #[source]
        /// The OS error.
        source: std::io::Error,
    },
    /// The manifest names a format version this build does not read.
    #[error("{path}: partition format version {found} is not supported (this tma reads versions 1 to {supported}); re-run `tma partition --out`")]
    Version {
        /// The manifest.
        path: PathBuf,
        /// The version it records.
        found: String,
        /// The version this build reads.
        supported: u32,
    },
    /// A file's content does not match the sha256 recorded in the manifest.
    #[error("{path}: content hash mismatch (manifest records sha256 {expected}, file has {found}); the partition directory is corrupted or was modified, re-run `tma partition --out`")]
    HashMismatch {
        /// The file.
        path: PathBuf,
        /// sha256 recorded in the manifest.
        expected: String,
        /// sha256 of the file.
        found: String,
    },
    /// The file is not what the manifest says (bad JSON, dtype, shape, missing entry, ...).
    #[error("{path}: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The output directory exists and is not empty.
    #[error("{0}: exists and is not empty; choose another --out or remove it")]
    Exists(PathBuf),
    /// A `.npy` file could not be written, or is malformed or not of the dtype/dimensions this
    /// format stores (the codec's error names the file).
    #[error(transparent)]
    Npy(#[from] tma_graph::GraphError),
}
