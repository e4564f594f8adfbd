//! Graph storage, datasets and splits for tma.
//!
//! * [`Csr`]: compressed sparse rows with 64-bit `indptr` (edge counts may pass 2^31) and 32-bit
//!   `indices`. **Row `v` lists the in-neighbours of `v`** (the sources of arcs `u -> v`), so a
//!   GNN layer aggregates row `v` to compute `v`'s new representation. For undirected graphs
//!   (both directions stored, PyG convention) in- and out-neighbours coincide.
//! * [`Features`]: node features, dense row-major or sparse CSR (wide bag-of-words features are
//!   never densified; see [`load_dataset`] for the rule).
//! * [`Dataset`]: a graph with features, labels and splits, loaded from a directory in the layout
//!   of `docs/dataset-format.md` ([`load_dataset`]) or generated ([`generate_sbm`]).
//! * Splits: [`random_node_split`] (node classification), [`link_split`] (link prediction with
//!   fixed OGB-style negatives, no reverse-edge leakage).
//! * Errors: [`GraphError`], every variant naming the offending file.
//! * [`disk`]: the on-disk graph format (`docs/graph-format.md`): [`MappedGraph`] reads a
//!   graph directory in place through `mmap`, [`CsrRef`] is a borrowed CSR over mapped or
//!   owned arrays, [`disk::convert_npy_dir`] converts a `.npy` directory with a bounded-memory
//!   CSR build; [`rmat`] generates power-law graphs straight to that format.
//! * [`npy`]: the workspace's one `.npy` codec (typed reads with dtype and shape checks,
//!   64-byte-aligned encoding, atomic writes), used by the loader, partition directories and
//!   tests.
//! * [`formats`]: the formats users already have (OGB directories, SNAP edge lists, `.npz`,
//!   CSV edge lists), detected or named, read into the same [`Dataset`]
//!   ([`formats::load`]) or converted to the `.npy` layout ([`formats::convert_to_npy`]).
//! * [`seed`]: the workspace's one seeding policy: every random stream is
//!   [`seed::rng`]`(seed, Purpose)`, so different purposes never share a keystream.
//!
//! Architecture invariant: this crate knows nothing of neural networks.
//!
//! # Example
//! ```
//! use tma_graph::{generate_sbm, link_split, SbmConfig};
//!
//! let ds = generate_sbm(&SbmConfig { num_nodes: 1_000, feature_dim: 8, ..SbmConfig::default() });
//! assert_eq!(ds.num_nodes(), 1_000);
//! // 10% validation, 10% test edges, 100 fixed negatives per positive
//! let ls = link_split(&ds.graph, ds.directed, 0.1, 0.1, None, 100, 0);
//! assert_eq!(ls.val_neg.len(), ls.val_pos.len() * 100);
//! for &(u, v) in &ls.val_pos {
//!     assert!(!ls.train_graph.neighbors(v as usize).contains(&u)); // no leakage
//!     assert!(!ls.train_graph.neighbors(u as usize).contains(&v)); // not even reversed
//! }
//! ```
//!
//! Loading a dataset directory (see [`dataset`] for the layout and [`GraphError`] for errors):
//! ```no_run
//! use tma_graph::{load_dataset, LoadOptions};
//! let ds = load_dataset("datasets/planetoid_cora".as_ref(), &LoadOptions::default())?;
//! println!("{}", ds.summary());
//! # Ok::<(), tma_graph::GraphError>(())
//! ```

#![warn(missing_docs)]

pub mod buf;
pub mod csr;
pub mod dataset;
pub mod disk;
pub mod durable;
pub mod error;
pub mod features;
pub mod formats;
pub mod generate;
pub mod heuristics;
pub mod load;
pub mod memory;
pub mod npy;
pub mod rmat;
pub mod seed;
pub mod split;

pub use buf::{Buf, Pod, SharedMap};
pub use csr::{Csr, GlobalNodeId};
pub use dataset::{
    degree_column, structural_features, Dataset, Labels, LinkProtocol, LoadOptions, NodeSplit,
    RemovedArcs, SharedNegatives, StoredLinkSplit, StoredNegatives,
};
pub use disk::{is_disk_graph, CsrRef, MappedGraph};
pub use error::{GraphError, Result};
pub use features::{gather_rows_into, Features, DENSIFY_DENSITY, DENSIFY_MAX_DIM};
pub use generate::{generate_sbm, SbmConfig};
pub use heuristics::{link_heuristics, LinkHeuristics};
pub use load::load_dataset;
pub use rmat::{generate_rmat, RmatConfig};
pub use split::{link_negatives, link_split, random_node_split, LinkSplit, LinkSplitNotes};
