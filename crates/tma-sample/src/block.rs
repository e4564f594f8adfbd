//! Bipartite layer graphs.

use tma_graph::Csr;

/// A sampled bipartite layer graph: `num_dst` destination nodes, each with a list of source
/// nodes (local ids into this block's `num_src` sources). Destinations are the first `num_dst`
/// sources.
///
/// Shapes: `indptr: [num_dst + 1]` (u64), `indices: [nnz]` (u32, `< num_src`),
/// `src_degree: [num_src]`: each source node's **full** in-degree in the graph it was sampled
/// from (used by GCN normalisation; for a destination node `i`, `src_degree[i]` is its own degree,
/// so `sampled_i = indptr[i+1]-indptr[i]` may be smaller when the fanout cut it).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Block {
    /// Destination (output) nodes: local ids `0..num_dst`.
    pub num_dst: usize,
    /// Source (input) nodes: local ids `0..num_src`, `num_src >= num_dst`.
    pub num_src: usize,
    /// `[num_dst + 1]`: row offsets into `indices`.
    pub indptr: Vec<u64>,
    /// `[nnz]`: local source ids of each destination's (sampled) in-neighbours.
    pub indices: Vec<u32>,
    /// `[num_src]`: full in-degree of every source node in the sampled graph.
    pub src_degree: Vec<u32>,
}

/// Borrowed view of a [`Block`], or of a whole graph as a block (`num_dst == num_src == N`),
/// which is what exact full-neighbour layer-wise inference runs on without copying the graph.
#[derive(Clone, Copy, Debug)]
pub struct BlockView<'a> {
    /// See [`Block::num_dst`].
    pub num_dst: usize,
    /// See [`Block::num_src`].
    pub num_src: usize,
    /// See [`Block::indptr`].
    pub indptr: &'a [u64],
    /// See [`Block::indices`].
    pub indices: &'a [u32],
    /// See [`Block::src_degree`].
    pub src_degree: &'a [u32],
}

impl Block {
    /// Borrow as a [`BlockView`].
    pub fn view(&self) -> BlockView<'_> {
        BlockView {
            num_dst: self.num_dst,
            num_src: self.num_src,
            indptr: &self.indptr,
            indices: &self.indices,
            src_degree: &self.src_degree,
        }
    }
}

impl<'a> BlockView<'a> {
    /// The whole graph as one block: every node is both a destination and a source, with all
    /// its in-neighbours. `degrees` must be `graph.degrees()` (passed in so callers compute it once).
    pub fn full(graph: &'a Csr, degrees: &'a [u32]) -> BlockView<'a> {
        assert_eq!(degrees.len(), graph.num_nodes());
        BlockView {
            num_dst: graph.num_nodes(),
            num_src: graph.num_nodes(),
            indptr: &graph.indptr,
            indices: &graph.indices,
            src_degree: degrees,
        }
    }

    /// Sources of destination `i` (local ids).
    #[inline]
    pub fn neighbors(&self, i: usize) -> &'a [u32] {
        &self.indices[self.indptr[i] as usize..self.indptr[i + 1] as usize]
    }

    /// Number of arcs (`indices.len()`).
    pub fn num_edges(&self) -> usize {
        self.indices.len()
    }
}
