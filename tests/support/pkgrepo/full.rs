//! A package with a full `+MANIFEST`, every key `pkg create` writes
//! (`libpkg/pkg_manifest.c`, `pkg_emit_object`; pkg-create(8)): files with
//! their sums, directories, config files, shell and Lua scripts, options,
//! shared libraries, users and groups, messages. Written as pkg writes a
//! package (`libpkg/pkg_create.c`): `+COMPACT_MANIFEST`, `+MANIFEST`,
//! then the files, compressed by the `zstd` program.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::{compress, hex};
use crate::support::tar::ustar;

/// What one full package holds.
#[derive(Clone, Debug)]
pub struct FullPkg {
    pub name: String,
    pub version: String,
    /// Dependencies by name (origin `test/<name>`, version `1`).
    pub deps: Vec<String>,
    /// Files under the prefix `/usr/local`, with their contents.
    pub files: Vec<(String, Vec<u8>)>,
    pub config: Vec<String>,
    pub directories: Vec<String>,
}

/// `name-version` installing `files`, depending on `deps`.
pub fn full(name: &str, version: &str, deps: &[&str], files: &[(&str, &[u8])]) -> FullPkg {
    FullPkg {
        name: name.into(),
        version: version.into(),
        deps: deps.iter().map(|d| d.to_string()).collect(),
        files: files
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_vec()))
            .collect(),
        config: Vec::new(),
        directories: vec![format!("/usr/local/share/{name}")],
    }
}

/// pkg's sum of a file's content: `1$` and SHA-256 in hex
/// (`PKG_HASH_TYPE_SHA256_HEX`).
pub fn file_sum(content: &[u8]) -> String {
    format!("1${}", hex(&Sha256::digest(content)))
}

/// pkg's URL-encoding of manifest strings (`urlencode`): `%` and bytes
/// that are not ASCII.
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b == b'%' || !b.is_ascii() {
                format!("%{b:02x}")
            } else {
                (b as char).to_string()
            }
        })
        .collect()
}

impl FullPkg {
    /// The compact manifest's keys (what a catalogue lists).
    fn compact(&self) -> Map<String, Value> {
        let deps: Map<String, Value> = self
            .deps
            .iter()
            .map(|d| {
                (
                    d.clone(),
                    json!({"origin": format!("test/{d}"), "version": "1"}),
                )
            })
            .collect();
        let flatsize: usize = self.files.iter().map(|(_, c)| c.len()).sum();
        let v = json!({
            "name": self.name, "origin": format!("test/{}", self.name), "version": self.version,
            "comment": format!("{} for tests", self.name), "maintainer": "tests@example.invalid",
            "www": "https://example.invalid", "abi": "FreeBSD:14:amd64",
            "arch": "freebsd:14:x86:64", "prefix": "/usr/local", "flatsize": flatsize,
            "licenselogic": "dual", "licenses": ["BSD2CLAUSE", "MIT"],
            "desc": urlencode(&format!("{} is 100% a test package — café", self.name)),
            "deps": deps, "categories": ["test", "devel"],
            "users": [format!("{}d", self.name)], "groups": [format!("{}d", self.name)],
            "shlibs_required": ["libc.so.7"],
            "shlibs_provided": [format!("lib{}.so.1", self.name)],
            "provides": [format!("{}-api", self.name)], "requires": ["libc"],
            "options": {"DOCS": "on", "EXAMPLES": "off"},
            "annotations": {"FreeBSD_version": "1403000", "flavor": "default"},
            "messages": [
                {"message": format!("Thank you for installing {}", self.name)},
                {"message": "Upgrading from 0.x", "type": "upgrade", "maximum_version": "1.0"}
            ],
        });
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    /// The full `+MANIFEST` text.
    pub fn manifest(&self) -> String {
        let mut m = self.compact();
        let files: Map<String, Value> = self
            .files
            .iter()
            .map(|(p, c)| {
                (
                    urlencode(p),
                    json!({"sum": file_sum(c), "uname": "root", "gname": "wheel", "perm": "0644"}),
                )
            })
            .collect();
        m.insert("files".into(), Value::Object(files));
        m.insert("config".into(), json!(self.config));
        let dirs: Map<String, Value> = self
            .directories
            .iter()
            .map(|d| (urlencode(d), json!("y")))
            .collect();
        m.insert("directories".into(), Value::Object(dirs));
        m.insert(
            "scripts".into(),
            json!({
                "pre-install": urlencode(&format!("echo installing {} 100%", self.name)),
                "post-deinstall": "echo bye",
            }),
        );
        m.insert(
            "lua_scripts".into(),
            json!({"post-install": [format!("pkg.print_msg(\"{}\")", self.name)]}),
        );
        Value::Object(m).to_string()
    }

    /// Writes `All/<name>-<version>.pkg` under `dir`; returns its path.
    pub fn write(&self, dir: &Path) -> PathBuf {
        fs::create_dir_all(dir.join("All")).unwrap();
        let compact = Value::Object(self.compact()).to_string();
        let manifest = self.manifest();
        let mut members: Vec<(&str, u32, &[u8])> = vec![
            ("+COMPACT_MANIFEST", 0o644, compact.as_bytes()),
            ("+MANIFEST", 0o644, manifest.as_bytes()),
        ];
        for (p, c) in &self.files {
            members.push((p.as_str(), 0o644, c.as_slice()));
        }
        let path = dir.join(format!("All/{}-{}.pkg", self.name, self.version));
        fs::write(&path, compress(&ustar(&members), "zstd")).unwrap();
        path
    }
}

/// The `+MANIFEST` of a `.pkg`, read back with the `zstd` and `tar`
/// programs (not with jbuild's readers).
pub fn read_manifest(pkg: &Path) -> String {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("zstd -dc \"$0\" | tar -xOf - +MANIFEST")
        .arg(pkg)
        .output()
        .expect("zstd and tar run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
