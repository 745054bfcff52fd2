//! `certctl rehash` without FreeBSD (issue 32): the links OpenSSL finds
//! trusted certificates by, `/etc/ssl/certs/<subject hash>.<n>`, and the
//! untrusted ones in `/etc/ssl/untrusted`, as the image's own certctl(8)
//! makes them. `FreeBSD-caroot` and `ca_root_nss` run it after install
//! (`[ -x /usr/sbin/certctl ] && env DESTDIR=${PKG_ROOTDIR}
//! /usr/sbin/certctl rehash`).
//!
//! certctl is a shell script in FreeBSD 14 and a program in 15, and they
//! write different trees; jbuild tells them apart from the image's
//! `/usr/sbin/certctl` itself: a `#!` script is read for what that
//! version of the script does ([`script`]: hash-named links to the source
//! files, relative symlinks or hard links), an ELF file is the program
//! ([`program`]: PEM copies and the `/etc/ssl/cert.pem` bundle). An image
//! without certctl gets the program's tree when its `/bin/freebsd-version`
//! says 15 or later, else the tree of 14's first script (relative
//! symlinks to the `*.pem`, `*.crt`, `*.cer`, `*.crl` files).
//!
//! The subject hash is OpenSSL's `X509_NAME_hash_ex`, computed by
//! jbuild's own code ([`name`]); certificates are read from PEM with a
//! bounded DER reader ([`der`]); files, certificates and directory depth
//! are bounded ([`store`]). Source and destination directories that lead
//! out of the root on the host are refused; files in them are followed
//! as the jail follows them.

pub mod der;
pub mod name;
pub mod program;
pub mod script;
pub mod store;

use std::io;
use std::path::{Path, PathBuf};

use crate::pkg::script::{CommandError, Io};

/// `user.localbase`'s default.
pub const LOCALBASE: &str = "/usr/local";
const CERTCTL: &str = "/usr/sbin/certctl";

/// Why certctl could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum CertsError {
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
    #[error("certctl rehash: {0} in the image's certificate directories")]
    TooMany(String),
    #[error("`certctl {0}` is not a command jbuild carries out (only `certctl rehash` is)")]
    Unsupported(String),
}

impl crate::blame::Blame for CertsError {
    fn is_user_error(&self) -> bool {
        match self {
            CertsError::Read { source, .. } => crate::fsutil::path_at_fault(source),
            CertsError::Write { .. } => false,
            _ => true,
        }
    }
}

impl From<CertsError> for CommandError {
    fn from(e: CertsError) -> Self {
        match e {
            CertsError::Hostile { path, why } => CommandError::Hostile { path, why },
            CertsError::Write { path, source } => CommandError::Io { path, source },
            CertsError::TooMany(what) => CommandError::Limit { what },
            CertsError::Unsupported(verb) => CommandError::Unknown {
                command: format!("certctl {verb}"),
            },
            other => CommandError::Other(Box::new(other)),
        }
    }
}

/// Which certctl the image has.
#[derive(Debug, Clone)]
pub enum Flavor {
    Script(script::Script),
    Program,
}

/// The image's certctl (see the module docs).
pub fn flavor(root: &Path) -> Result<Flavor, CertsError> {
    let host = store::in_root(root, CERTCTL)?;
    if let Some(bytes) = store::read(&host) {
        if bytes.starts_with(b"#!") {
            return Ok(Flavor::Script(script::Script::read(
                &String::from_utf8_lossy(&bytes),
            )));
        }
        if bytes.starts_with(b"\x7fELF") {
            return Ok(Flavor::Program);
        }
    }
    let version = store::read(&store::in_root(root, "/bin/freebsd-version")?).unwrap_or_default();
    let major = String::from_utf8_lossy(&version)
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("USERLAND_VERSION=")
                .map(str::to_string)
        })
        .and_then(|v| v.trim_matches('"').split('.').next()?.parse::<u32>().ok());
    Ok(match major {
        Some(m) if m >= 15 => Flavor::Program,
        _ => Flavor::Script(script::Script::read("")),
    })
}

/// `certctl rehash` with the image's certctl (for the installer).
/// Returns certctl's messages, one a line.
pub fn rehash(root: &Path) -> Result<Vec<String>, CertsError> {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    match flavor(root)? {
        Flavor::Script(s) => {
            s.rehash(root, "", "", &mut out, &mut err)?;
        }
        Flavor::Program => program::rehash(root, &program_defaults(), &mut err)?,
    }
    Ok(String::from_utf8_lossy(&err)
        .lines()
        .map(str::to_string)
        .collect())
}

fn program_defaults() -> program::Options {
    program::Options {
        localbase: LOCALBASE.into(),
        ..Default::default()
    }
}

/// `certctl ARGS` in the image at `root`: `rehash` with the options of
/// the image's certctl (`-D destdir`, `-d distbase`, `-v`; the program's
/// `-B`, `-L localbase`; `-n`, `-U`, `-M`, `-c`, `-l`, `-g`, `-o`
/// accepted). The listing and trust commands are refused by name.
pub fn certctl(root: &Path, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
    let flavor = flavor(root)?;
    let mut o = program_defaults();
    let mut i = 0;
    let mut dryrun = false;
    while let Some(a) = args.get(i) {
        if a == "--" {
            i += 1;
            break;
        }
        if !a.starts_with('-') || a == "-" {
            break;
        }
        let mut chars = a[1..].char_indices();
        while let Some((at, c)) = chars.next() {
            let takes = matches!(c, 'D' | 'd' | 'M' | 'L' | 'g' | 'o');
            let value = if takes {
                let inline = &a[1 + at + 1..];
                if inline.is_empty() {
                    i += 1;
                    match args.get(i) {
                        Some(v) => v.clone(),
                        None => return Ok(usage(io, &flavor)),
                    }
                } else {
                    inline.to_string()
                }
            } else {
                String::new()
            };
            match c {
                'D' => o.destdir = value.trim_end_matches('/').to_string(),
                'd' => o.distbase = value.trim_end_matches('/').to_string(),
                'L' => o.localbase = value,
                'B' => o.nobundle = true,
                'v' => o.verbose = true,
                'n' => dryrun = true,
                'M' | 'g' | 'o' | 'U' | 'c' | 'l' => {}
                _ => return Ok(usage(io, &flavor)),
            }
            if takes {
                break;
            }
        }
        i += 1;
    }
    match args.get(i).map(String::as_str) {
        Some("rehash") if args.len() == i + 1 => {}
        Some(
            other @ ("list" | "untrusted" | "blacklisted" | "trust" | "untrust" | "blacklist"
            | "unblacklist"),
        ) => return Err(CertsError::Unsupported(other.to_string()).into()),
        _ => return Ok(usage(io, &flavor)),
    }
    if dryrun {
        return Ok(0);
    }
    match flavor {
        Flavor::Script(s) => {
            let errors = s.rehash(root, &o.destdir, &o.distbase, io.stdout, io.stderr)?;
            // The script exits with its last command's status; errors
            // are reported, not fatal.
            let _ = errors;
            Ok(0)
        }
        Flavor::Program => {
            program::rehash(root, &o, io.stderr)?;
            Ok(0)
        }
    }
}

fn usage(io: &mut Io<'_>, flavor: &Flavor) -> i32 {
    use std::io::Write;
    let _ = writeln!(
        io.stderr,
        "usage: certctl [-BnUv] [-D destdir] [-d distbase] [-M metalog] rehash"
    );
    match flavor {
        Flavor::Script(_) => 64,
        Flavor::Program => 1,
    }
}

/// `mkdir -p` with mode 0755, as both versions make their directories.
pub(crate) fn make_dir(host: &Path, shown: &str) -> Result<(), CertsError> {
    use std::os::unix::fs::DirBuilderExt;
    if host.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(host)
        .map_err(|source| CertsError::Write {
            path: shown.into(),
            source,
        })
}
