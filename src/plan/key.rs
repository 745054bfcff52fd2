//! The cache-key encoding. jbuild owns it and versions it: a key is the
//! sha256 of a byte string built here field by field, never the serde
//! output of an internal struct, so refactoring a type cannot silently
//! change (or freeze) what a key means.
//!
//! # Encoding, version 2
//!
//! The byte string starts with `jbuild-step-v2\n`. Each field follows as
//! `<tag>=<len>:<bytes>\n`, where `<tag>` is a fixed ASCII name and `<len>`
//! the decimal byte length of `<bytes>` (a netstring, so no value can forge
//! a field boundary). Lists are a count field followed by their items.
//! Changing anything in this file that changes the bytes for an existing
//! input requires bumping [`KEY_VERSION`].
//!
//! History: version 2 added, for PKG steps, `pkg.abi`, `pkg.osversion`
//! and `pkg.repositories` (so an updated package repository re-runs the
//! step), and keyed `FROM freebsd:<release>` on the sha256 of its sets.
//! Within version 2, PKG steps' `pkg.repositories` (which named only
//! `--pkg-repos`'s or FreeBSD's default repositories, not those the image
//! names) became `pkg.root`, what the step's root names
//! ([`super::PkgRoot`]); a new tag, so no old key can mean the new thing,
//! and every PKG step runs once more.

use crate::digest::Digest;
use crate::jailfile::{AddSource, Command, CopyFrom, CopySource, MountKind, Op, RunMount, SysrcOp};

pub const KEY_VERSION: &str = "jbuild-step-v2";

/// Builds the byte string a key is the hash of.
pub struct KeyEncoder {
    buf: Vec<u8>,
}

impl Default for KeyEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl KeyEncoder {
    pub fn new() -> Self {
        let mut buf = Vec::with_capacity(256);
        buf.extend_from_slice(KEY_VERSION.as_bytes());
        buf.push(b'\n');
        KeyEncoder { buf }
    }

    pub fn field(&mut self, tag: &str, value: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(tag.as_bytes());
        self.buf.push(b'=');
        self.buf
            .extend_from_slice(value.len().to_string().as_bytes());
        self.buf.push(b':');
        self.buf.extend_from_slice(value);
        self.buf.push(b'\n');
        self
    }

    pub fn str(&mut self, tag: &str, value: &str) -> &mut Self {
        self.field(tag, value.as_bytes())
    }

    pub fn opt(&mut self, tag: &str, value: Option<&str>) -> &mut Self {
        match value {
            Some(v) => self.str(tag, v),
            None => self.field(&format!("{tag}.none"), b""),
        }
    }

    pub fn list<'a>(
        &mut self,
        tag: &str,
        items: impl ExactSizeIterator<Item = &'a str>,
    ) -> &mut Self {
        self.str(&format!("{tag}.count"), &items.len().to_string());
        for item in items {
            self.str(tag, item);
        }
        self
    }

    pub fn pairs<'a>(
        &mut self,
        tag: &str,
        items: impl ExactSizeIterator<Item = (&'a str, &'a str)>,
    ) -> &mut Self {
        self.str(&format!("{tag}.count"), &items.len().to_string());
        for (k, v) in items {
            self.str(&format!("{tag}.key"), k);
            self.str(&format!("{tag}.value"), v);
        }
        self
    }

    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    pub fn finish(&self) -> Digest {
        Digest::of(&self.buf)
    }
}

fn command(e: &mut KeyEncoder, tag: &str, c: &Command) {
    match c {
        Command::Shell(s) => {
            e.str(&format!("{tag}.shell"), s);
        }
        Command::Exec(argv) => {
            e.list(&format!("{tag}.exec"), argv.iter().map(String::as_str));
        }
    }
}

/// A `RUN --mount`'s options: what it is and where, never what it holds (a
/// secret's value, a cache's files); what a bind mount reads is keyed by
/// the planner, as COPY's sources are.
fn mount(e: &mut KeyEncoder, m: &RunMount) {
    e.str("mount.target", &m.target);
    match &m.kind {
        MountKind::Secret {
            id,
            required,
            mode,
            uid,
            gid,
        } => {
            e.str("mount.type", "secret")
                .str("mount.id", id)
                .str("mount.required", if *required { "yes" } else { "no" })
                .str("mount.mode", &format!("{mode:o}"))
                .str("mount.owner", &format!("{uid}:{gid}"));
        }
        MountKind::Cache {
            id,
            sharing,
            mode,
            uid,
            gid,
        } => {
            e.str("mount.type", "cache")
                .str("mount.id", id)
                .str("mount.sharing", sharing.as_str())
                .str("mount.mode", &format!("{mode:o}"))
                .str("mount.owner", &format!("{uid}:{gid}"));
        }
        MountKind::Tmpfs { size } => {
            e.str("mount.type", "tmpfs")
                .opt("mount.size", size.map(|s| s.to_string()).as_deref());
        }
        MountKind::Bind { from, source, rw } => {
            e.str("mount.type", "bind");
            match from {
                None => e.str("mount.from", "context"),
                Some(CopyFrom::Stage(i)) => e.str("mount.from.stage", &i.to_string()),
                Some(CopyFrom::Image(r)) => e.str("mount.from.image", r),
            };
            e.str("mount.source", source)
                .str("mount.rw", if *rw { "yes" } else { "no" });
        }
    }
}

/// Encodes what a filesystem-changing instruction does, after substitution.
pub fn encode_op(e: &mut KeyEncoder, op: &Op) {
    match op {
        Op::Run {
            command: c,
            network,
            mounts,
        } => {
            e.str("op", "run");
            command(e, "command", c);
            e.str("network", if *network { "host" } else { "none" });
            // Only written when there are mounts, so the keys of RUN steps
            // without any stay what they were in version 2.
            if !mounts.is_empty() {
                e.str("mount.count", &mounts.len().to_string());
                for m in mounts {
                    mount(e, m);
                }
            }
        }
        Op::Pkg {
            packages,
            bootstrap,
            // Keyed as it is in force, with `[pkg] scripts`: `step::step_key`.
            scripts: _,
        } => {
            e.str("op", "pkg");
            e.list("package", packages.iter().map(String::as_str));
            // Only when off, so the keys of PKG steps written before the
            // flag existed stay.
            if !bootstrap {
                e.str("pkg.bootstrap", "no");
            }
        }
        Op::Copy(c) => {
            e.str("op", "copy");
            match &c.from {
                None => e.str("from", "context"),
                Some(CopyFrom::Stage(i)) => e.str("from.stage", &i.to_string()),
                Some(CopyFrom::Image(r)) => e.str("from.image", r),
            };
            e.str("sources.count", &c.sources.len().to_string());
            for s in &c.sources {
                match s {
                    CopySource::Path(p) => e.str("source.path", p),
                    CopySource::Inline { name, content } => e
                        .str("source.inline.name", name)
                        .str("source.inline.content", content),
                };
            }
            e.str("dest", &c.dest);
            e.opt("chown", c.chown.as_deref());
            e.opt("chmod", c.chmod.map(|m| format!("{m:o}")).as_deref());
            // Only when given, so the keys of COPY steps without them stay
            // what they were in version 2.
            if c.parents {
                e.str("parents", "true");
            }
            if !c.exclude.is_empty() {
                e.list("exclude", c.exclude.iter().map(String::as_str));
            }
        }
        Op::Add {
            sources,
            dest,
            chown,
            chmod,
            exclude,
            checksum,
            keep_git_dir,
        } => {
            e.str("op", "add");
            e.str("sources.count", &sources.len().to_string());
            for s in sources {
                match s {
                    AddSource::Context(CopySource::Path(p)) => e.str("source.path", p),
                    AddSource::Context(CopySource::Inline { name, content }) => e
                        .str("source.inline.name", name)
                        .str("source.inline.content", content),
                    AddSource::Url(u) => e.str("source.url", u),
                    AddSource::Git { url, reference } => e
                        .str("source.git", url)
                        .opt("source.git.ref", reference.as_deref()),
                };
            }
            e.str("dest", dest);
            e.opt("chown", chown.as_deref());
            e.opt("chmod", chmod.map(|m| format!("{m:o}")).as_deref());
            e.list("exclude", exclude.iter().map(String::as_str));
            e.opt(
                "checksum",
                checksum.as_ref().map(|d| d.to_string()).as_deref(),
            );
            e.str("keep-git-dir", if *keep_git_dir { "yes" } else { "no" });
        }
        Op::Sysrc {
            file,
            name,
            op,
            value,
        } => {
            let op = match op {
                SysrcOp::Set => "=",
                SysrcOp::Append => "+=",
                SysrcOp::Remove => "-=",
            };
            e.str("op", "sysrc")
                .str("file", file)
                .str("name", name)
                .str("assign", op)
                .str("value", value);
        }
        Op::Service { name, enable } => {
            e.str("op", "service")
                .str("name", name)
                .str("enable", if *enable { "yes" } else { "no" });
        }
        Op::LineInFile { line, file } => {
            e.str("op", "line-in-file")
                .str("line", line)
                .str("file", file);
        }
        Op::Render { path, vars } => {
            e.str("op", "render").str("path", path);
            e.pairs("var", vars.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        }
        // Metadata instructions make no snapshot and so have no key; they
        // reach keys only through the execution context they set.
        Op::Env(_)
        | Op::Label(_)
        | Op::User(_)
        | Op::Workdir(_)
        | Op::Expose(_)
        | Op::Volume(_)
        | Op::Cmd(_)
        | Op::Entrypoint(_)
        | Op::Jail(_)
        | Op::StopSignal(_)
        | Op::Healthcheck(_)
        | Op::Onbuild(_)
        | Op::Shell(_) => {
            e.str("op", "metadata");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_cannot_run_into_each_other() {
        let a = KeyEncoder::new().str("x", "a\ny=1:b").finish();
        let b = KeyEncoder::new().str("x", "a").str("y", "b").finish();
        assert_ne!(a, b);
    }

    #[test]
    fn encoding_is_stable() {
        // This digest is part of the on-disk format: if it changes, every
        // user's cache is invalidated, so bump KEY_VERSION deliberately.
        let mut e = KeyEncoder::new();
        encode_op(
            &mut e,
            &Op::Pkg {
                packages: vec!["nginx".into(), "curl".into()],
                bootstrap: true,
                scripts: None,
            },
        );
        assert_eq!(
            String::from_utf8(e.bytes().to_vec()).unwrap(),
            "jbuild-step-v2\nop=3:pkg\npackage.count=1:2\npackage=5:nginx\npackage=4:curl\n"
        );
    }

    #[test]
    fn run_without_mounts_keeps_its_version_2_bytes_and_mounts_key_their_options() {
        let run = |mounts: Vec<RunMount>| {
            let mut e = KeyEncoder::new();
            encode_op(
                &mut e,
                &Op::Run {
                    command: Command::Shell("make".into()),
                    network: false,
                    mounts,
                },
            );
            String::from_utf8(e.bytes().to_vec()).unwrap()
        };
        assert_eq!(
            run(vec![]),
            "jbuild-step-v2\nop=3:run\ncommand.shell=4:make\nnetwork=4:none\n"
        );
        let secret = |required| RunMount {
            target: "/run/secrets/tok".into(),
            kind: MountKind::Secret {
                id: "tok".into(),
                required,
                mode: 0o400,
                uid: 0,
                gid: 0,
            },
        };
        let with = run(vec![secret(false)]);
        assert!(with.ends_with(
            "mount.count=1:1\nmount.target=16:/run/secrets/tok\nmount.type=6:secret\nmount.id=3:tok\n\
             mount.required=2:no\nmount.mode=3:400\nmount.owner=3:0:0\n"
        ));
        assert_ne!(with, run(vec![secret(true)]));
    }
}
