//! Size-constrained label propagation (SCLaP): the super-node clustering that scales past METIS.
//!
//! Reads a CSR in place (a [`CsrRef`], so the graph may be memory-mapped from disk) and keeps
//! two `u32` per node (the label of every node and the size of every cluster) plus buffers of
//! one batch: `8 N` bytes beyond the graph, whatever the arc count.
//!
//! Algorithm (label propagation with a cluster size cap, as in KaHIP's SCLaP, Meyerhenke,
//! Sanders and Schulz 2014): every node starts in its own cluster; a pass visits every node and
//! moves it to the cluster most frequent among its in-neighbours (row of the CSR) whose size is
//! below the cap. Ties go to the node's current cluster, then to the cluster with the smallest
//! hash of `(pass seed, cluster)`, so nodes of a region agree on one cluster from the first pass.
//!
//! Deterministic in the seed and independent of the thread count: nodes are visited in blocks
//! of consecutive ids, the block order shuffled per pass (seeded); consecutive blocks form a
//! batch whose nodes choose in parallel (rayon) from the labels as they were at the start of
//! the batch, then the moves are applied in visiting order, each only if its target cluster is
//! still below the cap. Block and batch lengths depend on the node count only.

use rand::seq::SliceRandom;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use tma_graph::seed;
use tma_graph::CsrRef;

/// Anonymous memory of label propagation per node at its peak, bytes: a `u32` label and a
/// `u32` cluster size, then the compaction map and the assignment
/// ([`label_propagation`]); a super-node merge level's labels, members and 16 bytes per
/// cluster for at most `N / 2` clusters ([`super_node_clusters`]).
pub const LPA_BYTES_PER_NODE: u64 = 16;

/// The estimated peak anonymous memory of label propagation over `num_nodes` nodes, bytes:
/// `LPA_BYTES_PER_NODE * num_nodes` (nothing per arc: the CSR is read in place).
pub fn lpa_peak_bytes(num_nodes: usize) -> u64 {
    LPA_BYTES_PER_NODE * num_nodes as u64
}

/// What one run of [`label_propagation`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LpaStats {
    /// The cluster size cap (nodes).
    pub max_cluster_size: usize,
    /// Passes over the graph.
    pub passes: usize,
    /// Nodes that changed cluster in each pass.
    pub moved_per_pass: Vec<usize>,
    /// Non-empty clusters at the end.
    pub num_clusters: usize,
    /// Size of the largest cluster.
    pub largest_cluster: usize,
    /// Arcs whose endpoints share a cluster (self-loops included): what a super-node partition
    /// keeps for sure; of the other arcs, about `1 / M` survive in `M` random groups.
    pub intra_cluster_arcs: u64,
    /// [`super_node_clusters`]: clusters of the node-level pass, before any merge level (0
    /// from [`label_propagation`] alone).
    #[serde(default)]
    pub clusters_before_merging: usize,
    /// [`super_node_clusters`]: the merge levels that ran.
    #[serde(default)]
    pub merge_levels: Vec<MergeLevel>,
    /// [`super_node_clusters`]: clusters packed by size onto the super-nodes asked for (0 when
    /// no packing was needed).
    #[serde(default)]
    pub packed_from: usize,
}

/// Passes after which [`label_propagation`] stops even if nodes still move.
pub const LPA_MAX_PASSES: usize = 10;

/// A pass that moves fewer than `num_nodes / LPA_STOP_FRACTION` nodes is the last.
const LPA_STOP_FRACTION: usize = 1000;

/// Largest block of consecutive node ids visited together (memory locality on a mapped graph).
const MAX_BLOCK: usize = 1024;

/// Largest batch (nodes deciding in parallel from the same labels).
const MAX_BATCH: usize = 16384;

/// Block length for `n` nodes: `clamp(n / 4096, 1, 1024)`, so a graph has at least ~4096
/// blocks to shuffle.
fn block_len(n: usize) -> usize {
    (n / 4096).clamp(1, MAX_BLOCK)
}

/// Batch length in blocks: about `n / 256` nodes, at most [`MAX_BATCH`], at least one block.
/// A node decides from its batch's start labels, so a neighbour in the same batch (probability
/// about `1 / 256` for scattered ids) is seen one batch late.
fn batch_blocks(n: usize, block: usize) -> usize {
    ((n / 256).min(MAX_BATCH) / block).max(1)
}

/// Cluster of every node (ids `0..num_clusters` in order of first node) by size-constrained
/// label propagation over `graph`'s rows (in-neighbours; self-loops ignored), every cluster at
/// most `max_cluster_size` nodes (`>= 1`), at most `max_passes` passes. `seed` is the stream
/// seed (e.g. a [`seed::derive`]d one): pass `p` shuffles the block order with
/// [`seed::chunk_rng`]`(seed, p)` and breaks ties by a hash of `(seed, p, cluster)`.
///
/// A directed graph is clustered by its in-arcs only (no transpose is built, to keep the
/// memory `O(N)`); the graphs tma stores undirected have both directions in their rows.
///
/// # Panics
/// If `max_cluster_size == 0`.
pub fn label_propagation(
    graph: CsrRef<'_>,
    max_cluster_size: usize,
    max_passes: usize,
    seed: u64,
) -> (Vec<u32>, LpaStats) {
    assert!(max_cluster_size >= 1, "cluster size cap must be at least 1");
    let n = graph.num_nodes();
    let cap = max_cluster_size.min(u32::MAX as usize) as u32;
    let label: Vec<u32> = (0..n as u32).collect();
    let size: Vec<u32> = vec![1; n];
    let mut stats = LpaStats {
        max_cluster_size: cap as usize,
        ..LpaStats::default()
    };
    let mut state = (label, size);
    stats.moved_per_pass = propagate(
        &mut state,
        n,
        max_passes,
        seed,
        |(label, size), v, tie_key, scratch| {
            best_cluster(graph, v, label, size, cap, tie_key, scratch)
        },
        |(label, size), v, to| {
            let cur = label[v];
            if to != cur && size[to as usize] < cap {
                size[cur as usize] -= 1;
                size[to as usize] += 1;
                label[v] = to;
                true
            } else {
                false
            }
        },
    );
    stats.passes = stats.moved_per_pass.len();
    let (mut label, size) = state;
    stats.largest_cluster = size.iter().copied().max().unwrap_or(0) as usize;
    drop(size);
    stats.intra_cluster_arcs = intra_cluster_arcs(graph, &label);
    stats.num_clusters = compact_ids(&mut label);
    (label, stats)
}

/// Arcs of `graph` whose endpoints share a label (self-loops included).
fn intra_cluster_arcs(graph: CsrRef<'_>, label: &[u32]) -> u64 {
    (0..graph.num_nodes())
        .into_par_iter()
        .with_min_len(4096)
        .map(|v| {
            let c = label[v];
            graph
                .neighbors(v)
                .iter()
                .filter(|&&u| label[u as usize] == c)
                .count() as u64
        })
        .sum()
}

/// Merge levels [`super_node_clusters`] runs at most after the node-level pass.
pub const LPA_MAX_MERGE_LEVELS: usize = 4;

/// Passes of one merge level at most.
const MERGE_MAX_PASSES: usize = 5;

/// `num_super_nodes` super-nodes (`>= 1`; ids `0..k`, `k <= num_super_nodes`, `k` below it
/// only when the graph has fewer nodes or clusters cannot be packed further) of at most about
/// `2 * ceil(N / num_super_nodes)` nodes each, for SuperTMA's super-node partition.
///
/// 1. [`label_propagation`] with the cap `ceil(N / num_super_nodes)`. On graphs without
///    community structure (R-MAT, social graphs) it stops at many small clusters: 972,462 on a
///    5M-node R-MAT graph where 1000 were asked (issue 32).
/// 2. Merge levels, at most [`LPA_MAX_MERGE_LEVELS`], while there are more clusters than asked
///    (and at most `N / 2`):
///    label propagation over the clusters, each cluster (its members never split) moving to
///    the merged cluster it has the most arcs to (arcs inside the cluster itself not counted),
///    if the merged size stays within the cap. A level that removes under 5% of the clusters
///    is the last.
/// 3. If still more clusters than asked, they are packed by size onto `num_super_nodes`
///    super-nodes, largest first onto the smallest ([`pack_largest_first`]): no arc inside a
///    cluster is cut, the sizes stay within the mean plus the cap.
///
/// Memory beyond the graph (read in place): the node-level pass's `8 N` bytes, then a merge
/// level's `8 N` (labels, members in cluster order) plus `16` per cluster; merge levels run
/// only while there are at most `N / 2` clusters, so [`LPA_BYTES_PER_NODE`]
/// (`16 N`) bounds every step. Deterministic in `seed`, independent
/// of the thread count (as [`label_propagation`]).
///
/// # Panics
/// If `num_super_nodes == 0`.
pub fn super_node_clusters(
    graph: CsrRef<'_>,
    num_super_nodes: usize,
    seed: u64,
) -> (Vec<u32>, LpaStats) {
    assert!(num_super_nodes >= 1, "at least one super-node");
    let n = graph.num_nodes();
    let cap = n.div_ceil(num_super_nodes).max(1);
    let (mut label, mut stats) = label_propagation(graph, cap, LPA_MAX_PASSES, seed);
    let cap = stats.max_cluster_size as u32;
    stats.clusters_before_merging = stats.num_clusters;
    for level in 0..LPA_MAX_MERGE_LEVELS {
        let before = stats.num_clusters;
        // over N / 2 clusters: mostly singletons, left to the packing (and the memory bound)
        if before <= num_super_nodes || before > n / 2 || n > u32::MAX as usize {
            break;
        }
        let level_seed = seed::splitmix64(seed ^ seed::splitmix64(0x4d45_5247_4500 + level as u64));
        let (k, moved) = merge_level(graph, &mut label, before, cap, level_seed);
        stats.merge_levels.push(MergeLevel {
            clusters: k,
            moved_per_pass: moved,
        });
        stats.num_clusters = k;
        if k * 20 > before * 19 {
            break;
        }
    }
    if stats.num_clusters > num_super_nodes {
        let mut size = vec![0u64; stats.num_clusters];
        for &c in &label {
            size[c as usize] += 1;
        }
        let bin = pack_largest_first(&size, num_super_nodes);
        drop(size);
        for l in label.iter_mut() {
            *l = bin[*l as usize];
        }
        stats.packed_from = stats.num_clusters;
        stats.num_clusters = compact_ids(&mut label);
    }
    if stats.num_clusters != stats.clusters_before_merging {
        let mut size = vec![0u32; stats.num_clusters];
        for &c in &label {
            size[c as usize] += 1;
        }
        stats.largest_cluster = size.iter().copied().max().unwrap_or(0) as usize;
        stats.intra_cluster_arcs = intra_cluster_arcs(graph, &label);
    }
    (label, stats)
}

/// What one merge level of [`super_node_clusters`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeLevel {
    /// Clusters after the level.
    pub clusters: usize,
    /// Clusters that joined another merged cluster in each pass.
    pub moved_per_pass: Vec<usize>,
}

/// One merge level: the `k` clusters of `label` (compact ids) move as wholes, by label
/// propagation over the arcs between them, into merged clusters of at most `cap` nodes;
/// `label` is rewritten to the merged clusters (compact ids). Returns their count and the moves
/// per pass. Visiting order and batching as in [`label_propagation`], over cluster ids.
fn merge_level(
    graph: CsrRef<'_>,
    label: &mut [u32],
    k: usize,
    cap: u32,
    seed: u64,
) -> (usize, Vec<usize>) {
    let n = label.len();
    // members of every cluster (counting sort): cluster c holds members[start[c]..start[c + 1]]
    let mut start = vec![0u32; k + 1];
    for &c in label.iter() {
        start[c as usize + 1] += 1;
    }
    for c in 0..k {
        start[c + 1] += start[c];
    }
    let mut members = vec![0u32; n];
    for (v, &c) in label.iter().enumerate() {
        let at = &mut start[c as usize];
        members[*at as usize] = v as u32;
        *at += 1;
    }
    // start[c] is now the end of c: shift back
    for c in (1..=k).rev() {
        start[c] = start[c - 1];
    }
    start[0] = 0;
    let own = |c: usize| start[c + 1] - start[c];
    // merged[c]: the merged cluster cluster c is in (ids of clusters); size: nodes per merged
    let merged: Vec<u32> = (0..k as u32).collect();
    let size: Vec<u32> = (0..k).map(own).collect();
    let (label_r, members_r, start_r) = (&*label, &members, &start);
    let mut state = (merged, size);
    let moved_per_pass = propagate(
        &mut state,
        k,
        MERGE_MAX_PASSES,
        seed,
        |(merged, size), c, tie_key, scratch| {
            let cur = merged[c];
            let mine = start_r[c + 1] - start_r[c];
            scratch.clear();
            for &v in &members_r[start_r[c] as usize..start_r[c + 1] as usize] {
                scratch.extend(
                    graph
                        .neighbors(v as usize)
                        .iter()
                        .map(|&u| label_r[u as usize])
                        .filter(|&f| f as usize != c)
                        .map(|f| merged[f as usize]),
                );
            }
            most_frequent(scratch, cur, tie_key, |d| {
                d == cur || size[d as usize] + mine <= cap
            })
        },
        |(merged, size), c, to| {
            let cur = merged[c];
            let mine = own(c);
            if to != cur && size[to as usize] + mine <= cap {
                size[cur as usize] -= mine;
                size[to as usize] += mine;
                merged[c] = to;
                true
            } else {
                false
            }
        },
    );
    let (merged, size) = state;
    drop((members, start, size));
    for l in label.iter_mut() {
        *l = merged[*l as usize];
    }
    drop(merged);
    (compact_ids(label), moved_per_pass)
}

/// The passes of label propagation over `items` items (nodes, or clusters in a merge level),
/// at most `max_passes`; returns the moves of each pass. Pass `p` visits blocks of
/// [`block_len`] consecutive ids in the order shuffled by [`seed::chunk_rng`]`(seed, p)`;
/// [`batch_blocks`] blocks form a batch whose items `decide` (in parallel, from `state` as it
/// was at the batch's start, with the pass's tie key and a scratch vector) what they want;
/// `apply` then makes each move in visiting order, returning whether it moved. A pass that
/// moves at most `items / LPA_STOP_FRACTION` is the last. Deterministic in `seed` whatever
/// the thread count.
fn propagate<S: Sync>(
    state: &mut S,
    items: usize,
    max_passes: usize,
    seed: u64,
    decide: impl Fn(&S, usize, u64, &mut Vec<u32>) -> u32 + Sync,
    mut apply: impl FnMut(&mut S, usize, u32) -> bool,
) -> Vec<usize> {
    let block = block_len(items);
    let num_blocks = items.div_ceil(block);
    let per_batch = batch_blocks(items, block);
    let mut order: Vec<u32> = (0..num_blocks as u32).collect();
    let mut want: Vec<u32> = Vec::with_capacity(per_batch * block);
    let mut moved_per_pass = Vec::new();
    for pass in 0..max_passes {
        order.sort_unstable();
        order.shuffle(&mut seed::chunk_rng(seed, pass as u64));
        let tie_key = seed::splitmix64(seed ^ seed::splitmix64(pass as u64));
        let mut moved = 0usize;
        for batch in order.chunks(per_batch) {
            want.clear();
            // items of the batch, in visiting order: block by block, ids ascending inside
            let ranges: Vec<(usize, usize)> = batch
                .iter()
                .map(|&b| {
                    let lo = b as usize * block;
                    (lo, (lo + block).min(items))
                })
                .collect();
            let st = &*state;
            want.par_extend(
                ranges
                    .par_iter()
                    .flat_map_iter(|&(lo, hi)| lo..hi)
                    .map_init(Vec::new, |scratch: &mut Vec<u32>, i| {
                        decide(st, i, tie_key, scratch)
                    }),
            );
            let mut wants = want.iter();
            for &(lo, hi) in &ranges {
                for (i, &to) in (lo..hi).zip(wants.by_ref()) {
                    if apply(state, i, to) {
                        moved += 1;
                    }
                }
            }
        }
        moved_per_pass.push(moved);
        if moved <= items / LPA_STOP_FRACTION {
            break;
        }
    }
    moved_per_pass
}

/// The most frequent value of `values` (sorted here) that is `cur` or passes `eligible`; ties
/// to `cur`, then to the smallest `splitmix64(value ^ tie_key)`; `cur` when none qualifies.
#[inline]
fn most_frequent(
    values: &mut [u32],
    cur: u32,
    tie_key: u64,
    eligible: impl Fn(u32) -> bool,
) -> u32 {
    values.sort_unstable();
    // (count, is current, -hash) maximal wins
    let mut best = cur;
    let mut best_key = (0usize, true, 0u64);
    let mut i = 0;
    while i < values.len() {
        let c = values[i];
        let mut j = i + 1;
        while j < values.len() && values[j] == c {
            j += 1;
        }
        if c == cur || eligible(c) {
            let key = (j - i, c == cur, !seed::splitmix64(u64::from(c) ^ tie_key));
            if key.0 > best_key.0
                || (key.0 == best_key.0 && (key.1, key.2) > (best_key.1, best_key.2))
            {
                best = c;
                best_key = key;
            }
        }
        i = j;
    }
    best
}

/// The cluster node `v` wants: the most frequent cluster among its in-neighbours (self-loops
/// excluded) that is `v`'s own or below the cap; ties to `v`'s own, then to the smallest
/// `splitmix64(cluster ^ tie_key)`. `v`'s own cluster without a neighbour in it when none
/// qualifies.
#[inline]
fn best_cluster(
    graph: CsrRef<'_>,
    v: usize,
    label: &[u32],
    size: &[u32],
    cap: u32,
    tie_key: u64,
    scratch: &mut Vec<u32>,
) -> u32 {
    let cur = label[v];
    let nb = graph.neighbors(v);
    if nb.is_empty() {
        return cur;
    }
    scratch.clear();
    scratch.extend(
        nb.iter()
            .filter(|&&u| u as usize != v)
            .map(|&u| label[u as usize]),
    );
    most_frequent(scratch, cur, tie_key, |c| size[c as usize] < cap)
}

/// Renumbers the cluster ids in `ids` to `0..k` in order of first id (the non-empty clusters
/// keep their relative order) and returns `k`.
pub(crate) fn compact_ids(ids: &mut [u32]) -> usize {
    let max = ids.iter().map(|&s| s as usize + 1).max().unwrap_or(0);
    let mut map = vec![u32::MAX; max];
    for &s in ids.iter() {
        map[s as usize] = 0;
    }
    let mut k = 0u32;
    for m in map.iter_mut() {
        if *m == 0 {
            *m = k;
            k += 1;
        }
    }
    for s in ids.iter_mut() {
        *s = map[*s as usize];
    }
    k as usize
}

/// Packs clusters onto `parts` parts, largest weight first, each onto the part of least weight
/// so far (lowest id among equals): longest-processing-time-first list scheduling, so no part
/// exceeds the mean by more than the largest cluster. `weight[c]` is cluster `c`'s weight.
/// Returns each cluster's part.
pub(crate) fn pack_largest_first(weight: &[u64], parts: usize) -> Vec<u32> {
    let mut by_size: Vec<u32> = (0..weight.len() as u32).collect();
    by_size.sort_by(|&a, &b| weight[b as usize].cmp(&weight[a as usize]).then(a.cmp(&b)));
    let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, u32)>> = (0..parts as u32)
        .map(|p| std::cmp::Reverse((0, p)))
        .collect();
    let mut part_of = vec![0u32; weight.len()];
    for c in by_size {
        let std::cmp::Reverse((w, p)) = heap.pop().expect("parts > 0");
        part_of[c as usize] = p;
        heap.push(std::cmp::Reverse((w + weight[c as usize], p)));
    }
    part_of
}

#[cfg(test)]
mod tests {
    use super::*;
    use tma_graph::Csr;

    /// `c` cliques of `s` nodes each, clique `i` holding the nodes `v` with `v % c == i`
    /// (scattered ids), joined in a ring by one edge between consecutive cliques.
    fn cliques(c: usize, s: usize) -> Csr {
        let (mut src, mut dst) = (vec![], vec![]);
        let node = |clique: usize, k: usize| (k * c + clique) as u32;
        for i in 0..c {
            for a in 0..s {
                for b in 0..s {
                    if a != b {
                        src.push(node(i, a));
                        dst.push(node(i, b));
                    }
                }
            }
            let j = (i + 1) % c;
            src.extend([node(i, 0), node(j, 0)]);
            dst.extend([node(j, 0), node(i, 0)]);
        }
        Csr::from_edges(c * s, &src, &dst)
    }

    #[test]
    fn recovers_planted_cliques_under_a_cap_of_their_size() {
        let g = cliques(40, 8);
        let (cl, st) = label_propagation(g.view(), 8, LPA_MAX_PASSES, 5);
        // every clique is one cluster, and no two cliques share one
        for i in 0..40 {
            let c0 = cl[i];
            for k in 0..8 {
                assert_eq!(cl[k * 40 + i], c0, "clique {i}");
            }
        }
        assert_eq!(st.num_clusters, 40);
        assert_eq!(st.largest_cluster, 8);
        assert_eq!(st.max_cluster_size, 8);
        assert!(st.passes >= 2 && st.passes <= LPA_MAX_PASSES, "{st:?}");
        assert_eq!(st.moved_per_pass.last(), Some(&0));
        assert_eq!(st.moved_per_pass.len(), st.passes);
        // 40 cliques of 8: 56 arcs each inside, the 80 ring arcs between cliques
        assert_eq!(st.intra_cluster_arcs, 40 * 56);
        assert_eq!(g.num_edges(), 40 * 56 + 80);
    }

    #[test]
    fn cap_is_held_and_ids_are_compact() {
        let g = cliques(30, 10);
        for cap in [1, 3, 7] {
            let (cl, st) = label_propagation(g.view(), cap, LPA_MAX_PASSES, 1);
            let mut sizes = vec![0usize; st.num_clusters];
            for &c in &cl {
                sizes[c as usize] += 1;
            }
            assert!(sizes.iter().all(|&s| (1..=cap).contains(&s)), "cap {cap}");
            assert_eq!(*sizes.iter().max().unwrap(), st.largest_cluster);
            if cap == 1 {
                assert_eq!(cl, (0..300).collect::<Vec<u32>>());
            }
        }
    }

    #[test]
    fn super_nodes_merge_clusters_by_their_arcs_to_the_count_asked() {
        // 40 cliques of 8 in a ring, 10 super-nodes asked (cap 32 = 4 cliques): the node-level
        // pass finds 39 clusters (two cliques joined across the ring); the first merge level
        // joins neighbouring cliques along the ring into 14 (near the cap, so the second
        // moves none and is the last); packing by size makes them 10
        let g = cliques(40, 8);
        let (cl, st) = super_node_clusters(g.view(), 10, 5);
        assert_eq!(st.clusters_before_merging, 39);
        let levels: Vec<usize> = st.merge_levels.iter().map(|l| l.clusters).collect();
        assert_eq!(levels, vec![14, 14]);
        assert_eq!(st.merge_levels[1].moved_per_pass, vec![0]);
        assert_eq!(st.packed_from, 14);
        assert_eq!(st.num_clusters, 10);
        assert_eq!(st.largest_cluster, 40);
        assert_eq!(*cl.iter().max().unwrap(), 9);
        // a clique is never split
        for i in 0..40 {
            assert!((0..8).all(|k| cl[k * 40 + i] == cl[i]), "clique {i}");
        }
        let mut sizes = [0usize; 10];
        for &c in &cl {
            sizes[c as usize] += 1;
        }
        assert_eq!(*sizes.iter().max().unwrap(), st.largest_cluster);
        // packing alone (clusters dealt largest first by id) keeps no ring arc: clusters
        // 0, 10, 20, 30 share a bin
        // ring arcs kept: 2294 - 40 * 56 = 54 of the 80
        assert_eq!(st.intra_cluster_arcs, 40 * 56 + 54, "{st:?}");
        let inside = (0..320)
            .map(|v| {
                g.neighbors(v)
                    .iter()
                    .filter(|&&u| cl[u as usize] == cl[v])
                    .count()
            })
            .sum::<usize>();
        assert_eq!(inside as u64, st.intra_cluster_arcs);
        // deterministic in the seed
        assert_eq!(
            super_node_clusters(g.view(), 10, 5),
            (cl.clone(), st.clone())
        );
        // nothing to merge when the node-level pass already meets the count
        let (cl8, st8) = super_node_clusters(g.view(), 40, 5);
        assert!(st8.merge_levels.is_empty() && st8.packed_from == 0);
        assert_eq!(st8.num_clusters, 40);
        assert_eq!(label_propagation(g.view(), 8, LPA_MAX_PASSES, 5).0, cl8);
    }

    #[test]
    fn packing_largest_first_onto_the_lightest_part() {
        // weights 7 5 4 3 1 onto 2 parts: 7 -> 0, 5 -> 1, 4 -> 1 (5 < 7), 3 -> 0 (7 < 9),
        // 1 -> 1 (9 < 10)
        let part = pack_largest_first(&[3, 7, 1, 5, 4], 2);
        assert_eq!(part, vec![0, 0, 1, 1, 1]);
    }
}
