//! Regression tests of issue 11 ("nothing silent"): what the loader and the splits used to do
//! without a word, with exact expected values.

use std::collections::HashSet;

use tma_graph::{link_split, load_dataset, Csr, GraphError, LoadOptions, RemovedArcs};

use crate::util::{fixture, write_f32, write_i64, write_u8};

fn load(dir: &std::path::Path) -> tma_graph::Result<tma_graph::Dataset> {
    load_dataset(dir, &LoadOptions::default())
}

#[test]
fn self_loops_and_duplicate_arcs_are_counted() {
    let d = fixture();
    // the fixture's edges plus a repeated 0 -> 1 / 1 -> 0 pair (twice) and a second self-loop
    let src = [0i64, 1, 1, 2, 2, 3, 3, 0, 1, 0, 1, 2];
    let dst = [1i64, 0, 2, 1, 3, 2, 3, 1, 0, 1, 0, 2];
    let ei: Vec<i64> = src.iter().chain(dst.iter()).copied().collect();
    write_i64(d.path(), "edge_index.npy", &[2, 12], &ei);
    let ds = load(d.path()).unwrap();
    assert_eq!(ds.num_edges(), 6);
    let file = d.path().join("edge_index.npy").display().to_string();
    assert_eq!(
        ds.removed,
        RemovedArcs {
            self_loops: 2,
            duplicate_arcs: 4,
            file: file.clone(),
        }
    );
    assert_eq!(
        ds.removed.warning().unwrap(),
        format!(
            "{file}: removed 2 self-loops and 4 duplicate arcs on load (the graph keeps neither)"
        )
    );
    // the plain fixture: one self-loop, no duplicates
    let ds = load(fixture().path()).unwrap();
    assert_eq!((ds.removed.self_loops, ds.removed.duplicate_arcs), (1, 0));
}

#[test]
fn non_finite_features_are_rejected_with_count_and_first_position() {
    let d = fixture();
    // rows: node 0 -> entry 0, node 1 -> entries 1, 2, node 2 -> entry 3, node 3 -> entry 4
    write_f32(
        d.path(),
        "x_data.npy",
        &[5],
        &[1.0, 0.5, 2.0, f32::NAN, f32::INFINITY],
    );
    let e = load(d.path()).unwrap_err();
    assert!(e.path().ends_with("x_data.npy"), "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "{}: invalid content: 2 non-finite feature values (NaN or infinity); the first is entry 3 (node 2, column 50) = NaN",
            d.path().join("x_data.npy").display()
        )
    );
}

#[test]
fn overlapping_splits_name_both_files_unless_allowed() {
    let d = fixture();
    // node 1 in train and test, node 0 in train and test
    write_i64(d.path(), "test_idx.npy", &[3], &[3, 1, 0]);
    let e = load(d.path()).unwrap_err();
    let msg = e.to_string();
    assert!(e.path().ends_with("train_idx.npy"), "{msg}");
    assert!(
        msg.contains("2 nodes of this split also appear in")
            && msg.contains("test_idx.npy (first: 0, 1)")
            && msg.contains("--allow-split-overlap"),
        "{msg}"
    );
    // val and test
    write_i64(d.path(), "test_idx.npy", &[2], &[3, 2]);
    let msg = load(d.path()).unwrap_err().to_string();
    assert!(
        msg.contains("val_idx.npy: invalid content: 1 node of this split also appear")
            && msg.contains("test_idx.npy (first: 2)"),
        "{msg}"
    );
    let ds = load_dataset(
        d.path(),
        &LoadOptions {
            allow_split_overlap: true,
            ..LoadOptions::default()
        },
    )
    .unwrap();
    assert_eq!(ds.split.unwrap().test, vec![2, 3]);
    // masks: row 1 overlaps (node 0 in train and val), row 0 does not
    let d = fixture();
    for f in ["train_idx.npy", "val_idx.npy", "test_idx.npy"] {
        std::fs::remove_file(d.path().join(f)).unwrap();
    }
    write_u8(
        d.path(),
        "train_masks.npy",
        "|b1",
        &[2, 4],
        false,
        &[1, 1, 0, 0, 1, 0, 0, 0],
    );
    write_u8(
        d.path(),
        "val_masks.npy",
        "|b1",
        &[2, 4],
        false,
        &[0, 0, 1, 0, 1, 1, 0, 0],
    );
    write_u8(
        d.path(),
        "test_masks.npy",
        "|b1",
        &[2, 4],
        false,
        &[0, 0, 0, 1, 0, 0, 1, 1],
    );
    assert_eq!(load(d.path()).unwrap().num_splits, 2);
    let msg = load_dataset(
        d.path(),
        &LoadOptions {
            split_index: 1,
            ..LoadOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        msg.contains(
            "train_masks.npy: invalid content: 1 node of this split (split index 1) also appears"
        ) && msg.contains("val_masks.npy (first: 0)"),
        "{msg}"
    );
}

#[test]
fn object_arrays_say_pickles_are_unsupported_and_the_dtype_expected() {
    let d = fixture();
    write_u8(d.path(), "y.npy", "|O", &[4], false, &[0; 32]);
    let e = load(d.path()).unwrap_err();
    let GraphError::Dtype {
        expected, found, ..
    } = &e
    else {
        panic!("{e:?}")
    };
    assert_eq!(
        expected,
        "<i8 (int64) [N] classes or |u1 (uint8) [N, C] multi-label"
    );
    assert!(found.starts_with("|O (an object array: pickled Python objects are not supported"));
    assert!(e.path().ends_with("y.npy"));
}

#[test]
fn labels_beyond_meta_class_count_and_split_index_on_index_files() {
    let d = fixture();
    std::fs::write(
        d.path().join("meta.json"),
        r#"{"name": "fixture", "directed": false, "computed": {"nodes": 4, "classes": 2}, "x_shape": [4, 100]}"#,
    )
    .unwrap();
    assert_eq!(load(d.path()).unwrap().num_splits, 1);
    write_i64(d.path(), "y.npy", &[4], &[0, 1, -1, 3]);
    let msg = load(d.path()).unwrap_err().to_string();
    assert!(
        msg.ends_with("y.npy: invalid content: label of node 3 is 3, but meta.json says computed.classes = 2 (class ids must be < 2)"),
        "{msg}"
    );
    let d = fixture();
    let msg = load_dataset(
        d.path(),
        &LoadOptions {
            split_index: 1,
            ..LoadOptions::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(
        msg.ends_with("train_idx.npy: invalid content: split_index 1 out of range: index files hold one split (index 0)"),
        "{msg}"
    );
}

/// Undirected path 0-1-2-...-(n-1), both directions.
fn path_graph(n: u32) -> Csr {
    let mut src = vec![];
    let mut dst = vec![];
    for v in 0..n - 1 {
        src.extend([v, v + 1]);
        dst.extend([v + 1, v]);
    }
    Csr::from_edges(n as usize, &src, &dst)
}

#[test]
fn tiny_graphs_get_one_validation_and_one_test_edge() {
    // 9 edges, 5% + 5% round to 0: one of each is taken anyway
    let ls = link_split(&path_graph(10), false, 0.05, 0.05, Some(500), 5, 0);
    assert_eq!((ls.val_pos.len(), ls.test_pos.len()), (1, 1));
    assert_eq!(ls.train_edges.len(), 7);
    assert!(ls.notes.forced_val && ls.notes.forced_test);
    assert_eq!(
        ls.notes.warnings(0.05, 0.05, 5)[..2],
        [
            "link split: val-frac 0.05 of 9 edges rounds to 0; holding out 1 validation edge"
                .to_string(),
            "link split: test-frac 0.05 of 9 edges rounds to 0; holding out 1 test edge"
                .to_string()
        ]
    );
    // 3 edges: exactly one each, one left to train on
    let ls = link_split(&path_graph(4), false, 0.05, 0.05, Some(500), 1, 0);
    assert_eq!(
        (ls.val_pos.len(), ls.test_pos.len(), ls.train_edges.len()),
        (1, 1, 1)
    );
    // 2 edges cannot hold out both and train: nothing forced (the caller reports the count)
    let ls = link_split(&path_graph(3), false, 0.05, 0.05, Some(500), 1, 0);
    assert_eq!((ls.val_pos.len(), ls.test_pos.len()), (0, 0));
    assert_eq!(ls.notes.num_edges, 2);
    // a zero fraction stays zero
    let ls = link_split(&path_graph(10), false, 0.05, 0.0, Some(500), 1, 0);
    assert_eq!((ls.val_pos.len(), ls.test_pos.len()), (1, 0));
}

#[test]
fn negatives_are_never_true_edges_and_few_are_reported() {
    // K5 minus the edge 0-4: node 0's only valid negative is 4 (and 4's is 0); nodes 1..3 have
    // none, so held-out edges from them go back to training
    let mut src = vec![];
    let mut dst = vec![];
    for u in 0..5u32 {
        for v in 0..5u32 {
            if u != v && !(u.min(v) == 0 && u.max(v) == 4) {
                src.push(u);
                dst.push(v);
            }
        }
    }
    let g = Csr::from_edges(5, &src, &dst);
    for seed in 0..20 {
        let ls = link_split(&g, false, 0.3, 0.3, None, 7, seed);
        // 9 edges; sources (min endpoint) 0 rank, 1..3 cannot
        let held = ls.val_pos.len() + ls.test_pos.len() + ls.notes.unrankable;
        assert_eq!(held, 6, "seed {seed}");
        for (pos, neg) in [(&ls.val_pos, &ls.val_neg), (&ls.test_pos, &ls.test_neg)] {
            for (i, &(u, _)) in pos.iter().enumerate() {
                assert_eq!(u, 0, "only node 0 has a negative");
                assert!(neg[i * 7..(i + 1) * 7].iter().all(|&w| w == 4));
            }
        }
        let ranked = ls.val_pos.len() + ls.test_pos.len();
        assert_eq!(ls.notes.few_negatives, ranked);
        if ranked > 0 {
            assert_eq!(ls.notes.min_valid_negatives, Some(1));
        }
        assert_eq!(ls.train_edges.len() + ranked, 9);
        // the one pair (0, 4) is on one side only: when both sets rank a positive from 0,
        // every test negative repeats a validation pair, and is counted
        let expect = if !ls.val_pos.is_empty() {
            7 * ls.test_pos.len()
        } else {
            0
        };
        assert_eq!(ls.notes.shared_val_test_negatives, expect, "seed {seed}");
    }
}

#[test]
fn validation_and_test_negatives_share_no_pair() {
    // a star plus a ring on 40 nodes: many valid negatives, small enough that sharing would
    // happen by chance (it did before the fix for most seeds)
    let n = 40u32;
    let mut src = vec![];
    let mut dst = vec![];
    for v in 1..n {
        let w = if v + 1 < n { v + 1 } else { 1 };
        for (a, b) in [(0, v), (v, w)] {
            src.extend([a, b]);
            dst.extend([b, a]);
        }
    }
    let g = Csr::from_edges(n as usize, &src, &dst);
    for seed in 0..5 {
        let ls = link_split(&g, false, 0.2, 0.2, None, 30, seed);
        let key = |u: u32, w: u32| (u.min(w), u.max(w));
        let val: HashSet<(u32, u32)> = ls
            .val_pos
            .iter()
            .enumerate()
            .flat_map(|(i, &(u, _))| {
                ls.val_neg[i * 30..(i + 1) * 30]
                    .iter()
                    .map(move |&w| key(u, w))
            })
            .collect();
        let shared = ls
            .test_pos
            .iter()
            .enumerate()
            .flat_map(|(i, &(u, _))| {
                ls.test_neg[i * 30..(i + 1) * 30]
                    .iter()
                    .map(move |&w| key(u, w))
            })
            .filter(|p| val.contains(p))
            .count();
        assert_eq!(shared, 0, "seed {seed}");
        assert_eq!(ls.notes.shared_val_test_negatives, 0);
        // never a true edge, never u itself
        for (pos, neg) in [(&ls.val_pos, &ls.val_neg), (&ls.test_pos, &ls.test_neg)] {
            for (i, &(u, _)) in pos.iter().enumerate() {
                for &w in &neg[i * 30..(i + 1) * 30] {
                    assert!(w != u && !g.neighbors(w as usize).contains(&u));
                }
            }
        }
    }
}
