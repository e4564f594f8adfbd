//! The plateau hold: when the validation metric has fallen clearly below its best for
//! `plateau_patience` validations in a row, the coordinator sends the trainers the best model
//! back and from then on applies only a fraction of each round's update (the server step,
//! halved at every such fall), so the model stays near its best instead of wandering off.
//!
//! It is the model-averaging counterpart of PyTorch's `ReduceLROnPlateau` with restoring the
//! best weights (Keras' `EarlyStopping(restore_best_weights=True)`): the trainers never talk
//! and their optimizers are unchanged, the coordinator scales the step it takes from the last
//! model it sent towards the round's average, `m <- a + s * (avg - a)` (the server learning
//! rate of federated averaging; Reddi et al. 2021, "Adaptive Federated Optimization", Alg. 1
//! with plain SGD on the server). `s = 1` is the paper's plain mean, which every run keeps
//! until its first fall. docs/decisions/0037-plateau-hold.md has the measurements.

use crate::evaluation::record::RoundRecord;

/// How far below the best a validation must be to count as a fall: `PLATEAU_DROP` of the best
/// value (5%). Noise between validations of a model that still learns stays well under it
/// (a 30M-arc link run's dips: 0.2%); an over-fitting run falls by 10-40%.
pub const PLATEAU_DROP: f64 = 0.05;

/// The factor the server step is multiplied by at every fall (`ReduceLROnPlateau`'s
/// `factor`).
pub const PLATEAU_FACTOR: f32 = 0.5;

/// The coordinator's plateau state ([`PlateauHold::adjust`]).
#[derive(Debug)]
pub struct PlateauHold {
    /// Falls in a row that trigger a hold; 0 = never (the paper's plain mean throughout).
    patience: usize,
    /// The share of a round's update applied (1 until the first fall).
    scale: f32,
    /// Training seconds of the last hold: only validations of models formed after it count
    /// towards the next.
    held_at: f64,
    /// The model sent to the trainers at the last round, once a hold has happened.
    anchor: Option<Vec<f32>>,
}

/// What [`PlateauHold::adjust`] did to a round's model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Held {
    /// Nothing: the round's average stands (no fall yet, or the hold is off).
    Unchanged,
    /// The best model (of round `round`, validated `value`) replaced the round's average; from
    /// now on each round applies `scale` of its update.
    Restored {
        /// The best model's round.
        round: u64,
        /// Its validation value.
        value: f64,
        /// The server step from now on.
        scale: f32,
    },
    /// `scale` of the round's update was applied.
    Scaled(f32),
}

impl PlateauHold {
    /// A hold after `patience` falls in a row (0 = off).
    pub fn new(patience: u32) -> Self {
        PlateauHold {
            patience: patience as usize,
            scale: 1.0,
            held_at: f64::NEG_INFINITY,
            anchor: None,
        }
    }

    /// The hold of a resumed run: `state` (its server step and the training seconds of its
    /// last restore; None: it kept the plain mean) from the model the run resumes from,
    /// `anchor`.
    /// A resumed run that turned the hold off (`patience` 0) goes back to the plain mean.
    pub fn resumed(patience: u32, state: Option<(f32, f64)>, anchor: &[f32]) -> Self {
        let mut h = PlateauHold::new(patience);
        if let (Some((scale, held_at)), true) = (state, patience > 0) {
            h.scale = scale;
            h.held_at = held_at;
            h.anchor = Some(anchor.to_vec());
        }
        h
    }

    /// The server step now (1 until the first fall).
    pub fn scale(&self) -> f32 {
        self.scale
    }

    /// Applies the server step to `model`, the trainers' mean formed between rounds (a
    /// validation check), without moving the anchor: the model a round formed now would give.
    /// Returns the step applied; `None` (model unchanged) before the first hold.
    pub fn preview(&self, model: &mut [f32]) -> Option<f32> {
        let anchor = self.anchor.as_ref()?;
        let s = self.scale;
        for (m, a) in model.iter_mut().zip(anchor) {
            *m = *a + s * (*m - *a);
        }
        Some(s)
    }

    /// Whether the last `patience` validations of models formed after the last hold (rounds
    /// and checks, in `records`' order) all lie more than [`PLATEAU_DROP`] of `best` below it.
    /// A validation whose value is undefined (a diverged model: NaN) counts as a fall;
    /// rounds recorded without validation (no metric) do not count.
    pub fn fell(&self, records: &[RoundRecord], best: f64) -> bool {
        if self.patience == 0 || !best.is_finite() || best <= 0.0 {
            return false;
        }
        let floor = best * (1.0 - PLATEAU_DROP);
        let recent: Vec<f64> = records
            .iter()
            .rev()
            .filter(|r| !r.val.metric.is_empty() && r.elapsed_s > self.held_at)
            .take(self.patience)
            .map(|r| r.val.value)
            .collect();
        recent.len() == self.patience && recent.iter().all(|&v| v.is_nan() || v < floor)
    }

    /// Adjusts the round just averaged (`model`, formed at `elapsed_s` training seconds):
    /// restores `best` (round, value, parameters) when the validations [`PlateauHold::fell`],
    /// else applies the server step to the update from the model sent last round. Returns
    /// what it did; `model` holds the model to send.
    pub fn adjust(
        &mut self,
        model: &mut [f32],
        elapsed_s: f64,
        records: &[RoundRecord],
        best: Option<(u64, f64, &[f32])>,
    ) -> Held {
        if let Some((round, value, params)) = best {
            if params.len() == model.len() && self.fell(records, value) {
                model.copy_from_slice(params);
                self.scale *= PLATEAU_FACTOR;
                self.held_at = elapsed_s;
                self.anchor = Some(params.to_vec());
                return Held::Restored {
                    round,
                    value,
                    scale: self.scale,
                };
            }
        }
        let Some(anchor) = self.anchor.as_mut() else {
            return Held::Unchanged;
        };
        let s = self.scale;
        for (m, a) in model.iter_mut().zip(anchor.iter_mut()) {
            *m = *a + s * (*m - *a);
            *a = *m;
        }
        Held::Scaled(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evaluation::eval::EvalResult;

    fn rec(elapsed_s: f64, value: f64) -> RoundRecord {
        RoundRecord {
            elapsed_s,
            participants: vec![0],
            steps: vec![1],
            epochs: vec![0],
            train_loss: 0.5,
            val: EvalResult {
                metric: "mrr".into(),
                value,
                ..EvalResult::default()
            },
            eval_s: 0.1,
            eval_cpu_s: 0.1,
            ..RoundRecord::default()
        }
    }

    /// A round recorded without validation (`--eval-every`, the validation share).
    fn unvalidated(elapsed_s: f64) -> RoundRecord {
        RoundRecord {
            val: EvalResult::default(),
            ..rec(elapsed_s, f64::NAN)
        }
    }

    #[test]
    fn a_fall_needs_patience_validations_more_than_five_percent_below_the_best() {
        let h = PlateauHold::new(3);
        // best 0.20: the floor is 0.19
        let falls = [
            rec(1.0, 0.20),
            rec(2.0, 0.18),
            rec(3.0, 0.17),
            rec(4.0, 0.189),
        ];
        assert!(h.fell(&falls, 0.20));
        // one of the last three within 5%: no fall
        let near = [
            rec(1.0, 0.20),
            rec(2.0, 0.18),
            rec(3.0, 0.191),
            rec(4.0, 0.17),
        ];
        assert!(!h.fell(&near, 0.20));
        // unvalidated rounds do not count, either way
        let gaps = [
            rec(1.0, 0.20),
            rec(2.0, 0.18),
            unvalidated(2.5),
            rec(3.0, 0.17),
            unvalidated(3.5),
            rec(4.0, 0.18),
        ];
        assert!(h.fell(&gaps, 0.20));
        // a diverged model (validated, undefined value) is a fall
        let diverged = [
            rec(1.0, 0.20),
            rec(2.0, f64::NAN),
            rec(3.0, 0.1),
            rec(4.0, f64::NAN),
        ];
        assert!(h.fell(&diverged, 0.20));
        // fewer validations than the patience: no fall
        assert!(!h.fell(&falls[2..], 0.20));
        // off
        assert!(!PlateauHold::new(0).fell(&falls, 0.20));
    }

    #[test]
    fn a_hold_restores_the_best_then_scales_every_update_by_the_halved_step() {
        let mut h = PlateauHold::new(2);
        let best = vec![1.0f32, 2.0];
        let records = vec![rec(1.0, 0.5), rec(2.0, 0.4), rec(3.0, 0.3)];
        // no fall yet with one validation: unchanged
        let mut m = vec![9.0f32, 9.0];
        assert_eq!(
            h.adjust(&mut m, 1.5, &records[..2], Some((1, 0.5, &best))),
            Held::Unchanged
        );
        assert_eq!(m, vec![9.0, 9.0]);
        // two falls (0.4, 0.3 < 0.475): the best comes back, step 0.5
        let mut m = vec![9.0f32, 9.0];
        let held = h.adjust(&mut m, 3.5, &records, Some((1, 0.5, &best)));
        assert_eq!(
            held,
            Held::Restored {
                round: 1,
                value: 0.5,
                scale: 0.5
            }
        );
        assert_eq!(m, best);
        // the next round's average (5, 6) moves the model half way from the best: (3, 4)
        let mut m = vec![5.0f32, 6.0];
        assert_eq!(
            h.adjust(&mut m, 4.5, &records, Some((1, 0.5, &best))),
            Held::Scaled(0.5)
        );
        assert_eq!(m, vec![3.0, 4.0]);
        // a check between rounds sees the same step, and leaves the anchor where it was
        let mut c = vec![7.0f32, 4.0];
        assert_eq!(h.preview(&mut c), Some(0.5));
        assert_eq!(c, vec![5.0, 4.0]);
        assert_eq!(PlateauHold::new(2).preview(&mut c), None);
        assert_eq!(c, vec![5.0, 4.0]);
        // and the one after from there: (3, 4) + 0.5 * ((7, 4) - (3, 4)) = (5, 4)
        let mut m = vec![7.0f32, 4.0];
        h.adjust(&mut m, 5.5, &records, Some((1, 0.5, &best)));
        assert_eq!(m, vec![5.0, 4.0]);
        // the validations before the hold no longer count: two new falls are needed
        let mut later = records.clone();
        later.push(rec(4.5, 0.2));
        let mut m = vec![5.0f32, 4.0];
        assert_eq!(
            h.adjust(&mut m, 6.5, &later, Some((1, 0.5, &best))),
            Held::Scaled(0.5)
        );
        later.push(rec(5.5, 0.1));
        let mut m = vec![5.0f32, 4.0];
        let held = h.adjust(&mut m, 7.5, &later, Some((1, 0.5, &best)));
        assert_eq!(
            held,
            Held::Restored {
                round: 1,
                value: 0.5,
                scale: 0.25
            }
        );
        assert_eq!(h.scale(), 0.25);
    }

    #[test]
    fn a_resumed_hold_keeps_its_step_unless_the_resume_turns_it_off() {
        let anchor = [1.0f32, 1.0];
        let h = PlateauHold::resumed(3, Some((0.25, 10.0)), &anchor);
        assert_eq!(h.scale(), 0.25);
        let mut m = [5.0f32, 1.0];
        assert_eq!(h.preview(&mut m), Some(0.25));
        assert_eq!(m, [2.0, 1.0]);
        // regression: resumed with --plateau-patience 0, the halved step went on silently
        let off = PlateauHold::resumed(0, Some((0.25, 10.0)), &anchor);
        assert_eq!(off.scale(), 1.0);
        assert_eq!(off.preview(&mut m), None);
    }
}
