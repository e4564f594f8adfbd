//! The workspace's crates from its `Cargo.toml` files: members (`crates/*`, `python`), each
//! one's package name, root source files and dependencies on other members.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One member crate of the workspace.
#[derive(Debug, Clone)]
pub struct Member {
    /// Package name (`tma-graph`).
    pub name: String,
    /// The member's directory.
    pub dir: PathBuf,
    /// Other members it depends on, in any dependency table (normal, build, dev, per target).
    pub deps: BTreeSet<String>,
}

impl Member {
    /// The crate roots under `src/`: `lib.rs` and `main.rs`, those that exist.
    pub fn roots(&self) -> Vec<PathBuf> {
        ["lib.rs", "main.rs"]
            .iter()
            .map(|f| self.dir.join("src").join(f))
            .filter(|p| p.exists())
            .collect()
    }
}

/// A manifest's lines, with `#` comments dropped (no `#` appears inside the strings of these
/// manifests' keys and section headers).
fn manifest_lines(path: &Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(text
        .lines()
        .map(|l| l.split(" #").next().unwrap().trim().to_string())
        .filter(|l| !l.starts_with('#'))
        .collect())
}

/// The key of a `key = …` / `key.workspace = …` line, if the line is one.
fn line_key(l: &str) -> Option<&str> {
    let (key, _) = l.split_once('=')?;
    let key = key.trim();
    let key = key.split('.').next()?;
    key.chars()
        .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
        .then_some(key)
}

/// The value of `name = "value"` among `lines`, within section `section`.
fn string_value(lines: &[String], section: &str, name: &str) -> Option<String> {
    let mut current = String::new();
    for l in lines {
        if l.starts_with('[') {
            current = l.trim_matches(|c| c == '[' || c == ']').to_string();
        } else if current == section
            && line_key(l) == Some(name)
            && !l.contains(&format!("{name}."))
        {
            return Some(l.split_once('=')?.1.trim().trim_matches('"').to_string());
        }
    }
    None
}

/// The names of the dependencies in every dependency table of a manifest (`[dependencies]`,
/// `[dev-dependencies]`, `[build-dependencies]`, their `[target.….dependencies]` forms and
/// `[dependencies.NAME]` tables; `package = "…"` renames resolved).
fn dependency_names(lines: &[String]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_table = false;
    for l in lines {
        if l.starts_with('[') {
            let header = l.trim_matches(|c| c == '[' || c == ']');
            in_table = header.ends_with("dependencies");
            if let Some((table, name)) = header.rsplit_once('.') {
                if table.ends_with("dependencies") {
                    out.insert(name.to_string());
                }
            }
        } else if in_table {
            if let Some(key) = line_key(l) {
                let renamed = l
                    .split("package = \"")
                    .nth(1)
                    .and_then(|r| r.split('"').next());
                out.insert(renamed.unwrap_or(key).to_string());
            }
        }
    }
    out
}

/// The members of the workspace rooted at `root` (its `Cargo.toml` lists `members`, with `dir/*`
/// globs), with their dependencies on each other.
pub fn members(root: &Path) -> Result<Vec<Member>, String> {
    let ws = manifest_lines(&root.join("Cargo.toml"))?;
    let list =
        string_value(&ws, "workspace", "members").ok_or("Cargo.toml: no [workspace] members")?;
    let patterns: Vec<String> = list
        .trim_matches(|c| c == '[' || c == ']')
        .split(',')
        .map(|p| p.trim().trim_matches('"').to_string())
        .filter(|p| !p.is_empty())
        .collect();
    let mut dirs = Vec::new();
    for p in &patterns {
        match p.strip_suffix("/*") {
            Some(parent) => {
                let rd =
                    std::fs::read_dir(root.join(parent)).map_err(|e| format!("{parent}: {e}"))?;
                let mut found: Vec<PathBuf> = rd
                    .filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|d| d.join("Cargo.toml").exists())
                    .collect();
                found.sort();
                dirs.extend(found);
            }
            None => dirs.push(root.join(p)),
        }
    }
    let mut out = Vec::new();
    let mut all = BTreeMap::new();
    for dir in dirs {
        let manifest = manifest_lines(&dir.join("Cargo.toml"))?;
        let name = string_value(&manifest, "package", "name")
            .ok_or(format!("{}: no package name", dir.display()))?;
        all.insert(name.clone(), ());
        out.push(Member {
            name,
            dir,
            deps: dependency_names(&manifest),
        });
    }
    for m in &mut out {
        m.deps.retain(|d| all.contains_key(d));
    }
    Ok(out)
}
