//! The module graph of one crate: its file modules, found by following `mod` declarations from
//! the crate root (`src/lib.rs` or `src/main.rs`) the way rustc does (`foo.rs`, `foo/mod.rs`,
//! `#[path]`), and an edge `A -> B` for each file A whose non-test code names an item that file
//! B defines: `crate::a::b::Item`, `super::x`, `self::x`, a child module, a module brought in by
//! `use`, a macro another file defines. Re-exports (`pub use`) are followed to the file that
//! defines the item, so a crate root or a `mod.rs` that only re-exports is not a hub of false
//! cycles; `mod` declarations are not edges.

use crate::lex::{self, Token};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Where an import is written: the file and the 1-based line of its first mention.
pub type Site = (PathBuf, usize);

/// Module path of a file (`"disk::convert"`; the crate root is `"crate"`) -> the modules it
/// imports -> where it first names each.
pub type ModuleGraph = BTreeMap<String, BTreeMap<String, Site>>;

/// One file of a crate, as read.
#[derive(Debug)]
pub struct FileModule {
    /// Module path from the crate root (empty for the root).
    pub path: Vec<String>,
    /// The source file.
    pub file: PathBuf,
    /// Tokens without test-only items.
    pub tokens: Vec<Token>,
    children: BTreeMap<String, usize>,
    items: BTreeSet<String>,
    macros: BTreeSet<String>,
    uses: Vec<Use>,
    /// Tokens that belong to `use` declarations.
    in_use: Vec<bool>,
    /// `pub use` at the top level: bound name -> path as written.
    reexports: BTreeMap<String, Vec<String>>,
    /// `pub use path::*` at the top level.
    globs: Vec<Vec<String>>,
}

impl FileModule {
    /// `"a::b"`, or `"crate"` for the root.
    pub fn name(&self) -> String {
        if self.path.is_empty() {
            "crate".into()
        } else {
            self.path.join("::")
        }
    }
}

/// One leaf of a `use` tree.
#[derive(Debug, Clone)]
struct Use {
    path: Vec<String>,
    /// The name bound (`None` for a glob `path::*`).
    bound: Option<String>,
    public: bool,
    top_level: bool,
    inline_depth: usize,
    line: usize,
}

/// The file modules of the crate whose root file is `root` (`src/lib.rs`, `src/main.rs`):
/// every module declared outside test code, root first. Errors name a declared module whose
/// file is missing.
pub fn load_crate(root: &Path) -> Result<Vec<FileModule>, String> {
    let mut out = Vec::new();
    load(
        root,
        Vec::new(),
        root.parent().unwrap().to_path_buf(),
        &mut out,
    )?;
    Ok(out)
}

fn load(
    file: &Path,
    path: Vec<String>,
    child_dir: PathBuf,
    out: &mut Vec<FileModule>,
) -> Result<usize, String> {
    let src = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let tokens = lex::strip_test_items(lex::tokenize(&src));
    let idx = out.len();
    let (uses, in_use) = scan_uses(&tokens);
    let mut m = FileModule {
        path: path.clone(),
        file: file.to_path_buf(),
        children: BTreeMap::new(),
        items: top_level_items(&tokens),
        macros: macro_definitions(&tokens),
        reexports: BTreeMap::new(),
        globs: Vec::new(),
        uses,
        in_use,
        tokens,
    };
    for u in m.uses.iter().filter(|u| u.public && u.top_level) {
        match &u.bound {
            Some(b) => {
                m.reexports.insert(b.clone(), u.path.clone());
            }
            None => m.globs.push(u.path.clone()),
        }
    }
    let decls = out_of_line_modules(&m.tokens, &src);
    out.push(m);
    for (name, path_attr) in decls {
        let child = match path_attr {
            Some(p) => file.parent().unwrap().join(p),
            None => {
                let flat = child_dir.join(format!("{name}.rs"));
                if flat.exists() {
                    flat
                } else {
                    child_dir.join(&name).join("mod.rs")
                }
            }
        };
        if !child.exists() {
            return Err(format!(
                "{}: `mod {name};` has no file {}",
                file.display(),
                child.display()
            ));
        }
        let grand_dir = if child.file_name().is_some_and(|n| n == "mod.rs") {
            child.parent().unwrap().to_path_buf()
        } else {
            child_dir.join(&name)
        };
        let mut child_path = path.clone();
        child_path.push(name.clone());
        let c = load(&child, child_path, grand_dir, out)?;
        out[idx].children.insert(name, c);
    }
    Ok(idx)
}

/// `mod name;` declarations (outside test code) with their `#[path = "…"]`, if any.
fn out_of_line_modules(t: &[Token], src: &str) -> Vec<(String, Option<String>)> {
    let mut path_attrs = BTreeMap::new();
    let lines: Vec<&str> = src.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let l = l.trim();
        if let Some(rest) = l.strip_prefix("#[path = \"") {
            let p = rest.trim_end_matches("\"]").to_string();
            if let Some(next) = lines.get(i + 1) {
                let name = next
                    .trim()
                    .trim_start_matches("pub ")
                    .trim_start_matches("mod ");
                path_attrs.insert(name.trim_end_matches(';').to_string(), p);
            }
        }
    }
    let mut out = Vec::new();
    for i in 0..t.len().saturating_sub(2) {
        if t[i].text == "mod" && t[i + 1].is_ident() && t[i + 2].text == ";" {
            let name = t[i + 1].text.clone();
            let p = path_attrs.get(&name).cloned();
            out.push((name, p));
        }
    }
    out
}

/// Names of the items a file defines at its top level (functions, types, traits, constants,
/// statics, inline and file modules, macros).
fn top_level_items(t: &[Token]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut depth = 0i32;
    for i in 0..t.len() {
        match t[i].text.as_str() {
            "{" => depth += 1,
            "}" => depth -= 1,
            "fn" | "struct" | "enum" | "trait" | "type" | "union" | "mod" | "const" | "static"
                if depth == 0 =>
            {
                let mut j = i + 1;
                while t.get(j).is_some_and(|x| x.text == "mut") {
                    j += 1;
                }
                if let Some(n) = t.get(j).filter(|x| x.is_ident()) {
                    if !matches!(n.text.as_str(), "fn" | "unsafe" | "extern" | "async" | "_") {
                        out.insert(n.text.clone());
                    }
                }
            }
            _ => {}
        }
    }
    out.extend(macro_definitions(t));
    out
}

/// Names defined by `macro_rules! name`.
fn macro_definitions(t: &[Token]) -> BTreeSet<String> {
    (0..t.len().saturating_sub(2))
        .filter(|&i| t[i].text == "macro_rules" && t[i + 1].text == "!")
        .map(|i| t[i + 2].text.clone())
        .collect()
}

/// Depth of inline (`mod x { … }`) modules at each token.
fn inline_depths(t: &[Token]) -> Vec<usize> {
    let mut out = Vec::with_capacity(t.len());
    let (mut depth, mut stack) = (0usize, Vec::new());
    for i in 0..t.len() {
        out.push(stack.len());
        match t[i].text.as_str() {
            "{" => {
                depth += 1;
                if i >= 2 && t[i - 2].text == "mod" {
                    stack.push(depth);
                }
            }
            "}" => {
                if stack.last() == Some(&depth) {
                    stack.pop();
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
    }
    out
}

/// The `use` declarations' leaves, and which tokens belong to a `use` declaration.
fn scan_uses(t: &[Token]) -> (Vec<Use>, Vec<bool>) {
    let depths = inline_depths(t);
    let mut in_use = vec![false; t.len()];
    let mut out = Vec::new();
    let mut brace = 0i32;
    let mut i = 0;
    while i < t.len() {
        match t[i].text.as_str() {
            "{" => brace += 1,
            "}" => brace -= 1,
            "use" if t.get(i + 1).is_some_and(|x| x.text != "<") => {
                let public = i > 0
                    && (t[i - 1].text == "pub"
                        || (t[i - 1].text == ")" && visibility_before(t, i - 1)));
                let end = (i..t.len()).find(|&j| t[j].text == ";").unwrap_or(t.len());
                in_use[i..end].iter_mut().for_each(|b| *b = true);
                let mut leaves = Vec::new();
                let mut k = i + 1;
                if t.get(k).is_some_and(|x| x.text == "::") {
                    k += 1;
                }
                use_tree(t, &mut k, end, Vec::new(), &mut leaves);
                for (path, bound) in leaves {
                    out.push(Use {
                        path,
                        bound,
                        public,
                        top_level: brace == 0 && depths[i] == 0,
                        inline_depth: depths[i],
                        line: t[i].line,
                    });
                }
                i = end;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    (out, in_use)
}

/// Whether the `)` at `close` ends a visibility `pub(…)`.
fn visibility_before(t: &[Token], close: usize) -> bool {
    let open = (0..close).rev().find(|&j| t[j].text == "(");
    open.is_some_and(|o| o > 0 && t[o - 1].text == "pub")
}

/// Expands a use tree from `*k` (up to `end`) into `(path, bound name)` leaves.
fn use_tree(
    t: &[Token],
    k: &mut usize,
    end: usize,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let mut path = prefix;
    while *k < end {
        let tok = t[*k].text.as_str();
        match tok {
            "{" => {
                *k += 1;
                while *k < end && t[*k].text != "}" {
                    use_tree(t, k, end, path.clone(), out);
                    if *k < end && t[*k].text == "," {
                        *k += 1;
                    }
                }
                *k += 1;
                return;
            }
            "*" => {
                *k += 1;
                out.push((path, None));
                return;
            }
            "::" => *k += 1,
            _ if t[*k].is_ident() => {
                path.push(tok.to_string());
                *k += 1;
                if t.get(*k).is_some_and(|x| x.text == "::") {
                    continue;
                }
                let mut bound = tok.to_string();
                if t.get(*k).is_some_and(|x| x.text == "as") {
                    bound = t[*k + 1].text.clone();
                    *k += 2;
                }
                if bound == "self" {
                    path.pop();
                    bound = path.last().cloned().unwrap_or_default();
                }
                out.push((path, Some(bound)));
                return;
            }
            _ => return,
        }
    }
}

/// Where a resolved path leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// The path names file module `.0` itself.
    Module(usize),
    /// The path names an item file `.0` defines (or a name it does not define but is reached
    /// through: then the file is the best guess).
    Item(usize),
}

impl Target {
    fn file(self) -> usize {
        match self {
            Target::Module(f) | Target::Item(f) => f,
        }
    }
}

/// A crate's file modules with the name resolution between them.
pub struct Crate {
    /// The crate's files, root first.
    pub modules: Vec<FileModule>,
}

impl Crate {
    /// Reads the crate whose root file is `root`.
    pub fn load(root: &Path) -> Result<Crate, String> {
        Ok(Crate {
            modules: load_crate(root)?,
        })
    }

    /// Absolute module path of `segs` written in file `f` at `inline_depth` inline modules
    /// deep, or `None` when it starts outside the crate (`std::`, another crate, a local name).
    fn absolute(
        &self,
        f: usize,
        segs: &[String],
        inline_depth: usize,
        aliases: &BTreeMap<String, Vec<String>>,
    ) -> Option<Vec<String>> {
        let m = &self.modules[f];
        let first = segs.first()?.as_str();
        let mut base = match first {
            "crate" => return Some(segs[1..].to_vec()),
            "self" => m.path.clone(),
            "super" => {
                let n = segs.iter().take_while(|s| *s == "super").count();
                let up = n.saturating_sub(inline_depth);
                if up > m.path.len() {
                    return None;
                }
                let mut b = m.path[..m.path.len() - up].to_vec();
                b.extend_from_slice(&segs[n..]);
                return Some(b);
            }
            _ if aliases.contains_key(first) => aliases[first].clone(),
            _ if m.children.contains_key(first) => {
                let mut b = m.path.clone();
                b.push(first.to_string());
                b
            }
            _ => return None,
        };
        base.extend_from_slice(&segs[1..]);
        Some(base)
    }

    /// The file an absolute path leads to, following re-exports (`guard` bounds the chain).
    fn resolve(&self, segs: &[String], guard: usize) -> Option<Target> {
        let mut cur = 0;
        for (k, seg) in segs.iter().enumerate() {
            let m = &self.modules[cur];
            if let Some(&c) = m.children.get(seg) {
                cur = c;
                continue;
            }
            if m.items.contains(seg) || guard == 0 {
                return Some(Target::Item(cur));
            }
            if let Some(p) = m.reexports.get(seg) {
                let mut abs = self.absolute(cur, p, 0, &BTreeMap::new())?;
                abs.extend_from_slice(&segs[k + 1..]);
                return self.resolve(&abs, guard - 1);
            }
            for g in &m.globs {
                let Some(mut abs) = self.absolute(cur, g, 0, &BTreeMap::new()) else {
                    continue;
                };
                abs.extend_from_slice(&segs[k..]);
                if let Some(t) = self.resolve(&abs, guard - 1) {
                    if self.modules[t.file()].items.contains(seg) || matches!(t, Target::Module(_))
                    {
                        return Some(t);
                    }
                }
            }
            return Some(Target::Item(cur));
        }
        Some(Target::Module(cur))
    }

    /// Paths written in code (outside `use`): `(segments, inline depth, line)`.
    fn code_paths(&self, f: usize) -> Vec<(Vec<String>, usize, usize)> {
        let m = &self.modules[f];
        let t = &m.tokens;
        let depths = inline_depths(t);
        let mut out = Vec::new();
        let mut i = 0;
        while i < t.len() {
            let starts = t[i].is_ident()
                && !m.in_use[i]
                && t.get(i + 1).is_some_and(|x| x.text == "::")
                && (i == 0 || !matches!(t[i - 1].text.as_str(), "::" | "."));
            if !starts {
                i += 1;
                continue;
            }
            let (start, mut segs) = (i, vec![t[i].text.clone()]);
            while t.get(i + 1).is_some_and(|x| x.text == "::")
                && t.get(i + 2).is_some_and(|x| x.is_ident())
            {
                segs.push(t[i + 2].text.clone());
                i += 2;
            }
            out.push((segs, depths[start], t[start].line));
            i += 1;
        }
        out
    }

    /// The module graph: every file module, with the files its non-test code imports.
    pub fn graph(&self) -> ModuleGraph {
        let macros: BTreeMap<&String, usize> = self
            .modules
            .iter()
            .enumerate()
            .flat_map(|(i, m)| m.macros.iter().map(move |n| (n, i)))
            .collect();
        let mut g = ModuleGraph::new();
        for (f, m) in self.modules.iter().enumerate() {
            let mut edges: BTreeMap<usize, usize> = BTreeMap::new();
            let mut add = |to: usize, line: usize| {
                if to != f {
                    edges.entry(to).or_insert(line);
                }
            };
            let mut aliases = BTreeMap::new();
            for u in &m.uses {
                let Some(abs) = self.absolute(f, &u.path, u.inline_depth, &BTreeMap::new()) else {
                    continue;
                };
                let Some(target) = self.resolve(&abs, 16) else {
                    continue;
                };
                match (target, &u.bound) {
                    (Target::Module(_), Some(b)) => {
                        aliases.insert(b.clone(), abs);
                    }
                    (Target::Module(to), None) | (Target::Item(to), None)
                        if !(u.public && u.top_level) =>
                    {
                        add(to, u.line)
                    }
                    (Target::Item(to), Some(b)) => {
                        let used_here = !(u.public && u.top_level)
                            || m.tokens
                                .iter()
                                .zip(&m.in_use)
                                .any(|(x, &inu)| !inu && &x.text == b);
                        if used_here {
                            add(to, u.line);
                        }
                    }
                    _ => {}
                }
            }
            for (segs, depth, line) in self.code_paths(f) {
                if let Some(abs) = self.absolute(f, &segs, depth, &aliases) {
                    if let Some(target) = self.resolve(&abs, 16) {
                        add(target.file(), line);
                    }
                }
            }
            let t = &m.tokens;
            for i in 0..t.len().saturating_sub(2) {
                if let Some(&to) = macros.get(&t[i].text) {
                    if t[i + 1].text == "!"
                        && matches!(t[i + 2].text.as_str(), "(" | "[" | "{")
                        && (i == 0 || t[i - 1].text != "macro_rules")
                    {
                        add(to, t[i].line);
                    }
                }
            }
            let named = edges
                .into_iter()
                .map(|(to, line)| (self.modules[to].name(), (m.file.clone(), line)))
                .collect();
            g.insert(m.name(), named);
        }
        g
    }
}

/// The graph between sibling subtrees: for each import `a -> b` of the file graph `g`, an edge
/// between the two children of their deepest common module that contain them (`buf -> disk/`
/// for `buf -> disk::mapped`; `disk::convert -> npy` lifts to `disk/ -> npy`). A module with
/// submodules is named with a trailing `/` (its whole folder); imports between a module and its
/// own submodules are left to the file graph. A cycle here is a cycle between folders that the
/// file graph may not show (`buf -> disk/ -> npy -> buf`).
pub fn folder_graph(g: &ModuleGraph) -> ModuleGraph {
    let split = |m: &str| -> Vec<String> {
        if m == "crate" {
            Vec::new()
        } else {
            m.split("::").map(str::to_string).collect()
        }
    };
    let has_children = |p: &[String]| {
        let prefix = p.join("::") + "::";
        g.keys().any(|k| k.starts_with(&prefix))
    };
    let name = |p: &[String]| p.join("::") + if has_children(p) { "/" } else { "" };
    let mut out = ModuleGraph::new();
    for (a, deps) in g {
        let pa = split(a);
        for (b, site) in deps {
            let pb = split(b);
            let common = pa.iter().zip(&pb).take_while(|(x, y)| x == y).count();
            if common == pa.len() || common == pb.len() {
                continue;
            }
            let (na, nb) = (name(&pa[..=common]), name(&pb[..=common]));
            out.entry(nb.clone()).or_default();
            out.entry(na)
                .or_default()
                .entry(nb)
                .or_insert_with(|| site.clone());
        }
    }
    out
}
