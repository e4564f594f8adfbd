//! The link-split section of an on-disk graph (docs/graph-format.md, "Link split"): fixed
//! evaluation negatives for the held-out pairs, drawn from the mapped graph and written next
//! to them.

use std::path::Path;

use super::{
    ArrayWriter, LinkNegativesLayout, MappedGraph, LINK_SPLIT_VERSION, MANIFEST,
    NEGATIVES_PER_SOURCE,
};
use crate::error::{GraphError, Result};
use crate::split::{link_negatives, LinkSplitNotes};

/// Draws the negatives of `val_pos` / `test_pos` on the training graph `graph`
/// ([`link_negatives`]) and writes `link_val_neg.bin` / `link_test_neg.bin` into `dir` (each
/// under a temporary name, then renamed), adding their entries to `files`; returns the
/// manifest section and what the draw adapted. The negatives are held whole while drawn: their
/// `4 * num_neg` bytes per pair must fit `budget`, or [`NEGATIVES_MIN_BUDGET`] when that is
/// larger (a small build budget still allows the presets' negatives).
///
/// # Errors
/// [`GraphError::Invalid`] naming `dir` when `num_neg` is 0 or the negatives exceed `budget`
/// (the message names `--link-num-neg`); [`GraphError::Io`] naming a file not written.
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_negatives(
    dir: &Path,
    graph: &crate::csr::Csr,
    directed: bool,
    val_pos: &[(u32, u32)],
    test_pos: &[(u32, u32)],
    num_neg: usize,
    seed: u64,
    budget: u64,
    files: &mut std::collections::BTreeMap<String, super::FileEntry>,
) -> Result<(LinkNegativesLayout, LinkSplitNotes)> {
    let pairs = (val_pos.len() + test_pos.len()) as u64;
    let bytes = pairs
        .checked_mul(num_neg as u64)
        .and_then(|x| x.checked_mul(4));
    let budget = budget.max(NEGATIVES_MIN_BUDGET);
    if num_neg == 0 || bytes.is_none_or(|b| b > budget) {
        return Err(GraphError::Invalid {
            path: dir.to_path_buf(),
            reason: format!(
                "--link-num-neg {num_neg}: {pairs} held-out pairs x {num_neg} negatives x 4 bytes {} (must be >= 1 and fit --memory-budget, at least {} MiB)",
                bytes.map_or("overflow".to_string(), |b| format!("= {} MiB", b >> 20)),
                budget >> 20
            ),
        });
    }
    let (val_neg, test_neg, notes) =
        link_negatives(graph, directed, val_pos, test_pos, num_neg, seed);
    graph.release_pages();
    if notes.min_valid_negatives == Some(0) {
        // (regression: a 2-node graph stored 1000 "negatives" equal to the source itself)
        let n = graph.num_nodes();
        return Err(GraphError::Invalid {
            path: dir.to_path_buf(),
            reason: format!(
                "a held-out pair's source is adjacent to every other of the graph's {n} nodes: no negative exists to rank it against (a negative is never a true edge or the source itself); hold out fewer pairs or use a larger graph"
            ),
        });
    }
    for (name, data) in [
        ("link_val_neg.bin", &val_neg),
        ("link_test_neg.bin", &test_neg),
    ] {
        let tmp = crate::durable::temp_path(&dir.join(name))?;
        let mut w = ArrayWriter::<u32>::create(&tmp)?;
        w.extend(data)?;
        let entry = w.finish()?;
        crate::durable::rename(&tmp, &dir.join(name))?;
        files.insert(name.to_string(), entry);
    }
    Ok((
        LinkNegativesLayout {
            version: LINK_SPLIT_VERSION,
            kind: NEGATIVES_PER_SOURCE.into(),
            num_neg: num_neg as u64,
            seed,
            dataset: None,
            hits_k: None,
        },
        notes,
    ))
}

/// The training CSR just written to `dir` (`indptr.bin`, `indices.bin`: `n` nodes, `arcs` arcs),
/// mapped, before a manifest exists (the negatives are drawn on it and the manifest is written
/// last).
///
/// # Errors
/// [`GraphError::Io`] naming a file that cannot be mapped; [`GraphError::Invalid`] when a
/// file is shorter than `n + 1` / `arcs` elements.
pub(crate) fn mapped_training_csr(dir: &Path, n: u64, arcs: u64) -> Result<crate::csr::Csr> {
    let ip = crate::buf::SharedMap::open(&dir.join("indptr.bin"))?;
    let ix = crate::buf::SharedMap::open(&dir.join("indices.bin"))?;
    Ok(crate::csr::Csr {
        indptr: crate::buf::Buf::mapped(ip, 0, n as usize + 1)?,
        indices: crate::buf::Buf::mapped(ix, 0, arcs as usize)?,
    })
}

/// The negatives may always take this much memory while drawn (256 MiB: 64,000 held-out pairs
/// at 1000 negatives each), whatever smaller budget the build has.
pub const NEGATIVES_MIN_BUDGET: u64 = 256 << 20;

/// What [`add_link_negatives`] wrote.
#[derive(Clone, Debug)]
pub struct LinkNegativesReport {
    /// Validation positives (held-out pairs in `link_val.bin`).
    pub num_val: usize,
    /// Test positives.
    pub num_test: usize,
    /// Negatives per positive.
    pub num_neg: usize,
    /// What the draw had to adapt ([`LinkSplitNotes::warnings`]).
    pub notes: LinkSplitNotes,
    /// Seconds the draw and the writes took.
    pub secs: f64,
}

/// Draws `num_neg` fixed negatives per held-out pair of the graph in `dir` (which must hold a
/// link split: `link_val.bin` / `link_test.bin`) with [`link_negatives`] from `seed`, writes
/// `link_val_neg.bin` / `link_test_neg.bin` (u32 `[pairs * num_neg]`) and records them in the
/// manifest (`link_negatives`, [`LINK_SPLIT_VERSION`]). The graph is read mapped; memory is
/// the negatives themselves (`4 * num_neg` bytes per held-out pair) plus the held-out pairs.
/// Files are written under temporary names and renamed, the manifest last (atomically), so
/// an interrupted call leaves the directory as it was.
///
/// # Errors
/// [`GraphError::Invalid`] naming the manifest when the graph has no held-out pairs or
/// `num_neg == 0`; the errors of [`MappedGraph::open`]; [`GraphError::Io`] naming the file
/// that could not be written.
pub fn add_link_negatives(dir: &Path, num_neg: usize, seed: u64) -> Result<LinkNegativesReport> {
    let t = std::time::Instant::now();
    let g = MappedGraph::open(dir)?;
    let Some((val, test)) = g.link_split() else {
        return Err(GraphError::Invalid {
            path: dir.join(MANIFEST),
            reason: "no held-out link pairs (link_split is false): nothing to draw negatives for"
                .into(),
        });
    };
    if num_neg == 0 {
        return Err(GraphError::Invalid {
            path: dir.join(MANIFEST),
            reason: "negatives per positive must be >= 1".into(),
        });
    }
    let pairs = |x: &[u32]| x.chunks_exact(2).map(|p| (p[0], p[1])).collect::<Vec<_>>();
    let (val_pos, test_pos) = (pairs(val), pairs(test));
    let graph = g.mapped_csr();
    let mut manifest = g.manifest().clone();
    let (layout, notes) = write_negatives(
        dir,
        &graph,
        manifest.directed,
        &val_pos,
        &test_pos,
        num_neg,
        seed,
        u64::MAX,
        &mut manifest.files,
    )?;
    drop(graph);
    drop(g);
    manifest.link_negatives = Some(layout);
    manifest.write(dir)?;
    Ok(LinkNegativesReport {
        num_val: val_pos.len(),
        num_test: test_pos.len(),
        num_neg,
        notes,
        secs: t.elapsed().as_secs_f64(),
    })
}
