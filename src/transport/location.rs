//! Where an image is, as a user writes it: one type for every place a
//! command reads an image from or writes one to, parsed once.
//!
//! The grammar is skopeo's: a transport name, a colon, and what that
//! transport takes.
//!
//! - `docker://NAME[:TAG][@DIGEST]`: a registry repository
//!   ([`Location::Registry`]);
//! - `oci:DIR[:REF]`: an OCI layout directory ([`Location::Layout`]);
//! - `oci-archive:FILE[:REF]`: an OCI archive, `-` for standard input or
//!   output ([`Location::Archive`]);
//! - anything else is a name without a transport ([`Location::Named`]):
//!   the command says whether it is an image of the store, a registry
//!   reference, or either (`jbuild copy` looks in the store first).
//!
//! As in skopeo, a layout's or archive's path ends at the first `:` after
//! the transport name and everything after it is the reference, which may
//! itself hold `:` and `/` (`oci:/srv/images:localhost:5000/base:14.1`); so
//! the path cannot hold a `:`.
//!
//! Commands take a `Location` (clap parses it through [`FromStr`]), ask it
//! what it is ([`Location::is_layout`], [`Location::writes_stdout`]) and
//! [`open`](Location::open) it as a [`Transport`]; nothing else looks at
//! the text again.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::registry::reference::docker_name;
use super::{
    ArchiveTransport, LayoutTransport, RegistryOptions, RegistryRef, RegistryTransport, Transport,
    TransportError,
};
use crate::store::ImageName;

/// A place an image can be. See the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `docker://NAME`: a registry repository, the image NAME names
    /// (checked against docker's normalisation when parsed).
    Registry(ImageName),
    /// `oci:DIR[:REF]`: an OCI layout directory, and the image's reference
    /// there (a tag to write, or what to read; `None`: the only image, or
    /// the tag the command chooses).
    Layout {
        dir: PathBuf,
        reference: Option<String>,
    },
    /// `oci-archive:FILE[:REF]`: an OCI archive; `FILE` `-` is standard
    /// input (read) or output (written).
    Archive {
        file: PathBuf,
        reference: Option<String>,
    },
    /// A name written without a transport: an image of the store, or a
    /// registry reference, as the command decides
    /// ([`Location::registry_named`]).
    Named(String),
}

/// How [`Location::open`] reaches what it opens.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// How registries are reached (plain HTTP, CA certificates,
    /// credentials).
    pub registry: RegistryOptions,
    /// How much of an archive is read (the configuration's `[layers]`).
    pub limits: crate::layer::Limits,
}

impl FromStr for Location {
    type Err = TransportError;

    fn from_str(s: &str) -> Result<Location, TransportError> {
        if let Some(name) = docker_name(s) {
            let parsed = ImageName::parse(name)
                .and_then(|n| RegistryRef::from_name(&n).map(|_| n))
                .map_err(|e| TransportError::Invalid {
                    location: s.to_string(),
                    what: "the reference".into(),
                    reason: e.to_string(),
                })?;
            return Ok(Location::Registry(parsed));
        }
        let Some((kind @ ("oci" | "oci-archive"), rest)) = s.split_once(':') else {
            return Ok(Location::Named(s.to_string()));
        };
        let (path, reference) = match rest.split_once(':') {
            Some((p, r)) => (p, Some(r.to_string())),
            None => (rest, None),
        };
        if path.is_empty() {
            return Err(TransportError::InvalidLocation(s.to_string()));
        }
        if let Some(r) = &reference {
            if !crate::store::valid_ref_name(r) {
                return Err(TransportError::Invalid {
                    location: s.to_string(),
                    what: format!("reference `{r}`"),
                    reason: "use letters and digits joined by one of - . _ : @ + or by --, and / \
                             between parts"
                        .into(),
                });
            }
        }
        let path = PathBuf::from(path);
        Ok(match kind {
            "oci" => Location::Layout {
                dir: path,
                reference,
            },
            _ => Location::Archive {
                file: path,
                reference,
            },
        })
    }
}

impl fmt::Display for Location {
    /// The location as the user wrote it (a registry's name as parsed).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, path, reference) = match self {
            Location::Registry(name) => return write!(f, "docker://{name}"),
            Location::Named(s) => return f.write_str(s),
            Location::Layout { dir, reference } => ("oci", dir, reference),
            Location::Archive { file, reference } => ("oci-archive", file, reference),
        };
        write!(f, "{kind}:{}", path.display())?;
        if let Some(r) = reference {
            write!(f, ":{r}")?;
        }
        Ok(())
    }
}

impl Location {
    /// Whether this is an OCI layout or archive: a place that keeps
    /// images under tags of its own (`export`'s tag rule) and no
    /// signatures beside them.
    pub fn is_layout(&self) -> bool {
        matches!(self, Location::Layout { .. } | Location::Archive { .. })
    }

    /// Whether writing here writes to standard output, which then holds
    /// nothing else: `oci-archive:-`, or a path that is standard output
    /// itself (`oci-archive:/dev/stdout`).
    pub fn writes_stdout(&self) -> bool {
        match self {
            Location::Archive { file, .. } => crate::fsutil::output::is_standard_output(file),
            _ => false,
        }
    }

    /// A name without a transport taken as a registry reference (what
    /// `push`, `pull` and `copy`'s destination make of one); any other
    /// location as it is.
    pub fn registry_named(self) -> Result<Location, TransportError> {
        match self {
            Location::Named(s) => {
                match ImageName::parse(&s).and_then(|n| RegistryRef::from_name(&n).map(|_| n)) {
                    Ok(name) => Ok(Location::Registry(name)),
                    Err(problem) => Err(TransportError::NotRegistryReference { input: s, problem }),
                }
            }
            other => Ok(other),
        }
    }

    /// The location, when it names its transport; a name without one is
    /// refused (`export` and `import` read and write layouts and archives,
    /// and registries only when written `docker://`).
    pub fn explicit(self) -> Result<Location, TransportError> {
        match self {
            Location::Named(s) => Err(TransportError::InvalidLocation(s)),
            other => Ok(other),
        }
    }

    /// The registry reference, normalised as docker does (`alpine` is
    /// `docker.io/library/alpine:latest`), for a registry location.
    pub fn registry_ref(&self) -> Option<RegistryRef> {
        match self {
            // Checked when parsed: only the length can fail, and it did not.
            Location::Registry(name) => RegistryRef::from_name(name).ok(),
            _ => None,
        }
    }

    /// The image's reference at the location: a registry's tag or digest
    /// (the digest when both are written), a layout's or archive's REF.
    /// `None` for a layout or archive written without one, and for a
    /// name without a transport.
    pub fn reference(&self) -> Option<String> {
        match self {
            Location::Registry(_) => self.registry_ref().map(|r| r.reference()),
            Location::Layout { reference, .. } | Location::Archive { reference, .. } => {
                reference.clone()
            }
            Location::Named(_) => None,
        }
    }

    /// The tag an image written here gets when the location names one: a
    /// registry's tag (none when pinned by a digest alone), a layout's or
    /// archive's REF.
    pub fn tag(&self) -> Option<String> {
        match self {
            Location::Registry(_) => self.reference().filter(|r| !r.starts_with("sha256:")),
            _ => self.reference(),
        }
    }

    /// The file or directory of a layout or archive.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Location::Layout { dir, .. } => Some(dir),
            Location::Archive { file, .. } => Some(file),
            _ => None,
        }
    }

    /// The transport that reads and writes images here. A name without a
    /// transport is opened as a registry reference.
    pub fn open(&self, options: &OpenOptions) -> Result<Box<dyn Transport>, TransportError> {
        Ok(match self {
            Location::Named(_) => return self.clone().registry_named()?.open(options),
            Location::Registry(name) => {
                let r = RegistryRef::from_name(name).map_err(|e| TransportError::Invalid {
                    location: self.to_string(),
                    what: "the reference".into(),
                    reason: e.to_string(),
                })?;
                Box::new(RegistryTransport::new(r, options.registry.clone()))
            }
            Location::Layout { dir, .. } => Box::new(LayoutTransport::new(dir.clone())),
            Location::Archive { file, .. } => {
                Box::new(ArchiveTransport::new(file.clone()).with_limits(options.limits))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(s: &str) -> (Box<dyn Transport>, Option<String>) {
        let l: Location = s.parse().unwrap();
        (l.open(&OpenOptions::default()).unwrap(), l.reference())
    }

    #[test]
    fn parses_locations() {
        let (t, r) = open("oci:/srv/images:localhost:5000/jails/base:14.1");
        assert_eq!(t.describe(), "oci:/srv/images");
        assert_eq!(r.as_deref(), Some("localhost:5000/jails/base:14.1"));
        let (t, r) = open("oci-archive:out.tar");
        assert_eq!((t.describe().as_str(), r), ("oci-archive:out.tar", None));
        let (t, r) = open("docker://ghcr.io/a/b:1");
        assert_eq!(t.describe(), "docker://ghcr.io/a/b");
        assert_eq!(r.as_deref(), Some("1"));
        let (t, r) = open("docker://alpine");
        assert_eq!(t.describe(), "docker://docker.io/library/alpine");
        assert_eq!(r.as_deref(), Some("latest"));
        assert!("docker://Bad/Name".parse::<Location>().is_err());
        for bad in [
            "",
            "oci",
            "oci:",
            "tar:x",
            "dir:/x",
            "oci:/x:bad ref",
            "oci:/x:",
        ] {
            let parsed = bad.parse::<Location>().and_then(Location::explicit);
            assert!(parsed.is_err(), "{bad}");
        }
        // Without a transport: a name, the command's to place.
        for named in [
            "",
            "oci",
            "tar:x",
            "dir:/x",
            "web:1.0",
            "localhost:5000/web",
        ] {
            let l: Location = named.parse().unwrap();
            assert_eq!(l, Location::Named(named.to_string()), "{named}");
        }
        for bad in ["", "a//b", "Bad/Name"] {
            let l: Location = bad.parse().unwrap();
            assert!(l.open(&OpenOptions::default()).is_err(), "{bad}");
        }
    }

    #[test]
    fn says_what_it_is() {
        let l: Location = "oci-archive:-:v1".parse().unwrap();
        assert!(l.is_layout() && l.writes_stdout());
        assert_eq!(l.to_string(), "oci-archive:-:v1");
        let l: Location = "oci:/tmp/x".parse().unwrap();
        assert!(l.is_layout() && !l.writes_stdout());
        assert_eq!(l.to_string(), "oci:/tmp/x");
        let l: Location = "localhost:5000/web@sha256:".parse().unwrap();
        assert!(!l.is_layout());
        let d = format!("sha256:{}", "a".repeat(64));
        let l = format!("localhost:5000/web@{d}")
            .parse::<Location>()
            .unwrap()
            .registry_named()
            .unwrap();
        assert_eq!((l.reference(), l.tag()), (Some(d), None));
        let l = "docker://alpine:3".parse::<Location>().unwrap();
        assert_eq!(l.tag().as_deref(), Some("3"));
        let err = Location::Named("Not/A/Name".into())
            .registry_named()
            .unwrap_err();
        assert!(
            err.to_string().contains("not a registry reference"),
            "{err}"
        );
    }
}
