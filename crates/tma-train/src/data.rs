//! From a dataset to what the coordinator and each trainer hold.
//!
//! The coordinator keeps the whole (training) graph for evaluation; each trainer gets only its
//! own part: the node-induced subgraph of its nodes, their features and targets, with local ids
//! (`Part::global_ids` maps local -> global).

use crate::config::{Method, Task, TrainConfig};
use crate::TrainError;
use tma_graph::{Csr, Dataset, Features, LinkSplit, NodeSplit};
use tma_partition::{PartitionConfig, PartitionMethod, PartitionReport};

/// Labels of the node task, restricted to some set of nodes.
#[derive(Clone, Debug)]
pub enum NodeTargets {
    /// Class per node (`-1` = unlabelled), `num_classes` classes.
    Classes { y: Vec<i32>, num_classes: usize },
    /// `[n, num_labels]` 0/1 row-major.
    MultiLabel { y: Vec<u8>, num_labels: usize },
}

impl NodeTargets {
    pub fn out_dim(&self) -> usize {
        match self {
            NodeTargets::Classes { num_classes, .. } => *num_classes,
            NodeTargets::MultiLabel { num_labels, .. } => *num_labels,
        }
    }

    /// Rows `rows` of these targets.
    pub fn gather(&self, rows: &[u32]) -> NodeTargets {
        match self {
            NodeTargets::Classes { y, num_classes } => NodeTargets::Classes {
                y: rows.iter().map(|&r| y[r as usize]).collect(),
                num_classes: *num_classes,
            },
            NodeTargets::MultiLabel { y, num_labels } => {
                let l = *num_labels;
                let mut out = Vec::with_capacity(rows.len() * l);
                for &r in rows {
                    out.extend_from_slice(&y[r as usize * l..(r as usize + 1) * l]);
                }
                NodeTargets::MultiLabel {
                    y: out,
                    num_labels: l,
                }
            }
        }
    }
}

/// What one trainer trains on: its own part only.
#[derive(Clone, Debug)]
pub enum TrainTarget {
    /// Positive training edges `(u, v)` in local ids (each undirected edge once).
    Link { edges: Vec<(u32, u32)> },
    /// Local training nodes and the local targets of every local node.
    Node {
        nodes: Vec<u32>,
        targets: NodeTargets,
    },
}

/// One trainer's data.
#[derive(Clone, Debug)]
pub struct TrainerData {
    /// Index among the trainers, 0..M.
    pub trainer: usize,
    /// Part id in the partition (0..M+d).
    pub part: usize,
    pub graph: Csr,
    pub degrees: Vec<u32>,
    pub features: Features,
    pub target: TrainTarget,
    /// Local -> global node ids.
    pub global_ids: Vec<u32>,
}

impl TrainerData {
    pub fn num_nodes(&self) -> usize {
        self.graph.num_nodes()
    }
    pub fn num_edges(&self) -> usize {
        self.graph.num_edges()
    }
}

/// What the coordinator evaluates on.
pub enum EvalData {
    Link {
        split: LinkSplit,
    },
    Node {
        split: NodeSplit,
        targets: NodeTargets,
    },
}

/// Everything prepared before the clock starts.
pub struct Prepared {
    /// The graph evaluation runs on (for link prediction: the training graph, held-out edges
    /// removed in both directions; for node classification: the whole graph).
    pub graph: Csr,
    pub degrees: Vec<u32>,
    pub features: Features,
    pub eval: EvalData,
    pub trainers: Vec<TrainerData>,
    /// Partition statistics (None for centralized).
    pub report: Option<PartitionReport>,
    /// sha256 of the partition assignment (None for centralized).
    pub partition_hash: Option<String>,
    /// Input and output widths of the model.
    pub in_dim: usize,
    pub out_dim: usize,
}

fn partition_method(cfg: &TrainConfig) -> Option<PartitionMethod> {
    match cfg.method {
        Method::RandomTma => Some(PartitionMethod::Random),
        Method::SuperTma => Some(PartitionMethod::SuperNode {
            num_super_nodes: cfg.super_nodes,
        }),
        Method::PsgdPa | Method::Llcg => Some(PartitionMethod::Metis),
        Method::Centralized | Method::Ggs => None,
    }
}

/// Positive training edges of a graph: each undirected edge once (u < v), or every arc.
pub fn positive_edges(graph: &Csr, directed: bool) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(if directed {
        graph.num_edges()
    } else {
        graph.num_edges() / 2
    });
    for v in 0..graph.num_nodes() {
        for &u in graph.neighbors(v) {
            if directed || u < v as u32 {
                out.push((u, v as u32));
            }
        }
    }
    out
}

/// Splits, partitions and builds every trainer's data.
///
/// # Errors
/// [`TrainError::Data`] if the task does not fit the dataset (node task without labels),
/// [`TrainError::Partition`] if partitioning fails.
pub fn prepare(mut ds: Dataset, cfg: &TrainConfig) -> Result<Prepared, TrainError> {
    if cfg.normalize_features && !ds.structural_features {
        ds.features.row_normalize();
    }
    let directed = ds.directed;
    let (graph, eval, node_targets) = match cfg.task {
        Task::Link => {
            let split = tma_graph::link_split(
                &ds.graph,
                directed,
                cfg.val_frac,
                cfg.test_frac,
                Some(cfg.eval_max_edges),
                cfg.eval_num_neg,
                cfg.seed,
            );
            if split.val_pos.is_empty() {
                return Err(TrainError::Data(format!(
                    "dataset '{}' leaves no validation edges with val-frac {}",
                    ds.name, cfg.val_frac
                )));
            }
            let g = split.train_graph.clone();
            (g, EvalData::Link { split }, None)
        }
        Task::Node => {
            let targets = match &ds.labels {
                tma_graph::Labels::Classes { num_classes: 0, .. } => {
                    return Err(TrainError::Data(format!(
                        "dataset '{}' has y.npy but every node is unlabelled (-1); use --task link",
                        ds.name
                    )))
                }
                tma_graph::Labels::Classes { y, num_classes } => NodeTargets::Classes {
                    y: y.clone(),
                    num_classes: *num_classes,
                },
                tma_graph::Labels::MultiLabel { num_labels, y } => NodeTargets::MultiLabel {
                    y: y.clone(),
                    num_labels: *num_labels,
                },
                tma_graph::Labels::None => {
                    return Err(TrainError::Data(format!(
                        "dataset '{}' has no node labels (no y.npy); use --task link",
                        ds.name
                    )))
                }
            };
            let split = match &ds.split {
                Some(s) => s.clone(),
                None => {
                    tma_graph::random_node_split(&ds.labels, ds.num_nodes(), 0.6, 0.2, cfg.seed)
                }
            };
            if split.train.is_empty() || split.val.is_empty() {
                return Err(TrainError::Data(format!(
                    "dataset '{}' has an empty train or validation split",
                    ds.name
                )));
            }
            (
                ds.graph.clone(),
                EvalData::Node {
                    split,
                    targets: targets.clone(),
                },
                Some(targets),
            )
        }
    };
    let degrees = graph.degrees();
    let in_dim = ds.features.dim();
    let out_dim = match &node_targets {
        Some(t) => t.out_dim(),
        None => cfg.hidden,
    };

    let mut is_train_node = vec![false; graph.num_nodes()];
    if let EvalData::Node { split, targets } = &eval {
        for &v in &split.train {
            // an unlabelled node (-1) in a fixed training split is not a training example
            let labelled = match targets {
                NodeTargets::Classes { y, .. } => y[v as usize] >= 0,
                NodeTargets::MultiLabel { .. } => true,
            };
            is_train_node[v as usize] = labelled;
        }
    }
    let build = |trainer: usize, part: usize, global_ids: Vec<u32>, sub: Csr| -> TrainerData {
        let features = ds.features.gather(&global_ids);
        let target = match &node_targets {
            None => TrainTarget::Link {
                edges: positive_edges(&sub, directed),
            },
            Some(t) => TrainTarget::Node {
                nodes: (0..global_ids.len() as u32)
                    .filter(|&l| is_train_node[global_ids[l as usize] as usize])
                    .collect(),
                targets: t.gather(&global_ids),
            },
        };
        TrainerData {
            trainer,
            part,
            degrees: sub.degrees(),
            graph: sub,
            features,
            target,
            global_ids,
        }
    };

    let (trainers, report, partition_hash) = match partition_method(cfg) {
        None => {
            let all: Vec<u32> = (0..graph.num_nodes() as u32).collect();
            let full = build(0, 0, all, graph.clone());
            let trainers = if cfg.method == Method::Ggs {
                // GGS: whole graph everywhere, disjoint shares of the training examples
                crate::ggs::share_examples(
                    &full,
                    cfg.num_trainers + cfg.drop_parts,
                    cfg.num_trainers,
                    cfg.seed,
                )
            } else {
                vec![full]
            };
            (trainers, None, None)
        }
        Some(method) => {
            let pcfg = PartitionConfig {
                method,
                num_parts: cfg.num_trainers,
                drop_parts: cfg.drop_parts,
                seed: cfg.seed,
            };
            let partition = tma_partition::partition(&graph, &pcfg)
                .map_err(|e| TrainError::Partition(e.to_string()))?;
            let labels = match &node_targets {
                Some(NodeTargets::Classes { y, num_classes }) => Some((y.as_slice(), *num_classes)),
                _ => None,
            };
            let report = tma_partition::partition_report(&graph, &partition, labels);
            let kept = partition.kept_parts();
            use rayon::prelude::*;
            let trainers: Vec<TrainerData> = kept
                .par_iter()
                .enumerate()
                .map(|(t, &p)| {
                    let part = tma_partition::build_part(&graph, &partition, p);
                    build(t, p, part.global_ids, part.graph)
                })
                .collect();
            (trainers, Some(report), Some(partition.hash_hex()))
        }
    };
    for t in &trainers {
        let empty = match &t.target {
            TrainTarget::Link { edges } => edges.is_empty(),
            TrainTarget::Node { nodes, .. } => nodes.is_empty(),
        };
        if empty {
            return Err(TrainError::Data(format!(
                "trainer {} got no training {} (graph too small for {} trainers?)",
                t.trainer,
                if cfg.task == Task::Link {
                    "edges"
                } else {
                    "nodes"
                },
                cfg.num_trainers
            )));
        }
    }
    Ok(Prepared {
        graph,
        degrees,
        features: ds.features,
        eval,
        trainers,
        report,
        partition_hash,
        in_dim,
        out_dim,
    })
}
