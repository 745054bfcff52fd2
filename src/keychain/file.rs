//! docker's `config.json` and containers' `auth.json`: one format.
//!
//! ```json
//! { "auths": { "registry.lan:5000": { "auth": "<base64 user:password>" },
//!              "https://index.docker.io/v1/": { "identitytoken": "..." } },
//!   "credHelpers": { "123.dkr.ecr.us-east-1.amazonaws.com": "ecr-login" },
//!   "credsStore": "pass" }
//! ```
//!
//! The file is kept as a JSON value so that a rewrite keeps every field
//! jbuild does not know (docker keeps plenty: `proxies`, `plugins`, ...).
//! A key with a scheme (`https://host/v1/`) means its host; a key naming a
//! repository (`quay.io/org/repo`, a containers extension) is not used,
//! because it is meant for that repository only.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::{Map, Value};

use super::helper;
use super::{canonical_registry, server_url, Credential, KeychainError, Secret};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

pub(super) struct AuthFile {
    path: PathBuf,
    root: Map<String, Value>,
}

impl AuthFile {
    /// The file at `path`, or `None` when there is none.
    pub fn load(path: &Path) -> Result<Option<AuthFile>, KeychainError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(KeychainError::Read {
                    path: path.to_path_buf(),
                    source,
                })
            }
        };
        let parse_err = |message: String| KeychainError::Parse {
            path: path.to_path_buf(),
            message,
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Some(AuthFile::empty(path)));
        }
        let root = match serde_json::from_slice::<Value>(&bytes) {
            Ok(Value::Object(m)) => m,
            Ok(_) => return Err(parse_err("expected a JSON object at the top".into())),
            Err(e) => return Err(parse_err(format!("not valid JSON: {e}"))),
        };
        let f = AuthFile {
            path: path.to_path_buf(),
            root,
        };
        for (field, want_object) in [
            ("auths", true),
            ("credHelpers", true),
            ("credsStore", false),
        ] {
            match f.root.get(field) {
                None | Some(Value::Null) => {}
                Some(Value::Object(_)) if want_object => {}
                Some(Value::String(_)) if !want_object => {}
                Some(_) => {
                    let kind = if want_object { "an object" } else { "a string" };
                    return Err(parse_err(format!("`{field}` must be {kind}")));
                }
            }
        }
        Ok(Some(f))
    }

    pub fn empty(path: &Path) -> AuthFile {
        AuthFile {
            path: path.to_path_buf(),
            root: Map::new(),
        }
    }

    fn auths(&self) -> Option<&Map<String, Value>> {
        self.root.get("auths").and_then(Value::as_object)
    }

    fn auths_mut(&mut self) -> &mut Map<String, Value> {
        let v = self
            .root
            .entry("auths")
            .or_insert_with(|| Value::Object(Map::new()));
        if !v.is_object() {
            *v = Value::Object(Map::new());
        }
        v.as_object_mut().expect("just made an object")
    }

    /// The helper program (`docker-credential-<name>`) for `registry`:
    /// `credHelpers[registry]`, else `credsStore`.
    pub fn helper_for(&self, registry: &str) -> Option<String> {
        let named = self
            .root
            .get("credHelpers")
            .and_then(Value::as_object)
            .and_then(|m| {
                m.iter()
                    .find(|(k, _)| key_means(k, registry))
                    .and_then(|(_, v)| v.as_str())
            });
        let store = self.root.get("credsStore").and_then(Value::as_str);
        named
            .or(store)
            .filter(|n| !n.is_empty())
            .map(|n| format!("docker-credential-{n}"))
    }

    fn entry(&self, registry: &str) -> Option<(&String, &Value)> {
        let auths = self.auths()?;
        // An exact key first, so `host` wins over `https://host/v1/`.
        auths
            .iter()
            .find(|(k, _)| k.as_str() == server_url(registry))
            .or_else(|| auths.iter().find(|(k, _)| key_means(k, registry)))
    }

    pub fn has_entry(&self, registry: &str) -> bool {
        self.entry(registry).is_some()
    }

    pub fn has_inline(&self, registry: &str) -> bool {
        matches!(self.inline(registry), Ok(Some(_)) | Err(_))
    }

    /// The credential written in the file itself for `registry`.
    pub fn inline(&self, registry: &str) -> Result<Option<Credential>, KeychainError> {
        let Some((key, v)) = self.entry(registry) else {
            return Ok(None);
        };
        let bad = |what: &str| KeychainError::Parse {
            path: self.path.clone(),
            message: format!("auths[\"{key}\"]: {what}"),
        };
        let Some(v) = v.as_object() else {
            return Err(bad("must be an object"));
        };
        let field = |name: &str| -> Result<Option<&str>, KeychainError> {
            match v.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if s.is_empty() => Ok(None),
                Some(Value::String(s)) => Ok(Some(s)),
                Some(_) => Err(bad(&format!("`{name}` must be a string"))),
            }
        };
        if let Some(t) = field("identitytoken")? {
            return Ok(Some(Credential::IdentityToken(Secret::new(t))));
        }
        if let Some(a) = field("auth")? {
            let raw = B64
                .decode(a.trim())
                .map_err(|_| bad("`auth` is not base64 (it should be base64 of user:password)"))?;
            let text = String::from_utf8(raw).map_err(|_| bad("`auth` is not UTF-8 text"))?;
            let Some((user, pass)) = text.split_once(':') else {
                return Err(bad("`auth` must be base64 of user:password (no `:` found)"));
            };
            return Ok(Some(Credential::Basic {
                username: user.to_string(),
                password: Secret::new(pass),
            }));
        }
        if let (Some(u), Some(p)) = (field("username")?, field("password")?) {
            return Ok(Some(Credential::Basic {
                username: u.to_string(),
                password: Secret::new(p),
            }));
        }
        Ok(None)
    }

    pub fn set_inline(&mut self, registry: &str, cred: &Credential) {
        let key = self.key_for(registry);
        let mut entry = Map::new();
        match cred {
            Credential::Basic { username, password } => {
                let auth = B64.encode(format!("{username}:{}", password.expose()));
                entry.insert("auth".into(), Value::String(auth));
            }
            Credential::IdentityToken(t) => {
                entry.insert("identitytoken".into(), Value::String(t.expose().into()));
            }
        }
        self.auths_mut().insert(key, Value::Object(entry));
    }

    pub fn set_placeholder(&mut self, registry: &str) {
        let key = self.key_for(registry);
        self.auths_mut().insert(key, Value::Object(Map::new()));
    }

    fn key_for(&self, registry: &str) -> String {
        self.entry(registry)
            .map(|(k, _)| k.clone())
            .unwrap_or_else(|| server_url(registry))
    }

    /// Drops every `auths` key that means `registry`.
    pub fn remove(&mut self, registry: &str) -> bool {
        let Some(auths) = self.root.get_mut("auths").and_then(Value::as_object_mut) else {
            return false;
        };
        let before = auths.len();
        auths.retain(|k, _| !key_means(k, registry));
        auths.len() != before
    }

    /// Replaces the file atomically, readable by its owner only.
    pub fn save(&self) -> Result<(), KeychainError> {
        let werr = |source| KeychainError::Write {
            path: self.path.clone(),
            source,
        };
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                use std::os::unix::fs::DirBuilderExt;
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(werr)?;
            }
        }
        let mut text = serde_json::to_string_pretty(&Value::Object(self.root.clone()))
            .expect("a JSON value serialises");
        text.push('\n');
        // write_atomic's temporary file is created 0600, and the rename
        // keeps that mode.
        crate::fsutil::write_atomic(&self.path, text.as_bytes()).map_err(werr)
    }
}

/// The credential the file at `path` gives for `registry` (canonical):
/// through the helper it names for the registry, else written in the file
/// itself. Helpers are looked for in `helpers` (a `$PATH`).
///
/// docker's `config.json` and containers' `auth.json` are read alike.
pub(super) fn resolve_in(
    path: &Path,
    registry: &str,
    helpers: Option<&OsString>,
) -> Result<Option<Credential>, KeychainError> {
    let Some(f) = AuthFile::load(path)? else {
        return Ok(None);
    };
    if let Some(program) = f.helper_for(registry) {
        if let Some(c) = helper::get(&program, &server_url(registry), helpers)? {
            return Ok(Some(c));
        }
    }
    f.inline(registry)
}

/// Forgets `registry` in the file at `path` and in the helper it names for
/// it; `true` if anything was removed.
pub(super) fn erase_in(
    path: &Path,
    registry: &str,
    helpers: Option<&OsString>,
) -> Result<bool, KeychainError> {
    let Some(mut f) = AuthFile::load(path)? else {
        return Ok(false);
    };
    let mut removed = false;
    if let Some(program) = f.helper_for(registry) {
        removed |= helper::erase(&program, &server_url(registry), helpers)?;
    }
    if f.remove(registry) {
        f.save()?;
        removed = true;
    }
    Ok(removed)
}

/// Whether an `auths`/`credHelpers` key stands for `registry`.
fn key_means(key: &str, registry: &str) -> bool {
    let has_scheme = key.starts_with("http://") || key.starts_with("https://");
    if !has_scheme && key.contains('/') {
        return false;
    }
    canonical_registry(key) == registry
}
