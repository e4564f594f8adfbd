//! The step gate of in-process trainers: at most `permits` optimizer steps at once, granted in
//! the order asked (first come, first served, so every trainer steps at the same rate).
//!
//! In-process trainers are threads of one process. When there are more trainers than cores
//! (4 trainers on a 2-core machine), the operating system interleaves all of them, and every
//! trainer holds one step's activations (the buffers its model keeps between steps: about
//! 190 MiB per trainer for link prediction at the release's batch of 8192 positives on a
//! 5M-node graph, issue 32) although only `cores` steps can run at a time. Behind the gate at
//! most `cores` steps run, and the trainers' models share one pool of buffers
//! (`tma_nn::Model::sharing_buffers`), so the memory kept is that of `cores` steps. The
//! trainers still train independently (nothing but CPU time is shared). A trainer passes the
//! gate for the model's forward and backward pass only: its sampling (which reads the mapped
//! part and may wait for the disk), its optimizer update and its round joins run outside.
//!
//! The gate also gives validation priority over the steps ([`StepGate::hold`]): while the
//! coordinator's evaluator validates a model, no step enters, so the validation has the cores
//! the trainers share with it instead of a share of them (docs/decisions/0029-validation-first.md).
//! The coordinator lifts the hold when the validation ends or the next round is due, whichever
//! comes first, so a slow validation never delays a round.

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex};

/// Model passes that run at once for `num_trainers` in-process trainers on `threads` worker
/// threads (0 read as 1): every trainer's when each has a thread, else `threads` (the gate's
/// permits). What the memory estimate counts activations for (`crate::run::memory_estimate::estimate`).
pub fn concurrent_steps(threads: usize, num_trainers: usize) -> usize {
    num_trainers.min(threads.max(1))
}

/// At most `permits` holders at once, admitted in the order they asked ([`StepGate::enter`]).
#[derive(Debug)]
pub struct StepGate {
    permits: usize,
    state: Mutex<GateState>,
    turn: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    /// Tickets waiting, oldest first.
    queue: VecDeque<u64>,
    next_ticket: u64,
    /// Holders inside.
    inside: usize,
    /// No one enters while held ([`StepGate::hold`]).
    held: bool,
}

/// Held while a step runs; dropping it lets the next one in.
#[derive(Debug)]
pub struct GatePass<'a> {
    gate: &'a StepGate,
}

impl StepGate {
    /// A gate of `permits` (at least 1).
    pub fn new(permits: usize) -> StepGate {
        StepGate {
            permits: permits.max(1),
            state: Mutex::new(GateState::default()),
            turn: Condvar::new(),
        }
    }

    /// How many may be inside at once.
    pub fn permits(&self) -> usize {
        self.permits
    }

    /// Waits until fewer than `permits` are inside and every earlier caller has entered, then
    /// enters.
    pub fn enter(&self) -> GatePass<'_> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let ticket = s.next_ticket;
        s.next_ticket += 1;
        s.queue.push_back(ticket);
        while !(!s.held && s.inside < self.permits && s.queue.front() == Some(&ticket)) {
            s = self.turn.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.queue.pop_front();
        s.inside += 1;
        drop(s);
        // the next in line may enter too if a permit is left
        self.turn.notify_all();
        GatePass { gate: self }
    }

    /// Holds (`true`) or lifts (`false`) the gate: while held no one enters (steps already
    /// inside finish); lifted, the callers waiting enter in their order. Idempotent.
    pub fn hold(&self, held: bool) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let was = std::mem::replace(&mut s.held, held);
        drop(s);
        if was && !held {
            self.turn.notify_all();
        }
    }

    /// Whether the gate is held.
    pub fn is_held(&self) -> bool {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).held
    }
}

impl Drop for GatePass<'_> {
    fn drop(&mut self) {
        let mut s = self.gate.state.lock().unwrap_or_else(|e| e.into_inner());
        s.inside -= 1;
        drop(s);
        self.gate.turn.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn never_more_inside_than_permits_and_every_caller_gets_in() {
        let gate = Arc::new(StepGate::new(2));
        let inside = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..5)
            .map(|_| {
                let (gate, inside, most, done) =
                    (gate.clone(), inside.clone(), most.clone(), done.clone());
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        let _p = gate.enter();
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_micros(300));
                        inside.fetch_sub(1, Ordering::SeqCst);
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(done.load(Ordering::SeqCst), 100);
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(gate.permits(), 2);
        assert_eq!(StepGate::new(0).permits(), 1);
    }

    #[test]
    fn a_held_gate_lets_no_one_in_until_lifted_then_everyone_in_order() {
        // one permit, so each caller records its entry while it is the only one inside (with
        // two permits two callers are inside at once and their records race: CI saw [1, 0, 2])
        let gate = Arc::new(StepGate::new(1));
        let entered = Arc::new(Mutex::new(Vec::new()));
        // one step inside when the hold comes: it finishes; nobody new enters
        let inside = gate.enter();
        gate.hold(true);
        gate.hold(true);
        assert!(gate.is_held());
        let mut threads = Vec::new();
        for i in 0..3 {
            let (g, entered) = (gate.clone(), entered.clone());
            threads.push(std::thread::spawn(move || {
                let _p = g.enter();
                entered.lock().unwrap().push(i);
            }));
            while gate.state.lock().unwrap().queue.len() < i + 1 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        drop(inside);
        // a free permit, yet held: still nobody in after the waiters were woken
        std::thread::sleep(Duration::from_millis(50));
        assert!(entered.lock().unwrap().is_empty());
        assert_eq!(gate.state.lock().unwrap().queue.len(), 3);
        gate.hold(false);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*entered.lock().unwrap(), vec![0, 1, 2]);
        assert!(!gate.is_held());
    }

    #[test]
    fn callers_enter_in_the_order_they_asked() {
        // one permit held; three callers queue one after another; released, they enter in
        // their order of arrival
        let gate = Arc::new(StepGate::new(1));
        let order = Arc::new(Mutex::new(Vec::new()));
        let held = gate.enter();
        let mut threads = Vec::new();
        for i in 0..3 {
            let (g, order) = (gate.clone(), order.clone());
            threads.push(std::thread::spawn(move || {
                let _p = g.enter();
                order.lock().unwrap().push(i);
            }));
            // wait until caller i is queued before starting the next
            while gate.state.lock().unwrap().queue.len() < i + 1 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        drop(held);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
    }
}
