//! What depends on which options a user *gave*, written once for every front end (the CLI's
//! flags and config files, the Python package's keyword arguments): the combinations refused
//! ([`check_given`]) and the one-line warnings for options that no chosen method or model uses
//! ([`unused_warnings`]). Checks that need only the resolved configuration are
//! [`TrainConfig::validate`]. Options are named by their config-file keys (`super_nodes`);
//! each front end spells them its own way ([`Spelling`]): the same refusal, the same words.

use crate::config::{Method, TrainConfig};
use crate::methods::{and_list, or_list};
use crate::store::DataConfig;
use serde_json::{Map, Value};
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

fn number(given: &Given, key: &str) -> Option<f64> {
    given.get(key).and_then(Value::as_f64)
}

/// Refuses combinations of given options that cannot work together: an averaging ramp
/// (`sync_ramp` above 1) given with the step-count schedule (`sync_every_steps`), which has no
/// wall-clock spans to cut.
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
/// [`crate::method::MethodInfo`] and layout): `super_nodes` without a super-node layout
/// (super-tma), `super_clustering` without a clustering layout, a method's own option
/// (`llcg_steps`) without that method, `num_trainers` (other than 1) with only one-trainer
/// methods (centralized), `average_weight` with only methods that weigh no model (ggs,
/// centralized), `sync_ramp` (above 1) with only methods without a ramp (ggs), `heads`
/// without gat.
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
    if number(given, "sync_ramp").is_some_and(|r| r > 1.0)
        && !any(&|m| m.info().no_sync_ramp.is_none())
    {
        let why: Vec<String> = methods
            .iter()
            .filter_map(|m| m.info().no_sync_ramp.map(|y| format!("{m} {y}")))
            .collect();
        w.push(format!(
            "{} is ignored: {} ({what})",
            n("sync_ramp"),
            and_list(&why.iter().map(String::as_str).collect::<Vec<_>>())
        ));
    }
    if has("heads") && model != EncoderKind::Gat {
        w.push(format!(
            "{} is ignored: only {} gat has attention heads (model: {model})",
            n("heads"),
            n("model")
        ));
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

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
                "--heads is ignored: only --model gat has attention heads (model: sage)".to_string(),
            ]
        );
        let w = unused_warnings(&g, &[Method::SuperTma], EncoderKind::Gat, Spelling::Key);
        assert!(w.is_empty(), "{w:?}");
    }
}
