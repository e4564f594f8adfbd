//! The transport between the coordinator and its trainers (ARCHITECTURE.md, invariants: trainers never
//! talk to each other; only trainer <-> coordinator, through this one abstraction).
//!
//! [`InProcess`] implements it with threads and channels. An MPI implementation (one process
//! per rank) plugs in behind the same two traits, so the algorithm code in
//! [`crate::coordinator`] and [`crate::trainer`] runs unchanged over both.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a trainer tells the coordinator when it joins a round.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrainerReport {
    /// Optimizer steps since this trainer started (after `--resume`, since the resume; the
    /// coordinator adds the checkpointed count, [`crate::coordinator::Resume::steps`]).
    pub steps: u64,
    /// Completed passes over the trainer's training data.
    pub epochs: u64,
    /// Sum and count of mini-batch losses since the previous round.
    pub loss_sum: f64,
    /// Number of losses summed in `loss_sum`.
    pub loss_count: u64,
}

/// One trainer's contribution to a round.
#[derive(Clone, Debug)]
pub struct Contribution {
    /// The trainer index.
    pub trainer: usize,
    /// Its parameters (or, for GGS, its gradient), flat in `ParamSet` order.
    pub params: Vec<f32>,
    /// Its counters since the previous exchange.
    pub report: TrainerReport,
}

/// The coordinator's answer to a trainer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Continue training from these (averaged) parameters.
    Continue(Arc<Vec<f32>>),
    /// The run is over; these are the final parameters.
    Stop(Arc<Vec<f32>>),
}

/// A trainer's side of the transport.
pub trait TrainerEndpoint: Send {
    /// Waits for the initial parameters (identical on every trainer). `None` if the
    /// coordinator is gone.
    fn initial_params(&mut self) -> Option<Arc<Vec<f32>>>;
    /// The latest round the coordinator has called (0 = none). Cheap: checked after every step.
    fn due_round(&self) -> u64;
    /// Joins round `round`: sends the local parameters and report, blocks for the reply.
    /// `None` if the coordinator is gone.
    fn join_round(&mut self, round: u64, params: &[f32], report: TrainerReport) -> Option<Reply>;
}

/// The coordinator's side of the transport.
pub trait CoordinatorEndpoint {
    /// Number of trainers started (alive or not).
    fn num_trainers(&self) -> usize;
    /// Sends the initial parameters to every trainer.
    fn broadcast_initial(&mut self, params: Arc<Vec<f32>>);
    /// Announces round `round` to all trainers.
    fn call_round(&mut self, round: u64);
    /// Collects contributions to `round` from every trainer still alive, waiting at most
    /// `timeout`. Trainers that died or did not answer in time are simply absent (a missing
    /// trainer is data, not an error). Contributions a slow trainer sends
    /// for an older round are answered at once with `latest` so it can go on.
    fn gather(
        &mut self,
        round: u64,
        timeout: Duration,
        latest: &Arc<Vec<f32>>,
    ) -> Vec<Contribution>;
    /// Sends `reply` to the listed trainers.
    fn reply(&mut self, to: &[usize], reply: Reply);
    /// Whether trainer `t` is still alive (has not exited or failed).
    fn is_alive(&self, t: usize) -> bool;
}

struct Msg {
    trainer: usize,
    round: u64,
    params: Vec<f32>,
    report: TrainerReport,
}

/// In-process transport: trainers are threads of this process.
pub struct InProcess {
    due: Arc<AtomicU64>,
    alive: Vec<Arc<AtomicBool>>,
    to_trainer: Vec<Sender<Reply>>,
    from_trainers: Receiver<Msg>,
    initial: Vec<Sender<Arc<Vec<f32>>>>,
}

/// Trainer end of [`InProcess`]. Dropping it (the trainer exits or fails) marks it dead.
pub struct InProcessTrainer {
    id: usize,
    due: Arc<AtomicU64>,
    alive: Arc<AtomicBool>,
    to_coord: Sender<Msg>,
    replies: Receiver<Reply>,
    initial: Receiver<Arc<Vec<f32>>>,
}

impl InProcess {
    /// Creates the coordinator end and `n` trainer ends.
    pub fn new(n: usize) -> (InProcess, Vec<InProcessTrainer>) {
        let due = Arc::new(AtomicU64::new(0));
        let (tx, rx) = channel();
        let mut trainers = Vec::with_capacity(n);
        let mut alive = Vec::with_capacity(n);
        let mut to_trainer = Vec::with_capacity(n);
        let mut initial = Vec::with_capacity(n);
        for id in 0..n {
            let (rtx, rrx) = channel();
            let (itx, irx) = channel();
            let a = Arc::new(AtomicBool::new(true));
            alive.push(a.clone());
            to_trainer.push(rtx);
            initial.push(itx);
            trainers.push(InProcessTrainer {
                id,
                due: due.clone(),
                alive: a,
                to_coord: tx.clone(),
                replies: rrx,
                initial: irx,
            });
        }
        (
            InProcess {
                due,
                alive,
                to_trainer,
                from_trainers: rx,
                initial,
            },
            trainers,
        )
    }
}

impl Drop for InProcessTrainer {
    fn drop(&mut self) {
        self.alive.store(false, Ordering::SeqCst);
    }
}

impl TrainerEndpoint for InProcessTrainer {
    fn initial_params(&mut self) -> Option<Arc<Vec<f32>>> {
        self.initial.recv().ok()
    }
    fn due_round(&self) -> u64 {
        self.due.load(Ordering::Acquire)
    }
    fn join_round(&mut self, round: u64, params: &[f32], report: TrainerReport) -> Option<Reply> {
        self.to_coord
            .send(Msg {
                trainer: self.id,
                round,
                params: params.to_vec(),
                report,
            })
            .ok()?;
        self.replies.recv().ok()
    }
}

impl CoordinatorEndpoint for InProcess {
    fn num_trainers(&self) -> usize {
        self.alive.len()
    }
    fn broadcast_initial(&mut self, params: Arc<Vec<f32>>) {
        for s in &self.initial {
            let _ = s.send(params.clone());
        }
    }
    fn call_round(&mut self, round: u64) {
        self.due.store(round, Ordering::Release);
    }
    fn gather(
        &mut self,
        round: u64,
        timeout: Duration,
        latest: &Arc<Vec<f32>>,
    ) -> Vec<Contribution> {
        let n = self.alive.len();
        let mut got: Vec<Option<Contribution>> = vec![None; n];
        let deadline = Instant::now() + timeout;
        loop {
            let waiting = (0..n).any(|t| got[t].is_none() && self.is_alive(t));
            if !waiting {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let wait = (deadline - now).min(Duration::from_millis(20));
            match self.from_trainers.recv_timeout(wait) {
                Ok(m) if m.round == round => {
                    got[m.trainer] = Some(Contribution {
                        trainer: m.trainer,
                        params: m.params,
                        report: m.report,
                    })
                }
                Ok(m) => {
                    // a late answer to an earlier round: let that trainer go on from the latest model
                    let _ = self.to_trainer[m.trainer].send(Reply::Continue(latest.clone()));
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        got.into_iter().flatten().collect()
    }
    fn reply(&mut self, to: &[usize], reply: Reply) {
        for &t in to {
            let _ = self.to_trainer[t].send(reply.clone());
        }
    }
    fn is_alive(&self, t: usize) -> bool {
        self.alive[t].load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_trainer_is_absent_and_does_not_hang() {
        let (mut coord, mut trainers) = InProcess::new(3);
        let dead = trainers.remove(1); // trainer 1
        drop(dead);
        coord.call_round(1);
        let mut handles = Vec::new();
        for mut t in trainers {
            handles.push(std::thread::spawn(move || {
                assert_eq!(t.due_round(), 1);
                let r = t.join_round(1, &[t.id as f32], TrainerReport::default());
                matches!(r, Some(Reply::Continue(_)))
            }));
        }
        let latest = Arc::new(vec![0f32]);
        let got = coord.gather(1, Duration::from_secs(10), &latest);
        let mut ids: Vec<usize> = got.iter().map(|c| c.trainer).collect();
        ids.sort();
        assert_eq!(ids, vec![0, 2]);
        assert!(!coord.is_alive(1));
        coord.reply(&ids, Reply::Continue(Arc::new(vec![1.0])));
        for h in handles {
            assert!(h.join().unwrap());
        }
    }
}
