//! Reading the graph formats users already have, and converting them to tma's own `.npy`
//! layout (`docs/dataset-format.md`, section "Other formats").
//!
//! | [`Format`] | what | detected from |
//! |---|---|---|
//! | `tma` | tma's `.npy` directory ([`crate::load_dataset`]) or the on-disk format | a directory with `meta.json` or `tma-graph.json` |
//! | `ogb` | an OGB node-property directory (`raw/edge.csv.gz`, `raw/node-feat.csv.gz`, `raw/node-label.csv.gz`, `raw/num-node-list.csv.gz`, `split/<name>/{train,valid,test}.csv.gz`; ogbn-arxiv, ogbn-products, ogbn-proteins), or an OGB link-property directory (`raw/edge.csv.gz` = the training edges, `raw/num-node-list.csv.gz`, `raw/node-feat.csv.gz`, `split/<name>/{train,valid,test}.pt`, PyTorch files read by [`torch::read_pt`]; ogbl-citation2, ogbl-collab, ogbl-ppa, ogbl-ddi): [`Dataset::link_split`] holds the split and its negatives as given, with the [`crate::LinkProtocol`] | a directory with `raw/edge.csv.gz` (or the `raw/` directory itself); link-property when its `split/<name>/` holds `valid.pt` |
//! | `snap` | a SNAP edge list (`.txt`, `.txt.gz`): `#` comments, two ids per line separated by tabs, spaces or a comma (a headerless CSV), any 64-bit ids | a file named `*.txt`, `*.edges`, `*.el`, `*.edgelist` (optionally `.gz`) |
//! | `npz` | a gnn-benchmark / PyG `.npz` (`adj_data/adj_indices/adj_indptr/adj_shape`, `attr_data/attr_indices/attr_indptr/attr_shape` or `attr_matrix`, `labels`), compressed or not | a file named `*.npz` |
//! | `csv` | a CSV edge list with a header (`src,dst`, `source,target`, ... or any two named columns; a `weight` column is ignored and said) | a file named `*.csv`, `*.tsv` (optionally `.gz`) |
//!
//! Every reader yields the same [`Dataset`] the `.npy` loader would for the same data: node ids
//! `0..N`, self-loops dropped and duplicate arcs merged (counted in [`Dataset::removed`]),
//! features dense or sparse by the loader's rule, structural features for featureless graphs,
//! labels and a fixed split checked as the loader checks them. What a reader changes or drops
//! (ids remapped, reverse arcs added, a weight column ignored, ...) is one line of
//! [`Loaded::notes`].
//!
//! Edge lists that store each undirected edge once (SNAP files whose header says
//! `Undirected graph`, OGB datasets for which OGB adds inverse edges, symmetric `.npz`
//! adjacencies, or any edge list with [`ReadOptions::undirected`]) become undirected graphs
//! holding both directions, as tma's layout does.
//!
//! Errors are [`GraphError`]s naming the file (for a `.npz`, `FILE.npz:member.npy`), the line
//! for text files, and the problem: a bad field, a wrong column count, a negative or
//! out-of-range id, corrupt or truncated gzip data, a missing file or archive member.
//!
//! ```no_run
//! use tma_graph::formats::{self, Format};
//! let ds = formats::load("datasets/ogbn_arxiv".as_ref(), None)?; // detected: ogb
//! let sn = formats::load("soc-Epinions1.txt.gz".as_ref(), Some(Format::Snap))?;
//! println!("{}\n{}", ds.summary(), sn.summary());
//! # Ok::<(), tma_graph::GraphError>(())
//! ```

mod edgelist;
mod npz;
mod ogb;
mod raw;
mod text;
pub mod torch;
mod write;

use std::path::Path;

use crate::csr::Csr;
use crate::dataset::{
    check_split_disjoint, structural_features, Dataset, LoadOptions, NodeSplit, RemovedArcs,
};
use crate::error::{GraphError, Result};
use raw::{invalid, Direction, Raw, RawSplit};

pub use npz::NpzArchive;
pub use write::write_npy_dir;

/// A dataset format tma reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// tma's `.npy` directory (`docs/dataset-format.md`) or on-disk graph directory
    /// (`docs/graph-format.md`).
    Tma,
    /// An OGB node-property-prediction directory (`raw/`, `split/`).
    Ogb,
    /// A SNAP edge list (`.txt` / `.txt.gz`).
    Snap,
    /// A gnn-benchmark / PyG `.npz` archive.
    Npz,
    /// A CSV edge list with a header.
    Csv,
}

impl Format {
    /// Every format, in the order of `--format`'s help.
    pub const ALL: [Format; 5] = [
        Format::Tma,
        Format::Ogb,
        Format::Snap,
        Format::Npz,
        Format::Csv,
    ];

    /// The name `--format` takes: `tma`, `ogb`, `snap`, `npz`, `csv`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Tma => "tma",
            Format::Ogb => "ogb",
            Format::Snap => "snap",
            Format::Npz => "npz",
            Format::Csv => "csv",
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Format, String> {
        Format::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                format!(
                    "unknown format {s:?} (one of: {})",
                    Format::ALL.map(|f| f.name()).join(", ")
                )
            })
    }
}

impl serde::Serialize for Format {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Format {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Format, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// How to read a dataset path (besides the [`LoadOptions`] every format shares).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// The format; `None`: [`detect`] it.
    pub format: Option<Format>,
    /// Read an edge list (`ogb`, `snap`, `npz`, `csv`) as undirected: every arc gets its
    /// reverse. Without it, the file decides where it can (a SNAP `# Undirected graph` header,
    /// OGB's inverse-edge setting for the known ogbn datasets, a symmetric `.npz` adjacency);
    /// otherwise arcs are directed. Not allowed with `tma` (its `meta.json` says).
    pub undirected: bool,
}

/// A dataset read from any [`Format`], with what the reader did to it.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The dataset, as [`crate::load_dataset`] would give it for the same data.
    pub dataset: Dataset,
    /// The format it was read in.
    pub format: Format,
    /// What the reader changed or ignored in the user's data, one line each (ids remapped,
    /// reverse arcs added, columns or files ignored, ...). Self-loops and duplicate arcs are
    /// in [`Dataset::removed`] instead.
    pub notes: Vec<String>,
    /// For edge lists with arbitrary ids (`snap`, `csv`): `node_ids[i]` is the id in the file
    /// of node `i` (ids ascending). [`write_npy_dir`] writes it as `node_ids.npy`.
    pub node_ids: Option<Vec<u64>>,
}

/// Reads the dataset at `path` in `format` (`None`: [`detect`]ed) with default
/// [`LoadOptions`]: the library's one entry for every format.
///
/// # Errors
/// As [`read`].
pub fn load(path: &Path, format: Option<Format>) -> Result<Dataset> {
    read(
        path,
        &ReadOptions {
            format,
            ..ReadOptions::default()
        },
        &LoadOptions::default(),
    )
    .map(|l| l.dataset)
}

/// Reads the dataset at `path` (format from `ropts` or [`detect`]ed), with the split index,
/// structural feature width, seed and split-overlap setting of `lopts` (an OGB directory's
/// `split/` subdirectories, sorted by name, are its splits: `lopts.split_index` picks one).
///
/// # Errors
/// [`detect`]'s errors; every error of [`crate::load_dataset`] for `tma`; for other formats
/// [`GraphError::Io`] (a missing or unreadable file), [`GraphError::Invalid`] naming the
/// file, the line and the problem (bad field, wrong column count, negative or out-of-range id,
/// corrupt gzip data, an asymmetric...), and for `.npz` members the `.npy` codec's errors
/// naming `FILE.npz:member.npy`.
pub fn read(path: &Path, ropts: &ReadOptions, lopts: &LoadOptions) -> Result<Loaded> {
    let format = match ropts.format {
        Some(f) => f,
        None => detect(path)?,
    };
    if !path.exists() {
        return Err(GraphError::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or directory"),
        });
    }
    if lopts.structural_dim == 0 {
        return Err(invalid(path, "LoadOptions::structural_dim must be >= 1"));
    }
    let raw = match format {
        Format::Tma => {
            if ropts.undirected {
                return Err(invalid(
                    path,
                    "--undirected applies to edge lists (ogb, snap, npz, csv); a tma dataset \
                     directory says whether it is directed in its meta.json",
                ));
            }
            return Ok(Loaded {
                dataset: crate::load_dataset(path, lopts)?,
                format,
                notes: Vec::new(),
                node_ids: None,
            });
        }
        Format::Ogb => ogb::read(path, ropts.undirected, lopts)?,
        Format::Snap => edgelist::read_snap(path, ropts.undirected)?,
        Format::Csv => edgelist::read_csv(path, ropts.undirected)?,
        Format::Npz => npz::read(path, ropts.undirected)?,
    };
    assemble(raw, format, lopts)
}

/// The format of `path`: a directory with `meta.json` or `tma-graph.json` is `tma`, one with
/// `raw/edge.csv.gz` (or `raw/data.npz`) or a `raw/` directory holding `edge.csv.gz` is `ogb`;
/// a file is `npz`, `csv` or `snap` by its name (`.npz`; `.csv`, `.tsv`; `.txt`, `.edges`,
/// `.el`, `.edgelist`; each optionally `.gz`), or `npz` by the zip magic.
///
/// # Errors
/// [`GraphError::Io`] when `path` does not exist; [`GraphError::Invalid`] naming the path and
/// what was looked for when nothing matches (pass a format then).
pub fn detect(path: &Path) -> Result<Format> {
    let meta = std::fs::metadata(path).map_err(|source| GraphError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.is_dir() {
        if path.join("meta.json").exists() || crate::disk::is_disk_graph(path) {
            return Ok(Format::Tma);
        }
        if ogb::root(path).is_some() {
            return Ok(Format::Ogb);
        }
        if crate::dataset::NPY_LAYOUT_FILES
            .iter()
            .any(|f| path.join(f).is_file())
        {
            return Err(crate::dataset::meta_json_missing(path));
        }
        return Err(invalid(
            path,
            "cannot tell the dataset format of this directory: it holds neither meta.json \
             (tma's .npy layout, which needs it: docs/dataset-format.md), tma-graph.json \
             (tma's on-disk format) nor raw/edge.csv.gz (an OGB dataset); an edge list or \
             .npz file is read by naming the file itself (--dataset FILE, with --format snap, \
             csv or npz where its extension does not say)",
        ));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let stem = name.strip_suffix(".gz").unwrap_or(&name);
    let ext = stem.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    match ext {
        "npz" => return Ok(Format::Npz),
        "csv" | "tsv" => return Ok(Format::Csv),
        "txt" | "edges" | "el" | "edgelist" => return Ok(Format::Snap),
        _ => {}
    }
    let mut magic = [0u8; 4];
    if let Ok(mut f) = std::fs::File::open(path) {
        use std::io::Read;
        if f.read_exact(&mut magic).is_ok() && &magic == b"PK\x03\x04" {
            return Ok(Format::Npz);
        }
    }
    Err(invalid(
        path,
        "cannot tell the dataset format from the file name (expected .npz, .csv, .tsv, .txt, \
         .edges, .el or .edgelist, optionally .gz); pass --format snap, csv or npz",
    ))
}

/// Reads `src` in any format and writes it to `out` in tma's `.npy` layout (with
/// `node_ids.npy` when ids were remapped), so that [`crate::load_dataset`] on `out` gives the
/// same dataset. Only the split `lopts.split_index` of a dataset with several is written.
/// Returns what was read (its notes, for the caller to print).
///
/// # Errors
/// As [`read`]; [`write_npy_dir`]'s errors for `out`; [`GraphError::Invalid`] naming `src`
/// when the dataset ships a link split (an OGB link-property directory): the `.npy` layout
/// has no place for it, the on-disk format ([`crate::disk::write_dataset`]) keeps it.
pub fn convert_to_npy(
    src: &Path,
    ropts: &ReadOptions,
    lopts: &LoadOptions,
    out: &Path,
) -> Result<Loaded> {
    let mut loaded = read(src, ropts, lopts)?;
    if let Some(ls) = &loaded.dataset.link_split {
        return Err(invalid(
            src,
            format!(
                "the dataset ships a link split ({}, {} / {} held-out pairs and their \
                 negatives), which tma's .npy layout cannot hold: convert to the on-disk \
                 format instead (tma convert --dataset SRC --out DIR), which keeps it",
                ls.source,
                ls.val_pos.len(),
                ls.test_pos.len()
            ),
        ));
    }
    if loaded.dataset.num_splits > 1 {
        loaded.notes.push(format!(
            "the dataset has {} fixed splits; only split {} is written",
            loaded.dataset.num_splits, lopts.split_index
        ));
    }
    let source = serde_json::json!({
        "format": loaded.format.name(),
        "path": std::fs::canonicalize(src).unwrap_or_else(|_| src.to_path_buf()).display().to_string(),
        "notes": loaded.notes,
    });
    write_npy_dir(
        &loaded.dataset,
        loaded.node_ids.as_deref(),
        out,
        Some(source),
    )?;
    Ok(loaded)
}

// ---------------------------------------------------------------------------------------------
// the one step that makes a Dataset of what a reader produced ([`raw::Raw`])

fn assemble(raw: Raw, format: Format, lopts: &LoadOptions) -> Result<Loaded> {
    let Raw {
        name,
        direction,
        num_nodes: n,
        mut src,
        mut dst,
        edge_file,
        features,
        labels,
        split,
        num_splits,
        mut notes,
        node_ids,
        link,
    } = raw;
    // self-loops dropped, duplicates merged: counted on the arcs as read
    let arcs_in = src.len();
    let mut w = 0;
    for k in 0..arcs_in {
        if src[k] != dst[k] {
            src[w] = src[k];
            dst[w] = dst[k];
            w += 1;
        }
    }
    src.truncate(w);
    dst.truncate(w);
    let self_loops = arcs_in - w;
    let mut graph = Csr::from_edges(n, &src, &dst);
    let removed = RemovedArcs {
        self_loops,
        duplicate_arcs: w - graph.num_edges(),
        file: edge_file.display().to_string(),
    };
    let directed = match direction {
        Direction::Directed => true,
        Direction::Undirected => {
            let before = graph.num_edges();
            let (s2, d2): (Vec<u32>, Vec<u32>) = (0..n)
                .flat_map(|v| graph.neighbors(v).iter().map(move |&u| (u, v as u32)))
                .chain((0..n).flat_map(|v| graph.neighbors(v).iter().map(move |&u| (v as u32, u))))
                .unzip();
            graph = Csr::from_edges(n, &s2, &d2);
            let added = graph.num_edges() - before;
            if added > 0 {
                notes.push(format!(
                    "{}: read as undirected: added the reverse of {added} arc{} ({} distinct \
                     arcs -> {} stored, both directions)",
                    edge_file.display(),
                    if added == 1 { "" } else { "s" },
                    before,
                    graph.num_edges()
                ));
            }
            false
        }
    };
    drop((src, dst));

    let (features, structural) = match features {
        Some(f) => (f, false),
        None => (
            structural_features(&graph, directed, lopts.structural_dim, lopts.seed),
            true,
        ),
    };

    let split = match split {
        None => None,
        Some(RawSplit { lists, files }) => {
            let mut out: Vec<Vec<u32>> = Vec::with_capacity(3);
            for (mut ids, f) in lists.into_iter().zip(&files) {
                ids.sort_unstable();
                if let Some(d) = ids.windows(2).find(|w| w[0] == w[1]) {
                    return Err(invalid(f, format!("duplicate node id {}", d[0])));
                }
                out.push(ids);
            }
            let test = out.pop().unwrap();
            let val = out.pop().unwrap();
            let train = out.pop().unwrap();
            let sp = NodeSplit { train, val, test };
            if !lopts.allow_split_overlap {
                check_split_disjoint(&sp, &files, lopts.split_index)?;
            }
            Some(sp)
        }
    };

    Ok(Loaded {
        dataset: Dataset {
            name,
            directed,
            graph,
            features,
            structural_features: structural,
            labels,
            split,
            removed,
            num_splits,
            link_split: link,
        },
        format,
        notes,
        node_ids,
    })
}
