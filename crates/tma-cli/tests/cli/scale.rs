//! `tma convert`, `tma generate` and the commands that read the on-disk graph format.

use crate::harness::{
    assert_fails_with, assert_success, shared_dataset, stderr, stdout, summary, tempdir, tma,
};

/// The last line of `tma partition`: the assignment hash.
fn assignment_hash(args: &[&str]) -> String {
    let r = tma(args);
    assert_success(&r);
    let out = stdout(&r);
    out.lines()
        .last()
        .and_then(|l| l.split("assignment sha256 ").nth(1))
        .unwrap_or_else(|| panic!("no hash in {out}"))
        .to_string()
}

#[test]
fn convert_cora_then_info_partition_and_train_read_the_new_format() {
    let src = shared_dataset("planetoid_cora");
    let dir = tempdir();
    let out = dir.path().join("cora");
    let (s, o) = (src.to_str().unwrap(), out.to_str().unwrap());
    let r = tma(&[
        "convert",
        "--dataset",
        s,
        "--out",
        o,
        "--memory-budget",
        "32MiB",
    ]);
    assert_success(&r);
    assert!(
        stdout(&r).contains("2708 nodes, 10556 arcs")
            && stdout(&r).contains("dropped 0 self-loops and merged 0 duplicate arcs of 10556"),
        "{}",
        stdout(&r)
    );
    assert!(stderr(&r).contains("peak RSS"), "{}", stderr(&r));
    // the heap's peak, which --memory-budget bounds, is said next to VmHWM (which counts the
    // mapped graph's pages too)
    let anon: f64 = stderr(&r)
        .split("peak anonymous ")
        .nth(1)
        .and_then(|t| t.split(" MiB").next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no peak anonymous figure: {}", stderr(&r)));
    assert!(anon > 0.0 && anon <= 32.0, "{anon} MiB: {}", stderr(&r));
    // info maps the graph: the .npy summary plus the format, then the provenance
    let r = tma(&["info", "--dataset", o, "--verify"]);
    assert_success(&r);
    let text = stdout(&r);
    assert!(text.starts_with(
        "planetoid_cora: 2708 nodes, 10556 arcs (undirected), features 1433-d sparse (nnz 49216), 7 classes, split 140/500/1000 [on-disk format v1"
    ), "{text}");
    assert!(
        text.contains("split: train 140 / val 500 / test 1000\n"),
        "{text}"
    );
    assert!(text.contains("checksums match the manifest"), "{text}");
    // the same dataset, so the same partition as from the .npy directory
    let p = |d: &str| {
        assignment_hash(&[
            "partition",
            "--dataset",
            d,
            "--parts",
            "3",
            "--method",
            "metis",
            "--seed",
            "4",
        ])
    };
    assert_eq!(p(s), p(o));
    // training reads it (copied into memory in this step)
    let run = dir.path().join("run");
    let r = tma(&[
        "train",
        "--dataset",
        o,
        "--trainers",
        "2",
        "--time-limit",
        "3s",
        "--sync-every",
        "1s",
        "--out",
        run.to_str().unwrap(),
        "--quiet",
    ]);
    assert_success(&r);
    let acc = summary(&run)["final_val"]["value"].as_f64().unwrap();
    assert!(acc > 0.3, "val accuracy {acc} on cora after 3 s");
}

#[test]
fn generate_writes_a_graph_info_reads_and_bad_input_is_refused() {
    let dir = tempdir();
    let out = dir.path().join("g");
    let o = out.to_str().unwrap();
    let r = tma(&[
        "generate",
        "--nodes",
        "20000",
        "--avg-degree",
        "10",
        "--feat-dim",
        "8",
        "--classes",
        "4",
        "--link-split",
        "0.05,0.05",
        "--seed",
        "9",
        "--memory-budget",
        "32MiB",
        "--out",
        o,
    ]);
    assert_success(&r);
    assert!(
        stdout(&r).contains("generated") && stdout(&r).contains("held out"),
        "{}",
        stdout(&r)
    );
    assert!(
        stderr(&r).contains("build CSR") && stderr(&r).contains("M arcs/s"),
        "{}",
        stderr(&r)
    );
    let r = tma(&["info", "--dataset", o, "--validate"]);
    assert_success(&r);
    let text = stdout(&r);
    assert!(text.starts_with("rmat-20000: 20000 nodes"), "{text}");
    assert!(
        text.contains("written by tma generate") && text.contains("(seed 9)"),
        "{text}"
    );
    assert!(text.contains("contents valid"), "{text}");
    // --split: few labelled nodes, as large graphs of the field hold out
    let o2 = dir.path().join("g2");
    let r = tma(&[
        "generate",
        "--nodes",
        "20000",
        "--split",
        "0.01,0.002,0.003",
        "--memory-budget",
        "32MiB",
        "--out",
        o2.to_str().unwrap(),
    ]);
    assert_success(&r);
    let r = tma(&["info", "--dataset", o2.to_str().unwrap()]);
    let text = stdout(&r);
    let line = text
        .lines()
        .find(|l| l.starts_with("split: train"))
        .unwrap();
    let n: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect();
    assert!(
        (140..=260).contains(&n[0]) && (15..=70).contains(&n[1]) && (30..=95).contains(&n[2]),
        "{line}"
    );
    // bad values name the flag (a negative value once reached clap as an unknown flag:
    // "unexpected argument '-0'"); the output exists now, so a second run refuses it
    let cases: [(&str, &str, i32, &[&str]); 17] = [
        // regression (issue 31): these named --out ("gx: invalid content: probabilities must
        // lie in [0, 1] ..."), and --feature-noise nan wrote NaN features
        (
            "--avg-degree",
            "-1",
            1,
            &["--avg-degree -1: must be a finite number >= 0"],
        ),
        (
            "--avg-degree",
            "inf",
            1,
            &["--avg-degree inf: must be a finite number >= 0"],
        ),
        ("--classes", "0", 1, &["--classes 0: at least 1 class"]),
        (
            "--homophily",
            "2",
            1,
            &["--homophily 2: must lie in [0, 1]"],
        ),
        (
            "--homophily",
            "nan",
            1,
            &["--homophily NaN: must lie in [0, 1]"],
        ),
        (
            "--feature-noise",
            "nan",
            1,
            &["--feature-noise NaN: must be a finite number >= 0"],
        ),
        (
            "--feature-noise",
            "-1",
            1,
            &["--feature-noise -1: must be a finite number >= 0"],
        ),
        (
            "--rmat",
            "0.9,0.9,0.9",
            1,
            &["--rmat 0.9,0.9,0.9: A, B and C must lie in [0, 1] with A + B + C <= 1"],
        ),
        (
            "--split",
            "0.9,0.2,0",
            1,
            &["--split \"0.9,0.2,0\"", "TRAIN + VAL + TEST <= 1"],
        ),
        (
            "--split",
            "-0.1,0.5,0.1",
            1,
            &["--split \"-0.1,0.5,0.1\"", "must lie in [0, 1]"],
        ),
        (
            "--memory-budget",
            "-5MiB",
            2,
            &["--memory-budget", "not a size"],
        ),
        (
            "--memory-budget",
            "1MiB",
            1,
            &["--memory-budget", "minimum of 32 MiB"],
        ),
        (
            "--memory-budget",
            "lots",
            2,
            &["--memory-budget", "not a size"],
        ),
        (
            "--rmat",
            "0.5,0.5",
            1,
            &["--rmat", "3 comma-separated numbers"],
        ),
        // regression: these blamed --out ("invalid content: probabilities must lie ...")
        (
            "--link-split",
            "1.5,0",
            1,
            &["--link-split 1.5,0: each fraction must be in [0, 1) and their sum below 1"],
        ),
        (
            "--link-split",
            "0.6,0.6",
            1,
            &["--link-split 0.6,0.6: each fraction"],
        ),
        (
            "--link-split",
            "nan,0",
            1,
            &["--link-split nan,0: each fraction"],
        ),
    ];
    for (flag, value, code, needles) in cases {
        let r = tma(&["generate", "--nodes", "100", flag, value, "--out", "/tmp/x"]);
        assert_fails_with(&r, code, needles);
        assert!(!stderr(&r).contains("invalid content"), "{}", stderr(&r));
    }
    let r = tma(&["generate", "--nodes", "100", "--out", o]);
    assert_fails_with(&r, 1, &["not empty", o]);
    let r = tma(&[
        "generate",
        "--nodes",
        "1",
        "--out",
        dir.path().join("one").to_str().unwrap(),
    ]);
    assert_fails_with(&r, 1, &["--nodes 1 must be in 2..=4294967295"]);
    // regression: 2 nodes, their one edge held out: its "negatives" were the source itself
    let two = dir.path().join("two");
    let r = tma(&[
        "generate",
        "--nodes",
        "2",
        "--link-split",
        "0.4,0.4",
        "--out",
        two.to_str().unwrap(),
    ]);
    assert_fails_with(
        &r,
        1,
        &["adjacent to every other of the graph's 2 nodes: no negative exists"],
    );
    assert!(!two.exists(), "a failed generate leaves no directory");
    // --validate belongs to the on-disk format
    let cora = shared_dataset("planetoid_cora");
    let r = tma(&["info", "--dataset", cora.to_str().unwrap(), "--validate"]);
    assert_fails_with(&r, 1, &["--validate", "tma-graph.json"]);
}

#[test]
fn super_tma_with_label_propagation_on_a_mapped_graph() {
    let dir = tempdir();
    let out = dir.path().join("g");
    let o = out.to_str().unwrap();
    let r = tma(&[
        "generate",
        "--nodes",
        "30000",
        "--avg-degree",
        "10",
        "--feat-dim",
        "8",
        "--classes",
        "4",
        "--seed",
        "2",
        "--out",
        o,
    ]);
    assert_success(&r);
    // partitioned in place (mapped), the same bytes on 1 and 2 threads, and the clustering
    // that ran is said in one line
    let part = |threads: &str, clustering: &str| {
        let r = crate::harness::tma_cmd(&[
            "partition",
            "--dataset",
            o,
            "--method",
            "super",
            "--super-nodes",
            "500",
            "--super-clustering",
            clustering,
            "--parts",
            "4",
        ])
        .env("RAYON_NUM_THREADS", threads)
        .output()
        .unwrap();
        assert_success(&r);
        r
    };
    let one = part("1", "lpa");
    let two = part("2", "lpa");
    let (a, b) = (stdout(&one), stdout(&two));
    let hash = |s: &str| {
        s.lines()
            .last()
            .unwrap()
            .split("sha256 ")
            .nth(1)
            .unwrap()
            .to_string()
    };
    assert_eq!(hash(&a), hash(&b));
    assert!(
        a.contains("clustering: lpa (size-constrained label propagation): ")
            && a.contains("clusters of at most 60 nodes"),
        "{a}"
    );
    assert!(stderr(&one).contains("anonymous"), "{}", stderr(&one));
    // auto on a small graph is METIS, and says so
    let auto = stdout(&part("2", "auto"));
    assert!(
        auto.contains("clustering: metis (METIS k-way, auto: ")
            && auto.contains("<= 33554432 for METIS"),
        "{auto}"
    );
    // training records the clustering in partition.json's report
    let run = dir.path().join("run");
    let r = tma(&[
        "train",
        "--dataset",
        o,
        "--method",
        "super-tma",
        "--super-nodes",
        "500",
        "--super-clustering",
        "lpa",
        "--trainers",
        "2",
        "--time-limit",
        "2s",
        "--sync-every",
        "1s",
        "--out",
        run.to_str().unwrap(),
        "--quiet",
    ]);
    assert_success(&r);
    let pj = crate::harness::json_file(&run.join("partition.json"));
    let rep = &pj["report"];
    assert_eq!(rep["clustering"], "lpa", "{pj}");
    assert_eq!(rep["lpa"]["max_cluster_size"], 60, "{pj}");
    assert!(
        rep["clustering_line"]
            .as_str()
            .unwrap()
            .starts_with("clustering: lpa"),
        "{pj}"
    );
    // ignored with the random partition, and said so
    let r = tma(&["partition", "--dataset", o, "--super-clustering", "lpa"]);
    assert_success(&r);
    assert!(
        stderr(&r).contains(
            "warning: --super-clustering lpa is ignored: --method random clusters nothing"
        ),
        "{}",
        stderr(&r)
    );
    // a bad value names the flag
    let r = tma(&["partition", "--dataset", o, "--super-clustering", "louvain"]);
    assert_fails_with(&r, 2, &["--super-clustering", "louvain"]);
}

/// Scale smoke test (issue 10): a generated graph of about 1.5M arcs under a 48 MiB generator
/// budget, trained with 4 trainers on the mapped graph: the parts are spilled and mapped (none
/// left in the run directory), every process's memory is in summary.json and in the output,
/// and the planted classes are learnt.
#[test]
fn scale_smoke_generate_then_train_four_trainers_on_the_mapped_graph() {
    let dir = tempdir();
    let g = dir.path().join("g");
    let r = tma(&[
        "generate",
        "--nodes",
        "80000",
        "--avg-degree",
        "20",
        "--feat-dim",
        "16",
        "--memory-budget",
        "48MiB",
        "--out",
        g.to_str().unwrap(),
    ]);
    assert_success(&r);
    let run = dir.path().join("run");
    let r = tma(&[
        "train",
        "--dataset",
        g.to_str().unwrap(),
        "--trainers",
        "4",
        "--hidden",
        "32",
        "--time-limit",
        "6s",
        "--sync-every",
        "2s",
        "--eval-max-nodes",
        "4000",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert_success(&r);
    let err = stderr(&r);
    assert!(
        err.contains("graph mapped, parts mapped from disk"),
        "{err}"
    );
    // validation on a fixed subset of the ~16,000 validation nodes (20% of 80,000), said in one
    // line and recorded in partition.json and summary.json
    let line = err
        .lines()
        .find(|l| l.contains("validation uses a fixed seeded subset of 4000 of the "))
        .unwrap_or_else(|| panic!("no --eval-max-nodes line in {err}"));
    let of: usize = line
        .split(" of the ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!((15_000..17_000).contains(&of), "{line}");
    assert!(line.ends_with(
        "validation nodes every round (--eval-max-nodes 4000); the final test uses the whole test split"
    ), "{line}");
    let recorded = |v: &serde_json::Value| {
        v["warnings"]
            .as_array()
            .is_some_and(|w| w.iter().any(|x| line.contains(x.as_str().unwrap())))
    };
    let pj: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("partition.json")).unwrap())
            .unwrap();
    assert!(recorded(&pj), "{pj}");
    assert!(err.contains("memory: in-process: peak RSS "), "{err}");
    assert!(!run.join(".parts").exists(), "spilled parts are unlinked");
    let s = summary(&run);
    assert!(recorded(&s), "{}", s["warnings"]);
    let mem = s["memory"].as_array().unwrap();
    assert_eq!(mem.len(), 1, "{mem:?}");
    assert_eq!(mem[0]["role"], "in-process");
    let rss = mem[0]["peak_rss_bytes"].as_u64().unwrap();
    let anon = mem[0]["peak_anon_bytes"].as_u64().unwrap();
    assert!(
        anon > 0 && anon <= rss + (16 << 20),
        "anon {anon} rss {rss}"
    );
    // far below the in-RAM path's ~160 bytes per arc (issue 10): the graph is not copied
    assert!(anon < 1 << 30, "peak anonymous {anon} bytes");
    let acc = s["best_val"]["value"].as_f64().unwrap();
    assert!(
        acc > 0.4,
        "val accuracy {acc} over 16 planted classes (chance 0.06)"
    );
}

/// Every file under `dir`, by relative path, with its bytes.
fn files_of(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// `tma partition --out` on a graph in the on-disk format streams each part into the partition
/// directory (one line per part, peak memory printed against --memory-budget); the directory
/// has the same bytes as the in-memory path writes from the same graph as a `.npy` dataset,
/// and `tma train --partitions` maps its parts; a budget too small for the parts' build is
/// refused before anything is written.
#[test]
fn partition_out_streams_parts_of_a_mapped_graph_and_train_maps_them() {
    let dir = tempdir();
    let g = dir.path().join("disk").join("g");
    let r = tma(&[
        "generate",
        "--nodes",
        "30000",
        "--avg-degree",
        "10",
        "--feat-dim",
        "8",
        "--seed",
        "3",
        "--memory-budget",
        "32MiB",
        "--out",
        g.to_str().unwrap(),
    ]);
    assert_success(&r);
    let flags = [
        "--method",
        "super",
        "--super-clustering",
        "lpa",
        "--super-nodes",
        "300",
        "--parts",
        "3",
        "--seed",
        "7",
    ];
    let partition = |dataset: &std::path::Path, out: &std::path::Path, extra: &[&str]| {
        let mut a = vec![
            "partition",
            "--dataset",
            dataset.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ];
        a.extend(flags);
        a.extend(extra);
        tma(&a)
    };
    let streamed = dir.path().join("streamed");
    let r = partition(&g, &streamed, &["--memory-budget", "128MiB"]);
    assert_success(&r);
    let err = stderr(&r);
    assert!(
        err.contains("graph mapped from disk: each part is built in turn and streamed to"),
        "{err}"
    );
    for t in 0..3 {
        assert!(
            err.contains(&format!("  part-{t:03} ({}/3): ", t + 1)),
            "no line for part {t}: {err}"
        );
    }
    let mem = err
        .lines()
        .find(|l| l.starts_with("partition: peak RSS "))
        .unwrap_or_else(|| panic!("no memory line in {err}"));
    assert!(
        mem.contains(", peak anonymous ") && mem.ends_with(" MiB (--memory-budget 128 MiB)"),
        "{mem}"
    );
    assert!(!dir.path().join(".streamed.tmp").exists());
    let out = stdout(&r);
    assert!(
        out.contains("\nclustering: lpa (size-constrained label propagation")
            && out.contains("\narcs kept by the parts: 0."),
        "{out}"
    );

    // the in-memory path: the same graph as a .npy dataset of the same name
    let npy = dir.path().join("npy").join("g");
    assert_success(&tma(&[
        "convert",
        "--dataset",
        g.to_str().unwrap(),
        "--to",
        "npy",
        "--out",
        npy.to_str().unwrap(),
    ]));
    let in_ram = dir.path().join("in-ram");
    let r = partition(&npy, &in_ram, &[]);
    assert_success(&r);
    assert!(!stderr(&r).contains("streamed"), "{}", stderr(&r));
    let (a, b) = (files_of(&streamed), files_of(&in_ram));
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "same files"
    );
    assert_eq!(
        a.len(),
        1 + 7 + 3 * 6,
        "manifest, coordinator/ 7 (CSR, features, y, train/val/test), 3 parts of 6"
    );
    for (k, v) in &a {
        assert!(
            v == &b[k],
            "{k} differs between the streamed and the in-memory path"
        );
    }

    // training reads the directory, parts mapped
    let run = dir.path().join("run");
    let r = tma(&[
        "train",
        "--partitions",
        streamed.to_str().unwrap(),
        "--time-limit",
        "3s",
        "--sync-every",
        "1s",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert_success(&r);
    let err = stderr(&r);
    assert!(
        err.contains("graph mapped, parts mapped from disk"),
        "{err}"
    );
    let s = summary(&run);
    assert_eq!(s["method"], "super-tma", "{s}");
    let acc = s["best_val"]["value"].as_f64().unwrap();
    assert!(
        acc > 0.3,
        "val accuracy {acc} over 16 planted classes (chance 0.06)"
    );

    // a budget that cannot hold the parts' build: refused, nothing left behind
    let small = dir.path().join("small");
    let r = partition(&g, &small, &["--memory-budget", "1MiB"]);
    assert_fails_with(
        &r,
        1,
        &[
            "--memory-budget 1 MiB is too small to build the parts",
            "raise --memory-budget",
        ],
    );
    assert!(!small.exists() && !dir.path().join(".small.tmp").exists());
}

/// Regression (issue 10): `--super-clustering auto` under `tma partition --out --memory-budget`
/// ran METIS by the arc count alone, over the budget (2.1 GiB anonymous at 29M arcs under
/// 1 GiB). Now METIS runs only where its estimated peak (80 bytes per arc + 64 per node: 54
/// MiB for this graph's 693300 arcs and 20000 nodes) fits; the choice is one stderr line and
/// is recorded in the manifest's report; an explicit metis over the budget is refused.
#[test]
fn partition_out_auto_clustering_respects_the_memory_budget() {
    let dir = tempdir();
    let g = dir.path().join("g");
    let r = tma(&[
        "generate",
        "--nodes",
        "20000",
        "--avg-degree",
        "40",
        "--feat-dim",
        "8",
        "--classes",
        "4",
        "--seed",
        "5",
        "--memory-budget",
        "32MiB",
        "--out",
        g.to_str().unwrap(),
    ]);
    assert_success(&r);
    assert!(
        stdout(&r).contains("20000 nodes") || stderr(&r).contains("20000 nodes"),
        "{}",
        crate::harness::text(&r)
    );
    let partition = |out: &std::path::Path, extra: &[&str]| {
        let mut a = vec![
            "partition",
            "--dataset",
            g.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--method",
            "super",
            "--super-nodes",
            "100",
            "--parts",
            "2",
        ];
        a.extend(extra);
        tma(&a)
    };
    let report = |out: &std::path::Path| {
        crate::harness::json_file(&out.join("manifest.json"))["report"].clone()
    };
    let choice_lines = |r: &std::process::Output| -> Vec<String> {
        stderr(r)
            .lines()
            .filter(|l| l.starts_with("super-clustering "))
            .map(String::from)
            .collect()
    };
    // too small for METIS (54 MiB), enough for label propagation and the parts' build
    let tight = dir.path().join("tight");
    let r = partition(&tight, &["--memory-budget", "40MiB"]);
    assert_success(&r);
    let line = "super-clustering auto -> lpa: METIS needs ~54 MiB, over --memory-budget 40 MiB (label propagation ~312 KiB)";
    assert_eq!(choice_lines(&r), [line], "{}", stderr(&r));
    let rep = report(&tight);
    assert_eq!(rep["num_edges"], 693300, "{rep}");
    assert_eq!(rep["clustering"], "lpa", "{rep}");
    assert_eq!(rep["clustering_choice"], line, "{rep}");
    assert!(
        stdout(&r).contains("\nclustering: lpa (size-constrained label propagation, auto: METIS needs ~54 MiB, over --memory-budget 40 MiB"),
        "{}",
        stdout(&r)
    );
    // a generous budget keeps METIS, and says why
    let roomy = dir.path().join("roomy");
    let r = partition(&roomy, &["--memory-budget", "256MiB"]);
    assert_success(&r);
    let line =
        "super-clustering auto -> metis: METIS needs ~54 MiB, within --memory-budget 256 MiB";
    assert_eq!(choice_lines(&r), [line], "{}", stderr(&r));
    let rep = report(&roomy);
    assert_eq!(rep["clustering"], "metis", "{rep}");
    assert_eq!(rep["clustering_choice"], line, "{rep}");
    // without a budget: unchanged (METIS by the arc count, no choice line or field), and the
    // same parts as under the generous budget
    let plain = dir.path().join("plain");
    let r = partition(&plain, &[]);
    assert_success(&r);
    assert!(choice_lines(&r).is_empty(), "{}", stderr(&r));
    let rep_plain = report(&plain);
    assert_eq!(rep_plain["clustering"], "metis", "{rep_plain}");
    assert!(rep_plain.get("clustering_choice").is_none(), "{rep_plain}");
    assert_eq!(rep_plain["assignment_sha256"], rep["assignment_sha256"]);
    // an explicit metis over the budget: refused, naming both flags and the estimate, nothing
    // left behind
    let refused = dir.path().join("refused");
    let r = partition(
        &refused,
        &["--memory-budget", "40MiB", "--super-clustering", "metis"],
    );
    assert_fails_with(
        &r,
        1,
        &["--super-clustering metis: METIS needs ~54 MiB for 20000 nodes and 693300 arcs, over --memory-budget 40 MiB; use --super-clustering lpa (label propagation over the graph in place) or auto, or raise --memory-budget"],
    );
    assert!(!refused.exists() && !dir.path().join(".refused.tmp").exists());
}

#[test]
fn partition_out_that_cannot_be_a_partition_directory_is_refused_before_loading() {
    let dir = tempdir();
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep.txt"), b"mine").unwrap();
    // a dataset that does not exist: the --out check comes first
    let missing = dir.path().join("no-such-dataset");
    let run = |out: &std::path::Path| {
        tma(&[
            "partition",
            "--dataset",
            missing.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
    };
    let f = file.to_str().unwrap();
    assert_fails_with(&run(&file), 1, &[f, "exists and is not a directory"]);
    assert_eq!(std::fs::read(&file).unwrap(), b"x");
    assert_fails_with(
        &run(&full),
        1,
        &[full.to_str().unwrap(), "exists and is not empty"],
    );
    assert_eq!(std::fs::read(full.join("keep.txt")).unwrap(), b"mine");
    // its parent is a file
    let under = file.join("parts");
    assert_fails_with(&run(&under), 1, &["--out", f, "Not a directory"]);
    // --memory-budget where nothing is streamed
    let r = tma(&[
        "partition",
        "--gen-nodes",
        "500",
        "--memory-budget",
        "64MiB",
    ]);
    assert_fails_with(
        &r,
        1,
        &["--memory-budget 64 MiB applies to `tma partition --out` on a graph in the on-disk format"],
    );
}

/// `tma generate --link-split` stores the held-out pairs with fixed negatives; `tma train
/// --task link` uses that split (said in one line, recorded), never splits again (the
/// evaluated positives are the stored ones, whatever --val-frac says), and the final test reads
/// the whole stored test split (more than one evaluation chunk of 512 pairs).
#[test]
fn a_generated_link_split_is_used_and_said_never_split_again() {
    let dir = tempdir();
    let g = dir.path().join("g");
    let r = tma(&[
        "generate",
        "--nodes",
        "30000",
        "--avg-degree",
        "12",
        "--feat-dim",
        "8",
        "--link-split",
        "0.005,0.01",
        "--link-num-neg",
        "50",
        "--out",
        g.to_str().unwrap(),
    ]);
    assert_success(&r);
    let out = String::from_utf8_lossy(&r.stdout).to_string();
    assert!(out.contains("50 fixed negatives each"), "{out}");
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(g.join("tma-graph.json")).unwrap()).unwrap();
    assert_eq!(m["link_negatives"]["num_neg"], 50);
    let num_test = m["files"]["link_test.bin"]["len"].as_u64().unwrap() / 2;
    let num_val = m["files"]["link_val.bin"]["len"].as_u64().unwrap() / 2;
    assert!(num_test > 1024 && num_val > 500, "{num_val} / {num_test}");
    let run = dir.path().join("run");
    let r = tma(&[
        "train",
        "--dataset",
        g.to_str().unwrap(),
        "--task",
        "link",
        "--trainers",
        "2",
        "--hidden",
        "16",
        "--time-limit",
        "3s",
        "--sync-every",
        "1s",
        "--sync-ramp",
        "0",
        "--val-frac",
        "0.2",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert_success(&r);
    let err = stderr(&r);
    let want = format!(
        "link split: stored with the graph in {} ({num_val} validation / {num_test} test held-out pairs, 50 stored fixed negatives each, seed 0); used as given, not split again (--val-frac and --test-frac do not apply); its 50 negatives per pair are used, not --eval-num-neg 1000",
        g.display()
    );
    assert!(err.contains(&want), "{err}");
    assert!(err.contains("stored link split"), "dataset line: {err}");
    assert!(
        err.contains(&format!(
            "validation uses a fixed seeded subset of 500 of the {num_val} validation positives every round (--eval-max-edges 500)"
        )),
        "{err}"
    );
    let s = summary(&run);
    let warned = s["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str() == Some(want.as_str()));
    assert!(warned, "{}", s["warnings"]);
    let mrr = s["best_test"]["value"].as_f64().unwrap();
    assert!(mrr.is_finite() && mrr > 0.0, "test mrr {mrr}");
}

/// `tma generate --preset` sets the paper-shaped graph's flags (said in one line); flags given
/// as well override them; without --preset, --nodes is required.
#[test]
fn generate_presets_set_the_shape_and_flags_override_them() {
    let dir = tempdir();
    let g = dir.path().join("mag");
    let r = tma(&[
        "generate",
        "--preset",
        "mag",
        "--nodes",
        "6000",
        "--avg-degree",
        "8",
        "--link-split",
        "0.01,0.01",
        "--link-num-neg",
        "5",
        "--out",
        g.to_str().unwrap(),
    ]);
    assert_success(&r);
    let err = stderr(&r);
    assert!(
        err.contains("preset mag: --nodes 6000 --avg-degree 8 --feat-dim 16 --link-split 0.01,0.01 --split 0.01,0.001,0.002"),
        "{err}"
    );
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(g.join("tma-graph.json")).unwrap()).unwrap();
    assert_eq!(m["num_nodes"], 6000);
    assert_eq!(m["features"]["dim"], 16);
    assert_eq!(m["link_split"], true);
    assert_eq!(m["link_negatives"]["num_neg"], 5);
    let train = m["files"]["train_idx.bin"]["len"].as_u64().unwrap();
    assert!((20..150).contains(&train), "1% of 6000 nodes: {train}");
    let r = tma(&["generate", "--out", dir.path().join("x").to_str().unwrap()]);
    assert_fails_with(
        &r,
        1,
        &["--nodes N is required (or --preset reddit|citation2|mag)"],
    );
}

/// Regression: `--preset reddit` stored 83.6M arcs (it drew 492 per node, and on 232,965 nodes
/// R-MAT repeats ~31% of its arcs, which are merged); Reddit has 114,615,892. It now draws 718
/// per node and stores 114,540,100 (seed 0; the bytes depend on the flags only). ~12 s and
/// ~0.5 GB of temporary disk: no features, no stored negatives.
#[test]
fn generate_preset_reddit_stores_reddits_arc_count() {
    let dir = tempdir();
    let g = dir.path().join("reddit");
    let r = tma(&[
        "generate",
        "--preset",
        "reddit",
        "--feat-dim",
        "0",
        "--link-num-neg",
        "0",
        "--out",
        g.to_str().unwrap(),
    ]);
    assert_success(&r);
    assert!(
        stderr(&r).contains("preset reddit: --nodes 232965 --avg-degree 718 --feat-dim 0"),
        "{}",
        stderr(&r)
    );
    let m = crate::harness::json_file(&g.join("tma-graph.json"));
    assert_eq!(m["num_nodes"], 232_965);
    assert_eq!(m["num_arcs"], 114_540_100_u64);
    let reddit = 114_615_892_f64;
    assert!((114_540_100_f64 - reddit).abs() / reddit < 0.001);
}

/// `tma convert --link-split` gives any dataset the link-split section: a .npy source is
/// converted next to --out first (then removed), an on-disk source split in place of a copy;
/// `tma train --task link` uses the stored split and says so; refusals name the flag.
#[test]
fn convert_link_split_stores_a_split_that_train_uses() {
    let src = shared_dataset("planetoid_cora");
    let dir = tempdir();
    let out = dir.path().join("cora-link");
    let o = out.to_str().unwrap();
    let r = tma(&[
        "convert",
        "--dataset",
        src.to_str().unwrap(),
        "--link-split",
        "0.05,0.1",
        "--link-num-neg",
        "100",
        "--seed",
        "7",
        "--out",
        o,
    ]);
    assert_success(&r);
    let text = stdout(&r);
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tma-graph.json")).unwrap())
            .unwrap();
    let nv = m["files"]["link_val.bin"]["len"].as_u64().unwrap() / 2;
    let nt = m["files"]["link_test.bin"]["len"].as_u64().unwrap() / 2;
    let arcs = m["num_arcs"].as_u64().unwrap();
    // Cora: 5278 undirected edges (10556 arcs), 5% / 10% of them held out
    assert!(
        (180..360).contains(&nv) && (400..660).contains(&nt),
        "{nv} / {nt}"
    );
    assert_eq!(arcs, 10556 - 2 * (nv + nt));
    assert!(
        text.contains(&format!(
            "{nv} validation and {nt} test pairs held out (seed 7); the stored graph is the training graph: {arcs} of 10556 arcs"
        )) && text.contains("100 fixed negatives per held-out pair stored"),
        "{text}"
    );
    assert_eq!(m["link_negatives"]["num_neg"], 100);
    // the staging conversion is gone
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("cora-link")],
        "{left:?}"
    );
    // an on-disk source without a split is split directly; the same seed gives the same pairs
    let disk = dir.path().join("cora-disk");
    assert_success(&tma(&[
        "convert",
        "--dataset",
        src.to_str().unwrap(),
        "--out",
        disk.to_str().unwrap(),
    ]));
    let again = dir.path().join("again");
    assert_success(&tma(&[
        "convert",
        "--dataset",
        disk.to_str().unwrap(),
        "--link-split",
        "0.05,0.1",
        "--link-num-neg",
        "100",
        "--seed",
        "7",
        "--out",
        again.to_str().unwrap(),
    ]));
    for f in [
        "link_val.bin",
        "link_test.bin",
        "link_val_neg.bin",
        "indices.bin",
    ] {
        assert_eq!(
            std::fs::read(out.join(f)).unwrap(),
            std::fs::read(again.join(f)).unwrap(),
            "{f}"
        );
    }
    // train uses it, says so
    let run = dir.path().join("run");
    let r = tma(&[
        "train",
        "--dataset",
        o,
        "--task",
        "link",
        "--trainers",
        "2",
        "--hidden",
        "16",
        "--time-limit",
        "2s",
        "--sync-every",
        "1s",
        "--out",
        run.to_str().unwrap(),
    ]);
    assert_success(&r);
    let err = stderr(&r);
    assert!(
        err.contains(&format!(
            "link split: stored with the graph in {o} ({nv} validation / {nt} test held-out pairs, 100 stored fixed negatives each, seed 7); used as given, not split again"
        )),
        "{err}"
    );
    // a partition directory keeps it; the line names no flag `tma partition` lacks
    let r = tma(&[
        "partition",
        "--dataset",
        o,
        "--task",
        "link",
        "--method",
        "random",
        "--parts",
        "2",
        "--out",
        dir.path().join("parts").to_str().unwrap(),
    ]);
    assert_success(&r);
    let err = stderr(&r);
    assert!(
        err.contains(&format!(
            "link split: stored with the graph in {o} ({nv} validation / {nt} test held-out pairs, 100 stored fixed negatives each, seed 7); used as given, not split again\n"
        )) && !err.contains("--val-frac") && !err.contains("--eval-num-neg"),
        "{err}"
    );
    // refusals
    let r = tma(&[
        "convert",
        "--dataset",
        o,
        "--link-split",
        "0.1,0.1",
        "--out",
        dir.path().join("twice").to_str().unwrap(),
    ]);
    assert_fails_with(&r, 1, &["already holds a link split"]);
    let r = tma(&[
        "convert",
        "--dataset",
        src.to_str().unwrap(),
        "--link-split",
        "0.1",
        "--out",
        dir.path().join("bad").to_str().unwrap(),
    ]);
    assert_fails_with(
        &r,
        1,
        &["--link-split \"0.1\": expected 2 comma-separated numbers"],
    );
    let r = tma(&[
        "convert",
        "--dataset",
        src.to_str().unwrap(),
        "--link-split",
        "0.1,0.1",
        "--to",
        "npy",
        "--out",
        dir.path().join("npy").to_str().unwrap(),
    ]);
    assert_fails_with(&r, 1, &["--link-split", "--to disk"]);
    let r = tma(&[
        "convert",
        "--dataset",
        src.to_str().unwrap(),
        "--link-split",
        "0.1,0.1",
        "--out",
        o,
    ]);
    assert_fails_with(&r, 1, &["exists and is not empty"]);
}

/// Regression (issue 31): zero-length arrays of the on-disk format (an empty test split, a
/// graph without edges, an edgeless CSV) are written and read back (they were written, then
/// refused: "mapping is misaligned for its dtype"); an empty test split's metrics are
/// `undefined` with a warning (they read as a real-looking 0.0000) and `null` in summary.json.
#[test]
fn zero_length_arrays_read_back_and_an_empty_test_split_is_undefined() {
    let dir = tempdir();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let (notest, edgeless, csv, fromcsv) = (p("notest"), p("edgeless"), p("e.csv"), p("fromcsv"));
    let gen = |extra: &[&str], out: &str| {
        let mut args = vec!["generate", "--nodes", "200", "--out", out];
        args.extend_from_slice(extra);
        assert_success(&tma(&args));
    };
    gen(&["--split", "0.6,0.4,0"], &notest);
    gen(&["--avg-degree", "0"], &edgeless);
    std::fs::write(&csv, "src,dst\n").unwrap();
    assert_success(&tma(&["convert", "--dataset", &csv, "--out", &fromcsv]));
    for (d, want) in [
        (&notest, "split: train 116 / val 84 / test 0\n"),
        (&edgeless, "rmat-200: 200 nodes, 0 arcs"),
        (&fromcsv, "e: 0 nodes, 0 arcs"),
    ] {
        let r = tma(&["info", "--dataset", d, "--verify"]);
        assert_success(&r);
        let out = stdout(&r);
        assert!(out.contains(want), "{out}");
        assert!(
            out.contains("contents valid\nchecksums match the manifest\n"),
            "{out}"
        );
    }
    // the empty test split: undefined test metrics, said once, recorded
    let run = p("run");
    let r = tma(&[
        "train",
        "--dataset",
        &notest,
        "--method",
        "centralized",
        "--time-limit",
        "1s",
        "--out",
        &run,
    ]);
    assert_success(&r);
    let warning = "the test split is empty (0 test nodes): every test metric is undefined (printed 'undefined', null in summary.json)";
    assert_eq!(stderr(&r).matches(warning).count(), 1, "{}", stderr(&r));
    let out = stdout(&r);
    let done = out.lines().find(|l| l.starts_with("done: ")).unwrap();
    assert!(
        done.contains(" test=undefined; best (") && done.ends_with(" test=undefined"),
        "{done}"
    );
    assert!(
        out.contains(
            "best model, test: accuracy=undefined macro_f1=undefined majority_rate=undefined\n"
        ),
        "{out}"
    );
    let s = summary(std::path::Path::new(&run));
    for k in ["final_test", "best_test"] {
        assert!(s[k]["value"].is_null(), "{k}: {}", s[k]);
        let all = s[k]["all"].as_object().unwrap();
        assert_eq!(all.len(), 3, "{all:?}");
        assert!(all.values().all(|v| v.is_null()), "{all:?}");
    }
    assert!(s["final_val"]["value"].as_f64().unwrap() > 0.0);
    assert_eq!(s["warnings"], serde_json::json!([warning]));
}
