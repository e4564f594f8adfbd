//! The GNN models: encoder (a stack of one registered layer type from [`crate::conv`], with
//! LayerNorm → PReLU → dropout between layers), the link decoder, forward and backward.

use crate::bf16::{self, Backend, MatmulPrecision};
use crate::conv::{ConvArgs, ConvCache, EncoderKind, EncoderOptions, EvalLayer, Init, ParamAlloc};
use crate::input::InputRef;
use crate::kernels::{
    add_bias, add_col_sums, add_into, dropout_apply, dropout_mask, lane_sum, min_rows,
    post_backward, post_forward, prelu1, prelu_grad1, BufferPool,
};
use crate::matmul::{matmul_a_b, matmul_a_bt, matmul_a_bt_serial, matmul_at_b};
use crate::{Mat, NnError, ParamSet, ParamSpec};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::sync::Arc;
use tma_graph::{Csr, Features};
use tma_sample::BlockView;

/// What the model predicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    /// Link prediction: the encoder outputs `hidden`-d embeddings, scored by the decoder
    /// `s(u,v) = Linear(d,1)(PReLU(Linear(d,d)(h_u ⊙ h_v)))`.
    Link,
    /// Node classification: the last layer outputs `num_classes` logits.
    Node {
        /// Number of classes (logits per node), ≥ 1.
        num_classes: usize,
    },
}

/// Model hyper-parameters (defaults of [`ModelConfig::new`]: hidden 256, 2 layers, dropout 0,
/// LayerNorm on, the random-tma reference set-up).
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    /// The layer type every encoder layer uses.
    pub encoder: EncoderKind,
    /// Width of the input features (columns of `x`).
    pub in_dim: usize,
    /// Width of every hidden layer's output, and of the embeddings with [`Head::Link`]. GAT
    /// splits it into heads: it must be divisible by its option `heads`.
    pub hidden: usize,
    /// Encoder layers (≥ 1); one sampled block per layer.
    pub num_layers: usize,
    /// Dropout probability after each hidden layer's activation, in `[0, 1)`.
    pub dropout: f32,
    /// What the model predicts (sets the last layer's width and the decoder).
    pub head: Head,
    /// LayerNorm between layers (conv → LayerNorm → PReLU → dropout → conv).
    /// `false` gives conv → PReLU → dropout → conv (Kipf & Welling's GCN has no norm).
    pub layer_norm: bool,
}

impl ModelConfig {
    /// Defaults: hidden 256, 2 layers, dropout 0, LayerNorm on.
    pub fn new(encoder: EncoderKind, in_dim: usize, head: Head) -> ModelConfig {
        ModelConfig {
            encoder,
            in_dim,
            hidden: 256,
            num_layers: 2,
            dropout: 0.0,
            head,
            layer_norm: true,
        }
    }
}

/// One encoder layer: its conv (which knows its parameter offsets) and, on all layers but the
/// last, the offsets of LayerNorm weight/bias and the PReLU slope.
#[derive(Clone, Debug)]
struct Layer {
    conv: Arc<dyn crate::conv::Conv>,
    norm_w: Option<usize>,
    norm_b: Option<usize>,
    act: Option<usize>,
}

#[derive(Clone, Debug)]
struct DecoderLayout {
    dim: usize,
    w1: usize,
    b1: usize,
    act: usize,
    w2: usize,
    b2: usize,
}

/// A GNN model: configuration plus the parameter layout. Parameters live outside, in a
/// [`ParamSet`] (from [`Model::init_params`]), so trainers can average them freely.
///
/// Parameter names (PyG-style, weights `[out, in]` as PyTorch): each layer's own under
/// `encoder.{l}.` (see the layer types: [`crate::SageConv`] `lin_l.weight`, `lin_l.bias`,
/// `lin_r.weight`; [`crate::GcnConv`] `lin.weight`, `bias`; [`crate::GatConv`] `lin.weight`,
/// `att_src`, `att_dst`, `bias`; [`crate::MlpConv`] `weight`, `bias`); between layers
/// `encoder.norm.{l}.weight|bias` `[hidden]` and `encoder.act.{l}.weight` `[1]`; link head `decoder.lin1.weight` `[d, d]`,
/// `decoder.lin1.bias` `[d]`, `decoder.act.weight` `[1]`, `decoder.lin2.weight` `[1, d]`,
/// `decoder.lin2.bias` `[1]`.
#[derive(Clone, Debug)]
pub struct Model {
    /// The configuration it was built from.
    pub cfg: ModelConfig,
    /// The encoder's options it was built with.
    options: EncoderOptions,
    layers: Vec<Layer>,
    decoder: Option<DecoderLayout>,
    specs: Vec<ParamSpec>,
    /// How each tensor of `specs` is initialised (same order).
    inits: Vec<Init>,
    num_params: usize,
    /// Recycled activation / gradient buffers (see `BufferPool`).
    pool: BufferPool,
    /// How the link decoder's products run: `None` f32 (`gemm`), `Some` bf16 tiles
    /// ([`MatmulPrecision::Medium`]).
    bf16: Option<Backend>,
}

/// Per-layer state kept by [`Model::forward`] for [`Model::backward`].
struct LayerCache {
    /// The conv's own cache.
    conv: Option<ConvCache>,
    post: Option<PostCache>,
}

/// LayerNorm → PReLU → dropout state of a non-last layer.
struct PostCache {
    /// Normalised conv output `[num_dst, hidden]`.
    xhat: Mat,
    rstd: Vec<f32>,
    mask: Option<Vec<u8>>,
    /// Post-activation output, the next layer's input.
    out: Mat,
}

/// What [`Model::forward`] keeps for [`Model::backward`]; borrows the blocks and the input
/// features (no copies, except the rows [`Input::Indexed`] needs contiguous).
pub struct ForwardCache<'a> {
    blocks: Vec<BlockView<'a>>,
    x: Input<'a>,
    /// Gathered first-layer rows of an indexed input (empty otherwise).
    x_rows: Vec<f32>,
    layers: Vec<LayerCache>,
}

/// The input features of [`Model::forward`]: row `j` belongs to source node `j` of the first
/// block.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// The rows themselves, `[blocks[0].num_src, in_dim]` (e.g. gathered with
    /// `Features::gather_into`), dense or sparse.
    Rows(&'a Features),
    /// Rows of a larger dense row-major matrix `all` (`[N, dim]`) picked by `rows`
    /// (`blocks[0].num_src` node ids, e.g. a mini-batch's `input_nodes`), without a gathered
    /// copy: the first layer's aggregation reads `all[rows[j]]` directly (gather fused into the
    /// aggregation); only the rows a dense product needs are copied (the first block's
    /// `num_dst` destination rows, or all rows when that layer transforms before aggregating).
    /// Same values as [`Input::Rows`] of the gathered matrix.
    Indexed {
        /// The whole matrix, `[N, dim]` row-major.
        all: &'a [f32],
        /// Columns of `all` (the model's `in_dim`).
        dim: usize,
        /// Row ids into `all`, one per source node of the first block.
        rows: &'a [u32],
    },
}

impl<'a> Input<'a> {
    /// Rows `rows` of `x` as a model input: [`Input::Indexed`] for dense features (no copy),
    /// else gathered into `buf` (reused across calls) as [`Input::Rows`].
    pub fn select(x: &'a Features, rows: &'a [u32], buf: &'a mut Features) -> Input<'a> {
        match x {
            Features::Dense { dim, data, .. } => Input::Indexed {
                all: data,
                dim: *dim,
                rows,
            },
            Features::Sparse { .. } => {
                x.gather_into(rows, buf);
                Input::Rows(buf)
            }
        }
    }
}

impl<'a> From<&'a Features> for Input<'a> {
    fn from(x: &'a Features) -> Input<'a> {
        Input::Rows(x)
    }
}

/// The first layer's input view of `x` (with its gathered rows `x_rows`).
fn first_input<'b>(x: &Input<'b>, x_rows: &'b [f32]) -> InputRef<'b> {
    match *x {
        Input::Rows(f) => InputRef::from_features(f),
        Input::Indexed { all, dim, rows } => {
            if x_rows.len() == rows.len() * dim {
                InputRef::Dense {
                    rows: rows.len(),
                    dim,
                    data: x_rows,
                }
            } else {
                InputRef::Indexed {
                    dim,
                    all,
                    map: rows,
                    dst: x_rows,
                }
            }
        }
    }
}

/// What [`Model::decode`] keeps for [`Model::decode_backward`]; borrows `h`.
pub struct DecodeCache<'a> {
    h: &'a Mat,
    src: Vec<u32>,
    dst: Vec<u32>,
    /// Decoder pre-activation `u = (h_u ⊙ h_v) W1ᵀ + b1`, `[B, d]`.
    u: Mat,
}

/// `row = Σ dz_i ⊙ h_other` over one node's `(pair i, other end)` items (row kernel of
/// `Model::scatter_pair_grads`).
#[inline(always)]
fn gather_pair_row(row: &mut [f32], items: &[(u32, u32)], dz: &[f32], h: &Mat) {
    let d = h.cols;
    row.fill(0.0);
    for &(i, other) in items {
        let (dzi, ho) = (
            &dz[i as usize * d..(i as usize + 1) * d],
            h.row(other as usize),
        );
        for ((r, a), b) in row.iter_mut().zip(dzi).zip(ho) {
            *r += a * b;
        }
    }
}

/// Pairs per chunk in [`Model::score`].
const SCORE_CHUNK: usize = 512;

impl Model {
    /// Lay out the parameters of `cfg` with the encoder's default options.
    ///
    /// # Panics
    /// With the message of [`Model::try_new`]'s error on an invalid configuration.
    pub fn new(cfg: ModelConfig) -> Model {
        Model::try_new(cfg).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Model::new`] returning configuration errors instead of panicking.
    ///
    /// # Errors
    /// [`NnError::Config`] if `num_layers == 0`, a dimension or `num_classes` is 0, `dropout`
    /// is outside `[0, 1)`, or the encoder's layer type rejects its shape (e.g. a GAT hidden
    /// width not divisible by its heads).
    pub fn try_new(cfg: ModelConfig) -> Result<Model, NnError> {
        let opts = cfg.encoder.default_options();
        Model::try_new_with(cfg, opts)
    }

    /// [`Model::try_new`] with the encoder's options (e.g. GAT's `heads`:
    /// `EncoderKind::Gat.default_options()` then [`EncoderOptions::set`]).
    ///
    /// # Errors
    /// As [`Model::try_new`]; also options of another encoder than `cfg.encoder`.
    pub fn try_new_with(cfg: ModelConfig, opts: EncoderOptions) -> Result<Model, NnError> {
        let bad = |m: String| Err(NnError::Config(m));
        if opts.encoder_name() != cfg.encoder.name() {
            return bad(format!(
                "options of encoder {} given for encoder {}",
                opts.encoder_name(),
                cfg.encoder
            ));
        }
        if cfg.num_layers < 1 {
            return bad("num_layers must be >= 1".into());
        }
        if cfg.in_dim == 0 || cfg.hidden == 0 {
            return bad("dimensions must be > 0".into());
        }
        if !(0.0..1.0).contains(&cfg.dropout) {
            return bad(format!("dropout must be in [0, 1), got {}", cfg.dropout));
        }
        let out_dim = match cfg.head {
            Head::Link => cfg.hidden,
            Head::Node { num_classes: 0 } => return bad("num_classes must be > 0".into()),
            Head::Node { num_classes } => num_classes,
        };
        let mut alloc = ParamAlloc::default();
        let mut layers = Vec::new();
        for l in 0..cfg.num_layers {
            let last = l + 1 == cfg.num_layers;
            let args = ConvArgs {
                layer: l,
                in_dim: if l == 0 { cfg.in_dim } else { cfg.hidden },
                out_dim: if last { out_dim } else { cfg.hidden },
                last,
                opts: opts.clone(),
            };
            let conv = cfg
                .encoder
                .build(&args, &mut alloc)
                .map_err(NnError::Config)?;
            let dout = args.out_dim;
            let (norm_w, norm_b, act) = if last {
                (None, None, None)
            } else if !cfg.layer_norm {
                let act = alloc.add(
                    format!("encoder.act.{l}.weight"),
                    vec![1],
                    Init::Const(0.25),
                );
                (None, None, Some(act))
            } else {
                let nw = alloc.add(
                    format!("encoder.norm.{l}.weight"),
                    vec![dout],
                    Init::Const(1.0),
                );
                let nb = alloc.add(
                    format!("encoder.norm.{l}.bias"),
                    vec![dout],
                    Init::Const(0.0),
                );
                let act = alloc.add(
                    format!("encoder.act.{l}.weight"),
                    vec![1],
                    Init::Const(0.25),
                );
                (Some(nw), Some(nb), Some(act))
            };
            layers.push(Layer {
                conv,
                norm_w,
                norm_b,
                act,
            });
        }
        let decoder = match cfg.head {
            Head::Link => {
                let d = cfg.hidden;
                let mut push =
                    |name: &str, shape: Vec<usize>, init| alloc.add(name.into(), shape, init);
                Some(DecoderLayout {
                    dim: d,
                    w1: push("decoder.lin1.weight", vec![d, d], Init::FanIn(d)),
                    b1: push("decoder.lin1.bias", vec![d], Init::FanIn(d)),
                    act: push("decoder.act.weight", vec![1], Init::Const(0.25)),
                    w2: push("decoder.lin2.weight", vec![1, d], Init::FanIn(d)),
                    b2: push("decoder.lin2.bias", vec![1], Init::FanIn(d)),
                })
            }
            Head::Node { .. } => None,
        };
        let ParamAlloc { shapes, inits, .. } = alloc;
        // the layout only: a model too large for the machine is refused by its users' memory
        // checks before any parameter is allocated
        let Some((specs, num_params)) = ParamSet::layout(&shapes) else {
            return bad(format!(
                "the model's parameter count overflows this machine's address space (hidden {}, {} layers)",
                cfg.hidden, cfg.num_layers
            ));
        };
        Ok(Model {
            cfg,
            options: opts,
            layers,
            decoder,
            num_params,
            specs,
            inits,
            pool: BufferPool::default(),
            bf16: None,
        })
    }

    /// Set the precision of the model's dense matrix products and return the precision in
    /// effect: [`MatmulPrecision::Medium`] (bf16 operands, f32 sums, see `src/bf16.rs`) only
    /// where the CPU has a bf16 product ([`bf16_products`](crate::bf16_products): AMX tiles or
    /// AVX512_BF16 dot products); otherwise [`MatmulPrecision::Highest`],
    /// which the caller should say. Medium covers the link decoder's three products (training
    /// and [`Model::score`]) and the encoder's linear layers on dense inputs (every layer
    /// type's weight products: forward, backward, inference; GAT's attention products and
    /// products with sparse input features stay f32).
    pub fn set_matmul_precision(&mut self, p: MatmulPrecision) -> MatmulPrecision {
        self.bf16 = match p {
            MatmulPrecision::Medium => crate::bf16::hardware_backend(),
            MatmulPrecision::Highest => None,
        };
        self.matmul_precision()
    }

    /// The precision in effect for the link decoder's products.
    pub fn matmul_precision(&self) -> MatmulPrecision {
        match self.bf16 {
            Some(_) => MatmulPrecision::Medium,
            None => MatmulPrecision::Highest,
        }
    }

    /// Run the bf16 path on the scalar emulation of the tile product (tests on any CPU).
    #[cfg(test)]
    pub(crate) fn use_emulated_bf16(&mut self) {
        self.bf16 = Some(Backend::Emulated);
    }

    /// The tile backend for the decoder's products on `pairs` pairs (`None`: f32): as the
    /// general products, small ones stay f32 (`bf16::tiles_pay`).
    fn decoder_tiles(&self, pairs: usize) -> Option<Backend> {
        let d = self.decoder().dim;
        self.bf16
            .filter(|&b| bf16::tiles_pay(b, pairs, pairs * d * d))
    }

    fn decoder_params<'p>(&self, p: &'p ParamSet) -> bf16::DecoderParams<'p> {
        let dl = self.decoder();
        let d = dl.dim;
        bf16::DecoderParams {
            w1: &p.data[dl.w1..dl.w1 + d * d],
            b1: &p.data[dl.b1..dl.b1 + d],
            slope: p.data[dl.act],
            w2: &p.data[dl.w2..dl.w2 + d],
            b2: p.data[dl.b2],
        }
    }

    /// Free the activation buffers this model keeps for reuse between iterations (up to 32
    /// large buffers, about one iteration's activations).
    pub fn release_buffers(&self) {
        self.pool.clear();
    }

    /// A copy of this model that reuses buffers from the same pool as this one (and as every
    /// other copy made so): for `sharers` models that run iterations at most `sharers` at a
    /// time (e.g. in-process trainers behind a step gate), so that the buffers kept between
    /// iterations are those of `sharers` iterations, not one per model. The pool then holds
    /// up to `32 * sharers` buffers. [`Clone`] gives a model its own empty pool.
    pub fn sharing_buffers(&self, sharers: usize) -> Model {
        Model {
            pool: self.pool.shared(sharers),
            ..self.clone()
        }
    }

    /// Hand a matrix this model returned (the output of [`Model::forward`], the `dL/dh` of
    /// [`Model::decode_backward`]) back for reuse by the next iteration, instead of freeing
    /// it: a fresh large buffer costs a page fault per page on first touch.
    pub fn recycle(&self, m: Mat) {
        self.pool.give(m.data);
    }

    /// Fill the buffer pool with NaN buffers (tests: stale pooled contents must never leak).
    #[cfg(test)]
    pub(crate) fn poison_pool(&self) {
        for k in 0..BufferPool::MAX {
            self.pool.give(vec![f32::NAN; 70_000 + k * 30_000]);
        }
    }

    /// The parameter layout (names, shapes, offsets) every [`ParamSet`] of this model has.
    pub fn param_specs(&self) -> &[ParamSpec] {
        &self.specs
    }

    /// Number of scalar parameters.
    pub fn num_params(&self) -> usize {
        self.num_params
    }

    /// Width of the encoder output: `hidden` (link head) or `num_classes` (node head).
    pub fn out_dim(&self) -> usize {
        self.layers.last().unwrap().conv.out_dim()
    }

    /// The encoder's options the model was built with.
    pub fn encoder_options(&self) -> &EncoderOptions {
        &self.options
    }

    /// The encoder's layers, input layer first, as evaluation's planning sees them (widths,
    /// each layer's own cost model) and as PyTorch rebuilds them ([`EvalLayer::export`]).
    pub fn eval_layers(&self) -> Vec<EvalLayer<'_>> {
        self.layers.iter().map(|l| EvalLayer(&*l.conv)).collect()
    }

    /// What a model file says about the model (the safetensors `__metadata__` key
    /// [`Model::METADATA_KEY`]), as one JSON object: `format` (1), `encoder` (its name),
    /// `options` (its options, e.g. `{"heads":8}`), `in_dim`, `hidden`, `num_layers`,
    /// `out_dim`, `head` (`"node"` or `"link"`), `num_classes` (node head), `layer_norm`,
    /// `dropout`, and `layers`: each layer's PyTorch export (`{"module":"GATConv",
    /// "in_channels":...}`), input layer first. Enough to rebuild the model without its run's
    /// configuration.
    pub fn file_metadata(&self) -> String {
        let c = &self.cfg;
        let (head, classes) = match c.head {
            Head::Link => ("link", String::new()),
            Head::Node { num_classes } => ("node", format!(",\"num_classes\":{num_classes}")),
        };
        let layers: Vec<String> = self
            .eval_layers()
            .iter()
            .map(|l| l.export().to_json())
            .collect();
        format!(
            "{{\"format\":1,\"encoder\":\"{}\",\"options\":{},\"in_dim\":{},\"hidden\":{},\"num_layers\":{},\"out_dim\":{},\"head\":\"{head}\"{classes},\"layer_norm\":{},\"dropout\":{},\"layers\":[{}]}}",
            c.encoder,
            self.options.to_json(),
            c.in_dim,
            c.hidden,
            c.num_layers,
            self.out_dim(),
            c.layer_norm,
            c.dropout,
            layers.join(",")
        )
    }

    /// The safetensors metadata key of [`Model::file_metadata`].
    pub const METADATA_KEY: &'static str = "tma.model";

    /// A zero-filled [`ParamSet`] with this model's layout (a gradient buffer).
    pub fn zero_params(&self) -> ParamSet {
        ParamSet {
            specs: self.specs.clone(),
            data: vec![0.0; self.num_params],
        }
    }

    /// Fresh parameters, as the reference stack (PyTorch + DGL) initialises them: SAGE weights
    /// Xavier-uniform with gain `sqrt(2)` (DGL's `SAGEConv`), GCN / MLP / GAT weights
    /// Glorot-uniform (`U(±sqrt(6/(in+out)))`; GAT's `[1, heads, C]` attention vectors over
    /// `heads + C`, as PyG's `glorot`), encoder biases 0, LayerNorm weight 1 / bias 0, PReLU
    /// slope 0.25, and the link decoder's two linear layers (weights and biases)
    /// `U(±1/sqrt(fan_in))`, PyTorch's `nn.Linear` default. Drawn in spec order.
    /// docs/decisions/0006-learning-per-step.md has the measurements behind this.
    pub fn init_params(&self, rng: &mut ChaCha8Rng) -> ParamSet {
        let mut p = self.zero_params();
        for (s, init) in self.specs.iter().zip(&self.inits) {
            let v = &mut p.data[s.offset..s.offset + s.numel()];
            match *init {
                Init::Const(c) => v.fill(c),
                Init::Glorot | Init::XavierGain(_) => {
                    let gain = match *init {
                        Init::XavierGain(g) => g as f64,
                        _ => 1.0,
                    };
                    let k = s.shape.len();
                    let fans = s.shape[k.saturating_sub(2)..].iter().sum::<usize>();
                    let a = (gain * (6.0 / fans as f64).sqrt()) as f32;
                    for x in v.iter_mut() {
                        *x = rng.random_range(-a..a);
                    }
                }
                Init::FanIn(fan_in) => {
                    let a = (1.0 / (fan_in.max(1) as f64).sqrt()) as f32;
                    for x in v.iter_mut() {
                        *x = rng.random_range(-a..a);
                    }
                }
            }
        }
        p
    }

    fn check_params(&self, p: &ParamSet, what: &str) {
        assert_eq!(
            p.data.len(),
            self.num_params,
            "{what}: parameter count does not match the model"
        );
    }

    /// Encoder forward over sampled blocks (`blocks.len() == num_layers`, input layer first;
    /// `x` = features of `blocks[0]`'s source nodes: `&Features` of shape
    /// `[blocks[0].num_src, in_dim]`, dense or sparse, or [`Input::Indexed`] rows of a larger
    /// dense matrix). Returns `[last block's num_dst, out_dim]` and the cache for
    /// [`Model::backward`]. `training` enables dropout (drawn from `rng`); with dropout 0 `rng`
    /// is not touched.
    ///
    /// # Panics
    /// On a wrong number of blocks, `x` shape, block chaining
    /// (`blocks[l+1].num_src != blocks[l].num_dst`), row ids out of range or parameter count.
    pub fn forward<'a>(
        &self,
        p: &ParamSet,
        blocks: &[BlockView<'a>],
        x: impl Into<Input<'a>>,
        training: bool,
        rng: &mut ChaCha8Rng,
    ) -> (Mat, ForwardCache<'a>) {
        let _precision = bf16::PrecisionScope::enter(self.bf16);
        let x = x.into();
        assert!(!blocks.is_empty(), "need one block per layer");
        let x_rows = self.gather_first_rows(&x, &blocks[0]);
        let x0 = first_input(&x, &x_rows);
        let (out, layers) = self.forward_impl(p, blocks, x0, training, Some(rng), true);
        (
            out,
            ForwardCache {
                blocks: blocks.to_vec(),
                x,
                x_rows,
                layers,
            },
        )
    }

    /// For [`Input::Indexed`]: the input rows the first layer needs contiguous, gathered into a
    /// pooled buffer: its `num_dst` destination rows (the root term's and an MLP's dense
    /// product), or every row when the layer transforms before aggregating (`out < in`) or the
    /// destinations are at least half the sources. Empty for [`Input::Rows`].
    fn gather_first_rows(&self, x: &Input, b: &BlockView) -> Vec<f32> {
        self.gather_layer_rows(0, x, b)
    }

    /// [`Model::gather_first_rows`] for the input of layer `l`.
    fn gather_layer_rows(&self, l: usize, x: &Input, b: &BlockView) -> Vec<f32> {
        let Input::Indexed { all, dim, rows } = *x else {
            return Vec::new();
        };
        let conv = &self.layers[l].conv;
        assert_eq!(
            dim,
            conv.in_dim(),
            "indexed input: dim != layer {l}'s in_dim"
        );
        assert_eq!(
            rows.len(),
            b.num_src,
            "indexed input: rows != block num_src"
        );
        assert_eq!(all.len() % dim.max(1), 0, "indexed input: data length");
        let transform_first = conv.reads_all_rows_dense(b);
        // When the destinations are most of the sources (large link batches: 856k of 1M rows)
        // the partial gather costs nearly as much as a full one, and aggregating from the
        // contiguous copy avoids a row-map lookup per arc: gather everything then.
        let n = if transform_first || 2 * b.num_dst >= rows.len() {
            rows.len()
        } else {
            b.num_dst.min(rows.len())
        };
        let mut buf = self.pool.take(n * dim);
        tma_graph::gather_rows_into(all, dim, &rows[..n], &mut buf);
        buf
    }

    /// Exact layer-wise full-neighbour inference on a whole graph (eval mode: no dropout),
    /// every layer over all `N` nodes before the next; only one layer's activations are alive
    /// at a time. `degrees = graph.degrees()`, `x: [N, in_dim]`. Returns `[N, out_dim]`.
    pub fn infer_full(&self, p: &ParamSet, graph: &Csr, degrees: &[u32], x: &Features) -> Mat {
        let _precision = bf16::PrecisionScope::enter(self.bf16);
        let full = BlockView::full(graph, degrees);
        let blocks = vec![full; self.layers.len()];
        self.forward_impl(p, &blocks, InputRef::from_features(x), false, None, false)
            .0
    }

    /// Inference (eval mode: no dropout, no cache) over blocks, e.g. the exact full-neighbour
    /// blocks of a chunk of seed nodes: same values as [`Model::forward`] with
    /// `training = false`, but only one layer's activations are alive at a time. Returns
    /// `[last block's num_dst, out_dim]`.
    ///
    /// # Panics
    /// As [`Model::forward`].
    pub fn infer_blocks<'a>(
        &self,
        p: &ParamSet,
        blocks: &[BlockView<'a>],
        x: impl Into<Input<'a>>,
    ) -> Mat {
        let _precision = bf16::PrecisionScope::enter(self.bf16);
        let x = x.into();
        assert!(!blocks.is_empty(), "need one block per layer");
        let x_rows = self.gather_first_rows(&x, &blocks[0]);
        let x0 = first_input(&x, &x_rows);
        let out = self.forward_impl(p, blocks, x0, false, None, false).0;
        self.pool.give(x_rows);
        out
    }

    /// One layer of inference (eval mode): layer `l` (its conv, then the bias, norm and
    /// activation of a hidden layer) on `block`, whose source rows are `x` (`[num_src,
    /// layer l's in_dim]`; for `l > 0` the previous layer's outputs, e.g. as
    /// [`Input::Indexed`] rows of a stored matrix). Returns `[num_dst, layer l's out_dim]`: the
    /// values [`Model::infer_blocks`] computes at that layer for the same block and inputs.
    /// Layer-wise inference over a node set runs each layer once over every node it needs.
    ///
    /// # Panics
    /// If `l` is not a layer, or the shapes disagree (as [`Model::forward`]).
    pub fn infer_layer<'a>(
        &self,
        p: &ParamSet,
        l: usize,
        block: &BlockView<'a>,
        x: impl Into<Input<'a>>,
    ) -> Mat {
        let _precision = bf16::PrecisionScope::enter(self.bf16);
        self.check_params(p, "infer_layer");
        assert!(l < self.layers.len(), "layer {l} of {}", self.layers.len());
        let x = x.into();
        let x_rows = self.gather_layer_rows(l, &x, block);
        let input = first_input(&x, &x_rows);
        let lay = &self.layers[l];
        let (mut out, _) = self.conv_forward(l, &p.data, block, input, false, lay.act.is_none());
        self.pool.give(x_rows);
        let Some(act) = lay.act else {
            return out;
        };
        let cols = lay.conv.out_dim();
        let ln = match (lay.norm_w, lay.norm_b) {
            (Some(nw), Some(nb)) => Some((&p.data[nw..nw + cols], &p.data[nb..nb + cols])),
            _ => None,
        };
        let mut a = self.pool.take(out.data.len());
        post_forward(
            &mut out.data,
            &p.data[lay.conv.bias()..lay.conv.bias() + cols],
            ln,
            p.data[act],
            &mut a,
        );
        let rows = out.rows;
        self.pool.give(out.data);
        Mat::from_vec(rows, cols, a)
    }

    fn forward_impl(
        &self,
        p: &ParamSet,
        blocks: &[BlockView],
        x: InputRef,
        training: bool,
        mut rng: Option<&mut ChaCha8Rng>,
        keep: bool,
    ) -> (Mat, Vec<LayerCache>) {
        self.check_params(p, "forward");
        assert_eq!(blocks.len(), self.layers.len(), "need one block per layer");
        let mut caches: Vec<LayerCache> = Vec::with_capacity(self.layers.len());
        let mut h: Option<Mat> = None; // previous layer's output (when not kept in the cache)
        for (l, (lay, b)) in self.layers.iter().zip(blocks).enumerate() {
            let input = if l == 0 {
                x
            } else if keep {
                InputRef::from_mat(&caches[l - 1].post.as_ref().unwrap().out)
            } else {
                InputRef::from_mat(h.as_ref().unwrap())
            };
            let (mut out, mut lc) =
                self.conv_forward(l, &p.data, b, input, keep, lay.act.is_none());
            if let Some(act) = lay.act {
                let cols = lay.conv.out_dim();
                // bias (not added by conv_forward here), LayerNorm, affine and PReLU in one pass
                let ln = match (lay.norm_w, lay.norm_b) {
                    (Some(nw), Some(nb)) => Some((&p.data[nw..nw + cols], &p.data[nb..nb + cols])),
                    _ => None,
                };
                let mut a = self.pool.take(out.data.len());
                let rstd = post_forward(
                    &mut out.data,
                    &p.data[lay.conv.bias()..lay.conv.bias() + cols],
                    ln,
                    p.data[act],
                    &mut a,
                );
                let mask = if training && self.cfg.dropout > 0.0 {
                    let rng = rng.as_deref_mut().expect("training needs an rng");
                    let m = dropout_mask(rng, a.len(), self.cfg.dropout);
                    dropout_apply(&mut a, &m, self.cfg.dropout);
                    Some(m)
                } else {
                    None
                };
                let a = Mat::from_vec(out.rows, cols, a);
                if keep {
                    lc.post = Some(PostCache {
                        xhat: out,
                        rstd,
                        mask,
                        out: a,
                    });
                } else {
                    self.pool.give(out.data);
                    if let Some(prev) = h.replace(a) {
                        self.pool.give(prev.data);
                    }
                }
                caches.push(lc);
            } else {
                caches.push(lc);
                return (out, caches);
            }
        }
        unreachable!("the last layer returns")
    }

    /// One conv layer forward: `[num_dst, out]`, plus the bias when `with_bias` (the last
    /// layer; hidden layers add it fused with their post-processing).
    fn conv_forward(
        &self,
        l: usize,
        p: &[f32],
        b: &BlockView,
        x: InputRef,
        keep: bool,
        with_bias: bool,
    ) -> (Mat, LayerCache) {
        let conv = &self.layers[l].conv;
        let (nd, ns, dout) = (b.num_dst, b.num_src, conv.out_dim());
        assert_eq!(x.rows(), ns, "layer {l}: input rows != block num_src");
        assert_eq!(x.dim(), conv.in_dim(), "layer {l}: input dim");
        assert!(nd <= ns, "layer {l}: num_dst > num_src");
        assert_eq!(b.indptr.len(), nd + 1, "layer {l}: block indptr length");
        let (mut out, cache) = conv.forward(&self.pool, p, b, x, keep);
        debug_assert_eq!((out.rows, out.cols), (nd, dout));
        if with_bias {
            add_bias(&mut out.data, &p[conv.bias()..conv.bias() + dout]);
        }
        (
            out,
            LayerCache {
                conv: cache,
                post: None,
            },
        )
    }

    /// Backward of [`Model::forward`]: given `d_out = dL/d(output)`, **accumulates** (`+=`)
    /// `dL/dθ` into `grads` (same layout as `p`). Consumes the cache, freeing activations as
    /// it goes. No gradient is formed for the input features.
    ///
    /// # Panics
    /// If `d_out`'s shape differs from the forward output or the parameter counts differ.
    pub fn backward(&self, p: &ParamSet, cache: ForwardCache, d_out: &Mat, grads: &mut ParamSet) {
        let _precision = bf16::PrecisionScope::enter(self.bf16);
        self.check_params(p, "backward");
        self.check_params(grads, "backward grads");
        let ForwardCache {
            blocks,
            x,
            x_rows,
            mut layers,
        } = cache;
        let nl = self.layers.len();
        assert_eq!(layers.len(), nl);
        let mut d_cur: Option<Mat> = None;
        for l in (0..nl).rev() {
            let lc = layers.pop().unwrap();
            let d_conv = d_cur.as_ref().unwrap_or(d_out);
            let dx = {
                let input = if l == 0 {
                    first_input(&x, &x_rows)
                } else {
                    InputRef::from_mat(&layers[l - 1].post.as_ref().unwrap().out)
                };
                self.conv_backward(
                    l,
                    &p.data,
                    &blocks[l],
                    input,
                    lc,
                    d_conv,
                    &mut grads.data,
                    l > 0,
                )
            };
            if l > 0 {
                let PostCache {
                    xhat,
                    rstd,
                    mask,
                    out,
                } = layers[l - 1].post.take().unwrap();
                self.pool.give(out.data);
                let lay = &self.layers[l - 1];
                let cols = lay.conv.out_dim();
                let mut d = dx.unwrap();
                if let Some(m) = mask {
                    dropout_apply(&mut d.data, &m, self.cfg.dropout);
                }
                let act = lay.act.unwrap();
                let mut dgamma = vec![0.0f32; cols];
                let mut dbeta = vec![0.0f32; cols];
                let mut dbias = vec![0.0f32; cols];
                let ln = match (lay.norm_w, lay.norm_b) {
                    (Some(nw), Some(nb)) => Some((&p.data[nw..nw + cols], &p.data[nb..nb + cols])),
                    _ => None,
                };
                // PReLU, affine, LayerNorm and bias backward in one pass
                let dslope = post_backward(
                    &xhat.data,
                    &rstd,
                    ln,
                    p.data[act],
                    &mut d.data,
                    &mut dgamma,
                    &mut dbeta,
                    &mut dbias,
                );
                grads.data[act] += dslope;
                if let (Some(nw), Some(nb)) = (lay.norm_w, lay.norm_b) {
                    add_into(&mut grads.data[nw..nw + cols], &dgamma);
                    add_into(&mut grads.data[nb..nb + cols], &dbeta);
                }
                let bias = lay.conv.bias();
                add_into(&mut grads.data[bias..bias + cols], &dbias);
                self.pool.give(xhat.data);
                if let Some(prev) = d_cur.replace(d) {
                    self.pool.give(prev.data);
                }
            }
        }
        if let Some(last) = d_cur {
            self.pool.give(last.data);
        }
        self.pool.give(x_rows);
    }

    /// One conv layer backward; returns `dL/dx` (`[num_src, in]`) when `need_dx`.
    #[allow(clippy::too_many_arguments)]
    fn conv_backward(
        &self,
        l: usize,
        p: &[f32],
        b: &BlockView,
        x: InputRef,
        lc: LayerCache,
        d: &Mat,
        g: &mut [f32],
        need_dx: bool,
    ) -> Option<Mat> {
        let lay = &self.layers[l];
        let (nd, dout) = (b.num_dst, lay.conv.out_dim());
        assert_eq!((d.rows, d.cols), (nd, dout), "layer {l}: gradient shape");
        if lay.act.is_none() {
            // hidden layers: the bias gradient came with the fused post backward
            let bias = lay.conv.bias();
            add_col_sums(&d.data, dout, &mut g[bias..bias + dout]);
        }
        lay.conv
            .backward(&self.pool, p, b, x, lc.conv, d, g, need_dx)
    }

    fn decoder(&self) -> &DecoderLayout {
        self.decoder
            .as_ref()
            .expect("decode/score need a model with Head::Link")
    }

    /// Hadamard rows `z_i = h[src_i] ⊙ h[dst_i]` for pairs `range`, into `z`.
    fn hadamard(h: &Mat, src: &[u32], dst: &[u32], z: &mut [f32]) {
        let d = h.cols;
        z.par_chunks_mut(d)
            .with_min_len(min_rows(d))
            .enumerate()
            .for_each(|(i, row)| {
                let (a, b) = (h.row(src[i] as usize), h.row(dst[i] as usize));
                for ((z, a), b) in row.iter_mut().zip(a).zip(b) {
                    *z = a * b;
                }
            });
    }

    /// Link decoder (as the random-tma reference release): `s(u,v) = w2 · PReLU(W1 (h_u ⊙ h_v) + b1) + b2`,
    /// a logit per pair. `h: [n, hidden]`; `src`, `dst`: row ids into `h`, same length `B`.
    /// Returns `B` logits and the cache for [`Model::decode_backward`].
    ///
    /// # Panics
    /// Without a link head, on `h.cols != hidden`, different pair lengths or out-of-range ids.
    pub fn decode<'a>(
        &self,
        p: &ParamSet,
        h: &'a Mat,
        src: &[u32],
        dst: &[u32],
    ) -> (Vec<f32>, DecodeCache<'a>) {
        self.check_params(p, "decode");
        let dl = self.decoder();
        let d = dl.dim;
        assert_eq!(h.cols, d, "decode: h width");
        assert_eq!(src.len(), dst.len(), "decode: pair lengths");
        let bsz = src.len();
        // every element of u is written by the product (not accumulated)
        let mut u = Mat::from_vec(bsz, d, self.pool.take(bsz * d));
        if let Some(backend) = self.decoder_tiles(bsz) {
            let logits = bf16::forward(backend, h, src, dst, &self.decoder_params(p), &mut u.data);
            let cache = DecodeCache {
                h,
                src: src.to_vec(),
                dst: dst.to_vec(),
                u,
            };
            return (logits, cache);
        }
        {
            let mut z = self.pool.take(bsz * d);
            Self::hadamard(h, src, dst, &mut z);
            matmul_a_bt(
                bsz,
                d,
                d,
                &z,
                &p.data[dl.w1..dl.w1 + d * d],
                &mut u.data,
                false,
            );
            self.pool.give(z);
        }
        add_bias(&mut u.data, &p.data[dl.b1..dl.b1 + d]);
        let (slope, w2, b2) = (p.data[dl.act], &p.data[dl.w2..dl.w2 + d], p.data[dl.b2]);
        let logits: Vec<f32> = u
            .data
            .par_chunks(d)
            .with_min_len(min_rows(d))
            .map(|row| b2 + lane_sum(d, |j| w2[j] * prelu1(row[j], slope)))
            .collect();
        (
            logits,
            DecodeCache {
                h,
                src: src.to_vec(),
                dst: dst.to_vec(),
                u,
            },
        )
    }

    /// A link training step's decoder: [`Model::decode`], [`crate::bce_with_logits`] against
    /// `targets` (length `B`, 1 for a positive pair, 0 for a negative) and
    /// [`Model::decode_backward`] in one call. Returns the mean BCE loss and `dL/dh`
    /// (`[h.rows, hidden]`); accumulates the decoder's gradients into `grads`.
    ///
    /// The same bits as the three calls. Under [`crate::MatmulPrecision::Medium`] (tile products) the
    /// three run fused per block of 512 pairs, so the pre-activation `u` (`[B, hidden]` f32)
    /// is never written to memory and read back.
    ///
    /// # Panics
    /// If `src`, `dst` and `targets` differ in length, or `h` is not `hidden` wide.
    pub fn decode_bce(
        &self,
        p: &ParamSet,
        h: &Mat,
        src: &[u32],
        dst: &[u32],
        targets: &[f32],
        grads: &mut ParamSet,
    ) -> (f32, Mat) {
        self.check_params(p, "decode_bce");
        self.check_params(grads, "decode_bce grads");
        let dl = self.decoder();
        let d = dl.dim;
        assert_eq!(h.cols, d, "decode_bce: h width");
        assert_eq!(src.len(), dst.len(), "decode_bce: pair lengths");
        assert_eq!(targets.len(), src.len(), "decode_bce: targets length");
        let bsz = src.len();
        if let Some(backend) = self.decoder_tiles(bsz) {
            let mut dz = self.pool.take(bsz * d);
            let mut partials = self.pool.take(bf16::partials_len(bsz, d));
            let mut d_logits = vec![0.0f32; bsz];
            let mut terms = vec![0.0f64; bsz];
            let g = bf16::train_bce(
                backend,
                h,
                src,
                dst,
                targets,
                &self.decoder_params(p),
                &mut dz,
                &mut d_logits,
                &mut terms,
                &mut partials,
            );
            self.pool.give(partials);
            // as bce_with_logits: the terms summed in order, times 1 / B
            let loss = (terms.iter().sum::<f64>() * (1.0 / bsz as f64)) as f32;
            grads.data[dl.b2] += d_logits.iter().map(|&v| v as f64).sum::<f64>() as f32;
            add_into(&mut grads.data[dl.w1..dl.w1 + d * d], &g.w1);
            add_into(&mut grads.data[dl.b1..dl.b1 + d], &g.b1);
            add_into(&mut grads.data[dl.w2..dl.w2 + d], &g.w2);
            grads.data[dl.act] += g.slope;
            return (loss, self.scatter_pair_grads(h, src, dst, dz));
        }
        let (logits, cache) = self.decode(p, h, src, dst);
        let (loss, d_logits) = crate::bce_with_logits(&logits, targets);
        (loss, self.decode_backward(p, cache, &d_logits, grads))
    }

    /// Backward of [`Model::decode`] for `d_logits = dL/dlogit` (length `B`): accumulates the
    /// decoder's gradients into `grads` and returns `dL/dh` `[h.rows, hidden]` (contributions of
    /// every pair scatter-added; computed as a gather per node row, parallel, no atomics).
    pub fn decode_backward(
        &self,
        p: &ParamSet,
        cache: DecodeCache,
        d_logits: &[f32],
        grads: &mut ParamSet,
    ) -> Mat {
        self.check_params(p, "decode_backward");
        self.check_params(grads, "decode_backward grads");
        let dl = self.decoder();
        let d = dl.dim;
        let DecodeCache { h, src, dst, u } = cache;
        let bsz = src.len();
        assert_eq!(d_logits.len(), bsz, "decode_backward: d_logits length");
        let (slope, w2) = (p.data[dl.act], &p.data[dl.w2..dl.w2 + d]);
        // d_a = d_logit * w2; dw2 += Σ d_logit a; db2 += Σ d_logit.
        grads.data[dl.b2] += d_logits.iter().map(|&v| v as f64).sum::<f64>() as f32;
        if let Some(backend) = self.decoder_tiles(bsz) {
            let mut dz = self.pool.take(bsz * d);
            let mut partials = self.pool.take(bf16::partials_len(bsz, d));
            let g = bf16::backward(
                backend,
                h,
                &src,
                &dst,
                &u.data,
                d_logits,
                &self.decoder_params(p),
                &mut dz,
                &mut partials,
            );
            self.pool.give(partials);
            self.pool.give(u.data);
            add_into(&mut grads.data[dl.w1..dl.w1 + d * d], &g.w1);
            add_into(&mut grads.data[dl.b1..dl.b1 + d], &g.b1);
            add_into(&mut grads.data[dl.w2..dl.w2 + d], &g.w2);
            grads.data[dl.act] += g.slope;
            return self.scatter_pair_grads(h, &src, &dst, dz);
        }
        // One pass over the rows of u (fixed row chunks, summed in chunk order):
        // du = d_logit · w2 ⊙ prelu'(u); dw2 += Σ d_logit · prelu(u);
        // dslope += Σ d_logit · w2 ⊙ min(u, 0); db1 += Σ du.
        let chunk_rows = 4 * min_rows(d);
        let mut du = self.pool.take(bsz * d);
        let parts: Vec<Vec<f32>> = du
            .par_chunks_mut(chunk_rows * d)
            .zip(u.data.par_chunks(chunk_rows * d))
            .enumerate()
            .map(|(c, (du, u))| {
                let mut acc = vec![0.0f32; 3 * d]; // dw2 | dslope per column | db1
                let (aw2, rest) = acc.split_at_mut(d);
                let (asl, ab1) = rest.split_at_mut(d);
                for (i, (dr, ur)) in du.chunks_exact_mut(d).zip(u.chunks_exact(d)).enumerate() {
                    let dl = d_logits[c * chunk_rows + i];
                    for (((((dr, &uv), &w), aw2), asl), ab1) in dr
                        .iter_mut()
                        .zip(ur)
                        .zip(w2)
                        .zip(aw2.iter_mut())
                        .zip(asl.iter_mut())
                        .zip(ab1.iter_mut())
                    {
                        *aw2 += dl * prelu1(uv, slope);
                        let g = dl * w;
                        *asl += g * uv.min(0.0);
                        let v = g * prelu_grad1(uv, slope);
                        *dr = v;
                        *ab1 += v;
                    }
                }
                acc
            })
            .collect();
        self.pool.give(u.data);
        let mut dslope = 0.0f32;
        for part in &parts {
            add_into(&mut grads.data[dl.w2..dl.w2 + d], &part[..d]);
            dslope += part[d..2 * d].iter().sum::<f32>();
            add_into(&mut grads.data[dl.b1..dl.b1 + d], &part[2 * d..]);
        }
        grads.data[dl.act] += dslope;
        let mut z = self.pool.take(bsz * d);
        Self::hadamard(h, &src, &dst, &mut z);
        matmul_at_b(
            d,
            d,
            bsz,
            &du,
            &z,
            &mut grads.data[dl.w1..dl.w1 + d * d],
            true,
        );
        // dz = du W1, reusing z's buffer.
        matmul_a_b(bsz, d, d, &du, &p.data[dl.w1..dl.w1 + d * d], &mut z, false);
        let dz = z;
        self.pool.give(du);
        self.scatter_pair_grads(h, &src, &dst, dz)
    }

    /// `dL/dh` from `dz = dL/d(h_u ⊙ h_v)` `[B, d]`: row `v` sums `dz_i ⊙ h_other` over the
    /// pairs `i` that have `v` as an end (a gather per node row, parallel, no atomics).
    fn scatter_pair_grads(&self, h: &Mat, src: &[u32], dst: &[u32], dz: Vec<f32>) -> Mat {
        let (d, bsz) = (h.cols, src.len());
        // Scatter dz to the endpoints as a gather: list the (pair, other end) of every node.
        let n = h.rows;
        let mut ptr = vec![0usize; n + 1];
        for i in 0..bsz {
            ptr[src[i] as usize + 1] += 1;
            ptr[dst[i] as usize + 1] += 1;
        }
        for v in 0..n {
            ptr[v + 1] += ptr[v];
        }
        let mut fill = ptr.clone();
        let mut items = vec![(0u32, 0u32); 2 * bsz];
        for i in 0..bsz {
            let (s, t) = (src[i] as usize, dst[i] as usize);
            items[fill[s]] = (i as u32, t as u32);
            fill[s] += 1;
            items[fill[t]] = (i as u32, s as u32);
            fill[t] += 1;
        }
        let mut dh = Mat::from_vec(n, d, self.pool.take(n * d));
        dh.data
            .par_chunks_mut(d)
            .with_min_len(min_rows(d * 4))
            .enumerate()
            .for_each(|(v, row)| {
                simd_dispatch!(gather_pair_row(row, &items[ptr[v]..ptr[v + 1]], &dz, h))
            });
        self.pool.give(dz);
        dh
    }

    /// Inference-only decoder scores (logits) for many pairs, e.g. MRR with 1000 negatives per
    /// positive: parallel over chunks of 512 pairs, each chunk one `gemm` on the calling thread.
    /// Same values as [`Model::decode`].
    pub fn score(&self, p: &ParamSet, h: &Mat, src: &[u32], dst: &[u32]) -> Vec<f32> {
        self.check_params(p, "score");
        let dl = self.decoder();
        let d = dl.dim;
        assert_eq!(h.cols, d, "score: h width");
        assert_eq!(src.len(), dst.len(), "score: pair lengths");
        if let Some(backend) = self.decoder_tiles(src.len()) {
            return bf16::score(backend, h, src, dst, &self.decoder_params(p));
        }
        let (w1, b1) = (&p.data[dl.w1..dl.w1 + d * d], &p.data[dl.b1..dl.b1 + d]);
        let (slope, w2, b2) = (p.data[dl.act], &p.data[dl.w2..dl.w2 + d], p.data[dl.b2]);
        let mut out = vec![0.0f32; src.len()];
        out.par_chunks_mut(SCORE_CHUNK)
            .zip(src.par_chunks(SCORE_CHUNK))
            .zip(dst.par_chunks(SCORE_CHUNK))
            .for_each_init(
                || (vec![0.0f32; SCORE_CHUNK * d], vec![0.0f32; SCORE_CHUNK * d]),
                |(z, u), ((out, s), t)| {
                    let c = s.len();
                    for i in 0..c {
                        let (a, b) = (h.row(s[i] as usize), h.row(t[i] as usize));
                        for ((z, a), b) in z[i * d..(i + 1) * d].iter_mut().zip(a).zip(b) {
                            *z = a * b;
                        }
                    }
                    matmul_a_bt_serial(c, d, d, &z[..c * d], w1, &mut u[..c * d], false);
                    for i in 0..c {
                        let ui = &u[i * d..(i + 1) * d];
                        out[i] = b2 + lane_sum(d, |j| w2[j] * prelu1(ui[j] + b1[j], slope));
                    }
                },
            );
        out
    }
}
