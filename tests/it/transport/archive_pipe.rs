//! `oci-archive:-` through the real binary: an image goes out on standard
//! output and in on standard input, through a pipe between two jbuild
//! processes, as `jbuild export img oci-archive:- | ssh host jbuild import
//! oci-archive:-` does; skopeo reads what jbuild wrote to the pipe.

use crate::support::registry as registry_support;

use std::fs;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use registry_support::World;

/// GNU time, for the peak RSS of one process (as tests/it/registry/limits.rs).
const TIME: &str = "/usr/bin/time";

/// `producer | consumer`, both given at most a minute; returns both outputs
/// (the producer's stdout went into the pipe).
fn pipe(producer: &mut Command, consumer: &mut Command) -> (Output, Output) {
    let mut left = producer
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let right = consumer
        .stdin(left.stdout.take().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let right = wait_bounded(right);
    let left = wait_bounded(left);
    (left, right)
}

fn wait_bounded(mut child: Child) -> Output {
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("still running after a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn ok(what: &str, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{what}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The peak RSS in KiB GNU time wrote to `file`.
fn rss(file: &Path) -> u64 {
    let text = fs::read_to_string(file).unwrap();
    text.lines().last().unwrap().trim().parse().unwrap()
}

#[test]
fn an_image_goes_through_a_pipe_and_comes_back_the_same() {
    let w = World::new(4 << 20);
    let other = tempfile::tempdir().unwrap();
    let rss_file = w.path("import.rss");

    // export | import into another state root, the import under GNU time.
    let mut import = Command::new(TIME);
    import
        .args(["-f", "%M", "-o"])
        .arg(&rss_file)
        .arg(env!("CARGO_BIN_EXE_jbuild"))
        .args(["import", "oci-archive:-", "copy:2"]);
    for (k, v) in registry_support::jbuild(other.path()).get_envs() {
        match v {
            Some(v) => import.env(k, v),
            None => import.env_remove(k),
        };
    }
    let (export, imported) = pipe(
        w.jbuild().args(["export", "app:1", "oci-archive:-"]),
        &mut import,
    );
    ok("export", &export);
    assert!(
        String::from_utf8_lossy(&export.stderr).contains(&w.manifest),
        "export says what it wrote, on stderr"
    );
    assert_eq!(ok("import", &imported).trim(), w.manifest);
    let inspect = ok(
        "inspect",
        &registry_support::jbuild(other.path())
            .args(["--json", "inspect", "copy:2"])
            .output()
            .unwrap(),
    );
    assert!(inspect.contains(&w.manifest), "{inspect}");
    registry_support::image::verify_layout(&other.path().join("root/store"));
    let kib = rss(&rss_file);
    eprintln!("import of a 4 MiB image from a pipe: peak RSS {kib} KiB");
    // docs/security.md states this figure (measured: 24 MiB when written,
    // 33 MiB on 2026-11-30).
    assert!(kib < 40 << 10, "peak RSS {kib} KiB");

    // What jbuild writes to a pipe, skopeo reads, from the file `cat` made
    // of the pipe (skopeo 1.x waits forever on `oci-archive:/dev/stdin`).
    let file = w.path("piped.tar");
    let (export, cat) = pipe(
        w.jbuild().args(["export", "app:1", "oci-archive:-"]),
        Command::new("sh")
            .arg("-c")
            .arg(format!("cat > {}", file.display())),
    );
    ok("export", &export);
    ok("cat", &cat);
    let raw = ok(
        "skopeo inspect",
        &w.skopeo()
            .args(["inspect", "--raw"])
            .arg(format!("oci-archive:{}", file.display()))
            .output()
            .unwrap(),
    );
    assert_eq!(
        jbuild::digest::Digest::of(raw.as_bytes()).to_string(),
        w.manifest
    );
    // The same image gives the same bytes, to a pipe or to a file.
    let named = w.path("named.tar");
    ok(
        "export to a file",
        &w.jbuild()
            .args(["export", "app:1"])
            .arg(format!("oci-archive:{}", named.display()))
            .output()
            .unwrap(),
    );
    assert!(fs::read(&named).unwrap() == fs::read(&file).unwrap());

    // copy reads standard input; push writes standard output.
    let layout = w.path("layout");
    let (push, copy) = pipe(
        w.jbuild().args(["push", "app:1", "oci-archive:-"]),
        w.jbuild()
            .args(["copy", "oci-archive:-"])
            .arg(format!("oci:{}:y", layout.display())),
    );
    ok("push", &push);
    assert_eq!(ok("copy", &copy).trim(), w.manifest);
    assert_eq!(
        registry_support::image::digests_in_layout(&layout, &w.manifest),
        w.digests
    );
}

#[test]
fn standard_output_takes_nothing_else() {
    let w = World::new(1024);
    // --json writes its events to standard output: refused, nothing written.
    let out = w
        .jbuild()
        .args(["--json", "export", "app:1", "oci-archive:-"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--json"), "{err}");

    // A terminal is neither a place to write an archive nor to read one
    // from (util-linux `script` gives the command a pseudo-terminal).
    for args in ["export app:1 oci-archive:-", "import oci-archive:- x:1"] {
        let mut envs = String::new();
        for (k, v) in w.jbuild().get_envs() {
            if let Some(v) = v {
                envs.push_str(&format!(
                    "{}='{}' ",
                    k.to_string_lossy(),
                    v.to_string_lossy()
                ));
            }
        }
        let line = format!("env {envs}{} {args}", env!("CARGO_BIN_EXE_jbuild"));
        let out = Command::new("script")
            .args(["-qec", &line, "/dev/null"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{args}: {said}");
        assert!(said.contains("it is a terminal"), "{args}: {said}");
    }

    // Nothing but the archive on standard output, even when not quiet.
    let out = w
        .jbuild()
        .args(["export", "app:1", "oci-archive:-:v1"])
        .output()
        .unwrap();
    ok("export", &out);
    let mut stdout = &out.stdout[..];
    let mut first = [0u8; 512];
    stdout.read_exact(&mut first).unwrap();
    assert_eq!(&first[..6], b"blobs/", "the archive starts at byte 0");
    assert!(out.stdout.ends_with(&[0u8; 1024]));
    assert_eq!(out.stdout.len() % 512, 0);
}

/// A reference that fits two images in an `oci:` layout is the user's to
/// fix (exit 1), as it is in the store: the store's own error decides.
#[test]
fn an_ambiguous_reference_in_a_layout_is_the_users_mistake() {
    let w = World::new(4 << 20);
    let dir = w.path("layout");
    let dest = format!("oci:{}:alpine", dir.display());
    ok(
        "export",
        &w.jbuild()
            .args(["export", "app:1", &dest])
            .output()
            .unwrap(),
    );
    // A second image whose ref name docker resolves to the same name as
    // `alpine` (only its index entry: the lookup is over before any blob).
    let index = dir.join("index.json");
    let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&index).unwrap()).unwrap();
    let mut twin = v["manifests"][0].clone();
    twin["annotations"]["org.opencontainers.image.ref.name"] =
        "docker.io/library/alpine:latest".into();
    twin["digest"] = format!("sha256:{}", "ab".repeat(32)).into();
    v["manifests"].as_array_mut().unwrap().push(twin);
    fs::write(&index, serde_json::to_vec(&v).unwrap()).unwrap();

    let src = format!("oci:{}:library/alpine", dir.display());
    let out = w
        .jbuild()
        .args(["import", &src, "copy:1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("matches more than one image"), "{err}");
}

/// The ref name `export` writes into an `oci:` layout given without a tag.
fn layout_ref(dir: &Path) -> String {
    let v: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("index.json")).unwrap()).unwrap();
    v["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Exported by its ID, an image with one name is tagged as that name, not
/// `latest`; with two names, the tag must be said (exit 1).
#[test]
fn export_by_id_tags_the_layout_by_the_images_own_name() {
    let w = World::new(4 << 20);
    let id = &w.manifest["sha256:".len().."sha256:".len() + 12];
    for (typed, dir) in [
        (id, "by-id"),
        (&w.manifest[..], "by-digest"),
        ("app:1", "by-name"),
    ] {
        let dir = w.path(dir);
        let dest = format!("oci:{}", dir.display());
        ok(
            "export",
            &w.jbuild().args(["export", typed, &dest]).output().unwrap(),
        );
        assert_eq!(layout_ref(&dir), "1", "exported as {typed}");
    }

    ok(
        "tag",
        &w.jbuild()
            .args(["tag", "app:1", "other:2"])
            .output()
            .unwrap(),
    );
    let dir = w.path("by-name-2");
    let dest = format!("oci:{}", dir.display());
    ok(
        "export",
        &w.jbuild()
            .args(["export", "other:2", &dest])
            .output()
            .unwrap(),
    );
    assert_eq!(layout_ref(&dir), "2");

    let dest = format!("oci:{}", w.path("two-names").display());
    let out = w.jbuild().args(["export", id, &dest]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{dest}:TAG")), "{err}");
}
