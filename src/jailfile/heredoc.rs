//! Heredocs in RUN and COPY: `<<EOF`, `<<-EOF` (leading tabs stripped from
//! the body and the terminator), `<<"EOF"` / `<<'EOF'` (quoted: COPY does
//! not substitute variables in the body), several on one line.
//!
//! Markers are found in the instruction's arguments outside quotes (as the
//! shell would find them); the bodies are the lines after the instruction,
//! in marker order, each up to a line that is exactly its terminator.

use super::diagnostic::{Error, Result};
use super::line::Line;
use super::text::Text;

/// A heredoc with its body read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Heredoc {
    /// The terminator word, quotes removed: also the file name for COPY.
    pub name: String,
    /// `<<"EOF"` or `<<'EOF'`: no substitution in the body.
    pub quoted: bool,
    /// `<<-EOF`.
    pub strip_tabs: bool,
    /// The marker (`<<-"EOF"`) as it appears in the arguments.
    pub marker: Text,
    /// The body: lines (tabs stripped for `<<-`) each ending in `\n`.
    pub body: Text,
    /// The lines as written, terminator included, joined with `\n`: what a
    /// shell must see after the command line.
    pub raw: String,
}

/// A marker found in the arguments, body not read yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Marker {
    pub name: String,
    pub quoted: bool,
    pub strip_tabs: bool,
    pub marker: Text,
}

/// Characters that end an unquoted heredoc word, as in sh.
fn ends_word(c: char) -> bool {
    c.is_whitespace() || "<>|&;()".contains(c)
}

/// Finds `<<WORD` markers outside quotes and `$((...))` arithmetic; a
/// here-string `<<<` is not one.
pub(crate) fn find_markers(args: &Text, escape: char) -> Vec<Marker> {
    let mut markers = Vec::new();
    let mut quote: Option<char> = None;
    let mut i = 0;
    while let Some(c) = args.char_at(i) {
        match quote {
            Some('\'') if c == '\'' => quote = None,
            Some('"') if c == escape => i += 1,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == escape => i += 1,
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '$'
                && args.char_at(i + 1) == Some('(')
                && args.char_at(i + 2) == Some('(') =>
            {
                let close = (i + 3..args.len())
                    .find(|&j| args.char_at(j) == Some(')') && args.char_at(j + 1) == Some(')'));
                match close {
                    Some(j) => i = j + 1,
                    None => break,
                }
            }
            None if c == '<'
                && args.char_at(i + 1) == Some('<')
                && args.char_at(i + 2) != Some('<')
                && (i == 0 || args.char_at(i - 1) != Some('<')) =>
            {
                if let Some((m, next)) = marker_at(args, i, escape) {
                    markers.push(m);
                    i = next;
                    continue;
                }
            }
            None => {}
        }
        i += 1;
    }
    markers
}

/// Reads the marker starting at `start` (the first `<`): returns it and the
/// index after it, or `None` if no word follows.
fn marker_at(args: &Text, start: usize, escape: char) -> Option<(Marker, usize)> {
    let mut j = start + 2;
    let strip_tabs = args.char_at(j) == Some('-');
    if strip_tabs {
        j += 1;
    }
    while args.char_at(j).is_some_and(|c| c == ' ' || c == '\t') {
        j += 1;
    }
    let mut name = String::new();
    let mut quoted = false;
    while let Some(c) = args.char_at(j) {
        if c == '"' || c == '\'' {
            quoted = true;
            let close = (j + 1..args.len()).find(|&k| args.char_at(k) == Some(c))?;
            name.extend((j + 1..close).filter_map(|k| args.char_at(k)));
            j = close + 1;
        } else if c == escape {
            quoted = true;
            name.extend(args.char_at(j + 1));
            j += 2;
        } else if ends_word(c) {
            break;
        } else {
            name.push(c);
            j += 1;
        }
    }
    if name.is_empty() {
        return None;
    }
    let marker = args.slice(start, j);
    Some((
        Marker {
            name,
            quoted,
            strip_tabs,
            marker,
        },
        j,
    ))
}

/// Reads the bodies of `markers` from `lines[*next..]`, moving `*next`
/// past them. A missing terminator is an error at its marker; so are
/// bodies of more than `room` characters together (what is left of the
/// instruction's [`super::line::MAX_INSTRUCTION`]).
pub(crate) fn read_bodies(
    markers: Vec<Marker>,
    lines: &[Line<'_>],
    next: &mut usize,
    room: usize,
) -> Result<Vec<Heredoc>> {
    let mut out = Vec::with_capacity(markers.len());
    let mut left = room;
    for m in markers {
        let mut body = Text::new(m.marker.end);
        let mut raw: Vec<&str> = Vec::new();
        loop {
            let Some(line) = lines.get(*next) else {
                return Err(Error::new(
                    m.marker.span(),
                    format!(
                        "unterminated heredoc: no line `{}` ends `{}`",
                        m.name,
                        m.marker.as_string()
                    ),
                )
                .with_help(format!(
                    "end the heredoc with a line that contains only `{}`",
                    m.name
                )));
            };
            *next += 1;
            raw.push(line.text);
            let content = if m.strip_tabs {
                line.text.trim_start_matches('\t')
            } else {
                line.text
            };
            if content == m.name {
                break;
            }
            let skip = line.text.chars().count() - content.chars().count();
            let n = content.chars().count() + 1;
            if n > left {
                return Err(super::line::too_long(m.marker.span()));
            }
            left -= n;
            for (c, p) in line.chars().skip(skip) {
                body.push(c, p);
            }
            body.push('\n', line.end());
        }
        out.push(Heredoc {
            name: m.name,
            quoted: m.quoted,
            strip_tabs: m.strip_tabs,
            marker: m.marker,
            body,
            raw: raw.join("\n"),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jailfile::line::lines;
    use crate::jailfile::text::Pos;

    fn text(s: &str) -> Text {
        Text::line_one(s)
    }

    fn names(s: &str) -> Vec<(String, bool, bool)> {
        find_markers(&text(s), '\\')
            .into_iter()
            .map(|m| (m.name, m.quoted, m.strip_tabs))
            .collect()
    }

    #[test]
    fn finds_markers_like_a_shell() {
        assert_eq!(names("<<EOF"), [("EOF".into(), false, false)]);
        assert_eq!(names("cat <<-\"E F\" >x"), [("E F".into(), true, true)]);
        assert_eq!(
            names("<<a.conf <<'b.conf' /etc/"),
            [
                ("a.conf".into(), false, false),
                ("b.conf".into(), true, false)
            ]
        );
        assert_eq!(names("cat<<EOF|sh"), [("EOF".into(), false, false)]);
        assert!(names("echo '<<EOF' \"<<X\" $((1<<2)) cat <<<x").is_empty());
        assert!(names("<<").is_empty());
        assert!(names("<<'unterminated").is_empty());
    }

    #[test]
    fn reads_bodies_in_order() {
        let src = "RUN x\n\tone\nA\n\t\ttwo\n\tB\nafter";
        let ls = lines(0, src);
        let markers = find_markers(&text("<<A <<-B"), '\\');
        let mut next = 1;
        let docs = read_bodies(markers, &ls, &mut next, usize::MAX).unwrap();
        assert_eq!(next, 5);
        assert_eq!(docs[0].body.as_string(), "\tone\n");
        assert_eq!(docs[1].body.as_string(), "two\n");
        assert_eq!(docs[1].raw, "\t\ttwo\n\tB");
        assert_eq!(docs[1].body.start(), Pos::new(0, 4, 3));
    }
}
