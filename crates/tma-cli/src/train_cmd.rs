//! `tma train`, `tma info`, `tma partition`.

use anyhow::{bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tma_graph::formats::{Format, ReadOptions};
use tma_graph::Dataset;
use tma_train::{
    DataSource, Engine, FailPlan, Method, Metric, Observer, RoundRecord, Run, RunSpec, StopCause,
    Task, TrainConfig, TrainError,
};

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
    /// Training method: random-tma, super-tma, psgd-pa (METIS parts + averaging), llcg (psgd-pa + global correction steps), ggs (synchronous data parallel, whole-graph sampling) or centralized (one trainer, whole graph). Default: random-tma.
    #[arg(long)]
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
    #[arg(long)]
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

fn parse_duration(name: &str, s: &str) -> Result<Duration> {
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
    if cfg.method == Method::Centralized && cfg.drop_parts > 0 {
        bail!(
            "--drop-parts {} does not apply to --method centralized (one trainer on the whole graph, no parts to drop); drop --drop-parts or choose a partitioned method",
            cfg.drop_parts
        );
    }
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
/// `methods` uses: --super-nodes without super-tma, --llcg-steps without llcg, --trainers
/// (other than 1) with only centralized, --average-weight with only ggs/centralized,
/// --sync-ramp (above 1) with only ggs.
pub(crate) fn unused_flag_warnings(flags: &TrainOpts, methods: &[Method]) -> Vec<String> {
    let names: Vec<&str> = methods.iter().map(|m| m.as_str()).collect();
    let what = match names.len() {
        1 => format!("method: {}", names[0]),
        _ => format!("methods: {}", names.join(", ")),
    };
    let uses = |m: Method| methods.contains(&m);
    let only = |ms: &[Method]| methods.iter().all(|m| ms.contains(m));
    let mut w = Vec::new();
    if flags.super_nodes.is_some() && !uses(Method::SuperTma) {
        w.push(format!(
            "--super-nodes is ignored: only --method super-tma uses super-nodes ({what})"
        ));
    }
    if flags.super_clustering.is_some()
        && !(uses(Method::SuperTma) || uses(Method::PsgdPa) || uses(Method::Llcg))
    {
        w.push(format!(
            "--super-clustering is ignored: only super-tma, psgd-pa and llcg cluster the graph ({what})"
        ));
    }
    if flags.llcg_steps.is_some() && !uses(Method::Llcg) {
        w.push(format!(
            "--llcg-steps is ignored: only --method llcg takes global correction steps ({what})"
        ));
    }
    if matches!(flags.num_trainers, Some(m) if m != 1) && only(&[Method::Centralized]) {
        w.push(format!(
            "--trainers is ignored: centralized trains one trainer on the whole graph ({what})"
        ));
    }
    if flags.average_weight.is_some() && only(&[Method::Centralized, Method::Ggs]) {
        w.push(format!(
            "--average-weight is ignored: ggs averages gradients uniformly and centralized averages nothing ({what})"
        ));
    }
    if flags.sync_ramp.is_some_and(|r| r > 1) && only(&[Method::Ggs]) {
        w.push(format!(
            "--sync-ramp is ignored: ggs averages no models (it synchronizes gradients every step; its rounds are validation points) ({what})"
        ));
    }
    w
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

/// Prints one line per round above the progress bar (the run writes `rounds.jsonl` itself).
pub(crate) struct Printer {
    bar: Option<ProgressBar>,
    /// `--debug-slow-round`: how long recording round 1 stalls the coordinator.
    slow_round: Option<Duration>,
    /// Whether a diverged (NaN) model was reported already (said once).
    said_diverged: bool,
}

impl Observer for Printer {
    fn on_round(&mut self, r: &RoundRecord) -> Result<(), TrainError> {
        if let (1, Some(d)) = (r.round, self.slow_round) {
            std::thread::sleep(d);
        }
        let loss = loss_text(r.train_loss);
        let val = if r.val.value.is_finite() {
            format!("val {}={:.4}", r.val.metric, r.val.value)
        } else if !r.val.metric.is_empty() {
            // validated, value undefined: a diverged model, or ROC-AUC on one class
            format!("val {}=undefined", r.val.metric)
        } else {
            "val -".to_string()
        };
        // said when it happens (summary.json records it: `Run`)
        if let (Some(w), false) = (tma_train::record::diverged_warning(r), self.said_diverged) {
            eprintln!("warning: {w}");
            self.said_diverged = true;
        }
        let head = if r.check {
            // a check between rounds: after round r.round, no loss of its own
            format!("check {:>3}+", r.round)
        } else {
            format!("round {:>3} ", r.round)
        };
        let mut line = format!(
            "{head} t={:>7.1}s  steps={:?}  loss={loss}  {val}  eval {:.2}s/{:.2} core-s{}",
            r.elapsed_s,
            r.steps,
            r.eval_s,
            r.eval_cpu_s,
            if r.is_best { " *" } else { "" }
        );
        if !r.missing.is_empty() {
            line.push_str(&format!("  missing={:?}", r.missing));
        }
        if r.skipped_slots > 0 {
            line.push_str(&format!("  ({})", skipped_text(r.skipped_slots)));
        }
        match &self.bar {
            Some(b) if !b.is_hidden() => b.println(line),
            Some(_) => eprintln!("{line}"),
            None => {}
        }
        Ok(())
    }
}

/// Validation shares the trainers' cores: when the rounds' and checks' validations took more
/// than 15% of the run's core time (`threads` x training time), a note with the share and what
/// gives the trainers more (e.g. a link validation ranking 1000 positives against 1000
/// negatives through the MLP decoder takes ~1.4 core-s: checks every 2 s on 2 cores take ~35%).
pub(crate) fn validation_share_note(
    rounds: &[RoundRecord],
    train_time_s: f64,
    cfg: &tma_train::TrainConfig,
) -> Option<String> {
    let core_s: f64 = rounds.iter().map(|r| r.eval_cpu_s).sum();
    let cores = tma_train::engine::total_threads(cfg) as f64;
    let share = core_s / (cores * train_time_s);
    if !(train_time_s > 0.0 && share > 0.15) {
        return None;
    }
    let checks = rounds.iter().filter(|r| r.check).count();
    Some(format!(
        "note: validation took {:.0}% of the {} cores' time ({core_s:.1} core-s over {} validations{}), time the trainers did not train; {} leaves more to training",
        100.0 * share,
        cores,
        rounds.iter().filter(|r| r.val.value.is_finite()).count(),
        if checks > 0 {
            format!(", {checks} of them checks between rounds")
        } else {
            String::new()
        },
        if checks > 0 {
            "a longer --val-check-interval (or none), --eval-every K or a smaller --eval-max-edges / --eval-max-nodes"
        } else {
            "--eval-every K or a smaller --eval-max-edges / --eval-max-nodes"
        }
    ))
}

/// `, the first 10s every 625ms (--sync-ramp 16)` for the training line: the averaging
/// ramp's span and how far it lasts (the first `--sync-every`, or the time limit where that
/// comes first); empty without a ramp.
fn ramp_text(cfg: &TrainConfig) -> String {
    let ramp = cfg.effective_sync_ramp();
    if ramp <= 1 {
        return String::new();
    }
    let Some(first) = tma_train::clock::ramp_slots(cfg.sync_every, ramp).next() else {
        return String::new();
    };
    if first >= cfg.time_limit {
        return String::new();
    }
    format!(
        ", the first {} every {} (--sync-ramp {})",
        short_duration(cfg.sync_every.min(cfg.time_limit)),
        short_duration(first),
        cfg.sync_ramp
    )
}

/// A duration in at most 4 significant digits: `62.5ms`, `1.25s`, `4.883ms`, `225000s`.
fn short_duration(d: Duration) -> String {
    let trim = |x: f64| {
        let s = format!("{x:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    if d < Duration::from_secs(1) {
        format!("{}ms", trim(d.as_secs_f64() * 1e3))
    } else {
        format!("{}s", trim(d.as_secs_f64()))
    }
}

/// The round line's note on skipped averaging slots, e.g. `3 averaging slots skipped: the
/// round formed late (validation or trainers behind)`.
pub(crate) fn skipped_text(n: u64) -> String {
    format!(
        "{n} averaging slot{} skipped: the round formed late (validation or trainers behind)",
        if n == 1 { "" } else { "s" }
    )
}

/// A round's mean training loss for the round line: `-` when no trainer took a step (NaN).
pub(crate) fn loss_text(loss: f64) -> String {
    if loss.is_finite() {
        format!("{loss:.4}")
    } else {
        "-".to_string()
    }
}

/// `tma train`: resolves the options, then drives a [`Run`] (the library owns the run
/// directory, checkpoints and outputs); prints progress.
pub fn train(o: TrainOpts) -> Result<()> {
    #[cfg(feature = "mpi")]
    {
        // rank 0 under MPI: an error before the coordinator loop owns the context must end the
        // whole job (dropping the context would wait in MPI_Finalize for trainer ranks that
        // wait for it: the job would hang without a word)
        let mut slot: Option<crate::mpi_run::MpiContext> = None;
        let r = train_inner(o, &mut slot);
        if let (Err(e), Some(ctx)) = (&r, slot) {
            eprintln!("error: {e:#}");
            eprintln!("error: rank 0 failed before training; aborting the MPI job");
            ctx.abort_job(&format!("{e:#}"), 1);
        }
        r
    }
    #[cfg(not(feature = "mpi"))]
    train_inner(o, &mut None)
}

/// The MPI context of rank 0 while [`train`] owns it (`()` without the `mpi` feature).
#[cfg(feature = "mpi")]
pub(crate) type MpiSlot = Option<crate::mpi_run::MpiContext>;
#[cfg(not(feature = "mpi"))]
pub(crate) type MpiSlot = Option<()>;

pub(crate) fn train_inner(o: TrainOpts, mpi_slot: &mut MpiSlot) -> Result<()> {
    #[cfg(not(feature = "mpi"))]
    let _ = mpi_slot;
    let quiet = o.quiet;
    // the command line alone, to tell options the user typed from those of a config file
    let flags = o.clone();
    let o = crate::dist::apply_resume(o)?;
    // (resume is not a config-file key, so it does not survive the overlay in resolve)
    let resume_dir = o.resume.clone();
    if with_config_file(o.clone())?.split_index == Some(SplitIndexArg::All) {
        return crate::splits::train_all_splits(o);
    }
    let (o, mut cfg, fail) = resolve(o)?;
    check_gen_nodes(&flags, &o)?;
    if flags.sync_ramp.is_some_and(|r| r > 1) && cfg.sync_every_steps > 0 {
        bail!("--sync-ramp shortens the first wall-clock spans; the step-count schedule (--sync-every-steps) has none: leave --sync-ramp out");
    }
    let parts = crate::dist::open_partitions(&o, &mut cfg)?;
    let engine = crate::dist::parse_engine(o.engine.as_deref())?;
    let join_timeout = match &o.join_timeout {
        Some(s) => Some(parse_duration("join-timeout", s)?),
        None => None,
    };
    let mut warnings = unused_flag_warnings(&flags, &[cfg.method]);
    if flags.heads.is_some() && cfg.model != tma_nn::EncoderKind::Gat {
        warnings.push(format!(
            "--heads is ignored: only --model gat has attention heads (model: {})",
            cfg.model
        ));
    }
    if flags.join_timeout.is_some() && engine != Engine::Mpi {
        warnings.push(
            "--join-timeout is ignored: it applies only to --engine mpi (this run is in-process)"
                .into(),
        );
    }
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    #[cfg(feature = "mpi")]
    let mpi_ctx = match engine {
        Engine::Mpi => {
            let Some((pdir, m)) = &parts else {
                bail!("--engine mpi needs --partitions DIR (write one with `tma partition --out DIR`)");
            };
            let ctx = crate::mpi_run::MpiContext::init(join_timeout)?;
            if ctx.rank() != 0 {
                return crate::mpi_run::run_trainer(ctx, pdir, m, &cfg, &fail, o.out.as_deref());
            }
            *mpi_slot = Some(ctx);
            true
        }
        Engine::InProcess => false,
    };
    #[cfg(not(feature = "mpi"))]
    if engine == Engine::Mpi {
        bail!("--engine mpi: this tma was built without MPI support");
    }
    let data = match (&o.partitions, &parts) {
        (Some(dir), _) => DataSource::Partitions(dir.clone()),
        _ => data_source(
            &o.dataset,
            read_options(o.format, o.undirected),
            o.gen_nodes,
        ),
    };
    let spec = RunSpec {
        config: cfg,
        data,
        fail,
        engine,
        join_timeout,
        out: o.out.clone(),
        resume: resume_dir.is_some(),
    };
    // Ctrl-C or SIGTERM: first stops after the round in flight, second at once (in-process
    // runs; under MPI the launcher owns the signals)
    let interrupt = (engine == Engine::InProcess).then(crate::interrupt::install);
    let mut run = Run::start(spec)?;
    let out = run.dir().to_path_buf();
    if let Some((stop, cleanup)) = &interrupt {
        if let (Some(existed), Ok(mut slot)) = (run.dir_existed(), cleanup.lock()) {
            *slot = Some((out.clone(), existed));
        }
        run.stop_on(stop.clone());
    }
    if let Some(bytes) = crate::dist::available_memory_bytes() {
        run.set_memory_budget(bytes);
    }
    for w in split_index_warnings(&flags, run.config(), run.dataset()) {
        eprintln!("warning: {w}");
    }
    let interrupted_early = |what: &str| -> Result<()> {
        if interrupt
            .as_ref()
            .is_some_and(|(s, _)| s.load(Ordering::SeqCst))
        {
            bail!(
                "interrupted {what}: nothing to keep, the run directory {} was removed",
                out.display()
            );
        }
        Ok(())
    };
    interrupted_early("while loading the data")?;
    if !quiet {
        if let Some(ds) = run.dataset() {
            eprintln!("dataset   {}", ds.summary());
            if ds.split.is_none() && cfg_task_is_node(run.config()) {
                eprintln!(
                    "          (no fixed split: a seeded 60/20/20 split of the labelled nodes, --seed {})",
                    run.config().seed
                );
            }
            if ds.structural_features {
                eprintln!("          (no node features: using 32-d structural features, see docs)");
            }
        }
        if let Some((dir, m)) = run.partitions() {
            eprintln!(
                "dataset   {} from partition directory {} ({} parts, manifest sha256 {})",
                m.dataset,
                dir.display(),
                m.parts.len(),
                &m.hash[..16]
            );
        }
        if let Some(st) = run.resumed() {
            eprintln!(
                "resuming  from round {} at t={:.1}s ({})",
                st.round,
                st.elapsed_s,
                out.display()
            );
        }
    }
    let cfg = run.config().clone();
    let spinner = (!quiet).then(|| {
        let s = ProgressBar::new_spinner();
        s.set_message(format!(
            "splitting and partitioning ({}, {} trainers)",
            cfg.method,
            cfg.effective_trainers()
        ));
        s.enable_steady_tick(Duration::from_millis(100));
        s
    });
    let t_prepare = std::time::Instant::now();
    let prepared = run.prepare();
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    let prep = prepared?;
    if !quiet {
        // what is read in place: the coordinator's graph, and every trainer part this
        // process holds (none on MPI rank 0)
        let parts_mapped = !prep.trainers.is_empty()
            && prep
                .trainers
                .iter()
                .all(|t| t.graph.indices.is_mapped() && t.graph.indptr.is_mapped());
        let mapped = match (prep.graph.indices.is_mapped(), parts_mapped) {
            (true, true) => "; graph mapped, parts mapped from disk",
            (true, false) => "; graph mapped",
            (false, true) => "; parts mapped from disk",
            (false, false) => "",
        };
        eprintln!(
            "prepared  split and partition in {:.1}s{mapped}",
            t_prepare.elapsed().as_secs_f64()
        );
    }
    if let (Some(rep), false) = (&prep.report, quiet) {
        eprintln!("{}", rep.to_table());
    }
    let cfg_warn = run.warnings().to_vec();
    for w in &cfg_warn {
        eprintln!("warning: {w}");
    }
    interrupted_early("before training started")?;
    let prep = run.prepared().expect("prepared");
    if !quiet {
        let m = prep.trainers.len().max(cfg.effective_trainers());
        let checks = if cfg.val_check_interval.is_zero() {
            String::new()
        } else {
            format!(
                " (validation checks every {})",
                humantime::format_duration(cfg.val_check_interval)
            )
        };
        let ramp = ramp_text(&cfg);
        let sync = if cfg.sync_every_steps > 0 {
            format!("{} steps", cfg.sync_every_steps)
        } else {
            humantime::format_duration(cfg.sync_every).to_string()
        };
        eprintln!(
            "training  {m} trainer{}, {} model, sync every {sync}{ramp}{checks}, time limit {} -> {}",
            if m == 1 { "" } else { "s" },
            cfg.model,
            humantime::format_duration(cfg.time_limit),
            out.display()
        );
        eprintln!(
            "          (interrupted? `tma train --resume {}` continues from the last round)",
            out.display()
        );
    }

    let bar = (!quiet).then(|| {
        let b = ProgressBar::new(cfg.time_limit.as_millis() as u64);
        b.set_style(ProgressStyle::with_template("{spinner} {wide_bar} {msg}").expect("template"));
        b
    });
    let clock = run.clock();
    let done = Arc::new(AtomicBool::new(false));
    let ticker = bar.clone().map(|b| {
        let clock = clock.clone();
        let done = done.clone();
        let limit = cfg.time_limit;
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let e = clock.elapsed().min(limit);
                b.set_position(e.as_millis() as u64);
                b.set_message(format!(
                    "{:.0}s / {:.0}s",
                    e.as_secs_f64(),
                    limit.as_secs_f64()
                ));
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    });
    let slow_round = match &flags.debug_slow_round {
        Some(s) => Some(parse_duration("debug-slow-round", s)?),
        None => None,
    };
    let mut printer = Printer {
        bar: bar.clone(),
        slow_round,
        said_diverged: false,
    };
    #[cfg(feature = "mpi")]
    let (result, job_end) = match mpi_slot.take().filter(|_| mpi_ctx) {
        Some(ctx) => crate::mpi_run::run_coordinator(ctx, run, &mut printer),
        None => (run.train(&mut printer).map_err(anyhow::Error::from), None),
    };
    #[cfg(not(feature = "mpi"))]
    let (result, job_end): (_, JobEndSlot) =
        (run.train(&mut printer).map_err(anyhow::Error::from), None);
    done.store(true, Ordering::Relaxed);
    if let Some(t) = ticker {
        let _ = t.join();
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            if job_end.is_some() {
                eprintln!("error: {e:#}");
                end_mpi_job(job_end, 1);
            }
            return Err(e);
        }
    };
    let s = &result.summary;
    println!(
        "done: {} rounds in {:.1}s; final val {}={:.4} test={:.4}; best ({}) val={:.4} test={:.4}",
        s.rounds,
        s.train_time_s,
        s.final_val.metric,
        s.final_val.value,
        s.final_test.value,
        if s.best_check {
            format!("check after round {}", s.best_round)
        } else {
            format!("round {}", s.best_round)
        },
        s.best_val.value,
        s.best_test.value
    );
    if let (Some(v), Some(t)) = (
        s.best_val.all.get("majority_rate"),
        s.best_test.all.get("majority_rate"),
    ) {
        // a model stuck at the majority class shows as accuracy == this rate
        println!("majority-class rate: val={v:.4} test={t:.4} (accuracy of always predicting the most frequent training class)");
    }
    if let (Some(v), Some(t), true) = (
        s.best_val.all.get("macro_f1"),
        s.best_test.all.get("macro_f1"),
        s.best_test.all.contains_key("micro_f1_at_logit0"),
    ) {
        println!("best macro_f1: val={v:.4} test={t:.4} (multi-label: each node's top-k labels, k = its true label count)");
    }
    println!("best model, test: {}", metrics_line(&s.best_test.all));
    if let (true, Some(&m)) = (s.metric == "accuracy", s.best_val.all.get("majority_rate")) {
        if s.best_val.value <= m {
            eprintln!(
                "warning: the best model by validation accuracy ({:.4}) does not beat always predicting the majority class ({m:.4}); --metric macro_f1{} ranks models by more than the frequent class",
                s.best_val.value,
                if s.best_val.all.contains_key("roc_auc") { " or roc_auc" } else { "" }
            );
        }
    }
    if let Some(note) = validation_share_note(&result.rounds, s.train_time_s, &cfg) {
        eprintln!("{note}");
    }
    if !s.failed_trainers.is_empty() {
        println!("failed trainers: {}", failed_list(&s.failed_trainers));
    }
    // recorded in summary.json warnings (tma_train::run)
    for w in tma_train::record::absent_trainer_warnings(
        &result.rounds,
        s.num_trainers,
        &s.failed_trainers,
        cfg.sync_every,
        cfg.round_timeout,
    ) {
        eprintln!("warning: {w}");
    }
    println!("run directory: {}", out.display());
    let lost = s.interrupted_by == Some(StopCause::TrainersLost);
    if lost {
        println!(
            "incomplete: every trainer was lost before the {} time limit; stopped after round {} at t={:.1}s; checkpoint and summary (marked interrupted) written to {}",
            humantime::format_duration(cfg.time_limit),
            s.rounds,
            s.train_time_s,
            out.display()
        );
        println!("resume with: tma train --resume {}", out.display());
    } else if s.interrupted {
        println!(
            "interrupted: stopped after round {} at t={:.1}s; checkpoint and summary (marked interrupted) written to {}",
            s.rounds,
            s.train_time_s,
            out.display()
        );
        println!("resume with: tma train --resume {}", out.display());
    }

    if !quiet {
        for m in &s.memory {
            eprintln!("memory: {}", m.line());
        }
    }
    if s.interrupted {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        // 130 / 143: stopped on request (Ctrl-C / SIGTERM); 1: an incomplete run, an error
        let code = if lost {
            1
        } else {
            crate::interrupt::exit_code()
        };
        end_mpi_job(job_end, code);
        std::process::exit(code);
    }
    end_mpi_job(job_end, 0);
    Ok(())
}

/// Rank 0 of an MPI job that lost a rank: the job's end, which rank 0 carries out once the
/// run is printed (`crate::mpi_run::JobEnd`); never anything without the `mpi` feature.
#[cfg(feature = "mpi")]
type JobEndSlot = Option<crate::mpi_run::JobEnd>;
#[cfg(not(feature = "mpi"))]
type JobEndSlot = Option<std::convert::Infallible>;

/// Ends the MPI job with exit status `code` when `job_end` holds one (never returns then).
fn end_mpi_job(job_end: JobEndSlot, code: i32) {
    #[cfg(feature = "mpi")]
    if let Some(j) = job_end {
        j.end(code)
    }
    #[cfg(not(feature = "mpi"))]
    if let Some(never) = job_end {
        let _ = code;
        match never {}
    }
}

/// What happens to `--split-index` when it was given on the command line (`flags`) and does
/// not pick a split: a link task, or a dataset without several fixed mask splits. (An index
/// beyond the dataset's splits is a loading error.)
pub(crate) fn split_index_warnings(
    flags: &TrainOpts,
    cfg: &TrainConfig,
    ds: Option<&Dataset>,
) -> Vec<String> {
    let Some(i) = flags.split_index else {
        return Vec::new();
    };
    if cfg.task == Task::Link {
        return vec![format!(
            "--split-index {i} is ignored: --task link splits edges (--val-frac/--test-frac), not nodes"
        )];
    }
    match ds.map(|d| d.num_splits) {
        Some(0) => vec![format!(
            "--split-index {i} is ignored: the dataset ships no fixed split; a seeded 60/20/20 split of its labelled nodes is used"
        )],
        _ => Vec::new(),
    }
}

fn cfg_task_is_node(cfg: &TrainConfig) -> bool {
    cfg.task == Task::Node
}

/// Every metric of an evaluation as `accuracy=0.8123 macro_f1=0.5012 ...` (`-` where undefined).
pub(crate) fn metrics_line(all: &std::collections::BTreeMap<String, f64>) -> String {
    all.iter()
        .map(|(k, v)| {
            if v.is_finite() {
                format!("{k}={v:.4}")
            } else {
                format!("{k}=-")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `[(1, 4.02)]` as `trainer 1 at 4.0s` (a trainer that panicked has no time: `at ?`).
pub(crate) fn failed_list(failed: &[(usize, f64)]) -> String {
    failed
        .iter()
        .map(|(t, at)| {
            if at.is_finite() {
                format!("trainer {t} at {at:.1}s")
            } else {
                format!("trainer {t} at ?")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Options of `tma info`.
#[derive(Args, Debug)]
pub struct InfoOpts {
    /// Dataset (.npy layout, the on-disk format of docs/graph-format.md, which is mapped, not
    /// loaded, an OGB directory, a SNAP or CSV edge list, a .npz file). Omitted: the generated
    /// graph.
    #[arg(long, value_name = "PATH")]
    pub dataset: Option<PathBuf>,
    /// Format of --dataset: tma, ogb, snap, npz or csv. Default: detected from the path.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<Format>,
    /// Read an edge-list dataset as undirected (every arc gets its reverse).
    #[arg(long)]
    pub undirected: bool,
    /// Nodes of the generated graph when no --dataset is given.
    #[arg(long, value_name = "N")]
    pub gen_nodes: Option<usize>,
    /// Accept a fixed split whose train/val/test lists share nodes.
    #[arg(long)]
    pub allow_split_overlap: bool,
    /// On-disk format only: also scan every file's contents (ids in range, sorted rows, ...).
    #[arg(long)]
    pub validate: bool,
    /// On-disk format only: --validate, and recompute every file's SHA-256.
    #[arg(long)]
    pub verify: bool,
}

pub fn info(o: InfoOpts) -> Result<()> {
    if let Some(dir) = o
        .dataset
        .as_deref()
        .filter(|d| tma_graph::is_disk_graph(d) && matches!(o.format, None | Some(Format::Tma)))
    {
        return crate::scale_cmd::info_mapped(dir, o.validate, o.verify);
    }
    if o.validate || o.verify {
        anyhow::bail!("--validate and --verify apply to a graph in the on-disk format (a directory with tma-graph.json)");
    }
    let cfg = TrainConfig {
        allow_split_overlap: o.allow_split_overlap,
        ..TrainConfig::default()
    };
    let ds = load(
        &o.dataset,
        read_options(o.format, Some(o.undirected)),
        o.gen_nodes,
        &cfg,
    )?;
    println!("{}", ds.summary());
    println!(
        "removed on load: {} self-loops, {} duplicate arcs",
        ds.removed.self_loops, ds.removed.duplicate_arcs
    );
    if let Some(w) = ds.removed.warning() {
        eprintln!("warning: {w}");
    }
    match &ds.split {
        Some(s) => {
            let unl = |l: &[u32]| {
                l.iter()
                    .filter(|&&v| !ds.labels.is_labelled(v as usize))
                    .count()
            };
            let what = match ds.num_splits {
                0 => "split (generated, seeded 60/20/20)".to_string(),
                1 => "split".to_string(),
                k => format!("split 0 of {k} (--split-index picks one)"),
            };
            println!(
                "{what}: train {} / val {} / test {}",
                s.train.len(),
                s.val.len(),
                s.test.len()
            );
            let (a, b, c) = (unl(&s.train), unl(&s.val), unl(&s.test));
            if a + b + c > 0 && matches!(ds.labels, tma_graph::Labels::Classes { .. }) {
                eprintln!(
                    "warning: split: {a} train / {b} val / {c} test nodes are unlabelled (y = -1); training and metrics skip them"
                );
            }
        }
        None => println!("split: none fixed (tma train --task node makes a seeded 60/20/20 split)"),
    }
    Ok(())
}

/// `tma partition --method`: the partitioners, each also accepted under the name of the
/// `tma train --method` that uses it (clap aliases, so either spelling parses to the same value).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartitionMethodArg {
    /// Every node to a uniformly random part (alias: random-tma, the RandomTMA partition)
    #[value(alias = "random-tma")]
    Random,
    /// METIS super-nodes shuffled into parts, --super-nodes K (alias: super-tma, the SuperTMA partition)
    #[value(alias = "super-tma")]
    Super,
    /// METIS M-way edge-balanced parts (alias: psgd-pa, the PSGD-PA and LLCG partition)
    #[value(alias = "psgd-pa")]
    Metis,
}

impl PartitionMethodArg {
    /// The training method that uses this partition (its layout gives the partitioner).
    pub fn method(self) -> Method {
        match self {
            PartitionMethodArg::Random => Method::RandomTma,
            PartitionMethodArg::Super => Method::SuperTma,
            PartitionMethodArg::Metis => Method::PsgdPa,
        }
    }
}

/// Options of `tma partition`.
#[derive(Args, Debug)]
pub struct PartitionOpts {
    /// Dataset (.npy layout or on-disk format, an OGB directory, a SNAP or CSV edge list, a
    /// .npz file). Omitted: the generated graph.
    #[arg(long, value_name = "PATH")]
    pub dataset: Option<PathBuf>,
    /// Format of --dataset: tma, ogb, snap, npz or csv. Default: detected from the path.
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<Format>,
    /// Read an edge-list dataset as undirected (every arc gets its reverse).
    #[arg(long)]
    pub undirected: bool,
    /// Nodes of the generated graph when no --dataset is given. Default: 10000.
    #[arg(long, value_name = "N")]
    pub gen_nodes: Option<usize>,
    /// Partitioner: random (= random-tma), super (= super-tma) or metis (= psgd-pa); the `tma train --method` names are accepted too.
    #[arg(long, value_enum, default_value = "random")]
    pub method: PartitionMethodArg,
    /// Number of parts M (also --num-parts), at least 1.
    #[arg(long = "parts", visible_alias = "num-parts", default_value_t = 4,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub num_parts: usize,
    /// Extra parts given to no one.
    #[arg(long, default_value_t = 0)]
    pub drop_parts: usize,
    /// Super-nodes K (method super).
    #[arg(long, default_value_t = 1000)]
    pub super_nodes: usize,
    /// Clustering of methods super and metis: metis, lpa (size-constrained label propagation over the graph in place, for graphs METIS cannot take) or auto (metis up to 2^25 arcs, lpa above). With --memory-budget, auto takes lpa where METIS' estimated peak (80 bytes per arc + 64 per node) exceeds the budget, and metis over it is refused; the choice is printed and recorded in the manifest's report. Default: auto.
    #[arg(long, value_name = "CLUSTERING")]
    pub super_clustering: Option<tma_partition::Clustering>,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write the per-part statistics as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a partition directory here (manifest.json, coordinator/, part-NNN/; see
    /// `tma_train::store`) for `tma train --partitions DIR` (either engine). The split is made
    /// as `tma train` makes it for --task with the default fractions, so metrics compare.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Task the partition directory is for (with --out): link or node.
    #[arg(long, default_value = "node")]
    pub task: Task,
    /// Scale each feature row to sum 1 before writing (with --out; as `tma train --normalize-features`).
    #[arg(long)]
    pub normalize_features: bool,
    /// Accept a fixed split whose train/val/test lists share nodes.
    #[arg(long)]
    pub allow_split_overlap: bool,
    /// With --out on a graph in the on-disk format: refuse to build the parts (before any is
    /// written) when the process's anonymous memory after the split and partition plus the
    /// estimated build of the parts, one at a time, exceeds SIZE (e.g. 512MiB, 2GiB); choose
    /// the clustering within it (--super-clustering auto: lpa where METIS would not fit). The
    /// peak is printed against it at the end.
    #[arg(long, value_name = "SIZE", value_parser = crate::scale_cmd::parse_bytes, allow_hyphen_values = true)]
    pub memory_budget: Option<u64>,
}

pub fn partition(o: PartitionOpts) -> Result<()> {
    // the check `tma train --method super-tma` makes (TrainConfig::validate), with or without
    // --out: fewer super-nodes than parts leaves parts empty
    if matches!(o.method, PartitionMethodArg::Super) && o.super_nodes < o.num_parts + o.drop_parts {
        anyhow::bail!(
            "--super-nodes ({}) must be >= --parts + --drop-parts ({}): every part gets whole super-nodes",
            o.super_nodes,
            o.num_parts + o.drop_parts
        );
    }
    let on_disk = o.dataset.as_deref().is_some_and(|d| {
        tma_graph::is_disk_graph(d) && matches!(o.format, None | Some(Format::Tma))
    });
    if let Some(b) = o.memory_budget {
        if o.out.is_none() || !on_disk {
            anyhow::bail!(
                "--memory-budget {:.0} MiB applies to `tma partition --out` on a graph in the on-disk format (`tma convert --to disk`, `tma generate`), whose parts are streamed to disk; {}",
                b as f64 / (1u64 << 20) as f64,
                if o.out.is_none() {
                    "without --out nothing is built (the partition of an on-disk graph is computed in place)"
                } else {
                    "this dataset is read into memory whole"
                }
            );
        }
    }
    if let (Some(c), PartitionMethodArg::Random) = (o.super_clustering, o.method) {
        eprintln!(
            "warning: --super-clustering {c} is ignored: --method random clusters nothing (only super and metis do)"
        );
    }
    if let Some(out) = &o.out {
        let mut cfg = crate::dist::partition_config(
            o.method.method(),
            o.task,
            o.num_parts,
            o.drop_parts,
            o.super_nodes,
            o.seed,
            o.normalize_features,
        )?;
        cfg.allow_split_overlap = o.allow_split_overlap;
        cfg.super_clustering = o.super_clustering.unwrap_or_default();
        // signals are caught before the staging folder exists (one arriving between the two
        // killed the process and left the folder behind); the watcher acts on it once started
        crate::interrupt::catch_signals();
        // --out is checked (and its staging folder made) before the data is loaded
        let writer = tma_train::store::PartitionWriter::create(out).context("--out")?;
        if writer.removed_stale_staging() {
            eprintln!(
                "note: removed {}, the unfinished staging folder of an earlier run that was killed",
                writer.staging().display()
            );
        }
        crate::interrupt::remove_on_interrupt(
            writer.staging().to_path_buf(),
            out.clone(),
            writer.abort_flag(),
        );
        tma_train::memory::start_sampler();
        let ds = load(
            &o.dataset,
            read_options(o.format, Some(o.undirected)),
            o.gen_nodes,
            &cfg,
        )?;
        println!("{}", ds.summary());
        let t = std::time::Instant::now();
        if let Some(w) = ds.removed.warning() {
            eprintln!("warning: {w}");
        }
        if ds.graph.indices.is_mapped() {
            eprintln!(
                "graph mapped from disk: each part is built in turn and streamed to {}",
                out.display()
            );
        }
        let (m, warnings) =
            crate::dist::write_partitions(ds, &cfg, writer, o.memory_budget, |p| {
                eprintln!(
                    "  part-{:03} ({}/{}): {} nodes, {} arcs, {:.1} MiB streamed in {:.2}s",
                    p.trainer,
                    p.trainer + 1,
                    p.num_parts,
                    p.num_nodes,
                    p.num_edges,
                    p.bytes as f64 / (1u64 << 20) as f64,
                    p.secs
                );
            })?;
        // under --memory-budget: which clustering ran and why (also in the manifest's report)
        if let Some(line) = m
            .report
            .as_ref()
            .and_then(|r| r.get("clustering_choice"))
            .and_then(|l| l.as_str())
        {
            eprintln!("{line}");
        }
        println!(
            "wrote {} ({} parts, task {}) in {:.2}s; manifest sha256 {}",
            out.display(),
            m.parts.len(),
            cfg.task,
            t.elapsed().as_secs_f64(),
            m.hash
        );
        for p in &m.parts {
            println!(
                "  {}  nodes {:>9}  edges {:>10}  train {:>9}  {:>8.1} MiB",
                p.dir,
                p.num_nodes,
                p.num_edges,
                p.num_train,
                p.size_bytes as f64 / (1 << 20) as f64
            );
        }
        if let Some(rep) = &m.report {
            if let Some(line) = rep.get("clustering_line").and_then(|l| l.as_str()) {
                println!("{line}");
            }
            if let Some(kept) = rep.get("total_edge_fraction_kept").and_then(|k| k.as_f64()) {
                println!(
                    "arcs kept by the parts: {:.4} of {} (the rest cross parts)",
                    kept, m.num_edges
                );
            }
        }
        for w in &warnings {
            eprintln!("warning: {w}");
        }
        let idle: Vec<&str> = m
            .parts
            .iter()
            .filter(|p| p.num_train == 0)
            .map(|p| p.dir.as_str())
            .collect();
        // none with training examples: the preparation's line above says so (and why)
        if !idle.is_empty() && idle.len() < m.parts.len() {
            eprintln!(
                "warning: {} {} no training {}: written anyway; `tma train` runs such a trainer with weight 0",
                idle.join(", "),
                if idle.len() == 1 { "has" } else { "have" },
                if cfg.task == Task::Link { "edges" } else { "nodes" }
            );
        }
        let mem = tma_train::memory::ProcessMemory::this_process("partition", None, None);
        match o.memory_budget {
            Some(b) => eprintln!(
                "{} (--memory-budget {:.0} MiB)",
                mem.line(),
                b as f64 / (1u64 << 20) as f64
            ),
            None => eprintln!("{}", mem.line()),
        }
        if let Some(path) = o.json {
            write_json(&path, &m)?;
        }
        return Ok(());
    }
    if let Some(dir) = o.dataset.as_deref().filter(|d| tma_graph::is_disk_graph(d)) {
        return partition_mapped(&o, dir);
    }
    let ds = load(
        &o.dataset,
        read_options(o.format, Some(o.undirected)),
        o.gen_nodes,
        &TrainConfig {
            allow_split_overlap: o.allow_split_overlap,
            ..TrainConfig::default()
        },
    )?;
    let pcfg = partition_config(&o);
    let t = std::time::Instant::now();
    let p = tma_partition::partition(&ds.graph, &pcfg)?;
    let secs = t.elapsed().as_secs_f64();
    let labels = match &ds.labels {
        tma_graph::Labels::Classes { y, num_classes } => Some((y.as_slice(), *num_classes)),
        _ => None,
    };
    let rep = tma_partition::partition_report(&ds.graph, &p, labels);
    println!("{}", ds.summary());
    println!("{}", rep.to_table());
    for w in ds.removed.warning().iter().chain(&rep.warnings) {
        eprintln!("warning: {w}");
    }
    println!(
        "partitioned in {secs:.2}s; assignment sha256 {}",
        p.hash_hex()
    );
    if let Some(path) = o.json {
        write_json(&path, &rep)?;
    }
    Ok(())
}

/// The partitioner's configuration for `tma partition`'s options (the method's layout as
/// `tma train` would make it).
fn partition_config(o: &PartitionOpts) -> tma_partition::PartitionConfig {
    let tcfg = TrainConfig {
        method: o.method.method(),
        super_nodes: o.super_nodes,
        super_clustering: o.super_clustering.unwrap_or_default(),
        num_trainers: o.num_parts,
        drop_parts: o.drop_parts,
        seed: o.seed,
        ..TrainConfig::default()
    };
    tma_train::training_method(tcfg.method)
        .layout(&tcfg)
        .partition_config(&tcfg)
        .expect("every --method of tma partition partitions")
}

/// `tma partition --dataset DIR` (no --out) on a graph in the on-disk format: the CSR is
/// memory-mapped and partitioned and measured in place (nothing copied into memory but the
/// partitioner's `O(N)` arrays and the report's), then the peak RSS is printed.
fn partition_mapped(o: &PartitionOpts, dir: &Path) -> Result<()> {
    let g = tma_graph::MappedGraph::open(dir)?;
    println!("{}", g.summary());
    let pcfg = partition_config(o);
    let t = std::time::Instant::now();
    let p = tma_partition::partition_ref(g.csr(), &pcfg)?;
    let secs = t.elapsed().as_secs_f64();
    let labels = g.class_labels().map(|y| {
        let classes = y.iter().map(|&c| c + 1).max().unwrap_or(0).max(0) as usize;
        (y, classes)
    });
    let rep = tma_partition::partition_report_ref(g.csr(), &p, labels);
    println!("{}", rep.to_table());
    for w in &rep.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(peak) = tma_graph::memory::peak_rss_bytes() {
        let file = tma_graph::memory::file_bytes().unwrap_or(0);
        let mib = tma_graph::memory::mib;
        eprintln!(
            "peak RSS {:.1} MiB (VmHWM), of which mapped file pages {:.1} MiB (RssFile now): about {:.1} MiB anonymous",
            mib(peak),
            mib(file),
            mib(peak.saturating_sub(file))
        );
    }
    println!(
        "partitioned in {secs:.2}s (graph memory-mapped); assignment sha256 {}",
        p.hash_hex()
    );
    if let Some(path) = &o.json {
        write_json(path, &rep)?;
    }
    Ok(())
}

fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<()> {
    tma_train::output::write_atomic(path, &serde_json::to_vec_pretty(v)?)
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_share_note_names_the_share_and_the_remedy() {
        let rec = |cpu: f64, check: bool| RoundRecord {
            round: 1,
            elapsed_s: 1.0,
            participants: vec![0],
            missing: vec![],
            steps: vec![1],
            epochs: vec![0],
            train_loss: 0.5,
            val: tma_train::EvalResult {
                metric: "mrr".into(),
                value: 0.5,
                all: Default::default(),
            },
            eval_s: cpu,
            eval_cpu_s: cpu,
            is_best: false,
            skipped_slots: 0,
            check,
        };
        let cfg = tma_train::TrainConfig {
            threads: 2,
            ..tma_train::TrainConfig::default()
        };
        // 1.4 core-s per 10 s round on 2 cores: 7%, no note
        let rounds: Vec<RoundRecord> = (0..6).map(|_| rec(1.4, false)).collect();
        assert_eq!(validation_share_note(&rounds, 60.0, &cfg), None);
        // checks every 2 s: 30 validations of 1.4 core-s in 60 s on 2 cores = 35%
        let rounds: Vec<RoundRecord> = (0..30).map(|i| rec(1.4, i % 5 != 4)).collect();
        let n = validation_share_note(&rounds, 60.0, &cfg).unwrap();
        assert_eq!(
            n,
            "note: validation took 35% of the 2 cores' time (42.0 core-s over 30 validations, 24 of them checks between rounds), time the trainers did not train; a longer --val-check-interval (or none), --eval-every K or a smaller --eval-max-edges / --eval-max-nodes leaves more to training"
        );
        // rounds only, validated every round: the remedy is fewer or smaller validations
        let rounds: Vec<RoundRecord> = (0..6).map(|_| rec(4.0, false)).collect();
        assert!(validation_share_note(&rounds, 60.0, &cfg)
            .unwrap()
            .ends_with("--eval-every K or a smaller --eval-max-edges / --eval-max-nodes leaves more to training"));
    }

    #[test]
    fn round_line_loss_and_failed_trainers_are_readable() {
        // regression (issue 11): `loss=NaN` for a round without a step; raw tuples for failures
        assert_eq!(loss_text(f64::NAN), "-");
        assert_eq!(loss_text(f64::INFINITY), "-");
        assert_eq!(loss_text(0.012345), "0.0123");
        // regression: rounds skipped behind a slow validation were not said
        assert_eq!(
            skipped_text(3),
            "3 averaging slots skipped: the round formed late (validation or trainers behind)"
        );
        assert_eq!(
            skipped_text(1),
            "1 averaging slot skipped: the round formed late (validation or trainers behind)"
        );
        assert_eq!(
            failed_list(&[(1, 4.018577031), (3, f64::NAN)]),
            "trainer 1 at 4.0s, trainer 3 at ?"
        );
    }

    #[test]
    fn config_file_keys_are_the_library_option_names() {
        // the Python package's keyword arguments go through TrainConfig::from_options: every
        // training option of a config file must be one of its keys, and every key an option
        let all = TrainOpts {
            num_trainers: Some(1),
            ..Default::default()
        };
        let v = serde_json::to_value(&all).unwrap();
        let run_level = [
            "dataset",
            "fail",
            "gen_nodes",
            "out",
            "partitions",
            "engine",
            "join_timeout",
            // how the dataset file is read: in Python, Dataset.load(path, format=, undirected=)
            "format",
            "undirected",
        ];
        let mut keys: Vec<String> = v
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| !run_level.contains(&k.as_str()))
            .cloned()
            .collect();
        keys.sort();
        assert_eq!(keys, TrainConfig::option_names());
        // the aliases the TOML file accepts are the library's
        for (alias, key) in tma_train::config::OPTION_ALIASES {
            let text = format!("{alias} = 3");
            let o: TrainOpts = toml::from_str(&text).unwrap();
            let v = serde_json::to_value(&o).unwrap();
            assert_eq!(v[key], 3, "{alias} -> {key}");
        }
    }
}
