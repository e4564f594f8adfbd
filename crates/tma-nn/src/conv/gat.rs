//! Graph attention (GAT), multi-head, with its hand-written backward.

use super::{Conv, ConvArgs, ConvCache, Init, ParamAlloc};
use crate::kernels::{add_into, axpy, dot_lanes, min_rows, BufferPool, InputRef};
use crate::mat::matmul_a_b;
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
/// Heads: hidden layers have `H` heads ([`crate::LayerOptions::heads`], default
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
/// `[num_dst, H·C]`. Memory: `X Wᵀ` `[num_src, H·C]` plus `E × H` attention coefficients (no
/// `E × F` message tensor). Forward: one CSR pass per destination row (scores, softmax,
/// weighted gather), parallel over rows (rayon). Backward: a pass over destination rows
/// (softmax and LeakyReLU backward, per edge and head) and a gather over the transposed block,
/// parallel over source rows; reductions over fixed row chunks, so results do not depend on
/// the thread count.
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
    /// Heads of a hidden layer unless [`crate::LayerOptions::heads`] says otherwise (8, the
    /// paper's transductive set-up).
    pub const DEFAULT_HEADS: usize = 8;

    /// Slope of the LeakyReLU on attention scores (the paper's and PyG's 0.2).
    pub const NEGATIVE_SLOPE: f32 = 0.2;

    /// Declare `lin.weight`, `att_src`, `att_dst`, `bias`.
    ///
    /// # Errors
    /// `heads == 0`, or a hidden width not divisible by the number of heads.
    pub(crate) fn build(a: &ConvArgs, alloc: &mut ParamAlloc) -> Result<Self, String> {
        let heads = if a.last { 1 } else { a.opts.heads };
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

/// What [`GatConv`]'s forward keeps: `t = X Wᵀ` `[num_src, H·C]`, the scores
/// `s_src = <t_j^h, a_src^h>` `[num_src, H]`, `s_dst` `[num_dst, H]`, and the attention
/// coefficients per arc (`[E, H]`, block order) and per self-loop (`[num_dst, H]`).
struct GatCache {
    t: Vec<f32>,
    s_src: Vec<f32>,
    s_dst: Vec<f32>,
    alpha: Vec<f32>,
    alpha_self: Vec<f32>,
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

/// Per-head scores `s[r, h] = <t[r, h·C..(h+1)·C], a[h]>` for the first `rows` rows of `t`.
fn head_scores(t: &[f32], rows: usize, heads: usize, c: usize, a: &[f32], s: &mut [f32]) {
    let dout = heads * c;
    s[..rows * heads]
        .par_chunks_mut(heads)
        .zip(t[..rows * dout].par_chunks(dout))
        .with_min_len(min_rows(dout))
        .for_each(|(s, row)| {
            for (h, s) in s.iter_mut().enumerate() {
                *s = dot_lanes(&row[h * c..(h + 1) * c], &a[h * c..(h + 1) * c]);
            }
        });
}

/// Destination rows per parallel task in the row passes.
fn rows_per_task(dout: usize) -> usize {
    min_rows(dout * 16)
}

/// Split `[num_dst, *]` row buffers and `[E, heads]` arc buffers into matching row chunks of
/// `rows` destinations (arcs of a destination are contiguous in a block).
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
    fn reads_all_rows_dense(&self) -> bool {
        // attention needs W x_j for every source: always transform first
        true
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
        let mut t = pool.take(ns * dout);
        x.linear(ns, &p[self.w..self.w + dout * din], dout, &mut t, false);
        let (a_src, a_dst) = (
            &p[self.att_src..self.att_src + dout],
            &p[self.att_dst..self.att_dst + dout],
        );
        let mut s_src = pool.take(ns * hh);
        let mut s_dst = pool.take(nd * hh);
        head_scores(&t, ns, hh, c, a_src, &mut s_src);
        head_scores(&t, nd, hh, c, a_dst, &mut s_dst);
        let mut alpha = pool.take(ne * hh);
        let mut alpha_self = pool.take(nd * hh);
        let mut out = Mat::from_vec(nd, dout, pool.take(nd * dout));
        let rows = rows_per_task(dout);
        let tasks: Vec<_> = out
            .data
            .chunks_mut(rows * dout)
            .zip(alpha_self.chunks_mut(rows * hh))
            .zip(arc_chunks(b, rows, hh, &mut alpha))
            .enumerate()
            .collect();
        let (tr, ss, sd) = (&t[..], &s_src[..], &s_dst[..]);
        tasks.into_par_iter().for_each(|(k, ((o, a_self), a_arc))| {
            let mut mx = vec![0.0f32; 2 * hh];
            let r0 = k * rows;
            let e0 = b.indptr[r0] as usize;
            for (r, (row, aself)) in o
                .chunks_exact_mut(dout)
                .zip(a_self.chunks_exact_mut(hh))
                .enumerate()
            {
                let i = r0 + r;
                let (s, e) = (b.indptr[i] as usize, b.indptr[i + 1] as usize);
                simd_dispatch!(gat_row(
                    i,
                    &b.indices[s..e],
                    &b.indices[(s + 16).min(b.indices.len())..],
                    tr,
                    ss,
                    sd,
                    hh,
                    c,
                    &mut a_arc[(s - e0) * hh..(e - e0) * hh],
                    aself,
                    &mut mx,
                    row
                ));
            }
        });
        let cache = if keep {
            Some(Box::new(GatCache {
                t,
                s_src,
                s_dst,
                alpha,
                alpha_self,
            }) as ConvCache)
        } else {
            for v in [t, s_src, s_dst, alpha, alpha_self] {
                pool.give(v);
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
        let ne = b.indptr[nd] as usize;
        let GatCache {
            t,
            s_src,
            s_dst,
            alpha,
            alpha_self,
        } = *cache
            .expect("backward needs a forward with keep")
            .downcast::<GatCache>()
            .expect("forward cache of another layer type");
        let (a_src, a_dst) = (
            &p[self.att_src..self.att_src + dout],
            &p[self.att_dst..self.att_dst + dout],
        );
        // Pass 1, over destination rows: dz = dL/d(pre-LeakyReLU score) per arc and self-loop
        // (softmax backward: de_ij = α_ij (dα_ij − Σ_k α_ik dα_ik), dα_ij = <d_i^h, t_j^h>),
        // and ds_dst_i = Σ_j dz_ij.
        let mut dz = pool.take(ne * hh);
        let mut dz_self = pool.take(nd * hh);
        let mut ds_dst = pool.take(nd * hh);
        {
            let rows = rows_per_task(dout);
            let tasks: Vec<_> = dz_self
                .chunks_mut(rows * hh)
                .zip(ds_dst.chunks_mut(rows * hh))
                .zip(arc_chunks(b, rows, hh, &mut dz))
                .enumerate()
                .collect();
            let (tr, ss, sd, al, als) =
                (&t[..], &s_src[..], &s_dst[..], &alpha[..], &alpha_self[..]);
            tasks.into_par_iter().for_each(|(k, ((dzs, dsd), dza))| {
                let mut mean = vec![0.0f32; hh];
                let r0 = k * rows;
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
                        tr,
                        &d.data[i * dout..(i + 1) * dout],
                        ss,
                        sd,
                        hh,
                        c,
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
        // Pass 2, over source rows through the transposed block: dt_j = Σ_i α_ij d_i (+ self)
        // + ds_src_j a_src (+ ds_dst_j a_dst); d a_src += ds_src_j t_j, d a_dst += ds_dst_j t_j.
        let (tptr, tarc) = transposed_arcs(b);
        let mut dt = pool.take(ns * dout);
        let chunk_rows = 4 * min_rows(dout);
        let parts: Vec<Vec<f32>> = dt
            .par_chunks_mut(chunk_rows * dout)
            .enumerate()
            .map(|(k, dtc)| {
                let mut acc = vec![0.0f32; 2 * dout]; // d att_src | d att_dst
                let mut ds = vec![0.0f32; hh];
                for (r, row) in dtc.chunks_exact_mut(dout).enumerate() {
                    let j = k * chunk_rows + r;
                    simd_dispatch!(gat_t_row(
                        j,
                        row,
                        &mut ds,
                        &mut acc,
                        &tptr,
                        &tarc,
                        b,
                        &d.data,
                        &t,
                        &alpha,
                        &alpha_self,
                        &dz,
                        &dz_self,
                        &ds_dst,
                        a_src,
                        a_dst,
                        hh,
                        c
                    ));
                }
                acc
            })
            .collect();
        for part in &parts {
            add_into(&mut g[self.att_src..self.att_src + dout], &part[..dout]);
            add_into(&mut g[self.att_dst..self.att_dst + dout], &part[dout..]);
        }
        drop((tptr, tarc));
        for v in [t, s_src, s_dst, alpha, alpha_self, dz, dz_self, ds_dst] {
            pool.give(v);
        }
        x.linear_weight_grad(ns, &dt, dout, &mut g[self.w..self.w + dout * din]);
        let dx = need_dx.then(|| {
            let mut dx = Mat::from_vec(ns, din, pool.take(ns * din));
            matmul_a_b(
                ns,
                din,
                dout,
                &dt,
                &p[self.w..self.w + dout * din],
                &mut dx.data,
                false,
            );
            dx
        });
        pool.give(dt);
        dx
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

/// One destination row of the forward: scores, stable softmax (self-loop included, an arc
/// `i → i` gets weight 0), weighted sum of `t` rows into `row`. `mx`: scratch `2·heads`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gat_row(
    i: usize,
    nb: &[u32],
    ahead: &[u32],
    t: &[f32],
    s_src: &[f32],
    s_dst: &[f32],
    hh: usize,
    c: usize,
    a_arc: &mut [f32],
    a_self: &mut [f32],
    mx: &mut [f32],
    row: &mut [f32],
) {
    let dout = hh * c;
    let sd = &s_dst[i * hh..(i + 1) * hh];
    let (m, sum) = mx.split_at_mut(hh);
    for h in 0..hh {
        let e = leaky(s_src[i * hh + h] + sd[h]);
        a_self[h] = e;
        m[h] = e;
    }
    for (k, &j) in nb.iter().enumerate() {
        let e = &mut a_arc[k * hh..(k + 1) * hh];
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
    let ti = &t[i * dout..(i + 1) * dout];
    for h in 0..hh {
        axpy(
            &mut row[h * c..(h + 1) * c],
            a_self[h],
            &ti[h * c..(h + 1) * c],
        );
    }
    for (k, &j) in nb.iter().enumerate() {
        if let Some(&n) = ahead.get(k) {
            crate::kernels::prefetch_row(t, n as usize * dout, dout);
        }
        let tj = &t[j as usize * dout..(j as usize + 1) * dout];
        let e = &a_arc[k * hh..(k + 1) * hh];
        for h in 0..hh {
            axpy(&mut row[h * c..(h + 1) * c], e[h], &tj[h * c..(h + 1) * c]);
        }
    }
}

/// Pass 1 of the backward for destination `i`: `dz` per arc (into `dz_arc`) and self-loop,
/// `ds_dst = Σ dz` over the row. `mean`: scratch `heads`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gat_back_row(
    i: usize,
    nb: &[u32],
    t: &[f32],
    d: &[f32],
    s_src: &[f32],
    s_dst: &[f32],
    hh: usize,
    c: usize,
    a_arc: &[f32],
    a_self: &[f32],
    dz_arc: &mut [f32],
    dz_self: &mut [f32],
    ds_dst: &mut [f32],
    mean: &mut [f32],
) {
    let dout = hh * c;
    let ti = &t[i * dout..(i + 1) * dout];
    // dα = <d_i^h, t_j^h>; mean = Σ_j α_ij dα_ij
    for h in 0..hh {
        let v = dot_lanes(&d[h * c..(h + 1) * c], &ti[h * c..(h + 1) * c]);
        dz_self[h] = v;
        mean[h] = a_self[h] * v;
    }
    for (k, &j) in nb.iter().enumerate() {
        let tj = &t[j as usize * dout..(j as usize + 1) * dout];
        for h in 0..hh {
            let v = dot_lanes(&d[h * c..(h + 1) * c], &tj[h * c..(h + 1) * c]);
            dz_arc[k * hh + h] = v;
            mean[h] += a_arc[k * hh + h] * v;
        }
    }
    let sd = &s_dst[i * hh..(i + 1) * hh];
    for h in 0..hh {
        let z = s_src[i * hh + h] + sd[h];
        let v = a_self[h] * (dz_self[h] - mean[h]) * leaky_grad(z);
        dz_self[h] = v;
        ds_dst[h] = v;
    }
    for (k, &j) in nb.iter().enumerate() {
        let j = j as usize;
        for h in 0..hh {
            let z = s_src[j * hh + h] + sd[h];
            let a = a_arc[k * hh + h]; // 0 for an arc i → i
            let v = a * (dz_arc[k * hh + h] - mean[h]) * leaky_grad(z);
            dz_arc[k * hh + h] = v;
            ds_dst[h] += v;
        }
    }
}

/// Pass 2 of the backward for source `j`: `row = dL/dt_j`; adds `ds_src_j t_j` and
/// `ds_dst_j t_j` (for `j < num_dst`) to `acc = [d att_src | d att_dst]`. `ds`: scratch `heads`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gat_t_row(
    j: usize,
    row: &mut [f32],
    ds: &mut [f32],
    acc: &mut [f32],
    tptr: &[usize],
    tarc: &[(u32, usize)],
    b: &BlockView,
    d: &[f32],
    t: &[f32],
    alpha: &[f32],
    alpha_self: &[f32],
    dz: &[f32],
    dz_self: &[f32],
    ds_dst: &[f32],
    a_src: &[f32],
    a_dst: &[f32],
    hh: usize,
    c: usize,
) {
    let dout = hh * c;
    row.fill(0.0);
    ds.fill(0.0);
    let arcs = &tarc[tptr[j]..tptr[j + 1]];
    for (k, &(i, e)) in arcs.iter().enumerate() {
        if let Some(&(n, _)) = arcs.get(k + 16) {
            crate::kernels::prefetch_row(d, n as usize * dout, dout);
        }
        let di = &d[i as usize * dout..(i as usize + 1) * dout];
        for h in 0..hh {
            axpy(
                &mut row[h * c..(h + 1) * c],
                alpha[e * hh + h],
                &di[h * c..(h + 1) * c],
            );
            ds[h] += dz[e * hh + h];
        }
    }
    let tj = &t[j * dout..(j + 1) * dout];
    let (acc_src, acc_dst) = acc.split_at_mut(dout);
    if j < b.num_dst {
        let dj = &d[j * dout..(j + 1) * dout];
        for h in 0..hh {
            let r = h * c..(h + 1) * c;
            axpy(&mut row[r.clone()], alpha_self[j * hh + h], &dj[r.clone()]);
            ds[h] += dz_self[j * hh + h];
            let v = ds_dst[j * hh + h];
            axpy(&mut acc_dst[r.clone()], v, &tj[r.clone()]);
            axpy(&mut row[r.clone()], v, &a_dst[r]);
        }
    }
    for (h, &v) in ds.iter().enumerate() {
        let r = h * c..(h + 1) * c;
        axpy(&mut acc_src[r.clone()], v, &tj[r.clone()]);
        axpy(&mut row[r.clone()], v, &a_src[r]);
    }
}
