//! SNAP edge lists and CSV edge lists: arbitrary 64-bit node ids, remapped to `0..N` in
//! ascending order of the ids.

use std::path::Path;

use super::raw::{at_line, invalid, node_count, Direction, Raw};
use super::text::{block_lines, parse_id, scan, scan_blocks, show, trim, Lines};
use crate::dataset::Labels;
use crate::error::Result;

/// The dataset name of an edge-list file: its name without `.gz` and extension.
fn file_stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    match name.rsplit_once('.') {
        Some((stem, _)) if !stem.is_empty() => stem.to_string(),
        _ => name.to_string(),
    }
}

/// Remaps ids to `0..N` (ascending id order) and builds the [`Raw`] of an edge list.
fn remap(
    path: &Path,
    src_ids: Vec<u64>,
    dst_ids: Vec<u64>,
    direction: Direction,
    mut notes: Vec<String>,
) -> Result<Raw> {
    use rayon::prelude::*;
    let mut ids: Vec<u64> = src_ids.iter().chain(&dst_ids).copied().collect();
    ids.par_sort_unstable();
    ids.dedup();
    let n = node_count(path, ids.len() as u64)?;
    let identity = ids
        .last()
        .is_none_or(|&m| m.checked_add(1) == Some(n as u64));
    let map = |v: &u64| ids.binary_search(v).expect("id collected above") as u32;
    let (src, dst) = if identity {
        (
            src_ids.iter().map(|&v| v as u32).collect(),
            dst_ids.iter().map(|&v| v as u32).collect(),
        )
    } else {
        notes.push(format!(
            "{}: node ids remapped to 0..{} in ascending order of the file's {} distinct ids \
             (smallest {}, largest {}); the map is written as node_ids.npy by tma convert",
            path.display(),
            n.saturating_sub(1),
            n,
            ids.first().copied().unwrap_or(0),
            ids.last().copied().unwrap_or(0)
        ));
        (
            src_ids.iter().map(map).collect(),
            dst_ids.iter().map(map).collect(),
        )
    };
    Ok(Raw {
        name: file_stem(path),
        direction,
        num_nodes: n,
        src,
        dst,
        edge_file: path.to_path_buf(),
        features: None,
        labels: Labels::None,
        split: None,
        num_splits: 0,
        notes,
        node_ids: Some(ids),
        link: None,
    })
}

/// A SNAP edge list: `#` (or `%`) comment lines, then one arc per line as two ids separated by
/// tabs, spaces or a comma (so a headerless CSV of id pairs reads too); further columns are ignored and said. A comment saying
/// `Undirected graph` (or a name containing `ungraph`) makes the graph undirected.
pub(crate) fn read_snap(path: &Path, undirected: bool) -> Result<Raw> {
    let err = |ln: usize, e: String| at_line(path, ln, e);
    // blocks of lines parsed in parallel: (ids, header words, lines with extra columns)
    struct Block {
        src: Vec<u64>,
        dst: Vec<u64>,
        undirected: bool,
        directed: bool,
        extra: usize,
    }
    let blocks = scan_blocks(path, |first, block| {
        let mut b = Block {
            src: Vec::new(),
            dst: Vec::new(),
            undirected: false,
            directed: false,
            extra: 0,
        };
        for (ln, line) in block_lines(first, block) {
            let t = line.trim_ascii();
            if t.is_empty() {
                continue;
            }
            if t[0] == b'#' || t[0] == b'%' {
                let c = String::from_utf8_lossy(t).to_ascii_lowercase();
                if c.contains("undirected graph") {
                    b.undirected = true;
                } else if c.contains("directed graph") {
                    b.directed = true;
                }
                continue;
            }
            let mut fields = t
                .split(|&c| c == b' ' || c == b'\t' || c == b',')
                .filter(|f| !f.is_empty());
            let (Some(x), Some(y)) = (fields.next(), fields.next()) else {
                let e = format!(
                    "found 1 field {:?}: expected two node ids (source, target)",
                    show(t)
                );
                return Err(err(ln, e));
            };
            if fields.next().is_some() {
                b.extra += 1;
            }
            let hint = |e: String| {
                if t.iter().any(u8::is_ascii_alphabetic) {
                    err(
                        ln,
                        format!(
                            "{e} (a header line? SNAP lists hold only id pairs and # comments; \
                             a CSV edge list with a header is --format csv)"
                        ),
                    )
                } else {
                    err(ln, e)
                }
            };
            b.src.push(parse_id(x).map_err(hint)?);
            b.dst.push(parse_id(y).map_err(hint)?);
        }
        Ok(b)
    })?;
    let said_undirected = blocks.iter().any(|b| b.undirected);
    let said_directed = blocks.iter().any(|b| b.directed);
    let extra_cols: usize = blocks.iter().map(|b| b.extra).sum();
    let total: usize = blocks.iter().map(|b| b.src.len()).sum();
    let (mut src, mut dst) = (Vec::with_capacity(total), Vec::with_capacity(total));
    for b in blocks {
        src.extend_from_slice(&b.src);
        dst.extend_from_slice(&b.dst);
    }
    let lower = path.to_string_lossy().to_ascii_lowercase();
    let mut notes = Vec::new();
    if extra_cols > 0 {
        notes.push(format!(
            "{}: columns after the second (weights, timestamps, ...) ignored on {extra_cols} \
             line{}: tma trains on unweighted graphs",
            path.display(),
            if extra_cols == 1 { "" } else { "s" }
        ));
    }
    let undirected = undirected || said_undirected || lower.contains("ungraph");
    if !undirected && !said_directed {
        notes.push(format!(
            "{}: no '# Undirected graph' header: lines read as directed arcs (pass \
             --undirected to add each arc's reverse)",
            path.display()
        ));
    }
    let direction = if undirected {
        Direction::Undirected
    } else {
        Direction::Directed
    };
    remap(path, src, dst, direction, notes)
}

const SRC_NAMES: &[&str] = &[
    "src",
    "source",
    "from",
    "u",
    "node1",
    "node_1",
    "id_1",
    "id1",
    "source_id",
    "src_id",
    "from_id",
    "sender",
    "head",
];
const DST_NAMES: &[&str] = &[
    "dst",
    "target",
    "to",
    "v",
    "node2",
    "node_2",
    "id_2",
    "id2",
    "target_id",
    "dst_id",
    "to_id",
    "receiver",
    "tail",
];
const WEIGHT_NAMES: &[&str] = &["weight", "weights", "w", "value", "edge_weight"];

/// A CSV edge list with a header: the columns named like `src`/`dst` (or `source`/`target`,
/// `from`/`to`, `id_1`/`id_2`, ...), else the first two; comma, tab or semicolon separated
/// (taken from the header); other columns (a `weight`) are ignored and said.
pub(crate) fn read_csv(path: &Path, undirected: bool) -> Result<Raw> {
    scan(path, |lines| read_csv_lines(lines, path, undirected))
}

fn read_csv_lines(lines: &mut Lines, path: &Path, undirected: bool) -> Result<Raw> {
    let err = |ln: usize, e: String| at_line(path, ln, e);
    // header: the first line that is neither empty nor a # comment
    let header: (usize, Vec<u8>) = loop {
        match lines.next_line()? {
            None => return Err(invalid(path, "empty file: no header and no edges")),
            Some((_, l)) if l.trim_ascii().is_empty() || l.trim_ascii()[0] == b'#' => continue,
            Some((ln, l)) => break (ln, l.to_vec()),
        }
    };
    let (header_line, header) = header;
    let delim = [b',', b'\t', b';'].into_iter().find(|d| header.contains(d));
    let split = |l: &[u8]| -> Vec<Vec<u8>> {
        match delim {
            Some(d) => l.split(|&b| b == d).map(|f| trim(f).to_vec()).collect(),
            None => l
                .split(|&b| b == b' ')
                .filter(|f| !f.is_empty())
                .map(|f| trim(f).to_vec())
                .collect(),
        }
    };
    let cols: Vec<String> = split(&header)
        .iter()
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    if cols.iter().all(|c| parse_id(c.as_bytes()).is_ok()) {
        return Err(err(
            header_line,
            format!(
                "no header: the first line {:?} holds node ids; a CSV edge list needs a header \
             naming its columns (e.g. src,dst); a headerless list of id pairs is --format snap",
                show(&header)
            ),
        ));
    }
    if cols.len() < 2 {
        return Err(err(
            header_line,
            format!(
                "the header {:?} has 1 column: an edge list needs a source and a target column \
             (separated by ',', tab or ';')",
                show(&header)
            ),
        ));
    }
    let find = |names: &[&str]| {
        cols.iter()
            .position(|c| names.contains(&c.to_ascii_lowercase().as_str()))
    };
    let mut notes = Vec::new();
    let (si, di) = match (find(SRC_NAMES), find(DST_NAMES)) {
        (Some(s), Some(d)) if s != d => (s, d),
        _ => {
            notes.push(format!(
                "{}: no src/dst (source/target, from/to, ...) columns in the header: columns \
                 {:?} and {:?} taken as source and target",
                path.display(),
                cols[0],
                cols[1]
            ));
            (0, 1)
        }
    };
    let ignored: Vec<&String> = cols
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != si && *i != di)
        .map(|(_, c)| c)
        .collect();
    if !ignored.is_empty() {
        let weights = ignored
            .iter()
            .any(|c| WEIGHT_NAMES.contains(&c.to_ascii_lowercase().as_str()));
        notes.push(format!(
            "{}: column{} {} ignored{}",
            path.display(),
            if ignored.len() == 1 { "" } else { "s" },
            ignored
                .iter()
                .map(|c| format!("{c:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            if weights {
                ": tma trains on unweighted graphs (edge weights are not used)"
            } else {
                ""
            }
        ));
    }
    let (mut src, mut dst) = (Vec::new(), Vec::new());
    while let Some((ln, line)) = lines.next_line()? {
        if line.trim_ascii().is_empty() {
            continue;
        }
        let fields = split(line);
        if fields.len() != cols.len() {
            return Err(err(
                ln,
                format!(
                    "wrong column count: {} field{} where the header has {} ({})",
                    fields.len(),
                    if fields.len() == 1 { "" } else { "s" },
                    cols.len(),
                    cols.join(",")
                ),
            ));
        }
        let s =
            parse_id(&fields[si]).map_err(|e| err(ln, format!("column {:?}: {e}", cols[si])))?;
        let d =
            parse_id(&fields[di]).map_err(|e| err(ln, format!("column {:?}: {e}", cols[di])))?;
        src.push(s);
        dst.push(d);
    }
    let direction = if undirected {
        Direction::Undirected
    } else {
        notes.push(format!(
            "{}: rows read as directed arcs (pass --undirected to add each arc's reverse)",
            path.display()
        ));
        Direction::Directed
    };
    remap(path, src, dst, direction, notes)
}
