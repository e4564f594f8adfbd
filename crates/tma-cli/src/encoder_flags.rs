//! The encoders' own options as flags of `tma train` and `tma compare`, added to the derived
//! command at run time from the registry (`tma_nn::EncoderKind::all_options`, clap's builder
//! API over the derived `TrainOpts`), and `--model`'s help generated from the registry: an
//! encoder's new option is a flag, a config-file key and a Python keyword with no edit here.

use clap::{value_parser, Arg, ArgMatches, Command};
use std::collections::BTreeMap;
use tma_nn::{EncoderKind, OptionValue};

/// The flag of option `name` (`heads` -> `heads`, `num_heads` -> `num-heads`).
fn long(name: &'static str) -> &'static str {
    if name.contains('_') {
        // once per option and process: the flag's name lives as long as the command
        Box::leak(name.replace('_', "-").into_boxed_str())
    } else {
        name
    }
}

/// `cmd` (a subcommand that flattens `TrainOpts`) with `--model`'s help from the registry and
/// one flag per encoder option (`--heads H`), typed by the option's kind.
pub(crate) fn add(cmd: Command) -> Command {
    let default = tma_train::TrainConfig::default().model;
    let mut cmd = cmd.mut_arg("model", |a| a.help(EncoderKind::model_help(default)));
    for (o, owners) in EncoderKind::all_options() {
        let owners: Vec<&str> = owners.iter().map(|k| k.name()).collect();
        let help = format!(
            "{} Only --model {}. Default: {}.",
            o.help,
            owners.join(" or "),
            o.default
        );
        let arg = Arg::new(o.name)
            .long(long(o.name))
            .value_name(o.value_name)
            .help(help)
            .allow_hyphen_values(true);
        cmd = cmd.arg(match o.default {
            OptionValue::Int(_) => arg.value_parser(value_parser!(i64)),
            OptionValue::Float(_) => arg.value_parser(value_parser!(f64)),
        });
    }
    cmd
}

/// The encoder options given as flags in `m` (the matches of a command built with [`add`]),
/// by key.
pub(crate) fn read(m: &ArgMatches) -> BTreeMap<String, serde_json::Value> {
    let mut out = BTreeMap::new();
    for (o, _) in EncoderKind::all_options() {
        let v = match o.default {
            OptionValue::Int(_) => m.get_one::<i64>(o.name).map(|v| serde_json::json!(v)),
            OptionValue::Float(_) => m.get_one::<f64>(o.name).map(|v| serde_json::json!(v)),
        };
        if let Some(v) = v {
            out.insert(o.name.to_string(), v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The generated `--model` help lists every registered encoder, as the registry has them
    /// (this exact list is the one place that changes when an encoder is added).
    #[test]
    fn model_help_and_encoder_flags_come_from_the_registry() {
        let names: Vec<&str> = EncoderKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names, ["sage", "gcn", "mlp", "gat"]);
        assert_eq!(
            EncoderKind::model_help(EncoderKind::Sage),
            "Encoder: sage (GraphSAGE, mean aggregator; also graphsage), gcn (Kipf and Welling's \
             graph convolution), mlp (no edges: a linear layer per node) or gat (graph \
             attention; options --heads). Default: sage."
        );
        let cmd = add(Command::new("train").arg(Arg::new("model").long("model")));
        let m = cmd
            .clone()
            .try_get_matches_from(["train", "--model", "gat", "--heads", "4"])
            .unwrap();
        assert_eq!(read(&m), BTreeMap::from([("heads".into(), 4.into())]));
        let e = cmd
            .try_get_matches_from(["train", "--heads", "four"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid value 'four' for '--heads <H>'"), "{e}");
    }
}
