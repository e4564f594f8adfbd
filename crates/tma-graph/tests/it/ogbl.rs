//! OGB link-property directories (`tests/fixtures/formats/ogbl/`, made by `make_ogbl.py`) and
//! the `.pt` reader: exact graph, split and negatives as given, the on-disk format keeping
//! them, and clean errors for malformed `.pt` files.

use std::path::{Path, PathBuf};

use tma_graph::formats::torch::{read_pt, write_pt, TorchDtype};
use tma_graph::formats::{self, Format, ReadOptions};
use tma_graph::{Features, GraphError, LoadOptions};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/formats/ogbl")
        .join(name)
}

fn expected(name: &str) -> serde_json::Value {
    let p = fixture(&format!("{name}.expected.json"));
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn pairs(v: &serde_json::Value) -> Vec<(u32, u32)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_u64().unwrap() as u32, p[1].as_u64().unwrap() as u32))
        .collect()
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn read(dir: &Path) -> formats::Loaded {
    formats::read(dir, &ReadOptions::default(), &LoadOptions::default()).unwrap()
}

/// The arcs of the in-neighbour CSR as `(u, v)` = `u -> v`, sorted.
fn arcs(ds: &tma_graph::Dataset) -> Vec<(u32, u32)> {
    let g = &ds.graph;
    let mut out: Vec<(u32, u32)> = (0..g.num_nodes())
        .flat_map(|v| g.neighbors(v).iter().map(move |&u| (u, v as u32)))
        .collect();
    out.sort_unstable();
    out
}

fn dense(f: &Features) -> (usize, Vec<f32>) {
    match f {
        Features::Dense { dim, data, .. } => (*dim, data.to_vec()),
        _ => panic!("dense features expected"),
    }
}

fn features_of(v: &serde_json::Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .flat_map(|r| {
            r.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
        })
        .collect()
}

#[test]
fn pt_files_read_as_written() {
    let e = expected("ogbl_citation2");
    let t = read_pt(&fixture("ogbl_citation2/split/time/valid.pt")).unwrap();
    assert_eq!(
        t.keys().collect::<Vec<_>>(),
        ["source_node", "target_node", "target_node_neg"]
    );
    let pos = pairs(&e["val_pos"]);
    let neg = &t["target_node_neg"];
    assert_eq!(neg.dtype, TorchDtype::I64);
    assert_eq!(neg.shape, [5, 20]);
    assert_eq!(
        neg.to_i64().unwrap(),
        ids(&e["val_neg"])
            .iter()
            .map(|&x| x as i64)
            .collect::<Vec<_>>()
    );
    assert_eq!(t["source_node"].shape, [5]);
    assert_eq!(
        t["source_node"].to_i64().unwrap(),
        pos.iter().map(|p| p.0 as i64).collect::<Vec<_>>()
    );
    let c = read_pt(&fixture("ogbl_collab/split/time/train.pt")).unwrap();
    assert_eq!(c.keys().collect::<Vec<_>>(), ["edge", "weight", "year"]);
    let ec = expected("ogbl_collab");
    let edges = pairs(&ec["edges"]);
    assert_eq!(c["edge"].shape, [edges.len() as u64, 2]);
    assert_eq!(c["year"].to_i64().unwrap()[..3], [2010, 2011, 2012]);
}

#[test]
fn the_legacy_format_reads_the_same_dict() {
    let zip = read_pt(&fixture("ogbl_collab/split/time/valid.pt")).unwrap();
    let legacy = read_pt(&fixture("collab_valid_legacy.pt")).unwrap();
    assert_eq!(legacy, zip);
    // a truncated legacy stream is an error naming the file
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("cut.pt");
    let b = std::fs::read(fixture("collab_valid_legacy.pt")).unwrap();
    for cut in [20, 200, b.len() - 9, b.len() - 1] {
        std::fs::write(&p, &b[..cut]).unwrap();
        let r = invalid_reason(read_pt(&p), &p);
        assert!(r.contains("legacy torch.save format"), "{cut}: {r}");
    }
}

#[test]
fn citation2_is_the_training_graph_with_its_negatives_as_given() {
    let e = expected("ogbl_citation2");
    let dir = fixture("ogbl_citation2");
    assert_eq!(formats::detect(&dir).unwrap(), Format::Ogb);
    let l = read(&dir);
    let ds = &l.dataset;
    assert_eq!(ds.name, "ogbl-citation2");
    assert!(ds.directed);
    assert_eq!(ds.num_nodes(), 30);
    let mut want = pairs(&e["arcs"]);
    want.sort_unstable();
    assert_eq!(arcs(ds), want);
    assert_eq!(dense(&ds.features), (4, features_of(&e["features"])));
    assert!(!ds.structural_features);
    assert!(ds.split.is_none());
    let ls = ds.link_split.as_ref().unwrap();
    assert_eq!(ls.val_pos, pairs(&e["val_pos"]));
    assert_eq!(ls.test_pos, pairs(&e["test_pos"]));
    let n = ls.negatives.as_ref().unwrap();
    assert_eq!(n.num_neg, 20);
    assert_eq!(n.val[..], ids(&e["val_neg"])[..]);
    assert_eq!(n.test[..], ids(&e["test_neg"])[..]);
    let p = ls.protocol.as_ref().unwrap();
    assert_eq!(
        (p.dataset.as_str(), p.hits_k, p.shared.is_none()),
        ("ogbl-citation2", None, true)
    );
    assert!(ls.source.ends_with("split/time"), "{}", ls.source);
    // what is not read is said
    let notes = l.notes.join("\n");
    assert!(notes.contains("train.pt: not read"), "{notes}");
    assert!(notes.contains("node_year.csv.gz"), "{notes}");
    assert!(
        notes.contains("directed arcs, as OGB stores this dataset"),
        "{notes}"
    );
}

#[test]
fn collab_is_undirected_with_shared_negatives_as_given() {
    let e = expected("ogbl_collab");
    let l = read(&fixture("ogbl_collab"));
    let ds = &l.dataset;
    assert_eq!(ds.name, "ogbl-collab");
    assert!(!ds.directed);
    assert_eq!(ds.num_nodes(), 24);
    let mut want: Vec<(u32, u32)> = pairs(&e["edges"])
        .into_iter()
        .flat_map(|(u, v)| [(u, v), (v, u)])
        .collect();
    want.sort_unstable();
    assert_eq!(arcs(ds), want);
    assert_eq!(dense(&ds.features), (3, features_of(&e["features"])));
    let ls = ds.link_split.as_ref().unwrap();
    assert_eq!(ls.val_pos, pairs(&e["val_pos"]));
    assert_eq!(ls.test_pos, pairs(&e["test_pos"]));
    assert!(ls.negatives.is_none());
    let p = ls.protocol.as_ref().unwrap();
    assert_eq!((p.dataset.as_str(), p.hits_k), ("ogbl-collab", Some(50)));
    let sh = p.shared.as_ref().unwrap();
    assert_eq!(sh.val, pairs(&e["val_neg"]));
    assert_eq!(sh.test, pairs(&e["test_neg"]));
    // held-out pairs are absent from the training graph
    for &(u, v) in ls.val_pos.iter().chain(&ls.test_pos) {
        assert!(!ds.graph.neighbors(v as usize).contains(&u));
    }
    let notes = l.notes.join("\n");
    assert!(
        notes.contains("split/time/{valid,test}.pt: not read: weight, year"),
        "{notes}"
    );
    assert!(
        notes.contains("edge_weight.csv.gz, edge_year.csv.gz"),
        "{notes}"
    );
    assert!(notes.contains("read as undirected"), "{notes}");
}

#[test]
fn the_on_disk_format_keeps_both_kinds_of_negatives() {
    for name in ["ogbl_citation2", "ogbl_collab"] {
        let ds = read(&fixture(name)).dataset;
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("g");
        tma_graph::disk::write_dataset(&ds, &out, &tma_graph::disk::Provenance::new("test"))
            .unwrap();
        let g = tma_graph::MappedGraph::open(&out).unwrap();
        g.validate().unwrap();
        let back = g.to_dataset(&LoadOptions::default()).unwrap();
        assert_eq!(
            back.link_split,
            ds.link_split.clone().map(|mut l| {
                l.source = out.display().to_string();
                l
            })
        );
        let s = g.summary();
        assert!(
            s.contains(if name == "ogbl_collab" {
                "10/10 shared negative pairs as ogbl-collab gives them, Hits@50"
            } else {
                "20 fixed negatives each as ogbl-citation2 gives them"
            }),
            "{s}"
        );
    }
}

#[test]
fn write_pt_round_trips_every_dtype_and_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("x.pt");
    let i64s: Vec<u8> = [3i64, -1, 1 << 40, 7, 8, 9]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let f32s: Vec<u8> = [1.5f32, -2.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let i32s: Vec<u8> = [5i32; 8].iter().flat_map(|x| x.to_le_bytes()).collect();
    write_pt(
        &p,
        "x",
        &[
            ("a", TorchDtype::I64, &[2, 3], &i64s),
            ("b", TorchDtype::F32, &[2], &f32s),
            ("c", TorchDtype::I32, &[1, 2, 2, 2], &i32s),
            ("d", TorchDtype::I64, &[0, 2], &[]),
        ],
    )
    .unwrap();
    let t = read_pt(&p).unwrap();
    assert_eq!(t["a"].shape, [2, 3]);
    assert_eq!(t["a"].to_i64().unwrap(), [3, -1, 1 << 40, 7, 8, 9]);
    assert_eq!(t["b"].to_f64(), [1.5, -2.0]);
    assert!(t["b"].to_i64().is_none());
    assert_eq!(t["c"].shape, [1, 2, 2, 2]);
    assert_eq!(t["c"].to_i64().unwrap(), [5; 8]);
    assert_eq!(t["d"].numel(), 0);
    // one entry (SETITEM) and none
    write_pt(
        &p,
        "x",
        &[("only", TorchDtype::I64, &[1], &7i64.to_le_bytes())],
    )
    .unwrap();
    assert_eq!(read_pt(&p).unwrap()["only"].to_i64().unwrap(), [7]);
    write_pt(&p, "x", &[]).unwrap();
    assert!(read_pt(&p).unwrap().is_empty());
}

/// A `.pt` zip of `pkl` and storages `data/0..` (raw bytes).
fn pt_with(path: &Path, pkl: &[u8], storages: &[&[u8]], byteorder: Option<&[u8]>) {
    use std::io::Write;
    let mut z = zip::ZipWriter::new(std::fs::File::create(path).unwrap());
    let o =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    z.start_file("t/data.pkl", o).unwrap();
    z.write_all(pkl).unwrap();
    if let Some(b) = byteorder {
        z.start_file("t/byteorder", o).unwrap();
        z.write_all(b).unwrap();
    }
    for (i, s) in storages.iter().enumerate() {
        z.start_file(format!("t/data/{i}"), o).unwrap();
        z.write_all(s).unwrap();
    }
    z.finish().unwrap();
}

/// The pickle of `{'a': tensor}` with the given size and stride tuples (opcodes).
fn pickle(numel: u8, size: &[u8], stride: &[u8], global: &[u8]) -> Vec<u8> {
    let mut p = b"\x80\x02}q\x00X\x01\x00\x00\x00aq\x01".to_vec();
    p.extend_from_slice(global);
    p.extend_from_slice(b"q\x02((X\x07\x00\x00\x00storageq\x03ctorch\nLongStorage\nq\x04X\x01\x00\x00\x000q\x05X\x03\x00\x00\x00cpuq\x06K");
    p.push(numel);
    p.extend_from_slice(b"tq\x07QK\x00");
    p.extend_from_slice(size);
    p.extend_from_slice(stride);
    p.extend_from_slice(b"\x89ccollections\nOrderedDict\nq\x08)Rq\ttq\nRq\x0bs.");
    p
}

fn invalid_reason(r: Result<impl std::fmt::Debug, GraphError>, path: &Path) -> String {
    match r {
        Err(GraphError::Invalid { path: p, reason }) => {
            assert_eq!(p, path);
            reason
        }
        other => panic!("expected Invalid naming {}, got {other:?}", path.display()),
    }
}

#[test]
fn malformed_pt_files_are_errors_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("bad.pt");
    let rebuild = b"ctorch._utils\n_rebuild_tensor_v2\n".as_slice();
    let store: Vec<u8> = (0..6i64).flat_map(|x| x.to_le_bytes()).collect();
    // valid: [2, 3] contiguous
    pt_with(
        &p,
        &pickle(6, b"K\x02K\x03\x86", b"K\x03K\x01\x86", rebuild),
        &[&store],
        Some(b"little"),
    );
    assert_eq!(
        read_pt(&p).unwrap()["a"].to_i64().unwrap(),
        [0, 1, 2, 3, 4, 5]
    );
    // (pickle, storage, byteorder member, what the error says)
    type Case<'a> = (Vec<u8>, Vec<u8>, Option<&'a [u8]>, &'a str);
    let cases: Vec<Case> = vec![
        // transposed: strides (1, 2) of a [2, 3] tensor
        (pickle(6, b"K\x02K\x03\x86", b"K\x01K\x02\x86", rebuild), store.clone(), None, "not contiguous"),
        // more elements than the storage
        (pickle(6, b"K\x03K\x03\x86", b"K\x03K\x01\x86", rebuild), store.clone(), None, "exceed the storage"),
        // storage shorter than the pickle says
        (pickle(6, b"K\x02K\x03\x86", b"K\x03K\x01\x86", rebuild), store[..40].to_vec(), None, "holds 40 bytes"),
        // a call outside the list
        (pickle(6, b"K\x02K\x03\x86", b"K\x03K\x01\x86", b"cos\nsystem\n"), store.clone(), None, "os.system"),
        (pickle(6, b"K\x02K\x03\x86", b"K\x03K\x01\x86", rebuild), store.clone(), Some(b"big"), "big-endian"),
        (b"\x80\x02}q\x00X\x01\x00\x00\x00a".to_vec(), store.clone(), None, "truncated pickle"),
        (b"\x80\x02K\x01.".to_vec(), store.clone(), None, "not a dict of tensors"),
        (b"\x80\x02}(K\x01K\x02u.".to_vec(), store.clone(), None, "not a string"),
        (b"\x80\x02(((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((t.".to_vec(), store.clone(), None, "MARK"),
        (b"\x80\x02h\x05.".to_vec(), store.clone(), None, "never put"),
        (b"\x80\x02\xff.".to_vec(), store.clone(), None, "opcode"),
    ];
    for (pkl, st, bo, want) in cases {
        pt_with(&p, &pkl, &[&st], bo);
        let r = invalid_reason(read_pt(&p), &p);
        assert!(r.contains(want), "{want:?} not in {r:?}");
    }
    // deep nesting: 10^5 TUPLE1 in a row is refused, not a stack overflow
    let mut deep = b"\x80\x02K\x00".to_vec();
    deep.extend(std::iter::repeat_n(0x85u8, 100_000));
    deep.push(b'.');
    pt_with(&p, &deep, &[], None);
    assert!(invalid_reason(read_pt(&p), &p).contains("nested deeper"));
    // the legacy format and other files
    std::fs::write(&p, b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.").unwrap();
    let r = invalid_reason(read_pt(&p), &p);
    assert!(
        r.contains("legacy torch.save format: protocol version: truncated"),
        "{r}"
    );
    std::fs::write(&p, b"hello").unwrap();
    assert!(invalid_reason(read_pt(&p), &p).contains("not a torch.save zip"));
    std::fs::write(&p, b"PK\x03\x04 truncated").unwrap();
    assert!(invalid_reason(read_pt(&p), &p).contains("not a readable torch.save zip"));
}

#[test]
fn a_link_directory_with_bad_split_files_names_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ogbl_collab");
    copy(&fixture("ogbl_collab"), &root);
    let valid = root.join("split/time/valid.pt");
    // an id beyond the graph
    let big: Vec<u8> = [0i64, 99].iter().flat_map(|x| x.to_le_bytes()).collect();
    let neg: Vec<u8> = [1i64, 2].iter().flat_map(|x| x.to_le_bytes()).collect();
    write_pt(
        &valid,
        "valid",
        &[
            ("edge", TorchDtype::I64, &[1, 2], &big),
            ("edge_neg", TorchDtype::I64, &[1, 2], &neg),
        ],
    )
    .unwrap();
    let r = formats::read(&root, &ReadOptions::default(), &LoadOptions::default());
    let reason = invalid_reason(r.map(|_| ()), &valid);
    assert!(reason.contains("node id 99, out of range"), "{reason}");
    // a missing tensor
    write_pt(&valid, "valid", &[("edge", TorchDtype::I64, &[1, 2], &neg)]).unwrap();
    let r = formats::read(&root, &ReadOptions::default(), &LoadOptions::default());
    assert!(invalid_reason(r.map(|_| ()), &valid).contains("no tensor \"edge_neg\""));
    // the other kind than test.pt
    let s: Vec<u8> = 1i64.to_le_bytes().to_vec();
    write_pt(
        &valid,
        "valid",
        &[
            ("source_node", TorchDtype::I64, &[1], &s),
            ("target_node", TorchDtype::I64, &[1], &s),
            ("target_node_neg", TorchDtype::I64, &[1, 1], &s),
        ],
    )
    .unwrap();
    let r = formats::read(&root, &ReadOptions::default(), &LoadOptions::default());
    let test = root.join("split/time/test.pt");
    assert!(invalid_reason(r.map(|_| ()), &test).contains("other kind of split"));
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.path().is_dir() {
            copy(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), t).unwrap();
        }
    }
}
