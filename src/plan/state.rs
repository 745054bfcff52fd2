//! The image configuration as it stands after each instruction: what a RUN
//! step runs with (environment, user, working directory, jail parameters)
//! and what the final image config records.

use std::collections::{BTreeMap, BTreeSet};

use oci_spec::image::ImageConfiguration;

use crate::jailfile::{Command, Op};

/// An OCI platform: `os/architecture[/variant]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    pub variant: Option<String>,
}

impl Platform {
    /// The default for images jbuild builds: FreeBSD on this host's
    /// architecture (jbuild makes jail templates; a Linux root says so
    /// with `--platform linux/amd64`).
    pub fn default_for_host() -> Platform {
        Platform {
            os: "freebsd".into(),
            architecture: crate::config::host_architecture().into(),
            variant: None,
        }
    }

    pub fn parse(s: &str) -> Result<Platform, String> {
        let parts: Vec<&str> = s.split('/').collect();
        let valid = |p: &str| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        match parts.as_slice() {
            [os, arch] if valid(os) && valid(arch) => Ok(Platform {
                os: os.to_lowercase(),
                architecture: normalize_arch(arch),
                variant: None,
            }),
            [os, arch, variant] if valid(os) && valid(arch) && valid(variant) => Ok(Platform {
                os: os.to_lowercase(),
                architecture: normalize_arch(arch),
                variant: Some(variant.to_lowercase()),
            }),
            _ => Err(format!(
                "platform `{s}` is not of the form os/arch[/variant], e.g. freebsd/amd64"
            )),
        }
    }
}

fn normalize_arch(a: &str) -> String {
    match a.to_lowercase().as_str() {
        "x86_64" | "x86-64" => "amd64".into(),
        "aarch64" => "arm64".into(),
        other => other.to_string(),
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// One history entry as the image config records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryEntry {
    pub created_by: String,
    pub empty_layer: bool,
    /// Inherited from the base image (kept as it was there).
    pub inherited: Option<oci_spec::image::History>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageState {
    pub platform: Platform,
    /// In order of first definition; a later ENV of the same name replaces
    /// the value in place.
    pub env: Vec<(String, String)>,
    pub user: Option<String>,
    pub workdir: Option<String>,
    pub cmd: Option<Vec<String>>,
    pub entrypoint: Option<Vec<String>>,
    /// Whether CMD was set in this build (an ENTRYPOINT clears an inherited
    /// CMD, as docker does).
    pub cmd_set_here: bool,
    pub labels: BTreeMap<String, String>,
    pub exposed_ports: BTreeSet<String>,
    pub volumes: BTreeSet<String>,
    /// jail(8) parameters from `JAIL` lines, a later value replacing an
    /// earlier one of the same name.
    pub jail: Vec<(String, String)>,
    pub history: Vec<HistoryEntry>,
}

/// The label prefix under which `JAIL` parameters travel in the image
/// config (the OCI config has no field for them; labels go everywhere the
/// image goes).
pub const JAIL_LABEL_PREFIX: &str = "org.jbuild.jail.";

impl ImageState {
    pub fn empty(platform: Platform) -> ImageState {
        ImageState {
            platform,
            env: Vec::new(),
            user: None,
            workdir: None,
            cmd: None,
            entrypoint: None,
            cmd_set_here: false,
            labels: BTreeMap::new(),
            exposed_ports: BTreeSet::new(),
            volumes: BTreeSet::new(),
            jail: Vec::new(),
            history: Vec::new(),
        }
    }

    /// The state an image's config describes (a base image).
    pub fn from_config(cfg: &ImageConfiguration) -> ImageState {
        let platform = Platform {
            os: cfg.os().to_string(),
            architecture: cfg.architecture().to_string(),
            variant: cfg.variant().clone(),
        };
        let mut s = ImageState::empty(platform);
        if let Some(c) = cfg.config() {
            for kv in c.env().iter().flatten() {
                let (k, v) = kv.split_once('=').unwrap_or((kv.as_str(), ""));
                s.set_env(k, v);
            }
            s.user = c.user().clone().filter(|u| !u.is_empty());
            s.workdir = c.working_dir().clone().filter(|w| !w.is_empty());
            s.cmd = c.cmd().clone();
            s.entrypoint = c.entrypoint().clone();
            for (k, v) in c.labels().iter().flatten() {
                match k.strip_prefix(JAIL_LABEL_PREFIX) {
                    Some(param) => s.jail.push((param.to_string(), v.clone())),
                    None => {
                        s.labels.insert(k.clone(), v.clone());
                    }
                }
            }
            s.jail.sort();
            s.exposed_ports
                .extend(c.exposed_ports().iter().flatten().cloned());
            s.volumes.extend(c.volumes().iter().flatten().cloned());
        }
        for h in cfg.history().iter().flatten() {
            s.history.push(HistoryEntry {
                created_by: h.created_by().clone().unwrap_or_default(),
                empty_layer: h.empty_layer().unwrap_or(false),
                inherited: Some(h.clone()),
            });
        }
        s
    }

    pub fn set_env(&mut self, k: &str, v: &str) {
        match self.env.iter_mut().find(|(name, _)| name == k) {
            Some(slot) => slot.1 = v.to_string(),
            None => self.env.push((k.to_string(), v.to_string())),
        }
    }

    /// Applies a metadata instruction. Filesystem instructions leave the
    /// state as it is.
    pub fn apply(&mut self, op: &Op) {
        match op {
            Op::Env(pairs) => pairs.iter().for_each(|(k, v)| self.set_env(k, v)),
            Op::Label(pairs) => pairs.iter().for_each(|(k, v)| {
                self.labels.insert(k.clone(), v.clone());
            }),
            Op::User(u) => self.user = Some(u.clone()),
            Op::Workdir(w) => self.workdir = Some(w.clone()),
            Op::Expose(ports) => {
                for p in ports {
                    let p = if p.contains('/') {
                        p.clone()
                    } else {
                        format!("{p}/tcp")
                    };
                    self.exposed_ports.insert(p);
                }
            }
            Op::Volume(v) => self.volumes.extend(v.iter().cloned()),
            Op::Cmd(c) => {
                self.cmd = Some(argv(c));
                self.cmd_set_here = true;
            }
            Op::Entrypoint(c) => {
                self.entrypoint = Some(argv(c));
                if !self.cmd_set_here {
                    self.cmd = None;
                }
            }
            Op::Jail(params) => {
                for (k, v) in params {
                    match self.jail.iter_mut().find(|(name, _)| name == k) {
                        Some(slot) => slot.1 = v.clone(),
                        None => self.jail.push((k.clone(), v.clone())),
                    }
                }
            }
            _ => {}
        }
    }

    /// The working directory steps run in.
    pub fn cwd(&self) -> &str {
        self.workdir.as_deref().unwrap_or("/")
    }
}

/// The argv a CMD or ENTRYPOINT records: shell form runs through `/bin/sh -c`.
pub fn argv(c: &Command) -> Vec<String> {
    match c {
        Command::Shell(s) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
        Command::Exec(v) => v.clone(),
    }
}
