//! The checks and derived values of a [`TrainConfig`] that depend on its method: they read
//! the method's declaration ([`crate::engines::method::MethodInfo`], through the registry in [`crate::methods`]),
//! never its name. Kept apart from `config/mod.rs` (the configuration's data, defaults and names),
//! which the methods' implementations read, so the registry sits above both.

use crate::config::{Metric, TargetKind, Task, TrainConfig};
use crate::Method;

impl TrainConfig {
    /// The averaging ramp this run uses: `sync_ramp`, except 0 for a method that declares no
    /// ramp ([`crate::engines::method::MethodInfo::no_sync_ramp`]: ggs, which synchronizes gradients every step; its
    /// rounds are validation points only) and on the step-count schedule
    /// (`sync_every_steps`), which have none.
    pub fn effective_sync_ramp(&self) -> u32 {
        self.method.info().sync_ramp(self)
    }

    /// Number of trainers that actually train: `num_trainers`, or 1 for a method with one
    /// trainer ([`crate::engines::method::MethodInfo::many_trainers`]: centralized).
    pub fn effective_trainers(&self) -> usize {
        if self.method.info().many_trainers {
            self.num_trainers
        } else {
            1
        }
    }

    /// Checks values a user can get wrong; the message names the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.num_trainers == 0 {
            return Err("trainers must be >= 1".into());
        }
        if self.sync_every.is_zero() {
            return Err("sync-every must be > 0".into());
        }
        if self.time_limit.is_zero() {
            return Err("time-limit must be > 0".into());
        }
        if self.round_timeout.is_zero() {
            return Err("round-timeout must be > 0".into());
        }
        if self.num_layers == 0 {
            return Err("layers must be >= 1".into());
        }
        if self.eval_every == 0 {
            return Err("eval-every must be >= 1 (1 = validate every round)".into());
        }
        if self.eval_max_nodes == 0 {
            return Err("eval-max-nodes must be >= 1".into());
        }
        if self.eval_memory < 16 << 20 {
            // below this, evaluation runs in so many tiny chunks that a round never ends
            return Err(format!(
                "eval-memory must be at least 16MiB (got {} bytes): smaller budgets cut evaluation into so many chunks that validation takes far longer than training",
                self.eval_memory
            ));
        }
        if !self.eval_fanouts.is_empty() && self.eval_fanouts.len() != self.num_layers {
            return Err(format!(
                "eval-fanouts has {} entries but the model has {} layers (one fanout per layer)",
                self.eval_fanouts.len(),
                self.num_layers
            ));
        }
        if self.fanouts.len() != self.num_layers {
            return Err(format!(
                "fanouts has {} entries but the model has {} layers (one fanout per layer)",
                self.fanouts.len(),
                self.num_layers
            ));
        }
        if self.hidden == 0 || self.batch_size == 0 {
            return Err("hidden and batch-size must be >= 1".into());
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err("dropout must be in [0, 1)".into());
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err("lr must be > 0 and finite".into());
        }
        if self.num_neg == 0 || self.eval_num_neg == 0 || self.eval_max_edges == 0 {
            return Err("num-neg, eval-num-neg and eval-max-edges must be >= 1".into());
        }
        if !(self.clip_norm.is_finite() && self.clip_norm > 0.0) {
            // (an infinite norm came from Python or a config file as 1e39 and above, which the
            // CLI's flag refused: one rule for every front end)
            return Err("clip-norm must be > 0 and finite".into());
        }
        if self.threads > 4096 {
            return Err(format!("threads {} is not a thread count", self.threads));
        }
        if self.seed > i64::MAX as u64 {
            // (the CLI refused it in TOML's words, naming no option)
            return Err(format!(
                "seed {} is not below 2^63: a run directory records it in config.toml, whose integers are signed 64-bit",
                self.seed
            ));
        }
        let info = self.method.info();
        if !info.many_trainers && self.drop_parts > 0 {
            return Err(format!(
                "drop-parts {} does not apply to method {} (one trainer on the whole graph, no parts to drop); set drop-parts to 0 or choose a partitioned method",
                self.drop_parts, info.name
            ));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err("weight-decay must be >= 0 and finite".into());
        }
        if self.val_frac.is_nan() || self.val_frac < 0.0 {
            return Err("val-frac must be >= 0".into());
        }
        if self.test_frac.is_nan() || self.test_frac < 0.0 {
            return Err("test-frac must be >= 0".into());
        }
        if self.val_frac + self.test_frac >= 1.0 {
            return Err("val-frac + test-frac must be in [0, 1)".into());
        }
        if crate::methods::training_method(self.method)
            .layout(self)
            .uses_super_nodes()
            && self.super_nodes < self.num_trainers + self.drop_parts
        {
            return Err(format!(
                "super-nodes ({}) must be >= trainers + drop-parts ({})",
                self.super_nodes,
                self.num_trainers + self.drop_parts
            ));
        }
        // the encoder's own options, checked by the encoder (e.g. GAT's heads against hidden)
        self.model_options()?;
        match (self.task, self.metric) {
            (Task::Link, Metric::Auto | Metric::Mrr | Metric::HitsAt(_)) => {}
            (Task::Link, m) => {
                return Err(format!(
                    "metric {m} does not fit link prediction; use one of: auto, mrr, hits@K"
                ))
            }
            (Task::Node, m @ (Metric::Mrr | Metric::HitsAt(_))) => {
                return Err(format!(
                    "metric {m} is a link-prediction metric; node classification uses auto, accuracy, macro_f1, roc_auc (2 classes) or micro_f1 (multi-label)"
                ))
            }
            (Task::Node, _) => {}
        }
        if let (Task::Link, Metric::HitsAt(_)) = (self.task, self.metric) {
            self.metric.fits(TargetKind::Link, self.eval_num_neg)?;
        }
        if !self.val_check_interval.is_zero() {
            if self.val_check_interval >= self.sync_every {
                return Err(format!(
                    "val-check-interval ({:?}) must be shorter than sync-every ({:?}): checks validate the trainers' mean between averaging rounds",
                    self.val_check_interval, self.sync_every
                ));
            }
            if self.sync_every_steps > 0 {
                return Err("val-check-interval needs the wall-clock schedule; it does not combine with sync-every-steps".into());
            }
        }
        if self.sync_ramp > crate::clock::MAX_SYNC_RAMP {
            return Err(format!(
                "sync-ramp must be at most {} (its spans are sync-every / sync-ramp), got {}",
                crate::clock::MAX_SYNC_RAMP,
                self.sync_ramp
            ));
        }
        self.check_capabilities(info)
    }

    /// The refusals of [`TrainConfig::validate`] that the method's declaration decides:
    /// validation checks and the step schedule where it has none.
    fn check_capabilities(&self, info: &crate::engines::method::MethodInfo) -> Result<(), String> {
        if let (Some(why), false) = (info.no_validation_checks, self.val_check_interval.is_zero()) {
            let with: Vec<&str> = Method::ALL
                .iter()
                .filter(|m| m.info().no_validation_checks.is_none())
                .map(|m| m.as_str())
                .collect();
            return Err(format!(
                "val-check-interval does not apply to {} (no model between its exchanges: {why}); use it with {}",
                info.name,
                crate::methods::or_list(&with)
            ));
        }
        if let (Some(why), true) = (info.no_step_schedule, self.sync_every_steps > 0) {
            return Err(format!(
                "sync-every-steps does not apply to {} ({why})",
                info.name
            ));
        }
        Ok(())
    }
}
