//! The loader on a hand-written fixture: the valid case, then one malformed file at a time.

use super::util::*;
use tma_graph::{load_dataset, Features, GraphError, Labels, LoadOptions, NodeSplit};

fn load(dir: &std::path::Path) -> tma_graph::Result<tma_graph::Dataset> {
    load_dataset(dir, &LoadOptions::default())
}

/// Assert that the error's Display names `file`, and return the error.
fn err_naming(dir: &std::path::Path, file: &str) -> GraphError {
    let e = load(dir).expect_err("loading should fail");
    let msg = e.to_string();
    assert!(msg.contains(file), "message {msg:?} should name {file}");
    assert!(
        e.path().ends_with(file),
        "path {:?} should end with {file}",
        e.path()
    );
    e
}

#[test]
fn fixture_loads() {
    let d = fixture();
    let ds = load(d.path()).unwrap();
    assert_eq!(ds.name, "fixture");
    assert!(!ds.directed);
    assert_eq!(ds.num_nodes(), 4);
    // self-loop 3-3 dropped: 6 arcs remain
    assert_eq!(ds.num_edges(), 6);
    assert_eq!(ds.graph.indptr, vec![0, 1, 3, 5, 6]);
    assert_eq!(ds.graph.indices, vec![1, 0, 2, 1, 3, 2]);
    assert!(!ds.structural_features);
    assert_eq!(
        ds.features,
        Features::Sparse {
            num_nodes: 4,
            dim: 100,
            indptr: vec![0, 1, 3, 4, 5],
            indices: vec![7, 0, 99, 50, 3],
            data: vec![1.0, 0.5, 2.0, 3.0, 4.0],
        }
    );
    assert_eq!(
        ds.labels,
        Labels::Classes {
            y: vec![0, 1, -1, 1],
            num_classes: 2
        }
    );
    assert_eq!(
        ds.split,
        Some(NodeSplit {
            train: vec![0, 1],
            val: vec![2],
            test: vec![3]
        })
    );
    assert_eq!(
        ds.summary(),
        "fixture: 4 nodes, 6 arcs (undirected), features 100-d sparse (nnz 5), 2 classes, split 2/1/1"
    );
}

#[test]
fn narrow_features_are_densified() {
    let d = fixture();
    // dim 8 <= 64 -> dense
    std::fs::write(
        d.path().join("meta.json"),
        r#"{"directed": false, "x_shape": [4, 8]}"#,
    )
    .unwrap();
    write_i64(d.path(), "x_indices.npy", &[5], &[7, 0, 1, 5, 3]);
    let ds = load(d.path()).unwrap();
    // name falls back to the directory name; N inferred from the arrays
    assert_eq!(ds.num_nodes(), 4);
    let Features::Dense { dim, data, .. } = &ds.features else {
        panic!("expected dense")
    };
    assert_eq!(*dim, 8);
    assert_eq!(&data[0..8], &[0., 0., 0., 0., 0., 0., 0., 1.0]);
    assert_eq!(&data[8..16], &[0.5, 2.0, 0., 0., 0., 0., 0., 0.]);
    assert_eq!(data[2 * 8 + 5], 3.0);
    assert_eq!(data[3 * 8 + 3], 4.0);
}

#[test]
fn missing_file_is_io() {
    let d = fixture();
    std::fs::remove_file(d.path().join("edge_index.npy")).unwrap();
    let e = err_naming(d.path(), "edge_index.npy");
    assert!(matches!(e, GraphError::Io { .. }), "{e:?}");

    let d = fixture();
    std::fs::remove_file(d.path().join("x_data.npy")).unwrap();
    assert!(matches!(
        err_naming(d.path(), "x_data.npy"),
        GraphError::Io { .. }
    ));

    let d = fixture();
    std::fs::remove_file(d.path().join("val_idx.npy")).unwrap();
    assert!(matches!(
        err_naming(d.path(), "val_idx.npy"),
        GraphError::Io { .. }
    ));

    let d = fixture();
    std::fs::remove_file(d.path().join("meta.json")).unwrap();
    assert!(matches!(
        err_naming(d.path(), "meta.json"),
        GraphError::Io { .. }
    ));
}

#[test]
fn a_npy_layout_without_meta_json_is_called_missing() {
    // regression (issue 29): format detection said "holds neither meta.json ... nor ..." of a
    // directory that has the .npy layout's files
    let d = fixture();
    std::fs::remove_file(d.path().join("meta.json")).unwrap();
    let want = format!(
        "{dir}/meta.json: I/O error: meta.json not found in {dir}: tma's .npy layout needs it next to edge_index.npy, with at least {{\"directed\": false}} or true (docs/dataset-format.md)",
        dir = d.path().display()
    );
    let e = tma_graph::formats::detect(d.path()).unwrap_err();
    assert!(
        matches!(&e, GraphError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
        "{e:?}"
    );
    assert_eq!(e.to_string(), want);
    // the same words when the format is given (the loader reads the directory itself)
    assert_eq!(load(d.path()).unwrap_err().to_string(), want);
    let e = tma_graph::formats::load(d.path(), None).unwrap_err();
    assert_eq!(e.to_string(), want);
    // a directory of none of the layouts still says what was looked for
    let empty = tempfile::tempdir().unwrap();
    let e = tma_graph::formats::detect(empty.path()).unwrap_err();
    assert!(e.to_string().contains("holds neither meta.json"), "{e}");
}

#[test]
fn wrong_dtype() {
    let d = fixture();
    write_f64(d.path(), "edge_index.npy", &[2, 2], &[0., 1., 1., 0.]);
    match err_naming(d.path(), "edge_index.npy") {
        GraphError::Dtype {
            expected, found, ..
        } => {
            assert_eq!(expected, "<i8");
            assert_eq!(found, "<f8");
        }
        e => panic!("{e:?}"),
    }

    let d = fixture();
    write_i64(d.path(), "x_data.npy", &[5], &[1, 2, 3, 4, 5]);
    assert!(matches!(
        err_naming(d.path(), "x_data.npy"),
        GraphError::Dtype { .. }
    ));

    let d = fixture();
    write_f32(d.path(), "y.npy", &[4], &[0., 1., 0., 1.]);
    assert!(matches!(
        err_naming(d.path(), "y.npy"),
        GraphError::Dtype { .. }
    ));
}

#[test]
fn wrong_shape() {
    let d = fixture();
    write_i64(d.path(), "edge_index.npy", &[3, 2], &[0, 1, 1, 0, 0, 0]);
    match err_naming(d.path(), "edge_index.npy") {
        GraphError::Shape { found, .. } => assert_eq!(found, vec![3, 2]),
        e => panic!("{e:?}"),
    }

    let d = fixture();
    write_i64(d.path(), "y.npy", &[3], &[0, 1, 1]);
    match err_naming(d.path(), "y.npy") {
        GraphError::Shape {
            found, expected, ..
        } => {
            assert_eq!(found, vec![3]);
            assert_eq!(expected, "[4]");
        }
        e => panic!("{e:?}"),
    }

    let d = fixture();
    write_i64(d.path(), "x_indptr.npy", &[4], &[0, 1, 3, 5]);
    assert!(matches!(
        err_naming(d.path(), "x_indptr.npy"),
        GraphError::Shape { .. }
    ));

    let d = fixture();
    write_f32(d.path(), "x_data.npy", &[4], &[1.0, 0.5, 2.0, 3.0]);
    assert!(matches!(
        err_naming(d.path(), "x_data.npy"),
        GraphError::Shape { .. }
    ));
}

#[test]
fn id_out_of_range() {
    let d = fixture();
    write_i64(d.path(), "edge_index.npy", &[2, 2], &[0, 4, 4, 0]);
    match err_naming(d.path(), "edge_index.npy") {
        GraphError::IdOutOfRange { id, num_nodes, .. } => {
            assert_eq!(id, 4);
            assert_eq!(num_nodes, 4);
        }
        e => panic!("{e:?}"),
    }

    let d = fixture();
    write_i64(d.path(), "edge_index.npy", &[2, 2], &[0, -1, -1, 0]);
    assert!(matches!(
        err_naming(d.path(), "edge_index.npy"),
        GraphError::IdOutOfRange { id: -1, .. }
    ));

    let d = fixture();
    write_i64(d.path(), "x_indices.npy", &[5], &[7, 0, 100, 50, 3]);
    assert!(matches!(
        err_naming(d.path(), "x_indices.npy"),
        GraphError::IdOutOfRange {
            id: 100,
            num_nodes: 100,
            ..
        }
    ));

    let d = fixture();
    write_i64(d.path(), "test_idx.npy", &[1], &[9]);
    assert!(matches!(
        err_naming(d.path(), "test_idx.npy"),
        GraphError::IdOutOfRange { id: 9, .. }
    ));
}

#[test]
fn truncated_file() {
    let d = fixture();
    let p = d.path().join("x_data.npy");
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() - 3]).unwrap();
    let e = err_naming(d.path(), "x_data.npy");
    assert!(matches!(e, GraphError::Npy { .. }), "{e:?}");
    assert!(e.to_string().contains("truncated"), "{e}");

    // truncated inside the header
    let d = fixture();
    let p = d.path().join("edge_index.npy");
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..40]).unwrap();
    assert!(matches!(
        err_naming(d.path(), "edge_index.npy"),
        GraphError::Npy { .. }
    ));
}

#[test]
fn bad_magic_and_header() {
    let d = fixture();
    let p = d.path().join("y.npy");
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[1] = b'X';
    std::fs::write(&p, &bytes).unwrap();
    let e = err_naming(d.path(), "y.npy");
    assert!(matches!(e, GraphError::Npy { .. }), "{e:?}");
    assert!(e.to_string().contains("magic"), "{e}");

    let d = fixture();
    std::fs::write(d.path().join("y.npy"), b"hello").unwrap();
    assert!(matches!(
        err_naming(d.path(), "y.npy"),
        GraphError::Npy { .. }
    ));

    // garbage header dict
    let d = fixture();
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    let h = b"{'descr': <i8, oops\n";
    b.extend_from_slice(&(h.len() as u16).to_le_bytes());
    b.extend_from_slice(h);
    std::fs::write(d.path().join("y.npy"), &b).unwrap();
    assert!(matches!(
        err_naming(d.path(), "y.npy"),
        GraphError::Npy { .. }
    ));

    // absurd shape whose product overflows
    let d = fixture();
    std::fs::write(
        d.path().join("y.npy"),
        npy_bytes("<i8", &[1 << 40, 1 << 40], false, &[]),
    )
    .unwrap();
    assert!(matches!(
        err_naming(d.path(), "y.npy"),
        GraphError::Npy { .. }
    ));
}

#[test]
fn non_monotone_indptr() {
    let d = fixture();
    write_i64(d.path(), "x_indptr.npy", &[5], &[0, 3, 1, 4, 5]);
    let e = err_naming(d.path(), "x_indptr.npy");
    assert!(matches!(e, GraphError::Invalid { .. }), "{e:?}");
    assert!(e.to_string().contains("monotone"), "{e}");

    let d = fixture();
    write_i64(d.path(), "x_indptr.npy", &[5], &[0, 1, 3, 4, 4]);
    assert!(matches!(
        err_naming(d.path(), "x_indptr.npy"),
        GraphError::Invalid { .. }
    ));
}

#[test]
fn invalid_meta_and_content() {
    let d = fixture();
    std::fs::write(d.path().join("meta.json"), r#"{"x_shape": [4, 100]}"#).unwrap();
    let e = err_naming(d.path(), "meta.json");
    assert!(matches!(e, GraphError::Invalid { .. }));
    assert!(e.to_string().contains("directed"));

    let d = fixture();
    std::fs::write(d.path().join("meta.json"), r#"{"directed": false}"#).unwrap();
    assert!(err_naming(d.path(), "meta.json")
        .to_string()
        .contains("x_shape"));

    let d = fixture();
    std::fs::write(d.path().join("meta.json"), "{not json").unwrap();
    assert!(matches!(
        err_naming(d.path(), "meta.json"),
        GraphError::Invalid { .. }
    ));

    // marked undirected but one direction only
    let d = fixture();
    write_i64(d.path(), "edge_index.npy", &[2, 2], &[0, 1, 1, 2]);
    let e = err_naming(d.path(), "edge_index.npy");
    assert!(e.to_string().contains("reverse"), "{e}");

    // labels below -1
    let d = fixture();
    write_i64(d.path(), "y.npy", &[4], &[0, 1, -2, 1]);
    assert!(matches!(
        err_naming(d.path(), "y.npy"),
        GraphError::Invalid { .. }
    ));

    // a class id that would make more classes than nodes (a corrupt label, e.g. 10^9)
    let d = fixture();
    write_i64(d.path(), "y.npy", &[4], &[0, 1, 1_000_000_000, 1]);
    let e = err_naming(d.path(), "y.npy");
    assert!(matches!(e, GraphError::Invalid { .. }));
    assert!(e.to_string().contains("node 2"), "{e}");
    // 4 classes for 4 nodes is the largest accepted
    let d = fixture();
    write_i64(d.path(), "y.npy", &[4], &[0, 1, 3, 1]);
    assert!(matches!(
        load(d.path()).unwrap().labels,
        tma_graph::Labels::Classes { num_classes: 4, .. }
    ));
}

#[test]
fn directed_keeps_arcs() {
    let d = fixture();
    std::fs::write(
        d.path().join("meta.json"),
        r#"{"directed": true, "x_shape": [4, 100]}"#,
    )
    .unwrap();
    // arcs 0->1, 2->1, 3->0, 1->1 (self loop dropped)
    write_i64(
        d.path(),
        "edge_index.npy",
        &[2, 4],
        &[0, 2, 3, 1, 1, 1, 0, 1],
    );
    let ds = load(d.path()).unwrap();
    assert!(ds.directed);
    assert_eq!(ds.graph.indptr, vec![0, 1, 3, 3, 3]);
    assert_eq!(ds.graph.indices, vec![3, 0, 2]);
}

#[test]
fn masks_multilabel_and_structural() {
    let d = fixture();
    for f in [
        "x_indptr.npy",
        "x_indices.npy",
        "x_data.npy",
        "train_idx.npy",
        "val_idx.npy",
        "test_idx.npy",
    ] {
        std::fs::remove_file(d.path().join(f)).unwrap();
    }
    std::fs::write(d.path().join("meta.json"), r#"{"directed": false}"#).unwrap();
    // multi-label [4, 3]
    let y = [1u8, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1, 0];
    write_u8(d.path(), "y.npy", "|u1", &[4, 3], false, &y);
    // masks [2, 4], Fortran order: element (s, n) at n * 2 + s
    // split 0: train {0,1}, val {2}, test {3}; split 1: train {2,3}, val {0}, test {1}
    let c_order = |rows: [[u8; 4]; 2]| -> Vec<u8> {
        let mut f = vec![0u8; 8];
        for s in 0..2 {
            for n in 0..4 {
                f[n * 2 + s] = rows[s][n];
            }
        }
        f
    };
    write_u8(
        d.path(),
        "train_masks.npy",
        "|b1",
        &[2, 4],
        true,
        &c_order([[1, 1, 0, 0], [0, 0, 1, 1]]),
    );
    write_u8(
        d.path(),
        "val_masks.npy",
        "|b1",
        &[2, 4],
        true,
        &c_order([[0, 0, 1, 0], [1, 0, 0, 0]]),
    );
    write_u8(
        d.path(),
        "test_masks.npy",
        "|b1",
        &[2, 4],
        true,
        &c_order([[0, 0, 0, 1], [0, 1, 0, 0]]),
    );

    let ds = load(d.path()).unwrap();
    assert_eq!(
        ds.labels,
        Labels::MultiLabel {
            num_labels: 3,
            y: y.to_vec()
        }
    );
    assert_eq!(
        ds.split,
        Some(NodeSplit {
            train: vec![0, 1],
            val: vec![2],
            test: vec![3]
        })
    );
    let opts1 = LoadOptions {
        split_index: 1,
        ..LoadOptions::default()
    };
    let ds1 = load_dataset(d.path(), &opts1).unwrap();
    assert_eq!(
        ds1.split,
        Some(NodeSplit {
            train: vec![2, 3],
            val: vec![0],
            test: vec![1]
        })
    );
    // structural features: [4, 32], column 0 standardized ln(1+deg): degrees 1,2,2,1
    assert!(ds.structural_features);
    let Features::Dense {
        num_nodes,
        dim,
        data,
    } = &ds.features
    else {
        panic!()
    };
    assert_eq!((*num_nodes, *dim), (4, 32));
    let col0: Vec<f32> = (0..4).map(|v| data[v * 32]).collect();
    assert!(
        (col0[0] + 1.0).abs() < 1e-5 && (col0[1] - 1.0).abs() < 1e-5,
        "{col0:?}"
    );
    assert_eq!(col0[0], col0[3]);
    // deterministic in seed, different across seeds
    assert_eq!(load(d.path()).unwrap().features, ds.features);
    let other = load_dataset(
        d.path(),
        &LoadOptions {
            seed: 7,
            ..LoadOptions::default()
        },
    )
    .unwrap();
    assert_ne!(other.features, ds.features);

    // split index out of range
    let opts9 = LoadOptions {
        split_index: 2,
        ..LoadOptions::default()
    };
    let e = load_dataset(d.path(), &opts9).unwrap_err();
    assert!(matches!(e, GraphError::Invalid { .. }));
    assert!(e.to_string().contains("train_masks.npy"), "{e}");

    // masks with a different number of splits
    write_u8(
        d.path(),
        "val_masks.npy",
        "|b1",
        &[1, 4],
        false,
        &[0, 0, 1, 0],
    );
    assert!(matches!(
        err_naming(d.path(), "val_masks.npy"),
        GraphError::Shape { .. }
    ));

    // multi-label value 2
    let mut y2 = y;
    y2[4] = 2;
    write_u8(d.path(), "y.npy", "|u1", &[4, 3], false, &y2);
    assert!(matches!(
        err_naming(d.path(), "y.npy"),
        GraphError::Invalid { .. }
    ));
}
