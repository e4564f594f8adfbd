//! `tma compare` end to end on a generated graph: every output file, one run per method and
//! seed, a table row per method, and refusal to overwrite.

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
    // never overwrites a finished comparison
    let again = tma_cmd(&args).output().unwrap();
    assert!(!again.status.success());
    assert!(
        stderr(&again).contains("results.json"),
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
        &["interrupt: the comparison stopped during random-tma seed 0 after 1 of 2 runs"],
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
