//! `--secret id=ID,src=FILE` reads at most 1 MiB, of a regular file or a
//! pipe: `src=/dev/zero` is refused before a byte is read (before, it read
//! until the memory ran out), as is a file over the bound; a secret through
//! a pipe (`src=<(command)`) still works.

use super::layouts::{refused, CAP, QUICK};
use super::Home;
use crate::support::limits::{run_measured_capped, Measured};

use std::fs;

/// `jbuild build -q --secret id=s,src=SRC ctx`, measured; run by bash
/// when `src` needs it (a process substitution).
fn build_with_secret(h: &Home, src: &str) -> Measured {
    let jbuild = h.jbuild();
    let mut bash = std::process::Command::new("bash");
    for (k, v) in jbuild.get_envs() {
        match v {
            Some(v) => bash.env(k, v),
            None => bash.env_remove(k),
        };
    }
    bash.arg("-c").arg(format!(
        "exec '{}' build -q -t sec:1 --secret id=s,src={src} '{}'",
        jbuild.get_program().to_str().unwrap(),
        h.ctx().display()
    ));
    run_measured_capped(&mut bash, b"", QUICK, CAP)
}

/// The secrets are read and checked before anything is built, which is
/// what these look at: the recipe needs no executor.
const RECIPE: &str = "FROM scratch\nLABEL a=b\n";

#[test]
fn a_secret_from_dev_zero_or_over_a_mebibyte_is_refused_unread() {
    let h = Home::new(RECIPE);
    let m = build_with_secret(&h, "/dev/zero");
    refused(
        &m,
        &[
            "--secret id=s: /dev/zero: it is a character device, not a regular file",
            "a regular file or a pipe of at most 1024 KiB",
        ],
        &[],
    );

    let big = h.path("big.secret");
    fs::write(&big, vec![b'k'; (1 << 20) + 1]).unwrap();
    let m = build_with_secret(&h, big.to_str().unwrap());
    refused(
        &m,
        &[
            "--secret id=s:",
            "1048577 bytes, more than the 1048576 allowed",
        ],
        &["kkkk"],
    );
    // Through a pipe, more than the bound is refused as well, after
    // reading no more than one byte past it.
    let m = build_with_secret(&h, "<(head -c 3000000 /dev/zero)");
    refused(&m, &["more than the 1048576 allowed"], &[]);
}

#[test]
fn a_secret_through_a_pipe_still_works() {
    let h = Home::new(RECIPE);
    let m = build_with_secret(&h, "<(printf token-from-a-pipe)");
    assert!(m.output.status.success(), "{}", m.text());
    let token = h.path("token");
    fs::write(&token, "token-in-a-file").unwrap();
    let m = build_with_secret(&h, token.to_str().unwrap());
    assert!(m.output.status.success(), "{}", m.text());
}
