//! Compressed sparse row adjacency.

use crate::buf::Buf;

/// A node id in the whole (global) graph. Local ids inside a partition are plain `u32`
/// indices into that partition's arrays; converting goes through the partition book
/// (`tma_partition::Part::global_ids`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GlobalNodeId(pub u32);

/// Adjacency in CSR form. Row `v` holds the **in-neighbours** of `v`.
///
/// Shapes: `indptr: [num_nodes + 1]` (u64, monotone, `indptr[0] == 0`,
/// `indptr[num_nodes] == num_edges`), `indices: [num_edges]` (u32, each `< num_nodes`).
/// Neighbour lists are sorted ascending and hold no duplicates when built by [`Csr::from_edges`].
///
/// Both arrays are [`Buf`]s: owned, or read in place from a mapped file (a part of a partition
/// directory, a graph of the on-disk format); every reader sees slices either way.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Csr {
    /// Row offsets `[num_nodes + 1]`: row `v` is `indices[indptr[v]..indptr[v + 1]]`.
    pub indptr: Buf<u64>,
    /// In-neighbour ids `[num_edges]`, concatenated row by row.
    pub indices: Buf<u32>,
}

impl Csr {
    /// Drops this process's resident pages of mapped arrays (nothing for owned ones): after a
    /// streaming pass over a mapped graph, so the pass does not stay counted in the process's
    /// RSS. Reads afterwards see the same data (see [`crate::buf::SharedMap::release`]).
    pub fn release_pages(&self) {
        self.indptr.release_pages();
        self.indices.release_pages();
    }

    /// [`Csr::release_pages`] of rows `rows` only (their `indptr` entries and their
    /// neighbour lists, widened to whole pages): for a pass over rows in ascending order that
    /// drops what lies behind it. Reads the two bounding `indptr` entries.
    pub fn release_rows(&self, rows: std::ops::Range<usize>) {
        let n = self.num_nodes();
        let (a, b) = (rows.start.min(n), rows.end.min(n));
        if a >= b || !(self.indptr.is_mapped() || self.indices.is_mapped()) {
            return;
        }
        let (lo, hi) = (self.indptr[a] as usize, self.indptr[b] as usize);
        self.indptr.release_elems(a..b + 1);
        self.indices.release_elems(lo..hi);
    }

    /// A CSR of owned arrays (not checked: callers build valid ones).
    pub fn new(indptr: Vec<u64>, indices: Vec<u32>) -> Csr {
        Csr {
            indptr: indptr.into(),
            indices: indices.into(),
        }
    }

    /// Bytes of anonymous memory the arrays hold (0 for mapped arrays).
    pub fn heap_bytes(&self) -> usize {
        self.indptr.heap_bytes() + self.indices.heap_bytes()
    }

    /// Number of rows (nodes).
    pub fn num_nodes(&self) -> usize {
        self.indptr.len().saturating_sub(1)
    }

    /// Number of stored arcs.
    pub fn num_edges(&self) -> usize {
        self.indices.len()
    }

    /// In-neighbours of `v`.
    #[inline]
    pub fn neighbors(&self, v: usize) -> &[u32] {
        &self.indices[self.indptr[v] as usize..self.indptr[v + 1] as usize]
    }

    /// The first arc `u -> v` (in row order of `v`) whose reverse `v -> u` is missing, `None`
    /// when the graph is symmetric (as an undirected graph must be). Rows must be sorted
    /// (binary search). Rows are checked in parallel; the answer is the first in row order
    /// whatever the thread count. O(E log d).
    pub fn missing_reverse(&self) -> Option<(u32, u32)> {
        use rayon::prelude::*;
        (0..self.num_nodes()).into_par_iter().find_map_first(|v| {
            self.neighbors(v)
                .iter()
                .find(|&&u| {
                    self.neighbors(u as usize)
                        .binary_search(&(v as u32))
                        .is_err()
                })
                .map(|&u| (u, v as u32))
        })
    }

    /// In-degree of `v`.
    #[inline]
    pub fn degree(&self, v: usize) -> usize {
        (self.indptr[v + 1] - self.indptr[v]) as usize
    }

    /// In-degrees of all nodes, as u32 (degrees of one node fit in u32 even when the edge count does not).
    pub fn degrees(&self) -> Vec<u32> {
        self.indptr
            .windows(2)
            .map(|w| (w[1] - w[0]) as u32)
            .collect()
    }

    /// Build from arcs `(src, dst)`: row `dst` gets `src`. Sorts each row, removes duplicate
    /// arcs. Self-loops are kept if present (callers that must not have them filter first).
    ///
    /// # Panics
    /// If an endpoint is `>= num_nodes` (loaders validate ids before calling this).
    pub fn from_edges(num_nodes: usize, src: &[u32], dst: &[u32]) -> Csr {
        assert_eq!(src.len(), dst.len());
        let mut counts = vec![0u64; num_nodes + 1];
        for &d in dst {
            counts[d as usize + 1] += 1;
        }
        for i in 0..num_nodes {
            counts[i + 1] += counts[i];
        }
        let mut fill = counts.clone();
        let mut indices = vec![0u32; src.len()];
        for (&s, &d) in src.iter().zip(dst) {
            assert!((s as usize) < num_nodes, "source id {s} out of range");
            let p = &mut fill[d as usize];
            indices[*p as usize] = s;
            *p += 1;
        }
        // sort + dedup each row, compacting in place
        let mut out_ptr = vec![0u64; num_nodes + 1];
        let mut w = 0usize;
        for v in 0..num_nodes {
            let (a, b) = (counts[v] as usize, counts[v + 1] as usize);
            indices[a..b].sort_unstable();
            let mut last: Option<u32> = None;
            for r in a..b {
                let x = indices[r];
                if last != Some(x) {
                    indices[w] = x;
                    w += 1;
                    last = Some(x);
                }
            }
            out_ptr[v + 1] = w as u64;
        }
        indices.truncate(w);
        indices.shrink_to_fit();
        Csr::new(out_ptr, indices)
    }

    /// The node-induced subgraph on `nodes` (global ids into `self`, any order, no duplicates).
    /// Local id `i` is `nodes[i]`; arcs with an endpoint outside `nodes` are dropped.
    pub fn induced_subgraph(&self, nodes: &[u32]) -> Csr {
        const NONE: u32 = u32::MAX;
        let mut local = vec![NONE; self.num_nodes()];
        for (i, &g) in nodes.iter().enumerate() {
            local[g as usize] = i as u32;
        }
        let mut indptr = Vec::with_capacity(nodes.len() + 1);
        indptr.push(0u64);
        let mut indices = Vec::new();
        for &g in nodes {
            let start = indices.len();
            for &u in self.neighbors(g as usize) {
                let l = local[u as usize];
                if l != NONE {
                    indices.push(l);
                }
            }
            indices[start..].sort_unstable();
            indptr.push(indices.len() as u64);
        }
        Csr::new(indptr, indices)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_edges_sorts_and_dedups() {
        // arcs src->dst: 1->0, 2->0, 1->0 (dup), 0->2
        let g = Csr::from_edges(3, &[1, 2, 1, 0], &[0, 0, 0, 2]);
        assert_eq!(g.indptr, vec![0, 2, 2, 3]);
        assert_eq!(g.indices, vec![1, 2, 0]);
        assert_eq!(g.degrees(), vec![2, 0, 1]);
    }

    #[test]
    fn induced_subgraph_drops_outside_edges() {
        // undirected path 0-1-2-3
        let g = Csr::from_edges(4, &[0, 1, 1, 2, 2, 3], &[1, 0, 2, 1, 3, 2]);
        let s = g.induced_subgraph(&[2, 1]); // local 0 = global 2, local 1 = global 1
        assert_eq!(s.indptr, vec![0, 1, 2]);
        assert_eq!(s.indices, vec![1, 0]);
    }
}
