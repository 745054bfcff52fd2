//! Paths the user names for output that are not regular files: a FIFO, a
//! device node, a symlink to one, `/dev/stdout` on a pipe. Each is written
//! in place and is the same kind of node afterwards; none is replaced by a
//! regular file (as a temporary file renamed over it would do: as root,
//! `--iidfile /dev/null` replaced the system's `/dev/null`).
//!
//! The devices are made here (`mknod`, as root), never the system's own.

use super::{fails_with, kind, succeeded, text, Home};
use crate::support::registry::{run_bounded, LIMIT};

use std::fs;
use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

const RECIPE: &str = "FROM scratch\nCOPY site/ /srv/\nLABEL app=outputs\n";

/// A FIFO at `path`, and a thread that reads it whole once a writer
/// opens it; `received` waits for what it read.
struct Fifo {
    path: PathBuf,
    read: mpsc::Receiver<Vec<u8>>,
}

impl Fifo {
    fn new(path: PathBuf) -> Fifo {
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let (tx, read) = mpsc::channel();
        let p = path.clone();
        // Opening blocks until jbuild opens the FIFO for writing; if jbuild
        // replaces it instead, this thread never gets a writer and is left
        // behind (the test fails on `received`).
        std::thread::spawn(move || {
            let _ = tx.send(fs::read(&p).unwrap_or_default());
        });
        Fifo { path, read }
    }

    /// What was written through the FIFO; fails when nothing came, naming
    /// what the path is now.
    fn received(&self) -> Vec<u8> {
        match self.read.recv_timeout(Duration::from_secs(30)) {
            Ok(bytes) => bytes,
            Err(_) => panic!(
                "nothing was written through the FIFO; {} is now a {}",
                self.path.display(),
                kind(&self.path)
            ),
        }
    }
}

/// A character device like `/dev/null` (1, 3) at `path`, made here.
fn null_device(path: &Path) {
    use nix::sys::stat::{makedev, mknod, Mode, SFlag};
    mknod(
        path,
        SFlag::S_IFCHR,
        Mode::from_bits_truncate(0o666),
        makedev(1, 3),
    )
    .unwrap();
}

fn assert_null_device(path: &Path) {
    let m = fs::symlink_metadata(path).unwrap();
    assert!(
        m.file_type().is_char_device(),
        "{} is now a {}",
        path.display(),
        kind(path)
    );
    let rdev = m.rdev();
    assert_eq!(
        (nix::sys::stat::major(rdev), nix::sys::stat::minor(rdev)),
        (1, 3)
    );
}

#[test]
fn iidfile_to_a_fifo_is_written_through_it_and_the_fifo_stays() {
    let h = Home::new(RECIPE);
    let fifo = Fifo::new(h.path("iid.fifo"));
    let out = h.build(&["-q", "--iidfile", fifo.path.to_str().unwrap()]);
    let printed = succeeded(&out);
    let written = text(&fifo.received());
    assert_eq!(kind(&fifo.path), "fifo");
    assert!(written.starts_with("sha256:"), "{written:?}");
    assert_eq!(written, printed.trim());
}

#[test]
fn digest_files_to_a_device_or_a_symlink_to_one_leave_the_node() {
    need!(Root);
    let h = Home::new(RECIPE);
    let dev = h.path("null");
    null_device(&dev);
    let link = h.path("null-link");
    symlink(&dev, &link).unwrap();

    // --iidfile through a symlink to the device, --provenance-file to the
    // device itself.
    let out = h.build(&[
        "-t",
        "app:1",
        "--iidfile",
        link.to_str().unwrap(),
        "--provenance-file",
        dev.to_str().unwrap(),
    ]);
    succeeded(&out);
    assert_eq!(kind(&link), "symlink");
    assert_eq!(fs::read_link(&link).unwrap(), dev);
    assert_null_device(&dev);

    // push --digestfile, to an OCI layout (no registry needed).
    let out = run_bounded(
        h.jbuild()
            .args(["push", "--digestfile"])
            .arg(&link)
            .arg("app:1")
            .arg(format!("oci:{}:app", h.path("layout").display())),
        LIMIT,
    );
    succeeded(&out);
    assert_eq!(kind(&link), "symlink");
    assert_null_device(&dev);

    // Nothing jbuild should write over is written over: a directory is
    // refused with what it is (and stays).
    let out = h.build(&["--iidfile", h.path("ctx").to_str().unwrap()]);
    fails_with(&out, &["--iidfile", "is a directory", "FIFO"]);
    assert_eq!(kind(&h.ctx()), "directory");
}

/// The bytes `export app:1` writes to a regular file: the archive is
/// deterministic, so every other destination must get exactly these.
fn reference_archive(h: &Home) -> Vec<u8> {
    let file = h.path("reference.tar");
    succeeded(&run_bounded(
        h.jbuild()
            .args(["export", "app:1"])
            .arg(format!("oci-archive:{}", file.display())),
        LIMIT,
    ));
    let bytes = fs::read(&file).unwrap();
    let names: Vec<String> = crate::support::tar::list(&bytes)
        .iter()
        .map(|e| String::from_utf8_lossy(&e.path).into_owned())
        .collect();
    assert!(names.iter().any(|n| n == "index.json"), "{names:?}");
    bytes
}

#[test]
fn export_to_a_fifo_streams_the_archive_and_the_fifo_stays() {
    let h = Home::new(RECIPE);
    succeeded(&h.build(&["-t", "app:1"]));
    let want = reference_archive(&h);
    let fifo = Fifo::new(h.path("image.fifo"));
    let out = run_bounded(
        h.jbuild()
            .args(["export", "app:1"])
            .arg(format!("oci-archive:{}", fifo.path.display())),
        LIMIT,
    );
    succeeded(&out);
    let got = fifo.received();
    assert_eq!(kind(&fifo.path), "fifo");
    assert!(
        got == want,
        "{} bytes through the FIFO, {} in the file",
        got.len(),
        want.len()
    );
    // Nothing was staged beside the FIFO.
    let beside: Vec<String> = fs::read_dir(h.tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(beside.is_empty(), "{beside:?}");
}

/// `export app:1 oci-archive:/dev/stdout | cat > out.tar`, in a mount
/// namespace of its own whose `/dev` is a directory made here (so the
/// machine's `/dev/stdout` is never at stake, whatever jbuild does):
/// the archive comes through the pipe and `/dev/stdout` is still the
/// symlink it was.
#[test]
fn export_to_dev_stdout_on_a_pipe_streams_and_leaves_dev_stdout() {
    need!(Root);
    let h = Home::new(RECIPE);
    succeeded(&h.build(&["-t", "app:1"]));
    let want = reference_archive(&h);
    let dev = h.path("dev");
    fs::create_dir(&dev).unwrap();
    null_device(&dev.join("null"));
    for (name, to) in [
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
        ("fd", "/proc/self/fd"),
    ] {
        symlink(to, dev.join(name)).unwrap();
    }
    let script = r#"
        set -u
        mount --bind "$DEV" /dev || exit 97
        { "$JBUILD" export app:1 oci-archive:/dev/stdout; echo $? > "$STATUS"; } | cat > "$OUT"
        if [ -L /dev/stdout ]; then echo "dev/stdout: symlink"; else echo "dev/stdout: REPLACED"; fi
    "#;
    let mut cmd = h.jbuild();
    cmd.env("DEV", &dev)
        .env("JBUILD", env!("CARGO_BIN_EXE_jbuild"))
        .env("STATUS", h.path("status"))
        .env("OUT", h.path("out.tar"));
    let mut unshare = std::process::Command::new("unshare");
    unshare
        .args(["--mount", "--propagation", "private", "sh", "-c", script])
        .envs(cmd.get_envs().filter_map(|(k, v)| Some((k, v?))));
    let out = run_bounded(&mut unshare, LIMIT);
    let said = succeeded(&out);
    let status = fs::read_to_string(h.path("status")).unwrap_or_default();
    assert_eq!(
        status.trim(),
        "0",
        "jbuild export failed:\n{}",
        text(&out.stderr)
    );
    assert!(said.contains("dev/stdout: symlink"), "{said}");
    assert_eq!(kind(&dev.join("stdout")), "symlink");
    let got = fs::read(h.path("out.tar")).unwrap();
    assert!(
        got == want,
        "{} bytes through the pipe, {} in the file",
        got.len(),
        want.len()
    );
}

/// `create --conf` edits a file the user named: a symlinked jail.conf (an
/// /etc kept in a repository, say) stays a link and the file it points to
/// gets the entry; a rename over the path replaced the link with a
/// regular file.
#[test]
fn create_conf_through_a_symlink_keeps_the_link() {
    need!(Root);
    let h = Home::new(RECIPE);
    succeeded(&h.build(&["-q", "-t", "app:1"]));
    let kept = h.path("kept");
    fs::create_dir(&kept).unwrap();
    fs::write(kept.join("jail.conf"), "other {\n  path = \"/x\";\n}\n").unwrap();
    let link = h.path("jail.conf");
    symlink(kept.join("jail.conf"), &link).unwrap();

    let out = run_bounded(
        h.jbuild()
            .args(["create", "app:1", "j", "--path"])
            .arg(h.path("jails/j"))
            .arg("--conf")
            .arg(&link),
        LIMIT,
    );
    succeeded(&out);
    assert_eq!(kind(&link), "symlink");
    let conf = text(&fs::read(kept.join("jail.conf")).unwrap());
    assert!(conf.contains("other {") && conf.contains("j {"), "{conf}");
}

/// `man --out DIR` writes each page as any named output is written: a page
/// that is a symlink leading nowhere is refused (it would have made a file
/// wherever the link points, outside DIR), and nothing appears there.
#[test]
fn man_pages_over_a_dangling_symlink_are_refused_and_nothing_is_made_outside() {
    let h = Home::new(RECIPE);
    let (dir, canary) = (h.path("man1"), h.path("canary"));
    fs::create_dir_all(&dir).unwrap();
    fs::create_dir_all(&canary).unwrap();
    symlink(canary.join("planted"), dir.join("jbuild.1")).unwrap();

    let out = run_bounded(h.jbuild().args(["man", "--out"]).arg(&dir), LIMIT);
    fails_with(&out, &["cannot write man pages into", "jbuild.1"]);
    assert_eq!(
        fs::read_dir(&canary).unwrap().count(),
        0,
        "made outside DIR"
    );
    assert_eq!(kind(&dir.join("jbuild.1")), "symlink");
}
