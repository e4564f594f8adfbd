//! The dense matrix products: through the `gemm` crate, or as bf16 products (AMX tiles or
//! AVX512_BF16 dot products, `bf16.rs`) inside a `PrecisionScope` that asks for them.

use gemm::Parallelism;

/// Parallelism for a product of `m*n*k` multiply-adds, sized from the **current** rayon pool
/// (trainers run in per-trainer pools).
fn parallelism(m: usize, n: usize, k: usize) -> Parallelism {
    let threads = rayon::current_num_threads();
    if threads > 1 && (m as u128) * (n as u128) * (k as u128) >= (1 << 20) {
        Parallelism::Rayon(threads)
    } else {
        Parallelism::None
    }
}

fn check_extent(len: usize, rows: usize, cols: usize, rs: usize, cs: usize, what: &str) {
    if rows == 0 || cols == 0 {
        return;
    }
    let last = (rows - 1) * rs + (cols - 1) * cs;
    assert!(
        last < len,
        "{what}: buffer of {len} too small for [{rows}, {cols}]"
    );
}

/// `c[m,n] (+)= lhs[m,k] * rhs[k,n]`, each operand given by (row stride, col stride) in
/// elements. `accumulate == false` overwrites `c`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_strided(
    m: usize,
    n: usize,
    k: usize,
    c: &mut [f32],
    c_rs: usize,
    lhs: &[f32],
    lhs_rs: usize,
    lhs_cs: usize,
    rhs: &[f32],
    rhs_rs: usize,
    rhs_cs: usize,
    accumulate: bool,
    allow_par: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    check_extent(c.len(), m, n, c_rs, 1, "gemm dst");
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                c[i * c_rs..i * c_rs + n].fill(0.0);
            }
        }
        return;
    }
    check_extent(lhs.len(), m, k, lhs_rs, lhs_cs, "gemm lhs");
    check_extent(rhs.len(), k, n, rhs_rs, rhs_cs, "gemm rhs");
    // SAFETY: extents checked above; dst does not alias lhs/rhs (distinct borrows).
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            c_rs as isize,
            accumulate,
            lhs.as_ptr(),
            lhs_cs as isize,
            lhs_rs as isize,
            rhs.as_ptr(),
            rhs_cs as isize,
            rhs_rs as isize,
            1.0f32,
            1.0f32,
            false,
            false,
            false,
            if allow_par {
                parallelism(m, n, k)
            } else {
                Parallelism::None
            },
        );
    }
}

/// `c[m,n] (+)= a[m,k] · b[n,k]ᵀ` (a linear layer's forward `X Wᵀ`, `W: [out, in]`). This and
/// [`matmul_a_b`], [`matmul_at_b`] run as bf16 tile products inside a
/// `bf16::PrecisionScope` (`--matmul-precision medium`).
pub(crate) fn matmul_a_bt(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    acc: bool,
) {
    if let Some(backend) =
        crate::bf16::scoped().filter(|&b| crate::bf16::tiles_pay(b, m, m * n * k))
    {
        return crate::bf16::gemm_a_bt(backend, m, n, k, a, b, c, acc);
    }
    gemm_strided(m, n, k, c, n, a, k, 1, b, 1, k, acc, true);
}

/// [`matmul_a_bt`] on the calling thread only (for use inside an already parallel loop).
pub(crate) fn matmul_a_bt_serial(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    acc: bool,
) {
    gemm_strided(m, n, k, c, n, a, k, 1, b, 1, k, acc, false);
}

/// `c[m,n] (+)= a[m,k] · b[k,n]` (input gradient `dY W`).
pub(crate) fn matmul_a_b(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    acc: bool,
) {
    if let Some(backend) =
        crate::bf16::scoped().filter(|&b| crate::bf16::tiles_pay(b, m, m * n * k))
    {
        return crate::bf16::gemm_a_b(backend, m, n, k, a, b, c, acc);
    }
    gemm_strided(m, n, k, c, n, a, k, 1, b, n, 1, acc, true);
}

/// Rows of the batch dimension per partial product in [`matmul_at_b`] (at least).
const AT_B_CHUNK: usize = 2048;
/// Most partial products in [`matmul_at_b`] (bounds their memory: `64 · m · n` floats).
const AT_B_MAX_PARTS: usize = 64;

/// `c[m,n] (+)= a[k,m]ᵀ · b[k,n]` (weight gradient `dYᵀ X`; `k` is the batch dimension).
///
/// With a long batch dimension the product is split along `k` into chunks whose size depends
/// on `k` only (at least [`AT_B_CHUNK`] rows, at most [`AT_B_MAX_PARTS`] chunks); each chunk is
/// one single-threaded `gemm`, the chunks run in parallel and their partial products are
/// summed in chunk order, so the result does not depend on the number of threads. Measured
/// (2 cores, AVX-512): `[256, 200k]·[200k, 128]` 316 -> 360-385 GFLOP/s, `[40, 200k]·[200k, 256]`
/// 163 -> 285-292 GFLOP/s over one `gemm` call parallelized over `m` and `n` (bench: `tma bench
/// --only dense`). Short batches use that one parallel call.
pub(crate) fn matmul_at_b(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    acc: bool,
) {
    use rayon::prelude::*;
    if let Some(backend) =
        crate::bf16::scoped().filter(|&b| crate::bf16::tiles_pay(b, k, m * n * k))
    {
        return crate::bf16::gemm_at_b(backend, m, n, k, a, b, c, acc);
    }
    let chunk = AT_B_CHUNK.max(k.div_ceil(AT_B_MAX_PARTS));
    if k < 2 * chunk || m == 0 || n == 0 {
        gemm_strided(m, n, k, c, n, a, 1, m, b, n, 1, acc, true);
        return;
    }
    check_extent(a.len(), m, k, 1, m, "gemm lhs");
    check_extent(b.len(), k, n, n, 1, "gemm rhs");
    let parts: Vec<Vec<f32>> = (0..k.div_ceil(chunk))
        .into_par_iter()
        .map(|ci| {
            let (r0, r1) = (ci * chunk, ((ci + 1) * chunk).min(k));
            let mut part = vec![0.0f32; m * n];
            gemm_strided(
                m,
                n,
                r1 - r0,
                &mut part,
                n,
                &a[r0 * m..r1 * m],
                1,
                m,
                &b[r0 * n..r1 * n],
                n,
                1,
                false,
                false,
            );
            part
        })
        .collect();
    if !acc {
        c[..m * n].fill(0.0);
    }
    for part in &parts {
        for (c, p) in c.iter_mut().zip(part) {
            *c += p;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(
        m: usize,
        n: usize,
        k: usize,
        a: impl Fn(usize, usize) -> f32,
        b: impl Fn(usize, usize) -> f32,
    ) -> Vec<f32> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|t| a(i, t) * b(t, j)).sum();
            }
        }
        c
    }

    /// The chunked weight-gradient product equals one `gemm` (to rounding), accumulates, and
    /// gives the same bytes with 1, 2 and 3 threads.
    #[test]
    fn chunked_at_b_matches_and_is_thread_independent() {
        let (m, n, k) = (7, 5, 2 * AT_B_CHUNK + 123);
        let a: Vec<f32> = (0..k * m)
            .map(|i| ((i * 7919) % 113) as f32 / 113.0 - 0.5)
            .collect();
        let b: Vec<f32> = (0..k * n)
            .map(|i| ((i * 104729) % 97) as f32 / 97.0 - 0.5)
            .collect();
        let mut one = vec![0.0; m * n];
        gemm_strided(m, n, k, &mut one, n, &a, 1, m, &b, n, 1, false, false);
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            let mut c = vec![1.0f32; m * n];
            pool.install(|| matmul_at_b(m, n, k, &a, &b, &mut c, true));
            c
        };
        let c2 = run(2);
        for (x, y) in c2.iter().zip(&one) {
            assert!((x - 1.0 - y).abs() < 1e-3, "{x} vs 1 + {y}");
        }
        assert_eq!(run(3), c2);
        assert_eq!(run(1), c2);
    }

    #[test]
    fn products_match_naive() {
        let (m, n, k) = (5, 3, 4);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let bt: Vec<f32> = (0..n * k).map(|i| (i as f32 * 0.11).cos()).collect(); // [n,k]
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.23).cos()).collect(); // [k,n]
        let at: Vec<f32> = (0..k * m).map(|i| (i as f32 * 0.19).sin()).collect(); // [k,m]
        let mut c = vec![1.0; m * n];
        matmul_a_bt(m, n, k, &a, &bt, &mut c, false);
        let e = naive(m, n, k, |i, t| a[i * k + t], |t, j| bt[j * k + t]);
        for (x, y) in c.iter().zip(&e) {
            assert!((x - y).abs() < 1e-5);
        }
        matmul_a_b(m, n, k, &a, &b, &mut c, true);
        let e2 = naive(m, n, k, |i, t| a[i * k + t], |t, j| b[t * n + j]);
        for ((x, y), z) in c.iter().zip(&e).zip(&e2) {
            assert!((x - y - z).abs() < 1e-5);
        }
        matmul_at_b(m, n, k, &at, &b, &mut c, false);
        let e3 = naive(m, n, k, |i, t| at[t * m + i], |t, j| b[t * n + j]);
        for (x, y) in c.iter().zip(&e3) {
            assert!((x - y).abs() < 1e-5);
        }
    }
}
