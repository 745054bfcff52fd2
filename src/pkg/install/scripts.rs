//! What a package's shell script may run, and where each command goes
//! (issue 32): the [`Host`] the interpreter ([`crate::pkg::script`]) asks
//! for every command that is not one of its builtins.
//!
//! A command is known by its name, bare or as a path (`pw`,
//! `/usr/sbin/pw`), and goes to jbuild's own implementation of the
//! FreeBSD program, each confined to the image's root:
//!
//! - `pw`, `pwd_mkdb` → [`crate::pkg::accounts`] (users and groups, the
//!   password databases);
//! - `services_mkdb`, `cap_mkdb` → [`crate::pkg::mkdb`];
//! - `certctl` → [`crate::pkg::certs`];
//! - `service ldconfig start|restart` and `/etc/rc.d/ldconfig
//!   start|restart` (`@ldconfig`'s post-install) ask for the library
//!   hints: the ask is recorded and the hints are written once, after the
//!   last package of the install, from the directories the image
//!   configures ([`crate::pkg::hints::rebuild`]) — what rc's `ldconfig`
//!   script does when the jail boots, and what a jail started from an
//!   image never does by itself; `ldconfig` with its options runs as
//!   ldconfig(8) ([`crate::pkg::hints::ldconfig`]);
//! - `env NAME=VALUE … command` runs `command`;
//! - the cache and index rebuilders the ports' keywords call
//!   ([`REBUILDERS`]) are kept for the jail's first start
//!   ([`crate::pkg::firstboot`]): a [`Deferred`] with
//!   [`Reason::Rebuilder`], status 0;
//! - anything else is [`Scripts::Refuse`]d (the script stops, and the
//!   step fails naming the package, the script and the command), or with
//!   [`Scripts::Defer`] kept for the first start as a [`Deferred`] with
//!   [`Reason::Unknown`], status 0.

use std::path::Path;

use crate::pkg::firstboot::{Deferred, Reason};
use crate::pkg::install::Scripts;
use crate::pkg::script::{CommandError, Host, Io};

/// The cache and index rebuilders of the ports tree's keywords and
/// triggers, which only the target's own programs can run: deferred to
/// the jail's first start, never refused. From `Keywords/*.ucl`
/// (freebsd-ports): `fc.ucl`/`fcfontsdir.ucl` (`fc-cache`),
/// `fontsdir.ucl` (`mkfontscale`, `mkfontdir`), `glib-schemas.ucl`
/// (`glib-compile-schemas`), `desktop-file-utils.ucl`
/// (`update-desktop-database`), `shared-mime-info.ucl`
/// (`update-mime-database`), `info.ucl` (`indexinfo`; `install-info` in
/// older trees), `kld.ucl` (`kldxref`; also FreeBSD-kernel's
/// post-install), `terminfo.ucl` (`tic`), `xmlcatmgr.ucl` (`xmlcatmgr`),
/// `fmtutil.ucl` (`fmtutil-sys`); the triggers of devel/glib20
/// (`gio-querymodules`) and x11-toolkits/gtk30 (`gtk-update-icon-cache`).
pub const REBUILDERS: &[&str] = &[
    "fc-cache",
    "fmtutil-sys",
    "gio-querymodules",
    "glib-compile-schemas",
    "gtk-update-icon-cache",
    "indexinfo",
    "install-info",
    "kldxref",
    "mkfontdir",
    "mkfontscale",
    "tic",
    "update-desktop-database",
    "update-mime-database",
    "xmlcatmgr",
];

/// The programs jbuild carries out itself beside the interpreter's own
/// builtins and file commands ([`crate::pkg::script::files`]).
const NATIVE: &[&str] = &["pw", "pwd_mkdb", "certctl", "ldconfig", "service", "env"];

/// The name a command is known by: the last part of a path
/// (`/usr/sbin/pw` → `pw`), the word itself otherwise.
pub fn command_name(word: &str) -> &str {
    if word.starts_with('/') {
        word.rsplit('/').next().unwrap_or(word)
    } else {
        word
    }
}

/// `words` quoted for `sh`, joined by spaces: how a deferred command is
/// written into the first-start script. A word of only safe characters
/// stays as it is; any other is single-quoted (a `'` as `'\''`).
pub fn sh_quote(words: &[&str]) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    words
        .iter()
        .map(|w| {
            if !w.is_empty() && w.chars().all(safe) {
                w.to_string()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// What a script asked that the install carries on with after it: the
/// commands deferred, and whether the library hints are to be rebuilt.
#[derive(Debug, Default)]
pub struct Asked {
    pub deferred: Vec<Deferred>,
    /// A script ran `ldconfig` or `service ldconfig restart`.
    pub hints: bool,
}

/// The [`Host`] of one script of one package.
pub struct PackageHost<'a> {
    pub root: &'a Path,
    pub policy: Scripts,
    /// `name-version` of the package.
    pub package: &'a str,
    /// The script's type as pkg names it (`pre-install`, …).
    pub script: &'a str,
    pub asked: &'a mut Asked,
}

impl PackageHost<'_> {
    /// Keeps `name args` for the jail's first start.
    fn defer(&mut self, name: &str, args: &[String], reason: Reason) -> i32 {
        let mut words = vec![name];
        words.extend(args.iter().map(String::as_str));
        self.asked.deferred.push(Deferred {
            package: self.package.to_string(),
            script: self.script.to_string(),
            command: sh_quote(&words),
            reason,
        });
        0
    }

    /// `service [-v] [-E var=value] NAME VERB` and `/etc/rc.d/NAME
    /// VERB`: ldconfig's start or restart is recorded (the hints are
    /// written once, after the last package); its other verbs are
    /// [`crate::pkg::hints`]'s; any other service is not carried out.
    fn rc(&mut self, word: &str, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
        let (service, rest, rc_script) = if command_name(word) == "service" {
            let mut i = 0;
            while let Some(a) = args.get(i) {
                match a.as_str() {
                    "-v" => i += 1,
                    "-E" => i += 2,
                    _ => break,
                }
            }
            let name = args.get(i).map_or("", |a| command_name(a));
            (name, args.get(i + 1..).unwrap_or(&[]), false)
        } else {
            (command_name(word), args, true)
        };
        if service != "ldconfig" {
            return self.unknown(word, args);
        }
        let verb = rest.first().map_or("", String::as_str);
        let bare = ["fast", "force", "one", "quiet"]
            .iter()
            .find_map(|p| verb.strip_prefix(p))
            .unwrap_or(verb);
        if matches!(bare, "start" | "restart") {
            self.asked.hints = true;
            return Ok(0);
        }
        if rc_script {
            crate::pkg::hints::rc_ldconfig(self.root, args, io)
        } else {
            crate::pkg::hints::service(self.root, args, io)
        }
    }

    /// `env [NAME=VALUE …] command args`: the command, run as if called
    /// directly (what it reads of its environment is the root's anyway:
    /// `DESTDIR=${PKG_ROOTDIR}` is `/`, the image).
    fn env(&mut self, args: &[String], io: &mut Io<'_>) -> Result<i32, CommandError> {
        let rest: Vec<String> = args
            .iter()
            .skip_while(|a| a.contains('=') && !a.starts_with('='))
            .cloned()
            .collect();
        match rest.split_first() {
            Some((name, tail)) if !name.starts_with('-') => self.command(name, tail, io),
            _ => self.unknown("env", args),
        }
    }

    /// A command jbuild does not carry out: refused, or deferred.
    fn unknown(&mut self, name: &str, args: &[String]) -> Result<i32, CommandError> {
        match self.policy {
            Scripts::Defer => Ok(self.defer(name, args, Reason::Unknown)),
            Scripts::Refuse => Err(CommandError::Unknown {
                command: name.to_string(),
            }),
        }
    }
}

impl Host for PackageHost<'_> {
    fn command(
        &mut self,
        word: &str,
        args: &[String],
        io: &mut Io<'_>,
    ) -> Result<i32, CommandError> {
        let root = self.root;
        let name = command_name(word);
        if word.starts_with("/etc/rc.d/") || word.starts_with("/usr/local/etc/rc.d/") {
            return self.rc(word, args, io);
        }
        match name {
            "pw" => crate::pkg::accounts::pw::pw(root, args, io),
            "pwd_mkdb" => crate::pkg::accounts::pwd_mkdb::pwd_mkdb(root, args, io),
            "services_mkdb" => crate::pkg::mkdb::services_mkdb(root, args, io),
            "cap_mkdb" => crate::pkg::mkdb::cap_mkdb(root, args, io),
            "certctl" => crate::pkg::certs::certctl(root, args, io),
            "ldconfig" => crate::pkg::hints::ldconfig(root, args, io),
            "service" => self.rc(word, args, io),
            "env" => self.env(args, io),
            _ if REBUILDERS.contains(&name) => Ok(self.defer(word, args, Reason::Rebuilder)),
            _ => self.unknown(word, args),
        }
    }

    fn knows(&self, word: &str) -> bool {
        let name = command_name(word);
        NATIVE.contains(&name) || REBUILDERS.contains(&name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_known_by_its_last_part() {
        assert_eq!(command_name("/usr/sbin/pw"), "pw");
        assert_eq!(command_name("pw"), "pw");
        assert_eq!(command_name("./pw"), "./pw");
    }

    #[test]
    fn words_are_quoted_for_sh_only_where_they_must_be() {
        assert_eq!(
            sh_quote(&["fc-cache", "-s", "/usr/local/share/fonts"]),
            "fc-cache -s /usr/local/share/fonts"
        );
        assert_eq!(sh_quote(&["echo", "it's", ""]), r"echo 'it'\''s' ''");
        assert_eq!(sh_quote(&["a b", "$x"]), "'a b' '$x'");
    }
}
