//! The run directory: what a user keeps from a run.
//!
//! ```text
//! RUN_DIR/
//!   config.toml              the resolved configuration (every default filled in)
//!   partition.json           partition method, seed, hash and per-part statistics (if partitioned)
//!   rounds.jsonl             one JSON object per averaging round (appended as the run goes)
//!   model_final.safetensors  the last averaged model
//!   model_best.safetensors   the averaged model with the best validation metric
//!   summary.json             final and best validation/test metrics; written LAST, so a run
//!                            directory without it is incomplete
//! ```
//! Every file but `rounds.jsonl` is written to a temporary file and renamed into place.

use crate::evaluation::record::{RoundRecord, RunResult};
use crate::TrainError;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A run directory being written.
pub struct RunDir {
    /// The directory.
    pub path: PathBuf,
    rounds: File,
    /// The directory itself, opened and locked (`flock`, exclusive) while this run writes it,
    /// so a second `tma train --resume` of a run still going is refused instead of both
    /// writing it ([`lock_dir`]). The lock goes with the process.
    _lock: File,
}

/// Locks the run directory `path` for this process (an exclusive `flock` on the directory,
/// released when the returned handle is dropped or the process ends, however it ends).
///
/// # Errors
/// [`TrainError::Config`] naming `path` when another process holds it (a run still writing
/// it); [`TrainError::Io`] when it cannot be opened.
fn lock_dir(path: &Path) -> Result<File, TrainError> {
    let dir = File::open(path).map_err(|e| io_err(path, e))?;
    match dir.try_lock() {
        Ok(()) => Ok(dir),
        Err(fs::TryLockError::WouldBlock) => Err(TrainError::Config(format!(
            "{} is being written by another tma process (a run still going, or resuming it): wait for it to end or stop it (Ctrl-C) before `tma train --resume`",
            path.display()
        ))),
        Err(fs::TryLockError::Error(e)) => Err(io_err(path, e)),
    }
}

fn io_err(path: &Path, e: std::io::Error) -> TrainError {
    TrainError::Io {
        path: path.to_path_buf(),
        source: e,
    }
}

/// Writes `bytes` to `path` durably and atomically ([`tma_graph::durable::write`]: temporary
/// file in the same folder, fsync, rename, fsync of the folder).
///
/// # Errors
/// [`TrainError::Io`] naming the file (or its folder) and the OS error (e.g. a full disk).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    tma_graph::durable::write(path, bytes).map_err(|e| match e {
        tma_graph::GraphError::Io { path, source } => TrainError::Io { path, source },
        other => TrainError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::other(other.to_string()),
        },
    })
}

impl RunDir {
    /// Creates `path` (and parents). Refuses a directory that already holds files, so an
    /// earlier run is never overwritten.
    ///
    /// # Errors
    /// [`TrainError::RunDirExists`] if `path` is a non-empty directory; [`TrainError::Io`].
    pub fn create(path: &Path) -> Result<RunDir, TrainError> {
        if path.exists() {
            let non_empty = fs::read_dir(path)
                .map_err(|e| io_err(path, e))?
                .next()
                .is_some();
            if non_empty {
                return Err(TrainError::RunDirExists(path.to_path_buf()));
            }
        }
        fs::create_dir_all(path).map_err(|e| io_err(path, e))?;
        let lock = lock_dir(path)?;
        let rp = path.join("rounds.jsonl");
        let rounds = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&rp)
            .map_err(|e| io_err(&rp, e))?;
        Ok(RunDir {
            path: path.to_path_buf(),
            rounds,
            _lock: lock,
        })
    }

    /// Reopens the run directory of an interrupted run to resume it after round `last_round`:
    /// `rounds.jsonl` keeps only rounds `<= last_round` and the validation checks before
    /// round `last_round` formed (rounds and checks logged after the last checkpoint are
    /// dropped: training continues from that round, and they will be run again) and is then
    /// appended to.
    ///
    /// # Errors
    /// [`TrainError::Config`] if the run already finished (`summary.json` exists and is not
    /// marked `interrupted`) or another process is writing the directory (a run still going);
    /// [`TrainError::Io`].
    pub fn reopen(path: &Path, last_round: u64) -> Result<RunDir, TrainError> {
        let lock = lock_dir(path)?;
        let sp = path.join("summary.json");
        if sp.exists() {
            // a run stopped early (Ctrl-C) wrote a summary marked interrupted: it resumes, and
            // its summary is written again at the end
            let interrupted = fs::read(&sp)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|v| v.get("interrupted").and_then(|i| i.as_bool()))
                .unwrap_or(false);
            if !interrupted {
                return Err(TrainError::Config(format!(
                    "{} holds a finished run (summary.json exists); nothing to resume",
                    path.display()
                )));
            }
            fs::remove_file(&sp).map_err(|e| io_err(&sp, e))?;
        }
        let rp = path.join("rounds.jsonl");
        let text = fs::read_to_string(&rp).unwrap_or_default();
        let mut kept = String::new();
        for line in text.lines() {
            let row = serde_json::from_str::<serde_json::Value>(line).ok();
            let round = row
                .as_ref()
                .and_then(|v| v.get("round").and_then(|r| r.as_u64()));
            // a check's `round` counts the rounds before it: one numbered `last_round` came
            // after the checkpoint
            let check = row
                .as_ref()
                .and_then(|v| v.get("check").and_then(|c| c.as_bool()))
                .unwrap_or(false);
            let limit = if check {
                last_round.checked_sub(1)
            } else {
                Some(last_round)
            };
            if matches!((round, limit), (Some(r), Some(l)) if r <= l) {
                kept.push_str(line);
                kept.push('\n');
            }
        }
        write_atomic(&rp, kept.as_bytes())?;
        // temporary files of writes a killed run did not finish (the whole old versions are
        // in place)
        for d in [path.to_path_buf(), path.join("checkpoint")] {
            tma_graph::durable::remove_temps(&d).map_err(|e| match e {
                tma_graph::GraphError::Io { path, source } => TrainError::Io { path, source },
                other => TrainError::Config(other.to_string()),
            })?;
        }
        let rounds = OpenOptions::new()
            .append(true)
            .open(&rp)
            .map_err(|e| io_err(&rp, e))?;
        Ok(RunDir {
            path: path.to_path_buf(),
            rounds,
            _lock: lock,
        })
    }

    /// Writes a file of the run directory atomically.
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<(), TrainError> {
        write_atomic(&self.path.join(name), bytes)
    }

    /// Appends one round to `rounds.jsonl`.
    pub fn append_round(&mut self, r: &RoundRecord) -> Result<(), TrainError> {
        let mut line = serde_json::to_string(r).expect("round record serializes");
        line.push('\n');
        let p = self.path.join("rounds.jsonl");
        self.rounds
            .write_all(line.as_bytes())
            .map_err(|e| io_err(&p, e))?;
        self.rounds.flush().map_err(|e| io_err(&p, e))
    }

    /// Writes both models, each with `model_meta` ([`tma_nn::Model::file_metadata`]) in its
    /// header's `__metadata__` under [`tma_nn::Model::METADATA_KEY`], and, last,
    /// `summary.json`.
    pub fn finish(&self, result: &RunResult, model_meta: &str) -> Result<(), TrainError> {
        let save = |name: &str, p: &tma_nn::ParamSet| -> Result<(), TrainError> {
            let path = self.path.join(name);
            p.save_safetensors_with(
                &path,
                &[(tma_nn::Model::METADATA_KEY, model_meta.to_string())],
            )
            .map_err(TrainError::Model)
        };
        save("model_final.safetensors", &result.final_params)?;
        save("model_best.safetensors", &result.best_params)?;
        let s = serde_json::to_vec_pretty(&result.summary).expect("summary serializes");
        self.write("summary.json", &s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_directory_being_written_is_not_reopened_by_another_writer() {
        // regression: `tma train --resume DIR` while the run in DIR was still going trained
        // and wrote into DIR next to it; its summary replaced the first run's without a word
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("run");
        let first = RunDir::create(&dir).unwrap();
        let e = RunDir::reopen(&dir, 0).err().unwrap().to_string();
        assert!(
            e.contains(&dir.display().to_string())
                && e.contains("is being written by another tma process"),
            "{e}"
        );
        // a second process too (flock holds across processes: `flock -n` is refused)
        let other = std::process::Command::new("flock")
            .args(["-n", dir.to_str().unwrap(), "true"])
            .status()
            .expect("flock(1) from util-linux");
        assert!(!other.success(), "another process took the lock");
        drop(first);
        // the writer gone (ended, killed), the directory reopens
        let again = RunDir::reopen(&dir, 0).unwrap();
        assert_eq!(again.path, dir);
    }

    #[test]
    fn reopen_drops_rounds_and_checks_made_after_the_checkpointed_round() {
        // regression: checks after the checkpointed round (`round` = rounds before them) were
        // kept on resume, so rounds.jsonl held two timelines after a hard kill
        let tmp = tempfile::tempdir().unwrap();
        let rows = [
            r#"{"round":0,"elapsed_s":0.4,"check":true}"#,
            r#"{"round":1,"elapsed_s":2.0}"#,
            r#"{"round":1,"elapsed_s":2.4,"check":true}"#,
            r#"{"round":2,"elapsed_s":4.0}"#,
            r#"{"round":2,"elapsed_s":4.4,"check":true}"#,
            r#"{"round":3,"elapsed_s":6.0}"#,
        ];
        std::fs::write(tmp.path().join("rounds.jsonl"), rows.join("\n") + "\n").unwrap();
        drop(RunDir::reopen(tmp.path(), 2).unwrap());
        let kept = std::fs::read_to_string(tmp.path().join("rounds.jsonl")).unwrap();
        assert_eq!(kept, rows[..4].join("\n") + "\n");
        // resuming after round 0 (nothing checkpointed yet cannot resume; 0 keeps no check)
        drop(RunDir::reopen(tmp.path(), 0).unwrap());
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("rounds.jsonl")).unwrap(),
            ""
        );
    }
}
