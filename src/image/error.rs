//! What can go wrong reading an image from the store.

use crate::blame::Blame;
use crate::digest::{Digest, DigestError};
use crate::store::StoreError;

use super::platform::NoSuchPlatform;

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// No image of that name or digest in the store.
    #[error(
        "image `{0}` is not in the local store (see `jbuild images`; import or pull it first)"
    )]
    NotFound(String),
    /// The reference names something that is not a manifest or an index.
    #[error("`{reference}` is a {media_type}, not an image")]
    NotAnImage {
        reference: String,
        media_type: String,
    },
    /// An index without the platform asked for.
    #[error("image `{reference}`")]
    Platform {
        reference: String,
        #[source]
        source: NoSuchPlatform,
    },
    /// A document of the image (`what`: index, manifest, config) that does
    /// not parse.
    #[error("{what} {digest} is not valid")]
    Invalid {
        what: &'static str,
        digest: Digest,
        #[source]
        source: serde_json::Error,
    },
    /// A manifest and its config disagree on the number of layers.
    #[error(
        "image {digest} is inconsistent: {layers} layers but {diff_ids} diff IDs in its config"
    )]
    Inconsistent {
        digest: Digest,
        layers: usize,
        diff_ids: usize,
    },
    /// A digest in a manifest or config that jbuild cannot use.
    #[error("image {image}")]
    Digest {
        image: String,
        #[source]
        source: DigestError,
    },
    /// A document a build would write is larger than every reader of an
    /// image accepts ([`super::MAX_DOCUMENT`]): stored, it would make the
    /// image unreadable and the store "damaged".
    #[error(
        "the image {what} this build makes is {}{size} bytes, more than the {max} bytes ({} MiB) \
         every reader of an image accepts, so nothing was stored or tagged: {detail}",
        if *at_least { "at least " } else { "" },
        max >> 20
    )]
    TooLarge {
        what: &'static str,
        size: u64,
        /// `size` is a floor counted before the document was made (its
        /// strings alone), not the document's length.
        at_least: bool,
        max: u64,
        /// What makes it large, for the user to act on.
        detail: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ImageError {
    /// Whether the image itself is malformed (as opposed to missing, or
    /// not readable from the store).
    pub fn is_malformed(&self) -> bool {
        matches!(
            self,
            ImageError::Invalid { .. }
                | ImageError::Inconsistent { .. }
                | ImageError::Digest { .. }
        )
    }
}

impl Blame for ImageError {
    /// Whether the user can fix this (a name, a platform, an image that is
    /// not what it should be) rather than it being the store's damage or
    /// the system's fault.
    fn is_user_error(&self) -> bool {
        match self {
            ImageError::NotFound(_)
            | ImageError::NotAnImage { .. }
            | ImageError::Platform { .. } => true,
            ImageError::Invalid { .. }
            | ImageError::Inconsistent { .. }
            | ImageError::Digest { .. }
            | ImageError::TooLarge { .. } => true,
            ImageError::Store(e) => e.is_user_error(),
        }
    }
}
