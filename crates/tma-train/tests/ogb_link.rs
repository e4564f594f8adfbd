//! A link split with negatives shared by every positive (OGB's ogbl-collab / ppa / ddi
//! protocol, `tma_graph::LinkProtocol`): `--metric auto` is the dataset's Hits@K, MRR is
//! refused, and evaluation equals OGB's Hits@K (`eval::hits_at_shared`) of the model's scores,
//! whether the pairs fit one chunk or need every node's outputs computed once.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tma_graph::{generate_sbm, LinkProtocol, SbmConfig, SharedNegatives, StoredLinkSplit};
use tma_train::evaluation::eval::{evaluate_with, hits_at_shared, Split, LINK_EVAL_CHUNK};
use tma_train::evaluation::infer::{InferMode, InferOptions};
use tma_train::{build_model, prepare, Method, Metric, Task, TrainConfig};

/// `(u, v)` pairs.
type Pairs = Vec<(u32, u32)>;

/// A dataset with its test positives and shared test negatives.
fn shared_split(num_neg: usize) -> (tma_graph::Dataset, Pairs, Pairs) {
    let mut ds = generate_sbm(&SbmConfig {
        num_nodes: 2000,
        avg_degree: 10.0,
        feature_dim: 8,
        num_classes: 4,
        seed: 5,
        ..SbmConfig::default()
    });
    let ls = tma_graph::link_split(&ds.graph, false, 0.02, 0.05, None, 1, 5);
    ds.graph = ls.train_graph.clone();
    // shared negatives: pairs (i, i * 7 + 3) of any nodes, as a dataset might give them
    let n = ds.num_nodes() as u32;
    let neg = |off: u32| -> Pairs {
        (0..num_neg as u32)
            .map(|i| (i % n, (i * 7 + off) % n))
            .collect()
    };
    let (vneg, tneg) = (neg(3), neg(11));
    ds.link_split = Some(StoredLinkSplit {
        val_pos: ls.val_pos.clone(),
        test_pos: ls.test_pos.clone(),
        negatives: None,
        source: "test".into(),
        protocol: Some(Box::new(LinkProtocol {
            dataset: "ogbl-collab".into(),
            hits_k: Some(50),
            shared: Some(SharedNegatives {
                val: vneg,
                test: tneg.clone(),
            }),
        })),
    });
    (ds, ls.test_pos, tneg)
}

fn cfg(metric: Metric) -> TrainConfig {
    TrainConfig {
        task: Task::Link,
        method: Method::Centralized,
        hidden: 16,
        seed: 4,
        metric,
        ..TrainConfig::defaults_for(Task::Link)
    }
}

#[test]
fn shared_negatives_select_hits_at_k_and_refuse_mrr() {
    let (ds, _, _) = shared_split(40);
    let prep = prepare(ds.clone(), &cfg(Metric::Auto)).unwrap();
    assert_eq!(prep.metric, Metric::HitsAt(50));
    let line = prep
        .warnings
        .iter()
        .find(|w| w.starts_with("link split: stored with the graph in test ("))
        .unwrap();
    assert!(
        line.contains("40 / 40 negative pairs shared by every positive, as ogbl-collab gives them (its edge_neg), Hits@50"),
        "{line}"
    );
    let e = prepare(ds.clone(), &cfg(Metric::Mrr))
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("metric mrr: ogbl-collab ranks every positive"),
        "{e}"
    );
    let p = prepare(ds, &cfg(Metric::HitsAt(20))).unwrap();
    assert_eq!(p.metric, Metric::HitsAt(20));
}

#[test]
fn shared_evaluation_is_ogbs_hits_at_k_of_the_models_scores() {
    for num_neg in [40, 3 * LINK_EVAL_CHUNK + 7] {
        let (ds, test_pos, test_neg) = shared_split(num_neg);
        let prep = prepare(ds, &cfg(Metric::Auto)).unwrap();
        let model = build_model(&cfg(Metric::Auto), prep.model_shape()).unwrap();
        let p = model.init_params(&mut ChaCha8Rng::seed_from_u64(9));
        let scratch = tempfile::tempdir().unwrap();
        let o = InferOptions {
            mode: InferMode::Auto,
            scratch_dir: Some(scratch.path().to_path_buf()),
            ..InferOptions::default()
        };
        let got = evaluate_with(&model, &p, &prep, Split::Test, &o);
        assert_eq!(got.metric, "hits@50");
        // the reference: every node's outputs at once, every pair scored in one call
        let h = model.infer_full(&p, &prep.graph, &prep.degrees, &prep.features);
        let score = |pairs: &[(u32, u32)]| {
            let s: Vec<u32> = pairs.iter().map(|e| e.0).collect();
            let d: Vec<u32> = pairs.iter().map(|e| e.1).collect();
            model.score(&p, &h, &s, &d)
        };
        let (pos, neg) = (score(&test_pos), score(&test_neg));
        for k in [10, 20, 50, 100] {
            let want = hits_at_shared(&pos, &neg, k);
            let g = got.all[&format!("hits@{k}")];
            assert!((g - want).abs() < 1e-9, "{num_neg} hits@{k}: {g} vs {want}");
        }
        assert_eq!(got.value, got.all["hits@50"]);
        // not a degenerate ranking: some positives above the threshold, some below
        assert!(
            got.all.values().any(|&v| v > 0.0 && v < 1.0),
            "{num_neg}: {:?}",
            got.all
        );
        assert!(!got.all.contains_key("mrr"));
    }
}

/// A partition directory keeps a dataset's protocol and its shared negatives: the coordinator
/// read back evaluates as the prepared data did.
#[test]
fn a_partition_directory_keeps_shared_negatives() {
    use tma_train::store::{read_coordinator, read_manifest, write_partition_dir};
    let (ds, _, _) = shared_split(600);
    let c = TrainConfig {
        method: Method::RandomTma,
        num_trainers: 2,
        ..cfg(Metric::Auto)
    };
    let prep = prepare(ds, &c).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("parts");
    write_partition_dir(&dir, &prep, &c, "ogbl-collab", false).unwrap();
    let m = read_manifest(&dir).unwrap();
    let p = m.link_protocol.as_ref().unwrap();
    assert_eq!(
        (p.dataset.as_str(), p.hits_k, p.shared),
        ("ogbl-collab", Some(50), true)
    );
    // the option stays as given (shared negatives have no count per positive)
    assert_eq!(m.data.eval_num_neg, c.eval_num_neg);
    let back = read_coordinator(&dir, &m).unwrap();
    let (
        tma_train::data::EvalData::Link { split: a },
        tma_train::data::EvalData::Link { split: b },
    ) = (&back.eval, &prep.eval)
    else {
        panic!("link data expected")
    };
    assert_eq!(a.protocol, b.protocol);
    assert_eq!((a.val_pos.clone(), a.num_neg), (b.val_pos.clone(), 0));
    let model = build_model(&c, prep.model_shape()).unwrap();
    let params = model.init_params(&mut ChaCha8Rng::seed_from_u64(2));
    let o = InferOptions::default();
    let want = evaluate_with(&model, &params, &prep, Split::Test, &o);
    let mut back = back;
    back.metric = prep.metric;
    let got = evaluate_with(&model, &params, &back, Split::Test, &o);
    assert_eq!(got.all, want.all);
}
