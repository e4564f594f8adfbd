//! Cycles of a directed graph given as `node -> successors`: its strongly connected components
//! with more than one node (Tarjan), and one concrete cycle through each.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A directed graph: node -> successors (anything that iterates names; a self-loop is ignored).
pub type Graph = BTreeMap<String, BTreeSet<String>>;

/// `graph` with the payload of each edge dropped.
pub fn simple<V>(g: &BTreeMap<String, BTreeMap<String, V>>) -> Graph {
    g.iter()
        .map(|(k, v)| (k.clone(), v.keys().cloned().collect()))
        .collect()
}

/// The strongly connected components of more than one node, each sorted, the list sorted.
/// Successors that are not keys of `g` count as nodes without successors.
pub fn cyclic_components(g: &Graph) -> Vec<Vec<String>> {
    struct State<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn connect<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                connect(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v.as_str()) {
            connect(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// A shortest cycle through the first node of `component` (a cyclic component of `g`), as
/// `a -> b -> … -> a`.
pub fn cycle_through(g: &Graph, component: &[String]) -> String {
    let inside: BTreeSet<&str> = component.iter().map(|s| s.as_str()).collect();
    let start = component[0].as_str();
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for w in g.get(v).into_iter().flatten().map(|w| w.as_str()) {
            if !inside.contains(w) || w == v {
                continue;
            }
            if w == start && v != start {
                let mut path = vec![v];
                let mut x = v;
                while x != start {
                    x = prev[x];
                    path.push(x);
                }
                path.reverse();
                return path.join(" -> ") + " -> " + start;
            }
            if !prev.contains_key(w) {
                prev.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    unreachable!("{component:?} is not a cyclic component")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(edges: &[(&str, &str)]) -> Graph {
        let mut g = Graph::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    }

    #[test]
    fn a_cycle_is_found_and_spelled_out() {
        // a -> b -> c -> a is a cycle; d hangs off it; e <-> f is a second one; g -> g is not
        let g = graph(&[
            ("a", "b"),
            ("b", "c"),
            ("c", "a"),
            ("c", "d"),
            ("e", "f"),
            ("f", "e"),
            ("g", "g"),
        ]);
        let comps = cyclic_components(&g);
        assert_eq!(comps, vec![vec!["a", "b", "c"], vec!["e", "f"]]);
        assert_eq!(cycle_through(&g, &comps[0]), "a -> b -> c -> a");
        assert_eq!(cycle_through(&g, &comps[1]), "e -> f -> e");
    }

    #[test]
    fn a_dag_has_no_cycle() {
        let g = graph(&[("a", "b"), ("b", "c"), ("a", "c"), ("d", "a")]);
        assert!(cyclic_components(&g).is_empty());
    }
}
