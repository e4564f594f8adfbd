//! A plain linear layer (the MLP encoder): ignores the edges.

use super::layer::{Conv, ConvArgs, ConvCache, Encoder, Init, LayerExport, ParamAlloc};
use super::options::OptionValue;
use crate::input::InputRef;
use crate::kernels::BufferPool;
use crate::matmul::matmul_a_b;
use crate::Mat;
use tma_sample::BlockView;

/// A linear layer on the destination nodes, ignoring the edges (PyG's `MLP` layer /
/// `torch.nn.Linear`; the graph-free baseline):
///
/// `x_i' = W x_i + b`
///
/// Parameters (`{l}` = layer index): `encoder.{l}.weight` `[out, in]` (Glorot-uniform),
/// `encoder.{l}.bias` `[out]` (0), in this order.
///
/// **Shapes:** input `[num_src, in]` (only the first `num_dst` rows are read), output
/// `[num_dst, out]`; `dL/dx` is zero on rows `num_dst..num_src`.
#[derive(Clone, Debug)]
pub struct MlpConv {
    in_dim: usize,
    out_dim: usize,
    w: usize,
    bias: usize,
}

impl MlpConv {
    /// Declare `encoder.{l}.weight`, `encoder.{l}.bias`.
    pub(crate) fn build(a: &ConvArgs, alloc: &mut ParamAlloc) -> Result<Self, String> {
        let w = alloc.add(a.name("weight"), vec![a.out_dim, a.in_dim], Init::Glorot);
        let bias = alloc.add(a.name("bias"), vec![a.out_dim], Init::Const(0.0));
        Ok(MlpConv {
            in_dim: a.in_dim,
            out_dim: a.out_dim,
            w,
            bias,
        })
    }

    /// Input channels (`in`).
    pub fn in_channels(&self) -> usize {
        self.in_dim
    }

    /// Output channels (`out`).
    pub fn out_channels(&self) -> usize {
        self.out_dim
    }
}

impl Encoder for MlpConv {
    const ABOUT: &'static str = "no edges: a linear layer per node";
}

impl Conv for MlpConv {
    fn in_dim(&self) -> usize {
        self.in_dim
    }
    fn out_dim(&self) -> usize {
        self.out_dim
    }
    fn bias(&self) -> usize {
        self.bias
    }
    fn reads_all_rows_dense(&self, _b: &BlockView) -> bool {
        false
    }
    fn export(&self) -> LayerExport {
        LayerExport {
            module: "Linear",
            args: vec![
                ("in_channels", OptionValue::Int(self.in_dim as i64)),
                ("out_channels", OptionValue::Int(self.out_dim as i64)),
            ],
        }
    }
    fn forward(
        &self,
        pool: &BufferPool,
        p: &[f32],
        b: &BlockView,
        x: InputRef,
        _keep: bool,
    ) -> (Mat, Option<ConvCache>) {
        let (nd, din, dout) = (b.num_dst, self.in_dim, self.out_dim);
        let mut out = Mat::from_vec(nd, dout, pool.take(nd * dout));
        x.linear(
            pool,
            nd,
            &p[self.w..self.w + dout * din],
            dout,
            &mut out.data,
            false,
        );
        (out, None)
    }
    fn backward(
        &self,
        pool: &BufferPool,
        p: &[f32],
        b: &BlockView,
        x: InputRef,
        _cache: Option<ConvCache>,
        d: &Mat,
        g: &mut [f32],
        need_dx: bool,
    ) -> Option<Mat> {
        let (nd, ns, din, dout) = (b.num_dst, b.num_src, self.in_dim, self.out_dim);
        x.linear_weight_grad(pool, nd, &d.data, dout, &mut g[self.w..self.w + dout * din]);
        need_dx.then(|| {
            // only the first nd rows are written below: zero the rest
            let mut dx = if nd < ns {
                Mat::from_vec(ns, din, pool.take_zeroed(ns * din))
            } else {
                Mat::from_vec(ns, din, pool.take(ns * din))
            };
            let w = &p[self.w..self.w + dout * din];
            matmul_a_b(nd, din, dout, &d.data, w, &mut dx.data[..nd * din], false);
            dx
        })
    }
}
