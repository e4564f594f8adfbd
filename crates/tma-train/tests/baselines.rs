//! The baselines' defining behaviours: LLCG's global correction, GGS's identical
//! parameters, PSGD-PA's METIS partition, weighted averaging, trainer failures and the
//! step-count schedule. All on small generated graphs; each test runs in about a second.

use std::collections::BTreeMap;
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tma_graph::{generate_sbm, SbmConfig};
use tma_nn::ParamSet;
use tma_train::data::share_examples;
use tma_train::engines::cluster::{
    Contribution, CoordinatorEndpoint, InProcess, Reply, TrainerReport,
};
use tma_train::engines::coordinator::{coordinate, Coordinated};
use tma_train::engines::trainer::Trainer;
use tma_train::engines::{average_weights, initial_params};
use tma_train::evaluation::record::Late;
use tma_train::methods::averaging::ModelAveraging;
use tma_train::methods::ggs::{ggs_worker, GradientSync};
use tma_train::methods::llcg::{full_graph_data, Llcg};
use tma_train::{
    average_models, build_model, prepare, run_in_process, AverageWeight, Corrector, Extras,
    FailPlan, ManualClock, Method, Observer, Prepared, Quiet, RealClock, RoundRecord, Task,
    TrainConfig,
};

fn cfg(method: Method, task: Task) -> TrainConfig {
    TrainConfig {
        task,
        method,
        num_trainers: 3,
        hidden: 16,
        fanouts: vec![5, 5],
        batch_size: 64,
        lr: 0.01,
        eval_num_neg: 20,
        eval_max_edges: 100,
        threads: 2,
        seed: 7,
        ..TrainConfig::default()
    }
}

fn prep(c: &TrainConfig) -> Prepared {
    let ds = generate_sbm(&SbmConfig {
        num_nodes: 600,
        avg_degree: 10.0,
        feature_dim: 8,
        num_classes: 4,
        seed: 3,
        ..SbmConfig::default()
    });
    prepare(ds, c).unwrap()
}

/// A transport with scripted trainers: round `k` gets the listed contributions; every reply is
/// recorded. Lets the coordinator's arithmetic be checked exactly.
struct Scripted {
    n: usize,
    rounds: BTreeMap<u64, Vec<Contribution>>,
    alive: Vec<bool>,
    replies: Vec<(Vec<usize>, Vec<f32>)>,
    initial: Option<Vec<f32>>,
}

impl CoordinatorEndpoint for Scripted {
    fn num_trainers(&self) -> usize {
        self.n
    }
    fn broadcast_initial(&mut self, params: Arc<Vec<f32>>) {
        self.initial = Some(params.to_vec());
    }
    fn call_round(&mut self, _round: u64) {}
    fn gather(
        &mut self,
        round: u64,
        _t: Duration,
        _l: &Arc<Vec<f32>>,
        _u: Option<Duration>,
    ) -> Vec<Contribution> {
        let got = self.rounds.remove(&round).unwrap_or_default();
        // a trainer absent from a round is dead from then on
        for t in 0..self.n {
            if !got.iter().any(|c| c.trainer == t) {
                self.alive[t] = false;
            }
        }
        got
    }
    fn reply(&mut self, to: &[usize], reply: Reply) {
        let p = match reply {
            Reply::Continue(p) | Reply::Stop(p) => p.to_vec(),
        };
        self.replies.push((to.to_vec(), p));
    }
    fn is_alive(&self, t: usize) -> bool {
        self.alive[t]
    }
}

/// Every trainer answers every round at once with the same parameters, except that the
/// gather of round `slow_round` takes `delay` of (manual) training time: a paid deadline.
struct LateRound {
    n: usize,
    params: Vec<f32>,
    clock: ManualClock,
    slow_round: u64,
    delay: Duration,
}

impl CoordinatorEndpoint for LateRound {
    fn num_trainers(&self) -> usize {
        self.n
    }
    fn broadcast_initial(&mut self, _params: Arc<Vec<f32>>) {}
    fn call_round(&mut self, _round: u64) {}
    fn gather(
        &mut self,
        round: u64,
        _t: Duration,
        _l: &Arc<Vec<f32>>,
        _u: Option<Duration>,
    ) -> Vec<Contribution> {
        if round == self.slow_round {
            self.clock.advance(self.delay);
        }
        (0..self.n)
            .map(|t| contribution(t, self.params.clone()))
            .collect()
    }
    fn reply(&mut self, _to: &[usize], _reply: Reply) {}
    fn is_alive(&self, _t: usize) -> bool {
        true
    }
}

/// Runs `coordinate` under `c` on a manual clock with every trainer answering at once, except
/// that round `slow_round`'s gather takes `delay` ([`LateRound`]); returns its round records.
fn run_with_a_late_round(
    c: &TrainConfig,
    slow_round: u64,
    delay: Duration,
) -> (Vec<RoundRecord>, tma_train::RunResult) {
    let p = prep(c);
    let model = build_model(c, p.model_shape()).unwrap();
    let init = initial_params(c, &model);
    let clock = ManualClock::default();
    let mut coord = LateRound {
        n: p.trainers.len(),
        params: init.data.clone(),
        clock: clock.clone(),
        slow_round,
        delay,
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let mut rec = Record(Vec::new(), Vec::new());
    let mut exchange = ModelAveraging::new(average_weights(c, &p), None);
    let ctx = Coordinated {
        prep: &p,
        cfg: c,
        model: &model,
        clock: &clock,
        eval_pool: &pool,
        stop: None,
        sync_ramp: c.effective_sync_ramp(),
        trainer_gate: None,
    };
    let r = coordinate(&mut coord, &mut exchange, &ctx, init, &mut rec, None).unwrap();
    (rec.0, r)
}

/// Decision 0007: after a round that formed late (here round 2 waited 2.5 s, as for a lost
/// trainer's deadline), the slots that passed meanwhile are skipped: the next round is at the
/// next slot of the `k * sync_every` grid, not a burst of rounds back to back (before: rounds
/// at 1, 4.5, 4.5, 4.5, 5, 6, 7 s).
#[test]
fn a_late_round_skips_the_missed_slots_instead_of_rounds_back_to_back() {
    let c = TrainConfig {
        sync_every: Duration::from_secs(1),
        time_limit: Duration::from_secs(7),
        sync_ramp: 0,
        ..cfg(Method::RandomTma, Task::Node)
    };
    let (rec, r) = run_with_a_late_round(&c, 2, Duration::from_millis(2500));
    let at: Vec<f64> = rec.iter().map(|r| r.elapsed_s).collect();
    assert_eq!(at, vec![1.0, 4.5, 5.0, 6.0, 7.0]);
    // the round says where its 2.5 s went: all of it waiting for the trainers' contributions
    let late: Vec<Option<Late>> = rec.iter().map(|r| r.late).collect();
    let trainers = |s: f64| {
        Some(Late {
            validation_s: 0.0,
            trainers_s: s,
        })
    };
    assert_eq!(late, vec![None, trainers(2.5), None, None, None]);
    let numbers: Vec<u64> = rec.iter().map(|r| r.round).collect();
    assert_eq!(numbers, vec![1, 2, 3, 4, 5]);
    assert_eq!(r.summary.rounds, 5);
    assert!(!r.summary.interrupted);
    // regression (fresh-clone trial): the last round, due at the time limit, skips no slot
    // but was late all the same; its record said nothing of it
    let (rec, _) = run_with_a_late_round(&c, 7, Duration::from_millis(2500));
    let at: Vec<f64> = rec.iter().map(|r| r.elapsed_s).collect();
    assert_eq!(at, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 9.5]);
    let skipped: Vec<u64> = rec.iter().map(|r| r.skipped_slots).collect();
    assert_eq!(skipped, vec![0; 7]);
    let late: Vec<Option<Late>> = rec.iter().map(|r| r.late).collect();
    assert_eq!(late[6], trainers(2.5));
    assert_eq!(late[..6], [None; 6]);
}

/// Decision 0015: with `sync_ramp` N the first span is cut into N equal spans, then the
/// regular grid; a late ramp round skips the ramp slots that passed (here the round due at
/// 1.0 s formed at 2.6 s: the ramp slot 1.5 s and the regular 2.0 s are skipped).
#[test]
fn ramp_rounds_cut_the_first_span_before_the_grid() {
    let run = |ramp: u32, slow_round: u64, delay_ms: u64| {
        let c = TrainConfig {
            sync_every: Duration::from_secs(2),
            time_limit: Duration::from_secs(6),
            sync_ramp: ramp,
            ..cfg(Method::RandomTma, Task::Node)
        };
        let (rec, _) = run_with_a_late_round(&c, slow_round, Duration::from_millis(delay_ms));
        let at: Vec<f64> = rec.iter().map(|r| r.elapsed_s).collect();
        let skipped: Vec<u64> = rec.iter().map(|r| r.skipped_slots).collect();
        let late: Vec<Option<Late>> = rec.iter().map(|r| r.late).collect();
        (at, skipped, late)
    };
    // ramp 4 on 2 s spans: 0.5, 1.0, 1.5, then 2, 4, 6 (the limit)
    let (at, skipped, _) = run(4, 0, 0);
    assert_eq!(at, vec![0.5, 1.0, 1.5, 2.0, 4.0, 6.0]);
    assert_eq!(skipped, vec![0; 6]);
    // no ramp (0 or 1): the plain grid
    let (at, _, _) = run(0, 0, 0);
    assert_eq!(at, vec![2.0, 4.0, 6.0]);
    let (at, _, _) = run(1, 0, 0);
    assert_eq!(at, vec![2.0, 4.0, 6.0]);
    // round 2 (due at 1.0 s) waits 1.6 s: formed at 2.6 s, the slots 1.5 (ramp) and 2.0
    // (regular) passed and are skipped; the next round is at 4 s
    let (at, skipped, late) = run(4, 2, 1600);
    assert_eq!(at, vec![0.5, 2.6, 4.0, 6.0]);
    assert_eq!(skipped, vec![0, 2, 0, 0]);
    // where round 2's 1.6 s went: the trainers
    assert_eq!(
        late[1],
        Some(Late {
            validation_s: 0.0,
            trainers_s: 1.6
        })
    );
}

fn contribution(trainer: usize, params: Vec<f32>) -> Contribution {
    Contribution {
        trainer,
        params,
        report: TrainerReport {
            steps: 10,
            epochs: 1,
            loss_sum: 1.0,
            loss_count: 1,
        },
    }
}

/// Parameters of trainer `t`: the init shifted by a per-trainer, per-coordinate amount.
fn shifted(init: &ParamSet, t: usize) -> Vec<f32> {
    init.data
        .iter()
        .enumerate()
        .map(|(i, &x)| x + ((i % 7) as f32 - 3.0) * 0.01 * (t as f32 + 1.0))
        .collect()
}

struct Record(Vec<RoundRecord>, Vec<Vec<f32>>);
impl Observer for Record {
    fn on_round(&mut self, r: &RoundRecord) -> Result<(), tma_train::TrainError> {
        self.0.push(r.clone());
        Ok(())
    }
    fn on_round_model(
        &mut self,
        _r: &RoundRecord,
        params: &[f32],
    ) -> Result<(), tma_train::TrainError> {
        self.1.push(params.to_vec());
        Ok(())
    }
}

/// Runs `coordinate` over a scripted transport with a manual clock: `rounds` rounds of 1 s.
fn scripted_run(
    c: &TrainConfig,
    p: &Prepared,
    script: BTreeMap<u64, Vec<Contribution>>,
    corrector: Option<&mut dyn Corrector>,
) -> (Scripted, Record, ParamSet) {
    let model = build_model(c, p.model_shape()).unwrap();
    let init = initial_params(c, &model);
    let mut coord = Scripted {
        n: p.trainers.len(),
        rounds: script,
        alive: vec![true; p.trainers.len()],
        replies: Vec::new(),
        initial: None,
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let mut rec = Record(Vec::new(), Vec::new());
    let clock = ManualClock::default();
    let weights = average_weights(c, p);
    let mut exchange = ModelAveraging::new(
        weights,
        corrector.map(|k| Box::new(k) as Box<dyn Corrector + '_>),
    );
    let ctx = Coordinated {
        prep: p,
        cfg: c,
        model: &model,
        clock: &clock,
        eval_pool: &pool,
        stop: None,
        sync_ramp: c.effective_sync_ramp(),
        trainer_gate: None,
    };
    coordinate(
        &mut coord,
        &mut exchange,
        &ctx,
        init.clone(),
        &mut rec,
        None,
    )
    .unwrap();
    (coord, rec, init)
}

fn mean(models: &[&[f32]], weights: &[f64]) -> Vec<f32> {
    let mut out = vec![0f32; models[0].len()];
    average_models(models, weights, &mut out);
    out
}

#[test]
fn llcg_correction_changes_the_average_and_trainers_receive_the_corrected_model() {
    let c = TrainConfig {
        sync_every: Duration::from_secs(1),
        time_limit: Duration::from_secs(1),
        ..cfg(Method::Llcg, Task::Node)
    };
    let p = prep(&c);
    let model = build_model(&c, p.model_shape()).unwrap();
    let init = initial_params(&c, &model);
    let ts: Vec<Vec<f32>> = (0..3).map(|t| shifted(&init, t)).collect();
    let script = BTreeMap::from([(1, (0..3).map(|t| contribution(t, ts[t].clone())).collect())]);
    let mut llcg = Llcg::new(&p, &c, 3, model.clone(), init.clone());
    let (coord, rec, _) = scripted_run(&c, &p, script, Some(&mut llcg));
    assert_eq!(llcg.total_steps, 2, "llcg_steps = 2 per round, one round");

    let avg = mean(&[&ts[0], &ts[1], &ts[2]], &[1.0; 3]);
    // expected: two Adam steps of a fresh full-graph trainer from the plain average
    let mut reference = Trainer::new(full_graph_data(&p, 3), model, init, &c);
    reference.set_params(&avg);
    let losses = [reference.step(), reference.step()];
    let corrected = reference.params().data.clone();
    assert_ne!(corrected, avg, "correction steps must move the model");

    // round 1's reply (to every participant) is the corrected model, not the plain mean
    let (to, sent) = &coord.replies[0];
    assert_eq!(to, &vec![0, 1, 2]);
    assert_eq!(sent, &corrected);
    // and that is the model evaluated and reported for the round
    assert_eq!(rec.1[0], corrected);
    assert_eq!(rec.0[0].participants, vec![0, 1, 2]);
    // the round's record says what the correction did: its steps and their mean loss
    let done = rec.0[0]
        .correction
        .expect("an llcg round records its correction");
    assert_eq!(done.steps, 2);
    assert_eq!(
        done.loss,
        ((losses[0] as f64 + losses[1] as f64) / 2.0) as f32
    );
    assert!(losses[0].is_finite() && losses[0] > 0.0, "{losses:?}");
    assert!(done.secs > 0.0 && done.secs < 60.0, "{}", done.secs);
}

#[test]
fn llcg_correction_sees_the_whole_training_graph() {
    let c = cfg(Method::Llcg, Task::Link);
    let p = prep(&c);
    let full = full_graph_data(&p, 3);
    assert_eq!(full.num_nodes(), p.graph.num_nodes());
    let tma_train::data::TrainTarget::Link { edges } = &full.target else {
        panic!("link target expected")
    };
    let parts: usize = p
        .trainers
        .iter()
        .map(|t| match &t.target {
            tma_train::data::TrainTarget::Link { edges } => edges.len(&t.graph),
            _ => 0,
        })
        .sum();
    // METIS parts lose the cut edges; the corrector trains on all of them
    let edges = edges.len(&full.graph);
    assert!(edges > parts, "{edges} vs {parts}");
}

#[test]
fn failed_trainer_is_excluded_from_the_next_mean() {
    let c = TrainConfig {
        sync_every: Duration::from_secs(1),
        time_limit: Duration::from_secs(3),
        ..cfg(Method::RandomTma, Task::Node)
    };
    let p = prep(&c);
    let model = build_model(&c, p.model_shape()).unwrap();
    let init = initial_params(&c, &model);
    let ts: Vec<Vec<f32>> = (0..3).map(|t| shifted(&init, t)).collect();
    // round 1: everyone; rounds 2 and 3: trainer 1 is gone
    let script = BTreeMap::from([
        (1, (0..3).map(|t| contribution(t, ts[t].clone())).collect()),
        (
            2,
            vec![
                contribution(0, ts[0].clone()),
                contribution(2, ts[2].clone()),
            ],
        ),
        (
            3,
            vec![
                contribution(0, ts[0].clone()),
                contribution(2, ts[2].clone()),
            ],
        ),
    ]);
    let (coord, rec, _) = scripted_run(&c, &p, script, None);
    assert_eq!(
        coord.replies[0].1,
        mean(&[&ts[0], &ts[1], &ts[2]], &[1.0; 3])
    );
    let survivors = mean(&[&ts[0], &ts[2]], &[1.0; 2]);
    assert_eq!(coord.replies[1], (vec![0, 2], survivors.clone()));
    assert_eq!(rec.0.len(), 3);
    assert_eq!(rec.0[1].participants, vec![0, 2]);
    assert_eq!(rec.0[1].missing, vec![1]);
    assert_eq!(rec.0[2].missing, vec![1]);
    // no correction without a corrector: nothing in the record
    assert!(rec.0.iter().all(|r| r.correction.is_none()));
}

/// The plateau hold (docs/decisions/0037-plateau-hold.md): round 1 averages a sound model;
/// from round 2 on every trainer sends a diverged one (NaN), whose validations are falls. After
/// `plateau_patience` of them the coordinator sends round 1's model back, bit for bit, and
/// halves the server step; with the hold off the NaN mean goes out every round.
#[test]
fn a_plateau_hold_sends_the_best_model_back_after_patience_falls() {
    let run = |patience: u32| {
        let c = TrainConfig {
            sync_every: Duration::from_secs(1),
            sync_ramp: 0,
            time_limit: Duration::from_secs(12),
            plateau_patience: patience,
            ..cfg(Method::RandomTma, Task::Node)
        };
        let p = prep(&c);
        let model = build_model(&c, p.model_shape()).unwrap();
        let init = initial_params(&c, &model);
        let ts: Vec<Vec<f32>> = (0..3).map(|t| shifted(&init, t)).collect();
        let nan = vec![f32::NAN; init.data.len()];
        let mut script: BTreeMap<u64, Vec<Contribution>> =
            BTreeMap::from([(1, (0..3).map(|t| contribution(t, ts[t].clone())).collect())]);
        for k in 2..=12 {
            script.insert(k, (0..3).map(|t| contribution(t, nan.clone())).collect());
        }
        let (coord, rec, _) = scripted_run(&c, &p, script, None);
        (coord, rec, mean(&[&ts[0], &ts[1], &ts[2]], &[1.0; 3]))
    };
    let (coord, rec, first) = run(3);
    assert_eq!(coord.replies[0].1, first);
    let first_val = rec.0[0].val.value;
    assert!(first_val.is_finite(), "{:?}", rec.0[0]);
    let held: Vec<&RoundRecord> = rec.0.iter().filter(|r| r.restored.is_some()).collect();
    assert!(!held.is_empty(), "no hold: {:?}", rec.0);
    let h = held[0];
    // rounds 2-4 fell; the evaluator runs at most two rounds behind, so round 6 at the latest
    assert!(h.round >= 5 && h.round <= 6, "{h:?}");
    assert_eq!(h.restored, Some(1));
    assert_eq!(h.server_step, Some(0.5));
    // round 1's model goes out again, bit for bit, and validates to the same value
    assert_eq!(coord.replies[h.round as usize - 1].1, first);
    assert_eq!(h.val.value, first_val);
    // the rounds before the hold sent the NaN mean on, at the full step
    assert!(rec.0[1..h.round as usize - 1]
        .iter()
        .all(|r| r.server_step.is_none() && r.val.value.is_nan()));
    // later falls hold again with half the step each time
    let steps: Vec<f32> = held.iter().map(|r| r.server_step.unwrap()).collect();
    assert!(steps.len() >= 2, "{:?}", rec.0);
    assert!(steps.windows(2).all(|w| w[1] == w[0] * 0.5), "{steps:?}");
    // off: nothing held, the NaN mean every round
    let (coord, rec, _) = run(0);
    assert!(rec
        .0
        .iter()
        .all(|r| r.restored.is_none() && r.server_step.is_none()));
    assert!(coord.replies[1..12].iter().all(|(_, p)| p[0].is_nan()));
}

#[test]
fn weighted_averaging_uses_nodes_or_edges() {
    let base = TrainConfig {
        sync_every: Duration::from_secs(1),
        time_limit: Duration::from_secs(1),
        ..cfg(Method::PsgdPa, Task::Node)
    };
    let p = prep(&base);
    let nodes: Vec<f64> = p.trainers.iter().map(|t| t.num_nodes() as f64).collect();
    let edges: Vec<f64> = p.trainers.iter().map(|t| t.num_edges() as f64).collect();
    assert_eq!(
        nodes.iter().sum::<f64>(),
        600.0,
        "parts cover every node once"
    );
    for (w, expect) in [
        (AverageWeight::Uniform, vec![1.0; 3]),
        (AverageWeight::Nodes, nodes),
        (AverageWeight::Edges, edges),
    ] {
        let c = TrainConfig {
            average_weight: w,
            ..base.clone()
        };
        assert_eq!(average_weights(&c, &p), expect, "{w:?}");
        let model = build_model(&c, p.model_shape()).unwrap();
        let init = initial_params(&c, &model);
        let ts: Vec<Vec<f32>> = (0..3).map(|t| shifted(&init, t)).collect();
        let script =
            BTreeMap::from([(1, (0..3).map(|t| contribution(t, ts[t].clone())).collect())]);
        let (coord, _, _) = scripted_run(&c, &p, script, None);
        assert_eq!(
            coord.replies[0].1,
            mean(&[&ts[0], &ts[1], &ts[2]], &expect),
            "{w:?}"
        );
    }
}

#[test]
fn psgd_pa_and_llcg_train_on_the_metis_partition() {
    let c = cfg(Method::PsgdPa, Task::Node);
    let p = prep(&c);
    let ds = generate_sbm(&SbmConfig {
        num_nodes: 600,
        avg_degree: 10.0,
        feature_dim: 8,
        num_classes: 4,
        seed: 3,
        ..SbmConfig::default()
    });
    let metis = tma_partition::partition(
        &ds.graph,
        &tma_partition::PartitionConfig {
            method: tma_partition::PartitionMethod::Metis,
            clustering: tma_partition::Clustering::Auto,
            num_parts: 3,
            drop_parts: 0,
            seed: c.seed,
        },
    )
    .unwrap();
    assert_eq!(p.partition_hash.as_deref(), Some(metis.hash_hex().as_str()));
    for (t, data) in p.trainers.iter().enumerate() {
        let part = tma_partition::build_part(&ds.graph, &metis, t);
        assert_eq!(data.global_ids, part.global_ids, "trainer {t}");
    }
    let l = prep(&TrainConfig {
        method: Method::Llcg,
        ..c.clone()
    });
    assert_eq!(l.partition_hash, p.partition_hash);
    let r = prep(&TrainConfig {
        method: Method::RandomTma,
        ..c
    });
    assert_ne!(r.partition_hash, p.partition_hash);
}

#[test]
fn ggs_shares_are_disjoint_and_cover_the_training_examples() {
    let c = cfg(Method::Ggs, Task::Link);
    let p = prep(&c);
    let full = full_graph_data(&p, 0);
    let shares = share_examples(&full, 4, 4, 1);
    let mut all: Vec<(u32, u32)> = Vec::new();
    for s in &shares {
        assert_eq!(s.num_nodes(), p.graph.num_nodes(), "whole graph everywhere");
        let tma_train::data::TrainTarget::Link { edges } = &s.target else {
            panic!()
        };
        all.extend(edges.to_vec(&s.graph));
    }
    let tma_train::data::TrainTarget::Link { edges } = &full.target else {
        panic!()
    };
    let edges = edges.to_vec(&full.graph);
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "shares are disjoint");
    let mut e = edges.clone();
    e.sort();
    assert_eq!(all, e, "shares cover every training edge");
    // prepare() gives ggs trainers those shares; dropped shares are nobody's
    assert_eq!(p.trainers.len(), 3);
    assert_eq!(share_examples(&full, 4, 3, 1).len(), 3);
}

#[test]
fn ggs_trainers_hold_identical_parameters_after_every_step() {
    let c = TrainConfig {
        sync_every: Duration::from_millis(300),
        time_limit: Duration::from_millis(900),
        weight_decay: 1e-3,
        clip_from_epoch: 1,
        ..cfg(Method::Ggs, Task::Node)
    };
    let p = prep(&c);
    let model = build_model(&c, p.model_shape()).unwrap();
    let init = initial_params(&c, &model);
    let (mut coord, endpoints) = InProcess::new(p.trainers.len());
    let clock: Arc<RealClock> = Arc::new(RealClock::start());
    let (tx, rx) = mpsc::channel::<(usize, u64, Vec<f32>)>();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let result = std::thread::scope(|s| {
        for (data, mut ep) in p.trainers.iter().zip(endpoints) {
            let trainer = Trainer::new(data.clone(), model.clone(), init.clone(), &c);
            let tx = tx.clone();
            let clock = clock.clone();
            let id = data.trainer;
            s.spawn(move || {
                ggs_worker(trainer, &mut ep, clock, None, |step, params| {
                    tx.send((id, step, params.data.clone())).unwrap();
                })
            });
        }
        drop(tx);
        let ctx = Coordinated {
            prep: &p,
            cfg: &c,
            model: &model,
            clock: &*clock,
            eval_pool: &pool,
            stop: None,
            sync_ramp: c.effective_sync_ramp(),
            trainer_gate: None,
        };
        coordinate(
            &mut coord,
            &mut GradientSync::new(&c, &init),
            &ctx,
            init.clone(),
            &mut Quiet,
            None,
        )
        .unwrap()
    });
    let mut by_step: BTreeMap<u64, Vec<(usize, Vec<f32>)>> = BTreeMap::new();
    for (t, step, params) in rx {
        by_step.entry(step).or_default().push((t, params));
    }
    let steps = by_step.len() as u64;
    assert!(steps >= 3, "only {steps} steps in 0.9 s");
    assert_eq!(
        *by_step.keys().last().unwrap(),
        steps,
        "steps 1..=S, none skipped"
    );
    for (step, ps) in &by_step {
        assert_eq!(ps.len(), 3, "step {step}: every trainer applied it");
        for (t, x) in ps {
            assert_eq!(
                x, &ps[0].1,
                "step {step}: trainer {t} differs from trainer {}",
                ps[0].0
            );
        }
    }
    assert_ne!(
        by_step[&1][0].1, init.data,
        "the first step moves the model"
    );
    // the coordinator's copy (evaluated, saved) is the trainers' final model
    assert_eq!(by_step[&steps][0].1, result.final_params.data);
    assert_eq!(result.summary.steps_per_trainer, vec![steps; 3]);
}

/// Issue 14, GGS: a trainer that stalls (here 1 s inside a step, with a 100 ms deadline)
/// misses steps without delaying them; when it answers again it is sent the current parameters
/// and takes part in step with the others: from then on its parameters are those of every
/// other trainer at every step. (Before, it was answered with nothing and went on from its
/// stale parameters for good.)
#[test]
fn ggs_trainer_that_stalls_misses_steps_then_resyncs() {
    let c = TrainConfig {
        sync_every: Duration::from_millis(500),
        time_limit: Duration::from_millis(2500),
        round_timeout: Duration::from_millis(100),
        ..cfg(Method::Ggs, Task::Node)
    };
    let p = prep(&c);
    let model = build_model(&c, p.model_shape()).unwrap();
    let init = initial_params(&c, &model);
    let (mut coord, endpoints) = InProcess::new(p.trainers.len());
    let clock: Arc<RealClock> = Arc::new(RealClock::start());
    let (tx, rx) = mpsc::channel::<(usize, u64, Vec<f32>)>();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let result = std::thread::scope(|s| {
        for (data, mut ep) in p.trainers.iter().zip(endpoints) {
            let trainer = Trainer::new(data.clone(), model.clone(), init.clone(), &c);
            let tx = tx.clone();
            let clock = clock.clone();
            let id = data.trainer;
            s.spawn(move || {
                ggs_worker(trainer, &mut ep, clock, None, |step, params| {
                    tx.send((id, step, params.data.clone())).unwrap();
                    if id == 1 && step == 3 {
                        std::thread::sleep(Duration::from_secs(1));
                    }
                })
            });
        }
        drop(tx);
        let ctx = Coordinated {
            prep: &p,
            cfg: &c,
            model: &model,
            clock: &*clock,
            eval_pool: &pool,
            stop: None,
            sync_ramp: c.effective_sync_ramp(),
            trainer_gate: None,
        };
        coordinate(
            &mut coord,
            &mut GradientSync::new(&c, &init),
            &ctx,
            init.clone(),
            &mut Quiet,
            None,
        )
        .unwrap()
    });
    let mut by_step: BTreeMap<u64, BTreeMap<usize, Vec<f32>>> = BTreeMap::new();
    for (t, step, params) in rx {
        by_step.entry(step).or_default().insert(t, params);
    }
    let steps = *by_step.keys().last().unwrap();
    // trainer 1 missed steps while it stalled (the others went on without waiting for it)
    let missed: Vec<u64> = (4..=steps)
        .filter(|s| by_step.get(s).is_some_and(|m| !m.contains_key(&1)))
        .collect();
    assert!(
        missed.len() >= 3,
        "trainer 1 missed {missed:?} of {steps} steps"
    );
    // ... and is back, in step: the steps after its return have all three, identical
    let back = by_step
        .iter()
        .filter(|(s, m)| **s > missed[missed.len() - 1] && m.len() == 3)
        .count();
    assert!(back >= 3, "{back} steps with all three after the stall");
    // (compared with the step's first trainer: on a loaded machine any trainer, trainer 0
    // included, may miss an exchange by the 100 ms round timeout; a fresh-clone run failed
    // indexing trainer 0 in a step it had missed)
    for (step, m) in by_step.range(missed[missed.len() - 1] + 1..) {
        let (first_t, first) = m.iter().next().unwrap();
        for (t, x) in m {
            assert_eq!(
                x, first,
                "step {step}: trainer {t} differs from trainer {first_t}"
            );
        }
    }
    assert_eq!(
        by_step[&steps].values().next().unwrap(),
        &result.final_params.data
    );
    assert!(result.summary.failed_trainers.is_empty());
}

/// Regression (issue 14): a run that loses every trainer before its time limit is incomplete,
/// not finished: its summary is marked interrupted, by `trainers_lost` (the CLI then exits
/// with an error and says how to resume).
#[test]
fn run_that_loses_every_trainer_before_its_time_limit_is_interrupted() {
    let c = TrainConfig {
        sync_every: Duration::from_millis(100),
        time_limit: Duration::from_secs(3),
        ..cfg(Method::RandomTma, Task::Node)
    };
    let p = prep(&c);
    let at = Duration::from_millis(450);
    let fail = FailPlan::from([(0, at), (1, at), (2, at)]);
    let mut rec = Record(Vec::new(), Vec::new());
    let t0 = std::time::Instant::now();
    let r = run_in_process(
        &p,
        &c,
        &fail,
        Arc::new(RealClock::start()),
        &mut rec,
        Extras::default(),
    )
    .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert!(!rec.0.is_empty());
    assert!(r.summary.interrupted);
    assert_eq!(
        r.summary.interrupted_by,
        Some(tma_train::StopCause::TrainersLost)
    );
    assert_eq!(r.summary.failed_trainers.len(), 3);
    let json = serde_json::to_value(&r.summary).unwrap();
    assert_eq!(json["interrupted_by"], "trainers_lost");
}

/// A GGS trainer's side of a coordinator that is between exchanges: it answers every
/// contribution at once with its current model (as the in-process and MPI transports answer one
/// for an exchange other than the one gathered), and calls exchange 1 only during the trainer's
/// fifth contribution, exchange 2 never; the eighth contribution is told to stop.
struct BetweenExchanges {
    due: u64,
    sent: Vec<u64>,
    model: Arc<Vec<f32>>,
}

impl tma_train::engines::cluster::TrainerEndpoint for BetweenExchanges {
    fn initial_params(&mut self) -> Option<Arc<Vec<f32>>> {
        Some(self.model.clone())
    }
    fn due_round(&self) -> u64 {
        self.due
    }
    fn join_round(&mut self, round: u64, _params: &[f32], _report: TrainerReport) -> Option<Reply> {
        self.sent.push(round);
        if self.sent.len() == 5 {
            self.due = 1;
        }
        if self.sent.len() == 8 {
            return Some(Reply::Stop(self.model.clone()));
        }
        Some(Reply::Continue(self.model.clone()))
    }
}

/// Regression (found on the citation2-like graph, docs/results-scale.md): a GGS trainer whose
/// contribution came before the coordinator called its exchange was answered with the current
/// model, counted that as a step and joined the next exchange, and so on: it ran ahead for good
/// and the coordinator waited for an exchange nobody would join (10-minute runs hung past their
/// limit). It now joins the exchange not yet called again, and never one past the next.
#[test]
fn a_ggs_trainer_answered_before_its_exchange_is_called_joins_it_again() {
    let c = cfg(Method::Ggs, Task::Node);
    let p = prep(&c);
    let model = build_model(&c, p.model_shape()).unwrap();
    let init = initial_params(&c, &model);
    let trainer = Trainer::new(p.trainers[0].clone(), model, init.clone(), &c);
    let mut ep = BetweenExchanges {
        due: 0,
        sent: Vec::new(),
        model: Arc::new(init.data.clone()),
    };
    let mut stepped = Vec::new();
    let clock: Arc<RealClock> = Arc::new(RealClock::start());
    let exit = ggs_worker(trainer, &mut ep, clock, None, |s, _| stepped.push(s));
    assert!(matches!(
        exit,
        tma_train::engines::trainer::TrainerExit::Stopped
    ));
    // exchange 1 until it was called (during the 5th), then exchange 2, never called
    assert_eq!(ep.sent, [1, 1, 1, 1, 1, 2, 2, 2]);
    // steps: exchange 1 once, and the stop
    assert_eq!(stepped, [1, 2]);
}

#[test]
fn ggs_run_survives_a_failed_trainer() {
    let c = TrainConfig {
        sync_every: Duration::from_millis(300),
        time_limit: Duration::from_millis(1200),
        ..cfg(Method::Ggs, Task::Node)
    };
    let p = prep(&c);
    let fail = FailPlan::from([(1, Duration::from_millis(400))]);
    let mut rec = Record(Vec::new(), Vec::new());
    let r = run_in_process(
        &p,
        &c,
        &fail,
        Arc::new(RealClock::start()),
        &mut rec,
        Extras::default(),
    )
    .unwrap();
    assert_eq!(r.summary.failed_trainers.len(), 1);
    assert_eq!(r.summary.failed_trainers[0].0, 1);
    let last = rec.0.last().unwrap();
    assert_eq!(last.participants, vec![0, 2]);
    assert_eq!(last.missing, vec![1]);
    assert!(r.summary.steps_per_trainer[1] < r.summary.steps_per_trainer[0]);
}

#[test]
fn trainer_failing_mid_run_is_excluded_and_the_run_finishes() {
    let c = TrainConfig {
        sync_every: Duration::from_millis(250),
        time_limit: Duration::from_millis(1000),
        sync_ramp: 0,
        ..cfg(Method::RandomTma, Task::Node)
    };
    let p = prep(&c);
    let fail = FailPlan::from([(2, Duration::from_millis(600))]);
    let mut rec = Record(Vec::new(), Vec::new());
    let r = run_in_process(
        &p,
        &c,
        &fail,
        Arc::new(RealClock::start()),
        &mut rec,
        Extras::default(),
    )
    .unwrap();
    assert_eq!(rec.0.len(), 4, "every round happens");
    assert_eq!(rec.0[0].participants, vec![0, 1, 2], "before the failure");
    for r in &rec.0[2..] {
        assert_eq!(r.participants, vec![0, 1]);
        assert_eq!(r.missing, vec![2]);
    }
    assert_eq!(r.summary.failed_trainers.len(), 1);
    assert!(r.summary.final_val.value.is_finite());
}

#[test]
fn step_count_schedule_makes_round_k_after_k_times_n_steps() {
    let c = TrainConfig {
        sync_every_steps: 3,
        time_limit: Duration::from_millis(800),
        ..cfg(Method::RandomTma, Task::Node)
    };
    let p = prep(&c);
    let mut rec = Record(Vec::new(), Vec::new());
    let r = run_in_process(
        &p,
        &c,
        &FailPlan::new(),
        Arc::new(RealClock::start()),
        &mut rec,
        Extras::default(),
    )
    .unwrap();
    assert!(rec.0.len() >= 3, "only {} rounds", rec.0.len());
    let (last, before) = rec.0.split_last().unwrap();
    for r in before {
        assert_eq!(r.steps, vec![3 * r.round; 3], "round {}", r.round);
    }
    // the round in flight at the time limit is called as the last one: joined at once, after
    // at most 3 more steps
    for &s in &last.steps {
        assert!(
            (3 * (last.round - 1)..=3 * last.round).contains(&s),
            "{last:?}"
        );
    }
    assert_eq!(r.summary.steps_per_trainer, last.steps);
    assert!(last.elapsed_s >= 0.8);
}

/// Regression (issue 14): with a step count no trainer reaches, the time limit still ends the
/// run (it used to wait forever for the round): the round in flight is called as the last one
/// at the limit and every trainer joins it at once with its parameters.
#[test]
fn step_count_schedule_never_reached_still_ends_at_the_time_limit() {
    let c = TrainConfig {
        sync_every_steps: 1_000_000_000,
        time_limit: Duration::from_millis(600),
        ..cfg(Method::RandomTma, Task::Node)
    };
    let p = prep(&c);
    let (tx, rx) = mpsc::channel();
    let t0 = std::time::Instant::now();
    std::thread::spawn(move || {
        let mut rec = Record(Vec::new(), Vec::new());
        let r = run_in_process(
            &p,
            &c,
            &FailPlan::new(),
            Arc::new(RealClock::start()),
            &mut rec,
            Extras::default(),
        );
        let _ = tx.send((r, rec.0));
    });
    let (r, rounds) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the run did not end within 60 s of its 0.6 s time limit");
    let r = r.unwrap();
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    assert_eq!(rounds.len(), 1, "{rounds:?}");
    let last = &rounds[0];
    assert_eq!(last.participants, vec![0, 1, 2]);
    assert!(last.elapsed_s >= 0.6, "{last:?}");
    assert!(
        last.steps.iter().all(|&s| s > 0),
        "trained before the limit: {last:?}"
    );
    assert!(!r.summary.interrupted);
    assert!(r.summary.final_val.value.is_finite());
}

/// A resume point after round 5 of a run whose trainers had made 100, 200 and 300 steps.
fn resume_after_round_5(c: &TrainConfig, p: &Prepared) -> tma_train::Resume {
    let init = initial_params(c, &build_model(c, p.model_shape()).unwrap());
    tma_train::Resume {
        round: 5,
        params: init.data,
        best: None,
        best_check: false,
        steps: vec![100, 200, 300],
        epochs: Vec::new(),
        elapsed: std::time::Duration::ZERO,
        plateau: None,
    }
}

#[test]
fn resumed_run_counts_steps_from_the_start_of_the_run() {
    // the step-count schedule counts each trainer's steps since it (re)started: after a resume
    // from round 5, round 5 + k comes after 3k more steps, recorded on top of the saved counts
    let c = TrainConfig {
        sync_every_steps: 3,
        time_limit: Duration::from_millis(2500),
        ..cfg(Method::RandomTma, Task::Node)
    };
    let p = prep(&c);
    let mut rec = Record(Vec::new(), Vec::new());
    let r = run_in_process(
        &p,
        &c,
        &FailPlan::new(),
        Arc::new(RealClock::start()),
        &mut rec,
        Extras {
            resume: Some(resume_after_round_5(&c, &p)),
            stop: None,
        },
    )
    .unwrap();
    assert!(rec.0.len() >= 3, "only {} rounds", rec.0.len());
    assert_eq!(rec.0[0].round, 6);
    // every round but the last comes after exactly 3 more steps; the last one is cut by the
    // time limit, which can stop the trainers between two step-count rounds
    let (last, counted) = rec.0.split_last().unwrap();
    for r in counted {
        let k = 3 * (r.round - 5);
        assert_eq!(
            r.steps,
            vec![100 + k, 200 + k, 300 + k],
            "round {}",
            r.round
        );
    }
    let k = 3 * (last.round - 5);
    for (t, (&s, base)) in last.steps.iter().zip([100, 200, 300]).enumerate() {
        assert!(
            s >= base + k - 3 && s <= base + k,
            "last round {}: trainer {t} at {s} steps, expected {} <= steps <= {}",
            last.round,
            base + k - 3,
            base + k
        );
    }
    assert_eq!(r.summary.steps_per_trainer, last.steps);
}

#[test]
fn resumed_ggs_run_counts_steps_from_the_start_of_the_run() {
    let c = TrainConfig {
        sync_every: Duration::from_millis(200),
        time_limit: Duration::from_millis(600),
        ..cfg(Method::Ggs, Task::Node)
    };
    let p = prep(&c);
    let mut rec = Record(Vec::new(), Vec::new());
    let r = run_in_process(
        &p,
        &c,
        &FailPlan::new(),
        Arc::new(RealClock::start()),
        &mut rec,
        Extras {
            resume: Some(resume_after_round_5(&c, &p)),
            stop: None,
        },
    )
    .unwrap();
    assert!(!rec.0.is_empty());
    assert_eq!(rec.0[0].round, 6);
    for r in &rec.0 {
        assert_eq!(r.participants, vec![0, 1, 2], "round {}", r.round);
        // GGS steps in lockstep: every trainer made the same number s >= 1 of steps since
        // the resume, on top of its saved count
        let s = r.steps[0] - 100;
        assert!(s >= 1, "round {}: {:?}", r.round, r.steps);
        assert_eq!(
            r.steps,
            vec![100 + s, 200 + s, 300 + s],
            "round {}",
            r.round
        );
    }
    assert_eq!(r.summary.steps_per_trainer, rec.0.last().unwrap().steps);
}

/// Check copies a trainer left: (check id, steps, parameters).
type Deposits = Arc<std::sync::Mutex<Vec<(u64, u64, Vec<f32>)>>>;

/// A trainer transport that stops the trainer after `steps` optimizer steps (one
/// `due_round` call per loop turn, i.e. per step) and, with `checks`, calls a validation
/// check before every step; keeps the deposits and the parameters the trainer ended with.
struct CheckScript {
    init: Option<Arc<Vec<f32>>>,
    steps: u64,
    turns: std::cell::Cell<u64>,
    checks: bool,
    deposits: Deposits,
    last: Arc<std::sync::Mutex<Vec<f32>>>,
}

impl tma_train::engines::cluster::TrainerEndpoint for CheckScript {
    fn initial_params(&mut self) -> Option<Arc<Vec<f32>>> {
        self.init.take()
    }
    fn due_round(&self) -> u64 {
        let t = self.turns.get() + 1;
        self.turns.set(t);
        if t > self.steps {
            u64::MAX
        } else {
            0
        }
    }
    fn join_round(&mut self, _round: u64, params: &[f32], _r: TrainerReport) -> Option<Reply> {
        *self.last.lock().unwrap() = params.to_vec();
        Some(Reply::Stop(Arc::new(Vec::new())))
    }
    fn due_check(&self) -> u64 {
        if self.checks {
            self.turns.get() + 1
        } else {
            0
        }
    }
    fn deposit_check(&mut self, id: u64, params: &[f32], steps: u64, _epochs: u64) {
        self.deposits
            .lock()
            .unwrap()
            .push((id, steps, params.to_vec()));
    }
}

#[test]
fn a_validation_check_copies_the_parameters_and_leaves_training_unchanged() {
    let c = cfg(Method::RandomTma, Task::Node);
    let p = prep(&c);
    let model = build_model(&c, p.model_shape()).unwrap();
    let init = initial_params(&c, &model);
    let run = |checks: bool| {
        let deposits: Deposits = Arc::new(std::sync::Mutex::new(Vec::new()));
        let last = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut ep = CheckScript {
            init: Some(Arc::new(init.data.clone())),
            steps: 6,
            turns: std::cell::Cell::new(0),
            checks,
            deposits: deposits.clone(),
            last: last.clone(),
        };
        let trainer = Trainer::new(p.trainers[0].clone(), model.clone(), init.clone(), &c);
        let exit = trainer.run(&mut ep, Arc::new(RealClock::start()), None);
        assert!(matches!(
            exit,
            tma_train::engines::trainer::TrainerExit::Stopped
        ));
        let d = deposits.lock().unwrap().clone();
        let l = last.lock().unwrap().clone();
        (d, l)
    };
    let (none, plain) = run(false);
    let (deposits, checked) = run(true);
    assert!(none.is_empty());
    // training moved the parameters, and the same way with checks: bit for bit
    assert_ne!(plain, init.data);
    assert_eq!(checked, plain);
    // one copy per check called, each after the steps taken so far: the first is the initial
    // model, the last the parameters the trainer ended with
    let ids: Vec<u64> = deposits.iter().map(|d| d.0).collect();
    assert_eq!(ids, (1..=7).collect::<Vec<u64>>());
    let steps: Vec<u64> = deposits.iter().map(|d| d.1).collect();
    assert_eq!(steps, (0..=6).collect::<Vec<u64>>());
    assert_eq!(deposits[0].2, init.data);
    assert_eq!(deposits[6].2, plain);
}

#[test]
fn validation_checks_between_rounds_are_recorded_and_may_be_the_best() {
    let mut c = cfg(Method::RandomTma, Task::Node);
    c.sync_every = Duration::from_millis(1000);
    c.sync_ramp = 0;
    c.val_check_interval = Duration::from_millis(250);
    c.time_limit = Duration::from_millis(2000);
    c.validate().unwrap();
    let p = prep(&c);
    let mut rec = Record(Vec::new(), Vec::new());
    let r = run_in_process(
        &p,
        &c,
        &FailPlan::new(),
        Arc::new(RealClock::start()),
        &mut rec,
        Extras::default(),
    )
    .unwrap();
    let rounds: Vec<&RoundRecord> = rec.0.iter().filter(|r| !r.check).collect();
    let checks: Vec<&RoundRecord> = rec.0.iter().filter(|r| r.check).collect();
    assert_eq!(rounds.len(), 2, "{:?}", rec.0);
    assert_eq!(r.summary.rounds, 2);
    // up to 3 checks before each round (at 0.25, 0.5, 0.75 s after it); skipped only while a
    // validation runs, which on this graph takes milliseconds
    assert!(checks.len() >= 2, "{} checks: {:?}", checks.len(), rec.0);
    let mut formed = 0u64;
    let mut last_t = 0.0;
    for (i, x) in rec.0.iter().enumerate() {
        assert!(x.elapsed_s >= last_t, "records in time order");
        last_t = x.elapsed_s;
        if x.check {
            // numbered by the rounds before it, validated, no loss of its own, all three
            // trainers' copies, steps at most the next round's
            assert_eq!(x.round, formed);
            assert!(x.val.value.is_finite());
            assert!(x.train_loss.is_nan());
            assert_eq!(x.participants, vec![0, 1, 2]);
            let next = rec.0[i..].iter().find(|r| !r.check).unwrap();
            for (a, b) in x.steps.iter().zip(&next.steps) {
                assert!(
                    a <= b,
                    "check steps {:?} after round {:?}",
                    x.steps,
                    next.steps
                );
            }
        } else {
            formed += 1;
            assert_eq!(x.round, formed);
        }
    }
    // the summary's final model is the last round's, and the best is where is_best says
    assert_eq!(r.summary.final_val.value, rounds[1].val.value);
    let best = rec.0.iter().rev().find(|r| r.is_best).unwrap();
    assert_eq!(r.summary.best_check, best.check);
    assert_eq!(r.summary.best_round, best.round);
}

#[test]
fn validation_checks_need_a_model_between_exchanges_and_a_shorter_interval() {
    let mut c = cfg(Method::RandomTma, Task::Node);
    c.sync_every = Duration::from_secs(2);
    c.val_check_interval = Duration::from_secs(2);
    assert!(c
        .validate()
        .unwrap_err()
        .contains("shorter than sync-every"));
    c.val_check_interval = Duration::from_secs(1);
    c.validate().unwrap();
    for m in [Method::Ggs, Method::Llcg] {
        c.method = m;
        let e = c.validate().unwrap_err();
        assert!(e.starts_with("val-check-interval does not apply to"), "{e}");
    }
    c.method = Method::Centralized;
    c.validate().unwrap();
    c.sync_every_steps = 10;
    assert!(c.validate().unwrap_err().contains("sync-every-steps"));
}

#[test]
fn a_resumed_run_whose_best_was_a_check_still_says_so() {
    // regression: after a resume, a best model kept from a check before the interruption was
    // reported as the round's (`best (round 5)`, no `best_check`)
    let c = TrainConfig {
        sync_every: Duration::from_millis(400),
        time_limit: Duration::from_millis(1200),
        ..cfg(Method::RandomTma, Task::Node)
    };
    let p = prep(&c);
    let mut resume = resume_after_round_5(&c, &p);
    // a best no model of this short run can beat (accuracy is at most 1)
    let unbeatable = tma_train::EvalResult {
        metric: "accuracy".into(),
        value: 2.0,
        all: Default::default(),
    };
    resume.best = Some((5, unbeatable, resume.params.clone()));
    resume.best_check = true;
    let r = run_in_process(
        &p,
        &c,
        &FailPlan::new(),
        Arc::new(RealClock::start()),
        &mut Record(Vec::new(), Vec::new()),
        Extras {
            resume: Some(resume),
            stop: None,
        },
    )
    .unwrap();
    assert_eq!(r.summary.best_round, 5);
    assert_eq!(r.summary.best_val.value, 2.0);
    assert!(r.summary.best_check);
}

/// Every trainer answers at once; the evaluation pool's only thread is kept busy from the
/// first round's validation until the second round's gather, and what the trainers' step gate
/// was at each point is recorded.
struct GateWatch {
    n: usize,
    params: Vec<f32>,
    gate: Arc<tma_train::engines::gate::StepGate>,
    /// Lets the evaluation pool go (the first round's validation finishes).
    release_pool: Option<mpsc::Sender<()>>,
    /// (round, gate held) at each gather.
    at_gather: Vec<(u64, bool)>,
    /// Gate held, each time the coordinator answered late trainers while waiting for a round.
    while_waiting: Vec<bool>,
    /// Wall time the second round's gather takes before it lets the pool go (the first
    /// round's validation is then queued at least that long when the second round forms).
    slow_gather_2: Duration,
}

impl CoordinatorEndpoint for GateWatch {
    fn num_trainers(&self) -> usize {
        self.n
    }
    fn broadcast_initial(&mut self, _params: Arc<Vec<f32>>) {}
    fn call_round(&mut self, _round: u64) {}
    fn gather(
        &mut self,
        round: u64,
        _t: Duration,
        _l: &Arc<Vec<f32>>,
        _u: Option<Duration>,
    ) -> Vec<Contribution> {
        self.at_gather.push((round, self.gate.is_held()));
        if round == 2 {
            std::thread::sleep(self.slow_gather_2);
            self.release_pool.take();
        }
        (0..self.n)
            .map(|t| contribution(t, self.params.clone()))
            .collect()
    }
    fn reply(&mut self, _to: &[usize], _reply: Reply) {}
    fn is_alive(&self, _t: usize) -> bool {
        true
    }
    fn answer_late(&mut self, _latest: &Arc<Vec<f32>>) {
        self.while_waiting.push(self.gate.is_held());
    }
}

/// A 3-round run (1 s spans on a manual clock, no ramp) against [`GateWatch`], whose second
/// round's gather takes `slow_gather_2` of wall time before the first round's validation can
/// finish.
fn gate_watch_run(slow_gather_2: Duration) -> (GateWatch, Record, tma_train::RunResult) {
    let c = TrainConfig {
        sync_every: Duration::from_secs(1),
        time_limit: Duration::from_secs(3),
        sync_ramp: 0,
        ..cfg(Method::RandomTma, Task::Node)
    };
    let p = prep(&c);
    let model = build_model(&c, p.model_shape()).unwrap();
    let init = initial_params(&c, &model);
    let clock = ManualClock::default();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let gate = Arc::new(tma_train::engines::gate::StepGate::new(2));
    let mut coord = GateWatch {
        n: p.trainers.len(),
        params: init.data.clone(),
        gate: gate.clone(),
        release_pool: None,
        at_gather: Vec::new(),
        while_waiting: Vec::new(),
        slow_gather_2,
    };
    let mut rec = Record(Vec::new(), Vec::new());
    let mut exchange = ModelAveraging::new(average_weights(&c, &p), None);
    let ctx = Coordinated {
        prep: &p,
        cfg: &c,
        model: &model,
        clock: &clock,
        eval_pool: &pool,
        stop: None,
        sync_ramp: 0,
        trainer_gate: Some(&gate),
    };
    // the pool's thread waits until round 2's gather: round 1's validation cannot finish before
    let (tx, rx) = mpsc::channel::<()>();
    coord.release_pool = Some(tx);
    pool.spawn(move || {
        let _ = rx.recv();
    });
    let r = coordinate(&mut coord, &mut exchange, &ctx, init, &mut rec, None).unwrap();
    assert!(!gate.is_held());
    (coord, rec, r)
}

/// Decision 0029 (validation first): while a validation is queued or running, the in-process
/// trainers' step gate is held (no step enters, so the validation has the cores); when the next
/// round is due it is lifted although the validation still runs (the round's trainers must
/// reach it: a slow validation never delays a round), and it is lifted at the end.
#[test]
fn a_validation_holds_the_trainers_steps_until_it_ends_or_the_next_round_is_due() {
    let (coord, rec, r) = gate_watch_run(Duration::ZERO);
    assert_eq!(r.summary.rounds, 3);
    // not held before the first validation; lifted at every round's gather, round 2's included
    // (round 1's validation was still running then)
    assert_eq!(coord.at_gather, vec![(1, false), (2, false), (3, false)]);
    // held while round 1's validation was queued (the waits between rounds 1 and 2)
    assert!(
        coord.while_waiting.iter().any(|&h| h),
        "{:?}",
        coord.while_waiting
    );
    // every round validated, in order (round 1's validation had been queued for milliseconds
    // of wall time when round 2 formed: under the share of decision 0036, so round 2 queued
    // behind it)
    assert_eq!(
        rec.0.iter().map(|r| r.round).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(rec.0.iter().all(|r| r.val.value.is_finite()));
}

/// Regression (issue 30, the 1.29B-arc link row: first validations of 83-326 s): a round
/// formed while a validation has been queued or running for more than a quarter of the time
/// since it was started is recorded without validation, also before any validation has
/// finished; it used to queue behind it, and the trainers were held meanwhile.
#[test]
fn a_round_formed_while_a_long_validation_runs_is_not_validated() {
    // round 1's validation is queued for at least 400 ms of wall time when round 2 forms,
    // 1 s after it on the run's clock: more than a quarter
    let (_, rec, r) = gate_watch_run(Duration::from_millis(400));
    assert_eq!(r.summary.rounds, 3);
    assert_eq!(
        rec.0
            .iter()
            .map(|r| (r.round, r.val.value.is_finite()))
            .collect::<Vec<_>>(),
        vec![(1, true), (2, false), (3, true)]
    );
}
