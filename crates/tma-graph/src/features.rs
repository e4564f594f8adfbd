//! Node feature matrices.

use crate::buf::Buf;

/// Rows per segment of [`Features::gather_releasing`]: the most pages one segment can hold
/// resident is one per row (2^14 pages = 64 MiB).
pub const RELEASE_SEGMENT: usize = 1 << 14;

/// Features with density above this fraction are stored dense.
pub const DENSIFY_DENSITY: f64 = 0.2;
/// Features with at most this many columns are stored dense.
pub const DENSIFY_MAX_DIM: usize = 64;

/// Node features, `[num_nodes, dim]`, f32.
///
/// `Sparse` keeps bag-of-words style features (e.g. coauthor_physics, 34,493 x 8,415 with
/// ~0.3% non-zeros) in CSR form; the first GNN layer consumes it directly (sparse x dense
/// product), so it is never densified. The loader ([`crate::load_dataset`]) densifies only
/// narrow (`dim <= 64`) or dense (> 20% non-zeros) feature files, where `Dense` is both smaller
/// and faster.
#[derive(Clone, Debug, PartialEq)]
pub enum Features {
    /// Row-major, `data.len() == num_nodes * dim`.
    Dense {
        /// Rows `N`.
        num_nodes: usize,
        /// Columns (feature width).
        dim: usize,
        /// `[num_nodes * dim]`, row-major; owned or mapped from a file ([`Buf`]).
        data: Buf<f32>,
    },
    /// CSR rows: `indptr: [num_nodes + 1]`, `indices/data: [nnz]`, column ids `< dim`.
    Sparse {
        /// Rows `N`.
        num_nodes: usize,
        /// Columns (feature width).
        dim: usize,
        /// Row offsets `[num_nodes + 1]`, monotone, `indptr[N] == nnz`.
        indptr: Vec<u64>,
        /// Column ids `[nnz]`, each `< dim`, in file order within a row.
        indices: Vec<u32>,
        /// Values `[nnz]`.
        data: Vec<f32>,
    },
}

/// `out[i] = data[rows[i]]` for rows of width `dim` of a dense row-major matrix
/// (`out.len() == rows.len() * dim`), parallel over output rows: the mini-batch input gather is
/// on the training hot path.
///
/// # Panics
/// If `out` has the wrong length or a row id is out of range.
pub fn gather_rows_into(data: &[f32], dim: usize, rows: &[u32], out: &mut [f32]) {
    use rayon::prelude::*;
    assert_eq!(
        out.len(),
        rows.len() * dim,
        "gather_rows_into: output length"
    );
    if dim == 0 {
        return;
    }
    out.par_chunks_mut(dim)
        .zip(rows.par_iter())
        .with_min_len((1 << 14) / dim + 1)
        .for_each(|(o, &r)| {
            let r = r as usize;
            o.copy_from_slice(&data[r * dim..(r + 1) * dim]);
        });
}

impl Features {
    /// Drops this process's resident pages of mapped dense rows (nothing for owned data); see
    /// [`crate::Csr::release_pages`].
    pub fn release_pages(&self) {
        if let Features::Dense { data, .. } = self {
            data.release_pages();
        }
    }

    /// Rows `rows` (any order, repeats allowed) gathered like [`Features::gather_into`], for
    /// a pass over features mapped from disk that must not leave them resident: scattered
    /// rows touch a whole page each (a 4 KiB page holds 32 rows of 32 f32), so gathering a few
    /// million random rows of a mapped file makes most of the file count in the process's RSS.
    /// Here the rows are copied in ascending row order, in segments of [`RELEASE_SEGMENT`]
    /// rows (in parallel), and each segment's pages are released ([`Buf::release_elems`])
    /// once copied: at most one segment's pages per thread stay resident (<= 64 MiB per
    /// thread), whatever `rows` spans. Same values as [`Features::gather_into`]; for owned
    /// or sparse features it is that.
    ///
    /// # Panics
    /// If a row id is out of range.
    pub fn gather_releasing(&self, rows: &[u32], out: &mut Features) {
        use rayon::prelude::*;
        let Features::Dense { dim, data, .. } = self else {
            return self.gather_into(rows, out);
        };
        if !data.is_mapped() || *dim == 0 {
            return self.gather_into(rows, out);
        }
        let d = *dim;
        let n = self.num_nodes();
        // (row, position) pairs as one u64 key each: sorting plain integers is several times
        // faster than sorting positions by an indirect key
        let mut order: Vec<u64> = rows
            .par_iter()
            .enumerate()
            .map(|(i, &r)| (r as u64) << 32 | i as u64)
            .collect();
        order.par_sort_unstable();
        if let Some(&last) = order.last() {
            let r = (last >> 32) as usize;
            assert!(r < n, "gather_releasing: row {r} of {n}");
        }
        // the previous output's allocation is reused when it is owned (a fresh multi-MB
        // buffer per call costs a page fault and a zeroed page per 4 KiB)
        let mut buf = match std::mem::replace(out, Features::dense(0, 0, Vec::new())) {
            Features::Dense { data, .. } if !data.is_mapped() => data.into_vec(),
            Features::Sparse { data, .. } => data,
            Features::Dense { .. } => Vec::new(),
        };
        buf.clear();
        buf.resize(rows.len() * d, 0.0);
        /// The output's base pointer, shared by the segments (each writes distinct rows).
        struct Out(*mut f32);
        // SAFETY: only used to write disjoint rows (see below).
        unsafe impl Sync for Out {}
        let base = Out(buf.as_mut_ptr());
        let base = &base;
        order.par_chunks(RELEASE_SEGMENT).for_each(|seg| {
            for &k in seg {
                let (r, i) = ((k >> 32) as usize, k as u32);
                let src = &data[r * d..(r + 1) * d];
                // SAFETY: `order` holds every position 0..rows.len() once, so every `i` is written
                // by exactly one segment, and `i * d + d <= buf.len()`; `buf` outlives the
                // parallel loop and is not otherwise accessed during it.
                unsafe {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), base.0.add(i as usize * d), d);
                }
            }
            let first = (seg[0] >> 32) as usize;
            let last = (seg[seg.len() - 1] >> 32) as usize;
            data.release_elems(first * d..(last + 1) * d);
        });
        *out = Features::Dense {
            num_nodes: rows.len(),
            dim: d,
            data: buf.into(),
        };
    }

    /// Dense features of owned rows (`data.len() == num_nodes * dim`).
    pub fn dense(num_nodes: usize, dim: usize, data: Vec<f32>) -> Features {
        debug_assert_eq!(data.len(), num_nodes * dim);
        Features::Dense {
            num_nodes,
            dim,
            data: data.into(),
        }
    }

    /// Whether the features are read in place from a mapped file.
    pub fn is_mapped(&self) -> bool {
        matches!(self, Features::Dense { data, .. } if data.is_mapped())
    }

    /// Bytes of anonymous memory the arrays hold (0 for mapped dense rows).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Features::Dense { data, .. } => data.heap_bytes(),
            Features::Sparse { .. } => self.size_bytes(),
        }
    }

    /// Number of rows (nodes).
    pub fn num_nodes(&self) -> usize {
        match self {
            Features::Dense { num_nodes, .. } | Features::Sparse { num_nodes, .. } => *num_nodes,
        }
    }

    /// Feature width (columns).
    pub fn dim(&self) -> usize {
        match self {
            Features::Dense { dim, .. } | Features::Sparse { dim, .. } => *dim,
        }
    }

    /// Gather rows `rows` (ids into `self`) into a new feature matrix of the same kind, row `i`
    /// of the result being row `rows[i]` of `self`. Used to build per-partition features and
    /// the input rows of a sampled mini-batch.
    pub fn gather(&self, rows: &[u32]) -> Features {
        let mut out = match self {
            Features::Dense { dim, .. } => Features::Dense {
                num_nodes: 0,
                dim: *dim,
                data: Buf::default(),
            },
            Features::Sparse { dim, .. } => Features::Sparse {
                num_nodes: 0,
                dim: *dim,
                indptr: Vec::new(),
                indices: Vec::new(),
                data: Vec::new(),
            },
        };
        self.gather_into(rows, &mut out);
        out
    }

    /// [`Features::gather`] into `out`, reusing its allocations (the trainer's per-step input
    /// gather: no fresh multi-MB buffer, and no page faults on it, every step). `out` takes the
    /// kind and width of `self` whatever it held before.
    pub fn gather_into(&self, rows: &[u32], out: &mut Features) {
        match self {
            Features::Dense { dim, data, .. } => {
                let d = *dim;
                let mut buf = match std::mem::replace(
                    out,
                    Features::Dense {
                        num_nodes: 0,
                        dim: 0,
                        data: Buf::default(),
                    },
                ) {
                    // a mapped buffer is not reused (it is read-only): start a fresh one
                    Features::Dense { data, .. } if !data.is_mapped() => data.into_vec(),
                    Features::Dense { .. } => Vec::new(),
                    Features::Sparse { data, .. } => data,
                };
                // Every element is overwritten below. A buffer too small is replaced, not
                // grown: growing reallocates and copies the old contents for nothing. Some
                // headroom, as batches vary in size from step to step.
                let need = rows.len() * d;
                if buf.capacity() < need {
                    buf = Vec::with_capacity(need + need / 8);
                }
                buf.resize(need, 0.0);
                gather_rows_into(data, d, rows, &mut buf);
                *out = Features::Dense {
                    num_nodes: rows.len(),
                    dim: d,
                    data: buf.into(),
                };
            }
            Features::Sparse {
                dim,
                indptr,
                indices,
                data,
                ..
            } => {
                let (mut ip, mut ix, mut dx) = match std::mem::replace(
                    out,
                    Features::Dense {
                        num_nodes: 0,
                        dim: 0,
                        data: Buf::default(),
                    },
                ) {
                    Features::Sparse {
                        indptr,
                        indices,
                        data,
                        ..
                    } => (indptr, indices, data),
                    Features::Dense { data, .. } if !data.is_mapped() => {
                        (Vec::new(), Vec::new(), data.into_vec())
                    }
                    Features::Dense { .. } => (Vec::new(), Vec::new(), Vec::new()),
                };
                ip.clear();
                ix.clear();
                dx.clear();
                ip.push(0u64);
                for &r in rows {
                    let (a, b) = (indptr[r as usize] as usize, indptr[r as usize + 1] as usize);
                    ix.extend_from_slice(&indices[a..b]);
                    dx.extend_from_slice(&data[a..b]);
                    ip.push(ix.len() as u64);
                }
                *out = Features::Sparse {
                    num_nodes: rows.len(),
                    dim: *dim,
                    indptr: ip,
                    indices: ix,
                    data: dx,
                };
            }
        }
    }

    /// The first `k` columns of every row, `[N, k]`, of the same kind (dense rows copied into
    /// memory; sparse entries with a column `>= k` dropped). `k >= dim` returns a copy.
    pub fn first_columns(&self, k: usize) -> Features {
        self.leading_columns(k, false)
    }

    /// The first `k` columns of every row followed by a column of ones, `[N, k' + 1]` with
    /// `k' = min(k, dim)`, of the same kind: [`Features::first_columns`] with a constant input
    /// column, which lets a model's first layer tell a scaled input from another (a bias input:
    /// the degree input of featureless graphs, docs/decisions/0032-a-constant-column-beside-the-degree.md).
    pub fn first_columns_then_ones(&self, k: usize) -> Features {
        self.leading_columns(k, true)
    }

    /// [`Features::first_columns`], then a column of ones when `ones`: one pass over the rows.
    fn leading_columns(&self, k: usize, ones: bool) -> Features {
        let extra = usize::from(ones);
        match self {
            Features::Dense {
                num_nodes,
                dim,
                data,
            } => {
                let k = k.min(*dim);
                let mut out = Vec::with_capacity(num_nodes * (k + extra));
                if *dim == 0 {
                    out.resize(num_nodes * extra, 1.0);
                } else if k + extra > 0 {
                    for row in data.chunks_exact(*dim) {
                        out.extend_from_slice(&row[..k]);
                        if ones {
                            out.push(1.0);
                        }
                    }
                }
                Features::Dense {
                    num_nodes: *num_nodes,
                    dim: k + extra,
                    data: out.into(),
                }
            }
            Features::Sparse {
                num_nodes,
                dim,
                indptr,
                indices,
                data,
            } => {
                let k = k.min(*dim);
                let (mut ip, mut ix, mut dx) =
                    (Vec::with_capacity(indptr.len()), Vec::new(), Vec::new());
                ip.push(0u64);
                for r in 0..*num_nodes {
                    for e in indptr[r] as usize..indptr[r + 1] as usize {
                        if (indices[e] as usize) < k {
                            ix.push(indices[e]);
                            dx.push(data[e]);
                        }
                    }
                    if ones {
                        ix.push(k as u32);
                        dx.push(1.0);
                    }
                    ip.push(ix.len() as u64);
                }
                Features::Sparse {
                    num_nodes: *num_nodes,
                    dim: k + extra,
                    indptr: ip,
                    indices: ix,
                    data: dx,
                }
            }
        }
    }

    /// Scales every row to sum to one (rows summing to zero are left as they are): PyG's
    /// `NormalizeFeatures`, the usual preprocessing of bag-of-words features (Planetoid).
    /// Mapped rows are copied into memory first (the mapping is read-only).
    pub fn row_normalize(&mut self) {
        fn scale(row: &mut [f32]) {
            let s: f32 = row.iter().sum();
            if s != 0.0 {
                row.iter_mut().for_each(|x| *x /= s);
            }
        }
        match self {
            Features::Dense { dim, data, .. } => {
                if *dim > 0 {
                    data.make_mut().chunks_mut(*dim).for_each(scale);
                }
            }
            Features::Sparse { indptr, data, .. } => {
                for w in indptr.windows(2) {
                    scale(&mut data[w[0] as usize..w[1] as usize]);
                }
            }
        }
    }

    /// Bytes held by the feature arrays.
    pub fn size_bytes(&self) -> usize {
        match self {
            Features::Dense { data, .. } => data.len() * 4,
            Features::Sparse {
                indptr,
                indices,
                data,
                ..
            } => indptr.len() * 8 + indices.len() * 4 + data.len() * 4,
        }
    }
}

impl Features {
    /// Dense or sparse features from CSR rows, by the `.npy` loader's rule ([`DENSIFY_MAX_DIM`],
    /// [`DENSIFY_DENSITY`]): dense when `dim <= 64` or more than 20% of the cells are
    /// non-zero, so data from any source trains as the same data loaded from a `.npy` directory.
    /// `indptr: [n + 1]`, `indices`/`data: [nnz]`; duplicate entries of a row are summed.
    pub fn from_csr_like_loader(
        n: usize,
        dim: usize,
        indptr: Vec<u64>,
        indices: Vec<u32>,
        data: Vec<f32>,
    ) -> Features {
        let nnz = indices.len();
        let densify =
            dim <= DENSIFY_MAX_DIM || (nnz as f64) > DENSIFY_DENSITY * (n as f64 * dim as f64);
        if densify {
            let mut out = vec![0f32; n * dim];
            for v in 0..n {
                for k in indptr[v] as usize..indptr[v + 1] as usize {
                    out[v * dim + indices[k] as usize] += data[k];
                }
            }
            Features::Dense {
                num_nodes: n,
                dim,
                data: out.into(),
            }
        } else {
            Features::Sparse {
                num_nodes: n,
                dim,
                indptr,
                indices,
                data,
            }
        }
    }

    /// Dense row-major features `[n, dim]`, kept dense unless the `.npy` loader's rule would
    /// store them sparse (`dim > 64` and at most 20% non-zero), so that a converted dataset loads
    /// back the same.
    pub fn from_dense_like_loader(n: usize, dim: usize, data: Vec<f32>) -> Features {
        let nnz = data.iter().filter(|&&x| x != 0.0).count();
        let dense =
            dim <= DENSIFY_MAX_DIM || (nnz as f64) > DENSIFY_DENSITY * (n as f64 * dim as f64);
        if dense {
            return Features::Dense {
                num_nodes: n,
                dim,
                data: data.into(),
            };
        }
        let mut indptr = Vec::with_capacity(n + 1);
        let (mut indices, mut vals) = (Vec::with_capacity(nnz), Vec::with_capacity(nnz));
        indptr.push(0u64);
        for row in data.chunks_exact(dim.max(1)).take(n) {
            for (j, &x) in row.iter().enumerate() {
                if x != 0.0 {
                    indices.push(j as u32);
                    vals.push(x);
                }
            }
            indptr.push(indices.len() as u64);
        }
        Features::Sparse {
            num_nodes: n,
            dim,
            indptr,
            indices,
            data: vals,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_columns_keeps_the_leading_columns_of_every_row() {
        let dense = Features::Dense {
            num_nodes: 2,
            dim: 3,
            data: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0].into(),
        };
        let one = dense.first_columns(1);
        assert_eq!(one.dim(), 1);
        let Features::Dense { data, .. } = &one else {
            panic!("dense stays dense")
        };
        assert_eq!(&data[..], &[1.0, 4.0]);
        let Features::Dense { data, .. } = dense.first_columns(2) else {
            panic!()
        };
        assert_eq!(&data[..], &[1.0, 2.0, 4.0, 5.0]);
        assert_eq!(dense.first_columns(7), dense, "k >= dim: a copy");
        // sparse: row 0 = {0: 1, 2: 3}, row 1 = {1: 5}
        let sparse = Features::Sparse {
            num_nodes: 2,
            dim: 3,
            indptr: vec![0, 2, 3],
            indices: vec![0, 2, 1],
            data: vec![1.0, 3.0, 5.0],
        };
        assert_eq!(
            sparse.first_columns(2),
            Features::Sparse {
                num_nodes: 2,
                dim: 2,
                indptr: vec![0, 1, 2],
                indices: vec![0, 1],
                data: vec![1.0, 5.0],
            }
        );
    }

    #[test]
    fn first_columns_then_ones_appends_a_constant_column() {
        let dense = Features::Dense {
            num_nodes: 2,
            dim: 3,
            data: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0].into(),
        };
        let two = dense.first_columns_then_ones(1);
        let Features::Dense { dim, data, .. } = &two else {
            panic!("dense stays dense")
        };
        assert_eq!((*dim, &data[..]), (2, &[1.0, 1.0, 4.0, 1.0][..]));
        let Features::Dense { dim, data, .. } = dense.first_columns_then_ones(0) else {
            panic!()
        };
        assert_eq!((dim, &data[..]), (1, &[1.0, 1.0][..]));
        // sparse: row 0 = {0: 1, 2: 3}, row 1 = {1: 5}
        let sparse = Features::Sparse {
            num_nodes: 2,
            dim: 3,
            indptr: vec![0, 2, 3],
            indices: vec![0, 2, 1],
            data: vec![1.0, 3.0, 5.0],
        };
        assert_eq!(
            sparse.first_columns_then_ones(2),
            Features::Sparse {
                num_nodes: 2,
                dim: 3,
                indptr: vec![0, 2, 4],
                indices: vec![0, 2, 1, 2],
                data: vec![1.0, 1.0, 5.0, 1.0],
            }
        );
    }

    fn mapped_rss(path: &std::path::Path) -> u64 {
        crate::buf::mapped_resident_bytes(path).expect("/proc/self/smaps")
    }

    #[test]
    fn gather_releasing_reads_the_same_rows_and_leaves_no_pages_resident() {
        // 64 MiB of 32-wide rows mapped from a file; 200,000 scattered rows (repeats, any
        // order) touch every page of it
        let (n, d) = (1usize << 19, 32usize);
        let vals: Vec<f32> = (0..n * d).map(|i| (i as f32).sin()).collect();
        let bytes: Vec<u8> = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.bin");
        std::fs::write(&path, &bytes).unwrap();
        let map = crate::buf::SharedMap::open(&path).unwrap();
        let mapped = Features::Dense {
            num_nodes: n,
            dim: d,
            data: Buf::mapped(map, 0, n * d).unwrap(),
        };
        let owned = Features::dense(n, d, vals);
        let rows: Vec<u32> = (0..200_000u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 45) as u32)
            .collect();
        assert!(rows.iter().all(|&r| (r as usize) < n));
        let want = owned.gather(&rows);
        let mut out = Features::dense(0, 0, Vec::new());
        mapped.release_pages();
        mapped.gather_releasing(&rows, &mut out);
        assert_eq!(out, want, "same rows, in the order asked");
        let after = mapped_rss(&path);
        assert!(
            after <= 8 << 20,
            "{after} bytes of the mapping left resident"
        );
        // the plain gather leaves the whole file resident: what the release is for
        mapped.gather_into(&rows, &mut out);
        assert_eq!(out, want);
        let plain = mapped_rss(&path);
        assert!(plain >= 60 << 20, "plain gather: {plain} bytes resident");
        // owned and sparse features: the plain gather
        owned.gather_releasing(&rows[..10], &mut out);
        assert_eq!(out, owned.gather(&rows[..10]));
    }

    #[test]
    fn row_normalize_exact() {
        let mut d = Features::Dense {
            num_nodes: 2,
            dim: 2,
            data: vec![1., 3., 0., 0.].into(),
        };
        d.row_normalize();
        assert_eq!(
            d,
            Features::Dense {
                num_nodes: 2,
                dim: 2,
                data: vec![0.25, 0.75, 0., 0.].into()
            }
        );
        let mut s = Features::Sparse {
            num_nodes: 2,
            dim: 4,
            indptr: vec![0, 2, 3],
            indices: vec![0, 3, 1],
            data: vec![1., 1., 2.],
        };
        s.row_normalize();
        if let Features::Sparse { data, .. } = s {
            assert_eq!(data, vec![0.5, 0.5, 1.0]);
        }
    }

    #[test]
    fn gather_into_reuses_and_switches_kind() {
        let d = Features::Dense {
            num_nodes: 3,
            dim: 2,
            data: vec![0., 1., 2., 3., 4., 5.].into(),
        };
        let s = Features::Sparse {
            num_nodes: 3,
            dim: 4,
            indptr: vec![0, 1, 1, 3],
            indices: vec![3, 0, 2],
            data: vec![1., 2., 3.],
        };
        let mut out = d.gather(&[0, 1, 2, 2]);
        d.gather_into(&[1], &mut out);
        assert_eq!(out, d.gather(&[1]));
        s.gather_into(&[2, 0], &mut out);
        assert_eq!(out, s.gather(&[2, 0]));
        d.gather_into(&[2, 2], &mut out);
        assert_eq!(
            out,
            Features::Dense {
                num_nodes: 2,
                dim: 2,
                data: vec![4., 5., 4., 5.].into()
            }
        );
    }

    #[test]
    fn gather_dense_and_sparse() {
        let d = Features::Dense {
            num_nodes: 3,
            dim: 2,
            data: vec![0., 1., 2., 3., 4., 5.].into(),
        };
        assert_eq!(
            d.gather(&[2, 0]),
            Features::Dense {
                num_nodes: 2,
                dim: 2,
                data: vec![4., 5., 0., 1.].into()
            }
        );
        let s = Features::Sparse {
            num_nodes: 3,
            dim: 4,
            indptr: vec![0, 1, 1, 3],
            indices: vec![3, 0, 2],
            data: vec![1., 2., 3.],
        };
        assert_eq!(
            s.gather(&[2, 1, 0]),
            Features::Sparse {
                num_nodes: 3,
                dim: 4,
                indptr: vec![0, 2, 2, 3],
                indices: vec![0, 2, 3],
                data: vec![2., 3., 1.]
            }
        );
    }
}
