//! Crafted layers for `tests/it/pull/hostile.rs`: tar streams written header by
//! header (the tests' own independent writer, `tests/support/tar.rs`, and raw
//! bytes where a field must be broken), compressed or not, and images made
//! of them, uploaded to a registry.
#![allow(dead_code)]

pub mod accepted;
pub mod archive;
pub mod world;

use std::collections::HashMap;
use std::io::Write;

use crate::support::tar::{pax_records, Fields, Header};
use flate2::write::GzEncoder;
use jbuild::digest::Digest;
use jbuild::store::{canonical_json, oci_digest};
use oci_spec::image::{
    Arch, ConfigBuilder, Descriptor, ImageConfigurationBuilder, ImageManifestBuilder, MediaType,
    Os, RootFsBuilder,
};

pub const TAR: &str = "application/vnd.oci.image.layer.v1.tar";
pub const GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";

/// A tar stream, one entry at a time. Names are written into the header
/// byte for byte (up to 100 bytes; longer ones need [`Tar::pax`] or
/// [`Tar::gnu_long_name`]), whatever they say.
#[derive(Default, Clone)]
pub struct Tar {
    pub bytes: Vec<u8>,
}

/// One header's fields.
pub struct Head<'a> {
    pub name: &'a [u8],
    pub kind: u8,
    pub mode: u32,
    pub size: u64,
    pub link: &'a [u8],
    pub dev: (u32, u32),
}

impl Default for Head<'_> {
    fn default() -> Self {
        Head {
            name: b"",
            kind: b'0',
            mode: 0o644,
            size: 0,
            link: b"",
            dev: (0, 0),
        }
    }
}

/// A ustar header block for `h`, with a valid checksum.
pub fn header(h: &Head<'_>) -> Header {
    Header::new(&Fields {
        name: h.name,
        kind: h.kind,
        mode: h.mode,
        size: h.size,
        mtime: 1_600_000_000,
        link: h.link,
        dev: h.dev,
        ..Fields::default()
    })
}

impl Tar {
    pub fn new() -> Tar {
        Tar::default()
    }

    /// A header, then `content` padded to whole blocks.
    pub fn entry(mut self, h: Head<'_>, content: &[u8]) -> Tar {
        let h = Head {
            size: content.len() as u64,
            ..h
        };
        self.bytes.extend_from_slice(header(&h).as_bytes());
        self.bytes.extend_from_slice(content);
        self.pad()
    }

    /// Raw bytes appended as they are (a hand-broken header, say).
    pub fn raw(mut self, bytes: &[u8]) -> Tar {
        self.bytes.extend_from_slice(bytes);
        self
    }

    fn pad(mut self) -> Tar {
        self.bytes.resize(self.bytes.len().div_ceil(512) * 512, 0);
        self
    }

    pub fn file(self, name: &[u8], content: &[u8]) -> Tar {
        self.entry(
            Head {
                name,
                ..Head::default()
            },
            content,
        )
    }

    pub fn file_mode(self, name: &[u8], mode: u32, content: &[u8]) -> Tar {
        self.entry(
            Head {
                name,
                mode,
                ..Head::default()
            },
            content,
        )
    }

    pub fn dir(self, name: &[u8]) -> Tar {
        self.entry(
            Head {
                name,
                kind: b'5',
                mode: 0o755,
                ..Head::default()
            },
            b"",
        )
    }

    pub fn symlink(self, name: &[u8], target: &[u8]) -> Tar {
        self.entry(
            Head {
                name,
                kind: b'2',
                mode: 0o777,
                link: target,
                ..Head::default()
            },
            b"",
        )
    }

    pub fn hard_link(self, name: &[u8], target: &[u8]) -> Tar {
        self.entry(
            Head {
                name,
                kind: b'1',
                link: target,
                ..Head::default()
            },
            b"",
        )
    }

    pub fn device(self, name: &[u8], kind: u8, major: u32, minor: u32) -> Tar {
        self.entry(
            Head {
                name,
                kind,
                mode: 0o666,
                dev: (major, minor),
                ..Head::default()
            },
            b"",
        )
    }

    /// A PAX extended header for the next entry (`key=value` records).
    pub fn pax(self, records: &[(&str, &[u8])]) -> Tar {
        let data = pax_records(records);
        self.extended(b'x', b"PaxHeaders.0/x", &data)
    }

    /// A GNU long-name header (`L`) for the next entry.
    pub fn gnu_long_name(self, name: &[u8]) -> Tar {
        let mut data = name.to_vec();
        data.push(0);
        self.extended(b'L', b"././@LongLink", &data)
    }

    /// An extended header of type `kind` holding `data`.
    pub fn extended(self, kind: u8, name: &[u8], data: &[u8]) -> Tar {
        self.entry(
            Head {
                name,
                kind,
                ..Head::default()
            },
            data,
        )
    }

    /// The stream with its end-of-archive marker.
    pub fn finish(mut self) -> Vec<u8> {
        self.bytes.extend_from_slice(&[0u8; 1024]);
        self.bytes
    }
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).unwrap();
    gz.finish().unwrap()
}

pub fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::encode_all(data, 3).unwrap()
}

/// A layer as a manifest lists it: the blob, its media type, and the diff
/// ID the image's configuration claims for it.
#[derive(Clone)]
pub struct Layer {
    pub blob: Vec<u8>,
    pub media_type: String,
    pub diff_id: Digest,
}

impl Layer {
    /// An uncompressed tar, honestly described.
    pub fn tar(tar: Vec<u8>) -> Layer {
        Layer {
            diff_id: Digest::of(&tar),
            blob: tar,
            media_type: TAR.into(),
        }
    }

    /// A gzipped tar, honestly described.
    pub fn gzip(tar: &[u8]) -> Layer {
        Layer {
            diff_id: Digest::of(tar),
            blob: gzip(tar),
            media_type: GZIP.into(),
        }
    }

    /// A blob said to be `media_type`, its configuration claiming `diff_id`.
    pub fn raw(blob: Vec<u8>, media_type: &str, diff_id: Digest) -> Layer {
        Layer {
            blob,
            media_type: media_type.into(),
            diff_id,
        }
    }
}

/// The configuration and manifest of an image of `layers`, the
/// configuration listing `diff_ids` (usually the layers' own).
pub fn documents(layers: &[Layer], diff_ids: &[Digest]) -> (Vec<u8>, Vec<u8>) {
    let config = ImageConfigurationBuilder::default()
        .architecture(Arch::Amd64)
        .os(Os::FreeBSD)
        .config(
            ConfigBuilder::default()
                .labels(HashMap::new())
                .build()
                .unwrap(),
        )
        .rootfs(
            RootFsBuilder::default()
                .typ("layers")
                .diff_ids(diff_ids.iter().map(Digest::to_string).collect::<Vec<_>>())
                .build()
                .unwrap(),
        )
        .build()
        .unwrap();
    let config = canonical_json(&config);
    let desc = |mt: MediaType, bytes: &[u8]| {
        Descriptor::new(mt, bytes.len() as u64, oci_digest(&Digest::of(bytes)))
    };
    let manifest = ImageManifestBuilder::default()
        .schema_version(2u32)
        .media_type(MediaType::ImageManifest)
        .config(desc(MediaType::ImageConfig, &config))
        .layers(
            layers
                .iter()
                .map(|l| desc(MediaType::from(l.media_type.as_str()), &l.blob))
                .collect::<Vec<_>>(),
        )
        .build()
        .unwrap();
    (config, canonical_json(&manifest))
}

/// Uploads an image of `layers` to the registry at `host` as `repo:tag`
/// through the distribution API (a blob upload session per blob, then the
/// manifest), as any client would.
pub fn upload(host: &str, repo: &str, tag: &str, layers: &[Layer], diff_ids: &[Digest]) {
    let (config, manifest) = documents(layers, diff_ids);
    // reqwest is built without a TLS provider of its own (jbuild picks ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::blocking::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .unwrap();
    let base = format!("http://{host}/v2/{repo}");
    for blob in std::iter::once(&config).chain(layers.iter().map(|l| &l.blob)) {
        let started = http.post(format!("{base}/blobs/uploads/")).send().unwrap();
        assert_eq!(started.status().as_u16(), 202, "{repo}: start an upload");
        let location = started.headers()["location"].to_str().unwrap().to_string();
        let url = if location.starts_with('/') {
            format!("http://{host}{location}")
        } else {
            location
        };
        let sep = if url.contains('?') { '&' } else { '?' };
        let done = http
            .put(format!("{url}{sep}digest={}", Digest::of(blob)))
            .header("content-type", "application/octet-stream")
            .body(blob.clone())
            .send()
            .unwrap();
        assert_eq!(done.status().as_u16(), 201, "{repo}: upload a blob");
    }
    let put = http
        .put(format!("{base}/manifests/{tag}"))
        .header("content-type", "application/vnd.oci.image.manifest.v1+json")
        .body(manifest)
        .send()
        .unwrap();
    assert_eq!(
        put.status().as_u16(),
        201,
        "{repo}: put the manifest: {:?}",
        put.text()
    );
}

/// A gzip blob that inflates to `tar` followed by `zeros_mib` MiB of
/// zeros: one gzip member of 1 MiB of zeros (about 1 KiB), repeated. 10 GiB
/// of zeros take about 10 MiB.
pub fn gzip_bomb(tar: &[u8], zeros_mib: usize) -> Vec<u8> {
    let mut best = GzEncoder::new(Vec::new(), flate2::Compression::best());
    best.write_all(&vec![0u8; 1 << 20]).unwrap();
    let member = best.finish().unwrap();
    let mut out = gzip(tar);
    out.reserve(member.len() * zeros_mib);
    for _ in 0..zeros_mib {
        out.extend_from_slice(&member);
    }
    out
}

/// A zstd blob of a tar holding `files` files of `mib` MiB of zeros each:
/// each header and each file's content is its own zstd frame, the zero
/// frame compressed once and repeated.
pub fn zstd_bomb(files: usize, mib: usize) -> Vec<u8> {
    let zeros = zstd(&vec![0u8; mib << 20]);
    let mut out = Vec::new();
    for i in 0..files {
        let name = format!("zeros-{i}");
        let h = header(&Head {
            name: name.as_bytes(),
            size: (mib as u64) << 20,
            ..Head::default()
        });
        out.extend(zstd(h.as_bytes()));
        out.extend_from_slice(&zeros);
    }
    out.extend(zstd(&[0u8; 1024]));
    out
}
