//! The module structure of `tma-train`, checked from its source: no import cycle between
//! modules, and the round loop, the evaluator, the engine and the data preparation import no
//! baseline (they are written against `method::TrainingMethod` / `method::Exchange`).
//! ARCHITECTURE.md ("Module dependencies") describes the same rule.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// `module -> modules it names as crate::X` (code lines only; comments are skipped).
fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut names = BTreeSet::new();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "rs") || p.join("mod.rs").is_file() {
            names.insert(p.file_stem().unwrap().to_string_lossy().to_string());
        }
    }
    // a module in a folder (`engine/mod.rs` and its files) is read as one module
    let source = |m: &str| -> String {
        let file = src.join(format!("{m}.rs"));
        if file.is_file() {
            return std::fs::read_to_string(file).unwrap();
        }
        let mut text = String::new();
        for e in std::fs::read_dir(src.join(m)).unwrap() {
            let p = e.unwrap().path();
            let t = std::fs::read_to_string(&p).unwrap();
            // each file's own test module is cut off below
            text.push_str(t.split("#[cfg(test)]").next().unwrap());
        }
        text
    };
    let mut g = BTreeMap::new();
    for m in &names {
        let text = source(m);
        // test modules may use anything
        let code = text.split("#[cfg(test)]").next().unwrap();
        let mut deps = BTreeSet::new();
        for line in code.lines() {
            let l = line.trim_start();
            if l.starts_with("//") {
                continue;
            }
            let mut rest = l;
            while let Some(i) = rest.find("crate::") {
                rest = &rest[i + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if names.contains(&name) && &name != m {
                    deps.insert(name);
                }
            }
        }
        g.insert(m.clone(), deps);
    }
    g
}

#[test]
fn modules_form_no_cycle() {
    let g = module_graph();
    assert!(g.len() > 15, "read {} modules", g.len());
    // depth-first search with colours; a grey node reached again closes a cycle
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) {
        match state.get(m).copied().unwrap_or(0) {
            1 => panic!("import cycle: {} -> {m}", path.join(" -> ")),
            2 => return,
            _ => {}
        }
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for d in &g[m] {
            visit(d, g, state, path);
        }
        path.pop();
        state.insert(m.to_string(), 2);
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        visit(m, &g, &mut state, &mut Vec::new());
    }
}

#[test]
fn the_round_loop_and_data_preparation_import_no_baseline() {
    let g = module_graph();
    for m in [
        "coordinator",
        "evaluator",
        "engine",
        "data",
        "method",
        "trainer",
        "run",
    ] {
        for baseline in ["ggs", "llcg"] {
            assert!(
                !g[m].contains(baseline),
                "{m} imports {baseline}: {:?}",
                g[m]
            );
        }
    }
    // only the registry names the implementations
    let users: Vec<&String> = g
        .iter()
        .filter(|(_, d)| d.contains("ggs") || d.contains("llcg"))
        .map(|(m, _)| m)
        .collect();
    assert_eq!(users, vec!["methods"]);
}
