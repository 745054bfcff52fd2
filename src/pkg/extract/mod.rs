//! Packages installed into an image's root, as pkg 2.x extracts them
//! (`libpkg/pkg_add.c`; `../shared/notes/pkg-anyhost.md` §2, §3).
//!
//! A package file is a tar (zstd, xz or gzip, as `pkg create` writes it)
//! whose first members are `+COMPACT_MANIFEST` and `+MANIFEST`; the files
//! follow, named by absolute path (`/usr/local/bin/foo`), owned by *name*
//! (`uname`/`gname`; the numbers are placeholders), with their modes,
//! FreeBSD file flags (`SCHILY.fflags`), hard links and symlinks.
//!
//! What [`install`] does, for a closure in install order:
//!
//! 1. Each package's manifests are read before it is extracted, and a
//!    file it installs that a package before it installs — or that a
//!    package already in the image owns — refuses the install, naming
//!    both (pkg finds it when it registers the package; the result is the
//!    same). [`install`] reads every manifest first and refuses before
//!    anything is written; [`install_fed`] takes the packages as they
//!    come (downloads overlapped with the extraction), so a refusal can
//!    come after earlier packages were written into the root, which the
//!    caller then discards.
//! 2. Then each package in pkg's order: the database ([`Hooks::register`]),
//!    Lua then shell pre-install ([`Hooks::lua_pre_install`],
//!    [`Hooks::shell_pre_install`]), the image's owners read, extraction,
//!    commit ([`Hooks::commit`]), Lua then shell post-install
//!    ([`Hooks::lua_post_install`], [`Hooks::shell_post_install`]),
//!    messages ([`Hooks::messages`]). The hooks are where the package
//!    database and the scripts plug in; [`NoHooks`] does nothing.
//! 3. Extraction goes through the layer applier (`layer::apply`), which
//!    treats every entry as hostile: a path out of the root or through a
//!    symlink the package made, a hard link to something outside it or
//!    missing, a device, more bytes or entries than [`Options::limits`]
//!    allow — each refuses the package as a hostile layer is refused.
//!    On top of it, as pkg: an entry the manifest does not list is refused;
//!    owners and groups are the image's numbers for the names
//!    ([`Owners`], read after the pre-install scripts, which may add
//!    users); a name the image lacks is 0, as pkg does, with one
//!    warning a package (not for root and wheel while the image has no
//!    accounts at all: see `extract/owners.rs`); setuid and setgid bits
//!    are kept; mtimes come from the manifest when it has them, clamped
//!    by [`Options::clamp_mtime`] (`SOURCE_DATE_EPOCH`); each regular
//!    file's content is checked
//!    against the manifest's sum as it is written; file flags are set
//!    through the [`FileFlags`] seam given (so the layer writer sees them)
//!    and reported in [`Installed::flags`].
//! 4. `@config` files of an upgrade: when the image already has a file
//!    there whose content differs, it is kept and the package's goes
//!    beside it as `<path>.pkgnew` (or merges), as pkg does; their content
//!    is reported ([`Installed::config`]) for the database.
//! 5. What the image has where a package puts a file and no package being
//!    replaced had one (a fresh install's config file too) is renamed
//!    `<path>.pkgsave` first, unless it is a symlink or already the
//!    package's content ([`Options::owned`]; pkg's `backup_file_if_needed`).
//!
//! A failure stops the install where it is: the root is then partly
//! written, and the caller (a build step) discards it.

mod abi_match;
pub mod ahead;
mod contents;
mod extraction;
mod owners;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

pub use contents::{Contents, FileMeta};
pub use owners::{Owners, MAX_ACCOUNTS};

use extraction::Extraction;

use super::manifest::{self, Manifest};
use crate::fsutil::flags::FileFlags;
use crate::layer::header;
use crate::layer::limits::Capped;
use crate::layer::{LayerError, Limits, TarHeader, TarReader};

/// The most `+` members before the files.
pub const MAX_META_MEMBERS: usize = 16;
/// The most bytes of one `@config` file (its content goes to the database).
pub const MAX_CONFIG: u64 = 16 << 20;

/// How packages are installed.
#[derive(Debug, Clone)]
pub struct Options {
    /// No mtime is later than this (`SOURCE_DATE_EPOCH`).
    pub clamp_mtime: Option<u64>,
    /// Set owners (needs root); off, every file is the caller's.
    pub same_owner: bool,
    /// Bounds on each package's decompressed size, entries and paths.
    pub limits: Limits,
    /// The ABI installed for (`FreeBSD:14:amd64`): a package for another
    /// is refused, as pkg refuses it (`abi_match`). `None`: not checked.
    pub abi: Option<String>,
    /// For an upgrade: the `@config` contents the old versions installed,
    /// by path. A file still holding its old content was not changed by
    /// the user and is replaced; one that differs stays, the package's
    /// beside it as `.pkgnew`, as pkg does when it cannot merge.
    pub previous_config: BTreeMap<String, Vec<u8>>,
    /// The names of the packages this install upgrades or reinstalls: a
    /// config file of theirs the image has stays (`.pkgnew`, merge);
    /// another package's replaces it, the image's set aside as
    /// `.pkgsave`.
    pub upgrading: BTreeSet<String>,
    /// The paths the versions being replaced install (pkg's
    /// `pkgdb_file_exists`): what the image has at any other path a
    /// package installs is set aside as `<path>.pkgsave` first, unless it
    /// is a symlink or already the package's content.
    pub owned: BTreeSet<String>,
    /// pkg.conf's `AUTOMERGE`: a changed config file with an old content
    /// in `previous_config` is merged with the package's (`merge3`)
    /// before `.pkgnew` is the answer.
    pub automerge: bool,
    /// pkg.conf's `FILES_IGNORE_GLOB`/`_REGEX`: paths neither extracted
    /// nor counted as installed.
    pub ignore: crate::pkg::pkg_conf::FilesIgnore,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            clamp_mtime: None,
            same_owner: nix::unistd::geteuid().is_root(),
            limits: Limits::default(),
            abi: None,
            previous_config: BTreeMap::new(),
            upgrading: BTreeSet::new(),
            owned: BTreeSet::new(),
            automerge: true,
            ignore: Default::default(),
        }
    }
}

/// A package file with its manifests read.
#[derive(Debug, Clone)]
pub struct Opened {
    pub path: PathBuf,
    /// `+COMPACT_MANIFEST`, when the package has one.
    pub compact_manifest: Option<String>,
    /// `+MANIFEST` as the package has it, and read ([`Manifest`]): what
    /// the package database is made from.
    pub manifest_text: String,
    pub manifest: Manifest,
    /// Its paths, indexed for extraction.
    pub contents: Contents,
}

impl Opened {
    /// `name-version`, for messages.
    pub fn label(&self) -> String {
        format!("{}-{}", self.manifest.name, self.manifest.version)
    }
}

/// A package file to install, and what its catalogue calls it
/// (`name-version`), which its manifest must say too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageFile {
    pub label: String,
    pub path: PathBuf,
}

impl From<&super::fetch::Fetched> for PackageFile {
    fn from(f: &super::fetch::Fetched) -> Self {
        PackageFile {
            label: format!("{}-{}", f.name, f.version),
            path: f.path.clone(),
        }
    }
}

/// What installing one package did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Installed {
    pub name: String,
    pub version: String,
    pub entries: u64,
    /// Bytes of file content written.
    pub bytes: u64,
    /// File flags set, by absolute path.
    pub flags: BTreeMap<String, u32>,
    pub config: Vec<ConfigFile>,
    /// Owner or group names the image does not have (given number 0,
    /// as pkg does): one warning for the package, naming them.
    pub warnings: Vec<String>,
}

/// An `@config` file as installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    /// Its absolute path in the image.
    pub path: String,
    /// The package's content (what pkg stores in `config_files`).
    pub content: Vec<u8>,
    /// The image had another file there: the package's went to
    /// `<path>.pkgnew`.
    pub pkgnew: bool,
    /// A three-way merge was tried (`AUTOMERGE`): whether it merged.
    pub merged: Option<bool>,
}

/// What a hook returns when it fails.
pub type HookError = Box<dyn std::error::Error + Send + Sync>;

/// The steps of pkg's install around extraction, in its order
/// (`pkg_add_common`): [`register`](Hooks::register) (the package
/// database, in an open transaction), [`lua_pre_install`](Hooks::lua_pre_install)
/// then [`shell_pre_install`](Hooks::shell_pre_install), the owners read,
/// extraction, [`commit`](Hooks::commit), [`lua_post_install`](Hooks::lua_post_install)
/// then [`shell_post_install`](Hooks::shell_post_install) (pkg ignores
/// their failures: a hook that agrees returns `Ok` and reports them
/// itself), [`messages`](Hooks::messages). Every step does nothing by
/// default.
pub trait Hooks {
    fn register(&mut self, _pkg: &Opened, _root: &Path) -> Result<(), HookError> {
        Ok(())
    }
    /// Where the package's pre-install Lua scripts run (`pkg::lua`).
    fn lua_pre_install(&mut self, _pkg: &Opened, _root: &Path) -> Result<(), HookError> {
        Ok(())
    }
    fn commit(
        &mut self,
        _pkg: &Opened,
        _installed: &Installed,
        _root: &Path,
    ) -> Result<(), HookError> {
        Ok(())
    }
    /// Where the package's pre-install shell scripts run, after the Lua
    /// ones and before the image's accounts are read for the package's
    /// owners (so that a user its script adds owns its files).
    fn shell_pre_install(&mut self, _pkg: &Opened, _root: &Path) -> Result<(), HookError> {
        Ok(())
    }
    /// Where the package's post-install Lua scripts run (`pkg::lua`).
    fn lua_post_install(&mut self, _pkg: &Opened, _root: &Path) -> Result<(), HookError> {
        Ok(())
    }
    /// Where the package's post-install shell scripts run, after the Lua
    /// ones (pkg ignores their failures, as for Lua).
    fn shell_post_install(&mut self, _pkg: &Opened, _root: &Path) -> Result<(), HookError> {
        Ok(())
    }
    fn messages(&mut self, _pkg: &Opened) {}
    /// `bytes` of file content written so far by this install (all its
    /// packages together), for a progress bar: at least every
    /// [`PROGRESS_STEP`] bytes and at the end of each package.
    fn written(&mut self, _bytes: u64) {}
}

/// Bytes of content between two calls to [`Hooks::written`].
pub const PROGRESS_STEP: u64 = 1 << 20;

/// Hooks that do nothing: extraction alone.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoHooks;

impl Hooks for NoHooks {}

#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("cannot read the package file {}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("package {package}: {reason}")]
    Manifest { package: String, reason: String },
    #[error(transparent)]
    BadManifest {
        #[from]
        source: manifest::ManifestError,
    },
    #[error(
        "package {package}: `{path}` is in the archive but not in its manifest (pkg refuses \
         such a package too)"
    )]
    NotInManifest { package: String, path: String },
    #[error(
        "package {package}: the content of `{path}` does not have the checksum its manifest \
         gives ({want}, it has {got})"
    )]
    Content {
        package: String,
        path: String,
        want: String,
        got: String,
    },
    #[error(
        "`{path}` is installed by both {a} and {b}: they cannot be installed together \
         (pkg refuses it too)"
    )]
    Conflict { path: String, a: String, b: String },
    #[error(
        "package {package} is for `{pkg_abi}`, not the image's `{abi}`: its repository serves \
         another architecture or release (pkg refuses it too: wrong architecture)"
    )]
    WrongAbi {
        package: String,
        pkg_abi: String,
        abi: String,
    },
    #[error("package {package} is refused")]
    Hostile {
        package: String,
        #[source]
        source: LayerError,
    },
    #[error("cannot read the image's accounts ({})", path.display())]
    Accounts {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("package {package}: cannot {what} the configuration file `{path}`")]
    Config {
        package: String,
        path: String,
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("package {package}: {stage}")]
    Hook {
        package: String,
        stage: &'static str,
        #[source]
        source: HookError,
    },
}

impl crate::blame::Blame for ExtractError {
    /// A package that does not install is the repository's (which the
    /// user chose); the machine failing to read or write is not.
    fn is_user_error(&self) -> bool {
        match self {
            ExtractError::Open { .. } | ExtractError::Config { .. } => false,
            ExtractError::Accounts { source, .. } => source.kind() == io::ErrorKind::FileTooLarge,
            ExtractError::Hostile { source, .. } => source.is_bad_input(),
            // A package's script at fault, unless a command it ran could
            // not write the root (a `ScriptError` in the chain says).
            ExtractError::Hook { source, .. } => {
                let mut at: Option<&(dyn std::error::Error + 'static)> = Some(&**source);
                while let Some(e) = at {
                    if let Some(e) = e.downcast_ref::<crate::pkg::script::ScriptError>() {
                        return e.is_user_error();
                    }
                    at = e.source();
                }
                true
            }
            _ => true,
        }
    }
}

/// Installs the package files `packages` (in install order) into `root`.
/// `packages` come from [`super::fetch::fetch_all`] (`PackageFile::from`).
/// `owned` maps the paths packages already in the image install to that
/// package (`name-version`). File flags are set through `file_flags`.
pub fn install(
    root: &Path,
    packages: &[PackageFile],
    owned: &BTreeMap<String, String>,
    opts: &Options,
    file_flags: &dyn FileFlags,
    hooks: &mut dyn Hooks,
) -> Result<Vec<Installed>, ExtractError> {
    let mut opened = Vec::with_capacity(packages.len());
    for p in packages {
        let (o, _) = open(p, &opts.limits)?;
        opened.push(o);
    }
    install_opened(root, &opened, owned, opts, file_flags, hooks)
}

/// [`install`] of packages whose manifests the caller has read already
/// ([`open`]). Their files are decompressed ahead on a thread of their own
/// (`ahead`) while the extraction writes them.
pub fn install_opened(
    root: &Path,
    opened: &[Opened],
    owned: &BTreeMap<String, String>,
    opts: &Options,
    file_flags: &dyn FileFlags,
    hooks: &mut dyn Hooks,
) -> Result<Vec<Installed>, ExtractError> {
    // Every ABI and conflict first, as pkg finds them before it writes.
    for o in opened {
        check_abi(o, opts)?;
    }
    let mut seen = Conflicts::new(owned);
    for o in opened {
        seen.add(o, &opts.ignore)?;
    }
    let paths: Vec<PathBuf> = opened.iter().map(|o| o.path.clone()).collect();
    let mut next = |i: usize| Ok(opened.get(i).cloned());
    install_fed(root, &mut next, &paths, owned, opts, file_flags, hooks)
}

/// [`install`] of packages that come one at a time, in install order:
/// `next(i)` gives the package at `i` with its manifests read (waiting
/// until it is there; `Ok(None)` after the last one, `Err` where it will
/// not come), and `files` its file to decompress, on the decoder's thread
/// (`ahead`), which runs ahead of the extraction as far as the files are
/// there. Each package's ABI and conflicts (with the packages before it
/// and with `owned`) are checked as it comes, before it is extracted: a
/// refusal can then come after earlier packages were written into the
/// root, which the caller discards (a build step's root is committed only
/// once its step succeeded). `files.close()` is called at the end,
/// whether done or failed.
pub fn install_fed<E: From<ExtractError>>(
    root: &Path,
    next: &mut dyn FnMut(usize) -> Result<Option<Opened>, E>,
    files: &dyn ahead::Files,
    owned: &BTreeMap<String, String>,
    opts: &Options,
    file_flags: &dyn FileFlags,
    hooks: &mut dyn Hooks,
) -> Result<Vec<Installed>, E> {
    /// Closes `files` when the install ends, however it ends, so that a
    /// decoder waiting for a file stops and the scope can join it.
    struct Closing<'f>(&'f dyn ahead::Files);
    impl Drop for Closing<'_> {
        fn drop(&mut self) {
            self.0.close();
        }
    }
    let (decoder, ahead) = ahead::pair(files);
    std::thread::scope(|s| {
        let _closing = Closing(files);
        std::thread::Builder::new()
            .name("pkg-decode".into())
            .spawn_scoped(s, || decoder.run())
            .map_err(|source| ExtractError::Open {
                path: PathBuf::from("(a decoder thread)"),
                source,
            })?;
        // `ahead` is dropped before the scope joins the decoder, which
        // then stops at its next hand-over.
        let ahead = ahead;
        let mut seen = Conflicts::new(owned);
        let mut out: Vec<Installed> = Vec::new();
        let mut before = 0;
        for i in 0.. {
            let Some(o) = next(i)? else { break };
            check_abi(&o, opts)?;
            seen.add(&o, &opts.ignore)?;
            let done = install_one(root, &o, &ahead, opts, file_flags, hooks, before)?;
            before += done.bytes;
            out.push(done);
        }
        Ok(out)
    })
}

/// Refuses a package for another ABI than `opts.abi`, as pkg does.
pub fn check_abi(o: &Opened, opts: &Options) -> Result<(), ExtractError> {
    match &opts.abi {
        Some(abi) if !abi_match::installs_on(&o.manifest.abi, abi) => Err(ExtractError::WrongAbi {
            package: o.label(),
            pkg_abi: o.manifest.abi.clone(),
            abi: abi.clone(),
        }),
        _ => Ok(()),
    }
}

/// One package of [`install_opened`], in pkg's order.
fn install_one(
    root: &Path,
    o: &Opened,
    ahead: &std::rc::Rc<ahead::Ahead>,
    opts: &Options,
    file_flags: &dyn FileFlags,
    hooks: &mut dyn Hooks,
    before: u64,
) -> Result<Installed, ExtractError> {
    let package = o.label();
    let hook = |stage| {
        let package = package.clone();
        move |source| ExtractError::Hook {
            package,
            stage,
            source,
        }
    };
    hooks
        .register(o, root)
        .map_err(hook("registering it in the package database"))?;
    hooks
        .lua_pre_install(o, root)
        .map_err(hook("its pre-install Lua script"))?;
    hooks
        .shell_pre_install(o, root)
        .map_err(hook("its pre-install shell scripts"))?;
    let owners =
        Owners::read(root).map_err(|(path, source)| ExtractError::Accounts { path, source })?;
    let mut reader = Reader::over(Box::new(ahead.next_package()), &opts.limits);
    reader.skip_meta(&package)?;
    let installed = Extraction {
        root,
        opened: o,
        owners: &owners,
        opts,
        file_flags,
    }
    .run(&mut reader, &mut |bytes| hooks.written(before + bytes))?;
    ahead.finish().map_err(|source| ExtractError::Open {
        path: o.path.clone(),
        source,
    })?;
    hooks
        .commit(o, &installed, root)
        .map_err(hook("committing it to the package database"))?;
    hooks
        .lua_post_install(o, root)
        .map_err(hook("its post-install Lua script"))?;
    hooks
        .shell_post_install(o, root)
        .map_err(hook("its post-install shell scripts"))?;
    hooks.messages(o);
    Ok(installed)
}

/// The paths installed so far, by package (`name-version`): a file of
/// two packages (or of a package and one in the image) is a conflict,
/// found as the second one is added, naming both.
struct Conflicts {
    by_path: BTreeMap<String, String>,
}

impl Conflicts {
    fn new(owned: &BTreeMap<String, String>) -> Conflicts {
        Conflicts {
            by_path: owned.clone(),
        }
    }

    fn add(
        &mut self,
        o: &Opened,
        ignore: &crate::pkg::pkg_conf::FilesIgnore,
    ) -> Result<(), ExtractError> {
        let me = o.label();
        for path in o.contents.files.keys() {
            if ignore.matches(path) {
                continue;
            }
            match self.by_path.get(path.as_str()) {
                Some(other) if *other == me => {}
                Some(other) => {
                    return Err(ExtractError::Conflict {
                        path: path.clone(),
                        a: other.clone(),
                        b: me,
                    })
                }
                None => {
                    self.by_path.insert(path.clone(), me.clone());
                }
            }
        }
        Ok(())
    }
}

/// A package's tar, decompressed and capped, with what has been read.
pub struct Reader {
    tar: TarReader<Box<dyn Read>>,
    tripped: std::rc::Rc<std::cell::Cell<bool>>,
    limits: Limits,
    /// The first entry after the `+` members.
    first: Option<TarHeader>,
}

impl Reader {
    /// A tar error, or the cap if it tripped.
    fn layer_error(&self, e: LayerError) -> LayerError {
        if self.tripped.get() {
            LayerError::Limit {
                what: "uncompressed, it is bigger than".into(),
                limit: crate::layer::limits::human(self.limits.max_size),
                key: "max_size",
            }
        } else {
            e
        }
    }
}

impl Reader {
    /// A reader of the package tar `stream` (decompressed), capped by
    /// `limits`.
    fn over(stream: Box<dyn Read>, limits: &Limits) -> Reader {
        let (capped, tripped) = Capped::new(stream, limits.max_size);
        Reader {
            tar: TarReader::new(Box::new(capped) as Box<dyn Read>)
                .with_max_header(limits.max_header),
            tripped,
            limits: *limits,
            first: None,
        }
    }

    /// Passes the `+` members (read before, by [`open`]) up to the first
    /// file.
    fn skip_meta(&mut self, package: &str) -> Result<(), ExtractError> {
        for _ in 0..=MAX_META_MEMBERS {
            let h = self.tar.next().map_err(|e| ExtractError::Hostile {
                package: package.to_string(),
                source: self.layer_error(e),
            })?;
            match h {
                Some(h)
                    if !String::from_utf8_lossy(&h.path)
                        .trim_start_matches("./")
                        .starts_with('+') =>
                {
                    self.first = Some(h);
                    break;
                }
                Some(_) => {}
                None => break,
            }
        }
        Ok(())
    }
}

/// Opens the package file at `p.path` and reads its manifests.
pub fn open(p: &PackageFile, limits: &Limits) -> Result<(Opened, Reader), ExtractError> {
    let file = File::open(&p.path).map_err(|source| ExtractError::Open {
        path: p.path.clone(),
        source,
    })?;
    open_file(p, file, limits)
}

/// [`open`] of the package file `file`, which `p.path` names (in
/// messages, and in [`Opened::path`]).
pub fn open_file(
    p: &PackageFile,
    file: File,
    limits: &Limits,
) -> Result<(Opened, Reader), ExtractError> {
    let (path, name) = (p.path.as_path(), p.label.clone());
    let stream = super::catalogue::decompressor(BufReader::with_capacity(1 << 17, file)).map_err(
        |source| ExtractError::Open {
            path: path.to_path_buf(),
            source,
        },
    )?;
    let mut r = Reader::over(stream, limits);
    let hostile = |r: &Reader, e| ExtractError::Hostile {
        package: name.clone(),
        source: r.layer_error(e),
    };
    let bad = |reason: String| ExtractError::Manifest {
        package: name.clone(),
        reason,
    };
    let (mut compact, mut manifest) = (None, None);
    for _ in 0..=MAX_META_MEMBERS {
        let Some(h) = r.tar.next().map_err(|e| hostile(&r, e))? else {
            break;
        };
        let member = String::from_utf8_lossy(&h.path)
            .trim_start_matches("./")
            .to_string();
        if !member.starts_with('+') {
            r.first = Some(h);
            break;
        }
        if h.typeflag != header::REGULAR {
            continue;
        }
        let slot = match member.as_str() {
            "+COMPACT_MANIFEST" => &mut compact,
            "+MANIFEST" => &mut manifest,
            _ => continue,
        };
        if h.size > manifest::MAX_MANIFEST as u64 {
            return Err(bad(format!(
                "{member} is larger than the {} bytes a manifest may have",
                manifest::MAX_MANIFEST
            )));
        }
        let mut text = String::new();
        r.tar
            .content()
            .read_to_string(&mut text)
            .map_err(|e| bad(format!("{member}: {e}")))?;
        *slot = Some(text);
    }
    let Some(manifest) = manifest else {
        return Err(bad("it has no +MANIFEST before its files".into()));
    };
    let parsed = manifest::parse(&manifest, &format!("package {name}: +MANIFEST"))
        .map_err(|source| ExtractError::BadManifest { source })?;
    let says = format!("{}-{}", parsed.name, parsed.version);
    if says != name {
        return Err(bad(format!(
            "its +MANIFEST says it is {says}: a package file is what its catalogue says it is"
        )));
    }
    Ok((
        Opened {
            path: path.to_path_buf(),
            compact_manifest: compact,
            contents: Contents::of(&parsed),
            manifest_text: manifest,
            manifest: parsed,
        },
        r,
    ))
}
