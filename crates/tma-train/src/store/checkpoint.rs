//! Checkpoints: after every validated round the coordinator writes the averaged model and the
//! run's state into `RUN_DIR/checkpoint/`, so `tma train --resume RUN_DIR` continues from the
//! last round (losing at most the round in flight and the rounds whose checkpoint the disk had
//! not written yet: [`Checkpointer`] writes off the round loop).
//!
//! ```text
//! RUN_DIR/checkpoint/
//!   round-000012.safetensors   averaged model after round 12
//!   best-000009.safetensors    best model so far (round 9)
//!   state.json                 {format_version, round, elapsed_s, seed, segment,
//!                               partition_hash, manifest_sha256, model, best, steps};
//!                               written last
//! ```
//! Every file is written to a temporary name and renamed; `state.json` names the model files
//! it belongs to, so a kill between two writes leaves the previous, consistent checkpoint.
//! Model files no longer named by `state.json` are removed after it is written.
//!
//! RNG state: every random stream of a run is a pure function of the user's `seed`, the
//! stream's purpose and, for the trainers, the *segment* (0 for a fresh run, `k` after a resume
//! from round `k`: a resumed run does not replay the samples of its first segment); see
//! [`crate::engines::trainer::trainer_rng`] and `tma_graph::seed`. So the checkpoint records the seed and the segment, not generator
//! internals, and resuming never changes the seed. Adam moments are local to each trainer and
//! restart at zero after a resume.
//!
//! Step counts: `steps` holds each trainer's optimizer steps since the start of the run as of
//! the checkpointed round (a trainer missing from that round keeps the count of the last round
//! it joined). A resumed trainer counts its own steps from 0 again (its `--sync-every-steps`
//! schedule counts from its start); the coordinator adds the saved count to everything it
//! records ([`Resume::steps`]), so `rounds.jsonl` and `summary.json` count from the start of
//! the run. A `state.json` without `steps` (written before the field existed) resumes with
//! offsets 0. Epochs (`epochs`) are carried over differently: a resumed trainer continues its
//! own count from the saved one (gradient clipping starts at an epoch), so the coordinator
//! records them as the trainers report them; a `state.json` without `epochs` restarts them
//! at 0.

use crate::clock::Clock;
use crate::evaluation::eval::EvalResult;
use crate::evaluation::record::{Observer, Resume, RoundRecord};
use crate::store::output::write_atomic;
use crate::TrainError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tma_nn::ParamSet;

/// Version of `state.json`.
pub const CHECKPOINT_VERSION: u32 = 1;

/// A validation result as stored in `state.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SavedEval {
    /// Name of the primary metric.
    pub metric: String,
    /// Its value.
    pub value: f64,
    /// Every metric computed.
    pub all: BTreeMap<String, f64>,
}

impl From<&EvalResult> for SavedEval {
    fn from(e: &EvalResult) -> Self {
        SavedEval {
            metric: e.metric.clone(),
            value: e.value,
            all: e.all.clone(),
        }
    }
}

impl From<SavedEval> for EvalResult {
    fn from(e: SavedEval) -> Self {
        EvalResult {
            metric: e.metric,
            value: e.value,
            all: e.all,
        }
    }
}

/// The best round so far in a checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SavedBest {
    /// Round of the best validation result.
    pub round: u64,
    /// That result.
    pub val: SavedEval,
    /// File name in `checkpoint/`.
    pub model: String,
    /// A validation check between rounds after `round` (`--val-check-interval`), not a
    /// round's average; absent (false) for rounds and in checkpoints written before checks.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check: bool,
}

/// `checkpoint/state.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CheckpointState {
    /// Format version ([`CHECKPOINT_VERSION`]).
    pub format_version: u32,
    /// Last completed (validated) round.
    pub round: u64,
    /// Training time at which that round's average was formed, seconds; the resumed clock
    /// starts here.
    pub elapsed_s: f64,
    /// The run's seed (the user's, unchanged by resumes).
    pub seed: u64,
    /// The seed segment of the trainers' streams in this part of the run (0, or the round
    /// it resumed from). A `state.json` without it (older format) reads as 0.
    #[serde(default)]
    pub segment: u64,
    /// sha256 of the partition assignment (None for centralized).
    pub partition_hash: Option<String>,
    /// sha256 of the partition directory's manifest, when trained from one.
    pub manifest_sha256: Option<String>,
    /// File name of the averaged model after `round`.
    pub model: String,
    /// The best round so far and its model file.
    pub best: Option<SavedBest>,
    /// Optimizer steps of each trainer since the start of the run, as of `round`, by trainer
    /// index (0 for a trainer that never joined a round). Empty in a `state.json` written
    /// before this field existed, which resumes with step offsets 0.
    #[serde(default)]
    pub steps: Vec<u64>,
    /// Completed epochs of each trainer since the start of the run, as of `round`, by trainer
    /// index, as `steps`. A resumed trainer continues counting from its entry (gradient
    /// clipping starts at an epoch: `clip_from_epoch`). Empty in a `state.json` written before
    /// this field existed: epochs then restart at 0.
    #[serde(default)]
    pub epochs: Vec<u64>,
    /// The run's training configuration (as `config.toml` serializes it), so a resume can
    /// name the option that differs. Absent in a `state.json` written before this field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
    /// The plateau hold as of `round` (docs/decisions/0037-plateau-hold.md): the server step
    /// its rounds apply and the training seconds of its last restore; absent while the run
    /// keeps the plain mean (and in a `state.json` written before the hold existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plateau: Option<PlateauState>,
}

/// The plateau hold's state in a checkpoint ([`CheckpointState::plateau`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlateauState {
    /// The share of each round's update applied (below 1).
    pub server_step: f32,
    /// Training seconds of the round that last restored the best model.
    pub held_at_s: f64,
}

/// Options a resumed run must keep: they fix the split, the partition or the model's shape.
/// `(key in the configuration, command-line flag)`. The encoders' own options (GAT's `heads`,
/// ...) too: [`resume_differences`] adds them from the registry.
pub const RESUME_FIXED: &[(&str, &str)] = &[
    ("task", "--task"),
    ("method", "--method"),
    ("num_trainers", "--trainers"),
    ("drop_parts", "--drop-parts"),
    ("super_nodes", "--super-nodes"),
    ("model", "--model"),
    ("hidden", "--hidden"),
    ("num_layers", "--layers"),
    ("layer_norm", "--layer-norm"),
    ("val_frac", "--val-frac"),
    ("test_frac", "--test-frac"),
    ("eval_max_edges", "--eval-max-edges"),
    ("eval_num_neg", "--eval-num-neg"),
    ("normalize_features", "--normalize-features"),
    ("featureless", "--featureless"),
    ("split_index", "--split-index"),
    // the best model so far was selected by it
    ("metric", "--metric"),
    ("allow_split_overlap", "--allow-split-overlap"),
    ("seed", "--seed"),
];

/// The options of [`RESUME_FIXED`] whose value in `now` differs from the checkpoint's
/// `saved` configuration, as `--trainers 4 -> 8` (empty when they agree).
pub fn resume_differences(saved: &serde_json::Value, now: &serde_json::Value) -> Vec<String> {
    let show = |v: Option<&serde_json::Value>| match v {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
        None => "(unset)".to_string(),
    };
    let encoder: Vec<(&str, String)> = crate::config::encoder_options::keys()
        .into_iter()
        .map(|k| (k, format!("--{}", k.replace('_', "-"))))
        .collect();
    RESUME_FIXED
        .iter()
        .map(|&(k, f)| (k, f.to_string()))
        .chain(encoder)
        .filter_map(|(key, flag)| {
            let (a, b) = (saved.get(key), now.get(key));
            (a.is_some() && a != b).then(|| format!("{flag} {} -> {}", show(a), show(b)))
        })
        .collect()
}

/// Writes a checkpoint after every round (an [`Observer`]), off the round loop: the round's
/// bookkeeping is done at once and the files are written by a writer thread of its own, so
/// the next round never waits for a disk (a slow or shared disk once held the coordinator in
/// `fsync` for 29-62 s while the trainers trained unaveraged). While a write is in progress
/// only the newest round waits for the disk: an older pending one is superseded (its state is
/// contained in the newer one; [`Checkpointer::superseded`] counts them). A kill therefore
/// loses at most the rounds since the last write completed, and what is on disk is always a
/// whole, consistent checkpoint. [`Checkpointer::flush`] waits for the disk; dropping the
/// checkpointer waits for the last write.
pub struct Checkpointer {
    seed: u64,
    segment: u64,
    partition_hash: Option<String>,
    manifest_sha256: Option<String>,
    best: Option<SavedBest>,
    /// The best model's parameters, until its file is written (None: already on disk).
    best_params: Option<Arc<Vec<f32>>>,
    /// Steps since the start of the run of each trainer, by index (see [`CheckpointState::steps`]).
    steps: Vec<u64>,
    /// Epochs of each trainer, by index (see [`CheckpointState::epochs`]).
    epochs: Vec<u64>,
    config: Option<serde_json::Value>,
    /// The last round's checkpoint (model file, round, time), which a best check between
    /// rounds keeps when it rewrites `state.json`.
    last: Option<(String, u64, f64)>,
    /// Its parameters, until its file is written (None: already on disk).
    last_params: Option<Arc<Vec<f32>>>,
    /// The plateau hold as of the last round.
    plateau: Option<PlateauState>,
    shared: Arc<WriterShared>,
    writer: Option<std::thread::JoinHandle<()>>,
}

/// One checkpoint for the writer thread: the model files the state names (with their
/// parameters where the file may not exist yet), then `state.json` (None: a best check before
/// the first round, whose model is saved without a state to resume from).
struct WriteJob {
    models: Vec<(String, Option<Arc<Vec<f32>>>)>,
    state: Option<CheckpointState>,
}

#[derive(Default)]
struct WriterSlot {
    pending: Option<WriteJob>,
    busy: bool,
    closed: bool,
    error: Option<TrainError>,
    superseded: u64,
}

struct WriterShared {
    slot: std::sync::Mutex<WriterSlot>,
    cv: std::sync::Condvar,
    /// Added before every write (tests: a slow disk).
    delay: std::sync::Mutex<Duration>,
    /// What every model file says about its model (`tma_nn::Model::file_metadata`, under
    /// `tma_nn::Model::METADATA_KEY`), as the run's final and best model files do.
    model_meta: std::sync::Mutex<Option<String>>,
}

impl WriterShared {
    fn lock(&self) -> std::sync::MutexGuard<'_, WriterSlot> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The writer thread: takes the newest job, writes it, until closed with nothing pending.
fn writer_loop(shared: Arc<WriterShared>, dir: PathBuf, mut template: ParamSet) {
    loop {
        let job = {
            let mut slot = shared.lock();
            while slot.pending.is_none() && !slot.closed {
                slot = shared.cv.wait(slot).unwrap_or_else(|e| e.into_inner());
            }
            let Some(job) = slot.pending.take() else {
                return; // closed, nothing left
            };
            slot.busy = true;
            job
        };
        let delay = *shared.delay.lock().unwrap_or_else(|e| e.into_inner());
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        let meta = shared
            .model_meta
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let r = write_job(&dir, &mut template, meta.as_deref(), job);
        let mut slot = shared.lock();
        slot.busy = false;
        if let Err(e) = r {
            slot.error.get_or_insert(e);
        }
        shared.cv.notify_all();
    }
}

/// Writes a job's model files that are not on disk yet, then `state.json`, then removes the
/// model files the new state no longer names.
fn write_job(
    dir: &Path,
    template: &mut ParamSet,
    model_meta: Option<&str>,
    job: WriteJob,
) -> Result<(), TrainError> {
    let meta: Vec<(&str, String)> = model_meta
        .map(|m| (tma_nn::Model::METADATA_KEY, m.to_string()))
        .into_iter()
        .collect();
    for (name, params) in &job.models {
        let path = dir.join(name);
        if let Some(p) = params {
            // model files are named by their round: one already there is this one, whole
            // (written under a temporary name and renamed)
            if !path.exists() {
                template.data.copy_from_slice(p);
                template
                    .save_safetensors_with(&path, &meta)
                    .map_err(TrainError::Model)?;
            }
        }
    }
    let Some(state) = job.state else {
        return Ok(());
    };
    write_atomic(
        &dir.join("state.json"),
        &serde_json::to_vec_pretty(&state).expect("state serializes"),
    )?;
    let keep: Vec<&str> = [
        Some(state.model.as_str()),
        state.best.as_ref().map(|b| b.model.as_str()),
    ]
    .into_iter()
    .flatten()
    .collect();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".safetensors") && !keep.contains(&name.as_str()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(())
}

fn io_err(path: &Path, e: std::io::Error) -> TrainError {
    TrainError::Io {
        path: path.to_path_buf(),
        source: e,
    }
}

impl Checkpointer {
    /// Checkpoints into `run_dir/checkpoint/`. `template` gives the parameter names and
    /// shapes; `resumed` is the state a resumed run starts from.
    ///
    /// # Errors
    /// [`TrainError::Io`] if the folder cannot be created.
    pub fn new(
        run_dir: &Path,
        template: ParamSet,
        seed: u64,
        segment: u64,
        partition_hash: Option<String>,
        manifest_sha256: Option<String>,
        resumed: Option<&CheckpointState>,
    ) -> Result<Self, TrainError> {
        let dir = run_dir.join("checkpoint");
        std::fs::create_dir_all(&dir).map_err(|e| io_err(&dir, e))?;
        let shared = Arc::new(WriterShared {
            slot: std::sync::Mutex::new(WriterSlot::default()),
            cv: std::sync::Condvar::new(),
            delay: std::sync::Mutex::new(Duration::ZERO),
            model_meta: std::sync::Mutex::new(None),
        });
        let writer = {
            let (shared, dir) = (shared.clone(), dir.clone());
            std::thread::Builder::new()
                .name("tma-checkpoint".into())
                .spawn(move || writer_loop(shared, dir, template))
                .map_err(|e| io_err(run_dir, e))?
        };
        Ok(Checkpointer {
            seed,
            segment,
            partition_hash,
            manifest_sha256,
            best: resumed.and_then(|s| s.best.clone()),
            steps: resumed.map(|s| s.steps.clone()).unwrap_or_default(),
            epochs: resumed.map(|s| s.epochs.clone()).unwrap_or_default(),
            config: None,
            last: resumed.map(|s| (s.model.clone(), s.round, s.elapsed_s)),
            best_params: None,
            last_params: None,
            plateau: resumed.and_then(|s| s.plateau),
            shared,
            writer: Some(writer),
        })
    }

    /// Records the run's configuration in every `state.json` ([`CheckpointState::config`]).
    pub fn with_config(mut self, config: serde_json::Value) -> Self {
        self.config = Some(config);
        self
    }

    /// Writes `meta` (`tma_nn::Model::file_metadata` of the run's model) into the header of
    /// every model file from now on, under `tma_nn::Model::METADATA_KEY`, so a checkpoint's
    /// model file says which encoder it holds as `model_best.safetensors` does.
    pub fn with_model_metadata(self, meta: String) -> Self {
        *self
            .shared
            .model_meta
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(meta);
        self
    }

    /// Waits until every checkpoint handed over so far is on disk; returns the first error
    /// the writer met (once), which also ends the run at the next round.
    ///
    /// # Errors
    /// The [`TrainError::Io`] / [`TrainError::Model`] of a file that could not be written.
    pub fn flush(&mut self) -> Result<(), TrainError> {
        let mut slot = self.shared.lock();
        while slot.pending.is_some() || slot.busy {
            slot = self.shared.cv.wait(slot).unwrap_or_else(|e| e.into_inner());
        }
        match slot.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Rounds whose checkpoint was superseded by a newer round before the disk wrote it.
    pub fn superseded(&self) -> u64 {
        self.shared.lock().superseded
    }

    /// Hands a checkpoint to the writer thread (superseding one still pending); returns an
    /// error the writer met earlier.
    fn submit(&mut self, job: WriteJob) -> Result<(), TrainError> {
        let mut slot = self.shared.lock();
        if let Some(e) = slot.error.take() {
            return Err(e);
        }
        if slot.pending.replace(job).is_some() {
            slot.superseded += 1;
        }
        self.shared.cv.notify_all();
        Ok(())
    }

    /// The models and state of the checkpoint as it stands.
    fn job(&self) -> WriteJob {
        let mut models = vec![];
        if let Some((m, _, _)) = &self.last {
            models.push((m.clone(), self.last_params.clone()));
        }
        if let Some(b) = &self.best {
            models.push((b.model.clone(), self.best_params.clone()));
        }
        let state = self
            .last
            .clone()
            .map(|(model, round, elapsed_s)| CheckpointState {
                format_version: CHECKPOINT_VERSION,
                round,
                elapsed_s,
                seed: self.seed,
                segment: self.segment,
                partition_hash: self.partition_hash.clone(),
                manifest_sha256: self.manifest_sha256.clone(),
                model,
                best: self.best.clone(),
                steps: self.steps.clone(),
                epochs: self.epochs.clone(),
                config: self.config.clone(),
                plateau: self.plateau,
            });
        WriteJob { models, state }
    }

    #[cfg(test)]
    fn with_write_delay(self, d: Duration) -> Self {
        *self.shared.delay.lock().unwrap() = d;
        self
    }
}

impl Drop for Checkpointer {
    /// Waits for the last checkpoint to reach the disk, then ends the writer thread.
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.cv.notify_all();
        if let Some(h) = self.writer.take() {
            let _ = h.join();
        }
    }
}

impl Observer for Checkpointer {
    fn on_round_model(&mut self, r: &RoundRecord, params: &[f32]) -> Result<(), TrainError> {
        if r.check {
            return self.on_check_model(r, params);
        }
        for (&t, &s) in r.participants.iter().zip(&r.steps) {
            if self.steps.len() <= t {
                self.steps.resize(t + 1, 0);
            }
            self.steps[t] = s;
        }
        for (&t, &e) in r.participants.iter().zip(&r.epochs) {
            if self.epochs.len() <= t {
                self.epochs.resize(t + 1, 0);
            }
            self.epochs[t] = e;
        }
        let model = format!("round-{:06}.safetensors", r.round);
        let params = Arc::new(params.to_vec());
        self.last = Some((model, r.round, r.elapsed_s));
        self.last_params = Some(params.clone());
        if let Some(server_step) = r.server_step {
            let held_at_s = match (r.restored, self.plateau) {
                (Some(_), _) | (None, None) => r.elapsed_s,
                (None, Some(p)) => p.held_at_s,
            };
            self.plateau = Some(PlateauState {
                server_step,
                held_at_s,
            });
        }
        if r.is_best {
            self.best = Some(SavedBest {
                round: r.round,
                val: (&r.val).into(),
                model: format!("best-{:06}.safetensors", r.round),
                check: false,
            });
            self.best_params = Some(params);
        }
        let job = self.job();
        self.submit(job)
    }
}

impl Checkpointer {
    /// A validation check between rounds: the run resumes from rounds only, so a check
    /// changes the checkpoint only when it is the best model (saved as
    /// `best-{round:06}-check-{ms}ms.safetensors`, `ms` its training time in milliseconds:
    /// two best checks after one round are two files; named in `state.json` as the best).
    fn on_check_model(&mut self, r: &RoundRecord, params: &[f32]) -> Result<(), TrainError> {
        if !r.is_best {
            return Ok(());
        }
        self.best = Some(SavedBest {
            round: r.round,
            val: (&r.val).into(),
            // the training time tells two checks after one round apart (regression: both
            // were `best-{round}-check`, and the second, a better model, was never written
            // over the first, which a resumed run then restored and tested as the best)
            model: format!(
                "best-{:06}-check-{}ms.safetensors",
                r.round,
                (r.elapsed_s * 1000.0).round() as u64
            ),
            check: true,
        });
        self.best_params = Some(Arc::new(params.to_vec()));
        let job = self.job();
        self.submit(job)
    }
}

/// Reads `run_dir/checkpoint/state.json`.
///
/// # Errors
/// [`TrainError::Io`] if there is no checkpoint; [`TrainError::Config`] for invalid JSON, an
/// unknown version or an `elapsed_s` beyond any duration.
pub fn read_state(run_dir: &Path) -> Result<CheckpointState, TrainError> {
    let sp = run_dir.join("checkpoint").join("state.json");
    let bytes = std::fs::read(&sp).map_err(|e| io_err(&sp, e))?;
    let state: CheckpointState = serde_json::from_slice(&bytes).map_err(|e| {
        TrainError::Config(format!(
            "{}: not a valid checkpoint state: {e}",
            sp.display()
        ))
    })?;
    // the training clock resumes from it: a time no `Duration` holds would panic there
    if std::time::Duration::try_from_secs_f64(state.elapsed_s.max(0.0)).is_err() {
        return Err(TrainError::Config(format!(
            "{}: elapsed_s {} is not a training time",
            sp.display(),
            state.elapsed_s
        )));
    }
    if state.format_version != CHECKPOINT_VERSION {
        return Err(TrainError::Config(format!(
            "{}: checkpoint format version {} is not supported (expected {CHECKPOINT_VERSION})",
            sp.display(),
            state.format_version
        )));
    }
    Ok(state)
}

/// The [`Resume`] for the coordinator from a checkpoint's state: loads its model files.
///
/// # Errors
/// [`TrainError::Model`] if a model file is unreadable or does not fit `template`.
pub fn resume_from(
    run_dir: &Path,
    state: &CheckpointState,
    template: &ParamSet,
) -> Result<Resume, TrainError> {
    let dir = run_dir.join("checkpoint");
    let load = |name: &str| -> Result<Vec<f32>, TrainError> {
        let path = dir.join(name);
        let p = ParamSet::load_safetensors(&path).map_err(TrainError::Model)?;
        if p.data.len() != template.data.len() {
            return Err(TrainError::Config(format!(
                "resume: the checkpointed model {} has {} parameters but the configured one has {}; resume with the options the run was started with (--model and its own options, --hidden, --layers, --task and the same --dataset)",
                path.display(),
                p.data.len(),
                template.data.len()
            )));
        }
        Ok(p.data)
    };
    let params = load(&state.model)?;
    let best = match &state.best {
        Some(b) => Some((b.round, b.val.clone().into(), load(&b.model)?)),
        None => None,
    };
    Ok(Resume {
        round: state.round,
        params,
        best,
        best_check: state.best.as_ref().is_some_and(|b| b.check),
        steps: state.steps.clone(),
        epochs: state.epochs.clone(),
        elapsed: std::time::Duration::from_secs_f64(state.elapsed_s.max(0.0)),
        plateau: state.plateau.map(|p| (p.server_step, p.held_at_s)),
    })
}

/// [`read_state`] then [`resume_from`].
///
/// # Errors
/// As those two.
pub fn load_checkpoint(
    run_dir: &Path,
    template: &ParamSet,
) -> Result<(CheckpointState, Resume), TrainError> {
    let state = read_state(run_dir)?;
    let resume = resume_from(run_dir, &state, template)?;
    Ok((state, resume))
}

/// A clock that starts at `offset` (a resumed run continues the saved training time).
pub struct OffsetClock<C: Clock> {
    /// The clock that counts from 0.
    pub inner: C,
    /// Training time at which it starts.
    pub offset: Duration,
}

impl<C: Clock> Clock for OffsetClock<C> {
    fn elapsed(&self) -> Duration {
        self.offset + self.inner.elapsed()
    }
    fn sleep(&self, d: Duration) {
        self.inner.sleep(d)
    }
}

/// Wraps `clock` so it starts at `offset`.
pub fn offset_clock<C: Clock + 'static>(clock: C, offset: Duration) -> Arc<dyn Clock> {
    Arc::new(OffsetClock {
        inner: clock,
        offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn record(round: u64, val: f64, is_best: bool) -> RoundRecord {
        RoundRecord {
            round,
            elapsed_s: round as f64 * 2.0,
            participants: vec![0],
            missing: vec![],
            steps: vec![round],
            epochs: vec![0],
            train_loss: 0.5,
            val: EvalResult {
                metric: "accuracy".into(),
                value: val,
                all: BTreeMap::new(),
            },
            eval_s: 0.0,
            eval_cpu_s: 0.0,
            is_best,
            skipped_slots: 0,
            late: None,
            check: false,
            server_step: None,
            restored: None,
            restored_check: false,
            correction: None,
        }
    }

    /// The file names in `run_dir/checkpoint/`, sorted.
    fn checkpoint_files(run_dir: &Path) -> Vec<String> {
        let mut files: Vec<String> = std::fs::read_dir(run_dir.join("checkpoint"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        files.sort();
        files
    }

    /// A round that trainers `participants` joined with `steps` steps.
    fn joined(round: u64, participants: Vec<usize>, steps: Vec<u64>) -> RoundRecord {
        RoundRecord {
            // one epoch per 10 steps
            epochs: steps.iter().map(|s| s / 10).collect(),
            participants,
            steps,
            ..record(round, 0.5, false)
        }
    }

    #[test]
    fn resume_differences_name_the_flag_and_both_values() {
        // regression (issue 11): resume errors named internal values, not the option
        let saved =
            serde_json::json!({"num_trainers": 4, "hidden": 64, "model": "sage", "lr": 0.01});
        let now = serde_json::json!({"num_trainers": 8, "hidden": 64, "model": "gcn", "lr": 0.1});
        assert_eq!(
            resume_differences(&saved, &now),
            vec![
                "--trainers 4 -> 8".to_string(),
                "--model sage -> gcn".to_string()
            ]
        );
        assert!(resume_differences(&saved, &saved).is_empty());
        // the best model so far was selected by --metric: resuming with another is refused;
        // a checkpoint written before the option existed has none to compare
        let saved = serde_json::json!({"metric": "mrr"});
        let now = serde_json::json!({"metric": "hits@50"});
        assert_eq!(
            resume_differences(&saved, &now),
            vec!["--metric mrr -> hits@50".to_string()]
        );
        assert!(resume_differences(&serde_json::json!({}), &now).is_empty());
    }

    #[test]
    fn a_check_between_rounds_is_kept_only_as_the_best_model() {
        let tmp = tempfile::tempdir().unwrap();
        let template = ParamSet::from_shapes(&[("w".into(), vec![2, 2])]);
        let mut c =
            Checkpointer::new(tmp.path(), template.clone(), 7, 0, None, None, None).unwrap();
        let check = |round: u64, val: f64, is_best: bool| RoundRecord {
            check: true,
            server_step: None,
            restored: None,
            restored_check: false,
            steps: vec![round * 10 + 5],
            ..record(round, val, is_best)
        };
        // a best check before the first round: its model is saved, no state to resume from
        c.on_check_model(&check(0, 0.4, true), &[0.5; 4]).unwrap();
        c.flush().unwrap();
        assert!(!tmp.path().join("checkpoint/state.json").exists());
        c.on_round_model(&record(1, 0.3, false), &[1.0; 4]).unwrap();
        // a check that is not the best changes nothing; a best one becomes the best model while
        // the run still resumes from round 1 (and its step counts)
        c.on_round_model(&check(1, 0.2, false), &[1.5; 4]).unwrap();
        c.flush().unwrap();
        let (state, resume) = load_checkpoint(tmp.path(), &template).unwrap();
        assert_eq!(
            state.best.as_ref().unwrap().model,
            "best-000000-check-0ms.safetensors"
        );
        c.on_round_model(&check(1, 0.9, true), &[1.7; 4]).unwrap();
        c.flush().unwrap();
        let (state2, resume2) = load_checkpoint(tmp.path(), &template).unwrap();
        assert_eq!((state.round, state2.round), (1, 1));
        assert_eq!(resume.params, vec![1.0; 4]);
        assert_eq!(resume2.params, vec![1.0; 4]);
        assert_eq!(state2.steps, vec![1]);
        let (br, bv, bp) = resume2.best.unwrap();
        assert_eq!((br, bv.value, bp), (1, 0.9, vec![1.7; 4]));
        // regression: a resumed run said its best (a check) was round 1's average
        assert!(resume2.best_check && state2.best.as_ref().unwrap().check);
        c.flush().unwrap();
        assert_eq!(
            checkpoint_files(tmp.path()),
            vec![
                "best-000001-check-2000ms.safetensors",
                "round-000001.safetensors",
                "state.json"
            ]
        );
        // regression: a second, better check after the same round is written, not taken for
        // the first one's file
        let later = RoundRecord {
            elapsed_s: 3.5,
            ..check(1, 0.92, true)
        };
        c.on_round_model(&later, &[1.9; 4]).unwrap();
        c.flush().unwrap();
        let (state3, resume3) = load_checkpoint(tmp.path(), &template).unwrap();
        assert_eq!(
            state3.best.as_ref().unwrap().model,
            "best-000001-check-3500ms.safetensors"
        );
        let (_, bv, bp) = resume3.best.unwrap();
        assert_eq!((bv.value, bp), (0.92, vec![1.9; 4]));
        // a round that beats it is the best again
        c.on_round_model(&record(2, 0.95, true), &[2.0; 4]).unwrap();
        c.flush().unwrap();
        let (_, resume4) = load_checkpoint(tmp.path(), &template).unwrap();
        assert!(!resume4.best_check);
    }

    #[test]
    fn checkpoint_roundtrip_keeps_last_and_best_only() {
        let tmp = tempfile::tempdir().unwrap();
        let template = ParamSet::from_shapes(&[("w".into(), vec![2, 2])]);
        let mut c = Checkpointer::new(
            tmp.path(),
            template.clone(),
            7,
            0,
            Some("abc".into()),
            None,
            None,
        )
        .unwrap();
        c.on_round_model(&record(1, 0.5, true), &[1.0; 4]).unwrap();
        c.on_round_model(&record(2, 0.7, true), &[2.0; 4]).unwrap();
        c.on_round_model(&record(3, 0.6, false), &[3.0; 4]).unwrap();
        c.flush().unwrap();
        let (state, resume) = load_checkpoint(tmp.path(), &template).unwrap();
        assert_eq!(state.round, 3);
        assert_eq!(state.elapsed_s, 6.0);
        assert_eq!(state.partition_hash.as_deref(), Some("abc"));
        assert_eq!(resume.round, 3);
        assert_eq!(resume.params, vec![3.0; 4]);
        assert_eq!(state.steps, vec![3]);
        assert_eq!(resume.steps, vec![3]);
        let (br, bv, bp) = resume.best.unwrap();
        assert_eq!((br, bv.value, bp), (2, 0.7, vec![2.0; 4]));
        c.flush().unwrap();
        assert_eq!(
            checkpoint_files(tmp.path()),
            vec![
                "best-000002.safetensors",
                "round-000003.safetensors",
                "state.json"
            ]
        );
        // a model of another size is refused
        let other = ParamSet::from_shapes(&[("w".into(), vec![3])]);
        assert!(load_checkpoint(tmp.path(), &other)
            .unwrap_err()
            .to_string()
            .contains("4 parameters"));
    }

    #[test]
    fn checkpoint_keeps_each_trainers_steps_and_reads_old_states_without_them() {
        let tmp = tempfile::tempdir().unwrap();
        let template = ParamSet::from_shapes(&[("w".into(), vec![2])]);
        let saved = CheckpointState {
            format_version: CHECKPOINT_VERSION,
            round: 4,
            elapsed_s: 4.0,
            seed: 1,
            segment: 0,
            partition_hash: None,
            manifest_sha256: None,
            model: "round-000004.safetensors".into(),
            best: None,
            steps: vec![40, 41, 42],
            epochs: vec![4, 4, 4],
            config: None,
            plateau: None,
        };
        let mut c = Checkpointer::new(tmp.path(), template.clone(), 1, 4, None, None, Some(&saved))
            .unwrap();
        // trainer 1 misses round 5, trainer 2 misses round 6
        c.on_round_model(&joined(5, vec![0, 2], vec![50, 52]), &[0.0; 2])
            .unwrap();
        c.on_round_model(&joined(6, vec![0, 1], vec![60, 61]), &[0.0; 2])
            .unwrap();
        c.flush().unwrap();
        let (state, resume) = load_checkpoint(tmp.path(), &template).unwrap();
        assert_eq!(state.steps, vec![60, 61, 52]);
        assert_eq!(resume.steps, vec![60, 61, 52]);
        assert_eq!(Resume::step_offsets(Some(&resume), 4), vec![60, 61, 52, 0]);
        assert_eq!(Resume::step_offsets(None, 2), vec![0, 0]);
        // epochs likewise, each trainer's as of the last round it joined
        assert_eq!(state.epochs, vec![6, 6, 5]);
        assert_eq!(resume.epochs, vec![6, 6, 5]);
        assert_eq!(Resume::epochs_of(Some(&resume), 2), 5);
        assert_eq!(Resume::epochs_of(Some(&resume), 3), 0);
        assert_eq!(Resume::epochs_of(None, 0), 0);

        // a state.json written before `steps` existed resumes with offsets 0
        let sp = tmp.path().join("checkpoint/state.json");
        let mut v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&sp).unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("steps").unwrap();
        v.as_object_mut().unwrap().remove("epochs").unwrap();
        std::fs::write(&sp, serde_json::to_vec(&v).unwrap()).unwrap();
        c.flush().unwrap();
        let (state, resume) = load_checkpoint(tmp.path(), &template).unwrap();
        assert_eq!(state.round, 6);
        assert!(resume.steps.is_empty());
        assert!(resume.epochs.is_empty());
        assert_eq!(Resume::step_offsets(Some(&resume), 3), vec![0, 0, 0]);
    }

    /// Regression (issue 29, item 3): a checkpoint `fsync` on a shared disk held the round loop
    /// for 29-62 s. With every write delayed 1 s, four rounds are handed over while the first
    /// is written (they took >= 4 s when each waited for its write), the newest reaches the disk and supersedes
    /// those still pending, and what is on disk is whole.
    #[test]
    fn a_slow_disk_never_holds_the_round_loop() {
        let tmp = tempfile::tempdir().unwrap();
        let template = ParamSet::from_shapes(&[("w".into(), vec![2, 2])]);
        let mut c = Checkpointer::new(tmp.path(), template.clone(), 7, 0, None, None, None)
            .unwrap()
            .with_write_delay(Duration::from_secs(1));
        c.on_round_model(&record(1, 0.1, false), &[1.0; 4]).unwrap();
        // the writer has taken round 1 and waits on the disk
        std::thread::sleep(Duration::from_millis(200));
        let t = std::time::Instant::now();
        for round in 2..=5 {
            let best = round == 2;
            c.on_round_model(
                &record(round, round as f64 / 10.0, best),
                &[round as f32; 4],
            )
            .unwrap();
        }
        let handed_over = t.elapsed();
        assert!(
            handed_over < Duration::from_millis(900),
            "four rounds waited {handed_over:?} for a 1 s disk"
        );
        c.flush().unwrap();
        // round 1 was being written; rounds 2-4 were superseded by round 5 before the disk
        // took them; round 2 stays the best model (its file written with round 5's state)
        assert_eq!(c.superseded(), 3);
        let (state, resume) = load_checkpoint(tmp.path(), &template).unwrap();
        assert_eq!(state.round, 5);
        assert_eq!(resume.params, vec![5.0; 4]);
        let (br, _, bp) = resume.best.unwrap();
        assert_eq!((br, bp), (2, vec![2.0; 4]));
        assert_eq!(
            checkpoint_files(tmp.path()),
            vec![
                "best-000002.safetensors",
                "round-000005.safetensors",
                "state.json"
            ]
        );
    }

    /// A write that fails is reported: by `flush`, else at the next round (which ends the run
    /// as a failed synchronous write did).
    #[test]
    fn a_failed_checkpoint_write_is_reported_naming_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let template = ParamSet::from_shapes(&[("w".into(), vec![2])]);
        let mut c = Checkpointer::new(tmp.path(), template, 7, 0, None, None, None).unwrap();
        // the checkpoint directory replaced by a file: nothing can be written into it
        std::fs::remove_dir_all(tmp.path().join("checkpoint")).unwrap();
        std::fs::write(tmp.path().join("checkpoint"), b"not a directory").unwrap();
        c.on_round_model(&record(1, 0.5, false), &[1.0; 2]).unwrap();
        let err = c.flush().unwrap_err().to_string();
        assert!(err.contains("round-000001.safetensors"), "{err}");
        c.on_round_model(&record(2, 0.5, false), &[1.0; 2]).unwrap();
        // the writer failed again meanwhile: the round after says so
        let t = std::time::Instant::now();
        let next = loop {
            match c.on_round_model(&record(3, 0.5, false), &[1.0; 2]) {
                Err(e) => break e.to_string(),
                Ok(()) if t.elapsed() < Duration::from_secs(10) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(()) => panic!("no error reported"),
            }
        };
        assert!(next.contains("round-00000"), "{next}");
    }

    #[test]
    fn offset_clock_continues() {
        let m = ManualClock::default();
        let c = OffsetClock {
            inner: m.clone(),
            offset: Duration::from_secs(10),
        };
        assert_eq!(c.elapsed(), Duration::from_secs(10));
        m.advance(Duration::from_secs(2));
        assert_eq!(c.elapsed(), Duration::from_secs(12));
    }
}
