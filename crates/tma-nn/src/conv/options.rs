//! Options an encoder declares for itself ([`EncoderOption`]: name, default, help, check) and
//! the values one model is built with ([`EncoderOptions`]). The front ends (CLI flags, config
//! keys, Python keywords) read the declarations from the registry (`conv/mod.rs`); nothing
//! outside an encoder's own file names its options. Depends on no other file of the crate.

use std::fmt;

/// The value of an encoder option: an integer or a number. The kind of an option is the kind
/// of its [`EncoderOption::default`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OptionValue {
    /// An integer (e.g. GAT's `heads`).
    Int(i64),
    /// A finite floating-point number.
    Float(f64),
}

impl OptionValue {
    /// `s` read as a value of `self`'s kind (`"4"` for an integer option, `"0.5"` or `"2"` for
    /// a number).
    ///
    /// # Errors
    /// A message saying what was expected (`expected an integer, got "four"`).
    pub fn parse_like(self, s: &str) -> Result<OptionValue, String> {
        let t = s.trim();
        match self {
            OptionValue::Int(_) => t
                .parse::<i64>()
                .map(OptionValue::Int)
                .map_err(|_| format!("expected an integer, got {s:?}")),
            OptionValue::Float(_) => match t.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(OptionValue::Float(v)),
                _ => Err(format!("expected a finite number, got {s:?}")),
            },
        }
    }

    /// `v` converted to `self`'s kind: an integer stays an integer, a number option takes an
    /// integer as that number.
    ///
    /// # Errors
    /// A number given for an integer option, or a non-finite number.
    pub fn convert_like(self, v: OptionValue) -> Result<OptionValue, String> {
        match (self, v) {
            (OptionValue::Int(_), OptionValue::Int(i)) => Ok(OptionValue::Int(i)),
            (OptionValue::Int(_), OptionValue::Float(f)) => {
                Err(format!("expected an integer, got {f}"))
            }
            (OptionValue::Float(_), OptionValue::Int(i)) => Ok(OptionValue::Float(i as f64)),
            (OptionValue::Float(_), OptionValue::Float(f)) if f.is_finite() => {
                Ok(OptionValue::Float(f))
            }
            (OptionValue::Float(_), OptionValue::Float(f)) => {
                Err(format!("expected a finite number, got {f}"))
            }
        }
    }

    /// "an integer" or "a number" (for help texts and messages).
    pub fn kind_name(self) -> &'static str {
        match self {
            OptionValue::Int(_) => "an integer",
            OptionValue::Float(_) => "a number",
        }
    }

    /// The value as JSON (`8`, `0.2`).
    pub fn to_json(self) -> String {
        match self {
            OptionValue::Int(i) => i.to_string(),
            // Display of a finite f64 is valid JSON (`0.2`, `2`, `0.00001`)
            OptionValue::Float(f) => format!("{f}"),
        }
    }
}

impl fmt::Display for OptionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionValue::Int(i) => write!(f, "{i}"),
            OptionValue::Float(x) => write!(f, "{x}"),
        }
    }
}

/// What an option's check may read of the model besides the option's value: the widths known
/// before any data is loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EncoderShape {
    /// Width of every hidden layer (and of the embeddings of a link model).
    pub hidden: usize,
    /// Encoder layers.
    pub num_layers: usize,
}

/// One option an encoder declares (`Encoder::OPTIONS` of its layer type): the CLI's
/// `--NAME` flag (`_` written `-`), the config-file key and the Python keyword `NAME`.
#[derive(Clone, Copy, Debug)]
pub struct EncoderOption {
    /// Key (`heads`): lower case, `_` between words.
    pub name: &'static str,
    /// Value when not given; its kind is the option's kind.
    pub default: OptionValue,
    /// One sentence for `--help` and the README (without the default: it is added).
    pub help: &'static str,
    /// Placeholder of the value in `--help` (`H`).
    pub value_name: &'static str,
    /// Refuses a value that cannot work with the model's shape; the message names the option
    /// and says what would.
    pub check: fn(OptionValue, &EncoderShape) -> Result<(), String>,
}

/// The options one model's encoder is built with: every option its encoder declares, with its
/// default unless set ([`EncoderOptions::set`]). Built by `EncoderKind::default_options`.
#[derive(Clone, Debug, PartialEq)]
pub struct EncoderOptions {
    encoder: &'static str,
    specs: &'static [EncoderOption],
    values: Vec<OptionValue>,
}

impl PartialEq for EncoderOption {
    fn eq(&self, o: &EncoderOption) -> bool {
        self.name == o.name && self.default == o.default
    }
}

impl EncoderOptions {
    /// The defaults of the options `specs` of the encoder named `encoder`.
    pub(crate) fn new(encoder: &'static str, specs: &'static [EncoderOption]) -> EncoderOptions {
        EncoderOptions {
            encoder,
            specs,
            values: specs.iter().map(|s| s.default).collect(),
        }
    }

    /// The encoder's name (`gat`).
    pub fn encoder_name(&self) -> &'static str {
        self.encoder
    }

    /// The encoder's declared options.
    pub fn specs(&self) -> &'static [EncoderOption] {
        self.specs
    }

    /// `name`s' names, joined (`"heads"`; `"none"` for an encoder without options).
    pub fn names_of(specs: &[EncoderOption]) -> String {
        if specs.is_empty() {
            "none".into()
        } else {
            specs.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
        }
    }

    /// Sets option `name` to `v` (an integer given for a number option is taken as that
    /// number).
    ///
    /// # Errors
    /// An option the encoder does not declare (the message names the encoder and its
    /// options), or a value of the wrong kind.
    pub fn set(&mut self, name: &str, v: OptionValue) -> Result<(), String> {
        let Some(i) = self.specs.iter().position(|s| s.name == name) else {
            return Err(format!(
                "encoder {} has no option '{name}' (its options: {})",
                self.encoder,
                EncoderOptions::names_of(self.specs)
            ));
        };
        self.values[i] = self.specs[i]
            .default
            .convert_like(v)
            .map_err(|e| format!("option '{name}' of encoder {}: {e}", self.encoder))?;
        Ok(())
    }

    /// The value of option `name`, `None` if the encoder does not declare it.
    pub fn get(&self, name: &str) -> Option<OptionValue> {
        let i = self.specs.iter().position(|s| s.name == name)?;
        Some(self.values[i])
    }

    /// `(name, value)` of every option, in declaration order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, OptionValue)> + '_ {
        self.specs
            .iter()
            .map(|s| s.name)
            .zip(self.values.iter().copied())
    }

    /// Runs every option's check against `shape`.
    ///
    /// # Errors
    /// The first check's message.
    pub fn check(&self, shape: &EncoderShape) -> Result<(), String> {
        for (s, v) in self.specs.iter().zip(&self.values) {
            (s.check)(*v, shape)?;
        }
        Ok(())
    }

    /// The options as a JSON object (`{"heads":8}`; `{}` without options).
    pub fn to_json(&self) -> String {
        let fields: Vec<String> = self
            .iter()
            .map(|(n, v)| format!("\"{n}\":{}", v.to_json()))
            .collect();
        format!("{{{}}}", fields.join(","))
    }

    /// Option `name` as a count, for the encoder's own layer file.
    ///
    /// # Panics
    /// If the encoder does not declare `name` (a mistake in its file) or it is not an integer.
    pub(crate) fn int(&self, name: &str) -> i64 {
        match self.get(name) {
            Some(OptionValue::Int(i)) => i,
            other => panic!(
                "encoder {} reads option '{name}' as an integer, but declares {other:?}",
                self.encoder
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positive(v: OptionValue, _: &EncoderShape) -> Result<(), String> {
        match v {
            OptionValue::Int(i) if i > 0 => Ok(()),
            _ => Err(format!("k must be >= 1, got {v}")),
        }
    }

    const SPECS: &[EncoderOption] = &[
        EncoderOption {
            name: "k",
            default: OptionValue::Int(3),
            help: "K.",
            value_name: "K",
            check: positive,
        },
        EncoderOption {
            name: "scale",
            default: OptionValue::Float(0.5),
            help: "Scale.",
            value_name: "S",
            check: |_, _| Ok(()),
        },
    ];

    #[test]
    fn values_keep_their_kind_and_unknown_names_name_the_encoder() {
        let mut o = EncoderOptions::new("toy", SPECS);
        assert_eq!(o.to_json(), "{\"k\":3,\"scale\":0.5}");
        o.set("scale", OptionValue::Int(2)).unwrap();
        assert_eq!(o.get("scale"), Some(OptionValue::Float(2.0)));
        assert_eq!(
            o.set("k", OptionValue::Float(2.5)).unwrap_err(),
            "option 'k' of encoder toy: expected an integer, got 2.5"
        );
        assert_eq!(
            o.set("heads", OptionValue::Int(2)).unwrap_err(),
            "encoder toy has no option 'heads' (its options: k, scale)"
        );
        assert_eq!(
            OptionValue::Int(0).parse_like("four").unwrap_err(),
            "expected an integer, got \"four\""
        );
        assert_eq!(
            OptionValue::Float(0.0).parse_like("2"),
            Ok(OptionValue::Float(2.0))
        );
        assert!(OptionValue::Float(0.0).parse_like("inf").is_err());
        let shape = EncoderShape {
            hidden: 8,
            num_layers: 2,
        };
        assert!(o.check(&shape).is_ok());
        o.set("k", OptionValue::Int(0)).unwrap();
        assert_eq!(o.check(&shape).unwrap_err(), "k must be >= 1, got 0");
        assert_eq!(o.int("k"), 0);
        let none = EncoderOptions::new("plain", &[]);
        assert_eq!(none.to_json(), "{}");
        assert_eq!(
            none.clone().set("k", OptionValue::Int(1)).unwrap_err(),
            "encoder plain has no option 'k' (its options: none)"
        );
    }
}
