//! Ctrl-C (SIGINT) or SIGTERM during `tma train` with in-process trainers: the first one asks
//! the run to stop after the round in flight (the run then writes its checkpoint and a summary
//! marked `interrupted`, and the CLI says how to resume); the second one stops the process at
//! once (removing a run directory that has no complete checkpoint yet, so `--out` can be used
//! again). SIGTERM
//! is what job schedulers (SLURM at the time limit, Kubernetes at eviction) and `kill` send
//! before SIGKILL: a preempted run keeps its last round and resumes. The library knows nothing
//! of signals: it reads the stop flag this module sets ([`tma_train::Run::stop_on`]). MPI runs
//! keep the default handlers (mpirun relays signals to every rank).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// SIGINTs and SIGTERMs received so far (the handler only counts; a watcher thread acts).
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// The first signal received (0 before any): the process exits with 128 + it, the shells'
/// convention (130 for SIGINT, 143 for SIGTERM).
static FIRST: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    let _ = FIRST.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    let n = COUNT.fetch_add(1, Ordering::SeqCst) + 1;
    if n >= 3 {
        // the watcher did not get to run: stop now (async-signal-safe)
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(exit_code()) }
    }
}

/// Whether a SIGINT or SIGTERM has been received (and caught: handlers installed).
pub fn received() -> bool {
    COUNT.load(Ordering::SeqCst) > 0
}

/// The exit code of a run stopped on request: 128 + the first signal received (130 when none
/// was: the Ctrl-C code).
pub fn exit_code() -> i32 {
    match FIRST.load(Ordering::SeqCst) {
        0 => 128 + libc::SIGINT,
        s => 128 + s,
    }
}

/// Set while `tma train` loads and prepares the data (before its first round): a first signal
/// then ends the run before it trains (the CLI checks the stop flag once the data is ready),
/// and the watcher says so instead of "finishing the round in flight".
static BEFORE_TRAINING: AtomicBool = AtomicBool::new(false);

/// Says whether `tma train` is still loading or preparing the data (`true`, set after
/// [`install`]) or has started training (`false`), for the watcher's first message.
pub fn set_before_training(before: bool) {
    BEFORE_TRAINING.store(before, Ordering::SeqCst);
}

/// The command that continues the whole job when it is not the run's own `tma train --resume
/// RUN_DIR` (`tma compare` sets `tma compare --resume OUT ...`): the second signal's message
/// names it (a fresh-clone trial: the second Ctrl-C inside a comparison advised resuming the
/// one run alone, outside its comparison).
static RESUME_HINT: Mutex<Option<String>> = Mutex::new(None);

/// Sets the command the second signal's message names to continue the job (see
/// [`RESUME_HINT`]).
pub fn set_resume_hint(command: String) {
    if let Ok(mut h) = RESUME_HINT.lock() {
        *h = Some(command);
    }
}

/// The second signal's message once the run directory `slot` (see [`Cleanup`]) was dealt
/// with: `removed` when it had no checkpoint and was removed; `hint` the command that
/// continues the job when it is not `tma train --resume` (see [`set_resume_hint`]).
fn stopped_at_once(slot: Option<(&std::path::Path, bool)>, hint: Option<&str>) -> String {
    match (slot, hint) {
        (Some((dir, true)), None) => format!(
            "interrupt: stopped at once; the run had no checkpoint yet (nothing to resume), {} was removed",
            dir.display()
        ),
        (Some((dir, true)), Some(h)) => format!(
            "interrupt: stopped at once; the run had no checkpoint yet, {} was removed; `{h}` continues (that run starts again)",
            dir.display()
        ),
        (Some((dir, false)), None) => format!(
            "interrupt: stopped at once; `tma train --resume {}` continues from its last checkpoint",
            dir.display()
        ),
        (Some((_, false)), Some(h)) | (None, Some(h)) => format!(
            "interrupt: stopped at once; `{h}` continues (finished runs are kept, the interrupted one continues from its last checkpoint)"
        ),
        (None, None) => "interrupt: stopped at once".to_string(),
    }
}

/// Routes SIGINT and SIGTERM to [`on_signal`] (which only counts; a watcher thread acts).
/// Called before anything is made that a signal must clean up (`tma partition --out`'s
/// staging folder), so that a signal arriving before the watcher starts is counted, not fatal;
/// the watcher then acts on it at once. Calling it again changes nothing.
pub fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only touches atomics (and calls _exit).
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

/// The run directory to clean up on a second Ctrl-C: its path and whether it existed before
/// the run (`Run::dir_existed`); None while no directory is made or for a resumed run.
pub type Cleanup = Arc<Mutex<Option<(PathBuf, bool)>>>;

/// The handler's stop flag and cleanup slot, once installed.
static INSTALLED: std::sync::OnceLock<(tma_train::StopFlag, Cleanup)> = std::sync::OnceLock::new();

/// Installs the SIGINT handler and its watcher thread; returns the stop flag for the run and
/// the slot for the run directory. Later calls in the same process (`--split-index all` runs
/// one training per split) return the same flag and slot, with the slot emptied for the next
/// run.
pub fn install() -> (tma_train::StopFlag, Cleanup) {
    let (stop, cleanup) = INSTALLED.get_or_init(install_once).clone();
    if let Ok(mut slot) = cleanup.lock() {
        *slot = None;
    }
    (stop, cleanup)
}

fn install_once() -> (tma_train::StopFlag, Cleanup) {
    let stop: tma_train::StopFlag = Arc::new(AtomicBool::new(false));
    let cleanup: Cleanup = Arc::new(Mutex::new(None));
    catch_signals();
    let (s, c) = (stop.clone(), cleanup.clone());
    std::thread::Builder::new()
        .name("tma-ctrl-c".into())
        .spawn(move || {
            let mut announced = false;
            loop {
                std::thread::sleep(Duration::from_millis(50));
                let n = COUNT.load(Ordering::SeqCst);
                if n >= 1 && !announced {
                    announced = true;
                    s.store(true, Ordering::SeqCst);
                    if BEFORE_TRAINING.load(Ordering::SeqCst) {
                        eprintln!(
                            "\ninterrupt: the run will not train: the data being loaded or prepared is finished first (it cannot be cut short), then the run ends before its first round (Ctrl-C or SIGTERM again to stop at once)"
                        );
                    } else {
                        eprintln!(
                            "\ninterrupt: finishing the round in flight, then writing the checkpoint and the summary (Ctrl-C or SIGTERM again to stop at once)"
                        );
                    }
                }
                if n >= 2 {
                    let slot = c.lock().map(|g| g.clone()).unwrap_or(None);
                    let removed = slot
                        .as_ref()
                        .map(|(dir, existed)| (dir.clone(), tma_train::run::discard_unstarted(dir, *existed)));
                    let hint = RESUME_HINT.lock().ok().and_then(|h| h.clone());
                    eprintln!(
                        "{}",
                        stopped_at_once(
                            removed.as_ref().map(|(d, r)| (d.as_path(), *r)),
                            hint.as_deref()
                        )
                    );
                    std::process::exit(exit_code());
                }
            }
        })
        .expect("spawn the Ctrl-C watcher");
    (stop, cleanup)
}

/// Set once a Ctrl-C of `tma partition --out` is being acted on: the main thread's own exit
/// waits ([`wait_if_interrupted`]) so that the watcher's exit 130 and its message win over an
/// error the cleanup itself caused (files vanishing under the writer).
static CLEANING: AtomicBool = AtomicBool::new(false);

/// Set when the main thread has stopped in [`wait_if_interrupted`]: it writes nothing more.
static PARKED: AtomicBool = AtomicBool::new(false);

/// Blocks for good while a Ctrl-C cleanup is under way (the watcher ends the process).
pub fn wait_if_interrupted() {
    if CLEANING.load(Ordering::SeqCst) {
        PARKED.store(true, Ordering::SeqCst);
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}

/// Ctrl-C or SIGTERM during `tma partition --out DIR`: the writer's `abort` flag is set (it checks it
/// last before renaming the staging folder `.DIR.tmp` into place), the staging folder is
/// renamed aside (atomic: either it is still staging, and the writer's rename fails, or the
/// writer renamed it first and `DIR` is complete) and removed; one line says which, and the
/// process exits 130 (SIGINT) or 143 (SIGTERM). Without this a killed run left the staging folder behind (gigabytes at scale)
/// until the same `--out` was used again.
pub fn remove_on_interrupt(staging: PathBuf, out: PathBuf, abort: Arc<AtomicBool>) {
    catch_signals();
    std::thread::Builder::new()
        .name("tma-ctrl-c".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(20));
            if COUNT.load(Ordering::SeqCst) == 0 {
                continue;
            }
            CLEANING.store(true, Ordering::SeqCst);
            // from here the writer no longer renames the staging folder into place
            abort.store(true, Ordering::SeqCst);
            let name = staging.file_name().map(|n| n.to_string_lossy().into_owned());
            let aside = staging.with_file_name(format!(
                "{}.interrupted-{}",
                name.unwrap_or_default(),
                std::process::id()
            ));
            if std::fs::rename(&staging, &aside).is_ok() {
                // the writer may still write files into the folder it has open until it
                // meets the vanished folder or the abort flag and stops (it never makes the
                // staging folder again: `tma_train::data::spill::create_dir_below`): wait for that (at
                // most 2 s: a long computation that writes nothing is simply ended)
                for _ in 0..100 {
                    if PARKED.load(Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let _ = std::fs::remove_dir_all(&aside);
                let _ = std::fs::remove_dir_all(&staging);
                eprintln!(
                    "\ninterrupt: stopped; the unfinished partition directory {} was removed ({} was not written)",
                    staging.display(),
                    out.display()
                );
            } else if out.join("manifest.json").exists() {
                eprintln!(
                    "\ninterrupt: stopped; the partition directory {} was already complete",
                    out.display()
                );
            } else {
                eprintln!("\ninterrupt: stopped");
            }
            std::process::exit(exit_code());
        })
        .expect("spawn the Ctrl-C watcher");
}

#[cfg(test)]
mod tests {
    use super::stopped_at_once;
    use std::path::Path;

    #[test]
    fn the_second_signal_names_the_command_that_continues_the_job() {
        let d = Path::new("/tmp/cmp/random-tma-seed0");
        let hint = "tma compare --resume /tmp/cmp";
        assert_eq!(
            stopped_at_once(Some((d, false)), None),
            "interrupt: stopped at once; `tma train --resume /tmp/cmp/random-tma-seed0` continues from its last checkpoint"
        );
        // inside a comparison: the comparison's resume, never the run's own
        assert_eq!(
            stopped_at_once(Some((d, false)), Some(hint)),
            "interrupt: stopped at once; `tma compare --resume /tmp/cmp` continues (finished runs are kept, the interrupted one continues from its last checkpoint)"
        );
        assert_eq!(
            stopped_at_once(Some((d, true)), Some(hint)),
            "interrupt: stopped at once; the run had no checkpoint yet, /tmp/cmp/random-tma-seed0 was removed; `tma compare --resume /tmp/cmp` continues (that run starts again)"
        );
        assert_eq!(
            stopped_at_once(Some((d, true)), None),
            "interrupt: stopped at once; the run had no checkpoint yet (nothing to resume), /tmp/cmp/random-tma-seed0 was removed"
        );
        assert_eq!(stopped_at_once(None, None), "interrupt: stopped at once");
    }
}
