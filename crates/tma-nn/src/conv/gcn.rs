//! Graph convolution of Kipf & Welling (GCN).

use super::layer::{ConvArgs, Encoder, Init, ParamAlloc};
use super::linear_agg::LinearAgg;
use crate::kernels::AggCoefs;

/// The graph convolutional operator from Kipf & Welling, "Semi-Supervised Classification with
/// Graph Convolutional Networks" (ICLR 2017, <https://arxiv.org/abs/1609.02907>, eq. 2), as
/// PyG's `GCNConv` (symmetric normalisation, self-loops):
///
/// `x_i' = b + Σ_{j ∈ N(i) ∪ {i}} w_ij · W x_j`, with `w_ii = 1/(d_i+1)` and
/// `w_ij = (d_i/s_i) / sqrt((d_i+1)(d_j+1))`
///
/// where `d` is the full in-degree (the block's `src_degree`) and `s_i` the number of sampled
/// neighbours of `i`. With full neighbourhoods (`s_i = d_i`) this is exactly
/// `D̂^{-1/2}(A+I)D̂^{-1/2} X Wᵀ + b`; the factor `d_i/s_i` keeps a sampled sum unbiased;
/// `s_i = 0` keeps only the self term.
///
/// Parameters (`{l}` = layer index): `encoder.{l}.lin.weight` `[out, in]` (Glorot-uniform),
/// `encoder.{l}.bias` `[out]` (0), in this order.
///
/// **Shapes:** input `[num_src, in]` (dense, sparse or rows of a larger dense matrix), output
/// `[num_dst, out]`. The block's `src_degree` must have `num_src` entries (panics otherwise).
///
/// Computation as [`super::SageConv`]: transform first when `out < in` or the input is sparse.
#[derive(Clone, Debug)]
pub struct GcnConv {
    core: LinearAgg,
    bias: usize,
}

impl GcnConv {
    /// Declare `encoder.{l}.lin.weight`, `encoder.{l}.bias`.
    pub(crate) fn build(a: &ConvArgs, alloc: &mut ParamAlloc) -> Result<Self, String> {
        let w = alloc.add(
            a.name("lin.weight"),
            vec![a.out_dim, a.in_dim],
            Init::Glorot,
        );
        let bias = alloc.add(a.name("bias"), vec![a.out_dim], Init::Const(0.0));
        Ok(GcnConv {
            core: LinearAgg {
                in_dim: a.in_dim,
                out_dim: a.out_dim,
                w,
                w_r: None,
            },
            bias,
        })
    }

    /// Input channels (`in`).
    pub fn in_channels(&self) -> usize {
        self.core.in_dim
    }

    /// Output channels (`out`).
    pub fn out_channels(&self) -> usize {
        self.core.out_dim
    }
}

impl Encoder for GcnConv {
    const ABOUT: &'static str = "Kipf and Welling's graph convolution";
}

linear_agg_conv!(GcnConv, AggCoefs::gcn, "GCNConv");
