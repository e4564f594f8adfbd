//! Partition directories and checkpoint/resume, through the `tma` binary: a real child process
//! killed by SIGKILL mid-run, then `tma train --resume`.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::harness::{json_file, summary, tempdir, text, tma, tma_cmd, train_on_partitions};

/// `tma train ARGS` into `run` on the plain 1 s schedule, stopped by SIGINT after its first
/// round: an interrupted run to resume. Its time limit (120 s) is long enough that the SIGINT,
/// not the limit, ends it (under CI load a 4 s run finished first); a resume sets its own.
fn interrupted_after_a_round(run: &Path, args: &[&str]) {
    let mut all = vec!["train"];
    all.extend_from_slice(args);
    let out = run.to_str().unwrap();
    all.extend_from_slice(&[
        "--sync-every",
        "1s",
        "--sync-ramp",
        "0",
        "--time-limit",
        "120s",
        "--out",
        out,
    ]);
    let mut child = crate::harness::spawn_tma(&all);
    crate::harness::wait_for_a_round(&run.join("rounds.jsonl"));
    crate::harness::sigint(child.id());
    child.wait().unwrap();
}

fn checkpoint_round(run: &Path) -> Option<u64> {
    let s = std::fs::read_to_string(run.join("checkpoint/state.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&s).ok()?;
    v["round"].as_u64()
}

/// `(round, participants, steps, train_loss)` of every line of `rounds.jsonl` (`train_loss` is
/// null when no participant made a step since its previous round).
type Logged = (u64, Vec<usize>, Vec<u64>, Option<f64>);
fn logged_steps(run: &Path) -> Vec<Logged> {
    let ints = |v: &serde_json::Value| -> Vec<u64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect()
    };
    std::fs::read_to_string(run.join("rounds.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let p = ints(&v["participants"])
                .iter()
                .map(|&t| t as usize)
                .collect();
            (
                v["round"].as_u64().unwrap(),
                p,
                ints(&v["steps"]),
                v["train_loss"].as_f64(),
            )
        })
        .collect()
}

fn logged_rounds(run: &Path) -> Vec<u64> {
    std::fs::read_to_string(run.join("rounds.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["round"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

#[test]
fn killed_run_resumes_losing_at_most_one_round() {
    let dir = tempdir();
    let run = dir.path().join("run");
    let r = run.to_str().unwrap();
    // 8 rounds of 1s; a 2-core CI machine gets a round well within a second
    let mut child = tma_cmd(&[
        "train",
        "--gen-nodes",
        "1500",
        "--hidden",
        "16",
        "--trainers",
        "2",
        "--threads",
        "2",
        "--sync-every",
        "1s",
        "--sync-ramp",
        "0",
        "--time-limit",
        "8s",
        "--quiet",
        "--out",
        r,
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("start tma");
    let t0 = Instant::now();
    while checkpoint_round(&run).unwrap_or(0) < 3 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no checkpoint of round 3"
        );
        assert!(child.try_wait().unwrap().is_none(), "tma exited early");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(!run.join("summary.json").exists());
    let ck = checkpoint_round(&run).unwrap();
    let logged = logged_rounds(&run);
    let last_logged = *logged.last().unwrap();
    // at most the round in flight is lost: the checkpoint trails the log by at most one
    assert!(ck + 1 >= last_logged, "checkpoint {ck}, logged {logged:?}");

    // a flag given with --resume wins over the saved config and is recorded in config.toml
    // (regression: config.toml kept the first segment's values)
    let before = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(before.contains("lr = 0.001\n"), "{before}");
    let o = tma(&["train", "--resume", r, "--quiet", "--lr", "0.002"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(run.join("summary.json").exists(), "{}", text(&o));
    let after = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(after.contains("lr = 0.002\n"), "{after}");
    assert_eq!(
        before.replace("lr = 0.001\n", "lr = 0.002\n"),
        after,
        "only the flag given changes"
    );
    let s = summary(&run);
    // 8 rounds are due (1 s each, 8 s limit); under load a late round at or past the limit
    // is the last one, so 7 is possible
    let n = s["rounds"].as_u64().unwrap();
    assert!(n == 8 || n == 7, "{n} rounds");
    // every round exactly once, in order, across both segments
    assert_eq!(
        logged_rounds(&run),
        (1..=n).collect::<Vec<_>>(),
        "{}",
        text(&o)
    );
    // steps count from the start of the run, across the resume: no trainer's count ever goes
    // down (in particular the first round after the resume continues from the checkpointed
    // round's counts), and it goes up when a participant trained since its previous round
    // (a train_loss means at least one did)
    let steps = logged_steps(&run);
    let mut last = [None::<u64>; 2];
    for (round, participants, st, loss) in &steps {
        assert_eq!(participants.len(), st.len(), "round {round}");
        let mut gained = 0;
        for (&t, &s) in participants.iter().zip(st) {
            let before = last[t].unwrap_or(0);
            assert!(
                s >= before,
                "round {round}: trainer {t} has {s} steps after {before} (checkpoint round {ck}): {steps:?}"
            );
            gained += s - before;
            last[t] = Some(s);
        }
        if loss.is_some() {
            assert!(gained > 0, "round {round} trained without steps: {steps:?}");
        }
    }
    let after = &steps[ck as usize];
    assert_eq!(after.0, ck + 1);
    assert_eq!(
        after.1,
        vec![0, 1],
        "both trainers join the first round after the resume"
    );
    // summary.json: each trainer's count at the last round it joined
    let per_trainer: Vec<u64> = s["steps_per_trainer"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(
        per_trainer,
        last.iter().map(|s| s.unwrap()).collect::<Vec<_>>(),
        "{steps:?}"
    );
    assert_eq!(per_trainer, steps.last().unwrap().2);
    // the checkpoint saved the counts of the last round
    let st = json_file(&run.join("checkpoint/state.json"));
    assert_eq!(st["steps"], serde_json::json!(per_trainer));
    // the clock continued from the checkpoint: the last round is at the 8 s limit
    let t = s["train_time_s"].as_f64().unwrap();
    assert!((8.0..12.0).contains(&t), "train_time_s {t}");
    for f in [
        "model_final.safetensors",
        "model_best.safetensors",
        "config.toml",
    ] {
        assert!(run.join(f).exists(), "{f}");
    }
    // a finished run is not resumed again
    let o = tma(&["train", "--resume", r, "--quiet"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("finished run"), "{}", text(&o));
}

#[test]
fn partition_dir_trains_and_corruption_is_refused() {
    let dir = tempdir();
    let parts = dir.path().join("parts");
    let p = parts.to_str().unwrap();
    let o = tma(&["partition", "--parts", "2", "--out", p]);
    assert!(o.status.success(), "{}", text(&o));
    let m = json_file(&parts.join("manifest.json"));
    assert_eq!(m["format_version"].as_u64(), Some(2));
    assert_eq!(m["data"]["layout"], "random");
    assert_eq!(m["parts"].as_array().unwrap().len(), 2);
    let run = dir.path().join("run");
    let o = train_on_partitions(p, &run, &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(run.join("summary.json").exists());
    // a flag that contradicts the directory
    let o = tma(&["train", "--partitions", p, "--trainers", "3", "--quiet"]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("--trainers 3 (the directory has 2)"),
        "{}",
        text(&o)
    );
    // data options beyond task/method/trainers/seed are checked too (regression: they were
    // silently replaced by the directory's values)
    for (flag, value, needle) in [
        (
            "--normalize-features",
            "true",
            "--normalize-features true (the directory has false)",
        ),
        (
            "--val-frac",
            "0.1",
            "--val-frac 0.1 (the directory has 0.05)",
        ),
        (
            "--super-nodes",
            "50",
            "--super-nodes 50 (the directory has 1000)",
        ),
    ] {
        let o = tma(&["train", "--partitions", p, flag, value, "--quiet"]);
        assert!(!o.status.success(), "{flag} accepted");
        assert!(text(&o).contains(needle), "{flag}: {}", text(&o));
    }
    // config.toml records the partition directory as an absolute path, so --resume and
    // --config work from any directory (regression: it was relative)
    let o = tma_cmd(&[
        "train",
        "--partitions",
        "parts",
        "--hidden",
        "16",
        "--sync-every",
        "300ms",
        "--time-limit",
        "300ms",
        "--quiet",
        "--out",
        "run_rel",
    ])
    .current_dir(dir.path())
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let cfg = std::fs::read_to_string(dir.path().join("run_rel/config.toml")).unwrap();
    let abs = std::fs::canonicalize(&parts).unwrap();
    assert!(
        cfg.contains(&format!("partitions = \"{}\"", abs.display())),
        "{cfg}"
    );
    // the run's own config.toml reruns it (regression: its `super_clustering = "auto"` was
    // taken for a flag that clashes with the directory); a chosen clustering still clashes
    let o = tma(&[
        "train",
        "--config",
        dir.path().join("run_rel/config.toml").to_str().unwrap(),
        "--out",
        dir.path().join("run_again").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = tma(&[
        "train",
        "--partitions",
        p,
        "--super-clustering",
        "lpa",
        "--quiet",
    ]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--super-clustering lpa"), "{}", text(&o));
    // flip a byte of part 1's features: refused, naming the file
    let f = parts.join("part-001/feat_indices.npy");
    let f = if f.exists() {
        f
    } else {
        parts.join("part-001/features.npy")
    };
    let mut b = std::fs::read(&f).unwrap();
    let n = b.len() - 1;
    b[n] ^= 0x40;
    std::fs::write(&f, b).unwrap();
    let o = train_on_partitions(p, &dir.path().join("run2"), &[]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("part-001/") && t.contains("hash mismatch"),
        "{t}"
    );
}

/// Regression (fresh-user report): a run whose config.toml has no `sync_ramp` (made before the
/// averaging ramp existed) resumed with the ramp on, today's default; it keeps its plain
/// schedule (decision 0015).
#[test]
fn resume_of_a_config_without_sync_ramp_keeps_the_plain_schedule() {
    let dir = tempdir();
    let run = dir.path().join("run");
    let r = run.to_str().unwrap();
    interrupted_after_a_round(
        &run,
        &[
            "--gen-nodes",
            "600",
            "--hidden",
            "16",
            "--trainers",
            "2",
            "--threads",
            "2",
        ],
    );
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(config.contains("sync_ramp = 0\n"), "{config}");
    let old: String = config
        .lines()
        .filter(|l| !l.starts_with("sync_ramp"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(run.join("config.toml"), old).unwrap();
    let o = tma(&["train", "--resume", r, "--time-limit", "4s"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("--sync-ramp"), "{}", text(&o));
    let config = std::fs::read_to_string(run.join("config.toml")).unwrap();
    assert!(config.contains("sync_ramp = 0\n"), "{config}");
    // every round on the plain 1 s grid (whole seconds, or the 4 s limit), none at a ramp slot
    let rounds = std::fs::read_to_string(run.join("rounds.jsonl")).unwrap();
    for l in rounds.lines() {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        let t = v["elapsed_s"].as_f64().unwrap();
        assert!(t >= 0.99, "a round at {t} s:\n{rounds}");
    }
}

#[test]
fn exclude_targets_is_said_from_a_partition_directory_and_a_resume_that_changes_it() {
    // regressions (docs/decisions/0028-exclude-target-edges.md): a partition directory written
    // before it recorded whether its features are structural trained without exclusion, said
    // nowhere; a resume that turned exclusion off said nothing
    let tmp = tempdir();
    let yeast = crate::harness::shared_dataset("seal_Yeast");
    let parts = tmp.path().join("parts");
    let r = tma(&[
        "partition",
        "--dataset",
        yeast.to_str().unwrap(),
        "--task",
        "link",
        "--out",
        parts.to_str().unwrap(),
    ]);
    assert!(r.status.success(), "{}", text(&r));
    let warnings = |run: &Path| -> Vec<String> {
        serde_json::from_value(summary(run)["warnings"].clone()).unwrap()
    };
    let has = |w: &[String], start: &str| w.iter().any(|l| l.starts_with(start));
    let run = tmp.path().join("run");
    let r = train_on_partitions(parts.to_str().unwrap(), &run, &[]);
    assert!(r.status.success(), "{}", text(&r));
    let w = warnings(&run);
    assert!(
        has(&w, "exclude-targets: the graph has no node features"),
        "{w:?}"
    );
    assert!(has(&w, "batch-size 8192: 4 of 4 trainers take "), "{w:?}");
    // the same directory as an older tma wrote it: no record, said
    let mpath = parts.join("manifest.json");
    let mut m = json_file(&mpath);
    assert_eq!(m["structural_features"], serde_json::json!(true));
    m.as_object_mut().unwrap().remove("structural_features");
    std::fs::write(&mpath, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    let old = tmp.path().join("old");
    let r = train_on_partitions(parts.to_str().unwrap(), &old, &[]);
    assert!(r.status.success(), "{}", text(&r));
    let w = warnings(&old);
    assert!(
        has(
            &w,
            "exclude-targets: the partition directory does not record whether"
        ),
        "{w:?}"
    );
    assert!(!has(&w, "batch-size"), "not excluded, not cut: {w:?}");
    // a resume that turns it off says so (an interrupted run: a finished one is not resumed)
    let live = tmp.path().join("live");
    interrupted_after_a_round(
        &live,
        &[
            "--dataset",
            yeast.to_str().unwrap(),
            "--task",
            "link",
            "--hidden",
            "16",
        ],
    );
    let r = tma(&[
        "train",
        "--resume",
        live.to_str().unwrap(),
        "--time-limit",
        "3s",
        "--exclude-targets",
        "false",
        "--quiet",
    ]);
    assert!(r.status.success(), "{}", text(&r));
    let w = warnings(&live);
    assert!(has(&w, "resume: exclude-targets true -> false"), "{w:?}");
}
