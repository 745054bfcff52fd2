//! `jbuild run` on FreeBSD: the jail's life as data.
//!
//! The jail is made by [`crate::create::create`] as `jbuild create` makes
//! it (the root a ZFS clone of the image's top layer where the backend
//! can, else a copy; the image's jail parameters with the same consent;
//! the entry in its own jail.conf file), but with nothing started
//! (`persist`, [`super::ForRun`]). Then, per jail(8) and jexec(8):
//!
//! ```text
//! /usr/sbin/jail -f CONF -c NAME                        create and start it from its entry
//! /usr/sbin/jexec [-U USER] [-d DIR] NAME ARGV...       the command, on jbuild's terminal,
//!                                                       with exactly the image's environment
//! /usr/sbin/jail -f CONF -r NAME                        stop and remove it (its mounts go too)
//! with --rm:
//! /sbin/zfs destroy -f DATASET                          a cloned root
//! /bin/chflags -R 0 ROOT; /bin/rm -rf ROOT              a copied root (schg files included)
//! the entry removed from CONF (the file, when nothing else is in it)
//! ```
//!
//! The jail is stopped whatever the command did, and removed with `--rm`
//! even when it did not start. The commands go through a [`JailRunner`];
//! the one that runs them (`SystemRunner`) is FreeBSD's only.

use std::path::{Path, PathBuf};

use super::{name_of, spec_for, KeptJail, Ran, RunError, RunRequest};
use crate::create::{CreateOptions, Created, RootFrom};
use crate::exec::{Outcome, RunSpec};
use crate::image::{ImageState, Platform, Unpacker};

/// `PATH` when the image's environment has none (as the executors give
/// build steps).
const DEFAULT_PATH: &str = "/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin";

/// The command attached to the terminal, and its whole environment
/// (jexec(8) without `-l` passes on its own, so jbuild's is replaced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attach {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// One run's host commands (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JailRun {
    pub name: String,
    pub conf: PathBuf,
    pub start: Vec<String>,
    pub attach: Attach,
    pub stop: Vec<String>,
    /// Empty unless `--rm`: what removes the root.
    pub remove_root: Vec<Vec<String>>,
    /// `--rm`: the entry (and the fstab jbuild wrote) removed too.
    pub remove_files: Option<Vec<PathBuf>>,
}

fn words(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// The commands for the jail `made` (named `name`) running `spec` as
/// `user` (a name in the jail's passwd; `None`: root).
pub fn plan(
    made: &Created,
    name: &str,
    spec: &RunSpec,
    user: Option<&str>,
    remove: bool,
) -> JailRun {
    let conf = made.conf.display().to_string();
    let mut argv = words(&["/usr/sbin/jexec"]);
    if let Some(u) = user {
        argv.extend(words(&["-U", u]));
    }
    if spec.cwd != "/" && !spec.cwd.is_empty() {
        argv.extend(words(&["-d", &spec.cwd]));
    }
    argv.push(name.to_string());
    argv.extend(spec.argv.iter().cloned());
    let mut env = spec.env.clone();
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    let root = made.root.display().to_string();
    let remove_root = match (&made.root_from, remove) {
        (_, false) => Vec::new(),
        (RootFrom::Clone { dataset, .. }, true) => {
            vec![words(&["/sbin/zfs", "destroy", "-f", dataset])]
        }
        (RootFrom::Copy { .. }, true) => vec![
            words(&["/bin/chflags", "-R", "0", &root]),
            words(&["/bin/rm", "-rf", &root]),
        ],
    };
    JailRun {
        name: name.to_string(),
        conf: made.conf.clone(),
        start: words(&["/usr/sbin/jail", "-f", &conf, "-c", name]),
        attach: Attach { argv, env },
        stop: words(&["/usr/sbin/jail", "-f", &conf, "-r", name]),
        remove_root,
        remove_files: remove.then(|| made.fstab.iter().cloned().collect()),
    }
}

/// Runs the host commands of a jail's life.
pub trait JailRunner {
    /// Runs `argv` to completion; an error names it (with its stderr).
    fn command(&mut self, argv: &[String]) -> Result<(), RunError>;
    /// Runs `attach` on jbuild's standard streams and waits for it.
    fn attach(&mut self, attach: &Attach) -> Result<Outcome, RunError>;
}

/// Performs `run`: start, attach, stop (whatever the command did), and
/// with `--rm` the removal (whether or not the jail started). The first
/// error is returned once everything was tried.
pub fn perform(run: &JailRun, runner: &mut dyn JailRunner) -> Result<Outcome, RunError> {
    let started = runner.command(&run.start);
    let outcome = match &started {
        Ok(()) => runner.attach(&run.attach),
        Err(_) => Ok(Outcome::Exited(0)),
    };
    let was_started = started.is_ok();
    let mut first: Result<(), RunError> = started;
    let mut keep = |r: Result<(), RunError>| {
        if first.is_ok() {
            first = r;
        }
    };
    if was_started {
        keep(runner.command(&run.stop));
    }
    for argv in &run.remove_root {
        keep(runner.command(argv));
    }
    if let Some(files) = &run.remove_files {
        keep(remove_entry(&run.conf, &run.name));
        for f in files {
            keep(remove_file(f));
        }
    }
    let outcome = outcome?;
    first.map(|()| outcome)
}

/// Removes jail `name`'s entry from `conf`, and the file when nothing
/// else is left in it.
pub fn remove_entry(conf: &Path, name: &str) -> Result<(), RunError> {
    let host = |what: &str| {
        let context = format!("cannot {what} {}", conf.display());
        move |source| RunError::Host { context, source }
    };
    let text = match std::fs::read_to_string(conf) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(host("read")(e)),
    };
    let left = crate::jailconf::replace(&text, name, "")
        .map_err(|e| host("edit")(std::io::Error::other(e)))?;
    let empty = crate::jailconf::parse(&left)
        .map(|c| c.jails.is_empty() && c.globals.is_empty())
        .unwrap_or(false);
    if empty {
        std::fs::remove_file(conf).map_err(host("remove"))
    } else {
        std::fs::write(conf, left).map_err(host("write"))
    }
}

fn remove_file(path: &Path) -> Result<(), RunError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(RunError::Host {
            context: format!("cannot remove {}", path.display()),
            source: e,
        }),
        _ => Ok(()),
    }
}

/// Where the jail goes when the request does not say (`jbuild create`'s
/// places); `path` and `conf` as `create --path/--conf`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Places {
    pub path: Option<PathBuf>,
    pub conf: Option<PathBuf>,
}

/// `jbuild run` on FreeBSD (see the module doc): the jail made, run,
/// stopped and (with `req.remove`) removed, its commands through `runner`.
pub fn run_freebsd(
    unpacker: &Unpacker<'_>,
    req: &RunRequest,
    places: &Places,
    runner: &mut dyn JailRunner,
) -> Result<Ran, RunError> {
    let name = name_of(req)?;
    let img = super::image_for_host(unpacker, req, "freebsd")?;
    let state = ImageState::from_config(&img.config);
    let spec = spec_for(&state, req, &name)?;
    let reference = img.manifest_digest.to_string();
    let user = jail_user(unpacker, &reference, &state, spec.user.as_deref())?;
    let mut opts = CreateOptions::new(
        &reference,
        &name,
        places.path.clone(),
        places.conf.clone(),
        None,
    );
    opts.allowed_jail_params = req.allowed_jail_params.clone();
    opts.for_run = Some(super::ForRun {
        network: req.network,
        volumes: spec
            .mounts
            .iter()
            .filter_map(|m| match m {
                crate::exec::Mount::Bind(b) => Some(super::Volume {
                    host: b.host.clone(),
                    target: b.target.clone(),
                    read_only: b.read_only,
                }),
                _ => None,
            })
            .collect(),
    });
    let made = crate::create::create(unpacker, &opts)?;
    let run = plan(&made, &name, &spec, user.as_deref(), req.remove);
    let outcome = perform(&run, runner)?;
    Ok(Ran {
        outcome,
        kept: (!req.remove).then(|| KeptJail {
            name,
            root: made.root.clone(),
            conf: made.conf.clone(),
        }),
        notes: Vec::new(),
    })
}

/// The image's USER as a name in the jail's passwd (jexec's `-U` takes
/// no uid); `None` for root.
fn jail_user(
    unpacker: &Unpacker<'_>,
    reference: &str,
    state: &ImageState,
    user: Option<&str>,
) -> Result<Option<String>, RunError> {
    let Some(spec) = user.filter(|u| !["root", "0", "0:0", "root:wheel"].contains(u)) else {
        return Ok(None);
    };
    let platform = Platform {
        variant: None,
        ..state.platform.clone()
    };
    let (top, _) = unpacker.top(reference, &platform)?;
    let found = match top {
        Some(t) => {
            let view = unpacker.snapshotter.view(&t)?;
            crate::exec::user::user_name(&view, spec)?
        }
        None => None,
    };
    found.map(Some).ok_or_else(|| {
        RunError::Refused(format!(
            "the image's USER `{spec}` is not in its /etc/passwd: jexec(8) runs a command as a \
             named user (-U), so no jail was made"
        ))
    })
}

/// The runner that runs: jail(8), jexec(8) and the rest as programs, no
/// shell; the attached command on jbuild's terminal, jbuild outliving it
/// whatever signal comes ([`crate::exec::signals`]).
#[cfg(target_os = "freebsd")]
#[derive(Debug, Default)]
pub struct SystemRunner;

#[cfg(target_os = "freebsd")]
impl JailRunner for SystemRunner {
    fn command(&mut self, argv: &[String]) -> Result<(), RunError> {
        let shown = argv.join(" ");
        let out = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .map_err(|source| RunError::Host {
                context: format!("cannot run `{shown}`"),
                source,
            })?;
        if !out.status.success() {
            return Err(RunError::Host {
                context: format!("`{shown}` failed ({})", out.status),
                source: std::io::Error::other(
                    String::from_utf8_lossy(&out.stderr).trim().to_string(),
                ),
            });
        }
        Ok(())
    }

    fn attach(&mut self, attach: &Attach) -> Result<Outcome, RunError> {
        use std::os::unix::process::ExitStatusExt;
        let shown = attach.argv.join(" ");
        let host = |what: &str| {
            let context = format!("{what} `{shown}`");
            move |source| RunError::Host { context, source }
        };
        let signals = crate::exec::signals::StepSignals::install()
            .map_err(|e| host("cannot install signal handlers for")(e.into()))?;
        let mut child = std::process::Command::new(&attach.argv[0])
            .args(&attach.argv[1..])
            .env_clear()
            .envs(attach.env.iter().map(|(k, v)| (k, v)))
            .spawn()
            .map_err(host("cannot run"))?;
        signals.forward_to(child.id());
        let status = child.wait().map_err(host("waiting for"))?;
        Ok(match (status.code(), status.signal()) {
            (Some(c), _) => Outcome::Exited(c),
            (None, Some(s)) => Outcome::Signaled(s),
            (None, None) => Outcome::Exited(1),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what it is asked; fails the command containing `fail_on`.
    #[derive(Default)]
    struct Recorder {
        log: Vec<String>,
        fail_on: Option<&'static str>,
        code: i32,
    }

    impl JailRunner for Recorder {
        fn command(&mut self, argv: &[String]) -> Result<(), RunError> {
            let line = argv.join(" ");
            self.log.push(line.clone());
            match self.fail_on {
                Some(f) if line.contains(f) => Err(RunError::Host {
                    context: format!("`{line}` failed"),
                    source: std::io::Error::other("boom"),
                }),
                _ => Ok(()),
            }
        }

        fn attach(&mut self, a: &Attach) -> Result<Outcome, RunError> {
            let env: Vec<String> = a.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            self.log
                .push(format!("attach {} [{}]", a.argv.join(" "), env.join(" ")));
            Ok(Outcome::Exited(self.code))
        }
    }

    fn spec() -> RunSpec {
        RunSpec {
            argv: words(&["/bin/sh", "-c", "exit 3"]),
            env: vec![("A".into(), "1".into())],
            cwd: "/srv".into(),
            user: Some("www".into()),
            network: false,
            hostname: "j".into(),
            jail_params: vec![],
            mounts: vec![],
        }
    }

    fn made(t: &Path, from: RootFrom) -> Created {
        let conf = t.join("j.conf");
        std::fs::write(&conf, "j {\n  path = /jails/j;\n  persist;\n}\n").unwrap();
        let fstab = t.join("j.fstab");
        std::fs::write(&fstab, "").unwrap();
        Created {
            root: "/jails/j".into(),
            conf,
            fstab: Some(fstab),
            rctl: None,
            root_from: from,
            entry: String::new(),
        }
    }

    /// The whole life of a `--rm` run on a ZFS clone, per jail(8) (`-f
    /// conf_file`, `-c`/`-r` with the jail's name) and jexec(8) (`-U
    /// username` from the jail's passwd, `-d working-directory`, then the
    /// jail and the command); the entry and its fstab gone after.
    #[test]
    fn a_run_starts_attaches_stops_and_removes_in_order() {
        let t = tempfile::tempdir().unwrap();
        let clone = RootFrom::Clone {
            dataset: "zroot/jails/j".into(),
            layer: "chain-1".into(),
        };
        let m = made(t.path(), clone);
        let run = plan(&m, "j", &spec(), Some("www"), true);
        let mut rec = Recorder {
            code: 3,
            ..Default::default()
        };
        assert_eq!(perform(&run, &mut rec).unwrap(), Outcome::Exited(3));
        let conf = m.conf.display().to_string();
        assert_eq!(
            rec.log,
            [
                format!("/usr/sbin/jail -f {conf} -c j"),
                format!(
                    "attach /usr/sbin/jexec -U www -d /srv j /bin/sh -c exit 3 [A=1 PATH={DEFAULT_PATH}]"
                ),
                format!("/usr/sbin/jail -f {conf} -r j"),
                "/sbin/zfs destroy -f zroot/jails/j".into(),
            ]
        );
        assert!(!m.conf.exists() && !m.fstab.as_ref().unwrap().exists());
    }

    #[test]
    fn a_copied_root_is_unflagged_and_removed_and_without_rm_all_stays() {
        let t = tempfile::tempdir().unwrap();
        let m = made(t.path(), RootFrom::Copy { why: None });
        let mut s = spec();
        s.cwd = "/".into();
        let run = plan(&m, "j", &s, None, true);
        assert_eq!(
            run.attach.argv,
            words(&["/usr/sbin/jexec", "j", "/bin/sh", "-c", "exit 3"])
        );
        assert_eq!(
            run.remove_root,
            [
                words(&["/bin/chflags", "-R", "0", "/jails/j"]),
                words(&["/bin/rm", "-rf", "/jails/j"])
            ]
        );
        let kept = plan(&m, "j", &s, None, false);
        let mut rec = Recorder::default();
        perform(&kept, &mut rec).unwrap();
        assert_eq!(rec.log.len(), 3, "{:?}", rec.log);
        assert!(m.conf.exists(), "without --rm the entry stays");
    }

    #[test]
    fn a_jail_that_does_not_start_is_still_removed_and_one_that_does_is_stopped() {
        let t = tempfile::tempdir().unwrap();
        let m = made(t.path(), RootFrom::Copy { why: None });
        let run = plan(&m, "j", &spec(), None, true);
        let mut rec = Recorder {
            fail_on: Some(" -c j"),
            ..Default::default()
        };
        let e = perform(&run, &mut rec).unwrap_err();
        assert!(e.to_string().contains("-c j` failed"), "{e}");
        assert!(!rec
            .log
            .iter()
            .any(|l| l.starts_with("attach") || l.contains(" -r j")));
        assert!(rec.log.iter().any(|l| l.starts_with("/bin/rm -rf")));
        assert!(!m.conf.exists());

        let m = made(t.path(), RootFrom::Copy { why: None });
        let run = plan(&m, "j", &spec(), None, true);
        let mut rec = Recorder {
            fail_on: Some(" -r j"),
            ..Default::default()
        };
        assert!(perform(&run, &mut rec).is_err());
        assert!(rec.log[1].starts_with("attach"), "{:?}", rec.log);
        assert!(rec.log.iter().any(|l| l.starts_with("/bin/rm -rf")));
    }

    #[test]
    fn only_the_runs_entry_leaves_a_shared_conf() {
        let t = tempfile::tempdir().unwrap();
        let conf = t.path().join("jail.conf");
        std::fs::write(&conf, "other {\n  persist;\n}\n\nj {\n  persist;\n}\n").unwrap();
        remove_entry(&conf, "j").unwrap();
        let left = std::fs::read_to_string(&conf).unwrap();
        assert!(left.contains("other {") && !left.contains("j {"), "{left}");
        remove_entry(&conf, "other").unwrap();
        assert!(!conf.exists());
        remove_entry(&conf, "other").unwrap();
    }
}
