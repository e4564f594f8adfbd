//! Exact L-hop neighbourhoods for inference restricted to the nodes an evaluation needs:
//! [`full_blocks`] builds the full-neighbour blocks of a set of seeds (what an `L`-layer model
//! reads to compute them exactly), and [`HopChunks`] cuts a seed list into consecutive chunks
//! whose blocks stay within a caller's size limit, counting each chunk's blocks before they
//! are built.

use std::ops::Range;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tma_graph::Csr;

use crate::{MiniBatch, NeighborSampler};

/// The exact `layers`-hop blocks of `seeds` (every in-neighbour of every destination, in CSR
/// order): a [`MiniBatch`] as [`NeighborSampler::sample`] builds it with every fanout
/// `usize::MAX`. Deterministic (no randomness is involved).
///
/// # Panics
/// As [`NeighborSampler::sample`] (a seed out of range or repeated).
pub fn full_blocks(graph: &Csr, degrees: &[u32], seeds: &[u32], layers: usize) -> MiniBatch {
    // with fanout = all, the sampler draws one u64 per hop and never uses it
    let mut unused = ChaCha8Rng::seed_from_u64(0);
    NeighborSampler::new(vec![usize::MAX; layers]).sample(graph, degrees, seeds, &mut unused)
}

/// Sizes of the exact blocks of a seed set, input layer first (the order of
/// [`MiniBatch::blocks`]): block `l` has `src[l]` source nodes, `dst[l]` destination nodes and
/// `arcs[l]` arcs; `src[0]` is the number of input nodes and `dst[layers - 1]` the number of
/// (distinct) seeds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HopCounts {
    /// Source nodes of each block.
    pub src: Vec<u64>,
    /// Destination nodes of each block.
    pub dst: Vec<u64>,
    /// Arcs of each block.
    pub arcs: Vec<u64>,
}

impl HopCounts {
    /// Number of blocks (layers).
    pub fn layers(&self) -> usize {
        self.src.len()
    }
}

/// "Not reached" in the hop-distance marker.
const FAR: u8 = u8::MAX;

/// Cuts `seeds` into consecutive chunks (an iterator of [`HopChunk`]s, in order, covering every
/// seed once) such that each chunk's exact `layers`-hop blocks satisfy `fits`: seeds are added
/// one at a time while `fits(&counts)` holds for the chunk with the new seed; the first seed
/// that breaks it starts the next chunk. A single seed whose blocks alone break it forms a
/// chunk of its own (the only way to compute it exactly).
///
/// The counts are exact: a breadth-first search from each added seed to depth `layers` over
/// the in-neighbour lists, keeping each reached node's distance to the chunk (a node at
/// distance `d` is a destination of the blocks of hops `d..layers` from the seeds and a source
/// of those of hops `d-1..layers`). Cost: each node of a chunk's neighbourhood is visited at most
/// `layers + 1` times (once per improvement of its distance), plus its in-arcs each time it is
/// expanded; memory: one byte per graph node and the chunk's reached nodes.
pub struct HopChunks<'g, F> {
    graph: &'g Csr,
    seeds: &'g [u32],
    layers: usize,
    fits: F,
    pos: usize,
    /// Distance of every node to the current chunk's seeds (`FAR`: not reached).
    dist: Vec<u8>,
    /// Nodes whose `dist` the current chunk set (to reset them).
    touched: Vec<u32>,
    /// `cnt[d]`, `deg[d]`: nodes at distance exactly `d` and their summed in-degree.
    cnt: Vec<u64>,
    deg: Vec<u64>,
    /// Changes made by the seed being added: (node, previous distance).
    undo: Vec<(u32, u8)>,
    queue: std::collections::VecDeque<(u32, u8)>,
}

/// One chunk of [`HopChunks`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HopChunk {
    /// Positions of the chunk's seeds in the seed list.
    pub seeds: Range<usize>,
    /// Sizes of the chunk's exact blocks.
    pub counts: HopCounts,
}

impl<'g, F: FnMut(&HopCounts) -> bool> HopChunks<'g, F> {
    /// Chunks of `seeds` (graph ids `< graph.num_nodes()`) for a `layers`-layer model
    /// (`1..=254`), each within `fits`.
    ///
    /// # Panics
    /// If `layers` is 0 or above 254, or a seed is out of range.
    pub fn new(graph: &'g Csr, seeds: &'g [u32], layers: usize, fits: F) -> Self {
        assert!(
            (1..FAR as usize).contains(&layers),
            "layers must be in 1..=254"
        );
        HopChunks {
            graph,
            seeds,
            layers,
            fits,
            pos: 0,
            dist: vec![FAR; graph.num_nodes()],
            touched: Vec::new(),
            cnt: vec![0; layers + 1],
            deg: vec![0; layers + 1],
            undo: Vec::new(),
            queue: Default::default(),
        }
    }

    /// The current chunk's block sizes.
    fn counts(&self) -> HopCounts {
        let layers = self.layers;
        // hop h from the seeds (block layers-1-h): destinations at distance <= h, sources at
        // distance <= h+1, arcs = in-degrees of the destinations
        let (mut c, mut a) = (0u64, 0u64);
        let mut upto_cnt = Vec::with_capacity(layers + 1);
        let mut upto_deg = Vec::with_capacity(layers + 1);
        for d in 0..=layers {
            c += self.cnt[d];
            a += self.deg[d];
            upto_cnt.push(c);
            upto_deg.push(a);
        }
        let mut out = HopCounts::default();
        for l in 0..layers {
            let h = layers - 1 - l;
            out.src.push(upto_cnt[h + 1]);
            out.dst.push(upto_cnt[h]);
            out.arcs.push(upto_deg[h]);
        }
        out
    }

    /// Adds seed `s` to the current chunk (its changes recorded in `undo`).
    fn add(&mut self, s: u32) {
        assert!(
            (s as usize) < self.dist.len(),
            "seed {s} out of range (num_nodes {})",
            self.dist.len()
        );
        self.undo.clear();
        self.queue.clear();
        self.queue.push_back((s, 0));
        while let Some((v, d)) = self.queue.pop_front() {
            let old = self.dist[v as usize];
            if old <= d {
                continue;
            }
            let deg = self.graph.degree(v as usize) as u64;
            if old == FAR {
                self.touched.push(v);
            } else {
                self.cnt[old as usize] -= 1;
                self.deg[old as usize] -= deg;
            }
            self.undo.push((v, old));
            self.dist[v as usize] = d;
            self.cnt[d as usize] += 1;
            self.deg[d as usize] += deg;
            if (d as usize) < self.layers {
                for &u in self.graph.neighbors(v as usize) {
                    if self.dist[u as usize] > d + 1 {
                        self.queue.push_back((u, d + 1));
                    }
                }
            }
        }
    }

    /// Reverts the last [`HopChunks::add`].
    fn revert(&mut self) {
        while let Some((v, old)) = self.undo.pop() {
            let deg = self.graph.degree(v as usize) as u64;
            let d = self.dist[v as usize] as usize;
            self.cnt[d] -= 1;
            self.deg[d] -= deg;
            self.dist[v as usize] = old;
            if old != FAR {
                self.cnt[old as usize] += 1;
                self.deg[old as usize] += deg;
            }
        }
    }
}

impl<F: FnMut(&HopCounts) -> bool> Iterator for HopChunks<'_, F> {
    type Item = HopChunk;

    fn next(&mut self) -> Option<HopChunk> {
        if self.pos >= self.seeds.len() {
            return None;
        }
        let start = self.pos;
        let mut counts = HopCounts::default();
        while self.pos < self.seeds.len() {
            self.add(self.seeds[self.pos]);
            let c = self.counts();
            if self.pos > start && !(self.fits)(&c) {
                self.revert();
                break;
            }
            counts = c;
            self.pos += 1;
        }
        for v in self.touched.drain(..) {
            self.dist[v as usize] = FAR;
        }
        self.cnt.fill(0);
        self.deg.fill(0);
        Some(HopChunk {
            seeds: start..self.pos,
            counts,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path 0 <- 1 <- 2 <- 3 <- 4 (row v lists v's in-neighbour v+1) plus 5 <- 0.
    fn path() -> Csr {
        // arcs (src -> dst): 1->0, 2->1, 3->2, 4->3, 0->5
        Csr::from_edges(6, &[1, 2, 3, 4, 0], &[0, 1, 2, 3, 5])
    }

    fn counts_of(mb: &MiniBatch) -> HopCounts {
        HopCounts {
            src: mb.blocks.iter().map(|b| b.num_src as u64).collect(),
            dst: mb.blocks.iter().map(|b| b.num_dst as u64).collect(),
            arcs: mb.blocks.iter().map(|b| b.indices.len() as u64).collect(),
        }
    }

    #[test]
    fn counts_equal_the_built_blocks() {
        let g = path();
        let deg = g.degrees();
        // one chunk for everything: counts equal the full blocks' sizes
        for seeds in [vec![0u32], vec![5], vec![0, 2], vec![5, 3, 1]] {
            for layers in 1..4 {
                let chunks: Vec<HopChunk> = HopChunks::new(&g, &seeds, layers, |_| true).collect();
                assert_eq!(chunks.len(), 1);
                assert_eq!(chunks[0].seeds, 0..seeds.len());
                let mb = full_blocks(&g, &deg, &seeds, layers);
                assert_eq!(chunks[0].counts, counts_of(&mb), "{seeds:?} {layers}");
            }
        }
        // seed 5, 2 layers: 5 <- 0 <- 1: block (input first) 0: dst {5,0} src {5,0,1} 2 arcs
        let c = &HopChunks::new(&g, &[5], 2, |_| true).next().unwrap().counts;
        assert_eq!(
            (c.src.clone(), c.dst.clone(), c.arcs.clone()),
            (vec![3, 2], vec![2, 1], vec![2, 1])
        );
    }

    #[test]
    fn distance_improvement_is_counted_once() {
        let g = path();
        // seed 0 reaches 2 at distance 2; seed 2 then improves it to 0 (input set {0,..,4})
        let mut it = HopChunks::new(&g, &[0, 2], 2, |_| true);
        let c = it.next().unwrap().counts;
        let mb = full_blocks(&g, &g.degrees(), &[0, 2], 2);
        assert_eq!(c, counts_of(&mb));
        assert_eq!((c.src[0], c.dst[0], c.dst[1]), (5, 4, 2));
    }

    #[test]
    fn chunks_respect_the_limit_and_cover_every_seed() {
        let g = path();
        let deg = g.degrees();
        let seeds = [0u32, 4, 2, 5, 1, 3];
        // at most 3 input nodes per chunk (2 layers)
        let chunks: Vec<HopChunk> = HopChunks::new(&g, &seeds, 2, |c| c.src[0] <= 3).collect();
        let mut covered = 0;
        for ch in &chunks {
            assert_eq!(ch.seeds.start, covered);
            covered = ch.seeds.end;
            let mb = full_blocks(&g, &deg, &seeds[ch.seeds.clone()], 2);
            assert_eq!(ch.counts, counts_of(&mb));
            assert!(ch.counts.src[0] <= 3, "{ch:?}");
        }
        assert_eq!(covered, seeds.len());
        // 0 -> {0,1,2}; 4 would add 4 (4 nodes) -> new chunk; {4}; 2 -> {2,3,4} + 4 = {2,3,4}
        assert_eq!(
            chunks.iter().map(|c| c.seeds.clone()).collect::<Vec<_>>(),
            vec![0..1, 1..3, 3..4, 4..5, 5..6]
        );
        // a seed too big on its own still forms a chunk
        let one: Vec<HopChunk> = HopChunks::new(&g, &[0, 1], 2, |_| false).collect();
        assert_eq!(one.len(), 2);
        assert_eq!(one[0].counts.src[0], 3);
    }
}
