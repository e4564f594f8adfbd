//! Calling METIS (through the `metis` crate, bundled C source) on a [`Csr`] graph.

use std::sync::Mutex;

use metis::Idx;
use rayon::prelude::*;
use tma_graph::CsrRef;

use crate::PartitionError;

/// METIS' bundled GKlib keeps some allocator state in globals; we never run two METIS calls at
/// once in one process (they are single-threaded anyway).
static METIS_LOCK: Mutex<()> = Mutex::new(());

/// A symmetric graph without self-loops in METIS' `xadj` / `adjncy` form (32-bit `idx_t`).
pub(crate) struct MetisGraph {
    pub xadj: Vec<Idx>,
    pub adjncy: Vec<Idx>,
}

/// Symmetrize `graph` (arc `u -> v` adds both `u -> v` and `v -> u`), drop self-loops and duplicate
/// arcs, and convert to METIS' 32-bit arrays.
///
/// Memory: `2 * num_edges` 32-bit arcs before deduplication, plus `num_nodes + 1` offsets.
///
/// # Errors
/// [`PartitionError::TooLargeForMetis`] if the node count or the symmetric arc count does not fit
/// in `idx_t` (`i32`).
pub(crate) fn symmetrize(graph: CsrRef<'_>) -> Result<MetisGraph, PartitionError> {
    let n = graph.num_nodes();
    let too_large = |arcs: usize| PartitionError::TooLargeForMetis {
        num_nodes: n,
        num_arcs: arcs,
    };
    let max = Idx::MAX as usize;
    if n >= max || graph.num_edges() >= max {
        return Err(too_large(2 * graph.num_edges()));
    }
    // Count arcs per row in both directions (self-loops excluded).
    let mut counts = vec![0usize; n + 1];
    for v in 0..n {
        for &u in graph.neighbors(v) {
            if u as usize != v {
                counts[v + 1] += 1;
                counts[u as usize + 1] += 1;
            }
        }
    }
    for i in 0..n {
        counts[i + 1] += counts[i];
    }
    let total = counts[n];
    if total >= max {
        return Err(too_large(total));
    }
    let mut fill = counts.clone();
    let mut adj = vec![0 as Idx; total];
    for v in 0..n {
        for &u in graph.neighbors(v) {
            let u = u as usize;
            if u != v {
                adj[fill[v]] = u as Idx;
                fill[v] += 1;
                adj[fill[u]] = v as Idx;
                fill[u] += 1;
            }
        }
    }
    drop(fill);
    // Sort + dedup every row in parallel; record the deduplicated row lengths.
    let mut rows: Vec<&mut [Idx]> = Vec::with_capacity(n);
    let mut rest: &mut [Idx] = &mut adj;
    for v in 0..n {
        let (row, tail) = rest.split_at_mut(counts[v + 1] - counts[v]);
        rows.push(row);
        rest = tail;
    }
    let lens: Vec<usize> = rows
        .into_par_iter()
        .map(|row| {
            row.sort_unstable();
            let mut w = 0;
            for r in 0..row.len() {
                if w == 0 || row[w - 1] != row[r] {
                    row[w] = row[r];
                    w += 1;
                }
            }
            w
        })
        .collect();
    // Compact in place.
    let mut xadj = Vec::with_capacity(n + 1);
    xadj.push(0 as Idx);
    let mut w = 0usize;
    for v in 0..n {
        let start = counts[v];
        adj.copy_within(start..start + lens[v], w);
        w += lens[v];
        xadj.push(w as Idx);
    }
    adj.truncate(w);
    adj.shrink_to_fit();
    Ok(MetisGraph { xadj, adjncy: adj })
}

/// Fold a 64-bit seed into METIS' non-negative 32-bit `seed` option.
fn metis_seed(seed: u64) -> Idx {
    ((seed ^ (seed >> 32)) & 0x7fff_ffff) as Idx
}

/// METIS k-way partition of `g` into `nparts` parts. `vwgt` (one weight per vertex, all > 0) is
/// optional; without it every vertex weighs 1. Returns the part id of every vertex.
/// `nparts == 1` is answered without calling METIS (all zeros).
pub(crate) fn part_kway(
    g: &MetisGraph,
    nparts: usize,
    vwgt: Option<&[Idx]>,
    seed: u64,
) -> Result<Vec<u32>, PartitionError> {
    let n = g.xadj.len() - 1;
    if nparts <= 1 || n == 0 {
        return Ok(vec![0; n]);
    }
    let nparts_idx = Idx::try_from(nparts).map_err(|_| PartitionError::TooLargeForMetis {
        num_nodes: n,
        num_arcs: g.adjncy.len(),
    })?;
    let mut part = vec![0 as Idx; n];
    {
        let _guard = METIS_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        let mut mg = metis::Graph::new(1, nparts_idx, &g.xadj, &g.adjncy)
            .map_err(|e| PartitionError::Metis(e.to_string()))?
            .set_option(metis::option::Seed(metis_seed(seed)));
        if let Some(w) = vwgt {
            mg = mg.set_vwgt(w);
        }
        mg.part_kway(&mut part)
            .map_err(|e| PartitionError::Metis(e.to_string()))?;
    }
    Ok(part.into_iter().map(|p| p as u32).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tma_graph::Csr;

    #[test]
    fn symmetrize_directed_with_loops_and_dups() {
        // arcs src->dst: 1->0, 2->0, 0->1 (reverse of 1->0), 2->2 (self loop)
        let g = Csr::from_edges(3, &[1, 2, 0, 2], &[0, 0, 1, 2]);
        let m = symmetrize(g.view()).unwrap();
        assert_eq!(m.xadj, vec![0, 2, 3, 4]);
        assert_eq!(m.adjncy, vec![1, 2, 0, 0]);
    }
}
