//! `jbuild images`: one row per entry of the store's index, with what
//! docker's `images` shows, and docker's `--filter`s.
//!
//! Sizes: `compressed` is the sum of the layer blobs as stored (what a
//! pull downloads); `unpacked` is the sum of the same layers' tar streams
//! uncompressed (what unpacking writes, tar headers included). The
//! manifest does not say the latter, so each layer blob is decompressed
//! once, the first time a listing needs it, and its size noted beside the
//! blob ([`Store::note_unpacked_size`]). A list's sizes count each layer of
//! its images once.

use crate::blame::Blame;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use oci_spec::image::{Descriptor, ImageConfiguration};

use super::{index, load_descriptor, media, Platform};
use crate::layer;
use crate::store::{descriptor_digest, ImageName, RefName, Store, StoreError};

/// One entry of the store, as `jbuild images` shows it.
#[derive(Debug, Clone)]
pub struct ImageRow {
    pub name: RefName,
    /// The image ID: the manifest (or list) digest, as `--iidfile` writes.
    pub digest: String,
    /// `os/arch`, or `list of N` for a manifest list.
    pub platform: String,
    /// The config's `created`, as written (RFC 3339).
    pub created: Option<String>,
    pub compressed: u64,
    /// `None` when a layer could not be read (the store is damaged:
    /// `jbuild check` says so).
    pub unpacked: Option<u64>,
    pub labels: BTreeMap<String, String>,
}

impl ImageRow {
    /// docker's REPOSITORY: the name without its tag (`<none>` unnamed).
    pub fn repository(&self) -> String {
        match &self.name {
            RefName::Image(n) => n.name(),
            RefName::Other(s) => s.clone(),
            RefName::Untagged => "<none>".into(),
        }
    }

    /// docker's TAG (`<none>` when the entry has no tag of its own).
    pub fn tag(&self) -> String {
        match &self.name {
            RefName::Image(n) => n.tag().to_string(),
            _ => "<none>".into(),
        }
    }

    /// docker's short image ID: the first 12 hex digits of the digest.
    pub fn short_id(&self) -> &str {
        let hex = self.digest.strip_prefix("sha256:").unwrap_or(&self.digest);
        &hex[..hex.len().min(12)]
    }

    pub fn created_time(&self) -> Option<SystemTime> {
        humantime::parse_rfc3339_weak(self.created.as_deref()?).ok()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(
        "--filter `{0}`: expected KEY=VALUE with KEY one of reference, label, dangling, before, since"
    )]
    BadFilter(String),
    #[error("--filter `{0}`: dangling is true or false")]
    BadDangling(String),
    #[error("--filter `{filter}`: `{pattern}` is not a valid pattern: {reason}")]
    BadPattern {
        filter: String,
        pattern: String,
        reason: String,
    },
    #[error("--filter `{filter}`: image `{image}` has no creation time to compare with")]
    NoCreated { filter: String, image: String },
}

impl Blame for ListError {
    fn is_user_error(&self) -> bool {
        match self {
            ListError::Store(e) => e.is_user_error(),
            _ => true,
        }
    }
}

/// docker's `--filter`s: a key given twice matches either value, keys
/// together must all match.
#[derive(Debug, Default)]
pub struct Filters {
    reference: Vec<globset::GlobMatcher>,
    label: Vec<(String, Option<String>)>,
    dangling: Option<bool>,
    before: Vec<SystemTime>,
    since: Vec<SystemTime>,
}

impl Filters {
    /// Parses `KEY=VALUE` filters; `before=` and `since=` name images the
    /// store resolves (as every command does).
    pub fn parse(store: &Store, filters: &[String]) -> Result<Filters, ListError> {
        let mut f = Filters::default();
        for text in filters {
            let (key, value) = text
                .split_once('=')
                .ok_or_else(|| ListError::BadFilter(text.clone()))?;
            match key {
                "reference" => {
                    let glob = globset::GlobBuilder::new(value)
                        .literal_separator(true)
                        .build()
                        .map_err(|e| ListError::BadPattern {
                            filter: text.clone(),
                            pattern: value.to_string(),
                            reason: e.kind().to_string(),
                        })?;
                    f.reference.push(glob.compile_matcher());
                }
                "label" => f.label.push(match value.split_once('=') {
                    Some((k, v)) => (k.to_string(), Some(v.to_string())),
                    None => (value.to_string(), None),
                }),
                "dangling" => {
                    f.dangling = Some(match value {
                        "true" | "1" => true,
                        "false" | "0" => false,
                        _ => return Err(ListError::BadDangling(text.clone())),
                    })
                }
                "before" | "since" => {
                    let desc = store.find(value)?.descriptor;
                    let time = created_of(store, &desc)
                        .and_then(|c| humantime::parse_rfc3339_weak(&c).ok());
                    let time = time.ok_or_else(|| ListError::NoCreated {
                        filter: text.clone(),
                        image: value.to_string(),
                    })?;
                    if key == "before" {
                        f.before.push(time);
                    } else {
                        f.since.push(time);
                    }
                }
                _ => return Err(ListError::BadFilter(text.clone())),
            }
        }
        Ok(f)
    }

    /// Whether `row` passes every filter.
    pub fn matches(&self, row: &ImageRow) -> bool {
        let created = row.created_time();
        (self.reference.is_empty() || self.reference.iter().any(|g| reference_matches(g, row)))
            && (self.label.is_empty()
                || self
                    .label
                    .iter()
                    .any(|(k, v)| match (row.labels.get(k), v) {
                        (Some(_), None) => true,
                        (Some(have), Some(want)) => have == want,
                        (None, _) => false,
                    }))
            && self
                .dangling
                .is_none_or(|d| d == matches!(row.name, RefName::Untagged))
            && (self.before.is_empty()
                || created.is_some_and(|c| self.before.iter().any(|b| c < *b)))
            && (self.since.is_empty() || created.is_some_and(|c| self.since.iter().any(|s| c > *s)))
    }
}

/// docker matches a reference pattern against the name as typed and in its
/// familiar form (`alpine` for `docker.io/library/alpine`), with or
/// without the tag.
fn reference_matches(glob: &globset::GlobMatcher, row: &ImageRow) -> bool {
    let forms: Vec<String> = match &row.name {
        RefName::Image(n) => {
            let familiar = familiar(n);
            vec![
                n.name(),
                n.tagged(),
                familiar.clone(),
                format!("{familiar}:{}", n.tag()),
            ]
        }
        RefName::Other(s) => vec![s.clone()],
        RefName::Untagged => return false,
    };
    forms.iter().any(|f| glob.is_match(f))
}

/// docker's familiar name: `docker.io/library/` and `docker.io/` left out.
fn familiar(n: &ImageName) -> String {
    let repo = n.docker_repository();
    if n.docker_registry() != crate::store::name::DOCKER_HUB {
        return format!("{}/{repo}", n.docker_registry());
    }
    repo.strip_prefix("library/")
        .filter(|r| !r.contains('/'))
        .unwrap_or(&repo)
        .to_string()
}

/// Every entry of the store that passes `filters`, in index order.
pub fn list(store: &Store, filters: &Filters) -> Result<Vec<ImageRow>, ListError> {
    let mut rows = Vec::new();
    for (name, desc) in store.list()? {
        // A signature or attestation kept beside an image is not an image.
        if matches!(&name, RefName::Image(n) if media::artifact_tag(n.tag()).is_some()) {
            continue;
        }
        let row = row(store, name, &desc);
        if filters.matches(&row) {
            rows.push(row);
        }
    }
    Ok(rows)
}

fn row(store: &Store, name: RefName, desc: &Descriptor) -> ImageRow {
    let digest = desc.digest().to_string();
    let any = Platform::default_for_host();
    let images: Vec<super::LoadedImage> = if media::is_index(desc.media_type()) {
        index::read_desc(store, &name.to_string(), desc)
            .map(|i| {
                i.manifests()
                    .iter()
                    .filter_map(|m| load_descriptor(store, m, &any, &digest).ok())
                    .collect()
            })
            .unwrap_or_default()
    } else {
        load_descriptor(store, desc, &any, &digest)
            .into_iter()
            .collect()
    };
    let platform = if media::is_index(desc.media_type()) {
        match index::read_desc(store, &name.to_string(), desc) {
            Ok(i) => format!("list of {}", i.manifests().len()),
            Err(_) => "(index)".to_string(),
        }
    } else {
        match images.first() {
            Some(img) => format!("{}/{}", img.config.os(), img.config.architecture()),
            None => "(index)".to_string(),
        }
    };
    // Each layer once, however many images of a list share it.
    let layers: BTreeMap<String, Descriptor> = images
        .iter()
        .flat_map(|img| img.manifest.layers().clone())
        .map(|l| (l.digest().to_string(), l))
        .collect();
    let compressed = layers.values().map(|l| l.size()).sum();
    let unpacked = layers
        .values()
        .map(|l| unpacked_size(store, l))
        .sum::<Option<u64>>();
    // A list: its host platform's image, else its first.
    let config = images
        .iter()
        .find(|i| {
            Platform::parse(&format!("{}/{}", i.config.os(), i.config.architecture()))
                .is_ok_and(|p| p == any)
        })
        .or(images.first())
        .map(|i| &i.config);
    ImageRow {
        name,
        digest,
        platform,
        created: config.and_then(|c| c.created().clone()),
        compressed,
        unpacked,
        labels: config.map(labels).unwrap_or_default(),
    }
}

fn labels(c: &ImageConfiguration) -> BTreeMap<String, String> {
    c.config()
        .as_ref()
        .and_then(|c| c.labels().clone())
        .map(|l| l.into_iter().collect())
        .unwrap_or_default()
}

/// The config `created` of the image `desc` (a list: its host platform's).
fn created_of(store: &Store, desc: &Descriptor) -> Option<String> {
    row(store, RefName::Untagged, desc).created
}

/// The layer's uncompressed size: noted, or counted now and noted.
fn unpacked_size(store: &Store, layer: &Descriptor) -> Option<u64> {
    let digest = descriptor_digest(layer).ok()?;
    if let Some(n) = store.unpacked_size(&digest) {
        return Some(n);
    }
    let blob = store.open_blob(&digest).ok()?;
    let n = layer::uncompressed_size(layer.media_type().as_ref(), blob).ok()?;
    if let Err(e) = store.note_unpacked_size(&digest, n) {
        tracing::debug!("not noting the unpacked size of {digest}: {e}");
    }
    Some(n)
}

/// docker's "2 weeks ago" (go-units `HumanDuration`, then " ago"):
/// how long before `now` the time `then` was.
pub fn since(then: SystemTime, now: SystemTime) -> String {
    let d = now.duration_since(then).unwrap_or(Duration::ZERO);
    let secs = d.as_secs();
    let ago = |s: String| format!("{s} ago");
    if secs < 1 {
        return ago("Less than a second".into());
    }
    if secs == 1 {
        return ago("1 second".into());
    }
    if secs < 60 {
        return ago(format!("{secs} seconds"));
    }
    let minutes = secs / 60;
    if minutes == 1 {
        return ago("About a minute".into());
    }
    if minutes < 60 {
        return ago(format!("{minutes} minutes"));
    }
    let hours = (d.as_secs_f64() / 3600.0 + 0.5) as u64;
    ago(match hours {
        1 => "About an hour".into(),
        h if h < 48 => format!("{h} hours"),
        h if h < 24 * 7 * 2 => format!("{} days", h / 24),
        h if h < 24 * 30 * 2 => format!("{} weeks", h / 24 / 7),
        h if h < 24 * 365 * 2 => format!("{} months", h / 24 / 30),
        _ => format!("{} years", secs / 3600 / 24 / 365),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_reads_as_docker() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let at = |s: u64| now - Duration::from_secs(s);
        assert_eq!(since(now, now), "Less than a second ago");
        assert_eq!(since(at(30), now), "30 seconds ago");
        assert_eq!(since(at(90), now), "About a minute ago");
        assert_eq!(since(at(3600), now), "About an hour ago");
        assert_eq!(since(at(5 * 3600), now), "5 hours ago");
        assert_eq!(since(at(3 * 86400), now), "3 days ago");
        assert_eq!(since(at(15 * 86400), now), "2 weeks ago");
        assert_eq!(since(at(90 * 86400), now), "3 months ago");
        assert_eq!(since(SystemTime::UNIX_EPOCH, now), "57 years ago");
    }
}
