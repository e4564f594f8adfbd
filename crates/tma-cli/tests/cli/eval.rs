//! `tma eval` and `tma embed` on run directories of real short runs (Cora, node and link):
//! the metrics of both splits are the run's `summary.json` values, every one, digit for digit;
//! embeddings are written for every node; bad input is refused naming the path.

use crate::harness::*;
use std::path::Path;

/// A short random-tma run of `task` on Cora into `run`.
fn cora_run(task: &str, run: &Path, extra: &[&str]) {
    let ds = shared_dataset("planetoid_cora");
    let mut args = vec![
        "train",
        "--dataset",
        ds.to_str().unwrap(),
        "--task",
        task,
        "--trainers",
        "2",
        "--hidden",
        "16",
        "--sync-every",
        "300ms",
        "--time-limit",
        "1500ms",
        "--threads",
        "2",
        "--seed",
        "4",
        "--quiet",
        "--out",
        run.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    assert_success(&tma(&args));
}

/// The JSON object under the first `"key":` of `text`, whitespace removed: numbers as
/// serde_json wrote them (its parser, without `float_roundtrip`, may read one 1 ulp off, so
/// values are compared as text).
fn object_text(text: &str, key: &str) -> String {
    let at = text
        .find(&format!("\"{key}\":"))
        .unwrap_or_else(|| panic!("no {key} in {text}"));
    let rest = &text[at..];
    let open = rest.find('{').unwrap();
    let mut depth = 0;
    for (i, c) in rest[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return rest[open..open + i + 1]
                        .chars()
                        .filter(|c| !c.is_whitespace())
                        .collect();
                }
            }
            _ => {}
        }
    }
    panic!("unclosed {key} in {text}")
}

#[test]
fn eval_reports_every_metric_the_run_recorded() {
    let tmp = tempdir();
    for (task, extra, metric) in [
        // 200 of Cora's 500 validation nodes: the seeded subset is derived again
        ("node", &["--eval-max-nodes", "200"][..], "accuracy"),
        ("link", &[][..], "mrr"),
    ] {
        let run = tmp.path().join(task);
        cora_run(task, &run, extra);
        let summary = std::fs::read_to_string(run.join("summary.json")).unwrap();
        for (which, kv, kt) in [
            ("best", "best_val", "best_test"),
            ("final", "final_val", "final_test"),
        ] {
            let o = tma(&["eval", run.to_str().unwrap(), "--model", which, "--json"]);
            assert_success(&o);
            let out = stdout(&o);
            assert_eq!(
                object_text(&out, "val"),
                object_text(&summary, kv),
                "{task} {which}"
            );
            assert_eq!(
                object_text(&out, "test"),
                object_text(&summary, kt),
                "{task} {which}"
            );
            let j: serde_json::Value = serde_json::from_str(&out).unwrap();
            assert_eq!(j["summary_matches"], true, "{out}");
            assert_eq!(j["val"]["metric"], metric);
            assert_eq!(
                j["model"],
                run.join(format!("model_{which}.safetensors"))
                    .display()
                    .to_string()
            );
        }
        // the text form says so, on another thread count
        let o = tma(&["eval", run.to_str().unwrap(), "--threads", "1"]);
        assert_success(&o);
        let out = stdout(&o);
        assert!(
            out.contains(
                "same values as the run's summary.json (best_val / best_test, every metric)"
            ),
            "{out}"
        );
        assert!(out.contains(&format!("val  {metric} ")), "{out}");
    }

    // a model file with its run's config.toml next to it; --dataset given explicitly
    let lone = tmp.path().join("lone");
    std::fs::create_dir(&lone).unwrap();
    for f in ["config.toml", "model_best.safetensors"] {
        std::fs::copy(tmp.path().join("link").join(f), lone.join(f)).unwrap();
    }
    let ds = shared_dataset("planetoid_cora");
    let model = lone.join("model_best.safetensors");
    let o = tma(&[
        "eval",
        model.to_str().unwrap(),
        "--dataset",
        ds.to_str().unwrap(),
        "--json",
    ]);
    assert_success(&o);
    let summary = std::fs::read_to_string(tmp.path().join("link/summary.json")).unwrap();
    assert_eq!(
        object_text(&stdout(&o), "test"),
        object_text(&summary, "best_test")
    );
    // no summary next to a model file: nothing to compare with
    let j: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(j["summary_matches"].is_null(), "{j}");

    // without config.toml the model file is refused, saying what is missing
    std::fs::remove_file(lone.join("config.toml")).unwrap();
    let o = tma(&[
        "eval",
        model.to_str().unwrap(),
        "--dataset",
        ds.to_str().unwrap(),
    ]);
    assert_fails_with(
        &o,
        1,
        &[
            &model.display().to_string(),
            "no config.toml next to it",
            &lone.join("config.toml").display().to_string(),
        ],
    );
    // a model of Cora (1433 features, 7 classes) on Citeseer (3703, 6)
    let citeseer = shared_dataset("planetoid_citeseer");
    let node = tmp.path().join("node");
    let o = tma(&[
        "eval",
        node.to_str().unwrap(),
        "--dataset",
        citeseer.to_str().unwrap(),
    ]);
    assert_fails_with(
        &o,
        1,
        &[
            &node.join("model_best.safetensors").display().to_string(),
            &citeseer.display().to_string(),
            "3703 features, 6 classes",
            "encoder.0.lin_l.weight has shape [16, 1433] in the file, [16, 3703] for this data",
        ],
    );
    let missing = tmp.path().join("nothing-here");
    let o = tma(&["eval", missing.to_str().unwrap()]);
    assert_fails_with(
        &o,
        1,
        &[
            &missing.display().to_string(),
            "no such run directory or model file",
        ],
    );
}

#[test]
fn embed_writes_every_nodes_row_within_the_budget() {
    let tmp = tempdir();
    let run = tmp.path().join("link");
    cora_run("link", &run, &[]);
    let out = tmp.path().join("emb.npy");
    let o = tma(&[
        "embed",
        run.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--memory-budget",
        "16MiB",
    ]);
    assert_success(&o);
    assert!(stdout(&o).contains("float32 [2708, 16]"), "{}", stdout(&o));
    let a = tma_graph::npy::read::<f32>(&out, &[Some(2708), Some(16)]).unwrap();
    assert!(a.data.iter().all(|x| x.is_finite()));
    // rows differ from node to node (an embedding, not a constant)
    assert_ne!(a.data[..16], a.data[16..32]);
    // only the output: no temporary file left next to it
    let names: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(names.len(), 2);

    // an existing --out is refused, untouched
    let before = std::fs::read(&out).unwrap();
    let o = tma(&[
        "embed",
        run.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_fails_with(&o, 1, &[&out.display().to_string(), "the file exists"]);
    assert_eq!(std::fs::read(&out).unwrap(), before);
    // a link model has no logits
    let o = tma(&[
        "embed",
        run.to_str().unwrap(),
        "--out",
        tmp.path().join("l.npy").to_str().unwrap(),
        "--output",
        "logits",
    ]);
    assert_fails_with(&o, 1, &["--output logits: a link model has no logits"]);
    assert!(!tmp.path().join("l.npy").exists());
}

/// A short link run of seal_Yeast (no node features) into `run` with `method_args`.
fn yeast_link_run(run: &Path, method_args: &[&str]) -> std::process::Output {
    let ds = shared_dataset("seal_Yeast");
    let mut args = vec!["train", "--dataset", ds.to_str().unwrap(), "--task", "link"];
    args.extend_from_slice(method_args);
    args.extend_from_slice(&[
        "--hidden",
        "16",
        "--threads",
        "2",
        "--quiet",
        "--out",
        run.to_str().unwrap(),
    ]);
    tma(&args)
}

/// `tma eval` of a run matched its summary.json.
fn assert_matches_summary(o: &std::process::Output) {
    assert!(
        stdout(o).contains("same values as the run's summary.json"),
        "{}",
        text(o)
    );
}

#[test]
fn eval_gives_a_featureless_run_the_input_auto_chose() {
    // regression: `--featureless auto` chose the degree input for a random-tma run of
    // seal_Yeast (~670 training edges per trainer), but `tma eval` prepared the whole graph,
    // where auto keeps the random columns: the model (2 input columns) did not fit the data
    // (32). The model file records the input the run took; eval reads it back.
    let tmp = tempdir();
    let run = tmp.path().join("run");
    let r = yeast_link_run(
        &run,
        &[
            "--trainers",
            "4",
            "--sync-every",
            "300ms",
            "--time-limit",
            "1200ms",
        ],
    );
    assert_success(&r);
    assert!(
        stderr(&r).contains("so the input is the degree column and a constant one"),
        "{}",
        text(&r)
    );
    let o = tma(&["eval", run.to_str().unwrap()]);
    assert_success(&o);
    assert!(
        stderr(&o).contains(
            "no node features: the input is the degree column and a constant one, as the model was trained (--featureless degree)"
        ),
        "{}",
        text(&o)
    );
    assert_matches_summary(&o);
    // the whole graph in one trainer keeps the random columns: eval of a centralized run
    // gives it the same 32 columns, nothing said
    let central = tmp.path().join("central");
    let r = yeast_link_run(
        &central,
        &["--method", "centralized", "--time-limit", "800ms"],
    );
    assert_success(&r);
    let o = tma(&["eval", central.to_str().unwrap()]);
    assert_success(&o);
    assert!(!stderr(&o).contains("no node features"), "{}", text(&o));
    assert_matches_summary(&o);
}

#[test]
fn eval_on_the_dataset_of_a_run_from_featureless_partitions_gives_the_parts_input() {
    // regression (fresh-eyes trial): a run from a partition directory did not record the
    // input its parts hold (auto chose the degree input for seal_Yeast's 4 parts), so its
    // evaluation on the dataset itself (`--dataset`, as when the directory has moved) gave
    // the model 32 columns instead of 2
    let ds = shared_dataset("seal_Yeast");
    let tmp = tempdir();
    let parts = tmp.path().join("parts");
    assert_success(&partition_link(&ds, "4", &[], &parts));
    let run = tmp.path().join("run");
    assert_success(&tma(&[
        "train",
        "--partitions",
        parts.to_str().unwrap(),
        "--hidden",
        "16",
        "--sync-every",
        "300ms",
        "--time-limit",
        "900ms",
        "--threads",
        "2",
        "--quiet",
        "--out",
        run.to_str().unwrap(),
    ]));
    let o = tma(&[
        "eval",
        run.to_str().unwrap(),
        "--dataset",
        ds.to_str().unwrap(),
    ]);
    assert_success(&o);
    assert!(
        stderr(&o).contains(
            "the input is the degree column and a constant one, as the model was trained"
        ),
        "{}",
        text(&o)
    );
}
