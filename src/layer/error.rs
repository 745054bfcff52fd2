//! What can go wrong writing, compressing or applying a layer.

use std::io;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// A file of a root could not be read, written or changed.
    #[error("cannot {action} `{}`", path.display())]
    Fs {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The layer's bytes could not be read (or decompressed).
    #[error("cannot read the layer stream")]
    Read(#[source] io::Error),
    /// The layer's bytes could not be written (or compressed).
    #[error("cannot write the layer")]
    Write(#[source] io::Error),
    /// The stream is not a tar archive jbuild can read.
    #[error("the layer is not a valid tar archive (at byte {offset}): {reason}")]
    Malformed { offset: u64, reason: String },
    /// The stream ended before the end-of-archive marker.
    #[error("the layer ends early: {0}")]
    Truncated(String),
    /// One entry of a layer is refused; `entry` is its path as written in
    /// the archive.
    #[error("layer entry `{entry}` {problem}")]
    Entry {
        entry: String,
        problem: EntryProblem,
    },
    /// A file of the child cannot be expressed in a layer.
    #[error("`{}` cannot be written into a layer: {reason}", path.display())]
    Unrepresentable { path: PathBuf, reason: &'static str },
    /// A file changed between the diff and the export.
    #[error("`{}` changed while the layer was being written; is the snapshot still in use?", path.display())]
    Changed { path: PathBuf },
    /// The change list given to the tar writer is not canonical.
    #[error("the change list is not in canonical order: `{}` comes after `{}` (use diff::canonicalize)", next.display(), prev.display())]
    Order { prev: PathBuf, next: PathBuf },
    #[error("layer media type `{0}` is not supported")]
    MediaType(String),
    /// The layer passed one of the [`Limits`](super::Limits).
    #[error("the layer is larger than jbuild allows: {what} {limit} (if the layer is genuine, raise `{key}` under [layers] in the configuration file)")]
    Limit {
        what: String,
        limit: String,
        key: &'static str,
    },
    /// The layer unpacked fine, but to other bytes than the image's
    /// configuration promises (its diff ID).
    #[error("its content does not match the image's configuration: it unpacks to {actual}, the configuration says {expected}")]
    DiffId { expected: String, actual: String },
    #[error("`{0}` is not a layer compression: use gzip, zstd or none")]
    Compression(String),
    /// A worker thread of the export pipeline panicked: a bug.
    #[error("internal error: the layer {0} thread stopped unexpectedly")]
    Internal(&'static str),
}

impl crate::blame::Blame for LayerError {
    /// The layer's bytes at fault ([`LayerError::is_bad_input`]): the
    /// user's input.
    fn is_user_error(&self) -> bool {
        self.is_bad_input()
    }
}

/// Why an entry of a layer is refused.
#[derive(Debug, thiserror::Error)]
pub enum EntryProblem {
    #[error("is an absolute path")]
    Absolute,
    #[error("would land outside the root")]
    Escapes,
    #[error("is a hard link to `{0}`, which is outside the root")]
    LinkEscapes(String),
    #[error("is a hard link to `{0}`, which is not in the root")]
    LinkMissing(String),
    #[error("is a hard link to the directory `{0}`")]
    LinkToDir(String),
    #[error("is a whiteout that names no file")]
    BadWhiteout,
    #[error("is a device node, and devices are not allowed in this layer")]
    Device,
    #[error("has setuid or setgid bits (mode {0:04o}), which are not allowed in this layer")]
    Setuid(u32),
    #[error("is of a type jbuild does not apply ({0})")]
    Unsupported(String),
    #[error("has an owner id ({0}) that is too large")]
    Owner(u64),
    #[error("has a device number that is too large")]
    DeviceNumber,
    #[error("cannot be applied")]
    Fs(#[source] io::Error),
    #[error("is {size} bytes, more than the {} a layer may hold (`max_size` under [layers])", super::limits::human(*max))]
    TooLarge { size: u64, max: u64 },
    #[error("has a path or link target of {len} bytes, more than the {max} allowed (`max_path` under [layers])")]
    PathTooLong { len: usize, max: usize },
    #[error("has a path component longer than {} bytes", super::limits::MAX_NAME)]
    NameTooLong,
    /// The entry's path (or a hard link's target) leads through a symlink
    /// that an earlier entry of the same layer created.
    #[error("goes through `{0}`, a symlink this same layer created: no tar writer makes such a layer, and it is how a layer writes outside its root")]
    ThroughSymlink(String),
    #[error("appears twice in the layer")]
    Duplicate,
    #[error("replaces a directory that holds earlier entries of this same layer")]
    ReplacesOwn,
    #[error("has a whiteout name (`.wh.…`) as one of its directories")]
    WhiteoutDir,
    #[error("carries file capabilities (the `security.capability` attribute), which are not allowed in this layer")]
    Capability,
}

impl crate::blame::Blame for EntryProblem {
    /// A hostile or odd entry is the layer's; a filesystem call that
    /// failed is the layer's only where its path did it (a symlink loop,
    /// a name too long); other filesystem errors are the system's.
    fn is_user_error(&self) -> bool {
        match self {
            EntryProblem::Fs(e) => {
                e.kind() == io::ErrorKind::InvalidInput
                    || matches!(e.raw_os_error(), Some(libc::ENAMETOOLONG | libc::ELOOP))
            }
            _ => true,
        }
    }
}

impl LayerError {
    /// Whether the layer's bytes are at fault (a malformed, hostile or
    /// oversized layer: the user's input) rather than the system (a disk
    /// that is full, a file that cannot be written) or jbuild.
    pub fn is_bad_input(&self) -> bool {
        match self {
            LayerError::Entry { problem, .. } => crate::blame::Blame::is_user_error(problem),
            LayerError::Read(_)
            | LayerError::Malformed { .. }
            | LayerError::Truncated(_)
            | LayerError::MediaType(_)
            | LayerError::DiffId { .. }
            | LayerError::Limit { .. } => true,
            _ => false,
        }
    }

    /// What the user can do about a refused layer, in a sentence, when
    /// there is something.
    pub fn hint(&self) -> Option<&'static str> {
        let problem = match self {
            LayerError::Entry { problem, .. } => Some(problem),
            _ => None,
        };
        match problem {
            Some(EntryProblem::Setuid(_) | EntryProblem::Capability) => Some(
                "if you trust this image, allow setuid files with `jbuild pull --allow-setuid`, \
                 or `allow_setuid = true` under [layers] in the configuration file",
            ),
            Some(EntryProblem::Device) => Some(
                "if you trust this image, allow device nodes with `jbuild pull --allow-devices`, \
                 or `allow_devices = true` under [layers] in the configuration file",
            ),
            Some(EntryProblem::TooLarge { .. } | EntryProblem::PathTooLong { .. }) => None,
            _ if matches!(self, LayerError::Limit { .. }) => None,
            _ if self.is_bad_input() => Some(
                "the image is malformed, or was made to attack whoever unpacks it: \
                 ask its publisher for a sound one",
            ),
            _ => None,
        }
    }

    pub(crate) fn fs(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(io::Error) -> LayerError {
        let path = path.into();
        move |source| LayerError::Fs {
            action,
            path,
            source,
        }
    }

    pub(crate) fn entry(entry: &[u8], problem: EntryProblem) -> LayerError {
        LayerError::Entry {
            entry: String::from_utf8_lossy(entry).into_owned(),
            problem,
        }
    }
}
