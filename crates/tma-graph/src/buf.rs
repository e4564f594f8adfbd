//! [`Buf`]: an array that is either owned (`Vec<T>`) or a read-only view into a memory-mapped
//! file, behind one slice API (`Deref<Target = [T]>`). [`crate::Csr`] and dense
//! [`crate::Features`] store their arrays in it, so the sampler, the kernels and evaluation run
//! unchanged whether a graph was loaded into memory or mapped from disk (a part of a partition
//! directory, a graph of the on-disk format).

use std::fmt;
use std::fs::File;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;
use serde::{Deserialize, Serialize};

use crate::error::{GraphError, Result};

/// Element type of an array file (of the on-disk format, `docs/graph-format.md`) and of a
/// [`Pod`] viewed in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    /// Unsigned 64-bit integer.
    U64,
    /// Unsigned 32-bit integer.
    U32,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned byte.
    U8,
    /// IEEE 754 binary32.
    F32,
    /// IEEE 754 binary16 (the `half` crate's `f16`).
    F16,
}

impl Dtype {
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Dtype::U64 => 8,
            Dtype::U32 | Dtype::I32 | Dtype::F32 => 4,
            Dtype::F16 => 2,
            Dtype::U8 => 1,
        }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Element types that may be viewed in place in a mapped file: plain data, valid for every bit
/// pattern, stored little-endian (`u64`, `u32`, `i32`, `u8`, `f32`, `f16`).
pub trait Pod: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The on-disk dtype of the element.
    const DTYPE: Dtype;
}

macro_rules! pod {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Pod for $t {
            const DTYPE: Dtype = Dtype::$d;
        }
    )*};
}
pod!(u64 => U64, u32 => U32, i32 => I32, u8 => U8, f32 => F32, half::f16 => F16);

/// A shared read-only mapping of a whole file (one per file, shared by every [`Buf`] that views
/// part of it).
pub struct SharedMap {
    map: Option<Mmap>,
    path: std::path::PathBuf,
}

impl fmt::Debug for SharedMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SharedMap({}, {} bytes)",
            self.path.display(),
            self.len()
        )
    }
}

impl SharedMap {
    /// Maps `path` read-only (an empty file gets no mapping: a zero-length map is not
    /// portable). The file must not be modified while mapped.
    ///
    /// # Errors
    /// [`GraphError::Io`] naming the file.
    pub fn open(path: &Path) -> Result<Arc<SharedMap>> {
        let io = |source| GraphError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        Self::from_file(&file, path)
    }

    /// Maps the open `file` read-only, e.g. an unnamed temporary file; `name` is what errors
    /// and [`SharedMap::path`] say. Same rules as [`SharedMap::open`].
    ///
    /// # Errors
    /// [`GraphError::Io`] naming `name`.
    pub fn from_file(file: &File, name: &Path) -> Result<Arc<SharedMap>> {
        let path = name;
        let io = |source| GraphError::Io {
            path: path.to_path_buf(),
            source,
        };
        let len = file.metadata().map_err(io)?.len();
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the mapping is read-only; tma's contract for mapped files (on-disk
            // graphs, partition directories) is that they are not modified while open.
            Some(unsafe { Mmap::map(file) }.map_err(io)?)
        };
        Ok(Arc::new(SharedMap {
            map,
            path: path.to_path_buf(),
        }))
    }

    /// The mapped file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes mapped (the file's size).
    pub fn len(&self) -> usize {
        self.map.as_ref().map_or(0, |m| m.len())
    }

    /// Whether the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// Drops this process's resident pages of bytes `offset..offset + len` (widened to whole
    /// pages, clamped to the file): they leave the process's RSS but stay in the kernel's
    /// page cache, and the next read of them faults them back in, unchanged. Used after a
    /// streaming pass over a mapped graph (validation, partitioning) so the pass does not
    /// leave the whole file counted in the process's resident memory. Best effort: an
    /// `madvise` failure is ignored (the pages then simply stay resident).
    pub fn release(&self, offset: usize, len: usize) {
        let Some(map) = &self.map else { return };
        let page = page_size();
        let start = (offset / page) * page;
        let end = offset.saturating_add(len).min(map.len());
        if end <= start {
            return;
        }
        // SAFETY: the mapping is a read-only MAP_SHARED view of a file that is not modified
        // while mapped (see `open`). MADV_DONTNEED on such a mapping only drops page-table
        // entries: a later access faults the same file contents back in from the page cache,
        // so every slice borrowed from this map keeps reading the same bytes.
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }

    /// [`SharedMap::release`] over the whole file.
    pub fn release_all(&self) {
        self.release(0, self.len());
    }
}

/// Resident bytes of this process's mappings of files whose path starts with `prefix` (a file
/// or a directory), from the `Rss:` lines of `/proc/self/smaps`: how much of a mapped graph
/// or part a pass left counted in the process's RSS. Per mapping, so other mappings and the
/// heap do not count. `None` where `/proc/self/smaps` cannot be read (not Linux).
pub fn mapped_resident_bytes(prefix: &Path) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let prefix = prefix.to_str()?;
    let (mut inside, mut total) = (false, 0u64);
    for l in smaps.lines() {
        let first = l.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            // a mapping's header: address range, perms, offset, device, inode, path
            inside = l
                .split_whitespace()
                .nth(5)
                .is_some_and(|p| p.starts_with(prefix));
        } else if inside && l.starts_with("Rss:") {
            let kib: u64 = l.split_whitespace().nth(1)?.parse().ok()?;
            total += kib * 1024;
        }
    }
    Some(total)
}

/// The system's page size (4096 where it cannot be read).
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

enum Repr<T> {
    Owned(Vec<T>),
    Mapped {
        map: Arc<SharedMap>,
        /// Byte offset of element 0 in the map (checked aligned for `T`).
        offset: usize,
        /// Elements.
        len: usize,
    },
}

/// An array of `T` that is owned or mapped from a file; both deref to `[T]`.
///
/// Cloning a mapped buffer shares the mapping (no copy); [`Buf::make_mut`] turns a mapped
/// buffer into an owned copy before writing (copy on write).
pub struct Buf<T>(Repr<T>);

impl<T: Pod> Buf<T> {
    /// A view of `len` elements of `map` starting at byte `offset`.
    ///
    /// # Errors
    /// [`GraphError::Invalid`] naming the file when the range passes the end of the file or
    /// its start is not aligned for `T`.
    pub fn mapped(map: Arc<SharedMap>, offset: usize, len: usize) -> Result<Buf<T>> {
        let size = std::mem::size_of::<T>();
        let end = len
            .checked_mul(size)
            .and_then(|b| b.checked_add(offset))
            .filter(|&e| e <= map.len());
        let invalid = |reason: String| GraphError::Invalid {
            path: map.path.clone(),
            reason,
        };
        if end.is_none() {
            return Err(invalid(format!(
                "{len} elements of {size} bytes at offset {offset} pass the end of the file ({} bytes)",
                map.len()
            )));
        }
        if len > 0 {
            let addr = map.bytes().as_ptr() as usize + offset;
            if !addr.is_multiple_of(std::mem::align_of::<T>()) {
                return Err(invalid(format!(
                    "data at offset {offset} is not aligned for {}-byte elements",
                    std::mem::align_of::<T>()
                )));
            }
        }
        if cfg!(target_endian = "big") {
            return Err(invalid(
                "mapped arrays are little-endian; this host is big-endian".into(),
            ));
        }
        Ok(Buf(Repr::Mapped { map, offset, len }))
    }
}

impl<T> Buf<T> {
    /// Whether the data is a view into a mapped file.
    pub fn is_mapped(&self) -> bool {
        matches!(self.0, Repr::Mapped { .. })
    }

    /// The mapped file, when mapped.
    pub fn mapped_file(&self) -> Option<&Path> {
        match &self.0 {
            Repr::Mapped { map, .. } => Some(map.path()),
            Repr::Owned(_) => None,
        }
    }

    /// Drops this process's resident pages of a mapped buffer ([`SharedMap::release`]); no-op
    /// when owned. The data reads the same afterwards (faulted back in from the page cache).
    pub fn release_pages(&self) {
        if let Repr::Mapped { map, offset, len } = &self.0 {
            map.release(*offset, len.saturating_mul(std::mem::size_of::<T>()));
        }
    }

    /// [`Buf::release_pages`] of elements `range` only (clamped to the buffer; the pages
    /// holding them, widened to whole pages, so a neighbouring element may be faulted back in
    /// on its next read): for a pass that reads a mapped array in ascending order and drops
    /// what lies behind it. No-op when owned.
    pub fn release_elems(&self, range: std::ops::Range<usize>) {
        if let Repr::Mapped { map, offset, len } = &self.0 {
            let size = std::mem::size_of::<T>();
            let end = range.end.min(*len);
            if range.start < end {
                map.release(offset + range.start * size, (end - range.start) * size);
            }
        }
    }

    /// Bytes of anonymous (heap) memory this buffer holds: its capacity when owned, 0 when
    /// mapped (the pages of a mapping are page cache, reclaimable).
    pub fn heap_bytes(&self) -> usize {
        match &self.0 {
            Repr::Owned(v) => v.capacity() * std::mem::size_of::<T>(),
            Repr::Mapped { .. } => 0,
        }
    }
}

impl<T: Clone> Buf<T> {
    /// The owned vector to write into; a mapped buffer is copied first (copy on write).
    pub fn make_mut(&mut self) -> &mut Vec<T> {
        if let Repr::Mapped { .. } = self.0 {
            let v = self.to_vec();
            self.0 = Repr::Owned(v);
        }
        match &mut self.0 {
            Repr::Owned(v) => v,
            Repr::Mapped { .. } => unreachable!("made owned above"),
        }
    }

    /// The data as an owned vector (moved when owned, copied when mapped).
    pub fn into_vec(self) -> Vec<T> {
        match self.0 {
            Repr::Owned(v) => v,
            Repr::Mapped { .. } => self.to_vec(),
        }
    }
}

impl<T> Deref for Buf<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        match &self.0 {
            Repr::Owned(v) => v,
            Repr::Mapped { map, offset, len } => {
                if *len == 0 {
                    return &[];
                }
                // SAFETY: a `Mapped` buffer is only built by `Buf::mapped` for `T: Pod` (plain
                // data valid for every bit pattern, little-endian host), which checked that
                // `offset + len * size_of::<T>()` lies within the map and that the start is
                // aligned for `T`. The map is read-only and lives as long as `self` (Arc).
                unsafe {
                    std::slice::from_raw_parts(map.bytes().as_ptr().add(*offset) as *const T, *len)
                }
            }
        }
    }
}

impl<T> AsRef<[T]> for Buf<T> {
    fn as_ref(&self) -> &[T] {
        self
    }
}

impl<T> std::borrow::Borrow<[T]> for Buf<T> {
    fn borrow(&self) -> &[T] {
        self
    }
}

impl<T: Clone> Clone for Buf<T> {
    fn clone(&self) -> Self {
        match &self.0 {
            Repr::Owned(v) => Buf(Repr::Owned(v.clone())),
            Repr::Mapped { map, offset, len } => Buf(Repr::Mapped {
                map: map.clone(),
                offset: *offset,
                len: *len,
            }),
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Buf<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T> Default for Buf<T> {
    fn default() -> Self {
        Buf(Repr::Owned(Vec::new()))
    }
}

impl<T> From<Vec<T>> for Buf<T> {
    fn from(v: Vec<T>) -> Self {
        Buf(Repr::Owned(v))
    }
}

impl<T> FromIterator<T> for Buf<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Buf(Repr::Owned(iter.into_iter().collect()))
    }
}

impl<'a, T> IntoIterator for &'a Buf<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: PartialEq> PartialEq for Buf<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Eq> Eq for Buf<T> {}

impl<T: PartialEq> PartialEq<Vec<T>> for Buf<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        **self == **other
    }
}

impl<T: PartialEq> PartialEq<[T]> for Buf<T> {
    fn eq(&self, other: &[T]) -> bool {
        **self == *other
    }
}

impl<T: PartialEq> PartialEq<Buf<T>> for Vec<T> {
    fn eq(&self, other: &Buf<T>) -> bool {
        **self == **other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(bytes: &[u8]) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.bin");
        std::fs::write(&p, bytes).unwrap();
        (dir, p)
    }

    #[test]
    fn mapped_reads_in_place_and_copies_on_write() {
        let data: Vec<u8> = [7u32, 8, 9, 10]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let (_d, p) = file_with(&data);
        let map = SharedMap::open(&p).unwrap();
        let b: Buf<u32> = Buf::mapped(map.clone(), 4, 3).unwrap();
        assert!(b.is_mapped());
        assert_eq!(&*b, &[8, 9, 10]);
        assert_eq!(b, vec![8u32, 9, 10]);
        assert_eq!(b.heap_bytes(), 0);
        let shared = b.clone();
        assert!(shared.is_mapped());
        let mut c = b.clone();
        c.make_mut()[0] = 1;
        assert!(!c.is_mapped());
        assert_eq!(&*c, &[1, 9, 10]);
        assert_eq!(&*b, &[8, 9, 10], "the mapping is untouched");
        assert_eq!(b.into_vec(), vec![8, 9, 10]);
        let owned: Buf<u32> = vec![1, 2].into();
        assert!(!owned.is_mapped());
        assert_eq!(owned.heap_bytes(), 8);
    }

    #[test]
    fn out_of_range_and_misaligned_views_are_errors_naming_the_file() {
        let (_d, p) = file_with(&[0u8; 16]);
        let map = SharedMap::open(&p).unwrap();
        let e = Buf::<u32>::mapped(map.clone(), 4, 4)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "{}: invalid content: 4 elements of 4 bytes at offset 4 pass the end of the file (16 bytes)",
                p.display()
            )
        );
        let e = Buf::<u64>::mapped(map.clone(), 4, 1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a.bin") && e.contains("not aligned"), "{e}");
        // an empty view anywhere inside is fine
        assert!(Buf::<u64>::mapped(map, 16, 0).unwrap().is_empty());
    }

    /// This process's resident file-backed memory (`RssFile`), bytes.
    fn rss_file() -> u64 {
        crate::memory::file_bytes().expect("RssFile in /proc/self/status")
    }

    #[test]
    fn released_pages_leave_the_rss_and_read_back_the_same() {
        // 64 MiB of distinct words; reading them all makes them resident, releasing drops them
        let words: Vec<u32> = (0..(16u32 << 20))
            .map(|i| i.wrapping_mul(2654435761))
            .collect();
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let (_d, p) = file_with(&bytes);
        let map = SharedMap::open(&p).unwrap();
        let b: Buf<u32> = Buf::mapped(map.clone(), 0, words.len()).unwrap();
        let sum = |b: &Buf<u32>| b.iter().fold(0u64, |a, &x| a.wrapping_add(x as u64));
        let want = words.iter().fold(0u64, |a, &x| a.wrapping_add(x as u64));
        assert_eq!(sum(&b), want);
        let resident = rss_file();
        b.release_pages();
        let after = rss_file();
        assert!(
            resident.saturating_sub(after) >= 60 << 20,
            "RssFile {resident} -> {after}: the 64 MiB mapping was not released"
        );
        assert_eq!(sum(&b), want, "the data reads the same after release");
        assert_eq!(&b[..4], &words[..4]);
        // an owned buffer: no-op
        Buf::from(vec![1u32, 2]).release_pages();
        Buf::from(vec![1u32, 2]).release_elems(0..2);
        // a range: only its pages leave (64 MiB read back, then its second half released)
        assert_eq!(sum(&b), want);
        let resident = rss_file();
        b.release_elems(words.len() / 2..words.len() + 7);
        let after = rss_file();
        let dropped = resident.saturating_sub(after);
        assert!(
            (28 << 20..=36 << 20).contains(&dropped),
            "RssFile {resident} -> {after}: releasing half of 64 MiB dropped {dropped} bytes"
        );
        assert_eq!(
            sum(&b),
            want,
            "the data reads the same after a partial release"
        );
    }

    #[test]
    fn empty_file_maps_to_empty_slice() {
        let (_d, p) = file_with(&[]);
        let map = SharedMap::open(&p).unwrap();
        let b = Buf::<f32>::mapped(map, 0, 0).unwrap();
        assert!(b.is_empty() && b.is_mapped());
    }
}
