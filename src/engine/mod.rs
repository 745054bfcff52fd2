//! The build engine: runs a plan against a snapshotter, an executor and the
//! image store. Native instructions (COPY, SYSRC, SERVICE, LINE_IN_FILE,
//! RENDER) live in [`native`]: they edit a root directly, running nothing
//! inside it, so they work for FreeBSD images built on any host. Images —
//! unpacking a FROM image, exporting layers, writing the result — are
//! [`crate::image`]'s.

mod add;
pub mod attest;
mod bases;
pub mod cache;
pub mod context;
mod env;
mod error;
mod facts;
mod fetch;
pub mod foreign;
pub mod freebsd;
mod inputs;
pub mod lint;
pub mod mounts;
pub mod native;
mod pkg;
mod pkg_root;
mod pkgbase;
mod platform_args;
pub mod platforms;
pub mod provenance;
pub mod publish;
mod pull_policy;
pub mod request;
mod run;
mod step;
pub mod verify;

pub use add::{AddError, AddPlaces, GitCredentials};
pub use cache::RegistryCache;
pub use env::{BuildEnv, BuildOptions, BuildOutput};
pub use error::{BuildError, ForeignOs, Located};
pub use freebsd::FreeBsdEnv;
pub use mounts::{read_secrets, SecretError};
pub use platforms::{build_platforms, ListOutput, PlatformOutput};
pub use pull_policy::{BadPullPolicy, PullPolicy};
pub use run::{build, build_text};
