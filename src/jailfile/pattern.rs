//! The glob patterns of `${NAME#pattern}`, `%`, `/` and their doubles,
//! as BuildKit matches them.

/// A pattern of `${NAME#pattern}` and its kin: `*` any characters, `?`
/// one, anything else (and an escaped `*` or `?`) itself.
pub(super) struct Glob(Vec<GlobPart>);

#[derive(Clone, Copy, PartialEq, Eq)]
enum GlobPart {
    Char(char),
    One,
    Any,
}

impl Glob {
    pub(super) fn new(pattern: &str, escape: char) -> Glob {
        let mut parts = Vec::new();
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            parts.push(match c {
                '*' => GlobPart::Any,
                '?' => GlobPart::One,
                _ if c == escape => GlobPart::Char(chars.next().unwrap_or(c)),
                _ => GlobPart::Char(c),
            });
        }
        Glob(parts)
    }

    /// For each `i`, whether `s[..i]` matches: one pass of a table over
    /// the pattern and the text, their lengths multiplied.
    pub(super) fn prefixes(&self, s: &[char]) -> Vec<bool> {
        let mut can = vec![false; s.len() + 1];
        can[0] = true;
        for part in &self.0 {
            let mut next = vec![false; s.len() + 1];
            for i in 0..=s.len() {
                match part {
                    GlobPart::Any => next[i] = can[i] || (i > 0 && next[i - 1]),
                    GlobPart::One => next[i] = i > 0 && can[i - 1],
                    GlobPart::Char(c) => next[i] = i > 0 && can[i - 1] && s[i - 1] == *c,
                }
            }
            can = next;
        }
        can
    }

    /// The pattern read backwards, to match suffixes as prefixes.
    pub(super) fn reversed(&self) -> Glob {
        Glob(self.0.iter().rev().copied().collect())
    }

    /// `value` with the first (or, `all`, every) longest match at the
    /// leftmost place replaced by `with`; an empty match replaces nothing.
    pub(super) fn replace(&self, value: &[char], with: &str, all: bool) -> String {
        let mut out = String::new();
        let mut i = 0;
        let mut replaced = false;
        while i < value.len() {
            let end = if replaced && !all {
                None
            } else {
                let ends = self.prefixes(&value[i..]);
                (1..ends.len()).rev().find(|&j| ends[j]).map(|j| i + j)
            };
            match end {
                Some(j) => {
                    out.push_str(with);
                    i = j;
                    replaced = true;
                }
                None => {
                    out.push(value[i]);
                    i += 1;
                }
            }
        }
        out
    }
}
