//! How a package's shell script stops its install ([`ShellError`]), and
//! the check that each script pkg would run parses ([`check_parse`]),
//! which refuses a package before anything is written: apart from the
//! runner ([`super::shell`]) so that the upgrade's weighing
//! ([`crate::pkg::upgrade`]) checks the old version's scripts without
//! reaching the installer.

use crate::pkg::manifest::ScriptType;
use crate::pkg::script::{self, ScriptError};

/// The script types pkg runs when it installs or upgrades (and thus what
/// is checked to parse before anything is written).
pub const AT_INSTALL: [ScriptType; 3] = [
    ScriptType::PreInstall,
    ScriptType::Install,
    ScriptType::PostInstall,
];

/// Why a package's script stopped the install.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    #[error(
        "its `{script}` shell script exited with status {status}, which stops the package as it \
         stops pkg{said}"
    )]
    Failed {
        script: String,
        status: i32,
        /// The script's last lines of error output, `: …`, or empty.
        said: String,
    },
    #[error(
        "its `{script}` shell script runs `{command}` (line {line}), which jbuild does not carry \
         out off FreeBSD: `PKG --scripts=defer` (or `[pkg] scripts = \"defer\"`) keeps it for \
         the jail's first start, or on a FreeBSD host `[pkg] installer = \"pkg\"` runs the \
         script with pkg(8)"
    )]
    Refused {
        script: String,
        command: String,
        line: usize,
    },
    #[error(
        "its `{script}` shell script exited with status 3, with which pkg ends the whole install \
         at once, leaving the packages after it uninstalled; jbuild stops the step instead"
    )]
    Stop { script: String },
    #[error("its `{script}` shell script")]
    Script {
        script: String,
        #[source]
        source: ScriptError,
    },
}

impl crate::blame::Blame for ShellError {
    fn is_user_error(&self) -> bool {
        match self {
            ShellError::Script { source, .. } => source.is_user_error(),
            _ => true,
        }
    }
}

/// Parses each script pkg runs at install: a script that is not shell
/// refuses its package before anything is written.
pub fn check_parse(
    scripts: &[(ScriptType, String)],
    types: &[ScriptType],
) -> Result<(), ShellError> {
    for (t, text) in scripts.iter().filter(|(t, _)| types.contains(t)) {
        script::parse(text).map_err(|source| ShellError::Script {
            script: t.key().to_string(),
            source,
        })?;
    }
    Ok(())
}
