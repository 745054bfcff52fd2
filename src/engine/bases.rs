//! The images of the fetch phase ([`super::fetch`]): the images a build
//! reads (its FROM and `COPY --from` images, [`crate::plan::Need::Image`])
//! found in the store or pulled, as `--pull` says, before the build is
//! planned, and the build's pin while it does. The planner gets only each
//! image's manifest digest and config, in [`crate::plan::Inputs`], so a
//! pull inside `plan::plan` cannot happen. A multi-platform build shares
//! one [`Bases`] across its platforms' passes (the check of every
//! platform, then the builds), so each image is fetched once per platform,
//! and `--pull=always` pulls it once.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

use super::env::BuildEnv;
use super::error::BuildError;
use super::pull_policy::PullPolicy;
use crate::image::{self, LoadedImage, Platform};
use crate::plan::BaseKey;
use crate::report::Level;
use crate::store::StoreLock;

/// What the fetch phase found: images by `(reference, platform)`, and why
/// those whose ONBUILD triggers could not be read could not.
#[derive(Default)]
pub struct Fetched {
    images: RefCell<HashMap<BaseKey, LoadedImage>>,
    /// Taken by the fetch phase's answer for the image, which the planner
    /// reports at the line that named the image.
    failed: RefCell<HashMap<BaseKey, BuildError>>,
}

impl Fetched {
    /// The image fetched for `key`, if it was.
    pub(super) fn get(&self, key: &BaseKey) -> Option<LoadedImage> {
        self.images.borrow().get(key).cloned()
    }

    /// The image fetched for `reference` as a stage's base: the one for
    /// `platform`, else the only one fetched for `reference` (a FROM
    /// without `--platform` was fetched for the default platform; its
    /// stage then takes the image's own).
    pub(super) fn get_base(&self, reference: &str, platform: &Platform) -> Option<LoadedImage> {
        if let Some(img) = self.get(&BaseKey::new(reference, platform)) {
            return Some(img);
        }
        let images = self.images.borrow();
        let mut same = images.iter().filter(|(k, _)| k.reference == reference);
        match (same.next(), same.next()) {
            (Some((_, img)), None) => Some(img.clone()),
            _ => None,
        }
    }

    /// Why `key` could not be fetched (once).
    pub(super) fn take_failure(&self, key: &BaseKey) -> Option<BuildError> {
        self.failed.borrow_mut().remove(key)
    }

    /// Every image fetched, by reference (as the recipe wrote it).
    pub(super) fn by_reference(&self) -> Vec<(String, crate::digest::Digest)> {
        self.images
            .borrow()
            .iter()
            .map(|(k, img)| (k.reference.clone(), img.manifest_digest.clone()))
            .collect()
    }
}

/// Fetches a build's images, and holds the build's pin while it does.
pub struct Bases<'a> {
    env: &'a BuildEnv<'a>,
    /// The build's *pin*, as a pull's ([`crate::image::pull`], "The pin"):
    /// the store lock held shared from before the first FROM is looked up
    /// until the image is tagged. Until then no image names what the build
    /// stands on: its FROM image may be removed (`jbuild rmi`) once found,
    /// and between two steps nothing stands on the one just committed; nor
    /// are the blobs it writes named. `jbuild prune` and `check --repair`
    /// work under the lock held exclusively, so they wait for the build.
    /// It steps aside while the build pulls (see [`Bases::pin_aside`]).
    pin: RefCell<Option<StoreLock>>,
    fetched: Fetched,
    /// Images pulled by this build (`--pull=always` pulls each once).
    pulled: RefCell<BTreeSet<BaseKey>>,
}

impl<'a> Bases<'a> {
    /// Takes the build's pin.
    pub fn new(env: &'a BuildEnv<'a>) -> Result<Bases<'a>, BuildError> {
        Ok(Bases {
            env,
            pin: RefCell::new(Some(StoreLock::shared(env.store)?)),
            fetched: Fetched::default(),
            pulled: RefCell::new(BTreeSet::new()),
        })
    }

    pub(super) fn env(&self) -> &'a BuildEnv<'a> {
        self.env
    }

    /// What was fetched, for the planner.
    pub fn fetched(&self) -> &Fetched {
        &self.fetched
    }

    /// Keeps why `key` could not be fetched, for the planner.
    pub(super) fn keep_failure(&self, key: BaseKey, e: BuildError) {
        self.fetched.failed.borrow_mut().insert(key, e);
    }

    /// The image `reference` names: from the store, else (when the build
    /// has a source) by its full name if an earlier pull stored it so,
    /// else pulled now — through the same transaction as `jbuild pull`, so
    /// an image whose layers are refused gets no name. `--pull=always`
    /// pulls it again (once a build); `--pull=never` never asks the source.
    pub(super) fn fetch(
        &self,
        reference: &str,
        platform: &Platform,
    ) -> Result<LoadedImage, BuildError> {
        let key = BaseKey::new(reference, platform);
        if let Some(img) = self.fetched.get(&key) {
            return Ok(img);
        }
        let store = self.env.store;
        let stored = image::load(store, reference, platform);
        let always = self.env.pull == PullPolicy::Always
            && !self.pulled.borrow().contains(&key)
            && self
                .env
                .image_source
                .is_some_and(|s| s.name(reference).is_some());
        let img = match (stored, self.env.image_source) {
            (Ok(img), None) => img,
            (Ok(img), Some(_)) if !always => img,
            (Ok(_) | Err(image::ImageError::NotFound(_)), Some(source)) => {
                let Some(name) = source.name(reference) else {
                    return Err(image::ImageError::NotFound(reference.to_string()).into());
                };
                if always || store.resolve(&name)?.is_none() {
                    if self.env.pull == PullPolicy::Never {
                        return Err(BuildError::NotPulled(reference.to_string()));
                    }
                    self.env
                        .reporter
                        .message(Level::Info, &format!("pulling {name} ({platform})"));
                    self.pin_aside(|| {
                        image::pull(&self.env.unpacker(), source, reference, platform)
                    })??;
                    self.pulled.borrow_mut().insert(key.clone());
                }
                image::load(store, &name, platform)?
            }
            (Err(e), _) => return Err(e.into()),
        };
        self.fetched.images.borrow_mut().insert(key, img.clone());
        Ok(img)
    }

    /// Runs `pull` with the build's pin dropped, then takes it again
    /// (waiting, if `prune` got the lock meanwhile). The pull holds a pin of
    /// its own while it runs; if it fails, it takes away what it added only
    /// when it can take the store lock exclusively, which this build's pin
    /// would refuse. Pulls happen in the fetch phase, before any step, so
    /// the build has nothing unnamed to keep in the moment between the two
    /// pins.
    fn pin_aside<T>(&self, pull: impl FnOnce() -> T) -> Result<T, BuildError> {
        let held = self.pin.borrow_mut().take().is_some();
        let pulled = pull();
        if held {
            *self.pin.borrow_mut() = Some(StoreLock::shared(self.env.store)?);
        }
        Ok(pulled)
    }
}
