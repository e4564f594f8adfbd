//! A toy method with a layout of its own, registered for the crate's tests only: it shows
//! what adding a method takes (this file, its `mod` line and one registry line in
//! `methods/mod.rs`, both marked `#[cfg(test)]`; docs/decisions/0022-method-registry.md).
//!
//! `toy-blocks`: trainer `t` of `M` holds the nodes `t*N/M .. (t+1)*N/M` (contiguous blocks of
//! node ids, the layout `blocks`), models averaged every round as RandomTMA does.

use crate::config::TrainConfig;
use crate::data::{DataLayout, NodeSets};
use crate::engines::method::{Exchange, ExchangeInputs, MethodInfo, TrainingMethod};
use crate::methods::averaging::ModelAveraging;
use tma_graph::Csr;

/// The `blocks` layout: contiguous blocks of node ids.
pub struct Blocks;

impl NodeSets for Blocks {
    fn name(&self) -> &'static str {
        "blocks"
    }

    fn node_sets(&self, graph: &Csr, cfg: &TrainConfig) -> Vec<Vec<u32>> {
        let (n, m) = (graph.num_nodes(), cfg.num_trainers);
        (0..m)
            .map(|t| (t * n / m) as u32..((t + 1) * n / m) as u32)
            .map(|r| r.collect())
            .collect()
    }
}

/// The toy method.
pub struct Toy;

/// The toy method in the registry.
pub const TOY: Toy = Toy;

const INFO: MethodInfo = MethodInfo::averaging(
    "toy-blocks",
    "contiguous blocks of node ids + model averaging",
);

impl TrainingMethod for Toy {
    fn info(&self) -> &MethodInfo {
        &INFO
    }

    fn layout(&self, _cfg: &TrainConfig) -> DataLayout {
        DataLayout::Custom(&Blocks)
    }

    fn exchange<'a>(&self, inputs: ExchangeInputs<'a>) -> Box<dyn Exchange + 'a> {
        Box::new(ModelAveraging::new(inputs.weights, None))
    }
}
