//! Bad bytes: every tma-graph reader of user files turns any byte string into a clean error
//! naming the file (no panic, no allocation beyond what the input justifies). Structure-aware
//! seeded mutation of valid files (docs/decisions/0017-fuzzing.md); per target: the committed
//! corpus (`tests/fuzz_corpus/<target>/`), every truncation of the small seeds, and a fixed
//! number of mutations (`TMA_FUZZ_SCALE` multiplies it, `TMA_FUZZ_SEED` changes the stream).
//! Crashes found so far are named regression tests in `regressions`.

mod harness;
mod mutate;
mod regressions;
mod targets;
#[allow(dead_code)]
#[path = "../it/util.rs"]
mod util;

use std::path::Path;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use mutate::{check, iters, mutate, mutate_json, mutate_npy, truncations, Failures};

#[global_allocator]
static ALLOC: mutate::Watch = mutate::Watch;

/// The committed corpus of `target`: `tests/fuzz_corpus/<target>/*` (file name, bytes).
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz_corpus")
        .join(target);
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Tokens of text edge lists.
const TEXT_DICT: &[&[u8]] = &[
    b"\n",
    b"\r\n",
    b"\t",
    b" ",
    b",",
    b";",
    b"#",
    b"%",
    b"nan",
    b"-",
    b"\xef\xbb\xbf",
    b"\x00",
    b"src,dst\n",
    b"# Undirected graph\n",
    b"\x1f\x8b",
    b"1e9",
];

/// Tokens of the pickles in `.pt` files (opcodes torch emits, the globals it names).
const PICKLE_DICT: &[&[u8]] = &[
    b"\x80\x02",
    b"}",
    b"(",
    b"t",
    b"\x85",
    b"\x86",
    b"R",
    b"Q",
    b"u",
    b"s",
    b"q\x00",
    b"h\x01",
    b"j\xff\xff\xff\xff",
    b"K\xff",
    b"J\xff\xff\xff\x7f",
    b"\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f",
    b"X\xff\xff\xff\xff",
    b"ctorch\nLongStorage\n",
    b"ctorch._utils\n_rebuild_tensor_v2\n",
    b"ccollections\nOrderedDict\n",
    b".",
];

/// One mutation of a `.pt` file: of the zip itself, a member's name, the pickle, or a storage.
fn mutate_pt(rng: &mut ChaCha8Rng, seed: &[u8]) -> Vec<u8> {
    if rng.random_bool(0.3) {
        return mutate(rng, seed, &[b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06"]);
    }
    let mut m = harness::unzip_members(seed);
    let i = rng.random_range(0..m.len());
    match rng.random_range(0..8) {
        0 => {
            m.remove(i);
        }
        1 => m[i].0 = format!("x{}", m[i].0),
        _ => {
            let pkl = m
                .iter()
                .position(|(n, _)| n.ends_with("data.pkl"))
                .unwrap_or(i);
            let j = if rng.random_bool(0.7) { pkl } else { i };
            m[j].1 = mutate(rng, &m[j].1, PICKLE_DICT);
        }
    }
    harness::zip_members(&m, rng.random_bool(0.3))
}

/// One mutation of an input of `target` (in its encoding: see `targets`).
fn mutate_input(target: &str, rng: &mut ChaCha8Rng, seed: &[u8]) -> Vec<u8> {
    match target {
        "npy" => mutate_npy(rng, seed),
        "npz" => {
            if rng.random_bool(0.4) {
                return mutate(rng, seed, &[b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06"]);
            }
            let mut m = harness::unzip_members(seed);
            let i = rng.random_range(0..m.len());
            match rng.random_range(0..6) {
                0 => {
                    m.remove(i);
                }
                1 => m[i].0 = format!("x{}", m[i].0),
                _ => m[i].1 = mutate_npy(rng, &m[i].1),
            }
            harness::zip_members(&m, rng.random_bool(0.5))
        }
        "pt" => mutate_pt(rng, seed),
        "snap" | "csv" => {
            let (&sel, rest) = seed.split_first().unwrap();
            let body = if rest.starts_with(&[0x1f, 0x8b]) && rng.random_bool(0.7) {
                harness::gzip(&mutate(rng, &harness::gunzip(rest), TEXT_DICT))
            } else {
                mutate(rng, rest, TEXT_DICT)
            };
            [&[sel][..], &body].concat()
        }
        _ => {
            // a directory target: keep the file, mutate its bytes as what it is
            let (&sel, rest) = seed.split_first().unwrap();
            let files = targets::dir_files(target);
            let rel = &files[sel as usize % files.len()];
            let body = if rel.ends_with(".gz") {
                match rng.random_range(0..3) {
                    0 => harness::gzip(&mutate(rng, &harness::gunzip(rest), TEXT_DICT)),
                    1 => mutate(rng, &harness::gunzip(rest), TEXT_DICT),
                    _ => mutate(rng, rest, &[]),
                }
            } else if rel.ends_with(".npy") {
                mutate_npy(rng, rest)
            } else if rel.ends_with(".pt") {
                mutate_pt(rng, rest)
            } else if rel.ends_with(".json") {
                mutate_json(rng, rest)
            } else {
                mutate(rng, rest, TEXT_DICT)
            };
            [&[sel][..], &body].concat()
        }
    }
}

/// Runs one case of `target` and records its verdict.
fn case(f: &mut Failures, target: &str, what: &str, input: &[u8]) {
    let v = check(input.len(), || targets::run(target, input));
    f.record(what, input, v);
}

/// The whole run of one target: corpus, truncations of the seeds, `n` mutations.
fn fuzz(target: &str, n: usize, seed: u64) {
    let mut f = Failures::new(target);
    let mut rng = mutate::rng(seed);
    for (name, input) in corpus(target) {
        case(&mut f, target, &format!("corpus {name}"), &input);
    }
    let seeds = targets::seeds(target);
    for (i, s) in seeds.iter().enumerate() {
        // the valid inputs themselves must load (else the mutations start from nothing)
        let (_, out) = targets::run(target, s);
        assert!(out.is_ok(), "{target}: seed {i} does not load: {out:?}");
        let dir_target = !matches!(target, "npy" | "npz" | "pt");
        // every cut of the small files (headers); a directory target has a seed per file
        let (all, random) = match target {
            "convert" => (16, 4),
            _ if dir_target => (48, 8),
            _ => (600, 48),
        };
        for cut in truncations(&mut rng, s, all, random) {
            if dir_target && cut == 0 {
                continue;
            }
            case(&mut f, target, &format!("seed {i} cut at {cut}"), &s[..cut]);
        }
    }
    for k in 0..iters(n) {
        let s = &seeds[rng.random_range(0..seeds.len())];
        let input = mutate_input(target, &mut rng, s);
        case(&mut f, target, &format!("mutation {k}"), &input);
    }
    eprintln!("{target}: {} cases", f.cases);
    f.assert_none();
}

#[test]
fn fuzz_npy() {
    fuzz("npy", 2500, 1);
}

#[test]
fn fuzz_npz() {
    fuzz("npz", 1500, 2);
}

#[test]
fn fuzz_snap() {
    fuzz("snap", 1500, 3);
}

#[test]
fn fuzz_csv() {
    fuzz("csv", 1500, 4);
}

#[test]
fn fuzz_ogb() {
    fuzz("ogb", 1000, 5);
}

#[test]
fn fuzz_dataset_dir() {
    fuzz("dataset", 1500, 6);
}

#[test]
fn fuzz_convert() {
    fuzz("convert", 200, 7);
}

#[test]
fn fuzz_disk_graph() {
    fuzz("disk", 1500, 8);
}

#[test]
fn fuzz_pt() {
    fuzz("pt", 2000, 9);
}

#[test]
fn fuzz_ogbl() {
    fuzz("ogbl", 600, 10);
}

/// The mutation engine itself is deterministic for a seed (a failure reproduces) and changes
/// its input.
#[test]
fn mutations_are_seeded_and_change_the_input() {
    let s = tma_graph::npy::encode(&[0i64, 1, 1, 0], &[2, 2]);
    let a: Vec<Vec<u8>> = {
        let mut r = mutate::rng(9);
        (0..50).map(|_| mutate_npy(&mut r, &s)).collect()
    };
    let b: Vec<Vec<u8>> = {
        let mut r = mutate::rng(9);
        (0..50).map(|_| mutate_npy(&mut r, &s)).collect()
    };
    assert_eq!(a, b);
    assert!(a.iter().filter(|m| **m != s).count() >= 45);
}

/// The checker catches what it must: a panic, an error that does not name the file, a huge
/// allocation.
#[test]
fn the_checker_flags_panics_unnamed_errors_and_huge_allocations() {
    let named = || "f.npy".to_string();
    assert!(check(1, || panic!("boom")).unwrap().contains("boom"));
    assert!(check(1, || (named(), Err("bad header".into())))
        .unwrap()
        .contains("does not name"));
    assert!(check(1, || (named(), Err("f.npy: bad header".into()))).is_none());
    let v = check(1, || {
        let v = vec![1u8; 200 << 20];
        std::hint::black_box(&v);
        (named(), Ok(()))
    });
    assert!(v.unwrap().contains("allocated"));
}

/// Writes every target's seeds to `tests/fuzz_corpus/<target>/seed-N`, the starting corpus of
/// the coverage-guided runs (`fuzz/run.sh`): `cargo test --test fuzz -- --ignored`.
#[test]
#[ignore = "writes the committed seed corpus"]
fn write_seed_corpus() {
    for t in targets::TARGETS {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fuzz_corpus")
            .join(t);
        std::fs::create_dir_all(&dir).unwrap();
        for (i, s) in targets::seeds(t).iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i}")), s).unwrap();
        }
    }
}
