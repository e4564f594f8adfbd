//! OGB node-property-prediction directories, as the `ogb` package lays them out after download
//! (`dataset/ogbn_arxiv/`): `raw/edge.csv.gz` (one `src,dst` line per edge), optional
//! `raw/num-node-list.csv.gz` (the node count), `raw/node-feat.csv.gz` (one row of floats per
//! node), `raw/node-label.csv.gz` (one class per line, or one 0/1 row per node for multi-task
//! datasets such as ogbn-proteins), `split/<name>/{train,valid,test}.csv.gz` (node ids). No
//! header lines. Files may also be uncompressed (`.csv`).
//!
//! OGB link-property directories (`dataset/ogbl_citation2/`, as `ogb.linkproppred.
//! LinkPropPredDataset` leaves them) have the same `raw/` files, where `edge.csv.gz` holds the
//! **training** edges only (OGB's graph object is the training graph), and
//! `split/<name>/{train,valid,test}.pt` (`torch.save` dicts, [`super::torch::read_pt`]):
//! * ogbl-citation2: `source_node [P]`, `target_node [P]`, `target_node_neg [P, 1000]` in
//!   `valid.pt` / `test.pt` (MRR; the graph directed: OGB adds no inverse edges);
//! * ogbl-collab, ogbl-ppa, ogbl-ddi: `edge [P, 2]` and `edge_neg [M, 2]`, negatives shared by
//!   every positive (Hits@50 / @100 / @20; undirected: OGB adds inverse edges, tma stores both
//!   directions); collab's `weight` and `year` are not read (one note says so).
//!
//! The split is used as given: positives and negatives as the files hold them (undirected
//! pairs keep their order), never drawn again. `train.pt` is not read (its edges are
//! `edge.csv.gz`'s), which a note says.

use std::path::{Path, PathBuf};

use super::raw::{at_line, classes, invalid, node_count, Direction, Raw, RawSplit};
use super::text::{block_lines, parse_f32, parse_id, scan, scan_blocks, show, trim};
use super::torch::{read_pt, TorchTensor};
use crate::dataset::{
    Labels, LinkProtocol, LoadOptions, SharedNegatives, StoredLinkSplit, StoredNegatives,
};
use crate::error::Result;
use crate::features::Features;

/// The OGB dataset root for `path`: `path` itself when it holds `raw/edge.csv.gz` (or the
/// binary `raw/data.npz`), its parent when `path` is the `raw/` directory.
pub(crate) fn root(path: &Path) -> Option<PathBuf> {
    let has_edges = |raw: &Path| {
        ["edge.csv.gz", "edge.csv", "data.npz"]
            .iter()
            .any(|f| raw.join(f).is_file())
    };
    if has_edges(&path.join("raw")) {
        return Some(path.to_path_buf());
    }
    if path.file_name().is_some_and(|n| n == "raw") && has_edges(path) {
        return path.parent().map(Path::to_path_buf);
    }
    None
}

/// `dir/name.csv.gz`, else `dir/name.csv` when only that exists.
fn csv_file(dir: &Path, name: &str) -> PathBuf {
    let gz = dir.join(format!("{name}.csv.gz"));
    let plain = dir.join(format!("{name}.csv"));
    if !gz.exists() && plain.exists() {
        plain
    } else {
        gz
    }
}

/// Whether OGB adds inverse edges for this dataset (its `master.csv`), by the root directory's
/// name (`ogbn_products`, `ogbn-products` or the download's `products`); `None` if unknown.
fn add_inverse_edge(name: &str) -> Option<bool> {
    let n = name.to_ascii_lowercase().replace('_', "-");
    let short = n.strip_prefix("ogbn-").unwrap_or(&n);
    match short {
        "products" | "proteins" | "proteinfunc-v4" => Some(true),
        "arxiv" | "papers100m" | "papers100m-bin" => Some(false),
        _ => None,
    }
}

/// Whether OGB adds inverse edges for this link-property dataset (its `linkproppred/
/// master.csv`: ogbl-collab, ogbl-ppa, ogbl-ddi yes; ogbl-citation2 no), by the root
/// directory's name (`ogbl_collab`, `ogbl-collab` or `collab`); `None` if unknown.
fn add_inverse_edge_link(name: &str) -> Option<bool> {
    let n = name.to_ascii_lowercase().replace('_', "-");
    match n.strip_prefix("ogbl-").unwrap_or(&n) {
        "collab" | "ppa" | "ddi" => Some(true),
        "citation2" => Some(false),
        _ => None,
    }
}

/// The Hits@K OGB reports for a shared-negative link dataset (`master.csv` `eval metric`):
/// ogbl-collab 50, ogbl-ppa 100, ogbl-ddi 20; `None` if unknown.
fn ogb_hits_k(name: &str) -> Option<usize> {
    let n = name.to_ascii_lowercase().replace('_', "-");
    match n.strip_prefix("ogbl-").unwrap_or(&n) {
        "collab" => Some(50),
        "ppa" => Some(100),
        "ddi" => Some(20),
        _ => None,
    }
}

/// One split file of an OGB link dataset, as read.
enum LinkPart {
    /// `source_node [P]`, `target_node [P]`, `target_node_neg [P, K]` (ogbl-citation2).
    PerSource {
        pos: Vec<(u32, u32)>,
        neg: Vec<u32>,
        k: usize,
    },
    /// `edge [P, 2]`, `edge_neg [M, 2]` (ogbl-collab, ogbl-ppa, ogbl-ddi).
    Shared {
        pos: Vec<(u32, u32)>,
        neg: Vec<(u32, u32)>,
    },
}

/// Node ids of tensor `key` of `path`: an integer tensor of `shape` (checked), ids `< n`.
fn node_ids(
    path: &Path,
    t: &std::collections::BTreeMap<String, TorchTensor>,
    key: &str,
    shape: &[Option<u64>],
    n: usize,
) -> Result<(Vec<u32>, Vec<u64>)> {
    let Some(x) = t.get(key) else {
        return Err(invalid(
            path,
            format!(
                "no tensor {key:?} (the file holds: {})",
                t.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        ));
    };
    let fits = x.shape.len() == shape.len()
        && x.shape
            .iter()
            .zip(shape)
            .all(|(&a, b)| b.is_none_or(|b| a == b));
    if !fits {
        let want: Vec<String> = shape
            .iter()
            .map(|d| d.map_or("_".to_string(), |d| d.to_string()))
            .collect();
        return Err(invalid(
            path,
            format!(
                "tensor {key:?} has shape {:?}, expected [{}]",
                x.shape,
                want.join(", ")
            ),
        ));
    }
    let Some(v) = x.to_i64() else {
        return Err(invalid(
            path,
            format!(
                "tensor {key:?} is {}, not an integer tensor of node ids",
                x.dtype.name()
            ),
        ));
    };
    let mut out = Vec::with_capacity(v.len());
    for (i, &id) in v.iter().enumerate() {
        if id < 0 || id as u64 >= n as u64 {
            return Err(invalid(
                path,
                format!(
                    "tensor {key:?}: entry {i} is node id {id}, out of range (the graph has {n} \
                     nodes)"
                ),
            ));
        }
        out.push(id as u32);
    }
    Ok((out, x.shape.clone()))
}

fn pairs(v: &[u32]) -> Vec<(u32, u32)> {
    v.chunks_exact(2).map(|p| (p[0], p[1])).collect()
}

/// `valid.pt` or `test.pt` of an OGB link split, and the keys it holds that are not read.
fn link_part(path: &Path, n: usize) -> Result<(LinkPart, Vec<String>)> {
    let t = read_pt(path)?;
    let (part, used): (LinkPart, &[&str]) = if t.contains_key("source_node") {
        let (s, sh) = node_ids(path, &t, "source_node", &[None], n)?;
        let p = sh[0];
        let (d, _) = node_ids(path, &t, "target_node", &[Some(p)], n)?;
        let (neg, nsh) = node_ids(path, &t, "target_node_neg", &[Some(p), None], n)?;
        let k = nsh[1] as usize;
        if k == 0 && p > 0 {
            return Err(invalid(
                path,
                "tensor \"target_node_neg\" has 0 negatives per source",
            ));
        }
        (
            LinkPart::PerSource {
                pos: s.into_iter().zip(d).collect(),
                neg,
                k,
            },
            &["source_node", "target_node", "target_node_neg"],
        )
    } else if t.contains_key("edge") {
        let (e, _) = node_ids(path, &t, "edge", &[None, Some(2)], n)?;
        let (neg, _) = node_ids(path, &t, "edge_neg", &[None, Some(2)], n)?;
        (
            LinkPart::Shared {
                pos: pairs(&e),
                neg: pairs(&neg),
            },
            &["edge", "edge_neg"],
        )
    } else {
        return Err(invalid(
            path,
            format!(
                "neither source_node/target_node/target_node_neg (ogbl-citation2) nor \
                 edge/edge_neg (ogbl-collab, ppa, ddi): the file holds {}",
                t.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
        ));
    };
    let ignored = t
        .keys()
        .filter(|k| !used.contains(&k.as_str()))
        .cloned()
        .collect();
    Ok((part, ignored))
}

/// The link split of an OGB link-property directory, `split/<name>/{valid,test}.pt`, as
/// given: positives and negatives never redrawn.
fn read_link_split(
    d: &Path,
    name: &str,
    n: usize,
    notes: &mut Vec<String>,
) -> Result<StoredLinkSplit> {
    let (vf, tf) = (d.join("valid.pt"), d.join("test.pt"));
    let (val, mut ignored) = link_part(&vf, n)?;
    let (test, ig) = link_part(&tf, n)?;
    ignored.extend(ig);
    ignored.sort();
    ignored.dedup();
    if !ignored.is_empty() {
        notes.push(format!(
            "{}: not read: {} (tma ranks the pairs unweighted; edge weights and years are not \
             used)",
            d.join("{valid,test}.pt").display(),
            ignored.join(", ")
        ));
    }
    if d.join("train.pt").exists() {
        notes.push(format!(
            "{}: not read: the training edges are raw/edge.csv.gz (OGB's graph is the training \
             graph)",
            d.join("train.pt").display()
        ));
    }
    let source = d.display().to_string();
    match (val, test) {
        (
            LinkPart::PerSource {
                pos: vp,
                neg: vn,
                k: vk,
            },
            LinkPart::PerSource {
                pos: tp,
                neg: tn,
                k: tk,
            },
        ) => {
            let k = if vp.is_empty() { tk } else { vk };
            if !vp.is_empty() && !tp.is_empty() && vk != tk {
                return Err(invalid(
                    &tf,
                    format!(
                        "target_node_neg has {tk} negatives per source, {} has {vk}: tma \
                         stores one count for both",
                        vf.display()
                    ),
                ));
            }
            let k = k.max(1);
            Ok(StoredLinkSplit {
                val_pos: vp,
                test_pos: tp,
                negatives: Some(StoredNegatives {
                    num_neg: k,
                    seed: 0,
                    val: vn.into(),
                    test: tn.into(),
                }),
                source,
                protocol: Some(Box::new(LinkProtocol {
                    dataset: name.to_string(),
                    hits_k: None,
                    shared: None,
                })),
            })
        }
        (LinkPart::Shared { pos: vp, neg: vn }, LinkPart::Shared { pos: tp, neg: tn }) => {
            let hits_k = match ogb_hits_k(name) {
                Some(k) => k,
                None => {
                    notes.push(format!(
                        "{name}: not an ogbl dataset tma knows (collab, ppa, ddi): its shared \
                         negatives are ranked by Hits@50 (ogbl-collab's); pass --metric hits@K \
                         for another K"
                    ));
                    50
                }
            };
            Ok(StoredLinkSplit {
                val_pos: vp,
                test_pos: tp,
                negatives: None,
                source,
                protocol: Some(Box::new(LinkProtocol {
                    dataset: name.to_string(),
                    hits_k: Some(hits_k),
                    shared: Some(SharedNegatives { val: vn, test: tn }),
                })),
            })
        }
        _ => Err(invalid(
            &tf,
            format!(
                "holds the other kind of split than {} (one has per-source target_node_neg, \
                 the other shared edge_neg)",
                vf.display()
            ),
        )),
    }
}

/// `node-label.csv.gz` as read: one class per line, or (`Some((C, rows))`) 0/1 rows.
type RawLabels = (Vec<i64>, Option<(usize, Vec<u8>)>);

/// The ids of one split file (one id per line), each `< n`.
fn read_ids(path: &Path, n: usize) -> Result<Vec<u32>> {
    scan(path, |lines| {
        let mut out = Vec::new();
        while let Some((ln, line)) = lines.next_line()? {
            if line.trim_ascii().is_empty() {
                continue;
            }
            if line.contains(&b',') {
                return Err(at_line(
                    path,
                    ln,
                    format!(
                        "wrong column count: {:?} (a split file holds one node id per line)",
                        show(line)
                    ),
                ));
            }
            let v = parse_id(line).map_err(|e| at_line(path, ln, e))?;
            if v >= n as u64 {
                return Err(at_line(
                    path,
                    ln,
                    format!("node id {v} out of range (the graph has {n} nodes)"),
                ));
            }
            out.push(v as u32);
        }
        Ok(out)
    })
}

/// A one-column file holding a count (`num-node-list.csv.gz`, `num-edge-list.csv.gz`); an
/// error when it lists several graphs (graph-property datasets are not node datasets).
fn read_count(path: &Path) -> Result<u64> {
    let counts = scan(path, |lines| {
        let mut counts = Vec::new();
        while let Some((ln, line)) = lines.next_line()? {
            if line.trim_ascii().is_empty() {
                continue;
            }
            counts.push(
                parse_id(line).map_err(|e| at_line(path, ln, e.replace("node id", "count")))?,
            );
        }
        Ok(counts)
    })?;
    match counts.as_slice() {
        [c] => Ok(*c),
        [] => Err(invalid(path, "empty file (expected one count)")),
        _ => Err(invalid(
            path,
            format!(
                "lists {} graphs: tma reads node-property datasets of one graph (ogbn-*), not \
                 graph-property datasets (ogbg-*)",
                counts.len()
            ),
        )),
    }
}

pub(crate) fn read(path: &Path, undirected: bool, lopts: &LoadOptions) -> Result<Raw> {
    let (root, raw, name) = dataset_root(path)?;
    let mut notes = Vec::new();

    // ---- node count (optional file)
    let nn_path = csv_file(&raw, "num-node-list");
    let known_n = if nn_path.exists() {
        Some(node_count(&nn_path, read_count(&nn_path)?)?)
    } else {
        None
    };

    // ---- edges (blocks of lines parsed in parallel)
    let edge_path = csv_file(&raw, "edge");
    let (src, dst, max_id) = read_edges(&raw, &edge_path, &nn_path, known_n)?;

    // ---- features (optional; blocks of rows parsed in parallel)
    let feat_path = csv_file(&raw, "node-feat");
    let feats = read_features(&feat_path)?;

    // ---- labels (optional): one class per line, or one 0/1 row per node
    let label_path = csv_file(&raw, "node-label");
    let labels_raw = read_labels(&label_path)?;

    // ---- N
    let n = match known_n {
        Some(n) => n,
        None => {
            let mut n = max_id.map_or(0, |m| m + 1);
            if let Some((rows, _, _)) = &feats {
                n = n.max(*rows as u64);
            }
            if let Some((c, m)) = &labels_raw {
                n = n.max(match m {
                    Some((k, y)) => (y.len() / (*k).max(1)) as u64,
                    None => c.len() as u64,
                });
            }
            node_count(&root, n)?
        }
    };
    let count_err = |p: &Path, rows: usize| {
        invalid(
            p,
            format!(
                "{rows} rows, but the graph has {n} nodes{}",
                if known_n.is_some() {
                    format!(" ({})", nn_path.display())
                } else {
                    String::new()
                }
            ),
        )
    };
    let features: Option<Features> = match feats {
        None => None,
        Some((rows, dim, data)) => {
            if rows != n {
                return Err(count_err(&feat_path, rows));
            }
            Some(Features::from_dense_like_loader(n, dim, data))
        }
    };
    let labels = match labels_raw {
        None => Labels::None,
        Some((_, Some((k, y)))) => {
            if y.len() != n * k {
                return Err(count_err(&label_path, y.len() / k.max(1)));
            }
            Labels::MultiLabel { num_labels: k, y }
        }
        Some((c, None)) => {
            if c.len() != n {
                return Err(count_err(&label_path, c.len()));
            }
            classes(&label_path, c, |v| format!("line {}", v + 1))?
        }
    };

    // ---- splits: split/<name>/, sorted by name
    let (num_names, chosen) = chosen_split(&root.join("split"), lopts.split_index)?;
    let mut link = None;
    let (split, num_splits) = match chosen {
        None => (None, 0),
        Some(d) => {
            if d.join("valid.pt").exists() || d.join("test.pt").exists() {
                link = Some(read_link_split(&d, &name, n, &mut notes)?);
                return finish(
                    root, raw, name, n, src, dst, edge_path, features, labels, None, num_names,
                    notes, link, undirected,
                );
            }
            let files = [
                csv_file(&d, "train"),
                csv_file(&d, "valid"),
                csv_file(&d, "test"),
            ];
            let lists = [
                read_ids(&files[0], n)?,
                read_ids(&files[1], n)?,
                read_ids(&files[2], n)?,
            ];
            (Some(RawSplit { lists, files }), num_names)
        }
    };

    finish(
        root, raw, name, n, src, dst, edge_path, features, labels, split, num_splits, notes, link,
        undirected,
    )
}

/// The split directories under `split_root` (sorted by name): how many, and the one
/// `split_index` picks (`None` when there is no `split/`, where only index 0 is accepted).
fn chosen_split(split_root: &Path, split_index: usize) -> Result<(usize, Option<PathBuf>)> {
    let mut names: Vec<String> = match std::fs::read_dir(split_root) {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    if names.is_empty() {
        if split_index > 0 {
            return Err(invalid(
                split_root,
                format!(
                    "split_index {split_index} out of range: the dataset has no split/ directory"
                ),
            ));
        }
        return Ok((0, None));
    }
    let Some(chosen) = names.get(split_index) else {
        return Err(invalid(
            split_root,
            format!(
                "split_index {split_index} out of range: split/ holds {} split{} ({})",
                names.len(),
                if names.len() == 1 { "" } else { "s" },
                names.join(", ")
            ),
        ));
    };
    Ok((names.len(), Some(split_root.join(chosen))))
}

/// The dataset directory of `path` (the directory or its `raw/`), its `raw/` directory and
/// the dataset's name (`ogbn-arxiv` for a directory `ogbn_arxiv`); errors for heterogeneous
/// datasets and the binary layout.
fn dataset_root(path: &Path) -> Result<(PathBuf, PathBuf, String)> {
    let root = root(path).ok_or_else(|| {
        if path.join("raw").join("num-node-dict.csv.gz").exists() {
            invalid(path, "a heterogeneous OGB dataset (raw/num-node-dict.csv.gz, as ogbn-mag): tma reads homogeneous graphs only")
        } else {
            invalid(
                path,
                "not an OGB dataset directory: no raw/edge.csv.gz (nor is it the raw/ directory of one)",
            )
        }
    })?;
    let raw = root.join("raw");
    if raw.join("relations").is_dir() || raw.join("num-node-dict.csv.gz").exists() {
        return Err(invalid(
            &root,
            "a heterogeneous OGB dataset (raw/relations/, as ogbn-mag): tma reads homogeneous \
             graphs only",
        ));
    }
    let dir_name = root
        .canonicalize()
        .unwrap_or_else(|_| root.clone())
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "ogb".into());
    let name = match (
        dir_name.strip_prefix("ogbn_"),
        dir_name.strip_prefix("ogbl_"),
    ) {
        (Some(rest), _) => format!("ogbn-{rest}"),
        (_, Some(rest)) => format!("ogbl-{rest}"),
        _ => dir_name.clone(),
    };
    if !raw.join("edge.csv.gz").exists() && !raw.join("edge.csv").exists() {
        return Err(invalid(
            &raw,
            "the binary OGB layout (raw/data.npz, as ogbn-papers100M ships) is not read by \
             this version; tma reads the CSV layout (raw/edge.csv.gz, ...)",
        ));
    }
    Ok((root, raw, name))
}

/// The arcs of `edge_path` (`src,dst` per line; blocks of lines parsed in parallel) and the
/// largest id, ids checked against the node count of `nn_path` when known, the count against
/// `raw/num-edge-list` when present.
fn read_edges(
    raw: &Path,
    edge_path: &Path,
    nn_path: &Path,
    known_n: Option<usize>,
) -> Result<(Vec<u32>, Vec<u32>, Option<u64>)> {
    let bound = known_n.map_or(u32::MAX as u64, |n| n as u64);
    let blocks = scan_blocks(edge_path, |first, block| {
        let (mut src, mut dst) = (Vec::new(), Vec::new());
        let mut max_id: Option<u64> = None;
        for (ln, line) in block_lines(first, block) {
            if line.trim_ascii().is_empty() {
                continue;
            }
            let mut it = line.split(|&b| b == b',');
            let (Some(a), Some(b), None) = (it.next(), it.next(), it.next()) else {
                let k = line.split(|&b| b == b',').count();
                return Err(at_line(
                    edge_path,
                    ln,
                    format!(
                        "wrong column count: {k} field{} where an edge has 2 (src,dst)",
                        if k == 1 { "" } else { "s" }
                    ),
                ));
            };
            let mut ids = [0u32; 2];
            for (k, tok) in [a, b].into_iter().enumerate() {
                let v = parse_id(tok).map_err(|e| at_line(edge_path, ln, e))?;
                if v >= bound {
                    return Err(at_line(
                        edge_path,
                        ln,
                        match known_n {
                            Some(n) => format!(
                                "node id {v} out of range ({} says {n} nodes)",
                                nn_path.display()
                            ),
                            None => format!("node id {v} exceeds the u32 id space of tma"),
                        },
                    ));
                }
                max_id = Some(max_id.map_or(v, |m| m.max(v)));
                ids[k] = v as u32;
            }
            src.push(ids[0]);
            dst.push(ids[1]);
        }
        Ok((src, dst, max_id))
    })?;
    let total: usize = blocks.iter().map(|b| b.0.len()).sum();
    let (mut src, mut dst) = (Vec::with_capacity(total), Vec::with_capacity(total));
    let mut max_id: Option<u64> = None;
    for (s, d, m) in blocks {
        src.extend_from_slice(&s);
        dst.extend_from_slice(&d);
        max_id = max_id.max(m);
    }
    let ne_path = csv_file(raw, "num-edge-list");
    if ne_path.exists() {
        let e = read_count(&ne_path)?;
        if e != src.len() as u64 {
            return Err(invalid(
                &ne_path,
                format!(
                    "says {e} edges, but {} holds {}",
                    edge_path.display(),
                    src.len()
                ),
            ));
        }
    }
    Ok((src, dst, max_id))
}

/// The rows of `feat_path` when it exists (blocks of rows parsed in parallel): `(rows, dim,
/// values)`, every row as wide as the first.
fn read_features(feat_path: &Path) -> Result<Option<(usize, usize, Vec<f32>)>> {
    Ok(if feat_path.exists() {
        // per block: (first line, width of its first row, rows, values)
        let blocks = scan_blocks(feat_path, |first, block| {
            let mut dim: Option<usize> = None;
            let mut data = Vec::new();
            let mut rows = 0usize;
            for (ln, line) in block_lines(first, block) {
                if line.trim_ascii().is_empty() {
                    continue;
                }
                let before = data.len();
                for (c, tok) in line.split(|&b| b == b',').enumerate() {
                    data.push(
                        parse_f32(tok)
                            .map_err(|e| at_line(feat_path, ln, format!("column {c}: {e}")))?,
                    );
                }
                let k = data.len() - before;
                match dim {
                    None => dim = Some(k),
                    Some(d) if d != k => {
                        return Err(at_line(
                            feat_path,
                            ln,
                            format!("wrong column count: {k} values where the first row has {d}"),
                        ))
                    }
                    _ => {}
                }
                rows += 1;
            }
            Ok((first, dim, rows, data))
        })?;
        let mut dim: Option<usize> = None;
        let total: usize = blocks.iter().map(|b| b.3.len()).sum();
        let mut data = Vec::with_capacity(total);
        let mut rows = 0usize;
        for (first, d, r, v) in blocks {
            match (dim, d) {
                (None, _) => dim = d,
                (Some(a), Some(b)) if a != b => {
                    return Err(at_line(
                        feat_path,
                        first,
                        format!("wrong column count: {b} values where the first row has {a}"),
                    ))
                }
                _ => {}
            }
            rows += r;
            data.extend_from_slice(&v);
        }
        Some((rows, dim.unwrap_or(0), data))
    } else {
        None
    })
}

/// The labels of `label_path` when it exists: one class per line, or one 0/1 row per node.
fn read_labels(label_path: &Path) -> Result<Option<RawLabels>> {
    Ok(if label_path.exists() {
        Some(scan(label_path, |lines| {
            let mut classes_v = Vec::new();
            let mut multi: Option<(usize, Vec<u8>)> = None;
            while let Some((ln, line)) = lines.next_line()? {
                if line.trim_ascii().is_empty() {
                    continue;
                }
                let fields: Vec<&[u8]> = line.split(|&b| b == b',').collect();
                if fields.len() == 1 && multi.is_none() {
                    let t = trim(fields[0]);
                    let c = if t.is_empty() || t.eq_ignore_ascii_case(b"nan") || t == b"-1" {
                        -1
                    } else {
                        parse_id(t)
                            .map_err(|e| at_line(label_path, ln, e.replace("node id", "label")))?
                            as i64
                    };
                    classes_v.push(c);
                } else {
                    let (c, m) = multi.get_or_insert_with(|| (fields.len(), Vec::new()));
                    if fields.len() != *c || !classes_v.is_empty() {
                        return Err(at_line(
                            label_path,
                            ln,
                            format!(
                                "wrong column count: {} labels where the first row has {}",
                                fields.len(),
                                if classes_v.is_empty() { *c } else { 1 }
                            ),
                        ));
                    }
                    for (j, tok) in fields.iter().enumerate() {
                        match trim(tok) {
                            b"0" | b"0.0" => m.push(0),
                            b"1" | b"1.0" => m.push(1),
                            other => {
                                return Err(at_line(
                                    label_path,
                                    ln,
                                    format!(
                                        "column {j}: multi-label entry {:?} must be 0 or 1",
                                        show(other)
                                    ),
                                ))
                            }
                        }
                    }
                }
            }
            Ok((classes_v, multi))
        })?)
    } else {
        None
    })
}

/// The notes on what is not read, the direction, and the [`Raw`] of an OGB directory.
#[allow(clippy::too_many_arguments)]
fn finish(
    root: PathBuf,
    raw: PathBuf,
    name: String,
    n: usize,
    src: Vec<u32>,
    dst: Vec<u32>,
    edge_path: PathBuf,
    features: Option<Features>,
    labels: Labels,
    split: Option<RawSplit>,
    num_splits: usize,
    mut notes: Vec<String>,
    link: Option<StoredLinkSplit>,
    undirected: bool,
) -> Result<Raw> {
    // ---- what is not read
    if let Ok(rd) = std::fs::read_dir(&raw) {
        let known = [
            "edge",
            "num-node-list",
            "num-edge-list",
            "node-feat",
            "node-label",
        ];
        let mut ignored: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|f| {
                let stem = f
                    .strip_suffix(".csv.gz")
                    .or_else(|| f.strip_suffix(".csv"))
                    .unwrap_or(f);
                !known.contains(&stem)
            })
            .collect();
        ignored.sort();
        if !ignored.is_empty() {
            notes.push(format!(
                "{}: not read: {} (edge features and extra node attributes are not used)",
                raw.display(),
                ignored.join(", ")
            ));
        }
    }

    let inverse = if link.is_some() {
        add_inverse_edge_link(&name)
    } else {
        add_inverse_edge(&name)
    };
    let direction = match (undirected, inverse) {
        (true, _) | (false, Some(true)) => Direction::Undirected,
        (false, Some(false)) => {
            notes.push(format!(
                "{name}: edges read as directed arcs, as OGB stores this dataset (pass \
                 --undirected for the symmetrized graph)"
            ));
            Direction::Directed
        }
        (false, None) if link.is_some() => {
            notes.push(format!(
                "{}: not an ogbl dataset tma knows (citation2, collab, ppa, ddi): edges read as \
                 directed arcs (pass --undirected if OGB adds inverse edges for it)",
                root.display()
            ));
            Direction::Directed
        }
        (false, None) => {
            notes.push(format!(
                "{}: not an ogbn dataset tma knows (arxiv, products, proteins, papers100M): \
                 edges read as directed arcs (pass --undirected if OGB adds inverse edges for \
                 it)",
                root.display()
            ));
            Direction::Directed
        }
    };

    Ok(Raw {
        name,
        direction,
        num_nodes: n,
        src,
        dst,
        edge_file: edge_path,
        features,
        labels,
        split,
        num_splits,
        notes,
        node_ids: None,
        link,
    })
}
