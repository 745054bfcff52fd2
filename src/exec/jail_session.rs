//! The life of one step's jail, as a sequence of host commands: mount
//! the nullfs mounts, create the jail; after the step, remove the jail,
//! unmount its devfs and the nullfs mounts, remove the mount points that
//! were created for it. Teardown always happens — on success, on error,
//! on panic (the session's `Drop`) — and in that order, so nothing is
//! unmounted under a running process and nothing is left in the layer.
//!
//! Commands go through a [`CommandRunner`], so the sequence is tested on
//! any platform with a runner that only records what it is asked to run.
//! The step's own process is not one of these commands: the FreeBSD
//! executor attaches it to the jail by jid (`jail_attach(2)`).

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::jail_params::{
    jail_create_args, jail_remove_args, nullfs_mount_args, tmpfs_mount_args, umount_args,
};
use super::prepare::{self, MountPoints, Planned, Staging};
use super::{ExecError, Outcome, RunSpec};

/// Runs the administrative commands around a step.
pub trait CommandRunner {
    /// Runs `argv` to completion and returns its standard output, or an
    /// error naming the command (with its standard error) if it failed.
    fn run(&mut self, argv: &[String]) -> Result<String, ExecError>;

    /// Whether `path` is currently a mount point.
    fn is_mount_point(&mut self, path: &Path) -> bool;

    /// Creates the new file `path` (in the secrets' tmpfs) holding `data`,
    /// with this mode and owner.
    fn write_secret(
        &mut self,
        path: &Path,
        data: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<(), ExecError>;
}

/// The real thing: `std::process::Command`, no shell.
#[derive(Debug, Default)]
pub struct SystemRunner;

impl CommandRunner for SystemRunner {
    fn run(&mut self, argv: &[String]) -> Result<String, ExecError> {
        let shown = argv.join(" ");
        let out = Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .map_err(|source| ExecError::Io {
                context: format!("cannot run `{shown}`"),
                source,
            })?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(ExecError::Io {
                context: format!("`{shown}` failed ({})", out.status),
                source: io::Error::other(stderr),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn write_secret(
        &mut self,
        path: &Path,
        data: &[u8],
        mode: u32,
        uid: u32,
        gid: u32,
    ) -> Result<(), ExecError> {
        use std::io::Write;
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let context = || format!("cannot write the secret file {}", path.display());
        let io = |source| ExecError::Io {
            context: context(),
            source,
        };
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        f.write_all(data).map_err(io)?;
        std::os::unix::fs::fchown(&f, Some(uid), Some(gid)).map_err(io)?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io)
    }

    /// A directory on another device than its parent is a mount point.
    fn is_mount_point(&mut self, path: &Path) -> bool {
        let parent = path.parent().unwrap_or(Path::new("/"));
        match (std::fs::symlink_metadata(path), std::fs::metadata(parent)) {
            (Ok(m), Ok(p)) => m.dev() != p.dev(),
            _ => false,
        }
    }
}

/// One step's jail and what was set up for it. Dropping it tears it all
/// down; [`JailSession::teardown`] does the same and reports errors.
pub struct JailSession<'r> {
    runner: &'r mut dyn CommandRunner,
    name: String,
    jid: i32,
    dev: PathBuf,
    /// Mounted targets (nullfs, tmpfs, the secrets' tmpfs), in mount order.
    mounted: Vec<PathBuf>,
    /// The directory the secrets' tmpfs is mounted on, removed last.
    staging: Option<Staging>,
    jail_exists: bool,
    points: MountPoints,
    torn_down: bool,
}

impl<'r> JailSession<'r> {
    /// Mounts the step's nullfs mounts and creates the jail `name` on
    /// `root` (an absolute path without symlinks). On error, whatever was
    /// done is undone before returning.
    pub fn start(
        runner: &'r mut dyn CommandRunner,
        root: &Path,
        name: &str,
        spec: &RunSpec,
    ) -> Result<Self, ExecError> {
        // Refuse bad parameters before touching anything.
        let create = jail_create_args(root, name, spec)?;
        let mut session = JailSession {
            runner,
            name: name.to_string(),
            jid: 0,
            dev: prepare::inside(root, "/dev")?,
            mounted: Vec::new(),
            staging: None,
            jail_exists: false,
            points: MountPoints::new(root),
            torn_down: false,
        };
        // jail(8) needs /dev to mount devfs on.
        session.points.dir(&session.dev.clone())?;
        let planned = prepare::plan_mounts(root, spec, &mut session.points)?;
        session.staging = Staging::for_mounts(&planned)?;
        if let Some(dir) = session.staging.as_ref().map(|s| s.path().to_path_buf()) {
            session
                .runner
                .run(&tmpfs_mount_args(&dir, prepare::STAGING_OPTIONS))?;
            session.mounted.push(dir);
        }
        for m in planned {
            let argv = match &m.what {
                Planned::Bind { host, read_only } => nullfs_mount_args(host, &m.at, *read_only),
                Planned::Tmpfs { size } => tmpfs_mount_args(&m.at, &prepare::tmpfs_options(*size)),
                Planned::Secret {
                    name,
                    data,
                    mode,
                    uid,
                    gid,
                } => {
                    let dir = session.staging.as_ref().map(Staging::path);
                    let file = dir.unwrap_or(Path::new("/nonexistent")).join(name);
                    session
                        .runner
                        .write_secret(&file, data.expose(), *mode, *uid, *gid)?;
                    nullfs_mount_args(&file, &m.at, true)
                }
            };
            session.runner.run(&argv)?;
            session.mounted.push(m.at);
        }
        let out = session.runner.run(&create)?;
        session.jail_exists = true;
        session.jid = out.trim().parse().map_err(|_| ExecError::Io {
            context: format!(
                "`jail -c` printed {:?} where a jail id was expected",
                out.trim()
            ),
            source: io::Error::from(io::ErrorKind::InvalidData),
        })?;
        Ok(session)
    }

    pub fn jid(&self) -> i32 {
        self.jid
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Removes the jail, killing what still runs in it (a daemon a step
    /// started would otherwise hold the output pipes open). Done once;
    /// the rest of the teardown comes after.
    pub fn remove_jail(&mut self) -> Result<(), ExecError> {
        if !self.jail_exists {
            return Ok(());
        }
        self.jail_exists = false;
        self.runner.run(&jail_remove_args(&self.name)).map(drop)
    }

    /// Undoes everything, newest first, going on past errors; returns the
    /// first one.
    pub fn teardown(&mut self) -> Result<(), ExecError> {
        self.torn_down = true;
        let mut first = self.remove_jail();
        let mut keep = |r: Result<(), ExecError>| {
            if first.is_ok() {
                first = r;
            }
        };
        if self.runner.is_mount_point(&self.dev) {
            keep(self.runner.run(&umount_args(&self.dev)).map(drop));
        }
        while let Some(target) = self.mounted.pop() {
            keep(self.runner.run(&umount_args(&target)).map(drop));
        }
        keep(self.points.cleanup());
        // Its tmpfs is unmounted by now (mounted first, so unmounted last).
        self.staging = None;
        first
    }
}

/// One step's whole life in a jail: [`JailSession::start`], then `step`
/// (which starts the step's process, attached to `session.jid()`, and
/// calls `session.remove_jail()` the moment that process ends), then the
/// teardown — whatever `step` returned: a failed step (`Ok` with a
/// non-zero [`Outcome`]), a step stopped by Ctrl-C (`Ok(Signaled(2))`: the
/// step shares jbuild's process group, so SIGINT reaches it and it ends),
/// a spawn that failed (`Err`), or a panic (unwinding drops the session,
/// whose `Drop` tears down). The order is always the one jail(8) and
/// mount(8) need: the jail removed first (no process left to hold a
/// mount), then its devfs, then the nullfs mounts newest first.
pub fn run_in_jail(
    runner: &mut dyn CommandRunner,
    root: &Path,
    name: &str,
    spec: &RunSpec,
    step: impl FnOnce(&mut JailSession<'_>) -> Result<Outcome, ExecError>,
) -> Result<Outcome, ExecError> {
    let mut session = JailSession::start(runner, root, name, spec)?;
    let result = step(&mut session);
    let cleanup = session.teardown();
    prepare::finish(result, cleanup)
}

impl Drop for JailSession<'_> {
    fn drop(&mut self) {
        if !self.torn_down {
            if let Err(e) = self.teardown() {
                tracing::warn!("tearing down jail {}: {e}", self.name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::BindMount;
    use std::fs;

    /// Records commands; fails the one whose argv contains `fail_on`.
    #[derive(Default)]
    struct Recorder {
        log: Vec<String>,
        fail_on: Option<&'static str>,
        dev_mounted: bool,
    }

    impl CommandRunner for Recorder {
        fn run(&mut self, argv: &[String]) -> Result<String, ExecError> {
            let line = argv.join(" ");
            self.log.push(line.clone());
            if self.fail_on.is_some_and(|f| line.contains(f)) {
                return Err(ExecError::Io {
                    context: format!("`{line}` failed"),
                    source: io::Error::other("boom"),
                });
            }
            if line.contains(" -c ") {
                self.dev_mounted = true;
                return Ok("42\n".into());
            }
            // `jail -R` leaves devfs mounted, as jail(8) does for a jail
            // made on the command line: only the umount clears it.
            if line.ends_with("/dev") && line.contains("umount") {
                self.dev_mounted = false;
            }
            Ok(String::new())
        }

        fn is_mount_point(&mut self, path: &Path) -> bool {
            self.dev_mounted && path.ends_with("dev")
        }

        /// Logs the write, never the bytes; writes nothing (the staging
        /// tmpfs is not really mounted here).
        fn write_secret(
            &mut self,
            path: &Path,
            data: &[u8],
            mode: u32,
            uid: u32,
            gid: u32,
        ) -> Result<(), ExecError> {
            self.log.push(format!(
                "write {} mode {mode:o} owner {uid}:{gid} ({} bytes)",
                path.display(),
                data.len()
            ));
            Ok(())
        }
    }

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, RunSpec) {
        let root = tempfile::tempdir().unwrap();
        fs::create_dir(root.path().join("etc")).unwrap();
        let cache = tempfile::tempdir().unwrap();
        let spec = RunSpec {
            argv: vec!["/bin/sh".into()],
            env: vec![],
            cwd: "/".into(),
            user: None,
            network: false,
            hostname: "b".into(),
            jail_params: vec![],
            mounts: vec![
                BindMount {
                    host: cache.path().into(),
                    target: "/var/cache/pkg".into(),
                    read_only: false,
                }
                .into(),
                BindMount {
                    host: cache.path().into(),
                    target: "/ro".into(),
                    read_only: true,
                }
                .into(),
            ],
        };
        (root, cache, spec)
    }

    /// The log with the temp paths replaced, for comparing.
    fn shown(log: &[String], root: &Path, cache: &Path) -> Vec<String> {
        log.iter()
            .map(|l| {
                l.replace(&root.display().to_string(), "ROOT")
                    .replace(&cache.display().to_string(), "CACHE")
            })
            .collect()
    }

    #[test]
    fn full_life_in_order() {
        let (root, cache, spec) = setup();
        let mut rec = Recorder::default();
        let mut s = JailSession::start(&mut rec, root.path(), "jbuild-1-0", &spec).unwrap();
        assert_eq!(s.jid(), 42);
        assert!(root.path().join("var/cache/pkg").is_dir() && root.path().join("dev").is_dir());
        s.remove_jail().unwrap(); // when the step's process ended
        s.teardown().unwrap();
        drop(s);
        assert_eq!(
            shown(&rec.log, root.path(), cache.path()),
            [
                "/sbin/mount -t nullfs -o rw CACHE ROOT/var/cache/pkg",
                "/sbin/mount -t nullfs -o ro CACHE ROOT/ro",
                "/usr/sbin/jail -i -c name=jbuild-1-0 path=ROOT host.hostname=b persist exec.clean mount.devfs devfs_ruleset=4 \
                 enforce_statfs=2 children.max=0 ip4=disable ip6=disable",
                "/usr/sbin/jail -R jbuild-1-0",
                "/sbin/umount -f ROOT/dev",
                "/sbin/umount -f ROOT/ro",
                "/sbin/umount -f ROOT/var/cache/pkg",
            ]
        );
        let left: Vec<_> = fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["etc"]);
    }

    #[test]
    fn failed_creation_undoes_the_mounts() {
        let (root, cache, spec) = setup();
        let mut rec = Recorder {
            fail_on: Some("jail -i -c"),
            ..Default::default()
        };
        assert!(JailSession::start(&mut rec, root.path(), "j", &spec).is_err());
        let log = shown(&rec.log, root.path(), cache.path());
        assert_eq!(
            log[3..],
            [
                "/sbin/umount -f ROOT/ro",
                "/sbin/umount -f ROOT/var/cache/pkg"
            ]
        );
        let left: Vec<_> = fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["etc"]);
    }

    #[test]
    fn failed_mount_undoes_the_ones_before() {
        let (root, cache, spec) = setup();
        let mut rec = Recorder {
            fail_on: Some("-o ro"),
            ..Default::default()
        };
        assert!(JailSession::start(&mut rec, root.path(), "j", &spec).is_err());
        let log = shown(&rec.log, root.path(), cache.path());
        assert_eq!(log.len(), 3, "{log:?}");
        assert_eq!(log[2], "/sbin/umount -f ROOT/var/cache/pkg");
    }

    #[test]
    fn a_panic_still_tears_down() {
        let (root, _cache, spec) = setup();
        let mut rec = Recorder::default();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _s = JailSession::start(&mut rec, root.path(), "j", &spec).unwrap();
            panic!("the sink blew up");
        }));
        assert!(r.is_err());
        assert!(rec.log.iter().any(|l| l == "/usr/sbin/jail -R j"));
        assert!(rec.log.last().unwrap().starts_with("/sbin/umount -f"));
    }

    #[test]
    fn teardown_goes_on_past_errors() {
        let (root, _cache, spec) = setup();
        let mut rec = Recorder {
            fail_on: Some(" -R "),
            ..Default::default()
        };
        let mut s = JailSession::start(&mut rec, root.path(), "j", &spec).unwrap();
        assert!(s.teardown().is_err());
        drop(s);
        assert_eq!(rec.log.iter().filter(|l| l.contains("umount")).count(), 3);
    }

    /// The teardown every path must end with, per jail(8) ("-R: remove
    /// the jail ... without using jail.conf"; devfs stays mounted for a
    /// jail not in jail.conf, so it is unmounted separately) and mount(8)/
    /// umount(8) (a file system is unmounted before the one it is mounted
    /// on: the newest nullfs mount first).
    const TEARDOWN: [&str; 4] = [
        "/usr/sbin/jail -R j",
        "/sbin/umount -f ROOT/dev",
        "/sbin/umount -f ROOT/ro",
        "/sbin/umount -f ROOT/var/cache/pkg",
    ];

    fn tail(log: &[String], root: &Path, cache: &Path) -> Vec<String> {
        let shown = shown(log, root, cache);
        shown[shown.len() - TEARDOWN.len()..].to_vec()
    }

    fn nothing_left(root: &Path) {
        let left: Vec<_> = fs::read_dir(root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["etc"]);
    }

    #[test]
    fn every_way_a_step_ends_tears_down_in_order() {
        use std::cell::Cell;
        type Step = Box<dyn FnOnce(&mut JailSession<'_>) -> Result<Outcome, ExecError>>;
        let cases: Vec<(&str, Step, Result<Outcome, ()>)> = vec![
            (
                "succeeds",
                Box::new(|s| {
                    s.remove_jail()?;
                    Ok(Outcome::Exited(0))
                }),
                Ok(Outcome::Exited(0)),
            ),
            (
                "fails",
                Box::new(|s| {
                    s.remove_jail()?;
                    Ok(Outcome::Exited(1))
                }),
                Ok(Outcome::Exited(1)),
            ),
            // Ctrl-C: SIGINT ends the step's process; the jail goes then.
            (
                "ctrl-c",
                Box::new(|s| {
                    s.remove_jail()?;
                    Ok(Outcome::Signaled(2))
                }),
                Ok(Outcome::Signaled(2)),
            ),
            // The process never started: the jail was never emptied by an
            // exit, so the teardown removes it.
            (
                "spawn fails",
                Box::new(|_| {
                    Err(ExecError::Spawn {
                        program: "sh".into(),
                        root: "r".into(),
                        reason: "ENOEXEC".into(),
                    })
                }),
                Err(()),
            ),
        ];
        for (what, step, want) in cases {
            let (root, cache, spec) = setup();
            let mut rec = Recorder::default();
            let jid = Cell::new(0);
            let got = run_in_jail(&mut rec, root.path(), "j", &spec, |s| {
                jid.set(s.jid());
                step(s)
            });
            assert_eq!(got.map_err(drop), want, "{what}");
            assert_eq!(jid.get(), 42, "{what}: the step gets the jail's id");
            assert_eq!(
                tail(&rec.log, root.path(), cache.path()),
                TEARDOWN,
                "{what}"
            );
            assert_eq!(
                rec.log.iter().filter(|l| l.contains(" -R ")).count(),
                1,
                "{what}"
            );
            nothing_left(root.path());
        }
    }

    #[test]
    fn a_panicking_step_still_tears_down_in_order() {
        let (root, cache, spec) = setup();
        let mut rec = Recorder::default();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_in_jail(&mut rec, root.path(), "j", &spec, |_| {
                panic!("the output sink blew up")
            })
        }));
        assert!(r.is_err());
        assert_eq!(tail(&rec.log, root.path(), cache.path()), TEARDOWN);
        nothing_left(root.path());
    }

    #[test]
    fn a_failed_teardown_fails_a_successful_step() {
        let (root, _cache, spec) = setup();
        let mut rec = Recorder {
            fail_on: Some("umount -f /"),
            ..Default::default()
        };
        let r = run_in_jail(&mut rec, root.path(), "j", &spec, |s| {
            s.remove_jail()?;
            Ok(Outcome::Exited(0))
        });
        // The layer could keep a trace of the mounts: not a success.
        assert!(r.is_err());
    }

    /// A step with the network gets the host's resolv.conf read-only
    /// (nullfs, a file onto a file), and the layer keeps none of it: the
    /// mount point created for it is removed after the unmount.
    #[test]
    fn network_steps_see_resolv_conf_and_leave_none() {
        if !Path::new("/etc/resolv.conf").exists() {
            eprintln!("skipping: this host has no /etc/resolv.conf");
            return;
        }
        let (root, _cache, mut spec) = setup();
        spec.mounts.clear();
        spec.network = true;
        let mut rec = Recorder::default();
        run_in_jail(&mut rec, root.path(), "j", &spec, |s| {
            s.remove_jail()?;
            Ok(Outcome::Exited(0))
        })
        .unwrap();
        let log = shown(&rec.log, root.path(), Path::new("/nonexistent"));
        assert_eq!(
            log,
            [
                "/sbin/mount -t nullfs -o ro /etc/resolv.conf ROOT/etc/resolv.conf",
                "/usr/sbin/jail -i -c name=j path=ROOT host.hostname=b persist exec.clean mount.devfs devfs_ruleset=4 \
                 enforce_statfs=2 children.max=0 ip4=inherit ip6=inherit",
                "/usr/sbin/jail -R j",
                "/sbin/umount -f ROOT/dev",
                "/sbin/umount -f ROOT/etc/resolv.conf",
            ]
        );
        assert!(!root.path().join("etc/resolv.conf").exists());
    }

    /// Secrets and tmpfs, per tmpfs(5) (`mount -t tmpfs -o mode=...,size=...
    /// tmpfs DIR`, size in bytes) and nullfs(5) (a file onto a file): the
    /// secrets' tmpfs is mounted first, on a private host directory, each
    /// secret written into it and bound read-only at its target; the
    /// teardown unmounts in reverse, the secrets' tmpfs last, and removes
    /// the staging directory and every mount point it created.
    #[test]
    fn secrets_and_tmpfs_mount_in_order_and_leave_nothing() {
        use crate::exec::{Mount, SecretData, SecretFile, TmpfsMount};
        let (root, _cache, mut spec) = setup();
        spec.mounts = vec![
            Mount::Tmpfs(TmpfsMount {
                target: "/scratch".into(),
                size: Some(64 << 20),
            }),
            Mount::Secret(SecretFile {
                target: "/run/secrets/tok".into(),
                data: SecretData::new("CANARY-never-logged"),
                mode: 0o400,
                uid: 0,
                gid: 0,
            }),
        ];
        let mut rec = Recorder::default();
        let mut staging = PathBuf::new();
        run_in_jail(&mut rec, root.path(), "j", &spec, |s| {
            staging = s.staging.as_ref().unwrap().path().to_path_buf();
            assert!(staging.is_dir());
            s.remove_jail()?;
            Ok(Outcome::Exited(0))
        })
        .unwrap();
        let log: Vec<String> = shown(&rec.log, root.path(), Path::new("/nonexistent"))
            .into_iter()
            .map(|l| l.replace(&staging.display().to_string(), "STAGING"))
            .collect();
        assert_eq!(
            log,
            [
                "/sbin/mount -t tmpfs -o mode=0700 tmpfs STAGING",
                "/sbin/mount -t tmpfs -o mode=1777,size=67108864 tmpfs ROOT/scratch",
                "write STAGING/secret-1 mode 400 owner 0:0 (19 bytes)",
                "/sbin/mount -t nullfs -o ro STAGING/secret-1 ROOT/run/secrets/tok",
                "/usr/sbin/jail -i -c name=j path=ROOT host.hostname=b persist exec.clean mount.devfs devfs_ruleset=4 \
                 enforce_statfs=2 children.max=0 ip4=disable ip6=disable",
                "/usr/sbin/jail -R j",
                "/sbin/umount -f ROOT/dev",
                "/sbin/umount -f ROOT/run/secrets/tok",
                "/sbin/umount -f ROOT/scratch",
                "/sbin/umount -f STAGING",
            ]
        );
        assert!(log.iter().all(|l| !l.contains("CANARY")));
        assert!(!staging.exists(), "the staging directory is removed");
        nothing_left(root.path());
    }

    #[test]
    fn bad_parameters_touch_nothing() {
        let (root, _cache, mut spec) = setup();
        spec.jail_params = vec![("exec.prestart".into(), "rm -rf /".into())];
        let mut rec = Recorder::default();
        assert!(matches!(
            JailSession::start(&mut rec, root.path(), "j", &spec),
            Err(ExecError::Invalid(_))
        ));
        assert!(rec.log.is_empty());
        assert!(!root.path().join("dev").exists());
    }
}
