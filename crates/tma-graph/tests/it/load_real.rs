//! The loader on the real datasets in `../shared/datasets` (the tests fail naming the missing
//! directory when absent; the fixture tests in `malformed.rs` cover the loader regardless).

use super::util::real_dataset;
use tma_graph::{load_dataset, Features, Labels, LoadOptions};

fn load(name: &str) -> tma_graph::Dataset {
    load_dataset(&real_dataset(name), &LoadOptions::default()).unwrap()
}

#[test]
fn planetoid_cora() {
    let ds = load("planetoid_cora");
    assert_eq!(ds.name, "planetoid_cora");
    assert!(!ds.directed);
    assert_eq!(ds.num_nodes(), 2708);
    assert_eq!(ds.num_edges(), 10556);
    match &ds.features {
        Features::Sparse {
            dim,
            indices,
            indptr,
            ..
        } => {
            assert_eq!(*dim, 1433);
            assert_eq!(indices.len(), 49216);
            assert_eq!(indptr.len(), 2709);
        }
        _ => panic!("cora features must stay sparse"),
    }
    assert!(!ds.structural_features);
    match &ds.labels {
        Labels::Classes { y, num_classes } => {
            assert_eq!(*num_classes, 7);
            assert_eq!(y.len(), 2708);
            assert!(y.iter().all(|&c| (0..7).contains(&c)));
        }
        _ => panic!(),
    }
    let s = ds.split.as_ref().unwrap();
    assert_eq!((s.train.len(), s.val.len(), s.test.len()), (140, 500, 1000));
    // public Planetoid split: train = nodes 0..140, val = 140..640
    assert_eq!(s.train, (0..140).collect::<Vec<u32>>());
    assert_eq!(s.val, (140..640).collect::<Vec<u32>>());
    assert_eq!(
        ds.summary(),
        "planetoid_cora: 2708 nodes, 10556 arcs (undirected), features 1433-d sparse (nnz 49216), 7 classes, split 140/500/1000"
    );
}

#[test]
fn hetero_actor_masks() {
    let dir = real_dataset("hetero_actor");
    for split_index in [0, 9] {
        let ds = load_dataset(
            &dir,
            &LoadOptions {
                split_index,
                ..LoadOptions::default()
            },
        )
        .unwrap();
        assert_eq!(ds.num_nodes(), 7600);
        assert_eq!(ds.num_edges(), 53318);
        assert_eq!(ds.features.dim(), 932);
        let s = ds.split.unwrap();
        assert_eq!(
            (s.train.len(), s.val.len(), s.test.len()),
            (3648, 2432, 1520)
        );
        // Fortran-ordered masks decoded correctly: the three parts partition the nodes
        let mut all: Vec<u32> = s
            .train
            .iter()
            .chain(&s.val)
            .chain(&s.test)
            .copied()
            .collect();
        all.sort_unstable();
        assert_eq!(all, (0..7600).collect::<Vec<u32>>());
    }
    let e = load_dataset(
        &dir,
        &LoadOptions {
            split_index: 10,
            ..LoadOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("split_index 10"), "{e}");
}

#[test]
fn deezer_hu_multilabel_structural() {
    let ds = load("deezer_HU");
    assert_eq!(ds.num_nodes(), 47538);
    assert_eq!(ds.num_edges(), 445774);
    match &ds.labels {
        Labels::MultiLabel { num_labels, y } => {
            assert_eq!(*num_labels, 84);
            assert_eq!(y.len(), 47538 * 84);
            assert!(y.contains(&1));
        }
        _ => panic!(),
    }
    assert!(ds.structural_features);
    assert_eq!(ds.features.dim(), 32);
    assert!(ds.split.is_none());
}

#[test]
fn featureless_seal_usair() {
    let ds = load("seal_USAir");
    assert_eq!(ds.num_nodes(), 332);
    assert_eq!(ds.num_edges(), 4252);
    assert_eq!(ds.labels, Labels::None);
    assert!(ds.split.is_none());
    assert!(ds.structural_features);
    let Features::Dense { dim, data, .. } = &ds.features else {
        panic!()
    };
    assert_eq!(*dim, 32);
    let col0: Vec<f64> = (0..332).map(|v| data[v * 32] as f64).collect();
    let mean = col0.iter().sum::<f64>() / 332.0;
    let var = col0.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 332.0;
    assert!(
        mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-4,
        "{mean} {var}"
    );
}

#[test]
fn directed_chameleon() {
    let ds = load("hetero_chameleon_directed");
    assert!(ds.directed);
    assert_eq!(ds.num_nodes(), 2277);
    assert_eq!(ds.num_edges(), 36051);
    assert_eq!(ds.split.unwrap().train.len(), 1092);
}

#[test]
fn coauthor_physics_fast_and_sparse() {
    let dir = real_dataset("coauthor_physics");
    let t = std::time::Instant::now();
    let ds = load_dataset(&dir, &LoadOptions::default()).unwrap();
    eprintln!("coauthor_physics loaded in {:?}", t.elapsed());
    assert_eq!(ds.num_nodes(), 34493);
    assert_eq!(ds.num_edges(), 495924);
    assert!(matches!(ds.features, Features::Sparse { dim: 8415, .. }));
    assert_eq!(ds.features.size_bytes(), 34494 * 8 + 1137311 * 8);
}

/// Every dataset directory present loads and has the node count its `meta.json` records.
#[test]
fn all_datasets_load() {
    let root = real_dataset("planetoid_cora")
        .parent()
        .unwrap()
        .to_path_buf();
    let mut n = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("meta.json").exists() {
            continue;
        }
        let ds = load_dataset(&dir, &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        eprintln!("{}", ds.summary());
        assert!(ds.graph.num_edges() > 0);
        let meta: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("meta.json")).unwrap()).unwrap();
        let nodes = meta["computed"]["nodes"].as_u64();
        assert_eq!(nodes, Some(ds.num_nodes() as u64), "{}", dir.display());
        n += 1;
    }
    // the shared folder holds the 50 datasets its INDEX.md lists
    assert!(n >= 50, "only {n} datasets in {}", root.display());
}
