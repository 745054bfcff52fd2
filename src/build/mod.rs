//! The build engine: runs a plan against a snapshotter, an executor and the
//! image store. Native instructions (COPY, SYSRC, SERVICE, LINE_IN_FILE,
//! RENDER) live in [`native`]: they edit a root directly, running nothing
//! inside it, so they work for FreeBSD images built on any host.

mod engine;
mod error;
pub mod image;
mod layers;
pub mod native;

pub use engine::{
    build, chain_snapshot, step_snapshot, BuildEnv, BuildOptions, BuildOutput, ImageSource,
};
pub use error::BuildError;
