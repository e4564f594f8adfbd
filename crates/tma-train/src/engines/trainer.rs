//! A trainer: mini-batch training on its own part, joining averaging rounds when they are due.
//!
//! Each trainer owns its sampler, its negatives, its RNG and its Adam state . After
//! every optimizer step it checks whether the coordinator has called a round; if so it sends
//! its parameters and blocks until the averaged model comes back (fast trainers simply make more
//! steps between rounds).

use crate::clock::Clock;
use crate::config::TrainConfig;
use crate::data::{NodeTargets, TrainTarget, TrainerData};
use crate::engines::cluster::{Reply, TrainerEndpoint, TrainerReport};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tma_graph::seed::Purpose;
use tma_nn::{Adam, Input, Mat, Model, ParamSet};
use tma_sample::{unique_with_inverse, BlockView, NeighborSampler};

/// How a trainer's run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TrainerExit {
    /// The coordinator ended the run.
    Stopped,
    /// Failure injected at this time (`--fail TRAINER@TIME`).
    Failed(Duration),
    /// The coordinator went away.
    Orphaned,
}

/// What the last step did and how long its phases took (wall clock, seconds).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepStats {
    /// Batch selection, negatives and neighbour sampling.
    pub sample_secs: f64,
    /// Input selection, forward, loss and backward (the gradients).
    pub model_secs: f64,
    /// Weight decay, clipping and the Adam update (0 after `compute_gradients` alone).
    pub update_secs: f64,
    /// The sampled blocks, input layer first: `(num_dst, num_src, arcs)`.
    pub blocks: Vec<(usize, usize, usize)>,
    /// Rows of the input features the step read (`input_nodes`).
    pub input_rows: usize,
}

/// One optimisation step's state, reused across steps.
pub struct Trainer {
    /// The trainer's data (its part).
    pub data: TrainerData,
    model: Model,
    params: ParamSet,
    grads: ParamSet,
    adam: Adam,
    sampler: NeighborSampler,
    rng: ChaCha8Rng,
    cfg: TrainConfig,
    /// Epoch order and position in it.
    order: Vec<u32>,
    /// Gathered input features of the current mini-batch when the features are sparse
    /// (reused across steps); dense features are read in place (`Input::Indexed`).
    x_buf: tma_graph::Features,
    cursor: usize,
    /// Completed passes over its training examples.
    pub epochs: u64,
    /// Optimizer steps taken.
    pub steps: u64,
    last: StepStats,
    /// In-process trainers: the gate each step passes (at most as many steps as cores; none
    /// while a validation runs: [`crate::engines::gate`]).
    gate: Option<std::sync::Arc<crate::engines::gate::StepGate>>,
    /// Link prediction: each step's positives are not sampled as neighbours
    /// ([`Trainer::set_exclude_targets`]).
    exclude_targets: bool,
}

/// Sample the blocks of `seeds` in the trainer's graph and record, in `last`, the time since
/// the step began (`t0`: batch selection and sampling), the block shapes and the input rows.
fn sample_recorded(
    sampler: &NeighborSampler,
    data: &TrainerData,
    seeds: &[u32],
    exclude: &tma_sample::Exclude,
    rng: &mut ChaCha8Rng,
    last: &mut StepStats,
    t0: Instant,
) -> tma_sample::MiniBatch {
    let mb = sampler.sample_excluding(&data.graph, &data.degrees, seeds, exclude, rng);
    last.sample_secs = t0.elapsed().as_secs_f64();
    last.blocks = mb
        .blocks
        .iter()
        .map(|b| (b.num_dst, b.num_src, b.indices.len()))
        .collect();
    last.input_rows = mb.input_nodes.len();
    mb
}

/// Trainer `index`'s random stream in seed segment `segment`:
/// [`Purpose::Trainer`]`(index)` of the run's seed in segment 0, of
/// [`Purpose::Resume`]`(segment)`'s seed after a resume from round `segment` (so a resumed run
/// does not replay the samples of its first segment; the user's seed is never changed).
pub fn trainer_rng(seed: u64, index: usize, segment: u64) -> ChaCha8Rng {
    let base = if segment == 0 {
        seed
    } else {
        tma_graph::seed::derive(seed, Purpose::Resume(segment as u32))
    };
    tma_graph::seed::rng(base, Purpose::Trainer(index as u32))
}

/// Sampler fanouts from config values (0 = all neighbours).
pub fn sampler_fanouts(fanouts: &[usize]) -> Vec<usize> {
    fanouts
        .iter()
        .map(|&f| if f == 0 { usize::MAX } else { f })
        .collect()
}

impl Trainer {
    /// A trainer with the given model and initial parameters, at the start of a run (seed
    /// segment 0; see [`Trainer::with_segment`]).
    pub fn new(data: TrainerData, model: Model, params: ParamSet, cfg: &TrainConfig) -> Trainer {
        Trainer::with_segment(data, model, params, cfg, 0)
    }

    /// A trainer whose random stream (batch order, negatives, neighbour samples, dropout) is
    /// [`trainer_rng`]`(cfg.seed, data.trainer, segment)`: segment 0 for a fresh run, the round
    /// a resumed run continues from otherwise.
    pub fn with_segment(
        data: TrainerData,
        model: Model,
        params: ParamSet,
        cfg: &TrainConfig,
        segment: u64,
    ) -> Trainer {
        let grads = params.zeros_like();
        let adam = Adam::new(params.len(), cfg.lr);
        let rng = trainer_rng(cfg.seed, data.trainer, segment);
        let sampler = NeighborSampler {
            fanouts: sampler_fanouts(&cfg.fanouts),
        };
        Trainer {
            data,
            model,
            params,
            grads,
            adam,
            sampler,
            rng,
            cfg: cfg.clone(),
            order: Vec::new(),
            x_buf: tma_graph::Features::Dense {
                num_nodes: 0,
                dim: 0,
                data: Vec::new().into(),
            },
            cursor: 0,
            epochs: 0,
            steps: 0,
            last: StepStats::default(),
            gate: None,
            exclude_targets: false,
        }
    }

    /// Link prediction: leave each step's positives out of its sampled neighbourhoods
    /// ([`TrainConfig::excludes_targets`], resolved by the engine that knows the data); off
    /// until set. The batch is then at most a quarter of the trainer's training edges
    /// ([`excluding_batch_size`]).
    pub fn set_exclude_targets(&mut self, on: bool) {
        self.exclude_targets = on;
    }

    /// Examples per step: `cfg.batch_size`, or [`excluding_batch_size`] when the step's
    /// positives are excluded from its neighbourhoods.
    pub fn batch_size(&self) -> usize {
        if self.exclude_targets {
            excluding_batch_size(self.cfg.batch_size, self.num_examples())
        } else {
            self.cfg.batch_size
        }
    }

    /// Makes the model computation of every step ([`Trainer::compute_gradients`], after the
    /// sampling) pass `gate` (in-process trainers: at most as many steps as cores, none while
    /// the evaluator holds it: [`crate::engines::gate`]).
    pub fn set_step_gate(&mut self, gate: std::sync::Arc<crate::engines::gate::StepGate>) {
        self.gate = Some(gate);
    }

    /// Continues a resumed run's epoch count: `epochs` completed before the resume point
    /// ([`crate::Resume::epochs`]), so gradient clipping (from `clip_from_epoch`) and the
    /// recorded epochs go on from there.
    pub fn continue_epochs(&mut self, epochs: u64) {
        self.epochs = epochs;
    }

    /// Phase times and block shapes of the last step (benchmarks, diagnostics).
    pub fn last_step(&self) -> &StepStats {
        &self.last
    }

    /// The current parameters.
    pub fn params(&self) -> &ParamSet {
        &self.params
    }

    /// Replaces the parameters (e.g. with the averaged model); `data.len()` must equal the number of parameters.
    pub fn set_params(&mut self, data: &[f32]) {
        self.params.data.copy_from_slice(data);
    }

    fn num_examples(&self) -> usize {
        match &self.data.target {
            TrainTarget::Link { edges } => edges.len(&self.data.graph),
            TrainTarget::Node { nodes, .. } => nodes.len(),
        }
    }

    /// Next mini-batch of example indices (an epoch is one shuffled pass).
    fn next_batch(&mut self) -> Vec<u32> {
        let n = self.num_examples();
        if self.cursor >= self.order.len() {
            if !self.order.is_empty() {
                self.epochs += 1;
            }
            self.order = (0..n as u32).collect();
            self.order.shuffle(&mut self.rng);
            self.cursor = 0;
        }
        let end = (self.cursor + self.batch_size()).min(self.order.len());
        let b = self.order[self.cursor..end].to_vec();
        self.cursor = end;
        b
    }

    /// One optimizer step on one mini-batch; returns the batch loss.
    pub fn step(&mut self) -> f32 {
        let loss = self.compute_gradients();
        let t = Instant::now();
        self.apply_own_gradients();
        self.last.update_secs = t.elapsed().as_secs_f64();
        loss
    }

    /// The gradients of the last [`Trainer::compute_gradients`] (flat, in [`ParamSet`] order).
    pub fn grads(&self) -> &ParamSet {
        &self.grads
    }

    /// Takes parameters stepped elsewhere (GGS: the coordinator's Adam step on the mean
    /// gradient). `params.len()` must equal the number of parameters. Counts as one optimizer
    /// step.
    pub fn take_step(&mut self, params: &[f32]) {
        self.params.data.copy_from_slice(params);
        self.steps += 1;
    }

    /// Forward and backward pass on the next mini-batch of this trainer's examples: fills
    /// [`Trainer::grads`] with the raw loss gradient (no weight decay, no clipping, no update)
    /// and returns the batch loss.
    pub fn compute_gradients(&mut self) -> f32 {
        let t0 = Instant::now();
        self.last.update_secs = 0.0;
        let batch = self.next_batch();
        self.grads.data.iter_mut().for_each(|g| *g = 0.0);
        // the step gate (in-process trainers outnumbering the threads) is passed after the
        // sampling, which reads the mapped part and may wait for the disk, and held while the
        // model computes with its pooled buffers
        let gate = self.gate.clone();
        let loss = match &self.data.target {
            TrainTarget::Link { edges } => {
                let n = self.data.num_nodes();
                let k = self.cfg.num_neg;
                let g = &self.data.graph;
                let (src, dst) =
                    link_pairs_with(|e| edges.get(g, e as usize), &batch, k, n, &mut self.rng);
                let mut all = Vec::with_capacity(src.len() * 2);
                all.extend_from_slice(&src);
                all.extend_from_slice(&dst);
                let (seeds, inv) = unique_with_inverse(&all);
                let (src_idx, dst_idx) = inv.split_at(src.len());
                let exclude = if self.exclude_targets {
                    tma_sample::Exclude::pairs(&src[..batch.len()], &dst[..batch.len()])
                } else {
                    tma_sample::Exclude::default()
                };
                let mb = sample_recorded(
                    &self.sampler,
                    &self.data,
                    &seeds,
                    &exclude,
                    &mut self.rng,
                    &mut self.last,
                    t0,
                );
                let _pass = gate.as_ref().map(|g| g.enter());
                let x = Input::select(&self.data.features, &mb.input_nodes, &mut self.x_buf);
                let views: Vec<BlockView> = mb.blocks.iter().map(|b| b.view()).collect();
                let (h, cache) = self
                    .model
                    .forward(&self.params, &views, x, true, &mut self.rng);
                let mut targets = vec![0f32; src_idx.len()];
                targets[..batch.len()].iter_mut().for_each(|t| *t = 1.0);
                // decode, BCE and the decoder's backward (fused under --matmul-precision medium)
                let (loss, dh) = self.model.decode_bce(
                    &self.params,
                    &h,
                    src_idx,
                    dst_idx,
                    &targets,
                    &mut self.grads,
                );
                self.model
                    .backward(&self.params, cache, &dh, &mut self.grads);
                // the next step reuses these buffers (no fresh pages to fault in)
                self.model.recycle(dh);
                self.model.recycle(h);
                loss
            }
            TrainTarget::Node { nodes, targets } => {
                let seeds: Vec<u32> = batch.iter().map(|&i| nodes[i as usize]).collect();
                let mb = sample_recorded(
                    &self.sampler,
                    &self.data,
                    &seeds,
                    &tma_sample::Exclude::default(),
                    &mut self.rng,
                    &mut self.last,
                    t0,
                );
                let _pass = gate.as_ref().map(|g| g.enter());
                let x = Input::select(&self.data.features, &mb.input_nodes, &mut self.x_buf);
                let views: Vec<BlockView> = mb.blocks.iter().map(|b| b.view()).collect();
                let (out, cache) = self
                    .model
                    .forward(&self.params, &views, x, true, &mut self.rng);
                let (loss, dout) = node_loss(&out, &mb.seeds, targets);
                self.model
                    .backward(&self.params, cache, &dout, &mut self.grads);
                self.model.recycle(dout);
                self.model.recycle(out);
                loss
            }
        };
        self.last.model_secs = t0.elapsed().as_secs_f64() - self.last.sample_secs;
        loss
    }

    /// Weight decay, clipping and the Adam update with this trainer's own gradients.
    fn apply_own_gradients(&mut self) {
        if self.cfg.weight_decay > 0.0 {
            let wd = self.cfg.weight_decay;
            for (g, p) in self.grads.data.iter_mut().zip(&self.params.data) {
                *g += wd * p;
            }
        }
        // gradient clipping (the reference release: norm 1.0 from epoch 2) (epochs counted from 1)
        if self.epochs + 1 >= self.cfg.clip_from_epoch as u64 {
            tma_nn::clip_grad_norm(&mut self.grads, self.cfg.clip_norm);
        }
        self.adam.lr = crate::config::warmup_lr(self.cfg.lr, self.cfg.warmup_steps, self.steps + 1);
        self.adam.step(&mut self.params, &self.grads);
        self.steps += 1;
    }

    /// The trainer's main loop: waits for the initial model, trains, joins every due round,
    /// stops when the coordinator says so (or at an injected failure time).
    pub fn run(
        mut self,
        endpoint: &mut dyn TrainerEndpoint,
        clock: Arc<dyn Clock>,
        fail_at: Option<Duration>,
    ) -> TrainerExit {
        let init = match endpoint.initial_params() {
            Some(p) => p,
            None => return TrainerExit::Orphaned,
        };
        self.set_params(&init);
        let mut joined = 0u64;
        // step-count schedule (`sync_every_steps` > 0): join a called round only after that many
        // steps since the last join, and wait for the call once there
        let every = self.cfg.sync_every_steps;
        let mut steps_at_join = self.steps;
        let (mut loss_sum, mut loss_count) = (0f64, 0u64);
        // the last validation check answered (`--val-check-interval`)
        let mut checked = 0u64;
        loop {
            if let Some(t) = fail_at {
                if clock.elapsed() >= t {
                    return TrainerExit::Failed(t);
                }
            }
            // a validation check between rounds: leave a copy of the parameters and go on
            // (nothing comes back, so training is the same with or without checks)
            let check = endpoint.due_check();
            if check > checked {
                checked = check;
                endpoint.deposit_check(check, &self.params.data, self.steps, self.epochs);
            }
            let due = endpoint.due_round();
            // (a trainer without examples takes no step: it joins every round called; the last
            // round, past the time limit, is joined at once)
            let enough = every == 0
                || self.num_examples() == 0
                || self.steps >= steps_at_join + every
                || endpoint.due_now();
            if every > 0 && enough && due <= joined {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            // a round is joined with training done since the last join: rounds called while the
            // trainer was joining the previous one would otherwise take its unchanged model
            // (under MPI, ramp spans shorter than a model exchange made every ramp round carry
            // no step); not for a trainer without examples, nor for the last round
            let trained = self.steps > steps_at_join
                || self.num_examples() == 0
                || due == u64::MAX
                || endpoint.due_now();
            if due > joined && (enough || due == u64::MAX) && trained {
                steps_at_join = self.steps;
                let report = TrainerReport {
                    steps: self.steps,
                    epochs: self.epochs,
                    loss_sum,
                    loss_count,
                };
                loss_sum = 0.0;
                loss_count = 0;
                joined = due;
                match endpoint.join_round(due, &self.params.data, report) {
                    Some(Reply::Continue(p)) => self.set_params(&p),
                    Some(Reply::Stop(_)) => return TrainerExit::Stopped,
                    None => return TrainerExit::Orphaned,
                }
                continue;
            }
            if self.num_examples() == 0 {
                // nothing to train on (an unlucky part of a small graph): only join rounds,
                // with weight 0 in the mean
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            let l = self.step();
            if l.is_finite() {
                loss_sum += l as f64;
                loss_count += 1;
            }
        }
    }
}

/// A link-prediction step's positive edges when they are left out of its sampled
/// neighbourhoods (`--exclude-targets`): `batch_size`, but at most a quarter of the trainer's
/// `train_edges` (rounded up), so every step keeps most of its graph to sample from. A batch of
/// all of a small part's edges would leave the step no neighbour at all (measured: amazon_photo,
/// random-tma, 4 trainers of ~7,400 edges, batch 8192: validation MRR 0.115 against 0.219 without
/// exclusion; batch 1024-2048: 0.23; docs/decisions/0028-exclude-target-edges.md).
pub fn excluding_batch_size(batch_size: usize, train_edges: usize) -> usize {
    batch_size.min(train_edges.div_ceil(4)).max(1)
}

/// The scored pairs of one link-prediction step: the positives `edges[batch[i]]` first, then
/// `k` rounds of one negative per positive (round `j`'s negative of positive `i` at
/// `(1 + j) * batch.len() + i`). A negative keeps a random end of its positive (`u` or `v`,
/// a fair coin) and pairs it with a node drawn uniformly from `0..num_nodes` (with
/// replacement, as the reference's uniform sampler; it may be a true edge or the end itself).
/// The reference trains both directions `u -> v` and `v -> u`, each with a negative from its
/// source: so the negatives' sources are both ends alike, never chosen by the stored
/// orientation of an undirected edge (the smaller id first); the decoder is symmetric, so
/// `(v, w)` is as much a negative for a directed arc as `(u, w)`.
///
/// # Panics
/// If `num_nodes == 0` while there is a negative to draw.
pub fn link_pairs(
    edges: &[(u32, u32)],
    batch: &[u32],
    k: usize,
    num_nodes: usize,
    rng: &mut ChaCha8Rng,
) -> (Vec<u32>, Vec<u32>) {
    link_pairs_with(|e| edges[e as usize], batch, k, num_nodes, rng)
}

/// [`link_pairs`] with positive `e` given by `edge(e)` (a [`crate::data::LinkExamples`] read
/// in place); the same pairs and random draws.
pub fn link_pairs_with(
    edge: impl Fn(u32) -> (u32, u32),
    batch: &[u32],
    k: usize,
    num_nodes: usize,
    rng: &mut ChaCha8Rng,
) -> (Vec<u32>, Vec<u32>) {
    let mut src = Vec::with_capacity(batch.len() * (1 + k));
    let mut dst = Vec::with_capacity(batch.len() * (1 + k));
    for &e in batch {
        let (u, v) = edge(e);
        src.push(u);
        dst.push(v);
    }
    for _ in 0..k {
        for &e in batch {
            let (u, v) = edge(e);
            src.push(if rng.random::<bool>() { u } else { v });
            dst.push(rng.random_range(0..num_nodes as u32));
        }
    }
    (src, dst)
}

/// Loss of the node task on the seeds' outputs; returns (mean loss, d loss / d out).
/// Unlabelled seeds (class -1) never reach here: training nodes are labelled.
pub fn node_loss(out: &Mat, seeds: &[u32], targets: &NodeTargets) -> (f32, Mat) {
    match targets {
        NodeTargets::Classes { y, .. } => {
            let labels: Vec<u32> = seeds.iter().map(|&s| y[s as usize].max(0) as u32).collect();
            tma_nn::softmax_cross_entropy(out, &labels)
        }
        NodeTargets::MultiLabel { y, num_labels } => {
            let l = *num_labels;
            let mut t = Vec::with_capacity(seeds.len() * l);
            for &s in seeds {
                t.extend_from_slice(&y[s as usize * l..(s as usize + 1) * l]);
            }
            tma_nn::multilabel_bce(out, &t)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn an_excluding_batch_is_at_most_a_quarter_of_the_trainers_edges() {
        assert_eq!(excluding_batch_size(8192, 100_000), 8192);
        assert_eq!(excluding_batch_size(8192, 32_768), 8192);
        assert_eq!(excluding_batch_size(8192, 7_410), 1853);
        assert_eq!(excluding_batch_size(8192, 769), 193);
        assert_eq!(excluding_batch_size(8192, 1), 1);
        // an idle trainer (no edge) still has a positive batch size
        assert_eq!(excluding_batch_size(8192, 0), 1);
    }

    #[test]
    fn link_pairs_negatives_keep_either_end_uniformly() {
        // 3 positives, 2 negatives each, on 10 nodes
        let edges = [(0u32, 5u32), (1, 6), (2, 7), (3, 8)];
        let batch = [2u32, 0, 3];
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let (src, dst) = link_pairs(&edges, &batch, 2, 10, &mut rng);
        assert_eq!(src.len(), 9);
        assert_eq!(&src[..3], &[2, 0, 3]);
        assert_eq!(&dst[..3], &[7, 5, 8]);
        for j in 0..2 {
            for (i, &e) in batch.iter().enumerate() {
                let (u, v) = edges[e as usize];
                let s = src[3 * (1 + j) + i];
                assert!(s == u || s == v, "negative source {s} of ({u}, {v})");
                assert!(dst[3 * (1 + j) + i] < 10);
            }
        }
        // many draws: each end is the source half the time (the smaller-id end was always the
        // source before), and the other end is uniform over the nodes
        let edges = [(0u32, 1u32)];
        let batch = vec![0u32; 20_000];
        let (src, dst) = link_pairs(&edges, &batch, 1, 4, &mut rng);
        let from_v = src[20_000..].iter().filter(|&&s| s == 1).count();
        assert!(
            (9_600..10_400).contains(&from_v),
            "{from_v} of 20000 from v"
        );
        let mut c = [0usize; 4];
        dst[20_000..].iter().for_each(|&w| c[w as usize] += 1);
        assert!(c.iter().all(|&x| (4_700..5_300).contains(&x)), "{c:?}");
        // deterministic in the stream
        let a = link_pairs(
            &edges,
            &batch[..50],
            3,
            4,
            &mut ChaCha8Rng::seed_from_u64(7),
        );
        let b = link_pairs(
            &edges,
            &batch[..50],
            3,
            4,
            &mut ChaCha8Rng::seed_from_u64(7),
        );
        assert_eq!(a, b);
    }
}
