//! A power-law graph generator for scale tests, written straight to the on-disk format
//! (`docs/graph-format.md`) in bounded memory: Graph500-style R-MAT with planted classes.
//!
//! * **Edges**: `M = round(N * avg_degree / 2)` undirected edge draws. Each draw descends
//!   `scale = ceil(log2 N)` levels of the adjacency matrix, picking a quadrant with
//!   probabilities `a, b, c, 1 - a - b - c` (Graph500: 0.57, 0.19, 0.19, 0.05), 16-bit
//!   precision per level; a pair with an endpoint `>= N` is drawn again (never for `N` a power of
//!   two). Both endpoints are then relabelled by a seeded bijection of `0..N` (a mixing
//!   permutation with cycle walking), so the hubs are spread over the id range as Graph500
//!   prescribes (and the bucket files of the build are balanced).
//! * **Classes and homophily**: node `v`'s class is `v mod num_classes` (ids are a seeded
//!   random permutation of the R-MAT ranks, so this is a balanced class assignment independent
//!   of the degree). With probability `homophily` the destination `v` of a draw is moved to the
//!   node of the source's class in `v`'s block of `num_classes` consecutive ids (the block
//!   before it when that node would be `>= N`), so that fraction of edges is intra-class while
//!   the degree skew is kept (a hub's in-class mass lands on its per-class proxies, O(1) per
//!   draw).
//! * **Self-loops** are dropped (counted); both directions of each edge are stored; duplicate
//!   arcs merged by the build. The arc count is therefore below `N * avg_degree` (R-MAT
//!   repeats hub pairs often); the report and the manifest give the exact count.
//! * **Features**: `x_v = mu_class(v) + feature_noise * eps`, `mu_c ~ N(0, I)`,
//!   `eps ~ N(0, I)`, stored f32 or f16.
//! * **Node split**: a keyed hash of `v` puts it in train / val / test with probabilities
//!   `train_frac`, `val_frac`, `test_frac` (no shuffle, so no O(N) state).
//! * **Link split**: an undirected pair `{u, v}` is held out for validation (test) when a keyed
//!   hash of the pair falls below `link_val` (`link_val + link_test`); held-out pairs are
//!   stored in `link_val.bin` / `link_test.bin` (each pair once, `u < v`, sorted) and are absent
//!   from the stored graph, whatever the number of draws that hit them (OGB convention: the
//!   stored graph is the training graph).
//!
//! Random streams ([`crate::seed`]): edge draws in chunks of 65,536 from
//! [`Purpose::RmatEdges`]; class means (chunk 0) and feature noise (chunk `c + 1`
//! for node chunk `c` of 4096 nodes) from [`Purpose::RmatNodes`]; permutation, split and
//! link keys from [`Purpose::RmatSplit`]. Chunks are generated in parallel and routed in chunk
//! order; the output bytes depend on the configuration only, not on the thread count (the CSR
//! build sorts, and every other file is written in node order).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use rand::Rng;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;

use crate::disk::{
    ArrayWriter, BuildStats, Dtype, ExternalCsrBuilder, FeatureLayout, FileEntry, LabelLayout,
    LinkNegativesLayout, Manifest, Progress, Provenance, SplitSource, FORMAT_NAME, FORMAT_VERSION,
};
use crate::error::{GraphError, Result};
use crate::seed::{self, splitmix64, Purpose};

/// Configuration of [`generate_rmat`].
#[derive(Clone, Debug, PartialEq)]
pub struct RmatConfig {
    /// Nodes `N` (2 ..= 2^32 - 1).
    pub num_nodes: u64,
    /// Target arcs per node before self-loop removal and duplicate merging (default 20).
    pub avg_degree: f64,
    /// Quadrant probabilities `a, b, c` (`d = 1 - a - b - c`); default Graph500's 0.57, 0.19,
    /// 0.19.
    pub abc: (f64, f64, f64),
    /// Classes (default 16).
    pub num_classes: u32,
    /// Fraction of edges moved into the source's class (default 0.7).
    pub homophily: f64,
    /// Feature width (default 32; 0 = no features, structural ones at load).
    pub feature_dim: usize,
    /// Standard deviation of the feature noise (default 2.0).
    pub feature_noise: f32,
    /// `F32` (default) or `F16` features.
    pub feature_dtype: Dtype,
    /// Fraction of nodes in the training split (default 0.6).
    pub train_frac: f64,
    /// Fraction in the validation split (default 0.2).
    pub val_frac: f64,
    /// Fraction in the test split (default 0.2); nodes past `train + val + test` are in no
    /// split (labelled, never trained on or evaluated, as most of ogbn-papers100M).
    pub test_frac: f64,
    /// Fraction of undirected pairs held out for link validation (default 0).
    pub link_val: f64,
    /// Fraction held out for link test (default 0).
    pub link_test: f64,
    /// Fixed evaluation negatives per held-out pair (default 1000, OGB's citation2 protocol),
    /// drawn after the graph is written ([`crate::disk::add_link_negatives`], from `seed`) and
    /// stored with the split; 0 = none stored (a run draws them when it starts).
    pub link_num_neg: usize,
    /// Seed.
    pub seed: u64,
    /// Bytes the build may hold (default 1 GiB).
    pub memory_budget: u64,
}

impl Default for RmatConfig {
    fn default() -> Self {
        RmatConfig {
            num_nodes: 1 << 16,
            avg_degree: 20.0,
            abc: (0.57, 0.19, 0.19),
            num_classes: 16,
            homophily: 0.7,
            feature_dim: 32,
            feature_noise: 2.0,
            feature_dtype: Dtype::F32,
            train_frac: 0.6,
            val_frac: 0.2,
            test_frac: 0.2,
            link_val: 0.0,
            link_test: 0.0,
            link_num_neg: 1000,
            seed: 0,
            memory_budget: 1 << 30,
        }
    }
}

/// What [`generate_rmat`] did.
#[derive(Clone, Debug)]
pub struct GenerateReport {
    /// Nodes.
    pub num_nodes: u64,
    /// Arcs stored (both directions).
    pub num_arcs: u64,
    /// Undirected edge draws.
    pub draws: u64,
    /// Draws that were self-loops (dropped).
    pub self_loops: u64,
    /// Draws that fell on held-out pairs (a pair drawn twice counts twice).
    pub held_out_draws: u64,
    /// Held-out validation / test pairs (distinct).
    pub held_out: (u64, u64),
    /// The stored negatives of the held-out pairs, when drawn.
    pub link_negatives: Option<crate::disk::LinkNegativesReport>,
    /// The graph build's statistics.
    pub build: BuildStats,
    /// Seconds per stage, in order.
    pub stages: Vec<(String, f64)>,
}

const EDGE_CHUNK: u64 = 1 << 16;
const NODE_CHUNK: u64 = 1 << 12;
/// Chunks generated per parallel batch (fixed, so memory does not grow with the threads).
const BATCH: u64 = 16;

fn invalid(path: &Path, reason: impl Into<String>) -> GraphError {
    GraphError::Invalid {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// A seeded bijection of `0..n` (cycle walking over a bijective mixer of `0..2^bits`).
#[derive(Clone, Copy)]
struct Perm {
    n: u64,
    bits: u32,
    keys: [u64; 3],
}

impl Perm {
    fn new(n: u64, key: u64) -> Perm {
        let bits = (64 - (n.max(2) - 1).leading_zeros()).max(1);
        let k0 = splitmix64(key);
        let k1 = splitmix64(k0);
        let k2 = splitmix64(k1);
        Perm {
            n,
            bits,
            keys: [k0, k1, k2],
        }
    }

    #[inline]
    fn mix(&self, mut x: u64) -> u64 {
        let mask = if self.bits == 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        };
        let sh = self.bits.div_ceil(2).max(1);
        for k in self.keys {
            x = (x.wrapping_mul(k | 1).wrapping_add(k >> 7)) & mask; // odd multiply, add: bijective mod 2^bits
            x ^= x >> sh; // xorshift: bijective on bits-wide words
        }
        x
    }

    #[inline]
    fn apply(&self, x: u64) -> u64 {
        let mut y = self.mix(x);
        while y >= self.n {
            y = self.mix(y);
        }
        y
    }
}

/// A uniform number in `[0, 1)` from a hash.
#[inline]
fn unit(h: u64) -> f64 {
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

struct Keys {
    perm: Perm,
    split_key: u64,
    link_key: u64,
    classes: u64,
}

impl Keys {
    fn new(cfg: &RmatConfig) -> Keys {
        let split = seed::derive(cfg.seed, Purpose::RmatSplit);
        Keys {
            perm: Perm::new(cfg.num_nodes, split ^ 0x7065_726d),
            split_key: splitmix64(split ^ 0x6e6f_6465),
            link_key: splitmix64(split ^ 0x6c69_6e6b),
            classes: cfg.num_classes as u64,
        }
    }

    #[inline]
    fn class(&self, v: u64) -> u64 {
        v % self.classes
    }

    /// 0 = in the graph, 1 = link validation, 2 = link test.
    #[inline]
    fn link_kind(&self, u: u32, v: u32, cfg: &RmatConfig) -> u8 {
        crate::disk::pair_kind(self.link_key, u, v, cfg.link_val, cfg.link_test)
    }
}

/// Draws of one chunk: `(u, v)` pairs, self-loops already removed (their count returned).
fn draw_chunk(
    cfg: &RmatConfig,
    keys: &Keys,
    stream: u64,
    chunk: u64,
    m: u64,
) -> (Vec<(u32, u32)>, u64) {
    let mut rng = seed::chunk_rng(stream, chunk);
    let count = EDGE_CHUNK.min(m - chunk * EDGE_CHUNK);
    let n = cfg.num_nodes;
    let scale = keys.perm.bits;
    let q = |p: f64| (p * 65536.0).round() as u64;
    let (ta, tb, tc) = (
        q(cfg.abc.0),
        q(cfg.abc.0 + cfg.abc.1),
        q(cfg.abc.0 + cfg.abc.1 + cfg.abc.2),
    );
    let hom = q(cfg.homophily);
    let mut out = Vec::with_capacity(count as usize);
    let mut loops = 0;
    for _ in 0..count {
        let (r, s) = loop {
            let (mut r, mut s) = (0u64, 0u64);
            let mut bits = 0u64;
            for lvl in 0..scale {
                if lvl % 4 == 0 {
                    bits = rng.random();
                }
                let x = bits & 0xffff;
                bits >>= 16;
                let (i, j) = if x < ta {
                    (0, 0)
                } else if x < tb {
                    (0, 1)
                } else if x < tc {
                    (1, 0)
                } else {
                    (1, 1)
                };
                r = r << 1 | i;
                s = s << 1 | j;
            }
            if r < n && s < n {
                break (r, s);
            }
        };
        let u = keys.perm.apply(r);
        let mut v = keys.perm.apply(s);
        if (rng.random::<u64>() & 0xffff) < hom && keys.classes > 1 {
            // the node of u's class in v's block of `classes` consecutive ids
            let c = keys.classes;
            v = v - v % c + u % c;
            if v >= n {
                v -= c;
            }
        }
        if u == v {
            loops += 1;
        } else {
            out.push((u as u32, v as u32));
        }
    }
    (out, loops)
}

/// Generates an R-MAT graph (see the module documentation) into `out` (created; must not exist
/// or be empty), in the on-disk format, holding about `cfg.memory_budget` bytes.
///
/// # Errors
/// [`GraphError::Invalid`] naming `out` for a bad configuration (`num_nodes` outside
/// `2..2^32`, probabilities outside `[0, 1]` or summing past 1, `num_classes == 0`) or a
/// non-empty output directory; [`GraphError::Io`] for unwritable files.
pub fn generate_rmat(
    cfg: &RmatConfig,
    out: &Path,
    progress: &dyn Progress,
) -> Result<GenerateReport> {
    let (a, b, c) = cfg.abc;
    let probs_ok = [
        a,
        b,
        c,
        cfg.homophily,
        cfg.train_frac,
        cfg.val_frac,
        cfg.test_frac,
        cfg.link_val,
        cfg.link_test,
    ]
    .iter()
    .all(|p| (0.0..=1.0).contains(p));
    if !(2..=u32::MAX as u64).contains(&cfg.num_nodes) {
        return Err(invalid(
            out,
            format!("--nodes {} must be in 2..=4294967295", cfg.num_nodes),
        ));
    }
    if !probs_ok
        || a + b + c > 1.0
        || cfg.train_frac + cfg.val_frac + cfg.test_frac > 1.0 + 1e-9
        || cfg.link_val + cfg.link_test >= 1.0
    {
        return Err(invalid(out, "probabilities must lie in [0, 1]; a + b + c <= 1, train + val + test <= 1, link val + test < 1"));
    }
    if cfg.num_classes == 0 || !(cfg.avg_degree >= 0.0 && cfg.avg_degree.is_finite()) {
        return Err(invalid(
            out,
            "num_classes must be >= 1 and avg_degree finite and >= 0",
        ));
    }
    if !matches!(cfg.feature_dtype, Dtype::F32 | Dtype::F16) {
        return Err(invalid(out, "features are f32 or f16"));
    }
    crate::disk::claim_out_dir(out, ".generate-staging")?;
    std::fs::create_dir_all(out).map_err(|e| io_err(out, e))?;
    let result = generate_inner(cfg, out, progress);
    let _ = std::fs::remove_dir_all(out.join(".generate-staging"));
    if result.is_err() {
        for f in std::fs::read_dir(out).into_iter().flatten().flatten() {
            let _ = std::fs::remove_file(f.path());
        }
    }
    result
}

fn io_err(path: &Path, source: std::io::Error) -> GraphError {
    GraphError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn generate_inner(cfg: &RmatConfig, out: &Path, progress: &dyn Progress) -> Result<GenerateReport> {
    let n = cfg.num_nodes;
    let keys = Keys::new(cfg);
    let m = (n as f64 * cfg.avg_degree / 2.0).round() as u64;
    let staging = out.join(".generate-staging");
    let mut stages = vec![];
    let held = cfg.link_val + cfg.link_test > 0.0;
    let budget = cfg.memory_budget;
    let (main_budget, held_budget) = if held {
        (budget / 8 * 7, budget / 8)
    } else {
        (budget, 0)
    };

    // ---- edges: generate in chunks, route to buckets
    let t = Instant::now();
    let mut graph = ExternalCsrBuilder::new(n, 2 * m, main_budget, &staging.join("graph"), false)?;
    let expected_held = ((cfg.link_val + cfg.link_test) * m as f64 * 1.1) as u64 + 1024;
    let mut links = if held {
        Some(ExternalCsrBuilder::new(
            n,
            expected_held,
            held_budget,
            &staging.join("links"),
            false,
        )?)
    } else {
        None
    };
    let (self_loops, held_out_draws) =
        route_edges(cfg, &keys, m, &mut graph, links.as_mut(), progress)?;
    stages.push((
        format!("generate + route edges ({} buckets)", graph.num_buckets()),
        t.elapsed().as_secs_f64(),
    ));

    // ---- CSR
    let t = Instant::now();
    let mut files = BTreeMap::new();
    let (ip, ix, build) =
        graph.finish(&out.join("indptr.bin"), &out.join("indices.bin"), progress)?;
    files.insert("indptr.bin".to_string(), ip);
    files.insert("indices.bin".to_string(), ix);
    stages.push((
        format!("build CSR ({} runs)", build.runs),
        t.elapsed().as_secs_f64(),
    ));

    // ---- held-out pairs: built as a CSR (row max holds min), then split by the pair hash
    let mut held_out = (0, 0);
    let mut held_pairs = (vec![], vec![]);
    if let Some(lb) = links {
        let t = Instant::now();
        let (lp, lx) = (staging.join("links-indptr"), staging.join("links-indices"));
        lb.finish(&lp, &lx, &())?;
        let h = crate::disk::write_held_pairs(
            &lp,
            &lx,
            n,
            keys.link_key,
            cfg.link_val,
            cfg.link_test,
            out,
            cfg.link_num_neg > 0,
            &mut files,
        )?;
        held_out = h.counts;
        held_pairs = (h.val_pos, h.test_pos);
        stages.push(("held-out links".into(), t.elapsed().as_secs_f64()));
    }

    // ---- features
    let t = Instant::now();
    let d = cfg.feature_dim;
    let features = write_features(cfg, &keys, out, progress, &mut files)?;
    stages.push(("features".into(), t.elapsed().as_secs_f64()));

    // ---- labels and node split
    let t = Instant::now();
    write_labels_and_split(cfg, &keys, out, &mut files)?;
    stages.push(("labels + split".into(), t.elapsed().as_secs_f64()));

    // ---- fixed negatives of the held-out pairs, drawn on the written CSR (mapped) before the
    // manifest: a directory with a manifest is complete
    let (mut link_negatives, mut neg_report) = (None, None);
    if held && held_out != (0, 0) && cfg.link_num_neg > 0 {
        let (val_pos, test_pos) = held_pairs;
        let (layout, report) = write_link_negatives(
            cfg,
            out,
            build.arcs_out,
            &val_pos,
            &test_pos,
            progress,
            &mut files,
        )?;
        stages.push((
            format!("link negatives ({} per held-out pair)", cfg.link_num_neg),
            report.secs,
        ));
        neg_report = Some(report);
        link_negatives = Some(layout);
    }

    let mut prov = Provenance::new(format!(
        "R-MAT nodes={n} avg_degree={} a,b,c={:?} classes={} homophily={} feat_dim={d} noise={} link={},{}",
        cfg.avg_degree, cfg.abc, cfg.num_classes, cfg.homophily, cfg.feature_noise, cfg.link_val, cfg.link_test
    ));
    prov.tool = "tma generate".into();
    prov.seed = Some(cfg.seed);
    prov.notes.push(format!(
        "{m} edge draws: {self_loops} self-loops dropped, {held_out_draws} on held-out pairs, {} duplicate arcs merged",
        build.duplicates_merged
    ));
    Manifest {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        name: format!("rmat-{n}"),
        directed: false,
        num_nodes: n,
        num_arcs: build.arcs_out,
        features,
        labels: LabelLayout::Classes {
            num_classes: cfg.num_classes as u64,
        },
        split: SplitSource::Generated,
        link_split: held,
        link_negatives,
        files,
        provenance: prov,
    }
    .write(out)?;
    Ok(GenerateReport {
        num_nodes: n,
        num_arcs: build.arcs_out,
        draws: m,
        self_loops,
        held_out_draws,
        held_out,
        link_negatives: neg_report,
        build,
        stages,
    })
}

/// Draws the fixed negatives of the held-out pairs on the written CSR (mapped) and writes
/// them; before the manifest, since a directory with a manifest is complete.
fn write_link_negatives(
    cfg: &RmatConfig,
    out: &Path,
    num_arcs: u64,
    val_pos: &[(u32, u32)],
    test_pos: &[(u32, u32)],
    progress: &dyn Progress,
    files: &mut BTreeMap<String, FileEntry>,
) -> Result<(LinkNegativesLayout, crate::disk::LinkNegativesReport)> {
    let t = Instant::now();
    progress.start("link negatives", 0);
    let graph = crate::disk::link::mapped_training_csr(out, cfg.num_nodes, num_arcs)?;
    let (layout, notes) = crate::disk::link::write_negatives(
        out,
        &graph,
        false,
        val_pos,
        test_pos,
        cfg.link_num_neg,
        cfg.seed,
        cfg.memory_budget,
        files,
    )?;
    progress.finish();
    let report = crate::disk::LinkNegativesReport {
        num_val: val_pos.len(),
        num_test: test_pos.len(),
        num_neg: cfg.link_num_neg,
        notes,
        secs: t.elapsed().as_secs_f64(),
    };
    Ok((layout, report))
}

/// Draws the `m` edges in chunks (parallel, fixed order) and routes each: both arcs to `graph`,
/// or a held-out pair (`links`, when the config holds out links) as `(min, max)`. Returns the
/// self-loops dropped and the draws held out.
fn route_edges(
    cfg: &RmatConfig,
    keys: &Keys,
    m: u64,
    graph: &mut ExternalCsrBuilder,
    mut links: Option<&mut ExternalCsrBuilder>,
    progress: &dyn Progress,
) -> Result<(u64, u64)> {
    let held = links.is_some();
    let stream = seed::derive(cfg.seed, Purpose::RmatEdges);
    let chunks = m.div_ceil(EDGE_CHUNK);
    let mut self_loops = 0;
    let mut held_out_draws = 0;
    progress.start("generate edges", m);
    let mut c0 = 0;
    while c0 < chunks {
        let c1 = (c0 + BATCH).min(chunks);
        let batch: Vec<(Vec<(u32, u32)>, u64)> = (c0..c1)
            .into_par_iter()
            .map(|ch| draw_chunk(cfg, keys, stream, ch, m))
            .collect();
        for (pairs, loops) in batch {
            self_loops += loops;
            for (u, v) in pairs {
                match if held { keys.link_kind(u, v, cfg) } else { 0 } {
                    0 => {
                        graph.push(u, v)?;
                        graph.push(v, u)?;
                    }
                    _ => {
                        held_out_draws += 1;
                        links
                            .as_mut()
                            .expect("held pairs have a builder")
                            .push(u.min(v), u.max(v))?
                    }
                }
            }
            progress.inc(EDGE_CHUNK);
        }
        c0 = c1;
    }
    progress.finish();
    Ok((self_loops, held_out_draws))
}

/// Writes `features.bin` (Gaussian around a per-class mean, `cfg.feature_dtype`; chunks of
/// nodes drawn in parallel within an eighth of the memory budget) and returns its layout.
fn write_features(
    cfg: &RmatConfig,
    keys: &Keys,
    out: &Path,
    progress: &dyn Progress,
    files: &mut BTreeMap<String, FileEntry>,
) -> Result<FeatureLayout> {
    let (n, d) = (cfg.num_nodes, cfg.feature_dim);
    let node_seed = seed::derive(cfg.seed, Purpose::RmatNodes);
    Ok(if d == 0 {
        FeatureLayout::None
    } else {
        let mut mrng = seed::chunk_rng(node_seed, 0);
        let means: Vec<f32> = (0..cfg.num_classes as usize * d)
            .map(|_| StandardNormal.sample(&mut mrng))
            .collect();
        let node_chunks = n.div_ceil(NODE_CHUNK);
        let per_batch = ((cfg.memory_budget / 8) / (NODE_CHUNK * d as u64 * 4)).clamp(1, BATCH);
        let gen = |ch: u64| -> Vec<f32> {
            let mut rng = seed::chunk_rng(node_seed, ch + 1);
            let lo = ch * NODE_CHUNK;
            let hi = (lo + NODE_CHUNK).min(n);
            let mut buf = Vec::with_capacity(((hi - lo) as usize) * d);
            for v in lo..hi {
                let cls = keys.class(v) as usize;
                for &mu in &means[cls * d..(cls + 1) * d] {
                    let z: f32 = StandardNormal.sample(&mut rng);
                    buf.push(mu + cfg.feature_noise * z);
                }
            }
            buf
        };
        progress.start("features", n);
        let entry = match cfg.feature_dtype {
            Dtype::F16 => {
                let mut w = ArrayWriter::<half::f16>::create(&out.join("features.bin"))?;
                let mut c0 = 0;
                while c0 < node_chunks {
                    let c1 = (c0 + per_batch).min(node_chunks);
                    let rows: Vec<Vec<f32>> = (c0..c1).into_par_iter().map(gen).collect();
                    for r in rows {
                        progress.inc((r.len() / d) as u64);
                        for x in r {
                            w.push(half::f16::from_f32(x))?;
                        }
                    }
                    c0 = c1;
                }
                w.finish()?
            }
            _ => {
                let mut w = ArrayWriter::<f32>::create(&out.join("features.bin"))?;
                let mut c0 = 0;
                while c0 < node_chunks {
                    let c1 = (c0 + per_batch).min(node_chunks);
                    let rows: Vec<Vec<f32>> = (c0..c1).into_par_iter().map(gen).collect();
                    for r in rows {
                        progress.inc((r.len() / d) as u64);
                        w.extend(&r)?;
                    }
                    c0 = c1;
                }
                w.finish()?
            }
        };
        progress.finish();
        files.insert("features.bin".into(), entry);
        FeatureLayout::Dense {
            dim: d as u64,
            dtype: cfg.feature_dtype,
        }
    })
}

/// Writes `labels.bin` (each node's class) and the node split (`train_idx.bin`, `val_idx.bin`,
/// `test_idx.bin`, by the split hash of each node).
fn write_labels_and_split(
    cfg: &RmatConfig,
    keys: &Keys,
    out: &Path,
    files: &mut BTreeMap<String, FileEntry>,
) -> Result<()> {
    let n = cfg.num_nodes;
    let mut wl = ArrayWriter::<i32>::create(&out.join("labels.bin"))?;
    let mut ws = [
        ArrayWriter::<u32>::create(&out.join("train_idx.bin"))?,
        ArrayWriter::<u32>::create(&out.join("val_idx.bin"))?,
        ArrayWriter::<u32>::create(&out.join("test_idx.bin"))?,
    ];
    for v in 0..n {
        wl.push(keys.class(v) as i32)?;
        let x = unit(splitmix64(keys.split_key ^ v));
        let k = if x < cfg.train_frac {
            0
        } else if x < cfg.train_frac + cfg.val_frac {
            1
        } else if x < cfg.train_frac + cfg.val_frac + cfg.test_frac {
            2
        } else {
            continue;
        };
        ws[k].push(v as u32)?;
    }
    files.insert("labels.bin".into(), wl.finish()?);
    for (w, name) in ws
        .into_iter()
        .zip(["train_idx.bin", "val_idx.bin", "test_idx.bin"])
    {
        files.insert(name.into(), w.finish()?);
    }
    Ok(())
}

/// A little-endian reader of a temporary array file.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perm_is_a_bijection_for_awkward_sizes() {
        for n in [2u64, 3, 5, 1000, 1024, 1025, 77_777] {
            let p = Perm::new(n, 42);
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = p.apply(x);
                assert!(y < n && !seen[y as usize], "n = {n}, x = {x}");
                seen[y as usize] = true;
            }
        }
    }
}
