//! GGS baseline: global-graph-sampling synchronous data parallelism (Zhu et al. 2023, arXiv
//! 2305.09887, Sec. 5, "GGS"; the usual DistDGL-style training without partition-local
//! sampling).
//!
//! Every trainer holds the **whole** training graph and a disjoint share of the training
//! examples ([`crate::data::share_examples`]). At every step each trainer computes the gradient of its own
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
use crate::clock::Clock;
use crate::cluster::{Contribution, Reply, TrainerEndpoint, TrainerReport};
use crate::config::TrainConfig;
use crate::method::{DataLayout, Exchange, ExchangeInputs, Schedule, TrainingMethod};
use crate::trainer::{Trainer, TrainerExit};
use std::sync::Arc;
use std::time::Duration;
use tma_nn::{Adam, ParamSet};

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
        // the step this exchange completes counts: the coordinator records it with the round
        let report = TrainerReport {
            steps: trainer.steps + 1,
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

/// The GGS coordinator's exchange: per step, the plain mean of the gradients of the trainers
/// that answered, plus `weight_decay * params`, clipped to `clip_norm` once any trainer has
/// passed `clip_from_epoch`; its own Adam steps the coordinator's model and the processed
/// gradient is the reply, so every trainer makes the same step. Fresh Adam moments after a
/// resume.
pub struct GradientSync {
    grads: ParamSet,
    adam: Adam,
    weight_decay: f32,
    clip_norm: f32,
    clip_from_epoch: u64,
    empty: Arc<Vec<f32>>,
}

impl GradientSync {
    /// The exchange for a model shaped like `init`, with `cfg`'s lr, weight decay and clipping.
    pub fn new(cfg: &TrainConfig, init: &ParamSet) -> GradientSync {
        GradientSync {
            grads: init.zeros_like(),
            adam: Adam::new(init.len(), cfg.lr),
            weight_decay: cfg.weight_decay,
            clip_norm: cfg.clip_norm,
            clip_from_epoch: cfg.clip_from_epoch as u64,
            empty: Arc::new(Vec::new()),
        }
    }
}

impl Exchange for GradientSync {
    fn schedule(&self) -> Schedule {
        Schedule::EveryStep
    }

    fn start(&mut self, _model: &ParamSet) {}

    fn combine(&mut self, contribs: &[Contribution], model: &mut ParamSet) -> Arc<Vec<f32>> {
        let g: Vec<&[f32]> = contribs.iter().map(|c| c.params.as_slice()).collect();
        let w = vec![1.0; g.len()];
        average_models(&g, &w, &mut self.grads.data);
        if self.weight_decay > 0.0 {
            for (gi, p) in self.grads.data.iter_mut().zip(&model.data) {
                *gi += self.weight_decay * p;
            }
        }
        let epochs = contribs.iter().map(|c| c.report.epochs).max().unwrap_or(0);
        if epochs + 1 >= self.clip_from_epoch {
            tma_nn::clip_grad_norm(&mut self.grads, self.clip_norm);
        }
        self.adam.step(model, &self.grads);
        Arc::new(self.grads.data.clone())
    }

    /// An empty payload: a late gradient is not applied, and the final stop carries nothing.
    fn idle_reply(&self) -> Arc<Vec<f32>> {
        self.empty.clone()
    }
}

/// The GGS method: whole graph everywhere, disjoint shares of the examples, gradients
/// averaged every step.
pub struct Ggs;

impl TrainingMethod for Ggs {
    fn layout(&self, _cfg: &TrainConfig) -> DataLayout {
        DataLayout::SharedExamples
    }

    fn run_trainer(
        &self,
        trainer: Trainer,
        endpoint: &mut dyn TrainerEndpoint,
        clock: Arc<dyn Clock>,
        fail_at: Option<Duration>,
    ) -> TrainerExit {
        ggs_worker(trainer, endpoint, clock, fail_at, |_, _| {})
    }

    fn exchange<'a>(&self, inputs: ExchangeInputs<'a>) -> Box<dyn Exchange + 'a> {
        Box::new(GradientSync::new(inputs.cfg, inputs.init))
    }
}
