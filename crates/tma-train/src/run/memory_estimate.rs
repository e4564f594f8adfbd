//! A run's memory, estimated before anything large is allocated, so that a model too large for
//! the machine is refused with a clear error instead of being killed by the kernel (or aborting
//! on a failed allocation) halfway through. What a process really uses is measured while it runs
//! ([`crate::memory`]). See `docs/graph-format.md` for the per-trainer formula.

use crate::config::{Task, TrainConfig};
use crate::data::{build_model, Prepared};
use crate::TrainError;

/// Bytes a run will need at least, by what holds them. A lower bound of the real peak (buffer
/// pools, the allocator and the data already loaded come on top).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MemoryEstimate {
    /// Parameters of the model.
    pub num_params: u64,
    /// Parameters, gradients and the two Adam moments of every trainer, plus the trainers'
    /// starting copies: `6 * 4 * num_params` bytes per trainer.
    pub trainer_params: u64,
    /// The coordinator's copies (current, initial, best and template models, the replies and
    /// up to two rounds in validation): `8 * 4 * num_params` bytes.
    pub coordinator_params: u64,
    /// Activations of one mini-batch step for each step that can run at once (every trainer's,
    /// or the worker threads' count when in-process trainers outnumber them:
    /// [`crate::engines::gate::concurrent_steps`]): four `width`-wide rows (value, normalized value and
    /// both gradients) per destination node of every sampled block, and the input rows of the
    /// outermost block.
    pub activations: u64,
    /// Evaluation's activations: the full layer-wise pass (a layer's input and output, two
    /// `[N, width]` matrices) with `--eval-inference full`; otherwise at most that and at most
    /// `--eval-memory` (the restricted or sampled chunks stay within it, and `auto` takes the
    /// full pass only when it fits; docs/decisions/0012).
    pub evaluation: u64,
}

impl MemoryEstimate {
    /// Sum of the parts, bytes.
    pub fn total(&self) -> u64 {
        self.trainer_params
            .saturating_add(self.coordinator_params)
            .saturating_add(self.activations)
            .saturating_add(self.evaluation)
    }
}

fn gib(b: u64) -> f64 {
    b as f64 / (1u64 << 30) as f64
}

/// Estimates what training `prep` with `cfg` needs (see [`MemoryEstimate`]).
///
/// # Errors
/// [`TrainError::Model`] for a model configuration the layers refuse.
pub fn estimate(cfg: &TrainConfig, prep: &Prepared) -> Result<MemoryEstimate, TrainError> {
    let model = build_model(cfg, prep.model_shape())?;
    let p = model.num_params() as u64;
    let m = prep.trainers.len().max(1) as u64;
    let f = 4u64; // bytes per f32
    let width = cfg.hidden.max(prep.out_dim).max(1) as u64;
    // nodes a step touches: the seeds and their sampled neighbourhoods, capped by the graph
    let n = prep.graph.num_nodes().max(1) as u64;
    let seeds = match cfg.task {
        Task::Node => cfg.batch_size as u64,
        Task::Link => 2 * cfg.batch_size as u64 * (1 + cfg.num_neg as u64),
    };
    // hidden activations (value, normalized/activated value and both gradients) of the
    // destination nodes of every block; the input rows of the outermost block
    let mut layer_nodes = seeds.min(n);
    let mut act = 0u64;
    for &fo in &cfg.fanouts {
        act = act.saturating_add(layer_nodes.saturating_mul(width).saturating_mul(4 * f));
        let fo = if fo == 0 { n } else { fo as u64 };
        layer_nodes = layer_nodes.saturating_mul(1 + fo).min(n);
    }
    act = act.saturating_add(
        layer_nodes
            .saturating_mul(prep.in_dim as u64)
            .saturating_mul(f),
    );
    Ok(MemoryEstimate {
        num_params: p,
        trainer_params: p.saturating_mul(6 * f).saturating_mul(m),
        coordinator_params: p.saturating_mul(8 * f),
        // one step's activations per model pass that can run at once: in-process trainers
        // beyond the threads wait at the step gate and share one buffer pool (crate::engines::gate)
        activations: act
            .saturating_mul(
                crate::engines::gate::concurrent_steps(cfg.worker_threads(), m as usize) as u64,
            ),
        evaluation: {
            let full = n.saturating_mul(width).saturating_mul(2 * f);
            match cfg.infer_options().mode {
                crate::evaluation::infer::InferMode::Full => full,
                _ => full.min(cfg.eval_memory),
            }
        },
    })
}

/// Refuses a run whose [`estimate`] exceeds `available` bytes, naming the options that size it.
///
/// # Errors
/// [`TrainError::Config`] with the estimate, its parts and what to change; the estimate's own
/// errors.
pub fn check(
    cfg: &TrainConfig,
    prep: &Prepared,
    available: u64,
) -> Result<MemoryEstimate, TrainError> {
    let e = estimate(cfg, prep)?;
    if e.total() > available {
        return Err(TrainError::Config(format!(
            "this run needs at least {:.1} GiB of memory but {:.1} GiB are available: the model has {} parameters (--hidden {}, --layers {}, {} input features), {:.1} GiB for {} trainer(s) (parameters, gradients, Adam moments), {:.1} GiB for the coordinator, {:.1} GiB of activations (--batch-size {}, --fanouts {:?}), {:.1} GiB for evaluation (--eval-memory {:.1} GiB); reduce --hidden, --trainers, --batch-size or --eval-memory",
            gib(e.total()),
            gib(available),
            e.num_params,
            cfg.hidden,
            cfg.num_layers,
            prep.in_dim,
            gib(e.trainer_params),
            prep.trainers.len().max(1),
            gib(e.coordinator_params),
            gib(e.activations),
            cfg.batch_size,
            cfg.fanouts,
            gib(e.evaluation),
            gib(cfg.eval_memory),
        )));
    }
    Ok(e)
}
