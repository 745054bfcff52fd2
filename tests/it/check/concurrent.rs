//! `jbuild check` while `jbuild prune` runs (issue 29, item 10): blobs
//! and layers that disappear while check looks at them, with prune
//! holding the store lock, are gone, not damage. A sound store is sound
//! whatever the interleaving: each round starts check and prune a little
//! apart, over a store with thousands of unreferenced blobs and a build
//! cache `prune --cache` takes away.

use crate::support::common;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{jbuild, ok};

/// Rounds of check racing prune; each stops by itself.
const ROUNDS: u64 = 10;
/// Unreferenced blobs written before each round.
const BLOBS: usize = 2000;

fn write_unreferenced_blobs(root: &Path, round: u64) {
    let dir = root.join("store/blobs/sha256");
    for i in 0..BLOBS {
        let bytes = format!("unreferenced blob {round} {i}\n").repeat(8);
        let hex = format!(
            "{:x}",
            <sha2::Sha256 as sha2::Digest>::digest(bytes.as_bytes())
        );
        fs::write(dir.join(hex), bytes).unwrap();
    }
}

/// Runs `c` with its output in files under `dir` (a pipe nobody reads
/// would stop it), waiting at most two minutes; its exit code and output.
fn spawn(c: &mut Command, dir: &Path, name: &str) -> Running {
    let (out, err) = (
        dir.join(format!("{name}.out")),
        dir.join(format!("{name}.err")),
    );
    let child = c
        .stdin(Stdio::null())
        .stdout(fs::File::create(&out).unwrap())
        .stderr(fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    Running { child, out, err }
}

struct Running {
    child: std::process::Child,
    out: std::path::PathBuf,
    err: std::path::PathBuf,
}

impl Running {
    fn finish(mut self, what: &str) -> (Option<i32>, String) {
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("{what} did not end within two minutes");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let text = format!(
            "{}{}",
            fs::read_to_string(&self.out).unwrap(),
            fs::read_to_string(&self.err).unwrap()
        );
        (status.code(), text)
    }
}

#[test]
fn check_racing_prune_on_a_sound_store_finds_no_damage() {
    let t = tempfile::tempdir().unwrap();
    let ctx = t.path().join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    let root = t.path().join("root");
    let mut failures = Vec::new();
    for round in 0..ROUNDS {
        // A build cache of its own for `prune --cache` to take: a new
        // image each round, untagged again.
        fs::write(
            ctx.join("Jailfile"),
            format!("FROM scratch\nLINE_IN_FILE \"{round}\" /etc/a\nLINE_IN_FILE \"b\" /etc/b\n"),
        )
        .unwrap();
        ok(jbuild(&root)
            .args(["build", "-q", "-t", "gone:1"])
            .arg(&ctx));
        ok(jbuild(&root).args(["rmi", "gone:1"]));
        write_unreferenced_blobs(&root, round);

        let check = spawn(jbuild(&root).args(["check"]), t.path(), "check");
        std::thread::sleep(Duration::from_millis(5 * (round % 5)));
        let prune_args: &[&str] = if round % 2 == 0 {
            &["prune"]
        } else {
            &["prune", "--cache"]
        };
        let prune = spawn(jbuild(&root).args(prune_args), t.path(), "prune");
        let (code, checked) = check.finish("check");
        let (pruned, out) = prune.finish("prune");
        assert_eq!(pruned, Some(0), "round {round}: {out}");
        if code != Some(0) {
            let damage: Vec<&str> = checked
                .lines()
                .filter(|l| l.starts_with("damaged:") || l.starts_with("error"))
                .take(5)
                .collect();
            failures.push(format!(
                "round {round}: exit {code:?}: {}",
                damage.join(" | ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {ROUNDS} rounds found damage on a sound store:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
