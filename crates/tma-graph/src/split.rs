//! Random node splits (node classification) and edge splits with fixed negatives (link
//! prediction).

use rand::seq::SliceRandom;
use rand::Rng;
use rayon::prelude::*;

use crate::buf::Buf;
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
    /// `val_pos[i] = (u, v)`, i.e. negative pairs `(u, w)`. Owned when drawn in memory, the
    /// mapped file when the split is stored with the graph (`link_val_neg.bin`).
    pub val_neg: Buf<u32>,
    /// Test negatives, `[test_pos.len() * num_neg]`, same layout as `val_neg`.
    pub test_neg: Buf<u32>,
    /// Negatives per positive.
    pub num_neg: usize,
    /// Whether pairs are arcs (directed graph) or undirected edges.
    pub directed: bool,
    /// What the split had to adapt to the graph (all zero / false on an ordinary graph).
    pub notes: LinkSplitNotes,
    /// The dataset's own protocol when the split is one a dataset gives (OGB link-property
    /// datasets, [`crate::dataset::StoredLinkSplit::protocol`]): with shared negatives
    /// (`protocol.shared`), `val_neg` / `test_neg` are empty and `num_neg` is 0, and every
    /// positive is ranked against all of them (Hits@K). `None` for a split tma made.
    pub protocol: Option<Box<crate::dataset::LinkProtocol>>,
}

impl LinkSplit {
    /// Training positives: `train_edges` when the split made them, else (a split stored with
    /// the graph, whose `train_graph` is the stored graph) every arc of `train_graph`, each
    /// undirected edge once (`u < v`). O(E) memory: for methods that train on the whole
    /// training graph's edge list (e.g. LLCG's corrector); trainers of a partition take their
    /// part's edges instead.
    pub fn training_edges(&self) -> Vec<(u32, u32)> {
        if !self.train_edges.is_empty() {
            return self.train_edges.clone();
        }
        let g = &self.train_graph;
        let mut out = Vec::new();
        for v in 0..g.num_nodes() {
            for &u in g.neighbors(v) {
                if self.directed || u < v as u32 {
                    out.push((u, v as u32));
                }
            }
        }
        out
    }

    /// How many training positives there are (`train_edges`, or the training graph's edges
    /// when the split was stored with the graph).
    pub fn num_train_edges(&self) -> usize {
        if !self.train_edges.is_empty() {
            self.train_edges.len()
        } else if self.directed {
            self.train_graph.num_edges()
        } else {
            self.train_graph.num_edges() / 2
        }
    }
}

/// What [`link_split`] had to adapt to the graph, so a caller can say so.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkSplitNotes {
    /// Candidate edges (undirected edges `u < v`, or arcs).
    pub num_edges: usize,
    /// `val_frac * num_edges` rounded to 0 and one validation edge was taken anyway.
    pub forced_val: bool,
    /// `test_frac * num_edges` rounded to 0 and one test edge was taken anyway.
    pub forced_test: bool,
    /// Held-out edges given back to training because their source `u` is adjacent to every
    /// other node: no negative `(u, w)` exists to rank them against.
    pub unrankable: usize,
    /// Held-out positives whose source has fewer valid negative destinations than `num_neg`
    /// (their `num_neg` negatives, drawn with replacement, repeat those few).
    pub few_negatives: usize,
    /// The fewest valid negative destinations of any held-out positive's source (`None`
    /// without held-out positives).
    pub min_valid_negatives: Option<usize>,
    /// Test negative pairs that are also validation negative pairs (in either direction for
    /// undirected graphs), drawn only where the source had no other valid negative.
    pub shared_val_test_negatives: usize,
}

impl LinkSplitNotes {
    /// One line per adaptation (empty on an ordinary graph), e.g.
    /// `link split: val-frac 0.05 of 12 edges rounds to 0; holding out 1 validation edge`.
    pub fn warnings(&self, val_frac: f64, test_frac: f64, num_neg: usize) -> Vec<String> {
        let mut w = Vec::new();
        if self.forced_val {
            w.push(format!(
                "link split: val-frac {val_frac} of {} edges rounds to 0; holding out 1 validation edge",
                self.num_edges
            ));
        }
        if self.forced_test {
            w.push(format!(
                "link split: test-frac {test_frac} of {} edges rounds to 0; holding out 1 test edge",
                self.num_edges
            ));
        }
        if self.unrankable > 0 {
            w.push(format!(
                "link split: {} held-out edge(s) went back to training: their source is adjacent to every other node, so no negative exists to rank them against",
                self.unrankable
            ));
        }
        if self.few_negatives > 0 {
            w.push(format!(
                "link split: {} held-out positive(s) have fewer than {num_neg} valid negatives (as few as {}); their {num_neg} negatives repeat those",
                self.few_negatives,
                self.min_valid_negatives.unwrap_or(0)
            ));
        }
        if self.shared_val_test_negatives > 0 {
            w.push(format!(
                "link split: {} test negative pair(s) are also validation negatives (no other valid negative for their source)",
                self.shared_val_test_negatives
            ));
        }
        w
    }
}

/// Positives per RNG chunk when sampling negatives (fixed, so results do not depend on the
/// number of threads).
const NEG_CHUNK: usize = 256;
/// Rejection tries per negative before drawing from the exact list of valid candidates.
const NEG_MAX_TRIES: usize = 64;

/// Random edge split with fixed negatives.
///
/// 1. The candidate edges are the undirected edges `u < v` (or all arcs if `directed`),
///    self-loops excluded, listed in CSR order.
/// 2. They are shuffled with [`seed::rng`]`(seed, Purpose::LinkSplit)`; the first
///    `n_val = round(m * val_frac)` (capped at `max_eval_edges`) become validation positives,
///    the next `n_test = round(m * test_frac)` (capped likewise) test positives, the rest
///    training edges. A positive fraction that rounds to 0 still takes 1 edge when the graph has
///    enough (`m >= 2` for one of val/test, `m >= 3` for both, one edge always left for
///    training); [`LinkSplitNotes::forced_val`] / `forced_test` say so. With a cap this is
///    sampling `n_val`/`n_test` edges without replacement; edges beyond the cap stay in
///    training. A held-out edge `(u, v)` whose source `u` is adjacent to every other node has no
///    negative to be ranked against and goes back to training
///    ([`LinkSplitNotes::unrankable`]). For directed graphs, a training arc `v -> u` whose
///    reverse `u -> v` is held out is dropped as well (it would leak the answer), so
///    `train_edges.len()` may be a little below `m - n_val - n_test`.
/// 3. `train_graph` is rebuilt from the training edges (both directions if undirected), so no
///    val/test pair appears in it in either direction.
/// 4. For each positive `(u, v)`, `num_neg` destinations `w` are drawn uniformly (with
///    replacement) among the valid ones: `w != u` and `(u, w)` not an arc of the **full**
///    `graph` (OGB style); never a true edge. Rejection sampling (64 tries) is used when at
///    least 1/16 of the nodes are valid for `u`, else (or when the tries fail) a draw from the
///    exact list of valid candidates. Every candidate pair belongs to the validation or the
///    test side by a seeded hash of the pair (the same for both directions of an undirected
///    pair); validation negatives are drawn from validation-side pairs and test negatives from
///    test-side pairs, so no pair (in either direction) is in both. A source whose valid
///    candidates all lie on the other side draws from all of them; test negatives that then
///    repeat a validation pair are counted ([`LinkSplitNotes::shared_val_test_negatives`]).
///    Negatives are drawn per chunk `c` of 256 positives from
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
            g.indices.make_mut()[a..b].sort_unstable();
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
    let mut n_val = ((m as f64 * val_frac).round() as usize).min(cap).min(m);
    let mut n_test = ((m as f64 * test_frac).round() as usize)
        .min(cap)
        .min(m - n_val);
    // a tiny graph still gets one validation and one test edge (and keeps one for training)
    let (want_val, want_test) = (val_frac > 0.0 && cap > 0, test_frac > 0.0 && cap > 0);
    let mut notes = LinkSplitNotes {
        num_edges: m,
        ..LinkSplitNotes::default()
    };
    if m > want_val as usize + want_test as usize {
        if want_val && n_val == 0 {
            n_val = 1;
            notes.forced_val = true;
        }
        if want_test && n_test == 0 && n_val < m - 1 {
            n_test = 1;
            notes.forced_test = true;
        }
    }
    let mut rng = seed::rng(seed, Purpose::LinkSplit);
    for i in 0..n_val + n_test {
        let j = rng.random_range(i..m);
        edges.swap(i, j);
    }
    // out-degree in the full graph and the number of valid negatives (w != u, no arc u -> w)
    let out_deg = out_degrees(graph, directed);
    let valid_negatives = |u: u32| -> usize {
        let self_loop = has_arc(graph, u, u) as usize;
        n.saturating_sub(1 + out_deg[u as usize] as usize - self_loop)
    };
    let mut val_pos = edges[..n_val].to_vec();
    let mut test_pos = edges[n_val..n_val + n_test].to_vec();
    let mut train_edges = edges.split_off(n_val + n_test);
    drop(edges);
    // a held-out edge whose source has no valid negative cannot be ranked: back to training
    for pos in [&mut val_pos, &mut test_pos] {
        pos.retain(|&(u, v)| {
            let keep = valid_negatives(u) > 0;
            if !keep {
                train_edges.push((u, v));
                notes.unrankable += 1;
            }
            keep
        });
    }
    for &(u, _) in val_pos.iter().chain(&test_pos) {
        let k = valid_negatives(u);
        if k < num_neg {
            notes.few_negatives += 1;
        }
        notes.min_valid_negatives = Some(notes.min_valid_negatives.map_or(k, |m| m.min(k)));
    }
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
    let train_graph = training_graph(n, &train_edges, directed);

    // 4. negatives. Every candidate pair has a side (validation or test) from a hash of the
    // pair (both directions alike for undirected graphs), so the two sets cannot share a pair;
    // only a source whose valid candidates all lie on the other side draws from all of them.
    let truth = TrueEdges {
        graph,
        directed,
        held: &[],
    };
    let out_deg = |u: u32| out_deg[u as usize] as usize;
    let (val_neg, test_neg, shared) =
        draw_eval_negatives(&truth, &out_deg, &val_pos, &test_pos, num_neg, seed);
    notes.shared_val_test_negatives = shared;

    LinkSplit {
        train_graph,
        train_edges,
        val_pos,
        test_pos,
        val_neg: val_neg.into(),
        test_neg: test_neg.into(),
        num_neg,
        directed,
        notes,
        protocol: None,
    }
}

/// Out-degree of every node of the in-neighbour CSR `graph` (its degree when undirected).
fn out_degrees(graph: &Csr, directed: bool) -> Vec<u32> {
    if directed {
        let mut d = vec![0u32; graph.num_nodes()];
        for &u in &graph.indices {
            d[u as usize] += 1;
        }
        d
    } else {
        graph.degrees()
    }
}

/// The graph of the training edges `(u, v)` over `n` nodes (both directions when undirected).
fn training_graph(n: usize, train_edges: &[(u32, u32)], directed: bool) -> Csr {
    let cap_arcs = if directed {
        train_edges.len()
    } else {
        2 * train_edges.len()
    };
    let mut src = Vec::with_capacity(cap_arcs);
    let mut dst = Vec::with_capacity(cap_arcs);
    for &(u, v) in train_edges {
        src.push(u);
        dst.push(v);
        if !directed {
            src.push(v);
            dst.push(u);
        }
    }
    Csr::from_edges(n, &src, &dst)
}

/// Fixed evaluation negatives for a link split given with the graph (a split stored in the
/// on-disk format, `docs/graph-format.md`): `graph` is the **training** graph, the held-out
/// positives `val_pos` / `test_pos` are absent from it. The true edges are the arcs of `graph`
/// and the held-out pairs (in both directions for undirected graphs), so no negative is a true
/// edge of the whole graph (OGB's citation2 protocol). Returns `(val_neg, test_neg, notes)`
/// in [`LinkSplit`]'s layout (`num_neg` per positive, row-major); `notes` says what the draw
/// had to adapt (few valid negatives, shared validation/test pairs), with `num_edges` the
/// held-out pairs.
///
/// The draw is step 4 of [`link_split`]: the same rule (uniform among the valid destinations,
/// rejection sampling then the exact list, validation and test sides by a seeded hash of the
/// pair) and the same random streams ([`Purpose::ValNegatives`], [`Purpose::TestNegatives`],
/// chunks of 256 positives), so the negatives of the split [`link_split`] made, given back with
/// its training graph, are the same bytes. Memory: the outputs, the held-out pairs (sorted
/// `u64` keys) and, for directed graphs, an out-degree per node (`4 N` bytes); the graph is
/// only read (a mapped one stays mapped). Rows of `graph` must be sorted.
pub fn link_negatives(
    graph: &Csr,
    directed: bool,
    val_pos: &[(u32, u32)],
    test_pos: &[(u32, u32)],
    num_neg: usize,
    seed: u64,
) -> (Vec<u32>, Vec<u32>, LinkSplitNotes) {
    let n = graph.num_nodes();
    let mut held: Vec<u64> = val_pos
        .iter()
        .chain(test_pos)
        .map(|&(u, v)| {
            let (a, b) = pair_key(directed, u, v);
            (a as u64) << 32 | b as u64
        })
        .collect();
    held.par_sort_unstable();
    held.dedup();
    // out-degree in the whole graph: the training graph's plus the held-out pairs'
    let mut held_deg: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    for &k in &held {
        let (a, b) = ((k >> 32) as u32, k as u32);
        *held_deg.entry(a).or_default() += 1;
        if !directed && a != b {
            *held_deg.entry(b).or_default() += 1;
        }
    }
    let train_out: Option<Vec<u32>> = directed.then(|| {
        let mut d = vec![0u32; n];
        for &u in graph.indices.iter() {
            d[u as usize] += 1;
        }
        d
    });
    let out_deg = |u: u32| -> usize {
        let t = match &train_out {
            Some(d) => d[u as usize] as usize,
            None => (graph.indptr[u as usize + 1] - graph.indptr[u as usize]) as usize,
        };
        t + held_deg.get(&u).copied().unwrap_or(0) as usize
    };
    let truth = TrueEdges {
        graph,
        directed,
        held: &held,
    };
    let mut notes = LinkSplitNotes {
        num_edges: val_pos.len() + test_pos.len(),
        ..LinkSplitNotes::default()
    };
    for &(u, _) in val_pos.iter().chain(test_pos) {
        let k = n.saturating_sub(1 + out_deg(u));
        if k < num_neg {
            notes.few_negatives += 1;
        }
        notes.min_valid_negatives = Some(notes.min_valid_negatives.map_or(k, |m| m.min(k)));
    }
    let (val_neg, test_neg, shared) =
        draw_eval_negatives(&truth, &out_deg, val_pos, test_pos, num_neg, seed);
    notes.shared_val_test_negatives = shared;
    (val_neg, test_neg, notes)
}

/// The true edges negatives must avoid: the arcs of `graph` and the `held` pairs (sorted keys
/// `a << 32 | b` of [`pair_key`]).
struct TrueEdges<'a> {
    graph: &'a Csr,
    directed: bool,
    held: &'a [u64],
}

impl TrueEdges<'_> {
    /// Whether `(u, w)` is a true edge (`u -> w` for directed graphs, `{u, w}` otherwise).
    #[inline]
    fn contains(&self, u: u32, w: u32) -> bool {
        // an undirected graph is symmetric: row u holds w iff row w holds u, and row u is the
        // same for all the negatives of one positive (its pages stay hot)
        let arc = if self.directed {
            has_arc(self.graph, u, w)
        } else {
            self.graph.neighbors(u as usize).binary_search(&w).is_ok()
        };
        arc || (!self.held.is_empty() && {
            let (a, b) = pair_key(self.directed, u, w);
            self.held
                .binary_search(&((a as u64) << 32 | b as u64))
                .is_ok()
        })
    }
}

/// Validation and test negatives of step 4 of [`link_split`] (sides by a pair hash; streams
/// [`Purpose::ValNegatives`] / [`Purpose::TestNegatives`]); returns them and how many test
/// negative pairs are also validation pairs.
fn draw_eval_negatives(
    truth: &TrueEdges<'_>,
    out_deg: &(dyn Fn(u32) -> usize + Sync),
    val_pos: &[(u32, u32)],
    test_pos: &[(u32, u32)],
    num_neg: usize,
    seed: u64,
) -> (Vec<u32>, Vec<u32>, usize) {
    let directed = truth.directed;
    let side_key = seed::derive(seed, Purpose::TestNegatives) ^ 0x5a5a_5a5a_5a5a_5a5a;
    let val_side = Side {
        key: side_key,
        test: false,
        directed,
    };
    let test_side = Side {
        test: true,
        ..val_side
    };
    let val_neg = sample_negatives(
        truth,
        out_deg,
        val_pos,
        num_neg,
        seed::derive(seed, Purpose::ValNegatives),
        val_side,
    );
    let test_neg = sample_negatives(
        truth,
        out_deg,
        test_pos,
        num_neg,
        seed::derive(seed, Purpose::TestNegatives),
        test_side,
    );
    let shared = shared_negatives(&val_neg, val_pos, &test_neg, test_pos, num_neg, val_side);
    (val_neg, test_neg, shared)
}

/// How many test negative slots hold a pair (by [`pair_key`]) that is also a validation
/// negative pair. Each pair lies on one side; a validation negative off its side, or a test
/// negative off its side, exists only where a source had no valid candidate on its own side,
/// so only those few are collected: memory O(such fallbacks), not O(negatives).
fn shared_negatives(
    val_neg: &[u32],
    val_pos: &[(u32, u32)],
    test_neg: &[u32],
    test_pos: &[(u32, u32)],
    num_neg: usize,
    val_side: Side,
) -> usize {
    use std::collections::{HashMap, HashSet};
    if num_neg == 0 {
        return 0;
    }
    let directed = val_side.directed;
    fn pairs<'a>(
        pos: &'a [(u32, u32)],
        neg: &'a [u32],
        k: usize,
    ) -> impl Iterator<Item = (u32, u32)> + 'a {
        pos.iter()
            .zip(neg.chunks(k))
            .flat_map(|(&(u, _), row)| row.iter().map(move |&w| (u, w)))
    }
    // validation negatives on the test side (fallbacks)
    let val_off: HashSet<(u32, u32)> = pairs(val_pos, val_neg, num_neg)
        .filter(|&(u, w)| !val_side.owns(u, w))
        .map(|(u, w)| pair_key(directed, u, w))
        .collect();
    // test negatives on the validation side (fallbacks), with their slot counts
    let mut test_off: HashMap<(u32, u32), usize> = HashMap::new();
    let mut shared = 0usize;
    for (u, w) in pairs(test_pos, test_neg, num_neg) {
        if val_side.owns(u, w) {
            *test_off.entry(pair_key(directed, u, w)).or_default() += 1;
        } else if val_off.contains(&pair_key(directed, u, w)) {
            shared += 1;
        }
    }
    if !test_off.is_empty() {
        let mut seen: HashSet<(u32, u32)> = HashSet::new();
        for (u, w) in pairs(val_pos, val_neg, num_neg) {
            let k = pair_key(directed, u, w);
            if test_off.contains_key(&k) {
                seen.insert(k);
            }
        }
        shared += seen.iter().map(|k| test_off[k]).sum::<usize>();
    }
    shared
}

/// Which half of the candidate pairs a negative sampler draws from (see [`link_split`] step 4).
#[derive(Clone, Copy)]
struct Side {
    key: u64,
    test: bool,
    directed: bool,
}

impl Side {
    /// Whether pair `(u, w)` is on this side: a hash of its [`pair_key`].
    #[inline]
    fn owns(&self, u: u32, w: u32) -> bool {
        let (a, b) = pair_key(self.directed, u, w);
        let h = seed::splitmix64(self.key ^ ((a as u64) << 32 | b as u64));
        (h & 1 == 1) == self.test
    }
}

/// The key of pair `(u, w)`: itself for directed graphs, `(min, max)` for undirected ones.
#[inline]
fn pair_key(directed: bool, u: u32, w: u32) -> (u32, u32) {
    if directed {
        (u, w)
    } else {
        (u.min(w), u.max(w))
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

/// Negatives of every positive (row-major, `num_neg` per positive), drawn among the valid
/// candidates on `side` (all valid candidates where the source has none on its side).
fn sample_negatives(
    truth: &TrueEdges<'_>,
    out_deg: &(dyn Fn(u32) -> usize + Sync),
    pos: &[(u32, u32)],
    num_neg: usize,
    stream_seed: u64,
    side: Side,
) -> Vec<u32> {
    let n = truth.graph.num_nodes();
    let mut out = vec![0u32; pos.len() * num_neg];
    if num_neg == 0 || pos.is_empty() {
        return out;
    }
    let ok = |u: u32, w: u32| w != u && !truth.contains(u, w);
    out.par_chunks_mut(NEG_CHUNK * num_neg)
        .enumerate()
        .for_each(|(chunk, buf)| {
            let mut rng = seed::chunk_rng(stream_seed, chunk as u64);
            let first = chunk * NEG_CHUNK;
            for (k, row) in buf.chunks_mut(num_neg).enumerate() {
                let u = pos[first + k].0;
                // valid candidates: all nodes but u and u's out-neighbours (about half of them
                // on this side)
                let valid = n.saturating_sub(1 + out_deg(u));
                // the exact candidate list, built only when rejection sampling fails or the
                // candidates are rare (fewer than 1/16 of the nodes)
                let mut list: Option<Vec<u32>> = None;
                for slot in row.iter_mut() {
                    let mut w = None;
                    if list.is_none() && valid * 16 >= n {
                        for _ in 0..NEG_MAX_TRIES {
                            let c = rng.random_range(0..n as u32);
                            if ok(u, c) && side.owns(u, c) {
                                w = Some(c);
                                break;
                            }
                        }
                    }
                    let w = match w {
                        Some(w) => w,
                        None => {
                            let cands = list.get_or_insert_with(|| {
                                let all: Vec<u32> = (0..n as u32).filter(|&c| ok(u, c)).collect();
                                let mine: Vec<u32> =
                                    all.iter().copied().filter(|&c| side.owns(u, c)).collect();
                                if mine.is_empty() {
                                    all
                                } else {
                                    mine
                                }
                            });
                            // callers drop positives without any valid negative; if one got
                            // here anyway, the only honest value is u itself (rank against
                            // nothing), never a true edge
                            if cands.is_empty() {
                                u
                            } else {
                                cands[rng.random_range(0..cands.len())]
                            }
                        }
                    };
                    *slot = w;
                }
            }
        });
    out
}
