//! One repository per ABI for a multi-platform build: the packages of
//! [`super::image::packages`], each saying the repository's ABI in its
//! manifest, and `app` carrying a file naming it, so that an image shows
//! which ABI's catalogue and packages it was built from.

use std::path::Path;

use super::image::packages;
use super::pkgfile::{file, Contents};
use super::{Key, Layout, RepoSpec, Signing};

/// Where `app` says which ABI it was built for.
pub const ABI_FILE: &str = "usr/local/share/app/abi";

/// Writes the test repository for `abi` (`FreeBSD:14:aarch64`) into
/// `dir`, signed by `key` (fingerprints).
pub fn write_repo_for(dir: &Path, key: &Key, abi: &str) {
    let mut pkgs = packages();
    for p in &mut pkgs {
        if p.name == "app" {
            let c: &mut Contents = p.contents.as_mut().unwrap();
            c.items.push(file(
                &format!("/{ABI_FILE}"),
                0o644,
                format!("{abi}\n").as_bytes(),
            ));
        }
    }
    let mut spec = RepoSpec::new(Layout::DataPkg, pkgs);
    spec.signing = Signing::Fingerprints(vec![("test".into(), key.clone())]);
    spec.abi = abi.into();
    spec.write(dir);
}
