//! Synthetic graphs for scale tests: a stochastic block model with class-correlated features.

use rand::Rng;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;

use crate::csr::Csr;
use crate::dataset::{Dataset, Labels};
use crate::features::Features;
use crate::seed::{self, Purpose};
use crate::split::random_node_split;

/// Configuration of [`generate_sbm`].
#[derive(Clone, Debug, PartialEq)]
pub struct SbmConfig {
    /// Number of nodes `N` (default 10,000; at most `u32::MAX`).
    pub num_nodes: usize,
    /// Number of classes / blocks (default 8, must be >= 1).
    pub num_classes: usize,
    /// Target average degree, i.e. arcs per node (default 20). The graph gets about
    /// `N * avg_degree / 2` undirected edges = `N * avg_degree` stored arcs (slightly fewer
    /// after duplicate removal).
    pub avg_degree: f64,
    /// Fraction of a node's edges that stay inside its class (default 0.8; homophily).
    pub p_in_ratio: f64,
    /// Feature width (default 64).
    pub feature_dim: usize,
    /// Standard deviation of the Gaussian noise added to the class mean (default 1.0).
    pub feature_noise: f32,
    /// Seed; the output is a deterministic function of the config.
    pub seed: u64,
}

impl Default for SbmConfig {
    fn default() -> Self {
        SbmConfig {
            num_nodes: 10_000,
            num_classes: 8,
            avg_degree: 20.0,
            p_in_ratio: 0.8,
            feature_dim: 64,
            feature_noise: 1.0,
            seed: 0,
        }
    }
}

/// Edges generated per RNG chunk (fixed so the output does not depend on the thread count).
const EDGE_CHUNK: usize = 1 << 16;
/// Nodes per RNG chunk for features.
const NODE_CHUNK: usize = 1 << 12;

/// Generate an undirected stochastic block model dataset named `"sbm"`.
///
/// * **Classes**: each node gets a class uniformly at random ([`Labels::Classes`], no
///   unlabelled nodes).
/// * **Edges**: `round(N * avg_degree / 2)` edge draws; each picks `u` uniformly, then with
///   probability `p_in_ratio` a partner `v` uniformly from `u`'s class, otherwise uniformly from
///   the other classes. Self-loops are redrawn; both directions are stored; duplicates are merged
///   (so the arc count is slightly below `N * avg_degree`). Cost is linear in the number of
///   edges (no loop over node pairs), parallel over chunks of 65,536 draws.
/// * **Features**: dense `[N, feature_dim]`, `x_v = mu_{class(v)} + feature_noise * eps`, with
///   class means `mu_c ~ N(0, I)` and `eps ~ N(0, I)`.
/// * **Split**: random 60/20/20 ([`random_node_split`] with `cfg.seed`, the split a run with
///   that seed would make).
///
/// Random streams ([`crate::seed`]): classes, then class means, from
/// [`Purpose::GeneratorClasses`]; edge draws per chunk of 65,536 from
/// [`Purpose::GeneratorEdges`]; feature noise per chunk of 4096 nodes from
/// [`Purpose::GeneratorFeatures`]. Deterministic in `cfg` (independent of the rayon thread
/// count).
///
/// # Panics
/// If `num_classes == 0`, `num_nodes > u32::MAX`, or `p_in_ratio` is not in `[0, 1]`.
pub fn generate_sbm(cfg: &SbmConfig) -> Dataset {
    assert!(cfg.num_classes >= 1, "num_classes must be >= 1");
    assert!(
        cfg.num_nodes <= u32::MAX as usize,
        "num_nodes exceeds u32 ids"
    );
    assert!(
        (0.0..=1.0).contains(&cfg.p_in_ratio),
        "p_in_ratio must be in [0, 1]"
    );
    let n = cfg.num_nodes;
    let c = cfg.num_classes;
    let mut rng = seed::rng(cfg.seed, Purpose::GeneratorClasses);

    // classes and members
    let y: Vec<i32> = (0..n).map(|_| rng.random_range(0..c) as i32).collect();
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); c];
    for (v, &k) in y.iter().enumerate() {
        members[k as usize].push(v as u32);
    }

    // edges
    let m = if n < 2 {
        0
    } else {
        (n as f64 * cfg.avg_degree / 2.0).round().max(0.0) as usize
    };
    let num_chunks = m.div_ceil(EDGE_CHUNK);
    let edge_seed = seed::derive(cfg.seed, Purpose::GeneratorEdges);
    let chunks: Vec<Vec<(u32, u32)>> = (0..num_chunks)
        .into_par_iter()
        .map(|ci| {
            let mut rng = seed::chunk_rng(edge_seed, ci as u64);
            let count = EDGE_CHUNK.min(m - ci * EDGE_CHUNK);
            let mut out = Vec::with_capacity(count);
            while out.len() < count {
                let u = rng.random_range(0..n as u32);
                let cu = y[u as usize] as usize;
                let mem = &members[cu];
                let v = if mem.len() < 2 {
                    rng.random_range(0..n as u32)
                } else if rng.random::<f64>() < cfg.p_in_ratio || c == 1 {
                    mem[rng.random_range(0..mem.len())]
                } else {
                    let mut v = rng.random_range(0..n as u32);
                    let mut tries = 0;
                    while y[v as usize] as usize == cu && tries < 64 {
                        v = rng.random_range(0..n as u32);
                        tries += 1;
                    }
                    v
                };
                if u != v {
                    out.push((u, v));
                }
            }
            out
        })
        .collect();
    let mut src = Vec::with_capacity(2 * m);
    let mut dst = Vec::with_capacity(2 * m);
    for ch in &chunks {
        for &(u, v) in ch {
            src.push(u);
            dst.push(v);
            src.push(v);
            dst.push(u);
        }
    }
    drop(chunks);
    let graph = Csr::from_edges(n, &src, &dst);
    drop((src, dst));

    // features
    let d = cfg.feature_dim;
    let means: Vec<f32> = (0..c * d)
        .map(|_| {
            let z: f32 = StandardNormal.sample(&mut rng);
            z
        })
        .collect();
    let mut data = vec![0f32; n * d];
    let feature_seed = seed::derive(cfg.seed, Purpose::GeneratorFeatures);
    if d > 0 {
        data.par_chunks_mut(NODE_CHUNK * d)
            .enumerate()
            .for_each(|(ci, buf)| {
                let mut rng = seed::chunk_rng(feature_seed, ci as u64);
                for (k, row) in buf.chunks_mut(d).enumerate() {
                    let cls = y[ci * NODE_CHUNK + k] as usize;
                    let mu = &means[cls * d..(cls + 1) * d];
                    for (x, &m) in row.iter_mut().zip(mu) {
                        let z: f32 = StandardNormal.sample(&mut rng);
                        *x = m + cfg.feature_noise * z;
                    }
                }
            });
    }

    let labels = Labels::Classes { y, num_classes: c };
    let split = random_node_split(&labels, n, 0.6, 0.2, cfg.seed);
    Dataset {
        name: "sbm".to_string(),
        directed: false,
        graph,
        features: Features::Dense {
            num_nodes: n,
            dim: d,
            data: data.into(),
        },
        structural_features: false,
        labels,
        split: Some(split),
        removed: Default::default(),
        num_splits: 0,
        link_split: None,
    }
}
