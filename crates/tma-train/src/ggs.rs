//! GGS baseline: global-graph-sampling synchronous data parallelism (Zhu et al. 2023, arXiv
//! 2305.09887, Sec. 5, "GGS"; the usual DistDGL-style training without partition-local
//! sampling).
//!
//! Every trainer holds the **whole** training graph and a disjoint share of the training
//! examples ([`share_examples`]). At every step each trainer computes the gradient of its own
//! mini-batch and joins "round" = step over the ordinary transport, sending the gradient instead
//! of its parameters. The coordinator averages the gradients of the trainers that answered,
//! adds weight decay and clips exactly as a single trainer would, and replies with the processed
//! gradient; every trainer, and the coordinator's own copy, then makes the same Adam step, so all
//! parameters stay bitwise identical (one barrier per step). Every `sync_every` of wall-clock
//! time the coordinator's copy is validated; those evaluation points are the run's rounds.
//!
//! A trainer that fails is absent from the next gradient mean (its endpoint is dead, so the
//! barrier does not wait for it); the survivors go on.

use crate::averaging::average_models;
use crate::clock::{round_due_at, Clock};
use crate::cluster::{CoordinatorEndpoint, Reply, TrainerEndpoint, TrainerReport};
use crate::config::TrainConfig;
use crate::coordinator::{
    build_model, evaluate, EvalResult, Extras, FailPlan, Observer, RoundRecord, RunResult, Split,
};
use crate::data::{Prepared, TrainTarget, TrainerData};
use crate::trainer::{Trainer, TrainerExit};
use crate::TrainError;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tma_nn::{Adam, Model, ParamSet};

/// Splits the training examples of `full` (edges or nodes) into `num_shares` disjoint shares of
/// sizes differing by at most one (seeded shuffle, then dealt round-robin) and returns the
/// first `keep` of them as trainer data `0..keep`, each with the whole graph.
/// `keep < num_shares` models trainers lost from the start (`--drop-parts`): their examples are
/// never trained on.
///
/// # Panics
/// If `keep > num_shares` or `num_shares == 0`.
pub fn share_examples(
    full: &TrainerData,
    num_shares: usize,
    keep: usize,
    seed: u64,
) -> Vec<TrainerData> {
    assert!(num_shares > 0 && keep <= num_shares);
    let n = match &full.target {
        TrainTarget::Link { edges } => edges.len(),
        TrainTarget::Node { nodes, .. } => nodes.len(),
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed ^ 0x6767_7300_5EED_0001));
    (0..keep)
        .map(|s| {
            let mine = order.iter().skip(s).step_by(num_shares).copied();
            let target = match &full.target {
                TrainTarget::Link { edges } => TrainTarget::Link {
                    edges: mine.map(|i| edges[i]).collect(),
                },
                TrainTarget::Node { nodes, targets } => TrainTarget::Node {
                    nodes: mine.map(|i| nodes[i]).collect(),
                    targets: targets.clone(),
                },
            };
            TrainerData {
                trainer: s,
                part: s,
                graph: full.graph.clone(),
                degrees: full.degrees.clone(),
                features: full.features.clone(),
                target,
                global_ids: full.global_ids.clone(),
            }
        })
        .collect()
}

/// A GGS trainer's loop: gradient of its next mini-batch, join step `s` with it, apply the
/// gradient the coordinator returns (Adam), repeat until told to stop (the stop reply carries
/// the last step's gradient, which is applied too, so the trainer ends on the final model).
/// `after_step(s, params)` is called after every applied step (tests check identity there).
pub fn ggs_worker(
    mut trainer: Trainer,
    endpoint: &mut dyn TrainerEndpoint,
    clock: Arc<dyn Clock>,
    fail_at: Option<Duration>,
    mut after_step: impl FnMut(u64, &ParamSet),
) -> TrainerExit {
    let Some(init) = endpoint.initial_params() else {
        return TrainerExit::Orphaned;
    };
    trainer.set_params(&init);
    let mut step = 0u64;
    loop {
        if let Some(t) = fail_at {
            if clock.elapsed() >= t {
                return TrainerExit::Failed(t);
            }
        }
        let loss = trainer.compute_gradients();
        // a trainer that fell behind (answered after the step's timeout) joins the current step
        step = (step + 1).max(endpoint.due_round().min(u64::MAX - 1));
        let report = TrainerReport {
            steps: trainer.steps,
            epochs: trainer.epochs,
            loss_sum: if loss.is_finite() { loss as f64 } else { 0.0 },
            loss_count: loss.is_finite() as u64,
        };
        match endpoint.join_round(step, &trainer.grads().data, report) {
            // an empty reply answers a late contribution: nothing to apply
            Some(Reply::Continue(g)) if g.is_empty() => {}
            Some(Reply::Continue(g)) => {
                trainer.apply_gradient(&g);
                after_step(step, trainer.params());
            }
            Some(Reply::Stop(g)) => {
                if g.len() == trainer.params().len() {
                    trainer.apply_gradient(&g);
                    after_step(step, trainer.params());
                }
                return TrainerExit::Stopped;
            }
            None => return TrainerExit::Orphaned,
        }
    }
}

/// Runs a GGS job with in-process trainers (threads), one per `prep.trainers` entry (see
/// [`share_examples`]). Same outputs as [`crate::run_in_process`]; `extras.corrector` is not
/// used; `extras.resume` restarts from its parameters (fresh Adam moments).
///
/// # Errors
/// [`TrainError::Config`] for a bad model name; [`TrainError::AllTrainersFailed`] if every
/// trainer failed before the first evaluation point.
pub fn run_ggs(
    prep: &Prepared,
    cfg: &TrainConfig,
    fail: &FailPlan,
    clock: Arc<dyn Clock>,
    observer: &mut dyn Observer,
    extras: Extras<'_>,
) -> Result<RunResult, TrainError> {
    let model = build_model(cfg, prep)?;
    let init = model.init_params(&mut ChaCha8Rng::seed_from_u64(cfg.seed));
    crate::coordinator::run_trainer_threads(
        prep,
        cfg,
        &model,
        &init,
        fail,
        clock.clone(),
        |trainer, ep, clock, fail_at| ggs_worker(trainer, ep, clock, fail_at, |_, _| {}),
        |coord, eval_pool| {
            ggs_coordinate(
                coord,
                prep,
                cfg,
                &model,
                init.clone(),
                &*clock,
                eval_pool,
                observer,
                extras,
            )
        },
    )
}

/// An evaluation point waiting for its validation result.
type Pending = crate::coordinator::PendingRound;

/// The GGS coordinator over any transport: per step, gathers gradients, averages them
/// (plain mean over the trainers that answered), adds `weight_decay * params`, clips to
/// `clip_norm` once any trainer has passed `clip_from_epoch`, steps its own Adam and replies
/// with the processed gradient. Validation runs on a separate thread every `sync_every`.
#[allow(clippy::too_many_arguments)]
pub fn ggs_coordinate(
    coord: &mut dyn CoordinatorEndpoint,
    prep: &Prepared,
    cfg: &TrainConfig,
    model: &Model,
    init: ParamSet,
    clock: &dyn Clock,
    eval_pool: &rayon::ThreadPool,
    observer: &mut dyn Observer,
    extras: Extras<'_>,
) -> Result<RunResult, TrainError> {
    let n = coord.num_trainers();
    let step_timeout = cfg.sync_every.max(Duration::from_secs(60)) * 4;
    let mut params = init;
    let mut grads = params.zeros_like();
    let mut adam = Adam::new(params.len(), cfg.lr);
    let mut best: Option<(u64, EvalResult, Arc<Vec<f32>>)> = None;
    let mut round = 0u64;
    // steps since the start of the run: the trainers count from 0 again after a resume
    let step_offsets = crate::coordinator::Resume::step_offsets(extras.resume.as_ref(), n);
    if let Some(r) = extras.resume {
        params.data.copy_from_slice(&r.params);
        round = r.round;
        best = r.best.map(|(k, v, p)| (k, v, Arc::new(p)));
    }
    coord.broadcast_initial(Arc::new(params.data.clone()));
    let no_model = Arc::new(Vec::new());
    let mut records: Vec<RoundRecord> = Vec::new();
    let mut hook_err: Option<TrainError> = None;
    let mut last_steps = step_offsets.clone();
    let mut last_epochs = vec![0u64; n];
    let (job_tx, job_rx) = std::sync::mpsc::channel::<Pending>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Pending>();

    let mut accept = |mut p: Pending, records: &mut Vec<RoundRecord>, hook_err: &mut Option<_>| {
        let is_best = best
            .as_ref()
            .is_none_or(|(_, b, _)| p.record.val.value > b.value);
        if is_best {
            best = Some((p.record.round, p.record.val.clone(), p.params.clone()));
        }
        p.record.is_best = is_best;
        observer.on_round(&p.record);
        if let Err(e) = observer.on_round_model(&p.record, &p.params) {
            hook_err.get_or_insert(e);
        }
        records.push(p.record);
    };

    std::thread::scope(|scope| {
        let template = params.clone();
        std::thread::Builder::new()
            .name("tma-evaluator".into())
            .spawn_scoped(scope, move || {
                let mut p = template;
                for mut job in job_rx {
                    p.data.copy_from_slice(&job.params);
                    let t0 = Instant::now();
                    job.record.val = eval_pool.install(|| evaluate(model, &p, prep, Split::Val));
                    job.record.eval_s = t0.elapsed().as_secs_f64();
                    if done_tx.send(job).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn evaluator thread");

        let mut step = 0u64;
        let mut due = round_due_at(round + 1, cfg.sync_every, cfg.time_limit);
        let (mut loss_sum, mut loss_count) = (0f64, 0u64);
        loop {
            while let Ok(p) = done_rx.try_recv() {
                accept(p, &mut records, &mut hook_err);
            }
            step += 1;
            coord.call_round(step);
            let contribs = coord.gather(step, step_timeout, &no_model);
            if contribs.is_empty() {
                break;
            }
            let g: Vec<&[f32]> = contribs.iter().map(|c| c.params.as_slice()).collect();
            let w = vec![1.0; g.len()];
            eval_pool.install(|| average_models(&g, &w, &mut grads.data));
            if cfg.weight_decay > 0.0 {
                for (gi, p) in grads.data.iter_mut().zip(&params.data) {
                    *gi += cfg.weight_decay * p;
                }
            }
            let epochs = contribs.iter().map(|c| c.report.epochs).max().unwrap_or(0);
            if epochs + 1 >= cfg.clip_from_epoch as u64 {
                tma_nn::clip_grad_norm(&mut grads, cfg.clip_norm);
            }
            adam.step(&mut params, &grads);
            let elapsed = clock.elapsed();
            let stop = elapsed >= cfg.time_limit;
            let participants: Vec<usize> = contribs.iter().map(|c| c.trainer).collect();
            let g = Arc::new(grads.data.clone());
            coord.reply(
                &participants,
                if stop {
                    Reply::Stop(g)
                } else {
                    Reply::Continue(g)
                },
            );
            for c in &contribs {
                last_steps[c.trainer] = step_offsets[c.trainer] + c.report.steps + 1;
                last_epochs[c.trainer] = c.report.epochs;
                loss_sum += c.report.loss_sum;
                loss_count += c.report.loss_count;
            }
            if elapsed >= due || stop {
                round += 1;
                let missing: Vec<usize> = (0..n).filter(|t| !participants.contains(t)).collect();
                let record = RoundRecord {
                    round,
                    elapsed_s: elapsed.as_secs_f64(),
                    steps: participants.iter().map(|&t| last_steps[t]).collect(),
                    epochs: participants.iter().map(|&t| last_epochs[t]).collect(),
                    participants,
                    missing,
                    train_loss: if loss_count > 0 {
                        loss_sum / loss_count as f64
                    } else {
                        f64::NAN
                    },
                    val: EvalResult::default(),
                    eval_s: 0.0,
                    is_best: false,
                };
                (loss_sum, loss_count) = (0.0, 0);
                let _ = job_tx.send(Pending {
                    record,
                    params: Arc::new(params.data.clone()),
                });
                due = round_due_at(round + 1, cfg.sync_every, cfg.time_limit);
            }
            if stop || hook_err.is_some() {
                break;
            }
        }
        let everyone: Vec<usize> = (0..n).filter(|&t| coord.is_alive(t)).collect();
        coord.reply(&everyone, Reply::Stop(no_model.clone()));
        coord.call_round(u64::MAX);
        drop(job_tx);
        for p in done_rx.iter() {
            accept(p, &mut records, &mut hook_err);
        }
    });
    if let Some(e) = hook_err {
        return Err(e);
    }
    crate::coordinator::finish_run(
        model, prep, cfg, eval_pool, n, records, best, params, last_steps,
    )
}
