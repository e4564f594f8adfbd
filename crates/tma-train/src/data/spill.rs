//! Parts spilled to disk: a trainer's part, cut from a mapped (or any) graph, streamed to
//! `.npy` files in the layout of a partition directory's part folder ([`crate::store`]) and
//! mapped back, so a process holds only mapped pages of the parts, never the parts' arrays.
//!
//! One implementation serves two uses ([`Spill`]):
//! * **unlinked** ([`Spill::unlinked`]): `tma train` on a graph in the on-disk format writes each
//!   part under `RUN_DIR/.parts`, maps it back and removes the files
//!   ([`crate::data::prepare_spilled`]): each trainer holds only mapped pages of its own part;
//! * **kept** ([`Spill::kept`]): `tma partition --out` on such a graph streams each part into the
//!   partition directory's staging folder, where the files stay; their sha256 and sizes,
//!   computed while writing, go into the manifest ([`crate::store::PartitionWriter`]).
//!
//! Every `.npy` file of a partition directory, spilled or not, is written by [`write_npy`].

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;
use tma_graph::npy::{self, Element};
use tma_graph::{Csr, Features, GraphError};

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> GraphError + '_ {
    move |source| GraphError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Creates `dir` and the folders between it and `root`, one `create_dir` at a time, but never
/// `root` itself: when `root` is gone (a Ctrl-C handler removed an unfinished staging folder),
/// the call fails with [`std::io::ErrorKind::NotFound`] instead of making it again. A writer
/// that still runs after the handler removed its folder then stops at its next folder instead
/// of leaving a new one behind (regression: `tma partition --out D` interrupted left `.D.tmp`).
///
/// # Errors
/// `NotFound` if `root` is not a directory (or vanishes meanwhile); `InvalidInput` if `dir` is
/// not under `root`; any other error of `create_dir`.
pub fn create_dir_below(root: &Path, dir: &Path) -> std::io::Result<()> {
    let rel = dir.strip_prefix(root).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} is not under {}", dir.display(), root.display()),
        )
    })?;
    if !root.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("the folder {} was removed", root.display()),
        ));
    }
    let mut p = root.to_path_buf();
    for c in rel.components() {
        p.push(c);
        match fs::create_dir(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && p.is_dir() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A file written by [`write_npy`]: its sha256 (hex) and size, computed while writing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// sha256 of the file's bytes, lower-case hex.
    pub sha256: String,
    /// Size of the file, bytes.
    pub bytes: u64,
}

/// A writer that hashes and counts what passes through it.
struct Hashing<W: Write> {
    inner: W,
    hash: Sha256,
    bytes: u64,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let k = self.inner.write(buf)?;
        self.hash.update(&buf[..k]);
        self.bytes += k as u64;
        Ok(k)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Lower-case hex of a digest.
pub(crate) fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Streams one `.npy` file to `path` (created or truncated): the header of `descr`/`shape`
/// ([`npy::encode_header`], C order, padded to 64 bytes), then whatever `body` writes, through
/// a 1 MiB buffer, hashing as it goes; the file is fsync'd. The bytes are those of
/// [`npy::encode`] of the same array, without the array ever being encoded in memory.
///
/// # Errors
/// [`GraphError::Io`] naming the file.
pub fn write_npy(
    path: &Path,
    descr: &str,
    shape: &[usize],
    body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<Written, GraphError> {
    let f = fs::File::create(path).map_err(io(path))?;
    let mut w = Hashing {
        inner: std::io::BufWriter::with_capacity(1 << 20, f),
        hash: Sha256::new(),
        bytes: 0,
    };
    let header = npy::encode_header(descr, shape, npy::Order::C);
    w.write_all(&header).map_err(io(path))?;
    body(&mut w).map_err(io(path))?;
    let Hashing { inner, hash, bytes } = w;
    inner
        .into_inner()
        .map_err(|e| io(path)(e.into_error()))?
        .sync_all()
        .map_err(io(path))?;
    Ok(Written {
        sha256: hex(&hash.finalize()),
        bytes,
    })
}

/// Writes `xs` little-endian to `w` in chunks of 64 Ki elements (a bounded buffer, whatever
/// the length of `xs`).
pub fn write_le<T: Element>(w: &mut dyn Write, xs: &[T]) -> std::io::Result<()> {
    let mut out = Vec::with_capacity((1 << 16) * T::SIZE);
    for c in xs.chunks(1 << 16) {
        out.clear();
        for &x in c {
            x.put_le(&mut out);
        }
        w.write_all(&out)?;
    }
    Ok(())
}

/// [`write_npy`] of a whole array (`data.len()` = product of `shape`).
///
/// # Errors
/// As [`write_npy`].
pub fn write_array<T: Element>(
    path: &Path,
    data: &[T],
    shape: &[usize],
) -> Result<Written, GraphError> {
    debug_assert_eq!(data.len(), shape.iter().product::<usize>());
    write_npy(path, T::DESCR, shape, |w| write_le(w, data))
}

/// What a spilled part reports when it is on disk ([`Spill::on_part`]).
#[derive(Clone, Debug)]
pub struct SpilledPart {
    /// Trainer index (= `part-NNN` folder number).
    pub trainer: usize,
    /// Parts to spill in all.
    pub num_parts: usize,
    /// Nodes of the part.
    pub num_nodes: usize,
    /// Arcs of the part's node-induced subgraph.
    pub num_edges: usize,
    /// Bytes written for it (CSR and dense features).
    pub bytes: u64,
    /// Seconds from the start of its build to its files mapped back.
    pub secs: f64,
}

/// The callback of [`Spill::on_part`].
type OnPart = Box<dyn Fn(&SpilledPart) + Send + Sync>;

/// Where and how [`crate::data::prepare_spilled`] writes the parts it builds.
pub struct Spill {
    root: PathBuf,
    keep: bool,
    written: Mutex<BTreeMap<String, Written>>,
    on_part: Option<OnPart>,
    budget: Option<u64>,
    /// Whether `root` was made (or found) once: it is made at most once, by the first part,
    /// so that a root removed later (Ctrl-C) is never made again ([`create_dir_below`]).
    root_made: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Spill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spill")
            .field("root", &self.root)
            .field("keep", &self.keep)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

impl Spill {
    /// Parts written under `root`, mapped back and their files removed (a training run).
    /// `root` is made by the first part if it does not exist; once made (or found), it is never
    /// made again: a part written after `root` was removed fails (`NotFound`).
    pub fn unlinked(root: impl Into<PathBuf>) -> Spill {
        Spill {
            root: root.into(),
            keep: false,
            written: Mutex::default(),
            on_part: None,
            budget: None,
            root_made: Default::default(),
        }
    }

    /// Parts written under `root` and kept there (a partition directory's staging folder);
    /// [`Spill::written`] lists them. Like [`Spill::unlinked`], `root` is made by the first
    /// part if it does not exist, and never again after that.
    pub fn kept(root: impl Into<PathBuf>) -> Spill {
        Spill {
            keep: true,
            ..Spill::unlinked(root)
        }
    }

    /// `root` exists already (made by the caller), so no part makes it again: when it is
    /// removed before the first part, that part fails instead.
    pub(crate) fn root_exists(self) -> Spill {
        self.root_made
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self
    }

    /// Calls `f` once per part, when the part is on disk and mapped back.
    pub fn on_part(mut self, f: impl Fn(&SpilledPart) + Send + Sync + 'static) -> Spill {
        self.on_part = Some(Box::new(f));
        self
    }

    /// Refuses to build the parts when this process's anonymous memory plus the estimated
    /// memory of building them one at a time ([`Spill::check_budget`]) exceeds `bytes`.
    pub fn memory_budget(mut self, bytes: u64) -> Spill {
        self.budget = Some(bytes);
        self
    }

    /// The memory budget set by [`Spill::memory_budget`], bytes. Preparation also chooses the
    /// clustering within it ([`tma_partition::Clustering::resolve_within`]).
    pub fn budget(&self) -> Option<u64> {
        self.budget
    }

    /// The folder the parts go to.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the files stay on disk.
    pub fn keeps_files(&self) -> bool {
        self.keep
    }

    /// The files written so far and kept, by path relative to [`Spill::root`]
    /// (`part-000/indptr.npy`, ...), with their sha256 and size.
    pub fn written(&self) -> BTreeMap<String, Written> {
        self.written.lock().expect("spill record").clone()
    }

    /// Anonymous memory the spilled build of parts needs beyond what the process holds: the
    /// local-id table (4 bytes per node of the graph), each part's small arrays kept until the
    /// end (global ids, degrees, targets, training nodes: about 16 bytes per node of the
    /// graph in all), the largest part's subgraph while it is written (8 bytes per node + 4 per
    /// arc) and 2 MiB of write buffers. `parts` = (nodes, arcs) of each part to build.
    pub fn build_bytes(num_nodes: usize, parts: &[(usize, usize)]) -> u64 {
        let largest = parts
            .iter()
            .map(|&(n, e)| 8 * (n as u64 + 1) + 4 * e as u64)
            .max()
            .unwrap_or(0);
        20 * num_nodes as u64 + largest + (2 << 20)
    }

    /// With a budget set: `Ok` when the process's current anonymous memory plus
    /// [`Spill::build_bytes`] fits it, else an error that gives both figures and names
    /// `--memory-budget`. Without a budget (or without `/proc`): `Ok`.
    ///
    /// # Errors
    /// A message for the user when the build would not fit.
    pub fn check_budget(&self, num_nodes: usize, parts: &[(usize, usize)]) -> Result<(), String> {
        let Some(budget) = self.budget else {
            return Ok(());
        };
        let Some(now) = tma_graph::memory::anon_bytes() else {
            return Ok(());
        };
        let need = Spill::build_bytes(num_nodes, parts);
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        if now + need > budget {
            return Err(format!(
                "--memory-budget {:.0} MiB is too small to build the parts: the process holds {:.0} MiB of anonymous memory after the split and partition, and building {} parts one at a time needs about {:.0} MiB more ({:.0} MiB for the largest part, {} nodes and {} arcs, plus 20 bytes per node of the graph); raise --memory-budget or use more parts",
                mib(budget),
                mib(now),
                parts.len(),
                mib(need),
                mib(need.saturating_sub(20 * num_nodes as u64 + (2 << 20))),
                parts.iter().map(|p| p.0).max().unwrap_or(0),
                parts.iter().map(|p| p.1).max().unwrap_or(0),
            ));
        }
        Ok(())
    }

    /// Writes one trainer's part, built from a mapped (or any) dataset, to `root/part-NNN/`:
    /// `indptr.npy`, `indices.npy` and, for dense features, `features.npy` streamed row by row
    /// from `source` (the part's features are never gathered in memory), then maps the files
    /// back. Unlinked: the files are removed once mapped (the mapping keeps the data alive
    /// until the process unmaps it; a process killed while writing leaves that part's folder
    /// behind). Kept: they stay, recorded in [`Spill::written`]. Returns the part's graph and
    /// features, mapped (sparse features are gathered in memory and not written here).
    ///
    /// # Errors
    /// [`GraphError::Io`] / [`GraphError::Npy`] naming the file.
    pub fn spill_part(
        &self,
        trainer: usize,
        num_parts: usize,
        graph: &Csr,
        source: &Features,
        global_ids: &[u32],
        started: Instant,
    ) -> Result<(Csr, Features), GraphError> {
        let name = format!("part-{trainer:03}");
        let d = self.root.join(&name);
        if !self
            .root_made
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            fs::create_dir_all(&self.root).map_err(io(&self.root))?;
        }
        create_dir_below(&self.root, &d).map_err(io(&d))?;
        let mut files = Vec::new();
        let ip = d.join("indptr.npy");
        files.push((
            "indptr.npy",
            write_array(&ip, &graph.indptr, &[graph.indptr.len()])?,
        ));
        let ix = d.join("indices.npy");
        files.push((
            "indices.npy",
            write_array(&ix, &graph.indices, &[graph.indices.len()])?,
        ));
        let features = match source {
            Features::Dense { dim, data, .. } => {
                let dim = *dim;
                let fp = d.join("features.npy");
                let written = write_npy(&fp, f32::DESCR, &[global_ids.len(), dim], |w| {
                    let mut row = Vec::with_capacity(dim * 4);
                    // a part's rows are scattered over the whole (mapped) feature file, a
                    // page each: the pages behind each segment of rows (ascending global ids)
                    // are released as it is written, so the pass keeps at most a segment's
                    // pages resident, not the whole file (no-op for owned data)
                    for seg in global_ids.chunks(tma_graph::features::RELEASE_SEGMENT) {
                        for &g in seg {
                            let g = g as usize;
                            row.clear();
                            for &x in &data[g * dim..(g + 1) * dim] {
                                x.put_le(&mut row);
                            }
                            w.write_all(&row)?;
                        }
                        let lo = seg.iter().min().copied().unwrap_or(0) as usize;
                        let hi = seg.iter().max().copied().unwrap_or(0) as usize;
                        data.release_elems(lo * dim..(hi + 1) * dim);
                    }
                    Ok(())
                })?;
                files.push(("features.npy", written));
                let (data, _) =
                    npy::map::<f32>(&fp, &[Some(global_ids.len() as u64), Some(dim as u64)])?;
                Features::Dense {
                    num_nodes: global_ids.len(),
                    dim,
                    data,
                }
            }
            Features::Sparse { .. } => source.gather(global_ids),
        };
        let mapped = Csr {
            indptr: npy::map::<u64>(&ip, &[None])?.0,
            indices: npy::map::<u32>(&ix, &[None])?.0,
        };
        let bytes = files.iter().map(|(_, w)| w.bytes).sum();
        if self.keep {
            let mut rec = self.written.lock().expect("spill record");
            for (f, w) in files {
                rec.insert(format!("{name}/{f}"), w);
            }
        } else {
            fs::remove_dir_all(&d).map_err(io(&d))?;
        }
        if let Some(f) = &self.on_part {
            f(&SpilledPart {
                trainer,
                num_parts,
                num_nodes: graph.num_nodes(),
                num_edges: graph.num_edges(),
                bytes,
                secs: started.elapsed().as_secs_f64(),
            });
        }
        Ok((mapped, features))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_npy_is_the_codecs_bytes_and_its_hash() {
        let tmp = tempfile::tempdir().unwrap();
        // longer than one 64 Ki chunk, so the chunking is exercised
        let xs: Vec<u64> = (0..70_000u64)
            .map(|i| i * 2_654_435_761 % 1_000_003)
            .collect();
        let p = tmp.path().join("a.npy");
        let w = write_array(&p, &xs, &[xs.len()]).unwrap();
        let bytes = fs::read(&p).unwrap();
        assert_eq!(bytes, npy::encode(&xs, &[xs.len()]));
        assert_eq!(w.bytes, bytes.len() as u64);
        assert_eq!(w.sha256, hex(&Sha256::digest(&bytes)));
        // a 2-d array
        let ys: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
        let q = tmp.path().join("b.npy");
        write_array(&q, &ys, &[4, 3]).unwrap();
        assert_eq!(fs::read(&q).unwrap(), npy::encode(&ys, &[4, 3]));
    }

    #[test]
    fn kept_parts_stay_and_are_recorded_unlinked_ones_go() {
        let tmp = tempfile::tempdir().unwrap();
        let g = Csr::from_edges(4, &[0, 1, 2], &[1, 2, 3]);
        let f = Features::Dense {
            num_nodes: 6,
            dim: 2,
            data: (0..12).map(|i| i as f32).collect::<Vec<_>>().into(),
        };
        let ids = [5u32, 0, 2, 3];
        let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        let kept = Spill::kept(tmp.path().join("k")).on_part(move |p| {
            s2.lock()
                .unwrap()
                .push((p.trainer, p.num_nodes, p.num_edges));
        });
        let (sub, feat) = kept.spill_part(1, 2, &g, &f, &ids, Instant::now()).unwrap();
        assert_eq!(sub, g);
        assert!(sub.indices.is_mapped() && feat.is_mapped());
        assert_eq!(feat, f.gather(&ids));
        let w = kept.written();
        assert_eq!(
            w.keys().collect::<Vec<_>>(),
            [
                "part-001/features.npy",
                "part-001/indices.npy",
                "part-001/indptr.npy"
            ]
        );
        let fb = fs::read(tmp.path().join("k/part-001/features.npy")).unwrap();
        assert_eq!(w["part-001/features.npy"].sha256, hex(&Sha256::digest(&fb)));
        assert_eq!(*seen.lock().unwrap(), vec![(1, 4, 3)]);

        let gone = Spill::unlinked(tmp.path().join("u"));
        let (sub, _) = gone.spill_part(0, 1, &g, &f, &ids, Instant::now()).unwrap();
        assert_eq!(sub, g);
        assert!(!tmp.path().join("u/part-000").exists());
        assert!(gone.written().is_empty());
    }

    /// Regression (flaky `ctrl_c_during_partition_out_removes_the_staging_folder`): the Ctrl-C
    /// handler removed the staging folder, and the writer, still running, made it again with
    /// `create_dir_all`. A removed root is now never made again.
    #[test]
    fn a_removed_root_is_not_made_again() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("r");
        // the helper: below an existing root, all the folders between; never the root
        assert_eq!(
            create_dir_below(&root, &root.join("a/b"))
                .unwrap_err()
                .kind(),
            std::io::ErrorKind::NotFound
        );
        assert!(!root.exists());
        fs::create_dir(&root).unwrap();
        create_dir_below(&root, &root.join("a/b")).unwrap();
        create_dir_below(&root, &root.join("a/b")).unwrap();
        assert!(root.join("a/b").is_dir());
        assert_eq!(
            create_dir_below(&root, tmp.path()).unwrap_err().kind(),
            std::io::ErrorKind::InvalidInput
        );
        fs::remove_dir_all(&root).unwrap();

        // the spill: the first part makes its root; after the root is removed, a part fails
        let g = Csr::from_edges(2, &[0], &[1]);
        let f = Features::dense(2, 1, vec![1.0, 2.0]);
        let s = Spill::kept(&root);
        s.spill_part(0, 2, &g, &f, &[0, 1], Instant::now()).unwrap();
        assert!(root.join("part-000/indptr.npy").exists());
        fs::remove_dir_all(&root).unwrap();
        let e = s
            .spill_part(1, 2, &g, &f, &[0, 1], Instant::now())
            .unwrap_err();
        assert!(e.to_string().contains("part-001"), "{e}");
        assert!(!root.exists(), "the removed root was made again");
        // a root that the caller made: not made by the first part either
        let s = Spill::kept(&root).root_exists();
        assert!(s.spill_part(0, 2, &g, &f, &[0, 1], Instant::now()).is_err());
        assert!(!root.exists());
    }

    /// Regression (issue 10, 1.3B arcs): writing a part's features read every page of the
    /// mapped source (a random part's rows are on every page) and left them resident until
    /// the part was done: 8.3 GB of the process's RSS at 65M nodes. Now released per segment.
    #[test]
    fn spilling_a_part_of_mapped_features_leaves_the_source_released() {
        let tmp = tempfile::tempdir().unwrap();
        let (n, d) = (1usize << 19, 32usize);
        let vals: Vec<f32> = (0..n * d).map(|i| (i % 1013) as f32).collect();
        let src = tmp.path().join("src.bin");
        let bytes: Vec<u8> = vals.iter().flat_map(|x| x.to_le_bytes()).collect();
        fs::write(&src, &bytes).unwrap();
        let map = tma_graph::buf::SharedMap::open(&src).unwrap();
        let f = Features::Dense {
            num_nodes: n,
            dim: d,
            data: tma_graph::Buf::mapped(map, 0, n * d).unwrap(),
        };
        // every third node: rows on every page of the 64 MiB file
        let ids: Vec<u32> = (0..n as u32).step_by(3).collect();
        let g = Csr::new(vec![0; ids.len() + 1], Vec::new());
        let (_, feat) = Spill::unlinked(tmp.path().join("u"))
            .spill_part(0, 1, &g, &f, &ids, Instant::now())
            .unwrap();
        let resident = tma_graph::buf::mapped_resident_bytes(&src).unwrap();
        assert!(
            resident <= 8 << 20,
            "{resident} bytes of the source resident"
        );
        assert_eq!(feat, Features::dense(n, d, vals).gather(&ids));
    }

    #[test]
    fn budget_check_names_the_flag() {
        // 1000 nodes: 20 KB + largest part (8 * 501 + 4 * 3000) + 2 MiB
        assert_eq!(
            Spill::build_bytes(1000, &[(500, 3000), (500, 2000)]),
            20_000 + 8 * 501 + 12_000 + (2 << 20)
        );
        let s = Spill::kept("/nonexistent").memory_budget(1 << 20);
        if tma_graph::memory::anon_bytes().is_some() {
            let e = s.check_budget(1000, &[(500, 3000)]).unwrap_err();
            assert!(e.starts_with("--memory-budget 1 MiB is too small"), "{e}");
        }
        let roomy = Spill::kept("/nonexistent").memory_budget(u64::MAX / 2);
        assert!(roomy.check_budget(1000, &[(500, 3000)]).is_ok());
        assert!(Spill::kept("/x")
            .check_budget(1 << 30, &[(1 << 30, 1 << 34)])
            .is_ok());
    }
}
