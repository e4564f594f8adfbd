//! Partition directories: a prepared job (split + partition + per-trainer data) on disk, so
//! trainers on other hosts each load only their own part (`tma partition --out DIR`,
//! `tma train --partitions DIR`).
//!
//! # Layout (format version 2; version 1, read too, recorded `method` in place of `layout`)
//! ```text
//! DIR/
//!   manifest.json        format_version, dataset, task, layout, seed, num_parts, drop_parts,
//!                        super_nodes (K), the data options the split used, in_dim/out_dim,
//!                        per-part statistics, the partition report, and the sha256 of every
//!                        other file (relative path -> hex digest). Written last.
//!   coordinator/         what rank 0 evaluates on (never read by trainers)
//!     indptr.npy         u64 [N+1]   evaluation graph (link: training graph, held-out edges
//!     indices.npy        u32 [E]     removed; node: whole graph), row v = in-neighbours of v
//!     features           see below
//!     link: val_pos.npy, test_pos.npy  u32 [P,2];  val_neg.npy, test_neg.npy u32 [P*num_neg]
//!           val_neg_shared.npy, test_neg_shared.npy u32 [M,2]: negatives shared by every
//!           positive (a dataset's protocol, `link_protocol` of the manifest; OGB's edge_neg)
//!     node: y.npy (i32 [N] classes, -1 unlabelled | u8 [N,L] multi-label),
//!           train.npy, val.npy, test.npy  u32 node ids
//!   part-000/ ...        one folder per trainer (index t = folder number)
//!     indptr.npy, indices.npy   the part's node-induced subgraph, local ids
//!     global_ids.npy     u32 [n]     local -> global node id (global = coordinator graph ids)
//!     features           rows of the part's nodes, local order
//!     link: train_edges.npy  u32 [e,2] positive training edges (local ids)
//!     node: train_nodes.npy  u32 local training nodes; y.npy local targets
//! features: dense  -> features.npy f32 [n,d];
//!           sparse -> feat_indptr.npy u64 [n+1], feat_indices.npy u32 [nnz],
//!                     feat_data.npy f32 [nnz] (width d in the manifest)
//! ```
//! Every array is a little-endian NumPy `.npy` v1.0 file (written and read by the workspace's
//! codec, `tma_graph::npy`) whose header is padded to 64 bytes,
//! so the payload can be memory-mapped (`numpy.load(f, mmap_mode="r")`) and read from NumPy as
//! is. Reading maps them: a part's CSR and dense features ([`read_part`]) and the coordinator's
//! graph and dense features ([`read_coordinator`]) are read in place ([`tma_graph::Buf`] over
//! the mapped file, after the file's sha256 is checked by streaming it), so a trainer holds only
//! the pages of its part it touches, as reclaimable page cache. Writing ([`PartitionWriter`])
//! goes to a staging folder `.DIR.tmp` (each file streamed by [`crate::data::spill::write_npy`], its
//! sha256 computed while writing, fsync'd; manifest last) that is renamed to `DIR` at the end,
//! so `DIR` either holds a complete partition or does not exist. From a mapped graph (the
//! on-disk format) the parts are built one at a time and streamed into the staging folder as
//! they are built ([`PartitionWriter::spill`]): the same bytes as from memory.
//! Reading checks the format version and the sha256 of every file it opens against the
//! manifest; the manifest's own sha256 ([`Manifest`] `hash`) identifies the partition in
//! checkpoints.

pub mod checkpoint;
pub mod output;
pub mod tensorboard;

use crate::config::{Method, Task, TrainConfig};
use crate::data::{EvalData, LinkExamples, NodeTargets, Prepared, TrainTarget, TrainerData};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use tma_graph::npy::{self, Element};
use tma_graph::{Buf, Csr, Features, LinkSplit, NodeSplit};

/// The on-disk format version this code writes. It reads it and version 1, which recorded the
/// training method (`data.method`) instead of the layout (`data.layout`): read as that
/// method's layout ([`V1_METHOD_LAYOUTS`]).
pub const FORMAT_VERSION: u32 = 2;

pub use crate::error::StoreError;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn fmt_err(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::Format {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// The options that fixed the split and partition; a run on this directory uses them.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DataConfig {
    /// Task the split was made for.
    pub task: Task,
    /// The layout of the training examples over the trainers
    /// ([`crate::data::DataLayout::name`]: `random`, `super`, `metis`, `whole`,
    /// `shared-examples`, or a method's own); every method whose layout under these options
    /// has this name trains from the directory.
    pub layout: String,
    /// The method a version-1 directory recorded instead of a layout (its `method` key, read,
    /// never written): the method a run on it takes when the one asked for does not fit the
    /// layout, as that version did.
    #[serde(default, skip_serializing)]
    pub method: Option<Method>,
    /// Trainers (parts kept).
    pub num_trainers: usize,
    /// Parts dropped.
    pub drop_parts: usize,
    /// Super-nodes K (super-tma).
    pub super_nodes: usize,
    /// Seed of the split and partition.
    pub seed: u64,
    /// Validation fraction (link).
    pub val_frac: f64,
    /// Test fraction (link).
    pub test_frac: f64,
    /// Fixed negatives per evaluation positive (link).
    pub eval_num_neg: usize,
    /// Cap on evaluation positives (link).
    pub eval_max_edges: usize,
    /// Whether feature rows were scaled to sum 1.
    pub normalize_features: bool,
    /// Inputs of a featureless graph (absent from a directory written before the option:
    /// `degree-random`, what its parts hold).
    #[serde(default = "featureless_before_option")]
    pub featureless: crate::config::Featureless,
    /// Fixed split used (node).
    pub split_index: usize,
}

/// [`DataConfig::featureless`] of a directory written before the option.
fn featureless_before_option() -> crate::config::Featureless {
    crate::config::Featureless::DegreeRandom
}

impl DataConfig {
    /// The data options of `cfg`, laid out as the layout named `layout` over `num_trainers`
    /// trainers (a preparation's [`Prepared::layout`] and trainer count).
    pub fn of(cfg: &TrainConfig, layout: &str, num_trainers: usize) -> DataConfig {
        DataConfig {
            task: cfg.task,
            layout: layout.to_string(),
            method: None,
            num_trainers,
            drop_parts: cfg.drop_parts,
            super_nodes: cfg.super_nodes,
            seed: cfg.seed,
            val_frac: cfg.val_frac,
            test_frac: cfg.test_frac,
            eval_num_neg: cfg.eval_num_neg,
            eval_max_edges: cfg.eval_max_edges,
            normalize_features: cfg.normalize_features,
            featureless: cfg.featureless,
            split_index: cfg.split_index,
        }
    }

    /// Copies these options into `cfg` (the partition directory decides them), all but the
    /// method: `crate::methods::apply_partitions` also makes the method one that trains on
    /// the directory's layout.
    pub fn apply(&self, cfg: &mut TrainConfig) {
        cfg.task = self.task;
        cfg.num_trainers = self.num_trainers;
        cfg.drop_parts = self.drop_parts;
        cfg.super_nodes = self.super_nodes;
        cfg.seed = self.seed;
        cfg.val_frac = self.val_frac;
        cfg.test_frac = self.test_frac;
        cfg.eval_num_neg = self.eval_num_neg;
        cfg.eval_max_edges = self.eval_max_edges;
        cfg.normalize_features = self.normalize_features;
        cfg.featureless = self.featureless;
        cfg.split_index = self.split_index;
    }
}

/// The layout of each method a version-1 directory could record (that version knew these six
/// and recorded the method): `(method, layout)`.
pub const V1_METHOD_LAYOUTS: [(&str, &str); 6] = [
    ("random-tma", "random"),
    ("super-tma", "super"),
    ("psgd-pa", "metis"),
    ("llcg", "metis"),
    ("ggs", "shared-examples"),
    ("centralized", "whole"),
];

/// Statistics of one part, as recorded in the manifest.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PartEntry {
    /// Trainer index (= folder number).
    pub trainer: usize,
    /// Part id in the partition (`0..num_parts + drop_parts`).
    pub part: usize,
    /// Folder name relative to the partition directory, e.g. `part-000`.
    pub dir: String,
    /// Nodes of the part.
    pub num_nodes: usize,
    /// Arcs of the part.
    pub num_edges: usize,
    /// Training examples: positive edges (link) or labelled training nodes (node).
    pub num_train: usize,
    /// Bytes of the part's files on disk.
    pub size_bytes: u64,
}

/// `manifest.json` of a partition directory.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version of the directory.
    pub format_version: u32,
    /// Dataset name (`Dataset::name`).
    pub dataset: String,
    /// The data options it was made with.
    pub data: DataConfig,
    /// Model input width (feature dimension) and output width (classes / labels; hidden for link).
    pub in_dim: usize,
    /// Model output width (classes / labels; hidden for link).
    pub out_dim: usize,
    /// Whether the training graph is directed (link positives are then arcs, not pairs).
    pub directed: bool,
    /// `"dense"` or `"sparse"` features.
    pub features: String,
    /// `"link"`, `"classes"` or `"multilabel"` targets.
    pub targets: String,
    /// Nodes and arcs of the coordinator's evaluation graph.
    pub num_nodes: usize,
    /// Arcs of the coordinator's evaluation graph.
    pub num_edges: usize,
    /// sha256 of the partition assignment (`Partition::hash_hex`), None for centralized.
    pub assignment_sha256: Option<String>,
    /// Every kept part, by trainer index.
    pub parts: Vec<PartEntry>,
    /// Partition quality report (edges kept, label/degree divergence), if partitioned.
    pub report: Option<serde_json::Value>,
    /// sha256 (hex) of every other file, by path relative to the directory.
    pub files: BTreeMap<String, String>,
    /// The protocol of a link split a dataset gave (OGB link-property datasets,
    /// `tma_graph::LinkProtocol`); absent otherwise, and in directories written before it
    /// existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_protocol: Option<StoredProtocol>,
    /// Whether the features are generated structural ones (the graph had none: the
    /// automatic `--exclude-targets` follows it); absent in directories written before it was
    /// recorded (the run says so when that matters).
    #[serde(default)]
    pub structural_features: Option<bool>,
    /// Every line preparing the data said (the partition report's, what the loader removed,
    /// the split's notes, the input `--featureless auto` chose), so that a run from the
    /// directory says and records them too; absent in directories written before it was
    /// recorded (the partition report's warnings are then the ones repeated).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// sha256 of `manifest.json` itself (not stored in the file; filled in when read/written).
    #[serde(skip)]
    pub hash: String,
}

use crate::data::spill::hex;

/// A dataset's link protocol as a partition directory records it (`Manifest::link_protocol`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct StoredProtocol {
    /// The dataset (`ogbl-collab`).
    pub dataset: String,
    /// The Hits@K it reports; `None`: MRR.
    pub hits_k: Option<usize>,
    /// Whether its negatives are shared by every positive: then in
    /// `coordinator/{val,test}_neg_shared.npy` (u32 `[M, 2]`), and `coordinator/val_neg.npy` /
    /// `test_neg.npy` are empty.
    pub shared: bool,
}

/// Writes files into a staging directory, recording their hashes.
struct Writer {
    root: PathBuf,
    files: BTreeMap<String, String>,
    sizes: BTreeMap<String, u64>,
    /// Files already in the staging directory, written by the spill of the parts
    /// ([`crate::data::spill::Spill::kept`]): recorded, not written again.
    spilled: BTreeMap<String, crate::data::spill::Written>,
}

impl Writer {
    fn record(&mut self, rel: &str, w: &crate::data::spill::Written) {
        self.files.insert(rel.to_string(), w.sha256.clone());
        self.sizes.insert(rel.to_string(), w.bytes);
    }
    /// A small file written whole (the manifest).
    fn file(&mut self, rel: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let path = self.root.join(rel);
        tma_graph::durable::write(&path, bytes)?;
        self.record(
            rel,
            &crate::data::spill::Written {
                sha256: hex(&Sha256::digest(bytes)),
                bytes: bytes.len() as u64,
            },
        );
        Ok(())
    }
    /// An array, streamed to its `.npy` file ([`crate::data::spill::write_npy`]: the bytes of
    /// [`npy::encode`], never encoded whole in memory), unless the spill already wrote it.
    fn npy<T: Element>(
        &mut self,
        rel: &str,
        data: &[T],
        shape: &[usize],
    ) -> Result<(), StoreError> {
        if let Some(w) = self.spilled.get(rel).cloned() {
            self.record(rel, &w);
            return Ok(());
        }
        let path = self.root.join(rel);
        if let Some(parent) = path.parent() {
            // never the root itself: a Ctrl-C handler may have removed it
            crate::data::spill::create_dir_below(&self.root, parent).map_err(io(parent))?;
        }
        let w = crate::data::spill::write_array(&path, data, shape)?;
        self.record(rel, &w);
        Ok(())
    }
    fn csr(&mut self, dir: &str, g: &Csr) -> Result<(), StoreError> {
        self.npy(&format!("{dir}/indptr.npy"), &g.indptr, &[g.indptr.len()])?;
        self.npy(
            &format!("{dir}/indices.npy"),
            &g.indices,
            &[g.indices.len()],
        )
    }
    fn features(&mut self, dir: &str, f: &Features) -> Result<(), StoreError> {
        match f {
            Features::Dense {
                num_nodes,
                dim,
                data,
            } => self.npy(&format!("{dir}/features.npy"), data, &[*num_nodes, *dim]),
            Features::Sparse {
                indptr,
                indices,
                data,
                ..
            } => {
                self.npy(&format!("{dir}/feat_indptr.npy"), indptr, &[indptr.len()])?;
                self.npy(
                    &format!("{dir}/feat_indices.npy"),
                    indices,
                    &[indices.len()],
                )?;
                self.npy(&format!("{dir}/feat_data.npy"), data, &[data.len()])
            }
        }
    }
    /// Pairs as a `u32 [P, 2]` array, streamed.
    fn pairs(&mut self, rel: &str, p: &[(u32, u32)]) -> Result<(), StoreError> {
        let path = self.root.join(rel);
        if let Some(parent) = path.parent() {
            // never the root itself: a Ctrl-C handler may have removed it
            crate::data::spill::create_dir_below(&self.root, parent).map_err(io(parent))?;
        }
        let w = crate::data::spill::write_npy(&path, u32::DESCR, &[p.len(), 2], |w| {
            for c in p.chunks(1 << 15) {
                let flat: Vec<u32> = c.iter().flat_map(|&(a, b)| [a, b]).collect();
                crate::data::spill::write_le(w, &flat)?;
            }
            Ok(())
        })?;
        self.record(rel, &w);
        Ok(())
    }
    /// A part's positives as a `u32 [P, 2]` array, streamed: a [`LinkExamples::Graph`] is
    /// enumerated row by row from the part's graph, never made a list (the `whole` layout of a
    /// 1.29B-arc graph made a 5.2 GB one).
    fn link_examples(
        &mut self,
        rel: &str,
        edges: &LinkExamples,
        graph: &Csr,
    ) -> Result<(), StoreError> {
        let directed = match edges {
            LinkExamples::List(p) => return self.pairs(rel, p),
            LinkExamples::Graph { directed, .. } => *directed,
        };
        let path = self.root.join(rel);
        if let Some(parent) = path.parent() {
            crate::data::spill::create_dir_below(&self.root, parent).map_err(io(parent))?;
        }
        let len = edges.len(graph);
        let w = crate::data::spill::write_npy(&path, u32::DESCR, &[len, 2], |w| {
            let mut flat: Vec<u32> = Vec::with_capacity(1 << 16);
            for (u, v) in crate::data::positive_edges_iter(graph, directed) {
                flat.extend([u, v]);
                if flat.len() >= 1 << 16 {
                    crate::data::spill::write_le(w, &flat)?;
                    flat.clear();
                }
            }
            crate::data::spill::write_le(w, &flat)
        })?;
        self.record(rel, &w);
        Ok(())
    }
    fn targets(&mut self, rel: &str, t: &NodeTargets) -> Result<(), StoreError> {
        match t {
            NodeTargets::Classes { y, .. } => self.npy(rel, y, &[y.len()]),
            NodeTargets::MultiLabel { y, num_labels } => {
                self.npy(rel, y, &[y.len() / num_labels.max(&1), *num_labels])
            }
        }
    }
}

/// Writes `prep` (from [`crate::prepare`] with `cfg`) as a partition directory at `dir`
/// ([`PartitionWriter::create`] then [`PartitionWriter::finish`]).
///
/// # Errors
/// [`StoreError::Exists`] if `dir` holds files; [`StoreError::Io`] naming the file that could
/// not be written.
pub fn write_partition_dir(
    dir: &Path,
    prep: &Prepared,
    cfg: &TrainConfig,
    dataset: &str,
    directed: bool,
) -> Result<Manifest, StoreError> {
    PartitionWriter::create(dir)?.finish(prep, cfg, dataset, directed, None)
}

/// A partition directory being written: created (and `--out` checked) before the data is
/// prepared, so that the parts can be streamed into its staging folder while they are built
/// ([`PartitionWriter::spill`], for a mapped graph) and a bad `--out` is refused before any
/// work. [`PartitionWriter::finish`] writes the rest and renames the staging folder to the
/// directory; dropped unfinished (an error on the way), it removes the staging folder.
#[derive(Debug)]
pub struct PartitionWriter {
    dir: PathBuf,
    staging: PathBuf,
    done: bool,
    /// A staging folder left by an interrupted run, removed by [`PartitionWriter::create`].
    removed_stale: bool,
    /// Set from outside (a Ctrl-C handler): [`PartitionWriter::finish`] then refuses to rename
    /// the staging folder into place.
    abort: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl PartitionWriter {
    /// Checks `dir` (absent, or an empty directory; a name with a parent folder) and creates
    /// its staging folder `.NAME.tmp` beside it (a stale one from a killed run is removed).
    ///
    /// # Errors
    /// [`StoreError::Exists`] if `dir` holds files, [`StoreError::Format`] if `dir` is not a
    /// directory or has no file name, [`StoreError::Io`] naming the folder that could not be
    /// created.
    pub fn create(dir: &Path) -> Result<PartitionWriter, StoreError> {
        let name = dir
            .file_name()
            .filter(|n| *n != "." && *n != "..")
            .ok_or_else(|| {
                fmt_err(
                    dir,
                    "not a directory name (give the partition directory's own name, e.g. parts/)",
                )
            })?
            .to_string_lossy()
            .to_string();
        if dir.exists() {
            if !dir.is_dir() {
                return Err(fmt_err(dir, "exists and is not a directory"));
            }
            let non_empty = fs::read_dir(dir).map_err(io(dir))?.next().is_some();
            if non_empty {
                return Err(StoreError::Exists(dir.to_path_buf()));
            }
        }
        let staging = dir.with_file_name(format!(".{name}.tmp"));
        let removed_stale = staging.exists();
        if removed_stale {
            fs::remove_dir_all(&staging).map_err(io(&staging))?;
        }
        fs::create_dir_all(&staging).map_err(io(&staging))?;
        Ok(PartitionWriter {
            dir: dir.to_path_buf(),
            staging,
            done: false,
            removed_stale,
            abort: Default::default(),
        })
    }

    /// Whether [`PartitionWriter::create`] removed a staging folder that a killed run had
    /// left (the caller says so: nothing of the user's is dropped without a word).
    pub fn removed_stale_staging(&self) -> bool {
        self.removed_stale
    }

    /// A flag that, once set, makes [`PartitionWriter::finish`] fail (an `Interrupted` I/O
    /// error naming the directory) instead of renaming the staging folder into place: the last
    /// check before the rename, so that an interrupted run never leaves a partial directory.
    pub fn abort_flag(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        self.abort.clone()
    }

    /// The staging folder the files go to until [`PartitionWriter::finish`].
    pub fn staging(&self) -> &Path {
        &self.staging
    }

    /// A [`Spill`](crate::data::spill::Spill) that streams the parts into the staging folder and
    /// keeps them there, for [`crate::data::prepare_spilled`]; pass it back to
    /// [`PartitionWriter::finish`].
    pub fn spill(&self) -> crate::data::spill::Spill {
        crate::data::spill::Spill::kept(&self.staging).root_exists()
    }

    /// Writes `prep` (prepared with `cfg`; its parts spilled by `spilled` if given) into the
    /// staging folder (what `spilled` wrote is recorded, not written again), the manifest
    /// last, and renames the staging folder to the directory.
    ///
    /// # Errors
    /// [`StoreError::Io`] naming the file that could not be written, [`StoreError::Exists`] if
    /// the directory was filled meanwhile.
    pub fn finish(
        mut self,
        prep: &Prepared,
        cfg: &TrainConfig,
        dataset: &str,
        directed: bool,
        spilled: Option<&crate::data::spill::Spill>,
    ) -> Result<Manifest, StoreError> {
        let m = write_into(
            &self.staging,
            prep,
            cfg,
            dataset,
            directed,
            spilled.map(|s| s.written()).unwrap_or_default(),
        )?;
        let dir = &self.dir;
        if dir.exists() {
            fs::remove_dir(dir).map_err(|e| {
                if e.kind() == std::io::ErrorKind::DirectoryNotEmpty {
                    StoreError::Exists(dir.clone())
                } else {
                    io(dir)(e)
                }
            })?;
        }
        if self.abort.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(io(dir)(std::io::ErrorKind::Interrupted.into()));
        }
        // durably: the parts' files were fsync'd as written; the rename and both folders now
        tma_graph::durable::rename(&self.staging, dir).map_err(|e| match e {
            tma_graph::GraphError::Io { path, source } => io(&path)(source),
            other => io(dir)(std::io::Error::other(other.to_string())),
        })?;
        self.done = true;
        Ok(m)
    }
}

impl Drop for PartitionWriter {
    fn drop(&mut self) {
        if !self.done {
            let _ = fs::remove_dir_all(&self.staging);
        }
    }
}

fn write_into(
    staging: &Path,
    prep: &Prepared,
    cfg: &TrainConfig,
    dataset: &str,
    directed: bool,
    spilled: BTreeMap<String, crate::data::spill::Written>,
) -> Result<Manifest, StoreError> {
    let mut w = Writer {
        root: staging.to_path_buf(),
        files: BTreeMap::new(),
        sizes: BTreeMap::new(),
        spilled,
    };
    w.csr("coordinator", &prep.graph)?;
    w.features("coordinator", &prep.features)?;
    let targets = match &prep.eval {
        EvalData::Link { split } => {
            if let Some(sh) = split.protocol.as_ref().and_then(|p| p.shared.as_ref()) {
                w.pairs("coordinator/val_neg_shared.npy", &sh.val)?;
                w.pairs("coordinator/test_neg_shared.npy", &sh.test)?;
            }
            w.pairs("coordinator/val_pos.npy", &split.val_pos)?;
            w.pairs("coordinator/test_pos.npy", &split.test_pos)?;
            w.npy(
                "coordinator/val_neg.npy",
                &split.val_neg,
                &[split.val_neg.len()],
            )?;
            w.npy(
                "coordinator/test_neg.npy",
                &split.test_neg,
                &[split.test_neg.len()],
            )?;
            "link"
        }
        EvalData::Node { split, targets } => {
            w.targets("coordinator/y.npy", targets)?;
            for (n, v) in [
                ("train", &split.train),
                ("val", &split.val),
                ("test", &split.test),
            ] {
                w.npy(&format!("coordinator/{n}.npy"), v, &[v.len()])?;
            }
            match targets {
                NodeTargets::Classes { .. } => "classes",
                NodeTargets::MultiLabel { .. } => "multilabel",
            }
        }
    };
    let mut parts = Vec::with_capacity(prep.trainers.len());
    for t in &prep.trainers {
        let d = format!("part-{:03}", t.trainer);
        w.csr(&d, &t.graph)?;
        w.npy(
            &format!("{d}/global_ids.npy"),
            &t.global_ids,
            &[t.global_ids.len()],
        )?;
        w.features(&d, &t.features)?;
        let num_train = match &t.target {
            TrainTarget::Link { edges } => {
                w.link_examples(&format!("{d}/train_edges.npy"), edges, &t.graph)?;
                edges.len(&t.graph)
            }
            TrainTarget::Node { nodes, targets } => {
                w.npy(&format!("{d}/train_nodes.npy"), nodes, &[nodes.len()])?;
                w.targets(&format!("{d}/y.npy"), targets)?;
                nodes.len()
            }
        };
        let prefix = format!("{d}/");
        let size_bytes = w
            .sizes
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(_, v)| v)
            .sum();
        parts.push(PartEntry {
            trainer: t.trainer,
            part: t.part,
            dir: d,
            num_nodes: t.num_nodes(),
            num_edges: t.num_edges(),
            num_train,
            size_bytes,
        });
    }
    let mut data = DataConfig::of(cfg, &prep.layout, prep.trainers.len());
    let mut link_protocol = None;
    if let EvalData::Link { split } = &prep.eval {
        // a split stored with the graph brings its own number of negatives (shared ones have
        // none per positive: the option stays as given, it does not apply)
        if split.num_neg > 0 {
            data.eval_num_neg = split.num_neg;
        }
        link_protocol = split.protocol.as_ref().map(|p| StoredProtocol {
            dataset: p.dataset.clone(),
            hits_k: p.hits_k,
            shared: p.shared.is_some(),
        });
    }
    let mut m = Manifest {
        format_version: FORMAT_VERSION,
        dataset: dataset.to_string(),
        data,
        in_dim: prep.in_dim,
        out_dim: prep.out_dim,
        directed,
        features: match prep.features {
            Features::Dense { .. } => "dense".into(),
            Features::Sparse { .. } => "sparse".into(),
        },
        targets: targets.into(),
        num_nodes: prep.graph.num_nodes(),
        num_edges: prep.graph.num_edges(),
        assignment_sha256: prep.partition_hash.clone(),
        parts,
        report: prep
            .report
            .as_ref()
            .map(|r| serde_json::to_value(r).expect("report serializes")),
        files: w.files.clone(),
        link_protocol,
        structural_features: prep.structural_features,
        warnings: prep.warnings.clone(),
        hash: String::new(),
    };
    let json = serde_json::to_vec_pretty(&m).expect("manifest serializes");
    w.file("manifest.json", &json)?;
    m.hash = hex(&Sha256::digest(&json));
    Ok(m)
}

/// Reads and checks `DIR/manifest.json` (format version, structure).
///
/// # Errors
/// [`StoreError::Io`] if missing, [`StoreError::Version`] for another format version,
/// [`StoreError::Format`] for invalid JSON or missing fields.
pub fn read_manifest(dir: &Path) -> Result<Manifest, StoreError> {
    let path = dir.join("manifest.json");
    let bytes = fs::read(&path).map_err(io(&path))?;
    let mut v: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| fmt_err(&path, format!("not valid JSON: {e}")))?;
    match v.get("format_version") {
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(FORMAT_VERSION as u64) => {}
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(1) => {
            // version 1 recorded the method: its layout is the method's
            let method = v["data"]["method"].as_str().unwrap_or_default().to_string();
            let Some((_, layout)) = V1_METHOD_LAYOUTS.iter().find(|(m, _)| *m == method) else {
                return Err(fmt_err(
                    &path,
                    format!("invalid manifest: data.method {method:?} is not a method of format version 1"),
                ));
            };
            v["data"]["layout"] = (*layout).into();
        }
        other => {
            return Err(StoreError::Version {
                path,
                found: other.map_or("(missing)".into(), |x| x.to_string()),
                supported: FORMAT_VERSION,
            })
        }
    }
    let mut m: Manifest =
        serde_json::from_value(v).map_err(|e| fmt_err(&path, format!("invalid manifest: {e}")))?;
    m.hash = hex(&Sha256::digest(&bytes));
    for (i, p) in m.parts.iter().enumerate() {
        if p.trainer != i || p.dir != format!("part-{i:03}") {
            return Err(fmt_err(
                &path,
                format!(
                    "parts[{i}] is trainer {} in {}, expected part-{i:03}",
                    p.trainer, p.dir
                ),
            ));
        }
    }
    Ok(m)
}

/// Reads files of one partition directory, checking each against the manifest's hash.
struct Reader<'a> {
    dir: &'a Path,
    m: &'a Manifest,
}

impl Reader<'_> {
    fn expected_hash(&self, rel: &str) -> Result<&String, StoreError> {
        self.m.files.get(rel).ok_or_else(|| {
            fmt_err(
                &self.dir.join("manifest.json"),
                format!("lists no hash for {rel}"),
            )
        })
    }
    fn bytes(&self, rel: &str) -> Result<Vec<u8>, StoreError> {
        let path = self.dir.join(rel);
        let expected = self.expected_hash(rel)?;
        let bytes = fs::read(&path).map_err(io(&path))?;
        let found = hex(&Sha256::digest(&bytes));
        if &found != expected {
            return Err(StoreError::HashMismatch {
                path,
                expected: expected.clone(),
                found,
            });
        }
        Ok(bytes)
    }
    /// Checks `rel`'s sha256 by streaming it through a small buffer (plain reads: the pages
    /// stay page cache, not this process's memory), then maps its payload.
    fn map<T: Element + tma_graph::Pod>(
        &self,
        rel: &str,
        ndim: usize,
    ) -> Result<(Buf<T>, Vec<usize>), StoreError> {
        use std::io::Read;
        let path = self.dir.join(rel);
        let expected = self.expected_hash(rel)?;
        let mut f = fs::File::open(&path).map_err(io(&path))?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let k = f.read(&mut buf).map_err(io(&path))?;
            if k == 0 {
                break;
            }
            h.update(&buf[..k]);
        }
        let found = hex(&h.finalize());
        if &found != expected {
            return Err(StoreError::HashMismatch {
                path,
                expected: expected.clone(),
                found,
            });
        }
        Ok(npy::map::<T>(&path, &vec![None; ndim])?)
    }
    /// The array `rel` (C order), with `ndim` dimensions of any size.
    fn npy<T: Element>(&self, rel: &str, ndim: usize) -> Result<(Vec<T>, Vec<usize>), StoreError> {
        let b = self.bytes(rel)?;
        let a = npy::decode::<T>(&self.dir.join(rel), b, &vec![None; ndim])?;
        Ok((a.data, a.shape))
    }
    fn vec<T: Element>(&self, rel: &str) -> Result<Vec<T>, StoreError> {
        Ok(self.npy(rel, 1)?.0)
    }
    /// The CSR of folder `d`, mapped in place (its structure is checked in one pass).
    fn csr(&self, d: &str) -> Result<Csr, StoreError> {
        let indptr: Buf<u64> = self.map(&format!("{d}/indptr.npy"), 1)?.0;
        let indices: Buf<u32> = self.map(&format!("{d}/indices.npy"), 1)?.0;
        let n = indptr.len().saturating_sub(1);
        let ok = !indptr.is_empty()
            && indptr[0] == 0
            && indptr.windows(2).all(|w| w[0] <= w[1])
            && *indptr.last().unwrap() as usize == indices.len()
            && indices.iter().all(|&i| (i as usize) < n);
        if !ok {
            return Err(fmt_err(
                &self.dir.join(d),
                "indptr/indices do not form a valid CSR graph",
            ));
        }
        Ok(Csr { indptr, indices })
    }
    fn features(&self, d: &str, num_nodes: usize) -> Result<Features, StoreError> {
        let dim = self.m.in_dim;
        let f = if self.m.features == "dense" {
            let (data, shape) = self.map::<f32>(&format!("{d}/features.npy"), 2)?;
            if shape != [num_nodes, dim] {
                return Err(fmt_err(
                    &self.dir.join(d).join("features.npy"),
                    format!("shape {shape:?}, expected [{num_nodes}, {dim}]"),
                ));
            }
            Features::Dense {
                num_nodes,
                dim,
                data,
            }
        } else {
            let indptr: Vec<u64> = self.vec(&format!("{d}/feat_indptr.npy"))?;
            let indices: Vec<u32> = self.vec(&format!("{d}/feat_indices.npy"))?;
            let data: Vec<f32> = self.vec(&format!("{d}/feat_data.npy"))?;
            let ok = indptr.len() == num_nodes + 1
                && indptr[0] == 0
                && indptr.windows(2).all(|w| w[0] <= w[1])
                && indptr[num_nodes] as usize == indices.len()
                && indices.len() == data.len()
                && indices.iter().all(|&c| (c as usize) < dim);
            if !ok {
                return Err(fmt_err(
                    &self.dir.join(d).join("feat_indptr.npy"),
                    "sparse features are inconsistent",
                ));
            }
            Features::Sparse {
                num_nodes,
                dim,
                indptr,
                indices,
                data,
            }
        };
        Ok(f)
    }
    /// A part's positive training edges (`u32 [P, 2]`, local ids < the part's nodes). The
    /// file is mapped and compared in one pass with the part graph's own edges in CSR order
    /// ([`crate::data::positive_edges`]): when it lists exactly those (every layout's parts
    /// but `shared-examples`'), they are read as [`LinkExamples::Graph`], which keeps no list
    /// (4 bytes a node against 8 a positive); otherwise as the list. Read whole into memory,
    /// as before 2026-12-07, the `whole` layout's list of a 1.29B-arc graph took 5.2 GB for
    /// the run and three times that while loading (the file's bytes, the decoded array, the
    /// pairs), and centralized training on the MAG-like graph of docs/results-scale.md
    /// thrashed the page cache.
    fn link_examples(
        &self,
        rel: &str,
        graph: &Csr,
        directed: bool,
    ) -> Result<LinkExamples, StoreError> {
        let (flat, shape) = self.map::<u32>(rel, 2)?;
        let n = graph.num_nodes();
        let bad = || {
            fmt_err(
                &self.dir.join(rel),
                format!("expected [P, 2] node ids < {n}"),
            )
        };
        if shape[1] != 2 {
            return Err(bad());
        }
        let same = flat
            .chunks_exact(2)
            .map(|c| (c[0], c[1]))
            .eq(crate::data::positive_edges_iter(graph, directed));
        if same {
            return Ok(LinkExamples::of_graph(graph, directed));
        }
        if flat.iter().any(|&v| v as usize >= n) {
            return Err(bad());
        }
        Ok(LinkExamples::List(
            flat.chunks_exact(2).map(|c| (c[0], c[1])).collect(),
        ))
    }
    fn pairs(&self, rel: &str, bound: usize) -> Result<Vec<(u32, u32)>, StoreError> {
        let (flat, shape) = self.npy::<u32>(rel, 2)?;
        if shape[1] != 2 || flat.iter().any(|&v| v as usize >= bound) {
            return Err(fmt_err(
                &self.dir.join(rel),
                format!("expected [P, 2] node ids < {bound}"),
            ));
        }
        Ok(flat.chunks_exact(2).map(|c| (c[0], c[1])).collect())
    }
    fn ids(&self, rel: &str, bound: usize) -> Result<Vec<u32>, StoreError> {
        let v: Vec<u32> = self.vec(rel)?;
        if v.iter().any(|&x| x as usize >= bound) {
            return Err(fmt_err(&self.dir.join(rel), format!("node id >= {bound}")));
        }
        Ok(v)
    }
    fn targets(&self, rel: &str, n: usize) -> Result<NodeTargets, StoreError> {
        let path = self.dir.join(rel);
        if self.m.targets == "classes" {
            let y: Vec<i32> = self.vec(rel)?;
            if y.len() != n
                || y.iter()
                    .any(|&c| c < -1 || c as i64 >= self.m.out_dim as i64)
            {
                return Err(fmt_err(
                    &path,
                    format!("expected {n} classes in -1..{}", self.m.out_dim),
                ));
            }
            Ok(NodeTargets::Classes {
                y,
                num_classes: self.m.out_dim,
            })
        } else {
            let (y, shape) = self.npy::<u8>(rel, 2)?;
            if shape != [n, self.m.out_dim] {
                return Err(fmt_err(
                    &path,
                    format!("shape {shape:?}, expected [{n}, {}]", self.m.out_dim),
                ));
            }
            Ok(NodeTargets::MultiLabel {
                y,
                num_labels: self.m.out_dim,
            })
        }
    }
}

/// Loads trainer `t`'s part (and nothing else) from a partition directory.
///
/// # Errors
/// [`StoreError::Format`] if `t` is not a part of the directory or a file is malformed,
/// [`StoreError::HashMismatch`] / [`StoreError::Io`] naming the file.
pub fn read_part(dir: &Path, m: &Manifest, t: usize) -> Result<TrainerData, StoreError> {
    let entry = m.parts.get(t).ok_or_else(|| {
        fmt_err(
            &dir.join("manifest.json"),
            format!("has {} parts, trainer {t} has none", m.parts.len()),
        )
    })?;
    let r = Reader { dir, m };
    let d = &entry.dir;
    let graph = r.csr(d)?;
    let n = graph.num_nodes();
    let global_ids = r.ids(&format!("{d}/global_ids.npy"), m.num_nodes)?;
    if global_ids.len() != n {
        return Err(fmt_err(
            &dir.join(d).join("global_ids.npy"),
            format!("{} ids for {n} nodes", global_ids.len()),
        ));
    }
    let features = r.features(d, n)?;
    let target = if m.targets == "link" {
        TrainTarget::Link {
            edges: r.link_examples(&format!("{d}/train_edges.npy"), &graph, m.directed)?,
        }
    } else {
        TrainTarget::Node {
            nodes: r.ids(&format!("{d}/train_nodes.npy"), n)?,
            targets: r.targets(&format!("{d}/y.npy"), n)?,
        }
    };
    Ok(TrainerData {
        trainer: t,
        part: entry.part,
        degrees: graph.degrees(),
        graph,
        features,
        target,
        global_ids,
    })
}

/// Loads the coordinator's evaluation data; `trainers` is left empty (use [`read_part`]).
///
/// # Errors
/// As [`read_part`].
pub fn read_coordinator(dir: &Path, m: &Manifest) -> Result<Prepared, StoreError> {
    let r = Reader { dir, m };
    let graph = r.csr("coordinator")?;
    let n = graph.num_nodes();
    let features = r.features("coordinator", n)?;
    let eval = if m.targets == "link" {
        let val_pos = r.pairs("coordinator/val_pos.npy", n)?;
        let test_pos = r.pairs("coordinator/test_pos.npy", n)?;
        let val_neg = r.ids("coordinator/val_neg.npy", n)?;
        let test_neg = r.ids("coordinator/test_neg.npy", n)?;
        let shared = m.link_protocol.as_ref().is_some_and(|p| p.shared);
        let k = if shared { 0 } else { m.data.eval_num_neg };
        let protocol = match &m.link_protocol {
            None => None,
            Some(p) => Some(Box::new(tma_graph::LinkProtocol {
                dataset: p.dataset.clone(),
                hits_k: p.hits_k,
                shared: if p.shared {
                    Some(tma_graph::SharedNegatives {
                        val: r.pairs("coordinator/val_neg_shared.npy", n)?,
                        test: r.pairs("coordinator/test_neg_shared.npy", n)?,
                    })
                } else {
                    None
                },
            })),
        };
        if val_neg.len() != val_pos.len() * k || test_neg.len() != test_pos.len() * k {
            return Err(fmt_err(
                &dir.join("coordinator/val_neg.npy"),
                format!("expected {k} negatives per positive"),
            ));
        }
        EvalData::Link {
            split: LinkSplit {
                // the coordinator evaluates on `Prepared::graph`; the split's own copy of the
                // training graph and its training edges are trainer data, not loaded here
                train_graph: Csr {
                    indptr: vec![0].into(),
                    indices: Vec::new().into(),
                },
                train_edges: Vec::new(),
                val_pos,
                test_pos,
                val_neg: val_neg.into(),
                test_neg: test_neg.into(),
                num_neg: k,
                directed: m.directed,
                notes: Default::default(),
                protocol,
            },
        }
    } else {
        EvalData::Node {
            targets: r.targets("coordinator/y.npy", n)?,
            split: NodeSplit {
                train: r.ids("coordinator/train.npy", n)?,
                val: r.ids("coordinator/val.npy", n)?,
                test: r.ids("coordinator/test.npy", n)?,
            },
        }
    };
    Ok(Prepared {
        layout: m.data.layout.clone(),
        degrees: graph.degrees(),
        graph,
        features,
        eval,
        trainers: Vec::new(),
        report: None,
        partition_hash: m.assignment_sha256.clone(),
        in_dim: m.in_dim,
        out_dim: m.out_dim,
        structural_features: m.structural_features,
        // the parts hold the input chosen when they were written: the degree column (and a
        // constant one) or the 32 structural columns
        structural_input: match m.structural_features {
            Some(true) if m.in_dim <= 2 => Some(crate::config::Featureless::Degree),
            Some(true) => Some(crate::config::Featureless::DegreeRandom),
            _ => None,
        },
        part_train_examples: m.parts.iter().map(|p| p.num_train).collect(),
        // what `tma partition --out` said when it prepared the data (directories written
        // before the manifest recorded it: its partition report's warnings)
        warnings: if m.warnings.is_empty() {
            m.report
                .as_ref()
                .and_then(|r| r.get("warnings"))
                .and_then(|w| serde_json::from_value(w.clone()).ok())
                .unwrap_or_default()
        } else {
            m.warnings.clone()
        },
        removed: Default::default(),
        // set from the run's configuration by `Run::prepare`
        metric: Default::default(),
        // set from the run's configuration by `Run::prepare`
        val_subset: None,
    })
}

/// Loads everything (coordinator data and every part): the in-process engine on a partition
/// directory.
///
/// # Errors
/// As [`read_part`].
pub fn read_all(dir: &Path, m: &Manifest) -> Result<Prepared, StoreError> {
    let mut p = read_coordinator(dir, m)?;
    p.trainers = (0..m.parts.len())
        .map(|t| read_part(dir, m, t))
        .collect::<Result<_, _>>()?;
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tma_graph::{generate_sbm, SbmConfig};

    fn prep(task: Task) -> (TrainConfig, Prepared) {
        let cfg = TrainConfig {
            task,
            num_trainers: 3,
            eval_num_neg: 20,
            eval_max_edges: 50,
            ..TrainConfig::default()
        };
        let ds = generate_sbm(&SbmConfig {
            num_nodes: 600,
            feature_dim: 8,
            seed: 3,
            ..SbmConfig::default()
        });
        let p = crate::prepare(ds, &cfg).unwrap();
        (cfg, p)
    }

    fn same_part(a: &TrainerData, b: &TrainerData) {
        assert_eq!(a.graph, b.graph);
        assert_eq!(a.degrees, b.degrees);
        assert_eq!(a.features, b.features);
        assert_eq!(a.global_ids, b.global_ids);
        assert_eq!((a.trainer, a.part), (b.trainer, b.part));
        match (&a.target, &b.target) {
            (TrainTarget::Link { edges: x }, TrainTarget::Link { edges: y }) => {
                assert_eq!(x.to_vec(&a.graph), y.to_vec(&b.graph))
            }
            (
                TrainTarget::Node {
                    nodes: x,
                    targets:
                        NodeTargets::Classes {
                            y: yx,
                            num_classes: cx,
                        },
                },
                TrainTarget::Node {
                    nodes: y,
                    targets:
                        NodeTargets::Classes {
                            y: yy,
                            num_classes: cy,
                        },
                },
            ) => {
                assert_eq!((x, yx, cx), (y, yy, cy));
            }
            _ => panic!("targets differ in kind"),
        }
    }

    #[test]
    fn a_parts_positives_are_read_as_its_graph_or_else_as_the_list() {
        let (cfg, mut p) = prep(Task::Link);
        let tmp = tempfile::tempdir().unwrap();
        // a random layout's parts train on their graph's own edges: read without a list
        let dir = tmp.path().join("graph");
        write_partition_dir(&dir, &p, &cfg, "sbm", false).unwrap();
        let m = read_manifest(&dir).unwrap();
        for t in 0..3 {
            let d = read_part(&dir, &m, t).unwrap();
            let TrainTarget::Link { edges } = &d.target else {
                panic!("a link part")
            };
            assert!(matches!(
                edges,
                LinkExamples::Graph {
                    directed: false,
                    ..
                }
            ));
            let want = crate::data::positive_edges(&d.graph, false);
            assert!(want.len() > 100, "{}", want.len());
            assert_eq!(edges.to_vec(&d.graph), want);
            assert_eq!(m.parts[t].num_train, want.len());
        }
        // another list (here the same edges reversed, as a shared-examples part's own list):
        // read back as that list, in its order
        let TrainTarget::Link { edges } = &p.trainers[0].target else {
            panic!("a link part")
        };
        let mut list = edges.to_vec(&p.trainers[0].graph);
        list.reverse();
        p.trainers[0].target = TrainTarget::Link {
            edges: LinkExamples::List(list.clone()),
        };
        let dir = tmp.path().join("list");
        write_partition_dir(&dir, &p, &cfg, "sbm", false).unwrap();
        let d = read_part(&dir, &read_manifest(&dir).unwrap(), 0).unwrap();
        let TrainTarget::Link { edges } = d.target else {
            panic!("a link part")
        };
        assert_eq!(edges, LinkExamples::List(list), "the list, not the graph");
    }

    #[test]
    fn roundtrip_node_and_link() {
        for task in [Task::Node, Task::Link] {
            let (cfg, p) = prep(task);
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("parts");
            let m = write_partition_dir(&dir, &p, &cfg, "sbm", false).unwrap();
            assert!(!tmp.path().join(".parts.tmp").exists());
            let m2 = read_manifest(&dir).unwrap();
            assert_eq!(m.hash, m2.hash);
            assert_eq!(m2.hash.len(), 64);
            assert_eq!(m2.data, DataConfig::of(&cfg, "random", 3));
            assert_eq!(m2.data.layout, "random");
            assert_eq!(m2.parts.len(), 3);
            for t in 0..3 {
                let d = read_part(&dir, &m2, t).unwrap();
                same_part(&d, &p.trainers[t]);
                // the part's graph and features are the files, mapped (no heap copy)
                assert!(d.graph.indptr.is_mapped() && d.graph.indices.is_mapped());
                assert!(d.features.is_mapped());
                assert_eq!(d.graph.heap_bytes() + d.features.heap_bytes(), 0);
                assert_eq!(m2.parts[t].num_nodes, d.num_nodes());
            }
            let c = read_coordinator(&dir, &m2).unwrap();
            // the coordinator (an MPI rank 0 holds no trainer data) knows the parts' training
            // examples and whether the features are structural from the manifest (regression:
            // under MPI the batch line of --exclude-targets was missing)
            assert!(c.trainers.is_empty());
            let counts: Vec<usize> = p.trainers.iter().map(|t| t.num_examples()).collect();
            assert!(counts.iter().all(|&n| n > 0), "{counts:?}");
            assert_eq!(c.train_examples(), counts);
            assert_eq!(
                (m2.structural_features, c.structural_features),
                (Some(false), Some(false))
            );
            let mut old = m2.clone();
            old.structural_features = None;
            assert_eq!(
                read_coordinator(&dir, &old).unwrap().structural_features,
                None
            );
            assert_eq!(c.graph, p.graph);
            assert_eq!(c.features, p.features);
            assert_eq!(c.partition_hash, p.partition_hash);
            match (&c.eval, &p.eval) {
                (EvalData::Link { split: a }, EvalData::Link { split: b }) => {
                    assert_eq!(a.val_pos, b.val_pos);
                    assert_eq!(a.test_neg, b.test_neg);
                    assert_eq!(a.num_neg, 20);
                }
                (EvalData::Node { split: a, .. }, EvalData::Node { split: b, .. }) => {
                    assert_eq!(a.val, b.val);
                    assert_eq!(a.test, b.test);
                }
                _ => panic!("eval kind differs"),
            }
            // a second write of the same job gives the same manifest hash (deterministic bytes)
            let dir2 = tmp.path().join("again");
            let m3 = write_partition_dir(&dir2, &p, &cfg, "sbm", false).unwrap();
            assert_eq!(m3.hash, m.hash);
            // refuses to overwrite
            assert!(matches!(
                write_partition_dir(&dir, &p, &cfg, "sbm", false),
                Err(StoreError::Exists(_))
            ));
        }
    }

    /// Every file under `dir`, by relative path, with its bytes.
    fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(dir).unwrap().to_string_lossy().to_string();
                    out.insert(rel, fs::read(&p).unwrap());
                }
            }
        }
        out
    }

    #[test]
    fn parts_streamed_from_a_mapped_graph_are_the_in_memory_bytes() {
        let ds = generate_sbm(&SbmConfig {
            num_nodes: 600,
            feature_dim: 8,
            seed: 3,
            ..SbmConfig::default()
        });
        let tmp = tempfile::tempdir().unwrap();
        let gdir = tmp.path().join("graph");
        tma_graph::disk::write_dataset(&ds, &gdir, &tma_graph::disk::Provenance::new("test"))
            .unwrap();
        for (task, method) in [
            (Task::Node, Method::SuperTma),
            (Task::Link, Method::RandomTma),
        ] {
            let cfg = TrainConfig {
                task,
                method,
                num_trainers: 3,
                super_nodes: 40,
                eval_num_neg: 20,
                eval_max_edges: 50,
                seed: 9,
                ..TrainConfig::default()
            };
            // the in-memory path, from the dataset in RAM
            let ram_dir = tmp.path().join(format!("ram-{task}"));
            let p = crate::prepare(ds.clone(), &cfg).unwrap();
            let m_ram = write_partition_dir(&ram_dir, &p, &cfg, "sbm", false).unwrap();
            // the streamed path, from the mapped graph
            let mapped =
                tma_graph::load_dataset(&gdir, &tma_graph::LoadOptions::default()).unwrap();
            assert!(mapped.graph.indices.is_mapped() && mapped.features.is_mapped());
            let dir = tmp.path().join(format!("streamed-{task}"));
            let w = PartitionWriter::create(&dir).unwrap();
            let spill = w.spill();
            let prep = crate::methods::prepare_spilled(mapped, &cfg, Some(&spill)).unwrap();
            // the parts' CSR and dense features went to the staging folder as they were built
            let written = spill.written();
            assert_eq!(written.len(), 3 * 3, "{:?}", written.keys());
            for (rel, f) in &written {
                let b = fs::read(w.staging().join(rel)).unwrap();
                assert_eq!(
                    (f.bytes, &f.sha256),
                    (b.len() as u64, &hex(&Sha256::digest(&b)))
                );
            }
            for t in &prep.trainers {
                assert!(t.graph.indices.is_mapped() && t.features.is_mapped());
            }
            let m = w.finish(&prep, &cfg, "sbm", false, Some(&spill)).unwrap();
            assert_eq!(m.hash, m_ram.hash, "{task}: manifests differ");
            assert_eq!(files_of(&dir), files_of(&ram_dir), "{task}: files differ");
            assert!(!tmp.path().join(format!(".streamed-{task}.tmp")).exists());
            let back = read_part(&dir, &read_manifest(&dir).unwrap(), 2).unwrap();
            same_part(&back, &p.trainers[2]);
        }
    }

    #[test]
    fn a_bad_out_is_refused_and_an_unfinished_writer_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        fs::write(&file, b"x").unwrap();
        let e = PartitionWriter::create(&file).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("{}: exists and is not a directory", file.display())
        );
        let full = tmp.path().join("full");
        fs::create_dir(&full).unwrap();
        fs::write(full.join("a"), b"").unwrap();
        assert!(matches!(
            PartitionWriter::create(&full),
            Err(StoreError::Exists(_))
        ));
        assert!(matches!(
            PartitionWriter::create(&file.join("sub")),
            Err(StoreError::Io { .. })
        ));
        let e = PartitionWriter::create(Path::new("/")).unwrap_err();
        assert!(e.to_string().contains("not a directory name"), "{e}");
        // an empty directory is fine; dropped unfinished (an error on the way), no staging left
        let empty = tmp.path().join("empty");
        fs::create_dir(&empty).unwrap();
        let w = PartitionWriter::create(&empty).unwrap();
        assert!(!w.removed_stale_staging());
        let staging = w.staging().to_path_buf();
        assert!(staging.is_dir() && staging.ends_with(".empty.tmp"));
        fs::write(staging.join("part"), b"half").unwrap();
        drop(w);
        assert!(!staging.exists() && empty.is_dir());
        // a staging folder left by a killed run is removed, and the writer says so
        fs::create_dir(&staging).unwrap();
        fs::write(staging.join("part"), b"half").unwrap();
        let w = PartitionWriter::create(&empty).unwrap();
        assert!(w.removed_stale_staging());
        assert!(!staging.join("part").exists());
    }

    #[test]
    fn an_aborted_writer_never_renames_its_staging_folder_into_place() {
        // regression: a Ctrl-C racing the last rename left a partial partition directory
        let (cfg, p) = prep(Task::Node);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("parts");
        let w = PartitionWriter::create(&dir).unwrap();
        let staging = w.staging().to_path_buf();
        w.abort_flag()
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let e = w.finish(&p, &cfg, "sbm", false, None).unwrap_err();
        assert!(
            matches!(&e, StoreError::Io { source, .. } if source.kind() == std::io::ErrorKind::Interrupted),
            "{e}"
        );
        assert!(!dir.exists() && !staging.exists());
        // not aborted: written and renamed
        let w = PartitionWriter::create(&dir).unwrap();
        w.finish(&p, &cfg, "sbm", false, None).unwrap();
        assert!(dir.join("manifest.json").is_file());
    }

    #[test]
    fn corrupted_file_and_unknown_version_are_refused() {
        let (cfg, p) = prep(Task::Node);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("parts");
        write_partition_dir(&dir, &p, &cfg, "sbm", false).unwrap();
        let m = read_manifest(&dir).unwrap();
        // flip one byte of part 1's indices
        let f = dir.join("part-001/indices.npy");
        let mut b = fs::read(&f).unwrap();
        let last = b.len() - 1;
        b[last] ^= 1;
        fs::write(&f, &b).unwrap();
        read_part(&dir, &m, 0).unwrap(); // other parts still load
        let e = read_part(&dir, &m, 1).unwrap_err();
        assert!(matches!(e, StoreError::HashMismatch { .. }), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("part-001/indices.npy") && msg.contains("hash mismatch"),
            "{msg}"
        );
        // a missing part
        assert!(read_part(&dir, &m, 3)
            .unwrap_err()
            .to_string()
            .contains("trainer 3"));
        // another format version
        let mf = dir.join("manifest.json");
        let text = fs::read_to_string(&mf).unwrap();
        fs::write(
            &mf,
            text.replace("\"format_version\": 2", "\"format_version\": 99"),
        )
        .unwrap();
        let e = read_manifest(&dir).unwrap_err();
        assert!(matches!(e, StoreError::Version { .. }), "{e}");
        assert!(e.to_string().contains("version 99"), "{e}");
        assert!(e.to_string().contains("manifest.json"), "{e}");
    }

    /// A manifest as version 1 wrote it: `data.method` in place of `data.layout`.
    pub(crate) fn as_version_1(dir: &Path, method: &str) {
        let mf = dir.join("manifest.json");
        let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&mf).unwrap()).unwrap();
        v["format_version"] = 1.into();
        let data = v["data"].as_object_mut().unwrap();
        data.remove("layout");
        data.insert("method".into(), method.into());
        fs::write(&mf, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    }

    #[test]
    fn a_version_1_directory_reads_as_its_methods_layout() {
        let (cfg, p) = prep(Task::Node);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("parts");
        let written = write_partition_dir(&dir, &p, &cfg, "sbm", false).unwrap();
        assert_eq!(written.format_version, 2);
        for (method, layout) in [
            ("random-tma", "random"),
            ("llcg", "metis"),
            ("ggs", "shared-examples"),
        ] {
            as_version_1(&dir, method);
            let m = read_manifest(&dir).unwrap();
            assert_eq!(m.format_version, 1);
            assert_eq!(m.data.layout, layout);
            assert_eq!(m.data.method, Some(method.parse().unwrap()));
            // the data is read as before
            assert_eq!(read_all(&dir, &m).unwrap().trainers.len(), 3);
            // a layout is written, never a method
            let again = serde_json::to_value(&m.data).unwrap();
            assert_eq!(again["layout"], layout);
            assert!(again.get("method").is_none());
        }
        as_version_1(&dir, "fast-tma");
        let e = read_manifest(&dir).unwrap_err().to_string();
        assert!(
            e.ends_with("manifest.json: invalid manifest: data.method \"fast-tma\" is not a method of format version 1"),
            "{e}"
        );
    }

    #[test]
    fn llcg_corrects_on_every_training_edge_when_read_from_a_directory() {
        // regression (issue 28): the coordinator's data read from a partition directory holds
        // no training graph of its own; LLCG's correction found no training edge there
        let (cfg, p) = prep(Task::Link);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("parts");
        write_partition_dir(&dir, &p, &cfg, "sbm", false).unwrap();
        let read = read_coordinator(&dir, &read_manifest(&dir).unwrap()).unwrap();
        let edges = |prep: &Prepared| {
            let d = crate::methods::llcg::full_graph_data(prep, 3);
            let TrainTarget::Link { edges } = &d.target else {
                panic!("link data")
            };
            let mut v = edges.to_vec(&d.graph);
            v.sort_unstable();
            v
        };
        let (mine, theirs) = (edges(&p), edges(&read));
        assert!(mine.len() > 1000, "{}", mine.len());
        assert_eq!(mine, theirs);
    }

    #[test]
    fn arrays_are_aligned_npy_files_the_codec_reads() {
        let (cfg, p) = prep(Task::Node);
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("parts");
        write_partition_dir(&dir, &p, &cfg, "sbm", false).unwrap();
        let f = dir.join("part-000/indices.npy");
        let b = fs::read(&f).unwrap();
        let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
        assert_eq!((10 + hlen) % 64, 0);
        let a = npy::read::<u32>(&f, &[None]).unwrap();
        assert_eq!(a.data, p.trainers[0].graph.indices);
        // a file of another dtype (same hash in the manifest) is refused naming the file
        let m = read_manifest(&dir).unwrap();
        let wrong = npy::encode(&[1u64, 2], &[2]);
        fs::write(&f, &wrong).unwrap();
        let mut m2 = m.clone();
        m2.files
            .insert("part-000/indices.npy".into(), hex(&Sha256::digest(&wrong)));
        let e = read_part(&dir, &m2, 0).unwrap_err();
        assert!(matches!(e, StoreError::Npy(_)), "{e}");
        assert_eq!(
            e.to_string(),
            format!("{}: wrong dtype: expected <u4, found <u8", f.display())
        );
    }
}
