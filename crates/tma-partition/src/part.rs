//! Cutting a part out of the graph: the node-induced subgraph of one part.

use rayon::prelude::*;
use tma_graph::Csr;

use crate::Partition;

/// One trainer's data: the node-induced subgraph on a part's nodes.
///
/// Local node `i` is global node `global_ids[i]` (sorted ascending, so local order follows global
/// order). `graph` has `global_ids.len()` nodes; row `i` holds the local ids of `i`'s
/// in-neighbours **inside the part**, sorted ascending; arcs to or from other parts are dropped.
/// Features / labels of the part are `features.gather(&global_ids)` etc.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// Part id in `0..num_assigned_parts`.
    pub id: usize,
    /// `[num_local_nodes]`: local id -> global id, sorted ascending.
    pub global_ids: Vec<u32>,
    /// The induced subgraph in local ids (`num_nodes() == global_ids.len()`).
    pub graph: Csr,
}

impl Part {
    /// Number of nodes in the part.
    pub fn num_nodes(&self) -> usize {
        self.global_ids.len()
    }

    /// Number of arcs kept in the part.
    pub fn num_edges(&self) -> usize {
        self.graph.num_edges()
    }

    /// Local id of global node `g`, if `g` is in this part (binary search, `O(log n)`).
    pub fn local_id(&self, g: u32) -> Option<u32> {
        self.global_ids.binary_search(&g).ok().map(|i| i as u32)
    }
}

/// Local id of every node within its own part: the node's rank among its part's nodes in global
/// order (`[num_nodes]`).
fn local_ids(partition: &Partition) -> Vec<u32> {
    let mut next = vec![0u32; partition.num_assigned_parts];
    partition
        .assignment
        .iter()
        .map(|&p| {
            let l = next[p as usize];
            next[p as usize] += 1;
            l
        })
        .collect()
}

/// The induced subgraph of part `p` given precomputed local ids. Filtering a sorted neighbour
/// list keeps it sorted, since local ids grow with global ids inside a part.
fn build_with(graph: &Csr, partition: &Partition, local: &[u32], p: usize) -> Part {
    let global_ids = partition.part_nodes(p);
    let pid = p as u32;
    let a = &partition.assignment;
    let mut indptr = Vec::with_capacity(global_ids.len() + 1);
    indptr.push(0u64);
    let mut indices = Vec::new();
    // on a mapped graph, the rows read (ascending) are released every 2^15 nodes, so
    // building a part of a graph larger than memory does not leave every page it read
    // counted in the process's RSS (no-op for owned arrays)
    let mut behind = 0usize;
    for (i, &g) in global_ids.iter().enumerate() {
        if i % (1 << 15) == 0 && i > 0 {
            graph.release_rows(behind..g as usize);
            behind = g as usize;
        }
        indices.extend(
            graph
                .neighbors(g as usize)
                .iter()
                .filter(|&&u| a[u as usize] == pid)
                .map(|&u| local[u as usize]),
        );
        indptr.push(indices.len() as u64);
    }
    if let Some(&last) = global_ids.last() {
        graph.release_rows(behind..last as usize + 1);
    }
    indices.shrink_to_fit();
    Part {
        id: p,
        global_ids,
        graph: Csr::new(indptr, indices),
    }
}

/// Build part `p` of `partition` on `graph`: its sorted global ids and node-induced subgraph
/// (cross-part arcs dropped). Row order and neighbour order are those of `graph`
/// (neighbour lists stay sorted if they were).
///
/// Cost: `O(num_nodes + arcs of the part's nodes)` time, `num_nodes` u32 scratch.
///
/// # Panics
/// If `graph.num_nodes() != partition.assignment.len()`.
pub fn build_part(graph: &Csr, partition: &Partition, p: usize) -> Part {
    assert_eq!(
        graph.num_nodes(),
        partition.assignment.len(),
        "partition is for a graph of a different size"
    );
    let local = local_ids(partition);
    build_with(graph, partition, &local, p)
}

/// Build the given parts (e.g. `&partition.kept_parts()`) in parallel (rayon), sharing one
/// local-id table. Same result as calling [`build_part`] for each.
///
/// # Panics
/// If `graph.num_nodes() != partition.assignment.len()`.
pub fn build_parts(graph: &Csr, partition: &Partition, parts: &[usize]) -> Vec<Part> {
    assert_eq!(
        graph.num_nodes(),
        partition.assignment.len(),
        "partition is for a graph of a different size"
    );
    let local = local_ids(partition);
    parts
        .par_iter()
        .map(|&p| build_with(graph, partition, &local, p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PartitionConfig, PartitionMethod};

    fn manual(assignment: Vec<u32>, parts: usize) -> Partition {
        Partition {
            config: PartitionConfig {
                method: PartitionMethod::Random,
                clustering: crate::Clustering::Auto,
                num_parts: parts,
                drop_parts: 0,
                seed: 0,
            },
            assignment,
            num_assigned_parts: parts,
            notes: Default::default(),
        }
    }

    /// Regression (issue 10, 1.3B arcs): building a part of a mapped graph left every page of
    /// `indices` it read resident until the part was done (5.2 GB of the process's RSS at 1.3B
    /// arcs, a random part's rows being on every page). Now released every 2^15 nodes.
    #[test]
    fn building_a_part_of_a_mapped_graph_releases_the_rows_behind() {
        use tma_graph::{Buf, SharedMap};
        let (n, deg) = (1usize << 20, 16usize);
        let indptr: Vec<u64> = (0..=n as u64).map(|v| v * deg as u64).collect();
        let indices: Vec<u32> = (0..n * deg)
            .map(|i| ((i / deg) as u32).wrapping_add(2 * (i % deg) as u32 + 2) % n as u32)
            .map(|u| u & !1)
            .collect();
        let tmp = tempfile::tempdir().unwrap();
        let write = |name: &str, b: Vec<u8>| {
            let p = tmp.path().join(name);
            std::fs::write(&p, b).unwrap();
            SharedMap::open(&p).unwrap()
        };
        let ip = write(
            "indptr",
            indptr.iter().flat_map(|x| x.to_le_bytes()).collect(),
        );
        let ix = write(
            "indices",
            indices.iter().flat_map(|x| x.to_le_bytes()).collect(),
        );
        let mapped = Csr {
            indptr: Buf::mapped(ip, 0, n + 1).unwrap(),
            indices: Buf::mapped(ix, 0, n * deg).unwrap(),
        };
        let owned = Csr::new(indptr, indices);
        // even nodes in part 0: its rows are on every page of the 64 MiB `indices`
        let p = manual((0..n).map(|v| (v % 2) as u32).collect(), 2);
        let a = build_part(&mapped, &p, 0);
        let resident = tma_graph::buf::mapped_resident_bytes(tmp.path()).unwrap();
        assert!(
            resident <= 8 << 20,
            "{resident} bytes of the graph resident"
        );
        assert_eq!(a.graph, build_part(&owned, &p, 0).graph);
        assert_eq!(a.graph.num_edges(), (n / 2) * deg);
    }

    #[test]
    fn build_part_exact_local_csr() {
        // directed arcs src->dst on 6 nodes
        let src = [0, 2, 4, 1, 5, 3, 0, 4];
        let dst = [2, 0, 2, 3, 3, 5, 4, 0];
        let g = Csr::from_edges(6, &src, &dst);
        // part 0 = {0, 2, 4}, part 1 = {1, 3, 5}
        let p = manual(vec![0, 1, 0, 1, 0, 1], 2);
        let a = build_part(&g, &p, 0);
        assert_eq!(a.id, 0);
        assert_eq!(a.global_ids, vec![0, 2, 4]);
        // rows: 0 <- {2,4} ; 2 <- {0,4} ; 4 <- {0}
        assert_eq!(a.graph.indptr, vec![0, 2, 4, 5]);
        assert_eq!(a.graph.indices, vec![1, 2, 0, 2, 0]);
        let b = build_part(&g, &p, 1);
        assert_eq!(b.global_ids, vec![1, 3, 5]);
        // rows: 1 <- {} ; 3 <- {1,5} ; 5 <- {3}
        assert_eq!(b.graph.indptr, vec![0, 0, 2, 3]);
        assert_eq!(b.graph.indices, vec![0, 2, 1]);
        assert_eq!(b.local_id(5), Some(2));
        assert_eq!(b.local_id(4), None);
        // matches tma-graph's induced_subgraph and build_parts
        assert_eq!(a.graph, g.induced_subgraph(&a.global_ids));
        assert_eq!(build_parts(&g, &p, &[0, 1]), vec![a, b]);
    }

    #[test]
    fn cross_part_edges_dropped_count() {
        let g = crate::method::tests::test_graph(800);
        let p = crate::partition(
            &g,
            &PartitionConfig {
                method: PartitionMethod::Random,
                clustering: crate::Clustering::Auto,
                num_parts: 4,
                drop_parts: 0,
                seed: 3,
            },
        )
        .unwrap();
        let parts = build_parts(&g, &p, &p.kept_parts());
        let kept: usize = parts.iter().map(|x| x.num_edges()).sum();
        let expect = (0..800)
            .flat_map(|v| g.neighbors(v).iter().map(move |&u| (u, v)))
            .filter(|&(u, v)| p.assignment[u as usize] == p.assignment[v])
            .count();
        assert_eq!(kept, expect);
        for part in &parts {
            assert_eq!(part.graph, g.induced_subgraph(&part.global_ids));
        }
    }
}
