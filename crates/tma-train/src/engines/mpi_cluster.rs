//! The MPI transport (feature `mpi`): one process per rank, rank 0 the coordinator, rank
//! `t + 1` trainer `t`. Implements [`CoordinatorEndpoint`] and [`TrainerEndpoint`], so
//! [`crate::engines::coordinator::coordinate`] and [`crate::engines::trainer::Trainer::run`] run unchanged.
//!
//! Messages (point-to-point on `MPI_COMM_WORLD`, only trainer <-> rank 0):
//! * `HELLO` trainer -> 0, right after `MPI_Init`: the trainer's host name.
//! * `READY` trainer -> 0, after loading its part: `[0]`, or `[1, utf-8 error message...]`.
//! * `START` 0 -> trainer: `[segment, epochs]` (u64), the seed segment of its random stream and
//!   the epochs it had completed at a resume point (0 for a fresh run).
//! * `INIT` 0 -> trainer: the initial parameters (f32).
//! * `DUE` 0 -> trainer: `[round, last]` (u64). Trainers poll it after every step with a
//!   non-blocking probe (`MPI_Improbe`), so the check costs microseconds. `last` = 1: the time
//!   limit has passed, join at once whatever the step-count schedule.
//! * `CONTRIB_HDR` + `CONTRIB` trainer -> 0: `[round, steps, epochs, loss_sum bits,
//!   loss_count, len]` (u64) then the `len` parameters (f32).
//! * `CONTINUE` 0 -> trainer: averaged parameters (f32); `STOP` 0 -> trainer: `[0u8]` (the run
//!   is over).
//! * `BYE` trainer -> 0 when its loop ends: `[exit kind, training time bits]` (u64).
//! * `FINAL` 0 -> trainer, after every `BYE`: `[1]` call `MPI_Finalize`, `[0]` exit without
//!   it (a rank was lost: `MPI_Finalize` would wait for it forever).
//! * `ALIVE` both ways, `[0u8]`: a heartbeat. Rank 0 sends one to every trainer every
//!   [`heartbeat_interval`] from a thread of its own, whatever its main thread is doing (a
//!   checkpoint on a slow disk, a long validation or test evaluation); a trainer sends one
//!   whenever it polls and the interval has passed since its last. Liveness is silence on
//!   either side, so a busy process is never taken for a dead one.
//! * `ABORT` 0 -> trainer: utf-8 message. Rank 0 failed before or outside the round loop (a bad
//!   option, a rank that could not load its part, ...): every trainer rank prints the message
//!   and exits with an error, then rank 0 calls `MPI_Abort` ([`abort_job`]). Under
//!   `mpirun --enable-recovery`, `MPI_Abort` does not end the other ranks: this is what does.
//!
//! MPI is initialized with `MPI_THREAD_SERIALIZED`: on rank 0 the main thread and the heartbeat
//! thread take one lock around every MPI call; trainer ranks call MPI from their main thread
//! only; computation runs on rayon pools.
//!
//! **Failures.** MPI reports no error for a peer that died: under Open MPI's
//! `mpirun --enable-recovery` the survivors keep running, but an operation involving a dead
//! rank simply never completes (and without that flag the whole job is aborted). So no
//! operation here ever blocks on a peer: every send and every receive of parameters is
//! non-blocking (`MPI_Isend`, `MPI_Irecv`, `MPI_Improbe` + `MPI_Imrecv`), tested while polling,
//! and abandoned when its peer is given up on: its request is dropped without being freed and
//! its buffer is leaked, since MPI may still write to it (see `Op`). The coordinator forms
//! every round at its deadline ([`crate::config::TrainConfig::round_timeout`]) from the trainers
//! that answered, by [`Roster`]'s rule; a trainer rank that hears nothing from the coordinator
//! for [`crate::config::TrainConfig::peer_timeout`] exits. Collectives are never used (they
//! hang on a dead rank), and a process that lost a peer exits without `MPI_Finalize`.
//!
//! Liveness before the run: [`MpiCoordinator::join`] waits a bounded time for every trainer's
//! `READY` and names the missing ranks and their hosts; the caller aborts the job
//! (`MPI_Abort`), so no rank is left hanging.

use crate::clock::Clock;
use crate::config::TrainConfig;
use crate::engines::cluster::{
    Contribution, CoordinatorEndpoint, Gathered, Reply, Roster, TrainerEndpoint, TrainerReport,
    Verdict,
};
use mpi::ffi;
use mpi::point_to_point::MatchedReceiveVec;
use mpi::raw::AsRaw;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::cell::{Cell, RefCell};
use std::mem::ManuallyDrop;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
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
const TAG_FINAL: i32 = 21;
const TAG_ALIVE: i32 = 22;
const TAG_ABORT: i32 = 23;

/// At most this many sends in flight to one trainer before `DUE` messages to it are skipped
/// (a dead rank never completes them; a live one only needs the latest round).
const MAX_IN_FLIGHT: usize = 4;

/// The `mpi` crate this transport is built on (so callers need no direct dependency).
pub use mpi;

/// Makes MPI errors on `world` return instead of aborting the job (`MPI_ERRORS_RETURN`), so a
/// failure on the link to one peer does not end every rank; the transport checks what it
/// receives instead (a message of the wrong size is dropped).
pub fn errors_return(world: &SimpleCommunicator) {
    // SAFETY: a valid communicator and the predefined error handler.
    unsafe {
        ffi::MPI_Comm_set_errhandler(world.as_raw(), ffi::RSMPI_ERRORS_RETURN);
    }
}

/// How often a process sends `ALIVE` to its peers: an eighth of the peer timeout (so a peer
/// hears several before it gives up), at most 1 s.
pub fn heartbeat_interval(cfg: &TrainConfig) -> Duration {
    (cfg.peer_timeout() / 8).min(Duration::from_secs(1))
}

/// How long rank 0 waits for its `ABORT` messages to leave before `MPI_Abort`.
const ABORT_GRACE: Duration = Duration::from_secs(3);

/// Sends every other rank of `world` an `ABORT` carrying `message` (trainer ranks print it and
/// exit with an error), waits for the messages to leave (at most a few seconds), then ends the
/// job with `MPI_Abort(code)`. For rank 0 before its [`MpiCoordinator`] exists (afterwards:
/// [`MpiCoordinator::abort_job`]).
pub fn abort_job(world: &SimpleCommunicator, message: &str, code: i32) -> ! {
    let comm = world.as_raw();
    let mut ops: Vec<Op> = (1..world.size())
        .map(|r| Op::send(comm, r, TAG_ABORT, Buf::U8(message.as_bytes().to_vec())))
        .collect();
    let deadline = Instant::now() + ABORT_GRACE;
    while Instant::now() < deadline {
        ops.retain_mut(|op| !op.test());
        if ops.is_empty() {
            break;
        }
        std::thread::sleep(POLL);
    }
    std::mem::forget(ops);
    world.abort(code)
}

/// Locks the MPI lock of rank 0 (a panic elsewhere does not poison it for good).
fn lock(m: &Mutex<()>) -> MutexGuard<'_, ()> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A communicator handle moved to the heartbeat thread (MPI handles are plain values; every
/// use is under the MPI lock, `MPI_THREAD_SERIALIZED`).
struct RawComm(ffi::MPI_Comm);
// SAFETY: see above: the handle is only used under the lock that serializes MPI calls.
unsafe impl Send for RawComm {}

/// Lets MPI progress the transfers in flight (`MPI_Iprobe` for a tag never sent: it runs
/// the progress engine and matches nothing).
fn progress(comm: ffi::MPI_Comm) {
    let mut flag: c_int = 0;
    // SAFETY: plain C handles and structs, filled by MPI.
    unsafe {
        let mut st: ffi::MPI_Status = std::mem::zeroed();
        ffi::MPI_Iprobe(ffi::RSMPI_ANY_SOURCE, TAG_NEVER, comm, &mut flag, &mut st);
    }
}

/// A tag no message carries (see [`progress`]).
const TAG_NEVER: i32 = 99;

/// Rank 0's heartbeat thread.
struct Heartbeat {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<bool>,
}

impl Heartbeat {
    /// Sends `ALIVE` to trainers `0..n` (ranks 1..=n) every `beat` until stopped, under `mpi`.
    fn start(comm: ffi::MPI_Comm, n: usize, mpi: Arc<Mutex<()>>, beat: Duration) -> Heartbeat {
        let stop = Arc::new(AtomicBool::new(false));
        let comm = RawComm(comm);
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("tma-heartbeat".into())
            .spawn(move || {
                let comm = comm;
                let mut out: Vec<Vec<Op>> = (0..n).map(|_| Vec::new()).collect();
                while !flag.load(Ordering::Acquire) {
                    {
                        let _g = lock(&mpi);
                        for (t, ops) in out.iter_mut().enumerate() {
                            ops.retain_mut(|op| !op.test());
                            // a rank that takes nothing (dead) gets no more piled up
                            if ops.len() < MAX_IN_FLIGHT {
                                ops.push(Op::send(
                                    comm.0,
                                    t as i32 + 1,
                                    TAG_ALIVE,
                                    Buf::U8(vec![0]),
                                ));
                            }
                        }
                    }
                    let next = Instant::now() + beat;
                    while Instant::now() < next && !flag.load(Ordering::Acquire) {
                        std::thread::sleep(Duration::from_millis(10));
                        // drive MPI's progress engine: a large transfer the main thread
                        // started (a model to a trainer, rendezvous protocol) moves only
                        // while this process calls MPI, and the main thread may be busy
                        let _g = lock(&mpi);
                        progress(comm.0);
                    }
                }
                let _g = lock(&mpi);
                let mut all_done = true;
                for ops in &mut out {
                    ops.retain_mut(|op| !op.test());
                    all_done &= ops.is_empty();
                }
                // (unfinished sends are dropped, i.e. abandoned: see `Op`)
                all_done
            })
            .expect("spawn the heartbeat thread");
        Heartbeat { stop, handle }
    }

    /// Stops the thread; returns whether every heartbeat it sent has left.
    fn stop(self) -> bool {
        self.stop.store(true, Ordering::Release);
        self.handle.join().unwrap_or(false)
    }
}

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

/// A message buffer an operation in flight reads or writes.
enum Buf {
    U8(Vec<u8>),
    U64(Vec<u64>),
    F32(Vec<f32>),
    Shared(Arc<Vec<f32>>),
}

impl Buf {
    fn raw(&mut self) -> (*mut c_void, c_int, ffi::MPI_Datatype) {
        // SAFETY: reading the predefined datatype handles.
        unsafe {
            match self {
                Buf::U8(v) => (v.as_mut_ptr().cast(), v.len() as c_int, ffi::RSMPI_UINT8_T),
                Buf::U64(v) => (v.as_mut_ptr().cast(), v.len() as c_int, ffi::RSMPI_UINT64_T),
                Buf::F32(v) => (v.as_mut_ptr().cast(), v.len() as c_int, ffi::RSMPI_FLOAT),
                // only ever sent (read by MPI), never received into
                Buf::Shared(v) => (
                    v.as_ptr() as *mut c_void,
                    v.len() as c_int,
                    ffi::RSMPI_FLOAT,
                ),
            }
        }
    }
}

/// A non-blocking MPI operation with its buffer. Dropped before it completed (its peer was
/// given up on), the request is abandoned and the buffer leaked: MPI may still read or write
/// it, so it is never freed (the `mpi` crate's `Request` would panic instead).
struct Op {
    req: ffi::MPI_Request,
    buf: ManuallyDrop<Buf>,
    done: bool,
    status: ffi::MPI_Status,
}

impl Op {
    fn new(buf: Buf) -> Op {
        // the request is a handle (MPI keeps no pointer to this struct); the buffer is on
        // the heap and does not move with it
        Op {
            // SAFETY: reading the predefined null request.
            req: unsafe { ffi::RSMPI_REQUEST_NULL },
            buf: ManuallyDrop::new(buf),
            done: false,
            // SAFETY: a plain C struct; all zeros is a valid value.
            status: unsafe { std::mem::zeroed() },
        }
    }

    /// `MPI_Isend` of `buf` to `dest`.
    fn send(comm: ffi::MPI_Comm, dest: i32, tag: i32, buf: Buf) -> Op {
        let mut op = Op::new(buf);
        let (p, n, ty) = op.buf.raw();
        // SAFETY: the buffer is owned by the op (never freed before completion, see Drop).
        let rc = unsafe { ffi::MPI_Isend(p, n, ty, dest, tag, comm, &mut op.req) };
        op.done = rc != 0; // failed to start: nothing in flight
        op
    }

    /// `MPI_Irecv` of exactly `buf`'s length from `source`.
    fn recv(comm: ffi::MPI_Comm, source: i32, tag: i32, buf: Buf) -> Op {
        let mut op = Op::new(buf);
        let (p, n, ty) = op.buf.raw();
        // SAFETY: as in `send`.
        let rc = unsafe { ffi::MPI_Irecv(p, n, ty, source, tag, comm, &mut op.req) };
        if rc != 0 {
            op.done = true;
            op.status.MPI_ERROR = rc;
        }
        op
    }

    /// Whether it has completed (tests it once if not).
    fn test(&mut self) -> bool {
        if !self.done {
            let mut flag: c_int = 0;
            // SAFETY: an active request of this op.
            let rc = unsafe { ffi::MPI_Test(&mut self.req, &mut flag, &mut self.status) };
            if rc != 0 {
                // with MPI_ERRORS_RETURN: the operation failed; nothing is in flight any more
                self.status.MPI_ERROR = rc;
                self.done = true;
            } else {
                self.done = flag != 0;
            }
        }
        self.done
    }

    /// The buffer of a completed operation, or `None` if it failed.
    fn into_buf(mut self) -> Option<Buf> {
        assert!(self.done, "Op::into_buf before completion");
        self.done = false; // the buffer moves out: Drop must not free it again
                           // SAFETY: taken once; Drop skips it (done is false, so it is "leaked" there).
        let buf = unsafe { ManuallyDrop::take(&mut self.buf) };
        (self.status.MPI_ERROR == 0).then_some(buf)
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        if self.done {
            // SAFETY: completed: MPI no longer uses the buffer.
            unsafe { ManuallyDrop::drop(&mut self.buf) }
        }
        // else: abandoned in flight; the buffer is leaked on purpose
    }
}

/// `MPI_Improbe` for a message from `source` with `tag`; on a match, receives it with
/// `MPI_Imrecv` into a buffer of its size (`make(len)`) and returns the operation.
fn take_matched(
    comm: ffi::MPI_Comm,
    source: i32,
    tag: i32,
    dtype: ffi::MPI_Datatype,
    make: impl FnOnce(usize) -> Buf,
) -> Option<(i32, Op)> {
    let mut flag: c_int = 0;
    // SAFETY: plain C handles and structs, filled by MPI.
    unsafe {
        let mut msg: ffi::MPI_Message = ffi::RSMPI_MESSAGE_NULL;
        let mut st: ffi::MPI_Status = std::mem::zeroed();
        if ffi::MPI_Improbe(source, tag, comm, &mut flag, &mut msg, &mut st) != 0 || flag == 0 {
            return None;
        }
        let mut count: c_int = 0;
        ffi::MPI_Get_count(&st, dtype, &mut count);
        let mut op = Op::new(make(count.max(0) as usize));
        let (p, n, ty) = op.buf.raw();
        if ffi::MPI_Imrecv(p, n, ty, &mut msg, &mut op.req) != 0 {
            op.done = true;
            op.status.MPI_ERROR = 1;
        }
        Some((st.MPI_SOURCE, op))
    }
}

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

/// A contribution being received: its header, then its parameters in flight.
struct Incoming {
    hdr: Vec<u64>,
    op: Op,
}

/// Rank 0's side of the MPI transport.
pub struct MpiCoordinator {
    world: SimpleCommunicator,
    comm: ffi::MPI_Comm,
    n: usize,
    hosts: Vec<Option<String>>,
    state: Vec<State>,
    bye: Vec<Option<(ByeKind, f64)>>,
    /// Peak RSS and peak anonymous memory (bytes) each trainer sent with its `BYE`.
    bye_memory: Vec<Option<(Option<u64>, Option<u64>)>>,
    roster: Roster,
    /// Trainers whose parked contribution is answered with the next reply.
    parked: Vec<usize>,
    /// Sends in flight, by trainer.
    outbox: Vec<Vec<Op>>,
    /// Contributions being received, by trainer.
    incoming: Vec<Option<Incoming>>,
    /// Training time of the first round deadline each trainer missed since it last took part.
    missed_at: Vec<Option<f64>>,
    /// Trainers given up on at the end (no `BYE`), with the time they were lost.
    lost: Vec<(usize, f64)>,
    params_len: Option<usize>,
    clock: Arc<dyn Clock>,
    round_timeout: Duration,
    peer_timeout: Duration,
    /// Contributions of the wrong size or malformed headers dropped.
    dropped: u64,
    /// When each trainer was last heard from (any message, `ALIVE` included).
    heard: Vec<Instant>,
    /// Serializes the MPI calls of this process (main thread and heartbeat thread).
    mpi: Arc<Mutex<()>>,
    /// The heartbeat thread, until [`MpiCoordinator::close`] (`None` without
    /// `MPI_THREAD_SERIALIZED`).
    heartbeat: Option<Heartbeat>,
}

/// A contribution that arrived completely: trainer, header, parameters.
type Arrived = (usize, Vec<u64>, Vec<f32>);

fn u64s_to_f64(b: u64) -> f64 {
    f64::from_bits(b)
}

impl MpiCoordinator {
    /// The coordinator end on rank 0 of `world` (`world.size() - 1` trainers), with `cfg`'s
    /// round and peer timeouts; `clock` times when trainers were lost. Starts the heartbeat
    /// thread when MPI was initialized with at least `MPI_THREAD_SERIALIZED` (see
    /// [`MpiCoordinator::has_heartbeat`]).
    pub fn new(world: SimpleCommunicator, cfg: &TrainConfig, clock: Arc<dyn Clock>) -> Self {
        let n = (world.size() as usize).saturating_sub(1);
        let comm = world.as_raw();
        let mpi = Arc::new(Mutex::new(()));
        let serialized = matches!(
            mpi::environment::threading_support(),
            mpi::Threading::Serialized | mpi::Threading::Multiple
        );
        let heartbeat =
            serialized.then(|| Heartbeat::start(comm, n, mpi.clone(), heartbeat_interval(cfg)));
        MpiCoordinator {
            heard: vec![Instant::now(); n],
            mpi,
            heartbeat,
            world,
            comm,
            n,
            hosts: vec![None; n],
            state: vec![State::Started; n],
            bye: vec![None; n],
            bye_memory: vec![None; n],
            roster: Roster::new(n),
            parked: Vec::new(),
            outbox: (0..n).map(|_| Vec::new()).collect(),
            incoming: (0..n).map(|_| None).collect(),
            missed_at: vec![None; n],
            lost: Vec::new(),
            params_len: None,
            clock,
            round_timeout: cfg.round_timeout,
            peer_timeout: cfg.peer_timeout(),
            dropped: 0,
        }
    }

    fn send(&mut self, t: usize, tag: i32, buf: Buf) {
        let mpi = self.mpi.clone();
        let _g = lock(&mpi);
        let op = Op::send(self.comm, t as i32 + 1, tag, buf);
        self.outbox[t].push(op);
    }

    /// Whether the heartbeat thread runs (MPI gave `MPI_THREAD_SERIALIZED`): without it a
    /// coordinator busy for longer than the peer timeout is taken for dead by its trainers.
    pub fn has_heartbeat(&self) -> bool {
        self.heartbeat.is_some()
    }

    /// Handles pending HELLO / READY / BYE messages, tests the operations in flight and
    /// returns the contributions that have arrived completely: `(trainer, header, params)`.
    /// A rank that failed to load is returned as a problem.
    fn poll(&mut self) -> (Vec<Arrived>, Option<RankProblem>) {
        let mpi = self.mpi.clone();
        let _g = lock(&mpi);
        let mut problem = None;
        let any = self.world.any_process();
        while let Some(pair) = any.immediate_matched_probe_with_tag(TAG_ALIVE) {
            let (_, st) = pair.matched_receive_vec::<u8>();
            if let Some(h) = self.heard.get_mut(st.source_rank() as usize - 1) {
                *h = Instant::now();
            }
        }
        // small control messages: complete on arrival (every HELLO first, so a READY with an
        // error can name its host)
        while let Some(pair) = any.immediate_matched_probe_with_tag(TAG_HELLO) {
            let (b, st) = pair.matched_receive_vec::<u8>();
            let t = st.source_rank() as usize - 1;
            self.heard[t] = Instant::now();
            self.hosts[t] = Some(String::from_utf8_lossy(&b).into_owned());
        }
        if let Some(pair) = any.immediate_matched_probe_with_tag(TAG_READY) {
            let (b, st) = pair.matched_receive_vec::<u8>();
            let t = st.source_rank() as usize - 1;
            if b.first() == Some(&0) {
                self.state[t] = State::Alive;
            } else {
                self.state[t] = State::Gone;
                problem = Some(RankProblem {
                    rank: t + 1,
                    host: self.hosts[t].clone(),
                    problem: format!(
                        "failed to load its part: {}",
                        String::from_utf8_lossy(b.get(1..).unwrap_or_default())
                    ),
                });
            }
        }
        while let Some(pair) = any.immediate_matched_probe_with_tag(TAG_BYE) {
            let (b, st) = pair.matched_receive_vec::<u64>();
            let t = st.source_rank() as usize - 1;
            self.heard[t] = Instant::now();
            self.state[t] = State::Gone;
            let kind = match b.first() {
                Some(0) => ByeKind::Stopped,
                Some(1) => ByeKind::Failed,
                _ => ByeKind::Orphaned,
            };
            self.bye[t] = Some((kind, b.get(1).map_or(f64::NAN, |&x| u64s_to_f64(x))));
            let known = |i: usize| b.get(i).copied().filter(|&x| x != u64::MAX);
            self.bye_memory[t] = Some((known(2), known(3)));
        }
        for ops in &mut self.outbox {
            ops.retain_mut(|op| !op.test());
        }
        let mut arrived = Vec::new();
        for t in 0..self.n {
            if self.incoming[t].is_none() {
                let from = self.world.process_at_rank(t as i32 + 1);
                if let Some(pair) = from.immediate_matched_probe_with_tag(TAG_CONTRIB_HDR) {
                    let (hdr, _) = pair.matched_receive_vec::<u64>();
                    self.heard[t] = Instant::now();
                    let len = hdr.get(5).copied().unwrap_or(0) as usize;
                    let op = Op::recv(
                        self.comm,
                        t as i32 + 1,
                        TAG_CONTRIB,
                        Buf::F32(vec![0.0; len]),
                    );
                    self.incoming[t] = Some(Incoming { hdr, op });
                }
            }
            let done = self.incoming[t].as_mut().is_some_and(|i| i.op.test());
            if done {
                let Incoming { hdr, op } = self.incoming[t].take().expect("incoming");
                match op.into_buf() {
                    Some(Buf::F32(params))
                        if hdr.len() == 6 && self.params_len.is_none_or(|n| n == params.len()) =>
                    {
                        arrived.push((t, hdr, params))
                    }
                    _ => self.dropped += 1,
                }
            }
        }
        (arrived, problem)
    }

    /// Waits until every trainer rank has loaded its part (`READY`), at most `timeout`.
    ///
    /// # Errors
    /// Every rank that failed to load, or did not report within `timeout`, by rank and host.
    pub fn join(&mut self, timeout: Duration) -> Result<(), Vec<RankProblem>> {
        let deadline = Instant::now() + timeout;
        let mut problems = Vec::new();
        loop {
            if let (_, Some(p)) = self.poll() {
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

    /// After the run: waits for every trainer's `BYE`, answering late contributions with STOP:
    /// at most `timeout` for the trainers that took part in the last round they were expected
    /// in, at most the round timeout for those that had been missing (dead or stalled). The
    /// trainers that never said goodbye are given up on (see [`MpiCoordinator::failed`]).
    ///
    /// # Errors
    /// The ranks given up on, by rank and host, with when they were lost.
    pub fn finish(&mut self, timeout: Duration) -> Result<(), Vec<RankProblem>> {
        let start = Instant::now();
        loop {
            let (arrived, _) = self.poll();
            for (t, _, _) in arrived {
                if self.state[t] != State::Gone {
                    self.send(t, TAG_STOP, Buf::U8(vec![0]));
                    self.state[t] = State::Stopped;
                }
            }
            let waited = start.elapsed();
            let pending: Vec<usize> = (0..self.n)
                .filter(|&t| self.state[t] != State::Gone)
                .filter(|&t| {
                    let limit = if self.missed_at[t].is_some() {
                        self.round_timeout
                    } else {
                        timeout
                    };
                    waited < limit
                })
                .collect();
            if pending.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let now = self.clock.elapsed().as_secs_f64();
        let mut problems = Vec::new();
        for t in 0..self.n {
            if self.state[t] != State::Gone {
                let at = self.missed_at[t].unwrap_or(now);
                self.lost.push((t, at));
                problems.push(RankProblem {
                    rank: t + 1,
                    host: self.hosts[t].clone(),
                    problem: match self.missed_at[t] {
                        Some(at) => format!(
                            "lost at {at:.1}s of training (missed every round from then on and did not exit within {} of the end)",
                            humantime::format_duration(self.round_timeout)
                        ),
                        None => format!(
                            "did not exit within {} of the end of the run",
                            humantime::format_duration(timeout)
                        ),
                    },
                });
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// Ends the exchange with the trainers that said goodbye: waits (at most the round
    /// timeout) for the messages in flight to them, then tells each whether to call
    /// `MPI_Finalize`: yes only when every trainer said goodbye and nothing is left in flight
    /// (a lost rank would make `MPI_Finalize` wait forever). Returns that decision for rank 0
    /// too.
    pub fn close(&mut self) -> bool {
        let deadline = Instant::now() + self.round_timeout;
        let said_bye: Vec<usize> = (0..self.n)
            .filter(|&t| self.state[t] == State::Gone)
            .collect();
        let drained = loop {
            self.poll();
            if said_bye.iter().all(|&t| self.outbox[t].is_empty()) {
                break true;
            }
            if Instant::now() >= deadline {
                break false;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        // no heartbeat after FINAL: the trainers stop taking messages
        let beats_left = self.heartbeat.take().is_none_or(Heartbeat::stop);
        // every trainer said goodbye (not so when the run failed before it started)
        let finalize = drained
            && beats_left
            && self.lost.is_empty()
            && self.state.iter().all(|s| *s == State::Gone)
            && self.incoming.iter().all(Option::is_none);
        for &t in &said_bye {
            self.send(t, TAG_FINAL, Buf::U8(vec![finalize as u8]));
        }
        loop {
            self.poll();
            if said_bye.iter().all(|&t| self.outbox[t].is_empty()) {
                return finalize;
            }
            if Instant::now() >= deadline + self.round_timeout {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Lets every joined trainer start: sends the seed segment of the trainers' random streams
    /// (0, or the round a resumed run continues from; see
    /// [`crate::engines::trainer::Trainer::with_segment`]); the initial parameters follow from
    /// `coordinate`. `epochs[t]`: the epochs trainer `t` had completed at the resume point
    /// ([`crate::Resume::epochs`]; missing entries count as 0), from which it goes on counting.
    pub fn start(&mut self, segment: u64, epochs: &[u64]) {
        for t in 0..self.n {
            if self.state[t] == State::Alive {
                let e = epochs.get(t).copied().unwrap_or(0);
                self.send(t, TAG_START, Buf::U64(vec![segment, e]));
            }
        }
    }

    /// Trainers that failed: those that ended with an injected failure, with their training
    /// time, and those given up on by [`MpiCoordinator::finish`], with the training time of
    /// the first round deadline they missed for good (seconds).
    pub fn failed(&self) -> Vec<(usize, f64)> {
        let mut f: Vec<(usize, f64)> = (0..self.n)
            .filter_map(|t| match self.bye[t] {
                Some((ByeKind::Failed, at)) => Some((t, at)),
                _ => None,
            })
            .chain(self.lost.iter().copied())
            .collect();
        f.sort_by_key(|&(t, _)| t);
        f
    }

    /// Whether the round loop has started (the initial parameters were sent): before that, a
    /// failure of rank 0 must end the trainer ranks with [`MpiCoordinator::abort_job`].
    pub fn started(&self) -> bool {
        self.params_len.is_some()
    }

    /// Peak memory each trainer rank reported with its `BYE` (ranks that sent none are left
    /// out), as `summary.json` `memory` entries.
    pub fn trainer_memory(&self) -> Vec<crate::memory::ProcessMemory> {
        (0..self.n)
            .filter_map(|t| {
                self.bye_memory[t].map(|(rss, anon)| crate::memory::ProcessMemory {
                    role: "trainer".into(),
                    rank: Some(t + 1),
                    trainer: Some(t),
                    peak_rss_bytes: rss,
                    peak_anon_bytes: anon,
                })
            })
            .collect()
    }

    /// Contributions dropped because they were malformed (wrong size).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Host name trainer `t` reported.
    pub fn host(&self, t: usize) -> Option<&str> {
        self.hosts[t].as_deref()
    }

    /// Ends the whole job: stops the heartbeat, sends every trainer rank an `ABORT` with
    /// `message` (it prints it and exits with an error), then `MPI_Abort(code)`.
    pub fn abort_job(&mut self, message: &str, code: i32) -> ! {
        if let Some(h) = self.heartbeat.take() {
            h.stop();
        }
        abort_job(&self.world, message, code)
    }

    fn send_stop(&mut self, t: usize) {
        if matches!(self.state[t], State::Alive) {
            self.send(t, TAG_STOP, Buf::U8(vec![0]));
            self.state[t] = State::Stopped;
        }
    }
}

impl CoordinatorEndpoint for MpiCoordinator {
    fn num_trainers(&self) -> usize {
        self.n
    }

    fn broadcast_initial(&mut self, params: Arc<Vec<f32>>) {
        self.params_len = Some(params.len());
        for t in 0..self.n {
            if self.state[t] == State::Alive {
                self.send(t, TAG_INIT, Buf::Shared(params.clone()));
            }
        }
    }

    fn call_round(&mut self, round: u64) {
        self.call(round, false);
    }

    fn call_final(&mut self, round: u64) {
        self.call(round, true);
    }

    fn gather(
        &mut self,
        round: u64,
        timeout: Duration,
        latest: &Arc<Vec<f32>>,
        until: Option<Duration>,
    ) -> Vec<Contribution> {
        self.gather_round(round, timeout, latest, until)
    }

    fn reply(&mut self, to: &[usize], reply: Reply) {
        self.reply_to(to, reply)
    }

    fn is_alive(&self, t: usize) -> bool {
        self.state[t] == State::Alive
    }

    fn answer_late(&mut self, latest: &Arc<Vec<f32>>) {
        let (arrived, _) = self.poll();
        for (t, h, _) in arrived {
            self.roster.admit(t, h[0]);
            if self.state[t] == State::Alive {
                self.send(t, TAG_CONTINUE, Buf::Shared(latest.clone()));
            }
        }
    }
}

impl MpiCoordinator {
    /// Sends `DUE [round, last]` to every trainer that takes its messages.
    fn call(&mut self, round: u64, last: bool) {
        self.poll();
        for t in 0..self.n {
            // a rank that has not taken its earlier messages (dead or stalled) gets no more
            // calls piled up: when it wakes, it answers an older round and is caught up. A rank
            // that ended with an injected failure waits for the FINAL word: the calls tell it
            // the coordinator is alive.
            let failed = matches!(self.bye[t], Some((ByeKind::Failed, _)));
            if (self.state[t] == State::Alive || failed) && self.outbox[t].len() < MAX_IN_FLIGHT {
                self.send(t, TAG_DUE, Buf::U64(vec![round, last as u64]));
            }
        }
    }

    fn gather_round(
        &mut self,
        round: u64,
        timeout: Duration,
        latest: &Arc<Vec<f32>>,
        until: Option<Duration>,
    ) -> Vec<Contribution> {
        let n = self.n;
        self.roster.begin(round);
        let mut got = Gathered::new(n);
        let start = Instant::now();
        let deadline = start + timeout;
        let until = until.map(|u| start + u);
        loop {
            let (arrived, _) = self.poll();
            let idle = arrived.is_empty();
            for (t, h, params) in arrived {
                let verdict = self.roster.admit(t, h[0]);
                if verdict == Verdict::CatchUp && self.state[t] == State::Alive {
                    self.send(t, TAG_CONTINUE, Buf::Shared(latest.clone()));
                }
                got.file(
                    verdict,
                    Contribution {
                        trainer: t,
                        params,
                        report: TrainerReport {
                            steps: h[1],
                            epochs: h[2],
                            loss_sum: f64::from_bits(h[3]),
                            loss_count: h[4],
                        },
                    },
                );
            }
            let alive = |t: usize| self.state[t] == State::Alive;
            let waiting =
                (0..n).any(|t| got.fresh[t].is_none() && self.roster.expects(t) && alive(t));
            let now = Instant::now();
            // every trainer silent for the peer timeout (heartbeats included): all are lost
            let all_silent = (0..n)
                .filter(|&t| alive(t))
                .all(|t| now.duration_since(self.heard[t]) > self.peer_timeout);
            let nothing = !got.any();
            if (got.any() && (!waiting || now >= deadline))
                || !(0..n).any(alive)
                || (nothing && now >= deadline && all_silent)
                || (nothing && until.is_some_and(|u| now >= u))
            {
                break;
            }
            if idle {
                std::thread::sleep(POLL);
            }
        }
        let now = self.clock.elapsed().as_secs_f64();
        for t in 0..n {
            if got.fresh[t].is_some() {
                self.missed_at[t] = None;
            } else if self.roster.expects(t) && self.missed_at[t].is_none() {
                self.missed_at[t] = Some(now);
            }
        }
        self.roster.end();
        let (contribs, parked) = got.finish();
        for c in &contribs {
            self.missed_at[c.trainer] = None;
        }
        self.parked = parked;
        contribs
    }

    fn reply_to(&mut self, to: &[usize], reply: Reply) {
        let parked = std::mem::take(&mut self.parked);
        for &t in to.iter().chain(&parked) {
            match &reply {
                Reply::Continue(p) => {
                    self.roster.took_part(t);
                    if self.state[t] == State::Alive {
                        self.send(t, TAG_CONTINUE, Buf::Shared(p.clone()));
                    }
                }
                Reply::Stop(_) => self.send_stop(t),
            }
        }
    }
}

/// A trainer rank's side of the MPI transport.
pub struct MpiTrainer {
    /// Kept for the lifetime of the endpoint (`comm` is its handle).
    _world: SimpleCommunicator,
    comm: ffi::MPI_Comm,
    due: Cell<u64>,
    /// When the coordinator was last heard from.
    heard: Cell<Instant>,
    /// Set once nothing was heard from the coordinator for `peer_timeout`, or it sent `ABORT`.
    lost: Cell<bool>,
    /// The coordinator's `ABORT` message, if it sent one.
    aborted: RefCell<Option<String>>,
    /// The round called is the last one (`DUE [round, 1]`).
    last_call: Cell<bool>,
    peer_timeout: Duration,
    /// Heartbeat interval, and when this rank last sent one.
    beat: Duration,
    beat_sent: Cell<Instant>,
    outbox: RefCell<Vec<Op>>,
}

/// Why a trainer rank could not start training.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartFailure {
    /// The coordinator failed and sent this message before ending the job.
    Aborted(String),
    /// Nothing heard from the coordinator for the peer timeout (after the join timeout).
    Lost,
}

// SAFETY: the communicator handle is only used from the thread that initialized MPI; the
// endpoint is `Send` only because `TrainerEndpoint` requires it for the in-process engine.
unsafe impl Send for MpiTrainer {}

impl MpiTrainer {
    /// Trainer end on a rank > 0 of `world`; it considers the coordinator lost after
    /// `cfg.peer_timeout()` without a message from it. Sends `HELLO` (this host's name) at
    /// once, so the coordinator can name the host if loading the part fails or hangs.
    pub fn new(world: SimpleCommunicator, cfg: &TrainConfig) -> MpiTrainer {
        let host = mpi::environment::processor_name().unwrap_or_else(|_| "?".into());
        let comm = world.as_raw();
        let t = MpiTrainer {
            _world: world,
            comm,
            due: Cell::new(0),
            heard: Cell::new(Instant::now()),
            lost: Cell::new(false),
            aborted: RefCell::new(None),
            last_call: Cell::new(false),
            peer_timeout: cfg.peer_timeout(),
            beat: heartbeat_interval(cfg),
            beat_sent: Cell::new(Instant::now()),
            outbox: RefCell::new(Vec::new()),
        };
        t.send(TAG_HELLO, Buf::U8(host.into_bytes()));
        t
    }

    fn send(&self, tag: i32, buf: Buf) {
        let op = Op::send(self.comm, 0, tag, buf);
        let mut out = self.outbox.borrow_mut();
        out.retain_mut(|op| !op.test());
        out.push(op);
    }

    /// How long the coordinator has been silent when this trainer gives up on it.
    pub fn peer_timeout(&self) -> Duration {
        self.peer_timeout
    }

    /// Whether the coordinator was given up on (silent for the peer timeout, or it aborted).
    pub fn lost_coordinator(&self) -> bool {
        self.lost.get()
    }

    /// The message of the coordinator's `ABORT`, if it sent one (it failed and ended the job).
    pub fn coordinator_error(&self) -> Option<String> {
        self.aborted.borrow().clone()
    }

    /// Sends `ALIVE` when the heartbeat interval has passed since the last one.
    fn beat(&self) {
        if self.beat_sent.get().elapsed() >= self.beat {
            self.beat_sent.set(Instant::now());
            self.send(TAG_ALIVE, Buf::U8(vec![0]));
        }
    }

    /// Receives the next message with `tag` from the coordinator if one has arrived (waiting
    /// for its transfer to complete, at most the peer timeout); `None` when there is none.
    fn take(&self, tag: i32, dtype: ffi::MPI_Datatype, make: fn(usize) -> Buf) -> Option<Buf> {
        let (_, mut op) = take_matched(self.comm, 0, tag, dtype, make)?;
        self.heard.set(Instant::now());
        while !op.test() {
            if self.heard.get().elapsed() > self.peer_timeout {
                self.lost.set(true);
                return None; // abandoned: the coordinator died mid-transfer
            }
            std::thread::sleep(POLL);
        }
        self.heard.set(Instant::now());
        op.into_buf()
    }

    fn take_u8(&self, tag: i32) -> Option<Vec<u8>> {
        // SAFETY: reading a predefined datatype handle.
        match self.take(tag, unsafe { ffi::RSMPI_UINT8_T }, |n| Buf::U8(vec![0; n]))? {
            Buf::U8(v) => Some(v),
            _ => None,
        }
    }

    fn take_u64(&self, tag: i32) -> Option<Vec<u64>> {
        // SAFETY: as above.
        match self.take(tag, unsafe { ffi::RSMPI_UINT64_T }, |n| {
            Buf::U64(vec![0; n])
        })? {
            Buf::U64(v) => Some(v),
            _ => None,
        }
    }

    fn take_f32(&self, tag: i32) -> Option<Vec<f32>> {
        // SAFETY: as above.
        match self.take(tag, unsafe { ffi::RSMPI_FLOAT }, |n| Buf::F32(vec![0.0; n]))? {
            Buf::F32(v) => Some(v),
            _ => None,
        }
    }

    /// Whether the coordinator has now been silent for longer than the peer timeout, or has
    /// sent `ABORT` (sets [`MpiTrainer::lost_coordinator`]). Takes the coordinator's heartbeats
    /// and sends this rank's own.
    fn silent(&self) -> bool {
        if let Some(m) = self.take_u8(TAG_ABORT) {
            *self.aborted.borrow_mut() = Some(String::from_utf8_lossy(&m).into_owned());
            self.lost.set(true);
        }
        while self.take_u8(TAG_ALIVE).is_some() {}
        self.beat();
        if self.heard.get().elapsed() > self.peer_timeout {
            self.lost.set(true);
        }
        self.lost.get()
    }

    /// Tells the coordinator the part is loaded (`Ok`) or could not be (`Err(message)`).
    pub fn ready(&self, status: Result<(), String>) {
        let msg: Vec<u8> = match status {
            Ok(()) => vec![0],
            Err(e) => std::iter::once(1u8).chain(e.into_bytes()).collect(),
        };
        self.send(TAG_READY, Buf::U8(msg));
        // a rank that failed exits right after this: let the message leave first
        let deadline = Instant::now() + self.peer_timeout;
        while Instant::now() < deadline {
            let mut out = self.outbox.borrow_mut();
            out.retain_mut(|op| !op.test());
            if out.is_empty() {
                break;
            }
            drop(out);
            std::thread::sleep(POLL);
        }
    }

    /// Waits until the coordinator lets the run start; returns the seed segment of the
    /// trainers' random streams and the epochs this trainer had completed at a resume point. Gives up when the coordinator sends `ABORT`, or when it has
    /// been silent for the peer timeout after `timeout` plus the peer timeout (the coordinator
    /// loads its own data, then waits `timeout` for every rank to load).
    ///
    /// # Errors
    /// [`StartFailure`]: the coordinator's error, or its silence.
    pub fn wait_start(&self, timeout: Duration) -> Result<(u64, u64), StartFailure> {
        let deadline = Instant::now() + timeout + self.peer_timeout;
        loop {
            if let Some(v) = self.take_u64(TAG_START) {
                let at = |i: usize| v.get(i).copied().unwrap_or(0);
                return Ok((at(0), at(1)));
            }
            let silent = self.silent();
            if let Some(m) = self.coordinator_error() {
                return Err(StartFailure::Aborted(m));
            }
            if silent && Instant::now() >= deadline {
                return Err(StartFailure::Lost);
            }
            // (silence before the deadline: rank 0 may still be loading its data)
            self.lost.set(false);
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Tells the coordinator this trainer's loop has ended (`at`: its training time), with this
    /// process's peak RSS and peak anonymous memory (`u64::MAX` when unknown).
    pub fn bye(&self, kind: ByeKind, at: Duration) {
        let m = crate::memory::ProcessMemory::this_process("trainer", None, None);
        self.send(
            TAG_BYE,
            Buf::U64(vec![
                kind as u64,
                at.as_secs_f64().to_bits(),
                m.peak_rss_bytes.unwrap_or(u64::MAX),
                m.peak_anon_bytes.unwrap_or(u64::MAX),
            ]),
        );
    }

    /// After [`MpiTrainer::bye`]: takes whatever the coordinator still sends until its `FINAL`
    /// word (at most the peer timeout of silence) and waits for this rank's own messages to
    /// leave. Returns whether to call `MPI_Finalize` (only when the coordinator said so and
    /// nothing is left in flight).
    pub fn farewell(&self) -> bool {
        self.heard.set(Instant::now());
        loop {
            self.drain_due();
            let _ = self.take_f32(TAG_CONTINUE);
            let _ = self.take_f32(TAG_INIT);
            let _ = self.take_u8(TAG_STOP);
            if let Some(v) = self.take_u8(TAG_FINAL) {
                let deadline = Instant::now() + self.peer_timeout;
                loop {
                    self.drain_due();
                    while self.take_u8(TAG_ALIVE).is_some() {}
                    let _ = self.take_f32(TAG_CONTINUE);
                    let _ = self.take_u8(TAG_STOP);
                    let mut out = self.outbox.borrow_mut();
                    out.retain_mut(|op| !op.test());
                    if out.is_empty() {
                        return v.first() == Some(&1);
                    }
                    if Instant::now() >= deadline {
                        return false;
                    }
                    drop(out);
                    std::thread::sleep(POLL);
                }
            }
            if self.silent() {
                return false;
            }
            std::thread::sleep(POLL);
        }
    }

    fn drain_due(&self) {
        while let Some(v) = self.take_u64(TAG_DUE) {
            if let Some(&r) = v.first() {
                self.due.set(self.due.get().max(r));
            }
            if v.get(1) == Some(&1) {
                self.last_call.set(true);
            }
        }
    }

    /// Waits for the coordinator's answer (CONTINUE or STOP), still reading DUE messages;
    /// `None` when it has been silent for the peer timeout.
    fn wait_reply(&self) -> Option<Reply> {
        loop {
            if self.take_u8(TAG_STOP).is_some() {
                return Some(Reply::Stop(Arc::new(Vec::new())));
            }
            if let Some(p) = self.take_f32(TAG_CONTINUE) {
                return Some(Reply::Continue(Arc::new(p)));
            }
            self.drain_due();
            if self.silent() {
                return None;
            }
            self.outbox.borrow_mut().retain_mut(|op| !op.test());
            std::thread::sleep(POLL);
        }
    }
}

impl TrainerEndpoint for MpiTrainer {
    fn initial_params(&mut self) -> Option<Arc<Vec<f32>>> {
        self.heard.set(Instant::now());
        loop {
            if let Some(p) = self.take_f32(TAG_INIT) {
                return Some(Arc::new(p));
            }
            if self.silent() {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The latest round called; `u64::MAX` (the end of the run) once the coordinator has been
    /// silent for the peer timeout, so the trainer loop ends ([`TrainerEndpoint::join_round`]
    /// then returns `None`).
    fn due_round(&self) -> u64 {
        self.drain_due();
        if self.silent() {
            return u64::MAX;
        }
        self.due.get()
    }

    fn due_now(&self) -> bool {
        self.last_call.get()
    }

    fn join_round(&mut self, round: u64, params: &[f32], report: TrainerReport) -> Option<Reply> {
        if self.silent() {
            return None;
        }
        if self.take_u8(TAG_STOP).is_some() {
            return Some(Reply::Stop(Arc::new(Vec::new())));
        }
        if round != u64::MAX {
            let h = vec![
                round,
                report.steps,
                report.epochs,
                report.loss_sum.to_bits(),
                report.loss_count,
                params.len() as u64,
            ];
            self.send(TAG_CONTRIB_HDR, Buf::U64(h));
            self.send(TAG_CONTRIB, Buf::F32(params.to_vec()));
        }
        self.wait_reply()
    }
}
