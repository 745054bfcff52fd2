//! A Jailfile after parsing, INCLUDE expansion and variable substitution:
//! what the planner consumes. Every string here is final — `$VAR` has been
//! replaced with Dockerfile's ARG/ENV scoping — and every step knows where
//! it came from.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Where an instruction was written: file, 1-based line and column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub file: Arc<PathBuf>,
    pub line: u32,
    pub column: u32,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.file.display(), self.line, self.column)
    }
}

/// The whole build: stages in file order. The last stage is the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    pub stages: Vec<Stage>,
    /// Build arguments given with `--build-arg` that no ARG declared
    /// (reported as a warning, as docker does).
    pub unused_build_args: Vec<String>,
    /// Constructs that work but that the user should hear about (a
    /// deprecated MAINTAINER), each naming its place.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// Position in the file, from 0.
    pub index: usize,
    /// `AS name`, lowercased.
    pub name: Option<String>,
    pub base: Base,
    /// `--platform` on FROM, e.g. `freebsd/amd64`.
    pub platform: Option<String>,
    pub location: Location,
    /// The FROM line as history records it, after substitution.
    pub from_text: String,
    /// Shared, not copied, by the plan made from them (a step's values can
    /// be megabytes: three 1 MB ENV values were held eleven times over).
    pub steps: Vec<Arc<Step>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    /// `FROM scratch`: an empty root.
    Scratch,
    /// `FROM freebsd:<release>`, e.g. `14.2-RELEASE`.
    FreeBsdRelease(String),
    /// An earlier stage of this file, by index.
    Stage(usize),
    /// Any other image reference, as written (after substitution).
    Image(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub location: Location,
    /// The instruction after substitution, as one line (history's
    /// `created_by`), e.g. `RUN pkg install -y nginx`.
    pub text: String,
    /// The ARG values this step depends on: for RUN and PKG every ARG in
    /// scope (they are its environment); for other instructions the ones
    /// its text referenced. Part of the cache key.
    pub args: BTreeMap<String, String>,
    pub op: Op,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Shell form: run with `/bin/sh -c`.
    Shell(String),
    /// JSON exec form: run as given.
    Exec(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopySource {
    /// A path or glob relative to the build context (or to the `--from`
    /// stage's root).
    Path(String),
    /// A heredoc: `COPY <<EOF /dest` — file name and content.
    Inline { name: String, content: String },
}

/// What an ADD source is, told apart as BuildKit does: a URL with a
/// scheme jbuild fetches, a git repository, or a path in the build context
/// (a tar archive there is extracted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddSource {
    /// A path, glob or heredoc of the context, as COPY reads it.
    Context(CopySource),
    /// An `http://` or `https://` URL of one file, downloaded (never
    /// extracted).
    Url(String),
    /// A git repository: `https://host/repo.git#ref`, `git@host:repo`,
    /// `git://...`, `ssh://...`, or `file://...` (a local repository); the
    /// ref after `#` (a branch, tag or commit), `None` for the default
    /// branch.
    Git {
        url: String,
        reference: Option<String>,
    },
}

impl AddSource {
    /// Tells a source written in an ADD apart (see [`AddSource`]).
    pub fn classify(source: &str) -> AddSource {
        let (base, fragment) = match source.split_once('#') {
            Some((b, f)) => (b, Some(f)),
            None => (source, None),
        };
        let git = base.starts_with("git://")
            || base.starts_with("git@")
            || base.starts_with("ssh://")
            || base.starts_with("file://")
            || ((base.starts_with("https://") || base.starts_with("http://"))
                && (base.ends_with(".git") || base.ends_with(".git/")));
        if git {
            return AddSource::Git {
                url: base.to_string(),
                reference: fragment.filter(|f| !f.is_empty()).map(str::to_string),
            };
        }
        if source.starts_with("https://") || source.starts_with("http://") {
            return AddSource::Url(source.to_string());
        }
        AddSource::Context(CopySource::Path(source.to_string()))
    }
}

/// The file name an ADD of the URL `url` writes into a destination
/// directory: the last component of its path (without query or fragment).
pub fn url_file_name(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = rest.split(['?', '#']).next().unwrap_or_default();
    let (_, path) = path.split_once('/')?;
    path.rsplit('/')
        .next()
        .filter(|n| !n.is_empty() && *n != "." && *n != "..")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SysrcOp {
    /// `name=value`
    Set,
    /// `name+=value`: append, space-separated, if not already present.
    Append,
    /// `name-=value`: remove the word.
    Remove,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Run a command through the executor. `env` is the ENV in effect plus
    /// ARGs in scope; `network` from `--network=host`; `mounts` from
    /// `--mount=`, in the order written.
    Run {
        command: Command,
        network: bool,
        mounts: Vec<RunMount>,
    },
    /// `PKG [--no-bootstrap] [--scripts=refuse|defer] <packages>`: the
    /// packages installed into the step's root by jbuild's installer
    /// (`crate::pkg::install`), or by `pkg install -y` in the build jail
    /// when `[pkg] installer = "pkg"`.
    Pkg {
        packages: Vec<String>,
        /// Install `pkg` too when the image has none, as `pkg bootstrap`
        /// would (off with `--no-bootstrap`).
        bootstrap: bool,
        /// `--scripts=`: what a script command jbuild does not carry out
        /// does to the step; `None` when not written (`[pkg] scripts`
        /// decides).
        scripts: Option<crate::config::PkgScripts>,
    },
    /// COPY: files from the context, a stage or an image.
    Copy(CopyOp),
    /// ADD: COPY from the build context, with its tar archives extracted;
    /// files from URLs; git repositories at a commit.
    Add {
        sources: Vec<AddSource>,
        dest: String,
        /// `--chown=user[:group]` as written.
        chown: Option<String>,
        /// `--chmod=0644` (octal).
        chmod: Option<u32>,
        /// `--exclude=PATTERN`, as COPY's.
        exclude: Vec<String>,
        /// `--checksum=sha256:<hex>` of the one URL source.
        checksum: Option<crate::digest::Digest>,
        /// `--keep-git-dir`: keep the repository's `.git`.
        keep_git_dir: bool,
    },
    /// `SYSRC [-f file] name=value` (file defaults to `/etc/rc.conf`).
    Sysrc {
        file: String,
        name: String,
        op: SysrcOp,
        value: String,
    },
    /// `SERVICE name enable|disable`: `name_enable="YES"|"NO"` in rc.conf.
    Service {
        name: String,
        enable: bool,
    },
    /// `LINE_IN_FILE line file`: append the line unless already present.
    LineInFile {
        line: String,
        file: String,
    },
    /// `RENDER path`: substitute `${VAR}` in the file (or every file under
    /// the directory) with these values (the ARGs and ENV in scope).
    Render {
        path: String,
        vars: BTreeMap<String, String>,
    },
    Env(Vec<(String, String)>),
    Label(Vec<(String, String)>),
    User(String),
    Workdir(String),
    Expose(Vec<String>),
    Volume(Vec<String>),
    Cmd(Command),
    Entrypoint(Command),
    /// `JAIL name=value ...`: jail(8) parameters stored with the image.
    Jail(Vec<(String, String)>),
    /// `STOPSIGNAL`: the signal, as written (`SIGINT`, `2`).
    StopSignal(String),
    /// `HEALTHCHECK`, as Docker's image config keeps it.
    Healthcheck(Healthcheck),
    /// `ONBUILD`: a trigger stored in the image for the build that uses
    /// it as FROM.
    Onbuild(String),
    /// `SHELL [...]`: what later shell forms run with.
    Shell(Vec<String>),
}

/// A health check as Docker's image config records it (`Healthcheck`):
/// durations in nanoseconds, absent when not given.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Healthcheck {
    /// `["NONE"]`, `["CMD", argv...]` or `["CMD-SHELL", command]`.
    pub test: Vec<String>,
    pub interval: Option<u64>,
    pub timeout: Option<u64>,
    pub start_period: Option<u64>,
    pub start_interval: Option<u64>,
    pub retries: Option<u64>,
}

/// `RUN --mount=type=...,target=...`: something the step sees while it
/// runs and that never reaches its layer (BuildKit's syntax).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunMount {
    /// Absolute path inside the root.
    pub target: String,
    pub kind: MountKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MountKind {
    /// A file holding the build secret `id` (`--secret id=...`).
    Secret {
        id: String,
        /// Fail before anything runs when the secret was not given;
        /// otherwise a missing secret is no mount at all.
        required: bool,
        mode: u32,
        uid: u32,
        gid: u32,
    },
    /// A directory kept under jbuild's root between builds.
    Cache {
        /// Defaults to the target.
        id: String,
        sharing: Sharing,
        mode: u32,
        uid: u32,
        gid: u32,
    },
    /// An empty tmpfs, gone with the step.
    Tmpfs {
        /// Bytes; `None` is the system's default.
        size: Option<u64>,
    },
    /// A directory or file of the context, of an earlier stage or of an
    /// image, read-only unless `rw` (then writes are thrown away).
    Bind {
        /// `None` is the build context.
        from: Option<CopyFrom>,
        /// Relative to `from`'s root; `.` is all of it.
        source: String,
        rw: bool,
    },
}

/// How concurrent builds share a cache mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Everyone at once.
    Shared,
    /// One step at a time; the others wait.
    Locked,
    /// A step that finds it in use gets a directory of its own.
    Private,
}

impl Sharing {
    pub fn as_str(self) -> &'static str {
        match self {
            Sharing::Shared => "shared",
            Sharing::Locked => "locked",
            Sharing::Private => "private",
        }
    }
}

/// What a COPY does, one struct so that the step runner and the key
/// encoder read its parts by name rather than each listing them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyOp {
    /// `--from=<stage name or index or image>`; `None` is the context.
    pub from: Option<CopyFrom>,
    pub sources: Vec<CopySource>,
    pub dest: String,
    /// `--chown=user[:group]` as written.
    pub chown: Option<String>,
    /// `--chmod=0644` (octal).
    pub chmod: Option<u32>,
    /// `--parents`: each source keeps its path (from the context's
    /// root, or from a `/./` in it) under the destination.
    pub parents: bool,
    /// `--exclude=PATTERN`: sources left out, patterns as in an
    /// ignore file.
    pub exclude: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CopyFrom {
    Stage(usize),
    Image(String),
}

impl Op {
    /// Whether this instruction changes the filesystem (and so makes a layer).
    pub fn changes_filesystem(&self) -> bool {
        matches!(
            self,
            Op::Run { .. }
                | Op::Pkg { .. }
                | Op::Copy(_)
                | Op::Add { .. }
                | Op::Sysrc { .. }
                | Op::Service { .. }
                | Op::LineInFile { .. }
                | Op::Render { .. }
        )
    }
}
