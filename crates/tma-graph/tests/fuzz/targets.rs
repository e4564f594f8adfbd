//! The fuzz targets of tma-graph as byte-string entries: `run(name, input)`. A directory
//! target's input is one selector byte (which file of the valid directory, `files[b % len]`)
//! followed by that file's new bytes; the valid directory is built once per thread. The same
//! encoding is used by the committed corpora (`tests/fuzz_corpus/<target>/`) and by the
//! coverage-guided targets in `fuzz/`.
#![allow(dead_code)]

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use super::harness::{self, Outcome};

/// The names of the targets, in order.
pub const TARGETS: &[&str] = &[
    "npy", "npz", "snap", "csv", "ogb", "dataset", "convert", "disk", "pt", "ogbl",
];

/// One thread's valid directories (built on first use).
struct Scratch {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    dataset: PathBuf,
    disk: PathBuf,
    ogb: PathBuf,
    /// `ogbl_citation2/` and `ogbl_collab/` (OGB link-property directories).
    ogbl: PathBuf,
    files: PathBuf,
}

thread_local! {
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

/// The valid `.npy` dataset directory every directory target starts from.
pub fn write_dataset(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    super::util::write_fixture(dir);
    // a second split kind and labels the loader reads when index files are absent
    let masks = |v: [u8; 4]| {
        let mut b = tma_graph::npy::encode_header("|b1", &[2, 4], tma_graph::npy::Order::C);
        b.extend_from_slice(&v);
        b.extend_from_slice(&v);
        b
    };
    std::fs::write(dir.join("train_masks.npy"), masks([1, 1, 0, 0])).unwrap();
    std::fs::write(dir.join("val_masks.npy"), masks([0, 0, 1, 0])).unwrap();
    std::fs::write(dir.join("test_masks.npy"), masks([0, 0, 0, 1])).unwrap();
}

fn with_scratch<T>(f: impl FnOnce(&Scratch) -> T) -> T {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let s = s.get_or_insert_with(|| {
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().to_path_buf();
            let dataset = root.join("dataset");
            write_dataset(&dataset);
            let disk = root.join("disk");
            tma_graph::disk::convert_npy_dir(
                &dataset,
                &disk,
                &tma_graph::disk::ConvertOptions {
                    memory_budget: 1 << 20,
                    split_index: 0,
                },
                &(),
            )
            .unwrap();
            let ogb = root.join("ogbn_tiny");
            harness::copy_tree(&harness::fixture("ogbn_tiny"), &ogb);
            let ogbl = root.join("ogbl");
            for d in ["ogbl_citation2", "ogbl_collab"] {
                harness::copy_tree(&harness::fixture(&format!("ogbl/{d}")), &ogbl.join(d));
            }
            let files = root.join("files");
            std::fs::create_dir_all(&files).unwrap();
            Scratch {
                _tmp: tmp,
                root,
                dataset,
                disk,
                ogb,
                ogbl,
                files,
            }
        });
        f(s)
    })
}

/// The files a directory target chooses from (relative paths, sorted).
pub fn dir_files(target: &str) -> Vec<String> {
    with_scratch(|s| match target {
        "dataset" | "convert" => harness::files_of(&s.dataset),
        "disk" => harness::files_of(&s.disk),
        "ogb" => harness::files_of(&s.ogb),
        "ogbl" => harness::files_of(&s.ogbl),
        _ => vec![],
    })
}

/// The valid bytes of file `rel` of a directory target.
pub fn dir_file_bytes(target: &str, rel: &str) -> Vec<u8> {
    with_scratch(|s| {
        let d = match target {
            "dataset" | "convert" => &s.dataset,
            "disk" => &s.disk,
            "ogbl" => &s.ogbl,
            _ => &s.ogb,
        };
        std::fs::read(d.join(rel)).unwrap()
    })
}

/// A directory target's input: selector of `rel`, then `content`.
pub fn encode(target: &str, rel: &str, content: &[u8]) -> Vec<u8> {
    let i = dir_files(target).iter().position(|f| f == rel).unwrap();
    let mut v = vec![i as u8];
    v.extend_from_slice(content);
    v
}

/// Runs target `name` on `input`: the text the error must contain (the user's path) and the
/// reader's outcome.
pub fn run(name: &str, input: &[u8]) -> (String, Outcome) {
    with_scratch(|s| {
        let pick = |files: Vec<String>| -> Option<(String, &[u8])> {
            let (&sel, rest) = input.split_first()?;
            Some((files[sel as usize % files.len()].clone(), rest))
        };
        let none = || (String::new(), Ok(()));
        match name {
            "npy" => (
                s.files.join("fuzz.npy").display().to_string(),
                harness::npy_file(&s.files, input),
            ),
            "npz" => (
                s.files.join("fuzz.npz").display().to_string(),
                harness::npz_file(&s.files, input),
            ),
            // the first byte picks the file name (detection), the rest is the file
            "snap" | "csv" => {
                let names: &[&str] = if name == "snap" {
                    &["g.txt", "g.ungraph.txt", "g.edges", "g.txt.gz"]
                } else {
                    &["g.csv", "g.tsv", "g.csv.gz"]
                };
                let Some((&sel, rest)) = input.split_first() else {
                    return none();
                };
                let file = names[sel as usize % names.len()];
                let out = if name == "snap" {
                    harness::snap_file(&s.files, file, rest)
                } else {
                    harness::csv_file(&s.files, file, rest)
                };
                let _ = std::fs::remove_file(s.files.join(file));
                (s.files.join(file).display().to_string(), out)
            }
            "pt" => (
                s.files.join("fuzz.pt").display().to_string(),
                harness::pt_file(&s.files, input),
            ),
            "ogbl" => match pick(harness::files_of(&s.ogbl)) {
                Some((rel, b)) => (
                    s.ogbl
                        .join(rel.split('/').next().unwrap())
                        .display()
                        .to_string(),
                    harness::ogbl_file(&s.ogbl, &rel, b),
                ),
                None => none(),
            },
            "ogb" => match pick(harness::files_of(&s.ogb)) {
                Some((rel, b)) => (
                    s.ogb.display().to_string(),
                    harness::ogb_file(&s.ogb, &rel, b),
                ),
                None => none(),
            },
            "dataset" => match pick(harness::files_of(&s.dataset)) {
                Some((rel, b)) => (
                    s.dataset.display().to_string(),
                    harness::dataset_file(&s.dataset, &rel, b),
                ),
                None => none(),
            },
            "convert" => match pick(harness::files_of(&s.dataset)) {
                Some((rel, b)) => (
                    s.root.display().to_string(),
                    harness::convert_file(&s.dataset, &s.root.join("out"), &rel, b),
                ),
                None => none(),
            },
            "disk" => match pick(harness::files_of(&s.disk)) {
                Some((rel, b)) => (
                    s.disk.display().to_string(),
                    harness::disk_file(&s.disk, &rel, b),
                ),
                None => none(),
            },
            other => panic!("no fuzz target {other}"),
        }
    })
}

/// The valid inputs a target's mutations start from (in its input encoding).
pub fn seeds(name: &str) -> Vec<Vec<u8>> {
    use tma_graph::npy::{encode, encode_ordered, Order};
    let read = |p: &str| std::fs::read(harness::fixture(p)).unwrap();
    match name {
        "npy" => vec![
            encode(&[0i64, 1, 1, 0], &[2, 2]),
            encode_ordered(&[0i64, 1, 2, 3, 4, 5], &[2, 3], Order::Fortran),
            encode(&[1.5f32, 2.0, -1.0], &[3]),
            encode(&[7u32], &[1]),
            encode(&[3u64, 1], &[2]),
            encode(&[true, false, true, true], &[2, 2]),
            encode::<f64>(&[], &[0]),
            encode(&[5i64], &[]),
        ],
        "npz" => vec![read("tiny.npz"), read("directed_stored.npz")],
        "snap" => {
            let t = read("snap_tiny.txt");
            let gz = read("tiny.ungraph.txt.gz");
            vec![
                [&[0u8][..], &t].concat(),
                [&[1u8][..], &harness::gunzip(&gz)].concat(),
                [&[3u8][..], &gz].concat(),
            ]
        }
        "csv" => {
            let t = read("edges.csv");
            vec![
                [&[0u8][..], &t].concat(),
                [&[1u8][..], b"u\tv\n1\t2\n2\t3\n".as_slice()].concat(),
                [&[2u8][..], &harness::gzip(&t)].concat(),
            ]
        }
        "pt" => [
            "ogbl_citation2/split/time/valid.pt",
            "ogbl_citation2/split/time/train.pt",
            "ogbl_collab/split/time/valid.pt",
            "ogbl_collab/split/time/train.pt",
        ]
        .iter()
        .map(|f| read(&format!("ogbl/{f}")))
        .collect(),
        "ogb" | "dataset" | "convert" | "disk" | "ogbl" => {
            let files = dir_files(name);
            files
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let mut v = vec![i as u8];
                    v.extend(dir_file_bytes(name, f));
                    v
                })
                .collect()
        }
        other => panic!("no fuzz target {other}"),
    }
}
