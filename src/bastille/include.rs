//! INCLUDE: finding the included template (a path, or `category/template`
//! in the templates directories, in Bastille's order) and translating it
//! with its own ARGs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::source::{with_help, SrcLine};
use super::translate::{canonical, Scope, Translator, R};

impl Translator<'_> {
    pub(super) fn include(&mut self, line: &SrcLine, outer: &mut Scope, w: &[String]) -> R<()> {
        let Some(name) = w.first() else {
            return Err(line.error_cmd("INCLUDE needs a template (a path, or user/repo)"));
        };
        let mut cli = BTreeMap::new();
        let mut it = w[1..].iter();
        while let Some(a) = it.next() {
            let kv = match a.as_str() {
                "--arg" => it.next().cloned().unwrap_or_default(),
                other => match other.strip_prefix("--arg=") {
                    Some(kv) => kv.to_string(),
                    None => {
                        return Err(with_help(
                            line.error_word(a, format!("unexpected `{a}` after the template name")),
                            "pass values to the included template with --arg NAME=VALUE",
                        ))
                    }
                },
            };
            let Some((k, v)) = kv.split_once('=') else {
                return Err(line.error_word(&kv, "--arg needs NAME=VALUE"));
            };
            cli.insert(self.val(k), self.val(v));
        }
        let dir = self.find_template(line, &outer.dir, &self.val(name))?;
        if self.stack.contains(&dir) {
            return Err(with_help(
                line.error_word(
                    name,
                    format!("INCLUDE `{name}` includes a template that is already being included"),
                ),
                "templates may not include themselves, directly or through others",
            ));
        }
        if !super::is_template(&dir) {
            return Err(line.error_word(name, format!("`{}` has no Bastillefile", dir.display())));
        }
        let mut inner = Scope {
            file: dir.join("Bastillefile"),
            dir,
            cli,
            arg_file: None,
            args: Vec::new(),
        };
        self.template(&mut inner)?;
        // The including template's ARGs again, where the included one
        // gave the same names other values (RENDER reads them).
        let mut seen = std::collections::BTreeSet::new();
        for a in outer.args.iter().rev() {
            if seen.insert(a.name.clone()) && self.emitted.get(&a.name) != Some(&a.value) {
                self.emit(line, format!("ARG {}={}", a.name, a.decl));
                self.emitted.insert(a.name.clone(), a.value.clone());
            }
        }
        Ok(())
    }

    /// Where `INCLUDE name` is: a path (`./x`, `../x`, `/x`) relative to
    /// the including template; a `category/template` name in the
    /// templates directory the including template lives in (Bastille keeps
    /// `<templates>/<category>/<template>/Bastillefile`), then in
    /// `--templates DIR`, then in Bastille's configured templates directory.
    fn find_template(&self, line: &SrcLine, here: &Path, name: &str) -> R<PathBuf> {
        let configured = self.opts.configured_templates_dir();
        let remote = name.starts_with("http://") || name.starts_with("https://");
        let is_path = name.starts_with('/') || name.starts_with("./") || name.starts_with("../");
        let candidates: Vec<PathBuf> = if remote {
            // Bastille bootstraps https://host/user/repo into TEMPLATES/user/repo.
            let parts: Vec<&str> = name.trim_end_matches(".git").split('/').collect();
            match parts.as_slice() {
                [_, _, _, user, repo, ..] => vec![configured.join(user).join(repo)],
                _ => vec![],
            }
        } else if is_path {
            vec![here.join(name)]
        } else {
            let mut c: Vec<PathBuf> = here
                .parent()
                .and_then(Path::parent)
                .map(|t| t.join(name))
                .into_iter()
                .collect();
            c.extend(self.opts.templates.as_ref().map(|t| t.join(name)));
            c.push(configured.join(name));
            c.dedup();
            c
        };
        for c in &candidates {
            if c.is_dir() {
                return canonical(c);
            }
        }
        let help = if remote {
            format!(
                "jbuild does not download templates: fetch it first (`bastille bootstrap {name}`, or git clone it into {}/USER/REPO)",
                configured.display()
            )
        } else if !is_path {
            format!(
                "give the templates directory with --templates DIR, or fetch it first (`bastille bootstrap https://github.com/{name}`, or git clone it into {})",
                configured.join(name).display()
            )
        } else {
            "paths are relative to the including template's directory".to_string()
        };
        Err(with_help(
            line.error_word(
                name,
                format!(
                    "template `{name}` not found (looked in {})",
                    candidates
                        .iter()
                        .map(|c| c.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            help,
        ))
    }
}
