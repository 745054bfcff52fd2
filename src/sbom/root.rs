//! Reading a few files of an image's root straight from its layer blobs,
//! without unpacking anything: the image need not have snapshots, and
//! nothing is written but the copies asked for.
//!
//! A file's content is the one in the highest layer that has it. Going
//! down from the top layer, a layer decides a wanted path when it
//!
//! - holds the path itself: that entry is the file (a regular file is
//!   copied out; a link or anything else is refused, as a database copied
//!   through a link could be any file of the host's choosing);
//! - whites it out: `.wh.<name>` for the path or one of its directories,
//!   or an opaque marker `.wh..wh..opq` in one of its directories — the
//!   file is not in the root (unless this very layer also holds it);
//! - replaces one of its directories with something that is not a
//!   directory — the file is not in the root either.
//!
//! Layers are hostile input: the tar reader checks every header, and a
//! copy stops at the caller's byte limit.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

use tempfile::NamedTempFile;

use crate::image::LoadedImage;
use crate::layer::{self, header, LayerError, TarReader};
use crate::store::Store;

use super::SbomError;

/// What a layer walk found for one wanted path.
#[derive(Debug)]
pub enum Found {
    /// The file's content, copied into a temporary file (rewound), which
    /// is removed when dropped.
    File(NamedTempFile),
    /// The root has no such file.
    Absent,
}

/// The files `wanted` (paths inside the root, `/`-separated, without a
/// leading `/`, each with the most bytes it may have) as the image's root
/// has them; a file past its limit fails the walk with
/// [`SbomError::TooLarge`].
pub fn read_files(
    store: &Store,
    image: &LoadedImage,
    reference: &str,
    wanted: &[(&str, u64)],
) -> Result<BTreeMap<String, Found>, SbomError> {
    let mut decided: BTreeMap<String, Found> = BTreeMap::new();
    let layers = image.manifest.layers();
    for desc in layers.iter().rev() {
        let open: Vec<(&str, u64)> = wanted
            .iter()
            .copied()
            .filter(|(w, _)| !decided.contains_key(*w))
            .collect();
        if open.is_empty() {
            break;
        }
        let digest = crate::store::descriptor_digest(desc).map_err(|source| {
            SbomError::Image(crate::image::ImageError::Digest {
                image: reference.to_string(),
                source,
            })
        })?;
        let blob = store.open_blob(&digest)?;
        let layer_error = |source: LayerError| SbomError::Layer {
            image: reference.to_string(),
            layer: digest.clone(),
            source,
        };
        let stream = layer::decompress(desc.media_type().as_ref(), blob).map_err(layer_error)?;
        let verdicts = scan_layer(stream, &open, reference).map_err(|e| match e {
            Scan::Layer(source) => layer_error(source),
            Scan::Sbom(e) => e,
        })?;
        decided.extend(verdicts);
    }
    for (w, _) in wanted {
        decided.entry((*w).to_string()).or_insert(Found::Absent);
    }
    Ok(decided)
}

enum Scan {
    Layer(LayerError),
    Sbom(SbomError),
}

impl From<LayerError> for Scan {
    fn from(e: LayerError) -> Scan {
        Scan::Layer(e)
    }
}

/// What one layer says about each of `open`: only paths it decides.
fn scan_layer<R: Read>(
    stream: R,
    open: &[(&str, u64)],
    reference: &str,
) -> Result<BTreeMap<String, Found>, Scan> {
    let mut tar = TarReader::new(stream);
    let mut found: BTreeMap<String, Found> = BTreeMap::new();
    let mut hidden: Vec<&str> = Vec::new();
    while let Some(h) = tar.next()? {
        let Some(path) = normalize(&h.path) else {
            continue;
        };
        for &(want, max_bytes) in open {
            match relation(&path, want) {
                Relation::Same => {
                    if h.typeflag != header::REGULAR {
                        return Err(Scan::Sbom(SbomError::NotRegular {
                            image: reference.to_string(),
                            path: format!("/{want}"),
                        }));
                    }
                    let file = copy_out(&mut tar.content(), h.size, max_bytes, reference, want)?;
                    found.insert(want.to_string(), Found::File(file));
                }
                Relation::Ancestor if h.typeflag != header::DIRECTORY => hidden.push(want),
                Relation::Ancestor | Relation::Unrelated => {}
            }
            if whites_out(&path, want) {
                hidden.push(want);
            }
        }
    }
    for want in hidden {
        found.entry(want.to_string()).or_insert(Found::Absent);
    }
    Ok(found)
}

/// A tar path as a root-relative path: no leading `./` or `/`, no
/// trailing `/`; `None` for the root itself.
pub fn normalize(raw: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(raw);
    let parts: Vec<&str> = text
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

enum Relation {
    Same,
    /// The entry is a directory on the way to the wanted path.
    Ancestor,
    Unrelated,
}

fn relation(entry: &str, want: &str) -> Relation {
    if entry == want {
        Relation::Same
    } else if want.len() > entry.len()
        && want.starts_with(entry)
        && want.as_bytes()[entry.len()] == b'/'
    {
        Relation::Ancestor
    } else {
        Relation::Unrelated
    }
}

/// Whether the entry at `entry` is a whiteout that removes `want` from the
/// layers below: `.wh.<name>` for it or a directory above it, or an opaque
/// marker in a directory above it.
fn whites_out(entry: &str, want: &str) -> bool {
    let (dir, base) = match entry.rsplit_once('/') {
        Some((d, b)) => (d, b),
        None => ("", entry),
    };
    let inside = |d: &str| d.is_empty() || matches!(relation(d, want), Relation::Ancestor);
    if base == ".wh..wh..opq" {
        return inside(dir);
    }
    let Some(name) = base.strip_prefix(".wh.") else {
        return false;
    };
    let removed = if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    };
    !matches!(relation(&removed, want), Relation::Unrelated)
}

fn copy_out(
    content: &mut impl Read,
    size: u64,
    max_bytes: u64,
    reference: &str,
    want: &str,
) -> Result<NamedTempFile, Scan> {
    if size > max_bytes {
        return Err(Scan::Sbom(SbomError::TooLarge {
            image: reference.to_string(),
            path: format!("/{want}"),
            bytes: size,
            max: max_bytes,
        }));
    }
    let temp = |source: io::Error| Scan::Sbom(SbomError::Temp(source));
    let mut file = NamedTempFile::new().map_err(temp)?;
    let copied = io::copy(&mut content.take(size), &mut file)
        .map_err(|e| Scan::Layer(LayerError::Read(e)))?;
    if copied != size {
        return Err(Scan::Layer(LayerError::Truncated(format!(
            "inside the content of `{want}`"
        ))));
    }
    file.flush().map_err(temp)?;
    io::Seek::rewind(&mut file).map_err(temp)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::header::{encode, pad, Entry};

    const DB: &str = "var/db/pkg/local.sqlite";

    /// A tar of `(path, typeflag, content)` entries.
    fn tar(entries: &[(&str, u8, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (path, typeflag, content) in entries {
            encode(
                &Entry {
                    path: path.as_bytes(),
                    typeflag: *typeflag,
                    mode: 0o644,
                    size: content.len() as u64,
                    linkname: if *typeflag == header::SYMLINK {
                        b"/etc/passwd"
                    } else {
                        b""
                    },
                    ..Default::default()
                },
                &mut out,
            );
            out.extend_from_slice(content.as_bytes());
            pad(&mut out);
        }
        out.extend_from_slice(&[0u8; 1024]);
        out
    }

    /// What one layer says about the database: `None` (undecided), or
    /// `Some(content)` with `""` for absent.
    fn verdict(entries: &[(&str, u8, &str)]) -> Option<String> {
        let found = scan_layer(&tar(entries)[..], &[(DB, 1 << 20)], "img")
            .ok()
            .unwrap();
        found.into_values().next().map(|f| match f {
            Found::File(mut f) => {
                let mut s = String::new();
                f.read_to_string(&mut s).unwrap();
                s
            }
            Found::Absent => String::new(),
        })
    }

    #[test]
    fn a_layer_decides_by_the_file_a_whiteout_or_a_directory_replaced() {
        let (dir, file, link) = (header::DIRECTORY, header::REGULAR, header::SYMLINK);
        assert_eq!(
            verdict(&[("var/", dir, ""), (DB, file, "db")]).as_deref(),
            Some("db")
        );
        assert_eq!(
            verdict(&[("var/db/", dir, ""), ("var/db/other", file, "x")]),
            None
        );
        assert_eq!(
            verdict(&[("var/db/pkg/.wh.local.sqlite", file, "")]).as_deref(),
            Some("")
        );
        assert_eq!(
            verdict(&[("var/.wh..wh..opq", file, "")]).as_deref(),
            Some("")
        );
        // A directory on the way replaced by a link: what was below is gone.
        assert_eq!(verdict(&[("var/db", link, "")]).as_deref(), Some(""));
        // An opaque directory and a new file in the same layer: the new one.
        assert_eq!(
            verdict(&[("var/db/pkg/.wh..wh..opq", file, ""), (DB, file, "new")]).as_deref(),
            Some("new")
        );
    }

    #[test]
    fn the_file_as_a_link_or_past_the_limit_is_refused() {
        let link = tar(&[(DB, header::SYMLINK, "")]);
        assert!(matches!(
            scan_layer(&link[..], &[(DB, 1 << 20)], "img"),
            Err(Scan::Sbom(SbomError::NotRegular { .. }))
        ));
        let big = tar(&[(DB, header::REGULAR, "0123456789")]);
        assert!(matches!(
            scan_layer(&big[..], &[(DB, 9)], "img"),
            Err(Scan::Sbom(SbomError::TooLarge {
                bytes: 10,
                max: 9,
                ..
            }))
        ));
        assert!(scan_layer(&big[..], &[(DB, 10)], "img").is_ok());
    }

    #[test]
    fn whiteouts_of_the_file_or_a_directory_above_it_hide_it() {
        let want = "var/db/pkg/local.sqlite";
        assert!(whites_out("var/db/pkg/.wh.local.sqlite", want));
        assert!(whites_out("var/db/.wh.pkg", want));
        assert!(whites_out(".wh.var", want));
        assert!(whites_out("var/db/pkg/.wh..wh..opq", want));
        assert!(whites_out("var/.wh..wh..opq", want));
        assert!(!whites_out("var/db/pkg/.wh.local.sqlite-journal", want));
        assert!(!whites_out("var/db/.wh.pkgs", want));
        assert!(!whites_out("usr/.wh..wh..opq", want));
        assert!(!whites_out("var/db/pkg/local.sqlite", want));
    }

    #[test]
    fn tar_paths_are_compared_without_dot_slash_or_trailing_slash() {
        assert_eq!(normalize(b"./var/db/").as_deref(), Some("var/db"));
        assert_eq!(
            normalize(b"/bin/freebsd-version").as_deref(),
            Some("bin/freebsd-version")
        );
        assert_eq!(normalize(b"./"), None);
    }
}
