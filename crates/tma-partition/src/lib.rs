//! Graph partitioners for tma: the randomized partitions of RandomTMA and SuperTMA
//! (Zhu et al., arXiv 2305.09887) and the METIS min-cut partition of the PSGD-PA / LLCG baselines.
//!
//! * [`partition`] assigns every node of a [`Csr`] graph to one of `num_parts + drop_parts`
//!   parts ([`Partition`]), by one of the [`PartitionMethod`]s:
//!   - [`PartitionMethod::Random`]: every node independently, uniformly at random (RandomTMA);
//!   - [`PartitionMethod::SuperNode`]: `K` small clusters ("super-nodes"), which are shuffled
//!     and dealt out in equal-count groups (SuperTMA);
//!   - [`PartitionMethod::Metis`]: METIS `(num_parts + drop_parts)`-way, edge-balanced (PSGD-PA).
//! * The clustering ([`Clustering`]) is METIS k-way, or, for graphs past METIS' reach (2^31
//!   symmetric arcs, several times the graph's memory), size-constrained label propagation
//!   ([`label_propagation`]) over a CSR read in place ([`partition_ref`] takes a memory-mapped
//!   one); `auto` picks by the arc count ([`AUTO_METIS_MAX_ARCS`]) and, under a memory budget,
//!   by METIS' estimated peak ([`Clustering::resolve_within`], [`partition_ref_within`]).
//! * Parts `0..num_parts` go to the trainers ([`Partition::kept_parts`]); parts
//!   `num_parts..num_parts + drop_parts` are the "failed trainers" of the robustness experiment and
//!   are given to no one.
//! * [`build_part`] / [`build_parts`] cut a part out of the graph: the node-induced subgraph on the
//!   part's nodes, **cross-part edges dropped** (by design: with `M` random parts about `1/M` of the
//!   edges survive in total).
//! * [`partition_report`] measures partition quality: nodes, edges kept, and how far each part's
//!   label and degree distributions are from the whole graph's (Jensen–Shannon divergence), the
//!   "data uniformity" the paper argues for.
//!
//! Randomness is explicit: every method is a deterministic function of the graph and
//! [`PartitionConfig::seed`] (streams derived by the workspace's seeding policy,
//! `tma_graph::seed`: ChaCha8 for our own draws, METIS' `seed` option for METIS), so the
//! same config gives byte-identical [`Partition::to_bytes`] (the reference release's RandomTMA seed
//! had no effect and its SuperTMA grouping was unseeded; ours are seeded).
//!
//! Architecture invariant: this crate knows nothing of neural networks.

#![warn(missing_docs)]

mod error;
mod lpa;
mod method;
mod metis_call;
mod part;
mod report;

pub use error::PartitionError;
pub use lpa::{
    label_propagation, lpa_peak_bytes, super_node_clusters, LpaStats, MergeLevel,
    LPA_BYTES_PER_NODE, LPA_MAX_MERGE_LEVELS, LPA_MAX_PASSES,
};
pub use method::{
    metis_peak_bytes, partition, partition_ref, partition_ref_within, Clustering, ClusteringChoice,
    Partition, PartitionConfig, PartitionMethod, PartitionNotes, AUTO_METIS_MAX_ARCS,
    DEFAULT_NUM_SUPER_NODES, METIS_BYTES_PER_ARC, METIS_BYTES_PER_NODE,
    METIS_LPA_CLUSTERS_PER_PART,
};
pub use part::{build_part, build_parts, Part};
pub use report::{
    js_divergence, log2_degree_bin, partition_report, partition_report_ref, PartStats,
    PartitionReport, NUM_DEGREE_BINS,
};
pub use tma_graph::{Csr, CsrRef};
