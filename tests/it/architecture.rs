//! The shape of the code, checked: dependencies run one way, top to bottom
//! (`docs/architecture.md` draws the same floors), and no file in `src/`
//! reaches itself through its imports (a cycle of any length).
//!
//! An import is a path a file names: `use crate::a::b`, `use super::x`,
//! `use self::y`, or a path written inline (`crate::a::b::f()`,
//! `super::x::T`). Each is resolved to the deepest file it reaches
//! (`crate::image::walk::Walk` is `src/image/walk.rs`; `crate::image::Walk`
//! is `src/image/mod.rs`). Files are read with syn: comments, strings,
//! macro bodies and `#[cfg(test)]` modules do not count.
//! The binary (`src/main.rs`, `src/cli/`) is its own crate above the rest:
//! its `crate::` (and `crate::cli::`) is `src/cli/`.
//!
//! Inside the binary, each command file (`src/cli/*.rs` but `mod.rs`)
//! stands alone, as uv's commands do: what two commands share lives in
//! `cli/mod.rs`, `cli/common/` or the library, never in one of them.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The floors, top first. A module may use modules on lower floors only;
/// modules of one floor do not use each other.
const FLOORS: &[(&str, &[&str])] = &[
    ("the command line", &["cli"]),
    (
        "what a command does",
        &["engine", "check", "create", "compare"],
    ),
    // Signing reaches registries (transport) and the store; builds
    // (engine) and the command line sign and verify through it.
    ("signatures and attestations", &["trust"]),
    (
        "plans, releases and packages",
        &["plan", "release", "bastille", "sbom", "pkg"],
    ),
    // Releases and package catalogues are downloaded through
    // transport::http, on the registries' HTTP stack.
    ("moving images and files", &["transport"]),
    (
        "images, recipes, credentials, jail.conf",
        &["image", "jailfile", "keychain", "jailconf"],
    ),
    ("trees and processes", &["snapshot", "exec", "layer"]),
    ("changes and the store", &["diff", "store"]),
    (
        "utilities",
        &[
            "digest",
            "fsutil",
            "config",
            "report",
            "pipe",
            "spool",
            "jailparam",
        ],
    ),
    // The one trait every error type implements: below every floor.
    ("whose mistake an error is", &["blame"]),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source file's path below `src/`, as a string (`image/walk.rs`).
fn rel(path: &Path) -> String {
    path.strip_prefix(src())
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// The module path of a file: `image/walk.rs` is `[image, walk]`,
/// `image/mod.rs` is `[image]`, `lib.rs` and `main.rs` are `[]`.
fn module_of(rel: &str) -> Vec<String> {
    let stem = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = stem.split('/').map(str::to_string).collect();
    if parts == ["lib"] || parts == ["main"] {
        return Vec::new();
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// Whether the file belongs to the binary crate (`main.rs`, `cli/`).
fn in_binary(rel: &str) -> bool {
    rel == "main.rs" || rel.starts_with("cli/")
}

/// Every path the file names that starts with `crate`, `super` or `self`,
/// with `use` groups (`a::{b, c::{d}}`) expanded, read with syn (so
/// comments, strings and macro bodies are not paths). A `#[cfg(test)]`
/// module is left out: tests may reach anywhere.
fn paths(text: &str) -> Vec<Vec<String>> {
    let file = syn::parse_file(text).expect("src/ parses as Rust");
    let mut found = Paths(Vec::new());
    found.visit_file(&file);
    found.0
}

/// Whether an item is `#[cfg(test)]`: tests may reach anywhere.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

struct Paths(Vec<Vec<String>>);

impl<'ast> Visit<'ast> for Paths {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !test_only(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        use_tree(&mut Vec::new(), &u.tree, &mut self.0);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segs: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segs.len() > 1 && ["crate", "super", "self"].contains(&segs[0].as_str()) {
            self.0.push(segs);
        }
        syn::visit::visit_path(self, p);
    }
}

/// The paths one `use` tree names, each below `prefix`.
fn use_tree(prefix: &mut Vec<String>, tree: &syn::UseTree, out: &mut Vec<Vec<String>>) {
    let rooted = |p: &[String]| {
        p.first()
            .is_some_and(|f| ["crate", "super", "self"].contains(&f.as_str()))
    };
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_tree(prefix, &p.tree, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            if n.ident != "self" {
                path.push(n.ident.to_string());
            }
            if rooted(&path) {
                out.push(path);
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            if rooted(&path) {
                out.push(path);
            }
        }
        syn::UseTree::Glob(_) => {
            if rooted(prefix) {
                out.push(prefix.clone());
            }
        }
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_tree(prefix, t, out);
            }
        }
    }
}

/// The imports of every file: file → files it names.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let known: BTreeSet<String> = all.iter().map(|p| rel(p)).collect();
    let file_of = |segs: &[String], binary: bool| -> Option<String> {
        for n in (0..=segs.len()).rev() {
            let s = &segs[..n];
            if s.is_empty() {
                return Some(if binary { "main.rs" } else { "lib.rs" }.to_string());
            }
            let joined = s.join("/");
            for candidate in [format!("{joined}.rs"), format!("{joined}/mod.rs")] {
                if known.contains(&candidate) {
                    return Some(candidate);
                }
            }
        }
        None
    };
    let mut graph = BTreeMap::new();
    for path in &all {
        let r = rel(path);
        let binary = in_binary(&r);
        let module = module_of(&r);
        let text = fs::read_to_string(path).unwrap();
        let mut targets = BTreeSet::new();
        for p in paths(&text) {
            let mut full: Vec<String> = Vec::new();
            let mut i = 0;
            match p.first().map(String::as_str) {
                Some("crate") => {
                    i = 1;
                    if binary {
                        // `crate::cli::x` and `crate::x` (main.rs's own
                        // items aside) both lead into `src/cli/`.
                        if p.get(1).is_some_and(|s| s == "cli") {
                            i = 2;
                        }
                        full.push("cli".into());
                    }
                }
                Some("super") | Some("self") => {
                    full = module.clone();
                    while let Some(s) = p.get(i).map(String::as_str) {
                        match s {
                            "super" => {
                                full.pop();
                            }
                            "self" => {}
                            _ => break,
                        }
                        i += 1;
                    }
                }
                _ => continue,
            }
            full.extend(p[i..].iter().cloned());
            if let Some(f) = file_of(&full, binary) {
                if f != r {
                    targets.insert(f);
                }
            }
        }
        graph.insert(r, targets);
    }
    graph
}

/// The top-level module a file belongs to (`image/walk.rs` → `image`;
/// `lib.rs` → `lib`).
fn top(file: &str) -> &str {
    let first = file.split('/').next().unwrap();
    first.strip_suffix(".rs").unwrap_or(first)
}

/// The cycles of `graph`: each strongly connected set of two or more
/// files (Tarjan's algorithm), as one cycle through it found by a walk,
/// so the message shows the imports to cut.
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        sets: Vec<Vec<&'g str>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut set = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    set.push(w);
                    if w == v {
                        break;
                    }
                }
                if set.len() > 1 {
                    self.sets.push(set);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        sets: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    // One cycle through each set: from its first file, the shortest way
    // back to it inside the set (breadth first).
    t.sets
        .into_iter()
        .map(|set| {
            let inside: BTreeSet<&str> = set.iter().copied().collect();
            let start = *inside.iter().next().unwrap();
            let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([start]);
            let mut last = None;
            'search: while let Some(v) = queue.pop_front() {
                for w in graph.get(v).into_iter().flatten() {
                    let w = w.as_str();
                    if w == start {
                        last = Some(v);
                        break 'search;
                    }
                    if inside.contains(w) && !came_from.contains_key(w) {
                        came_from.insert(w, v);
                        queue.push_back(w);
                    }
                }
            }
            let mut path = vec![start.to_string()];
            let mut v = last.expect("a strongly connected set leads back to its start");
            let mut back = Vec::new();
            while v != start {
                back.push(v.to_string());
                v = came_from[v];
            }
            path.extend(back.into_iter().rev());
            path.push(start.to_string());
            path
        })
        .collect()
}

#[test]
fn no_file_imports_itself_through_others() {
    let found: Vec<String> = cycles(&imports())
        .into_iter()
        .map(|c| c.join(" -> "))
        .collect();
    assert!(
        found.is_empty(),
        "files that reach themselves through their imports (move what they share into one of \
         them, or a file of its own):\n  {}",
        found.join("\n  ")
    );
}

/// Whether `file` is a CLI command file: directly in `src/cli/`, not its
/// `mod.rs`.
fn is_command_file(file: &str) -> bool {
    file.strip_prefix("cli/")
        .is_some_and(|rest| !rest.contains('/') && rest != "mod.rs")
}

/// The imports of `graph` that reach a command file from any file of the
/// binary but `cli/mod.rs` (which dispatches to them), as `a uses b`.
fn command_imports(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    graph
        .iter()
        .filter(|(from, _)| in_binary(from) && from.as_str() != "cli/mod.rs")
        .flat_map(|(from, to)| {
            to.iter()
                .filter(|t| is_command_file(t))
                .map(move |t| format!("{from} uses {t}"))
        })
        .collect()
}

#[test]
fn command_files_do_not_import_each_other() {
    let found = command_imports(&imports());
    assert!(
        found.is_empty(),
        "CLI command files that import another command file (move what they share into \
         src/cli/mod.rs, src/cli/common/ or the library):\n  {}",
        found.join("\n  ")
    );
}

#[test]
fn dependencies_run_down_the_floors() {
    let floor: BTreeMap<&str, usize> = FLOORS
        .iter()
        .enumerate()
        .flat_map(|(i, (_, modules))| modules.iter().map(move |m| (*m, i)))
        .collect();
    let graph = imports();
    let mut wrong = BTreeSet::new();
    let mut unplaced = BTreeSet::new();
    for (a, targets) in &graph {
        let from = if in_binary(a) { "cli" } else { top(a) };
        for b in targets {
            let to = if in_binary(b) { "cli" } else { top(b) };
            if from == to || to == "lib" || to == "main" || from == "lib" || from == "main" {
                continue;
            }
            match (floor.get(from), floor.get(to)) {
                (Some(f), Some(t)) if f < t => {}
                (Some(_), Some(_)) => {
                    wrong.insert(format!("{from} -> {to} ({a} uses {b})"));
                }
                (None, _) => {
                    unplaced.insert(from.to_string());
                }
                (_, None) => {
                    unplaced.insert(to.to_string());
                }
            }
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules on no floor (add them to FLOORS here and to docs/architecture.md): {unplaced:?}"
    );
    assert!(
        wrong.is_empty(),
        "dependencies that run up or sideways:\n  {}",
        wrong.into_iter().collect::<Vec<_>>().join("\n  ")
    );
}

/// The checker itself: it sees each kind of import, and a cycle.
#[test]
fn the_checker_reads_imports_as_rust_does() {
    let text = "use crate::image::{self, walk::{Walk, Bounds}, media as m};\n\
                use super::names;\n\
                // use crate::engine::run;\n\
                fn f() { let s = \"crate::check::x\"; crate::store::Store::open(); super::x::y(); }\n\
                macro_rules! m { () => { $crate::engine::x() } }\n\
                #[cfg(test)]\nmod tests {\n    use crate::transport;\n}\n";
    let found: BTreeSet<String> = paths(text).into_iter().map(|p| p.join("::")).collect();
    let want: BTreeSet<String> = [
        "crate::image",
        "crate::image::walk::Walk",
        "crate::image::walk::Bounds",
        "crate::image::media",
        "super::names",
        "crate::store::Store::open",
        "super::x::y",
    ]
    .into_iter()
    .map(str::to_string)
    .collect();
    assert_eq!(found, want);
    assert_eq!(module_of("image/mod.rs"), ["image"]);
    assert_eq!(module_of("image/walk.rs"), ["image", "walk"]);
    assert_eq!(top("image/walk.rs"), "image");
    assert_eq!(top("create.rs"), "create");

    // A cycle through three files is found, and named in its order; a
    // file that only reaches the cycle is not in it.
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a.rs", &["b.rs"][..]),
        ("b.rs", &["c.rs"]),
        ("c.rs", &["a.rs"]),
        ("d.rs", &["a.rs"]),
        ("e.rs", &[]),
    ]
    .into_iter()
    .map(|(f, to)| (f.to_string(), to.iter().map(|t| t.to_string()).collect()))
    .collect();
    assert_eq!(cycles(&graph), [["a.rs", "b.rs", "c.rs", "a.rs"]]);
    let two: BTreeMap<String, BTreeSet<String>> = [("x.rs", "y.rs"), ("y.rs", "x.rs")]
        .into_iter()
        .map(|(f, t)| (f.to_string(), BTreeSet::from([t.to_string()])))
        .collect();
    assert_eq!(cycles(&two), [["x.rs", "y.rs", "x.rs"]]);

    // A command file reaching another, by either path, is found; reaching
    // `cli/mod.rs`, `cli/common/` or the library is not.
    let cli = "use super::registry::push_to;\n\
               use super::common::done;\n\
               use super::{Ctx, Failure};\n\
               fn f() { crate::cli::transfer::copy(); jbuild::store::Store::open(); }\n";
    let found: BTreeSet<String> = paths(cli).into_iter().map(|p| p.join("::")).collect();
    assert!(
        found.contains("super::registry::push_to") && found.contains("crate::cli::transfer::copy")
    );
    let graph: BTreeMap<String, BTreeSet<String>> = [
        (
            "cli/build.rs",
            &["cli/registry.rs", "cli/mod.rs", "cli/common/mod.rs"][..],
        ),
        ("cli/common/access.rs", &["cli/trust.rs"]),
        ("cli/mod.rs", &["cli/build.rs"]),
        ("cli/images.rs", &["cli/common/access.rs", "image/mod.rs"]),
    ]
    .into_iter()
    .map(|(f, to)| (f.to_string(), to.iter().map(|t| t.to_string()).collect()))
    .collect();
    assert_eq!(
        command_imports(&graph),
        [
            "cli/build.rs uses cli/registry.rs",
            "cli/common/access.rs uses cli/trust.rs"
        ]
    );
}

/// One async runtime per process: only `transport/runtime.rs` builds one
/// (lazily, once; `transport::runtimes_built` counts them), so an HTTP
/// client is never used on two runtimes in a row. Tests of the library
/// (`#[tokio::test]`) make their own and are not counted here.
#[test]
fn only_the_transport_builds_an_async_runtime() {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let builders = ["runtime::Builder", "Runtime::new(", "#[tokio::main"];
    let found: Vec<String> = all
        .iter()
        .filter(|p| rel(p) != "transport/runtime.rs")
        .filter(|p| {
            let text = fs::read_to_string(p).unwrap();
            builders.iter().any(|b| text.contains(b))
        })
        .map(|p| rel(p))
        .collect();
    assert!(
        found.is_empty(),
        "files that build an async runtime of their own (use transport::block_on): {found:?}"
    );
}

// ---- blame: one `impl Blame` per error type --------------------------

/// A `pub` error type (`#[derive(.., thiserror::Error)]`, or `Error` where
/// the file imports thiserror's) outside `#[cfg(test)]` modules, or an
/// `impl Blame for T`, as found in one file.
#[derive(Default)]
struct ErrorTypes {
    /// `(name, file)` of each error type.
    types: Vec<(String, String)>,
    /// `(type as written, file)` of each `impl Blame for`.
    impls: Vec<(Vec<String>, String)>,
    file: String,
    plain_error_is_thiserror: bool,
}

impl ErrorTypes {
    fn derives_error(&self, attrs: &[syn::Attribute]) -> bool {
        attrs
            .iter()
            .filter(|a| a.path().is_ident("derive"))
            .any(|a| {
                let mut found = false;
                let _ = a.parse_nested_meta(|m| {
                    let segs: Vec<String> = m
                        .path
                        .segments
                        .iter()
                        .map(|s| s.ident.to_string())
                        .collect();
                    found |= segs == ["thiserror", "Error"]
                        || (segs == ["Error"] && self.plain_error_is_thiserror);
                    Ok(())
                });
                found
            })
    }

    fn add_type(&mut self, vis: &syn::Visibility, attrs: &[syn::Attribute], ident: &syn::Ident) {
        if matches!(vis, syn::Visibility::Public(_)) && self.derives_error(attrs) {
            self.types.push((ident.to_string(), self.file.clone()));
        }
    }
}

impl<'ast> Visit<'ast> for ErrorTypes {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !test_only(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }
    fn visit_item_enum(&mut self, e: &'ast syn::ItemEnum) {
        self.add_type(&e.vis, &e.attrs, &e.ident);
    }
    fn visit_item_struct(&mut self, s: &'ast syn::ItemStruct) {
        self.add_type(&s.vis, &s.attrs, &s.ident);
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let Some((_, trait_path, _)) = &i.trait_ else {
            return;
        };
        if trait_path
            .segments
            .last()
            .is_none_or(|s| s.ident != "Blame")
        {
            return;
        }
        if let syn::Type::Path(p) = &*i.self_ty {
            let segs = p
                .path
                .segments
                .iter()
                .map(|s| s.ident.to_string())
                .collect();
            self.impls.push((segs, self.file.clone()));
        }
    }
}

/// What is wrong with the error types of `sources` (`(file, text)`): a
/// type with no `impl Blame`, or with more than one. An impl names its
/// type by the last segment of its path; where two files define a type of
/// that name, the impl counts for the one in its own file.
fn blame_problems(sources: &[(String, String)]) -> Vec<String> {
    let mut found = ErrorTypes::default();
    for (file, text) in sources {
        found.file = file.clone();
        found.plain_error_is_thiserror = text.contains("use thiserror::Error");
        found.visit_file(&syn::parse_file(text).expect("src/ parses as Rust"));
    }
    let mut counts: BTreeMap<(String, String), usize> =
        found.types.iter().map(|t| (t.clone(), 0)).collect();
    for (segs, file) in &found.impls {
        let name = segs.last().unwrap();
        let same: Vec<&(String, String)> = found.types.iter().filter(|(n, _)| n == name).collect();
        let target = match same.as_slice() {
            [one] => Some(*one),
            many => many.iter().find(|(_, f)| f == file).copied(),
        };
        if let Some(t) = target {
            *counts.get_mut(t).unwrap() += 1;
        }
    }
    counts
        .into_iter()
        .filter(|(_, n)| *n != 1)
        .map(|((name, file), n)| format!("{file}: {name} has {n} `impl Blame for {name}`"))
        .collect()
}

/// Every public error type says whose mistake it is, once
/// (`src/blame.rs`): the CLI turns any of them into its failure with one
/// `From`, and no command decides for a type on its own.
#[test]
fn every_error_type_has_one_blame() {
    let mut all = Vec::new();
    files(&src(), &mut all);
    let sources: Vec<(String, String)> = all
        .iter()
        .map(|p| (rel(p), fs::read_to_string(p).unwrap()))
        .collect();
    let problems = blame_problems(&sources);
    assert!(
        problems.is_empty(),
        "error types without exactly one `impl Blame` (write it beside the type, deciding by \
         its variants: src/blame.rs):\n  {}",
        problems.join("\n  ")
    );

    // The checker itself: a type without an impl, one with two, one
    // behind `use thiserror::Error`, a private one, one in a test module.
    let planted = |text: &str| blame_problems(&[("x.rs".into(), text.into())]);
    let text = "use thiserror::Error;
        #[derive(Debug, Error)] pub enum A { #[error(\"a\")] A }
        #[derive(Debug, thiserror::Error)] #[error(\"b\")] pub struct B;
        #[derive(Debug, thiserror::Error)] #[error(\"c\")] struct C;
        impl crate::blame::Blame for B { fn is_user_error(&self) -> bool { true } }
        impl Blame for B { fn is_user_error(&self) -> bool { true } }
        #[cfg(test)] mod tests { #[derive(Debug, thiserror::Error)] #[error(\"d\")] pub struct D; }";
    assert_eq!(
        planted(text),
        [
            "x.rs: A has 0 `impl Blame for A`",
            "x.rs: B has 2 `impl Blame for B`"
        ]
    );
}
