//! What a command of a package's shell script reads and writes, and how
//! it fails: the one shape of every command jbuild carries out itself
//! (`pw`, `pwd_mkdb`, `install -d`, `certctl rehash`, …), so that the
//! interpreter and the installer's dispatch need no glue between them.

use std::path::PathBuf;

/// A command's standard streams: its input whole, its outputs gathered
/// (the interpreter bounds them).
pub struct Io<'a> {
    pub stdin: &'a [u8],
    pub stdout: &'a mut Vec<u8>,
    pub stderr: &'a mut Vec<u8>,
}

/// A fault that stops the install, as opposed to a command's non-zero
/// exit status (a user mistake the script may test for, with its
/// message on stderr).
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("cannot write {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} in the image: {why}", path.display())]
    Hostile { path: PathBuf, why: String },
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
    /// The host does not carry this command out (neither jbuild nor the
    /// caller knows it): the script stops, naming it.
    #[error("`{command}` is not a command jbuild carries out")]
    Unknown { command: String },
    /// A bound of [`super::Limits`] was reached inside a command (a
    /// recursive `rm -r`, `chown -R` or `cp` over too many entries).
    #[error("limit reached: {what}")]
    Limit { what: String },
}

impl crate::blame::Blame for CommandError {
    /// The script's or the image's doing (a command jbuild does not know,
    /// a hostile path, a limit, a path in the way), except a fault of the
    /// machine writing the root or a fault of the caller's own.
    fn is_user_error(&self) -> bool {
        match self {
            CommandError::Io { source, .. } => crate::fsutil::path_at_fault(source),
            CommandError::Hostile { .. }
            | CommandError::Unknown { .. }
            | CommandError::Limit { .. } => true,
            CommandError::Other(_) => false,
        }
    }
}
