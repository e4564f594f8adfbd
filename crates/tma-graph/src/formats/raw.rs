//! What every reader of this folder produces ([`Raw`]: arcs, features, labels, a split, with
//! ids already checked) and the helpers the readers share; `super::assemble` makes a
//! [`crate::Dataset`] of it.

use std::path::{Path, PathBuf};

use crate::dataset::{Labels, MAX_CLASSES};
use crate::error::{GraphError, Result};
use crate::features::Features;

/// Whether the arcs read are the graph (directed) or one direction of undirected edges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Arcs as read.
    Directed,
    /// Add each arc's reverse.
    Undirected,
}

/// A fixed split as read: ids (not yet sorted) and the files they came from.
pub(crate) struct RawSplit {
    pub(crate) lists: [Vec<u32>; 3],
    pub(crate) files: [PathBuf; 3],
}

/// What a reader hands to `super::assemble`: ids already checked against `num_nodes`.
pub(crate) struct Raw {
    pub(crate) name: String,
    pub(crate) direction: Direction,
    pub(crate) num_nodes: usize,
    pub(crate) src: Vec<u32>,
    pub(crate) dst: Vec<u32>,
    /// The file the arcs came from (named in notes).
    pub(crate) edge_file: PathBuf,
    pub(crate) features: Option<Features>,
    pub(crate) labels: Labels,
    pub(crate) split: Option<RawSplit>,
    pub(crate) num_splits: usize,
    pub(crate) notes: Vec<String>,
    pub(crate) node_ids: Option<Vec<u64>>,
    /// A link split the dataset ships (OGB link-property `split/<name>/*.pt`).
    pub(crate) link: Option<crate::dataset::StoredLinkSplit>,
}

pub(crate) fn invalid(path: &Path, reason: impl Into<String>) -> GraphError {
    GraphError::Invalid {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// `Invalid` with `line N: ` before the reason.
pub(crate) fn at_line(path: &Path, line: usize, reason: impl std::fmt::Display) -> GraphError {
    invalid(path, format!("line {line}: {reason}"))
}

/// Single-label classes checked as the `.npy` loader checks `y.npy`: `-1` = unlabelled,
/// class ids below `max(N, 2)` and [`MAX_CLASSES`]. `line_of(v)` names where node `v`'s label
/// is (a line, an index) in the error.
pub(crate) fn classes(
    path: &Path,
    y: Vec<i64>,
    where_: impl Fn(usize) -> String,
) -> Result<Labels> {
    let n = y.len();
    let mut max = -1i64;
    let mut out = Vec::with_capacity(n);
    for (v, &c) in y.iter().enumerate() {
        if c < -1 {
            return Err(invalid(
                path,
                format!(
                    "{}: label {c} of node {v} (must be -1 = unlabelled, or a class id >= 0)",
                    where_(v)
                ),
            ));
        }
        if c >= 0 && (c as u64 >= n.max(2) as u64 || c as u64 >= MAX_CLASSES as u64) {
            return Err(invalid(
                path,
                format!(
                    "{}: label {c} of node {v} would mean {} classes for {n} nodes (class ids \
                     must be < min(num_nodes, {MAX_CLASSES}))",
                    where_(v),
                    c as u64 + 1
                ),
            ));
        }
        max = max.max(c);
        out.push(c as i32);
    }
    Ok(Labels::Classes {
        y: out,
        num_classes: (max + 1) as usize,
    })
}

/// `n` as a node count, or an error when it exceeds the u32 id space.
pub(crate) fn node_count(path: &Path, n: u64) -> Result<usize> {
    if n > u32::MAX as u64 {
        return Err(invalid(
            path,
            format!("{n} nodes exceed the u32 id space of tma"),
        ));
    }
    Ok(n as usize)
}
