//! The coordinator: starts the trainers from identical weights, calls an averaging round every
//! `sync_every` of wall-clock time, evaluates each averaged model on validation while the
//! trainers go on, keeps the best, stops at `time_limit`, then tests the final and the best
//! model (SPEC "Roles").

use crate::averaging::average_models;
use crate::clock::{round_due_at, Clock};
use crate::cluster::{CoordinatorEndpoint, InProcess, Reply};
use crate::config::{AverageWeight, Method, TrainConfig};
use crate::data::{EvalData, NodeTargets, Prepared};
use crate::eval::{accuracy, micro_f1, rank_metrics};
use crate::trainer::{Trainer, TrainerExit};
use crate::TrainError;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tma_nn::{EncoderKind, Head, Model, ModelConfig, ParamSet};

/// Metrics of one evaluation (validation or test).
#[derive(Clone, Debug, Serialize, Default, PartialEq)]
pub struct EvalResult {
    /// Name of the primary metric: "mrr", "accuracy" or "micro_f1".
    pub metric: String,
    /// Value of the primary metric.
    pub value: f64,
    /// All metrics computed (e.g. mrr, hits@1, hits@10, ...).
    pub all: BTreeMap<String, f64>,
}

/// One averaging round, as printed and written to `rounds.jsonl`.
#[derive(Clone, Debug, Serialize)]
pub struct RoundRecord {
    pub round: u64,
    /// Training time when the round's average was formed, seconds.
    pub elapsed_s: f64,
    /// Trainers whose parameters entered the mean.
    pub participants: Vec<usize>,
    /// Trainers that did not (dead, dropped, or too slow).
    pub missing: Vec<usize>,
    /// Optimizer steps of each participating trainer since the start of the run, across
    /// resumes (same order as participants).
    pub steps: Vec<u64>,
    /// Completed epochs of each participating trainer.
    pub epochs: Vec<u64>,
    /// Mean training mini-batch loss since the previous round, over participants.
    pub train_loss: f64,
    /// Validation result of the averaged model.
    pub val: EvalResult,
    /// Seconds the validation took.
    pub eval_s: f64,
    /// Whether this round's model is the best so far on validation.
    pub is_best: bool,
}

/// What a finished run reports.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub method: String,
    pub task: String,
    pub num_trainers: usize,
    pub rounds: u64,
    pub train_time_s: f64,
    pub final_val: EvalResult,
    pub final_test: EvalResult,
    pub best_round: u64,
    pub best_val: EvalResult,
    pub best_test: EvalResult,
    /// Optimizer steps of each trainer since the start of the run (across resumes), as of the
    /// last round it joined (0 for trainers that never joined one).
    pub steps_per_trainer: Vec<u64>,
    /// Trainers that failed during the run, with the time they stopped.
    pub failed_trainers: Vec<(usize, f64)>,
    pub partition_hash: Option<String>,
}

/// Receives what happens during a run (the CLI prints it; tests record it).
pub trait Observer {
    /// A round's averaged model has been validated (called in round order).
    fn on_round(&mut self, _r: &RoundRecord) {}
    /// Right after [`Observer::on_round`], with that round's averaged parameters (flat, in
    /// [`ParamSet`] order): the place to checkpoint. An error ends the run.
    fn on_round_model(&mut self, _r: &RoundRecord, _params: &[f32]) -> Result<(), TrainError> {
        Ok(())
    }
}

/// Changes the averaged model before it is sent back to the trainers (LLCG's global
/// correction steps on the full graph).
pub trait Corrector: Send {
    fn correct(&mut self, round: u64, params: &mut ParamSet);
}

/// Where a resumed run continues from.
#[derive(Clone, Debug)]
pub struct Resume {
    /// Last completed round; the run continues with round `round + 1`.
    pub round: u64,
    /// Averaged parameters after that round.
    pub params: Vec<f32>,
    /// Best round so far, its validation result and parameters.
    pub best: Option<(u64, EvalResult, Vec<f32>)>,
    /// Optimizer steps of each trainer since the start of the run as of `round`, by trainer
    /// index (missing entries count as 0). The resumed trainers count from 0 again; the
    /// coordinator adds these offsets to the steps it records and reports.
    pub steps: Vec<u64>,
}

impl Resume {
    /// Step offset of each of `n` trainers: [`Resume::steps`] padded with zeros (no resume:
    /// all zeros).
    pub fn step_offsets(resume: Option<&Resume>, n: usize) -> Vec<u64> {
        (0..n)
            .map(|t| resume.and_then(|r| r.steps.get(t).copied()).unwrap_or(0))
            .collect()
    }
}

/// Optional parts of the coordinator's loop.
#[derive(Default)]
pub struct Extras<'a> {
    pub corrector: Option<&'a mut dyn Corrector>,
    pub resume: Option<Resume>,
}

/// An observer that ignores everything.
pub struct Quiet;
impl Observer for Quiet {}

/// Result of a run: records, summary and both models.
pub struct RunResult {
    pub rounds: Vec<RoundRecord>,
    pub summary: Summary,
    pub final_params: ParamSet,
    pub best_params: ParamSet,
}

/// The model a config describes.
pub fn build_model(cfg: &TrainConfig, prep: &Prepared) -> Result<Model, TrainError> {
    let encoder: EncoderKind = cfg
        .model
        .parse()
        .map_err(|e: String| TrainError::Config(e))?;
    let head = match &prep.eval {
        EvalData::Link { .. } => Head::Link,
        EvalData::Node { targets, .. } => Head::Node {
            num_classes: targets.out_dim(),
        },
    };
    Ok(Model::new(ModelConfig {
        encoder,
        in_dim: prep.in_dim,
        hidden: cfg.hidden,
        num_layers: cfg.num_layers,
        dropout: cfg.dropout,
        head,
        layer_norm: cfg.layer_norm,
    }))
}

/// Which split to evaluate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    Val,
    Test,
}

/// Evaluates `params` on the validation or test split: exact layer-wise full-neighbour
/// inference on the whole evaluation graph, then MRR/Hits@K (link) or accuracy/micro-F1 (node).
pub fn evaluate(model: &Model, params: &ParamSet, prep: &Prepared, split: Split) -> EvalResult {
    let h = model.infer_full(params, &prep.graph, &prep.degrees, &prep.features);
    let mut all = BTreeMap::new();
    match &prep.eval {
        EvalData::Link { split: ls } => {
            let (pos, neg) = match split {
                Split::Val => (&ls.val_pos, &ls.val_neg),
                Split::Test => (&ls.test_pos, &ls.test_neg),
            };
            let k = ls.num_neg;
            let src: Vec<u32> = pos.iter().map(|p| p.0).collect();
            let dst: Vec<u32> = pos.iter().map(|p| p.1).collect();
            let pos_scores = model.score(params, &h, &src, &dst);
            let mut nsrc = Vec::with_capacity(neg.len());
            for p in pos.iter() {
                nsrc.extend(std::iter::repeat_n(p.0, k));
            }
            let neg_scores = model.score(params, &h, &nsrc, neg);
            let m = rank_metrics(&pos_scores, &neg_scores, k);
            all.insert("mrr".into(), m.mrr);
            all.insert("hits@1".into(), m.hits_at_1);
            all.insert("hits@10".into(), m.hits_at_10);
            all.insert("hits@50".into(), m.hits_at_50);
            all.insert("hits@100".into(), m.hits_at_100);
            EvalResult {
                metric: "mrr".into(),
                value: m.mrr,
                all,
            }
        }
        EvalData::Node { split: ns, targets } => {
            let nodes = match split {
                Split::Val => &ns.val,
                Split::Test => &ns.test,
            };
            let (metric, value) = match targets {
                NodeTargets::Classes { y, num_classes } => {
                    ("accuracy", accuracy(&h.data, *num_classes, y, nodes))
                }
                NodeTargets::MultiLabel { y, num_labels } => {
                    ("micro_f1", micro_f1(&h.data, y, *num_labels, nodes))
                }
            };
            all.insert(metric.into(), value);
            EvalResult {
                metric: metric.into(),
                value,
                all,
            }
        }
    }
}

/// Threads each trainer's pool gets: an equal share of `threads` (at least one).
pub fn trainer_threads(threads: usize, num_trainers: usize) -> usize {
    (threads / num_trainers.max(1)).max(1)
}

/// Total worker threads a config asks for (0 = all cores).
pub fn total_threads(cfg: &TrainConfig) -> usize {
    if cfg.threads > 0 {
        cfg.threads
    } else {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    }
}

/// Averaging weight of each trainer of `prep`: 1 (uniform, the paper's plain mean), its number
/// of nodes, or its number of arcs (training edges of its subgraph), per `cfg.average_weight`.
/// The coordinator normalizes over the trainers present in a round.
pub fn average_weights(cfg: &TrainConfig, prep: &Prepared) -> Vec<f64> {
    prep.trainers
        .iter()
        .map(|t| match cfg.average_weight {
            AverageWeight::Uniform => 1.0,
            AverageWeight::Nodes => t.num_nodes() as f64,
            AverageWeight::Edges => t.num_edges() as f64,
        })
        .collect()
}

/// Trainers that fail at a given time (failure experiment), by trainer index.
pub type FailPlan = BTreeMap<usize, Duration>;

/// Runs a prepared job with in-process trainers (threads). Time counts from `clock`'s start.
///
/// # Errors
/// [`TrainError::Config`] for a bad model name; [`TrainError::AllTrainersFailed`] if no trainer
/// is left to average.
pub fn run_in_process(
    prep: &Prepared,
    cfg: &TrainConfig,
    fail: &FailPlan,
    clock: Arc<dyn Clock>,
    observer: &mut dyn Observer,
    extras: Extras<'_>,
) -> Result<RunResult, TrainError> {
    if cfg.method == Method::Ggs {
        return crate::ggs::run_ggs(prep, cfg, fail, clock, observer, extras);
    }
    let model = build_model(cfg, prep)?;
    let mut init_rng = ChaCha8Rng::seed_from_u64(cfg.seed);
    let init = model.init_params(&mut init_rng);
    // LLCG: global correction on the full graph after each averaging (unless a caller set one)
    let Extras { corrector, resume } = extras;
    let mut llcg = (cfg.method == Method::Llcg && corrector.is_none())
        .then(|| crate::llcg::Llcg::new(prep, cfg, model.clone(), init.clone()));
    let corrector: Option<&mut dyn Corrector> = match (corrector, llcg.as_mut()) {
        (Some(c), _) => Some(c),
        (None, Some(l)) => Some(l),
        (None, None) => None,
    };
    let extras = Extras { corrector, resume };
    let weights = average_weights(cfg, prep);
    run_trainer_threads(
        prep,
        cfg,
        &model,
        &init,
        fail,
        clock.clone(),
        |trainer, ep, clock, fail_at| trainer.run(ep, clock, fail_at),
        |coord, eval_pool| {
            coordinate(
                coord,
                prep,
                cfg,
                &model,
                init.clone(),
                &weights,
                &*clock,
                eval_pool,
                observer,
                extras,
            )
        },
    )
}

/// Runs one thread per `prep.trainers` entry, each inside its own rayon pool sized to its
/// share of the cores, executing `work` (the trainer's loop over its in-process endpoint),
/// while `coordinate` runs on the calling thread with the coordinator's endpoint and an
/// evaluation pool of all the threads. Afterwards records which trainers failed (injected
/// failure or panic) and when, in the summary. Shared by the averaging methods and GGS.
///
/// # Errors
/// Whatever `coordinate` returns; [`TrainError::Config`] if a thread pool cannot be built.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_trainer_threads<W, C>(
    prep: &Prepared,
    cfg: &TrainConfig,
    model: &Model,
    init: &ParamSet,
    fail: &FailPlan,
    clock: Arc<dyn Clock>,
    work: W,
    coordinate: C,
) -> Result<RunResult, TrainError>
where
    W: Fn(
            Trainer,
            &mut crate::cluster::InProcessTrainer,
            Arc<dyn Clock>,
            Option<Duration>,
        ) -> TrainerExit
        + Sync,
    C: FnOnce(&mut InProcess, &rayon::ThreadPool) -> Result<RunResult, TrainError>,
{
    let m = prep.trainers.len();
    let (mut coord, endpoints) = InProcess::new(m);
    let threads = total_threads(cfg);
    let share = trainer_threads(threads, m);
    let eval_pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("tma-eval-{i}"))
        .build()
        .map_err(|e| TrainError::Config(format!("thread pool: {e}")))?;
    let work = &work;
    std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(m);
        for (data, mut ep) in prep.trainers.iter().zip(endpoints) {
            let trainer = Trainer::new(data.clone(), model.clone(), init.clone(), cfg);
            let clock = clock.clone();
            let fail_at = fail.get(&data.trainer).copied();
            let id = data.trainer;
            handles.push(
                std::thread::Builder::new()
                    .name(format!("tma-trainer-{id}"))
                    .spawn_scoped(scope, move || {
                        let pool = rayon::ThreadPoolBuilder::new()
                            .num_threads(share)
                            .thread_name(move |i| format!("tma-trainer-{id}-{i}"))
                            .build()
                            .expect("trainer thread pool");
                        let exit = pool.install(|| work(trainer, &mut ep, clock.clone(), fail_at));
                        (exit, clock.elapsed())
                    })
                    .expect("spawn trainer thread"),
            );
        }
        let result = coordinate(&mut coord, &eval_pool);
        let mut failed = Vec::new();
        for (t, h) in handles.into_iter().enumerate() {
            match h.join() {
                Ok((TrainerExit::Failed(_), at)) => failed.push((t, at.as_secs_f64())),
                Ok(_) => {}
                Err(_) => failed.push((t, f64::NAN)),
            }
        }
        result.map(|mut r| {
            r.summary.failed_trainers = failed;
            r
        })
    })
}

/// A round waiting for its validation result.
pub(crate) struct PendingRound {
    pub(crate) record: RoundRecord,
    pub(crate) params: Arc<Vec<f32>>,
}

/// The coordinator's loop over any transport.
///
/// Rounds are formed on schedule; each averaged model is validated by a separate evaluator
/// thread (in `eval_pool`) so a slow evaluation never delays the next round. Rounds are
/// reported to `observer` in order as their validation completes.
#[allow(clippy::too_many_arguments)]
pub fn coordinate(
    coord: &mut dyn CoordinatorEndpoint,
    prep: &Prepared,
    cfg: &TrainConfig,
    model: &Model,
    init: ParamSet,
    weights: &[f64],
    clock: &dyn Clock,
    eval_pool: &rayon::ThreadPool,
    observer: &mut dyn Observer,
    extras: Extras<'_>,
) -> Result<RunResult, TrainError> {
    let n = coord.num_trainers();
    let round_timeout = cfg.sync_every.max(Duration::from_secs(60)) * 4;
    let mut current = init;
    let Extras {
        mut corrector,
        resume,
    } = extras;
    let mut best: Option<(u64, EvalResult, Arc<Vec<f32>>)> = None;
    let mut first_round = 0u64;
    // steps since the start of the run = a trainer's own count + its count at the resume point
    let step_offsets = Resume::step_offsets(resume.as_ref(), n);
    if let Some(r) = resume {
        current.data.copy_from_slice(&r.params);
        first_round = r.round;
        best = r.best.map(|(k, v, p)| (k, v, Arc::new(p)));
    }
    let mut latest = Arc::new(current.data.clone());
    coord.broadcast_initial(latest.clone());
    let mut records: Vec<RoundRecord> = Vec::new();
    let hook_err: std::cell::RefCell<Option<TrainError>> = Default::default();
    let mut last_steps = step_offsets.clone();
    let (job_tx, job_rx) = std::sync::mpsc::channel::<PendingRound>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<PendingRound>();

    let mut accept = |mut p: PendingRound,
                      records: &mut Vec<RoundRecord>,
                      best: &mut Option<(u64, EvalResult, Arc<Vec<f32>>)>| {
        let is_best = best
            .as_ref()
            .is_none_or(|(_, b, _)| p.record.val.value > b.value);
        if is_best {
            *best = Some((p.record.round, p.record.val.clone(), p.params.clone()));
        }
        p.record.is_best = is_best;
        observer.on_round(&p.record);
        if let Err(e) = observer.on_round_model(&p.record, &p.params) {
            hook_err.borrow_mut().get_or_insert(e);
        }
        records.push(p.record);
    };

    std::thread::scope(|scope| -> Result<(), TrainError> {
        let template = current.clone();
        std::thread::Builder::new()
            .name("tma-evaluator".into())
            .spawn_scoped(scope, move || {
                let mut params = template;
                for mut job in job_rx {
                    params.data.copy_from_slice(&job.params);
                    let t0 = Instant::now();
                    job.record.val =
                        eval_pool.install(|| evaluate(model, &params, prep, Split::Val));
                    job.record.eval_s = t0.elapsed().as_secs_f64();
                    if done_tx.send(job).is_err() {
                        break;
                    }
                }
            })
            .expect("spawn evaluator thread");

        let mut round = first_round;
        let mut in_eval = 0usize;
        loop {
            round += 1;
            // step-count schedule: call the round at once; trainers join it after their steps
            let step_mode = cfg.sync_every_steps > 0;
            let due = if step_mode {
                Duration::ZERO
            } else {
                round_due_at(round, cfg.sync_every, cfg.time_limit)
            };
            loop {
                while let Ok(p) = done_rx.try_recv() {
                    accept(p, &mut records, &mut best);
                    in_eval -= 1;
                }
                // validation must keep up: with two rounds waiting for it, wait for one
                // (rounds slow down to the evaluator's pace instead of piling up models),
                // except for the final round at the time limit
                if in_eval >= 2 && clock.elapsed() < cfg.time_limit {
                    if let Ok(p) = done_rx.recv() {
                        accept(p, &mut records, &mut best);
                        in_eval -= 1;
                    }
                    continue;
                }
                let now = clock.elapsed();
                if now >= due {
                    break;
                }
                clock.sleep((due - now).min(Duration::from_millis(20)));
            }
            // the last round is the first one formed at or after the time limit, whether it
            // was scheduled there or the rounds before it ran late
            let mut stop = due >= cfg.time_limit || clock.elapsed() >= cfg.time_limit;
            coord.call_round(round);
            let contribs = coord.gather(round, round_timeout, &latest);
            let elapsed = clock.elapsed();
            stop |= elapsed >= cfg.time_limit;
            if contribs.is_empty() {
                // nobody left to average: every trainer is gone
                break;
            }
            let models: Vec<&[f32]> = contribs.iter().map(|c| c.params.as_slice()).collect();
            let w: Vec<f64> = contribs.iter().map(|c| weights[c.trainer]).collect();
            eval_pool.install(|| average_models(&models, &w, &mut current.data));
            if let Some(c) = corrector.as_deref_mut() {
                eval_pool.install(|| c.correct(round, &mut current));
            }
            latest = Arc::new(current.data.clone());
            let participants: Vec<usize> = contribs.iter().map(|c| c.trainer).collect();
            coord.reply(
                &participants,
                if stop {
                    Reply::Stop(latest.clone())
                } else {
                    Reply::Continue(latest.clone())
                },
            );
            let missing: Vec<usize> = (0..n).filter(|t| !participants.contains(t)).collect();
            let (ls, lc) = contribs.iter().fold((0f64, 0u64), |(s, c), x| {
                (s + x.report.loss_sum, c + x.report.loss_count)
            });
            for c in &contribs {
                last_steps[c.trainer] = step_offsets[c.trainer] + c.report.steps;
            }
            let record = RoundRecord {
                round,
                elapsed_s: elapsed.as_secs_f64(),
                participants,
                missing,
                steps: contribs.iter().map(|c| last_steps[c.trainer]).collect(),
                epochs: contribs.iter().map(|c| c.report.epochs).collect(),
                train_loss: if lc > 0 { ls / lc as f64 } else { f64::NAN },
                val: EvalResult::default(),
                eval_s: 0.0,
                is_best: false,
            };
            if job_tx
                .send(PendingRound {
                    record,
                    params: latest.clone(),
                })
                .is_ok()
            {
                in_eval += 1;
            }
            if stop || hook_err.borrow().is_some() {
                break;
            }
        }
        // tell anyone still waiting (e.g. a trainer that missed the last round) to stop
        let everyone: Vec<usize> = (0..n).filter(|&t| coord.is_alive(t)).collect();
        coord.reply(&everyone, Reply::Stop(latest.clone()));
        coord.call_round(u64::MAX);
        drop(job_tx);
        for p in done_rx.iter() {
            accept(p, &mut records, &mut best);
        }
        Ok(())
    })?;
    if let Some(e) = hook_err.into_inner() {
        return Err(e);
    }

    finish_run(
        model, prep, cfg, eval_pool, n, records, best, current, last_steps,
    )
}

/// Ends a run: tests the final and the best model and assembles the [`RunResult`] (shared
/// by the averaging coordinator and GGS).
///
/// # Errors
/// [`TrainError::AllTrainersFailed`] when no round was ever validated.
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish_run(
    model: &Model,
    prep: &Prepared,
    cfg: &TrainConfig,
    eval_pool: &rayon::ThreadPool,
    num_trainers: usize,
    records: Vec<RoundRecord>,
    best: Option<(u64, EvalResult, Arc<Vec<f32>>)>,
    current: ParamSet,
    last_steps: Vec<u64>,
) -> Result<RunResult, TrainError> {
    let Some((best_round, best_val, best_data)) = best else {
        return Err(TrainError::AllTrainersFailed);
    };
    let mut best_params = current.clone();
    best_params.data.copy_from_slice(&best_data);
    let final_val = records.last().map(|r| r.val.clone()).unwrap_or_default();
    let final_test = eval_pool.install(|| evaluate(model, &current, prep, Split::Test));
    let best_test = eval_pool.install(|| evaluate(model, &best_params, prep, Split::Test));
    let summary = Summary {
        method: cfg.method.to_string(),
        task: cfg.task.to_string(),
        num_trainers,
        rounds: records.len() as u64,
        train_time_s: records.last().map(|r| r.elapsed_s).unwrap_or(0.0),
        final_val,
        final_test,
        best_round,
        best_val,
        best_test,
        steps_per_trainer: last_steps,
        failed_trainers: Vec::new(),
        partition_hash: prep.partition_hash.clone(),
    };
    Ok(RunResult {
        rounds: records,
        summary,
        final_params: current,
        best_params,
    })
}
