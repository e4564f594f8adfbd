//! The compute kernels: sparse aggregation over blocks (forward and transposed backward),
//! LayerNorm, PReLU, dropout, row reductions, the buffer pool. Below the dense products
//! (`matmul.rs`) and the layer input (`input.rs`, with its sparse-input products).
//!
//! Everything works on contiguous row-major `f32` buffers, so a GPU backend can replace this
//! module without touching the layers' logic in `model.rs`.
//!
//! Parallelism: rayon over rows of the **output** (every row written by exactly one task, no
//! atomics). Reductions over rows (bias / LayerNorm / PReLU gradients) use fixed-size row chunks
//! summed in chunk order, so results do not depend on the number of threads.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use std::ops::Range;
use tma_sample::BlockView;

/// Call `f(args..)` (an `#[inline(always)]` row kernel) through a copy compiled for AVX2+FMA
/// when the CPU has them (runtime detection, cached by std), else the baseline build.
macro_rules! simd_dispatch {
    ($f:ident($($a:expr),* $(,)?)) => {{
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx2,fma")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn avx2_copy<R>(f: impl FnOnce() -> R) -> R {
                f()
            }
            if crate::kernels::has_avx2() {
                // SAFETY: the CPU supports AVX2 and FMA (checked at run time).
                unsafe { avx2_copy(|| $f($($a),*)) }
            } else {
                $f($($a),*)
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            $f($($a),*)
        }
    }};
}

#[cfg(target_arch = "x86_64")]
#[inline]
pub(crate) fn has_avx2() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

/// Rows per rayon task for row-parallel kernels of width `cols`: about 16K elements per task.
#[inline]
pub(crate) fn min_rows(cols: usize) -> usize {
    (16384 / cols.max(1)).max(1)
}

#[inline]
pub(crate) fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += a * x;
    }
}

/// Arcs ahead of the current one whose source row [`prefetch_row`] requests in gather loops.
pub(crate) const PREFETCH_AHEAD: usize = 16;

/// Hint the CPU to load row `h[start..start + dim]` into cache (no effect on results; an
/// out-of-range row is never dereferenced: the address is only computed with wrapping
/// arithmetic and prefetches do not fault).
#[inline(always)]
pub(crate) fn prefetch_row(h: &[f32], start: usize, dim: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = h.as_ptr().wrapping_add(start);
        let mut off = 0;
        while off < dim {
            // SAFETY: prefetch is a hint; it never faults, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(off) as *const i8) };
            off += 16; // one 64-byte line
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (h, start, dim);
    }
}

#[inline]
pub(crate) fn add_into(y: &mut [f32], x: &[f32]) {
    for (y, x) in y.iter_mut().zip(x) {
        *y += x;
    }
}

/// Independent partial sums in the row reductions below: 16 lanes vectorize into one AVX-512
/// or two AVX2 registers and break the add-latency chain (a single running sum over a 256-wide
/// row waits ~4 cycles per element). Fixed lane order: results do not depend on threads.
const LANES: usize = 16;

/// `Σ f(i)` over `0..n` in [`LANES`] partial sums, combined in lane order.
#[inline(always)]
pub(crate) fn lane_sum(n: usize, f: impl Fn(usize) -> f32) -> f32 {
    let mut acc = [0.0f32; LANES];
    let full = n - n % LANES;
    let mut i = 0;
    while i < full {
        for (l, a) in acc.iter_mut().enumerate() {
            *a += f(i + l);
        }
        i += LANES;
    }
    for (l, a) in acc.iter_mut().enumerate().take(n - full) {
        *a += f(full + l);
    }
    acc.iter().sum()
}

/// `Σ x` (see [`lane_sum`]).
#[inline(always)]
pub(crate) fn sum_lanes(x: &[f32]) -> f32 {
    lane_sum(x.len(), |i| x[i])
}

/// `Σ a ⊙ b` (see [`lane_sum`]).
#[inline(always)]
pub(crate) fn dot_lanes(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    lane_sum(a.len(), |i| a[i] * b[i])
}

/// `Σ (x − m)²` (see [`lane_sum`]).
#[inline(always)]
fn sq_dev_lanes(x: &[f32], m: f32) -> f32 {
    lane_sum(x.len(), |i| (x[i] - m) * (x[i] - m))
}

/// Sum over row chunks of `f(rows, acc)`, each chunk with its own zeroed accumulator of `width`
/// elements; chunks are `chunk_rows` long (fixed, so the sum order does not depend on threads).
pub(crate) fn chunked_reduce(
    rows: usize,
    width: usize,
    chunk_rows: usize,
    f: impl Fn(Range<usize>, &mut [f32]) + Sync,
) -> Vec<f32> {
    let chunk_rows = chunk_rows.max(1);
    let n_chunks = rows.div_ceil(chunk_rows);
    let parts: Vec<Vec<f32>> = (0..n_chunks)
        .into_par_iter()
        .map(|c| {
            let mut acc = vec![0.0f32; width];
            f(c * chunk_rows..((c + 1) * chunk_rows).min(rows), &mut acc);
            acc
        })
        .collect();
    let mut total = vec![0.0f32; width];
    for p in &parts {
        add_into(&mut total, p);
    }
    total
}

/// `out[c] += Σ_r d[r, c]` (bias gradient), `d: [rows, cols]`.
pub(crate) fn add_col_sums(d: &[f32], cols: usize, out: &mut [f32]) {
    assert_eq!(out.len(), cols);
    if cols == 0 {
        return;
    }
    let rows = d.len() / cols;
    let s = chunked_reduce(rows, cols, 4 * min_rows(cols), |r, acc| {
        for i in r {
            add_into(acc, &d[i * cols..(i + 1) * cols]);
        }
    });
    add_into(out, &s);
}

/// `y[r, :] += b` for every row.
pub(crate) fn add_bias(y: &mut [f32], b: &[f32]) {
    let cols = b.len();
    if cols == 0 {
        return;
    }
    y.par_chunks_mut(cols)
        .with_min_len(min_rows(cols))
        .for_each(|row| add_into(row, b));
}

/// `t[j, i] (+)= a[i, j]` for `a: [rows, cols]`, `t: [cols, rows]`: in 32 × 32 blocks (the 32
/// source lines of a block stay in cache while its output rows are written in order),
/// parallel over blocks of output rows, each block as 8 × 8 register transposes where the CPU
/// has AVX2 (element-wise otherwise and at the edges). Each output element is written (or
/// added to) once, so the result is the same bits either way.
pub(crate) fn transpose_into(a: &[f32], rows: usize, cols: usize, t: &mut [f32], add: bool) {
    const B: usize = 32;
    assert!(a.len() >= rows * cols && t.len() >= rows * cols);
    if rows == 0 || cols == 0 {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    let avx2 = has_avx2();
    t[..rows * cols]
        .par_chunks_mut(B * rows)
        .enumerate()
        .for_each(|(jb, tc)| {
            let j0 = jb * B;
            let j1 = (j0 + B).min(cols);
            for i0 in (0..rows).step_by(B) {
                let i1 = (i0 + B).min(rows);
                // the 8 × 8 tiles that fit, then the rest element-wise
                let (mut i8, mut j8) = (i0, j0);
                #[cfg(target_arch = "x86_64")]
                if avx2 {
                    i8 = i0 + (i1 - i0) / 8 * 8;
                    j8 = j0 + (j1 - j0) / 8 * 8;
                    for jj in (j0..j8).step_by(8) {
                        for ii in (i0..i8).step_by(8) {
                            // SAFETY: AVX2 checked above; the tile's 8 source rows
                            // a[ii + r, jj..jj + 8] and 8 output rows tc[(jj - j0 + r) * rows
                            // + ii..+ 8] are in bounds (ii + 8 <= rows, jj + 8 <= cols and
                            // jj - j0 + 8 <= tc.len() / rows).
                            unsafe {
                                x86_transpose::tile8(
                                    a.as_ptr().add(ii * cols + jj),
                                    cols,
                                    tc.as_mut_ptr().add((jj - j0) * rows + ii),
                                    rows,
                                    add,
                                )
                            };
                        }
                    }
                }
                for j in j0..j1 {
                    // rows i0..i8 of the columns j0..j8 were done by the tiles
                    let from = if j < j8 { i8 } else { i0 };
                    let row = &mut tc[(j - j0) * rows + from..(j - j0) * rows + i1];
                    for (o, i) in row.iter_mut().zip(from..i1) {
                        let v = a[i * cols + j];
                        if add {
                            *o += v;
                        } else {
                            *o = v;
                        }
                    }
                }
            }
        });
}

#[cfg(target_arch = "x86_64")]
mod x86_transpose {
    use std::arch::x86_64::*;

    /// One 8 × 8 tile: `t[r * ts + c] (+)= a[c * as_ + r]` for `r, c < 8`.
    ///
    /// # Safety
    /// AVX2 present; `a` readable at `c * as_ + 0..8` and `t` writable at `r * ts + 0..8` for
    /// every `r, c < 8`.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn tile8(a: *const f32, as_: usize, t: *mut f32, ts: usize, add: bool) {
        let r0 = _mm256_loadu_ps(a);
        let r1 = _mm256_loadu_ps(a.add(as_));
        let r2 = _mm256_loadu_ps(a.add(2 * as_));
        let r3 = _mm256_loadu_ps(a.add(3 * as_));
        let r4 = _mm256_loadu_ps(a.add(4 * as_));
        let r5 = _mm256_loadu_ps(a.add(5 * as_));
        let r6 = _mm256_loadu_ps(a.add(6 * as_));
        let r7 = _mm256_loadu_ps(a.add(7 * as_));
        let t0 = _mm256_unpacklo_ps(r0, r1);
        let t1 = _mm256_unpackhi_ps(r0, r1);
        let t2 = _mm256_unpacklo_ps(r2, r3);
        let t3 = _mm256_unpackhi_ps(r2, r3);
        let t4 = _mm256_unpacklo_ps(r4, r5);
        let t5 = _mm256_unpackhi_ps(r4, r5);
        let t6 = _mm256_unpacklo_ps(r6, r7);
        let t7 = _mm256_unpackhi_ps(r6, r7);
        let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        let out = [
            _mm256_permute2f128_ps::<0x20>(u0, u4),
            _mm256_permute2f128_ps::<0x20>(u1, u5),
            _mm256_permute2f128_ps::<0x20>(u2, u6),
            _mm256_permute2f128_ps::<0x20>(u3, u7),
            _mm256_permute2f128_ps::<0x31>(u0, u4),
            _mm256_permute2f128_ps::<0x31>(u1, u5),
            _mm256_permute2f128_ps::<0x31>(u2, u6),
            _mm256_permute2f128_ps::<0x31>(u3, u7),
        ];
        for (r, v) in out.into_iter().enumerate() {
            let p = t.add(r * ts);
            if add {
                _mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), v));
            } else {
                _mm256_storeu_ps(p, v);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Aggregation over a block.

/// Coefficients of a linear neighbourhood aggregation over a block:
/// `agg_i = gamma_i · h_i + alpha_i · Σ_{j ∈ N(i)} beta_j · h_j` for every destination `i`
/// (`beta`/`gamma` absent = 1 / 0).
#[derive(Clone, Debug)]
pub(crate) struct AggCoefs {
    pub alpha: Vec<f32>,
    pub beta: Option<Vec<f32>>,
    pub gamma: Option<Vec<f32>>,
}

impl AggCoefs {
    /// Mean over the sampled neighbours (`alpha_i = 1/s_i`, 0 when `s_i = 0`).
    pub(crate) fn mean(b: &BlockView) -> AggCoefs {
        let alpha = (0..b.num_dst)
            .map(|i| {
                let s = b.indptr[i + 1] - b.indptr[i];
                if s == 0 {
                    0.0
                } else {
                    1.0 / s as f32
                }
            })
            .collect();
        AggCoefs {
            alpha,
            beta: None,
            gamma: None,
        }
    }

    /// GCN normalisation with self loops (Kipf & Welling 2017, eq. 2), rescaled for sampled
    /// neighbourhoods: `w_ii = 1/(d_i+1)`, `w_ij = (d_i/s_i) / sqrt((d_i+1)(d_j+1))`
    /// with `d` the full in-degree (`src_degree`) and `s_i` the sampled count (0 when `s_i = 0`).
    pub(crate) fn gcn(b: &BlockView) -> AggCoefs {
        assert_eq!(b.src_degree.len(), b.num_src, "block src_degree length");
        let r: Vec<f32> = b
            .src_degree
            .iter()
            .map(|&d| 1.0 / ((d as f64 + 1.0).sqrt() as f32))
            .collect();
        let mut alpha = Vec::with_capacity(b.num_dst);
        let mut gamma = Vec::with_capacity(b.num_dst);
        for i in 0..b.num_dst {
            let d = b.src_degree[i] as f64;
            let s = (b.indptr[i + 1] - b.indptr[i]) as f64;
            gamma.push((1.0 / (d + 1.0)) as f32);
            alpha.push(if s == 0.0 {
                0.0
            } else {
                (d / s / (d + 1.0).sqrt()) as f32
            });
        }
        AggCoefs {
            alpha,
            beta: Some(r),
            gamma: Some(gamma),
        }
    }
}

/// `out[num_dst, dim] = aggregate(h[num_src, dim])`, parallel over destination rows.
///
/// With `map`, source `j` is row `map[j]` of `h` (`map.len() == num_src`, `h` any number of
/// rows): the gather of the input rows is fused into the aggregation, no gathered copy.
pub(crate) fn aggregate(
    b: &BlockView,
    c: &AggCoefs,
    h: &[f32],
    map: Option<&[u32]>,
    dim: usize,
    out: &mut [f32],
) {
    match map {
        None => assert_eq!(
            h.len(),
            b.num_src * dim,
            "aggregate: input rows != block num_src"
        ),
        Some(m) => assert_eq!(m.len(), b.num_src, "aggregate: row map != block num_src"),
    }
    assert_eq!(out.len(), b.num_dst * dim);
    assert_eq!(b.indptr.len(), b.num_dst + 1, "block indptr length");
    if dim == 0 {
        return;
    }
    let chunks = out.par_chunks_mut(dim).with_min_len(min_rows(dim * 16));
    match map {
        None => chunks
            .enumerate()
            .for_each(|(i, row)| simd_dispatch!(agg_row(row, i, b, c, h, |j| j, dim))),
        Some(m) => chunks
            .enumerate()
            .for_each(|(i, row)| simd_dispatch!(agg_row(row, i, b, c, h, |j| m[j] as usize, dim))),
    }
}

/// One destination row of [`aggregate`]; source `j` is row `at(j)` of `h`.
#[inline(always)]
fn agg_row(
    row: &mut [f32],
    i: usize,
    b: &BlockView,
    c: &AggCoefs,
    h: &[f32],
    at: impl Fn(usize) -> usize,
    dim: usize,
) {
    row.fill(0.0);
    let (s, e) = (b.indptr[i] as usize, b.indptr[i + 1] as usize);
    let nb = &b.indices[s..e];
    // Rows are gathered in random order: prefetch the row PREFETCH_AHEAD arcs ahead (possibly in
    // the next destination's list) so its cache lines are in flight while this one is added.
    let ahead = &b.indices[(s + PREFETCH_AHEAD).min(b.indices.len())..];
    match &c.beta {
        None => {
            for (k, &j) in nb.iter().enumerate() {
                if let Some(&n) = ahead.get(k) {
                    prefetch_row(h, at(n as usize) * dim, dim);
                }
                let r = at(j as usize);
                add_into(row, &h[r * dim..(r + 1) * dim]);
            }
        }
        Some(beta) => {
            for (k, &j) in nb.iter().enumerate() {
                if let Some(&n) = ahead.get(k) {
                    prefetch_row(h, at(n as usize) * dim, dim);
                }
                let j = j as usize;
                let r = at(j);
                axpy(row, beta[j], &h[r * dim..(r + 1) * dim]);
            }
        }
    }
    let a = c.alpha[i];
    if a != 1.0 {
        for v in row.iter_mut() {
            *v *= a;
        }
    }
    if let Some(g) = &c.gamma {
        let r = at(i);
        axpy(row, g[i], &h[r * dim..(r + 1) * dim]);
    }
}

/// The transposed block (CSC): for every source node, the destinations that read it.
/// Built once per backward of an aggregation so the scatter to sources becomes a gather,
/// parallel over source rows, without atomics.
pub(crate) struct Transposed {
    pub indptr: Vec<usize>,
    pub indices: Vec<u32>,
}

impl Transposed {
    pub(crate) fn new(b: &BlockView) -> Transposed {
        let nnz = b.indptr[b.num_dst] as usize;
        let mut indptr = vec![0usize; b.num_src + 1];
        for &j in &b.indices[..nnz] {
            indptr[j as usize + 1] += 1;
        }
        for j in 0..b.num_src {
            indptr[j + 1] += indptr[j];
        }
        let mut fill = indptr.clone();
        let mut indices = vec![0u32; nnz];
        for i in 0..b.num_dst {
            for &j in &b.indices[b.indptr[i] as usize..b.indptr[i + 1] as usize] {
                let f = &mut fill[j as usize];
                indices[*f] = i as u32;
                *f += 1;
            }
        }
        Transposed { indptr, indices }
    }
}

/// Backward of [`aggregate`]: `dh[num_src, dim] (+)= aggregateᵀ(d_out[num_dst, dim])`, i.e.
/// `dh_j = beta_j Σ_{i: j ∈ N(i)} alpha_i d_i + [j < num_dst] gamma_j d_j`; parallel over
/// source rows through the transposed block.
pub(crate) fn aggregate_backward(
    b: &BlockView,
    t: &Transposed,
    c: &AggCoefs,
    d_out: &[f32],
    dim: usize,
    dh: &mut [f32],
    acc: bool,
) {
    assert_eq!(d_out.len(), b.num_dst * dim);
    assert_eq!(dh.len(), b.num_src * dim);
    if dim == 0 {
        return;
    }
    dh.par_chunks_mut(dim)
        .with_min_len(min_rows(dim * 16))
        .enumerate()
        .for_each_init(
            || vec![0.0f32; dim],
            |tmp, (j, row)| simd_dispatch!(agg_t_row(row, tmp, j, b, t, c, d_out, dim, acc)),
        );
}

/// One source row of [`aggregate_backward`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn agg_t_row(
    row: &mut [f32],
    tmp: &mut [f32],
    j: usize,
    b: &BlockView,
    t: &Transposed,
    c: &AggCoefs,
    d_out: &[f32],
    dim: usize,
    acc: bool,
) {
    if !acc {
        row.fill(0.0);
    }
    let ts = &t.indices[t.indptr[j]..t.indptr[j + 1]];
    let ahead = &t.indices[(t.indptr[j] + PREFETCH_AHEAD).min(t.indices.len())..];
    match &c.beta {
        None => {
            for (k, &i) in ts.iter().enumerate() {
                if let Some(&n) = ahead.get(k) {
                    prefetch_row(d_out, n as usize * dim, dim);
                }
                let i = i as usize;
                axpy(row, c.alpha[i], &d_out[i * dim..(i + 1) * dim]);
            }
        }
        Some(beta) => {
            if !ts.is_empty() {
                tmp.fill(0.0);
                for (k, &i) in ts.iter().enumerate() {
                    if let Some(&n) = ahead.get(k) {
                        prefetch_row(d_out, n as usize * dim, dim);
                    }
                    let i = i as usize;
                    axpy(tmp, c.alpha[i], &d_out[i * dim..(i + 1) * dim]);
                }
                axpy(row, beta[j], tmp);
            }
        }
    }
    if let Some(g) = &c.gamma {
        if j < b.num_dst {
            axpy(row, g[j], &d_out[j * dim..(j + 1) * dim]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// LayerNorm, PReLU, dropout.

/// LayerNorm epsilon (PyTorch default).
pub(crate) const LN_EPS: f32 = 1e-5;

/// Normalise every row of `h: [rows, cols]` in place to `xhat = (h - mean) / sqrt(var + eps)`
/// (biased variance, as PyTorch's LayerNorm); returns `rstd = 1/sqrt(var + eps)` per row.
#[cfg(test)]
pub(crate) fn layer_norm_forward_inplace(h: &mut [f32], cols: usize) -> Vec<f32> {
    let rows = h.len() / cols.max(1);
    let mut rstd = vec![0.0f32; rows];
    if cols == 0 {
        return rstd;
    }
    h.par_chunks_mut(cols)
        .zip(rstd.par_iter_mut())
        .with_min_len(min_rows(cols))
        .for_each(|(row, rs)| {
            let n = cols as f32;
            let mean = sum_lanes(row) / n;
            let var = sq_dev_lanes(row, mean) / n;
            let r = 1.0 / (var + LN_EPS).sqrt();
            for v in row.iter_mut() {
                *v = (*v - mean) * r;
            }
            *rs = r;
        });
    rstd
}

/// Backward of [`layer_norm_forward_inplace`]: `d` holds `dL/dxhat` on entry and `dL/dh` on
/// exit: `dh = rstd · (g − mean(g) − xhat · mean(g ⊙ xhat))`.
#[cfg(test)]
pub(crate) fn layer_norm_backward_inplace(xhat: &[f32], rstd: &[f32], d: &mut [f32], cols: usize) {
    assert_eq!(xhat.len(), d.len());
    if cols == 0 {
        return;
    }
    d.par_chunks_mut(cols)
        .zip(xhat.par_chunks(cols))
        .zip(rstd.par_iter())
        .with_min_len(min_rows(cols))
        .for_each(|((g, x), &r)| {
            let n = cols as f32;
            let mg = sum_lanes(g) / n;
            let mgx = dot_lanes(g, x) / n;
            for (g, x) in g.iter_mut().zip(x) {
                *g = r * (*g - mg - x * mgx);
            }
        });
}

/// `a = prelu(xhat ⊙ gamma + beta)` row-wise (LayerNorm's affine part fused with PReLU,
/// `prelu(y) = y if y > 0 else slope · y`).
#[cfg(test)]
pub(crate) fn affine_prelu_forward(
    xhat: &[f32],
    gamma: &[f32],
    beta: &[f32],
    slope: f32,
) -> Vec<f32> {
    let mut a = vec![0.0f32; xhat.len()];
    affine_prelu_forward_into(xhat, gamma, beta, slope, &mut a);
    a
}

/// [`affine_prelu_forward`] into `a` (every element overwritten).
#[cfg(test)]
pub(crate) fn affine_prelu_forward_into(
    xhat: &[f32],
    gamma: &[f32],
    beta: &[f32],
    slope: f32,
    a: &mut [f32],
) {
    let cols = gamma.len();
    assert_eq!(a.len(), xhat.len());
    if cols == 0 {
        return;
    }
    a.par_chunks_mut(cols)
        .zip(xhat.par_chunks(cols))
        .with_min_len(min_rows(cols))
        .for_each(|(a, x)| {
            for (((a, &x), &g), &b) in a.iter_mut().zip(x).zip(gamma).zip(beta) {
                let y = x * g + b;
                *a = prelu1(y, slope);
            }
        });
}

/// Backward of [`affine_prelu_forward`]: `d` holds `dL/da` on entry and `dL/dxhat` on exit;
/// accumulates `dgamma`, `dbeta` and returns `dL/dslope`. One pass, parallel over fixed row
/// chunks, per-chunk accumulators summed in chunk order.
#[cfg(test)]
pub(crate) fn affine_prelu_backward(
    xhat: &[f32],
    gamma: &[f32],
    beta: &[f32],
    slope: f32,
    d: &mut [f32],
    dgamma: &mut [f32],
    dbeta: &mut [f32],
) -> f32 {
    let cols = gamma.len();
    if cols == 0 {
        return 0.0;
    }
    let chunk = 4 * min_rows(cols) * cols;
    // acc = [dgamma | dbeta | dslope per column]
    let parts: Vec<Vec<f32>> = d
        .par_chunks_mut(chunk)
        .zip(xhat.par_chunks(chunk))
        .map(|(d, xh)| {
            let mut acc = vec![0.0f32; 3 * cols];
            let (ag, rest) = acc.split_at_mut(cols);
            let (ab, asl) = rest.split_at_mut(cols);
            for (g, x) in d.chunks_exact_mut(cols).zip(xh.chunks_exact(cols)) {
                for (((((g, &x), &ga), &be), ag), (ab, asl)) in g
                    .iter_mut()
                    .zip(x)
                    .zip(gamma)
                    .zip(beta)
                    .zip(ag.iter_mut())
                    .zip(ab.iter_mut().zip(asl.iter_mut()))
                {
                    let y = x * ga + be;
                    let dy = *g * prelu_grad1(y, slope);
                    *asl += *g * y.min(0.0);
                    *ag += dy * x;
                    *ab += dy;
                    *g = dy * ga;
                }
            }
            acc
        })
        .collect();
    let mut dslope = 0.0f32;
    for p in &parts {
        add_into(dgamma, &p[..cols]);
        add_into(dbeta, &p[cols..2 * cols]);
        dslope += p[2 * cols..].iter().sum::<f32>();
    }
    dslope
}

/// The post-processing of a hidden layer's conv output in one pass over its rows (each row
/// stays in L1 between the steps): `y = h + bias`; with LayerNorm (`ln = Some((gamma, beta))`)
/// `h ← xhat = (y − mean) · rstd` and `a = prelu(xhat ⊙ gamma + beta)`; without, `h ← y` and
/// `a = prelu(y)`. Returns `rstd` per row (empty without LayerNorm). `h`, `a`: `[rows, cols]`,
/// `cols = bias.len()`; every element of `a` is overwritten.
///
/// Same values as `add_bias` + [`layer_norm_forward_inplace`] + [`affine_prelu_forward_into`]
/// (PyTorch `LayerNorm` + `PReLU`, eps [`LN_EPS`]).
pub(crate) fn post_forward(
    h: &mut [f32],
    bias: &[f32],
    ln: Option<(&[f32], &[f32])>,
    slope: f32,
    a: &mut [f32],
) -> Vec<f32> {
    let cols = bias.len();
    assert_eq!(a.len(), h.len());
    if cols == 0 {
        return Vec::new();
    }
    let rows = h.len() / cols;
    let mut rstd = vec![0.0f32; if ln.is_some() { rows } else { 0 }];
    match ln {
        Some((gamma, beta)) => {
            assert_eq!((gamma.len(), beta.len()), (cols, cols));
            h.par_chunks_mut(cols)
                .zip(a.par_chunks_mut(cols))
                .zip(rstd.par_iter_mut())
                .with_min_len(min_rows(cols))
                .for_each(|((h, a), r)| {
                    *r = simd_dispatch!(post_ln_row(h, a, bias, gamma, beta, slope));
                });
        }
        None => {
            h.par_chunks_mut(cols)
                .zip(a.par_chunks_mut(cols))
                .with_min_len(min_rows(cols))
                .for_each(|(h, a)| simd_dispatch!(post_plain_row(h, a, bias, slope)));
        }
    }
    rstd
}

#[inline(always)]
fn post_ln_row(
    h: &mut [f32],
    a: &mut [f32],
    bias: &[f32],
    gamma: &[f32],
    beta: &[f32],
    slope: f32,
) -> f32 {
    add_into(h, bias);
    let n = h.len() as f32;
    let mean = sum_lanes(h) / n;
    let var = sq_dev_lanes(h, mean) / n;
    let r = 1.0 / (var + LN_EPS).sqrt();
    for (((h, a), &g), &b) in h.iter_mut().zip(a).zip(gamma).zip(beta) {
        let x = (*h - mean) * r;
        *h = x;
        *a = prelu1(x * g + b, slope);
    }
    r
}

#[inline(always)]
fn post_plain_row(h: &mut [f32], a: &mut [f32], bias: &[f32], slope: f32) {
    for ((h, a), &b) in h.iter_mut().zip(a).zip(bias) {
        let y = *h + b;
        *h = y;
        *a = prelu1(y, slope);
    }
}

/// Backward of [`post_forward`] in one pass: `d` holds `dL/da` on entry and `dL/dh` (the
/// gradient of the conv output before the bias) on exit. Accumulates `dbias`, and with
/// LayerNorm `dgamma`, `dbeta`; returns `dL/dslope`. `xhat` is what `post_forward` left in `h`.
/// Parallel over fixed row chunks, per-chunk accumulators summed in chunk order (results do
/// not depend on the number of threads).
#[allow(clippy::too_many_arguments)]
pub(crate) fn post_backward(
    xhat: &[f32],
    rstd: &[f32],
    ln: Option<(&[f32], &[f32])>,
    slope: f32,
    d: &mut [f32],
    dgamma: &mut [f32],
    dbeta: &mut [f32],
    dbias: &mut [f32],
) -> f32 {
    let cols = dbias.len();
    assert_eq!(xhat.len(), d.len());
    if cols == 0 {
        return 0.0;
    }
    let chunk_rows = 4 * min_rows(cols);
    let chunk = chunk_rows * cols;
    // acc = [dgamma | dbeta | dslope per column | dbias]
    let parts: Vec<Vec<f32>> = d
        .par_chunks_mut(chunk)
        .zip(xhat.par_chunks(chunk))
        .enumerate()
        .map(|(c, (d, xh))| {
            let mut acc = vec![0.0f32; 4 * cols];
            let r0 = c * chunk_rows;
            for (i, (g, x)) in d
                .chunks_exact_mut(cols)
                .zip(xh.chunks_exact(cols))
                .enumerate()
            {
                match ln {
                    Some((gamma, beta)) => simd_dispatch!(post_ln_back_row(
                        g,
                        x,
                        rstd[r0 + i],
                        gamma,
                        beta,
                        slope,
                        &mut acc
                    )),
                    None => simd_dispatch!(post_plain_back_row(g, x, slope, &mut acc)),
                }
            }
            acc
        })
        .collect();
    let mut dslope = 0.0f32;
    for p in &parts {
        if ln.is_some() {
            add_into(dgamma, &p[..cols]);
            add_into(dbeta, &p[cols..2 * cols]);
        }
        dslope += p[2 * cols..3 * cols].iter().sum::<f32>();
        add_into(dbias, &p[3 * cols..]);
    }
    dslope
}

/// One row of [`post_backward`] with LayerNorm; `acc = [dgamma | dbeta | dslope | dbias]`.
#[inline(always)]
fn post_ln_back_row(
    g: &mut [f32],
    x: &[f32],
    r: f32,
    gamma: &[f32],
    beta: &[f32],
    slope: f32,
    acc: &mut [f32],
) {
    let cols = g.len();
    let (ag, rest) = acc.split_at_mut(cols);
    let (ab, rest) = rest.split_at_mut(cols);
    let (asl, abias) = rest.split_at_mut(cols);
    // affine + PReLU backward: g <- dL/dxhat
    for (((((g, &x), &ga), &be), ag), (ab, asl)) in g
        .iter_mut()
        .zip(x)
        .zip(gamma)
        .zip(beta)
        .zip(ag.iter_mut())
        .zip(ab.iter_mut().zip(asl.iter_mut()))
    {
        let y = x * ga + be;
        let dy = *g * prelu_grad1(y, slope);
        *asl += *g * y.min(0.0);
        *ag += dy * x;
        *ab += dy;
        *g = dy * ga;
    }
    // LayerNorm backward: dh = rstd · (g − mean(g) − xhat · mean(g ⊙ xhat))
    let n = cols as f32;
    let (mg, mgx) = (sum_lanes(g) / n, dot_lanes(g, x) / n);
    for ((g, &x), ab) in g.iter_mut().zip(x).zip(abias.iter_mut()) {
        let v = r * (*g - mg - x * mgx);
        *g = v;
        *ab += v;
    }
}

/// One row of [`post_backward`] without LayerNorm (`x` = pre-activation `y`).
#[inline(always)]
fn post_plain_back_row(g: &mut [f32], x: &[f32], slope: f32, acc: &mut [f32]) {
    let cols = g.len();
    let (asl, abias) = acc[2 * cols..].split_at_mut(cols);
    for (((g, &y), asl), ab) in g
        .iter_mut()
        .zip(x)
        .zip(asl.iter_mut())
        .zip(abias.iter_mut())
    {
        *asl += *g * y.min(0.0);
        let v = *g * prelu_grad1(y, slope);
        *g = v;
        *ab += v;
    }
}

/// Branch-free PReLU of one value (`y if y > 0 else slope · y`); vectorizes, and random signs
/// cost no branch mispredictions.
#[inline(always)]
pub(crate) fn prelu1(y: f32, slope: f32) -> f32 {
    y.max(0.0) + slope * y.min(0.0)
}

/// Branch-free PReLU derivative w.r.t. its input: 1 for `y > 0`, else `slope`.
#[inline(always)]
pub(crate) fn prelu_grad1(y: f32, slope: f32) -> f32 {
    let pos = (y > 0.0) as u32 as f32;
    slope + (1.0 - slope) * pos
}

/// PReLU with one shared slope: `a = x if x > 0 else slope · x`.
#[cfg(test)]
pub(crate) fn prelu_forward(x: &[f32], slope: f32) -> Vec<f32> {
    let mut a = x.to_vec();
    a.par_chunks_mut(16384).for_each(|c| {
        for v in c {
            *v = prelu1(*v, slope);
        }
    });
    a
}

/// Backward of [`prelu_forward`]: `d` holds `dL/da` on entry and `dL/dx` on exit; returns
/// `dL/dslope = Σ_{x ≤ 0} dL/da · x`.
#[cfg(test)]
pub(crate) fn prelu_backward(x: &[f32], slope: f32, d: &mut [f32]) -> f32 {
    const CH: usize = 16384;
    let dslope = chunked_reduce(x.len(), 1, CH, |r, acc| {
        for i in r {
            acc[0] += d[i] * x[i].min(0.0);
        }
    })[0];
    d.par_chunks_mut(CH)
        .zip(x.par_chunks(CH))
        .for_each(|(d, x)| {
            for (d, x) in d.iter_mut().zip(x) {
                *d *= prelu_grad1(*x, slope);
            }
        });
    dslope
}

/// Inverted-dropout keep mask (1 = keep) for `len` elements with drop probability `p`.
/// One seed is taken from `rng`; each fixed chunk of 16K elements then draws from its own
/// SplitMix64 stream (`tma_graph::seed::chunk_splitmix(seed, chunk)`), in parallel, so the
/// mask depends on `rng` only, not on the thread count. Each 64-bit draw gives four elements a
/// 16-bit uniform `r`; an element is dropped when `r < round(p * 65536)`, so the drop
/// probability is `p` to within 2^-17 (exact for p = 0.5). A ChaCha8 `f32` per element (the
/// first version) made dropout 0.5 cost a third of a node-classification step on 2 cores
/// (docs/decisions/0016-node-dropout.md).
pub(crate) fn dropout_mask(rng: &mut ChaCha8Rng, len: usize, p: f32) -> Vec<u8> {
    const CH: usize = 16384;
    let seed: u64 = rng.random();
    let t = (f64::from(p.clamp(0.0, 1.0)) * 65536.0).round() as u64;
    let mut mask = vec![0u8; len];
    mask.par_chunks_mut(CH).enumerate().for_each(|(c, m)| {
        let mut g = tma_graph::seed::chunk_splitmix(seed, c as u64);
        for quad in m.chunks_mut(4) {
            let r = g.next_u64();
            for (i, v) in quad.iter_mut().enumerate() {
                *v = (((r >> (16 * i)) & 0xFFFF) >= t) as u8;
            }
        }
    });
    mask
}

/// `x *= mask / (1 - p)` (forward and backward of inverted dropout alike; `p >= 1` zeroes).
/// `mask` holds 0 or 1. A product, not a branch: a branch on a random mask mispredicted half
/// the time and kept the loop scalar (a quarter of an amazon_photo node step's CPU time at
/// p = 0.5; docs/decisions/0016-node-dropout.md).
pub(crate) fn dropout_apply(x: &mut [f32], mask: &[u8], p: f32) {
    assert_eq!(x.len(), mask.len());
    let scale = if p >= 1.0 { 0.0 } else { 1.0 / (1.0 - p) };
    x.par_chunks_mut(16384)
        .zip(mask.par_chunks(16384))
        .for_each(|(x, m)| {
            for (x, &m) in x.iter_mut().zip(m) {
                *x *= f32::from(m) * scale;
            }
        });
}

// ---------------------------------------------------------------------------------------------
// Buffer reuse.

/// A small pool of large `f32` buffers reused across iterations. Fresh large allocations are
/// mmap'd by the allocator and every first touch of a page faults (measured: ~20% of a
/// full-graph iteration's CPU time); recycling activations and gradients avoids that.
/// Holds at most [`BufferPool::MAX`] buffers per sharer ([`BufferPool::shared`]); buffers under
/// [`BufferPool::MIN_LEN`] elements are not pooled.
#[derive(Default)]
pub(crate) struct BufferPool {
    bufs: std::sync::Arc<std::sync::Mutex<Vec<Vec<f32>>>>,
    /// Models that take from this pool at the same time (0 and 1: one).
    sharers: usize,
}

impl BufferPool {
    pub(crate) const MAX: usize = 32;
    pub(crate) const MIN_LEN: usize = 1 << 16;

    /// A handle on the same buffers for one more user, the pool now holding up to
    /// `sharers * MAX` buffers (about one iteration's activations for each of `sharers`
    /// iterations running at once).
    pub(crate) fn shared(&self, sharers: usize) -> BufferPool {
        BufferPool {
            bufs: self.bufs.clone(),
            sharers,
        }
    }

    fn max_buffers(&self) -> usize {
        Self::MAX * self.sharers.max(1)
    }

    /// A buffer of `len` elements with **unspecified contents** (callers overwrite it).
    pub(crate) fn take(&self, len: usize) -> Vec<f32> {
        if len >= Self::MIN_LEN {
            let mut bufs = self.bufs.lock().unwrap_or_else(|e| e.into_inner());
            // a buffer of about this size (capacity from `len` to 1.5 `len`: a large buffer
            // used for a small role would have to be grown again, zero-filled, by the next
            // large role), the smallest already `len` long (nothing to fill), else the longest
            // (the least to fill); none: a new one, so that every role settles on its own
            let band = |b: &Vec<f32>| b.capacity() >= len && b.capacity() <= len + len / 2;
            let best = bufs
                .iter()
                .enumerate()
                .filter(|(_, b)| band(b) && b.len() >= len)
                .min_by_key(|(_, b)| b.capacity())
                .or_else(|| {
                    bufs.iter()
                        .enumerate()
                        .filter(|(_, b)| band(b))
                        .max_by_key(|(_, b)| b.len())
                })
                .map(|(i, _)| i);
            if let Some(i) = best {
                let mut v = bufs.swap_remove(i);
                drop(bufs);
                if v.len() >= len {
                    v.truncate(len);
                } else {
                    v.resize(len, 0.0);
                }
                return v;
            }
            // A miss: allocate with headroom, as batches vary a little in size from step to
            // step and the next step's request for this role may be slightly larger.
            let mut v = Vec::with_capacity(len + len / 16);
            v.resize(len, 0.0);
            return v;
        }
        vec![0.0; len]
    }

    /// A zero-filled buffer of `len` elements.
    pub(crate) fn take_zeroed(&self, len: usize) -> Vec<f32> {
        let mut v = self.take(len);
        v.fill(0.0);
        v
    }

    /// Return a buffer for reuse.
    pub(crate) fn give(&self, v: Vec<f32>) {
        if v.capacity() < Self::MIN_LEN {
            return;
        }
        let mut bufs = self.bufs.lock().unwrap_or_else(|e| e.into_inner());
        bufs.push(v);
        if bufs.len() > self.max_buffers() {
            let (i, _) = bufs
                .iter()
                .enumerate()
                .min_by_key(|(_, b)| b.capacity())
                .unwrap();
            bufs.swap_remove(i);
        }
    }

    /// Free every pooled buffer.
    pub(crate) fn clear(&self) {
        self.bufs.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Bytes held.
    pub(crate) fn held_bytes(&self) -> usize {
        let bufs = self.bufs.lock().unwrap_or_else(|e| e.into_inner());
        bufs.iter().map(|b| b.capacity() * 4).sum()
    }
}

impl Clone for BufferPool {
    /// A clone starts with an empty pool.
    fn clone(&self) -> Self {
        BufferPool::default()
    }
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BufferPool({} bytes)", self.held_bytes())
    }
}
