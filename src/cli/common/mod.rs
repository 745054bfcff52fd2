//! What the command files (`src/cli/*.rs`) share: the flags many commands
//! take (`access`: registries, the pull policy, `--jobs`; `template`:
//! Bastille templates), asking at the terminal (`prompt`, `keys`), and
//! how a copy's result and failures are told. A part of `cli/mod.rs`, kept
//! in files of their own for size: a command file imports from here and
//! from `cli/mod.rs`, never from another command file
//! (`tests/it/architecture.rs` holds that).

pub mod access;
pub mod context;
pub mod keys;
pub mod prompt;
pub mod pulling;
pub mod template;

use std::collections::BTreeMap;

use anyhow::anyhow;
use serde_json::json;

use crate::cli::{disk_full, Ctx, Failure};
use jbuild::transport::Location;

/// A copy to a place the user named (`export`'s and `copy`'s destination)
/// ran out of space there: the error says so and names the place, so the
/// store, which only was read, is not blamed (nor `prune` suggested).
#[derive(Debug)]
pub struct DestinationFull(String);

impl std::fmt::Display for DestinationFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: no space left on its filesystem", self.0)
    }
}

impl DestinationFull {
    /// `f`, said to be `destination`'s full disk when it is one.
    pub fn mark(f: Failure, destination: &Location) -> Failure {
        if !disk_full(&f.error) {
            return f;
        }
        Failure {
            user: true,
            error: f.error.context(DestinationFull(destination.to_string())),
        }
    }

    /// The mark on `e`, if a command put one.
    pub fn find(e: &anyhow::Error) -> Option<&DestinationFull> {
        e.downcast_ref::<DestinationFull>()
    }

    /// The destination, as the user wrote it.
    pub fn place(&self) -> &str {
        &self.0
    }
}

/// Refuses `--json` with an archive written to standard output: both
/// would go there.
pub fn stdout_free(ctx: &Ctx, destination: &Location) -> Result<(), Failure> {
    if ctx.json && destination.writes_stdout() {
        return Err(Failure::user(anyhow!(
            "{destination} writes the archive to standard output, where --json writes its \
             events: leave out --json, or write the archive to a file"
        )));
    }
    Ok(())
}

/// Says what was copied where: the digest on standard output, unless the
/// image itself went there (`to` writes standard output: `oci-archive:-`).
pub fn done(ctx: &Ctx, digest: &str, place: &str, tag: Option<&str>, to: Option<&Location>) {
    if to.is_some_and(Location::writes_stdout) {
        if !ctx.quiet {
            eprintln!("copied {digest} to {place}");
        }
    } else if ctx.json {
        outln!(
            "{}",
            json!({"event": "result", "digest": digest, "to": place, "tag": tag})
        );
    } else {
        if !ctx.quiet {
            eprintln!("copied {digest} to {place}");
        }
        outln!("{digest}");
    }
}

/// Writes `text` (no newline, as docker and podman write a digest) to
/// `file` as `fsutil::output` writes a path the user names: a regular
/// file atomically (a script never reads half of it), a FIFO or device in
/// place, `-` to standard output.
pub fn write_file(flag: &str, file: &std::path::Path, text: &str) -> Result<(), Failure> {
    jbuild::fsutil::output::write_output(file, text.as_bytes())
        .map_err(|e| Failure::context(e, format!("{flag} {}: nothing written", file.display())))
}

/// `--build-arg` values (build and verify): `K=V`, or `K` alone for the
/// environment variable K's value (ignored when unset, as docker does).
pub fn parse_build_args(raw: &[String]) -> Result<BTreeMap<String, String>, Failure> {
    let mut out = BTreeMap::new();
    for a in raw {
        let (k, v) = match a.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => match std::env::var(a) {
                Ok(v) => (a.clone(), v),
                Err(_) => continue, // docker: `--build-arg K` with K unset is ignored
            },
        };
        if k.is_empty() {
            return Err(Failure::user(anyhow!(
                "--build-arg `{a}`: the name is empty; use --build-arg NAME=VALUE"
            )));
        }
        out.insert(k, v);
    }
    Ok(out)
}
