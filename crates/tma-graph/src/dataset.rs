//! Datasets: a graph with node features, labels and an optional split, loaded from a directory
//! in the layout of `docs/dataset-format.md` ([`crate::load_dataset`]).
//!
//! # Directory layout
//!
//! | file | dtype / shape | required |
//! |---|---|---|
//! | `meta.json` | JSON with at least `directed` (bool); `name`, `computed.nodes`, `x_shape` used when present | yes |
//! | `edge_index.npy` | int64 `[2, E]`, row 0 = source, row 1 = destination | yes |
//! | `x_indptr.npy`, `x_indices.npy`, `x_data.npy` | int64 `[N+1]`, int64 `[nnz]`, float32 `[nnz]`; shape in `meta.json:x_shape` | no (all three or none) |
//! | `y.npy` | int64 `[N]` (class, `-1` = unlabelled) or uint8 `[N, C]` (multi-label 0/1) | no |
//! | `train_idx.npy`, `val_idx.npy`, `test_idx.npy` | int64 `[k]` node ids | no (all three or none) |
//! | `train_masks.npy`, `val_masks.npy`, `test_masks.npy` | bool `[S, N]` (C or Fortran order) | no (all three or none) |
//!
//! Other files (`traffic.npy`, `year.npy`, ...) are ignored.

use std::path::{Path, PathBuf};

use rand_distr::{Distribution, StandardNormal};

use crate::csr::Csr;
use crate::error::{GraphError, Result};
use crate::features::{Features, DENSIFY_DENSITY, DENSIFY_MAX_DIM};
use crate::npy::NpyFile;
use crate::seed::{self, Purpose};

/// Node labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Labels {
    /// The dataset has no labels (e.g. link-prediction-only graphs).
    None,
    /// Single-label classification. `y: [num_nodes]`, values in `0..num_classes`, `-1` marks an
    /// unlabelled node. `num_classes = max(y) + 1` (0 if every node is unlabelled).
    Classes {
        /// Class per node `[num_nodes]`, `-1` = unlabelled.
        y: Vec<i32>,
        /// Number of classes (`max(y) + 1`).
        num_classes: usize,
    },
    /// Multi-label classification. `y: [num_nodes * num_labels]`, row-major, each entry 0 or 1.
    MultiLabel {
        /// Number of labels `C`.
        num_labels: usize,
        /// `[num_nodes * num_labels]`, row-major, 0/1.
        y: Vec<u8>,
    },
}

impl Labels {
    /// Whether node `v` carries a label (`Classes`: `y[v] >= 0`; `MultiLabel`: always;
    /// `None`: never).
    pub fn is_labelled(&self, v: usize) -> bool {
        match self {
            Labels::None => false,
            Labels::Classes { y, .. } => y[v] >= 0,
            Labels::MultiLabel { .. } => true,
        }
    }
}

/// A node split. Each list holds node ids (global, `< num_nodes`), sorted ascending, without
/// duplicates. The three lists are disjoint when produced by [`crate::random_node_split`]; a
/// dataset's own split is taken as stored.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct NodeSplit {
    /// Training nodes.
    pub train: Vec<u32>,
    /// Validation nodes.
    pub val: Vec<u32>,
    /// Test nodes.
    pub test: Vec<u32>,
}

/// A graph dataset.
#[derive(Clone, Debug)]
pub struct Dataset {
    /// Dataset name (`meta.json:name`, else the directory name).
    pub name: String,
    /// Whether `edge_index` lists arcs (true) or both directions of undirected edges (false).
    pub directed: bool,
    /// In-neighbour CSR of the whole graph: row `v` holds the sources of arcs `u -> v`.
    /// Sorted rows, no duplicate arcs, no self-loops. Undirected graphs are symmetric.
    pub graph: Csr,
    /// Node features `[num_nodes, dim]`.
    pub features: Features,
    /// True when the dataset has no features and [`structural_features`] were generated.
    pub structural_features: bool,
    /// Node labels.
    pub labels: Labels,
    /// The dataset's own split, if it ships one.
    pub split: Option<NodeSplit>,
    /// What the loader removed from the edge list (self-loops, duplicate arcs).
    pub removed: RemovedArcs,
    /// Fixed splits the dataset ships: 0 (none), 1 (`*_idx.npy`, or masks of one row), or `S`
    /// mask rows (`--split-index` picks one).
    pub num_splits: usize,
    /// The link split the dataset ships (an on-disk graph with `link_val.bin` /
    /// `link_test.bin`, docs/graph-format.md): `graph` is then the **training** graph, without
    /// the held-out pairs. `None`: link prediction splits the graph itself
    /// ([`crate::link_split`]).
    pub link_split: Option<StoredLinkSplit>,
}

/// A link split stored with the graph (OGB convention: the stored graph is the training graph;
/// the held-out pairs are absent from it in both directions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredLinkSplit {
    /// Validation positives `(u, v)` (`u < v` for undirected graphs), `[n_val]`.
    pub val_pos: Vec<(u32, u32)>,
    /// Test positives, `[n_test]`.
    pub test_pos: Vec<(u32, u32)>,
    /// The fixed negatives stored with the split; `None`: drawn when a run starts
    /// ([`crate::link_negatives`], from the run's seed).
    pub negatives: Option<StoredNegatives>,
    /// Where the split was read (the graph directory), for the line that says it is used.
    pub source: String,
    /// The protocol of the dataset the split comes from, when the dataset defines one (OGB's
    /// link-property datasets: its name, metric and, for ogbl-collab/ppa/ddi, the negatives
    /// shared by every positive); `None` for a split tma made (`tma generate`).
    pub protocol: Option<Box<LinkProtocol>>,
}

/// A link-prediction protocol given by a dataset (OGB's `ogb.linkproppred.Evaluator`): the
/// negatives are used as given, never redrawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkProtocol {
    /// The dataset's name, e.g. `ogbl-citation2`, `ogbl-collab`.
    pub dataset: String,
    /// `Some(K)`: the dataset reports Hits@K against [`LinkProtocol::shared`] (ogbl-collab 50,
    /// ogbl-ppa 100, ogbl-ddi 20); `None`: MRR against the per-source negatives of
    /// [`StoredLinkSplit::negatives`] (ogbl-citation2).
    pub hits_k: Option<usize>,
    /// Negatives shared by every positive of a split (OGB's `edge_neg`); `None` when the
    /// negatives are per source ([`StoredLinkSplit::negatives`]).
    pub shared: Option<SharedNegatives>,
}

/// Negative pairs shared by every positive of their split (OGB's `edge_neg` of ogbl-collab,
/// ogbl-ppa, ogbl-ddi): Hits@K ranks each positive's score against the K-th highest score of
/// all of them (`ogb.linkproppred.Evaluator._eval_hits`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedNegatives {
    /// Validation negatives `(u, v)` as given, `[m_val]`.
    pub val: Vec<(u32, u32)>,
    /// Test negatives `(u, v)` as given, `[m_test]`.
    pub test: Vec<(u32, u32)>,
}

/// Fixed evaluation negatives stored with a link split (per source, OGB's citation2 protocol).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredNegatives {
    /// Negatives per positive.
    pub num_neg: usize,
    /// The seed they were drawn with.
    pub seed: u64,
    /// `[val_pos.len() * num_neg]` row-major: destinations `w` ranked against `val_pos[i]` as
    /// pairs `(u, w)` (mapped from `link_val_neg.bin`).
    pub val: crate::buf::Buf<u32>,
    /// `[test_pos.len() * num_neg]`, same layout (`link_test_neg.bin`).
    pub test: crate::buf::Buf<u32>,
}

/// Arcs of the edge list the loader did not keep (the graph has no self-loops and no duplicate
/// arcs). Counted in arcs as stored: an undirected duplicate edge stored in both directions
/// counts twice.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RemovedArcs {
    /// Arcs `v -> v` dropped.
    pub self_loops: usize,
    /// Repeated arcs merged into one (each extra copy counts once).
    pub duplicate_arcs: usize,
    /// The file the arcs were read from, as given (`DIR/edge_index.npy` of tma's `.npy`
    /// layout, the CSV or SNAP file, OGB's `raw/edge.csv.gz`, the `.npz` file); the warning
    /// names it. Empty when nothing was read from a file (an empty default names "the edge
    /// list"). Not serialized: `summary.json` records the two counts.
    #[serde(skip)]
    pub file: String,
}

impl RemovedArcs {
    /// `DIR/edge_index.npy: removed 2 self-loops and 3 duplicate arcs on load (the graph keeps
    /// neither)`, naming [`RemovedArcs::file`] (None when nothing was removed).
    pub fn warning(&self) -> Option<String> {
        if self.self_loops == 0 && self.duplicate_arcs == 0 {
            return None;
        }
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let file = if self.file.is_empty() {
            "the edge list"
        } else {
            &self.file
        };
        Some(format!(
            "{file}: removed {} and {} on load (the graph keeps neither)",
            plural(self.self_loops, "self-loop", "self-loops"),
            plural(self.duplicate_arcs, "duplicate arc", "duplicate arcs")
        ))
    }
}

impl Dataset {
    /// Number of nodes `N`.
    pub fn num_nodes(&self) -> usize {
        self.graph.num_nodes()
    }

    /// Number of stored arcs (an undirected edge counts twice, PyG convention).
    pub fn num_edges(&self) -> usize {
        self.graph.num_edges()
    }

    /// One line: name, nodes, arcs, feature dim dense/sparse, labels, split sizes.
    ///
    /// Example: `planetoid_cora: 2708 nodes, 10556 arcs (undirected), features 1433-d sparse
    /// (nnz 49216), 7 classes, split 140/500/1000`.
    pub fn summary(&self) -> String {
        let feats = match &self.features {
            Features::Dense { dim, .. } if self.structural_features => {
                format!("no node features ({dim} structural columns generated: degree + random)")
            }
            Features::Dense { dim, .. } => format!("features {dim}-d dense"),
            Features::Sparse { dim, indices, .. } => {
                format!("features {dim}-d sparse (nnz {})", indices.len())
            }
        };
        let labels = match &self.labels {
            Labels::None => "no labels".to_string(),
            Labels::Classes { num_classes, .. } => format!("{num_classes} classes"),
            Labels::MultiLabel { num_labels, .. } => format!("multi-label {num_labels}"),
        };
        let split = match &self.split {
            Some(s) => format!("split {}/{}/{}", s.train.len(), s.val.len(), s.test.len()),
            None if self.link_split.is_some() => "no node split".to_string(),
            // without labels there is no node task, so only the link split is made
            None if matches!(self.labels, Labels::None) => {
                "no fixed split (tma train --task link holds edges out)".to_string()
            }
            None => "no fixed split (tma train makes a seeded one: 60/20/20 of the labelled nodes for node tasks, held-out edges for link prediction)".to_string(),
        };
        let split = match &self.link_split {
            Some(l) => format!(
                "{split}, stored link split {}/{} held-out pairs ({}; the graph is the training graph)",
                l.val_pos.len(),
                l.test_pos.len(),
                match (&l.negatives, l.protocol.as_deref()) {
                    (_, Some(LinkProtocol { dataset, hits_k, shared: Some(sh) })) => format!(
                        "{}/{} negative pairs shared by all, as {dataset} gives them, Hits@{}",
                        sh.val.len(),
                        sh.test.len(),
                        hits_k.unwrap_or(50)
                    ),
                    (Some(n), Some(p)) => {
                        format!("{} fixed negatives each, as {} gives them, MRR", n.num_neg, p.dataset)
                    }
                    (Some(n), None) => format!("{} fixed negatives each", n.num_neg),
                    (None, _) => "negatives drawn by each run".into(),
                }
            ),
            None => split,
        };
        format!(
            "{}: {} nodes, {} arcs ({}), {}, {}, {}",
            self.name,
            self.num_nodes(),
            self.num_edges(),
            if self.directed {
                "directed"
            } else {
                "undirected"
            },
            feats,
            labels,
            split
        )
    }
}

/// Options of [`crate::load_dataset`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    /// Which of the `S` mask splits to use when the dataset ships `*_masks.npy` (default 0).
    pub split_index: usize,
    /// Width of the generated [`structural_features`] for featureless graphs (default 32, must
    /// be >= 1).
    pub structural_dim: usize,
    /// Seed of the random columns of the structural features (default 0).
    pub seed: u64,
    /// Accept a fixed split whose train/val/test lists share nodes (default false: an overlap
    /// is an error naming both files).
    pub allow_split_overlap: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            split_index: 0,
            structural_dim: 32,
            seed: 0,
            allow_split_overlap: false,
        }
    }
}

fn invalid(path: &Path, reason: impl Into<String>) -> GraphError {
    GraphError::Invalid {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// [`NpyFile::read`], with `expected` (the dtype the file must have) in the error for an
/// object (pickled) array.
fn read_npy(path: &Path, expected: &str) -> Result<NpyFile> {
    NpyFile::read(path).map_err(|e| match e {
        GraphError::Dtype { path, found, .. } => GraphError::Dtype {
            path,
            expected: expected.to_string(),
            found,
        },
        other => other,
    })
}

/// Index of element `(r, c)` of a 2-D array with `shape = [rows, cols]` in storage order.
#[inline]
fn idx2(fortran: bool, rows: usize, cols: usize, r: usize, c: usize) -> usize {
    if fortran {
        c * rows + r
    } else {
        r * cols + c
    }
}

/// The files of tma's .npy layout that mark a directory as one (`meta.json` aside).
pub(crate) const NPY_LAYOUT_FILES: [&str; 5] = [
    "edge_index.npy",
    "y.npy",
    "x_indptr.npy",
    "train_idx.npy",
    "train_masks.npy",
];

/// The error of a .npy layout directory `dir` without its `meta.json`: called missing
/// (`NotFound`), naming the directory and what the file must hold.
pub(crate) fn meta_json_missing(dir: &Path) -> GraphError {
    GraphError::Io {
        path: dir.join("meta.json"),
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "meta.json not found in {}: tma's .npy layout needs it next to edge_index.npy, \
                 with at least {{\"directed\": false}} or true (docs/dataset-format.md)",
                dir.display()
            ),
        ),
    }
}

/// Reads a directory of the `.npy` layout (the module docs): the rules and errors of
/// [`crate::load_dataset`], which opens a directory of the on-disk format instead when it is one.
pub(crate) fn load_npy_dir(dir: &Path, opts: &LoadOptions) -> Result<Dataset> {
    let Meta {
        path: meta_path,
        name,
        directed,
        nodes: meta_nodes,
        classes: meta_classes,
        value: meta,
    } = read_meta(dir)?;

    // ---- which optional files exist
    let p = |f: &str| dir.join(f);
    let x_files = [p("x_indptr.npy"), p("x_indices.npy"), p("x_data.npy")];
    let has_x = x_files.iter().any(|f| f.exists());
    let x_shape = if has_x {
        Some(x_shape(&meta, &meta_path)?)
    } else {
        None
    };

    // ---- edge_index
    let ei = read_npy(&p("edge_index.npy"), "<i8 (int64) [2, E]")?;
    ei.expect_ndim(2, "[2, E]")?;
    if ei.shape()[0] != 2 {
        return Err(ei.shape_err("[2, E]"));
    }
    let ev = ei.storage_vec::<i64>()?;
    for &v in &ev {
        if v < 0 {
            return Err(GraphError::IdOutOfRange {
                path: ei.path().to_path_buf(),
                id: v,
                num_nodes: meta_nodes.unwrap_or(u32::MAX as u64),
            });
        }
    }

    // ---- labels file (read early: it may define N)
    let y_path = p("y.npy");
    let y_raw = if y_path.exists() {
        Some(read_npy(
            &y_path,
            "<i8 (int64) [N] classes or |u1 (uint8) [N, C] multi-label",
        )?)
    } else {
        None
    };

    // ---- N
    let n: u64 = match meta_nodes {
        Some(n) => n,
        None => {
            let mut n = ev.iter().copied().max().map(|m| m as u64 + 1).unwrap_or(0);
            if let Some(y) = &y_raw {
                n = n.max(y.shape().first().copied().unwrap_or(0));
            }
            if let Some((r, _)) = x_shape {
                n = n.max(r);
            }
            n
        }
    };
    if n > u32::MAX as u64 {
        return Err(invalid(
            &meta_path,
            format!("{n} nodes exceed the u32 id space"),
        ));
    }
    let nu = n as usize;

    // ---- graph
    let (graph, removed) = read_graph(&ei, ev, n, directed)?;

    // ---- features
    let (features, structural) = if let Some((rows, dim)) = x_shape {
        if rows != n {
            return Err(invalid(
                &meta_path,
                format!("`x_shape[0]` = {rows} but the graph has {n} nodes"),
            ));
        }
        (read_features(&x_files, nu, dim)?, false)
    } else {
        if opts.structural_dim == 0 {
            return Err(invalid(dir, "LoadOptions::structural_dim must be >= 1"));
        }
        (
            structural_features(&graph, directed, opts.structural_dim, opts.seed),
            true,
        )
    };

    // ---- labels
    let labels = match y_raw {
        None => Labels::None,
        Some(y) => read_labels(&y, nu)?,
    };
    if let (Some(c), Labels::Classes { y, num_classes }) = (meta_classes, &labels) {
        if *num_classes as u64 > c {
            let max = *num_classes as i32 - 1;
            let v = y.iter().position(|&l| l == max).unwrap_or(0);
            return Err(invalid(
                &y_path,
                format!(
                    "label of node {v} is {max}, but meta.json says computed.classes = {c} \
                     (class ids must be < {c})"
                ),
            ));
        }
    }

    // ---- split
    let (split, num_splits) = read_split(dir, nu, opts)?;

    Ok(Dataset {
        name,
        directed,
        graph,
        features,
        structural_features: structural,
        labels,
        split,
        removed,
        num_splits,
        link_split: None,
    })
}

/// What `meta.json` says.
struct Meta {
    path: PathBuf,
    value: serde_json::Value,
    name: String,
    directed: bool,
    nodes: Option<u64>,
    classes: Option<u64>,
}

/// Reads `dir/meta.json`: `name` (default: the directory's name), `directed` (required),
/// `computed.nodes` and `computed.classes` (optional).
fn read_meta(dir: &Path) -> Result<Meta> {
    let meta_path = dir.join("meta.json");
    let meta_text = std::fs::read_to_string(&meta_path).map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            meta_json_missing(dir)
        } else {
            GraphError::Io {
                path: meta_path.clone(),
                source,
            }
        }
    })?;
    let meta: serde_json::Value = serde_json::from_str(&meta_text)
        .map_err(|e| invalid(&meta_path, format!("not valid JSON: {e}")))?;
    let name = meta
        .get("name")
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| {
            dir.file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
    let directed = meta
        .get("directed")
        .and_then(|v| v.as_bool())
        .ok_or_else(|| invalid(&meta_path, "missing or non-boolean field `directed`"))?;
    let meta_nodes = match meta.get("computed").and_then(|c| c.get("nodes")) {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or_else(|| invalid(&meta_path, "`computed.nodes` is not an integer"))?,
        ),
    };

    let meta_classes = match meta.get("computed").and_then(|c| c.get("classes")) {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .ok_or_else(|| invalid(&meta_path, "`computed.classes` is not an integer"))?,
        ),
    };
    Ok(Meta {
        path: meta_path,
        value: meta,
        name,
        directed,
        nodes: meta_nodes,
        classes: meta_classes,
    })
}

/// `meta.json`'s `x_shape` `[rows, dim]`, required when feature files are present.
fn x_shape(meta: &serde_json::Value, meta_path: &Path) -> Result<(u64, u64)> {
    let arr = meta
        .get("x_shape")
        .and_then(|v| v.as_array())
        .ok_or_else(|| invalid(meta_path, "feature files present but `x_shape` missing"))?;
    match arr.as_slice() {
        [a, b] => match (a.as_u64(), b.as_u64()) {
            (Some(a), Some(b)) => Ok((a, b)),
            _ => Err(invalid(meta_path, "`x_shape` must hold two integers")),
        },
        _ => Err(invalid(meta_path, "`x_shape` must hold two integers")),
    }
}

/// The graph of `edge_index` (`ev`, its values, `[2, E]`) over `n` nodes: ids checked, self-loops
/// dropped and duplicate arcs merged (both counted), symmetry checked when undirected.
fn read_graph(ei: &NpyFile, ev: Vec<i64>, n: u64, directed: bool) -> Result<(Csr, RemovedArcs)> {
    let e = ei.shape()[1] as usize;
    let nu = n as usize;
    let mut src = Vec::with_capacity(e);
    let mut dst = Vec::with_capacity(e);
    let mut self_loops = 0usize;
    for k in 0..e {
        let s = ev[idx2(ei.fortran_order(), 2, e, 0, k)];
        let d = ev[idx2(ei.fortran_order(), 2, e, 1, k)];
        for v in [s, d] {
            if v as u64 >= n {
                return Err(GraphError::IdOutOfRange {
                    path: ei.path().to_path_buf(),
                    id: v,
                    num_nodes: n,
                });
            }
        }
        if s != d {
            src.push(s as u32);
            dst.push(d as u32);
        } else {
            self_loops += 1;
        }
    }
    drop(ev);
    let graph = Csr::from_edges(nu, &src, &dst);
    let removed = RemovedArcs {
        self_loops,
        duplicate_arcs: src.len() - graph.num_edges(),
        file: ei.path().display().to_string(),
    };
    drop((src, dst));
    if !directed {
        check_symmetric(&graph, ei.path())?;
    }
    Ok((graph, removed))
}

/// The fixed split of the `nu` nodes: `*_idx.npy` (one split) or row `opts.split_index` of
/// `*_masks.npy`, with the number of splits; disjoint unless `opts.allow_split_overlap`.
fn read_split(dir: &Path, nu: usize, opts: &LoadOptions) -> Result<(Option<NodeSplit>, usize)> {
    let p = |f: &str| dir.join(f);
    let n = nu as u64;
    let idx_files = [p("train_idx.npy"), p("val_idx.npy"), p("test_idx.npy")];
    let mask_files = [
        p("train_masks.npy"),
        p("val_masks.npy"),
        p("test_masks.npy"),
    ];
    let mut num_splits = 0usize;
    let split = if idx_files.iter().any(|f| f.exists()) {
        let mut parts = Vec::with_capacity(3);
        for f in &idx_files {
            let r = read_npy(f, "<i8 (int64) [k] node ids")?;
            r.expect_ndim(1, "[k]")?;
            let mut ids = r.ids(n)?;
            ids.sort_unstable();
            if ids.windows(2).any(|w| w[0] == w[1]) {
                return Err(invalid(f, "duplicate node ids"));
            }
            parts.push(ids);
        }
        if opts.split_index > 0 {
            return Err(invalid(
                &idx_files[0],
                format!(
                    "split_index {} out of range: index files hold one split (index 0)",
                    opts.split_index
                ),
            ));
        }
        num_splits = 1;
        let test = parts.pop().unwrap();
        let val = parts.pop().unwrap();
        let train = parts.pop().unwrap();
        Some(NodeSplit { train, val, test })
    } else if mask_files.iter().any(|f| f.exists()) {
        let mut parts = Vec::with_capacity(3);
        let mut num_splits_masks = None;
        for f in &mask_files {
            let r = read_npy(f, "|b1 (bool) [S, N]")?;
            let (s, fortran) = match r.shape() {
                [len] if *len == n => (1usize, false),
                [s, len] if *len == n => (*s as usize, r.fortran_order()),
                _ => return Err(r.shape_err(&format!("[S, {n}]"))),
            };
            if let Some(prev) = num_splits_masks {
                if prev != s {
                    return Err(r.shape_err(&format!("[{prev}, {n}] (as the other mask files)")));
                }
            }
            num_splits_masks = Some(s);
            if opts.split_index >= s {
                return Err(invalid(
                    f,
                    format!(
                        "split_index {} out of range: the file holds {s} splits",
                        opts.split_index
                    ),
                ));
            }
            let m = r.raw::<bool>()?;
            let row = opts.split_index;
            let ids: Vec<u32> = (0..nu)
                .filter(|&v| m[idx2(fortran, s, nu, row, v)] != 0)
                .map(|v| v as u32)
                .collect();
            parts.push(ids);
        }
        num_splits = num_splits_masks.unwrap_or(0);
        let test = parts.pop().unwrap();
        let val = parts.pop().unwrap();
        let train = parts.pop().unwrap();
        Some(NodeSplit { train, val, test })
    } else {
        None
    };

    if let Some(sp) = &split {
        if !opts.allow_split_overlap {
            let names = if idx_files.iter().any(|f| f.exists()) {
                &idx_files
            } else {
                &mask_files
            };
            check_split_disjoint(sp, names, opts.split_index)?;
        }
    }
    Ok((split, num_splits))
}

/// Common elements of two ascending lists (ascending). Used to check that the lists of a
/// fixed split do not share nodes.
pub fn sorted_intersection(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// Error when two lists of a fixed split share nodes: names both files, the overlap count and
/// the first ids.
pub(crate) fn check_split_disjoint(
    sp: &NodeSplit,
    files: &[PathBuf; 3],
    split_index: usize,
) -> Result<()> {
    let lists = [&sp.train, &sp.val, &sp.test];
    for (a, b) in [(0usize, 1usize), (0, 2), (1, 2)] {
        let common = sorted_intersection(lists[a], lists[b]);
        if !common.is_empty() {
            let first: Vec<String> = common.iter().take(5).map(|v| v.to_string()).collect();
            let row = if files[0].to_string_lossy().ends_with("_masks.npy") {
                format!(" (split index {split_index})")
            } else {
                String::new()
            };
            return Err(invalid(
                &files[a],
                format!(
                    "{} of this split{row} also {} in {} (first: {}{}); a node must be in \
                     one of train/val/test only (pass --allow-split-overlap to use it anyway)",
                    if common.len() == 1 {
                        "1 node".to_string()
                    } else {
                        format!("{} nodes", common.len())
                    },
                    if common.len() == 1 {
                        "appears"
                    } else {
                        "appear"
                    },
                    files[b].display(),
                    first.join(", "),
                    if common.len() > 5 { ", ..." } else { "" }
                ),
            ));
        }
    }
    Ok(())
}

/// Check that every arc `u -> v` has its reverse (rows must be sorted).
fn check_symmetric(g: &Csr, path: &Path) -> Result<()> {
    match g.missing_reverse() {
        None => Ok(()),
        Some((u, v)) => Err(invalid(
            path,
            format!("graph is marked undirected but arc {u} -> {v} has no reverse {v} -> {u}"),
        )),
    }
}

fn read_features(files: &[PathBuf; 3], n: usize, dim: u64) -> Result<Features> {
    let ip = read_npy(&files[0], "<i8 (int64) [N + 1]")?;
    let ix = read_npy(&files[1], "<i8 (int64) [nnz]")?;
    let dx = read_npy(&files[2], "<f4 (float32) [nnz]")?;
    if ip.shape() != [n as u64 + 1] {
        return Err(ip.shape_err(&format!("[{}] (num_nodes + 1)", n + 1)));
    }
    ix.expect_ndim(1, "[nnz]")?;
    let nnz = ix.shape()[0];
    if dx.shape() != [nnz] {
        return Err(dx.shape_err(&format!("[{nnz}] (as x_indices)")));
    }
    let indptr_i = ip.storage_vec::<i64>()?;
    if indptr_i[0] != 0 {
        return Err(invalid(
            ip.path(),
            format!("indptr[0] = {} (must be 0)", indptr_i[0]),
        ));
    }
    for (v, w) in indptr_i.windows(2).enumerate() {
        if w[1] < w[0] {
            return Err(invalid(
                ip.path(),
                format!(
                    "indptr not monotone: indptr[{}] = {} > indptr[{}] = {}",
                    v,
                    w[0],
                    v + 1,
                    w[1]
                ),
            ));
        }
    }
    let last = *indptr_i.last().unwrap();
    if last as u64 != nnz {
        return Err(invalid(
            ip.path(),
            format!("indptr[N] = {last} but x_indices holds {nnz} entries"),
        ));
    }
    let indices = ix.ids(dim)?;
    let data = dx.storage_vec::<f32>()?;
    let bad = data.iter().filter(|x| !x.is_finite()).count();
    if bad > 0 {
        let k = data.iter().position(|x| !x.is_finite()).unwrap_or(0);
        // the node whose row holds entry k: last v with indptr[v] <= k
        let v = indptr_i
            .partition_point(|&p| p as usize <= k)
            .saturating_sub(1);
        return Err(invalid(
            dx.path(),
            format!(
                "{bad} non-finite feature value{} (NaN or infinity); the first is entry {k} \
                 (node {v}, column {}) = {}",
                if bad == 1 { "" } else { "s" },
                indices[k],
                data[k]
            ),
        ));
    }
    let dim = dim as usize;
    let dense_cells = n as f64 * dim as f64;
    let densify = dim <= DENSIFY_MAX_DIM || (nnz as f64) > DENSIFY_DENSITY * dense_cells;
    if densify {
        let mut out = vec![0f32; n * dim];
        for v in 0..n {
            let (a, b) = (indptr_i[v] as usize, indptr_i[v + 1] as usize);
            for k in a..b {
                out[v * dim + indices[k] as usize] += data[k];
            }
        }
        Ok(Features::Dense {
            num_nodes: n,
            dim,
            data: out.into(),
        })
    } else {
        Ok(Features::Sparse {
            num_nodes: n,
            dim,
            indptr: indptr_i.into_iter().map(|x| x as u64).collect(),
            indices,
            data,
        })
    }
}

fn read_labels(y: &NpyFile, n: usize) -> Result<Labels> {
    if y.descr() == "|u1" {
        match y.shape() {
            [r, c] if *r == n as u64 => {
                let c = *c as usize;
                let raw = y.raw::<u8>()?;
                let mut out = vec![0u8; n * c];
                for v in 0..n {
                    for j in 0..c {
                        let b = raw[idx2(y.fortran_order(), n, c, v, j)];
                        if b > 1 {
                            return Err(invalid(
                                y.path(),
                                format!("multi-label entry ({v}, {j}) = {b}, must be 0 or 1"),
                            ));
                        }
                        out[v * c + j] = b;
                    }
                }
                Ok(Labels::MultiLabel {
                    num_labels: c,
                    y: out,
                })
            }
            _ => Err(y.shape_err(&format!("[{n}, C]"))),
        }
    } else {
        if y.descr() != "<i8" {
            return Err(GraphError::Dtype {
                path: y.path().to_path_buf(),
                expected: "<i8 ([N] classes) or |u1 ([N, C] multi-label)".into(),
                found: y.descr().to_string(),
            });
        }
        if y.shape() != [n as u64] {
            return Err(y.shape_err(&format!("[{n}]")));
        }
        let vals = y.storage_vec::<i64>()?;
        let mut out = Vec::with_capacity(n);
        let mut max = -1i64;
        for (v, &c) in vals.iter().enumerate() {
            if !(-1..=i32::MAX as i64).contains(&c) {
                return Err(invalid(
                    y.path(),
                    format!("label of node {v} is {c} (must be -1 or a class id)"),
                ));
            }
            max = max.max(c);
            out.push(c as i32);
        }
        // class ids index the output layer: more classes than nodes (or than MAX_CLASSES)
        // means a corrupt file, not a task (a 10^9-way output layer would exhaust memory)
        if max >= 0 && (max as u64 >= n.max(2) as u64 || max as u64 >= MAX_CLASSES as u64) {
            let v = vals.iter().position(|&c| c == max).unwrap_or(0);
            return Err(invalid(
                y.path(),
                format!(
                    "label of node {v} is {max}, which would mean {} classes for {n} nodes \
                     (class ids must be < min(num_nodes, {MAX_CLASSES}))",
                    max + 1
                ),
            ));
        }
        Ok(Labels::Classes {
            y: out,
            num_classes: (max + 1) as usize,
        })
    }
}

/// Column 0 of [`structural_features`], `[N]`: `ln(1 + degree)` standardized to mean 0 and
/// standard deviation 1 over all nodes (all zeros if every node has the same degree); degree =
/// in-degree, plus out-degree when `directed`. A link-prediction run computes it again on its
/// training graph, so the held-out edges do not count (docs/decisions/0032).
pub fn degree_column(graph: &Csr, directed: bool) -> Vec<f32> {
    let n = graph.num_nodes();
    let mut deg: Vec<f64> = graph.degrees().into_iter().map(|d| d as f64).collect();
    if directed {
        for &u in &graph.indices {
            deg[u as usize] += 1.0;
        }
    }
    let logd: Vec<f64> = deg.iter().map(|d| d.ln_1p()).collect();
    let mean = logd.iter().sum::<f64>() / n.max(1) as f64;
    let var = logd.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n.max(1) as f64;
    let std = var.sqrt();
    logd.iter()
        .map(|&l| {
            if std > 1e-12 {
                ((l - mean) / std) as f32
            } else {
                0.0
            }
        })
        .collect()
}

/// Largest number of classes a single-label `y.npy` may define.
pub const MAX_CLASSES: usize = 1 << 20;

/// "Random node features + degree": structural input features for graphs without features
/// (a known baseline for featureless graphs, cf. Cui et al., *On Positional and Structural Node
/// Features for Graph Neural Networks on Non-attributed Graphs*, 2022).
///
/// Returns dense `[N, dim]` features where
/// * column 0 = `ln(1 + degree)` standardized to mean 0, standard deviation 1 over all nodes
///   (all zeros if every node has the same degree); degree = in-degree, plus out-degree when
///   `directed`;
/// * columns `1..dim` = i.i.d. `N(0, 1) / sqrt(dim)` drawn from
///   [`seed::rng`]`(seed, Purpose::StructuralFeatures)` in row-major order, so the result is a deterministic function of `(graph, dim, seed)`.
///
/// # Panics
/// If `dim == 0`.
pub fn structural_features(graph: &Csr, directed: bool, dim: usize, seed: u64) -> Features {
    assert!(dim >= 1, "structural feature dim must be >= 1");
    let n = graph.num_nodes();
    let degree = degree_column(graph, directed);
    let mut rng = seed::rng(seed, Purpose::StructuralFeatures);
    let scale = 1.0 / (dim as f64).sqrt();
    let mut data = Vec::with_capacity(n * dim);
    for &d in &degree {
        data.push(d);
        for _ in 1..dim {
            let z: f64 = StandardNormal.sample(&mut rng);
            data.push((z * scale) as f32);
        }
    }
    Features::Dense {
        num_nodes: n,
        dim,
        data: data.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: an unlabelled graph (musae_wiki_crocodile, the seal graphs) has no node task,
    /// yet its dataset line promised a 60/20/20 node split.
    #[test]
    fn the_summary_of_an_unlabelled_graph_names_only_the_link_split() {
        let g = Csr::from_edges(3, &[1, 0, 2, 1], &[0, 1, 1, 2]);
        let mut ds = Dataset {
            name: "path3".into(),
            directed: false,
            features: structural_features(&g, false, 2, 0),
            graph: g,
            structural_features: true,
            labels: Labels::None,
            split: None,
            removed: RemovedArcs::default(),
            num_splits: 0,
            link_split: None,
        };
        assert_eq!(
            ds.summary(),
            "path3: 3 nodes, 4 arcs (undirected), no node features (2 structural columns generated: degree + random), no labels, no fixed split (tma train --task link holds edges out)"
        );
        ds.labels = Labels::Classes {
            y: vec![0, 1, 0],
            num_classes: 2,
        };
        assert!(ds.summary().ends_with("2 classes, no fixed split (tma train makes a seeded one: 60/20/20 of the labelled nodes for node tasks, held-out edges for link prediction)"), "{}", ds.summary());
    }

    #[test]
    fn structural_features_degree_column() {
        // star: 0 is the centre of 1, 2, 3 (undirected): degrees 3, 1, 1, 1
        let g = Csr::from_edges(4, &[1, 2, 3, 0, 0, 0], &[0, 0, 0, 1, 2, 3]);
        let Features::Dense { dim, data, .. } = structural_features(&g, false, 3, 9) else {
            panic!()
        };
        assert_eq!(dim, 3);
        // ln4 vs ln2 (x3): standardized to +sqrt(3), -1/sqrt(3)
        let s3 = 3f32.sqrt();
        assert!((data[0] - s3).abs() < 1e-5);
        for v in 1..4 {
            assert!((data[v * 3] + 1.0 / s3).abs() < 1e-5);
        }
        // random columns: scaled by 1/sqrt(dim), deterministic
        let again = structural_features(&g, false, 3, 9);
        assert_eq!(again, structural_features(&g, false, 3, 9));
        // directed: in + out degree; arcs 1->0, 2->0: degrees 2, 1, 1, 0
        let d = Csr::from_edges(4, &[1, 2], &[0, 0]);
        let Features::Dense { data, .. } = structural_features(&d, true, 1, 0) else {
            panic!()
        };
        assert!(data[0] > data[1] && data[1] == data[2] && data[2] > data[3]);
    }
}
