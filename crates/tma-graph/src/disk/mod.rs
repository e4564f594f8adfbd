//! The on-disk graph format: a directory of raw little-endian arrays described by a versioned
//! JSON manifest (`tma-graph.json`), opened with `mmap` and read in place
//! ([`MappedGraph`]). The layout is documented in `docs/graph-format.md`; the choices behind it
//! in `docs/decisions/0008-on-disk-graph.md`.
//!
//! * [`MappedGraph::open`]: maps every file, checks sizes, alignment and the CSR end points
//!   (O(1) work per file, nothing copied); [`MappedGraph::validate`] scans the contents.
//! * [`CsrRef`]: a borrowed in-neighbour CSR (the same layout as [`crate::Csr`]) that works over
//!   mapped or owned arrays; [`FeaturesRef`]: borrowed features (f32, f16 or sparse rows).
//! * [`MappedGraph::to_dataset`]: a [`crate::Dataset`] whose graph and dense f32 features are
//!   the mapped files ([`crate::Buf`]; labels and splits copied), bit-identical to what
//!   [`crate::load_dataset`] gives for the `.npy` directory the graph was converted from.
//! * [`write_dataset`]: an in-memory dataset to the format; [`convert_npy_dir`]: a `.npy`
//!   dataset directory to the format with the graph built in bounded memory
//!   ([`ExternalCsrBuilder`]).
//!
//! ```
//! use tma_graph::{disk, generate_sbm, LoadOptions, SbmConfig};
//! let ds = generate_sbm(&SbmConfig { num_nodes: 500, feature_dim: 4, ..SbmConfig::default() });
//! let dir = tempfile::tempdir().unwrap();
//! disk::write_dataset(&ds, dir.path(), &disk::Provenance::new("doc example")).unwrap();
//! let g = disk::MappedGraph::open(dir.path()).unwrap();
//! assert_eq!(g.csr().neighbors(7), ds.graph.neighbors(7)); // read in place
//! let back = g.to_dataset(&LoadOptions::default()).unwrap();
//! assert_eq!(back.graph, ds.graph);
//! ```

mod convert;
mod extsort;
pub(crate) mod link;
mod link_split;
mod mapped;
mod write;

pub use convert::{convert_npy_dir, ConvertOptions, ConvertReport};
pub use extsort::{BuildStats, ExternalCsrBuilder};
pub use link::{add_link_negatives, LinkNegativesReport};
pub(crate) use link_split::{pair_kind, write_held_pairs};
pub use link_split::{split_links, LinkSplitOptions, LinkSplitReport};
pub use mapped::{CsrRef, FeaturesRef, MappedGraph};
pub use write::{write_dataset, ArrayWriter};

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use crate::buf::Dtype;
use crate::error::{GraphError, Result};

/// Name of the manifest file; its presence marks a directory in this format.
pub const MANIFEST: &str = "tma-graph.json";
/// The `format` field of every manifest.
pub const FORMAT_NAME: &str = "tma-graph";
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Whether `dir` holds a graph in this format (its manifest exists).
pub fn is_disk_graph(dir: &Path) -> bool {
    dir.join(MANIFEST).is_file()
}

/// One array file of the directory, as the manifest records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Element type (little-endian).
    pub dtype: Dtype,
    /// Number of elements.
    pub len: u64,
    /// File size in bytes (`len * dtype.size()`).
    pub bytes: u64,
    /// SHA-256 of the file's bytes, lower-case hex.
    pub sha256: String,
}

/// How node features are stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FeatureLayout {
    /// No feature files: structural features are generated at load time, exactly as the
    /// `.npy` loader does for featureless graphs (their seed is a load option).
    None,
    /// `features` `[num_nodes * dim]` row-major, in `dtype` (f32 or f16).
    Dense {
        /// Feature width.
        dim: u64,
        /// `f32` or `f16`.
        dtype: Dtype,
    },
    /// CSR rows: `feat_indptr` u64 `[N + 1]`, `feat_indices` u32 `[nnz]`, `feat_data` f32
    /// `[nnz]`.
    Sparse {
        /// Feature width.
        dim: u64,
        /// Stored entries.
        nnz: u64,
    },
}

/// How labels are stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LabelLayout {
    /// No labels.
    None,
    /// `labels` i32 `[N]`, `-1` = unlabelled.
    Classes {
        /// Number of classes.
        num_classes: u64,
    },
    /// `labels` u8 `[N * num_labels]`, row-major 0/1.
    MultiLabel {
        /// Labels per node.
        num_labels: u64,
    },
}

/// Where the stored node split came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SplitSource {
    /// No split files.
    None,
    /// The source directory's `*_idx.npy` files.
    Index,
    /// Row `split_index` of the source directory's `*_masks.npy` files.
    Masks {
        /// The mask row converted.
        split_index: u64,
    },
    /// Drawn by the generator.
    Generated,
}

/// Who wrote the directory, from what.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provenance {
    /// The writing tool and command, e.g. `tma convert`.
    pub tool: String,
    /// The source directory or generator configuration.
    pub source: String,
    /// The seed, for generated graphs.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub seed: Option<u64>,
    /// The tma version that wrote the directory.
    pub tma_version: String,
    /// What the writer changed or dropped in the source data (e.g. self-loops dropped,
    /// duplicate arcs merged), one line each.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub notes: Vec<String>,
}

impl Provenance {
    /// Provenance with `source`, tool `tma`, no seed, this crate's version.
    pub fn new(source: impl Into<String>) -> Provenance {
        Provenance {
            tool: "tma".into(),
            source: source.into(),
            seed: None,
            tma_version: env!("CARGO_PKG_VERSION").into(),
            notes: vec![],
        }
    }
}

/// Version of the link-split section ([`LinkNegativesLayout::version`]) this build writes and
/// reads.
pub const LINK_SPLIT_VERSION: u32 = 1;

/// How the held-out link pairs' negatives are stored (`link_negatives` of the manifest).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkNegativesLayout {
    /// [`LINK_SPLIT_VERSION`] at writing; another version is an error naming the manifest.
    pub version: u32,
    /// `"per_source"`: `num_neg` destinations `w` per positive `(u, v)`, ranked against it as
    /// pairs `(u, w)` (OGB's ogbl-citation2 protocol: MRR); `link_val_neg.bin` is u32
    /// `[num_val * num_neg]` row-major, `link_test_neg.bin` likewise. Never a true edge of the
    /// whole graph (training graph + held-out pairs) nor a self-loop.
    ///
    /// `"shared"` ([`NEGATIVES_SHARED`]): negative pairs shared by every positive of their
    /// split (OGB's `edge_neg`: ogbl-collab, ppa, ddi; Hits@K), `link_val_neg.bin` u32
    /// `[m_val * 2]` = `(u, v)` pairs as the dataset gives them, `link_test_neg.bin` likewise.
    pub kind: String,
    /// Negatives per positive (`per_source`); 0 for `shared`.
    pub num_neg: u64,
    /// The seed they were drawn with ([`crate::link_negatives`]); 0 for negatives a dataset
    /// gives ([`LinkNegativesLayout::dataset`] set).
    pub seed: u64,
    /// The dataset whose protocol the negatives are (e.g. `ogbl-collab`), when a dataset
    /// gave them (an OGB link directory converted); absent for negatives tma drew. Absent in
    /// directories written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<String>,
    /// The K of the Hits@K the dataset reports (`shared` negatives; ogbl-collab 50); absent
    /// for MRR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hits_k: Option<u64>,
}

/// The [`LinkNegativesLayout::kind`] of per-source negatives (OGB's ogbl-citation2 protocol).
pub const NEGATIVES_PER_SOURCE: &str = "per_source";
/// The [`LinkNegativesLayout::kind`] of negatives shared by every positive of their split
/// (OGB's ogbl-collab, ppa, ddi protocol: Hits@K).
pub const NEGATIVES_SHARED: &str = "shared";

/// The manifest `tma-graph.json`. See `docs/graph-format.md` for every field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// [`FORMAT_VERSION`] at writing.
    pub version: u32,
    /// Dataset name.
    pub name: String,
    /// Whether arcs are directed; undirected graphs store both directions.
    pub directed: bool,
    /// Nodes `N`.
    pub num_nodes: u64,
    /// Stored arcs `E` (length of `indices`).
    pub num_arcs: u64,
    /// Feature layout.
    pub features: FeatureLayout,
    /// Label layout.
    pub labels: LabelLayout,
    /// Origin of the `train_idx`/`val_idx`/`test_idx` files.
    pub split: SplitSource,
    /// Held-out link pairs (`link_val`, `link_test`, u32 `[k * 2]`), when present: the stored
    /// graph then excludes them (OGB convention: the graph is the training graph).
    #[serde(default)]
    pub link_split: bool,
    /// Fixed evaluation negatives of the held-out pairs (`link_val_neg.bin`,
    /// `link_test_neg.bin`), when stored: the link-split section, versioned on its own.
    /// Absent: a run draws them when it starts ([`crate::link_negatives`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_negatives: Option<LinkNegativesLayout>,
    /// Every array file, by file name.
    pub files: BTreeMap<String, FileEntry>,
    /// Who wrote it.
    pub provenance: Provenance,
}

impl Manifest {
    /// Reads and checks `dir/tma-graph.json` (format name and version).
    ///
    /// # Errors
    /// [`GraphError::Io`] if unreadable, [`GraphError::Invalid`] naming the manifest if it is
    /// not valid JSON of this schema, another format, or a newer version.
    pub fn read(dir: &Path) -> Result<Manifest> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|source| GraphError::Io {
            path: path.clone(),
            source,
        })?;
        let m: Manifest = serde_json::from_str(&text).map_err(|e| GraphError::Invalid {
            path: path.clone(),
            reason: format!("not a valid manifest: {e}"),
        })?;
        if m.format != FORMAT_NAME {
            return Err(GraphError::Invalid {
                path,
                reason: format!("format is {:?}, expected {FORMAT_NAME:?}", m.format),
            });
        }
        if m.version != FORMAT_VERSION {
            return Err(GraphError::Invalid {
                path,
                reason: format!(
                    "format version {} is not readable by this build (reads version {FORMAT_VERSION})",
                    m.version
                ),
            });
        }
        Ok(m)
    }

    /// Writes the manifest atomically (temporary file + rename) to `dir/tma-graph.json`.
    ///
    /// # Errors
    /// [`GraphError::Io`] naming the manifest.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self).expect("manifest serializes");
        crate::durable::write(&dir.join(MANIFEST), text.as_bytes())
    }
}

/// Progress of a long stage (implemented by the CLI's progress bars; `()` ignores it).
pub trait Progress: Sync {
    /// A stage named `name` starts with `total` units of work (0 = unknown).
    fn start(&self, name: &str, total: u64);
    /// `n` more units done.
    fn inc(&self, n: u64);
    /// The current stage is done.
    fn finish(&self);
}

impl Progress for () {
    fn start(&self, _: &str, _: u64) {}
    fn inc(&self, _: u64) {}
    fn finish(&self) {}
}

/// Checks that `out` can receive a new graph: missing or empty, or the leftover of a writer of
/// this kind that was interrupted (Ctrl-C, a kill) before it finished: no manifest, its
/// staging directory `staging` present, and nothing else but the `.bin` arrays it writes.
/// Such a leftover is removed (said in one line on stderr), so running the same command again
/// works.
///
/// # Errors
/// [`GraphError::Invalid`] naming `out` when it holds anything else.
pub(crate) fn claim_out_dir(out: &Path, staging: &str) -> Result<()> {
    let io = |e| GraphError::Io {
        path: out.to_path_buf(),
        source: e,
    };
    if !out.exists() {
        return Ok(());
    }
    let entries: Vec<std::fs::DirEntry> = std::fs::read_dir(out)
        .map_err(io)?
        .collect::<std::result::Result<_, _>>()
        .map_err(io)?;
    if entries.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = entries
        .iter()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let leftover = names.iter().any(|n| n == staging)
        && names.iter().all(|n| n == staging || n.ends_with(".bin"));
    if !leftover {
        return Err(GraphError::Invalid {
            path: out.to_path_buf(),
            reason: "output directory exists and is not empty".into(),
        });
    }
    eprintln!(
        "note: {} holds the leftover of an interrupted run ({staging} and {} partial array(s), no manifest): removed",
        out.display(),
        names.len() - 1
    );
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            std::fs::remove_dir_all(&p).map_err(io)?;
        } else {
            std::fs::remove_file(&p).map_err(io)?;
        }
    }
    Ok(())
}
