//! One harness per tma-graph reader of user files: each writes the bytes where the reader
//! looks (a file, or one file of an otherwise valid directory), calls the reader's public entry
//! and gives `Err(text)` for a clean error, `Ok(())` otherwise; panics propagate (the caller,
//! `mutate::check`, catches them). Shared with the coverage-guided targets in `fuzz/`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use tma_graph::disk::{convert_npy_dir, ConvertOptions};
use tma_graph::formats::{self, Format, NpzArchive};
use tma_graph::npy::{self, NpyFile};
use tma_graph::{LoadOptions, MappedGraph};

/// A reader's outcome as the harness sees it.
pub type Outcome = Result<(), String>;

fn text<E: std::fmt::Display>(r: Result<impl Sized, E>) -> Outcome {
    r.map(|_| ()).map_err(|e| e.to_string())
}

/// `main`, unless one of the `side` calls (whose refusal of a valid input is fine) gave an
/// error that does not name `path`: that error then, for the checker to report.
fn also(main: Outcome, side: Vec<Outcome>, path: &Path) -> Outcome {
    let name = path.display().to_string();
    for r in side {
        if let Err(e) = r {
            if !e.contains(&name) {
                return Err(e);
            }
        }
    }
    main
}

/// Every typed view of an `.npy` file that parsed (each must be Ok or a clean error).
fn npy_views(f: &NpyFile) -> Outcome {
    let _ = f.to_array::<i64>();
    let _ = f.to_array::<i32>();
    let _ = f.to_array::<u64>();
    let _ = f.to_array::<u32>();
    let _ = f.to_array::<f64>();
    let _ = f.to_array::<f32>();
    let _ = f.to_array::<u8>();
    let _ = f.to_array::<bool>();
    let _ = f.expect_shape(&[Some(2), None]);
    text(f.ids(1 << 20))
}

/// `.npy` (crates/tma-graph/src/npy.rs): `NpyFile::read` and its typed accessors, `npy::read`
/// and `npy::map` (the mapped reader of partition directories) on the file `dir/fuzz.npy`.
pub fn npy_file(dir: &Path, data: &[u8]) -> Outcome {
    let path = dir.join("fuzz.npy");
    std::fs::write(&path, data).unwrap();
    let f = NpyFile::read(&path);
    if let Ok(f) = &f {
        let _ = npy_views(f);
    }
    let side = vec![
        text(npy::read::<i64>(&path, &[Some(2), None])),
        text(npy::map::<u64>(&path, &[None])),
        text(npy::map::<u32>(&path, &[None])),
        text(npy::map::<f32>(&path, &[None, None])),
        text(npy::read::<f32>(&path, &[None])),
    ];
    also(text(f), side, &path)
}

/// A `.npy` dataset directory (crates/tma-graph/src/dataset.rs `load_dataset`, through
/// `formats::load`) whose file `name` holds `data`, the others valid; restores the file after.
pub fn dataset_file(dir: &Path, name: &str, data: &[u8]) -> Outcome {
    let path = dir.join(name);
    let old = std::fs::read(&path).ok();
    std::fs::write(&path, data).unwrap();
    let r = text(formats::load(dir, Some(Format::Tma)));
    let r2 = text(tma_graph::load_dataset(
        dir,
        &LoadOptions {
            split_index: 1,
            allow_split_overlap: true,
            ..LoadOptions::default()
        },
    ));
    let r = also(r, vec![r2], dir);
    match old {
        Some(b) => std::fs::write(&path, b).unwrap(),
        None => std::fs::remove_file(&path).unwrap(),
    }
    r
}

/// `convert_npy_dir` (crates/tma-graph/src/disk/convert.rs, whose `edge_header` is the second
/// `.npy` preamble parser) on the directory `src` whose file `name` holds `data`; the output
/// goes to a fresh `out`, removed after.
pub fn convert_file(src: &Path, out: &Path, name: &str, data: &[u8]) -> Outcome {
    let path = src.join(name);
    let old = std::fs::read(&path).ok();
    std::fs::write(&path, data).unwrap();
    let r = text(convert_npy_dir(
        src,
        out,
        &ConvertOptions {
            memory_budget: 1 << 20,
            split_index: 0,
        },
        &(),
    ));
    let r = r.and_then(|_| text(MappedGraph::open(out).and_then(|g| g.validate())));
    let _ = std::fs::remove_dir_all(out);
    match old {
        Some(b) => std::fs::write(&path, b).unwrap(),
        None => std::fs::remove_file(&path).unwrap(),
    }
    r
}

/// The on-disk graph (crates/tma-graph/src/disk/mapped.rs) in `dir` whose file `name` (the
/// manifest `tma-graph.json` or an array `.bin`) holds `data`: `MappedGraph::open`, then
/// `validate`, `verify_checksums`, `to_dataset` and the summary; restores the file after.
pub fn disk_file(dir: &Path, name: &str, data: &[u8]) -> Outcome {
    let path = dir.join(name);
    let old = std::fs::read(&path).ok();
    std::fs::write(&path, data).unwrap();
    let r = (|| {
        let g = MappedGraph::open(dir).map_err(|e| e.to_string())?;
        let _ = g.summary();
        let v = text(g.validate());
        let c = text(g.verify_checksums());
        let d = text(g.to_dataset(&LoadOptions::default()));
        if v.is_ok() {
            // what a validated graph offers must be usable as is
            let csr = g.csr();
            for u in 0..csr.num_nodes() {
                let _ = csr.neighbors(u);
            }
        }
        v.and(c).and(d)
    })();
    let r2 = text(tma_graph::load_dataset(dir, &LoadOptions::default()));
    match old {
        Some(b) => std::fs::write(&path, b).unwrap(),
        None => std::fs::remove_file(&path).unwrap(),
    }
    r.and(r2)
}

/// A `.npz` archive (crates/tma-graph/src/formats/npz.rs) at `dir/fuzz.npz`: the dataset
/// reader, format detection, and every member through `NpzArchive`.
pub fn npz_file(dir: &Path, data: &[u8]) -> Outcome {
    let path = dir.join("fuzz.npz");
    std::fs::write(&path, data).unwrap();
    if let Ok(mut a) = NpzArchive::open(&path) {
        for k in a.keys() {
            if let Ok(f) = a.array(&k) {
                let _ = npy_views(&f);
            }
        }
    }
    let side = vec![text(formats::load(&path, None))];
    also(text(formats::load(&path, Some(Format::Npz))), side, &path)
}

/// A `.npz` archive written from `members` (name, bytes; stored or deflated) at `dir/fuzz.npz`.
pub fn zip_members(members: &[(String, Vec<u8>)], deflate: bool) -> Vec<u8> {
    use std::io::Write;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default().compression_method(if deflate {
        zip::CompressionMethod::Deflated
    } else {
        zip::CompressionMethod::Stored
    });
    for (name, b) in members {
        w.start_file(name.as_str(), opts).unwrap();
        w.write_all(b).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// The members of a `.npz` archive (name, bytes).
pub fn unzip_members(data: &[u8]) -> Vec<(String, Vec<u8>)> {
    use std::io::Read;
    let mut z = zip::ZipArchive::new(std::io::Cursor::new(data)).unwrap();
    (0..z.len())
        .map(|i| {
            let mut f = z.by_index(i).unwrap();
            let mut b = vec![];
            f.read_to_end(&mut b).unwrap();
            (f.name().to_string(), b)
        })
        .collect()
}

/// A SNAP edge list (crates/tma-graph/src/formats/edgelist.rs, text.rs) at `dir/NAME` (`name`
/// chooses detection: `.txt`, `.txt.gz`, `ungraph.txt`).
pub fn snap_file(dir: &Path, name: &str, data: &[u8]) -> Outcome {
    let path = dir.join(name);
    std::fs::write(&path, data).unwrap();
    let side = vec![text(formats::load(&path, None))];
    also(text(formats::load(&path, Some(Format::Snap))), side, &path)
}

/// A CSV edge list (crates/tma-graph/src/formats/edgelist.rs) at `dir/NAME`.
pub fn csv_file(dir: &Path, name: &str, data: &[u8]) -> Outcome {
    let path = dir.join(name);
    std::fs::write(&path, data).unwrap();
    let side = vec![text(formats::load(&path, None))];
    also(text(formats::load(&path, Some(Format::Csv))), side, &path)
}

/// An OGB directory (crates/tma-graph/src/formats/ogb.rs) at `root` whose file `rel` holds
/// `data`, the others as in the fixture; restores the file after.
pub fn ogb_file(root: &Path, rel: &str, data: &[u8]) -> Outcome {
    let path = root.join(rel);
    let old = std::fs::read(&path).ok();
    std::fs::write(&path, data).unwrap();
    let r = text(formats::load(root, Some(Format::Ogb)));
    let r2 = text(formats::read(
        &root.join("raw"),
        &formats::ReadOptions {
            format: None,
            undirected: true,
        },
        &LoadOptions {
            split_index: 1,
            ..LoadOptions::default()
        },
    ));
    let r = also(r, vec![r2], root);
    match old {
        Some(b) => std::fs::write(&path, b).unwrap(),
        None => std::fs::remove_file(&path).unwrap(),
    }
    r
}

/// `.pt` (crates/tma-graph/src/formats/torch.rs): `read_pt` on the file `dir/fuzz.pt` and
/// every typed view of what it read.
pub fn pt_file(dir: &Path, data: &[u8]) -> Outcome {
    let path = dir.join("fuzz.pt");
    std::fs::write(&path, data).unwrap();
    let r = formats::torch::read_pt(&path);
    if let Ok(t) = &r {
        for x in t.values() {
            let _ = (x.to_i64(), x.to_f64(), x.numel());
        }
    }
    text(r)
}

/// An OGB link-property directory (`ogbl_citation2/` or `ogbl_collab/` under `root`, the one
/// `rel` is in) with file `rel` replaced by `data`: `formats::load` on it, and the on-disk
/// format written from it and opened back.
pub fn ogbl_file(root: &Path, rel: &str, data: &[u8]) -> Outcome {
    let path = root.join(rel);
    let ds_root = root.join(rel.split('/').next().unwrap());
    let old = std::fs::read(&path).ok();
    std::fs::write(&path, data).unwrap();
    let loaded = formats::load(&ds_root, None);
    let side = match &loaded {
        Ok(ds) => {
            let out = root.join("..").join("ogbl-disk");
            let _ = std::fs::remove_dir_all(&out);
            tma_graph::disk::write_dataset(ds, &out, &tma_graph::disk::Provenance::new("fuzz"))
                .unwrap();
            let back = MappedGraph::open(&out)
                .and_then(|g| {
                    g.validate()
                        .and_then(|_| g.to_dataset(&LoadOptions::default()))
                })
                .unwrap();
            assert_eq!(
                back.link_split.map(|l| (l.val_pos, l.protocol)),
                ds.link_split.clone().map(|l| (l.val_pos, l.protocol))
            );
            std::fs::remove_dir_all(&out).unwrap();
            vec![]
        }
        Err(_) => vec![],
    };
    let r = also(text(loaded), side, &ds_root);
    match old {
        Some(b) => std::fs::write(&path, b).unwrap(),
        None => std::fs::remove_file(&path).unwrap(),
    }
    r
}

/// Copies the directory tree `src` to `dst`.
pub fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), to).unwrap();
        }
    }
}

/// The files of `dir` (relative paths, sorted), recursively.
pub fn files_of(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, d: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                walk(base, &e.path(), out);
            } else {
                out.push(
                    e.path()
                        .strip_prefix(base)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    let mut v = vec![];
    walk(dir, dir, &mut v);
    v.sort();
    v
}

/// `crates/tma-graph/tests/fixtures/formats/NAME` (the crate directory from `TMA_GRAPH_DIR`
/// when set: the coverage-guided binary is built in another package).
pub fn fixture(name: &str) -> PathBuf {
    std::env::var_os("TMA_GRAPH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf())
        .join("tests/fixtures/formats")
        .join(name)
}

/// Gunzips `b` when it is gzip data, else returns it.
pub fn gunzip(b: &[u8]) -> Vec<u8> {
    use std::io::Read;
    if b.starts_with(&[0x1f, 0x8b]) {
        let mut out = vec![];
        flate2::read::GzDecoder::new(b)
            .read_to_end(&mut out)
            .unwrap();
        out
    } else {
        b.to_vec()
    }
}

/// Gzips `b`.
pub fn gzip(b: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}
