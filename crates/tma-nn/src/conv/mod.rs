//! Graph convolution layers, one file each, and the one registry ([`EncoderKind`]) that names
//! them and builds them for [`crate::Model`].
//!
//! A layer is a type implementing the crate-internal `Conv` trait (`layer.rs`): it declares its parameters
//! (PyG names under the model's per-layer prefix `encoder.{l}.`) when built, and computes its
//! forward and hand-written backward over a sampled block (`tma_sample::BlockView`: destination
//! nodes are the first `num_dst` source nodes). The model owns everything between layers (bias
//! of hidden layers fused with LayerNorm → PReLU → dropout) and the buffer pool.
//!
//! The registry depends on the layer files and they on `layer.rs` (and SAGE / GCN on their
//! shared core, `linear_agg.rs`), never back.
//!
//! Adding an encoder: a new file in this folder with a type that implements `Conv` (forward,
//! backward, and, where the defaults do not fit, its evaluation cost model; its PyTorch
//! export) and `Encoder` (a description and its options, `options.rs`) and has a
//! `build(&ConvArgs, &mut ParamAlloc) -> Result<Self, String>` constructor, its `mod` line and
//! one line in the `encoders!` list below (variant, module and type, the `--model` name).
//! Nothing else lists encoders or their options: [`EncoderKind`]'s names, options, help text,
//! parsing and [`crate::Model::new`] read the list; the CLI's flags, config keys and Python
//! keywords come from [`EncoderKind::all_options`]; the model tests run every registered
//! encoder (`EncoderKind::ALL`); `toy.rs` is such an encoder, in tests only
//! (docs/decisions/0023-encoder-registry.md).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

mod layer;
#[macro_use]
mod linear_agg;
mod options;

pub use layer::{linear_eval_bytes, linear_eval_cost, EvalLayer, LayerCounts, LayerExport};
pub(crate) use layer::{Conv, ConvArgs, ConvCache, Encoder, Init, ParamAlloc};
pub use options::{EncoderOption, EncoderOptions, EncoderShape, OptionValue};

/// The registry: `[#[cfg(...)]] Variant => module::Type, "name" [| "alias" ...];`. Re-exports
/// each type and generates [`EncoderKind`] with its names, descriptions, options, parsing and
/// builder.
macro_rules! encoders {
    ($( $(#[$attr:meta])* $variant:ident => $module:ident :: $ty:ident, $name:literal $(| $alias:literal)* ; )*) => {
        $( $(#[$attr])* pub use $module::$ty; )*

        /// Which graph convolution the encoder stacks; `--model NAME` (case-insensitive).
        /// Every variant is one layer type of this module ([`EncoderKind::ALL`] lists them).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum EncoderKind {
            $(
                $(#[$attr])*
                #[doc = concat!("[`", stringify!($ty), "`], `--model ", $name, "`.")]
                $variant,
            )*
        }

        impl EncoderKind {
            /// Every registered encoder, in registry order.
            pub const ALL: &'static [EncoderKind] = &[$( $(#[$attr])* EncoderKind::$variant, )*];

            /// The canonical name (`--model` value, `Display`).
            pub fn name(self) -> &'static str {
                match self { $( $(#[$attr])* EncoderKind::$variant => $name, )* }
            }

            /// Accepted spellings besides [`EncoderKind::name`] (lower case).
            pub fn aliases(self) -> &'static [&'static str] {
                match self { $( $(#[$attr])* EncoderKind::$variant => &[$($alias),*], )* }
            }

            /// A few words saying what the encoder computes (`--model`'s help, the README).
            pub fn about(self) -> &'static str {
                match self { $( $(#[$attr])* EncoderKind::$variant => <$ty as Encoder>::ABOUT, )* }
            }

            /// The options the encoder declares (flags, config keys, Python keywords).
            pub fn options(self) -> &'static [EncoderOption] {
                match self { $( $(#[$attr])* EncoderKind::$variant => <$ty as Encoder>::OPTIONS, )* }
            }

            /// Build layer `args.layer`, declaring its parameters in `alloc`.
            pub(crate) fn build(
                self,
                args: &ConvArgs,
                alloc: &mut ParamAlloc,
            ) -> Result<Arc<dyn Conv>, String> {
                match self {
                    $( $(#[$attr])* EncoderKind::$variant => Ok(Arc::new($ty::build(args, alloc)?)), )*
                }
            }
        }
    };
}

/// Tests: force GAT's aggregate-first (`Some(true)`) or transform-first (`Some(false)`) path on
/// the calling thread; `None` restores the cost-based choice.
#[cfg(test)]
pub(crate) fn set_gat_aggregate_first(v: Option<bool>) {
    gat::FORCE_AGGREGATE_FIRST.with(|c| c.set(v));
}

// The layer files (declared here, not inside the macro, so that `cargo fmt` reaches them).
mod gat;
mod gcn;
mod mlp;
mod sage;
#[cfg(test)]
mod toy;

encoders! {
    Sage => sage::SageConv, "sage" | "graphsage";
    Gcn => gcn::GcnConv, "gcn";
    Mlp => mlp::MlpConv, "mlp";
    Gat => gat::GatConv, "gat";
    #[cfg(test)]
    Toy => toy::ToyConv, "toy";
}

impl EncoderKind {
    /// The canonical names of every registered encoder, joined for messages
    /// (`"sage, gcn, mlp or gat"`).
    pub fn names_list() -> String {
        let names: Vec<&str> = EncoderKind::ALL.iter().map(|k| k.name()).collect();
        match names.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }

    /// The defaults of the encoder's options ([`EncoderOptions::set`] changes them).
    pub fn default_options(self) -> EncoderOptions {
        EncoderOptions::new(self.name(), self.options())
    }

    /// `--model`'s help text, from the registry: `"Encoder: sage (GraphSAGE, mean aggregator;
    /// also graphsage), gcn (...), ... or gat (graph attention; options --heads). Default:
    /// sage."`.
    pub fn model_help(default: EncoderKind) -> String {
        let items: Vec<String> = EncoderKind::ALL
            .iter()
            .map(|k| {
                let mut extra = Vec::new();
                if !k.aliases().is_empty() {
                    extra.push(format!("also {}", k.aliases().join(", ")));
                }
                if !k.options().is_empty() {
                    let flags: Vec<String> = k
                        .options()
                        .iter()
                        .map(|o| format!("--{}", o.name.replace('_', "-")))
                        .collect();
                    extra.push(format!("options {}", flags.join(", ")));
                }
                let extra: String = extra.iter().map(|e| format!("; {e}")).collect();
                format!("{} ({}{extra})", k.name(), k.about())
            })
            .collect();
        let list = match items.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        format!("Encoder: {list}. Default: {default}.")
    }

    /// Every encoder option of the registry once, by name, with the encoders that declare it
    /// (an option name two encoders share is one flag and one key).
    pub fn all_options() -> Vec<(EncoderOption, Vec<EncoderKind>)> {
        let mut out: Vec<(EncoderOption, Vec<EncoderKind>)> = Vec::new();
        for &k in EncoderKind::ALL {
            for o in k.options() {
                match out.iter_mut().find(|(p, _)| p.name == o.name) {
                    Some((_, ks)) => ks.push(k),
                    None => out.push((*o, vec![k])),
                }
            }
        }
        out
    }
}

impl fmt::Display for EncoderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EncoderKind {
    type Err = String;

    /// Parse a name or alias, case-insensitive.
    ///
    /// # Errors
    /// An unknown name; the message lists the registered ones.
    fn from_str(s: &str) -> Result<Self, String> {
        let l = s.to_ascii_lowercase();
        EncoderKind::ALL
            .iter()
            .copied()
            .find(|k| k.name() == l || k.aliases().contains(&l.as_str()))
            .ok_or_else(|| {
                format!(
                    "unknown encoder {s:?} (expected {})",
                    EncoderKind::names_list()
                )
            })
    }
}
