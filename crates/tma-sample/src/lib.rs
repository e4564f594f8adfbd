//! Neighbour sampling for tma: sampled bipartite layer graphs ([`Block`]s), full-neighbour
//! blocks for exact inference, uniform negative sampling for link prediction.
//!
//! Conventions (as DGL's `to_block`): in every block the **destination nodes are the first
//! `num_dst` source nodes**, in the same order, so a layer's self/root term reads
//! `h_src[..num_dst]`. Blocks of a [`MiniBatch`] are ordered **input layer first**
//! (`blocks[0]` consumes the input features, the last block produces the seeds' outputs).
//! `fanouts[0]` is the hop nearest the seeds (PyG's `num_neighbors` order), so for a 2-layer
//! model with fanouts `[10, 25]` the last block samples 10 neighbours per seed and `blocks[0]`
//! samples 25 per node of the first hop.
//!
//! Architecture invariant: this crate knows nothing of neural networks.

#![warn(missing_docs)]

pub mod block;
pub mod hops;

pub use block::{Block, BlockView};
pub use hops::{full_blocks, HopChunk, HopChunks, HopCounts};
pub mod neighbor;
pub mod util;

pub use neighbor::{Exclude, MiniBatch, NeighborSampler};
pub use util::{shuffled_batches, uniform_negatives, unique_with_inverse};
