//! Ctrl-C during `tma train`: the first one asks the run to stop after the round in flight
//! (the run then writes its checkpoint and a summary marked `interrupted`, and the CLI says how
//! to resume); the second one stops the process at once (removing a run directory that has no
//! round yet, so `--out` can be used again). The library knows nothing of signals: it reads
//! the stop flag this module sets ([`tma_train::Run::stop_on`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// SIGINTs received so far (the handler only counts; a watcher thread acts).
static COUNT: AtomicUsize = AtomicUsize::new(0);

extern "C" fn on_sigint(_: libc::c_int) {
    let n = COUNT.fetch_add(1, Ordering::SeqCst) + 1;
    if n >= 3 {
        // the watcher did not get to run: stop now (async-signal-safe)
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) }
    }
}

/// Routes SIGINT to [`on_sigint`] (which only counts; a watcher thread acts).
fn catch_sigint() {
    // SAFETY: the handler only touches an atomic (and calls _exit).
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
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
    catch_sigint();
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
                    eprintln!(
                        "\ninterrupt: finishing the round in flight, then writing the checkpoint and the summary (Ctrl-C again to stop at once)"
                    );
                }
                if n >= 2 {
                    let slot = c.lock().map(|g| g.clone()).unwrap_or(None);
                    match slot {
                        Some((dir, existed)) if tma_train::run::discard_unstarted(&dir, existed) => {
                            eprintln!(
                                "interrupt: stopped at once; the run had no round yet, {} was removed",
                                dir.display()
                            );
                        }
                        Some((dir, _)) => eprintln!(
                            "interrupt: stopped at once; `tma train --resume {}` continues from its last checkpoint",
                            dir.display()
                        ),
                        None => eprintln!("interrupt: stopped at once"),
                    }
                    std::process::exit(130);
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

/// Ctrl-C during `tma partition --out DIR`: the writer's `abort` flag is set (it checks it
/// last before renaming the staging folder `.DIR.tmp` into place), the staging folder is
/// renamed aside (atomic: either it is still staging, and the writer's rename fails, or the
/// writer renamed it first and `DIR` is complete) and removed; one line says which, and the
/// process exits 130. Without this a killed run left the staging folder behind (gigabytes at scale)
/// until the same `--out` was used again.
pub fn remove_on_interrupt(staging: PathBuf, out: PathBuf, abort: Arc<AtomicBool>) {
    catch_sigint();
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
                // staging folder again: `tma_train::spill::create_dir_below`): wait for that (at
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
            std::process::exit(130);
        })
        .expect("spawn the Ctrl-C watcher");
}
