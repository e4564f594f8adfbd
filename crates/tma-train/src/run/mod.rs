//! A run from start to end, as a library object: [`Run`] opens the data, creates (or reopens,
//! to resume) the run directory, writes the resolved `config.toml` and `partition.json`,
//! prepares the trainers' data, trains with the chosen engine while appending `rounds.jsonl`
//! and checkpointing every round, and writes both models and, last, `summary.json`. The CLI's
//! `train` and `compare` are thin callers.
//!
//! The README's example (compiled by the doc tests, not run):
//! ```no_run
//! use tma_train::{DataSource, Quiet, Run, RunSpec, TrainConfig};
//! # fn main() -> Result<(), tma_train::TrainError> {
//! let cfg = TrainConfig { time_limit: std::time::Duration::from_secs(20), ..TrainConfig::default() };
//! let run = Run::start(RunSpec::new(cfg, DataSource::Dataset("../shared/datasets/planetoid_cora".into())))?;
//! let run = run.prepare()?;             // split + partition, writes partition.json: a PreparedRun
//! let result = run.train(&mut Quiet)?;  // rounds.jsonl, checkpoints, models, summary.json
//! println!("{}", result.summary.best_test.value);
//! # Ok(())
//! # }
//! ```
//!
//! The run directory's layout is in [`crate::store::output`], the checkpoint's in
//! [`crate::store::checkpoint`]. A run that fails before its first round leaves no directory behind
//! (a directory it found empty is emptied again); one with at least one round is kept, with a
//! checkpoint to resume from.

pub mod memory_estimate;

use crate::clock::{Clock, RealClock};
use crate::config::TrainConfig;
use crate::data::{build_model, Prepared};
pub use crate::engines::EngineContext;
use crate::evaluation::record::{FailPlan, Observer, RoundRecord, RunResult, StopFlag};
use crate::store::checkpoint::{self, CheckpointState, Checkpointer};
use crate::store::output::RunDir;
use crate::store::tensorboard::EventLog;
use crate::store::{self, Manifest};
use crate::TrainError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tma_graph::formats::ReadOptions;
use tma_graph::{Dataset, LoadOptions, SbmConfig};

/// Where a run's data comes from.
pub enum DataSource {
    /// A dataset in any format `tma_graph::formats` reads, detected from the path: tma's `.npy`
    /// directory (`tma_graph::load_dataset`) or on-disk format, an OGB directory, a SNAP or CSV
    /// edge list, a `.npz` file.
    Dataset(PathBuf),
    /// A dataset read with explicit [`ReadOptions`] (a named format, `undirected`); recorded
    /// in `config.toml` as `format` / `undirected`.
    DatasetAs {
        /// The dataset's path.
        path: PathBuf,
        /// How to read it.
        read: ReadOptions,
    },
    /// The built-in generated graph ([`generated_graph_config`]) with this many nodes.
    Generated {
        /// Nodes of the graph.
        num_nodes: usize,
    },
    /// A partition directory written by `tma partition --out` (see [`crate::store`]); its
    /// manifest fixes the data options of the configuration.
    Partitions(PathBuf),
    /// A dataset already in memory (e.g. from NumPy arrays); `config.toml` records no path.
    InMemory(Box<Dataset>),
}

/// Which transport runs the trainers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// Trainers are threads of this process ([`crate::engines::InProcess`]).
    #[default]
    InProcess,
    /// One process per rank under `mpirun`/`srun` (feature `mpi`); rank 0 runs this [`Run`]
    /// with [`Run::train_with`] and the MPI engine (`engines::mpi`).
    Mpi,
}

/// Everything that defines a run.
pub struct RunSpec {
    /// The training configuration.
    pub config: TrainConfig,
    /// The data.
    pub data: DataSource,
    /// Injected trainer failures (`--fail`).
    pub fail: FailPlan,
    /// The engine.
    pub engine: Engine,
    /// MPI: how long the coordinator waits for the ranks to join and to exit (recorded in
    /// `config.toml`).
    pub join_timeout: Option<Duration>,
    /// The run directory; `None`: `runs/<dataset>-<method>-<UTC time stamp>`.
    pub out: Option<PathBuf>,
    /// Continue the interrupted run in `out` from its last checkpoint instead of starting one.
    pub resume: bool,
    /// What the front end says about the options it was given (options no chosen method
    /// uses: [`crate::options::unused_warnings`]); first among [`Run::warnings`], so they are
    /// printed and recorded in `partition.json` and `summary.json` with the rest.
    pub notes: Vec<String>,
    /// `--tensorboard DIR`: the round metrics also as TensorBoard scalars, in an event file
    /// under `DIR/<run directory's name>/` ([`crate::store::tensorboard`]); recorded in
    /// `config.toml`, so a resumed run appends to the same folder.
    pub tensorboard: Option<PathBuf>,
    /// On a partition directory ([`DataSource::Partitions`]): the seed of the model's
    /// initialization and of the trainers' sampling, dropout and training negatives, in place of
    /// the directory's seed, which made its split and partition and still fixes them (and the
    /// validation subset of `--eval-max-nodes`). `tma compare` runs its seeds on one partition
    /// per layout this way. `None`: the directory's seed for everything. Recorded as `seed` in
    /// `config.toml` and as `training_seed` in `partition.json`.
    pub training_seed: Option<u64>,
}

impl RunSpec {
    /// A fresh in-process run of `config` on `data`, no failures, default run directory.
    pub fn new(config: TrainConfig, data: DataSource) -> RunSpec {
        RunSpec {
            config,
            data,
            fail: FailPlan::new(),
            engine: Engine::InProcess,
            join_timeout: None,
            out: None,
            resume: false,
            notes: Vec::new(),
            tensorboard: None,
            training_seed: None,
        }
    }
}

/// The built-in graph: a stochastic block model (8 classes, average degree 20) whose features
/// alone separate the classes only partly (noise 6 against unit class means in 64-d), and
/// whose edges stay within a class 70% of the time, so that using the graph matters.
pub fn generated_graph_config(num_nodes: usize, seed: u64) -> SbmConfig {
    SbmConfig {
        num_nodes,
        feature_noise: 6.0,
        p_in_ratio: 0.7,
        seed,
        ..SbmConfig::default()
    }
}

/// Loads a dataset or generates the built-in graph with `cfg`'s split index and seed (a
/// partition directory or an in-memory dataset is not loaded here). What the format reader
/// changed in the data is dropped here: [`load_dataset_noted`] returns it.
///
/// # Errors
/// [`TrainError::Dataset`] naming the path and the problem.
pub fn load_dataset(data: &DataSource, cfg: &TrainConfig) -> Result<Option<Dataset>, TrainError> {
    Ok(load_dataset_noted(data, cfg)?.map(|(ds, _)| ds))
}

/// As [`load_dataset`], with the reader's notes (ids remapped, reverse arcs added, columns
/// ignored, ...; `tma_graph::formats::Loaded::notes`), one line each.
///
/// # Errors
/// [`TrainError::Dataset`] naming the path and the problem.
pub fn load_dataset_noted(
    data: &DataSource,
    cfg: &TrainConfig,
) -> Result<Option<(Dataset, Vec<String>)>, TrainError> {
    let (path, read) = match data {
        DataSource::Dataset(path) => (path, ReadOptions::default()),
        DataSource::DatasetAs { path, read } => (path, *read),
        DataSource::Generated { num_nodes } => {
            return Ok(Some((
                tma_graph::generate_sbm(&generated_graph_config(*num_nodes, cfg.seed)),
                Vec::new(),
            )))
        }
        DataSource::Partitions(_) | DataSource::InMemory(_) => return Ok(None),
    };
    let opts = LoadOptions {
        split_index: cfg.split_index,
        seed: cfg.seed,
        allow_split_overlap: cfg.allow_split_overlap,
        ..LoadOptions::default()
    };
    tma_graph::formats::read(path, &read, &opts)
        .map(|l| Some((l.dataset, l.notes)))
        .map_err(|source| TrainError::Dataset {
            path: path.clone(),
            source,
        })
}

/// The resolved configuration as `config.toml` holds it (`tma train --config` reads it back).
#[derive(Serialize)]
struct ResolvedConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    dataset: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    format: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    undirected: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gen_nodes: Option<usize>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    fail: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    partitions: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    engine: Option<Engine>,
    #[serde(skip_serializing_if = "Option::is_none")]
    join_timeout: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tensorboard: Option<String>,
    #[serde(flatten)]
    train: &'a TrainConfig,
}

/// The data a run has opened. Preparation ([`Run::prepare`]) turns a dataset into the
/// [`PreparedRun`]'s data (`Used`); a partition directory stays, for the engine.
enum Opened {
    Dataset(Dataset),
    Partitions { dir: PathBuf, manifest: Manifest },
    Used,
}

/// The data [`Run::start`] opened, with what `config.toml` records of where it came from.
struct OpenedSource {
    opened: Opened,
    /// The dataset's name (a partition directory's: its manifest's).
    name: String,
    /// The dataset's path, absolute (`dataset` in `config.toml`).
    dataset: Option<String>,
    /// How it was read, when the source named it ([`DataSource::DatasetAs`]).
    read: Option<ReadOptions>,
    /// Nodes of the generated graph ([`DataSource::Generated`]).
    gen_nodes: Option<usize>,
    /// The partition directory, absolute.
    partitions: Option<String>,
}

/// One run, from its data to its complete run directory.
pub struct Run {
    config: TrainConfig,
    fail: FailPlan,
    engine: Engine,
    name: String,
    opened: Opened,
    dir: PathBuf,
    run_dir: RunDir,
    resumed: Option<CheckpointState>,
    /// Whether the directory existed before this run created it; `None` when resuming (a
    /// resumed directory is never removed).
    created: Option<bool>,
    manifest_sha256: Option<String>,
    clock: std::sync::OnceLock<Arc<dyn Clock>>,
    stop: Option<StopFlag>,
    /// What a run's memory estimate is checked against in [`Run::prepare`]: by default what
    /// this process may still use ([`crate::memory::available_bytes`]); None: no check.
    available_memory: Option<u64>,
    warnings: Vec<String>,
    /// What the dataset's reader changed in the data (`tma_graph::formats::Loaded::notes`),
    /// first among [`Run::warnings`].
    load_notes: Vec<String>,
    /// `config.toml` of a resumed run (flags over the saved config), written once the resume
    /// has passed its checks.
    resumed_config: Option<String>,
    /// The TensorBoard event file (`RunSpec::tensorboard`).
    tensorboard: Option<EventLog>,
    /// The seed of the split and partition when `config.seed` is another
    /// (`RunSpec::training_seed` on a partition directory).
    data_seed: Option<u64>,
}

/// Writes `config.toml` (`resolved`) to the new run directory `run_dir` (returns `None`); a
/// `resumed` run gets the text back instead, written when it starts training (once its
/// resume has passed its checks).
///
/// # Errors
/// [`TrainError::Config`] if it does not serialize; [`TrainError::Io`] when it cannot be
/// written.
fn record_config(
    resolved: &ResolvedConfig<'_>,
    run_dir: &RunDir,
    resumed: bool,
) -> Result<Option<String>, TrainError> {
    let text = toml::to_string(resolved)
        .map_err(|e| TrainError::Config(format!("serializing config.toml: {e}")))?;
    if resumed {
        return Ok(Some(text));
    }
    run_dir.write("config.toml", text.as_bytes())?;
    Ok(None)
}

/// The input width of a checkpoint's model, as its file's metadata records it
/// (`tma_nn::Model::file_metadata`); `None` where it does not. A featureless graph's input is
/// chosen by a rule that may choose otherwise than when the checkpoint was written
/// (decisions 0034, 0035): `TrainConfig::model_input_width` keeps the checkpoint's.
fn checkpoint_input_width(dir: &Path, st: &CheckpointState) -> Option<usize> {
    let path = dir.join("checkpoint").join(&st.model);
    let (_, meta) = tma_nn::ParamSet::load_safetensors_with(&path).ok()?;
    let text = meta.get(tma_nn::Model::METADATA_KEY)?;
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    v.get("in_dim")?.as_u64().map(|w| w as usize)
}

fn abs_display(p: &Path) -> String {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| p.to_path_buf())
        .display()
        .to_string()
}

/// The run directory a run gets without `--out`: `runs/<dataset>-<method>-<UTC time stamp>`.
pub fn default_out(name: &str, cfg: &TrainConfig) -> PathBuf {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let stamp: String = now
        .chars()
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect();
    PathBuf::from("runs").join(format!("{}-{}-{}", name, cfg.method, stamp))
}

impl Run {
    /// Opens the data, then creates the run directory and writes `config.toml` (or, with
    /// `spec.resume`, reopens the run directory `spec.out` at its last checkpoint).
    ///
    /// # Errors
    /// [`TrainError::Dataset`] / [`TrainError::Store`] for data that cannot be read;
    /// [`TrainError::RunDirExists`] for a non-empty run directory; [`TrainError::Config`]
    /// for a resume without a run directory or of a finished run; [`TrainError::Io`].
    pub fn start(spec: RunSpec) -> Result<Run, TrainError> {
        crate::memory::start_sampler();
        let RunSpec {
            mut config,
            data,
            fail,
            engine,
            join_timeout,
            out,
            resume,
            notes,
            tensorboard,
            training_seed,
        } = spec;
        if engine == Engine::Mpi && !config.val_check_interval.is_zero() {
            return Err(TrainError::Config(
                "--val-check-interval: validation checks between rounds need in-process trainers; the MPI engine validates at rounds only (drop --val-check-interval or use a shorter --sync-every)".into(),
            ));
        }
        // the front end's notes on its options come first, then the reader's
        let mut load_notes = notes;
        let source = Run::open_data(data, &mut config, &mut load_notes)?;
        // compare's seeds on one partition directory: the directory's seed made the split and
        // the partition; this one seeds the training
        let mut data_seed = None;
        if let Some(s) = training_seed {
            if !matches!(source.opened, Opened::Partitions { .. }) {
                return Err(TrainError::Config(
                    "a training seed apart from the data's applies to a partition directory only; elsewhere one seed makes the split, the partition and the training (config.seed)".into(),
                ));
            }
            if s != config.seed {
                data_seed = Some(config.seed);
                config.seed = s;
            }
        }
        let manifest_sha256 = match &source.opened {
            Opened::Partitions { manifest, .. } => Some(manifest.hash.clone()),
            _ => None,
        };
        let (dir, run_dir, resumed, created) = if resume {
            let (dir, rd, st) = Run::reopen_run_dir(out, &config)?;
            config.model_input_width = checkpoint_input_width(&dir, &st);
            (dir, rd, Some(st), None)
        } else {
            let (dir, rd, existed) = Run::create_run_dir(out, &source.name, &config)?;
            (dir, rd, None, Some(existed))
        };
        let mut run = Run {
            config,
            fail,
            engine,
            name: source.name,
            opened: source.opened,
            dir,
            run_dir,
            resumed,
            created,
            manifest_sha256,
            clock: std::sync::OnceLock::new(),
            stop: None,
            available_memory: crate::memory::available_bytes(),
            warnings: Vec::new(),
            load_notes,
            resumed_config: None,
            tensorboard: None,
            data_seed,
        };
        // the event file under DIR/<run name>/, created now so that a folder that cannot be
        // written is said before any data is prepared
        let tensorboard = match tensorboard {
            Some(tb) => {
                let name = run
                    .dir
                    .file_name()
                    .map_or_else(|| std::ffi::OsString::from(&run.name), |n| n.to_os_string());
                run.tensorboard = Some(EventLog::create(&tb.join(name))?);
                Some(abs_display(&tb))
            }
            None => None,
        };
        let resolved = ResolvedConfig {
            dataset: source.dataset,
            format: source
                .read
                .and_then(|r| r.format)
                .map(|f| f.name().to_string()),
            undirected: source.read.and_then(|r| r.undirected.then_some(true)),
            gen_nodes: source.gen_nodes,
            fail: run
                .fail
                .iter()
                .map(|(t, d)| format!("{t}@{}", humantime::format_duration(*d)))
                .collect(),
            partitions: source.partitions,
            engine: (engine != Engine::InProcess).then_some(engine),
            join_timeout: join_timeout.map(|d| humantime::format_duration(d).to_string()),
            tensorboard,
            train: &run.config,
        };
        run.resumed_config = record_config(&resolved, &run.run_dir, run.resumed.is_some())?;
        Ok(run)
    }

    /// Opens `data` for [`Run::start`]: a partition directory's manifest (whose data options
    /// are applied to `config`), a dataset in memory as it is, else the dataset read or the
    /// graph generated (the reader's notes appended to `load_notes`).
    ///
    /// # Errors
    /// [`TrainError::Dataset`] / [`TrainError::Store`] for data that cannot be read;
    /// [`TrainError::Config`] for a partition directory whose options do not fit `config`.
    fn open_data(
        data: DataSource,
        config: &mut TrainConfig,
        load_notes: &mut Vec<String>,
    ) -> Result<OpenedSource, TrainError> {
        Ok(match data {
            DataSource::Partitions(dir) => {
                let manifest = store::read_manifest(&dir)?;
                crate::methods::apply_partitions(&dir, &manifest.data, config)?;
                let name = manifest.dataset.clone();
                // absolute, so `--config RUN_DIR/config.toml` and `--resume` work from any directory
                let shown = abs_display(&dir);
                OpenedSource {
                    opened: Opened::Partitions { dir, manifest },
                    name,
                    dataset: None,
                    read: None,
                    gen_nodes: None,
                    partitions: Some(shown),
                }
            }
            DataSource::InMemory(ds) => {
                let name = ds.name.clone();
                OpenedSource {
                    opened: Opened::Dataset(*ds),
                    name,
                    dataset: None,
                    read: None,
                    gen_nodes: None,
                    partitions: None,
                }
            }
            other => {
                let (ds, notes) =
                    load_dataset_noted(&other, config)?.expect("a dataset or generated graph");
                load_notes.extend(notes);
                let mut read = None;
                let (path, gen) = match &other {
                    DataSource::Dataset(p) => (Some(abs_display(p)), None),
                    DataSource::DatasetAs { path, read: r } => {
                        read = Some(*r);
                        (Some(abs_display(path)), None)
                    }
                    DataSource::Generated { num_nodes } => (None, Some(*num_nodes)),
                    _ => (None, None),
                };
                let name = ds.name.clone();
                OpenedSource {
                    opened: Opened::Dataset(ds),
                    name,
                    dataset: path,
                    read,
                    gen_nodes: gen,
                    partitions: None,
                }
            }
        })
    }

    /// The run directory `out` of an interrupted run reopened at its last checkpoint, with
    /// the checkpoint's state, after checking that `config` keeps the checkpoint's data,
    /// partition and model options.
    ///
    /// # Errors
    /// [`TrainError::Config`] without `out`, for a directory that is not a run directory or
    /// has no complete checkpoint, and for options that differ from the checkpoint's (named);
    /// [`TrainError::Io`] / [`TrainError::Store`] when the checkpoint cannot be read.
    fn reopen_run_dir(
        out: Option<PathBuf>,
        config: &TrainConfig,
    ) -> Result<(PathBuf, RunDir, CheckpointState), TrainError> {
        let Some(dir) = out else {
            return Err(TrainError::Config(
                "resume needs the run directory to continue".into(),
            ));
        };
        if !dir.join("config.toml").exists() {
            return Err(TrainError::Config(format!(
                "{}: no config.toml there (not a tma run directory)",
                dir.display()
            )));
        }
        if !dir.join("checkpoint").join("state.json").exists() {
            return Err(TrainError::Config(format!(
                "--resume {}: the run stopped before its first checkpoint was complete (checkpoint/state.json is missing), so there is nothing to resume from; start it again (remove {} or choose another --out)",
                dir.display(),
                dir.display()
            )));
        }
        let st = checkpoint::read_state(&dir)?;
        if let Some(saved) = &st.config {
            let now = serde_json::to_value(config).expect("config serializes");
            let diff = checkpoint::resume_differences(saved, &now);
            if !diff.is_empty() {
                return Err(TrainError::Config(format!(
                    "--resume {}: {} differ{} from the run's checkpoint; a resumed run keeps its data, partition and model options: drop {} (or start a new run with another --out)",
                    dir.display(),
                    diff.join(", "),
                    if diff.len() == 1 { "s" } else { "" },
                    if diff.len() == 1 { "that flag" } else { "those flags" }
                )));
            }
        }
        let rd = RunDir::reopen(&dir, st.round)?;
        Ok((dir, rd, st))
    }

    /// A new run directory: `out`, or [`default_out`] of the dataset `name`; with whether it
    /// existed (empty) before.
    ///
    /// # Errors
    /// [`TrainError::RunDirExists`] for a non-empty directory; [`TrainError::Config`] for one
    /// holding a run that stopped before its first round; [`TrainError::Io`].
    fn create_run_dir(
        out: Option<PathBuf>,
        name: &str,
        config: &TrainConfig,
    ) -> Result<(PathBuf, RunDir, bool), TrainError> {
        let dir = out.unwrap_or_else(|| default_out(name, config));
        let existed = dir.exists();
        let rd = RunDir::create(&dir).map_err(|e| match e {
            TrainError::RunDirExists(d) if unstarted_run_dir(&d) => TrainError::Config(format!(
                "--out {}: it holds a run that stopped before its first round (no checkpoint, nothing to resume); remove it or choose another --out",
                d.display()
            )),
            e => e,
        })?;
        Ok((dir, rd, existed))
    }

    /// The run directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The TensorBoard event file this run writes (`RunSpec::tensorboard`), if any.
    pub fn tensorboard_file(&self) -> Option<&Path> {
        self.tensorboard.as_ref().map(EventLog::path)
    }

    /// Whether the run directory existed (empty) before this run; None for a resumed run,
    /// whose directory is never removed. See [`discard_unstarted`].
    pub fn dir_existed(&self) -> Option<bool> {
        self.created
    }

    /// Ends the run early when `flag` is set (e.g. by the CLI on Ctrl-C): the round in flight
    /// is formed at once and is the last; the checkpoint and a summary marked `interrupted`
    /// are written, and `--resume` continues the run.
    pub fn stop_on(&mut self, flag: StopFlag) {
        self.stop = Some(flag);
    }

    /// The memory [`Run::prepare`] checks the run's estimate ([`crate::run::memory_estimate::estimate`])
    /// against, refusing a run that would not fit: by default what this process may still use
    /// ([`crate::memory::available_bytes`]: the machine's available memory, the cgroup's limit,
    /// `ulimit -v`), for every front end; `None` turns the check off. (Not the `--memory-budget`
    /// of `tma partition --out`, `convert`, `generate` and `embed`, which bounds what those
    /// commands hold while they stream.)
    pub fn set_available_memory(&mut self, bytes: Option<u64>) {
        self.available_memory = bytes;
    }

    /// What preparation changed or dropped in the user's data and trainers without training
    /// examples, one line each (after [`Run::prepare`]; recorded in `partition.json` and
    /// `summary.json`).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The resolved configuration (for a partition directory: with its data options).
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// The dataset's name.
    pub fn dataset_name(&self) -> &str {
        &self.name
    }

    /// The dataset, while it is not yet prepared (None for a partition directory).
    pub fn dataset(&self) -> Option<&Dataset> {
        match &self.opened {
            Opened::Dataset(ds) => Some(ds),
            _ => None,
        }
    }

    /// The partition directory and its manifest, when the run trains on one.
    pub fn partitions(&self) -> Option<(&Path, &Manifest)> {
        match &self.opened {
            Opened::Partitions { dir, manifest } => Some((dir, manifest)),
            _ => None,
        }
    }

    /// The checkpoint a resumed run continues from.
    pub fn resumed(&self) -> Option<&CheckpointState> {
        self.resumed.as_ref()
    }

    /// Splits and partitions the data (or reads the partition directory: every part in-process,
    /// only the coordinator's data under MPI) and writes `partition.json` (fresh runs of a
    /// partitioned method). A resumed run must find the partition its checkpoint was made on.
    ///
    /// # Errors
    /// [`TrainError::Data`] / [`TrainError::Partition`] from preparation, [`TrainError::Store`]
    /// for a bad partition directory, [`TrainError::Config`] when a resumed run's partition
    /// differs from its checkpoint's.
    pub fn prepare(mut self) -> Result<PreparedRun, TrainError> {
        let cfg = &self.config;
        let opened = std::mem::replace(&mut self.opened, Opened::Used);
        let (mut prep, pj) = match opened {
            Opened::Dataset(ds) => {
                // a mapped graph (the on-disk format): the parts are written under the run
                // directory and mapped back, so trainers hold only their part's pages
                let spill = ds
                    .graph
                    .indices
                    .is_mapped()
                    .then(|| crate::data::spill::Spill::unlinked(self.dir.join(".parts")));
                let prep = crate::methods::prepare_spilled(ds, cfg, spill.as_ref())?;
                let pj = prep.report.as_ref().map(|rep| {
                    serde_json::json!({
                        "method": cfg.method.to_string(),
                        "seed": cfg.seed,
                        "num_parts": cfg.num_trainers,
                        "drop_parts": cfg.drop_parts,
                        "super_nodes": cfg.super_nodes,
                        "assignment_sha256": prep.partition_hash,
                        "report": rep,
                    })
                });
                (prep, pj)
            }
            Opened::Partitions { dir, manifest: m } => {
                let mut prep = match self.engine {
                    Engine::Mpi => store::read_coordinator(&dir, &m)?,
                    Engine::InProcess => store::read_all(&dir, &m)?,
                };
                // made for its layout (`tma partition --out`): checked for training here
                let num_train: Vec<usize> = m.parts.iter().map(|p| p.num_train).collect();
                crate::data::check_partitions(&m.dataset, &prep.eval, cfg.task, &num_train)
                    .map_err(|e| {
                        TrainError::Data(format!("--partitions {}: {e}", dir.display()))
                    })?;
                // the method's rule on parts without a training example (GGS: none)
                crate::methods::check_idle_parts(&dir, &m.parts, cfg)?;
                let (metric, note) = prep.eval.check_metric(cfg.metric, cfg.eval_num_neg)?;
                prep.metric = metric;
                prep.warnings.extend(note);
                let mut pj = serde_json::json!({
                    "method": cfg.method.to_string(),
                    "seed": self.data_seed.unwrap_or(cfg.seed),
                    "num_parts": cfg.num_trainers,
                    "drop_parts": cfg.drop_parts,
                    "super_nodes": cfg.super_nodes,
                    "assignment_sha256": m.assignment_sha256,
                    "manifest_sha256": m.hash,
                    "parts": m.parts,
                    "report": m.report,
                });
                if self.data_seed.is_some() {
                    pj["training_seed"] = serde_json::json!(cfg.seed);
                }
                self.opened = Opened::Partitions { dir, manifest: m };
                (prep, Some(pj))
            }
            Opened::Used => unreachable!("a run is prepared once: prepare takes it"),
        };
        if let Some(available) = self.available_memory {
            crate::run::memory_estimate::check(cfg, &prep, available)?;
        }
        let mut warnings = self.load_notes.clone();
        warnings.extend(prep.warnings.iter().cloned());
        // the validation subset belongs to the data: the split's seed picks it
        let data_seed = self.data_seed.unwrap_or(cfg.seed);
        warnings.extend(prep.cap_validation(cfg.eval_max_nodes, cfg.eval_max_edges, data_seed));
        if !cfg.val_check_interval.is_zero() && cfg.val_check_interval >= cfg.time_limit {
            warnings.push(format!(
                "val-check-interval ({}) is not shorter than time-limit ({}): no validation check will run, only the rounds are validated",
                humantime::format_duration(cfg.val_check_interval),
                humantime::format_duration(cfg.time_limit)
            ));
        }
        warnings.extend(crate::data::matmul_precision_warning(cfg));
        let saved = self.resumed.as_ref().and_then(|st| st.config.as_ref());
        warnings.extend(exclude_targets_lines(cfg, &prep, saved));
        if let Some(w) = threads_warning(cfg.threads, num_cores()) {
            warnings.push(w);
        }
        if let Some(st) = self.resumed.as_ref() {
            if cfg.time_limit.as_secs_f64() <= st.elapsed_s {
                warnings.push(format!(
                    "resume: time-limit ({}) is not past the run's training time so far ({:.1}s): one more round forms at once and is the last; raise --time-limit to train longer",
                    humantime::format_duration(cfg.time_limit),
                    st.elapsed_s
                ));
            }
        }
        // a resume may change the precision (the model is the same), but not silently
        if let Some(saved) = self.resumed.as_ref().and_then(|st| st.config.as_ref()) {
            let was = saved
                .get("matmul_precision")
                .and_then(|v| v.as_str())
                .unwrap_or("highest");
            if was != cfg.matmul_precision.as_str() {
                warnings.push(format!(
                    "resume: matmul-precision {was} -> {} (the rounds before the resume ran at {was})",
                    cfg.matmul_precision
                ));
            }
        }
        let idle = prep.idle_trainers();
        if !idle.is_empty() {
            warnings.push(format!(
                "trainer{} {} got no training {} (a small graph for {} trainers): {} every round with weight 0, the others train",
                if idle.len() == 1 { "" } else { "s" },
                idle.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", "),
                if cfg.task == crate::config::Task::Link { "edges" } else { "nodes" },
                prep.trainers.len(),
                if idle.len() == 1 { "it joins" } else { "they join" }
            ));
        }
        if let Some(st) = &self.resumed {
            let short =
                |h: Option<&str>| h.map_or("none".to_string(), |h| h.chars().take(16).collect());
            if st.partition_hash != prep.partition_hash {
                return Err(TrainError::Config(format!(
                    "--resume {}: the checkpoint was made on another partition of the data (assignment sha256 {}, now {}); resume with the same --dataset, --method, --trainers, --drop-parts, --super-nodes and --seed",
                    self.dir.display(),
                    short(st.partition_hash.as_deref()),
                    short(prep.partition_hash.as_deref()),
                )));
            }
            if st.manifest_sha256 != self.manifest_sha256 {
                return Err(TrainError::Config(format!(
                    "--resume {}: the checkpoint was made {} (manifest sha256 {}), this run reads {} (manifest sha256 {}); resume with the same --partitions",
                    self.dir.display(),
                    if st.manifest_sha256.is_some() { "from a partition directory" } else { "without --partitions" },
                    short(st.manifest_sha256.as_deref()),
                    if self.manifest_sha256.is_some() { "a partition directory" } else { "a dataset" },
                    short(self.manifest_sha256.as_deref()),
                )));
            }
        } else if let Some(mut pj) = pj {
            pj["warnings"] = serde_json::json!(warnings);
            pj["removed_on_load"] = serde_json::json!(prep.removed);
            let bytes = serde_json::to_vec_pretty(&pj).expect("partition.json serializes");
            self.run_dir.write("partition.json", &bytes)?;
        }
        self.warnings = warnings;
        Ok(PreparedRun { run: self, prep })
    }

    /// The training clock, started at the first call: from 0, or from the checkpoint's
    /// training time when resuming. [`Run::train`] uses it (a progress display can share it).
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.clock
            .get_or_init(|| match &self.resumed {
                Some(st) => checkpoint::offset_clock(
                    RealClock::start(),
                    Duration::from_secs_f64(st.elapsed_s),
                ),
                None => Arc::new(RealClock::start()),
            })
            .clone()
    }

    /// Prepares ([`Run::prepare`]) and trains with in-process trainers; see
    /// [`PreparedRun::train`].
    ///
    /// # Errors
    /// As [`Run::prepare`] and [`PreparedRun::train`].
    pub fn train(self, observer: &mut dyn Observer) -> Result<RunResult, TrainError> {
        self.prepare()?.train(observer)
    }

    /// Prepares and trains, handing back the prepared data; see
    /// [`PreparedRun::train_keeping_data`].
    ///
    /// # Errors
    /// As [`Run::prepare`] and [`PreparedRun::train_keeping_data`].
    pub fn train_keeping_data(
        self,
        observer: &mut dyn Observer,
    ) -> Result<(RunResult, Prepared), TrainError> {
        self.prepare()?.train_keeping_data(observer)
    }

    /// Prepares and trains with `engine`, handing back the prepared data; see
    /// [`PreparedRun::train_with`].
    ///
    /// # Errors
    /// As [`Run::prepare`] and [`PreparedRun::train_with`].
    pub fn train_keeping_data_with(
        self,
        engine: &mut dyn crate::engines::Engine,
        observer: &mut dyn Observer,
    ) -> Result<(RunResult, Prepared), TrainError> {
        self.prepare()?.train_keeping_data_with(engine, observer)
    }

    /// Prepares and trains with `engine`; see [`PreparedRun::train_with`].
    ///
    /// # Errors
    /// As [`Run::prepare`] and [`PreparedRun::train_with`].
    pub fn train_with(
        self,
        engine: &mut dyn crate::engines::Engine,
        observer: &mut dyn Observer,
    ) -> Result<RunResult, TrainError> {
        self.prepare()?.train_with(engine, observer)
    }
}

/// A run whose data is prepared ([`Run::prepare`]): the second phase of a run, which only
/// trains. Reads as its [`Run`] (directory, configuration, warnings, clock) through `Deref`.
pub struct PreparedRun {
    run: Run,
    prep: Prepared,
}

impl std::ops::Deref for PreparedRun {
    type Target = Run;
    fn deref(&self) -> &Run {
        &self.run
    }
}

impl PreparedRun {
    /// The prepared data (split, parts or the partition directory's, evaluation data).
    pub fn prepared(&self) -> &Prepared {
        &self.prep
    }

    /// Trains with in-process trainers ([`crate::engines::InProcess`], with the run's injected
    /// failures); see [`PreparedRun::train_with`] for what is written.
    ///
    /// # Errors
    /// As [`PreparedRun::train_with`]; [`TrainError::Config`] for a run whose spec asks for
    /// the MPI engine (it trains through `engines::mpi::Mpi`).
    pub fn train(self, observer: &mut dyn Observer) -> Result<RunResult, TrainError> {
        self.train_keeping_data(observer).map(|(result, _)| result)
    }

    /// As [`PreparedRun::train`], and hands back the prepared data (the evaluation graph and
    /// features), for inference with the trained models after the run (e.g. embeddings in the
    /// Python package).
    ///
    /// # Errors
    /// As [`PreparedRun::train`].
    pub fn train_keeping_data(
        self,
        observer: &mut dyn Observer,
    ) -> Result<(RunResult, Prepared), TrainError> {
        if self.run.engine != Engine::InProcess {
            return Err(TrainError::Config(
                "this run's engine is mpi: train it with Run::train_with and the MPI engine of rank 0 (engines::mpi::launch)".into(),
            ));
        }
        let mut engine = crate::engines::InProcess::new(self.run.fail.clone());
        self.train_keeping_data_with(&mut engine, observer)
    }

    /// As [`PreparedRun::train_with`], and hands back the prepared data (see
    /// [`PreparedRun::train_keeping_data`]).
    ///
    /// # Errors
    /// As [`PreparedRun::train_with`].
    pub fn train_keeping_data_with(
        mut self,
        engine: &mut dyn crate::engines::Engine,
        observer: &mut dyn Observer,
    ) -> Result<(RunResult, Prepared), TrainError> {
        let result = self.train_in_place(engine, observer)?;
        Ok((result, self.prep))
    }

    /// Trains with `engine` (which runs the trainers and the coordinator's loop and returns
    /// its result), while the run appends every round to `rounds.jsonl`, checkpoints it and
    /// passes it on to `observer`; then writes `model_final.safetensors`,
    /// `model_best.safetensors` and, last, `summary.json`. Time counts from [`Run::clock`].
    ///
    /// # Errors
    /// The engine's error, or [`TrainError::Io`] for files that cannot be written.
    pub fn train_with(
        mut self,
        engine: &mut dyn crate::engines::Engine,
        observer: &mut dyn Observer,
    ) -> Result<RunResult, TrainError> {
        self.train_in_place(engine, observer)
    }

    /// [`PreparedRun::train_with`] on a borrowed run (its prepared data stays in it).
    fn train_in_place(
        &mut self,
        engine: &mut dyn crate::engines::Engine,
        observer: &mut dyn Observer,
    ) -> Result<RunResult, TrainError> {
        let clock = self.run.clock();
        let Self { run, prep } = self;
        let prep = &*prep;
        let model = build_model(&run.config, prep.model_shape())?;
        // what the model files say about the model (encoder, its options, widths, PyTorch export)
        // and, on a featureless graph, the structural input the run took (`auto` resolved)
        let model_meta = prep.model_file_metadata(&model);
        let template = model.zero_params();
        let resume = match &run.resumed {
            Some(st) => Some(checkpoint::resume_from(&run.dir, st, &template)?),
            None => None,
        };
        // a resumed run records the configuration it continues with (flags over the saved one)
        if let Some(text) = run.resumed_config.take() {
            run.run_dir.write("config.toml", text.as_bytes())?;
        }
        let segment = run.resumed.as_ref().map_or(0, |s| s.round);
        let ckpt = Checkpointer::new(
            &run.dir,
            template,
            run.config.seed,
            segment,
            prep.partition_hash.clone(),
            run.manifest_sha256.clone(),
            run.resumed.as_ref(),
        )?
        .with_config(serde_json::to_value(&run.config).expect("config serializes"))
        .with_model_metadata(model_meta.clone());
        let mut recorder = Recorder {
            user: observer,
            run_dir: &mut run.run_dir,
            ckpt,
            tensorboard: run.tensorboard.as_mut(),
        };
        let partitions = match &run.opened {
            Opened::Partitions { dir, manifest } => Some((dir.as_path(), manifest)),
            _ => None,
        };
        let mut result = engine.run(EngineContext {
            method: crate::methods::training_method(run.config.method),
            prep,
            partitions,
            cfg: &run.config,
            clock,
            observer: &mut recorder,
            resume,
            segment,
            stop: run.stop.clone(),
        })?;
        // the last checkpoint on disk before the summary says the run ended
        recorder.ckpt.flush()?;
        result.summary.checkpoints_superseded = recorder.ckpt.superseded();
        drop(recorder);
        result.summary.warnings = run.warnings.clone();
        result.summary.matmul_products = crate::data::matmul_products(&run.config).to_string();
        // a diverged run is recorded once, at the first round it showed in
        result.summary.warnings.extend(
            result
                .rounds
                .iter()
                .find_map(crate::evaluation::record::diverged_warning),
        );
        // a trainer in no round (not failed): too slow for the schedule, said once here
        result
            .summary
            .warnings
            .extend(crate::evaluation::record::absent_trainer_warnings(
                &result.rounds,
                result.summary.num_trainers,
                &result.summary.failed_trainers,
                run.config.sync_every,
                run.config.round_timeout,
            ));
        // trainers lost during the run (not failed on purpose): said once, with when
        result
            .summary
            .warnings
            .extend(crate::evaluation::record::lost_trainer_warnings(
                &result.summary.failed_trainers,
                &run.fail,
            ));
        // trainers of a method that averages no model (GGS) whose examples were never trained on
        let idle = crate::evaluation::record::no_step_warnings(
            &result.summary,
            run.config.method.info().averages_models,
        );
        result.summary.warnings.extend(idle);
        if let Some(tb) = &mut run.tensorboard {
            tb.write_summary(&result.summary)?;
        }
        if result.summary.memory.is_empty() {
            // one process (an MPI engine fills in every rank itself)
            let rank = (engine.role() == "coordinator").then_some(0);
            result
                .summary
                .memory
                .push(crate::memory::ProcessMemory::this_process(
                    engine.role(),
                    rank,
                    None,
                ));
        }
        run.run_dir.finish(&result, &model_meta)?;
        Ok(result)
    }
}

impl Drop for Run {
    /// A run that has no round yet leaves the run directory as it found it.
    fn drop(&mut self) {
        if let Some(existed) = self.created {
            remove_unstarted_run(&self.dir, existed);
        }
        if let Some(tb) = &self.tensorboard {
            tb.discard_if_unused();
        }
    }
}

/// After a failure before the first round (bad labels for the task, too many trainers for the
/// graph, ...), puts the run directory back as it was: removed if this run created it,
/// emptied if it was an empty directory. A run with at least one round is kept (it has a
/// checkpoint to resume from).
fn remove_unstarted_run(dir: &Path, existed: bool) {
    discard_unstarted(dir, existed);
}

/// The cores this process may run on (`std::thread::available_parallelism`; 1 when unknown).
fn num_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A warning when `--threads` asks for more threads than the `cores` this process may use:
/// they time-share the cores, and the trainers' steps slow down by more than the ratio
/// (a fresh user measured 680 steps per trainer with `--threads 2` on 2 cores, 0-4 with 1000).
pub fn threads_warning(threads: usize, cores: usize) -> Option<String> {
    (threads > cores).then(|| {
        format!(
            "threads ({threads}) is above the {cores} core{} this process may use: the threads time-share the cores and training slows down; 0 uses every core",
            if cores == 1 { "" } else { "s" }
        )
    })
}

/// Puts the run directory `dir` of a run that has nothing to resume from back as it was
/// (removed, or emptied when it `existed` empty before the run) and returns true; returns
/// false, touching nothing, when the run has a complete checkpoint (`checkpoint/state.json`,
/// written last by each round's checkpoint). A run stopped at once while its first round's
/// checkpoint was being written has a round in `rounds.jsonl` but cannot be resumed, and is put
/// back too. For a process that must stop at once (a second Ctrl-C) without unwinding the
/// [`Run`].
pub fn discard_unstarted(dir: &Path, existed: bool) -> bool {
    let resumable = dir.join("checkpoint").join("state.json").is_file();
    if resumable {
        return false;
    }
    if !existed {
        let _ = std::fs::remove_dir_all(dir);
    } else if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            let _ = if p.is_dir() {
                std::fs::remove_dir_all(&p)
            } else {
                std::fs::remove_file(&p)
            };
        }
    }
    true
}

/// Whether `dir` holds only what a run writes before its first round (`config.toml`,
/// `partition.json`, an empty `rounds.jsonl`, an empty `checkpoint/`).
fn unstarted_run_dir(dir: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut has_config = false;
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let p = e.path();
        let ok = match name.as_str() {
            "config.toml" => {
                has_config = true;
                true
            }
            "partition.json" => true,
            "rounds.jsonl" => std::fs::metadata(&p).map(|m| m.len() == 0).unwrap_or(false),
            "checkpoint" => std::fs::read_dir(&p)
                .map(|mut r| r.next().is_none())
                .unwrap_or(false),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    has_config
}

/// The run's own observer: the caller's first, then `rounds.jsonl`, the TensorBoard event
/// file (when asked for), then the checkpoint.
struct Recorder<'a> {
    user: &'a mut dyn Observer,
    run_dir: &'a mut RunDir,
    ckpt: Checkpointer,
    tensorboard: Option<&'a mut EventLog>,
}

impl Observer for Recorder<'_> {
    fn on_round(&mut self, r: &RoundRecord) -> Result<(), TrainError> {
        self.user.on_round(r)?;
        self.run_dir.append_round(r)?;
        match &mut self.tensorboard {
            Some(tb) => tb.on_round(r),
            None => Ok(()),
        }
    }

    fn on_round_model(&mut self, r: &RoundRecord, params: &[f32]) -> Result<(), TrainError> {
        self.user.on_round_model(r, params)?;
        self.ckpt.on_round_model(r, params)
    }
}

/// The line a link-prediction run on a graph without node features says when
/// `--exclude-targets` was not given ([`crate::config::TrainConfig::excludes_targets`]).
pub const EXCLUDE_TARGETS_AUTO: &str = "exclude-targets: the graph has no node features, so each training step leaves its positive edges out of the neighbourhoods it samples, and takes at most a quarter of its trainer's training edges (else a model learns to find the edge it predicts among its neighbours, where a held-out edge never is; docs/decisions/0028-exclude-target-edges.md); --exclude-targets false keeps them";

/// The line a link-prediction run from a partition directory written before tma recorded
/// whether its features are structural says when `--exclude-targets` was not given.
pub const EXCLUDE_TARGETS_UNKNOWN: &str = "exclude-targets: the partition directory does not record whether its features are generated structural ones (written by an older tma), so target edges are not excluded; on a graph without node features pass --exclude-targets true, or partition it again";

/// What a link-prediction run says of `--exclude-targets`
/// ([`crate::config::TrainConfig::excludes_targets`]): the automatic choice on structural
/// features, a partition directory that does not record them, the batch it cuts, and a resume
/// (`saved`: the resumed run's configuration) that changes the choice.
fn exclude_targets_lines(
    cfg: &TrainConfig,
    prep: &crate::data::Prepared,
    saved: Option<&serde_json::Value>,
) -> Vec<String> {
    let mut out = Vec::new();
    if cfg.task != crate::config::Task::Link {
        return out;
    }
    let structural = prep.structural();
    let now = cfg.excludes_targets(structural);
    if cfg.exclude_targets.is_none() {
        if now {
            out.push(EXCLUDE_TARGETS_AUTO.into());
        }
        if prep.structural_features.is_none() {
            out.push(EXCLUDE_TARGETS_UNKNOWN.into());
        }
    }
    if now {
        out.extend(excluding_batch_line(cfg.batch_size, &prep.train_examples()));
    }
    // a resume may change which edges its steps sample, but not silently
    if let Some(saved) = saved {
        let given = saved.get("exclude_targets").and_then(|v| v.as_bool());
        let was = given.unwrap_or(structural);
        if was != now {
            out.push(format!(
                "resume: exclude-targets {was} -> {now} (the rounds before the resume ran with {was})"
            ));
        }
    }
    out
}

/// The line that says a trainer's link batch is smaller than `batch_size` because its
/// positives are excluded from its neighbourhoods
/// ([`crate::engines::trainer::excluding_batch_size`]); `None` when no trainer's is.
fn excluding_batch_line(batch_size: usize, train_examples: &[usize]) -> Option<String> {
    let sizes: Vec<(usize, usize)> = train_examples
        .iter()
        .map(|&e| {
            (
                crate::engines::trainer::excluding_batch_size(batch_size, e),
                e,
            )
        })
        .filter(|&(b, _)| b < batch_size)
        .collect();
    let lo = sizes.iter().map(|s| s.0).min()?;
    let hi = sizes.iter().map(|s| s.0).max()?;
    let edges = sizes.iter().map(|s| s.1).max()?;
    Some(format!(
        "batch-size {batch_size}: {} of {} trainers take {} positive edges per step (a quarter of their at most {edges} training edges): with --exclude-targets a step keeps most of its graph to sample",
        sizes.len(),
        train_examples.len(),
        if lo == hi { lo.to_string() } else { format!("{lo}-{hi}") },
    ))
}
