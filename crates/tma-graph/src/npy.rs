//! The `.npy` codec of the workspace: reads and writes NumPy arrays (format versions 1.0, 2.0
//! and 3.0 read; 1.0 written), with every error naming the file.
//!
//! # Reading
//! * [`read`] / [`decode`]: a typed array `T` ([`Element`]), in C (row-major) order, after
//!   checking the dtype and the shape against a pattern (`&[Some(2), None]` = `[2, any]`).
//! * [`NpyFile`]: the parsed header plus the raw payload, for callers that pick the element type
//!   from the header (`y.npy` is int64 classes or uint8 multi-label) or index Fortran-order data
//!   themselves.
//!
//! A file is read into memory once; the magic string, the version, the header length, the
//! shape (its product may not overflow) and the payload length (exactly `len * itemsize` bytes:
//! a truncated file or trailing bytes are errors) are checked here; the header dictionary is
//! parsed by `npyz`.
//!
//! # Writing
//! [`encode`] produces a little-endian `.npy` v1.0 file whose header is padded so the payload
//! starts at a multiple of 64 bytes (`numpy.load(f, mmap_mode="r")` can memory-map it);
//! [`write()`] writes it **atomically** ([`crate::durable::write`]: a temporary file in the same
//! directory, fsync'd, renamed over `path`, the directory fsync'd), so a reader never sees a
//! half-written array.
//!
//! # Errors
//! [`GraphError::Io`] (cannot read, write or rename), [`GraphError::Npy`] (bad magic, version,
//! header, truncated or over-long payload, overflowing shape), [`GraphError::Dtype`] (another
//! element type) and [`GraphError::Shape`] (the shape does not fit the pattern), each naming
//! the file.
//!
//! ```
//! use tma_graph::npy;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("edges.npy");
//! npy::write(&path, &[0i64, 1, 1, 0], &[2, 2]).unwrap();
//! let a = npy::read::<i64>(&path, &[Some(2), None]).unwrap();
//! assert_eq!((a.shape, a.data), (vec![2, 2], vec![0, 1, 1, 0]));
//! let e = npy::read::<f32>(&path, &[None, None]).unwrap_err();
//! assert!(e.to_string().contains("edges.npy: wrong dtype: expected <f4, found <i8"), "{e}");
//! ```

use std::path::{Path, PathBuf};

use crate::error::{GraphError, Result};

/// The magic string every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Alignment of the payload in files this module writes (bytes from the start of the file).
pub const ALIGN: usize = 64;

/// An element type of `.npy` arrays: a fixed-width little-endian number.
pub trait Element: Copy + Send + Sync + 'static {
    /// NumPy type string, e.g. `<i8` (little-endian int64), `|u1`, `|b1`.
    const DESCR: &'static str;
    /// Bytes per element.
    const SIZE: usize;
    /// Decodes one element from exactly [`Element::SIZE`] little-endian bytes.
    fn read_le(bytes: &[u8]) -> Self;
    /// Appends the little-endian bytes of `self` to `out`.
    fn put_le(self, out: &mut Vec<u8>);
}

macro_rules! element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DESCR: &'static str = $d;
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline]
            fn read_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("element width"))
            }
            #[inline]
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    };
}
element!(i64, "<i8");
element!(i32, "<i4");
element!(u64, "<u8");
element!(u32, "<u4");
element!(f64, "<f8");
element!(f32, "<f4");
element!(u8, "|u1");

/// NumPy `bool` (`|b1`): one byte, 0 = false, anything else = true.
impl Element for bool {
    const DESCR: &'static str = "|b1";
    const SIZE: usize = 1;
    #[inline]
    fn read_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
    #[inline]
    fn put_le(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
}

/// Memory order of a multi-dimensional payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Row-major (NumPy's default, `fortran_order: False`).
    C,
    /// Column-major (`fortran_order: True`).
    Fortran,
}

/// A typed array read from a `.npy` file.
#[derive(Clone, Debug, PartialEq)]
pub struct Array<T> {
    /// Dimensions, outermost first (`[]` for a scalar).
    pub shape: Vec<usize>,
    /// `shape.iter().product()` elements in C (row-major) order, whatever the file's order.
    pub data: Vec<T>,
}

fn npy_err(path: &Path, reason: impl Into<String>) -> GraphError {
    GraphError::Npy {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Checks the header dictionary before `npyz` parses it, so that what would make its
/// arithmetic overflow (a panic) is a clean error: a `shape` whose product overflows, however
/// the literal is spelled (quotes, a list, spaces: the header is parsed as the Python literal
/// npyz parses).
pub(crate) fn precheck_shape(path: &Path, header: &str) -> Result<()> {
    use py_literal::Value;
    // what does not parse is reported by npyz
    let Ok(Value::Dict(items)) = header.trim().parse::<Value>() else {
        return Ok(());
    };
    for (k, v) in &items {
        let (Value::String(k), Value::Tuple(dims) | Value::List(dims)) = (k, v) else {
            continue;
        };
        if k != "shape" {
            continue;
        }
        let mut prod: u64 = 1;
        for d in dims {
            let v = match d {
                Value::Integer(i) => i.to_string().parse::<u64>().ok(),
                _ => None,
            }
            .ok_or_else(|| npy_err(path, format!("bad shape entry {d} in header")))?;
            prod = prod
                .checked_mul(v)
                .ok_or_else(|| npy_err(path, "shape product overflows"))?;
        }
    }
    Ok(())
}

/// Object arrays (`'descr': '|O'`, what `np.save` writes for a pickled Python array) are not
/// `.npy` data this codec reads: say so before the generic header parser fails on them.
fn precheck_object_dtype(path: &Path, header: &str) -> Result<()> {
    let Some(start) = header.find("'descr'") else {
        return Ok(());
    };
    let rest = &header[start + "'descr'".len()..];
    let Some(q) = rest.find('\'') else {
        return Ok(());
    };
    let body = &rest[q + 1..];
    let Some(end) = body.find('\'') else {
        return Ok(());
    };
    let descr = &body[..end];
    if descr
        .trim_start_matches(['|', '<', '>', '='])
        .starts_with('O')
    {
        return Err(GraphError::Dtype {
            path: path.to_path_buf(),
            expected: "a plain numeric dtype".into(),
            found: format!(
                "{descr} (an object array: pickled Python objects are not supported; \
                 save a numeric array, e.g. np.save(f, np.asarray(a, dtype=np.int64)))"
            ),
        });
    }
    Ok(())
}

/// Human-readable form of a shape pattern: `[2, _]`.
fn pattern_text(pattern: &[Option<u64>]) -> String {
    let dims: Vec<String> = pattern
        .iter()
        .map(|d| d.map_or("_".to_string(), |d| d.to_string()))
        .collect();
    format!("[{}]", dims.join(", "))
}

/// A parsed `.npy` file: header fields plus the raw payload bytes (not yet typed).
#[derive(Debug)]
pub struct NpyFile {
    path: PathBuf,
    descr: String,
    shape: Vec<u64>,
    fortran_order: bool,
    bytes: Vec<u8>,
    /// Size of the whole file (`bytes.len()`, except for a header parsed alone by [`map`]).
    file_len: usize,
    data_offset: usize,
    len: usize,
}

impl NpyFile {
    /// Reads and validates the container of the file at `path` (magic, version, header, shape
    /// product, payload length for a plain dtype); the dtype and shape are checked by the
    /// accessors, which depend on what the caller expects.
    ///
    /// # Errors
    /// [`GraphError::Io`] if the file cannot be read; [`GraphError::Npy`] on bad magic,
    /// unsupported version, unparseable header, overflowing shape, or a payload shorter or
    /// longer than the header announces; [`GraphError::Dtype`] for a structured dtype.
    pub fn read(path: &Path) -> Result<NpyFile> {
        let bytes = std::fs::read(path).map_err(|source| GraphError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        NpyFile::from_bytes(path, bytes)
    }

    /// As [`NpyFile::read`] without reading the payload: only the preamble and header of the
    /// file at `path` are read (the payload's length is checked against the file's size), for
    /// readers that stream or map the payload themselves. [`NpyFile::raw`] and the other
    /// payload accessors of the result see no data.
    ///
    /// # Errors
    /// As [`NpyFile::read`].
    pub fn read_header(path: &Path) -> Result<NpyFile> {
        use std::io::Read;
        let io = |source| GraphError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut f = std::fs::File::open(path).map_err(io)?;
        let file_len = f.metadata().map_err(io)?.len();
        let mut pre = Vec::with_capacity(12);
        (&mut f).take(12).read_to_end(&mut pre).map_err(io)?;
        let end = header_end(path, &pre)?;
        if end as u64 > file_len {
            return Err(npy_err(path, "truncated header"));
        }
        let mut head = pre;
        (&mut f)
            .take(end.saturating_sub(head.len()) as u64)
            .read_to_end(&mut head)
            .map_err(io)?;
        let file_len = usize::try_from(file_len).map_err(|_| npy_err(path, "file too large"))?;
        NpyFile::parse(path, head, file_len)
    }

    /// Byte offset of the payload (the preamble and header before it).
    pub fn data_offset(&self) -> usize {
        self.data_offset
    }

    /// As [`NpyFile::read`], on the bytes of a file already in memory; `path` names the file in
    /// errors.
    ///
    /// # Errors
    /// As [`NpyFile::read`], except [`GraphError::Io`].
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<NpyFile> {
        let file_len = bytes.len();
        NpyFile::parse(path, bytes, file_len)
    }

    /// Parses the container from `bytes`, the first bytes (at least the header) of a file of
    /// `file_len` bytes.
    fn parse(path: &Path, bytes: Vec<u8>, file_len: usize) -> Result<NpyFile> {
        let data_offset = header_end(path, &bytes[..bytes.len().min(12)])?;
        if data_offset > bytes.len() {
            return Err(npy_err(path, "truncated header"));
        }
        let hstart = if bytes[6] == 1 { 10 } else { 12 };
        let header_text = std::str::from_utf8(&bytes[hstart..data_offset])
            .map_err(|_| npy_err(path, "header is not valid UTF-8/ASCII"))?;
        precheck_shape(path, header_text)?;
        precheck_object_dtype(path, header_text)?;
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
        let f = NpyFile {
            path: path.to_path_buf(),
            descr,
            shape,
            fortran_order,
            bytes,
            file_len,
            data_offset,
            len,
        };
        if let Some(item) = item_size(&f.descr) {
            f.check_payload_len(item)?;
        }
        Ok(f)
    }

    /// The file this array was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// NumPy type string without quotes, e.g. `<i8`.
    pub fn descr(&self) -> &str {
        &self.descr
    }

    /// Dimensions as stored in the header, outermost first.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// Number of elements (product of [`NpyFile::shape`]).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the array holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the payload is in Fortran (column-major) order.
    pub fn fortran_order(&self) -> bool {
        self.fortran_order
    }

    /// [`Order`] of the payload.
    pub fn order(&self) -> Order {
        if self.fortran_order {
            Order::Fortran
        } else {
            Order::C
        }
    }

    /// The error "wrong shape: expected `expected`" for this file (`expected` is human-readable,
    /// e.g. `[2, E]`).
    pub fn shape_err(&self, expected: &str) -> GraphError {
        GraphError::Shape {
            path: self.path.clone(),
            expected: expected.to_string(),
            found: self.shape.clone(),
        }
    }

    /// Requires `ndim` dimensions; `expected` is the human-readable shape for the error.
    ///
    /// # Errors
    /// [`GraphError::Shape`].
    pub fn expect_ndim(&self, ndim: usize, expected: &str) -> Result<()> {
        if self.shape.len() != ndim {
            return Err(self.shape_err(expected));
        }
        Ok(())
    }

    /// Requires the shape to fit `pattern` (one entry per dimension; `None` = any size).
    ///
    /// # Errors
    /// [`GraphError::Shape`] with the pattern written as `[2, _]`.
    pub fn expect_shape(&self, pattern: &[Option<u64>]) -> Result<()> {
        let fits = self.shape.len() == pattern.len()
            && self
                .shape
                .iter()
                .zip(pattern)
                .all(|(&s, p)| p.is_none_or(|p| p == s));
        if !fits {
            return Err(self.shape_err(&pattern_text(pattern)));
        }
        Ok(())
    }

    fn check_payload_len(&self, item: usize) -> Result<()> {
        let need = self
            .len
            .checked_mul(item)
            .ok_or_else(|| npy_err(&self.path, "shape product overflows"))?;
        let have = self.file_len - self.data_offset;
        if have < need {
            return Err(npy_err(
                &self.path,
                format!(
                    "truncated data: header announces {} elements ({need} bytes), file holds {have} bytes",
                    self.len
                ),
            ));
        }
        if have > need {
            return Err(npy_err(
                &self.path,
                format!(
                    "{} bytes after the data: header announces {} elements ({need} bytes), file holds {have} bytes",
                    have - need,
                    self.len
                ),
            ));
        }
        Ok(())
    }

    /// Requires dtype `descr` (e.g. `<i8`) and returns the payload of `len * item` bytes, in
    /// storage order.
    fn payload(&self, descr: &str, item: usize) -> Result<&[u8]> {
        if self.descr != descr {
            return Err(GraphError::Dtype {
                path: self.path.clone(),
                expected: descr.to_string(),
                found: self.descr.clone(),
            });
        }
        self.check_payload_len(item)?;
        Ok(&self.bytes[self.data_offset..])
    }

    /// The payload's raw bytes for dtype `T`, in storage order ([`NpyFile::order`]); no copy.
    ///
    /// # Errors
    /// [`GraphError::Dtype`] if the file's dtype is not `T::DESCR`.
    pub fn raw<T: Element>(&self) -> Result<&[u8]> {
        self.payload(T::DESCR, T::SIZE)
    }

    /// The elements as `T`, in storage order ([`NpyFile::order`]).
    ///
    /// # Errors
    /// [`GraphError::Dtype`] if the file's dtype is not `T::DESCR`.
    pub fn storage_vec<T: Element>(&self) -> Result<Vec<T>> {
        Ok(self
            .raw::<T>()?
            .chunks_exact(T::SIZE)
            .map(T::read_le)
            .collect())
    }

    /// The array as `T` in C (row-major) order; Fortran-order files of one or two dimensions
    /// are transposed.
    ///
    /// # Errors
    /// [`GraphError::Dtype`] for another dtype; [`GraphError::Npy`] for a Fortran-order array
    /// of more than two dimensions.
    pub fn to_array<T: Element>(&self) -> Result<Array<T>> {
        let stored = self.storage_vec::<T>()?;
        let shape: Vec<usize> = self.shape.iter().map(|&d| d as usize).collect();
        let data = match (self.fortran_order, shape.as_slice()) {
            (false, _) | (true, [] | [_]) => stored,
            (true, &[rows, cols]) => {
                let mut out = Vec::with_capacity(stored.len());
                for r in 0..rows {
                    out.extend((0..cols).map(|c| stored[c * rows + r]));
                }
                out
            }
            (true, _) => {
                return Err(npy_err(
                    &self.path,
                    "Fortran order with more than 2 dimensions is not supported",
                ))
            }
        };
        Ok(Array { shape, data })
    }

    /// Node ids: an int64 payload converted to `u32`, each checked `0 <= id < bound`.
    ///
    /// # Errors
    /// [`GraphError::Dtype`] if not `<i8`; [`GraphError::IdOutOfRange`] for the first offending
    /// id.
    pub fn ids(&self, bound: u64) -> Result<Vec<u32>> {
        let p = self.raw::<i64>()?;
        let mut out = Vec::with_capacity(self.len);
        for c in p.chunks_exact(8) {
            let v = i64::read_le(c);
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

/// Bytes per element of the plain dtypes this module knows (`None` for others, which are
/// only rejected when a caller asks for a type).
fn item_size(descr: &str) -> Option<usize> {
    let b = descr.as_bytes();
    if b.len() < 3 || !matches!(b[0], b'<' | b'|' | b'=' | b'>') {
        return None;
    }
    match b[1] {
        b'i' | b'u' | b'f' | b'b' => descr[2..].parse().ok(),
        _ => None,
    }
}

/// Where the header of a `.npy` file ends (its payload's offset), from the file's first bytes
/// `pre` (at least 10, 12 for versions 2 and 3): the one reader of the preamble (magic,
/// version, header length). Errors name `path`.
fn header_end(path: &Path, pre: &[u8]) -> Result<usize> {
    if pre.len() < 10 || &pre[..6] != MAGIC {
        return Err(npy_err(path, "bad magic (expected \\x93NUMPY)"));
    }
    match pre[6] {
        1 => Ok(10 + u16::from_le_bytes([pre[8], pre[9]]) as usize),
        2 | 3 if pre.len() >= 12 => {
            Ok(12 + u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]) as usize)
        }
        2 | 3 => Err(npy_err(path, "truncated header")),
        v => Err(npy_err(
            path,
            format!("unsupported format version {v}.{}", pre[7]),
        )),
    }
}

/// Memory-maps the `.npy` file at `path` as `T` without reading its payload: the header is
/// parsed and checked as [`read`] does (dtype `T`, shape against `pattern`, payload length), and
/// the payload is returned as a mapped [`crate::Buf`] (the codec's own files start it at a
/// multiple of 64 bytes). Returns the buffer and the shape.
///
/// # Errors
/// As [`read`]; [`GraphError::Npy`] for a Fortran-order array of two or more dimensions (it
/// would need a transpose); [`GraphError::Invalid`] when the payload is not aligned for `T`.
pub fn map<T: Element + crate::buf::Pod>(
    path: &Path,
    pattern: &[Option<u64>],
) -> Result<(crate::buf::Buf<T>, Vec<usize>)> {
    let m = crate::buf::SharedMap::open(path)?;
    let b = m.bytes();
    let hend = header_end(path, &b[..b.len().min(12)])?;
    let prefix = b[..hend.min(b.len())].to_vec();
    let f = NpyFile::parse(path, prefix, b.len())?;
    f.expect_shape(pattern)?;
    if f.descr != T::DESCR {
        return Err(GraphError::Dtype {
            path: path.to_path_buf(),
            expected: T::DESCR.to_string(),
            found: f.descr.clone(),
        });
    }
    f.check_payload_len(T::SIZE)?;
    if f.fortran_order && f.shape.len() >= 2 {
        return Err(npy_err(
            path,
            "Fortran order cannot be mapped (save it in C order: np.ascontiguousarray)",
        ));
    }
    let shape = f.shape.iter().map(|&d| d as usize).collect();
    Ok((
        crate::buf::Buf::mapped(m.clone(), f.data_offset, f.len)?,
        shape,
    ))
}

/// Reads the `.npy` file at `path` as a `T` array in C order, requiring its shape to fit
/// `pattern` (one entry per dimension, `None` = any size; e.g. `&[Some(2), None]` for
/// `[2, E]`).
///
/// # Errors
/// As [`NpyFile::read`], then [`GraphError::Shape`] and [`GraphError::Dtype`] naming `path`.
pub fn read<T: Element>(path: &Path, pattern: &[Option<u64>]) -> Result<Array<T>> {
    let f = NpyFile::read(path)?;
    f.expect_shape(pattern)?;
    f.to_array()
}

/// As [`read`], on the bytes of a file already in memory (`path` names it in errors).
///
/// # Errors
/// As [`read`], except [`GraphError::Io`].
pub fn decode<T: Element>(
    path: &Path,
    bytes: Vec<u8>,
    pattern: &[Option<u64>],
) -> Result<Array<T>> {
    let f = NpyFile::from_bytes(path, bytes)?;
    f.expect_shape(pattern)?;
    f.to_array()
}

/// Encodes `data` (C order) with `shape` as a `.npy` v1.0 file whose payload starts at a
/// multiple of [`ALIGN`] bytes.
///
/// # Panics
/// If `data.len()` is not the product of `shape` (a bug in the caller).
pub fn encode<T: Element>(data: &[T], shape: &[usize]) -> Vec<u8> {
    encode_ordered(data, shape, Order::C)
}

/// As [`encode`], with `data` in the given memory order (the header's `fortran_order`).
///
/// # Panics
/// If `data.len()` is not the product of `shape`.
pub fn encode_ordered<T: Element>(data: &[T], shape: &[usize], order: Order) -> Vec<u8> {
    let mut out = encode_header(T::DESCR, shape, order);
    assert_eq!(
        data.len(),
        shape.iter().product::<usize>(),
        "npy::encode: {} elements for shape {shape:?}",
        data.len()
    );
    out.reserve(data.len() * T::SIZE);
    for &x in data {
        x.put_le(&mut out);
    }
    out
}

/// The magic string, version 1.0 and header of a `.npy` file with dtype `descr` and `shape`,
/// padded with spaces and a newline so the payload that follows starts at a multiple of
/// [`ALIGN`] bytes. Any `descr` is written as given (tests write wrong dtypes on purpose).
pub fn encode_header(descr: &str, shape: &[usize], order: Order) -> Vec<u8> {
    let shape_s = match shape {
        [a] => format!("({a},)"),
        _ => {
            let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            format!("({})", dims.join(", "))
        }
    };
    let fortran = match order {
        Order::C => "False",
        Order::Fortran => "True",
    };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape_s}, }}");
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat(total.next_multiple_of(ALIGN) - total));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out
}

/// Writes `data` (C order) with `shape` to `path` as `.npy` ([`encode`]), durably and
/// atomically ([`crate::durable::write`]).
///
/// # Errors
/// [`GraphError::Io`] naming the file that could not be written or renamed.
///
/// # Panics
/// If `data.len()` is not the product of `shape`.
pub fn write<T: Element>(path: &Path, data: &[T], shape: &[usize]) -> Result<()> {
    crate::durable::write(path, &encode(data, shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn map_reads_the_payload_in_place_with_the_read_checks() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.npy");
        write(&p, &[1.5f32, 2.0, -3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
        let (b, shape) = map::<f32>(&p, &[None, Some(2)]).unwrap();
        assert!(b.is_mapped());
        assert_eq!(
            (shape, b.to_vec()),
            (vec![3, 2], vec![1.5, 2.0, -3.0, 4.0, 5.0, 6.0])
        );
        let e = map::<u32>(&p, &[None, None]).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("{}: wrong dtype: expected <u4, found <f4", p.display())
        );
        let e = map::<f32>(&p, &[None]).unwrap_err().to_string();
        assert!(e.contains("x.npy") && e.contains("[_]"), "{e}");
        // truncated payload
        let full = std::fs::read(&p).unwrap();
        std::fs::write(&p, &full[..full.len() - 4]).unwrap();
        let e = map::<f32>(&p, &[None, None]).unwrap_err().to_string();
        assert!(e.contains("x.npy") && e.contains("truncated data"), "{e}");
        // Fortran order of a matrix would need a transpose
        let f = dir.path().join("f.npy");
        std::fs::write(
            &f,
            encode_ordered(&[1u32, 2, 3, 4], &[2, 2], Order::Fortran),
        )
        .unwrap();
        let e = map::<u32>(&f, &[None, None]).unwrap_err().to_string();
        assert!(
            e.contains("f.npy") && e.contains("Fortran order cannot be mapped"),
            "{e}"
        );
    }

    #[test]
    fn the_header_alone_reads_as_the_whole_file_does() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e.npy");
        write(&p, &[0i64, 1, 2, 3, 4, 5], &[2, 3]).unwrap();
        let (h, f) = (
            NpyFile::read_header(&p).unwrap(),
            NpyFile::read(&p).unwrap(),
        );
        assert_eq!(
            (h.descr(), h.shape(), h.fortran_order(), h.data_offset()),
            (f.descr(), f.shape(), f.fortran_order(), f.data_offset())
        );
        assert_eq!((h.shape(), h.data_offset() % 64), (&[2u64, 3][..], 0));
        // the payload's length is checked against the file's size, without reading it
        let b = std::fs::read(&p).unwrap();
        std::fs::write(&p, &b[..b.len() - 8]).unwrap();
        let e = NpyFile::read_header(&p).unwrap_err().to_string();
        assert!(
            e.contains(
                "truncated data: header announces 6 elements (48 bytes), file holds 40 bytes"
            ),
            "{e}"
        );
        // preamble errors, as every reader words them
        for (bytes, want) in [
            (&b[..5], "bad magic"),
            (&b[..20], "truncated header"),
            (
                &[0x93, b'N', b'U', b'M', b'P', b'Y', 9, 0, 0, 0][..],
                "unsupported format version 9.0",
            ),
            (
                &[0x93, b'N', b'U', b'M', b'P', b'Y', 2, 0, 0, 0][..],
                "truncated header",
            ),
        ] {
            std::fs::write(&p, bytes).unwrap();
            let e = NpyFile::read_header(&p).unwrap_err().to_string();
            assert!(e.contains(want) && e.contains("e.npy"), "{want}: {e}");
            let e = NpyFile::read(&p).unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    #[test]
    fn header_is_aligned_and_numpy_compatible() {
        let b = encode(&[1u64, 2, 3], &[3]);
        let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        assert_eq!(b.len(), 10 + hlen + 24);
        let h = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
        assert!(h.starts_with("{'descr': '<u8', 'fortran_order': False, 'shape': (3,), }"));
        assert!(h.ends_with('\n'));
        assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
        let a = decode::<u64>(Path::new("x.npy"), b.clone(), &[None]).unwrap();
        assert_eq!((a.shape, a.data), (vec![3], vec![1, 2, 3]));
        let e = decode::<u32>(Path::new("x.npy"), b, &[None]).unwrap_err();
        assert_eq!(e.to_string(), "x.npy: wrong dtype: expected <u4, found <u8");
    }

    #[test]
    fn shape_pattern_and_payload_length_are_checked() {
        let b = encode(&[1i32, 2, 3, 4, 5, 6], &[2, 3]);
        let p = Path::new("d/a.npy");
        let e = decode::<i32>(p, b.clone(), &[Some(3), None]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "d/a.npy: wrong shape: expected [3, _], found [2, 3]"
        );
        let e = decode::<i32>(p, b[..b.len() - 1].to_vec(), &[None, None]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "d/a.npy: malformed .npy file: truncated data: header announces 6 elements (24 bytes), file holds 23 bytes"
        );
        let mut long = b.clone();
        long.push(0);
        let e = decode::<i32>(p, long, &[None, None]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "d/a.npy: malformed .npy file: 1 bytes after the data: header announces 6 elements (24 bytes), file holds 25 bytes"
        );
    }

    #[test]
    fn fortran_order_is_transposed_to_c_order() {
        // [[1, 2, 3], [4, 5, 6]] stored column by column
        let b = encode_ordered(&[1u8, 4, 2, 5, 3, 6], &[2, 3], Order::Fortran);
        let a = decode::<u8>(Path::new("f.npy"), b, &[Some(2), Some(3)]).unwrap();
        assert_eq!(a.data, vec![1, 2, 3, 4, 5, 6]);
        let b = encode(&[true, false, true], &[3]);
        let a = decode::<bool>(Path::new("m.npy"), b, &[Some(3)]).unwrap();
        assert_eq!(a.data, vec![true, false, true]);
    }

    #[test]
    fn write_is_atomic_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v.npy");
        write(&p, &[1.5f32, -2.0], &[2]).unwrap();
        write(&p, &[3.0f32], &[1]).unwrap(); // replaces
        let a = read::<f32>(&p, &[None]).unwrap();
        assert_eq!(a.data, vec![3.0]);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("v.npy")]);
        let e = write(&dir.path().join("no/such/dir/v.npy"), &[1u8], &[1]).unwrap_err();
        let GraphError::Io { path, .. } = &e else {
            panic!("{e:?}")
        };
        let name = path.file_name().unwrap().to_str().unwrap();
        let prefix = format!(".v.npy.tmp-{}-", std::process::id());
        assert!(
            path.parent().unwrap().ends_with("no/such/dir") && name.starts_with(&prefix),
            "{e}"
        );
    }
}
