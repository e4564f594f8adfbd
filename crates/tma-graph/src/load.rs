//! The one entry for tma's own dataset directories ([`load_dataset`]): the `.npy` layout
//! (`docs/dataset-format.md`, read by [`crate::dataset`]) or the on-disk graph format
//! (`docs/graph-format.md`, opened with [`crate::MappedGraph`]). It sits above both readers, so
//! neither depends on the other.

use std::path::Path;

use crate::dataset::{load_npy_dir, Dataset, LoadOptions};
use crate::disk::{is_disk_graph, MappedGraph};
use crate::error::Result;

/// Load a dataset directory (layout of `docs/dataset-format.md`, summarized in the docs of
/// [`crate::dataset`]).
///
/// A directory in the on-disk graph format (`docs/graph-format.md`, marked by its
/// `tma-graph.json`) is accepted too: it is opened with [`crate::MappedGraph`]
/// ([`crate::MappedGraph::to_dataset`]: the graph and dense f32 features stay mapped, the rest is
/// copied), giving the same dataset as its `.npy` source.
///
/// * **Nodes** `N` = `meta.json:computed.nodes` if present, else the largest of
///   (max edge id + 1, `y` rows, `x_shape[0]`).
/// * **Graph**: arcs `edge_index[0, e] -> edge_index[1, e]`, so row `dst` of the in-neighbour
///   CSR gets `src`. Self-loops are dropped, duplicate arcs merged. Undirected files already
///   hold both directions (checked: the result must be symmetric).
/// * **Features**: the CSR files become [`crate::Features::Sparse`], except that they are densified
///   when `dim <= 64` ([`crate::DENSIFY_MAX_DIM`]) or density `nnz / (N * dim) > 20%`
///   ([`crate::DENSIFY_DENSITY`]), where a dense matrix is both smaller and faster. Sparse rows keep
///   the column order of the file. Without feature files, [`crate::structural_features`] of width
///   `opts.structural_dim` are generated and `structural_features` is set.
/// * **Labels**: int64 `[N]` -> [`crate::Labels::Classes`]; uint8 `[N, C]` -> [`crate::Labels::MultiLabel`];
///   no `y.npy` -> [`crate::Labels::None`].
/// * **Split**: `*_idx.npy` -> that split (sorted); else `*_masks.npy` `[S, N]` -> row
///   `opts.split_index`; else `None`. Index files win when both kinds are present.
///
/// # Errors
/// * [`crate::GraphError::Io`]: a required file is missing/unreadable (`meta.json`, `edge_index.npy`,
///   or one file of a partial x / idx / masks triple).
/// * [`crate::GraphError::Npy`]: bad magic, unsupported version, unparseable header, truncated data.
/// * [`crate::GraphError::Dtype`]: a dtype other than the table in the module docs.
/// * [`crate::GraphError::Shape`]: shapes inconsistent with the format, each other, or `meta.json`.
/// * [`crate::GraphError::IdOutOfRange`]: edge/index id not in `0..N`, feature column not in `0..dim`.
/// * [`crate::GraphError::Invalid`]: `meta.json` unparseable or missing `directed` / `x_shape`;
///   `x_indptr` not starting at 0, not monotone or not ending at nnz; labels `< -1` or
///   multi-labels not 0/1; duplicate split ids; undirected graph not symmetric;
///   `opts.split_index >= S` (index files hold one split); `opts.structural_dim == 0`; a label
///   id `>= meta.json:computed.classes`; a split whose train/val/test lists share nodes
///   (unless `opts.allow_split_overlap`); non-finite feature values (`x_data.npy`);
///   object (pickled) arrays give [`crate::GraphError::Dtype`] naming the dtype the file needs.
/// * Self-loops and duplicate arcs are removed and counted in [`crate::Dataset::removed`].
pub fn load_dataset(dir: &Path, opts: &LoadOptions) -> Result<Dataset> {
    // a directory in the on-disk format (docs/graph-format.md): mapped, then copied in
    if is_disk_graph(dir) {
        return MappedGraph::open(dir)?.to_dataset(opts);
    }
    load_npy_dir(dir, opts)
}
