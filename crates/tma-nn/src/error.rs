//! The crate's error type.

use std::path::PathBuf;

/// Errors of `tma-nn`. Shape mismatches of in-memory arguments are programming errors and
/// panic (documented per function); this enum covers what comes from outside: files.
#[derive(Debug, thiserror::Error)]
pub enum NnError {
    /// Reading or writing `path` failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `path` exists but is not a valid parameter file.
    #[error("invalid parameter file {path}: {reason}")]
    Format { path: PathBuf, reason: String },
    /// A parameter set does not have the layout the caller expected.
    #[error("shape mismatch for {what}: expected {expected}, got {got}")]
    Shape {
        what: String,
        expected: String,
        got: String,
    },
}
