//! Every training method by name: the one place where a [`Method`] meets its implementation
//! ([`TrainingMethod`]). Adding a method is a variant of [`Method`] and an arm here.

use crate::averaging::Averaging;
use crate::clock::Clock;
use crate::config::{Method, TrainConfig};
use crate::data::{prepare_with, Prepared};
use crate::ggs::Ggs;
use crate::llcg::LlcgMethod;
use crate::method::{DataLayout, TrainingMethod};
use crate::record::{Extras, FailPlan, Observer, RunResult};
use crate::TrainError;
use std::sync::Arc;
use tma_graph::Dataset;
use tma_partition::PartitionMethod;

/// The implementation of `method`.
pub fn training_method(method: Method) -> &'static dyn TrainingMethod {
    match method {
        Method::RandomTma => &Averaging {
            layout: |_| DataLayout::Partitioned(PartitionMethod::Random),
        },
        Method::SuperTma => &Averaging {
            layout: |cfg| {
                DataLayout::Partitioned(PartitionMethod::SuperNode {
                    num_super_nodes: cfg.super_nodes,
                })
            },
        },
        Method::PsgdPa => &Averaging {
            layout: |_| DataLayout::Partitioned(PartitionMethod::Metis),
        },
        Method::Centralized => &Averaging {
            layout: |_| DataLayout::Whole,
        },
        Method::Llcg => &LlcgMethod,
        Method::Ggs => &Ggs,
    }
}

/// Splits, lays out (partitions) and builds every trainer's data for `cfg.method`
/// ([`prepare_with`] with that method's layout).
///
/// # Errors
/// As [`prepare_with`].
pub fn prepare(ds: Dataset, cfg: &TrainConfig) -> Result<Prepared, TrainError> {
    prepare_with(ds, cfg, training_method(cfg.method).layout(cfg))
}

/// [`prepare`] with the parts written to, and mapped from, `spill`
/// ([`crate::data::prepare_spilled`]).
///
/// # Errors
/// As [`crate::data::prepare_spilled`].
pub fn prepare_spilled(
    ds: Dataset,
    cfg: &TrainConfig,
    spill: Option<&crate::spill::Spill>,
) -> Result<Prepared, TrainError> {
    crate::data::prepare_spilled(ds, cfg, training_method(cfg.method).layout(cfg), spill)
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
    spill: Option<&crate::spill::Spill>,
) -> Result<Prepared, TrainError> {
    let layout = training_method(cfg.method).layout(cfg);
    crate::data::prepare_for(ds, cfg, layout, spill, crate::data::Purpose::Layout)
}

/// Runs a prepared job of `cfg.method` with in-process trainers
/// ([`crate::engine::run_in_process`]).
///
/// # Errors
/// As [`crate::engine::run_in_process`].
pub fn run_in_process(
    prep: &Prepared,
    cfg: &TrainConfig,
    fail: &FailPlan,
    clock: Arc<dyn Clock>,
    observer: &mut dyn Observer,
    extras: Extras,
) -> Result<RunResult, TrainError> {
    crate::engine::run_in_process(
        training_method(cfg.method),
        prep,
        cfg,
        fail,
        clock,
        observer,
        extras,
    )
}
