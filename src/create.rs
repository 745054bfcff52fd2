//! `jbuild create`: a jail from an image. The image's top snapshot becomes
//! the jail's root (a ZFS clone where the snapshotter can and a dataset is
//! known: `clone`; else a copy: [`Snapshotter::materialize`]), and a
//! jail.conf(5) entry is written from what the image carries:
//! `org.freebsd.jail.*` parameters (and jbuild's older `org.jbuild.jail.*`;
//! the risky ones only with the user's consent: [`params`]),
//! Entrypoint/Cmd/Env/WorkingDir/User as `exec.start` ([`start`]), VOLUMEs
//! with their fstab lines (MOUNT in a Bastille template), EXPOSE and RDR as
//! pf hints, LIMITS as rctl rules.
//!
//! Two layouts:
//!
//! ```text
//! plain     /usr/local/jails/NAME/            the root
//!           /etc/jail.conf.d/NAME.conf        the entry (replaced if there)
//!           /etc/jail.conf.d/NAME.fstab       when the image has mounts
//! bastille  PREFIX/jails/NAME/root/           Bastille's own layout
//!           PREFIX/jails/NAME/jail.conf, fstab, rctl.conf
//! ```
//!
//! With `--conf`, the fstab (and rctl.conf) go beside the given file. The
//! default places are [`places`]'s (`$JBUILD_TEST_HOST_ROOT` moves them for
//! tests).
//!
//! [`Snapshotter::materialize`]: crate::snapshot::Snapshotter::materialize

mod clone;

pub use clone::RootFrom;

use crate::blame::Blame;
use std::path::{Path, PathBuf};

pub mod bundle;
pub mod mounts;
pub mod params;

use crate::fsutil::output::{Output, OutputError, Target};
use crate::image::unpack::{UnpackError, Unpacker};
use crate::image::{ImageSource, ImageState, Platform, PullError};
use crate::jailconf::{self, Param};
use crate::snapshot::{SnapshotError, Snapshotter};
use crate::transport::Location;

pub mod places;
pub mod run;
pub mod start;

pub use places::BASTILLE_PREFIX;

/// Where the jail goes.
#[derive(Debug, Clone)]
pub struct CreateOptions {
    pub image: String,
    pub name: String,
    pub root: PathBuf,
    pub conf: PathBuf,
    pub fstab: PathBuf,
    /// Bastille's layout and jail.conf shape; also writes `rctl.conf`.
    pub bastille: bool,
    /// Jail parameters the user agreed to (`--allow-jail-param`, the
    /// configuration's `allow_jail_params`): [`params`].
    pub allowed_jail_params: Vec<String>,
    /// The ZFS dataset to clone the image into (`--dataset`); by default
    /// the one under the dataset mounted at the root's parent directory.
    pub dataset: Option<String>,
    /// A jail for `jbuild run`: nothing starts with it (`persist`; the
    /// command is attached with jexec(8)), with the user's mounts and
    /// network ([`run::ForRun`]).
    pub for_run: Option<run::ForRun>,
}

impl CreateOptions {
    /// The default places for `name` ([`places`]), with `--path`/`--conf`
    /// overrides; `bastille_prefix` selects Bastille's layout.
    pub fn new(
        image: &str,
        name: &str,
        path: Option<PathBuf>,
        conf: Option<PathBuf>,
        bastille_prefix: Option<PathBuf>,
    ) -> CreateOptions {
        let bastille = bastille_prefix.is_some();
        let p = match bastille_prefix {
            Some(prefix) => places::bastille(&prefix, name, path, conf),
            None => places::plain(name, path, conf),
        };
        CreateOptions {
            image: image.into(),
            name: name.into(),
            root: p.root,
            conf: p.conf,
            fstab: p.fstab,
            bastille,
            allowed_jail_params: Vec::new(),
            dataset: None,
            for_run: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("{0}")]
    User(String),
    /// The image cannot be read or unpacked.
    #[error(transparent)]
    Unpack(#[from] UnpackError),
    /// A `docker://` image could not be pulled (or its pull policy refused it).
    #[error(transparent)]
    Pull(#[from] PullError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotError),
    /// The image's jail parameters: invalid, or not agreed to.
    #[error(transparent)]
    Params(#[from] params::ParamsError),
    /// The jail's dataset could not be cloned.
    #[error("cannot clone the image into the jail's dataset (choose another with --dataset, or move what is in the way)")]
    Clone(#[from] crate::snapshot::clones::CloneError),
    /// A file it writes at a path the user named is something it will
    /// not write to, or cannot be written.
    #[error(transparent)]
    Output(#[from] OutputError),
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Blame for CreateError {
    fn is_user_error(&self) -> bool {
        match self {
            CreateError::User(_) => true,
            CreateError::Params(e) => e.is_user_error(),
            CreateError::Unpack(e) => e.is_user_error(),
            CreateError::Pull(e) => e.is_user_error(),
            CreateError::Clone(e) => e.is_user_error(),
            CreateError::Output(e) => e.is_user_error(),
            _ => false,
        }
    }
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> CreateError {
    move |source| CreateError::Io { context, source }
}

/// What was made.
#[derive(Debug, Clone)]
pub struct Created {
    pub root: PathBuf,
    pub conf: PathBuf,
    pub fstab: Option<PathBuf>,
    pub rctl: Option<PathBuf>,
    /// Whether the root is a clone or a copy.
    pub root_from: RootFrom,
    /// The entry as written.
    pub entry: String,
}

/// Jail names jail(8) and Bastille both accept.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !name.starts_with('-')
}

/// The store's name for `image`: a reference written `docker://…` that
/// the store does not hold is pulled from `source` first, as `jbuild pull`
/// would (through its pull policy: `trust::policy::Guarded`); any other
/// is the store's, as it is.
pub fn pull_missing(
    unpacker: &Unpacker<'_>,
    source: &dyn ImageSource,
    image: &str,
) -> Result<String, CreateError> {
    let Ok(Location::Registry(reference)) = image.parse::<Location>() else {
        return Ok(image.to_string());
    };
    let reference = reference.to_string();
    let Some(name) = source.name(&reference) else {
        return Ok(image.to_string());
    };
    let stored = unpacker.store.resolve(&name).map_err(UnpackError::from)?;
    if stored.is_none() {
        crate::image::pull(unpacker, source, &reference, &Platform::default_for_host())?;
    }
    Ok(name)
}

pub fn create(unpacker: &Unpacker<'_>, opts: &CreateOptions) -> Result<Created, CreateError> {
    if !valid_name(&opts.name) {
        return Err(CreateError::User(format!(
            "jail name `{}`: use letters, digits, `_` and `-` (at most 64)",
            opts.name
        )));
    }
    let (top, img) = unpacker.top(&opts.image, &Platform::default_for_host())?;
    let state = ImageState::from_config(&img.config);

    let view = match top.as_deref() {
        Some(t) => Some(unpacker.snapshotter.view(t)?),
        None => None,
    };
    // Every mount point checked against the image before anything is
    // written; made once the root is.
    let points = mounts::check(&opts.image, view.as_deref(), &state.volumes)?;
    let run_points = match &opts.for_run {
        Some(r) => mounts::check(&opts.image, view.as_deref(), r.targets())?,
        None => Vec::new(),
    };

    let mut comments = vec![format!(
        "made by jbuild create from {} ({})",
        opts.image, img.manifest_digest
    )];
    let volumes = volume_mounts(opts, &state, &points, &mut comments)?;
    comments.extend(pf_hints(opts, &state));
    let rctl = rctl_rules(opts, &state)?;
    if !opts.bastille {
        for r in &rctl {
            comments.push(format!("rctl(8): add `{r}` to /etc/rctl.conf"));
        }
    }
    if let Some(note) = stop_signal_note(state.stop_signal.as_deref()) {
        comments.push(note);
    }
    let write_fstab = opts.bastille || !volumes.fstab_lines.is_empty();
    let labels = img
        .config
        .config()
        .as_ref()
        .and_then(|c| c.labels().clone());
    // The jail parameters the image asks for: its labels, then its volumes'.
    let mut wanted = params::read(labels.iter().flatten());
    wanted.extend(volumes.wanted);
    let params = entry_params(
        opts,
        &state,
        view.as_deref(),
        write_fstab,
        wanted,
        &run_points,
        &mut comments,
    )?;
    let entry = jailconf::entry(&opts.name, &params, &comments);
    // The conf file must be one we can edit before anything is written.
    let old = match std::fs::read_to_string(&opts.conf) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io(format!("cannot read {}", opts.conf.display()))(e)),
    };
    let text = jailconf::replace(&old, &opts.name, &entry).map_err(|e| {
        CreateError::User(format!(
            "{}: {e}; fix the file or give another with --conf",
            opts.conf.display()
        ))
    })?;
    let root_from = clone::make_root(
        unpacker.snapshotter,
        top.as_deref(),
        opts,
        &img.manifest_digest.to_string(),
    )?;
    mounts::make(&opts.root, &points)?;
    mounts::make(&opts.root, &run_points)?;

    let fstab = if write_fstab {
        let mut text = volumes.fstab_lines.join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        write_file(&opts.fstab, &text)?;
        Some(opts.fstab.clone())
    } else {
        None
    };
    let rctl_path = if opts.bastille && !rctl.is_empty() {
        let p = opts.conf.with_file_name("rctl.conf");
        write_file(&p, &(rctl.join("\n") + "\n"))?;
        Some(p)
    } else {
        None
    };
    write_file(&opts.conf, &text)?;
    Ok(Created {
        root: opts.root.clone(),
        conf: opts.conf.clone(),
        fstab,
        rctl: rctl_path,
        root_from,
        entry,
    })
}

/// An image `create` will not make a jail from: `what` is wrong with it.
fn refuse(opts: &CreateOptions, what: String) -> CreateError {
    CreateError::User(format!(
        "image {}: {what}; the image was not made by jbuild or was altered, so no jail was written",
        opts.image
    ))
}

/// The VOLUMEs' storage: each fstab line the image carries (a host
/// mount, which needs consent) and a comment for each without one.
struct Volumes {
    fstab_lines: Vec<String>,
    wanted: Vec<params::ImageParam>,
}

fn volume_mounts(
    opts: &CreateOptions,
    state: &ImageState,
    points: &[mounts::MountPoint],
    comments: &mut Vec<String>,
) -> Result<Volumes, CreateError> {
    let mut fstab_lines = Vec::new();
    let mut wanted = Vec::new();
    for (v, point) in state.volumes.iter().zip(points) {
        let label = format!("{}{v}", params::FSTAB_LABEL);
        match state.labels.get(&label) {
            Some(line) => {
                wanted.push(params::host_mount(&label, line));
                let f: Vec<&str> = line.split_whitespace().collect();
                let ok = f.len() == 6
                    && f[1] == v
                    && f[2].chars().all(|c| c.is_ascii_alphanumeric())
                    && f[4..].iter().all(|n| n.chars().all(|c| c.is_ascii_digit()));
                if !ok {
                    return Err(refuse(opts, format!(
                        "mount for {v} `{line}` is not `host {v} type options dump pass` inside the jail"
                    )));
                }
                // Where the jail sees it (symlinks followed), so the
                // host's mount lands there.
                let at = opts.root.join(&point.inside);
                fstab_lines.push(format!(
                    "{} {} {} {} {} {}",
                    f[0],
                    fstab_path(&at.display().to_string()),
                    f[2],
                    f[3],
                    f[4],
                    f[5]
                ));
            }
            None => comments.push(format!(
                "VOLUME {v}: give it storage, e.g. a nullfs line in {}",
                opts.fstab.display()
            )),
        }
    }
    Ok(Volumes {
        fstab_lines,
        wanted,
    })
}

/// EXPOSE and RDR as pf(4) hints.
fn pf_hints(opts: &CreateOptions, state: &ImageState) -> Vec<String> {
    let mut comments = Vec::new();
    for p in &state.exposed_ports {
        let (port, proto) = p.split_once('/').unwrap_or((p, "tcp"));
        comments.push(format!(
            "EXPOSE {p}; pf.conf: rdr pass on $ext_if inet proto {proto} to port {port} -> <jail address> port {port}"
        ));
    }
    for (k, v) in &state.labels {
        if k.starts_with("org.jbuild.rdr.") {
            comments.push(format!("RDR {v} (bastille rdr {} {v})", opts.name));
        }
    }
    comments
}

/// LIMITS as rctl(8) rules, each checked to be a resource and an amount.
fn rctl_rules(opts: &CreateOptions, state: &ImageState) -> Result<Vec<String>, CreateError> {
    let mut rctl = Vec::new();
    for (k, v) in &state.labels {
        let Some(res) = k.strip_prefix("org.jbuild.rctl.") else {
            continue;
        };
        let word = |s: &str, extra: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
        };
        if !word(res, "") || !word(v, ".%") {
            return Err(refuse(
                opts,
                format!("rctl limit `{k}={v}` is not a resource and an amount"),
            ));
        }
        rctl.push(format!("jail:{}:{res}:deny={v}/jail", opts.name));
    }
    Ok(rctl)
}

/// The entry's parameters: jbuild's (root, hostname, start, devfs,
/// Bastille's), then the image's as agreed ([`params::agreed`]), which
/// replace jbuild's of the same name.
fn entry_params(
    opts: &CreateOptions,
    state: &ImageState,
    view: Option<&Path>,
    write_fstab: bool,
    wanted: Vec<params::ImageParam>,
    run_points: &[mounts::MountPoint],
    comments: &mut Vec<String>,
) -> Result<Vec<Param>, CreateError> {
    let root = opts.root.display().to_string();
    let mut params = vec![param("path", &root), param("host.hostname", &opts.name)];
    let (start, notes) = match &opts.for_run {
        Some(r) => (r.params(&opts.root, run_points), Vec::new()),
        None => start::start(state, view, &opts.name, opts.bastille)?,
    };
    params.extend(start);
    comments.extend(notes);
    params.push(flag("exec.clean"));
    params.push(flag("mount.devfs"));
    if opts.bastille {
        params.push(param("devfs_ruleset", "4"));
        params.push(param("enforce_statfs", "2"));
        params.push(param("securelevel", "2"));
        params.push(param(
            "exec.consolelog",
            &format!("/var/log/bastille/{}_console.log", opts.name),
        ));
    }
    if write_fstab {
        params.push(param("mount.fstab", &opts.fstab.display().to_string()));
    }
    let agreed = params::agreed(&opts.image, &wanted, &opts.allowed_jail_params)?;
    comments.extend(agreed.comments);
    for (k, v) in &agreed.params {
        let p = if v.is_empty() { flag(k) } else { param(k, v) };
        match params.iter_mut().find(|x| x.name == *k) {
            Some(slot) => *slot = p,
            None => params.push(p),
        }
    }
    Ok(params)
}

/// A path as an fstab(5) field: blanks written as octal escapes.
pub(crate) fn fstab_path(p: &str) -> String {
    p.replace(' ', "\\040").replace('\t', "\\011")
}

pub(crate) fn param(name: &str, value: &str) -> Param {
    Param {
        name: name.into(),
        values: Some(vec![value.into()]),
        append: false,
    }
}

pub(crate) fn flag(name: &str) -> Param {
    Param {
        name: name.into(),
        values: None,
        append: false,
    }
}

fn write_file(path: &Path, text: &str) -> Result<(), CreateError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io(format!("cannot create {}", dir.display())))?;
    }
    // A path the user named (`--conf`, and the fstab and rctl.conf beside
    // it): a symlinked /etc/jail.conf stays a link, a FIFO is written in
    // place, a directory is refused (fsutil::output).
    let out = Output::at(path)?;
    out.write(text.as_bytes())?;
    // jail(8) and Bastille read these as root, but people read them too.
    if let Target::Replace(file) = out.target() {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644))
            .map_err(io(format!("cannot chmod {}", file.display())))?;
    }
    Ok(())
}

/// Makes way for the root: an empty directory there is removed, anything
/// else in the way is refused.
fn clear_root(root: &Path) -> Result<(), CreateError> {
    match std::fs::read_dir(root) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(CreateError::User(format!(
                    "{} already exists and is not empty; remove it or choose another --path",
                    root.display()
                )));
            }
            std::fs::remove_dir(root).map_err(io(format!("cannot replace {}", root.display())))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(format!("cannot read {}", root.display()))(e)),
    }
    Ok(())
}

/// Fills `root` with the snapshot's tree: into a temporary sibling first,
/// renamed into place once complete, so a half-copied root is never seen.
fn copy_root(
    snapshotter: &dyn Snapshotter,
    top: Option<&str>,
    root: &Path,
) -> Result<(), CreateError> {
    clear_root(root)?;
    let parent = root
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io(format!("cannot create {}", parent.display())))?;
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into());
    let tmp = parent.join(format!(".{name}.jbuild-create-{}", std::process::id()));
    let made = match top {
        Some(snap) => snapshotter
            .materialize(snap, &tmp)
            .map_err(CreateError::from),
        None => std::fs::create_dir(&tmp).map_err(io(format!("cannot create {}", tmp.display()))),
    };
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, root).map_err(io(format!(
        "cannot move the new root to {}",
        root.display()
    )))
}

/// What the entry says of an image's STOPSIGNAL other than SIGTERM.
/// jail(8) has no parameter for the signal: `jail -r` runs `exec.stop`,
/// then sends SIGTERM to what is left, waits `stop.timeout`, and kills the
/// rest. No parameter says "send this signal to the image's process
/// instead", so nothing is written in its place (an `exec.stop` that
/// signals every process of the jail, followed by SIGTERM anyway, is not
/// what a container runtime does); the comment says so, and how.
fn stop_signal_note(signal: Option<&str>) -> Option<String> {
    let signal = signal?;
    let upper = signal.to_ascii_uppercase();
    if matches!(upper.as_str(), "SIGTERM" | "TERM" | "15") {
        return None;
    }
    Some(format!(
        "the image asks to be stopped with {signal} (STOPSIGNAL); jail(8) stops a jail's processes with SIGTERM: to send {signal} first, set exec.stop (docs/create.md)"
    ))
}
