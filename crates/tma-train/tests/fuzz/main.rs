//! Bad bytes: tma-train's readers of user files (partition directories, checkpoints,
//! safetensors models, `TrainConfig` TOML) turn any byte string into a clean error naming the
//! file. Structure-aware seeded mutation of valid files, as in tma-graph's `fuzz` tests
//! (docs/decisions/0017-fuzzing.md), whose engine this includes.

mod harness;
#[path = "../../../tma-graph/tests/fuzz/mutate.rs"]
mod mutate;
mod regressions;

use std::path::Path;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use mutate::{check, iters, mutate, mutate_json, mutate_npy, truncations, Failures, HUGE_U64};

#[global_allocator]
static ALLOC: mutate::Watch = mutate::Watch;

/// The committed corpus of `target`: `tests/fuzz_corpus/<target>/*`.
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

/// Tokens of TOML.
const TOML_DICT: &[&[u8]] = &[
    b"=",
    b"\"",
    b"'",
    b"[",
    b"]",
    b"{",
    b"}",
    b"\n",
    b"#",
    b"true",
    b"nan",
    b"inf",
    b"-inf",
    b"1e400",
    b"99999999999999999999",
    b"\"1000000000000y\"",
    b"\"18446744073709551615s\"",
    b"[a]\n",
    b"[[a]]\n",
    b"\"\\u0000\"",
];

/// A structure-aware mutation of a safetensors file: its JSON header mutated (length kept
/// consistent), a huge header length, or byte-level.
pub fn mutate_safetensors(rng: &mut ChaCha8Rng, valid: &[u8]) -> Vec<u8> {
    if valid.len() < 8 || rng.random_bool(0.3) {
        return mutate(rng, valid, &[b"F32", b"dtype", b"shape", b"data_offsets"]);
    }
    let n = u64::from_le_bytes(valid[..8].try_into().unwrap()) as usize;
    let Some(header) = valid.get(8..8 + n) else {
        return mutate(rng, valid, &[]);
    };
    let data = &valid[8 + n..];
    if rng.random_bool(0.2) {
        let mut out = HUGE_U64[rng.random_range(0..HUGE_U64.len())]
            .to_le_bytes()
            .to_vec();
        out.extend_from_slice(&valid[8..]);
        return out;
    }
    let h = mutate_json(rng, header);
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out
}

fn mutate_input(target: &str, rng: &mut ChaCha8Rng, seed: &[u8]) -> Vec<u8> {
    match target {
        "safetensors" => mutate_safetensors(rng, seed),
        "config_toml" => mutate(rng, seed, TOML_DICT),
        _ => {
            let (&sel, rest) = seed.split_first().unwrap();
            let files = harness::dir_files(target);
            let rel = &files[(sel & !harness::FIX_HASH) as usize % files.len()];
            let body = if rel.ends_with(".npy") {
                mutate_npy(rng, rest)
            } else if rel.ends_with(".json") {
                mutate_json(rng, rest)
            } else if rel.ends_with(".safetensors") {
                mutate_safetensors(rng, rest)
            } else {
                mutate(rng, rest, &[])
            };
            [&[sel][..], &body].concat()
        }
    }
}

fn case(f: &mut Failures, target: &str, what: &str, input: &[u8]) {
    let v = check(input.len(), || harness::run(target, input));
    f.record(what, input, v);
}

fn fuzz(target: &str, n: usize, seed: u64) {
    let mut f = Failures::new(target);
    let mut rng = mutate::rng(seed);
    for (name, input) in corpus(target) {
        case(&mut f, target, &format!("corpus {name}"), &input);
    }
    let seeds = harness::seeds(target);
    let dir_target = target.starts_with("store") || target == "checkpoint";
    for (i, s) in seeds.iter().enumerate() {
        let (_, out) = harness::run(target, s);
        assert!(out.is_ok(), "{target}: seed {i} does not load: {out:?}");
        let (all, random) = if dir_target { (24, 4) } else { (600, 48) };
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
fn fuzz_store_node() {
    fuzz("store_node", 400, 11);
}

#[test]
fn fuzz_store_link() {
    fuzz("store_link", 400, 12);
}

#[test]
fn fuzz_checkpoint() {
    fuzz("checkpoint", 1000, 13);
}

#[test]
fn fuzz_safetensors() {
    fuzz("safetensors", 2000, 14);
}

#[test]
fn fuzz_config_toml() {
    fuzz("config_toml", 2000, 15);
}

/// Writes every target's seeds to `tests/fuzz_corpus/<target>/seed-N`, the starting corpus of
/// the coverage-guided runs (`fuzz/run.sh`): `cargo test --test fuzz -- --ignored`.
#[test]
#[ignore = "writes the committed seed corpus"]
fn write_seed_corpus() {
    for t in harness::TARGETS {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fuzz_corpus")
            .join(t);
        std::fs::create_dir_all(&dir).unwrap();
        for (i, s) in harness::seeds(t).iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i}")), s).unwrap();
        }
    }
}
