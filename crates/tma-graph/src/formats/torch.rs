//! PyTorch `.pt` files of exactly what OGB's link splits hold: a `torch.save` zip archive
//! (PyTorch >= 1.6, `torch/serialization.py` `_save`) of a dict of str -> tensor.
//!
//! The archive's members are `<name>/data.pkl` (the dict, pickle protocol 2, storages as
//! persistent ids `('storage', torch.LongStorage, key, location, numel)`), `<name>/data/<key>`
//! (each storage's raw bytes), optionally `<name>/byteorder` (`little` or `big`; absent means
//! little-endian, the writer's byte order on every machine OGB's files were made on),
//! `<name>/version` and others, which are not read. Tensors are rebuilt as
//! `torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad,
//! backward_hooks[, metadata])`.
//!
//! The unpickler runs only the opcodes `torch.save` emits for such a dict (PROTO, EMPTY_DICT,
//! EMPTY_LIST, EMPTY_TUPLE, MARK, BINUNICODE, SHORT_BINUNICODE, GLOBAL, BINPERSID, TUPLE,
//! TUPLE1-3, BININT, BININT1, BININT2, LONG1, BINFLOAT, NONE, NEWTRUE, NEWFALSE, REDUCE,
//! SETITEM, SETITEMS, APPEND, APPENDS, BINPUT, LONG_BINPUT, BINGET, LONG_BINGET, MEMOIZE, STOP)
//! and calls only `torch._utils._rebuild_tensor_v2`, `torch._utils._rebuild_tensor` and
//! `collections.OrderedDict`: it never runs code from the file. Anything else, and every
//! malformed input, is a [`GraphError::Invalid`] naming the file and the problem. Only
//! contiguous (C-order) tensors are read. The legacy (pre-1.6, non-zip) format, five pickles
//! and the raw storages in one stream, is read too.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, Read};
use std::path::Path;

use super::raw::invalid;
use crate::error::{GraphError, Result};

/// The element type of a tensor, by its storage class (`torch.LongStorage` -> `I64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TorchDtype {
    /// `torch.int64` (`LongStorage`).
    I64,
    /// `torch.int32` (`IntStorage`).
    I32,
    /// `torch.int16` (`ShortStorage`).
    I16,
    /// `torch.int8` (`CharStorage`).
    I8,
    /// `torch.uint8` (`ByteStorage`).
    U8,
    /// `torch.bool` (`BoolStorage`).
    Bool,
    /// `torch.float64` (`DoubleStorage`).
    F64,
    /// `torch.float32` (`FloatStorage`).
    F32,
    /// `torch.float16` (`HalfStorage`).
    F16,
}

impl TorchDtype {
    fn from_storage(name: &str) -> Option<TorchDtype> {
        Some(match name {
            "LongStorage" => TorchDtype::I64,
            "IntStorage" => TorchDtype::I32,
            "ShortStorage" => TorchDtype::I16,
            "CharStorage" => TorchDtype::I8,
            "ByteStorage" => TorchDtype::U8,
            "BoolStorage" => TorchDtype::Bool,
            "DoubleStorage" => TorchDtype::F64,
            "FloatStorage" => TorchDtype::F32,
            "HalfStorage" => TorchDtype::F16,
            _ => return None,
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            TorchDtype::I64 | TorchDtype::F64 => 8,
            TorchDtype::I32 | TorchDtype::F32 => 4,
            TorchDtype::I16 | TorchDtype::F16 => 2,
            TorchDtype::I8 | TorchDtype::U8 | TorchDtype::Bool => 1,
        }
    }

    /// PyTorch's name (`int64`, `float32`, ...).
    pub fn name(self) -> &'static str {
        match self {
            TorchDtype::I64 => "int64",
            TorchDtype::I32 => "int32",
            TorchDtype::I16 => "int16",
            TorchDtype::I8 => "int8",
            TorchDtype::U8 => "uint8",
            TorchDtype::Bool => "bool",
            TorchDtype::F64 => "float64",
            TorchDtype::F32 => "float32",
            TorchDtype::F16 => "float16",
        }
    }
}

/// One tensor of a `.pt` dict: its dtype, shape and elements in C order, little-endian bytes
/// (`shape.iter().product() * dtype.size()` of them).
#[derive(Clone, Debug, PartialEq)]
pub struct TorchTensor {
    /// Element type.
    pub dtype: TorchDtype,
    /// Shape (`[]` for a scalar).
    pub shape: Vec<u64>,
    /// The elements, C order, little-endian.
    bytes: Vec<u8>,
}

impl TorchTensor {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.bytes.len() / self.dtype.size()
    }

    /// The elements as `i64` (integer and bool tensors), C order; `None` for floating point.
    pub fn to_i64(&self) -> Option<Vec<i64>> {
        let b = &self.bytes;
        Some(match self.dtype {
            TorchDtype::I64 => b
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            TorchDtype::I32 => b
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes(c.try_into().unwrap()) as i64)
                .collect(),
            TorchDtype::I16 => b
                .chunks_exact(2)
                .map(|c| i16::from_le_bytes(c.try_into().unwrap()) as i64)
                .collect(),
            TorchDtype::I8 => b.iter().map(|&x| x as i8 as i64).collect(),
            TorchDtype::U8 | TorchDtype::Bool => b.iter().map(|&x| x as i64).collect(),
            _ => return None,
        })
    }

    /// The elements as `f64` (any dtype), C order.
    pub fn to_f64(&self) -> Vec<f64> {
        let b = &self.bytes;
        match self.dtype {
            TorchDtype::F64 => b
                .chunks_exact(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                .collect(),
            TorchDtype::F32 => b
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()) as f64)
                .collect(),
            TorchDtype::F16 => b
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes(c.try_into().unwrap()).to_f64())
                .collect(),
            _ => self
                .to_i64()
                .unwrap_or_default()
                .into_iter()
                .map(|x| x as f64)
                .collect(),
        }
    }
}

/// Largest `data.pkl` read (the pickle of a dict of tensors is a few hundred bytes).
const MAX_PICKLE: u64 = 1 << 26;
/// Deepest nesting of containers the unpickler builds.
const MAX_DEPTH: usize = 32;

/// Reads a `torch.save` zip archive holding a dict of str -> tensor (module docs), keys in
/// the file's order preserved by the sorted map only as names.
///
/// # Errors
/// [`GraphError::Io`] when the file cannot be opened; [`GraphError::Invalid`] naming `path`
/// for anything else: neither a zip archive nor the legacy pre-1.6 stream, no or
/// several `data.pkl`, an opcode or global outside the module docs' list, a malformed pickle
/// (truncated, stack underflow, a key that is not a string, a value that is not a tensor), a
/// storage member missing, of the wrong length or unreadable, a big-endian `byteorder`, a
/// non-contiguous tensor or one beyond its storage.
pub fn read_pt(path: &Path) -> Result<BTreeMap<String, TorchTensor>> {
    let f = std::fs::File::open(path).map_err(|source| GraphError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut head = [0u8; 4];
    {
        let mut g = &f;
        let n = g.read(&mut head).unwrap_or(0);
        if n >= 2 && head[0] == 0x80 {
            return read_legacy(path);
        }
        if n < 4 || &head != b"PK\x03\x04" {
            return Err(invalid(
                path,
                "not a torch.save zip archive (no zip signature at the start)",
            ));
        }
    }
    let f = std::fs::File::open(path).map_err(|source| GraphError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut zip = zip::ZipArchive::new(BufReader::new(f)).map_err(|e| {
        invalid(
            path,
            format!("not a readable torch.save zip archive: {e} (truncated?)"),
        )
    })?;
    let pkls: Vec<String> = zip
        .file_names()
        .filter(|n| *n == "data.pkl" || n.ends_with("/data.pkl"))
        .map(str::to_string)
        .collect();
    let pkl = match pkls.as_slice() {
        [one] => one.clone(),
        [] => {
            return Err(invalid(
                path,
                "no data.pkl member: not a torch.save archive",
            ))
        }
        _ => {
            return Err(invalid(
                path,
                format!("several data.pkl members ({})", pkls.join(", ")),
            ))
        }
    };
    let prefix = pkl.strip_suffix("data.pkl").unwrap_or("").to_string();
    let member = |zip: &mut zip::ZipArchive<BufReader<std::fs::File>>,
                  name: &str,
                  max: u64|
     -> Result<Vec<u8>> {
        let mut m = zip
            .by_name(name)
            .map_err(|e| invalid(path, format!("member {name}: unreadable: {e}")))?;
        if m.size() > max {
            return Err(invalid(
                path,
                format!(
                    "member {name}: {} bytes, more than expected ({max})",
                    m.size()
                ),
            ));
        }
        let mut out = Vec::new();
        (&mut m)
            .take(max + 1)
            .read_to_end(&mut out)
            .map_err(|e| invalid(path, format!("member {name}: corrupt: {e}")))?;
        if out.len() as u64 > max {
            return Err(invalid(
                path,
                format!("member {name}: more than the expected {max} bytes"),
            ));
        }
        Ok(out)
    };
    let bo = format!("{prefix}byteorder");
    if zip.index_for_name(&bo).is_some() {
        let b = member(&mut zip, &bo, 16)?;
        match b.trim_ascii() {
            b"little" => {}
            b"big" => {
                return Err(invalid(
                    path,
                    "written on a big-endian machine (byteorder: big): tma reads little-endian \
                     storages only",
                ))
            }
            other => {
                return Err(invalid(
                    path,
                    format!(
                        "member {bo}: {:?} (expected little or big)",
                        String::from_utf8_lossy(other)
                    ),
                ))
            }
        }
    }
    let bytes = member(&mut zip, &pkl, MAX_PICKLE)?;
    let (top, _) = Unpickler::new(&bytes)
        .run()
        .map_err(|e| invalid(path, format!("{pkl}: {e}")))?;
    tensors_of(path, &pkl, top, |t| {
        let name = format!("{prefix}data/{}", t.key);
        if zip.index_for_name(&name).is_none() {
            return Err(format!("storage member {name} is missing"));
        }
        let want = t
            .numel
            .checked_mul(t.dtype.size() as u64)
            .ok_or("storage size overflows")?;
        let raw = member(&mut zip, &name, want).map_err(|e| match e {
            GraphError::Invalid { reason, .. } => reason,
            other => other.to_string(),
        })?;
        if raw.len() as u64 != want {
            return Err(format!(
                "storage {name} holds {} bytes, the pickle says {} elements of {} ({want} bytes)",
                raw.len(),
                t.numel,
                t.dtype.name()
            ));
        }
        Ok(raw)
    })
}

/// The dict of str -> tensor `top` (from `pkl` of `path`), each tensor's storage bytes given
/// by `storage` (the whole storage: `numel * size` bytes).
fn tensors_of(
    path: &Path,
    pkl: &str,
    top: Val,
    mut storage: impl FnMut(&TensorRef) -> std::result::Result<Vec<u8>, String>,
) -> Result<BTreeMap<String, TorchTensor>> {
    let Val::Dict(items) = top else {
        return Err(invalid(
            path,
            format!(
                "{pkl}: holds {}, not a dict of tensors (OGB's split files are dicts)",
                top.kind()
            ),
        ));
    };
    let mut out = BTreeMap::new();
    for (k, v) in items {
        let Val::Str(key) = k else {
            return Err(invalid(
                path,
                format!("{pkl}: a dict key is {}, not a string", k.kind()),
            ));
        };
        let Val::Tensor(t) = v else {
            return Err(invalid(
                path,
                format!("{pkl}: value of {key:?} is {}, not a tensor", v.kind()),
            ));
        };
        let raw = storage(&t).map_err(|e| invalid(path, format!("tensor {key:?}: {e}")))?;
        let bytes = t
            .contiguous_bytes(raw)
            .map_err(|e| invalid(path, format!("tensor {key:?}: {e}")))?;
        let tensor = TorchTensor {
            dtype: t.dtype,
            shape: t.shape,
            bytes,
        };
        if out.insert(key.clone(), tensor).is_some() {
            return Err(invalid(path, format!("{pkl}: key {key:?} appears twice")));
        }
    }
    Ok(out)
}

/// `torch.save`'s legacy format (PyTorch < 1.6, `_use_new_zipfile_serialization=False`): five
/// pickles in a row (the magic number `0x1950a86a20f9469cfc6c`, the protocol version 1001,
/// `sys_info`, the object, the sorted storage keys), then each storage in key order as an
/// int64 element count and its little-endian bytes.
fn read_legacy(path: &Path) -> Result<BTreeMap<String, TorchTensor>> {
    let bytes = std::fs::read(path).map_err(|source| GraphError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |what: String| invalid(path, format!("legacy torch.save format: {what}"));
    let mut pos = 0usize;
    let next = |what: &str, pos: &mut usize| -> Result<Val> {
        let (v, used) = Unpickler::new(&bytes[*pos..])
            .run()
            .map_err(|e| bad(format!("{what}: {e}")))?;
        *pos += used;
        Ok(v)
    };
    const MAGIC: [u8; 10] = [0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19];
    match next("magic number", &mut pos)? {
        Val::BigInt(b) if b == MAGIC => {}
        other => {
            return Err(bad(format!(
                "starts with {} where torch writes its magic number (not a .pt file?)",
                other.kind()
            )))
        }
    }
    match next("protocol version", &mut pos)? {
        Val::Int(1001) => {}
        other => {
            return Err(bad(format!(
                "protocol version {other:?} (torch writes 1001)"
            )))
        }
    }
    if let Val::Dict(info) = next("sys_info", &mut pos)? {
        for (k, v) in info {
            if matches!((&k, &v), (Val::Str(k), Val::Bool(false)) if k == "little_endian") {
                return Err(bad(
                    "written on a big-endian machine: tma reads little-endian storages only".into(),
                ));
            }
        }
    }
    let top = next("the object", &mut pos)?;
    let Val::List(keys) = next("storage keys", &mut pos)? else {
        return Err(bad("the storage keys are not a list".into()));
    };
    // each storage: its element size from the tensors that use it
    let mut sizes: HashMap<String, usize> = HashMap::new();
    if let Val::Dict(items) = &top {
        for (_, v) in items {
            if let Val::Tensor(t) = v {
                sizes.insert(t.key.clone(), t.dtype.size());
            }
        }
    }
    let mut storages: HashMap<String, Vec<u8>> = HashMap::new();
    for k in keys {
        let Val::Str(k) = k else {
            return Err(bad(format!("a storage key is {}", k.kind())));
        };
        let count = bytes
            .get(pos..pos + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
            .ok_or_else(|| bad(format!("truncated before storage {k:?}")))?;
        pos += 8;
        let size = sizes.get(&k).copied().unwrap_or(1) as u64;
        let len = count
            .checked_mul(size)
            .filter(|&l| l <= (bytes.len() - pos) as u64)
            .ok_or_else(|| {
                bad(format!(
                    "storage {k:?}: {count} elements of {size} bytes exceed the file"
                ))
            })? as usize;
        storages.insert(k, bytes[pos..pos + len].to_vec());
        pos += len;
    }
    tensors_of(path, "the pickled object", top, |t| {
        let raw = storages
            .get(&t.key)
            .ok_or_else(|| format!("storage {:?} is not in the file", t.key))?;
        if raw.len() as u64 != t.numel * t.dtype.size() as u64 {
            return Err(format!(
                "storage {:?} holds {} bytes, the pickle says {} elements of {}",
                t.key,
                raw.len(),
                t.numel,
                t.dtype.name()
            ));
        }
        Ok(raw.clone())
    })
}

/// A tensor as the pickle describes it, before its storage is read.
#[derive(Clone, Debug)]
struct TensorRef {
    dtype: TorchDtype,
    key: String,
    /// Elements of the storage.
    numel: u64,
    offset: u64,
    shape: Vec<u64>,
    stride: Vec<u64>,
}

impl TensorRef {
    /// The tensor's bytes out of its storage `raw`: contiguous (strides of C order, a
    /// dimension of size 1 may have any stride) and within the storage.
    fn contiguous_bytes(&self, raw: Vec<u8>) -> std::result::Result<Vec<u8>, String> {
        if self.shape.len() != self.stride.len() {
            return Err(format!(
                "size {:?} and stride {:?} differ in length",
                self.shape, self.stride
            ));
        }
        let mut n: u64 = 1;
        for &d in &self.shape {
            n = n
                .checked_mul(d)
                .ok_or_else(|| format!("size {:?} overflows", self.shape))?;
        }
        let mut expect: u64 = 1;
        for (&d, &s) in self.shape.iter().zip(&self.stride).rev() {
            if d > 1 && s != expect {
                return Err(format!(
                    "not contiguous (size {:?}, stride {:?}): tma reads contiguous tensors \
                     only (save tensor.contiguous())",
                    self.shape, self.stride
                ));
            }
            expect = expect.saturating_mul(d);
        }
        let end = self.offset.checked_add(n).filter(|&e| e <= self.numel);
        let Some(end) = end else {
            return Err(format!(
                "offset {} + {} elements exceed the storage's {}",
                self.offset, n, self.numel
            ));
        };
        let sz = self.dtype.size();
        let (a, b) = (self.offset as usize * sz, end as usize * sz);
        if a == 0 && b == raw.len() {
            return Ok(raw);
        }
        raw.get(a..b)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| format!("elements {a}..{b} beyond the storage's {} bytes", raw.len()))
    }
}

/// A value on the unpickler's stack.
#[derive(Clone, Debug)]
enum Val {
    None,
    Bool(#[allow(dead_code)] bool),
    Int(i64),
    Float(#[allow(dead_code)] f64),
    Str(String),
    Tuple(Vec<Val>),
    List(Vec<Val>),
    Dict(Vec<(Val, Val)>),
    Global(String, String),
    /// An int beyond int64 (LONG1 of more than 8 bytes), little-endian two's complement.
    BigInt(Vec<u8>),
    Storage {
        dtype: TorchDtype,
        key: String,
        numel: u64,
    },
    Tensor(TensorRef),
}

impl Val {
    fn kind(&self) -> &'static str {
        match self {
            Val::None => "None",
            Val::Bool(_) => "a bool",
            Val::Int(_) => "an int",
            Val::Float(_) => "a float",
            Val::Str(_) => "a string",
            Val::Tuple(_) => "a tuple",
            Val::List(_) => "a list",
            Val::Dict(_) => "a dict",
            Val::Global(..) => "a class or function",
            Val::BigInt(_) => "a big int",
            Val::Storage { .. } => "a storage",
            Val::Tensor(_) => "a tensor",
        }
    }

    /// Nesting depth (bounded by [`MAX_DEPTH`] at construction, so this recursion is too).
    fn depth(&self) -> usize {
        match self {
            Val::Tuple(v) | Val::List(v) => 1 + v.iter().map(Val::depth).max().unwrap_or(0),
            Val::Dict(v) => {
                1 + v
                    .iter()
                    .map(|(a, b)| a.depth().max(b.depth()))
                    .max()
                    .unwrap_or(0)
            }
            _ => 0,
        }
    }

    /// Values it holds, itself included (what a copy costs).
    fn weight(&self) -> usize {
        match self {
            Val::Tuple(v) | Val::List(v) => 1 + v.iter().map(Val::weight).sum::<usize>(),
            Val::Dict(v) => {
                1 + v
                    .iter()
                    .map(|(a, b)| a.weight() + b.weight())
                    .sum::<usize>()
            }
            Val::Str(s) => 1 + s.len() / 16,
            Val::Tensor(t) => 1 + t.shape.len() + t.key.len() / 16,
            _ => 1,
        }
    }
}

struct Unpickler<'a> {
    b: &'a [u8],
    pos: usize,
    stack: Vec<Val>,
    marks: Vec<usize>,
    memo: HashMap<u32, Val>,
    /// Values still allowed to be built (bounded by the input's length).
    budget: usize,
}

type R<T> = std::result::Result<T, String>;

impl<'a> Unpickler<'a> {
    fn new(b: &'a [u8]) -> Unpickler<'a> {
        Unpickler {
            b,
            pos: 0,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            budget: b.len() / 4 + 4096,
        }
    }

    fn take(&mut self, n: usize) -> R<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| format!("truncated pickle (at byte {})", self.pos))?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> R<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> R<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }

    fn line(&mut self) -> R<&'a str> {
        let rest = &self.b[self.pos.min(self.b.len())..];
        let n = rest
            .iter()
            .position(|&c| c == b'\n')
            .ok_or_else(|| format!("truncated pickle (GLOBAL at byte {})", self.pos))?;
        let s = std::str::from_utf8(&rest[..n])
            .map_err(|_| format!("GLOBAL name at byte {} is not UTF-8", self.pos))?;
        self.pos += n + 1;
        Ok(s)
    }

    fn charge(&mut self, v: &Val) -> R<()> {
        let w = v.weight();
        if w > self.budget {
            return Err("the pickle builds more values than its size allows (corrupt?)".into());
        }
        self.budget -= w;
        if v.depth() > MAX_DEPTH {
            return Err(format!("containers nested deeper than {MAX_DEPTH}"));
        }
        Ok(())
    }

    fn push(&mut self, v: Val) -> R<()> {
        self.charge(&v)?;
        self.stack.push(v);
        Ok(())
    }

    fn pop(&mut self, op: &str) -> R<Val> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return Err(format!("{op}: stack empty above the MARK"));
        }
        self.stack
            .pop()
            .ok_or_else(|| format!("{op}: stack underflow"))
    }

    fn top(&mut self, op: &str) -> R<&mut Val> {
        if self.marks.last().is_some_and(|&m| m >= self.stack.len()) {
            return Err(format!("{op}: stack empty above the MARK"));
        }
        self.stack
            .last_mut()
            .ok_or_else(|| format!("{op}: stack underflow"))
    }

    /// The values above the last MARK (the mark removed).
    fn pop_mark(&mut self, op: &str) -> R<Vec<Val>> {
        let m = self
            .marks
            .pop()
            .ok_or_else(|| format!("{op} without MARK"))?;
        Ok(self.stack.split_off(m))
    }

    fn memo_put(&mut self, k: u32) -> R<()> {
        let v = self.top("PUT")?.clone();
        self.charge(&v)?;
        if self.memo.len() >= 1 << 20 && !self.memo.contains_key(&k) {
            return Err("too many memo entries".into());
        }
        self.memo.insert(k, v);
        Ok(())
    }

    fn memo_get(&mut self, k: u32) -> R<()> {
        let v = self
            .memo
            .get(&k)
            .cloned()
            .ok_or_else(|| format!("GET of memo entry {k}, which was never put"))?;
        self.push(v)
    }

    /// Runs to STOP: the value and the bytes consumed.
    // long: the interpreter loop, one short match arm per pickle opcode torch emits; split, the arms would only move apart from their opcodes
    fn run(mut self) -> R<(Val, usize)> {
        loop {
            let at = self.pos;
            let op = self.u8()?;
            match op {
                0x80 => {
                    let p = self.u8()?;
                    if p > 5 {
                        return Err(format!("pickle protocol {p} (at most 5)"));
                    }
                }
                b'}' => self.push(Val::Dict(Vec::new()))?,
                b']' => self.push(Val::List(Vec::new()))?,
                b')' => self.push(Val::Tuple(Vec::new()))?,
                b'(' => {
                    if self.marks.len() > MAX_DEPTH * 4 {
                        return Err("too many open MARKs".into());
                    }
                    self.marks.push(self.stack.len())
                }
                b'N' => self.push(Val::None)?,
                0x88 => self.push(Val::Bool(true))?,
                0x89 => self.push(Val::Bool(false))?,
                b'K' => {
                    let v = self.u8()? as i64;
                    self.push(Val::Int(v))?
                }
                b'M' => {
                    let v = u16::from_le_bytes(self.take(2)?.try_into().unwrap()) as i64;
                    self.push(Val::Int(v))?
                }
                b'J' => {
                    let v = i32::from_le_bytes(self.take(4)?.try_into().unwrap()) as i64;
                    self.push(Val::Int(v))?
                }
                0x8a => {
                    let n = self.u8()? as usize;
                    let b = self.take(n)?;
                    if n > 8 {
                        // beyond int64: only the legacy format's magic number
                        self.push(Val::BigInt(b.to_vec()))?;
                        continue;
                    }
                    let mut buf = [0u8; 8];
                    buf[..n].copy_from_slice(b);
                    if n > 0 && n < 8 && b[n - 1] & 0x80 != 0 {
                        for x in &mut buf[n..] {
                            *x = 0xff;
                        }
                    }
                    self.push(Val::Int(i64::from_le_bytes(buf)))?
                }
                b'G' => {
                    let v = f64::from_be_bytes(self.take(8)?.try_into().unwrap());
                    self.push(Val::Float(v))?
                }
                b'X' | 0x8c => {
                    let n = if op == b'X' {
                        self.u32()? as usize
                    } else {
                        self.u8()? as usize
                    };
                    let s = std::str::from_utf8(self.take(n)?)
                        .map_err(|_| format!("string at byte {at} is not UTF-8"))?
                        .to_string();
                    self.push(Val::Str(s))?
                }
                b'c' => {
                    let m = self.line()?.to_string();
                    let n = self.line()?.to_string();
                    self.push(Val::Global(m, n))?
                }
                b'Q' => {
                    let pid = self.pop("BINPERSID")?;
                    let v = persistent_load(pid)?;
                    self.push(v)?
                }
                b't' => {
                    let v = self.pop_mark("TUPLE")?;
                    self.push(Val::Tuple(v))?
                }
                0x85..=0x87 => {
                    let n = (op - 0x84) as usize;
                    let mut v = Vec::with_capacity(n);
                    for _ in 0..n {
                        v.push(self.pop("TUPLE")?);
                    }
                    v.reverse();
                    self.push(Val::Tuple(v))?
                }
                b'R' => {
                    let args = self.pop("REDUCE")?;
                    let f = self.pop("REDUCE")?;
                    let v = reduce(f, args)?;
                    self.push(v)?
                }
                b's' | b'u' => {
                    let items = if op == b's' {
                        let v = self.pop("SETITEM")?;
                        let k = self.pop("SETITEM")?;
                        vec![k, v]
                    } else {
                        self.pop_mark("SETITEMS")?
                    };
                    if items.len() % 2 != 0 {
                        return Err(format!(
                            "SETITEMS with an odd number of values (at byte {at})"
                        ));
                    }
                    let Val::Dict(d) = self.top("SETITEMS")? else {
                        return Err(format!(
                            "SETITEMS on a value that is not a dict (at byte {at})"
                        ));
                    };
                    let deep = items.iter().map(Val::depth).max().unwrap_or(0) + 1;
                    let mut it = items.into_iter();
                    while let (Some(k), Some(v)) = (it.next(), it.next()) {
                        d.push((k, v));
                    }
                    if deep > MAX_DEPTH {
                        return Err(format!("containers nested deeper than {MAX_DEPTH}"));
                    }
                }
                b'a' | b'e' => {
                    let items = if op == b'a' {
                        vec![self.pop("APPEND")?]
                    } else {
                        self.pop_mark("APPENDS")?
                    };
                    let Val::List(l) = self.top("APPENDS")? else {
                        return Err(format!(
                            "APPENDS on a value that is not a list (at byte {at})"
                        ));
                    };
                    let deep = items.iter().map(Val::depth).max().unwrap_or(0) + 1;
                    l.extend(items);
                    if deep > MAX_DEPTH {
                        return Err(format!("containers nested deeper than {MAX_DEPTH}"));
                    }
                }
                b'q' => {
                    let k = self.u8()? as u32;
                    self.memo_put(k)?
                }
                b'r' => {
                    let k = self.u32()?;
                    self.memo_put(k)?
                }
                0x94 => {
                    let k = self.memo.len() as u32;
                    self.memo_put(k)?
                }
                b'h' => {
                    let k = self.u8()? as u32;
                    self.memo_get(k)?
                }
                b'j' => {
                    let k = self.u32()?;
                    self.memo_get(k)?
                }
                b'.' => {
                    if !self.marks.is_empty() {
                        return Err("STOP with an open MARK".into());
                    }
                    let v = self.pop("STOP")?;
                    if !self.stack.is_empty() {
                        return Err(format!(
                            "STOP with {} more values on the stack",
                            self.stack.len()
                        ));
                    }
                    return Ok((v, self.pos));
                }
                other => {
                    return Err(format!(
                        "opcode {:?} (0x{other:02x}) at byte {at} is not one torch.save emits \
                         for a dict of tensors",
                        other as char
                    ))
                }
            }
        }
    }
}

/// `('storage', torch.XStorage, key, location, numel)` -> a storage.
fn persistent_load(pid: Val) -> R<Val> {
    let Val::Tuple(t) = pid else {
        return Err(format!("persistent id is {}, not a tuple", pid.kind()));
    };
    match t.as_slice() {
        [Val::Str(tag), Val::Global(m, cls), Val::Str(key), Val::Str(_loc), Val::Int(numel), ..]
            if tag == "storage" =>
        {
            if m != "torch" {
                return Err(format!("storage type {m}.{cls} (expected torch.*Storage)"));
            }
            let dtype = TorchDtype::from_storage(cls).ok_or_else(|| {
                format!("storage type torch.{cls}: tma reads Long, Int, Short, Char, Byte, Bool, Double, Float and Half storages")
            })?;
            if *numel < 0 {
                return Err(format!("storage {key:?} has {numel} elements"));
            }
            if t.len() > 5 && !matches!(t[5], Val::None) {
                return Err("a storage view (legacy format) is not read".into());
            }
            Ok(Val::Storage {
                dtype,
                key: key.clone(),
                numel: *numel as u64,
            })
        }
        _ => Err(
            "persistent id is not ('storage', torch.XStorage, key, location, numel)".to_string(),
        ),
    }
}

/// The calls torch's pickles make: `_rebuild_tensor_v2`, `_rebuild_tensor`, `OrderedDict`.
fn reduce(f: Val, args: Val) -> R<Val> {
    let Val::Global(m, n) = f else {
        return Err(format!("REDUCE calls {}, not a function", f.kind()));
    };
    let Val::Tuple(a) = args else {
        return Err(format!(
            "REDUCE of {m}.{n} with {} as arguments",
            args.kind()
        ));
    };
    match (m.as_str(), n.as_str()) {
        ("collections", "OrderedDict") => {
            if !a.is_empty() {
                return Err("collections.OrderedDict with arguments".into());
            }
            Ok(Val::Dict(Vec::new()))
        }
        ("torch._utils", "_rebuild_tensor_v2") | ("torch._utils", "_rebuild_tensor") => {
            let want = if n == "_rebuild_tensor" { 4 } else { 6 };
            if a.len() < want || a.len() > 7 {
                return Err(format!(
                    "{m}.{n} with {} arguments (expected {want})",
                    a.len()
                ));
            }
            let Val::Storage { dtype, key, numel } = &a[0] else {
                return Err(format!(
                    "{m}.{n}: first argument is {}, not a storage",
                    a[0].kind()
                ));
            };
            let Val::Int(offset) = a[1] else {
                return Err(format!("{m}.{n}: storage offset is {}", a[1].kind()));
            };
            let ints = |v: &Val, what: &str| -> R<Vec<u64>> {
                let Val::Tuple(t) = v else {
                    return Err(format!("{m}.{n}: {what} is {}, not a tuple", v.kind()));
                };
                t.iter()
                    .map(|x| match x {
                        Val::Int(i) if *i >= 0 => Ok(*i as u64),
                        other => Err(format!("{m}.{n}: {what} holds {other:?}")),
                    })
                    .collect()
            };
            if offset < 0 {
                return Err(format!("{m}.{n}: storage offset {offset}"));
            }
            if n == "_rebuild_tensor_v2" {
                if let Val::Dict(hooks) = &a[5] {
                    if !hooks.is_empty() {
                        return Err("a tensor with backward hooks".into());
                    }
                }
            }
            Ok(Val::Tensor(TensorRef {
                dtype: *dtype,
                key: key.clone(),
                numel: *numel,
                offset: offset as u64,
                shape: ints(&a[2], "size")?,
                stride: ints(&a[3], "stride")?,
            }))
        }
        _ => Err(format!(
            "the pickle calls {m}.{n}, which is not part of a dict of tensors (tma calls only \
             torch._utils._rebuild_tensor_v2 and collections.OrderedDict)"
        )),
    }
}

/// Writes `tensors` as `torch.save` does for a dict of str -> contiguous tensor: the archive
/// named `name` (torch names it after the file's stem), storages `data/0..`, the pickle as
/// Python's protocol-2 pickler writes it (strings and globals memoized, repeats as BINGET),
/// `byteorder` little, `version` 3, members stored with data aligned to 64 bytes: the inverse
/// of [`read_pt`], for tests and fixtures (it mirrors `torch/serialization.py`; the fixtures'
/// script says whether they were checked with torch). Elements are little-endian bytes.
///
/// # Errors
/// [`GraphError::Io`] naming `path` when it cannot be written.
pub fn write_pt(path: &Path, name: &str, tensors: &[PtEntry<'_>]) -> Result<()> {
    use std::io::Write;
    let io = |e: std::io::Error| GraphError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let mut w = PickleWriter::default();
    w.p.extend_from_slice(&[0x80, 0x02, b'}']);
    w.put();
    if tensors.len() > 1 {
        w.p.push(b'(');
    }
    for (i, (key, dtype, shape, _)) in tensors.iter().enumerate() {
        w.string(key);
        w.global("torch._utils", "_rebuild_tensor_v2");
        w.p.extend_from_slice(b"((");
        w.string("storage");
        w.global("torch", storage_name(*dtype));
        w.string(&i.to_string());
        w.string("cpu");
        w.int(shape.iter().product());
        w.p.push(b't');
        w.put();
        w.p.push(b'Q');
        w.int(0);
        w.tuple(shape);
        let mut stride = vec![1u64; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            stride[d] = stride[d + 1] * shape[d + 1];
        }
        w.tuple(&stride);
        w.p.push(0x89);
        w.global("collections", "OrderedDict");
        w.p.extend_from_slice(b")R");
        w.put();
        w.p.push(b't');
        w.put();
        w.p.push(b'R');
        w.put();
    }
    match tensors.len() {
        0 => {}
        1 => w.p.push(b's'),
        _ => w.p.push(b'u'),
    }
    w.p.push(b'.');

    let file = std::fs::File::create(path).map_err(io)?;
    let mut z = zip::ZipWriter::new(file);
    let opts = || {
        zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .with_alignment(64)
    };
    let zerr = |e: zip::result::ZipError| io(std::io::Error::other(e.to_string()));
    z.start_file(format!("{name}/data.pkl"), opts())
        .map_err(zerr)?;
    z.write_all(&w.p).map_err(io)?;
    z.start_file(format!("{name}/byteorder"), opts())
        .map_err(zerr)?;
    z.write_all(b"little").map_err(io)?;
    for (i, (_, _, _, bytes)) in tensors.iter().enumerate() {
        z.start_file(format!("{name}/data/{i}"), opts())
            .map_err(zerr)?;
        z.write_all(bytes).map_err(io)?;
    }
    z.start_file(format!("{name}/version"), opts())
        .map_err(zerr)?;
    z.write_all(b"3\n").map_err(io)?;
    z.finish().map_err(zerr)?;
    Ok(())
}

/// One tensor for [`write_pt`]: key, dtype, shape, little-endian C-order bytes.
pub type PtEntry<'a> = (&'a str, TorchDtype, &'a [u64], &'a [u8]);

fn storage_name(d: TorchDtype) -> &'static str {
    match d {
        TorchDtype::I64 => "LongStorage",
        TorchDtype::I32 => "IntStorage",
        TorchDtype::I16 => "ShortStorage",
        TorchDtype::I8 => "CharStorage",
        TorchDtype::U8 => "ByteStorage",
        TorchDtype::Bool => "BoolStorage",
        TorchDtype::F64 => "DoubleStorage",
        TorchDtype::F32 => "FloatStorage",
        TorchDtype::F16 => "HalfStorage",
    }
}

/// The opcodes of Python's protocol-2 pickler for what [`write_pt`] writes.
#[derive(Default)]
struct PickleWriter {
    p: Vec<u8>,
    memo: u32,
    /// Memo index of each string and global written (Python memoizes them by identity; the
    /// strings torch repeats, `storage`, `cpu`, are interned).
    seen: HashMap<String, u32>,
}

impl PickleWriter {
    fn put(&mut self) {
        if self.memo < 256 {
            self.p.extend_from_slice(&[b'q', self.memo as u8]);
        } else {
            self.p.push(b'r');
            self.p.extend_from_slice(&self.memo.to_le_bytes());
        }
        self.memo += 1;
    }

    fn get_or(&mut self, id: String, write: impl FnOnce(&mut Vec<u8>)) {
        if let Some(&k) = self.seen.get(&id) {
            if k < 256 {
                self.p.extend_from_slice(&[b'h', k as u8]);
            } else {
                self.p.push(b'j');
                self.p.extend_from_slice(&k.to_le_bytes());
            }
            return;
        }
        write(&mut self.p);
        self.seen.insert(id, self.memo);
        self.put();
    }

    fn string(&mut self, s: &str) {
        self.get_or(format!("s:{s}"), |p| {
            p.push(b'X');
            p.extend_from_slice(&(s.len() as u32).to_le_bytes());
            p.extend_from_slice(s.as_bytes());
        });
    }

    fn global(&mut self, m: &str, n: &str) {
        self.get_or(format!("g:{m}.{n}"), |p| {
            p.extend_from_slice(format!("c{m}\n{n}\n").as_bytes())
        });
    }

    fn int(&mut self, v: u64) {
        if v < 256 {
            self.p.extend_from_slice(&[b'K', v as u8]);
        } else if v < 65536 {
            self.p.push(b'M');
            self.p.extend_from_slice(&(v as u16).to_le_bytes());
        } else if v < (1 << 31) {
            self.p.push(b'J');
            self.p.extend_from_slice(&(v as u32).to_le_bytes());
        } else {
            let b = v.to_le_bytes();
            let mut n = 8;
            while n > 1 && b[n - 1] == 0 && b[n - 2] & 0x80 == 0 {
                n -= 1;
            }
            self.p.extend_from_slice(&[0x8a, n as u8]);
            self.p.extend_from_slice(&b[..n]);
        }
    }

    /// A tuple of ints, memoized (not the empty one), as `save_tuple` writes it.
    fn tuple(&mut self, vals: &[u64]) {
        match vals.len() {
            0 => self.p.push(b')'),
            1..=3 => {
                for &v in vals {
                    self.int(v);
                }
                self.p.push(0x84 + vals.len() as u8);
                self.put();
            }
            _ => {
                self.p.push(b'(');
                for &v in vals {
                    self.int(v);
                }
                self.p.push(b't');
                self.put();
            }
        }
    }
}
