//! The build engine: runs a plan against a snapshotter, an executor and the
//! image store. Native instructions (COPY, SYSRC, SERVICE, LINE_IN_FILE,
//! RENDER) live in [`native`]: they edit a root directly, running nothing
//! inside it, so they work for FreeBSD images built on any host.

mod engine;
mod error;
pub mod freebsd;
pub mod image;
mod layers;
pub mod native;

pub use engine::{
    build, build_text, chain_snapshot, step_snapshot, BuildEnv, BuildOptions, BuildOutput,
    ImageSource,
};
pub use error::BuildError;
pub use layers::layer_changes;

/// The committed snapshot that holds the whole root of the image
/// `reference` (unpacking its layers into snapshots first if needed), and
/// the image. `None` for an image without layers.
pub fn image_top(
    env: &BuildEnv<'_>,
    reference: &str,
    platform: &crate::plan::Platform,
) -> Result<(Option<String>, image::LoadedImage), BuildError> {
    let img = image::load(env.store, reference, platform).map_err(BuildError::Step)?;
    let layers = layers::unpack_image(env, &img)?;
    Ok((layers.last().map(|l| l.snapshot.clone()), img))
}

/// Unpacks every layer of the stored image `desc` (a manifest, or an index
/// to pick `platform` from) into committed snapshots, as FROM and `create`
/// do, and returns their names, bottom layer first. `jbuild pull` calls it
/// so that only an image whose layers all apply is named.
pub fn unpack(
    env: &BuildEnv<'_>,
    desc: &oci_spec::image::Descriptor,
    platform: &crate::plan::Platform,
) -> Result<Vec<String>, BuildError> {
    let img = image::load_descriptor(env.store, desc, platform, desc.digest().as_ref())
        .map_err(BuildError::BadImage)?;
    let layers = layers::unpack_image(env, &img)?;
    Ok(layers.into_iter().map(|l| l.snapshot).collect())
}
pub use freebsd::FreeBsdEnv;
