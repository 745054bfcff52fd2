//! jail.conf(5): writing one jail's entry, and reading a file back far
//! enough to find and replace that entry while keeping the rest (other
//! jails, comments, global parameters) byte for byte.
//!
//! The rules followed are jail.conf(5)'s: a jail is `name { param; ... }`;
//! a parameter is `name;` (a boolean), `name = value;`, `name += value;` or
//! `name = v1, v2;`. Comments are `#` and `//` to the end of the line and
//! `/* ... */`. A value is a bare word, a single-quoted string (taken
//! literally) or a double-quoted string, in which `$name`/`${name}` are
//! variables and backslash escapes apply. Written values therefore use
//! bare words when plain, single quotes otherwise, or double quotes with
//! `\`, `"` and `$` escaped when the value holds a single quote or a line
//! break.

use std::ops::Range;

/// One parameter statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub name: String,
    /// `None` for a boolean written without a value (`exec.clean;`).
    pub values: Option<Vec<String>>,
    pub append: bool,
}

/// One `name { ... }` block and where it is in the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jail {
    pub name: String,
    pub params: Vec<Param>,
    /// Bytes from the name to the closing brace.
    pub span: Range<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Conf {
    pub globals: Vec<Param>,
    pub jails: Vec<Jail>,
}

impl Jail {
    /// The first value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|p| p.name == name)
            .and_then(|p| p.values.as_ref()?.first().map(String::as_str))
    }
}

/// A value as jail.conf text: bare when it is a plain word (as Bastille
/// writes them, and its tools grep for `path = /x/root;`), else quoted.
pub fn quote(v: &str) -> String {
    let plain = !v.is_empty()
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:@%+-".contains(c));
    if plain {
        return v.to_string();
    }
    if !v.contains('\'') && !v.contains('\n') {
        return format!("'{v}'");
    }
    let mut out = String::from("\"");
    for c in v.chars() {
        match c {
            '\\' | '"' | '$' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Writes a jail entry; `comments` go first, inside the braces.
pub fn entry(name: &str, params: &[Param], comments: &[String]) -> String {
    let mut s = format!("{name} {{\n");
    for c in comments {
        for l in c.lines() {
            s.push_str(&format!("    # {l}\n"));
        }
    }
    for p in params {
        match &p.values {
            None => s.push_str(&format!("    {};\n", p.name)),
            Some(v) => {
                let vals: Vec<String> = v.iter().map(|x| quote(x)).collect();
                let op = if p.append { "+=" } else { "=" };
                s.push_str(&format!("    {} {op} {};\n", p.name, vals.join(", ")));
            }
        }
    }
    s.push_str("}\n");
    s
}

/// `text` with the jail `name`'s block replaced by `new_entry` (which ends
/// in a newline), or with it appended when there is none.
pub fn replace(text: &str, name: &str, new_entry: &str) -> Result<String, String> {
    let conf = parse(text)?;
    match conf.jails.iter().find(|j| j.name == name) {
        Some(j) => {
            let mut end = j.span.end;
            if text[end..].starts_with('\n') {
                end += 1;
            }
            Ok(format!(
                "{}{new_entry}{}",
                &text[..j.span.start],
                &text[end..]
            ))
        }
        None => {
            let mut out = text.to_string();
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(new_entry);
            Ok(out)
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Word(String),
    Open,
    Close,
    Semi,
    Eq,
    PlusEq,
    Comma,
}

fn lex(text: &str) -> Result<Vec<(Tok, usize, usize)>, String> {
    let b: Vec<char> = text.chars().collect();
    // Byte offset of each char index, for spans.
    let mut off = Vec::with_capacity(b.len() + 1);
    let mut o = 0;
    for c in &b {
        off.push(o);
        o += c.len_utf8();
    }
    off.push(o);
    let line_of = |i: usize| b[..i].iter().filter(|c| **c == '\n').count() + 1;
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_whitespace() {
            i += 1;
        } else if c == '#' || (c == '/' && b.get(i + 1) == Some(&'/')) {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && b.get(i + 1) == Some(&'*') {
            let start = i;
            i += 2;
            while i + 1 < b.len() && !(b[i] == '*' && b[i + 1] == '/') {
                i += 1;
            }
            if i + 1 >= b.len() {
                return Err(format!("line {}: comment never closed", line_of(start)));
            }
            i += 2;
        } else if let Some(t) = match c {
            '{' => Some(Tok::Open),
            '}' => Some(Tok::Close),
            ';' => Some(Tok::Semi),
            '=' => Some(Tok::Eq),
            ',' => Some(Tok::Comma),
            '+' if b.get(i + 1) == Some(&'=') => Some(Tok::PlusEq),
            _ => None,
        } {
            let n = if t == Tok::PlusEq { 2 } else { 1 };
            out.push((t, off[i], off[i + n]));
            i += n;
        } else {
            // A word: bare, quoted parts, joined when adjacent.
            let start = i;
            let mut w = String::new();
            while i < b.len() {
                let c = b[i];
                if c == '\'' {
                    let q = i;
                    i += 1;
                    while i < b.len() && b[i] != '\'' {
                        w.push(b[i]);
                        i += 1;
                    }
                    if i >= b.len() {
                        return Err(format!("line {}: quote never closed", line_of(q)));
                    }
                    i += 1;
                } else if c == '"' {
                    let q = i;
                    i += 1;
                    while i < b.len() && b[i] != '"' {
                        if b[i] == '\\' && i + 1 < b.len() {
                            i += 1;
                            w.push(match b[i] {
                                'n' => '\n',
                                't' => '\t',
                                other => other,
                            });
                        } else {
                            w.push(b[i]);
                        }
                        i += 1;
                    }
                    if i >= b.len() {
                        return Err(format!("line {}: quote never closed", line_of(q)));
                    }
                    i += 1;
                } else if c == '\\' && i + 1 < b.len() {
                    w.push(b[i + 1]);
                    i += 2;
                } else if c.is_whitespace()
                    || "{};=,#".contains(c)
                    || (c == '+' && b.get(i + 1) == Some(&'='))
                {
                    break;
                } else {
                    w.push(c);
                    i += 1;
                }
            }
            out.push((Tok::Word(w), off[start], off[i]));
        }
    }
    Ok(out)
}

/// Reads a jail.conf.
pub fn parse(text: &str) -> Result<Conf, String> {
    let toks = lex(text)?;
    let mut conf = Conf::default();
    let mut i = 0;
    let line = |at: usize| text[..at].matches('\n').count() + 1;
    while i < toks.len() {
        let (t, start, _) = &toks[i];
        let Tok::Word(name) = t else {
            return Err(format!(
                "line {}: expected a jail name or a parameter",
                line(*start)
            ));
        };
        if matches!(toks.get(i + 1), Some((Tok::Open, _, _))) {
            i += 2;
            let mut params = Vec::new();
            loop {
                match toks.get(i) {
                    Some((Tok::Close, _, end)) => {
                        conf.jails.push(Jail {
                            name: name.clone(),
                            params,
                            span: *start..*end,
                        });
                        i += 1;
                        break;
                    }
                    Some(_) => {
                        let (p, next) = param(&toks, i, &line)?;
                        params.push(p);
                        i = next;
                    }
                    None => {
                        return Err(format!(
                            "line {}: jail `{name}` is never closed with }}",
                            line(*start)
                        ))
                    }
                }
            }
        } else {
            let (p, next) = param(&toks, i, &line)?;
            conf.globals.push(p);
            i = next;
        }
    }
    Ok(conf)
}

fn param(
    toks: &[(Tok, usize, usize)],
    mut i: usize,
    line: &dyn Fn(usize) -> usize,
) -> Result<(Param, usize), String> {
    let (t, at, _) = &toks[i];
    let Tok::Word(name) = t else {
        return Err(format!("line {}: expected a parameter name", line(*at)));
    };
    i += 1;
    let append = match toks.get(i) {
        Some((Tok::Semi, _, _)) => {
            return Ok((
                Param {
                    name: name.clone(),
                    values: None,
                    append: false,
                },
                i + 1,
            ))
        }
        Some((Tok::Eq, _, _)) => false,
        Some((Tok::PlusEq, _, _)) => true,
        _ => {
            return Err(format!(
                "line {}: `{name}` needs `;` or `= value;`",
                line(*at)
            ))
        }
    };
    i += 1;
    let mut values = Vec::new();
    loop {
        match toks.get(i) {
            Some((Tok::Word(v), _, _)) => values.push(v.clone()),
            _ => return Err(format!("line {}: `{name}` needs a value", line(*at))),
        }
        i += 1;
        match toks.get(i) {
            Some((Tok::Comma, _, _)) => i += 1,
            Some((Tok::Semi, _, _)) => {
                return Ok((
                    Param {
                        name: name.clone(),
                        values: Some(values),
                        append,
                    },
                    i + 1,
                ))
            }
            _ => return Err(format!("line {}: `{name}`: missing `;`", line(*at))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(name: &str, v: &[&str]) -> Param {
        Param {
            name: name.into(),
            values: Some(v.iter().map(|s| s.to_string()).collect()),
            append: false,
        }
    }

    #[test]
    fn tricky_values_round_trip() {
        let values = [
            "/bin/sh /etc/rc",
            "it's",
            "say \"hi\" to $USER and ${HOME}",
            "back\\slash",
            "two\nlines",
            "",
            "{braces}; and = signs, commas",
            "/usr/local/bastille/jails/web/root",
            "a#b",
        ];
        let params: Vec<Param> = values
            .iter()
            .enumerate()
            .map(|(i, v)| p(&format!("x.p{i}"), &[v]))
            .collect();
        let text = entry("web", &params, &["from image x".into()]);
        assert!(
            text.contains("x.p7 = /usr/local/bastille/jails/web/root;"),
            "{text}"
        );
        let conf = parse(&text).unwrap();
        assert_eq!(conf.jails.len(), 1);
        for (i, v) in values.iter().enumerate() {
            assert_eq!(conf.jails[0].get(&format!("x.p{i}")), Some(*v), "{text}");
        }
    }

    #[test]
    fn reads_what_jail_conf_5_allows() {
        let text = "# global\nexec.clean;\npath = \"/j/$name\";\n/* block\n comment */\n\
                    web { ip4.addr = 10.0.0.1, 10.0.0.2; ip4.addr += 10.0.0.3; allow.nomount; // c\n host.hostname = web.lan; }\n\
                    db{path='/j/db';}";
        let c = parse(text).unwrap();
        assert_eq!(c.globals.len(), 2);
        assert_eq!(c.jails.len(), 2);
        let web = &c.jails[0];
        assert_eq!(web.params[0], p("ip4.addr", &["10.0.0.1", "10.0.0.2"]));
        assert!(web.params[1].append);
        assert_eq!(web.params[2].values, None);
        assert_eq!(web.get("host.hostname"), Some("web.lan"));
        assert_eq!(c.jails[1].get("path"), Some("/j/db"));
        assert!(parse("web { path = '/x; }").is_err());
        assert!(parse("web { path = /x }").is_err());
    }

    #[test]
    fn replace_keeps_everything_else() {
        let text = "# mine\nother { path = /o; }\nweb {\n  path = /old;\n}\n// tail\n";
        let new = entry("web", &[p("path", &["/new"])], &[]);
        let out = replace(text, "web", &new).unwrap();
        assert!(out.starts_with("# mine\nother { path = /o; }\n"), "{out}");
        assert!(out.ends_with("// tail\n"), "{out}");
        let c = parse(&out).unwrap();
        assert_eq!(c.jails[1].get("path"), Some("/new"));
        assert_eq!(c.jails.len(), 2);
        let appended = replace("other { path = /o; }", "web", &new).unwrap();
        assert_eq!(parse(&appended).unwrap().jails.len(), 2);
    }
}
