//! Minimal, validating `.npy` reader built on `npyz`'s header parser.
//!
//! The whole file is read into memory once; the magic string, version and data length are
//! checked here (so truncated files are reported, not panicked on), the header dictionary is
//! parsed by `npyz`, and the little-endian payload is decoded with plain slice conversions.

use std::path::{Path, PathBuf};

use crate::error::{GraphError, Result};

const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// A parsed `.npy` file: header fields plus the raw payload bytes.
pub(crate) struct RawNpy {
    pub path: PathBuf,
    /// NumPy type string without quotes, e.g. `<i8`.
    pub descr: String,
    pub shape: Vec<u64>,
    pub fortran_order: bool,
    bytes: Vec<u8>,
    data_offset: usize,
    /// Product of `shape`.
    pub len: usize,
}

fn npy_err(path: &Path, reason: impl Into<String>) -> GraphError {
    GraphError::Npy {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Pre-scan the `'shape': (...)` tuple so that absurd shapes (whose product overflows) are
/// reported as errors instead of reaching arithmetic that could overflow.
fn precheck_shape(path: &Path, header: &str) -> Result<()> {
    if let Some(start) = header.find("'shape'") {
        let rest = &header[start..];
        if let (Some(a), Some(b)) = (rest.find('('), rest.find(')')) {
            if a < b {
                let mut prod: u64 = 1;
                for tok in rest[a + 1..b].split(',') {
                    let tok = tok.trim().trim_end_matches('L');
                    if tok.is_empty() {
                        continue;
                    }
                    let v: u64 = tok
                        .parse()
                        .map_err(|_| npy_err(path, format!("bad shape entry {tok:?} in header")))?;
                    prod = prod
                        .checked_mul(v)
                        .ok_or_else(|| npy_err(path, "shape product overflows"))?;
                }
            }
        }
    }
    Ok(())
}

impl RawNpy {
    /// Read and validate the container (not the dtype/shape, which depend on the caller).
    ///
    /// # Errors
    /// [`GraphError::Io`] if the file cannot be read; [`GraphError::Npy`] on bad magic,
    /// unsupported version, unparseable header, or a payload shorter than the header announces.
    pub fn read(path: &Path) -> Result<RawNpy> {
        let bytes = std::fs::read(path).map_err(|source| GraphError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if bytes.len() < 10 || &bytes[..6] != MAGIC {
            return Err(npy_err(path, "bad magic (expected \\x93NUMPY)"));
        }
        let (major, minor) = (bytes[6], bytes[7]);
        let (hlen, hstart) = match major {
            1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
            2 | 3 => {
                if bytes.len() < 12 {
                    return Err(npy_err(path, "truncated header"));
                }
                (
                    u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
                    12usize,
                )
            }
            _ => {
                return Err(npy_err(
                    path,
                    format!("unsupported format version {major}.{minor}"),
                ))
            }
        };
        let data_offset = hstart
            .checked_add(hlen)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| npy_err(path, "truncated header"))?;
        let header_text = std::str::from_utf8(&bytes[hstart..data_offset])
            .map_err(|_| npy_err(path, "header is not valid UTF-8/ASCII"))?;
        precheck_shape(path, header_text)?;
        let header = npyz::NpyHeader::from_reader(&bytes[..data_offset])
            .map_err(|e| npy_err(path, format!("unparseable header: {e}")))?;
        let descr = match header.dtype() {
            npyz::DType::Plain(ts) => ts.to_string(),
            other => {
                return Err(GraphError::Dtype {
                    path: path.to_path_buf(),
                    expected: "a plain numeric dtype".into(),
                    found: other.descr(),
                })
            }
        };
        let shape = header.shape().to_vec();
        let len = shape
            .iter()
            .try_fold(1u64, |a, &b| a.checked_mul(b))
            .and_then(|l| usize::try_from(l).ok())
            .ok_or_else(|| npy_err(path, "shape product overflows"))?;
        let fortran_order = header.order() == npyz::Order::Fortran;
        Ok(RawNpy {
            path: path.to_path_buf(),
            descr,
            shape,
            fortran_order,
            bytes,
            data_offset,
            len,
        })
    }

    /// Require dtype `descr` (e.g. `<i8`) and return the validated payload of `len * size` bytes.
    fn payload(&self, descr: &str, item: usize) -> Result<&[u8]> {
        if self.descr != descr {
            return Err(GraphError::Dtype {
                path: self.path.clone(),
                expected: descr.to_string(),
                found: self.descr.clone(),
            });
        }
        let need = self
            .len
            .checked_mul(item)
            .ok_or_else(|| npy_err(&self.path, "shape product overflows"))?;
        let have = self.bytes.len() - self.data_offset;
        if have < need {
            return Err(npy_err(
                &self.path,
                format!(
                    "truncated data: header announces {} elements ({need} bytes), file holds {have} bytes",
                    self.len
                ),
            ));
        }
        Ok(&self.bytes[self.data_offset..self.data_offset + need])
    }

    /// Require the number of dimensions; `expected` is the human-readable shape for the error.
    pub fn expect_ndim(&self, ndim: usize, expected: &str) -> Result<()> {
        if self.shape.len() != ndim {
            return Err(self.shape_err(expected));
        }
        Ok(())
    }

    pub fn shape_err(&self, expected: &str) -> GraphError {
        GraphError::Shape {
            path: self.path.clone(),
            expected: expected.to_string(),
            found: self.shape.clone(),
        }
    }

    /// Payload as little-endian int64 in storage order.
    pub fn i64s(&self) -> Result<Vec<i64>> {
        let p = self.payload("<i8", 8)?;
        Ok(p.chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect())
    }

    /// Payload as little-endian float32 in storage order.
    pub fn f32s(&self) -> Result<Vec<f32>> {
        let p = self.payload("<f4", 4)?;
        Ok(p.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect())
    }

    /// Payload of `|u1` in storage order.
    pub fn u8s(&self) -> Result<&[u8]> {
        self.payload("|u1", 1)
    }

    /// Payload of `|b1` in storage order.
    pub fn bools(&self) -> Result<&[u8]> {
        self.payload("|b1", 1)
    }

    /// Payload as int64 converted to u32 ids, each checked `0 <= id < bound`.
    ///
    /// # Errors
    /// [`GraphError::IdOutOfRange`] for the first offending id.
    pub fn ids(&self, bound: u64) -> Result<Vec<u32>> {
        let p = self.payload("<i8", 8)?;
        let mut out = Vec::with_capacity(self.len);
        for c in p.chunks_exact(8) {
            let v = i64::from_le_bytes(c.try_into().unwrap());
            if v < 0 || (v as u64) >= bound || v > u32::MAX as i64 {
                return Err(GraphError::IdOutOfRange {
                    path: self.path.clone(),
                    id: v,
                    num_nodes: bound,
                });
            }
            out.push(v as u32);
        }
        Ok(out)
    }
}
