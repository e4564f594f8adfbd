//! Node and link split invariants.

use std::collections::HashSet;

use tma_graph::{generate_sbm, link_split, random_node_split, Csr, Labels, SbmConfig};

fn small_graph() -> (Csr, bool) {
    let ds = generate_sbm(&SbmConfig {
        num_nodes: 2000,
        avg_degree: 10.0,
        feature_dim: 4,
        seed: 3,
        ..SbmConfig::default()
    });
    (ds.graph, false)
}

fn has_arc(g: &Csr, u: u32, v: u32) -> bool {
    g.neighbors(v as usize).contains(&u)
}

#[test]
fn node_split_labelled_only() {
    let labels = Labels::Classes {
        y: (0..100)
            .map(|v| if v % 10 == 0 { -1 } else { v % 3 })
            .collect(),
        num_classes: 3,
    };
    let s = random_node_split(&labels, 100, 0.6, 0.2, 5);
    assert_eq!((s.train.len(), s.val.len(), s.test.len()), (54, 18, 18));
    let all: HashSet<u32> = s
        .train
        .iter()
        .chain(&s.val)
        .chain(&s.test)
        .copied()
        .collect();
    assert_eq!(all.len(), 90);
    assert!(all.iter().all(|v| v % 10 != 0));
    assert!(s.train.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(s, random_node_split(&labels, 100, 0.6, 0.2, 5));
    assert_ne!(s, random_node_split(&labels, 100, 0.6, 0.2, 6));
    let s = random_node_split(&Labels::None, 10, 0.6, 0.2, 0);
    assert_eq!((s.train.len(), s.val.len(), s.test.len()), (6, 2, 2));
}

#[test]
fn link_split_no_leak_undirected() {
    let (g, directed) = small_graph();
    let m = g.num_edges() / 2;
    let ls = link_split(&g, directed, 0.1, 0.1, None, 50, 42);
    let n_val = (m as f64 * 0.1).round() as usize;
    assert_eq!(ls.val_pos.len(), n_val);
    assert_eq!(ls.test_pos.len(), n_val);
    assert_eq!(ls.train_edges.len(), m - 2 * n_val);
    assert_eq!(ls.train_graph.num_edges(), 2 * ls.train_edges.len());
    assert_eq!(ls.train_graph.num_nodes(), g.num_nodes());
    // no val/test pair appears in the training graph, in either direction
    for &(u, v) in ls.val_pos.iter().chain(&ls.test_pos) {
        assert!(u < v);
        assert!(has_arc(&g, u, v) && has_arc(&g, v, u));
        assert!(!has_arc(&ls.train_graph, u, v), "leak {u}->{v}");
        assert!(!has_arc(&ls.train_graph, v, u), "reverse leak {v}->{u}");
    }
    // training graph is symmetric and equals the training edges
    for &(u, v) in &ls.train_edges {
        assert!(has_arc(&ls.train_graph, u, v) && has_arc(&ls.train_graph, v, u));
    }
    // positives are disjoint
    let val: HashSet<_> = ls.val_pos.iter().collect();
    assert!(ls.test_pos.iter().all(|e| !val.contains(e)));
    // negatives: layout, w != u, (u, w) not an edge of the full graph
    assert_eq!(ls.num_neg, 50);
    assert_eq!(ls.val_neg.len(), ls.val_pos.len() * 50);
    assert_eq!(ls.test_neg.len(), ls.test_pos.len() * 50);
    for (pos, neg) in [(&ls.val_pos, &ls.val_neg), (&ls.test_pos, &ls.test_neg)] {
        for (i, &(u, _)) in pos.iter().enumerate() {
            for &w in &neg[i * 50..(i + 1) * 50] {
                assert_ne!(w, u);
                assert!((w as usize) < g.num_nodes());
                assert!(!has_arc(&g, u, w));
            }
        }
    }
}

#[test]
fn link_split_deterministic_and_capped() {
    let (g, _) = small_graph();
    let a = link_split(&g, false, 0.05, 0.1, Some(100), 20, 7);
    let b = link_split(&g, false, 0.05, 0.1, Some(100), 20, 7);
    assert_eq!(a, b);
    assert_eq!(a.val_pos.len(), 100);
    assert_eq!(a.test_pos.len(), 100);
    assert_eq!(a.train_edges.len(), g.num_edges() / 2 - 200);
    let c = link_split(&g, false, 0.05, 0.1, Some(100), 20, 8);
    assert_ne!(a.val_pos, c.val_pos);
    // independent of the thread count
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let d = pool.install(|| link_split(&g, false, 0.05, 0.1, Some(100), 20, 7));
    assert_eq!(a, d);
}

#[test]
fn link_split_directed() {
    // arcs: 0->1, 1->0, 1->2, 2->3, 3->0, 0->2 ; row v = in-neighbours
    let src = [0u32, 1, 1, 2, 3, 0];
    let dst = [1u32, 0, 2, 3, 0, 2];
    let g = Csr::from_edges(4, &src, &dst);
    let ls = link_split(&g, true, 0.34, 0.34, None, 3, 1);
    assert_eq!(ls.val_pos.len(), 2);
    assert_eq!(ls.test_pos.len(), 2);
    // 6 arcs - 4 held out; a reciprocal of a held-out arc is dropped too
    assert!(ls.train_edges.len() <= 2);
    assert_eq!(ls.train_graph.num_edges(), ls.train_edges.len());
    for &(u, v) in &ls.train_edges {
        assert!(!ls.val_pos.contains(&(v, u)) && !ls.test_pos.contains(&(v, u)));
    }
    for &(u, v) in ls.val_pos.iter().chain(&ls.test_pos) {
        assert!(has_arc(&g, u, v));
        assert!(!has_arc(&ls.train_graph, u, v));
        assert!(
            !has_arc(&ls.train_graph, v, u),
            "reverse of held-out arc {u}->{v} kept"
        );
    }
    // negatives avoid u and u's out-neighbours (node 0 has out-neighbours 1, 2 -> only 3)
    for (i, &(u, _)) in ls.val_pos.iter().chain(&ls.test_pos).enumerate() {
        let neg = if i < 2 {
            &ls.val_neg[i * 3..i * 3 + 3]
        } else {
            &ls.test_neg[(i - 2) * 3..(i - 2) * 3 + 3]
        };
        for &w in neg {
            assert_ne!(w, u);
        }
    }
}

#[test]
fn link_split_complete_graph_has_nothing_to_rank() {
    // regression (issue 11): on a complete graph K5 no negative pair exists; the sampler used
    // to fall back to true edges. Now every held-out edge goes back to training and says so.
    let mut src = vec![];
    let mut dst = vec![];
    for u in 0..5u32 {
        for v in 0..5u32 {
            if u != v {
                src.push(u);
                dst.push(v);
            }
        }
    }
    let g = Csr::from_edges(5, &src, &dst);
    let ls = link_split(&g, false, 0.2, 0.2, None, 10, 0);
    assert!(ls.val_pos.is_empty() && ls.test_pos.is_empty());
    assert_eq!(ls.train_edges.len(), 10);
    assert_eq!(ls.notes.unrankable, 4);
    assert_eq!(ls.notes.min_valid_negatives, None);
}
