//! The workspace's structure, read from its sources and `Cargo.toml` files (ARCHITECTURE.md,
//! "Architecture invariants", names these tests):
//!
//! * no import cycle between the files of any crate, nor between the folders of one
//!   (`modules::folder_graph`), except the cycles listed in `KNOWN_CYCLES`;
//! * no cycle between crates, and the graph, partition and sampler crates never depend on
//!   `tma-nn`;
//! * in `tma-train`, the round loop, the evaluator, the engine and the data preparation import no
//!   baseline (they are written against `method::TrainingMethod` / `method::Exchange`);
//! * no non-test function longer than `MAX_FN_LINES` lines without a reason written on the line
//!   above it (`// long: …`), except those listed in `KNOWN_LONG`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use tma_arch::cargo::{self, Member};
use tma_arch::cycles::{self, cycle_through, cyclic_components};
use tma_arch::modules::{folder_graph, Crate, ModuleGraph};
use tma_arch::{fns, lex};

/// Import cycles still present, as `(crate, modules of the cycle, sorted)`. Only crates being
/// restructured may appear here (`tma-cli`, `tma-train`: issue 28). This list must only
/// shrink: the test fails for a cycle not in it and for an entry that is no longer a cycle, so
/// remove an entry when its cycle is gone.
const KNOWN_CYCLES: &[(&str, &[&str])] = &[];

/// The longest a non-test function may be without a `// long: <reason>` comment on the line
/// just above its `fn` line.
const MAX_FN_LINES: usize = 150;

/// Functions over `MAX_FN_LINES` lines without a reason, as `path::name` (path from the
/// workspace root). Only the crates being restructured may appear here (`tma-cli`,
/// `tma-train`: issue 28). This list must only shrink: the test fails for a long function not
/// in it and for an entry that is no longer long (or has a reason now).
const KNOWN_LONG: &[&str] = &[];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn shown(p: &Path) -> String {
    let root = workspace_root();
    p.canonicalize()
        .unwrap_or_else(|_| p.to_path_buf())
        .strip_prefix(&root)
        .map(|r| r.display().to_string())
        .unwrap_or_else(|_| p.display().to_string())
}

/// Every member with its crates (one per root: `src/lib.rs`, `src/main.rs`).
fn workspace() -> Vec<(Member, Vec<Crate>)> {
    let members = cargo::members(&workspace_root()).unwrap();
    members
        .into_iter()
        .map(|m| {
            let crates = m
                .roots()
                .iter()
                .map(|r| Crate::load(r).unwrap_or_else(|e| panic!("{}: {e}", m.name)))
                .collect();
            (m, crates)
        })
        .collect()
}

/// `a -> b -> a` with where each import is written.
fn explain(g: &ModuleGraph, cycle: &str) -> String {
    let nodes: Vec<&str> = cycle.split(" -> ").collect();
    let sites: Vec<String> = nodes
        .windows(2)
        .map(|w| {
            let (file, line) = &g[w[0]][w[1]];
            format!("{} -> {} at {}:{line}", w[0], w[1], shown(file))
        })
        .collect();
    format!("{cycle} ({})", sites.join("; "))
}

/// The cyclic components of `g`'s file graph and folder graph (a folder component that is also
/// a file component once said), each with its explanation.
fn crate_cycles(g: &ModuleGraph) -> Vec<(Vec<String>, String)> {
    let mut out = Vec::new();
    for graph in [g.clone(), folder_graph(g)] {
        let s = cycles::simple(&graph);
        for comp in cyclic_components(&s) {
            if out.iter().any(|(c, _)| c == &comp) {
                continue;
            }
            let why = explain(&graph, &cycle_through(&s, &comp));
            out.push((comp, why));
        }
    }
    out
}

#[test]
fn no_import_cycle_between_the_files_or_folders_of_any_crate() {
    let ws = workspace();
    let mut found: BTreeMap<(String, Vec<String>), String> = BTreeMap::new();
    let mut files = 0;
    for (m, crates) in &ws {
        assert!(
            !crates.is_empty(),
            "{}: no src/lib.rs or src/main.rs",
            m.name
        );
        for c in crates {
            files += c.modules.len();
            for (comp, why) in crate_cycles(&c.graph()) {
                found.insert((m.name.clone(), comp), why);
            }
        }
    }
    // the crates of the workspace were read, down to their folders
    for name in [
        "tma-graph",
        "tma-partition",
        "tma-sample",
        "tma-nn",
        "tma-train",
        "tma-cli",
        "tma-py",
    ] {
        assert!(ws.iter().any(|(m, _)| m.name == name), "{name} not read");
    }
    assert!(files > 90, "read {files} files");
    let known: BTreeSet<(String, Vec<String>)> = KNOWN_CYCLES
        .iter()
        .map(|(c, ms)| (c.to_string(), ms.iter().map(|s| s.to_string()).collect()))
        .collect();
    let mut problems = Vec::new();
    for (key, why) in &found {
        if !known.contains(key) {
            problems.push(format!("{}: import cycle {why}", key.0));
        }
    }
    for key in &known {
        if !found.contains_key(key) {
            problems.push(format!(
                "{}: the known cycle {:?} is gone (or changed): remove it from KNOWN_CYCLES",
                key.0, key.1
            ));
        }
    }
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn crates_form_no_cycle_and_graph_partition_sampler_never_depend_on_tma_nn() {
    let members = cargo::members(&workspace_root()).unwrap();
    let g: cycles::Graph = members
        .iter()
        .map(|m| (m.name.clone(), m.deps.clone()))
        .collect();
    assert_eq!(
        g["tma-train"],
        BTreeSet::from(["tma-graph", "tma-partition", "tma-sample", "tma-nn"].map(String::from)),
        "the dependencies were read"
    );
    let comps = cyclic_components(&g);
    assert!(
        comps.is_empty(),
        "crate cycle: {}",
        comps
            .iter()
            .map(|c| cycle_through(&g, c))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // everything each lower crate depends on, directly or not
    for low in ["tma-graph", "tma-partition", "tma-sample"] {
        let mut seen = BTreeSet::new();
        let mut todo = vec![low.to_string()];
        while let Some(c) = todo.pop() {
            for d in &g[&c] {
                if seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        assert!(
            !seen.contains("tma-nn"),
            "{low} depends on tma-nn (through {seen:?})"
        );
    }
}

/// The module of `tma-train` named `name` (its last path segment), wherever it lives.
fn train_modules(g: &ModuleGraph, name: &str) -> Vec<String> {
    g.keys()
        .filter(|k| k.rsplit("::").next() == Some(name))
        .cloned()
        .collect()
}

#[test]
fn the_round_loop_and_data_preparation_import_no_baseline() {
    let ws = workspace();
    let (_, crates) = ws.iter().find(|(m, _)| m.name == "tma-train").unwrap();
    let g = crates[0].graph();
    let baselines: Vec<String> = ["ggs", "llcg"]
        .iter()
        .flat_map(|b| train_modules(&g, b))
        .collect();
    assert_eq!(baselines.len(), 2, "{baselines:?}");
    for name in [
        "coordinator",
        "evaluator",
        "engines",
        "data",
        "method",
        "trainer",
        "run",
    ] {
        let ms = train_modules(&g, name);
        assert_eq!(ms.len(), 1, "module {name}: {ms:?}");
        for b in &baselines {
            assert!(
                !g[&ms[0]].contains_key(b),
                "{} imports {b}: {:?}",
                ms[0],
                g[&ms[0]].keys()
            );
        }
    }
    // only the registry names the implementations
    let users: BTreeSet<&str> = g
        .iter()
        .filter(|(_, d)| baselines.iter().any(|b| d.contains_key(b)))
        .map(|(m, _)| m.rsplit("::").next().unwrap())
        .collect();
    assert_eq!(users, BTreeSet::from(["methods"]));
}

/// `tma-train`'s top level, in the order its crate documentation gives (`src/lib.rs`): a file
/// or folder imports only those before it.
const TRAIN_LAYERS: &[&str] = &[
    "error",
    "clock",
    "memory",
    "config/",
    "data/",
    "evaluation/",
    "store/",
    "engines/",
    "methods/",
    "options/",
    "run/",
    "saved",
];

#[test]
fn tma_train_folders_import_only_the_folders_before_them() {
    let ws = workspace();
    let (_, crates) = ws.iter().find(|(m, _)| m.name == "tma-train").unwrap();
    let g = folder_graph(&crates[0].graph());
    let top: BTreeSet<&str> = g
        .keys()
        .map(String::as_str)
        .filter(|k| !k.contains("::") && *k != "crate")
        .collect();
    assert_eq!(
        top,
        TRAIN_LAYERS.iter().copied().collect::<BTreeSet<_>>(),
        "tma-train's top-level files and folders changed: place each in TRAIN_LAYERS (and in src/lib.rs's table)"
    );
    let rank = |m: &str| TRAIN_LAYERS.iter().position(|x| *x == m).unwrap();
    let mut upward = Vec::new();
    for (a, deps) in &g {
        if !top.contains(a.as_str()) {
            continue;
        }
        for (b, (file, line)) in deps {
            if top.contains(b.as_str()) && rank(b) > rank(a) {
                upward.push(format!("{a} -> {b} at {}:{line}", shown(file)));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports against TRAIN_LAYERS: {upward:#?}"
    );
    // the check sees the folders' imports: engines/ uses evaluation/ and config/
    assert!(g["engines/"].contains_key("evaluation/") && g["engines/"].contains_key("config/"));
}

/// Every source file of the workspace's crates and examples outside test code, and of the fuzz
/// workspace (`fuzz/`), each once.
fn non_test_files() -> BTreeMap<PathBuf, Vec<lex::Token>> {
    let root = workspace_root();
    let mut roots: Vec<PathBuf> = Vec::new();
    for m in cargo::members(&root).unwrap() {
        roots.extend(m.roots());
        if let Ok(rd) = std::fs::read_dir(m.dir.join("examples")) {
            roots.extend(
                rd.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "rs")),
            );
        }
    }
    let fuzz = root.join("fuzz/src/main.rs");
    if fuzz.exists() {
        roots.push(fuzz);
    }
    let mut out = BTreeMap::new();
    for r in roots {
        let c = Crate::load(&r).unwrap();
        for m in c.modules {
            let file = m.file.canonicalize().unwrap();
            out.entry(file).or_insert(m.tokens);
        }
    }
    out
}

#[test]
fn no_function_is_longer_than_the_limit_without_a_reason() {
    let files = non_test_files();
    let mut long = BTreeSet::new();
    let mut counted = 0;
    for (file, tokens) in &files {
        let src = std::fs::read_to_string(file).unwrap();
        for f in fns::functions(tokens, &src) {
            counted += 1;
            if f.lines > MAX_FN_LINES && f.reason.is_none() {
                long.insert(format!("{}::{}", shown(file), f.name));
                println!("{}:{} {} {} lines", shown(file), f.line, f.name, f.lines);
            }
        }
    }
    assert!(counted > 1000, "counted {counted} functions");
    let known: BTreeSet<String> = KNOWN_LONG.iter().map(|s| s.to_string()).collect();
    for k in &known {
        assert!(
            k.starts_with("crates/tma-train/") || k.starts_with("crates/tma-cli/"),
            "{k}: only tma-train and tma-cli may keep long functions without a reason"
        );
    }
    let new: Vec<&String> = long.difference(&known).collect();
    let gone: Vec<&String> = known.difference(&long).collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "functions over {MAX_FN_LINES} lines without a `// long: <reason>` line above them: \
         {new:#?}\nno longer long (remove from KNOWN_LONG): {gone:#?}"
    );
}

/// A small crate written to a temporary directory.
fn scratch_crate(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tma-arch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

/// The checks can fail: a crate with a cycle through a folder (`super::`, `crate::a::b`, a
/// re-export, a macro) is read into the exact graph, and its cycles are found and named.
#[test]
fn a_cycle_through_folders_reexports_and_macros_is_found() {
    let dir = scratch_crate(
        "cycle",
        &[
            (
                "src/lib.rs",
                "#[macro_use]\nmod mac;\npub mod disk;\npub mod buf;\nmod npy;\npub use disk::Dtype;\n\
                 #[cfg(test)]\nmod tests;\n",
            ),
            ("src/mac.rs", "macro_rules! twice { ($e:expr) => { $e * 2 }; }\n"),
            ("src/tests.rs", "use crate::npy::read;\n"),
            (
                "src/buf.rs",
                "// crate::npy::read in a comment is no import\n\
                 pub struct Buf { d: crate::Dtype }\n#[cfg(test)]\nmod t { use crate::npy::read; }\n",
            ),
            (
                "src/npy.rs",
                "use crate::buf::Buf;\npub fn read() -> usize { twice!(1) }\n",
            ),
            (
                "src/disk/mod.rs",
                "mod mapped;\npub use mapped::Mapped;\npub enum Dtype { U8 }\n",
            ),
            (
                "src/disk/mapped.rs",
                "use super::Dtype;\npub struct Mapped;\nfn f() -> usize { crate::npy::read() }\n",
            ),
        ],
    );
    let c = Crate::load(&dir.join("src/lib.rs")).unwrap();
    let g = c.graph();
    let _ = std::fs::remove_dir_all(&dir);
    let edges: Vec<String> = g
        .iter()
        .flat_map(|(a, d)| d.keys().map(move |b| format!("{a} -> {b}")))
        .collect();
    assert_eq!(
        edges,
        [
            "buf -> disk",
            "disk::mapped -> disk",
            "disk::mapped -> npy",
            "npy -> buf",
            "npy -> mac",
        ],
        "tests.rs and the test module of buf.rs are not read"
    );
    // no file cycle, but a folder one: buf -> disk/ -> npy -> buf
    assert!(cyclic_components(&cycles::simple(&g)).is_empty());
    let found = crate_cycles(&g);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, ["buf", "disk/", "npy"]);
    assert!(
        found[0]
            .1
            .starts_with("buf -> disk/ -> npy -> buf (buf -> disk/ at "),
        "{}",
        found[0].1
    );
}
