//! The rc.conf(5) variables `rc.d/ldconfig` reads, from the image's files
//! in the order `load_rc_config ldconfig` sources them:
//! `/etc/defaults/rc.conf`, `/etc/defaults/vendor.conf`, the files of
//! `rc_conf_files` (`/etc/rc.conf /etc/rc.conf.local`), then
//! `/etc/rc.conf.d/ldconfig` and `${_localbase}/etc/rc.conf.d/ldconfig`
//! (a file, or a directory of files).
//!
//! These files are shell, and jbuild does not run them: it reads the
//! plain assignments they are made of (`name="value"`, `name='value'`,
//! `name=value`, and rc.conf's own `: ${name:="value"}`), expanding
//! `$name` and `${name}` from what was read before, as sh would. A line
//! of any other form (a command, `$(…)`, a backquote) is passed over and
//! leaves the variable as it was: the defaults file's
//! `_localbase=$(sysctl -n user.localbase)` so keeps `/usr/local`, the
//! value FreeBSD's `user.localbase` has unless the kernel was told
//! otherwise.

use std::collections::BTreeMap;
use std::path::Path;

use super::{read_small, HintsError};

/// rc.conf's `_localbase` when `user.localbase` says nothing.
pub const LOCALBASE: &str = "/usr/local";
/// Bytes read of one configuration file.
const MAX_CONF: u64 = 1 << 20;
/// Files read from one `rc.conf.d/ldconfig` directory.
const MAX_CONF_FILES: usize = 256;

/// The variables read, by name.
#[derive(Debug, Default)]
pub struct Vars(BTreeMap<String, String>);

impl Vars {
    pub fn get(&self, name: &str) -> &str {
        self.0.get(name).map(String::as_str).unwrap_or("")
    }

    /// `checkyesno`: YES, TRUE, ON or 1 in any case.
    pub fn yes(&self, name: &str) -> bool {
        matches!(
            self.get(name).to_ascii_lowercase().as_str(),
            "yes" | "true" | "on" | "1"
        )
    }
}

/// The variables as `rc.d/ldconfig` sees them in the image at `root`.
pub fn load(root: &Path) -> Result<Vars, HintsError> {
    let mut vars = Vars::default();
    vars.0.insert("_localbase".into(), LOCALBASE.into());
    vars.0.insert(
        "rc_conf_files".into(),
        "/etc/rc.conf /etc/rc.conf.local".into(),
    );
    for file in ["/etc/defaults/rc.conf", "/etc/defaults/vendor.conf"] {
        source(root, file, &mut vars)?;
    }
    // source_rc_confs reads the list twice, for files a file names.
    let mut done: Vec<String> = Vec::new();
    for _ in 0..2 {
        let files: Vec<String> = vars
            .get("rc_conf_files")
            .split_whitespace()
            .map(str::to_string)
            .collect();
        for f in files {
            if !done.contains(&f) {
                source(root, &f, &mut vars)?;
                done.push(f);
            }
        }
    }
    let local = format!("{}/etc/rc.conf.d/ldconfig", vars.get("_localbase"));
    for place in ["/etc/rc.conf.d/ldconfig".to_string(), local] {
        let host =
            crate::fsutil::resolve_in_root(root, Path::new(&place), true).map_err(|source| {
                HintsError::Read {
                    path: place.clone().into(),
                    source,
                }
            })?;
        if host.is_dir() {
            let mut names: Vec<String> = std::fs::read_dir(&host)
                .map_err(|source| HintsError::Read {
                    path: place.clone().into(),
                    source,
                })?
                .filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect();
            names.sort();
            for n in names.into_iter().take(MAX_CONF_FILES) {
                source(root, &format!("{place}/{n}"), &mut vars)?;
            }
        } else {
            source(root, &place, &mut vars)?;
        }
    }
    Ok(vars)
}

/// Reads the assignments of one file, if it is there.
fn source(root: &Path, file: &str, vars: &mut Vars) -> Result<(), HintsError> {
    let Some(bytes) = read_small(root, file, MAX_CONF)? else {
        return Ok(());
    };
    for line in String::from_utf8_lossy(&bytes).lines() {
        if let Some((name, value, only_unset)) = assignment(line, vars) {
            if !only_unset || vars.get(&name).is_empty() {
                vars.0.insert(name, value);
            }
        }
    }
    Ok(())
}

/// One line's assignment: the name, the expanded value and whether it
/// only sets an unset variable (`: ${name:=value}`); `None` for any other
/// line.
fn assignment(line: &str, vars: &Vars) -> Option<(String, String, bool)> {
    let line = line.trim();
    if let Some(inner) = line.strip_prefix(": ${").and_then(|r| r.strip_suffix('}')) {
        let (name, value) = inner.split_once(":=")?;
        return Some((name.to_string(), word(value, vars)?, true));
    }
    let (name, rest) = line.split_once('=')?;
    let ok = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return None;
    }
    Some((name.to_string(), word(rest, vars)?, false))
}

/// The value of one shell word followed by nothing but blanks or a
/// comment; `None` for what only a shell could work out.
fn word(text: &str, vars: &Vars) -> Option<String> {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => loop {
                match chars.next()? {
                    '\'' => break,
                    c => out.push(c),
                }
            },
            '"' => loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => match chars.next()? {
                        c @ ('$' | '`' | '"' | '\\') => out.push(c),
                        '\n' => {}
                        c => {
                            out.push('\\');
                            out.push(c);
                        }
                    },
                    '$' => out.push_str(&dollar(&mut chars, vars)?),
                    '`' => return None,
                    c => out.push(c),
                }
            },
            '$' => out.push_str(&dollar(&mut chars, vars)?),
            '`' | '(' | ')' | ';' | '&' | '|' | '<' | '>' => return None,
            '\\' => out.push(chars.next()?),
            c if c == ' ' || c == '\t' => {
                let rest: String = chars.collect();
                let rest = rest.trim_start();
                return (rest.is_empty() || rest.starts_with('#')).then_some(out);
            }
            c => out.push(c),
        }
    }
    Some(out)
}

/// A `$name` or `${name}` after its `$`; `None` for `$(`, `${x:-…}` and
/// the like.
fn dollar(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, vars: &Vars) -> Option<String> {
    let mut name = String::new();
    if chars.peek() == Some(&'{') {
        chars.next();
        loop {
            match chars.next()? {
                '}' => break,
                c if c.is_ascii_alphanumeric() || c == '_' => name.push(c),
                _ => return None,
            }
        }
    } else {
        while let Some(&c) = chars.peek() {
            if c.is_ascii_alphanumeric() || c == '_' {
                name.push(c);
                chars.next();
            } else {
                break;
            }
        }
    }
    if name.is_empty() {
        return None;
    }
    Some(vars.get(&name).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vars {
        Vars(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    #[test]
    fn reads_the_forms_rc_conf_is_written_in() {
        let v = vars(&[("_localbase", "/usr/local"), ("ldconfig_paths", "/a")]);
        let a = |l: &str| assignment(l, &v);
        assert_eq!(
            a(r#"ldconfig_paths="/usr/lib/compat ${_localbase}/lib"	# search"#),
            Some((
                "ldconfig_paths".into(),
                "/usr/lib/compat /usr/local/lib".into(),
                false
            ))
        );
        assert_eq!(
            a("ldconfig_paths=\"$ldconfig_paths /opt/lib\""),
            Some(("ldconfig_paths".into(), "/a /opt/lib".into(), false))
        );
        assert_eq!(a("x='$y'"), Some(("x".into(), "$y".into(), false)));
        assert_eq!(a("x=plain"), Some(("x".into(), "plain".into(), false)));
        assert_eq!(
            a(r#": ${_localbase:="/usr/local"}"#),
            Some(("_localbase".into(), "/usr/local".into(), true))
        );
        assert_eq!(a("_localbase=$(/sbin/sysctl -n user.localbase)"), None);
        assert_eq!(a("x=`hostname`"), None);
        assert_eq!(a("x=\"${y:-z}\""), None);
        assert_eq!(a("# x=1"), None);
        assert_eq!(a("if [ -r x ]; then"), None);
        assert_eq!(a("x=a b"), None);
    }
}
