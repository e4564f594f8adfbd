//! Named parameters in one flat `f32` buffer, so model averaging is a plain vector mean.

use crate::NnError;
use std::collections::HashMap;
use std::path::Path;

/// One named tensor inside a [`ParamSet`]: `data[offset .. offset + numel(shape)]`, row-major.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    /// Dotted PyG-style name, e.g. `encoder.0.lin_l.weight`.
    pub name: String,
    /// Tensor shape (PyTorch's: linear weights `[out, in]`).
    pub shape: Vec<usize>,
    /// First element in the flat buffer.
    pub offset: usize,
}

impl ParamSpec {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// All parameters of a model in one flat buffer with named, non-overlapping, contiguous views
/// (in `specs` order). Two `ParamSet`s of the same model have identical `specs`, so averaging,
/// Adam and gradient clipping are loops over `data`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ParamSet {
    /// The named views, in buffer order.
    pub specs: Vec<ParamSpec>,
    /// All scalars.
    pub data: Vec<f32>,
}

impl ParamSet {
    /// A zero-filled set with tensors `(name, shape)` laid out in this order.
    pub fn from_shapes(shapes: &[(String, Vec<usize>)]) -> ParamSet {
        let (specs, total) =
            ParamSet::layout(shapes).expect("parameter count fits the address space");
        ParamSet {
            specs,
            data: vec![0.0; total],
        }
    }

    /// The layout [`ParamSet::from_shapes`] gives `shapes` (each tensor's offset, in order)
    /// and the total number of scalars, without allocating them; `None` when the count
    /// overflows `usize`.
    pub fn layout(shapes: &[(String, Vec<usize>)]) -> Option<(Vec<ParamSpec>, usize)> {
        let mut specs = Vec::with_capacity(shapes.len());
        let mut offset = 0usize;
        for (name, shape) in shapes {
            let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
            specs.push(ParamSpec {
                name: name.clone(),
                shape: shape.clone(),
                offset,
            });
            offset = offset.checked_add(numel)?;
        }
        Some((specs, offset))
    }

    /// Total number of scalars.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True when there are no scalars.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Same layout, all zeros (a gradient buffer).
    pub fn zeros_like(&self) -> ParamSet {
        ParamSet {
            specs: self.specs.clone(),
            data: vec![0.0; self.data.len()],
        }
    }

    /// Set every scalar to zero (reuse a gradient buffer).
    pub fn fill_zero(&mut self) {
        self.data.fill(0.0);
    }

    /// The spec named `name`.
    pub fn spec(&self, name: &str) -> Option<&ParamSpec> {
        self.specs.iter().find(|s| s.name == name)
    }

    /// The tensor named `name` (flat, row-major).
    pub fn get(&self, name: &str) -> Option<&[f32]> {
        let s = self.spec(name)?;
        Some(&self.data[s.offset..s.offset + s.numel()])
    }

    /// The tensor named `name`, mutable.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut [f32]> {
        let (o, n) = {
            let s = self.spec(name)?;
            (s.offset, s.numel())
        };
        Some(&mut self.data[o..o + n])
    }

    /// Euclidean norm of all scalars (f64 accumulation).
    pub fn l2_norm(&self) -> f32 {
        self.data
            .iter()
            .map(|&v| (v as f64) * (v as f64))
            .sum::<f64>()
            .sqrt() as f32
    }

    /// Write as a safetensors file (F32 tensors named as the specs; the spec order is kept in
    /// the header metadata under `tma.param_order`). Writes `path.tmp` then renames, so readers
    /// never see a half-written file.
    ///
    /// # Errors
    /// [`NnError::Io`] when the file cannot be written.
    pub fn save_safetensors(&self, path: &Path) -> Result<(), NnError> {
        self.save_safetensors_with(path, &[])
    }

    /// [`ParamSet::save_safetensors`] with `meta`'s `(key, value)` pairs added to the header's
    /// `__metadata__` (e.g. [`crate::Model::file_metadata`] under
    /// [`crate::Model::METADATA_KEY`]).
    ///
    /// # Errors
    /// As [`ParamSet::save_safetensors`].
    pub fn save_safetensors_with(
        &self,
        path: &Path,
        extra: &[(&str, String)],
    ) -> Result<(), NnError> {
        let bytes: Vec<Vec<u8>> = self
            .specs
            .iter()
            .map(|s| {
                self.data[s.offset..s.offset + s.numel()]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect()
            })
            .collect();
        let mut views = Vec::with_capacity(self.specs.len());
        for (s, b) in self.specs.iter().zip(&bytes) {
            let v =
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, s.shape.clone(), b)
                    .map_err(|e| NnError::Format {
                    path: path.to_path_buf(),
                    reason: e.to_string(),
                })?;
            views.push((s.name.clone(), v));
        }
        let order = self
            .specs
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(",");
        let mut meta: HashMap<String, String> = [
            ("tma.param_order".to_string(), order),
            (DATA_SHA256_KEY.to_string(), data_sha256(&bytes)),
        ]
        .into();
        for (k, v) in extra {
            meta.insert(k.to_string(), v.clone());
        }
        let buf =
            safetensors::tensor::serialize(views, &Some(meta)).map_err(|e| NnError::Format {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
        // durably: a model renamed into place is whole after a crash
        tma_graph::durable::write(path, &buf).map_err(|e| match e {
            tma_graph::GraphError::Io { path, source } => NnError::Io { path, source },
            other => NnError::Format {
                path: path.to_path_buf(),
                reason: other.to_string(),
            },
        })
    }

    /// Read a safetensors file of F32 tensors. Tensor order: the `tma.param_order` metadata when
    /// present (files we wrote), else by name.
    ///
    /// # Errors
    /// [`NnError::Io`] when unreadable, [`NnError::Format`] (naming the file) when it is not a
    /// valid safetensors file of F32 tensors.
    pub fn load_safetensors(path: &Path) -> Result<ParamSet, NnError> {
        Ok(ParamSet::load_safetensors_with(path)?.0)
    }

    /// [`ParamSet::load_safetensors`] and the header's `__metadata__` (empty when the file has
    /// none).
    ///
    /// # Errors
    /// As [`ParamSet::load_safetensors`].
    pub fn load_safetensors_with(
        path: &Path,
    ) -> Result<(ParamSet, HashMap<String, String>), NnError> {
        let buf = std::fs::read(path).map_err(|source| NnError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let fmt = |reason: String| NnError::Format {
            path: path.to_path_buf(),
            reason,
        };
        let st = safetensors::SafeTensors::deserialize(&buf).map_err(|e| fmt(e.to_string()))?;
        let (_, meta) =
            safetensors::SafeTensors::read_metadata(&buf).map_err(|e| fmt(e.to_string()))?;
        let mut names: Vec<String> = st.names().into_iter().cloned().collect();
        names.sort();
        if let Some(order) = meta
            .metadata()
            .as_ref()
            .and_then(|m| m.get("tma.param_order"))
        {
            let ordered: Vec<String> = if order.is_empty() {
                Vec::new()
            } else {
                order.split(',').map(str::to_string).collect()
            };
            let mut sorted = ordered.clone();
            sorted.sort();
            if sorted != names {
                return Err(fmt(
                    "tma.param_order does not list the file's tensors".into()
                ));
            }
            names = ordered;
        }
        let mut shapes = Vec::with_capacity(names.len());
        for n in &names {
            let t = st.tensor(n).map_err(|e| fmt(e.to_string()))?;
            if t.dtype() != safetensors::Dtype::F32 {
                return Err(fmt(format!(
                    "tensor {n} has dtype {:?}, expected F32",
                    t.dtype()
                )));
            }
            shapes.push((n.clone(), t.shape().to_vec()));
        }
        let mut p = ParamSet::from_shapes(&shapes);
        for s in &p.specs.clone() {
            let t = st.tensor(&s.name).map_err(|e| fmt(e.to_string()))?;
            let dst = &mut p.data[s.offset..s.offset + s.numel()];
            for (d, b) in dst.iter_mut().zip(t.data().chunks_exact(4)) {
                *d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        let meta = meta.metadata().clone().unwrap_or_default();
        if let Some(want) = meta.get(DATA_SHA256_KEY) {
            let bytes: Vec<Vec<u8>> = p
                .specs
                .iter()
                .map(|s| {
                    p.data[s.offset..s.offset + s.numel()]
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect()
                })
                .collect();
            let got = data_sha256(&bytes);
            if &got != want {
                return Err(fmt(format!(
                    "damaged: its tensors' sha256 is {got}, its header says {want} (written by tma; a changed byte, e.g. a disk or copy error)"
                )));
            }
        }
        Ok((p, meta))
    }
}

/// The `__metadata__` key under which [`ParamSet::save_safetensors`] records the sha256 of
/// the tensors' bytes (little-endian f32, the tensors in `tma.param_order`), hex; checked by
/// [`ParamSet::load_safetensors`] when present (files of other writers have none).
pub const DATA_SHA256_KEY: &str = "tma.data_sha256";

/// Hex sha256 of `parts` concatenated.
fn data_sha256(parts: &[Vec<u8>]) -> String {
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ParamSet {
        let mut p = ParamSet::from_shapes(&[
            ("b.weight".into(), vec![2, 3]),
            ("a.bias".into(), vec![2]),
            ("c.act".into(), vec![1]),
        ]);
        for (i, v) in p.data.iter_mut().enumerate() {
            *v = (i as f32 * 0.7).sin() * 1e3 + 1e-7 * i as f32;
        }
        p
    }

    #[test]
    fn layout_and_views() {
        let p = sample();
        assert_eq!(p.len(), 9);
        assert_eq!(p.spec("a.bias").unwrap().offset, 6);
        assert_eq!(p.get("a.bias").unwrap(), &p.data[6..8]);
        assert!(p.get("nope").is_none());
        let z = p.zeros_like();
        assert_eq!(z.specs, p.specs);
        assert!(z.data.iter().all(|&v| v == 0.0));
        let q = ParamSet::from_shapes(&[("x".into(), vec![2])]);
        let mut q = q;
        q.data = vec![3.0, 4.0];
        assert_eq!(q.l2_norm(), 5.0);
    }

    #[test]
    fn safetensors_round_trip_exact() {
        let dir = std::env::temp_dir().join(format!("tma-nn-st-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.safetensors");
        let p = sample();
        p.save_safetensors(&path).unwrap();
        let q = ParamSet::load_safetensors(&path).unwrap();
        assert_eq!(p, q); // same names, order, shapes, offsets, bit-identical values
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_flipped_bit_in_a_tensor_is_refused_and_files_without_a_checksum_load() {
        // regression: a model file with a changed byte in its tensors loaded (and evaluated)
        // without a word
        let dir = std::env::temp_dir().join(format!("tma-nn-flip-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.safetensors");
        let p = sample();
        p.save_safetensors(&path).unwrap();
        let (_, meta) = ParamSet::load_safetensors_with(&path).unwrap();
        // the sha256 of the 9 values' little-endian bytes in file order (b.weight, a.bias, c.act)
        let bytes: Vec<u8> = p.data.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(meta[DATA_SHA256_KEY], data_sha256(&[bytes]));
        assert_eq!(meta[DATA_SHA256_KEY].len(), 64);
        let mut buf = std::fs::read(&path).unwrap();
        let last = buf.len() - 1; // the last tensor's last byte
        buf[last] ^= 0x01;
        std::fs::write(&path, &buf).unwrap();
        let e = ParamSet::load_safetensors(&path).unwrap_err();
        assert!(matches!(e, NnError::Format { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("p.safetensors") && msg.contains("damaged") && msg.contains("sha256"),
            "{msg}"
        );
        // a file of another writer (no checksum in its header) loads as it is
        let raw: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let view =
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![2], &raw).unwrap();
        let other = dir.join("other.safetensors");
        let st = safetensors::tensor::serialize(vec![("w".to_string(), view)], &None).unwrap();
        std::fs::write(&other, &st).unwrap();
        assert_eq!(
            ParamSet::load_safetensors(&other).unwrap().data,
            vec![1.5, -2.0]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn garbage_file_is_format_error_naming_file() {
        let dir = std::env::temp_dir().join(format!("tma-nn-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("garbage.safetensors");
        std::fs::write(&path, b"this is not a safetensors file at all").unwrap();
        let e = ParamSet::load_safetensors(&path).unwrap_err();
        assert!(matches!(e, NnError::Format { .. }), "{e:?}");
        assert!(e.to_string().contains("garbage.safetensors"), "{e}");
        let missing = dir.join("missing.safetensors");
        let e = ParamSet::load_safetensors(&missing).unwrap_err();
        assert!(matches!(e, NnError::Io { .. }));
        assert!(e.to_string().contains("missing.safetensors"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
