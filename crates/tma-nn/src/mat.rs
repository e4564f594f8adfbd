//! Dense row-major matrices and the dense matrix products (all through the `gemm` crate).

use gemm::Parallelism;

/// A dense row-major `f32` matrix, `[rows, cols]`, `data.len() == rows * cols`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Mat {
    pub rows: usize,
    pub cols: usize,
    pub data: Vec<f32>,
}

impl Mat {
    /// A `[rows, cols]` matrix of zeros.
    pub fn zeros(rows: usize, cols: usize) -> Mat {
        Mat {
            rows,
            cols,
            data: vec![0.0; rows * cols],
        }
    }

    /// Wrap `data` (row-major).
    ///
    /// # Panics
    /// If `data.len() != rows * cols`.
    pub fn from_vec(rows: usize, cols: usize, data: Vec<f32>) -> Mat {
        assert_eq!(data.len(), rows * cols, "Mat::from_vec: data length");
        Mat { rows, cols, data }
    }

    /// Row `i`.
    #[inline]
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }

    /// Row `i`, mutable.
    #[inline]
    pub fn row_mut(&mut self, i: usize) -> &mut [f32] {
        &mut self.data[i * self.cols..(i + 1) * self.cols]
    }
}

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
fn gemm_strided(
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

/// `c[m,n] (+)= a[m,k] · b[n,k]ᵀ` (a linear layer's forward `X Wᵀ`, `W: [out, in]`).
pub(crate) fn matmul_a_bt(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    acc: bool,
) {
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
    gemm_strided(m, n, k, c, n, a, k, 1, b, n, 1, acc, true);
}

/// `c[m,n] (+)= a[k,m]ᵀ · b[k,n]` (weight gradient `dYᵀ X`; `k` is the batch dimension).
pub(crate) fn matmul_at_b(
    m: usize,
    n: usize,
    k: usize,
    a: &[f32],
    b: &[f32],
    c: &mut [f32],
    acc: bool,
) {
    gemm_strided(m, n, k, c, n, a, 1, m, b, n, 1, acc, true);
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
