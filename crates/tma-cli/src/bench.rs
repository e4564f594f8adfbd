//! `tma bench`: the performance suite (bench/README.md). Prints every figure, its fraction of the
//! machine's own ceiling (measured in the same run) and, given peer results (`--peers`, JSON lines
//! written by `bench/pyg_fullgraph.py` / `bench/dgl_minibatch.py`), its ratio to the peer.
//!
//! Figures (keys are shared with the peer scripts):
//! - `ceiling.gemm.*`: the `gemm` crate's GFLOP/s on the layer shapes; `ceiling.copy`: memory
//!   bandwidth of a large parallel copy (bytes read + written per second).
//! - `fullgraph.iter`: full-graph 2-layer GraphSAGE iteration (forward + cross-entropy on a random
//!   half of the nodes + backward + Adam) on the workload of `bench/pyg_fullgraph.py`.
//! - `fullgraph.gat`, `minibatch.node.gat` (group `gat`): the `fullgraph.iter` and
//!   `minibatch.node` workloads with a GAT encoder (`tma_nn::GatConv`, 8 heads on the hidden
//!   layer), next to SAGE's; no peer, no ceiling fraction.
//! - `dense.mlp`: the same iteration with an MLP encoder (dense layers only), as a fraction of
//!   the time the measured `gemm` rates allow for its products.
//! - `minibatch.link`, `minibatch.node`: neighbour-sampled training throughput (seed edges/s,
//!   seed nodes/s), fanouts `[10, 25]` (10 nearest the seeds).
//! - `sampler`: `NeighborSampler::sample` alone, sampled edges/s.
//! - `inference.full`: layer-wise full-neighbour inference (`Model::infer_full`), nodes/s.
//! - `mrr.eval`: `Model::score` for MRR, positives/s with `--mrr-negatives` negatives each.
//! - `partition.{random,super}.{small,large}`: partition + build the kept parts, seconds and peak
//!   RSS.
//!
//! Ceiling fractions are lower-bound ratios: `t_min / t` where `t_min` sums each dense product's
//! FLOPs at the measured `gemm` rate of its shape and each streamed byte at the copy bandwidth
//! (so 1.0 is unreachable; the gap is what kernels could still win). Times are never asserted.

use anyhow::{bail, Context, Result};
use clap::Args;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;
use tma_graph::{Csr, Features};
use tma_nn::{
    softmax_cross_entropy, Adam, EncoderKind, Head, Mat, MatmulPrecision, Model, ModelConfig,
};
use tma_partition::{build_parts, partition};
use tma_sample::{BlockView, NeighborSampler};
use tma_train::data::{NodeTargets, TrainTarget, TrainerData};
use tma_train::engines::trainer::Trainer;
use tma_train::{Task, TrainConfig};

/// Options of `tma bench`.
#[derive(Args, Debug, Clone)]
pub struct BenchOpts {
    /// Tiny sizes (seconds in total): a smoke run, not a measurement.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub quick: bool,
    /// Comma-separated groups to run: ceilings, fullgraph, gat, dense, minibatch, sampler,
    /// inference, mrr, partition (ceilings always run). Default: all.
    #[arg(long, default_value = "all")]
    pub only: String,
    /// Threads (rayon pool), 1 to 1024. Default (or 0): all cores.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Peer results: JSON lines `{"key", "value", "unit", "higher_is_better", "peak_rss_mib",
    /// "impl"}` (lines that are not JSON objects are skipped; of several lines with one key the
    /// best value counts), e.g. collected from the bench/*.py scripts.
    #[arg(long, value_name = "FILE")]
    pub peers: Option<PathBuf>,
    /// Append our figures to this file as JSON lines.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Do not measure: print the table of figures read from this JSON-lines file (from
    /// `--json`; of several runs of one figure the best counts), with `--peers`, as markdown.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Full-graph workload nodes (default 200000; quick 3000).
    #[arg(long)]
    pub full_nodes: Option<usize>,
    /// Full-graph workload in-degree of every node (default 20).
    #[arg(long)]
    pub full_degree: Option<usize>,
    /// Precision of the link decoder's products in the `mrr` and link `minibatch` figures:
    /// highest (f32) or medium (bf16 on AMX or AVX512_BF16; their keys get a `.bf16` suffix, no
    /// ceiling fraction). Refused where the CPU has neither (`tma train` falls back to f32).
    /// Default: highest.
    #[arg(long, value_name = "PRECISION")]
    pub matmul_precision: Option<String>,
    /// Timed iterations per figure after one warm-up (default 5; quick 2).
    #[arg(long)]
    pub iters: Option<usize>,
    /// Mini-batch graph nodes (default 1000000; quick 5000).
    #[arg(long)]
    pub mb_nodes: Option<usize>,
    /// Mini-batch graph in-degree of every node (default 15).
    #[arg(long)]
    pub mb_degree: Option<usize>,
    /// Link-prediction batch: positive edges per step, one uniform negative each (default
    /// 65536; quick 256).
    #[arg(long)]
    pub link_batch: Option<usize>,
    /// Timed link-prediction steps after one warm-up (default 4: a step samples most of the
    /// graph, and the first steps after start-up still fault in fresh memory; quick 1).
    #[arg(long)]
    pub link_iters: Option<usize>,
    /// Node-classification batch: seed nodes per step (default 1024; quick 64).
    #[arg(long)]
    pub node_batch: Option<usize>,
    /// MRR positives (default 500; quick 8).
    #[arg(long)]
    pub mrr_positives: Option<usize>,
    /// MRR negatives per positive (default 1000; quick 50).
    #[arg(long)]
    pub mrr_negatives: Option<usize>,
    /// Edges of the small partitioning graph (default 4000000; quick 20000).
    #[arg(long)]
    pub part_edges: Option<usize>,
    /// Edges of the large random-partitioning graph (default 100000000; quick 100000).
    #[arg(long)]
    pub part_large_edges: Option<usize>,
    /// Edges of the large super-node (METIS) partitioning graph (default 8000000; quick 40000).
    #[arg(long)]
    pub super_large_edges: Option<usize>,
    /// Kept parts M for partitioning (default 4).
    #[arg(long, default_value_t = 4)]
    pub num_parts: usize,
    /// Super-nodes K (METIS clusters) for super-node partitioning (default 1000; quick 50).
    #[arg(long)]
    pub super_nodes: Option<usize>,
}

/// Resolved sizes.
#[derive(Clone, Debug)]
struct Sizes {
    full_nodes: usize,
    full_degree: usize,
    iters: usize,
    mb_nodes: usize,
    mb_degree: usize,
    link_batch: usize,
    link_iters: usize,
    node_batch: usize,
    mrr_positives: usize,
    mrr_negatives: usize,
    part_edges: usize,
    part_large_edges: usize,
    super_large_edges: usize,
    super_nodes: usize,
    copy_bytes: usize,
    /// The link decoder's precision (`--matmul-precision`).
    precision: MatmulPrecision,
    /// Seconds a throughput loop keeps going (after warm-up) once `iters` steps are done.
    min_secs: f64,
}

impl Sizes {
    /// The sizes of a run; every size flag must be at least 1 (and a node batch no larger than
    /// its graph), else an error naming the flag.
    fn from(o: &BenchOpts) -> Result<Sizes> {
        let q = o.quick;
        let pick = |flag: &str, v: Option<usize>, full: usize, quick: usize| -> Result<usize> {
            let v = v.unwrap_or(if q { quick } else { full });
            if v == 0 {
                bail!("--{flag} must be at least 1");
            }
            Ok(v)
        };
        let sz = Sizes {
            full_nodes: pick("full-nodes", o.full_nodes, 200_000, 3_000)?,
            full_degree: pick("full-degree", o.full_degree, 20, 5)?,
            iters: pick("iters", o.iters, 5, 2)?,
            mb_nodes: pick("mb-nodes", o.mb_nodes, 1_000_000, 5_000)?,
            mb_degree: pick("mb-degree", o.mb_degree, 15, 5)?,
            link_batch: pick("link-batch", o.link_batch, 65_536, 256)?,
            link_iters: pick("link-iters", o.link_iters, 4, 1)?,
            node_batch: pick("node-batch", o.node_batch, 1024, 64)?,
            mrr_positives: pick("mrr-positives", o.mrr_positives, 500, 8)?,
            mrr_negatives: pick("mrr-negatives", o.mrr_negatives, 1000, 50)?,
            part_edges: pick("part-edges", o.part_edges, 4_000_000, 20_000)?,
            part_large_edges: pick("part-large-edges", o.part_large_edges, 100_000_000, 100_000)?,
            super_large_edges: pick("super-large-edges", o.super_large_edges, 8_000_000, 40_000)?,
            super_nodes: pick("super-nodes", o.super_nodes, 1000, 50)?,
            // large enough to miss the last-level cache even in a smoke run
            copy_bytes: if q { 256 << 20 } else { 1 << 30 },
            precision: match &o.matmul_precision {
                Some(s) => s
                    .parse()
                    .map_err(|e| anyhow::anyhow!("--matmul-precision: {e}"))?,
                None => MatmulPrecision::Highest,
            },
            min_secs: if q { 0.0 } else { 2.0 },
        };
        if sz.precision == MatmulPrecision::Medium && tma_nn::bf16_products().is_none() {
            bail!("--matmul-precision medium: this machine gives neither AMX-BF16 (the CPU lacks it or the kernel refused it) nor AVX512_BF16; the figures would be f32");
        }
        if sz.node_batch > sz.mb_nodes {
            bail!(
                "--node-batch {} is larger than the mini-batch graph (--mb-nodes {})",
                sz.node_batch,
                sz.mb_nodes
            );
        }
        if wants(o, "partition") && (o.num_parts == 0 || sz.super_nodes < o.num_parts) {
            bail!(
                "--num-parts {} must be between 1 and --super-nodes ({})",
                o.num_parts,
                sz.super_nodes
            );
        }
        // node ids are u32; the generated inputs must fit in memory (rough lower bounds: the
        // CSR and 128-d f32 features; activations need more)
        for (flag, v) in [("full-nodes", sz.full_nodes), ("mb-nodes", sz.mb_nodes)] {
            if v > u32::MAX as usize / 2 {
                bail!("--{flag} {v}: at most {} nodes", u32::MAX / 2);
            }
        }
        let mem = mem_total_bytes();
        let need = |nodes: usize, edges: usize| -> u128 {
            nodes as u128 * (128 * 4 + 8) + edges as u128 * 4
        };
        let checks: [(&str, &str, u128); 5] = [
            (
                "fullgraph",
                "--full-nodes x --full-degree",
                need(sz.full_nodes, sz.full_nodes.saturating_mul(sz.full_degree)) * 6,
            ),
            (
                "minibatch",
                "--mb-nodes x --mb-degree",
                need(sz.mb_nodes, sz.mb_nodes.saturating_mul(sz.mb_degree)) * 2,
            ),
            (
                "mrr",
                "--mrr-positives x --mrr-negatives",
                sz.mrr_positives as u128 * (sz.mrr_negatives as u128 + 1) * 256 * 4 / 8,
            ),
            (
                "partition",
                "--part-large-edges",
                sz.part_large_edges as u128 * 4 * 3,
            ),
            (
                "partition",
                "--super-large-edges",
                sz.super_large_edges as u128 * 4 * 6,
            ),
        ];
        for (group, flags, bytes) in checks {
            if wants(o, group) && mem > 0 && bytes > mem as u128 {
                bail!(
                    "{flags}: the {group} workload needs at least {:.1} GiB, this machine has {:.1} GiB",
                    bytes as f64 / (1u64 << 30) as f64,
                    mem as f64 / (1u64 << 30) as f64
                );
            }
        }
        Ok(sz)
    }
}

/// Total memory of this machine in bytes (`MemTotal` of /proc/meminfo; 0 when unknown).
fn mem_total_bytes() -> u64 {
    tma_graph::memory::machine_total_bytes().unwrap_or(0)
}

/// Rows of the products on which the `gemm` ceilings are measured, at least: a product's rate
/// grows with its row count, so ceilings measured on a smoke run's few rows would sit below
/// what larger products of the same run reach (fractions over 100%).
const CEILING_MIN_ROWS: usize = 100_000;

/// One measured figure.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Figure {
    /// Stable key shared with the peer scripts, e.g. `fullgraph.iter`.
    pub key: String,
    /// What was measured, in words (sizes included).
    pub what: String,
    /// The figure (median where repeated).
    pub value: f64,
    /// Unit of `value`, e.g. `s/iter`, `edges/s`.
    pub unit: String,
    /// Whether a larger value is better (throughputs) or worse (times).
    pub higher_is_better: bool,
    /// Fraction of the machine's ceiling (see the module docs), when one applies.
    pub ceiling_frac: Option<f64>,
    /// What the ceiling is.
    pub ceiling: String,
    /// Peak resident memory of the process during this figure, MiB (where measured).
    pub peak_rss_mib: Option<f64>,
}

/// Peak RSS (VmHWM) of this process in MiB.
fn peak_rss_mib() -> Option<f64> {
    tma_graph::memory::peak_rss_bytes().map(tma_graph::memory::mib)
}

/// Reset the peak-RSS counter (Linux `clear_refs` = 5); false where unsupported.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

/// A random graph: every node gets `deg` uniform in-neighbours (sorted rows, duplicates kept),
/// built in parallel from ChaCha8 streams (one per 64k-node chunk), so it depends only on `seed`.
fn random_graph(n: usize, deg: usize, seed: u64) -> Csr {
    const CHUNK: usize = 1 << 16;
    let mut indices = vec![0u32; n * deg];
    indices
        .par_chunks_mut((CHUNK * deg).max(1))
        .enumerate()
        .for_each(|(c, rows)| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(c as u64);
            for row in rows.chunks_mut(deg.max(1)) {
                for v in row.iter_mut() {
                    *v = rng.random_range(0..n as u32);
                }
                row.sort_unstable();
            }
        });
    let indptr = (0..=n as u64).map(|i| i * deg as u64).collect();
    Csr {
        indptr,
        indices: indices.into(),
    }
}

fn random_features(n: usize, dim: usize, seed: u64) -> Features {
    let mut data = vec![0f32; n * dim];
    data.par_chunks_mut(1 << 16)
        .enumerate()
        .for_each(|(c, ch)| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            rng.set_stream(c as u64);
            for v in ch {
                *v = rng.random_range(-1.0f32..1.0);
            }
        });
    Features::Dense {
        num_nodes: n,
        dim,
        data: data.into(),
    }
}

/// The `gemm` shapes we meet: `AxBt` is `[m,k]·[n,k]ᵀ` (a layer forward, rows `m` large),
/// `AtxB` is `[k,m]ᵀ·[k,n]` (a weight gradient, `k` = rows), `AxB` is `[m,k]·[k,n]` (an input
/// gradient). Rates are measured with the large dimension = `big`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum GemmKind {
    AxBt,
    AtxB,
    AxB,
}

/// Measured `gemm` rates by shape, filled lazily (each shape measured once, best of 3).
struct Ceilings {
    big: usize,
    rates: HashMap<(GemmKind, usize, usize), f64>,
    /// Copy bandwidth, bytes/s (read + write).
    copy_bps: f64,
    figures: Vec<Figure>,
}

impl Ceilings {
    fn measure(big: usize, copy_bytes: usize) -> Ceilings {
        let copy_bps = measure_copy(copy_bytes);
        let mut c = Ceilings {
            big,
            rates: HashMap::new(),
            copy_bps,
            figures: Vec::new(),
        };
        c.figures.push(Figure {
            key: "ceiling.copy".into(),
            what: format!(
                "memory bandwidth: parallel copy of {} MiB, (read + write) bytes/s, best of 5",
                copy_bytes >> 20
            ),
            value: copy_bps / 1e9,
            unit: "GB/s".into(),
            higher_is_better: true,
            ceiling_frac: None,
            ceiling: String::new(),
            peak_rss_mib: None,
        });
        c
    }

    /// GFLOP/s of the given shape (products with a small `big` are measured as is).
    fn rate(&mut self, kind: GemmKind, a: usize, b: usize) -> f64 {
        if let Some(&r) = self.rates.get(&(kind, a, b)) {
            return r;
        }
        let r = measure_gemm(kind, self.big, a, b);
        let (shape, what) = match kind {
            GemmKind::AxBt => (
                format!("[{},{b}]x[{a},{b}]^T", self.big),
                "layer forward X·Wᵀ",
            ),
            GemmKind::AtxB => (
                format!("[{},{a}]^Tx[{},{b}]", self.big, self.big),
                "weight gradient dYᵀ·X",
            ),
            GemmKind::AxB => (
                format!("[{},{b}]x[{b},{a}]", self.big),
                "input gradient dY·W",
            ),
        };
        self.figures.push(Figure {
            key: format!("ceiling.gemm.{kind:?}.{a}x{b}").to_lowercase(),
            what: format!("gemm crate {shape} ({what}), best of 3"),
            value: r / 1e9,
            unit: "GFLOP/s".into(),
            higher_is_better: true,
            ceiling_frac: None,
            ceiling: String::new(),
            peak_rss_mib: None,
        });
        self.rates.insert((kind, a, b), r);
        r
    }

    /// Seconds the measured `gemm` rate needs for a product with `rows` large rows.
    fn gemm_secs(&mut self, kind: GemmKind, a: usize, b: usize, rows: usize) -> f64 {
        let flops = 2.0 * rows as f64 * a as f64 * b as f64;
        flops / self.rate(kind, a, b)
    }

    fn copy_secs(&self, bytes: f64) -> f64 {
        bytes / self.copy_bps
    }
}

/// Best-of-5 bandwidth of a parallel `copy_from_slice` of `bytes` bytes.
fn measure_copy(bytes: usize) -> f64 {
    let n = bytes / 4;
    let src: Vec<f32> = (0..n).into_par_iter().map(|i| i as f32).collect();
    let mut dst = vec![0f32; n];
    dst.par_chunks_mut(1 << 16).for_each(|c| c.fill(1.0)); // fault the pages in
    let mut best = 0f64;
    let chunk = (n / (rayon::current_num_threads() * 8)).max(1 << 12);
    for _ in 0..5 {
        let t = Instant::now();
        dst.par_chunks_mut(chunk)
            .zip(src.par_chunks(chunk))
            .for_each(|(d, s)| d.copy_from_slice(s));
        let s = t.elapsed().as_secs_f64();
        best = best.max(2.0 * (n * 4) as f64 / s);
    }
    std::hint::black_box(&dst);
    best
}

/// FLOP/s of one `gemm` product shape (see [`GemmKind`]), best of 3 after a warm-up.
fn measure_gemm(kind: GemmKind, big: usize, a: usize, b: usize) -> f64 {
    // (m, n, k) and strides (row-major operands)
    let (m, n, k) = match kind {
        GemmKind::AxBt => (big, a, b),
        GemmKind::AtxB => (a, b, big),
        GemmKind::AxB => (big, a, b),
    };
    let lhs: Vec<f32> = (0..m * k).map(|i| ((i % 17) as f32) * 0.01).collect();
    let rhs: Vec<f32> = (0..k * n).map(|i| ((i % 13) as f32) * 0.01).collect();
    let mut dst = vec![0f32; m * n];
    let threads = rayon::current_num_threads();
    let run = |dst: &mut [f32]| {
        // lhs: AxBt/AxB row-major [m,k] (cs 1, rs k); AtxB stored [k,m] (cs m, rs 1).
        // rhs: AxBt stored [n,k] (cs k... as [k,n]: rs 1, cs k); AtxB/AxB row-major [k,n].
        let (lhs_cs, lhs_rs) = match kind {
            GemmKind::AtxB => (m as isize, 1isize),
            _ => (1, k as isize),
        };
        let (rhs_cs, rhs_rs) = match kind {
            GemmKind::AxBt => (k as isize, 1isize),
            _ => (1, n as isize),
        };
        // SAFETY: every operand covers its strided extent (sizes m*k, k*n, m*n above).
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                dst.as_mut_ptr(),
                1,
                n as isize,
                false,
                lhs.as_ptr(),
                lhs_cs,
                lhs_rs,
                rhs.as_ptr(),
                rhs_cs,
                rhs_rs,
                1.0f32,
                1.0f32,
                false,
                false,
                false,
                if threads > 1 {
                    gemm::Parallelism::Rayon(threads)
                } else {
                    gemm::Parallelism::None
                },
            );
        }
    };
    run(&mut dst);
    let mut best = 0f64;
    for _ in 0..3 {
        let t = Instant::now();
        run(&mut dst);
        best = best.max(2.0 * (m * n * k) as f64 / t.elapsed().as_secs_f64());
    }
    std::hint::black_box(&dst);
    best
}

/// Lower-bound seconds of one GNN layer (SAGE or MLP) forward and backward on a block with
/// `nd` destinations, `ns` sources, `e` arcs: dense products at the measured `gemm` rates plus
/// aggregation traffic (`(e + nd)` rows of the aggregated width, 4 bytes each) at the copy
/// bandwidth. Mirrors tma-nn's kernel choice (transform first when `dout < din`).
#[allow(clippy::too_many_arguments)]
fn layer_min_secs(
    c: &mut Ceilings,
    sage: bool,
    nd: usize,
    ns: usize,
    e: usize,
    din: usize,
    dout: usize,
    backward: bool,
    input_grad: bool,
) -> f64 {
    let mut t = 0.0;
    let tf = dout < din;
    let agg_dim = if tf { dout } else { din };
    let lin_rows = if sage && tf { ns } else { nd };
    // forward: W (on nd or ns rows) and, for SAGE, the root weight on nd rows
    t += c.gemm_secs(GemmKind::AxBt, dout, din, lin_rows);
    if sage {
        t += c.gemm_secs(GemmKind::AxBt, dout, din, nd);
        t += c.copy_secs(((e + nd) * agg_dim * 4) as f64);
    }
    if backward {
        t += c.gemm_secs(GemmKind::AtxB, dout, din, lin_rows);
        if sage {
            t += c.gemm_secs(GemmKind::AtxB, dout, din, nd);
        }
        if input_grad {
            t += c.gemm_secs(GemmKind::AxB, din, dout, lin_rows);
            if sage {
                t += c.gemm_secs(GemmKind::AxB, din, dout, nd);
                t += c.copy_secs(((e + ns) * agg_dim * 4) as f64);
            }
        }
    }
    t
}

/// Runs the suite (or prints a report); the `tma bench` entry point.
pub fn bench(o: BenchOpts) -> Result<()> {
    let peers = match &o.peers {
        Some(p) => read_peers(p)?,
        None => HashMap::new(),
    };
    if let Some(r) = &o.report {
        let text =
            std::fs::read_to_string(r).with_context(|| format!("reading {}", r.display()))?;
        let mut figs = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let f: Figure = serde_json::from_str(line)
                .with_context(|| format!("{}: line {}: not a figure", r.display(), i + 1))?;
            figs.push(f);
        }
        if figs.is_empty() {
            bail!(
                "{}: no figures (expected JSON lines written by `tma bench --json`)",
                r.display()
            );
        }
        let figs = dedup(figs);
        print!("{}", table(&figs, &peers, true));
        println!();
        print!("{}", targets(&figs, &peers));
        return Ok(());
    }
    // the output file is opened before measuring, so a bad path fails at once
    let mut json_out = match &o.json {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("opening {}", p.display()))?,
        ),
        None => None,
    };
    let threads = o.threads.filter(|&t| t > 0).unwrap_or_else(num_cpus);
    if threads > 1024 {
        bail!(
            "--threads {threads}: at most 1024 (this machine has {} cores)",
            num_cpus()
        );
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("building the thread pool")?;
    let figs = pool.install(|| {
        run_suite(&o, &mut |f: &Figure| {
            println!("{}", line_for(f, &peers));
        })
    })?;
    if let (Some(p), Some(file)) = (&o.json, json_out.as_mut()) {
        for f in &figs {
            writeln!(file, "{}", serde_json::to_string(f)?)
                .with_context(|| format!("writing {}", p.display()))?;
        }
    }
    println!();
    print!("{}", table(&figs, &peers, false));
    println!();
    print!("{}", targets(&figs, &peers));
    Ok(())
}

fn num_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// A peer figure (from the bench/*.py scripts).
#[derive(Clone, Debug)]
struct Peer {
    value: f64,
    peak_rss_mib: Option<f64>,
    name: String,
}

/// The unit and direction of every figure a peer can be compared with.
const PEER_UNITS: [(&str, &str, bool); 6] = [
    ("fullgraph.iter", "s/iter", false),
    ("inference.full", "nodes/s", true),
    ("mrr.eval", "pos/s", true),
    ("sampler", "edges/s", true),
    ("minibatch.link", "edges/s", true),
    ("minibatch.node", "nodes/s", true),
];

/// Peer figures from a JSON-lines file. Lines that are not JSON objects are skipped (a note on
/// stderr counts them: the scripts' logs can be passed as they are); a peer line for one of our
/// figures must carry a finite positive `value` and, where given, our unit and direction, else
/// an error naming the file and line.
fn read_peers(p: &PathBuf) -> Result<HashMap<String, Peer>> {
    let text = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
    let mut out = HashMap::new();
    let mut skipped = 0usize;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line.trim()) else {
            skipped += 1;
            continue;
        };
        let Some(key) = v["key"].as_str() else {
            skipped += 1;
            continue;
        };
        let at = || format!("{}: line {}: peer figure {key:?}", p.display(), i + 1);
        let Some(value) = v["value"].as_f64().filter(|x| x.is_finite() && *x > 0.0) else {
            bail!(
                "{}: value must be a finite number > 0, got {}",
                at(),
                v["value"]
            );
        };
        let ours = PEER_UNITS.iter().find(|(k, ..)| *k == key);
        let higher = v["higher_is_better"]
            .as_bool()
            .unwrap_or(ours.is_none_or(|o| o.2));
        if let Some(&(_, unit, ours_higher)) = ours {
            if let Some(u) = v["unit"].as_str() {
                if u != unit {
                    bail!("{}: unit {u:?} does not match ours ({unit:?})", at());
                }
            }
            if higher != ours_higher {
                bail!(
                    "{}: higher_is_better is {higher}, ours is {ours_higher} for {unit}",
                    at()
                );
            }
        }
        let peer = Peer {
            value,
            peak_rss_mib: v["peak_rss_mib"]
                .as_f64()
                .filter(|m| m.is_finite() && *m > 0.0),
            // one table cell: no column separators or line breaks
            name: v["impl"]
                .as_str()
                .unwrap_or("peer")
                .replace(['|', '\n', '\r'], " "),
        };
        // several runs of one key: keep the best, as `dedup` does for ours
        let keep_old = out.get(key).is_some_and(|old: &Peer| {
            if higher {
                old.value >= value
            } else {
                old.value <= value
            }
        });
        if !keep_old {
            out.insert(key.to_string(), peer);
        }
    }
    if skipped > 0 {
        eprintln!(
            "note: {}: {skipped} line(s) without a peer figure skipped",
            p.display()
        );
    }
    Ok(out)
}

/// `ours / peer` as a speed-up (>1 = we are better) and the memory ratio.
fn peer_ratio(f: &Figure, p: &Peer) -> (f64, Option<f64>) {
    let r = if f.higher_is_better {
        f.value / p.value
    } else {
        p.value / f.value
    };
    let m = match (f.peak_rss_mib, p.peak_rss_mib) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    (r, m)
}

fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!(
            "{:.3}e{}",
            v / 10f64.powi(a.log10().floor() as i32),
            a.log10().floor() as i32
        )
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

fn line_for(f: &Figure, peers: &HashMap<String, Peer>) -> String {
    let mut s = format!("{:<28} {:>12} {:<10}", f.key, fmt_value(f.value), f.unit);
    if let Some(c) = f.ceiling_frac {
        s += &format!("  {:>5.1}% of ceiling", 100.0 * c);
    }
    if let Some(m) = f.peak_rss_mib {
        s += &format!("  peak {m:.0} MiB");
    }
    if let Some(p) = peers.get(&f.key) {
        let (r, m) = peer_ratio(f, p);
        s += &format!("  {r:.2}x vs {}", p.name);
        if let Some(m) = m {
            s += &format!(" (memory {m:.2}x)");
        }
    }
    s += &format!("  [{}]", f.what);
    s
}

/// The figure table; markdown when `md`.
fn table(figs: &[Figure], peers: &HashMap<String, Peer>, md: bool) -> String {
    let mut s = String::new();
    if md {
        s += "| figure | ours | unit | of ceiling | peak RSS MiB | peer | peer value | peer RSS MiB | speed-up vs peer | memory vs peer | what |\n";
        s += "|---|---|---|---|---|---|---|---|---|---|---|\n";
    } else {
        s += &format!(
            "{:<28} {:>12} {:<10} {:>8} {:>9} {:>12} {:>9} {:>8}\n",
            "figure", "ours", "unit", "ceiling", "RSS MiB", "peer", "speed-up", "memory"
        );
    }
    for f in figs {
        let peer = peers.get(&f.key);
        let (ratio, mem) = peer.map(|p| peer_ratio(f, p)).unwrap_or((f64::NAN, None));
        let ceil = f
            .ceiling_frac
            .map(|c| format!("{:.1}%", 100.0 * c))
            .unwrap_or_else(|| "-".into());
        let rss = f
            .peak_rss_mib
            .map(|m| format!("{m:.0}"))
            .unwrap_or_else(|| "-".into());
        let pv = peer
            .map(|p| fmt_value(p.value))
            .unwrap_or_else(|| "-".into());
        let rt = if ratio.is_finite() {
            format!("{ratio:.2}x")
        } else {
            "-".into()
        };
        let mt = mem
            .map(|m| format!("{m:.2}x"))
            .unwrap_or_else(|| "-".into());
        if md {
            let prss = peer
                .and_then(|p| p.peak_rss_mib)
                .map(|m| format!("{m:.0}"))
                .unwrap_or_else(|| "-".into());
            let pname = peer.map(|p| p.name.clone()).unwrap_or_else(|| "-".into());
            s += &format!(
                "| {} | {} | {} | {ceil} | {rss} | {pname} | {pv} | {prss} | {rt} | {mt} | {}{} |\n",
                f.key,
                fmt_value(f.value),
                f.unit,
                f.what,
                if f.ceiling.is_empty() {
                    String::new()
                } else {
                    format!("; ceiling: {}", f.ceiling)
                }
            );
        } else {
            s += &format!(
                "{:<28} {:>12} {:<10} {:>8} {:>9} {:>12} {:>9} {:>8}\n",
                f.key,
                fmt_value(f.value),
                f.unit,
                ceil,
                rss,
                pv,
                rt,
                mt
            );
        }
    }
    s
}

/// Figures from several runs of the same key: each keeps its best run (highest rate, lowest
/// time), the run least disturbed by other load on a shared machine; the peers' figures are
/// reduced the same way ([`read_peers`]).
fn dedup(figs: Vec<Figure>) -> Vec<Figure> {
    let mut out: Vec<Figure> = Vec::new();
    for f in figs {
        match out.iter_mut().find(|g| g.key == f.key) {
            Some(g) => {
                let better = if f.higher_is_better {
                    f.value > g.value
                } else {
                    f.value < g.value
                };
                if better {
                    *g = f;
                }
            }
            None => out.push(f),
        }
    }
    out
}

/// The issue-5 targets, met or not, for the figures present (markdown list).
fn targets(figs: &[Figure], peers: &HashMap<String, Peer>) -> String {
    let get = |k: &str| figs.iter().find(|f| f.key == k);
    let mut s = String::from("Targets:\n");
    let mark = |ok: bool| if ok { "met" } else { "MISSED" };
    if let Some(f) = get("fullgraph.iter") {
        match peers.get(&f.key) {
            Some(p) => {
                let (r, m) = peer_ratio(f, p);
                s += &format!(
                    "- full-graph iteration >= 8x faster than {}: {r:.2}x ({})\n",
                    p.name,
                    mark(r >= 8.0)
                );
                if let Some(m) = m {
                    s += &format!(
                        "- full-graph peak memory <= 1/5 of the peer's: {m:.3} ({})\n",
                        mark(m <= 0.2)
                    );
                }
            }
            None => s += "- full-graph vs PyG: no peer figure\n",
        }
    }
    for k in ["minibatch.link", "minibatch.node"] {
        if let Some(f) = get(k) {
            match peers.get(k) {
                Some(p) => {
                    let (r, _) = peer_ratio(f, p);
                    s += &format!("- {k} >= 5x {}: {r:.2}x ({})\n", p.name, mark(r >= 5.0));
                }
                None => s += &format!("- {k} vs DGL: no peer figure\n"),
            }
        }
    }
    if let Some(f) = get("dense.mlp") {
        s += &format!(
            "- dense layers >= 70% of the measured gemm rate: {:.1}% ({})\n",
            100.0 * f.value,
            mark(f.value >= 0.7)
        );
    }
    if let Some(f) = get("partition.random.large") {
        s += &format!(
            "- random partitioning of the large graph < 60 s: {:.2} s ({}) [{}]\n",
            f.value,
            mark(f.value < 60.0),
            f.what
        );
    }
    if s == "Targets:\n" {
        s += "- (none among the figures measured)\n";
    }
    s
}

fn wants(o: &BenchOpts, group: &str) -> bool {
    o.only == "all" || o.only.split(',').any(|g| g.trim() == group)
}

/// Run the selected groups; `emit` sees each figure as soon as it is measured. Returns all
/// figures (ceilings last, so measured shapes are all listed).
pub fn run_suite(o: &BenchOpts, emit: &mut dyn FnMut(&Figure)) -> Result<Vec<Figure>> {
    const KNOWN: [&str; 10] = [
        "all",
        "gat",
        "ceilings",
        "fullgraph",
        "dense",
        "minibatch",
        "sampler",
        "inference",
        "mrr",
        "partition",
    ];
    for g in o.only.split(',') {
        if !KNOWN.contains(&g.trim()) {
            bail!(
                "--only: unknown group {g:?} (expected one of {})",
                KNOWN.join(", ")
            );
        }
    }
    let sz = Sizes::from(o)?;
    let mut c = Ceilings::measure(sz.full_nodes.max(CEILING_MIN_ROWS), sz.copy_bytes);
    emit(&c.figures[0]);
    let mut figs = Vec::new();
    // Ceiling fractions count streamed bytes at the DRAM copy bandwidth; a working set that
    // fits in cache beats that bound (a smoke run's 1.5 MB of features gave "114% of
    // ceiling"), so such figures get no fraction.
    let resident = |key: &str| -> bool {
        const MIN_BYTES: usize = 64 << 20;
        let feature_bytes = |nodes: usize| nodes.saturating_mul(128 * 4);
        match key.split('.').next().unwrap_or("") {
            "fullgraph" | "dense" | "inference" | "mrr" => feature_bytes(sz.full_nodes) < MIN_BYTES,
            "sampler" | "minibatch" => feature_bytes(sz.mb_nodes) < MIN_BYTES,
            "partition" => {
                let edges = if key.ends_with(".large") {
                    sz.part_large_edges
                } else {
                    sz.part_edges
                };
                edges.saturating_mul(4) < (8 << 20)
            }
            _ => false,
        }
    };
    let mut push = |mut f: Figure, figs: &mut Vec<Figure>| {
        if f.ceiling_frac.is_some() && resident(&f.key) && f.key != "dense.mlp" {
            f.ceiling_frac = None;
            f.ceiling = format!(
                "not computed: at these sizes the working set fits in cache, where the bandwidth bound does not hold ({})",
                f.ceiling
            );
        }
        emit(&f);
        figs.push(f);
    };
    if wants(o, "fullgraph") {
        push(fullgraph(&sz, &mut c, EncoderKind::Sage), &mut figs);
    }
    if wants(o, "gat") {
        push(fullgraph(&sz, &mut c, EncoderKind::Gat), &mut figs);
    }
    if wants(o, "dense") {
        push(fullgraph(&sz, &mut c, EncoderKind::Mlp), &mut figs);
    }
    if wants(o, "inference") {
        push(inference(&sz, &mut c), &mut figs);
    }
    if wants(o, "mrr") {
        push(mrr(&sz, &mut c), &mut figs);
    }
    if wants(o, "minibatch") || wants(o, "sampler") || wants(o, "gat") {
        reset_peak_rss();
        let g = random_graph(sz.mb_nodes, sz.mb_degree, 11);
        let x = random_features(sz.mb_nodes, 128, 12);
        if wants(o, "sampler") {
            push(sampler(&sz, &c, &g), &mut figs);
        }
        let (mut g, mut x) = (g, x);
        if wants(o, "minibatch") {
            // node classification first: its peak RSS is then its own (the allocator keeps the
            // link step's ~5 GB of freed activations for reuse for a while)
            reset_peak_rss();
            let (f, g2, x2) = minibatch(&sz, &mut c, g, x, false, EncoderKind::Sage);
            push(f, &mut figs);
            reset_peak_rss();
            let (f, g3, x3) = minibatch(&sz, &mut c, g2, x2, true, EncoderKind::Sage);
            push(f, &mut figs);
            (g, x) = (g3, x3);
        }
        if wants(o, "gat") {
            reset_peak_rss();
            let (f, _, _) = minibatch(&sz, &mut c, g, x, false, EncoderKind::Gat);
            push(f, &mut figs);
        }
    }
    if wants(o, "partition") {
        for f in partitioning(&sz, &c, o.num_parts)? {
            push(f, &mut figs);
        }
    }
    for f in c.figures.iter().skip(1) {
        emit(f);
    }
    let mut all = c.figures.clone();
    all.extend(figs);
    Ok(all)
}

/// Full-graph iteration (SAGE: `fullgraph.iter`; GAT, same workload: `fullgraph.gat`; MLP:
/// `dense.mlp`).
fn fullgraph(sz: &Sizes, c: &mut Ceilings, enc: EncoderKind) -> Figure {
    reset_peak_rss();
    let (n, deg) = (sz.full_nodes, sz.full_degree);
    let (in_dim, hidden, classes) = (128, 256, 40);
    let graph = random_graph(n, deg, 1);
    let degrees = graph.degrees();
    let x = random_features(n, in_dim, 2);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let labels: Vec<u32> = (0..n)
        .map(|_| rng.random_range(0..classes as u32))
        .collect();
    let mask: Vec<u32> = (0..n as u32).filter(|_| rng.random_bool(0.5)).collect();
    let masked_labels: Vec<u32> = mask.iter().map(|&i| labels[i as usize]).collect();
    let sage = enc == EncoderKind::Sage;
    let gat = enc == EncoderKind::Gat;
    let mut cfg = ModelConfig::new(
        enc,
        in_dim,
        Head::Node {
            num_classes: classes,
        },
    );
    cfg.hidden = hidden;
    cfg.num_layers = 2;
    cfg.layer_norm = false;
    cfg.dropout = if sage || gat { 0.5 } else { 0.0 };
    let model = Model::new(cfg);
    let mut params = model.init_params(&mut rng);
    let mut grads = model.zero_params();
    let mut adam = Adam::new(model.num_params(), 0.01);
    let full = BlockView::full(&graph, &degrees);
    let blocks = [full, full];
    let mut times = Vec::new();
    // forward + backward alone (the layers), for `dense.mlp`
    let mut layer_times = Vec::new();
    for _ in 0..=sz.iters {
        let t = Instant::now();
        let (out, cache) = model.forward(&params, &blocks, &x, true, &mut rng);
        let t_fwd = t.elapsed().as_secs_f64();
        // cross-entropy on the masked half (PyG: out[mask])
        let mut sel = Mat::zeros(mask.len(), classes);
        sel.data
            .par_chunks_mut(classes)
            .zip(mask.par_iter())
            .for_each(|(r, &i)| r.copy_from_slice(out.row(i as usize)));
        let (_loss, d_sel) = softmax_cross_entropy(&sel, &masked_labels);
        let mut d_out = out;
        d_out.data.fill(0.0);
        for (k, &i) in mask.iter().enumerate() {
            d_out.row_mut(i as usize).copy_from_slice(d_sel.row(k));
        }
        grads.fill_zero();
        let tb = Instant::now();
        model.backward(&params, cache, &d_out, &mut grads);
        layer_times.push(t_fwd + tb.elapsed().as_secs_f64());
        adam.step(&mut params, &grads);
        times.push(t.elapsed().as_secs_f64());
    }
    let t = median(times[1..].to_vec());
    let t_layers = median(layer_times[1..].to_vec());
    let e = graph.num_edges();
    let t_min = layer_min_secs(c, sage, n, n, e, in_dim, hidden, true, false)
        + layer_min_secs(c, sage, n, n, e, hidden, classes, true, true);
    let rss = peak_rss_mib();
    model.release_buffers();
    if gat {
        let h = tma_nn::GatConv::DEFAULT_HEADS;
        Figure {
            key: "fullgraph.gat".into(),
            what: format!(
                "full-graph GAT ({h} heads x {} channels, 1 head on the last layer) fwd+bwd+Adam, same workload as fullgraph.iter: N={n}, E={e}, 128-d, hidden {hidden}, {classes} classes, dropout 0.5, CE on half the nodes; median of {}",
                hidden / h,
                sz.iters
            ),
            value: t,
            unit: "s/iter".into(),
            higher_is_better: false,
            ceiling_frac: None,
            ceiling: "not computed (no bound model for attention)".into(),
            peak_rss_mib: rss,
        }
    } else if sage {
        Figure {
            key: "fullgraph.iter".into(),
            what: format!(
                "full-graph GraphSAGE-mean fwd+bwd+Adam, N={n}, E={e}, 128-d, hidden {hidden}, {classes} classes, dropout 0.5, CE on half the nodes; median of {}",
                sz.iters
            ),
            value: t,
            unit: "s/iter".into(),
            higher_is_better: false,
            ceiling_frac: Some(t_min / t),
            ceiling: "dense products at measured gemm rates + aggregation rows at copy bandwidth".into(),
            peak_rss_mib: rss,
        }
    } else {
        Figure {
            key: "dense.mlp".into(),
            what: format!(
                "dense layers: 2-layer MLP [{n},128]->256->40 (PReLU between) forward + backward through Model; value = gemm time of its products / measured layer time ({t_layers:.3} s; whole iteration with loss and Adam {t:.3} s)"
            ),
            value: t_min / t_layers,
            unit: "of gemm".into(),
            higher_is_better: true,
            ceiling_frac: Some(t_min / t_layers),
            ceiling: "gemm rates of the same shapes".into(),
            peak_rss_mib: rss,
        }
    }
}

/// Layer-wise full-neighbour inference on the full-graph workload.
fn inference(sz: &Sizes, c: &mut Ceilings) -> Figure {
    reset_peak_rss();
    let (n, deg) = (sz.full_nodes, sz.full_degree);
    let graph = random_graph(n, deg, 1);
    let degrees = graph.degrees();
    let x = random_features(n, 128, 2);
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut cfg = ModelConfig::new(EncoderKind::Sage, 128, Head::Node { num_classes: 40 });
    cfg.layer_norm = false;
    let model = Model::new(cfg);
    let params = model.init_params(&mut rng);
    let mut times = Vec::new();
    for _ in 0..=sz.iters {
        let t = Instant::now();
        let out = model.infer_full(&params, &graph, &degrees, &x);
        std::hint::black_box(&out);
        times.push(t.elapsed().as_secs_f64());
    }
    let t = median(times[1..].to_vec());
    let e = graph.num_edges();
    let t_min = layer_min_secs(c, true, n, n, e, 128, 256, false, false)
        + layer_min_secs(c, true, n, n, e, 256, 40, false, false);
    Figure {
        key: "inference.full".into(),
        what: format!("layer-wise full-neighbour inference, GraphSAGE 128->256->40, N={n}, E={e}"),
        value: n as f64 / t,
        unit: "nodes/s".into(),
        higher_is_better: true,
        ceiling_frac: Some(t_min / t),
        ceiling: "dense products at gemm rates + aggregation at copy bandwidth".into(),
        peak_rss_mib: peak_rss_mib(),
    }
}

/// Set the link decoder's precision (medium is checked available by `Sizes::from`); `".bf16"`
/// (the figure key's suffix) for medium.
fn set_precision(model: &mut Model, p: MatmulPrecision) -> &'static str {
    let got = model.set_matmul_precision(p);
    assert_eq!(got, p, "Sizes::from checked AMX");
    if p == MatmulPrecision::Medium {
        ".bf16"
    } else {
        ""
    }
}

/// MRR evaluation: scores of (positive + negatives) pairs through `Model::score`, then ranks.
fn mrr(sz: &Sizes, c: &mut Ceilings) -> Figure {
    reset_peak_rss();
    let n = sz.full_nodes;
    let d = 256;
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut model = Model::new(ModelConfig::new(EncoderKind::Sage, 128, Head::Link));
    let bf16 = set_precision(&mut model, sz.precision);
    let params = model.init_params(&mut rng);
    let h = match random_features(n, d, 6) {
        Features::Dense { data, .. } => Mat::from_vec(n, d, data.into_vec()),
        Features::Sparse { .. } => unreachable!("random_features is dense"),
    };
    let (p, k) = (sz.mrr_positives, sz.mrr_negatives);
    let mut src = Vec::with_capacity(p * (k + 1));
    let mut dst = Vec::with_capacity(p * (k + 1));
    for _ in 0..p {
        let u = rng.random_range(0..n as u32);
        for _ in 0..=k {
            src.push(u);
            dst.push(rng.random_range(0..n as u32));
        }
    }
    let mut times = Vec::new();
    let mut sum_rr = 0.0;
    for _ in 0..=sz.iters.min(3) {
        let t = Instant::now();
        let s = model.score(&params, &h, &src, &dst);
        // rank of the positive (first of each group) among its negatives (optimistic ties as PyG)
        sum_rr = s
            .par_chunks(k + 1)
            .map(|g| {
                let rank = 1 + g[1..].iter().filter(|&&v| v > g[0]).count();
                1.0 / rank as f64
            })
            .sum::<f64>();
        times.push(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(sum_rr);
    let t = median(times[1..].to_vec());
    let pairs = p * (k + 1);
    let t_min = c.gemm_secs(GemmKind::AxBt, d, d, pairs);
    Figure {
        key: format!("mrr.eval{bf16}"),
        what: format!(
            "MRR: Model::score on {p} positives x (1 + {k} negatives), hidden {d}, plus ranking; decoder products {}",
            sz.precision
        ),
        value: p as f64 / t,
        unit: "pos/s".into(),
        higher_is_better: true,
        // the ceiling is the f32 gemm rate: no fraction for bf16 tile products
        ceiling_frac: bf16.is_empty().then_some(t_min / t),
        ceiling: if bf16.is_empty() {
            format!("decoder W1 products at the gemm rate ([{pairs},{d}]x[{d},{d}]^T)")
        } else {
            "not computed (bf16 tile products; the ceiling model is f32 gemm)".into()
        },
        peak_rss_mib: peak_rss_mib(),
    }
}

/// Sampler alone: sampled edges/s with fanouts [10, 25] for batches of `node_batch` seeds.
fn sampler(sz: &Sizes, c: &Ceilings, g: &Csr) -> Figure {
    let deg = g.degrees();
    let s = NeighborSampler::new(vec![10, 25]);
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let n = g.num_nodes();
    let batch = |rng: &mut ChaCha8Rng| -> Vec<u32> {
        let mut seen = std::collections::HashSet::new();
        let mut b = Vec::with_capacity(sz.node_batch);
        while b.len() < sz.node_batch.min(n) {
            let v = rng.random_range(0..n as u32);
            if seen.insert(v) {
                b.push(v);
            }
        }
        b
    };
    let warm = batch(&mut rng);
    std::hint::black_box(s.sample(g, &deg, &warm, &mut rng));
    let batches: Vec<Vec<u32>> = (0..64).map(|_| batch(&mut rng)).collect();
    let t = Instant::now();
    let mut edges = 0usize;
    let mut i = 0;
    while i < sz.iters.max(10) || t.elapsed().as_secs_f64() < sz.min_secs {
        edges += s
            .sample(g, &deg, &batches[i % batches.len()], &mut rng)
            .num_edges();
        i += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    let rate = edges as f64 / secs;
    Figure {
        key: "sampler".into(),
        what: format!(
            "NeighborSampler fanouts [10,25] (10 nearest seeds), batches of {} seeds, N={n}, E={}; {i} batches",
            sz.node_batch,
            g.num_edges()
        ),
        value: rate,
        unit: "edges/s".into(),
        higher_is_better: true,
        ceiling_frac: Some(rate * 64.0 / c.copy_bps),
        ceiling: "one 64-byte cache line per sampled edge at copy bandwidth".into(),
        peak_rss_mib: None,
    }
}

/// Mini-batch training throughput: link prediction (seed edges/s) or node classification
/// (seed nodes/s), the reference release's model (SAGE, LayerNorm, PReLU, hidden 256, Adam), measured on a real
/// [`Trainer`] (`Trainer::step`, what `tma train` runs). Takes the graph and features and hands
/// them back (the trainer owns its data).
fn minibatch(
    sz: &Sizes,
    c: &mut Ceilings,
    g: Csr,
    x: Features,
    link: bool,
    enc: EncoderKind,
) -> (Figure, Csr, Features) {
    let n = g.num_nodes();
    let e = g.num_edges();
    let seed = if link { 8 } else { 9 };
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let head = if link {
        Head::Link
    } else {
        Head::Node { num_classes: 40 }
    };
    let mut model = Model::new(ModelConfig::new(enc, 128, head));
    let bf16 = if link {
        set_precision(&mut model, sz.precision)
    } else {
        ""
    };
    let params = model.init_params(&mut rng);
    let batch_size = if link { sz.link_batch } else { sz.node_batch };
    let iters = if link { sz.link_iters } else { sz.iters };
    let target = if link {
        // positives: random existing arcs (u -> v is arc v <- u in the CSR row of v), enough
        // for every step of the run (the trainer shuffles them into batches)
        let edges = (0..batch_size * (iters + 1))
            .map(|_| {
                let a = rng.random_range(0..e);
                let v = g.indptr.partition_point(|&p| p as usize <= a) - 1;
                (g.indices[a], v as u32)
            })
            .collect::<Vec<_>>();
        TrainTarget::Link {
            edges: edges.into(),
        }
    } else {
        TrainTarget::Node {
            nodes: (0..n as u32).collect(),
            targets: NodeTargets::Classes {
                y: (0..n).map(|i| (i % 40) as i32).collect(),
                num_classes: 40,
            },
        }
    };
    let cfg = TrainConfig {
        task: if link { Task::Link } else { Task::Node },
        batch_size,
        seed,
        ..TrainConfig::default()
    };
    let degrees = g.degrees();
    let data = TrainerData {
        trainer: 0,
        part: 0,
        graph: g,
        degrees,
        features: x,
        target,
        global_ids: Vec::new(),
    };
    let mut trainer = Trainer::new(data, model, params, &cfg);
    let mut times = Vec::new();
    let mut t_mins = Vec::new();
    // per-step phases: batch + sampling, model (input, fwd + loss + bwd), update
    let mut phases: [Vec<f64>; 3] = Default::default();
    let t_all = Instant::now();
    let mut step = 0;
    while step <= iters || (!link && t_all.elapsed().as_secs_f64() < sz.min_secs) {
        let t = Instant::now();
        trainer.step();
        times.push(t.elapsed().as_secs_f64());
        let st = trainer.last_step();
        phases[0].push(st.sample_secs);
        phases[1].push(st.model_secs);
        phases[2].push(st.update_secs);
        // lower bound of the model part of this step (sampling excluded)
        let (nd0, ns0, e0) = st.blocks[0];
        let (nd1, ns1, e1) = st.blocks[1];
        let (out_dim, t_dec) = if link {
            (
                256,
                3.0 * c.gemm_secs(GemmKind::AxBt, 256, 256, 2 * batch_size),
            )
        } else {
            (40, 0.0)
        };
        let tm = t_dec
            + c.copy_secs((st.input_rows * 128 * 4 * 2) as f64)
            + layer_min_secs(c, true, nd0, ns0, e0, 128, 256, true, false)
            + layer_min_secs(c, true, nd1, ns1, e1, 256, out_dim, true, true);
        t_mins.push(tm);
        step += 1;
    }
    let steps = times.len() - 1;
    let t = median(times[1..].to_vec());
    let tmin = median(t_mins[1..].to_vec());
    let ms = |v: &Vec<f64>| 1e3 * median(v[1..].to_vec());
    let breakdown = format!(
        "; per step (ms, medians): sample {:.1}, model {:.1} (input rows read in place, forward, loss, backward), Adam {:.1}",
        ms(&phases[0]),
        ms(&phases[1]),
        ms(&phases[2])
    );
    let rss = peak_rss_mib();
    let TrainerData {
        graph, features, ..
    } = trainer.data;
    let gat = enc == EncoderKind::Gat;
    let key = if link {
        "minibatch.link"
    } else {
        "minibatch.node"
    };
    let fig = Figure {
        key: if gat { format!("{key}.gat") } else { format!("{key}{bf16}") },
        what: format!(
            "{} training through Trainer::step, fanouts [10,25], batch {batch_size}{}, {} 128->256->{} + LayerNorm/PReLU, Adam; N={n}, E={e}; median of {steps} steps",
            if link { "link-prediction" } else { "node-classification" },
            if link { " positive edges + 1 uniform negative each, MLP decoder" } else { " seed nodes" },
            if gat {
                format!("GAT ({} heads on the hidden layer)", tma_nn::GatConv::DEFAULT_HEADS)
            } else {
                "SAGE".into()
            },
            if link { 256 } else { 40 },
        ) + &breakdown,
        value: batch_size as f64 / t,
        unit: if link { "edges/s" } else { "nodes/s" }.into(),
        higher_is_better: true,
        ceiling_frac: (!gat && bf16.is_empty()).then_some(tmin / t),
        ceiling: if gat {
            "not computed (no bound model for attention)".into()
        } else if !bf16.is_empty() {
            "not computed (bf16 tile products; the ceiling model is f32 gemm)".into()
        } else {
            "model products at gemm rates + gathers at copy bandwidth (sampling excluded)".into()
        },
        peak_rss_mib: rss,
    };
    (fig, graph, features)
}

/// Partitioning: random and super-node, on the small graph and the large ones; each figure is
/// `partition()` + `build_parts()` of the kept parts, with the peak RSS over both (the graph
/// included).
fn partitioning(sz: &Sizes, c: &Ceilings, num_parts: usize) -> Result<Vec<Figure>> {
    let deg = 20usize;
    let mut figs = Vec::new();
    let runs = [
        ("random", "small", sz.part_edges),
        ("super", "small", sz.part_edges),
        ("random", "large", sz.part_large_edges),
        ("super", "large", sz.super_large_edges),
    ];
    for (method, size, edges) in runs {
        let n = (edges / deg).max(num_parts * 2);
        reset_peak_rss();
        let g = random_graph(n, deg, 13);
        // the layout as a run of that method makes it (the one config -> partition mapping)
        let cfg = tma_train::methods::partition_config(&tma_train::TrainConfig {
            method: if method == "random" {
                tma_train::Method::RandomTma
            } else {
                tma_train::Method::SuperTma
            },
            super_nodes: sz.super_nodes,
            super_clustering: tma_partition::Clustering::Auto,
            num_trainers: num_parts,
            drop_parts: 0,
            seed: 1,
            ..tma_train::TrainConfig::default()
        })
        .expect("random and super-node layouts partition");
        let t = Instant::now();
        let p = partition(&g, &cfg).with_context(|| format!("{method} partitioning"))?;
        let t_assign = t.elapsed().as_secs_f64();
        let parts = build_parts(&g, &p, &p.kept_parts());
        let secs = t.elapsed().as_secs_f64();
        std::hint::black_box(&parts);
        // streamed bytes of random: read the CSR once per part, write the parts
        let bytes = (g.indices.len() * 4 * (num_parts + 1) + n * 8) as f64;
        figs.push(Figure {
            key: format!("partition.{method}.{size}"),
            what: format!(
                "{} partitioning into {num_parts} parts + building them, N={n}, E={} (assignment alone {t_assign:.2} s)",
                if method == "random" {
                    "random (RandomTMA)".to_string()
                } else {
                    format!("super-node (METIS K={})", sz.super_nodes)
                },
                g.num_edges()
            ),
            value: secs,
            unit: "s".into(),
            higher_is_better: false,
            ceiling_frac: if method == "random" {
                Some(c.copy_secs(bytes) / secs)
            } else {
                None
            },
            ceiling: if method == "random" {
                "CSR read once per part + parts written, at copy bandwidth".into()
            } else {
                String::new()
            },
            peak_rss_mib: peak_rss_mib(),
        });
    }
    Ok(figs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_suite_figures_are_finite_and_positive() {
        let o = BenchOpts {
            quick: true,
            only: "all".into(),
            threads: None,
            peers: None,
            json: None,
            report: None,
            full_nodes: Some(600),
            full_degree: Some(4),
            matmul_precision: None,
            iters: Some(1),
            mb_nodes: Some(1000),
            mb_degree: Some(4),
            link_batch: Some(64),
            link_iters: Some(1),
            node_batch: Some(32),
            mrr_positives: Some(4),
            mrr_negatives: Some(20),
            part_edges: Some(4000),
            part_large_edges: Some(8000),
            super_large_edges: Some(8000),
            num_parts: 4,
            super_nodes: Some(20),
        };
        let figs = run_suite(&o, &mut |_| {}).unwrap();
        let keys: Vec<&str> = figs.iter().map(|f| f.key.as_str()).collect();
        for k in [
            "ceiling.copy",
            "fullgraph.iter",
            "dense.mlp",
            "inference.full",
            "mrr.eval",
            "sampler",
            "minibatch.link",
            "minibatch.node",
            "partition.random.small",
            "partition.super.small",
            "partition.random.large",
            "partition.super.large",
        ] {
            assert!(keys.contains(&k), "missing figure {k}");
        }
        assert!(keys.iter().any(|k| k.starts_with("ceiling.gemm.")));
        for f in &figs {
            assert!(
                f.value.is_finite() && f.value > 0.0,
                "{}: {}",
                f.key,
                f.value
            );
            if let Some(c) = f.ceiling_frac {
                assert!(c.is_finite() && c > 0.0, "{}: ceiling {c}", f.key);
            }
        }
    }

    #[test]
    fn dedup_keeps_each_figures_best_run() {
        let f = |key: &str, value: f64, higher_is_better: bool| Figure {
            key: key.into(),
            what: String::new(),
            value,
            unit: String::new(),
            higher_is_better,
            ceiling_frac: None,
            ceiling: String::new(),
            peak_rss_mib: None,
        };
        let out = dedup(vec![
            f("t", 2.0, false),
            f("r", 5.0, true),
            f("t", 1.5, false),
            f("r", 4.0, true),
            f("t", 3.0, false),
        ]);
        let v: Vec<(String, f64)> = out.into_iter().map(|g| (g.key, g.value)).collect();
        assert_eq!(v, vec![("t".to_string(), 1.5), ("r".to_string(), 5.0)]);
    }

    #[test]
    fn peer_ratio_orients_speed_up() {
        let f = Figure {
            key: "x".into(),
            what: String::new(),
            value: 2.0,
            unit: "s".into(),
            higher_is_better: false,
            ceiling_frac: None,
            ceiling: String::new(),
            peak_rss_mib: Some(100.0),
        };
        let p = Peer {
            value: 8.0,
            peak_rss_mib: Some(400.0),
            name: "pyg".into(),
        };
        assert_eq!(peer_ratio(&f, &p), (4.0, Some(0.25)));
        let g = Figure {
            higher_is_better: true,
            ..f
        };
        assert_eq!(peer_ratio(&g, &p).0, 0.25);
    }
}
