//! The MPI engine (crate feature `mpi`): one process per rank under `mpirun -np M+1` / `srun`.
//! Rank 0 runs the coordinator ([`Mpi`], an [`Engine`] that [`crate::run::Run::train_with`]
//! drives) on the partition directory's `coordinator/` data; rank `t + 1` runs trainer `t` on
//! `part-{t:03}/` only ([`run_trainer`]). [`launch`] initializes MPI and tells a process which
//! of the two it is. The transport is [`crate::engines::mpi_cluster`]; the round loop, the exchange and
//! the averaging weights are those of every engine ([`super::coordinate_prepared`],
//! [`super::manifest_weights`]).
//!
//! ```no_run
//! # fn main() -> Result<(), tma_train::TrainError> {
//! use tma_train::engines::mpi::{launch, Rank};
//! use tma_train::{DataSource, Engine, Quiet, Run, RunSpec, TrainConfig};
//! let dir = std::path::PathBuf::from("parts");
//! let cfg = TrainConfig::default();
//! match launch(None)? {
//!     Rank::Trainer(ctx) => {
//!         let m = tma_train::store::read_manifest(&dir)?;
//!         let method = tma_train::training_method(cfg.method);
//!         tma_train::engines::mpi::run_trainer(ctx, method, &dir, &m, &cfg, &Default::default(), None)?;
//!     }
//!     Rank::Coordinator(mut mpi) => {
//!         let mut spec = RunSpec::new(cfg, DataSource::Partitions(dir));
//!         spec.engine = Engine::Mpi;
//!         let result = Run::start(spec).and_then(|run| run.train_with(&mut *mpi, &mut Quiet));
//!         if let Some(end) = mpi.finish(&result) {
//!             end.end(0); // ranks were lost: ends the job (never returns)
//!         }
//!         result?;
//!     }
//! }
//! # Ok(())
//! # }
//! ```

use super::{coordinate_prepared, manifest_weights, Engine, EngineContext};
use crate::clock::{Clock, RealClock};
use crate::config::TrainConfig;
use crate::data::{build_model, ModelShape};
use crate::engines::method::TrainingMethod;
use crate::engines::mpi_cluster::mpi::environment::Universe;
use crate::engines::mpi_cluster::mpi::topology::SimpleCommunicator;
use crate::engines::mpi_cluster::mpi::traits::Communicator;
use crate::engines::mpi_cluster::mpi::Threading;
use crate::engines::mpi_cluster::{ByeKind, MpiCoordinator, MpiTrainer, StartFailure};
use crate::engines::trainer::{Trainer, TrainerExit};
use crate::evaluation::record::{FailPlan, RunResult};
use crate::store::{self, Manifest};
use crate::TrainError;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tma_nn::Head;

/// Peak RSS of this process in MiB (NaN when /proc cannot say).
fn peak_rss_mib() -> f64 {
    tma_graph::memory::peak_rss_bytes().map_or(f64::NAN, tma_graph::memory::mib)
}

/// What this process is in an MPI job ([`launch`]).
pub enum Rank {
    /// Rank 0: the coordinator's engine; train a [`crate::run::Run`] with it.
    Coordinator(Box<Mpi>),
    /// Rank `t + 1`: trainer `t`; run it with [`run_trainer`].
    Trainer(MpiContext),
}

/// Initializes MPI for this process ([`MpiContext::init`], bounded by `join_timeout`, default
/// 120 s) and says which role it has: rank 0 coordinates, every other rank trains one part.
///
/// # Errors
/// [`TrainError::Engine`] when MPI cannot be initialized.
pub fn launch(join_timeout: Option<Duration>) -> Result<Rank, TrainError> {
    let ctx = MpiContext::init(join_timeout)?;
    Ok(if ctx.rank() == 0 {
        Rank::Coordinator(Box::new(Mpi::new(ctx)))
    } else {
        Rank::Trainer(ctx)
    })
}

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
    /// under one lock; see [`crate::engines::mpi_cluster`]); `join_timeout`
    /// (`--join-timeout`, default 120 s) bounds the waits for ranks to join and to exit.
    ///
    /// A start-up watchdog bounds `MPI_Init` itself by `join_timeout` too: a rank lost before
    /// or during it (killed, out of memory, its host unreachable) leaves every other rank
    /// waiting inside `MPI_Init` forever under `mpirun --enable-recovery`, so after
    /// `join_timeout` this rank prints why and exits with status [`STARTUP_EXIT`].
    pub fn init(join_timeout: Option<Duration>) -> Result<MpiContext, TrainError> {
        let join_timeout = join_timeout.unwrap_or(Duration::from_secs(120));
        let watchdog = startup_watchdog(join_timeout);
        let init =
            crate::engines::mpi_cluster::mpi::initialize_with_threading(Threading::Serialized);
        drop(watchdog); // MPI_Init returned: the watchdog thread ends
        let Some((universe, _threading)) = init else {
            return Err(TrainError::Engine(
                "MPI could not be initialized (already initialized in this process?)".into(),
            ));
        };
        let world = universe.world();
        // a failure on the link to one peer must not abort every rank
        crate::engines::mpi_cluster::errors_return(&world);
        let host = crate::engines::mpi_cluster::mpi::environment::processor_name()
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

    /// Ranks in the job (1 coordinator + M trainers).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The host name MPI gives for this process.
    pub fn host(&self) -> &str {
        &self.host
    }

    fn world(&self) -> SimpleCommunicator {
        self.universe.world()
    }

    /// Ends every rank of the job: tells every trainer rank `message` (it prints it and exits
    /// with an error, which is what ends it under `mpirun --enable-recovery`), then
    /// `MPI_Abort(code)`; never returns.
    pub fn abort_job(&self, message: &str, code: i32) -> ! {
        crate::engines::mpi_cluster::abort_job(&self.world(), message, code)
    }
}

/// Exit status of a rank whose `MPI_Init` did not return within `--join-timeout`.
pub const STARTUP_EXIT: i32 = 3;

/// Starts the thread that ends this process when `MPI_Init` has not returned within
/// `timeout`; dropping the returned sender (after `MPI_Init`) ends the thread instead.
fn startup_watchdog(timeout: Duration) -> std::sync::mpsc::Sender<()> {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("tma-mpi-start".into())
        .spawn(move || {
            if rx.recv_timeout(timeout) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                eprintln!("{}", startup_timeout_message(timeout));
                std::process::exit(STARTUP_EXIT);
            }
        });
    if let Err(e) = spawned {
        eprintln!("warning: no MPI start-up watchdog ({e}): a rank lost during MPI_Init would leave this one waiting");
    }
    tx
}

/// What a rank stuck in `MPI_Init` prints: its rank (from the launcher's environment, since
/// MPI cannot say yet), its host, the timeout, and what to do.
fn startup_timeout_message(timeout: Duration) -> String {
    let rank = super::launcher_rank().map_or_else(|| "?".into(), |r| r.to_string());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "?".into());
    format!(
        "error: rank {rank} on {host}: MPI start-up (MPI_Init) did not finish within --join-timeout {}: a rank of this job was lost before or during start-up (killed, out of memory, or its host unreachable); exiting with status {STARTUP_EXIT}. Check that every rank can start (the same tma binary and partition directory on every host), then launch the job again",
        humantime::format_duration(timeout)
    )
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

/// Rank `t + 1` (`ctx.rank() > 0`): loads part `t` of the partition directory `dir` (manifest
/// `m`) only, trains it with `method` (`crate::methods::training_method(cfg.method)`) until the coordinator ends the run, and exits;
/// `fail` injects this trainer's failure; `run_dir` (the run directory, when known) is named in
/// the resume hint of a rank that lost the coordinator. Consumes the MPI context:
/// `MPI_Finalize` when every rank said goodbye, none when a peer was lost (it would wait for
/// it forever).
///
/// # Errors
/// [`TrainError::Engine`] naming the rank and host: its part cannot be read (the coordinator
/// reports it and aborts the job), the coordinator failed or was lost.
pub fn run_trainer(
    ctx: MpiContext,
    method: &dyn TrainingMethod,
    dir: &Path,
    m: &Manifest,
    cfg: &TrainConfig,
    fail: &FailPlan,
    run_dir: Option<&Path>,
) -> Result<(), TrainError> {
    let t = ctx.rank - 1;
    let resume = match run_dir {
        Some(d) => format!("`tma train --resume {}`", d.display()),
        None => "`tma train --resume RUN_DIR`".to_string(),
    };
    crate::memory::start_sampler();
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
            return Err(TrainError::Engine(format!(
                "rank {} on {}: {e}",
                ctx.rank, ctx.host
            )));
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
    trainer.set_exclude_targets(cfg.excludes_targets(m.structural_features.unwrap_or(false)));
    trainer.continue_epochs(epochs);
    let clock: Arc<dyn Clock> = Arc::new(RealClock::start());
    // on this (MPI) thread; the steps' parallel work goes to the global pool
    let exit = method.run_trainer(trainer, &mut ep, clock.clone(), fail.get(&t).copied());
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
        peak_rss_mib()
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
fn aborted(ctx: MpiContext, ep: MpiTrainer) -> Result<(), TrainError> {
    let msg = format!(
        "rank {} (trainer {}) on {}: the coordinator (rank 0) failed and ended the job: {}; exiting",
        ctx.rank,
        ctx.rank - 1,
        ctx.host,
        ep.coordinator_error().unwrap_or_default()
    );
    std::mem::forget(ep);
    std::mem::forget(ctx);
    Err(TrainError::Engine(msg))
}

/// A trainer rank that lost the coordinator: exits with an error naming it, without
/// `MPI_Finalize` (which would wait for the dead rank forever).
fn orphaned(ctx: MpiContext, ep: MpiTrainer, when: &str, resume: &str) -> Result<(), TrainError> {
    let msg = format!(
        "rank {} (trainer {}) on {}: lost contact with the coordinator (rank 0): nothing heard from it for {} ({when}); exiting. If the coordinator died, continue the run with {resume} under mpirun; if only this rank was cut off (its link), the coordinator finishes the run without it and lists it in summary.json failed_trainers",
        ctx.rank,
        ctx.rank - 1,
        ctx.host,
        humantime::format_duration(ep.peer_timeout()),
    );
    std::mem::forget(ep);
    std::mem::forget(ctx);
    Err(TrainError::Engine(msg))
}

/// Rank 0's [`Engine`]: waits for every trainer rank to join, runs the round loop over
/// [`MpiCoordinator`], waits for every trainer to exit, and records every rank's memory. A
/// rank that fails to load, join or exit in time is reported by rank and host. Until
/// [`Mpi::finish`] (or [`Mpi::abort`]) the job's MPI context lives here: a caller that fails
/// before training ends the job with [`Mpi::abort`], since the trainer ranks wait for rank 0.
pub struct Mpi {
    ctx: Option<MpiContext>,
    coord: Option<MpiCoordinator>,
    /// The exit status an error of [`Engine::run`] ends the job with (2: wrong rank count, 3:
    /// ranks not ready, 1: anything else).
    abort_code: i32,
    finished: Result<(), Vec<crate::engines::mpi_cluster::RankProblem>>,
}

impl Mpi {
    /// Rank 0's engine over the initialized `ctx` (see [`launch`]).
    pub fn new(ctx: MpiContext) -> Mpi {
        Mpi {
            ctx: Some(ctx),
            coord: None,
            abort_code: 1,
            finished: Ok(()),
        }
    }

    /// Whether this is a job of one rank (started without `mpirun`, or with `-np 1`): no trainer
    /// rank waits for it, so an error before training needs no [`Mpi::abort`].
    pub fn alone(&self) -> bool {
        self.ctx.as_ref().is_some_and(|c| c.size == 1)
    }

    /// The MPI context (None once [`Mpi::finish`] gave it up).
    pub fn context(&self) -> Option<&MpiContext> {
        self.ctx.as_ref()
    }

    /// Ends every rank of the job after an error of rank 0 outside the round loop: prints
    /// `error` and that the job is aborted, tells every trainer rank (they print it and exit),
    /// then `MPI_Abort`. Never returns.
    pub fn abort(mut self, error: &str) -> ! {
        eprintln!("error: {error}");
        eprintln!("error: rank 0 failed before training; aborting the MPI job");
        let code = self.abort_code;
        if let Some(c) = self.coord.as_mut() {
            c.abort_job(error, code);
        }
        match self.ctx.take() {
            Some(ctx) => ctx.abort_job(error, code),
            None => std::process::exit(code),
        }
    }

    /// After [`crate::run::Run::train_with`] returned `result` (the run directory is complete,
    /// or the run failed): a run that failed before its round loop ends the job
    /// ([`Mpi::abort`], never returns); otherwise lets the trainer ranks go. Returns `None`
    /// after `MPI_Finalize` (every rank said goodbye), or the job's end when a rank was lost:
    /// the caller prints the run's result, then [`JobEnd::end`] ends every rank and the
    /// launcher, since Open MPI's `mpirun` would otherwise wait for a lost host's daemon
    /// forever.
    pub fn finish<T>(mut self, result: &Result<T, TrainError>) -> Option<JobEnd> {
        let started = self.coord.as_ref().is_some_and(|c| c.started());
        if let (Err(e), false) = (result, started) {
            if self.alone() {
                // no other rank waits for this one: the error is the caller's to report
                return None;
            }
            self.abort(&e.to_string());
        }
        if let Err(problems) = &self.finished {
            for p in problems {
                eprintln!("warning: {p}; listed in summary.json failed_trainers");
            }
        }
        let mut coord = self
            .coord
            .take()
            .expect("a started run has its coordinator");
        let ctx = self.ctx.take().expect("the context lives until finish");
        if coord.close() {
            drop(coord);
            drop(ctx); // MPI_Finalize
            None
        } else {
            // no MPI_Finalize (it would wait for the lost ranks); the surviving trainer ranks
            // were told to exit without it too
            std::mem::forget(coord);
            Some(JobEnd(ctx))
        }
    }

    /// Checks that the job has one rank per part of the partition directory (manifest `m`) plus
    /// the coordinator; front ends call it right after [`launch`], before anything is loaded
    /// or printed ([`Engine::run`] checks again).
    ///
    /// # Errors
    /// [`TrainError::Engine`] saying how many ranks to launch (the job then ends with exit
    /// status 2).
    pub fn check_ranks(&mut self, m: &Manifest) -> Result<(), TrainError> {
        let size = self.ctx.as_ref().map_or(0, |c| c.size);
        let want = m.parts.len() + 1;
        if size == want {
            return Ok(());
        }
        let msg = format!(
            "the partition directory has {} parts: launch {want} ranks (1 coordinator + {} trainers), not {size}",
            m.parts.len(),
            m.parts.len(),
        );
        Err(self.fail(msg, 2))
    }

    /// Fails [`Engine::run`] with `msg`, to end the job with exit status `code`.
    fn fail(&mut self, msg: String, code: i32) -> TrainError {
        self.abort_code = code;
        TrainError::Engine(msg)
    }
}

impl Engine for Mpi {
    fn run(&mut self, e: EngineContext<'_>) -> Result<RunResult, TrainError> {
        let ctx = self.ctx.as_ref().expect("the context lives until finish");
        let (join_timeout, host, world) = (ctx.join_timeout, ctx.host.clone(), ctx.world());
        let Some((_, m)) = e.partitions else {
            return Err(self.fail(
                "--engine mpi trains on a partition directory (write one with `tma partition --out DIR`)".into(),
                2,
            ));
        };
        self.check_ranks(m)?;
        if std::env::var_os("OMPI_COMM_WORLD_SIZE").is_some()
            && std::env::var("OMPI_MCA_orte_enable_recovery").as_deref() != Ok("1")
        {
            eprintln!(
                "note: mpirun was started without --enable-recovery: if any rank dies, Open MPI ends the whole job (then `tma train --resume RUN_DIR` continues it); with it, the run goes on without a lost trainer"
            );
        }
        let coord = self
            .coord
            .insert(MpiCoordinator::new(world, e.cfg, e.clock.clone()));
        if !coord.has_heartbeat() {
            eprintln!(
                "warning: this MPI library does not give MPI_THREAD_SERIALIZED: no heartbeats from rank 0, so a coordinator busy for longer than {} (a checkpoint on a slow disk, a long evaluation) is taken for lost by its trainers",
                humantime::format_duration(e.cfg.peer_timeout())
            );
        }
        if let Err(problems) = coord.join(join_timeout) {
            for p in &problems {
                eprintln!("error: {p}");
            }
            let msg: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
            let msg = format!("{} rank(s) not ready: {}", problems.len(), msg.join("; "));
            return Err(self.fail(msg, 3));
        }
        let epochs: Vec<u64> = (0..m.parts.len())
            .map(|t| crate::evaluation::record::Resume::epochs_of(e.resume.as_ref(), t))
            .collect();
        coord.start(e.segment, &epochs);
        let weights = manifest_weights(e.cfg, m);
        let threads = rank_threads(e.cfg);
        let result = coordinate_prepared(coord, e, weights, threads, None);
        self.finished = coord.finish(join_timeout);
        eprintln!(
            "rank 0 (coordinator) on {host}: peak RSS {:.0} MiB",
            peak_rss_mib()
        );
        if coord.dropped() > 0 {
            eprintln!(
                "warning: {} malformed contribution(s) (wrong size) were dropped",
                coord.dropped()
            );
        }
        let failed = coord.failed();
        let mut memory = vec![crate::memory::ProcessMemory::this_process(
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
    }

    fn role(&self) -> &'static str {
        "coordinator"
    }
}

/// The end of an MPI job that lost a rank (see [`Mpi::finish`]).
pub struct JobEnd(MpiContext);

/// How long rank 0's launcher watcher gives `mpirun` to exit on its own after rank 0 exits.
pub const LAUNCHER_GRACE: Duration = Duration::from_secs(5);

impl JobEnd {
    /// Ends rank 0 once everything is written and printed, with exit status `code` (0
    /// complete, 1 incomplete, 130/143 interrupted), without `MPI_Finalize` (which would wait
    /// for the lost rank; the surviving trainer ranks were told the same). Open MPI's `mpirun
    /// --enable-recovery` exits by itself once a lost *process* is gone, but waits forever for
    /// the processes of a lost *host* (its daemon is gone too; measured: still running after
    /// 90 s, `MPI_Abort` did not end it either). So when rank 0 is a child of `mpirun`
    /// (`orterun`: the usual placement, rank 0 on the launching host), it leaves a watcher
    /// process that sends `mpirun` SIGTERM if it is still there [`LAUNCHER_GRACE`] after rank
    /// 0 exits (`mpirun` then exits with status 1); otherwise it says how to end the launcher.
    /// Never returns.
    pub fn end(self, code: i32) -> ! {
        use std::io::Write;
        self.detach();
        let _ = std::io::stdout().flush();
        let _ = std::io::stderr().flush();
        std::process::exit(code)
    }

    /// As [`JobEnd::end`] without ending this process: leaves the launcher's watcher (which
    /// waits for this process to exit, then gives `mpirun` [`LAUNCHER_GRACE`]) and gives up the
    /// MPI context without `MPI_Finalize`, so a caller that goes on (the Python package's
    /// `tma.train`, which returns the run) can; the process must still exit for the job to end.
    pub fn detach(self) {
        match launcher() {
            Some((pid, exe)) => match watch_launcher(pid, &exe) {
                Ok(()) => eprintln!(
                    "note: rank(s) were lost: if mpirun (pid {pid}) still waits for them {} after rank 0 exits (a lost host), rank 0's watcher ends it (SIGTERM; mpirun's status is then 1); the run directory is complete",
                    humantime::format_duration(LAUNCHER_GRACE)
                ),
                Err(e) => eprintln!(
                    "note: rank(s) were lost and no watcher for mpirun could start ({e}): if mpirun waits for a lost host, end it (kill {pid}); the run directory is complete"
                ),
            },
            None => eprintln!(
                "note: rank(s) were lost: if the launcher waits for a lost host after every rank exited, end it (Ctrl-C, scancel); the run directory is complete"
            ),
        }
        std::mem::forget(self.0);
    }
}

/// Rank 0's parent process when it is Open MPI's launcher (`orterun`, `mpirun`, `prterun`):
/// its pid and executable.
fn launcher() -> Option<(u32, std::path::PathBuf)> {
    std::env::var_os("OMPI_COMM_WORLD_SIZE")?;
    // SAFETY: getppid has no preconditions and cannot fail.
    let ppid = unsafe { libc::getppid() };
    let exe = std::fs::read_link(format!("/proc/{ppid}/exe")).ok()?;
    let name = exe.file_name()?.to_str()?;
    matches!(name, "orterun" | "mpirun" | "mpiexec" | "prterun").then_some((ppid as u32, exe))
}

/// Starts a detached process (own process group, no inherited output) that sends `pid`
/// SIGTERM after [`LAUNCHER_GRACE`] if `pid` is still the launcher `exe`.
fn watch_launcher(pid: u32, exe: &Path) -> std::io::Result<()> {
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    // (first waits for this process, rank 0, to exit: a caller may go on after the run)
    let me = std::process::id();
    let script = format!(
        "while [ -d /proc/{me} ]; do sleep 0.2; done; sleep {}; [ \"$(readlink /proc/{pid}/exe)\" = \"$1\" ] && kill -TERM {pid}",
        LAUNCHER_GRACE.as_secs()
    );
    Command::new("/bin/sh")
        .args(["-c", &script, "tma-launcher-watch"])
        .arg(exe)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map(drop)
}
