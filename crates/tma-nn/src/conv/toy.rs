//! A toy encoder, compiled in tests only: what adding an encoder with an option of its own
//! takes (this file and one line of the registry in `mod.rs`; docs/decisions/0023). The model
//! tests then run it like every registered encoder (finite-difference gradients included).

use super::layer::{Conv, ConvArgs, ConvCache, Encoder, LayerExport, ParamAlloc};
use super::mlp::MlpConv;
use super::options::{EncoderOption, EncoderShape, OptionValue};
use crate::input::InputRef;
use crate::kernels::BufferPool;
use crate::Mat;
use tma_sample::BlockView;

/// `x_i' = gain · W x_i + b`: the MLP layer scaled by the option `gain` (an integer >= 1,
/// default 2). Parameters as [`MlpConv`]: `encoder.{l}.weight` `[out, in]`, `encoder.{l}.bias`
/// `[out]`. **Shapes:** input `[num_src, in]`, output `[num_dst, out]`.
#[derive(Clone, Debug)]
pub struct ToyConv {
    inner: MlpConv,
    gain: f32,
}

impl ToyConv {
    /// Declares the MLP layer's parameters; reads `gain`.
    pub(crate) fn build(a: &ConvArgs, alloc: &mut ParamAlloc) -> Result<Self, String> {
        Ok(ToyConv {
            inner: MlpConv::build(a, alloc)?,
            gain: a.opts.int("gain") as f32,
        })
    }
}

fn check_gain(v: OptionValue, _: &EncoderShape) -> Result<(), String> {
    match v {
        OptionValue::Int(g) if g >= 1 => Ok(()),
        _ => Err(format!("--gain must be an integer >= 1, got {v}")),
    }
}

impl Encoder for ToyConv {
    const ABOUT: &'static str = "a scaled linear layer, tests only";
    const OPTIONS: &'static [EncoderOption] = &[EncoderOption {
        name: "gain",
        default: OptionValue::Int(2),
        help: "Factor on the toy encoder's linear layer.",
        value_name: "G",
        check: check_gain,
    }];
}

/// `m *= gain` in place.
fn scale(m: &mut Mat, gain: f32) {
    m.data.iter_mut().for_each(|v| *v *= gain);
}

impl Conv for ToyConv {
    fn in_dim(&self) -> usize {
        self.inner.in_dim()
    }
    fn out_dim(&self) -> usize {
        self.inner.out_dim()
    }
    fn bias(&self) -> usize {
        self.inner.bias()
    }
    fn reads_all_rows_dense(&self, b: &BlockView) -> bool {
        self.inner.reads_all_rows_dense(b)
    }
    fn export(&self) -> LayerExport {
        let mut e = self.inner.export();
        e.module = "ToyLinear";
        e.args.push(("gain", OptionValue::Int(self.gain as i64)));
        e
    }
    fn forward(
        &self,
        pool: &BufferPool,
        p: &[f32],
        b: &BlockView,
        x: InputRef,
        keep: bool,
    ) -> (Mat, Option<ConvCache>) {
        let (mut out, cache) = self.inner.forward(pool, p, b, x, keep);
        scale(&mut out, self.gain);
        (out, cache)
    }
    fn backward(
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
        let mut dg = Mat::from_vec(d.rows, d.cols, pool.take(d.data.len()));
        dg.data.copy_from_slice(&d.data);
        scale(&mut dg, self.gain);
        let dx = self.inner.backward(pool, p, b, x, cache, &dg, g, need_dx);
        pool.give(dg.data);
        dx
    }
}
