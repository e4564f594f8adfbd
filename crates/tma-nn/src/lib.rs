//! `tma-nn`: tma's compute core — dense and sparse kernels, GNN layers with hand-written
//! backward passes, LayerNorm, PReLU, dropout, the link decoder, losses, Adam, and
//! [`ParamSet`], the named flat parameter buffer that makes model averaging a vector mean.
//!
//! Layers ([`conv`], one file each, PyG's names, parameter names and shapes):
//! - [`SageConv`]: GraphSAGE, mean aggregator (Hamilton et al. 2017), `--model sage`;
//! - [`GcnConv`]: GCN, symmetric normalisation with self-loops (Kipf & Welling 2017),
//!   `--model gcn`;
//! - [`GatConv`]: multi-head graph attention (Velickovic et al. 2018), `--model gat`;
//! - [`MlpConv`]: a linear layer ignoring edges, `--model mlp`.
//!
//! [`EncoderKind`] is generated from the one registry in `conv/mod.rs` (its names, parsing and
//! the builder [`Model::new`] calls); a new encoder is a new file in `src/conv/` plus one line
//! there. A [`Model`] stacks `num_layers` layers of one kind with LayerNorm → PReLU → dropout
//! between them, plus an optional link decoder; [`Model::forward`] / [`Model::backward`] run
//! over sampled blocks, [`Model::infer_full`] layer-wise over a whole graph.
//!
//! Why our own core: frameworks materialize an `E × F` message tensor and scatter serially;
//! here aggregation is a CSR gather parallel over destination rows (rayon), its backward a
//! gather over the transposed block, and dense products go through the `gemm` crate (GAT keeps
//! only `E × heads` attention scores). Every backward is checked against finite differences in
//! the tests (`src/tests.rs`).
//!
//! Conventions: matrices are row-major `f32` ([`Mat`]); linear weights are `[out, in]` as in
//! PyTorch; blocks follow `tma_sample`'s conventions (destination nodes are the first
//! `num_dst` source nodes, input layer first). Parallel kernels size themselves from the
//! **current** rayon pool, so a trainer running inside its own pool uses only that pool.
//!
//! Kernel choices:
//! - Aggregation forward: CSR gather, parallel over destination rows (no atomics, no `E × F`
//!   message tensor). Backward: the transposed block (CSC) is built once per layer backward
//!   (O(E), sequential) and the scatter to sources becomes a gather parallel over source rows.
//! - "Transform then aggregate" when `out < in` and always for sparse input (`X·Wᵀ` as a
//!   sparse × dense product; `dW = dYᵀ·X` through the CSC of `X`; `X` is never densified and no
//!   gradient is formed for the input features).
//! - Hot row kernels run through an AVX2+FMA copy when the CPU has it (runtime detection).
//! - [`Model`] recycles large activation/gradient buffers between iterations (avoids page
//!   faults; [`Model::release_buffers`] frees them).
//!
//! Typical training step:
//! ```ignore
//! let (h, cache) = model.forward(&params, &blocks, &x, true, &mut rng);
//! grads.fill_zero();
//! // decode + bce_with_logits + decode_backward in one call (fused on AMX tiles)
//! let (loss, d_h) = model.decode_bce(&params, &h, &src, &dst, &targets, &mut grads);
//! model.backward(&params, cache, &d_h, &mut grads);
//! clip_grad_norm(&mut grads, 1.0);
//! adam.step(&mut params, &grads);
//! ```

#![warn(missing_docs)]

#[macro_use]
mod kernels;
mod bf16;
pub mod conv;
mod error;
mod input;
mod loss;
mod mat;
mod matmul;
mod model;
mod optim;
mod params;

pub use bf16::{amx_available, avx512_bf16_available, bf16_products, MatmulPrecision};
pub use conv::{
    EncoderKind, EncoderOption, EncoderOptions, EncoderShape, EvalLayer, GatConv, GcnConv,
    LayerCounts, LayerExport, MlpConv, OptionValue, SageConv,
};
pub use error::NnError;
pub use loss::{bce_with_logits, multilabel_bce, softmax_cross_entropy};
pub use mat::Mat;
pub use model::{DecodeCache, ForwardCache, Head, Input, Model, ModelConfig};
pub use optim::{clip_grad_norm, Adam};
pub use params::{ParamSet, ParamSpec};

#[cfg(test)]
mod tests;
