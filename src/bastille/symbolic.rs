//! Keeping ARGs as ARGs in the translation.
//!
//! Bastille replaces `${NAME}` in the text of a line before it splits the
//! line into words; a Jailfile keeps `${NAME}` and its parser replaces it.
//! For the printed Jailfile to take `--build-arg`, each `${NAME}` of a
//! declared ARG is first replaced by a placeholder (the name between two
//! private-use characters), which travels through the splitting and the
//! translation as part of a word. A word holding placeholders is written in
//! double quotes with `${NAME}` in place, where the Jailfile parser
//! substitutes it.
//!
//! The translator checks each line before writing it that way: the words
//! with the placeholders replaced by the ARG values must be the words
//! Bastille's own substitution gives (they are not when, say, a value with
//! blanks is split by Bastille into several words). Where they differ, the
//! line is written with the values, as Bastille would run it.
//!
//! CMD is different: its text is a `/bin/sh -c` script, which the Jailfile
//! does not substitute. The ARGs are in the environment of the step, so
//! `${NAME}` is left for the shell to expand, where the shell gives the
//! same text Bastille's substitution would (see [`script`]).

const OPEN: char = '\u{E000}';
const CLOSE: char = '\u{E001}';
/// Closes the placeholder of a required ARG given no value yet.
const CLOSE_REQUIRED: char = '\u{E002}';

/// The placeholder standing for `${name}`.
pub fn placeholder(name: &str, required: bool) -> String {
    let close = if required { CLOSE_REQUIRED } else { CLOSE };
    format!("{OPEN}{name}{close}")
}

/// Whether `s` holds a placeholder.
pub fn has(s: &str) -> bool {
    s.contains(OPEN)
}

/// The Jailfile (and sh) reference for an ARG: a required one with no
/// value fails the build with a message saying how to give it.
fn reference(name: &str, required: bool) -> String {
    if required {
        format!("${{{name}:?is a required ARG: give --build-arg {name}=VALUE}}")
    } else {
        format!("${{{name}}}")
    }
}

/// The pieces of `s`: literal text, and placeholders.
fn pieces(s: &str) -> Vec<Piece<'_>> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(at) = rest.find(OPEN) {
        out.push(Piece::Text(&rest[..at]));
        let after = &rest[at + OPEN.len_utf8()..];
        match after.find([CLOSE, CLOSE_REQUIRED]) {
            Some(end) => {
                let required = after[end..].starts_with(CLOSE_REQUIRED);
                out.push(Piece::Arg(&after[..end], required));
                rest = &after[end + CLOSE.len_utf8()..];
            }
            None => {
                out.push(Piece::Text(after));
                rest = "";
            }
        }
    }
    out.push(Piece::Text(rest));
    out
}

enum Piece<'a> {
    Text(&'a str),
    Arg(&'a str, bool),
}

/// `s` with each placeholder replaced by `value(name)` (a name it does not
/// know: `${name}`, as written).
pub fn resolve(s: &str, value: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    for p in pieces(s) {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Arg(n, _) => out.push_str(&value(n).unwrap_or_else(|| format!("${{{n}}}"))),
        }
    }
    out
}

/// A word holding placeholders as Jailfile text: `${NAME}` for each
/// placeholder, bare when the rest is plainly safe (as an unquoted
/// `${NAME}` in a Bastillefile), else in double quotes with `"`, `$` and
/// `\` escaped.
pub fn word(s: &str) -> String {
    let plain = !s.starts_with('-')
        && pieces(s).iter().all(|p| match p {
            Piece::Text(t) => t
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_./:@%+,=-".contains(c)),
            Piece::Arg(_, required) => !required,
        });
    if plain {
        return bare(s);
    }
    let mut out = String::from("\"");
    for p in pieces(s) {
        match p {
            Piece::Text(t) => {
                for c in t.chars() {
                    if matches!(c, '"' | '$' | '\\') {
                        out.push('\\');
                    }
                    out.push(c);
                }
            }
            Piece::Arg(n, r) => out.push_str(&reference(n, r)),
        }
    }
    out.push('"');
    out
}

/// Placeholders in text written as it is (outside [`word`]s)
/// become bare references.
pub fn bare(s: &str) -> String {
    if !has(s) {
        return s.to_string();
    }
    let mut out = String::new();
    for p in pieces(s) {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Arg(n, r) => out.push_str(&reference(n, r)),
        }
    }
    out
}

/// What the script of a CMD line knows about one ARG.
pub struct ScriptArg {
    /// As Bastille substitutes it (quotes as written in the default).
    pub raw: String,
    /// The Jailfile's ARG of that name has the value Bastille substitutes
    /// here, so the step's environment holds it.
    pub in_env: bool,
    /// Declared with ARG+.
    pub required: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Quote {
    None,
    Single,
    Double,
}

/// The script of a CMD line with `${NAME}` of a known ARG left for the
/// shell, which expands it from the step's environment: as written outside
/// single quotes, and as `'"${NAME}"'` (closing the quotes around it) inside
/// them, where Bastille's text substitution reaches and sh's would not. The
/// choice does not depend on the value, so the script is the same whatever
/// `--build-arg` gives; a value with blanks or quotes is one shell word
/// inside quotes where Bastille would re-read it as text. After a
/// backslash, or for an ARG the environment does not hold, the text is
/// written in, as Bastille does.
pub fn script(text: &str, arg: &dyn Fn(&str) -> Option<ScriptArg>) -> String {
    let mut out = String::new();
    let mut q = Quote::None;
    let mut escaped = false;
    let mut rest = text;
    // Tracks sh quoting over the text as it will be, inserted values included.
    let feed = |out: &mut String, s: &str, q: &mut Quote, escaped: &mut bool| {
        for c in s.chars() {
            out.push(c);
            if *escaped {
                *escaped = false;
                continue;
            }
            match (*q, c) {
                (Quote::None, '\'') => *q = Quote::Single,
                (Quote::Single, '\'') => *q = Quote::None,
                (Quote::None, '"') => *q = Quote::Double,
                (Quote::Double, '"') => *q = Quote::None,
                (Quote::None | Quote::Double, '\\') => *escaped = true,
                _ => {}
            }
        }
    };
    while let Some(at) = rest.find("${") {
        feed(&mut out, &rest[..at], &mut q, &mut escaped);
        let after = &rest[at + 2..];
        let found = after
            .find('}')
            .filter(|end| super::source::is_name(&after[..*end]))
            .and_then(|end| arg(&after[..end]).map(|a| (end, a)));
        let Some((end, a)) = found else {
            feed(&mut out, "${", &mut q, &mut escaped);
            rest = after;
            continue;
        };
        let reference = reference(&after[..end], a.required);
        match q {
            _ if escaped || !a.in_env => feed(&mut out, &a.raw, &mut q, &mut escaped),
            Quote::Single => out.push_str(&format!("'\"{reference}\"'")),
            Quote::None | Quote::Double => out.push_str(&reference),
        }
        rest = &after[end + 1..];
    }
    feed(&mut out, rest, &mut q, &mut escaped);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_double_quoted_references() {
        let w = format!("-c /etc/{}.conf \"$x\\", placeholder("DOMAIN", false));
        assert_eq!(word(&w), "\"-c /etc/${DOMAIN}.conf \\\"\\$x\\\\\"");
        let p = placeholder("PORT", false);
        assert_eq!(word(&format!("0.0.0.0:{p}")), "0.0.0.0:${PORT}");
        assert_eq!(word(&format!("-{p}")), "\"-${PORT}\"");
        let r = placeholder("PW", true);
        assert_eq!(
            bare(&format!("a={r}")),
            "a=${PW:?is a required ARG: give --build-arg PW=VALUE}"
        );
        let v = |n: &str| (n == "DOMAIN").then(|| "example.org".to_string());
        assert_eq!(resolve(&w, &v), "-c /etc/example.org.conf \"$x\\");
    }

    #[test]
    fn a_script_leaves_references_to_the_shell_whatever_the_value() {
        let arg = |n: &str| {
            let a = |raw: &str, in_env, required| {
                Some(ScriptArg {
                    raw: raw.into(),
                    in_env,
                    required,
                })
            };
            match n {
                "D" => a("\"example.org\"", true, false),
                "S" => a("a b", true, false),
                "P" => a("${P}", true, true),
                "O" => a("other", false, false),
                _ => None,
            }
        };
        assert_eq!(
            script(
                "echo ${D} \"x${D}\" 'y${D}z' ${S} ${O} ${P} ${HOME} \\${D}",
                &arg
            ),
            "echo ${D} \"x${D}\" 'y'\"${D}\"'z' ${S} other \
             ${P:?is a required ARG: give --build-arg P=VALUE} ${HOME} \\\"example.org\""
        );
    }
}
