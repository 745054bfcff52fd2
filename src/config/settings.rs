//! The configuration file: what an administrator sets once for a host
//! (which ZFS dataset to use, which registries speak plain HTTP, where
//! FreeBSD releases come from), as opposed to per-command flags.
//!
//! The file is TOML. It is found at `$JBUILD_CONFIG` when that is set (and
//! then it must exist), else at the first of these that exists:
//!
//! ```text
//! $XDG_CONFIG_HOME/jbuild/config.toml   (~/.config/jbuild/config.toml)
//! /usr/local/etc/jbuild/config.toml     (FreeBSD's place for ports' configs)
//! /etc/jbuild/config.toml
//! ```
//!
//! No file means every default. Unknown keys are refused with the file's
//! name, so a typo never silently turns a setting off. Every key, its
//! default and its meaning: `docs/config.md` (a test keeps it complete).
//!
//! ```toml
//! backend = "auto"              # auto | zfs | overlay | dir
//!
//! [zfs]
//! dataset = "zroot/jbuild"      # parent of every dataset jbuild makes
//!
//! [registries]
//! insecure = ["registry.lan:5000"]   # plain HTTP (localhost is always allowed)
//! certs_dir = "/etc/docker/certs.d" # extra CAs: DIR/HOST[:PORT]/*.crt
//! timeout_secs = 60                  # give up on a connection silent this long
//! min_rate = 1024                    # bytes/s a transfer must average over the window (0: off)
//! rate_window_secs = 30              # the window min_rate is measured over
//! blob_deadline_secs = 10800         # the longest one blob or manifest may take (0: off)
//!
//! [freebsd]
//! mirror = "https://download.freebsd.org/releases"
//! manifests_dir = "/usr/local/share/freebsd-release-manifests"
//! allow_jail_params = []
//!
//! [bastille]
//! templates_dir = "/usr/local/bastille/templates"   # INCLUDE category/template, looked in last
//! prefix = "/usr/local/bastille"                    # create --bastille
//!
//! [pkg]
//! repos_dir = "/usr/local/etc/jbuild/pkg-repos"   # pkg repos for PKG steps
//! installer = "jbuild"                            # or "pkg": pkg(8) in the jail
//! scripts = "refuse"            # or "defer": unknown script commands wait for the first start
//! offline = false
//! nameservers = []              # asked for pkg+https:// SRV mirrors (else /etc/resolv.conf)
//! files_ignore_glob = ["/usr/local/share/doc/*"]  # not installed (over the image's pkg.conf)
//! files_ignore_regex = []
//!
//! [layers]                      # layers unpacked by pull, FROM and create
//! allow_setuid = false          # keep setuid/setgid files (FreeBSD's base has su, passwd)
//! allow_devices = false         # create device nodes
//! max_size = 8_589_934_592      # bytes of one layer, uncompressed (8 GiB)
//! max_entries = 1_000_000       # entries of one layer
//! max_header = 1_048_576        # bytes of one PAX / GNU long-name header
//! max_path = 4096               # bytes of one path or link target
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Everything the configuration file can set. Each section is owned by the
/// module that uses it; add fields there, with a default.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// `auto`, `zfs` or `dir`; `None` when the file does not say.
    pub backend: Option<String>,
    pub zfs: ZfsSettings,
    pub registries: RegistrySettings,
    pub freebsd: FreeBsdSettings,
    pub bastille: BastilleSettings,
    pub pkg: PkgSettings,
    pub layers: LayerSettings,
    /// `[trust]`: the pull policy (`trust::policy`); `None` when the file
    /// has no such section (then containers' policy.json is used).
    pub trust: Option<TrustSettings>,
    /// The file these settings were read from, if any.
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ZfsSettings {
    /// The parent dataset of every dataset jbuild creates, e.g. `zroot/jbuild`.
    pub dataset: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RegistrySettings {
    /// Registries (`host` or `host:port`) reached over plain HTTP.
    pub insecure: Vec<String>,
    /// Where extra CA certificates are looked up, docker's `certs.d`
    /// layout (`DIR/HOST[:PORT]/*.crt`). Unset: `/etc/docker/certs.d`
    /// then `/etc/containers/certs.d`.
    pub certs_dir: Option<PathBuf>,
    /// Seconds a registry may stay silent — while connecting, during the
    /// TLS handshake, or between two reads of an answer — before the
    /// request is given up as timed out (and retried, within the retry
    /// bound). Unset: [`DEFAULT_REGISTRY_TIMEOUT_SECS`].
    pub timeout_secs: Option<u64>,
    /// Bytes per second a blob or manifest must average over every
    /// `rate_window_secs` of its transfer, or the transfer fails (a
    /// registry that sends a byte now and then never looks silent to
    /// `timeout_secs`). `0`: no floor. Unset: [`DEFAULT_MIN_RATE`].
    pub min_rate: Option<u64>,
    /// The window `min_rate` is measured over, in seconds (at least 1).
    /// Unset: [`DEFAULT_RATE_WINDOW_SECS`].
    pub rate_window_secs: Option<u64>,
    /// The longest one blob or manifest may take, in seconds, retries and
    /// resumptions included. `0`: no deadline. Unset:
    /// [`DEFAULT_BLOB_DEADLINE_SECS`].
    pub blob_deadline_secs: Option<u64>,
    /// MiB of unfinished downloads (registry blobs of a killed or failed
    /// pull) kept in the store for the next pull to continue with a
    /// `Range` request. `0`: none kept. Unset:
    /// [`DEFAULT_KEEP_PARTIAL_MIB`].
    pub keep_partial_mib: Option<u64>,
    /// Hours an unfinished download is kept. Unset:
    /// [`DEFAULT_KEEP_PARTIAL_HOURS`].
    pub keep_partial_hours: Option<u64>,
}

/// How long a registry may stay silent when `timeout_secs` is not set.
pub const DEFAULT_REGISTRY_TIMEOUT_SECS: u64 = 60;

/// The rate floor when `min_rate` is not set: 1 KiB/s, a hundredth of a
/// slow DSL line, far above a registry that drips a byte at a time.
pub const DEFAULT_MIN_RATE: u64 = 1024;

/// The window of the rate floor when `rate_window_secs` is not set: long
/// enough for a pause of a loaded registry, short enough that a drip is
/// given up within a minute.
pub const DEFAULT_RATE_WINDOW_SECS: u64 = 30;

/// The deadline of one blob when `blob_deadline_secs` is not set: 3 hours,
/// the time the largest layer jbuild accepts (8 GiB) takes at 1 MiB/s with
/// room to spare.
pub const DEFAULT_BLOB_DEADLINE_SECS: u64 = 3 * 3600;

/// MiB of unfinished downloads kept when `keep_partial_mib` is not set:
/// 2 GiB, a few large layers.
pub const DEFAULT_KEEP_PARTIAL_MIB: u64 = 2048;

/// Hours an unfinished download is kept when `keep_partial_hours` is not
/// set: a week.
pub const DEFAULT_KEEP_PARTIAL_HOURS: u64 = 168;

impl RegistrySettings {
    /// The stall timeout: `timeout_secs`, else the default; at least 1 s.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(
            self.timeout_secs
                .unwrap_or(DEFAULT_REGISTRY_TIMEOUT_SECS)
                .max(1),
        )
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FreeBsdSettings {
    /// Base URL of the release mirror (the directory holding `amd64/`, ...).
    pub mirror: Option<String>,
    /// Trusted local release MANIFESTs, `<dir>/<arch>/<release>/MANIFEST`
    /// (default `/usr/local/share/freebsd-release-manifests`).
    pub manifests_dir: Option<PathBuf>,
    /// Jail parameters allowed although they weaken the jail (as
    /// `--allow-jail-param NAME`): a recipe's `JAIL` lines in `build`, an
    /// image's labels in `create`; e.g. `["allow.raw_sockets"]`.
    pub allow_jail_params: Vec<String>,
    /// Distribution sets or the pkgbase repository for `FROM
    /// freebsd:<release>` (`--freebsd-base`); default `auto`.
    pub base: Option<FreeBsdBase>,
    /// The pkgbase repository (`${ABI}`, `${VERSION_MAJOR}`,
    /// `${VERSION_MINOR}` are filled in).
    pub pkgbase_url: Option<String>,
    /// The pkgbase sets a base is made of, without `FreeBSD-set-`
    /// (default `["minimal-jail"]`).
    pub pkgbase_sets: Option<Vec<String>>,
    /// Where pkg's signing keys are (`pkgbase-15/trusted`, ...); default
    /// `/usr/share/keys`.
    pub pkg_keys_dir: Option<PathBuf>,
    /// A program run as pkg(8) on the host to install pkgbase bases
    /// (unset: jbuild's own installer, unless `[pkg] installer = "pkg"`).
    pub pkg: Option<PathBuf>,
}

/// Where a `FROM freebsd:<release>` base comes from.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum FreeBsdBase {
    /// Distribution sets up to FreeBSD 15, pkgbase from 16 on.
    #[default]
    Auto,
    /// The release's distribution sets (`base.txz`, ...).
    Sets,
    /// Packages from the pkgbase repository, installed by jbuild's
    /// installer (or pkg(8) on the host, when configured).
    Pkgbase,
}

impl std::str::FromStr for FreeBsdBase {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(FreeBsdBase::Auto),
            "sets" => Ok(FreeBsdBase::Sets),
            "pkgbase" => Ok(FreeBsdBase::Pkgbase),
            other => Err(format!(
                "`{other}` is not a FreeBSD base; use auto, sets or pkgbase"
            )),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PkgSettings {
    /// A directory of pkg(8) repository configurations (`*.conf`) put at
    /// `/usr/local/etc/pkg/repos` in the jail during PKG steps.
    pub repos_dir: Option<PathBuf>,
    /// Do not ask the repositories whether their catalogue changed: key
    /// PKG steps on the repository configuration only.
    pub offline: bool,
    /// Who installs PKG steps' packages: `jbuild` (the default: jbuild's
    /// own installer, any host, any architecture) or `pkg` (pkg(8) in the
    /// build jail, on a FreeBSD host).
    pub installer: Option<String>,
    /// The nameservers asked for the SRV records of `pkg+https://`
    /// repositories (`IP`, `IP:PORT`); the host's `/etc/resolv.conf` when
    /// empty.
    pub nameservers: Vec<String>,
    /// pkg.conf's `FILES_IGNORE_GLOB` for jbuild's installer: when set,
    /// in place of the image's (as pkg's environment variable is).
    pub files_ignore_glob: Option<Vec<String>>,
    /// pkg.conf's `FILES_IGNORE_REGEX`, likewise.
    pub files_ignore_regex: Option<Vec<String>>,
    /// What jbuild's installer does with a command of a package's shell
    /// script it does not carry out: `refuse` (the step fails, naming the
    /// package, the script and the command) or `defer` (the command waits
    /// for the jail's first start). A PKG line's `--scripts=` wins.
    pub scripts: PkgScripts,
}

/// `[pkg] scripts` and `PKG --scripts=`: what a command of a package's
/// shell script that jbuild does not carry out does to the step. Cache
/// rebuilders are deferred either way.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PkgScripts {
    /// The step fails, naming the package, the script and the command.
    #[default]
    Refuse,
    /// The command is kept for the jail's first start.
    Defer,
}

impl PkgScripts {
    /// The word written in a recipe and the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            PkgScripts::Refuse => "refuse",
            PkgScripts::Defer => "defer",
        }
    }
}

impl std::str::FromStr for PkgScripts {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "refuse" => Ok(PkgScripts::Refuse),
            "defer" => Ok(PkgScripts::Defer),
            other => Err(format!(
                "`{other}` is not a way to treat package scripts; use refuse (the default) or defer"
            )),
        }
    }
}

/// `[trust]`: which images pull, FROM and create accept, as rules of
/// containers-policy.json(5) (`trust::policy` turns them into a policy).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TrustSettings {
    /// The requirement of images no scope names: `insecureAcceptAnything`
    /// (when unset), `reject` or `sigstoreSigned` (with `key`).
    pub default: Option<String>,
    /// The public key of a `sigstoreSigned` default.
    pub key: Option<PathBuf>,
    /// Rules for registries, namespaces, repositories or single images.
    pub scope: Vec<TrustScope>,
}

/// `[[trust.scope]]`: one scope of `[trust]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct TrustScope {
    /// `host[:port]`, `host/namespace`, `host/repo`, `host/repo:tag`,
    /// `host/repo@digest` or `*.domain`, as policy.json's scopes.
    pub name: String,
    /// `insecureAcceptAnything`, `reject` or `sigstoreSigned`.
    pub require: String,
    /// The public key (PEM) of `sigstoreSigned`.
    pub key: Option<PathBuf>,
    /// What the signature must name (`signedIdentity`'s type):
    /// `matchRepository` (when unset: cosign and `jbuild sign` name the
    /// repository alone), `matchRepoDigestOrExact`, `matchExact`.
    pub identity: Option<String>,
}

/// `[bastille]`: Bastille templates and `jbuild create --bastille`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BastilleSettings {
    /// Where `INCLUDE user/repo` finds bootstrapped templates
    /// (default `/usr/local/bastille/templates`).
    pub templates_dir: Option<PathBuf>,
    /// Bastille's prefix: `create --bastille` makes `PREFIX/jails/NAME`
    /// (default `/usr/local/bastille`).
    pub prefix: Option<PathBuf>,
}

/// `[layers]`: what a layer unpacked from an image may hold (see
/// `layer::apply`), and how big it may be (`layer::Limits`, whose defaults
/// apply to what is not set).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LayerSettings {
    /// Keep setuid and setgid bits (and file capabilities); otherwise a
    /// layer with them is refused.
    pub allow_setuid: bool,
    /// Create character and block devices; otherwise a layer with them is
    /// refused.
    pub allow_devices: bool,
    /// Bytes of one layer's uncompressed tar stream.
    pub max_size: Option<u64>,
    /// Entries of one layer.
    pub max_entries: Option<u64>,
    /// Bytes of one extended header (PAX records, GNU long names).
    pub max_header: Option<u64>,
    /// Bytes of one entry's path, or of a link's target.
    pub max_path: Option<usize>,
}

/// A configuration file that could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("cannot read the configuration file {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {message}\n  fix the file, or point $JBUILD_CONFIG at another one", path.display())]
    Parse { path: PathBuf, message: String },
}

impl crate::blame::Blame for SettingsError {
    /// The configuration file is the user's.
    fn is_user_error(&self) -> bool {
        true
    }
}

impl Settings {
    /// The settings of this host: the file named by `$JBUILD_CONFIG`, else
    /// the first file of the search path, else the defaults.
    pub fn load() -> Result<Settings, SettingsError> {
        if let Some(p) = explicit_file() {
            return Settings::from_file(&p);
        }
        for p in search_path() {
            if p.is_file() {
                return Settings::from_file(&p);
            }
        }
        Ok(Settings::default())
    }

    /// The files [`Settings::load`] looks for, in order: `$JBUILD_CONFIG`
    /// alone when it is set, else the search path. The first that exists
    /// is read (for `jbuild info`).
    pub fn search_list() -> Vec<PathBuf> {
        explicit_file().map(|p| vec![p]).unwrap_or_else(search_path)
    }

    pub fn from_file(path: &Path) -> Result<Settings, SettingsError> {
        let text = std::fs::read_to_string(path).map_err(|source| SettingsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut s = Settings::parse(&text).map_err(|message| SettingsError::Parse {
            path: path.to_path_buf(),
            message,
        })?;
        s.source = Some(path.to_path_buf());
        Ok(s)
    }

    /// Parse TOML text; the error says where (line, column) and what.
    pub fn parse(text: &str) -> Result<Settings, String> {
        let s: Settings = toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())?;
        if let Some(b) = &s.backend {
            if !matches!(b.as_str(), "auto" | "zfs" | "overlay" | "dir") {
                return Err(format!(
                    "backend = \"{b}\": expected \"auto\", \"zfs\", \"overlay\" or \"dir\""
                ));
            }
        }
        Ok(s)
    }
}

fn explicit_file() -> Option<PathBuf> {
    std::env::var_os("JBUILD_CONFIG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

fn search_path() -> Vec<PathBuf> {
    let mut v = Vec::new();
    let xdg = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|x| !x.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")));
    if let Some(x) = xdg {
        v.push(x.join("jbuild/config.toml"));
    }
    v.push(PathBuf::from("/usr/local/etc/jbuild/config.toml"));
    v.push(PathBuf::from("/etc/jbuild/config.toml"));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_defaults() {
        assert_eq!(Settings::parse("").unwrap(), Settings::default());
    }

    #[test]
    fn every_section_parses() {
        let s = Settings::parse(
            "backend = \"zfs\"\n[zfs]\ndataset = \"zroot/jbuild\"\n\
             [registries]\ninsecure = [\"reg.lan:5000\"]\n[freebsd]\nmirror = \"http://m/\"\n",
        )
        .unwrap();
        assert_eq!(s.backend.as_deref(), Some("zfs"));
        assert_eq!(s.zfs.dataset.as_deref(), Some("zroot/jbuild"));
        assert_eq!(s.registries.insecure, vec!["reg.lan:5000".to_string()]);
        assert_eq!(s.freebsd.mirror.as_deref(), Some("http://m/"));
    }

    #[test]
    fn freebsd_and_pkg_sections() {
        let d = Settings::default();
        assert_eq!(d.freebsd.manifests_dir, None);
        assert_eq!(d.pkg, PkgSettings::default());
        assert!(!d.pkg.offline && d.pkg.repos_dir.is_none());
        let s = Settings::parse(
            "[freebsd]\nmanifests_dir = \"/m\"\n[pkg]\nrepos_dir = \"/r\"\noffline = true\n",
        )
        .unwrap();
        assert_eq!(s.freebsd.manifests_dir.as_deref(), Some(Path::new("/m")));
        assert!(s.freebsd.allow_jail_params.is_empty());
        assert_eq!(s.pkg.repos_dir.as_deref(), Some(Path::new("/r")));
        assert!(s.pkg.offline);
        let e = Settings::parse("[pkg]\nrepo_dir = \"/r\"\n").unwrap_err();
        assert!(e.contains("repo_dir"), "{e}");
    }

    #[test]
    fn freebsd_base_and_pkgbase_keys() {
        assert_eq!(Settings::default().freebsd.base, None);
        let s = Settings::parse(
            "[freebsd]\nbase = \"pkgbase\"\npkgbase_sets = [\"base-jail\", \"lib32\"]\npkg = \"/usr/local/sbin/pkg\"\npkg_keys_dir = \"/k\"\npkgbase_url = \"file:///r\"\n",
        )
        .unwrap();
        assert_eq!(s.freebsd.base, Some(FreeBsdBase::Pkgbase));
        assert_eq!(
            s.freebsd.pkgbase_sets.as_deref(),
            Some(&["base-jail".to_string(), "lib32".to_string()][..])
        );
        assert_eq!(
            s.freebsd.pkg.as_deref(),
            Some(Path::new("/usr/local/sbin/pkg"))
        );
        assert_eq!(s.freebsd.pkg_keys_dir.as_deref(), Some(Path::new("/k")));
        assert_eq!(s.freebsd.pkgbase_url.as_deref(), Some("file:///r"));
        let e = Settings::parse("[freebsd]\nbase = \"ports\"\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("pkgbase"), "{e}");
        assert_eq!("sets".parse(), Ok(FreeBsdBase::Sets));
        assert!("ports"
            .parse::<FreeBsdBase>()
            .unwrap_err()
            .contains("auto, sets or pkgbase"));
    }

    #[test]
    fn pkg_scripts_is_refuse_or_defer_and_a_bad_value_says_where_and_which() {
        assert_eq!(Settings::default().pkg.scripts, PkgScripts::Refuse);
        let s = Settings::parse("[pkg]\nscripts = \"defer\"\n").unwrap();
        assert_eq!(s.pkg.scripts, PkgScripts::Defer);
        let e = Settings::parse("[pkg]\noffline = false\nscripts = \"run\"\n").unwrap_err();
        assert!(
            e.contains("line 3") && e.contains("`refuse`") && e.contains("`defer`"),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.toml");
        std::fs::write(&p, "[pkg]\nscripts = \"skip\"\n").unwrap();
        let e = Settings::from_file(&p).unwrap_err().to_string();
        assert!(e.contains("config.toml") && e.contains("line 2"), "{e}");
        assert_eq!("defer".parse(), Ok(PkgScripts::Defer));
        assert!("skip"
            .parse::<PkgScripts>()
            .unwrap_err()
            .contains("refuse (the default) or defer"));
    }

    #[test]
    fn registry_certs_dir_defaults_to_unset() {
        assert_eq!(Settings::default().registries.certs_dir, None);
        let s = Settings::parse("[registries]\ncerts_dir = \"/tmp/certs.d\"\n").unwrap();
        assert_eq!(
            s.registries.certs_dir.as_deref(),
            Some(Path::new("/tmp/certs.d"))
        );
    }

    #[test]
    fn registry_timeout_has_a_default_and_a_floor() {
        use std::time::Duration;
        let d = Settings::default().registries.timeout();
        assert_eq!(d, Duration::from_secs(DEFAULT_REGISTRY_TIMEOUT_SECS));
        let s = Settings::parse("[registries]\ntimeout_secs = 3\n").unwrap();
        assert_eq!(s.registries.timeout(), Duration::from_secs(3));
        let s = Settings::parse("[registries]\ntimeout_secs = 0\n").unwrap();
        assert_eq!(s.registries.timeout(), Duration::from_secs(1));
        assert!(Settings::parse("[registries]\ntimeout_secs = \"3\"\n").is_err());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused_with_where() {
        let e = Settings::parse("[zfs]\ndatset = \"x\"\n").unwrap_err();
        assert!(e.contains("datset") && e.contains("line 2"), "{e}");
        let e = Settings::parse("backend = \"btrfs\"\n").unwrap_err();
        assert!(e.contains("btrfs"), "{e}");
    }

    #[test]
    fn bastille_section_has_defaults_and_parses() {
        let s = Settings::parse("").unwrap();
        assert_eq!(s.bastille, BastilleSettings::default());
        let s = Settings::parse(
            "[bastille]\ntemplates_dir = \"/srv/templates\"\nprefix = \"/jails\"\n",
        )
        .unwrap();
        assert_eq!(
            s.bastille.templates_dir.as_deref(),
            Some(Path::new("/srv/templates"))
        );
        assert_eq!(s.bastille.prefix.as_deref(), Some(Path::new("/jails")));
        let e = Settings::parse("[bastille]\ntemplate_dir = \"x\"\n").unwrap_err();
        assert!(e.contains("template_dir"), "{e}");
    }

    #[test]
    fn layers_section_defaults_to_nothing_allowed() {
        let d = Settings::default().layers;
        assert!(!d.allow_setuid && !d.allow_devices && d.max_size.is_none());
        let s = Settings::parse(
            "[layers]
allow_setuid = true
max_size = 1_048_576
",
        )
        .unwrap();
        assert!(s.layers.allow_setuid && !s.layers.allow_devices);
        assert_eq!(s.layers.max_size, Some(1 << 20));
        let e = Settings::parse(
            "[layers]
allow_suid = true
",
        )
        .unwrap_err();
        assert!(e.contains("allow_suid"), "{e}");
    }

    #[test]
    fn file_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.toml");
        std::fs::write(&p, "[zfs\n").unwrap();
        let e = Settings::from_file(&p).unwrap_err().to_string();
        assert!(e.contains("config.toml"), "{e}");
        let s = {
            std::fs::write(&p, "[zfs]\ndataset = \"tank/j\"\n").unwrap();
            Settings::from_file(&p).unwrap()
        };
        assert_eq!(s.source.as_deref(), Some(p.as_path()));
    }
}
