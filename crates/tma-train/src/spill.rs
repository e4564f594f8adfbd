//! Parts spilled to disk: a trainer's part, cut from a mapped (or any) graph, streamed to
//! `.npy` files in the layout of a partition directory's part folder ([`crate::store`]) and
//! mapped back, so trainers hold only mapped pages of their part
//! ([`crate::data::prepare_spilled`]).

use std::fs;
use std::io::Write;
use std::path::Path;
use tma_graph::npy::{self, Element};
use tma_graph::{Csr, Features, GraphError};

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> GraphError + '_ {
    move |source| GraphError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes one trainer's part, built from a mapped (or any) dataset, to `root/part-NNN/`
/// (`indptr.npy`, `indices.npy` and, for dense features, `features.npy` streamed row by row
/// from `source` through a 1 MiB buffer: the part's features are never gathered in memory),
/// maps the files back and removes them: the mapping keeps the data alive until the process
/// unmaps it, and nothing is left in `root` once the part is mapped (a process killed while
/// writing a part leaves that part's folder behind). Returns the part's graph
/// and features, mapped (sparse features are gathered in memory, as before).
///
/// Used when a run trains on a graph that is itself mapped ([`crate::data::prepare_spilled`]):
/// each trainer then holds only mapped pages of its own part.
///
/// # Errors
/// [`GraphError::Io`] / [`GraphError::Npy`] naming the file.
pub fn spill_part(
    root: &Path,
    trainer: usize,
    graph: &Csr,
    source: &Features,
    global_ids: &[u32],
) -> Result<(Csr, Features), GraphError> {
    let d = root.join(format!("part-{trainer:03}"));
    fs::create_dir_all(&d).map_err(io(&d))?;
    fn write_stream(
        path: &Path,
        descr: &str,
        shape: &[usize],
        body: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
    ) -> Result<(), GraphError> {
        let f = fs::File::create(path).map_err(io(path))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
        let header = npy::encode_header(descr, shape, npy::Order::C);
        w.write_all(&header).map_err(io(path))?;
        body(&mut w).map_err(io(path))?;
        w.into_inner()
            .map_err(|e| io(path)(e.into_error()))?
            .sync_all()
            .map_err(io(path))
    }
    fn le<T: Element>(xs: &[T]) -> Vec<u8> {
        let mut out = Vec::with_capacity(xs.len() * T::SIZE);
        for &x in xs {
            x.put_le(&mut out);
        }
        out
    }
    let ip = d.join("indptr.npy");
    write_stream(&ip, u64::DESCR, &[graph.indptr.len()], |w| {
        for c in graph.indptr.chunks(1 << 16) {
            w.write_all(&le(c))?;
        }
        Ok(())
    })?;
    let ix = d.join("indices.npy");
    write_stream(&ix, u32::DESCR, &[graph.indices.len()], |w| {
        for c in graph.indices.chunks(1 << 18) {
            w.write_all(&le(c))?;
        }
        Ok(())
    })?;
    let features = match source {
        Features::Dense { dim, data, .. } => {
            let dim = *dim;
            let fp = d.join("features.npy");
            write_stream(&fp, f32::DESCR, &[global_ids.len(), dim], |w| {
                let mut row = Vec::with_capacity(dim * 4);
                for &g in global_ids {
                    let g = g as usize;
                    row.clear();
                    for &x in &data[g * dim..(g + 1) * dim] {
                        x.put_le(&mut row);
                    }
                    w.write_all(&row)?;
                }
                Ok(())
            })?;
            let (data, _) =
                npy::map::<f32>(&fp, &[Some(global_ids.len() as u64), Some(dim as u64)])?;
            Features::Dense {
                num_nodes: global_ids.len(),
                dim,
                data,
            }
        }
        Features::Sparse { .. } => source.gather(global_ids),
    };
    let graph = Csr {
        indptr: npy::map::<u64>(&ip, &[None])?.0,
        indices: npy::map::<u32>(&ix, &[None])?.0,
    };
    fs::remove_dir_all(&d).map_err(io(&d))?;
    Ok((graph, features))
}
