//! Writing a [`Dataset`] in tma's `.npy` layout (`docs/dataset-format.md`).

use std::path::Path;

use super::raw::invalid;
use crate::dataset::{Dataset, Labels};
use crate::error::{GraphError, Result};
use crate::features::Features;
use crate::npy;

/// Writes `ds` to the directory `out` (created; it must not exist or be empty) in tma's
/// `.npy` layout, so that [`crate::load_dataset`] on `out` gives `ds` back (the same graph,
/// features, labels and split; structural features are not written: the loader generates
/// them again). `node_ids` (the original id of each node, for remapped edge lists) is written
/// as `node_ids.npy` (uint64 `[N]`); `source` (what the data was converted from) is recorded
/// in `meta.json`. `meta.json` is written last.
///
/// Arrays: `edge_index.npy` (int64 `[2, E]`, the arcs `u -> v` of the graph, both directions
/// for an undirected one), `x_indptr/x_indices/x_data.npy` (the non-zero feature entries as
/// CSR rows), `y.npy` (int64 `[N]` or uint8 `[N, C]`), `train_idx/val_idx/test_idx.npy`.
///
/// # Errors
/// [`GraphError::Invalid`] when `out` is a non-empty directory or a file;
/// [`GraphError::Io`] naming a file that could not be written.
pub fn write_npy_dir(
    ds: &Dataset,
    node_ids: Option<&[u64]>,
    out: &Path,
    source: Option<serde_json::Value>,
) -> Result<()> {
    if out.exists() {
        let empty = std::fs::read_dir(out)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !empty {
            return Err(invalid(
                out,
                "the output directory exists and is not empty (choose a new one)",
            ));
        }
    }
    std::fs::create_dir_all(out).map_err(|source| GraphError::Io {
        path: out.to_path_buf(),
        source,
    })?;
    let n = ds.num_nodes();
    let g = &ds.graph;
    let e = g.num_edges();
    let mut ei = vec![0i64; 2 * e];
    let mut k = 0;
    for v in 0..n {
        for &u in g.neighbors(v) {
            ei[k] = u as i64;
            ei[e + k] = v as i64;
            k += 1;
        }
    }
    npy::write(&out.join("edge_index.npy"), &ei, &[2, e])?;
    drop(ei);

    let mut meta = serde_json::json!({
        "name": ds.name,
        "directed": ds.directed,
        "computed": { "nodes": n },
    });
    if !ds.structural_features {
        let (dim, indptr, indices, data): (usize, Vec<i64>, Vec<i64>, Vec<f32>) = match &ds.features
        {
            Features::Dense { dim, data, .. } => {
                let mut ip = Vec::with_capacity(n + 1);
                let (mut ix, mut dx) = (Vec::new(), Vec::new());
                ip.push(0i64);
                for row in data.chunks_exact((*dim).max(1)).take(n) {
                    for (j, &x) in row.iter().enumerate() {
                        if x != 0.0 {
                            ix.push(j as i64);
                            dx.push(x);
                        }
                    }
                    ip.push(ix.len() as i64);
                }
                if *dim == 0 {
                    ip.resize(n + 1, 0);
                }
                (*dim, ip, ix, dx)
            }
            Features::Sparse {
                dim,
                indptr,
                indices,
                data,
                ..
            } => (
                *dim,
                indptr.iter().map(|&x| x as i64).collect(),
                indices.iter().map(|&x| x as i64).collect(),
                data.clone(),
            ),
        };
        npy::write(&out.join("x_indptr.npy"), &indptr, &[indptr.len()])?;
        npy::write(&out.join("x_indices.npy"), &indices, &[indices.len()])?;
        npy::write(&out.join("x_data.npy"), &data, &[data.len()])?;
        meta["x_shape"] = serde_json::json!([n, dim]);
    }
    match &ds.labels {
        Labels::None => {}
        Labels::Classes { y, num_classes } => {
            let y: Vec<i64> = y.iter().map(|&c| c as i64).collect();
            npy::write(&out.join("y.npy"), &y, &[n])?;
            meta["computed"]["classes"] = serde_json::json!(num_classes);
        }
        Labels::MultiLabel { num_labels, y } => {
            npy::write(&out.join("y.npy"), y, &[n, *num_labels])?;
        }
    }
    if let Some(s) = &ds.split {
        for (name, ids) in [
            ("train_idx.npy", &s.train),
            ("val_idx.npy", &s.val),
            ("test_idx.npy", &s.test),
        ] {
            let v: Vec<i64> = ids.iter().map(|&x| x as i64).collect();
            npy::write(&out.join(name), &v, &[v.len()])?;
        }
    }
    if let Some(ids) = node_ids {
        npy::write(&out.join("node_ids.npy"), ids, &[ids.len()])?;
        meta["node_ids"] = serde_json::json!("node_ids.npy: the id in the source file of node i");
    }
    if let Some(src) = source {
        meta["source"] = src;
    }
    let text = serde_json::to_vec_pretty(&meta).expect("meta.json serializes");
    crate::durable::write(&out.join("meta.json"), &text)
}
