//! No import circles between the modules of storqos-gateway and storqos-core.
//!
//! The test reads each crate's `src/` from its `lib.rs` down (`mod x;` → `x.rs` or
//! `x/mod.rs`), and draws an edge from a module to every module a path of its code names:
//! `crate::a::b::Item`, `super::Item`, `self::child::Item`, `child::Item`, in `use`
//! trees (braces, globs and `as` included) and in expressions and types. A path ends at
//! the deepest module it names; an item there that the module only re-exports (`pub use
//! x::Item`) is followed to the module that defines it, so `crate::Error` is an edge to
//! the module defining `Error`, not to the crate root. Any strongly connected set of two
//! or more modules fails the test, with the edges that close it.
//!
//! What is not an edge, and why:
//! - a `mod child;` declaration: it places the child in the tree and uses none of its
//!   items (a parent's `pub use child::Item` is an edge, to the child);
//! - code under `#[cfg(test)]` (test modules, test-only helpers and test-only modules):
//!   a test reaches into whatever it tests and is not compiled into the library; the
//!   circles that matter are the ones a reader of the library follows;
//! - comments, doc links, string and character literals: they say, they do not use;
//! - paths starting with another crate (`std::`, `storqos_core::`): the crates
//!   themselves form no circle (Cargo refuses one).
//!
//! - a module's use of its own ancestor's items (`super::Allocation`,
//!   `crate::twolevel::LowLevel` from `twolevel/facade.rs`): a folder's `mod.rs` is the
//!   face of the folder and holds the vocabulary its children share (the problem an
//!   allocator solves, the interface a low level offers), while it composes them; the
//!   folder and its children read as one unit, entered at `mod.rs`. The reverse edge
//!   (a parent using its child, `pub use child::Item` included) counts, and so does
//!   every edge between siblings or between different folders.
//!
//! Inline modules (`mod x { .. }` outside tests) count as part of their file: neither
//! crate has one in its library code.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path from its crate's root (`[]` is the root).
type ModPath = Vec<String>;

/// One source file's uses, as read.
#[derive(Debug, Default)]
struct Module {
    /// The file, for messages.
    file: String,
    /// Paths the code names, as written (first segment `crate`, `super`, `self` or a
    /// child module's name).
    paths: Vec<Vec<String>>,
    /// Items it re-exports: name → the path the `pub use` names.
    reexports: BTreeMap<String, Vec<String>>,
}

/// A crate's modules.
#[derive(Debug, Default)]
struct Crate {
    modules: BTreeMap<ModPath, Module>,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Path,
    Punct(char),
}

/// The code of `src` without comments, string, byte-string, raw-string and character
/// literals (lifetimes are kept: `'a` not followed by a closing quote).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < c.len() {
        let at = |k: usize| c.get(k).copied().unwrap_or('\0');
        if c[i] == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if (c[i] == 'r' || (c[i] == 'b' && at(i + 1) == 'r')) && !at(i.wrapping_sub(1)).is_alphanumeric() && {
            let mut k = i + if c[i] == 'b' { 2 } else { 1 };
            while at(k) == '#' {
                k += 1;
            }
            at(k) == '"'
        } {
            let mut k = i + if c[i] == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while at(k) == '#' {
                hashes += 1;
                k += 1;
            }
            k += 1;
            loop {
                if k >= c.len() {
                    break;
                }
                if c[k] == '"' && (1..=hashes).all(|h| at(k + h) == '#') {
                    k += 1 + hashes;
                    break;
                }
                k += 1;
            }
            i = k;
            out.push_str("\"\"");
        } else if c[i] == '"' {
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c[i] == '\'' && (at(i + 2) == '\'' || (at(i + 1) == '\\')) {
            // A character literal ('x', '\n', '\u{..}'); a lifetime has no closing quote.
            i += 1;
            while i < c.len() && c[i] != '\'' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

fn tokenize(code: &str) -> Vec<Tok> {
    let c: Vec<char> = code.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < c.len() {
        if c[i].is_alphabetic() || c[i] == '_' {
            let s = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            toks.push(Tok::Ident(c[s..i].iter().collect()));
        } else if c[i].is_numeric() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_' || c[i] == '.') {
                i += 1;
            }
        } else if c[i] == ':' && c.get(i + 1) == Some(&':') {
            toks.push(Tok::Path);
            i += 2;
        } else if c[i].is_whitespace() {
            i += 1;
        } else {
            toks.push(Tok::Punct(c[i]));
            i += 1;
        }
    }
    toks
}

/// The index just past the item starting at `i`: through its `;` or its balanced
/// `{ .. }` block at depth 0 (a `#[cfg(test)]` item).
fn item_end(t: &[Tok], mut i: usize) -> usize {
    // Other attributes on the same item.
    while t.get(i) == Some(&Tok::Punct('#')) {
        i = balanced(t, i + 1, '[', ']');
    }
    let mut depth = 0i32;
    while i < t.len() {
        match &t[i] {
            Tok::Punct('(') | Tok::Punct('[') => depth += 1,
            Tok::Punct(')') | Tok::Punct(']') => depth -= 1,
            Tok::Punct(';') if depth == 0 => return i + 1,
            Tok::Punct('{') if depth == 0 => return balanced(t, i, '{', '}'),
            _ => {}
        }
        i += 1;
    }
    i
}

/// The index just past the group opened by `open` at `i`.
fn balanced(t: &[Tok], mut i: usize, open: char, close: char) -> usize {
    let mut depth = 0;
    while i < t.len() {
        if t[i] == Tok::Punct(open) {
            depth += 1;
        } else if t[i] == Tok::Punct(close) {
            depth -= 1;
            if depth == 0 {
                return i + 1;
            }
        }
        i += 1;
    }
    i
}

/// The tokens outside `#[cfg(test)]` items, and the names of the test-only child
/// modules (`#[cfg(test)] mod x;`).
fn without_tests(t: Vec<Tok>) -> (Vec<Tok>, BTreeSet<String>) {
    let cfg_test =
        [Tok::Punct('#'), Tok::Punct('['), id("cfg"), Tok::Punct('('), id("test"), Tok::Punct(')'), Tok::Punct(']')];
    let mut out = Vec::with_capacity(t.len());
    let mut test_mods = BTreeSet::new();
    let mut i = 0;
    while i < t.len() {
        if t[i..].starts_with(&cfg_test) {
            let start = i + cfg_test.len();
            let end = item_end(&t, start);
            let item = &t[start..end];
            if let Some(p) = item.iter().position(|x| *x == id("mod")) {
                if let (Some(Tok::Ident(name)), Some(Tok::Punct(';'))) = (item.get(p + 1), item.get(p + 2)) {
                    test_mods.insert(name.clone());
                }
            }
            i = end;
        } else {
            out.push(t[i].clone());
            i += 1;
        }
    }
    (out, test_mods)
}

fn id(s: &str) -> Tok {
    Tok::Ident(s.to_string())
}

/// One `use` tree from `i` (after `use`): every leaf path, with the name it binds
/// (`None` for a glob); returns the index past the tree.
fn use_tree(t: &[Tok], mut i: usize, prefix: &[String], out: &mut Vec<(Vec<String>, Option<String>)>) -> usize {
    let mut path = prefix.to_vec();
    loop {
        match t.get(i) {
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                i += 1;
                if t.get(i) == Some(&Tok::Path) {
                    i += 1;
                    continue;
                }
                let mut name = s.clone();
                if t.get(i) == Some(&id("as")) {
                    if let Some(Tok::Ident(n)) = t.get(i + 1) {
                        name = n.clone();
                    }
                    i += 2;
                }
                if name == "self" {
                    path.pop();
                    name = path.last().cloned().unwrap_or_default();
                }
                out.push((path, Some(name)));
                return i;
            }
            Some(Tok::Punct('*')) => {
                out.push((path, None));
                return i + 1;
            }
            Some(Tok::Punct('{')) => {
                i += 1;
                while i < t.len() && t[i] != Tok::Punct('}') {
                    i = use_tree(t, i, &path, out);
                    if t.get(i) == Some(&Tok::Punct(',')) {
                        i += 1;
                    }
                }
                return i + 1;
            }
            _ => return i,
        }
    }
}

/// Read one file's paths and re-exports; `children` are its child modules' names.
fn read_module(file: &str, src: &str, children: &BTreeSet<String>) -> Module {
    let (t, _) = without_tests(tokenize(&strip(src)));
    let mut m = Module { file: file.to_string(), ..Module::default() };
    let ours = |first: &str| matches!(first, "crate" | "super" | "self") || children.contains(first);
    let mut i = 0;
    while i < t.len() {
        if t[i] == id("use") {
            let public = i > 0 && (t[i - 1] == id("pub") || t[i - 1] == Tok::Punct(')'));
            let mut leaves = Vec::new();
            i = use_tree(&t, i + 1, &[], &mut leaves);
            for (path, name) in leaves {
                if path.first().is_some_and(|f| ours(f)) {
                    if let (true, Some(name)) = (public, &name) {
                        m.reexports.insert(name.clone(), path.clone());
                    }
                    m.paths.push(path);
                }
            }
            continue;
        }
        if let Tok::Ident(first) = &t[i] {
            let after_path = i > 0 && t[i - 1] == Tok::Path;
            if !after_path && ours(first) && t.get(i + 1) == Some(&Tok::Path) {
                let mut path = vec![first.clone()];
                let mut k = i + 1;
                while t.get(k) == Some(&Tok::Path) {
                    match t.get(k + 1) {
                        Some(Tok::Ident(s)) => path.push(s.clone()),
                        _ => break,
                    }
                    k += 2;
                }
                m.paths.push(path);
                i = k;
                continue;
            }
        }
        i += 1;
    }
    m
}

/// The child modules a file declares (`mod x;`, not under `#[cfg(test)]`).
fn declared_children(src: &str) -> BTreeSet<String> {
    let (t, _) = without_tests(tokenize(&strip(src)));
    let mut out = BTreeSet::new();
    for w in t.windows(3) {
        if let [m, Tok::Ident(name), Tok::Punct(';')] = w {
            if *m == id("mod") {
                out.insert(name.clone());
            }
        }
    }
    out
}

/// Read a crate from its files (`lib.rs` and the files below it, by relative path).
fn read_crate(files: &BTreeMap<PathBuf, String>) -> Crate {
    let mut krate = Crate::default();
    // (module path, its file, the directory its children live in)
    let mut todo: Vec<(ModPath, PathBuf, PathBuf)> = vec![(Vec::new(), PathBuf::from("lib.rs"), PathBuf::new())];
    while let Some((path, file, dir)) = todo.pop() {
        let Some(src) = files.get(&file) else { continue };
        let children = declared_children(src);
        for c in &children {
            let flat = dir.join(format!("{c}.rs"));
            let nested = dir.join(c).join("mod.rs");
            let mut child = path.clone();
            child.push(c.clone());
            if files.contains_key(&flat) {
                todo.push((child, flat, dir.join(c)));
            } else if files.contains_key(&nested) {
                todo.push((child, nested, dir.join(c)));
            }
        }
        krate.modules.insert(path, read_module(&file.display().to_string(), src, &children));
    }
    krate
}

impl Crate {
    /// The module that defines what `path` (as written in module `from`) names.
    fn resolve(&self, from: &ModPath, path: &[String], hops: usize) -> Option<ModPath> {
        let mut cur: ModPath = from.clone();
        let mut rest = path;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                cur.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    cur.pop()?;
                    rest = &rest[1..];
                }
            }
            _ => {}
        }
        for (k, seg) in rest.iter().enumerate() {
            let mut deeper = cur.clone();
            deeper.push(seg.clone());
            if self.modules.contains_key(&deeper) {
                cur = deeper;
                continue;
            }
            // An item of `cur`: follow a re-export to where it is defined.
            if let Some(target) = self.modules.get(&cur).and_then(|m| m.reexports.get(seg)) {
                if hops < 8 {
                    let mut full = target.clone();
                    full.extend(rest[k + 1..].iter().cloned());
                    if let Some(t) = self.resolve(&cur, &full, hops + 1) {
                        return Some(t);
                    }
                }
            }
            return Some(cur);
        }
        Some(cur)
    }

    /// Every edge `from → to` (`from ≠ to`), with a path that makes it.
    fn edges(&self) -> BTreeMap<(ModPath, ModPath), String> {
        let mut out = BTreeMap::new();
        for (from, m) in &self.modules {
            for p in &m.paths {
                if let Some(to) = self.resolve(from, p, 0) {
                    // `to` an ancestor of `from` (or `from` itself): see the module doc.
                    if !from.starts_with(&to) {
                        out.entry((from.clone(), to)).or_insert_with(|| format!("{}: {}", m.file, p.join("::")));
                    }
                }
            }
        }
        out
    }
}

/// The strongly connected components of a graph (Tarjan), each sorted.
fn components(nodes: &[ModPath], edges: &BTreeSet<(ModPath, ModPath)>) -> Vec<Vec<ModPath>> {
    struct State<'a> {
        adj: BTreeMap<&'a ModPath, Vec<&'a ModPath>>,
        index: BTreeMap<&'a ModPath, usize>,
        low: BTreeMap<&'a ModPath, usize>,
        stack: Vec<&'a ModPath>,
        on: BTreeSet<&'a ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a ModPath) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.adj.get(v).cloned().unwrap_or_default() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            comp.sort();
            s.out.push(comp);
        }
    }
    let mut adj: BTreeMap<&ModPath, Vec<&ModPath>> = BTreeMap::new();
    for (a, b) in edges {
        adj.entry(a).or_default().push(b);
    }
    let mut s = State {
        adj,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in nodes {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// The circles of `krate`: each component of two or more modules, with its edges.
fn circles(krate: &Crate) -> Vec<String> {
    let edges = krate.edges();
    let nodes: Vec<ModPath> = krate.modules.keys().cloned().collect();
    let set: BTreeSet<(ModPath, ModPath)> = edges.keys().cloned().collect();
    let name = |p: &ModPath| if p.is_empty() { "crate".to_string() } else { p.join("::") };
    components(&nodes, &set)
        .into_iter()
        .filter(|c| c.len() >= 2)
        .map(|c| {
            let inside: Vec<String> = edges
                .iter()
                .filter(|((a, b), _)| c.contains(a) && c.contains(b))
                .map(|((a, b), why)| format!("    {} -> {} ({why})", name(a), name(b)))
                .collect();
            format!("{{{}}}:\n{}", c.iter().map(name).collect::<Vec<_>>().join(", "), inside.join("\n"))
        })
        .collect()
}

fn load(src: &Path) -> Crate {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let p = entry.unwrap().path();
            if p.is_dir() {
                walk(root, &p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.insert(p.strip_prefix(root).unwrap().to_path_buf(), std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(src, src, &mut files);
    read_crate(&files)
}

fn assert_no_circles(crate_dir: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(crate_dir).join("src");
    let krate = load(&src);
    assert!(krate.modules.len() > 10, "read only {} modules from {}", krate.modules.len(), src.display());
    let found = circles(&krate);
    assert!(found.is_empty(), "modules of {} that import each other in a circle:\n{}", src.display(), found.join("\n"));
}

#[test]
fn the_gateway_has_no_import_circle() {
    assert_no_circles(".");
}

#[test]
fn the_core_has_no_import_circle() {
    assert_no_circles("../storqos-core");
}

fn made_up(files: &[(&str, &str)]) -> Crate {
    read_crate(&files.iter().map(|(p, s)| (PathBuf::from(p), s.to_string())).collect())
}

fn p(s: &str) -> ModPath {
    s.split("::").filter(|x| !x.is_empty()).map(String::from).collect()
}

#[test]
fn tarjan_finds_the_circle_of_a_made_up_graph() {
    // a → b → c → a, c → d, d → e → d: two circles, {a, b, c} and {d, e}; f alone.
    let nodes: Vec<ModPath> = ["a", "b", "c", "d", "e", "f"].map(p).to_vec();
    let edges: BTreeSet<_> = [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e"), ("e", "d"), ("f", "a")]
        .iter()
        .map(|(x, y)| (p(x), p(y)))
        .collect();
    let comps: Vec<_> = components(&nodes, &edges).into_iter().filter(|c| c.len() > 1).collect();
    assert_eq!(comps, vec![vec![p("a"), p("b"), p("c")], vec![p("d"), p("e")]]);
    // A chain has none.
    let chain: BTreeSet<_> = [("a", "b"), ("b", "c")].iter().map(|(x, y)| (p(x), p(y))).collect();
    assert!(components(&nodes, &chain).iter().all(|c| c.len() == 1));
}

#[test]
fn a_made_up_crate_is_read_as_written() {
    let krate = made_up(&[
        ("lib.rs", "pub mod a;\npub mod b;\npub mod dir;\n#[cfg(test)]\nmod t;\npub use a::A;\n"),
        // `crate::A` is a re-export: the edge goes to `a`, which defines it.
        ("a.rs", "use crate::b::{self, B as Bee};\npub struct A;\n"),
        (
            "b.rs",
            "pub struct B;\n// crate::dir::x in a comment\nfn f() { let s = \"crate::dir::x\"; let _ = crate::A; let c = 'x'; }\n\
             #[cfg(test)]\nmod tests { use crate::dir::x::X; }\n",
        ),
        ("dir/mod.rs", "pub mod x;\npub use x::X;\nfn g() { let _ = x::X; }\n"),
        ("dir/x.rs", "pub struct X<'a>(&'a str);\nfn h() -> super::super::b::B { super::g() }\n"),
        ("t.rs", "use crate::a::A;\n"),
    ]);
    let modules: Vec<ModPath> = krate.modules.keys().cloned().collect();
    assert_eq!(modules, vec![p(""), p("a"), p("b"), p("dir"), p("dir::x")], "the test-only module is left out");
    let edges: BTreeSet<(ModPath, ModPath)> = krate.edges().into_keys().collect();
    let want: BTreeSet<_> = [("", "a"), ("a", "b"), ("b", "a"), ("dir", "dir::x"), ("dir::x", "b")]
        .iter()
        .map(|(x, y)| (p(x), p(y)))
        .collect();
    assert_eq!(edges, want);
    let found = circles(&krate);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("{a, b}"), "{found:?}");
}
