//! [`split_links`]: holds validation and test link pairs out of an on-disk graph that has none,
//! in streaming passes over the mapped graph (docs/graph-format.md, "Link split"), so any
//! dataset converted to the format gets the link-split section `tma generate --link-split`
//! writes, within a memory budget whatever the graph's size.

use std::collections::BTreeMap;
use std::io::{BufReader, Read};
use std::path::Path;
use std::time::Instant;

use super::link::{mapped_training_csr, write_negatives, NEGATIVES_MIN_BUDGET};
use super::{
    ArrayWriter, ExternalCsrBuilder, LinkNegativesReport, MappedGraph, Progress, MANIFEST,
};
use crate::error::{GraphError, Result};
use crate::seed::{self, splitmix64, Purpose};

/// Options of [`split_links`].
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSplitOptions {
    /// Fraction of the undirected pairs held out for validation, in `[0, 1)`.
    pub val: f64,
    /// Fraction held out for test; `val + test` in `(0, 1)`.
    pub test: f64,
    /// Fixed evaluation negatives per held-out pair (OGB's citation2 protocol: 1000); 0 = none
    /// stored (a run draws them when it starts).
    pub num_neg: usize,
    /// Seed of the pair choice ([`Purpose::LinkSplit`]) and of the negatives.
    pub seed: u64,
    /// Bytes the held-out pairs' sort may hold (the negatives may always take
    /// [`NEGATIVES_MIN_BUDGET`]).
    pub memory_budget: u64,
}

/// What [`split_links`] did.
#[derive(Clone, Debug)]
pub struct LinkSplitReport {
    /// Nodes.
    pub num_nodes: u64,
    /// Arcs of the source graph.
    pub arcs_in: u64,
    /// Arcs of the written training graph (`arcs_in` minus every arc of a held-out pair).
    pub arcs_out: u64,
    /// Held-out pairs: (validation, test).
    pub held_out: (u64, u64),
    /// The negatives drawn, when `num_neg > 0` and pairs were held out.
    pub negatives: Option<LinkNegativesReport>,
    /// Seconds per stage, in order.
    pub stages: Vec<(String, f64)>,
}

#[inline]
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Which split the unordered pair `{u, v}` belongs to under `key`: 0 = training graph,
/// 1 = validation (hash below `val`), 2 = test (below `val + test`). The same for `(u, v)` and
/// `(v, u)`, so both arcs of an undirected edge go the same way. Shared with the R-MAT
/// generator's link split.
#[inline]
pub(crate) fn pair_kind(key: u64, u: u32, v: u32, val: f64, test: f64) -> u8 {
    let (a, b) = if u < v { (u, v) } else { (v, u) };
    let x = unit(splitmix64(splitmix64(key ^ ((a as u64) << 32 | b as u64))));
    if x < val {
        1
    } else if x < val + test {
        2
    } else {
        0
    }
}

fn invalid(path: &Path, reason: impl Into<String>) -> GraphError {
    GraphError::Invalid {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn io_err(path: &Path, source: std::io::Error) -> GraphError {
    GraphError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes into `out` (created; must not exist or be empty) the on-disk graph `src` with a link
/// split: every unordered pair `{u, v}` joined by an arc (either direction) is held out for
/// validation with probability `opts.val` and for test with `opts.test`, decided by a keyed
/// hash of the pair ([`Purpose::LinkSplit`] of `opts.seed`; no shuffle, so no O(E) state, and
/// the same seed gives the same bytes). Held-out pairs are stored once each as `(min, max)` in
/// `link_val.bin` / `link_test.bin` (sorted by `max`, then `min`; for a directed graph the
/// pair does not keep the arc's direction) and every arc of theirs, both directions, is left
/// out of the written CSR (OGB convention: the stored graph is the training graph). Features,
/// labels and the node split are copied unchanged. With `opts.num_neg > 0` the fixed
/// negatives are drawn on the written training graph as the generator draws them
/// ([`crate::link_negatives`]). The manifest is written last: a directory without one is
/// incomplete, and a failed call removes what it wrote.
///
/// Memory: the source and the output are streamed (the source mapped, rows read in order),
/// the held-out pairs sorted by an [`ExternalCsrBuilder`] within `opts.memory_budget`, then
/// held with their negatives (`8 + 4 * num_neg` bytes per pair, checked against the budget
/// before the first pass). Time: one pass over the arcs, one over the held-out pairs, one
/// copy of the node data.
///
/// # Errors
/// [`GraphError::Invalid`] naming `src`'s manifest when it already has a link split, naming
/// `out` for fractions outside `[0, 1)` or summing outside `(0, 1)`, negatives that would not
/// fit the budget (the message names `--link-num-neg`), or a non-empty output directory; the
/// errors of [`MappedGraph::open`]; [`GraphError::Io`] naming a file not read or written.
pub fn split_links(
    src: &Path,
    out: &Path,
    opts: &LinkSplitOptions,
    progress: &dyn Progress,
) -> Result<LinkSplitReport> {
    let g = MappedGraph::open(src)?;
    if g.manifest().link_split {
        return Err(invalid(
            &src.join(MANIFEST),
            "the graph already holds a link split (link_val.bin / link_test.bin): split a graph without one",
        ));
    }
    let (val, test) = (opts.val, opts.test);
    let frac_ok = |x: f64| x.is_finite() && (0.0..1.0).contains(&x);
    if !(frac_ok(val) && frac_ok(test) && val + test > 0.0 && val + test < 1.0) {
        return Err(invalid(
            out,
            format!("--link-split {val},{test}: each fraction must be in [0, 1) and their sum in (0, 1)"),
        ));
    }
    let directed = g.manifest().directed;
    let arcs = g.num_arcs() as u64;
    let pairs_bound = if directed { arcs } else { arcs / 2 };
    let expected = ((val + test) * pairs_bound as f64 * 1.1) as u64 + 1024;
    if opts.num_neg > 0 {
        let need = expected.saturating_mul(8 + 4 * opts.num_neg as u64);
        let budget = opts.memory_budget.max(NEGATIVES_MIN_BUDGET);
        if need > budget {
            return Err(invalid(
                out,
                format!(
                    "--link-num-neg {}: about {expected} held-out pairs x (8 + 4 x {}) bytes = {} MiB do not fit --memory-budget ({} MiB); hold out fewer pairs, store fewer negatives, or raise the budget",
                    opts.num_neg, opts.num_neg, need >> 20, budget >> 20
                ),
            ));
        }
    }
    super::claim_out_dir(out, ".split-staging")?;
    std::fs::create_dir_all(out).map_err(|e| io_err(out, e))?;
    let staging = out.join(".split-staging");
    let result = split_inner(&g, out, &staging, opts, expected, progress);
    let _ = std::fs::remove_dir_all(&staging);
    if result.is_err() {
        for f in std::fs::read_dir(out).into_iter().flatten().flatten() {
            let _ = std::fs::remove_file(f.path());
        }
    }
    result
}

fn split_inner(
    g: &MappedGraph,
    out: &Path,
    staging: &Path,
    opts: &LinkSplitOptions,
    expected: u64,
    progress: &dyn Progress,
) -> Result<LinkSplitReport> {
    let mut stages = vec![];
    let src_manifest = g.manifest();
    let directed = src_manifest.directed;
    let n = g.num_nodes() as u64;
    let key = splitmix64(seed::derive(opts.seed, Purpose::LinkSplit) ^ 0x6c69_6e6b);
    let (val, test) = (opts.val, opts.test);

    // ---- pass 1: the training CSR (rows filtered in order), held-out pairs to a sorter
    let t = Instant::now();
    let csr = g.csr();
    let mut held = ExternalCsrBuilder::new(
        n,
        expected,
        opts.memory_budget.max(16 << 20),
        &staging.join("held"),
        false,
    )?;
    let mut wp = ArrayWriter::<u64>::create(&out.join("indptr.bin"))?;
    let mut wx = ArrayWriter::<u32>::create(&out.join("indices.bin"))?;
    wp.push(0)?;
    progress.start("hold out link pairs", n);
    for v in 0..n as usize {
        for &u in csr.neighbors(v) {
            // the arc u -> v (row v holds its in-neighbours)
            if pair_kind(key, u, v as u32, val, test) == 0 {
                wx.push(u)?;
            } else if directed || u < v as u32 {
                held.push(u.min(v as u32), u.max(v as u32))?;
            }
        }
        wp.push(wx.len())?;
        if v % 65_536 == 65_535 {
            progress.inc(65_536);
        }
    }
    progress.finish();
    let arcs_out = wx.len();
    let mut files = BTreeMap::new();
    files.insert("indptr.bin".to_string(), wp.finish()?);
    files.insert("indices.bin".to_string(), wx.finish()?);
    stages.push((
        format!(
            "training graph ({} buckets of held-out pairs)",
            held.num_buckets()
        ),
        t.elapsed().as_secs_f64(),
    ));

    // ---- the held-out pairs, sorted and deduplicated (row max holds min), split by the hash
    let t = Instant::now();
    let (lp, lx) = (staging.join("held-indptr"), staging.join("held-indices"));
    held.finish(&lp, &lx, &())?;
    let keep = opts.num_neg > 0;
    let h = write_held_pairs(&lp, &lx, n, key, val, test, out, keep, &mut files)?;
    let (held_out, val_pos, test_pos) = (h.counts, h.val_pos, h.test_pos);
    stages.push(("held-out pairs".into(), t.elapsed().as_secs_f64()));

    // ---- node data: every other file of the source, copied as it is (same manifest entry)
    let t = Instant::now();
    for (name, entry) in &src_manifest.files {
        if name == "indptr.bin" || name == "indices.bin" {
            continue;
        }
        let (from, to) = (g.dir().join(name), out.join(name));
        std::fs::copy(&from, &to).map_err(|e| io_err(&to, e))?;
        files.insert(name.clone(), entry.clone());
    }
    stages.push(("copy node data".into(), t.elapsed().as_secs_f64()));

    // ---- fixed negatives on the written training graph, before the manifest
    let mut link_negatives = None;
    let mut negatives = None;
    if keep && held_out != (0, 0) {
        let t = Instant::now();
        progress.start("link negatives", 0);
        let graph = mapped_training_csr(out, n, arcs_out)?;
        let (layout, notes) = write_negatives(
            out,
            &graph,
            directed,
            &val_pos,
            &test_pos,
            opts.num_neg,
            opts.seed,
            opts.memory_budget,
            &mut files,
        )?;
        progress.finish();
        let secs = t.elapsed().as_secs_f64();
        stages.push((
            format!("link negatives ({} per held-out pair)", opts.num_neg),
            secs,
        ));
        negatives = Some(LinkNegativesReport {
            num_val: val_pos.len(),
            num_test: test_pos.len(),
            num_neg: opts.num_neg,
            notes,
            secs,
        });
        link_negatives = Some(layout);
    }

    let mut manifest = src_manifest.clone();
    manifest.num_arcs = arcs_out;
    manifest.files = files;
    manifest.link_split = true;
    manifest.link_negatives = link_negatives;
    manifest.provenance.tool = format!("{} + tma convert --link-split", manifest.provenance.tool);
    manifest.provenance.seed = Some(opts.seed);
    manifest.provenance.notes.push(format!(
        "link split of {} (--link-split {val},{test}, seed {}): {} validation and {} test pairs held out, {} of {} arcs removed (every arc of a held-out pair){}",
        g.dir().display(),
        opts.seed,
        held_out.0,
        held_out.1,
        g.num_arcs() as u64 - arcs_out,
        g.num_arcs(),
        if directed {
            "; pairs stored as (min, max), without the arc's direction"
        } else {
            ""
        }
    ));
    manifest.write(out)?;
    Ok(LinkSplitReport {
        num_nodes: n,
        arcs_in: g.num_arcs() as u64,
        arcs_out,
        held_out,
        negatives,
        stages,
    })
}

/// The held-out pairs written by [`write_held_pairs`].
pub(crate) struct HeldPairs {
    /// (validation, test) pairs.
    pub counts: (u64, u64),
    /// The validation pairs, when kept.
    pub val_pos: Vec<(u32, u32)>,
    /// The test pairs, when kept.
    pub test_pos: Vec<(u32, u32)>,
}

/// Reads the held-out pairs' CSR (`lp` / `lx`, row `max` holds `min`, as an
/// [`ExternalCsrBuilder`] of `n` nodes wrote it), splits each pair by [`pair_kind`] and writes
/// `link_val.bin` / `link_test.bin` into `out` as `(min, max)` pairs, adding their entries to
/// `files`; the pairs are also returned when `keep` (for the negatives).
///
/// # Errors
/// [`GraphError::Io`] naming a file not read or written.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_held_pairs(
    lp: &Path,
    lx: &Path,
    n: u64,
    key: u64,
    val: f64,
    test: f64,
    out: &Path,
    keep: bool,
    files: &mut BTreeMap<String, super::FileEntry>,
) -> Result<HeldPairs> {
    let mut wv = ArrayWriter::<u32>::create(&out.join("link_val.bin"))?;
    let mut wt = ArrayWriter::<u32>::create(&out.join("link_test.bin"))?;
    let (mut val_pos, mut test_pos) = (vec![], vec![]);
    let mut rp = Reader::open(lp)?;
    let mut rx = Reader::open(lx)?;
    let mut prev = rp.u64()?;
    for v in 0..n as u32 {
        let end = rp.u64()?;
        for _ in prev..end {
            let u = rx.u32()?;
            let (w, list) = if pair_kind(key, u, v, val, test) == 1 {
                (&mut wv, &mut val_pos)
            } else {
                (&mut wt, &mut test_pos)
            };
            w.push(u)?;
            w.push(v)?;
            if keep {
                list.push((u, v));
            }
        }
        prev = end;
    }
    let counts = (wv.len() / 2, wt.len() / 2);
    files.insert("link_val.bin".into(), wv.finish()?);
    files.insert("link_test.bin".into(), wt.finish()?);
    Ok(HeldPairs {
        counts,
        val_pos,
        test_pos,
    })
}

/// Buffered little-endian reads of the sorter's output.
struct Reader {
    path: std::path::PathBuf,
    r: BufReader<std::fs::File>,
}

impl Reader {
    fn open(path: &Path) -> Result<Reader> {
        let f = std::fs::File::open(path).map_err(|e| io_err(path, e))?;
        Ok(Reader {
            path: path.to_path_buf(),
            r: BufReader::with_capacity(1 << 20, f),
        })
    }

    fn u64(&mut self) -> Result<u64> {
        let mut b = [0u8; 8];
        self.r
            .read_exact(&mut b)
            .map_err(|e| io_err(&self.path, e))?;
        Ok(u64::from_le_bytes(b))
    }

    fn u32(&mut self) -> Result<u32> {
        let mut b = [0u8; 4];
        self.r
            .read_exact(&mut b)
            .map_err(|e| io_err(&self.path, e))?;
        Ok(u32::from_le_bytes(b))
    }
}
