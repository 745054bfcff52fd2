//! No line of an error report repeats one before it: an error that exposes
//! a cause (`#[source]`, `#[from]`, a field named `source`) does not also
//! print it in its own message, so `error: …` then `caused by: …` is each
//! cause once, without the printers removing repeats by their text.
//!
//! Three ways in: every `thiserror` type in `src/` read with `syn` (a
//! format that names its source fails, naming the file and the variant);
//! errors of several types built here and walked by their `source()`; and
//! real failures of the `jbuild` binary read from its standard error.

use std::error::Error;
use std::fs;
use std::path::Path;

use crate::support::common::*;

/// Fails when a line (after its `error: ` or `caused by: ` label) is
/// repeated by, or is contained in, a line before it.
fn assert_no_repeat(lines: &[String], what: &str) {
    for (j, later) in lines.iter().enumerate() {
        let later = later.trim();
        if later.is_empty() {
            continue;
        }
        for earlier in &lines[..j] {
            assert!(
                !earlier.contains(later),
                "{what}: `{later}` repeats a line before it:\n{}",
                lines.join("\n")
            );
        }
    }
}

/// An error and its causes, one line each, as `jbuild` prints them.
fn chain_lines(e: &(dyn Error + 'static)) -> Vec<String> {
    let mut out = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push(c.to_string());
        cur = c.source();
    }
    out
}

/// The lines of a report on standard error, without their labels.
fn report_lines(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| {
            l.strip_prefix("error: ")
                .or_else(|| l.trim_start().strip_prefix("caused by: "))
        })
        .map(str::to_string)
        .collect()
}

// ---- every thiserror type in src/ ------------------------------------

#[derive(Default)]
struct Finder {
    file: String,
    found: Vec<String>,
}

impl Finder {
    fn check(&mut self, name: &str, attrs: &[syn::Attribute], fields: &syn::Fields) {
        let Some(attr) = attrs.iter().find(|a| a.path().is_ident("error")) else {
            return;
        };
        let syn::Meta::List(list) = &attr.meta else {
            return;
        };
        let mut tokens = list.tokens.clone().into_iter();
        let Some(first) = tokens.next() else { return };
        let Ok(format) = syn::parse2::<syn::LitStr>(first.into()) else {
            return; // `transparent`
        };
        let format = format.value();
        // The arguments after the format, split at top-level commas.
        let mut args = vec![String::new()];
        for t in tokens {
            let t = t.to_string();
            if t == "," {
                args.push(String::new());
            } else {
                args.last_mut().unwrap().push_str(&t);
                args.last_mut().unwrap().push(' ');
            }
        }
        let sources: Vec<String> = fields
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                f.attrs
                    .iter()
                    .any(|a| a.path().is_ident("source") || a.path().is_ident("from"))
                    || f.ident.as_ref().is_some_and(|i| i == "source")
            })
            .map(|(i, f)| f.ident.as_ref().map_or(i.to_string(), |id| id.to_string()))
            .collect();
        for s in sources {
            let in_format =
                format.contains(&format!("{{{s}}}")) || format.contains(&format!("{{{s}:"));
            let as_arg = args.iter().any(|a| {
                let a = a.trim();
                a == s || a == format!("& {s}") || a.starts_with(&format!("{s} . to_string"))
            });
            if in_format || as_arg {
                self.found.push(format!(
                    "{}: {name} prints its source `{s}`: \"{format}\"",
                    self.file
                ));
            }
        }
    }
}

impl<'ast> syn::visit::Visit<'ast> for Finder {
    fn visit_item_enum(&mut self, e: &'ast syn::ItemEnum) {
        for v in &e.variants {
            self.check(&format!("{}::{}", e.ident, v.ident), &v.attrs, &v.fields);
        }
    }
    fn visit_item_struct(&mut self, s: &'ast syn::ItemStruct) {
        self.check(&s.ident.to_string(), &s.attrs, &s.fields);
    }
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_error_type_prints_its_own_source() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut finder = Finder::default();
    let mut types = 0;
    for f in &files {
        let text = fs::read_to_string(f).unwrap();
        types += text.matches("thiserror::Error").count();
        finder.file = f.strip_prefix(&src).unwrap().display().to_string();
        syn::visit::Visit::visit_file(&mut finder, &syn::parse_file(&text).unwrap());
    }
    assert!(types > 40, "found only {types} error types: is src/ read?");
    assert!(
        finder.found.is_empty(),
        "an error that returns its source as its cause must not also print it (the cause \
         is printed on its own line): make the variant `#[error(transparent)]`, or drop the \
         source from its message:\n{}",
        finder.found.join("\n")
    );
}

// ---- errors built here ------------------------------------------------

#[test]
fn errors_built_here_print_each_cause_once() {
    use jbuild::engine::BuildError;
    use jbuild::fsutil::output::OutputError;
    use jbuild::jailfile::arg_file::ArgFileError;
    use jbuild::release::ReleaseError;
    use jbuild::transport::TransportError;
    let io = || std::io::Error::from_raw_os_error(libc::ENOSPC);
    let built: Vec<Box<dyn Error>> = vec![
        Box::new(BuildError::io("cannot write the layer", io())),
        Box::new(
            BuildError::io("cannot write the layer", io())
                .located(&jbuild::jailfile::Location {
                    file: std::sync::Arc::new("Jailfile".into()),
                    line: 3,
                    column: 1,
                })
                .with_step("RUN make"),
        ),
        Box::new(OutputError::Io {
            path: "/out/x".into(),
            source: io(),
        }),
        Box::new(ArgFileError::Read {
            path: "args".into(),
            source: io(),
        }),
        Box::new(ReleaseError::Io {
            path: "/cache/base.txz".into(),
            source: io(),
        }),
        Box::new(TransportError::Io {
            context: "cannot write blob".into(),
            source: io(),
        }),
        Box::new(TransportError::Output {
            location: "oci-archive:/out/x.tar".into(),
            source: OutputError::Io {
                path: "/out/x.tar".into(),
                source: io(),
            },
        }),
    ];
    for e in &built {
        let lines = chain_lines(e.as_ref());
        assert!(lines.len() >= 2, "{lines:?} keeps its cause");
        assert_no_repeat(&lines, &format!("{e:?}"));
    }
}

// ---- real failures through the binary ---------------------------------

fn fails(c: &mut std::process::Command, what: &str) -> Vec<String> {
    let out = run(c);
    assert!(!out.status.success(), "{what} should fail");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let lines = report_lines(&stderr);
    assert!(!lines.is_empty(), "{what}: no report in:\n{stderr}");
    assert_no_repeat(&lines, what);
    lines
}

#[test]
fn real_failures_print_each_cause_once() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("r");
    let ctx = t.path().join("c");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(
        ctx.join("Jailfile"),
        "FROM scratch\nCOPY missing.txt /etc/\n",
    )
    .unwrap();
    fails(
        jbuild(&root).arg("build").arg(&ctx),
        "a COPY of a missing file",
    );

    fails(
        jbuild(&root)
            .args(["build", "--build-arg-file"])
            .arg(t.path().join("no-such-args"))
            .arg(&ctx),
        "a missing build-argument file",
    );

    fs::write(ctx.join("Jailfile"), "FROM scratch\nCOPY . /\n").unwrap();
    ok(jbuild(&root).args(["build", "-t", "x:1"]).arg(&ctx));
    fails(
        jbuild(&root).args(["export", "x:1"]).arg(format!(
            "oci-archive:{}/no/such/dir/x.tar",
            t.path().display()
        )),
        "an export into a missing directory",
    );

    fs::write(t.path().join("junk.tar"), b"not a tar at all").unwrap();
    fails(
        jbuild(&root)
            .arg("import")
            .arg(format!("oci-archive:{}/junk.tar", t.path().display())),
        "an import of a file that is not an archive",
    );

    // Nothing listens on port 1: a reqwest error several causes deep.
    let lines = fails(
        jbuild(&root).args(["pull", "docker://127.0.0.1:1/nothing:1"]),
        "a pull from a registry that is not there",
    );
    assert!(lines.len() >= 2, "{lines:?}");
}
