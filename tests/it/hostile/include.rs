//! INCLUDE reads files of the recipe, nothing else: beneath the build
//! context or the Jailfile's directory once symlinks are resolved, regular
//! files only, and an error about a file that is not a recipe never shows a
//! byte of it. Before, `INCLUDE /proc/self/environ` printed the whole
//! environment (CI tokens, cloud keys) in the "unknown instruction" error.

use super::{fails_with, succeeded, text, Home};
use crate::support::registry::{run_bounded, LIMIT};

use std::fs;
use std::os::unix::fs::symlink;
use std::process::Output;
use std::time::Duration;

/// A value that must never appear in what jbuild prints.
const CANARY: &str = "canary-8c1f2e0d-never-printed";

/// `jbuild build ctx` with the canary in its environment, bounded by
/// `limit`.
fn build_with_canary(h: &Home, limit: Duration) -> Output {
    run_bounded(
        h.jbuild()
            .env("JBUILD_TEST_CANARY", CANARY)
            .arg("build")
            .arg(h.ctx()),
        limit,
    )
}

fn assert_no_canary(out: &Output) {
    for (name, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
        assert!(
            !text(bytes).contains(CANARY),
            "the canary is in {name}:\n{}",
            text(bytes)
        );
    }
}

#[test]
fn include_of_proc_self_environ_is_refused_without_printing_it() {
    let h = Home::new("FROM scratch\nINCLUDE /proc/self/environ\n");
    let out = build_with_canary(&h, LIMIT);
    assert_no_canary(&out);
    fails_with(&out, &["/proc/self/environ", "is outside", "Jailfile:2"]);
}

#[test]
fn a_file_of_the_context_that_is_no_recipe_is_not_quoted() {
    // Inside the context, so it may be read; but it is no Jailfile, and
    // its first line is the secret.
    let h = Home::new("FROM scratch\nINCLUDE .env\n");
    fs::write(h.ctx().join(".env"), format!("TOKEN={CANARY}\nOTHER=x\n")).unwrap();
    let out = build_with_canary(&h, LIMIT);
    assert_no_canary(&out);
    fails_with(&out, &[".env` is not a Jailfile", "Jailfile:2"]);
}

#[test]
fn include_outside_the_context_is_refused() {
    let h = Home::new("FROM scratch\nINCLUDE ../outside.jf\n");
    fs::write(h.path("outside.jf"), "LABEL leaked=yes\n").unwrap();
    let out = h.build(&[]);
    fails_with(&out, &["../outside.jf", "is outside", "Jailfile:2"]);

    // A symlink inside the context that leads out: refused, saying where
    // it leads.
    fs::write(h.ctx().join("Jailfile"), "FROM scratch\nINCLUDE part.jf\n").unwrap();
    symlink(h.path("outside.jf"), h.ctx().join("part.jf")).unwrap();
    let out = h.build(&[]);
    fails_with(&out, &["part.jf", "through a symlink", "outside.jf"]);
    let listed = succeeded(&run_bounded(h.jbuild().arg("images"), LIMIT));
    assert!(!listed.contains("sha256"), "something was built:\n{listed}");
}

#[test]
fn include_of_a_fifo_is_refused_at_once() {
    let h = Home::new("FROM scratch\nINCLUDE part.fifo\n");
    nix::unistd::mkfifo(&h.ctx().join("part.fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    // Nobody ever writes to the FIFO: opening it to read would wait for
    // ever; the test gives it 20 s.
    let out = build_with_canary(&h, Duration::from_secs(20));
    fails_with(&out, &["part.fifo", "a FIFO, not a regular file"]);
}

/// What INCLUDE is for keeps working: a shared part through a symlink
/// inside the context, and a Jailfile given with `-f` from beside the
/// context including the context's files.
#[test]
fn includes_inside_the_context_still_work() {
    let h = Home::new("FROM scratch\nINCLUDE shared.jf\n");
    fs::create_dir(h.ctx().join("parts")).unwrap();
    fs::write(h.ctx().join("parts/copy.jf"), "COPY site/ /srv/\n").unwrap();
    symlink("parts/copy.jf", h.ctx().join("shared.jf")).unwrap();
    succeeded(&h.build(&["-t", "in:1"]));

    fs::create_dir(h.path("recipes")).unwrap();
    fs::write(
        h.path("recipes/Jailfile"),
        "FROM scratch\nINCLUDE ../ctx/parts/copy.jf\nINCLUDE local.jf\n",
    )
    .unwrap();
    fs::write(h.path("recipes/local.jf"), "LABEL from=recipes\n").unwrap();
    let jf = h.path("recipes/Jailfile");
    succeeded(&h.build(&["-t", "in:2", "-f", jf.to_str().unwrap()]));
}
