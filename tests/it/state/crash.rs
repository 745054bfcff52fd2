//! Crash safety: `jbuild build`, `export`, `copy`, `push` and `pull` are killed with
//! SIGKILL at pseudo-random points, then the same command is run again and
//! `jbuild check` looks at the state root. Every rerun must succeed and no
//! check may find damage; every few rounds `check --repair` must leave
//! nothing reclaimable either, and the next command must still work.
//!
//! Each scenario reuses one state root across its rounds, so whatever a
//! kill leaves behind meets the next kill. The kill points come from a
//! seed printed in the output: `JBUILD_CRASH_SEED=N` replays a run, and
//! `JBUILD_CRASH_SCALE=K` runs K times as many rounds (by hand).
//!
//! Delays are spread over the command's own duration, measured once
//! unkilled first (0 to its length, one in eight under 5 ms), so kills land in
//! every phase: start-up, locking, running a step, writing blobs, tagging.

use crate::support::registry as registry_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use jbuild::snapshot::testsuite::UnmountOnDrop;
use registry_support::image::{make, verify_layout};
use registry_support::{run_bounded, Registry, World, LIMIT};
use serde_json::Value;

std::thread_local! {
    /// The snapshot backend this test thread's commands use.
    static BACKEND: std::cell::Cell<&'static str> = const { std::cell::Cell::new("dir") };
}

/// `jbuild` on `home`, on this thread's backend.
fn jbuild(home: &Path) -> Command {
    let mut c = registry_support::jbuild(home);
    c.env("JBUILD_BACKEND", BACKEND.get());
    c
}

/// What one scenario did, for the summary line.
#[derive(Default, Debug)]
struct Tally {
    kills: usize,
    /// Kills that found the process still running (the rest had finished).
    landed: usize,
    repairs: usize,
}

fn seed() -> u64 {
    std::env::var("JBUILD_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
}

fn rounds(n: usize) -> usize {
    let scale: usize = std::env::var("JBUILD_CRASH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    n * scale.max(1)
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Starts `cmd`, kills it with SIGKILL after `delay` (if it is still
/// running then) and reaps it. Returns whether the kill found it running.
fn kill_after(cmd: &mut Command, delay: Duration) -> bool {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start jbuild");
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        let left = delay.saturating_sub(start.elapsed());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(2)));
    }
    // `Child::kill` is SIGKILL on Unix.
    child.kill().unwrap();
    child.wait().unwrap();
    true
}

/// A delay for one kill: mostly spread over `typical`, one in eight within
/// the first 5 ms.
fn delay(rng: &mut fastrand::Rng, typical: Duration) -> Duration {
    if rng.u8(..8) == 0 {
        return Duration::from_micros(rng.u64(..5000));
    }
    let span = typical.as_micros() as u64;
    Duration::from_micros(rng.u64(..span.max(1)))
}

fn timed(cmd: &mut Command) -> (Output, Duration) {
    let t = Instant::now();
    let out = run_bounded(cmd, LIMIT);
    (out, t.elapsed())
}

fn must(out: Output, what: &str) -> String {
    assert!(out.status.success(), "{what} failed:\n{}", text(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// `jbuild check --json` on `home`'s root: the exit code and the result.
fn check(home: &Path, extra: &[&str]) -> (Option<i32>, Value) {
    let o = run_bounded(jbuild(home).args(["--json", "check"]).args(extra), LIMIT);
    let v = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("check printed no JSON ({e}):\n{}", text(&o)));
    (o.status.code(), v)
}

fn findings(v: &Value, which: &str) -> Vec<String> {
    v[which]
        .as_array()
        .map(|a| a.iter().map(|f| f.to_string()).collect())
        .unwrap_or_default()
}

/// No damage; leftovers of the kill are allowed. Every `repair_every`-th
/// round also repairs and then wants nothing at all left to reclaim.
fn assert_sound(home: &Path, what: &str, round: usize, tally: &mut Tally) {
    let (code, v) = check(home, &[]);
    assert_eq!(code, Some(0), "{what}: check after the rerun:\n{v:#}");
    assert!(findings(&v, "damaged").is_empty(), "{what}:\n{v:#}");
    if round % 4 == 3 {
        let (code, v) = check(home, &["--repair"]);
        assert_eq!(code, Some(0), "{what}: check --repair:\n{v:#}");
        let (code, v) = check(home, &[]);
        assert_eq!(code, Some(0), "{what}: check after repair:\n{v:#}");
        assert!(findings(&v, "damaged").is_empty(), "{what}:\n{v:#}");
        assert!(
            findings(&v, "reclaimable").is_empty(),
            "{what}: left after repair:\n{v:#}"
        );
        tally.repairs += 1;
    }
}

/// A build context: busybox (for RUN steps in the namespace jail), a few
/// MiB to copy, and a recipe whose later steps change with `--build-arg N`.
fn context(dir: &Path) -> Option<PathBuf> {
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())?;
    let ctx = dir.join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::copy(busybox, ctx.join("busybox")).unwrap();
    fs::write(
        ctx.join("big"),
        registry_support::image::noise("crash", 2 << 20),
    )
    .unwrap();
    fs::write(
        ctx.join("Jailfile"),
        r#"FROM --platform=linux/amd64 scratch
COPY busybox /bin/busybox
ARG N=0
RUN ["/bin/busybox", "sh", "-c", "echo $N > /n && /bin/busybox yes $N | /bin/busybox head -c 1000000 > /y"]
COPY big /data/big
LINE_IN_FILE "round ${N}" /etc/motd
RUN ["/bin/busybox", "sh", "-c", "/bin/busybox cat /n /etc/motd > /both"]
"#,
    )
    .unwrap();
    Some(ctx)
}

fn build(home: &Path, ctx: &Path, n: usize) -> Command {
    let mut c = jbuild(home);
    c.args(["build", "-q", "-t", &format!("crash:{n}")])
        .args(["--build-arg", &format!("N={n}")])
        .arg(ctx);
    c
}

fn image_digest(home: &Path, name: &str) -> String {
    let out = must(
        run_bounded(jbuild(home).args(["--json", "inspect", name]), LIMIT),
        "inspect",
    );
    let v: Value = serde_json::from_str(&out).unwrap();
    v["digest"]
        .as_str()
        .or_else(|| v[0]["digest"].as_str())
        .unwrap_or_else(|| panic!("no digest in inspect output: {v:#}"))
        .to_string()
}

/// Kills builds; each rerun must give the image an unkilled build gives.
fn builds(rng: &mut fastrand::Rng, n: usize) -> Tally {
    let t = tempfile::tempdir().unwrap();
    // A killed command can leave an overlay mounted; the next ones clean
    // up after it, and this after the last.
    let _mounts = UnmountOnDrop(t.path().to_path_buf());
    crate::support::lane::require(crate::support::lane::Lane::Busybox);
    let Some(ctx) = context(t.path()) else {
        panic!("busybox-static is missing: tests/run installs it");
    };
    let home = t.path();
    // Unkilled references, in a root of their own.
    let reference = t.path().join("reference");
    fs::create_dir_all(&reference).unwrap();
    must(
        run_bounded(&mut build(&reference, &ctx, 0), LIMIT),
        "reference build",
    );
    // What a round costs: a new N, the first step cached.
    let (out, typical) = timed(&mut build(&reference, &ctx, 10_000));
    must(out, "reference build");
    let mut tally = Tally::default();
    for round in 0..n {
        // Each round builds a new N (the later steps run again); every
        // third round also with --no-cache (from the first step).
        let arg = round + 1;
        let mut cmd = build(home, &ctx, arg);
        if round % 3 == 2 {
            cmd.arg("--no-cache");
        }
        tally.landed += kill_after(&mut cmd, delay(rng, typical)) as usize;
        tally.kills += 1;
        let mut again = build(home, &ctx, arg);
        if round % 3 == 2 {
            again.arg("--no-cache");
        }
        must(
            run_bounded(&mut again, LIMIT),
            &format!("build rerun {round}"),
        );
        assert_sound(home, &format!("build round {round}"), round, &mut tally);
        if round % 5 == 0 {
            must(
                run_bounded(&mut build(&reference, &ctx, arg), LIMIT),
                "reference build",
            );
            assert_eq!(
                image_digest(home, &format!("crash:{arg}")),
                image_digest(&reference, &format!("crash:{arg}")),
                "round {round}: a build after a kill differs from an unkilled one"
            );
        }
    }
    tally
}

/// Kills exports to `oci:` and `oci-archive:`; each rerun must leave a
/// complete layout or archive with the image's manifest.
fn exports(rng: &mut fastrand::Rng, n: usize) -> Tally {
    crate::support::lane::require(crate::support::lane::Lane::Skopeo);
    let w = World::new(12 << 20);
    let home = w.tmp.path();
    let dest = |round: usize| -> (String, PathBuf) {
        if round % 2 == 0 {
            let p = w.path("out/layout");
            (format!("oci:{}:app:1", p.display()), p)
        } else {
            let p = w.path(&format!("out/app-{}.tar", round % 3));
            (format!("oci-archive:{}:app:1", p.display()), p)
        }
    };
    fs::create_dir_all(w.path("out")).unwrap();
    let (out, typical) = timed(jbuild(home).args(["export", "app:1", &dest(1).0]));
    must(out, "first export");
    let mut tally = Tally::default();
    for round in 0..n {
        let (to, path) = dest(round);
        // From nothing each time, so every export writes every blob; the
        // rerun then meets what the kill left.
        let _ = fs::remove_dir_all(&path);
        let _ = fs::remove_file(&path);
        tally.landed += kill_after(
            jbuild(home).args(["export", "app:1", &to]),
            delay(rng, typical),
        ) as usize;
        tally.kills += 1;
        if path.extension().is_none() {
            // A new layout: the kill left none, or the whole one.
            absent_or_whole(
                &path,
                "app:1",
                &w.manifest,
                &format!("export round {round}"),
            );
        }
        must(
            run_bounded(jbuild(home).args(["export", "app:1", &to]), LIMIT),
            &format!("export rerun {round}"),
        );
        let blobs = if path.extension().is_some() {
            // skopeo reads the archive whole and gives the manifest back.
            let o = run_bounded(
                Command::new("skopeo").args([
                    "inspect",
                    "--raw",
                    &format!("oci-archive:{}", path.display()),
                ]),
                LIMIT,
            );
            let raw = must(o, "skopeo inspect");
            let d = jbuild::digest::Digest::of(raw.as_bytes()).to_string();
            assert_eq!(
                d, w.manifest,
                "round {round}: archive holds another manifest"
            );
            1
        } else {
            verify_layout(&path)
        };
        assert!(blobs >= 1, "round {round}: nothing exported");
        assert_sound(home, &format!("export round {round}"), round, &mut tally);
    }
    tally
}

/// What a kill left where a new layout was being made: nothing (false), or
/// the whole layout (true), every blob sound and the image at `tag` the
/// one `manifest` names, as skopeo reads it. Never a layout without it.
fn absent_or_whole(layout: &Path, tag: &str, manifest: &str, what: &str) -> bool {
    if !layout.exists() {
        return false;
    }
    assert!(verify_layout(layout) >= 3, "{what}: blobs missing");
    let o = run_bounded(
        Command::new("skopeo").args([
            "inspect",
            "--raw",
            &format!("oci:{}:{tag}", layout.display()),
        ]),
        LIMIT,
    );
    let raw = must(o, &format!("{what}: skopeo inspect"));
    assert_eq!(
        jbuild::digest::Digest::of(raw.as_bytes()).to_string(),
        manifest,
        "{what}: the layout holds another manifest"
    );
    true
}

/// Kills copies from a registry into a new layout (`jbuild copy docker://…
/// oci:NEW:1`, small work's case): each kill leaves no layout there or the
/// whole one, and the rerun completes it.
fn copies(rng: &mut fastrand::Rng, n: usize, reg: &Registry) -> Tally {
    crate::support::lane::require(crate::support::lane::Lane::Skopeo);
    let w = World::new(2 << 20);
    let name = format!("{}/crash/copy:1", reg.host());
    must(
        run_bounded(w.jbuild().args(["push", "app:1", &name]), LIMIT),
        "push the copy source",
    );
    let home = w.tmp.path();
    let layout = w.path("out/layout");
    let (from, to) = (
        format!("docker://{name}"),
        format!("oci:{}:1", layout.display()),
    );
    let (out, typical) = timed(jbuild(home).args(["copy", &from, &to]));
    must(out, "first copy");
    let mut tally = Tally::default();
    let (mut whole, mut none) = (0, 0);
    for round in 0..n {
        let _ = fs::remove_dir_all(&layout);
        tally.landed +=
            kill_after(jbuild(home).args(["copy", &from, &to]), delay(rng, typical)) as usize;
        tally.kills += 1;
        let what = format!("copy round {round}");
        if absent_or_whole(&layout, "1", &w.manifest, &what) {
            whole += 1;
        } else {
            none += 1;
        }
        must(
            run_bounded(jbuild(home).args(["copy", &from, &to]), LIMIT),
            &format!("copy rerun {round}"),
        );
        assert!(
            absent_or_whole(&layout, "1", &w.manifest, &what),
            "{what}: the rerun left no layout"
        );
    }
    println!("copy: a kill left no layout {none} times, the whole one {whole} times");
    tally
}

/// Kills pushes; each rerun must put the whole image in the registry.
fn pushes(rng: &mut fastrand::Rng, n: usize, reg: &Registry) -> Tally {
    let w = World::new(12 << 20);
    let home = w.tmp.path();
    let name = |round: usize| format!("{}/crash/push{round}:1", reg.host());
    must(
        run_bounded(jbuild(home).args(["push", "app:1", &name(999)]), LIMIT),
        "first push",
    );
    // What a round costs: a new repository of the same registry.
    let (out, typical) = timed(jbuild(home).args(["push", "app:1", &name(998)]));
    must(out, "second push");
    let mut tally = Tally::default();
    for round in 0..n {
        // A repository of its own each round, so blobs are uploaded again
        // (or mounted) rather than all found present.
        let to = name(round);
        tally.landed += kill_after(
            jbuild(home).args(["push", "app:1", &to]),
            delay(rng, typical),
        ) as usize;
        tally.kills += 1;
        let out = must(
            run_bounded(jbuild(home).args(["push", "app:1", &to]), LIMIT),
            &format!("push rerun {round}"),
        );
        assert_eq!(out.trim(), w.manifest, "round {round}");
        assert_sound(home, &format!("push round {round}"), round, &mut tally);
    }
    // What the killed pushes left in the registry reads back whole.
    let back = World::new(0);
    let out = must(
        run_bounded(back.jbuild().args(["pull", &name(n - 1)]), LIMIT),
        "pull back",
    );
    assert_eq!(out.trim(), w.manifest);
    assert!(verify_layout(back.store.path()) >= w.digests.len());
    tally
}

/// Kills pulls into one root; before each round the image is removed and
/// pruned, so every pull downloads and unpacks again.
fn pulls(rng: &mut fastrand::Rng, n: usize, reg: &Registry) -> Tally {
    let src = World::new(12 << 20);
    let name = format!("{}/crash/pull:1", reg.host());
    must(
        run_bounded(src.jbuild().args(["push", "app:1", &name]), LIMIT),
        "push the pull source",
    );
    let w = World::new(0);
    let _mounts = UnmountOnDrop(w.tmp.path().to_path_buf());
    // A second image in the root, which no kill may damage.
    make(&w.store, "keep:1", "keep", 1 << 20);
    let home = w.tmp.path();
    let (out, typical) = timed(jbuild(home).args(["pull", &name]));
    must(out, "first pull");
    let mut tally = Tally::default();
    for round in 0..n {
        let _ = run_bounded(jbuild(home).args(["rmi", &name]), LIMIT);
        must(run_bounded(jbuild(home).args(["prune"]), LIMIT), "prune");
        tally.landed +=
            kill_after(jbuild(home).args(["pull", &name]), delay(rng, typical)) as usize;
        tally.kills += 1;
        let out = must(
            run_bounded(jbuild(home).args(["pull", &name]), LIMIT),
            &format!("pull rerun {round}"),
        );
        assert_eq!(out.trim(), src.manifest, "round {round}");
        assert_sound(home, &format!("pull round {round}"), round, &mut tally);
    }
    assert!(verify_layout(w.store.path()) >= src.digests.len());
    tally
}

#[test]
fn killed_commands_rerun_and_leave_a_sound_store() {
    let seed = seed();
    println!("crash seed: {seed} (JBUILD_CRASH_SEED={seed} replays it)");
    let start = Instant::now();
    let reg = Registry::start();
    let mut rng = fastrand::Rng::with_seed(seed);
    let (nb, ne, nu, nl) = (rounds(30), rounds(20), rounds(25), rounds(25));
    let results = [
        ("build", builds(&mut rng, nb)),
        ("export", exports(&mut rng, ne)),
        ("copy", copies(&mut rng, ne, &reg)),
        ("push", pushes(&mut rng, nu, &reg)),
        ("pull", pulls(&mut rng, nl, &reg)),
    ];
    let (mut total, mut landed) = (0, 0);
    for (what, t) in &results {
        // Reaching this line means every rerun succeeded and every check
        // found no damage (each is asserted where it happens).
        println!(
            "{what}: {} kills, {} while it was running; every rerun ok, every check sound; {} repairs left nothing",
            t.kills, t.landed, t.repairs
        );
        total += t.kills;
        landed += t.landed;
        assert!(
            t.landed * 4 >= t.kills,
            "{what}: only {} of {} kills found the command running",
            t.landed,
            t.kills
        );
    }
    // Most kills must land mid-work, or the test proves little.
    assert!(
        landed * 10 >= total * 6,
        "only {landed} of {total} kills found the command running"
    );
    println!("{total} kills in {:.1?}", start.elapsed());
    assert!(total >= 100);
}

/// The build and pull scenarios again on the overlay backend: kills land
/// between mounting and committing, in a flattening copy, in a view.
#[test]
fn killed_builds_and_pulls_on_overlay_rerun_and_leave_a_sound_store() {
    BACKEND.set("overlay");
    let seed = seed();
    println!("crash seed: {seed} (JBUILD_CRASH_SEED={seed} replays it)");
    let reg = Registry::start();
    let mut rng = fastrand::Rng::with_seed(seed);
    for (what, t) in [
        ("build", builds(&mut rng, rounds(12))),
        ("pull", pulls(&mut rng, rounds(12), &reg)),
    ] {
        println!(
            "overlay {what}: {} kills, {} while it was running; every rerun ok, every check sound; {} repairs left nothing",
            t.kills, t.landed, t.repairs
        );
        assert!(
            t.landed * 2 >= t.kills,
            "{what}: only {} of {} kills found the command running",
            t.landed,
            t.kills
        );
    }
}
