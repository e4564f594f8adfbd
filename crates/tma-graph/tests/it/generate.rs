//! SBM generator.

use tma_graph::{generate_sbm, Features, Labels, SbmConfig};

#[test]
fn sbm_default_shape_and_determinism() {
    let cfg = SbmConfig::default();
    let a = generate_sbm(&cfg);
    assert_eq!(a.name, "sbm");
    assert!(!a.directed);
    assert_eq!(a.num_nodes(), 10_000);
    // target 200,000 arcs; duplicates merged (< 2%)
    let arcs = a.num_edges();
    assert!(arcs <= 200_000 && arcs > 196_000, "{arcs}");
    assert_eq!(arcs % 2, 0);
    // symmetric, no self loops, no duplicates
    for v in 0..a.num_nodes() {
        let row = a.graph.neighbors(v);
        assert!(row.windows(2).all(|w| w[0] < w[1]));
        for &u in row {
            assert_ne!(u as usize, v);
            assert!(a
                .graph
                .neighbors(u as usize)
                .binary_search(&(v as u32))
                .is_ok());
        }
    }
    // homophily near p_in_ratio
    let Labels::Classes { y, num_classes } = &a.labels else {
        panic!()
    };
    assert_eq!(*num_classes, 8);
    let same = (0..a.num_nodes())
        .flat_map(|v| a.graph.neighbors(v).iter().map(move |&u| (u, v)))
        .filter(|&(u, v)| y[u as usize] == y[v])
        .count();
    let h = same as f64 / arcs as f64;
    assert!((h - 0.8).abs() < 0.02, "homophily {h}");
    // features
    let Features::Dense { dim, data, .. } = &a.features else {
        panic!()
    };
    assert_eq!(*dim, 64);
    assert_eq!(data.len(), 10_000 * 64);
    // split 60/20/20
    let s = a.split.as_ref().unwrap();
    assert_eq!(
        (s.train.len(), s.val.len(), s.test.len()),
        (6000, 2000, 2000)
    );
    // deterministic, including across thread counts
    let b = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| generate_sbm(&cfg));
    assert_eq!(a.graph, b.graph);
    assert_eq!(a.features, b.features);
    assert_eq!(a.labels, b.labels);
    assert_eq!(a.split, b.split);
    let c = generate_sbm(&SbmConfig { seed: 1, ..cfg });
    assert_ne!(a.graph, c.graph);
}

#[test]
fn sbm_features_are_class_correlated() {
    let a = generate_sbm(&SbmConfig {
        num_nodes: 2000,
        num_classes: 4,
        feature_dim: 16,
        feature_noise: 0.1,
        ..SbmConfig::default()
    });
    let Labels::Classes { y, .. } = &a.labels else {
        panic!()
    };
    let Features::Dense { data, .. } = &a.features else {
        panic!()
    };
    // two nodes of the same class are much closer than two of different classes
    let row = |v: usize| &data[v * 16..(v + 1) * 16];
    let dist = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum::<f32>();
    let v0 = 0;
    let same = (1..2000).find(|&v| y[v] == y[v0]).unwrap();
    let diff = (1..2000).find(|&v| y[v] != y[v0]).unwrap();
    assert!(dist(row(v0), row(same)) < 0.2 * dist(row(v0), row(diff)));
}

#[test]
fn sbm_tiny_edge_cases() {
    let a = generate_sbm(&SbmConfig {
        num_nodes: 1,
        ..SbmConfig::default()
    });
    assert_eq!(a.num_edges(), 0);
    let b = generate_sbm(&SbmConfig {
        num_nodes: 3,
        num_classes: 3,
        p_in_ratio: 1.0,
        avg_degree: 2.0,
        ..SbmConfig::default()
    });
    assert_eq!(b.num_nodes(), 3);
}

/// Scale check (run with `--ignored`): 1M nodes / ~20M arcs in seconds.
#[test]
#[ignore]
fn sbm_million_scale() {
    let t = std::time::Instant::now();
    let a = generate_sbm(&SbmConfig {
        num_nodes: 1_000_000,
        ..SbmConfig::default()
    });
    eprintln!("sbm 1M nodes, {} arcs in {:?}", a.num_edges(), t.elapsed());
    assert!(a.num_edges() > 19_900_000);
    let t = std::time::Instant::now();
    let ls = tma_graph::link_split(&a.graph, false, 0.001, 0.001, None, 1000, 0);
    eprintln!(
        "link_split: {} val, {} test, 1000 negatives each, in {:?}",
        ls.val_pos.len(),
        ls.test_pos.len(),
        t.elapsed()
    );
}
