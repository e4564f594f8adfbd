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
    let (val_neg, test_neg, notes) = link_negatives(
        &graph,
        g.manifest().directed,
        &val_pos,
        &test_pos,
        num_neg,
        seed,
    );
    graph.release_pages();
    let mut manifest = g.manifest().clone();
    drop(graph);
    drop(g);
    for (name, data) in [
        ("link_val_neg.bin", &val_neg),
        ("link_test_neg.bin", &test_neg),
    ] {
        let tmp = dir.join(format!(".{name}.tmp"));
        let mut w = ArrayWriter::<u32>::create(&tmp)?;
        w.extend(data)?;
        let entry = w.finish()?;
        std::fs::rename(&tmp, dir.join(name)).map_err(|source| GraphError::Io {
            path: dir.join(name),
            source,
        })?;
        manifest.files.insert(name.to_string(), entry);
    }
    manifest.link_negatives = Some(LinkNegativesLayout {
        version: LINK_SPLIT_VERSION,
        kind: NEGATIVES_PER_SOURCE.into(),
        num_neg: num_neg as u64,
        seed,
    });
    manifest.write(dir)?;
    Ok(LinkNegativesReport {
        num_val: val_pos.len(),
        num_test: test_pos.len(),
        num_neg,
        notes,
        secs: t.elapsed().as_secs_f64(),
    })
}
