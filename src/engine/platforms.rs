//! Building for several platforms into one manifest list
//! (`jbuild build --platform a,b --manifest NAME`). Which steps can be
//! built for which platform is [`super::foreign`]'s decision.

use oci_spec::image::Descriptor;

use super::env::{BuildEnv, BuildOptions, BuildOutput};
use super::error::BuildError;
use super::fetch::FetchPhase;
use super::run::{build_text_with, check_text};
use crate::digest::Digest;
use crate::image::index::{self, AddOptions};
use crate::image::Platform;
use crate::jailfile;
use crate::store::{descriptor_digest, ImageName, StoreLock};

/// One platform's image of a [`build_platforms`].
#[derive(Debug, Clone)]
pub struct PlatformOutput {
    /// The platform asked for (`None`: the recipe's own).
    pub platform: Option<Platform>,
    pub output: BuildOutput,
}

/// What [`build_platforms`] made: the list and each platform's image.
#[derive(Debug, Clone)]
pub struct ListOutput {
    pub list: Descriptor,
    pub list_digest: Digest,
    pub images: Vec<PlatformOutput>,
}

/// Builds the recipe once per platform and adds each image to the
/// manifest list `list` (made if missing; an entry of the same platform
/// is replaced, as `podman build --manifest` does). Every platform is
/// planned and checked first, so a step that cannot run for one of them
/// fails the build before any step runs. `jailfile_text`: the recipe's
/// text when it is not `opts.jailfile`'s (a translated template). No
/// platform: one build, for the recipe's own platform (FROM's, the base
/// image's, else this host's).
pub fn build_platforms(
    env: &BuildEnv<'_>,
    opts: &BuildOptions,
    jailfile_text: Option<&str>,
    platforms: &[Platform],
    list: &ImageName,
) -> Result<ListOutput, BuildError> {
    for (i, p) in platforms.iter().enumerate() {
        if platforms[..i].contains(p) {
            return Err(BuildError::Step(format!(
                "--platform names {p} twice; give each platform once"
            )));
        }
    }
    if platforms.len() > 1 && !opts.tags.is_empty() {
        return Err(BuildError::Step(format!(
            "-t names one image, and {} platforms make {} images: name the list with --manifest alone (push it with `jbuild manifest push {list}`)",
            platforms.len(),
            platforms.len()
        )));
    }
    let platforms: Vec<Option<Platform>> = if platforms.is_empty() {
        vec![None]
    } else {
        platforms.iter().cloned().map(Some).collect()
    };
    let text = match jailfile_text {
        Some(t) => t.to_string(),
        None => jailfile::read(&opts.jailfile)?,
    };
    let for_platform = |p: &Option<Platform>| BuildOptions {
        platform: p.clone().or_else(|| opts.platform.clone()),
        ..opts.clone()
    };
    // One fetch phase for every pass: each image and release once per
    // platform, each download and repository once.
    let fetch = FetchPhase::new(env)?;
    for p in &platforms {
        check_text(&fetch, &for_platform(p), &text)?;
    }
    // Held until the last image is in the list: an image built without a
    // tag is named only by the list, and `jbuild prune` must not take it
    // in between.
    let _adding = StoreLock::shared(env.store)?;
    let mut images = Vec::new();
    let mut last = None;
    for p in &platforms {
        let output = build_text_with(&fetch, &for_platform(p), &text)?;
        let add = AddOptions {
            replace_platform: true,
            ..AddOptions::default()
        };
        last = Some(index::add_descriptor(
            env.store,
            list,
            &output.manifest_digest.to_string(),
            &output.manifest,
            &add,
            true,
        )?);
        images.push(PlatformOutput {
            platform: p.clone(),
            output,
        });
    }
    let list_desc = match last {
        Some(d) => d,
        None => index::read(env.store, list)?.0,
    };
    let list_digest =
        descriptor_digest(&list_desc).map_err(|source| crate::image::ImageError::Digest {
            image: list.to_string(),
            source,
        })?;
    Ok(ListOutput {
        list: list_desc,
        list_digest,
        images,
    })
}
