//! How a script fails as a whole (as opposed to exiting non-zero, which
//! [`super::Ran::status`] carries): it cannot be read, a command faulted,
//! or it ran into one of the [`super::Limits`].

use super::CommandError;

#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The script, or text it gave `eval` or `$(…)`, is not shell.
    #[error("line {line}: {message}")]
    Parse { line: usize, message: String },
    /// A command faulted (could not write the root, met a hostile path)
    /// or is one neither jbuild nor the caller carries out.
    #[error("line {line}: {command}")]
    Command {
        command: String,
        line: usize,
        #[source]
        source: CommandError,
    },
    /// The script went past one of the [`super::Limits`].
    #[error("line {line}: the script went past its limit of {what}; a package script this large or this long is not one jbuild carries out")]
    Limit { what: String, line: usize },
    /// Shell this interpreter does not carry out (`&`, `trap`, `exec`,
    /// bash-only forms, …): refused rather than guessed at.
    #[error("line {line}: {what} is not supported in package scripts by jbuild")]
    Unsupported { what: String, line: usize },
}

impl ScriptError {
    /// The script's line the error is about (1-based).
    pub fn line(&self) -> usize {
        match self {
            ScriptError::Parse { line, .. }
            | ScriptError::Command { line, .. }
            | ScriptError::Limit { line, .. }
            | ScriptError::Unsupported { line, .. } => *line,
        }
    }
}

impl crate::blame::Blame for ScriptError {
    /// The package's script is at fault, except when a command faulted
    /// on the machine's side (a full disk is still the user's, as
    /// [`crate::fsutil::path_at_fault`] decides for paths).
    fn is_user_error(&self) -> bool {
        match self {
            ScriptError::Command { source, .. } => source.is_user_error(),
            ScriptError::Parse { .. }
            | ScriptError::Limit { .. }
            | ScriptError::Unsupported { .. } => true,
        }
    }
}
