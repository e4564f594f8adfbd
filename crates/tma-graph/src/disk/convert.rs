//! [`convert_npy_dir`]: a `.npy` dataset directory (`docs/dataset-format.md`) to the on-disk
//! format, the graph built in bounded memory.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::write::write_node_data;
use super::{
    BuildStats, ExternalCsrBuilder, Manifest, Progress, Provenance, SplitSource, FORMAT_NAME,
    FORMAT_VERSION,
};
use crate::dataset::{load_npy_dir, Dataset, LoadOptions};
use crate::error::{GraphError, Result};

/// Options of [`convert_npy_dir`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvertOptions {
    /// Bytes the graph build may hold (sort buffer + route buffers; see
    /// [`ExternalCsrBuilder`]).
    pub memory_budget: u64,
    /// Which mask split to convert when the source has `*_masks.npy` (the `.npy` loader's
    /// `split_index`).
    pub split_index: usize,
}

/// What [`convert_npy_dir`] did.
#[derive(Clone, Debug)]
pub struct ConvertReport {
    /// Nodes.
    pub num_nodes: u64,
    /// Arcs in the output CSR.
    pub num_arcs: u64,
    /// The graph build's statistics.
    pub build: BuildStats,
    /// Seconds per stage, in order.
    pub stages: Vec<(String, f64)>,
}

fn invalid(path: &Path, reason: impl Into<String>) -> GraphError {
    GraphError::Invalid {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn io_err(path: &Path, source: std::io::Error) -> GraphError {
    GraphError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The header of `edge_index.npy` (read by [`crate::npy::NpyFile::read_header`], which also
/// checks the payload's length): payload offset, `E`, Fortran order.
fn edge_header(path: &Path) -> Result<(u64, u64, bool)> {
    let h = crate::npy::NpyFile::read_header(path)?;
    if h.descr() != "<i8" {
        return Err(GraphError::Dtype {
            path: path.to_path_buf(),
            expected: "<i8".into(),
            found: h.descr().to_string(),
        });
    }
    let shape = h.shape();
    if shape.len() != 2 || shape[0] != 2 {
        return Err(GraphError::Shape {
            path: path.to_path_buf(),
            expected: "[2, E]".into(),
            found: shape.to_vec(),
        });
    }
    Ok((h.data_offset() as u64, shape[1], h.fortran_order()))
}

/// Streams the arcs `(src, dst)` of `edge_index.npy` (either order), 1 MiB buffers.
fn stream_edges(
    path: &Path,
    mut f: impl FnMut(i64, i64) -> Result<()>,
    progress: &dyn Progress,
) -> Result<()> {
    let (off, e, fortran) = edge_header(path)?;
    let open_at = |pos: u64| -> Result<BufReader<File>> {
        let mut file = File::open(path).map_err(|er| io_err(path, er))?;
        file.seek(SeekFrom::Start(pos))
            .map_err(|er| io_err(path, er))?;
        Ok(BufReader::with_capacity(1 << 20, file))
    };
    let mut b8 = [0u8; 8];
    let mut next = |r: &mut BufReader<File>| -> Result<i64> {
        r.read_exact(&mut b8).map_err(|er| io_err(path, er))?;
        Ok(i64::from_le_bytes(b8))
    };
    let step = (e / 100).max(1);
    if fortran {
        let mut r = open_at(off)?;
        for k in 0..e {
            let s = next(&mut r)?;
            let d = next(&mut r)?;
            f(s, d)?;
            if k % step == 0 {
                progress.inc(step.min(e - k));
            }
        }
    } else {
        let mut r0 = open_at(off)?;
        let mut r1 = open_at(off + 8 * e)?;
        for k in 0..e {
            let s = next(&mut r0)?;
            let d = next(&mut r1)?;
            f(s, d)?;
            if k % step == 0 {
                progress.inc(step.min(e - k));
            }
        }
    }
    Ok(())
}

#[cfg(unix)]
fn link(src: &Path, dst: &Path) -> Result<()> {
    std::os::unix::fs::symlink(src, dst).map_err(|e| io_err(dst, e))
}

#[cfg(not(unix))]
fn link(src: &Path, dst: &Path) -> Result<()> {
    std::fs::copy(src, dst)
        .map(|_| ())
        .map_err(|e| io_err(dst, e))
}

/// Converts the `.npy` dataset directory `src` to the on-disk format in `out` (created; must
/// not exist or be empty).
///
/// * **Graph**: `edge_index.npy` is streamed twice from disk (once for the largest id when
///   `meta.json` has no `computed.nodes`, once to route) into an [`ExternalCsrBuilder`]
///   holding at most `opts.memory_budget` bytes; self-loops are dropped and duplicate arcs
///   merged, as the loader does; an undirected graph must be symmetric.
/// * **Node data** (features, labels, split, the node count) goes through
///   [`crate::load_dataset`] itself, on a staging copy of the directory whose edge list is
///   replaced by one arc fixing the same node count, so the rules and checks are the loader's.
///   This part is held in memory: O(N x stored feature entries), not bounded by the budget.
///   Featureless graphs store no features (structural ones are generated at load time).
///
/// Loading the result ([`super::MappedGraph::to_dataset`]) gives the same [`crate::Dataset`]
/// as `load_dataset(src)`, bit for bit.
///
/// # Errors
/// Every error of [`crate::load_dataset`] for the source's files, naming them (ids out of
/// range and asymmetry name `edge_index.npy`); [`GraphError::Invalid`] naming `out` if it is a
/// non-empty directory; [`GraphError::Io`] for unwritable outputs.
pub fn convert_npy_dir(
    src: &Path,
    out: &Path,
    opts: &ConvertOptions,
    progress: &dyn Progress,
) -> Result<ConvertReport> {
    let mut stages = vec![];
    let t0 = Instant::now();
    crate::disk::claim_out_dir(out, ".convert-staging")?;
    std::fs::create_dir_all(out).map_err(|e| io_err(out, e))?;
    let staging = out.join(".convert-staging");
    let result = convert_inner(src, out, &staging, opts, progress, &mut stages, t0);
    let _ = std::fs::remove_dir_all(&staging);
    if result.is_err() {
        // leave no half-written graph (there is no manifest yet, so it could not be opened)
        for f in std::fs::read_dir(out).into_iter().flatten().flatten() {
            let _ = std::fs::remove_file(f.path());
        }
    }
    result
}

fn convert_inner(
    src: &Path,
    out: &Path,
    staging: &Path,
    opts: &ConvertOptions,
    progress: &dyn Progress,
    stages: &mut Vec<(String, f64)>,
    t0: Instant,
) -> Result<ConvertReport> {
    let ei_path = src.join("edge_index.npy");
    let (_, e, _) = edge_header(&ei_path)?;
    let meta_path = src.join("meta.json");
    let meta_text = std::fs::read_to_string(&meta_path).map_err(|er| io_err(&meta_path, er))?;
    let meta: serde_json::Value = serde_json::from_str(&meta_text)
        .map_err(|er| invalid(&meta_path, format!("not valid JSON: {er}")))?;
    let has_meta_nodes = !matches!(
        meta.get("computed").and_then(|c| c.get("nodes")),
        None | Some(serde_json::Value::Null)
    );
    let name = meta
        .get("name")
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| {
            src.file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });

    // ---- pass 1 (only without computed.nodes): the largest id, negative ids
    let mut max_id: Option<i64> = None;
    if !has_meta_nodes {
        let t = Instant::now();
        progress.start("scan edge ids", e);
        stream_edges(
            &ei_path,
            |s, d| {
                for v in [s, d] {
                    if v < 0 {
                        return Err(GraphError::IdOutOfRange {
                            path: ei_path.clone(),
                            id: v,
                            num_nodes: u32::MAX as u64,
                        });
                    }
                    max_id = Some(max_id.map_or(v, |m| m.max(v)));
                }
                Ok(())
            },
            progress,
        )?;
        progress.finish();
        stages.push(("scan edge ids".into(), t.elapsed().as_secs_f64()));
    }

    // ---- node data through the loader, on a staging directory with a one-arc edge list
    let t = Instant::now();
    let node_data = load_node_data(src, staging, max_id, opts.split_index)?;
    let n = node_data.num_nodes() as u64;
    let directed = node_data.directed;
    stages.push(("node data".into(), t.elapsed().as_secs_f64()));

    // ---- pass 2: route arcs to buckets
    let t = Instant::now();
    let mut builder =
        ExternalCsrBuilder::new(n, e, opts.memory_budget, &staging.join("buckets"), true)?;
    progress.start("route arcs", e);
    stream_edges(
        &ei_path,
        |s, d| {
            for v in [s, d] {
                if v < 0 || v as u64 >= n {
                    return Err(GraphError::IdOutOfRange {
                        path: ei_path.clone(),
                        id: v,
                        num_nodes: n,
                    });
                }
            }
            builder.push(s as u32, d as u32)
        },
        progress,
    )?;
    progress.finish();
    stages.push((
        format!("route arcs ({} buckets)", builder.num_buckets()),
        t.elapsed().as_secs_f64(),
    ));

    // ---- build the CSR bucket by bucket
    let t = Instant::now();
    let mut files = BTreeMap::new();
    let (ip, ix, build) =
        builder.finish(&out.join("indptr.bin"), &out.join("indices.bin"), progress)?;
    files.insert("indptr.bin".to_string(), ip);
    files.insert("indices.bin".to_string(), ix);
    stages.push((
        format!("build CSR ({} runs)", build.runs),
        t.elapsed().as_secs_f64(),
    ));
    if !directed && !build.symmetric {
        return Err(asymmetry_error(out, &ei_path, n));
    }

    // ---- node data files
    let t = Instant::now();
    let (features, labels, has_split) = write_node_data(&node_data, out, &mut files)?;
    let split = if !has_split {
        SplitSource::None
    } else if src.join("train_idx.npy").exists() {
        SplitSource::Index
    } else {
        SplitSource::Masks {
            split_index: opts.split_index as u64,
        }
    };
    drop(node_data);
    let mut prov = Provenance::new(src.display().to_string());
    prov.tool = "tma convert".into();
    prov.notes.push(format!(
        "edge_index.npy: dropped {} self-loops and merged {} duplicate arcs of {} (as the .npy loader does)",
        build.self_loops_dropped, build.duplicates_merged, build.arcs_in
    ));
    Manifest {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        name,
        directed,
        num_nodes: n,
        num_arcs: build.arcs_out,
        features,
        labels,
        split,
        link_split: false,
        link_negatives: None,
        files,
        provenance: prov,
    }
    .write(out)?;
    stages.push(("write node data".into(), t.elapsed().as_secs_f64()));
    let _ = t0;
    Ok(ConvertReport {
        num_nodes: n,
        num_arcs: build.arcs_out,
        build,
        stages: std::mem::take(stages),
    })
}

/// The node data of `src` (features, labels, split, the node count) read by the `.npy` loader
/// itself, on a staging copy of `src` whose edge list is one self-loop on `max_id` (dropped,
/// but it fixes the node count as the whole list would) or empty.
fn load_node_data(
    src: &Path,
    staging: &Path,
    max_id: Option<i64>,
    split_index: usize,
) -> Result<Dataset> {
    let nd = staging.join("node-data");
    std::fs::create_dir_all(&nd).map_err(|er| io_err(&nd, er))?;
    let abs = |p: PathBuf| std::fs::canonicalize(&p).unwrap_or(p);
    for entry in std::fs::read_dir(src).map_err(|er| io_err(src, er))? {
        let entry = entry.map_err(|er| io_err(src, er))?;
        let fname = entry.file_name();
        if fname != "edge_index.npy" {
            link(&abs(entry.path()), &nd.join(&fname))?;
        }
    }
    let fake: Vec<i64> = match max_id {
        Some(m) => vec![m, m], // a self-loop: dropped, but it fixes N = max id + 1
        None => vec![],
    };
    let shape = [2, fake.len() / 2];
    crate::npy::write(&nd.join("edge_index.npy"), &fake, &shape)?;
    let load_opts = LoadOptions {
        split_index,
        structural_dim: 1,
        seed: 0,
        ..LoadOptions::default()
    };
    load_npy_dir(&nd, &load_opts).map_err(|er| rename_path(er, &nd, src))
}

/// Errors of the staging copy name the source directory's files.
fn rename_path(e: GraphError, staging: &Path, src: &Path) -> GraphError {
    let fix = |p: &Path| match p.strip_prefix(staging) {
        Ok(rest) => src.join(rest),
        Err(_) => p.to_path_buf(),
    };
    match e {
        GraphError::Io { path, source } => GraphError::Io {
            path: fix(&path),
            source,
        },
        GraphError::Npy { path, reason } => GraphError::Npy {
            path: fix(&path),
            reason,
        },
        GraphError::Dtype {
            path,
            expected,
            found,
        } => GraphError::Dtype {
            path: fix(&path),
            expected,
            found,
        },
        GraphError::Shape {
            path,
            expected,
            found,
        } => GraphError::Shape {
            path: fix(&path),
            expected,
            found,
        },
        GraphError::IdOutOfRange {
            path,
            id,
            num_nodes,
        } => GraphError::IdOutOfRange {
            path: fix(&path),
            id,
            num_nodes,
        },
        GraphError::Invalid { path, reason } => GraphError::Invalid {
            path: fix(&path),
            reason,
        },
    }
}

/// The loader's asymmetry error for the first arc without its reverse (found by mapping the
/// CSR just written; an error path, so memory does not matter).
fn asymmetry_error(out: &Path, ei_path: &Path, n: u64) -> GraphError {
    let read = |name: &str| std::fs::read(out.join(name)).unwrap_or_default();
    let ip: Vec<u64> = read("indptr.bin")
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let ix: Vec<u32> = read("indices.bin")
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let g = super::CsrRef {
        indptr: &ip,
        indices: &ix,
    };
    for v in 0..n as usize {
        for &u in g.neighbors(v) {
            if g.neighbors(u as usize).binary_search(&(v as u32)).is_err() {
                return invalid(
                    ei_path,
                    format!(
                        "graph is marked undirected but arc {u} -> {v} has no reverse {v} -> {u}"
                    ),
                );
            }
        }
    }
    invalid(
        ei_path,
        "graph is marked undirected but is not symmetric (hash check)",
    )
}
