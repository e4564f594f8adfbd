//! Bad bytes in a `--config` TOML file: any byte string is a clean error naming the file from
//! `opts::with_config_file`, and `opts::resolve` (durations, sizes, names) never
//! panics on what parsed. Seeded mutation of valid config files, with the engine of tma-graph's
//! `fuzz` tests (docs/decisions/0017-fuzzing.md); this binary keeps its own allocator, so the
//! engine's allocation watch is not used here.

#[path = "../../tma-graph/tests/fuzz/mutate.rs"]
mod mutate;

use rand::Rng;

use crate::opts::{resolve, with_config_file, TrainOpts};
use mutate::{check, iters, mutate, truncations, Failures};

/// Tokens of TOML and of the option values `resolve` parses.
const DICT: &[&[u8]] = &[
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
    b"\"18446744073709551615 GiB\"",
    b"\"-1\"",
    b"\"all\"",
    b"[a]\n",
    b"\"\\u0000\"",
];

/// Valid config files: every option the CLI's TOML takes, as a user writes them.
const SEEDS: &[&str] = &[
    "task = \"link\"\nmethod = \"random-tma\"\nnum_trainers = 4\nsync_every = \"2s\"\ntime_limit = \"1min\"\n\
     round_timeout = \"3s\"\nlr = 0.01\nhidden = 64\nnum_layers = 2\ndropout = 0.5\n\
     model = \"sage\"\nseed = 7\nmetric = \"mrr\"\n",
    "task = \"node\"\nmethod = \"super-tma\"\nsuper_nodes = 100\nfanouts = [10, 5]\n\
     batch_size = 512\nval_check_interval = \"500ms\"\nsplit_index = 2\neval_memory = \"1GiB\"\nweight_decay = 0.0\nthreads = 2\n",
    "task = \"link\"\neval_num_neg = 100\neval_max_edges = 1000\nmatmul_precision = \"highest\"\n\
     average_weight = \"edges\"\nsync_ramp = 4\nsplit_index = 1\n",
];

/// One case: the file `dir/config.toml` holding `data`, read as `tma train --config` does.
fn run(dir: &std::path::Path, data: &[u8]) -> (String, Result<(), String>) {
    let path = dir.join("config.toml");
    std::fs::write(&path, data).unwrap();
    let o = TrainOpts {
        config: Some(path.clone()),
        ..TrainOpts::default()
    };
    let name = path.display().to_string();
    let out = match with_config_file(o.clone()) {
        Err(e) => Err(format!("{e:#}")),
        // what parsed: the options are resolved (errors there name the option, not the file)
        Ok(_) => {
            let _ = resolve(o);
            Ok(())
        }
    };
    (name, out)
}

#[test]
fn fuzz_cli_config_toml() {
    let dir = tempfile::tempdir().unwrap();
    for (i, s) in SEEDS.iter().enumerate() {
        let (_, out) = run(dir.path(), s.as_bytes());
        assert!(out.is_ok(), "seed {i} does not parse: {out:?}");
        if let Err(e) = resolve(TrainOpts {
            config: Some(dir.path().join("config.toml")),
            ..TrainOpts::default()
        }) {
            panic!("seed {i} does not resolve: {e:#}");
        }
    }
    let mut f = Failures::new("cli_config_toml");
    let mut rng = mutate::rng(21);
    for s in SEEDS {
        for cut in truncations(&mut rng, s.as_bytes(), 0, 48) {
            let input = &s.as_bytes()[..cut];
            f.record(
                &format!("cut at {cut}"),
                input,
                check(input.len(), || run(dir.path(), input)),
            );
        }
    }
    for k in 0..iters(2000) {
        let s = SEEDS[rng.random_range(0..SEEDS.len())];
        let input = mutate(&mut rng, s.as_bytes(), DICT);
        f.record(
            &format!("mutation {k}"),
            &input,
            check(input.len(), || run(dir.path(), &input)),
        );
    }
    f.assert_none();
}
