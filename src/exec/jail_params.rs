//! The command lines the FreeBSD executor runs around a step: `jail -c`
//! to make the jail, `mount`/`umount` for nullfs mounts, `jail -R` to
//! remove it. Pure functions, compiled and tested on every platform.
//!
//! The jail a step gets (jail(8), "Jail Parameters"):
//!
//! - `name=jbuild-<pid>-<n>`, `path=<root>`, `host.hostname=<spec>`.
//! - `persist`: the jail exists without processes; jbuild creates it,
//!   attaches the step's process to it (`jail_attach(2)`), and removes it.
//! - `mount.devfs` with `devfs_ruleset=4` (`devfsrules_jail` in
//!   `/etc/defaults/devfs.rules`): a `/dev` with only the safe nodes.
//! - `enforce_statfs=2` (the default, said aloud): the step sees only the
//!   mount its root is on. `children.max=0`: no jails inside.
//! - `ip4=inherit ip6=inherit` when the step has the network (the host's
//!   addresses, as a Docker build's default network), else
//!   `ip4=disable ip6=disable`.
//! - No `securelevel`: the jail keeps the host's (normally -1). A higher
//!   one forbids clearing `schg` flags, which installing FreeBSD base
//!   packages (pkgbase) and `chflags` in recipes need; a build step is
//!   recipe code the user chose to run, as with a Dockerfile `RUN`, and the
//!   template's runtime securelevel is the jail manager's business. A
//!   recipe can still ask for one: `JAIL securelevel=3`.
//! - `exec.clean`: should jail(8) ever run a command for this jail, it
//!   gets a clean environment. It runs none today (no `exec.*`, no
//!   `command`): the step's process is started by jbuild with exactly the
//!   step's environment, so this is said aloud rather than relied on.
//!
//! Recipe parameters (`JAIL name=value` lines) are passed after these; a
//! value for one of the defaults above replaces it. Parameters that jbuild
//! owns or that act on the host are refused here (see [`check_param`] and
//! [`crate::jailparam`]; the
//! build leaves them out of build jails, as they describe the runtime
//! jail). Parameters that weaken the jail ([`needs_opt_in`]) are let
//! through: the build asks for the user's consent before any step runs.

use std::path::Path;

use super::{ExecError, RunSpec};
use crate::jailparam::{refused_in_recipe, well_formed};
// Where they were before crate::jailparam gathered them.
pub use crate::jailparam::{needs_opt_in, DEVFS_RULESET_JAIL};

pub const JAIL: &str = "/usr/sbin/jail";
pub const MOUNT: &str = "/sbin/mount";
pub const UMOUNT: &str = "/sbin/umount";

/// The defaults a recipe parameter of the same name replaces.
const DEFAULTS: &[&str] = &["devfs_ruleset", "enforce_statfs", "children.max"];

/// Checks one recipe parameter: a name of `[a-z0-9_.]` (jail(8) names,
/// e.g. `allow.raw_sockets`, `sysvshm`, `osrelease`), not one jbuild owns
/// or one that would act on the host.
pub fn check_param(name: &str, value: &str) -> Result<(), ExecError> {
    let invalid = |why: &str| {
        Err(ExecError::Invalid(format!(
            "JAIL parameter `{name}`: {why}"
        )))
    };
    if !well_formed(name) {
        return invalid("a parameter name is made of a-z, 0-9, `_` and `.` (see `sysctl -d security.jail.param`)");
    }
    if value.contains('\0') {
        return invalid("the value contains a NUL byte");
    }
    match refused_in_recipe(name) {
        Some(why) => invalid(&format!("not allowed in a recipe: {why}")),
        None => Ok(()),
    }
}

fn param(name: &str, value: &str) -> String {
    if value.is_empty() {
        name.to_string()
    } else {
        format!("{name}={value}")
    }
}

/// `jail -i -c ...`: creates the persistent jail for one step and prints
/// its jid. Refuses bad recipe parameters before anything runs.
pub fn jail_create_args(root: &Path, name: &str, spec: &RunSpec) -> Result<Vec<String>, ExecError> {
    for (k, v) in &spec.jail_params {
        check_param(k, v)?;
    }
    let user = |k: &str| {
        spec.jail_params
            .iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
    };
    let hostname = if spec.hostname.is_empty() {
        "localhost"
    } else {
        &spec.hostname
    };
    let (ip4, ip6) = if spec.network {
        ("inherit", "inherit")
    } else {
        ("disable", "disable")
    };

    let mut args: Vec<String> = vec![JAIL.into(), "-i".into(), "-c".into()];
    args.push(param("name", name));
    args.push(param("path", &root.display().to_string()));
    args.push(param("host.hostname", hostname));
    args.push("persist".into());
    args.push("exec.clean".into());
    args.push("mount.devfs".into());
    for (k, default) in [
        ("devfs_ruleset", DEVFS_RULESET_JAIL.to_string()),
        ("enforce_statfs", "2".into()),
        ("children.max", "0".into()),
    ] {
        args.push(param(k, &user(k).unwrap_or(default)));
    }
    args.push(param("ip4", ip4));
    args.push(param("ip6", ip6));
    for (k, v) in &spec.jail_params {
        if !DEFAULTS.contains(&k.as_str()) {
            args.push(param(k, v));
        }
    }
    Ok(args)
}

/// `jail -R NAME`: removes the jail and kills what still runs in it. `-R`
/// rather than `-r`, so nothing from the host's `/etc/jail.conf` (a `*`
/// section's `exec.stop`, say) is applied. It unmounts nothing: jail(8)
/// unmounts `mount.devfs` only for jails it knows the parameters of
/// (from `jail.conf` or the same command line), so the devfs it mounted
/// at creation is unmounted separately ([`umount_args`]).
pub fn jail_remove_args(name: &str) -> Vec<String> {
    vec![JAIL.into(), "-R".into(), name.into()]
}

/// `mount -t nullfs -o ro|rw HOST TARGET` (nullfs(5); a file onto a file
/// works since FreeBSD 13).
pub fn nullfs_mount_args(host: &Path, target: &Path, read_only: bool) -> Vec<String> {
    let mode = if read_only { "ro" } else { "rw" };
    vec![
        MOUNT.into(),
        "-t".into(),
        "nullfs".into(),
        "-o".into(),
        mode.into(),
        host.display().to_string(),
        target.display().to_string(),
    ]
}

/// `mount -t tmpfs -o OPTIONS tmpfs TARGET` (tmpfs(5): `mode` in octal,
/// `size` in bytes; mount(8) passes `-o` to the file system).
pub fn tmpfs_mount_args(target: &Path, options: &str) -> Vec<String> {
    vec![
        MOUNT.into(),
        "-t".into(),
        "tmpfs".into(),
        "-o".into(),
        options.into(),
        "tmpfs".into(),
        target.display().to_string(),
    ]
}

/// `umount -f TARGET`: forced, since the jail and its processes are gone.
pub fn umount_args(target: &Path) -> Vec<String> {
    vec![UMOUNT.into(), "-f".into(), target.display().to_string()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RunSpec {
        RunSpec {
            argv: vec!["/bin/sh".into()],
            env: vec![],
            cwd: "/".into(),
            user: None,
            network: false,
            hostname: "builder".into(),
            jail_params: vec![],
            mounts: vec![],
        }
    }

    #[test]
    fn create_without_network() {
        let args = jail_create_args(Path::new("/j/root"), "jbuild-1-0", &spec()).unwrap();
        assert_eq!(
            args.join(" "),
            "/usr/sbin/jail -i -c name=jbuild-1-0 path=/j/root host.hostname=builder persist exec.clean mount.devfs \
             devfs_ruleset=4 enforce_statfs=2 children.max=0 ip4=disable ip6=disable"
        );
    }

    #[test]
    fn network_and_recipe_parameters() {
        let mut s = spec();
        s.network = true;
        s.jail_params = vec![
            ("allow.raw_sockets".into(), "".into()),
            ("sysvshm".into(), "new".into()),
            ("securelevel".into(), "3".into()),
            ("enforce_statfs".into(), "1".into()),
        ];
        let args = jail_create_args(Path::new("/r"), "j", &s).unwrap();
        let tail: Vec<&str> = args[9..].iter().map(String::as_str).collect();
        assert_eq!(
            tail,
            [
                "devfs_ruleset=4",
                "enforce_statfs=1",
                "children.max=0",
                "ip4=inherit",
                "ip6=inherit",
                "allow.raw_sockets",
                "sysvshm=new",
                "securelevel=3"
            ]
        );
    }

    #[test]
    fn refused_parameters() {
        for name in [
            "path",
            "name",
            "command",
            "exec.prestart",
            "exec.poststop",
            "exec.clean",
            "persist",
            "nopersist",
            "ip4.addr",
            "vnet",
            "vnet.interface",
            "mount.fstab",
            "mount",
            "interface",
            "host.hostname",
        ] {
            let err = check_param(name, "x").unwrap_err().to_string();
            assert!(
                err.contains(name) && err.contains("not allowed"),
                "{name}: {err}"
            );
        }
        for bad in [
            "Allow.mount",
            "allow-mount",
            "",
            ".x",
            "x.",
            "a..b",
            "a=b",
            "a b",
        ] {
            assert!(check_param(bad, "").is_err(), "{bad:?}");
        }
        for ok in [
            "allow.raw_sockets",
            "allow.nomount",
            "osrelease",
            "sysvmsg",
            "allow.mount.zfs",
            "devfs_ruleset",
        ] {
            check_param(ok, "1").unwrap();
        }
        assert!(check_param("osrelease", "a\0b").is_err());
        let mut s = spec();
        s.jail_params = vec![("exec.start".into(), "/bin/sh".into())];
        assert!(matches!(
            jail_create_args(Path::new("/r"), "j", &s),
            Err(ExecError::Invalid(_))
        ));
    }

    /// Judged against jail(8), "Jail Parameters": what each one opens up.
    #[test]
    fn dangerous_parameters_need_an_opt_in() {
        for (name, value) in [
            ("devfs_ruleset", "0"),
            ("devfs_ruleset", "5"),
            ("allow.mount", ""),
            ("allow.mount.zfs", "1"),
            ("allow.mount.devfs", "true"),
            ("allow.raw_sockets", ""),
            ("allow.mlock", ""),
            ("allow.sysvipc", "1"),
            ("allow.chflags", "1"),
            ("allow.vmm", "1"),
            ("enforce_statfs", "1"),
            ("enforce_statfs", "0"),
            ("enforce_statfs", "x"),
            ("children.max", "3"),
            ("sysvshm", "inherit"),
        ] {
            assert!(needs_opt_in(name, value).is_some(), "{name}={value}");
        }
        for (name, value) in [
            ("devfs_ruleset", "4"),
            ("enforce_statfs", "2"),
            ("children.max", "0"),
            ("allow.nomount", ""),
            ("allow.mount.nozfs", ""),
            ("allow.raw_sockets", "0"),
            ("allow.set_hostname", "1"),
            ("allow.noraw_sockets", ""),
            ("sysvshm", "new"),
            ("securelevel", "3"),
            ("osrelease", "14.3-RELEASE"),
        ] {
            assert_eq!(needs_opt_in(name, value), None, "{name}={value}");
        }
    }

    #[test]
    fn teardown_commands() {
        assert_eq!(jail_remove_args("j").join(" "), "/usr/sbin/jail -R j");
        assert_eq!(
            nullfs_mount_args(Path::new("/cache"), Path::new("/r/var/cache"), true).join(" "),
            "/sbin/mount -t nullfs -o ro /cache /r/var/cache"
        );
        assert_eq!(
            umount_args(Path::new("/r/dev")).join(" "),
            "/sbin/umount -f /r/dev"
        );
    }
}
