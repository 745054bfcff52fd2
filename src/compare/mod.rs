//! What changed between two images (`jbuild diff A B`): files added,
//! removed and changed (type, mode, owner, size, content, flags, link
//! target), and, where both images have a pkg database, packages added,
//! removed, upgraded and downgraded.
//!
//! Both roots are read from the layer blobs ([`tree`]), never unpacked:
//! the images need no snapshots, and a comparison writes nothing but a
//! temporary copy of each package database. Modification times are not
//! compared (a rebuild of the same tree differs in them unless
//! `SOURCE_DATE_EPOCH` pins them, and they are not what a reviewer asks
//! about); extended attributes are not either.

pub mod packages;
pub mod source;
pub mod tree;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::image::pull::FetchError;
use crate::image::{ImageError, Platform};
use crate::layer::LayerError;
use crate::sbom::DbLimits;
use crate::store::StoreError;

pub use packages::{PackageChange, Packages};
pub use source::Sources;
pub use tree::{Entry, Kind};

/// Why two images cannot be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error(transparent)]
    Find(StoreError),
    #[error(transparent)]
    Image(ImageError),
    #[error("cannot fetch `{image}`")]
    Fetch {
        image: String,
        #[source]
        source: FetchError,
    },
    #[error("`{image}` is in a registry, and this comparison reads only the store")]
    NoRegistry { image: String },
    #[error("cannot hold the store for the images fetched to compare")]
    Pin(#[source] StoreError),
    #[error("image `{image}`: cannot read its layers from the store")]
    Store {
        image: String,
        #[source]
        source: StoreError,
    },
    #[error("image `{image}`: cannot read layer {layer}")]
    Layer {
        image: String,
        layer: String,
        #[source]
        source: LayerError,
    },
    #[error(
        "image `{image}`: the hard link {path} names no file before it in the image \
         (the image is damaged or was made by a broken tool)"
    )]
    BadLink { image: String, path: String },
    #[error("image `{image}` has more than {max} paths; jbuild compares at most that many")]
    TooManyEntries { image: String, max: usize },
    #[error("image `{image}`: cannot read its package database")]
    Packages {
        image: String,
        #[source]
        source: Box<crate::sbom::SbomError>,
    },
    #[error(
        "image `{image}` has no pkg database (/var/db/pkg/local.sqlite): there are no \
         packages to compare (leave out --packages to compare its files)"
    )]
    NoPackages { image: String },
}

impl crate::blame::Blame for CompareError {
    /// A name that matches nothing, and an image whose content is not
    /// what it claims, are the user's; a damaged store is not.
    fn is_user_error(&self) -> bool {
        match self {
            CompareError::Find(e) => e.is_user_error(),
            CompareError::Image(e) => !e.is_malformed() && e.is_user_error(),
            CompareError::Packages { source, .. } => source.is_user_error(),
            CompareError::Fetch { source, .. } => source.user,
            CompareError::NoRegistry { .. } => true,
            CompareError::Pin(e) => e.is_user_error(),
            CompareError::BadLink { .. }
            | CompareError::TooManyEntries { .. }
            | CompareError::NoPackages { .. } => true,
            CompareError::Store { .. } | CompareError::Layer { .. } => false,
        }
    }
}

/// What to compare.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Only the packages (both images must have a pkg database).
    pub packages_only: bool,
}

/// How one path differs: the attribute, then its value in A and in B.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Field {
    pub field: &'static str,
    pub from: String,
    pub to: String,
}

/// A path in both images whose entry differs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Changed {
    pub path: String,
    pub fields: Vec<Field>,
}

/// The files part of a comparison, each list sorted by path (paths with a
/// leading `/`).
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Files {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<Changed>,
}

/// What changed from image A to image B.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    /// `None` with `--packages`.
    pub files: Option<Files>,
    /// `None` unless both images have a pkg database.
    pub packages: Option<Packages>,
    /// The images without a pkg database (named, so that "no package
    /// changes" is never read into a missing database).
    pub without_database: Vec<String>,
}

impl Comparison {
    /// Whether A and B differ in anything compared.
    pub fn differs(&self) -> bool {
        self.files
            .as_ref()
            .is_some_and(|f| !(f.added.is_empty() && f.removed.is_empty() && f.changed.is_empty()))
            || self.packages.as_ref().is_some_and(|p| !p.is_empty())
    }

    /// The table `jbuild diff` prints: one line a change, `A`/`D`/`C` as
    /// `docker diff` marks them, then the packages.
    pub fn table(&self) -> String {
        let mut out = String::new();
        if let Some(f) = &self.files {
            let mut lines: Vec<(&str, char, String)> = Vec::new();
            lines.extend(f.added.iter().map(|p| (p.as_str(), 'A', String::new())));
            lines.extend(f.removed.iter().map(|p| (p.as_str(), 'D', String::new())));
            lines.extend(f.changed.iter().map(|c| {
                let what: Vec<String> = c
                    .fields
                    .iter()
                    .map(|x| match x.field {
                        "content" => "content".to_string(),
                        _ => format!("{} {} → {}", x.field, x.from, x.to),
                    })
                    .collect();
                (c.path.as_str(), 'C', format!("  ({})", what.join(", ")))
            }));
            lines.sort_by(|x, y| x.0.cmp(y.0));
            for (path, mark, what) in lines {
                let _ = writeln!(out, "{mark} {path}{what}");
            }
        }
        if let Some(p) = &self.packages {
            for c in &p.changes {
                let _ = writeln!(out, "{}", c.line());
            }
        }
        out
    }
}

/// Compares the images `a` and `b`: each a name, digest or digest prefix
/// in the store, or a `docker://` reference fetched (not unpacked) from
/// the registry `sources` has ([`source`]); `platform` picks from an
/// index.
pub fn images(
    sources: &Sources<'_>,
    a: &str,
    b: &str,
    platform: &Platform,
    options: Options,
) -> Result<Comparison, CompareError> {
    let store = sources.store;
    // Dropped last: what it fetched is read until the comparison is done.
    let mut loading = source::Loading::new(sources, platform);
    let (ia, ib) = (loading.load(a)?, loading.load(b)?);
    let files = if options.packages_only {
        None
    } else {
        let ta = tree::root(store, &ia, a)?;
        let tb = tree::root(store, &ib, b)?;
        Some(files(&ta, &tb))
    };
    let limits = DbLimits::default();
    let da = packages::installed(store, &ia, a, &limits)?;
    let db = packages::installed(store, &ib, b, &limits)?;
    let mut without_database = Vec::new();
    if da.is_none() {
        without_database.push(a.to_string());
    }
    if db.is_none() {
        without_database.push(b.to_string());
    }
    if options.packages_only {
        if let Some(missing) = without_database.first() {
            return Err(CompareError::NoPackages {
                image: missing.clone(),
            });
        }
    }
    let packages = match (da, db) {
        (Some(x), Some(y)) => Some(packages::compare(&x, &y)),
        _ => None,
    };
    Ok(Comparison {
        a: a.to_string(),
        b: b.to_string(),
        files,
        packages,
        without_database,
    })
}

/// The files part: both maps walked side by side in path order.
pub fn files(a: &BTreeMap<String, Entry>, b: &BTreeMap<String, Entry>) -> Files {
    let mut out = Files::default();
    let mut ia = a.iter().peekable();
    let mut ib = b.iter().peekable();
    loop {
        match (ia.peek(), ib.peek()) {
            (None, None) => break,
            (Some((pa, _)), None) => {
                out.removed.push(format!("/{pa}"));
                ia.next();
            }
            (None, Some((pb, _))) => {
                out.added.push(format!("/{pb}"));
                ib.next();
            }
            (Some((pa, ea)), Some((pb, eb))) => match pa.cmp(pb) {
                std::cmp::Ordering::Less => {
                    out.removed.push(format!("/{pa}"));
                    ia.next();
                }
                std::cmp::Ordering::Greater => {
                    out.added.push(format!("/{pb}"));
                    ib.next();
                }
                std::cmp::Ordering::Equal => {
                    let fields = fields(ea, eb);
                    if !fields.is_empty() {
                        out.changed.push(Changed {
                            path: format!("/{pa}"),
                            fields,
                        });
                    }
                    ia.next();
                    ib.next();
                }
            },
        }
    }
    out
}

/// Every attribute in which `a` and `b` differ, in a fixed order.
fn fields(a: &Entry, b: &Entry) -> Vec<Field> {
    let mut out = Vec::new();
    let mut push = |field: &'static str, from: String, to: String| {
        if from != to {
            out.push(Field { field, from, to });
        }
    };
    push("type", a.kind.name().into(), b.kind.name().into());
    push("mode", format!("{:04o}", a.mode), format!("{:04o}", b.mode));
    push(
        "owner",
        format!("{}:{}", a.uid, a.gid),
        format!("{}:{}", b.uid, b.gid),
    );
    if a.kind == Kind::File && b.kind == Kind::File {
        push("size", a.size.to_string(), b.size.to_string());
        push("content", digest(a), digest(b));
    }
    push("target", opt(&a.target), opt(&b.target));
    let dev = |e: &Entry| {
        e.device
            .map(|(ma, mi)| format!("{ma},{mi}"))
            .unwrap_or_default()
    };
    push("device", dev(a), dev(b));
    push("flags", opt(&a.flags), opt(&b.flags));
    out
}

fn digest(e: &Entry) -> String {
    e.content
        .map(|d| format!("sha256:{}", hex::encode(d)))
        .unwrap_or_default()
}

fn opt(v: &Option<Box<str>>) -> String {
    v.as_deref().unwrap_or("").to_string()
}
