//! Partition methods, their config, the resulting node -> part assignment.

use std::fmt;
use std::str::FromStr;

use rand::seq::SliceRandom;
use rand::Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tma_graph::seed::{self, Purpose};
use tma_graph::{Csr, CsrRef};

use crate::lpa::{
    compact_ids, label_propagation, lpa_peak_bytes, pack_largest_first, super_node_clusters,
    LpaStats, LPA_MAX_PASSES,
};
use crate::metis_call::{part_kway, symmetrize};
use crate::PartitionError;

/// Default number of super-nodes `K` for [`PartitionMethod::SuperNode`] (the release's default;
/// its experiments use 15000).
pub const DEFAULT_NUM_SUPER_NODES: usize = 1000;

/// How nodes are assigned to parts.
///
/// Serialized (serde) as `"random"`, `{"super": {"num_super_nodes": K}}`, `"metis"`;
/// displayed as `random`, `super`, `metis`; parsed ([`FromStr`]) from `random`, `super`
/// (K = 1000), `super:K` (e.g. `super:15000`), `metis`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PartitionMethod {
    /// RandomTMA: every node independently and uniformly to one of the `num_parts + drop_parts`
    /// parts.
    #[serde(rename = "random")]
    #[default]
    Random,
    /// SuperTMA: METIS k-way into `num_super_nodes` (`K`, `K >> num_parts`; clamped to the node
    /// count) clusters without balance weights (or, by [`PartitionConfig::clustering`], label
    /// propagation into clusters of at most `ceil(N / K)` nodes, merged by their arcs and packed
    /// by size to `K`: [`crate::super_node_clusters`]), then the non-empty clusters are shuffled (seeded)
    /// and cut into `num_parts + drop_parts` groups whose counts differ by at most one (which groups
    /// get the remainder is random, seeded). A node's part is its cluster's group.
    #[serde(rename = "super")]
    SuperNode {
        /// `K`, the number of METIS clusters (default [`DEFAULT_NUM_SUPER_NODES`]).
        num_super_nodes: usize,
    },
    /// PSGD-PA / LLCG baseline: METIS k-way into exactly `num_parts + drop_parts` parts, balanced
    /// by edges (vertex weight = in-degree in the given CSR + 1, i.e. the arcs a node's row brings
    /// into its part; divided by a common factor, rounding up, if the total would not fit in
    /// `idx_t / 2`).
    #[serde(rename = "metis")]
    Metis,
}

impl fmt::Display for PartitionMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PartitionMethod::Random => "random",
            PartitionMethod::SuperNode { .. } => "super",
            PartitionMethod::Metis => "metis",
        })
    }
}

impl FromStr for PartitionMethod {
    type Err = String;

    /// Parses `random`, `super`, `super:K`, `metis` (case-insensitive).
    fn from_str(s: &str) -> Result<Self, String> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "random" => Ok(PartitionMethod::Random),
            "super" | "supernode" | "super-node" => Ok(PartitionMethod::SuperNode {
                num_super_nodes: DEFAULT_NUM_SUPER_NODES,
            }),
            "metis" => Ok(PartitionMethod::Metis),
            other => match other.strip_prefix("super:") {
                Some(k) => k
                    .parse::<usize>()
                    .map(|num_super_nodes| PartitionMethod::SuperNode { num_super_nodes })
                    .map_err(|e| format!("bad super-node count in {s:?}: {e}")),
                None => Err(format!(
                    "unknown partition method {s:?} (expected random, super, super:K or metis)"
                )),
            },
        }
    }
}

/// Stored arcs up to which [`Clustering::Auto`] runs METIS; above it, label propagation.
/// A fixed count (not the machine's free memory) so that the same config gives the same
/// partition on every machine. METIS peaks at about 60 bytes per stored arc
/// (docs/decisions/0010-scalable-super-nodes.md): 2^25 arcs take about 2 GiB.
pub const AUTO_METIS_MAX_ARCS: usize = 1 << 25;

/// Parts of [`PartitionMethod::Metis`] under [`Clustering::Lpa`] are packed from clusters of
/// at most `ceil(num_nodes / (METIS_LPA_CLUSTERS_PER_PART * parts))` nodes.
pub const METIS_LPA_CLUSTERS_PER_PART: usize = 16;

/// The clustering behind [`PartitionMethod::SuperNode`] (the super-nodes) and
/// [`PartitionMethod::Metis`] (the parts). Serialized and parsed as `metis`, `lpa`, `auto`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Clustering {
    /// METIS k-way on the symmetrized graph: fewer than 2^31 symmetric arcs (32-bit `idx_t`)
    /// and several times the graph's memory.
    Metis,
    /// Size-constrained label propagation ([`crate::label_propagation`]) over the CSR in place,
    /// `8 N` bytes beyond the graph. Super-nodes: clusters of at most `ceil(N / K)` nodes,
    /// merged by their arcs and packed by size to `K` ([`crate::super_node_clusters`], `16 N`).
    /// PSGD-PA parts: clusters of at most `ceil(N / (16 (M + d)))` nodes packed largest first
    /// onto the lightest part by weight (in-degree + 1, as METIS' vertex weights).
    Lpa,
    /// METIS for graphs of at most [`AUTO_METIS_MAX_ARCS`] stored arcs, `Lpa` above.
    #[default]
    Auto,
}

impl Clustering {
    /// What `self` runs on a graph of `num_edges` stored arcs without a memory budget: `Metis`
    /// or `Lpa` (never `Auto`). [`Clustering::resolve_within`] with `None`.
    pub fn resolve(self, num_edges: usize) -> Clustering {
        match self {
            Clustering::Auto if num_edges <= AUTO_METIS_MAX_ARCS => Clustering::Metis,
            Clustering::Auto => Clustering::Lpa,
            c => c,
        }
    }

    /// What `self` runs on a graph of `num_nodes` nodes and `num_edges` stored arcs when the
    /// process's anonymous memory must stay within `memory_budget` bytes (`tma partition --out
    /// --memory-budget`), and why. The one rule for every caller:
    ///
    /// * no budget: [`Clustering::resolve`] (a fixed arc count, the same partition on every
    ///   machine), and no reason line;
    /// * `Auto` with a budget: METIS only when [`Clustering::resolve`] picks it **and** its
    ///   estimated peak [`metis_peak_bytes`] is at most the budget; otherwise `Lpa`. A budget
    ///   can only move `auto` from METIS to label propagation, never the other way;
    /// * `Metis` with a budget its estimate exceeds: [`PartitionError::MetisOverBudget`]
    ///   (the user asked for both; neither is silently dropped);
    /// * `Lpa`: always `Lpa`, and no reason line (the budget decides nothing).
    ///
    /// # Errors
    /// [`PartitionError::MetisOverBudget`] as above.
    pub fn resolve_within(
        self,
        num_nodes: usize,
        num_edges: usize,
        memory_budget: Option<u64>,
    ) -> Result<ClusteringChoice, PartitionError> {
        let Some(budget) = memory_budget else {
            return Ok(ClusteringChoice {
                used: self.resolve(num_edges),
                reason: None,
            });
        };
        let metis = metis_peak_bytes(num_nodes, num_edges);
        let lpa = lpa_peak_bytes(num_nodes);
        let (used, reason) = match self {
            Clustering::Auto if num_edges > AUTO_METIS_MAX_ARCS => (
                Clustering::Lpa,
                format!("{num_edges} arcs > {AUTO_METIS_MAX_ARCS} for METIS"),
            ),
            Clustering::Auto if metis > budget => (
                Clustering::Lpa,
                format!(
                    "METIS needs ~{}, over --memory-budget {} (label propagation ~{})",
                    bytes_text(metis),
                    bytes_text(budget),
                    bytes_text(lpa)
                ),
            ),
            Clustering::Metis if metis > budget => {
                return Err(PartitionError::MetisOverBudget {
                    need: metis,
                    budget,
                    text: format!(
                        "METIS needs ~{} for {num_nodes} nodes and {num_edges} arcs, over --memory-budget {}",
                        bytes_text(metis),
                        bytes_text(budget)
                    ),
                })
            }
            Clustering::Auto | Clustering::Metis => (
                Clustering::Metis,
                format!(
                    "METIS needs ~{}, within --memory-budget {}",
                    bytes_text(metis),
                    bytes_text(budget)
                ),
            ),
            // asked for and within any budget METIS' is: nothing to say
            Clustering::Lpa => {
                return Ok(ClusteringChoice {
                    used: Clustering::Lpa,
                    reason: None,
                })
            }
        };
        Ok(ClusteringChoice {
            used,
            reason: Some(reason),
        })
    }
}

/// Anonymous memory of METIS clustering per stored arc, bytes: the symmetrized copy in
/// `idx_t` (8 bytes per stored arc before deduplication, 4 after), METIS' edge weights and its
/// coarsened graphs (a power-law graph coarsens slowly, so several levels are alive at the
/// coarsest point). Set at or above the measured peak of a whole `tma partition --out`
/// process under METIS (docs/decisions/0010-scalable-super-nodes.md, "Memory budget": 60, 65
/// and 75 bytes per arc at 3.8M, 11.7M and 29.4M arcs; it grows slowly with the graph).
pub const METIS_BYTES_PER_ARC: u64 = 80;

/// Anonymous memory of METIS clustering per node, bytes: the symmetrization's row counts,
/// fill pointers, row slices and lengths (40 bytes), `xadj`, vertex weights, the result, and
/// what the rest of the process holds per node (split, labels, the parts' arrays).
pub const METIS_BYTES_PER_NODE: u64 = 64;

/// The estimated peak anonymous memory of clustering `num_nodes` nodes and `num_edges` stored
/// arcs with METIS, bytes: `METIS_BYTES_PER_ARC * num_edges + METIS_BYTES_PER_NODE *
/// num_nodes` (29.4M arcs and 1.5M nodes: 2.3 GiB, measured 2.05 GiB). The graph's own
/// pages are not counted (mapped, or held before). A graph stored with one direction of its
/// edges only gets up to twice the arcs once symmetrized, so METIS can need up to twice the
/// per-arc part on it.
pub fn metis_peak_bytes(num_nodes: usize, num_edges: usize) -> u64 {
    METIS_BYTES_PER_ARC * num_edges as u64 + METIS_BYTES_PER_NODE * num_nodes as u64
}

/// `1.7 GiB` at or above 1 GiB, `123 MiB` at or above 1 MiB, else `313 KiB` (messages about
/// memory).
fn bytes_text(b: u64) -> String {
    let x = b as f64;
    if b >= 1 << 30 {
        format!("{:.1} GiB", x / (1u64 << 30) as f64)
    } else if b >= 1 << 20 {
        format!("{:.0} MiB", x / (1u64 << 20) as f64)
    } else {
        format!("{:.0} KiB", x / 1024.0)
    }
}

/// What [`Clustering::resolve_within`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusteringChoice {
    /// `Metis` or `Lpa` (never `Auto`).
    pub used: Clustering,
    /// Why, when a memory budget was given and `auto` or `metis` was asked for (e.g. `METIS
    /// needs ~2.3 GiB, over --memory-budget 1.0 GiB (label propagation ~23 MiB)`); `None`
    /// without one.
    pub reason: Option<String>,
}

impl fmt::Display for Clustering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Clustering::Metis => "metis",
            Clustering::Lpa => "lpa",
            Clustering::Auto => "auto",
        })
    }
}

impl FromStr for Clustering {
    type Err = String;

    /// Parses `metis`, `lpa`, `auto` (case-insensitive).
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "metis" => Ok(Clustering::Metis),
            "lpa" => Ok(Clustering::Lpa),
            "auto" => Ok(Clustering::Auto),
            _ => Err(format!(
                "unknown clustering {s:?} (expected metis, lpa or auto)"
            )),
        }
    }
}

/// What to partition into, and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PartitionConfig {
    /// The assignment rule.
    pub method: PartitionMethod,
    /// The clustering of `super` and `metis` (ignored by `random`); absent in older
    /// manifests, which read as [`Clustering::Auto`].
    #[serde(default)]
    pub clustering: Clustering,
    /// `M`, the number of trainers (parts that are kept). At least 1.
    pub num_parts: usize,
    /// `d`, the number of extra parts that are assigned but given to no one (failed trainers).
    pub drop_parts: usize,
    /// Seed of every random choice (ChaCha8 stream for Random/SuperNode grouping, METIS' seed).
    pub seed: u64,
}

impl PartitionConfig {
    /// `M + d`, the number of parts nodes are assigned to.
    pub fn num_assigned_parts(&self) -> usize {
        self.num_parts + self.drop_parts
    }
}

/// A node -> part assignment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    /// The config that produced it (recorded so the partition is reproducible).
    pub config: PartitionConfig,
    /// `[num_nodes]`: the part of every node, in `0..num_assigned_parts`.
    pub assignment: Vec<u32>,
    /// `M + d`: parts `0..M` are kept (trainers), `M..M + d` dropped.
    pub num_assigned_parts: usize,
    /// What METIS delivered and what was repaired (zeros for [`PartitionMethod::Random`]).
    #[serde(default)]
    pub notes: PartitionNotes,
}

/// What a METIS-based method asked for, what METIS returned, and the repair.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionNotes {
    /// Clusters asked of METIS: `M + d` parts ([`PartitionMethod::Metis`]) or `K` super-nodes
    /// as configured ([`PartitionMethod::SuperNode`]); 0 when METIS was not called.
    pub clusters_requested: usize,
    /// Non-empty clusters METIS returned (METIS may return fewer than asked on small or
    /// clustered graphs); for super-nodes with `K >= num_nodes`, the node count.
    pub clusters_obtained: usize,
    /// Clusters that were empty and were filled by splitting the largest ones (so that every
    /// one of the `M + d` parts, or enough super-nodes for them, is non-empty).
    pub clusters_filled: usize,
    /// `K` was at least the node count: every node became its own super-node.
    pub super_nodes_clamped: bool,
    /// The clustering that ran (`Metis` or `Lpa`; `None` for random or when no clustering was
    /// needed).
    #[serde(default)]
    pub clustering: Option<Clustering>,
    /// What label propagation did, when it ran.
    #[serde(default)]
    pub lpa: Option<LpaStats>,
    /// Why [`PartitionNotes::clustering`] was chosen under a memory budget
    /// ([`ClusteringChoice::reason`]); `None` without a budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clustering_reason: Option<String>,
}

impl PartitionNotes {
    /// One line per thing the user did not get as asked (empty when nothing happened).
    pub fn warnings(&self, method: PartitionMethod, num_nodes: usize) -> Vec<String> {
        let mut w = Vec::new();
        match method {
            PartitionMethod::SuperNode { num_super_nodes } => {
                if self.super_nodes_clamped && num_super_nodes > num_nodes {
                    w.push(format!(
                        "--super-nodes {num_super_nodes} exceeds the graph's {num_nodes} nodes: clamped to {num_nodes} (every node is its own super-node)"
                    ));
                }
                if self.clusters_filled > 0 {
                    w.push(format!(
                        "{} returned {} non-empty super-nodes of {} requested, fewer than the parts need; split the largest into {} more",
                        self.clustering_name(), self.clusters_obtained, self.clusters_requested, self.clusters_filled
                    ));
                }
            }
            PartitionMethod::Metis if self.clusters_filled > 0 => w.push(format!(
                "{} returned {} non-empty parts of {} requested; split the largest parts to fill the {} empty ones",
                self.clustering_name(),
                self.clusters_obtained, self.clusters_requested, self.clusters_filled
            )),
            _ => {}
        }
        w
    }

    /// `METIS` or `label propagation`, for messages.
    fn clustering_name(&self) -> &'static str {
        match self.clustering {
            Some(Clustering::Lpa) => "label propagation",
            _ => "METIS",
        }
    }

    /// Under a memory budget, the one line saying which clustering was chosen and why, e.g.
    /// `super-clustering auto -> lpa: METIS needs ~1.7 GiB, over --memory-budget 1.0 GiB
    /// (label propagation ~23 MiB)`; `None` without a budget or when no clustering ran.
    pub fn clustering_choice_line(&self, requested: Clustering) -> Option<String> {
        let used = self.clustering?;
        let reason = self.clustering_reason.as_deref()?;
        Some(if requested == used {
            format!("super-clustering {used}: {reason}")
        } else {
            format!("super-clustering {requested} -> {used}: {reason}")
        })
    }

    /// One line saying which clustering ran and what it gave (None when none ran), e.g.
    /// `clustering: lpa (size-constrained label propagation, auto: 100000000 arcs > 33554432
    /// for METIS): 812345 clusters of at most 6 nodes (largest 6), 7 passes`.
    pub fn clustering_line(&self, requested: Clustering, num_edges: usize) -> Option<String> {
        let used = self.clustering?;
        let why = match (requested, &self.clustering_reason) {
            (Clustering::Auto, Some(reason)) => format!(", auto: {reason}"),
            (Clustering::Auto, None) => format!(
                ", auto: {num_edges} arcs {} {AUTO_METIS_MAX_ARCS} for METIS",
                if used == Clustering::Metis { "<=" } else { ">" }
            ),
            (_, Some(reason)) => format!(", {reason}"),
            _ => String::new(),
        };
        Some(match (&self.lpa, used) {
            (Some(l), Clustering::Lpa) => {
                let inside = if num_edges == 0 {
                    0.0
                } else {
                    100.0 * l.intra_cluster_arcs as f64 / num_edges as f64
                };
                let passes = format!("{} pass{}", l.passes, if l.passes == 1 { "" } else { "es" });
                if l.merge_levels.is_empty() && l.packed_from == 0 {
                    format!(
                        "clustering: lpa (size-constrained label propagation{why}): {} clusters of at most {} nodes (largest {}), {passes}, {inside:.1}% of arcs inside clusters",
                        l.num_clusters, l.max_cluster_size, l.largest_cluster,
                    )
                } else {
                    let mut steps = format!(
                        "{} clusters of at most {} nodes in {passes}",
                        l.clusters_before_merging, l.max_cluster_size
                    );
                    if let Some(last) = l.merge_levels.last() {
                        let levels = l.merge_levels.len();
                        steps += &if last.clusters == l.clusters_before_merging {
                            ", none could merge within the cap".to_string()
                        } else {
                            format!(
                                ", merged by their arcs to {} in {levels} level{}",
                                last.clusters,
                                if levels == 1 { "" } else { "s" }
                            )
                        };
                    }
                    if l.packed_from > 0 {
                        steps += &format!(", packed by size onto {}", l.num_clusters);
                    }
                    format!(
                        "clustering: lpa (size-constrained label propagation{why}): {} super-nodes (largest {} nodes; {steps}), {inside:.1}% of arcs inside super-nodes",
                        l.num_clusters, l.largest_cluster,
                    )
                }
            }
            _ => format!(
                "clustering: metis (METIS k-way{why}): {} clusters requested, {} obtained",
                self.clusters_requested, self.clusters_obtained
            ),
        })
    }
}

/// Magic prefix of [`Partition::to_bytes`].
const BYTES_MAGIC: &[u8; 8] = b"TMAPART1";

impl Partition {
    /// Number of nodes of the partitioned graph.
    pub fn num_nodes(&self) -> usize {
        self.assignment.len()
    }

    /// The sorted global ids of the nodes of part `p` (`p < num_assigned_parts`; a larger `p` gives
    /// an empty list).
    pub fn part_nodes(&self, p: usize) -> Vec<u32> {
        let p = p as u32;
        self.assignment
            .iter()
            .enumerate()
            .filter(|&(_, &a)| a == p)
            .map(|(v, _)| v as u32)
            .collect()
    }

    /// Sorted node lists of all `num_assigned_parts` parts in one pass (`[M + d][..]`).
    pub fn all_part_nodes(&self) -> Vec<Vec<u32>> {
        let mut out = vec![Vec::new(); self.num_assigned_parts];
        for (v, &p) in self.assignment.iter().enumerate() {
            out[p as usize].push(v as u32);
        }
        out
    }

    /// Number of nodes in every part (`[M + d]`).
    pub fn part_sizes(&self) -> Vec<usize> {
        let mut sizes = vec![0usize; self.num_assigned_parts];
        for &p in &self.assignment {
            sizes[p as usize] += 1;
        }
        sizes
    }

    /// The `M` parts given to trainers: `0..num_parts`. Parts `num_parts..num_assigned_parts` are
    /// the dropped ones ([`Partition::dropped_parts`]).
    pub fn kept_parts(&self) -> Vec<usize> {
        (0..self.config.num_parts).collect()
    }

    /// The `d` parts given to no one: `num_parts..num_assigned_parts`.
    pub fn dropped_parts(&self) -> Vec<usize> {
        (self.config.num_parts..self.num_assigned_parts).collect()
    }

    /// Canonical bytes of the assignment (not of the config: two configs that produce the same
    /// assignment give the same bytes):
    /// `b"TMAPART1"`, `num_nodes` (u64 LE), `num_assigned_parts` (u64 LE), then `assignment` as
    /// `num_nodes` u32 LE. Length `24 + 4 * num_nodes`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24 + 4 * self.assignment.len());
        out.extend_from_slice(BYTES_MAGIC);
        out.extend_from_slice(&(self.assignment.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.num_assigned_parts as u64).to_le_bytes());
        for &p in &self.assignment {
            out.extend_from_slice(&p.to_le_bytes());
        }
        out
    }

    /// Inverse of [`Partition::to_bytes`]; the config is supplied by the caller (e.g. from a JSON
    /// manifest).
    ///
    /// # Errors
    /// [`PartitionError::InvalidBytes`] on a wrong magic, length, part count (must equal
    /// `config.num_parts + config.drop_parts`) or a part id out of range.
    pub fn from_bytes(config: PartitionConfig, bytes: &[u8]) -> Result<Partition, PartitionError> {
        let bad = |m: &str| PartitionError::InvalidBytes(m.to_string());
        if bytes.len() < 24 || &bytes[..8] != BYTES_MAGIC {
            return Err(bad("missing TMAPART1 header"));
        }
        let n = u64::from_le_bytes(bytes[8..16].try_into().unwrap()) as usize;
        let parts = u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize;
        if bytes.len() != 24 + 4 * n {
            return Err(bad("length does not match num_nodes"));
        }
        if parts != config.num_assigned_parts() {
            return Err(bad("num_assigned_parts does not match the config"));
        }
        let assignment: Vec<u32> = bytes[24..]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        if assignment.iter().any(|&p| p as usize >= parts) {
            return Err(bad("part id out of range"));
        }
        Ok(Partition {
            config,
            assignment,
            num_assigned_parts: parts,
            notes: PartitionNotes::default(),
        })
    }

    /// Lower-case hex SHA-256 of [`Partition::to_bytes`] (64 characters).
    pub fn hash_hex(&self) -> String {
        let digest = Sha256::digest(self.to_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Nodes per independently seeded ChaCha8 stream in [`PartitionMethod::Random`]; fixed so the
/// result does not depend on the number of threads.
const RANDOM_CHUNK: usize = 1 << 16;

/// Partition `graph` by `cfg`.
///
/// Deterministic: the same graph and config give the same assignment, on any number of threads.
/// Streams follow [`tma_graph::seed`]: Random draws `random_range(0..M+d)` per node, node chunk
/// `c` (65536 nodes per chunk) from [`seed::chunk_rng`]`(seed::derive(seed, Purpose::Partition),
/// c)`. SuperNode clusters (METIS or label propagation, [`Clustering`]) seeded by
/// [`Purpose::SuperNodes`] and draws its shuffles
/// from [`seed::rng`]`(seed, Purpose::SuperGrouping)`; Metis (PSGD-PA) seeds METIS by
/// [`Purpose::MetisParts`] (its label propagation too, under [`Clustering::Lpa`]). METIS gets a 31-bit fold of the derived seed as its `seed` option. METIS methods symmetrize the graph (both arc directions, no self-loops, no
/// duplicates) before partitioning, since METIS requires an undirected graph.
///
/// # Errors
/// [`PartitionError::NoParts`] if `num_parts == 0`; [`PartitionError::TooManyParts`] if
/// `num_parts + drop_parts > num_nodes`; for METIS methods [`PartitionError::TooLargeForMetis`]
/// (≥ 2^31 symmetric arcs) and [`PartitionError::Metis`]; for SuperNode
/// [`PartitionError::TooFewSuperNodes`] if fewer than `M + d` non-empty super-nodes exist.
pub fn partition(graph: &Csr, cfg: &PartitionConfig) -> Result<Partition, PartitionError> {
    partition_ref(graph.view(), cfg)
}

/// [`partition`] over a borrowed CSR, e.g. a memory-mapped one
/// ([`tma_graph::MappedGraph::csr`]); the same result for the same rows. With
/// [`Clustering::Lpa`] (or `Auto` above [`AUTO_METIS_MAX_ARCS`]) the graph is read in place and
/// the extra memory is `O(N)`: labels, cluster sizes and the assignment (12 bytes per node).
///
/// # Errors
/// As [`partition`].
pub fn partition_ref(
    graph: CsrRef<'_>,
    cfg: &PartitionConfig,
) -> Result<Partition, PartitionError> {
    partition_ref_within(graph, cfg, None)
}

/// [`partition_ref`] with the clustering chosen within `memory_budget` bytes of anonymous
/// memory ([`Clustering::resolve_within`]: `auto` runs label propagation where METIS'
/// estimated peak exceeds the budget; an explicit `metis` over it is refused). The choice and
/// its reason are in [`PartitionNotes::clustering_reason`]. `None`: [`partition_ref`].
///
/// # Errors
/// As [`partition`]; [`PartitionError::MetisOverBudget`] for `metis` over the budget.
pub fn partition_ref_within(
    graph: CsrRef<'_>,
    cfg: &PartitionConfig,
    memory_budget: Option<u64>,
) -> Result<Partition, PartitionError> {
    let n = graph.num_nodes();
    let parts = cfg.num_assigned_parts();
    if cfg.num_parts == 0 {
        return Err(PartitionError::NoParts);
    }
    if parts > n {
        return Err(PartitionError::TooManyParts {
            num_assigned_parts: parts,
            num_nodes: n,
        });
    }
    let mut notes = PartitionNotes::default();
    // the clustering, decided (and refused) only where one runs
    let clusters = match cfg.method {
        PartitionMethod::Random => false,
        PartitionMethod::SuperNode { num_super_nodes } => num_super_nodes < n,
        PartitionMethod::Metis => true,
    };
    let used = if clusters {
        let choice = cfg
            .clustering
            .resolve_within(n, graph.num_edges(), memory_budget)?;
        notes.clustering_reason = choice.reason;
        choice.used
    } else {
        cfg.clustering.resolve(graph.num_edges())
    };
    let assignment = match cfg.method {
        PartitionMethod::Random => random_assignment(n, parts, cfg.seed),
        PartitionMethod::SuperNode { num_super_nodes } => {
            let mut super_of = if num_super_nodes >= n {
                (0..n as u32).collect()
            } else if used == Clustering::Lpa {
                let (c, st) = super_node_clusters(
                    graph,
                    num_super_nodes.max(1),
                    seed::derive(cfg.seed, Purpose::SuperNodes),
                );
                notes.lpa = Some(st);
                c
            } else {
                super_nodes(graph, num_super_nodes, cfg.seed)?
            };
            notes.clustering = (num_super_nodes < n).then_some(used);
            notes.clusters_requested = num_super_nodes;
            notes.super_nodes_clamped = num_super_nodes >= n;
            let k = compact_ids(&mut super_of);
            notes.clusters_obtained = k;
            if k < parts {
                notes.clusters_filled = fill_empty_parts(graph, &mut super_of, parts).len();
            }
            group_super_nodes(&super_of, parts, cfg.seed)?
        }
        PartitionMethod::Metis if used == Clustering::Lpa => {
            notes.clustering = Some(Clustering::Lpa);
            let cap = n.div_ceil(METIS_LPA_CLUSTERS_PER_PART * parts);
            let (cluster, st) = label_propagation(
                graph,
                cap,
                LPA_MAX_PASSES,
                seed::derive(cfg.seed, Purpose::MetisParts),
            );
            let mut weight = vec![0u64; st.num_clusters];
            for (v, &c) in cluster.iter().enumerate() {
                weight[c as usize] += graph.degree(v) as u64 + 1;
            }
            notes.lpa = Some(st);
            let part_of = pack_largest_first(&weight, parts);
            drop(weight);
            let mut a: Vec<u32> = cluster.iter().map(|&c| part_of[c as usize]).collect();
            drop(cluster);
            notes.clusters_requested = parts;
            let filled = fill_empty_parts(graph, &mut a, parts);
            notes.clusters_obtained = parts - filled.len();
            notes.clusters_filled = filled.len();
            a
        }
        PartitionMethod::Metis => {
            notes.clustering = Some(Clustering::Metis);
            let g = symmetrize(graph)?;
            // METIS sums vertex weights in idx_t: scale them down if E + n could overflow it.
            let total = graph.num_edges() + n;
            let budget = metis::Idx::MAX as usize / 2;
            let scale = total.div_ceil(budget).max(1);
            let vwgt: Vec<metis::Idx> = (0..n)
                .map(|v| (graph.degree(v) + 1).div_ceil(scale) as metis::Idx)
                .collect();
            let mut a = part_kway(
                &g,
                parts,
                Some(&vwgt),
                seed::derive(cfg.seed, Purpose::MetisParts),
            )?;
            notes.clusters_requested = parts;
            let filled = fill_empty_parts(graph, &mut a, parts);
            notes.clusters_obtained = parts - filled.len();
            notes.clusters_filled = filled.len();
            a
        }
    };
    Ok(Partition {
        config: *cfg,
        assignment,
        num_assigned_parts: parts,
        notes,
    })
}

/// Makes every one of the labels `0..parts` of `assign` non-empty (needs `num_nodes >= parts`):
/// for each empty label in increasing order, the largest part (the lowest id among equals)
/// gives it the second half of its nodes in breadth-first order inside that part (from its
/// lowest node, following arcs in both directions; unreached nodes follow in id order), so a
/// connected part splits into two connected halves. Deterministic. Returns the labels that were
/// empty.
pub(crate) fn fill_empty_parts(graph: CsrRef<'_>, assign: &mut [u32], parts: usize) -> Vec<usize> {
    let n = assign.len();
    let mut sizes = vec![0usize; parts];
    for &p in assign.iter() {
        sizes[p as usize] += 1;
    }
    let empty: Vec<usize> = (0..parts).filter(|&p| sizes[p] == 0).collect();
    if empty.is_empty() || n < parts {
        return if n < parts { Vec::new() } else { empty };
    }
    // out-neighbours, so the BFS can follow arcs both ways
    let mut out: Vec<Vec<u32>> = vec![Vec::new(); n];
    for v in 0..n {
        for &u in graph.neighbors(v) {
            out[u as usize].push(v as u32);
        }
    }
    let mut seen = vec![false; n];
    for &e in &empty {
        let big = (0..parts)
            .max_by(|&a, &b| sizes[a].cmp(&sizes[b]).then(b.cmp(&a)))
            .expect("parts > 0");
        let b = big as u32;
        let members: Vec<u32> = (0..n as u32).filter(|&v| assign[v as usize] == b).collect();
        let mut order = Vec::with_capacity(members.len());
        let mut queue = std::collections::VecDeque::new();
        for &start in &members {
            if seen[start as usize] {
                continue;
            }
            seen[start as usize] = true;
            queue.push_back(start);
            while let Some(v) = queue.pop_front() {
                order.push(v);
                for &u in graph.neighbors(v as usize).iter().chain(&out[v as usize]) {
                    if assign[u as usize] == b && !seen[u as usize] {
                        seen[u as usize] = true;
                        queue.push_back(u);
                    }
                }
            }
        }
        for &v in &members {
            seen[v as usize] = false;
        }
        let half = order.len() / 2;
        for &v in &order[half..] {
            assign[v as usize] = e as u32;
        }
        sizes[e] = order.len() - half;
        sizes[big] = half;
    }
    empty
}

/// Every node uniformly over `0..parts`, chunked into fixed streams of
/// [`Purpose::Partition`].
fn random_assignment(n: usize, parts: usize, seed: u64) -> Vec<u32> {
    let mut out = vec![0u32; n];
    let parts = parts as u32;
    let stream_seed = seed::derive(seed, Purpose::Partition);
    out.par_chunks_mut(RANDOM_CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| {
            let mut rng = seed::chunk_rng(stream_seed, c as u64);
            for a in chunk.iter_mut() {
                *a = rng.random_range(0..parts);
            }
        });
    out
}

/// Super-node id of every node: METIS k-way (no balance weights) into `min(k, n)` clusters, or
/// the identity when `k >= n`. METIS is seeded by [`Purpose::SuperNodes`] of `seed`.
fn super_nodes(graph: CsrRef<'_>, k: usize, seed: u64) -> Result<Vec<u32>, PartitionError> {
    let n = graph.num_nodes();
    if k >= n {
        return Ok((0..n as u32).collect());
    }
    let g = symmetrize(graph)?;
    part_kway(&g, k.max(1), None, seed::derive(seed, Purpose::SuperNodes))
}

/// Shuffle the non-empty super-nodes (seeded) and cut the list into `parts` groups of
/// `floor(S/parts)` or `floor(S/parts) + 1` super-nodes, the `S mod parts` larger groups chosen
/// at random (seeded). Both shuffles draw from [`seed::rng`]`(seed, Purpose::SuperGrouping)`.
/// Returns each node's group.
fn group_super_nodes(
    super_of: &[u32],
    parts: usize,
    seed: u64,
) -> Result<Vec<u32>, PartitionError> {
    let k = super_of.iter().map(|&s| s as usize + 1).max().unwrap_or(0);
    let mut present = vec![false; k];
    for &s in super_of {
        present[s as usize] = true;
    }
    let mut list: Vec<u32> = (0..k as u32).filter(|&s| present[s as usize]).collect();
    let s = list.len();
    if s < parts {
        return Err(PartitionError::TooFewSuperNodes {
            num_super_nodes: s,
            num_assigned_parts: parts,
        });
    }
    let mut rng = seed::rng(seed, Purpose::SuperGrouping);
    list.shuffle(&mut rng);
    // Which groups get one extra super-node: a random subset of size s % parts.
    let base = s / parts;
    let mut group_order: Vec<usize> = (0..parts).collect();
    group_order.shuffle(&mut rng);
    let mut size = vec![base; parts];
    for &g in &group_order[..s % parts] {
        size[g] += 1;
    }
    let mut group_of_super = vec![u32::MAX; k];
    let mut pos = 0;
    for (g, &sz) in size.iter().enumerate() {
        for &sn in &list[pos..pos + sz] {
            group_of_super[sn as usize] = g as u32;
        }
        pos += sz;
    }
    Ok(super_of
        .iter()
        .map(|&sn| group_of_super[sn as usize])
        .collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// Undirected ring 0-1-...-(n-1)-0 plus chords v - (v*7+3) % n.
    pub(crate) fn test_graph(n: usize) -> Csr {
        let mut src = Vec::new();
        let mut dst = Vec::new();
        for v in 0..n as u32 {
            for u in [(v + 1) % n as u32, (v * 7 + 3) % n as u32] {
                if u != v {
                    src.extend([v, u]);
                    dst.extend([u, v]);
                }
            }
        }
        Csr::from_edges(n, &src, &dst)
    }

    fn cfg(method: PartitionMethod, m: usize, d: usize, seed: u64) -> PartitionConfig {
        PartitionConfig {
            method,
            clustering: Clustering::Auto,
            num_parts: m,
            drop_parts: d,
            seed,
        }
    }

    const SUPER: PartitionMethod = PartitionMethod::SuperNode {
        num_super_nodes: 50,
    };

    #[test]
    fn every_node_in_exactly_one_part() {
        let g = test_graph(1000);
        for method in [PartitionMethod::Random, SUPER, PartitionMethod::Metis] {
            let p = partition(&g, &cfg(method, 4, 1, 7)).unwrap();
            assert_eq!(p.assignment.len(), 1000);
            assert_eq!(p.num_assigned_parts, 5);
            let mut seen = vec![0u32; 1000];
            for part in 0..5 {
                for v in p.part_nodes(part) {
                    seen[v as usize] += 1;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{method}");
            assert!(p.part_sizes().iter().all(|&s| s > 0), "{method}");
        }
    }

    #[test]
    fn same_seed_same_bytes_different_seed_different() {
        let g = test_graph(2000);
        for method in [PartitionMethod::Random, SUPER, PartitionMethod::Metis] {
            let a = partition(&g, &cfg(method, 4, 0, 1)).unwrap();
            let b = partition(&g, &cfg(method, 4, 0, 1)).unwrap();
            let c = partition(&g, &cfg(method, 4, 0, 2)).unwrap();
            assert_eq!(a.to_bytes(), b.to_bytes(), "{method}");
            assert_eq!(a.hash_hex(), b.hash_hex(), "{method}");
            assert_eq!(a.hash_hex().len(), 64);
            assert_ne!(a.to_bytes(), c.to_bytes(), "{method}");
        }
    }

    #[test]
    fn bytes_round_trip() {
        let g = test_graph(300);
        let c = cfg(PartitionMethod::Random, 3, 1, 5);
        let p = partition(&g, &c).unwrap();
        let bytes = p.to_bytes();
        assert_eq!(bytes.len(), 24 + 4 * 300);
        assert_eq!(&bytes[..8], b"TMAPART1");
        assert_eq!(Partition::from_bytes(c, &bytes).unwrap(), p);
        assert!(Partition::from_bytes(cfg(PartitionMethod::Random, 3, 0, 5), &bytes).is_err());
        assert!(Partition::from_bytes(c, &bytes[..100]).is_err());
    }

    #[test]
    fn random_parts_balanced_within_5_percent() {
        let n = 10_000;
        let g = test_graph(n);
        for seed in 0..3 {
            let p = partition(&g, &cfg(PartitionMethod::Random, 4, 0, seed)).unwrap();
            let expect = n as f64 / 4.0;
            for s in p.part_sizes() {
                assert!(
                    (s as f64 - expect).abs() <= 0.05 * expect,
                    "size {s} vs {expect}"
                );
            }
        }
    }

    #[test]
    fn random_is_seeded_chacha8_per_chunk() {
        // Exact values: node v of chunk 0 draws from ChaCha8Rng::seed_from_u64(derive(seed,
        // Partition)), stream 0; node 65536 is the first draw of stream 1.
        let p = random_assignment(RANDOM_CHUNK + 1, 3, 42);
        let stream_seed = seed::derive(42, Purpose::Partition);
        let mut rng = ChaCha8Rng::seed_from_u64(stream_seed);
        rng.set_stream(0);
        let expect: Vec<u32> = (0..64).map(|_| rng.random_range(0..3u32)).collect();
        assert_eq!(p[..64], expect[..]);
        let mut rng1 = ChaCha8Rng::seed_from_u64(stream_seed);
        rng1.set_stream(1);
        assert_eq!(p[RANDOM_CHUNK], rng1.random_range(0..3u32));
        // not the keystream of the bare seed (which other purposes once shared)
        let mut bare = ChaCha8Rng::seed_from_u64(42);
        let naive: Vec<u32> = (0..64).map(|_| bare.random_range(0..3u32)).collect();
        assert_ne!(p[..64], naive[..]);
    }

    #[test]
    fn super_node_groups_are_unions_of_whole_super_nodes_balanced_by_count() {
        let g = test_graph(3000);
        let k = 103; // not divisible by 5
        let super_of = super_nodes(g.view(), k, 9).unwrap();
        let num_super = super_of.iter().max().unwrap() + 1;
        assert!(num_super as usize <= k);
        for seed in [1, 2, 3] {
            let p = partition(
                &g,
                &cfg(
                    PartitionMethod::SuperNode { num_super_nodes: k },
                    4,
                    1,
                    seed,
                ),
            )
            .unwrap();
            // super-nodes don't depend on the grouping seed only through METIS; recompute with it
            let super_of = super_nodes(g.view(), k, seed).unwrap();
            let ns = *super_of.iter().max().unwrap() as usize + 1;
            let mut group = vec![u32::MAX; ns];
            for (v, &s) in super_of.iter().enumerate() {
                let a = p.assignment[v];
                assert!(group[s as usize] == u32::MAX || group[s as usize] == a);
                group[s as usize] = a;
            }
            let mut count = [0usize; 5];
            for &gr in group.iter().filter(|&&g| g != u32::MAX) {
                count[gr as usize] += 1;
            }
            let (lo, hi) = (count.iter().min().unwrap(), count.iter().max().unwrap());
            assert!(hi - lo <= 1, "{count:?}");
            assert_eq!(
                count.iter().sum::<usize>(),
                group.iter().filter(|&&g| g != u32::MAX).count()
            );
        }
    }

    #[test]
    fn super_node_remainder_goes_to_random_groups() {
        // identity super-nodes (K >= n): 7 nodes into 3 groups -> sizes {3,2,2} in some order
        let super_of: Vec<u32> = (0..7).collect();
        let mut larger = std::collections::BTreeSet::new();
        for seed in 0..20 {
            let a = group_super_nodes(&super_of, 3, seed).unwrap();
            let mut c = [0; 3];
            for &g in &a {
                c[g as usize] += 1;
            }
            let mut sorted = c;
            sorted.sort();
            assert_eq!(sorted, [2, 2, 3]);
            larger.insert(c.iter().position(|&x| x == 3).unwrap());
        }
        assert_eq!(
            larger.len(),
            3,
            "every group sometimes gets the extra super-node"
        );
    }

    #[test]
    fn super_node_k_near_or_above_n() {
        let g = test_graph(200);
        for k in [150, 199, 200, 10_000] {
            let c = cfg(PartitionMethod::SuperNode { num_super_nodes: k }, 4, 0, 1);
            let p = partition(&g, &c).unwrap();
            assert!(p.part_sizes().iter().all(|&s| s > 0), "k={k}");
        }
        // K >= n: every node is its own super-node -> sizes differ by at most one
        let c = cfg(
            PartitionMethod::SuperNode {
                num_super_nodes: 500,
            },
            3,
            0,
            4,
        );
        let mut sizes = partition(&g, &c).unwrap().part_sizes();
        sizes.sort();
        assert_eq!(sizes, vec![66, 67, 67]);
    }

    #[test]
    fn drop_parts_assigned_but_not_kept() {
        let g = test_graph(500);
        let p = partition(&g, &cfg(PartitionMethod::Random, 3, 2, 0)).unwrap();
        assert_eq!(p.kept_parts(), vec![0, 1, 2]);
        assert_eq!(p.dropped_parts(), vec![3, 4]);
        assert_eq!(p.num_assigned_parts, 5);
        assert!(p.assignment.iter().all(|&a| a < 5));
        assert!(p.part_sizes().iter().all(|&s| s > 0));
    }

    #[test]
    fn metis_separates_two_cliques() {
        // two disjoint 6-cliques: 0..6 and 6..12
        let mut src = Vec::new();
        let mut dst = Vec::new();
        for base in [0u32, 6] {
            for a in 0..6 {
                for b in 0..6 {
                    if a != b {
                        src.push(base + a);
                        dst.push(base + b);
                    }
                }
            }
        }
        let g = Csr::from_edges(12, &src, &dst);
        let p = partition(&g, &cfg(PartitionMethod::Metis, 2, 0, 0)).unwrap();
        let a = &p.assignment;
        assert!(a[..6].iter().all(|&x| x == a[0]));
        assert!(a[6..].iter().all(|&x| x == a[6]));
        assert_ne!(a[0], a[6]);
        let r = crate::partition_report(&g, &p, None);
        assert_eq!(r.total_edge_fraction_kept, 1.0);
    }

    #[test]
    fn metis_one_part_is_all_zeros() {
        let g = test_graph(50);
        let p = partition(&g, &cfg(PartitionMethod::Metis, 1, 0, 0)).unwrap();
        assert!(p.assignment.iter().all(|&a| a == 0));
    }

    #[test]
    fn errors() {
        let g = test_graph(10);
        assert_eq!(
            partition(&g, &cfg(PartitionMethod::Random, 0, 0, 0)),
            Err(PartitionError::NoParts)
        );
        assert_eq!(
            partition(&g, &cfg(PartitionMethod::Random, 8, 3, 0)),
            Err(PartitionError::TooManyParts {
                num_assigned_parts: 11,
                num_nodes: 10
            })
        );
        // fewer super-nodes (K = 2) than parts: the largest are split until every part has one
        let p = partition(
            &g,
            &cfg(PartitionMethod::SuperNode { num_super_nodes: 2 }, 3, 0, 0),
        )
        .unwrap();
        assert!(p.part_sizes().iter().all(|&s| s > 0));
        assert_eq!((p.notes.clusters_obtained, p.notes.clusters_filled), (2, 1));
    }

    /// Two 17-cliques joined by one edge (34 nodes): METIS returns fewer non-empty parts than
    /// asked for 20.
    fn two_cliques() -> Csr {
        let (mut src, mut dst) = (vec![], vec![]);
        for base in [0u32, 17] {
            for a in 0..17 {
                for b in 0..17 {
                    if a != b {
                        src.push(base + a);
                        dst.push(base + b);
                    }
                }
            }
        }
        src.extend([0, 17]);
        dst.extend([17, 0]);
        Csr::from_edges(34, &src, &dst)
    }

    #[test]
    fn metis_fewer_parts_than_asked_are_repaired_and_reported() {
        // regression (issue 11): 34 nodes into 20 METIS parts came back with empty parts, exit 0
        // (a 34-node star: the hub's weight 34 leaves METIS 15 non-empty parts)
        let (mut src, mut dst) = (vec![], vec![]);
        for v in 1..34u32 {
            src.extend([0, v]);
            dst.extend([v, 0]);
        }
        let g = Csr::from_edges(34, &src, &dst);
        let p = partition(&g, &cfg(PartitionMethod::Metis, 18, 2, 0)).unwrap();
        let sizes = p.part_sizes();
        assert_eq!(sizes.len(), 20);
        assert!(sizes.iter().all(|&s| s > 0), "{sizes:?}");
        assert_eq!(sizes.iter().sum::<usize>(), 34);
        assert_eq!(
            (
                p.notes.clusters_requested,
                p.notes.clusters_obtained,
                p.notes.clusters_filled
            ),
            (20, 15, 5)
        );
        let w = p.notes.warnings(PartitionMethod::Metis, 34);
        assert_eq!(
            w,
            vec![format!(
                "METIS returned {} non-empty parts of 20 requested; split the largest parts to fill the {} empty ones",
                p.notes.clusters_obtained, p.notes.clusters_filled
            )]
        );
        let r = crate::partition_report(&g, &p, None);
        assert_eq!(
            (r.clusters_requested, r.clusters_obtained),
            (20, p.notes.clusters_obtained)
        );
        assert!(r.empty_parts.is_empty());
        assert_eq!(r.warnings, w);
        assert!(r.to_table().contains(&format!(
            "clusters: 20 requested, {} obtained",
            p.notes.clusters_obtained
        )));
        // super-nodes: METIS returns k < K = 30 clusters here; asking for k + 2 parts splits
        // the largest clusters twice
        let g = two_cliques();
        let sup = |parts| {
            partition(
                &g,
                &cfg(
                    PartitionMethod::SuperNode {
                        num_super_nodes: 30,
                    },
                    parts,
                    0,
                    0,
                ),
            )
            .unwrap()
        };
        let k = sup(2).notes.clusters_obtained;
        assert!(k < 30 && k + 2 <= 34, "k = {k}");
        let p = sup(k + 2);
        assert!(p.part_sizes().iter().all(|&s| s > 0));
        assert_eq!(
            (
                p.notes.clusters_requested,
                p.notes.clusters_obtained,
                p.notes.clusters_filled
            ),
            (30, k, 2)
        );
    }

    #[test]
    fn fill_empty_parts_splits_the_largest_in_bfs_order() {
        // path 0-1-2-3-4-5 all in part 0, parts 1 and 2 empty
        let (mut src, mut dst) = (vec![], vec![]);
        for v in 0..5u32 {
            src.extend([v, v + 1]);
            dst.extend([v + 1, v]);
        }
        let g = Csr::from_edges(6, &src, &dst);
        let mut a = vec![0u32; 6];
        assert_eq!(fill_empty_parts(g.view(), &mut a, 3), vec![1, 2]);
        // part 0 (6 nodes) gives 3..6 to part 1; then part 0 and 1 have 3 each: part 0 (lower
        // id) gives its second half (BFS from 0: 0, 1, 2 -> {1, 2}... half = 1) -> 1, 2 to part 2
        assert_eq!(a, vec![0, 2, 2, 1, 1, 1]);
        let mut b = vec![0u32, 1, 1, 0, 0, 0];
        assert!(fill_empty_parts(g.view(), &mut b, 2).is_empty());
        assert_eq!(b, vec![0, 1, 1, 0, 0, 0]);
    }

    #[test]
    fn random_empty_parts_and_clamped_super_nodes_are_reported() {
        // regression (issue 11): empty random parts were listed with 0 nodes, never warned
        let g = test_graph(5);
        let p = partition(&g, &cfg(PartitionMethod::Random, 5, 0, 3)).unwrap();
        let sizes = p.part_sizes();
        let empty: Vec<usize> = (0..5).filter(|&i| sizes[i] == 0).collect();
        assert!(!empty.is_empty(), "seed 3 leaves a part empty: {sizes:?}");
        let r = crate::partition_report(&g, &p, None);
        assert_eq!(r.empty_parts, empty);
        let ids: Vec<String> = empty.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            r.warnings,
            vec![format!(
                "{} of 5 parts got no node (part{} {}; 5 nodes dealt at random): {} no data",
                empty.len(),
                if empty.len() == 1 { "" } else { "s" },
                ids.join(", "),
                if empty.len() == 1 {
                    "that trainer has"
                } else {
                    "those trainers have"
                }
            )]
        );
        // regression (issue 11): --super-nodes K > nodes was accepted silently
        let g = test_graph(30);
        let p = partition(
            &g,
            &cfg(
                PartitionMethod::SuperNode {
                    num_super_nodes: 100,
                },
                3,
                0,
                0,
            ),
        )
        .unwrap();
        assert!(p.notes.super_nodes_clamped);
        assert_eq!(
            (p.notes.clusters_requested, p.notes.clusters_obtained),
            (100, 30)
        );
        assert_eq!(
            p.notes.warnings(PartitionMethod::SuperNode { num_super_nodes: 100 }, 30),
            vec!["--super-nodes 100 exceeds the graph's 30 nodes: clamped to 30 (every node is its own super-node)".to_string()]
        );
        // regression (issue 32): label propagation formed 972,462 super-nodes where 1000 were
        // asked (on graphs without communities it stops at small clusters); now merged by
        // their arcs and packed to the count asked, every node in exactly one
        let g = test_graph(20_000);
        let k = PartitionMethod::SuperNode {
            num_super_nodes: 50,
        };
        let p = partition(
            &g,
            &PartitionConfig {
                clustering: Clustering::Lpa,
                ..cfg(k, 4, 0, 0)
            },
        )
        .unwrap();
        let l = p.notes.lpa.clone().unwrap();
        assert!(l.clusters_before_merging > 1000, "{l:?}");
        assert!(!l.merge_levels.is_empty() && l.packed_from > 50, "{l:?}");
        assert_eq!((l.num_clusters, p.notes.clusters_obtained), (50, 50));
        assert!(p.notes.warnings(k, 20_000).is_empty());
        assert_eq!(p.assignment.len(), 20_000);
        assert_eq!(p.part_sizes().iter().sum::<usize>(), 20_000);
        let line = p
            .notes
            .clustering_line(Clustering::Lpa, g.num_edges())
            .unwrap();
        assert!(
            line.starts_with(&format!(
                "clustering: lpa (size-constrained label propagation): 50 super-nodes (largest {} nodes; {} clusters of at most 400 nodes in {} passes, merged by their arcs to ",
                l.largest_cluster, l.clusters_before_merging, l.passes
            )),
            "{line}"
        );
        assert!(line.contains(", packed by size onto 50), "), "{line}");
        // merging keeps more arcs inside than the node-level clusters alone
        let (_, alone) = label_propagation(
            g.view(),
            400,
            LPA_MAX_PASSES,
            seed::derive(0, Purpose::SuperNodes),
        );
        assert!(
            l.intra_cluster_arcs > alone.intra_cluster_arcs,
            "{l:?} {alone:?}"
        );
    }

    #[test]
    fn method_display_parse_serde() {
        assert_eq!(PartitionMethod::Random.to_string(), "random");
        assert_eq!(SUPER.to_string(), "super");
        assert_eq!(PartitionMethod::Metis.to_string(), "metis");
        assert_eq!(
            "super:15000".parse(),
            Ok(PartitionMethod::SuperNode {
                num_super_nodes: 15000
            })
        );
        assert_eq!(
            "super".parse(),
            Ok(PartitionMethod::SuperNode {
                num_super_nodes: 1000
            })
        );
        assert_eq!("METIS".parse(), Ok(PartitionMethod::Metis));
        assert!("foo".parse::<PartitionMethod>().is_err());
        let c = cfg(SUPER, 4, 1, 3);
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(
            json,
            r#"{"method":{"super":{"num_super_nodes":50}},"clustering":"auto","num_parts":4,"drop_parts":1,"seed":3}"#
        );
        assert_eq!(serde_json::from_str::<PartitionConfig>(&json).unwrap(), c);
        // manifests written before the clustering choice read as auto
        let old =
            r#"{"method":{"super":{"num_super_nodes":50}},"num_parts":4,"drop_parts":1,"seed":3}"#;
        assert_eq!(serde_json::from_str::<PartitionConfig>(old).unwrap(), c);
        let lpa = PartitionConfig {
            clustering: Clustering::Lpa,
            ..c
        };
        let json = serde_json::to_string(&lpa).unwrap();
        assert!(json.contains(r#""clustering":"lpa""#), "{json}");
        assert_eq!(serde_json::from_str::<PartitionConfig>(&json).unwrap(), lpa);
        for (s, c) in [
            ("metis", Clustering::Metis),
            ("LPA", Clustering::Lpa),
            ("auto", Clustering::Auto),
        ] {
            assert_eq!(s.parse(), Ok(c));
            assert_eq!(c.to_string(), s.to_ascii_lowercase());
        }
        assert!("louvain".parse::<Clustering>().is_err());
        assert_eq!(
            Clustering::Auto.resolve(AUTO_METIS_MAX_ARCS),
            Clustering::Metis
        );
        assert_eq!(
            Clustering::Auto.resolve(AUTO_METIS_MAX_ARCS + 1),
            Clustering::Lpa
        );
        assert_eq!(Clustering::Lpa.resolve(10), Clustering::Lpa);
        assert_eq!(Clustering::Metis.resolve(usize::MAX), Clustering::Metis);
        assert_eq!(
            serde_json::to_string(&PartitionMethod::Random).unwrap(),
            r#""random""#
        );
    }

    #[test]
    fn resolve_within_takes_metis_only_where_its_estimate_fits_the_budget() {
        // 2^20 nodes, 2^24 arcs: 80 * 2^24 + 64 * 2^20 = 1344 MiB for METIS, 16 MiB for LPA
        let (n, e) = (1usize << 20, 1usize << 24);
        let metis = 1344u64 << 20;
        assert_eq!(metis_peak_bytes(n, e), metis);
        assert_eq!(lpa_peak_bytes(n), 16 << 20);
        let within = |c: Clustering, b: Option<u64>| c.resolve_within(n, e, b);
        // without a budget: the arc threshold alone, no reason line
        assert_eq!(
            within(Clustering::Auto, None).unwrap(),
            ClusteringChoice {
                used: Clustering::Metis,
                reason: None
            }
        );
        // exactly METIS' estimate: METIS; one byte less: label propagation
        assert_eq!(
            within(Clustering::Auto, Some(metis)).unwrap(),
            ClusteringChoice {
                used: Clustering::Metis,
                reason: Some("METIS needs ~1.3 GiB, within --memory-budget 1.3 GiB".into())
            }
        );
        assert_eq!(
            within(Clustering::Auto, Some(metis - 1)).unwrap(),
            ClusteringChoice {
                used: Clustering::Lpa,
                reason: Some(
                    "METIS needs ~1.3 GiB, over --memory-budget 1.3 GiB (label propagation ~16 MiB)"
                        .into()
                )
            }
        );
        assert_eq!(
            within(Clustering::Auto, Some(1 << 30))
                .unwrap()
                .reason
                .unwrap(),
            "METIS needs ~1.3 GiB, over --memory-budget 1.0 GiB (label propagation ~16 MiB)"
        );
        // a budget never moves auto to METIS past the arc threshold
        let big = Clustering::Auto
            .resolve_within(n, AUTO_METIS_MAX_ARCS + 1, Some(u64::MAX))
            .unwrap();
        assert_eq!(big.used, Clustering::Lpa);
        assert_eq!(
            big.reason.as_deref(),
            Some("33554433 arcs > 33554432 for METIS")
        );
        assert_eq!(
            Clustering::Auto
                .resolve_within(n, AUTO_METIS_MAX_ARCS, None)
                .unwrap()
                .used,
            Clustering::Metis
        );
        // an explicit metis over the budget is refused, naming both flags and the estimate
        assert_eq!(
            within(Clustering::Metis, Some(metis)).unwrap().used,
            Clustering::Metis
        );
        let err = within(Clustering::Metis, Some(metis - 1)).unwrap_err();
        assert!(
            matches!(err, PartitionError::MetisOverBudget { need, budget, .. } if need == metis && budget == metis - 1),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "--super-clustering metis: METIS needs ~1.3 GiB for 1048576 nodes and 16777216 arcs, over --memory-budget 1.3 GiB; use --super-clustering lpa (label propagation over the graph in place) or auto, or raise --memory-budget"
        );
        // lpa: whatever the budget, nothing to say
        assert_eq!(
            within(Clustering::Lpa, Some(1)).unwrap(),
            ClusteringChoice {
                used: Clustering::Lpa,
                reason: None
            }
        );
    }

    #[test]
    fn partition_within_a_budget_records_the_choice() {
        let g = test_graph(400);
        let e = g.num_edges();
        assert_eq!(e, 1592);
        let metis = metis_peak_bytes(400, e);
        assert_eq!(metis, 80 * 1592 + 64 * 400);
        let sup = PartitionMethod::SuperNode {
            num_super_nodes: 20,
        };
        let c = cfg(sup, 4, 0, 3);
        // a budget METIS fits in: the partition without a budget, bytes and all
        let plain = partition(&g, &c).unwrap();
        let roomy = partition_ref_within(g.view(), &c, Some(metis)).unwrap();
        assert_eq!(roomy.assignment, plain.assignment);
        assert_eq!(plain.notes.clustering_reason, None);
        assert_eq!(plain.notes.clustering_choice_line(Clustering::Auto), None);
        assert_eq!(
            roomy
                .notes
                .clustering_choice_line(Clustering::Auto)
                .unwrap(),
            "super-clustering auto -> metis: METIS needs ~149 KiB, within --memory-budget 149 KiB"
        );
        // one byte less: label propagation, as an explicit lpa gives it
        let tight = partition_ref_within(g.view(), &c, Some(metis - 1)).unwrap();
        assert_eq!(tight.notes.clustering, Some(Clustering::Lpa));
        let lpa = partition(
            &g,
            &PartitionConfig {
                clustering: Clustering::Lpa,
                ..c
            },
        )
        .unwrap();
        assert_eq!(tight.assignment, lpa.assignment);
        let line = tight
            .notes
            .clustering_choice_line(Clustering::Auto)
            .unwrap();
        assert_eq!(
            line,
            "super-clustering auto -> lpa: METIS needs ~149 KiB, over --memory-budget 149 KiB (label propagation ~6 KiB)"
        );
        assert!(tight
            .notes
            .clustering_line(Clustering::Auto, e)
            .unwrap()
            .starts_with(
                "clustering: lpa (size-constrained label propagation, auto: METIS needs ~"
            ));
        // PSGD-PA parts too; an explicit metis is refused
        let m = cfg(PartitionMethod::Metis, 4, 0, 3);
        let p = partition_ref_within(g.view(), &m, Some(metis - 1)).unwrap();
        assert_eq!(p.notes.clustering, Some(Clustering::Lpa));
        let explicit = PartitionConfig {
            clustering: Clustering::Metis,
            ..m
        };
        assert!(matches!(
            partition_ref_within(g.view(), &explicit, Some(metis - 1)),
            Err(PartitionError::MetisOverBudget { .. })
        ));
        // no clustering runs (K >= N, random): no budget check
        let all = cfg(
            PartitionMethod::SuperNode {
                num_super_nodes: 400,
            },
            4,
            0,
            3,
        );
        let explicit_all = PartitionConfig {
            clustering: Clustering::Metis,
            ..all
        };
        assert!(partition_ref_within(g.view(), &explicit_all, Some(1)).is_ok());
    }
}
