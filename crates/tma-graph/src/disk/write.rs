//! Writing the format: [`ArrayWriter`] (a streaming, hashing array file writer) and
//! [`write_dataset`] (an in-memory [`Dataset`] to a directory).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{
    FeatureLayout, FileEntry, LabelLayout, Manifest, Provenance, SplitSource, FORMAT_NAME,
    FORMAT_VERSION,
};
use crate::buf::Dtype;
use crate::dataset::{Dataset, Labels};
use crate::error::{GraphError, Result};
use crate::features::Features;

/// An element type of the format's array files (little-endian on disk).
pub trait DiskElem: Copy + Send + Sync + 'static {
    /// The manifest's dtype.
    const DTYPE: Dtype;
    /// Appends the little-endian bytes.
    fn put(self, out: &mut Vec<u8>);
}

macro_rules! disk_elem {
    ($t:ty, $d:expr) => {
        impl DiskElem for $t {
            const DTYPE: Dtype = $d;
            #[inline]
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    };
}
disk_elem!(u64, Dtype::U64);
disk_elem!(u32, Dtype::U32);
disk_elem!(i32, Dtype::I32);
disk_elem!(u8, Dtype::U8);
disk_elem!(f32, Dtype::F32);
disk_elem!(half::f16, Dtype::F16);

const BUF: usize = 1 << 20;

/// Streams elements of one type to a file, hashing them on the way (SHA-256), with a 1 MiB
/// buffer; [`ArrayWriter::finish`] returns the manifest entry.
pub struct ArrayWriter<T: DiskElem> {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    hash: Sha256,
    len: u64,
    _t: std::marker::PhantomData<T>,
}

fn io_err(path: &Path, source: std::io::Error) -> GraphError {
    GraphError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl<T: DiskElem> ArrayWriter<T> {
    /// Creates (truncates) `path`.
    ///
    /// # Errors
    /// [`GraphError::Io`] naming `path`.
    pub fn create(path: &Path) -> Result<Self> {
        let file = File::create(path).map_err(|e| io_err(path, e))?;
        Ok(ArrayWriter {
            path: path.to_path_buf(),
            file,
            buf: Vec::with_capacity(BUF),
            hash: Sha256::new(),
            len: 0,
            _t: std::marker::PhantomData,
        })
    }

    /// Appends one element.
    ///
    /// # Errors
    /// [`GraphError::Io`] naming the file.
    #[inline]
    pub fn push(&mut self, x: T) -> Result<()> {
        x.put(&mut self.buf);
        self.len += 1;
        if self.buf.len() >= BUF {
            self.flush_buf()?;
        }
        Ok(())
    }

    /// Appends a slice.
    ///
    /// # Errors
    /// [`GraphError::Io`] naming the file.
    pub fn extend(&mut self, xs: &[T]) -> Result<()> {
        for &x in xs {
            self.push(x)?;
        }
        Ok(())
    }

    /// Elements written so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn flush_buf(&mut self) -> Result<()> {
        self.hash.update(&self.buf);
        self.file
            .write_all(&self.buf)
            .map_err(|e| io_err(&self.path, e))?;
        self.buf.clear();
        Ok(())
    }

    /// Flushes, fsyncs and returns the file's manifest entry.
    ///
    /// # Errors
    /// [`GraphError::Io`] naming the file.
    pub fn finish(mut self) -> Result<FileEntry> {
        self.flush_buf()?;
        self.file.sync_all().map_err(|e| io_err(&self.path, e))?;
        let sha = self.hash.finalize();
        Ok(FileEntry {
            dtype: T::DTYPE,
            len: self.len,
            bytes: self.len * T::DTYPE.size() as u64,
            sha256: sha.iter().map(|b| format!("{b:02x}")).collect(),
        })
    }
}

/// Writes `data` to `dir/name` and records it in `files`.
pub(crate) fn write_array<T: DiskElem>(
    dir: &Path,
    name: &str,
    data: &[T],
    files: &mut BTreeMap<String, FileEntry>,
) -> Result<()> {
    let mut w = ArrayWriter::<T>::create(&dir.join(name))?;
    w.extend(data)?;
    files.insert(name.to_string(), w.finish()?);
    Ok(())
}

/// Writes the node data of `ds` into `dir`: features (unless structural: those are generated
/// again at load), labels and the split lists, each recorded in `files`. Returns the feature and
/// label layouts and whether a split was written (its [`SplitSource`] is the caller's to say).
///
/// # Errors
/// [`GraphError::Io`] naming the file that could not be written.
pub(crate) fn write_node_data(
    ds: &Dataset,
    dir: &Path,
    files: &mut BTreeMap<String, FileEntry>,
) -> Result<(FeatureLayout, LabelLayout, bool)> {
    let features = if ds.structural_features {
        FeatureLayout::None
    } else {
        match &ds.features {
            Features::Dense { dim, data, .. } => {
                write_array(dir, "features.bin", data, files)?;
                FeatureLayout::Dense {
                    dim: *dim as u64,
                    dtype: Dtype::F32,
                }
            }
            Features::Sparse {
                dim,
                indptr,
                indices,
                data,
                ..
            } => {
                write_array(dir, "feat_indptr.bin", indptr, files)?;
                write_array(dir, "feat_indices.bin", indices, files)?;
                write_array(dir, "feat_data.bin", data, files)?;
                FeatureLayout::Sparse {
                    dim: *dim as u64,
                    nnz: indices.len() as u64,
                }
            }
        }
    };
    let labels = match &ds.labels {
        Labels::None => LabelLayout::None,
        Labels::Classes { y, num_classes } => {
            write_array(dir, "labels.bin", y, files)?;
            LabelLayout::Classes {
                num_classes: *num_classes as u64,
            }
        }
        Labels::MultiLabel { num_labels, y } => {
            write_array(dir, "labels.bin", y, files)?;
            LabelLayout::MultiLabel {
                num_labels: *num_labels as u64,
            }
        }
    };
    if let Some(s) = &ds.split {
        write_array(dir, "train_idx.bin", &s.train, files)?;
        write_array(dir, "val_idx.bin", &s.val, files)?;
        write_array(dir, "test_idx.bin", &s.test, files)?;
    }
    Ok((features, labels, ds.split.is_some()))
}

/// Writes an in-memory dataset to `dir` (created if missing) in the on-disk format, manifest
/// last. Structural features (a featureless graph's generated columns) are not stored: the
/// manifest says "no features" and loading generates them again from the load options, as the
/// `.npy` loader does. The split is recorded as [`SplitSource::Index`] when present; a link
/// split (`Dataset::link_split`) as the held-out pairs and, when it has them, their negatives
/// (docs/graph-format.md, "Link split"; `ds.graph` must then be the training graph).
///
/// # Errors
/// [`GraphError::Io`] naming the file that could not be written.
pub fn write_dataset(ds: &Dataset, dir: &Path, provenance: &Provenance) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
    let mut files = BTreeMap::new();
    write_array(dir, "indptr.bin", &ds.graph.indptr, &mut files)?;
    write_array(dir, "indices.bin", &ds.graph.indices, &mut files)?;
    let (features, labels, has_split) = write_node_data(ds, dir, &mut files)?;
    let split = if has_split {
        SplitSource::Index
    } else {
        SplitSource::None
    };
    // a link split the dataset ships: the held-out pairs and, when it has them, its negatives
    let mut link_negatives = None;
    if let Some(ls) = &ds.link_split {
        let flat = |p: &[(u32, u32)]| p.iter().flat_map(|&(u, v)| [u, v]).collect::<Vec<_>>();
        write_array(dir, "link_val.bin", &flat(&ls.val_pos), &mut files)?;
        write_array(dir, "link_test.bin", &flat(&ls.test_pos), &mut files)?;
        let dataset = ls.protocol.as_ref().map(|p| p.dataset.clone());
        let hits_k = ls
            .protocol
            .as_ref()
            .and_then(|p| p.hits_k)
            .map(|k| k as u64);
        if let Some(sh) = ls.protocol.as_ref().and_then(|p| p.shared.as_ref()) {
            write_array(dir, "link_val_neg.bin", &flat(&sh.val), &mut files)?;
            write_array(dir, "link_test_neg.bin", &flat(&sh.test), &mut files)?;
            link_negatives = Some(super::LinkNegativesLayout {
                version: super::LINK_SPLIT_VERSION,
                kind: super::NEGATIVES_SHARED.into(),
                num_neg: 0,
                seed: 0,
                dataset,
                hits_k,
            });
        } else if let Some(n) = &ls.negatives {
            write_array(dir, "link_val_neg.bin", &n.val, &mut files)?;
            write_array(dir, "link_test_neg.bin", &n.test, &mut files)?;
            link_negatives = Some(super::LinkNegativesLayout {
                version: super::LINK_SPLIT_VERSION,
                kind: super::NEGATIVES_PER_SOURCE.into(),
                num_neg: n.num_neg as u64,
                seed: n.seed,
                dataset,
                hits_k,
            });
        }
    }
    Manifest {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        name: ds.name.clone(),
        directed: ds.directed,
        num_nodes: ds.num_nodes() as u64,
        num_arcs: ds.num_edges() as u64,
        features,
        labels,
        split,
        link_split: ds.link_split.is_some(),
        link_negatives,
        files,
        provenance: provenance.clone(),
    }
    .write(dir)
}
