//! LLCG baseline: "Learn Locally, Correct Globally" (Ramezani et al., ICLR 2022), as the
//! TMA paper (Zhu et al. 2023, arXiv 2305.09887, Sec. 5) runs it: trainers on METIS parts with
//! time-based averaging exactly as PSGD-PA, then, after every averaging round, the coordinator
//! takes `llcg_steps` mini-batch steps on the **full** training graph (its own Adam, a neighbour
//! sampler over the whole graph) and broadcasts the corrected model.
//!
//! The correction is a [`Corrector`] of [`ModelAveraging`]: it runs on the averaged model before
//! the coordinator replies, so the corrected model is what trainers continue from and what is
//! evaluated.

use crate::config::TrainConfig;
use crate::data::{EvalData, LinkExamples, Prepared, TrainTarget, TrainerData};
use crate::engines::method::{DataLayout, Exchange, ExchangeInputs, MethodInfo, TrainingMethod};
use crate::engines::trainer::Trainer;
use crate::evaluation::record::Correction;
use crate::methods::averaging::{Corrector, ModelAveraging};
use tma_nn::{Model, ParamSet};
use tma_partition::PartitionMethod;

/// The coordinator's global-correction state: a [`Trainer`] over the full training graph.
pub struct Llcg {
    trainer: Trainer,
    steps: usize,
    /// Correction steps taken so far.
    pub total_steps: u64,
}

/// The full training graph as one trainer's data: every node, the evaluation graph (link: the
/// training graph with held-out edges removed; node: the whole graph), every training example.
/// `trainer` is the index the sampler RNG is derived from.
pub fn full_graph_data(prep: &Prepared, trainer: usize) -> TrainerData {
    let n = prep.graph.num_nodes() as u32;
    let target = match &prep.eval {
        // read from a partition directory, the split holds no training graph of its own:
        // the coordinator's graph is the training graph (`crate::store::read_coordinator`)
        EvalData::Link { split } if split.train_graph.num_nodes() == 0 => TrainTarget::Link {
            edges: LinkExamples::of_graph(&prep.graph, split.directed),
        },
        EvalData::Link { split } => TrainTarget::Link {
            edges: split.training_edges().into(),
        },
        EvalData::Node { split, targets } => TrainTarget::Node {
            nodes: split.train.clone(),
            targets: targets.clone(),
        },
    };
    TrainerData {
        trainer,
        part: 0,
        graph: prep.graph.clone(),
        degrees: prep.degrees.clone(),
        features: prep.features.clone(),
        target,
        global_ids: (0..n).collect(),
    }
}

impl Llcg {
    /// Correction state for a run: `cfg.llcg_steps` steps per round, batch size, fanouts, lr,
    /// weight decay and clipping from `cfg`; its sampler's random stream is that of a trainer
    /// with index `num_trainers` (distinct from every trainer's).
    pub fn new(
        prep: &Prepared,
        cfg: &TrainConfig,
        num_trainers: usize,
        model: Model,
        init: ParamSet,
    ) -> Llcg {
        let data = full_graph_data(prep, num_trainers);
        let mut trainer = Trainer::new(data, model, init, cfg);
        trainer.set_exclude_targets(cfg.excludes_targets(prep.structural()));
        Llcg {
            trainer,
            steps: cfg.llcg_steps,
            total_steps: 0,
        }
    }
}

impl Corrector for Llcg {
    /// Takes `llcg_steps` Adam steps on full-graph mini-batches starting from `params` (the
    /// averaged model) and writes the result back into `params`.
    fn correct(&mut self, params: &mut ParamSet) -> Correction {
        if self.steps == 0 {
            return Correction {
                loss: f32::NAN,
                ..Correction::default()
            };
        }
        self.trainer.set_params(&params.data);
        let mut sum = 0f64;
        for _ in 0..self.steps {
            sum += self.trainer.step() as f64;
            self.total_steps += 1;
        }
        params.data.copy_from_slice(&self.trainer.params().data);
        Correction {
            steps: self.steps as u64,
            loss: (sum / self.steps as f64) as f32,
            secs: 0.0,
        }
    }
}

/// The LLCG method: METIS parts, model averaging, then the coordinator's [`Llcg`] correction.
pub struct LlcgMethod;

/// LLCG in the method registry (`crate::methods`).
pub const LLCG: LlcgMethod = LlcgMethod;

/// LLCG's declaration: psgd-pa's, with correction steps and no validation checks.
const INFO: MethodInfo = MethodInfo {
    no_validation_checks: Some("its rounds end with a correction on the coordinator"),
    options: &[("llcg_steps", "takes global correction steps")],
    ..MethodInfo::averaging("llcg", "psgd-pa + global correction steps")
};

impl TrainingMethod for LlcgMethod {
    fn info(&self) -> &MethodInfo {
        &INFO
    }

    fn layout(&self, _cfg: &TrainConfig) -> DataLayout {
        DataLayout::Partitioned(PartitionMethod::Metis)
    }

    fn exchange<'a>(&self, inputs: ExchangeInputs<'a>) -> Box<dyn Exchange + 'a> {
        let llcg = Llcg::new(
            inputs.prep,
            inputs.cfg,
            inputs.weights.len(),
            inputs.model.clone(),
            inputs.init.clone(),
        );
        Box::new(ModelAveraging::new(inputs.weights, Some(Box::new(llcg))))
    }
}
