//! `tma train`, `tma info`, `tma partition`.

use crate::opts::*;
use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tma_graph::formats::Format;
use tma_graph::Dataset;
use tma_train::options::Spelling;
use tma_train::{
    DataSource, Engine, Method, Observer, RoundRecord, Run, RunSpec, StopCause, Task, TrainConfig,
    TrainError,
};

/// Prints one line per round above the progress bar (the run writes `rounds.jsonl` itself).
pub(crate) struct Printer {
    bar: Option<ProgressBar>,
    /// `--debug-slow-round`: how long recording round 1 stalls the coordinator.
    slow_round: Option<Duration>,
    /// Whether a diverged (NaN) model was reported already (said once).
    said_diverged: bool,
}

impl Observer for Printer {
    fn on_round(&mut self, r: &RoundRecord) -> Result<(), TrainError> {
        if let (1, Some(d)) = (r.round, self.slow_round) {
            std::thread::sleep(d);
        }
        let loss = loss_text(r.train_loss);
        let val = if r.val.value.is_finite() {
            format!("val {}={:.4}", r.val.metric, r.val.value)
        } else if !r.val.metric.is_empty() {
            // validated, value undefined: a diverged model, or ROC-AUC on one class
            format!("val {}=undefined", r.val.metric)
        } else {
            "val -".to_string()
        };
        // said when it happens (summary.json records it: `Run`)
        if let (Some(w), false) = (
            tma_train::evaluation::record::diverged_warning(r),
            self.said_diverged,
        ) {
            eprintln!("warning: {w}");
            self.said_diverged = true;
        }
        let head = if r.check {
            // a check between rounds: after round r.round, no loss of its own
            format!("check {:>3}+", r.round)
        } else {
            format!("round {:>3} ", r.round)
        };
        let steps = if r.missing.is_empty() {
            format!("steps={:?}", r.steps)
        } else {
            // a trainer missing from the round has no entry: say whose the steps are
            format!(
                "steps={:?} (participants {:?} only)",
                r.steps, r.participants
            )
        };
        let mut line = format!(
            "{head} t={:>7.1}s  {steps}  loss={loss}  {val}  eval {:.2}s/{:.2} core-s{}",
            r.elapsed_s,
            r.eval_s,
            r.eval_cpu_s,
            if r.is_best { " *" } else { "" }
        );
        if !r.missing.is_empty() {
            line.push_str(&format!("  missing={:?}", r.missing));
        }
        if r.skipped_slots > 0 || r.late.is_some() {
            line.push_str(&format!("  ({})", skipped_text(r.skipped_slots, r.late)));
        }
        if let Some(h) = hold_text(r) {
            line.push_str(&format!("  ({h})"));
        }
        if let Some(c) = correction_text(r) {
            line.push_str(&format!("  ({c})"));
        }
        match &self.bar {
            Some(b) if !b.is_hidden() => b.println(line),
            Some(_) => eprintln!("{line}"),
            None => {}
        }
        Ok(())
    }
}

/// What the plateau hold did at round `r` (docs/decisions/0037-plateau-hold.md), for its
/// line: the best model sent back, and the share of the round's update applied.
fn hold_text(r: &RoundRecord) -> Option<String> {
    match (r.restored, r.server_step) {
        (Some(b), Some(s)) => Some(format!(
            "validation fell more than {}% below its best, several times in a row (--plateau-patience): {} sent back, later rounds apply {s} of their update",
            tma_train::engines::plateau::PLATEAU_DROP * 100.0,
            if r.restored_check {
                format!("the best model (the check after round {b})")
            } else {
                format!("the best model (round {b}'s)")
            }
        )),
        (None, Some(s)) => Some(format!("step {s}")),
        _ => None,
    }
}

/// What the coordinator's correction did after round `r`'s average (LLCG), for its line.
fn correction_text(r: &RoundRecord) -> Option<String> {
    r.correction.map(|c| {
        format!(
            "correction: {} whole-graph step{} in {:.2}s, loss={:.4}",
            c.steps,
            if c.steps == 1 { "" } else { "s" },
            c.secs,
            c.loss
        )
    })
}

/// Validation shares the trainers' cores: when the rounds' and checks' validations took more
/// than 15% of the run's core time (`threads` x training time), a note with the share and what
/// gives the trainers more (e.g. a link validation ranking 1000 positives against 1000
/// negatives through the MLP decoder takes ~1.4 core-s: checks every 2 s on 2 cores take ~35%).
pub(crate) fn validation_share_note(
    rounds: &[RoundRecord],
    train_time_s: f64,
    cfg: &tma_train::TrainConfig,
) -> Option<String> {
    let core_s: f64 = rounds.iter().map(|r| r.eval_cpu_s).sum();
    let cores = tma_train::engines::total_threads(cfg) as f64;
    let share = core_s / (cores * train_time_s);
    if !(train_time_s > 0.0 && share > 0.15) {
        return None;
    }
    let checks = rounds.iter().filter(|r| r.check).count();
    Some(format!(
        "note: validation took {:.0}% of the {} cores' time ({core_s:.1} core-s over {} validations{}), time the trainers did not train; {} leaves more to training",
        100.0 * share,
        cores,
        rounds.iter().filter(|r| r.val.value.is_finite()).count(),
        if checks > 0 {
            format!(", {checks} of them checks between rounds")
        } else {
            String::new()
        },
        if checks > 0 {
            "a longer --val-check-interval (or none), --eval-every K or a smaller --eval-max-edges / --eval-max-nodes"
        } else {
            "--eval-every K or a smaller --eval-max-edges / --eval-max-nodes"
        }
    ))
}

/// `, the first 10s every 625ms (--sync-ramp 16)` for the training line: the averaging
/// ramp's span and how far it lasts (the first `--sync-every`, or the time limit where that
/// comes first); empty without a ramp.
fn ramp_text(cfg: &TrainConfig) -> String {
    let ramp = cfg.effective_sync_ramp();
    if ramp <= 1 {
        return String::new();
    }
    let Some(first) = tma_train::clock::ramp_slots(cfg.sync_every, ramp).next() else {
        return String::new();
    };
    if first >= cfg.time_limit {
        return String::new();
    }
    format!(
        ", the first {} every {} (--sync-ramp {})",
        short_duration(cfg.sync_every.min(cfg.time_limit)),
        short_duration(first),
        cfg.sync_ramp
    )
}

/// A duration in at most 4 significant digits: `62.5ms`, `1.25s`, `4.883ms`, `225000s`.
fn short_duration(d: Duration) -> String {
    let trim = |x: f64| {
        let s = format!("{x:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    if d < Duration::from_secs(1) {
        format!("{}ms", trim(d.as_secs_f64() * 1e3))
    } else {
        format!("{}s", trim(d.as_secs_f64()))
    }
}

/// The round line's note on skipped averaging slots, e.g. `3 averaging slots skipped: the
/// round formed 1.6s late, 1.5s waiting for validation to keep up and 0.1s for the
/// trainers` (where the time went: the record's `late`).
pub(crate) fn skipped_text(n: u64, late: Option<tma_train::evaluation::record::Late>) -> String {
    let why = match late {
        Some(l) => format!(
            "{:.1}s late, {:.1}s waiting for validation to keep up and {:.1}s for the trainers",
            l.validation_s + l.trainers_s,
            l.validation_s,
            l.trainers_s
        ),
        None => "late (validation or trainers behind)".to_string(),
    };
    match n {
        // the last round, due at the time limit, skips no slot
        0 => format!("the round formed {why}"),
        1 => format!("1 averaging slot skipped: the round formed {why}"),
        n => format!("{n} averaging slots skipped: the round formed {why}"),
    }
}

/// A round's mean training loss for the round line: `-` when no trainer took a step (NaN).
pub(crate) fn loss_text(loss: f64) -> String {
    if loss.is_finite() {
        format!("{loss:.4}")
    } else {
        "-".to_string()
    }
}

/// `tma train`: resolves the options, then drives a [`Run`] (the library owns the run
/// directory, checkpoints and outputs); prints progress.
pub fn train(o: TrainOpts) -> Result<()> {
    #[cfg(feature = "mpi")]
    {
        // rank 0 under MPI: an error before the coordinator loop owns the context must end the
        // whole job (dropping the context would wait in MPI_Finalize for trainer ranks that
        // wait for it: the job would hang without a word)
        let mut slot: MpiSlot = None;
        let r = train_inner(o, &mut slot);
        if let (Err(e), Some(mpi)) = (&r, slot) {
            // (a job of one rank, e.g. started without mpirun, has no rank to end)
            if !mpi.alone() {
                mpi.abort(&format!("{e:#}"));
            }
        }
        r
    }
    #[cfg(not(feature = "mpi"))]
    train_inner(o, &mut None)
}

/// Rank 0's MPI engine while [`train`] owns it (`()` without the `mpi` feature).
#[cfg(feature = "mpi")]
pub(crate) type MpiSlot = Option<tma_train::engines::mpi::Mpi>;
#[cfg(not(feature = "mpi"))]
pub(crate) type MpiSlot = Option<()>;

/// An error of the command line on an MPI rank other than 0: every rank reads the same
/// command line and meets the same error, which rank 0 prints; `main` prints nothing for this
/// one (the exit status is the same).
#[derive(Debug)]
pub(crate) struct SaidByRankZero(pub anyhow::Error);

impl std::fmt::Display for SaidByRankZero {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for SaidByRankZero {}

/// The command line of `tma train` resolved and checked: what every rank reads the same.
/// Returns the flags alone, the options over the config file, the configuration, the failures
/// to inject and the run directory to resume.
fn resolve_command_line(o: TrainOpts) -> Result<CommandLine> {
    // the command line alone, to tell options the user typed from those of a config file
    let flags = o.clone();
    let o = crate::dist::apply_resume(o)?;
    // (resume is not a config-file key, so it does not survive the overlay in resolve)
    let resume_dir = o.resume.clone();
    let (o, cfg, fail) = resolve(o)?;
    check_gen_nodes(&flags, &o)?;
    tma_train::options::check_given(&cfg, &given(&flags), Spelling::Flag)
        .map_err(anyhow::Error::msg)?;
    Ok((flags, o, cfg, fail, resume_dir))
}

type CommandLine = (
    TrainOpts,
    TrainOpts,
    TrainConfig,
    tma_train::FailPlan,
    Option<std::path::PathBuf>,
);

pub(crate) fn train_inner(o: TrainOpts, mpi_slot: &mut MpiSlot) -> Result<()> {
    let quiet = o.quiet;
    let mpi_asked = o.engine.as_deref() == Some("mpi");
    let (flags, o, mut cfg, fail, resume_dir) = match resolve_command_line(o) {
        Ok(r) => r,
        Err(e) if mpi_asked && tma_train::engines::launcher_rank().is_some_and(|r| r > 0) => {
            return Err(SaidByRankZero(e).into())
        }
        Err(e) => return Err(e),
    };
    let parts = crate::dist::open_partitions(&o, &mut cfg)?;
    let engine = crate::dist::parse_engine(o.engine.as_deref())?;
    let join_timeout = match &o.join_timeout {
        Some(s) => Some(parse_duration("join-timeout", s)?),
        None => None,
    };
    let mut warnings = unused_flag_warnings(&flags, &[cfg.method], cfg.model);
    if flags.join_timeout.is_some() && engine != Engine::Mpi {
        warnings.push(
            "--join-timeout is ignored: it applies only to --engine mpi (this run is in-process)"
                .into(),
        );
    }
    let Some(mpi_coordinator) = mpi_role(engine, &parts, join_timeout, &cfg, &fail, &o, mpi_slot)?
    else {
        // a trainer rank of an MPI job: its part is trained
        return Ok(());
    };
    let data = match (&o.partitions, &parts) {
        (Some(dir), _) => DataSource::Partitions(dir.clone()),
        _ => data_source(
            &o.dataset,
            read_options(o.format, o.undirected),
            o.gen_nodes,
        ),
    };
    let spec = RunSpec {
        config: cfg,
        data,
        fail,
        engine,
        join_timeout,
        out: o.out.clone(),
        resume: resume_dir.is_some(),
        // printed with the run's other warnings, and recorded
        notes: warnings,
        tensorboard: o.tensorboard.clone(),
        training_seed: None,
    };
    // Ctrl-C or SIGTERM: first stops after the round in flight, second at once (in-process
    // runs; under MPI the launcher owns the signals)
    let interrupt = (engine == Engine::InProcess).then(crate::interrupt::install);
    crate::interrupt::set_before_training(true);
    let mut run = Run::start(spec)?;
    let out = run.dir().to_path_buf();
    let tb_file = run.tensorboard_file().map(Path::to_path_buf);
    if let Some((stop, cleanup)) = &interrupt {
        if let (Some(existed), Ok(mut slot)) = (run.dir_existed(), cleanup.lock()) {
            *slot = Some((out.clone(), existed));
        }
        run.stop_on(stop.clone());
    }
    for w in split_index_warnings(&flags, run.config(), run.dataset()) {
        eprintln!("warning: {w}");
    }
    let resumed = run.dir_existed().is_none();
    let interrupted_early = |what: &str| -> Result<()> {
        if interrupt
            .as_ref()
            .is_some_and(|(s, _)| s.load(Ordering::SeqCst))
        {
            if resumed {
                bail!(
                    "interrupted {what}: the run directory {} is as it was (`tma train --resume` continues from its last checkpoint)",
                    out.display()
                );
            }
            bail!(
                "interrupted {what}: nothing to keep, the run directory {} was removed",
                out.display()
            );
        }
        Ok(())
    };
    interrupted_early("while loading the data")?;
    if !quiet {
        print_opened(&run, &out);
    }
    let run = prepare_and_say(run, quiet)?;
    interrupted_early("before training started")?;
    crate::interrupt::set_before_training(false);
    let cfg = run.config().clone();
    if !quiet {
        print_training_header(&run, &out, tb_file.as_deref(), o.tensorboard.as_deref());
    }
    let progress = Progress::start(&cfg, run.clock(), quiet);
    let slow_round = match &flags.debug_slow_round {
        Some(s) => Some(parse_duration("debug-slow-round", s)?),
        None => None,
    };
    let mut printer = Printer {
        bar: progress.bar.clone(),
        slow_round,
        said_diverged: false,
    };
    #[cfg(feature = "mpi")]
    let (result, job_end) = match mpi_slot.take().filter(|_| mpi_coordinator) {
        Some(mut mpi) => {
            let result = run.train_with(&mut mpi, &mut printer);
            let job_end = mpi.finish(&result);
            (result.map_err(anyhow::Error::from), job_end)
        }
        None => (run.train(&mut printer).map_err(anyhow::Error::from), None),
    };
    #[cfg(not(feature = "mpi"))]
    let (result, job_end): (_, JobEndSlot) = {
        let _ = mpi_coordinator;
        (run.train(&mut printer).map_err(anyhow::Error::from), None)
    };
    progress.finish();
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            if job_end.is_some() {
                eprintln!("error: {e:#}");
                end_mpi_job(job_end, 1);
            }
            return Err(e);
        }
    };
    let lost = print_result(&result, &cfg, &out, quiet);
    if result.summary.interrupted {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        // 130 / 143: stopped on request (Ctrl-C / SIGTERM); 1: an incomplete run, an error
        let code = if lost {
            1
        } else {
            crate::interrupt::exit_code()
        };
        end_mpi_job(job_end, code);
        std::process::exit(code);
    }
    end_mpi_job(job_end, 0);
    Ok(())
}

/// This process's part under `engine`: `Some(false)` in-process; under `--engine mpi`,
/// `Some(true)` on rank 0 (the coordinator, its engine put into `mpi_slot` once the job's rank
/// count is checked) and `None` on a trainer rank, which has trained its part when this
/// returns.
///
/// # Errors
/// `--engine mpi` without `--partitions`, or in a tma built without MPI; the job's start-up
/// (`tma_train::engines::mpi::launch`) and a trainer rank's run.
fn mpi_role(
    engine: Engine,
    parts: &Option<(PathBuf, tma_train::store::Manifest)>,
    join_timeout: Option<Duration>,
    cfg: &TrainConfig,
    fail: &tma_train::FailPlan,
    o: &TrainOpts,
    mpi_slot: &mut MpiSlot,
) -> Result<Option<bool>> {
    if engine == Engine::InProcess {
        return Ok(Some(false));
    }
    #[cfg(feature = "mpi")]
    {
        let Some((pdir, m)) = parts else {
            bail!("--engine mpi needs --partitions DIR (write one with `tma partition --out DIR`)");
        };
        use tma_train::engines::mpi::{launch, run_trainer, Rank};
        match launch(join_timeout)? {
            Rank::Trainer(ctx) => {
                let method = tma_train::training_method(cfg.method);
                run_trainer(ctx, method, pdir, m, cfg, fail, o.out.as_deref())?;
                Ok(None)
            }
            Rank::Coordinator(mpi) => {
                // the rank count first: nothing is loaded or printed for a job that
                // cannot run (an error here ends every rank, see `train`)
                mpi_slot.insert(*mpi).check_ranks(m)?;
                Ok(Some(true))
            }
        }
    }
    #[cfg(not(feature = "mpi"))]
    {
        let _ = (parts, join_timeout, cfg, fail, o, mpi_slot);
        bail!("--engine mpi: this tma was built without MPI support");
    }
}

/// Says what a started run reads: the dataset (and what tma derives for it), the partition
/// directory, where a resumed run continues.
fn print_opened(run: &Run, out: &Path) {
    if let Some(ds) = run.dataset() {
        eprintln!("dataset   {}", ds.summary());
        if ds.split.is_none()
            && cfg_task_is_node(run.config())
            && !matches!(ds.labels, tma_graph::Labels::None)
        {
            eprintln!(
                "          (no fixed split: a seeded 60/20/20 split of the labelled nodes, --seed {})",
                run.config().seed
            );
        }
        if ds.structural_features {
            let input = match run.config().featureless {
                tma_train::Featureless::Auto => {
                    "--featureless auto: the 32 columns, unless a line below says it takes the degree column and a constant one"
                }
                tma_train::Featureless::Degree => {
                    "--featureless degree: the degree column and a constant one"
                }
                tma_train::Featureless::DegreeRandom => {
                    "--featureless degree-random: the degree column and the 31 random ones"
                }
            };
            eprintln!(
                "          (the run's input: {input}; docs/decisions/0031-featureless-inputs-by-supervision.md, 0035)"
            );
        }
    }
    if let Some((dir, m)) = run.partitions() {
        eprintln!(
            "dataset   {} from partition directory {} ({} parts, manifest sha256 {})",
            m.dataset,
            dir.display(),
            m.parts.len(),
            &m.hash[..16]
        );
        if m.structural_features == Some(true) {
            eprintln!(
                "          (no node features: its parts hold {} structural input column{}, --featureless {}; docs/decisions/0031-featureless-inputs-by-supervision.md)",
                m.in_dim,
                if m.in_dim == 1 { "" } else { "s" },
                m.data.featureless.name()
            );
        }
    }
    if let Some(st) = run.resumed() {
        eprintln!(
            "resuming  from round {} at t={:.1}s ({})",
            st.round,
            st.elapsed_s,
            out.display()
        );
    }
}

/// Splits and partitions the run's data under a spinner, then says how long it took, what is
/// mapped from disk, the partition report and the configuration's warnings.
///
/// # Errors
/// As `tma_train::run::Run::prepare`.
fn prepare_and_say(run: Run, quiet: bool) -> Result<tma_train::run::PreparedRun> {
    let spinner = (!quiet).then(|| {
        let s = ProgressBar::new_spinner();
        s.set_message(format!(
            "splitting and partitioning ({}, {} trainers)",
            run.config().method,
            run.config().effective_trainers()
        ));
        s.enable_steady_tick(Duration::from_millis(100));
        s
    });
    let t_prepare = std::time::Instant::now();
    let prepared = run.prepare();
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let run = prepared?;
    let prep = run.prepared();
    if !quiet {
        // what is read in place: the coordinator's graph, and every trainer part this
        // process holds (none on MPI rank 0)
        let parts_mapped = !prep.trainers.is_empty()
            && prep
                .trainers
                .iter()
                .all(|t| t.graph.indices.is_mapped() && t.graph.indptr.is_mapped());
        let mapped = match (prep.graph.indices.is_mapped(), parts_mapped) {
            (true, true) => "; graph mapped, parts mapped from disk",
            (true, false) => "; graph mapped",
            (false, true) => "; parts mapped from disk",
            (false, false) => "",
        };
        eprintln!(
            "prepared  split and partition in {:.1}s{mapped}",
            t_prepare.elapsed().as_secs_f64()
        );
    }
    if let (Some(rep), false) = (&prep.report, quiet) {
        eprintln!("{}", rep.to_table());
    }
    for w in run.warnings() {
        eprintln!("warning: {w}");
    }
    Ok(run)
}

/// The line that says what trains, how often it averages, for how long and where it writes;
/// how to resume it; where its TensorBoard events go.
fn print_training_header(
    run: &tma_train::run::PreparedRun,
    out: &Path,
    tb_file: Option<&Path>,
    tb_dir: Option<&Path>,
) {
    let cfg = run.config();
    let m = run.prepared().trainers.len().max(cfg.effective_trainers());
    let checks = if cfg.val_check_interval.is_zero() {
        String::new()
    } else {
        format!(
            " (validation checks every {})",
            humantime::format_duration(cfg.val_check_interval)
        )
    };
    let ramp = ramp_text(cfg);
    let sync = if cfg.sync_every_steps > 0 {
        format!("{} steps", cfg.sync_every_steps)
    } else {
        humantime::format_duration(cfg.sync_every).to_string()
    };
    eprintln!(
        "training  {m} trainer{}, {} model, sync every {sync}{ramp}{checks}, time limit {} -> {}",
        if m == 1 { "" } else { "s" },
        cfg.model,
        humantime::format_duration(cfg.time_limit),
        out.display()
    );
    eprintln!(
        "          (interrupted? `tma train --resume {}` continues from the last round)",
        out.display()
    );
    if let (Some(file), Some(dir)) = (tb_file, tb_dir) {
        eprintln!(
            "tensorboard  {} (watch with `tensorboard --logdir {}`)",
            file.display(),
            dir.display()
        );
    }
}

/// The progress bar's words once the training budget is spent.
const BUDGET_SPENT: &str =
    ": training time is up; the last round (its trainers may still be finishing a step), the validations still queued and the tests of the final and best models follow, then the run ends";

/// The progress bar of the training budget, advanced by a thread from the run's clock.
struct Progress {
    bar: Option<ProgressBar>,
    done: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// A bar over `cfg.time_limit` (none when `quiet`), ticking every 100 ms.
    fn start(cfg: &TrainConfig, clock: Arc<dyn tma_train::Clock>, quiet: bool) -> Progress {
        let bar = (!quiet).then(|| {
            let b = ProgressBar::new(cfg.time_limit.as_millis() as u64);
            b.set_style(
                ProgressStyle::with_template("{spinner} {wide_bar} {msg}").expect("template"),
            );
            b
        });
        let done = Arc::new(AtomicBool::new(false));
        let ticker = bar.clone().map(|b| {
            let done = done.clone();
            let limit = cfg.time_limit;
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    let e = clock.elapsed().min(limit);
                    b.set_position(e.as_millis() as u64);
                    // the run goes on past the budget for the last validations and the
                    // test (minutes on a graph of 1e7-1e9 arcs): said, not a frozen bar
                    b.set_message(format!(
                        "{:.0}s / {:.0}s{}",
                        e.as_secs_f64(),
                        limit.as_secs_f64(),
                        if e >= limit { BUDGET_SPENT } else { "" }
                    ));
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        });
        Progress { bar, done, ticker }
    }

    /// Stops the ticker and clears the bar.
    fn finish(self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker {
            let _ = t.join();
        }
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// Prints a finished run: its final and best metrics, what the metric cannot tell, lost
/// trainers, where it is and how to resume an interrupted one, each process's memory.
/// Returns whether every trainer was lost.
fn print_result(result: &tma_train::RunResult, cfg: &TrainConfig, out: &Path, quiet: bool) -> bool {
    let s = &result.summary;
    println!(
        "done: {} rounds in {:.1}s; final val {}={} test={}; best ({}) val={} test={}",
        s.rounds,
        s.train_time_s,
        s.final_val.metric,
        value_text(s.final_val.value),
        value_text(s.final_test.value),
        if s.best_check {
            format!("check after round {}", s.best_round)
        } else {
            format!("round {}", s.best_round)
        },
        value_text(s.best_val.value),
        value_text(s.best_test.value)
    );
    print_metric_notes(s);
    if let Some(note) = validation_share_note(&result.rounds, s.train_time_s, cfg) {
        eprintln!("{note}");
    }
    if !s.failed_trainers.is_empty() {
        println!("failed trainers: {}", failed_list(&s.failed_trainers));
    }
    // recorded in summary.json warnings (tma_train::run)
    for w in tma_train::evaluation::record::absent_trainer_warnings(
        &result.rounds,
        s.num_trainers,
        &s.failed_trainers,
        cfg.sync_every,
        cfg.round_timeout,
    ) {
        eprintln!("warning: {w}");
    }
    // (recorded in summary.json's warnings by the run)
    for w in tma_train::evaluation::record::no_step_warnings(s, cfg.method.averages_models()) {
        eprintln!("warning: {w}");
    }
    println!("run directory: {}", out.display());
    let lost = s.interrupted_by == Some(StopCause::TrainersLost);
    if lost {
        println!(
            "incomplete: every trainer was lost before the {} time limit; stopped after round {} at t={:.1}s; checkpoint and summary (marked interrupted) written to {}",
            humantime::format_duration(cfg.time_limit),
            s.rounds,
            s.train_time_s,
            out.display()
        );
        println!("resume with: tma train --resume {}", out.display());
    } else if s.interrupted {
        println!(
            "interrupted: stopped after round {} at t={:.1}s; checkpoint and summary (marked interrupted) written to {}",
            s.rounds,
            s.train_time_s,
            out.display()
        );
        println!("resume with: tma train --resume {}", out.display());
    }
    if !quiet {
        for m in &s.memory {
            eprintln!("memory: {}", m.line());
        }
    }
    lost
}

/// What the best model's metric alone does not say: the majority-class rate beside accuracy
/// (and a warning when the model does not beat it), multi-label macro-F1, every test metric.
fn print_metric_notes(s: &tma_train::Summary) {
    if let (Some(v), Some(t)) = (
        s.best_val.all.get("majority_rate"),
        s.best_test.all.get("majority_rate"),
    ) {
        // a model stuck at the majority class shows as accuracy == this rate
        println!(
            "majority-class rate: val={} test={} (accuracy of always predicting the most frequent training class)",
            value_text(*v),
            value_text(*t)
        );
    }
    if let (Some(v), Some(t), true) = (
        s.best_val.all.get("macro_f1"),
        s.best_test.all.get("macro_f1"),
        s.best_test.all.contains_key("micro_f1_at_logit0"),
    ) {
        println!(
            "best macro_f1: val={} test={} (multi-label: each node's top-k labels, k = its true label count)",
            value_text(*v),
            value_text(*t)
        );
    }
    println!("best model, test: {}", metrics_line(&s.best_test.all));
    if let (true, Some(&m)) = (s.metric == "accuracy", s.best_val.all.get("majority_rate")) {
        if s.best_val.value <= m {
            eprintln!(
                "warning: the best model by validation accuracy ({:.4}) does not beat always predicting the majority class ({m:.4}); --metric macro_f1{} ranks models by more than the frequent class",
                s.best_val.value,
                if s.best_val.all.contains_key("roc_auc") { " or roc_auc" } else { "" }
            );
        }
    }
}

/// Rank 0 of an MPI job that lost a rank: the job's end, which rank 0 carries out once the
/// run is printed (`tma_train::engines::mpi::JobEnd`); never anything without the `mpi` feature.
#[cfg(feature = "mpi")]
type JobEndSlot = Option<tma_train::engines::mpi::JobEnd>;
#[cfg(not(feature = "mpi"))]
type JobEndSlot = Option<std::convert::Infallible>;

/// Ends the MPI job with exit status `code` when `job_end` holds one (never returns then).
fn end_mpi_job(job_end: JobEndSlot, code: i32) {
    #[cfg(feature = "mpi")]
    if let Some(j) = job_end {
        j.end(code)
    }
    #[cfg(not(feature = "mpi"))]
    if let Some(never) = job_end {
        let _ = code;
        match never {}
    }
}

/// What happens to `--split-index` when it was given on the command line (`flags`) and does
/// not pick a split: a link task, or a dataset without several fixed mask splits. (An index
/// beyond the dataset's splits is a loading error.)
pub(crate) fn split_index_warnings(
    flags: &TrainOpts,
    cfg: &TrainConfig,
    ds: Option<&Dataset>,
) -> Vec<String> {
    let Some(i) = flags.split_index else {
        return Vec::new();
    };
    if cfg.task == Task::Link {
        return vec![format!(
            "--split-index {i} is ignored: --task link splits edges (--val-frac/--test-frac), not nodes"
        )];
    }
    match ds.map(|d| d.num_splits) {
        Some(0) => vec![format!(
            "--split-index {i} is ignored: the dataset ships no fixed split; a seeded 60/20/20 split of its labelled nodes is used"
        )],
        _ => Vec::new(),
    }
}

fn cfg_task_is_node(cfg: &TrainConfig) -> bool {
    cfg.task == Task::Node
}

/// Every metric of an evaluation as `accuracy=0.8123 macro_f1=0.5012 ...` (`-` where undefined).
pub(crate) fn metrics_line(all: &std::collections::BTreeMap<String, f64>) -> String {
    all.iter()
        .map(|(k, v)| format!("{k}={}", value_text(*v)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A metric's value with 4 decimals, `undefined` when it is not finite (NaN: an empty split, a
/// diverged model, ROC-AUC on one class).
pub(crate) fn value_text(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.4}")
    } else {
        "undefined".into()
    }
}

/// `[(1, 4.02)]` as `trainer 1 at 4.0s` (a trainer that panicked has no time: `at ?`).
pub(crate) fn failed_list(failed: &[(usize, f64)]) -> String {
    failed
        .iter()
        .map(|(t, at)| {
            if at.is_finite() {
                format!("trainer {t} at {at:.1}s")
            } else {
                format!("trainer {t} at ?")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Options of `tma info`.
#[derive(Args, Debug)]
pub struct InfoOpts {
    /// Dataset (.npy layout, the on-disk format of docs/graph-format.md, which is mapped, not
    /// loaded, an OGB directory, a SNAP or CSV edge list, a .npz file). Omitted: the generated
    /// graph.
    #[arg(long, value_name = "PATH")]
    pub dataset: Option<PathBuf>,
    /// Format of --dataset: tma, ogb, snap, npz or csv. Default: detected from the path.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<Format>,
    /// Read an edge-list dataset as undirected (every arc gets its reverse).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub undirected: bool,
    /// Nodes of the generated graph when no --dataset is given.
    #[arg(long, value_name = "N")]
    pub gen_nodes: Option<usize>,
    /// Accept a fixed split whose train/val/test lists share nodes.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub allow_split_overlap: bool,
    /// On-disk format only: also scan every file's contents (ids in range, sorted rows, ...).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub validate: bool,
    /// On-disk format only: --validate, and recompute every file's SHA-256.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub verify: bool,
}

pub fn info(o: InfoOpts) -> Result<()> {
    if let Some(dir) = o
        .dataset
        .as_deref()
        .filter(|d| tma_graph::is_disk_graph(d) && matches!(o.format, None | Some(Format::Tma)))
    {
        return crate::scale_cmd::info_mapped(dir, o.validate, o.verify);
    }
    if o.validate || o.verify {
        anyhow::bail!("--validate and --verify apply to a graph in the on-disk format (a directory with tma-graph.json)");
    }
    let cfg = TrainConfig {
        allow_split_overlap: o.allow_split_overlap,
        ..TrainConfig::default()
    };
    let ds = load(
        &o.dataset,
        read_options(o.format, Some(o.undirected)),
        o.gen_nodes,
        &cfg,
    )?;
    println!("{}", ds.summary());
    println!(
        "removed on load: {} self-loops, {} duplicate arcs",
        ds.removed.self_loops, ds.removed.duplicate_arcs
    );
    if let Some(w) = ds.removed.warning() {
        eprintln!("warning: {w}");
    }
    match &ds.split {
        Some(s) => {
            let unl = |l: &[u32]| {
                l.iter()
                    .filter(|&&v| !ds.labels.is_labelled(v as usize))
                    .count()
            };
            let what = match ds.num_splits {
                0 => "split (generated, seeded 60/20/20)".to_string(),
                1 => "split".to_string(),
                k => format!("split 0 of {k} (--split-index picks one)"),
            };
            println!(
                "{what}: train {} / val {} / test {}",
                s.train.len(),
                s.val.len(),
                s.test.len()
            );
            let (a, b, c) = (unl(&s.train), unl(&s.val), unl(&s.test));
            if a + b + c > 0 && matches!(ds.labels, tma_graph::Labels::Classes { .. }) {
                eprintln!(
                    "warning: split: {a} train / {b} val / {c} test nodes are unlabelled (y = -1); training and metrics skip them"
                );
            }
        }
        // an unlabelled graph has no node task: only the link split is made
        None if matches!(ds.labels, tma_graph::Labels::None) => {
            println!("split: none fixed (tma train --task link holds edges out)")
        }
        None => println!("split: none fixed (tma train --task node makes a seeded 60/20/20 split)"),
    }
    Ok(())
}

/// Options of `tma partition`.
#[derive(Args, Debug)]
pub struct PartitionOpts {
    /// Dataset (.npy layout or on-disk format, an OGB directory, a SNAP or CSV edge list, a
    /// .npz file). Omitted: the generated graph.
    #[arg(long, value_name = "PATH")]
    pub dataset: Option<PathBuf>,
    /// Format of --dataset: tma, ogb, snap, npz or csv. Default: detected from the path.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<Format>,
    /// Read an edge-list dataset as undirected (every arc gets its reverse).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub undirected: bool,
    /// Nodes of the generated graph when no --dataset is given. Default: 10000.
    #[arg(long, value_name = "N")]
    pub gen_nodes: Option<usize>,
    /// The layout to make (the help lists them, generated from the method registry).
    #[arg(long, default_value = "random", help = partition_method_help(),
          value_parser = |s: &str| tma_train::methods::partition_method(s))]
    pub method: Method,
    /// Number of parts M (also --num-parts), at least 1.
    #[arg(long = "parts", visible_alias = "num-parts", default_value_t = 4,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub num_parts: usize,
    /// Extra parts given to no one.
    #[arg(long, default_value_t = 0)]
    pub drop_parts: usize,
    /// Super-nodes K (method super).
    #[arg(long, default_value_t = 1000)]
    pub super_nodes: usize,
    /// Clustering of methods super and metis: metis, lpa (size-constrained label propagation over the graph in place, for graphs METIS cannot take) or auto (metis up to 2^25 arcs, lpa above). With --memory-budget, auto takes lpa where METIS' estimated peak (80 bytes per arc + 64 per node) exceeds the budget, and metis over it is refused; the choice is printed and recorded in the manifest's report. Default: auto.
    #[arg(long, value_name = "CLUSTERING")]
    pub super_clustering: Option<tma_partition::Clustering>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write the per-part statistics as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a partition directory here (manifest.json, coordinator/, part-NNN/; see
    /// `tma_train::store`) for `tma train --partitions DIR` (either engine). The split is made
    /// as `tma train` makes it for --task with the default fractions, so metrics compare.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Task the partition directory is for (with --out): link or node.
    #[arg(long, default_value = "node")]
    pub task: Task,
    /// Scale each feature row to sum 1 before writing (with --out; as `tma train --normalize-features`).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub normalize_features: bool,
    /// Inputs of a graph without node features, as `tma train --featureless` (with --out): auto,
    /// degree or degree-random.
    #[arg(long, value_name = "NAME", default_value = "auto",
          value_parser = |s: &str| s.parse::<tma_train::Featureless>())]
    pub featureless: tma_train::Featureless,
    /// Accept a fixed split whose train/val/test lists share nodes.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    pub allow_split_overlap: bool,
    /// With --out on a graph in the on-disk format: refuse to build the parts (before any is
    /// written) when the process's anonymous memory after the split and partition plus the
    /// estimated build of the parts, one at a time, exceeds SIZE (e.g. 512MiB, 2GiB); choose
    /// the clustering within it (--super-clustering auto: lpa where METIS would not fit). The
    /// peak is printed against it at the end.
    #[arg(long, value_name = "SIZE", value_parser = crate::scale_cmd::parse_bytes, allow_hyphen_values = true)]
    pub memory_budget: Option<u64>,
}

/// `tma partition --method`'s help: the layouts and the methods, from the method registry.
fn partition_method_help() -> String {
    format!(
        "Layout, with the methods that train on it: {}; or a `tma train --method` name, which makes its layout.",
        tma_train::methods::layouts_help()
    )
}

/// The configuration `tma partition` lays out with: its options as a run of `o.method`
/// (whose layout is made) would take them (`tma_train::methods::partition_job`).
fn partition_job(o: &PartitionOpts) -> Result<TrainConfig> {
    let base = TrainConfig {
        task: o.task,
        num_trainers: o.num_parts,
        drop_parts: o.drop_parts,
        super_nodes: o.super_nodes,
        super_clustering: o.super_clustering.unwrap_or_default(),
        seed: o.seed,
        normalize_features: o.normalize_features,
        featureless: o.featureless,
        allow_split_overlap: o.allow_split_overlap,
        ..TrainConfig::default()
    };
    tma_train::methods::partition_job(o.method.as_str(), base).map_err(anyhow::Error::msg)
}

/// `tma partition`: with `--out DIR`, the layout of `o.method` written as a partition
/// directory for `tma train --partitions DIR` ([`partition_out`]); without, the partition
/// computed and its report printed (in place for a graph in the on-disk format:
/// [`partition_mapped`]; else [`partition_in_memory`]).
///
/// # Errors
/// Options that do not fit together ([`check_partition_options`]); data that cannot be read;
/// a partition that fails; files that cannot be written.
pub fn partition(o: PartitionOpts) -> Result<()> {
    let layout = o.method.layout(&TrainConfig {
        super_nodes: o.super_nodes,
        ..TrainConfig::default()
    });
    check_partition_options(&o, &layout)?;
    if let Some(out) = &o.out {
        return partition_out(&o, out);
    }
    if let Some(dir) = o.dataset.as_deref().filter(|d| tma_graph::is_disk_graph(d)) {
        return partition_mapped(&o, dir);
    }
    partition_in_memory(&o)
}

/// Refuses the options of `tma partition` that do not fit `layout` (the layout `o.method`
/// makes) or each other, and warns (one line) about `--super-clustering` where the layout
/// clusters nothing.
///
/// # Errors
/// `--super-nodes` below `--parts + --drop-parts` for a layout of super-nodes (the check `tma
/// train --method super-tma` makes); `--memory-budget` without `--out` or on a dataset that
/// is not in the on-disk format.
fn check_partition_options(o: &PartitionOpts, layout: &tma_train::data::DataLayout) -> Result<()> {
    // the check `tma train --method super-tma` makes (TrainConfig::validate), with or without
    // --out: fewer super-nodes than parts leaves parts empty
    if layout.uses_super_nodes() && o.super_nodes < o.num_parts + o.drop_parts {
        anyhow::bail!(
            "--super-nodes ({}) must be >= --parts + --drop-parts ({}): every part gets whole super-nodes",
            o.super_nodes,
            o.num_parts + o.drop_parts
        );
    }
    let on_disk = o.dataset.as_deref().is_some_and(|d| {
        tma_graph::is_disk_graph(d) && matches!(o.format, None | Some(Format::Tma))
    });
    if let Some(b) = o.memory_budget {
        if o.out.is_none() || !on_disk {
            anyhow::bail!(
                "--memory-budget {:.0} MiB applies to `tma partition --out` on a graph in the on-disk format (`tma convert --to disk`, `tma generate`), whose parts are streamed to disk; {}",
                b as f64 / (1u64 << 20) as f64,
                if o.out.is_none() {
                    "without --out nothing is built (the partition of an on-disk graph is computed in place)"
                } else {
                    "this dataset is read into memory whole"
                }
            );
        }
    }
    if let (Some(c), false) = (o.super_clustering, layout.clusters()) {
        let clustering: Vec<String> = tma_train::methods::layout_names()
            .into_iter()
            .filter(|n| {
                tma_train::methods::layout_named(n, &TrainConfig::default())
                    .is_some_and(|l| l.clusters())
            })
            .collect();
        eprintln!(
            "warning: --super-clustering {c} is ignored: --method {} clusters nothing (only {} do)",
            layout.name(),
            tma_train::methods::and_list(
                &clustering.iter().map(String::as_str).collect::<Vec<_>>()
            )
        );
    }
    Ok(())
}

/// `tma partition --out DIR`: the data loaded and its layout written to `out` (staged, then
/// renamed; the staging folder removed on an interrupt), each part said on stderr as it is
/// streamed, then what was written ([`print_written`]), the process's memory, and `--json`.
///
/// # Errors
/// `--out` that cannot be used; data that cannot be read; a layout that cannot be made or
/// written.
fn partition_out(o: &PartitionOpts, out: &Path) -> Result<()> {
    let cfg = partition_job(o)?;
    // signals are caught before the staging folder exists (one arriving between the two
    // killed the process and left the folder behind); the watcher acts on it once started
    crate::interrupt::catch_signals();
    // --out is checked (and its staging folder made) before the data is loaded
    let writer = tma_train::store::PartitionWriter::create(out).context("--out")?;
    if writer.removed_stale_staging() {
        eprintln!(
            "note: removed {}, the unfinished staging folder of an earlier run that was killed",
            writer.staging().display()
        );
    }
    crate::interrupt::remove_on_interrupt(
        writer.staging().to_path_buf(),
        out.to_path_buf(),
        writer.abort_flag(),
    );
    tma_train::memory::start_sampler();
    let ds = load(
        &o.dataset,
        read_options(o.format, Some(o.undirected)),
        o.gen_nodes,
        &cfg,
    )?;
    println!("{}", ds.summary());
    let t = std::time::Instant::now();
    if let Some(w) = ds.removed.warning() {
        eprintln!("warning: {w}");
    }
    if ds.graph.indices.is_mapped() {
        eprintln!(
            "graph mapped from disk: each part is built in turn and streamed to {}",
            out.display()
        );
    }
    let (m, warnings) = crate::dist::write_partitions(ds, &cfg, writer, o.memory_budget, |p| {
        eprintln!(
            "  part-{:03} ({}/{}): {} nodes, {} arcs, {:.1} MiB streamed in {:.2}s",
            p.trainer,
            p.trainer + 1,
            p.num_parts,
            p.num_nodes,
            p.num_edges,
            p.bytes as f64 / (1u64 << 20) as f64,
            p.secs
        );
    })?;
    print_written(out, &m, &cfg, t, &warnings);
    let mem = tma_train::memory::ProcessMemory::this_process("partition", None, None);
    match o.memory_budget {
        Some(b) => eprintln!(
            "{} (--memory-budget {:.0} MiB)",
            mem.line(),
            b as f64 / (1u64 << 20) as f64
        ),
        None => eprintln!("{}", mem.line()),
    }
    if let Some(path) = &o.json {
        write_json(path, &m)?;
    }
    Ok(())
}

/// What `tma partition --out` says of the directory it wrote to `out` (manifest `m`, layout
/// made with `cfg`, started at `started`): the clustering chosen under `--memory-budget`, one
/// line for the directory and one per part (nodes, edges, training examples, MiB), the
/// clustering's and the arcs kept, then the preparation's `warnings` and the parts without a
/// training example (some of them; none: the preparation's line said so).
fn print_written(
    out: &Path,
    m: &tma_train::store::Manifest,
    cfg: &TrainConfig,
    started: std::time::Instant,
    warnings: &[String],
) {
    // under --memory-budget: which clustering ran and why (also in the manifest's report)
    if let Some(line) = m
        .report
        .as_ref()
        .and_then(|r| r.get("clustering_choice"))
        .and_then(|l| l.as_str())
    {
        eprintln!("{line}");
    }
    println!(
        "wrote {} ({} parts, task {}) in {:.2}s; manifest sha256 {}",
        out.display(),
        m.parts.len(),
        cfg.task,
        started.elapsed().as_secs_f64(),
        m.hash
    );
    for p in &m.parts {
        println!(
            "  {}  nodes {:>9}  edges {:>10}  train {:>9}  {:>8.1} MiB",
            p.dir,
            p.num_nodes,
            p.num_edges,
            p.num_train,
            p.size_bytes as f64 / (1 << 20) as f64
        );
    }
    if let Some(rep) = &m.report {
        if let Some(line) = rep.get("clustering_line").and_then(|l| l.as_str()) {
            println!("{line}");
        }
        if let Some(kept) = rep.get("total_edge_fraction_kept").and_then(|k| k.as_f64()) {
            println!(
                "arcs kept by the parts: {:.4} of {} (the rest cross parts)",
                kept, m.num_edges
            );
        }
    }
    for w in warnings {
        eprintln!("warning: {w}");
    }
    let idle: Vec<&str> = m
        .parts
        .iter()
        .filter(|p| p.num_train == 0)
        .map(|p| p.dir.as_str())
        .collect();
    // none with training examples: the preparation's line above says so (and why)
    if !idle.is_empty() && idle.len() < m.parts.len() {
        eprintln!(
            "warning: {} {} no training {}: written anyway; `tma train` runs such a trainer with weight 0",
            idle.join(", "),
            if idle.len() == 1 { "has" } else { "have" },
            if cfg.task == Task::Link { "edges" } else { "nodes" }
        );
    }
}

/// `tma partition` without `--out` on a dataset read into memory: the partition computed and
/// its report printed (a table, its warnings, the time and the assignment's hash), and written
/// as JSON with `--json`.
///
/// # Errors
/// Data that cannot be read; a layout that assigns no node to a part; a partition that fails;
/// a `--json` file that cannot be written.
fn partition_in_memory(o: &PartitionOpts) -> Result<()> {
    let ds = load(
        &o.dataset,
        read_options(o.format, Some(o.undirected)),
        o.gen_nodes,
        &TrainConfig {
            allow_split_overlap: o.allow_split_overlap,
            ..TrainConfig::default()
        },
    )?;
    let pcfg = partition_config(o)?;
    let t = std::time::Instant::now();
    let p = tma_partition::partition(&ds.graph, &pcfg)?;
    let secs = t.elapsed().as_secs_f64();
    let labels = match &ds.labels {
        tma_graph::Labels::Classes { y, num_classes } => Some((y.as_slice(), *num_classes)),
        _ => None,
    };
    let rep = tma_partition::partition_report(&ds.graph, &p, labels);
    println!("{}", ds.summary());
    println!("{}", rep.to_table());
    for w in ds.removed.warning().iter().chain(&rep.warnings) {
        eprintln!("warning: {w}");
    }
    println!(
        "partitioned in {secs:.2}s; assignment sha256 {}",
        p.hash_hex()
    );
    if let Some(path) = &o.json {
        write_json(path, &rep)?;
    }
    Ok(())
}

/// The partitioner's configuration for `tma partition`'s options without `--out` (the
/// layout as `tma train` would make it: `tma_train::methods::partition_config`).
///
/// # Errors
/// A layout that does not partition the graph (whole, shared-examples): it has no assignment
/// to report; `--out` writes it.
fn partition_config(o: &PartitionOpts) -> Result<tma_partition::PartitionConfig> {
    let cfg = partition_job(o)?;
    tma_train::methods::partition_config(&cfg).ok_or_else(|| {
        anyhow::anyhow!(
            "--method {}: the {} layout assigns no node to a part (nothing to report); write it with --out DIR for `tma train --partitions DIR`",
            o.method,
            cfg.method.layout(&cfg).name()
        )
    })
}

/// `tma partition --dataset DIR` (no --out) on a graph in the on-disk format: the CSR is
/// memory-mapped and partitioned and measured in place (nothing copied into memory but the
/// partitioner's `O(N)` arrays and the report's), then the peak RSS is printed.
fn partition_mapped(o: &PartitionOpts, dir: &Path) -> Result<()> {
    let g = tma_graph::MappedGraph::open(dir)?;
    println!("{}", g.summary());
    let pcfg = partition_config(o)?;
    let t = std::time::Instant::now();
    let p = tma_partition::partition_ref(g.csr(), &pcfg)?;
    let secs = t.elapsed().as_secs_f64();
    let labels = g.class_labels().map(|y| {
        let classes = y.iter().map(|&c| c + 1).max().unwrap_or(0).max(0) as usize;
        (y, classes)
    });
    let rep = tma_partition::partition_report_ref(g.csr(), &p, labels);
    println!("{}", rep.to_table());
    for w in &rep.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(peak) = tma_graph::memory::peak_rss_bytes() {
        let file = tma_graph::memory::file_bytes().unwrap_or(0);
        let mib = tma_graph::memory::mib;
        eprintln!(
            "peak RSS {:.1} MiB (VmHWM), of which mapped file pages {:.1} MiB (RssFile now): about {:.1} MiB anonymous",
            mib(peak),
            mib(file),
            mib(peak.saturating_sub(file))
        );
    }
    println!(
        "partitioned in {secs:.2}s (graph memory-mapped); assignment sha256 {}",
        p.hash_hex()
    );
    if let Some(path) = &o.json {
        write_json(path, &rep)?;
    }
    Ok(())
}

fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<()> {
    tma_train::store::output::write_atomic(path, &serde_json::to_vec_pretty(v)?)
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_share_note_names_the_share_and_the_remedy() {
        let rec = |cpu: f64, check: bool| RoundRecord {
            round: 1,
            elapsed_s: 1.0,
            participants: vec![0],
            steps: vec![1],
            epochs: vec![0],
            train_loss: 0.5,
            val: tma_train::EvalResult {
                metric: "mrr".into(),
                value: 0.5,
                all: Default::default(),
            },
            eval_s: cpu,
            eval_cpu_s: cpu,
            check,
            ..RoundRecord::default()
        };
        let cfg = tma_train::TrainConfig {
            threads: 2,
            ..tma_train::TrainConfig::default()
        };
        // 1.4 core-s per 10 s round on 2 cores: 7%, no note
        let rounds: Vec<RoundRecord> = (0..6).map(|_| rec(1.4, false)).collect();
        assert_eq!(validation_share_note(&rounds, 60.0, &cfg), None);
        // checks every 2 s: 30 validations of 1.4 core-s in 60 s on 2 cores = 35%
        let rounds: Vec<RoundRecord> = (0..30).map(|i| rec(1.4, i % 5 != 4)).collect();
        let n = validation_share_note(&rounds, 60.0, &cfg).unwrap();
        assert_eq!(
            n,
            "note: validation took 35% of the 2 cores' time (42.0 core-s over 30 validations, 24 of them checks between rounds), time the trainers did not train; a longer --val-check-interval (or none), --eval-every K or a smaller --eval-max-edges / --eval-max-nodes leaves more to training"
        );
        // rounds only, validated every round: the remedy is fewer or smaller validations
        let rounds: Vec<RoundRecord> = (0..6).map(|_| rec(4.0, false)).collect();
        assert!(validation_share_note(&rounds, 60.0, &cfg)
            .unwrap()
            .ends_with("--eval-every K or a smaller --eval-max-edges / --eval-max-nodes leaves more to training"));
    }

    #[test]
    fn round_line_loss_and_failed_trainers_are_readable() {
        // regression (issue 11): `loss=NaN` for a round without a step; raw tuples for failures
        assert_eq!(loss_text(f64::NAN), "-");
        assert_eq!(loss_text(f64::INFINITY), "-");
        assert_eq!(loss_text(0.012345), "0.0123");
        // regression: rounds skipped behind a slow validation were not said
        assert_eq!(
            skipped_text(3, None),
            "3 averaging slots skipped: the round formed late (validation or trainers behind)"
        );
        // where the time went (the record's `late`)
        let late = tma_train::evaluation::record::Late {
            validation_s: 1.46,
            trainers_s: 0.12,
        };
        assert_eq!(
            skipped_text(3, Some(late)),
            "3 averaging slots skipped: the round formed 1.6s late, 1.5s waiting for validation to keep up and 0.1s for the trainers"
        );
        assert_eq!(
            skipped_text(1, None),
            "1 averaging slot skipped: the round formed late (validation or trainers behind)"
        );
        // the last round, late past the time limit: no slot to skip, the lateness said
        assert_eq!(
            skipped_text(0, Some(late)),
            "the round formed 1.6s late, 1.5s waiting for validation to keep up and 0.1s for the trainers"
        );
        assert_eq!(
            failed_list(&[(1, 4.018577031), (3, f64::NAN)]),
            "trainer 1 at 4.0s, trainer 3 at ?"
        );
    }

    #[test]
    fn a_plateau_hold_is_said_on_its_round_line() {
        let mut r = RoundRecord {
            round: 7,
            elapsed_s: 20.0,
            participants: vec![0],
            steps: vec![1],
            epochs: vec![0],
            train_loss: 0.5,
            ..RoundRecord::default()
        };
        assert_eq!(hold_text(&r), None);
        r.restored = Some(2);
        r.server_step = Some(0.5);
        assert_eq!(
            hold_text(&r).unwrap(),
            "validation fell more than 5% below its best, several times in a row (--plateau-patience): the best model (round 2's) sent back, later rounds apply 0.5 of their update"
        );
        // regression: a check's model was called its round's
        r.restored_check = true;
        assert_eq!(
            hold_text(&r).unwrap(),
            "validation fell more than 5% below its best, several times in a row (--plateau-patience): the best model (the check after round 2) sent back, later rounds apply 0.5 of their update"
        );
        r.restored_check = false;
        r.restored = None;
        r.server_step = Some(0.25);
        assert_eq!(hold_text(&r).unwrap(), "step 0.25");
    }

    #[test]
    fn an_llcg_correction_is_said_on_its_round_line() {
        let mut r = RoundRecord::default();
        assert_eq!(correction_text(&r), None);
        r.correction = Some(tma_train::evaluation::record::Correction {
            steps: 2,
            loss: 0.41256,
            secs: 0.638,
        });
        assert_eq!(
            correction_text(&r).unwrap(),
            "correction: 2 whole-graph steps in 0.64s, loss=0.4126"
        );
        r.correction.as_mut().unwrap().steps = 1;
        assert_eq!(
            correction_text(&r).unwrap(),
            "correction: 1 whole-graph step in 0.64s, loss=0.4126"
        );
    }
}
