//! Classic link-prediction heuristics measured on a graph's own edges: how well the degree
//! product (preferential attachment) ranks an edge against uniform non-edges, and how well
//! common neighbours do. `tma_train`'s `--featureless auto` compares the two to choose a
//! featureless graph's input (docs/decisions/0035-degree-input-where-degree-ranks-links.md).

use crate::seed::{self, Purpose};
use crate::Csr;
use rand::Rng;

/// MRR of two heuristics over sampled edges of a graph ([`link_heuristics`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkHeuristics {
    /// MRR of preferential attachment, `(deg(u) - 1) * (deg(v) - 1)` for the edge and
    /// `(deg(u) - 1) * deg(c)` for a negative `c` (the edge held out of both degrees).
    pub preferential_attachment: f64,
    /// MRR of common neighbours, `|N(u) ∩ N(v)|`, the edge's other end left out of `N(u)` for
    /// the negatives.
    pub common_neighbours: f64,
    /// Edges ranked (0 for a graph without edges).
    pub pairs: usize,
    /// Negatives each edge is ranked against.
    pub negatives: usize,
}

impl LinkHeuristics {
    /// `preferential_attachment / common_neighbours`: about 1 or more where the degrees rank a
    /// graph's edges as well as its neighbourhood overlap does; infinite when common
    /// neighbours rank nothing (MRR 0), NaN without edges.
    pub fn degree_to_overlap(&self) -> f64 {
        self.preferential_attachment / self.common_neighbours
    }
}

/// Ranks `pairs` uniformly drawn edges `u -> v` of `graph` (arcs, with repeats; a row of an
/// undirected graph lists each edge at both ends) each against `negatives` uniform nodes `c`
/// (not `u`, not a neighbour of `u`; up to 8 draws each, else the last draw is kept), as if the
/// edge were held out, by preferential attachment and by common neighbours (see
/// [`LinkHeuristics`]). The rank is `1 + #(above) + #(tied) / 2` (the mean of the optimistic and
/// pessimistic ranks); the MRR is the mean of `1 / rank`. Rows must be sorted (binary search).
/// Seeded by `seed` ([`Purpose::LinkHeuristics`]): the same graph and seed give the same
/// values. Cost: `pairs * negatives` row intersections, each `O(min(d) log max(d))`; no
/// memory beyond the result.
pub fn link_heuristics(graph: &Csr, pairs: usize, negatives: usize, seed: u64) -> LinkHeuristics {
    let n = graph.num_nodes();
    let m = graph.num_edges();
    if m == 0 || n < 2 || pairs == 0 || negatives == 0 {
        return LinkHeuristics {
            preferential_attachment: f64::NAN,
            common_neighbours: f64::NAN,
            pairs: 0,
            negatives,
        };
    }
    let mut rng = seed::rng(seed, Purpose::LinkHeuristics);
    let indptr: &[u64] = &graph.indptr;
    let (mut pa_sum, mut cn_sum, mut ranked) = (0.0f64, 0.0f64, 0usize);
    let mut negs = Vec::with_capacity(negatives);
    for _ in 0..pairs {
        let arc = rng.random_range(0..m as u64);
        // the row holding the arc: the last row whose start is <= arc
        let v = indptr.partition_point(|&p| p <= arc) - 1;
        let u = graph.indices[arc as usize] as usize;
        if u == v {
            continue;
        }
        let nu = graph.neighbors(u);
        let du = nu.len() as f64 - 1.0;
        let pa_pos = du * (graph.neighbors(v).len() as f64 - 1.0);
        let cn_pos = common(nu, graph.neighbors(v), None) as f64;
        negs.clear();
        for _ in 0..negatives {
            let mut c = rng.random_range(0..n);
            for _ in 0..8 {
                if c != u && nu.binary_search(&(c as u32)).is_err() {
                    break;
                }
                c = rng.random_range(0..n);
            }
            negs.push(c);
        }
        let (mut pa_rank, mut cn_rank) = (1.0f64, 1.0f64);
        for &c in &negs {
            let nc = graph.neighbors(c);
            pa_rank += above(du * nc.len() as f64, pa_pos);
            cn_rank += above(common(nu, nc, Some(v as u32)) as f64, cn_pos);
        }
        pa_sum += 1.0 / pa_rank;
        cn_sum += 1.0 / cn_rank;
        ranked += 1;
    }
    let k = ranked.max(1) as f64;
    LinkHeuristics {
        preferential_attachment: if ranked == 0 { f64::NAN } else { pa_sum / k },
        common_neighbours: if ranked == 0 { f64::NAN } else { cn_sum / k },
        pairs: ranked,
        negatives,
    }
}

/// What a negative scoring `neg` adds to a positive's rank: 1 above it, 1/2 tied, else 0.
fn above(neg: f64, pos: f64) -> f64 {
    if neg > pos {
        1.0
    } else if neg == pos {
        0.5
    } else {
        0.0
    }
}

/// `|a ∩ b|` of two sorted rows, `skip` left out: each id of the shorter row searched in the
/// longer one.
fn common(a: &[u32], b: &[u32], skip: Option<u32>) -> usize {
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    short
        .iter()
        .filter(|&&w| Some(w) != skip && long.binary_search(&w).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An undirected graph of `n` nodes from edges (both directions).
    fn undirected(n: usize, edges: &[(u32, u32)]) -> Csr {
        let (mut s, mut d) = (Vec::new(), Vec::new());
        for &(a, b) in edges {
            s.extend([a, b]);
            d.extend([b, a]);
        }
        Csr::from_edges(n, &s, &d)
    }

    #[test]
    fn common_counts_the_shared_ids_but_the_skipped_one() {
        assert_eq!(common(&[1, 3, 5, 7], &[3, 4, 5], None), 2);
        assert_eq!(common(&[1, 3, 5, 7], &[3, 4, 5], Some(5)), 1);
        assert_eq!(common(&[], &[3], None), 0);
    }

    #[test]
    fn disjoint_cliques_are_ranked_by_common_neighbours_and_a_star_by_degree() {
        // 10 cliques of 5: every edge's ends share 3 neighbours and a node of another clique
        // shares none, so common neighbours rank every edge first (MRR 1); all degrees are
        // equal, so preferential attachment ties everything
        let mut edges = Vec::new();
        for c in 0..10u32 {
            for i in 0..5 {
                for j in i + 1..5 {
                    edges.push((c * 5 + i, c * 5 + j));
                }
            }
        }
        let g = undirected(50, &edges);
        let h = link_heuristics(&g, 200, 20, 7);
        assert_eq!(h.pairs, 200);
        assert_eq!(h.common_neighbours, 1.0);
        // a negative is never the node itself or a neighbour: the other 45 nodes, degree 4
        // each, tie with the edge's (4 - 1) * (4 - 1) = 9 < 3 * 4 = 12: every negative above,
        // rank 21
        assert!((h.preferential_attachment - 1.0 / 21.0).abs() < 1e-12);
        assert!(h.degree_to_overlap() < 0.1);

        // bipartite: 200 nodes of degree 2, each joined to two of 4 hubs of skewed degree
        // (hub 0 gets 120 first joins): the two ends of an edge never share a neighbour,
        // while a negative shares a hub with the node, so common neighbours rank every edge
        // low; a hub's degree ranks its edges high
        let mut edges = Vec::new();
        for i in 0..200u32 {
            let a = match i {
                0..120 => 0,
                120..170 => 1,
                170..190 => 2,
                _ => 3,
            };
            edges.push((4 + i, a));
            edges.push((4 + i, (a + 1) % 4));
        }
        let g = undirected(204, &edges);
        let h = link_heuristics(&g, 300, 20, 7);
        assert_eq!(h.pairs, 300);
        assert!(
            h.preferential_attachment > 2.0 * h.common_neighbours,
            "{h:?}"
        );
        assert!(h.degree_to_overlap() > 2.0);
    }

    #[test]
    fn the_same_seed_gives_the_same_values_and_an_edgeless_graph_none() {
        let edges: Vec<(u32, u32)> = (0..99).map(|v| (v, v + 1)).collect();
        let g = undirected(100, &edges);
        assert_eq!(
            link_heuristics(&g, 50, 10, 3),
            link_heuristics(&g, 50, 10, 3)
        );
        let empty = Csr::from_edges(5, &[], &[]);
        let h = link_heuristics(&empty, 50, 10, 3);
        assert_eq!(h.pairs, 0);
        assert!(h.preferential_attachment.is_nan() && h.degree_to_overlap().is_nan());
    }
}
