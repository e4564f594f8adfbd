//! [`MappedGraph`]: a graph directory in the on-disk format, memory-mapped and read in place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::extsort::pair_hash;

use super::{FeatureLayout, FileEntry, LabelLayout, Manifest, SplitSource, MANIFEST};
use crate::buf::{Buf, Dtype, Pod, SharedMap};
use crate::csr::Csr;
use crate::dataset::{
    structural_features, Dataset, Labels, LinkProtocol, LoadOptions, NodeSplit, SharedNegatives,
    StoredLinkSplit, StoredNegatives,
};
use crate::error::{GraphError, Result};
use crate::features::Features;

/// One mapped file (an empty file has no mapping: a zero-length map is not portable).
struct Region {
    map: Arc<SharedMap>,
    dtype: Dtype,
    len: usize,
}

impl Region {
    fn slice<T: Pod>(&self) -> &[T] {
        assert_eq!(T::DTYPE, self.dtype, "typed view of the wrong dtype");
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `open` checked that the map holds exactly `len * size_of::<T>()` bytes
        // and that its start is aligned for `T` (mmap returns page-aligned memory); `T` is
        // plain data valid for every bit pattern, and the format is little-endian, checked
        // against the host at open. The map lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.map.bytes().as_ptr() as *const T, self.len) }
    }

    /// The whole file as a mapped [`Buf`] (shares the mapping).
    fn buf<T: Pod>(&self) -> Buf<T> {
        assert_eq!(T::DTYPE, self.dtype, "typed view of the wrong dtype");
        Buf::mapped(self.map.clone(), 0, self.len).expect("checked at open")
    }
}

fn invalid(path: &Path, reason: impl Into<String>) -> GraphError {
    GraphError::Invalid {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// A borrowed in-neighbour CSR: the layout of [`Csr`] (row `v` = in-neighbours of `v`, u64
/// `indptr [N + 1]`, u32 `indices [E]`) over mapped or owned arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CsrRef<'a> {
    /// Row offsets `[num_nodes + 1]`.
    pub indptr: &'a [u64],
    /// In-neighbour ids `[num_edges]`.
    pub indices: &'a [u32],
}

impl<'a> CsrRef<'a> {
    /// Number of rows (nodes).
    pub fn num_nodes(&self) -> usize {
        self.indptr.len().saturating_sub(1)
    }

    /// Number of stored arcs.
    pub fn num_edges(&self) -> usize {
        self.indices.len()
    }

    /// In-neighbours of `v`.
    #[inline]
    pub fn neighbors(&self, v: usize) -> &'a [u32] {
        &self.indices[self.indptr[v] as usize..self.indptr[v + 1] as usize]
    }

    /// In-degree of `v`.
    #[inline]
    pub fn degree(&self, v: usize) -> usize {
        (self.indptr[v + 1] - self.indptr[v]) as usize
    }

    /// An owned copy.
    pub fn to_csr(&self) -> Csr {
        Csr::new(self.indptr.to_vec(), self.indices.to_vec())
    }
}

impl Csr {
    /// A borrowed view ([`CsrRef`]), the type code shared with mapped graphs takes.
    pub fn view(&self) -> CsrRef<'_> {
        CsrRef {
            indptr: &self.indptr,
            indices: &self.indices,
        }
    }
}

/// Borrowed node features of a [`MappedGraph`].
#[derive(Clone, Copy, Debug)]
pub enum FeaturesRef<'a> {
    /// No stored features (structural features are generated at load time).
    None,
    /// Dense f32 rows, `[num_nodes * dim]`.
    DenseF32 {
        /// Width.
        dim: usize,
        /// Row-major data.
        data: &'a [f32],
    },
    /// Dense f16 rows, `[num_nodes * dim]`.
    DenseF16 {
        /// Width.
        dim: usize,
        /// Row-major data.
        data: &'a [half::f16],
    },
    /// CSR rows.
    Sparse {
        /// Width.
        dim: usize,
        /// `[num_nodes + 1]`.
        indptr: &'a [u64],
        /// Column ids `[nnz]`.
        indices: &'a [u32],
        /// Values `[nnz]`.
        data: &'a [f32],
    },
}

impl FeaturesRef<'_> {
    /// Feature width (0 for [`FeaturesRef::None`]).
    pub fn dim(&self) -> usize {
        match self {
            FeaturesRef::None => 0,
            FeaturesRef::DenseF32 { dim, .. }
            | FeaturesRef::DenseF16 { dim, .. }
            | FeaturesRef::Sparse { dim, .. } => *dim,
        }
    }

    /// Row `v` as dense f32 into `out` (`out.len() == dim`); f16 values are widened exactly.
    ///
    /// # Panics
    /// If `out` has the wrong length or `v` is out of range.
    pub fn row_into(&self, v: usize, out: &mut [f32]) {
        assert_eq!(out.len(), self.dim(), "row_into: output length");
        match *self {
            FeaturesRef::None => {}
            FeaturesRef::DenseF32 { dim, data } => {
                out.copy_from_slice(&data[v * dim..(v + 1) * dim])
            }
            FeaturesRef::DenseF16 { dim, data } => {
                for (o, x) in out.iter_mut().zip(&data[v * dim..(v + 1) * dim]) {
                    *o = x.to_f32();
                }
            }
            FeaturesRef::Sparse {
                indptr,
                indices,
                data,
                ..
            } => {
                out.fill(0.0);
                let (a, b) = (indptr[v] as usize, indptr[v + 1] as usize);
                for k in a..b {
                    out[indices[k] as usize] += data[k];
                }
            }
        }
    }
}

/// A graph directory in the on-disk format (`docs/graph-format.md`), memory-mapped.
///
/// Nothing is copied into anonymous memory: [`MappedGraph::csr`], [`MappedGraph::features`],
/// labels and splits are views of the mapped files (pages are read from disk on first touch
/// and stay reclaimable page cache). The files must not be modified while mapped.
pub struct MappedGraph {
    dir: PathBuf,
    manifest: Manifest,
    regions: BTreeMap<String, Region>,
}

impl std::fmt::Debug for MappedGraph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedGraph")
            .field("dir", &self.dir)
            .field("manifest", &self.manifest)
            .finish()
    }
}

/// The files `manifest` says the directory holds: `(name, dtype, length)` of those whose length
/// the counts fix, and the split files (`u32`, any length); errors for a layout this build
/// does not read (dense features not f32/f16, negatives without held-out pairs, another
/// version or kind of negatives).
#[allow(clippy::type_complexity)]
fn files_to_map(
    dir: &Path,
    manifest: &Manifest,
) -> Result<(Vec<(&'static str, Dtype, u64)>, Vec<&'static str>)> {
    let n = manifest.num_nodes;
    let e = manifest.num_arcs;
    let mut want: Vec<(&'static str, Dtype, u64)> = vec![
        ("indptr.bin", Dtype::U64, n + 1),
        ("indices.bin", Dtype::U32, e),
    ];
    match &manifest.features {
        FeatureLayout::None => {}
        FeatureLayout::Dense { dim, dtype } => {
            if !matches!(dtype, Dtype::F32 | Dtype::F16) {
                return Err(invalid(
                    &dir.join(MANIFEST),
                    format!("dense features must be f32 or f16, not {dtype:?}"),
                ));
            }
            let len = n
                .checked_mul(*dim)
                .ok_or_else(|| invalid(&dir.join(MANIFEST), "num_nodes * dim overflows"))?;
            want.push(("features.bin", *dtype, len));
        }
        FeatureLayout::Sparse { nnz, .. } => {
            want.push(("feat_indptr.bin", Dtype::U64, n + 1));
            want.push(("feat_indices.bin", Dtype::U32, *nnz));
            want.push(("feat_data.bin", Dtype::F32, *nnz));
        }
    }
    match &manifest.labels {
        LabelLayout::None => {}
        LabelLayout::Classes { .. } => want.push(("labels.bin", Dtype::I32, n)),
        LabelLayout::MultiLabel { num_labels } => {
            want.push(("labels.bin", Dtype::U8, n * num_labels))
        }
    }
    let mut split_files = vec![];
    if manifest.split != SplitSource::None {
        split_files.extend(["train_idx.bin", "val_idx.bin", "test_idx.bin"]);
    }
    if manifest.link_split {
        split_files.extend(["link_val.bin", "link_test.bin"]);
    }
    if let Some(neg) = &manifest.link_negatives {
        let mp = dir.join(MANIFEST);
        if !manifest.link_split {
            return Err(invalid(
                &mp,
                "link_negatives is set but link_split is false (negatives without held-out pairs)",
            ));
        }
        if neg.version != super::LINK_SPLIT_VERSION {
            return Err(invalid(
                &mp,
                format!(
                    "link_negatives version {} is not readable by this build (reads version {})",
                    neg.version,
                    super::LINK_SPLIT_VERSION
                ),
            ));
        }
        let per_source = neg.kind == super::NEGATIVES_PER_SOURCE && neg.num_neg >= 1;
        let shared = neg.kind == super::NEGATIVES_SHARED && neg.num_neg == 0;
        if !per_source && !shared {
            return Err(invalid(
                &mp,
                format!(
                    "link_negatives: kind {:?} with num_neg {} (this build reads kind {:?} with num_neg >= 1, or {:?} with num_neg 0)",
                    neg.kind,
                    neg.num_neg,
                    super::NEGATIVES_PER_SOURCE,
                    super::NEGATIVES_SHARED
                ),
            ));
        }
        if neg.hits_k == Some(0) {
            return Err(invalid(&mp, "link_negatives: hits_k 0 (must be >= 1)"));
        }
        split_files.extend(["link_val_neg.bin", "link_test_neg.bin"]);
    }
    Ok((want, split_files))
}

impl MappedGraph {
    /// Opens `dir`: reads the manifest, maps every file it lists, checks each file's dtype,
    /// length (against the counts: `indptr` `N + 1`, `indices` `E`, ...), size on disk and
    /// alignment, and the CSR end points (`indptr[0] == 0`, `indptr[N] == E`). Cost O(number of
    /// files); contents are checked by [`MappedGraph::validate`].
    ///
    /// # Errors
    /// [`GraphError::Io`] for a missing or unreadable file; [`GraphError::Invalid`] naming the
    /// manifest (bad JSON, other format or version, a file missing from its list) or the file
    /// (size differs from the manifest: truncated or over-long; misaligned map; a big-endian
    /// host); [`GraphError::Shape`] naming the file when its length disagrees with the counts.
    pub fn open(dir: &Path) -> Result<MappedGraph> {
        let manifest = Manifest::read(dir)?;
        if cfg!(target_endian = "big") {
            return Err(invalid(
                &dir.join(MANIFEST),
                "the format is little-endian; this host is big-endian",
            ));
        }
        let e = manifest.num_arcs;
        let (want, split_files) = files_to_map(dir, &manifest)?;
        let mut regions = BTreeMap::new();
        for (name, dtype, len) in want {
            regions.insert(
                name.to_string(),
                map_file(dir, &manifest, name, dtype, Some(len))?,
            );
        }
        for name in split_files {
            regions.insert(
                name.to_string(),
                map_file(dir, &manifest, name, Dtype::U32, None)?,
            );
        }
        let g = MappedGraph {
            dir: dir.to_path_buf(),
            manifest,
            regions,
        };
        g.check_end_points(e)?;
        Ok(g)
    }

    /// The CSR end points (`indptr[0] == 0`, `indptr[N] == e`), those of sparse features, and the
    /// lengths of the link split files (pairs; negatives per positive as the manifest says).
    fn check_end_points(&self, e: u64) -> Result<()> {
        let g = self;
        let dir = &self.dir;
        let ip = g.indptr();
        if ip[0] != 0 || ip[ip.len() - 1] != e {
            return Err(invalid(
                &dir.join("indptr.bin"),
                format!(
                    "indptr[0] = {} and indptr[N] = {} (must be 0 and num_arcs = {e})",
                    ip[0],
                    ip[ip.len() - 1]
                ),
            ));
        }
        if let FeaturesRef::Sparse {
            indptr, indices, ..
        } = g.features()
        {
            if indptr[0] != 0 || indptr[indptr.len() - 1] != indices.len() as u64 {
                return Err(invalid(
                    &dir.join("feat_indptr.bin"),
                    "feat_indptr must start at 0 and end at nnz",
                ));
            }
        }
        let shared = g
            .manifest
            .link_negatives
            .as_ref()
            .is_some_and(|n| n.kind == super::NEGATIVES_SHARED);
        let pair_files: &[&str] = if shared {
            &[
                "link_val.bin",
                "link_test.bin",
                "link_val_neg.bin",
                "link_test_neg.bin",
            ]
        } else {
            &["link_val.bin", "link_test.bin"]
        };
        for &name in pair_files {
            if g.regions
                .get(name)
                .is_some_and(|r| !r.len.is_multiple_of(2))
            {
                return Err(invalid(
                    &dir.join(name),
                    "odd length: must hold (u, v) pairs",
                ));
            }
        }
        if let Some(neg) = g.manifest.link_negatives.as_ref().filter(|_| !shared) {
            for (pairs, name) in [
                ("link_val.bin", "link_val_neg.bin"),
                ("link_test.bin", "link_test_neg.bin"),
            ] {
                let want = (g.regions[pairs].len as u64 / 2).checked_mul(neg.num_neg);
                if want != Some(g.regions[name].len as u64) {
                    return Err(GraphError::Shape {
                        path: dir.join(name),
                        expected: format!(
                            "[{} positives * {} negatives]",
                            g.regions[pairs].len / 2,
                            neg.num_neg
                        ),
                        found: vec![g.regions[name].len as u64],
                    });
                }
            }
        }
        Ok(())
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Nodes `N`.
    pub fn num_nodes(&self) -> usize {
        self.manifest.num_nodes as usize
    }

    /// Stored arcs `E`.
    pub fn num_arcs(&self) -> usize {
        self.manifest.num_arcs as usize
    }

    fn get<T: Pod>(&self, name: &str) -> &[T] {
        self.regions[name].slice()
    }

    /// The mapped `indptr` `[N + 1]`.
    pub fn indptr(&self) -> &[u64] {
        self.get("indptr.bin")
    }

    /// The mapped `indices` `[E]`.
    pub fn indices(&self) -> &[u32] {
        self.get("indices.bin")
    }

    /// The in-neighbour CSR, in place.
    pub fn csr(&self) -> CsrRef<'_> {
        CsrRef {
            indptr: self.indptr(),
            indices: self.indices(),
        }
    }

    /// The in-neighbour CSR as a [`Csr`] whose arrays are the mapped files (nothing copied;
    /// clones share the mapping). Code written against `Csr` (partitioning, sampling,
    /// evaluation) runs on it unchanged.
    pub fn mapped_csr(&self) -> Csr {
        Csr {
            indptr: self.regions["indptr.bin"].buf(),
            indices: self.regions["indices.bin"].buf(),
        }
    }

    /// Dense f32 features as [`Features::Dense`] over the mapped file (nothing copied);
    /// `None` for other layouts (f16, sparse or no stored features), which
    /// [`MappedGraph::to_dataset`] converts.
    pub fn mapped_features(&self) -> Option<Features> {
        match &self.manifest.features {
            FeatureLayout::Dense {
                dim,
                dtype: Dtype::F32,
            } => Some(Features::Dense {
                num_nodes: self.num_nodes(),
                dim: *dim as usize,
                data: self.regions["features.bin"].buf(),
            }),
            _ => None,
        }
    }

    /// The features, in place.
    pub fn features(&self) -> FeaturesRef<'_> {
        match &self.manifest.features {
            FeatureLayout::None => FeaturesRef::None,
            FeatureLayout::Dense { dim, dtype } => match dtype {
                Dtype::F16 => FeaturesRef::DenseF16 {
                    dim: *dim as usize,
                    data: self.get("features.bin"),
                },
                _ => FeaturesRef::DenseF32 {
                    dim: *dim as usize,
                    data: self.get("features.bin"),
                },
            },
            FeatureLayout::Sparse { dim, .. } => FeaturesRef::Sparse {
                dim: *dim as usize,
                indptr: self.get("feat_indptr.bin"),
                indices: self.get("feat_indices.bin"),
                data: self.get("feat_data.bin"),
            },
        }
    }

    /// Class labels `[N]` (`-1` = unlabelled), when the labels are classes.
    pub fn class_labels(&self) -> Option<&[i32]> {
        matches!(self.manifest.labels, LabelLayout::Classes { .. }).then(|| self.get("labels.bin"))
    }

    /// Multi-label rows `[N * C]`, when the labels are multi-label.
    pub fn multi_labels(&self) -> Option<&[u8]> {
        matches!(self.manifest.labels, LabelLayout::MultiLabel { .. })
            .then(|| self.get("labels.bin"))
    }

    /// The stored node split `(train, val, test)`, in place.
    pub fn split(&self) -> Option<(&[u32], &[u32], &[u32])> {
        (self.manifest.split != SplitSource::None).then(|| {
            (
                self.get("train_idx.bin"),
                self.get("val_idx.bin"),
                self.get("test_idx.bin"),
            )
        })
    }

    /// Held-out link pairs `(val, test)`, flattened `[u0, v0, u1, v1, ...]`, when stored.
    pub fn link_split(&self) -> Option<(&[u32], &[u32])> {
        self.manifest
            .link_split
            .then(|| (self.get("link_val.bin"), self.get("link_test.bin")))
    }

    /// The stored negatives of the held-out pairs `(num_neg, val_neg, test_neg)`, mapped (u32
    /// `[pairs * num_neg]` row-major), when the manifest lists them.
    pub fn link_negatives(&self) -> Option<(usize, Buf<u32>, Buf<u32>)> {
        self.manifest.link_negatives.as_ref().map(|neg| {
            (
                neg.num_neg as usize,
                self.regions["link_val_neg.bin"].buf(),
                self.regions["link_test_neg.bin"].buf(),
            )
        })
    }

    /// The stored link split as the loader hands it on (`Dataset::link_split`): positives
    /// copied (`8` bytes each), negatives mapped; `None` without held-out pairs.
    pub fn stored_link_split(&self) -> Option<StoredLinkSplit> {
        let (a, b) = self.link_split()?;
        let pairs = |x: &[u32]| x.chunks_exact(2).map(|p| (p[0], p[1])).collect::<Vec<_>>();
        let layout = self.manifest.link_negatives.as_ref();
        let shared = layout.is_some_and(|n| n.kind == super::NEGATIVES_SHARED);
        let protocol = layout.and_then(|n| {
            n.dataset.as_ref().map(|d| {
                Box::new(LinkProtocol {
                    dataset: d.clone(),
                    hits_k: n.hits_k.map(|k| k as usize),
                    shared: None,
                })
            })
        });
        let (negatives, protocol) = if shared {
            let sh = SharedNegatives {
                val: pairs(self.get("link_val_neg.bin")),
                test: pairs(self.get("link_test_neg.bin")),
            };
            let mut p = protocol.unwrap_or_else(|| {
                Box::new(LinkProtocol {
                    dataset: self.manifest.name.clone(),
                    hits_k: None,
                    shared: None,
                })
            });
            p.hits_k = p.hits_k.or(Some(50));
            p.shared = Some(sh);
            (None, Some(p))
        } else {
            let n = self
                .link_negatives()
                .map(|(num_neg, val, test)| StoredNegatives {
                    num_neg,
                    seed: layout.map_or(0, |n| n.seed),
                    val,
                    test,
                });
            (n, protocol)
        };
        Some(StoredLinkSplit {
            val_pos: pairs(a),
            test_pos: pairs(b),
            negatives,
            source: self.dir.display().to_string(),
            protocol,
        })
    }

    /// Checks the contents (one pass over every file): `indptr` monotone, neighbour ids
    /// `< N`, rows sorted without duplicates or self-loops, undirected graphs symmetric,
    /// feature offsets monotone and column ids `< dim`, labels in range, split ids `< N`,
    /// sorted and unique, link pairs `< N`.
    ///
    /// # Errors
    /// [`GraphError::Invalid`] or [`GraphError::IdOutOfRange`] naming the offending file.
    pub fn validate(&self) -> Result<()> {
        self.validate_windows(1 << 25, 1 << 20)
    }

    /// [`MappedGraph::validate`] with the streaming pass cut into windows of about `window`
    /// arcs, each checked in parallel blocks of about `block` arcs (tests use tiny ones to
    /// check that the first error in row order is reported whatever the cut).
    #[doc(hidden)]
    pub fn validate_windows(&self, window: usize, block: usize) -> Result<()> {
        self.validate_csr(window, block)?;
        self.validate_node_data()
    }

    /// The graph part of [`MappedGraph::validate_windows`]: `indptr` monotone, rows sorted and
    /// unique, ids `< N`, no self-loop, an undirected graph symmetric.
    fn validate_csr(&self, window: usize, block: usize) -> Result<()> {
        let n = self.num_nodes();
        let p = |f: &str| self.dir.join(f);
        let g = self.csr();
        // indptr monotone (before any row is sliced), in parallel blocks; the first bad row
        if let Some(v) = (0..n)
            .into_par_iter()
            .with_min_len(1 << 16)
            .find_first(|&v| g.indptr[v + 1] < g.indptr[v])
        {
            return Err(invalid(
                &p("indptr.bin"),
                format!("not monotone at row {v}"),
            ));
        }
        // One streaming pass over the rows, in windows of about `window` arcs (each checked in
        // parallel, the first error in row order reported), summing a hash of every arc in both
        // orientations: an undirected graph is symmetric iff the two sums agree (its arcs are
        // unique, checked in the same pass; a 2^-64 chance of missing an asymmetric graph).
        // The window's pages are released after it, so the pass does not leave the whole of
        // `indices` resident.
        let indices_map = self.regions["indices.bin"].map.clone();
        let (mut h_fwd, mut h_rev) = (0u64, 0u64);
        let mut lo = 0usize;
        while lo < n {
            let hi = row_after(g.indptr, lo, window.max(1)).max(lo + 1);
            let blocks = row_blocks(g.indptr, lo, hi, block.max(1));
            let results: Vec<std::result::Result<(u64, u64), GraphError>> = blocks
                .par_iter()
                .map(|&(a, b)| {
                    let (mut hf, mut hr) = (0u64, 0u64);
                    for v in a..b {
                        let row = g.neighbors(v);
                        for (i, &u) in row.iter().enumerate() {
                            if u as usize >= n {
                                return Err(GraphError::IdOutOfRange {
                                    path: p("indices.bin"),
                                    id: u as i64,
                                    num_nodes: n as u64,
                                });
                            }
                            if i > 0 && row[i - 1] >= u {
                                return Err(invalid(
                                    &p("indices.bin"),
                                    format!("row {v} is not sorted or holds a duplicate ({u})"),
                                ));
                            }
                            if u as usize == v {
                                return Err(invalid(
                                    &p("indices.bin"),
                                    format!("self-loop at node {v}"),
                                ));
                            }
                            hf = hf.wrapping_add(pair_hash(u, v as u32));
                            hr = hr.wrapping_add(pair_hash(v as u32, u));
                        }
                    }
                    Ok((hf, hr))
                })
                .collect();
            for r in results {
                let (hf, hr) = r?;
                h_fwd = h_fwd.wrapping_add(hf);
                h_rev = h_rev.wrapping_add(hr);
            }
            let (a, b) = (g.indptr[lo] as usize, g.indptr[hi] as usize);
            indices_map.release(a * 4, (b - a) * 4);
            lo = hi;
        }
        self.regions["indptr.bin"].map.release_all();
        if !self.manifest.directed && h_fwd != h_rev {
            // certainly asymmetric (equal arc sets give equal sums): name one arc
            let (u, v) =
                find_asymmetric(g).expect("the hash sums differ, so some reverse is missing");
            self.regions["indices.bin"].map.release_all();
            return Err(invalid(
                &p("indices.bin"),
                format!("graph is marked undirected but arc {u} -> {v} has no reverse {v} -> {u}"),
            ));
        }
        Ok(())
    }

    /// The node data part of [`MappedGraph::validate`]: sparse features, labels, the split and
    /// the link split files (with their negatives) in range.
    fn validate_node_data(&self) -> Result<()> {
        let n = self.num_nodes();
        let p = |f: &str| self.dir.join(f);
        if let FeaturesRef::Sparse {
            dim,
            indptr,
            indices,
            ..
        } = self.features()
        {
            if indptr.windows(2).any(|w| w[1] < w[0]) {
                return Err(invalid(&p("feat_indptr.bin"), "not monotone"));
            }
            if let Some(&c) = indices.iter().find(|&&c| c as usize >= dim) {
                return Err(GraphError::IdOutOfRange {
                    path: p("feat_indices.bin"),
                    id: c as i64,
                    num_nodes: dim as u64,
                });
            }
        }
        match self.manifest.labels {
            LabelLayout::Classes { num_classes } => {
                if let Some((v, &c)) = self
                    .class_labels()
                    .unwrap()
                    .iter()
                    .enumerate()
                    .find(|(_, &c)| c < -1 || c as i64 >= num_classes as i64)
                {
                    return Err(invalid(
                        &p("labels.bin"),
                        format!("label of node {v} is {c} (must be -1 or < {num_classes})"),
                    ));
                }
            }
            LabelLayout::MultiLabel { .. } => {
                if self.multi_labels().unwrap().iter().any(|&b| b > 1) {
                    return Err(invalid(&p("labels.bin"), "multi-label entries must be 0/1"));
                }
            }
            LabelLayout::None => {}
        }
        if let Some((a, b, c)) = self.split() {
            for (name, ids) in [
                ("train_idx.bin", a),
                ("val_idx.bin", b),
                ("test_idx.bin", c),
            ] {
                if let Some(&x) = ids.iter().find(|&&x| x as usize >= n) {
                    return Err(GraphError::IdOutOfRange {
                        path: p(name),
                        id: x as i64,
                        num_nodes: n as u64,
                    });
                }
                if ids.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(invalid(&p(name), "ids must be sorted and unique"));
                }
            }
        }
        let negs = self.link_negatives();
        if let Some((a, b)) = self.link_split() {
            let mut files = vec![("link_val.bin", a), ("link_test.bin", b)];
            if let Some((_, va, te)) = &negs {
                files.push(("link_val_neg.bin", &va[..]));
                files.push(("link_test_neg.bin", &te[..]));
            }
            for (name, ids) in files {
                if let Some(&x) = ids.iter().find(|&&x| x as usize >= n) {
                    return Err(GraphError::IdOutOfRange {
                        path: p(name),
                        id: x as i64,
                        num_nodes: n as u64,
                    });
                }
            }
        }
        Ok(())
    }

    /// Recomputes every file's SHA-256 and compares it with the manifest (reads every byte).
    ///
    /// # Errors
    /// [`GraphError::Invalid`] naming the first file whose checksum differs.
    pub fn verify_checksums(&self) -> Result<()> {
        for (name, entry) in &self.manifest.files {
            let mut h = Sha256::new();
            let map = &self.regions[name].map;
            h.update(map.bytes());
            map.release_all();
            let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
            if hex != entry.sha256 {
                return Err(invalid(
                    &self.dir.join(name),
                    format!(
                        "sha256 {hex} differs from the manifest's {}: the file changed",
                        entry.sha256
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The [`Dataset`] ([`MappedGraph::validate`] runs first). Its graph and dense f32
    /// features are the mapped files themselves ([`MappedGraph::mapped_csr`],
    /// [`MappedGraph::mapped_features`]: nothing copied, pages read on first touch); f16,
    /// sparse or structural features, labels and splits are copied (O(N) memory).
    /// For a directory converted from a `.npy` dataset it equals, bit for bit, what
    /// [`crate::load_dataset`] returns for the source with the same `opts`: featureless graphs
    /// get the same structural features (`opts.structural_dim`, `opts.seed`); f16 features are
    /// widened to f32.
    ///
    /// # Errors
    /// As [`MappedGraph::validate`]; [`GraphError::Invalid`] naming the manifest when the split
    /// was converted from mask row `r` and `opts.split_index != r` (convert again with that
    /// `--split-index`), or when `opts.structural_dim == 0` for a featureless graph.
    pub fn to_dataset(&self, opts: &LoadOptions) -> Result<Dataset> {
        self.validate()?;
        let mpath = self.dir.join(MANIFEST);
        if let SplitSource::Masks { split_index } = self.manifest.split {
            if split_index != opts.split_index as u64 {
                return Err(invalid(
                    &mpath,
                    format!(
                        "this directory holds mask split {split_index}, not split {} (convert again with --split-index {})",
                        opts.split_index, opts.split_index
                    ),
                ));
            }
        }
        let n = self.num_nodes();
        let graph = self.mapped_csr();
        let (features, structural) = match self.features() {
            FeaturesRef::DenseF32 { .. } => (self.mapped_features().expect("dense f32"), false),
            FeaturesRef::None => {
                if opts.structural_dim == 0 {
                    return Err(invalid(&mpath, "LoadOptions::structural_dim must be >= 1"));
                }
                (
                    structural_features(
                        &graph,
                        self.manifest.directed,
                        opts.structural_dim,
                        opts.seed,
                    ),
                    true,
                )
            }
            FeaturesRef::DenseF16 { dim, data } => (
                Features::dense(n, dim, data.iter().map(|x| x.to_f32()).collect()),
                false,
            ),
            FeaturesRef::Sparse {
                dim,
                indptr,
                indices,
                data,
            } => (
                Features::Sparse {
                    num_nodes: n,
                    dim,
                    indptr: indptr.to_vec(),
                    indices: indices.to_vec(),
                    data: data.to_vec(),
                },
                false,
            ),
        };
        let labels = match self.manifest.labels {
            LabelLayout::None => Labels::None,
            LabelLayout::Classes { num_classes } => Labels::Classes {
                y: self.class_labels().unwrap().to_vec(),
                num_classes: num_classes as usize,
            },
            LabelLayout::MultiLabel { num_labels } => Labels::MultiLabel {
                num_labels: num_labels as usize,
                y: self.multi_labels().unwrap().to_vec(),
            },
        };
        let split = self.split().map(|(a, b, c)| NodeSplit {
            train: a.to_vec(),
            val: b.to_vec(),
            test: c.to_vec(),
        });
        if let (Some(sp), false) = (&split, opts.allow_split_overlap) {
            // the loader's rule: lists of a fixed split must be disjoint unless allowed
            let files = ["train_idx.bin", "val_idx.bin", "test_idx.bin"].map(|f| self.dir.join(f));
            crate::dataset::check_split_disjoint(sp, &files, opts.split_index)?;
        }
        Ok(Dataset {
            name: self.manifest.name.clone(),
            directed: self.manifest.directed,
            graph,
            features,
            structural_features: structural,
            labels,
            num_splits: split.is_some() as usize,
            split,
            // arcs the conversion dropped are recorded in the manifest's notes, not here
            removed: crate::dataset::RemovedArcs::default(),
            link_split: self.stored_link_split(),
        })
    }

    /// One line in the style of [`Dataset::summary`], from the manifest (nothing is read).
    pub fn summary(&self) -> String {
        let m = &self.manifest;
        let feats = match &m.features {
            FeatureLayout::None => "no stored features (structural features at load)".into(),
            FeatureLayout::Dense { dim, dtype } => {
                format!(
                    "features {dim}-d dense {}",
                    format!("{dtype:?}").to_lowercase()
                )
            }
            FeatureLayout::Sparse { dim, nnz } => format!("features {dim}-d sparse (nnz {nnz})"),
        };
        let labels = match &m.labels {
            LabelLayout::None => "no labels".to_string(),
            LabelLayout::Classes { num_classes } => format!("{num_classes} classes"),
            LabelLayout::MultiLabel { num_labels } => format!("multi-label {num_labels}"),
        };
        let split = match self.split() {
            Some((a, b, c)) => format!("split {}/{}/{}", a.len(), b.len(), c.len()),
            None => "no split".into(),
        };
        let link = match self.link_split() {
            Some((a, b)) => format!(
                ", held-out links {}/{} ({})",
                a.len() / 2,
                b.len() / 2,
                match &m.link_negatives {
                    Some(n) if n.kind == super::NEGATIVES_SHARED => format!(
                        "{}/{} shared negative pairs{}",
                        self.get::<u32>("link_val_neg.bin").len() / 2,
                        self.get::<u32>("link_test_neg.bin").len() / 2,
                        n.dataset
                            .as_ref()
                            .map(|d| format!(" as {d} gives them, Hits@{}", n.hits_k.unwrap_or(50)))
                            .unwrap_or_default()
                    ),
                    Some(n) => match &n.dataset {
                        Some(d) => format!("{} fixed negatives each as {d} gives them", n.num_neg),
                        None => format!("{} fixed negatives each, seed {}", n.num_neg, n.seed),
                    },
                    None => "no stored negatives".into(),
                }
            ),
            None => String::new(),
        };
        let bytes: u64 = m.files.values().map(|f| f.bytes).sum();
        format!(
            "{}: {} nodes, {} arcs ({}), {}, {}, {}{} [on-disk format v{}, {:.1} MiB mapped]",
            m.name,
            m.num_nodes,
            m.num_arcs,
            if m.directed { "directed" } else { "undirected" },
            feats,
            labels,
            split,
            link,
            m.version,
            bytes as f64 / (1u64 << 20) as f64
        )
    }
}

/// An arc `u -> v` whose reverse is missing, if any (rows must be sorted); the first in row
/// order.
fn find_asymmetric(g: CsrRef<'_>) -> Option<(u32, u32)> {
    (0..g.num_nodes())
        .into_par_iter()
        .with_min_len(1 << 12)
        .find_map_first(|v| {
            g.neighbors(v)
                .iter()
                .find(|&&u| g.neighbors(u as usize).binary_search(&(v as u32)).is_err())
                .map(|&u| (u, v as u32))
        })
}

/// The first row `r > lo` with `indptr[r] - indptr[lo] >= arcs` (or `N`).
fn row_after(indptr: &[u64], lo: usize, arcs: usize) -> usize {
    let target = indptr[lo] + arcs as u64;
    let n = indptr.len() - 1;
    lo + indptr[lo..=n].partition_point(|&x| x < target).min(n - lo)
}

/// Rows `lo..hi` cut into consecutive ranges of about `arcs` arcs each (at least one row).
fn row_blocks(indptr: &[u64], lo: usize, hi: usize, arcs: usize) -> Vec<(usize, usize)> {
    let mut out = vec![];
    let mut a = lo;
    while a < hi {
        let b = row_after(indptr, a, arcs).clamp(a + 1, hi);
        out.push((a, b));
        a = b;
    }
    out
}

fn map_file(
    dir: &Path,
    manifest: &Manifest,
    name: &str,
    dtype: Dtype,
    len: Option<u64>,
) -> Result<Region> {
    let path = dir.join(name);
    let entry: &FileEntry = manifest.files.get(name).ok_or_else(|| {
        invalid(
            &dir.join(MANIFEST),
            format!("the manifest does not list {name}, which its layout requires"),
        )
    })?;
    if entry.dtype != dtype {
        return Err(GraphError::Dtype {
            path,
            expected: format!("{dtype:?}").to_lowercase(),
            found: format!("{:?}", entry.dtype).to_lowercase(),
        });
    }
    if let Some(len) = len {
        if entry.len != len {
            return Err(GraphError::Shape {
                path,
                expected: format!("[{len}] (from the manifest's counts)"),
                found: vec![entry.len],
            });
        }
    }
    let bytes = entry
        .len
        .checked_mul(dtype.size() as u64)
        .filter(|&b| b == entry.bytes)
        .ok_or_else(|| {
            invalid(
                &dir.join(MANIFEST),
                format!(
                    "{name}: bytes {} != len {} x {}",
                    entry.bytes,
                    entry.len,
                    dtype.size()
                ),
            )
        })?;
    let map = SharedMap::open(&path)?;
    let on_disk = map.len() as u64;
    if on_disk != bytes {
        return Err(invalid(
            &path,
            format!(
                "{} bytes on disk, the manifest says {bytes} ({})",
                on_disk,
                if on_disk < bytes {
                    "truncated"
                } else {
                    "over-long"
                }
            ),
        ));
    }
    // an empty file has no mapping (nothing to align: a zero-length array reads as empty)
    if !map.is_empty() && !(map.bytes().as_ptr() as usize).is_multiple_of(dtype.size()) {
        return Err(invalid(&path, "mapping is misaligned for its dtype"));
    }
    Ok(Region {
        map,
        dtype,
        len: entry.len as usize,
    })
}
