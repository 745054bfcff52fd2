//! What a `RUN --mount=...` step gets: build secrets (read from files or
//! the environment with `--secret`), cache directories kept under
//! jbuild's root between builds, tmpfs, and bind mounts of the context,
//! an earlier stage or an image.
//!
//! **Secrets** never reach a layer (their file lives on a tmpfs the step's
//! mounts alone see, and its mount point is removed after the step), the
//! history or config (the Jailfile text names the id only), a cache key
//! (the key holds the mount's options, never the value), a log line or an
//! error report (each value is remembered by [`crate::keychain::redact`],
//! which scrubs both), nor the step's output as jbuild shows it (each
//! line is masked before the Reporter sees it, as CI systems do).
//!
//! **Cache mounts** live in `cache/mounts/<id>` under jbuild's root (`id`
//! escaped into one file name; it defaults to the target), so PKG's own
//! package cache is the cache mount of `/var/cache/pkg`. Each directory
//! `D` has a lock file `D.lock`: a `shared` mount holds a shared
//! `flock(2)` on it for the step, `locked` an exclusive one (waiting for
//! it), `private` takes the first of `<id>`, `<id>-private-1`, ... whose
//! lock it can take at once; `jbuild prune --cache` removes only the
//! directories whose lock it can take ([`clear_cache_mounts`]).

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::Flock;

use super::error::BuildError;
use crate::exec::{BindMount, Mount, SecretData, SecretFile, TmpfsMount};
use crate::fsutil::input::{read_given, InputError};
use crate::jailfile::{MountKind, Op, RunMount, Sharing};
use crate::keychain::redact;
use crate::plan::{Plan, StepKind};

/// A `--secret` that cannot be used. Always the user's to fix; the
/// messages name the id and where it was to come from, never its value.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("--secret `{given}`: {why}")]
    Syntax { given: String, why: String },
    #[error("--secret id={id}: cannot read {}", path.display())]
    Read {
        id: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not a regular file or a pipe, or larger than [`MAX_SECRET`]: `why`
    /// is the reason, said on the line (a read that failed is `Read`).
    #[error(
        "--secret id={id}: {}: {why}; give a regular file or a pipe of at most {} KiB",
        path.display(),
        MAX_SECRET >> 10
    )]
    Refused {
        id: String,
        path: PathBuf,
        why: InputError,
    },
    #[error("--secret id={id}: the environment variable {var} is not set")]
    Env { id: String, var: String },
    #[error("--secret id={0} is given twice")]
    Twice(String),
}

impl crate::blame::Blame for SecretError {
    /// `--secret` and the files and variables it names are the user's.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// The largest secret read from a file: what a secret holds (a token, a
/// key, a credentials file) is far smaller, and each is held in memory and
/// remembered for scrubbing in several forms. `/dev/zero` or a mistaken
/// image file is refused here instead of filling the memory.
pub const MAX_SECRET: u64 = 1 << 20;

/// The secrets `--secret` flags give: `id=ID,src=FILE` (also `source=`)
/// or `id=ID,env=VAR`, as docker buildx spells them. Each value is
/// remembered for scrubbing from then on.
pub fn read_secrets(raw: &[String]) -> Result<BTreeMap<String, SecretData>, SecretError> {
    let mut out = BTreeMap::new();
    for given in raw {
        let syntax = |why: &str| SecretError::Syntax {
            given: given.clone(),
            why: why.to_string(),
        };
        let (mut id, mut src, mut env) = (None, None, None);
        for part in given.split(',') {
            match part.split_once('=') {
                Some(("id", v)) if !v.is_empty() => id = Some(v.to_string()),
                Some(("src" | "source", v)) if !v.is_empty() => src = Some(PathBuf::from(v)),
                Some(("env", v)) if !v.is_empty() => env = Some(v.to_string()),
                Some(("type", "file" | "env")) => {}
                _ => {
                    return Err(syntax(&format!(
                        "unknown part `{}`; write id=ID,src=FILE or id=ID,env=VAR",
                        part.split('=').next().unwrap_or(part)
                    )))
                }
            }
        }
        let Some(id) = id else {
            return Err(syntax(
                "it has no id; write id=ID,src=FILE or id=ID,env=VAR",
            ));
        };
        let data = match (src, env) {
            (Some(path), None) => match read_given(&path, MAX_SECRET) {
                Ok(bytes) => bytes,
                Err(InputError::Io(source)) => return Err(SecretError::Read { id, path, source }),
                Err(why) => return Err(SecretError::Refused { id, path, why }),
            },
            (None, Some(var)) => match std::env::var_os(&var) {
                Some(v) => v.into_encoded_bytes(),
                None => return Err(SecretError::Env { id, var }),
            },
            _ => return Err(syntax("give one of src=FILE or env=VAR")),
        };
        remember(&data);
        if out.insert(id.clone(), SecretData::new(data)).is_some() {
            return Err(SecretError::Twice(id));
        }
    }
    Ok(out)
}

/// Registers a secret's value (and its lines, as a step may print one
/// line of a multi-line secret) with the scrubber.
fn remember(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    redact::remember(None, text.trim_end_matches('\n'));
    for line in text.lines() {
        redact::remember(None, line);
    }
}

/// The forms of the given secrets to mask in a step's output lines.
pub(super) fn masks(secrets: &BTreeMap<String, SecretData>) -> Vec<String> {
    let mut forms = Vec::new();
    for data in secrets.values() {
        let text = String::from_utf8_lossy(data.expose());
        for piece in std::iter::once(text.trim_end_matches('\n')).chain(text.lines()) {
            forms.extend(redact::forms(None, piece));
        }
    }
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms.dedup();
    forms
}

/// A secret a step requires (`required=true`) that the build was not
/// given: refused after planning, before anything runs.
pub fn check_required_secrets(
    plan: &Plan,
    secrets: &BTreeMap<String, SecretData>,
) -> Result<(), BuildError> {
    for stage in &plan.stages {
        for ps in &stage.steps {
            let (StepKind::Layer { .. }, Op::Run { mounts, .. }) = (&ps.kind, &ps.step.op) else {
                continue;
            };
            for m in mounts {
                if let MountKind::Secret {
                    id, required: true, ..
                } = &m.kind
                {
                    if !secrets.contains_key(id) {
                        return Err(BuildError::MissingSecret { id: id.clone() }
                            .located(&ps.step.location)
                            .with_step(&ps.step.text));
                    }
                }
            }
        }
    }
    Ok(())
}

/// A step's mounts and what must live as long as the step: the locks of
/// `locked` and `private` cache mounts, the scratch copies of `rw` binds.
#[derive(Default)]
pub(crate) struct StepMounts {
    pub mounts: Vec<Mount>,
    _locks: Vec<Flock<File>>,
    _scratch: Vec<tempfile::TempDir>,
}

/// The file name a cache mount's id is kept under: letters, digits, `.`,
/// `_` and `-` as they are, anything else as `%XX` (so `/var/cache/pkg`
/// is `%2Fvar%2Fcache%2Fpkg`, and no id can name `..`).
pub fn cache_dir_name(id: &str) -> String {
    let mut out = String::new();
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && !out.is_empty()) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl StepMounts {
    pub(super) fn add_secret(&mut self, m: &RunMount, data: Option<&SecretData>) {
        let MountKind::Secret { mode, uid, gid, .. } = &m.kind else {
            return;
        };
        // A secret that is not required and not given: no mount (BuildKit).
        if let Some(data) = data {
            self.mounts.push(Mount::Secret(SecretFile {
                target: m.target.clone(),
                data: data.clone(),
                mode: *mode,
                uid: *uid,
                gid: *gid,
            }));
        }
    }

    pub(super) fn add_tmpfs(&mut self, target: &str, size: Option<u64>) {
        self.mounts.push(Mount::Tmpfs(TmpfsMount {
            target: target.to_string(),
            size,
        }));
    }

    /// A cache mount's directory under `base`, made on first use with
    /// `mode` and owner, and locked as `sharing` says.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_cache(
        &mut self,
        base: &Path,
        target: &str,
        id: &str,
        sharing: Sharing,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<(), BuildError> {
        let dir = base.join(cache_dir_name(id));
        self.add_cache_dir(&dir, target, sharing, mode, uid, gid)
    }

    /// The cache mount kept in `dir` (PKG's package cache is one, wherever
    /// it was configured), at `target`.
    pub(super) fn add_cache_dir(
        &mut self,
        dir: &Path,
        target: &str,
        sharing: Sharing,
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<(), BuildError> {
        let (Some(base), Some(name)) = (dir.parent(), dir.file_name()) else {
            return Err(BuildError::Step(format!(
                "{} cannot hold a cache mount",
                dir.display()
            )));
        };
        let name = name.to_string_lossy().into_owned();
        fs::create_dir_all(base)
            .map_err(|e| BuildError::io(format!("creating {}", base.display()), e))?;
        let lock_at = |n: usize| match n {
            0 => base.join(format!("{name}.lock")),
            n => base.join(format!("{name}-private-{n}.lock")),
        };
        let lock_err = |p: &Path, e| BuildError::io(format!("locking {}", p.display()), e);
        let dir = match sharing {
            Sharing::Shared | Sharing::Locked => {
                let p = lock_at(0);
                let exclusive = sharing == Sharing::Locked;
                let lock = crate::store::lock::flock(&p, exclusive).map_err(|e| lock_err(&p, e))?;
                self._locks.push(lock);
                base.join(&name)
            }
            Sharing::Private => {
                let mut n = 0;
                loop {
                    let p = lock_at(n);
                    if let Some(lock) =
                        crate::store::lock::try_flock(&p).map_err(|e| lock_err(&p, e))?
                    {
                        self._locks.push(lock);
                        break;
                    }
                    n += 1;
                }
                match n {
                    0 => base.join(&name),
                    n => base.join(format!("{name}-private-{n}")),
                }
            }
        };
        match fs::create_dir(&dir) {
            Ok(()) => {
                let io = |e| BuildError::io(format!("preparing {}", dir.display()), e);
                std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).map_err(io)?;
                fs::set_permissions(&dir, fs::Permissions::from_mode(mode)).map_err(io)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(BuildError::io(format!("creating {}", dir.display()), e)),
        }
        // Mounted into the step and written there: a real directory of the
        // cache's, never a symlink to elsewhere.
        if let Some(n) = dir.file_name() {
            crate::fsutil::places::existing_own_dir(base, n)
                .map_err(|e| BuildError::io(format!("using {}", dir.display()), e.into()))?;
        }
        self.mounts.push(Mount::Bind(BindMount {
            host: dir,
            target: target.to_string(),
            read_only: false,
        }));
        Ok(())
    }

    /// `source` (already resolved inside its root) at `target`:
    /// read-only, or for `rw` a scratch copy whose changes are dropped.
    pub(super) fn add_bind(
        &mut self,
        source: &Path,
        target: &str,
        rw: bool,
    ) -> Result<(), BuildError> {
        let host = if rw {
            let scratch = tempfile::Builder::new()
                .prefix("jbuild-bind-")
                .tempdir()
                .map_err(|e| BuildError::io("creating a scratch copy for a bind mount", e))?;
            let copy = scratch.path().join("copy");
            copy_tree(source, &copy)
                .map_err(|e| BuildError::io(format!("copying {}", source.display()), e))?;
            self._scratch.push(scratch);
            copy
        } else {
            source.to_path_buf()
        };
        self.mounts.push(Mount::Bind(BindMount {
            host,
            target: target.to_string(),
            read_only: !rw,
        }));
        Ok(())
    }
}

/// `jbuild prune --cache`: removes every cache mount directory under
/// `base` that no running step uses (its lock taken at once), and returns
/// how many it removed.
pub fn clear_cache_mounts(base: &Path) -> std::io::Result<usize> {
    let entries = match fs::read_dir(base) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut removed = 0;
    for entry in entries {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let mut lock_name = entry.file_name();
        lock_name.push(".lock");
        let Some(_busy) = crate::store::lock::try_flock(&base.join(lock_name))? else {
            continue;
        };
        fs::remove_dir_all(entry.path())?;
        removed += 1;
    }
    Ok(removed)
}

/// Copies a file, symlink or directory tree with its modes (owners too,
/// as root builds are).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    let ft = meta.file_type();
    if ft.is_symlink() {
        std::os::unix::fs::symlink(fs::read_link(from)?, to)?;
        return Ok(());
    }
    if ft.is_dir() {
        fs::create_dir(to)?;
        for entry in fs::read_dir(from)? {
            let entry = entry?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
    } else if ft.is_file() {
        fs::copy(from, to)?;
    } else {
        // Devices, sockets and fifos are not copied: a build step has no
        // use for another's.
        return Ok(());
    }
    fs::set_permissions(to, meta.permissions())?;
    use std::os::unix::fs::MetadataExt;
    let _ = std::os::unix::fs::lchown(to, Some(meta.uid()), Some(meta.gid()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_ids_become_one_safe_file_name() {
        assert_eq!(cache_dir_name("/var/cache/pkg"), "%2Fvar%2Fcache%2Fpkg");
        assert_eq!(cache_dir_name("npm-1.x"), "npm-1.x");
        assert_eq!(cache_dir_name(".."), "%2E.");
        assert_eq!(cache_dir_name("a b"), "a%20b");
    }

    #[test]
    fn secrets_parse_and_name_no_value() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("tok");
        fs::write(&f, "s3cr3t-file-value\n").unwrap();
        std::env::set_var("JBUILD_TEST_SECRET_ENV", "s3cr3t-env-value");
        let got = read_secrets(&[
            format!("id=a,src={}", f.display()),
            "id=b,env=JBUILD_TEST_SECRET_ENV".into(),
        ])
        .unwrap();
        assert_eq!(got["a"].expose(), b"s3cr3t-file-value\n");
        assert_eq!(got["b"].expose(), b"s3cr3t-env-value");
        assert_eq!(format!("{got:?}"), r#"{"a": <redacted>, "b": <redacted>}"#);
        for bad in [
            "src=/x",
            "id=a",
            "id=a,src=/x,env=Y",
            "id=a,file=/x",
            "id=a,env=JBUILD_TEST_NOT_SET_ANYWHERE",
        ] {
            let e = read_secrets(&[bad.to_string()]).unwrap_err();
            assert!(!e.to_string().contains("s3cr3t"), "{e}");
        }
        let e = read_secrets(&[format!("id=a,src={}", dir.path().join("none").display())]);
        assert!(matches!(e, Err(SecretError::Read { .. })));
        let twice = read_secrets(&[
            "id=b,env=JBUILD_TEST_SECRET_ENV".into(),
            "id=b,env=JBUILD_TEST_SECRET_ENV".into(),
        ]);
        assert!(matches!(twice, Err(SecretError::Twice(_))));
        let m = masks(&got);
        assert!(m.contains(&"s3cr3t-file-value".to_string()));
        assert_eq!(
            redact::replace_all("got s3cr3t-env-value!", &m),
            "got <redacted>!"
        );
    }

    #[test]
    fn private_cache_mounts_do_not_share_while_in_use() {
        let base = tempfile::tempdir().unwrap();
        let mut a = StepMounts::default();
        let mut b = StepMounts::default();
        for m in [&mut a, &mut b] {
            m.add_cache(base.path(), "/c", "/c", Sharing::Private, 0o755, 0, 0)
                .unwrap();
        }
        let host = |m: &StepMounts| match &m.mounts[0] {
            Mount::Bind(b) => b.host.clone(),
            other => panic!("{other:?}"),
        };
        assert_ne!(host(&a), host(&b));
        drop(a);
        let mut c = StepMounts::default();
        c.add_cache(base.path(), "/c", "/c", Sharing::Private, 0o755, 0, 0)
            .unwrap();
        assert_eq!(host(&c), base.path().join("%2Fc"));
        // prune --cache leaves what a step holds (b's), clears the rest.
        fs::write(base.path().join("%2Fc/f"), "x").unwrap();
        drop(c);
        assert_eq!(clear_cache_mounts(base.path()).unwrap(), 1);
        assert!(!base.path().join("%2Fc").exists());
        assert!(host(&b).exists());
        drop(b);
        assert_eq!(clear_cache_mounts(base.path()).unwrap(), 1);
    }
}
