//! The jail(8) parameters an image asks for: read from its config's
//! labels (`org.freebsd.jail.<param>`, and the `org.jbuild.jail.<param>`
//! jbuild wrote before), judged, and agreed to before a jail is made.
//!
//! An image may come from anyone, so each parameter is one of:
//!
//! - **fine**: it acts only inside the jail (`securelevel`, `osrelease`,
//!   `sysvshm=new`, `allow.set_hostname`, ...) and goes into the jail as
//!   it is;
//! - **jbuild's**: `name`, `jid` and `path` are the jail's identity, which
//!   `create` gives; the image's value is left out, with a comment;
//! - **needs consent**: it weakens the jail the way `build
//!   --allow-jail-param` judges it ([`needs_opt_in`]: most `allow.*`,
//!   `devfs_ruleset` other than 4, `enforce_statfs` below 2, ...), or it
//!   acts on the host ([`acts_on_host`]: `exec.prestart` and the other
//!   commands jail(8) runs outside the jail, `mount.fstab`, `ip4.addr`,
//!   ...). `create` stops, naming every such parameter, unless the user
//!   named it (`create --allow-jail-param NAME` or `[freebsd]
//!   allow_jail_params`);
//! - a **host mount**: a VOLUME's fstab line (`org.jbuild.fstab.<dir>`,
//!   what a Bastille template's MOUNT becomes) nullfs-mounts a host path
//!   into the jail, so it needs consent as `mount.fstab` does
//!   ([`host_mount`]); once agreed it goes to the jail's fstab file, not
//!   into the entry;
//! - **invalid**: a name that is not a jail parameter's, a value with
//!   control characters, a permission whose value is not a boolean. The
//!   image is refused: jail.conf(5) is not written from it.

use crate::blame::Blame;
use crate::exec::jail_params::needs_opt_in;
use crate::image::{jail_labels, permission_value, JailLabel};

/// What a parameter means for the jail (module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Judgement {
    Fine,
    Owned,
    NeedsConsent(&'static str),
    Invalid(String),
}

/// One parameter an image asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageParam {
    /// The parameter's name and value as jail(8) takes them (an empty
    /// value is a flag: `allow.mlock`), and the label they came from.
    pub label: JailLabel,
    pub judgement: Judgement,
}

impl ImageParam {
    pub fn name(&self) -> &str {
        &self.label.param
    }

    /// `name` or `name=value`, as jail(8) and `JAIL` take it.
    pub fn shown(&self) -> String {
        match self.label.value.as_str() {
            "" => self.label.param.clone(),
            v => format!("{}={v}", self.label.param),
        }
    }
}

/// Parameters jbuild gives every jail it makes.
const OWNED: &[&str] = &["name", "jid", "path"];

/// Why a runtime parameter acts on the host (jail(8), "Jail Parameters"
/// and "Pseudo-parameters"), or `None`.
pub fn acts_on_host(name: &str) -> Option<&'static str> {
    match name {
        "exec.prepare" | "exec.prestart" | "exec.created" | "exec.poststart" | "exec.prestop"
        | "exec.poststop" | "exec.release" | "exec.system_user" => {
            Some("jail(8) runs it on the host, outside the jail")
        }
        "exec.consolelog" => Some("jail(8) writes that file on the host"),
        "mount" | "mount.fstab" => Some("it mounts the host's file systems into the jail"),
        "interface" | "ip4.addr" | "ip6.addr" | "vnet.interface" => {
            Some("it adds addresses to the host's network interfaces or moves one into the jail")
        }
        "depend" => Some("it starts other jails"),
        _ => None,
    }
}

fn well_formed(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.')
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.contains("..")
}

/// Judges one parameter.
pub fn judge(label: &JailLabel) -> Judgement {
    let (name, value) = (label.param.as_str(), label.value.as_str());
    if !well_formed(name) {
        return Judgement::Invalid(format!(
            "label `{}`: `{name}` is not a jail parameter name (a-z, 0-9, `_` and `.`)",
            label.label
        ));
    }
    if value.chars().any(char::is_control) {
        return Judgement::Invalid(format!(
            "label `{}`: the value holds control characters",
            label.label
        ));
    }
    let negated = name
        .rsplit('.')
        .next()
        .is_some_and(|last| last.starts_with("no"));
    if name.starts_with("allow.") && !negated && permission_value(value).is_none() {
        return Judgement::Invalid(format!(
            "label `{}={}`: a permission is on (`required`, `true`, `1`) or off (`false`, `0`)",
            label.label, label.raw
        ));
    }
    if OWNED.contains(&name) {
        return Judgement::Owned;
    }
    match needs_opt_in(name, value).or_else(|| acts_on_host(name)) {
        Some(why) => Judgement::NeedsConsent(why),
        None => Judgement::Fine,
    }
}

/// The parameters among an image config's labels, judged.
pub fn read<'a>(labels: impl IntoIterator<Item = (&'a String, &'a String)>) -> Vec<ImageParam> {
    jail_labels(labels)
        .into_iter()
        .map(|label| ImageParam {
            judgement: judge(&label),
            label,
        })
        .collect()
}

/// The label prefix of a VOLUME's fstab line (a Bastille MOUNT).
pub const FSTAB_LABEL: &str = "org.jbuild.fstab.";

/// A VOLUME's fstab line from the image (`label` = `org.jbuild.fstab.<dir>`,
/// `line` = `host dir type options dump pass`): it mounts a host path into
/// the jail, so it needs consent as `mount.fstab`.
pub fn host_mount(label: &str, line: &str) -> ImageParam {
    ImageParam {
        label: JailLabel {
            param: "mount.fstab".into(),
            value: line.into(),
            label: label.into(),
            raw: line.into(),
        },
        judgement: Judgement::NeedsConsent("it mounts a host path into the jail"),
    }
}

/// [`read`] for an image config as JSON (a registry's, say).
pub fn from_config_json(config: &serde_json::Value) -> Vec<ImageParam> {
    let labels: std::collections::BTreeMap<String, String> = config["config"]["Labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect();
    read(&labels)
}

/// The parameters as `jbuild inspect` shows them in JSON: name, value (as
/// jail(8) takes it), the label and its value, and why `create` would ask
/// consent for it or refuse it (else `null`).
pub fn to_json(params: &[ImageParam]) -> serde_json::Value {
    let list: Vec<serde_json::Value> = params
        .iter()
        .map(|p| {
            let (consent, invalid) = match &p.judgement {
                Judgement::NeedsConsent(why) => (Some(why.to_string()), None),
                Judgement::Invalid(why) => (None, Some(why.clone())),
                _ => (None, None),
            };
            serde_json::json!({
                "name": p.name(),
                "value": p.label.value,
                "label": p.label.label,
                "labelValue": p.label.raw,
                "needsConsent": consent,
                "invalid": invalid,
            })
        })
        .collect();
    serde_json::Value::Array(list)
}

#[derive(Debug, thiserror::Error)]
pub enum ParamsError {
    #[error("image {image}: {why}; no jail was written")]
    Invalid { image: String, why: String },
    #[error("image {image} asks for jail parameters that weaken the jail or act on the host: {}; no jail was written. If you trust the image with them: jbuild create {} (or list them in [freebsd] allow_jail_params)", list(.params), agree(.params))]
    NeedsConsent {
        image: String,
        /// `(parameter as shown, label, why)`.
        params: Vec<(String, String, String)>,
    },
}

fn list(params: &[(String, String, String)]) -> String {
    params
        .iter()
        .map(|(shown, label, why)| format!("{shown} (label {label}: {why})"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn agree(params: &[(String, String, String)]) -> String {
    params
        .iter()
        .map(|(shown, _, _)| {
            let name = shown.split('=').next().unwrap_or(shown);
            format!("--allow-jail-param {name}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl Blame for ParamsError {
    /// Always the user's: the image they chose, or their consent.
    fn is_user_error(&self) -> bool {
        true
    }
}

/// What the jail gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Agreed {
    /// The parameters to set, as jail(8) takes them.
    pub params: Vec<(String, String)>,
    /// Notes on the ones left out or agreed to, for the jail.conf entry.
    pub comments: Vec<String>,
}

/// What the jail gets: the parameters to set and comments on the ones
/// left out. Refuses an invalid parameter, and any that needs consent
/// and is not in `allowed` (all of them named at once).
pub fn agreed(
    image: &str,
    params: &[ImageParam],
    allowed: &[String],
) -> Result<Agreed, ParamsError> {
    let mut set = Vec::new();
    let mut comments = Vec::new();
    let mut missing = Vec::new();
    for p in params {
        match &p.judgement {
            Judgement::Invalid(why) => {
                return Err(ParamsError::Invalid {
                    image: image.to_string(),
                    why: why.clone(),
                })
            }
            Judgement::Owned => {
                comments.push(format!(
                    "the image asks for {} (label {}); jbuild create sets it",
                    p.shown(),
                    p.label.label
                ));
                continue;
            }
            Judgement::NeedsConsent(why) if !allowed.iter().any(|a| a == p.name()) => {
                missing.push((p.shown(), p.label.label.clone(), why.to_string()));
                continue;
            }
            Judgement::NeedsConsent(_) => {
                comments.push(format!("{}: allowed with --allow-jail-param", p.shown()))
            }
            Judgement::Fine => {}
        }
        if p.label.label.starts_with(FSTAB_LABEL) {
            // Agreed to; the line goes to the jail's fstab file.
            continue;
        }
        set.push((p.label.param.clone(), p.label.value.clone()));
    }
    if !missing.is_empty() {
        return Err(ParamsError::NeedsConsent {
            image: image.to_string(),
            params: missing,
        });
    }
    Ok(Agreed {
        params: set,
        comments,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn params(pairs: &[(&str, &str)]) -> Vec<ImageParam> {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        read(&m)
    }

    #[test]
    fn risky_parameters_need_consent_and_are_named_together() {
        let p = params(&[
            ("org.freebsd.jail.allow.mlock", "required"),
            ("org.freebsd.jail.allow.raw_sockets", "true"),
            ("org.freebsd.jail.exec.prestart", "rm -rf /"),
            ("org.freebsd.jail.securelevel", "3"),
            ("org.jbuild.jail.allow.set_hostname", ""),
        ]);
        let err = agreed("img", &p, &[]).unwrap_err().to_string();
        for want in [
            "allow.mlock (label org.freebsd.jail.allow.mlock",
            "allow.raw_sockets",
            "exec.prestart=rm -rf /",
            "--allow-jail-param allow.mlock --allow-jail-param allow.raw_sockets --allow-jail-param exec.prestart",
        ] {
            assert!(err.contains(want), "no `{want}` in {err}");
        }
        assert!(!err.contains("securelevel"), "{err}");
        let allowed: Vec<String> = ["allow.mlock", "allow.raw_sockets", "exec.prestart"]
            .map(String::from)
            .to_vec();
        let set = agreed("img", &p, &allowed).unwrap().params;
        let names: Vec<(&str, &str)> = set.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            names,
            [
                ("allow.mlock", ""),
                ("allow.raw_sockets", ""),
                ("allow.set_hostname", ""),
                ("exec.prestart", "rm -rf /"),
                ("securelevel", "3"),
            ]
        );
    }

    #[test]
    fn identity_is_jbuilds_and_bad_labels_are_refused() {
        let p = params(&[
            ("org.freebsd.jail.path", "/"),
            ("org.freebsd.jail.osrelease", "14.3-RELEASE"),
        ]);
        let Agreed {
            params: set,
            comments,
        } = agreed("img", &p, &[]).unwrap();
        assert_eq!(set, [("osrelease".to_string(), "14.3-RELEASE".to_string())]);
        assert!(comments[0].contains("path=/"), "{comments:?}");
        for (k, v, want) in [
            (
                "org.freebsd.jail.x; exec.prestart",
                "1",
                "not a jail parameter name",
            ),
            (
                "org.freebsd.jail.Allow.mount",
                "1",
                "not a jail parameter name",
            ),
            ("org.freebsd.jail.osrelease", "a\nb", "control characters"),
            (
                "org.freebsd.jail.allow.mlock",
                "sometimes",
                "a permission is on",
            ),
        ] {
            let err = agreed("img", &params(&[(k, v)]), &[]).unwrap_err();
            assert!(err.to_string().contains(want), "{k}: {err}");
        }
    }
}
