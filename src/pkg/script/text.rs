//! The small text utilities package scripts pipe through, with their
//! FreeBSD options: `grep [-qvcxwiFEs] [-e] pattern [file…]` (basic or
//! extended regular expressions through the `regex` crate, translated
//! from POSIX syntax; `-w` is a word boundary at each end), `cat`,
//! `basename`, `dirname`, `head [-n N]`, `tr [-d] set1 [set2]` (ranges
//! and `[:class:]`), `wc [-lwc]`. Files they read are inside the root.

use std::io::Read;

use super::path;
use super::shell::{Shell, Streams, R};

const TEXT: &[&str] = &[
    "grep", "egrep", "fgrep", "cat", "basename", "dirname", "head", "tr", "wc",
];

pub(crate) fn is_text(name: &str) -> bool {
    TEXT.contains(&name)
}

fn err(s: &mut Streams, m: String) {
    s.err.extend_from_slice(m.as_bytes());
    s.err.push(b'\n');
}

impl Shell<'_> {
    pub(crate) fn text(&mut self, name: &str, args: &[String], s: &mut Streams) -> R<i32> {
        match name {
            "basename" => {
                let Some(p) = args.first() else {
                    err(s, "usage: basename string [suffix]".into());
                    return Ok(1);
                };
                let t = p.trim_end_matches('/');
                let mut b = if t.is_empty() && !p.is_empty() {
                    "/".to_string()
                } else {
                    t.rsplit('/').next().unwrap_or("").to_string()
                };
                if let Some(suf) = args.get(1) {
                    if b.len() > suf.len() && b.ends_with(suf.as_str()) {
                        b.truncate(b.len() - suf.len());
                    }
                }
                s.out.extend_from_slice(format!("{b}\n").as_bytes());
                Ok(0)
            }
            "dirname" => {
                let Some(p) = args.first() else {
                    err(s, "usage: dirname string".into());
                    return Ok(1);
                };
                s.out
                    .extend_from_slice(format!("{}\n", dirname(p)).as_bytes());
                Ok(0)
            }
            "cat" => {
                let files: Vec<&String> = args
                    .iter()
                    .filter(|a| !a.starts_with('-') || *a == "-")
                    .collect();
                let mut status = 0;
                if files.is_empty() {
                    let rest = s.rest().to_vec();
                    s.pos = s.input.len();
                    s.out.extend_from_slice(&rest);
                }
                for f in files {
                    match self.input_of(f, s)? {
                        Some(bytes) => s.out.extend_from_slice(&bytes),
                        None => status = 1,
                    }
                }
                Ok(status)
            }
            "head" => {
                let mut n = 10usize;
                let mut files = Vec::new();
                let mut i = 0;
                while i < args.len() {
                    let a = &args[i];
                    if a == "-n" {
                        i += 1;
                        n = args.get(i).and_then(|v| v.parse().ok()).unwrap_or(10);
                    } else if let Some(v) = a.strip_prefix("-n") {
                        n = v.parse().unwrap_or(10);
                    } else if let Some(v) =
                        a.strip_prefix('-').filter(|v| v.parse::<usize>().is_ok())
                    {
                        n = v.parse().unwrap_or(10);
                    } else {
                        files.push(a.clone());
                    }
                    i += 1;
                }
                let data = self.inputs(&files, s)?;
                let mut out = Vec::new();
                for (k, line) in data.split_inclusive(|b| *b == b'\n').enumerate() {
                    if k >= n {
                        break;
                    }
                    out.extend_from_slice(line);
                }
                s.out.extend_from_slice(&out);
                Ok(0)
            }
            "wc" => {
                let flags: String = args.iter().filter_map(|a| a.strip_prefix('-')).collect();
                let files: Vec<String> = args
                    .iter()
                    .filter(|a| !a.starts_with('-'))
                    .cloned()
                    .collect();
                let data = self.inputs(&files, s)?;
                let lines = data.iter().filter(|b| **b == b'\n').count();
                let words = String::from_utf8_lossy(&data).split_whitespace().count();
                let mut parts = Vec::new();
                let all = flags.is_empty();
                if all || flags.contains('l') {
                    parts.push(format!("{lines:8}"));
                }
                if all || flags.contains('w') {
                    parts.push(format!("{words:8}"));
                }
                if all || flags.contains('c') {
                    parts.push(format!("{:8}", data.len()));
                }
                s.out
                    .extend_from_slice(format!("{}\n", parts.join("")).as_bytes());
                Ok(0)
            }
            "tr" => self.tr(args, s),
            _ => self.grep(name, args, s),
        }
    }

    /// A file's bytes (`-` the input), or `None` after the utility's
    /// message.
    fn input_of(&mut self, f: &str, s: &mut Streams) -> R<Option<Vec<u8>>> {
        if f == "-" {
            let rest = s.rest().to_vec();
            s.pos = s.input.len();
            return Ok(Some(rest));
        }
        let read = path::host(&self.root, &self.state.cwd, f, true).and_then(|h| {
            let mut v = Vec::new();
            std::fs::File::open(h)?
                .take(self.limits.output_bytes as u64 + 1)
                .read_to_end(&mut v)
                .map(|_| v)
        });
        match read {
            Ok(v) if v.len() > self.limits.output_bytes => {
                Err(self.limit(format!("{} bytes of input", self.limits.output_bytes)))
            }
            Ok(v) => Ok(Some(v)),
            Err(e) => {
                err(s, format!("{f}: {}", path::strerror(&e)));
                Ok(None)
            }
        }
    }

    fn inputs(&mut self, files: &[String], s: &mut Streams) -> R<Vec<u8>> {
        if files.is_empty() {
            let rest = s.rest().to_vec();
            s.pos = s.input.len();
            return Ok(rest);
        }
        let mut all = Vec::new();
        for f in files {
            if let Some(b) = self.input_of(f, s)? {
                all.extend(b);
            }
        }
        Ok(all)
    }

    fn grep(&mut self, name: &str, args: &[String], s: &mut Streams) -> R<i32> {
        let (mut quiet, mut invert, mut count, mut line_x, mut word, mut icase, mut silent) =
            (false, false, false, false, false, false, false);
        let mut fixed = name == "fgrep";
        let mut extended = name == "egrep";
        let mut patterns: Vec<String> = Vec::new();
        let mut operands = Vec::new();
        let mut i = 0;
        let mut opts_done = false;
        while i < args.len() {
            let a = &args[i];
            i += 1;
            if opts_done || !a.starts_with('-') || a == "-" {
                operands.push(a.clone());
                continue;
            }
            if a == "--" {
                opts_done = true;
                continue;
            }
            if a == "-e" {
                if let Some(p) = args.get(i) {
                    patterns.push(p.clone());
                }
                i += 1;
                continue;
            }
            for c in a[1..].chars() {
                match c {
                    'q' => quiet = true,
                    'v' => invert = true,
                    'c' => count = true,
                    'x' => line_x = true,
                    'w' => word = true,
                    'i' => icase = true,
                    'F' => fixed = true,
                    'E' => extended = true,
                    'G' => extended = false,
                    's' => silent = true,
                    _ => {
                        err(s, format!("grep: invalid option -- {c}"));
                        return Ok(2);
                    }
                }
            }
        }
        if patterns.is_empty() {
            if operands.is_empty() {
                err(
                    s,
                    "usage: grep [-cEFiqsvwx] [-e pattern] [pattern] [file ...]".into(),
                );
                return Ok(2);
            }
            patterns.push(operands.remove(0));
        }
        let mut alts = Vec::new();
        for p in patterns.iter().flat_map(|p| p.split('\n')) {
            let body = if fixed {
                regex::escape(p)
            } else if extended {
                p.to_string()
            } else {
                basic_to_regex(p)
            };
            alts.push(format!("(?:{body})"));
        }
        let mut re = alts.join("|");
        if word {
            re = format!(r"\b(?:{re})\b");
        }
        if line_x {
            re = format!("^(?:{re})$");
        }
        if icase {
            re = format!("(?i){re}");
        }
        let re = match regex::RegexBuilder::new(&re).size_limit(1 << 20).build() {
            Ok(r) => r,
            Err(_) => {
                err(
                    s,
                    format!("grep: {}: invalid regular expression", patterns.join(" ")),
                );
                return Ok(2);
            }
        };
        let files = if operands.is_empty() {
            vec!["-".to_string()]
        } else {
            operands
        };
        let many = files.len() > 1;
        let mut matched = 0usize;
        let mut trouble = false;
        for f in &files {
            let data = match self.input_of(f, s)? {
                Some(d) => d,
                None => {
                    if silent {
                        s.err.clear();
                    }
                    trouble = true;
                    continue;
                }
            };
            let text = String::from_utf8_lossy(&data);
            let mut n = 0;
            for line in text.lines() {
                if re.is_match(line) != invert {
                    n += 1;
                    if !quiet && !count {
                        let prefix = if many { format!("{f}:") } else { String::new() };
                        s.out
                            .extend_from_slice(format!("{prefix}{line}\n").as_bytes());
                    }
                }
            }
            if count && !quiet {
                let prefix = if many { format!("{f}:") } else { String::new() };
                s.out.extend_from_slice(format!("{prefix}{n}\n").as_bytes());
            }
            matched += n;
            if quiet && matched > 0 {
                return Ok(0);
            }
        }
        Ok(if matched > 0 {
            0
        } else if trouble {
            2
        } else {
            1
        })
    }

    fn tr(&mut self, args: &[String], s: &mut Streams) -> R<i32> {
        let mut delete = false;
        let mut squeeze = false;
        let mut sets = Vec::new();
        for a in args {
            match a.as_str() {
                "-d" => delete = true,
                "-s" => squeeze = true,
                "-ds" | "-sd" => {
                    delete = true;
                    squeeze = true
                }
                o => sets.push(expand_set(o)),
            }
        }
        let input = String::from_utf8_lossy(s.rest()).into_owned();
        s.pos = s.input.len();
        let Some(from) = sets.first() else {
            err(s, "usage: tr [-ds] string1 [string2]".into());
            return Ok(1);
        };
        let to = sets.get(1);
        let mut out = String::new();
        let mut last: Option<char> = None;
        for c in input.chars() {
            let mapped = if let Some(k) = from.iter().position(|x| *x == c) {
                if delete {
                    continue;
                }
                match to {
                    Some(t) if !t.is_empty() => Some(t[k.min(t.len() - 1)]),
                    _ => Some(c),
                }
            } else {
                Some(c)
            };
            let Some(m) = mapped else { continue };
            let squeezable = squeeze && to.map_or(from.contains(&m), |t| t.contains(&m));
            if squeezable && last == Some(m) {
                continue;
            }
            last = Some(m);
            out.push(m);
        }
        s.out.extend_from_slice(out.as_bytes());
        Ok(0)
    }
}

fn dirname(p: &str) -> String {
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return if p.starts_with('/') {
            "/".into()
        } else {
            ".".into()
        };
    }
    match t.rfind('/') {
        None => ".".into(),
        Some(i) => {
            let d = t[..i].trim_end_matches('/');
            if d.is_empty() {
                "/".into()
            } else {
                d.to_string()
            }
        }
    }
}

/// tr's set: characters, `a-z` ranges, `[:upper:]`-style classes,
/// backslash escapes.
fn expand_set(s: &str) -> Vec<char> {
    let named = |n: &str| -> Option<Vec<char>> {
        let all = (0u8..=127).map(char::from);
        Some(match n {
            "upper" => all.filter(|c| c.is_ascii_uppercase()).collect(),
            "lower" => all.filter(|c| c.is_ascii_lowercase()).collect(),
            "digit" => all.filter(|c| c.is_ascii_digit()).collect(),
            "alpha" => all.filter(|c| c.is_ascii_alphabetic()).collect(),
            "alnum" => all.filter(|c| c.is_ascii_alphanumeric()).collect(),
            "space" => all.filter(|c| c.is_ascii_whitespace()).collect(),
            "punct" => all.filter(|c| c.is_ascii_punctuation()).collect(),
            _ => return None,
        })
    };
    let (text, _) = super::printf::escapes(s, false);
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '[' && chars.get(i + 1) == Some(&':') {
            let rest: String = chars[i + 2..].iter().collect();
            if let Some(end) = rest.find(":]") {
                if let Some(set) = named(&rest[..end]) {
                    out.extend(set);
                    i += 2 + rest[..end].chars().count() + 2;
                    continue;
                }
            }
        }
        if i + 2 < chars.len() && chars[i + 1] == '-' && chars[i] <= chars[i + 2] {
            out.extend(chars[i]..=chars[i + 2]);
            i += 3;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// A POSIX basic regular expression in the `regex` crate's syntax:
/// `\( \) \{ \} \|` are the operators, `( ) { } | + ?` literal.
fn basic_to_regex(p: &str) -> String {
    let mut out = String::new();
    let mut chars = p.chars().peekable();
    let mut at_start = true;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n @ ('(' | ')' | '{' | '}' | '|')) => out.push(n),
                Some(n) => {
                    out.push('\\');
                    out.push(n);
                }
                None => out.push_str("\\\\"),
            },
            '(' | ')' | '{' | '}' | '|' | '+' | '?' => {
                out.push('\\');
                out.push(c);
            }
            '*' if at_start => out.push_str("\\*"),
            c => out.push(c),
        }
        at_start = c == '^' && out.len() == 1;
    }
    out
}
