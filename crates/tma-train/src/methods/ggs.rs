//! GGS baseline: global-graph-sampling synchronous data parallelism (Zhu et al. 2023, arXiv
//! 2305.09887, Sec. 5, "GGS"; the usual DistDGL-style training without partition-local
//! sampling).
//!
//! Every trainer holds the **whole** training graph and a disjoint share of the training
//! examples ([`crate::data::share_examples`]). At every step each trainer computes the gradient of its own
//! mini-batch and joins "round" = step over the ordinary transport, sending the gradient instead
//! of its parameters. The coordinator averages the gradients of the trainers that answered,
//! adds weight decay and clips exactly as a single trainer would, makes the Adam step on its own
//! copy and replies with the stepped parameters, which every trainer takes: all parameters are
//! identical by construction (one barrier per step). Every `sync_every` of wall-clock time the
//! coordinator's copy is validated; those evaluation points are the run's rounds.
//!
//! A trainer that fails is absent from the next gradient mean (its endpoint is dead, so the
//! barrier does not wait for it); the survivors go on. A trainer that stalls misses steps
//! instead of delaying them; when it answers again it is sent the current parameters (the
//! transport's catch-up, [`crate::engines::cluster::Roster`]) and takes part from the next step, in sync
//! with the others (docs/decisions/0007-trainer-failures.md).

use crate::clock::Clock;
use crate::config::TrainConfig;
use crate::engines::cluster::{Contribution, Reply, TrainerEndpoint, TrainerReport};
use crate::engines::method::{
    DataLayout, Exchange, ExchangeInputs, MethodInfo, Schedule, TrainingMethod,
};
use crate::engines::trainer::{Trainer, TrainerExit};
use crate::methods::averaging::average_models;
use std::sync::Arc;
use std::time::Duration;
use tma_nn::{Adam, ParamSet};

/// A GGS trainer's loop: gradient of its next mini-batch, join step `s` with it, take the
/// parameters the coordinator returns (the step made there), repeat until told to stop (the
/// stop reply carries the final parameters). A reply to a late contribution carries the
/// current parameters: the trainer resyncs on them (and counts that exchange as a step). A
/// reply to an early one (an exchange not called yet) carries them too: the trainer takes
/// them and joins that exchange again, never one past it.
/// `after_step(s, params)` is called after every reply taken (tests check identity there).
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
        let join = (step + 1).max(endpoint.due_round().min(u64::MAX - 1));
        // the step this exchange completes counts: the coordinator records it with the round
        let report = TrainerReport {
            steps: trainer.steps + 1,
            epochs: trainer.epochs,
            loss_sum: if loss.is_finite() { loss as f64 } else { 0.0 },
            loss_count: loss.is_finite() as u64,
        };
        match endpoint.join_round(join, &trainer.grads().data, report) {
            // an answer to an exchange the coordinator has not called yet (a contribution that
            // arrived while it was between exchanges is answered at once with its current
            // model) is no step: the trainer takes that model and joins the same exchange
            // again. Counted as one, the trainer ran ahead of the exchanges for good and the
            // coordinator waited for an exchange nobody would join (docs/results-scale.md,
            // the citation2-like llcg/ggs row)
            Some(Reply::Continue(p))
                if p.len() == trainer.params().len() && endpoint.due_round() < join =>
            {
                trainer.set_params(&p);
            }
            Some(Reply::Continue(p)) if p.len() == trainer.params().len() => {
                trainer.take_step(&p);
                step = join;
                after_step(step, trainer.params());
            }
            Some(Reply::Continue(_)) => {}
            Some(Reply::Stop(p)) => {
                if p.len() == trainer.params().len() {
                    trainer.take_step(&p);
                    after_step(join, trainer.params());
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
/// resume. The reply is the stepped model itself, so a trainer that fell behind is resynced
/// with the same message ([`Exchange::idle_reply`]: the current model).
pub struct GradientSync {
    grads: ParamSet,
    adam: Adam,
    weight_decay: f32,
    clip_norm: f32,
    clip_from_epoch: u64,
    lr: f32,
    warmup_steps: u64,
    latest: Arc<Vec<f32>>,
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
            lr: cfg.lr,
            warmup_steps: cfg.warmup_steps,
            latest: Arc::new(init.data.clone()),
        }
    }
}

impl Exchange for GradientSync {
    fn schedule(&self) -> Schedule {
        Schedule::EveryStep
    }

    fn start(&mut self, model: &ParamSet) {
        self.latest = Arc::new(model.data.clone());
    }

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
        self.adam.lr = crate::config::warmup_lr(self.lr, self.warmup_steps, self.adam.steps() + 1);
        self.adam.step(model, &self.grads);
        self.latest = Arc::new(model.data.clone());
        self.latest.clone()
    }

    /// The current model: a trainer whose gradient came late (it stalled) takes it and is in
    /// step again; at the end of the run every trainer gets the final model.
    fn idle_reply(&self) -> Arc<Vec<f32>> {
        self.latest.clone()
    }
}

/// The GGS method: whole graph everywhere, disjoint shares of the examples, gradients
/// averaged every step.
pub struct Ggs;

/// GGS in the method registry (`crate::methods`).
pub const GGS: Ggs = Ggs;

/// GGS's declaration: gradients averaged every step, no model averaged.
const INFO: MethodInfo = MethodInfo {
    name: "ggs",
    help: "synchronous data parallel, whole-graph sampling",
    many_trainers: true,
    averages_models: false,
    no_average_weight: Some("averages gradients uniformly"),
    no_sync_ramp: Some(
        "averages no models (it synchronizes gradients every step; its rounds are validation points)",
    ),
    no_step_schedule: Some("it synchronizes gradients every step"),
    no_validation_checks: Some("it averages gradients every step"),
    options: &[],
};

impl TrainingMethod for Ggs {
    fn info(&self) -> &MethodInfo {
        &INFO
    }

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
