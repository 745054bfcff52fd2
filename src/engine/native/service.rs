//! `SERVICE name enable|disable`: what `service name enable` does, without
//! running anything.
//!
//! `service foo enable` asks the script's rc.subr for its `rcvar` and runs
//! `sysrc rcvar=YES`. A script's rcvar is whatever it assigns to `rcvar`,
//! normally `${name}_enable` where `name` is the script's own `name=` (which
//! is how `/usr/local/etc/rc.d/php-fpm` ends up with `php_fpm_enable`). So:
//!
//! 1. If the root has `/etc/rc.d/<service>` or else
//!    `/usr/local/etc/rc.d/<service>` (the order service(8) searches), its
//!    first `rcvar=` line is read, with `$name`/`${name}` replaced by its
//!    first `name=` value; if that gives a variable name, it is used. A
//!    script whose `rcvar` is computed (`` `set_rcvar` ``) gives
//!    `<name>_enable` from its `name=` line.
//! 2. Otherwise (no script yet, e.g. the package is installed later) the
//!    rcvar is `<service>_enable` with every `-` turned into `_`.
//!
//! The variable is then set with [`sysrc`](super::sysrc) in `/etc/rc.conf`.

use std::path::Path;

use crate::jailfile::SysrcOp;

use super::{is_var_name, read_optional, sysrc, NativeError, SysrcChange};

/// Where service(8) looks for scripts, in its order.
const RC_DIRS: [&str; 2] = ["/etc/rc.d", "/usr/local/etc/rc.d"];

/// Sets `<rcvar>="YES"` (or `"NO"`) in the root's `/etc/rc.conf`.
pub fn service(root: &Path, name: &str, enable: bool) -> Result<SysrcChange, NativeError> {
    let rcvar = service_rcvar(root, name)?;
    sysrc(
        root,
        "/etc/rc.conf",
        &rcvar,
        SysrcOp::Set,
        if enable { "YES" } else { "NO" },
    )
}

/// The rc.conf variable that enables service `name` in `root` (see the
/// module docs for how it is found).
pub fn service_rcvar(root: &Path, name: &str) -> Result<String, NativeError> {
    let valid = !name.is_empty()
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.+".contains(&b));
    if !valid {
        return Err(NativeError::InvalidService {
            name: name.to_string(),
        });
    }
    for dir in RC_DIRS {
        let shown = Path::new(dir).join(name);
        let host = crate::fsutil::resolve_in_root(root, &shown, true)
            .map_err(NativeError::io("resolve", &shown))?;
        if !host.is_file() {
            continue;
        }
        if let Some((script, _)) = read_optional(&host, &shown)? {
            if let Some(rcvar) = rcvar_of_script(&String::from_utf8_lossy(&script)) {
                return Ok(rcvar);
            }
        }
    }
    let rcvar = format!("{}_enable", name.replace('-', "_"));
    if is_var_name(&rcvar) {
        Ok(rcvar)
    } else {
        Err(NativeError::InvalidService {
            name: name.to_string(),
        })
    }
}

/// The rcvar an rc.d script declares, if it can be read without a shell.
fn rcvar_of_script(script: &str) -> Option<String> {
    let name = first_assignment(script, "name");
    if let Some(rcvar) = first_assignment(script, "rcvar") {
        let rcvar = match &name {
            Some(n) => rcvar.replace("${name}", n).replace("$name", n),
            None => rcvar,
        };
        if is_var_name(&rcvar) {
            return Some(rcvar);
        }
    }
    name.map(|n| format!("{n}_enable"))
        .filter(|v| is_var_name(v))
}

/// The value of the first `var=` line, without its quotes.
fn first_assignment(script: &str, var: &str) -> Option<String> {
    script.lines().find_map(|line| {
        let value = line.trim_start().strip_prefix(var)?.strip_prefix('=')?;
        let value = match value.chars().next() {
            Some(q @ ('"' | '\'')) => value[1..].split(q).next()?,
            _ => value.split([' ', '\t', ';', '#']).next()?,
        };
        Some(value.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rcvar_from_scripts() {
        let php = "#!/bin/sh\n. /etc/rc.subr\nname=\"php_fpm\"\nrcvar=php_fpm_enable\n";
        assert_eq!(rcvar_of_script(php).as_deref(), Some("php_fpm_enable"));
        let sshd = "name=\"sshd\"\ndesc=\"x\"\nrcvar=\"${name}_enable\" # c\n";
        assert_eq!(rcvar_of_script(sshd).as_deref(), Some("sshd_enable"));
        let old = "name=ntpd\nrcvar=`set_rcvar`\n";
        assert_eq!(rcvar_of_script(old).as_deref(), Some("ntpd_enable"));
        assert_eq!(rcvar_of_script("echo hi\n"), None);
    }
}
