//! Issue 11 ("nothing silent") as a user meets it: small broken inputs written by the test,
//! Ctrl-C, resume with other options, a model too large, ignored flags. Every case ends with
//! exit 0 and the stated warning, or a non-zero exit naming the file or flag.

use crate::harness::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tma_graph::npy;

/// A dataset directory: undirected `edges` (both directions written), `n` nodes, 2 classes
/// (`y = v % 2`), 4-d dense features, index split train/val/test as given.
fn write_dataset(dir: &Path, n: usize, edges: &[(i64, i64)], split: [&[i64]; 3]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("meta.json"),
        format!(r#"{{"name": "tiny", "directed": false, "computed": {{"nodes": {n}}}, "x_shape": [{n}, 4]}}"#),
    )
    .unwrap();
    let mut src = vec![];
    let mut dst = vec![];
    for &(a, b) in edges {
        src.extend([a, b]);
        dst.extend([b, a]);
    }
    let e = src.len();
    src.extend(dst);
    npy::write(&dir.join("edge_index.npy"), &src, &[2, e]).unwrap();
    let indptr: Vec<i64> = (0..=n as i64).map(|v| 4 * v).collect();
    let indices: Vec<i64> = (0..n as i64).flat_map(|_| 0..4).collect();
    let data: Vec<f32> = (0..4 * n).map(|k| (k % 7) as f32 * 0.5).collect();
    npy::write(&dir.join("x_indptr.npy"), &indptr, &[n + 1]).unwrap();
    npy::write(&dir.join("x_indices.npy"), &indices, &[4 * n]).unwrap();
    npy::write(&dir.join("x_data.npy"), &data, &[4 * n]).unwrap();
    let y: Vec<i64> = (0..n as i64).map(|v| v % 2).collect();
    npy::write(&dir.join("y.npy"), &y, &[n]).unwrap();
    for (name, ids) in ["train_idx.npy", "val_idx.npy", "test_idx.npy"]
        .iter()
        .zip(split)
    {
        npy::write(&dir.join(name), ids, &[ids.len()]).unwrap();
    }
    dir.to_path_buf()
}

fn ring(n: i64) -> Vec<(i64, i64)> {
    (0..n).map(|v| (v, (v + 1) % n)).collect()
}

#[test]
fn top_level_help_says_what_tma_does_in_one_line() {
    let r = tma(&["--help"]);
    assert_success(&r);
    assert_eq!(
        stdout(&r).lines().next().unwrap(),
        "Train graph neural networks with M independent trainers on a randomized graph partition whose models are averaged every fixed span of wall-clock time (RandomTMA/SuperTMA)"
    );
}

#[test]
fn info_reports_removed_arcs_and_unlabelled_split_nodes() {
    let dir = tempdir();
    let mut edges = ring(6);
    edges.extend([(0, 1), (2, 2)]); // a duplicate edge (2 arcs) and a self-loop (2 arcs)
    let ds = write_dataset(
        &dir.path().join("d"),
        6,
        &edges,
        [&[0, 1], &[2, 3], &[4, 5]],
    );
    let mut y = vec![0i64, 1, -1, 1, 0, -1];
    npy::write(&ds.join("y.npy"), &y, &[6]).unwrap();
    let r = tma(&["info", "--dataset", ds.to_str().unwrap()]);
    assert_success(&r);
    assert!(
        stdout(&r).contains("removed on load: 2 self-loops, 2 duplicate arcs\n"),
        "{}",
        text(&r)
    );
    let e = stderr(&r);
    assert!(
        e.contains(&format!(
            "warning: {}: removed 2 self-loops and 2 duplicate arcs on load",
            ds.join("edge_index.npy").display()
        )),
        "{e}"
    );
    // a CSV edge list: the warning names the CSV read (it named edge_index.npy)
    let csv = dir.path().join("e.csv");
    std::fs::write(&csv, "src,dst\n0,1\n1,1\n0,1\n1,2\n").unwrap();
    let r = tma(&["info", "--dataset", csv.to_str().unwrap()]);
    assert_success(&r);
    assert!(
        stderr(&r).contains(&format!(
            "warning: {}: removed 1 self-loop and 1 duplicate arc on load (the graph keeps neither)\n",
            csv.display()
        )),
        "{}",
        text(&r)
    );
    assert!(!stderr(&r).contains("edge_index.npy"), "{}", text(&r));
    assert!(
        e.contains("warning: split: 0 train / 1 val / 1 test nodes are unlabelled (y = -1)"),
        "{e}"
    );
    // a label above meta.json's class count is refused, naming y.npy
    std::fs::write(
        ds.join("meta.json"),
        r#"{"name": "tiny", "directed": false, "computed": {"nodes": 6, "classes": 2}, "x_shape": [6, 4]}"#,
    )
    .unwrap();
    y[3] = 5;
    npy::write(&ds.join("y.npy"), &y, &[6]).unwrap();
    let r = tma(&["info", "--dataset", ds.to_str().unwrap()]);
    assert_fails_with(
        &r,
        1,
        &[
            "y.npy",
            "label of node 3 is 5, but meta.json says computed.classes = 2",
        ],
    );
}

#[test]
fn broken_features_splits_and_pickles_are_errors_naming_the_file() {
    let dir = tempdir();
    let ds = write_dataset(
        &dir.path().join("d"),
        6,
        &ring(6),
        [&[0, 1], &[2, 3], &[4, 5]],
    );
    let d = ds.to_str().unwrap();
    // NaN in features
    let mut data: Vec<f32> = vec![0.5; 24];
    data[9] = f32::NAN;
    npy::write(&ds.join("x_data.npy"), &data, &[24]).unwrap();
    let r = tma(&["info", "--dataset", d]);
    assert_fails_with(
        &r,
        1,
        &[
            "x_data.npy",
            "1 non-finite feature value",
            "entry 9 (node 2, column 1) = NaN",
        ],
    );
    npy::write(&ds.join("x_data.npy"), &[0.5f32; 24], &[24]).unwrap();
    // train and test share node 1
    npy::write(&ds.join("test_idx.npy"), &[4i64, 5, 1], &[3]).unwrap();
    let out = dir.path().join("run");
    let r = tma(&[
        "train",
        "--dataset",
        d,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_fails_with(
        &r,
        1,
        &[
            "train_idx.npy",
            "1 node of this split also appears in",
            "test_idx.npy (first: 1)",
            "--allow-split-overlap",
        ],
    );
    assert!(!out.exists());
    npy::write(&ds.join("test_idx.npy"), &[4i64, 5], &[2]).unwrap();
    // a pickled (object) array
    let mut bytes = npy::encode_header("|O", &[6], npy::Order::C);
    bytes.extend_from_slice(&[0u8; 48]);
    std::fs::write(ds.join("y.npy"), bytes).unwrap();
    let r = tma(&["info", "--dataset", d]);
    assert_fails_with(
        &r,
        1,
        &[
            "y.npy",
            "expected <i8 (int64) [N] classes",
            "pickled Python objects are not supported",
        ],
    );
}

#[test]
fn partition_writes_parts_without_training_nodes_and_warns_of_empty_parts() {
    let dir = tempdir();
    // 12 nodes, one training node: most parts have none
    let ds = write_dataset(
        &dir.path().join("d"),
        12,
        &ring(12),
        [&[0], &[1, 2, 3], &[4, 5, 6]],
    );
    let d = ds.to_str().unwrap();
    let out = dir.path().join("parts");
    // --num-parts is accepted next to --parts (PyG/DGL name)
    let r = tma(&[
        "partition",
        "--dataset",
        d,
        "--num-parts",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_success(&r);
    assert!(out.join("manifest.json").is_file());
    assert!(
        stderr(&r).contains(
            "no training nodes: written anyway; `tma train` runs such a trainer with weight 0"
        ),
        "{}",
        text(&r)
    );
    let m = json_file(&out.join("manifest.json"));
    let trains: Vec<u64> = m["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["num_train"].as_u64().unwrap())
        .collect();
    assert_eq!(trains.iter().sum::<u64>(), 1);
    assert_eq!(trains.len(), 3);
    // 12 random parts of 12 nodes: some are empty, named
    let r = tma(&[
        "partition",
        "--dataset",
        d,
        "--parts",
        "12",
        "--method",
        "random",
    ]);
    assert_success(&r);
    assert!(
        stderr(&r).contains("parts got no node (part"),
        "{}",
        text(&r)
    );
    // METIS / super: every part non-empty, clusters requested and obtained reported
    let r = tma(&[
        "partition",
        "--dataset",
        d,
        "--parts",
        "10",
        "--method",
        "metis",
    ]);
    assert_success(&r);
    assert!(
        stdout(&r).contains("clusters: 10 requested, "),
        "{}",
        text(&r)
    );
    // --super-nodes above the node count: clamped with a warning
    let r = tma(&[
        "partition",
        "--dataset",
        d,
        "--parts",
        "3",
        "--method",
        "super",
        "--super-nodes",
        "50",
    ]);
    assert_success(&r);
    assert!(
        stderr(&r)
            .contains("warning: --super-nodes 50 exceeds the graph's 12 nodes: clamped to 12"),
        "{}",
        text(&r)
    );
    // and training on it goes on with the parts that have data
    let run = dir.path().join("run");
    let r = tma(&[
        "train",
        "--partitions",
        out.to_str().unwrap(),
        "--hidden",
        "8",
        "--sync-every",
        "200ms",
        "--time-limit",
        "600ms",
        "--out",
        run.to_str().unwrap(),
        "--quiet",
    ]);
    assert_success(&r);
    let s = summary(&run);
    assert!(
        s["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("got no training nodes")),
        "{s}"
    );
}

#[test]
fn tiny_link_graph_says_how_many_edges_it_needs() {
    let dir = tempdir();
    let ds = write_dataset(
        &dir.path().join("d"),
        3,
        &[(0, 1), (1, 2)],
        [&[0], &[1], &[2]],
    );
    let out = dir.path().join("run");
    let r = tma(&[
        "train",
        "--dataset",
        ds.to_str().unwrap(),
        "--task",
        "link",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_fails_with(
        &r,
        1,
        &["it has 2 edge(s); link prediction needs at least 3 (1 validation, 1 test, 1 training)"],
    );
    assert!(!out.exists());
}

#[test]
fn ignored_split_index_is_said_and_too_large_models_are_refused() {
    let dir = tempdir();
    let out = dir.path().join("run");
    let mut args = vec![
        "train",
        "--task",
        "link",
        "--split-index",
        "1",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(QUICK);
    let r = tma(&args);
    assert_success(&r);
    assert!(
        stderr(&r).contains("warning: --split-index 1 is ignored: --task link splits edges"),
        "{}",
        text(&r)
    );
    // regression (issue 11): --hidden 100000000 ran until the OOM killer stopped it
    let out = dir.path().join("huge");
    let r = tma(&[
        "train",
        "--gen-nodes",
        "800",
        "--hidden",
        "100000000",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_fails_with(
        &r,
        1,
        &["GiB of memory but", "--hidden 100000000", "reduce --hidden"],
    );
    assert!(!out.exists(), "a refused run leaves no directory");
}

#[test]
fn resume_with_other_options_names_the_flag_and_both_values() {
    let dir = tempdir();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    let mut args = vec!["train", "--trainers", "2", "--out", o];
    args.extend_from_slice(QUICK);
    assert_success(&tma(&args));
    // a finished run is not resumed; but first, the option check names the flag
    std::fs::remove_file(out.join("summary.json")).unwrap();
    let r = tma(&[
        "train",
        "--resume",
        o,
        "--trainers",
        "3",
        "--hidden",
        "32",
        "--quiet",
    ]);
    assert_fails_with(
        &r,
        1,
        &["--trainers 2 -> 3", "--hidden 16 -> 32", "drop those flags"],
    );
    // the precision may change on resume, and it is said and recorded
    let r = tma(&[
        "train",
        "--resume",
        o,
        "--matmul-precision",
        "medium",
        "--time-limit",
        "2s",
        "--quiet",
    ]);
    assert_success(&r);
    let note =
        "resume: matmul-precision highest -> medium (the rounds before the resume ran at highest)";
    assert!(stderr(&r).contains(note), "{}", stderr(&r));
    let s = summary(&out);
    assert!(
        s["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str() == Some(note)),
        "{s}"
    );
}

#[test]
fn ctrl_c_finishes_the_round_writes_an_interrupted_summary_and_resumes() {
    stop_on_signal_finishes_the_round_and_resumes(libc::SIGINT, 130);
}

#[test]
fn sigterm_finishes_the_round_writes_an_interrupted_summary_and_resumes() {
    // regression: SIGTERM (kill, SLURM's time limit, Kubernetes' eviction) killed a run with
    // the default handler: no checkpoint of the rounds since the last one, no summary
    stop_on_signal_finishes_the_round_and_resumes(libc::SIGTERM, 143);
}

fn stop_on_signal_finishes_the_round_and_resumes(sig: libc::c_int, code: i32) {
    let dir = tempdir();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap().to_string();
    let child = spawn_tma(&[
        "train",
        "--gen-nodes",
        "800",
        "--hidden",
        "16",
        "--sync-every",
        "300ms",
        "--time-limit",
        "120s",
        "--out",
        &o,
        "--quiet",
    ]);
    wait_for_a_round(&out.join("rounds.jsonl"));
    signal(child.id(), sig);
    let t = Instant::now();
    let r = child.wait_with_output().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "stopped after the round in flight"
    );
    assert_eq!(r.status.code(), Some(code), "{}", text(&r));
    assert!(
        stdout(&r).contains(&format!("resume with: tma train --resume {o}")),
        "{}",
        text(&r)
    );
    assert!(
        stderr(&r).contains("interrupt: finishing the round in flight"),
        "{}",
        text(&r)
    );
    let s = summary(&out);
    assert_eq!(s["interrupted"], serde_json::json!(true));
    assert_eq!(s["interrupted_by"], "stop_request");
    assert!(out.join("checkpoint/state.json").is_file());
    let r = tma(&["train", "--resume", &o, "--time-limit", "2s", "--quiet"]);
    assert_success(&r);
    assert_eq!(summary(&out)["interrupted"], serde_json::json!(false));
    assert_eq!(summary(&out)["interrupted_by"], serde_json::Value::Null);
}

/// `tma train` on a 200000-node generated graph with super-tma: preparation (METIS into 1000
/// super-nodes) takes seconds, so signals sent right after the run directory appears arrive
/// before any round.
fn slow_to_prepare(out: &str) -> std::process::Child {
    spawn_tma(&[
        "train",
        "--gen-nodes",
        "200000",
        "--method",
        "super-tma",
        "--hidden",
        "16",
        "--time-limit",
        "120s",
        "--out",
        out,
        "--quiet",
    ])
}

#[test]
fn ctrl_c_before_the_first_round_leaves_no_run_dir() {
    let dir = tempdir();
    // once: the run stops when preparation ends, before training, and removes its directory
    let out = dir.path().join("once");
    let o = out.to_str().unwrap().to_string();
    let child = slow_to_prepare(&o);
    wait_for("config.toml", Duration::from_secs(120), || {
        out.join("config.toml").is_file()
    });
    sigint(child.id());
    let r = child.wait_with_output().unwrap();
    // regression: this exit was 1; a stop on request exits 130 (143 for SIGTERM) in every phase
    assert_fails_with(
        &r,
        130,
        &["interrupted before training started", "was removed"],
    );
    // regression (issue 31): the watcher said "finishing the round in flight" here, before
    // any round
    assert!(
        stderr(&r).contains("interrupt: the run will not train: the data being loaded or prepared is finished first (it cannot be cut short), then the run ends before its first round"),
        "{}",
        stderr(&r)
    );
    assert!(!stderr(&r).contains("round in flight"), "{}", stderr(&r));
    assert!(!out.exists(), "{} left behind", out.display());
    // twice: stops at once
    let out = dir.path().join("twice");
    let o = out.to_str().unwrap().to_string();
    let child = slow_to_prepare(&o);
    wait_for("config.toml", Duration::from_secs(120), || {
        out.join("config.toml").is_file()
    });
    sigint(child.id());
    std::thread::sleep(Duration::from_millis(300));
    sigint(child.id());
    let r = child.wait_with_output().unwrap();
    assert_eq!(r.status.code(), Some(130), "{}", text(&r));
    assert!(
        stderr(&r).contains("interrupt: stopped at once; the run had no checkpoint yet"),
        "{}",
        text(&r)
    );
    assert!(!out.exists(), "{} left behind", out.display());
    // and the same --out works again
    let mut args = vec!["train", "--out", &o];
    args.extend_from_slice(QUICK);
    assert_success(&tma(&args));
}

#[test]
fn ctrl_c_during_partition_out_removes_the_staging_folder() {
    // regression: an interrupted `tma partition --out D` left `.D.tmp` (the parts streamed so
    // far; gigabytes at scale) behind, without a word
    signal_during_partition_out_removes_the_staging_folder(libc::SIGINT, 130);
}

#[test]
fn sigterm_during_partition_out_removes_the_staging_folder() {
    // regression: SIGTERM left `.D.tmp` behind (only SIGINT was handled)
    signal_during_partition_out_removes_the_staging_folder(libc::SIGTERM, 143);
}

fn signal_during_partition_out_removes_the_staging_folder(sig: libc::c_int, code: i32) {
    let dir = tempdir();
    let out = dir.path().join("parts");
    let staging = dir.path().join(".parts.tmp");
    let child = spawn_tma(&[
        "partition",
        "--gen-nodes",
        "300000",
        "--parts",
        "4",
        "--out",
        out.to_str().unwrap(),
    ]);
    // the staging folder is made before the graph is generated
    wait_for("the staging folder", Duration::from_secs(60), || {
        staging.exists()
    });
    signal(child.id(), sig);
    let r = child.wait_with_output().unwrap();
    assert_fails_with(
        &r,
        code,
        &["interrupt: stopped", ".parts.tmp", "was removed"],
    );
    assert!(!staging.exists(), "the staging folder is gone");
    assert!(!out.exists(), "no partition directory was written");
}

#[test]
fn rounds_that_skip_sync_slots_behind_a_slow_round_say_so() {
    // regression: a validation backlog made rounds skip --sync-every slots without a word
    let dir = tempdir();
    let out = dir.path().join("run");
    let r = tma(&[
        "train",
        "--gen-nodes",
        "600",
        "--hidden",
        "16",
        "--sync-every",
        "300ms",
        "--sync-ramp",
        "0",
        "--time-limit",
        "3s",
        "--debug-slow-round",
        "1500ms",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_success(&r);
    let rounds = std::fs::read_to_string(out.join("rounds.jsonl")).unwrap();
    let skipped: Vec<u64> = rounds
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.get("skipped_slots").map_or(0, |s| s.as_u64().unwrap())
        })
        .collect();
    // round 1's record stalls the coordinator 1.5 s: the next round (due 0.3 s after it)
    // forms ~1.5 s late, and the slots between are skipped. Which round that is depends on
    // when round 1 formed on a busy machine (a slow start can make the first rounds late
    // too), so any round with at least 2 skipped slots counts (once this flaked on
    // `skipped[1]`, round 2's, alone)
    assert!(
        skipped.iter().any(|&s| s >= 2),
        "skipped slots per round {skipped:?}\n{rounds}"
    );
    // each late round says where its time went (`late`): at least its skipped slots' time;
    // the stall is the recording of round 1, which the coordinator waits for before calling
    // the next round (as it waits for a validation backlog), not the trainers
    let mut held = 0.0f64;
    for l in rounds.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let n = v.get("skipped_slots").map_or(0, |s| s.as_u64().unwrap());
        let late = &v["late"];
        assert_eq!(n > 0, late.is_object(), "{l}");
        if n > 0 {
            let (a, b) = (
                late["validation_s"].as_f64().unwrap(),
                late["trainers_s"].as_f64().unwrap(),
            );
            assert!(a + b >= 0.3 * n as f64 - 1e-6, "{l}");
            held = held.max(a);
        }
    }
    assert!(held >= 1.0, "{rounds}");
    assert!(
        stderr(&r).contains("averaging slots skipped: the round formed")
            && stderr(&r).contains("waiting for validation to keep up"),
        "{}",
        stderr(&r)
    );
}

#[test]
fn val_check_interval_validates_between_rounds_and_says_so() {
    let dir = tempdir();
    let out = dir.path().join("run");
    let r = tma(&[
        "train",
        "--gen-nodes",
        "600",
        "--hidden",
        "16",
        "--method",
        "random-tma",
        "--trainers",
        "2",
        "--sync-every",
        "1s",
        "--sync-ramp",
        "0",
        "--val-check-interval",
        "250ms",
        "--time-limit",
        "2s",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_success(&r);
    let rows: Vec<serde_json::Value> = std::fs::read_to_string(out.join("rounds.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let checks: Vec<&serde_json::Value> =
        rows.iter().filter(|v| v.get("check").is_some()).collect();
    let rounds = rows.len() - checks.len();
    assert_eq!(rounds, 2, "{rows:?}");
    assert!(checks.len() >= 2, "{rows:?}");
    for c in &checks {
        assert_eq!(c["check"], true);
        assert!(c["val"]["value"].as_f64().unwrap().is_finite());
        assert!(c["train_loss"].is_null());
    }
    let err = stderr(&r);
    assert!(err.contains("(validation checks every 250ms)"), "{err}");
    assert!(err.contains("check   0+ t="), "{err}");
    assert_eq!(summary(&out)["rounds"], 2);

    // an interval the run never reaches is said
    let r = tma(&[
        "train",
        "--gen-nodes",
        "600",
        "--hidden",
        "16",
        "--sync-every",
        "60s",
        "--val-check-interval",
        "30s",
        "--time-limit",
        "1s",
        "--out",
        dir.path().join("long").to_str().unwrap(),
    ]);
    assert_success(&r);
    assert!(
        stderr(&r).contains("warning: val-check-interval (30s) is not shorter than time-limit (1s): no validation check will run"),
        "{}",
        stderr(&r)
    );

    // not shorter than the averaging period, or a method without a model between exchanges
    let r = tma(&[
        "train",
        "--gen-nodes",
        "600",
        "--sync-every",
        "1s",
        "--val-check-interval",
        "1s",
    ]);
    assert_fails_with(
        &r,
        1,
        &["val-check-interval (1s) must be shorter than sync-every (1s)"],
    );
    let r = tma(&[
        "train",
        "--gen-nodes",
        "600",
        "--method",
        "ggs",
        "--val-check-interval",
        "1s",
    ]);
    assert_fails_with(&r, 1, &["val-check-interval does not apply to ggs"]);
}

/// `--matmul-precision`: medium trains a link model (bf16 tile products where the CPU has AMX,
/// else f32 with a warning saying so, recorded in the summary). (An unknown value: the CLI's
/// `bad_flags_are_rejected_with_a_reason`.)
#[test]
fn matmul_precision_medium_trains_or_says_why_not() {
    let dir = tempdir();
    let out = dir.path().join("run");
    let r = tma(&[
        "train",
        "--gen-nodes",
        "600",
        "--hidden",
        "32",
        "--task",
        "link",
        "--trainers",
        "2",
        "--sync-every",
        "1s",
        "--sync-ramp",
        "0",
        "--time-limit",
        "2s",
        "--matmul-precision",
        "medium",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_success(&r);
    let s = summary(&out);
    assert_eq!(s["rounds"], 2);
    assert!(s["best_val"]["value"].as_f64().unwrap() > 0.0, "{s}");
    let config = std::fs::read_to_string(out.join("config.toml")).unwrap();
    assert!(config.contains("matmul_precision = \"medium\""), "{config}");
    let warned = stderr(&r).contains("warning: matmul-precision medium needs AMX-BF16");
    assert_eq!(warned, tma_nn::bf16_products().is_none(), "{}", stderr(&r));
    let recorded = s["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains("AMX-BF16"));
    assert_eq!(recorded, warned, "{s}");
}

/// The `warnings` of RUN/summary.json.
fn summary_warnings(run: &Path) -> Vec<String> {
    summary(run)["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

/// `tma partition --dataset d --out out` with `extra` options.
fn partition_out(d: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "partition",
        "--dataset",
        d.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    tma(&args)
}

#[test]
fn partition_out_never_checks_the_metric_and_train_falls_back_to_accuracy() {
    // regression (issue 29): ROC-AUC undefined on the validation nodes (class 1 only) stopped
    // `tma partition --out`, which has no --metric, and `tma train` without --metric
    let dir = tempdir();
    let d = write_dataset(
        &dir.path().join("d"),
        10,
        &ring(10),
        [&[0, 2, 4, 5], &[1, 3], &[6, 7]],
    );
    let parts = dir.path().join("parts");
    let r = partition_out(&d, &parts, &["--parts", "2"]);
    assert_success(&r);
    assert!(!text(&r).contains("metric"), "{}", text(&r));
    let line = "metric auto: the validation nodes hold only class 1 (2 labelled), so ROC-AUC (auto's metric for 2 classes) is undefined; accuracy selects the model instead";
    let quick = [
        "--hidden",
        "8",
        "--sync-every",
        "200ms",
        "--time-limit",
        "600ms",
        "--quiet",
    ];
    let run = dir.path().join("run");
    let mut args = vec!["train", "--dataset", d.to_str().unwrap(), "--trainers", "2"];
    args.extend(quick);
    args.extend(["--out", run.to_str().unwrap()]);
    let r = tma(&args);
    assert_success(&r);
    assert_eq!(
        stderr(&r).matches("warning: metric auto").count(),
        1,
        "{}",
        text(&r)
    );
    assert!(
        stderr(&r).contains(&format!("warning: {line}\n")),
        "{}",
        text(&r)
    );
    assert_eq!(summary_warnings(&run), [line]);
    assert_eq!(summary(&run)["best_val"]["metric"], "accuracy");
    // the same on the partition directory
    let run_p = dir.path().join("run-p");
    let r = train_on_partitions(parts.to_str().unwrap(), &run_p, &[]);
    assert_success(&r);
    assert_eq!(summary_warnings(&run_p), [line]);
    // a requested roc_auc is still refused, naming the remedy
    let mut args = vec![
        "train",
        "--dataset",
        d.to_str().unwrap(),
        "--metric",
        "roc_auc",
    ];
    args.extend(quick);
    let r = tma(&args);
    assert_fails_with(
        &r,
        1,
        &["error: invalid configuration: metric roc_auc: the validation nodes hold only class 1 (2 labelled), so ROC-AUC is undefined; use --metric accuracy"],
    );
    // what partitioning itself cannot do is said as that, naming the flag
    let r = partition_out(&d, &dir.path().join("p16"), &["--parts", "16"]);
    assert_fails_with(
        &r,
        1,
        &["error: partitioning failed: 16 parts (num_parts + drop_parts: --trainers or --parts, plus --drop-parts) for a graph of 10 nodes: at most one part per node"],
    );
}

#[test]
fn partition_out_writes_parts_of_unlabelled_and_sparse_graphs_and_says_so() {
    // regression (issue 29): `tma partition --out` refused the node task of a graph without
    // labels, and a sparse link graph whose parts hold no training edge
    let dir = tempdir();
    let d = write_dataset(&dir.path().join("d"), 30, &ring(30), [&[], &[], &[]]);
    for f in ["y.npy", "train_idx.npy", "val_idx.npy", "test_idx.npy"] {
        std::fs::remove_file(d.join(f)).unwrap();
    }
    let parts = dir.path().join("parts");
    let r = partition_out(&d, &parts, &["--parts", "2"]);
    assert_success(&r);
    let e = stderr(&r);
    let warned: Vec<&str> = e.lines().filter(|l| l.starts_with("warning:")).collect();
    assert_eq!(
        warned,
        ["warning: dataset 'tiny' has no node labels (no y.npy), so no part has a training node; the parts are written anyway, but `tma train --partitions` refuses them (nothing to train on); use --task link to train on this graph"]
    );
    let m = json_file(&parts.join("manifest.json"));
    assert_eq!(m["parts"][0]["num_train"], 0);
    assert_eq!(m["parts"][1]["num_train"], 0);
    let run = dir.path().join("run");
    let r = train_on_partitions(parts.to_str().unwrap(), &run, &[]);
    let msg = format!(
        "error: --partitions {}: dataset 'tiny' has no labelled node (written without labels for its layout): nothing to train on; re-run `tma partition --out` with --task link",
        parts.display()
    );
    assert_fails_with(&r, 1, &[&msg]);
    assert!(!run.exists());
    // a sparse graph of 70,000 nodes and 3 edges: 1 held out for validation, 1 for test, and
    // the training edge crosses the 2 parts of seed 2
    let sparse = write_dataset(
        &dir.path().join("sparse"),
        70_000,
        &[(0, 1), (2, 3), (4, 5)],
        [&[0], &[1], &[2]],
    );
    let link = ["--parts", "2", "--task", "link", "--seed", "2"];
    let plain = tma(&[
        "partition",
        "--dataset",
        sparse.to_str().unwrap(),
        "--parts",
        "2",
    ]);
    assert_success(&plain);
    let parts = dir.path().join("link-parts");
    let r = partition_out(&sparse, &parts, &link);
    assert_success(&r);
    assert!(
        stderr(&r).contains("warning: no part holds a training edge (2 parts on 1 training edges, every one crossing parts): the parts are written anyway, but `tma train --partitions` refuses them (nothing to train on); use fewer --parts\n"),
        "{}",
        text(&r)
    );
    assert!(
        !stderr(&r).contains("written anyway; `tma train` runs"),
        "{}",
        text(&r)
    );
    let m = json_file(&parts.join("manifest.json"));
    assert_eq!(m["parts"].as_array().unwrap().len(), 2);
    let r = train_on_partitions(parts.to_str().unwrap(), &run, &[]);
    let msg = format!(
        "error: --partitions {}: no part holds a training edge (2 parts): nothing to train on; re-run `tma partition --out` with fewer --parts",
        parts.display()
    );
    assert_fails_with(&r, 1, &[&msg]);
}

#[test]
fn a_npy_layout_without_meta_json_is_called_missing() {
    // regression (issue 29): "cannot tell the dataset format ... holds neither meta.json ..."
    let dir = tempdir();
    let d = write_dataset(&dir.path().join("d"), 6, &ring(6), [&[0], &[1], &[2]]);
    std::fs::remove_file(d.join("meta.json")).unwrap();
    let want = format!(
        "error: cannot load dataset {d}: {d}/meta.json: I/O error: meta.json not found in {d}: tma's .npy layout needs it next to edge_index.npy",
        d = d.display()
    );
    for cmd in ["info", "partition"] {
        let r = tma(&[cmd, "--dataset", d.to_str().unwrap()]);
        assert_fails_with(&r, 1, &[&want]);
        assert!(!stderr(&r).contains("holds neither"), "{}", stderr(&r));
    }
}

/// Regression (issue 31): a round that a failed trainer missed lists the steps of its
/// participants only; the line said `steps=[a, b]` beside `missing=[1]` without saying whose
/// the two numbers are.
#[test]
fn round_lines_say_whose_steps_they_list_when_a_trainer_is_missing() {
    let dir = tempdir();
    let out = dir.path().join("run");
    let r = tma(&[
        "train",
        "--gen-nodes",
        "300",
        "--trainers",
        "3",
        "--fail",
        "1@200ms",
        "--sync-every",
        "500ms",
        "--sync-ramp",
        "1",
        "--time-limit",
        "1500ms",
        "--hidden",
        "16",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_success(&r);
    let e = stderr(&r);
    let rounds = std::fs::read_to_string(out.join("rounds.jsonl")).unwrap();
    let mut with_missing = 0;
    for row in rounds.lines() {
        let j: serde_json::Value = serde_json::from_str(row).unwrap();
        let round = j["round"].as_u64().unwrap();
        let line = e
            .lines()
            .find(|l| l.starts_with(&format!("round {round:>3} ")))
            .unwrap_or_else(|| panic!("no line for round {round}:\n{e}"));
        let list = |k: &str| -> Vec<u64> {
            j[k].as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect()
        };
        let (steps, participants, missing) = (list("steps"), list("participants"), list("missing"));
        if missing.is_empty() {
            assert!(
                line.contains(&format!("  steps={steps:?}  loss=")),
                "{line}"
            );
        } else {
            with_missing += 1;
            assert_eq!(missing, [1], "{row}");
            assert_eq!(participants, [0, 2], "{row}");
            assert!(
                line.contains(&format!(
                    "  steps={steps:?} (participants [0, 2] only)  loss="
                )) && line.contains("  missing=[1]"),
                "{line}"
            );
        }
    }
    assert!(with_missing >= 1, "{rounds}\n{e}");
}

/// Regression (issue 31): a GGS trainer that contributed no gradient step (here: failed before
/// its first) showed only as 0 in `steps_per_trainer`; its share of the training examples was
/// never trained on without a word. Now a warning says so, and summary.json records it.
#[test]
fn a_ggs_trainer_without_a_step_is_warned_and_recorded() {
    let dir = tempdir();
    let out = dir.path().join("run");
    let r = tma(&[
        "train",
        "--gen-nodes",
        "300",
        "--method",
        "ggs",
        "--trainers",
        "3",
        "--fail",
        "1@0s",
        "--sync-every",
        "300ms",
        "--time-limit",
        "900ms",
        "--hidden",
        "16",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_success(&r);
    let s = summary(&out);
    let steps: Vec<u64> = s["steps_per_trainer"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(steps.len(), 3);
    assert!(steps[0] > 0 && steps[1] == 0 && steps[2] > 0, "{steps:?}");
    let line = "ggs: trainer 1 contributed no gradient step (it failed at 0.0s, before its first step): its share of the training examples was never trained on";
    assert_eq!(s["warnings"], serde_json::json!([line]), "{s}");
    assert_eq!(
        stderr(&r).matches(&format!("warning: {line}\n")).count(),
        1,
        "{}",
        stderr(&r)
    );
}

/// Regression (issue 31): boolean flags are spelled the same in every subcommand: `--undirected
/// true` worked in `train` and was refused by `info`, `partition` and `convert` ("unexpected
/// argument 'true'"); a bare flag keeps working, and `false` turns it off.
#[test]
fn boolean_flags_take_true_or_false_in_every_subcommand() {
    let dir = tempdir();
    let csv = dir.path().join("e.csv");
    std::fs::write(&csv, "src,dst\n0,1\n1,2\n2,3\n").unwrap();
    let c = csv.to_str().unwrap();
    let undirected = "e: 4 nodes, 6 arcs (undirected)";
    let directed = "e: 4 nodes, 3 arcs (directed)";
    for (args, want) in [
        (&["--undirected", "true"][..], undirected),
        (&["--undirected"][..], undirected),
        (&["--undirected=true"][..], undirected),
        (&["--undirected", "false"][..], directed),
        (&[][..], directed),
    ] {
        let mut a = vec!["info", "--dataset", c];
        a.extend_from_slice(args);
        let r = tma(&a);
        assert_success(&r);
        assert!(stdout(&r).starts_with(want), "{args:?}: {}", text(&r));
        // the flag before --dataset: a bare flag does not swallow the next option
        let mut a = vec!["info"];
        a.extend_from_slice(args);
        a.extend(["--dataset", c]);
        let r = tma(&a);
        assert_success(&r);
        assert!(stdout(&r).starts_with(want), "{args:?}: {}", text(&r));
    }
    let r = tma(&[
        "partition",
        "--dataset",
        c,
        "--undirected",
        "true",
        "--normalize-features",
        "true",
        "--allow-split-overlap",
        "false",
        "--parts",
        "2",
    ]);
    assert_success(&r);
    assert!(stdout(&r).contains(undirected), "{}", text(&r));
    let out = dir.path().join("conv");
    let r = tma(&[
        "convert",
        "--dataset",
        c,
        "--undirected",
        "true",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_success(&r);
    assert!(stdout(&r).contains("4 nodes, 6 arcs"), "{}", text(&r));
    let r = tma(&[
        "info",
        "--dataset",
        out.to_str().unwrap(),
        "--validate",
        "true",
    ]);
    assert_success(&r);
    assert!(stdout(&r).contains("contents valid"), "{}", text(&r));
    // anything but true/false is refused naming the flag
    let r = tma(&["info", "--dataset", c, "--undirected", "yes"]);
    assert_fails_with(&r, 2, &["'yes'", "--undirected"]);
}

/// Regression (issue 31): `tma compare --help` gave `tma train`'s --out default
/// (runs/<dataset>-<method>-<time>); compare writes runs/compare-<dataset>-<task>-<time>.
#[test]
fn compare_help_gives_its_own_out_default() {
    let r = tma(&["compare", "--help"]);
    assert_success(&r);
    let h = stdout(&r);
    assert!(
        h.contains("Default: runs/compare-<dataset>-<task>-<time>"),
        "{h}"
    );
    assert!(!h.contains("runs/<dataset>-<method>-<time>"), "{h}");
    // train's stays
    let h = stdout(&tma(&["train", "--help"]));
    assert!(h.contains("Default: runs/<dataset>-<method>-<time>"), "{h}");
}

#[test]
fn a_run_on_partitions_repeats_and_records_what_preparing_the_data_said() {
    // (loose end of decision 0034) the line `--featureless auto` says was printed by
    // `tma partition` only: a run from the directory neither said nor recorded it
    let ds = shared_dataset("seal_Yeast");
    let dir = tempdir();
    let parts = dir.path().join("parts");
    let r = partition_link(&ds, "2", &[], &parts);
    assert_success(&r);
    let said = stderr(&r);
    let line = said
        .lines()
        .find_map(|l| l.strip_prefix("warning: no node features:"))
        .unwrap_or_else(|| panic!("no featureless line: {said}"));
    let line = format!("no node features:{line}");
    let run = dir.path().join("run");
    let r = train_on_partitions(parts.to_str().unwrap(), &run, &[]);
    assert_success(&r);
    assert!(stderr(&r).contains(&line), "{line}\n{}", text(&r));
    let warnings = summary(&run)["warnings"].clone();
    assert!(
        warnings.as_array().unwrap().iter().any(|w| w == &line),
        "{line}\n{warnings}"
    );
}

#[test]
fn a_run_on_partitions_of_a_featureless_graph_says_which_inputs_they_hold() {
    // (fresh-eyes trial) a run from a partition directory did not say which featureless input
    // its parts hold: seal_Yeast has no node features; `--featureless degree` gives 2 columns
    let ds = shared_dataset("seal_Yeast");
    let dir = tempdir();
    let parts = dir.path().join("parts");
    let r = partition_link(&ds, "2", &["--featureless", "degree"], &parts);
    assert_success(&r);
    let run = dir.path().join("run");
    let r = tma(&[
        "train",
        "--partitions",
        parts.to_str().unwrap(),
        "--hidden",
        "8",
        "--sync-every",
        "200ms",
        "--time-limit",
        "600ms",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert_success(&r);
    assert!(
        stderr(&r).contains(
            "(no node features: its parts hold 2 structural input columns, --featureless degree; "
        ),
        "{}",
        text(&r)
    );
}
