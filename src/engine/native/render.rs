//! `RENDER path`: substitute `${NAME}` in a file, or in every file under a
//! directory, with the values of the ARGs and ENV in scope.
//!
//! This follows Bastille's RENDER, which runs `sed "s/\${NAME}/value/g"`
//! for each variable: only the braced form is replaced, only for names that
//! have a value, and everything else (`$NAME`, `${UNKNOWN}`, `$${X}`) is
//! left as written. Files containing a NUL byte are taken as binary and
//! skipped; symlinks are never followed below the given path (the path
//! itself may be one, followed inside the root). A changed file is replaced
//! atomically, keeping its mode and owner; an unchanged file is not
//! rewritten.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::{read_optional, replace_if_changed, NativeError};

/// What a RENDER touched.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RenderStats {
    /// Regular files read.
    pub files: usize,
    /// Files whose content changed.
    pub changed: usize,
    /// Files skipped because they contain a NUL byte.
    pub binary: usize,
}

/// Renders `path` (inside `root`): the file, or every regular file under the
/// directory, in name order.
pub fn render(
    root: &Path,
    path: &str,
    vars: &BTreeMap<String, String>,
) -> Result<RenderStats, NativeError> {
    let shown = Path::new("/").join(path);
    let host = crate::fsutil::resolve_in_root(root, &shown, true)
        .map_err(NativeError::io("resolve", &shown))?;
    let meta = fs::metadata(&host).map_err(NativeError::io("render", &shown))?;
    let mut stats = RenderStats::default();
    if meta.is_dir() {
        render_dir(&host, &shown, vars, &mut stats)?;
    } else if meta.is_file() {
        render_file(&host, &shown, vars, &mut stats)?;
    }
    Ok(stats)
}

fn render_dir(
    host: &Path,
    shown: &Path,
    vars: &BTreeMap<String, String>,
    stats: &mut RenderStats,
) -> Result<(), NativeError> {
    let mut names: Vec<_> = fs::read_dir(host)
        .map_err(NativeError::io("list", shown))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .map_err(NativeError::io("list", shown))?;
    names.sort();
    for name in names {
        let (host, shown): (PathBuf, PathBuf) = (host.join(&name), shown.join(&name));
        let meta = fs::symlink_metadata(&host).map_err(NativeError::io("inspect", &shown))?;
        if meta.is_dir() {
            render_dir(&host, &shown, vars, stats)?;
        } else if meta.is_file() {
            render_file(&host, &shown, vars, stats)?;
        }
    }
    Ok(())
}

fn render_file(
    host: &Path,
    shown: &Path,
    vars: &BTreeMap<String, String>,
    stats: &mut RenderStats,
) -> Result<(), NativeError> {
    let Some(old) = read_optional(host, shown)? else {
        return Ok(());
    };
    stats.files += 1;
    if old.0.contains(&0) {
        stats.binary += 1;
        return Ok(());
    }
    let new = substitute(&old.0, vars);
    if replace_if_changed(host, shown, Some(&old), &new)? {
        stats.changed += 1;
    }
    Ok(())
}

/// Replaces each `${NAME}` whose NAME is in `vars`.
fn substitute(text: &[u8], vars: &BTreeMap<String, String>) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.windows(2).position(|w| w == b"${") {
        out.extend_from_slice(&rest[..at]);
        let after = &rest[at + 2..];
        let value = after
            .iter()
            .position(|&b| b == b'}')
            .and_then(|end| {
                std::str::from_utf8(&after[..end])
                    .ok()
                    .map(|name| (end, name))
            })
            .and_then(|(end, name)| vars.get(name).map(|v| (end, v)));
        match value {
            Some((end, v)) => {
                out.extend_from_slice(v.as_bytes());
                rest = &after[end + 1..];
            }
            None => {
                out.extend_from_slice(b"${");
                rest = after;
            }
        }
    }
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_known_braced_names_only() {
        let vars = BTreeMap::from([
            ("A".to_string(), "1".to_string()),
            ("B_2".to_string(), "${A}".to_string()),
        ]);
        let got = substitute(b"${A} $A ${C} ${B_2}${A}} ${ ${A", &vars);
        assert_eq!(String::from_utf8(got).unwrap(), "1 $A ${C} ${A}1} ${ ${A");
    }
}
