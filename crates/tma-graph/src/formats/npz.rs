//! `.npz` archives (a zip of `.npy` members, stored or deflated) in the gnn-benchmark / PyG
//! layout (`torch_geometric.io.read_npz`): the adjacency as scipy CSR arrays
//! `adj_data/adj_indices/adj_indptr/adj_shape` (row `i`, column `j` = arc `i -> j`), features
//! as CSR `attr_data/attr_indices/attr_indptr/attr_shape` or dense `attr_matrix`, `labels`
//! (`[N]` classes, `[N, C]` 0/1 rows, or CSR `labels_data/labels_indices/labels_indptr/
//! labels_shape` for multi-label). Members are decoded by the workspace's `.npy` codec.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use super::raw::{classes, invalid, node_count, Direction, Raw};
use crate::csr::Csr;
use crate::dataset::Labels;
use crate::error::{GraphError, Result};
use crate::features::Features;
use crate::npy::{Element, NpyFile};

/// An open `.npz` archive whose members are read as [`NpyFile`]s.
pub struct NpzArchive {
    path: PathBuf,
    zip: zip::ZipArchive<BufReader<std::fs::File>>,
}

impl std::fmt::Debug for NpzArchive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NpzArchive")
            .field("path", &self.path)
            .field("keys", &self.keys())
            .finish()
    }
}

impl NpzArchive {
    /// Opens the archive at `path` (reads its central directory).
    ///
    /// # Errors
    /// [`GraphError::Io`] if the file cannot be opened; [`GraphError::Invalid`] if it is not a
    /// zip archive (truncated, or another kind of file).
    pub fn open(path: &Path) -> Result<NpzArchive> {
        let f = std::fs::File::open(path).map_err(|source| GraphError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let zip = zip::ZipArchive::new(BufReader::new(f)).map_err(|e| {
            invalid(
                path,
                format!("not a readable .npz (zip) archive: {e} (truncated or not an .npz file)"),
            )
        })?;
        Ok(NpzArchive {
            path: path.to_path_buf(),
            zip,
        })
    }

    /// The archive's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The array names (members without `.npy`), sorted.
    pub fn keys(&self) -> Vec<String> {
        let mut k: Vec<String> = self
            .zip
            .file_names()
            .map(|n| n.strip_suffix(".npy").unwrap_or(n).to_string())
            .collect();
        k.sort();
        k
    }

    /// Whether the archive holds `key.npy`.
    pub fn contains(&self, key: &str) -> bool {
        self.zip.index_for_name(&format!("{key}.npy")).is_some()
    }

    /// How errors name member `key`: `FILE.npz:key.npy`.
    pub fn member_path(&self, key: &str) -> PathBuf {
        PathBuf::from(format!("{}:{key}.npy", self.path.display()))
    }

    /// Member `key` decoded as a `.npy` file (its errors name `FILE.npz:key.npy`).
    ///
    /// # Errors
    /// [`GraphError::Invalid`] for a missing member (the error lists the members) or a
    /// corrupt one (bad deflate data, CRC mismatch); the `.npy` codec's errors.
    pub fn array(&mut self, key: &str) -> Result<NpyFile> {
        let mp = self.member_path(key);
        if !self.contains(key) {
            return Err(invalid(
                &self.path,
                format!(
                    "missing member {key}.npy (the archive holds: {})",
                    self.keys().join(", ")
                ),
            ));
        }
        let mut m = self
            .zip
            .by_name(&format!("{key}.npy"))
            .map_err(|e| invalid(&mp, format!("unreadable archive member: {e}")))?;
        let mut bytes = Vec::with_capacity(m.size() as usize);
        m.read_to_end(&mut bytes)
            .map_err(|e| invalid(&mp, format!("corrupt archive member: {e}")))?;
        NpyFile::from_bytes(&mp, bytes)
    }

    /// Member `key` if present.
    ///
    /// # Errors
    /// As [`NpzArchive::array`] for a present member.
    pub fn array_opt(&mut self, key: &str) -> Result<Option<NpyFile>> {
        if self.contains(key) {
            self.array(key).map(Some)
        } else {
            Ok(None)
        }
    }
}

fn c_order<T: Element>(f: &NpyFile) -> Result<Vec<T>> {
    Ok(f.to_array::<T>()?.data)
}

/// Any integer (or bool) array as `i64` in C order.
pub(crate) fn int_vec(f: &NpyFile) -> Result<Vec<i64>> {
    Ok(match f.descr() {
        "<i8" => c_order::<i64>(f)?,
        "<i4" => c_order::<i32>(f)?.into_iter().map(i64::from).collect(),
        "<u4" => c_order::<u32>(f)?.into_iter().map(i64::from).collect(),
        "|u1" => c_order::<u8>(f)?.into_iter().map(i64::from).collect(),
        "|b1" => c_order::<bool>(f)?.into_iter().map(i64::from).collect(),
        "<u8" => {
            let v = c_order::<u64>(f)?;
            if let Some(&x) = v.iter().find(|&&x| x > i64::MAX as u64) {
                return Err(invalid(f.path(), format!("value {x} exceeds int64")));
            }
            v.into_iter().map(|x| x as i64).collect()
        }
        other => {
            return Err(GraphError::Dtype {
                path: f.path().to_path_buf(),
                expected: "an integer dtype (<i8, <i4, <u8, <u4, |u1, |b1)".into(),
                found: other.to_string(),
            })
        }
    })
}

/// Any float, integer or bool array as finite `f32` in C order.
pub(crate) fn float_vec(f: &NpyFile) -> Result<Vec<f32>> {
    let v: Vec<f32> = match f.descr() {
        "<f4" => c_order::<f32>(f)?,
        "<f8" => c_order::<f64>(f)?.into_iter().map(|x| x as f32).collect(),
        _ => int_vec(f)
            .map_err(|_| GraphError::Dtype {
                path: f.path().to_path_buf(),
                expected: "a float dtype (<f4, <f8) or an integer one".into(),
                found: f.descr().to_string(),
            })?
            .into_iter()
            .map(|x| x as f32)
            .collect(),
    };
    if let Some(k) = v.iter().position(|x| !x.is_finite()) {
        let bad = v.iter().filter(|x| !x.is_finite()).count();
        return Err(invalid(
            f.path(),
            format!(
                "{bad} non-finite value{} (NaN or infinity); the first is element {k} = {}",
                if bad == 1 { "" } else { "s" },
                v[k]
            ),
        ));
    }
    Ok(v)
}

/// The `[rows, cols]` of a `*_shape` member.
fn shape2(f: &NpyFile) -> Result<(u64, u64)> {
    let v = int_vec(f)?;
    match v.as_slice() {
        [r, c] if *r >= 0 && *c >= 0 => Ok((*r as u64, *c as u64)),
        _ => Err(invalid(
            f.path(),
            format!("expected two non-negative integers (rows, columns), found {v:?}"),
        )),
    }
}

/// A scipy CSR matrix stored as `{p}_data`, `{p}_indices`, `{p}_indptr`, `{p}_shape`, checked:
/// `(rows, cols, indptr, indices, data)`; `data` is `None` without a `{p}_data` member when
/// `data_optional`.
#[allow(clippy::type_complexity)]
fn csr_members(
    z: &mut NpzArchive,
    p: &str,
    data_optional: bool,
) -> Result<(usize, usize, Vec<u64>, Vec<u32>, Option<Vec<f32>>)> {
    let shape_f = z.array(&format!("{p}_shape"))?;
    let (rows, cols) = shape2(&shape_f)?;
    let ip_f = z.array(&format!("{p}_indptr"))?;
    ip_f.expect_ndim(1, "[rows + 1]")?;
    let ix_f = z.array(&format!("{p}_indices"))?;
    ix_f.expect_ndim(1, "[nnz]")?;
    let indptr = int_vec(&ip_f)?;
    if indptr.len() as u64 != rows + 1 {
        return Err(ip_f.shape_err(&format!("[{}] ({p}_shape[0] + 1)", rows + 1)));
    }
    let indices_i = int_vec(&ix_f)?;
    let nnz = indices_i.len();
    if indptr[0] != 0 {
        return Err(invalid(
            ip_f.path(),
            format!("indptr[0] = {} (must be 0)", indptr[0]),
        ));
    }
    if let Some(v) = indptr.windows(2).position(|w| w[1] < w[0]) {
        return Err(invalid(
            ip_f.path(),
            format!(
                "indptr not monotone: indptr[{v}] = {} > indptr[{}] = {}",
                indptr[v],
                v + 1,
                indptr[v + 1]
            ),
        ));
    }
    if *indptr.last().unwrap() as usize != nnz {
        return Err(invalid(
            ip_f.path(),
            format!(
                "indptr[{rows}] = {} but {p}_indices holds {nnz} entries",
                indptr.last().unwrap()
            ),
        ));
    }
    let mut indices = Vec::with_capacity(nnz);
    for &c in &indices_i {
        if c < 0 || c as u64 >= cols {
            return Err(GraphError::IdOutOfRange {
                path: ix_f.path().to_path_buf(),
                id: c,
                num_nodes: cols,
            });
        }
        indices.push(c as u32);
    }
    let data = match z.array_opt(&format!("{p}_data"))? {
        Some(d) => {
            let v = float_vec(&d)?;
            if v.len() != nnz {
                return Err(d.shape_err(&format!("[{nnz}] (as {p}_indices)")));
            }
            Some(v)
        }
        None if data_optional => None,
        None => return Err(z.array(&format!("{p}_data")).unwrap_err()),
    };
    let rows = node_count(&z.member_path(&format!("{p}_shape")), rows)?;
    Ok((
        rows,
        cols as usize,
        indptr.into_iter().map(|x| x as u64).collect(),
        indices,
        data,
    ))
}

/// Whether every arc `u -> v` of the in-neighbour CSR `g` has its reverse.
fn symmetric(g: &Csr) -> bool {
    (0..g.num_nodes()).all(|v| {
        g.neighbors(v)
            .iter()
            .all(|&u| g.neighbors(u as usize).binary_search(&(v as u32)).is_ok())
    })
}

pub(crate) fn read(path: &Path, undirected: bool) -> Result<Raw> {
    let mut z = NpzArchive::open(path)?;
    let mut notes = Vec::new();
    let mut used: Vec<&'static str> = Vec::new();

    // ---- adjacency
    let (n, cols, indptr, indices, weights) = csr_members(&mut z, "adj", true)?;
    used.extend(["adj_shape", "adj_indptr", "adj_indices", "adj_data"]);
    if cols != n {
        return Err(invalid(
            &z.member_path("adj_shape"),
            format!("the adjacency is {n} x {cols}; a graph's is square"),
        ));
    }
    let (mut src, mut dst) = (
        Vec::with_capacity(indices.len()),
        Vec::with_capacity(indices.len()),
    );
    let (mut zeros, mut weighted) = (0usize, 0usize);
    for i in 0..n {
        for k in indptr[i] as usize..indptr[i + 1] as usize {
            if let Some(w) = &weights {
                if w[k] == 0.0 {
                    zeros += 1;
                    continue;
                }
                if w[k] != 1.0 {
                    weighted += 1;
                }
            }
            src.push(i as u32);
            dst.push(indices[k]);
        }
    }
    if zeros > 0 {
        notes.push(format!(
            "{}: {zeros} explicit zero entr{} of the adjacency dropped (not arcs)",
            z.member_path("adj_data").display(),
            if zeros == 1 { "y" } else { "ies" }
        ));
    }
    if weighted > 0 {
        notes.push(format!(
            "{}: {weighted} edge weight{} other than 1 ignored: tma trains on unweighted graphs",
            z.member_path("adj_data").display(),
            if weighted == 1 { "" } else { "s" }
        ));
    }
    let direction = if undirected {
        Direction::Undirected
    } else {
        let keep: Vec<usize> = (0..src.len()).filter(|&k| src[k] != dst[k]).collect();
        let g = Csr::from_edges(
            n,
            &keep.iter().map(|&k| src[k]).collect::<Vec<_>>(),
            &keep.iter().map(|&k| dst[k]).collect::<Vec<_>>(),
        );
        if symmetric(&g) {
            Direction::Undirected
        } else {
            notes.push(format!(
                "{}: the adjacency is not symmetric: arcs read as directed (PyG's read_npz \
                 makes it undirected; pass --undirected for that)",
                path.display()
            ));
            Direction::Directed
        }
    };

    // ---- features
    let features = read_features(&mut z, n, &mut used)?;

    // ---- labels
    let labels = read_labels(&mut z, n, &mut used)?;

    let ignored: Vec<String> = z
        .keys()
        .into_iter()
        .filter(|k| !used.contains(&k.as_str()))
        .collect();
    if !ignored.is_empty() {
        notes.push(format!(
            "{}: members not read: {} (names and metadata are not used)",
            path.display(),
            ignored.join(", ")
        ));
    }

    let name = {
        let f = path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        f.strip_suffix(".npz").unwrap_or(&f).to_string()
    };
    Ok(Raw {
        name,
        direction,
        num_nodes: n,
        src,
        dst,
        edge_file: z.member_path("adj_indices"),
        features,
        labels,
        split: None,
        num_splits: 0,
        notes,
        node_ids: None,
        link: None,
    })
}

/// The node features of the archive (`attr_matrix` dense, or `attr_*` CSR members) for `n`
/// nodes, if it has any; the members read are added to `used`.
fn read_features(
    z: &mut NpzArchive,
    n: usize,
    used: &mut Vec<&'static str>,
) -> Result<Option<Features>> {
    Ok(if z.contains("attr_matrix") {
        used.push("attr_matrix");
        let f = z.array("attr_matrix")?;
        f.expect_ndim(2, "[N, D]")?;
        let (r, d) = (f.shape()[0] as usize, f.shape()[1] as usize);
        if r != n {
            return Err(f.shape_err(&format!("[{n}, D] (N from adj_shape)")));
        }
        Some(Features::from_dense_like_loader(n, d, float_vec(&f)?))
    } else if z.contains("attr_indptr") || z.contains("attr_shape") {
        used.extend(["attr_shape", "attr_indptr", "attr_indices", "attr_data"]);
        let (r, d, ip, ix, data) = csr_members(z, "attr", false)?;
        if r != n {
            return Err(invalid(
                &z.member_path("attr_shape"),
                format!("{r} rows, but adj_shape says {n} nodes"),
            ));
        }
        Some(Features::from_csr_like_loader(
            n,
            d,
            ip,
            ix,
            data.unwrap_or_default(),
        ))
    } else {
        None
    })
}

/// The labels of the archive (`labels` `[N]` classes or `[N, C]` 0/1, or `labels_*` CSR
/// members, multi-label) for `n` nodes; the members read are added to `used`.
fn read_labels(z: &mut NpzArchive, n: usize, used: &mut Vec<&'static str>) -> Result<Labels> {
    Ok(if z.contains("labels") {
        used.push("labels");
        let f = z.array("labels")?;
        match f.shape() {
            [r] if *r as usize == n => {
                let y = int_vec(&f)?;
                classes(f.path(), y, |v| format!("element {v}"))?
            }
            [r, c] if *r as usize == n => {
                let c = *c as usize;
                let y = int_vec(&f)?;
                if let Some(k) = y.iter().position(|&b| b != 0 && b != 1) {
                    return Err(invalid(
                        f.path(),
                        format!(
                            "multi-label entry ({}, {}) = {}, must be 0 or 1",
                            k / c,
                            k % c,
                            y[k]
                        ),
                    ));
                }
                Labels::MultiLabel {
                    num_labels: c,
                    y: y.into_iter().map(|b| b as u8).collect(),
                }
            }
            _ => return Err(f.shape_err(&format!("[{n}] or [{n}, C]"))),
        }
    } else if z.contains("labels_indptr") || z.contains("labels_shape") {
        used.extend([
            "labels_shape",
            "labels_indptr",
            "labels_indices",
            "labels_data",
        ]);
        let (r, c, ip, ix, _) = csr_members(z, "labels", true)?;
        if r != n {
            return Err(invalid(
                &z.member_path("labels_shape"),
                format!("{r} rows, but adj_shape says {n} nodes"),
            ));
        }
        let mut y = vec![0u8; n * c];
        for v in 0..n {
            for k in ip[v] as usize..ip[v + 1] as usize {
                y[v * c + ix[k] as usize] = 1;
            }
        }
        Labels::MultiLabel { num_labels: c, y }
    } else {
        Labels::None
    })
}
