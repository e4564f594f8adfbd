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
/// The fields carry no help of their own: each flag's help is its row of the library's option
/// table (`tma_train::options::table::rows`), set on the command by [`with_table_help`], and a
/// test checks that the flags, the config-file keys and the table's rows are the same set.
///
/// The encoders' own options (GAT's `--heads`, ...) are not fields: their flags are added
/// from the registry at run time (`encoder_flags.rs`) and they, and their config-file keys,
/// land in [`TrainOpts::encoder`]; any other unknown config-file key is refused
/// ([`with_config_file`]).
#[derive(Args, Serialize, Deserialize, Default, Debug, Clone)]
#[serde(default)]
pub struct TrainOpts {
    #[arg(long, value_name = "PATH")]
    pub dataset: Option<PathBuf>,
    #[arg(long, value_name = "FORMAT")]
    pub format: Option<Format>,
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub undirected: Option<bool>,
    #[arg(long)]
    pub task: Option<Task>,
    #[arg(long)]
    pub method: Option<Method>,
    #[arg(long = "trainers", value_name = "M")]
    #[serde(rename = "num_trainers", alias = "trainers")]
    pub num_trainers: Option<usize>,
    #[arg(long, value_name = "D")]
    pub drop_parts: Option<usize>,
    #[arg(long, value_name = "K")]
    pub super_nodes: Option<usize>,
    #[arg(long, value_name = "CLUSTERING")]
    pub super_clustering: Option<tma_partition::Clustering>,
    #[arg(long, value_name = "DURATION")]
    pub sync_every: Option<String>,
    #[arg(long, value_name = "N")]
    pub sync_ramp: Option<u32>,
    #[arg(long, value_name = "DURATION")]
    pub val_check_interval: Option<String>,
    #[arg(long, value_name = "DURATION")]
    pub time_limit: Option<String>,
    #[arg(long, value_name = "N")]
    pub sync_every_steps: Option<u64>,
    #[arg(long, value_name = "DURATION")]
    pub round_timeout: Option<String>,
    #[arg(long, value_name = "N")]
    pub llcg_steps: Option<usize>,
    #[arg(long, value_name = "W")]
    pub average_weight: Option<String>,
    #[arg(long)]
    pub model: Option<String>,
    /// The encoders' own options given (flags added from the registry, config-file keys), by
    /// key: `heads` -> 4. A config file's keys that are no option at all are kept here too
    /// until [`with_config_file`] refuses them.
    #[arg(skip)]
    #[serde(flatten)]
    pub encoder: std::collections::BTreeMap<String, serde_json::Value>,
    #[arg(long)]
    pub hidden: Option<usize>,
    #[arg(long = "layers")]
    #[serde(rename = "num_layers", alias = "layers")]
    pub num_layers: Option<usize>,
    #[arg(long, allow_hyphen_values = true)]
    pub dropout: Option<f32>,
    #[arg(long, value_name = "BOOL")]
    pub layer_norm: Option<bool>,
    #[arg(long, value_name = "PRECISION")]
    pub matmul_precision: Option<String>,
    #[arg(long, value_delimiter = ',')]
    pub fanouts: Option<Vec<usize>>,
    #[arg(long)]
    pub batch_size: Option<usize>,
    #[arg(long, allow_hyphen_values = true)]
    pub lr: Option<f32>,
    #[arg(long, allow_hyphen_values = true)]
    pub weight_decay: Option<f32>,
    #[arg(long, allow_hyphen_values = true)]
    pub clip_norm: Option<f32>,
    #[arg(long)]
    pub clip_from_epoch: Option<usize>,
    #[arg(long, value_name = "N")]
    pub warmup_steps: Option<u64>,
    #[arg(long)]
    pub num_neg: Option<usize>,
    #[arg(long, value_name = "BOOL")]
    pub exclude_targets: Option<bool>,
    #[arg(long)]
    pub eval_num_neg: Option<usize>,
    #[arg(long)]
    pub eval_max_edges: Option<usize>,
    #[arg(long, value_name = "K")]
    pub eval_every: Option<u64>,
    #[arg(long, value_name = "N")]
    pub plateau_patience: Option<u32>,
    #[arg(long, value_name = "auto|full|restricted")]
    pub eval_inference: Option<String>,
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    #[serde(deserialize_with = "size_or_bytes")]
    pub eval_memory: Option<String>,
    #[arg(long, value_delimiter = ',')]
    pub eval_fanouts: Option<Vec<usize>>,
    #[arg(long, value_name = "N")]
    pub eval_max_nodes: Option<usize>,
    #[arg(long, allow_hyphen_values = true)]
    pub val_frac: Option<f64>,
    #[arg(long, allow_hyphen_values = true)]
    pub test_frac: Option<f64>,
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub normalize_features: Option<bool>,
    #[arg(long, value_name = "NAME")]
    pub featureless: Option<String>,
    #[arg(long, value_name = "K|all")]
    pub split_index: Option<SplitIndexArg>,
    #[arg(long, value_name = "NAME")]
    pub metric: Option<Metric>,
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub allow_split_overlap: Option<bool>,
    #[arg(long)]
    pub seed: Option<u64>,
    #[arg(long)]
    pub threads: Option<usize>,
    #[arg(long, value_name = "T@DURATION")]
    pub fail: Option<Vec<String>>,
    #[arg(long, value_name = "N")]
    pub gen_nodes: Option<usize>,
    #[arg(long, value_name = "RUN_DIR")]
    pub out: Option<PathBuf>,
    #[arg(long, value_name = "DIR")]
    pub tensorboard: Option<PathBuf>,
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    #[arg(long, value_name = "DIR")]
    pub partitions: Option<PathBuf>,
    #[arg(long)]
    pub engine: Option<String>,
    #[arg(long, value_name = "DURATION")]
    pub join_timeout: Option<String>,
    #[arg(long, value_name = "RUN_DIR")]
    #[serde(skip)]
    pub resume: Option<PathBuf>,
    #[arg(long, num_args = 0..=1, default_missing_value = "true", default_value_t = false, action = clap::ArgAction::Set, value_name = "BOOL")]
    #[serde(skip)]
    pub quiet: bool,
    #[arg(long, value_name = "DURATION", hide = true)]
    #[serde(skip)]
    pub debug_slow_round: Option<String>,
}

/// `cmd` (`tma train`, or `tma compare`, which takes its options) with every flag's help
/// from its row of the option table ([`tma_train::options::table::help`]: text and default),
/// except the flags in `own` (compare's `--out` and `--tensorboard` say where compare puts its runs).
pub(crate) fn with_table_help(cmd: clap::Command, own: &[&str]) -> clap::Command {
    let ids: Vec<String> = cmd
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .filter(|id| !own.contains(&id.as_str()))
        .collect();
    ids.iter().fold(cmd, |cmd, id| {
        match tma_train::options::table::rows()
            .iter()
            .find(|o| o.key == id)
        {
            Some(o) => cmd.mut_arg(id, |a| {
                a.help(tma_train::options::table::help(o))
                    .long_help(None::<&str>)
            }),
            None => cmd,
        }
    })
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
    // checked here, in the file's words: merged with the flags, a number JSON cannot carry
    // would read as "not given" and train with the default (regression: `lr = inf` did)
    if let Some((k, x)) = non_finite(&f)? {
        bail!(
            "config file {} is not valid: {k} = {x} is not a finite number",
            path.display()
        );
    }
    // keys no field took: an encoder's own option, or no option at all
    if let Some(k) = f
        .encoder
        .keys()
        .find(|k| tma_train::config::encoder_options::declared(k).is_none())
    {
        let mut known: Vec<String> = match serde_json::to_value(TrainOpts::default()) {
            Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
            _ => Vec::new(),
        };
        known.sort();
        bail!(
            "config file {} is not valid: unknown option '{k}' (options: {}; the encoders' own options: {})",
            path.display(),
            known.join(", "),
            encoder_option_owners()
        );
    }
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
    if o.split_index == Some(SplitIndexArg::All) {
        bail!(
            "--split-index all runs `tma train` once per fixed split; this command takes one split index (0, 1, ...)"
        );
    }
    // the configuration's options, checked and turned into a configuration by the library, as
    // the Python package's keyword arguments are (tma_train::options::config_from)
    finite_numbers(&o)?;
    let mut given: tma_train::options::Given = given(&o)
        .into_iter()
        .filter(|(k, _)| {
            tma_train::options::table::find(k)
                .is_some_and(|s| s.scope == tma_train::options::table::Scope::Config)
        })
        .collect();
    given.insert("task".into(), serde_json::to_value(task)?);
    let cfg = tma_train::options::config_from(&given, Spelling::Flag).map_err(|e| {
        match (e, &o.config) {
            (tma_train::options::OptionsError::Invalid(e), Some(path)) => anyhow::anyhow!(
                "invalid option (from the flags or the config file {}): {e}",
                path.display()
            ),
            (e, _) => anyhow::anyhow!("{e}"),
        }
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

/// `heads (gat)`: every encoder option with the encoders that declare it, for messages.
fn encoder_option_owners() -> String {
    tma_nn::EncoderKind::all_options()
        .iter()
        .map(|(o, ks)| {
            let ks: Vec<&str> = ks.iter().map(|k| k.name()).collect();
            format!("{} ({})", o.name, ks.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
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

/// Refuses an infinite or NaN number (`--lr inf`): the library takes options as JSON, which
/// has no such numbers (the Python package refuses them in the same words).
fn finite_numbers(o: &TrainOpts) -> Result<()> {
    // a seed past TOML's signed integers: said by the library's rule, naming the flag (the
    // conversion below failed with "u64 value was too large")
    if let Some(s) = o.seed.filter(|&s| s > i64::MAX as u64) {
        bail!("--seed: seed {s} is not below 2^63: a run directory records it in config.toml, whose integers are signed 64-bit");
    }
    if let Some((k, x)) = non_finite(o)? {
        bail!("{}: '{x}' is not a finite number", Spelling::Flag.name(&k));
    }
    Ok(())
}

/// The first option of `o` whose number is infinite or NaN (a flag `--lr inf`, a config file's
/// `lr = inf` or `clip_norm = 1e39`, past `f32`), by config-file key.
fn non_finite(o: &TrainOpts) -> Result<Option<(String, f64)>> {
    let toml::Value::Table(t) = toml::Value::try_from(o)? else {
        return Ok(None);
    };
    Ok(t.into_iter().find_map(|(k, v)| match v {
        toml::Value::Float(x) if !x.is_finite() => Some((k, x)),
        _ => None,
    }))
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
