//! The image configuration as jbuild reads and writes it: environment,
//! user, working directory, command, labels, ports, volumes, the jail(8)
//! parameters an image asks for, and the history. The planner evolves an
//! [`ImageState`] instruction by instruction (`plan::state::apply`);
//! [`super::write`] writes the final one as an OCI config.

use std::collections::{BTreeMap, BTreeSet};

use oci_spec::image::ImageConfiguration;

use super::Platform;

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

    /// The working directory steps run in.
    pub fn cwd(&self) -> &str {
        self.workdir.as_deref().unwrap_or("/")
    }
}
