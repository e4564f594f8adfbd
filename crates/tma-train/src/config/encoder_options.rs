//! The encoder's own options in a training configuration ([`EncoderOptionValues`], the
//! `encoder_options` of [`crate::TrainConfig`]): keys the encoders declare in their own files
//! (`tma_nn::EncoderKind::options`, e.g. GAT's `heads`), written as top-level keys in config
//! files (`heads = 4`) and Python keyword arguments, and resolved for the chosen encoder
//! ([`EncoderOptionValues::resolve`]). Nothing here names an encoder or an option.

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::fmt;
use tma_nn::{EncoderKind, EncoderOption, EncoderOptions, EncoderShape, OptionValue};

/// Encoder options as given, by key (only keys some registered encoder declares; values of the
/// declared kind). Options of encoders other than the chosen one are kept and unused (the
/// front ends warn about them: [`crate::options::unused_warnings`]).
///
/// In serde form a map of key to number, flattened into the configuration's keys; reading
/// it skips every key no encoder declares (the configuration's other keys, and keys of the
/// run's `config.toml` that no configuration field reads).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EncoderOptionValues(BTreeMap<String, OptionValue>);

/// The declaration of encoder option `key` in the registry (the first encoder's, when two
/// declare the same key).
pub fn declared(key: &str) -> Option<EncoderOption> {
    EncoderKind::all_options()
        .into_iter()
        .map(|(o, _)| o)
        .find(|o| o.name == key)
}

/// Every encoder option's key, in registry order (`["heads"]`).
pub fn keys() -> Vec<&'static str> {
    EncoderKind::all_options()
        .into_iter()
        .map(|(o, _)| o.name)
        .collect()
}

/// `v` (a JSON number as a config file or keyword argument gives it) as a value of option
/// `o`'s kind.
///
/// # Errors
/// A message naming the option and the encoders that declare it.
fn from_json(o: &EncoderOption, v: &serde_json::Value) -> Result<OptionValue, String> {
    let owners = || {
        EncoderKind::all_options()
            .into_iter()
            .find(|(p, _)| p.name == o.name)
            .map(|(_, ks)| ks.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "))
            .unwrap_or_default()
    };
    let got = match (v.as_i64(), v.as_f64()) {
        (Some(i), _) => OptionValue::Int(i),
        (None, Some(f)) => OptionValue::Float(f),
        _ => {
            return Err(format!(
                "option '{}' of encoder {} takes {}, got {v}",
                o.name,
                owners(),
                o.default.kind_name()
            ))
        }
    };
    o.default
        .convert_like(got)
        .map_err(|e| format!("option '{}' of encoder {}: {e}", o.name, owners()))
}

impl EncoderOptionValues {
    /// Sets `key` (an option some encoder declares) from a config-file or keyword value.
    ///
    /// # Errors
    /// A key no encoder declares, or a value of the wrong kind; the message names the option.
    pub fn set_json(&mut self, key: &str, v: &serde_json::Value) -> Result<(), String> {
        let Some(o) = declared(key) else {
            return Err(format!(
                "'{key}' is not an option of any encoder (encoder options: {})",
                keys().join(", ")
            ));
        };
        self.0.insert(key.to_string(), from_json(&o, v)?);
        Ok(())
    }

    /// The value given for `key`, if any.
    pub fn get(&self, key: &str) -> Option<OptionValue> {
        self.0.get(key).copied()
    }

    /// Whether no option was given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The options `model` is built with: its defaults, replaced by the values given for its
    /// own options (values of other encoders' options are not used), checked against `shape`.
    ///
    /// # Errors
    /// The message of the first option check that fails (e.g. GAT heads that do not divide
    /// `hidden`).
    pub fn resolve(
        &self,
        model: EncoderKind,
        shape: &EncoderShape,
    ) -> Result<EncoderOptions, String> {
        let mut o = model.default_options();
        for (k, v) in &self.0 {
            if o.get(k).is_some() {
                o.set(k, *v)?;
            }
        }
        o.check(shape)?;
        Ok(o)
    }
}

impl Serialize for EncoderOptionValues {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            match v {
                OptionValue::Int(i) => m.serialize_entry(k, i)?,
                OptionValue::Float(f) => m.serialize_entry(k, f)?,
            }
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for EncoderOptionValues {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = EncoderOptionValues;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("encoder options")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut out = EncoderOptionValues::default();
                while let Some(k) = m.next_key::<String>()? {
                    if declared(&k).is_some() {
                        let v: serde_json::Value = m.next_value()?;
                        out.set_json(&k, &v).map_err(serde::de::Error::custom)?;
                    } else {
                        m.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn given_options_are_kept_by_kind_and_resolved_for_the_chosen_encoder() {
        let mut v = EncoderOptionValues::default();
        v.set_json("heads", &serde_json::json!(4)).unwrap();
        assert_eq!(
            v.set_json("heads", &serde_json::json!("four")).unwrap_err(),
            "option 'heads' of encoder gat takes an integer, got \"four\""
        );
        assert_eq!(
            v.set_json("heads", &serde_json::json!(2.5)).unwrap_err(),
            "option 'heads' of encoder gat: expected an integer, got 2.5"
        );
        assert_eq!(
            v.set_json("colour", &serde_json::json!(1)).unwrap_err(),
            "'colour' is not an option of any encoder (encoder options: heads)"
        );
        let shape = EncoderShape {
            hidden: 32,
            num_layers: 2,
        };
        let gat = v.resolve(EncoderKind::Gat, &shape).unwrap();
        assert_eq!(gat.get("heads"), Some(OptionValue::Int(4)));
        // another encoder's option is not used (and not checked against it)
        let sage = v.resolve(EncoderKind::Sage, &shape).unwrap();
        assert_eq!(sage.iter().count(), 0);
        let e = v
            .resolve(
                EncoderKind::Gat,
                &EncoderShape {
                    hidden: 30,
                    num_layers: 2,
                },
            )
            .unwrap_err();
        assert_eq!(
            e,
            "--model gat splits --hidden 30 over --heads 4: hidden must be a positive multiple of heads"
        );
        // serde: a map of numbers; other keys skipped
        let s = serde_json::to_string(&v).unwrap();
        assert_eq!(s, "{\"heads\":4}");
        let r: EncoderOptionValues =
            serde_json::from_str("{\"heads\":2,\"hidden\":64,\"engine\":\"mpi\"}").unwrap();
        assert_eq!(r.get("heads"), Some(OptionValue::Int(2)));
        assert_eq!(r.0.len(), 1);
        let r: EncoderOptionValues = toml::from_str("heads = 3\nlr = 0.5\n").unwrap();
        assert_eq!(r.get("heads"), Some(OptionValue::Int(3)));
    }
}
