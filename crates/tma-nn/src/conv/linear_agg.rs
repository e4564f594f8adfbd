//! The shared core of [`crate::SageConv`] and [`crate::GcnConv`] ([`LinearAgg`]: a linear
//! aggregation and a dense transform, in the cheaper order) and the macro that makes such a
//! layer a `Conv` (`linear_agg_conv!`).

use super::layer::{ConvCache, LayerExport};
use super::options::OptionValue;
use crate::input::InputRef;
use crate::kernels::{aggregate, aggregate_backward, AggCoefs, BufferPool, Transposed};
use crate::matmul::{matmul_a_b, matmul_a_bt, matmul_at_b};
use crate::Mat;
use tma_sample::BlockView;

/// The [`Conv`] impl of a layer that is a [`LinearAgg`] (`self.core`, bias offset
/// `self.bias`) with its own aggregation coefficients (`$coefs(block)`) and PyTorch module name
/// (`$export`): SAGE (mean) and GCN (symmetric normalization) differ only there and in their
/// parameters. Evaluation's cost model is the default ([`super::layer::linear_eval_cost`]).
macro_rules! linear_agg_conv {
    ($ty:ty, $coefs:path, $export:literal) => {
        impl $crate::conv::layer::Conv for $ty {
            fn in_dim(&self) -> usize {
                self.core.in_dim
            }
            fn out_dim(&self) -> usize {
                self.core.out_dim
            }
            fn bias(&self) -> usize {
                self.bias
            }
            fn reads_all_rows_dense(&self, _b: &::tma_sample::BlockView) -> bool {
                self.core.out_dim < self.core.in_dim
            }
            fn export(&self) -> $crate::conv::layer::LayerExport {
                self.core.export($export)
            }
            fn forward(
                &self,
                pool: &$crate::kernels::BufferPool,
                p: &[f32],
                b: &::tma_sample::BlockView,
                x: $crate::input::InputRef,
                keep: bool,
            ) -> ($crate::Mat, Option<$crate::conv::layer::ConvCache>) {
                self.core.forward(pool, p, b, x, keep, $coefs(b))
            }
            fn backward(
                &self,
                pool: &$crate::kernels::BufferPool,
                p: &[f32],
                b: &::tma_sample::BlockView,
                x: $crate::input::InputRef,
                cache: Option<$crate::conv::layer::ConvCache>,
                d: &$crate::Mat,
                g: &mut [f32],
                need_dx: bool,
            ) -> Option<$crate::Mat> {
                self.core.backward(pool, p, b, x, cache, d, g, need_dx)
            }
        }
    };
}

/// The forward cache of [`LinearAgg`].
pub(crate) struct LinearAggCache {
    coefs: AggCoefs,
    transform_first: bool,
    /// Aggregate-first path: the aggregated input `[num_dst, in]`.
    agg: Option<Mat>,
}

/// The shared core of [`crate::SageConv`] and [`crate::GcnConv`]: `out = agg(X) Wᵀ (+ X_dst W_rᵀ)` for a
/// linear aggregation `agg` given by [`AggCoefs`]. Transforms before aggregating when
/// `out < in` and always for sparse input (`agg(X) Wᵀ = agg(X Wᵀ)`; `X` is never densified).
#[derive(Clone, Debug)]
pub(crate) struct LinearAgg {
    pub in_dim: usize,
    pub out_dim: usize,
    /// Offset of `W` `[out, in]`.
    pub w: usize,
    /// Offset of the root weight `W_r` `[out, in]` (SAGE).
    pub w_r: Option<usize>,
}

impl LinearAgg {
    /// `module` with its `in_channels` and `out_channels`.
    pub(crate) fn export(&self, module: &'static str) -> LayerExport {
        LayerExport {
            module,
            args: vec![
                ("in_channels", OptionValue::Int(self.in_dim as i64)),
                ("out_channels", OptionValue::Int(self.out_dim as i64)),
            ],
        }
    }

    pub(crate) fn forward(
        &self,
        pool: &BufferPool,
        p: &[f32],
        b: &BlockView,
        x: InputRef,
        keep: bool,
        coefs: AggCoefs,
    ) -> (Mat, Option<ConvCache>) {
        let (nd, ns, din, dout) = (b.num_dst, b.num_src, self.in_dim, self.out_dim);
        let w = &p[self.w..self.w + dout * din];
        // every path below overwrites `out` before reading it
        let mut out = Mat::from_vec(nd, dout, pool.take(nd * dout));
        let tf = x.is_sparse() || dout < din;
        let mut agg = None;
        if tf {
            let mut t = pool.take(ns * dout);
            x.linear(pool, ns, w, dout, &mut t, false);
            aggregate(b, &coefs, &t, None, dout, &mut out.data);
            pool.give(t);
        } else {
            let mut a = Mat::from_vec(nd, din, pool.take(nd * din));
            let (h, map) = x.agg_source(ns);
            aggregate(b, &coefs, h, map, din, &mut a.data);
            matmul_a_bt(nd, dout, din, &a.data, w, &mut out.data, false);
            if keep {
                agg = Some(a);
            } else {
                pool.give(a.data);
            }
        }
        if let Some(wr) = self.w_r {
            x.linear(pool, nd, &p[wr..wr + dout * din], dout, &mut out.data, true);
        }
        let cache = keep.then(|| {
            Box::new(LinearAggCache {
                coefs,
                transform_first: tf,
                agg,
            }) as ConvCache
        });
        (out, cache)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn backward(
        &self,
        pool: &BufferPool,
        p: &[f32],
        b: &BlockView,
        x: InputRef,
        cache: Option<ConvCache>,
        d: &Mat,
        g: &mut [f32],
        need_dx: bool,
    ) -> Option<Mat> {
        let (nd, ns, din, dout) = (b.num_dst, b.num_src, self.in_dim, self.out_dim);
        let c = cache
            .expect("backward needs a forward with keep")
            .downcast::<LinearAggCache>()
            .expect("forward cache of another layer type");
        let LinearAggCache {
            coefs,
            transform_first,
            agg,
        } = *c;
        let w = &p[self.w..self.w + dout * din];
        // every path below overwrites all of dx first
        let mut dx = need_dx.then(|| Mat::from_vec(ns, din, pool.take(ns * din)));
        if transform_first {
            let t = Transposed::new(b);
            let mut dt = pool.take(ns * dout);
            aggregate_backward(b, &t, &coefs, &d.data, dout, &mut dt, false);
            drop(t);
            x.linear_weight_grad(pool, ns, &dt, dout, &mut g[self.w..self.w + dout * din]);
            if let Some(dx) = dx.as_mut() {
                matmul_a_b(ns, din, dout, &dt, w, &mut dx.data, false);
            }
            pool.give(dt);
        } else {
            let a = agg.expect("forward cache without aggregate");
            matmul_at_b(
                dout,
                din,
                nd,
                &d.data,
                &a.data,
                &mut g[self.w..self.w + dout * din],
                true,
            );
            pool.give(a.data);
            if let Some(dx) = dx.as_mut() {
                let mut da = pool.take(nd * din);
                matmul_a_b(nd, din, dout, &d.data, w, &mut da, false);
                let t = Transposed::new(b);
                aggregate_backward(b, &t, &coefs, &da, din, &mut dx.data, false);
                pool.give(da);
            }
        }
        // Root term last: the paths above overwrite dx (first touch of fresh pages is a write,
        // never a read-then-write).
        if let Some(wr) = self.w_r {
            x.linear_weight_grad(pool, nd, &d.data, dout, &mut g[wr..wr + dout * din]);
            if let Some(dx) = dx.as_mut() {
                let w_r = &p[wr..wr + dout * din];
                matmul_a_b(nd, din, dout, &d.data, w_r, &mut dx.data[..nd * din], true);
            }
        }
        dx
    }
}
