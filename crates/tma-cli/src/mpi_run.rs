//! `tma train --engine mpi`: what each rank does under `mpirun -np M+1` / `srun`.
//! Rank 0 runs the coordinator (`coordinate` over [`MpiCoordinator`]) on the partition
//! directory's `coordinator/` data; rank `t + 1` runs trainer `t` on `part-{t:03}/` only.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tma_nn::Head;
use tma_train::coordinator::{coordinate, Coordinated};
use tma_train::data::ModelShape;
use tma_train::engine::{average_weight, initial_params};
use tma_train::method::ExchangeInputs;
use tma_train::mpi_cluster::mpi::environment::Universe;
use tma_train::mpi_cluster::mpi::topology::SimpleCommunicator;
use tma_train::mpi_cluster::mpi::traits::Communicator;
use tma_train::mpi_cluster::mpi::Threading;
use tma_train::mpi_cluster::{ByeKind, MpiCoordinator, MpiTrainer, StartFailure};
use tma_train::store::{self, Manifest};
use tma_train::trainer::{Trainer, TrainerExit};
use tma_train::{
    build_model, training_method, Clock, FailPlan, Observer, RealClock, Run, RunResult,
    TrainConfig, TrainError,
};

/// MPI initialized for this process.
pub struct MpiContext {
    universe: Universe,
    rank: usize,
    size: usize,
    join_timeout: Duration,
    host: String,
}

impl MpiContext {
    /// Initializes MPI (`MPI_THREAD_SERIALIZED`: on rank 0 the heartbeat thread calls MPI too,
    /// under one lock; see `tma_train::mpi_cluster`); `join_timeout`
    /// (`--join-timeout`, default 120 s) bounds the waits for ranks to join and to exit.
    pub fn init(join_timeout: Option<Duration>) -> Result<MpiContext> {
        let join_timeout = join_timeout.unwrap_or(Duration::from_secs(120));
        let Some((universe, _threading)) =
            tma_train::mpi_cluster::mpi::initialize_with_threading(Threading::Serialized)
        else {
            bail!("MPI could not be initialized (already initialized?)");
        };
        let world = universe.world();
        // a failure on the link to one peer must not abort every rank
        tma_train::mpi_cluster::errors_return(&world);
        let host = tma_train::mpi_cluster::mpi::environment::processor_name()
            .unwrap_or_else(|_| "?".into());
        Ok(MpiContext {
            rank: world.rank() as usize,
            size: world.size() as usize,
            universe,
            join_timeout,
            host,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> SimpleCommunicator {
        self.universe.world()
    }

    /// Ends every rank of the job: tells every trainer rank `message` (it prints it and exits
    /// with an error, which is what ends it under `mpirun --enable-recovery`), then
    /// `MPI_Abort(code)`; never returns.
    pub fn abort_job(&self, message: &str, code: i32) -> ! {
        tma_train::mpi_cluster::abort_job(&self.world(), message, code)
    }
}

/// Threads of one rank: `--threads` if set, else this host's cores shared by the ranks on it
/// (`OMPI_COMM_WORLD_LOCAL_SIZE` / `SLURM_NTASKS_PER_NODE` / `MPI_LOCALNRANKS`).
fn rank_threads(cfg: &TrainConfig) -> usize {
    if cfg.threads > 0 {
        return cfg.threads;
    }
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let local = [
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        "MPI_LOCALNRANKS",
        "SLURM_NTASKS_PER_NODE",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok()?.parse::<usize>().ok())
    .unwrap_or(1);
    (cores / local.max(1)).max(1)
}

/// The model shape a partition directory's manifest records (a trainer rank builds the same
/// model as the coordinator without holding the evaluation data).
fn manifest_shape(m: &Manifest) -> ModelShape {
    ModelShape {
        in_dim: m.in_dim,
        head: if m.targets == "link" {
            Head::Link
        } else {
            Head::Node {
                num_classes: m.out_dim,
            }
        },
    }
}

/// Rank `t + 1`: loads part `t` only, trains, exits when told.
pub fn run_trainer(
    ctx: MpiContext,
    dir: &Path,
    m: &Manifest,
    cfg: &TrainConfig,
    fail: &FailPlan,
    run_dir: Option<&Path>,
) -> Result<()> {
    let t = ctx.rank - 1;
    let resume = match run_dir {
        Some(d) => format!("`tma train --resume {}`", d.display()),
        None => "`tma train --resume RUN_DIR`".to_string(),
    };
    tma_train::memory::start_sampler();
    let mut ep = MpiTrainer::new(ctx.world(), cfg);
    let loaded = if t < m.parts.len() {
        store::read_part(dir, m, t).map_err(|e| e.to_string())
    } else {
        Err(format!(
            "{} has {} parts but this is rank {} (launch M+1 = {} ranks)",
            dir.display(),
            m.parts.len(),
            ctx.rank,
            m.parts.len() + 1
        ))
    };
    let data = match loaded {
        Ok(d) => {
            ep.ready(Ok(()));
            d
        }
        Err(e) => {
            ep.ready(Err(e.clone()));
            // the coordinator reports it and aborts the job
            bail!("rank {} on {}: {e}", ctx.rank, ctx.host);
        }
    };
    let threads = rank_threads(cfg);
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("tma-trainer-{t}-{i}"))
        .build_global();
    // the coordinator sends the seed segment of the trainers' random streams and, for a
    // resumed run, the epochs this trainer had completed
    let (segment, epochs) = match ep.wait_start(ctx.join_timeout) {
        Ok(start) => start,
        Err(StartFailure::Lost) => return orphaned(ctx, ep, "before the run started", &resume),
        Err(StartFailure::Aborted(_)) => return aborted(ctx, ep),
    };
    let model = build_model(cfg, manifest_shape(m))?;
    let init = model.zero_params();
    let (nodes, edges) = (data.num_nodes(), data.num_edges());
    let mut trainer = Trainer::with_segment(data, model, init, cfg, segment);
    trainer.continue_epochs(epochs);
    let clock: Arc<dyn Clock> = Arc::new(RealClock::start());
    // on this (MPI) thread; the steps' parallel work goes to the global pool
    let exit = training_method(cfg.method).run_trainer(
        trainer,
        &mut ep,
        clock.clone(),
        fail.get(&t).copied(),
    );
    let kind = match exit {
        TrainerExit::Stopped => ByeKind::Stopped,
        TrainerExit::Failed(_) => ByeKind::Failed,
        TrainerExit::Orphaned => ByeKind::Orphaned,
    };
    eprintln!(
        "rank {} (trainer {t}) on {}: part {} nodes, {} arcs; {threads} threads; peak RSS {:.0} MiB",
        ctx.rank,
        ctx.host,
        nodes,
        edges,
        crate::dist::peak_rss_mib().unwrap_or(f64::NAN)
    );
    if kind == ByeKind::Orphaned && ep.coordinator_error().is_some() {
        return aborted(ctx, ep);
    }
    if kind == ByeKind::Orphaned {
        let when = format!("at {:.1}s of training", clock.elapsed().as_secs_f64());
        return orphaned(ctx, ep, &when, &resume);
    }
    ep.bye(kind, clock.elapsed());
    if ep.farewell() {
        drop(ep);
        drop(ctx); // MPI_Finalize
    } else {
        // a rank was lost (or the coordinator went silent): MPI_Finalize would wait for it
        // forever, so this rank exits without it
        std::mem::forget(ep);
        std::mem::forget(ctx);
    }
    Ok(())
}

/// A trainer rank whose coordinator failed and ended the job (`ABORT`): exits with an error
/// naming the coordinator's error, without `MPI_Finalize`.
fn aborted(ctx: MpiContext, ep: MpiTrainer) -> Result<()> {
    let msg = format!(
        "rank {} (trainer {}) on {}: the coordinator (rank 0) failed and ended the job: {}; exiting",
        ctx.rank,
        ctx.rank - 1,
        ctx.host,
        ep.coordinator_error().unwrap_or_default()
    );
    std::mem::forget(ep);
    std::mem::forget(ctx);
    bail!(msg)
}

/// A trainer rank that lost the coordinator: exits with an error naming it, without
/// `MPI_Finalize` (which would wait for the dead rank forever).
fn orphaned(ctx: MpiContext, ep: MpiTrainer, when: &str, resume: &str) -> Result<()> {
    let msg = format!(
        "rank {} (trainer {}) on {}: lost the coordinator (rank 0): nothing heard from it for {} ({when}); exiting. Continue the run with {resume} under mpirun",
        ctx.rank,
        ctx.rank - 1,
        ctx.host,
        humantime::format_duration(ep.peer_timeout()),
    );
    std::mem::forget(ep);
    std::mem::forget(ctx);
    bail!(msg)
}

/// Rank 0: runs `run` with the MPI engine: waits for every trainer to join, runs the
/// coordinator loop, waits for every trainer to exit. A rank that fails to load, join or exit
/// in time is reported by rank and host and the job is aborted (after the run directory is
/// written, when the run itself completed).
pub fn run_coordinator(
    ctx: MpiContext,
    run: Run,
    observer: &mut dyn Observer,
) -> Result<RunResult> {
    let m = run
        .partitions()
        .map(|(_, m)| m.clone())
        .context("--engine mpi trains on a partition directory")?;
    let want = m.parts.len() + 1;
    if ctx.size != want {
        let msg = format!(
            "the partition directory has {} parts: launch {want} ranks (1 coordinator + {} trainers), not {}",
            m.parts.len(),
            m.parts.len(),
            ctx.size
        );
        eprintln!("error: {msg}");
        ctx.abort_job(&msg, 2);
    }
    if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some()
        && std::env::var("OMPI_MCA_orte_enable_recovery").as_deref() != Ok("1")
    {
        eprintln!(
            "note: mpirun was started without --enable-recovery: if any rank dies, Open MPI ends the whole job (then `tma train --resume {}` continues it); with it, the run goes on without a lost trainer",
            run.dir().display()
        );
    }
    let clock = run.clock();
    let mut coord = MpiCoordinator::new(ctx.world(), run.config(), clock.clone());
    if !coord.has_heartbeat() {
        eprintln!(
            "warning: this MPI library does not give MPI_THREAD_SERIALIZED: no heartbeats from rank 0, so a coordinator busy for longer than {} (a checkpoint on a slow disk, a long evaluation) is taken for lost by its trainers",
            humantime::format_duration(run.config().peer_timeout())
        );
    }
    let mut finished = Ok(());
    let result = run.coordinate_with(observer, clock, |e| {
        if let Err(problems) = coord.join(ctx.join_timeout) {
            for p in &problems {
                eprintln!("error: {p}");
            }
            eprintln!(
                "error: aborting the MPI job ({} rank(s) not ready)",
                problems.len()
            );
            let msg: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
            coord.abort_job(&msg.join("; "), 3);
        }
        let n = m.parts.len();
        let epochs: Vec<u64> = (0..n)
            .map(|t| tma_train::Resume::epochs_of(e.resume.as_ref(), t))
            .collect();
        coord.start(e.segment, &epochs);
        let cfg = e.cfg;
        let model = build_model(cfg, e.prep.model_shape())?;
        let init = initial_params(cfg, &model);
        let weights: Vec<f64> = m
            .parts
            .iter()
            // a part without training examples joins with weight 0
            .map(|p| match p.num_train {
                0 => 0.0,
                _ => average_weight(cfg.average_weight, p.num_nodes, p.num_edges),
            })
            .collect();
        let eval_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(rank_threads(cfg))
            .thread_name(|i| format!("tma-eval-{i}"))
            .build()
            .map_err(|e| TrainError::Config(format!("thread pool: {e}")))?;
        let mut exchange = training_method(cfg.method).exchange(ExchangeInputs {
            prep: e.prep,
            cfg,
            model: &model,
            init: &init,
            weights,
        });
        let ctxc = Coordinated {
            prep: e.prep,
            cfg,
            model: &model,
            clock: &*e.clock,
            eval_pool: &eval_pool,
            stop: e.stop.as_deref(),
        };
        let result = coordinate(
            &mut coord,
            &mut *exchange,
            &ctxc,
            init.clone(),
            e.observer,
            e.resume,
        );
        finished = coord.finish(ctx.join_timeout);
        let failed = coord.failed();
        eprintln!(
            "rank 0 (coordinator) on {}: peak RSS {:.0} MiB",
            ctx.host,
            crate::dist::peak_rss_mib().unwrap_or(f64::NAN)
        );
        if coord.dropped() > 0 {
            eprintln!(
                "warning: {} malformed contribution(s) (wrong size) were dropped",
                coord.dropped()
            );
        }
        let mut memory = vec![tma_train::memory::ProcessMemory::this_process(
            "coordinator",
            Some(0),
            None,
        )];
        memory.extend(coord.trainer_memory());
        result.map(|mut r| {
            r.summary.failed_trainers = failed;
            r.summary.memory = memory;
            r
        })
    });
    // rank 0 failed before the round loop (e.g. building the model): the trainer ranks wait
    // for their start; end them with the error instead of leaving them to time out
    if let (Err(e), false) = (&result, coord.started()) {
        eprintln!("error: {e}");
        eprintln!("error: rank 0 failed before training; aborting the MPI job");
        coord.abort_job(&e.to_string(), 1);
    }
    // the run directory is complete (or the run failed): now let the trainer ranks go
    if let Err(problems) = &finished {
        for p in problems {
            eprintln!("warning: {p}; listed in summary.json failed_trainers");
        }
    }
    if coord.close() {
        drop(coord);
        drop(ctx); // MPI_Finalize
    } else {
        // no MPI_Finalize (it would wait for the lost ranks); the surviving trainer ranks were
        // told to exit without it too
        if finished.is_err() {
            eprintln!(
                "warning: exiting without MPI_Finalize (a lost rank would make it wait forever); under mpirun without --enable-recovery the launcher ends the remaining ranks"
            );
        }
        std::mem::forget(coord);
        std::mem::forget(ctx);
    }
    Ok(result?)
}
