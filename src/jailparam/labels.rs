//! Where jail parameters travel in an image: labels of its config
//! (`org.freebsd.jail.<param>`, jbuild's older `org.jbuild.jail.<param>`),
//! how a permission's value is written there and read back, and how it is
//! offered as a manifest annotation.

use std::collections::BTreeMap;

/// The label prefix under which `JAIL` parameters travel in the image
/// config (the OCI config has no field for them; labels go everywhere the
/// image goes). It is the FreeBSD image world's own
/// (`org.freebsd.jail.allow.mlock="required"`), so images other tools
/// made carry their needs to jbuild and jbuild's to them.
pub const JAIL_LABEL_PREFIX: &str = "org.freebsd.jail.";

/// The prefix jbuild wrote before it used [`JAIL_LABEL_PREFIX`]: still
/// read, never written. Where an image has both, the new label wins.
pub const OLD_JAIL_LABEL_PREFIX: &str = "org.jbuild.jail.";

/// One jail(8) parameter an image's labels ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JailLabel {
    /// The parameter's name (`allow.mlock`).
    pub param: String,
    /// The value as jail(8) takes it; empty for a flag (`allow.mlock`).
    pub value: String,
    /// The label it came from and its value as written there.
    pub label: String,
    pub raw: String,
}

/// A permission (`allow.*`, not a negated `allow.noX`): a boolean that
/// images write as `required`.
fn is_permission(param: &str) -> bool {
    param
        .strip_prefix("allow.")
        .is_some_and(|rest| !rest.rsplit('.').next().unwrap_or(rest).starts_with("no"))
}

/// Whether a permission label's value turns it on (`Some(true)`), off
/// (`Some(false)`), or is not a boolean at all (`None`). Images in the
/// wild write `required`; runtimes' annotations write `true`; jail(8)
/// takes `1`, `true` or the bare name.
pub fn permission_value(raw: &str) -> Option<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "" | "required" | "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// The label value `JAIL param=value` is written as: a permission that is
/// on as `required`, one that is off as `false` (as FreeBSD images write
/// them), anything else as jail(8) takes it.
pub fn jail_label_value(param: &str, value: &str) -> String {
    match (is_permission(param), permission_value(value)) {
        (true, Some(true)) => "required".into(),
        (true, Some(false)) => "false".into(),
        _ => value.to_string(),
    }
}

/// The manifest annotation a parameter is offered as (`build
/// --jail-annotations`): a permission as `true`/`false`, which runtimes
/// reading `org.freebsd.jail.*` annotations take, anything else as
/// jail(8) takes it (`org.freebsd.jail.vnet=new`).
pub fn jail_annotation_value(param: &str, value: &str) -> String {
    let jailsys = matches!(
        param,
        "host" | "vnet" | "ip4" | "ip6" | "sysvmsg" | "sysvsem" | "sysvshm"
    );
    match (is_permission(param), permission_value(value)) {
        (true, Some(on)) => on.to_string(),
        // jail(8)'s jailsys parameters: a bare flag or a number stands for
        // a word; runtimes take the word (ocijail refuses anything but
        // `new`/`inherit` for `vnet`).
        _ if jailsys => match value {
            "" | "1" => "new".into(),
            "2" => "inherit".into(),
            "0" => "disable".into(),
            v => v.to_string(),
        },
        _ => value.to_string(),
    }
}

/// The parameter value a label's value stands for: a permission that is
/// on is a flag (empty), off is `0`; a word that is neither stays as it
/// is, for the reader to refuse ([`permission_value`] says which).
pub fn jail_param_value(param: &str, raw: &str) -> String {
    match (is_permission(param), permission_value(raw)) {
        (true, Some(true)) => String::new(),
        (true, Some(false)) => "0".into(),
        _ => raw.to_string(),
    }
}

/// The jail parameters among an image config's labels, by name: the new
/// prefix over the old one.
pub fn jail_labels<'a>(
    labels: impl IntoIterator<Item = (&'a String, &'a String)>,
) -> Vec<JailLabel> {
    let mut found: BTreeMap<String, JailLabel> = BTreeMap::new();
    let mut old = Vec::new();
    for (k, v) in labels {
        let (param, is_new) = match (
            k.strip_prefix(JAIL_LABEL_PREFIX),
            k.strip_prefix(OLD_JAIL_LABEL_PREFIX),
        ) {
            (Some(p), _) => (p, true),
            (None, Some(p)) => (p, false),
            (None, None) => continue,
        };
        let l = JailLabel {
            param: param.to_string(),
            value: jail_param_value(param, v),
            label: k.clone(),
            raw: v.clone(),
        };
        if is_new {
            found.insert(l.param.clone(), l);
        } else {
            old.push(l);
        }
    }
    for l in old {
        found.entry(l.param.clone()).or_insert(l);
    }
    found.into_values().collect()
}

/// Whether a label is one of [`jail_labels`]'s.
pub fn is_jail_label(key: &str) -> bool {
    key.starts_with(JAIL_LABEL_PREFIX) || key.starts_with(OLD_JAIL_LABEL_PREFIX)
}
