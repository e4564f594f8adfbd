//! A layer's input ([`InputRef`]): a dense matrix, CSR sparse features, or rows of a larger
//! dense matrix selected by id, with the products a layer needs of it (dense through
//! `matmul.rs`; sparse × dense row by row, never densifying the input).

use crate::kernels::{axpy, min_rows, prefetch_row, transpose_into, BufferPool, PREFETCH_AHEAD};
use crate::matmul::{matmul_a_bt, matmul_at_b};
use rayon::prelude::*;
use tma_graph::Features;

/// A layer input, `[rows, dim]`: a dense row-major matrix, CSR sparse features, or rows of a
/// larger dense matrix selected by id (`Indexed`: row `j` is `all[map[j]]`; the first
/// `dst.len() / dim` rows are also given gathered in `dst`, for dense products).
#[derive(Clone, Copy, Debug)]
pub(crate) enum InputRef<'a> {
    Dense {
        rows: usize,
        dim: usize,
        data: &'a [f32],
    },
    Indexed {
        dim: usize,
        all: &'a [f32],
        map: &'a [u32],
        dst: &'a [f32],
    },
    Sparse {
        rows: usize,
        dim: usize,
        indptr: &'a [u64],
        indices: &'a [u32],
        data: &'a [f32],
    },
}

impl<'a> InputRef<'a> {
    pub(crate) fn from_features(x: &'a Features) -> InputRef<'a> {
        match x {
            Features::Dense {
                num_nodes,
                dim,
                data,
            } => {
                assert_eq!(data.len(), num_nodes * dim, "dense features: data length");
                InputRef::Dense {
                    rows: *num_nodes,
                    dim: *dim,
                    data,
                }
            }
            Features::Sparse {
                num_nodes,
                dim,
                indptr,
                indices,
                data,
            } => {
                assert_eq!(
                    indptr.len(),
                    num_nodes + 1,
                    "sparse features: indptr length"
                );
                InputRef::Sparse {
                    rows: *num_nodes,
                    dim: *dim,
                    indptr,
                    indices,
                    data,
                }
            }
        }
    }

    pub(crate) fn from_mat(m: &'a crate::Mat) -> InputRef<'a> {
        InputRef::Dense {
            rows: m.rows,
            dim: m.cols,
            data: &m.data,
        }
    }

    pub(crate) fn rows(&self) -> usize {
        match self {
            InputRef::Dense { rows, .. } | InputRef::Sparse { rows, .. } => *rows,
            InputRef::Indexed { map, .. } => map.len(),
        }
    }

    pub(crate) fn dim(&self) -> usize {
        match self {
            InputRef::Dense { dim, .. }
            | InputRef::Sparse { dim, .. }
            | InputRef::Indexed { dim, .. } => *dim,
        }
    }

    pub(crate) fn is_sparse(&self) -> bool {
        matches!(self, InputRef::Sparse { .. })
    }

    /// The first `n` rows, dense and contiguous. Panics on sparse input, and on indexed input
    /// beyond its gathered rows.
    pub(crate) fn dense_prefix(&self, n: usize) -> &'a [f32] {
        match self {
            InputRef::Dense { dim, data, .. } => &data[..n * dim],
            InputRef::Indexed { dim, dst, .. } => {
                assert!(
                    n * dim <= dst.len(),
                    "indexed input: only {} rows gathered",
                    dst.len() / (*dim).max(1)
                );
                &dst[..n * dim]
            }
            InputRef::Sparse { .. } => panic!("dense_prefix on sparse input"),
        }
    }

    /// What an aggregation reads: the dense rows and, for indexed input, the row map
    /// (row `j` of the input is row `map[j]` of the slice). Panics on sparse input.
    pub(crate) fn agg_source(&self, n: usize) -> (&'a [f32], Option<&'a [u32]>) {
        match self {
            InputRef::Dense { dim, data, .. } => (&data[..n * dim], None),
            InputRef::Indexed { all, map, .. } => (all, Some(&map[..n])),
            InputRef::Sparse { .. } => panic!("aggregation of sparse input"),
        }
    }

    /// `y[n, out] (+)= X[..n] · Wᵀ` with `w: [out, dim]`. Sparse input: a sparse x dense
    /// product, parallel over rows of `y`, never densifying `X`.
    pub(crate) fn linear(
        &self,
        pool: &BufferPool,
        n: usize,
        w: &[f32],
        out: usize,
        y: &mut [f32],
        acc: bool,
    ) {
        assert!(n <= self.rows());
        assert_eq!(w.len(), out * self.dim());
        assert_eq!(y.len(), n * out);
        match *self {
            InputRef::Dense { dim, .. } | InputRef::Indexed { dim, .. } => {
                matmul_a_bt(n, out, dim, self.dense_prefix(n), w, y, acc)
            }
            InputRef::Sparse {
                dim,
                indptr,
                indices,
                data,
                ..
            } => {
                if out == 0 {
                    return;
                }
                let mut wt = pool.take(dim * out); // [dim, out]
                transpose_into(w, out, dim, &mut wt, false);
                let wt_ref = &wt[..];
                y.par_chunks_mut(out)
                    .with_min_len(min_rows(out * 4))
                    .enumerate()
                    .for_each(|(r, row)| {
                        let nz = indptr[r] as usize..indptr[r + 1] as usize;
                        simd_dispatch!(sparse_row(
                            row,
                            acc,
                            &indices[nz.clone()],
                            &data[nz],
                            wt_ref
                        ))
                    });
                pool.give(wt);
            }
        }
    }

    /// `dw[out, dim] += dyᵀ · X[..n]` with `dy: [n, out]`. Sparse input: builds the CSC of
    /// `X[..n]` once and parallelizes over input columns (each row of `dwᵀ` written by one task).
    pub(crate) fn linear_weight_grad(
        &self,
        pool: &BufferPool,
        n: usize,
        dy: &[f32],
        out: usize,
        dw: &mut [f32],
    ) {
        assert!(n <= self.rows());
        assert_eq!(dw.len(), out * self.dim());
        assert_eq!(dy.len(), n * out);
        match *self {
            InputRef::Dense { dim, .. } | InputRef::Indexed { dim, .. } => {
                matmul_at_b(out, dim, n, dy, self.dense_prefix(n), dw, true)
            }
            InputRef::Sparse {
                dim,
                indptr,
                indices,
                data,
                ..
            } => {
                if out == 0 || dim == 0 {
                    return;
                }
                let nnz = indptr[n] as usize;
                // CSC of the first n rows: for every column, (row, value) pairs.
                let mut cptr = vec![0usize; dim + 1];
                for &c in &indices[..nnz] {
                    cptr[c as usize + 1] += 1;
                }
                for c in 0..dim {
                    cptr[c + 1] += cptr[c];
                }
                let mut fill = cptr.clone();
                let mut crow = vec![0u32; nnz];
                let mut cval = vec![0f32; nnz];
                for r in 0..n {
                    for e in indptr[r] as usize..indptr[r + 1] as usize {
                        let c = indices[e] as usize;
                        crow[fill[c]] = r as u32;
                        cval[fill[c]] = data[e];
                        fill[c] += 1;
                    }
                }
                let mut dwt = pool.take(dim * out);
                dwt.par_chunks_mut(out)
                    .with_min_len(min_rows(out * 4))
                    .enumerate()
                    .for_each(|(c, row)| {
                        let nz = cptr[c]..cptr[c + 1];
                        simd_dispatch!(sparse_row(row, false, &crow[nz.clone()], &cval[nz], dy))
                    });
                transpose_into(&dwt, dim, out, dw, true);
                pool.give(dwt);
            }
        }
    }
}

/// One row of a sparse x dense product: `row (+)= Σ_k vals[k] · m[cols[k]]`, the rows of
/// `m` (`row.len()` wide) added in the order of `cols`, each as `row += v · m_row` (a product
/// then a sum, the same bits in every build). Rows of `m` are gathered in random order: the
/// one [`PREFETCH_AHEAD`] entries ahead is prefetched.
#[inline(always)]
fn sparse_row(row: &mut [f32], acc: bool, cols: &[u32], vals: &[f32], m: &[f32]) {
    let out = row.len();
    if !acc {
        row.fill(0.0);
    }
    for (k, (&c, &v)) in cols.iter().zip(vals).enumerate() {
        if let Some(&n) = cols.get(k + PREFETCH_AHEAD) {
            prefetch_row(m, n as usize * out, out);
        }
        let c = c as usize;
        axpy(row, v, &m[c * out..(c + 1) * out]);
    }
}
