//! Regression tests of issue 11 ("nothing silent") in the training library: trainers without
//! training examples, link splits of tiny or complete graphs, unlabelled split nodes, the
//! memory estimate, a stop request, and what summary.json records.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use tma_graph::{generate_sbm, Csr, Dataset, Features, Labels, NodeSplit, SbmConfig};
use tma_train::{DataSource, Method, Quiet, Run, RunSpec, Task, TrainConfig};

fn sbm(n: usize) -> Dataset {
    generate_sbm(&SbmConfig {
        num_nodes: n,
        avg_degree: 8.0,
        feature_dim: 8,
        seed: 1,
        ..SbmConfig::default()
    })
}

fn quick(method: Method, trainers: usize) -> TrainConfig {
    TrainConfig {
        method,
        num_trainers: trainers,
        hidden: 8,
        sync_every: Duration::from_millis(150),
        // the plain schedule: the default ramp would cut 150 ms into 9 ms rounds, some holding
        // no step (a round's train_loss is then null); the ramp has its own tests
        sync_ramp: 0,
        time_limit: Duration::from_millis(600),
        threads: 2,
        ..TrainConfig::default()
    }
}

/// A graph with `n` nodes on a ring and only node 0 in the training split (classes 0/1).
fn one_training_node(n: usize) -> Dataset {
    let mut ds = sbm(n);
    ds.labels = Labels::Classes {
        y: (0..n).map(|v| (v % 2) as i32).collect(),
        num_classes: 2,
    };
    ds.split = Some(NodeSplit {
        train: vec![0],
        val: (1..n as u32 / 2).collect(),
        test: (n as u32 / 2..n as u32).collect(),
    });
    ds
}

#[test]
fn a_trainer_without_training_nodes_joins_every_round_with_weight_zero() {
    // regression (issue 11): "trainer 1 got no training nodes" failed the whole run
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let cfg = quick(Method::RandomTma, 2);
    let mut spec = RunSpec::new(cfg, DataSource::InMemory(Box::new(one_training_node(200))));
    spec.out = Some(out.clone());
    let run = Run::start(spec).unwrap();
    let run = run.prepare().unwrap();
    let idle = run.prepared().idle_trainers();
    assert_eq!(idle.len(), 1, "one of the two parts holds node 0");
    let w = run.warnings().to_vec();
    assert_eq!(
        w,
        vec![format!(
            "trainer {} got no training nodes (a small graph for 2 trainers): it joins every round with weight 0, the others train",
            idle[0]
        )]
    );
    let r = run.train(&mut Quiet).unwrap();
    assert!(r.rounds.len() >= 2);
    for rec in &r.rounds {
        assert_eq!(rec.participants, vec![0, 1], "round {}", rec.round);
        assert!(rec.train_loss.is_finite(), "the other trainer trains");
    }
    assert_eq!(r.summary.steps_per_trainer[idle[0]], 0);
    assert!(r.summary.steps_per_trainer[1 - idle[0]] > 0);
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["warnings"], serde_json::json!(w));
    assert_eq!(s["interrupted"], serde_json::json!(false));
    let p: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("partition.json")).unwrap()).unwrap();
    assert_eq!(p["warnings"], serde_json::json!(w));
    // no training node at all: a clear error, not a run that learns nothing
    let mut ds = one_training_node(200);
    ds.split.as_mut().unwrap().train = vec![];
    ds.split.as_mut().unwrap().val = vec![1, 2];
    let err = tma_train::prepare(ds, &quick(Method::Ggs, 2))
        .err()
        .expect("empty train split");
    assert_eq!(
        err.to_string(),
        "dataset 'sbm' has an empty train or validation split"
    );
    // GGS (gradient averaging) cannot run a trainer with nothing: it refuses, naming it
    let err = tma_train::prepare(one_training_node(200), &quick(Method::Ggs, 2))
        .err()
        .expect("GGS with an empty share");
    assert_eq!(
        err.to_string(),
        "trainer 1 got no training nodes (2 trainers on 1 training nodes); use fewer --trainers"
    );
}

/// Undirected graph from undirected edge pairs.
fn undirected(n: usize, edges: &[(u32, u32)]) -> Csr {
    let mut src = vec![];
    let mut dst = vec![];
    for &(a, b) in edges {
        src.extend([a, b]);
        dst.extend([b, a]);
    }
    Csr::from_edges(n, &src, &dst)
}

fn link_dataset(graph: Csr) -> Dataset {
    let n = graph.num_nodes();
    Dataset {
        name: "tiny".into(),
        directed: false,
        features: Features::Dense {
            num_nodes: n,
            dim: 2,
            data: vec![1.0; 2 * n].into(),
        },
        graph,
        structural_features: false,
        labels: Labels::None,
        split: None,
        removed: Default::default(),
        num_splits: 0,
        link_split: None,
    }
}

#[test]
fn link_split_of_tiny_and_complete_graphs_says_what_it_needs() {
    let cfg = TrainConfig {
        task: Task::Link,
        ..quick(Method::Centralized, 1)
    };
    // 2 edges: says exactly how many are needed
    let err = tma_train::prepare(link_dataset(undirected(3, &[(0, 1), (1, 2)])), &cfg)
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "dataset 'tiny': cannot split for link prediction: it has 2 edge(s); link prediction needs at least 3 (1 validation, 1 test, 1 training)"
    );
    // 9 edges: 1 validation, 1 test edge, and the warning says so
    let path: Vec<(u32, u32)> = (0..9).map(|v| (v, v + 1)).collect();
    let prep = tma_train::prepare(link_dataset(undirected(10, &path)), &cfg).unwrap();
    assert_eq!(
        prep.warnings[..2],
        [
            "link split: val-frac 0.05 of 9 edges rounds to 0; holding out 1 validation edge"
                .to_string(),
            "link split: test-frac 0.05 of 9 edges rounds to 0; holding out 1 test edge"
                .to_string()
        ]
    );
    // complete graph K4: no negative pair exists at all
    let k4: Vec<(u32, u32)> = (0..4)
        .flat_map(|a| (a + 1..4).map(move |b| (a, b)))
        .collect();
    let err = tma_train::prepare(
        link_dataset(undirected(4, &k4)),
        &TrainConfig {
            val_frac: 0.2,
            test_frac: 0.2,
            ..cfg.clone()
        },
    )
    .err()
    .unwrap();
    assert!(
        err.to_string().starts_with(
            "dataset 'tiny': cannot split for link prediction: no valid negative pair exists"
        ),
        "{err}"
    );
}

#[test]
fn unlabelled_split_nodes_are_counted_and_skipped() {
    let mut ds = one_training_node(200);
    let sp = ds.split.as_mut().unwrap();
    sp.train = vec![0, 2, 4];
    sp.val = (5..100).collect();
    if let Labels::Classes { y, .. } = &mut ds.labels {
        y[2] = -1;
        y[10] = -1;
        y[11] = -1;
        y[150] = -1;
    }
    let prep = tma_train::prepare(ds, &quick(Method::Centralized, 1)).unwrap();
    // train {0,2,4}: 1 unlabelled; val 5..100: 10, 11; test 100..200: 150
    assert_eq!(
        prep.warnings,
        vec!["split: 1 train / 2 val / 1 test nodes are unlabelled (y = -1) and are skipped; training and metrics use labelled nodes only (2 / 93 / 99)".to_string()]
    );
}

#[test]
fn classes_without_nodes_are_said() {
    // labels 0 and 3 only: a 4-class model with 2 classes nobody has
    let mut ds = one_training_node(200);
    ds.labels = Labels::Classes {
        y: (0..200).map(|v| if v % 2 == 0 { 0 } else { 3 }).collect(),
        num_classes: 4,
    };
    let prep = tma_train::prepare(ds, &quick(Method::Centralized, 1)).unwrap();
    assert_eq!(
        prep.warnings,
        vec!["y.npy: 2 of the 4 classes (ids 0..3, from the largest label) have no node; the model still outputs 4 classes".to_string()]
    );
}

#[test]
fn every_caller_of_run_gets_the_memory_check_by_default() {
    // regression: only the CLI told the run what memory the process may use, so a Python run
    // (or any library caller) started a model the machine cannot hold; now Run checks against
    // memory::available_bytes unless told otherwise
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let cfg = TrainConfig {
        hidden: 100_000_000,
        ..quick(Method::RandomTma, 2)
    };
    let available = tma_train::memory::available_bytes().expect("/proc/meminfo is readable here");
    let mut spec = RunSpec::new(cfg.clone(), DataSource::InMemory(Box::new(sbm(300))));
    spec.out = Some(out.clone());
    let run = Run::start(spec).unwrap();
    // a refused preparation consumes the run, which leaves the directory as it found it
    let err = run.prepare().err().expect("refused").to_string();
    assert!(
        err.contains("GiB are available") && err.contains("--hidden 100000000"),
        "{err}"
    );
    let prep = tma_train::prepare(sbm(300), &cfg).unwrap();
    let need = tma_train::run::memory_estimate::estimate(&cfg, &prep)
        .unwrap()
        .total();
    assert!(need > available, "{need} vs {available}");
    assert!(!out.exists(), "a refused run leaves no directory");
}

#[test]
fn a_model_too_large_for_the_address_space_is_refused_not_allocated() {
    // regression: the estimate built the model first, allocating its parameters, so --hidden
    // 4000000000 aborted the process (and a Python interpreter with it) on a failed 2.3 TB
    // allocation instead of being refused
    let tmp = tempfile::tempdir().unwrap();
    let cfg = TrainConfig {
        hidden: 4_000_000_000,
        ..quick(Method::RandomTma, 2)
    };
    // 2-layer SAGE 8 -> 4e9 -> 8: two 8 x 4e9 and two 4e9 x 8 matrices, 4e9 biases and the
    // PReLU slope: the layout is counted without allocating it
    let prep = tma_train::prepare(sbm(300), &cfg).unwrap();
    let model = tma_train::build_model(&cfg, prep.model_shape()).unwrap();
    assert!(
        model.num_params() > 4 * 8 * 4_000_000_000,
        "{}",
        model.num_params()
    );
    let mut spec = RunSpec::new(cfg, DataSource::InMemory(Box::new(sbm(300))));
    spec.out = Some(tmp.path().join("run"));
    let run = Run::start(spec).unwrap();
    let err = run.prepare().err().unwrap().to_string();
    assert!(
        err.contains("GiB of memory but") && err.contains("--hidden 4000000000"),
        "{err}"
    );
}

#[test]
fn memory_estimate_refuses_a_model_too_large_and_leaves_no_run_dir() {
    // regression (issue 11): --hidden 100000000 was started and killed by the OOM killer
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let cfg = TrainConfig {
        hidden: 1_000_000,
        ..quick(Method::RandomTma, 2)
    };
    let mut spec = RunSpec::new(cfg.clone(), DataSource::InMemory(Box::new(sbm(300))));
    spec.out = Some(out.clone());
    let mut run = Run::start(spec).unwrap();
    run.set_available_memory(Some(1 << 30));
    let err = run.prepare().err().unwrap().to_string();
    assert!(
        err.contains("GiB of memory but 1.0 GiB are available")
            && err.contains("--hidden 1000000")
            && err.contains("reduce --hidden, --trainers, --batch-size or --eval-memory"),
        "{err}"
    );
    assert!(!out.exists(), "a refused run leaves no directory");
    // the estimate's parts, exactly: 2-layer SAGE (8 -> 1e6 -> 8 classes)
    let prep = tma_train::prepare(sbm(300), &cfg).unwrap();
    let e = tma_train::run::memory_estimate::estimate(&cfg, &prep).unwrap();
    let p = tma_train::build_model(&cfg, prep.model_shape())
        .unwrap()
        .num_params() as u64;
    assert_eq!(e.num_params, p);
    assert_eq!(e.trainer_params, p * 24 * 2);
    assert_eq!(e.coordinator_params, p * 32);
    // evaluation: restricted chunks within --eval-memory (default 1 GiB) unless the full
    // pass (two [N, width] f32 matrices) is forced
    assert_eq!(e.evaluation, 1 << 30);
    let full = TrainConfig {
        eval_inference: tma_train::config::EvalInference::Full,
        ..cfg.clone()
    };
    let e_full = tma_train::run::memory_estimate::estimate(&full, &prep).unwrap();
    assert_eq!(e_full.evaluation, 300 * 1_000_000 * 8);
    let small = TrainConfig {
        eval_memory: 1 << 20,
        ..cfg.clone()
    };
    let e_small = tma_train::run::memory_estimate::estimate(&small, &prep).unwrap();
    assert_eq!(e_small.evaluation, 1 << 20);
    assert!(e.total() > 1 << 30);
    // activations: one step's for each model pass that runs at once; in-process trainers
    // beyond the threads wait at the step gate (regression: 24 trainers on 2 cores were
    // refused for 24 steps' activations)
    let on = |threads| {
        let c = TrainConfig {
            threads,
            ..cfg.clone()
        };
        tma_train::run::memory_estimate::estimate(&c, &prep)
            .unwrap()
            .activations
    };
    let one = on(1);
    assert!(one > 0);
    assert_eq!((on(2), on(8)), (2 * one, 2 * one), "2 trainers");
    let four = tma_train::prepare(
        sbm(300),
        &TrainConfig {
            num_trainers: 4,
            ..cfg.clone()
        },
    )
    .unwrap();
    let act = |threads| {
        let c = TrainConfig {
            threads,
            num_trainers: 4,
            ..cfg.clone()
        };
        tma_train::run::memory_estimate::estimate(&c, &four)
            .unwrap()
            .activations
    };
    assert_eq!((act(2), act(4), act(16)), (2 * one, 4 * one, 4 * one));
}

#[test]
fn a_stop_request_ends_the_run_after_the_round_in_flight() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let cfg = TrainConfig {
        time_limit: Duration::from_secs(60),
        ..quick(Method::RandomTma, 2)
    };
    let mut spec = RunSpec::new(cfg, DataSource::InMemory(Box::new(sbm(300))));
    spec.out = Some(out.clone());
    let mut run = Run::start(spec).unwrap();
    let stop = Arc::new(AtomicBool::new(true)); // requested before the first round
    run.stop_on(stop);
    let t = std::time::Instant::now();
    let r = run.train(&mut Quiet).unwrap();
    assert!(t.elapsed() < Duration::from_secs(30), "stopped early");
    assert_eq!(r.rounds.len(), 1, "the round in flight is the last");
    assert!(r.summary.interrupted);
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["interrupted"], serde_json::json!(true));
    assert!(out.join("checkpoint/state.json").is_file());
    // an interrupted run resumes (its summary is written again at the end)
    let mut spec = RunSpec::new(
        TrainConfig {
            time_limit: Duration::from_millis(600),
            ..quick(Method::RandomTma, 2)
        },
        DataSource::InMemory(Box::new(sbm(300))),
    );
    spec.out = Some(out.clone());
    spec.resume = true;
    let r = Run::start(spec).unwrap().train(&mut Quiet).unwrap();
    assert!(!r.summary.interrupted);
    assert!(r.summary.rounds >= 2);
}

#[test]
fn a_stop_request_after_the_last_round_does_not_mark_the_run_interrupted() {
    // regression: a SIGTERM during the final validation/test (after the last round formed at
    // the time limit) marked a finished run `interrupted`, and its resume trained past the limit
    struct StopAtLast(Arc<AtomicBool>, f64);
    impl tma_train::Observer for StopAtLast {
        fn on_round(&mut self, r: &tma_train::RoundRecord) -> Result<(), tma_train::TrainError> {
            if !r.check && r.elapsed_s >= self.1 {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            Ok(())
        }
    }
    let limit = Duration::from_millis(600);
    let cfg = TrainConfig {
        time_limit: limit,
        ..quick(Method::RandomTma, 2)
    };
    // into a temporary directory (it wrote runs/ in the source tree, the default run directory)
    let tmp = tempfile::tempdir().unwrap();
    let mut spec = RunSpec::new(cfg, DataSource::InMemory(Box::new(sbm(300))));
    spec.out = Some(tmp.path().join("run"));
    let mut run = Run::start(spec).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    run.stop_on(stop.clone());
    let r = run
        .train(&mut StopAtLast(stop.clone(), limit.as_secs_f64()))
        .unwrap();
    assert!(stop.load(std::sync::atomic::Ordering::SeqCst), "requested");
    assert!(r.rounds.last().unwrap().elapsed_s >= limit.as_secs_f64());
    assert!(!r.summary.interrupted, "{:?}", r.summary.interrupted_by);
    assert_eq!(r.summary.interrupted_by, None);
}

#[test]
fn a_run_stopped_before_its_first_checkpoint_is_discarded() {
    // regression: a second signal while round 1's checkpoint was being written left a run
    // directory with a round in rounds.jsonl, no checkpoint/state.json, and a message saying
    // `--resume` continues it (it refused); such a run has nothing to resume and is put back
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    std::fs::create_dir_all(dir.join("checkpoint")).unwrap();
    std::fs::write(dir.join("config.toml"), "seed = 0\n").unwrap();
    std::fs::write(dir.join("rounds.jsonl"), "{\"round\":1}\n").unwrap();
    std::fs::write(dir.join("checkpoint/state.json.tmp"), "{").unwrap();
    assert!(tma_train::run::discard_unstarted(&dir, false));
    assert!(!dir.exists());
    // with a complete checkpoint it is kept, untouched
    std::fs::create_dir_all(dir.join("checkpoint")).unwrap();
    std::fs::write(dir.join("rounds.jsonl"), "{\"round\":1}\n").unwrap();
    std::fs::write(dir.join("checkpoint/state.json"), "{}").unwrap();
    assert!(!tma_train::run::discard_unstarted(&dir, false));
    assert!(dir.join("rounds.jsonl").is_file());
}

#[test]
fn failed_trainers_are_objects_in_summary_json() {
    // regression (issue 11): failed trainers were raw tuples [[1, 4.018577031]]
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let mut spec = RunSpec::new(
        TrainConfig {
            time_limit: Duration::from_millis(900),
            ..quick(Method::RandomTma, 2)
        },
        DataSource::InMemory(Box::new(sbm(300))),
    );
    spec.out = Some(out.clone());
    spec.fail.insert(1, Duration::from_millis(300));
    Run::start(spec).unwrap().train(&mut Quiet).unwrap();
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let f = s["failed_trainers"].as_array().unwrap();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0]["trainer"], serde_json::json!(1));
    let at = f[0]["at_s"].as_f64().unwrap();
    assert!((0.3..0.9).contains(&at), "{at}");
}

#[test]
fn threads_above_the_cores_are_warned_about() {
    // regression: --threads 1000 on 2 cores ran 0-4 steps per trainer instead of ~680, silently
    assert_eq!(tma_train::run::threads_warning(2, 2), None);
    assert_eq!(tma_train::run::threads_warning(0, 2), None);
    assert_eq!(
        tma_train::run::threads_warning(1000, 2).unwrap(),
        "threads (1000) is above the 2 cores this process may use: the threads time-share the cores and training slows down; 0 uses every core"
    );
}

/// A run of `method` with `trainers` into `out` (300-node SBM, 300 ms rounds, `limit`);
/// `resume`: continue the run there.
fn run_into(
    out: &std::path::Path,
    method: Method,
    trainers: usize,
    limit: Duration,
    resume: bool,
) -> RunSpec {
    let cfg = TrainConfig {
        time_limit: limit,
        sync_every: Duration::from_millis(300),
        ..quick(method, trainers)
    };
    let mut spec = RunSpec::new(cfg, DataSource::InMemory(Box::new(sbm(300))));
    spec.out = Some(out.to_path_buf());
    spec.resume = resume;
    spec
}

/// [`run_into`] centralized, its one trainer failing at 0.7 s of training: every trainer is
/// lost before the limit.
fn lost_at_700ms(out: &std::path::Path, limit: Duration, resume: bool) -> RunSpec {
    let mut spec = run_into(out, Method::Centralized, 1, limit, resume);
    spec.fail.insert(0, Duration::from_millis(700));
    spec
}

#[test]
fn a_resume_that_forms_no_round_keeps_the_summary_of_the_run() {
    // regression: a resumed run whose trainers were lost at once (the same --fail plan)
    // overwrote summary.json with 0 rounds and a validation value of 0 with no metric name
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let spec = |resume: bool| lost_at_700ms(&out, Duration::from_secs(4), resume);
    let first = Run::start(spec(false)).unwrap().train(&mut Quiet).unwrap();
    assert_eq!(
        first.summary.interrupted_by,
        Some(tma_train::StopCause::TrainersLost)
    );
    assert!(first.summary.rounds >= 1);
    // resumed at the last round (t ~0.6 s): the trainer fails again at 0.7 s, before a round
    let again = Run::start(spec(true)).unwrap().train(&mut Quiet).unwrap();
    assert!(again.rounds.is_empty(), "{:?}", again.rounds);
    let (a, b) = (&first.summary, &again.summary);
    assert_eq!(b.rounds, a.rounds);
    assert_eq!(b.final_val.metric, a.final_val.metric);
    assert_eq!(b.final_val.value, a.final_val.value);
    assert_eq!(b.final_test.value, a.final_test.value);
    assert!((b.train_time_s - a.train_time_s).abs() < 1e-6);
    assert_eq!(b.interrupted_by, Some(tma_train::StopCause::TrainersLost));
}

#[test]
fn a_resume_with_a_time_limit_already_spent_says_so() {
    // regression: resuming at 0.6 s of training with --time-limit 300ms formed one more round
    // without a word
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let spec = |limit: Duration, resume: bool| lost_at_700ms(&out, limit, resume);
    let first = Run::start(spec(Duration::from_secs(4), false))
        .unwrap()
        .train(&mut Quiet)
        .unwrap();
    assert!(first.summary.interrupted);
    let r = Run::start(spec(Duration::from_millis(300), true))
        .unwrap()
        .train(&mut Quiet)
        .unwrap();
    assert!(
        r.summary.warnings.iter().any(|w| w
            .starts_with("resume: time-limit (300ms) is not past the run's training time so far")),
        "{:?}",
        r.summary.warnings
    );
}

#[test]
fn resumed_trainers_continue_their_epochs() {
    // regression: epochs restarted at 0 after a resume (rounds.jsonl's `epochs` went backwards
    // and gradient clipping, from epoch 2, was off again for the first epoch)
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run");
    let spec = |limit: Duration, resume: bool| run_into(&out, Method::RandomTma, 2, limit, resume);
    let mut run = Run::start(spec(Duration::from_secs(60), false)).unwrap();
    // stop after the round in flight, once a round has formed
    let stop = Arc::new(AtomicBool::new(false));
    run.stop_on(stop.clone());
    struct StopAfterFirst(Arc<AtomicBool>);
    impl tma_train::Observer for StopAfterFirst {
        fn on_round(&mut self, _: &tma_train::RoundRecord) -> Result<(), tma_train::TrainError> {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        }
    }
    let first = run.train(&mut StopAfterFirst(stop)).unwrap();
    assert!(first.summary.interrupted);
    let before = first.rounds.last().unwrap().epochs.clone();
    assert!(before.iter().all(|&e| e >= 1), "{before:?}");
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("checkpoint/state.json")).unwrap()).unwrap();
    assert_eq!(state["epochs"], serde_json::json!(before));
    let at = Duration::from_secs_f64(first.rounds.last().unwrap().elapsed_s);
    let again = Run::start(spec(at + Duration::from_millis(500), true))
        .unwrap()
        .train(&mut Quiet)
        .unwrap();
    let r = again.rounds.first().expect("a round after the resume");
    for (&t, &e) in r.participants.iter().zip(&r.epochs) {
        assert!(
            e >= before[t],
            "trainer {t}: {e} epochs after the resume, {} before",
            before[t]
        );
    }
}

/// `--tensorboard DIR` (issue 31 item 6): one event per round at its round number with the
/// values `rounds.jsonl` has, the test metrics of `summary.json` at the end, the folder in
/// `config.toml`; a run that fails before its first round leaves no event file.
#[test]
fn tensorboard_events_hold_the_rounds_and_the_summary() {
    use tma_train::store::tensorboard::read_events;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("run-x");
    let tb = tmp.path().join("tb");
    let mut spec = run_into(
        &out,
        Method::RandomTma,
        2,
        Duration::from_millis(900),
        false,
    );
    spec.tensorboard = Some(tb.clone());
    let run = Run::start(spec).unwrap();
    let file = run.tensorboard_file().unwrap().to_path_buf();
    assert_eq!(file.parent().unwrap(), tb.join("run-x"));
    let result = run.train(&mut Quiet).unwrap();
    let events = read_events(&file).unwrap();
    assert_eq!(events[0].file_version.as_deref(), Some("brain.Event:2"));
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(out.join("rounds.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let rounds = result.summary.rounds as usize;
    assert!(rounds >= 3, "{rounds} rounds");
    assert_eq!(lines.len(), rounds);
    // header, one event per round, then the final and the best model's test metrics
    assert_eq!(events.len(), 1 + rounds + 2);
    for (e, l) in events[1..=rounds].iter().zip(&lines) {
        assert_eq!(e.step, l["round"].as_u64().unwrap());
        let get = |tag: &str| e.scalars.iter().find(|(t, _)| t == tag).map(|s| s.1);
        for (name, v) in l["val"]["all"].as_object().unwrap() {
            assert_eq!(
                get(&format!("val/{name}")),
                Some(v.as_f64().unwrap() as f32)
            );
        }
        assert_eq!(
            get("train/loss"),
            l["train_loss"].as_f64().map(|v| v as f32)
        );
        let steps: u64 = l["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_u64().unwrap())
            .sum();
        assert_eq!(get("train/steps"), Some(steps as f32));
        assert_eq!(
            get("time/train_s"),
            Some(l["elapsed_s"].as_f64().unwrap() as f32)
        );
    }
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let (last, best) = (&events[rounds + 1], &events[rounds + 2]);
    assert_eq!(last.step, s["rounds"].as_u64().unwrap());
    assert_eq!(best.step, s["best_round"].as_u64().unwrap());
    let expect = |prefix: &str, all: &serde_json::Value| -> Vec<(String, f32)> {
        all.as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (format!("{prefix}/{k}"), v.as_f64().unwrap() as f32))
            .collect()
    };
    assert_eq!(last.scalars, expect("test", &s["final_test"]["all"]));
    assert_eq!(best.scalars, expect("best_test", &s["best_test"]["all"]));
    assert!(!last.scalars.is_empty());
    let config = std::fs::read_to_string(out.join("config.toml")).unwrap();
    let abs = std::fs::canonicalize(&tb).unwrap();
    assert!(
        config.contains(&format!("tensorboard = \"{}\"", abs.display())),
        "{config}"
    );

    // a run refused before its first round (here by the memory check when it prepares)
    // leaves no event file and no folder, as it leaves no run directory
    let tb2 = tmp.path().join("tb2");
    let mut spec = run_into(
        &tmp.path().join("run-y"),
        Method::RandomTma,
        2,
        Duration::from_millis(300),
        false,
    );
    spec.tensorboard = Some(tb2.clone());
    let mut run = Run::start(spec).unwrap();
    let file = run.tensorboard_file().unwrap().to_path_buf();
    assert!(file.is_file());
    run.set_available_memory(Some(1));
    assert!(run.train(&mut Quiet).is_err());
    assert!(!file.exists() && !tb2.join("run-y").exists());
    assert!(tb2.is_dir(), "the folder the user named stays");
}

#[test]
fn a_training_seed_apart_from_the_datas_is_refused_off_a_partition_directory() {
    // RunSpec::training_seed separates the training's seed from the split's and partition's
    // only where those are fixed apart from it (a partition directory); elsewhere one seed
    // makes both, and a second one would be silently ignored
    let dir = tempfile::tempdir().unwrap();
    let mut spec = RunSpec::new(
        quick(Method::RandomTma, 2),
        DataSource::InMemory(Box::new(sbm(300))),
    );
    spec.out = Some(dir.path().join("run"));
    spec.training_seed = Some(1);
    let err = Run::start(spec).err().expect("refused").to_string();
    assert!(
        err.contains("a training seed apart from the data's applies to a partition directory only"),
        "{err}"
    );
    assert!(!dir.path().join("run").exists(), "nothing written");
}
