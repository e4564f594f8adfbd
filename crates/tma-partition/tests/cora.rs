//! Partitions of the real Cora citation graph (2708 nodes, 10556 arcs, 7 classes), read from
//! `../shared/datasets/planetoid_cora` (relative to the repository root) with the workspace's
//! `.npy` codec. Fails, saying what is missing, when the dataset directory is absent.

use std::path::{Path, PathBuf};

use tma_graph::npy;
use tma_partition::{
    build_parts, partition, partition_report, Csr, PartitionConfig, PartitionMethod,
};

/// `../shared/datasets/planetoid_cora`; panics naming the path when it is missing.
fn dataset_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets/planetoid_cora");
    assert!(
        dir.join("edge_index.npy").is_file(),
        "missing {}: this test needs the shared real datasets at ../shared/datasets next to the \
         repository root (CI provides them; layout in docs/dataset-format.md); copy or link them there",
        dir.display()
    );
    dir
}

fn load_cora() -> (Csr, Vec<i32>) {
    let dir = dataset_dir();
    let e = npy::read::<i64>(&dir.join("edge_index.npy"), &[Some(2), None]).unwrap();
    let m = e.shape[1];
    let src: Vec<u32> = e.data[..m].iter().map(|&x| x as u32).collect();
    let dst: Vec<u32> = e.data[m..].iter().map(|&x| x as u32).collect();
    let y = npy::read::<i64>(&dir.join("y.npy"), &[None]).unwrap().data;
    let g = Csr::from_edges(y.len(), &src, &dst);
    (g, y.iter().map(|&c| c as i32).collect())
}

#[test]
fn cora_random_vs_super_vs_metis() {
    let (g, y) = load_cora();
    assert_eq!(g.num_nodes(), 2708);
    assert_eq!(g.num_edges(), 10556);
    let cfg = |method| PartitionConfig {
        method,
        clustering: tma_partition::Clustering::Auto,
        num_parts: 4,
        drop_parts: 0,
        seed: 0,
    };
    let mut reports = Vec::new();
    for method in [
        PartitionMethod::Random,
        PartitionMethod::SuperNode {
            num_super_nodes: 200,
        },
        PartitionMethod::Metis,
    ] {
        let p = partition(&g, &cfg(method)).unwrap();
        let r = partition_report(&g, &p, Some((&y, 7)));
        eprintln!("{r}");
        let parts = build_parts(&g, &p, &p.kept_parts());
        let kept: usize = parts.iter().map(|x| x.num_edges()).sum();
        assert_eq!(
            kept,
            (r.total_edge_fraction_kept * 10556.0).round() as usize
        );
        assert_eq!(parts.iter().map(|x| x.num_nodes()).sum::<usize>(), 2708);
        reports.push(r);
    }
    let (random, sup, metis) = (&reports[0], &reports[1], &reports[2]);
    // Random keeps about 1/M of the edges; min-cut keeps most; super-nodes in between.
    assert!((random.total_edge_fraction_kept - 0.25).abs() < 0.03);
    assert!(metis.total_edge_fraction_kept > 0.8);
    assert!(sup.total_edge_fraction_kept > random.total_edge_fraction_kept);
    assert!(sup.total_edge_fraction_kept < metis.total_edge_fraction_kept);
    // The paper's point: random parts' label distributions match the whole graph's, METIS' don't.
    let (lr, lm) = (
        random.mean_label_divergence.unwrap(),
        metis.mean_label_divergence.unwrap(),
    );
    assert!(lr < 0.01, "random label JS {lr}");
    assert!(lm > 5.0 * lr, "metis label JS {lm} vs random {lr}");
}
