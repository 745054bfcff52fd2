//! Work a package's shell script asks for that cannot be carried out off
//! FreeBSD (cache rebuilders, and with `--scripts=defer` commands jbuild
//! does not know), kept for the jail's first start (issue 32): an rc.d
//! script with FreeBSD's `firstboot` keyword, run once when `/firstboot`
//! exists, listed in the build's output, its `--json` and the image.

/// One command deferred to the jail's first start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferred {
    /// `name-version` of the package whose script asked for it.
    pub package: String,
    /// The script's type as pkg names it (`pre-install`, `post-install`).
    pub script: String,
    /// The command as `sh` runs it in the jail: its words after
    /// expansion, each quoted for `sh`.
    pub command: String,
    /// Why it waits: a cache rebuilder jbuild always defers, or a command
    /// jbuild does not know that `--scripts=defer` let through.
    pub reason: Reason,
}

/// Why a command was deferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// A cache or index rebuilder (`fc-cache`, `indexinfo`, …): only the
    /// target's own program can do it, and the jail runs fine until it has.
    Rebuilder,
    /// A command jbuild does not carry out, let through by
    /// `PKG --scripts=defer` (or `[pkg] scripts = "defer"`).
    Unknown,
}
