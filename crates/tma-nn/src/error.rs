//! The crate's error type.

use std::path::PathBuf;

/// Errors of `tma-nn`. Shape mismatches of in-memory arguments are programming errors and
/// panic (documented per function); this enum covers what comes from outside: files.
#[derive(Debug, thiserror::Error)]
pub enum NnError {
    /// Reading or writing `path` failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// `path` exists but is not a valid parameter file.
    #[error("invalid parameter file {path}: {reason}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A model configuration that cannot be built (the message names the field).
    #[error("invalid model configuration: {0}")]
    Config(String),
    /// A parameter set does not have the layout the caller expected.
    #[error("shape mismatch for {what}: expected {expected}, got {got}")]
    Shape {
        /// The tensor or set compared.
        what: String,
        /// The layout the caller expected.
        expected: String,
        /// The layout found.
        got: String,
    },
}
