//! A jail.conf(5) reader written from the manual page, for checking the
//! files jbuild writes. It shares nothing with `src/jailconf.rs` on
//! purpose: a quoting mistake there would be read back the same wrong way
//! by its own parser.
//!
//! What jail.conf(5) says, and this reader follows: a file is parameter
//! statements and jail definitions `name { statements }`. A statement is
//! `param;` (a boolean set true), `param = value;`, `param = v1, v2;` or
//! `param += value;` (appended to the list). Comments are `#` and `//` to
//! the end of the line, and `/* ... */`. A value is a token (characters
//! other than whitespace and `{};,=`), a single-quoted string (literal),
//! or a double-quoted string, in which a backslash quotes the next
//! character (`\n` and `\t` are C escapes) and `$name`/`${name}` are
//! variable references. jbuild never writes a variable, so an unquoted `$`
//! is an error here. Adjacent pieces without space between them join.

/// One statement: `(name, values)`; `values` is `None` for `name;`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stmt {
    pub name: String,
    pub append: bool,
    pub values: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub name: String,
    pub stmts: Vec<Stmt>,
}

impl Block {
    /// The value list of `param` after every `=` and `+=` in order.
    pub fn values(&self, param: &str) -> Vec<String> {
        let mut out = Vec::new();
        for s in self.stmts.iter().filter(|s| s.name == param) {
            if !s.append {
                out.clear();
            }
            out.extend(s.values.clone().unwrap_or_default());
        }
        out
    }

    /// The one value of `param`; panics when it has none or several.
    pub fn value(&self, param: &str) -> String {
        match self.values(param).as_slice() {
            [v] => v.clone(),
            other => panic!("jail {}: `{param}` has {other:?}", self.name),
        }
    }

    /// Whether `param;` (a boolean without a value) is set.
    pub fn flag(&self, param: &str) -> bool {
        self.stmts
            .iter()
            .any(|s| s.name == param && s.values.is_none())
    }
}

#[derive(Debug, Default)]
pub struct Conf {
    pub globals: Vec<Stmt>,
    pub jails: Vec<Block>,
}

impl Conf {
    /// The definition of jail `name`; panics unless there is exactly one.
    pub fn jail(&self, name: &str) -> &Block {
        let found: Vec<&Block> = self.jails.iter().filter(|j| j.name == name).collect();
        assert_eq!(
            found.len(),
            1,
            "jail `{name}` defined {} times",
            found.len()
        );
        found[0]
    }
}

#[derive(Debug, PartialEq)]
enum Tok {
    Word(String),
    Punct(&'static str),
}

fn tokens(text: &str) -> Result<Vec<Tok>, String> {
    let c: Vec<char> = text.chars().collect();
    let (mut i, mut out) = (0, Vec::new());
    while i < c.len() {
        let rest: String = c[i..c.len().min(i + 2)].iter().collect();
        if c[i].is_whitespace() {
            i += 1;
        } else if c[i] == '#' || rest == "//" {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if rest == "/*" {
            let end = (i + 2..c.len().saturating_sub(1)).find(|&k| c[k] == '*' && c[k + 1] == '/');
            i = end.ok_or("a /* comment is never closed")? + 2;
        } else if rest == "+=" {
            out.push(Tok::Punct("+="));
            i += 2;
        } else if let Some(p) = ["{", "}", ";", ",", "="]
            .into_iter()
            .find(|p| p.starts_with(c[i]))
        {
            out.push(Tok::Punct(p));
            i += 1;
        } else {
            let mut word = String::new();
            while i < c.len() && !c[i].is_whitespace() && !"{};,=".contains(c[i]) {
                match c[i] {
                    '\'' => {
                        let end = (i + 1..c.len())
                            .find(|&k| c[k] == '\'')
                            .ok_or("an unclosed '")?;
                        word.extend(&c[i + 1..end]);
                        i = end + 1;
                    }
                    '"' => {
                        i += 1;
                        while i < c.len() && c[i] != '"' {
                            match c[i] {
                                '\\' if i + 1 < c.len() => {
                                    i += 1;
                                    word.push(match c[i] {
                                        'n' => '\n',
                                        't' => '\t',
                                        other => other,
                                    });
                                }
                                '$' => return Err(format!("a variable reference in {word:?}…")),
                                ch => word.push(ch),
                            }
                            i += 1;
                        }
                        if i == c.len() {
                            return Err("an unclosed \"".into());
                        }
                        i += 1;
                    }
                    '\\' if i + 1 < c.len() => {
                        word.push(c[i + 1]);
                        i += 2;
                    }
                    '$' => return Err(format!("a variable reference after {word:?}")),
                    ch => {
                        word.push(ch);
                        i += 1;
                    }
                }
            }
            out.push(Tok::Word(word));
        }
    }
    Ok(out)
}

/// Reads `text` as jail.conf(5), or says what is wrong with it.
pub fn read(text: &str) -> Result<Conf, String> {
    let toks = tokens(text)?;
    let mut conf = Conf::default();
    let mut block: Option<Block> = None;
    let mut i = 0;
    let word = |i: usize| match toks.get(i) {
        Some(Tok::Word(w)) => Ok(w.clone()),
        other => Err(format!("expected a name or value, found {other:?}")),
    };
    while i < toks.len() {
        if toks[i] == Tok::Punct("}") {
            conf.jails.push(block.take().ok_or("a `}` closes no jail")?);
            i += 1;
            continue;
        }
        let name = word(i)?;
        i += 1;
        let stmt = match toks.get(i) {
            Some(Tok::Punct("{")) if block.is_none() => {
                block = Some(Block {
                    name,
                    stmts: Vec::new(),
                });
                i += 1;
                continue;
            }
            Some(Tok::Punct(";")) => Stmt {
                name,
                append: false,
                values: None,
            },
            Some(Tok::Punct(op @ ("=" | "+="))) => {
                let mut values = vec![word(i + 1)?];
                i += 2;
                while toks.get(i) == Some(&Tok::Punct(",")) {
                    values.push(word(i + 1)?);
                    i += 2;
                }
                Stmt {
                    name,
                    append: *op == "+=",
                    values: Some(values),
                }
            }
            other => return Err(format!("`{name}` is followed by {other:?}")),
        };
        if toks.get(i) != Some(&Tok::Punct(";")) {
            return Err(format!("`{}` does not end with `;`", stmt.name));
        }
        i += 1;
        match &mut block {
            Some(b) => b.stmts.push(stmt),
            None => conf.globals.push(stmt),
        }
    }
    match block {
        Some(b) => Err(format!("jail `{}` is never closed", b.name)),
        None => Ok(conf),
    }
}
