//! A saved model, used after its run: evaluated again on its data (`tma eval`, Python
//! `tma.load_model(...).evaluate()`), or run over every node for its embeddings (`tma embed`).
//!
//! A model file (`model_best.safetensors` / `model_final.safetensors` of a run directory,
//! [`crate::store::output`]) holds the parameters and, in its header's metadata, what the model is
//! ([`FileModel`]: the encoder and its options, widths, layers); files written before tma
//! recorded that take it from the run's `config.toml` next to it. The model is built from it
//! ([`crate::build_model`]), and the split is derived again from the dataset and the config's
//! seed and split options exactly as the run derived it ([`prepare_eval`]: the same
//! `crate::data::prepare_for`, without partitioning), so the validation and test sets are the
//! run's own. Evaluating the best model of a run on its recorded dataset with its
//! `eval_memory` gives the `best_val` / `best_test` values of its `summary.json` bit for bit:
//! the same parameters, graph, nodes and inference path, and evaluation's reductions do not
//! depend on the thread count (tests: `crates/tma-cli/tests/cli/eval.rs`).
//!
//! Embeddings ([`embed_to_npy`]) are computed layer-wise over every node of the evaluation
//! graph (for a link model the training graph, held-out edges removed, as evaluation reads it),
//! a chunk of consecutive nodes at a time within a memory budget
//! ([`crate::evaluation::infer::infer_layers_streamed`]: the layers below the last through mapped scratch
//! files), and each chunk's rows are streamed into the `.npy` file
//! ([`crate::data::spill::write_npy`]), written to a temporary name and renamed into place
//! ([`tma_graph::durable`]): `N x width` floats are never held in memory.

use crate::config::{Task, TrainConfig};
use crate::data::{build_model, DataLayout, Prepared};
use crate::evaluation::eval::{evaluate_with, EvalResult, Split};
use crate::evaluation::infer::InferOptions;
use crate::run::DataSource;
use crate::TrainError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use tma_graph::formats::{Format, ReadOptions};
use tma_nn::{Model, ParamSet};

/// Which of a run directory's two models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Which {
    /// `model_best.safetensors`: the averaged model with the best validation metric.
    #[default]
    Best,
    /// `model_final.safetensors`: the last round's averaged model.
    Final,
}

impl Which {
    /// The model's file name in a run directory.
    pub fn file_name(self) -> &'static str {
        match self {
            Which::Best => "model_best.safetensors",
            Which::Final => "model_final.safetensors",
        }
    }
}

impl std::str::FromStr for Which {
    type Err = String;
    fn from_str(s: &str) -> Result<Which, String> {
        match s {
            "best" => Ok(Which::Best),
            "final" => Ok(Which::Final),
            other => Err(format!("'{other}': expected best or final")),
        }
    }
}

impl std::fmt::Display for Which {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Which::Best => "best",
            Which::Final => "final",
        })
    }
}

/// A run's `config.toml` as [`crate::run::Run`] writes it: the data keys, then every
/// [`TrainConfig`] key (keys of neither, such as `fail` or `engine`, are ignored here).
#[derive(Clone, Debug, Deserialize)]
pub struct SavedConfig {
    /// The dataset's path (absolute as written by a run); absent for a run on arrays given
    /// from Python, on a partition directory or on the generated graph.
    #[serde(default)]
    pub dataset: Option<PathBuf>,
    /// The dataset's format name (`tma`, `ogb`, `snap`, `npz`, `csv`) when one was named.
    #[serde(default)]
    pub format: Option<String>,
    /// Edge lists read as undirected (`--undirected`).
    #[serde(default)]
    pub undirected: Option<bool>,
    /// Nodes of the generated graph, for a run without a dataset.
    #[serde(default)]
    pub gen_nodes: Option<usize>,
    /// The partition directory the run trained on.
    #[serde(default)]
    pub partitions: Option<PathBuf>,
    /// The TensorBoard folder the run wrote its event file under (`--tensorboard`); a
    /// resumed run writes there again.
    #[serde(default)]
    pub tensorboard: Option<PathBuf>,
    /// The training configuration.
    #[serde(flatten)]
    pub train: TrainConfig,
}

impl SavedConfig {
    /// Reads and parses `path` (a run's `config.toml`).
    ///
    /// # Errors
    /// [`TrainError::Io`] naming the file when it cannot be read; [`TrainError::Config`]
    /// naming it and the key when it is not a run's configuration.
    pub fn read(path: &Path) -> Result<SavedConfig, TrainError> {
        let text = std::fs::read_to_string(path).map_err(|source| TrainError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|e| {
            TrainError::Config(format!(
                "{}: not a run's config.toml: {}",
                path.display(),
                e.to_string().trim_end()
            ))
        })
    }

    /// The data the run trained on, as recorded: its partition directory, its dataset (read
    /// with the recorded format and `undirected`), or the generated graph. `None` for a run on
    /// arrays given from Python (no path recorded).
    ///
    /// # Errors
    /// [`TrainError::Config`] for an unknown recorded format name.
    pub fn data_source(&self) -> Result<Option<DataSource>, TrainError> {
        if let Some(dir) = &self.partitions {
            return Ok(Some(DataSource::Partitions(dir.clone())));
        }
        if let Some(path) = &self.dataset {
            let format = self
                .format
                .as_deref()
                .map(|f| f.parse::<Format>())
                .transpose()
                .map_err(|e| TrainError::Config(format!("config.toml format: {e}")))?;
            return Ok(Some(DataSource::DatasetAs {
                path: path.clone(),
                read: ReadOptions {
                    format,
                    undirected: self.undirected.unwrap_or(false),
                },
            }));
        }
        Ok(self
            .gen_nodes
            .map(|num_nodes| DataSource::Generated { num_nodes }))
    }
}

/// A "not found" error naming `path`, saying `why`.
fn not_found(path: &Path, why: String) -> TrainError {
    TrainError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, why),
    }
}

/// What a model file's metadata says about its model (`tma.model` in the safetensors
/// header's `__metadata__`, [`tma_nn::Model::file_metadata`]; files written before tma
/// recorded it have none, and their model is the one their run's `config.toml` describes).
#[derive(Clone, Debug, Deserialize)]
pub struct FileModel {
    /// The encoder's name (`gat`).
    pub encoder: String,
    /// The encoder's options (`{"heads": 8}`).
    #[serde(default)]
    pub options: serde_json::Map<String, serde_json::Value>,
    /// Input width.
    pub in_dim: usize,
    /// Hidden width.
    pub hidden: usize,
    /// Encoder layers.
    pub num_layers: usize,
    /// Width of the model's output (classes, or the embedding width).
    pub out_dim: usize,
    /// `node` or `link`.
    pub head: String,
    /// LayerNorm between layers.
    pub layer_norm: bool,
    /// The structural input a featureless graph's run took (`degree` or `degree-random`,
    /// `--featureless auto` resolved: `Prepared::model_file_metadata`); absent for a graph with node
    /// features and in files written before tma recorded it.
    #[serde(default)]
    pub featureless: Option<String>,
}

impl FileModel {
    /// The model described by `meta` (a model file's header metadata), `None` when the file
    /// does not describe it.
    ///
    /// # Errors
    /// [`TrainError::Config`] naming `path` when the description is not readable.
    pub fn read(
        meta: &std::collections::HashMap<String, String>,
        path: &Path,
    ) -> Result<Option<FileModel>, TrainError> {
        let Some(text) = meta.get(tma_nn::Model::METADATA_KEY) else {
            return Ok(None);
        };
        serde_json::from_str(text).map(Some).map_err(|e| {
            TrainError::Config(format!(
                "{}: the model description in its metadata ({}) is not readable: {e}",
                path.display(),
                tma_nn::Model::METADATA_KEY
            ))
        })
    }

    /// Sets `cfg`'s model (encoder and its options, hidden width, layers, LayerNorm) to this
    /// one, and its `--featureless` input to the one the run took, where the file records it.
    ///
    /// # Errors
    /// [`TrainError::Config`] naming `path` for an encoder or option this build does not
    /// have.
    pub fn apply(&self, cfg: &mut TrainConfig, path: &Path) -> Result<(), TrainError> {
        let bad = |e: String| TrainError::Config(format!("{}: {e}", path.display()));
        cfg.model = self.encoder.parse().map_err(bad)?;
        let mut options = crate::config::encoder_options::EncoderOptionValues::default();
        for (k, v) in &self.options {
            if cfg.model.default_options().get(k).is_none() {
                return Err(bad(format!(
                    "encoder {} has no option '{k}' (its options: {})",
                    cfg.model,
                    tma_nn::EncoderOptions::names_of(cfg.model.options())
                )));
            }
            options.set_json(k, v).map_err(bad)?;
        }
        cfg.encoder_options = options;
        cfg.hidden = self.hidden;
        cfg.num_layers = self.num_layers;
        cfg.layer_norm = self.layer_norm;
        match &self.featureless {
            Some(input) => cfg.featureless = input.parse().map_err(bad)?,
            // a file written before it recorded the input `auto` chose: its width decides
            None => cfg.model_input_width = Some(self.in_dim),
        }
        Ok(())
    }
}

/// A model file with the configuration of the run that saved it.
#[derive(Clone, Debug)]
pub struct SavedModel {
    /// The model file (`.safetensors`).
    pub path: PathBuf,
    /// The `config.toml` read with it.
    pub config_path: PathBuf,
    /// The run's configuration.
    pub config: SavedConfig,
    /// The parameters as the file holds them (names and shapes; matched to a model by name in
    /// [`SavedModel::model_for`]).
    pub params: ParamSet,
}

impl SavedModel {
    /// Opens `path`: a run directory (its `model_best.safetensors` or
    /// `model_final.safetensors`, as `which` says, and its `config.toml`) or a model file
    /// (with the `config.toml` in the same directory; `which` is not used).
    ///
    /// # Errors
    /// [`TrainError::Io`] (not found) naming the path when it does not exist, the run
    /// directory has no such model (a run that has not finished) or the model file has no
    /// `config.toml` next to it; [`TrainError::Config`] for a `config.toml` that is not a
    /// run's; [`TrainError::Model`] for a file that is not a safetensors file of f32 tensors.
    pub fn open(path: &Path, which: Which) -> Result<SavedModel, TrainError> {
        let (model, config_path) = if path.is_dir() {
            let model = path.join(which.file_name());
            if !model.is_file() {
                let how = if path.join("summary.json").is_file() {
                    // a finished run: the file was removed or moved after the run wrote it
                    "the run finished (summary.json is there) but its model file is missing: it was removed or moved after the run".to_string()
                } else if path.join("checkpoint").join("state.json").is_file() {
                    format!(
                        "the run has not finished (continue it with `tma train --resume {}`)",
                        path.display()
                    )
                } else if path.join("config.toml").is_file() {
                    "the run stopped before its first round".to_string()
                } else {
                    "not a tma run directory (no config.toml either)".to_string()
                };
                return Err(not_found(
                    path,
                    format!("no {} there: {how}", which.file_name()),
                ));
            }
            (model, path.join("config.toml"))
        } else if path.is_file() {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            (path.to_path_buf(), dir.join("config.toml"))
        } else {
            return Err(not_found(
                path,
                "no such run directory or model file".into(),
            ));
        };
        if !config_path.is_file() {
            return Err(not_found(
                &model,
                format!(
                    "no config.toml next to it ({} is missing): a model file holds only parameters, and its layers and its split come from the configuration of the run that saved it; copy that run's config.toml next to the model",
                    config_path.display()
                ),
            ));
        }
        let mut config = SavedConfig::read(&config_path)?;
        let (params, meta) = ParamSet::load_safetensors_with(&model)?;
        // the model file says what its model is (files written before it did: config.toml)
        if let Some(file) = FileModel::read(&meta, &model)? {
            file.apply(&mut config.train, &model)?;
        }
        Ok(SavedModel {
            path: model,
            config_path,
            config,
            params,
        })
    }

    /// The model the configuration describes for `prep`'s data, and the file's parameters in
    /// its layout (matched by tensor name).
    ///
    /// # Errors
    /// [`TrainError::Data`] naming the model file and `dataset` (the data's name or path)
    /// when a tensor is missing, extra or of another shape: the model was trained on other
    /// data (feature width, classes) or with another configuration; [`TrainError::Model`]
    /// for a configuration the layers refuse.
    pub fn model_for(
        &self,
        prep: &Prepared,
        dataset: &str,
    ) -> Result<(Model, ParamSet), TrainError> {
        let shape = prep.model_shape();
        let model = build_model(&self.config.train, shape)?;
        let mut params = model.zero_params();
        let what = match shape.head {
            tma_nn::Head::Link => "a link model".to_string(),
            tma_nn::Head::Node { num_classes } => format!("{num_classes} classes"),
        };
        let mismatch = |detail: String| {
            TrainError::Data(format!(
                "model {} (configured by {}) does not fit dataset {dataset} ({} features, {what}): {detail}",
                self.path.display(),
                self.config_path.display(),
                shape.in_dim
            ))
        };
        for spec in params.specs.clone() {
            let Some(have) = self.params.specs.iter().find(|s| s.name == spec.name) else {
                return Err(mismatch(format!(
                    "it has no tensor {} (shape {:?})",
                    spec.name, spec.shape
                )));
            };
            if have.shape != spec.shape {
                return Err(mismatch(format!(
                    "tensor {} has shape {:?} in the file, {:?} for this data",
                    spec.name, have.shape, spec.shape
                )));
            }
            params.data[spec.offset..spec.offset + spec.numel()]
                .copy_from_slice(&self.params.data[have.offset..have.offset + have.numel()]);
        }
        if let Some(extra) = self
            .params
            .specs
            .iter()
            .find(|s| !params.specs.iter().any(|t| t.name == s.name))
        {
            return Err(mismatch(format!(
                "the file has tensor {} (shape {:?}), which this model has not",
                extra.name, extra.shape
            )));
        }
        Ok((model, params))
    }
}

/// The evaluation data of `cfg` on `data`, derived as a run derives it (the same split from
/// the same seed and options; the validation subset of `--eval-max-nodes`), without
/// partitioning or building any trainer's data ([`crate::data::Purpose::Evaluation`]). A
/// partition directory gives its stored coordinator data (its manifest's data options
/// override `cfg`'s). Returns the data, the dataset's name and what loading and preparation
/// changed in the data (one line each, as a run records them).
///
/// # Errors
/// As a run's preparation: [`TrainError::Dataset`] / [`TrainError::Store`] for data that
/// cannot be read, [`TrainError::Data`] for data that does not fit the task,
/// [`TrainError::Config`] for a metric that does not fit it.
pub fn prepare_eval(
    cfg: &mut TrainConfig,
    data: DataSource,
) -> Result<(Prepared, String, Vec<String>), TrainError> {
    let (mut prep, name, mut warnings) = prepare_embed(cfg, data)?;
    warnings.extend(prep.cap_validation(cfg.eval_max_nodes, cfg.eval_max_edges, cfg.seed));
    Ok((prep, name, warnings))
}

/// [`prepare_eval`] without the validation subset (embeddings read no split): the graph and
/// features a run evaluates on (for a link task the training graph, held-out edges removed).
///
/// # Errors
/// As [`prepare_eval`].
pub fn prepare_embed(
    cfg: &mut TrainConfig,
    data: DataSource,
) -> Result<(Prepared, String, Vec<String>), TrainError> {
    let (prep, name, warnings) = match data {
        DataSource::Partitions(dir) => {
            let m = crate::store::read_manifest(&dir)?;
            crate::methods::apply_partitions(&dir, &m.data, cfg)?;
            let mut prep = crate::store::read_coordinator(&dir, &m)?;
            let (metric, note) = prep.eval.check_metric(cfg.metric, cfg.eval_num_neg)?;
            prep.metric = metric;
            let mut warnings = prep.warnings.clone();
            warnings.extend(note);
            (prep, m.dataset.clone(), warnings)
        }
        other => {
            let (ds, notes) = match other {
                DataSource::InMemory(ds) => (*ds, Vec::new()),
                other => crate::run::load_dataset_noted(&other, cfg)?
                    .expect("a dataset or generated graph"),
            };
            let name = ds.name.clone();
            let prep = crate::data::prepare_for(
                ds,
                cfg,
                DataLayout::Whole,
                None,
                crate::data::Purpose::Evaluation,
            )?;
            let mut warnings = notes;
            warnings.extend(prep.warnings.iter().cloned());
            (prep, name, warnings)
        }
    };
    Ok((prep, name, warnings))
}

/// The metrics of one model on both splits.
#[derive(Clone, Debug, Serialize)]
pub struct SavedEval {
    /// The validation split (its seeded subset under `--eval-max-nodes`, as every round of
    /// the run read it).
    pub val: EvalResult,
    /// The whole test split.
    pub test: EvalResult,
}

/// Evaluates `params` of `model` on the validation and test splits of `prep`
/// ([`evaluate_with`] as `opts` says; the run's are `TrainConfig::infer_options`), on the
/// current rayon pool.
pub fn evaluate_both(
    model: &Model,
    params: &ParamSet,
    prep: &Prepared,
    opts: &InferOptions,
) -> SavedEval {
    SavedEval {
        val: evaluate_with(model, params, prep, Split::Val, opts),
        test: evaluate_with(model, params, prep, Split::Test, opts),
    }
}

/// What [`embed_to_npy`] writes for every node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbedOutput {
    /// The encoder's output before the head: a link model's node embeddings (all its layers,
    /// `[N, hidden]`, what its decoder scores), or a node classifier's hidden representation
    /// entering its last layer (the first `num_layers - 1` layers after norm and activation,
    /// `[N, hidden]`).
    #[default]
    Embeddings,
    /// A node classifier's last-layer outputs, `[N, num_classes]` logits.
    Logits,
}

impl std::str::FromStr for EmbedOutput {
    type Err = String;
    fn from_str(s: &str) -> Result<EmbedOutput, String> {
        match s {
            "embeddings" => Ok(EmbedOutput::Embeddings),
            "logits" => Ok(EmbedOutput::Logits),
            other => Err(format!("'{other}': expected embeddings or logits")),
        }
    }
}

/// How many of `model`'s layers give `output` for `task`.
///
/// # Errors
/// [`TrainError::Config`] for logits of a link model (its encoder's output is the embedding)
/// and for the embeddings of a one-layer node classifier (its only layer is the head).
pub fn embed_layers(model: &Model, task: Task, output: EmbedOutput) -> Result<usize, TrainError> {
    let layers = model.cfg.num_layers;
    match (task, output) {
        (Task::Link, EmbedOutput::Embeddings) | (Task::Node, EmbedOutput::Logits) => Ok(layers),
        (Task::Link, EmbedOutput::Logits) => Err(TrainError::Config(
            "--output logits: a link model has no logits; its encoder's output (--output embeddings) is what its decoder scores".into(),
        )),
        (Task::Node, EmbedOutput::Embeddings) if layers < 2 => Err(TrainError::Config(
            "--output embeddings: this node classifier has 1 layer, which is its head (no hidden representation before it); use --output logits".into(),
        )),
        (Task::Node, EmbedOutput::Embeddings) => Ok(layers - 1),
    }
}

/// What [`embed_to_npy`] wrote.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EmbedReport {
    /// Rows: every node of the graph, in id order.
    pub rows: usize,
    /// Columns: the width of the layer written.
    pub dim: usize,
    /// Size of the `.npy` file, bytes (header included).
    pub bytes: u64,
    /// sha256 of the file, lower-case hex.
    pub sha256: String,
}

/// Writes the outputs of the first `layers` layers of `model` ([`embed_layers`]) on every node
/// of `prep.graph` to `out`: a `.npy` file of `<f4` (float32), shape `[N, width]`, row `v` for
/// node `v`. Computed a chunk of consecutive nodes at a time within `opts.memory_budget`
/// ([`crate::evaluation::infer::infer_layers_streamed`]; layers below the last through unnamed mapped
/// scratch files under `opts.scratch_dir`), each chunk streamed to a temporary file next to
/// `out` that is `fsync`ed and renamed over it at the end ([`tma_graph::durable`]): a reader
/// never sees a partial file, and a failure removes the temporary file.
///
/// # Errors
/// [`TrainError::Io`] naming the file (the output, its temporary file or a scratch file) and
/// the OS error (e.g. a full disk).
pub fn embed_to_npy(
    model: &Model,
    params: &ParamSet,
    prep: &Prepared,
    layers: usize,
    out: &Path,
    opts: &InferOptions,
) -> Result<EmbedReport, TrainError> {
    let io_err = |e: tma_graph::GraphError, fallback: &Path| match e {
        tma_graph::GraphError::Io { path, source } => TrainError::Io { path, source },
        other => TrainError::Io {
            path: fallback.to_path_buf(),
            source: std::io::Error::other(other.to_string()),
        },
    };
    let n = prep.graph.num_nodes();
    let dim = layer_width(model, layers);
    let tmp = tma_graph::durable::temp_path(out).map_err(|e| io_err(e, out))?;
    // an error of the inference (a scratch file) is kept whole, not as the writer's io error
    let mut inner: Option<tma_graph::GraphError> = None;
    let written = crate::data::spill::write_npy(&tmp, "<f4", &[n, dim], |w| {
        let mut rows = 0usize;
        let r = crate::evaluation::infer::infer_layers_streamed(
            model,
            params,
            &prep.graph,
            &prep.degrees,
            &prep.features,
            layers,
            opts,
            &mut |chunk: &[f32]| {
                rows += chunk.len() / dim.max(1);
                crate::data::spill::write_le(w, chunk).map_err(|source| tma_graph::GraphError::Io {
                    path: tmp.clone(),
                    source,
                })
            },
        );
        match r {
            Ok(()) if rows == n || dim == 0 => Ok(()),
            Ok(()) => Err(std::io::Error::other(format!(
                "wrote {rows} rows of {n} (internal error)"
            ))),
            Err(e) => {
                let msg = e.to_string();
                inner = Some(e);
                Err(std::io::Error::other(msg))
            }
        }
    });
    let written = match written {
        Ok(w) => w,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(match inner {
                Some(e) => io_err(e, &tmp),
                None => io_err(e, &tmp),
            });
        }
    };
    if let Err(e) = tma_graph::durable::rename(&tmp, out) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_err(e, out));
    }
    Ok(EmbedReport {
        rows: n,
        dim,
        bytes: written.bytes,
        sha256: written.sha256,
    })
}

/// Output width of `model`'s layer `layers - 1`: the hidden width below the last layer, the
/// model's output width at it.
fn layer_width(model: &Model, layers: usize) -> usize {
    if layers == model.cfg.num_layers {
        model.out_dim()
    } else {
        model.cfg.hidden
    }
}

/// A rayon pool of `threads` threads (0: every core the process may use), for evaluation and
/// embedding outside a run.
///
/// # Errors
/// [`TrainError::Config`] when the threads cannot be started.
pub fn thread_pool(threads: usize) -> Result<rayon::ThreadPool, TrainError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("tma-eval-{i}"))
        .build()
        .map_err(|e| TrainError::Config(format!("--threads {threads}: {e}")))
}
