//! The fuzz targets of tma-train's readers of user files, as byte-string entries
//! (`run(name, input)`, the encoding of crates/tma-graph/tests/fuzz/targets.rs): partition
//! directories (`store`), checkpoints (`checkpoint`), safetensors models (`safetensors`) and
//! `TrainConfig` in TOML (`config_toml`). Shared with the coverage-guided targets in `fuzz/`.
#![allow(dead_code)]

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use tma_graph::{generate_sbm, SbmConfig};
use tma_nn::ParamSet;
use tma_train::evaluation::record::{Observer, RoundRecord};
use tma_train::store::checkpoint::{load_checkpoint, read_state, Checkpointer};
use tma_train::store::{read_all, read_manifest, read_part, write_partition_dir};
use tma_train::{EvalResult, Task, TrainConfig};

/// A reader's outcome: `Err(text)` for a clean error.
pub type Outcome = Result<(), String>;

/// The names of the targets, in order.
pub const TARGETS: &[&str] = &[
    "store_node",
    "store_link",
    "checkpoint",
    "safetensors",
    "config_toml",
];

fn text<E: std::fmt::Display>(r: Result<impl Sized, E>) -> Outcome {
    r.map(|_| ()).map_err(|e| e.to_string())
}

/// The model every checkpoint and safetensors case uses.
pub fn template() -> ParamSet {
    ParamSet::from_shapes(&[
        ("enc.0.weight".into(), vec![3, 2]),
        ("enc.0.bias".into(), vec![2]),
    ])
}

struct Scratch {
    _tmp: tempfile::TempDir,
    files: PathBuf,
    store_node: PathBuf,
    store_link: PathBuf,
    run: PathBuf,
}

thread_local! {
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

fn write_store(dir: &Path, task: Task) {
    let cfg = TrainConfig {
        task,
        num_trainers: 2,
        eval_num_neg: 3,
        eval_max_edges: 8,
        ..TrainConfig::defaults_for(task)
    };
    let ds = generate_sbm(&SbmConfig {
        num_nodes: 40,
        feature_dim: 3,
        seed: 5,
        ..SbmConfig::default()
    });
    let p = tma_train::prepare(ds, &cfg).unwrap();
    write_partition_dir(dir, &p, &cfg, "sbm", false).unwrap();
}

fn record(round: u64, val: f64, is_best: bool) -> RoundRecord {
    RoundRecord {
        round,
        elapsed_s: round as f64 * 2.0,
        participants: vec![0],
        missing: vec![],
        steps: vec![round],
        epochs: vec![0],
        train_loss: 0.5,
        val: EvalResult {
            metric: "accuracy".into(),
            value: val,
            all: Default::default(),
        },
        eval_s: 0.0,
        eval_cpu_s: 0.0,
        is_best,
        skipped_slots: 0,
        late: None,
        check: false,
        server_step: None,
        restored: None,
        restored_check: false,
        correction: None,
    }
}

fn write_checkpoint(run: &Path) {
    let t = template();
    let mut c = Checkpointer::new(run, t.clone(), 7, 0, Some("abc".into()), None, None).unwrap();
    let n = t.data.len();
    c.on_round_model(&record(1, 0.5, true), &vec![1.0; n])
        .unwrap();
    c.on_round_model(&record(2, 0.4, false), &vec![2.0; n])
        .unwrap();
}

fn with_scratch<T>(f: impl FnOnce(&Scratch) -> T) -> T {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        let s = s.get_or_insert_with(|| {
            let tmp = tempfile::tempdir().unwrap();
            let files = tmp.path().join("files");
            std::fs::create_dir_all(&files).unwrap();
            let store_node = tmp.path().join("parts-node");
            write_store(&store_node, Task::Node);
            let store_link = tmp.path().join("parts-link");
            write_store(&store_link, Task::Link);
            let run = tmp.path().join("run");
            write_checkpoint(&run);
            Scratch {
                _tmp: tmp,
                files,
                store_node,
                store_link,
                run,
            }
        });
        f(s)
    })
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

fn dir_of<'a>(s: &'a Scratch, target: &str) -> &'a Path {
    match target {
        "store_node" => &s.store_node,
        "store_link" => &s.store_link,
        _ => &s.run,
    }
}

/// The files a directory target chooses from.
pub fn dir_files(target: &str) -> Vec<String> {
    with_scratch(|s| files_of(dir_of(s, target)))
}

/// The valid bytes of file `rel` of a directory target.
pub fn dir_file_bytes(target: &str, rel: &str) -> Vec<u8> {
    with_scratch(|s| std::fs::read(dir_of(s, target).join(rel)).unwrap())
}

/// Selector bit of the store targets: after writing the file, record its new sha256 in
/// `manifest.json` (so the mutation reaches the array readers behind the hash check).
pub const FIX_HASH: u8 = 0x80;

/// A directory target's input: selector of `rel` (| `flags`), then `content`.
pub fn encode(target: &str, rel: &str, flags: u8, content: &[u8]) -> Vec<u8> {
    let i = dir_files(target).iter().position(|f| f == rel).unwrap();
    let mut v = vec![i as u8 | flags];
    v.extend_from_slice(content);
    v
}

/// Writes `data` to `dir/rel`, runs `f`, restores every file it changed.
fn with_file(
    dir: &Path,
    rel: &str,
    data: &[u8],
    fix_hash: bool,
    f: impl FnOnce() -> Outcome,
) -> Outcome {
    let path = dir.join(rel);
    let mpath = dir.join("manifest.json");
    let old = std::fs::read(&path).ok();
    let old_manifest = std::fs::read(&mpath).ok();
    std::fs::write(&path, data).unwrap();
    if fix_hash && rel != "manifest.json" {
        if let Some(m) = &old_manifest {
            let mut v: serde_json::Value = serde_json::from_slice(m).unwrap();
            let h: String = Sha256::digest(data)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            v["files"][rel] = serde_json::Value::String(h);
            std::fs::write(&mpath, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
        }
    }
    let r = f();
    match old {
        Some(b) => std::fs::write(&path, b).unwrap(),
        None => std::fs::remove_file(&path).unwrap(),
    }
    if let Some(m) = old_manifest {
        std::fs::write(&mpath, m).unwrap();
    }
    r
}

/// A partition directory (crates/tma-train/src/store/mod.rs): `read_manifest`, `read_all`, and
/// each part alone.
pub fn store_dir(dir: &Path) -> Outcome {
    let m = read_manifest(dir).map_err(|e| e.to_string())?;
    for t in 0..m.parts.len().min(4) {
        text(read_part(dir, &m, t))?;
    }
    text(read_all(dir, &m))
}

/// A checkpoint (crates/tma-train/src/store/checkpoint.rs): `read_state`, then `load_checkpoint`
/// against the configured model.
pub fn checkpoint_dir(run: &Path) -> Outcome {
    text(read_state(run))?;
    text(load_checkpoint(run, &template()))
}

/// A safetensors model (tma-nn `ParamSet::load_safetensors`) at `path`.
pub fn safetensors_file(path: &Path, data: &[u8]) -> Outcome {
    std::fs::write(path, data).unwrap();
    text(ParamSet::load_safetensors(path))
}

/// `TrainConfig` from TOML (its serde names are the config-file keys), then a round trip.
pub fn config_toml(data: &[u8]) -> Outcome {
    let Ok(s) = std::str::from_utf8(data) else {
        return Ok(());
    };
    let c: TrainConfig = toml::from_str(s).map_err(|e| format!("config.toml: {e}"))?;
    let _ = toml::to_string(&c);
    Ok(())
}

/// Runs target `name` on `input`: the text the error must contain and the outcome.
pub fn run(name: &str, input: &[u8]) -> (String, Outcome) {
    with_scratch(|s| match name {
        "store_node" | "store_link" | "checkpoint" => {
            let dir = dir_of(s, name);
            let Some((&sel, rest)) = input.split_first() else {
                return (String::new(), Ok(()));
            };
            let files = files_of(dir);
            let rel = files[(sel & !FIX_HASH) as usize % files.len()].clone();
            let fix = sel & FIX_HASH != 0;
            let out = with_file(dir, &rel, rest, fix, || {
                if name == "checkpoint" {
                    checkpoint_dir(dir)
                } else {
                    store_dir(dir)
                }
            });
            (dir.display().to_string(), out)
        }
        "safetensors" => {
            let p = s.files.join("model.safetensors");
            (p.display().to_string(), safetensors_file(&p, input))
        }
        "config_toml" => ("config.toml".into(), config_toml(input)),
        other => panic!("no fuzz target {other}"),
    })
}

/// The valid inputs a target's mutations start from (in its input encoding).
pub fn seeds(name: &str) -> Vec<Vec<u8>> {
    match name {
        "store_node" | "store_link" | "checkpoint" => {
            let files = dir_files(name);
            let mut v = vec![];
            for (i, f) in files.iter().enumerate() {
                let b = dir_file_bytes(name, f);
                v.push([&[i as u8][..], &b].concat());
                if name != "checkpoint" && f != "manifest.json" {
                    v.push([&[i as u8 | FIX_HASH][..], &b].concat());
                }
            }
            v
        }
        "safetensors" => {
            let tmp = tempfile::tempdir().unwrap();
            let p = tmp.path().join("m.safetensors");
            let mut t = template();
            t.data
                .iter_mut()
                .enumerate()
                .for_each(|(i, x)| *x = i as f32);
            t.save_safetensors(&p).unwrap();
            vec![std::fs::read(&p).unwrap()]
        }
        "config_toml" => vec![
            toml::to_string(&TrainConfig::default())
                .unwrap()
                .into_bytes(),
            toml::to_string(&TrainConfig::defaults_for(Task::Node))
                .unwrap()
                .into_bytes(),
        ],
        other => panic!("no fuzz target {other}"),
    }
}
