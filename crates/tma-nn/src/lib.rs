//! `tma-nn`: tma's compute core — dense and sparse kernels, GNN layers (GraphSAGE, GCN, MLP,
//! LayerNorm, PReLU, dropout, link decoder) with hand-written backward passes, losses, Adam,
//! and [`ParamSet`], the named flat parameter buffer that makes model averaging a vector mean.
//!
//! Why our own core (DESIGN.md, "Decisions already measured"): frameworks materialize an
//! `E × F` message tensor and scatter serially; here aggregation is a CSR gather parallel over
//! destination rows (rayon), its backward a gather over the transposed block, and dense
//! products go through the `gemm` crate. Every backward is checked against finite differences
//! in the tests.
//!
//! Conventions: matrices are row-major `f32` ([`Mat`]); linear weights are `[out, in]` as in
//! PyTorch; blocks follow `tma_sample`'s conventions (destination nodes are the first
//! `num_dst` source nodes, input layer first). Parallel kernels size themselves from the
//! **current** rayon pool, so a trainer running inside its own pool uses only that pool.

mod error;
mod kernels;
mod loss;
mod mat;
mod model;
mod optim;
mod params;

pub use error::NnError;
pub use loss::{bce_with_logits, multilabel_bce, softmax_cross_entropy};
pub use mat::Mat;
pub use model::{DecodeCache, EncoderKind, ForwardCache, Head, Model, ModelConfig};
pub use optim::{clip_grad_norm, Adam};
pub use params::{ParamSet, ParamSpec};

#[cfg(test)]
mod tests;
