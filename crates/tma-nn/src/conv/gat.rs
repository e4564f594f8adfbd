//! Graph attention (GAT), multi-head, with its hand-written backward.

use super::layer::{
    Conv, ConvArgs, ConvCache, Encoder, Init, LayerCounts, LayerExport, ParamAlloc,
};
use super::options::{EncoderOption, EncoderShape, OptionValue};
use crate::input::InputRef;
use crate::kernels::{add_into, axpy, min_rows, BufferPool};
use crate::matmul::{gemm_strided, matmul_a_b};
use crate::Mat;
use rayon::prelude::*;
use tma_sample::BlockView;

/// The graph attentional operator from Velickovic et al., "Graph Attention Networks"
/// (ICLR 2018, <https://arxiv.org/abs/1710.10903>, eqs. 1-5), in PyG's `GATConv` formulation
/// (self-loops added, heads concatenated):
///
/// `x_i' = ||_{h=1..H} Σ_{j ∈ N(i) ∪ {i}} α_ij^h W^h x_j  + b`
///
/// `α_ij^h = softmax_j( LeakyReLU( a_src^h · W^h x_j + a_dst^h · W^h x_i ) )`
///
/// with LeakyReLU negative slope [`GatConv::NEGATIVE_SLOPE`] (0.2), the softmax over
/// `j ∈ N(i) ∪ {i}` (computed stably: the per-row maximum is subtracted), `W^h` the `h`-th block
/// of `C` rows of `W` and `||` concatenation. `N(i)` is the (sampled) in-neighbourhood; as PyG
/// (`remove_self_loops` then `add_self_loops`) an edge `i → i` already in the block is ignored
/// and exactly one self-loop is used (in a block, destination `i` is source `i`).
///
/// Heads: hidden layers have `H` heads (the encoder option `heads`, default
/// [`GatConv::DEFAULT_HEADS`]) of `C = out / H` channels, concatenated (`out` = hidden width;
/// `out % H != 0` is an error); the last layer has one head of `C = out` channels, as the
/// paper's and PyG's Cora set-up (`GATConv(hidden * heads, classes, heads=1)`). Unlike the paper
/// there is no dropout on the attention coefficients; between layers the model's
/// LayerNorm → PReLU → dropout stack replaces the paper's ELU.
///
/// Parameters (`{l}` = layer index), PyG's names and shapes, in this order:
/// `encoder.{l}.lin.weight` `[H·C, in]` (Glorot-uniform), `encoder.{l}.att_src` `[1, H, C]`,
/// `encoder.{l}.att_dst` `[1, H, C]` (Glorot-uniform over `(H, C)`, as PyG), `encoder.{l}.bias`
/// `[H·C]` (0).
///
/// **Shapes:** input `[num_src, in]` (dense, sparse or rows of a larger dense matrix), output
/// `[num_dst, H·C]`.
///
/// Computation: no `E × F` message tensor; per arc only `H` scores and coefficients. Two
/// orders, chosen per call by multiply-add count (the choice does not change the values beyond
/// rounding):
/// - transform first: `t = X Wᵀ` on every source, `s_src = <t_j^h, a_src^h>`, then per
///   destination row one CSR pass (scores, softmax, weighted sum of `t` rows);
/// - aggregate first (dense input with `num_src ≫ num_dst`, e.g. a sampled input layer):
///   `s_src = x_j · (W^hᵀ a_src^h)`, per destination and head the weighted sum of input rows
///   (read in place for [`crate::Input::Indexed`]), then `W^h` on the destinations only.
///
/// Rows are processed in parallel (rayon). Backward: a pass over destination rows (softmax and
/// LeakyReLU backward per arc and head) and a gather over the transposed block, parallel over
/// source rows; reductions over fixed row chunks, so results do not depend on the thread count.
#[derive(Clone, Debug)]
pub struct GatConv {
    in_dim: usize,
    heads: usize,
    channels: usize,
    w: usize,
    att_src: usize,
    att_dst: usize,
    bias: usize,
}

impl GatConv {
    /// Heads of a hidden layer unless the option `heads` says otherwise (8, the paper's
    /// transductive set-up).
    pub const DEFAULT_HEADS: usize = 8;

    /// Slope of the LeakyReLU on attention scores (the paper's and PyG's 0.2).
    pub const NEGATIVE_SLOPE: f32 = 0.2;

    /// Declare `lin.weight`, `att_src`, `att_dst`, `bias`.
    ///
    /// # Errors
    /// `heads == 0`, or a hidden width not divisible by the number of heads.
    pub(crate) fn build(a: &ConvArgs, alloc: &mut ParamAlloc) -> Result<Self, String> {
        let heads = if a.last {
            1
        } else {
            usize::try_from(a.opts.int("heads")).unwrap_or(0)
        };
        if heads == 0 {
            return Err("gat: heads must be >= 1".into());
        }
        if !a.out_dim.is_multiple_of(heads) {
            return Err(format!(
                "gat: layer {} width {} is not divisible by its {heads} attention heads \
                 (choose a hidden size that is a multiple of {heads})",
                a.layer, a.out_dim
            ));
        }
        let channels = a.out_dim / heads;
        let w = alloc.add(
            a.name("lin.weight"),
            vec![a.out_dim, a.in_dim],
            Init::Glorot,
        );
        let att_src = alloc.add(a.name("att_src"), vec![1, heads, channels], Init::Glorot);
        let att_dst = alloc.add(a.name("att_dst"), vec![1, heads, channels], Init::Glorot);
        let bias = alloc.add(a.name("bias"), vec![a.out_dim], Init::Const(0.0));
        Ok(GatConv {
            in_dim: a.in_dim,
            heads,
            channels,
            w,
            att_src,
            att_dst,
            bias,
        })
    }

    /// Input channels (`in`).
    pub fn in_channels(&self) -> usize {
        self.in_dim
    }

    /// Output channels per head (`C`).
    pub fn out_channels(&self) -> usize {
        self.channels
    }

    /// Attention heads (`H`); the output width is `H · C`.
    pub fn heads(&self) -> usize {
        self.heads
    }
}

/// `heads`: a positive count that divides `hidden`.
fn check_heads(v: OptionValue, shape: &EncoderShape) -> Result<(), String> {
    let h = match v {
        OptionValue::Int(h) => h,
        OptionValue::Float(_) => 0,
    };
    if h <= 0 || shape.hidden as i64 % h != 0 {
        return Err(format!(
            "--model gat splits --hidden {} over --heads {v}: hidden must be a positive multiple of heads",
            shape.hidden
        ));
    }
    Ok(())
}

impl Encoder for GatConv {
    const ABOUT: &'static str = "graph attention";
    const OPTIONS: &'static [EncoderOption] = &[EncoderOption {
        name: "heads",
        default: OptionValue::Int(GatConv::DEFAULT_HEADS as i64),
        help: "GAT attention heads of the hidden layers (concatenated; --hidden must be a multiple; the last layer has one).",
        value_name: "H",
        check: check_heads,
    }];
}

/// What [`GatConv`]'s forward keeps: the summed rows' source `h` (transform first: `t = X Wᵀ`
/// `[num_src, H·C]`; aggregate first: the per-head attention-weighted input sums
/// `[num_dst, H, in]`), the scores `s_src` `[num_src, H]`, `s_dst` `[num_dst, H]`, the attention
/// coefficients per arc (`[E, H]`, block order) and per self-loop (`[num_dst, H]`), and on the
/// aggregate-first path `v = [W^hᵀ a_src^h ; W^hᵀ a_dst^h]` `[2, H, in]`.
struct GatCache {
    aggregate_first: bool,
    h: Vec<f32>,
    s_src: Vec<f32>,
    s_dst: Vec<f32>,
    alpha: Vec<f32>,
    alpha_self: Vec<f32>,
    v: Vec<f32>,
}

#[cfg(test)]
thread_local! {
    /// Tests: force the aggregate-first (`Some(true)`) or transform-first path on this thread.
    pub(crate) static FORCE_AGGREGATE_FIRST: std::cell::Cell<Option<bool>> =
        const { std::cell::Cell::new(None) };
}

#[inline(always)]
fn leaky(z: f32) -> f32 {
    if z > 0.0 {
        z
    } else {
        GatConv::NEGATIVE_SLOPE * z
    }
}

#[inline(always)]
fn leaky_grad(z: f32) -> f32 {
    if z > 0.0 {
        1.0
    } else {
        GatConv::NEGATIVE_SLOPE
    }
}

/// Per-head scores `s[r, h] = <row(r)[h·hs .. h·hs + k], a[h·k .. (h+1)·k]>` for `rows` rows.
fn head_scores<'a>(
    rows: usize,
    row: impl Fn(usize) -> &'a [f32] + Sync,
    hh: usize,
    k: usize,
    hs: usize,
    a: &[f32],
    s: &mut [f32],
) {
    s[..rows * hh]
        .par_chunks_mut(hh)
        .enumerate()
        .with_min_len(min_rows(hh * k))
        .for_each(|(r, s)| {
            if r + 8 < rows {
                prefetch(row(r + 8)); // rows may be random rows of a larger matrix
            }
            let x = row(r);
            for (h, s) in s.iter_mut().enumerate() {
                *s = dot8(&x[h * hs..h * hs + k], &a[h * k..(h + 1) * k]);
            }
        });
}

/// Destination rows per parallel task in the row passes.
fn rows_per_task(width: usize) -> usize {
    min_rows(width * 16)
}

/// Split an `[E, heads]` arc buffer into the row chunks of `rows` destinations (arcs of a
/// destination are contiguous in a block).
fn arc_chunks<'a>(
    b: &BlockView,
    rows: usize,
    heads: usize,
    buf: &'a mut [f32],
) -> Vec<&'a mut [f32]> {
    let mut out = Vec::new();
    let mut rest = buf;
    let mut r0 = 0;
    while r0 < b.num_dst {
        let r1 = (r0 + rows).min(b.num_dst);
        let n = (b.indptr[r1] - b.indptr[r0]) as usize * heads;
        let (a, r) = std::mem::take(&mut rest).split_at_mut(n);
        out.push(a);
        rest = r;
        r0 = r1;
    }
    out
}

impl GatConv {
    /// Aggregate first (sum input rows per head, then `W^h` on destinations only) when that
    /// costs fewer multiply-adds than `X Wᵀ` on every source: typically the input layer of a
    /// sampled block (`num_src ≫ num_dst`); never for sparse input.
    fn aggregate_first(&self, sparse: bool, nd: usize, ns: usize, ne: usize) -> bool {
        #[cfg(test)]
        if let Some(f) = FORCE_AGGREGATE_FIRST.with(|c| c.get()) {
            return f && !sparse;
        }
        if sparse {
            return false;
        }
        let (din, hh) = (self.in_dim, self.heads);
        let dout = hh * self.channels;
        let tf = ns * din * dout + ne * dout;
        let af = 2 * ns * din * hh + ne * hh * din + nd * din * dout;
        af < tf
    }

    /// Multiply-adds of transform first and of aggregate first (the counts
    /// [`GatConv::aggregate_first`] compares), in `f64` (evaluation's counts can exceed
    /// `usize` products).
    fn path_costs(&self, nd: f64, ns: f64, ne: f64) -> (f64, f64) {
        let (din, hh) = (self.in_dim as f64, self.heads as f64);
        let dout = hh * self.channels as f64;
        let tf = ns * din * dout + ne * dout;
        let af = 2.0 * ns * din * hh + ne * hh * din + nd * din * dout;
        (tf, af)
    }

    /// Whether evaluation on a block of `c`'s sizes takes the aggregate-first path (the
    /// forward's choice; without its test override).
    fn eval_aggregates_first(&self, c: &LayerCounts) -> bool {
        let (tf, af) = self.path_costs(c.dst as f64, c.src as f64, c.arcs as f64);
        !c.sparse_input && af < tf
    }
}

/// The steps of [`Conv::backward`] for GAT.
impl GatConv {
    /// Aggregate first: `dL/d(sums)` `[nd, heads·in]` (`d_h W^h` per head), and `dW^h +=
    /// d_hᵀ sums_h` into `g` (`sums`: the forward's per-head sums).
    fn sums_grad(
        &self,
        pool: &BufferPool,
        w: &[f32],
        d: &Mat,
        hbuf: &[f32],
        g: &mut [f32],
        nd: usize,
    ) -> Vec<f32> {
        let (hh, c, din) = (self.heads, self.channels, self.in_dim);
        let dout = hh * c;
        let mut dsums = pool.take(nd * hh * din);
        for h in 0..hh {
            gemm_strided(
                nd,
                din,
                c,
                &mut dsums[h * din..],
                hh * din,
                &d.data[h * c..],
                dout,
                1,
                &w[h * c * din..],
                din,
                1,
                false,
                true,
            );
            // dW^h += d_hᵀ sums_h
            gemm_strided(
                c,
                din,
                nd,
                &mut g[self.w + h * c * din..],
                din,
                &d.data[h * c..],
                1,
                dout,
                &hbuf[h * din..],
                hh * din,
                1,
                true,
                true,
            );
        }
        dsums
    }

    /// Pass 1 of the backward, over destination rows: `dz` = dL/d(pre-LeakyReLU score) per arc
    /// `[arcs, heads]` and per self-loop `[nd, heads]` (softmax backward: `de_ij = α_ij (dα_ij −
    /// Σ_k α_ik dα_ik)`, `dα_ij = <dsums_i^h, src_j^h>`), and `ds_dst_i = Σ_j dz_ij`. `cache`:
    /// the forward's `[s_src, s_dst, alpha, alpha_self]`.
    #[allow(clippy::too_many_arguments)]
    fn score_grads<'a, F: Fn(usize) -> &'a [f32] + Sync>(
        &self,
        pool: &BufferPool,
        b: &BlockView,
        srow: &F,
        ds_rows: &[f32],
        cache: [&[f32]; 4],
        k: usize,
        hs: usize,
    ) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let (nd, hh) = (b.num_dst, self.heads);
        let ne = b.indptr[nd] as usize;
        let mut dz = pool.take(ne * hh);
        let mut dz_self = pool.take(nd * hh);
        let mut ds_dst = pool.take(nd * hh);
        {
            let rows = rows_per_task(hh * k);
            let tasks: Vec<_> = dz_self
                .chunks_mut(rows * hh)
                .zip(ds_dst.chunks_mut(rows * hh))
                .zip(arc_chunks(b, rows, hh, &mut dz))
                .enumerate()
                .collect();
            let [ss, sd, al, als] = cache;
            tasks.into_par_iter().for_each(|(q, ((dzs, dsd), dza))| {
                let mut mean = vec![0.0f32; hh];
                let r0 = q * rows;
                let e0 = b.indptr[r0] as usize;
                for (r, (dzs, dsd)) in dzs
                    .chunks_exact_mut(hh)
                    .zip(dsd.chunks_exact_mut(hh))
                    .enumerate()
                {
                    let i = r0 + r;
                    let (s, e) = (b.indptr[i] as usize, b.indptr[i + 1] as usize);
                    simd_dispatch!(gat_back_row(
                        i,
                        &b.indices[s..e],
                        &b.indices[(s + 16).min(b.indices.len())..],
                        srow,
                        &ds_rows[i * hh * k..(i + 1) * hh * k],
                        ss,
                        sd,
                        hh,
                        k,
                        hs,
                        &al[s * hh..e * hh],
                        &als[i * hh..(i + 1) * hh],
                        &mut dza[(s - e0) * hh..(e - e0) * hh],
                        dzs,
                        dsd,
                        &mut mean
                    ));
                }
            });
        }
        (dz, dz_self, ds_dst)
    }

    /// Aggregate first: the attention vectors' and weights' gradients from `dva` = `[dL/dv_src |
    /// dL/dv_dst]`, through `v^h = W^hᵀ a^h`.
    fn attention_grad_through_v(&self, p: &[f32], w: &[f32], dva: &[f32], g: &mut [f32]) {
        let (hh, c, din) = (self.heads, self.channels, self.in_dim);
        // v^h = W^hᵀ a^h: d a^h[cc] = <W[h·C + cc], dv^h>, dW[h·C + cc] += a^h[cc] dv^h
        for (side, att) in [(0usize, self.att_src), (1, self.att_dst)] {
            for h in 0..hh {
                let dv = &dva[(side * hh + h) * din..(side * hh + h + 1) * din];
                for cc in 0..c {
                    let o = (h * c + cc) * din;
                    g[att + h * c + cc] += dot8(&w[o..o + din], dv);
                    let a = p[att + h * c + cc];
                    axpy(&mut g[self.w + o..self.w + o + din], a, dv);
                }
            }
        }
    }
}

impl Conv for GatConv {
    fn in_dim(&self) -> usize {
        self.in_dim
    }
    fn out_dim(&self) -> usize {
        self.heads * self.channels
    }
    fn bias(&self) -> usize {
        self.bias
    }
    fn reads_all_rows_dense(&self, b: &BlockView) -> bool {
        // transform first multiplies every source row; aggregate first reads rows in place
        !self.aggregate_first(false, b.num_dst, b.num_src, b.indptr[b.num_dst] as usize)
    }
    /// The multiply-adds of the order [`GatConv`] itself chooses on such a block (the counts
    /// its forward compares).
    fn eval_cost(&self, c: &LayerCounts) -> f64 {
        let (tf, af) = self.path_costs(c.dst as f64, c.src as f64, c.arcs as f64);
        if self.eval_aggregates_first(c) {
            af
        } else {
            tf
        }
    }
    /// Its activations on the path it chooses: input rows (all sources, or only the
    /// destinations of an input layer read in place when it aggregates first), per arc and
    /// head a score and a coefficient, per source a score, per destination a score, a
    /// self-loop coefficient and the output before and after the norm/activation; plus
    /// `t = X Wᵀ` on every source (transform first) or the per-head sums of input rows and the
    /// folded attention vectors (aggregate first).
    fn eval_bytes(&self, c: &LayerCounts) -> u64 {
        let (s, d, a) = (c.src, c.dst, c.arcs);
        let (din, hh) = (self.in_dim as u64, self.heads as u64);
        let dout = hh * self.channels as u64;
        let af = self.eval_aggregates_first(c);
        let in_rows = if c.input_layer && af { d } else { s };
        let path = if af {
            hh * d * din + 2 * hh * din
        } else {
            s * dout
        };
        4 * (in_rows * din + 2 * d * dout + hh * (2 * a + s + 2 * d) + path)
    }
    fn export(&self) -> LayerExport {
        LayerExport {
            module: "GATConv",
            args: vec![
                ("in_channels", OptionValue::Int(self.in_dim as i64)),
                ("out_channels", OptionValue::Int(self.channels as i64)),
                ("heads", OptionValue::Int(self.heads as i64)),
                (
                    "negative_slope",
                    // the f32 as written (0.2), not its binary expansion
                    OptionValue::Float(GatConv::NEGATIVE_SLOPE.to_string().parse().unwrap_or(0.2)),
                ),
            ],
        }
    }

    fn forward(
        &self,
        pool: &BufferPool,
        p: &[f32],
        b: &BlockView,
        x: InputRef,
        keep: bool,
    ) -> (Mat, Option<ConvCache>) {
        let (nd, ns, din) = (b.num_dst, b.num_src, self.in_dim);
        let (hh, c) = (self.heads, self.channels);
        let dout = hh * c;
        let ne = b.indptr[nd] as usize;
        let w = &p[self.w..self.w + dout * din];
        let (a_src, a_dst) = (
            &p[self.att_src..self.att_src + dout],
            &p[self.att_dst..self.att_dst + dout],
        );
        let af = self.aggregate_first(x.is_sparse(), nd, ns, ne);
        let mut s_src = pool.take(ns * hh);
        let mut s_dst = pool.take(nd * hh);
        let mut alpha = pool.take(ne * hh);
        let mut alpha_self = pool.take(nd * hh);
        // what the attention sums: rows of t = X Wᵀ (k = C per head) or of X (k = in, the same
        // row for every head)
        let mut t = Vec::new();
        let mut v = Vec::new();
        let (k, hs) = if af { (din, 0) } else { (c, c) };
        if af {
            // s_src[j, h] = a_src^h · W^h x_j = x_j · (W^hᵀ a_src^h)
            v = vec![0.0f32; 2 * hh * din];
            for h in 0..hh {
                for cc in 0..c {
                    let wr = &w[(h * c + cc) * din..(h * c + cc + 1) * din];
                    axpy(&mut v[h * din..(h + 1) * din], a_src[h * c + cc], wr);
                    let o = (hh + h) * din;
                    axpy(&mut v[o..o + din], a_dst[h * c + cc], wr);
                }
            }
        } else {
            t = pool.take(ns * dout);
            x.linear(pool, ns, w, dout, &mut t, false);
        }
        let (src, map) = if af { x.agg_source(ns) } else { (&t[..], None) };
        let width = if af { din } else { dout };
        let srow = |j: usize| -> &[f32] {
            let r = map.map_or(j, |m| m[j] as usize);
            &src[r * width..(r + 1) * width]
        };
        let (va, vd) = if af {
            (&v[..hh * din], &v[hh * din..])
        } else {
            (a_src, a_dst)
        };
        head_scores(ns, srow, hh, k, hs, va, &mut s_src);
        head_scores(nd, srow, hh, k, hs, vd, &mut s_dst);
        // the attention-weighted sums, [nd, hh·k]
        let mut sums = pool.take(nd * hh * k);
        let rows = rows_per_task(hh * k);
        let tasks: Vec<_> = sums
            .chunks_mut(rows * hh * k)
            .zip(alpha_self.chunks_mut(rows * hh))
            .zip(arc_chunks(b, rows, hh, &mut alpha))
            .enumerate()
            .collect();
        let (ss, sd) = (&s_src[..], &s_dst[..]);
        tasks.into_par_iter().for_each(|(q, ((o, a_self), a_arc))| {
            let mut mx = vec![0.0f32; 2 * hh];
            let r0 = q * rows;
            let e0 = b.indptr[r0] as usize;
            for (r, (row, aself)) in o
                .chunks_exact_mut(hh * k)
                .zip(a_self.chunks_exact_mut(hh))
                .enumerate()
            {
                let i = r0 + r;
                let (s, e) = (b.indptr[i] as usize, b.indptr[i + 1] as usize);
                simd_dispatch!(gat_row(
                    i,
                    &b.indices[s..e],
                    &b.indices[(s + 16).min(b.indices.len())..],
                    srow,
                    ss,
                    sd,
                    hh,
                    k,
                    hs,
                    &mut a_arc[(s - e0) * hh..(e - e0) * hh],
                    aself,
                    &mut mx,
                    row
                ));
            }
        });
        let out = if af {
            // out[:, h·C..] = sums_h W^hᵀ, per head (strided operands, no copies)
            let mut out = Mat::from_vec(nd, dout, pool.take(nd * dout));
            for h in 0..hh {
                gemm_strided(
                    nd,
                    c,
                    din,
                    &mut out.data[h * c..],
                    dout,
                    &sums[h * din..],
                    hh * din,
                    1,
                    &w[h * c * din..],
                    1,
                    din,
                    false,
                    true,
                );
            }
            out
        } else {
            Mat::from_vec(nd, dout, std::mem::take(&mut sums))
        };
        let h = if af {
            sums
        } else {
            pool.give(sums);
            t
        };
        let cache = if keep {
            Some(Box::new(GatCache {
                aggregate_first: af,
                h,
                s_src,
                s_dst,
                alpha,
                alpha_self,
                v,
            }) as ConvCache)
        } else {
            for buf in [h, s_src, s_dst, alpha, alpha_self] {
                pool.give(buf);
            }
            None
        };
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
        let (nd, ns, din) = (b.num_dst, b.num_src, self.in_dim);
        let (hh, c) = (self.heads, self.channels);
        let dout = hh * c;
        let GatCache {
            aggregate_first: af,
            h: hbuf,
            s_src,
            s_dst,
            alpha,
            alpha_self,
            v,
        } = *cache
            .expect("backward needs a forward with keep")
            .downcast::<GatCache>()
            .expect("forward cache of another layer type");
        let w = &p[self.w..self.w + dout * din];
        let (a_src, a_dst) = (
            &p[self.att_src..self.att_src + dout],
            &p[self.att_dst..self.att_dst + dout],
        );
        let (k, hs) = if af { (din, 0) } else { (c, c) };
        // dL/d(sums) [nd, hh·k]: d itself (transform first) or d_h W^h per head
        let dsums = if af {
            self.sums_grad(pool, w, d, &hbuf, g, nd)
        } else {
            Vec::new()
        };
        let ds_rows: &[f32] = if af { &dsums } else { &d.data };
        let (src, map) = if af {
            x.agg_source(ns)
        } else {
            (&hbuf[..], None)
        };
        let width = if af { din } else { dout };
        let srow = |j: usize| -> &[f32] {
            let r = map.map_or(j, |m| m[j] as usize);
            &src[r * width..(r + 1) * width]
        };
        // Pass 1, over destination rows: dz = dL/d(pre-LeakyReLU score) per arc and self-loop
        // (softmax backward: de_ij = α_ij (dα_ij − Σ_k α_ik dα_ik), dα_ij = <dsums_i^h, src_j^h>),
        // and ds_dst_i = Σ_j dz_ij.
        let (dz, dz_self, ds_dst) = self.score_grads(
            pool,
            b,
            &srow,
            ds_rows,
            [&s_src, &s_dst, &alpha, &alpha_self],
            k,
            hs,
        );
        // Pass 2, over source rows through the transposed block. Transform first: row = dL/dt_j
        // = Σ_i α_ij d_i (+ self) + ds_src_j a_src (+ ds_dst_j a_dst), acc = [d a_src | d a_dst].
        // Aggregate first: row = dL/dx_j = Σ_h (Σ_i α_ij^h dsums_i^h (+ self) + ds_src_j^h v_src^h
        // (+ ds_dst_j^h v_dst^h)), acc = [dL/dv_src | dL/dv_dst] (`v = W^hᵀ a^h`).
        let (tptr, tarc) = transposed_arcs(b);
        let rw = if af { din } else { dout };
        let hr = if af { 0 } else { c };
        let need_row = !af || need_dx;
        let (va, vd) = if af {
            (&v[..hh * din], &v[hh * din..])
        } else {
            (a_src, a_dst)
        };
        let mut rows_out = pool.take(ns * rw);
        let chunk_rows = 4 * min_rows(rw);
        let parts: Vec<Vec<f32>> = rows_out
            .par_chunks_mut(chunk_rows * rw)
            .enumerate()
            .map(|(q, rc)| {
                let mut acc = vec![0.0f32; 2 * hh * k];
                let mut ds = vec![0.0f32; hh];
                for (r, row) in rc.chunks_exact_mut(rw).enumerate() {
                    let j = q * chunk_rows + r;
                    simd_dispatch!(gat_t_row(
                        j,
                        row,
                        need_row,
                        &mut ds,
                        &mut acc,
                        &tptr,
                        &tarc,
                        b,
                        ds_rows,
                        srow(j),
                        &alpha,
                        &alpha_self,
                        &dz,
                        &dz_self,
                        &ds_dst,
                        va,
                        vd,
                        hh,
                        k,
                        hs,
                        hr
                    ));
                }
                acc
            })
            .collect();
        let mut dva = vec![0.0f32; 2 * hh * k];
        for part in &parts {
            add_into(&mut dva, part);
        }
        drop((tptr, tarc));
        for buf in [s_src, s_dst, alpha, alpha_self, dz, dz_self, ds_dst, dsums] {
            pool.give(buf);
        }
        if af {
            pool.give(hbuf);
            self.attention_grad_through_v(p, w, &dva, g);
            if need_dx {
                Some(Mat::from_vec(ns, din, rows_out))
            } else {
                pool.give(rows_out);
                None
            }
        } else {
            add_into(&mut g[self.att_src..self.att_src + dout], &dva[..dout]);
            add_into(&mut g[self.att_dst..self.att_dst + dout], &dva[dout..]);
            pool.give(hbuf);
            let dt = rows_out;
            x.linear_weight_grad(pool, ns, &dt, dout, &mut g[self.w..self.w + dout * din]);
            let dx = need_dx.then(|| {
                let mut dx = Mat::from_vec(ns, din, pool.take(ns * din));
                matmul_a_b(ns, din, dout, &dt, w, &mut dx.data, false);
                dx
            });
            pool.give(dt);
            dx
        }
    }
}

/// The transposed block with arc ids: for source `j`, `arcs[ptr[j]..ptr[j+1]]` are the
/// `(destination, arc index)` pairs reading it. O(E), sequential.
fn transposed_arcs(b: &BlockView) -> (Vec<usize>, Vec<(u32, usize)>) {
    let ne = b.indptr[b.num_dst] as usize;
    let mut ptr = vec![0usize; b.num_src + 1];
    for &j in &b.indices[..ne] {
        ptr[j as usize + 1] += 1;
    }
    for j in 0..b.num_src {
        ptr[j + 1] += ptr[j];
    }
    let mut fill = ptr.clone();
    let mut arcs = vec![(0u32, 0usize); ne];
    for i in 0..b.num_dst {
        for e in b.indptr[i] as usize..b.indptr[i + 1] as usize {
            let f = &mut fill[b.indices[e] as usize];
            arcs[*f] = (i as u32, e);
            *f += 1;
        }
    }
    (ptr, arcs)
}

/// `Σ a ⊙ b` in 8 fixed lanes (one AVX2 register; `chunks_exact` lets the compiler drop the
/// bounds checks and vectorize), lanes summed pairwise in a fixed order.
#[inline(always)]
fn dot8(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// Hint the CPU to load `s` (no effect on results).
#[inline(always)]
fn prefetch(s: &[f32]) {
    crate::kernels::prefetch_row(s, 0, s.len());
}

/// One destination row of the forward: scores, stable softmax (self-loop included, an arc
/// `i → i` gets weight 0), and `row[h·k..] = Σ_j α_ij^h src_j[h·hs..h·hs + k]`.
/// `mx`: scratch `2·heads`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gat_row<'a>(
    i: usize,
    nb: &[u32],
    ahead: &[u32],
    srow: impl Fn(usize) -> &'a [f32],
    s_src: &[f32],
    s_dst: &[f32],
    hh: usize,
    k: usize,
    hs: usize,
    a_arc: &mut [f32],
    a_self: &mut [f32],
    mx: &mut [f32],
    row: &mut [f32],
) {
    let sd = &s_dst[i * hh..(i + 1) * hh];
    let (m, sum) = mx.split_at_mut(hh);
    for h in 0..hh {
        let e = leaky(s_src[i * hh + h] + sd[h]);
        a_self[h] = e;
        m[h] = e;
    }
    for (q, &j) in nb.iter().enumerate() {
        let e = &mut a_arc[q * hh..(q + 1) * hh];
        let j = j as usize;
        if j == i {
            e.fill(f32::NEG_INFINITY); // the self-loop is counted once, below
            continue;
        }
        for h in 0..hh {
            let v = leaky(s_src[j * hh + h] + sd[h]);
            e[h] = v;
            m[h] = m[h].max(v);
        }
    }
    for h in 0..hh {
        let v = (a_self[h] - m[h]).exp();
        a_self[h] = v;
        sum[h] = v;
    }
    for e in a_arc.chunks_exact_mut(hh) {
        for h in 0..hh {
            let v = (e[h] - m[h]).exp();
            e[h] = v;
            sum[h] += v;
        }
    }
    for s in sum.iter_mut() {
        *s = 1.0 / *s;
    }
    for h in 0..hh {
        a_self[h] *= sum[h];
    }
    for e in a_arc.chunks_exact_mut(hh) {
        for h in 0..hh {
            e[h] *= sum[h];
        }
    }
    row.fill(0.0);
    let si = srow(i);
    for h in 0..hh {
        axpy(
            &mut row[h * k..(h + 1) * k],
            a_self[h],
            &si[h * hs..h * hs + k],
        );
    }
    for (q, &j) in nb.iter().enumerate() {
        if let Some(&n) = ahead.get(q) {
            prefetch(srow(n as usize));
        }
        let sj = srow(j as usize);
        let e = &a_arc[q * hh..(q + 1) * hh];
        for h in 0..hh {
            axpy(&mut row[h * k..(h + 1) * k], e[h], &sj[h * hs..h * hs + k]);
        }
    }
}

/// Pass 1 of the backward for destination `i`: `dz` per arc (into `dz_arc`) and self-loop,
/// `ds_dst = Σ dz` over the row; `dsum` = dL/d(row of the forward's sums). `mean`: scratch
/// `heads`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gat_back_row<'a>(
    i: usize,
    nb: &[u32],
    ahead: &[u32],
    srow: impl Fn(usize) -> &'a [f32],
    dsum: &[f32],
    s_src: &[f32],
    s_dst: &[f32],
    hh: usize,
    k: usize,
    hs: usize,
    a_arc: &[f32],
    a_self: &[f32],
    dz_arc: &mut [f32],
    dz_self: &mut [f32],
    ds_dst: &mut [f32],
    mean: &mut [f32],
) {
    let si = srow(i);
    // dα = <dsum^h, src_j^h>; mean = Σ_j α_ij dα_ij
    for h in 0..hh {
        let v = dot8(&dsum[h * k..(h + 1) * k], &si[h * hs..h * hs + k]);
        dz_self[h] = v;
        mean[h] = a_self[h] * v;
    }
    for (q, &j) in nb.iter().enumerate() {
        if let Some(&n) = ahead.get(q) {
            prefetch(srow(n as usize));
        }
        let sj = srow(j as usize);
        for h in 0..hh {
            let v = dot8(&dsum[h * k..(h + 1) * k], &sj[h * hs..h * hs + k]);
            dz_arc[q * hh + h] = v;
            mean[h] += a_arc[q * hh + h] * v;
        }
    }
    let sd = &s_dst[i * hh..(i + 1) * hh];
    for h in 0..hh {
        let z = s_src[i * hh + h] + sd[h];
        let v = a_self[h] * (dz_self[h] - mean[h]) * leaky_grad(z);
        dz_self[h] = v;
        ds_dst[h] = v;
    }
    for (q, &j) in nb.iter().enumerate() {
        let j = j as usize;
        for h in 0..hh {
            let z = s_src[j * hh + h] + sd[h];
            let a = a_arc[q * hh + h]; // 0 for an arc i → i
            let v = a * (dz_arc[q * hh + h] - mean[h]) * leaky_grad(z);
            dz_arc[q * hh + h] = v;
            ds_dst[h] += v;
        }
    }
}

/// Pass 2 of the backward for source `j` (see `GatConv::backward`): with `need_row`,
/// `row[h·hr..h·hr + k] += ...` (`hr = 0`: all heads into one row); adds `ds_src_j src_j` and
/// (for `j < num_dst`) `ds_dst_j src_j` per head to `acc = [src side | dst side]` `[2, heads, k]`.
/// `ds`: scratch `heads`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gat_t_row(
    j: usize,
    row: &mut [f32],
    need_row: bool,
    ds: &mut [f32],
    acc: &mut [f32],
    tptr: &[usize],
    tarc: &[(u32, usize)],
    b: &BlockView,
    dsums: &[f32],
    sj: &[f32],
    alpha: &[f32],
    alpha_self: &[f32],
    dz: &[f32],
    dz_self: &[f32],
    ds_dst: &[f32],
    va: &[f32],
    vd: &[f32],
    hh: usize,
    k: usize,
    hs: usize,
    hr: usize,
) {
    let w = hh * k;
    row.fill(0.0);
    ds.fill(0.0);
    let arcs = &tarc[tptr[j]..tptr[j + 1]];
    for (q, &(i, e)) in arcs.iter().enumerate() {
        let i = i as usize;
        if need_row {
            if let Some(&(n, _)) = arcs.get(q + 16) {
                prefetch(&dsums[n as usize * w..(n as usize + 1) * w]);
            }
            let di = &dsums[i * w..(i + 1) * w];
            for h in 0..hh {
                axpy(
                    &mut row[h * hr..h * hr + k],
                    alpha[e * hh + h],
                    &di[h * k..(h + 1) * k],
                );
            }
        }
        for h in 0..hh {
            ds[h] += dz[e * hh + h];
        }
    }
    let (acc_src, acc_dst) = acc.split_at_mut(w);
    if j < b.num_dst {
        let dj = &dsums[j * w..(j + 1) * w];
        for h in 0..hh {
            let r = h * hr..h * hr + k;
            let rk = h * k..(h + 1) * k;
            ds[h] += dz_self[j * hh + h];
            let v = ds_dst[j * hh + h];
            axpy(&mut acc_dst[rk.clone()], v, &sj[h * hs..h * hs + k]);
            if need_row {
                axpy(&mut row[r.clone()], alpha_self[j * hh + h], &dj[rk.clone()]);
                axpy(&mut row[r], v, &vd[rk]);
            }
        }
    }
    for (h, &v) in ds.iter().enumerate() {
        let rk = h * k..(h + 1) * k;
        axpy(&mut acc_src[rk.clone()], v, &sj[h * hs..h * hs + k]);
        if need_row {
            axpy(&mut row[h * hr..h * hr + k], v, &va[rk]);
        }
    }
}
