//! What every layer type of this folder is built from and implements: `ConvArgs` (with the
//! encoder's options, `options.rs`), `ParamAlloc` / `Init` (its parameters), the `Conv` trait
//! (forward, backward, evaluation's cost model, PyTorch export) and the `Encoder` trait (what
//! the registry reads of a layer type: its description and options). The registry (`mod.rs`)
//! and each layer file depend on it; it depends on neither.

use super::options::{EncoderOption, EncoderOptions, OptionValue};
use crate::input::InputRef;
use crate::kernels::BufferPool;
use crate::Mat;
use std::any::Any;
use std::fmt;
use tma_sample::BlockView;

/// What a layer is built from.
#[derive(Clone, Debug)]
pub(crate) struct ConvArgs {
    /// Layer index (0 = input layer); parameter names start with `encoder.{layer}.`.
    pub layer: usize,
    pub in_dim: usize,
    pub out_dim: usize,
    /// The encoder's last layer (its output is the model output: logits or embeddings).
    pub last: bool,
    /// The encoder's options (its own, declared in `Encoder::OPTIONS`).
    pub opts: EncoderOptions,
}

impl ConvArgs {
    /// `encoder.{layer}.{name}`.
    pub(crate) fn name(&self, name: &str) -> String {
        format!("encoder.{}.{name}", self.layer)
    }
}

/// How a parameter tensor is initialised by [`crate::Model::init_params`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Init {
    /// Glorot/Xavier uniform `U(±sqrt(6 / (fan_in + fan_out)))` over the last two dimensions
    /// (PyG's `glorot`: `[out, in]` weights, `[1, heads, channels]` attention vectors).
    Glorot,
    /// Glorot/Xavier uniform scaled by `gain`: `U(±gain·sqrt(6 / (fan_in + fan_out)))`
    /// (PyTorch's `xavier_uniform_(w, gain)`; DGL's `SAGEConv` uses gain `sqrt(2)`).
    XavierGain(f32),
    /// `U(±1/sqrt(fan_in))` with the given `fan_in`: PyTorch's `nn.Linear` default for its
    /// weight (`kaiming_uniform_(a=sqrt(5))`) and its bias alike.
    FanIn(usize),
    /// Every element `v`.
    Const(f32),
}

/// Collects parameter tensors (name, shape, init) in declaration order; offsets are into the
/// model's flat [`crate::ParamSet`].
#[derive(Default, Debug)]
pub(crate) struct ParamAlloc {
    pub shapes: Vec<(String, Vec<usize>)>,
    pub inits: Vec<Init>,
    offset: usize,
}

impl ParamAlloc {
    /// Declare a tensor; returns its offset.
    pub(crate) fn add(&mut self, name: String, shape: Vec<usize>, init: Init) -> usize {
        let o = self.offset;
        self.offset += shape.iter().product::<usize>();
        self.shapes.push((name, shape));
        self.inits.push(init);
        o
    }
}

/// What a layer's forward keeps for its backward (the layer's own type, downcast there).
pub(crate) type ConvCache = Box<dyn Any + Send + Sync>;

/// What the registry reads of a layer type besides its `build` constructor.
pub(crate) trait Encoder {
    /// A few words for `--model`'s help and the README (`GraphSAGE, mean aggregator`).
    const ABOUT: &'static str;
    /// The options the encoder takes (flags, config keys, Python keywords), none by default.
    const OPTIONS: &'static [EncoderOption] = &[];
}

/// The sizes of one layer's block in evaluation's inference, for the layer's cost model
/// ([`crate::EvalLayer`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerCounts {
    /// Source rows (inputs).
    pub src: u64,
    /// Destination rows (outputs).
    pub dst: u64,
    /// Arcs (neighbour entries).
    pub arcs: u64,
    /// The encoder's first layer: its input is the node features, read in place where dense.
    pub input_layer: bool,
    /// The input is sparse (input layer over sparse features).
    pub sparse_input: bool,
}

/// How a layer is rebuilt in PyTorch (`python/tma/_torch.py` builds `module` with `args`), in
/// a model file's metadata: PyG's class names (`SAGEConv`, `GCNConv`, `GATConv`) and
/// `Linear`, with their constructor arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerExport {
    /// The module's class name.
    pub module: &'static str,
    /// Constructor arguments, `(name, value)`.
    pub args: Vec<(&'static str, OptionValue)>,
}

impl LayerExport {
    /// `{"module":"SAGEConv","in_channels":16,...}`.
    pub fn to_json(&self) -> String {
        let mut s = format!("{{\"module\":\"{}\"", self.module);
        for (k, v) in &self.args {
            s.push_str(&format!(",\"{k}\":{}", v.to_json()));
        }
        s.push('}');
        s
    }
}

/// Multiply-adds of a layer that aggregates at the narrower of its widths and runs its dense
/// product on at most every source and every destination (transform first, root term):
/// `arcs * min(din, dout) + (src + dst) * din * dout`. The cost model of layers without one of
/// their own (SAGE, GCN, MLP).
pub fn linear_eval_cost(c: &LayerCounts, din: usize, dout: usize) -> f64 {
    c.arcs as f64 * din.min(dout) as f64 + (c.src + c.dst) as f64 * din as f64 * dout as f64
}

/// Bytes of such a layer's activations in evaluation:
/// `4·(in·din + dst·din + t·src·dout + 2·dst·dout)`: its input rows (`in = src`, except an
/// input layer that aggregates first and has `2·dst < src` copies only its `dst` rows), the
/// aggregated rows, a transformed copy of the sources when it transforms first
/// (`t = 1` when `dout < din`), the output before and after the layer's norm/activation.
/// Sparse input counts as dense (an upper bound).
pub fn linear_eval_bytes(c: &LayerCounts, din: usize, dout: usize) -> u64 {
    let (s, d) = (c.src, c.dst);
    let transform_first = dout < din;
    let in_rows = if !c.input_layer || transform_first || 2 * d >= s {
        s
    } else {
        d
    };
    let t = if transform_first { s } else { 0 };
    let (din, dout) = (din as u64, dout as u64);
    4 * (in_rows * din + d * din + t * dout + 2 * d * dout)
}

/// A graph convolution over a block: `[num_src, in_dim]` → `[num_dst, out_dim]`, **without**
/// its bias (the model adds it: fused with the post-processing on hidden layers).
pub(crate) trait Conv: Send + Sync + fmt::Debug {
    /// Input width.
    fn in_dim(&self) -> usize;
    /// Output width.
    fn out_dim(&self) -> usize;
    /// Estimated multiply-adds of evaluating this layer on a block of `c`'s sizes (compared
    /// between evaluation's paths only). Default [`linear_eval_cost`].
    fn eval_cost(&self, c: &LayerCounts) -> f64 {
        linear_eval_cost(c, self.in_dim(), self.out_dim())
    }
    /// Estimated bytes of this layer's activations when evaluated on a block of `c`'s sizes
    /// (evaluation sizes its chunks by it). Default [`linear_eval_bytes`].
    fn eval_bytes(&self, c: &LayerCounts) -> u64 {
        linear_eval_bytes(c, self.in_dim(), self.out_dim())
    }
    /// The layer in PyTorch terms (a model file's metadata; `tma.to_torch`).
    fn export(&self) -> LayerExport;
    /// Offset of the layer's bias `[out_dim]`.
    fn bias(&self) -> usize;
    /// Whether a dense input is multiplied on every source row of `b` (so an
    /// [`crate::Input::Indexed`] input is gathered whole, not only its destination rows).
    fn reads_all_rows_dense(&self, b: &BlockView) -> bool;
    /// `out = conv(x)` without bias; with `keep`, the cache for [`Conv::backward`].
    ///
    /// The caller has checked `x.rows() == b.num_src`, `x.dim() == in_dim`, `num_dst <= num_src`.
    fn forward(
        &self,
        pool: &BufferPool,
        p: &[f32],
        b: &BlockView,
        x: InputRef,
        keep: bool,
    ) -> (Mat, Option<ConvCache>);
    /// Given `d = dL/d out` `[num_dst, out_dim]`, **accumulate** the weight gradients into `g`
    /// (not the bias: the model does it) and return `dL/dx` `[num_src, in_dim]` when `need_dx`.
    #[allow(clippy::too_many_arguments)]
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
    ) -> Option<Mat>;
}

/// One encoder layer as evaluation's planning and the model file's metadata see it
/// ([`crate::Model::eval_layers`]): its widths, its own cost model and its PyTorch export.
#[derive(Clone, Copy)]
pub struct EvalLayer<'a>(pub(crate) &'a dyn Conv);

impl EvalLayer<'_> {
    /// Input width.
    pub fn in_dim(&self) -> usize {
        self.0.in_dim()
    }
    /// Output width.
    pub fn out_dim(&self) -> usize {
        self.0.out_dim()
    }
    /// Estimated multiply-adds on a block of `c`'s sizes (the layer's own model).
    pub fn cost(&self, c: &LayerCounts) -> f64 {
        self.0.eval_cost(c)
    }
    /// Estimated bytes of its activations on a block of `c`'s sizes (the layer's own model,
    /// following the computation path the layer itself would choose there).
    pub fn bytes(&self, c: &LayerCounts) -> u64 {
        self.0.eval_bytes(c)
    }
    /// The layer in PyTorch terms.
    pub fn export(&self) -> LayerExport {
        self.0.export()
    }
}

impl fmt::Debug for EvalLayer<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
