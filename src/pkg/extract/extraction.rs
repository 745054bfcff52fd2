//! One package's files written into the root ([`Extraction`]): each tar
//! member through the layer applier, `@config` files kept or set beside as
//! `.pkgnew`, what no package owned set aside as `.pkgsave`, owners by the
//! image's names, flags through `FileFlags`.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::owners::Unresolved;
use super::{
    ConfigFile, ExtractError, FileMeta, Installed, Opened, Options, Owners, Reader, MAX_CONFIG,
    PROGRESS_STEP,
};
use crate::fsutil::flags::FileFlags;
use crate::layer::apply::{Applier, ApplyOptions};
use crate::layer::header;
use crate::layer::{fflags, LayerError, TarHeader};
use crate::pkg::checksum::Checksum;

pub(super) struct Extraction<'a> {
    pub(super) root: &'a Path,
    pub(super) opened: &'a Opened,
    pub(super) owners: &'a Owners,
    pub(super) opts: &'a Options,
    pub(super) file_flags: &'a dyn FileFlags,
}

impl Extraction<'_> {
    /// Extracts the package's files; `written` hears the bytes of
    /// content written so far (see [`Hooks::written`]).
    pub(super) fn run(
        &self,
        r: &mut Reader,
        written: &mut dyn FnMut(u64),
    ) -> Result<Installed, ExtractError> {
        let package = self.opened.label();
        let apply_opts = ApplyOptions {
            allow_devices: false,
            allow_setuid: true,
            same_owner: self.opts.same_owner,
            // Not file by file: the caller runs the install under
            // `snapshot::flush::Flusher` (a PKG step, a pkgbase base), whose
            // `syncfs` every 250 ms pushes the small files to the disk as a
            // few large writes; one `sync_file_range` each made every small
            // file a write of its own.
            start_writeback: false,
            diff_id: false,
        };
        let mut a = Applier::new(self.root, &apply_opts, &self.opts.limits, self.file_flags);
        let mut out = Installed {
            name: self.opened.manifest.name.clone(),
            version: self.opened.manifest.version.clone(),
            ..Installed::default()
        };
        let hostile = |r: &Reader, e: LayerError| ExtractError::Hostile {
            package: package.clone(),
            source: r.layer_error(e),
        };
        let mut unresolved = Unresolved::default();
        let mut dirs = SaveDirs::default();
        let mut said = 0;
        loop {
            let h = match r.first.take() {
                Some(h) => h,
                None => match r.tar.next().map_err(|e| hostile(r, e))? {
                    Some(h) => h,
                    None => break,
                },
            };
            a.entries += 1;
            a.within_limits(&h).map_err(|e| hostile(r, e))?;
            self.entry(r, &mut a, h, &mut out, &mut unresolved, &mut dirs)?;
            if a.bytes - said >= PROGRESS_STEP {
                said = a.bytes;
                written(said);
            }
        }
        a.finish().map_err(|e| hostile(r, e))?;
        written(a.bytes);
        out.entries = a.entries;
        out.bytes = a.bytes;
        out.warnings.extend(unresolved.warning());
        Ok(out)
    }

    fn entry(
        &self,
        r: &mut Reader,
        a: &mut Applier<'_>,
        mut h: TarHeader,
        out: &mut Installed,
        unresolved: &mut Unresolved,
        dirs: &mut SaveDirs,
    ) -> Result<(), ExtractError> {
        let c = &self.opened.contents;
        let package = self.opened.label();
        let raw = String::from_utf8_lossy(&h.path).into_owned();
        let trimmed = raw.trim_start_matches("./").trim_end_matches('/');
        let key = format!("/{}", trimmed.trim_start_matches('/'));
        // FILES_IGNORE: not extracted (its content is passed over).
        if self.opts.ignore.matches(&key) {
            return Ok(());
        }
        let meta = match h.typeflag {
            header::DIRECTORY => c.dirs.get(&key).or_else(|| c.files.get(&key)),
            _ => c.files.get(&key),
        };
        let Some(meta) = meta else {
            return Err(ExtractError::NotInManifest { package, path: raw });
        };
        h.path = key.as_bytes()[1..].to_vec();
        if h.typeflag == header::HARD_LINK {
            let link = String::from_utf8_lossy(&h.linkname).into_owned();
            h.linkname = link.trim_start_matches('/').as_bytes().to_vec();
        }
        self.owner(&mut h, meta, &key, unresolved);
        if let Some(m) = meta.mtime {
            (h.mtime, h.mtime_nsec) = (m, 0);
        }
        if let Some(clamp) = self.opts.clamp_mtime.and_then(|c| i64::try_from(c).ok()) {
            if h.mtime > clamp {
                (h.mtime, h.mtime_nsec) = (clamp, 0);
            }
        }
        if h.fflags.is_none() {
            h.fflags = meta.fflags.and_then(fflags::to_text);
        }
        if let Some(f) = h
            .fflags
            .as_deref()
            .map(fflags::from_text)
            .filter(|f| *f != 0)
        {
            out.flags.insert(key.clone(), f);
        }
        let is_file = h.typeflag == header::REGULAR;
        let config = is_file && c.config.contains(&key);
        let upgrade = self.opts.upgrading.contains(&self.opened.manifest.name);
        // On an upgrade, the image's own file at a config path stays: the
        // package's goes beside it (or replaces or merges with it, below).
        // Anything else the package puts where no installed package had a
        // file is set aside first (`.pkgsave`), a fresh install's config
        // file too.
        let mut kept = None;
        if h.typeflag != header::DIRECTORY
            && !(config && upgrade)
            && !self.opts.owned.contains(&key)
        {
            self.save_unowned(&key, meta, dirs)?;
        }
        if config && upgrade {
            let host = crate::fsutil::resolve_in_root(self.root, Path::new(&key[1..]), false)
                .map_err(self.config_err(&key, "look for"))?;
            if fs::symlink_metadata(&host).is_ok_and(|m| m.is_file()) {
                h.path = format!("{}.pkgnew", &key[1..]).into_bytes();
                kept = Some(host);
            }
        }
        let hostile = |r: &Reader, e: LayerError| ExtractError::Hostile {
            package: package.clone(),
            source: r.layer_error(e),
        };
        let sum = match (&meta.sum, is_file) {
            (Some(s), true) => Some(Checksum::parse(s).map_err(|e| ExtractError::Manifest {
                package: package.clone(),
                reason: format!("`{key}`: {e}"),
            })?),
            _ => None,
        };
        match &sum {
            Some(sum) => {
                let mut hasher = sum.hasher();
                a.entry_teed(&mut r.tar, &h, Some(&mut hasher))
                    .map_err(|e| hostile(r, e))?;
                let got = hasher.finish();
                if got != *sum {
                    return Err(ExtractError::Content {
                        package,
                        path: key,
                        want: sum.to_string(),
                        got: got.to_string(),
                    });
                }
            }
            None => a
                .entry_teed(&mut r.tar, &h, None)
                .map_err(|e| hostile(r, e))?,
        }
        if config {
            out.config.push(self.config(&key, &h, kept)?);
        }
        Ok(())
    }

    /// The image's numbers for the entry's owner and group names (the
    /// tar's, else the manifest's, else root and wheel); a name the image
    /// lacks is noted in `unresolved` ([`Owners::ids`]).
    fn owner(&self, h: &mut TarHeader, meta: &FileMeta, key: &str, unresolved: &mut Unresolved) {
        let name = |tar: &[u8], manifest: &Option<String>, default: &str| {
            if !tar.is_empty() {
                String::from_utf8_lossy(tar).into_owned()
            } else {
                manifest.clone().unwrap_or_else(|| default.to_string())
            }
        };
        let user = name(&h.uname, &meta.uname, "root");
        let group = name(&h.gname, &meta.gname, "wheel");
        let (uid, gid) = self.owners.ids(&user, &group, key, unresolved);
        (h.uid, h.gid) = (uid.into(), gid.into());
    }

    /// pkg's `.pkgsave` (`backup_file_if_needed` in `libpkg/pkg_add.c`,
    /// called from `pkg_extract_finalize` for a path `pkg_add_common`
    /// found present and owned by no package in the database, and for a
    /// config file of a fresh install, which `attempt_to_merge` marks
    /// `MERGE_NOT_LOCAL`): what the image has at `key` is renamed
    /// `<key>.pkgsave` before the package's entry takes its place, unless
    /// it is a symlink or a regular file with the content the package
    /// installs there (its manifest's sum). pkg says nothing of it, and
    /// goes on when the rename fails (the entry then replaces what is
    /// there); so does this.
    fn save_unowned(
        &self,
        key: &str,
        meta: &FileMeta,
        dirs: &mut SaveDirs,
    ) -> Result<(), ExtractError> {
        let rel = Path::new(&key[1..]);
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return Ok(());
        };
        let host_dir = match &dirs.last {
            Some((p, h)) if p == parent => h.clone(),
            _ => {
                let h = crate::fsutil::resolve_in_root(self.root, parent, true)
                    .map_err(self.config_err(key, "look for"))?;
                dirs.last = Some((parent.to_path_buf(), h.clone()));
                h
            }
        };
        let host = host_dir.join(name);
        let Ok(m) = fs::symlink_metadata(&host) else {
            return Ok(());
        };
        if m.file_type().is_symlink() {
            return Ok(());
        }
        if m.is_file() && same_content(&host, meta.sum.as_deref()) {
            return Ok(());
        }
        let mut saved = name.to_os_string();
        saved.push(".pkgsave");
        let _ = fs::rename(&host, host_dir.join(saved));
        Ok(())
    }

    fn config_err(&self, path: &str, what: &'static str) -> impl FnOnce(io::Error) -> ExtractError {
        let (package, path) = (self.opened.label(), path.to_string());
        move |source| ExtractError::Config {
            package,
            path,
            what,
            source,
        }
    }

    /// The configuration file just written (at `h.path`): its content, and
    /// where the image's own file was kept (`kept`), whether the package's
    /// stays beside it as `.pkgnew` (it differs) or replaces it (it is the
    /// same).
    fn config(
        &self,
        key: &str,
        h: &TarHeader,
        kept: Option<PathBuf>,
    ) -> Result<ConfigFile, ExtractError> {
        let written = String::from_utf8_lossy(&h.path).into_owned();
        let host = crate::fsutil::resolve_in_root(self.root, Path::new(&written), false)
            .map_err(self.config_err(key, "find"))?;
        let content = read_bounded(&host).map_err(self.config_err(key, "read"))?;
        let (mut pkgnew, mut merged) = (false, None);
        if let Some(old) = kept {
            let mine = read_bounded(&old);
            let base = self.opts.previous_config.get(key);
            let same = mine
                .as_ref()
                .is_ok_and(|o| *o == content || base == Some(o));
            if same {
                fs::rename(&host, &old).map_err(self.config_err(key, "replace"))?;
            } else if let (true, Some(base), Ok(mine)) = (self.opts.automerge, base, &mine) {
                // AUTOMERGE: the user's changes and the new version's
                // together, in the file, with the package's owner and
                // mode (written over the `.pkgnew` first).
                match crate::pkg::merge3::merge(base, mine, &content) {
                    Some(text) => {
                        fs::write(&host, text).map_err(self.config_err(key, "merge"))?;
                        fs::rename(&host, &old).map_err(self.config_err(key, "replace"))?;
                        merged = Some(true);
                    }
                    None => (pkgnew, merged) = (true, Some(false)),
                }
            } else {
                pkgnew = true;
            }
        }
        Ok(ConfigFile {
            path: key.to_string(),
            content,
            pkgnew,
            merged,
        })
    }
}

fn read_bounded(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    File::open(path)?
        .take(MAX_CONFIG + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_CONFIG {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than {MAX_CONFIG} bytes"),
        ));
    }
    Ok(bytes)
}

/// The last directory [`Extraction::save_unowned`] resolved in the root
/// (a package's files come directory by directory).
#[derive(Default)]
struct SaveDirs {
    last: Option<(PathBuf, PathBuf)>,
}

/// Whether the file at `host` has the manifest's sum `sum` (pkg compares
/// with the sum's own kind of hash). No sum, or one jbuild cannot read:
/// not the same.
fn same_content(host: &Path, sum: Option<&str>) -> bool {
    let Some(sum) = sum.and_then(|s| Checksum::parse(s).ok()) else {
        return false;
    };
    let mut hasher = sum.hasher();
    match File::open(host).and_then(|mut f| io::copy(&mut f, &mut hasher)) {
        Ok(_) => hasher.finish() == sum,
        Err(_) => false,
    }
}
