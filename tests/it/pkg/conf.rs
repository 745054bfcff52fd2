//! The ABI and the repositories of an image root, read as pkg reads them.

use jbuild::blame::Blame;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;

use jbuild::pkg::abi::{self, AbiError};
use jbuild::pkg::repo_conf::{self, SignatureType};

use crate::support::pkgrepo::elf::{freebsd_elf, EM_AARCH64, EM_PPC64, EM_X86_64};

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, bytes).unwrap();
}

#[test]
fn the_abi_comes_from_the_roots_uname_note_and_must_match_the_platform() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    write(
        r,
        "usr/bin/uname",
        &freebsd_elf(EM_AARCH64, true, 1_501_500, "FreeBSD"),
    );
    // /bin/sh of another architecture is not read: uname comes first.
    write(
        r,
        "bin/sh",
        &freebsd_elf(EM_X86_64, true, 1_302_000, "FreeBSD"),
    );
    let a = abi::of_root(r, "arm64").unwrap();
    assert_eq!(a.to_string(), "FreeBSD:15:aarch64");
    assert_eq!((a.minor, a.osversion), (1, 1_501_500));
    let e = abi::of_root(r, "amd64").unwrap_err();
    assert!(matches!(e, AbiError::ArchMismatch { .. }), "{e}");
    assert!(e.is_user_error());
    assert!(e.to_string().contains("arm64"), "{e}");
}

#[test]
fn bin_sh_is_read_when_uname_is_missing_and_a_link_out_stays_in_the_root() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    write(
        r,
        "bin/sh",
        &freebsd_elf(EM_PPC64, false, 1_403_000, "FreeBSD"),
    );
    assert_eq!(
        abi::of_root(r, "ppc64").unwrap().to_string(),
        "FreeBSD:14:powerpc64"
    );
    // A link to the host's /bin/sh resolves inside the root: the host's
    // (a Linux program here) is never read.
    fs::remove_file(r.join("bin/sh")).unwrap();
    symlink("/usr/bin/env", r.join("bin/sh")).unwrap();
    let e = abi::of_root(r, "amd64").unwrap_err();
    assert!(matches!(e, AbiError::NoUserland { .. }), "{e}");
    write(
        r,
        "bin/freebsd-version",
        b"#!/bin/sh\nUSERLAND_VERSION=\"14.3-RELEASE-p2\"\n",
    );
    assert_eq!(abi::of_root(r, "amd64").unwrap().osversion, 1_403_000);
}

#[test]
fn a_program_without_the_freebsd_note_is_no_freebsd_userland() {
    let root = tempfile::tempdir().unwrap();
    write(
        root.path(),
        "usr/bin/uname",
        &freebsd_elf(EM_X86_64, true, 1_403_000, "GNU"),
    );
    let e = abi::of_root(root.path(), "amd64").unwrap_err();
    assert!(matches!(e, AbiError::NotFreeBsdElf { .. }), "{e}");
    assert!(e.to_string().contains("/usr/bin/uname"), "{e}");
}

#[test]
fn configuration_directories_are_bounded() {
    let root = tempfile::tempdir().unwrap();
    for i in 0..=256 {
        write(root.path(), &format!("etc/pkg/r{i}.conf"), b"");
    }
    let a = abi::Abi {
        major: 14,
        minor: 3,
        arch: "amd64".into(),
        osversion: 1_403_000,
    };
    let e = repo_conf::load_root(root.path(), &a).unwrap_err();
    assert!(e.to_string().contains("more than 256 .conf files"), "{e}");
    fs::remove_file(root.path().join("etc/pkg/r0.conf")).unwrap();
    repo_conf::load_root(root.path(), &a).unwrap();
}

#[test]
fn the_roots_repositories_apply_in_pkgs_order_with_its_variables() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    write(
        r,
        "usr/bin/uname",
        &freebsd_elf(EM_X86_64, true, 1_403_000, "FreeBSD"),
    );
    write(
        r,
        "etc/pkg/FreeBSD.conf",
        b"FreeBSD: {\n  url: \"pkg+https://pkg.FreeBSD.org/${ABI}/quarterly\",\n  \
          mirror_type: \"srv\",\n  signature_type: \"fingerprints\",\n  \
          fingerprints: \"/usr/share/keys/pkg\",\n  enabled: yes\n}\n",
    );
    write(
        r,
        "usr/local/etc/pkg/repos/a.conf",
        b"FreeBSD: { enabled: no }\n",
    );
    write(
        r,
        "usr/local/etc/pkg/repos/b.conf",
        b"FreeBSD: { enabled: yes, url: \"https://mirror/${ABI}/latest_${VERSION_MINOR}\" }\n\
          mine { url = \"file:///srv/${ARCH}\"; priority = 5; signature_type = pubkey; pubkey = /k }\n",
    );
    // Not a .conf: pkg does not read it.
    write(r, "usr/local/etc/pkg/repos/c.conf.sample", b"broken {");
    let a = abi::of_root(r, "amd64").unwrap();
    let repos = repo_conf::load_root(r, &a).unwrap();
    let names: Vec<_> = repos.iter().map(|x| x.name.as_str()).collect();
    assert_eq!(names, ["FreeBSD", "mine"]);
    assert!(repos[0].enabled);
    assert_eq!(
        repos[0].url.as_deref(),
        Some("https://mirror/FreeBSD:14:amd64/latest_3")
    );
    assert_eq!(repos[0].signature_type, SignatureType::Fingerprints);
    assert_eq!(repos[0].files.len(), 3);
    assert_eq!(repos[1].url.as_deref(), Some("file:///srv/amd64"));
    assert_eq!(
        (repos[1].priority, repos[1].signature_type),
        (5, SignatureType::Pubkey)
    );

    write(r, "usr/local/etc/pkg/repos/d.conf", b"mine: { url: \"x\"\n");
    let e = repo_conf::load_root(r, &a).unwrap_err();
    assert!(e.is_user_error());
    assert!(
        e.to_string().contains("/usr/local/etc/pkg/repos/d.conf"),
        "{e}"
    );
}
