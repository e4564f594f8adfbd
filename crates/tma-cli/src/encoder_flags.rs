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

    /// `--model`'s help, the encoder flags and the README's encoder list hold every registered
    /// encoder with its description and every encoder option with its default: checked
    /// against the registry, so adding an encoder needs no edit here (the README's line is
    /// the one text written by hand, and this test says what it lacks).
    #[test]
    fn model_help_encoder_flags_and_readme_follow_the_registry() {
        let help = EncoderKind::model_help(EncoderKind::Sage);
        let readme = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
        )
        .unwrap();
        // the README's encoder paragraph (lines wrapped: compared with single spaces)
        let start = readme
            .find("* Encoders `--model NAME`")
            .expect("README encoder list");
        let para: String = readme[start..]
            .split("`--layers 2`")
            .next()
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for &k in EncoderKind::ALL {
            assert!(
                help.contains(&format!("{} ({}", k.name(), k.about())),
                "{help}"
            );
            assert!(
                para.contains(&format!("`{}` ({}", k.name(), k.about())),
                "README lacks `{}` ({}: {para}",
                k.name(),
                k.about()
            );
        }
        let cmd = add(Command::new("train").arg(Arg::new("model").long("model")));
        for (o, owners) in EncoderKind::all_options() {
            let flag = format!("--{}", o.name.replace('_', "-"));
            assert!(
                para.contains(&format!("`{flag} {}`", o.default)),
                "README lacks `{flag} {}`: {para}",
                o.default
            );
            for k in owners {
                assert!(help.contains(&format!("{} ({}; options {flag}", k.name(), k.about())));
            }
            assert!(cmd
                .get_arguments()
                .any(|a| a.get_long() == Some(&flag[2..])));
        }
        assert_eq!(
            cmd.get_arguments()
                .find(|a| a.get_id() == "model")
                .and_then(|a| a.get_help())
                .map(|h| h.to_string()),
            Some(help)
        );
    }

    #[test]
    fn encoder_flags_are_typed_and_read_by_key() {
        let cmd = add(Command::new("train").arg(Arg::new("model").long("model")));
        let m = cmd
            .clone()
            .try_get_matches_from(["train", "--model", "gat", "--heads", "4"])
            .unwrap();
        assert_eq!(read(&m), BTreeMap::from([("heads".into(), 4.into())]));
        let none = cmd.clone().try_get_matches_from(["train"]).unwrap();
        assert!(read(&none).is_empty());
        let e = cmd
            .try_get_matches_from(["train", "--heads", "four"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid value 'four' for '--heads <H>'"), "{e}");
    }
}
