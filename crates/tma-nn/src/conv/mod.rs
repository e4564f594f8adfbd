//! Graph convolution layers, one file each, and the one registry ([`EncoderKind`]) that names
//! them and builds them for [`crate::Model`].
//!
//! A layer is a type implementing the crate-internal `Conv` trait: it declares its parameters
//! (PyG names under the model's per-layer prefix `encoder.{l}.`) when built, and computes its
//! forward and hand-written backward over a sampled block (`tma_sample::BlockView`: destination
//! nodes are the first `num_dst` source nodes). The model owns everything between layers (bias
//! of hidden layers fused with LayerNorm → PReLU → dropout) and the buffer pool.
//!
//! Adding an encoder: a new file in this folder with a type that implements `Conv` and has a
//! `build(&ConvArgs, &mut ParamAlloc) -> Result<Self, String>` constructor, its `mod` line and
//! one line in the `encoders!` list below (variant, module and type, the `--model` name).
//! Nothing else lists encoders: [`EncoderKind`]'s names, parsing and [`crate::Model::new`] read
//! the list, and the model tests run every registered encoder (`EncoderKind::ALL`).

use crate::kernels::{aggregate, aggregate_backward, AggCoefs, Transposed};
use crate::kernels::{BufferPool, InputRef};
use crate::mat::{matmul_a_b, matmul_a_bt, matmul_at_b};
use crate::Mat;
use std::any::Any;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use tma_sample::BlockView;

/// The registry: `Variant => module::Type, "name" [| "alias" ...];`. Re-exports each type and
/// generates [`EncoderKind`] with its names, parsing and builder.
macro_rules! encoders {
    ($( $variant:ident => $module:ident :: $ty:ident, $name:literal $(| $alias:literal)* ; )*) => {
        $( pub use $module::$ty; )*

        /// Which graph convolution the encoder stacks; `--model NAME` (case-insensitive).
        /// Every variant is one layer type of this module ([`EncoderKind::ALL`] lists them).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum EncoderKind {
            $(
                #[doc = concat!("[`", stringify!($ty), "`], `--model ", $name, "`.")]
                $variant,
            )*
        }

        impl EncoderKind {
            /// Every registered encoder, in registry order.
            pub const ALL: &'static [EncoderKind] = &[$(EncoderKind::$variant),*];

            /// The canonical name (`--model` value, `Display`).
            pub fn name(self) -> &'static str {
                match self { $(EncoderKind::$variant => $name,)* }
            }

            /// Accepted spellings besides [`EncoderKind::name`] (lower case).
            pub fn aliases(self) -> &'static [&'static str] {
                match self { $(EncoderKind::$variant => &[$($alias),*],)* }
            }

            /// Build layer `args.layer`, declaring its parameters in `alloc`.
            pub(crate) fn build(
                self,
                args: &ConvArgs,
                alloc: &mut ParamAlloc,
            ) -> Result<Arc<dyn Conv>, String> {
                match self { $(EncoderKind::$variant => Ok(Arc::new($ty::build(args, alloc)?)),)* }
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
/// The [`Conv`] impl of a layer that is a [`LinearAgg`] (`self.core`, bias offset
/// `self.bias`) with its own aggregation coefficients (`$coefs(block)`): SAGE (mean) and GCN
/// (symmetric normalization) differ only there and in their parameters.
macro_rules! linear_agg_conv {
    ($ty:ty, $coefs:path) => {
        impl $crate::conv::Conv for $ty {
            fn in_dim(&self) -> usize {
                self.core.in_dim
            }
            fn out_dim(&self) -> usize {
                self.core.out_dim
            }
            fn bias(&self) -> usize {
                self.bias
            }
            fn reads_all_rows_dense(&self, _b: &::tma_sample::BlockView) -> bool {
                self.core.out_dim < self.core.in_dim
            }
            fn forward(
                &self,
                pool: &$crate::kernels::BufferPool,
                p: &[f32],
                b: &::tma_sample::BlockView,
                x: $crate::kernels::InputRef,
                keep: bool,
            ) -> ($crate::Mat, Option<$crate::conv::ConvCache>) {
                self.core.forward(pool, p, b, x, keep, $coefs(b))
            }
            fn backward(
                &self,
                pool: &$crate::kernels::BufferPool,
                p: &[f32],
                b: &::tma_sample::BlockView,
                x: $crate::kernels::InputRef,
                cache: Option<$crate::conv::ConvCache>,
                d: &$crate::Mat,
                g: &mut [f32],
                need_dx: bool,
            ) -> Option<$crate::Mat> {
                self.core.backward(pool, p, b, x, cache, d, g, need_dx)
            }
        }
    };
}

mod gat;
mod gcn;
mod mlp;
mod sage;

encoders! {
    Sage => sage::SageConv, "sage" | "graphsage";
    Gcn => gcn::GcnConv, "gcn";
    Mlp => mlp::MlpConv, "mlp";
    Gat => gat::GatConv, "gat";
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

/// Options of layer types that have more than dimensions, for
/// [`crate::Model::try_new_with`]. `Default` is what [`crate::Model::new`] uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerOptions {
    /// Attention heads of [`GatConv`]'s hidden layers (concatenated; the last layer has one
    /// head). Hidden width must be divisible by it. Default [`GatConv::DEFAULT_HEADS`] (8, as
    /// Velickovic et al. 2018 on Cora).
    pub heads: usize,
}

impl Default for LayerOptions {
    fn default() -> Self {
        LayerOptions {
            heads: GatConv::DEFAULT_HEADS,
        }
    }
}

/// What a layer is built from.
#[derive(Clone, Debug)]
pub(crate) struct ConvArgs {
    /// Layer index (0 = input layer); parameter names start with `encoder.{layer}.`.
    pub layer: usize,
    pub in_dim: usize,
    pub out_dim: usize,
    /// The encoder's last layer (its output is the model output: logits or embeddings).
    pub last: bool,
    pub opts: LayerOptions,
}

impl ConvArgs {
    /// `encoder.{layer}.{name}`.
    pub(crate) fn name(&self, name: &str) -> String {
        format!("encoder.{}.{name}", self.layer)
    }
}

/// How a parameter tensor is initialised by [`crate::Model::init_params`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Init {
    /// Glorot/Xavier uniform `U(±sqrt(6 / (fan_in + fan_out)))` over the last two dimensions
    /// (PyG's `glorot`: `[out, in]` weights, `[1, heads, channels]` attention vectors).
    Glorot,
    /// Glorot/Xavier uniform scaled by `gain`: `U(±gain·sqrt(6 / (fan_in + fan_out)))`
    /// (PyTorch's `xavier_uniform_(w, gain)`; DGL's `SAGEConv` uses gain `sqrt(2)`).
    XavierGain(f32),
    /// `U(±1/sqrt(fan_in))` with the given `fan_in`: PyTorch's `nn.Linear` default for its
    /// weight (`kaiming_uniform_(a=sqrt(5))`) and its bias alike.
    FanIn(usize),
    /// Every element `v`.
    Const(f32),
}

/// Collects parameter tensors (name, shape, init) in declaration order; offsets are into the
/// model's flat [`crate::ParamSet`].
#[derive(Default, Debug)]
pub(crate) struct ParamAlloc {
    pub shapes: Vec<(String, Vec<usize>)>,
    pub inits: Vec<Init>,
    offset: usize,
}

impl ParamAlloc {
    /// Declare a tensor; returns its offset.
    pub(crate) fn add(&mut self, name: String, shape: Vec<usize>, init: Init) -> usize {
        let o = self.offset;
        self.offset += shape.iter().product::<usize>();
        self.shapes.push((name, shape));
        self.inits.push(init);
        o
    }
}

/// What a layer's forward keeps for its backward (the layer's own type, downcast there).
pub(crate) type ConvCache = Box<dyn Any + Send + Sync>;

/// A graph convolution over a block: `[num_src, in_dim]` → `[num_dst, out_dim]`, **without**
/// its bias (the model adds it: fused with the post-processing on hidden layers).
pub(crate) trait Conv: Send + Sync + fmt::Debug {
    /// Input width.
    fn in_dim(&self) -> usize;
    /// Output width.
    fn out_dim(&self) -> usize;
    /// Offset of the layer's bias `[out_dim]`.
    fn bias(&self) -> usize;
    /// Whether a dense input is multiplied on every source row of `b` (so an
    /// [`crate::Input::Indexed`] input is gathered whole, not only its destination rows).
    fn reads_all_rows_dense(&self, b: &BlockView) -> bool;
    /// `out = conv(x)` without bias; with `keep`, the cache for [`Conv::backward`].
    ///
    /// The caller has checked `x.rows() == b.num_src`, `x.dim() == in_dim`, `num_dst <= num_src`.
    fn forward(
        &self,
        pool: &BufferPool,
        p: &[f32],
        b: &BlockView,
        x: InputRef,
        keep: bool,
    ) -> (Mat, Option<ConvCache>);
    /// Given `d = dL/d out` `[num_dst, out_dim]`, **accumulate** the weight gradients into `g`
    /// (not the bias: the model does it) and return `dL/dx` `[num_src, in_dim]` when `need_dx`.
    #[allow(clippy::too_many_arguments)]
    fn backward(
        &self,
        pool: &BufferPool,
        p: &[f32],
        b: &BlockView,
        x: InputRef,
        cache: Option<ConvCache>,
        d: &Mat,
        g: &mut [f32],
        need_dx: bool,
    ) -> Option<Mat>;
}

/// The forward cache of [`LinearAgg`].
pub(crate) struct LinearAggCache {
    coefs: AggCoefs,
    transform_first: bool,
    /// Aggregate-first path: the aggregated input `[num_dst, in]`.
    agg: Option<Mat>,
}

/// The shared core of [`SageConv`] and [`GcnConv`]: `out = agg(X) Wᵀ (+ X_dst W_rᵀ)` for a
/// linear aggregation `agg` given by [`AggCoefs`]. Transforms before aggregating when
/// `out < in` and always for sparse input (`agg(X) Wᵀ = agg(X Wᵀ)`; `X` is never densified).
#[derive(Clone, Debug)]
pub(crate) struct LinearAgg {
    pub in_dim: usize,
    pub out_dim: usize,
    /// Offset of `W` `[out, in]`.
    pub w: usize,
    /// Offset of the root weight `W_r` `[out, in]` (SAGE).
    pub w_r: Option<usize>,
}

impl LinearAgg {
    pub(crate) fn forward(
        &self,
        pool: &BufferPool,
        p: &[f32],
        b: &BlockView,
        x: InputRef,
        keep: bool,
        coefs: AggCoefs,
    ) -> (Mat, Option<ConvCache>) {
        let (nd, ns, din, dout) = (b.num_dst, b.num_src, self.in_dim, self.out_dim);
        let w = &p[self.w..self.w + dout * din];
        // every path below overwrites `out` before reading it
        let mut out = Mat::from_vec(nd, dout, pool.take(nd * dout));
        let tf = x.is_sparse() || dout < din;
        let mut agg = None;
        if tf {
            let mut t = pool.take(ns * dout);
            x.linear(pool, ns, w, dout, &mut t, false);
            aggregate(b, &coefs, &t, None, dout, &mut out.data);
            pool.give(t);
        } else {
            let mut a = Mat::from_vec(nd, din, pool.take(nd * din));
            let (h, map) = x.agg_source(ns);
            aggregate(b, &coefs, h, map, din, &mut a.data);
            matmul_a_bt(nd, dout, din, &a.data, w, &mut out.data, false);
            if keep {
                agg = Some(a);
            } else {
                pool.give(a.data);
            }
        }
        if let Some(wr) = self.w_r {
            x.linear(pool, nd, &p[wr..wr + dout * din], dout, &mut out.data, true);
        }
        let cache = keep.then(|| {
            Box::new(LinearAggCache {
                coefs,
                transform_first: tf,
                agg,
            }) as ConvCache
        });
        (out, cache)
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn backward(
        &self,
        pool: &BufferPool,
        p: &[f32],
        b: &BlockView,
        x: InputRef,
        cache: Option<ConvCache>,
        d: &Mat,
        g: &mut [f32],
        need_dx: bool,
    ) -> Option<Mat> {
        let (nd, ns, din, dout) = (b.num_dst, b.num_src, self.in_dim, self.out_dim);
        let c = cache
            .expect("backward needs a forward with keep")
            .downcast::<LinearAggCache>()
            .expect("forward cache of another layer type");
        let LinearAggCache {
            coefs,
            transform_first,
            agg,
        } = *c;
        let w = &p[self.w..self.w + dout * din];
        // every path below overwrites all of dx first
        let mut dx = need_dx.then(|| Mat::from_vec(ns, din, pool.take(ns * din)));
        if transform_first {
            let t = Transposed::new(b);
            let mut dt = pool.take(ns * dout);
            aggregate_backward(b, &t, &coefs, &d.data, dout, &mut dt, false);
            drop(t);
            x.linear_weight_grad(pool, ns, &dt, dout, &mut g[self.w..self.w + dout * din]);
            if let Some(dx) = dx.as_mut() {
                matmul_a_b(ns, din, dout, &dt, w, &mut dx.data, false);
            }
            pool.give(dt);
        } else {
            let a = agg.expect("forward cache without aggregate");
            matmul_at_b(
                dout,
                din,
                nd,
                &d.data,
                &a.data,
                &mut g[self.w..self.w + dout * din],
                true,
            );
            pool.give(a.data);
            if let Some(dx) = dx.as_mut() {
                let mut da = pool.take(nd * din);
                matmul_a_b(nd, din, dout, &d.data, w, &mut da, false);
                let t = Transposed::new(b);
                aggregate_backward(b, &t, &coefs, &da, din, &mut dx.data, false);
                pool.give(da);
            }
        }
        // Root term last: the paths above overwrite dx (first touch of fresh pages is a write,
        // never a read-then-write).
        if let Some(wr) = self.w_r {
            x.linear_weight_grad(pool, nd, &d.data, dout, &mut g[wr..wr + dout * din]);
            if let Some(dx) = dx.as_mut() {
                let w_r = &p[wr..wr + dout * din];
                matmul_a_b(nd, din, dout, &d.data, w_r, &mut dx.data[..nd * din], true);
            }
        }
        dx
    }
}
