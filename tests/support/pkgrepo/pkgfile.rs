//! Package files (`.pkg`) as `pkg create` writes them, from pkg-create(8),
//! pkg's `libpkg/pkg_create.c` and `libpkg/packing.c`, and the pax
//! format (IEEE Std 1003.1), sharing no code with `src/`:
//!
//! - a tar in libarchive's `pax_restricted` form: ustar headers, with a
//!   PAX `x` header only where ustar cannot say it (here: `SCHILY.fflags`);
//! - `+COMPACT_MANIFEST`, then `+MANIFEST` (compact JSON), then the files
//!   in manifest order, then the directories (`pkg_create.c`);
//! - entries named by absolute path (`/usr/local/bin/foo`), directories
//!   ending in `/` as libarchive writes them; owners by name (`uname`,
//!   `gname`) with whatever numbers the packager's files had (here 1001 and
//!   1002, which no test root uses, so a number that comes through shows);
//!   hard links as type `1` entries naming the first path;
//! - compressed by the `zstd`, `xz` or `gzip` program.
//!
//! The manifest lists files in pkg 2.4's object form (`sum`, `uname`,
//! `gname`, `perm`, `fflags`, `mtime`) or the older `path: sum` form, sums
//! SHA-256 hex (`1$`) or BLAKE2b (`2$`, by the `b2sum` program).

use std::fs;
use std::path::Path;

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::super::tar::{padding, pax_records, Fields, Header, END};
use super::{compress, hex, SumStyle};

/// One entry of a package.
#[derive(Clone, Debug)]
pub enum Item {
    Dir {
        path: String,
        mode: u32,
        uname: String,
        gname: String,
    },
    File {
        path: String,
        mode: u32,
        uname: String,
        gname: String,
        content: Vec<u8>,
        /// `SCHILY.fflags`, e.g. `schg`.
        flags: Option<String>,
        /// An `@config` file.
        config: bool,
    },
    HardLink {
        path: String,
        target: String,
    },
    Symlink {
        path: String,
        target: String,
    },
}

/// A regular file owned by root:wheel.
pub fn file(path: &str, mode: u32, content: &[u8]) -> Item {
    Item::File {
        path: path.into(),
        mode,
        uname: "root".into(),
        gname: "wheel".into(),
        content: content.to_vec(),
        flags: None,
        config: false,
    }
}

/// An `@config` file (0644, root:wheel).
pub fn config(path: &str, content: &[u8]) -> Item {
    let mut item = file(path, 0o644, content);
    if let Item::File { config, .. } = &mut item {
        *config = true;
    }
    item
}

pub fn dir(path: &str, mode: u32, uname: &str, gname: &str) -> Item {
    Item::Dir {
        path: path.into(),
        mode,
        uname: uname.into(),
        gname: gname.into(),
    }
}

/// How the package's tar is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packing {
    Zstd,
    Xz,
    Gzip,
}

/// A raw tar entry added after the files (a hostile package's), listed in
/// the manifest unless `unlisted`.
#[derive(Clone, Debug)]
pub struct Raw {
    pub path: String,
    pub kind: u8,
    pub link: String,
    pub mode: u32,
    pub content: Vec<u8>,
    /// The size the header claims (`None`: the content's).
    pub claimed_size: Option<u64>,
    pub unlisted: bool,
}

/// The contents of one package file.
#[derive(Clone, Debug)]
pub struct Contents {
    pub items: Vec<Item>,
    pub raw: Vec<Raw>,
    pub packing: Packing,
    /// The manifest in pkg 2.4's object form (else `path: sum`).
    pub objects: bool,
    pub sums: SumStyle,
    /// The mtime in every header and in the manifest.
    pub mtime: u64,
    /// A file whose manifest sum is of other content.
    pub wrong_sum: Option<String>,
    /// More keys of `+MANIFEST` only (`scripts`, `lua_scripts`,
    /// `messages`), which a catalogue does not list.
    pub manifest_extra: Vec<(String, Value)>,
}

impl Default for Contents {
    fn default() -> Self {
        Contents {
            items: Vec::new(),
            raw: Vec::new(),
            packing: Packing::Zstd,
            objects: true,
            sums: SumStyle::Sha256Hex,
            mtime: 1_700_000_000,
            wrong_sum: None,
            manifest_extra: Vec::new(),
        }
    }
}

fn sum_bytes(data: &[u8], style: SumStyle) -> String {
    match style {
        SumStyle::Sha256Hex => format!("1${}", hex(&Sha256::digest(data))),
        SumStyle::Blake2b => {
            let t = tempfile::NamedTempFile::new().unwrap();
            fs::write(t.path(), data).unwrap();
            super::sum_of(t.path(), SumStyle::Blake2b)
        }
    }
}

/// One tar header (and its PAX header first, if any) with names.
#[allow(clippy::too_many_arguments)]
fn entry(
    out: &mut Vec<u8>,
    path: &str,
    kind: u8,
    mode: u32,
    names: (&str, &str),
    size: u64,
    mtime: u64,
    link: &str,
    pax: &[(&str, &[u8])],
) {
    if !pax.is_empty() {
        let data = pax_records(pax);
        let h = Header::new(&Fields {
            name: b"PaxHeader/entry",
            kind: b'x',
            size: data.len() as u64,
            mode: 0o644,
            ..Fields::default()
        });
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(&data);
        out.extend_from_slice(padding(data.len() as u64));
    }
    let mut h = Header::new(&Fields {
        name: path.as_bytes(),
        kind,
        mode,
        uid: 1001,
        gid: 1002,
        size,
        mtime,
        link: link.as_bytes(),
        ..Fields::default()
    });
    let b = h.as_mut_bytes();
    b[265..265 + names.0.len()].copy_from_slice(names.0.as_bytes());
    b[297..297 + names.1.len()].copy_from_slice(names.1.as_bytes());
    h.set_cksum();
    out.extend_from_slice(h.as_bytes());
}

impl Contents {
    /// The `files`, `directories` and `config` keys of the manifest.
    pub fn manifest_keys(&self) -> (Value, Value, Value) {
        let mut files = Map::new();
        let mut dirs = Map::new();
        let mut config = Vec::new();
        let object = |sum: String, u: &str, g: &str, mode: u32, flags: Option<&String>| {
            let mut o = json!({"sum": sum, "uname": u, "gname": g,
                "perm": format!("{:04o}", mode), "mtime": self.mtime});
            if let Some(f) = flags {
                o["fflags"] = json!(f);
            }
            o
        };
        let mut contents_of: std::collections::BTreeMap<&str, &[u8]> = Default::default();
        for item in &self.items {
            match item {
                Item::Dir {
                    path,
                    mode,
                    uname,
                    gname,
                } => {
                    let v = if self.objects {
                        json!({"uname": uname, "gname": gname, "perm": format!("{:04o}", mode)})
                    } else {
                        json!("y")
                    };
                    dirs.insert(path.clone(), v);
                }
                Item::File {
                    path,
                    mode,
                    uname,
                    gname,
                    content,
                    flags,
                    config: c,
                } => {
                    contents_of.insert(path, content);
                    let data: &[u8] = if self.wrong_sum.as_deref() == Some(path) {
                        b"something else"
                    } else {
                        content
                    };
                    let sum = sum_bytes(data, self.sums);
                    let v = if self.objects {
                        object(sum, uname, gname, *mode, flags.as_ref())
                    } else {
                        json!(sum)
                    };
                    files.insert(path.clone(), v);
                    if *c {
                        config.push(json!(path));
                    }
                }
                Item::HardLink { path, target } => {
                    let sum = sum_bytes(contents_of.get(target.as_str()).unwrap(), self.sums);
                    let v = if self.objects {
                        object(sum, "root", "wheel", 0o755, None)
                    } else {
                        json!(sum)
                    };
                    files.insert(path.clone(), v);
                }
                Item::Symlink { path, target } => {
                    // pkg sums a symlink's target without its leading `/`.
                    let sum = sum_bytes(target.trim_start_matches('/').as_bytes(), self.sums);
                    let v = if self.objects {
                        let mut o = object(sum, "root", "wheel", 0o755, None);
                        o["symlink_target"] = json!(target);
                        o
                    } else {
                        json!(sum)
                    };
                    files.insert(path.clone(), v);
                }
            }
        }
        for r in &self.raw {
            if !r.unlisted {
                let sum = sum_bytes(&r.content, self.sums);
                files.insert(r.path.trim_end_matches('/').to_string(), json!(sum));
            }
        }
        (
            Value::Object(files),
            Value::Object(dirs),
            Value::Array(config),
        )
    }

    /// The package file: `compact` (the catalogue's manifest) and the
    /// manifest with its contents, then the entries, compressed.
    pub fn package(&self, compact: &Value) -> Vec<u8> {
        let (files, dirs, config) = self.manifest_keys();
        let mut manifest = compact.clone();
        manifest["files"] = files;
        manifest["directories"] = dirs;
        manifest["config"] = config;
        for (k, v) in &self.manifest_extra {
            manifest[k.as_str()] = v.clone();
        }
        let mut out = Vec::new();
        for (name, text) in [
            ("+COMPACT_MANIFEST", compact.to_string()),
            ("+MANIFEST", manifest.to_string()),
        ] {
            entry(
                &mut out,
                name,
                b'0',
                0o644,
                ("root", "wheel"),
                text.len() as u64,
                self.mtime,
                "",
                &[],
            );
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(padding(text.len() as u64));
        }
        let t = self.mtime;
        let mut dirs = Vec::new();
        for item in &self.items {
            match item {
                Item::File {
                    path,
                    mode,
                    uname,
                    gname,
                    content,
                    flags,
                    ..
                } => {
                    let pax: Vec<(&str, &[u8])> = flags
                        .iter()
                        .map(|f| ("SCHILY.fflags", f.as_bytes()))
                        .collect();
                    let size = content.len() as u64;
                    entry(
                        &mut out,
                        path,
                        b'0',
                        *mode,
                        (uname, gname),
                        size,
                        t,
                        "",
                        &pax,
                    );
                    out.extend_from_slice(content);
                    out.extend_from_slice(padding(size));
                }
                Item::HardLink { path, target } => {
                    entry(
                        &mut out,
                        path,
                        b'1',
                        0o755,
                        ("root", "wheel"),
                        0,
                        t,
                        target,
                        &[],
                    );
                }
                Item::Symlink { path, target } => {
                    entry(
                        &mut out,
                        path,
                        b'2',
                        0o755,
                        ("root", "wheel"),
                        0,
                        t,
                        target,
                        &[],
                    );
                }
                Item::Dir { .. } => dirs.push(item),
            }
        }
        for r in &self.raw {
            let size = r.claimed_size.unwrap_or(r.content.len() as u64);
            entry(
                &mut out,
                &r.path,
                r.kind,
                r.mode,
                ("root", "wheel"),
                size,
                t,
                &r.link,
                &[],
            );
            out.extend_from_slice(&r.content);
            out.extend_from_slice(padding(r.content.len() as u64));
        }
        for d in dirs {
            if let Item::Dir {
                path,
                mode,
                uname,
                gname,
            } = d
            {
                let name = format!("{path}/");
                entry(&mut out, &name, b'5', *mode, (uname, gname), 0, t, "", &[]);
            }
        }
        out.extend_from_slice(&END);
        match self.packing {
            Packing::Zstd => compress(&out, "zstd"),
            Packing::Xz => compress(&out, "xz"),
            Packing::Gzip => compress(&out, "gzip"),
        }
    }
}

/// Writes `pkg` alone to `path` (outside a repository).
pub fn write(path: &Path, compact: &Value, contents: &Contents) {
    fs::write(path, contents.package(compact)).unwrap();
}
