//! The readers of `tma_graph::formats` on the fixtures of `tests/fixtures/formats/` (written by
//! its `make.py`; expected values worked out by hand below), broken files, and round trips of
//! a shared real dataset written out as OGB / npz / SNAP / CSV by the helpers here.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::util::real_dataset;
use tma_graph::formats::{self, Format, Loaded, ReadOptions};
use tma_graph::{load_dataset, Dataset, Features, Labels, LoadOptions, NodeSplit, RemovedArcs};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/formats")
        .join(name)
}

fn read(path: &Path, undirected: bool) -> Loaded {
    formats::read(
        path,
        &ReadOptions {
            format: None,
            undirected,
        },
        &LoadOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read_err(path: &Path, format: Option<Format>) -> String {
    formats::read(
        path,
        &ReadOptions {
            format,
            undirected: false,
        },
        &LoadOptions::default(),
    )
    .map(|_| ())
    .expect_err("a broken file must be an error")
    .to_string()
}

fn csr(ds: &Dataset) -> (Vec<u64>, Vec<u32>) {
    (ds.graph.indptr.to_vec(), ds.graph.indices.to_vec())
}

/// Dense `[N * dim]` copy of any features.
fn dense(f: &Features) -> (usize, Vec<f32>) {
    match f {
        Features::Dense { dim, data, .. } => (*dim, data.to_vec()),
        Features::Sparse {
            num_nodes,
            dim,
            indptr,
            indices,
            data,
        } => {
            let mut out = vec![0f32; num_nodes * dim];
            for v in 0..*num_nodes {
                for k in indptr[v] as usize..indptr[v + 1] as usize {
                    out[v * dim + indices[k] as usize] += data[k];
                }
            }
            (*dim, out)
        }
    }
}

fn has_note(l: &Loaded, needle: &str) -> bool {
    l.notes.iter().any(|n| n.contains(needle))
}

// ---------------------------------------------------------------------------------------------
// fixtures: exact values

#[test]
fn ogb_directory_reads_graph_features_labels_and_split() {
    let l = read(&fixture("ogbn_tiny"), false);
    assert_eq!(l.format, Format::Ogb);
    let ds = &l.dataset;
    assert_eq!(ds.name, "ogbn-tiny");
    assert!(ds.directed);
    // arcs 0->1 1->2 2->0 3->4 4->5 5->3 0->3; row v = in-neighbours of v
    assert_eq!(
        csr(ds),
        (vec![0, 1, 2, 3, 5, 6, 7], vec![2, 0, 1, 0, 5, 3, 4])
    );
    let want: Vec<f32> = (0..6)
        .flat_map(|v| [v as f32 + 0.5, -(v as f32), 0.25])
        .collect();
    assert_eq!(dense(&ds.features), (3, want));
    assert!(!ds.structural_features);
    assert_eq!(
        ds.labels,
        Labels::Classes {
            y: vec![0, 1, 2, 0, 1, 2],
            num_classes: 3
        }
    );
    assert_eq!(
        ds.split,
        Some(NodeSplit {
            train: vec![0, 1],
            val: vec![2, 3],
            test: vec![4, 5]
        })
    );
    assert_eq!(ds.num_splits, 1);
    assert_eq!((ds.removed.self_loops, ds.removed.duplicate_arcs), (0, 0));
    assert!(has_note(&l, "not read: node_year.csv.gz"), "{:?}", l.notes);
    assert!(
        has_note(&l, "not an ogbn dataset tma knows"),
        "{:?}",
        l.notes
    );
    assert!(l.node_ids.is_none());

    // the raw/ directory itself is accepted too, and --undirected adds the reverses
    let u = read(&fixture("ogbn_tiny/raw"), true);
    assert!(!u.dataset.directed);
    assert_eq!(
        csr(&u.dataset),
        (
            vec![0, 3, 5, 7, 10, 12, 14],
            vec![1, 2, 3, 0, 2, 0, 1, 0, 4, 5, 3, 5, 3, 4]
        )
    );
    assert!(has_note(&u, "added the reverse of 7 arcs"), "{:?}", u.notes);
}

#[test]
fn snap_edge_list_remaps_64_bit_ids_and_drops_self_loops() {
    let l = read(&fixture("snap_tiny.txt"), false);
    assert_eq!(l.format, Format::Snap);
    let ds = &l.dataset;
    assert_eq!(ds.name, "snap_tiny");
    assert!(ds.directed, "the header says Directed graph");
    // ids 10, 20, 30, 9e18 -> 0..3; arcs 0->1 1->2 2->0 3->0 (+ the self-loop 10 10)
    assert_eq!(csr(ds), (vec![0, 2, 3, 4, 4], vec![2, 3, 0, 1]));
    let file = fixture("snap_tiny.txt").display().to_string();
    assert_eq!(
        ds.removed,
        RemovedArcs {
            self_loops: 1,
            duplicate_arcs: 0,
            file: file.clone(),
        }
    );
    // regression: the warning named `edge_index.npy`, a file a SNAP/CSV load never reads
    assert_eq!(
        ds.removed.warning().unwrap(),
        format!(
            "{file}: removed 1 self-loop and 0 duplicate arcs on load (the graph keeps neither)"
        )
    );
    assert_eq!(
        l.node_ids.as_deref(),
        Some(&[10, 20, 30, 9_000_000_000_000_000_000u64][..])
    );
    assert!(ds.structural_features);
    assert_eq!(ds.labels, Labels::None);
    assert!(ds.split.is_none());
    assert!(has_note(&l, "node ids remapped to 0..3"), "{:?}", l.notes);
}

/// Regression: the largest 64-bit id overflowed `max id + 1` (a panic in debug builds).
#[test]
fn snap_edge_list_reads_the_largest_64_bit_id() {
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("max.txt");
    std::fs::write(&f, "1\t2\n18446744073709551615\t4\n").unwrap();
    let l = read(&f, false);
    // ids 1, 2, 4, 2^64 - 1 -> 0..3; arcs 0->1 and 3->2 (rows are in-neighbours)
    assert_eq!(csr(&l.dataset), (vec![0, 0, 1, 2, 2], vec![0, 3]));
    assert_eq!(l.node_ids.as_deref(), Some(&[1, 2, 4, u64::MAX][..]));
}

#[test]
fn snap_gzip_undirected_header_gives_both_directions() {
    let l = read(&fixture("tiny.ungraph.txt.gz"), false);
    let ds = &l.dataset;
    assert_eq!(ds.name, "tiny.ungraph");
    assert!(!ds.directed);
    // edges 1-2, 2-3, 1-3 (also listed as 3 1) -> both directions of 0-1, 1-2, 0-2
    assert_eq!(csr(ds), (vec![0, 2, 4, 6], vec![1, 2, 0, 2, 0, 1]));
    assert_eq!((ds.removed.self_loops, ds.removed.duplicate_arcs), (0, 0));
    assert_eq!(l.node_ids.as_deref(), Some(&[1u64, 2, 3][..]));
    assert!(has_note(&l, "added the reverse of 2 arcs"), "{:?}", l.notes);
}

#[test]
fn csv_edge_list_with_header_ignores_and_says_the_weight_column() {
    let l = read(&fixture("edges.csv"), false);
    assert_eq!(l.format, Format::Csv);
    let ds = &l.dataset;
    assert_eq!(ds.name, "edges");
    assert!(ds.directed);
    // ids 5, 7, 9 -> 0, 1, 2; arcs 0->1 1->2 2->0 0->2
    assert_eq!(csr(ds), (vec![0, 1, 2, 4], vec![2, 0, 0, 1]));
    assert_eq!(l.node_ids.as_deref(), Some(&[5u64, 7, 9][..]));
    assert!(
        has_note(
            &l,
            "column \"weight\" ignored: tma trains on unweighted graphs"
        ),
        "{:?}",
        l.notes
    );
    assert!(has_note(&l, "read as directed arcs"), "{:?}", l.notes);
}

#[test]
fn npz_compressed_gnn_benchmark_layout() {
    let l = read(&fixture("tiny.npz"), false);
    assert_eq!(l.format, Format::Npz);
    let ds = &l.dataset;
    assert_eq!(ds.name, "tiny");
    assert!(!ds.directed, "a symmetric adjacency is undirected");
    assert_eq!(
        csr(ds),
        (vec![0, 1, 3, 5, 7, 8], vec![1, 0, 2, 1, 3, 2, 4, 3])
    );
    #[rustfmt::skip]
    let want = vec![
        1.0, 0.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 2.0,
        0.0, 3.0, 0.0, 0.0,
        0.0, 0.0, 4.0, 0.0,
        5.0, 0.0, 0.0, 0.0,
    ];
    assert!(matches!(ds.features, Features::Dense { .. }), "4-d: dense");
    assert_eq!(dense(&ds.features), (4, want));
    assert_eq!(
        ds.labels,
        Labels::Classes {
            y: vec![0, 1, 1, 0, 2],
            num_classes: 3
        }
    );
    assert!(ds.split.is_none());
    assert!(
        has_note(&l, "members not read: node_names"),
        "{:?}",
        l.notes
    );
}

#[test]
fn npz_stored_directed_weighted_multilabel() {
    let l = read(&fixture("directed_stored.npz"), false);
    let ds = &l.dataset;
    assert!(ds.directed);
    // arcs 0->1 1->2 2->3 3->0 3->2
    assert_eq!(csr(ds), (vec![0, 1, 2, 4, 5], vec![3, 0, 1, 3, 2]));
    assert_eq!(
        dense(&ds.features),
        (2, vec![0.5, 1.0, 0.0, 2.0, 3.0, 0.0, 1.5, 1.5])
    );
    assert_eq!(
        ds.labels,
        Labels::MultiLabel {
            num_labels: 2,
            y: vec![1, 0, 0, 1, 1, 1, 0, 0]
        }
    );
    assert!(
        has_note(&l, "1 edge weight other than 1 ignored"),
        "{:?}",
        l.notes
    );
    assert!(has_note(&l, "not symmetric"), "{:?}", l.notes);
    // --undirected: as PyG's read_npz
    let u = read(&fixture("directed_stored.npz"), true);
    assert!(!u.dataset.directed);
    assert_eq!(u.dataset.num_edges(), 8);
}

#[test]
fn detect_by_layout_and_name_and_load_entry() {
    assert_eq!(formats::detect(&fixture("ogbn_tiny")).unwrap(), Format::Ogb);
    assert_eq!(
        formats::detect(&fixture("snap_tiny.txt")).unwrap(),
        Format::Snap
    );
    assert_eq!(
        formats::detect(&fixture("tiny.ungraph.txt.gz")).unwrap(),
        Format::Snap
    );
    assert_eq!(formats::detect(&fixture("edges.csv")).unwrap(), Format::Csv);
    assert_eq!(formats::detect(&fixture("tiny.npz")).unwrap(), Format::Npz);
    assert_eq!(
        formats::detect(&real_dataset("planetoid_cora")).unwrap(),
        Format::Tma
    );
    let e = formats::detect(&fixture("make.py"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("make.py") && e.contains("cannot tell"), "{e}");
    let e = formats::detect(&fixture("no_such_file.txt"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no_such_file.txt"), "{e}");
    // the one library entry
    let ds = formats::load(&fixture("edges.csv"), None).unwrap();
    assert_eq!(ds.num_edges(), 4);
    let ds = formats::load(&real_dataset("planetoid_cora"), Some(Format::Tma)).unwrap();
    assert_eq!(ds.num_nodes(), 2708);
    // a format forced on a file: edges.csv read as SNAP fails on its header line
    let e = read_err(&fixture("edges.csv"), Some(Format::Snap));
    assert!(
        e.contains("edges.csv")
            && e.contains("line 1")
            && e.contains("bad field \"source\"")
            && e.contains("--format csv"),
        "{e}"
    );
    // a headerless CSV of id pairs (OGB's edge.csv.gz alone) reads as SNAP
    let l = formats::read(
        &fixture("ogbn_tiny/raw/edge.csv.gz"),
        &ReadOptions {
            format: Some(Format::Snap),
            undirected: false,
        },
        &LoadOptions::default(),
    )
    .unwrap();
    assert_eq!(
        csr(&l.dataset),
        (vec![0, 1, 2, 3, 5, 6, 7], vec![2, 0, 1, 0, 5, 3, 4])
    );
    assert_eq!("NPZ".parse::<Format>().unwrap(), Format::Npz);
    assert!("parquet"
        .parse::<Format>()
        .unwrap_err()
        .contains("tma, ogb, snap, npz, csv"));
}

#[test]
fn convert_to_npy_loads_back_the_same_dataset_with_the_id_map() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, ids) in [
        ("ogbn_tiny", false),
        ("snap_tiny.txt", true),
        ("tiny.npz", false),
    ] {
        let out = tmp.path().join(name.replace('.', "_"));
        let l = formats::convert_to_npy(
            &fixture(name),
            &ReadOptions::default(),
            &LoadOptions::default(),
            &out,
        )
        .unwrap();
        let back = load_dataset(&out, &LoadOptions::default()).unwrap();
        let ds = &l.dataset;
        assert_eq!(back.name, ds.name);
        assert_eq!(back.directed, ds.directed);
        assert_eq!(csr(&back), csr(ds), "{name}");
        assert_eq!(dense(&back.features), dense(&ds.features), "{name}");
        assert_eq!(back.structural_features, ds.structural_features);
        assert_eq!(back.labels, ds.labels);
        assert_eq!(back.split, ds.split);
        assert_eq!(out.join("node_ids.npy").exists(), ids, "{name}");
        if ids {
            let a = tma_graph::npy::read::<u64>(&out.join("node_ids.npy"), &[None]).unwrap();
            assert_eq!(Some(a.data), l.node_ids);
        }
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("meta.json")).unwrap()).unwrap();
        assert_eq!(meta["source"]["format"], l.format.name());
        // a second conversion into the same (now full) directory is refused
        let e = formats::convert_to_npy(
            &fixture(name),
            &ReadOptions::default(),
            &LoadOptions::default(),
            &out,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("not empty"), "{e}");
    }
}

// ---------------------------------------------------------------------------------------------
// broken files: file, line and problem in the message

fn gz_bytes(text: &str) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(text.as_bytes()).unwrap();
    e.finish().unwrap()
}

/// An OGB directory with the given raw files (`name` -> text, gzipped) and a split.
fn ogb_dir(root: &Path, files: &[(&str, &str)], split: [&str; 3]) {
    std::fs::create_dir_all(root.join("raw")).unwrap();
    std::fs::create_dir_all(root.join("split/s")).unwrap();
    for (name, text) in files {
        std::fs::write(root.join("raw").join(name), gz_bytes(text)).unwrap();
    }
    for (name, text) in ["train.csv.gz", "valid.csv.gz", "test.csv.gz"]
        .iter()
        .zip(split)
    {
        std::fs::write(root.join("split/s").join(name), gz_bytes(text)).unwrap();
    }
}

#[test]
fn ogb_errors_name_file_line_and_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let ok_split = ["0\n", "1\n", "2\n"];
    // (directory, raw files, split files, what the message must hold)
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, [&'a str; 3], Vec<&'a str>);
    let cases: Vec<Case> = vec![
        (
            "bad_field",
            vec![("edge.csv.gz", "0,1\n1,x2\n")],
            ok_split,
            vec!["edge.csv.gz", "line 2", "bad field \"x2\""],
        ),
        (
            "columns",
            vec![("edge.csv.gz", "0,1\n1,2,3\n")],
            ok_split,
            vec!["edge.csv.gz", "line 2", "wrong column count: 3 fields"],
        ),
        (
            "negative",
            vec![("edge.csv.gz", "0,1\n-4,2\n")],
            ok_split,
            vec!["edge.csv.gz", "line 2", "negative node id -4"],
        ),
        (
            "range",
            vec![
                ("edge.csv.gz", "0,1\n1,7\n"),
                ("num-node-list.csv.gz", "3\n"),
            ],
            ok_split,
            vec!["edge.csv.gz", "line 2", "node id 7 out of range", "3 nodes"],
        ),
        (
            "feat_rows",
            vec![
                ("edge.csv.gz", "0,1\n1,2\n"),
                ("node-feat.csv.gz", "1.0,2.0\n3.0,4.0\n"),
            ],
            ok_split,
            vec!["node-feat.csv.gz", "2 rows, but the graph has 3 nodes"],
        ),
        (
            "feat_value",
            vec![
                ("edge.csv.gz", "0,1\n1,2\n"),
                ("node-feat.csv.gz", "1.0,2.0\n3.0,abc\n5,6\n"),
            ],
            ok_split,
            vec![
                "node-feat.csv.gz",
                "line 2",
                "column 1",
                "bad field \"abc\"",
            ],
        ),
        (
            "feat_width",
            vec![
                ("edge.csv.gz", "0,1\n1,2\n"),
                ("node-feat.csv.gz", "1.0,2.0\n3.0\n5,6\n"),
            ],
            ok_split,
            vec!["node-feat.csv.gz", "line 2", "wrong column count: 1 values"],
        ),
        (
            "label",
            vec![
                ("edge.csv.gz", "0,1\n1,2\n"),
                ("node-label.csv.gz", "0\n1\n-3\n"),
            ],
            ok_split,
            vec!["node-label.csv.gz", "line 3", "negative label -3"],
        ),
        (
            "split_range",
            vec![("edge.csv.gz", "0,1\n1,2\n")],
            ["0\n", "1\n9\n", "2\n"],
            vec![
                "valid.csv.gz",
                "line 2",
                "node id 9 out of range (the graph has 3 nodes)",
            ],
        ),
        (
            "split_overlap",
            vec![("edge.csv.gz", "0,1\n1,2\n")],
            ["0\n1\n", "1\n", "2\n"],
            vec![
                "train.csv.gz",
                "valid.csv.gz",
                "1 node of this split also appears",
            ],
        ),
        (
            "graphs",
            vec![("edge.csv.gz", "0,1\n"), ("num-node-list.csv.gz", "2\n2\n")],
            ok_split,
            vec!["num-node-list.csv.gz", "lists 2 graphs"],
        ),
    ];
    for (name, files, split, want) in cases {
        let root = tmp.path().join(name);
        ogb_dir(&root, &files, split);
        let e = read_err(&root, None);
        for w in want {
            assert!(e.contains(w), "{name}: {e:?} lacks {w:?}");
        }
    }

    // corrupt gzip: a truncated stream
    let root = tmp.path().join("truncated");
    let text: String = (0..20_000).map(|i| format!("{},{}\n", i, i + 1)).collect();
    ogb_dir(&root, &[("edge.csv.gz", &text)], ok_split);
    let p = root.join("raw/edge.csv.gz");
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    let e = read_err(&root, None);
    assert!(
        e.contains("edge.csv.gz")
            && e.contains("corrupt or truncated gzip data")
            && e.contains("line "),
        "{e}"
    );
    // a missing edge file in a directory forced to OGB
    let e = read_err(tmp.path(), Some(Format::Ogb));
    assert!(e.contains("no raw/edge.csv.gz"), "{e}");
}

#[test]
fn edge_list_errors_name_file_line_and_problem() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "neg.txt",
            "# c\n1 2\n3\t-4\n",
            &["neg.txt", "line 3", "negative node id -4"],
        ),
        (
            "one.txt",
            "1 2\n3\n",
            &["one.txt", "line 2", "expected two node ids"],
        ),
        (
            "word.txt",
            "1 2\n3 x\n",
            &["word.txt", "line 2", "bad field \"x\""],
        ),
        (
            "big.txt",
            "1 99999999999999999999\n",
            &["big.txt", "line 1", "does not fit in 64 bits"],
        ),
        (
            "cols.csv",
            "src,dst\n1,2\n3,4,5\n",
            &[
                "cols.csv",
                "line 3",
                "wrong column count: 3 fields where the header has 2",
            ],
        ),
        (
            "nohead.csv",
            "1,2\n3,4\n",
            &["nohead.csv", "line 1", "no header"],
        ),
        (
            "negcsv.csv",
            "from,to\n1,-2\n",
            &[
                "negcsv.csv",
                "line 2",
                "column \"to\"",
                "negative node id -2",
            ],
        ),
        ("empty.csv", "", &["empty.csv", "empty file"]),
    ];
    for (name, text, want) in cases {
        let p = tmp.path().join(name);
        std::fs::write(&p, text).unwrap();
        let e = read_err(&p, None);
        for w in *want {
            assert!(e.contains(w), "{name}: {e:?} lacks {w:?}");
        }
    }
    // gzip corruption in a SNAP file: flipped bytes in the deflate stream
    let p = tmp.path().join("bad.txt.gz");
    let text: String = (0..5_000)
        .map(|i| format!("{}\t{}\n", i, i * 7 + 1))
        .collect();
    let mut bytes = gz_bytes(&text);
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0x5a;
    }
    std::fs::write(&p, &bytes).unwrap();
    let e = read_err(&p, None);
    assert!(
        e.contains("bad.txt.gz") && e.contains("corrupt or truncated gzip data"),
        "{e}"
    );
}

fn zip_with(path: &Path, members: &[(&str, Vec<u8>)]) {
    let f = std::fs::File::create(path).unwrap();
    let mut z = zip::ZipWriter::new(f);
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, data) in members {
        z.start_file(format!("{name}.npy"), opts).unwrap();
        z.write_all(data).unwrap();
    }
    z.finish().unwrap();
}

fn npy_i64(v: &[i64]) -> Vec<u8> {
    tma_graph::npy::encode(v, &[v.len()])
}

#[test]
fn npz_errors_name_archive_member_and_problem() {
    let tmp = tempfile::tempdir().unwrap();
    // missing member
    let p = tmp.path().join("missing.npz");
    zip_with(
        &p,
        &[
            ("adj_indices", npy_i64(&[1, 0])),
            ("adj_shape", npy_i64(&[2, 2])),
        ],
    );
    let e = read_err(&p, None);
    assert!(
        e.contains("missing.npz") && e.contains("missing member adj_indptr.npy"),
        "{e}"
    );
    // out-of-range column
    let p = tmp.path().join("range.npz");
    zip_with(
        &p,
        &[
            ("adj_indices", npy_i64(&[1, 5])),
            ("adj_indptr", npy_i64(&[0, 1, 2])),
            ("adj_shape", npy_i64(&[2, 2])),
        ],
    );
    let e = read_err(&p, None);
    assert!(
        e.contains("range.npz:adj_indices.npy") && e.contains("id 5 out of range"),
        "{e}"
    );
    // a wrong dtype names the member
    let p = tmp.path().join("dtype.npz");
    zip_with(
        &p,
        &[
            ("adj_indices", tma_graph::npy::encode(&[1.0f32, 0.0], &[2])),
            ("adj_indptr", npy_i64(&[0, 1, 2])),
            ("adj_shape", npy_i64(&[2, 2])),
        ],
    );
    let e = read_err(&p, None);
    assert!(
        e.contains("dtype.npz:adj_indices.npy") && e.contains("wrong dtype"),
        "{e}"
    );
    // indptr not monotone
    let p = tmp.path().join("indptr.npz");
    zip_with(
        &p,
        &[
            ("adj_indices", npy_i64(&[1, 0])),
            ("adj_indptr", npy_i64(&[0, 2, 1])),
            ("adj_shape", npy_i64(&[2, 2])),
        ],
    );
    let e = read_err(&p, None);
    assert!(
        e.contains("indptr.npz:adj_indptr.npy") && e.contains("not monotone"),
        "{e}"
    );
    // not a zip at all, and a truncated archive
    let p = tmp.path().join("text.npz");
    std::fs::write(&p, "hello").unwrap();
    let e = read_err(&p, None);
    assert!(
        e.contains("text.npz") && e.contains("not a readable .npz"),
        "{e}"
    );
    let bytes = std::fs::read(fixture("tiny.npz")).unwrap();
    let p = tmp.path().join("cut.npz");
    std::fs::write(&p, &bytes[..bytes.len() - 40]).unwrap();
    let e = read_err(&p, None);
    assert!(
        e.contains("cut.npz") && e.contains("not a readable .npz"),
        "{e}"
    );
    // a corrupt deflated member (CRC or inflate error), named
    let mut bytes = std::fs::read(fixture("tiny.npz")).unwrap();
    let at = 200;
    for b in &mut bytes[at..at + 8] {
        *b ^= 0xff;
    }
    let p = tmp.path().join("flipped.npz");
    std::fs::write(&p, &bytes).unwrap();
    let e = read_err(&p, None);
    assert!(
        e.contains("flipped.npz:adj_indices.npy") && e.contains("corrupt archive member"),
        "{e}"
    );
}

// ---------------------------------------------------------------------------------------------
// round trips: a shared real dataset written in each format reads back to the same graph

/// Writes `ds` as an OGB directory (each undirected edge once), gzipped.
fn write_ogb(ds: &Dataset, root: &Path) {
    let mut edges = String::new();
    for v in 0..ds.num_nodes() {
        for &u in ds.graph.neighbors(v) {
            if ds.directed || (u as usize) < v {
                edges.push_str(&format!("{u},{v}\n"));
            }
        }
    }
    let (dim, x) = dense(&ds.features);
    let feat: String = x
        .chunks(dim)
        .map(|r| {
            r.iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
                .join(",")
                + "\n"
        })
        .collect();
    let Labels::Classes { y, .. } = &ds.labels else {
        panic!("classes")
    };
    let labels: String = y.iter().map(|c| format!("{c}\n")).collect();
    let sp = ds.split.as_ref().unwrap();
    let ids = |v: &[u32]| v.iter().map(|i| format!("{i}\n")).collect::<String>();
    let n = format!("{}\n", ds.num_nodes());
    ogb_dir(
        root,
        &[
            ("edge.csv.gz", &edges),
            ("node-feat.csv.gz", &feat),
            ("node-label.csv.gz", &labels),
            ("num-node-list.csv.gz", &n),
        ],
        [&ids(&sp.train), &ids(&sp.val), &ids(&sp.test)],
    );
}

/// Writes `ds` as a gnn-benchmark `.npz` (out-neighbour CSR adjacency, CSR attributes,
/// labels), deflated.
fn write_npz(ds: &Dataset, path: &Path) {
    let n = ds.num_nodes();
    // out-neighbours: transpose of the in-neighbour CSR
    let mut out: Vec<Vec<i64>> = vec![Vec::new(); n];
    for v in 0..n {
        for &u in ds.graph.neighbors(v) {
            out[u as usize].push(v as i64);
        }
    }
    let mut indptr = vec![0i64];
    let mut indices = Vec::new();
    for row in &out {
        indices.extend_from_slice(row);
        indptr.push(indices.len() as i64);
    }
    let (dim, x) = dense(&ds.features);
    let Labels::Classes { y, .. } = &ds.labels else {
        panic!("classes")
    };
    let y: Vec<i64> = y.iter().map(|&c| c as i64).collect();
    let f = std::fs::File::create(path).unwrap();
    let mut z = zip::ZipWriter::new(f);
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let members: Vec<(&str, Vec<u8>)> = vec![
        (
            "adj_data",
            tma_graph::npy::encode(&vec![1.0f32; indices.len()], &[indices.len()]),
        ),
        ("adj_indices", npy_i64(&indices)),
        ("adj_indptr", npy_i64(&indptr)),
        ("adj_shape", npy_i64(&[n as i64, n as i64])),
        ("attr_matrix", tma_graph::npy::encode(&x, &[n, dim])),
        ("labels", npy_i64(&y)),
    ];
    for (name, data) in members {
        z.start_file(format!("{name}.npy"), opts).unwrap();
        z.write_all(&data).unwrap();
    }
    z.finish().unwrap();
}

/// Writes the graph of `ds` as a SNAP edge list (each undirected edge once, ids mapped
/// `v -> 7 v + 1000`), with the `Undirected graph` header.
fn write_snap(ds: &Dataset, path: &Path) {
    let mut text =
        String::from("# Undirected graph: written by the tma tests\n# FromNodeId\tToNodeId\n");
    for v in 0..ds.num_nodes() {
        for &u in ds.graph.neighbors(v) {
            if (u as usize) < v {
                text.push_str(&format!(
                    "{}\t{}\n",
                    7 * u as u64 + 1000,
                    7 * v as u64 + 1000
                ));
            }
        }
    }
    std::fs::write(path, gz_bytes(&text)).unwrap();
}

#[test]
fn shared_dataset_round_trips_through_ogb_npz_and_snap() {
    let want = load_dataset(&real_dataset("planetoid_cora"), &LoadOptions::default()).unwrap();
    let tmp = tempfile::tempdir().unwrap();

    let ogb = tmp.path().join("ogbn_cora");
    write_ogb(&want, &ogb);
    let l = read(&ogb, true);
    let ds = &l.dataset;
    assert_eq!(csr(ds), csr(&want), "ogb graph");
    assert!(!ds.directed);
    assert_eq!(dense(&ds.features), dense(&want.features), "ogb features");
    assert!(
        matches!(ds.features, Features::Sparse { .. }),
        "1433-d, 1.3% non-zero: sparse"
    );
    assert_eq!(ds.labels, want.labels);
    assert_eq!(ds.split, want.split);

    let npz = tmp.path().join("cora.npz");
    write_npz(&want, &npz);
    let l = read(&npz, false);
    let ds = &l.dataset;
    assert!(!ds.directed, "cora's adjacency is symmetric");
    assert_eq!(csr(ds), csr(&want), "npz graph");
    assert_eq!(dense(&ds.features), dense(&want.features), "npz features");
    assert_eq!(ds.labels, want.labels);

    let snap = tmp.path().join("cora.txt.gz");
    write_snap(&want, &snap);
    let l = read(&snap, false);
    let ds = &l.dataset;
    // every cora node has an edge, so the remapped ids are the original order
    assert_eq!(ds.num_nodes(), want.num_nodes());
    let ids: Vec<u64> = (0..want.num_nodes() as u64).map(|v| 7 * v + 1000).collect();
    assert_eq!(l.node_ids, Some(ids));
    assert_eq!(csr(ds), csr(&want), "snap graph");
    assert!(!ds.directed);
}
