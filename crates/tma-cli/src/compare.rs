//! `tma compare`: several methods on the same data, model and wall-clock budget, over several
//! seeds; a table, a JSON result file and a plot of the validation metric against training
//! time (the mean over seeds on one time grid up to the budget's end, with a min-max band).
//!
//! The data is prepared once: the split and partition of each layout the methods train on
//! (`tma_train::methods::layout_names`) is made once, with the first seed, into a partition
//! directory, and every run of every method of that layout and every seed trains from it
//! (`RunSpec::training_seed`): the seeds vary the initialization, sampling, dropout and
//! training negatives, not the split or the partition. Runs go one after another, each
//! streaming its rounds to its run directory; the table and plot are read back from the run
//! directories, so an interrupted comparison continues with `tma compare --resume OUT`:
//! finished runs are kept as they are, the interrupted run continues from its last checkpoint
//! (one that stopped before its first checkpoint starts again), and the rest run. A resume
//! may add seeds or methods (lists that start with the recorded ones); a layout whose runs
//! have all finished is not made again when its directory was removed, and one made again
//! must have the recorded manifest sha256.
//!
//! ```text
//! OUT/
//!   compare.json            the comparison's options (written first; `--resume OUT` reads them)
//!   partitions/<layout>/    one partition directory per layout (`tma partition --out`'s format;
//!                           files identical to an earlier layout's, as every layout's
//!                           coordinator/ data, are hard links to them: `link_identical_files`)
//!   partitions/<layout>.json  how it was made: seed, seconds, methods, warnings
//!   <method>-seed<s>/       each run's run directory (config.toml, rounds.jsonl, summary.json, ...)
//!   continued.json          runs continued or restarted by `--resume` (absent if none)
//!   results.json            every run (curve + summary), the table, the plotted curves
//!   table.md                the table (mean ± sample std over seeds)
//!   val_vs_time.svg         validation metric vs training time: mean over seeds, min-max band
//! ```

use crate::curves::{mean_band, GridPoint};
use crate::opts::{data_source, read_options, resolve, with_config_file, TrainOpts};
use crate::plot::{line_plot_svg, Series};
use crate::train_cmd::value_text;
use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use tma_train::options::Spelling;
use tma_train::{DataSource, Method, Run, RunSpec};

/// Options of `tma compare`: every `tma train` option (applied to every run) plus the methods,
/// seeds and target. `--method` and `--seed` are replaced by `--methods` and `--seeds`;
/// `--resume OUT` continues the comparison in OUT. `--drop-parts` and `--fail` apply to every
/// method except `centralized` (one trainer). `--partitions`, `--engine mpi` and
/// `--join-timeout` are errors (see [`unsupported_options`]).
#[derive(Args, Debug)]
pub struct CompareOpts {
    #[command(flatten)]
    pub train: TrainOpts,
    /// Methods to compare, comma separated. Default: every registered method.
    #[arg(long, value_delimiter = ',')]
    pub methods: Option<Vec<Method>>,
    /// Seeds, comma separated; every method runs once per seed. The split and partition are
    /// made once, with the first seed, and shared by every seed: the seeds vary the
    /// initialization, sampling, dropout and training negatives. Default: 0,1,2. With
    /// `--resume`, a list that starts with the recorded seeds adds runs for the others (so does
    /// `--methods`).
    #[arg(long, value_delimiter = ',')]
    pub seeds: Option<Vec<u64>>,
    /// Validation metric a run must reach for "time to target". Default: 95% of the best mean
    /// best-validation metric among the methods.
    #[arg(long)]
    pub target: Option<f64>,
    /// Title of the plot and the table. Default: dataset, task and budget.
    #[arg(long)]
    pub title: Option<String>,
}

/// `--seeds`' default.
const DEFAULT_SEEDS: [u64; 3] = [0, 1, 2];

/// What `compare.json` records: the comparison's options, so that `--resume OUT` continues it
/// as it was started.
#[derive(Serialize, Deserialize, Debug, Clone)]
struct Recorded {
    /// Format of this file (1).
    format: u32,
    /// Every `tma train` option given (flags over the --config file), by config-file key.
    options: serde_json::Map<String, Value>,
    methods: Vec<Method>,
    seeds: Vec<u64>,
    target: Option<f64>,
    title: Option<String>,
}

/// One point of a validation curve (a validated round or validation check of `rounds.jsonl`).
#[derive(Serialize, Clone, Debug)]
pub struct CurvePoint {
    pub round: u64,
    /// Training time of the validated model, seconds.
    pub elapsed_s: f64,
    /// Primary validation metric.
    pub val: f64,
    /// Trainers that took part in the round.
    pub participants: usize,
}

/// One run of one method with one seed, as its run directory holds it.
#[derive(Serialize, Debug)]
pub struct RunOutcome {
    pub method: String,
    pub seed: u64,
    /// The run directory.
    pub dir: PathBuf,
    /// Its validated rounds (`rounds.jsonl`), in time order.
    pub curve: Vec<CurvePoint>,
    /// Its `summary.json`.
    pub summary: Value,
}

impl RunOutcome {
    /// The number at `path` in the summary (NaN where it is null or absent: undefined).
    fn num(&self, path: &[&str]) -> f64 {
        path.iter()
            .try_fold(&self.summary, |v, k| v.get(k))
            .and_then(Value::as_f64)
            .unwrap_or(f64::NAN)
    }

    /// The run's validation curve as `(seconds, value)` points for [`mean_band`]: its validated
    /// rounds, then its final value (`summary.json`'s `final_val`, which the table reads) held
    /// from its last round's time on.
    fn step_points(&self) -> Vec<(f64, f64)> {
        let mut p: Vec<(f64, f64)> = self.curve.iter().map(|c| (c.elapsed_s, c.val)).collect();
        let (end, fin) = (
            self.num(&["train_time_s"]),
            self.num(&["final_val", "value"]),
        );
        let last = p.last().copied();
        if last.is_none_or(|l| l.1.to_bits() != fin.to_bits() || l.0 < end) {
            p.push((last.map_or(end, |l| l.0.max(end)), fin));
        }
        p
    }
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
    /// `mean ± std`; a single value alone (one run has no spread, and `± 0` would say it has
    /// none measured as zero).
    fn show(s: Option<Stat>, digits: usize) -> String {
        match s {
            Some(s) if s.n == 1 => format!("{:.*}", digits, s.mean),
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
        final_val: v(&|r| r.num(&["final_val", "value"])),
        final_test: v(&|r| r.num(&["final_test", "value"])),
        best_val: v(&|r| r.num(&["best_val", "value"])),
        best_test: v(&|r| r.num(&["best_test", "value"])),
        time_to_target_s: Stat::of(&reached),
        reached_target: reached.len(),
        rounds: v(&|r| r.num(&["rounds"])),
        steps_per_trainer: v(&|r| {
            let s: Vec<f64> = r.summary["steps_per_trainer"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_f64)
                        .filter(|&s| s > 0.0)
                        .collect()
                })
                .unwrap_or_default();
            s.iter().sum::<f64>() / s.len().max(1) as f64
        }),
    }
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

/// Prints one line per validated round (the run itself writes `rounds.jsonl`).
struct Progress {
    label: String,
    quiet: bool,
}

impl tma_train::Observer for Progress {
    fn on_round(&mut self, r: &tma_train::RoundRecord) -> Result<(), tma_train::TrainError> {
        if self.quiet || !r.val.value.is_finite() {
            return Ok(());
        }
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
        Ok(())
    }
}

/// The options of one run: `base` (flags over the config file) with `method` and `seed`.
fn run_opts(base: &TrainOpts, method: Method, seed: u64) -> TrainOpts {
    let mut o = base.clone();
    o.config = None; // already merged into `base`
    o.method = Some(method);
    o.seed = Some(seed);
    o.out = None;
    o.resume = None;
    // one trainer (centralized): no parts to drop, no trainer to fail
    if !method.info().many_trainers {
        o.drop_parts = None;
        o.fail = None;
    }
    o
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
    if merged.partitions.is_some() {
        e.push(format!(
            "{} is not supported by `tma compare` (it makes one partition directory per layout itself, under OUT/partitions/, shared by every method of the layout and every seed); give --dataset DIR, or train on a partition directory with `tma train --partitions DIR`",
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

/// A comparison to run: its options, resolved (fresh) or read back (`--resume`).
struct Plan {
    /// Every run's options but the method and seed (flags over the config file).
    base: TrainOpts,
    methods: Vec<Method>,
    seeds: Vec<u64>,
    target: Option<f64>,
    title: Option<String>,
    out: PathBuf,
    quiet: bool,
    /// Methods or seeds `--resume` adds (None for a fresh comparison or an unchanged one).
    extended: Option<Extension>,
}

/// `o`'s options over its `--config` file, with `method`/`seed` unset and `config` merged.
fn merged_options(o: &TrainOpts) -> Result<TrainOpts> {
    let mut m = with_config_file(o.clone())?;
    m.config = None;
    m.method = None;
    m.seed = None;
    m.resume = None;
    Ok(m)
}

/// The options of `o` as `compare.json` records them (config-file keys; unset ones left out).
fn options_map(o: &TrainOpts) -> Result<serde_json::Map<String, Value>> {
    match serde_json::to_value(o)? {
        Value::Object(m) => Ok(m.into_iter().filter(|(_, v)| !v.is_null()).collect()),
        _ => bail!("the options do not serialize to a map"),
    }
}

/// A fresh comparison: `o` checked, its directory made and its options recorded.
fn fresh_plan(o: &CompareOpts) -> Result<Plan> {
    let methods = o.methods.clone().unwrap_or_else(|| Method::ALL.to_vec());
    let seeds = o.seeds.clone().unwrap_or_else(|| DEFAULT_SEEDS.to_vec());
    if methods.is_empty() || seeds.is_empty() {
        bail!("--methods and --seeds must name at least one each");
    }
    // a repeated method or seed would write the same run directory twice: refused before any
    // run (it used to fail halfway, leaving the first runs behind)
    if let Some(m) = first_repeat(&methods) {
        bail!("--methods names {m} twice: name each method once");
    }
    if let Some(s) = first_repeat(&seeds) {
        bail!("--seeds names {s} twice: name each seed once");
    }
    let base = merged_options(&o.train)?;
    let unsupported = unsupported_options(&o.train, &base);
    if !unsupported.is_empty() {
        bail!("{}", unsupported.join("; "));
    }
    crate::opts::check_gen_nodes(&o.train, &base)?;
    let plan_of = |out: PathBuf| Plan {
        base: base.clone(),
        methods: methods.clone(),
        seeds: seeds.clone(),
        target: o.target,
        title: o.title.clone(),
        out,
        quiet: o.train.quiet,
        extended: None,
    };
    let cfg0 = check_runs(&plan_of(PathBuf::new()))?;
    for w in crate::opts::unused_flag_warnings(&o.train, &methods, cfg0.model) {
        eprintln!("warning: {w}");
    }
    let out = base.out.clone().unwrap_or_else(|| {
        let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let stamp: String = now.chars().filter(|c| c.is_ascii_digit()).collect();
        PathBuf::from("runs").join(format!(
            "compare-{}-{}-{stamp}",
            dataset_name(&base),
            cfg0.task
        ))
    });
    if out.join("compare.json").exists() {
        bail!(
            "--out {} already holds a comparison (compare.json): continue it with `tma compare --resume {}` (finished runs are kept), or choose another --out",
            out.display(),
            out.display()
        );
    }
    if out.join("results.json").exists() {
        bail!(
            "{} already holds a comparison (results.json); choose another --out",
            out.display()
        );
    }
    // a run directory there without the comparison's record is another's: a fresh
    // comparison kept it as "finished earlier" (a fresh-clone trial)
    if let Some(d) = seeds
        .iter()
        .flat_map(|s| methods.iter().map(move |m| format!("{m}-seed{s}")))
        .find(|d| out.join(d).exists())
    {
        bail!(
            "--out {} already holds a run directory {d} but no comparison (compare.json): it is not this comparison's; choose another --out, or remove it",
            out.display()
        );
    }
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let rec = Recorded {
        format: 1,
        options: options_map(&TrainOpts {
            out: None,
            ..base.clone()
        })?,
        methods: methods.clone(),
        seeds: seeds.clone(),
        target: o.target,
        title: o.title.clone(),
    };
    tma_train::store::output::write_atomic(
        &out.join("compare.json"),
        &serde_json::to_vec_pretty(&rec)?,
    )?;
    Ok(plan_of(out))
}

/// Whether an option given to `--resume` (`given`) is the recorded one (`recorded`): the same
/// value, or two spellings of one duration (`3s` and `3000ms`: a fresh-clone trial was refused
/// for writing the budget another way).
fn same_option(recorded: &Value, given: &Value) -> bool {
    if recorded == given {
        return true;
    }
    match (recorded.as_str(), given.as_str()) {
        (Some(a), Some(b)) => matches!(
            (humantime::parse_duration(a), humantime::parse_duration(b)),
            (Ok(x), Ok(y)) if x == y
        ),
        _ => false,
    }
}

/// An option's value as the user wrote it: text without quotes, and a single-precision number
/// (`--lr 0.003`) as its shortest single-precision spelling, not the double it is stored as
/// (`0.003000000026077032`).
fn show_option(v: &Value) -> String {
    match (v.as_str(), v.as_f64()) {
        (Some(s), _) => s.to_string(),
        (None, Some(x)) if v.is_f64() && f64::from(x as f32) == x => (x as f32).to_string(),
        _ => v.to_string(),
    }
}

/// `--resume OUT`: the comparison recorded in OUT/compare.json, refused when an option given
/// now differs from the recorded one (each named).
fn resume_plan(o: &CompareOpts, out: &Path) -> Result<Plan> {
    if let Some(given_out) = o.train.out.as_ref().filter(|g| *g != out) {
        bail!(
            "--resume {} continues that comparison; drop --out {}",
            out.display(),
            given_out.display()
        );
    }
    let path = out.join("compare.json");
    let bytes = std::fs::read(&path).with_context(|| {
        format!(
            "--resume {}: no compare.json there (not a comparison of this tma; one made before `tma compare --resume` existed cannot be continued: start it again with another --out)",
            out.display()
        )
    })?;
    let rec: Recorded = serde_json::from_slice(&bytes)
        .with_context(|| format!("{}: not a comparison's record", path.display()))?;
    let merged = merged_options(&o.train)?;
    let unsupported = unsupported_options(&o.train, &merged);
    if !unsupported.is_empty() {
        bail!("{}", unsupported.join("; "));
    }
    let mut differ = Vec::new();
    for (k, v) in options_map(&merged)? {
        if k == "out" {
            continue;
        }
        match rec.options.get(&k) {
            Some(r) if same_option(r, &v) => {}
            r => differ.push(format!(
                "{} {} (recorded: {})",
                Spelling::Flag.name(&k),
                show_option(&v),
                r.map_or_else(|| "not given".to_string(), show_option)
            )),
        }
    }
    // --methods / --seeds that keep the recorded ones as their start add runs; any other
    // change is refused
    let mut added = Vec::new();
    let methods = extend_list(
        "--methods",
        "methods",
        &o.methods,
        &rec.methods,
        &mut added,
        &mut differ,
    );
    let seeds = extend_list(
        "--seeds",
        "seeds",
        &o.seeds,
        &rec.seeds,
        &mut added,
        &mut differ,
    );
    if o.target.is_some() && o.target != rec.target {
        differ.push(format!(
            "--target {} (recorded: {})",
            o.target.unwrap_or_default(),
            rec.target
                .map_or_else(|| "not given".into(), |t| t.to_string())
        ));
    }
    if o.title.is_some() && o.title != rec.title {
        differ.push(format!(
            "--title (recorded: {})",
            rec.title.clone().unwrap_or_else(|| "not given".into())
        ));
    }
    if !differ.is_empty() {
        bail!(
            "--resume {}: the comparison was started with other options: {}; drop {} to continue it as it was started (or start another comparison with another --out)",
            out.display(),
            differ.join(", "),
            if differ.len() == 1 { "that option" } else { "those options" }
        );
    }
    let base: TrainOpts = serde_json::from_value(Value::Object(rec.options.clone()))
        .with_context(|| format!("{}: its options are not this tma's", path.display()))?;
    let extended = (!added.is_empty()).then(|| Extension {
        line: format!(
            "--resume {}: adds {} to the comparison; the runs added train on the partitions made with seed {}, as the recorded ones did",
            out.display(),
            added.join(" and "),
            rec.seeds[0]
        ),
        record: Recorded {
            methods: methods.clone(),
            seeds: seeds.clone(),
            ..rec.clone()
        },
    });
    Ok(Plan {
        base: TrainOpts {
            out: Some(out.to_path_buf()),
            ..base
        },
        methods,
        seeds,
        target: rec.target,
        title: rec.title,
        out: out.to_path_buf(),
        quiet: o.train.quiet,
        extended,
    })
}

/// `--resume`'s `--methods` or `--seeds` (`flag`) against the recorded list: the recorded
/// list when not given or the same; the given list when it starts with the recorded one and
/// names more (`added` gets "seeds 1, 2"); else the recorded list, with the difference in
/// `differ` (the first seed makes the partitions, and runs already made are not dropped).
fn extend_list<T: PartialEq + Copy + std::fmt::Display>(
    flag: &str,
    what: &str,
    given: &Option<Vec<T>>,
    recorded: &[T],
    added: &mut Vec<String>,
    differ: &mut Vec<String>,
) -> Vec<T> {
    let csv = |xs: &[T]| xs.iter().map(T::to_string).collect::<Vec<_>>().join(",");
    match given {
        Some(g) if g.as_slice() != recorded => {
            let extends = g.len() > recorded.len() && g.starts_with(recorded);
            if extends && first_repeat(g).is_none() {
                let new: Vec<String> = g[recorded.len()..].iter().map(T::to_string).collect();
                added.push(format!("{what} {}", new.join(", ")));
                return g.clone();
            }
            let why = match first_repeat(g) {
                Some(x) => format!("; {x} is named twice"),
                None if extends => String::new(),
                None => "; a list that starts with the recorded one adds runs".to_string(),
            };
            differ.push(format!(
                "{flag} {} (recorded: {}{why})",
                csv(g),
                csv(recorded)
            ));
            recorded.to_vec()
        }
        _ => recorded.to_vec(),
    }
}

/// Methods or seeds that `--resume` adds to a comparison: the line that says so and the
/// record (`compare.json`) written once the comparison's lock is held.
struct Extension {
    line: String,
    record: Recorded,
}

/// Every run's options are valid before the first one starts (e.g. --sync-every-steps, which
/// ggs rejects, or a --fail trainer index), not minutes into the comparison, and every run
/// kept as finished trained with them ([`check_kept_config`]), before any layout is made.
/// Returns the configuration of the shared options (the first method, the first seed).
fn check_runs(p: &Plan) -> Result<tma_train::TrainConfig> {
    let mut first = None;
    for &seed in &p.seeds {
        for &m in &p.methods {
            let (_, cfg, _) =
                resolve(run_opts(&p.base, m, seed)).with_context(|| format!("--methods {m}"))?;
            let dir = p.out.join(format!("{m}-seed{seed}"));
            if run_state(&dir) == RunState::Finished {
                check_kept_config(&dir, &cfg)?;
            }
            first.get_or_insert(cfg);
        }
    }
    match first {
        Some(cfg) => Ok(cfg),
        None => Ok(resolve(run_opts(&p.base, p.methods[0], p.seeds[0]))?.1),
    }
}

/// The dataset's name for titles and the default --out: its folder's name, or `generated`.
fn dataset_name(base: &TrainOpts) -> String {
    base.dataset
        .as_ref()
        .and_then(|d| d.file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "generated".into())
}

/// One layout the methods train on, prepared once for all of them.
#[derive(Serialize, Debug)]
struct Layout {
    name: String,
    /// The methods that train on it.
    methods: Vec<String>,
    /// Its partition directory; `None` when it could not be written (`fallback` says why):
    /// then each run of these methods splits and partitions the data itself, with its seed.
    dir: Option<PathBuf>,
    /// The seed of its split and partition.
    seed: u64,
    /// Seconds it took to make (load, split, partition, write), when this comparison made it.
    seconds: Option<f64>,
    /// What preparation changed or dropped in the data, one line each.
    warnings: Vec<String>,
    /// sha256 of the directory's manifest.
    manifest_sha256: Option<String>,
    /// Why the methods of this layout prepare their own data per run, if they do.
    fallback: Option<String>,
}

/// The layouts of `p.methods` (under the first seed's options), in method order.
fn layouts_of(p: &Plan) -> Result<Vec<(String, Vec<Method>)>> {
    let mut out: Vec<(String, Vec<Method>)> = Vec::new();
    for &m in &p.methods {
        let (_, cfg, _) = resolve(run_opts(&p.base, m, p.seeds[0]))?;
        let name = m.layout(&cfg).name();
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, ms)) => ms.push(m),
            None => out.push((name, vec![m])),
        }
    }
    Ok(out)
}

/// Layout `name` as `partitions/<name>.json` recorded it, when every run of `methods` has
/// finished and its partition directory is gone (removed to free the disk, or a comparison's
/// records copied without it): nothing trains on it any more, so it is not made again; the
/// table reads the runs' directories only. None when a run still has to train on it, or
/// when its directory or record is there to be read as usual.
fn finished_layout(p: &Plan, name: &str, methods: &[Method]) -> Option<Layout> {
    let dir = p.out.join("partitions").join(name);
    if dir.join("manifest.json").is_file() {
        return None;
    }
    let all_done = p.seeds.iter().all(|s| {
        methods
            .iter()
            .all(|m| run_state(&p.out.join(format!("{m}-seed{s}"))) == RunState::Finished)
    });
    if !all_done {
        return None;
    }
    let v = recorded_layout(&p.out, name)?;
    eprintln!(
        "partitions {name}: every run on it has finished; its directory is gone (not made again), its record {} is read",
        p.out.join("partitions").join(format!("{name}.json")).display()
    );
    Some(Layout {
        name: name.to_string(),
        methods: methods.iter().map(|m| m.to_string()).collect(),
        dir: Some(dir),
        seed: v["seed"].as_u64()?,
        seconds: v["seconds"].as_f64(),
        warnings: serde_json::from_value(v["warnings"].clone()).unwrap_or_default(),
        manifest_sha256: v["manifest_sha256"].as_str().map(str::to_string),
        fallback: None,
    })
}

/// `OUT/partitions/<name>.json`, the record of a layout's partition directory, if readable.
fn recorded_layout(out: &Path, name: &str) -> Option<Value> {
    let side = out.join("partitions").join(format!("{name}.json"));
    std::fs::read(side)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
}

/// The partition directory of layout `name` under OUT/partitions/: reused when complete
/// (made by an earlier start of this comparison), else made from the data with the options
/// of `methods[0]` and the first seed. A directory that cannot be written (the data loads and
/// is laid out, the writing fails) is a fallback, said and recorded: the methods of the layout
/// then prepare their data per run.
///
/// # Errors
/// A directory there that holds another layout or seed; data that cannot be loaded or laid
/// out (every run would fail the same way).
fn prepare_layout(p: &Plan, name: &str, methods: &[Method]) -> Result<Layout> {
    let seed = p.seeds[0];
    let dir = p.out.join("partitions").join(name);
    let side = p.out.join("partitions").join(format!("{name}.json"));
    let mut layout = Layout {
        name: name.to_string(),
        methods: methods.iter().map(|m| m.to_string()).collect(),
        dir: None,
        seed,
        seconds: None,
        warnings: Vec::new(),
        manifest_sha256: None,
        fallback: None,
    };
    // the runs that trained on it must find the same bytes (also when its directory was
    // removed and is made again, as the same data and seed give)
    let earlier = recorded_layout(&p.out, name)
        .and_then(|v| v["manifest_sha256"].as_str().map(str::to_string));
    let differs = |hash: &str, e: &str| {
        anyhow::anyhow!(
            "partitions {name}: {} is not the partition the comparison's earlier runs trained on (manifest sha256 {hash}, recorded in {name}.json: {e}): the data or this tma changed; remove that directory, or start the comparison again with another --out",
            dir.display()
        )
    };
    if dir.join("manifest.json").is_file() {
        let hash = reuse_layout(&dir, name, seed)?;
        if let Some(e) = earlier.as_deref().filter(|e| *e != hash) {
            return Err(differs(&hash, e));
        }
        layout.manifest_sha256 = Some(hash);
        eprintln!(
            "partitions {name}: reusing {} (made earlier by this comparison)",
            dir.display()
        );
        if let Some(v) = std::fs::read(&side)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        {
            layout.seconds = v["seconds"].as_f64();
            layout.warnings = serde_json::from_value(v["warnings"].clone()).unwrap_or_default();
        }
        layout.dir = Some(dir);
        return Ok(layout);
    }
    match make_layout(p, &dir, methods[0], seed)? {
        Ok((hash, secs, warnings)) => {
            if let Some(e) = earlier.as_deref().filter(|e| *e != hash) {
                // made from the data just now: removing it and trying again gives the same
                // bytes (a fresh-clone trial looped on that advice); the data or the build
                // must be the earlier one
                let _ = std::fs::remove_dir_all(&dir);
                bail!(
                    "partitions {name}: made again from the data, it is not the partition the comparison's earlier runs trained on (manifest sha256 {hash}, recorded in {name}.json: {e}), so it was removed: the data (--dataset) or this build of tma differs from the ones the comparison started with; continue it with those, or start the comparison again with another --out"
                );
            }
            match link_identical_files(&p.out.join("partitions"), &dir) {
                Ok((0, _)) => {}
                Ok((n, bytes)) => eprintln!(
                    "partitions {name}: {n} files ({:.1} MiB) are byte-identical to files already under {} (every layout's evaluation data in coordinator/, and parts that hold the whole graph): kept as hard links to them, not copies",
                    tma_graph::memory::mib(bytes),
                    p.out.join("partitions").display()
                ),
                Err(e) => eprintln!(
                    "note: partitions {name}: the files it shares with the other layouts stay copies ({e:#})"
                ),
            }
            let v = serde_json::json!({
                "layout": name, "methods": layout.methods, "seed": seed, "seconds": secs,
                "warnings": warnings, "manifest_sha256": hash,
            });
            tma_train::store::output::write_atomic(&side, &serde_json::to_vec_pretty(&v)?)?;
            layout.seconds = Some(secs);
            layout.warnings = warnings;
            layout.manifest_sha256 = Some(hash);
            layout.dir = Some(dir);
        }
        Err(e) => {
            let why = format!(
                "the {name} layout could not be written as a partition directory ({e:#}): each run of {} splits and partitions the data itself, with its own seed",
                layout.methods.join(", ")
            );
            eprintln!("warning: {why}");
            layout.fallback = Some(why);
        }
    }
    Ok(layout)
}

/// Refuses a run kept as finished (`dir`) whose `config.toml` trained with other settings
/// than the comparison gives it now (`cfg`): a kept run is judged finished by its
/// `summary.json`, and a run directory from another comparison must not enter the table (a
/// fresh-clone trial). Keys of `cfg` that the kept file lacks (an older build's file) are not
/// compared, nor the data options a partition directory sets
/// ([`tma_train::store::DataConfig`]: the layout's, checked by its manifest sha256); the
/// data source keys (`partitions`, `dataset`) are not part of `cfg`.
///
/// # Errors
/// `config.toml` missing or unreadable, or a setting that differs (each named).
fn check_kept_config(dir: &Path, cfg: &tma_train::TrainConfig) -> Result<()> {
    let path = dir.join("config.toml");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let kept: toml::Table = toml::from_str(&text)
        .with_context(|| format!("{}: not a run's config.toml", path.display()))?;
    // through the same text as the run wrote, so that single-precision numbers read alike
    let now: toml::Table = toml::from_str(&toml::to_string(cfg)?)?;
    // the data options a partition directory gives a run (centralized's 1 trainer) are the
    // layout's, checked through its manifest sha256; the seed stays: it is the run's own
    let data: toml::Table = toml::from_str(&toml::to_string(&tma_train::store::DataConfig::of(
        cfg,
        "",
        cfg.num_trainers,
    ))?)?;
    let differ: Vec<String> = now
        .iter()
        .filter(|(k, _)| *k == "seed" || !data.contains_key(*k))
        .filter_map(|(k, v)| {
            let was = kept.get(k)?;
            (was != v).then(|| format!("{k} = {was} (this comparison: {v})"))
        })
        .collect();
    if !differ.is_empty() {
        bail!(
            "{} is kept as a finished run of this comparison, but it trained with other settings: {}; remove that run directory to train it again, or continue with the options it was started with",
            dir.display(),
            differ.join(", ")
        );
    }
    Ok(())
}

/// Replaces every file of the new partition directory `dir` that is byte-identical to an
/// earlier one (the same sha256 in the manifests and the same size), under another complete
/// partition directory of `root` or earlier in `dir` itself, by a hard link to it. Every
/// layout's `coordinator/` holds the same evaluation graph, features and split, and the
/// parts of the `whole` and `shared-examples` layouts are that graph again: on the MAG-like
/// graph of docs/results-scale.md (9.5 GB) two layouts took 41 GB as copies, and on the
/// citation2-like graph (1.9 GB) the shared-examples layout's 22 such files were 8.2 GB. Partition directories are
/// never written after they are made, and reading still checks every file's sha256, so a
/// link reads as the copy did; removing one directory leaves the others whole. Returns the
/// files linked and their bytes.
///
/// # Errors
/// A manifest of `dir` that cannot be read; a link or rename that fails (the file it was
/// replacing is then still the copy, and the remaining files stay copies).
fn link_identical_files(root: &Path, dir: &Path) -> Result<(usize, u64)> {
    use std::collections::HashMap;
    use std::os::unix::fs::MetadataExt;
    let mut seen: HashMap<(String, u64), PathBuf> = HashMap::new();
    let mut others: Vec<PathBuf> = std::fs::read_dir(root)
        .with_context(|| format!("reading {}", root.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|d| d != dir && d.join("manifest.json").is_file())
        .collect();
    others.sort();
    for d in others {
        let Ok(m) = tma_train::store::read_manifest(&d) else {
            continue;
        };
        for (rel, sha) in m.files {
            let path = d.join(&rel);
            if let Ok(meta) = std::fs::metadata(&path) {
                seen.entry((sha, meta.len())).or_insert(path);
            }
        }
    }
    let m = tma_train::store::read_manifest(dir)?;
    let (mut n, mut bytes) = (0, 0);
    for (rel, sha) in m.files {
        let path = dir.join(&rel);
        let meta = std::fs::metadata(&path).with_context(|| format!("{}", path.display()))?;
        let Some(src) = seen.get(&(sha.clone(), meta.len())) else {
            seen.insert((sha, meta.len()), path);
            continue;
        };
        let src_meta = std::fs::metadata(src).with_context(|| format!("{}", src.display()))?;
        if (src_meta.dev(), src_meta.ino()) == (meta.dev(), meta.ino()) {
            continue; // already one file
        }
        let tmp = path.with_extension("npy.link-tmp");
        let _ = std::fs::remove_file(&tmp);
        std::fs::hard_link(src, &tmp)
            .with_context(|| format!("linking {} to {}", tmp.display(), src.display()))?;
        if let Err(e) = std::fs::rename(&tmp, &path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e).with_context(|| format!("replacing {}", path.display()));
        }
        n += 1;
        bytes += meta.len();
    }
    Ok((n, bytes))
}

/// Checks that the complete partition directory `dir` holds layout `name` made with `seed`;
/// returns its manifest's sha256.
fn reuse_layout(dir: &Path, name: &str, seed: u64) -> Result<String> {
    let m = tma_train::store::read_manifest(dir)?;
    if m.data.layout != name || m.data.seed != seed {
        bail!(
            "{} holds the {} layout made with seed {}, not the {name} layout with seed {seed}; remove it",
            dir.display(),
            m.data.layout,
            m.data.seed
        );
    }
    Ok(m.hash)
}

/// Makes the partition directory `dir` for `method`'s layout with `seed` (as `tma partition
/// --out` does); returns the manifest's sha256, the seconds taken and the preparation's
/// warnings (printed), or (inner error) why the directory could not be written.
///
/// # Errors
/// (Outer) data that cannot be loaded, options that do not resolve, a layout that fails.
fn make_layout(
    p: &Plan,
    dir: &Path,
    method: Method,
    seed: u64,
) -> Result<Result<(String, f64, Vec<String>)>> {
    let t = std::time::Instant::now();
    let (o, cfg, _) = resolve(run_opts(&p.base, method, seed))?;
    let writer = match tma_train::store::PartitionWriter::create(dir) {
        Ok(w) => w,
        Err(e) => return Ok(Err(e.into())),
    };
    if writer.removed_stale_staging() {
        eprintln!(
            "note: removed {}, the unfinished staging folder of an earlier start that was stopped",
            writer.staging().display()
        );
    }
    let ds = crate::opts::load(
        &o.dataset,
        read_options(o.format, o.undirected),
        o.gen_nodes,
        &cfg,
    )?;
    let mut warnings: Vec<String> = ds.removed.warning().into_iter().collect();
    let quiet = p.quiet;
    let written = crate::dist::write_partitions(ds, &cfg, writer, None, move |part| {
        if !quiet {
            eprintln!(
                "  part-{:03} ({}/{}): {} nodes, {} arcs streamed in {:.2}s",
                part.trainer,
                part.trainer + 1,
                part.num_parts,
                part.num_nodes,
                part.num_edges,
                part.secs
            );
        }
    });
    let (m, w) = match written {
        Ok(mw) => mw,
        // the layout itself failed (data that does not fit the task, ...): as every run would
        Err(e) if e.downcast_ref::<tma_train::TrainError>().is_some() => return Err(e),
        Err(e) => return Ok(Err(e)),
    };
    warnings.extend(w);
    for w in &warnings {
        eprintln!("warning: partitions {}: {w}", m.data.layout);
    }
    let secs = t.elapsed().as_secs_f64();
    eprintln!(
        "partitions {}: made once in {secs:.1}s with seed {seed} ({} part{}) into {}",
        m.data.layout,
        m.parts.len(),
        if m.parts.len() == 1 { "" } else { "s" },
        dir.display()
    );
    Ok(Ok((m.hash, secs, warnings)))
}

/// Where a run of the comparison stands, from its run directory.
#[derive(Debug, PartialEq)]
enum RunState {
    /// No run directory yet.
    Absent,
    /// A directory without a complete checkpoint: the run stopped before its first round.
    Unstarted,
    /// Stopped with a checkpoint (Ctrl-C, SIGTERM or killed): continued from it.
    Interrupted,
    /// `summary.json` present and not marked interrupted by a stop request.
    Finished,
}

fn run_state(dir: &Path) -> RunState {
    let summary = std::fs::read(dir.join("summary.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
    if let Some(s) = summary {
        // a run whose trainers were all lost ended early for good: it is finished
        let stopped =
            s["interrupted"] == Value::Bool(true) && s["interrupted_by"] == "stop_request";
        if !stopped {
            return RunState::Finished;
        }
    }
    if dir.join("checkpoint").join("state.json").is_file() {
        RunState::Interrupted
    } else if dir.exists() {
        RunState::Unstarted
    } else {
        RunState::Absent
    }
}

/// What `--resume` did to runs that were not finished (`continued.json`): run name -> line.
type Continued = BTreeMap<String, String>;

/// Runs (or continues) `method` with `seed` into OUT/<method>-seed<seed>, unless it finished.
fn run_one(
    p: &Plan,
    method: Method,
    seed: u64,
    layout: &Layout,
    interrupt: &(tma_train::StopFlag, crate::interrupt::Cleanup),
    continued: &mut Continued,
) -> Result<()> {
    let name = format!("{method}-seed{seed}");
    let dir = p.out.join(&name);
    let state = run_state(&dir);
    if state == RunState::Finished {
        eprintln!(
            "== {method} seed {seed}: finished earlier, kept ({})",
            dir.display()
        );
        return Ok(());
    }
    if state == RunState::Unstarted {
        // rounds on record but no checkpoint: records restored without the models, or a
        // checkpoint removed (a fresh-clone trial saw such a run called "stopped before its
        // first checkpoint")
        let rounds = std::fs::read_to_string(dir.join("rounds.jsonl"))
            .map_or(0, |t| t.lines().filter(|l| !l.trim().is_empty()).count());
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        let line = if rounds > 0 {
            format!("stopped after {rounds} rounds on record, but its checkpoint is not there (records kept without the model, or removed): removed and started again")
        } else {
            "stopped before its first checkpoint (nothing to resume): removed and started again"
                .to_string()
        };
        eprintln!("== {method} seed {seed}: {line}");
        continued.insert(name.clone(), line);
        write_continued(&p.out, continued)?;
    }
    let (o, cfg, fail) = resolve(run_opts(&p.base, method, seed))?;
    // each run's event file under DIR/<compare's folder>/<method>-seed<seed>/
    let tensorboard = o
        .tensorboard
        .as_ref()
        .map(|tb| tb.join(p.out.file_name().unwrap_or(p.out.as_os_str())));
    let data = match &layout.dir {
        Some(d) => DataSource::Partitions(d.clone()),
        None => data_source(
            &o.dataset,
            read_options(o.format, o.undirected),
            o.gen_nodes,
        ),
    };
    let spec = RunSpec {
        fail,
        out: Some(dir.clone()),
        resume: state == RunState::Interrupted,
        tensorboard,
        training_seed: layout.dir.as_ref().map(|_| seed),
        ..RunSpec::new(cfg, data)
    };
    let mut run = Run::start(spec).with_context(|| format!("{method} seed {seed}"))?;
    let (stop, cleanup) = interrupt;
    // a second signal removes this run's directory if it has no checkpoint yet (a continued
    // run's is never removed), not the previous run's
    if let Ok(mut slot) = cleanup.lock() {
        *slot = run.dir_existed().map(|existed| (dir.clone(), existed));
    }
    run.stop_on(stop.clone());
    if let Some(st) = run.resumed() {
        let line = format!(
            "continued from its checkpoint at round {} ({:.1}s of training; the optimizer's moments restart)",
            st.round, st.elapsed_s
        );
        eprintln!("== {method} seed {seed}: {line}");
        continued.insert(name, line);
        write_continued(&p.out, continued)?;
    } else {
        eprintln!("== {method} seed {seed}");
    }
    let run = run
        .prepare()
        .with_context(|| format!("{method} seed {seed}"))?;
    for w in run.warnings() {
        eprintln!("warning: {method} seed {seed}: {w}");
    }
    let mut progress = Progress {
        label: format!("{method} seed {seed}"),
        quiet: p.quiet,
    };
    let result = run
        .train(&mut progress)
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
    Ok(())
}

fn write_continued(out: &Path, c: &Continued) -> Result<()> {
    tma_train::store::output::write_atomic(
        &out.join("continued.json"),
        &serde_json::to_vec_pretty(c)?,
    )?;
    Ok(())
}

/// The validated points of `rounds.jsonl` at `path`, in file (time) order.
fn read_curve(path: &Path) -> Result<Vec<CurvePoint>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut curve = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let r: Value = serde_json::from_str(line)
            .with_context(|| format!("{} line {}: not a round record", path.display(), i + 1))?;
        // a round left unvalidated by --eval-every (or undefined) is no point of the curve
        let Some(val) = r["val"]["value"].as_f64() else {
            continue;
        };
        curve.push(CurvePoint {
            round: r["round"].as_u64().unwrap_or(0),
            elapsed_s: r["elapsed_s"].as_f64().unwrap_or(f64::NAN),
            val,
            participants: r["participants"].as_array().map_or(0, Vec::len),
        });
    }
    Ok(curve)
}

/// The finished run `method`-seed`seed` of the comparison in `out`, read from its directory.
fn read_outcome(out: &Path, method: Method, seed: u64) -> Result<RunOutcome> {
    let dir = out.join(format!("{method}-seed{seed}"));
    let sp = dir.join("summary.json");
    let bytes = std::fs::read(&sp).with_context(|| format!("reading {}", sp.display()))?;
    let summary: Value = serde_json::from_slice(&bytes)
        .with_context(|| format!("{}: not a summary", sp.display()))?;
    Ok(RunOutcome {
        method: method.to_string(),
        seed,
        curve: read_curve(&dir.join("rounds.jsonl"))?,
        dir,
        summary,
    })
}

/// Runs the comparison (or continues it: `--resume OUT`) and writes
/// OUT/{results.json, table.md, val_vs_time.svg}.
pub fn compare(o: CompareOpts) -> Result<()> {
    if o.train.method.is_some() || o.train.seed.is_some() {
        bail!("tma compare takes --methods and --seeds (not --method / --seed)");
    }
    let plan = match o.train.resume.as_deref() {
        Some(out) => resume_plan(&o, out)?,
        None => fresh_plan(&o)?,
    };
    // one writer at a time: a second `--resume` of a comparison still going would continue
    // (or start again) the run in flight under it
    let _lock = lock_comparison(&plan.out)?;
    let cfg0 = check_runs(&plan)?;
    let name = dataset_name(&plan.base);
    // Ctrl-C or SIGTERM: the run in flight stops after its round in flight (checkpoint and
    // summary written, as `tma train`), no further run starts, no table is written
    let interrupt = crate::interrupt::install();
    crate::interrupt::set_resume_hint(resume_command(&plan.out, plan.extended.as_ref()));
    let stop = interrupt.0.clone();
    // the data once: one partition directory per layout, for every method and seed
    crate::interrupt::set_before_training(true);
    let layouts: Vec<Layout> = layouts_of(&plan)?
        .iter()
        .map(|(l, ms)| match finished_layout(&plan, l, ms) {
            Some(done) => Ok(done),
            None => prepare_layout(&plan, l, ms),
        })
        .collect::<Result<_>>()?;
    crate::interrupt::set_before_training(false);
    if stop.load(Ordering::SeqCst) {
        stopped(&plan, "the preparation of the data");
    }
    // the runs added are recorded once their data is ready (a layout refused above leaves
    // the comparison as it was)
    if let Some(x) = &plan.extended {
        tma_train::store::output::write_atomic(
            &plan.out.join("compare.json"),
            &serde_json::to_vec_pretty(&x.record)?,
        )?;
        eprintln!("{}", x.line);
    }
    let mut continued: Continued = std::fs::read(plan.out.join("continued.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    for &seed in &plan.seeds {
        for &m in &plan.methods {
            let layout = layouts
                .iter()
                .find(|l| l.methods.contains(&m.to_string()))
                .expect("every method has its layout");
            run_one(&plan, m, seed, layout, &interrupt, &mut continued)?;
            if stop.load(Ordering::SeqCst) {
                stopped(&plan, &format!("{m} seed {seed}"));
            }
        }
    }
    write_results(&plan, &cfg0, &name, &layouts, &continued)
}

/// An exclusive lock on the comparison's directory `out`, held while the returned file is open.
///
/// # Errors
/// Another process holds it (a comparison still going, or continuing it); `out` cannot be
/// opened.
fn lock_comparison(out: &Path) -> Result<std::fs::File> {
    let f = std::fs::File::open(out).with_context(|| format!("opening {}", out.display()))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(std::fs::TryLockError::WouldBlock) => bail!(
            "{} is being written by another tma compare (still going, or continuing it): wait for it to end or stop it (Ctrl-C) before `tma compare --resume`",
            out.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("locking {}", out.display()))
        }
    }
}

/// The command that continues the comparison in `out`: with the lists `extended` adds, which
/// `compare.json` may not record yet (stopped while their partitions were made, a plain
/// `--resume` would drop them without a word: a fresh-clone trial).
fn resume_command(out: &Path, extended: Option<&Extension>) -> String {
    let mut s = format!("tma compare --resume {}", out.display());
    if let Some(x) = extended {
        let csv = |v: Vec<String>| v.join(",");
        let _ = write!(
            s,
            " --methods {} --seeds {}",
            csv(x.record.methods.iter().map(|m| m.to_string()).collect()),
            csv(x.record.seeds.iter().map(|s| s.to_string()).collect())
        );
    }
    s
}

/// Says where the comparison `p` stopped on a signal during `during` and how to continue it,
/// and ends the process with the signal's exit code.
fn stopped(p: &Plan, during: &str) -> ! {
    let total = p.seeds.len() * p.methods.len();
    let done = p
        .seeds
        .iter()
        .flat_map(|s| p.methods.iter().map(move |m| format!("{m}-seed{s}")))
        .filter(|d| run_state(&p.out.join(d)) == RunState::Finished)
        .count();
    eprintln!(
        "interrupt: the comparison stopped during {during} with {done} of {total} runs finished; `{}` continues it (finished runs are kept, an interrupted run continues from its last checkpoint); no table or results.json was written",
        resume_command(&p.out, p.extended.as_ref())
    );
    use std::io::Write;
    let _ = std::io::stdout().flush();
    std::process::exit(crate::interrupt::exit_code());
}

/// The table, plot and results.json of the finished comparison `p`, read from its run
/// directories.
fn write_results(
    p: &Plan,
    cfg0: &tma_train::TrainConfig,
    name: &str,
    layouts: &[Layout],
    continued: &Continued,
) -> Result<()> {
    let out = &p.out;
    let mut runs = Vec::new();
    for &seed in &p.seeds {
        for &m in &p.methods {
            runs.push(read_outcome(out, m, seed)?);
        }
    }
    let metric = runs
        .first()
        .and_then(|r| r.summary["final_val"]["metric"].as_str())
        .unwrap_or_default()
        .to_string();
    let by_method = |m: &Method| -> Vec<&RunOutcome> {
        runs.iter().filter(|r| r.method == m.as_str()).collect()
    };
    let target = p.target.unwrap_or_else(|| {
        0.95 * p
            .methods
            .iter()
            .filter_map(|m| row(m.as_str(), &by_method(m), f64::INFINITY).best_val)
            .map(|s| s.mean)
            .fold(f64::NEG_INFINITY, f64::max)
    });
    let rows: Vec<Row> = p
        .methods
        .iter()
        .map(|m| row(m.as_str(), &by_method(m), target))
        .collect();
    let mut failure = String::new();
    if cfg0.drop_parts > 0 {
        failure.push_str(&format!(", drop-parts {}", cfg0.drop_parts));
    }
    if let Some(f) = p.base.fail.as_deref().filter(|f| !f.is_empty()) {
        failure.push_str(&format!(", fail {}", f.join(" ")));
    }
    let title = p.title.clone().unwrap_or_else(|| {
        format!(
            "{name}, {} ({metric}), {} trainers, {} budget{failure}",
            cfg0.task,
            cfg0.num_trainers,
            humantime::format_duration(cfg0.time_limit)
        )
    });
    let reuse = reuse_line(layouts, p.seeds[0]);
    let table = table_markdown(&rows, &metric, target);
    let seeds_s: Vec<String> = p.seeds.iter().map(|s| s.to_string()).collect();
    let spread = if p.seeds.len() == 1 {
        "one seed: no spread (values without ±)"
    } else {
        "mean ± sample std over seeds"
    };
    let md = format!(
        "### {title}\n\nseeds {}; {spread}; time to target over the runs that reached it; {reuse}\n\n{table}",
        seeds_s.join(", ")
    );
    tma_train::store::output::write_atomic(&out.join("table.md"), md.as_bytes())?;
    // one time axis for every method: up to the budget, or the last validation past it
    let end = runs
        .iter()
        .flat_map(|r| r.step_points())
        .map(|(t, _)| t)
        .filter(|t| t.is_finite())
        .fold(cfg0.time_limit.as_secs_f64(), f64::max);
    let curves: Vec<(String, Vec<GridPoint>)> = p
        .methods
        .iter()
        .map(|m| {
            let pts: Vec<Vec<(f64, f64)>> = by_method(m).iter().map(|r| r.step_points()).collect();
            (m.to_string(), mean_band(&pts, end))
        })
        .collect();
    let series: Vec<Series> = curves
        .iter()
        .map(|(m, g)| Series {
            label: m.clone(),
            points: g.iter().map(|q| (q.t, q.mean)).collect(),
            step: true,
            band: if p.seeds.len() > 1 {
                g.iter().map(|q| (q.t, q.min, q.max)).collect()
            } else {
                Vec::new()
            },
        })
        .collect();
    let svg = out.join("val_vs_time.svg");
    let y_label = if p.seeds.len() > 1 {
        format!(
            "validation {metric}: mean over {} seeds, band min–max",
            p.seeds.len()
        )
    } else {
        format!("validation {metric} (1 seed)")
    };
    line_plot_svg(
        &svg,
        &title,
        "training time (s)",
        &y_label,
        &series,
        Some((target, "target")),
        (900, 560),
    )?;
    let results = serde_json::json!({
        "command": std::env::args().collect::<Vec<_>>(),
        "dataset": name,
        "task": cfg0.task.to_string(),
        "metric": metric,
        "methods": p.methods.iter().map(|m| m.to_string()).collect::<Vec<_>>(),
        "seeds": p.seeds,
        "data_seed": p.seeds[0],
        "reuse": reuse,
        "partitions": layouts,
        "continued": continued,
        "target": target,
        "config": cfg0,
        "fail": p.base.fail,
        "table": rows,
        "plot": {
            "what": "each run's last validated value at each time (a step function), mean and min-max over seeds at every time any run validated, up to end_s; the value at end_s is the mean of the runs' final values",
            "end_s": end,
            "curves": curves.iter().map(|(m, g)| (m.clone(), serde_json::json!(g))).collect::<serde_json::Map<_, _>>(),
        },
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

/// One line on what the runs share: the split and partition of each layout, made once.
fn reuse_line(layouts: &[Layout], seed: u64) -> String {
    let shared: Vec<String> = layouts
        .iter()
        .filter(|l| l.dir.is_some())
        .map(|l| format!("{} ({})", l.name, l.methods.join(", ")))
        .collect();
    let own: Vec<String> = layouts
        .iter()
        .filter(|l| l.dir.is_none())
        .flat_map(|l| l.methods.clone())
        .collect();
    let mut s = format!(
        "one split and partition per layout, made once with seed {seed} and reused by every method of the layout and every seed (the seeds vary initialization, sampling, dropout and training negatives): {}",
        if shared.is_empty() { "none".into() } else { shared.join(", ") }
    );
    if !own.is_empty() {
        let _ = write!(
            s,
            "; {} split and partition per run, with its seed",
            own.join(", ")
        );
    }
    s
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

    #[test]
    fn the_resume_hint_names_the_seeds_and_methods_a_resume_adds() {
        let out = Path::new("/tmp/cmp");
        assert_eq!(resume_command(out, None), "tma compare --resume /tmp/cmp");
        let x = Extension {
            line: String::new(),
            record: Recorded {
                format: 1,
                options: serde_json::Map::new(),
                methods: vec![Method::RandomTma, Method::Centralized],
                seeds: vec![0, 1, 2],
                target: None,
                title: None,
            },
        };
        assert_eq!(
            resume_command(out, Some(&x)),
            "tma compare --resume /tmp/cmp --methods random-tma,centralized --seeds 0,1,2"
        );
    }

    fn pt(t: f64, v: f64) -> CurvePoint {
        CurvePoint {
            round: 0,
            elapsed_s: t,
            val: v,
            participants: 1,
        }
    }

    fn outcome(curve: Vec<CurvePoint>, end: f64, fin: f64) -> RunOutcome {
        RunOutcome {
            method: "random-tma".into(),
            seed: 0,
            dir: PathBuf::new(),
            curve,
            summary: serde_json::json!({"train_time_s": end, "final_val": {"value": fin}}),
        }
    }

    #[test]
    fn stat_is_mean_and_sample_std() {
        let s = Stat::of(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!((s.mean, s.std, s.n), (2.0, 1.0, 3));
        assert_eq!(Stat::of(&[5.0]).unwrap().std, 0.0);
        assert!(Stat::of(&[]).is_none());
        assert_eq!(Stat::show(Stat::of(&[1.0, 2.0, 3.0]), 2), "2.00 ± 1.00");
        // one run: the value alone, no "± 0.00" (a fresh user read it as a measured spread)
        assert_eq!(Stat::show(Stat::of(&[0.125]), 3), "0.125");
        assert_eq!(Stat::show(None, 3), "—");
    }

    #[test]
    fn extend_list_adds_a_longer_list_and_says_why_it_refuses_others() {
        // (the list kept, what it adds, why it refuses) for seeds given against 0,1
        let seeds = |given: Option<Vec<u64>>| {
            let (mut added, mut differ) = (Vec::new(), Vec::new());
            let got = extend_list("--seeds", "seeds", &given, &[0, 1], &mut added, &mut differ);
            (got, added, differ)
        };
        let none: Vec<String> = Vec::new();
        assert_eq!(
            seeds(Some(vec![0, 1, 2])),
            (vec![0, 1, 2], vec!["seeds 2".to_string()], none.clone())
        );
        // a repeat in a list that starts with the recorded one: refused, saying which value
        assert_eq!(
            seeds(Some(vec![0, 1, 1])),
            (
                vec![0, 1],
                none.clone(),
                vec!["--seeds 0,1,1 (recorded: 0,1; 1 is named twice)".to_string()]
            )
        );
        assert_eq!(
            seeds(Some(vec![1, 0, 2])).2,
            vec![
                "--seeds 1,0,2 (recorded: 0,1; a list that starts with the recorded one adds runs)"
                    .to_string()
            ]
        );
        assert_eq!(seeds(None), (vec![0, 1], none.clone(), none));
    }

    #[test]
    fn resume_options_match_across_duration_spellings_and_show_as_written() {
        use serde_json::json;
        assert!(same_option(&json!("3s"), &json!("3000ms")));
        assert!(same_option(&json!("10m"), &json!("600s")));
        assert!(!same_option(&json!("3s"), &json!("4s")));
        assert!(!same_option(&json!("mean"), &json!("sum")));
        assert!(!same_option(&json!(1), &json!(2)));
        assert!(same_option(&json!(2), &json!(2)));
        let lr = serde_json::to_value(0.003f32).unwrap();
        assert_eq!(show_option(&lr), "0.003");
        assert_eq!(show_option(&json!(0.1f64)), "0.1");
        assert_eq!(show_option(&json!(4)), "4");
        assert_eq!(show_option(&json!("10m")), "10m");
        assert_eq!(show_option(&json!([1, 2])), "[1,2]");
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

    #[test]
    fn a_runs_step_points_end_on_its_summarys_final_value() {
        // the last round's value is the final value: nothing added
        let r = outcome(vec![pt(1.0, 0.5), pt(2.0, 0.75)], 2.0, 0.75);
        assert_eq!(r.step_points(), [(1.0, 0.5), (2.0, 0.75)]);
        // a last round left unvalidated (null in rounds.jsonl): the summary's value at its time
        let r = outcome(vec![pt(1.0, 0.5)], 2.0, f64::NAN);
        let p = r.step_points();
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].0, 2.0);
        assert!(p[1].1.is_nan());
        // two seeds: the plotted value at the end is the table's final val mean
        let a = outcome(vec![pt(1.0, 0.5), pt(2.0, 0.75)], 2.0, 0.75);
        let b = outcome(vec![pt(1.5, 0.25), pt(2.5, 0.5)], 2.5, 0.5);
        let g = mean_band(&[a.step_points(), b.step_points()], 3.0);
        let table = row("random-tma", &[&a, &b], 0.6).final_val.unwrap().mean;
        assert_eq!(g.last().map(|q| (q.t, q.mean)), Some((3.0, table)));
        assert_eq!(table, 0.625);
    }

    #[test]
    fn run_state_reads_the_run_directory() {
        let d = tempfile::tempdir().unwrap();
        let run = d.path().join("r");
        assert_eq!(run_state(&run), RunState::Absent);
        std::fs::create_dir_all(run.join("checkpoint")).unwrap();
        assert_eq!(run_state(&run), RunState::Unstarted);
        std::fs::write(run.join("checkpoint/state.json"), "{}").unwrap();
        assert_eq!(run_state(&run), RunState::Interrupted);
        let stopped = r#"{"interrupted": true, "interrupted_by": "stop_request"}"#;
        std::fs::write(run.join("summary.json"), stopped).unwrap();
        assert_eq!(run_state(&run), RunState::Interrupted);
        let lost = r#"{"interrupted": true, "interrupted_by": "trainers_lost"}"#;
        std::fs::write(run.join("summary.json"), lost).unwrap();
        assert_eq!(run_state(&run), RunState::Finished);
        std::fs::write(run.join("summary.json"), r#"{"interrupted": false}"#).unwrap();
        assert_eq!(run_state(&run), RunState::Finished);
    }
}
