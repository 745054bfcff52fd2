//! sh(1)'s patterns (`case`, `${X#…}`, pathname expansion): `*`, `?`,
//! bracket expressions `[a-z]` `[!x]` `[^x]` `[[:alpha:]]`, and literal
//! characters (every quoted one). Matching is linear in the text for
//! each star (the classic backtracking of the last `*` only), so a hostile
//! pattern cannot make it exponential.

/// Text and whether it was quoted.
#[derive(Debug, Clone)]
pub(crate) struct Seg {
    pub text: String,
    pub quoted: bool,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Lit(char),
    Any,
    Star,
    Class { negated: bool, items: Vec<Item> },
}

#[derive(Debug, Clone, PartialEq)]
enum Item {
    Char(char),
    Range(char, char),
    Named(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    toks: Vec<Tok>,
}

impl Pattern {
    /// A pattern from the segments of an expanded word: unquoted text is
    /// pattern syntax, quoted text literal.
    pub(crate) fn new(segs: &[Seg]) -> Pattern {
        // (char, quoted)
        let chars: Vec<(char, bool)> = segs
            .iter()
            .flat_map(|s| s.text.chars().map(move |c| (c, s.quoted)))
            .collect();
        let mut toks = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let (c, q) = chars[i];
            i += 1;
            if q {
                toks.push(Tok::Lit(c));
                continue;
            }
            match c {
                '*' => {
                    if toks.last() != Some(&Tok::Star) {
                        toks.push(Tok::Star)
                    }
                }
                '?' => toks.push(Tok::Any),
                '\\' if i < chars.len() => {
                    toks.push(Tok::Lit(chars[i].0));
                    i += 1;
                }
                '[' => match class(&chars[i..]) {
                    Some((tok, used)) => {
                        toks.push(tok);
                        i += used;
                    }
                    None => toks.push(Tok::Lit('[')),
                },
                c => toks.push(Tok::Lit(c)),
            }
        }
        Pattern { toks }
    }

    /// A pattern of literal text only.
    pub fn literal(text: &str) -> Pattern {
        Pattern {
            toks: text.chars().map(Tok::Lit).collect(),
        }
    }

    /// Whether the pattern has anything but literal characters (pathname
    /// expansion happens only then).
    pub fn is_glob(&self) -> bool {
        self.toks.iter().any(|t| !matches!(t, Tok::Lit(_)))
    }

    /// The literal text (for a pattern without wildcards).
    pub fn literal_text(&self) -> Option<String> {
        self.toks
            .iter()
            .map(|t| match t {
                Tok::Lit(c) => Some(*c),
                _ => None,
            })
            .collect()
    }

    /// Whether the first token is a literal `.` (a pathname pattern
    /// matches a leading dot only then).
    pub fn starts_with_dot(&self) -> bool {
        matches!(self.toks.first(), Some(Tok::Lit('.')))
    }

    pub fn matches(&self, text: &str) -> bool {
        let t: Vec<char> = text.chars().collect();
        matches_chars(&self.toks, &t)
    }

    /// `${X#p}` (shortest) and `${X##p}` (longest).
    pub fn strip_prefix<'a>(&self, text: &'a str, longest: bool) -> &'a str {
        let mut bounds: Vec<usize> = text
            .char_indices()
            .map(|(i, _)| i)
            .chain([text.len()])
            .collect();
        if longest {
            bounds.reverse();
        }
        for i in bounds {
            if self.matches(&text[..i]) {
                return &text[i..];
            }
        }
        text
    }

    /// `${X%p}` (shortest) and `${X%%p}` (longest).
    pub fn strip_suffix<'a>(&self, text: &'a str, longest: bool) -> &'a str {
        let mut bounds: Vec<usize> = text
            .char_indices()
            .map(|(i, _)| i)
            .chain([text.len()])
            .collect();
        if !longest {
            bounds.reverse();
        }
        for i in bounds {
            if self.matches(&text[i..]) {
                return &text[..i];
            }
        }
        text
    }
}

/// A bracket expression after its `[`: the token and the characters it
/// used (up to and with the `]`), or `None` when unclosed (a literal `[`).
fn class(chars: &[(char, bool)]) -> Option<(Tok, usize)> {
    let mut i = 0;
    let mut negated = false;
    if let Some((c, false)) = chars.first() {
        if *c == '!' || *c == '^' {
            negated = true;
            i = 1;
        }
    }
    let mut items = Vec::new();
    let mut first = true;
    while i < chars.len() {
        let (c, q) = chars[i];
        if c == ']' && !q && !first {
            return Some((Tok::Class { negated, items }, i + 1));
        }
        first = false;
        if c == '[' && !q && chars.get(i + 1).map(|x| x.0) == Some(':') {
            let rest: String = chars[i + 2..].iter().map(|x| x.0).collect();
            if let Some(end) = rest.find(":]") {
                items.push(Item::Named(rest[..end].to_string()));
                i += 2 + end + 2;
                continue;
            }
        }
        if i + 2 < chars.len() && chars[i + 1] == ('-', false) && chars[i + 2].0 != ']' {
            items.push(Item::Range(c, chars[i + 2].0));
            i += 3;
            continue;
        }
        items.push(Item::Char(c));
        i += 1;
    }
    None
}

fn in_class(items: &[Item], c: char) -> bool {
    items.iter().any(|it| match it {
        Item::Char(x) => *x == c,
        Item::Range(a, b) => *a <= c && c <= *b,
        Item::Named(n) => match n.as_str() {
            "alpha" => c.is_alphabetic(),
            "digit" => c.is_ascii_digit(),
            "alnum" => c.is_alphanumeric(),
            "upper" => c.is_uppercase(),
            "lower" => c.is_lowercase(),
            "space" => c.is_whitespace(),
            "blank" => c == ' ' || c == '\t',
            "punct" => c.is_ascii_punctuation(),
            "xdigit" => c.is_ascii_hexdigit(),
            "cntrl" => c.is_control(),
            "print" => !c.is_control(),
            "graph" => !c.is_control() && c != ' ',
            _ => false,
        },
    })
}

fn one(t: &Tok, c: char) -> bool {
    match t {
        Tok::Lit(x) => *x == c,
        Tok::Any => true,
        Tok::Class { negated, items } => in_class(items, c) != *negated,
        Tok::Star => false,
    }
}

fn matches_chars(p: &[Tok], t: &[char]) -> bool {
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == Tok::Star {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && one(&p[pi], t[ti]) {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == Tok::Star {
        pi += 1;
    }
    pi == p.len()
}
