//! What the commands that pull or unpack images share (`pull`, `create`,
//! `run`, `diff`): the store, the snapshot backend and the reporter an
//! [`Unpacker`] borrows, opened together ([`Unpacking`]); and the flags
//! that say how a `docker://` image is fetched, with the pull policy in
//! front of the registry ([`PullFlags`]), one group every such command
//! flattens.

use clap::Args;

use super::access::{PolicyArg, RegistryArgs};
use crate::cli::{Ctx, Failure};
use jbuild::image::LayerPolicy;
use jbuild::image::Unpacker;
use jbuild::report::Reporter;
use jbuild::snapshot::Snapshotter;
use jbuild::store::Store;
use jbuild::transport::RegistryPuller;
use jbuild::trust::policy::Guarded;

/// What an [`Unpacker`] borrows, owned here so a command opens it in one
/// call; dropping it ends the reporter's progress lines.
pub struct Unpacking {
    pub store: Store,
    pub snapshotter: Box<dyn Snapshotter>,
    pub reporter: Box<dyn Reporter>,
    policy: LayerPolicy,
}

impl Unpacking {
    /// The store, the backend the flags and configuration call for, the
    /// command's reporter, and layers judged by `policy`
    /// ([`Ctx::layer_policy`]).
    pub fn open(ctx: &Ctx, policy: LayerPolicy) -> Result<Unpacking, Failure> {
        Ok(Unpacking {
            store: ctx.store()?,
            snapshotter: ctx.snapshotter()?,
            reporter: ctx.reporter(),
            policy,
        })
    }

    pub fn unpacker(&self) -> Unpacker<'_> {
        Unpacker::new(
            &self.store,
            self.snapshotter.as_ref(),
            self.reporter.as_ref(),
            self.policy.clone(),
        )
    }
}

/// How a `docker://` image is fetched: the registry flags and the pull
/// policy (`--signature-policy`).
#[derive(Args, Debug)]
pub struct PullFlags {
    #[command(flatten)]
    pub registry: RegistryArgs,
    #[command(flatten)]
    pub policy: PolicyArg,
}

impl PullFlags {
    /// The registry, `jobs` blobs at a time, behind the pull policy in
    /// force.
    pub fn source(&self, ctx: &Ctx, jobs: usize) -> Result<Guarded, Failure> {
        let puller = RegistryPuller {
            options: self.registry.options(ctx)?,
            jobs,
        };
        Ok(self.policy.guard(ctx, puller))
    }
}
