//! `tma train --engine mpi`: what each rank does under `mpirun -np M+1` / `srun`.
//! Rank 0 runs the coordinator (`coordinate` over [`MpiCoordinator`]) on the partition
//! directory's `coordinator/` data; rank `t + 1` runs trainer `t` on `part-{t:03}/` only.

use crate::train_cmd::TrainOpts;
use anyhow::{bail, Context, Result};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tma_train::coordinator::{build_model, coordinate, FailPlan, Observer, RunResult};
use tma_train::data::{EvalData, NodeTargets, Prepared};
use tma_train::mpi_cluster::mpi::environment::Universe;
use tma_train::mpi_cluster::mpi::topology::SimpleCommunicator;
use tma_train::mpi_cluster::mpi::traits::Communicator;
use tma_train::mpi_cluster::mpi::Threading;
use tma_train::mpi_cluster::{ByeKind, MpiCoordinator, MpiTrainer};
use tma_train::store::{self, Manifest};
use tma_train::trainer::{Trainer, TrainerExit};
use tma_train::{AverageWeight, Clock, Extras, RealClock, TrainConfig};

/// MPI initialized for this process.
pub struct MpiContext {
    universe: Universe,
    rank: usize,
    size: usize,
    join_timeout: Duration,
    host: String,
}

impl MpiContext {
    /// Initializes MPI (`MPI_THREAD_FUNNELED`: only this thread calls MPI).
    pub fn init(o: &TrainOpts) -> Result<MpiContext> {
        let join_timeout = match &o.join_timeout {
            Some(s) => humantime::parse_duration(s)
                .with_context(|| format!("--join-timeout: '{s}' is not a duration"))?,
            None => Duration::from_secs(120),
        };
        let Some((universe, _threading)) =
            tma_train::mpi_cluster::mpi::initialize_with_threading(Threading::Funneled)
        else {
            bail!("MPI could not be initialized (already initialized?)");
        };
        let world = universe.world();
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

/// A `Prepared` with no graph data, only what [`build_model`] reads (a trainer rank builds
/// the same model as the coordinator without holding the evaluation data).
fn model_stub(m: &Manifest) -> Prepared {
    let eval = match m.targets.as_str() {
        "link" => EvalData::Link {
            split: tma_graph::LinkSplit {
                train_graph: tma_graph::Csr {
                    indptr: vec![0],
                    indices: vec![],
                },
                train_edges: vec![],
                val_pos: vec![],
                test_pos: vec![],
                val_neg: vec![],
                test_neg: vec![],
                num_neg: m.data.eval_num_neg,
            },
        },
        t => EvalData::Node {
            split: tma_graph::NodeSplit {
                train: vec![],
                val: vec![],
                test: vec![],
            },
            targets: if t == "classes" {
                NodeTargets::Classes {
                    y: vec![],
                    num_classes: m.out_dim,
                }
            } else {
                NodeTargets::MultiLabel {
                    y: vec![],
                    num_labels: m.out_dim,
                }
            },
        },
    };
    Prepared {
        graph: tma_graph::Csr {
            indptr: vec![0],
            indices: vec![],
        },
        degrees: vec![],
        features: tma_graph::Features::Dense {
            num_nodes: 0,
            dim: m.in_dim,
            data: vec![],
        },
        eval,
        trainers: vec![],
        report: None,
        partition_hash: m.assignment_sha256.clone(),
        in_dim: m.in_dim,
        out_dim: m.out_dim,
    }
}

/// Rank `t + 1`: loads part `t` only, trains, exits when told.
pub fn run_trainer(
    ctx: MpiContext,
    dir: &Path,
    m: &Manifest,
    cfg: &TrainConfig,
    fail: &FailPlan,
    quiet: bool,
) -> Result<()> {
    let t = ctx.rank - 1;
    let mut ep = MpiTrainer::new(ctx.world());
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
    let seed = ep.wait_start();
    let run_cfg = TrainConfig {
        seed,
        ..cfg.clone()
    };
    let model = build_model(cfg, &model_stub(m))?;
    let init = model.zero_params();
    let (nodes, edges) = (data.num_nodes(), data.num_edges());
    let trainer = Trainer::new(data, model, init, &run_cfg);
    let clock: Arc<dyn Clock> = Arc::new(RealClock::start());
    // on this (MPI) thread; the steps' parallel work goes to the global pool
    let exit = trainer.run(&mut ep, clock.clone(), fail.get(&t).copied());
    let kind = match exit {
        TrainerExit::Stopped => ByeKind::Stopped,
        TrainerExit::Failed(_) => ByeKind::Failed,
        TrainerExit::Orphaned => ByeKind::Orphaned,
    };
    ep.bye(kind, clock.elapsed());
    let _ = quiet;
    eprintln!(
        "rank {} (trainer {t}) on {}: part {} nodes, {} arcs; {threads} threads; peak RSS {:.0} MiB",
        ctx.rank,
        ctx.host,
        nodes,
        edges,
        crate::dist::peak_rss_mib().unwrap_or(f64::NAN)
    );
    drop(ep);
    drop(ctx); // MPI_Finalize
    Ok(())
}

/// Rank 0: waits for every trainer to join, runs the coordinator loop, waits for every trainer
/// to exit. A rank that fails to load, join or exit in time is reported by rank and host and
/// the job is aborted (after the run directory is written, when the run itself completed).
pub fn run_coordinator(
    ctx: MpiContext,
    m: &Manifest,
    prep: &Prepared,
    cfg: &TrainConfig,
    clock: Arc<dyn Clock>,
    observer: &mut dyn Observer,
    extras: Extras<'_>,
) -> Result<RunResult> {
    let want = m.parts.len() + 1;
    if ctx.size != want {
        eprintln!(
            "error: the partition directory has {} parts: launch {want} ranks (1 coordinator + {} trainers), not {}",
            m.parts.len(),
            m.parts.len(),
            ctx.size
        );
        ctx.world().abort(2);
    }
    let mut coord = MpiCoordinator::new(ctx.world());
    if let Err(problems) = coord.join(ctx.join_timeout) {
        for p in &problems {
            eprintln!("error: {p}");
        }
        eprintln!(
            "error: aborting the MPI job ({} rank(s) not ready)",
            problems.len()
        );
        ctx.world().abort(3);
    }
    coord.start(cfg.seed);
    let model = build_model(cfg, prep)?;
    let init = model.init_params(&mut ChaCha8Rng::seed_from_u64(cfg.seed));
    let weights: Vec<f64> = m
        .parts
        .iter()
        .map(|p| match cfg.average_weight {
            AverageWeight::Uniform => 1.0,
            AverageWeight::Nodes => p.num_nodes as f64,
            AverageWeight::Edges => p.num_edges as f64,
        })
        .collect();
    let eval_pool = rayon::ThreadPoolBuilder::new()
        .num_threads(rank_threads(cfg))
        .thread_name(|i| format!("tma-eval-{i}"))
        .build()
        .context("thread pool")?;
    let result = coordinate(
        &mut coord, prep, cfg, &model, init, &weights, &*clock, &eval_pool, observer, extras,
    );
    let finished = coord.finish(ctx.join_timeout);
    let failed = coord.failed();
    eprintln!(
        "rank 0 (coordinator) on {}: peak RSS {:.0} MiB",
        ctx.host,
        crate::dist::peak_rss_mib().unwrap_or(f64::NAN)
    );
    match finished {
        Ok(()) => {
            drop(coord);
            drop(ctx); // MPI_Finalize
        }
        Err(problems) => {
            for p in &problems {
                eprintln!("error: {p}");
            }
            eprintln!("error: the job ends without MPI_Finalize so mpirun stops those ranks");
            // no MPI_Finalize (it would wait for the hung ranks): exiting rank 0 without it
            // makes the launcher end the job
            std::mem::forget(coord);
            std::mem::forget(ctx);
        }
    }
    let mut r = result?;
    r.summary.failed_trainers = failed;
    Ok(r)
}
