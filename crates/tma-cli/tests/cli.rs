//! The `tma` binary as a user runs it: outputs on disk, exit codes, error messages.

use std::path::Path;
use std::process::{Command, Output};

fn tma(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tma"))
        .args(args)
        .output()
        .expect("run tma")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const QUICK: &[&str] = &[
    "--gen-nodes",
    "800",
    "--hidden",
    "16",
    "--sync-every",
    "300ms",
    "--time-limit",
    "1s",
    "--quiet",
];

#[test]
fn train_on_generated_graph_writes_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    let mut args = vec!["train", "--out", o, "--trainers", "2"];
    args.extend_from_slice(QUICK);
    let r = tma(&args);
    assert!(r.status.success(), "{}", stderr(&r));
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
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["rounds"], n);
    assert_eq!(summary["final_test"]["metric"], "accuracy");
    let acc = summary["best_test"]["value"].as_f64().unwrap();
    assert!(acc > 0.3, "generated SBM (8 classes) accuracy {acc}");
    let stdout = String::from_utf8_lossy(&r.stdout);
    assert!(stdout.contains(&format!("done: {n} rounds")), "{stdout}");

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
    assert!(r2.status.success(), "{}", stderr(&r2));
    let c1 = std::fs::read_to_string(&cfg).unwrap();
    let c2 = std::fs::read_to_string(out2.join("config.toml")).unwrap();
    assert_eq!(
        c1, c2,
        "a run from a resolved config resolves to the same config"
    );
}

#[test]
fn missing_dataset_file_is_named_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
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
    assert_eq!(r.status.code(), Some(1));
    let e = stderr(&r);
    assert!(e.contains("edge_index.npy"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    assert!(!out.join("summary.json").exists());
}

#[test]
fn truncated_npy_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("trunc");
    std::fs::create_dir(&ds).unwrap();
    std::fs::write(ds.join("meta.json"), r#"{"directed": false}"#).unwrap();
    // a valid header announcing [2, 4] int64 followed by only 3 values
    let header = "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 4), }";
    let mut h = header.to_string();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(' ');
    }
    h.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(h.len() as u16).to_le_bytes());
    bytes.extend_from_slice(h.as_bytes());
    for v in [0i64, 1, 1] {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(ds.join("edge_index.npy"), bytes).unwrap();
    let r = tma(&["info", "--dataset", ds.to_str().unwrap()]);
    assert_eq!(r.status.code(), Some(1));
    let e = stderr(&r);
    assert!(e.contains("edge_index.npy"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn bad_flags_are_rejected_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let o = out.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--sync-every", "soon"], "not a duration"),
        (&["--fanouts", "10"], "fanouts"),
        (&["--model", "gat"], "gat"),
        (&["--fail", "9@1s"], "trainer 9 does not exist"),
        (&["--method", "magic"], "magic"),
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
    let Some(ds) = shared("seal_USAir") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let r = tma(&[
        "train",
        "--dataset",
        &ds,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(r.status.code(), Some(1));
    assert!(stderr(&r).contains("--task link"), "{}", stderr(&r));
    // a run that failed before its first round leaves no run directory behind
    assert!(!out.exists(), "{} left behind", out.display());
}

fn shared(name: &str) -> Option<String> {
    let p = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/datasets"
    ))
    .join(name);
    if p.join("meta.json").exists() {
        Some(p.to_str().unwrap().to_string())
    } else {
        eprintln!("note: {} absent; skipped", p.display());
        None
    }
}
