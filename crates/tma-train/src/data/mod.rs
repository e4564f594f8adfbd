//! From a dataset to what the coordinator and each trainer hold.
//!
//! The coordinator keeps the whole (training) graph for evaluation; each trainer gets only its
//! own part: the node-induced subgraph of its nodes, their features and targets, with local ids
//! (`Part::global_ids` maps local -> global).

pub mod spill;

use crate::config::{
    Featureless, Metric, TargetKind, Task, TrainConfig, FEATURELESS_DEGREE_TO_OVERLAP,
    FEATURELESS_RANDOM_MIN_EDGES, FEATURELESS_RANDOM_MIN_NODES,
};
use crate::TrainError;
use rand::seq::SliceRandom;
use tma_graph::{Csr, Dataset, Features, LinkSplit, NodeSplit};
use tma_nn::{Head, Model, ModelConfig};
use tma_partition::{PartitionConfig, PartitionMethod, PartitionReport};

/// How the training examples reach the trainers. A partition directory records a run's layout
/// by [`DataLayout::name`] (`crate::store`), and any method whose layout under the directory's
/// options is the same trains from it.
#[derive(Clone, Copy)]
pub enum DataLayout {
    /// One trainer on the whole (training) graph.
    Whole,
    /// Every trainer holds the whole graph and a disjoint share of the training examples
    /// (`M + d` shares, the last `d` given to no one: `--drop-parts`).
    SharedExamples,
    /// A node partition into `M + d` parts; trainer `t` holds the node-induced subgraph of
    /// kept part `t` (cross-part edges dropped).
    Partitioned(PartitionMethod),
    /// A layout a method brings itself: each trainer's node set ([`NodeSets`]); trainer `t`
    /// holds the node-induced subgraph of its set (built in memory).
    Custom(&'static dyn NodeSets),
}

/// A method's own layout ([`DataLayout::Custom`]): which nodes each trainer holds.
pub trait NodeSets: Sync {
    /// The layout's name, as partition directories record it and messages show it (unique
    /// among the registered methods' layouts; not one of `whole`, `shared-examples`,
    /// `random`, `super`, `metis`).
    fn name(&self) -> &'static str;
    /// The node set of every trainer (`cfg.num_trainers` sets, global ids, each sorted and
    /// without repeats) of `graph` (`[N]` nodes) under `cfg`.
    fn node_sets(&self, graph: &Csr, cfg: &TrainConfig) -> Vec<Vec<u32>>;
}

/// The names of the layouts this module knows (a method's own layouts add theirs).
pub const BUILT_IN_LAYOUTS: [&str; 5] = ["random", "super", "metis", "whole", "shared-examples"];

impl DataLayout {
    /// The layout's name: `whole`, `shared-examples`, the partitioner's (`random`, `super`,
    /// `metis`: [`PartitionMethod`]'s names) or a method's own ([`NodeSets::name`]).
    pub fn name(&self) -> String {
        match self {
            DataLayout::Whole => "whole".into(),
            DataLayout::SharedExamples => "shared-examples".into(),
            DataLayout::Partitioned(m) => m.to_string(),
            DataLayout::Custom(c) => c.name().into(),
        }
    }

    /// The layout's name with its parameter where it has one: `super` with `K` super-nodes
    /// reads `super (K = 1000)`.
    pub fn describe(&self) -> String {
        match self {
            DataLayout::Partitioned(PartitionMethod::SuperNode { num_super_nodes }) => {
                format!("super (K = {num_super_nodes})")
            }
            l => l.name(),
        }
    }

    /// Whether the layout clusters the graph (METIS or label propagation: `super`, `metis`),
    /// so `super_clustering` applies.
    pub fn clusters(&self) -> bool {
        matches!(
            self,
            DataLayout::Partitioned(PartitionMethod::SuperNode { .. } | PartitionMethod::Metis)
        )
    }

    /// Whether the layout is made of super-nodes (`super_nodes` applies).
    pub fn uses_super_nodes(&self) -> bool {
        matches!(
            self,
            DataLayout::Partitioned(PartitionMethod::SuperNode { .. })
        )
    }

    /// The partitioner's configuration of this layout under `cfg` (the one mapping from a run's
    /// options to `tma_partition`: `cfg.num_trainers` kept parts plus `cfg.drop_parts`,
    /// `cfg.super_clustering`, `cfg.seed`); `None` for a layout that does not partition with
    /// `tma_partition`. [`crate::methods::partition_config`] gives it for a run's method.
    pub fn partition_config(&self, cfg: &TrainConfig) -> Option<PartitionConfig> {
        match self {
            DataLayout::Partitioned(method) => Some(PartitionConfig {
                method: *method,
                clustering: cfg.super_clustering,
                num_parts: cfg.num_trainers,
                drop_parts: cfg.drop_parts,
                seed: cfg.seed,
            }),
            DataLayout::Whole | DataLayout::SharedExamples | DataLayout::Custom(_) => None,
        }
    }
}

impl PartialEq for DataLayout {
    /// The same layout: same kind and parameters (a method's own layouts by name).
    fn eq(&self, other: &DataLayout) -> bool {
        match (self, other) {
            (DataLayout::Whole, DataLayout::Whole)
            | (DataLayout::SharedExamples, DataLayout::SharedExamples) => true,
            (DataLayout::Partitioned(a), DataLayout::Partitioned(b)) => a == b,
            (DataLayout::Custom(a), DataLayout::Custom(b)) => a.name() == b.name(),
            _ => false,
        }
    }
}

impl std::fmt::Debug for DataLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DataLayout::Partitioned(m) => write!(f, "Partitioned({m:?})"),
            l => write!(f, "{}", l.name()),
        }
    }
}

/// Labels of the node task, restricted to some set of nodes.
#[derive(Clone, Debug)]
pub enum NodeTargets {
    /// Class per node (`-1` = unlabelled), `num_classes` classes.
    Classes {
        /// Class of every node, `-1` for unlabelled.
        y: Vec<i32>,
        /// Number of classes.
        num_classes: usize,
    },
    /// `[n, num_labels]` 0/1 row-major.
    MultiLabel {
        /// `[n, num_labels]` 0/1 row-major.
        y: Vec<u8>,
        /// Number of labels.
        num_labels: usize,
    },
}

impl NodeTargets {
    /// Width of the model output the targets need (classes or labels).
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

/// Running counts `c[0] = 0 <= c[1] <= ...` (`[n + 1]`): 4 bytes each while the last fits in
/// 32 bits (every part tma makes below 2^32 positives), else 8.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Offsets {
    /// Counts below 2^32.
    U32(Vec<u32>),
    /// Larger counts.
    U64(Vec<u64>),
}

impl Offsets {
    /// `c[v]`.
    #[inline]
    pub fn get(&self, v: usize) -> u64 {
        match self {
            Offsets::U32(c) => c[v] as u64,
            Offsets::U64(c) => c[v],
        }
    }

    /// The last count (0 when empty).
    pub fn last(&self) -> u64 {
        match self {
            Offsets::U32(c) => c.last().copied().unwrap_or(0) as u64,
            Offsets::U64(c) => c.last().copied().unwrap_or(0),
        }
    }

    /// The first `v` with `c[v] > i` (as `slice::partition_point(|&c| c <= i)`).
    #[inline]
    pub fn first_above(&self, i: u64) -> usize {
        match self {
            Offsets::U32(c) => c.partition_point(|&x| x as u64 <= i),
            Offsets::U64(c) => c.partition_point(|&x| x <= i),
        }
    }

    /// Number of counts.
    pub fn len(&self) -> usize {
        match self {
            Offsets::U32(c) => c.len(),
            Offsets::U64(c) => c.len(),
        }
    }

    /// Whether there are no counts.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The positive training edges of a link-prediction trainer, in local ids, by index
/// `0..len()`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkExamples {
    /// An explicit list (shared examples, LLCG's corrector, a partition directory's
    /// `train_edges.npy`): 8 bytes per positive.
    List(Vec<(u32, u32)>),
    /// The arcs of the trainer's own graph (`TrainerData::graph`), in CSR order: every arc if
    /// `directed`, else each undirected edge once as `(u, v)` with `u < v` (the leading part of
    /// each sorted row `v`), exactly the list [`positive_edges`] makes, without storing it:
    /// `before[v]` counts the positives of rows `< v` (`[n + 1]`, 4 bytes per node below 2^32
    /// positives, else 8; empty when directed: positive `i` is arc `i`). A part of a mapped
    /// graph keeps its positives mapped.
    Graph {
        /// Arcs of a directed graph, or undirected edges.
        directed: bool,
        /// Positives before each row (undirected only).
        before: Offsets,
    },
}

impl LinkExamples {
    /// [`LinkExamples::Graph`] over `graph`'s arcs.
    pub fn of_graph(graph: &Csr, directed: bool) -> LinkExamples {
        let before = if directed {
            Offsets::U32(Vec::new())
        } else {
            let row = |v: usize| graph.neighbors(v).partition_point(|&u| u < v as u32) as u64;
            // at most one positive per arc
            if (graph.num_edges() as u64) < u32::MAX as u64 {
                let mut b = Vec::with_capacity(graph.num_nodes() + 1);
                let mut c = 0u64;
                b.push(0u32);
                for v in 0..graph.num_nodes() {
                    c += row(v);
                    b.push(c as u32);
                }
                Offsets::U32(b)
            } else {
                let mut b = Vec::with_capacity(graph.num_nodes() + 1);
                let mut c = 0u64;
                b.push(0u64);
                for v in 0..graph.num_nodes() {
                    c += row(v);
                    b.push(c);
                }
                Offsets::U64(b)
            }
        };
        LinkExamples::Graph { directed, before }
    }

    /// Number of positives (`graph`: the trainer's graph).
    pub fn len(&self, graph: &Csr) -> usize {
        match self {
            LinkExamples::List(e) => e.len(),
            LinkExamples::Graph { directed: true, .. } => graph.num_edges(),
            LinkExamples::Graph { before, .. } => before.last() as usize,
        }
    }

    /// Positive `i` as `(u, v)` (`graph`: the trainer's graph).
    ///
    /// # Panics
    /// If `i >= self.len(graph)`.
    #[inline]
    pub fn get(&self, graph: &Csr, i: usize) -> (u32, u32) {
        match self {
            LinkExamples::List(e) => e[i],
            LinkExamples::Graph { directed: true, .. } => {
                let v = graph.indptr.partition_point(|&p| p as usize <= i) - 1;
                (graph.indices[i], v as u32)
            }
            LinkExamples::Graph { before, .. } => {
                let v = before.first_above(i as u64) - 1;
                let a = graph.indptr[v] as usize + (i - before.get(v) as usize);
                (graph.indices[a], v as u32)
            }
        }
    }

    /// Every positive, in index order.
    pub fn to_vec(&self, graph: &Csr) -> Vec<(u32, u32)> {
        match self {
            LinkExamples::List(e) => e.clone(),
            LinkExamples::Graph { directed, .. } => positive_edges(graph, *directed),
        }
    }
}

impl From<Vec<(u32, u32)>> for LinkExamples {
    fn from(e: Vec<(u32, u32)>) -> LinkExamples {
        LinkExamples::List(e)
    }
}

/// What one trainer trains on: its own part only.
#[derive(Clone, Debug)]
pub enum TrainTarget {
    /// Positive training edges `(u, v)` in local ids (each undirected edge once).
    Link {
        /// The positives.
        edges: LinkExamples,
    },
    /// Local training nodes and the local targets of every local node.
    Node {
        /// Local ids of its training nodes.
        nodes: Vec<u32>,
        /// Targets of every local node (indexed by local id).
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
    /// Its subgraph (local ids; rows = in-neighbours).
    pub graph: Csr,
    /// In-degree of every local node in that subgraph.
    pub degrees: Vec<u32>,
    /// Features of its local nodes, row `l` = global node `global_ids[l]`.
    pub features: Features,
    /// What it trains on.
    pub target: TrainTarget,
    /// Local -> global node ids.
    pub global_ids: Vec<u32>,
}

impl TrainerData {
    /// Nodes of its subgraph.
    pub fn num_nodes(&self) -> usize {
        self.graph.num_nodes()
    }
    /// Arcs of its subgraph.
    pub fn num_edges(&self) -> usize {
        self.graph.num_edges()
    }
    /// Its training examples (edges or nodes).
    pub fn num_examples(&self) -> usize {
        match &self.target {
            TrainTarget::Link { edges } => edges.len(&self.graph),
            TrainTarget::Node { nodes, .. } => nodes.len(),
        }
    }
}

/// What the coordinator evaluates on.
pub enum EvalData {
    /// Link prediction.
    Link {
        /// The edge split: training graph, held-out positives and fixed negatives.
        split: LinkSplit,
    },
    /// Node classification.
    Node {
        /// Train / validation / test nodes.
        split: NodeSplit,
        /// Targets of every node.
        targets: NodeTargets,
    },
}

impl EvalData {
    /// The kind of prediction it asks for (link, classes, multi-label).
    pub fn target_kind(&self) -> TargetKind {
        match self {
            EvalData::Link { .. } => TargetKind::Link,
            EvalData::Node {
                targets: NodeTargets::Classes { num_classes, .. },
                ..
            } => TargetKind::Classes(*num_classes),
            EvalData::Node {
                targets: NodeTargets::MultiLabel { .. },
                ..
            } => TargetKind::MultiLabel,
        }
    }

    /// Checks that `metric` can select the best model on this data and resolves `auto`: the
    /// metric must fit the task ([`Metric::fits`]), and ROC-AUC needs validation nodes of both
    /// classes (otherwise it is undefined every round). Where `auto` would mean an undefined
    /// ROC-AUC, accuracy is taken instead and the line saying so returned with it; a requested
    /// `roc_auc` is refused. The error names the option and what fits.
    pub fn check_metric(
        &self,
        metric: Metric,
        eval_num_neg: usize,
    ) -> Result<(Metric, Option<String>), TrainError> {
        let kind = self.target_kind();
        // a dataset's own protocol with shared negatives (OGB's ogbl-collab, ppa, ddi):
        // Hits@K only, `auto` its K
        if let EvalData::Link { split } = self {
            if let Some(p) = split.protocol.as_ref().filter(|p| p.shared.is_some()) {
                let k = p.hits_k.unwrap_or(50);
                return match metric {
                    Metric::Auto => Ok((Metric::HitsAt(k), None)),
                    Metric::HitsAt(_) => Ok((metric, None)),
                    other => Err(TrainError::Config(format!(
                        "metric {other}: {} ranks every positive against negatives shared by all of them (its edge_neg), where OGB reports Hits@K; use --metric hits@{k} (its own) or another hits@K",
                        p.dataset
                    ))),
                };
            }
        }
        // a link split stored with the graph brings its own negatives
        let eval_num_neg = match self {
            EvalData::Link { split } => split.num_neg,
            EvalData::Node { .. } => eval_num_neg,
        };
        metric
            .fits(kind, eval_num_neg)
            .map_err(TrainError::Config)?;
        let m = metric.resolve(kind);
        match (m == Metric::RocAuc).then(|| self.roc_auc_undefined()).flatten() {
            None => Ok((m, None)),
            Some(why) if metric == Metric::Auto => Ok((
                Metric::Accuracy,
                Some(format!(
                    "metric auto: {why}, so ROC-AUC (auto's metric for 2 classes) is undefined; accuracy selects the model instead"
                )),
            )),
            Some(why) => Err(TrainError::Config(format!(
                "metric roc_auc: {why}, so ROC-AUC is undefined; use --metric accuracy"
            ))),
        }
    }

    /// Why ROC-AUC is undefined on the validation nodes of 2 classes ("the validation nodes
    /// hold only class 1 (2 labelled)"); None where both classes are there (or not classes).
    fn roc_auc_undefined(&self) -> Option<String> {
        let EvalData::Node {
            split,
            targets: NodeTargets::Classes { y, .. },
        } = self
        else {
            return None;
        };
        let has = |c: i32| split.val.iter().any(|&v| y[v as usize] == c);
        (!has(0) || !has(1)).then(|| {
            format!(
                "the validation nodes hold only class {} ({} labelled)",
                if has(0) { 0 } else { 1 },
                split.val.iter().filter(|&&v| y[v as usize] >= 0).count()
            )
        })
    }
}

/// Everything prepared before the clock starts.
pub struct Prepared {
    /// The name of the layout of the training examples over the trainers
    /// ([`DataLayout::name`]; a partition directory's recorded layout when read from one).
    pub layout: String,
    /// The graph evaluation runs on (for link prediction: the training graph, held-out edges
    /// removed in both directions; for node classification: the whole graph).
    pub graph: Csr,
    /// In-degree of every node of `graph`.
    pub degrees: Vec<u32>,
    /// Features of every node.
    pub features: Features,
    /// Validation and test data.
    pub eval: EvalData,
    /// Each trainer's data, by trainer index.
    pub trainers: Vec<TrainerData>,
    /// Partition statistics (None for centralized).
    pub report: Option<PartitionReport>,
    /// sha256 of the partition assignment (None for centralized).
    pub partition_hash: Option<String>,
    /// Input and output widths of the model.
    pub in_dim: usize,
    /// Output width of the encoder (classes or labels; hidden for link).
    pub out_dim: usize,
    /// Whether the node features are generated structural ones (`tma_graph::structural_features`:
    /// the graph had none); `--exclude-targets`' automatic choice follows it
    /// ([`TrainConfig::excludes_targets`]). `None`: not known (a partition directory written
    /// before it was recorded), taken as false.
    pub structural_features: Option<bool>,
    /// The structural input a featureless graph's run takes ([`Featureless::Degree`] or
    /// [`Featureless::DegreeRandom`], `auto` resolved); recorded in the model files so that
    /// `tma eval` gives a saved model the input it was trained on. `None` for a graph with
    /// node features (and a partition directory written before it recorded whether its
    /// features are structural); a partition directory's coordinator takes it from the width
    /// of the features its parts hold (2 or fewer: the degree input).
    pub structural_input: Option<Featureless>,
    /// Training examples of each trainer's part as a partition directory's manifest lists
    /// them (the MPI coordinator holds no trainer data); empty when prepared from a dataset.
    pub part_train_examples: Vec<usize>,
    /// What preparation changed or dropped in the user's data, one line each (self-loops and
    /// duplicate arcs removed on load, unlabelled split nodes skipped, link-split adaptations,
    /// empty parts, a clamped `--super-nodes`, ...); printed as warnings and recorded in
    /// `partition.json` and `summary.json`.
    pub warnings: Vec<String>,
    /// Self-loops and duplicate arcs the loader removed from the dataset.
    pub removed: tma_graph::RemovedArcs,
    /// The validation metric that selects the best model (`TrainConfig::metric`, checked
    /// against the data by [`EvalData::check_metric`]); `evaluate` makes it the primary one.
    pub metric: Metric,
    /// Positions, ascending, of the validation nodes (node task) or validation positives (link
    /// task) that validation evaluates, set by [`Prepared::cap_validation`] when the split is
    /// larger than `--eval-max-nodes`; `None`: the whole validation split.
    pub val_subset: Option<Vec<u32>>,
}

/// The positions, ascending, of a seeded uniform subset of `max` of `0..len` (a partial
/// Fisher-Yates shuffle from `seed::rng(seed, Purpose::EvalSubset)`, then sorted); `None` when
/// `len <= max` (everything is kept).
pub fn validation_subset(len: usize, max: usize, seed: u64) -> Option<Vec<u32>> {
    use rand::Rng;
    if len <= max {
        return None;
    }
    let mut rng = tma_graph::seed::rng(seed, tma_graph::seed::Purpose::EvalSubset);
    let mut pos: Vec<u32> = (0..len as u32).collect();
    for i in 0..max {
        let j = rng.random_range(i..len);
        pos.swap(i, j);
    }
    pos.truncate(max);
    pos.shrink_to_fit();
    pos.sort_unstable();
    Some(pos)
}

impl Prepared {
    /// Bounds every round's validation to at most `max` validation nodes (node task) or
    /// `max.min(max_edges)` validation positives with their negatives (link task; a split tma
    /// makes holds at most `max_edges` of them, a split stored with the graph may hold more): a
    /// fixed subset drawn with [`validation_subset`] from `seed` when the split is larger.
    /// Returns the line to say (and record) when it applies, `None` when the whole validation
    /// split is kept. The test split is never touched.
    pub fn cap_validation(&mut self, max: usize, max_edges: usize, seed: u64) -> Option<String> {
        let (len, what, cap, flag) = match &self.eval {
            EvalData::Node { split, .. } => {
                (split.val.len(), "validation nodes", max, "--eval-max-nodes")
            }
            EvalData::Link { split } if max_edges < max => (
                split.val_pos.len(),
                "validation positives",
                max_edges,
                "--eval-max-edges",
            ),
            EvalData::Link { split } => (
                split.val_pos.len(),
                "validation positives",
                max,
                "--eval-max-nodes",
            ),
        };
        self.val_subset = validation_subset(len, cap, seed);
        self.val_subset.as_ref().map(|s| {
            format!(
                "validation uses a fixed seeded subset of {} of the {len} {what} every round ({flag} {cap}); the final test uses the whole test split",
                s.len()
            )
        })
    }

    /// `model`'s [`tma_nn::Model::file_metadata`] (one JSON object) with, on a featureless
    /// graph, the structural input this data holds as `featureless` (`degree` or
    /// `degree-random`): `auto` chooses it from the training examples per trainer, which
    /// evaluation on the whole graph does not have, so `tma eval` reads it back
    /// (`crate::saved::FileModel::apply`).
    pub fn model_file_metadata(&self, model: &tma_nn::Model) -> String {
        let meta = model.file_metadata();
        let Some(input) = self.structural_input else {
            return meta;
        };
        // one more key at the object's end (the other keys keep their order)
        match meta.strip_suffix('}') {
            Some(open) => format!("{open},\"featureless\":\"{}\"}}", input.name()),
            None => meta,
        }
    }

    /// Whether the features are generated structural ones (false when not known).
    pub fn structural(&self) -> bool {
        self.structural_features.unwrap_or(false)
    }

    /// Training examples per trainer: of its data, or, where this process holds none (the MPI
    /// coordinator), as the partition directory lists them.
    pub fn train_examples(&self) -> Vec<usize> {
        if self.trainers.is_empty() {
            self.part_train_examples.clone()
        } else {
            self.trainers.iter().map(|t| t.num_examples()).collect()
        }
    }

    /// Trainers (indices) without a training example: they join every round with weight 0.
    pub fn idle_trainers(&self) -> Vec<usize> {
        self.trainers
            .iter()
            .filter(|t| t.num_examples() == 0)
            .map(|t| t.trainer)
            .collect()
    }
}

/// Positive training edges of a graph: each undirected edge once (u < v), or every arc.
pub fn positive_edges(graph: &Csr, directed: bool) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(if directed {
        graph.num_edges()
    } else {
        graph.num_edges() / 2
    });
    out.extend(positive_edges_iter(graph, directed));
    out
}

/// [`positive_edges`] one at a time, in the same order, without the list (a partition
/// directory's `train_edges.npy` is streamed from it and compared with it).
pub fn positive_edges_iter(graph: &Csr, directed: bool) -> impl Iterator<Item = (u32, u32)> + '_ {
    (0..graph.num_nodes()).flat_map(move |v| {
        graph
            .neighbors(v)
            .iter()
            .filter(move |&&u| directed || u < v as u32)
            .map(move |&u| (u, v as u32))
    })
}

/// The [`LinkSplit`] of a split stored with the graph (`Dataset::link_split`): the dataset's
/// graph is the training graph (shared, not copied: a mapped graph stays mapped), the stored
/// positives, and the stored negatives (mapped) or, when the directory has none, negatives
/// drawn now with [`tma_graph::link_negatives`] (`cfg.eval_num_neg` per positive, `cfg.seed`).
/// `cfg.val_frac`, `cfg.test_frac` and `cfg.eval_max_edges` do not apply (validation still
/// reads a fixed subset of at most `eval_max_edges` positives per round,
/// [`Prepared::cap_validation`]; the test split is evaluated whole). Says what it uses in one
/// line of `warnings`.
///
/// # Errors
/// [`TrainError::Data`] when the stored split has no validation pair.
fn stored_split(
    graph: &Csr,
    directed: bool,
    name: &str,
    stored: tma_graph::StoredLinkSplit,
    cfg: &TrainConfig,
    warnings: &mut Vec<String>,
) -> Result<LinkSplit, TrainError> {
    if stored.val_pos.is_empty() {
        return Err(TrainError::Data(format!(
            "dataset '{name}': the link split stored in {} holds no validation pair; link prediction needs at least one",
            stored.source
        )));
    }
    let shared = stored.protocol.as_ref().and_then(|p| p.shared.as_ref());
    let (num_neg, val_neg, test_neg, how) = match (stored.negatives, shared) {
        (_, Some(sh)) => {
            let p = stored
                .protocol
                .as_ref()
                .expect("shared negatives come with a protocol");
            let how = format!(
                "{} / {} negative pairs shared by every positive, as {} gives them (its edge_neg), Hits@{}",
                sh.val.len(),
                sh.test.len(),
                p.dataset,
                p.hits_k.unwrap_or(50)
            );
            (0, Vec::new().into(), Vec::new().into(), how)
        }
        (Some(n), None) if stored.protocol.is_some() => {
            let p = stored.protocol.as_ref().expect("checked");
            let how = format!(
                "{} fixed negatives each, as {} gives them, MRR",
                n.num_neg, p.dataset
            );
            (n.num_neg, n.val, n.test, how)
        }
        (Some(n), None) => {
            let how = format!("{} stored fixed negatives each, seed {}", n.num_neg, n.seed);
            (n.num_neg, n.val, n.test, how)
        }
        (None, None) => {
            let (v, t, notes) = tma_graph::link_negatives(
                graph,
                directed,
                &stored.val_pos,
                &stored.test_pos,
                cfg.eval_num_neg,
                cfg.seed,
            );
            warnings.extend(
                notes
                    .warnings(cfg.val_frac, cfg.test_frac, cfg.eval_num_neg)
                    .into_iter()
                    .filter(|w| !w.contains("rounds to 0")),
            );
            let how = format!(
                "{} negatives each drawn now from seed {}: none stored",
                cfg.eval_num_neg, cfg.seed
            );
            (cfg.eval_num_neg, v.into(), t.into(), how)
        }
    };
    warnings.push(format!(
        "link split: stored with the graph in {} ({} validation / {} test held-out pairs, {how}); used as given, not split again (--val-frac and --test-frac do not apply){}",
        stored.source,
        stored.val_pos.len(),
        stored.test_pos.len(),
        if shared.is_some() {
            format!("; --eval-num-neg {} does not apply", cfg.eval_num_neg)
        } else if num_neg != cfg.eval_num_neg {
            format!("; its {num_neg} negatives per pair are used, not --eval-num-neg {}", cfg.eval_num_neg)
        } else {
            String::new()
        }
    ));
    let num_edges = if directed {
        graph.num_edges()
    } else {
        graph.num_edges() / 2
    };
    Ok(LinkSplit {
        train_graph: graph.clone(),
        train_edges: Vec::new(),
        val_pos: stored.val_pos,
        test_pos: stored.test_pos,
        val_neg,
        test_neg,
        num_neg,
        directed,
        notes: tma_graph::LinkSplitNotes {
            num_edges,
            ..Default::default()
        },
        protocol: stored.protocol,
    })
}

/// Splits the dataset for `cfg.task`, lays the training examples out over the trainers as
/// `layout` says (partitioning when it asks for parts) and builds every trainer's data.
/// [`crate::methods::prepare`] takes the layout from `cfg.method`.
///
/// # Errors
/// [`TrainError::Data`] if the task does not fit the dataset (node task without labels),
/// [`TrainError::Partition`] if partitioning fails.
pub fn prepare_with(
    ds: Dataset,
    cfg: &TrainConfig,
    layout: DataLayout,
) -> Result<Prepared, TrainError> {
    prepare_spilled(ds, cfg, layout, None)
}

/// [`prepare_with`]; with `spill = Some(s)`, the parts of a partitioned layout are built one
/// at a time and written under `s.root()` ([`crate::data::spill::Spill::spill_part`]: graph and dense
/// features streamed to `.npy` files and mapped back; the files unlinked, or kept for a
/// partition directory), so each trainer holds only mapped pages of its part and preparation
/// holds one part's subgraph at a time. The data is the same as without `spill`, bit for bit.
/// A run on a mapped graph (the on-disk format) spills under its run directory; `tma
/// partition --out` on one spills into the partition directory ([`crate::store::PartitionWriter`]).
///
/// # Errors
/// As [`prepare_with`]; [`TrainError::Dataset`] naming the file when a part cannot be written
/// or mapped; [`TrainError::Data`] when the spill's memory budget
/// ([`crate::data::spill::Spill::memory_budget`]) cannot hold the build of the parts.
pub fn prepare_spilled(
    ds: Dataset,
    cfg: &TrainConfig,
    layout: DataLayout,
    spill: Option<&crate::data::spill::Spill>,
) -> Result<Prepared, TrainError> {
    prepare_for(ds, cfg, layout, spill, Purpose::Training)
}

/// What a preparation is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A run: the data must allow training (labels, a metric defined on the validation data,
    /// a trainer with training examples), or preparation fails saying why.
    Training,
    /// The layout of a partition directory (`tma partition --out`): the split and the parts
    /// only. What would stop a run (no labels, no training example in any part) is said in one
    /// warning line and the parts are made anyway; `tma train --partitions` refuses them then
    /// ([`check_partitions`]). The metric is not checked ([`Prepared::metric`] is left `auto`).
    Layout,
    /// Evaluating or embedding with a saved model (`crate::saved`): the split and the metric
    /// as for [`Purpose::Training`], refused where training would be, but no trainer data is
    /// built (no partition, no part: [`Prepared::trainers`] is empty).
    Evaluation,
}

/// [`prepare_spilled`] for `purpose`.
///
/// # Errors
/// As [`prepare_spilled`]; under [`Purpose::Layout`] only what stops the split or the
/// partition itself.
pub fn prepare_for(
    mut ds: Dataset,
    cfg: &TrainConfig,
    layout: DataLayout,
    spill: Option<&crate::data::spill::Spill>,
    purpose: Purpose,
) -> Result<Prepared, TrainError> {
    if cfg.normalize_features && !ds.structural_features {
        ds.features.row_normalize();
    }
    let layout_name = layout.name();
    let directed = ds.directed;
    let mut warnings: Vec<String> = ds.removed.warning().into_iter().collect();
    let node_split = ds.split.as_ref().filter(|_| cfg.task == Task::Node);
    if let Some(w) = node_split.and_then(split_overlap_warning) {
        warnings.push(w);
    }
    // a node task whose data cannot be trained on, made for its layout (said in one line)
    let mut untrainable = false;
    let (graph, eval, node_targets) = match cfg.task {
        Task::Link => {
            let split = link_split_of(&mut ds, cfg, &mut warnings)?;
            let g = split.train_graph.clone();
            (g, EvalData::Link { split }, None)
        }
        Task::Node => {
            let (split, targets, refused) = node_data(&ds, cfg, purpose, &mut warnings)?;
            untrainable = refused;
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
    if cfg.task == Task::Link && ds.structural_features {
        degree_of_the_training_graph(&mut ds.features, &graph, directed);
    }
    // before the partition: a metric that does not fit the data is refused at once (a
    // partition directory's layout does not depend on it: `tma train --partitions` checks it)
    let metric = match purpose {
        Purpose::Training | Purpose::Evaluation => {
            let (m, note) = eval.check_metric(cfg.metric, cfg.eval_num_neg)?;
            warnings.extend(note);
            m
        }
        Purpose::Layout => Metric::default(),
    };
    // a partitioned layout is partitioned before the inputs are chosen: `auto` counts the
    // training examples each trainer's part holds
    let partitioned = match layout {
        DataLayout::Partitioned(method) if purpose != Purpose::Evaluation => Some(
            partition_with_report(&graph, cfg, method, spill, node_targets.as_ref())?,
        ),
        _ => None,
    };
    let mut structural_input = None;
    if ds.structural_features {
        let per_part = partitioned
            .as_ref()
            .map(|(p, r)| examples_per_kept_part(p, r, &eval, directed));
        let (input, line) = featureless_inputs(
            &mut ds.features,
            cfg,
            &layout,
            &eval,
            per_part.as_deref(),
            &graph,
        );
        // a saved model's evaluation takes the input its file records
        let line = match (purpose, line) {
            (Purpose::Evaluation, Some(_)) if cfg.featureless == Featureless::Degree => Some(
                "no node features: the input is the degree column and a constant one, as the \
                 model was trained (--featureless degree)"
                    .to_string(),
            ),
            (_, line) => line,
        };
        structural_input = Some(input);
        warnings.extend(line);
    } else if cfg.featureless != Featureless::Auto {
        warnings.push(format!(
            "--featureless {} is ignored: dataset '{}' has node features ({} columns)",
            cfg.featureless.name(),
            ds.name,
            ds.features.dim()
        ));
    }
    let degrees = graph.degrees();
    let in_dim = ds.features.dim();
    let out_dim = match &node_targets {
        Some(t) => t.out_dim(),
        None => cfg.hidden,
    };

    let builder = TrainerBuilder {
        features: &ds.features,
        directed,
        node_targets: node_targets.as_ref(),
        is_train_node: train_node_mask(&eval, graph.num_nodes()),
    };
    let LaidOut {
        trainers,
        report,
        partition_hash,
    } = match layout {
        // evaluation reads the graph, features and split only
        _ if purpose == Purpose::Evaluation => LaidOut::default(),
        layout => lay_out(&builder, &graph, cfg, layout, spill, partitioned)?,
    };
    if let Some(rep) = &report {
        warnings.extend(rep.warnings.iter().cloned());
    }
    check_trainers(&trainers, &eval, cfg, purpose, untrainable, &mut warnings)?;
    Ok(Prepared {
        layout: layout_name,
        graph,
        degrees,
        features: ds.features,
        eval,
        trainers,
        report,
        partition_hash,
        in_dim,
        out_dim,
        structural_features: Some(ds.structural_features),
        structural_input,
        part_train_examples: Vec::new(),
        warnings,
        removed: ds.removed,
        metric,
        val_subset: None,
    })
}

/// Column 0 of structural `features` (`tma_graph::degree_column`) computed again on the link
/// split's training graph `train`: the loader counted every edge, the held-out pairs too, which
/// would tell the model the degree a held-out edge adds (docs/decisions/0032). Dense features
/// only (structural features are dense); an owned buffer is rewritten in place.
fn degree_of_the_training_graph(features: &mut Features, train: &Csr, directed: bool) {
    if let Features::Dense {
        num_nodes,
        dim,
        data,
    } = features
    {
        let column = tma_graph::degree_column(train, directed);
        if column.len() != *num_nodes || *dim == 0 {
            return;
        }
        let d = *dim;
        for (row, &c) in data.make_mut().chunks_exact_mut(d).zip(&column) {
            row[0] = c;
        }
    }
}

/// [`Featureless`]: which of the structural columns (`tma_graph::structural_features`:
/// the degree column, then the random ones) a featureless graph's run keeps (the degree column
/// alone gets a constant column beside it: docs/decisions/0032), for `cfg` laid
/// out as `layout` with the training examples of `eval` (training nodes; training edges for
/// link prediction, `LinkSplit::train_edges`). `auto` keeps the random columns where each
/// trainer has at least [`FEATURELESS_RANDOM_MIN_EDGES`] training edges or
/// [`FEATURELESS_RANDOM_MIN_NODES`] training nodes: the mean over `per_part`, the examples
/// each trainer's part holds, for a partitioned layout (a random partition into `P` parts
/// keeps about 1/P of the edges, so each part holds about 1/P^2 of them: docs/decisions/0034);
/// else the examples over the trainers that share them (1 on the whole graph, else `M + d`).
/// For link prediction with enough examples, `auto` also ranks sampled edges of the training
/// graph `graph` by their degree product and by their common neighbours
/// (`tma_graph::link_heuristics`): where the degrees rank them at least
/// [`FEATURELESS_DEGREE_TO_OVERLAP`] as well, the random columns, which are there to let the
/// model see neighbourhood overlap, only add identities to learn by heart, and the degree input
/// is taken (docs/decisions/0035-degree-input-where-degree-ranks-links.md).
/// A model's input width (`TrainConfig::model_input_width`: a checkpoint or model file that
/// does not record the input) decides instead of both rules. Returns the input taken
/// (`Degree` or `DegreeRandom`) and the line that says it: when the random columns are dropped
/// (docs/decisions/0031-featureless-inputs-by-supervision.md), and when the heuristics were
/// measured, either way.
fn featureless_inputs(
    features: &mut Features,
    cfg: &TrainConfig,
    layout: &DataLayout,
    eval: &EvalData,
    per_part: Option<&[usize]>,
    graph: &Csr,
) -> (Featureless, Option<String>) {
    let (examples, what, min) = match eval {
        EvalData::Link { split } => (
            split.train_edges.len(),
            "training edges",
            FEATURELESS_RANDOM_MIN_EDGES,
        ),
        EvalData::Node { split, .. } => (
            split.train.len(),
            "training nodes",
            FEATURELESS_RANDOM_MIN_NODES,
        ),
    };
    let (per_trainer, counted) = match (per_part, layout) {
        (Some(parts), _) if !parts.is_empty() => {
            let held: usize = parts.iter().sum();
            (
                held / parts.len(),
                format!(
                    "the mean over {} parts, which hold {held} of the {examples}",
                    parts.len()
                ),
            )
        }
        (_, DataLayout::Whole) => (examples, format!("{examples} over 1")),
        _ => {
            let shares = (cfg.num_trainers + cfg.drop_parts).max(1);
            (examples / shares, format!("{examples} over {shares}"))
        }
    };
    // a checkpoint's or model file's width decides (written before the choice was recorded)
    if let (Featureless::Auto, Some(width)) = (cfg.featureless, cfg.model_input_width) {
        if width > 2 || features.dim() <= 1 {
            return (Featureless::DegreeRandom, None);
        }
        *features = features.first_columns_then_ones(1);
        return (
            Featureless::Degree,
            Some(
                "no node features: the input is the degree column and a constant one, as the \
                 model was trained (its input width is 2)"
                    .to_string(),
            ),
        );
    }
    let enough = per_trainer >= min;
    // where the degrees rank the graph's edges as well as overlap does (link task)
    // (undirected graphs: the heuristics hold an edge out of both ends' rows)
    let measured = match (cfg.featureless, eval, enough) {
        (Featureless::Auto, EvalData::Link { split }, true)
            if features.dim() > 1 && !split.directed =>
        {
            Some(tma_graph::link_heuristics(graph, 1000, 100, cfg.seed))
        }
        _ => None,
    };
    let degree_ranks = measured.filter(|h| h.degree_to_overlap() >= FEATURELESS_DEGREE_TO_OVERLAP);
    let keep_random = match cfg.featureless {
        Featureless::DegreeRandom => true,
        Featureless::Degree => false,
        Featureless::Auto => enough && degree_ranks.is_none(),
    };
    if keep_random {
        // the measurement is said either way
        let line = measured.map(|h| {
            format!(
                "no node features: the input is the degree column and 31 random identity \
                 columns, which show neighbourhood overlap: common neighbours rank this graph's \
                 edges better than the degree product does (MRR {:.3} against {:.3} over {} \
                 training edges, {} non-neighbours each; {:.2} < \
                 {FEATURELESS_DEGREE_TO_OVERLAP}; docs/decisions/0035-degree-input-where-degree-ranks-links.md)",
                h.common_neighbours,
                h.preferential_attachment,
                h.pairs,
                h.negatives,
                h.degree_to_overlap()
            )
        });
        return (Featureless::DegreeRandom, line);
    }
    if features.dim() <= 1 {
        return (Featureless::Degree, None);
    }
    *features = features.first_columns_then_ones(1);
    let line = match (cfg.featureless, degree_ranks) {
        (Featureless::Auto, Some(h)) => format!(
            "no node features: the degree product ranks this graph's edges at least \
             {FEATURELESS_DEGREE_TO_OVERLAP} as well as common neighbours do (MRR {:.3} against \
             {:.3} over {} training edges, {} non-neighbours each; {:.2}), so the input is the \
             degree column and a constant one, without the 31 random identity columns, which \
             are there to show neighbourhood overlap (--featureless degree-random keeps them; \
             docs/decisions/0035-degree-input-where-degree-ranks-links.md)",
            h.preferential_attachment,
            h.common_neighbours,
            h.pairs,
            h.negatives,
            h.degree_to_overlap()
        ),
        (Featureless::Auto, None) => format!(
            "no node features: {per_trainer} {what} per trainer ({counted}) is \
             below {min}, so the input is the degree column and a constant \
             one, without the 31 random identity columns a model this short of examples learns \
             by heart (--featureless degree-random keeps them; \
             docs/decisions/0031-featureless-inputs-by-supervision.md, 0033, 0034)"
        ),
        _ => "no node features: the input is the degree column and a constant one \
              (--featureless degree)"
            .to_string(),
    };
    (Featureless::Degree, Some(line))
}

/// The link task's split of `ds`: the split stored with the dataset ([`stored_split`], taken
/// out of `ds.link_split`), else a fresh seeded one ([`fresh_link_split`]). The split's notes
/// go to `warnings`, and one line when its test split is empty.
///
/// # Errors
/// [`TrainError::Data`] naming the dataset when no validation pair can be held out.
fn link_split_of(
    ds: &mut Dataset,
    cfg: &TrainConfig,
    warnings: &mut Vec<String>,
) -> Result<LinkSplit, TrainError> {
    let split = match ds.link_split.take() {
        Some(stored) => stored_split(&ds.graph, ds.directed, &ds.name, stored, cfg, warnings)?,
        None => fresh_link_split(ds, cfg, warnings)?,
    };
    if split.test_pos.is_empty() {
        warnings.push(EMPTY_TEST_SPLIT.replace("{what}", "0 test pairs"));
    }
    Ok(split)
}

/// A link split of `ds`'s edges made now ([`tma_graph::link_split`]: `cfg.val_frac` and
/// `cfg.test_frac` of the edges held out, validation and test capped at `cfg.eval_max_edges`
/// positives, `cfg.eval_num_neg` negatives each, seeded by `cfg.seed`); its notes go to
/// `warnings`.
///
/// # Errors
/// [`TrainError::Data`] naming the dataset and why, when no validation pair (or, with a test
/// fraction, no test pair) could be held out.
fn fresh_link_split(
    ds: &Dataset,
    cfg: &TrainConfig,
    warnings: &mut Vec<String>,
) -> Result<LinkSplit, TrainError> {
    let split = tma_graph::link_split(
        &ds.graph,
        ds.directed,
        cfg.val_frac,
        cfg.test_frac,
        Some(cfg.eval_max_edges),
        cfg.eval_num_neg,
        cfg.seed,
    );
    let notes = &split.notes;
    if split.val_pos.is_empty() || (cfg.test_frac > 0.0 && split.test_pos.is_empty()) {
        let why = if notes.unrankable > 0 {
            format!(
                "no valid negative pair exists for the held-out edges ({} of them): every source is adjacent to every other node (a complete graph?); MRR needs non-edges to rank against",
                notes.unrankable
            )
        } else if cfg.val_frac <= 0.0 || cfg.eval_max_edges == 0 {
            format!(
                "--val-frac {} / --eval-max-edges {} hold out no validation edge; link prediction needs at least one",
                cfg.val_frac, cfg.eval_max_edges
            )
        } else {
            format!(
                "it has {} edge(s); link prediction needs at least {} (1 validation, {}1 training)",
                notes.num_edges,
                2 + (cfg.test_frac > 0.0) as usize,
                if cfg.test_frac > 0.0 { "1 test, " } else { "" }
            )
        };
        return Err(TrainError::Data(format!(
            "dataset '{}': cannot split for link prediction: {why}",
            ds.name
        )));
    }
    warnings.extend(notes.warnings(cfg.val_frac, cfg.test_frac, cfg.eval_num_neg));
    Ok(split)
}

/// `[N]` flags of the graph's nodes: whether a node is a training example of a node task (in
/// the training split and labelled; an unlabelled node (-1) in a fixed training split is
/// not). All false for a link task.
fn train_node_mask(eval: &EvalData, num_nodes: usize) -> Vec<bool> {
    let mut is_train_node = vec![false; num_nodes];
    if let EvalData::Node { split, targets } = eval {
        for &v in &split.train {
            // an unlabelled node (-1) in a fixed training split is not a training example
            let labelled = match targets {
                NodeTargets::Classes { y, .. } => y[v as usize] >= 0,
                NodeTargets::MultiLabel { .. } => true,
            };
            is_train_node[v as usize] = labelled;
        }
    }
    is_train_node
}

/// What every trainer's data is built from besides its own subgraph: the dataset's features,
/// whether the graph is directed, the node task's targets (`None`: link task) and the
/// training-node flags ([`train_node_mask`]).
struct TrainerBuilder<'a> {
    features: &'a Features,
    directed: bool,
    node_targets: Option<&'a NodeTargets>,
    is_train_node: Vec<bool>,
}

impl TrainerBuilder<'_> {
    /// Trainer `trainer`'s data for part `part`: subgraph `sub` of the nodes `global_ids`
    /// (local `l` = global `global_ids[l]`), with `features` when they were written already
    /// (a spilled part), else gathered from the dataset's rows (shared when `global_ids` is
    /// every node in order: a mapped matrix stays mapped). Link task: the subgraph's edges are
    /// the examples; node task: its training nodes (local ids) with their targets.
    fn build(
        &self,
        trainer: usize,
        part: usize,
        global_ids: Vec<u32>,
        sub: Csr,
        features: Option<Features>,
    ) -> TrainerData {
        let features = features.unwrap_or_else(|| {
            if global_ids.len() == self.features.num_nodes()
                && global_ids.iter().enumerate().all(|(i, &g)| g as usize == i)
            {
                // every node in order: share the rows (a mapped matrix stays mapped)
                self.features.clone()
            } else {
                self.features.gather(&global_ids)
            }
        });
        let target = match self.node_targets {
            None => TrainTarget::Link {
                edges: LinkExamples::of_graph(&sub, self.directed),
            },
            Some(t) => TrainTarget::Node {
                nodes: (0..global_ids.len() as u32)
                    .filter(|&l| self.is_train_node[global_ids[l as usize] as usize])
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
    }
}

/// The trainers of a layout ([`lay_out`]).
#[derive(Default)]
struct LaidOut {
    /// Every trainer's data, trainer `t` at index `t`.
    trainers: Vec<TrainerData>,
    /// The partition report (partitioned layouts only).
    report: Option<PartitionReport>,
    /// The partition's hash, hex (partitioned layouts only).
    partition_hash: Option<String>,
}

/// The trainers' data of `layout` over `graph` (the training graph), with the partition's
/// report and hash for a partitioned layout.
///
/// # Errors
/// As [`partitioned_trainers`].
fn lay_out(
    builder: &TrainerBuilder<'_>,
    graph: &Csr,
    cfg: &TrainConfig,
    layout: DataLayout,
    spill: Option<&crate::data::spill::Spill>,
    partitioned: Option<(tma_partition::Partition, PartitionReport)>,
) -> Result<LaidOut, TrainError> {
    let unpartitioned = |trainers| LaidOut {
        trainers,
        report: None,
        partition_hash: None,
    };
    Ok(match layout {
        DataLayout::Whole => {
            let all: Vec<u32> = (0..graph.num_nodes() as u32).collect();
            unpartitioned(vec![builder.build(0, 0, all, graph.clone(), None)])
        }
        DataLayout::SharedExamples => {
            let all: Vec<u32> = (0..graph.num_nodes() as u32).collect();
            let full = builder.build(0, 0, all, graph.clone(), None);
            let trainers = share_examples(
                &full,
                cfg.num_trainers + cfg.drop_parts,
                cfg.num_trainers,
                cfg.seed,
            );
            unpartitioned(trainers)
        }
        DataLayout::Custom(sets) => {
            let sets = sets.node_sets(graph, cfg);
            let trainers = sets
                .into_iter()
                .enumerate()
                .map(|(t, nodes)| {
                    let sub = graph.induced_subgraph(&nodes);
                    builder.build(t, t, nodes, sub, None)
                })
                .collect();
            unpartitioned(trainers)
        }
        DataLayout::Partitioned(method) => {
            let (partition, report) = match partitioned {
                Some(done) => done,
                None => partition_with_report(graph, cfg, method, spill, builder.node_targets)?,
            };
            let (trainers, hash) = partitioned_trainers(builder, graph, partition, &report, spill)?;
            LaidOut {
                trainers,
                report: Some(report),
                partition_hash: Some(hash),
            }
        }
    })
}

/// `graph` partitioned by `method` as `cfg` says (under the spill's memory budget, `auto`
/// runs label propagation where METIS would not fit, and `metis` is refused there), with its
/// report (label divergence from `node_targets`' classes).
///
/// # Errors
/// [`TrainError::Partition`] if partitioning fails.
fn partition_with_report(
    graph: &Csr,
    cfg: &TrainConfig,
    method: PartitionMethod,
    spill: Option<&crate::data::spill::Spill>,
    node_targets: Option<&NodeTargets>,
) -> Result<(tma_partition::Partition, PartitionReport), TrainError> {
    let pcfg = DataLayout::Partitioned(method)
        .partition_config(cfg)
        .expect("a partitioned layout");
    // under the spill's memory budget (`tma partition --out --memory-budget`), `auto`
    // runs label propagation where METIS would not fit, and `metis` is refused there
    let budget = spill.and_then(|s| s.budget());
    let partition = tma_partition::partition_ref_within(graph.view(), &pcfg, budget)?;
    let labels = match node_targets {
        // a layout without labels (no class) has no label divergence to report
        Some(NodeTargets::Classes { y, num_classes }) if num_classes > &0 => {
            Some((y.as_slice(), *num_classes))
        }
        _ => None,
    };
    let report = tma_partition::partition_report(graph, &partition, labels);
    Ok((partition, report))
}

/// The training examples of each kept part of `partition` (trainer order): training edges
/// inside the part for link prediction (its arcs in `report`, halved for an undirected
/// graph), training nodes in the part for node classification.
fn examples_per_kept_part(
    partition: &tma_partition::Partition,
    report: &PartitionReport,
    eval: &EvalData,
    directed: bool,
) -> Vec<usize> {
    let kept = partition.kept_parts();
    match eval {
        EvalData::Link { .. } => kept
            .iter()
            .map(|&p| {
                let arcs = report
                    .parts
                    .iter()
                    .find(|s| s.part == p)
                    .map_or(0, |s| s.num_edges);
                if directed {
                    arcs
                } else {
                    arcs / 2
                }
            })
            .collect(),
        EvalData::Node { split, .. } => {
            let mut per_part = vec![0usize; partition.num_assigned_parts];
            for &v in &split.train {
                per_part[partition.assignment[v as usize] as usize] += 1;
            }
            kept.iter().map(|&p| per_part[p]).collect()
        }
    }
}

/// The trainers of a partitioned layout: one per kept part of `partition` (built in parallel
/// in memory, or one at a time and written under the spill's root: [`spilled_trainers`]),
/// with the partition's hash (hex).
///
/// # Errors
/// As [`spilled_trainers`].
fn partitioned_trainers(
    builder: &TrainerBuilder<'_>,
    graph: &Csr,
    partition: tma_partition::Partition,
    report: &PartitionReport,
    spill: Option<&crate::data::spill::Spill>,
) -> Result<(Vec<TrainerData>, String), TrainError> {
    let partition = &partition;
    let kept = partition.kept_parts();
    use rayon::prelude::*;
    let trainers: Vec<TrainerData> = match spill {
        None => kept
            .par_iter()
            .enumerate()
            .map(|(t, &p)| {
                let part = tma_partition::build_part(graph, partition, p);
                builder.build(t, p, part.global_ids, part.graph, None)
            })
            .collect(),
        Some(spill) => spilled_trainers(builder, graph, partition, &kept, report, spill)?,
    };
    Ok((trainers, partition.hash_hex()))
}

/// The trainers of `partition`'s kept parts (`kept`, trainer `t` for part `kept[t]`) built one
/// at a time, each part's graph and dense
/// features written under `spill.root()` and mapped back ([`crate::data::spill::Spill::spill_part`]),
/// the pages read from a mapped `graph` and features released after each part. The spill's
/// root is removed afterwards unless its files are kept.
///
/// # Errors
/// [`TrainError::Data`] when the spill's memory budget cannot hold the build of the parts
/// (`report`'s part sizes); [`TrainError::Dataset`] naming the root when a part cannot be
/// written or mapped.
fn spilled_trainers(
    builder: &TrainerBuilder<'_>,
    graph: &Csr,
    partition: &tma_partition::Partition,
    kept: &[usize],
    report: &PartitionReport,
    spill: &crate::data::spill::Spill,
) -> Result<Vec<TrainerData>, TrainError> {
    let sizes: Vec<(usize, usize)> = kept
        .iter()
        .filter_map(|&p| report.parts.iter().find(|s| s.part == p))
        .map(|s| (s.num_nodes, s.num_edges))
        .collect();
    spill
        .check_budget(graph.num_nodes(), &sizes)
        .map_err(TrainError::Data)?;
    let root = spill.root();
    let mut out = Vec::with_capacity(kept.len());
    for (t, &p) in kept.iter().enumerate() {
        let started = std::time::Instant::now();
        let part = tma_partition::build_part(graph, partition, p);
        let (sub, features) = spill
            .spill_part(
                t,
                kept.len(),
                &part.graph,
                builder.features,
                &part.global_ids,
                started,
            )
            .map_err(|source| TrainError::Dataset {
                path: root.to_path_buf(),
                source,
            })?;
        drop(part.graph);
        // the part was streamed from the whole mapped graph: drop the pages it
        // read from this process's RSS (they stay in the page cache), so the
        // spill holds one part's pass, not the whole graph (no-op when owned)
        graph.release_pages();
        builder.features.release_pages();
        out.push(builder.build(t, p, part.global_ids, sub, Some(features)));
    }
    if !spill.keeps_files() {
        let _ = std::fs::remove_dir(root);
    }
    Ok(out)
}

/// Checks the trainers for `purpose`: under [`Purpose::Training`] refuses them when none has
/// a training example ([`check_idle`]); under [`Purpose::Layout`] says so in one line of
/// `warnings` instead (unless `untrainable`: the node data's own line says why no part has a
/// training node).
///
/// # Errors
/// As [`check_idle`].
fn check_trainers(
    trainers: &[TrainerData],
    eval: &EvalData,
    cfg: &TrainConfig,
    purpose: Purpose,
    untrainable: bool,
    warnings: &mut Vec<String>,
) -> Result<(), TrainError> {
    let idle: Vec<usize> = trainers
        .iter()
        .filter(|t| t.num_examples() == 0)
        .map(|t| t.trainer)
        .collect();
    let num_examples = match eval {
        EvalData::Node { split, .. } => split.train.len(),
        EvalData::Link { split } => split.num_train_edges(),
    };
    match purpose {
        // every trainer idle; the method's own rule on some idle trainers is
        // `crate::methods::prepare`'s (it knows whether the method averages models)
        Purpose::Training => check_idle(&idle, trainers.len(), cfg, num_examples, true)?,
        // where the node data cannot be trained on, its own line says why no part has a
        // training node
        Purpose::Layout if idle.len() == trainers.len() && !untrainable => {
            warnings.push(no_part_trains_line(trainers.len(), cfg.task, num_examples))
        }
        Purpose::Layout | Purpose::Evaluation => {}
    }
    Ok(())
}

/// What `tma partition --out` says after a reason training could not run on the parts.
pub const WRITTEN_BUT_REFUSED: &str =
    "the parts are written anyway, but `tma train --partitions` refuses them";

/// Refuses trainers without a training example where training cannot run them: all of
/// them (nothing would train), or any under a method that does not average models (GGS;
/// `averages_models`: its [`crate::engines::method::MethodInfo::averages_models`]).
/// `num_examples`: the training examples of the split.
///
/// # Errors
/// [`TrainError::Data`] naming the trainers and the counts.
pub fn check_idle(
    idle: &[usize],
    num_trainers: usize,
    cfg: &TrainConfig,
    num_examples: usize,
    averages_models: bool,
) -> Result<(), TrainError> {
    if idle.is_empty() || (idle.len() < num_trainers && averages_models) {
        return Ok(());
    }
    let what = examples_word(cfg.task);
    Err(TrainError::Data(format!(
        "trainer{} {} got no training {what} ({} trainers on {num_examples} training {what}); use fewer --trainers",
        if idle.len() == 1 { "" } else { "s" },
        idle.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", "),
        cfg.num_trainers,
    )))
}

/// The checks of [`Purpose::Training`] that a partition directory made for its layout may
/// fail (`tma partition --out` wrote it saying so in a line): node data that cannot be trained
/// on, or no part with a training example. `num_train`: each part's training examples (the
/// manifest's).
///
/// # Errors
/// [`TrainError::Data`] saying why.
pub fn check_partitions(
    name: &str,
    eval: &EvalData,
    task: Task,
    num_train: &[usize],
) -> Result<(), TrainError> {
    if let EvalData::Node { split, targets } = eval {
        if let NodeTargets::Classes { num_classes: 0, .. } = targets {
            return Err(TrainError::Data(format!(
                "dataset '{name}' has no labelled node (written without labels for its layout): nothing to train on; re-run `tma partition --out` with --task link"
            )));
        }
        if let (_, Some(e)) = check_node_split(name, split, targets) {
            return Err(TrainError::Data(e));
        }
    }
    if num_train.iter().all(|&n| n == 0) {
        let what = examples_word(task);
        return Err(TrainError::Data(format!(
            "no part holds a training {} ({} parts): nothing to train on; re-run `tma partition --out` with fewer --parts",
            &what[..what.len() - 1],
            num_train.len()
        )));
    }
    Ok(())
}

/// "edges" (link) or "nodes" (node task): what a training example is.
fn examples_word(task: Task) -> &'static str {
    match task {
        Task::Link => "edges",
        Task::Node => "nodes",
    }
}

/// The line of `tma partition --out` when no part holds a training example.
fn no_part_trains_line(num_parts: usize, task: Task, num_examples: usize) -> String {
    let what = examples_word(task);
    format!(
        "no part holds a training {} ({num_parts} parts on {num_examples} training {what}{}): {WRITTEN_BUT_REFUSED} (nothing to train on); use fewer --parts",
        &what[..what.len() - 1],
        if task == Task::Link { ", every one crossing parts" } else { "" },
    )
}

/// The node task's targets of `ds`, or why it has none ("has no node labels (no y.npy)").
fn node_targets(ds: &Dataset) -> Result<NodeTargets, &'static str> {
    match &ds.labels {
        tma_graph::Labels::Classes { num_classes: 0, .. } => {
            Err("has y.npy but every node is unlabelled (-1)")
        }
        tma_graph::Labels::Classes { y, num_classes } => Ok(NodeTargets::Classes {
            y: y.clone(),
            num_classes: *num_classes,
        }),
        tma_graph::Labels::MultiLabel { num_labels, y } => Ok(NodeTargets::MultiLabel {
            y: y.clone(),
            num_labels: *num_labels,
        }),
        tma_graph::Labels::None => Err("has no node labels (no y.npy)"),
    }
}

/// The node task's split and targets of `ds` (its stored split, else a seeded 60/20/20 one of
/// the labelled nodes), the split's warnings pushed to `warnings`. Under [`Purpose::Layout`]
/// data that cannot be trained on (no labels, no labelled training or validation node) is said
/// in one warning line (no labels: every node unlabelled, no node in the split) and `true`
/// returned with it.
///
/// # Errors
/// [`TrainError::Data`] under [`Purpose::Training`] where training cannot run.
fn node_data(
    ds: &Dataset,
    cfg: &TrainConfig,
    purpose: Purpose,
    warnings: &mut Vec<String>,
) -> Result<(NodeSplit, NodeTargets, bool), TrainError> {
    let targets = match (node_targets(ds), purpose) {
        (Ok(t), _) => t,
        (Err(why), Purpose::Training | Purpose::Evaluation) => {
            return Err(TrainError::Data(format!(
                "dataset '{}' {why}; use --task link",
                ds.name
            )))
        }
        (Err(why), Purpose::Layout) => {
            warnings.push(format!(
                "dataset '{}' {why}, so no part has a training node; {WRITTEN_BUT_REFUSED} (nothing to train on); use --task link to train on this graph",
                ds.name
            ));
            let unlabelled = NodeTargets::Classes {
                y: vec![-1; ds.num_nodes()],
                num_classes: 0,
            };
            return Ok((ds.split.clone().unwrap_or_default(), unlabelled, true));
        }
    };
    let split = match &ds.split {
        Some(s) => s.clone(),
        None => tma_graph::random_node_split(&ds.labels, ds.num_nodes(), 0.6, 0.2, cfg.seed),
    };
    let (notes, refusal) = check_node_split(&ds.name, &split, &targets);
    warnings.extend(notes);
    match (refusal, purpose) {
        (None, _) => Ok((split, targets, false)),
        (Some(e), Purpose::Training | Purpose::Evaluation) => Err(TrainError::Data(e)),
        (Some(e), Purpose::Layout) => {
            warnings.push(format!("{e}: {WRITTEN_BUT_REFUSED}"));
            Ok((split, targets, true))
        }
    }
}

/// The warning of a split without a test example (`{what}`: how many it holds): every test
/// metric is NaN, printed `undefined` (`null` in `summary.json`), never a real-looking 0.
const EMPTY_TEST_SPLIT: &str = "the test split is empty ({what}): every test metric is undefined (printed 'undefined', null in summary.json)";

/// Checks a node split against its targets: returns the warnings (an empty test split, classes
/// without a node, unlabelled split nodes skipped; one line each) and, where training cannot run, why (an
/// empty train or validation split, no labelled training or validation node). Targets with
/// classes have at least one (`num_classes > 0`).
pub fn check_node_split(
    name: &str,
    split: &NodeSplit,
    targets: &NodeTargets,
) -> (Vec<String>, Option<String>) {
    let mut warnings = Vec::new();
    if split.train.is_empty() || split.val.is_empty() {
        let e = format!("dataset '{name}' has an empty train or validation split");
        return (warnings, Some(e));
    }
    let labelled_test = match targets {
        NodeTargets::Classes { y, .. } => {
            split.test.iter().filter(|&&v| y[v as usize] >= 0).count()
        }
        NodeTargets::MultiLabel { .. } => split.test.len(),
    };
    if labelled_test == 0 {
        let what = match split.test.len() {
            0 => "0 test nodes".to_string(),
            n => format!("{n} test nodes, none labelled"),
        };
        warnings.push(EMPTY_TEST_SPLIT.replace("{what}", &what));
    }
    let NodeTargets::Classes { y, num_classes } = targets else {
        return (warnings, None);
    };
    let mut count = vec![0usize; *num_classes];
    for &c in y.iter().filter(|&&c| c >= 0) {
        count[c as usize] += 1;
    }
    let unused = count.iter().filter(|&&c| c == 0).count();
    if unused > 0 {
        warnings.push(format!(
            "y.npy: {unused} of the {num_classes} classes (ids 0..{}, from the largest label) have no node; the model still outputs {num_classes} classes",
            num_classes - 1
        ));
    }
    let unl = |l: &[u32]| l.iter().filter(|&&v| y[v as usize] < 0).count();
    let (a, b, c) = (unl(&split.train), unl(&split.val), unl(&split.test));
    if a + b + c > 0 {
        warnings.push(format!(
            "split: {a} train / {b} val / {c} test nodes are unlabelled (y = -1) and are skipped; training and metrics use labelled nodes only ({} / {} / {})",
            split.train.len() - a,
            split.val.len() - b,
            split.test.len() - c
        ));
    }
    if split.train.len() == a || split.val.len() == b {
        let e = format!(
            "dataset '{name}' has no labelled {} node (train {} of which {a} unlabelled, val {} of which {b} unlabelled)",
            if split.train.len() == a { "training" } else { "validation" },
            split.train.len(),
            split.val.len()
        );
        return (warnings, Some(e));
    }
    (warnings, None)
}

/// Splits the training examples of `full` (edges or nodes) into `num_shares` disjoint shares of
/// sizes differing by at most one (seeded shuffle, then dealt round-robin) and returns the
/// first `keep` of them as trainer data `0..keep`, each with the whole graph
/// ([`DataLayout::SharedExamples`]). `keep < num_shares` models trainers lost from the start
/// (`--drop-parts`): their examples are never trained on.
///
/// # Panics
/// If `keep > num_shares` or `num_shares == 0`.
pub fn share_examples(
    full: &TrainerData,
    num_shares: usize,
    keep: usize,
    seed: u64,
) -> Vec<TrainerData> {
    assert!(num_shares > 0 && keep <= num_shares);
    let n = match &full.target {
        TrainTarget::Link { edges } => edges.len(&full.graph),
        TrainTarget::Node { nodes, .. } => nodes.len(),
    };
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut tma_graph::seed::rng(
        seed,
        tma_graph::seed::Purpose::ExampleShares,
    ));
    (0..keep)
        .map(|s| {
            let mine = order.iter().skip(s).step_by(num_shares).copied();
            let target = match &full.target {
                TrainTarget::Link { edges } => TrainTarget::Link {
                    edges: LinkExamples::List(mine.map(|i| edges.get(&full.graph, i)).collect()),
                },
                TrainTarget::Node { nodes, targets } => TrainTarget::Node {
                    nodes: mine.map(|i| nodes[i]).collect(),
                    targets: targets.clone(),
                },
            };
            TrainerData {
                trainer: s,
                part: s,
                graph: full.graph.clone(),
                degrees: full.degrees.clone(),
                features: full.features.clone(),
                target,
                global_ids: full.global_ids.clone(),
            }
        })
        .collect()
}

/// What fixes a model's shape besides the configuration: input width and output head.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelShape {
    /// Input feature width.
    pub in_dim: usize,
    /// Link decoder or node classifier with its number of outputs.
    pub head: Head,
}

impl Prepared {
    /// The shape of the model this data trains.
    pub fn model_shape(&self) -> ModelShape {
        let head = match &self.eval {
            EvalData::Link { .. } => Head::Link,
            EvalData::Node { targets, .. } => Head::Node {
                num_classes: targets.out_dim(),
            },
        };
        ModelShape {
            in_dim: self.in_dim,
            head,
        }
    }
}

/// The model `cfg` describes (encoder and its own options, hidden width, layers, dropout,
/// LayerNorm) for `shape`.
///
/// # Errors
/// [`TrainError::Config`] for encoder options the encoder refuses
/// ([`TrainConfig::model_options`]: e.g. `hidden` not divisible by GAT's `heads`),
/// [`TrainError::Model`] for a configuration the layers refuse.
///
/// The link decoder's products run at `cfg.matmul_precision` where the CPU allows it
/// ([`Model::set_matmul_precision`]; [`matmul_precision_warning`] says when it does not).
pub fn build_model(cfg: &TrainConfig, shape: ModelShape) -> Result<Model, TrainError> {
    let mut model = Model::try_new_with(
        ModelConfig {
            encoder: cfg.model,
            in_dim: shape.in_dim,
            hidden: cfg.hidden,
            num_layers: cfg.num_layers,
            dropout: cfg.dropout,
            head: shape.head,
            layer_norm: cfg.layer_norm,
        },
        cfg.model_options().map_err(TrainError::Config)?,
    )?;
    model.set_matmul_precision(cfg.matmul_precision);
    Ok(model)
}

/// What runs the model's dense products in this process under `cfg.matmul_precision`: `"f32"`
/// (`highest`, or `medium` where the CPU has no bf16 product), `"bf16-amx"` (Intel AMX tiles)
/// or `"bf16-avx512"` (AVX512_BF16 dot products; `tma_nn::bf16_products`).
pub fn matmul_products(cfg: &TrainConfig) -> &'static str {
    match cfg.matmul_precision {
        tma_nn::MatmulPrecision::Medium => tma_nn::bf16_products().unwrap_or("f32"),
        tma_nn::MatmulPrecision::Highest => "f32",
    }
}

/// `Some(warning)` when `--matmul-precision medium` cannot be honoured: this CPU lacks both
/// AMX-BF16 (or the kernel refuses it) and AVX512_BF16, so the products stay f32.
pub fn matmul_precision_warning(cfg: &TrainConfig) -> Option<String> {
    (cfg.matmul_precision == tma_nn::MatmulPrecision::Medium && tma_nn::bf16_products().is_none()).then(|| {
        "matmul-precision medium needs AMX-BF16 (Intel Xeon 4th generation or later, with the kernel's permission: Linux >= 5.16, not denied by a sandbox) or AVX512_BF16 (AMD Zen 4 or later, Intel Cooper Lake), which this machine does not give: the products run in f32 (highest)".to_string()
    })
}

/// `Some("fixed split: train and test share 2 nodes, ... (accepted by --allow-split-overlap)")`
/// when the lists of `split` share nodes (a loader refuses that unless the user allowed it, so
/// an allowed overlap is still said and recorded); `None` when they are disjoint.
pub fn split_overlap_warning(split: &NodeSplit) -> Option<String> {
    use std::collections::HashSet;
    let set = |v: &[u32]| v.iter().copied().collect::<HashSet<u32>>();
    let (tr, va, te) = (set(&split.train), set(&split.val), set(&split.test));
    let pairs = [
        ("train and validation", tr.intersection(&va).count()),
        ("train and test", tr.intersection(&te).count()),
        ("validation and test", va.intersection(&te).count()),
    ];
    let shared: Vec<String> = pairs
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(what, n)| format!("{what} share {n} node{}", if *n == 1 { "" } else { "s" }))
        .collect();
    (!shared.is_empty()).then(|| {
        format!(
            "fixed split: {} (accepted by --allow-split-overlap)",
            shared.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_split_overlap_is_said() {
        // regression: an overlap accepted with --allow-split-overlap was recorded nowhere
        let split = NodeSplit {
            train: vec![0, 1, 2, 3],
            val: vec![3, 4],
            test: vec![0, 1, 5],
        };
        assert_eq!(
            split_overlap_warning(&split).as_deref(),
            Some("fixed split: train and validation share 1 node, train and test share 2 nodes (accepted by --allow-split-overlap)")
        );
        let disjoint = NodeSplit {
            train: vec![0],
            val: vec![1],
            test: vec![2],
        };
        assert_eq!(split_overlap_warning(&disjoint), None);
    }

    /// `n` nodes, the undirected `edges`, 2-d features, no labels, no split.
    fn unlabelled(n: usize, edges: &[(u32, u32)]) -> Dataset {
        let src: Vec<u32> = edges.iter().flat_map(|&(a, b)| [a, b]).collect();
        let dst: Vec<u32> = edges.iter().flat_map(|&(a, b)| [b, a]).collect();
        Dataset {
            name: "tiny".into(),
            directed: false,
            graph: Csr::from_edges(n, &src, &dst),
            features: Features::Dense {
                num_nodes: n,
                dim: 2,
                data: vec![1.0; 2 * n].into(),
            },
            structural_features: false,
            labels: tma_graph::Labels::None,
            split: None,
            removed: Default::default(),
            num_splits: 0,
            link_split: None,
        }
    }

    fn random_tma(task: Task, seed: u64) -> TrainConfig {
        TrainConfig {
            task,
            method: crate::Method::RandomTma,
            num_trainers: 2,
            seed,
            ..TrainConfig::default()
        }
    }

    fn prepare_as(ds: Dataset, cfg: &TrainConfig, p: Purpose) -> Result<Prepared, TrainError> {
        let layout = DataLayout::Partitioned(PartitionMethod::Random);
        prepare_for(ds, cfg, layout, None, p)
    }

    /// A featureless ring of `n` nodes with a chord (v, v + 2) at every fourth node (degrees 2,
    /// 3 and 4), with its 32 structural columns (seed 3), and their degree column.
    fn featureless_ring(n: u32) -> (Dataset, Vec<f32>) {
        let mut edges: Vec<(u32, u32)> = (0..n).map(|v| (v, (v + 1) % n)).collect();
        edges.extend((0..n).step_by(4).map(|v| (v, (v + 2) % n)));
        let mut ds = unlabelled(n as usize, &edges);
        ds.features = tma_graph::structural_features(&ds.graph, false, 32, 3);
        ds.structural_features = true;
        let Features::Dense { data, .. } = &ds.features else {
            panic!("structural features are dense")
        };
        let degree: Vec<f32> = data.chunks_exact(32).map(|r| r[0]).collect();
        (ds, degree)
    }

    #[test]
    fn featureless_auto_drops_the_random_columns_below_4096_examples_per_trainer() {
        // (docs/decisions/0031) 6250 edges, 5% + 5% held out: 4096 <= training edges < 8192
        let (ds, degree) = featureless_ring(5000);
        assert!(degree.iter().any(|&d| d > 0.5) && degree.iter().any(|&d| d < -0.5));
        let cfg = random_tma(Task::Link, 0);
        let prep = prepare_as(ds.clone(), &cfg, Purpose::Training).unwrap();
        let EvalData::Link { split } = &prep.eval else {
            panic!("link task")
        };
        let examples = split.train_edges.len();
        assert_eq!(examples, 5624);
        assert_eq!(prep.in_dim, 2);
        let Features::Dense { dim: 2, data, .. } = &prep.features else {
            panic!("two dense columns")
        };
        let kept: Vec<f32> = data.chunks_exact(2).map(|r| r[0]).collect();
        assert_eq!(
            kept,
            tma_graph::degree_column(&split.train_graph, false),
            "the degree column, of the training graph"
        );
        assert!(
            data.chunks_exact(2).all(|r| r[1] == 1.0),
            "a constant column of ones"
        );
        let said: Vec<&String> = prep
            .warnings
            .iter()
            .filter(|w| w.starts_with("no node features"))
            .collect();
        assert_eq!(said.len(), 1, "{:?}", prep.warnings);
        assert!(
            said[0].starts_with(
                "no node features: 1402 training edges per trainer (the mean over 2 parts, \
                 which hold 2804 of the 5624) is below 4096, so the input is the degree column \
                 and a constant one"
            ),
            "{}",
            said[0]
        );
        // the trainers' parts hold the same two columns
        assert!(prep.trainers.iter().all(|t| t.features.dim() == 2));

        // the whole graph in one trainer: 5624 >= 4096, all 32 columns (the ring's edges are
        // ranked better by common neighbours: decision 0035's line says so)
        let whole =
            prepare_for(ds.clone(), &cfg, DataLayout::Whole, None, Purpose::Training).unwrap();
        assert_eq!(whole.in_dim, 32);
        assert!(!whole
            .warnings
            .iter()
            .any(|w| w.starts_with("no node features")
                && !w.contains("31 random identity columns, which show")));

        // --featureless degree-random keeps them on the parts; degree drops them anywhere
        let keep = TrainConfig {
            featureless: Featureless::DegreeRandom,
            ..cfg.clone()
        };
        let prep = prepare_as(ds.clone(), &keep, Purpose::Training).unwrap();
        assert_eq!(prep.in_dim, 32);
        assert!(!prep
            .warnings
            .iter()
            .any(|w| w.starts_with("no node features")));
        let degree_only = TrainConfig {
            featureless: Featureless::Degree,
            ..cfg
        };
        let prep =
            prepare_for(ds, &degree_only, DataLayout::Whole, None, Purpose::Training).unwrap();
        assert_eq!(prep.in_dim, 2);
        assert!(prep.warnings.iter().any(|w| w
            == "no node features: the input is the degree column and a constant one (--featureless degree)"));
    }

    #[test]
    fn featureless_auto_takes_the_degree_input_where_the_degrees_rank_the_edges() {
        // (docs/decisions/0035) two graphs of 6000 edges, over 4096 training edges on the
        // whole graph: hubs of skewed degree joined to 3000 nodes of degree 2 (no two ends of
        // an edge share a neighbour: the degree product ranks the edges, common neighbours do
        // not) take the degree input; 1000 disjoint 4-cliques (every edge's ends share 2
        // neighbours, all degrees equal) keep the random columns
        let mut hubs = Vec::new();
        for i in 0..3000u32 {
            let a = match i % 100 {
                0..60 => 0,
                60..85 => 1,
                85..95 => 2,
                _ => 3,
            };
            hubs.push((4 + i, a));
            hubs.push((4 + i, (a + 1) % 4));
        }
        let mut cliques = Vec::new();
        for c in 0..1000u32 {
            for i in 0..4 {
                for j in i + 1..4 {
                    cliques.push((4 * c + i, 4 * c + j));
                }
            }
        }
        let cfg = TrainConfig {
            method: crate::Method::Centralized,
            num_trainers: 1,
            ..random_tma(Task::Link, 0)
        };
        for (n, edges, degree_input) in [(3004, &hubs, true), (4000, &cliques, false)] {
            let mut ds = unlabelled(n, edges);
            ds.features = tma_graph::structural_features(&ds.graph, false, 32, 3);
            ds.structural_features = true;
            let prep = prepare_for(ds, &cfg, DataLayout::Whole, None, Purpose::Training).unwrap();
            let said: Vec<&String> = prep
                .warnings
                .iter()
                .filter(|w| w.starts_with("no node features"))
                .collect();
            if degree_input {
                assert_eq!(prep.in_dim, 2);
                assert_eq!(prep.structural_input, Some(Featureless::Degree));
                assert_eq!(said.len(), 1, "{:?}", prep.warnings);
                assert!(
                    said[0].starts_with(
                        "no node features: the degree product ranks this graph's edges at \
                         least 0.75 as well as common neighbours do (MRR "
                    ) && said[0].contains("over 1000 training edges, 100 non-neighbours each"),
                    "{}",
                    said[0]
                );
            } else {
                assert_eq!(prep.in_dim, 32);
                assert_eq!(prep.structural_input, Some(Featureless::DegreeRandom));
                // the measurement is said when the random columns are kept too
                assert_eq!(said.len(), 1, "{:?}", prep.warnings);
                assert!(
                    said[0].starts_with(
                        "no node features: the input is the degree column and 31 random \
                         identity columns, which show neighbourhood overlap: common neighbours \
                         rank this graph's edges better than the degree product does (MRR "
                    ),
                    "{}",
                    said[0]
                );
            }
        }
    }

    #[test]
    fn a_saved_models_input_width_decides_auto_where_its_file_does_not_record_the_input() {
        // regression (fresh-eyes trial): a checkpoint or model file written before the choice
        // was recorded, whose run `auto` gave 32 columns, could no longer be resumed or
        // evaluated where the rule now chooses the degree input (and the other way round)
        let (ds, _) = featureless_ring(5000);
        let cfg = random_tma(Task::Link, 0);
        // the rule: 2 parts of ~1400 training edges -> the degree input
        assert_eq!(
            prepare_as(ds.clone(), &cfg, Purpose::Training)
                .unwrap()
                .in_dim,
            2
        );
        let wide = TrainConfig {
            model_input_width: Some(32),
            ..cfg.clone()
        };
        let prep = prepare_as(ds.clone(), &wide, Purpose::Training).unwrap();
        assert_eq!(prep.in_dim, 32);
        assert_eq!(prep.structural_input, Some(Featureless::DegreeRandom));
        let narrow = TrainConfig {
            model_input_width: Some(2),
            ..cfg
        };
        let prep = prepare_for(ds, &narrow, DataLayout::Whole, None, Purpose::Evaluation).unwrap();
        assert_eq!(prep.in_dim, 2);
        assert!(prep.warnings.iter().any(|w| w
            == "no node features: the input is the degree column and a constant one, as the model was trained (its input width is 2)"));
    }

    #[test]
    fn featureless_auto_counts_the_training_edges_the_parts_hold() {
        // regression (docs/decisions/0034): `auto` took a trainer's training edges as all of
        // them over M + d, but a random partition into 2 parts keeps about half of the edges,
        // a quarter in each part: 11500 training edges over 2 trainers are 5750 each by the
        // old count (random columns kept), 2800 or so in each part (dropped)
        let (ds, _) = featureless_ring(10_000);
        let cfg = random_tma(Task::Link, 0);
        let prep = prepare_as(ds, &cfg, Purpose::Training).unwrap();
        let EvalData::Link { split } = &prep.eval else {
            panic!("link task")
        };
        assert_eq!(split.train_edges.len(), 11500);
        let held: Vec<usize> = prep.trainers.iter().map(|t| t.num_examples()).collect();
        assert_eq!(held, vec![2773, 2885], "each part's training edges");
        assert_eq!(prep.in_dim, 2);
        assert!(
            prep.warnings.iter().any(|w| w.starts_with(
                "no node features: 2829 training edges per trainer (the mean over 2 parts, \
                 which hold 5658 of the 11500) is below 4096"
            )),
            "{:?}",
            prep.warnings
        );
    }

    #[test]
    fn featureless_auto_keeps_the_random_columns_from_256_training_nodes_per_trainer() {
        // (docs/decisions/0033) node classification has its own threshold: 600 training nodes
        // over 2 trainers keep the random columns, over 4 they do not
        let (mut ds, _) = featureless_ring(1000);
        ds.labels = tma_graph::Labels::Classes {
            y: (0..1000).map(|v| v % 3).collect(),
            num_classes: 3,
        };
        let two = random_tma(Task::Node, 0);
        let prep = prepare_as(ds.clone(), &two, Purpose::Training).unwrap();
        let EvalData::Node { split, .. } = &prep.eval else {
            panic!("node task")
        };
        assert_eq!(split.train.len(), 600);
        assert_eq!(
            prep.in_dim, 32,
            "300 per trainer: the random columns are kept"
        );
        assert!(!prep
            .warnings
            .iter()
            .any(|w| w.starts_with("no node features")));
        let four = TrainConfig {
            num_trainers: 4,
            ..two
        };
        let prep = prepare_as(ds, &four, Purpose::Training).unwrap();
        assert_eq!(prep.in_dim, 2);
        assert!(
            prep.warnings.iter().any(|w| w.starts_with(
                "no node features: 150 training nodes per trainer (the mean over 4 parts, \
                 which hold 600 of the 600) is below 256, so the input is the degree column \
                 and a constant one"
            )),
            "{:?}",
            prep.warnings
        );
    }

    #[test]
    fn a_link_runs_degree_column_counts_only_its_training_edges() {
        // regression: the degree column counted the held-out pairs too (the loader computes it
        // on the whole graph), a small leak of the held-out edges into the inputs
        let (ds, degree) = featureless_ring(5000);
        let cfg = TrainConfig {
            featureless: Featureless::DegreeRandom,
            ..random_tma(Task::Link, 0)
        };
        let prep = prepare_for(ds, &cfg, DataLayout::Whole, None, Purpose::Training).unwrap();
        let EvalData::Link { split } = &prep.eval else {
            panic!("link task")
        };
        let expected = tma_graph::degree_column(&split.train_graph, false);
        let Features::Dense { dim: 32, data, .. } = &prep.features else {
            panic!("32 dense columns")
        };
        let got: Vec<f32> = data.chunks_exact(32).map(|r| r[0]).collect();
        assert_eq!(got, expected);
        assert_ne!(got, degree, "the whole graph's degrees differ");
    }

    #[test]
    fn featureless_options_leave_graphs_with_features_alone() {
        let ring: Vec<(u32, u32)> = (0..5000).map(|v| (v, (v + 1) % 5000)).collect();
        let cfg = TrainConfig {
            featureless: Featureless::Degree,
            ..random_tma(Task::Link, 0)
        };
        let prep = prepare_as(unlabelled(5000, &ring), &cfg, Purpose::Training).unwrap();
        assert_eq!(prep.in_dim, 2);
        assert!(!prep
            .warnings
            .iter()
            .any(|w| w.starts_with("no node features")));
        // not silently: the option the user set does nothing here
        assert!(
            prep.warnings.iter().any(|w| w
                == "--featureless degree is ignored: dataset 'tiny' has node features (2 columns)"),
            "{:?}",
            prep.warnings
        );
        let auto = TrainConfig {
            featureless: Featureless::Auto,
            ..cfg
        };
        let prep = prepare_as(unlabelled(5000, &ring), &auto, Purpose::Training).unwrap();
        assert!(!prep.warnings.iter().any(|w| w.contains("--featureless")));
    }

    #[test]
    fn a_layout_without_labels_is_made_and_said_and_training_on_it_refused() {
        // regression (issue 29): `tma partition --out` refused an unlabelled graph's node task
        let ring: Vec<(u32, u32)> = (0..30).map(|v| (v, (v + 1) % 30)).collect();
        let cfg = random_tma(Task::Node, 0);
        let prep = prepare_as(unlabelled(30, &ring), &cfg, Purpose::Layout).unwrap();
        assert_eq!(
            prep.warnings,
            ["dataset 'tiny' has no node labels (no y.npy), so no part has a training node; the parts are written anyway, but `tma train --partitions` refuses them (nothing to train on); use --task link to train on this graph"]
        );
        assert_eq!(prep.idle_trainers(), [0, 1]);
        assert_eq!((prep.out_dim, prep.metric), (0, Metric::Auto));
        assert_eq!(prep.report.as_ref().unwrap().parts.len(), 2);
        // training on those parts, or on the dataset, is refused saying why
        let e = check_partitions("tiny", &prep.eval, Task::Node, &[0, 0]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "dataset 'tiny' has no labelled node (written without labels for its layout): nothing to train on; re-run `tma partition --out` with --task link"
        );
        let e = prepare_as(unlabelled(30, &ring), &cfg, Purpose::Training)
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "dataset 'tiny' has no node labels (no y.npy); use --task link"
        );
    }

    #[test]
    fn a_layout_where_no_part_holds_a_training_edge_is_made_and_said() {
        // regression (issue 29): "trainers 0, 1 got no training edges" stopped `tma partition
        // --out` on a sparse graph: 3 edges, 1 held out for validation, 1 for test, and the
        // training edge between the 2 parts (seed 2 of the random partition)
        let edges = [(0, 1), (2, 3), (4, 5)];
        let cfg = random_tma(Task::Link, 2);
        let e = prepare_as(unlabelled(6, &edges), &cfg, Purpose::Training)
            .err()
            .expect("no trainer has a training edge");
        assert_eq!(
            e.to_string(),
            "trainers 0, 1 got no training edges (2 trainers on 1 training edges); use fewer --trainers"
        );
        let prep = prepare_as(unlabelled(6, &edges), &cfg, Purpose::Layout).unwrap();
        assert_eq!(
            prep.warnings.last().unwrap(),
            "no part holds a training edge (2 parts on 1 training edges, every one crossing parts): the parts are written anyway, but `tma train --partitions` refuses them (nothing to train on); use fewer --parts"
        );
        assert_eq!(prep.idle_trainers(), [0, 1]);
        let e = check_partitions("tiny", &prep.eval, Task::Link, &[0, 0]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no part holds a training edge (2 parts): nothing to train on; re-run `tma partition --out` with fewer --parts"
        );
        // one part with a training edge: the parts train
        assert!(check_partitions("tiny", &prep.eval, Task::Link, &[0, 1]).is_ok());
    }

    #[test]
    fn the_layout_does_not_check_the_metric_and_auto_falls_back_to_accuracy() {
        // regression (issue 29): ROC-AUC undefined on the validation nodes stopped `tma
        // partition --out` (which has no --metric) and `tma train` without --metric
        let ring: Vec<(u32, u32)> = (0..10).map(|v| (v, (v + 1) % 10)).collect();
        let two_classes = || {
            let mut ds = unlabelled(10, &ring);
            ds.labels = tma_graph::Labels::Classes {
                y: (0..10).map(|v| v % 2).collect(),
                num_classes: 2,
            };
            ds.split = Some(NodeSplit {
                train: vec![0, 2, 4, 5],
                val: vec![1, 3],
                test: vec![6, 7],
            });
            ds
        };
        let cfg = random_tma(Task::Node, 0);
        let layout = prepare_as(two_classes(), &cfg, Purpose::Layout).unwrap();
        assert_eq!(layout.metric, Metric::Auto);
        assert!(layout.warnings.is_empty(), "{:?}", layout.warnings);
        let run = prepare_as(two_classes(), &cfg, Purpose::Training).unwrap();
        assert_eq!(run.metric, Metric::Accuracy);
        assert_eq!(
            run.warnings,
            ["metric auto: the validation nodes hold only class 1 (2 labelled), so ROC-AUC (auto's metric for 2 classes) is undefined; accuracy selects the model instead"]
        );
        let roc = TrainConfig {
            metric: Metric::RocAuc,
            ..cfg
        };
        let e = prepare_as(two_classes(), &roc, Purpose::Training)
            .err()
            .unwrap();
        assert_eq!(
            e.to_string(),
            "invalid configuration: metric roc_auc: the validation nodes hold only class 1 (2 labelled), so ROC-AUC is undefined; use --metric accuracy"
        );
    }
}

#[cfg(test)]
mod link_examples_tests {
    use super::*;

    #[test]
    fn examples_read_in_place_are_the_listed_positive_edges() {
        // rows of in-neighbours; undirected: symmetric, with an isolated node and a full row
        let und = Csr::from_edges(
            6,
            &[0, 1, 0, 2, 1, 2, 3, 4, 0, 4],
            &[1, 0, 2, 0, 2, 1, 4, 3, 4, 0],
        );
        let dir = Csr::from_edges(5, &[0, 2, 4, 4, 1], &[1, 1, 0, 3, 3]);
        for (g, directed) in [(&und, false), (&dir, true)] {
            let list = positive_edges(g, directed);
            let ex = LinkExamples::of_graph(g, directed);
            assert_eq!(ex.len(g), list.len());
            for (i, &e) in list.iter().enumerate() {
                assert_eq!(ex.get(g, i), e, "positive {i}, directed {directed}");
            }
            assert_eq!(ex.to_vec(g), list);
        }
        assert_eq!(positive_edges(&und, false).len(), 5);
        // the counts are 4 bytes each below 2^32 positives; the 8-byte form reads the same
        let LinkExamples::Graph {
            before: Offsets::U32(b),
            ..
        } = LinkExamples::of_graph(&und, false)
        else {
            panic!("32-bit counts expected")
        };
        // rows 0..6 have 0, 1, 2, 0, 2, 0 in-neighbours below themselves
        assert_eq!(b, vec![0, 0, 1, 3, 3, 5, 5]);
        let wide = LinkExamples::Graph {
            directed: false,
            before: Offsets::U64(b.iter().map(|&c| c as u64).collect()),
        };
        assert_eq!(wide.to_vec(&und), positive_edges(&und, false));
        for i in 0..5 {
            assert_eq!(wide.get(&und, i), positive_edges(&und, false)[i]);
        }
    }
}
