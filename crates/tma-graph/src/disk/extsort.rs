//! [`ExternalCsrBuilder`]: builds the in-neighbour CSR of an arc stream in bounded memory.
//!
//! 1. **Route** ([`ExternalCsrBuilder::push`]): each arc `src -> dst`, packed as the u64
//!    `dst << 32 | src`, goes to bucket `dst / rows_per_bucket` through a small per-bucket write
//!    buffer; buckets are temporary files. The number of buckets `K` is chosen so that the
//!    expected arcs of one bucket fill at most 80% of the sort buffer (half the budget).
//! 2. **Build** ([`ExternalCsrBuilder::finish`]): buckets in ascending destination order: read one
//!    bucket (one sort run), sort its packed arcs (= by destination, then source), merge
//!    duplicates, append the sources to `indices` and the row ends to `indptr`. A bucket larger
//!    than the sort buffer (a skewed graph) is split into several runs over sub-ranges of its
//!    destinations, chosen from a per-node-group count of one extra streaming pass.
//!
//! Memory: the sort buffer (at most half the budget, unless a single group of nodes holds more
//! arcs than that, which is reported in [`BuildStats::over_budget_runs`]), the route buffers
//! (at most a quarter, freed before the build) and 3 MiB of I/O buffers. Output is identical to
//! [`crate::Csr::from_edges`] on the same arcs (after the self-loops are dropped when asked).

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::{ArrayWriter, FileEntry, Progress};
use crate::error::{GraphError, Result};

fn io_err(path: &Path, source: std::io::Error) -> GraphError {
    GraphError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What a build did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BuildStats {
    /// Arcs pushed (before dropping self-loops and merging duplicates).
    pub arcs_in: u64,
    /// Self-loops dropped.
    pub self_loops_dropped: u64,
    /// Duplicate arcs merged.
    pub duplicates_merged: u64,
    /// Arcs in the CSR.
    pub arcs_out: u64,
    /// Bucket files routed to.
    pub buckets: usize,
    /// Sort runs (one per bucket, more for buckets split into sub-ranges).
    pub runs: usize,
    /// Largest sort buffer held, in bytes.
    pub max_run_bytes: u64,
    /// Runs whose sort buffer exceeded half the budget (a group of nodes with more arcs than
    /// fit; reported, not refused).
    pub over_budget_runs: usize,
    /// Whether every arc's reverse is present (a multiset hash comparison of the arcs and the
    /// reversed arcs; exact verification is [`super::MappedGraph::validate`]).
    pub symmetric: bool,
}

struct Bucket {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    count: u64,
}

/// Builds an in-neighbour CSR (`indptr` u64, `indices` u32 files) from a stream of arcs within
/// a memory budget. See the module documentation for the algorithm.
pub struct ExternalCsrBuilder {
    num_nodes: u64,
    rows_per_bucket: u64,
    sort_cap: u64,
    budget: u64,
    buf_bytes: usize,
    buckets: Vec<Bucket>,
    drop_self_loops: bool,
    stats: BuildStats,
    tmp: PathBuf,
}

impl ExternalCsrBuilder {
    /// A builder for `num_nodes` nodes expecting about `expected_arcs` arcs, holding at most
    /// about `budget` bytes, with temporary bucket files in `tmp_dir` (created; removed by
    /// [`ExternalCsrBuilder::finish`]). Self-loops are dropped when `drop_self_loops`.
    ///
    /// # Errors
    /// [`GraphError::Io`] naming the temporary directory or a bucket file.
    pub fn new(
        num_nodes: u64,
        expected_arcs: u64,
        budget: u64,
        tmp_dir: &Path,
        drop_self_loops: bool,
    ) -> Result<Self> {
        std::fs::create_dir_all(tmp_dir).map_err(|e| io_err(tmp_dir, e))?;
        let sort_cap = (budget / 2 / 8).max(1 << 10);
        let k = ((expected_arcs as f64 * 1.25 / sort_cap as f64).ceil() as u64)
            .clamp(1, num_nodes.max(1));
        let rows_per_bucket = num_nodes.div_ceil(k).max(1);
        let k = num_nodes.div_ceil(rows_per_bucket).max(1) as usize;
        let buf_bytes = ((budget / 4) as usize / k).clamp(4096, 1 << 20) / 8 * 8;
        let mut buckets = Vec::with_capacity(k);
        for b in 0..k {
            let path = tmp_dir.join(format!("bucket-{b:05}.arcs"));
            let file = File::create(&path).map_err(|e| io_err(&path, e))?;
            buckets.push(Bucket {
                path,
                file,
                buf: Vec::new(),
                count: 0,
            });
        }
        Ok(ExternalCsrBuilder {
            num_nodes,
            rows_per_bucket,
            sort_cap,
            budget,
            buf_bytes,
            buckets,
            drop_self_loops,
            stats: BuildStats {
                buckets: k,
                ..BuildStats::default()
            },
            tmp: tmp_dir.to_path_buf(),
        })
    }

    /// Number of bucket files.
    pub fn num_buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Adds the arc `src -> dst` (row `dst` gets `src`).
    ///
    /// # Panics
    /// If an endpoint is `>= num_nodes` (callers validate ids first).
    ///
    /// # Errors
    /// [`GraphError::Io`] naming a bucket file.
    #[inline]
    pub fn push(&mut self, src: u32, dst: u32) -> Result<()> {
        assert!(
            (src as u64) < self.num_nodes && (dst as u64) < self.num_nodes,
            "arc {src} -> {dst} out of range"
        );
        self.stats.arcs_in += 1;
        if self.drop_self_loops && src == dst {
            self.stats.self_loops_dropped += 1;
            return Ok(());
        }
        let b = &mut self.buckets[(dst as u64 / self.rows_per_bucket) as usize];
        if b.buf.capacity() == 0 {
            b.buf.reserve_exact(self.buf_bytes);
        }
        b.buf
            .extend_from_slice(&((dst as u64) << 32 | src as u64).to_le_bytes());
        b.count += 1;
        if b.buf.len() >= self.buf_bytes {
            b.file.write_all(&b.buf).map_err(|e| io_err(&b.path, e))?;
            b.buf.clear();
        }
        Ok(())
    }

    /// Reads a bucket file, keeping the packed arcs whose destination is in `lo..hi`.
    fn read_range(path: &Path, lo: u64, hi: u64, cap: usize) -> Result<Vec<u64>> {
        let mut out = Vec::with_capacity(cap);
        stream(path, |x| {
            let d = x >> 32;
            if d >= lo && d < hi {
                out.push(x);
            }
        })?;
        Ok(out)
    }

    /// Sorts the routed arcs bucket by bucket and writes `indptr` (u64 `[N + 1]`) and `indices`
    /// (u32 `[E]`) to the given paths; removes the temporary files.
    ///
    /// # Errors
    /// [`GraphError::Io`] naming the file that failed.
    pub fn finish(
        mut self,
        indptr_path: &Path,
        indices_path: &Path,
        progress: &dyn Progress,
    ) -> Result<(FileEntry, FileEntry, BuildStats)> {
        let mut counts = Vec::with_capacity(self.buckets.len());
        let mut paths = Vec::with_capacity(self.buckets.len());
        for b in std::mem::take(&mut self.buckets) {
            let mut f = b.file;
            f.write_all(&b.buf).map_err(|e| io_err(&b.path, e))?;
            f.sync_all().ok();
            counts.push(b.count);
            paths.push(b.path);
        }
        let mut indptr = ArrayWriter::<u64>::create(indptr_path)?;
        let mut indices = ArrayWriter::<u32>::create(indices_path)?;
        indptr.push(0)?;
        let mut st = std::mem::take(&mut self.stats);
        let (mut h_fwd, mut h_rev) = (0u64, 0u64);
        let total: u64 = counts.iter().sum();
        progress.start("build CSR", total);
        for (b, path) in paths.iter().enumerate() {
            let lo = b as u64 * self.rows_per_bucket;
            let hi = ((b as u64 + 1) * self.rows_per_bucket).min(self.num_nodes);
            let ranges = if counts[b] <= self.sort_cap {
                vec![(lo, hi, counts[b])]
            } else {
                self.sub_ranges(path, lo, hi)?
            };
            for (a, z, cnt) in ranges {
                let mut arcs = Self::read_range(path, a, z, cnt as usize)?;
                let bytes = arcs.len() as u64 * 8;
                st.runs += 1;
                st.max_run_bytes = st.max_run_bytes.max(bytes);
                if bytes > self.budget / 2 {
                    st.over_budget_runs += 1;
                }
                arcs.par_sort_unstable();
                let before = arcs.len();
                arcs.dedup();
                st.duplicates_merged += (before - arcs.len()) as u64;
                let mut i = 0;
                for v in a..z {
                    while i < arcs.len() && arcs[i] >> 32 == v {
                        let s = arcs[i] as u32;
                        indices.push(s)?;
                        h_fwd = h_fwd.wrapping_add(pair_hash(s, v as u32));
                        h_rev = h_rev.wrapping_add(pair_hash(v as u32, s));
                        i += 1;
                    }
                    indptr.push(indices.len())?;
                }
                progress.inc(before as u64);
            }
            std::fs::remove_file(path).map_err(|e| io_err(path, e))?;
        }
        progress.finish();
        // nodes past the last bucket (none when rows_per_bucket * K >= N, kept for clarity)
        while indptr.len() < self.num_nodes + 1 {
            indptr.push(indices.len())?;
        }
        std::fs::remove_dir(&self.tmp).ok();
        st.arcs_out = indices.len();
        st.symmetric = h_fwd == h_rev;
        Ok((indptr.finish()?, indices.finish()?, st))
    }

    /// Splits the destinations `lo..hi` of an oversized bucket into sub-ranges whose arcs fit
    /// the sort buffer, from per-group counts (groups of `g` nodes, `g` a power of two chosen
    /// so the counts take at most an eighth of the budget).
    fn sub_ranges(&self, path: &Path, lo: u64, hi: u64) -> Result<Vec<(u64, u64, u64)>> {
        let rows = hi - lo;
        let max_groups = (self.budget / 8 / 8).max(1);
        let mut g = 1u64;
        while rows.div_ceil(g) > max_groups {
            g *= 2;
        }
        let mut cnt = vec![0u64; rows.div_ceil(g) as usize];
        stream(path, |x| cnt[(((x >> 32) - lo) / g) as usize] += 1)?;
        let mut out = vec![];
        let (mut start, mut acc) = (lo, 0u64);
        for (i, &c) in cnt.iter().enumerate() {
            let gs = lo + i as u64 * g;
            if acc > 0 && acc + c > self.sort_cap {
                out.push((start, gs, acc));
                start = gs;
                acc = 0;
            }
            acc += c;
        }
        out.push((start, hi, acc));
        Ok(out)
    }
}

/// Calls `f` on every packed arc of a bucket file, reading 1 MiB at a time.
fn stream(path: &Path, mut f: impl FnMut(u64)) -> Result<()> {
    let file = File::open(path).map_err(|e| io_err(path, e))?;
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            let k = r.read(&mut buf[filled..]).map_err(|e| io_err(path, e))?;
            if k == 0 {
                break;
            }
            filled += k;
        }
        if !filled.is_multiple_of(8) {
            return Err(GraphError::Invalid {
                path: path.to_path_buf(),
                reason: "temporary bucket file has a partial arc".into(),
            });
        }
        for c in buf[..filled].chunks_exact(8) {
            f(u64::from_le_bytes(c.try_into().unwrap()));
        }
        if filled < buf.len() {
            return Ok(());
        }
    }
}

/// A strong 64-bit hash of an ordered pair (for the symmetry check).
#[inline]
/// The hash of arc `u -> v` summed (wrapping) over a graph's arcs in both orientations to test
/// symmetry in one streaming pass (equal sums: symmetric, up to a 2^-64 chance).
pub(crate) fn pair_hash(u: u32, v: u32) -> u64 {
    crate::seed::splitmix64(crate::seed::splitmix64((u as u64) << 32 | v as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csr::Csr;
    use crate::disk::MappedGraph;

    fn build(n: u64, arcs: &[(u32, u32)], budget: u64) -> (Vec<u64>, Vec<u32>, BuildStats) {
        let dir = tempfile::tempdir().unwrap();
        let mut b =
            ExternalCsrBuilder::new(n, arcs.len() as u64, budget, &dir.path().join("tmp"), true)
                .unwrap();
        for &(s, d) in arcs {
            b.push(s, d).unwrap();
        }
        let (ip, ix) = (
            dir.path().join("indptr.bin"),
            dir.path().join("indices.bin"),
        );
        let (_, _, st) = b.finish(&ip, &ix, &()).unwrap();
        assert!(!dir.path().join("tmp").exists(), "temporary files removed");
        let rd = |p: &Path| std::fs::read(p).unwrap();
        let indptr = rd(&ip)
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let indices = rd(&ix)
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let _ = MappedGraph::open; // the mapped reader is tested in tests/disk.rs
        (indptr, indices, st)
    }

    #[test]
    fn tiny_budget_forces_many_runs_and_equals_the_in_memory_build() {
        // 3000 nodes, 40000 random arcs with duplicates and self-loops, and one hub (node 7)
        // receiving ~3000 arcs so one bucket overflows and is split into sub-ranges
        let n = 3000u32;
        let mut arcs = vec![];
        let mut x = 12345u64;
        for i in 0..40_000u32 {
            x = crate::seed::splitmix64(x);
            let s = (x % n as u64) as u32;
            let d = if i % 13 == 0 {
                7
            } else {
                ((x >> 32) % n as u64) as u32
            };
            arcs.push((s, d));
        }
        arcs.push((5, 5));
        arcs.push((1, 2));
        arcs.push((1, 2));
        let budget = 64 * 1024; // sort buffer of 4096 arcs
        let (indptr, indices, st) = build(n as u64, &arcs, budget);
        let (src, dst): (Vec<u32>, Vec<u32>) = arcs.iter().filter(|(s, d)| s != d).copied().unzip();
        let want = Csr::from_edges(n as usize, &src, &dst);
        assert_eq!(indptr, want.indptr);
        assert_eq!(indices, want.indices);
        assert!(st.buckets >= 10, "{st:?}");
        assert!(st.runs > st.buckets, "the hub's bucket is split: {st:?}");
        assert!(st.max_run_bytes <= budget / 2, "{st:?}");
        assert_eq!(st.arcs_in, arcs.len() as u64);
        assert!(st.self_loops_dropped >= 2);
        assert_eq!(
            st.arcs_out + st.self_loops_dropped + st.duplicates_merged,
            st.arcs_in
        );
        assert!(!st.symmetric, "random arcs are not symmetric");
    }

    #[test]
    fn symmetric_input_is_detected_and_isolated_tail_nodes_get_rows() {
        let arcs = [(0, 1), (1, 0), (2, 1), (1, 2)];
        let (indptr, indices, st) = build(6, &arcs, 1 << 20);
        assert_eq!(indptr, vec![0, 1, 3, 4, 4, 4, 4]);
        assert_eq!(indices, vec![1, 0, 2, 1]);
        assert!(st.symmetric);
        let (_, _, st) = build(3, &[(0, 1), (1, 0), (2, 1)], 1 << 20);
        assert!(!st.symmetric);
    }
}
