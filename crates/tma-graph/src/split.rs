//! Random node splits (node classification) and edge splits with fixed negatives (link
//! prediction).

use rand::seq::SliceRandom;
use rand::Rng;
use rayon::prelude::*;

use crate::csr::Csr;
use crate::dataset::{Labels, NodeSplit};
use crate::seed::{self, Purpose};

/// Random train/val/test split of the **labelled** nodes (all nodes for [`Labels::None`] and
/// [`Labels::MultiLabel`]; nodes with `y >= 0` for [`Labels::Classes`]).
///
/// The `m` eligible nodes are shuffled with [`seed::rng`]`(seed, Purpose::NodeSplit)`; the first
/// `round(m * train_frac)` go to train, the next `round(m * val_frac)` to val (clamped to what
/// is left), the rest to test. Each list is sorted. The usual choice is `0.6, 0.2` (60/20/20).
/// Deterministic in `seed`.
///
/// # Panics
/// If a fraction is negative or `train_frac + val_frac > 1`, or if `labels` holds fewer than
/// `num_nodes` entries.
pub fn random_node_split(
    labels: &Labels,
    num_nodes: usize,
    train_frac: f64,
    val_frac: f64,
    seed: u64,
) -> NodeSplit {
    assert!(
        train_frac >= 0.0 && val_frac >= 0.0 && train_frac + val_frac <= 1.0 + 1e-12,
        "invalid split fractions {train_frac}/{val_frac}"
    );
    let mut nodes: Vec<u32> = (0..num_nodes)
        .filter(|&v| !matches!(labels, Labels::Classes { .. }) || labels.is_labelled(v))
        .map(|v| v as u32)
        .collect();
    let m = nodes.len();
    let mut rng = seed::rng(seed, Purpose::NodeSplit);
    nodes.shuffle(&mut rng);
    let n_train = ((m as f64 * train_frac).round() as usize).min(m);
    let n_val = ((m as f64 * val_frac).round() as usize).min(m - n_train);
    let mut train = nodes[..n_train].to_vec();
    let mut val = nodes[n_train..n_train + n_val].to_vec();
    let mut test = nodes[n_train + n_val..].to_vec();
    train.sort_unstable();
    val.sort_unstable();
    test.sort_unstable();
    NodeSplit { train, val, test }
}

/// An edge split for link prediction with fixed evaluation negatives (OGB style).
///
/// Pairs `(u, v)` are `(src, dst)` of an arc for directed graphs and `(min, max)` of an edge
/// for undirected graphs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkSplit {
    /// The graph with every held-out (val/test) edge removed, **in both directions** (the
    /// reference release left the reverse direction in, leaking the answer). Same node set as
    /// the input; undirected graphs stay symmetric. Sorted rows.
    pub train_graph: Csr,
    /// Training edges, sorted: one entry per undirected edge (`u < v`), or per arc if directed.
    /// Never contains a val/test pair in either direction.
    pub train_edges: Vec<(u32, u32)>,
    /// Validation positives `[n_val]`.
    pub val_pos: Vec<(u32, u32)>,
    /// Test positives `[n_test]`.
    pub test_pos: Vec<(u32, u32)>,
    /// Validation negatives, `[val_pos.len() * num_neg]` row-major: entries
    /// `i * num_neg .. (i + 1) * num_neg` are destination candidates `w` to rank against
    /// `val_pos[i] = (u, v)`, i.e. negative pairs `(u, w)`.
    pub val_neg: Vec<u32>,
    /// Test negatives, `[test_pos.len() * num_neg]`, same layout as `val_neg`.
    pub test_neg: Vec<u32>,
    /// Negatives per positive.
    pub num_neg: usize,
}

/// Positives per RNG chunk when sampling negatives (fixed, so results do not depend on the
/// number of threads).
const NEG_CHUNK: usize = 256;
/// Rejection tries per negative before accepting any `w != u`.
const NEG_MAX_TRIES: usize = 64;

/// Random edge split with fixed negatives.
///
/// 1. The candidate edges are the undirected edges `u < v` (or all arcs if `directed`),
///    self-loops excluded, listed in CSR order.
/// 2. They are shuffled with [`seed::rng`]`(seed, Purpose::LinkSplit)`; the first
///    `n_val = round(m * val_frac)` (capped at `max_eval_edges`) become validation positives,
///    the next `n_test = round(m * test_frac)` (capped likewise) test positives, the rest
///    training edges. With a cap this is sampling `n_val`/`n_test` edges without replacement;
///    edges beyond the cap stay in training. For directed graphs, a training arc `v -> u` whose
///    reverse `u -> v` is held out is dropped as well (it would leak the answer), so
///    `train_edges.len()` may be a little below `m - n_val - n_test`.
/// 3. `train_graph` is rebuilt from the training edges (both directions if undirected), so no
///    val/test pair appears in it in either direction.
/// 4. For each positive `(u, v)`, `num_neg` destinations `w` are drawn uniformly (with
///    replacement) with `w != u` and `(u, w)` not an arc of the **full** `graph` (OGB style).
///    Rejection sampling is used; if fewer than 1/16 of the nodes are valid candidates for `u`
///    (a node adjacent to nearly everything), or after 64 rejected tries, any `w != u` is
///    accepted. Negatives are drawn per chunk `c` of 256 positives from
///    [`seed::chunk_rng`]`(seed::derive(seed, P), c)` with `P` = [`Purpose::ValNegatives`] or
///    [`Purpose::TestNegatives`], in parallel with rayon; results do not depend on the thread
///    count.
///
/// Deterministic in `seed`. `graph` must have sorted rows (as built by [`Csr::from_edges`] or
/// the loader); an unsorted graph is sorted internally first.
///
/// # Panics
/// If a fraction is negative or `val_frac + test_frac > 1`.
pub fn link_split(
    graph: &Csr,
    directed: bool,
    val_frac: f64,
    test_frac: f64,
    max_eval_edges: Option<usize>,
    num_neg: usize,
    seed: u64,
) -> LinkSplit {
    assert!(
        val_frac >= 0.0 && test_frac >= 0.0 && val_frac + test_frac <= 1.0 + 1e-12,
        "invalid split fractions {val_frac}/{test_frac}"
    );
    let n = graph.num_nodes();
    let sorted_copy;
    let graph = if rows_sorted(graph) {
        graph
    } else {
        let mut g = graph.clone();
        for v in 0..n {
            let (a, b) = (g.indptr[v] as usize, g.indptr[v + 1] as usize);
            g.indices[a..b].sort_unstable();
        }
        sorted_copy = g;
        &sorted_copy
    };

    // 1. candidate edges, (src, dst) = (u, v); row v holds in-neighbours u.
    let mut edges: Vec<(u32, u32)> = Vec::with_capacity(if directed {
        graph.num_edges()
    } else {
        graph.num_edges() / 2
    });
    for v in 0..n {
        for &u in graph.neighbors(v) {
            if u == v as u32 {
                continue;
            }
            if directed || u < v as u32 {
                edges.push((u, v as u32));
            }
        }
    }
    let m = edges.len();

    // 2. partial Fisher-Yates: only the first n_val + n_test positions are needed.
    let cap = max_eval_edges.unwrap_or(usize::MAX);
    let n_val = ((m as f64 * val_frac).round() as usize).min(cap).min(m);
    let n_test = ((m as f64 * test_frac).round() as usize)
        .min(cap)
        .min(m - n_val);
    let mut rng = seed::rng(seed, Purpose::LinkSplit);
    for i in 0..n_val + n_test {
        let j = rng.random_range(i..m);
        edges.swap(i, j);
    }
    let val_pos = edges[..n_val].to_vec();
    let test_pos = edges[n_val..n_val + n_test].to_vec();
    let mut train_edges = edges.split_off(n_val + n_test);
    drop(edges);
    if directed {
        // a held-out arc u -> v also removes a reciprocal training arc v -> u
        let held: std::collections::HashSet<(u32, u32)> = val_pos
            .iter()
            .chain(&test_pos)
            .map(|&(u, v)| (v, u))
            .collect();
        if !held.is_empty() {
            train_edges.retain(|e| !held.contains(e));
        }
    }
    train_edges.par_sort_unstable();

    // 3. training graph.
    let cap_arcs = if directed {
        train_edges.len()
    } else {
        2 * train_edges.len()
    };
    let mut src = Vec::with_capacity(cap_arcs);
    let mut dst = Vec::with_capacity(cap_arcs);
    for &(u, v) in &train_edges {
        src.push(u);
        dst.push(v);
        if !directed {
            src.push(v);
            dst.push(u);
        }
    }
    let train_graph = Csr::from_edges(n, &src, &dst);
    drop((src, dst));

    // 4. negatives.
    let out_deg: Vec<u32> = if directed {
        let mut d = vec![0u32; n];
        for &u in &graph.indices {
            d[u as usize] += 1;
        }
        d
    } else {
        graph.degrees()
    };
    let val_neg = sample_negatives(
        graph,
        &out_deg,
        &val_pos,
        num_neg,
        seed::derive(seed, Purpose::ValNegatives),
    );
    let test_neg = sample_negatives(
        graph,
        &out_deg,
        &test_pos,
        num_neg,
        seed::derive(seed, Purpose::TestNegatives),
    );

    LinkSplit {
        train_graph,
        train_edges,
        val_pos,
        test_pos,
        val_neg,
        test_neg,
        num_neg,
    }
}

fn rows_sorted(g: &Csr) -> bool {
    (0..g.num_nodes()).all(|v| g.neighbors(v).windows(2).all(|w| w[0] <= w[1]))
}

/// Whether arc `u -> w` exists (row `w` lists in-neighbours; sorted rows).
#[inline]
fn has_arc(g: &Csr, u: u32, w: u32) -> bool {
    g.neighbors(w as usize).binary_search(&u).is_ok()
}

fn sample_negatives(
    graph: &Csr,
    out_deg: &[u32],
    pos: &[(u32, u32)],
    num_neg: usize,
    stream_seed: u64,
) -> Vec<u32> {
    let n = graph.num_nodes();
    let mut out = vec![0u32; pos.len() * num_neg];
    if num_neg == 0 || pos.is_empty() {
        return out;
    }
    out.par_chunks_mut(NEG_CHUNK * num_neg)
        .enumerate()
        .for_each(|(chunk, buf)| {
            let mut rng = seed::chunk_rng(stream_seed, chunk as u64);
            let first = chunk * NEG_CHUNK;
            for (k, row) in buf.chunks_mut(num_neg).enumerate() {
                let u = pos[first + k].0;
                // valid candidates: all nodes but u and u's out-neighbours
                let valid = n.saturating_sub(1 + out_deg[u as usize] as usize);
                let strict = valid * 16 >= n;
                for slot in row.iter_mut() {
                    let mut w;
                    let mut tries = 0;
                    loop {
                        w = rng.random_range(0..n as u32);
                        if w == u && n > 1 {
                            continue;
                        }
                        tries += 1;
                        if !strict || tries > NEG_MAX_TRIES || !has_arc(graph, u, w) {
                            break;
                        }
                    }
                    *slot = w;
                }
            }
        });
    out
}
