//! `tma compare`: several methods on the same data, partition seeds, model and wall-clock
//! budget, over several seeds; a table, a JSON result file and a plot of the validation metric
//! against wall-clock time.
//!
//! ```text
//! OUT/
//!   results.json        every run (validation curve + summary) and the aggregated table
//!   table.md            the table (mean ± sample std over seeds)
//!   val_vs_time.svg     validation metric vs training time, mean over seeds, one line per method
//!   <method>-seed<s>/   each run's own run directory (config.toml, rounds.jsonl, summary.json, models)
//! ```

use crate::opts::{data_source, read_options, resolve, TrainOpts};
use crate::plot::{line_plot_svg, Series};
use crate::train_cmd::value_text;
use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tma_train::{Method, Observer, RoundRecord, Run, RunSpec, Summary, TrainError};

/// Options of `tma compare`: every `tma train` option (applied to every run) plus the methods,
/// seeds and target. `--method` and `--seed` are replaced by `--methods` and `--seeds`.
/// `--drop-parts` and `--fail` apply to every method except `centralized` (one trainer).
/// `--resume`, `--partitions`, `--engine mpi` and `--join-timeout` are errors (see
/// [`unsupported_options`]).
#[derive(Args, Debug)]
pub struct CompareOpts {
    #[command(flatten)]
    pub train: TrainOpts,
    /// Methods to compare, comma separated. Default: every registered method.
    #[arg(long, value_delimiter = ',', default_value = Method::names_csv())]
    pub methods: Vec<Method>,
    /// Seeds (split, partition, init, sampling), comma separated; every method runs once per seed.
    #[arg(long, value_delimiter = ',', default_value = "0,1,2")]
    pub seeds: Vec<u64>,
    /// Validation metric a run must reach for "time to target". Default: 95% of the best mean
    /// best-validation metric among the methods.
    #[arg(long)]
    pub target: Option<f64>,
    /// Title of the plot and the table. Default: dataset, task and budget.
    #[arg(long)]
    pub title: Option<String>,
}

/// One point of a validation curve.
#[derive(Serialize, Clone, Debug)]
pub struct CurvePoint {
    pub round: u64,
    /// Training time of the averaged model, seconds.
    pub elapsed_s: f64,
    /// Primary validation metric.
    pub val: f64,
    /// Trainers that took part in the round.
    pub participants: usize,
}

/// One run of one method with one seed.
#[derive(Serialize, Debug)]
pub struct RunOutcome {
    pub method: String,
    pub seed: u64,
    /// Seconds spent splitting and partitioning (not counted in the training budget).
    pub prepare_s: f64,
    pub curve: Vec<CurvePoint>,
    pub summary: Summary,
}

/// Mean and sample standard deviation (n - 1; 0 for a single value).
#[derive(Serialize, Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    pub mean: f64,
    pub std: f64,
    pub n: usize,
}

impl Stat {
    /// Statistics of `xs` (`None` if empty).
    pub fn of(xs: &[f64]) -> Option<Stat> {
        if xs.is_empty() {
            return None;
        }
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let std = if n > 1 {
            (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Stat { mean, std, n })
    }
    fn show(s: Option<Stat>, digits: usize) -> String {
        match s {
            Some(s) => format!("{:.*} ± {:.*}", digits, s.mean, digits, s.std),
            None => "—".into(),
        }
    }
}

/// One method's row of the table.
#[derive(Serialize, Debug)]
pub struct Row {
    pub method: String,
    pub runs: usize,
    pub final_val: Option<Stat>,
    pub final_test: Option<Stat>,
    pub best_val: Option<Stat>,
    /// Test metric of the best-validation model.
    pub best_test: Option<Stat>,
    /// Seconds until the validation metric first reached the target, over runs that reached it.
    pub time_to_target_s: Option<Stat>,
    /// Runs that reached the target.
    pub reached_target: usize,
    pub rounds: Option<Stat>,
    /// Optimizer steps per trainer (mean over each run's trainers that made any step).
    pub steps_per_trainer: Option<Stat>,
}

/// Seconds until `curve` first reaches `target` (None if never).
pub fn time_to_target(curve: &[CurvePoint], target: f64) -> Option<f64> {
    curve.iter().find(|p| p.val >= target).map(|p| p.elapsed_s)
}

/// Aggregates the runs of `method`.
pub fn row(method: &str, runs: &[&RunOutcome], target: f64) -> Row {
    let v =
        |f: &dyn Fn(&RunOutcome) -> f64| Stat::of(&runs.iter().map(|r| f(r)).collect::<Vec<_>>());
    let reached: Vec<f64> = runs
        .iter()
        .filter_map(|r| time_to_target(&r.curve, target))
        .collect();
    Row {
        method: method.to_string(),
        runs: runs.len(),
        final_val: v(&|r| r.summary.final_val.value),
        final_test: v(&|r| r.summary.final_test.value),
        best_val: v(&|r| r.summary.best_val.value),
        best_test: v(&|r| r.summary.best_test.value),
        time_to_target_s: Stat::of(&reached),
        reached_target: reached.len(),
        rounds: v(&|r| r.summary.rounds as f64),
        steps_per_trainer: v(&|r| {
            let s: Vec<f64> = r
                .summary
                .steps_per_trainer
                .iter()
                .filter(|&&s| s > 0)
                .map(|&s| s as f64)
                .collect();
            s.iter().sum::<f64>() / s.len().max(1) as f64
        }),
    }
}

/// Mean validation curve of `runs` aligned by round index (up to the shortest run): x = mean
/// elapsed seconds, y = mean metric.
pub fn mean_curve(runs: &[&RunOutcome]) -> Vec<(f64, f64)> {
    let n = runs.iter().map(|r| r.curve.len()).min().unwrap_or(0);
    (0..n)
        .map(|i| {
            let k = runs.len() as f64;
            (
                runs.iter().map(|r| r.curve[i].elapsed_s).sum::<f64>() / k,
                runs.iter().map(|r| r.curve[i].val).sum::<f64>() / k,
            )
        })
        .collect()
}

/// The table in Markdown.
pub fn table_markdown(rows: &[Row], metric: &str, target: f64) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| method | final val {metric} | final test {metric} | best val {metric} | test @ best val | time to val ≥ {target:.4} (s) | rounds | steps / trainer |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} ({}/{}) | {} | {} |",
            r.method,
            Stat::show(r.final_val, 4),
            Stat::show(r.final_test, 4),
            Stat::show(r.best_val, 4),
            Stat::show(r.best_test, 4),
            Stat::show(r.time_to_target_s, 1),
            r.reached_target,
            r.runs,
            Stat::show(r.rounds, 1),
            Stat::show(r.steps_per_trainer, 0),
        );
    }
    s
}

/// Prints one line per round and keeps the validation curve (the run writes `rounds.jsonl`).
struct Recorder {
    label: String,
    quiet: bool,
    curve: Vec<CurvePoint>,
}

impl Observer for Recorder {
    fn on_round(&mut self, r: &RoundRecord) -> Result<(), TrainError> {
        // a round left unvalidated by --eval-every is no point of the curve
        if !r.val.value.is_finite() {
            return Ok(());
        }
        if !self.quiet {
            eprintln!(
                "  {:<24} round {:>3} t={:>6.1}s val {}={:.4}{}",
                self.label,
                r.round,
                r.elapsed_s,
                r.val.metric,
                r.val.value,
                if r.missing.is_empty() {
                    String::new()
                } else {
                    format!(" missing={:?}", r.missing)
                }
            );
        }
        self.curve.push(CurvePoint {
            round: r.round,
            elapsed_s: r.elapsed_s,
            val: r.val.value,
            participants: r.participants.len(),
        });
        Ok(())
    }
}

/// A copy of `o` (through its serialized form, which holds every training option).
fn clone_opts(o: &TrainOpts) -> Result<TrainOpts> {
    Ok(serde_json::from_value(serde_json::to_value(o)?)?)
}

/// The options of one run: `base` (flags over the config file) with `method` and `seed`.
fn run_opts(base: &TrainOpts, method: Method, seed: u64) -> Result<TrainOpts> {
    let mut o = clone_opts(base)?;
    o.config = None; // already merged into `base`
    o.method = Some(method);
    o.seed = Some(seed);
    o.out = None;
    // one trainer (centralized): no parts to drop, no trainer to fail
    if !method.info().many_trainers {
        o.drop_parts = None;
        o.fail = None;
    }
    Ok(o)
}

/// `tma train` options that `tma compare` cannot honour, one message each: `flags` is the
/// command line, `merged` the flags over the --config file (the message says which set it).
pub fn unsupported_options(flags: &TrainOpts, merged: &TrainOpts) -> Vec<String> {
    let from = |on_command_line: bool, key: &str| {
        if on_command_line {
            format!("--{key}")
        } else {
            format!("--{key} (set in the --config file)")
        }
    };
    let mut e = Vec::new();
    if flags.resume.is_some() {
        e.push(
            "--resume is not supported by `tma compare` (it runs several fresh runs); resume one run with `tma train --resume RUN_DIR`"
                .to_string(),
        );
    }
    if merged.partitions.is_some() {
        e.push(format!(
            "{} is not supported by `tma compare` (every method partitions the data its own way, in this process); give --dataset DIR, or train on a partition directory with `tma train --partitions DIR`",
            from(flags.partitions.is_some(), "partitions")
        ));
    }
    if let Some(engine) = merged.engine.as_deref().filter(|e| *e != "in-process") {
        e.push(format!(
            "{} {engine} is not supported by `tma compare` (its runs are in-process threads); run one method under MPI with `tma train --engine mpi --partitions DIR`",
            from(flags.engine.is_some(), "engine")
        ));
    }
    if merged.join_timeout.is_some() {
        e.push(format!(
            "{} is not supported by `tma compare` (it applies only to --engine mpi; compare runs in-process)",
            from(flags.join_timeout.is_some(), "join-timeout")
        ));
    }
    e
}

fn run_one(
    base: &TrainOpts,
    method: Method,
    seed: u64,
    out: &Path,
    quiet: bool,
    stop: &tma_train::StopFlag,
) -> Result<RunOutcome> {
    let (o, cfg, fail) = resolve(run_opts(base, method, seed)?)?;
    let dir = out.join(format!("{method}-seed{seed}"));
    // each run's event file under DIR/<compare's folder>/<method>-seed<seed>/
    let tensorboard = o
        .tensorboard
        .as_ref()
        .map(|tb| tb.join(out.file_name().unwrap_or(out.as_os_str())));
    let spec = RunSpec {
        fail,
        out: Some(dir),
        tensorboard,
        ..RunSpec::new(
            cfg,
            data_source(
                &o.dataset,
                read_options(o.format, o.undirected),
                o.gen_nodes,
            ),
        )
    };
    let mut run = Run::start(spec)?;
    run.stop_on(stop.clone());
    let t0 = Instant::now();
    let run = run.prepare()?;
    let prepare_s = t0.elapsed().as_secs_f64();
    for w in run.warnings() {
        eprintln!("warning: {method} seed {seed}: {w}");
    }
    let mut rec = Recorder {
        label: format!("{method} seed {seed}"),
        quiet,
        curve: Vec::new(),
    };
    let result = run
        .train(&mut rec)
        .with_context(|| format!("{method} seed {seed}"))?;
    let s = &result.summary;
    eprintln!(
        "{method:<12} seed {seed}: {} rounds, final val {}={} test={}; best val={} test={}",
        s.rounds,
        s.final_val.metric,
        value_text(s.final_val.value),
        value_text(s.final_test.value),
        value_text(s.best_val.value),
        value_text(s.best_test.value)
    );
    Ok(RunOutcome {
        method: method.to_string(),
        seed,
        prepare_s,
        curve: rec.curve,
        summary: result.summary,
    })
}

/// Runs the comparison and writes OUT/{results.json, table.md, val_vs_time.svg}.
pub fn compare(o: CompareOpts) -> Result<()> {
    if o.train.method.is_some() || o.train.seed.is_some() {
        bail!("tma compare takes --methods and --seeds (not --method / --seed)");
    }
    if o.methods.is_empty() || o.seeds.is_empty() {
        bail!("--methods and --seeds must name at least one each");
    }
    // a repeated method or seed would write the same run directory twice: refused before any
    // run (it used to fail halfway, leaving the first runs behind)
    if let Some(m) = first_repeat(&o.methods) {
        bail!("--methods names {m} twice: name each method once");
    }
    if let Some(s) = first_repeat(&o.seeds) {
        bail!("--seeds names {s} twice: name each seed once");
    }
    if o.train.resume.is_some() {
        // before the config is read: --resume has no config file of its own here
        bail!("{}", unsupported_options(&o.train, &o.train).join("; "));
    }
    let quiet = o.train.quiet;
    // merge a --config file once, so every run sees the same options
    let (base, cfg0, _) = resolve(clone_opts_with_config(&o.train)?)?;
    let unsupported = unsupported_options(&o.train, &base);
    if !unsupported.is_empty() {
        bail!("{}", unsupported.join("; "));
    }
    crate::opts::check_gen_nodes(&o.train, &base)?;
    // every run's options are valid before the first one starts (e.g. --sync-every-steps,
    // which ggs rejects, or a --fail trainer index), not minutes into the comparison
    for &seed in &o.seeds {
        for &m in &o.methods {
            resolve(run_opts(&base, m, seed)?).with_context(|| format!("--methods {m}"))?;
        }
    }
    for w in crate::opts::unused_flag_warnings(&o.train, &o.methods, cfg0.model) {
        eprintln!("warning: {w}");
    }
    let name = base
        .dataset
        .as_ref()
        .and_then(|d| d.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "generated".into());
    let out = base.out.clone().unwrap_or_else(|| {
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let stamp: String = now.chars().filter(|c| c.is_ascii_digit()).collect();
        PathBuf::from("runs").join(format!("compare-{name}-{}-{stamp}", cfg0.task))
    });
    if out.join("results.json").exists() {
        bail!(
            "{} already holds a comparison (results.json); choose another --out",
            out.display()
        );
    }
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    // Ctrl-C or SIGTERM: the run in flight stops after its round in flight (checkpoint and
    // summary written, as `tma train`), no further run starts, no table is written
    let (stop, _) = crate::interrupt::install();
    let mut runs = Vec::new();
    for &seed in &o.seeds {
        for &m in &o.methods {
            eprintln!("== {m} seed {seed} ({name}, {})", cfg0.task);
            runs.push(run_one(&base, m, seed, &out, quiet, &stop)?);
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                eprintln!(
                    "interrupt: the comparison stopped during {m} seed {seed} after {} of {} runs; their run directories are in {} (each resumable with `tma train --resume DIR`); no table or results.json was written",
                    runs.len(),
                    o.seeds.len() * o.methods.len(),
                    out.display()
                );
                use std::io::Write;
                let _ = std::io::stdout().flush();
                std::process::exit(crate::interrupt::exit_code());
            }
        }
    }
    let metric = runs
        .first()
        .map(|r| r.summary.final_val.metric.clone())
        .unwrap_or_default();
    let by_method = |m: &Method| -> Vec<&RunOutcome> {
        runs.iter().filter(|r| r.method == m.as_str()).collect()
    };
    let target = o.target.unwrap_or_else(|| {
        0.95 * o
            .methods
            .iter()
            .filter_map(|m| row(m.as_str(), &by_method(m), f64::INFINITY).best_val)
            .map(|s| s.mean)
            .fold(f64::NEG_INFINITY, f64::max)
    });
    let rows: Vec<Row> = o
        .methods
        .iter()
        .map(|m| row(m.as_str(), &by_method(m), target))
        .collect();
    let mut failure = String::new();
    if cfg0.drop_parts > 0 {
        failure.push_str(&format!(", drop-parts {}", cfg0.drop_parts));
    }
    if let Some(f) = base.fail.as_deref().filter(|f| !f.is_empty()) {
        failure.push_str(&format!(", fail {}", f.join(" ")));
    }
    let title = o.title.clone().unwrap_or_else(|| {
        format!(
            "{name}, {} ({metric}), {} trainers, {} budget{failure}",
            cfg0.task,
            cfg0.num_trainers,
            humantime::format_duration(cfg0.time_limit)
        )
    });
    let table = table_markdown(&rows, &metric, target);
    let seeds_s: Vec<String> = o.seeds.iter().map(|s| s.to_string()).collect();
    let md = format!(
        "### {title}\n\nseeds {}; mean ± sample std over seeds; time to target over the runs that reached it\n\n{table}",
        seeds_s.join(", ")
    );
    tma_train::store::output::write_atomic(&out.join("table.md"), md.as_bytes())?;
    let series: Vec<Series> = o
        .methods
        .iter()
        .map(|m| Series {
            label: m.to_string(),
            points: mean_curve(&by_method(m)),
        })
        .collect();
    let svg = out.join("val_vs_time.svg");
    line_plot_svg(
        &svg,
        &title,
        "training time (s)",
        &format!("validation {metric} (mean over {} seeds)", o.seeds.len()),
        &series,
        Some((target, "target")),
        (900, 560),
    )?;
    let results = serde_json::json!({
        "command": std::env::args().collect::<Vec<_>>(),
        "dataset": name,
        "task": cfg0.task.to_string(),
        "metric": metric,
        "methods": o.methods.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
        "seeds": o.seeds,
        "target": target,
        "config": cfg0,
        "fail": base.fail,
        "table": rows,
        "runs": runs,
    });
    tma_train::store::output::write_atomic(
        &out.join("results.json"),
        &serde_json::to_vec_pretty(&results)?,
    )?;
    println!("{md}");
    println!(
        "results: {}  plot: {}",
        out.join("results.json").display(),
        svg.display()
    );
    Ok(())
}

/// `o` with its `--config` file merged in (flags win), `method`/`seed` left unset.
fn clone_opts_with_config(o: &TrainOpts) -> Result<TrainOpts> {
    let mut c = clone_opts(o)?;
    c.config = o.config.clone();
    // resolve() needs a method to validate; any partitioned one will do for the shared options
    c.method = Some(Method::RandomTma);
    Ok(c)
}

/// The first value of `xs` that occurs again later in it.
fn first_repeat<T: PartialEq + Copy>(xs: &[T]) -> Option<T> {
    xs.iter()
        .enumerate()
        .find(|(i, x)| xs[i + 1..].contains(x))
        .map(|(_, &x)| x)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(t: f64, v: f64) -> CurvePoint {
        CurvePoint {
            round: 0,
            elapsed_s: t,
            val: v,
            participants: 1,
        }
    }

    #[test]
    fn stat_is_mean_and_sample_std() {
        let s = Stat::of(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.mean, s.std, s.n), (2.0, 1.0, 3));
        assert_eq!(Stat::of(&[5.0]).unwrap().std, 0.0);
        assert!(Stat::of(&[]).is_none());
        assert_eq!(Stat::show(Stat::of(&[1.0, 2.0, 3.0]), 2), "2.00 ± 1.00");
    }

    #[test]
    fn first_repeat_names_the_repeated_value() {
        assert_eq!(first_repeat(&[0u64, 1, 2]), None);
        assert_eq!(first_repeat(&[0u64, 1, 0]), Some(0));
        assert_eq!(
            first_repeat(&[Method::RandomTma, Method::Centralized, Method::Centralized]),
            Some(Method::Centralized)
        );
        assert_eq!(first_repeat::<u64>(&[]), None);
    }

    #[test]
    fn time_to_target_is_first_crossing() {
        let c = vec![pt(1.0, 0.2), pt(2.0, 0.6), pt(3.0, 0.5), pt(4.0, 0.7)];
        assert_eq!(time_to_target(&c, 0.55), Some(2.0));
        assert_eq!(time_to_target(&c, 0.7), Some(4.0));
        assert_eq!(time_to_target(&c, 0.9), None);
    }
}
