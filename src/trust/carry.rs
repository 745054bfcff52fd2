//! `jbuild push` carries the signatures and attestations kept in the store
//! beside the image it pushes, as cosign keeps them in a registry.

use super::TrustError;
use crate::digest::Digest;
use crate::image::media::artifact_tag;
use crate::store::{RefName, Store};
use crate::transport::{self, LayoutTransport, Transport};

/// Copies every artifact the store keeps for the image `image` (names
/// tagged `sha256-<hex>.sig`, `.att`, `.art`, under any of its
/// repositories) to `dst` under the same tag; returns the tags copied.
/// One tag found under several names is copied once, from the first.
pub fn carry(
    store: &Store,
    image: &Digest,
    dst: &dyn Transport,
) -> Result<Vec<String>, TrustError> {
    let wanted = image.to_string();
    let mut found: Vec<(String, String)> = Vec::new();
    for (name, desc) in store.list()? {
        let RefName::Image(n) = name else { continue };
        let Some((_, subject)) = artifact_tag(n.tag()) else {
            continue;
        };
        if subject == wanted && !found.iter().any(|(t, _)| t == n.tag()) {
            found.push((n.tag().to_string(), desc.digest().to_string()));
        }
    }
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let src = LayoutTransport::from_store(store.clone());
    transport::block_on(async {
        for (tag, digest) in &found {
            transport::copy_image(&src, digest, dst, Some(tag), &|_| {}).await?;
        }
        Ok::<_, TrustError>(())
    })?;
    Ok(found.into_iter().map(|(t, _)| t).collect())
}
