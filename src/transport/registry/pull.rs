//! The registry as an [`ImageSource`]: what `jbuild pull` and a build's
//! `FROM alpine` (when the store has no `alpine`) fetch through, before
//! [`crate::image::pull`] unpacks and names the image.

use crate::blame::Blame;
use oci_spec::image::Descriptor;

use super::{RegistryOptions, RegistryRef, RegistryTransport};
use crate::image::pull::{Arrivals, FetchError, ImageSource};
use crate::image::Platform;
use crate::report::Reporter;
use crate::store::ImageName;
use crate::store::Store;
use crate::transport::{
    block_on, copy_image_telling, CopyEvent, CopyOptions, LayoutTransport, Location, Transport,
};

/// Pulls images from registries into the store.
pub struct RegistryPuller {
    pub options: RegistryOptions,
    pub jobs: usize,
}

impl ImageSource for RegistryPuller {
    fn name(&self, reference: &str) -> Option<String> {
        // A registry reference, written bare or as `docker://…`, named by
        // its full reference, as docker names it: a second build finds it
        // there.
        let location = reference.parse::<Location>().ok()?.registry_named().ok()?;
        location.registry_ref().map(|r| r.to_string())
    }

    fn fetch(
        &self,
        store: &Store,
        reference: &ImageName,
        platform: &Platform,
        reporter: &dyn Reporter,
        arrivals: &Arrivals,
    ) -> Result<Descriptor, FetchError> {
        let r = RegistryRef::from_name(reference).map_err(|e| FetchError {
            user: true,
            source: Box::new(e),
        })?;
        let src = RegistryTransport::new(r.clone(), self.options.clone());
        fetch_into(
            &src,
            &r.reference(),
            store,
            platform,
            self.jobs,
            reporter,
            Some(arrivals),
        )
    }
}

/// Copies the image `reference` names at `src` (its manifest for
/// `platform`, when it is an index) into `store` untagged, `jobs` blobs at
/// a time, telling `arrivals` (a pull's) what has arrived as it goes: the
/// fetch of every [`ImageSource`] that reads a transport.
pub fn fetch_into(
    src: &dyn Transport,
    reference: &str,
    store: &Store,
    platform: &Platform,
    jobs: usize,
    reporter: &dyn Reporter,
    arrivals: Option<&Arrivals>,
) -> Result<Descriptor, FetchError> {
    let dst = LayoutTransport::from_store(store.clone());
    let opts = CopyOptions {
        jobs,
        platform: Some(platform.clone()),
    };
    let progress = |ev: CopyEvent| report(reporter, ev);
    block_on(async {
        let desc =
            copy_image_telling(src, reference, &dst, None, &opts, arrivals, &progress).await?;
        dst.finish().await?;
        Ok(desc)
    })
    .map_err(|e: crate::transport::TransportError| FetchError {
        user: e.is_user_error(),
        source: Box::new(e),
    })
}

/// Copy events as reporter calls (the CLI's transfers do the same).
pub fn report(reporter: &dyn Reporter, ev: CopyEvent) {
    let short = |d: &crate::digest::Digest| {
        let s = d.to_string();
        format!("blob {}", &s[..s.len().min(19)])
    };
    match ev {
        CopyEvent::BlobSkipped { digest, .. } => {
            reporter.transfer_start(&digest.to_string(), &short(&digest), None);
            reporter.transfer_done(&digest.to_string(), true);
        }
        CopyEvent::BlobStarted { digest, size } => {
            reporter.transfer_start(&digest.to_string(), &short(&digest), Some(size))
        }
        CopyEvent::BlobProgress { digest, done } => {
            reporter.transfer_progress(&digest.to_string(), done)
        }
        CopyEvent::BlobDone { digest, size } => {
            reporter.transfer_progress(&digest.to_string(), size);
            reporter.transfer_done(&digest.to_string(), false);
        }
        CopyEvent::ManifestDone { .. } => {}
    }
}
