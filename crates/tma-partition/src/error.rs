//! The error type of this crate.

/// Why a partition could not be computed (or decoded).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PartitionError {
    /// `num_parts` (the number of trainers, `M`) was zero.
    #[error("num_parts must be at least 1")]
    NoParts,
    /// More parts (`num_parts + drop_parts`) than nodes: some part would be empty.
    #[error(
        "{num_assigned_parts} parts (num_parts + drop_parts: --trainers or --parts, plus --drop-parts) for a graph of {num_nodes} nodes: at most one part per node"
    )]
    TooManyParts {
        /// `num_parts + drop_parts`.
        num_assigned_parts: usize,
        /// Nodes of the graph.
        num_nodes: usize,
    },
    /// SuperTMA needs at least as many (non-empty) super-nodes as parts.
    #[error("{num_super_nodes} non-empty super-nodes cannot fill {num_assigned_parts} parts")]
    TooFewSuperNodes {
        /// Non-empty super-nodes METIS produced.
        num_super_nodes: usize,
        /// `num_parts + drop_parts`.
        num_assigned_parts: usize,
    },
    /// METIS takes 32-bit indices: the symmetrized graph must have fewer than 2^31 arcs and nodes.
    #[error(
        "graph too large for METIS (32-bit idx_t): {num_nodes} nodes, {num_arcs} symmetric arcs; use --super-clustering lpa (label propagation) or auto"
    )]
    TooLargeForMetis {
        /// Nodes of the graph.
        num_nodes: usize,
        /// Arcs of the symmetrized graph (or an estimate, `2 * num_edges`).
        num_arcs: usize,
    },
    /// `--super-clustering metis` under a memory budget that METIS' estimated peak exceeds
    /// ([`crate::Clustering::resolve_within`]).
    #[error(
        "--super-clustering metis: {text}; use --super-clustering lpa (label propagation over the graph in place) or auto, or raise --memory-budget"
    )]
    MetisOverBudget {
        /// METIS' estimated peak, bytes ([`crate::metis_peak_bytes`]).
        need: u64,
        /// The budget, bytes.
        budget: u64,
        /// Both, for the user (sizes, node and arc counts).
        text: String,
    },
    /// METIS itself reported an error.
    #[error("METIS failed: {0}")]
    Metis(String),
    /// [`crate::Partition::from_bytes`] got bytes that are not a partition encoding.
    #[error("invalid partition bytes: {0}")]
    InvalidBytes(String),
}
