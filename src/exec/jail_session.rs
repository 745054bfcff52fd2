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

use super::jail_params::{jail_create_args, jail_remove_args, nullfs_mount_args, umount_args};
use super::prepare::{self, MountPoints};
use super::{ExecError, RunSpec};

/// Runs the administrative commands around a step.
pub trait CommandRunner {
    /// Runs `argv` to completion and returns its standard output, or an
    /// error naming the command (with its standard error) if it failed.
    fn run(&mut self, argv: &[String]) -> Result<String, ExecError>;

    /// Whether `path` is currently a mount point.
    fn is_mount_point(&mut self, path: &Path) -> bool;
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
    /// nullfs targets, in mount order.
    mounted: Vec<PathBuf>,
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
            jail_exists: false,
            points: MountPoints::new(root),
            torn_down: false,
        };
        // jail(8) needs /dev to mount devfs on.
        session.points.dir(&session.dev.clone())?;
        for m in prepare::plan_mounts(root, spec, &mut session.points)? {
            session
                .runner
                .run(&nullfs_mount_args(&m.host, &m.at, m.read_only))?;
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
        first
    }
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
                },
                BindMount {
                    host: cache.path().into(),
                    target: "/ro".into(),
                    read_only: true,
                },
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
