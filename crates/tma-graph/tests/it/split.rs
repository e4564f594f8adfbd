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

#[test]
fn negatives_of_a_given_split_equal_those_link_split_draws() {
    // an undirected graph split in memory, then handed back as a stored split (training graph +
    // held-out positives): link_negatives draws the same negatives, byte for byte
    let (g, directed) = small_graph();
    let ls = link_split(&g, directed, 0.05, 0.05, None, 30, 9);
    let (val, test, notes) =
        tma_graph::link_negatives(&ls.train_graph, directed, &ls.val_pos, &ls.test_pos, 30, 9);
    assert_eq!(val, ls.val_neg[..]);
    assert_eq!(test, ls.test_neg[..]);
    assert_eq!(
        notes.shared_val_test_negatives,
        ls.notes.shared_val_test_negatives
    );
    assert_eq!(notes.few_negatives, ls.notes.few_negatives);
    assert_eq!(notes.min_valid_negatives, ls.notes.min_valid_negatives);
    // and never a held-out positive: those are absent from the training graph it was given
    let held: HashSet<(u32, u32)> = ls.val_pos.iter().chain(&ls.test_pos).copied().collect();
    for (i, &(u, _)) in ls.val_pos.iter().enumerate() {
        for &w in &val[i * 30..(i + 1) * 30] {
            assert!(!held.contains(&(u.min(w), u.max(w))) && w != u);
            assert!(!has_arc(&g, u, w));
        }
    }
}

#[test]
fn shared_negative_count_is_exact_where_sides_run_out() {
    // a hub adjacent to every node but the last: its held-out edges (source 0, the smaller id)
    // have one valid negative, (0, 11), which lies on one side only; the other side's positives
    // fall back to it, so validation and test share pairs. The count equals a brute-force one.
    let n = 12u32;
    let mut src = vec![];
    let mut dst = vec![];
    for (a, b) in (1..n - 1).map(|v| (0, v)).chain([(1, n - 1)]) {
        src.extend([a, b]);
        dst.extend([b, a]);
    }
    let g = Csr::from_edges(n as usize, &src, &dst);
    let ls = link_split(&g, false, 0.3, 0.3, None, 7, 1);
    let k = 7;
    let val_pairs: HashSet<(u32, u32)> = ls
        .val_pos
        .iter()
        .enumerate()
        .flat_map(|(i, &(u, _))| {
            ls.val_neg[i * k..(i + 1) * k]
                .iter()
                .map(move |&w| (u.min(w), u.max(w)))
        })
        .collect();
    let brute = ls
        .test_pos
        .iter()
        .enumerate()
        .flat_map(|(i, &(u, _))| {
            ls.test_neg[i * k..(i + 1) * k]
                .iter()
                .map(move |&w| (u.min(w), u.max(w)))
        })
        .filter(|p| val_pairs.contains(p))
        .count();
    assert!(brute > 0, "the graph must force shared pairs");
    assert_eq!(ls.notes.shared_val_test_negatives, brute);
}
