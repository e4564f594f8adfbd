//! The MPI transport (feature `mpi`): one process per rank, rank 0 the coordinator, rank
//! `t + 1` trainer `t`. Implements [`CoordinatorEndpoint`] and [`TrainerEndpoint`], so
//! [`crate::coordinator::coordinate`] and [`crate::trainer::Trainer::run`] run unchanged.
//!
//! Messages (point-to-point on `MPI_COMM_WORLD`, only trainer <-> rank 0):
//! * `HELLO` trainer -> 0, right after `MPI_Init`: the trainer's host name.
//! * `READY` trainer -> 0, after loading its part: `[0]`, or `[1, utf-8 error message...]`.
//! * `INIT` 0 -> trainer: the initial parameters (f32).
//! * `DUE` 0 -> trainer: `[round]` (u64). Trainers poll it after every step with a
//!   non-blocking probe (`MPI_Iprobe`), so the check costs microseconds.
//! * `CONTRIB_HDR` + `CONTRIB` trainer -> 0: `[round, steps, epochs, loss_sum bits,
//!   loss_count]` (u64) then the parameters (f32).
//! * `CONTINUE` 0 -> trainer: averaged parameters (f32); `STOP` 0 -> trainer: `[0u8]` (the run
//!   is over; small, so it never blocks the coordinator).
//! * `BYE` trainer -> 0 when its loop ends: `[exit kind, training time bits]` (u64).
//!
//! All MPI calls of a process are made from the thread that initialized MPI
//! (`MPI_THREAD_FUNNELED`); computation runs on rayon pools.
//!
//! Liveness: MPI has no portable way to notice a dead peer, so the coordinator relies on
//! timeouts: [`MpiCoordinator::join`] waits a bounded time for every trainer's `READY`, and
//! [`MpiCoordinator::finish`] a bounded time for every `BYE`; both name the missing ranks and
//! their hosts, and the caller aborts the job (`MPI_Abort`), so no rank is left hanging.
//! (Under Open MPI the default error handler also ends the whole job when one rank dies.)

use crate::cluster::{Contribution, CoordinatorEndpoint, Reply, TrainerEndpoint, TrainerReport};
use mpi::point_to_point::MatchedReceiveVec;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

const TAG_HELLO: i32 = 11;
const TAG_READY: i32 = 12;
const TAG_INIT: i32 = 13;
const TAG_DUE: i32 = 14;
const TAG_CONTRIB_HDR: i32 = 15;
const TAG_CONTRIB: i32 = 16;
const TAG_CONTINUE: i32 = 17;
const TAG_STOP: i32 = 18;
const TAG_BYE: i32 = 19;
const TAG_START: i32 = 20;

/// The `mpi` crate this transport is built on (so callers need no direct dependency).
pub use mpi;

/// How a trainer rank ended, as told in its `BYE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ByeKind {
    /// Stopped by the coordinator.
    Stopped = 0,
    /// Injected failure (`--fail`).
    Failed = 1,
    /// Lost the coordinator.
    Orphaned = 2,
}

const POLL: Duration = Duration::from_micros(200);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Said hello, has not finished loading.
    Started,
    /// Loaded its part and takes part in rounds.
    Alive,
    /// Was sent STOP.
    Stopped,
    /// Said BYE.
    Gone,
}

/// A rank that did not do what it should within the timeout.
#[derive(Clone, Debug, PartialEq)]
pub struct RankProblem {
    /// MPI rank (trainer index + 1).
    pub rank: usize,
    /// Host name the rank reported, or `None` if it never said hello.
    pub host: Option<String>,
    /// What went wrong.
    pub problem: String,
}

impl std::fmt::Display for RankProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "rank {} (trainer {}) on host {}: {}",
            self.rank,
            self.rank - 1,
            self.host.as_deref().unwrap_or("unknown (never joined)"),
            self.problem
        )
    }
}

/// Rank 0's side of the MPI transport.
pub struct MpiCoordinator {
    world: SimpleCommunicator,
    n: usize,
    hosts: Vec<Option<String>>,
    state: Vec<State>,
    bye: Vec<Option<(ByeKind, f64)>>,
}

fn u64s_to_f64(b: u64) -> f64 {
    f64::from_bits(b)
}

impl MpiCoordinator {
    /// The coordinator end on rank 0 of `world` (`world.size() - 1` trainers).
    pub fn new(world: SimpleCommunicator) -> MpiCoordinator {
        let n = (world.size() as usize).saturating_sub(1);
        MpiCoordinator {
            world,
            n,
            hosts: vec![None; n],
            state: vec![State::Started; n],
            bye: vec![None; n],
        }
    }

    /// Handles one pending HELLO / READY / BYE message if there is one; returns whether it did.
    fn poll_control(&mut self) -> Option<RankProblem> {
        let any = self.world.any_process();
        if let Some(pair) = any.immediate_matched_probe_with_tag(TAG_HELLO) {
            let (b, st) = pair.matched_receive_vec::<u8>();
            let t = st.source_rank() as usize - 1;
            self.hosts[t] = Some(String::from_utf8_lossy(&b).into_owned());
        }
        if let Some(pair) = any.immediate_matched_probe_with_tag(TAG_READY) {
            let (b, st) = pair.matched_receive_vec::<u8>();
            let t = st.source_rank() as usize - 1;
            if b.first() == Some(&0) {
                self.state[t] = State::Alive;
            } else {
                self.state[t] = State::Gone;
                return Some(RankProblem {
                    rank: t + 1,
                    host: self.hosts[t].clone(),
                    problem: format!(
                        "failed to load its part: {}",
                        String::from_utf8_lossy(b.get(1..).unwrap_or_default())
                    ),
                });
            }
        }
        if let Some(pair) = any.immediate_matched_probe_with_tag(TAG_BYE) {
            let (b, st) = pair.matched_receive_vec::<u64>();
            let t = st.source_rank() as usize - 1;
            self.state[t] = State::Gone;
            let kind = match b.first() {
                Some(0) => ByeKind::Stopped,
                Some(1) => ByeKind::Failed,
                _ => ByeKind::Orphaned,
            };
            self.bye[t] = Some((kind, b.get(1).map_or(f64::NAN, |&x| u64s_to_f64(x))));
        }
        None
    }

    /// Waits until every trainer rank has loaded its part (`READY`), at most `timeout`.
    ///
    /// # Errors
    /// Every rank that failed to load, or did not report within `timeout`, by rank and host.
    pub fn join(&mut self, timeout: Duration) -> Result<(), Vec<RankProblem>> {
        let deadline = Instant::now() + timeout;
        let mut problems = Vec::new();
        loop {
            if let Some(p) = self.poll_control() {
                problems.push(p);
            }
            if self.state.iter().all(|s| *s != State::Started) {
                break;
            }
            if Instant::now() >= deadline {
                for t in 0..self.n {
                    if self.state[t] == State::Started {
                        problems.push(RankProblem {
                            rank: t + 1,
                            host: self.hosts[t].clone(),
                            problem: match self.hosts[t] {
                                Some(_) => format!(
                                    "started but did not load its part within {}",
                                    humantime::format_duration(timeout)
                                ),
                                None => format!(
                                    "did not join within {}",
                                    humantime::format_duration(timeout)
                                ),
                            },
                        });
                    }
                }
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            problems.sort_by_key(|p| p.rank);
            Err(problems)
        }
    }

    /// After the run: waits at most `timeout` for every trainer's `BYE`, discarding late
    /// contributions (and answering them with STOP).
    ///
    /// # Errors
    /// The ranks that did not say goodbye in time, by rank and host.
    pub fn finish(&mut self, timeout: Duration) -> Result<(), Vec<RankProblem>> {
        let deadline = Instant::now() + timeout;
        loop {
            self.poll_control();
            while let Some(pair) = self
                .world
                .any_process()
                .immediate_matched_probe_with_tag(TAG_CONTRIB_HDR)
            {
                let (_h, st) = pair.matched_receive_vec::<u64>();
                let r = st.source_rank();
                let _ = self
                    .world
                    .process_at_rank(r)
                    .receive_vec_with_tag::<f32>(TAG_CONTRIB);
                let t = r as usize - 1;
                if self.state[t] != State::Gone {
                    self.world
                        .process_at_rank(r)
                        .send_with_tag(&[0u8][..], TAG_STOP);
                    self.state[t] = State::Stopped;
                }
            }
            if self.state.iter().all(|s| *s == State::Gone) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err((0..self.n)
                    .filter(|&t| self.state[t] != State::Gone)
                    .map(|t| RankProblem {
                        rank: t + 1,
                        host: self.hosts[t].clone(),
                        problem: format!(
                            "did not exit within {} of the end of the run",
                            humantime::format_duration(timeout)
                        ),
                    })
                    .collect());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Lets every joined trainer start: sends the seed segment of the trainers' random streams
    /// (0, or the round a resumed run continues from; see
    /// [`crate::trainer::Trainer::with_segment`]); the initial parameters follow from
    /// `coordinate`.
    pub fn start(&mut self, segment: u64) {
        for t in 0..self.n {
            if self.state[t] == State::Alive {
                self.world
                    .process_at_rank(t as i32 + 1)
                    .send_with_tag(&[segment][..], TAG_START);
            }
        }
    }

    /// Trainers that ended with an injected failure, with their training time (seconds).
    pub fn failed(&self) -> Vec<(usize, f64)> {
        (0..self.n)
            .filter_map(|t| match self.bye[t] {
                Some((ByeKind::Failed, at)) => Some((t, at)),
                _ => None,
            })
            .collect()
    }

    /// Host name trainer `t` reported.
    pub fn host(&self, t: usize) -> Option<&str> {
        self.hosts[t].as_deref()
    }

    /// Ends the whole job (`MPI_Abort`) with `code`.
    pub fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }

    fn send_stop(&mut self, t: usize) {
        if matches!(self.state[t], State::Alive) {
            self.world
                .process_at_rank(t as i32 + 1)
                .send_with_tag(&[0u8][..], TAG_STOP);
            self.state[t] = State::Stopped;
        }
    }
}

impl CoordinatorEndpoint for MpiCoordinator {
    fn num_trainers(&self) -> usize {
        self.n
    }

    fn broadcast_initial(&mut self, params: Arc<Vec<f32>>) {
        for t in 0..self.n {
            if self.state[t] == State::Alive {
                self.world
                    .process_at_rank(t as i32 + 1)
                    .send_with_tag(&params[..], TAG_INIT);
            }
        }
    }

    fn call_round(&mut self, round: u64) {
        self.poll_control();
        for t in 0..self.n {
            if self.state[t] == State::Alive {
                self.world
                    .process_at_rank(t as i32 + 1)
                    .send_with_tag(&[round][..], TAG_DUE);
            }
        }
    }

    fn gather(
        &mut self,
        round: u64,
        timeout: Duration,
        latest: &Arc<Vec<f32>>,
    ) -> Vec<Contribution> {
        let mut got: Vec<Option<Contribution>> = vec![None; self.n];
        let deadline = Instant::now() + timeout;
        loop {
            self.poll_control();
            let mut idle = true;
            while let Some(pair) = self
                .world
                .any_process()
                .immediate_matched_probe_with_tag(TAG_CONTRIB_HDR)
            {
                idle = false;
                let (h, st) = pair.matched_receive_vec::<u64>();
                let r = st.source_rank();
                let (params, _) = self
                    .world
                    .process_at_rank(r)
                    .receive_vec_with_tag::<f32>(TAG_CONTRIB);
                let t = r as usize - 1;
                if h.len() == 5 && h[0] == round {
                    got[t] = Some(Contribution {
                        trainer: t,
                        params,
                        report: TrainerReport {
                            steps: h[1],
                            epochs: h[2],
                            loss_sum: f64::from_bits(h[3]),
                            loss_count: h[4],
                        },
                    });
                } else if self.state[t] == State::Alive {
                    // a late answer to an earlier round: go on from the latest model
                    self.world
                        .process_at_rank(r)
                        .send_with_tag(&latest[..], TAG_CONTINUE);
                }
            }
            let waiting = (0..self.n).any(|t| got[t].is_none() && self.state[t] == State::Alive);
            if !waiting || Instant::now() >= deadline {
                break;
            }
            if idle {
                std::thread::sleep(POLL);
            }
        }
        got.into_iter().flatten().collect()
    }

    fn reply(&mut self, to: &[usize], reply: Reply) {
        for &t in to {
            match &reply {
                Reply::Continue(p) => {
                    if self.state[t] == State::Alive {
                        self.world
                            .process_at_rank(t as i32 + 1)
                            .send_with_tag(&p[..], TAG_CONTINUE);
                    }
                }
                Reply::Stop(_) => self.send_stop(t),
            }
        }
    }

    fn is_alive(&self, t: usize) -> bool {
        self.state[t] == State::Alive
    }
}

/// A trainer rank's side of the MPI transport.
pub struct MpiTrainer {
    world: SimpleCommunicator,
    due: Cell<u64>,
}

// SAFETY: the communicator handle is only used from the thread that initialized MPI; the
// endpoint is `Send` only because `TrainerEndpoint` requires it for the in-process engine.
unsafe impl Send for MpiTrainer {}

impl MpiTrainer {
    /// Trainer end on a rank > 0 of `world`. Sends `HELLO` (this host's name) at once, so the
    /// coordinator can name the host if loading the part fails or hangs.
    pub fn new(world: SimpleCommunicator) -> MpiTrainer {
        let host = mpi::environment::processor_name().unwrap_or_else(|_| "?".into());
        world
            .process_at_rank(0)
            .send_with_tag(host.as_bytes(), TAG_HELLO);
        MpiTrainer {
            world,
            due: Cell::new(0),
        }
    }

    /// Tells the coordinator the part is loaded (`Ok`) or could not be (`Err(message)`).
    pub fn ready(&self, status: Result<(), String>) {
        let msg: Vec<u8> = match status {
            Ok(()) => vec![0],
            Err(e) => std::iter::once(1u8).chain(e.into_bytes()).collect(),
        };
        self.world
            .process_at_rank(0)
            .send_with_tag(&msg[..], TAG_READY);
    }

    /// Blocks until the coordinator lets the run start; returns the seed segment of the
    /// trainers' random streams.
    pub fn wait_start(&self) -> u64 {
        let (v, _) = self
            .world
            .process_at_rank(0)
            .receive_vec_with_tag::<u64>(TAG_START);
        v.first().copied().unwrap_or(0)
    }

    /// Tells the coordinator this trainer's loop has ended (`at`: its training time).
    pub fn bye(&self, kind: ByeKind, at: Duration) {
        let msg = [kind as u64, at.as_secs_f64().to_bits()];
        self.world
            .process_at_rank(0)
            .send_with_tag(&msg[..], TAG_BYE);
    }

    fn drain_due(&self) {
        let zero = self.world.process_at_rank(0);
        while let Some(pair) = zero.immediate_matched_probe_with_tag(TAG_DUE) {
            let (v, _) = pair.matched_receive_vec::<u64>();
            if let Some(&r) = v.first() {
                self.due.set(self.due.get().max(r));
            }
        }
    }

    /// Blocks for the coordinator's answer (CONTINUE or STOP), still reading DUE messages.
    fn wait_reply(&self) -> Reply {
        let zero = self.world.process_at_rank(0);
        loop {
            if let Some(pair) = zero.immediate_matched_probe_with_tag(TAG_STOP) {
                let _ = pair.matched_receive_vec::<u8>();
                return Reply::Stop(Arc::new(Vec::new()));
            }
            if let Some(pair) = zero.immediate_matched_probe_with_tag(TAG_CONTINUE) {
                let (p, _) = pair.matched_receive_vec::<f32>();
                return Reply::Continue(Arc::new(p));
            }
            self.drain_due();
            std::thread::sleep(POLL);
        }
    }
}

impl TrainerEndpoint for MpiTrainer {
    fn initial_params(&mut self) -> Option<Arc<Vec<f32>>> {
        let (p, _) = self
            .world
            .process_at_rank(0)
            .receive_vec_with_tag::<f32>(TAG_INIT);
        Some(Arc::new(p))
    }

    fn due_round(&self) -> u64 {
        self.drain_due();
        self.due.get()
    }

    fn join_round(&mut self, round: u64, params: &[f32], report: TrainerReport) -> Option<Reply> {
        let zero = self.world.process_at_rank(0);
        if let Some(pair) = zero.immediate_matched_probe_with_tag(TAG_STOP) {
            let _ = pair.matched_receive_vec::<u8>();
            return Some(Reply::Stop(Arc::new(Vec::new())));
        }
        if round != u64::MAX {
            let h = [
                round,
                report.steps,
                report.epochs,
                report.loss_sum.to_bits(),
                report.loss_count,
            ];
            zero.send_with_tag(&h[..], TAG_CONTRIB_HDR);
            zero.send_with_tag(params, TAG_CONTRIB);
        }
        Some(self.wait_reply())
    }
}
