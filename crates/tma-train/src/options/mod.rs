//! The options of a training run: declared once in [`table::TABLE`] (key, flag, kind, help,
//! default, who uses it), turned into a [`TrainConfig`] by one function for every front end
//! ([`config_from`]: the CLI's flags and config files, the Python package's keyword
//! arguments), and what depends on which options a user *gave*: the combinations refused
//! ([`check_given`]) and the one-line warnings for options that no chosen method or model uses
//! ([`unused_warnings`]). Checks that need only the resolved configuration are
//! [`TrainConfig::validate`]. Options are named by their config-file keys (`super_nodes`);
//! each front end spells them its own way ([`Spelling`]): the same refusal, the same words.

mod checks;

pub mod table;

use crate::config::{Method, Task, TrainConfig};
use crate::methods::{and_list, or_list};
use crate::store::DataConfig;
use serde_json::{Map, Value};
use table::{Kind, Scope};
use tma_nn::EncoderKind;

/// The options a user gave, by config-file key (`num_trainers`, `sync_ramp`, ...), with their
/// values as JSON (absent = not given; the CLI's flags and config file, Python's keyword
/// arguments).
pub type Given = Map<String, Value>;

/// How a front end names an option in its messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spelling {
    /// The CLI's flag: `--super-nodes`, `--trainers`, `--layers`.
    Flag,
    /// The config-file key and Python keyword: `super_nodes`, `num_trainers`.
    Key,
}

impl Spelling {
    /// `key` (a config-file key) spelled for this front end.
    pub fn name(self, key: &str) -> String {
        match self {
            Spelling::Key => key.to_string(),
            Spelling::Flag => {
                let flag = match key {
                    "num_trainers" => "trainers",
                    "num_layers" => "layers",
                    k => k,
                };
                format!("--{}", flag.replace('_', "-"))
            }
        }
    }
}

impl Spelling {
    /// What a message about `value` given for `key` starts with: `--round-timeout` (flags) or
    /// `option 'round_timeout' = "soon"` (keys).
    pub fn subject(self, key: &str, value: &Value) -> String {
        match self {
            Spelling::Flag => self.name(key),
            Spelling::Key => format!("option '{key}' = {value}"),
        }
    }
}

/// Why [`config_from`] refused the options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OptionsError {
    /// An unknown option, one given twice, or a value that is not of the option's kind; the
    /// message names the option.
    Value(String),
    /// Values that are each of the right kind but do not make a valid configuration
    /// ([`TrainConfig::validate`]); shown after `invalid option: `.
    Invalid(String),
}

impl std::fmt::Display for OptionsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OptionsError::Value(m) => f.write_str(m),
            OptionsError::Invalid(m) => write!(f, "invalid option: {m}"),
        }
    }
}

impl std::error::Error for OptionsError {}

/// Every name [`config_from`] accepts that is not a key: `(alias, key)`, e.g.
/// `("trainers", "num_trainers")`.
pub fn aliases() -> Vec<(&'static str, &'static str)> {
    table::config_options()
        .flat_map(|o| o.aliases.iter().map(move |a| (*a, o.key)))
        .collect()
}

/// `name` (a key or an alias of [`aliases`]) as its config-file key; `name` itself when it
/// is neither.
pub fn canonical(name: &str) -> &str {
    table::rows()
        .iter()
        .find(|o| o.key == name || o.aliases.contains(&name))
        .map_or(name, |o| o.key)
}

/// `v`, given for the option `o`, in the form [`TrainConfig`] reads, after the check of its
/// kind ([`Kind`]): a duration or a name parsed, a size turned into bytes.
fn normalize(o: &table::OptionSpec, v: &Value, spelling: Spelling) -> Result<Value, String> {
    let bad = |msg: String| format!("{}: {msg}", spelling.subject(o.key, v));
    let Some(s) = v.as_str() else {
        return Ok(v.clone());
    };
    match o.kind {
        Kind::Duration => humantime::parse_duration(s)
            .map(|_| v.clone())
            .map_err(|_| bad(format!("'{s}' is not a duration (examples: 30s, 2min, 1h)"))),
        Kind::Size => table::parse_bytes(s).map(Value::from).map_err(bad),
        Kind::Choice(names) if !names.contains(&s) => Err(bad(format!(
            "unknown value '{s}' (expected {})",
            names.join(", ")
        ))),
        Kind::Name(parse) => parse(s).map(|()| v.clone()).map_err(bad),
        _ => Ok(v.clone()),
    }
}

/// A configuration from options by config-file key or alias, as every front end gives them
/// (`{"method": "super-tma", "sync_every": "30s", "trainers": 8, "eval_memory": "2GiB"}`):
/// the defaults of the task ([`TrainConfig::defaults_for`]) overridden by `options`, each
/// value checked by its kind ([`table::Kind`]), then [`TrainConfig::validate`]d. The one
/// place where a front end's named options become a configuration (the CLI's flags and
/// config files, the Python package's keyword arguments); messages name options in
/// `spelling`.
///
/// # Errors
/// [`OptionsError::Value`] naming the option: unknown (with the known ones; options of the
/// run such as `out` are the front end's, not a configuration's), given twice (through an
/// alias), a value of the wrong kind; [`OptionsError::Invalid`]: what
/// [`TrainConfig::validate`] refuses.
pub fn config_from(options: &Given, spelling: Spelling) -> Result<TrainConfig, OptionsError> {
    let mut given = Map::new();
    for (k, v) in options {
        let key = canonical(k);
        let Some(o) = table::rows()
            .iter()
            .find(|o| o.key == key && o.scope == Scope::Config)
        else {
            let mut names: Vec<&str> = table::config_options().map(|o| o.key).collect();
            names.sort_unstable();
            return Err(OptionsError::Value(format!(
                "unknown option '{k}' (options: {})",
                names.join(", ")
            )));
        };
        let v = normalize(o, v, spelling).map_err(OptionsError::Value)?;
        if given.insert(key.to_string(), v).is_some() {
            return Err(OptionsError::Value(format!(
                "option '{key}' given twice (once as '{k}')"
            )));
        }
    }
    let task = match given.get("task") {
        None => TrainConfig::default().task,
        Some(v) => serde_json::from_value::<Task>(v.clone())
            .map_err(|e| OptionsError::Value(format!("{}: {e}", spelling.subject("task", v))))?,
    };
    let defaults = serde_json::to_value(TrainConfig::defaults_for(task)).expect("serializes");
    let mut merged = defaults.clone();
    for (k, v) in &given {
        // each option alone over the defaults, so an error names the option
        let mut one = defaults.clone();
        one[k.as_str()] = v.clone();
        if let Err(e) = serde_json::from_value::<TrainConfig>(one) {
            return Err(OptionsError::Value(format!(
                "{}: {e}",
                spelling.subject(k, v)
            )));
        }
        merged[k.as_str()] = v.clone();
    }
    let cfg: TrainConfig =
        serde_json::from_value(merged).map_err(|e| OptionsError::Value(e.to_string()))?;
    cfg.validate().map_err(OptionsError::Invalid)?;
    Ok(cfg)
}

fn number(given: &Given, key: &str) -> Option<f64> {
    given.get(key).and_then(Value::as_f64)
}

/// Refuses combinations of given options that cannot work together: an averaging ramp
/// (`sync_ramp` above 1) or a plateau hold (`plateau_patience` above 0) given with the
/// step-count schedule (`sync_every_steps`), which has no wall-clock spans to cut and keeps
/// the plain mean.
///
/// # Errors
/// A message naming the options in `spelling`.
pub fn check_given(cfg: &TrainConfig, given: &Given, spelling: Spelling) -> Result<(), String> {
    let n = |k: &str| spelling.name(k);
    if number(given, "sync_ramp").is_some_and(|r| r > 1.0) && cfg.sync_every_steps > 0 {
        return Err(format!(
            "{} shortens the first wall-clock spans; the step-count schedule ({}) has none: leave {} out",
            n("sync_ramp"),
            n("sync_every_steps"),
            n("sync_ramp")
        ));
    }
    if number(given, "plateau_patience").is_some_and(|p| p > 0.0) && cfg.sync_every_steps > 0 {
        return Err(format!(
            "{} holds the model near its best on the wall-clock schedule; the step-count schedule ({}) keeps the plain mean, for runs compared round by round: leave {} out",
            n("plateau_patience"),
            n("sync_every_steps"),
            n("plateau_patience")
        ));
    }
    Ok(())
}

/// Refuses given options that contradict the data options a partition directory (`dir`, its
/// manifest's `data`) was made with: the task, trainers, seed, split fractions, ... are the
/// directory's, and a run on it cannot change them (`super_clustering` other than `auto`
/// too: the parts are made). Options equal to the directory's pass. A given method must train
/// on the directory's layout ([`crate::methods::check_layout`]).
///
/// # Errors
/// A method whose layout is not the directory's ([`crate::methods::check_layout`]); else one
/// message naming every contradicting option in `spelling` with the directory's value.
pub fn check_partitions(
    given: &Given,
    dir: &std::path::Path,
    data: &DataConfig,
    spelling: Spelling,
) -> Result<(), String> {
    // a method given must train on the directory's layout (any method whose layout it is does)
    if let Some(m) = given.get("method").and_then(Value::as_str) {
        if let Ok(method) = m.parse::<Method>() {
            let mut cfg = TrainConfig {
                method,
                ..TrainConfig::default()
            };
            data.apply(&mut cfg);
            crate::methods::check_layout(
                method,
                &cfg,
                &spelling.name("partitions"),
                dir,
                &data.layout,
            )?;
        }
    }
    let recorded = serde_json::to_value(data).expect("data options serialize");
    let mut clash = Vec::new();
    for (key, have) in recorded.as_object().expect("an object") {
        let Some(v) = given.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        let same = match (v.as_f64(), have.as_f64()) {
            (Some(a), Some(b)) => a == b,
            _ => v == have,
        };
        if !same {
            let show = |x: &Value| x.as_str().map_or_else(|| x.to_string(), str::to_string);
            clash.push(format!(
                "{} {} (the directory has {})",
                spelling.name(key),
                show(v),
                show(have)
            ));
        }
    }
    if let Some(c) = given
        .get("super_clustering")
        .and_then(Value::as_str)
        .filter(|&c| c != "auto")
    {
        clash.push(format!(
            "{} {c} (the directory's parts are already made; its partition.json report says which clustering ran)",
            spelling.name("super_clustering")
        ));
    }
    if clash.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{} {} was made with other options: {}; drop those options or re-run `tma partition --out`",
        spelling.name("partitions"),
        dir.display(),
        clash.join(", ")
    ))
}

/// One-line warnings (without a `warning: ` prefix) for given options that none of `methods`
/// (with the encoder `model`) uses, by what the methods declare (their
/// [`crate::engines::method::MethodInfo`] and layout): `super_nodes` without a super-node layout
/// (super-tma), `super_clustering` without a clustering layout, a method's own option
/// (`llcg_steps`) without that method, `num_trainers` (other than 1) with only one-trainer
/// methods (centralized), `average_weight` with only methods that weigh no model (ggs,
/// centralized), `sync_ramp` (above 1) with only methods without a ramp (ggs), `sync_every`
/// with the step-count schedule (`sync_every_steps` above 0: it then sets only an MPI rank's
/// silence limit), an encoder's own option (GAT's `heads`) with another encoder.
pub fn unused_warnings(
    given: &Given,
    methods: &[Method],
    model: EncoderKind,
    spelling: Spelling,
) -> Vec<String> {
    let n = |k: &str| spelling.name(k);
    let names: Vec<&str> = methods.iter().map(|m| m.as_str()).collect();
    let what = match names.len() {
        1 => format!("method: {}", names[0]),
        _ => format!("methods: {}", names.join(", ")),
    };
    let has = |k: &str| given.get(k).is_some_and(|v| !v.is_null());
    // what the chosen methods declare (their `MethodInfo` and layout), never their names
    let cfg = TrainConfig::default();
    let with = |f: &dyn Fn(Method) -> bool| -> Vec<&'static str> {
        Method::ALL
            .iter()
            .copied()
            .filter(|&m| f(m))
            .map(|m| m.as_str())
            .collect()
    };
    let any = |f: &dyn Fn(Method) -> bool| methods.iter().any(|&m| f(m));
    let mut w = Vec::new();
    let super_nodes = |m: Method| m.layout(&cfg).uses_super_nodes();
    if has("super_nodes") && !any(&super_nodes) {
        let users = with(&super_nodes);
        w.push(format!(
            "{} is ignored: only {} {} use{} super-nodes ({what})",
            n("super_nodes"),
            n("method"),
            or_list(&users),
            if users.len() == 1 { "s" } else { "" }
        ));
    }
    let clusters = |m: Method| m.layout(&cfg).clusters();
    if has("super_clustering") && !any(&clusters) {
        w.push(format!(
            "{} is ignored: only {} cluster the graph ({what})",
            n("super_clustering"),
            and_list(&with(&clusters))
        ));
    }
    let mut own: Vec<&(&str, &str)> = Vec::new();
    for o in Method::ALL.iter().flat_map(|m| m.info().options) {
        // an option several methods declare is said once
        if !own.iter().any(|(k, _)| *k == o.0) {
            own.push(o);
        }
    }
    for (key, does) in own {
        let declares = |m: Method| m.info().options.iter().any(|(k, _)| k == key);
        if has(key) && !any(&declares) {
            w.push(format!(
                "{} is ignored: only {} {} {does} ({what})",
                n(key),
                n("method"),
                or_list(&with(&declares))
            ));
        }
    }
    if number(given, "num_trainers").is_some_and(|m| m != 1.0) && !any(&|m| m.info().many_trainers)
    {
        let one = with(&|m| !m.info().many_trainers);
        w.push(format!(
            "{} is ignored: {} train{} one trainer on the whole graph ({what})",
            n("num_trainers"),
            and_list(&one),
            if one.len() == 1 { "s" } else { "" }
        ));
    }
    if has("average_weight") && !any(&|m| m.info().no_average_weight.is_none()) {
        let why: Vec<String> = Method::ALL
            .iter()
            .filter_map(|m| m.info().no_average_weight.map(|y| format!("{m} {y}")))
            .collect();
        w.push(format!(
            "{} is ignored: {} ({what})",
            n("average_weight"),
            and_list(&why.iter().map(String::as_str).collect::<Vec<_>>())
        ));
    }
    // options of model averaging (the ramp above 1, the plateau hold above 0), said once each
    // where no chosen method averages models
    for (key, off) in [("sync_ramp", 1.0), ("plateau_patience", 0.0)] {
        if number(given, key).is_some_and(|v| v > off) && !any(&|m| m.info().no_sync_ramp.is_none())
        {
            let why: Vec<String> = methods
                .iter()
                .filter_map(|m| m.info().no_sync_ramp.map(|y| format!("{m} {y}")))
                .collect();
            w.push(format!(
                "{} is ignored: {} ({what})",
                n(key),
                and_list(&why.iter().map(String::as_str).collect::<Vec<_>>())
            ));
        }
    }
    // the step-count schedule replaces --sync-every's spans (the coordinator calls a round
    // once every trainer made its steps; --val-check-interval with it is refused by validate)
    if number(given, "sync_every_steps").is_some_and(|s| s > 0.0) && has("sync_every") {
        w.push(format!(
            "{} is not the averaging schedule with {} (a round comes after that many steps per trainer): it sets only how long an MPI rank may be silent before it is lost, 4 x ({} + {})",
            n("sync_every"),
            n("sync_every_steps"),
            n("sync_every"),
            n("round_timeout")
        ));
    }
    // the encoders' own options (GAT's heads, ...), from the registry
    for (opt, owners) in EncoderKind::all_options() {
        if has(opt.name) && !owners.contains(&model) {
            let owners: Vec<&str> = owners.iter().map(|k| k.name()).collect();
            w.push(format!(
                "{} is ignored: it is an option of {} {} (model: {model})",
                n(opt.name),
                n("model"),
                owners.join(" or ")
            ));
        }
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn given(pairs: &[(&str, Value)]) -> Given {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn each_front_end_spells_the_same_refusal_its_own_way() {
        let cfg = TrainConfig {
            sync_every_steps: 3,
            ..TrainConfig::default()
        };
        let g = given(&[("sync_ramp", 4.into())]);
        assert_eq!(
            check_given(&cfg, &g, Spelling::Flag).unwrap_err(),
            "--sync-ramp shortens the first wall-clock spans; the step-count schedule (--sync-every-steps) has none: leave --sync-ramp out"
        );
        assert_eq!(
            check_given(&cfg, &g, Spelling::Key).unwrap_err(),
            "sync_ramp shortens the first wall-clock spans; the step-count schedule (sync_every_steps) has none: leave sync_ramp out"
        );
        // a ramp of 1 is no ramp; without the step schedule the ramp is fine
        assert!(check_given(&cfg, &given(&[("sync_ramp", 1.into())]), Spelling::Flag).is_ok());
        assert!(check_given(&TrainConfig::default(), &g, Spelling::Flag).is_ok());
    }

    #[test]
    fn a_plateau_hold_is_refused_with_the_step_count_schedule() {
        let cfg = TrainConfig {
            sync_every_steps: 3,
            ..TrainConfig::default()
        };
        let g = given(&[("plateau_patience", 2.into())]);
        assert_eq!(
            check_given(&cfg, &g, Spelling::Flag).unwrap_err(),
            "--plateau-patience holds the model near its best on the wall-clock schedule; the step-count schedule (--sync-every-steps) keeps the plain mean, for runs compared round by round: leave --plateau-patience out"
        );
        // 0 (off) passes, and so does a hold on the wall-clock schedule
        let off = given(&[("plateau_patience", 0.into())]);
        assert!(check_given(&cfg, &off, Spelling::Flag).is_ok());
        assert!(check_given(&TrainConfig::default(), &g, Spelling::Flag).is_ok());
    }

    #[test]
    fn options_that_contradict_a_partition_directory_are_refused() {
        let data = DataConfig::of(&TrainConfig::default(), "metis", 3);
        let dir = std::path::Path::new("parts");
        let g = given(&[
            ("method", "llcg".into()),
            ("num_trainers", 3.into()),
            ("seed", 7.into()),
            ("val_frac", data.val_frac.into()),
        ]);
        assert_eq!(
            check_partitions(&g, dir, &data, Spelling::Key).unwrap_err(),
            "partitions parts was made with other options: seed 7 (the directory has 0); drop those options or re-run `tma partition --out`"
        );
        // a method is not a data option: any whose layout is the directory's trains from it;
        // one of another layout is refused naming both layouts
        let g = given(&[("method", "ggs".into())]);
        assert_eq!(
            check_partitions(&g, dir, &data, Spelling::Flag).unwrap_err(),
            "--partitions parts holds the metis layout; method ggs trains on the shared-examples layout (methods for this directory: psgd-pa, llcg); write one with `tma partition --out DIR --method ggs`"
        );
        let g = given(&[
            ("num_trainers", 5.into()),
            ("super_clustering", "lpa".into()),
        ]);
        assert_eq!(
            check_partitions(&g, dir, &data, Spelling::Flag).unwrap_err(),
            "--partitions parts was made with other options: --trainers 5 (the directory has 3), --super-clustering lpa (the directory's parts are already made; its partition.json report says which clustering ran); drop those options or re-run `tma partition --out`"
        );
        let same = given(&[
            ("method", "psgd-pa".into()),
            ("num_trainers", 3.into()),
            ("super_clustering", "auto".into()),
        ]);
        assert!(check_partitions(&same, dir, &data, Spelling::Flag).is_ok());
    }

    #[test]
    fn unused_options_are_named_once_each() {
        let g = given(&[
            ("super_nodes", 50.into()),
            ("num_trainers", 4.into()),
            ("heads", 2.into()),
            ("llcg_steps", Value::Null),
        ]);
        let w = unused_warnings(
            &g,
            &[Method::Centralized],
            EncoderKind::Sage,
            Spelling::Flag,
        );
        assert_eq!(
            w,
            vec![
                "--super-nodes is ignored: only --method super-tma uses super-nodes (method: centralized)".to_string(),
                "--trainers is ignored: centralized trains one trainer on the whole graph (method: centralized)".to_string(),
                "--heads is ignored: it is an option of --model gat (model: sage)".to_string(),
            ]
        );
        let w = unused_warnings(&g, &[Method::SuperTma], EncoderKind::Gat, Spelling::Key);
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn sync_every_given_with_the_step_schedule_is_said() {
        let g = given(&[("sync_every_steps", 20.into()), ("sync_every", "2s".into())]);
        let w = unused_warnings(&g, &[Method::RandomTma], EncoderKind::Sage, Spelling::Flag);
        assert_eq!(
            w,
            vec![
                "--sync-every is not the averaging schedule with --sync-every-steps (a round comes after that many steps per trainer): it sets only how long an MPI rank may be silent before it is lost, 4 x (--sync-every + --round-timeout)".to_string(),
            ]
        );
        // the wall-clock schedule (0 steps) uses it
        let wall = given(&[("sync_every_steps", 0.into()), ("sync_every", "2s".into())]);
        assert!(unused_warnings(
            &wall,
            &[Method::RandomTma],
            EncoderKind::Sage,
            Spelling::Flag
        )
        .is_empty());
    }

    #[test]
    fn a_plateau_hold_given_to_ggs_is_said_to_be_ignored() {
        let g = given(&[("plateau_patience", 2.into())]);
        let w = unused_warnings(&g, &[Method::Ggs], EncoderKind::Sage, Spelling::Flag);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("--plateau-patience is ignored: ggs ")
                && w[0].ends_with("(method: ggs)"),
            "{w:?}"
        );
        assert!(
            unused_warnings(&g, &[Method::RandomTma], EncoderKind::Sage, Spelling::Flag).is_empty()
        );
        let off = given(&[("plateau_patience", 0.into())]);
        assert!(
            unused_warnings(&off, &[Method::Ggs], EncoderKind::Sage, Spelling::Flag).is_empty()
        );
    }
    #[test]
    fn config_from_applies_task_defaults_aliases_and_names_bad_keys() {
        let m = |j: serde_json::Value| j.as_object().unwrap().clone();
        let from = |g: &Given| config_from(g, Spelling::Key).map_err(|e| e.to_string());
        let c = from(&m(serde_json::json!({}))).unwrap();
        assert_eq!(c.batch_size, 1024);
        assert_eq!(c.sync_every, Duration::from_secs(5));
        let c = from(&m(serde_json::json!({
            "task": "link", "trainers": 8, "layers": 3, "fanouts": [5, 5, 5],
            "sync_every": "30s", "method": "super-tma", "model": "gcn", "lr": 0.01
        })))
        .unwrap();
        assert_eq!(c.batch_size, 8192, "link default batch");
        assert_eq!((c.num_trainers, c.num_layers), (8, 3));
        assert_eq!(c.sync_every, Duration::from_secs(30));
        assert_eq!(c.method, Method::SuperTma);
        assert_eq!(c.model, EncoderKind::Gcn);
        assert_eq!(c.lr, 0.01);
        let c = from(&m(serde_json::json!({"eval_memory": "2GiB"}))).unwrap();
        assert_eq!(
            c.eval_memory,
            2 << 30,
            "a size as text, as the CLI takes it"
        );
        let e = from(&m(serde_json::json!({"hiden": 3}))).unwrap_err();
        assert!(e.starts_with("unknown option 'hiden' (options: "), "{e}");
        assert!(e.contains("hidden"), "{e}");
        let e = from(&m(serde_json::json!({"hidden": "wide"}))).unwrap_err();
        assert!(
            e.starts_with("option 'hidden' = \"wide\": invalid type"),
            "{e}"
        );
        let e = from(&m(serde_json::json!({"sync_every": "soon"}))).unwrap_err();
        assert!(e.starts_with("option 'sync_every' = \"soon\""), "{e}");
        let e = from(&m(serde_json::json!({"trainers": 2, "num_trainers": 3}))).unwrap_err();
        assert!(e.contains("given twice"), "{e}");
        let e = from(&m(serde_json::json!({"trainers": 0}))).unwrap_err();
        assert_eq!(e, "invalid option: trainers must be >= 1");
        let e = from(&m(serde_json::json!({"task": "edge"}))).unwrap_err();
        assert!(e.starts_with("option 'task'"), "{e}");
    }

    #[test]
    fn every_refused_value_of_the_table_is_refused_in_the_same_words_by_each_front_end() {
        let mut n = 0;
        for o in table::config_options() {
            for bad in o.invalid {
                let v: Value = serde_json::from_str(bad).unwrap();
                let g: Given = [(o.key.to_string(), v.clone())].into_iter().collect();
                let as_key = config_from(&g, Spelling::Key).unwrap_err();
                let as_flag = config_from(&g, Spelling::Flag).unwrap_err();
                // the same refusal; only how the option is named differs
                let spelled = as_key.to_string().replace(
                    &Spelling::Key.subject(o.key, &v),
                    &Spelling::Flag.name(o.key),
                );
                assert_eq!(spelled, as_flag.to_string(), "{} = {bad}", o.key);
                n += 1;
            }
        }
        assert!(n >= 35, "{n} refused values in the table");
    }

    #[test]
    fn values_are_checked_by_their_kind_and_named_in_each_spelling() {
        let g = |k: &str, v: Value| -> Given { [(k.to_string(), v)].into_iter().collect() };
        let e = |g: Given, s| config_from(&g, s).unwrap_err().to_string();
        assert_eq!(
            e(g("round_timeout", "soon".into()), Spelling::Flag),
            "--round-timeout: 'soon' is not a duration (examples: 30s, 2min, 1h)"
        );
        assert_eq!(
            e(g("round_timeout", "soon".into()), Spelling::Key),
            "option 'round_timeout' = \"soon\": 'soon' is not a duration (examples: 30s, 2min, 1h)"
        );
        assert_eq!(
            e(g("eval_memory", "lots".into()), Spelling::Flag),
            "--eval-memory: \"lots\" is not a size (e.g. 512MiB, 2GiB)"
        );
        assert_eq!(
            e(g("eval_inference", "fast".into()), Spelling::Flag),
            "--eval-inference: unknown eval inference 'fast' (expected auto, full or restricted)"
        );
        assert_eq!(
            e(g("layers", 0.into()), Spelling::Key),
            "invalid option: layers must be >= 1"
        );
        assert!(
            e(g("out", "x".into()), Spelling::Key).starts_with("unknown option 'out' (options: ")
        );
    }
}
