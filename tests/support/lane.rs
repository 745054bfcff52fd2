//! Lanes: what a test needs from the machine beyond cargo — root, a tool,
//! a daemon, a kind of filesystem — declared through one helper, so that a
//! test which cannot run its body says why and is counted.
//!
//! A test names its lanes first thing: `need!(Root, Busybox);` returns from
//! the test when one of them cannot run here; `lane::need(Lane::Skopeo)`
//! answers `false` instead, for a test that leaves out only a part;
//! `lane::require(Lane::Distribution)` is for helpers that cannot return
//! from the test (it fails the test, counted). Each of them
//!
//! - probes each lane once per process (the answer is cached);
//! - appends one line per lane to the file named by `$JBUILD_LANE_LOG`, if
//!   set: `run\t<lane>\t<test>` or `skip\t<lane>\t<test>\t<why>` (one
//!   `write` on a file opened with `O_APPEND`, so lines from parallel tests
//!   and from the qemu guest never interleave); `tests/run` reads it back
//!   into the lane table;
//! - panics instead of skipping when `$JBUILD_REQUIRE_LANES` is `all` or
//!   lists the lane (comma-separated names as [`Lane::name`] spells them),
//!   naming the lane, why it cannot run and how to get it. CI sets `all`:
//!   there a skip is a failure.
//!
//! The test's name is its thread's name, which the test harness sets.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// One thing a test may need from the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Running as root: namespaces, mounts, chroot, owners, devices.
    Root,
    /// A static busybox at /bin/busybox (Debian's busybox-static): the
    /// root that build steps run in.
    Busybox,
    /// skopeo, the peer that reads what jbuild writes and writes what it
    /// reads.
    Skopeo,
    /// umoci, the other peer.
    Umoci,
    /// CNCF Distribution (Debian's docker-registry), a real registry.
    Distribution,
    /// zfs-fuse pools (real ZFS, no `zfs diff`); pools need root too.
    ZfsFuse,
    /// The qemu guest with OpenZFS: `JBUILD_TEST_ZFS_POOL` names its pool.
    Qemu,
    /// A host network interface besides `lo`, for what a step with the
    /// network sees.
    NetNs,
    /// The host's /etc/resolv.conf, which a step with the network gets.
    ResolvConf,
    /// An unprivileged user may make a user namespace (and mount overlayfs
    /// in it): root drops to uid 65534 with setpriv, then `unshare -Urm`.
    Userns,
}

/// Every lane, in the order the table lists them.
pub const ALL: [Lane; 10] = [
    Lane::Root,
    Lane::Busybox,
    Lane::Skopeo,
    Lane::Umoci,
    Lane::Distribution,
    Lane::ZfsFuse,
    Lane::Qemu,
    Lane::NetNs,
    Lane::ResolvConf,
    Lane::Userns,
];

impl Lane {
    /// The lane's name in the log, in `$JBUILD_REQUIRE_LANES` and in the
    /// table.
    pub fn name(self) -> &'static str {
        match self {
            Lane::Root => "root",
            Lane::Busybox => "busybox",
            Lane::Skopeo => "skopeo",
            Lane::Umoci => "umoci",
            Lane::Distribution => "distribution",
            Lane::ZfsFuse => "zfs-fuse",
            Lane::Qemu => "qemu",
            Lane::NetNs => "netns",
            Lane::ResolvConf => "resolv-conf",
            Lane::Userns => "userns",
        }
    }

    /// How to make the lane run on a machine that lacks it.
    pub fn how(self) -> &'static str {
        match self {
            Lane::Root => "run the tests as root (CI runs `bash tests/run` as root)",
            Lane::Busybox => "apt-get install busybox-static (tests/run installs it)",
            Lane::Skopeo => "apt-get install skopeo (tests/run installs it)",
            Lane::Umoci => "apt-get install umoci (tests/run installs it)",
            Lane::Distribution => "apt-get install docker-registry (tests/run installs it)",
            Lane::ZfsFuse => "apt-get install zfs-fuse and run as root (tests/run installs it)",
            Lane::Qemu => "bash tests/zfs-vm/lane.sh runs these tests in the OpenZFS guest",
            Lane::NetNs => {
                "give the machine an interface besides lo (ip link add dummy0 type dummy)"
            }
            Lane::ResolvConf => "give the host an /etc/resolv.conf",
            Lane::Userns => {
                "run as root (with util-linux's setpriv and unshare) on a kernel that lets an \
                 unprivileged user make a user namespace: sysctl user.max_user_namespaces > 0, \
                 kernel.unprivileged_userns_clone=1 where it exists, \
                 kernel.apparmor_restrict_unprivileged_userns=0 where it exists"
            }
        }
    }

    /// `None` when the lane can run here, or why it cannot.
    fn probe(self) -> Option<String> {
        match self {
            Lane::Root => (!is_root()).then(|| "not running as root".to_string()),
            Lane::Busybox => (!static_busybox())
                .then(|| "/bin/busybox is missing or not a static binary".to_string()),
            Lane::Skopeo => missing_tool("skopeo"),
            Lane::Umoci => missing_tool("umoci"),
            Lane::Distribution => (!Path::new(super::registry::REGISTRY_BIN).exists())
                .then(|| format!("{} is missing", super::registry::REGISTRY_BIN)),
            Lane::ZfsFuse => {
                if std::env::var_os("JBUILD_SKIP_ZFS_FUSE").is_some() {
                    // The variable once ran this lane's suite on `dir` under
                    // the zfs name; it is gone, and must not pass quietly.
                    panic!(
                        "JBUILD_SKIP_ZFS_FUSE is set, and no longer exists: unset it; without \
                         zfs-fuse the zfs-fuse lane is counted as skipped"
                    );
                }
                if !Path::new("/usr/sbin/zfs-fuse").exists() && missing_tool("zfs-fuse").is_some() {
                    Some("zfs-fuse is not installed".to_string())
                } else {
                    (!is_root()).then(|| "zfs-fuse pools need root".to_string())
                }
            }
            Lane::Qemu => std::env::var_os("JBUILD_TEST_ZFS_POOL")
                .is_none()
                .then(|| "JBUILD_TEST_ZFS_POOL is not set: not in the qemu guest".to_string()),
            Lane::NetNs => {
                let dev = std::fs::read_to_string("/proc/net/dev").unwrap_or_default();
                let others = dev
                    .lines()
                    .skip(2)
                    .filter_map(|l| l.split(':').next())
                    .filter(|i| i.trim() != "lo")
                    .count();
                (others == 0).then(|| "the host has no network interface but lo".to_string())
            }
            Lane::ResolvConf => (!Path::new("/etc/resolv.conf").exists())
                .then(|| "the host has no /etc/resolv.conf".to_string()),
            Lane::Userns => {
                if !is_root() {
                    return Some("not running as root (needed to become uid 65534)".to_string());
                }
                let out = Command::new("setpriv")
                    .args(UNPRIVILEGED_USERNS)
                    .arg("true")
                    .output();
                match out {
                    Ok(o) if o.status.success() => None,
                    Ok(o) => Some(format!(
                        "uid 65534 cannot make a user namespace ({}; {})",
                        String::from_utf8_lossy(&o.stderr).trim(),
                        [
                            "/proc/sys/user/max_user_namespaces",
                            "/proc/sys/kernel/unprivileged_userns_clone"
                        ]
                        .map(|f| format!(
                            "{f}: {}",
                            std::fs::read_to_string(f)
                                .map_or_else(|e| e.to_string(), |v| v.trim().to_string())
                        ))
                        .join(", ")
                    )),
                    Err(e) => Some(format!("setpriv cannot be run: {e}")),
                }
            }
        }
    }

    /// The probe's answer, computed once per process.
    fn missing(self) -> Option<&'static str> {
        static ANSWERS: [OnceLock<Option<String>>; ALL.len()] = [const { OnceLock::new() }; 10];
        let i = ALL.iter().position(|l| *l == self).unwrap();
        ANSWERS[i].get_or_init(|| self.probe()).as_deref()
    }

    /// Whether `$JBUILD_REQUIRE_LANES` makes this lane's skips failures.
    fn required(self) -> bool {
        let Ok(list) = std::env::var("JBUILD_REQUIRE_LANES") else {
            return false;
        };
        list.split(',')
            .map(str::trim)
            .any(|l| l == "all" || l == self.name())
    }
}

/// Whether the calling test may use `lane`: records `run` and answers
/// `true`, or records `skip` (with why) and answers `false` — or panics,
/// when the lane is required.
pub fn need(lane: Lane) -> bool {
    need_all(&[lane])
}

/// [`need`] for several lanes at once: `true` when every one can run (each
/// records `run`); otherwise each lane that cannot run records `skip`, and
/// the first required one among them panics.
pub fn need_all(lanes: &[Lane]) -> bool {
    let test = test_name();
    let missing: Vec<(Lane, &str)> = lanes
        .iter()
        .filter_map(|l| l.missing().map(|why| (*l, why)))
        .collect();
    if missing.is_empty() {
        for l in lanes {
            log(&format!("run\t{}\t{test}\n", l.name()));
        }
        return true;
    }
    for (l, why) in &missing {
        log(&format!("skip\t{}\t{test}\t{why}\n", l.name()));
    }
    if let Some((l, why)) = missing.iter().find(|(l, _)| l.required()) {
        panic!(
            "the {} lane cannot run here ({why}) and $JBUILD_REQUIRE_LANES requires it: {}",
            l.name(),
            l.how()
        );
    }
    let names: Vec<&str> = missing.iter().map(|(l, _)| l.name()).collect();
    eprintln!("{test}: skipped, lane {} cannot run here", names.join(", "));
    false
}

/// For helpers that cannot return from the test (a registry started, a
/// peer run): records `run`, or records `skip` and panics, naming the lane,
/// why and how to get it, whatever `$JBUILD_REQUIRE_LANES` says.
pub fn require(lane: Lane) {
    let test = test_name();
    match lane.missing() {
        None => log(&format!("run\t{}\t{test}\n", lane.name())),
        Some(why) => {
            log(&format!("skip\t{}\t{test}\t{why}\n", lane.name()));
            panic!(
                "the {} lane cannot run here ({why}): {}",
                lane.name(),
                lane.how()
            );
        }
    }
}

/// Declares the lanes a test needs, returning from the test (counted as a
/// skip of each missing lane) when one cannot run: `need!(Root, Busybox);`.
/// (In scope in every test module: `support` and `lane` are `#[macro_use]`.)
macro_rules! need {
    ($($lane:ident),+ $(,)?) => {
        if !$crate::support::lane::need_all(&[$($crate::support::lane::Lane::$lane),+]) {
            return;
        }
    };
}

fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("<unnamed thread>")
        .to_string()
}

/// Appends one line to `$JBUILD_LANE_LOG`, in one write.
fn log(line: &str) {
    let Some(path) = std::env::var_os("JBUILD_LANE_LOG") else {
        return;
    };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("JBUILD_LANE_LOG {}: {e}", Path::new(&path).display()));
    f.write_all(line.as_bytes())
        .unwrap_or_else(|e| panic!("JBUILD_LANE_LOG {}: {e}", Path::new(&path).display()));
}

/// `setpriv`'s arguments for what the userns lane needs: the program after
/// them runs as uid and gid 65534 (no other groups), root of a new user
/// namespace (mapped to 65534 only) with its own mount namespace.
pub const UNPRIVILEGED_USERNS: [&str; 8] = [
    "--reuid=65534",
    "--regid=65534",
    "--clear-groups",
    "unshare",
    "--user",
    "--map-root-user",
    "--mount",
    "--",
];

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn static_busybox() -> bool {
    super::common::static_busybox().is_some()
}

fn missing_tool(tool: &str) -> Option<String> {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .output()
        .is_ok_and(|o| o.status.success());
    (!found).then(|| format!("{tool} is not on PATH"))
}
