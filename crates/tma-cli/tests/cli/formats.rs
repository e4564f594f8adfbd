//! `--dataset` in the formats users have (OGB, SNAP, npz, CSV; the fixtures of
//! `crates/tma-graph/tests/fixtures/formats/`), `--format`, `--undirected`, and
//! `tma convert --to npy|disk` from them.

use std::path::{Path, PathBuf};

use super::harness::*;

fn fixture(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tma-graph/tests/fixtures/formats")
        .join(name);
    // absolute, as config.toml records it (so the warnings of a rerun name the same path)
    std::fs::canonicalize(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn info_detects_each_format_and_says_what_it_changed() {
    let cases: &[(&str, &[&str], &str, &[&str])] = &[
        (
            "ogbn_tiny",
            &[],
            "ogbn-tiny: 6 nodes, 7 arcs (directed), features 3-d dense, 3 classes, split 2/2/2",
            &["not read: node_year.csv.gz"],
        ),
        (
            "snap_tiny.txt",
            &[],
            "snap_tiny: 4 nodes, 4 arcs (directed)",
            &["node ids remapped to 0..3"],
        ),
        (
            "tiny.ungraph.txt.gz",
            &[],
            "tiny.ungraph: 3 nodes, 6 arcs (undirected)",
            &["added the reverse of 2 arcs"],
        ),
        (
            "edges.csv",
            &["--undirected"],
            "edges: 3 nodes, 6 arcs (undirected)",
            &["column \"weight\" ignored"],
        ),
        (
            "tiny.npz",
            &["--format", "npz"],
            "tiny: 5 nodes, 8 arcs (undirected), features 4-d dense, 3 classes",
            &["members not read: node_names"],
        ),
    ];
    for (name, extra, summary, warnings) in cases {
        let p = fixture(name);
        let mut args = vec!["info", "--dataset", s(&p)];
        args.extend_from_slice(extra);
        let r = tma(&args);
        assert_success(&r);
        assert!(stdout(&r).contains(summary), "{name}:\n{}", text(&r));
        for w in *warnings {
            assert!(stderr(&r).contains("warning: "), "{name}");
            assert!(
                stderr(&r).contains(w),
                "{name}: lacks {w:?}:\n{}",
                stderr(&r)
            );
        }
    }
}

#[test]
fn broken_files_and_bad_format_flags_are_errors_naming_the_problem() {
    let dir = tempdir();
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "src,dst\n0,1\n1,2,3\n").unwrap();
    let r = tma(&["info", "--dataset", s(&bad)]);
    assert_fails_with(&r, 1, &["bad.csv", "line 3", "wrong column count"]);

    let r = tma(&["train", "--dataset", s(&bad), "--time-limit", "1s"]);
    assert_fails_with(&r, 1, &["bad.csv", "line 3", "wrong column count"]);

    let r = tma(&[
        "info",
        "--dataset",
        s(&fixture("edges.csv")),
        "--format",
        "parquet",
    ]);
    assert_fails_with(&r, 2, &["parquet", "tma, ogb, snap, npz, csv"]);

    let cora = shared_dataset("planetoid_cora");
    let r = tma(&["info", "--dataset", s(&cora), "--undirected"]);
    assert_fails_with(&r, 1, &["--undirected applies to edge lists"]);

    let r = tma(&[
        "train",
        "--format",
        "snap",
        "--gen-nodes",
        "300",
        "--time-limit",
        "1s",
    ]);
    assert_fails_with(
        &r,
        1,
        &["--format says how to read --dataset", "generated graph"],
    );

    let unknown = dir.path().join("graph.bin");
    std::fs::write(&unknown, "0 1\n").unwrap();
    let r = tma(&["partition", "--dataset", s(&unknown)]);
    assert_fails_with(
        &r,
        1,
        &["graph.bin", "cannot tell the dataset format", "--format"],
    );
    // ... and with --format it reads
    let r = tma(&[
        "partition",
        "--dataset",
        s(&unknown),
        "--format",
        "snap",
        "--parts",
        "1",
    ]);
    assert_success(&r);
    // regression: `--parts 0` was reported as "trainers must be >= 1", a flag partition lacks
    let r = tma(&["partition", "--gen-nodes", "300", "--parts", "0"]);
    assert_fails_with(&r, 2, &["--parts", "0 is not in 1.."]);
}

#[test]
fn train_on_an_npz_file_records_format_and_notes_and_its_config_reruns() {
    let dir = tempdir();
    let out = dir.path().join("run");
    let npz = fixture("directed_stored.npz");
    let r = tma(&[
        "train",
        "--dataset",
        s(&npz),
        "--format",
        "npz",
        "--undirected",
        "--out",
        s(&out),
        "--trainers",
        "1",
        "--hidden",
        "8",
        "--sync-every",
        "300ms",
        "--time-limit",
        "600ms",
        "--quiet",
    ]);
    assert_success(&r);
    let sm = summary(&out);
    let warnings = sm["warnings"].to_string();
    assert!(
        warnings.contains("edge weight other than 1 ignored"),
        "{warnings}"
    );
    assert!(
        warnings.contains("added the reverse of 3 arcs"),
        "{warnings}"
    );
    let cfg = std::fs::read_to_string(out.join("config.toml")).unwrap();
    assert!(cfg.contains("format = \"npz\""), "{cfg}");
    assert!(cfg.contains("undirected = true"), "{cfg}");
    // the recorded config reads the dataset the same way
    let out2 = dir.path().join("run2");
    let r = tma(&[
        "train",
        "--config",
        s(&out.join("config.toml")),
        "--out",
        s(&out2),
        "--quiet",
    ]);
    assert_success(&r);
    assert_eq!(summary(&out2)["warnings"], sm["warnings"]);
}

#[test]
fn convert_to_npy_and_to_disk_read_back_the_same_dataset() {
    let dir = tempdir();
    for name in ["ogbn_tiny", "snap_tiny.txt", "tiny.npz", "edges.csv"] {
        let src = fixture(name);
        let info = tma(&["info", "--dataset", s(&src)]);
        assert_success(&info);
        let summary_line = stdout(&info).lines().next().unwrap().to_string();
        let npy = dir.path().join(format!("{name}.npy"));
        let r = tma(&[
            "convert",
            "--from",
            s(&src),
            "--to",
            "npy",
            "--out",
            s(&npy),
        ]);
        assert_success(&r);
        assert!(npy.join("meta.json").is_file());
        assert_eq!(
            npy.join("node_ids.npy").is_file(),
            name.ends_with(".txt") || name.ends_with(".csv")
        );
        let back = tma(&["info", "--dataset", s(&npy)]);
        assert_success(&back);
        assert_eq!(
            stdout(&back).lines().next().unwrap(),
            summary_line,
            "{name} via npy"
        );

        let disk = dir.path().join(format!("{name}.disk"));
        let r = tma(&["convert", "--dataset", s(&src), "--out", s(&disk)]);
        assert_success(&r);
        assert!(stdout(&r).contains("(on-disk format)"), "{}", text(&r));
        let back = tma(&["info", "--dataset", s(&disk)]);
        assert_success(&back);
        let nodes_arcs = summary_line.split(" (").next().unwrap().to_string();
        assert!(
            stdout(&back).contains(&nodes_arcs),
            "{name} via disk: {}",
            text(&back)
        );
    }
    // the output must be new
    let r = tma(&[
        "convert",
        "--from",
        s(&fixture("edges.csv")),
        "--to",
        "npy",
        "--out",
        s(&dir.path().join("edges.csv.npy")),
    ]);
    assert_fails_with(&r, 1, &["not empty"]);
}

/// `tma train --task link` on an OGB link-property directory (the fixtures of
/// `make_ogbl.py`): the split and negatives as given, the protocol's metric (ogbl-citation2:
/// MRR on its per-source negatives; ogbl-collab: Hits@50 on its shared negatives), the line
/// that says so; the on-disk format keeps them, the `.npy` layout refuses them.
#[test]
fn train_on_ogb_link_directories_reports_the_protocols_metric() {
    let dir = tempdir();
    for (name, metric, line) in [
        (
            "ogbl/ogbl_citation2",
            "mrr",
            "5 validation / 5 test held-out pairs, 20 fixed negatives each, as ogbl-citation2 gives them, MRR",
        ),
        (
            "ogbl/ogbl_collab",
            "hits@50",
            "4 validation / 4 test held-out pairs, 10 / 10 negative pairs shared by every positive, as ogbl-collab gives them (its edge_neg), Hits@50",
        ),
    ] {
        let src = fixture(name);
        let info = tma(&["info", "--dataset", s(&src)]);
        assert_success(&info);
        assert!(
            stdout(&info).contains("stored link split"),
            "{name}: {}",
            text(&info)
        );
        let disk = dir.path().join(format!("{}.disk", &name[5..]));
        let r = tma(&["convert", "--dataset", s(&src), "--out", s(&disk)]);
        assert_success(&r);
        for (i, data) in [src.clone(), disk].iter().enumerate() {
            let out = dir.path().join(format!("{}-run{i}", &name[5..]));
            let r = tma(&[
                "train",
                "--dataset",
                s(data),
                "--task",
                "link",
                "--out",
                s(&out),
                "--trainers",
                "2",
                "--hidden",
                "8",
                "--sync-every",
                "300ms",
                "--time-limit",
                "900ms",
                "--quiet",
            ]);
            assert_success(&r);
            let sm = summary(&out);
            assert_eq!(sm["metric"], metric, "{name} {i}: {sm}");
            let warnings = sm["warnings"].to_string();
            assert!(warnings.contains(line), "{name} {i}: {warnings}");
            assert!(
                warnings.contains("used as given, not split again"),
                "{name} {i}: {warnings}"
            );
            let rounds = std::fs::read_to_string(out.join("rounds.jsonl")).unwrap();
            assert!(rounds.contains(&format!("\"{metric}\"")), "{rounds}");
            // OGB's Evaluator reports hits@1/3/10 beside citation2's MRR
            assert_eq!(
                rounds.contains("\"hits@3\""),
                metric == "mrr",
                "{name} {i}: {rounds}"
            );
        }
        let npy = dir.path().join(format!("{}.npy", &name[5..]));
        let r = tma(&["convert", "--from", s(&src), "--to", "npy", "--out", s(&npy)]);
        assert_fails_with(&r, 1, &["link split", "on-disk format"]);
    }
    // a partition directory keeps the protocol and the shared negatives
    let parts = dir.path().join("collab.parts");
    let r = tma(&[
        "partition",
        "--dataset",
        s(&fixture("ogbl/ogbl_collab")),
        "--task",
        "link",
        "--parts",
        "2",
        "--out",
        s(&parts),
    ]);
    assert_success(&r);
    let run = dir.path().join("collab.parts-run");
    let r = train_on_partitions(s(&parts), &run, &[]);
    assert_success(&r);
    assert_eq!(summary(&run)["metric"], "hits@50");
    // MRR is not OGB's metric on shared negatives
    let r = tma(&[
        "train",
        "--dataset",
        s(&fixture("ogbl/ogbl_collab")),
        "--task",
        "link",
        "--metric",
        "mrr",
        "--out",
        s(&dir.path().join("mrr")),
        "--time-limit",
        "300ms",
    ]);
    assert_fails_with(&r, 1, &["metric mrr", "hits@50"]);
}
