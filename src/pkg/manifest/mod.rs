//! A package's manifest, `+COMPACT_MANIFEST` or `+MANIFEST`, read as
//! pkg(8) reads it (`libpkg/pkg_manifest.c`, its key table and parsers;
//! `../shared/notes/pkg-anyhost.md` §2).
//!
//! Both are UCL (JSON in practice) written by `pkg create`; the compact one
//! lacks `files`, `directories`, `config`, `scripts` and `lua_scripts`.
//! What pkg does, this does:
//!
//! - keys it does not know are skipped; a known key with a value of the
//!   wrong kind is an error naming the key (pkg: "Bad format in manifest");
//! - `desc`, script bodies and the paths of files and directories are
//!   URL-decoded (`%xx`), as pkg's `urldecode` does;
//! - `licenselogic` is `single`, `or`/`dual` or `and`/`multi`, anything
//!   else an error; `options` may be `on`/`off` strings or booleans;
//! - `files` are a sum (pkg up to 2.3) or an object with `sum`, `uname`,
//!   `gname`, `perm`, `fflags`, `symlink_target`, `mtime` (pkg 2.4 on);
//!   `directories` are `"y"`/booleans or objects; the old `dirs` array too;
//! - `messages` (or the old `message`) is a string or an array of
//!   `{message, type, minimum_version, maximum_version}`;
//! - `shlibs` is the pkg 1.0 name of `shlibs_required`.
//!
//! It is bounded ([`MAX_MANIFEST`] bytes, [`LIMITS`]) and a hostile path
//! (relative, with `..`, or with a NUL) is refused here, naming it, before
//! anything is extracted or recorded.

mod kinds;

pub use kinds::{LicenseLogic, LuaScriptType, MessageType, ScriptType};

use super::ucl::{self, Limits, Value};

/// The largest manifest read (FreeBSD's largest, a TeX tree of some
/// 100 000 files, is about 20 MiB).
pub const MAX_MANIFEST: usize = 64 << 20;
/// The UCL limits for a manifest: each file is a handful of values.
pub const LIMITS: Limits = Limits {
    text: MAX_MANIFEST,
    depth: 8,
    values: 4_000_000,
};

/// What a manifest says about a package.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub name: String,
    pub origin: String,
    pub version: String,
    pub comment: String,
    /// URL-decoded.
    pub desc: String,
    pub maintainer: String,
    pub www: String,
    /// `FreeBSD:14:amd64` (the `arch` when a manifest has no `abi`).
    pub abi: String,
    /// The legacy form, `freebsd:14:x86:64`.
    pub arch: String,
    pub prefix: String,
    pub flatsize: i64,
    pub pkgsize: i64,
    /// The package file's checksum (catalogue manifests).
    pub sum: Option<String>,
    pub repopath: Option<String>,
    pub licenselogic: LicenseLogic,
    pub licenses: Vec<String>,
    pub categories: Vec<String>,
    /// By name, in the manifest's order.
    pub deps: Vec<Dep>,
    /// `(name, "on"|"off")`, in order.
    pub options: Vec<(String, String)>,
    pub option_defaults: Vec<(String, String)>,
    pub option_descriptions: Vec<(String, String)>,
    pub shlibs_required: Vec<String>,
    pub shlibs_provided: Vec<String>,
    pub shlibs_required_ignore: Vec<String>,
    pub shlibs_provided_ignore: Vec<String>,
    pub provides: Vec<String>,
    pub requires: Vec<String>,
    pub conflicts: Vec<String>,
    /// In order; a repeated tag keeps its first value (pkg's `pkg_kv_add`).
    pub annotations: Vec<(String, String)>,
    pub users: Vec<String>,
    pub groups: Vec<String>,
    pub files: Vec<FileEntry>,
    pub directories: Vec<DirEntry>,
    /// `@config` files (paths as written).
    pub config: Vec<String>,
    /// Shell scripts, URL-decoded, one per type.
    pub scripts: Vec<(ScriptType, String)>,
    /// Lua scripts, each type in order.
    pub lua_scripts: Vec<(LuaScriptType, String)>,
    pub messages: Vec<Message>,
    pub vital: bool,
    pub dep_formula: Option<String>,
}

/// A dependency: by name, with the origin and version it was built with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dep {
    pub name: String,
    pub origin: String,
    pub version: String,
}

/// A file the package installs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileEntry {
    /// Absolute, URL-decoded (`/usr/local/bin/foo`).
    pub path: String,
    /// pkg's sum as written (`1$…`, `2$…` or 64 hex digits), if any.
    pub sum: Option<String>,
    pub uname: Option<String>,
    pub gname: Option<String>,
    pub perm: Option<u32>,
    /// FreeBSD flag bits (`SF_IMMUTABLE` is `0x20000`).
    pub fflags: Option<u32>,
    pub symlink_target: Option<String>,
    pub mtime: Option<i64>,
}

/// A directory the package owns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DirEntry {
    pub path: String,
    pub uname: Option<String>,
    pub gname: Option<String>,
    pub perm: Option<u32>,
    pub fflags: Option<u32>,
}

/// One of the package's messages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    pub text: String,
    pub kind: MessageType,
    /// Only for upgrade messages, as pkg reads them.
    pub minimum_version: Option<String>,
    pub maximum_version: Option<String>,
}

impl Manifest {
    /// The `packages.message` column: pkg's `pkg_message_to_str`, a JSON
    /// array of `{message, type, maximum_version, minimum_version}`
    /// (`type` absent for messages always shown); `None` without messages.
    pub fn message_json(&self) -> Option<String> {
        if self.messages.is_empty() {
            return None;
        }
        // Written by hand: pkg's key order, which a JSON map would sort.
        let q = |s: &str| serde_json::Value::from(s).to_string();
        let items: Vec<String> = self
            .messages
            .iter()
            .map(|m| {
                let mut o = format!("{{\"message\":{}", q(m.text.trim()));
                if let Some(t) = m.kind.key() {
                    o += &format!(",\"type\":{}", q(t));
                }
                if let Some(v) = &m.maximum_version {
                    o += &format!(",\"maximum_version\":{}", q(v));
                }
                if let Some(v) = &m.minimum_version {
                    o += &format!(",\"minimum_version\":{}", q(v));
                }
                o + "}"
            })
            .collect();
        Some(format!("[{}]", items.join(",")))
    }
}

/// Why a manifest is not one pkg would install.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{what}: {size} bytes, more than the {max} a manifest may have")]
    TooLarge {
        what: String,
        size: usize,
        max: usize,
    },
    #[error("{what}: not UTF-8 text")]
    NotText { what: String },
    #[error("{what}: {source}")]
    Ucl {
        what: String,
        #[source]
        source: ucl::UclError,
    },
    #[error("{what}: `{key}` is not {expected} (pkg refuses this manifest too)")]
    BadKey {
        what: String,
        key: String,
        expected: &'static str,
    },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
}

impl ManifestError {
    /// Every case is the package's, which the user chose.
    pub fn is_user_error(&self) -> bool {
        true
    }
}

/// Reads a manifest's bytes (`what` names the package in errors).
pub fn parse_bytes(bytes: &[u8], what: &str) -> Result<Manifest, ManifestError> {
    if bytes.len() > MAX_MANIFEST {
        return Err(ManifestError::TooLarge {
            what: what.into(),
            size: bytes.len(),
            max: MAX_MANIFEST,
        });
    }
    let text =
        std::str::from_utf8(bytes).map_err(|_| ManifestError::NotText { what: what.into() })?;
    parse(text, what)
}

/// Reads a manifest's text (`what` names the package in errors).
pub fn parse(text: &str, what: &str) -> Result<Manifest, ManifestError> {
    let top = ucl::parse_with(text, LIMITS).map_err(|source| ManifestError::Ucl {
        what: what.into(),
        source,
    })?;
    let mut r = Reader {
        what,
        m: Manifest::default(),
    };
    // pkg validates every known key's kind before it reads any.
    for (key, v) in top.pairs() {
        if let Some(expected) = expected_kind(key) {
            if !expected.1(v) {
                return Err(r.bad(key, expected.0));
            }
        }
    }
    for (key, v) in top.pairs() {
        r.key(key, v)?;
    }
    let mut m = r.m;
    if m.abi.is_empty() {
        m.abi = m.arch.clone();
    }
    for (field, value) in [
        ("name", &m.name),
        ("origin", &m.origin),
        ("version", &m.version),
    ] {
        if value.is_empty() {
            return Err(ManifestError::Invalid {
                what: what.into(),
                reason: format!("it has no `{field}`"),
            });
        }
    }
    if m.name.contains(['/', '\0']) || m.name.starts_with('.') {
        return Err(ManifestError::Invalid {
            what: what.into(),
            reason: format!("the name `{}` is not a package name", m.name),
        });
    }
    Ok(m)
}

type Kind = (&'static str, fn(&Value) -> bool);

fn is_str(v: &Value) -> bool {
    matches!(v, Value::Str(_))
}
fn is_str_or_int(v: &Value) -> bool {
    matches!(v, Value::Str(_) | Value::Int(_))
}
fn is_int(v: &Value) -> bool {
    matches!(v, Value::Int(_))
}
fn is_bool(v: &Value) -> bool {
    matches!(v, Value::Bool(_))
}
fn is_object(v: &Value) -> bool {
    matches!(v, Value::Object(_))
}
fn is_array(v: &Value) -> bool {
    matches!(v, Value::Array(_))
}
fn is_str_or_array(v: &Value) -> bool {
    matches!(v, Value::Str(_) | Value::Array(_))
}
fn is_object_or_array(v: &Value) -> bool {
    matches!(v, Value::Object(_) | Value::Array(_))
}

/// pkg's key table: the kind each known key must have.
fn expected_kind(key: &str) -> Option<Kind> {
    const STR: Kind = ("a string", is_str);
    const STR_INT: Kind = ("a string or a number", is_str_or_int);
    const INT: Kind = ("a number", is_int);
    const BOOL: Kind = ("a boolean", is_bool);
    const OBJ: Kind = ("an object", is_object);
    const ARR: Kind = ("an array", is_array);
    const MSG: Kind = ("a string or an array", is_str_or_array);
    const USERS: Kind = ("an array", is_object_or_array);
    Some(match key {
        "abi" | "arch" | "comment" | "dep_formula" | "desc" | "licenselogic" | "maintainer"
        | "origin" | "path" | "repopath" | "prefix" | "sum" | "www" => STR,
        "name" | "version" => STR_INT,
        "flatsize" | "pkgsize" => INT,
        "vital" => BOOL,
        "annotations"
        | "deps"
        | "directories"
        | "files"
        | "lua_scripts"
        | "options"
        | "option_defaults"
        | "option_descriptions"
        | "scripts" => OBJ,
        "categories"
        | "config"
        | "conflicts"
        | "dirs"
        | "licenses"
        | "provides"
        | "requires"
        | "shlibs"
        | "shlibs_provided"
        | "shlibs_required"
        | "shlibs_provided_ignore"
        | "shlibs_required_ignore" => ARR,
        "users" | "groups" => USERS,
        "messages" | "message" => MSG,
        _ => return None,
    })
}

struct Reader<'a> {
    what: &'a str,
    m: Manifest,
}

impl Reader<'_> {
    fn bad(&self, key: &str, expected: &'static str) -> ManifestError {
        ManifestError::BadKey {
            what: self.what.into(),
            key: key.into(),
            expected,
        }
    }

    fn invalid(&self, reason: String) -> ManifestError {
        ManifestError::Invalid {
            what: self.what.into(),
            reason,
        }
    }

    fn key(&mut self, key: &str, v: &Value) -> Result<(), ManifestError> {
        let m = &mut self.m;
        match key {
            "name" => m.name = forced(v),
            "origin" => m.origin = forced(v),
            "version" => m.version = forced(v),
            "comment" => m.comment = forced(v),
            "maintainer" => m.maintainer = forced(v),
            "www" => m.www = forced(v),
            "abi" => m.abi = forced(v),
            "arch" => m.arch = forced(v),
            "prefix" => m.prefix = forced(v),
            "sum" => m.sum = Some(forced(v)),
            "path" | "repopath" => m.repopath = Some(forced(v)),
            "dep_formula" => m.dep_formula = Some(forced(v)),
            "desc" => {
                let d = urldecode(&forced(v)).map_err(|r| self.invalid(format!("desc: {r}")))?;
                self.m.desc = d;
            }
            "flatsize" => m.flatsize = v.as_int().unwrap_or(0),
            "pkgsize" => m.pkgsize = v.as_int().unwrap_or(0),
            "vital" => m.vital = v.as_bool().unwrap_or(false),
            "licenselogic" => {
                m.licenselogic = match forced(v).as_str() {
                    "single" => LicenseLogic::Single,
                    "or" | "dual" => LicenseLogic::Or,
                    "and" | "multi" => LicenseLogic::And,
                    other => {
                        return Err(self.invalid(format!("unknown licenselogic `{other}`")));
                    }
                }
            }
            "licenses" => push_strings(&mut m.licenses, v),
            "categories" => push_strings(&mut m.categories, v),
            "conflicts" => push_strings(&mut m.conflicts, v),
            "provides" => push_strings(&mut m.provides, v),
            "requires" => push_strings(&mut m.requires, v),
            "shlibs" | "shlibs_required" => push_strings(&mut m.shlibs_required, v),
            "shlibs_provided" => push_strings(&mut m.shlibs_provided, v),
            "shlibs_required_ignore" => push_strings(&mut m.shlibs_required_ignore, v),
            "shlibs_provided_ignore" => push_strings(&mut m.shlibs_provided_ignore, v),
            "config" => push_strings(&mut m.config, v),
            "users" => push_names(&mut m.users, v),
            "groups" => push_names(&mut m.groups, v),
            "annotations" => {
                for (k, val) in v.pairs() {
                    if let Value::Str(s) = val {
                        if !m.annotations.iter().any(|(t, _)| t == k) {
                            m.annotations.push((k.clone(), s.clone()));
                        }
                    }
                }
            }
            "options" => {
                for (k, val) in v.pairs() {
                    let value = match val {
                        Value::Str(s) => s.clone(),
                        Value::Bool(b) => if *b { "on" } else { "off" }.to_string(),
                        _ => continue,
                    };
                    set_pair(&mut m.options, k, value);
                }
            }
            "option_defaults" => push_str_pairs(&mut m.option_defaults, v),
            "option_descriptions" => push_str_pairs(&mut m.option_descriptions, v),
            "deps" => self.deps(v)?,
            "files" => self.files(v)?,
            "directories" => self.directories(v)?,
            "dirs" => self.dirs(v)?,
            "scripts" => self.scripts(v)?,
            "lua_scripts" => self.lua_scripts(v),
            "messages" | "message" => self.messages(v)?,
            _ => {}
        }
        Ok(())
    }

    fn deps(&mut self, v: &Value) -> Result<(), ManifestError> {
        for (name, d) in v.pairs() {
            // An object, or (older pkg) an array of objects.
            let objects: Vec<&Value> = match d {
                Value::Object(_) => vec![d],
                Value::Array(a) => a.iter().collect(),
                _ => continue,
            };
            for o in objects {
                let mut origin = None;
                let mut version = None;
                for (k, val) in o.pairs() {
                    if k.eq_ignore_ascii_case("origin") {
                        origin = val.as_str().map(String::from);
                    } else if k.eq_ignore_ascii_case("version") {
                        version = match val {
                            Value::Str(s) => Some(s.clone()),
                            Value::Int(i) => Some(i.to_string()),
                            _ => version,
                        };
                    }
                }
                let Some(origin) = origin else {
                    return Err(self.invalid(format!("dependency `{name}` has no origin")));
                };
                if !self.m.deps.iter().any(|x| &x.name == name) {
                    self.m.deps.push(Dep {
                        name: name.clone(),
                        origin,
                        version: version.unwrap_or_default(),
                    });
                }
            }
        }
        Ok(())
    }

    fn path(&self, key: &str, what: &str) -> Result<String, ManifestError> {
        let p = urldecode(key).map_err(|r| self.invalid(format!("{what} `{key}`: {r}")))?;
        if !p.starts_with('/')
            || p.contains('\0')
            || p.split('/').any(|c| c == "..")
            || p.len() > 4096
        {
            return Err(self.invalid(format!(
                "{what} `{p}` is not an absolute path inside the root"
            )));
        }
        Ok(p)
    }

    fn files(&mut self, v: &Value) -> Result<(), ManifestError> {
        for (key, val) in v.pairs() {
            let mut f = FileEntry {
                path: self.path(key, "file")?,
                ..FileEntry::default()
            };
            match val {
                Value::Str(s) => f.sum = sum(s),
                Value::Object(attrs) => {
                    for (k, a) in attrs {
                        match (k.to_ascii_lowercase().as_str(), a) {
                            ("sum", Value::Str(s)) => f.sum = sum(s),
                            ("uname", Value::Str(s)) => f.uname = Some(s.clone()),
                            ("gname", Value::Str(s)) => f.gname = Some(s.clone()),
                            ("perm", a) => f.perm = self.perm(key, a)?,
                            ("fflags", a) => f.fflags = fflags(a),
                            ("symlink_target", Value::Str(s)) => f.symlink_target = Some(s.clone()),
                            ("mtime", Value::Int(t)) => f.mtime = Some(*t),
                            _ => {}
                        }
                    }
                }
                _ => continue,
            }
            if let Some(i) = self.m.files.iter().position(|x| x.path == f.path) {
                self.m.files[i] = f;
            } else {
                self.m.files.push(f);
            }
        }
        Ok(())
    }

    fn dir_entry(&self, key: &str, val: &Value) -> Result<Option<DirEntry>, ManifestError> {
        let mut d = DirEntry {
            path: self.path(key, "directory")?,
            ..DirEntry::default()
        };
        match val {
            Value::Bool(_) | Value::Str(_) => {}
            Value::Object(attrs) => {
                for (k, a) in attrs {
                    match (k.to_ascii_lowercase().as_str(), a) {
                        ("uname", Value::Str(s)) => d.uname = Some(s.clone()),
                        ("gname", Value::Str(s)) => d.gname = Some(s.clone()),
                        ("perm", a) => d.perm = self.perm(key, a)?,
                        ("fflags", a) => d.fflags = fflags(a),
                        _ => {}
                    }
                }
            }
            _ => return Ok(None),
        }
        Ok(Some(d))
    }

    fn add_dir(&mut self, d: DirEntry) {
        if !self.m.directories.iter().any(|x| x.path == d.path) {
            self.m.directories.push(d);
        }
    }

    fn directories(&mut self, v: &Value) -> Result<(), ManifestError> {
        for (key, val) in v.pairs() {
            if let Some(d) = self.dir_entry(key, val)? {
                self.add_dir(d);
            }
        }
        Ok(())
    }

    /// The pkg 1.x `dirs` array: paths, or objects of one path each.
    fn dirs(&mut self, v: &Value) -> Result<(), ManifestError> {
        let Value::Array(items) = v else {
            return Ok(());
        };
        for item in items {
            match item {
                Value::Str(p) => {
                    let d = DirEntry {
                        path: self.path(p, "directory")?,
                        ..DirEntry::default()
                    };
                    self.add_dir(d);
                }
                Value::Object(pairs) => {
                    for (key, val) in pairs {
                        if let Some(d) = self.dir_entry(key, val)? {
                            self.add_dir(d);
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// A mode as pkg reads one: the text (a number's decimal digits) given
    /// to `setmode(3)`, so `755` and `"0755"` are both 0755.
    fn perm(&self, path: &str, v: &Value) -> Result<Option<u32>, ManifestError> {
        let text = match v {
            Value::Str(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            _ => return Ok(None),
        };
        match u32::from_str_radix(text.trim(), 8) {
            Ok(m) if m <= 0o7777 => Ok(Some(m)),
            _ => Err(self.invalid(format!("`{path}`: `{text}` is not a mode"))),
        }
    }

    fn scripts(&mut self, v: &Value) -> Result<(), ManifestError> {
        for (key, val) in v.pairs() {
            let (Some(t), Value::Str(body)) = (ScriptType::from_key(key), val) else {
                // pkg skips unknown script types and non-strings.
                continue;
            };
            let body = urldecode(body).map_err(|r| self.invalid(format!("script {key}: {r}")))?;
            match self.m.scripts.iter_mut().find(|(x, _)| *x == t) {
                Some(s) => s.1 = body,
                None => self.m.scripts.push((t, body)),
            }
        }
        Ok(())
    }

    fn lua_scripts(&mut self, v: &Value) {
        for (key, val) in v.pairs() {
            let (Some(t), Value::Array(items)) = (LuaScriptType::from_key(key), val) else {
                continue;
            };
            for item in items {
                if let Value::Str(s) = item {
                    self.m.lua_scripts.push((t, s.clone()));
                }
            }
        }
    }

    fn messages(&mut self, v: &Value) -> Result<(), ManifestError> {
        match v {
            Value::Str(s) => self.m.messages.push(Message {
                text: s.clone(),
                ..Message::default()
            }),
            Value::Array(items) => {
                for item in items {
                    let Some(text) = item.get("message").and_then(Value::as_str) else {
                        return Err(self.invalid("a message has no `message` text".into()));
                    };
                    let kind = match item.get("type").and_then(Value::as_str) {
                        Some(t) if t.eq_ignore_ascii_case("install") => MessageType::Install,
                        Some(t) if t.eq_ignore_ascii_case("remove") => MessageType::Remove,
                        Some(t) if t.eq_ignore_ascii_case("upgrade") => MessageType::Upgrade,
                        _ => MessageType::Always,
                    };
                    let version = |k: &str| {
                        (kind == MessageType::Upgrade)
                            .then(|| item.get(k).and_then(Value::as_str).map(String::from))
                            .flatten()
                    };
                    self.m.messages.push(Message {
                        text: text.to_string(),
                        kind,
                        minimum_version: version("minimum_version"),
                        maximum_version: version("maximum_version"),
                    });
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// `ucl_object_tostring_forced`: a string as is, a number in decimal.
fn forced(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => f.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => String::new(),
    }
}

/// A file's sum: pkg writes `-` for none.
fn sum(s: &str) -> Option<String> {
    (s.len() >= 2).then(|| s.to_string())
}

/// `fflags`: the names (pkg on FreeBSD writes `strtofflags` text) or the
/// bits (pkg elsewhere writes a number).
fn fflags(v: &Value) -> Option<u32> {
    match v {
        Value::Int(i) => u32::try_from(*i).ok(),
        Value::Str(s) => Some(crate::layer::fflags::from_text(s)),
        _ => None,
    }
}

fn push_strings(into: &mut Vec<String>, v: &Value) {
    if let Value::Array(items) = v {
        for s in items.iter().filter_map(Value::as_str) {
            if !into.iter().any(|x| x == s) {
                into.push(s.to_string());
            }
        }
    }
}

/// `users`/`groups`: an array of names, or (pkg 1.x) objects whose keys
/// are the names.
fn push_names(into: &mut Vec<String>, v: &Value) {
    let mut add = |s: &str| {
        if !into.iter().any(|x| x == s) {
            into.push(s.to_string());
        }
    };
    match v {
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::Str(s) => add(s),
                    Value::Object(pairs) => pairs.iter().for_each(|(k, _)| add(k)),
                    _ => {}
                }
            }
        }
        Value::Object(pairs) => pairs.iter().for_each(|(k, _)| add(k)),
        _ => {}
    }
}

fn set_pair(into: &mut Vec<(String, String)>, k: &str, value: String) {
    match into.iter_mut().find(|(x, _)| x == k) {
        Some(p) => p.1 = value,
        None => into.push((k.to_string(), value)),
    }
}

fn push_str_pairs(into: &mut Vec<(String, String)>, v: &Value) {
    for (k, val) in v.pairs() {
        if let Value::Str(s) = val {
            set_pair(into, k, s.clone());
        }
    }
}

/// pkg's `urldecode`: `%xx` is the byte xx. A `%` not followed by two hex
/// digits, or bytes that are not UTF-8, are refused (pkg would write
/// whatever `strtol` made of them).
pub fn urldecode(s: &str) -> Result<String, String> {
    if !s.contains('%') {
        return Ok(s.to_string());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match hex {
                Some(0) | None => return Err(format!("a bad %-escape at byte {i}")),
                Some(x) => out.push(x),
            }
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "%-escapes that are not UTF-8".to_string())
}

#[cfg(test)]
mod tests;
