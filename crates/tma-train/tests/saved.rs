//! A saved model used after its run (`tma_train::saved`): evaluated again from its run
//! directory it gives the run's own `summary.json` values bit for bit (the split re-derived
//! from `config.toml` and the dataset), and its embeddings streamed to a `.npy` file within a
//! small budget are the rows of the full pass. Real data: ../shared/datasets/planetoid_cora.

use std::path::{Path, PathBuf};
use std::time::Duration;
use tma_train::evaluation::infer::InferOptions;
use tma_train::saved::{self, EmbedOutput, SavedConfig, SavedModel, Which};
use tma_train::{DataSource, Method, Quiet, Run, RunSpec, Summary, Task, TrainConfig, TrainError};

/// `../shared/datasets/<name>`; panics saying what is missing and how to get it.
fn shared(name: &str) -> PathBuf {
    let p = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/datasets"
    ))
    .join(name);
    assert!(
        p.join("meta.json").is_file(),
        "missing {}: this test needs the shared real datasets at ../shared/datasets next to the \
         repository root (CI provides them; layout in docs/dataset-format.md); copy or link them there",
        p.display()
    );
    p
}

/// A short random-tma run of `task` on Cora into `out` (2 trainers on 2 threads).
fn short_run(task: Task, out: &Path, tweak: impl FnOnce(&mut TrainConfig)) -> Summary {
    let mut cfg = TrainConfig {
        task,
        method: Method::RandomTma,
        num_trainers: 2,
        hidden: 16,
        sync_every: Duration::from_millis(300),
        sync_ramp: 0,
        time_limit: Duration::from_millis(1500),
        threads: 2,
        seed: 5,
        ..TrainConfig::defaults_for(task)
    };
    tweak(&mut cfg);
    let mut spec = RunSpec::new(cfg, DataSource::Dataset(shared("planetoid_cora")));
    spec.out = Some(out.to_path_buf());
    Run::start(spec).unwrap().train(&mut Quiet).unwrap().summary
}

/// Evaluates the `which` model of `run` on the data its config.toml records, on `threads`
/// threads.
fn evaluate_saved(run: &Path, which: Which, threads: usize) -> saved::SavedEval {
    let sm = SavedModel::open(run, which).unwrap();
    let mut cfg = sm.config.train.clone();
    let data = sm
        .config
        .data_source()
        .unwrap()
        .expect("a recorded dataset");
    let (prep, name, _) = saved::prepare_eval(&mut cfg, data).unwrap();
    assert_eq!(name, "planetoid_cora");
    let (model, params) = sm.model_for(&prep, &name).unwrap();
    let pool = saved::thread_pool(threads).unwrap();
    pool.install(|| saved::evaluate_both(&model, &params, &prep, &cfg.infer_options()))
}

#[test]
fn a_saved_model_evaluates_to_its_runs_summary_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    // node task with a validation subset (--eval-max-nodes 200 of Cora's 500 validation
    // nodes): re-deriving the split must re-derive the subset too
    let node = tmp.path().join("node");
    let s = short_run(Task::Node, &node, |c| c.eval_max_nodes = 200);
    assert!(s.rounds >= 2, "{} rounds", s.rounds);
    assert!(s.warnings.iter().any(|w| w.contains("subset of 200")));
    // on 1 thread, where the run's evaluator had its own share: the values do not depend on it
    let best = evaluate_saved(&node, Which::Best, 1);
    assert_eq!(best.val, s.best_val);
    assert_eq!(best.test, s.best_test);
    let last = evaluate_saved(&node, Which::Final, 2);
    assert_eq!(last.val, s.final_val);
    assert_eq!(last.test, s.final_test);
    // the test split is Cora's 1000 fixed test nodes: a value on a grid of 1/1000
    let acc = best.test.all["accuracy"];
    assert!(
        acc > 0.3 && (acc * 1000.0 - (acc * 1000.0).round()).abs() < 1e-9,
        "{acc}"
    );

    // link task: the held-out edges and their 1000 fixed negatives each are drawn again from
    // the seed
    let link = tmp.path().join("link");
    let s = short_run(Task::Link, &link, |_| {});
    let best = evaluate_saved(&link, Which::Best, 1);
    assert_eq!(best.val, s.best_val);
    assert_eq!(best.test, s.best_test);
    assert_eq!(best.val.metric, "mrr");
    assert!(best.val.value > 0.0 && best.val.value <= 1.0);

    // a model file with its run's config.toml next to it is the same model
    let copy = tmp.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    for f in ["config.toml", "model_best.safetensors"] {
        std::fs::copy(link.join(f), copy.join(f)).unwrap();
    }
    let file = evaluate_saved(&copy.join("model_best.safetensors"), Which::Final, 2);
    assert_eq!(file.val, s.best_val);
    assert_eq!(file.test, s.best_test);
}

#[test]
fn config_toml_reads_back_as_the_runs_configuration() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = TrainConfig::defaults_for(Task::Link);
    cfg.seed = 11;
    cfg.eval_memory = 100 << 20;
    cfg.eval_max_nodes = 321;
    cfg.metric = "hits@50".parse().unwrap();
    let mut spec = RunSpec::new(cfg, DataSource::Dataset(shared("planetoid_cora")));
    spec.out = Some(tmp.path().join("run"));
    let run = Run::start(spec).unwrap();
    let want = serde_json::to_value(run.config()).unwrap();
    let sc = SavedConfig::read(&tmp.path().join("run").join("config.toml")).unwrap();
    assert_eq!(serde_json::to_value(&sc.train).unwrap(), want);
    assert_eq!(
        sc.dataset.as_deref(),
        Some(
            std::fs::canonicalize(shared("planetoid_cora"))
                .unwrap()
                .as_path()
        )
    );
    assert!(sc.partitions.is_none() && sc.gen_nodes.is_none());
}

#[test]
fn embeddings_streamed_in_small_chunks_are_the_full_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("node");
    let s = short_run(Task::Node, &run, |_| {});
    let sm = SavedModel::open(&run, Which::Best).unwrap();
    let mut cfg = sm.config.train.clone();
    let data = sm.config.data_source().unwrap().unwrap();
    let (prep, name, _) = saved::prepare_embed(&mut cfg, data).unwrap();
    let (model, params) = sm.model_for(&prep, &name).unwrap();
    let full = model.infer_full(&params, &prep.graph, &prep.degrees, &prep.features);
    assert_eq!((full.rows, full.cols), (2708, 7));
    // 64 KiB: the 2708 nodes go in many chunks; the hidden layer through a scratch file
    let opts = InferOptions {
        memory_budget: 64 << 10,
        scratch_dir: Some(tmp.path().to_path_buf()),
        ..cfg.infer_options()
    };
    let out = tmp.path().join("logits.npy");
    let layers = saved::embed_layers(&model, Task::Node, EmbedOutput::Logits).unwrap();
    assert_eq!(layers, 2);
    let rep = saved::embed_to_npy(&model, &params, &prep, layers, &out, &opts).unwrap();
    assert_eq!((rep.rows, rep.dim), (2708, 7));
    assert_eq!(rep.bytes, std::fs::metadata(&out).unwrap().len());
    let arr = tma_graph::npy::read::<f32>(&out, &[None, None]).unwrap();
    assert_eq!(arr.shape, vec![2708, 7]);
    let worst = arr
        .data
        .iter()
        .zip(&full.data)
        .map(|(a, b)| (a - b).abs() / (1.0 + b.abs()))
        .fold(0f32, f32::max);
    // the same neighbours in the same order; the dense products over other row counts round
    // differently in the last bits (measured: 3.9e-7 at most)
    assert!(worst < 1e-5, "largest relative difference {worst}");
    // the logits give the run's test accuracy on Cora's fixed test nodes
    let y: Vec<i64> = tma_graph::npy::read::<i64>(&shared("planetoid_cora").join("y.npy"), &[None])
        .unwrap()
        .data;
    let test: Vec<i64> =
        tma_graph::npy::read::<i64>(&shared("planetoid_cora").join("test_idx.npy"), &[None])
            .unwrap()
            .data;
    let argmax = |r: &[f32]| {
        (0..r.len())
            .max_by(|&a, &b| r[a].total_cmp(&r[b]).then(b.cmp(&a)))
            .unwrap() as i64
    };
    let right = test
        .iter()
        .filter(|&&v| argmax(&arr.data[v as usize * 7..(v as usize + 1) * 7]) == y[v as usize])
        .count();
    assert_eq!(
        right as f64 / test.len() as f64,
        s.best_test.all["accuracy"]
    );
    // no temporary file is left next to the output, nor a scratch file in the scratch dir
    let names: Vec<String> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");

    // the hidden layer entering the last one: [N, hidden]
    let layers = saved::embed_layers(&model, Task::Node, EmbedOutput::Embeddings).unwrap();
    assert_eq!(layers, 1);
    let rep = saved::embed_to_npy(
        &model,
        &params,
        &prep,
        layers,
        &tmp.path().join("h.npy"),
        &opts,
    )
    .unwrap();
    assert_eq!((rep.rows, rep.dim), (2708, 16));
}

#[test]
fn a_model_of_other_data_or_without_its_config_is_refused_naming_both() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("node");
    short_run(Task::Node, &run, |c| {
        c.time_limit = Duration::from_millis(400)
    });
    let sm = SavedModel::open(&run, Which::Best).unwrap();
    // Citeseer: 3703 features, 6 classes
    let mut cfg = sm.config.train.clone();
    let citeseer = shared("planetoid_citeseer");
    let (prep, _, _) =
        saved::prepare_eval(&mut cfg, DataSource::Dataset(citeseer.clone())).unwrap();
    let e = sm
        .model_for(&prep, &citeseer.display().to_string())
        .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, TrainError::Data(_)), "{msg}");
    for part in [
        run.join("model_best.safetensors").display().to_string(),
        citeseer.display().to_string(),
        "3703 features, 6 classes".into(),
        "encoder.0.lin_l.weight has shape [16, 1433] in the file, [16, 3703] for this data".into(),
    ] {
        let part = part.as_str();
        assert!(msg.contains(part), "{msg} lacks {part}");
    }
    // a model file alone
    let lone = tmp.path().join("lone");
    std::fs::create_dir(&lone).unwrap();
    std::fs::copy(
        run.join("model_best.safetensors"),
        lone.join("m.safetensors"),
    )
    .unwrap();
    let e = SavedModel::open(&lone.join("m.safetensors"), Which::Best).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains(&lone.join("m.safetensors").display().to_string())
            && msg.contains("no config.toml next to it"),
        "{msg}"
    );
    // a run directory without the model asked for
    std::fs::remove_file(run.join("model_final.safetensors")).unwrap();
    let msg = SavedModel::open(&run, Which::Final)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains(&run.display().to_string()) && msg.contains("no model_final.safetensors"),
        "{msg}"
    );
    // ... of a finished run: removed after the run, not "not finished" (regression: a
    // fresh-eyes trial was told to resume a finished run)
    assert!(
        msg.contains("the run finished (summary.json is there) but its model file is missing"),
        "{msg}"
    );
    // logits of a link model, embeddings of a 1-layer classifier
    let link = tma_nn::Model::new(tma_nn::ModelConfig::new(
        tma_nn::EncoderKind::Sage,
        8,
        tma_nn::Head::Link,
    ));
    let msg = saved::embed_layers(&link, Task::Link, EmbedOutput::Logits)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("a link model has no logits"), "{msg}");
    let mut one = tma_nn::ModelConfig::new(
        tma_nn::EncoderKind::Sage,
        8,
        tma_nn::Head::Node { num_classes: 3 },
    );
    one.num_layers = 1;
    let msg = saved::embed_layers(
        &tma_nn::Model::new(one),
        Task::Node,
        EmbedOutput::Embeddings,
    )
    .unwrap_err()
    .to_string();
    assert!(msg.contains("has 1 layer"), "{msg}");
}

/// A model file carries its encoder: a GAT run's model says `gat` with its heads in its
/// metadata, and loading builds the model from it even where the `config.toml` next to it
/// says otherwise; a file in the old form (no metadata, as tma wrote before it recorded it)
/// still loads from its run's `config.toml`, to the same values.
#[test]
fn a_model_file_carries_its_encoder_and_old_files_load_from_their_config() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("gat");
    let s = short_run(Task::Node, &run, |c| {
        c.model = tma_nn::EncoderKind::Gat;
        c.encoder_options
            .set_json("heads", &serde_json::json!(4))
            .unwrap();
    });
    let path = run.join("model_best.safetensors");
    let (params, meta) = tma_nn::ParamSet::load_safetensors_with(&path).unwrap();
    let desc: serde_json::Value = serde_json::from_str(&meta[tma_nn::Model::METADATA_KEY]).unwrap();
    assert_eq!(desc["encoder"], "gat");
    assert_eq!(desc["options"], serde_json::json!({"heads": 4}));
    assert_eq!(
        (&desc["hidden"], &desc["num_layers"], &desc["out_dim"]),
        (&16.into(), &2.into(), &7.into())
    );
    assert_eq!(desc["layers"][0]["module"], "GATConv");
    assert_eq!(desc["layers"][0]["heads"], 4);
    assert_eq!(desc["layers"][1]["heads"], 1);
    // so do the checkpoint's model files (regression: they were written without it, so a
    // checkpoint's model did not say which encoder it holds)
    let ckpt: Vec<PathBuf> = std::fs::read_dir(run.join("checkpoint"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    assert!(!ckpt.is_empty(), "no checkpoint model file");
    for f in &ckpt {
        let (_, m) = tma_nn::ParamSet::load_safetensors_with(f).unwrap();
        assert_eq!(
            m.get(tma_nn::Model::METADATA_KEY),
            meta.get(tma_nn::Model::METADATA_KEY),
            "{}",
            f.display()
        );
    }

    // the metadata decides: a config.toml that says sage with 2 heads is overridden
    let moved = tmp.path().join("moved");
    std::fs::create_dir(&moved).unwrap();
    std::fs::copy(&path, moved.join("model_best.safetensors")).unwrap();
    let toml = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(
        toml.contains("model = \"gat\"") && toml.contains("heads = 4"),
        "{toml}"
    );
    std::fs::write(
        moved.join("config.toml"),
        toml.replace("model = \"gat\"", "model = \"sage\"")
            .replace("heads = 4", "heads = 2"),
    )
    .unwrap();
    let sm = SavedModel::open(&moved, Which::Best).unwrap();
    assert_eq!(sm.config.train.model, tma_nn::EncoderKind::Gat);
    assert_eq!(
        sm.config.train.model_options().unwrap().get("heads"),
        Some(tma_nn::OptionValue::Int(4))
    );
    let best = evaluate_saved(&moved, Which::Best, 2);
    assert_eq!(best.val, s.best_val);
    assert_eq!(best.test, s.best_test);

    // the old form: parameters only, the run's config.toml beside them
    let old = tmp.path().join("old");
    std::fs::create_dir(&old).unwrap();
    std::fs::copy(run.join("config.toml"), old.join("config.toml")).unwrap();
    params
        .save_safetensors(&old.join("model_best.safetensors"))
        .unwrap();
    let (_, meta) =
        tma_nn::ParamSet::load_safetensors_with(&old.join("model_best.safetensors")).unwrap();
    assert!(!meta.contains_key(tma_nn::Model::METADATA_KEY));
    let best = evaluate_saved(&old, Which::Best, 2);
    assert_eq!(best.val, s.best_val);
    assert_eq!(best.test, s.best_test);
}
