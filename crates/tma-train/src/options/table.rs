//! The options of a training run, declared once: [`TABLE`]. Each row gives the option's
//! config-file key (also the Python keyword), its CLI flag and aliases, what kind of value it
//! takes (and how that value is checked), its help text, where its default comes from, which
//! runs use it, and values the library refuses (for the tests that hold every front end to
//! the same refusals). From it come `tma train --help` (the CLI sets every flag's help from
//! [`help`]), the option names and aliases the library and the Python package accept
//! ([`crate::options::config_from`]), and the option table of the README ([`markdown`]);
//! tests check that the CLI's flags, the config-file keys, [`crate::config::TrainConfig`]'s
//! fields and the Python package's keywords are exactly the rows here.

use crate::config::{AverageWeight, EvalInference, Featureless, Method, Metric, Task, TrainConfig};
use serde_json::Value;

/// Where an option lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A field of [`TrainConfig`]: a CLI flag, a config-file key and a Python keyword of
    /// `tma.train`, checked by [`crate::options::config_from`].
    Config,
    /// An option of the run around the configuration (data source, run directory, engine,
    /// failures): a CLI flag, a config-file key and a keyword of `tma.train`, each front end
    /// reads it itself.
    Run,
    /// The CLI's alone (`--config`, `--resume`, `--quiet`, how to read `--dataset`): the
    /// Python package has its own ways (`tma.resume`, `tma.Dataset.load`).
    Cli,
}

/// The kind of value an option takes: its value name in help texts and how
/// [`crate::options::config_from`] checks a given value before the configuration is built.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A non-negative integer.
    Count,
    /// A real number.
    Real,
    /// `true` or `false`.
    Bool,
    /// A wall-clock duration: `"30s"`, `"2min"`, `"1h"` (humantime).
    Duration,
    /// A byte size: `"512MiB"`, `"2GiB"` or a number of bytes ([`parse_bytes`]).
    Size,
    /// Integers, comma separated on the command line (`10,25`), a list elsewhere.
    List,
    /// One of a fixed set of names.
    Choice(&'static [&'static str]),
    /// A name checked by its type's parser (methods, encoders, metrics: the parser's error
    /// lists what is accepted).
    Name(fn(&str) -> Result<(), String>),
    /// A path.
    Path,
    /// Text read by the front end (`--fail`, `--split-index`).
    Text,
}

impl Kind {
    /// The value's placeholder in help texts and the option table.
    pub fn value_name(&self) -> &'static str {
        match self {
            Kind::Count => "N",
            Kind::Real => "X",
            Kind::Bool => "BOOL",
            Kind::Duration => "DURATION",
            Kind::Size => "SIZE",
            Kind::List => "N,N,..",
            Kind::Choice(_) | Kind::Name(_) => "NAME",
            Kind::Path => "PATH",
            Kind::Text => "TEXT",
        }
    }
}

/// Which runs use an option (the option table's "used by" column; an option given where its
/// run does not use it is warned about by [`crate::options::unused_warnings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applies {
    /// Every run.
    All,
    /// Runs of one task.
    Task(Task),
    /// Runs of the registered methods that declare this use ([`MethodsThat`]).
    Methods(MethodsThat),
    /// Runs of one encoder (`--model`).
    Encoder(&'static str),
    /// Runs of one engine (`--engine`).
    Engine(&'static str),
    /// The generated graph (no `--dataset`).
    Generated,
    /// Runs that read `--dataset`.
    Dataset,
}

impl Applies {
    /// The "used by" text of the option table.
    pub fn describe(&self) -> String {
        match self {
            Applies::All => "all".into(),
            Applies::Task(t) => format!("{t} task"),
            Applies::Methods(that) => Method::ALL
                .iter()
                .filter(|&&m| that.matches(m))
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            Applies::Encoder(e) => format!("model {e}"),
            Applies::Engine(e) => format!("engine {e}"),
            Applies::Generated => "generated graph".into(),
            Applies::Dataset => "--dataset".into(),
        }
    }
}

/// Which methods use an option, by what each declares in the method registry (its
/// [`crate::engines::method::MethodInfo`] and layout), never by its name: a method added to the
/// registry appears in the "used by" column of every option it uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MethodsThat {
    /// Train several trainers (`MethodInfo::many_trainers`): parts to drop, trainers to fail.
    TrainMany,
    /// Follow the averaging ramp (`MethodInfo::no_sync_ramp` is `None`).
    FollowTheRamp,
    /// Validate between rounds (`MethodInfo::no_validation_checks` is `None`).
    CheckBetweenRounds,
    /// Weigh the trainers' models (`MethodInfo::no_average_weight` is `None`).
    WeighModels,
    /// Lay out super-nodes (`DataLayout::uses_super_nodes`).
    UseSuperNodes,
    /// Cluster the graph for their layout (`DataLayout::clusters`).
    Cluster,
    /// Declare this option of their own (`MethodInfo::options`).
    Declare(&'static str),
}

impl MethodsThat {
    /// Whether method `m` does (its layout under the default configuration).
    pub fn matches(self, m: Method) -> bool {
        let info = m.info();
        let layout = || m.layout(&TrainConfig::default());
        match self {
            MethodsThat::TrainMany => info.many_trainers,
            MethodsThat::FollowTheRamp => info.no_sync_ramp.is_none(),
            MethodsThat::CheckBetweenRounds => info.no_validation_checks.is_none(),
            MethodsThat::WeighModels => info.no_average_weight.is_none(),
            MethodsThat::UseSuperNodes => layout().uses_super_nodes(),
            MethodsThat::Cluster => layout().clusters(),
            MethodsThat::Declare(key) => info.options.iter().any(|(k, _)| *k == key),
        }
    }
}

/// Where an option's default comes from.
#[derive(Clone, Copy, Debug)]
pub enum Default {
    /// [`TrainConfig::defaults_for`] of each task (said once when both tasks agree).
    Config,
    /// This text.
    Text(&'static str),
    /// No default is said (repeatable or optional options such as `--fail`).
    None,
}

/// One option of a training run.
#[derive(Clone, Copy, Debug)]
pub struct OptionSpec {
    /// Config-file key and Python keyword: `num_trainers`.
    pub key: &'static str,
    /// CLI flag without its dashes: `trainers`.
    pub flag: &'static str,
    /// Other names config files and Python accept: `trainers`.
    pub aliases: &'static [&'static str],
    /// Where the option lives.
    pub scope: Scope,
    /// Its kind of value.
    pub kind: Kind,
    /// What it does (without the default, which [`help`] adds).
    pub help: &'static str,
    /// Where its default comes from.
    pub default: Default,
    /// Which runs use it.
    pub applies: Applies,
    /// Values (as JSON text) that [`crate::options::config_from`] refuses for this option
    /// alone over the defaults: the parity tests feed each to every front end.
    pub invalid: &'static [&'static str],
    /// Left out of `--help` (test hooks).
    pub hidden: bool,
}

const fn row(key: &'static str, kind: Kind, help: &'static str) -> OptionSpec {
    OptionSpec {
        key,
        flag: key,
        aliases: &[],
        scope: Scope::Config,
        kind,
        help,
        default: Default::Config,
        applies: Applies::All,
        invalid: &[],
        hidden: false,
    }
}

impl OptionSpec {
    const fn flag(mut self, flag: &'static str, aliases: &'static [&'static str]) -> Self {
        self.flag = flag;
        self.aliases = aliases;
        self
    }
    const fn run(mut self, scope: Scope, default: Default) -> Self {
        self.scope = scope;
        self.default = default;
        self
    }
    const fn applies(mut self, a: Applies) -> Self {
        self.applies = a;
        self
    }
    const fn invalid(mut self, v: &'static [&'static str]) -> Self {
        self.invalid = v;
        self
    }
    const fn default_text(mut self, t: &'static str) -> Self {
        self.default = Default::Text(t);
        self
    }

    /// The CLI flag with its dashes: `--trainers`.
    pub fn cli_flag(&self) -> String {
        format!("--{}", self.flag.replace('_', "-"))
    }
}

fn parsed<T: std::str::FromStr<Err = String>>(s: &str) -> Result<(), String> {
    s.parse::<T>().map(drop)
}

fn encoder(s: &str) -> Result<(), String> {
    s.parse::<tma_nn::EncoderKind>()
        .map(drop)
        .map_err(|e| e.to_string())
}

fn clustering(s: &str) -> Result<(), String> {
    s.parse::<tma_partition::Clustering>().map(drop)
}

fn precision(s: &str) -> Result<(), String> {
    s.parse::<tma_nn::MatmulPrecision>().map(drop)
}

/// Every option of `tma train` (and `tma.train`) but the encoders' own, in the order of
/// `--help`; [`rows`] adds those from the encoder registry.
pub static TABLE: &[OptionSpec] = &[
    row("dataset", Kind::Path,
        "Dataset: a directory in the .npy layout of docs/dataset-format.md or in the on-disk format of docs/graph-format.md (mapped: the graph and dense f32 features are read in place, the parts written under the run directory and mapped by the trainers), an OGB directory, a SNAP or CSV edge list, or a .npz file (format detected; see --format).")
        .run(Scope::Run, Default::Text("a generated stochastic block model graph (see --gen-nodes)")),
    row("format", Kind::Choice(&["tma", "ogb", "snap", "npz", "csv"]),
        "Format of --dataset: tma, ogb, snap, npz or csv (docs/dataset-format.md).")
        .run(Scope::Cli, Default::Text("detected from the path"))
        .applies(Applies::Dataset),
    row("undirected", Kind::Bool,
        "Read an edge-list dataset (ogb, snap, npz, csv) as undirected: every arc gets its reverse.")
        .run(Scope::Cli, Default::Text("as the file says (a SNAP \"Undirected graph\" header, OGB's setting for the ogbn dataset, a symmetric npz adjacency), else directed"))
        .applies(Applies::Dataset),
    row("task", Kind::Name(parsed::<Task>),
        "Task: `link` (link prediction, MRR) or `node` (node classification, accuracy).")
        .default_text("node")
        .invalid(&["\"edge\""]),
    // its help is the method registry's (`rows`)
    row("method", Kind::Name(parsed::<Method>), "Training method.")
        .invalid(&["\"fast\""]),
    row("num_trainers", Kind::Count, "Number of trainers M.")
        .flag("trainers", &["trainers"])
        .invalid(&["0"]),
    row("drop_parts", Kind::Count,
        "Partition for M + d parts and give d of them to no trainer (failure experiment).")
        .applies(Applies::Methods(MethodsThat::TrainMany)),
    row("super_nodes", Kind::Count, "K, the number of super-nodes for super-tma (K >> M).")
        .applies(Applies::Methods(MethodsThat::UseSuperNodes)),
    row("super_clustering", Kind::Name(clustering),
        "Clustering behind super-tma's super-nodes and the psgd-pa / llcg parts: metis, lpa (size-constrained label propagation over the graph in place, for graphs METIS cannot take) or auto (metis up to 2^25 arcs, lpa above; `tma partition --out --memory-budget` also takes lpa where METIS' estimated peak, 80 bytes per arc + 64 per node, exceeds the budget).")
        .applies(Applies::Methods(MethodsThat::Cluster))
        .invalid(&["\"kmeans\""]),
    row("sync_every", Kind::Duration,
        "Wall-clock time between model averaging rounds, e.g. 5s, 30s, 2min (the reference release: 2min).")
        .invalid(&["\"soon\"", "\"0s\""]),
    row("sync_ramp", Kind::Count,
        "Averaging ramp: the first --sync-every span is cut into N equal spans, each ending in an averaging round (e.g. 10s with 16: rounds every 0.625 s up to 10 s, then 20, 30 s, ...): the trainers are averaged often while the model changes fastest, when their drift apart costs the average most (post-local SGD's warm-up; docs/decisions/0015-averaging-ramp.md). 0 or 1 = every span --sync-every (the paper's schedule); at most 1024; the step-count schedule (--sync-every-steps) has none.")
        .applies(Applies::Methods(MethodsThat::FollowTheRamp))
        .invalid(&["2000"]),
    row("val_check_interval", Kind::Duration,
        "Validate between averaging rounds every DURATION (shorter than --sync-every), e.g. 2s: the mean of the trainers' current parameters, the model a round formed then would give, which the trainers do not receive (training is unchanged). Recorded as `check` lines and `\"check\": true` rows of rounds.jsonl; a check may be the best model. Skipped while the previous validation still runs. Each check is one more validation on the trainers' cores, never skipped by --eval-every. Model-averaging methods (not ggs, llcg), in-process trainers. 0 = off (validation at rounds).")
        .applies(Applies::Methods(MethodsThat::CheckBetweenRounds))
        .invalid(&["\"1h\""]),
    row("plateau_patience", Kind::Count,
        "Plateau hold: after N validations in a row (rounds and checks) more than 5% below the best, the coordinator sends the trainers the best model back and from then on applies only half (then a quarter, ...) of each round's update, from the model it sent last towards the round's average (a server step, halved at each such fall), so a run that over-fits stays near its best model (docs/decisions/0037-plateau-hold.md). Said in one line and in rounds.jsonl (`restored`, `server_step`). 0 = off: the paper's plain mean throughout. Model-averaging methods on the wall-clock schedule (not --sync-every-steps).")
        .applies(Applies::Methods(MethodsThat::FollowTheRamp)),
    row("time_limit", Kind::Duration,
        "Wall-clock training budget, e.g. 30s, 10min, 4h: the last round forms at it; the validations still running then and the final test come after it; a resumed run (--resume) counts the training time before its interruption, so this is the total (the reference release: 4h).")
        .invalid(&["\"0s\"", "\"later\""]),
    row("sync_every_steps", Kind::Count,
        "Step-count schedule: average every N optimizer steps per trainer instead of every --sync-every (for comparisons; 0 = wall-clock); --sync-every then sets only how long an MPI rank may be silent (said when given), and --val-check-interval is refused with it."),
    row("round_timeout", Kind::Duration,
        "Per-round deadline: the coordinator waits at most this long after calling a round for the trainers in step with the previous one; a trainer that has not answered (dead, stalled, slow) misses the round, is not waited for again, and rejoins with the current model once it answers. Must exceed one step (with --sync-every-steps: that many). MPI: a rank silent for 4 x (sync-every + round-timeout) is considered lost.")
        .invalid(&["\"soon\"", "\"0s\""]),
    row("llcg_steps", Kind::Count,
        "LLCG: global correction mini-batch steps on the full graph after each averaging.")
        .applies(Applies::Methods(MethodsThat::Declare("llcg_steps"))),
    row("average_weight", Kind::Name(parsed::<AverageWeight>),
        "Weighting of the model average: uniform (the paper's plain mean), nodes or edges.")
        .applies(Applies::Methods(MethodsThat::WeighModels))
        .invalid(&["\"degree\""]),
    // its help is the encoder registry's (`rows`)
    row("model", Kind::Name(encoder), "Encoder.")
        .invalid(&["\"llama\""]),
    row("hidden", Kind::Count, "Hidden width.").invalid(&["0"]),
    row("num_layers", Kind::Count, "Number of GNN layers.")
        .flag("layers", &["layers"])
        .invalid(&["0"]),
    row("dropout", Kind::Real,
        "Dropout probability after each hidden layer, in [0, 1): for node classification the field's setting for GraphSAGE / GCN (docs/decisions/0016-node-dropout.md), none for link prediction (the reference release).")
        .invalid(&["1.0", "-0.1"]),
    row("layer_norm", Kind::Bool,
        "LayerNorm between layers (true, the reference release's stack) or not (false, as Kipf & Welling's GCN)."),
    row("matmul_precision", Kind::Name(precision),
        "Precision of the model's dense matrix products (PyTorch's names): highest (f32) or medium (bf16 operands, f32 sums, on Intel AMX or AVX512_BF16 (AMD Zen 4 or later): the link decoder and the encoder's linear layers on dense inputs, for faster steps and validation; f32 where the CPU has neither, with a warning; summary.json's matmul_products says which ran).")
        .invalid(&["\"low\""]),
    row("fanouts", Kind::List,
        "Neighbour fanouts, hop nearest the seeds first, comma separated; 0 = all neighbours (one per layer).")
        .invalid(&["[10]"]),
    row("batch_size", Kind::Count,
        "Mini-batch size: positive edges (link) or seed nodes (node) (the reference release: 65536 edges, on a GPU); with --exclude-targets on, at most a quarter of a trainer's training edges.")
        .invalid(&["0"]),
    row("lr", Kind::Real, "Adam learning rate.").invalid(&["0", "-1"]),
    row("weight_decay", Kind::Real,
        "L2 weight decay added to gradients before Adam (PyTorch semantics).")
        .invalid(&["-0.5"]),
    row("clip_norm", Kind::Real, "Gradient-clipping max norm (applied from --clip-from-epoch).")
        .invalid(&["0"]),
    row("clip_from_epoch", Kind::Count, "First epoch (1-based) with gradient clipping."),
    row("warmup_steps", Kind::Count,
        "Linear learning-rate warm-up over the first N optimizer steps of each trainer (lr * step / N; 0 = constant lr, the reference release); for link prediction Adam's first full step overshoots without it."),
    row("num_neg", Kind::Count, "Uniform negatives per positive edge in training.")
        .applies(Applies::Task(Task::Link))
        .invalid(&["0"]),
    row("exclude_targets", Kind::Bool,
        "Leave each training step's positive edges (both directions) out of the neighbourhoods it samples, as DGL's exclude=\"reverse_id\": the model never aggregates the edge it predicts, as it never can for a held-out one. Not given: on exactly when the graph has no node features (its generated structural inputs' random columns otherwise let the model detect the target edge, and validation MRR fell while the loss fell), off with the graph's own features (excluding cost 1-4 MRR points there), said in a line. With exclusion on, a step takes at most a quarter of its trainer's training edges, whatever --batch-size says (a whole small part as one batch would leave the step no neighbour), said in a line (docs/decisions/0028-exclude-target-edges.md).")
        .applies(Applies::Task(Task::Link))
        .default_text("auto (true without node features, false with them)"),
    row("eval_num_neg", Kind::Count, "Fixed negatives per positive for MRR.")
        .applies(Applies::Task(Task::Link))
        .invalid(&["0"]),
    row("eval_max_edges", Kind::Count,
        "At most this many validation and test positives (each is ranked against --eval-num-neg negatives; every round validates them, so they cost CPU time the trainers share).")
        .applies(Applies::Task(Task::Link))
        .invalid(&["0"]),
    row("eval_every", Kind::Count,
        "Validate every K-th round's model (and always the last round's); rounds in between are recorded without validation, so validation at rounds takes 1/K of the CPU time the trainers share. Under the wall-clock schedule a round is also recorded without validation while the last validation took (or one still queued or running has taken) more than a quarter of the time since the one before it was started (a 30M-arc link run validated ~12 s of every ~12 s round; docs/decisions/0036-validation-share.md); checks between rounds (--val-check-interval) are always validated (1 = every round).")
        .invalid(&["0"]),
    row("eval_inference", Kind::Name(parsed::<EvalInference>),
        "How evaluation computes the model's outputs on the nodes it reads (the val/test nodes; the endpoints of the held-out positives and their negatives), all exact: `restricted` = only on their L-hop neighbourhoods, layer by layer within --eval-memory; `full` = layer-wise over every node; `auto` = whichever costs less (full only if it fits --eval-memory).")
        .invalid(&["\"fast\""]),
    row("eval_memory", Kind::Size,
        "Memory restricted (or sampled) evaluation may take: its stored rows and one chunk's blocks and activations (e.g. 256MiB, 2GiB; at least 16MiB). A smaller budget cuts the nodes into more groups whose shared neighbourhoods are computed again: validation gets slower (measured on a 25M-arc graph: 64MiB took ~8x the core-seconds of 1GiB), and the run lasts past --time-limit while the rounds it formed are validated.")
        .invalid(&["\"lots\"", "\"1MiB\""]),
    row("eval_fanouts", Kind::List,
        "Sampled evaluation: per-layer fanouts, hop nearest the evaluated nodes first, comma separated; 0 = all neighbours. An estimate instead of exact inference, for graphs where exact costs too much (docs/decisions/0012-restricted-evaluation.md).")
        .default_text("exact (no sampling)")
        .invalid(&["[5, 5, 5]"]),
    row("eval_max_nodes", Kind::Count,
        "Validate every round on a fixed, seeded subset of at most N validation nodes (node task) or validation positives with their negatives (link task) when the split is larger; the final test uses the whole test split (no effect on graphs below ~1M nodes).")
        .invalid(&["0"]),
    row("val_frac", Kind::Real, "Fraction of edges held out for validation.")
        .applies(Applies::Task(Task::Link))
        .invalid(&["-0.1", "0.99"]),
    row("test_frac", Kind::Real, "Fraction of edges held out for test.")
        .applies(Applies::Task(Task::Link))
        .invalid(&["-0.1"]),
    row("normalize_features", Kind::Bool,
        "Scale each node's feature row to sum 1 (PyG NormalizeFeatures; standard for Planetoid)."),
    row("featureless", Kind::Name(parsed::<Featureless>),
        "Inputs of a graph without node features: degree (the standardized ln(1 + degree) and a constant column of ones, 2 columns: docs/decisions/0032-a-constant-column-beside-the-degree.md), degree-random (the degree column and 31 fixed random columns, node identities: 32 columns) or auto (degree-random where each trainer has at least 256 training nodes (node task) or 4096 training edges (link task), as its part holds them (a random partition into P parts keeps about 1/P^2 of the edges in each), else degree: fewer are learned by heart; and for the link task degree where the degree product ranks sampled training edges at least 0.75 as well as common neighbours do (MRR over 1000 edges, 100 negatives each), since the random columns are there to show neighbourhood overlap; said in one line, and recorded in the model files for tma eval; docs/decisions/0031-featureless-inputs-by-supervision.md, 0033, 0034, 0035).")
        .invalid(&["\"random\""]),
    row("split_index", Kind::Count,
        "Which of a dataset's fixed mask splits to use (node), or `all` (CLI): one run per fixed split in RUN_DIR/split-K/, then the mean +- std over splits of the best-validation model's test metric, printed and written to RUN_DIR/splits.json.")
        .applies(Applies::Task(Task::Node)),
    row("metric", Kind::Name(parsed::<Metric>),
        "Validation metric that selects the best model: auto (accuracy for multi-class, roc_auc for 2 classes, micro_f1 for multi-label, mrr for link), accuracy, macro_f1, roc_auc, micro_f1, mrr or hits@K (e.g. hits@50, as ogbl-collab).")
        .invalid(&["\"precision\"", "\"mrr\""]),
    row("allow_split_overlap", Kind::Bool,
        "Accept a dataset's fixed split whose train/val/test lists share nodes (otherwise an error naming both files)."),
    row("seed", Kind::Count, "Seed of every random choice (split, partition, init, sampling)."),
    row("threads", Kind::Count, "Worker threads in all, shared equally by trainers (0 = all cores)."),
    row("fail", Kind::Text,
        "Inject a failure: trainer T stops for good at training time DURATION (repeatable), e.g. 1@10s.")
        .run(Scope::Run, Default::None)
        .applies(Applies::Methods(MethodsThat::TrainMany)),
    row("gen_nodes", Kind::Count, "Nodes of the generated graph when no --dataset is given.")
        .run(Scope::Run, Default::Text("10000"))
        .applies(Applies::Generated),
    row("out", Kind::Path, "Run directory for config, metrics and models.")
        .run(Scope::Run, Default::Text("runs/<dataset>-<method>-<time>")),
    row("tensorboard", Kind::Path,
        "Also write the round metrics as TensorBoard scalars (validation metrics, training loss, steps, round times; test metrics at the end), as the run goes: an event file under DIR/<run directory's name>/, so `tensorboard --logdir DIR` shows the run next to others (tags: crates/tma-train/src/store/tensorboard.rs).")
        .run(Scope::Run, Default::Text("none")),
    row("config", Kind::Path, "TOML file with any of these options (flags win).")
        .run(Scope::Cli, Default::None),
    row("partitions", Kind::Path,
        "Train on a partition directory written by `tma partition --out` (its manifest fixes task, method, trainers, seed and split); replaces --dataset.")
        .run(Scope::Run, Default::None),
    row("engine", Kind::Choice(&["in-process", "mpi"]),
        "Transport of the trainers: in-process (threads) or mpi (one process per rank under mpirun/srun: rank 0 coordinates, ranks 1..=M train; needs --partitions and a build with --features mpi).")
        .run(Scope::Run, Default::Text("in-process")),
    row("join_timeout", Kind::Duration,
        "MPI: how long the coordinator waits for every trainer rank to load its part and join, and at the end to exit, before reporting the missing ranks and aborting the job.")
        .run(Scope::Run, Default::Text("120s"))
        .applies(Applies::Engine("mpi")),
    row("resume", Kind::Path,
        "Continue the interrupted run in RUN_DIR from its last checkpoint (its config.toml is the config; flags still win).")
        .run(Scope::Cli, Default::None),
    row("quiet", Kind::Bool, "Print only the final summary (no progress bar or round lines).")
        .run(Scope::Cli, Default::Text("false")),
    OptionSpec {
        hidden: true,
        ..row("debug_slow_round", Kind::Duration,
            "Test-only: the coordinator stalls this long while recording round 1 (as on a slow disk), to check that its trainers do not take a busy coordinator for a lost one.")
            .run(Scope::Cli, Default::None)
    },
];

/// A text made once per process for a row (the rows live as long as the process).
fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// Every option: [`TABLE`] with `--model`'s help from the encoder registry, then one row per
/// option an encoder declares in its own file (GAT's `heads`: `tma_nn::EncoderKind::
/// all_options`), a field of the configuration's `encoder_options`. Adding an encoder option
/// touches no row here.
pub fn rows() -> &'static [OptionSpec] {
    static ROWS: std::sync::OnceLock<Vec<OptionSpec>> = std::sync::OnceLock::new();
    ROWS.get_or_init(|| {
        let default_model = TrainConfig::default().model;
        let model_help = tma_nn::EncoderKind::model_help(default_model);
        let model_help = model_help
            .strip_suffix(&format!(" Default: {default_model}."))
            .unwrap_or(&model_help)
            .to_string();
        let method_help = Method::help_text();
        let method_help = method_help
            .strip_suffix(&format!(" Default: {}.", Method::default()))
            .unwrap_or(&method_help)
            .to_string();
        let mut rows: Vec<OptionSpec> = TABLE
            .iter()
            .map(|o| match o.key {
                "model" => OptionSpec {
                    help: leak(model_help.clone()),
                    ..*o
                },
                "method" => OptionSpec {
                    help: leak(method_help.clone()),
                    ..*o
                },
                _ => *o,
            })
            .collect();
        let at = rows
            .iter()
            .position(|o| o.key == "model")
            .map_or(rows.len(), |i| i + 1);
        let encoder_rows = tma_nn::EncoderKind::all_options()
            .into_iter()
            .map(|(e, owners)| {
                let owners: Vec<&str> = owners.iter().map(|k| k.name()).collect();
                OptionSpec {
                    key: e.name,
                    flag: e.name,
                    aliases: &[],
                    scope: Scope::Config,
                    kind: match e.default {
                        tma_nn::OptionValue::Int(_) => Kind::Count,
                        tma_nn::OptionValue::Float(_) => Kind::Real,
                    },
                    help: leak(format!("{} Only --model {}.", e.help, owners.join(" or "))),
                    default: Default::Text(leak(e.default.to_string())),
                    applies: Applies::Encoder(leak(owners.join(", "))),
                    invalid: &[],
                    hidden: false,
                }
            });
        rows.splice(at..at, encoder_rows);
        rows
    })
}

/// The row of `name`: a key (`num_trainers`), an alias (`trainers`) or a flag
/// (`--trainers`).
pub fn find(name: &str) -> Option<&'static OptionSpec> {
    let bare = name.trim_start_matches("--").replace('-', "_");
    rows()
        .iter()
        .find(|o| o.key == bare || o.flag == bare || o.aliases.contains(&bare.as_str()))
}

/// The rows of [`TrainConfig`]'s fields (the encoders' options among them).
pub fn config_options() -> impl Iterator<Item = &'static OptionSpec> {
    rows().iter().filter(|o| o.scope == Scope::Config)
}

/// `bytes` as a size `tma` reads back ([`parse_bytes`]): `1GiB`, `512MiB`, `1536B`.
pub fn format_bytes(bytes: u64) -> String {
    for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    format!("{bytes}B")
}

/// Parses a byte size: a number with an optional unit `B`, `K`/`KiB`, `M`/`MiB`, `G`/`GiB`,
/// `T`/`TiB` (powers of 1024; `KB`, `MB`, `GB` read the same), e.g. `512MiB`, `2G`, `1.5GiB`.
///
/// # Errors
/// A message quoting `s`: not a number, or an unknown unit (with the accepted ones).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let x: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 512MiB, 2GiB)"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1u64,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        u => {
            return Err(format!(
                "unknown size unit {u:?} in {s:?} (use B, K/KiB, M/MiB, G/GiB, T/TiB, all powers of 1024; KB, MB, GB read the same; a bare number is bytes)"
            ))
        }
    };
    Ok((x * mult as f64) as u64)
}

/// A default value as the option table says it.
fn show(kind: &Kind, v: &Value) -> String {
    match (kind, v) {
        (Kind::Size, Value::Number(n)) => n.as_u64().map_or_else(|| n.to_string(), format_bytes),
        (Kind::List, Value::Array(a)) => {
            a.iter().map(Value::to_string).collect::<Vec<_>>().join(",")
        }
        (_, Value::String(s)) => s.clone(),
        // 0.0 as 0, 0.001 as 0.001
        (_, Value::Number(n)) if n.is_f64() => {
            n.as_f64().map_or_else(|| n.to_string(), |x| x.to_string())
        }
        (_, v) => v.to_string(),
    }
}

/// The default of `o` as help texts say it: `4`, `8192 (link), 1024 (node)`, or the row's
/// text; `None` for [`Default::None`].
pub fn default_text(o: &OptionSpec) -> Option<String> {
    match o.default {
        Default::None => None,
        Default::Text(t) => Some(t.to_string()),
        Default::Config => {
            let of = |task| {
                let v = serde_json::to_value(TrainConfig::defaults_for(task)).expect("serializes");
                show(&o.kind, &v[o.key])
            };
            let (node, link) = (of(Task::Node), of(Task::Link));
            Some(if node == link {
                node
            } else {
                format!("{node} (node), {link} (link)")
            })
        }
    }
}

/// The help text of `o`: its text and its default (`tma train --help`, the option table).
pub fn help(o: &OptionSpec) -> String {
    match default_text(o) {
        Some(d) => format!("{} Default: {d}.", o.help),
        None => o.help.to_string(),
    }
}

/// The option table as Markdown (the README's, between its `options-table` markers): flag,
/// config key / Python keyword, value, default, used by, what it does.
pub fn markdown() -> String {
    let mut s = String::from(
        "| flag | key (config file, Python) | value | default | used by | what it does |\n|---|---|---|---|---|---|\n",
    );
    for o in rows().iter().filter(|o| !o.hidden) {
        let key = match o.scope {
            Scope::Cli => "(CLI only)".to_string(),
            _ if o.aliases.is_empty() => format!("`{}`", o.key),
            _ => format!(
                "`{}` ({})",
                o.key,
                o.aliases
                    .iter()
                    .map(|a| format!("`{a}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let cell = |t: &str| t.replace('|', "\\|");
        s.push_str(&format!(
            "| `{}` | {key} | {} | {} | {} | {} |\n",
            o.cli_flag(),
            o.kind.value_name(),
            cell(&default_text(o).unwrap_or_else(|| "—".into())),
            cell(&o.applies.describe()),
            cell(o.help),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_flags_and_aliases_name_one_row_each() {
        let mut names: Vec<&str> = rows()
            .iter()
            .flat_map(|o| {
                let mut v = vec![o.key];
                if o.flag != o.key {
                    v.push(o.flag);
                }
                v.extend(o.aliases.iter().filter(|a| **a != o.flag));
                v
            })
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a name used by two rows");
        assert_eq!(find("--trainers").unwrap().key, "num_trainers");
        assert_eq!(find("layers").unwrap().key, "num_layers");
        assert_eq!(find("eval-memory").unwrap().key, "eval_memory");
        assert!(find("hiden").is_none());
    }

    #[test]
    fn the_config_rows_are_exactly_the_fields_of_train_config() {
        let mut rows: Vec<String> = config_options().map(|o| o.key.to_string()).collect();
        rows.sort();
        assert_eq!(rows, TrainConfig::option_names());
    }

    #[test]
    fn defaults_are_said_from_the_configuration_of_each_task() {
        let d = |k| default_text(find(k).unwrap()).unwrap();
        assert_eq!(d("num_trainers"), "4");
        assert_eq!(d("batch_size"), "1024 (node), 8192 (link)");
        assert_eq!(d("dropout"), "0.5 (node), 0 (link)");
        assert_eq!(d("sync_every"), "5s");
        assert_eq!(d("eval_memory"), "1GiB");
        assert_eq!(d("fanouts"), "10,25");
        assert_eq!(d("lr"), "0.001");
        assert_eq!(d("eval_fanouts"), "exact (no sampling)");
        assert_eq!(default_text(find("fail").unwrap()), None);
        assert_eq!(
            help(find("trainers").unwrap()),
            "Number of trainers M. Default: 4."
        );
    }

    #[test]
    fn sizes_print_as_they_parse() {
        for b in [1u64 << 30, 512 << 20, 1536, 3 << 40, 17] {
            assert_eq!(parse_bytes(&format_bytes(b)).unwrap(), b, "{b}");
        }
        assert_eq!(format_bytes(1 << 30), "1GiB");
        assert_eq!(format_bytes(1536), "1536B");
        assert_eq!(parse_bytes("1.5GiB").unwrap(), 3 << 29);
        assert!(parse_bytes("lots").unwrap_err().contains("is not a size"));
        assert!(parse_bytes("2XB")
            .unwrap_err()
            .starts_with("unknown size unit"));
    }

    #[test]
    fn the_markdown_table_has_a_row_per_shown_option() {
        let md = markdown();
        assert_eq!(
            md.lines().count(),
            2 + rows().iter().filter(|o| !o.hidden).count()
        );
        assert!(md.contains(
            "| `--trainers` | `num_trainers` (`trainers`) | N | 4 | all | Number of trainers M. |"
        ), "{md}");
        assert!(!md.contains("debug-slow-round"));
    }
}
