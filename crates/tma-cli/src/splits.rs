//! `tma train --split-index all`: one run per fixed split of the dataset, each a normal run
//! directory `RUN_DIR/split-K/`, then the mean +- std over splits of the best-validation
//! model's test metrics, printed and written to `RUN_DIR/splits.json` (rewritten after every
//! split, `completed` counting the splits done), as the papers report results on datasets
//! with several fixed splits (e.g. the ten splits of the heterophilous benchmarks).

use crate::compare::Stat;
use crate::opts::{load, with_config_file, SplitIndexArg, TrainOpts};
use crate::train_cmd::train_inner;
use anyhow::{bail, Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tma_train::Task;

/// One split's run, as `splits.json` lists it.
#[derive(Serialize, Debug, Clone)]
pub struct SplitRun {
    /// The split index.
    pub split: usize,
    /// Its run directory, relative to RUN_DIR (`split-K`).
    pub run_dir: String,
    /// Round of the best validation result.
    pub best_round: u64,
    /// The best validation value of the selecting metric.
    pub best_val: f64,
    /// Test value of the selecting metric for the best-validation model.
    pub best_test: f64,
    /// Test value of the selecting metric for the last round's model.
    pub final_test: f64,
    /// Every test metric of the best-validation model.
    pub best_test_all: BTreeMap<String, f64>,
}

/// `splits.json`: every split's run and the statistics over them.
#[derive(Serialize, Debug)]
pub struct SplitsReport {
    /// Dataset name.
    pub dataset: String,
    /// The `--method`.
    pub method: String,
    /// The metric that selected each run's best model (`--metric`, auto resolved).
    pub metric: String,
    /// Fixed splits of the dataset.
    pub num_splits: usize,
    /// Splits whose run has finished (== `num_splits` when the report is complete).
    pub completed: usize,
    /// How `std` is computed.
    pub std: &'static str,
    /// Best-validation model's test value of `metric` over the splits.
    pub best_test: Option<Stat>,
    /// Best validation value of `metric` over the splits.
    pub best_val: Option<Stat>,
    /// Last round's model's test value of `metric` over the splits.
    pub final_test: Option<Stat>,
    /// Every test metric of the best-validation models over the splits.
    pub best_test_all: BTreeMap<String, Stat>,
    /// The runs, by split.
    pub splits: Vec<SplitRun>,
}

/// What `std` means in `splits.json` and the printed line.
const STD_NOTE: &str =
    "sample standard deviation over splits (n - 1 denominator, as torch.std in OGB's Logger); undefined values (NaN) are left out of mean and std";

/// Statistics of the finite values of `xs` (None when there is none).
fn stat(xs: impl IntoIterator<Item = f64>) -> Option<Stat> {
    let v: Vec<f64> = xs.into_iter().filter(|x| x.is_finite()).collect();
    Stat::of(&v)
}

impl SplitsReport {
    /// The report over `splits` (`completed` = how many).
    pub fn new(
        dataset: &str,
        method: &str,
        metric: &str,
        num_splits: usize,
        splits: Vec<SplitRun>,
    ) -> SplitsReport {
        let mut names: Vec<&String> = splits.iter().flat_map(|s| s.best_test_all.keys()).collect();
        names.sort();
        names.dedup();
        let best_test_all = names
            .into_iter()
            .filter_map(|k| {
                stat(
                    splits
                        .iter()
                        .filter_map(|s| s.best_test_all.get(k).copied()),
                )
                .map(|st| (k.clone(), st))
            })
            .collect();
        SplitsReport {
            dataset: dataset.to_string(),
            method: method.to_string(),
            metric: metric.to_string(),
            num_splits,
            completed: splits.len(),
            std: STD_NOTE,
            best_test: stat(splits.iter().map(|s| s.best_test)),
            best_val: stat(splits.iter().map(|s| s.best_val)),
            final_test: stat(splits.iter().map(|s| s.final_test)),
            best_test_all,
            splits,
        }
    }
}

/// Reads the run of split `k` from its `summary.json`.
fn read_split(parent: &Path, k: usize) -> Result<SplitRun> {
    let name = format!("split-{k}");
    let path = parent.join(&name).join("summary.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let s: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    // NaN is written as null
    let num = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    Ok(SplitRun {
        split: k,
        run_dir: name,
        best_round: s["best_round"].as_u64().unwrap_or(0),
        best_val: num(&s["best_val"]["value"]),
        best_test: num(&s["best_test"]["value"]),
        final_test: num(&s["final_test"]["value"]),
        best_test_all: s["best_test"]["all"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), num(v))).collect())
            .unwrap_or_default(),
    })
}

/// `tma train`: one run ([`crate::train_cmd::train`]), or with `--split-index all` (on the
/// command line, or in the config file of the run it resumes) a run per fixed split.
///
/// # Errors
/// As the runs'; a `--resume` or `--config` that cannot be read.
pub fn train(o: TrainOpts) -> Result<()> {
    let o = crate::dist::apply_resume(o)?;
    if with_config_file(o.clone())?.split_index == Some(SplitIndexArg::All) {
        return train_all_splits(o);
    }
    crate::train_cmd::train(o)
}

/// `tma train --split-index all` (`flags`: the command line, the config file not yet read).
pub fn train_all_splits(flags: TrainOpts) -> Result<()> {
    let merged = with_config_file(flags.clone())?;
    if flags.resume.is_some() {
        bail!(
            "--split-index all cannot --resume: resume one split's run (--resume RUN_DIR/split-K)"
        );
    }
    if merged.partitions.is_some() {
        bail!("--split-index all needs --dataset: a partition directory holds one split (made by `tma partition --out` for one split index)");
    }
    if merged.engine.as_deref().is_some_and(|e| e != "in-process") {
        bail!("--split-index all runs in-process (--engine mpi needs --partitions, which hold one split)");
    }
    let Some(dataset) = merged.dataset.clone() else {
        bail!("--split-index all needs --dataset with fixed splits (the generated graph has none)");
    };
    let probe = TrainOpts {
        split_index: Some(SplitIndexArg::One(0)),
        config: None,
        ..merged.clone()
    };
    let (_, cfg, _) = crate::opts::resolve(probe)?;
    if cfg.task == Task::Link {
        bail!("--split-index all applies to node classification: --task link splits edges (--val-frac/--test-frac); vary --seed instead");
    }
    let ds = load(
        &Some(dataset.clone()),
        crate::opts::read_options(merged.format, merged.undirected),
        None,
        &cfg,
    )?;
    let num_splits = ds.num_splits;
    if num_splits == 0 {
        bail!(
            "--split-index all: dataset {} ships no fixed split (no train/val/test masks or index files); a seeded 60/20/20 split is made instead, vary --seed",
            dataset.display()
        );
    }
    let name = ds.name.clone();
    drop(ds);
    let parent: PathBuf = merged
        .out
        .clone()
        .unwrap_or_else(|| tma_train::run::default_out(&name, &cfg));
    if std::fs::read_dir(&parent).is_ok_and(|mut d| d.next().is_some()) {
        bail!(
            "run directory {} already exists and is not empty (choose another --out, or remove it)",
            parent.display()
        );
    }
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("creating run directory {}", parent.display()))?;
    if num_splits == 1 {
        eprintln!(
            "warning: --split-index all: dataset {} has one fixed split; one run, std 0",
            dataset.display()
        );
    }
    let quiet = flags.quiet;
    let mut runs = Vec::with_capacity(num_splits);
    let mut metric = String::new();
    for k in 0..num_splits {
        let dir = parent.join(format!("split-{k}"));
        if !quiet {
            eprintln!(
                "split     {k} ({} of {num_splits}) -> {}",
                k + 1,
                dir.display()
            );
        }
        let o = TrainOpts {
            split_index: Some(SplitIndexArg::One(k)),
            out: Some(dir.clone()),
            // each split's event file under DIR/<this folder>/split-K/
            tensorboard: merged
                .tensorboard
                .as_ref()
                .map(|tb| tb.join(parent.file_name().unwrap_or(parent.as_os_str()))),
            ..flags.clone()
        };
        train_inner(o, &mut None).with_context(|| {
            format!(
                "--split-index all: the run of split {k} ({}) failed",
                dir.display()
            )
        })?;
        if metric.is_empty() {
            let s: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(dir.join("summary.json")).unwrap_or_default(),
            )
            .unwrap_or_default();
            metric = s["metric"].as_str().unwrap_or_default().to_string();
        }
        runs.push(read_split(&parent, k)?);
        let report = SplitsReport::new(
            &name,
            cfg.method.as_str(),
            &metric,
            num_splits,
            runs.clone(),
        );
        let path = parent.join("splits.json");
        tma_train::store::output::write_atomic(&path, &serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let report = SplitsReport::new(&name, cfg.method.as_str(), &metric, num_splits, runs);
    println!("{}", report_lines(&report).join("\n"));
    println!("splits report: {}", parent.join("splits.json").display());
    Ok(())
}

/// `mean ± std` with 4 decimals, `-` when undefined.
fn show(s: &Option<Stat>) -> String {
    match s {
        Some(s) => format!("{:.4} ± {:.4}", s.mean, s.std),
        None => "-".into(),
    }
}

/// The printed summary of a report.
pub fn report_lines(r: &SplitsReport) -> Vec<String> {
    let mut lines = vec![format!(
        "splits: {} of {} runs; best-validation model's test {} = {} (mean ± std over splits); val {}; last round's model test {}",
        r.completed,
        r.num_splits,
        r.metric,
        show(&r.best_test),
        show(&r.best_val),
        show(&r.final_test)
    )];
    let others: Vec<String> = r
        .best_test_all
        .iter()
        .map(|(k, s)| format!("{k}={}", show(&Some(*s))))
        .collect();
    lines.push(format!("splits: every test metric: {}", others.join(", ")));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(split: usize, val: f64, test: f64, acc: f64) -> SplitRun {
        SplitRun {
            split,
            run_dir: format!("split-{split}"),
            best_round: 1,
            best_val: val,
            best_test: test,
            final_test: test,
            best_test_all: BTreeMap::from([
                ("roc_auc".to_string(), test),
                ("accuracy".to_string(), acc),
            ]),
        }
    }

    #[test]
    fn report_means_and_sample_std_over_splits() {
        let r = SplitsReport::new(
            "toy",
            "random-tma",
            "roc_auc",
            3,
            vec![
                run(0, 0.9, 0.8, 0.7),
                run(1, 0.8, 0.6, 0.7),
                run(2, 0.7, f64::NAN, 0.4),
            ],
        );
        assert_eq!(r.completed, 3);
        // NaN (undefined) is left out: tests 0.8 and 0.6 -> mean 0.7, sample std sqrt(0.02)
        let t = r.best_test.unwrap();
        assert_eq!(t.n, 2);
        assert!((t.mean - 0.7).abs() < 1e-12);
        assert!((t.std - 0.02f64.sqrt()).abs() < 1e-12);
        let v = r.best_val.unwrap();
        assert!((v.mean - 0.8).abs() < 1e-12 && (v.std - 0.1).abs() < 1e-12);
        let a = r.best_test_all["accuracy"];
        assert!((a.mean - 0.6).abs() < 1e-12 && (a.std - 0.03f64.sqrt()).abs() < 1e-12);
        let lines = report_lines(&r);
        assert!(
            lines[0].starts_with(
                "splits: 3 of 3 runs; best-validation model's test roc_auc = 0.7000 ± 0.1414"
            ),
            "{}",
            lines[0]
        );
        assert_eq!(
            lines[1],
            "splits: every test metric: accuracy=0.6000 ± 0.1732, roc_auc=0.7000 ± 0.1414"
        );
    }

    #[test]
    fn split_index_reads_numbers_and_all() {
        assert_eq!("all".parse::<SplitIndexArg>().unwrap(), SplitIndexArg::All);
        assert_eq!("3".parse::<SplitIndexArg>().unwrap(), SplitIndexArg::One(3));
        assert_eq!(
            "x".parse::<SplitIndexArg>().unwrap_err(),
            "'x' is not a split index (expected a number 0, 1, ... or all)"
        );
        let o: TrainOpts = toml::from_str("split_index = \"all\"").unwrap();
        assert_eq!(o.split_index, Some(SplitIndexArg::All));
        let o: TrainOpts = toml::from_str("split_index = 2\nmetric = \"hits@50\"").unwrap();
        assert_eq!(o.split_index, Some(SplitIndexArg::One(2)));
        assert_eq!(o.metric, Some(tma_train::Metric::HitsAt(50)));
        assert!(toml::from_str::<TrainOpts>("metric = \"f2\"")
            .unwrap_err()
            .to_string()
            .contains("unknown metric 'f2'"));
    }
}
