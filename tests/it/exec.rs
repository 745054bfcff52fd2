//! The Linux executor against a real root made of `busybox-static`.
//! These need root (namespaces, mounts, chroot) and busybox-static: each
//! test declares those lanes, and is counted as skipped without them.
#![cfg(target_os = "linux")]

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jbuild::exec::linux::LinuxExecutor;
use jbuild::exec::{BindMount, ExecError, Executor, Outcome, RunSpec, Stream};

use crate::support::lane::{self, Lane};

const BUSYBOX: &str = "/bin/busybox";

/// A temp dir holding a root with busybox and its applets in /bin, or
/// `None` when the root or busybox lane cannot run here (the test then
/// returns, counted as skipped).
fn busybox_root() -> Option<tempfile::TempDir> {
    if !lane::need_all(&[Lane::Root, Lane::Busybox]) {
        return None;
    }
    let t = tempfile::tempdir().unwrap();
    // A root is world-readable, or no other user could run anything.
    fs::set_permissions(t.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let bin = t.path().join("bin");
    fs::create_dir(&bin).unwrap();
    fs::copy(BUSYBOX, bin.join("busybox")).unwrap();
    let list = std::process::Command::new(BUSYBOX)
        .arg("--list")
        .output()
        .unwrap();
    for applet in String::from_utf8(list.stdout).unwrap().lines() {
        if applet != "busybox" {
            symlink("busybox", bin.join(applet)).unwrap();
        }
    }
    Some(t)
}

fn spec(script: &str) -> RunSpec {
    RunSpec {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        env: vec![("LANG".into(), "C".into())],
        cwd: "/".into(),
        user: None,
        network: false,
        hostname: "builder".into(),
        jail_params: vec![],
        mounts: vec![],
    }
}

#[derive(Default, Debug)]
struct Output {
    stdout: Vec<String>,
    stderr: Vec<String>,
    bytes: [usize; 2],
}

fn run(root: &Path, spec: &RunSpec) -> (Result<Outcome, ExecError>, Output) {
    let mut o = Output::default();
    let mut sink = |s: Stream, line: &[u8]| {
        let i = (s == Stream::Stderr) as usize;
        o.bytes[i] += line.len() + 1;
        if o.bytes[i] < 100_000 {
            let text = String::from_utf8_lossy(line).into_owned();
            if s == Stream::Stdout {
                o.stdout.push(text)
            } else {
                o.stderr.push(text)
            }
        }
    };
    let r = LinuxExecutor::new().run(root, spec, &mut sink);
    (r, o)
}

fn ok(root: &Path, spec: &RunSpec) -> Output {
    let (r, o) = run(root, spec);
    assert_eq!(r.unwrap(), Outcome::Exited(0), "{o:?}");
    o
}

/// Every path under `root`, relative, with a type letter.
fn listing(root: &Path) -> BTreeSet<String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for e in fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            let ft = e.file_type().unwrap();
            let rel = e.path().strip_prefix(base).unwrap().display().to_string();
            out.insert(format!(
                "{} {rel}",
                if ft.is_dir() {
                    'd'
                } else if ft.is_symlink() {
                    'l'
                } else {
                    'f'
                }
            ));
            if ft.is_dir() {
                walk(base, &e.path(), out);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(root, root, &mut out);
    out
}

#[test]
fn streams_stay_apart_and_in_order() {
    let Some(t) = busybox_root() else { return };
    let o = ok(
        t.path(),
        &spec("echo one; echo two >&2; echo three; echo four >&2; printf tail"),
    );
    assert_eq!(o.stdout, ["one", "three", "tail"]);
    assert_eq!(o.stderr, ["two", "four"]);
}

#[test]
fn exit_codes_and_signals() {
    let Some(t) = busybox_root() else { return };
    assert_eq!(
        run(t.path(), &spec("exit 3")).0.unwrap(),
        Outcome::Exited(3)
    );
    // PID 1 cannot kill itself (the kernel ignores it), but a child of
    // it can be killed, and the shell reports 128+9.
    // (`; exit $?` stops busybox from exec'ing the last command in place.)
    assert_eq!(
        run(t.path(), &spec("sh -c 'kill -9 $$'; exit $?"))
            .0
            .unwrap(),
        Outcome::Exited(137)
    );
}

#[test]
fn killed_step_is_signaled() {
    let Some(t) = busybox_root() else { return };
    let marker = format!("jbuild-test-marker-{}", std::process::id());
    let root = t.path().to_path_buf();
    let s = spec(&format!("sleep 30; : {marker}"));
    let runner = std::thread::spawn(move || run(&root, &s).0);
    // Find the step from the host: PID 1 of its namespace, with the marker.
    let deadline = Instant::now() + Duration::from_secs(10);
    let pid = loop {
        assert!(Instant::now() < deadline, "the step never showed up");
        if let Some(pid) = find_step(&marker) {
            break pid;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert_eq!(runner.join().unwrap().unwrap(), Outcome::Signaled(9));
}

#[test]
fn ctrl_c_stops_the_step_and_everything_it_started() {
    let Some(t) = busybox_root() else { return };
    let marker = format!("jbuild-test-sigint-{}", std::process::id());
    let root = t.path().to_path_buf();
    // PID 1 ignores SIGINT; a background child would outlive a naive kill.
    let s = spec(&format!("sleep 60 & sleep 60; : {marker}"));
    let runner = std::thread::spawn(move || run(&root, &s).0);
    let deadline = Instant::now() + Duration::from_secs(10);
    let step = loop {
        assert!(Instant::now() < deadline, "the step never showed up");
        if let Some(pid) = find_step(&marker) {
            break pid;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The terminal sends SIGINT to the foreground process group: jbuild
    // (which handles it) and the supervisor, the step's parent.
    let ns = fs::read_link(format!("/proc/{step}/ns/pid")).unwrap();
    let status = fs::read_to_string(format!("/proc/{step}/status")).unwrap();
    let ppid: i32 = status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(ppid),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    assert_eq!(
        runner.join().unwrap().unwrap(),
        Outcome::Signaled(libc_sigint())
    );
    // Every process of the step's PID namespace goes (zombies waiting for
    // the host's init to reap them have no namespace any more).
    let deadline = Instant::now() + Duration::from_secs(5);
    while in_namespace(&ns) > 0 {
        assert!(Instant::now() < deadline, "processes of the step survived");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn in_namespace(ns: &Path) -> usize {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| fs::read_link(e.path().join("ns/pid")).is_ok_and(|l| l == ns))
        .count()
}

fn libc_sigint() -> i32 {
    nix::sys::signal::Signal::SIGINT as i32
}

fn find_step(marker: &str) -> Option<i32> {
    for e in fs::read_dir("/proc").ok()? {
        let Ok(pid) = e.ok()?.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let is_pid1 = status
            .lines()
            .any(|l| l.starts_with("NSpid:") && l.ends_with("\t1"));
        if is_pid1 && String::from_utf8_lossy(&cmdline).contains(marker) {
            return Some(pid);
        }
    }
    None
}

#[test]
fn pid_hostname_and_proc() {
    let Some(t) = busybox_root() else { return };
    let before = listing(t.path());
    let o = ok(
        t.path(),
        &spec("echo $$; hostname; grep -c ^Pid: /proc/self/status; ls /dev; ps | wc -l"),
    );
    assert_eq!(o.stdout[0], "1");
    assert_eq!(o.stdout[1], "builder");
    assert_eq!(o.stdout[2], "1");
    for dev in ["null", "zero", "urandom", "fd", "stdout"] {
        assert!(o.stdout.iter().any(|l| l == dev), "no /dev/{dev}: {o:?}");
    }
    // ps sees only the step's own processes (header, sh, ps).
    assert!(
        o.stdout[o.stdout.len() - 1].trim().parse::<u32>().unwrap() <= 4,
        "{o:?}"
    );
    assert_eq!(listing(t.path()), before, "proc or dev left in the root");
}

#[test]
fn dev_nodes_work() {
    let Some(t) = busybox_root() else { return };
    let o = ok(
        t.path(),
        &spec(
            "echo gone > /dev/null; head -c 4 /dev/zero | wc -c; head -c 16 /dev/urandom | wc -c",
        ),
    );
    assert_eq!(o.stdout, ["4", "16"]);
}

#[test]
fn network_is_off_by_default_and_on_when_asked() {
    let Some(t) = busybox_root() else { return };
    // /proc/net/dev: two header lines, then one line per interface.
    let ifaces = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .skip(2)
            .map(|l| l.split(':').next().unwrap().trim().to_string())
            .collect()
    };
    let o = ok(t.path(), &spec("cat /proc/net/dev"));
    assert_eq!(ifaces(&o.stdout), ["lo"]);
    let o = ok(t.path(), &spec("ip link show lo"));
    assert!(o.stdout[0].contains(",UP"), "lo is not up: {o:?}");

    let host: Vec<String> = fs::read_to_string("/proc/net/dev")
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    // The network=true half needs an interface besides lo to compare.
    need!(NetNs);
    let mut s = spec("cat /proc/net/dev");
    s.network = true;
    let o = ok(t.path(), &s);
    let (mut inside, mut outside) = (ifaces(&o.stdout), ifaces(&host));
    inside.sort();
    outside.sort();
    assert_eq!(inside, outside);
}

#[test]
fn resolv_conf_only_with_network_and_leaves_no_trace() {
    let Some(t) = busybox_root() else { return };
    need!(ResolvConf);
    fs::create_dir(t.path().join("etc")).unwrap();
    let before = listing(t.path());
    let mut s =
        spec("test -f /etc/resolv.conf && echo yes; echo x > /etc/resolv.conf || echo refused");
    s.network = true;
    let o = ok(t.path(), &s);
    assert_eq!(o.stdout, ["yes", "refused"]);
    assert_eq!(listing(t.path()), before);
}

#[test]
fn environment_is_exactly_the_spec() {
    let Some(t) = busybox_root() else { return };
    // `env` itself, not a shell, which would add PWD and SHLVL.
    let mut s = spec("");
    s.argv = vec!["env".into()];
    s.env = vec![("B".into(), "two words".into()), ("A".into(), "1".into())];
    let o = ok(t.path(), &s);
    let want = [
        "A=1",
        "B=two words",
        "HOME=/",
        "PATH=/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin",
    ];
    let mut got = o.stdout.clone();
    got.sort();
    assert_eq!(got, want);
    s.env.push(("PATH".into(), "/bin".into()));
    s.env.push(("HOME".into(), "/nowhere".into()));
    let o = ok(t.path(), &s);
    assert!(
        o.stdout.contains(&"PATH=/bin".to_string())
            && o.stdout.contains(&"HOME=/nowhere".to_string())
    );
}

#[test]
fn working_directory_is_created_and_used() {
    let Some(t) = busybox_root() else { return };
    let mut s = spec("pwd; touch here");
    s.cwd = "/work/sub".into();
    let o = ok(t.path(), &s);
    assert_eq!(o.stdout, ["/work/sub"]);
    assert!(t.path().join("work/sub/here").is_file());
}

#[test]
fn user_from_the_roots_passwd() {
    let Some(t) = busybox_root() else { return };
    fs::create_dir(t.path().join("etc")).unwrap();
    fs::write(
        t.path().join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
    )
    .unwrap();
    fs::write(
        t.path().join("etc/group"),
        "root:x:0:\nnogroup:x:65534:\nextra:x:700:nobody\n",
    )
    .unwrap();
    let mut s = spec("id -u; id -g; id -G; echo $HOME; touch /cannot 2>/dev/null || echo denied");
    s.user = Some("nobody".into());
    let o = ok(t.path(), &s);
    assert_eq!(
        o.stdout,
        ["65534", "65534", "65534 700", "/nonexistent", "denied"]
    );
    s.user = Some("1234:5678".into());
    let o = ok(t.path(), &s);
    assert_eq!(o.stdout[..3], ["1234", "5678", "5678"]);
}

#[test]
fn bind_mounts_come_and_go() {
    let Some(t) = busybox_root() else { return };
    let host = tempfile::tempdir().unwrap();
    fs::write(host.path().join("shared"), "from the host\n").unwrap();
    let ro = tempfile::tempdir().unwrap();
    let before = listing(t.path());
    let mut s = spec("cat /cache/pkg/shared; echo back > /cache/pkg/written; echo no > /ro/x 2>/dev/null || echo refused");
    s.mounts = vec![
        BindMount {
            host: host.path().to_path_buf(),
            target: "/cache/pkg".into(),
            read_only: false,
        }
        .into(),
        BindMount {
            host: ro.path().to_path_buf(),
            target: "/ro".into(),
            read_only: true,
        }
        .into(),
    ];
    let o = ok(t.path(), &s);
    assert_eq!(o.stdout, ["from the host", "refused"]);
    assert_eq!(
        fs::read_to_string(host.path().join("written")).unwrap(),
        "back\n"
    );
    assert!(!ro.path().join("x").exists());
    assert_eq!(listing(t.path()), before, "mount points left in the root");
}

#[test]
fn lots_of_output_on_both_streams() {
    let Some(t) = busybox_root() else { return };
    const N: usize = 5 * 1024 * 1024;
    let (r, o) = run(
        t.path(),
        &spec(&format!(
            "yes 0123456789abcde | head -c {N} & yes err | head -c {N} >&2; wait"
        )),
    );
    assert_eq!(r.unwrap(), Outcome::Exited(0));
    assert_eq!(o.bytes, [N, N]);
}

#[test]
fn missing_program() {
    let Some(t) = busybox_root() else { return };
    let mut s = spec("");
    s.argv = vec!["no-such-tool".into(), "--version".into()];
    let (r, o) = run(t.path(), &s);
    assert_eq!(r.unwrap(), Outcome::Exited(127));
    assert!(
        o.stderr[0].starts_with("exec: no-such-tool: not found"),
        "{o:?}"
    );
    // A script whose interpreter is missing fails at exec.
    fs::write(t.path().join("bin/script"), "#!/usr/bin/nothing\n").unwrap();
    fs::set_permissions(
        t.path().join("bin/script"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    s.argv = vec!["script".into()];
    let (r, o) = run(t.path(), &s);
    assert_eq!(r.unwrap(), Outcome::Exited(127));
    assert!(o.stderr[0].contains("script"), "{o:?}");
}

#[test]
fn a_step_leaves_exactly_what_it_wrote() {
    let Some(t) = busybox_root() else { return };
    fs::create_dir(t.path().join("etc")).unwrap();
    let before = listing(t.path());
    ok(t.path(), &spec("echo hello > /etc/motd"));
    let after = listing(t.path());
    let added: Vec<_> = after.difference(&before).collect();
    assert_eq!(added, ["f etc/motd"]);
    assert!(before.is_subset(&after));
}

#[test]
fn nothing_escapes_through_symlinks_in_the_root() {
    let Some(t) = busybox_root() else { return };
    // A root whose /dev and /work point at host paths must not touch them.
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path(), t.path().join("work")).unwrap();
    let mut s = spec("pwd; touch f");
    s.cwd = "/work/x".into();
    ok(t.path(), &s);
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    let inner: PathBuf = t
        .path()
        .join(outside.path().strip_prefix("/").unwrap())
        .join("x/f");
    assert!(inner.is_file(), "{}", inner.display());
}

#[test]
fn failed_setup_is_an_error_and_leaves_no_trace() {
    let Some(t) = busybox_root() else { return };
    let before = listing(t.path());
    let mut s = spec("true");
    s.hostname = "h".repeat(100); // longer than the kernel allows
    let err = run(t.path(), &s).0.unwrap_err().to_string();
    assert!(err.contains("cannot set the hostname"), "{err}");
    assert_eq!(listing(t.path()), before);

    let mut s = spec("true");
    s.mounts = vec![BindMount {
        host: "/no/such/dir".into(),
        target: "/mnt/x".into(),
        read_only: false,
    }
    .into()];
    let err = run(t.path(), &s).0.unwrap_err().to_string();
    assert!(err.contains("/no/such/dir"), "{err}");
    assert_eq!(listing(t.path()), before);
}
