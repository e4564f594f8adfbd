//! The GNN models: encoder (SAGE / GCN / MLP layers with LayerNorm → PReLU → dropout between
//! them), the link decoder, forward and hand-written backward.

use crate::kernels::{
    add_bias, add_col_sums, add_into, aggregate, aggregate_backward, dropout_apply, dropout_mask,
    lane_sum, min_rows, post_backward, post_forward, prelu1, prelu_grad1, AggCoefs, BufferPool,
    InputRef, Transposed,
};
use crate::mat::{matmul_a_b, matmul_a_bt, matmul_a_bt_serial, matmul_at_b};
use crate::{Mat, ParamSet, ParamSpec};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::fmt;
use std::str::FromStr;
use tma_graph::{Csr, Features};
use tma_sample::BlockView;

/// Which graph convolution the encoder stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EncoderKind {
    /// GraphSAGE, mean aggregator (Hamilton et al. 2017, arXiv 1706.02216, Alg. 1 with
    /// PyG's `SAGEConv(aggr="mean", root_weight=True)`):
    /// `out_i = W_l · mean_{j ∈ N(i)} h_j + b_l + W_r · h_i`; empty neighbourhood ⇒ mean = 0.
    Sage,
    /// GCN (Kipf & Welling 2017, arXiv 1609.02907, eq. 2; PyG `GCNConv`): symmetric
    /// normalisation with self loops, `out_i = b + Σ_{j ∈ N(i) ∪ {i}} w_ij · W h_j` with
    /// `w_ii = 1/(d_i+1)` and `w_ij = (d_i/s_i) / sqrt((d_i+1)(d_j+1))` (`d` = full in-degree
    /// from `src_degree`, `s_i` = sampled neighbours of `i`; with full neighbourhoods this is
    /// exactly `D̂^{-1/2}(A+I)D̂^{-1/2} X Wᵀ`; `s_i = 0` keeps only the self term).
    Gcn,
    /// Plain MLP layer `out = W h_dst + b` (ignores edges).
    Mlp,
}

impl fmt::Display for EncoderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EncoderKind::Sage => "sage",
            EncoderKind::Gcn => "gcn",
            EncoderKind::Mlp => "mlp",
        })
    }
}

impl FromStr for EncoderKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "sage" | "graphsage" => Ok(EncoderKind::Sage),
            "gcn" => Ok(EncoderKind::Gcn),
            "mlp" => Ok(EncoderKind::Mlp),
            _ => Err(format!("unknown encoder {s:?} (expected sage, gcn or mlp)")),
        }
    }
}

/// What the model predicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Head {
    /// Link prediction: the encoder outputs `hidden`-d embeddings, scored by the decoder
    /// `s(u,v) = Linear(d,1)(PReLU(Linear(d,d)(h_u ⊙ h_v)))`.
    Link,
    /// Node classification: the last layer outputs `num_classes` logits.
    Node { num_classes: usize },
}

/// Model hyper-parameters (SPEC defaults: hidden 256, 2 layers, dropout 0).
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub encoder: EncoderKind,
    pub in_dim: usize,
    pub hidden: usize,
    pub num_layers: usize,
    pub dropout: f32,
    pub head: Head,
    /// LayerNorm between layers (SPEC's stack: conv → LayerNorm → PReLU → dropout → conv).
    /// `false` gives conv → PReLU → dropout → conv (Kipf & Welling's GCN has no norm).
    pub layer_norm: bool,
}

impl ModelConfig {
    /// SPEC defaults: hidden 256, 2 layers, dropout 0.
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

/// Offsets of one encoder layer's parameters in the flat buffer.
#[derive(Clone, Debug)]
struct LayerLayout {
    in_dim: usize,
    out_dim: usize,
    /// `lin_l.weight` (SAGE) / `lin.weight` (GCN) / `weight` (MLP), `[out, in]`.
    w: usize,
    /// SAGE `lin_r.weight`, `[out, in]`.
    w_r: Option<usize>,
    bias: usize,
    /// LayerNorm weight/bias and PReLU slope (all layers but the last).
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
/// Parameter names (PyG-style, weights `[out, in]` as PyTorch):
/// `encoder.{l}.lin_l.weight`, `encoder.{l}.lin_l.bias`, `encoder.{l}.lin_r.weight` (SAGE);
/// `encoder.{l}.lin.weight`, `encoder.{l}.bias` (GCN); `encoder.{l}.weight`,
/// `encoder.{l}.bias` (MLP); between layers `encoder.norm.{l}.weight|bias` `[hidden]` and
/// `encoder.act.{l}.weight` `[1]`; link head `decoder.lin1.weight` `[d, d]`,
/// `decoder.lin1.bias` `[d]`, `decoder.act.weight` `[1]`, `decoder.lin2.weight` `[1, d]`,
/// `decoder.lin2.bias` `[1]`.
#[derive(Clone, Debug)]
pub struct Model {
    pub cfg: ModelConfig,
    layers: Vec<LayerLayout>,
    decoder: Option<DecoderLayout>,
    specs: Vec<ParamSpec>,
    num_params: usize,
    /// Recycled activation / gradient buffers (see `BufferPool`).
    pool: BufferPool,
}

/// Per-layer state kept by [`Model::forward`] for [`Model::backward`].
struct LayerCache {
    coefs: Option<AggCoefs>,
    transform_first: bool,
    /// Aggregate-first path: the aggregated input `[num_dst, in]`.
    agg: Option<Mat>,
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
        all: &'a [f32],
        dim: usize,
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

/// Pairs per chunk in [`Model::score`].
const SCORE_CHUNK: usize = 512;

impl Model {
    /// Lay out the parameters of `cfg`.
    ///
    /// # Panics
    /// If `num_layers == 0`, a dimension is 0, or `dropout` is outside `[0, 1)`.
    pub fn new(cfg: ModelConfig) -> Model {
        assert!(cfg.num_layers >= 1, "num_layers must be >= 1");
        assert!(cfg.in_dim > 0 && cfg.hidden > 0, "dimensions must be > 0");
        assert!(
            (0.0..1.0).contains(&cfg.dropout),
            "dropout must be in [0, 1)"
        );
        let out_dim = match cfg.head {
            Head::Link => cfg.hidden,
            Head::Node { num_classes } => {
                assert!(num_classes > 0, "num_classes must be > 0");
                num_classes
            }
        };
        let mut shapes: Vec<(String, Vec<usize>)> = Vec::new();
        let mut offset = 0usize;
        let mut push = |shapes: &mut Vec<(String, Vec<usize>)>, name: String, shape: Vec<usize>| {
            let o = offset;
            offset += shape.iter().product::<usize>();
            shapes.push((name, shape));
            o
        };
        let mut layers = Vec::new();
        for l in 0..cfg.num_layers {
            let din = if l == 0 { cfg.in_dim } else { cfg.hidden };
            let last = l + 1 == cfg.num_layers;
            let dout = if last { out_dim } else { cfg.hidden };
            let (w, w_r, bias) = match cfg.encoder {
                EncoderKind::Sage => {
                    let w = push(
                        &mut shapes,
                        format!("encoder.{l}.lin_l.weight"),
                        vec![dout, din],
                    );
                    let b = push(&mut shapes, format!("encoder.{l}.lin_l.bias"), vec![dout]);
                    let wr = push(
                        &mut shapes,
                        format!("encoder.{l}.lin_r.weight"),
                        vec![dout, din],
                    );
                    (w, Some(wr), b)
                }
                EncoderKind::Gcn => {
                    let w = push(
                        &mut shapes,
                        format!("encoder.{l}.lin.weight"),
                        vec![dout, din],
                    );
                    let b = push(&mut shapes, format!("encoder.{l}.bias"), vec![dout]);
                    (w, None, b)
                }
                EncoderKind::Mlp => {
                    let w = push(&mut shapes, format!("encoder.{l}.weight"), vec![dout, din]);
                    let b = push(&mut shapes, format!("encoder.{l}.bias"), vec![dout]);
                    (w, None, b)
                }
            };
            let (norm_w, norm_b, act) = if last {
                (None, None, None)
            } else if !cfg.layer_norm {
                (
                    None,
                    None,
                    Some(push(
                        &mut shapes,
                        format!("encoder.act.{l}.weight"),
                        vec![1],
                    )),
                )
            } else {
                (
                    Some(push(
                        &mut shapes,
                        format!("encoder.norm.{l}.weight"),
                        vec![dout],
                    )),
                    Some(push(
                        &mut shapes,
                        format!("encoder.norm.{l}.bias"),
                        vec![dout],
                    )),
                    Some(push(
                        &mut shapes,
                        format!("encoder.act.{l}.weight"),
                        vec![1],
                    )),
                )
            };
            layers.push(LayerLayout {
                in_dim: din,
                out_dim: dout,
                w,
                w_r,
                bias,
                norm_w,
                norm_b,
                act,
            });
        }
        let decoder = match cfg.head {
            Head::Link => {
                let d = cfg.hidden;
                Some(DecoderLayout {
                    dim: d,
                    w1: push(&mut shapes, "decoder.lin1.weight".into(), vec![d, d]),
                    b1: push(&mut shapes, "decoder.lin1.bias".into(), vec![d]),
                    act: push(&mut shapes, "decoder.act.weight".into(), vec![1]),
                    w2: push(&mut shapes, "decoder.lin2.weight".into(), vec![1, d]),
                    b2: push(&mut shapes, "decoder.lin2.bias".into(), vec![1]),
                })
            }
            Head::Node { .. } => None,
        };
        let template = ParamSet::from_shapes(&shapes);
        Model {
            cfg,
            layers,
            decoder,
            num_params: template.len(),
            specs: template.specs,
            pool: BufferPool::default(),
        }
    }

    /// Free the activation buffers this model keeps for reuse between iterations (up to 32
    /// large buffers, about one iteration's activations).
    pub fn release_buffers(&self) {
        self.pool.clear();
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
        self.layers.last().unwrap().out_dim
    }

    /// A zero-filled [`ParamSet`] with this model's layout (a gradient buffer).
    pub fn zero_params(&self) -> ParamSet {
        ParamSet {
            specs: self.specs.clone(),
            data: vec![0.0; self.num_params],
        }
    }

    /// Fresh parameters: Glorot-uniform weights (`U(±sqrt(6/(in+out)))`, as PyG's `Linear`),
    /// zero biases, LayerNorm weight 1 / bias 0, PReLU slope 0.25. Drawn in spec order.
    pub fn init_params(&self, rng: &mut ChaCha8Rng) -> ParamSet {
        let mut p = self.zero_params();
        for s in &self.specs {
            let v = &mut p.data[s.offset..s.offset + s.numel()];
            if s.name.ends_with("act.weight") || s.name.contains(".act.") {
                v.fill(0.25);
            } else if s.name.starts_with("encoder.norm.") && s.name.ends_with(".weight") {
                v.fill(1.0);
            } else if s.name.ends_with("weight") && s.shape.len() == 2 {
                let a = (6.0 / (s.shape[0] + s.shape[1]) as f64).sqrt() as f32;
                for x in v.iter_mut() {
                    *x = rng.random_range(-a..a);
                }
            } // biases stay 0
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
        let Input::Indexed { all, dim, rows } = *x else {
            return Vec::new();
        };
        let lay = &self.layers[0];
        assert_eq!(dim, lay.in_dim, "indexed input: dim != model in_dim");
        assert_eq!(
            rows.len(),
            b.num_src,
            "indexed input: rows != block num_src"
        );
        assert_eq!(all.len() % dim.max(1), 0, "indexed input: data length");
        let transform_first = self.cfg.encoder != EncoderKind::Mlp && lay.out_dim < lay.in_dim;
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
        let full = BlockView::full(graph, degrees);
        let blocks = vec![full; self.layers.len()];
        self.forward_impl(p, &blocks, InputRef::from_features(x), false, None, false)
            .0
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
                let cols = lay.out_dim;
                // bias (not added by conv_forward here), LayerNorm, affine and PReLU in one pass
                let ln = match (lay.norm_w, lay.norm_b) {
                    (Some(nw), Some(nb)) => Some((&p.data[nw..nw + cols], &p.data[nb..nb + cols])),
                    _ => None,
                };
                let mut a = self.pool.take(out.data.len());
                let rstd = post_forward(
                    &mut out.data,
                    &p.data[lay.bias..lay.bias + cols],
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

    /// One conv layer forward: `[num_dst, out]`.
    fn conv_forward(
        &self,
        l: usize,
        p: &[f32],
        b: &BlockView,
        x: InputRef,
        keep: bool,
        with_bias: bool,
    ) -> (Mat, LayerCache) {
        let lay = &self.layers[l];
        let (nd, ns, din, dout) = (b.num_dst, b.num_src, lay.in_dim, lay.out_dim);
        assert_eq!(x.rows(), ns, "layer {l}: input rows != block num_src");
        assert_eq!(x.dim(), din, "layer {l}: input dim");
        assert!(nd <= ns, "layer {l}: num_dst > num_src");
        assert_eq!(b.indptr.len(), nd + 1, "layer {l}: block indptr length");
        let w = &p[lay.w..lay.w + dout * din];
        // every path below overwrites `out` before reading it
        let mut out = Mat::from_vec(nd, dout, self.pool.take(nd * dout));
        let mut lc = LayerCache {
            coefs: None,
            transform_first: false,
            agg: None,
            post: None,
        };
        match self.cfg.encoder {
            EncoderKind::Mlp => x.linear(nd, w, dout, &mut out.data, false),
            EncoderKind::Sage | EncoderKind::Gcn => {
                let coefs = if self.cfg.encoder == EncoderKind::Sage {
                    AggCoefs::mean(b)
                } else {
                    AggCoefs::gcn(b)
                };
                // Aggregation is linear, so agg(X) Wᵀ = agg(X Wᵀ): transform first when that
                // is cheaper, and always for sparse input (never densify X).
                let tf = x.is_sparse() || dout < din;
                if tf {
                    let mut t = self.pool.take(ns * dout);
                    x.linear(ns, w, dout, &mut t, false);
                    aggregate(b, &coefs, &t, None, dout, &mut out.data);
                    self.pool.give(t);
                } else {
                    let mut a = Mat::from_vec(nd, din, self.pool.take(nd * din));
                    let (h, map) = x.agg_source(ns);
                    aggregate(b, &coefs, h, map, din, &mut a.data);
                    matmul_a_bt(nd, dout, din, &a.data, w, &mut out.data, false);
                    if keep {
                        lc.agg = Some(a);
                    } else {
                        self.pool.give(a.data);
                    }
                }
                if let Some(wr) = lay.w_r {
                    x.linear(nd, &p[wr..wr + dout * din], dout, &mut out.data, true);
                }
                lc.transform_first = tf;
                if keep {
                    lc.coefs = Some(coefs);
                }
            }
        }
        if with_bias {
            add_bias(&mut out.data, &p[lay.bias..lay.bias + dout]);
        }
        (out, lc)
    }

    /// Backward of [`Model::forward`]: given `d_out = dL/d(output)`, **accumulates** (`+=`)
    /// `dL/dθ` into `grads` (same layout as `p`). Consumes the cache, freeing activations as
    /// it goes. No gradient is formed for the input features.
    ///
    /// # Panics
    /// If `d_out`'s shape differs from the forward output or the parameter counts differ.
    pub fn backward(&self, p: &ParamSet, cache: ForwardCache, d_out: &Mat, grads: &mut ParamSet) {
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
                let cols = lay.out_dim;
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
                add_into(&mut grads.data[lay.bias..lay.bias + cols], &dbias);
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
        let (nd, ns, din, dout) = (b.num_dst, b.num_src, lay.in_dim, lay.out_dim);
        assert_eq!((d.rows, d.cols), (nd, dout), "layer {l}: gradient shape");
        if lay.act.is_none() {
            // hidden layers: the bias gradient came with the fused post backward
            add_col_sums(&d.data, dout, &mut g[lay.bias..lay.bias + dout]);
        }
        let w = &p[lay.w..lay.w + dout * din];
        // SAGE/GCN overwrite all of dx first; MLP only writes the first nd rows
        let mut dx = if !need_dx {
            None
        } else if self.cfg.encoder == EncoderKind::Mlp && nd < ns {
            Some(Mat::from_vec(ns, din, self.pool.take_zeroed(ns * din)))
        } else {
            Some(Mat::from_vec(ns, din, self.pool.take(ns * din)))
        };
        match self.cfg.encoder {
            EncoderKind::Mlp => {
                x.linear_weight_grad(nd, &d.data, dout, &mut g[lay.w..lay.w + dout * din]);
                if let Some(dx) = dx.as_mut() {
                    matmul_a_b(nd, din, dout, &d.data, w, &mut dx.data[..nd * din], false);
                }
            }
            EncoderKind::Sage | EncoderKind::Gcn => {
                let coefs = lc.coefs.expect("forward cache without coefficients");
                if lc.transform_first {
                    let t = Transposed::new(b);
                    let mut dt = self.pool.take(ns * dout);
                    aggregate_backward(b, &t, &coefs, &d.data, dout, &mut dt, false);
                    drop(t);
                    x.linear_weight_grad(ns, &dt, dout, &mut g[lay.w..lay.w + dout * din]);
                    if let Some(dx) = dx.as_mut() {
                        matmul_a_b(ns, din, dout, &dt, w, &mut dx.data, false);
                    }
                    self.pool.give(dt);
                } else {
                    let a = lc.agg.expect("forward cache without aggregate");
                    matmul_at_b(
                        dout,
                        din,
                        nd,
                        &d.data,
                        &a.data,
                        &mut g[lay.w..lay.w + dout * din],
                        true,
                    );
                    self.pool.give(a.data);
                    if let Some(dx) = dx.as_mut() {
                        let mut da = self.pool.take(nd * din);
                        matmul_a_b(nd, din, dout, &d.data, w, &mut da, false);
                        let t = Transposed::new(b);
                        aggregate_backward(b, &t, &coefs, &da, din, &mut dx.data, false);
                        self.pool.give(da);
                    }
                }
                // Root term last: the paths above overwrite dx (first touch of fresh pages
                // is a write, never a read-then-write).
                if let Some(wr) = lay.w_r {
                    x.linear_weight_grad(nd, &d.data, dout, &mut g[wr..wr + dout * din]);
                    if let Some(dx) = dx.as_mut() {
                        let w_r = &p[wr..wr + dout * din];
                        matmul_a_b(nd, din, dout, &d.data, w_r, &mut dx.data[..nd * din], true);
                    }
                }
            }
        }
        dx
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

    /// Link decoder (SPEC / random-tma release): `s(u,v) = w2 · PReLU(W1 (h_u ⊙ h_v) + b1) + b2`,
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
                row.fill(0.0);
                for &(i, other) in &items[ptr[v]..ptr[v + 1]] {
                    let (dzi, ho) = (
                        &dz[i as usize * d..(i as usize + 1) * d],
                        h.row(other as usize),
                    );
                    for ((r, a), b) in row.iter_mut().zip(dzi).zip(ho) {
                        *r += a * b;
                    }
                }
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
