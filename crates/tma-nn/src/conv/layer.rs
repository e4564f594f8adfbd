//! What every layer type of this folder is built from and implements: [`LayerOptions`],
//! `ConvArgs`, `ParamAlloc` / `Init` (its parameters) and the `Conv` trait. The registry
//! (`mod.rs`) and each layer file depend on it; it depends on neither.

use crate::input::InputRef;
use crate::kernels::BufferPool;
use crate::Mat;
use std::any::Any;
use std::fmt;
use tma_sample::BlockView;

/// Heads of a GAT hidden layer by default ([`crate::GatConv::DEFAULT_HEADS`]).
pub(crate) const DEFAULT_GAT_HEADS: usize = 8;

/// Options of layer types that have more than dimensions, for
/// [`crate::Model::try_new_with`]. `Default` is what [`crate::Model::new`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerOptions {
    /// Attention heads of [`crate::GatConv`]'s hidden layers (concatenated; the last layer has
    /// one head). Hidden width must be divisible by it. Default [`crate::GatConv::DEFAULT_HEADS`]
    /// (8, as Velickovic et al. 2018 on Cora).
    pub heads: usize,
}

impl Default for LayerOptions {
    fn default() -> Self {
        LayerOptions {
            heads: DEFAULT_GAT_HEADS,
        }
    }
}

/// What a layer is built from.
#[derive(Clone, Debug)]
pub(crate) struct ConvArgs {
    /// Layer index (0 = input layer); parameter names start with `encoder.{layer}.`.
    pub layer: usize,
    pub in_dim: usize,
    pub out_dim: usize,
    /// The encoder's last layer (its output is the model output: logits or embeddings).
    pub last: bool,
    pub opts: LayerOptions,
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

/// A graph convolution over a block: `[num_src, in_dim]` → `[num_dst, out_dim]`, **without**
/// its bias (the model adds it: fused with the post-processing on hidden layers).
pub(crate) trait Conv: Send + Sync + fmt::Debug {
    /// Input width.
    fn in_dim(&self) -> usize;
    /// Output width.
    fn out_dim(&self) -> usize;
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
