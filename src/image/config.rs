//! The image configuration as jbuild reads and writes it: environment,
//! user, working directory, command, labels, ports, volumes, the jail(8)
//! parameters an image asks for, and the history. The planner evolves an
//! [`ImageState`] instruction by instruction (`plan::state::apply`);
//! [`super::write`] writes the final one as an OCI config.

use std::collections::{BTreeMap, BTreeSet};

use oci_spec::image::ImageConfiguration;

use super::Platform;
// The image labels jail parameters travel in, where they were before
// crate::jailparam gathered them.
pub use crate::jailparam::labels::*;

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
    /// `STOPSIGNAL`, as written.
    pub stop_signal: Option<String>,
    /// The fields of Docker's image config the OCI one lacks (`HEALTHCHECK`,
    /// `ONBUILD`, `SHELL`).
    pub docker: ConfigExtras,
    pub history: Vec<HistoryEntry>,
}

/// The fields of Docker's image config (`Healthcheck`, `OnBuild`,
/// `Shell`) that the OCI image config has no place for: Docker, podman
/// and buildah write and read them inside `config`, and OCI tools pass
/// them along untouched. jbuild reads them from a base image and writes
/// them as Docker does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigExtras {
    /// `Healthcheck` as Docker writes it: `Test`, and the durations in
    /// nanoseconds.
    pub healthcheck: Option<serde_json::Value>,
    /// `OnBuild`: triggers, each an instruction as written.
    pub onbuild: Vec<String>,
    /// `Shell`: the shell form's interpreter.
    pub shell: Option<Vec<String>>,
}

impl ConfigExtras {
    /// The extras in a config document (its `config` object); anything
    /// of the wrong shape is left out, as the OCI fields' readers do.
    pub fn from_json(config: &serde_json::Value) -> ConfigExtras {
        let c = config.get("config");
        let get = |k: &str| c.and_then(|c| c.get(k));
        let strings = |v: Option<&serde_json::Value>| -> Option<Vec<String>> {
            v?.as_array()?
                .iter()
                .map(|s| s.as_str().map(str::to_string))
                .collect()
        };
        ConfigExtras {
            healthcheck: get("Healthcheck").filter(|v| v.is_object()).cloned(),
            onbuild: strings(get("OnBuild")).unwrap_or_default(),
            shell: strings(get("Shell")).filter(|s| !s.is_empty()),
        }
    }

    /// Adds the extras to a config's `config` object, as Docker names them.
    pub fn write_into(&self, cfg: &mut serde_json::Map<String, serde_json::Value>) {
        if let Some(h) = &self.healthcheck {
            cfg.insert("Healthcheck".into(), h.clone());
        }
        if !self.onbuild.is_empty() {
            cfg.insert("OnBuild".into(), serde_json::json!(self.onbuild));
        }
        if let Some(s) = &self.shell {
            cfg.insert("Shell".into(), serde_json::json!(s));
        }
    }
}

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
            stop_signal: None,
            docker: ConfigExtras::default(),
            history: Vec::new(),
        }
    }

    /// The state an image's config describes (a base image), with the
    /// fields only Docker's config has.
    pub fn from_config_with(cfg: &ImageConfiguration, extras: &ConfigExtras) -> ImageState {
        let mut s = ImageState::from_config(cfg);
        s.docker = extras.clone();
        s
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
            let labels = c.labels().iter().flatten();
            s.jail = jail_labels(labels.clone())
                .into_iter()
                .map(|l| (l.param, l.value))
                .collect();
            for (k, v) in labels.filter(|(k, _)| !is_jail_label(k)) {
                s.labels.insert(k.clone(), v.clone());
            }
            s.exposed_ports
                .extend(c.exposed_ports().iter().flatten().cloned());
            s.volumes.extend(c.volumes().iter().flatten().cloned());
            s.stop_signal = c.stop_signal().clone().filter(|v| !v.is_empty());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<JailLabel> {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        jail_labels(&m)
    }

    #[test]
    fn permissions_are_written_as_images_write_them() {
        assert_eq!(jail_label_value("allow.sysvipc", "1"), "required");
        assert_eq!(jail_label_value("allow.mlock", ""), "required");
        assert_eq!(jail_label_value("allow.raw_sockets", "0"), "false");
        assert_eq!(jail_label_value("allow.nomount", ""), "");
        assert_eq!(jail_label_value("sysvshm", "new"), "new");
        assert_eq!(jail_label_value("securelevel", "3"), "3");
        assert_eq!(jail_label_value("persist", ""), "");
        assert_eq!(jail_annotation_value("allow.mlock", ""), "true");
        assert_eq!(jail_annotation_value("allow.mlock", "0"), "false");
        assert_eq!(jail_annotation_value("vnet", ""), "new");
        assert_eq!(jail_annotation_value("ip4", "2"), "inherit");
        assert_eq!(jail_annotation_value("securelevel", "3"), "3");
    }

    #[test]
    fn new_labels_win_and_old_ones_are_still_read() {
        let got = labels(&[
            ("org.jbuild.jail.allow.mlock", ""),
            ("org.jbuild.jail.securelevel", "2"),
            ("org.freebsd.jail.securelevel", "3"),
            ("org.freebsd.jail.allow.raw_sockets", "required"),
            ("org.freebsd.jail.allow.chflags", "false"),
            ("org.freebsd.jail.allow.quotas", "maybe"),
            ("org.example.other", "x"),
        ]);
        let short: Vec<(&str, &str, &str)> = got
            .iter()
            .map(|l| (l.param.as_str(), l.value.as_str(), l.label.as_str()))
            .collect();
        assert_eq!(
            short,
            [
                ("allow.chflags", "0", "org.freebsd.jail.allow.chflags"),
                ("allow.mlock", "", "org.jbuild.jail.allow.mlock"),
                ("allow.quotas", "maybe", "org.freebsd.jail.allow.quotas"),
                (
                    "allow.raw_sockets",
                    "",
                    "org.freebsd.jail.allow.raw_sockets"
                ),
                ("securelevel", "3", "org.freebsd.jail.securelevel"),
            ]
        );
        for word in ["required", "true", "1", "", "YES"] {
            assert_eq!(permission_value(word), Some(true), "{word}");
        }
        for word in ["false", "0", "no"] {
            assert_eq!(permission_value(word), Some(false), "{word}");
        }
        assert_eq!(permission_value("maybe"), None);
    }
}
