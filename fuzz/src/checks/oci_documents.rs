//! The parsers of what comes from a registry or an image layout: manifests
//! and indexes (`image::media::Document::parse`), image configs, digests,
//! image names (`store::ImageName`), registry references (`RegistryRef`),
//! `WWW-Authenticate` challenges (`challenge::choose_from`) and `Content-Range` values.
//!
//! The first byte selects the parser; the rest is its input. Properties:
//! no panic; whatever parses, written back (canonical JSON, or `Display`),
//! parses again to the same value (for a config: the same canonical JSON).

use std::str::FromStr;

use jbuild::digest::Digest;
use jbuild::image::media::{Document, DOCKER_MANIFEST, DOCKER_MANIFEST_LIST};
use jbuild::store::canonical_json;
use jbuild::store::ImageName;
use jbuild::transport::registry::challenge::choose_from;
use jbuild::transport::registry::range_start;
use jbuild::transport::RegistryRef;
use oci_spec::image::{Descriptor, ImageConfiguration, MediaType};

fn document(media_type: MediaType, bytes: &[u8]) {
    let digest = Digest::of(bytes).to_string();
    let desc = Descriptor::new(
        media_type,
        bytes.len() as u64,
        oci_spec::image::Digest::from_str(&digest).unwrap(),
    );
    let Ok(doc) = Document::parse(&desc, bytes) else {
        return;
    };
    let _ = doc.children();
    let again = match &doc {
        Document::Manifest(m) => canonical_json(m),
        Document::Index(i) => canonical_json(i),
    };
    let reparsed = Document::parse(&desc, &again).expect("a written document parses again");
    match (&doc, &reparsed) {
        (Document::Manifest(a), Document::Manifest(b)) => assert_eq!(a, b),
        (Document::Index(a), Document::Index(b)) => assert_eq!(a, b),
        _ => panic!("the document changed kind"),
    }
}

/// The target's property checks on one input (see the module docs).
pub fn check_oci_documents(data: &[u8]) {
    let Some((&sel, bytes)) = data.split_first() else {
        return;
    };
    let text = std::str::from_utf8(bytes);
    match sel % 9 {
        0 => document(MediaType::ImageManifest, bytes),
        1 => document(MediaType::ImageIndex, bytes),
        2 => document(MediaType::Other(DOCKER_MANIFEST.into()), bytes),
        3 => document(MediaType::Other(DOCKER_MANIFEST_LIST.into()), bytes),
        4 => {
            if let Ok(c) = serde_json::from_slice::<ImageConfiguration>(bytes) {
                let again = canonical_json(&c);
                let back: ImageConfiguration =
                    serde_json::from_slice(&again).expect("a written config parses again");
                // oci-spec keeps exposed ports as a list in document
                // order, which canonical JSON sorts: compare the canonical
                // forms, which must be a fixed point.
                assert_eq!(canonical_json(&back), again);
            }
        }
        5 => {
            if let Ok(Ok(d)) = text.map(Digest::from_str) {
                let shown = d.to_string();
                assert_eq!(Digest::from_str(&shown).unwrap(), d, "`{shown}`");
            }
        }
        6 => {
            if let Ok(Ok(n)) = text.map(ImageName::parse) {
                let shown = n.to_string();
                // Display adds the default tag, so compare what it names.
                let back = ImageName::parse(&shown).expect("a shown name parses");
                assert_eq!(back.to_string(), shown);
                assert_eq!(
                    (
                        back.registry(),
                        back.repository(),
                        back.tag(),
                        back.digest()
                    ),
                    (n.registry(), n.repository(), n.tag(), n.digest()),
                    "`{shown}`"
                );
            }
        }
        7 => {
            if let Ok(Ok(r)) = text.map(RegistryRef::parse) {
                let shown = r.to_string();
                let back = RegistryRef::parse(&shown).expect("a shown reference parses");
                assert_eq!(back, r, "`{shown}`");
            }
        }
        _ => {
            if let Ok(t) = text {
                let _ = choose_from(&[t]);
                let _ = range_start(t);
            }
        }
    }
}
