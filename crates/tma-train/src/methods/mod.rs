//! The method registry: the one list of training methods, where a [`Method`] meets its
//! implementation ([`TrainingMethod`]), whose declaration ([`MethodInfo`]: name, help,
//! capabilities) and layout ([`TrainingMethod::layout`]) say everything the rest of the
//! workspace asks about a method. Nothing else lists methods: [`Method`]'s constants, names,
//! parsing, serde, [`Method::ALL`], the `--method` help ([`Method::help_text`]), the lists in
//! messages and the layouts a partition directory can hold ([`layout_names`]) read this list.
//!
//! Adding a method: a file with a type implementing [`TrainingMethod`] (its `info` and
//! `layout`; a layout of its own is a [`crate::data::NodeSets`] in the same file) and a `const`
//! of it, then its `mod` line and one line in the `methods!` list below
//! (`Variant => module::CONST;`). `tests` below registers a toy method with a layout of its own
//! that way (`methods/toy.rs`, two lines marked `#[cfg(test)]`), and trains it in-process and
//! from a partition directory (docs/decisions/0022-method-registry.md).

pub mod averaging;
pub mod ggs;
pub mod llcg;

use crate::clock::Clock;
use crate::config::{Method, TrainConfig};
use crate::data::{prepare_with, DataLayout, Prepared};
pub use crate::engines::method::MethodInfo;
use crate::engines::method::TrainingMethod;
use crate::evaluation::record::{Extras, FailPlan, Observer, RunResult};
use crate::TrainError;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};
use tma_graph::Dataset;
use tma_partition::PartitionConfig;

#[cfg(test)]
mod toy;

/// The registry: `Variant => module::CONST;` (a `const` implementing [`TrainingMethod`]), in
/// the order the CLI lists them. Generates the [`Method`] constants, [`Method::ALL`] and
/// [`training_method`].
macro_rules! methods {
    ($( $(#[$attr:meta])* $variant:ident => $module:ident :: $item:ident; )*) => {
        /// Registry positions (the value inside a [`Method`]).
        #[allow(dead_code)]
        enum Index {
            $( $(#[$attr])* $variant, )*
        }

        /// Every implementation, by registry position.
        const REGISTRY: &[&dyn TrainingMethod] = &[$( $(#[$attr])* &$module::$item, )*];

        #[allow(non_upper_case_globals)]
        impl Method {
            $(
                $(#[$attr])*
                #[doc = concat!("`", stringify!($module), "::", stringify!($item), "` of the registry.")]
                pub const $variant: Method = Method(Index::$variant as u16);
            )*
            /// Every registered method, in registry order (the order the CLI lists them).
            pub const ALL: &'static [Method] = &[$( $(#[$attr])* Method::$variant, )*];
        }
    };
}

methods! {
    RandomTma => averaging::RANDOM_TMA;
    SuperTma => averaging::SUPER_TMA;
    PsgdPa => averaging::PSGD_PA;
    Llcg => llcg::LLCG;
    Ggs => ggs::GGS;
    Centralized => averaging::CENTRALIZED;
    #[cfg(test)]
    Toy => toy::TOY;
}

/// The implementation of `method`.
pub fn training_method(method: Method) -> &'static dyn TrainingMethod {
    REGISTRY[method.0 as usize]
}

impl Method {
    /// The method's declaration ([`TrainingMethod::info`]).
    pub fn info(self) -> &'static MethodInfo {
        training_method(self).info()
    }

    /// The name used on the command line and in outputs (kebab-case).
    pub fn as_str(&self) -> &'static str {
        self.info().name
    }

    /// Whether the method combines trainers by averaging their models
    /// ([`MethodInfo::averages_models`]).
    pub fn averages_models(&self) -> bool {
        self.info().averages_models
    }

    /// The method's layout under `cfg` ([`TrainingMethod::layout`]).
    pub fn layout(self, cfg: &TrainConfig) -> DataLayout {
        training_method(self).layout(cfg)
    }

    /// Every registered name, in registry order (`&'static`, for serde's messages).
    pub fn names() -> &'static [&'static str] {
        static NAMES: OnceLock<Vec<&'static str>> = OnceLock::new();
        NAMES.get_or_init(|| Method::ALL.iter().map(|m| m.as_str()).collect())
    }

    /// Every registered name joined by commas (`random-tma,super-tma,...`): `tma compare`'s
    /// default `--methods`.
    pub fn names_csv() -> &'static str {
        static CSV: OnceLock<String> = OnceLock::new();
        CSV.get_or_init(|| Method::names().join(","))
    }

    /// The `--method` help: every method with its one-line help and its layout, then the
    /// default (`"random-tma (...), super-tma (...), ... Default: random-tma."`).
    pub fn help_text() -> String {
        let cfg = TrainConfig::default();
        let each: Vec<String> = Method::ALL
            .iter()
            .map(|m| {
                format!(
                    "{} ({}; layout {})",
                    m.as_str(),
                    m.info().help,
                    m.layout(&cfg).name()
                )
            })
            .collect();
        format!(
            "Training method: {}. Default: {}.",
            or_list(&each.iter().map(String::as_str).collect::<Vec<_>>()),
            Method::default()
        )
    }
}

/// `a, b or c` (one item: itself).
pub fn or_list(items: &[&str]) -> String {
    join_last(items, " or ")
}

/// `a, b and c` (one item: itself).
pub fn and_list(items: &[&str]) -> String {
    join_last(items, " and ")
}

fn join_last(items: &[&str], last_sep: &str) -> String {
    match items.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{}{last_sep}{last}", rest.join(", ")),
        None => String::new(),
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Method({})", self.as_str())
    }
}

impl FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Method::ALL
            .iter()
            .copied()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown method '{s}' (expected one of: {})",
                    Method::names().join(", ")
                )
            })
    }
}

impl serde::Serialize for Method {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Method {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse()
            .map_err(|_| serde::de::Error::unknown_variant(&s, Method::names()))
    }
}

/// The first registered method whose layout under `cfg` is `layout` (the method a partition
/// directory of that layout trains by default).
pub fn method_for_layout(layout: &DataLayout, cfg: &TrainConfig) -> Option<Method> {
    Method::ALL
        .iter()
        .copied()
        .find(|m| m.layout(cfg) == *layout)
}

/// The names of every layout a registered method has, in registry order without repeats
/// (`random, super, metis, shared-examples, whole`): what a partition directory can hold.
pub fn layout_names() -> Vec<String> {
    let cfg = TrainConfig::default();
    let mut names: Vec<String> = Vec::new();
    for m in Method::ALL {
        let n = m.layout(&cfg).name();
        if !names.contains(&n) {
            names.push(n);
        }
    }
    names
}

/// Every layout with the methods that train on it, for help texts:
/// `random (random-tma), super (super-tma), metis (psgd-pa, llcg), ...`.
pub fn layouts_help() -> String {
    let cfg = TrainConfig::default();
    layout_names()
        .iter()
        .map(|l| {
            let by: Vec<&str> = Method::ALL
                .iter()
                .filter(|m| m.layout(&cfg).name() == *l)
                .map(|m| m.as_str())
                .collect();
            format!("{l} ({})", by.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The layout named `name` (a [`layout_names`] entry) under `cfg` (`super` takes
/// `cfg.super_nodes`); `None` for a name no registered method has.
pub fn layout_named(name: &str, cfg: &TrainConfig) -> Option<DataLayout> {
    Method::ALL
        .iter()
        .map(|m| m.layout(cfg))
        .find(|l| l.name() == name)
}

/// What `tma partition --method NAME` (and Python's `tma.partition(method=...)`) lays out:
/// a layout name ([`layout_names`]: `random`, `super`, `metis`, `shared-examples`, ...) or a
/// training method's name (its layout). Returns the method the partition is made with: the
/// named one, or the first registered one with the named layout.
///
/// # Errors
/// An unknown name; the message lists the layouts and the methods.
pub fn partition_method(name: &str) -> Result<Method, String> {
    if let Ok(m) = name.parse::<Method>() {
        return Ok(m);
    }
    let cfg = TrainConfig::default();
    layout_named(name, &cfg)
        .and_then(|l| method_for_layout(&l, &cfg))
        .ok_or_else(|| {
            format!(
                "unknown layout '{name}' (expected a layout: {}; or a training method, which lays out its own: {})",
                layout_names().join(", "),
                Method::names().join(", ")
            )
        })
}

/// The partitioner's configuration of `cfg`'s run (its method's layout under `cfg`,
/// [`DataLayout::partition_config`]): the one mapping from a run's options to
/// [`tma_partition`], for every front end. `None`: the method's layout does not partition the
/// graph with [`tma_partition`] (`whole`, `shared-examples`, a method's own layout).
pub fn partition_config(cfg: &TrainConfig) -> Option<PartitionConfig> {
    cfg.method.layout(cfg).partition_config(cfg)
}

/// The configuration `tma partition --out` (and Python's `tma.partition`) makes a layout
/// with: `base` (task, seed, parts as `num_trainers`, `drop_parts`, `super_nodes`, ...) with
/// the method of [`partition_method`]`(name)`, validated as a run of that method would be.
///
/// # Errors
/// As [`partition_method`]; `invalid option: ...` from [`TrainConfig::validate`].
pub fn partition_job(name: &str, base: TrainConfig) -> Result<TrainConfig, String> {
    let cfg = TrainConfig {
        method: partition_method(name)?,
        ..base
    };
    cfg.validate().map_err(|e| format!("invalid option: {e}"))?;
    Ok(cfg)
}

/// Refuses `method` on a partition directory whose recorded layout is `dir_layout`, when the
/// method's layout under `cfg` (the directory's data options applied) is another.
///
/// # Errors
/// A message naming the directory (`partitions`, as the front end spells the option), its
/// layout, the method's layout, the methods that train from it and how to make one for the
/// method.
pub fn check_layout(
    method: Method,
    cfg: &TrainConfig,
    partitions: &str,
    dir: &std::path::Path,
    dir_layout: &str,
) -> Result<(), String> {
    let wanted = method.layout(cfg);
    if wanted.name() == dir_layout {
        return Ok(());
    }
    let fit: Vec<&str> = Method::ALL
        .iter()
        .filter(|m| m.layout(cfg).name() == dir_layout)
        .map(|m| m.as_str())
        .collect();
    Err(format!(
        "{partitions} {} holds the {dir_layout} layout; method {method} trains on the {} layout ({}); write one with `tma partition --out DIR --method {method}`",
        dir.display(),
        wanted.name(),
        if fit.is_empty() {
            format!("no registered method trains on {dir_layout}")
        } else {
            format!("methods for this directory: {}", fit.join(", "))
        }
    ))
}

/// Makes `cfg` a run on the partition directory `dir` whose manifest records `data`: its data
/// options ([`crate::store::DataConfig::apply`]) and a method that trains on its layout:
/// `cfg.method` where its layout under those options is the directory's, else the method a
/// version-1 directory recorded, else the first registered method with that layout (a front
/// end refuses a method the user *gave* that does not fit first: [`check_layout`]).
///
/// # Errors
/// [`TrainError::Store`] when no registered method trains on the directory's layout (a layout
/// of a method this build does not have).
pub fn apply_partitions(
    dir: &std::path::Path,
    data: &crate::store::DataConfig,
    cfg: &mut TrainConfig,
) -> Result<(), TrainError> {
    data.apply(cfg);
    if cfg.method.layout(cfg).name() == data.layout {
        return Ok(());
    }
    let fits = |m: &Method| m.layout(cfg).name() == data.layout;
    let method = data
        .method
        .filter(fits)
        .or_else(|| Method::ALL.iter().copied().find(fits));
    match method {
        Some(m) => {
            cfg.method = m;
            Ok(())
        }
        None => Err(TrainError::Store(crate::store::StoreError::Format {
            path: dir.join("manifest.json"),
            reason: format!(
                "layout '{}' is not one a method of this tma trains on (layouts: {})",
                data.layout,
                layout_names().join(", ")
            ),
        })),
    }
}

/// Splits, lays out (partitions) and builds every trainer's data for `cfg.method`
/// ([`prepare_with`] with that method's layout), then refuses trainers without a training
/// example where the method cannot run them ([`crate::data::check_idle`]).
///
/// # Errors
/// As [`prepare_with`].
pub fn prepare(ds: Dataset, cfg: &TrainConfig) -> Result<Prepared, TrainError> {
    let prep = prepare_with(ds, cfg, cfg.method.layout(cfg))?;
    check_idle(&prep, cfg)?;
    Ok(prep)
}

/// Refuses the idle trainers of `prep` where `cfg.method` cannot run them (a method that does
/// not average models: every trainer must have examples).
///
/// # Errors
/// As [`crate::data::check_idle`].
pub fn check_idle(prep: &Prepared, cfg: &TrainConfig) -> Result<(), TrainError> {
    let num_examples = match &prep.eval {
        crate::data::EvalData::Node { split, .. } => split.train.len(),
        crate::data::EvalData::Link { split } => split.num_train_edges(),
    };
    crate::data::check_idle(
        &prep.idle_trainers(),
        prep.trainers.len(),
        cfg,
        num_examples,
        cfg.method.info().averages_models,
    )
}

/// [`check_idle`] for the parts of the partition directory `dir` (its manifest's `parts`).
///
/// # Errors
/// As [`crate::data::check_idle`], the message naming the directory.
pub fn check_idle_parts(
    dir: &std::path::Path,
    parts: &[crate::store::PartEntry],
    cfg: &TrainConfig,
) -> Result<(), TrainError> {
    let idle: Vec<usize> = parts
        .iter()
        .filter(|p| p.num_train == 0)
        .map(|p| p.trainer)
        .collect();
    let total = parts.iter().map(|p| p.num_train).sum();
    let averages = cfg.method.info().averages_models;
    crate::data::check_idle(&idle, parts.len(), cfg, total, averages)
        .map_err(|e| TrainError::Data(format!("--partitions {}: {e}", dir.display())))
}

/// [`prepare`] with the parts written to, and mapped from, `spill`
/// ([`crate::data::prepare_spilled`]).
///
/// # Errors
/// As [`crate::data::prepare_spilled`].
pub fn prepare_spilled(
    ds: Dataset,
    cfg: &TrainConfig,
    spill: Option<&crate::data::spill::Spill>,
) -> Result<Prepared, TrainError> {
    let prep = crate::data::prepare_spilled(ds, cfg, cfg.method.layout(cfg), spill)?;
    check_idle(&prep, cfg)?;
    Ok(prep)
}

/// [`prepare_spilled`] for the layout of a partition directory (`tma partition --out`,
/// [`crate::data::Purpose::Layout`]): what would stop training is said in a warning line, not
/// refused.
///
/// # Errors
/// As [`crate::data::prepare_for`].
pub fn prepare_layout(
    ds: Dataset,
    cfg: &TrainConfig,
    spill: Option<&crate::data::spill::Spill>,
) -> Result<Prepared, TrainError> {
    let layout = cfg.method.layout(cfg);
    crate::data::prepare_for(ds, cfg, layout, spill, crate::data::Purpose::Layout)
}

/// Runs a prepared job of `cfg.method` with in-process trainers
/// ([`crate::engines::run_in_process`]).
///
/// # Errors
/// As [`crate::engines::run_in_process`].
pub fn run_in_process(
    prep: &Prepared,
    cfg: &TrainConfig,
    fail: &FailPlan,
    clock: Arc<dyn Clock>,
    observer: &mut dyn Observer,
    extras: Extras,
) -> Result<RunResult, TrainError> {
    crate::engines::run_in_process(
        training_method(cfg.method),
        prep,
        cfg,
        fail,
        clock,
        observer,
        extras,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Task;
    use crate::evaluation::record::Quiet;
    use crate::run::{generated_graph_config, DataSource, Run, RunSpec};
    use std::time::Duration;

    fn quick(method: Method) -> TrainConfig {
        TrainConfig {
            task: Task::Node,
            method,
            num_trainers: 3,
            hidden: 8,
            sync_every: Duration::from_millis(150),
            sync_ramp: 0,
            time_limit: Duration::from_millis(500),
            threads: 2,
            ..TrainConfig::defaults_for(Task::Node)
        }
    }

    fn sbm() -> Dataset {
        tma_graph::generate_sbm(&generated_graph_config(600, 3))
    }

    #[test]
    fn the_registry_names_parses_and_lists_every_method_once() {
        // the built-in order, the toy (registered for tests) last
        let names: Vec<&str> = Method::ALL.iter().map(|m| m.as_str()).collect();
        assert_eq!(
            names,
            [
                "random-tma",
                "super-tma",
                "psgd-pa",
                "llcg",
                "ggs",
                "centralized",
                "toy-blocks"
            ]
        );
        for &m in Method::ALL {
            assert_eq!(m.as_str().parse::<Method>(), Ok(m));
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
            assert_eq!(
                serde_json::from_value::<Method>(m.as_str().into()).unwrap(),
                m
            );
        }
        assert_eq!(Method::default(), Method::RandomTma);
        assert_eq!(
            "fast".parse::<Method>().unwrap_err(),
            "unknown method 'fast' (expected one of: random-tma, super-tma, psgd-pa, llcg, ggs, centralized, toy-blocks)"
        );
        let e = serde_json::from_value::<Method>("fast".into()).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown variant `fast`, expected one of `random-tma`, `super-tma`"),
            "{e}"
        );
        assert_eq!(
            layout_names(),
            [
                "random",
                "super",
                "metis",
                "shared-examples",
                "whole",
                "blocks"
            ]
        );
        let help = Method::help_text();
        assert!(help.starts_with("Training method: random-tma (random node partition + model averaging; layout random), "), "{help}");
        assert!(help.ends_with(" or toy-blocks (contiguous blocks of node ids + model averaging; layout blocks). Default: random-tma."), "{help}");
    }

    #[test]
    fn a_layout_name_or_a_method_name_gives_the_method_a_partition_is_made_with() {
        assert_eq!(partition_method("random"), Ok(Method::RandomTma));
        assert_eq!(partition_method("metis"), Ok(Method::PsgdPa));
        assert_eq!(partition_method("llcg"), Ok(Method::Llcg));
        assert_eq!(partition_method("shared-examples"), Ok(Method::Ggs));
        assert_eq!(partition_method("whole"), Ok(Method::Centralized));
        assert_eq!(partition_method("blocks"), Ok(Method::Toy));
        assert_eq!(
            partition_method("metiss").unwrap_err(),
            "unknown layout 'metiss' (expected a layout: random, super, metis, shared-examples, whole, blocks; or a training method, which lays out its own: random-tma, super-tma, psgd-pa, llcg, ggs, centralized, toy-blocks)"
        );
        // llcg and psgd-pa share their layout; ggs has its own
        let cfg = TrainConfig::default();
        assert_eq!(Method::Llcg.layout(&cfg), Method::PsgdPa.layout(&cfg));
        assert_eq!(
            method_for_layout(&Method::Llcg.layout(&cfg), &cfg),
            Some(Method::PsgdPa)
        );
        assert_eq!(
            partition_config(&TrainConfig {
                method: Method::Llcg,
                ..cfg.clone()
            })
            .map(|p| p.method),
            Some(tma_partition::PartitionMethod::Metis)
        );
        assert_eq!(
            partition_config(&TrainConfig {
                method: Method::Ggs,
                ..cfg
            }),
            None
        );
    }

    #[test]
    fn capabilities_decide_what_a_configuration_may_ask() {
        let ok = |c: TrainConfig| c.validate();
        // the toy is an averaging method: the step schedule and checks apply
        assert_eq!(
            ok(TrainConfig {
                sync_every_steps: 4,
                ..quick(Method::Toy)
            }),
            Ok(())
        );
        assert_eq!(
            ok(TrainConfig {
                sync_every_steps: 4,
                ..quick(Method::Ggs)
            })
            .unwrap_err(),
            "sync-every-steps does not apply to ggs (it synchronizes gradients every step)"
        );
        assert_eq!(
            ok(TrainConfig { val_check_interval: Duration::from_millis(50), ..quick(Method::Llcg) })
                .unwrap_err(),
            "val-check-interval does not apply to llcg (no model between its exchanges: its rounds end with a correction on the coordinator); use it with random-tma, super-tma, psgd-pa, centralized or toy-blocks"
        );
        assert_eq!(quick(Method::Centralized).effective_trainers(), 1);
        assert_eq!(quick(Method::Toy).effective_trainers(), 3);
        let ramp = |m| {
            TrainConfig {
                sync_ramp: 8,
                ..quick(m)
            }
            .effective_sync_ramp()
        };
        assert_eq!((ramp(Method::Toy), ramp(Method::Ggs)), (8, 0));
    }

    #[test]
    fn a_method_with_its_own_layout_trains_in_process_and_from_its_partition_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let cfg = quick(Method::Toy);
        // its own layout: trainer t holds nodes t*200 .. (t+1)*200 of the 600
        let prep = prepare(sbm(), &cfg).unwrap();
        assert_eq!(prep.layout, "blocks");
        let ids: Vec<(u32, u32, usize)> = prep
            .trainers
            .iter()
            .map(|t| {
                (
                    t.global_ids[0],
                    *t.global_ids.last().unwrap(),
                    t.global_ids.len(),
                )
            })
            .collect();
        assert_eq!(ids, [(0, 199, 200), (200, 399, 200), (400, 599, 200)]);
        let mut spec = RunSpec::new(cfg.clone(), DataSource::InMemory(Box::new(sbm())));
        spec.out = Some(tmp.path().join("run"));
        let r = Run::start(spec).unwrap().train(&mut Quiet).unwrap();
        assert_eq!(r.summary.method, "toy-blocks");
        assert!(r.rounds.len() >= 2 && r.rounds.iter().all(|x| x.participants == [0, 1, 2]));

        // a partition directory of its layout, made as `tma partition --out --method blocks`
        let job = partition_job(
            "blocks",
            TrainConfig {
                num_trainers: 3,
                ..cfg.clone()
            },
        )
        .unwrap();
        assert_eq!(job.method, Method::Toy);
        let dir = tmp.path().join("parts");
        let laid = prepare_layout(sbm(), &job, None).unwrap();
        let m = crate::store::write_partition_dir(&dir, &laid, &job, "sbm", false).unwrap();
        assert_eq!((m.data.layout.as_str(), m.parts.len()), ("blocks", 3));
        // a run asking for the default method trains the directory's layout's method
        let mut asked = TrainConfig {
            method: Method::RandomTma,
            ..cfg.clone()
        };
        apply_partitions(&dir, &m.data, &mut asked).unwrap();
        assert_eq!(asked.method, Method::Toy);
        let mut spec = RunSpec::new(asked, DataSource::Partitions(dir.clone()));
        spec.out = Some(tmp.path().join("from-dir"));
        let r = Run::start(spec).unwrap().train(&mut Quiet).unwrap();
        assert_eq!(r.summary.method, "toy-blocks");
        assert!(r.rounds.len() >= 2);
        // a method of another layout is refused naming both
        let mut other = cfg.clone();
        m.data.apply(&mut other);
        assert_eq!(
            check_layout(Method::PsgdPa, &other, "--partitions", &dir, &m.data.layout).unwrap_err(),
            format!(
                "--partitions {} holds the blocks layout; method psgd-pa trains on the metis layout (methods for this directory: toy-blocks); write one with `tma partition --out DIR --method psgd-pa`",
                dir.display()
            )
        );
    }
}
