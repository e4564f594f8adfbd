//! Run configuration: every knob of a training run, with the reference release's defaults.

pub mod encoder_options;

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;
use tma_nn::{EncoderKind, MatmulPrecision};

/// The learning task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Task {
    /// Link prediction (the release's only task): Hadamard-product MLP decoder, BCE with logits,
    /// MRR against fixed negatives.
    Link,
    /// Node classification: cross-entropy (or per-label BCE for multi-label), accuracy / micro-F1.
    Node,
}

/// A training method: one entry of the method registry (`crate::methods`), which gives its
/// name (`as_str`, [`fmt::Display`], parsing, serde: `random-tma`, `super-tma`, `psgd-pa`,
/// `llcg`, `ggs`, `centralized`), its constants (`Method::RandomTma`, ...), every registered
/// method (`Method::ALL`) and its implementation (`crate::methods::training_method`), whose
/// declaration ([`crate::engines::method::MethodInfo`]) and layout say what it supports.
/// The default is the registry's first method (random-tma).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Method(pub(crate) u16);

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Task::Link => "link",
            Task::Node => "node",
        })
    }
}

impl FromStr for Task {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "link" => Ok(Task::Link),
            "node" => Ok(Task::Node),
            _ => Err(format!("unknown task '{s}' (expected link or node)")),
        }
    }
}

/// How evaluation computes the model's outputs on the nodes it reads ([`crate::evaluation::infer`]);
/// `--eval-inference`. Every choice is exact; `--eval-fanouts` selects the sampled estimate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum EvalInference {
    /// Restricted to the nodes' L-hop neighbourhoods in chunks, or the full layer-wise pass
    /// where the neighbourhoods cover most of the graph (by estimated cost).
    #[default]
    Auto,
    /// Always the full layer-wise pass over every node.
    Full,
    /// Always restricted to the L-hop neighbourhoods, in chunks within `eval_memory`.
    Restricted,
}

impl EvalInference {
    /// The name used on the command line and in `config.toml`.
    pub fn as_str(&self) -> &'static str {
        match self {
            EvalInference::Auto => "auto",
            EvalInference::Full => "full",
            EvalInference::Restricted => "restricted",
        }
    }
}

impl FromStr for EvalInference {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(EvalInference::Auto),
            "full" => Ok(EvalInference::Full),
            "restricted" => Ok(EvalInference::Restricted),
            _ => Err(format!(
                "unknown eval inference '{s}' (expected auto, full or restricted)"
            )),
        }
    }
}

/// How trainers' parameters are weighted in the average.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum AverageWeight {
    /// Plain arithmetic mean (the paper's operator).
    #[default]
    Uniform,
    /// Weight trainer `i` by its number of nodes.
    Nodes,
    /// Weight trainer `i` by its number of training edges (arcs of its subgraph).
    Edges,
}

impl FromStr for AverageWeight {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(AverageWeight::Uniform),
            "nodes" => Ok(AverageWeight::Nodes),
            "edges" => Ok(AverageWeight::Edges),
            _ => Err(format!(
                "unknown average weight '{s}' (expected uniform, nodes or edges)"
            )),
        }
    }
}

/// Input columns of a graph without node features (`--featureless`, config key
/// `featureless`; docs/decisions/0031-featureless-inputs-by-supervision.md). Both start with
/// column 0, the standardized ln(1 + degree) of `tma_graph::structural_features`; then
/// `degree` has a constant column and `degree-random` the 31 random columns, node identities a
/// model can learn labels and edges by (decision 0032).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Featureless {
    /// `degree-random` where each trainer has at least [`FEATURELESS_RANDOM_MIN_NODES`]
    /// training nodes (node task) or [`FEATURELESS_RANDOM_MIN_EDGES`] training edges (link
    /// task), as its part holds them (the mean over the kept parts of a partitioned layout; a
    /// random partition into `P` parts keeps about 1/P^2 of the edges in each: decision 0034;
    /// else all of them over the trainers that share them), else `degree`: with fewer, the
    /// identities are learned by heart and the validation metric falls while the training loss
    /// does (measured in decision 0031; the node threshold in decision 0033). For the link
    /// task also `degree` where the degree product ranks the training graph's edges at least
    /// [`FEATURELESS_DEGREE_TO_OVERLAP`] as well as common neighbours do (decision 0035). A
    /// run's model files record the input it took, which `tma eval` gives the model back.
    #[default]
    Auto,
    /// The degree column and a constant column of ones (2 input columns; the constant keeps
    /// the degree's scale through the first LayerNorm: decision 0032).
    Degree,
    /// The degree column and 31 fixed `N(0, 1/32)` columns (32 input columns; decision 0003).
    DegreeRandom,
}

/// [`Featureless::Auto`]'s threshold for link prediction: training edges per trainer from
/// which the random columns are kept (decision 0031).
pub const FEATURELESS_RANDOM_MIN_EDGES: usize = 4096;

/// [`Featureless::Auto`]'s rule for link prediction with enough training edges: the degree
/// input where preferential attachment's MRR over sampled training edges is at least this
/// share of common neighbours' (`tma_graph::link_heuristics`; decision 0035).
pub const FEATURELESS_DEGREE_TO_OVERLAP: f64 = 0.75;

/// [`Featureless::Auto`]'s threshold for node classification: training nodes per trainer from
/// which the random columns are kept (decision 0033).
pub const FEATURELESS_RANDOM_MIN_NODES: usize = 256;

impl Featureless {
    /// The name as the option takes it.
    pub fn name(self) -> &'static str {
        match self {
            Featureless::Auto => "auto",
            Featureless::Degree => "degree",
            Featureless::DegreeRandom => "degree-random",
        }
    }

    /// The value of a configuration written before the option existed (a resumed run's
    /// `config.toml`): `degree-random`, the inputs that run trained with.
    fn before_auto() -> Featureless {
        Featureless::DegreeRandom
    }
}

impl FromStr for Featureless {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Featureless::Auto),
            "degree" => Ok(Featureless::Degree),
            "degree-random" => Ok(Featureless::DegreeRandom),
            _ => Err(format!(
                "unknown featureless input '{s}' (expected auto, degree or degree-random)"
            )),
        }
    }
}

/// The validation metric that selects the best model (`--metric`, config key `metric`).
///
/// Names as the field writes them (OGB, PyG, scikit-learn): `accuracy`, `macro_f1`, `roc_auc`,
/// `micro_f1`, `mrr`, `hits@K`. Which fit which task is [`Metric::fits`]; a metric that does not
/// fit is refused before training.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Metric {
    /// The task's usual metric: `accuracy` for multi-class node classification, `roc_auc` for
    /// binary (2-class) node classification, `micro_f1` for multi-label, `mrr` for link
    /// prediction.
    #[default]
    Auto,
    /// Node classification (classes): fraction of nodes whose arg-max class is right.
    Accuracy,
    /// Node classification: macro-averaged F1 (classes: over arg-max predictions; multi-label:
    /// each node's top-k labels).
    MacroF1,
    /// Binary node classification: area under the ROC curve of the class-1 score.
    RocAuc,
    /// Multi-label node classification: micro-averaged F1 of each node's top-k labels.
    MicroF1,
    /// Link prediction: mean reciprocal rank against the fixed negatives.
    Mrr,
    /// Link prediction: fraction of positives ranked within the top K against their negatives
    /// (OGB's Hits@K; ogbl-collab reports Hits@50).
    HitsAt(usize),
}

/// The kind of prediction a run's data asks for, which decides the metrics that fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// Link prediction.
    Link,
    /// Node classification with `n` classes (`n == 2`: binary).
    Classes(usize),
    /// Multi-label node classification.
    MultiLabel,
}

impl Metric {
    /// The metric names `--metric` accepts (`hits@K` for any K >= 1).
    pub const NAMES: &'static str = "auto, accuracy, macro_f1, roc_auc, micro_f1, mrr, hits@K";

    /// The metric `auto` stands for on `kind`; any other metric is itself.
    pub fn resolve(self, kind: TargetKind) -> Metric {
        match (self, kind) {
            (Metric::Auto, TargetKind::Link) => Metric::Mrr,
            (Metric::Auto, TargetKind::Classes(2)) => Metric::RocAuc,
            (Metric::Auto, TargetKind::Classes(_)) => Metric::Accuracy,
            (Metric::Auto, TargetKind::MultiLabel) => Metric::MicroF1,
            (m, _) => m,
        }
    }

    /// Whether the metric can be computed on `kind` (`Err` says why not, naming the metrics
    /// that fit). `eval_num_neg`: negatives per positive of link evaluation (Hits@K with K
    /// above it counts every positive, since no rank exceeds `eval_num_neg + 1`).
    pub fn fits(self, kind: TargetKind, eval_num_neg: usize) -> Result<(), String> {
        let fitting = match kind {
            TargetKind::Link => "mrr, hits@K",
            TargetKind::Classes(2) => "accuracy, macro_f1, roc_auc",
            TargetKind::Classes(_) => "accuracy, macro_f1",
            TargetKind::MultiLabel => "micro_f1, macro_f1",
        };
        let what = match kind {
            TargetKind::Link => "link prediction".to_string(),
            TargetKind::Classes(2) => "binary node classification (2 classes)".to_string(),
            TargetKind::Classes(c) => format!("node classification with {c} classes"),
            TargetKind::MultiLabel => "multi-label node classification".to_string(),
        };
        let ok = matches!(
            (self.resolve(kind), kind),
            (Metric::Mrr | Metric::HitsAt(_), TargetKind::Link)
                | (Metric::Accuracy | Metric::MacroF1, TargetKind::Classes(_))
                | (Metric::RocAuc, TargetKind::Classes(2))
                | (Metric::MicroF1 | Metric::MacroF1, TargetKind::MultiLabel)
        );
        if !ok {
            let why = if self == Metric::RocAuc && matches!(kind, TargetKind::Classes(_)) {
                " (ROC-AUC is defined for 2 classes)"
            } else {
                ""
            };
            return Err(format!(
                "metric {self} does not fit {what}{why}; use one of: auto, {fitting}"
            ));
        }
        if let Metric::HitsAt(k) = self {
            if k > eval_num_neg {
                return Err(format!(
                    "metric {self}: every positive ranks within {} (--eval-num-neg {eval_num_neg} negatives each), so hits@{k} is always 1; use K <= {eval_num_neg}",
                    eval_num_neg + 1
                ));
            }
        }
        Ok(())
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Metric::Auto => f.write_str("auto"),
            Metric::Accuracy => f.write_str("accuracy"),
            Metric::MacroF1 => f.write_str("macro_f1"),
            Metric::RocAuc => f.write_str("roc_auc"),
            Metric::MicroF1 => f.write_str("micro_f1"),
            Metric::Mrr => f.write_str("mrr"),
            Metric::HitsAt(k) => write!(f, "hits@{k}"),
        }
    }
}

impl FromStr for Metric {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let m = match s {
            "auto" => Metric::Auto,
            "accuracy" | "acc" => Metric::Accuracy,
            "macro_f1" | "macro-f1" => Metric::MacroF1,
            "roc_auc" | "roc-auc" | "rocauc" | "auc" => Metric::RocAuc,
            "micro_f1" | "micro-f1" => Metric::MicroF1,
            "mrr" => Metric::Mrr,
            _ => {
                let k = s
                    .strip_prefix("hits@")
                    .or_else(|| s.strip_prefix("hits-at-"))
                    .or_else(|| s.strip_prefix("hits_at_"));
                match k.map(|k| k.parse::<usize>()) {
                    Some(Ok(k)) if k >= 1 => Metric::HitsAt(k),
                    Some(_) => {
                        return Err(format!(
                            "metric '{s}': K in hits@K must be a whole number >= 1 (e.g. hits@50)"
                        ))
                    }
                    None => {
                        return Err(format!(
                            "unknown metric '{s}' (expected one of: {})",
                            Metric::NAMES
                        ))
                    }
                }
            }
        };
        Ok(m)
    }
}

impl Serialize for Metric {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Metric {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Everything one training run needs (libraries take this struct; only the CLI reads files or
/// the environment).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TrainConfig {
    /// Link prediction or node classification.
    pub task: Task,
    /// The training method.
    pub method: Method,
    /// Number of trainers M (ignored by `centralized`, which uses 1).
    pub num_trainers: usize,
    /// Parts created but given to no trainer (failure experiment): partition for M + d.
    pub drop_parts: usize,
    /// K, the number of super-nodes for SuperTMA.
    pub super_nodes: usize,
    /// The clustering behind SuperTMA's super-nodes and the PSGD-PA / LLCG parts: METIS,
    /// label propagation (`lpa`, for graphs past METIS' reach) or `auto` (by the arc count).
    #[serde(default)]
    pub super_clustering: tma_partition::Clustering,
    /// Wall-clock span between model averaging rounds.
    #[serde(with = "humantime_serde_compat")]
    pub sync_every: Duration,
    /// Averaging ramp: the first `sync_every` span is cut into `sync_ramp` equal spans, so the
    /// trainers are averaged every `sync_every / sync_ramp` while the model changes fastest,
    /// when their drift apart costs the average most, then every `sync_every`
    /// ([`crate::clock::ramp_slots`]; post-local SGD's warm-up; docs/decisions/0015-averaging-ramp.md).
    /// Default 16 (10 s spans: rounds every 0.625 s up to 10 s, then 20, 30 s, ...); 0 or 1 =
    /// every span `sync_every` (the paper's schedule); at most
    /// [`crate::clock::MAX_SYNC_RAMP`]. The step-count schedule (`sync_every_steps`) and ggs
    /// (no model averaging) have no ramp ([`TrainConfig::effective_sync_ramp`]).
    /// (Absent from a config file written before the ramp existed, e.g. a resumed run's
    /// `config.toml`: 0, the schedule that run trained with.)
    #[serde(default)]
    pub sync_ramp: u32,
    /// Validation checks between averaging rounds: every `val_check_interval` of wall-clock
    /// time that is not a round, the coordinator takes a copy of each trainer's parameters
    /// after its current step, validates their mean (the model a round formed then would
    /// give) and records it in `rounds.jsonl` as a check (`"check": true`); nothing is sent
    /// back, so training is unchanged. A check may be the best model. Zero (the default) = no
    /// checks: validation at rounds only. Must be shorter than `sync_every`; model-averaging
    /// methods (not `ggs`, `llcg`), the wall-clock schedule and the in-process engine only.
    #[serde(default, with = "humantime_serde_compat")]
    pub val_check_interval: Duration,
    /// The plateau hold (docs/decisions/0037-plateau-hold.md): after this many validations in
    /// a row more than 5% below the best, the coordinator sends the trainers the best model
    /// back and halves the share of each later round's update it applies (the server step;
    /// [`crate::engines::plateau`]). 0 = off: the paper's plain mean throughout. Wall-clock
    /// schedule of the model-averaging methods only.
    #[serde(default = "default_plateau_patience")]
    pub plateau_patience: u32,
    /// Wall-clock training budget.
    #[serde(with = "humantime_serde_compat")]
    pub time_limit: Duration,
    /// Averaging weights (uniform = the paper's plain mean).
    pub average_weight: AverageWeight,
    /// Step-count schedule: if > 0, round `k` is formed when every live trainer has made
    /// `k * sync_every_steps` optimizer steps (instead of at `k * sync_every` of wall-clock
    /// time); the run still ends at `time_limit`. 0 = the wall-clock schedule (the paper's).
    #[serde(default)]
    pub sync_every_steps: u64,
    /// Per-round deadline: after calling a round the coordinator waits at most this long for
    /// the trainers it expects (those in step with the previous round); a trainer that has not
    /// answered by then misses the round, which forms from those that arrived. A trainer that
    /// missed a round is not waited for again: its next answer is answered with the current
    /// averaged model and it rejoins at the following round (see [`crate::engines::cluster::Roster`]).
    /// Must exceed one optimizer step (with `sync_every_steps`: that many steps).
    #[serde(default = "default_round_timeout", with = "humantime_serde_compat")]
    pub round_timeout: Duration,
    /// LLCG: global correction steps (mini-batches on the full graph) after each averaging.
    #[serde(default = "default_llcg_steps")]
    pub llcg_steps: usize,
    /// Encoder (`sage`, `gcn`, ... in config files: [`EncoderKind`]'s names).
    #[serde(with = "encoder_name")]
    pub model: EncoderKind,
    /// The encoder's own options as given (GAT's `heads`, ...: declared by each encoder,
    /// `tma_nn::EncoderKind::options`), top-level keys in config files (`heads = 4`);
    /// defaults where not given ([`TrainConfig::model_options`] resolves them).
    #[serde(flatten)]
    pub encoder_options: crate::config::encoder_options::EncoderOptionValues,
    /// Hidden width (and embedding width for link prediction).
    pub hidden: usize,
    /// Encoder layers (one fanout each).
    pub num_layers: usize,
    #[serde(serialize_with = "short_f32")]
    /// Dropout probability after each hidden layer, in `[0, 1)` (inverted dropout: kept
    /// activations scaled by `1 / (1 - p)` in training, none at evaluation). 0 here (the
    /// reference release); [`TrainConfig::defaults_for`] sets 0.5 for node classification.
    pub dropout: f32,
    /// LayerNorm between layers (the reference release's stack); false = conv → PReLU → dropout → conv.
    pub layer_norm: bool,
    /// Precision of the model's dense matrix products (the names of PyTorch's
    /// `torch.set_float32_matmul_precision`): `highest` (f32, the default) or `medium` (bf16
    /// operands, f32 sums, on Intel AMX or AVX512_BF16: the link decoder and the encoder's linear
    /// layers on dense inputs; `highest` where the CPU has neither (or the kernel refuses AMX),
    /// said as a warning;
    /// products over fewer than 512 rows or under 2^22 multiply-adds stay f32). Parameters, optimizer,
    /// aggregation, LayerNorm and losses stay f32.
    #[serde(default, with = "precision_name")]
    pub matmul_precision: MatmulPrecision,
    /// Neighbour fanouts, `fanouts[0]` nearest the seeds; 0 means all neighbours.
    pub fanouts: Vec<usize>,
    /// Mini-batch size: positive edges (link) or seed nodes (node).
    pub batch_size: usize,
    #[serde(serialize_with = "short_f32")]
    /// Adam learning rate (constant).
    pub lr: f32,
    /// L2 penalty added to the gradient before Adam (PyTorch `Adam(weight_decay=...)`); 0 = off.
    #[serde(serialize_with = "short_f32")]
    pub weight_decay: f32,
    /// Gradient clipping max norm, applied from epoch `clip_from_epoch` (1-based) on.
    #[serde(serialize_with = "short_f32")]
    pub clip_norm: f32,
    /// First epoch (1-based) with gradient clipping.
    pub clip_from_epoch: usize,
    /// Linear learning-rate warm-up: optimizer step `t` (1-based) uses
    /// `lr * min(1, t / warmup_steps)`; 0 = constant `lr` from the first step (the reference
    /// release; [`TrainConfig::defaults_for`] sets 3 for link prediction). Counted per trainer
    /// (GGS: per coordinator step). See [`warmup_lr`].
    #[serde(default)]
    pub warmup_steps: u64,
    /// Uniform negatives per positive edge in training.
    pub num_neg: usize,
    /// Link prediction: whether each step's positive edges, both directions, are left out of
    /// the neighbourhoods it samples (DGL's `exclude="reverse_id"`), so the model never
    /// aggregates the edge it is asked to predict, as it never can for a held-out edge.
    /// `None` (the default): automatic, on exactly when the features are generated structural
    /// ones ([`TrainConfig::excludes_targets`]; docs/decisions/0028-exclude-target-edges.md).
    #[serde(default)]
    pub exclude_targets: Option<bool>,
    /// Fixed negatives per positive edge for MRR evaluation (OGB: 1000).
    pub eval_num_neg: usize,
    /// Validate every `eval_every`-th round's model (and always the last round's); the rounds
    /// in between are recorded without a validation (`val.value` null in `rounds.jsonl`), so
    /// validation at rounds takes 1/`eval_every` of the CPU time it takes at 1 (every round).
    /// Checks between rounds (`val_check_interval`) are always validated.
    #[serde(default = "default_eval_every")]
    pub eval_every: u64,
    /// How evaluation computes the outputs it needs (exact: auto, full or restricted).
    #[serde(default)]
    pub eval_inference: EvalInference,
    /// Bytes one chunk of restricted (or sampled) evaluation may take: its blocks and its
    /// largest layer's activations ([`crate::evaluation::infer::chunk_bytes`]); `auto` runs the full pass
    /// only if it fits too.
    #[serde(default = "default_eval_memory")]
    pub eval_memory: u64,
    /// Sampled evaluation: per-layer fanouts (`eval_fanouts[0]` nearest the evaluated nodes,
    /// 0 = all neighbours), an estimate instead of exact inference; empty = exact.
    #[serde(default)]
    pub eval_fanouts: Vec<usize>,
    /// At most this many validation nodes (node task) or validation positives (link task, each
    /// with its negatives) are evaluated every round: a fixed, seeded subset
    /// ([`crate::data::Prepared::cap_validation`]) when the split is larger, as OGB-scale runs
    /// validate on a subset. The final test evaluation always uses the whole test split.
    #[serde(default = "default_eval_max_nodes")]
    pub eval_max_nodes: usize,
    /// Cap on validation / test positive edges (MRR costs `eval_num_neg` decoder calls each).
    pub eval_max_edges: usize,
    /// Fractions of edges held out for validation and test (link task).
    pub val_frac: f64,
    /// Fraction of edges held out for test (link task).
    pub test_frac: f64,
    /// Scale every feature row to sum 1 (PyG `NormalizeFeatures`, standard for Planetoid).
    pub normalize_features: bool,
    /// Inputs of a graph without node features ([`Featureless`]; `auto` by default).
    /// (Absent from a config file written before the option existed, e.g. a resumed run's
    /// `config.toml`: `degree-random`, the inputs that run trained with.)
    #[serde(default = "Featureless::before_auto")]
    pub featureless: Featureless,
    /// The input width of the model a run continues or evaluates (a checkpoint's or a model
    /// file's), not an option: with `auto` on a featureless graph it decides the input (2 or
    /// fewer columns: `degree`), for files written before they recorded the input `auto`
    /// chose (decisions 0034, 0035: the rule may choose otherwise now). Not serialized.
    #[serde(skip)]
    pub model_input_width: Option<usize>,
    /// Which of a dataset's fixed mask splits to use (node task).
    pub split_index: usize,
    /// The validation metric that selects the best model (`auto`: the task's usual one).
    #[serde(default)]
    pub metric: Metric,
    /// Accept a dataset's fixed split whose train/val/test lists share nodes (otherwise an
    /// error naming both files).
    #[serde(default)]
    pub allow_split_overlap: bool,
    /// Seed of every random stream of the run (split, partition, init, sampling).
    pub seed: u64,
    /// Worker threads in all (0 = all cores); trainers get equal shares.
    pub threads: usize,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            task: Task::Node,
            method: Method::default(),
            num_trainers: 4,
            drop_parts: 0,
            super_nodes: 1000,
            super_clustering: tma_partition::Clustering::Auto,
            sync_every: Duration::from_secs(5),
            sync_ramp: default_sync_ramp(),
            time_limit: Duration::from_secs(30),
            average_weight: AverageWeight::Uniform,
            sync_every_steps: 0,
            val_check_interval: Duration::ZERO,
            plateau_patience: default_plateau_patience(),
            round_timeout: default_round_timeout(),
            llcg_steps: default_llcg_steps(),
            model: EncoderKind::Sage,
            encoder_options: Default::default(),
            hidden: 256,
            num_layers: 2,
            dropout: 0.0,
            layer_norm: true,
            matmul_precision: MatmulPrecision::Highest,
            fanouts: vec![10, 25],
            batch_size: 1024,
            lr: 1e-3,
            weight_decay: 0.0,
            clip_norm: 1.0,
            clip_from_epoch: 2,
            warmup_steps: 0,
            num_neg: 1,
            exclude_targets: None,
            eval_num_neg: 1000,
            eval_max_edges: 500,
            eval_every: default_eval_every(),
            eval_inference: EvalInference::Auto,
            eval_memory: default_eval_memory(),
            eval_fanouts: Vec::new(),
            eval_max_nodes: default_eval_max_nodes(),
            val_frac: 0.05,
            test_frac: 0.05,
            normalize_features: false,
            featureless: Featureless::Auto,
            model_input_width: None,
            split_index: 0,
            metric: Metric::Auto,
            allow_split_overlap: false,
            seed: 0,
            threads: 0,
        }
    }
}

fn default_eval_every() -> u64 {
    1
}

/// The learning rate of optimizer step `step` (1-based) under a linear warm-up of
/// `warmup_steps` steps: `lr * min(1, step / warmup_steps)`; `lr` when `warmup_steps` is 0.
///
/// Adam's first update moves every parameter by `lr` in the sign of its gradient, all at once;
/// on link prediction that first step overshoots (the training loss jumps from chance level to
/// ~2 at step 2), which a short warm-up avoids (docs/decisions/0006-learning-per-step.md).
pub fn warmup_lr(lr: f32, warmup_steps: u64, step: u64) -> f32 {
    if warmup_steps == 0 || step >= warmup_steps {
        lr
    } else {
        lr * step.max(1) as f32 / warmup_steps as f32
    }
}

/// Default of `--eval-max-nodes` (`TrainConfig::eval_max_nodes`): no shared dataset (all below
/// 1M arcs) has that many validation nodes or positives, so it bounds only big graphs.
pub const DEFAULT_EVAL_MAX_NODES: usize = 100_000;

fn default_eval_max_nodes() -> usize {
    DEFAULT_EVAL_MAX_NODES
}

/// Default `eval_memory` (the evaluation's memory budget, `InferOptions::memory_budget` of
/// `crate::evaluation::infer`): 1 GiB.
pub const DEFAULT_EVAL_MEMORY: u64 = 1 << 30;

fn default_eval_memory() -> u64 {
    DEFAULT_EVAL_MEMORY
}

/// Deadlines a trainer may miss, without a fresh contribution in between, before rounds stop
/// waiting for it (the roster of `crate::engines::cluster`; said in the summary's warnings).
pub const LATE_LIMIT: u32 = 2;

/// [`TrainConfig::plateau_patience`]'s default.
fn default_plateau_patience() -> u32 {
    3
}

fn default_round_timeout() -> Duration {
    Duration::from_secs(10)
}

impl TrainConfig {
    /// Worker threads of the run: `threads`, or every core when it is 0.
    pub fn worker_threads(&self) -> usize {
        if self.threads > 0 {
            self.threads
        } else {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        }
    }
}

/// The averaging ramp's default (docs/decisions/0015-averaging-ramp.md).
pub const DEFAULT_SYNC_RAMP: u32 = 16;

fn default_sync_ramp() -> u32 {
    DEFAULT_SYNC_RAMP
}

fn default_llcg_steps() -> usize {
    2
}

impl TrainConfig {
    /// The defaults for `task`: [`TrainConfig::default`] (the reference release's settings)
    /// with the task set and, for link prediction, mini-batches of 8192 edges (the release's
    /// 65536 is a GPU batch; on CPU cores a step of that size takes seconds, delaying rounds)
    /// and a learning-rate warm-up of 3 steps; for node classification, dropout 0.5
    /// (docs/decisions/0016-node-dropout.md). The CLI's and the Python package's defaults.
    pub fn defaults_for(task: Task) -> TrainConfig {
        TrainConfig {
            task,
            batch_size: match task {
                Task::Link => 8192,
                Task::Node => TrainConfig::default().batch_size,
            },
            // link prediction: 3 warm-up steps (docs/decisions/0006-learning-per-step.md: no
            // loss jump after the first step, more learned per step); node: not measured
            warmup_steps: match task {
                Task::Link => 3,
                Task::Node => 0,
            },
            // node classification: dropout 0.5, the field's setting for GraphSAGE / GCN node
            // classification (the reference release, link prediction only, has none);
            // +0.002-0.003 best and plateau validation accuracy on facebook and amazon_photo,
            // centralized and random-tma (docs/decisions/0016-node-dropout.md)
            dropout: match task {
                Task::Link => 0.0,
                Task::Node => 0.5,
            },
            ..TrainConfig::default()
        }
    }

    /// Whether a link-prediction step leaves its positives out of its sampled neighbourhoods
    /// ([`TrainConfig::exclude_targets`]): as given, or, when not given, exactly when the
    /// features are generated structural ones (`structural`). Measured: on featureless graphs
    /// the structural features' random columns let the model detect the aggregated target edge,
    /// and validation MRR fell while the loss fell (musae_github 0.117 -> 0.054 in 60 s;
    /// excluded: 0.155 at 30 s, no fall); on graphs with features excluding cost 1-4 MRR
    /// points (docs/decisions/0028-exclude-target-edges.md). Always false for node
    /// classification.
    pub fn excludes_targets(&self, structural: bool) -> bool {
        self.task == Task::Link && self.exclude_targets.unwrap_or(structural)
    }

    /// The option keys: the field names as config files spell them (`sync_every`,
    /// `num_trainers`, ...), sorted; `crate::options::aliases` are accepted too.
    pub fn option_names() -> Vec<String> {
        let v = serde_json::to_value(TrainConfig::default()).expect("config serializes");
        let mut keys: Vec<String> = v.as_object().expect("a struct").keys().cloned().collect();
        // the encoders' own options (GAT's `heads`, ...), declared in the registry
        keys.extend(
            crate::config::encoder_options::keys()
                .into_iter()
                .map(String::from),
        );
        keys.sort();
        keys.dedup();
        keys
    }

    /// Under MPI, how long one side waits without any message from the other before it
    /// considers it lost: `4 * (sync_every + round_timeout)`. A trainer rank that hears nothing
    /// from the coordinator for this long exits (the coordinator is gone); the coordinator stops
    /// sending to a trainer rank it has not heard from for this long and does not wait for it
    /// at the end of the run (it is taken back if it answers again).
    pub fn peer_timeout(&self) -> Duration {
        (self.sync_every + self.round_timeout) * 4
    }

    /// The options the encoder `model` is built with: its declared defaults, replaced by the
    /// values given for its own options (the `encoder_options` field), checked by the encoder
    /// against `hidden` and `num_layers`.
    ///
    /// # Errors
    /// The encoder's message for a value that cannot work (e.g. GAT heads that do not divide
    /// `hidden`).
    pub fn model_options(&self) -> Result<tma_nn::EncoderOptions, String> {
        self.encoder_options.resolve(
            self.model,
            &tma_nn::EncoderShape {
                hidden: self.hidden,
                num_layers: self.num_layers,
            },
        )
    }
}

/// Writes an f32 as the shortest decimal that reads back to it (`0.001`, not the f64 widening
/// `0.0010000000474974513`), so config files stay as the user wrote them.
fn short_f32<S: serde::Serializer>(x: &f32, s: S) -> Result<S::Ok, S::Error> {
    let shortest: f64 = x.to_string().parse().unwrap_or(*x as f64);
    s.serialize_f64(shortest)
}

/// Encoders in config files by name (`model = "sage"`).
mod encoder_name {
    use serde::{Deserialize, Deserializer, Serializer};
    use tma_nn::EncoderKind;

    pub fn serialize<S: Serializer>(e: &EncoderKind, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&e.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<EncoderKind, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

mod precision_name {
    use serde::{Deserialize, Deserializer, Serializer};
    use tma_nn::MatmulPrecision;

    pub fn serialize<S: Serializer>(p: &MatmulPrecision, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(p.as_str())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<MatmulPrecision, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Durations in config files are human-readable ("30s", "2min", "1h 30m").
mod humantime_serde_compat {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*d).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_roundtrip_json() {
        let c = TrainConfig::default();
        c.validate().unwrap();
        let s = serde_json::to_string(&c).unwrap();
        assert!(s.contains("\"sync_every\":\"5s\""), "{s}");
        assert!(s.contains("\"lr\":0.001,"), "{s}");
        let back: TrainConfig = serde_json::from_str(&s).unwrap();
        assert_eq!(back.sync_every, Duration::from_secs(5));
        assert_eq!(back.method, Method::RandomTma);
    }

    #[test]
    fn exclude_targets_follows_the_features_unless_given() {
        let link = TrainConfig::defaults_for(Task::Link);
        assert_eq!(link.exclude_targets, None);
        // not given: on exactly for structural features
        assert!(link.excludes_targets(true));
        assert!(!link.excludes_targets(false));
        // given: as given, whatever the features
        let on = TrainConfig {
            exclude_targets: Some(true),
            ..link.clone()
        };
        let off = TrainConfig {
            exclude_targets: Some(false),
            ..link.clone()
        };
        assert!(on.excludes_targets(false) && on.excludes_targets(true));
        assert!(!off.excludes_targets(false) && !off.excludes_targets(true));
        // node classification has no target edges
        let node = TrainConfig {
            exclude_targets: Some(true),
            ..TrainConfig::defaults_for(Task::Node)
        };
        assert!(!node.excludes_targets(true));
        // a config.toml written before the option existed reads as not given
        let mut v = serde_json::to_value(&link).unwrap();
        assert_eq!(v["exclude_targets"], serde_json::Value::Null, "not given");
        v.as_object_mut().unwrap().remove("exclude_targets");
        let old: TrainConfig = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(old.exclude_targets, None);
        v["exclude_targets"] = serde_json::json!(false);
        let back: TrainConfig = serde_json::from_value(v).unwrap();
        assert_eq!(back.exclude_targets, Some(false));
    }

    #[test]
    fn round_timeout_defaults_validates_and_reads_old_configs() {
        let c = TrainConfig::default();
        assert_eq!(c.round_timeout, Duration::from_secs(10));
        // 4 * (5 s + 10 s)
        assert_eq!(c.peer_timeout(), Duration::from_secs(60));
        let zero = TrainConfig {
            round_timeout: Duration::ZERO,
            ..Default::default()
        };
        assert_eq!(zero.validate().unwrap_err(), "round-timeout must be > 0");
        // a configuration written before the option existed (a run directory to resume)
        let mut v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["round_timeout"], "10s");
        v.as_object_mut().unwrap().remove("round_timeout");
        v["sync_every"] = "1s".into();
        let old: TrainConfig = serde_json::from_value(v).unwrap();
        assert_eq!(old.round_timeout, Duration::from_secs(10));
        assert_eq!(old.peer_timeout(), Duration::from_secs(44));
    }

    #[test]
    fn warmup_lr_is_linear_then_constant() {
        assert_eq!(warmup_lr(1e-3, 0, 1), 1e-3);
        assert_eq!(warmup_lr(1e-3, 0, 500), 1e-3);
        assert_eq!(warmup_lr(1.0, 4, 1), 0.25);
        assert_eq!(warmup_lr(1.0, 4, 2), 0.5);
        assert_eq!(warmup_lr(1.0, 4, 3), 0.75);
        assert_eq!(warmup_lr(1.0, 4, 4), 1.0);
        assert_eq!(warmup_lr(1.0, 4, 9), 1.0);
        assert_eq!(warmup_lr(1.0, 4, 0), 0.25, "step 0 is treated as the first");
        assert_eq!(warmup_lr(2e-3, 10, 5), 1e-3);
        // defaults: 3 steps for link prediction (measured), none for node classification
        assert_eq!(TrainConfig::defaults_for(Task::Link).warmup_steps, 3);
        assert_eq!(TrainConfig::defaults_for(Task::Node).warmup_steps, 0);
        assert_eq!(TrainConfig::default().warmup_steps, 0);
        // dropout: 0.5 for node classification, none for link prediction (the release's)
        assert_eq!(TrainConfig::defaults_for(Task::Node).dropout, 0.5);
        assert_eq!(TrainConfig::defaults_for(Task::Link).dropout, 0.0);
        assert_eq!(TrainConfig::default().dropout, 0.0);
    }

    #[test]
    fn validate_rejects_bad_values() {
        let c = TrainConfig {
            fanouts: vec![10],
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().contains("fanouts"));
        let e = serde_json::from_str::<TrainConfig>(
            &serde_json::to_string(&TrainConfig::default())
                .unwrap()
                .replace("\"sage\"", "\"llama\""),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("llama"), "{e}");
        for c in [
            TrainConfig {
                eval_num_neg: 0,
                ..Default::default()
            },
            TrainConfig {
                num_neg: 0,
                ..Default::default()
            },
            TrainConfig {
                clip_norm: -1.0,
                ..Default::default()
            },
        ] {
            assert!(c.validate().is_err());
        }
        assert_eq!("super-tma".parse::<Method>().unwrap(), Method::SuperTma);
        assert!("llama"
            .parse::<Method>()
            .unwrap_err()
            .contains("random-tma"));
    }
    #[test]
    fn metric_names_parse_resolve_and_fit() {
        for (s, m) in [
            ("auto", Metric::Auto),
            ("accuracy", Metric::Accuracy),
            ("macro_f1", Metric::MacroF1),
            ("roc_auc", Metric::RocAuc),
            ("micro_f1", Metric::MicroF1),
            ("mrr", Metric::Mrr),
            ("hits@50", Metric::HitsAt(50)),
        ] {
            assert_eq!(s.parse::<Metric>().unwrap(), m);
            assert_eq!(m.to_string(), s);
        }
        assert_eq!("hits-at-20".parse::<Metric>().unwrap(), Metric::HitsAt(20));
        assert_eq!(
            "hits@0".parse::<Metric>().unwrap_err(),
            "metric 'hits@0': K in hits@K must be a whole number >= 1 (e.g. hits@50)"
        );
        assert!("f2".parse::<Metric>().unwrap_err().contains("roc_auc"));
        assert_eq!(Metric::Auto.resolve(TargetKind::Classes(2)), Metric::RocAuc);
        assert_eq!(
            Metric::Auto.resolve(TargetKind::Classes(3)),
            Metric::Accuracy
        );
        assert_eq!(
            Metric::Auto.resolve(TargetKind::MultiLabel),
            Metric::MicroF1
        );
        assert_eq!(Metric::Auto.resolve(TargetKind::Link), Metric::Mrr);
        assert!(Metric::HitsAt(50).fits(TargetKind::Link, 1000).is_ok());
        assert_eq!(
            Metric::RocAuc.fits(TargetKind::Classes(5), 1000).unwrap_err(),
            "metric roc_auc does not fit node classification with 5 classes (ROC-AUC is defined for 2 classes); use one of: auto, accuracy, macro_f1"
        );
        assert_eq!(
            Metric::Accuracy.fits(TargetKind::MultiLabel, 1000).unwrap_err(),
            "metric accuracy does not fit multi-label node classification; use one of: auto, micro_f1, macro_f1"
        );
        assert!(Metric::HitsAt(1001)
            .fits(TargetKind::Link, 1000)
            .unwrap_err()
            .contains("always 1"));
        // config files: a string key, absent in configurations written before it existed
        let c = TrainConfig {
            task: Task::Link,
            metric: Metric::HitsAt(50),
            ..Default::default()
        };
        c.validate().unwrap();
        let mut v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["metric"], "hits@50");
        v.as_object_mut().unwrap().remove("metric");
        let old: TrainConfig = serde_json::from_value(v).unwrap();
        assert_eq!(old.metric, Metric::Auto);
        let node_hits = TrainConfig {
            metric: Metric::HitsAt(50),
            ..Default::default()
        };
        assert!(node_hits
            .validate()
            .unwrap_err()
            .contains("link-prediction metric"));
        let link_acc = TrainConfig {
            task: Task::Link,
            metric: Metric::Accuracy,
            ..Default::default()
        };
        assert_eq!(
            link_acc.validate().unwrap_err(),
            "metric accuracy does not fit link prediction; use one of: auto, mrr, hits@K"
        );
    }
}
