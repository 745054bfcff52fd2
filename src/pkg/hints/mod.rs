//! The dynamic linker's hints, `/var/run/ld-elf.so.hints` (and
//! `/var/run/ld-elf32.so.hints` where the image has lib32), written as
//! FreeBSD's `ldconfig` writes them, from the directories the image
//! configures, as `rc.d/ldconfig` gathers them at boot (issue 32).
//!
//! rtld finds a program's libraries in its built-in directories (`/lib`,
//! `/usr/lib`) and in the directories the hints file lists. FreeBSD
//! rebuilds the file at every boot (`rc.d/ldconfig`) and when a package
//! with `@ldconfig` is installed (`service ldconfig restart`); a jail
//! started from an image does neither, so without this file libraries in
//! `/usr/local/lib` are not found. jbuild writes it as the image's own
//! `ldconfig` would:
//!
//! - [`rebuild`]: what `service ldconfig start` does, for the installer
//!   to call once at the end of a step: `/lib /usr/lib`, then each
//!   directory of `ldconfig_paths` (rc.conf's default `/usr/lib/compat
//!   ${LOCALBASE}/lib ${LOCALBASE}/lib/compat/pkg`, overridden by the
//!   image's rc.conf files, [`rcconf`]), then the lines of the files
//!   packages put in `${LOCALBASE}/libdata/ldconfig/` (sorted, duplicates
//!   dropped: rc.d's `cat … | sort -u`), then `/etc/ld-elf.so.conf`; what
//!   is missing is left out (`[ -r ]`), a directory listed twice is kept
//!   once, in its first place, and a directory not owned by root or
//!   writable by its group or others is skipped with ldconfig's warning
//!   (unless `ldconfig_insecure`). lib32 the same with
//!   `ldconfig32_paths` and `libdata/ldconfig32`, on the architectures
//!   rc.d does it for (amd64, powerpc64, mips64);
//! - [`ldconfig`], [`service`], [`rc_ldconfig`]: the commands a
//!   package's script runs, with the shared signature of
//!   [`crate::pkg::script::Io`]: `ldconfig` with ldconfig(8)'s options
//!   (`-elf`, `-32`, `-soft`, `-B`, `-R`, `-f`, `-i`, `-m`, `-r` as
//!   FreeBSD prints it, `-s` and `-v` accepted as older releases did),
//!   `service ldconfig start|restart` and `/etc/rc.d/ldconfig start`.
//!
//! The byte order is the image's: the `EI_DATA` of `/libexec/ld-elf.so.1`
//! (else `/bin/sh`), so a powerpc64 image gets a big-endian file, as its
//! own ldconfig writes (see [`mod@format`]).
//!
//! Every path is the image's: read through
//! [`crate::fsutil::resolve_in_root`] (a symlink is followed as the jail
//! follows it). Where jbuild writes (the hints file's directory) and
//! where it gathers lists from (`libdata/ldconfig*`), a symlink that
//! leads out of the root on the host (an absolute target, a `..` above
//! the root) is refused as hostile instead.

mod command;
pub mod format;
pub mod rcconf;
mod update;

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

pub use command::{ldconfig, rc_ldconfig, service};
pub use format::{decode, encode, Hints, Order};

/// rtld's hints file (`_PATH_ELF_HINTS`).
pub const HINTS: &str = "/var/run/ld-elf.so.hints";
/// The 32-bit one (`_PATH_ELF32_HINTS`).
pub const HINTS32: &str = "/var/run/ld-elf32.so.hints";
/// The soft-float one (`_PATH_ELFSOFT_HINTS`), for `ldconfig -soft`.
pub const HINTS_SOFT: &str = "/var/run/ld-elf-soft.so.hints";

/// Why the hints could not be written.
#[derive(Debug, thiserror::Error)]
pub enum HintsError {
    #[error("{} in the image: {why}", path.display())]
    Hostile { path: PathBuf, why: String },
    #[error("reading {} in the image", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("writing {} in the image", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// ldconfig itself gave up, with its message (too many directories).
    #[error("ldconfig: {0}")]
    Refused(String),
}

impl crate::blame::Blame for HintsError {
    /// A hostile image, or one ldconfig refuses, is the input's; a read
    /// as [`crate::fsutil::path_at_fault`] says; a failed write the
    /// machine's.
    fn is_user_error(&self) -> bool {
        match self {
            HintsError::Hostile { .. } | HintsError::Refused(_) => true,
            HintsError::Read { source, .. } => crate::fsutil::path_at_fault(source),
            HintsError::Write { .. } => false,
        }
    }
}

impl From<HintsError> for crate::pkg::script::CommandError {
    fn from(e: HintsError) -> Self {
        use crate::pkg::script::CommandError as C;
        match e {
            HintsError::Hostile { path, why } => C::Hostile { path, why },
            HintsError::Write { path, source } => C::Io { path, source },
            other => C::Other(Box::new(other)),
        }
    }
}

/// A hints file written by [`rebuild`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Its path in the image (`/var/run/ld-elf.so.hints`).
    pub path: String,
    /// The directories it lists, in order.
    pub dirs: Vec<String>,
}

/// What [`rebuild`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rebuilt {
    /// The files written; none when the image has no `/sbin/ldconfig`
    /// (rc.d does nothing then either).
    pub written: Vec<Written>,
    /// ldconfig's warnings, one a line (a directory skipped, and why).
    pub warnings: Vec<String>,
}

/// Rebuilds the image's hints as `service ldconfig start` does at boot
/// (see the module docs); `/var/run` is made (0755, as `BSD.var.dist`
/// has it) if the image lacks it.
pub fn rebuild(root: &Path) -> Result<Rebuilt, HintsError> {
    let run = in_root_strictly(root, "/var/run")?;
    if fs::symlink_metadata(&run).is_err() {
        use std::os::unix::fs::DirBuilderExt;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&run)
            .map_err(|source| HintsError::Write {
                path: "/var/run".into(),
                source,
            })?;
    }
    let mut out = Vec::new();
    let mut err = Vec::new();
    let written = match command::start(root, &mut out, &mut err) {
        Ok(w) => w,
        Err(update::Fail::Exit(msg)) => return Err(HintsError::Refused(msg)),
        Err(update::Fail::Fault(e)) => return Err(e),
    };
    let warnings = String::from_utf8_lossy(&err)
        .lines()
        .map(str::to_string)
        .collect();
    Ok(Rebuilt { written, warnings })
}

/// The host path of `path` in the image, refusing a symlink that leads
/// out of the root on the host (see the module docs).
pub(crate) fn in_root_strictly(root: &Path, path: &str) -> Result<PathBuf, HintsError> {
    crate::fsutil::resolve_in_root_strictly(root, Path::new(path)).map_err(|e| match e {
        crate::fsutil::InRootError::Outside { .. } => HintsError::Hostile {
            path: path.into(),
            why: format!("{e}: refused"),
        },
        crate::fsutil::InRootError::Io(source) => HintsError::Read {
            path: path.into(),
            source,
        },
    })
}

/// The host path of `path` in the image, as the jail would follow it.
pub(crate) fn in_root(root: &Path, path: &str) -> Result<PathBuf, HintsError> {
    crate::fsutil::resolve_in_root(root, Path::new(path), true).map_err(|source| HintsError::Read {
        path: path.into(),
        source,
    })
}

/// The bytes of the image's `path`, at most `max` of them, or `None` when
/// it is missing or not a regular file.
pub(crate) fn read_small(root: &Path, path: &str, max: u64) -> Result<Option<Vec<u8>>, HintsError> {
    let host = in_root(root, path)?;
    let file = match fs::File::open(&host) {
        Ok(f) => f,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(None)
        }
        Err(source) => {
            return Err(HintsError::Read {
                path: path.into(),
                source,
            })
        }
    };
    let meta = file.metadata().map_err(|source| HintsError::Read {
        path: path.into(),
        source,
    })?;
    if !meta.is_file() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    file.take(max)
        .read_to_end(&mut bytes)
        .map_err(|source| HintsError::Read {
            path: path.into(),
            source,
        })?;
    Ok(Some(bytes))
}

/// What the image's ELF files say of its machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Machine {
    pub order: Order,
    /// rc.d's `machine_arch` is one it writes 32-bit hints for.
    pub has_lib32_arch: bool,
}

/// The image's byte order and architecture, from the ELF header of
/// `/libexec/ld-elf.so.1`, else `/bin/sh`; little-endian amd64-like when
/// neither is an ELF file.
pub(crate) fn image_machine(root: &Path) -> Result<Machine, HintsError> {
    for file in ["/libexec/ld-elf.so.1", "/bin/sh"] {
        let Some(h) = read_small(root, file, 20)? else {
            continue;
        };
        if h.len() < 20 || &h[..4] != b"\x7fELF" {
            continue;
        }
        let order = match h[5] {
            1 => Order::Little,
            2 => Order::Big,
            _ => continue,
        };
        let machine = match order {
            Order::Little => u16::from_le_bytes([h[18], h[19]]),
            Order::Big => u16::from_be_bytes([h[18], h[19]]),
        };
        let class64 = h[4] == 2;
        // EM_X86_64 (amd64), EM_PPC64 big-endian (powerpc64), EM_MIPS
        // 64-bit (mips64): rc.d/ldconfig's `amd64|mips64|powerpc64`.
        let has_lib32_arch =
            machine == 62 || (machine == 21 && order == Order::Big) || (machine == 8 && class64);
        return Ok(Machine {
            order,
            has_lib32_arch,
        });
    }
    Ok(Machine {
        order: Order::Little,
        has_lib32_arch: true,
    })
}
