//! The `tma` binary as a user runs it: outputs on disk, exit codes, error messages.

use std::path::{Path, PathBuf};
use std::process::Output;

use tma_graph::npy;

use crate::harness::{
    assert_fails_with, assert_success, json_file, shared_dataset, stderr, stdout, summary, tempdir,
    text, tma, train_on_partitions, QUICK,
};

#[test]
fn train_on_generated_graph_writes_every_output() {
    let dir = tempdir();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    // the plain schedule (no averaging ramp: its rounds are counted below)
    let mut args = vec!["train", "--out", o, "--trainers", "2", "--sync-ramp", "0"];
    args.extend_from_slice(QUICK);
    let r = tma(&args);
    assert_success(&r);
    assert!(!stderr(&r).contains("warning"), "{}", stderr(&r));
    for f in [
        "config.toml",
        "partition.json",
        "rounds.jsonl",
        "summary.json",
        "model_final.safetensors",
        "model_best.safetensors",
    ] {
        assert!(out.join(f).is_file(), "missing {f}");
    }
    let rounds = std::fs::read_to_string(out.join("rounds.jsonl")).unwrap();
    let n = rounds.lines().count();
    // 1 s / 300 ms = rounds due at 0.3, 0.6, 0.9 and 1.0 s; a round formed late, at or past
    // the limit, is the last one (so 3 under load)
    assert!(
        n == 4 || n == 3,
        "1 s / 300 ms = rounds at 0.3, 0.6, 0.9, 1.0 s:\n{rounds}"
    );
    let last: serde_json::Value = serde_json::from_str(rounds.lines().last().unwrap()).unwrap();
    assert!(last["elapsed_s"].as_f64().unwrap() >= 1.0, "{rounds}");
    let first: serde_json::Value = serde_json::from_str(rounds.lines().next().unwrap()).unwrap();
    assert_eq!(first["round"], 1);
    assert_eq!(first["participants"], serde_json::json!([0, 1]));
    let summary = summary(&out);
    assert_eq!(summary["rounds"], n);
    assert_eq!(summary["final_test"]["metric"], "accuracy");
    let acc = summary["best_test"]["value"].as_f64().unwrap();
    assert!(acc > 0.3, "generated SBM (8 classes) accuracy {acc}");
    let stdout = stdout(&r);
    assert!(stdout.contains(&format!("done: {n} rounds")), "{stdout}");
    // node task: the majority-class rate is printed and recorded beside accuracy (the SBM's 8
    // classes are balanced: about 1/8), and every round records what validation cost
    let maj = summary["best_val"]["all"]["majority_rate"]
        .as_f64()
        .unwrap();
    assert!((0.08..0.2).contains(&maj), "majority rate {maj}");
    assert!(
        stdout.contains(&format!("majority-class rate: val={maj:.4}")),
        "{stdout}"
    );
    assert!(first["eval_cpu_s"].as_f64().unwrap() > 0.0, "{rounds}");

    // the same run directory is never overwritten
    let again = tma(&args);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );

    // the resolved config is accepted back by --config
    let out2 = dir.path().join("run2");
    let cfg = out.join("config.toml");
    let r2 = tma(&[
        "train",
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out2.to_str().unwrap(),
        "--quiet",
    ]);
    assert_success(&r2);
    // a config.toml lists every option (super_nodes, llcg_steps, ...): none is "ignored"
    assert!(!stderr(&r2).contains("warning"), "{}", stderr(&r2));
    let c1 = std::fs::read_to_string(&cfg).unwrap();
    let c2 = std::fs::read_to_string(out2.join("config.toml")).unwrap();
    assert_eq!(
        c1, c2,
        "a run from a resolved config resolves to the same config"
    );
}

/// The default averaging ramp (decision 0015): the first --sync-every cut into 16 rounds, said
/// on the training line and recorded in config.toml; `--sync-ramp 1025` is refused.
#[test]
fn default_ramp_forms_the_first_rounds_early_and_says_so() {
    let dir = tempdir();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    let r = tma(&[
        "train",
        "--gen-nodes",
        "600",
        "--hidden",
        "16",
        "--trainers",
        "2",
        "--sync-every",
        "1s",
        "--time-limit",
        "1s",
        "--out",
        o,
    ]);
    assert_success(&r);
    assert!(
        stderr(&r).contains("sync every 1s, the first 1s every 62.5ms (--sync-ramp 16)"),
        "{}",
        stderr(&r)
    );
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(out.join("rounds.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // slots every 0.0625 s up to 1 s: each formed or skipped (a round late past a slot skips
    // it; a round late at or past the limit is the last one)
    let skipped: u64 = rows
        .iter()
        .map(|v| v.get("skipped_slots").map_or(0, |s| s.as_u64().unwrap()))
        .sum();
    let slots = rows.len() as u64 + skipped;
    assert!(slots == 16 || slots == 15, "{rows:?}");
    assert!(rows[0]["elapsed_s"].as_f64().unwrap() < 1.0, "{rows:?}");
    let config = std::fs::read_to_string(out.join("config.toml")).unwrap();
    assert!(config.contains("sync_ramp = 16\n"), "{config}");
    let r = tma(&["train", "--gen-nodes", "600", "--sync-ramp", "1025"]);
    assert_fails_with(&r, 1, &["sync-ramp must be at most 1024"]);
    // regression (fresh-user report): ggs, which averages no models, took the ramp (its
    // rounds are validation points: 9-13 of them in the first span, at half the steps), and
    // the step-count schedule's training line said "sync every 5s"
    let common = [
        "train",
        "--gen-nodes",
        "600",
        "--hidden",
        "16",
        "--trainers",
        "2",
    ];
    let ggs_out = dir.path().join("ggs");
    let mut args = common.to_vec();
    args.extend_from_slice(&[
        "--method",
        "ggs",
        "--sync-every",
        "1s",
        "--time-limit",
        "2s",
    ]);
    args.extend_from_slice(&["--out", ggs_out.to_str().unwrap()]);
    let r = tma(&args);
    assert_success(&r);
    assert!(
        stderr(&r).contains("sync every 1s, time limit"),
        "{}",
        stderr(&r)
    );
    let rounds = std::fs::read_to_string(ggs_out.join("rounds.jsonl")).unwrap();
    let n = rounds.lines().count();
    assert!((1..=2).contains(&n), "{rounds}");
    let steps_out = dir.path().join("steps");
    let mut args = common.to_vec();
    args.extend_from_slice(&["--sync-every-steps", "5", "--time-limit", "1s"]);
    args.extend_from_slice(&["--out", steps_out.to_str().unwrap()]);
    let r = tma(&args);
    assert_success(&r);
    assert!(
        stderr(&r).contains("sync every 5 steps, time limit"),
        "{}",
        stderr(&r)
    );
}

#[test]
fn missing_dataset_file_is_named_in_the_error() {
    let dir = tempdir();
    let ds = dir.path().join("broken");
    std::fs::create_dir(&ds).unwrap();
    std::fs::write(ds.join("meta.json"), r#"{"directed": false}"#).unwrap();
    let out = dir.path().join("run");
    let r = tma(&[
        "train",
        "--dataset",
        ds.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_fails_with(&r, 1, &["edge_index.npy"]);
    assert!(!out.join("summary.json").exists());
}

#[test]
fn truncated_npy_is_an_error_not_a_panic() {
    let dir = tempdir();
    let ds = dir.path().join("trunc");
    std::fs::create_dir(&ds).unwrap();
    std::fs::write(ds.join("meta.json"), r#"{"directed": false}"#).unwrap();
    // a valid header announcing [2, 4] int64 followed by only 3 values
    let mut bytes = npy::encode(&[0i64, 1, 1, 0, 2, 2, 3, 3], &[2, 4]);
    bytes.truncate(bytes.len() - 5 * 8);
    std::fs::write(ds.join("edge_index.npy"), bytes).unwrap();
    let r = tma(&["info", "--dataset", ds.to_str().unwrap()]);
    assert_fails_with(&r, 1, &["edge_index.npy", "truncated data"]);
}

#[test]
fn info_on_cora_prints_the_summary_and_split() {
    let ds = shared_dataset("planetoid_cora");
    let r = tma(&["info", "--dataset", ds.to_str().unwrap()]);
    assert_success(&r);
    assert_eq!(
        stdout(&r),
        "planetoid_cora: 2708 nodes, 10556 arcs (undirected), features 1433-d sparse (nnz 49216), 7 classes, split 140/500/1000\n\
         removed on load: 0 self-loops, 0 duplicate arcs\n\
         split: train 140 / val 500 / test 1000\n"
    );
}

/// Regression (fresh-eyes trial): an unlabelled graph's info, and a node run refused on it,
/// promised a seeded 60/20/20 node split.
#[test]
fn an_unlabelled_graph_is_promised_no_node_split() {
    let ds = shared_dataset("seal_Yeast");
    let r = tma(&["info", "--dataset", ds.to_str().unwrap()]);
    assert_success(&r);
    assert_eq!(
        stdout(&r),
        "seal_Yeast: 2375 nodes, 23386 arcs (undirected), no node features (32 structural columns generated: degree + random), no labels, no fixed split (tma train --task link holds edges out)\n\
         removed on load: 0 self-loops, 0 duplicate arcs\n\
         split: none fixed (tma train --task link holds edges out)\n"
    );
    let dir = tempdir();
    let out = dir.path().join("run");
    let r = tma(&[
        "train",
        "--dataset",
        ds.to_str().unwrap(),
        "--task",
        "node",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_fails_with(&r, 1, &["has no node labels"]);
    assert!(!text(&r).contains("60/20/20"), "{}", text(&r));
}

#[test]
fn bad_flags_are_rejected_with_a_reason() {
    let dir = tempdir();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--sync-every", "soon"], "not a duration"),
        (&["--fanouts", "10"], "fanouts"),
        (&["--model", "llama"], "llama"),
        (&["--model", "gat", "--hidden", "30"], "multiple of heads"),
        (
            &["--fail", "9@1s"],
            "trainer 9 does not exist (trainers are 0 to 3)",
        ),
        (&["--method", "magic"], "magic"),
        (&["--eval-every", "0"], "eval-every must be >= 1"),
        (
            &["--round-timeout", "soon"],
            "--round-timeout: 'soon' is not a duration",
        ),
        (&["--round-timeout", "0s"], "round-timeout must be > 0"),
        (
            &["--eval-inference", "fast"],
            "--eval-inference: unknown eval inference 'fast' (expected auto, full or restricted)",
        ),
        (
            &["--matmul-precision", "low"],
            "--matmul-precision: unknown matmul precision \"low\" (expected highest or medium)",
        ),
        (
            &["--eval-memory", "lots"],
            "--eval-memory: \"lots\" is not a size",
        ),
        (
            &["--eval-memory", "0"],
            "eval-memory must be at least 16MiB",
        ),
        (&["--eval-max-nodes", "0"], "eval-max-nodes must be >= 1"),
        // negative numbers reach the range checks (regression: clap read `-0.1` as a flag,
        // "unexpected argument '-0' found", naming no option)
        (&["--dropout", "-0.1"], "dropout must be in [0, 1)"),
        (&["--dropout", "1"], "dropout must be in [0, 1)"),
        (&["--lr", "-1e-3"], "lr must be > 0 and finite"),
        // infinite values diverge the model to NaN (regression: accepted before; refused
        // before the library, whose options are JSON, as the Python package refuses them)
        (&["--lr", "inf"], "--lr: 'inf' is not a finite number"),
        (
            &["--weight-decay", "-1"],
            "weight-decay must be >= 0 and finite",
        ),
        (
            &["--weight-decay", "inf"],
            "--weight-decay: 'inf' is not a finite number",
        ),
        (&["--clip-norm", "-1"], "clip-norm must be > 0"),
        (&["--val-frac", "-0.01"], "val-frac must be >= 0"),
        (&["--test-frac", "-0.01"], "test-frac must be >= 0"),
        (
            &["--val-frac", "0.6", "--test-frac", "0.4"],
            "val-frac + test-frac must be in [0, 1)",
        ),
        (
            &["--eval-fanouts", "5"],
            "eval-fanouts has 1 entries but the model has 2 layers",
        ),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["train", "--out", o, "--quiet"];
        args.extend_from_slice(extra);
        let r = tma(&args);
        assert_ne!(r.status.code(), Some(0), "{extra:?} accepted");
        assert!(stderr(&r).contains(needle), "{extra:?}: {}", stderr(&r));
        assert!(!Path::new(o).join("summary.json").exists());
    }
}

#[test]
fn node_task_without_labels_says_what_to_do() {
    // a link-prediction-only graph: a 4-cycle with no y.npy
    let dir = tempdir();
    let ds_dir = dir.path().join("unlabelled");
    std::fs::create_dir(&ds_dir).unwrap();
    std::fs::write(ds_dir.join("meta.json"), r#"{"directed": false}"#).unwrap();
    npy::write(
        &ds_dir.join("edge_index.npy"),
        &[0i64, 1, 1, 2, 2, 3, 3, 0, 1, 0, 2, 1, 3, 2, 0, 3],
        &[2, 8],
    )
    .unwrap();
    let ds = ds_dir.to_str().unwrap().to_string();
    let out = dir.path().join("run");
    let r = tma(&[
        "train",
        "--dataset",
        &ds,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_fails_with(&r, 1, &["--task link"]);
    // a run that failed before its first round leaves no run directory behind
    assert!(!out.exists(), "{} left behind", out.display());
}

/// The assignment hash `tma partition` prints on its last line.
fn assignment_sha256(o: &Output) -> String {
    let out = stdout(o);
    let line = out.lines().last().unwrap_or_default();
    line.split("assignment sha256 ")
        .nth(1)
        .unwrap_or_else(|| panic!("no hash in {out}"))
        .to_string()
}

#[test]
fn partition_refuses_fewer_super_nodes_than_parts_as_train_does() {
    // regression: `tma partition --method super --super-nodes 0` exited 0 ("0 clusters
    // requested, 1 obtained") where `tma train --method super-tma` refuses the same numbers
    for k in ["0", "2"] {
        let r = tma(&[
            "partition",
            "--gen-nodes",
            "400",
            "--parts",
            "4",
            "--method",
            "super",
            "--super-nodes",
            k,
        ]);
        assert_fails_with(
            &r,
            1,
            &[&format!(
                "--super-nodes ({k}) must be >= --parts + --drop-parts (4)"
            )],
        );
    }
}

#[test]
fn partition_method_takes_the_train_method_names_too() {
    let part = |method: &str| {
        let r = tma(&[
            "partition",
            "--gen-nodes",
            "400",
            "--parts",
            "2",
            "--super-nodes",
            "20",
            "--seed",
            "3",
            "--method",
            method,
        ]);
        assert!(r.status.success(), "--method {method}: {}", stderr(&r));
        assignment_sha256(&r)
    };
    let pairs = [
        ("random", "random-tma"),
        ("super", "super-tma"),
        ("metis", "psgd-pa"),
    ];
    let hashes: Vec<String> = pairs
        .iter()
        .map(|(name, alias)| {
            let h = part(name);
            assert_eq!(h, part(alias), "{alias} is {name}");
            h
        })
        .collect();
    // three different partitioners, so the alias comparison above means something
    assert_ne!(hashes[0], hashes[1]);
    assert_ne!(hashes[0], hashes[2]);
    assert_ne!(hashes[1], hashes[2]);

    // every training method names its layout: llcg's is psgd-pa's (metis)
    assert_eq!(part("llcg"), hashes[2]);

    // the help lists the layouts, generated from the method registry
    let h = tma(&["partition", "--help"]);
    let help = stdout(&h);
    assert!(
        help.contains("Layout, with the methods that train on it: random (random-tma), super (super-tma), metis (psgd-pa, llcg), shared-examples (ggs), whole (centralized); or a `tma train --method` name"),
        "{help}"
    );
    // an unknown name is refused with the layouts and the methods
    let r = tma(&["partition", "--gen-nodes", "400", "--method", "metiss"]);
    assert_eq!(r.status.code(), Some(2));
    assert!(
        stderr(&r).contains("unknown layout 'metiss' (expected a layout: random, super, metis, shared-examples, whole; or a training method, which lays out its own: random-tma, super-tma, psgd-pa, llcg, ggs, centralized)"),
        "{}",
        stderr(&r)
    );
    // a layout without an assignment has nothing to report without --out
    let r = tma(&["partition", "--gen-nodes", "400", "--method", "ggs"]);
    assert_eq!(r.status.code(), Some(1));
    assert!(
        stderr(&r).contains("--method ggs: the shared-examples layout assigns no node to a part (nothing to report); write it with --out DIR"),
        "{}",
        stderr(&r)
    );

    // a partition directory written under a method's name records its layout
    let dir = tempdir();
    let out = dir.path().join("parts");
    let r = tma(&[
        "partition",
        "--gen-nodes",
        "400",
        "--parts",
        "2",
        "--method",
        "psgd-pa",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_success(&r);
    let m = json_file(&out.join("manifest.json"));
    assert_eq!(m["format_version"], 2);
    assert_eq!(m["data"]["layout"], "metis");
    assert!(m["data"].get("method").is_none(), "{m}");
}

/// `tma partition --out DIR --method X` for the layout named `x` (gen 400 nodes, 2 parts).
fn layout_dir(dir: &Path, x: &str) -> PathBuf {
    let out = dir.join(format!("parts-{x}"));
    let r = tma(&[
        "partition",
        "--gen-nodes",
        "400",
        "--parts",
        "2",
        "--method",
        x,
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_success(&r);
    out
}

#[test]
fn any_method_of_a_directorys_layout_trains_from_it_and_others_are_refused() {
    // issue 28: a partition directory recorded the method, so llcg and ggs could not train
    // from one; it records the layout now, and any method with that layout trains from it
    let dir = tempdir();
    let metis = layout_dir(dir.path(), "metis");
    let run = dir.path().join("llcg");
    let r = train_on_partitions(metis.to_str().unwrap(), &run, &["--method", "llcg"]);
    assert_success(&r);
    let s = summary(&run);
    assert_eq!(s["method"], "llcg");
    assert_eq!(s["num_trainers"], 2);
    // no --method: the layout's first method (psgd-pa)
    let run = dir.path().join("default");
    assert_success(&train_on_partitions(metis.to_str().unwrap(), &run, &[]));
    assert_eq!(summary(&run)["method"], "psgd-pa");
    // ggs from a directory of its own layout (the whole graph, shares of the examples)
    let shared = layout_dir(dir.path(), "ggs");
    let m = json_file(&shared.join("manifest.json"));
    assert_eq!(m["data"]["layout"], "shared-examples");
    let run = dir.path().join("ggs");
    assert_success(&train_on_partitions(
        shared.to_str().unwrap(),
        &run,
        &["--method", "ggs"],
    ));
    let s = summary(&run);
    assert_eq!(s["method"], "ggs");
    assert!(s["rounds"].as_u64().unwrap() >= 1, "{s}");
    // a method of another layout: refused naming both layouts and the methods that fit
    let r = train_on_partitions(
        metis.to_str().unwrap(),
        &dir.path().join("x"),
        &["--method", "ggs"],
    );
    assert_fails_with(
        &r,
        1,
        &[&format!(
            "error: --partitions {} holds the metis layout; method ggs trains on the shared-examples layout (methods for this directory: psgd-pa, llcg); write one with `tma partition --out DIR --method ggs`",
            metis.display()
        )],
    );
    assert!(!dir.path().join("x").exists());
}

#[test]
fn a_version_1_partition_directory_trains_as_the_method_it_recorded() {
    // directories written before issue 28 recorded the method (format version 1)
    let dir = tempdir();
    let parts = layout_dir(dir.path(), "metis");
    let mf = parts.join("manifest.json");
    let mut m = json_file(&mf);
    m["format_version"] = 1.into();
    let data = m["data"].as_object_mut().unwrap();
    data.remove("layout");
    data.insert("method".into(), "llcg".into());
    std::fs::write(&mf, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    let run = dir.path().join("run");
    assert_success(&train_on_partitions(parts.to_str().unwrap(), &run, &[]));
    assert_eq!(summary(&run)["method"], "llcg");
    // any method of its layout still trains from it
    let run = dir.path().join("psgd");
    assert_success(&train_on_partitions(
        parts.to_str().unwrap(),
        &run,
        &["--method", "psgd-pa"],
    ));
    assert_eq!(summary(&run)["method"], "psgd-pa");
}

#[test]
fn compare_refuses_train_options_it_cannot_honour() {
    let dir = tempdir();
    let out = dir.path().join("cmp");
    let o = out.to_str().unwrap();
    let cfg = dir.path().join("mpi.toml");
    std::fs::write(&cfg, "partitions = \"/data/parts\"\n").unwrap();
    let c = cfg.to_str().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--resume", "/tmp/some-run"],
            &["--resume /tmp/some-run continues that comparison; drop --out"],
        ),
        (
            &["--engine", "mpi"],
            &["--engine mpi is not supported by `tma compare`"],
        ),
        (
            &["--join-timeout", "5s"],
            &["--join-timeout is not supported by `tma compare`"],
        ),
        (
            &["--partitions", "/data/parts"],
            &["--partitions is not supported by `tma compare`"],
        ),
        (
            &["--config", c],
            &["--partitions (set in the --config file) is not supported by `tma compare`"],
        ),
        (
            &["--gen-nodes", "300", "--dataset", "/data/cora"],
            &[
                "--gen-nodes 300 sizes the generated graph",
                "--dataset /data/cora",
            ],
        ),
        // a run that would fail (ggs refuses a step schedule) fails before any run starts
        (
            &["--sync-every-steps", "3", "--methods", "random-tma,ggs"],
            &["--methods ggs", "sync-every-steps does not apply to ggs"],
        ),
    ];
    for (extra, needles) in cases {
        let mut args = vec!["compare", "--out", o, "--quiet"];
        args.extend_from_slice(extra);
        let r = tma(&args);
        assert_eq!(r.status.code(), Some(1), "{extra:?} accepted");
        for n in *needles {
            assert!(stderr(&r).contains(n), "{extra:?}: {}", stderr(&r));
        }
        assert!(!out.exists(), "{extra:?} created {o}");
    }

    // options compare does honour still run: --engine in-process, --out, --quiet
    let mut args = vec![
        "compare",
        "--out",
        o,
        "--engine",
        "in-process",
        "--methods",
        "centralized",
        "--seeds",
        "0",
        "--super-nodes",
        "50",
    ];
    args.extend_from_slice(QUICK);
    let r = tma(&args);
    assert_success(&r);
    assert!(out.join("results.json").is_file());
    assert!(
        stderr(&r).contains("warning: --super-nodes is ignored: only --method super-tma uses super-nodes (method: centralized)"),
        "{}",
        stderr(&r)
    );
}

#[test]
fn contradictory_train_options_are_errors() {
    let dir = tempdir();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--drop-parts", "1", "--method", "centralized"],
            "drop-parts 1 does not apply to method centralized (one trainer on the whole graph, no parts to drop)",
        ),
        (
            &["--gen-nodes", "300", "--dataset", "/data/cora"],
            "--gen-nodes 300 sizes the generated graph, which is used only without --dataset and --partitions (this run reads --dataset /data/cora)",
        ),
        (
            &["--sync-every-steps", "5", "--sync-ramp", "2"],
            "--sync-ramp shortens the first wall-clock spans; the step-count schedule (--sync-every-steps) has none",
        ),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["train", "--out", o, "--quiet"];
        args.extend_from_slice(extra);
        let r = tma(&args);
        assert_eq!(r.status.code(), Some(1), "{extra:?} accepted");
        assert!(stderr(&r).contains(needle), "{extra:?}: {}", stderr(&r));
        assert!(!out.exists(), "{extra:?} created {o}");
    }
}

#[test]
fn ignored_train_options_are_warned_about() {
    let dir = tempdir();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["--super-nodes", "50", "--llcg-steps", "3", "--join-timeout", "5s"],
            &[
                "warning: --super-nodes is ignored: only --method super-tma uses super-nodes (method: random-tma)",
                "warning: --llcg-steps is ignored: only --method llcg takes global correction steps (method: random-tma)",
                "warning: --join-timeout is ignored: it applies only to --engine mpi (this run is in-process)",
            ],
        ),
        (
            &["--method", "centralized", "--trainers", "3", "--average-weight", "nodes"],
            &[
                "warning: --trainers is ignored: centralized trains one trainer on the whole graph",
                "warning: --average-weight is ignored",
            ],
        ),
        (
            &["--heads", "4"],
            &["warning: --heads is ignored: it is an option of --model gat (model: sage)"],
        ),
        // regression (fresh-user report): ggs takes no ramp, and a typed --sync-ramp said nothing
        (
            &["--method", "ggs", "--sync-ramp", "8"],
            &["warning: --sync-ramp is ignored: ggs averages no models (it synchronizes gradients every step; its rounds are validation points) (method: ggs)"],
        ),
    ];
    for (i, (extra, needles)) in cases.iter().enumerate() {
        let out = dir.path().join(format!("run{i}"));
        let mut args = vec!["train", "--out", out.to_str().unwrap()];
        args.extend_from_slice(QUICK);
        args.extend_from_slice(extra);
        let r = tma(&args);
        // a warning, not an error: the run completes
        assert!(r.status.success(), "{extra:?}: {}", stderr(&r));
        assert!(out.join("summary.json").is_file());
        let e = stderr(&r);
        for n in *needles {
            assert!(e.contains(n), "{extra:?}: {e}");
        }
        assert_eq!(e.matches("warning:").count(), needles.len(), "{e}");
    }
}

/// `tma bench` rejects sizes it cannot measure, an empty report and inconsistent peer figures
/// with a message naming the flag or file line, exit code 1, no panic.
#[test]
fn bench_rejects_bad_sizes_reports_and_peers() {
    let cases: [(&[&str], &str); 6] = [
        (
            &[
                "bench",
                "--quick",
                "--only",
                "dense",
                "--json",
                "/nonexistent-dir/x.jsonl",
            ],
            "opening /nonexistent-dir/x.jsonl",
        ),
        (
            &[
                "bench",
                "--quick",
                "--only",
                "fullgraph",
                "--full-nodes",
                "100000000000",
            ],
            "--full-nodes 100000000000: at most 2147483647 nodes",
        ),
        (
            &[
                "bench",
                "--quick",
                "--only",
                "minibatch",
                "--mb-degree",
                "0",
            ],
            "--mb-degree must be at least 1",
        ),
        (
            &[
                "bench",
                "--quick",
                "--only",
                "minibatch",
                "--mb-nodes",
                "10",
            ],
            "--node-batch 64 is larger than the mini-batch graph (--mb-nodes 10)",
        ),
        (
            &["bench", "--quick", "--only", "dense", "--iters", "0"],
            "--iters must be at least 1",
        ),
        (
            &["bench", "--quick", "--threads", "100000"],
            "--threads 100000: at most 1024",
        ),
    ];
    for (args, msg) in cases {
        let o = tma(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let e = stderr(&o);
        assert!(e.contains(msg), "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{args:?}: {e}");
    }
    let dir = tempdir();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let o = tma(&["bench", "--report", empty.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("empty.jsonl: no figures"),
        "{}",
        stderr(&o)
    );
    let ours = dir.path().join("ours.jsonl");
    std::fs::write(
        &ours,
        r#"{"key":"fullgraph.iter","what":"w","value":0.5,"unit":"s/iter","higher_is_better":false,"ceiling_frac":0.4,"ceiling":"c","peak_rss_mib":1000.0}"#,
    )
    .unwrap();
    for (line, msg) in [
        (
            r#"{"key":"fullgraph.iter","value":-1,"unit":"s/iter","higher_is_better":false}"#,
            "line 2: peer figure \"fullgraph.iter\": value must be a finite number > 0, got -1",
        ),
        (
            r#"{"key":"fullgraph.iter","value":3,"unit":"GB/s","higher_is_better":false}"#,
            "line 2: peer figure \"fullgraph.iter\": unit \"GB/s\" does not match ours (\"s/iter\")",
        ),
    ] {
        let peers = dir.path().join("peers.jsonl");
        std::fs::write(&peers, format!("not json\n{line}\n")).unwrap();
        let o = tma(&[
            "bench",
            "--report",
            ours.to_str().unwrap(),
            "--peers",
            peers.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(1), "{line}");
        assert!(stderr(&o).contains(msg), "{}", stderr(&o));
    }
    // a good peer line: the ratio is printed (6.0 / 0.5 = 12x) and the target is met
    let peers = dir.path().join("peers.jsonl");
    std::fs::write(
        &peers,
        r#"{"key":"fullgraph.iter","value":6.0,"unit":"s/iter","higher_is_better":false,"peak_rss_mib":6000.0,"impl":"pyg"}"#,
    )
    .unwrap();
    let o = tma(&[
        "bench",
        "--report",
        ours.to_str().unwrap(),
        "--peers",
        peers.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("12.00x (met)"), "{out}");
}

#[test]
fn compare_help_lists_only_the_options_compare_takes() {
    // regression: `tma compare --help` listed --method, --seed, --engine, --partitions and
    // --join-timeout, each then refused; --resume is compare's own (it continues a comparison)
    let o = tma(&["compare", "--help"]);
    assert_success(&o);
    let help = stdout(&o);
    for hidden in [
        "--method ",
        "--seed ",
        "--partitions ",
        "--engine ",
        "--join-timeout ",
    ] {
        assert!(!help.contains(hidden), "{hidden} in:\n{help}");
    }
    for shown in [
        "--methods ",
        "--seeds ",
        "--time-limit ",
        "--sync-every ",
        "--resume <OUT>",
    ] {
        assert!(help.contains(shown), "{shown} missing from:\n{help}");
    }
    // and `tma train --help` keeps them
    let t = stdout(&tma(&["train", "--help"]));
    assert!(t.contains("--method ") && t.contains("--engine ") && t.contains("--resume "));
}

#[test]
fn a_config_file_number_that_is_not_finite_is_refused_naming_the_file_and_key() {
    // regression: `lr = inf` in a --config file trained with the default lr without a word
    // (merged with the flags through JSON, the number read as "not given")
    let dir = tempdir();
    let cases = [
        ("lr = inf", "lr = inf is not a finite number"),
        ("dropout = nan", "dropout = NaN is not a finite number"),
        // past f32: read as inf
        ("clip_norm = 1e39", "clip_norm = inf is not a finite number"),
    ];
    for (line, needle) in cases {
        let cfg = dir.path().join("c.toml");
        std::fs::write(&cfg, format!("{line}\n")).unwrap();
        let out = dir.path().join("run");
        let r = tma(&[
            "train",
            "--config",
            cfg.to_str().unwrap(),
            "--gen-nodes",
            "300",
            "--time-limit",
            "1s",
            "--out",
            out.to_str().unwrap(),
        ]);
        let file = format!("config file {} is not valid: ", cfg.display());
        assert_fails_with(&r, 1, &[&file, needle]);
        assert!(!out.exists(), "{line}: a run directory was made");
    }
}
