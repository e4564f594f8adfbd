//! Inference restricted to the nodes an evaluation reads ([`tma_train::evaluation::infer`]) against the
//! full layer-wise pass: same outputs and metrics for every exact path, node and link heads,
//! SAGE / GCN / GAT, dense and sparse features; chunks within the budget; the cost-based choice;
//! the sampled estimate. Small generated graphs; seconds in all.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tma_graph::{generate_sbm, Features, SbmConfig};
use tma_nn::{EncoderKind, Head, Mat, Model, ModelConfig};
use tma_train::evaluation::eval::{evaluate_with, Split};
use tma_train::evaluation::infer::{infer_nodes, InferMode, InferOptions, InferPath};
use tma_train::{build_model, prepare, Method, Task, TrainConfig};

fn opts(mode: InferMode, memory_budget: u64) -> InferOptions {
    InferOptions {
        mode,
        memory_budget,
        ..InferOptions::default()
    }
}

/// Largest |a - b| relative to max(1, |b|).
fn max_rel_diff(a: &Mat, b: &Mat) -> f32 {
    assert_eq!((a.rows, a.cols), (b.rows, b.cols));
    a.data
        .iter()
        .zip(&b.data)
        .map(|(x, y)| (x - y).abs() / y.abs().max(1.0))
        .fold(0.0, f32::max)
}

/// The same matrix as sparse CSR rows (every entry stored, zeros included).
fn to_sparse(f: &Features) -> Features {
    let Features::Dense {
        num_nodes,
        dim,
        data,
    } = f
    else {
        panic!("dense expected")
    };
    Features::Sparse {
        num_nodes: *num_nodes,
        dim: *dim,
        indptr: (0..=*num_nodes).map(|i| (i * dim) as u64).collect(),
        indices: (0..num_nodes * dim).map(|j| (j % dim) as u32).collect(),
        data: data.to_vec(),
    }
}

/// A generated SBM (`n` nodes, average degree `deg`, `dim`-d features, `classes` classes,
/// graph seed `seed`) and a 2-layer SAGE node model of width `hidden` initialised from
/// `init_seed`.
fn sbm_and_sage(
    n: usize,
    deg: f64,
    dim: usize,
    classes: usize,
    seed: u64,
    hidden: usize,
    init_seed: u64,
) -> (tma_graph::Dataset, Model, tma_nn::ParamSet) {
    let ds = generate_sbm(&SbmConfig {
        num_nodes: n,
        avg_degree: deg,
        feature_dim: dim,
        num_classes: classes,
        seed,
        ..SbmConfig::default()
    });
    let m = Model::new(ModelConfig {
        hidden,
        num_layers: 2,
        ..ModelConfig::new(
            EncoderKind::Sage,
            dim,
            Head::Node {
                num_classes: classes,
            },
        )
    });
    let p = m.init_params(&mut ChaCha8Rng::seed_from_u64(init_seed));
    (ds, m, p)
}

#[test]
fn restricted_inference_equals_the_full_pass() {
    let ds = generate_sbm(&SbmConfig {
        num_nodes: 500,
        avg_degree: 8.0,
        feature_dim: 12,
        num_classes: 3,
        seed: 5,
        ..SbmConfig::default()
    });
    let g = &ds.graph;
    let deg = g.degrees();
    let mut r = ChaCha8Rng::seed_from_u64(1);
    // 40 distinct nodes in random order
    let mut nodes: Vec<u32> = Vec::new();
    while nodes.len() < 40 {
        let v = r.random_range(0..500u32);
        if !nodes.contains(&v) {
            nodes.push(v);
        }
    }
    let sparse = to_sparse(&ds.features);
    for enc in [EncoderKind::Sage, EncoderKind::Gcn, EncoderKind::Gat] {
        for head in [Head::Node { num_classes: 3 }, Head::Link] {
            for layers in [1, 2, 3] {
                let m = Model::new(ModelConfig {
                    hidden: 16,
                    num_layers: layers,
                    ..ModelConfig::new(enc, 12, head)
                });
                let p = m.init_params(&mut r);
                let whole = m.infer_full(&p, g, &deg, &ds.features);
                let (full, fr) = infer_nodes(
                    &m,
                    &p,
                    g,
                    &deg,
                    &ds.features,
                    &nodes,
                    &opts(InferMode::Full, 1 << 30),
                );
                assert_eq!(fr.path, InferPath::Full);
                for (i, &v) in nodes.iter().enumerate() {
                    assert_eq!(full.row(i), whole.row(v as usize), "row {i} = node {v}");
                }
                // a budget that forces several chunks
                let budget = if layers == 1 { 8_000 } else { 60_000 };
                for x in [&ds.features, &sparse] {
                    let (res, rr) = infer_nodes(
                        &m,
                        &p,
                        g,
                        &deg,
                        x,
                        &nodes,
                        &opts(InferMode::Restricted, budget),
                    );
                    assert_eq!(rr.path, InferPath::Restricted);
                    assert!(rr.chunks > 1, "{enc} {layers}: {rr:?}");
                    // the same neighbours summed in the same order; the dense products run
                    // on other row counts (and may pick another order of operations): the
                    // last bits may differ
                    let d = max_rel_diff(&res, &full);
                    assert!(d <= 1e-5, "{enc} {head:?} {layers} layers: {d}");
                }
            }
        }
    }
}

#[test]
fn chunks_stay_within_the_budget_and_auto_follows_the_cost() {
    let (ds, m, p) = sbm_and_sage(2000, 6.0, 16, 4, 9, 32, 2);
    let g = &ds.graph;
    let deg = g.degrees();
    let few: Vec<u32> = (0..20).map(|i| i * 97).collect();
    let all: Vec<u32> = (0..2000).collect();
    let run = |nodes: &[u32], mode: InferMode, budget: u64| {
        infer_nodes(&m, &p, g, &deg, &ds.features, nodes, &opts(mode, budget))
    };
    // a few nodes: their 2-hop neighbourhoods are a small part of the graph
    let (a, ra) = run(&few, InferMode::Auto, 1 << 30);
    // layer-wise: one chunk per layer
    assert_eq!((ra.path, ra.chunks), (InferPath::Restricted, 2));
    assert!(ra.cost < 0.2 * ra.full_cost, "{ra:?}");
    let (b, _) = run(&few, InferMode::Full, 1 << 30);
    assert!(max_rel_diff(&a, &b) <= 1e-5);
    // every node: the full pass is cheaper
    let (_, rb) = run(&all, InferMode::Auto, 1 << 30);
    assert_eq!(rb.path, InferPath::Full);
    // ... and when it does not fit the budget, the full pass through a mapped scratch file
    // (0 chunks held in memory: one layer chunk at a time)
    let budget = 400_000;
    let (f, rf) = run(&all, InferMode::Auto, budget);
    assert_eq!((rf.path, rf.chunks), (InferPath::Full, 0));
    assert!(max_rel_diff(&f, &run(&all, InferMode::Full, 1 << 30).0) <= 1e-5);
    // restricted within that budget: chunks, each within it
    let (c, rc) = run(&all, InferMode::Restricted, budget);
    assert_eq!(rc.path, InferPath::Restricted);
    assert!(rc.chunks > 2 && rc.peak_bytes <= budget, "{rc:?}");
    // layer-wise: each needed row once per group (the groups the budget forces repeat only
    // their shared neighbourhoods)
    assert!(rc.cost > rc.full_cost, "{rc:?}");
    // with a budget that holds every stored row: exactly the full pass's work
    let (e, re) = run(&all, InferMode::Restricted, 1 << 30);
    assert_eq!(re.path, InferPath::Restricted);
    assert!(
        (re.cost - re.full_cost).abs() <= 1e-9 * re.full_cost,
        "{re:?}"
    );
    assert!(max_rel_diff(&e, &run(&all, InferMode::Full, 1 << 30).0) <= 1e-5);
    let (d, _) = run(&all, InferMode::Full, 1 << 30);
    assert!(max_rel_diff(&c, &d) <= 1e-5);
}

#[test]
fn sampled_inference_is_fixed_and_exact_with_all_neighbours() {
    let (ds, m, p) = sbm_and_sage(800, 12.0, 8, 3, 4, 16, 3);
    let g = &ds.graph;
    let deg = g.degrees();
    let nodes: Vec<u32> = (0..800).step_by(7).collect();
    let run = |mode: InferMode, budget: u64| {
        infer_nodes(&m, &p, g, &deg, &ds.features, &nodes, &opts(mode, budget)).0
    };
    let exact = run(InferMode::Full, 1 << 30);
    // all neighbours: exact
    let all = run(InferMode::Sampled(vec![usize::MAX; 2]), 1 << 30);
    assert!(max_rel_diff(&all, &exact) <= 1e-5);
    // fanouts 3, 3: the same sample at every call (and for any chunking of the same budget)
    let s1 = run(InferMode::Sampled(vec![3, 3]), 50_000);
    let s2 = run(InferMode::Sampled(vec![3, 3]), 50_000);
    assert_eq!(s1.data, s2.data);
    let d = max_rel_diff(&s1, &exact);
    assert!(
        d > 1e-3,
        "a 3-neighbour sample of degree-12 nodes differs: {d}"
    );
}

/// `evaluate_with` gives the same metrics through every exact path, node and link.
#[test]
fn evaluation_metrics_equal_the_full_pass() {
    for (task, enc) in [
        (Task::Node, EncoderKind::Sage),
        (Task::Node, EncoderKind::Gat),
        (Task::Link, EncoderKind::Sage),
        (Task::Link, EncoderKind::Gcn),
    ] {
        let cfg = TrainConfig {
            task,
            method: Method::Centralized,
            model: enc,
            hidden: 16,
            fanouts: vec![5, 5],
            eval_num_neg: 10,
            eval_max_edges: 60,
            val_frac: 0.02,
            test_frac: 0.02,
            seed: 11,
            ..TrainConfig::default()
        };
        let ds = generate_sbm(&SbmConfig {
            num_nodes: 3000,
            avg_degree: 4.0,
            feature_dim: 8,
            num_classes: 4,
            seed: 6,
            ..SbmConfig::default()
        });
        let prep = prepare(ds, &cfg).unwrap();
        let model = build_model(&cfg, prep.model_shape()).unwrap();
        let p = model.init_params(&mut ChaCha8Rng::seed_from_u64(8));
        for split in [Split::Val, Split::Test] {
            let full = evaluate_with(&model, &p, &prep, split, &opts(InferMode::Full, 1 << 30));
            for mode in [InferMode::Restricted, InferMode::Auto] {
                let r = evaluate_with(&model, &p, &prep, split, &opts(mode.clone(), 300_000));
                assert_eq!(r.metric, full.metric);
                for (k, v) in &full.all {
                    let w = r.all[k];
                    assert!(
                        (v - w).abs() <= 1e-9,
                        "{task} {enc} {split:?} {mode:?} {k}: {v} vs {w}"
                    );
                }
            }
            assert!(full.value > 0.0, "{task} {enc}: {full:?}");
        }
    }
}

/// `--eval-max-nodes`: validation reads a fixed seeded subset of its nodes (node) or of its
/// positives with their own negatives (link) when the split is larger, and nothing changes
/// below the cap; the test split is always read whole.
#[test]
fn validation_subset_bounds_validation_and_leaves_test_whole() {
    use tma_train::config::DEFAULT_EVAL_MAX_NODES;
    use tma_train::data::{validation_subset, EvalData};
    assert_eq!(
        TrainConfig::default().eval_max_nodes,
        DEFAULT_EVAL_MAX_NODES
    );
    assert_eq!(DEFAULT_EVAL_MAX_NODES, 100_000);
    // the subset itself: exact size, ascending distinct positions, fixed by the seed
    assert_eq!(validation_subset(1000, 1000, 3), None);
    assert_eq!(validation_subset(0, 5, 3), None);
    let a = validation_subset(1000, 100, 3).unwrap();
    assert_eq!(a.len(), 100);
    assert!(a.windows(2).all(|w| w[0] < w[1]) && a[99] < 1000);
    assert_eq!(validation_subset(1000, 100, 3).unwrap(), a);
    assert_ne!(validation_subset(1000, 100, 4).unwrap(), a);
    assert_eq!(validation_subset(1000, 999, 3).unwrap().len(), 999);
    // roughly uniform: the 100 positions spread over the 1000 (each half holds some)
    assert!(a.iter().filter(|&&i| i < 500).count() > 25);

    let exact = |m| opts(m, 1 << 30);
    for task in [Task::Node, Task::Link] {
        let cfg = TrainConfig {
            task,
            method: Method::Centralized,
            hidden: 16,
            fanouts: vec![5, 5],
            eval_num_neg: 10,
            eval_max_edges: 60,
            val_frac: 0.02,
            test_frac: 0.02,
            seed: 11,
            ..TrainConfig::default()
        };
        let ds = || {
            generate_sbm(&SbmConfig {
                num_nodes: 3000,
                avg_degree: 4.0,
                feature_dim: 8,
                num_classes: 4,
                seed: 6,
                ..SbmConfig::default()
            })
        };
        let mut prep = prepare(ds(), &cfg).unwrap();
        let model = build_model(&cfg, prep.model_shape()).unwrap();
        let p = model.init_params(&mut ChaCha8Rng::seed_from_u64(8));
        let val_len = match &prep.eval {
            EvalData::Node { split, .. } => split.val.len(),
            EvalData::Link { split } => split.val_pos.len(),
        };
        let before = [Split::Val, Split::Test]
            .map(|s| evaluate_with(&model, &p, &prep, s, &exact(InferMode::Full)));
        // at or above the split's size: no subset, no line, the same results
        assert_eq!(prep.cap_validation(val_len, usize::MAX, 11), None, "{task}");
        assert_eq!(prep.val_subset, None);
        for (i, s) in [Split::Val, Split::Test].into_iter().enumerate() {
            let r = evaluate_with(&model, &p, &prep, s, &exact(InferMode::Full));
            assert_eq!(r.all, before[i].all, "{task} {s:?}");
        }
        // below: a subset of exactly the cap, said in one line
        let cap = val_len / 3;
        let line = prep.cap_validation(cap, usize::MAX, 11).unwrap();
        let what = if task == Task::Node {
            "nodes"
        } else {
            "positives"
        };
        assert_eq!(
            line,
            format!(
                "validation uses a fixed seeded subset of {cap} of the {val_len} validation {what} every round (--eval-max-nodes {cap}); the final test uses the whole test split"
            )
        );
        let at = prep.val_subset.clone().unwrap();
        assert_eq!(at, validation_subset(val_len, cap, 11).unwrap());
        // validation equals a run whose validation split is just that subset
        let mut sub = prepare(ds(), &cfg).unwrap();
        match &mut sub.eval {
            EvalData::Node { split, .. } => {
                split.val = at.iter().map(|&i| split.val[i as usize]).collect();
            }
            EvalData::Link { split } => {
                let k = split.num_neg;
                split.val_pos = at.iter().map(|&i| split.val_pos[i as usize]).collect();
                split.val_neg = at
                    .iter()
                    .flat_map(|&i| split.val_neg[i as usize * k..(i as usize + 1) * k].to_vec())
                    .collect();
            }
        }
        for mode in [InferMode::Full, InferMode::Restricted] {
            let capped = evaluate_with(&model, &p, &prep, Split::Val, &exact(mode.clone()));
            let direct = evaluate_with(&model, &p, &sub, Split::Val, &exact(mode.clone()));
            assert_eq!(capped.all, direct.all, "{task} {mode:?}");
            // the test split is untouched
            let t = evaluate_with(&model, &p, &prep, Split::Test, &exact(mode));
            for (k, v) in &before[1].all {
                assert!((v - t.all[k]).abs() <= 1e-9, "{task} test {k}");
            }
        }
        // the subset validation differs from the whole split's (it reads other nodes)
        let capped = evaluate_with(&model, &p, &prep, Split::Val, &exact(InferMode::Full));
        assert_ne!(capped.all, before[0].all, "{task}");
    }
}

fn mapped_rss_under(dir: &std::path::Path) -> u64 {
    tma_graph::buf::mapped_resident_bytes(dir).expect("/proc/self/smaps")
}

/// On a graph mapped from disk, the restricted pass gathers the input rows in row order and
/// releases every page it reads as it goes (a validation of a 1.3-billion-arc graph otherwise
/// left most of the graph resident in the evaluating process): same outputs as on the same
/// graph in memory, and none of the graph's files resident afterwards.
#[test]
fn restricted_inference_on_a_mapped_graph_matches_and_leaves_no_pages_resident() {
    let (ds, m, p) = sbm_and_sage(3000, 8.0, 32, 4, 3, 16, 7);
    let tmp = tempfile::tempdir().unwrap();
    let gdir = tmp.path().join("g");
    tma_graph::disk::write_dataset(&ds, &gdir, &tma_graph::disk::Provenance::new("test")).unwrap();
    let mapped = tma_graph::load_dataset(&gdir, &tma_graph::LoadOptions::default()).unwrap();
    assert!(mapped.graph.indices.is_mapped() && mapped.features.is_mapped());
    let deg = ds.graph.degrees();
    let nodes: Vec<u32> = (0..3000).step_by(7).rev().collect();
    for budget in [1 << 30, 200_000] {
        let o = opts(InferMode::Restricted, budget);
        let (a, ra) = infer_nodes(&m, &p, &ds.graph, &deg, &ds.features, &nodes, &o);
        mapped.graph.indices.iter().for_each(|_| ());
        let _ = mapped.features.gather(&(0..3000).collect::<Vec<u32>>());
        assert!(mapped_rss_under(&gdir) > 0, "the graph's pages were read");
        let (b, rb) = infer_nodes(&m, &p, &mapped.graph, &deg, &mapped.features, &nodes, &o);
        assert_eq!(rb.path, InferPath::Restricted);
        assert!(rb.chunks >= ra.chunks, "{ra:?} {rb:?}");
        if budget < 1 << 30 {
            assert!(rb.chunks > 2 && rb.peak_bytes <= budget, "{rb:?}");
        }
        let d = max_rel_diff(&a, &b);
        assert!(d <= 1e-6, "budget {budget}: {d}");
        assert_eq!(
            mapped_rss_under(&gdir),
            0,
            "budget {budget}: pages left resident"
        );
    }
}

/// The layer-wise pass written to a scratch file equals the in-memory full pass (every encoder,
/// node and link heads, 1-3 layers, a budget small enough for many chunks), and leaves no file
/// behind in its scratch directory.
#[test]
fn inference_of_every_node_to_a_file_equals_the_full_pass() {
    let ds = generate_sbm(&SbmConfig {
        num_nodes: 700,
        avg_degree: 9.0,
        feature_dim: 10,
        num_classes: 3,
        seed: 8,
        ..SbmConfig::default()
    });
    let g = &ds.graph;
    let deg = g.degrees();
    let scratch = tempfile::tempdir().unwrap();
    let mut r = ChaCha8Rng::seed_from_u64(2);
    for enc in [EncoderKind::Sage, EncoderKind::Gcn, EncoderKind::Gat] {
        for head in [Head::Node { num_classes: 3 }, Head::Link] {
            for layers in [1, 2, 3] {
                let m = Model::new(ModelConfig {
                    hidden: 16,
                    num_layers: layers,
                    ..ModelConfig::new(enc, 10, head)
                });
                let p = m.init_params(&mut r);
                let whole = m.infer_full(&p, g, &deg, &ds.features);
                let o = InferOptions {
                    scratch_dir: Some(scratch.path().to_path_buf()),
                    ..opts(InferMode::Full, 64 << 10)
                };
                let rows = tma_train::evaluation::infer::infer_all_to_file(
                    &m,
                    &p,
                    g,
                    &deg,
                    &ds.features,
                    &o,
                )
                .unwrap();
                assert!(rows.is_mapped());
                let got = Mat {
                    rows: whole.rows,
                    cols: whole.cols,
                    data: rows.to_vec(),
                };
                let d = max_rel_diff(&got, &whole);
                assert!(d < 1e-5, "{enc:?} {head:?} {layers} layers: {d}");
                assert_eq!(
                    std::fs::read_dir(scratch.path()).unwrap().count(),
                    0,
                    "scratch files are unlinked once mapped"
                );
            }
        }
    }
}

/// A link split stored with the graph whose test split needs several evaluation chunks (more
/// than `LINK_EVAL_CHUNK` positives): scored from the file-backed pass, the metrics equal
/// those of the whole split scored at once from the in-memory full pass.
#[test]
fn a_many_chunk_link_test_split_scores_as_one_full_pass() {
    use tma_train::evaluation::eval::{link_metrics, LINK_EVAL_CHUNK};
    let mut ds = generate_sbm(&SbmConfig {
        num_nodes: 3000,
        avg_degree: 12.0,
        feature_dim: 8,
        num_classes: 4,
        seed: 3,
        ..SbmConfig::default()
    });
    // hold out 1300 edges (3 chunks of test positives) and give the split back as stored
    let ls = tma_graph::link_split(&ds.graph, false, 0.02, 0.08, None, 20, 4);
    assert!(
        ls.test_pos.len() > 2 * LINK_EVAL_CHUNK,
        "{}",
        ls.test_pos.len()
    );
    ds.graph = ls.train_graph.clone();
    ds.link_split = Some(tma_graph::StoredLinkSplit {
        val_pos: ls.val_pos.clone(),
        test_pos: ls.test_pos.clone(),
        negatives: Some(tma_graph::StoredNegatives {
            num_neg: 20,
            seed: 4,
            val: ls.val_neg.clone(),
            test: ls.test_neg.clone(),
        }),
        source: "test".into(),
        protocol: None,
    });
    let cfg = TrainConfig {
        task: Task::Link,
        method: Method::Centralized,
        hidden: 16,
        eval_num_neg: 20,
        seed: 4,
        ..TrainConfig::defaults_for(Task::Link)
    };
    let prep = prepare(ds, &cfg).unwrap();
    assert!(
        prep.warnings
            .iter()
            .any(|w| w.starts_with("link split: stored with the graph in test (")),
        "{:?}",
        prep.warnings
    );
    let model = build_model(&cfg, prep.model_shape()).unwrap();
    let p = model.init_params(&mut ChaCha8Rng::seed_from_u64(9));
    let scratch = tempfile::tempdir().unwrap();
    // 1 MiB: the full pass in memory, scored in pieces; 48 KiB: through scratch files
    let runs: Vec<_> = [1u64 << 20, 48 << 10]
        .iter()
        .map(|&budget| {
            let o = InferOptions {
                scratch_dir: Some(scratch.path().to_path_buf()),
                ..opts(InferMode::Auto, budget)
            };
            evaluate_with(&model, &p, &prep, Split::Test, &o)
        })
        .collect();
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
    // the reference: every node's outputs at once, every positive scored in one call
    let h = model.infer_full(&p, &prep.graph, &prep.degrees, &prep.features);
    let src: Vec<u32> = ls.test_pos.iter().map(|e| e.0).collect();
    let dst: Vec<u32> = ls.test_pos.iter().map(|e| e.1).collect();
    let pos = model.score(&p, &h, &src, &dst);
    let nsrc: Vec<u32> = src
        .iter()
        .flat_map(|&s| std::iter::repeat_n(s, 20))
        .collect();
    let neg = model.score(&p, &h, &nsrc, &ls.test_neg);
    let want = link_metrics(&pos, &neg, 20, tma_train::Metric::Mrr);
    for got in &runs {
        for (k, v) in &want {
            let g = got.all[k];
            assert!((g - v).abs() < 1e-3, "{k}: {g} vs {v}");
        }
    }
    assert!(want["mrr"] > 0.0);
}

/// Auto inference whose restricted sets do not fit half the budget keeps the single group and
/// writes the outputs of the layers below the last to mapped scratch files
/// (`InferPath::RestrictedFile`): the full pass's values, the same as the in-memory groups
/// within the same budget, a fraction of the full pass's work (which groups exceed on
/// power-law graphs, where every group repeats the hubs: bench figures in
/// docs/decisions/0018-link-prediction-at-scale.md), no file
/// left behind; every encoder, node and link heads, 2 and 3 layers.
#[test]
fn a_restricted_pass_too_big_for_the_budget_spills_its_layers_to_files() {
    let ds = generate_sbm(&SbmConfig {
        num_nodes: 20_000,
        avg_degree: 4.0,
        feature_dim: 8,
        num_classes: 3,
        seed: 4,
        ..SbmConfig::default()
    });
    let g = &ds.graph;
    let deg = g.degrees();
    let scratch = tempfile::tempdir().unwrap();
    // the neighbours of a few nodes: their neighbourhoods overlap (they share those nodes)
    let mut nodes: Vec<u32> = (0..40).flat_map(|v| g.neighbors(v).to_vec()).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let mut r = ChaCha8Rng::seed_from_u64(5);
    for enc in [EncoderKind::Sage, EncoderKind::Gcn, EncoderKind::Gat] {
        for head in [Head::Node { num_classes: 3 }, Head::Link] {
            for layers in [2, 3] {
                let m = Model::new(ModelConfig {
                    hidden: 32,
                    num_layers: layers,
                    ..ModelConfig::new(enc, 8, head)
                });
                let p = m.init_params(&mut r);
                let with = |mode: InferMode, budget: u64| {
                    let o = InferOptions {
                        scratch_dir: Some(scratch.path().to_path_buf()),
                        ..opts(mode, budget)
                    };
                    infer_nodes(&m, &p, g, &deg, &ds.features, &nodes, &o)
                };
                let (whole, _) = with(InferMode::Full, 1 << 30);
                let (one, r1) = with(InferMode::Auto, 1 << 30);
                assert_eq!(r1.path, InferPath::Restricted, "{enc:?} {layers}");
                let budget = 96 << 10;
                let (got, rs) = with(InferMode::Auto, budget);
                let what = format!("{enc:?} {head:?} {layers} layers: {rs:?}");
                assert_eq!(rs.path, InferPath::RestrictedFile, "{what}");
                assert!(rs.chunks > layers, "{what}");
                assert!(rs.cost < 0.5 * rs.full_cost, "{what}");
                // the one in-memory chunk per layer of a big budget counts each source once;
                // the spilled pass's chunks count a source once per chunk that reads it
                assert!(rs.cost >= r1.cost * (1.0 - 1e-9), "{what} vs {r1:?}");
                assert!(max_rel_diff(&got, &whole) < 1e-5, "{what}");
                assert!(max_rel_diff(&got, &one) < 1e-5, "{what}");
                // the in-memory groups within the same budget: same values
                let (grouped, rg) = with(InferMode::Restricted, budget);
                assert_eq!(rg.path, InferPath::Restricted, "{what}");
                assert!(rg.chunks > layers, "{what} vs groups {rg:?}");
                assert!(max_rel_diff(&grouped, &whole) < 1e-5, "{what}");
                assert_eq!(
                    std::fs::read_dir(scratch.path()).unwrap().count(),
                    0,
                    "scratch files are unlinked once mapped"
                );
            }
        }
    }
}
