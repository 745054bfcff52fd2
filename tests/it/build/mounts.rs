//! `RUN --mount=...` and `build --secret` through the `jbuild` binary, in
//! the Linux namespace executor over a busybox-static root: secrets reach
//! the step and nothing else, cache mounts persist between builds, tmpfs
//! and bind mounts work as docs/jailfile.md says, and none of them leaves
//! anything in a layer. (tests/it/registry/secrets.rs is about registry credentials.)

use crate::support::common;

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use common::*;

/// A build context with busybox and a Jailfile whose first steps install
/// it; `steps` follow. Needs root and busybox-static: a test that cannot
/// run its body fails.
fn context(dir: &Path, steps: &str) -> PathBuf {
    crate::support::lane::require(crate::support::lane::Lane::Root);
    crate::support::lane::require(crate::support::lane::Lane::Busybox);
    let bb = static_busybox().expect("the busybox lane found it");
    let ctx = dir.join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::copy(bb, ctx.join("busybox")).unwrap();
    fs::write(
        ctx.join("Jailfile"),
        format!(
            "FROM --platform=linux/amd64 scratch AS base\n\
             COPY busybox /bin/busybox\n\
             RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n\
             {steps}"
        ),
    )
    .unwrap();
    ctx
}

fn json_result(stdout: &str) -> serde_json::Value {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["event"] == "result")
        .unwrap_or_else(|| panic!("no result event in:\n{stdout}"))
}

/// The committed snapshot (a whole tree, dir backend) holding `marker`.
fn snapshot_with(root: &Path, marker: &str) -> PathBuf {
    fs::read_dir(root.join("snapshots/dir/committed"))
        .unwrap()
        .map(|e| e.unwrap().path().join("fs"))
        .find(|p| p.join(marker).exists())
        .unwrap_or_else(|| panic!("no snapshot has {marker}"))
}

/// A random canary that no file or output holds by chance.
fn canary(tag: &str) -> String {
    let uuid = fs::read_to_string("/proc/sys/kernel/random/uuid").unwrap();
    format!("CANARY-{tag}-{}", uuid.trim())
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Every file under `dir`, gzip and zstd blobs decompressed too, that
/// contains `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                todo.push(p);
                continue;
            }
            if !m.is_file() {
                continue;
            }
            let raw = fs::read(&p).unwrap();
            let mut plain = Vec::new();
            if raw.starts_with(&[0x1f, 0x8b]) {
                flate2::read::GzDecoder::new(&raw[..])
                    .read_to_end(&mut plain)
                    .unwrap();
            } else if raw.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
                plain = zstd::decode_all(&raw[..]).unwrap();
            }
            if [&raw, &plain]
                .iter()
                .any(|b| b.windows(needle.len()).any(|w| w == needle))
            {
                hits.push(p);
            }
        }
    }
    hits
}

#[test]
fn secrets_reach_their_step_and_nothing_else() {
    let t = tempfile::tempdir().unwrap();
    let file_secret = canary("file");
    let env_secret = canary("env");
    let ctx = context(
        t.path(),
        "RUN --mount=type=secret,id=tok sha256sum /run/secrets/tok | cut -d' ' -f1 > /tok.sha \
             && stat -c '%a %u %g' /run/secrets/tok > /tok.stat && cat /run/secrets/tok\n\
         RUN --mount=type=secret,id=envtok,target=/etc/tok2,mode=0440,uid=7,gid=8 \
             stat -c '%a %u %g' /etc/tok2 > /tok2.stat && cat /etc/tok2 >&2 && echo after\n\
         RUN test ! -e /run/secrets && test ! -e /etc && echo gone > /secrets-gone\n",
    );
    let secret_file = t.path().join("tok.txt");
    fs::write(&secret_file, &file_secret).unwrap();
    let root = t.path().join("root");
    let out = run(jbuild(&root)
        .env("RUST_LOG", "trace")
        .env("MY_SECRET_ENV", &env_secret)
        .args(["--json", "build", "-t", "sec:1"])
        .arg("--secret")
        .arg(format!("id=tok,src={}", secret_file.display()))
        .args(["--secret", "id=envtok,env=MY_SECRET_ENV"])
        .arg(&ctx));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // The step read both: by file and by environment variable.
    let top = snapshot_with(&root, "secrets-gone");
    assert_eq!(
        fs::read_to_string(top.join("tok.sha")).unwrap().trim(),
        sha256_hex(file_secret.as_bytes())
    );
    assert_eq!(
        fs::read_to_string(top.join("tok2.stat")).unwrap(),
        "440 7 8\n"
    );
    // Printed by the step, masked by jbuild; the rest of the line stays.
    assert!(stdout.contains("<redacted>"), "{stdout}");
    assert!(stdout.contains("after"), "{stdout}");
    for secret in [&file_secret, &env_secret] {
        assert!(
            !stdout.contains(secret.as_str()),
            "--json output:\n{stdout}"
        );
        assert!(!stderr.contains(secret.as_str()), "trace log:\n{stderr}");
        // Not in any blob (layers, config and its history, manifest), any
        // snapshot or any other file of jbuild's root.
        let hits = files_containing(&root, secret.as_bytes());
        assert!(hits.is_empty(), "{secret} found in {hits:?}");
    }
    // History and config, as users read them, name the id only.
    let history = ok(jbuild(&root).args(["history", "sec:1"]));
    let inspect = ok(jbuild(&root).args(["inspect", "sec:1"]));
    assert!(history.contains("id=tok"), "{history}");
    for secret in [&file_secret, &env_secret] {
        assert!(!history.contains(secret.as_str()) && !inspect.contains(secret.as_str()));
    }
    let layout = t.path().join("oci");
    ok(jbuild(&root)
        .arg("export")
        .arg("sec:1")
        .arg(format!("oci:{}:1", layout.display())));
    for secret in [&file_secret, &env_secret] {
        let hits = files_containing(&layout, secret.as_bytes());
        assert!(hits.is_empty(), "{secret} found in the export: {hits:?}");
    }
    // The key holds the mount's options, not the value: another value of
    // the same secret reuses the cached step, as BuildKit does.
    fs::write(&secret_file, canary("other")).unwrap();
    let again = ok(jbuild(&root)
        .env("MY_SECRET_ENV", "another value")
        .args(["--json", "build", "-t", "sec:1"])
        .arg("--secret")
        .arg(format!("id=tok,src={}", secret_file.display()))
        .args(["--secret", "id=envtok,env=MY_SECRET_ENV"])
        .arg(&ctx));
    assert_eq!(json_result(&again)["steps_run"], 0, "{again}");
}

#[test]
fn a_missing_required_secret_fails_before_any_step_runs() {
    let t = tempfile::tempdir().unwrap();
    let ctx = context(
        t.path(),
        "RUN --mount=type=secret,id=opt test ! -e /run/secrets/opt && echo skipped > /opt-skipped\n\
         RUN --mount=type=secret,id=needed,required=true cat /run/secrets/needed\n",
    );
    let root = t.path().join("root");
    let out = run(jbuild(&root).args(["build", "-t", "req:1"]).arg(&ctx));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("`needed`"), "{stderr}");
    assert!(stderr.contains("Jailfile:5:1"), "{stderr}");
    assert!(stderr.contains("--secret id=needed,src=FILE"), "{stderr}");
    // Nothing ran: not even the COPY before it made a snapshot.
    let committed = root.join("snapshots/dir/committed");
    let made = fs::read_dir(&committed).map_or(0, |d| d.count());
    assert_eq!(made, 0, "steps ran before the check");

    // Given, the build goes through; the optional one is simply not there.
    let s = t.path().join("needed");
    fs::write(&s, "value").unwrap();
    ok(jbuild(&root)
        .args(["build", "-t", "req:1", "--secret"])
        .arg(format!("id=needed,src={}", s.display()))
        .arg(&ctx));
    assert!(snapshot_with(&root, "opt-skipped").exists());
}

#[test]
fn a_cache_mount_keeps_its_files_across_builds_and_stays_out_of_layers() {
    let t = tempfile::tempdir().unwrap();
    let ctx = context(
        t.path(),
        "ARG RUN_ID\n\
         RUN --mount=type=cache,target=/var/cache/thing,sharing=locked \
             echo $RUN_ID >> /var/cache/thing/log && wc -l < /var/cache/thing/log > /count-$RUN_ID\n",
    );
    let root = t.path().join("root");
    for id in ["one", "two"] {
        ok(jbuild(&root)
            .args(["build", "-t", "cache:1", "--build-arg"])
            .arg(format!("RUN_ID={id}"))
            .arg(&ctx));
    }
    let second = snapshot_with(&root, "count-two");
    assert_eq!(
        fs::read_to_string(second.join("count-two")).unwrap().trim(),
        "2"
    );
    // Kept under jbuild's root, by the id (the target, escaped).
    let kept = root.join("cache/mounts/%2Fvar%2Fcache%2Fthing/log");
    assert_eq!(fs::read_to_string(&kept).unwrap(), "one\ntwo\n");
    // The mount point the executor made is gone from every snapshot.
    for e in fs::read_dir(root.join("snapshots/dir/committed")).unwrap() {
        let fs_root = e.unwrap().path().join("fs");
        assert!(!fs_root.join("var").exists(), "{}", fs_root.display());
    }
    // `prune --cache` clears cache mounts with the rest of the build cache.
    let pruned = ok(jbuild(&root).args(["--json", "prune", "--cache"]));
    let v: serde_json::Value = serde_json::from_str(pruned.trim()).unwrap();
    assert_eq!(v["cache_mounts_removed"], 1, "{pruned}");
    assert!(!kept.exists());
}

#[test]
fn tmpfs_and_bind_mounts_work_as_documented() {
    let t = tempfile::tempdir().unwrap();
    let ctx = context(
        t.path(),
        "FROM base AS builder\n\
         RUN mkdir /out && echo built > /out/artifact\n\
         FROM base\n\
         RUN --mount=type=tmpfs,target=/scratch,size=1m \
             echo t > /scratch/f && test \"$(stat -f -c %T /scratch)\" = tmpfs \
             && stat -c %a /scratch > /tmpfs-mode && echo ok > /tmpfs-ok\n\
         RUN --mount=type=bind,source=data,target=/mnt/data \
             cat /mnt/data/hello.txt > /from-context && ! touch /mnt/data/new 2>/dev/null && echo ro > /ro-ok\n\
         RUN --mount=type=bind,target=/w,rw touch /w/new /w/data/new && echo rw > /rw-ok\n\
         RUN --mount=type=bind,from=builder,source=/out,target=/in cp /in/artifact /got && echo done > /last\n",
    );
    fs::create_dir(ctx.join("data")).unwrap();
    fs::write(ctx.join("data/hello.txt"), "hello 1\n").unwrap();
    // .jailignore hides files from COPY, not from a bind mount: they count.
    fs::write(ctx.join(".jailignore"), "data/ignored.txt\n").unwrap();
    fs::write(ctx.join("data/ignored.txt"), "i 1\n").unwrap();
    let root = t.path().join("root");
    let build = |root: &Path| {
        ok(jbuild(root)
            .args(["--json", "build", "-t", "m:1"])
            .arg(&ctx))
    };
    build(&root);
    let top = snapshot_with(&root, "last");
    let read = |p: &str| fs::read_to_string(top.join(p)).unwrap();
    assert_eq!(read("tmpfs-ok"), "ok\n");
    assert_eq!(read("tmpfs-mode"), "1777\n");
    assert_eq!(read("from-context"), "hello 1\n");
    assert_eq!(read("ro-ok"), "ro\n");
    assert_eq!(read("rw-ok"), "rw\n");
    assert_eq!(read("got"), "built\n");
    // rw writes were thrown away; no mount left anything in a layer.
    assert!(!ctx.join("new").exists() && !ctx.join("data/new").exists());
    for gone in ["scratch", "mnt", "w", "in"] {
        assert!(!top.join(gone).exists(), "/{gone} is in the layer");
    }
    // What a bind mount reads is in the key: a changed file re-runs the
    // steps that bind the context, and only from the first of them.
    fs::write(ctx.join("data/hello.txt"), "hello 2\n").unwrap();
    let out = build(&root);
    assert_eq!(json_result(&out)["steps_run"], 3, "{out}");
    let top = snapshot_with(&root, "last");
    let mut newest = fs::read_dir(root.join("snapshots/dir/committed"))
        .unwrap()
        .map(|e| e.unwrap().path().join("fs"))
        .filter(|p| p.join("last").exists())
        .filter(|p| fs::read_to_string(p.join("from-context")).unwrap() == "hello 2\n");
    assert!(newest.next().is_some(), "{}", top.display());
    fs::write(ctx.join("data/ignored.txt"), "i 2\n").unwrap();
    let out = build(&root);
    assert_eq!(json_result(&out)["steps_run"], 3, "{out}");
}

#[test]
fn a_bind_mount_reads_an_image_from_the_store() {
    let t = tempfile::tempdir().unwrap();
    let ctx = context(
        t.path(),
        "RUN mkdir /out && echo from-image > /out/artifact\n",
    );
    let root = t.path().join("root");
    ok(jbuild(&root).args(["build", "-t", "art:1"]).arg(&ctx));
    fs::write(
        ctx.join("Jailfile"),
        "FROM --platform=linux/amd64 scratch\n\
         COPY busybox /bin/busybox\n\
         RUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\n\
         RUN --mount=type=bind,from=art:1,source=out/artifact,target=/in/a cp /in/a /got-image\n",
    )
    .unwrap();
    ok(jbuild(&root).args(["build", "-t", "use:1"]).arg(&ctx));
    let top = snapshot_with(&root, "got-image");
    assert_eq!(
        fs::read_to_string(top.join("got-image")).unwrap(),
        "from-image\n"
    );
    assert!(!top.join("in").exists(), "/in is in the layer");
}

/// While the step runs, the host sees the secrets' staging directory
/// empty (the tmpfs holding the file exists in the step's mount namespace
/// only); afterwards the directory is gone.
#[test]
fn a_secret_is_never_on_the_hosts_disk() {
    let t = tempfile::tempdir().unwrap();
    let ctx = context(
        t.path(),
        "RUN --mount=type=secret,id=tok test -s /run/secrets/tok && sleep 3 && echo read > /read\n",
    );
    let tmp = t.path().join("tmp");
    fs::create_dir(&tmp).unwrap();
    let secret = t.path().join("tok");
    fs::write(&secret, canary("disk")).unwrap();
    let mut child = jbuild(&t.path().join("root"))
        .env("TMPDIR", &tmp)
        .args(["build", "--secret"])
        .arg(format!("id=tok,src={}", secret.display()))
        .arg(&ctx)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let staging = |tmp: &Path| {
        fs::read_dir(tmp)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("jbuild-secrets-")
            })
    };
    let started = std::time::Instant::now();
    let seen = loop {
        if let Some(dir) = staging(&tmp) {
            break dir;
        }
        assert!(
            started.elapsed().as_secs() < 30,
            "the step never started with its secret"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // Give the step time to mount, then look while it sleeps.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let inside: Vec<_> = fs::read_dir(&seen).unwrap().collect();
    assert!(inside.is_empty(), "the host sees {inside:?}");
    assert!(child.wait().unwrap().success());
    assert!(staging(&tmp).is_none(), "the staging directory is left");
}
