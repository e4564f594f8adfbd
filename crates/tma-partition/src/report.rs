//! Partition quality: sizes, edges kept, and "data uniformity" (how far each part's label and
//! degree distributions are from the whole graph's).

use std::fmt;

use rayon::prelude::*;
use serde::Serialize;
use tma_graph::{Csr, CsrRef};

use crate::Partition;

/// Number of log2 degree bins: bin 0 holds degree 0, bin `b >= 1` holds degrees in
/// `[2^(b-1), 2^b)`; 33 bins cover every `u32` degree.
pub const NUM_DEGREE_BINS: usize = 33;

/// Log2 bin of a degree: `0` for 0, else `1 + floor(log2(degree))` (1 -> 1, 2..=3 -> 2,
/// 4..=7 -> 3, ...). Always `< NUM_DEGREE_BINS`.
#[inline]
pub fn log2_degree_bin(degree: u32) -> usize {
    (32 - degree.leading_zeros()) as usize
}

/// Jensen–Shannon divergence, base 2, between two histograms (counts or probabilities; each is
/// normalized by its own sum; a shorter slice is padded with zeros). The result is in `[0, 1]`:
/// 0 for identical distributions, 1 for disjoint supports.
///
/// `JS(P, Q) = ½ KL(P ‖ M) + ½ KL(Q ‖ M)`, `M = ½ (P + Q)`, `KL` in bits, `0 log 0 = 0`.
/// If one histogram has zero total mass the divergence is 1 (0 if both do).
///
/// # Panics
/// If an entry is negative or not finite.
pub fn js_divergence(p: &[f64], q: &[f64]) -> f64 {
    assert!(
        p.iter().chain(q).all(|x| x.is_finite() && *x >= 0.0),
        "histogram entries must be finite and non-negative"
    );
    let (sp, sq): (f64, f64) = (p.iter().sum(), q.iter().sum());
    match (sp > 0.0, sq > 0.0) {
        (false, false) => return 0.0,
        (true, false) | (false, true) => return 1.0,
        _ => {}
    }
    let len = p.len().max(q.len());
    let mut js = 0.0;
    for i in 0..len {
        let a = p.get(i).copied().unwrap_or(0.0) / sp;
        let b = q.get(i).copied().unwrap_or(0.0) / sq;
        let m = 0.5 * (a + b);
        if a > 0.0 {
            js += 0.5 * a * (a / m).log2();
        }
        if b > 0.0 {
            js += 0.5 * b * (b / m).log2();
        }
    }
    js.clamp(0.0, 1.0)
}

fn js_counts(p: &[u64], q: &[u64]) -> f64 {
    let p: Vec<f64> = p.iter().map(|&x| x as f64).collect();
    let q: Vec<f64> = q.iter().map(|&x| x as f64).collect();
    js_divergence(&p, &q)
}

/// Quality statistics of one part.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartStats {
    /// Part id.
    pub part: usize,
    /// `true` for the `drop_parts` parts given to no trainer (ids `>= num_parts`).
    pub dropped: bool,
    /// Nodes in the part.
    pub num_nodes: usize,
    /// Arcs of the node-induced subgraph (both endpoints in the part).
    pub num_edges: usize,
    /// `num_edges / graph.num_edges()` (0 for an edgeless graph).
    pub edge_fraction_kept: f64,
    /// JS divergence (base 2, `[0, 1]`) between the class histogram of the part's labelled nodes
    /// and that of all labelled nodes of the graph. `None` without labels or when the part holds
    /// no labelled node.
    pub label_divergence: Option<f64>,
    /// JS divergence (base 2, `[0, 1]`) between the log2-binned ([`log2_degree_bin`]) histogram of
    /// the part's nodes' in-degrees **inside the part's induced subgraph** and the histogram of
    /// all nodes' in-degrees **in the whole graph**. This measures how well the trainer's local
    /// graph resembles the full one, including the degree loss from dropped cross-part arcs
    /// (random parts of `M` shift degrees down by about `log2 M` bins; the value is comparable
    /// between methods at equal `M`).
    pub degree_divergence: f64,
    /// JS divergence (base 2, `[0, 1]`) between the log2-binned histogram of the part's nodes'
    /// in-degrees **in the whole graph** and that of all nodes: whether the part *selects* a
    /// degree-biased set of nodes (0 for a uniform random sample, whatever `M` is).
    pub global_degree_divergence: f64,
    /// `[NUM_DEGREE_BINS]`: the part's log2-binned in-part degree histogram (node counts).
    pub degree_histogram: Vec<u64>,
    /// `[num_classes]`: labelled nodes of the part per class (empty without labels).
    pub label_histogram: Vec<u64>,
}

/// Quality report of a partition: per-part stats and totals. Serialize it to JSON with serde, or
/// print [`PartitionReport::to_table`] / `Display`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PartitionReport {
    /// The method's display name (`random`, `super`, `metis`).
    pub method: String,
    /// `M`.
    pub num_parts: usize,
    /// `d`.
    pub drop_parts: usize,
    /// The partition seed.
    pub seed: u64,
    /// [`Partition::hash_hex`] of the assignment.
    pub assignment_sha256: String,
    /// Nodes of the whole graph.
    pub num_nodes: usize,
    /// Arcs of the whole graph.
    pub num_edges: usize,
    /// Every assigned part, `0..M+d` (kept parts first).
    pub parts: Vec<PartStats>,
    /// Fraction of the graph's arcs that trainers see: kept parts' arcs / all arcs.
    pub total_edge_fraction_kept: f64,
    /// Fraction of arcs inside any part, kept or dropped (1 − cut fraction).
    pub assigned_edge_fraction: f64,
    /// Max over kept parts of `num_nodes / mean num_nodes` (1 = perfectly balanced).
    pub node_imbalance: f64,
    /// Max over kept parts of `num_edges / mean num_edges` (1 = perfectly balanced; 0 if no arc
    /// survives).
    pub edge_imbalance: f64,
    /// Mean of `label_divergence` over kept parts that have one.
    pub mean_label_divergence: Option<f64>,
    /// Mean of `degree_divergence` over kept parts.
    pub mean_degree_divergence: f64,
    /// Mean of `global_degree_divergence` over kept parts.
    pub mean_global_degree_divergence: f64,
    /// `[NUM_DEGREE_BINS]`: log2-binned in-degree histogram of the whole graph.
    pub graph_degree_histogram: Vec<u64>,
    /// `[num_classes]`: labelled nodes of the whole graph per class (empty without labels).
    pub graph_label_histogram: Vec<u64>,
    /// Clusters asked of METIS (`M + d` parts for `metis`, `K` for `super`; 0 for `random`).
    pub clusters_requested: usize,
    /// Non-empty clusters METIS returned, before any repair (0 for `random`).
    pub clusters_obtained: usize,
    /// The clustering that ran (`metis` or `lpa`; `None` for `random`).
    pub clustering: Option<crate::Clustering>,
    /// What label propagation did, when it ran (cluster size cap, passes, clusters).
    pub lpa: Option<crate::LpaStats>,
    /// One line saying which clustering ran and what it gave ([`crate::PartitionNotes::clustering_line`]).
    pub clustering_line: Option<String>,
    /// Under a memory budget, which clustering was chosen and why
    /// ([`crate::PartitionNotes::clustering_choice_line`]), e.g. `super-clustering auto -> lpa:
    /// METIS needs ~1.7 GiB, over --memory-budget 1.0 GiB (label propagation ~23 MiB)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clustering_choice: Option<String>,
    /// Parts without a node (possible with `random` on few nodes; never with `metis`/`super`,
    /// whose empty clusters are filled).
    pub empty_parts: Vec<usize>,
    /// One line per thing the partition did not deliver as asked (empty parts, clusters
    /// METIS did not return, a clamped K).
    pub warnings: Vec<String>,
}

/// Per-part accumulators of one rayon fold task.
#[derive(Clone)]
struct Acc {
    nodes: Vec<u64>,
    edges: Vec<u64>,
    deg_hist: Vec<u64>,   // [parts * NUM_DEGREE_BINS]
    gdeg_hist: Vec<u64>,  // [parts * NUM_DEGREE_BINS], whole-graph degrees
    label_hist: Vec<u64>, // [parts * num_classes]
    graph_deg_hist: Vec<u64>,
}

impl Acc {
    fn new(parts: usize, classes: usize) -> Acc {
        Acc {
            nodes: vec![0; parts],
            edges: vec![0; parts],
            deg_hist: vec![0; parts * NUM_DEGREE_BINS],
            gdeg_hist: vec![0; parts * NUM_DEGREE_BINS],
            label_hist: vec![0; parts * classes],
            graph_deg_hist: vec![0; NUM_DEGREE_BINS],
        }
    }

    fn merge(mut self, o: Acc) -> Acc {
        for (a, b) in [
            (&mut self.nodes, &o.nodes),
            (&mut self.edges, &o.edges),
            (&mut self.deg_hist, &o.deg_hist),
            (&mut self.gdeg_hist, &o.gdeg_hist),
            (&mut self.label_hist, &o.label_hist),
            (&mut self.graph_deg_hist, &o.graph_deg_hist),
        ] {
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        }
        self
    }
}

/// Measure `partition` on `graph`. `labels`, if given, is `(class of every node, num_classes)`:
/// `labels.0.len() == num_nodes`, a negative class means unlabelled. One parallel (rayon) pass
/// over all arcs.
///
/// # Panics
/// If the partition is for a graph of another size, if `labels.0.len() != num_nodes`, or if a
/// label is `>= num_classes`.
pub fn partition_report(
    graph: &Csr,
    partition: &Partition,
    labels: Option<(&[i32], usize)>,
) -> PartitionReport {
    partition_report_ref(graph.view(), partition, labels)
}

/// One parallel pass over the nodes: each part's nodes, kept arcs, degree histograms and label
/// counts (`a`: the part of every node; `labels`: each node's class, `-1` = none).
fn count(
    graph: CsrRef<'_>,
    a: &[u32],
    parts: usize,
    classes: usize,
    labels: Option<(&[i32], usize)>,
) -> Acc {
    (0..graph.num_nodes())
        .into_par_iter()
        .with_min_len(4096)
        .fold(
            || Acc::new(parts, classes),
            |mut acc, v| {
                let p = a[v];
                let pu = p as usize;
                let nb = graph.neighbors(v);
                let inside = nb.iter().filter(|&&u| a[u as usize] == p).count();
                acc.nodes[pu] += 1;
                acc.edges[pu] += inside as u64;
                acc.deg_hist[pu * NUM_DEGREE_BINS + log2_degree_bin(inside as u32)] += 1;
                let gbin = log2_degree_bin(nb.len() as u32);
                acc.graph_deg_hist[gbin] += 1;
                acc.gdeg_hist[pu * NUM_DEGREE_BINS + gbin] += 1;
                if let Some((l, _)) = labels {
                    let c = l[v];
                    if c >= 0 {
                        assert!((c as usize) < classes, "label {c} >= num_classes {classes}");
                        acc.label_hist[pu * classes + c as usize] += 1;
                    }
                }
                acc
            },
        )
        .reduce(|| Acc::new(parts, classes), Acc::merge)
}

/// [`partition_report`] over a borrowed CSR, e.g. a memory-mapped one; the same report.
///
/// # Panics
/// As [`partition_report`].
pub fn partition_report_ref(
    graph: CsrRef<'_>,
    partition: &Partition,
    labels: Option<(&[i32], usize)>,
) -> PartitionReport {
    let n = graph.num_nodes();
    assert_eq!(
        n,
        partition.assignment.len(),
        "partition is for a graph of a different size"
    );
    let parts = partition.num_assigned_parts;
    let classes = labels.map_or(0, |(l, c)| {
        assert_eq!(l.len(), n, "one label per node expected");
        c
    });
    let acc = count(graph, &partition.assignment, parts, classes, labels);

    let mut graph_label_histogram = vec![0u64; classes];
    if classes > 0 {
        for row in acc.label_hist.chunks_exact(classes) {
            graph_label_histogram
                .iter_mut()
                .zip(row)
                .for_each(|(g, &x)| *g += x);
        }
    }
    let total_edges = graph.num_edges();
    let frac = |e: u64| {
        if total_edges == 0 {
            0.0
        } else {
            e as f64 / total_edges as f64
        }
    };
    let stats: Vec<PartStats> = (0..parts)
        .map(|p| {
            let deg_hist = acc.deg_hist[p * NUM_DEGREE_BINS..(p + 1) * NUM_DEGREE_BINS].to_vec();
            let label_hist = acc.label_hist[p * classes..(p + 1) * classes].to_vec();
            let label_divergence = if labels.is_some() && label_hist.iter().any(|&x| x > 0) {
                Some(js_counts(&label_hist, &graph_label_histogram))
            } else {
                None
            };
            PartStats {
                part: p,
                dropped: p >= partition.config.num_parts,
                num_nodes: acc.nodes[p] as usize,
                num_edges: acc.edges[p] as usize,
                edge_fraction_kept: frac(acc.edges[p]),
                label_divergence,
                degree_divergence: js_counts(&deg_hist, &acc.graph_deg_hist),
                global_degree_divergence: js_counts(
                    &acc.gdeg_hist[p * NUM_DEGREE_BINS..(p + 1) * NUM_DEGREE_BINS],
                    &acc.graph_deg_hist,
                ),
                degree_histogram: deg_hist,
                label_histogram: label_hist,
            }
        })
        .collect();

    let kept: Vec<&PartStats> = stats.iter().filter(|s| !s.dropped).collect();
    let k = kept.len().max(1) as f64;
    let max_over_mean = |f: &dyn Fn(&PartStats) -> f64| {
        let mean = kept.iter().map(|s| f(s)).sum::<f64>() / k;
        if mean == 0.0 {
            0.0
        } else {
            kept.iter().map(|s| f(s)).fold(0.0, f64::max) / mean
        }
    };
    let label_divs: Vec<f64> = kept.iter().filter_map(|s| s.label_divergence).collect();
    let empty: Vec<usize> = stats
        .iter()
        .filter(|s| s.num_nodes == 0)
        .map(|s| s.part)
        .collect();
    PartitionReport {
        method: partition.config.method.to_string(),
        num_parts: partition.config.num_parts,
        drop_parts: partition.config.drop_parts,
        seed: partition.config.seed,
        assignment_sha256: partition.hash_hex(),
        num_nodes: n,
        num_edges: total_edges,
        total_edge_fraction_kept: frac(kept.iter().map(|s| s.num_edges as u64).sum()),
        assigned_edge_fraction: frac(stats.iter().map(|s| s.num_edges as u64).sum()),
        node_imbalance: max_over_mean(&|s| s.num_nodes as f64),
        edge_imbalance: max_over_mean(&|s| s.num_edges as f64),
        mean_label_divergence: if label_divs.is_empty() {
            None
        } else {
            Some(label_divs.iter().sum::<f64>() / label_divs.len() as f64)
        },
        mean_degree_divergence: kept.iter().map(|s| s.degree_divergence).sum::<f64>() / k,
        mean_global_degree_divergence: kept.iter().map(|s| s.global_degree_divergence).sum::<f64>()
            / k,
        graph_degree_histogram: acc.graph_deg_hist,
        graph_label_histogram,
        clusters_requested: partition.notes.clusters_requested,
        clusters_obtained: partition.notes.clusters_obtained,
        clustering: partition.notes.clustering,
        lpa: partition.notes.lpa.clone(),
        clustering_line: partition
            .notes
            .clustering_line(partition.config.clustering, total_edges),
        clustering_choice: partition
            .notes
            .clustering_choice_line(partition.config.clustering),
        warnings: {
            let mut w = partition.notes.warnings(partition.config.method, n);
            if !empty.is_empty() {
                w.push(format!(
                    "{} of {} parts got no node (part{} {}; {} nodes dealt at random): {} no data",
                    empty.len(),
                    parts,
                    if empty.len() == 1 { "" } else { "s" },
                    empty
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    n,
                    if empty.len() == 1 {
                        "that trainer has"
                    } else {
                        "those trainers have"
                    }
                ));
            }
            w
        },
        empty_parts: empty,
        parts: stats,
    }
}

impl PartitionReport {
    /// A human-readable table: a header, one aligned line per part, and a totals line, e.g.
    ///
    /// ```text
    /// partition: random  M=4 d=0 seed=0  nodes=10000 edges=40000  sha256=1f2e…
    /// part  role           nodes        edges  edge_frac  label_js  degree_js gdegree_js
    ///    0  kept             691          724    0.06859    0.0039     0.3812     0.0021
    /// ...
    /// kept  total           2708         2660    0.25199    0.0026     0.4047     0.0030   node_imb=1.021 edge_imb=1.089
    /// ```
    pub fn to_table(&self) -> String {
        use std::fmt::Write;
        let opt = |x: Option<f64>| x.map_or_else(|| "-".to_string(), |v| format!("{v:.4}"));
        let mut s = String::new();
        let _ = writeln!(
            s,
            "partition: {}  M={} d={} seed={}  nodes={} edges={}  sha256={}",
            self.method,
            self.num_parts,
            self.drop_parts,
            self.seed,
            self.num_nodes,
            self.num_edges,
            &self.assignment_sha256[..self.assignment_sha256.len().min(16)]
        );
        let _ = writeln!(
            s,
            "{:>4}  {:<7} {:>12} {:>12} {:>10} {:>9} {:>10} {:>10}",
            "part", "role", "nodes", "edges", "edge_frac", "label_js", "degree_js", "gdegree_js"
        );
        for p in &self.parts {
            let _ = writeln!(
                s,
                "{:>4}  {:<7} {:>12} {:>12} {:>10.5} {:>9} {:>10.4} {:>10.4}",
                p.part,
                if p.dropped { "dropped" } else { "kept" },
                p.num_nodes,
                p.num_edges,
                p.edge_fraction_kept,
                opt(p.label_divergence),
                p.degree_divergence,
                p.global_degree_divergence
            );
        }
        let kept = self.parts.iter().filter(|p| !p.dropped);
        let (nodes, edges) = kept.fold((0, 0), |(n, e), p| (n + p.num_nodes, e + p.num_edges));
        let _ = writeln!(
            s,
            "{:>4}  {:<7} {:>12} {:>12} {:>10.5} {:>9} {:>10.4} {:>10.4}   node_imb={:.3} edge_imb={:.3}",
            "kept",
            "total",
            nodes,
            edges,
            self.total_edge_fraction_kept,
            opt(self.mean_label_divergence),
            self.mean_degree_divergence,
            self.mean_global_degree_divergence,
            self.node_imbalance,
            self.edge_imbalance
        );
        if self.clusters_requested > 0 {
            let _ = writeln!(
                s,
                "clusters: {} requested, {} obtained",
                self.clusters_requested, self.clusters_obtained
            );
        }
        if let Some(line) = &self.clustering_line {
            let _ = writeln!(s, "{line}");
        }
        s
    }

    /// Pretty JSON of the whole report.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("report serializes")
    }
}

impl fmt::Display for PartitionReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_table())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{partition, PartitionConfig, PartitionMethod};

    #[test]
    fn js_identical_zero_disjoint_one() {
        assert_eq!(js_divergence(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]), 0.0);
        assert!((js_divergence(&[1.0, 0.0], &[0.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((js_divergence(&[1.0], &[0.0, 0.0, 3.0]) - 1.0).abs() < 1e-12);
        // P = (1/2, 1/2), Q = (1, 0): M = (3/4, 1/4);
        // JS = 1/2 [1/2 log2(2/3) + 1/2 log2(2)] + 1/2 [log2(4/3)] = 0.311278...
        let expect = 0.5 * (0.5 * (2.0f64 / 3.0).log2() + 0.5) + 0.5 * (4.0f64 / 3.0).log2();
        assert!((js_divergence(&[1.0, 1.0], &[1.0, 0.0]) - expect).abs() < 1e-12);
        assert!((expect - 0.311_278).abs() < 1e-6);
        assert_eq!(js_divergence(&[], &[]), 0.0);
        assert_eq!(js_divergence(&[0.0], &[1.0]), 1.0);
    }

    #[test]
    fn degree_bins() {
        let bins: Vec<usize> = [0u32, 1, 2, 3, 4, 7, 8, u32::MAX]
            .iter()
            .map(|&d| log2_degree_bin(d))
            .collect();
        assert_eq!(bins, vec![0, 1, 2, 2, 3, 3, 4, 32]);
    }

    #[test]
    fn report_exact_on_small_graph() {
        // undirected path 0-1-2-3 (6 arcs); parts {0,1} kept, {2,3} kept, M=2
        let g = Csr::from_edges(4, &[0, 1, 1, 2, 2, 3], &[1, 0, 2, 1, 3, 2]);
        let p = Partition {
            config: PartitionConfig {
                method: PartitionMethod::Random,
                clustering: crate::Clustering::Auto,
                num_parts: 2,
                drop_parts: 0,
                seed: 0,
            },
            assignment: vec![0, 0, 1, 1],
            num_assigned_parts: 2,
            notes: Default::default(),
        };
        let labels = [0, 1, 0, 1];
        let r = partition_report(&g, &p, Some((&labels, 2)));
        assert_eq!(r.parts.len(), 2);
        assert_eq!(r.parts[0].num_nodes, 2);
        assert_eq!(r.parts[0].num_edges, 2);
        assert!((r.parts[0].edge_fraction_kept - 2.0 / 6.0).abs() < 1e-12);
        assert!((r.total_edge_fraction_kept - 4.0 / 6.0).abs() < 1e-12);
        assert_eq!(r.parts[0].label_divergence, Some(0.0));
        assert_eq!(r.mean_label_divergence, Some(0.0));
        // whole-graph degrees 1,2,2,1 -> bins {1:2, 2:2}; part degrees 1,1 -> bins {1:2}
        assert_eq!(&r.graph_degree_histogram[..3], &[0, 2, 2]);
        assert_eq!(&r.parts[0].degree_histogram[..3], &[0, 2, 0]);
        let expect = js_divergence(&[0.0, 1.0, 0.0], &[0.0, 0.5, 0.5]);
        assert!((r.parts[0].degree_divergence - expect).abs() < 1e-12);
        // part 0's whole-graph degrees 1, 2 -> same shape as the graph's -> 0
        assert_eq!(r.parts[0].global_degree_divergence, 0.0);
        assert_eq!(r.node_imbalance, 1.0);
        assert_eq!(r.edge_imbalance, 1.0);
        // labels all in one class per part -> disjoint from... check a skewed labelling
        let skew = [0, 0, 1, 1];
        let r2 = partition_report(&g, &p, Some((&skew, 2)));
        let expect = js_divergence(&[1.0, 0.0], &[0.5, 0.5]);
        assert!((r2.parts[1].label_divergence.unwrap() - expect).abs() < 1e-12);
        let table = r2.to_table();
        assert_eq!(table.lines().count(), 2 + 2 + 1);
        let json = r2.to_json();
        assert!(json.contains("\"total_edge_fraction_kept\""));
    }

    #[test]
    fn random_parts_look_like_the_graph_labels() {
        let g = crate::method::tests::test_graph(5000);
        let labels: Vec<i32> = (0..5000)
            .map(|v| if v % 10 == 0 { -1 } else { v % 7 })
            .collect();
        let p = partition(
            &g,
            &PartitionConfig {
                method: PartitionMethod::Random,
                clustering: crate::Clustering::Auto,
                num_parts: 4,
                drop_parts: 1,
                seed: 11,
            },
        )
        .unwrap();
        let r = partition_report(&g, &p, Some((&labels, 7)));
        assert_eq!(r.parts.len(), 5);
        assert!(r.parts[4].dropped && !r.parts[3].dropped);
        assert!(r.mean_label_divergence.unwrap() < 0.01);
        let sum: usize = r.parts.iter().map(|s| s.num_nodes).sum();
        assert_eq!(sum, 5000);
        assert!(r.total_edge_fraction_kept < r.assigned_edge_fraction);
    }
}
