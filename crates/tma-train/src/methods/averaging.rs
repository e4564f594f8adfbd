//! Model averaging (the "A" in TMA): the coordinator's operator over trainers' parameters,
//! and the method built on it (RandomTMA, SuperTMA, PSGD-PA, centralized; LLCG adds a
//! [`Corrector`]).
//!
//! Source: Zhu et al. 2023 (arXiv 2305.09887), Sec. 3: every `sync_every` of wall-clock time
//! the parameters of all participating trainers are replaced by their arithmetic mean.
//! Adam moments are neither averaged nor reset. Weighting by nodes/edges is an option.

use crate::config::TrainConfig;
use crate::engines::cluster::Contribution;
use crate::engines::method::{
    DataLayout, Exchange, ExchangeInputs, MethodInfo, Schedule, TrainingMethod,
};
use crate::evaluation::record::Correction;
use std::sync::Arc;
use tma_nn::ParamSet;
use tma_partition::PartitionMethod;

/// Changes the averaged model before it is sent back to the trainers (LLCG's global
/// correction steps on the full graph).
pub trait Corrector: Send {
    /// Corrects `params` (the mean of the round just formed) in place and returns what it
    /// did: its steps and their mean mini-batch loss (`secs` is filled in by the caller).
    fn correct(&mut self, params: &mut ParamSet) -> Correction;
}

impl<C: Corrector + ?Sized> Corrector for &mut C {
    fn correct(&mut self, params: &mut ParamSet) -> Correction {
        (**self).correct(params)
    }
}

/// The coordinator's side of time-based model averaging: the weighted mean of the
/// participants' parameters (normalized over those present), then the optional correction.
pub struct ModelAveraging<'a> {
    weights: Vec<f64>,
    corrector: Option<Box<dyn Corrector + 'a>>,
    latest: Arc<Vec<f32>>,
    /// What the corrector did at the last exchange (none without a corrector).
    last_correction: Option<Correction>,
}

impl<'a> ModelAveraging<'a> {
    /// Averaging with `weights[t]` for trainer `t` (all 1: the paper's plain mean).
    pub fn new(weights: Vec<f64>, corrector: Option<Box<dyn Corrector + 'a>>) -> Self {
        ModelAveraging {
            weights,
            corrector,
            latest: Arc::new(Vec::new()),
            last_correction: None,
        }
    }
}

impl Exchange for ModelAveraging<'_> {
    fn schedule(&self) -> Schedule {
        Schedule::PerRound
    }

    fn start(&mut self, model: &ParamSet) {
        self.latest = Arc::new(model.data.clone());
    }

    fn combine(&mut self, contribs: &[Contribution], model: &mut ParamSet) -> Arc<Vec<f32>> {
        let models: Vec<&[f32]> = contribs.iter().map(|c| c.params.as_slice()).collect();
        let w: Vec<f64> = contribs.iter().map(|c| self.weights[c.trainer]).collect();
        // only trainers without training examples (weight 0) took part: the model stays the
        // last average, which is all they hold
        if w.iter().any(|&x| x > 0.0) {
            average_models(&models, &w, &mut model.data);
        }
        if let Some(c) = self.corrector.as_deref_mut() {
            let t = std::time::Instant::now();
            let mut done = c.correct(model);
            done.secs = t.elapsed().as_secs_f64();
            // `--llcg-steps 0`: no correction, nothing to record
            self.last_correction = (done.steps > 0).then_some(done);
        }
        self.latest = Arc::new(model.data.clone());
        self.latest.clone()
    }

    fn idle_reply(&self) -> Arc<Vec<f32>> {
        self.latest.clone()
    }

    fn sends_the_model(&self) -> bool {
        true
    }

    fn correction(&self) -> Option<Correction> {
        self.last_correction
    }

    fn replace(&mut self, model: &ParamSet) -> Arc<Vec<f32>> {
        self.latest = Arc::new(model.data.clone());
        self.latest.clone()
    }

    /// The weighted mean a round formed now would give (no correction: a method with a
    /// corrector, LLCG, has no check model).
    fn check_model(&self, models: &[(usize, &[f32])], out: &mut ParamSet) -> bool {
        if self.corrector.is_some() {
            return false;
        }
        let w: Vec<f64> = models.iter().map(|&(t, _)| self.weights[t]).collect();
        if !w.iter().any(|&x| x > 0.0) {
            return false;
        }
        let m: Vec<&[f32]> = models.iter().map(|&(_, p)| p).collect();
        average_models(&m, &w, &mut out.data);
        true
    }
}

/// A model-averaging method over a given data layout: RandomTMA (random partition), SuperTMA
/// (super-node partition), PSGD-PA (METIS partition) and centralized (one trainer, whole
/// graph), which differ only in their layout.
pub struct Averaging {
    /// The method's declaration.
    pub info: MethodInfo,
    /// The layout under a configuration.
    pub layout: fn(&TrainConfig) -> DataLayout,
}

/// RandomTMA: every node to a uniformly random trainer, time-based model averaging.
pub const RANDOM_TMA: Averaging = Averaging {
    info: MethodInfo::averaging("random-tma", "random node partition + model averaging"),
    layout: |_| DataLayout::Partitioned(PartitionMethod::Random),
};

/// SuperTMA: METIS super-nodes shuffled into trainer groups, time-based model averaging.
pub const SUPER_TMA: Averaging = Averaging {
    info: MethodInfo::averaging(
        "super-tma",
        "METIS super-nodes (K: --super-nodes) dealt at random + model averaging",
    ),
    layout: |cfg| {
        DataLayout::Partitioned(PartitionMethod::SuperNode {
            num_super_nodes: cfg.super_nodes,
        })
    },
};

/// PSGD-PA baseline: METIS M-way edge-balanced partition, time-based model averaging.
pub const PSGD_PA: Averaging = Averaging {
    info: MethodInfo::averaging("psgd-pa", "METIS parts + model averaging"),
    layout: |_| DataLayout::Partitioned(PartitionMethod::Metis),
};

/// One trainer on the whole graph.
pub const CENTRALIZED: Averaging = Averaging {
    info: MethodInfo {
        many_trainers: false,
        no_average_weight: Some("averages nothing"),
        ..MethodInfo::averaging("centralized", "one trainer, whole graph")
    },
    layout: |_| DataLayout::Whole,
};

impl TrainingMethod for Averaging {
    fn info(&self) -> &MethodInfo {
        &self.info
    }

    fn layout(&self, cfg: &TrainConfig) -> DataLayout {
        (self.layout)(cfg)
    }

    fn exchange<'a>(&self, inputs: ExchangeInputs<'a>) -> Box<dyn Exchange + 'a> {
        Box::new(ModelAveraging::new(inputs.weights, None))
    }
}

/// Weighted mean of flat parameter vectors, written into `out`.
///
/// `models[i]` are trainer `i`'s parameters (all the same length as `out`); `weights[i] >= 0`
/// (they need not sum to one; uniform weights give the paper's plain mean). All weights zero
/// (only trainers without training examples) gives the plain mean. Sums in f64 so the result
/// does not depend on the order of trainers beyond rounding of the final cast.
///
/// # Panics
/// If `models` is empty or lengths differ.
pub fn average_models(models: &[&[f32]], weights: &[f64], out: &mut [f32]) {
    assert!(!models.is_empty(), "average over no model");
    assert_eq!(models.len(), weights.len());
    let total: f64 = weights.iter().sum();
    for m in models {
        assert_eq!(m.len(), out.len(), "parameter vectors differ in length");
    }
    let w: Vec<f64> = if total > 0.0 {
        weights.iter().map(|w| w / total).collect()
    } else {
        vec![1.0 / models.len() as f64; models.len()]
    };
    use rayon::prelude::*;
    out.par_chunks_mut(1 << 14)
        .enumerate()
        .for_each(|(c, chunk)| {
            let base = c << 14;
            for (j, o) in chunk.iter_mut().enumerate() {
                let mut acc = 0f64;
                for (m, &wi) in models.iter().zip(&w) {
                    acc += m[base + j] as f64 * wi;
                }
                *o = acc as f32;
            }
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_mean_exact() {
        let a = [1.0f32, 2.0, -3.0];
        let b = [3.0f32, 0.0, 3.0];
        let c = [2.0f32, 1.0, 0.0];
        let mut out = [0f32; 3];
        average_models(&[&a, &b, &c], &[1.0, 1.0, 1.0], &mut out);
        assert_eq!(out, [2.0, 1.0, 0.0]);
    }

    #[test]
    fn weighted_mean_exact() {
        let a = [0.0f32, 4.0];
        let b = [4.0f32, 0.0];
        let mut out = [0f32; 2];
        average_models(&[&a, &b], &[3.0, 1.0], &mut out);
        assert_eq!(out, [1.0, 3.0]);
    }

    #[test]
    fn zero_weights_give_the_plain_mean_and_zero_weight_is_left_out() {
        // regression (issue 11): all-zero weights panicked
        let a = [1.0f32, 3.0];
        let b = [3.0f32, 5.0];
        let mut out = [0f32; 2];
        average_models(&[&a, &b], &[0.0, 0.0], &mut out);
        assert_eq!(out, [2.0, 4.0]);
        // a trainer without examples (weight 0) does not move the mean
        average_models(&[&a, &b], &[0.0, 1.0], &mut out);
        assert_eq!(out, [3.0, 5.0]);
    }

    #[test]
    fn single_model_is_identity() {
        let a: Vec<f32> = (0..40000).map(|i| i as f32 * 0.5).collect();
        let mut out = vec![0f32; a.len()];
        average_models(&[&a], &[7.0], &mut out);
        assert_eq!(out, a);
    }
}
