//! What a jail parameter means for the jail and the host: fine, jbuild's,
//! needs the user's consent, or invalid (the module doc of
//! [`crate::jailparam`] says which is which).

use super::labels::{jail_labels, permission_value, JailLabel};

/// `devfsrules_jail` in FreeBSD's `/etc/defaults/devfs.rules`.
pub const DEVFS_RULESET_JAIL: u32 = 4;

/// A jail(8) parameter name: `[a-z0-9_.]`, dot-separated words
/// (`allow.raw_sockets`, `sysvshm`, `osrelease`).
pub fn well_formed(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.')
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.contains("..")
}

/// Parameters a recipe may not set, and why.
const REFUSED: &[(&str, &str)] = &[
    ("name", "jbuild names the jail"),
    ("jid", "jbuild names the jail"),
    ("path", "the jail's root is the step's snapshot"),
    ("command", "jbuild runs the step itself"),
    ("exec", "exec.* commands run on the host, outside the jail"),
    ("persist", "jbuild manages the jail's life"),
    (
        "host.hostname",
        "the hostname comes from the build's settings",
    ),
    ("ip4", "the network comes from the build's network setting"),
    ("ip6", "the network comes from the build's network setting"),
    ("vnet", "the network comes from the build's network setting"),
    ("interface", "it adds addresses to the host's interfaces"),
    (
        "ip_hostname",
        "the network comes from the build's network setting",
    ),
    (
        "mount",
        "mount parameters mount host file systems; jbuild mounts /dev itself",
    ),
    ("depend", "it starts other jails"),
];

/// Why a build jail's recipe may not set `name` at all (`JAIL name=...`:
/// jbuild owns it, or it acts on the host), or `None`. A negated boolean
/// (`nopersist`, `allow.nomount`) is judged as the parameter underneath.
pub fn refused_in_recipe(name: &str) -> Option<&'static str> {
    let base = match name.rsplit_once('.') {
        Some((head, last)) => format!("{head}.{}", last.strip_prefix("no").unwrap_or(last)),
        None => name.strip_prefix("no").unwrap_or(name).to_string(),
    };
    for candidate in [name, base.as_str()] {
        for (refused, why) in REFUSED {
            let under = candidate
                .strip_prefix(refused)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'));
            if under {
                return Some(why);
            }
        }
    }
    None
}

/// `allow.*` permissions a recipe may grant without the user opting in:
/// they act only inside the jail. Any other `allow.*` (mount, raw
/// sockets, chflags, vmm, routing, the clock, ...) reaches the host;
/// `allow.mlock` too: wired pages are the host's memory, taken from
/// every other jail and the host itself.
const SAFE_ALLOW: &[&str] = &[
    "allow.set_hostname",
    "allow.reserved_ports",
    "allow.extattr",
    "allow.suser",
    "allow.setaudit",
];

/// Why a recipe parameter weakens the build jail so that the user must
/// opt in (`--allow-jail-param NAME`), or `None` when it does not. The
/// parameters of jail(8) ("Jail Parameters") judged here:
///
/// - `allow.*` outside `SAFE_ALLOW`, unless it turns a permission off
///   (`allow.noX`, or a value of `0`/`false`);
/// - `devfs_ruleset` other than 4 (`devfsrules_jail`): 0 means no rules,
///   every device of the host in the jail's `/dev`;
/// - `enforce_statfs` below 2: the jail sees the host's mount points;
/// - `children.max` above 0: jails inside the build jail;
/// - `sysvmsg`, `sysvsem`, `sysvshm` = `inherit`: the host's System V IPC.
///
/// Raising `securelevel` only takes rights away, so it needs no opt-in.
pub fn needs_opt_in(name: &str, value: &str) -> Option<&'static str> {
    let off = matches!(value, "0" | "false");
    if let Some(rest) = name.strip_prefix("allow.") {
        let last = rest.rsplit('.').next().unwrap_or(rest);
        if last.starts_with("no") || off || SAFE_ALLOW.contains(&name) {
            return None;
        }
        return Some(if rest.starts_with("mount") {
            "lets the jail mount file systems"
        } else {
            "grants the jail a permission that reaches beyond it"
        });
    }
    let number = value.trim().parse::<i64>().ok();
    match name {
        "devfs_ruleset" if number != Some(DEVFS_RULESET_JAIL as i64) => {
            Some("another devfs ruleset than 4 (devfsrules_jail) can expose the host's devices")
        }
        "enforce_statfs" if number.is_none_or(|n| n < 2) => {
            Some("enforce_statfs below 2 shows the host's mount points to the jail")
        }
        "children.max" if number.is_none_or(|n| n > 0) => Some("it allows jails inside the jail"),
        "sysvmsg" | "sysvsem" | "sysvshm" if value == "inherit" => {
            Some("`inherit` shares the host's System V IPC with the jail")
        }
        _ => None,
    }
}

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
