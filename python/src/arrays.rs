//! A [`Dataset`] from in-memory arrays (`tma.Dataset.from_numpy`), with the checks of the
//! `.npy` loader ([`tma_graph::load_dataset`]) and errors that name the argument instead of a
//! file: node ids in range, an undirected graph symmetric, features finite, labels `-1` or
//! `>= 0` (multi-label 0/1), split lists in range, without duplicates and disjoint (unless
//! allowed). Self-loops and duplicate arcs are removed and counted ([`Dataset::removed`]), as
//! the loader does.
//!
//! The arrays are read in place (borrowed slices); what is kept is tma's own layout: the CSR
//! of the graph, the features (one copy into the dataset), labels as `i32` / `u8`, the split
//! as sorted `u32` lists.

use tma_graph::{Csr, Dataset, Features, Labels, NodeSplit, RemovedArcs};

/// Node features as given.
pub enum FeatureArrays<'a> {
    /// None: [`tma_graph::structural_features`] are generated (as for a dataset directory
    /// without `x_*.npy`).
    None,
    /// Row-major `[rows, dim]`.
    Dense {
        /// The values, `rows * dim`.
        data: &'a [f32],
        /// Rows (must be the node count).
        rows: usize,
        /// Columns.
        dim: usize,
    },
    /// CSR rows (`scipy.sparse.csr_matrix`): `indptr [rows + 1]`, `indices` / `data [nnz]`.
    Sparse {
        /// Row offsets.
        indptr: &'a [i64],
        /// Column ids.
        indices: &'a [i64],
        /// Values.
        data: &'a [f32],
        /// Columns.
        dim: usize,
    },
}

/// Labels as given.
pub enum LabelArrays<'a> {
    /// No labels (link prediction only).
    None,
    /// One class per node, `-1` = unlabelled.
    Classes(&'a [i64]),
    /// `[N, C]` row-major 0/1.
    MultiLabel {
        /// The values, `N * C`.
        data: &'a [u8],
        /// `C`.
        num_labels: usize,
    },
}

/// Everything `from_numpy` takes.
pub struct ArrayInput<'a> {
    /// Dataset name (run directories are named after it).
    pub name: String,
    /// `edge_index[0]`: arc sources.
    pub src: &'a [i64],
    /// `edge_index[1]`: arc destinations.
    pub dst: &'a [i64],
    /// Node count; `None`: one more than the largest id in `edge_index`, or the rows of `x`
    /// / `y` when larger.
    pub num_nodes: Option<usize>,
    /// Whether `edge_index` lists arcs (true) or both directions of every undirected edge
    /// (false, PyG's convention; checked).
    pub directed: bool,
    /// Node features.
    pub x: FeatureArrays<'a>,
    /// Node labels.
    pub y: LabelArrays<'a>,
    /// A fixed split `(train, val, test)` of node ids.
    pub split: Option<[&'a [i64]; 3]>,
    /// Accept split lists that share nodes.
    pub allow_split_overlap: bool,
    /// Seed of the structural features' random columns (featureless graphs).
    pub seed: u64,
}

/// Width of generated structural features (the loader's default).
pub const STRUCTURAL_DIM: usize = 32;

/// Builds the dataset; the message names the argument and the problem.
///
/// # Errors
/// A node id out of range or negative, an undirected `edge_index` that is not symmetric,
/// features of the wrong shape or not finite, labels out of range, a bad split list.
pub fn dataset_from_arrays(a: ArrayInput<'_>) -> Result<Dataset, String> {
    if a.src.len() != a.dst.len() {
        return Err(format!(
            "edge_index: rows have {} and {} entries (expected shape [2, E])",
            a.src.len(),
            a.dst.len()
        ));
    }
    let x_rows = match &a.x {
        FeatureArrays::None => None,
        FeatureArrays::Dense { rows, .. } => Some(*rows),
        FeatureArrays::Sparse { indptr, .. } => Some(indptr.len().saturating_sub(1)),
    };
    let y_rows = match &a.y {
        LabelArrays::None => None,
        LabelArrays::Classes(y) => Some(y.len()),
        LabelArrays::MultiLabel { data, num_labels } => Some(data.len() / (*num_labels).max(1)),
    };
    let max_id = a.src.iter().chain(a.dst).copied().max();
    if let Some(k) = a.src.iter().chain(a.dst).position(|&v| v < 0) {
        let (row, col) = if k < a.src.len() {
            (0, k)
        } else {
            (1, k - a.src.len())
        };
        let v = if row == 0 { a.src[col] } else { a.dst[col] };
        return Err(format!(
            "edge_index[{row}, {col}] = {v}: node ids must be >= 0"
        ));
    }
    let n = match a.num_nodes {
        Some(n) => n,
        None => {
            let mut n = max_id.map_or(0, |m| m as usize + 1);
            n = n.max(x_rows.unwrap_or(0)).max(y_rows.unwrap_or(0));
            n
        }
    };
    if n as u64 > u32::MAX as u64 {
        return Err(format!("{n} nodes exceed the u32 id space"));
    }
    if let Some(m) = max_id {
        if m as usize >= n {
            let k = a.src.iter().chain(a.dst).position(|&v| v == m).unwrap_or(0);
            let (row, col) = if k < a.src.len() {
                (0, k)
            } else {
                (1, k - a.src.len())
            };
            return Err(format!(
                "edge_index[{row}, {col}] = {m} is out of range for {n} nodes (num_nodes={n})"
            ));
        }
    }
    for (what, rows) in [("x", x_rows), ("y", y_rows)] {
        if let Some(r) = rows {
            if r != n {
                return Err(format!("{what} has {r} rows but the graph has {n} nodes"));
            }
        }
    }

    // graph: self-loops dropped, duplicates merged (counted)
    let mut src = Vec::with_capacity(a.src.len());
    let mut dst = Vec::with_capacity(a.src.len());
    let mut self_loops = 0usize;
    for (&s, &d) in a.src.iter().zip(a.dst) {
        if s == d {
            self_loops += 1;
        } else {
            src.push(s as u32);
            dst.push(d as u32);
        }
    }
    let graph = Csr::from_edges(n, &src, &dst);
    let removed = RemovedArcs {
        self_loops,
        duplicate_arcs: src.len() - graph.num_edges(),
        file: "edge_index".into(),
    };
    drop((src, dst));
    if !a.directed {
        check_symmetric(&graph)?;
    }

    let (features, structural) = match a.x {
        FeatureArrays::None => (
            tma_graph::structural_features(&graph, a.directed, STRUCTURAL_DIM, a.seed),
            true,
        ),
        FeatureArrays::Dense { data, rows, dim } => {
            if data.len() != rows * dim {
                return Err(format!("x holds {} values, not {rows} x {dim}", data.len()));
            }
            if let Some(k) = data.iter().position(|v| !v.is_finite()) {
                let bad = data.iter().filter(|v| !v.is_finite()).count();
                return Err(format!(
                    "x has {bad} non-finite value{} (NaN or infinity); the first is x[{}, {}] = {}",
                    if bad == 1 { "" } else { "s" },
                    k / dim.max(1),
                    k % dim.max(1),
                    data[k]
                ));
            }
            // the layout the `.npy` loader would choose, so both train the same
            let features = Features::from_dense_like_loader(rows, dim, data.to_vec());
            (features, false)
        }
        FeatureArrays::Sparse {
            indptr,
            indices,
            data,
            dim,
        } => (sparse_features(n, indptr, indices, data, dim)?, false),
    };

    let labels = labels_from(a.y, n)?;
    let split = split_from(a.split, n, a.allow_split_overlap)?;
    let num_splits = usize::from(split.is_some());
    Ok(Dataset {
        name: a.name,
        directed: a.directed,
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

/// The labels `y` of `n` nodes, checked as the `.npy` loader checks `y.npy`.
fn labels_from(y: LabelArrays<'_>, n: usize) -> Result<Labels, String> {
    Ok(match y {
        LabelArrays::None => Labels::None,
        LabelArrays::Classes(y) => {
            if let Some(v) = y.iter().position(|&l| l < -1 || l > i32::MAX as i64) {
                return Err(format!(
                    "y[{v}] = {}: a class id must be >= 0 (or -1 for an unlabelled node)",
                    y[v]
                ));
            }
            // class ids index the output layer: as the `.npy` loader, more classes than nodes
            // (or than MAX_CLASSES) is a mistake, not a task (it would exhaust memory)
            let cap = (n.max(2) as i64).min(tma_graph::dataset::MAX_CLASSES as i64);
            if let Some(v) = y.iter().position(|&l| l >= cap) {
                return Err(format!(
                    "y[{v}] = {}, which would mean {} classes for {n} nodes (class ids must be < min(num_nodes, {}))",
                    y[v],
                    y[v] + 1,
                    tma_graph::dataset::MAX_CLASSES
                ));
            }
            let num_classes = y
                .iter()
                .copied()
                .max()
                .map_or(0, |m| (m + 1).max(0) as usize);
            Labels::Classes {
                y: y.iter().map(|&l| l as i32).collect(),
                num_classes,
            }
        }
        LabelArrays::MultiLabel { data, num_labels } => {
            if let Some(k) = data.iter().position(|&v| v > 1) {
                return Err(format!(
                    "y[{}, {}] = {}: multi-label targets must be 0 or 1",
                    k / num_labels.max(1),
                    k % num_labels.max(1),
                    data[k]
                ));
            }
            Labels::MultiLabel {
                num_labels,
                y: data.to_vec(),
            }
        }
    })
}

/// The split lists `(train, val, test)` of `n` nodes: ids in range, sorted, without
/// duplicates, and disjoint unless `allow_overlap`.
fn split_from(
    split: Option<[&[i64]; 3]>,
    n: usize,
    allow_overlap: bool,
) -> Result<Option<NodeSplit>, String> {
    Ok(match split {
        None => None,
        Some(lists) => {
            let names = ["train_idx", "val_idx", "test_idx"];
            let mut out: Vec<Vec<u32>> = Vec::with_capacity(3);
            for (name, list) in names.iter().zip(lists) {
                let mut ids = Vec::with_capacity(list.len());
                for (i, &v) in list.iter().enumerate() {
                    if v < 0 || v as u64 >= n as u64 {
                        return Err(format!("{name}[{i}] = {v} is out of range for {n} nodes"));
                    }
                    ids.push(v as u32);
                }
                ids.sort_unstable();
                if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
                    return Err(format!("{name} lists node {} more than once", w[0]));
                }
                out.push(ids);
            }
            if !allow_overlap {
                for (i, j) in [(0usize, 1usize), (0, 2), (1, 2)] {
                    let common = tma_graph::dataset::sorted_intersection(&out[i], &out[j]);
                    if !common.is_empty() {
                        let first: Vec<String> =
                            common.iter().take(5).map(|v| v.to_string()).collect();
                        return Err(format!(
                            "{} and {} share {} node{} (first: {}); a node must be in one of train/val/test only (pass allow_split_overlap=True to use them anyway)",
                            names[i],
                            names[j],
                            common.len(),
                            if common.len() == 1 { "" } else { "s" },
                            first.join(", ")
                        ));
                    }
                }
            }
            let test = out.pop().expect("3 lists");
            let val = out.pop().expect("3 lists");
            let train = out.pop().expect("3 lists");
            Some(NodeSplit { train, val, test })
        }
    })
}

fn check_symmetric(g: &Csr) -> Result<(), String> {
    match g.missing_reverse() {
        None => Ok(()),
        Some((u, v)) => Err(format!(
            "edge_index is not symmetric: it has the arc {u} -> {v} but not {v} -> {u}; an undirected graph lists both directions of every edge (torch_geometric.utils.to_undirected), or pass directed=True"
        )),
    }
}

fn sparse_features(
    n: usize,
    indptr: &[i64],
    indices: &[i64],
    data: &[f32],
    dim: usize,
) -> Result<Features, String> {
    if indptr.len() != n + 1 {
        return Err(format!(
            "x: indptr has {} entries, expected {} (rows + 1)",
            indptr.len(),
            n + 1
        ));
    }
    if indices.len() != data.len() {
        return Err(format!(
            "x: {} column indices but {} values",
            indices.len(),
            data.len()
        ));
    }
    if indptr[0] != 0 || indptr.windows(2).any(|w| w[1] < w[0]) || indptr[n] as usize != data.len()
    {
        return Err(format!(
            "x: indptr must rise from 0 to nnz = {} (a CSR matrix)",
            data.len()
        ));
    }
    if let Some(k) = indices.iter().position(|&c| c < 0 || c as usize >= dim) {
        return Err(format!(
            "x: column index {} (entry {k}) is out of range for {dim} columns",
            indices[k]
        ));
    }
    if let Some(k) = data.iter().position(|v| !v.is_finite()) {
        return Err(format!(
            "x has a non-finite value (NaN or infinity) at stored entry {k}"
        ));
    }
    // the layout the `.npy` loader would choose (dense when small or not sparse enough)
    Ok(Features::from_csr_like_loader(
        n,
        dim,
        indptr.iter().map(|&p| p as u64).collect(),
        indices.iter().map(|&c| c as u32).collect(),
        data.to_vec(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(src: &'a [i64], dst: &'a [i64]) -> ArrayInput<'a> {
        ArrayInput {
            name: "t".into(),
            src,
            dst,
            num_nodes: None,
            directed: false,
            x: FeatureArrays::None,
            y: LabelArrays::None,
            split: None,
            allow_split_overlap: false,
            seed: 0,
        }
    }

    #[test]
    fn builds_the_csr_and_counts_what_it_removes() {
        // 0-1 twice (a duplicate in both directions), a self-loop on 2, 1-2
        let src = [0, 1, 0, 1, 2, 1, 2];
        let dst = [1, 0, 1, 0, 2, 2, 1];
        let ds = dataset_from_arrays(input(&src, &dst)).unwrap();
        assert_eq!(ds.num_nodes(), 3);
        assert_eq!(ds.graph.num_edges(), 4);
        assert_eq!(ds.graph.neighbors(1), &[0, 2]);
        assert_eq!(ds.removed.self_loops, 1);
        assert_eq!(ds.removed.duplicate_arcs, 2);
        assert!(ds.structural_features);
        assert_eq!(ds.features.dim(), STRUCTURAL_DIM);
    }

    #[test]
    fn errors_name_the_argument() {
        let e = dataset_from_arrays(input(&[0, 1], &[1, -3])).unwrap_err();
        assert_eq!(e, "edge_index[1, 1] = -3: node ids must be >= 0");
        let e = dataset_from_arrays(ArrayInput {
            num_nodes: Some(2),
            ..input(&[0, 5], &[5, 0])
        })
        .unwrap_err();
        assert_eq!(
            e,
            "edge_index[0, 1] = 5 is out of range for 2 nodes (num_nodes=2)"
        );
        let e = dataset_from_arrays(input(&[0], &[1])).unwrap_err();
        assert!(
            e.starts_with("edge_index is not symmetric: it has the arc 0 -> 1 but not 1 -> 0"),
            "{e}"
        );
        assert!(dataset_from_arrays(ArrayInput {
            directed: true,
            ..input(&[0], &[1])
        })
        .is_ok());
        let x = [1.0, f32::NAN, 0.0, 0.0];
        let e = dataset_from_arrays(ArrayInput {
            x: FeatureArrays::Dense {
                data: &x,
                rows: 2,
                dim: 2,
            },
            ..input(&[0, 1], &[1, 0])
        })
        .unwrap_err();
        assert_eq!(
            e,
            "x has 1 non-finite value (NaN or infinity); the first is x[0, 1] = NaN"
        );
        let y = [0, -2];
        let e = dataset_from_arrays(ArrayInput {
            y: LabelArrays::Classes(&y),
            ..input(&[0, 1], &[1, 0])
        })
        .unwrap_err();
        assert!(e.starts_with("y[1] = -2"), "{e}");
        // regression: a class id of 10^9 was accepted, then the run aborted allocating a
        // 10^9-way output layer
        let y = [0, 1_000_000_000];
        let e = dataset_from_arrays(ArrayInput {
            y: LabelArrays::Classes(&y),
            ..input(&[0, 1], &[1, 0])
        })
        .unwrap_err();
        assert_eq!(
            e,
            "y[1] = 1000000000, which would mean 1000000001 classes for 2 nodes (class ids must be < min(num_nodes, 1048576))"
        );
        let (tr, va, te) = ([0i64], [1i64], [1i64]);
        let e = dataset_from_arrays(ArrayInput {
            split: Some([&tr, &va, &te]),
            ..input(&[0, 1], &[1, 0])
        })
        .unwrap_err();
        assert!(
            e.starts_with("val_idx and test_idx share 1 node (first: 1)"),
            "{e}"
        );
        let ok = dataset_from_arrays(ArrayInput {
            split: Some([&tr, &va, &te]),
            allow_split_overlap: true,
            ..input(&[0, 1], &[1, 0])
        })
        .unwrap();
        assert_eq!(ok.split.unwrap().test, vec![1]);
        let x = [1.0f32; 6];
        let e = dataset_from_arrays(ArrayInput {
            x: FeatureArrays::Dense {
                data: &x,
                rows: 3,
                dim: 2,
            },
            num_nodes: Some(2),
            ..input(&[0, 1], &[1, 0])
        })
        .unwrap_err();
        assert_eq!(e, "x has 3 rows but the graph has 2 nodes");
    }

    #[test]
    fn features_take_the_loaders_layout() {
        // 2 nodes x 70 columns, 2 non-zeros: sparse (as x_*.npy would load); 2 columns: dense
        let mut x = vec![0f32; 140];
        x[3] = 1.5;
        x[70 + 69] = -2.0;
        let ds = dataset_from_arrays(ArrayInput {
            x: FeatureArrays::Dense {
                data: &x,
                rows: 2,
                dim: 70,
            },
            ..input(&[0, 1], &[1, 0])
        })
        .unwrap();
        match ds.features {
            Features::Sparse {
                indptr,
                indices,
                data,
                ..
            } => {
                assert_eq!(indptr, vec![0, 1, 2]);
                assert_eq!(indices, vec![3, 69]);
                assert_eq!(data, vec![1.5, -2.0]);
            }
            f => panic!("expected sparse, got {f:?}"),
        }
        let (ip, ix, d) = ([0i64, 1, 1], [1i64], [4.0f32]);
        let ds = dataset_from_arrays(ArrayInput {
            x: FeatureArrays::Sparse {
                indptr: &ip,
                indices: &ix,
                data: &d,
                dim: 2,
            },
            ..input(&[0, 1], &[1, 0])
        })
        .unwrap();
        assert_eq!(
            ds.features,
            Features::Dense {
                num_nodes: 2,
                dim: 2,
                data: vec![0.0, 4.0, 0.0, 0.0].into()
            }
        );
    }

    #[test]
    fn sparse_features_are_checked() {
        let (ip, ix, d) = ([0i64, 1, 3], [2i64, 0, 1], [1.0f32, 2.0, 3.0]);
        let ds = dataset_from_arrays(ArrayInput {
            x: FeatureArrays::Sparse {
                indptr: &ip,
                indices: &ix,
                data: &d,
                dim: 3,
            },
            ..input(&[0, 1], &[1, 0])
        })
        .unwrap();
        // 3 columns: dense, as the loader keeps narrow features
        assert!(matches!(ds.features, Features::Dense { dim: 3, .. }));
        let bad = [0i64, 3, 1];
        let e = dataset_from_arrays(ArrayInput {
            x: FeatureArrays::Sparse {
                indptr: &ip,
                indices: &bad,
                data: &d,
                dim: 3,
            },
            ..input(&[0, 1], &[1, 0])
        })
        .unwrap_err();
        assert_eq!(
            e,
            "x: column index 3 (entry 1) is out of range for 3 columns"
        );
    }
}
