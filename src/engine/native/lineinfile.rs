//! `LINE_IN_FILE line file`: make sure a file contains a line, appending it
//! if no identical line exists (Ansible's `lineinfile` with only `line`).

use std::path::Path;

use super::{read_optional, replace_if_changed, target_file, NativeError};

/// Appends `line` to `file` (a path inside `root`) unless a line with
/// exactly this content is already there. A file not ending in a newline
/// gets one first; a missing file is created (0644, directories 0755); an
/// existing file keeps its mode and owner. Returns whether the file changed.
pub fn line_in_file(root: &Path, line: &str, file: &str) -> Result<bool, NativeError> {
    if line.contains(['\n', '\0']) {
        let reason = "the line cannot contain a newline or NUL";
        return Err(NativeError::InvalidValue {
            name: file.to_string(),
            reason,
        });
    }
    let shown = Path::new("/").join(file);
    let host = target_file(root, file)?;
    let old = read_optional(&host, &shown)?;
    let text: &[u8] = old.as_ref().map_or(&[], |(b, _)| b);
    if has_line(text, line.as_bytes()) {
        return Ok(false);
    }
    let mut new = Vec::with_capacity(text.len() + line.len() + 2);
    new.extend_from_slice(text);
    if !new.is_empty() && !new.ends_with(b"\n") {
        new.push(b'\n');
    }
    new.extend_from_slice(line.as_bytes());
    new.push(b'\n');
    replace_if_changed(&host, &shown, old.as_ref(), &new)
}

/// Whether `text` has a line equal to `line` (the last line need not end in
/// a newline; a trailing newline does not start an empty line).
fn has_line(text: &[u8], line: &[u8]) -> bool {
    let body = text.strip_suffix(b"\n").unwrap_or(text);
    !text.is_empty() && body.split(|&b| b == b'\n').any(|l| l == line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_matching() {
        assert!(has_line(b"a\nb\n", b"b"));
        assert!(has_line(b"a\nb", b"b"));
        assert!(!has_line(b"a\nb\n", b""));
        assert!(has_line(b"a\n\nb\n", b""));
        assert!(!has_line(b"", b""));
        assert!(!has_line(b"ab\n", b"a"));
    }
}
