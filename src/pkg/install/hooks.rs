//! The installer's [`Hooks`]: what [`super::install_for`] does around
//! each package's extraction, in pkg's order — its rows in the package
//! database, its Lua and shell scripts ([`shell`]), and on an upgrade the
//! old version's files removed ([`remove_old`]). Kept apart from the install's sequence of
//! phases (install.rs), which only calls them.

use super::scripts::Asked;
use super::shell::When;
use super::*;

/// The hooks of [`extract::install`] joined to the package database and
/// the Lua interpreter.
pub struct DbAndLua<'a, 'e> {
    pub db: &'a mut LocalDb,
    /// By `name-version`: installed as a dependency, and from which
    /// repository.
    pub automatic: &'a BTreeMap<String, (bool, String)>,
    /// By `name-version`: the catalogue's digest of the package.
    pub digests: &'a BTreeMap<String, String>,
    /// `FILES_IGNORE_*`: paths not recorded, and removed on upgrade.
    pub ignore: &'a FilesIgnore,
    /// By the new `name-version`: what it replaces.
    pub upgrades: &'a BTreeMap<String, Upgrade>,
    pub events: &'a mut (dyn FnMut(Event) + 'e),
    /// What [`Event::Progress`] of [`Phase::Install`] counts to.
    pub total: u64,
    /// What a command of a shell script jbuild does not carry out
    /// becomes.
    pub policy: Scripts,
    /// What the shell scripts left for after the install: deferred
    /// commands, the library hints.
    pub asked: Asked,
}

impl DbAndLua<'_, '_> {
    /// Runs `pkg`'s shell scripts of `when` ([`shell`]).
    fn shell(&mut self, pkg: &Opened, root: &Path, when: When) -> Result<(), ShellError> {
        let label = pkg.label();
        let run = shell::Run {
            root,
            policy: self.policy,
            label: &label,
            name: &pkg.manifest.name,
            prefix: &pkg.manifest.prefix,
            upgrade: self.upgrades.contains_key(&label),
            scripts: &pkg.manifest.scripts,
        };
        run.run(when, &mut self.asked, &mut *self.events)
    }
}

impl DbAndLua<'_, '_> {
    /// Runs `pkg`'s Lua scripts of type `t` in order; their output goes
    /// to the events.
    fn lua(&mut self, pkg: &Opened, root: &Path, t: LuaScriptType) -> Result<(), LuaError> {
        for (_, script) in pkg.manifest.lua_scripts.iter().filter(|(k, _)| *k == t) {
            let env = ScriptEnv {
                package: pkg.manifest.name.clone(),
                prefix: pkg.manifest.prefix.clone(),
                script: t.key().to_string(),
                upgrade: self.upgrades.contains_key(&pkg.label()),
            };
            for m in lua::run(root, script, &env, lua::Limits::default())? {
                (self.events)(Event::Message {
                    package: pkg.label(),
                    text: m.text,
                });
            }
        }
        Ok(())
    }
}

impl DbAndLua<'_, '_> {
    /// The replaced version's pre-deinstall Lua scripts, from the
    /// database, with `pkg_upgrade` true, as `pkg_add_cleanup_old` runs
    /// them before it removes the old files (pkg extracts the new files
    /// to temporary names first, so the scripts see the old version's;
    /// run before extraction, they see the same), then its shell
    /// `pre-deinstall` and `deinstall DEINSTALL` scripts ([`shell`]). pkg
    /// goes on when one fails, and so does this, saying so; a command
    /// jbuild does not carry out is refused (or deferred) as in any
    /// other script. pkg runs no post-deinstall script on an upgrade.
    fn old_pre_deinstall(&mut self, pkg: &Opened, root: &Path) -> Result<(), ShellError> {
        let Some(u) = self.upgrades.get(&pkg.label()) else {
            return Ok(());
        };
        let label = format!("{}-{}", pkg.manifest.name, u.version);
        let shell = shell::Run {
            root,
            policy: self.policy,
            label: &label,
            name: &pkg.manifest.name,
            prefix: &u.previous.prefix,
            upgrade: true,
            scripts: &u.previous.scripts,
        };
        let scripts = u.previous.lua_scripts.iter();
        for (_, script) in scripts.filter(|(t, _)| *t == LuaScriptType::PreDeinstall) {
            let env = ScriptEnv {
                package: pkg.manifest.name.clone(),
                prefix: u.previous.prefix.clone(),
                script: LuaScriptType::PreDeinstall.key().to_string(),
                upgrade: true,
            };
            match lua::run(root, script, &env, lua::Limits::default()) {
                Ok(messages) => {
                    for m in messages {
                        (self.events)(Event::Message {
                            package: label.clone(),
                            text: m.text,
                        });
                    }
                }
                Err(e) => (self.events)(Event::Message {
                    package: label.clone(),
                    text: format!("warning: {}", crate::report::error_chain(&e)),
                }),
            }
        }
        shell.run(When::PreDeinstall, &mut self.asked, &mut *self.events)
    }
}

impl Hooks for DbAndLua<'_, '_> {
    fn lua_pre_install(&mut self, pkg: &Opened, root: &Path) -> Result<(), HookError> {
        // mlua's errors are not `Send`: the chain is kept as text.
        self.lua(pkg, root, LuaScriptType::PreInstall)
            .map_err(|e| HookError::from(crate::report::error_chain(&e)))?;
        Ok(())
    }

    /// The package's pre-install shell scripts; then, on an upgrade, the
    /// old version's pre-deinstall scripts (Lua, then shell).
    fn shell_pre_install(&mut self, pkg: &Opened, root: &Path) -> Result<(), HookError> {
        self.shell(pkg, root, When::PreInstall)?;
        self.old_pre_deinstall(pkg, root)?;
        Ok(())
    }

    fn commit(
        &mut self,
        pkg: &Opened,
        installed: &extract::Installed,
        root: &Path,
    ) -> Result<(), HookError> {
        if let Some(u) = self.upgrades.get(&pkg.label()) {
            remove_old(root, &u.previous, &pkg.manifest, self.ignore)?;
        }
        let (automatic, repository) = self
            .automatic
            .get(&pkg.label())
            .cloned()
            .unwrap_or((false, String::new()));
        let record = Record {
            automatic,
            repository: (!repository.is_empty()).then_some(repository),
            config_contents: installed
                .config
                .iter()
                .map(|c| {
                    (
                        c.path.clone(),
                        String::from_utf8_lossy(&c.content).into_owned(),
                    )
                })
                .collect(),
            digest: self.digests.get(&pkg.label()).cloned(),
        };
        if self.ignore.is_empty() {
            self.db.record(&pkg.manifest, &record)?;
        } else {
            // pkg records no row for an ignored file.
            let mut m = pkg.manifest.clone();
            m.files.retain(|f| !self.ignore.matches(&f.path));
            m.config.retain(|c| !self.ignore.matches(c));
            self.db.record(&m, &record)?;
        }
        for c in installed.config.iter().filter(|c| c.merged == Some(false)) {
            (self.events)(Event::Message {
                package: pkg.label(),
                text: format!(
                    "Impossible to merge configuration file: {}: the new version is {}.pkgnew",
                    c.path, c.path
                ),
            });
        }
        for w in &installed.warnings {
            (self.events)(Event::Message {
                package: pkg.label(),
                text: w.clone(),
            });
        }
        Ok(())
    }

    /// pkg goes on when a post-install Lua script fails, and says so.
    fn lua_post_install(&mut self, pkg: &Opened, root: &Path) -> Result<(), HookError> {
        if let Err(e) = self.lua(pkg, root, LuaScriptType::PostInstall) {
            (self.events)(Event::Message {
                package: pkg.label(),
                text: format!("warning: {}", crate::report::error_chain(&e)),
            });
        }
        Ok(())
    }

    /// pkg goes on when a post-install shell script exits non-zero, and
    /// says so ([`shell`]); a command refused still stops the step.
    fn shell_post_install(&mut self, pkg: &Opened, root: &Path) -> Result<(), HookError> {
        self.shell(pkg, root, When::PostInstall)?;
        Ok(())
    }

    /// Short of the total: the end is said once every package is in.
    fn written(&mut self, bytes: u64) {
        if bytes < self.total {
            (self.events)(Event::Progress {
                phase: Phase::Install,
                done: bytes,
                total: self.total,
            });
        }
    }

    /// pkg's choice (`pkg_add_common`): messages always shown, then
    /// `install` ones for an install, `upgrade` ones (within their
    /// versions, compared with the old version) for an upgrade.
    fn messages(&mut self, pkg: &Opened) {
        let old = self.upgrades.get(&pkg.label()).map(|u| u.version.as_str());
        for m in &pkg.manifest.messages {
            let show = match (m.kind, old) {
                (MessageType::Always, _) | (MessageType::Install, None) => true,
                (MessageType::Upgrade, Some(old)) => {
                    let above = |v: &Option<String>| {
                        v.as_deref()
                            .is_none_or(|v| version::cmp(old, v) == std::cmp::Ordering::Greater)
                    };
                    let below = |v: &Option<String>| {
                        v.as_deref()
                            .is_none_or(|v| version::cmp(old, v) == std::cmp::Ordering::Less)
                    };
                    above(&m.minimum_version) && below(&m.maximum_version)
                }
                _ => false,
            };
            if show {
                (self.events)(Event::Message {
                    package: pkg.label(),
                    text: m.text.clone(),
                });
            }
        }
    }
}

/// What `pkg_add_cleanup_old` does once the new version is extracted: the
/// old version's files the new one does not install are removed, then its
/// directories the new one does not list, when they are empty
/// (`pkg_delete_dirs`). Paths are resolved inside the root.
fn remove_old(
    root: &Path,
    old: &Previous,
    new: &crate::pkg::manifest::Manifest,
    ignore: &FilesIgnore,
) -> Result<(), HookError> {
    // An ignored path the new version lists is removed too, as pkg does.
    let keep: BTreeSet<&str> = new
        .files
        .iter()
        .map(|f| f.path.as_str())
        .chain(new.config.iter().map(String::as_str))
        .filter(|p| !ignore.matches(p))
        .collect();
    for path in old.files.iter().filter(|p| !keep.contains(p.as_str())) {
        let rel = Path::new(path.trim_start_matches('/'));
        let Ok(host) = crate::fsutil::resolve_in_root(root, rel, false) else {
            continue;
        };
        match std::fs::symlink_metadata(&host) {
            Ok(m) if !m.is_dir() => std::fs::remove_file(&host).map_err(|e| {
                format!("removing {path}, which the new version does not install: {e}")
            })?,
            _ => {}
        }
    }
    let dirs: BTreeSet<&str> = new.directories.iter().map(|d| d.path.as_str()).collect();
    for path in old.dirs.iter().rev().filter(|p| !dirs.contains(p.as_str())) {
        let rel = Path::new(path.trim_start_matches('/'));
        if let Ok(host) = crate::fsutil::resolve_in_root(root, rel, false) {
            // Not empty (another package's files, or the user's): kept.
            let _ = std::fs::remove_dir(host);
        }
    }
    Ok(())
}
