//! GraphSAGE convolution with the mean aggregator.

use super::layer::{ConvArgs, Encoder, Init, ParamAlloc};
use super::linear_agg::LinearAgg;
use crate::kernels::AggCoefs;

/// The GraphSAGE operator with the mean aggregator, from Hamilton et al., "Inductive
/// Representation Learning on Large Graphs" (NeurIPS 2017, <https://arxiv.org/abs/1706.02216>,
/// Alg. 1), as PyG's `SAGEConv(aggr="mean", root_weight=True)`:
///
/// `x_i' = W_l · mean_{j ∈ N(i)} x_j + b_l + W_r · x_i`
///
/// where `N(i)` is the (sampled) in-neighbourhood of `i`; an empty neighbourhood gives mean 0.
///
/// Parameters (`{l}` = layer index): `encoder.{l}.lin_l.weight` `[out, in]`,
/// `encoder.{l}.lin_l.bias` `[out]`, `encoder.{l}.lin_r.weight` `[out, in]` (no bias), in this
/// order; weights Xavier-uniform with gain `sqrt(2)` (`U(±sqrt(2)·sqrt(6/(in+out)))`, DGL's
/// `SAGEConv` initialisation), bias 0. (DGL's bias starts at PyTorch's `nn.Linear` default
/// `U(±1/sqrt(in))`; measured in docs/decisions/0006-learning-per-step.md, it helped on one
/// graph only without a learning-rate warm-up and hurt on another, so tma keeps 0.)
///
/// **Shapes:** input `[num_src, in]` (dense, sparse or rows of a larger dense matrix), block
/// with `num_dst <= num_src` destinations (the first `num_dst` sources), output
/// `[num_dst, out]`.
///
/// Computation: when `out < in` or the input is sparse, `X W_lᵀ` first, then the mean over the
/// block (aggregation is linear); else the mean first. Either way no `E × F` message tensor:
/// a CSR gather parallel over destination rows; backward through the transposed block.
#[derive(Clone, Debug)]
pub struct SageConv {
    core: LinearAgg,
    bias: usize,
}

impl SageConv {
    /// Declare `encoder.{l}.lin_l.weight`, `.lin_l.bias`, `.lin_r.weight`.
    pub(crate) fn build(a: &ConvArgs, alloc: &mut ParamAlloc) -> Result<Self, String> {
        let w = alloc.add(
            a.name("lin_l.weight"),
            vec![a.out_dim, a.in_dim],
            Init::XavierGain(std::f32::consts::SQRT_2),
        );
        let bias = alloc.add(a.name("lin_l.bias"), vec![a.out_dim], Init::Const(0.0));
        let w_r = alloc.add(
            a.name("lin_r.weight"),
            vec![a.out_dim, a.in_dim],
            Init::XavierGain(std::f32::consts::SQRT_2),
        );
        Ok(SageConv {
            core: LinearAgg {
                in_dim: a.in_dim,
                out_dim: a.out_dim,
                w,
                w_r: Some(w_r),
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

impl Encoder for SageConv {
    const ABOUT: &'static str = "GraphSAGE, mean aggregator";
}

linear_agg_conv!(SageConv, AggCoefs::mean, "SAGEConv");
