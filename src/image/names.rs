//! Snapshot names and the identities behind them, built and read back in
//! one place (see the module docs of [`crate::image`] for what each kind
//! means).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::digest::Digest;

const STEP: &str = "step-";
const CHAIN: &str = "chain-";
const ACTIVE: &str = "active-";

/// What a snapshot's name says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SnapshotName {
    /// A build step's result: `step-<hex of the step's cache key>`.
    Step(String),
    /// A layer unpacked from an image: `chain-<hex of its chain ID>`.
    Chain(String),
    /// Work in progress of process `pid`: `active-<pid>-<n>`.
    Active { pid: u32, n: u64 },
}

impl SnapshotName {
    /// The name of the snapshot a build step with cache key `key` commits.
    pub fn step(key: &Digest) -> String {
        format!("{STEP}{}", key.hex())
    }

    /// The name of the snapshot a layer with chain ID `chain_id` is
    /// unpacked into.
    pub fn chain(chain_id: &Digest) -> String {
        format!("{CHAIN}{}", chain_id.hex())
    }

    /// A new key for an active snapshot of this process, unique within it.
    pub fn active() -> String {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        format!(
            "{ACTIVE}{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        )
    }

    /// Reads a snapshot name back; `None` for a name jbuild does not make.
    pub fn parse(name: &str) -> Option<SnapshotName> {
        if let Some(hex) = name.strip_prefix(STEP) {
            return Some(SnapshotName::Step(hex.to_string()));
        }
        if let Some(hex) = name.strip_prefix(CHAIN) {
            return Some(SnapshotName::Chain(hex.to_string()));
        }
        let rest = name.strip_prefix(ACTIVE)?;
        let (pid, n) = rest.split_once('-')?;
        Some(SnapshotName::Active {
            pid: pid.parse().ok()?,
            n: n.parse().ok()?,
        })
    }

    /// Whether `name` is an active snapshot's key (`active-…`), whatever
    /// follows the prefix.
    pub fn is_active(name: &str) -> bool {
        name.starts_with(ACTIVE)
    }

    /// Whether `name` is an unpacked layer's (`chain-…`).
    pub fn is_chain(name: &str) -> bool {
        name.starts_with(CHAIN)
    }
}

/// Chain IDs as the OCI image spec defines them: the first layer's diff
/// ID, then `sha256(parent_chain + " " + diff_id)`.
pub fn chain_ids(diff_ids: &[Digest]) -> Vec<Digest> {
    let mut out: Vec<Digest> = Vec::with_capacity(diff_ids.len());
    for d in diff_ids {
        out.push(next_chain(out.last(), d));
    }
    out
}

/// The chain ID of a layer with `diff_id` on top of the chain `parent`.
pub fn next_chain(parent: Option<&Digest>, diff_id: &Digest) -> Digest {
    match parent {
        None => diff_id.clone(),
        Some(parent) => Digest::of(format!("{parent} {diff_id}").as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_ids_follow_the_spec() {
        let a = Digest::of(b"a");
        let b = Digest::of(b"b");
        let c = chain_ids(&[a.clone(), b.clone()]);
        assert_eq!(c[0], a);
        assert_eq!(c[1], Digest::of(format!("{a} {b}").as_bytes()));
    }

    #[test]
    fn names_read_back_as_what_they_were_made_from() {
        let d = Digest::of(b"x");
        assert_eq!(
            SnapshotName::parse(&SnapshotName::step(&d)),
            Some(SnapshotName::Step(d.hex().to_string()))
        );
        assert_eq!(
            SnapshotName::parse(&SnapshotName::chain(&d)),
            Some(SnapshotName::Chain(d.hex().to_string()))
        );
        let active = SnapshotName::active();
        assert!(SnapshotName::is_active(&active));
        assert_eq!(
            SnapshotName::parse(&active).map(
                |n| matches!(n, SnapshotName::Active { pid, .. } if pid == std::process::id())
            ),
            Some(true)
        );
        assert_ne!(active, SnapshotName::active());
        assert_eq!(SnapshotName::parse("base"), None);
        assert_eq!(SnapshotName::parse("active-x-1"), None);
    }
}
