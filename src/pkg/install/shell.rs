//! A package's shell scripts run as pkg(8) runs them (`libpkg/scripts.c`
//! `pkg_script_run`, called from `pkg_add_common` in `libpkg/pkg_add.c`),
//! by jbuild's interpreter ([`crate::pkg::script`]) with the commands it
//! does not know going to [`PackageHost`]:
//!
//! - **Which scripts, in which order**: for the pre-install step the
//!   `pre-install` script, then the legacy `install` script with the
//!   argument `PRE-INSTALL`; for the post-install step `post-install`,
//!   then `install` with `POST-INSTALL` (pkg walks the script types in
//!   their numeric order, `install` being 6). The old version's
//!   `pre-deinstall`, then `deinstall` with `DEINSTALL`, on an upgrade.
//! - **What they start with**: `set -- name-version [ARG]`, and the
//!   environment pkg sets: `PKG_NAME`, `PKG_PREFIX`, `PKG_ROOTDIR` —
//!   `/`, as when pkg runs inside the jail (`[pkg] installer = "pkg"` on
//!   FreeBSD): every path is the image's —, `PKG_UPGRADE=true` on an
//!   upgrade. `PKG_MSGFD` is not set: the interpreter writes only to
//!   file descriptors 0-2, and a script tests the variable before it
//!   writes there.
//! - **Exit status**: a pre-install script that exits non-zero stops the
//!   package (pkg: `goto cleanup`), naming the package, the script, the
//!   status and what the script said on its error output; a post-install
//!   or pre-deinstall one is said and ignored, as pkg ignores it. Status 3
//!   makes pkg itself exit 0 on the spot, leaving the packages after it
//!   uninstalled: jbuild stops the step instead of committing half an
//!   install, and says why.
//! - **Output**: each line the script writes (standard output, then
//!   error output) is an [`Event::Message`] of the package, as pkg shows
//!   a script's output.

use std::path::Path;

pub use super::script_error::{check_parse, ShellError, AT_INSTALL};
use super::scripts::{Asked, PackageHost};
use super::{Event, Scripts};
use crate::pkg::manifest::ScriptType;
use crate::pkg::script::{self, CommandError, Env, Limits, ScriptError};

/// When a package's scripts run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    PreInstall,
    PostInstall,
    /// The replaced version's, on an upgrade.
    PreDeinstall,
}

impl When {
    /// The script of this type, then the combined one with its argument
    /// (`scripts.c`'s map).
    fn scripts(self) -> [(ScriptType, Option<&'static str>); 2] {
        match self {
            When::PreInstall => [
                (ScriptType::PreInstall, None),
                (ScriptType::Install, Some("PRE-INSTALL")),
            ],
            When::PostInstall => [
                (ScriptType::PostInstall, None),
                (ScriptType::Install, Some("POST-INSTALL")),
            ],
            When::PreDeinstall => [
                (ScriptType::PreDeinstall, None),
                (ScriptType::Deinstall, Some("DEINSTALL")),
            ],
        }
    }

    /// Whether a failing script stops the package (pkg: only a
    /// pre-install one does).
    fn fatal(self) -> bool {
        self == When::PreInstall
    }
}

/// One package's scripts for one moment of its install.
pub struct Run<'a> {
    pub root: &'a Path,
    pub policy: Scripts,
    /// `name-version`.
    pub label: &'a str,
    pub name: &'a str,
    pub prefix: &'a str,
    pub upgrade: bool,
    pub scripts: &'a [(ScriptType, String)],
}

impl Run<'_> {
    /// Runs the scripts of `when` in pkg's order (see the module docs);
    /// their output and a failure pkg ignores go to `say`.
    pub fn run(
        &self,
        when: When,
        asked: &mut Asked,
        say: &mut dyn FnMut(Event),
    ) -> Result<(), ShellError> {
        for (t, arg) in when.scripts() {
            let Some((_, text)) = self.scripts.iter().find(|(k, _)| *k == t) else {
                continue;
            };
            self.one(t, arg, text, when, asked, say)?;
        }
        Ok(())
    }

    fn one(
        &self,
        t: ScriptType,
        arg: Option<&str>,
        text: &str,
        when: When,
        asked: &mut Asked,
        say: &mut dyn FnMut(Event),
    ) -> Result<(), ShellError> {
        let script_name = t.key().to_string();
        let wrap = |source| ShellError::Script {
            script: script_name.clone(),
            source,
        };
        let parsed = script::parse(text).map_err(wrap)?;
        let mut vars = vec![
            ("PKG_NAME".to_string(), self.name.to_string()),
            ("PKG_PREFIX".to_string(), self.prefix.to_string()),
            ("PKG_ROOTDIR".to_string(), "/".to_string()),
        ];
        if self.upgrade {
            vars.push(("PKG_UPGRADE".to_string(), "true".to_string()));
        }
        let mut args = vec![self.label.to_string()];
        args.extend(arg.map(str::to_string));
        let env = Env { vars, args };
        let mut host = PackageHost {
            root: self.root,
            policy: self.policy,
            package: self.label,
            script: &script_name,
            asked,
        };
        let ran = match script::run(self.root, &parsed, &env, &mut host, &Limits::default()) {
            Ok(ran) => ran,
            Err(ScriptError::Command {
                command,
                line,
                source: CommandError::Unknown { .. },
            }) => {
                return Err(ShellError::Refused {
                    script: script_name,
                    command,
                    line,
                })
            }
            Err(e) => return Err(wrap(e)),
        };
        for stream in [&ran.stdout, &ran.stderr] {
            for line in String::from_utf8_lossy(stream).lines() {
                if !line.trim().is_empty() {
                    say(Event::Message {
                        package: self.label.to_string(),
                        text: line.to_string(),
                    });
                }
            }
        }
        match ran.status {
            0 => Ok(()),
            3 => Err(ShellError::Stop {
                script: script_name,
            }),
            status if when.fatal() => Err(ShellError::Failed {
                script: script_name,
                status,
                said: last_lines(&ran.stderr),
            }),
            status => {
                // pkg: "POST-INSTALL script failed", and on it goes.
                say(Event::Message {
                    package: self.label.to_string(),
                    text: format!(
                        "warning: its `{script_name}` shell script exited with status {status}; \
                         pkg goes on after a failed {script_name} script, and so does jbuild"
                    ),
                });
                Ok(())
            }
        }
    }
}

/// The last few lines of a script's error output, for its failure's
/// message: `: line; line`, or nothing.
fn last_lines(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let from = lines.len().saturating_sub(5);
    format!(": {}", lines[from..].join("; "))
}
