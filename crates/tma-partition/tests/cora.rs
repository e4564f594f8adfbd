//! Partitions of the real Cora citation graph (2708 nodes, 10556 arcs, 7 classes), read from
//! `shared/datasets/planetoid_cora` with a minimal `.npy` (little-endian int64, C order) reader.
//! Skipped (passes with a note) when the dataset directory is absent.

use std::path::PathBuf;

use tma_partition::{
    build_parts, partition, partition_report, Csr, PartitionConfig, PartitionMethod,
};

fn dataset_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/datasets/planetoid_cora"
    ))
}

/// Read a little-endian int64 `.npy` file: (shape, data).
fn read_i64_npy(path: &PathBuf) -> (Vec<usize>, Vec<i64>) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(&bytes[..6], b"\x93NUMPY");
    let (header_len, start) = if bytes[6] == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        )
    };
    let header = std::str::from_utf8(&bytes[start..start + header_len]).unwrap();
    assert!(header.contains("'<i8'") && header.contains("'fortran_order': False"));
    let shape_str = header
        .split("'shape': (")
        .nth(1)
        .unwrap()
        .split(')')
        .next()
        .unwrap();
    let shape = shape_str
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let data = bytes[start + header_len..]
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (shape, data)
}

fn load_cora() -> Option<(Csr, Vec<i32>)> {
    let dir = dataset_dir();
    if !dir.join("edge_index.npy").exists() {
        eprintln!("skipping: {} not found", dir.display());
        return None;
    }
    let (shape, e) = read_i64_npy(&dir.join("edge_index.npy"));
    let m = shape[1];
    let src: Vec<u32> = e[..m].iter().map(|&x| x as u32).collect();
    let dst: Vec<u32> = e[m..].iter().map(|&x| x as u32).collect();
    let (_, y) = read_i64_npy(&dir.join("y.npy"));
    let g = Csr::from_edges(y.len(), &src, &dst);
    Some((g, y.iter().map(|&c| c as i32).collect()))
}

#[test]
fn cora_random_vs_super_vs_metis() {
    let Some((g, y)) = load_cora() else { return };
    assert_eq!(g.num_nodes(), 2708);
    assert_eq!(g.num_edges(), 10556);
    let cfg = |method| PartitionConfig {
        method,
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
