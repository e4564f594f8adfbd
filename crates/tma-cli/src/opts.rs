//! The options of `tma train` (and of `compare`, which takes them too): the flags and
//! config-file keys (`TrainOpts`), their resolution into the library's `TrainConfig`
//! (`resolve`), and where the data comes from. Below every command module, so the commands
//! that take these options import no command.

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;
use tma_graph::formats::{Format, ReadOptions};
use tma_graph::Dataset;
use tma_train::options::Spelling;
use tma_train::{DataSource, FailPlan, Method, Metric, Task, TrainConfig};

/// Options of `tma train`. Every option can also be set in a TOML file given with `--config`
/// (keys are the long names with `_` for `-`, e.g. `sync_every = "30s"`); flags override the file.
#[derive(Args, Serialize, Deserialize, Default, Debug, Clone)]
#[serde(deny_unknown_fields, default)]
pub struct TrainOpts {
    /// Dataset: a directory in the .npy layout of docs/dataset-format.md or in the on-disk format
    /// of docs/graph-format.md (mapped: the graph and dense f32 features are read in place, the
    /// parts written under the run directory and mapped by the trainers), an OGB directory, a
    /// SNAP or CSV edge list, or a .npz file (format detected; see --format). Omitted: a generated
    /// stochastic block model graph (see --gen-nodes).
    #[arg(long, value_name = "PATH")]
    pub dataset: Option<PathBuf>,
    /// Format of --dataset: tma, ogb, snap, npz or csv (docs/dataset-format.md). Default: detected from the path.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<Format>,
    /// Read an edge-list dataset (ogb, snap, npz, csv) as undirected: every arc gets its reverse. Default: as the file says (a SNAP "Undirected graph" header, OGB's setting for the ogbn dataset, a symmetric npz adjacency), else directed.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub undirected: Option<bool>,
    /// Task: `link` (link prediction, MRR) or `node` (node classification, accuracy). Default: node.
    #[arg(long)]
    pub task: Option<Task>,
    /// Training method (the help lists every registered method: `Method::help_text`).
    #[arg(long, help = Method::help_text())]
    pub method: Option<Method>,
    /// Number of trainers M. Default: 4.
    #[arg(long = "trainers", value_name = "M")]
    #[serde(rename = "num_trainers", alias = "trainers")]
    pub num_trainers: Option<usize>,
    /// Partition for M + d parts and give d of them to no trainer (failure experiment). Default: 0.
    #[arg(long, value_name = "D")]
    pub drop_parts: Option<usize>,
    /// K, the number of super-nodes for super-tma (K >> M). Default: 1000.
    #[arg(long, value_name = "K")]
    pub super_nodes: Option<usize>,
    /// Clustering behind super-tma's super-nodes and the psgd-pa / llcg parts: metis, lpa (size-constrained label propagation over the graph in place, for graphs METIS cannot take) or auto (metis up to 2^25 arcs, lpa above; `tma partition --out --memory-budget` also takes lpa where METIS' estimated peak, 80 bytes per arc + 64 per node, exceeds the budget). Default: auto.
    #[arg(long, value_name = "CLUSTERING")]
    pub super_clustering: Option<tma_partition::Clustering>,
    /// Wall-clock time between model averaging rounds, e.g. 5s, 30s, 2min. Default: 5s (the reference release: 2min).
    #[arg(long, value_name = "DURATION")]
    pub sync_every: Option<String>,
    /// Averaging ramp: the first --sync-every span is cut into N equal spans, each ending in an averaging round (e.g. 10s with 16: rounds every 0.625 s up to 10 s, then 20, 30 s, ...): the trainers are averaged often while the model changes fastest, when their drift apart costs the average most (post-local SGD's warm-up; docs/decisions/0015-averaging-ramp.md). 0 or 1 = every span --sync-every (the paper's schedule); at most 1024; the step-count schedule (--sync-every-steps) has none. Default: 16.
    #[arg(long, value_name = "N")]
    pub sync_ramp: Option<u32>,
    /// Validate between averaging rounds every DURATION (shorter than --sync-every), e.g. 2s: the mean of the trainers' current parameters, the model a round formed then would give, which the trainers do not receive (training is unchanged). Recorded as `check` lines and `"check": true` rows of rounds.jsonl; a check may be the best model. Skipped while the previous validation still runs. Each check is one more validation on the trainers' cores, never skipped by --eval-every. Model-averaging methods (not ggs, llcg), in-process trainers. Default: 0 = off (validation at rounds).
    #[arg(long, value_name = "DURATION")]
    pub val_check_interval: Option<String>,
    /// Wall-clock training budget, e.g. 30s, 10min, 4h: the last round forms at it; the validations still running then and the final test come after it. Default: 30s (the reference release: 4h).
    #[arg(long, value_name = "DURATION")]
    pub time_limit: Option<String>,
    /// Step-count schedule: average every N optimizer steps per trainer instead of every --sync-every (for comparisons; 0 = wall-clock). Default: 0.
    #[arg(long, value_name = "N")]
    pub sync_every_steps: Option<u64>,
    /// Per-round deadline: the coordinator waits at most this long after calling a round for the trainers in step with the previous one; a trainer that has not answered (dead, stalled, slow) misses the round, is not waited for again, and rejoins with the current model once it answers. Must exceed one step (with --sync-every-steps: that many). MPI: a rank silent for 4 x (sync-every + round-timeout) is considered lost. Default: 10s.
    #[arg(long, value_name = "DURATION")]
    pub round_timeout: Option<String>,
    /// LLCG: global correction mini-batch steps on the full graph after each averaging. Default: 2.
    #[arg(long, value_name = "N")]
    pub llcg_steps: Option<usize>,
    /// Weighting of the model average: uniform (the paper's plain mean), nodes or edges. Default: uniform.
    #[arg(long, value_name = "W")]
    pub average_weight: Option<String>,
    /// Encoder: sage (GraphSAGE, mean aggr), gcn, gat (graph attention, --heads) or mlp. Default: sage.
    #[arg(long)]
    pub model: Option<String>,
    /// GAT attention heads of the hidden layers (concatenated; --hidden must be a multiple). Default: 8.
    #[arg(long)]
    pub heads: Option<usize>,
    /// Hidden width. Default: 256.
    #[arg(long)]
    pub hidden: Option<usize>,
    /// Number of GNN layers. Default: 2.
    #[arg(long = "layers")]
    #[serde(rename = "num_layers", alias = "layers")]
    pub num_layers: Option<usize>,
    /// Dropout probability after each hidden layer, in [0, 1). Default: 0.5 for node classification (the field's setting for GraphSAGE / GCN; docs/decisions/0016-node-dropout.md), 0 for link prediction (the reference release).
    #[arg(long, allow_hyphen_values = true)]
    pub dropout: Option<f32>,
    /// LayerNorm between layers (true, the reference release's stack) or not (false, as Kipf & Welling's GCN). Default: true.
    #[arg(long, value_name = "BOOL")]
    pub layer_norm: Option<bool>,
    /// Precision of the model's dense matrix products (PyTorch's names): highest (f32) or medium (bf16 operands, f32 sums, on Intel AMX: the link decoder and the encoder's linear layers on dense inputs, for faster steps and validation; f32 where the CPU lacks AMX-BF16, with a warning). Default: highest.
    #[arg(long, value_name = "PRECISION")]
    pub matmul_precision: Option<String>,
    /// Neighbour fanouts, hop nearest the seeds first, comma separated; 0 = all neighbours. Default: 10,25.
    #[arg(long, value_delimiter = ',')]
    pub fanouts: Option<Vec<usize>>,
    /// Mini-batch size: positive edges (link) or seed nodes (node). Default: 8192 edges / 1024 nodes (the reference release: 65536 edges, on a GPU).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Adam learning rate. Default: 0.001.
    #[arg(long, allow_hyphen_values = true)]
    pub lr: Option<f32>,
    /// L2 weight decay added to gradients before Adam (PyTorch semantics). Default: 0.
    #[arg(long, allow_hyphen_values = true)]
    pub weight_decay: Option<f32>,
    /// Gradient-clipping max norm (applied from epoch 2). Default: 1.0.
    #[arg(long, allow_hyphen_values = true)]
    pub clip_norm: Option<f32>,
    /// First epoch (1-based) with gradient clipping. Default: 2.
    #[arg(long)]
    pub clip_from_epoch: Option<usize>,
    /// Linear learning-rate warm-up over the first N optimizer steps of each trainer
    /// (lr * step / N; 0 = constant lr, the reference release). Default: 3 for link
    /// prediction (Adam's first full step overshoots there), 0 for node classification.
    #[arg(long, value_name = "N")]
    pub warmup_steps: Option<u64>,
    /// Uniform negatives per positive edge in training (link). Default: 1.
    #[arg(long)]
    pub num_neg: Option<usize>,
    /// Fixed negatives per positive for MRR (link). Default: 1000.
    #[arg(long)]
    pub eval_num_neg: Option<usize>,
    /// At most this many validation and test positives (link; each is ranked against eval-num-neg negatives; every round validates them, so they cost CPU time the trainers share). Default: 500.
    #[arg(long)]
    pub eval_max_edges: Option<usize>,
    /// Validate every K-th round's model (and always the last round's); rounds in between are recorded without validation, so validation at rounds takes 1/K of the CPU time the trainers share; checks between rounds (--val-check-interval) are always validated. Default: 1 (every round).
    #[arg(long, value_name = "K")]
    pub eval_every: Option<u64>,
    /// How evaluation computes the model's outputs on the nodes it reads (the val/test nodes; the endpoints of the held-out positives and their negatives), all exact: `restricted` = only on their L-hop neighbourhoods, layer by layer within --eval-memory; `full` = layer-wise over every node; `auto` = whichever costs less (full only if it fits --eval-memory). Default: auto.
    #[arg(long, value_name = "auto|full|restricted")]
    pub eval_inference: Option<String>,
    /// Memory restricted (or sampled) evaluation may take: its stored rows and one chunk's blocks and activations (e.g. 256MiB, 2GiB; at least 16MiB). A smaller budget cuts the nodes into more groups whose shared neighbourhoods are computed again: validation gets slower (measured on a 25M-arc graph: 64MiB took ~8x the core-seconds of 1GiB), and the run lasts past --time-limit while the rounds it formed are validated. Default: 1GiB.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    #[serde(deserialize_with = "size_or_bytes")]
    pub eval_memory: Option<String>,
    /// Sampled evaluation: per-layer fanouts, hop nearest the evaluated nodes first, comma separated; 0 = all neighbours. An estimate instead of exact inference, for graphs where exact costs too much (docs/decisions). Default: exact.
    #[arg(long, value_delimiter = ',')]
    pub eval_fanouts: Option<Vec<usize>>,
    /// Validate every round on a fixed, seeded subset of at most N validation nodes (node task) or validation positives with their negatives (link task) when the split is larger; the final test uses the whole test split. Default: 100000 (no effect on graphs below ~1M nodes).
    #[arg(long, value_name = "N")]
    pub eval_max_nodes: Option<usize>,
    /// Fraction of edges held out for validation (link). Default: 0.05.
    #[arg(long, allow_hyphen_values = true)]
    pub val_frac: Option<f64>,
    /// Fraction of edges held out for test (link). Default: 0.05.
    #[arg(long, allow_hyphen_values = true)]
    pub test_frac: Option<f64>,
    /// Scale each node's feature row to sum 1 (PyG NormalizeFeatures; standard for Planetoid). Default: false.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub normalize_features: Option<bool>,
    /// Which of a dataset's fixed mask splits to use (node), or `all`: one run per fixed split in RUN_DIR/split-K/, then the mean +- std over splits of the best-validation model's test metric, printed and written to RUN_DIR/splits.json. Default: 0.
    #[arg(long, value_name = "K|all")]
    pub split_index: Option<SplitIndexArg>,
    /// Validation metric that selects the best model: auto (accuracy for multi-class, roc_auc for 2 classes, micro_f1 for multi-label, mrr for link), accuracy, macro_f1, roc_auc, micro_f1, mrr or hits@K (e.g. hits@50, as ogbl-collab). Default: auto.
    #[arg(long, value_name = "NAME")]
    pub metric: Option<Metric>,
    /// Accept a dataset's fixed split whose train/val/test lists share nodes (otherwise an error naming both files). Default: false.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub allow_split_overlap: Option<bool>,
    /// Seed of every random choice (split, partition, init, sampling). Default: 0.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Worker threads in all, shared equally by trainers (0 = all cores). Default: 0.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Inject a failure: trainer T stops for good at training time DURATION (repeatable), e.g. 1@10s.
    #[arg(long, value_name = "T@DURATION")]
    pub fail: Option<Vec<String>>,
    /// Nodes of the generated graph when no --dataset is given. Default: 10000.
    #[arg(long, value_name = "N")]
    pub gen_nodes: Option<usize>,
    /// Run directory for config, metrics and models. Default: runs/<dataset>-<method>-<time>.
    #[arg(long, value_name = "RUN_DIR")]
    pub out: Option<PathBuf>,
    /// TOML file with any of these options (flags win).
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Train on a partition directory written by `tma partition --out` (its manifest fixes task, method, trainers, seed and split); replaces --dataset.
    #[arg(long, value_name = "DIR")]
    pub partitions: Option<PathBuf>,
    /// Transport of the trainers: in-process (threads) or mpi (one process per rank under mpirun/srun: rank 0 coordinates, ranks 1..=M train; needs --partitions and a build with --features mpi). Default: in-process.
    #[arg(long)]
    pub engine: Option<String>,
    /// MPI: how long the coordinator waits for every trainer rank to load its part and join, and at the end to exit, before reporting the missing ranks and aborting the job. Default: 120s.
    #[arg(long, value_name = "DURATION")]
    pub join_timeout: Option<String>,
    /// Continue the interrupted run in RUN_DIR from its last checkpoint (its config.toml is the config; flags still win).
    #[arg(long, value_name = "RUN_DIR")]
    #[serde(skip)]
    pub resume: Option<PathBuf>,
    /// Print only the final summary (no progress bar or round lines).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    #[serde(skip)]
    pub quiet: bool,
    /// Test-only: the coordinator stalls this long while recording round 1 (as on a slow
    /// disk), to check that its trainers do not take a busy coordinator for a lost one.
    #[arg(long, value_name = "DURATION", hide = true)]
    #[serde(skip)]
    pub debug_slow_round: Option<String>,
}

/// `--split-index`: one fixed split, or every one (`all`). In config files a number or
/// `"all"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitIndexArg {
    /// Split K.
    One(usize),
    /// Every fixed split of the dataset, one run each.
    All,
}

impl std::str::FromStr for SplitIndexArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(SplitIndexArg::All);
        }
        s.parse()
            .map(SplitIndexArg::One)
            .map_err(|_| format!("'{s}' is not a split index (expected a number 0, 1, ... or all)"))
    }
}

impl std::fmt::Display for SplitIndexArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SplitIndexArg::One(k) => write!(f, "{k}"),
            SplitIndexArg::All => f.write_str("all"),
        }
    }
}

impl PartialEq<usize> for SplitIndexArg {
    fn eq(&self, k: &usize) -> bool {
        *self == SplitIndexArg::One(*k)
    }
}

impl Serialize for SplitIndexArg {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            SplitIndexArg::One(k) => s.serialize_u64(*k as u64),
            SplitIndexArg::All => s.serialize_str("all"),
        }
    }
}

impl<'de> Deserialize<'de> for SplitIndexArg {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(usize),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(k) => Ok(SplitIndexArg::One(k)),
            Raw::S(s) => s.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// `top`'s options where set, else `base`'s (flags over the config file). Works on the
/// serialized form, so every option takes part without being listed here.
fn overlay(base: TrainOpts, top: TrainOpts) -> Result<TrainOpts> {
    let (config, quiet) = (top.config.clone(), top.quiet);
    let mut merged = serde_json::to_value(&base)?;
    let top = serde_json::to_value(&top)?;
    if let (Some(m), Some(t)) = (merged.as_object_mut(), top.as_object()) {
        for (k, v) in t {
            if !v.is_null() {
                m.insert(k.clone(), v.clone());
            }
        }
    }
    let mut out: TrainOpts = serde_json::from_value(merged)?;
    out.config = config;
    out.quiet = quiet;
    Ok(out)
}

/// A size in a config file: a string (`"512MiB"`) or a number of bytes (as `config.toml`
/// records it).
fn size_or_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Size {
        Bytes(u64),
        Text(String),
    }
    Ok(Option::<Size>::deserialize(d)?.map(|s| match s {
        Size::Bytes(b) => b.to_string(),
        Size::Text(t) => t,
    }))
}

pub(crate) fn parse_duration(name: &str, s: &str) -> Result<Duration> {
    humantime::parse_duration(s)
        .with_context(|| format!("--{name}: '{s}' is not a duration (examples: 30s, 2min, 1h)"))
}

/// `o` over its `--config` file (flags win); `o` itself without one.
pub(crate) fn with_config_file(o: TrainOpts) -> Result<TrainOpts> {
    let Some(path) = o.config.clone() else {
        return Ok(o);
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    let f: TrainOpts = toml::from_str(&text)
        .with_context(|| format!("config file {} is not valid", path.display()))?;
    overlay(f, o)
}

pub(crate) fn resolve(o: TrainOpts) -> Result<(TrainOpts, TrainConfig, FailPlan)> {
    let o = with_config_file(o)?;
    // a partition directory's manifest fixes the task (a clashing --task is refused in
    // `dist::open_partitions`); its defaults (dropout, batch size, warm-up) follow it. An
    // unreadable manifest is reported where the directory is opened (or refused first, as
    // `tma compare` refuses --partitions)
    let task = match (o.task, &o.partitions) {
        (Some(t), _) => t,
        (None, Some(dir)) => tma_train::store::read_manifest(dir)
            .map_or(TrainConfig::default().task, |m| m.data.task),
        (None, None) => TrainConfig::default().task,
    };
    // the task's defaults: one source for the CLI and the Python package
    let d = TrainConfig::defaults_for(task);
    let cfg = TrainConfig {
        task,
        method: o.method.unwrap_or(d.method),
        num_trainers: o.num_trainers.unwrap_or(d.num_trainers),
        drop_parts: o.drop_parts.unwrap_or(d.drop_parts),
        super_nodes: o.super_nodes.unwrap_or(d.super_nodes),
        super_clustering: o.super_clustering.unwrap_or(d.super_clustering),
        sync_every: match &o.sync_every {
            Some(s) => parse_duration("sync-every", s)?,
            None => d.sync_every,
        },
        sync_ramp: o.sync_ramp.unwrap_or(d.sync_ramp),
        time_limit: match &o.time_limit {
            Some(s) => parse_duration("time-limit", s)?,
            None => d.time_limit,
        },
        val_check_interval: match &o.val_check_interval {
            Some(s) => parse_duration("val-check-interval", s)?,
            None => d.val_check_interval,
        },
        sync_every_steps: o.sync_every_steps.unwrap_or(d.sync_every_steps),
        round_timeout: match &o.round_timeout {
            Some(s) => parse_duration("round-timeout", s)?,
            None => d.round_timeout,
        },
        llcg_steps: o.llcg_steps.unwrap_or(d.llcg_steps),
        average_weight: match &o.average_weight {
            Some(s) => s.parse().map_err(anyhow::Error::msg)?,
            None => d.average_weight,
        },
        model: match &o.model {
            Some(m) => m
                .parse()
                .map_err(|e| anyhow::anyhow!("--model '{m}': {e}"))?,
            None => d.model,
        },
        heads: o.heads.unwrap_or(d.heads),
        hidden: o.hidden.unwrap_or(d.hidden),
        num_layers: o.num_layers.unwrap_or(d.num_layers),
        dropout: o.dropout.unwrap_or(d.dropout),
        layer_norm: o.layer_norm.unwrap_or(d.layer_norm),
        matmul_precision: match &o.matmul_precision {
            Some(s) => s
                .parse()
                .map_err(|e| anyhow::anyhow!("--matmul-precision: {e}"))?,
            None => d.matmul_precision,
        },
        fanouts: o.fanouts.clone().unwrap_or(d.fanouts),
        batch_size: o.batch_size.unwrap_or(d.batch_size),
        lr: o.lr.unwrap_or(d.lr),
        weight_decay: o.weight_decay.unwrap_or(d.weight_decay),
        clip_norm: o.clip_norm.unwrap_or(d.clip_norm),
        clip_from_epoch: o.clip_from_epoch.unwrap_or(d.clip_from_epoch),
        warmup_steps: o.warmup_steps.unwrap_or(d.warmup_steps),
        num_neg: o.num_neg.unwrap_or(d.num_neg),
        eval_num_neg: o.eval_num_neg.unwrap_or(d.eval_num_neg),
        eval_max_edges: o.eval_max_edges.unwrap_or(d.eval_max_edges),
        eval_every: o.eval_every.unwrap_or(d.eval_every),
        eval_inference: match &o.eval_inference {
            Some(s) => s
                .parse()
                .map_err(|e| anyhow::anyhow!("--eval-inference: {e}"))?,
            None => d.eval_inference,
        },
        eval_memory: match &o.eval_memory {
            Some(s) => crate::scale_cmd::parse_bytes(s)
                .map_err(|e| anyhow::anyhow!("--eval-memory: {e}"))?,
            None => d.eval_memory,
        },
        eval_fanouts: o.eval_fanouts.clone().unwrap_or(d.eval_fanouts),
        eval_max_nodes: o.eval_max_nodes.unwrap_or(d.eval_max_nodes),
        val_frac: o.val_frac.unwrap_or(d.val_frac),
        test_frac: o.test_frac.unwrap_or(d.test_frac),
        normalize_features: o.normalize_features.unwrap_or(d.normalize_features),
        split_index: match o.split_index {
            None => d.split_index,
            Some(SplitIndexArg::One(k)) => k,
            Some(SplitIndexArg::All) => bail!(
                "--split-index all runs `tma train` once per fixed split; this command takes one split index (0, 1, ...)"
            ),
        },
        metric: o.metric.unwrap_or(d.metric),
        allow_split_overlap: o.allow_split_overlap.unwrap_or(d.allow_split_overlap),
        seed: o.seed.unwrap_or(d.seed),
        threads: o.threads.unwrap_or(d.threads),
    };
    cfg.validate().map_err(|e| match &o.config {
        Some(path) => anyhow::anyhow!(
            "invalid option (from the flags or the config file {}): {e}",
            path.display()
        ),
        None => anyhow::anyhow!("invalid option: {e}"),
    })?;
    let mut fail = FailPlan::new();
    for f in o.fail.iter().flatten() {
        let (t, at) = f
            .split_once('@')
            .with_context(|| format!("--fail '{f}': expected TRAINER@DURATION, e.g. 1@10s"))?;
        let t: usize = t
            .parse()
            .with_context(|| format!("--fail '{f}': '{t}' is not a trainer index"))?;
        if t >= cfg.effective_trainers() {
            bail!(
                "--fail '{f}': trainer {t} does not exist (trainers are 0 to {})",
                cfg.effective_trainers() - 1
            );
        }
        fail.insert(t, parse_duration("fail", at)?);
    }
    Ok((o, cfg, fail))
}

/// `--gen-nodes` on the command line (`flags`) while the data comes from a dataset or a
/// partition directory (`merged`: flags over the config file): the generated graph it sizes is
/// not used, so this is an error; so are `--format` / `--undirected` without `--dataset`.
pub(crate) fn check_gen_nodes(flags: &TrainOpts, merged: &TrainOpts) -> Result<()> {
    if let Some(n) = flags.gen_nodes {
        let source = match (&merged.dataset, &merged.partitions) {
            (Some(d), _) => Some(format!("--dataset {}", d.display())),
            (None, Some(p)) => Some(format!("--partitions {}", p.display())),
            (None, None) => None,
        };
        if let Some(source) = source {
            bail!(
            "--gen-nodes {n} sizes the generated graph, which is used only without --dataset and --partitions (this run reads {source}); drop --gen-nodes"
        );
        }
    }
    if merged.dataset.is_none() && (merged.format.is_some() || merged.undirected == Some(true)) {
        let flag = if merged.format.is_some() {
            "--format"
        } else {
            "--undirected"
        };
        bail!(
            "{flag} says how to read --dataset, and this run has none ({}); drop {flag}",
            match &merged.partitions {
                Some(p) => format!("it reads the partition directory {}", p.display()),
                None => "it trains on the generated graph".to_string(),
            }
        );
    }
    Ok(())
}

/// One-line warnings (without the `warning: ` prefix) for options set on the command line
/// (`flags`, not the config file: a run's config.toml lists every option) that none of
/// `methods` (with `model`) uses: the library's rule ([`tma_train::options::unused_warnings`]),
/// spelled as flags.
pub(crate) fn unused_flag_warnings(
    flags: &TrainOpts,
    methods: &[Method],
    model: tma_nn::EncoderKind,
) -> Vec<String> {
    tma_train::options::unused_warnings(&given(flags), methods, model, Spelling::Flag)
}

/// The options set in `o` (flags, or flags over a config file) by config-file key, for the
/// library's checks of given options ([`tma_train::options`]).
pub(crate) fn given(o: &TrainOpts) -> tma_train::options::Given {
    match serde_json::to_value(o) {
        Ok(serde_json::Value::Object(m)) => m.into_iter().filter(|(_, v)| !v.is_null()).collect(),
        _ => Default::default(),
    }
}

/// How `--format` / `--undirected` say to read `--dataset`.
pub(crate) fn read_options(format: Option<Format>, undirected: Option<bool>) -> ReadOptions {
    ReadOptions {
        format,
        undirected: undirected.unwrap_or(false),
    }
}

/// The dataset (read as `read` says), or the generated graph (`--gen-nodes`, default 10000
/// nodes).
pub(crate) fn data_source(
    dataset: &Option<PathBuf>,
    read: ReadOptions,
    gen_nodes: Option<usize>,
) -> DataSource {
    match dataset {
        Some(path) if read == ReadOptions::default() => DataSource::Dataset(path.clone()),
        Some(path) => DataSource::DatasetAs {
            path: path.clone(),
            read,
        },
        None => DataSource::Generated {
            num_nodes: gen_nodes.unwrap_or(10_000),
        },
    }
}

/// Loads the dataset or generates the built-in graph (see [`data_source`]); what the format's
/// reader changed in the data is printed as warnings.
pub(crate) fn load(
    dataset: &Option<PathBuf>,
    read: ReadOptions,
    gen_nodes: Option<usize>,
    cfg: &TrainConfig,
) -> Result<Dataset> {
    let (ds, notes) =
        tma_train::run::load_dataset_noted(&data_source(dataset, read, gen_nodes), cfg)?
            .expect("a dataset or the generated graph");
    for n in notes {
        eprintln!("warning: {n}");
    }
    Ok(ds)
}
