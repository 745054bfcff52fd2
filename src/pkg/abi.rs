//! The ABI pkg(8) chooses packages by: `FreeBSD:14:amd64`, and the
//! `__FreeBSD_version` (OSVERSION) beside it.
//!
//! pkg reads both from the image, never from the machine it runs on
//! (`libpkg/pkg_abi.c`, `pkg_abi_from_file`): the ELF note
//! `NT_FREEBSD_ABI_TAG` of `ROOT/usr/bin/uname`, else of `ROOT/bin/sh`,
//! gives OSVERSION (`major = v / 100000`, `minor = v / 1000 % 100`), and
//! the ELF header gives the architecture. jbuild does the same, and then
//! holds the result against the build's platform: an `arm64` build over an
//! `amd64` userland is a mistake to report, not a choice to make silently.
//! A root without either program but with `/bin/freebsd-version` (what
//! jbuild's SBOM reads) gives the release's major and minor; the
//! architecture is then the platform's alone.
//!
//! The files are opened through [`crate::fsutil::resolve_in_root`], so a
//! symlink in the image cannot send the read to the host, and only the
//! ELF header, the program headers and the note segments are read, each
//! bounded.

use crate::blame::Blame;
use std::fmt;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The programs pkg reads the ABI from, in its order.
pub const ABI_FILES: [&str; 2] = ["usr/bin/uname", "bin/sh"];
/// The release script jbuild falls back to (see the module docs).
pub const FREEBSD_VERSION: &str = "bin/freebsd-version";

/// A FreeBSD ABI as pkg writes it, and the OSVERSION it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abi {
    pub major: u32,
    pub minor: u32,
    /// pkg's architecture name: `amd64`, `aarch64`, `armv7`, `i386`,
    /// `powerpc64`, `powerpc64le`, `riscv64`.
    pub arch: String,
    /// `__FreeBSD_version` (`1403000`); from freebsd-version(1) it is the
    /// release's `major * 100000 + minor * 1000`.
    pub osversion: u32,
}

impl fmt::Display for Abi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FreeBSD:{}:{}", self.major, self.arch)
    }
}

/// Why the ABI of a root is not known.
#[derive(Debug, thiserror::Error)]
pub enum AbiError {
    #[error(
        "the root {} has none of /usr/bin/uname, /bin/sh or /bin/freebsd-version to read \
         its FreeBSD version from: is it a FreeBSD root?",
        root.display()
    )]
    NoUserland { root: PathBuf },
    #[error("{}: {reason}", path.display())]
    NotFreeBsdElf { path: PathBuf, reason: String },
    #[error(
        "the root's userland is {found} ({}), but the build is for {platform}: \
         build with --platform freebsd/{} or use a base for {platform}",
        path.display(), oci_arch(found)
    )]
    ArchMismatch {
        path: PathBuf,
        found: String,
        platform: String,
    },
    #[error("the platform architecture `{0}` has no FreeBSD package ABI")]
    UnknownPlatform(String),
    #[error("reading {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Blame for AbiError {
    /// A root that is not a FreeBSD root, or one of another architecture
    /// than asked, is the recipe's; a read that fails is the machine's.
    fn is_user_error(&self) -> bool {
        !matches!(self, AbiError::Read { .. })
    }
}

/// pkg's architecture name for an OCI architecture (`arm64` → `aarch64`).
pub fn pkg_arch(oci: &str) -> Option<&'static str> {
    Some(match oci {
        "amd64" => "amd64",
        "arm64" => "aarch64",
        "386" => "i386",
        "arm" => "armv7",
        "ppc64" => "powerpc64",
        "ppc64le" => "powerpc64le",
        "riscv64" => "riscv64",
        _ => return None,
    })
}

fn oci_arch(pkg: &str) -> &str {
    match pkg {
        "aarch64" => "arm64",
        "i386" => "386",
        "armv7" => "arm",
        "powerpc64" => "ppc64",
        "powerpc64le" => "ppc64le",
        other => other,
    }
}

/// The ABI of the FreeBSD root at `root`, built for the OCI architecture
/// `platform_arch` (see the module docs).
pub fn of_root(root: &Path, platform_arch: &str) -> Result<Abi, AbiError> {
    let want = pkg_arch(platform_arch)
        .ok_or_else(|| AbiError::UnknownPlatform(platform_arch.to_string()))?;
    for rel in ABI_FILES {
        let path =
            crate::fsutil::resolve_in_root(root, Path::new(rel), true).map_err(|source| {
                AbiError::Read {
                    path: root.join(rel),
                    source,
                }
            })?;
        let mut file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(source) => return Err(AbiError::Read { path, source }),
        };
        if !file.metadata().map(|m| m.is_file()).unwrap_or(false) {
            continue;
        }
        let (arch, osversion) = elf_abi(&mut file).map_err(|e| match e {
            ElfProblem::Io(source) => AbiError::Read {
                path: path.clone(),
                source,
            },
            ElfProblem::Not(reason) => AbiError::NotFreeBsdElf {
                path: PathBuf::from("/").join(rel),
                reason,
            },
        })?;
        if arch != want {
            return Err(AbiError::ArchMismatch {
                path: PathBuf::from("/").join(rel),
                found: arch.to_string(),
                platform: format!("freebsd/{platform_arch}"),
            });
        }
        return Ok(Abi {
            major: osversion / 100_000,
            minor: osversion / 1000 % 100,
            arch: arch.to_string(),
            osversion,
        });
    }
    let path = crate::fsutil::resolve_in_root(root, Path::new(FREEBSD_VERSION), true).map_err(
        |source| AbiError::Read {
            path: root.join(FREEBSD_VERSION),
            source,
        },
    )?;
    let text = match File::open(&path) {
        Ok(f) => {
            let mut s = String::new();
            f.take(64 * 1024)
                .read_to_string(&mut s)
                .map_err(|source| AbiError::Read {
                    path: path.clone(),
                    source,
                })?;
            s
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(AbiError::NoUserland {
                root: root.to_path_buf(),
            })
        }
        Err(source) => return Err(AbiError::Read { path, source }),
    };
    let (major, minor) = userland_release(&text).ok_or_else(|| AbiError::NotFreeBsdElf {
        path: PathBuf::from("/").join(FREEBSD_VERSION),
        reason: "no USERLAND_VERSION=\"<major>.<minor>-...\" line".into(),
    })?;
    Ok(Abi {
        major,
        minor,
        arch: want.to_string(),
        osversion: major * 100_000 + minor * 1000,
    })
}

/// `USERLAND_VERSION="14.3-RELEASE-p2"` → (14, 3).
fn userland_release(script: &str) -> Option<(u32, u32)> {
    let value = script.lines().find_map(|l| {
        l.trim()
            .strip_prefix("USERLAND_VERSION=")
            .map(|v| v.trim().trim_matches('"').trim_matches('\''))
    })?;
    let version = value.split('-').next()?;
    let (major, minor) = version.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

enum ElfProblem {
    Io(io::Error),
    Not(String),
}

impl From<io::Error> for ElfProblem {
    fn from(e: io::Error) -> Self {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            ElfProblem::Not("the ELF file ends early".into())
        } else {
            ElfProblem::Io(e)
        }
    }
}

const NT_FREEBSD_ABI_TAG: u32 = 1;
const PT_NOTE: u32 = 4;
/// The most program headers read, and bytes of one note segment.
const MAX_PHDRS: usize = 64;
const MAX_NOTE: u64 = 64 * 1024;

/// pkg's architecture and the OSVERSION of a FreeBSD ELF file.
fn elf_abi(f: &mut File) -> Result<(&'static str, u32), ElfProblem> {
    let not = |r: &str| ElfProblem::Not(r.to_string());
    let mut ident = [0u8; 64];
    f.read_exact(&mut ident[..52])?;
    if &ident[..4] != b"\x7fELF" {
        return Err(not("not an ELF file"));
    }
    let wide = match ident[4] {
        1 => false,
        2 => true,
        _ => return Err(not("an ELF file of unknown class")),
    };
    let le = match ident[5] {
        1 => true,
        2 => false,
        _ => return Err(not("an ELF file of unknown byte order")),
    };
    if wide {
        f.read_exact(&mut ident[52..64])?;
    }
    let u16_at = |b: &[u8], o: usize| {
        let v = [b[o], b[o + 1]];
        if le {
            u16::from_le_bytes(v)
        } else {
            u16::from_be_bytes(v)
        }
    };
    let u32_at = |b: &[u8], o: usize| {
        let v = [b[o], b[o + 1], b[o + 2], b[o + 3]];
        if le {
            u32::from_le_bytes(v)
        } else {
            u32::from_be_bytes(v)
        }
    };
    let u64_at = |b: &[u8], o: usize| {
        if wide {
            let lo = u32_at(b, o) as u64;
            let hi = u32_at(b, o + 4) as u64;
            if le {
                lo | hi << 32
            } else {
                hi | lo << 32
            }
        } else {
            u32_at(b, o) as u64
        }
    };
    let machine = u16_at(&ident, 18);
    let flags = u32_at(&ident, if wide { 48 } else { 36 });
    let arch = match (machine, wide, le) {
        (62, true, _) => "amd64",
        (3, false, _) => "i386",
        (183, true, _) => "aarch64",
        // EF_ARM_VFP_FLOAT (0x400): FreeBSD's armv7 is hard-float; the
        // soft-float armv6 ABI is gone from the supported releases.
        (40, false, true) if flags & 0x400 != 0 => "armv7",
        (21, true, true) => "powerpc64le",
        (21, true, false) => "powerpc64",
        (243, true, _) => "riscv64",
        _ => {
            return Err(not(&format!(
                "ELF machine {machine} is no FreeBSD package ABI"
            )))
        }
    };
    let (phoff, phentsize, phnum) = if wide {
        (u64_at(&ident, 32), u16_at(&ident, 54), u16_at(&ident, 56))
    } else {
        (u64_at(&ident, 28), u16_at(&ident, 42), u16_at(&ident, 44))
    };
    let (phentsize, phnum) = (phentsize as usize, phnum as usize);
    if phnum > MAX_PHDRS || phentsize < if wide { 56 } else { 32 } || phentsize > 256 {
        return Err(not("unexpected program headers"));
    }
    f.seek(SeekFrom::Start(phoff))?;
    let mut phdrs = vec![0u8; phentsize * phnum];
    f.read_exact(&mut phdrs)?;
    for ph in phdrs.chunks(phentsize) {
        if u32_at(ph, 0) != PT_NOTE {
            continue;
        }
        let (offset, size) = if wide {
            (u64_at(ph, 8), u64_at(ph, 32))
        } else {
            (u64_at(ph, 4), u64_at(ph, 16))
        };
        if size > MAX_NOTE {
            continue;
        }
        f.seek(SeekFrom::Start(offset))?;
        let mut notes = vec![0u8; size as usize];
        f.read_exact(&mut notes)?;
        let mut at = 0;
        while at + 12 <= notes.len() {
            let namesz = u32_at(&notes, at) as usize;
            let descsz = u32_at(&notes, at + 4) as usize;
            let kind = u32_at(&notes, at + 8);
            let name_at = at + 12;
            let desc_at = name_at + namesz.div_ceil(4) * 4;
            let end = desc_at + descsz.div_ceil(4) * 4;
            if end > notes.len() {
                break;
            }
            let name = &notes[name_at..name_at + namesz];
            if name == b"FreeBSD\0" && kind == NT_FREEBSD_ABI_TAG && descsz == 4 {
                return Ok((arch, u32_at(&notes, desc_at)));
            }
            at = end;
        }
    }
    Err(not(
        "no FreeBSD ABI note (NT_FREEBSD_ABI_TAG): not a FreeBSD program",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_script_gives_major_and_minor() {
        let s = "#!/bin/sh\nUSERLAND_VERSION=\"14.3-RELEASE-p2\"\n";
        assert_eq!(userland_release(s), Some((14, 3)));
        assert_eq!(userland_release("nothing"), None);
    }

    #[test]
    fn oci_names_map_to_pkg_names() {
        assert_eq!(pkg_arch("arm64"), Some("aarch64"));
        assert_eq!(pkg_arch("s390x"), None);
        let abi = Abi {
            major: 14,
            minor: 3,
            arch: "amd64".into(),
            osversion: 1_403_000,
        };
        assert_eq!(abi.to_string(), "FreeBSD:14:amd64");
    }
}
