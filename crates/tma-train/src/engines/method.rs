//! The method abstraction: what distinguishes RandomTMA, SuperTMA, PSGD-PA, LLCG, GGS and
//! centralized training, as three choices the rest of the crate is written against.
//!
//! * [`DataLayout`] (defined with the data preparation that reads it,
//!   [`crate::data::prepare_with`]): how the training examples reach the trainers.
//! * [`TrainingMethod::run_trainer`]: a trainer's loop between exchanges.
//! * [`Exchange`]: what the coordinator does with the trainers' contributions (read by
//!   [`crate::engines::coordinator::coordinate`]).
//!
//! The implementations live in [`crate::methods::averaging`] (time-based model averaging, with an
//! optional [`crate::methods::averaging::Corrector`]), [`crate::methods::llcg`] and [`crate::methods::ggs`]; only
//! [`crate::methods`] maps a [`crate::config::Method`] name to one of them, so the round loop
//! and the data preparation import no baseline.

use crate::clock::Clock;
use crate::config::TrainConfig;
pub use crate::data::DataLayout;
use crate::data::Prepared;
use crate::engines::cluster::{Contribution, TrainerEndpoint};
use crate::engines::trainer::{Trainer, TrainerExit};
use crate::evaluation::record::Correction;
use std::sync::Arc;
use std::time::Duration;
use tma_nn::{Model, ParamSet};

/// When the coordinator exchanges with the trainers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// One exchange per round, at the round's due time (`k * sync_every`, or after every
    /// `sync_every_steps` steps): model averaging. Every exchange is a validated round.
    PerRound,
    /// Exchanges back to back (one per optimizer step); a round is the first exchange at or
    /// after its due time: synchronous gradient averaging.
    EveryStep,
}

/// The coordinator's side of a method: turns the contributions of one exchange into the
/// coordinator's model and the payload sent back to the trainers that took part.
pub trait Exchange: Send {
    /// When exchanges happen.
    fn schedule(&self) -> Schedule;
    /// Called once before the first exchange with the model the trainers start from.
    fn start(&mut self, model: &ParamSet);
    /// Combines the contributions of one exchange (never empty) into `model` and returns the
    /// payload for its participants. Runs inside the coordinator's thread pool.
    fn combine(&mut self, contribs: &[Contribution], model: &mut ParamSet) -> Arc<Vec<f32>>;
    /// The payload for a trainer that answers an earlier exchange late, and for every trainer
    /// at the end of the run.
    fn idle_reply(&self) -> Arc<Vec<f32>>;
    /// For a validation check between rounds (`--val-check-interval`): the model this
    /// exchange would form from `models` (`(trainer, parameters)`, never empty) if a round
    /// were formed now, written into `out` without changing any state; `false` when the method
    /// has no such model between its exchanges (gradient averaging, LLCG's correction on the
    /// coordinator), the default.
    fn check_model(&self, _models: &[(usize, &[f32])], _out: &mut ParamSet) -> bool {
        false
    }
    /// Whether the payload is the coordinator's model (model averaging), which the plateau
    /// hold may then change ([`Exchange::replace`]); `false` (the default) for an exchange
    /// that sends something else (gradient averaging).
    fn sends_the_model(&self) -> bool {
        false
    }
    /// Makes `model` the payload of the exchange just combined and of late answers
    /// ([`Exchange::idle_reply`]) and returns it; only called where
    /// [`Exchange::sends_the_model`]. The default returns `model` as is.
    fn replace(&mut self, model: &ParamSet) -> Arc<Vec<f32>> {
        Arc::new(model.data.clone())
    }
    /// What a correction on the coordinator (LLCG's global steps) did at the exchange just
    /// combined, for the round's record; `None` (the default) for a method without one.
    fn correction(&self) -> Option<Correction> {
        None
    }
}

/// What a method's [`Exchange`] may need from the run.
pub struct ExchangeInputs<'a> {
    /// The coordinator's data (LLCG corrects on its whole training graph).
    pub prep: &'a Prepared,
    /// The run's configuration.
    pub cfg: &'a TrainConfig,
    /// The model.
    pub model: &'a Model,
    /// The parameters every trainer starts from.
    pub init: &'a ParamSet,
    /// Averaging weight of each trainer (see [`crate::engines::average_weights`]).
    pub weights: Vec<f64>,
}

/// What a method declares about itself: its name, its one-line help and what it supports.
/// Every decision that depends on *which* method a run uses (options refused or ignored,
/// the averaging ramp, the step schedule, validation checks, idle trainers, the `--method`
/// help and the lists in messages) reads this declaration ([`TrainingMethod::info`]) through
/// the registry ([`crate::methods`]), never the method's name. The data layout is declared by
/// [`TrainingMethod::layout`].
#[derive(Clone, Copy, Debug)]
pub struct MethodInfo {
    /// The name on the command line, in config files and outputs (kebab-case, `random-tma`).
    pub name: &'static str,
    /// One line for `--method` help: what the method does (`"METIS parts + averaging"`).
    pub help: &'static str,
    /// Whether it trains `num_trainers` trainers (`false`: one trainer, whatever is asked;
    /// `--trainers` and `--drop-parts` then do not apply).
    pub many_trainers: bool,
    /// Whether it combines trainers by averaging their models, so a trainer without training
    /// examples can join rounds with weight 0 (`false`: it averages something else, and every
    /// trainer must have examples).
    pub averages_models: bool,
    /// Why `--average-weight` does not apply (`None`: it weighs the trainers' models by it).
    pub no_average_weight: Option<&'static str>,
    /// Why the averaging ramp (`sync_ramp`) does not apply (`None`: its first rounds follow
    /// the ramp, docs/decisions/0015-averaging-ramp.md).
    pub no_sync_ramp: Option<&'static str>,
    /// Why the step-count schedule (`sync_every_steps`) does not apply (`None`: it does).
    pub no_step_schedule: Option<&'static str>,
    /// Why validation checks between rounds (`val_check_interval`) do not apply (`None`: they
    /// do; the method's exchange forms a model between rounds, [`Exchange::check_model`]).
    pub no_validation_checks: Option<&'static str>,
    /// Options only this method (among the registered ones) uses, with what they do for it:
    /// `("llcg_steps", "takes global correction steps")`. A given option that no chosen method
    /// declares is said to be ignored ([`crate::options::unused_warnings`]).
    pub options: &'static [(&'static str, &'static str)],
}

impl MethodInfo {
    /// The declaration of a model-averaging method named `name`: many trainers, weighted
    /// averages, the ramp, the step schedule and validation checks, no option of its own.
    pub const fn averaging(name: &'static str, help: &'static str) -> MethodInfo {
        MethodInfo {
            name,
            help,
            many_trainers: true,
            averages_models: true,
            no_average_weight: None,
            no_sync_ramp: None,
            no_step_schedule: None,
            no_validation_checks: None,
            options: &[],
        }
    }

    /// The averaging ramp a run of this method uses under `cfg`: `cfg.sync_ramp`, or 0 where
    /// the method has none ([`MethodInfo::no_sync_ramp`]) or on the step-count schedule
    /// (`sync_every_steps`) ([`TrainConfig::effective_sync_ramp`]).
    pub fn sync_ramp(&self, cfg: &TrainConfig) -> u32 {
        if self.no_sync_ramp.is_some() || cfg.sync_every_steps > 0 {
            0
        } else {
            cfg.sync_ramp
        }
    }
}

/// A training method: its declaration, data layout, trainer loop, coordinator exchange.
pub trait TrainingMethod: Sync {
    /// What the method is and supports (name, help, capabilities).
    fn info(&self) -> &MethodInfo;
    /// How the training examples reach the trainers under `cfg`.
    fn layout(&self, cfg: &TrainConfig) -> DataLayout;
    /// A trainer's loop: trains, joins exchanges, returns when told to stop, when the
    /// coordinator is gone, or at `fail_at` (failure experiment). Default: the model-averaging
    /// loop ([`Trainer::run`]: local steps, parameters sent at every round).
    fn run_trainer(
        &self,
        trainer: Trainer,
        endpoint: &mut dyn TrainerEndpoint,
        clock: Arc<dyn Clock>,
        fail_at: Option<Duration>,
    ) -> TrainerExit {
        trainer.run(endpoint, clock, fail_at)
    }
    /// The coordinator's exchange for one run.
    fn exchange<'a>(&self, inputs: ExchangeInputs<'a>) -> Box<dyn Exchange + 'a>;
}
