//! Pulling a registry image into the store on behalf of a build (`FROM
//! alpine` when the store has no `alpine`), through the same copy as
//! `jbuild pull`.

use super::{RegistryOptions, RegistryRef, RegistryTransport};
use crate::build::ImageSource;
use crate::plan::state::Platform;
use crate::report::Reporter;
use crate::store::Store;
use crate::transport::{copy_image_with, CopyEvent, CopyOptions, LayoutTransport};

/// Pulls FROM images a build needs that the store lacks.
pub struct RegistryPuller {
    pub options: RegistryOptions,
    pub jobs: usize,
}

impl ImageSource for RegistryPuller {
    fn fetch(
        &self,
        store: &Store,
        reference: &str,
        platform: &Platform,
        reporter: &dyn Reporter,
    ) -> Result<Option<String>, String> {
        let Ok(r) = RegistryRef::parse(reference) else {
            return Ok(None);
        };
        // Named by its full reference, as `jbuild pull` names it: a second
        // build finds it there.
        let name = r.to_string();
        if matches!(store.resolve(&name), Ok(Some(_))) {
            return Ok(Some(name));
        }
        reporter.message(
            crate::report::Level::Info,
            &format!("pulling {name} ({platform})"),
        );
        let src = RegistryTransport::new(r.clone(), self.options.clone());
        let dst = LayoutTransport::from_store(store.clone());
        let opts = CopyOptions {
            jobs: self.jobs,
            platform: Some(platform.clone()),
        };
        let progress = |ev: CopyEvent| report(reporter, ev);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the runtime to pull {name}: {e}"))?;
        runtime
            .block_on(async {
                copy_image_with(&src, &r.reference(), &dst, Some(&name), &opts, &progress).await?;
                crate::transport::Transport::finish(&dst).await
            })
            .map_err(|e| format!("cannot pull {name}: {e}"))?;
        Ok(Some(name))
    }
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
