//! Pathname expansion inside the root: each component with a wildcard is
//! matched against the entries of the directory as the jail sees it
//! (listed through [`super::path::host`], so a symlinked directory leads
//! to its target inside the root, never to the host's), results sorted,
//! at most [`super::Limits::glob_matches`] of them. A pattern matching
//! nothing stays as written, as in sh.

use super::expand::Field;
use super::path;
use super::pattern::Pattern;
use super::pattern::Seg;
use super::shell::{Shell, R};

impl Shell<'_> {
    /// The paths `f` names, or `None` when it has no unquoted wildcard or
    /// matches nothing.
    pub(crate) fn glob(&mut self, f: &Field) -> R<Option<Vec<String>>> {
        let has_wild = f
            .segs
            .iter()
            .any(|s| !s.quoted && s.text.contains(['*', '?', '[']));
        if !has_wild {
            return Ok(None);
        }
        // Components, each a list of segments.
        let mut comps: Vec<Vec<Seg>> = vec![Vec::new()];
        for s in &f.segs {
            for (i, part) in s.text.split('/').enumerate() {
                if i > 0 {
                    comps.push(Vec::new());
                }
                comps.last_mut().expect("one component").push(Seg {
                    text: part.to_string(),
                    quoted: s.quoted,
                });
            }
        }
        let absolute = f.text().starts_with('/');
        let mut found: Vec<String> = vec![if absolute { "/".into() } else { String::new() }];
        let last = comps.len() - 1;
        for (i, comp) in comps.iter().enumerate() {
            if comp.iter().all(|s| s.text.is_empty()) {
                if i == 0 {
                    continue; // the leading `/`
                }
                if i == last {
                    found = found.into_iter().map(|p| format!("{p}/")).collect();
                }
                continue;
            }
            let pat = Pattern::new(comp);
            let mut next = Vec::new();
            for dir in &found {
                match pat.literal_text() {
                    Some(name) => next.push(join(dir, &name)),
                    None => {
                        for name in self.list_dir(dir)? {
                            if name.starts_with('.') && !pat.starts_with_dot() {
                                continue;
                            }
                            if pat.matches(&name) {
                                next.push(join(dir, &name));
                                if next.len() > self.limits.glob_matches {
                                    return Err(self.limit(format!(
                                        "{} paths from one pathname expansion",
                                        self.limits.glob_matches
                                    )));
                                }
                            }
                        }
                    }
                }
            }
            found = next;
            if found.is_empty() {
                return Ok(None);
            }
        }
        // Literal components must exist too.
        let root = self.root.clone();
        let cwd = self.state.cwd.clone();
        found.retain(|p| {
            path::host(&root, &cwd, p, false).is_ok_and(|h| h.symlink_metadata().is_ok())
        });
        found.sort();
        Ok(if found.is_empty() { None } else { Some(found) })
    }

    /// The names in `dir` (as written; empty: the working directory),
    /// sorted; none when it is not a directory.
    fn list_dir(&self, dir: &str) -> R<Vec<String>> {
        let d = if dir.is_empty() { "." } else { dir };
        let host = match path::host(&self.root, &self.state.cwd, d, true) {
            Ok(h) => h,
            Err(_) => return Ok(Vec::new()),
        };
        let mut names = Vec::new();
        if let Ok(rd) = std::fs::read_dir(&host) {
            for e in rd.flatten() {
                names.push(e.file_name().to_string_lossy().into_owned());
                if names.len() > self.limits.glob_matches.saturating_mul(10) {
                    return Err(self.limit(format!(
                        "{} entries listed in one directory",
                        self.limits.glob_matches.saturating_mul(10)
                    )));
                }
            }
        }
        names.sort();
        Ok(names)
    }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}
