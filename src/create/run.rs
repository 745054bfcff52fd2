//! `jbuild run`: try an image — its program (or the command given) run
//! in it, attached to the terminal, its exit code returned.
//!
//! Where it runs depends on the host and the image:
//!
//! | host | image | how |
//! |---|---|---|
//! | Linux | `linux/*` | a writable snapshot over the image's top layer, the process in the namespace executor RUN steps use ([`crate::exec::Executor::run_attached`]), the snapshot removed after it |
//! | Linux | `freebsd/*` | refused before anything is made: its programs need a FreeBSD host |
//! | FreeBSD | `freebsd/*` | a jail made as `jbuild create` makes it (a ZFS clone where it can; the image's jail parameters with the same consent), with nothing started (`persist`); started with jail(8), the command attached with jexec(8), stopped, and with `--rm` removed ([`jail`]) |
//!
//! `--rm` is the default when a command is given, as podman's
//! `--rm` would be for a one-off command. On Linux nothing of a run is kept
//! either way: the writable snapshot is jbuild's scratch, not a container
//! to start again; a run without `--rm` says so. On FreeBSD a run without
//! `--rm` leaves the jail made (root and jail.conf entry), stopped, as
//! `jbuild create` would have, to be started again with `service jail`.

pub mod jail;

use std::path::{Path, PathBuf};

use super::CreateError;
use crate::blame::Blame;
use crate::exec::{BindMount, ExecError, Executor, Outcome, RunSpec};
use crate::image::unpack::UnpackError;
use crate::image::{ImageError, ImageState, LoadedImage, Platform, Unpacker};
use crate::jailconf::Param;
use crate::snapshot::SnapshotError;

/// What the user asked to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRequest {
    /// The image in the store, as the user typed it.
    pub image: String,
    /// The jail's name, or the hostname on Linux (`--name`); by default
    /// `jbuild-run-<pid>`.
    pub name: Option<String>,
    /// The command, replacing the image's Cmd (its Entrypoint stays, as
    /// docker does); empty: the image's own.
    pub command: Vec<String>,
    /// `-e K=V`, over the image's Env.
    pub env: Vec<(String, String)>,
    /// `-v SRC:DST[:ro]`.
    pub volumes: Vec<Volume>,
    pub network: Network,
    /// `--rm` (or a command given): nothing of the run is kept.
    pub remove: bool,
    /// Jail parameters the user agreed to, as for `jbuild create`.
    pub allowed_jail_params: Vec<String>,
}

/// A host directory or file seen inside: `-v SRC:DST[:ro]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    pub host: PathBuf,
    /// Absolute, inside the image's root.
    pub target: String,
    pub read_only: bool,
}

impl std::str::FromStr for Volume {
    type Err = String;

    /// `SRC:DST` or `SRC:DST:ro` (`:rw` too); SRC must exist.
    fn from_str(s: &str) -> Result<Volume, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let (host, target, read_only) = match parts.as_slice() {
            [h, t] => (*h, *t, false),
            [h, t, "ro"] => (*h, *t, true),
            [h, t, "rw"] => (*h, *t, false),
            _ => {
                return Err(format!(
                    "`{s}`: write SRC:DST or SRC:DST:ro (a host path, a path inside)"
                ))
            }
        };
        if host.is_empty() || !target.starts_with('/') {
            return Err(format!(
                "`{s}`: SRC is a host path and DST an absolute path inside the image"
            ));
        }
        Ok(Volume {
            host: PathBuf::from(host),
            target: target.to_string(),
            read_only,
        })
    }
}

/// `--network`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Network {
    /// A network of its own with only loopback (Linux), no address
    /// (FreeBSD: `ip4=disable`, `ip6=disable`).
    #[default]
    None,
    /// The host's (Linux: its network namespace; FreeBSD: `ip4=inherit`,
    /// `ip6=inherit`).
    Host,
}

/// How a run ended, and what it left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    pub outcome: Outcome,
    /// The jail left behind (FreeBSD without `--rm`).
    pub kept: Option<KeptJail>,
    /// What the user should know (nothing kept on Linux without `--rm`).
    pub notes: Vec<String>,
}

impl Ran {
    /// The exit code a shell would give: the command's, or 128 + the
    /// signal that ended it.
    pub fn exit_code(&self) -> i32 {
        match self.outcome {
            Outcome::Exited(c) => c,
            Outcome::Signaled(s) => 128 + s,
        }
    }
}

/// A jail `jbuild run` made and left (stopped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptJail {
    pub name: String,
    pub root: PathBuf,
    pub conf: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The request or the image cannot be run here; nothing was made.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Image(Box<ImageError>),
    #[error(transparent)]
    Unpack(Box<UnpackError>),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// The jail could not be made.
    #[error(transparent)]
    Create(Box<CreateError>),
    /// A host command of the jail's life failed (jail(8), zfs(8), ...).
    #[error("{context}")]
    Host {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

// Boxed: the errors of making a jail are large, and a run's result is
// passed up several calls.
impl From<ImageError> for RunError {
    fn from(e: ImageError) -> RunError {
        RunError::Image(Box::new(e))
    }
}

impl From<UnpackError> for RunError {
    fn from(e: UnpackError) -> RunError {
        RunError::Unpack(Box::new(e))
    }
}

impl From<CreateError> for RunError {
    fn from(e: CreateError) -> RunError {
        RunError::Create(Box::new(e))
    }
}

impl Blame for RunError {
    fn is_user_error(&self) -> bool {
        match self {
            RunError::Refused(_) => true,
            RunError::Image(e) => e.is_user_error(),
            RunError::Unpack(e) => e.is_user_error(),
            RunError::Snapshot(e) => e.is_user_error(),
            RunError::Exec(e) => e.is_user_error(),
            RunError::Create(e) => e.is_user_error(),
            RunError::Host { .. } => false,
        }
    }
}

/// A run's name: the one given (checked as a jail name), else
/// `jbuild-run-<pid>`.
pub fn name_of(req: &RunRequest) -> Result<String, RunError> {
    match &req.name {
        Some(n) if super::valid_name(n) => Ok(n.clone()),
        Some(n) => Err(RunError::Refused(format!(
            "--name `{n}`: use letters, digits, `_` and `-` (at most 64)"
        ))),
        None => Ok(format!("jbuild-run-{}", std::process::id())),
    }
}

/// The image `req.image` as this host would run it: the manifest for
/// `os` and this architecture, or a refusal naming the host the image
/// needs, before anything is unpacked or made.
pub fn image_for_host(
    unpacker: &Unpacker<'_>,
    req: &RunRequest,
    os: &str,
) -> Result<LoadedImage, RunError> {
    let arch = crate::config::host_architecture();
    let want = Platform {
        os: os.into(),
        architecture: arch.into(),
        variant: None,
    };
    let needs = |platform: &str, other: &str| {
        RunError::Refused(format!(
            "image {} is for {platform}: its programs need a {other} host, and this one is {os}/{arch}{}",
            req.image,
            if other == "FreeBSD" {
                " (on FreeBSD, `jbuild run` makes it a jail; here `jbuild create --bundle` or `jbuild export` hands it on)"
            } else {
                ""
            }
        ))
    };
    let img = match crate::image::load(unpacker.store, &req.image, &want) {
        Ok(img) => img,
        Err(ImageError::Platform { source, .. }) => {
            // An index without this host's OS: say what it is for.
            let other = Platform {
                os: if os == "freebsd" { "linux" } else { "freebsd" }.into(),
                ..want.clone()
            };
            return Err(
                match crate::image::load(unpacker.store, &req.image, &other) {
                    Ok(_) => needs(&other.to_string(), host_name(&other.os)),
                    Err(_) => RunError::Refused(format!(
                        "image {}: {source}; `jbuild run` runs images for {want}",
                        req.image
                    )),
                },
            );
        }
        Err(e) => return Err(e.into()),
    };
    let state = ImageState::from_config(&img.config);
    if state.platform.os != os {
        return Err(needs(
            &state.platform.to_string(),
            host_name(&state.platform.os),
        ));
    }
    let norm = |a: &str| Platform::parse(&format!("any/{a}")).map(|p| p.architecture);
    if norm(&state.platform.architecture).ok() != norm(arch).ok() {
        return Err(RunError::Refused(format!(
            "image {} is for {}: this {os}/{arch} host cannot run its programs (jbuild does not emulate)",
            req.image, state.platform
        )));
    }
    Ok(img)
}

fn host_name(os: &str) -> &str {
    match os {
        "freebsd" => "FreeBSD",
        "linux" => "Linux",
        other => other,
    }
}

/// What runs: the image's Entrypoint with the command given, or with its
/// Cmd; its Env with `-e` over it; its WorkingDir and User; the volumes
/// and network asked for.
pub fn spec_for(state: &ImageState, req: &RunRequest, name: &str) -> Result<RunSpec, RunError> {
    let mut argv: Vec<String> = state.entrypoint.clone().unwrap_or_default();
    if req.command.is_empty() {
        argv.extend(state.cmd.clone().unwrap_or_default());
    } else {
        argv.extend(req.command.iter().cloned());
    }
    if argv.is_empty() {
        return Err(RunError::Refused(format!(
            "image {} has no Entrypoint or Cmd: give the command to run after the image",
            req.image
        )));
    }
    let mut env = state.env.clone();
    for (k, v) in &req.env {
        match env.iter_mut().find(|(name, _)| name == k) {
            Some(slot) => slot.1 = v.clone(),
            None => env.push((k.clone(), v.clone())),
        }
    }
    let mut mounts = Vec::new();
    for v in &req.volumes {
        let host = v.host.canonicalize().map_err(|e| {
            RunError::Refused(format!(
                "-v {}:{}: {}: {e}",
                v.host.display(),
                v.target,
                v.host.display()
            ))
        })?;
        mounts.push(
            BindMount {
                host,
                target: v.target.clone(),
                read_only: v.read_only,
            }
            .into(),
        );
    }
    Ok(RunSpec {
        argv,
        env,
        cwd: state.workdir.clone().unwrap_or_else(|| "/".into()),
        user: state.user.clone().filter(|u| !u.is_empty()),
        network: req.network == Network::Host,
        hostname: name.to_string(),
        jail_params: Vec::new(),
        mounts,
    })
}

/// Runs `req` on Linux (see the module doc): the image's top snapshot
/// under a writable one, the process in `executor`, attached; the
/// writable snapshot removed whatever happened.
pub fn run_linux(
    unpacker: &Unpacker<'_>,
    executor: &dyn Executor,
    req: &RunRequest,
) -> Result<Ran, RunError> {
    let name = name_of(req)?;
    let img = image_for_host(unpacker, req, "linux")?;
    let state = ImageState::from_config(&img.config);
    let spec = spec_for(&state, req, &name)?;
    let (top, _) = unpacker.top(&img.manifest_digest.to_string(), &state.platform)?;
    let key = crate::image::names::SnapshotName::active();
    let root = unpacker.snapshotter.prepare(&key, top.as_deref())?;
    let outcome = executor.run_attached(&root, &spec);
    let removed = unpacker.snapshotter.remove(&key);
    let outcome = outcome?;
    removed?;
    let notes = if req.remove {
        Vec::new()
    } else {
        vec!["on Linux a run keeps nothing: what it changed is gone with it".to_string()]
    };
    Ok(Ran {
        outcome,
        kept: None,
        notes,
    })
}

/// What a jail made for `jbuild run` has instead of the image's start:
/// see [`super::CreateOptions::for_run`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ForRun {
    pub network: Network,
    pub volumes: Vec<Volume>,
}

impl ForRun {
    /// The mount points inside, for [`super::mounts::check`].
    pub(super) fn targets(&self) -> impl Iterator<Item = &String> {
        self.volumes.iter().map(|v| &v.target)
    }

    /// jail(8) parameters: `persist` (no process starts with the jail;
    /// jexec(8) brings the command), the network, and one `mount +=` fstab
    /// line (nullfs) for each volume at its point in the root.
    pub(super) fn params(&self, root: &Path, points: &[super::mounts::MountPoint]) -> Vec<Param> {
        let ip = match self.network {
            Network::None => "disable",
            Network::Host => "inherit",
        };
        let mut params = vec![
            super::flag("persist"),
            super::param("ip4", ip),
            super::param("ip6", ip),
        ];
        for (v, point) in self.volumes.iter().zip(points) {
            let at = root.join(&point.inside);
            let line = format!(
                "{} {} nullfs {} 0 0",
                super::fstab_path(&v.host.display().to_string()),
                super::fstab_path(&at.display().to_string()),
                if v.read_only { "ro" } else { "rw" }
            );
            params.push(Param {
                name: "mount".into(),
                values: Some(vec![line]),
                append: true,
            });
        }
        params
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(command: &[&str]) -> RunRequest {
        RunRequest {
            image: "img".into(),
            name: None,
            command: command.iter().map(|s| s.to_string()).collect(),
            env: vec![("B".into(), "2".into()), ("C".into(), "3".into())],
            volumes: vec![],
            network: Network::None,
            remove: true,
            allowed_jail_params: vec![],
        }
    }

    fn state() -> ImageState {
        let mut s = ImageState::empty(Platform::parse("linux/amd64").unwrap());
        s.entrypoint = Some(vec!["/bin/tini".into(), "--".into()]);
        s.cmd = Some(vec!["/bin/sh".into()]);
        s.env = vec![("A".into(), "1".into()), ("B".into(), "0".into())];
        s.workdir = Some("/srv".into());
        s.user = Some("www".into());
        s
    }

    #[test]
    fn the_command_replaces_cmd_and_keeps_the_entrypoint_and_env_is_layered() {
        let s = spec_for(&state(), &req(&["echo", "hi"]), "n").unwrap();
        assert_eq!(s.argv, ["/bin/tini", "--", "echo", "hi"]);
        assert_eq!(
            s.env,
            [
                ("A".to_string(), "1".to_string()),
                ("B".into(), "2".into()),
                ("C".into(), "3".into())
            ]
        );
        assert_eq!((s.cwd.as_str(), s.user.as_deref()), ("/srv", Some("www")));
        assert!(!s.network);
        let s = spec_for(&state(), &req(&[]), "n").unwrap();
        assert_eq!(s.argv, ["/bin/tini", "--", "/bin/sh"]);
        let e = spec_for(
            &ImageState::empty(Platform::parse("linux/amd64").unwrap()),
            &req(&[]),
            "n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("has no Entrypoint or Cmd"), "{e}");
    }

    #[test]
    fn volumes_are_src_dst_and_an_optional_ro() {
        let v: Volume = "/a:/b:ro".parse().unwrap();
        assert_eq!(
            (v.host.as_path(), v.target.as_str(), v.read_only),
            (Path::new("/a"), "/b", true)
        );
        assert!(!"/a:/b".parse::<Volume>().unwrap().read_only);
        for bad in ["/a", "/a:b", ":/b", "/a:/b:x", "/a:/b:ro:1"] {
            assert!(bad.parse::<Volume>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_run_jail_persists_with_its_network_and_nullfs_lines() {
        let r = ForRun {
            network: Network::Host,
            volumes: vec!["/data:/srv/data:ro".parse().unwrap()],
        };
        let points = [super::super::mounts::MountPoint {
            volume: "/srv/data".into(),
            inside: "usr/srv/data".into(),
        }];
        let text = crate::jailconf::entry("j", &r.params(Path::new("/jails/j"), &points), &[]);
        assert!(text.contains("persist;"), "{text}");
        assert!(
            text.contains("ip4 = inherit;") && text.contains("ip6 = inherit;"),
            "{text}"
        );
        assert!(
            text.contains("mount += '/data /jails/j/usr/srv/data nullfs ro 0 0';"),
            "{text}"
        );
        let none = ForRun::default().params(Path::new("/j"), &[]);
        assert!(crate::jailconf::entry("j", &none, &[]).contains("ip4 = disable;"));
    }
}
