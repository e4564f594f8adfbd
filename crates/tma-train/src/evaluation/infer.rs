//! Inference for evaluation: the model's outputs on just the nodes an evaluation reads (the
//! validation/test nodes, or the endpoints of the held-out positives and their negatives), not
//! on the whole graph.
//!
//! Three ways, all returning the same `[nodes.len(), out_dim]` matrix (row `i` = `nodes[i]`):
//! - **full**: exact layer-wise inference over every node ([`Model::infer_full`]), then the
//!   rows asked for. Holds a whole layer's activations: `N x width` floats.
//! - **restricted**: exact layer-wise inference over just the nodes the `L`-hop
//!   in-neighbourhood of the nodes needs: the sets `S_L = nodes`, `S_l = S_{l+1} ∪
//!   N_in(S_{l+1})` are built once, and layer `l` runs once over `S_{l+1}` ([`Model::infer_layer`],
//!   in chunks of destinations whose one-layer exact block fits half of
//!   [`InferOptions::memory_budget`]), reading the stored outputs of layer `l - 1` on `S_l`.
//!   Every needed row is computed once, so a hub shared by many evaluated nodes is aggregated
//!   once (power-law graphs: cutting the nodes into chunks of whole `L`-hop neighbourhoods
//!   recomputed the hubs in every chunk, and took over 14 minutes for 100,000 validation nodes
//!   of a 1.3-billion-arc R-MAT graph). The stored rows of two consecutive layers must fit the
//!   other half of the budget; when they do not, the nodes are cut into groups (halves,
//!   recursively) computed one after the other. Same values as full: every output row
//!   aggregates the same in-neighbours in the same (CSR) order, with the same degrees; only
//!   dense products may round differently (different row counts).
//! - **sampled** (opt-in, [`InferMode::Sampled`]): the same chunks, but blocks sampled with
//!   fanouts instead of full neighbourhoods (an estimate, for graphs where even the restricted
//!   pass costs too much); the sample is drawn from
//!   `seed::derive(seed, Purpose::EvalSampling)`, chunk by chunk, so it is the same at every
//!   evaluation of a run and does not depend on the thread count.
//!
//! [`InferMode::Auto`] (the default) picks by cost: it builds the restricted sets of all the
//! nodes at once and adds up their work (each layer's own cost model,
//! [`tma_nn::EvalLayer::cost`], on its sets), times
//! [`RESTRICTED_OVERHEAD`]; when that reaches the full pass's work (the neighbourhoods cover
//! most of the graph), it runs the full pass if that fits the budget, and else the same pass
//! layer by layer through a mapped scratch file ([`infer_all_to_file`]: one chunk in memory).
//! Otherwise it runs the restricted pass on all the nodes at once, and when the stored rows of
//! its sets do not fit half the budget, the outputs of the layers below the last go through
//! mapped scratch files ([`InferPath::RestrictedFile`]) instead of cutting the nodes into
//! groups that recompute the neighbourhoods they share (at 1.3 billion arcs, 500 validation
//! positives with 1000 negatives each did not finish in 17 minutes in groups within 256 MiB).
//! [`InferMode::Restricted`] keeps everything in memory: groups, halves recursively. Scratch
//! files go to [`InferOptions::scratch_dir`] and never have a name (a killed run leaves none
//! behind); when one cannot be
//! written, auto falls back to the in-memory groups.

use crate::config::{EvalInference, TrainConfig};
use tma_graph::seed::{chunk_rng, derive, Purpose};
use tma_graph::{Csr, Features};
use tma_nn::{EvalLayer, Input, LayerCounts, Mat, Model, ParamSet};
use tma_sample::{full_blocks, BlockView, HopCounts, NeighborSampler};

/// How [`infer_nodes`] computes the rows.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum InferMode {
    /// Full or restricted, whichever the cost model says is cheaper (see the module docs).
    #[default]
    Auto,
    /// Always the full layer-wise pass.
    Full,
    /// Always the restricted, chunked pass.
    Restricted,
    /// Sampled blocks with these fanouts (`fanouts[0]` nearest the nodes, one per layer;
    /// `usize::MAX` = all neighbours): an estimate, not exact inference.
    Sampled(Vec<usize>),
}

/// Options of [`infer_nodes`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InferOptions {
    /// Which computation.
    pub mode: InferMode,
    /// Bytes one chunk may take ([`chunk_bytes`]), and the most the full pass may take for
    /// [`InferMode::Auto`] to choose it.
    pub memory_budget: u64,
    /// The run's seed (sampled mode).
    pub seed: u64,
    /// Where [`infer_all_to_file`] writes its layer outputs (unnamed files); `None`:
    /// the system's temporary directory.
    pub scratch_dir: Option<std::path::PathBuf>,
}

/// What the restricted pass costs besides its multiply-adds (planning, building the blocks,
/// relabelling, the scattered reads of a partial pass), as a factor on its estimated work for
/// [`InferMode::Auto`]: measured, a single chunk covering 95% of a 1M-node graph took 1.7x the
/// full pass's wall time, one at 31% of pubmed's work 0.15x (docs/decisions).
pub const RESTRICTED_OVERHEAD: f64 = 1.5;

/// Default [`InferOptions::memory_budget`]: 1 GiB (the configuration's default `eval_memory`).
pub use crate::config::DEFAULT_EVAL_MEMORY;

impl Default for InferOptions {
    fn default() -> Self {
        InferOptions {
            mode: InferMode::Auto,
            memory_budget: DEFAULT_EVAL_MEMORY,
            seed: 0,
            scratch_dir: None,
        }
    }
}

/// The evaluation options of a training configuration (kept here, beside [`InferOptions`], so
/// that the configuration does not import evaluation).
impl TrainConfig {
    /// The evaluation's [`InferOptions`]: `eval_fanouts` (sampled, 0 = all
    /// neighbours) if set, else `eval_inference`; `eval_memory`, `seed`.
    pub fn infer_options(&self) -> InferOptions {
        let mode = if !self.eval_fanouts.is_empty() {
            let all = |f: &usize| if *f == 0 { usize::MAX } else { *f };
            InferMode::Sampled(self.eval_fanouts.iter().map(all).collect())
        } else {
            match self.eval_inference {
                EvalInference::Auto => InferMode::Auto,
                EvalInference::Full => InferMode::Full,
                EvalInference::Restricted => InferMode::Restricted,
            }
        };
        InferOptions {
            mode,
            memory_budget: self.eval_memory,
            seed: self.seed,
            scratch_dir: None,
        }
    }
}

/// Which computation [`infer_nodes`] ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InferPath {
    /// The full layer-wise pass.
    Full,
    /// Exact inference restricted to the nodes' neighbourhoods, in chunks.
    Restricted,
    /// The restricted pass with the outputs of the layers below the last in mapped scratch
    /// files (auto, when they do not fit half of [`InferOptions::memory_budget`]).
    RestrictedFile,
    /// Sampled blocks.
    Sampled,
}

/// What [`infer_nodes`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct InferReport {
    /// The computation run.
    pub path: InferPath,
    /// Chunks (1 for the full pass).
    pub chunks: usize,
    /// Largest estimated bytes of one chunk (or of the full pass): [`chunk_bytes`].
    pub peak_bytes: u64,
    /// Estimated multiply-adds run (each layer's [`EvalLayer::cost`] summed over layers and
    /// chunks).
    pub cost: f64,
    /// Estimated multiply-adds of the full pass.
    pub full_cost: f64,
}

/// The sizes of layer `l`'s block for its cost model: the input layer (`l == 0`) reads the
/// features, sparse or not as `sparse` says.
fn counts_of(l: usize, src: u64, dst: u64, arcs: u64, sparse: bool) -> LayerCounts {
    LayerCounts {
        src,
        dst,
        arcs,
        input_layer: l == 0,
        sparse_input: l == 0 && sparse,
    }
}

/// Whether `features` are held sparse (the input layer's cost model depends on it).
fn is_sparse(features: &Features) -> bool {
    matches!(features, Features::Sparse { .. })
}

/// Estimated bytes of one chunk's exact (or sampled) blocks and its largest layer's
/// activations, `counts[i]` for `layers[i]`:
///
/// `blocks = 4·src_0 + Σ_l (8·(dst_l + 1) + 4·arcs_l + 4·src_l)` (input ids; each block's
/// `indptr`, `indices`, `src_degree`), plus the largest layer's activations by the layer's own
/// model ([`EvalLayer::bytes`]: the computation path the layer itself chooses on such a
/// block). `layers[0]` counts as reading its input in place (the features, or a stored layer's
/// rows in the layer-wise pass), sparse as `sparse` says. With `blocks_owned = false` (the
/// full pass reads the graph in place) the block term is 0.
pub fn chunk_bytes(
    counts: &HopCounts,
    layers: &[EvalLayer],
    sparse: bool,
    blocks_owned: bool,
) -> u64 {
    let mut blocks = 0u64;
    let mut act = 0u64;
    for (l, layer) in layers.iter().enumerate() {
        let (s, d, a) = (counts.src[l], counts.dst[l], counts.arcs[l]);
        blocks += 8 * (d + 1) + 4 * a + 4 * s;
        act = act.max(layer.bytes(&counts_of(l, s, d, a, sparse)));
    }
    if blocks_owned {
        blocks += 4 * counts.src.first().copied().unwrap_or(0);
        blocks + act
    } else {
        act
    }
}

/// The model's outputs (logits, or embeddings for link prediction) on `nodes` (distinct graph
/// ids), row `i` for `nodes[i]`, computed on `graph` (`degrees = graph.degrees()`) from
/// `features`, as [`InferOptions::mode`] says (module docs): [`infer_rows`] as a matrix in
/// memory (rows mapped from a scratch file are copied).
///
/// # Panics
/// As [`infer_rows`].
pub fn infer_nodes(
    model: &Model,
    p: &ParamSet,
    graph: &Csr,
    degrees: &[u32],
    features: &Features,
    nodes: &[u32],
    opts: &InferOptions,
) -> (Mat, InferReport) {
    let (rows, report) = infer_rows(model, p, graph, degrees, features, nodes, opts);
    let Features::Dense { dim, data, .. } = rows else {
        unreachable!("dense outputs")
    };
    (
        Mat {
            rows: nodes.len(),
            cols: dim,
            data: data.into_vec(),
        },
        report,
    )
}

/// The model's outputs (logits, or embeddings for link prediction) on `nodes` (distinct graph
/// ids), `[nodes.len(), out_dim]` dense rows, row `i` for `nodes[i]`: in memory, or mapped from
/// an unnamed scratch file ([`InferPath::RestrictedFile`], so that rows too many for the
/// budget stay out of anonymous memory), computed on `graph` (`degrees = graph.degrees()`) from
/// `features`, as [`InferOptions::mode`] says (module docs). Besides the budget, the restricted
/// and sampled passes keep about 5 bytes per graph node (a one-bit set marker and the
/// sampler's relabel marker).
///
/// # Panics
/// If a node is out of range or repeated, or `fanouts` of [`InferMode::Sampled`] do not have
/// one entry per layer.
pub fn infer_rows(
    model: &Model,
    p: &ParamSet,
    graph: &Csr,
    degrees: &[u32],
    features: &Features,
    nodes: &[u32],
    opts: &InferOptions,
) -> (Features, InferReport) {
    let t = std::time::Instant::now();
    let (rows, report) = infer_rows_inner(model, p, graph, degrees, features, nodes, opts);
    tracing::debug!(
        nodes = nodes.len(),
        path = ?report.path,
        chunks = report.chunks,
        peak_bytes = report.peak_bytes,
        cost_vs_full = report.cost / report.full_cost.max(1.0),
        secs = t.elapsed().as_secs_f64(),
        "evaluation inference"
    );
    (rows, report)
}

/// [`infer_rows`] without its diagnostics line.
fn infer_rows_inner(
    model: &Model,
    p: &ParamSet,
    graph: &Csr,
    degrees: &[u32],
    features: &Features,
    nodes: &[u32],
    opts: &InferOptions,
) -> (Features, InferReport) {
    let layers = model.cfg.num_layers;
    let dims = model.eval_layers();
    let sparse = is_sparse(features);
    let n = graph.num_nodes() as u64;
    let nnz = graph.num_edges() as u64;
    let full_counts = HopCounts {
        src: vec![n; layers],
        dst: vec![n; layers],
        arcs: vec![nnz; layers],
    };
    let cost_of = |c: &HopCounts| -> f64 {
        dims.iter()
            .enumerate()
            .map(|(l, layer)| layer.cost(&counts_of(l, c.src[l], c.dst[l], c.arcs[l], sparse)))
            .sum()
    };
    let full_cost = cost_of(&full_counts);
    let full_bytes = chunk_bytes(&full_counts, &dims, sparse, false);
    let budget = opts.memory_budget;
    let full = |model: &Model| {
        let h = model.infer_full(p, graph, degrees, features);
        let out = gather_rows(&h, nodes);
        model.recycle(h);
        (
            mat_rows(out),
            InferReport {
                path: InferPath::Full,
                chunks: 1,
                peak_bytes: full_bytes,
                cost: full_cost,
                full_cost,
            },
        )
    };
    match &opts.mode {
        InferMode::Full => full(model),
        InferMode::Sampled(fanouts) => {
            assert_eq!(fanouts.len(), layers, "one eval fanout per layer");
            let (out, mut report) = sampled(
                model, p, graph, degrees, features, nodes, fanouts, opts, &dims,
            );
            report.full_cost = full_cost;
            (mat_rows(out), report)
        }
        mode => {
            let auto = *mode == InferMode::Auto;
            let mut lw = Layerwise {
                model,
                p,
                graph,
                degrees,
                features,
                dims: &dims,
                budget,
                mark: vec![0u64; graph.num_nodes().div_ceil(64)],
                chunks: 0,
                peak: 0,
                cost: 0.0,
            };
            if auto {
                // one group of every node: the least work any restricted pass does
                let sets = lw.sets(nodes);
                let single = lw.group_cost(nodes, &sets);
                tracing::debug!(
                    sets = ?sets.iter().map(Vec::len).collect::<Vec<_>>(),
                    restricted_vs_full = single / full_cost.max(1.0),
                    "restricted sets of {} nodes",
                    nodes.len()
                );
                if single * RESTRICTED_OVERHEAD >= full_cost {
                    if full_bytes <= budget {
                        return full(model);
                    }
                    // the neighbourhoods cover most of the graph but a whole layer does not
                    // fit the budget: the full pass through a mapped scratch file (one chunk in
                    // memory)
                    if let Ok(rows) = infer_all_to_file(model, p, graph, degrees, features, opts) {
                        return (
                            match gather_to_file(&rows, model.out_dim(), nodes, opts) {
                                Some(Ok(f)) => f,
                                _ => mat_rows(gather_mapped(
                                    &rows,
                                    model.out_dim(),
                                    graph.num_nodes(),
                                    nodes,
                                )),
                            },
                            InferReport {
                                path: InferPath::Full,
                                chunks: 0,
                                peak_bytes: budget / 2,
                                cost: full_cost,
                                full_cost,
                            },
                        );
                    }
                }
                // the stored rows of the group do not fit half the budget: the layers below
                // the last go through mapped scratch files (cutting the group into halves
                // instead recomputes the neighbourhoods they share: on a power-law graph,
                // most of the hubs in every half)
                let spill = (nodes.len() > 1 && lw.stored_bytes(nodes.len(), &sets) > budget / 2)
                    .then(|| opts.scratch_dir.clone().unwrap_or_else(std::env::temp_dir));
                if let Ok(h) = lw.run(nodes, sets, spill.as_deref()) {
                    model.release_buffers();
                    return (
                        h,
                        InferReport {
                            path: if spill.is_some() {
                                InferPath::RestrictedFile
                            } else {
                                InferPath::Restricted
                            },
                            chunks: lw.chunks,
                            peak_bytes: lw.peak,
                            cost: lw.cost,
                            full_cost,
                        },
                    );
                }
                // a scratch file could not be written: the groups in memory below
                (lw.chunks, lw.peak, lw.cost) = (0, 0, 0.0);
            }
            // groups whose stored rows fit half the budget, halves recursively
            let groups = lw.plan(nodes);
            let out_dim = model.out_dim();
            let mut out = Mat::zeros(nodes.len(), out_dim);
            for g in groups {
                let r = g.range.clone();
                let h = lw
                    .run(&nodes[r.clone()], g.sets, None)
                    .expect("in-memory groups write no file");
                let Features::Dense { data, .. } = h else {
                    unreachable!("dense outputs")
                };
                out.data[r.start * out_dim..r.end * out_dim].copy_from_slice(&data);
            }
            // the chunks' buffers (up to half the budget each) would otherwise stay pooled
            // in the model between evaluations
            model.release_buffers();
            (
                mat_rows(out),
                InferReport {
                    path: InferPath::Restricted,
                    chunks: lw.chunks,
                    peak_bytes: lw.peak,
                    cost: lw.cost,
                    full_cost,
                },
            )
        }
    }
}

/// Most arcs one chunk of the layer-wise pass aggregates (its neighbour lists, read in place
/// from a mapped graph, stay resident until the chunk ends: 2^24 arcs = 64 MiB of indices).
const CHUNK_ARCS: u64 = 1 << 24;

/// Most destinations of one chunk of the layer-wise pass: on a mapped graph each destination's
/// `indptr` entry and neighbour list can sit on pages of their own, resident until the chunk
/// ends (2^15 destinations: at most ~256 MiB of such pages with [`CHUNK_ARCS`]). The input
/// rows of a mapped feature file are gathered in row order and released as they are copied
/// ([`Features::gather_releasing`]), so they do not count here. Without these bounds one
/// validation of 100,000 nodes of a 1.3-billion-arc graph made most of the 13.6 GB graph
/// resident in the evaluating process (scattered rows fault in a page each).
const CHUNK_DST: usize = 1 << 15;

/// Rows of the graph read between two page releases while the neighbourhood sets are built
/// (ascending rows: at most this many pages of `indptr` and of `indices`, plus long lists).
const SETS_RELEASE_ROWS: usize = 1 << 15;

/// A group of consecutive nodes computed layer-wise together: `sets[l]` (sorted, `1 <= l <
/// layers`) are the nodes whose layer-`l` input rows the group needs.
struct Group {
    range: std::ops::Range<usize>,
    sets: Vec<Vec<u32>>,
}

/// Layer-wise restricted inference: for a group of nodes `S_L`, the sets `S_l = S_{l+1} ∪
/// N_in(S_{l+1})` (`1 <= l < L`) are built once; layer `l` then runs once over the
/// destinations `S_{l+1}` (in chunks of consecutive destinations whose one-layer block fits
/// half the budget), reading its inputs from the stored outputs of layer `l - 1` on `S_l`
/// (the features for `l = 0`). Every needed node's row is computed once per group, so a hub
/// shared by many evaluated nodes is aggregated once, not once per chunk. The stored rows of
/// two consecutive layers must fit the other half of the budget; a group that does not is cut
/// in two (a single node is computed whatever it needs).
struct Layerwise<'a> {
    model: &'a Model,
    p: &'a ParamSet,
    graph: &'a Csr,
    degrees: &'a [u32],
    features: &'a Features,
    dims: &'a [EvalLayer<'a>],
    budget: u64,
    /// One bit per graph node: in the set being built.
    mark: Vec<u64>,
    chunks: usize,
    peak: u64,
    cost: f64,
}

impl Layerwise<'_> {
    /// `sets[l]` for `1 <= l < L` (`sets[0]` empty) of the group `nodes`.
    fn sets(&mut self, nodes: &[u32]) -> Vec<Vec<u32>> {
        let layers = self.dims.len();
        let mut sets = vec![Vec::new(); layers];
        let graph = self.graph;
        for l in (1..layers).rev() {
            // the rows are read in ascending order and released behind (a mapped graph would
            // otherwise keep every page read resident); the set does not depend on the order
            let sorted_nodes;
            let prev: &[u32] = if l + 1 == layers {
                let mut v = nodes.to_vec();
                v.sort_unstable();
                sorted_nodes = v;
                &sorted_nodes
            } else {
                &sets[l + 1]
            };
            let mut next: Vec<u32> = Vec::with_capacity(prev.len() * 2);
            let mark = &mut self.mark;
            let mut add = |v: u32| {
                let (w, b) = (v as usize / 64, v as usize % 64);
                if mark[w] >> b & 1 == 0 {
                    mark[w] |= 1 << b;
                    next.push(v);
                }
            };
            for seg in prev.chunks(SETS_RELEASE_ROWS) {
                for &v in seg {
                    add(v);
                    for &u in graph.neighbors(v as usize) {
                        add(u);
                    }
                }
                graph.release_rows(seg[0] as usize..seg[seg.len() - 1] as usize + 1);
            }
            for &v in &next {
                self.mark[v as usize / 64] = 0;
            }
            next.sort_unstable();
            sets[l] = next;
        }
        sets
    }

    /// Bytes of the stored rows of two consecutive layers, at most.
    fn stored_bytes(&self, nodes: usize, sets: &[Vec<u32>]) -> u64 {
        let layers = self.dims.len();
        (0..layers)
            .map(|l| {
                let (din, dout) = (self.dims[l].in_dim(), self.dims[l].out_dim());
                let input = if l == 0 { 0 } else { sets[l].len() * din };
                let dst = if l + 1 == layers {
                    nodes
                } else {
                    sets[l + 1].len()
                };
                4 * (input + dst * dout) as u64
            })
            .max()
            .unwrap_or(0)
    }

    /// Multiply-adds of the group (each layer's [`EvalLayer::cost`] once).
    fn group_cost(&self, nodes: &[u32], sets: &[Vec<u32>]) -> f64 {
        let layers = self.dims.len();
        (0..layers)
            .map(|l| {
                let dst: &[u32] = if l + 1 == layers { nodes } else { &sets[l + 1] };
                let arcs: u64 = dst.iter().map(|&v| self.degrees[v as usize] as u64).sum();
                let src = if l == 0 {
                    dst.len() as u64 + arcs
                } else {
                    sets[l].len() as u64
                };
                self.dims[l].cost(&counts_of(
                    l,
                    src.min(self.graph.num_nodes() as u64),
                    dst.len() as u64,
                    arcs,
                    is_sparse(self.features),
                ))
            })
            .sum()
    }

    /// The groups of `nodes`: all of them at once when their stored rows fit half the
    /// budget, else halves, recursively.
    fn plan(&mut self, nodes: &[u32]) -> Vec<Group> {
        let mut out = Vec::new();
        let mut todo: Vec<std::ops::Range<usize>> = Vec::new();
        todo.push(0..nodes.len());
        while let Some(r) = todo.pop() {
            if r.is_empty() {
                continue;
            }
            let sets = self.sets(&nodes[r.clone()]);
            if r.len() > 1 && self.stored_bytes(r.len(), &sets) > self.budget / 2 {
                let mid = r.start + r.len() / 2;
                todo.push(mid..r.end);
                todo.push(r.start..mid);
                continue;
            }
            out.push(Group { range: r, sets });
        }
        out
    }

    /// Estimated bytes of one chunk of layer `l` with `src` sources, `dst` destinations and
    /// `arcs` arcs: [`chunk_bytes`], plus the gathered copy of every source row when the input
    /// layer reads features mapped from disk ([`Features::gather_releasing`]).
    fn chunk_estimate(&self, l: usize, src: u64, dst: u64, arcs: u64) -> u64 {
        let counts = HopCounts {
            src: vec![src],
            dst: vec![dst],
            arcs: vec![arcs],
        };
        let gathered = if l == 0 && self.features.is_mapped() {
            4 * src * self.dims[0].in_dim() as u64
        } else {
            0
        };
        let sparse = l == 0 && is_sparse(self.features);
        chunk_bytes(&counts, &self.dims[l..=l], sparse, true) + gathered
    }

    /// Layer `l`'s destinations `dst` cut into consecutive chunks whose one-layer exact block
    /// fits half the budget ([`Layerwise::chunk_estimate`], sources bounded by destinations +
    /// arcs) and holds at most [`CHUNK_ARCS`] arcs and [`CHUNK_DST`] destinations.
    fn layer_chunks(&self, l: usize, dst: &[u32]) -> Vec<std::ops::Range<usize>> {
        let bytes = |d: u64, a: u64| self.chunk_estimate(l, d + a, d, a);
        let mut out = Vec::new();
        let (mut start, mut d, mut a) = (0usize, 0u64, 0u64);
        for (i, &v) in dst.iter().enumerate() {
            let deg = self.degrees[v as usize] as u64;
            if i > start
                && (bytes(d + 1, a + deg) > self.budget / 2
                    || a + deg > CHUNK_ARCS
                    || i - start >= CHUNK_DST)
            {
                out.push(start..i);
                (start, d, a) = (i, 0, 0);
            }
            d += 1;
            a += deg;
        }
        if start < dst.len() {
            out.push(start..dst.len());
        }
        out
    }

    /// The outputs of the last layer on `nodes` (a group planned with `sets`), `[nodes.len(),
    /// out_dim]`. With `spill` (a directory), every layer's outputs are written to scratch
    /// files there and mapped back ([`ScratchLayer`]) instead of held in memory (the last
    /// layer's too: the rows returned are mapped): the group need not fit the budget, only
    /// one chunk does.
    ///
    /// # Errors
    /// The I/O error of a scratch file (only with `spill`).
    fn run(
        &mut self,
        nodes: &[u32],
        sets: Vec<Vec<u32>>,
        spill: Option<&std::path::Path>,
    ) -> Result<Features, tma_graph::GraphError> {
        let layers = self.dims.len();
        // the previous layer's outputs on sets[l]: in memory, or mapped from a scratch file
        let mut h: Option<Mat> = None;
        let mut h_file: Option<Features> = None;
        let mut buf = empty_features();
        let mut rows_buf = empty_features();
        for l in 0..layers {
            let dout = self.dims[l].out_dim();
            let dst: &[u32] = if l + 1 == layers { nodes } else { &sets[l + 1] };
            let to_file = spill;
            let mut out_file = match to_file {
                Some(dir) => Some(ScratchLayer::new(dir)?),
                None => None,
            };
            let mut out = if out_file.is_some() {
                Mat::zeros(0, dout)
            } else {
                Mat::zeros(dst.len(), dout)
            };
            let stored = if spill.is_some() {
                0
            } else {
                self.stored_bytes(nodes.len(), &sets)
            };
            for r in self.layer_chunks(l, dst) {
                let mb = full_blocks(self.graph, self.degrees, &dst[r.clone()], 1);
                let b = &mb.blocks[0];
                let view = b.view();
                let y = if l == 0 {
                    if self.features.is_mapped() {
                        // scattered rows of a mapped file: gathered in row order, released
                        // as copied (a page per row would otherwise stay resident)
                        self.features.gather_releasing(&mb.input_nodes, &mut buf);
                        self.model.infer_layer(self.p, l, &view, Input::Rows(&buf))
                    } else {
                        let x = Input::select(self.features, &mb.input_nodes, &mut buf);
                        self.model.infer_layer(self.p, l, &view, x)
                    }
                } else {
                    // the sources' rows in the stored outputs of layer l - 1 (sets[l] is
                    // sorted and holds every source of these destinations)
                    let rows: Vec<u32> = mb
                        .input_nodes
                        .iter()
                        .map(|g| sets[l].binary_search(g).expect("source in the set") as u32)
                        .collect();
                    match (&h, &h_file) {
                        (Some(prev), _) => {
                            let x = Input::Indexed {
                                all: &prev.data,
                                dim: prev.cols,
                                rows: &rows,
                            };
                            self.model.infer_layer(self.p, l, &view, x)
                        }
                        (None, Some(prev)) => {
                            prev.gather_releasing(&rows, &mut rows_buf);
                            self.model
                                .infer_layer(self.p, l, &view, Input::Rows(&rows_buf))
                        }
                        (None, None) => unreachable!("layer {l} has stored inputs"),
                    }
                };
                match &mut out_file {
                    Some(f) => f.push(&y.data)?,
                    None => out.data[r.start * dout..r.end * dout].copy_from_slice(&y.data),
                }
                self.model.recycle(y);
                // a mapped graph: the pages this chunk read leave the process's RSS (they stay
                // in the page cache), so evaluation holds one chunk's pages, not every page the
                // whole pass reads (no-op for owned arrays); below the last layer the
                // destinations are sorted, so their rows span dst[first]..=dst[last]
                let chunk = &dst[r.clone()];
                if l + 1 < layers {
                    self.graph
                        .release_rows(chunk[0] as usize..chunk[chunk.len() - 1] as usize + 1);
                } else {
                    self.graph.release_pages();
                }
                let est = self.chunk_estimate(
                    l,
                    b.num_src as u64,
                    b.num_dst as u64,
                    b.indices.len() as u64,
                );
                self.peak = self.peak.max(stored + est);
                self.cost += self.dims[l].cost(&counts_of(
                    l,
                    b.num_src as u64,
                    b.num_dst as u64,
                    b.indices.len() as u64,
                    is_sparse(self.features),
                ));
                self.chunks += 1;
            }
            // the stored rows of the previous layer are freed, not recycled: the model's
            // buffer pool would keep them (they are the size of a whole set, not of a chunk)
            drop(h.take());
            drop(h_file.take());
            match out_file {
                Some(f) => h_file = Some(f.finish(dst.len(), dout)?),
                None => h = Some(out),
            }
        }
        Ok(match (h, h_file) {
            (Some(m), _) => Features::Dense {
                num_nodes: m.rows,
                dim: m.cols,
                data: m.data.into(),
            },
            (None, Some(f)) => f,
            (None, None) => unreachable!("at least one layer"),
        })
    }
}

/// One layer's outputs written row by row to a scratch file under `dir` and mapped back
/// ([`ScratchLayer::finish`]). The file never has a name (an unnamed temporary file:
/// `O_TMPFILE` on Linux, elsewhere unlinked as soon as created), so it is freed when the
/// mapping is dropped or the process ends, killed or not, and the rows stay out of anonymous
/// memory (page cache only).
struct ScratchLayer {
    name: std::path::PathBuf,
    w: std::io::BufWriter<std::fs::File>,
}

impl ScratchLayer {
    fn io(path: &std::path::Path) -> impl FnOnce(std::io::Error) -> tma_graph::GraphError {
        let path = path.to_path_buf();
        move |source| tma_graph::GraphError::Io { path, source }
    }

    fn new(dir: &std::path::Path) -> Result<ScratchLayer, tma_graph::GraphError> {
        let name = dir.join("(unnamed evaluation scratch file)");
        let file = tempfile::tempfile_in(dir).map_err(Self::io(&name))?;
        Ok(ScratchLayer {
            w: std::io::BufWriter::with_capacity(1 << 20, file),
            name,
        })
    }

    /// Appends rows (little-endian f32, the on-disk format's byte order).
    fn push(&mut self, rows: &[f32]) -> Result<(), tma_graph::GraphError> {
        use std::io::Write;
        let mut bytes = Vec::with_capacity(rows.len().min(1 << 18) * 4);
        for part in rows.chunks(1 << 18) {
            bytes.clear();
            for x in part {
                bytes.extend_from_slice(&x.to_le_bytes());
            }
            self.w.write_all(&bytes).map_err(Self::io(&self.name))?;
        }
        Ok(())
    }

    /// The rows written, `[rows, dim]`, mapped from the file.
    fn finish(self, rows: usize, dim: usize) -> Result<Features, tma_graph::GraphError> {
        let ScratchLayer { name, w } = self;
        let file = w
            .into_inner()
            .map_err(|e| Self::io(&name)(e.into_error()))?;
        let map = tma_graph::SharedMap::from_file(&file, &name)?;
        let data = tma_graph::Buf::mapped(map, 0, rows * dim)?;
        Ok(Features::Dense {
            num_nodes: rows,
            dim,
            data,
        })
    }
}

/// The model's outputs on **every** node by exact layer-wise inference, each layer's outputs
/// written to a file under `opts.scratch_dir` (the system's temporary directory when `None`)
/// and mapped back, so what stays in anonymous memory is one chunk's block and activations
/// (within half of `opts.memory_budget`, at most [`CHUNK_ARCS`] arcs and [`CHUNK_DST`]
/// destinations), not `N x width` floats: for evaluations that read most of the graph (the
/// whole test split of a link split stored with a big graph). The destinations of a chunk are
/// consecutive node ids, their rows appended to the layer's file in order; the input rows
/// (features, or the previous layer's mapped file) are gathered in row order and released as
/// copied, and the graph's rows are released behind each chunk. Values: those of
/// [`Model::infer_full`] (the same neighbours in the same order; dense products may round
/// differently with other row counts). Returns the last layer's outputs, `[N, out_dim]`
/// row-major, mapped from an unnamed file (freed when the buffer is dropped).
///
/// # Errors
/// The I/O error of the scratch file, naming it.
pub fn infer_all_to_file(
    model: &Model,
    p: &ParamSet,
    graph: &Csr,
    degrees: &[u32],
    features: &Features,
    opts: &InferOptions,
) -> Result<tma_graph::Buf<f32>, tma_graph::GraphError> {
    let layers = model.cfg.num_layers;
    let dir = opts.scratch_dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut out = ScratchLayer::new(&dir)?;
    infer_layers_streamed(
        model,
        p,
        graph,
        degrees,
        features,
        layers,
        opts,
        &mut |rows| out.push(rows),
    )?;
    match out.finish(graph.num_nodes(), model.out_dim())? {
        Features::Dense { data, .. } => Ok(data),
        _ => unreachable!("dense outputs"),
    }
}

/// The outputs of the first `layers` layers of `model` (`1..=num_layers`; fewer than all: the
/// hidden representation after that layer's norm and activation, the input of the next layer)
/// on **every** node, by the layer-wise pass of [`infer_all_to_file`] (layers below the last
/// through mapped scratch files under `opts.scratch_dir`, one chunk's block and activations in
/// memory, within half of `opts.memory_budget`); the last layer's rows are handed to `sink`
/// chunk by chunk, consecutive node ids from 0 to `N - 1` in order, `[chunk, width]` row-major
/// f32 (`width` that layer's output width), never held whole. Values as
/// [`infer_all_to_file`].
///
/// # Errors
/// The I/O error of a scratch file, naming it, or the first error `sink` returns.
///
/// # Panics
/// If `layers` is 0 or above the model's layers.
#[allow(clippy::too_many_arguments)]
pub fn infer_layers_streamed(
    model: &Model,
    p: &ParamSet,
    graph: &Csr,
    degrees: &[u32],
    features: &Features,
    layers: usize,
    opts: &InferOptions,
    sink: &mut dyn FnMut(&[f32]) -> Result<(), tma_graph::GraphError>,
) -> Result<(), tma_graph::GraphError> {
    let all = model.eval_layers();
    assert!(
        (1..=all.len()).contains(&layers),
        "layers {layers} of a {}-layer model",
        all.len()
    );
    let dims = &all[..layers];
    let n = graph.num_nodes();
    let lw = Layerwise {
        model,
        p,
        graph,
        degrees,
        features,
        dims,
        budget: opts.memory_budget,
        mark: Vec::new(),
        chunks: 0,
        peak: 0,
        cost: 0.0,
    };
    let dir = opts.scratch_dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut prev: Option<Features> = None;
    let mut buf = empty_features();
    for (l, dout) in dims.iter().map(EvalLayer::out_dim).enumerate() {
        let last = l + 1 == layers;
        let mut out = if last {
            None
        } else {
            Some(ScratchLayer::new(&dir)?)
        };
        let mut start = 0usize;
        while start < n {
            // consecutive destinations whose one-layer block fits half the budget
            let (mut d, mut a, mut end) = (0u64, 0u64, start);
            while end < n {
                let deg = degrees[end] as u64;
                if end > start
                    && (lw.chunk_estimate(l, d + 1 + a + deg, d + 1, a + deg) > lw.budget / 2
                        || a + deg > CHUNK_ARCS
                        || end - start >= CHUNK_DST)
                {
                    break;
                }
                d += 1;
                a += deg;
                end += 1;
            }
            let dst: Vec<u32> = (start as u32..end as u32).collect();
            let mb = full_blocks(graph, degrees, &dst, 1);
            let view = mb.blocks[0].view();
            let input = prev.as_ref().unwrap_or(features);
            let y = if input.is_mapped() {
                input.gather_releasing(&mb.input_nodes, &mut buf);
                model.infer_layer(p, l, &view, Input::Rows(&buf))
            } else {
                let x = Input::select(input, &mb.input_nodes, &mut buf);
                model.infer_layer(p, l, &view, x)
            };
            let pushed = match out.as_mut() {
                Some(f) => f.push(&y.data),
                None => sink(&y.data),
            };
            model.recycle(y);
            pushed?;
            graph.release_rows(start..end);
            start = end;
        }
        prev = match out {
            Some(f) => Some(f.finish(n, dout)?),
            None => None,
        };
    }
    model.release_buffers();
    graph.release_pages();
    features.release_pages();
    Ok(())
}

/// Rows `nodes` of `rows` (`[n, dim]`, mapped) as a matrix, gathered in row order and
/// released as copied.
fn gather_mapped(rows: &tma_graph::Buf<f32>, dim: usize, n: usize, nodes: &[u32]) -> Mat {
    let all = Features::Dense {
        num_nodes: n,
        dim,
        data: rows.clone(),
    };
    let mut got = empty_features();
    all.gather_releasing(nodes, &mut got);
    let Features::Dense { data, .. } = got else {
        unreachable!("dense rows")
    };
    Mat {
        rows: nodes.len(),
        cols: dim,
        data: data.into_vec(),
    }
}

/// Rows `nodes` of `rows` (`[N, dim]`, mapped) into a new mapped scratch file, in pieces of
/// at most half of `opts.memory_budget` (each gathered in row order and released as copied),
/// when they do not fit half the budget in memory; `None` when they do (or `nodes` are not
/// ascending, which the pieces' reads in row order need).
fn gather_to_file(
    rows: &tma_graph::Buf<f32>,
    dim: usize,
    nodes: &[u32],
    opts: &InferOptions,
) -> Option<Result<Features, tma_graph::GraphError>> {
    let bytes = 4 * (nodes.len() * dim) as u64;
    if bytes <= opts.memory_budget / 2 || !nodes.is_sorted() || dim == 0 {
        return None;
    }
    let per = ((opts.memory_budget / 2) / (4 * dim as u64)).max(1) as usize;
    let n = rows.len() / dim;
    let dir = opts.scratch_dir.clone().unwrap_or_else(std::env::temp_dir);
    let go = || {
        let mut out = ScratchLayer::new(&dir)?;
        for piece in nodes.chunks(per) {
            out.push(&gather_mapped(rows, dim, n, piece).data)?;
        }
        out.finish(nodes.len(), dim)
    };
    Some(go())
}

/// `m` as dense feature rows (no copy).
fn mat_rows(m: Mat) -> Features {
    Features::Dense {
        num_nodes: m.rows,
        dim: m.cols,
        data: m.data.into(),
    }
}

/// Rows `nodes` of `h`.
fn gather_rows(h: &Mat, nodes: &[u32]) -> Mat {
    let d = h.cols;
    let mut out = Mat::zeros(nodes.len(), d);
    for (i, &v) in nodes.iter().enumerate() {
        out.data[i * d..(i + 1) * d].copy_from_slice(h.row(v as usize));
    }
    out
}

/// Sampled inference: chunks of at most `c` nodes, `c` the largest count whose worst-case
/// blocks (every node sampling its full fanout, no shared neighbours) fit the budget.
#[allow(clippy::too_many_arguments)]
fn sampled(
    model: &Model,
    p: &ParamSet,
    graph: &Csr,
    degrees: &[u32],
    features: &Features,
    nodes: &[u32],
    fanouts: &[usize],
    opts: &InferOptions,
    dims: &[EvalLayer],
) -> (Mat, InferReport) {
    let layers = fanouts.len();
    let n = graph.num_nodes() as u64;
    // worst case per seed: nodes within h hops <= prod of the first h fanouts (capped at N)
    let worst = |c: u64| -> HopCounts {
        let mut within = vec![c.min(n)];
        for h in 0..layers {
            let f = (fanouts[h].min(graph.num_nodes().max(1)) as u64).max(1);
            let next = within[h].saturating_add(within[h].saturating_mul(f)).min(n);
            within.push(next);
        }
        let mut counts = HopCounts::default();
        for l in 0..layers {
            let h = layers - 1 - l;
            let f = fanouts[h].min(graph.num_nodes()) as u64;
            counts.src.push(within[h + 1]);
            counts.dst.push(within[h]);
            counts.arcs.push(within[h].saturating_mul(f));
        }
        counts
    };
    let mut c = 1u64;
    let sparse = is_sparse(features);
    while c < nodes.len() as u64
        && chunk_bytes(&worst(2 * c), dims, sparse, true) <= opts.memory_budget
    {
        c *= 2;
    }
    let c = c as usize;
    let sampler = NeighborSampler::new(fanouts.to_vec());
    let base = derive(opts.seed, Purpose::EvalSampling);
    let out_dim = model.out_dim();
    let mut out = Mat::zeros(nodes.len(), out_dim);
    let mut buf = empty_features();
    let mut cost = 0f64;
    let mut chunks = 0;
    for (i, chunk) in nodes.chunks(c.max(1)).enumerate() {
        let mut rng = chunk_rng(base, i as u64);
        let mb = sampler.sample(graph, degrees, chunk, &mut rng);
        let views: Vec<BlockView> = mb.blocks.iter().map(|b| b.view()).collect();
        for (l, b) in mb.blocks.iter().enumerate() {
            cost += dims[l].cost(&counts_of(
                l,
                b.num_src as u64,
                b.num_dst as u64,
                b.indices.len() as u64,
                sparse,
            ));
        }
        let x = Input::select(features, &mb.input_nodes, &mut buf);
        let h = model.infer_blocks(p, &views, x);
        let start = i * c;
        out.data[start * out_dim..(start + chunk.len()) * out_dim].copy_from_slice(&h.data);
        model.recycle(h);
        chunks += 1;
    }
    (
        out,
        InferReport {
            path: InferPath::Sampled,
            chunks,
            peak_bytes: chunk_bytes(&worst(c as u64), dims, sparse, true),
            cost,
            full_cost: 0.0,
        },
    )
}

/// An empty dense feature buffer for [`Input::select`] to gather sparse rows into.
fn empty_features() -> Features {
    Features::Dense {
        num_nodes: 0,
        dim: 0,
        data: Vec::new().into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a scratch file had a name in its directory while it was written, so a run
    /// killed then (SIGKILL) left `.tma-embed-*.f32` behind. It has none at any time now.
    #[test]
    fn a_scratch_layer_never_has_a_name_in_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let count = || std::fs::read_dir(dir.path()).unwrap().count();
        let mut l = ScratchLayer::new(dir.path()).unwrap();
        assert_eq!(count(), 0, "while open");
        l.push(&[1.0, -2.5, 3.25, 0.0, 7.0, 8.5]).unwrap();
        assert_eq!(count(), 0, "while written");
        let f = l.finish(3, 2).unwrap();
        assert_eq!(count(), 0, "once mapped");
        assert!(f.is_mapped());
        let Features::Dense { data, .. } = f else {
            panic!("dense rows")
        };
        assert_eq!(&data[..], &[1.0, -2.5, 3.25, 0.0, 7.0, 8.5]);
    }
}
