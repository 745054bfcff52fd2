//! One recipe, one image, whatever the backend: Jailfiles made at random
//! from a vocabulary of file operations, built by the `jbuild` binary on
//! `dir`, `overlay` and ZFS (zfs-fuse), must give one image digest.
//!
//! A case is a few RUN steps over a busybox root, each a few operations on
//! a handful of paths under `/w`, so that later steps meet what earlier
//! ones left in lower layers: create, append, truncate, delete, rename,
//! hard link, symlink, chmod, chown, xattrs, mkdir and rmdir, a directory
//! replaced by a file and back. Every operation may fail (its path may not
//! be there); a failure is the same on every backend, so the step goes on
//! (`; true`). Each step ends by setting every mtime under `/w` to one
//! time ([`SETTLE`]: zfs-fuse keeps whole seconds), and chmod sets no
//! setuid or setgid bit (zfs-fuse clears them when root writes the file,
//! where Linux file systems and ZFS keep them). busybox has no `setfattr`: the xattr operations run
//! `/bin/xattr`, a static helper compiled from `tests/data/same_image/xattr.rs`
//! with the `rustc` that builds the tests.
//!
//! Cases come from a fixed seed and one random seed, both printed; a case
//! whose backends disagree is shrunk (whole steps, then single operations,
//! dropped while the disagreement stays) and the failure prints it as a
//! Jailfile. `JBUILD_TEST_SAME_IMAGE_SEED=<n>` runs that seed alone and
//! `JBUILD_TEST_SAME_IMAGE_CASES=<n>` sets the cases per seed
//! (tests/README.md).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::backends::{backends, Backend};
use crate::support::common;
use crate::support::zfs_fuse;
use jbuild::snapshot::testsuite::UnmountOnDrop;

/// The seed every run starts with.
const FIXED_SEED: u64 = 28;

/// Cases per seed when `JBUILD_TEST_SAME_IMAGE_CASES` is not set.
const CASES: usize = 4;

/// splitmix64: small, seeded, and the same on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

const FILES: &[&str] = &[
    "/w/a", "/w/b", "/w/c", "/w/d/a", "/w/d/b", "/w/d/s/a", "/w/e/a",
];
const DIRS: &[&str] = &["/w/d", "/w/d/s", "/w/e"];
const WORDS: &[&str] = &["one", "two", "three"];

/// One operation of a first step: mostly files and their other names,
/// for the later steps to meet in a lower layer.
fn first_operation(rng: &mut Rng) -> String {
    match rng.below(4) {
        0 | 1 => format!("echo {} > {}", rng.pick(WORDS), rng.pick(FILES)),
        2 => format!("ln -f {} {}", rng.pick(FILES), rng.pick(FILES)),
        _ => operation(rng),
    }
}

/// One operation, as a shell command.
fn operation(rng: &mut Rng) -> String {
    let file = |rng: &mut Rng| rng.pick(FILES);
    let any = |rng: &mut Rng| {
        if rng.below(3) == 0 {
            rng.pick(DIRS)
        } else {
            rng.pick(FILES)
        }
    };
    match rng.below(16) {
        0 | 1 => format!("echo {} > {}", rng.pick(WORDS), file(rng)),
        2 | 3 => format!("echo {} >> {}", rng.pick(WORDS), file(rng)),
        4 => format!("truncate -s {} {}", rng.pick(&["0", "1", "5"]), file(rng)),
        5 => format!("rm -f {}", file(rng)),
        6 => format!("mv -f {} {}", file(rng), file(rng)),
        7 | 8 => format!("ln -f {} {}", file(rng), file(rng)),
        9 => format!(
            "ln -sfn {} {}",
            rng.pick(&["a", "../a", "/w/b", "s"]),
            file(rng)
        ),
        10 => format!(
            "chmod {} {}",
            // No setuid or setgid: zfs-fuse clears them when root writes
            // the file, where Linux file systems (and ZFS) keep them.
            rng.pick(&["600", "644", "755", "700", "1777"]),
            any(rng)
        ),
        11 => format!(
            "chown -h {}:{} {}",
            rng.pick(&["0", "1", "1000"]),
            rng.pick(&["0", "1", "1000"]),
            any(rng)
        ),
        12 => match rng.below(3) {
            0 => format!("xattr rm {} user.{}", any(rng), rng.pick(&["a", "b"])),
            _ => format!(
                "xattr set {} user.{} {}",
                any(rng),
                rng.pick(&["a", "b"]),
                rng.pick(WORDS)
            ),
        },
        13 => format!("mkdir -p {}", rng.pick(DIRS)),
        14 => match rng.below(2) {
            0 => format!("rmdir {}", rng.pick(DIRS)),
            _ => format!("rm -rf {}", rng.pick(DIRS)),
        },
        _ => {
            let d = rng.pick(DIRS);
            match rng.below(2) {
                0 => format!("rm -rf {d} && echo {} > {d}", rng.pick(WORDS)),
                _ => format!("rm -f {d} && mkdir {d}"),
            }
        }
    }
}

/// A case: RUN steps, each a list of operations.
type Case = Vec<Vec<String>>;

fn case(rng: &mut Rng) -> Case {
    let steps = 3 + rng.below(3);
    (0..steps)
        .map(|i| {
            // The first step makes things for the others to meet below.
            if i == 0 {
                (0..8).map(|_| first_operation(rng)).collect()
            } else {
                (0..2 + rng.below(5)).map(|_| operation(rng)).collect()
            }
        })
        .collect()
}

/// What ends every step: each mtime under `/w` set to one time. zfs-fuse
/// keeps whole seconds, so a directory a step changed and left with the
/// same entries, or a file rewritten with the same bytes, within the second
/// its parent step last changed it, looks unchanged there and changed on
/// `dir` (nanoseconds): two images from one recipe, but by the clock, not
/// by the backend. With one fixed time, the tree walk compares such files
/// by content and directories by what they hold, the same everywhere.
const SETTLE: &str = "find /w -exec touch -h -c -d '2000-01-01 00:00:00' {} +";

/// The Jailfile of `case`: busybox and the xattr helper, `/w` with its
/// directories, then the case's steps.
fn jailfile(case: &Case) -> String {
    let mut out = String::from(
        "FROM --platform=linux/amd64 scratch\nCOPY busybox /bin/busybox\nCOPY xattr /bin/xattr\n\
         RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n",
    );
    writeln!(out, "RUN mkdir -p /w/d/s /w/e && {SETTLE}").unwrap();
    for step in case {
        let ops: Vec<String> = step.iter().map(|op| format!("{op} 2>/dev/null")).collect();
        writeln!(out, "RUN {}; {SETTLE}; true", ops.join("; ")).unwrap();
    }
    out
}

/// The image digest of `case` built on `b`, or why the build failed. On
/// zfs every build is followed by `prune --cache`: the test pool (128 MiB)
/// holds a few dozen steps, and shrinking builds many.
fn build(b: &Backend, ctx: &Path, case: &Case) -> Result<String, String> {
    // One name for every backend: the image carries its Jailfile.
    fs::write(ctx.join("Jailfile"), jailfile(case)).unwrap();
    let out = b.jbuild().args(["build", "-q"]).arg(ctx).output().unwrap();
    if b.name == "zfs" {
        common::ok(b.jbuild().args(["prune", "--cache"]));
    }
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "build failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// What each of `backends` gives for `case`.
type Outcomes = Vec<Result<String, String>>;

fn outcomes(backends: &[&Backend], ctx: &Path, case: &Case) -> Outcomes {
    backends.iter().map(|b| build(b, ctx, case)).collect()
}

/// Whether every backend built one image.
fn agree(got: &Outcomes) -> bool {
    got.iter().all(|g| g.is_ok() && *g == got[0])
}

fn describe(backends: &[&Backend], got: &Outcomes) -> String {
    let lines: Vec<String> = backends
        .iter()
        .zip(got)
        .map(|(b, g)| match g {
            Ok(d) | Err(d) => format!("  {}: {d}", b.name),
        })
        .collect();
    lines.join("\n")
}

/// How long shrinking may take: a test holds its zfs-fuse pool at most
/// 300 s (`support/zfs_fuse.rs`), and a build there costs seconds.
const SHRINK_FOR: std::time::Duration = std::time::Duration::from_secs(120);

/// The smallest case found that still `fails`: whole steps dropped first,
/// then single operations, until nothing more can go (or [`SHRINK_FOR`]
/// has passed: then the smallest so far).
fn shrink(mut case: Case, fails: &dyn Fn(&Case) -> bool) -> Case {
    let deadline = std::time::Instant::now() + SHRINK_FOR;
    let fails = |c: &Case| std::time::Instant::now() < deadline && fails(c);
    loop {
        let mut smaller = false;
        for i in (0..case.len()).rev() {
            let mut t = case.clone();
            t.remove(i);
            if !t.is_empty() && fails(&t) {
                case = t;
                smaller = true;
            }
        }
        for i in (0..case.len()).rev() {
            for j in (0..case[i].len()).rev() {
                let mut t = case.clone();
                t[i].remove(j);
                if t[i].is_empty() {
                    t.remove(i);
                }
                if !t.is_empty() && fails(&t) {
                    case = t;
                    smaller = true;
                    break;
                }
            }
        }
        if !smaller {
            return case;
        }
    }
}

fn env_number(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?}: expected a number")),
    )
}

/// The seeds of this run: `$JBUILD_TEST_SAME_IMAGE_SEED` alone, or the
/// fixed one and one from the clock.
fn seeds() -> Vec<u64> {
    match env_number("JBUILD_TEST_SAME_IMAGE_SEED") {
        Some(s) => vec![s],
        None => {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap();
            vec![
                FIXED_SEED,
                now.as_nanos() as u64 ^ u64::from(std::process::id()),
            ]
        }
    }
}

/// A build context with busybox and the xattr helper.
fn context(dir: &Path) -> PathBuf {
    let ctx = dir.join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::copy(common::static_busybox().unwrap(), ctx.join("busybox")).unwrap();
    let src = common::repo().join("tests/data/same_image/xattr.rs");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    common::ok(
        Command::new(rustc)
            .args([
                "-O",
                "-C",
                "target-feature=+crt-static",
                "-C",
                "panic=abort",
            ])
            .arg("-o")
            .arg(ctx.join("xattr"))
            .arg(&src),
    );
    ctx
}

#[test]
fn random_recipes_give_one_image_on_every_backend() {
    need!(Root, Busybox);
    let t = tempfile::tempdir().unwrap();
    let _mounts = UnmountOnDrop(t.path().to_path_buf());
    let ctx = context(t.path());
    // Without zfs-fuse (counted as a skip in its lane) dir and overlay
    // still meet.
    let pool = zfs_fuse::Pool::new();
    let backends = backends(t.path(), true, pool.as_ref());
    let cases = env_number("JBUILD_TEST_SAME_IMAGE_CASES").map_or(CASES, |n| n as usize);
    let all: Vec<&Backend> = backends.iter().collect();
    let started = std::time::Instant::now();
    for seed in seeds() {
        eprintln!("same_image: seed {seed}, {cases} cases (JBUILD_TEST_SAME_IMAGE_SEED={seed})");
        let mut rng = Rng(seed);
        for n in 0..cases {
            let first = case(&mut rng);
            let got = outcomes(&all, &ctx, &first);
            if agree(&got) {
                continue;
            }
            // Shrunk against dir and the backends that disagree with it.
            let involved: Vec<&Backend> = all
                .iter()
                .zip(&got)
                .filter(|(b, g)| b.name == "dir" || g.is_err() || **g != got[0])
                .map(|(b, _)| *b)
                .collect();
            let small = shrink(first, &|c| !agree(&outcomes(&involved, &ctx, c)));
            let small_got = outcomes(&all, &ctx, &small);
            panic!(
                "seed {seed}, case {n}: the backends give other images\n{}\n\
                 shrunk to (JBUILD_TEST_SAME_IMAGE_SEED={seed}):\n{}{}",
                describe(&all, &got),
                jailfile(&small),
                describe(&all, &small_got)
            );
        }
    }
    eprintln!(
        "same_image: {} backends, {:.1} s",
        all.len(),
        started.elapsed().as_secs_f64()
    );
}
