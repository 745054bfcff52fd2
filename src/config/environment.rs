//! Every environment variable jbuild reads, in one table: the ENVIRONMENT
//! section of `jbuild(1)` and of `docs/config.md` are made from it, and a
//! test (`tests/it/docs/reference.rs`) fails when the code reads a variable this table
//! does not list.

/// One environment variable and what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvVar {
    /// Its name; `HTTP_PROXY, http_proxy` for a pair read alike.
    pub name: &'static str,
    /// What it does, one sentence or two.
    pub meaning: &'static str,
}

/// The variables, jbuild's own first.
pub const VARIABLES: &[EnvVar] = &[
    EnvVar {
        name: "JBUILD_ROOT",
        meaning: "Where jbuild keeps its store, snapshots and caches (as `--root`). Default \
                  `/var/db/jbuild` for root, else `$XDG_DATA_HOME/jbuild` \
                  (`~/.local/share/jbuild`).",
    },
    EnvVar {
        name: "JBUILD_ROOTLESS_NAMESPACE",
        meaning: "Set by jbuild itself in the user namespace it enters when a user without root \
                  has subordinate ids (rootless builds, docs/security.md); not for users to set.",
    },
    EnvVar {
        name: "JBUILD_BACKEND",
        meaning:
            "The snapshot backend, `auto`, `zfs`, `overlay` or `dir` (as `--backend`); wins over \
                  `backend =` in the configuration file.",
    },
    EnvVar {
        name: "JBUILD_CONFIG",
        meaning: "The configuration file to read instead of searching for one; it must exist.",
    },
    EnvVar {
        name: "JBUILD_ZFS_DATASET",
        meaning: "The parent ZFS dataset of every dataset jbuild makes; wins over `[zfs] dataset`.",
    },
    EnvVar {
        name: "JBUILD_REGISTRY_HOST",
        meaning: "With `JBUILD_REGISTRY_USERNAME` and `JBUILD_REGISTRY_PASSWORD`: credentials \
                  for this one registry (`host` or `host:port`), asked before any file. All \
                  three or none.",
    },
    EnvVar {
        name: "JBUILD_REGISTRY_USERNAME",
        meaning: "The user name for `JBUILD_REGISTRY_HOST`.",
    },
    EnvVar {
        name: "JBUILD_REGISTRY_PASSWORD",
        meaning: "The password or token for `JBUILD_REGISTRY_HOST`.",
    },
    EnvVar {
        name: "COSIGN_PASSWORD",
        meaning: "The password of a cosign private key (`sign --key`, `generate-key-pair`), \
                  as cosign reads it; else it is asked on a terminal.",
    },
    EnvVar {
        name: "JBUILD_INSECURE_REGISTRIES",
        meaning: "Registries (`host` or `host:port`, separated by commas or spaces) reached over \
                  plain HTTP or without checking their certificate, added to `[registries] \
                  insecure`: for CI jobs with no configuration file.",
    },
    EnvVar {
        name: "JBUILD_REGISTRY_MIN_RATE",
        meaning: "Bytes per second every blob and manifest must average over the rate window \
                  (`0`: no floor); wins over `[registries] min_rate`: for CI jobs with no \
                  configuration file.",
    },
    EnvVar {
        name: "JBUILD_REGISTRY_RATE_WINDOW_SECS",
        meaning: "The window the rate floor is measured over, in seconds; wins over \
                  `[registries] rate_window_secs`.",
    },
    EnvVar {
        name: "JBUILD_REGISTRY_BLOB_DEADLINE_SECS",
        meaning: "The longest one blob or manifest may take, in seconds (`0`: none); wins \
                  over `[registries] blob_deadline_secs`.",
    },
    EnvVar {
        name: "REGISTRY_AUTH_FILE",
        meaning: "The containers `auth.json` to read and write credentials in (as podman, \
                  buildah and skopeo), instead of `$XDG_RUNTIME_DIR/containers/auth.json` and \
                  `~/.config/containers/auth.json`.",
    },
    EnvVar {
        name: "DOCKER_CONFIG",
        meaning: "The directory holding docker's `config.json` (credentials and credential \
                  helpers). Default `~/.docker`.",
    },
    EnvVar {
        name: "SOURCE_DATE_EPOCH",
        meaning: "Seconds since 1970: the time recorded in image configs and history, and the \
                  latest file time in layers. Default 0, so the same recipe gives the same \
                  bytes on any day.",
    },
    EnvVar {
        name: "RUST_LOG",
        meaning: "What is logged to standard error, as a `tracing` filter (e.g. `jbuild=debug`); \
                  `--debug` means `jbuild=debug`. Default `warn`.",
    },
    EnvVar {
        name: "HTTP_PROXY, http_proxy",
        meaning: "The proxy for plain-HTTP registries and mirrors.",
    },
    EnvVar {
        name: "HTTPS_PROXY, https_proxy",
        meaning: "The proxy for registries and mirrors reached over TLS.",
    },
    EnvVar {
        name: "ALL_PROXY, all_proxy",
        meaning: "The proxy for both, when the more specific variable is not set.",
    },
    EnvVar {
        name: "NO_PROXY, no_proxy",
        meaning: "Hosts, domains and networks reached without a proxy \
                  (`registry.lan,.corp.example,10.0.0.0/8`).",
    },
    EnvVar {
        name: "XDG_CONFIG_HOME",
        meaning: "Where the per-user configuration file is looked for \
                  (`$XDG_CONFIG_HOME/jbuild/config.toml`), and, for users other \
                  than root, the pull policy (`$XDG_CONFIG_HOME/containers/policy.json`). \
                  Default `~/.config`.",
    },
    EnvVar {
        name: "XDG_DATA_HOME",
        meaning: "The parent of the default state root for users other than root. Default \
                  `~/.local/share`.",
    },
    EnvVar {
        name: "XDG_RUNTIME_DIR",
        meaning: "Where the containers `auth.json` is looked for first \
                  (`$XDG_RUNTIME_DIR/containers/auth.json`).",
    },
    EnvVar {
        name: "HOME",
        meaning: "The base of `~/.config`, `~/.local/share`, `~/.docker`.",
    },
    EnvVar {
        name: "JBUILD_TEST_HOST_ROOT",
        meaning: "For tests only: a directory under which `jbuild create` puts the default \
                  places it writes on the host (`/usr/local/jails/NAME`, \
                  `/etc/jail.conf.d/NAME.conf`, Bastille's prefix), so a test writes nothing \
                  outside its temporary directory. Paths given with `--path`/`--conf` are kept.",
    },
    EnvVar {
        name: "PATH",
        meaning: "Where docker credential helpers (`docker-credential-NAME`), `zfs` and other \
                  host tools are found.",
    },
];

/// Each name a row of [`VARIABLES`] covers (`HTTP_PROXY, http_proxy`
/// counts as two).
pub fn names() -> impl Iterator<Item = &'static str> {
    VARIABLES.iter().flat_map(|v| v.name.split(", "))
}
