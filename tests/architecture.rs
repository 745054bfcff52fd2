//! The shape of the code, checked: dependencies run one way, top to bottom
//! (`docs/architecture.md` draws the same floors), and no file in `src/`
//! imports a file that imports it back.
//!
//! An import is a path a file names: `use crate::a::b`, `use super::x`,
//! `use self::y`, or a path written inline (`crate::a::b::f()`,
//! `super::x::T`). Each is resolved to the deepest file it reaches
//! (`crate::image::walk::Walk` is `src/image/walk.rs`; `crate::image::Walk`
//! is `src/image/mod.rs`). Comments, strings, `$crate::` in macros and
//! `#[cfg(test)] mod tests { … }` blocks at the end of a file do not count.
//! The binary (`src/main.rs`, `src/cli/`) is its own crate above the rest:
//! its `crate::` is `src/cli/`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The floors, top first. A module may use modules on lower floors only;
/// modules of one floor do not use each other.
const FLOORS: &[(&str, &[&str])] = &[
    ("the command line", &["cli"]),
    ("what a command does", &["engine", "check", "create"]),
    (
        "plans and moving images",
        &["plan", "release", "transport", "bastille"],
    ),
    (
        "images, recipes, credentials, jail.conf",
        &["image", "jailfile", "keychain", "jailconf"],
    ),
    ("trees and processes", &["snapshot", "exec", "layer"]),
    ("changes and the store", &["diff", "store"]),
    ("utilities", &["digest", "fsutil", "config", "report"]),
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

/// Source text without comments, string and char literals, and the
/// trailing `#[cfg(test)] mod tests { … }` block.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => text,
    };
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
        } else if b[i] == b'r'
            && (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
            && (i == 0 || !is_ident(b[i - 1]))
        {
            // A raw string: r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(b[i] as char);
                i += 1;
                continue;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                j += 1;
            }
            i = j + close.len();
            out.push_str("\"\"");
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' && b.get(i + 2) == Some(&b'\'') {
            // 'x'
            i += 3;
        } else if b[i] == b'\'' && b.get(i + 1) == Some(&b'\\') {
            // '\n', '\''
            i += 2;
            while i < b.len() && b[i] != b'\'' {
                i += 1;
            }
            i += 1;
        } else {
            out.push(b[i] as char);
            i += 1;
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Every path the code names that starts with `crate`, `super` or `self`,
/// with `use` groups (`a::{b, c::{d}}`) expanded.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    // `use` statements, whole (they may hold groups).
    let mut rest = code;
    while let Some(at) = find_word(rest, "use") {
        let after = &rest[at + 3..];
        let Some(end) = after.find(';') else { break };
        let tree: String = after[..end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let tree = tree.trim();
        if ["crate", "super", "self"]
            .iter()
            .any(|r| tree.starts_with(&format!("{r}::")))
        {
            expand(&[], tree, &mut out);
        }
        rest = &after[end..];
    }
    // Inline paths.
    let b = code.as_bytes();
    for root in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(root) {
            let at = from + i;
            from = at + root.len();
            if at > 0 && (is_ident(b[at - 1]) || b[at - 1] == b':' || b[at - 1] == b'$') {
                continue;
            }
            let mut end = at;
            while end < b.len() && (is_ident(b[end]) || b[end] == b':') {
                end += 1;
            }
            let path: Vec<String> = code[at..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            out.push(path);
        }
    }
    out
}

fn find_word(s: &str, word: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut from = 0;
    while let Some(i) = s[from..].find(word) {
        let at = from + i;
        let before = at == 0 || !is_ident(b[at - 1]);
        let after = b.get(at + word.len()).is_none_or(|c| !is_ident(*c));
        if before && after {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// `prefix` followed by one use tree (`a::b`, `a::{b, c}`, `a as x`).
fn expand(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut base = prefix.to_vec();
        base.extend(head);
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&base, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&base, &inner[start..], out);
        return;
    }
    let tree = tree.split(" as ").next().unwrap_or(tree).trim();
    if tree.is_empty() {
        return;
    }
    let mut path = prefix.to_vec();
    path.extend(
        tree.split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "self" && *s != "*")
            .map(str::to_string),
    );
    out.push(path);
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
        for p in paths(&code(&text)) {
            let mut full: Vec<String> = Vec::new();
            let mut i = 0;
            match p.first().map(String::as_str) {
                Some("crate") => {
                    i = 1;
                    if binary {
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

#[test]
fn no_file_imports_a_file_that_imports_it_back() {
    let graph = imports();
    let mut pairs = Vec::new();
    for (a, targets) in &graph {
        for b in targets {
            if a < b && graph.get(b).is_some_and(|t| t.contains(a)) {
                pairs.push(format!("{a} <-> {b}"));
            }
        }
    }
    assert!(
        pairs.is_empty(),
        "files that import each other (move what both need into one of them, or a file of its own):\n  {}",
        pairs.join("\n  ")
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
                fn f() { let s = \"crate::check::x\"; crate::store::Store::open(); super::x::y(); $crate::m!(); }\n\
                #[cfg(test)]\nmod tests {\n    use crate::transport;\n}\n";
    let found: BTreeSet<String> = paths(&code(text))
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
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
}
