//! Text that remembers where every character came from.
//!
//! An instruction can span several physical lines (`\` continuations,
//! heredocs), and comment lines inside it are dropped. So the parser never
//! works on a plain `String`: it works on a [`Text`], a list of characters
//! each paired with its [`Pos`] in a source file. Any slice of it can then be
//! turned into a [`Span`] for an error message, however the lines were
//! joined. Columns count characters, not bytes.

/// Index of a file in [`super::diagnostic::Sources`].
pub(crate) type FileId = u32;

/// A character's place: file, 1-based line, 1-based column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Pos {
    pub file: FileId,
    pub line: u32,
    pub col: u32,
}

impl Pos {
    pub fn new(file: FileId, line: u32, col: u32) -> Pos {
        Pos { file, line, col }
    }

    /// The position `n` characters further on the same line.
    pub fn right(self, n: u32) -> Pos {
        Pos {
            col: self.col.saturating_add(n),
            ..self
        }
    }
}

/// What an error points at: a start and a length in characters. A length
/// of 0 means "to the end of the line" (the span crossed a line break).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub pos: Pos,
    pub len: u32,
}

impl Span {
    pub fn new(pos: Pos, len: u32) -> Span {
        Span { pos, len }
    }

    /// One character at `pos`.
    pub fn at(pos: Pos) -> Span {
        Span { pos, len: 1 }
    }
}

/// Characters with their positions, plus the position just past the end
/// (where "missing argument" errors point).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Text {
    pub chars: Vec<(char, Pos)>,
    pub end: Pos,
}

impl Text {
    pub fn new(end: Pos) -> Text {
        Text {
            chars: Vec::new(),
            end,
        }
    }

    /// A text whose every character claims to be at `pos`: for strings that
    /// came out of JSON, where only the opening `[` has a useful position.
    pub fn synthetic(s: &str, pos: Pos) -> Text {
        Text {
            chars: s.chars().map(|c| (c, pos)).collect(),
            end: pos,
        }
    }

    pub fn push(&mut self, c: char, pos: Pos) {
        self.chars.push((c, pos));
        self.end = pos.right(1);
    }

    pub fn len(&self) -> usize {
        self.chars.len()
    }

    pub fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    pub fn char_at(&self, i: usize) -> Option<char> {
        self.chars.get(i).map(|&(c, _)| c)
    }

    pub fn as_string(&self) -> String {
        self.chars.iter().map(|&(c, _)| c).collect()
    }

    /// Where the text starts (or its end, when empty).
    pub fn start(&self) -> Pos {
        self.chars.first().map_or(self.end, |&(_, p)| p)
    }

    /// The span covering the whole text; an empty text points at its end.
    pub fn span(&self) -> Span {
        match (self.chars.first(), self.chars.last()) {
            (Some(&(_, a)), Some(&(_, b))) if a.file == b.file && a.line == b.line => {
                Span::new(a, b.col.saturating_sub(a.col).saturating_add(1))
            }
            (Some(&(_, a)), Some(_)) => Span::new(a, 0),
            _ => Span::at(self.end),
        }
    }

    /// Characters `from..to` (clamped), keeping positions.
    pub fn slice(&self, from: usize, to: usize) -> Text {
        let to = to.min(self.chars.len());
        let from = from.min(to);
        let end = match to.checked_sub(1).and_then(|l| self.chars.get(l)) {
            Some(&(_, last)) if to > from => last.right(1),
            _ => self.chars.get(from).map_or(self.end, |&(_, p)| p),
        };
        Text {
            chars: self.chars[from..to].to_vec(),
            end,
        }
    }

    pub fn slice_from(&self, from: usize) -> Text {
        self.slice(from, self.chars.len())
    }

    /// Without leading and trailing whitespace.
    pub fn trim(&self) -> Text {
        let start = self.chars.iter().position(|&(c, _)| !c.is_whitespace());
        match start {
            None => Text::new(self.start()),
            Some(s) => {
                let e = self.chars.iter().rposition(|&(c, _)| !c.is_whitespace());
                self.slice(s, e.map_or(s, |e| e + 1))
            }
        }
    }

    /// [`Text::trim`] without a copy: for the lexer, whose texts may be
    /// a whole (long) line.
    pub fn trim_in_place(&mut self) {
        let Some(s) = self.chars.iter().position(|&(c, _)| !c.is_whitespace()) else {
            *self = Text::new(self.start());
            return;
        };
        let e = self
            .chars
            .iter()
            .rposition(|&(c, _)| !c.is_whitespace())
            .unwrap_or(s);
        self.chars.truncate(e + 1);
        self.chars.drain(..s);
        if let Some(&(_, last)) = self.chars.last() {
            self.end = last.right(1);
        }
    }

    /// Removes the first `n` characters and returns them as a text of
    /// their own (the rest stays, without a copy of it).
    pub fn split_off_front(&mut self, n: usize) -> Text {
        let n = n.min(self.chars.len());
        let front = self.slice(0, n);
        self.chars.drain(..n);
        front
    }

    pub fn starts_with(&self, prefix: &str) -> bool {
        let mut it = self.chars.iter();
        prefix
            .chars()
            .all(|p| it.next().is_some_and(|&(c, _)| c == p))
    }
}

#[cfg(test)]
impl Text {
    /// `s` as line 1 of file 0, one column a character: the texts the
    /// lexer's tests start from.
    pub(crate) fn line_one(s: &str) -> Text {
        let mut t = Text::new(Pos::new(0, 1, 1));
        for (i, c) in s.chars().enumerate() {
            t.push(c, Pos::new(0, 1, i as u32 + 1));
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Text {
        Text::line_one(s)
    }

    #[test]
    fn slices_and_spans() {
        let t = text("  héllo  ");
        let tr = t.trim();
        assert_eq!(tr.as_string(), "héllo");
        assert_eq!(tr.span(), Span::new(Pos::new(0, 1, 3), 5));
        assert_eq!(tr.end, Pos::new(0, 1, 8));
        assert_eq!(t.slice(5, 2).len(), 0);
        for s in ["  héllo  ", "", "   ", "x", " a b "] {
            let t = text(s);
            let mut inplace = t.clone();
            inplace.trim_in_place();
            assert_eq!(inplace, t.trim(), "{s:?}");
        }
        let mut t = text("RUN a b");
        let kw = t.split_off_front(3);
        assert_eq!(
            (kw, t.clone()),
            (text("RUN a b").slice(0, 3), text("RUN a b").slice_from(3))
        );
    }
}
