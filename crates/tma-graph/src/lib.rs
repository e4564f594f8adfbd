//! Graph storage, datasets and splits for tma.
//!
//! * [`Csr`]: compressed sparse rows with 64-bit `indptr` (edge counts may pass 2^31) and 32-bit
//!   `indices`. **Row `v` lists the in-neighbours of `v`** (the sources of arcs `u -> v`), so a
//!   GNN layer aggregates row `v` to compute `v`'s new representation. For undirected graphs
//!   (both directions stored, PyG convention) in- and out-neighbours coincide.
//! * [`Features`]: node features, dense row-major or sparse CSR (wide bag-of-words features are
//!   never densified).
//! * [`Dataset`]: a graph with features, labels and splits, loaded from a directory in the layout
//!   of `datasets/FORMAT.md` ([`load_dataset`]) or generated ([`generate`]).
//!
//! Architecture invariant: this crate knows nothing of neural networks.

pub mod csr;
pub mod features;

pub use csr::{Csr, GlobalNodeId};
pub use features::Features;
