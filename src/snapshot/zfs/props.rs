//! Labels as ZFS user properties, reversibly.
//!
//! A ZFS user property name is lower-case `[a-z0-9:._-]`, contains a `:`,
//! and is at most 255 bytes; its value is a string without NUL (and, to
//! keep `zfs get -H` output one line per property, jbuild keeps tabs and
//! newlines out of it too). Labels are any strings, so they are mapped:
//!
//! | label | property | value |
//! |---|---|---|
//! | `jbuild:` + `[a-z0-9:._-]*` (everything jbuild writes) | the label itself | the value as is |
//! | anything else, e.g. `Org.Label` or `a` | `jbuild.l:` + the label with every byte outside `[a-z0-9:.-]` written `_xx` (hex) | |
//! | | | `\` + hex of the bytes, when the value is empty, starts with `\` or holds a control character |
//!
//! So `jbuild:chainid` reads as itself in `zfs get`, and the mapping can
//! always be undone. Properties outside these two prefixes belong to
//! somebody else and are not labels.

use super::super::{Labels, Result, SnapshotError};

const DIRECT: &str = "jbuild:";
const ENCODED: &str = "jbuild.l:";
/// ZAP_MAXNAMELEN - 1: the longest property name ZFS accepts.
const MAX_NAME: usize = 255;

fn plain(b: u8) -> bool {
    matches!(b, b'a'..=b'z' | b'0'..=b'9' | b':' | b'.' | b'-')
}

/// The user property a label is stored as.
pub(super) fn property_name(label: &str) -> Result<String> {
    let direct = label
        .strip_prefix(DIRECT)
        .is_some_and(|rest| rest.bytes().all(|b| plain(b) || b == b'_'));
    let name = if direct {
        label.to_string()
    } else {
        let mut s = String::from(ENCODED);
        for b in label.bytes() {
            if plain(b) {
                s.push(b as char);
            } else {
                s.push_str(&format!("_{b:02x}"));
            }
        }
        s
    };
    if name.len() > MAX_NAME {
        return Err(SnapshotError::Backend(format!(
            "label `{label}` is too long to store as a ZFS user property ({} bytes, at most {MAX_NAME} after encoding)",
            name.len()
        )));
    }
    Ok(name)
}

/// The label a user property stores, `None` when it is not one of jbuild's.
pub(super) fn label_name(property: &str) -> Option<String> {
    if let Some(rest) = property.strip_prefix(ENCODED) {
        let bytes = rest.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'_' {
                let hex = rest.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        return String::from_utf8(out).ok();
    }
    property.starts_with(DIRECT).then(|| property.to_string())
}

/// The property value a label value is stored as.
pub(super) fn property_value(value: &str) -> String {
    let raw = !value.is_empty()
        && !value.starts_with('\\')
        && !value.bytes().any(|b| b < 0x20 || b == 0x7f);
    if raw {
        value.to_string()
    } else {
        format!("\\{}", hex::encode(value.as_bytes()))
    }
}

/// The label value a property value stores (`None` if it is damaged).
pub(super) fn label_value(value: &str) -> Option<String> {
    match value.strip_prefix('\\') {
        Some(h) => String::from_utf8(hex::decode(h).ok()?).ok(),
        None => Some(value.to_string()),
    }
}

/// `name=value` arguments for `zfs snapshot -o` / `zfs set`.
pub(super) fn assignments(labels: &Labels) -> Result<Vec<String>> {
    labels
        .iter()
        .map(|(k, v)| Ok(format!("{}={}", property_name(k)?, property_value(v))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zfs_accepts(name: &str) -> bool {
        name.len() <= MAX_NAME && name.contains(':') && name.bytes().all(|b| plain(b) || b == b'_')
    }

    #[test]
    fn jbuild_labels_are_stored_under_their_own_name() {
        for l in [
            "jbuild:key",
            "jbuild:diffid",
            "jbuild:chainid",
            "jbuild:blob.gzip",
            "jbuild:created",
            "jbuild:a_b",
        ] {
            assert_eq!(property_name(l).unwrap(), l);
            assert_eq!(label_name(l).as_deref(), Some(l));
        }
    }

    #[test]
    fn every_other_label_round_trips_through_a_valid_property_name() {
        let long = "x".repeat(200);
        for l in [
            "a",
            "b",
            "Org.Label-Schema:Name",
            "jbuild:Key",
            "jbuild.l:_zz",
            "with space",
            "under_score",
            "ünï/cödé\t\n",
            "jbuild",
            long.as_str(),
        ] {
            let p = property_name(l).unwrap();
            assert!(zfs_accepts(&p), "{l:?} -> {p:?}");
            assert_eq!(label_name(&p).as_deref(), Some(l), "{p}");
        }
        assert_eq!(property_name("A_b").unwrap(), "jbuild.l:_41_5fb");
    }

    #[test]
    fn foreign_or_damaged_properties_are_not_labels() {
        assert_eq!(label_name("com.sun:auto-snapshot"), None);
        assert_eq!(label_name("jbuild.l:_z"), None);
        assert_eq!(label_name("jbuild.l:_zz"), None);
        assert_eq!(label_name("jbuild.l:_ff"), None, "not UTF-8");
    }

    #[test]
    fn a_label_too_long_for_zfs_is_a_clear_error() {
        let e = property_name(&"Z".repeat(100)).unwrap_err().to_string();
        assert!(e.contains("too long"), "{e}");
    }

    #[test]
    fn values_round_trip_and_never_hold_tabs_or_newlines() {
        for v in [
            "sha256:00ff",
            "",
            "-",
            "\\already",
            "a\tb\nc",
            "ünïcödé",
            " lead",
        ] {
            let p = property_value(v);
            assert!(!p.is_empty() && !p.contains(['\t', '\n']), "{v:?} -> {p:?}");
            assert_eq!(label_value(&p).as_deref(), Some(v));
        }
        assert_eq!(property_value("sha256:00"), "sha256:00");
        assert_eq!(label_value("\\zz"), None);
    }
}
