//! The error type of this crate.
//!
//! Every variant names the file it is about (`path`), so a message such as
//! `datasets/cora/edge_index.npy: node id 2708 out of range (num_nodes = 2708)` tells the user
//! which file to fix. Loaders never panic on malformed input; they return one of these.

use std::path::PathBuf;

/// Errors raised while reading or validating a dataset directory.
#[derive(thiserror::Error, Debug)]
pub enum GraphError {
    /// The file could not be opened or read (missing file, permission denied, ...).
    #[error("{}: I/O error: {source}", path.display())]
    Io {
        /// File that failed.
        path: PathBuf,
        /// Underlying OS error.
        #[source]
        source: std::io::Error,
    },

    /// The file is not a well-formed `.npy` file: bad magic string, unsupported format version,
    /// unparseable header, or fewer data bytes than the header announces (truncated file).
    #[error("{}: malformed .npy file: {reason}", path.display())]
    Npy {
        /// Offending file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },

    /// The `.npy` dtype is not the one the format requires (e.g. `'<f8'` where `'<i8'` is
    /// expected). `expected` and `found` are NumPy type strings such as `<i8`, `|b1`.
    #[error("{}: wrong dtype: expected {expected}, found {found}", path.display())]
    Dtype {
        /// Offending file.
        path: PathBuf,
        /// Required NumPy type string(s).
        expected: String,
        /// Type string in the file header.
        found: String,
    },

    /// The array shape disagrees with the format, with another file, or with `meta.json`.
    #[error("{}: wrong shape: expected {expected}, found {found:?}", path.display())]
    Shape {
        /// Offending file.
        path: PathBuf,
        /// Human-readable expected shape, e.g. `[2, E]` or `[2709] (num_nodes + 1)`.
        expected: String,
        /// Shape found in the file header.
        found: Vec<u64>,
    },

    /// A node id (or feature column id) is negative or not below its bound.
    #[error("{}: id {id} out of range (bound {num_nodes})", path.display())]
    IdOutOfRange {
        /// Offending file.
        path: PathBuf,
        /// The offending id as stored.
        id: i64,
        /// Exclusive upper bound (number of nodes, or feature dimension for column ids).
        num_nodes: u64,
    },

    /// Any other content problem: `indptr` not monotone, a `meta.json` field missing or
    /// malformed, an undirected graph that is not symmetric, a split index out of range, ...
    #[error("{}: invalid content: {reason}", path.display())]
    Invalid {
        /// Offending file (or the dataset directory when no single file is at fault).
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl GraphError {
    /// The file (or directory) the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            GraphError::Io { path, .. }
            | GraphError::Npy { path, .. }
            | GraphError::Dtype { path, .. }
            | GraphError::Shape { path, .. }
            | GraphError::IdOutOfRange { path, .. }
            | GraphError::Invalid { path, .. } => path,
        }
    }
}

/// `Result` with [`GraphError`].
pub type Result<T> = std::result::Result<T, GraphError>;
