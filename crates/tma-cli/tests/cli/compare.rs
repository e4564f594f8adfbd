//! `tma compare` end to end on a generated graph: every output file, one run per method and
//! seed, a table row per method, refusal to overwrite, the data prepared once per layout, and
//! a comparison interrupted (SIGINT, SIGKILL) and continued with `--resume`.

use crate::harness::{assert_success, json_file, stderr, tempdir, tma_cmd};

#[test]
fn compare_writes_table_results_and_plot() {
    let dir = tempdir();
    let out = dir.path().join("cmp");
    let out_s = out.to_str().unwrap();
    let args = [
        "compare",
        "--gen-nodes",
        "600",
        "--methods",
        "random-tma,ggs,centralized",
        "--seeds",
        "0,1",
        "--trainers",
        "2",
        "--threads",
        "2",
        "--hidden",
        "16",
        "--fanouts",
        "5,5",
        "--batch-size",
        "64",
        "--time-limit",
        "1s",
        "--sync-every",
        "500ms",
        "--sync-ramp",
        "0",
        "--fail",
        "1@600ms",
        "--quiet",
        "--out",
        out_s,
    ];
    let o = tma_cmd(&args).output().unwrap();
    assert_success(&o);
    for f in ["results.json", "table.md", "val_vs_time.svg"] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    for run in ["random-tma-seed0", "ggs-seed1", "centralized-seed1"] {
        assert!(out.join(run).join("summary.json").exists(), "{run}");
    }
    let r = json_file(&out.join("results.json"));
    assert_eq!(r["runs"].as_array().unwrap().len(), 6);
    let table = r["table"].as_array().unwrap();
    let methods: Vec<&str> = table
        .iter()
        .map(|t| t["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["random-tma", "ggs", "centralized"]);
    for t in table {
        assert_eq!(t["runs"], 2);
        // 2 rounds are due; a late round at or past the limit is the last, so 1 under load
        let rounds = t["rounds"]["mean"].as_f64().unwrap();
        assert!((1.0..=2.0).contains(&rounds), "{t}");
    }
    // the failure applies to the 2-trainer methods, not to centralized
    for run in r["runs"].as_array().unwrap() {
        let failed = run["summary"]["failed_trainers"].as_array().unwrap().len();
        let expect = if run["method"] == "centralized" { 0 } else { 1 };
        assert_eq!(failed, expect, "{}", run["method"]);
    }
    let md = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(
        md.contains("| random-tma |") && md.contains("fail 1@600ms"),
        "{md}"
    );
    let svg = std::fs::read_to_string(out.join("val_vs_time.svg")).unwrap();
    assert!(
        svg.contains("centralized") && svg.contains("<polyline"),
        "plot lacks lines"
    );
    // never overwrites a comparison: the same --out again says how to continue it
    let again = tma_cmd(&args).output().unwrap();
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("already holds a comparison (compare.json)")
            && stderr(&again).contains("tma compare --resume"),
        "{}",
        stderr(&again)
    );
}

#[test]
fn compare_refuses_a_repeated_method_or_seed_before_any_run() {
    // regression: `--methods centralized,centralized` ran the first and then failed on its
    // existing run directory, leaving a partial comparison behind
    let dir = tempdir();
    for (methods, seeds, msg) in [
        (
            "centralized,centralized",
            "0",
            "--methods names centralized twice",
        ),
        ("centralized", "0,1,0", "--seeds names 0 twice"),
    ] {
        let out = dir.path().join("cmp");
        let o = crate::harness::tma(&[
            "compare",
            "--gen-nodes",
            "300",
            "--methods",
            methods,
            "--seeds",
            seeds,
            "--time-limit",
            "1s",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ]);
        crate::harness::assert_fails_with(&o, 1, &[msg]);
        assert!(!out.exists(), "nothing written");
    }
}

#[test]
fn sigterm_stops_a_comparison_after_the_run_in_flight() {
    // regression: a signal killed `tma compare` at once: the run in flight had no summary and
    // nothing said what was left
    let dir = tempdir();
    let out = dir.path().join("cmp");
    let child = crate::harness::spawn_tma(&[
        "compare",
        "--gen-nodes",
        "600",
        "--methods",
        "random-tma,centralized",
        "--seeds",
        "0",
        "--hidden",
        "16",
        "--sync-every",
        "300ms",
        "--time-limit",
        "120s",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    crate::harness::wait_for_a_round(&out.join("random-tma-seed0/rounds.jsonl"));
    crate::harness::signal(child.id(), libc::SIGTERM);
    let o = child.wait_with_output().unwrap();
    crate::harness::assert_fails_with(
        &o,
        143,
        &[
            "interrupt: the comparison stopped during random-tma seed 0 with 0 of 2 runs finished",
            "`tma compare --resume",
        ],
    );
    let s = json_file(&out.join("random-tma-seed0/summary.json"));
    assert_eq!(s["interrupted"], serde_json::json!(true));
    assert!(out.join("random-tma-seed0/checkpoint/state.json").is_file());
    assert!(
        !out.join("centralized-seed0").exists(),
        "no further run started"
    );
    assert!(!out.join("results.json").exists());
}

/// The options of the interrupted comparison below (generated graph, two methods, two seeds,
/// 1.5 s per run).
fn resumable_args(out: &str) -> Vec<&str> {
    vec![
        "compare",
        "--gen-nodes",
        "600",
        "--methods",
        "random-tma,centralized",
        "--seeds",
        "0,1",
        "--trainers",
        "2",
        "--threads",
        "2",
        "--hidden",
        "16",
        "--fanouts",
        "5,5",
        "--batch-size",
        "64",
        "--sync-every",
        "300ms",
        "--time-limit",
        "1500ms",
        "--quiet",
        "--out",
        out,
    ]
}

/// Waits until `dir`'s `rounds.jsonl` holds a round (the run in it is training).
fn wait_for_training(dir: &std::path::Path) {
    crate::harness::wait_for_a_round(&dir.join("rounds.jsonl"));
}

#[test]
fn an_interrupted_comparison_continues_with_resume_keeping_its_finished_runs() {
    let dir = tempdir();
    let out = dir.path().join("cmp");
    let o = out.to_str().unwrap();
    // 1. SIGINT during the second run: it stops after its round in flight (checkpoint)
    let child = crate::harness::spawn_tma(&resumable_args(o));
    wait_for_training(&out.join("centralized-seed0"));
    crate::harness::sigint(child.id());
    let r = child.wait_with_output().unwrap();
    crate::harness::assert_fails_with(
        &r,
        130,
        &[
            "stopped during centralized seed 0 with 1 of 4 runs finished",
            &format!("`tma compare --resume {o}` continues it"),
        ],
    );
    let first = out.join("random-tma-seed0/summary.json");
    let (bytes, mtime) = (
        std::fs::read(&first).unwrap(),
        std::fs::metadata(&first).unwrap().modified().unwrap(),
    );
    // an option that differs from the recorded ones is refused, named, before anything runs
    let mut changed = resumable_args(o);
    for (from, to) in [("1500ms", "3s"), ("0,1", "0")] {
        let i = changed.iter().position(|a| *a == from).unwrap();
        changed[i] = to;
    }
    changed.extend(["--resume", o]);
    crate::harness::assert_fails_with(
        &crate::harness::tma(&changed[..]),
        1,
        &[
            "the comparison was started with other options: --time-limit 3s (recorded: 1500ms), --seeds 0 (recorded: 0,1; a list that starts with the recorded one adds runs)",
        ],
    );
    assert_eq!(std::fs::read(&first).unwrap(), bytes);
    // 2. continued (the options read back from compare.json), then SIGKILL during the third
    // run: nothing of it is written at exit
    let child = crate::harness::spawn_tma(&["compare", "--resume", o, "--quiet"]);
    wait_for_training(&out.join("random-tma-seed1"));
    // one writer at a time: a second --resume meanwhile is refused and changes nothing
    crate::harness::assert_fails_with(
        &crate::harness::tma(&["compare", "--resume", o, "--quiet"]),
        1,
        &["is being written by another tma compare"],
    );
    crate::harness::signal(child.id(), libc::SIGKILL);
    let r = child.wait_with_output().unwrap();
    assert_eq!(
        r.status.code(),
        None,
        "killed: {}",
        crate::harness::text(&r)
    );
    let said = stderr(&r);
    assert!(
        said.contains("random-tma seed 0: finished earlier, kept")
            && said.contains("centralized seed 0: continued from its checkpoint at round"),
        "{said}"
    );
    // 3. continued to the end: the command line of the start with --resume works as well
    let mut again = resumable_args(o);
    again.extend(["--resume", o]);
    let r = crate::harness::tma(&again[..]);
    assert_success(&r);
    // the finished run was not run again: the same bytes, not rewritten
    assert_eq!(std::fs::read(&first).unwrap(), bytes);
    assert_eq!(
        std::fs::metadata(&first).unwrap().modified().unwrap(),
        mtime
    );
    let res = json_file(&out.join("results.json"));
    assert_eq!(res["runs"].as_array().unwrap().len(), 4);
    for row in res["table"].as_array().unwrap() {
        assert_eq!(row["runs"], 2, "{row}");
    }
    // the continued run went on to its budget: its rounds count on from the checkpoint, and
    // its summary is no longer marked interrupted
    let central = out.join("centralized-seed0");
    assert_eq!(crate::harness::summary(&central)["interrupted"], false);
    let rounds: Vec<u64> = std::fs::read_to_string(central.join("rounds.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["round"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(rounds, (1..=rounds.len() as u64).collect::<Vec<_>>());
    assert!(res["continued"]["centralized-seed0"]
        .as_str()
        .unwrap()
        .starts_with("continued from its checkpoint at round"));
    // the plot's value at the end of the axis is the table's final val mean
    for row in res["table"].as_array().unwrap() {
        let m = row["method"].as_str().unwrap();
        let last = res["plot"]["curves"][m]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(last["mean"], row["final_val"]["mean"], "{m}");
        assert_eq!(last["t"], res["plot"]["end_s"], "{m}");
        assert!(res["plot"]["end_s"].as_f64().unwrap() >= 1.5);
    }
}

#[test]
fn resume_adds_seeds_to_a_finished_comparison_and_makes_a_removed_partition_again() {
    let dir = tempdir();
    let out = dir.path().join("cmp");
    let o = out.to_str().unwrap();
    let mut args = resumable_args(o);
    for (from, to) in [("0,1", "0"), ("1500ms", "600ms")] {
        let i = args.iter().position(|a| *a == from).unwrap();
        args[i] = to;
    }
    assert_success(&crate::harness::tma(&args[..]));
    let first = out.join("random-tma-seed0/summary.json");
    let bytes = std::fs::read(&first).unwrap();
    // the partitions removed to free the disk: the runs' records are what is kept
    for l in ["random", "whole"] {
        std::fs::remove_dir_all(out.join("partitions").join(l)).unwrap();
    }
    // nothing left to train: the table again from the run directories, nothing made again
    let r = crate::harness::tma(&["compare", "--resume", o, "--quiet"]);
    assert_success(&r);
    let said = stderr(&r);
    assert_eq!(
        said.matches("every run on it has finished; its directory is gone (not made again)")
            .count(),
        2,
        "{said}"
    );
    assert!(!said.contains("made once in"), "{said}");
    assert!(!out.join("partitions/random").exists());
    assert_eq!(
        json_file(&out.join("results.json"))["runs"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    // a list that does not start with the recorded one is refused, the rule named
    crate::harness::assert_fails_with(
        &crate::harness::tma(&["compare", "--resume", o, "--seeds", "1", "--quiet"]),
        1,
        &["--seeds 1 (recorded: 0; a list that starts with the recorded one adds runs)"],
    );
    // seed 1 added: both partitions made again with seed 0, the same bytes as the first
    // (checked against partitions/<layout>.json), seed 0's runs kept
    let r = crate::harness::tma(&["compare", "--resume", o, "--seeds", "0,1", "--quiet"]);
    assert_success(&r);
    let said = stderr(&r);
    assert!(
        said.contains(&format!("--resume {o}: adds seeds 1 to the comparison; the runs added train on the partitions made with seed 0")),
        "{said}"
    );
    assert_eq!(said.matches("made once in").count(), 2, "{said}");
    assert!(
        said.contains("random-tma seed 0: finished earlier, kept"),
        "{said}"
    );
    assert_eq!(std::fs::read(&first).unwrap(), bytes);
    assert_eq!(
        json_file(&out.join("compare.json"))["seeds"],
        serde_json::json!([0, 1])
    );
    let res = json_file(&out.join("results.json"));
    assert_eq!(res["runs"].as_array().unwrap().len(), 4);
    for row in res["table"].as_array().unwrap() {
        assert_eq!(row["runs"], 2, "{row}");
    }
    let part =
        |run: &str| json_file(&out.join(run).join("partition.json"))["manifest_sha256"].clone();
    assert_eq!(part("random-tma-seed0"), part("random-tma-seed1"));
    // a partition that is not the one the earlier runs trained on is refused before any run
    let side = out.join("partitions/random.json");
    let mut rec = json_file(&side);
    rec["manifest_sha256"] = serde_json::json!("0000");
    std::fs::write(&side, serde_json::to_vec(&rec).unwrap()).unwrap();
    crate::harness::assert_fails_with(
        &crate::harness::tma(&["compare", "--resume", o, "--seeds", "0,1,2", "--quiet"]),
        1,
        &[
            "is not the partition the comparison's earlier runs trained on",
            "recorded in random.json: 0000",
        ],
    );
    assert!(!out.join("random-tma-seed2").exists());
    assert_eq!(
        json_file(&out.join("compare.json"))["seeds"],
        serde_json::json!([0, 1])
    );
    // regression (fresh-clone trial): a layout made again from the data that differs from
    // the record was left in place, and the advice to remove it looped; now it is removed and
    // the data or build named
    std::fs::remove_dir_all(out.join("partitions/random")).unwrap();
    crate::harness::assert_fails_with(
        &crate::harness::tma(&["compare", "--resume", o, "--seeds", "0,1,2", "--quiet"]),
        1,
        &[
            "partitions random: made again from the data, it is not the partition the comparison's earlier runs trained on",
            "so it was removed",
        ],
    );
    assert!(!out.join("partitions/random").exists());
    rec["manifest_sha256"] = part("random-tma-seed0");
    std::fs::write(&side, serde_json::to_vec(&rec).unwrap()).unwrap();
    // regression (fresh-clone trial): a kept run is checked against the settings the
    // comparison gives it, not judged by its summary.json alone; a repeated seed is named
    let cfg = out.join("centralized-seed1/config.toml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(text.contains("\nhidden = 16\n"), "{text}");
    std::fs::write(&cfg, text.replace("\nhidden = 16\n", "\nhidden = 32\n")).unwrap();
    crate::harness::assert_fails_with(
        &crate::harness::tma(&["compare", "--resume", o, "--quiet"]),
        1,
        &[
            "centralized-seed1 is kept as a finished run of this comparison, but it trained with other settings: hidden = 32 (this comparison: 16)",
        ],
    );
    std::fs::write(&cfg, &text).unwrap();
    crate::harness::assert_fails_with(
        &crate::harness::tma(&["compare", "--resume", o, "--seeds", "0,1,1", "--quiet"]),
        1,
        &["--seeds 0,1,1 (recorded: 0,1; 1 is named twice)"],
    );
    // the budget written another way is the same option: the table again, nothing trained
    let r = crate::harness::tma(&[
        "compare",
        "--resume",
        o,
        "--time-limit",
        "600000us",
        "--quiet",
    ]);
    assert_success(&r);
    assert!(!stderr(&r).contains("made once in"), "{}", stderr(&r));
    // regression (fresh-clone trial): an interrupted run restored from its records (no
    // checkpoint) was called "stopped before its first checkpoint"
    let run = out.join("random-tma-seed1");
    let rounds = std::fs::read_to_string(run.join("rounds.jsonl"))
        .unwrap()
        .lines()
        .count();
    assert!(rounds > 0);
    let mut sum = json_file(&run.join("summary.json"));
    sum["interrupted"] = serde_json::json!(true);
    sum["interrupted_by"] = serde_json::json!("stop_request");
    std::fs::write(run.join("summary.json"), serde_json::to_vec(&sum).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(run.join("checkpoint"));
    let r = crate::harness::tma(&["compare", "--resume", o, "--quiet"]);
    assert_success(&r);
    assert!(
        stderr(&r).contains(&format!("== random-tma seed 1: stopped after {rounds} rounds on record, but its checkpoint is not there")),
        "{}",
        stderr(&r)
    );
    assert_eq!(json_file(&run.join("summary.json"))["interrupted"], false);
    // regression (fresh-clone trial): a fresh comparison kept another's run directory as
    // "finished earlier"; now refused before anything is written
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::rename(out.join("random-tma-seed1"), other.join("random-tma-seed1")).unwrap();
    let mut fresh = resumable_args(other.to_str().unwrap());
    let i = fresh.iter().position(|a| *a == "1500ms").unwrap();
    fresh[i] = "600ms";
    crate::harness::assert_fails_with(
        &crate::harness::tma(&fresh[..]),
        1,
        &["already holds a run directory random-tma-seed1 but no comparison (compare.json)"],
    );
    assert!(!other.join("compare.json").exists());
}

#[test]
fn the_seeds_share_one_partition_per_layout_and_differ_in_training() {
    let dir = tempdir();
    let out = dir.path().join("cmp");
    let mut args = resumable_args(out.to_str().unwrap());
    // random-tma trains on the random layout, psgd-pa and llcg on one (metis)
    args[4] = "random-tma,psgd-pa,llcg";
    let i = args.iter().position(|a| *a == "1500ms").unwrap();
    args[i] = "600ms";
    let r = crate::harness::tma(&args[..]);
    assert_success(&r);
    let said = stderr(&r);
    assert_eq!(said.matches("made once in").count(), 2, "{said}");
    assert!(said.contains("with seed 0 (2 parts) into"), "{said}");
    assert!(out.join("partitions/random/manifest.json").is_file());
    assert!(out.join("partitions/metis/manifest.json").is_file());
    // every layout's coordinator data (evaluation graph, features, split) is the same bytes:
    // the second layout keeps hard links to the first's, not copies (at 1.3B arcs each copy
    // was 9.8 GB); the runs above read them through the sha256 check
    use std::os::unix::fs::MetadataExt;
    let manifest = json_file(&out.join("partitions/metis/manifest.json"));
    let coordinator: Vec<&String> = manifest["files"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| k.starts_with("coordinator/"))
        .collect();
    assert!(coordinator.len() >= 5, "{coordinator:?}");
    for rel in &coordinator {
        let (a, b) = (
            std::fs::metadata(out.join("partitions/random").join(rel)).unwrap(),
            std::fs::metadata(out.join("partitions/metis").join(rel)).unwrap(),
        );
        assert_eq!((a.dev(), a.ino()), (b.dev(), b.ino()), "{rel}");
        assert_eq!(a.nlink(), 2, "{rel}");
    }
    // the parts differ (another assignment): copies of their own
    let p0 = |l: &str| {
        std::fs::metadata(out.join("partitions").join(l).join("part-000/indices.npy")).unwrap()
    };
    assert_eq!((p0("random").nlink(), p0("metis").nlink()), (1, 1));
    assert_eq!(
        said.matches(&format!("partitions metis: {} files (", coordinator.len()))
            .count(),
        1,
        "{said}"
    );
    assert_eq!(
        said.matches("are byte-identical to files").count(),
        1,
        "{said}"
    );
    let part = |run: &str| json_file(&out.join(run).join("partition.json"));
    for m in ["random-tma", "psgd-pa", "llcg"] {
        let (a, b) = (part(&format!("{m}-seed0")), part(&format!("{m}-seed1")));
        // one split and partition: the data's seed 0 for both seeds
        assert_eq!(a["assignment_sha256"], b["assignment_sha256"], "{m}");
        assert_eq!(a["manifest_sha256"], b["manifest_sha256"], "{m}");
        assert_eq!((a["seed"].as_u64(), b["seed"].as_u64()), (Some(0), Some(0)));
        assert_eq!(a.get("training_seed"), None);
        assert_eq!(b["training_seed"], 1);
    }
    assert_eq!(
        part("psgd-pa-seed0")["manifest_sha256"],
        part("llcg-seed1")["manifest_sha256"]
    );
    // the seeds train differently: another initialization gives another first loss
    let first_loss = |run: &str| {
        let text = std::fs::read_to_string(out.join(run).join("rounds.jsonl")).unwrap();
        let r: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        r["train_loss"].as_f64().unwrap()
    };
    assert_ne!(
        first_loss("random-tma-seed0"),
        first_loss("random-tma-seed1")
    );
    let res = json_file(&out.join("results.json"));
    assert_eq!(res["data_seed"], 0);
    assert!(res["reuse"]
        .as_str()
        .unwrap()
        .contains("random (random-tma), metis (psgd-pa, llcg)"));
}

#[test]
fn a_layout_that_cannot_be_written_falls_back_to_a_split_per_run_said_and_recorded() {
    let dir = tempdir();
    let out = dir.path().join("cmp");
    // a file where the random layout's partition directory goes: it cannot be written there
    std::fs::create_dir_all(out.join("partitions/random")).unwrap();
    std::fs::write(out.join("partitions/random/notes.txt"), "mine").unwrap();
    let mut args = resumable_args(out.to_str().unwrap());
    args[4] = "random-tma";
    let i = args.iter().position(|a| *a == "1500ms").unwrap();
    args[i] = "600ms";
    let r = crate::harness::tma(&args[..]);
    assert_success(&r);
    assert!(
        stderr(&r)
            .contains("warning: the random layout could not be written as a partition directory"),
        "{}",
        stderr(&r)
    );
    // the user's file is untouched
    assert_eq!(
        std::fs::read_to_string(out.join("partitions/random/notes.txt")).unwrap(),
        "mine"
    );
    let res = json_file(&out.join("results.json"));
    let fallback = res["partitions"][0]["fallback"].as_str().unwrap();
    assert!(fallback.contains("each run of random-tma splits and partitions the data itself"));
    assert!(res["reuse"]
        .as_str()
        .unwrap()
        .contains("random-tma split and partition per run"));
    // each seed made its own split and partition, with its seed
    let part = |run: &str| json_file(&out.join(run).join("partition.json"));
    assert_eq!(part("random-tma-seed1")["seed"], 1);
    assert_ne!(
        part("random-tma-seed0")["assignment_sha256"],
        part("random-tma-seed1")["assignment_sha256"]
    );
}
