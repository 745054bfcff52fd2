//! `jbuild create --bundle DIR IMAGE`: an OCI runtime bundle for the
//! runtimes of FreeBSD (ocijail, runj): `DIR/rootfs`, made the way
//! `create` makes a jail's root, and `DIR/config.json` after the
//! runtime-spec (1.3, whose `freebsd` section describes the jail).
//!
//! What `config.json` holds:
//!
//! - `process`: `args` from Entrypoint + Cmd (without either, the jail's
//!   `exec.start` run by `/bin/sh -c`, else `/bin/sh /etc/rc`, as `create`
//!   starts a jail), `env` from Env (with FreeBSD's default `PATH` and the
//!   user's `HOME` when the image has none), `cwd` from WorkingDir, `user`
//!   from User resolved in the root's own `/etc/passwd` and `/etc/group`.
//! - `mounts`: devfs on `/dev` with the `devfs_ruleset` the image asks
//!   for (else 4, `devfsrules_jail`) and fdescfs on `/dev/fd`: what
//!   podman and ocijail give a FreeBSD container. VOLUMEs are the
//!   runtime's to fill (they have no source here); their directories are
//!   made in `rootfs` as `create` makes them ([`super::mounts`]).
//! - `hostname`: the image's `host.hostname`, else the NAME given.
//! - `freebsd.jail`: the parameters the schema has a field for
//!   ([`jail_section`]); `allow.sysvipc` (deprecated in jail(8)) as
//!   `sysvmsg`, `sysvsem` and `sysvshm` = `inherit`, which jail(8) says it
//!   is.
//! - `annotations`: every parameter as `org.freebsd.jail.<param>`, the
//!   form ocijail reads (`org.freebsd.jail.vnet`, and `allow.*` with
//!   patched builds), so parameters without a schema field
//!   (`securelevel`, `osrelease`, `allow.mount`, ...) still reach the
//!   runtime.
//!
//! The same consent rules as `create` apply first ([`super::params`]).

use std::path::PathBuf;

use serde_json::{json, Map, Value};

use super::{copy_root, mounts, params, write_file, CreateError};
use crate::exec::user::{resolve_user, Identity};
use crate::image::unpack::Unpacker;
use crate::image::{
    jail_annotation_value, permission_value, ImageState, Platform, JAIL_LABEL_PREFIX,
};

/// The runtime-spec version `config.json` declares (the first with the
/// FreeBSD section).
pub const OCI_VERSION: &str = "1.3.0";

/// FreeBSD's default `PATH` for a process that has none (login.conf(5)).
pub const DEFAULT_PATH: &str = "/sbin:/bin:/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin";

#[derive(Debug, Clone)]
pub struct BundleOptions {
    pub image: String,
    pub dir: PathBuf,
    /// The hostname when the image gives none.
    pub name: Option<String>,
    /// As [`super::CreateOptions::allowed_jail_params`].
    pub allowed_jail_params: Vec<String>,
}

/// What was written.
#[derive(Debug, Clone)]
pub struct Bundle {
    pub rootfs: PathBuf,
    pub config: PathBuf,
    pub spec: Value,
}

/// Writes the bundle; nothing is written when the image's parameters are
/// refused or `DIR/config.json` is already there.
pub fn bundle(unpacker: &Unpacker<'_>, opts: &BundleOptions) -> Result<Bundle, CreateError> {
    let config = opts.dir.join("config.json");
    if config.exists() {
        return Err(CreateError::User(format!(
            "{} already exists; remove it or choose another --bundle directory",
            config.display()
        )));
    }
    let (top, img) = unpacker.top(&opts.image, &Platform::default_for_host())?;
    let state = ImageState::from_config(&img.config);
    let labels = img
        .config
        .config()
        .as_ref()
        .and_then(|c| c.labels().clone());
    let wanted = params::read(labels.iter().flatten());
    let jail = params::agreed(&opts.image, &wanted, &opts.allowed_jail_params)?.params;
    let view = match top.as_deref() {
        Some(t) => Some(unpacker.snapshotter.view(t)?),
        None => None,
    };
    let points = mounts::check(&opts.image, view.as_deref(), &state.volumes)?;
    let rootfs = opts.dir.join("rootfs");
    copy_root(unpacker.snapshotter, top.as_deref(), &rootfs)?;
    mounts::make(&rootfs, &points)?;
    let user = resolve_user(&rootfs, state.user.as_deref()).map_err(|e| {
        CreateError::User(format!(
            "image {}: its USER `{}`: {e}",
            opts.image,
            state.user.as_deref().unwrap_or("root")
        ))
    })?;
    let spec = runtime_spec(&state, &jail, opts.name.as_deref(), &user);
    let text = serde_json::to_string_pretty(&spec).expect("a JSON value serializes");
    write_file(&config, &(text + "\n"))?;
    Ok(Bundle {
        rootfs,
        config,
        spec,
    })
}

/// `config.json` for an image's state, its agreed jail parameters, a
/// fallback hostname and the resolved user (module doc). Pure.
pub fn runtime_spec(
    state: &ImageState,
    jail: &[(String, String)],
    name: Option<&str>,
    user: &Identity,
) -> Value {
    let get = |k: &str| {
        jail.iter()
            .rev()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    let mut args: Vec<String> = state
        .entrypoint
        .iter()
        .flatten()
        .chain(state.cmd.iter().flatten())
        .cloned()
        .collect();
    if args.is_empty() {
        args = match get("exec.start") {
            Some(start) => vec!["/bin/sh".into(), "-c".into(), start.into()],
            None => vec!["/bin/sh".into(), "/etc/rc".into()],
        };
    }
    let mut env: Vec<String> = state.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if !state.env.iter().any(|(k, _)| k == "PATH") {
        env.push(format!("PATH={DEFAULT_PATH}"));
    }
    if !state.env.iter().any(|(k, _)| k == "HOME") {
        env.push(format!("HOME={}", user.home));
    }
    let mut process = json!({
        "terminal": false,
        "user": {"uid": user.uid, "gid": user.gid},
        "args": args,
        "env": env,
        "cwd": state.cwd(),
    });
    let extra: Vec<u32> = user
        .groups
        .iter()
        .copied()
        .filter(|g| *g != user.gid)
        .collect();
    if !extra.is_empty() {
        process["user"]["additionalGids"] = json!(extra);
    }
    let ruleset = get("devfs_ruleset")
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(crate::jailparam::DEVFS_RULESET_JAIL);
    let mut spec = json!({
        "ociVersion": OCI_VERSION,
        "root": {"path": "rootfs", "readonly": false},
        "process": process,
        "mounts": [
            {"destination": "/dev", "type": "devfs", "source": "devfs", "options": [format!("ruleset={ruleset}")]},
            {"destination": "/dev/fd", "type": "fdescfs", "source": "fdesc", "options": []},
        ],
        "freebsd": {"jail": jail_section(jail)},
    });
    if let Some(host) = get("host.hostname").or(name) {
        spec["hostname"] = json!(host);
    }
    let annotations: Map<String, Value> = jail
        .iter()
        .map(|(k, v)| {
            (
                format!("{JAIL_LABEL_PREFIX}{k}"),
                json!(jail_annotation_value(k, v)),
            )
        })
        .collect();
    if !annotations.is_empty() {
        spec["annotations"] = Value::Object(annotations);
    }
    spec
}

/// jail(8)'s jailsys values (`disable`, `new`, `inherit`, or 0, 1, 2; a
/// bare flag is `new`) as the schema's sharing modes.
fn sharing(value: &str, disable_ok: bool) -> Option<&'static str> {
    match value {
        "0" | "disable" if disable_ok => Some("disable"),
        "" | "1" | "new" => Some("new"),
        "2" | "inherit" => Some("inherit"),
        _ => None,
    }
}

/// The schema's `allow` field for a permission, if it has one.
fn allow_field(permission: &str) -> Option<&'static str> {
    Some(match permission {
        "set_hostname" => "setHostname",
        "raw_sockets" => "rawSockets",
        "chflags" => "chflags",
        "quotas" => "quotas",
        "socket_af" => "socketAf",
        "mlock" => "mlock",
        "reserved_ports" => "reservedPorts",
        "suser" => "suser",
        _ => return None,
    })
}

/// `freebsd.jail`: the parameters with a field in the runtime-spec's
/// FreeBSD schema, in its names and types. Values the schema would not
/// take are left to the annotations.
pub fn jail_section(jail: &[(String, String)]) -> Value {
    let mut out = Map::new();
    let mut allow = Map::new();
    let mut mounts: Vec<String> = Vec::new();
    let list = |v: &str| -> Value {
        json!(v
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>())
    };
    for (k, v) in jail {
        match k.as_str() {
            "host" | "vnet" => {
                if let Some(m) = sharing(v, false) {
                    out.insert(k.clone(), json!(m));
                }
            }
            "ip4" | "ip6" | "sysvmsg" | "sysvsem" | "sysvshm" => {
                if let Some(m) = sharing(v, true) {
                    out.insert(k.clone(), json!(m));
                }
            }
            "host.hostname" => {
                out.entry("host").or_insert(json!("new"));
            }
            "ip4.addr" => {
                out.insert("ip4Addr".into(), list(v));
            }
            "ip6.addr" => {
                out.insert("ip6Addr".into(), list(v));
            }
            "interface" => {
                out.insert("interface".into(), json!(v));
            }
            "vnet.interface" => {
                out.insert("vnetInterfaces".into(), list(v));
            }
            "enforce_statfs" => {
                if let Ok(n @ 0..=2) = v.parse::<u8>() {
                    out.insert("enforceStatfs".into(), json!(n));
                }
            }
            _ => {
                let Some(rest) = k.strip_prefix("allow.") else {
                    continue;
                };
                if let Some(fs) = rest.strip_prefix("mount.") {
                    if !fs.starts_with("no") && permission_value(v) == Some(true) {
                        mounts.push(fs.to_string());
                    }
                    continue;
                }
                let (perm, on) = match rest.strip_prefix("no") {
                    Some(p) if allow_field(p).is_some() || p == "sysvipc" => (p, false),
                    _ => (rest, permission_value(v).unwrap_or(false)),
                };
                if let Some(field) = allow_field(perm) {
                    allow.insert(field.into(), json!(on));
                } else if perm == "sysvipc" && on {
                    for m in ["sysvmsg", "sysvsem", "sysvshm"] {
                        out.entry(m).or_insert(json!("inherit"));
                    }
                }
            }
        }
    }
    if !mounts.is_empty() {
        allow.insert("mount".into(), json!(mounts));
    }
    if !allow.is_empty() {
        out.insert("allow".into(), Value::Object(allow));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn parameters_map_to_the_schema_fields() {
        let got = jail_section(&p(&[
            ("allow.mlock", ""),
            ("allow.raw_sockets", "0"),
            ("allow.sysvipc", ""),
            ("sysvshm", "new"),
            ("allow.mount.tmpfs", ""),
            ("allow.mount.nullfs", ""),
            ("allow.noquotas", ""),
            ("allow.mount.nozfs", ""),
            ("allow.nomount", ""),
            ("vnet", ""),
            ("ip4", "disable"),
            ("ip4.addr", "10.0.0.2, 10.0.0.3"),
            ("enforce_statfs", "1"),
            ("host.hostname", "web"),
            ("securelevel", "3"),
            ("vnet.interface", "epair0b"),
        ]));
        assert_eq!(
            got,
            json!({
                "allow": {"mlock": true, "rawSockets": false, "quotas": false, "mount": ["tmpfs", "nullfs"]},
                "sysvmsg": "inherit", "sysvsem": "inherit", "sysvshm": "new",
                "vnet": "new", "ip4": "disable", "ip4Addr": ["10.0.0.2", "10.0.0.3"],
                "enforceStatfs": 1, "host": "new", "vnetInterfaces": ["epair0b"],
            })
        );
        // Values the schema would refuse stay out of the fields.
        assert_eq!(
            jail_section(&p(&[
                ("vnet", "disable"),
                ("enforce_statfs", "7"),
                ("ip6", "x")
            ])),
            json!({})
        );
    }

    #[test]
    fn the_process_comes_from_the_image() {
        let mut state = ImageState::empty(Platform::parse("freebsd/amd64").unwrap());
        state.env.push(("LANG".into(), "C.UTF-8".into()));
        state.workdir = Some("/srv".into());
        state.entrypoint = Some(vec!["/usr/local/bin/app".into()]);
        state.cmd = Some(vec!["--serve".into()]);
        let user = Identity {
            uid: 80,
            gid: 80,
            groups: vec![80, 5],
            home: "/var/www".into(),
        };
        let spec = runtime_spec(&state, &p(&[("devfs_ruleset", "5")]), Some("web"), &user);
        assert_eq!(
            spec["process"]["args"],
            json!(["/usr/local/bin/app", "--serve"])
        );
        assert_eq!(
            spec["process"]["env"],
            json!([
                "LANG=C.UTF-8",
                format!("PATH={DEFAULT_PATH}"),
                "HOME=/var/www"
            ])
        );
        assert_eq!(spec["process"]["cwd"], "/srv");
        assert_eq!(
            spec["process"]["user"],
            json!({"uid": 80, "gid": 80, "additionalGids": [5]})
        );
        assert_eq!(spec["mounts"][0]["options"], json!(["ruleset=5"]));
        assert_eq!(spec["hostname"], "web");
        assert_eq!(spec["annotations"]["org.freebsd.jail.devfs_ruleset"], "5");
        let bare = runtime_spec(&ImageState::empty(state.platform.clone()), &[], None, &user);
        assert_eq!(bare["process"]["args"], json!(["/bin/sh", "/etc/rc"]));
        assert_eq!(bare["process"]["cwd"], "/");
        assert!(bare.get("hostname").is_none() && bare.get("annotations").is_none());
    }
}
