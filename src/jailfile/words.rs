//! Words of an instruction's arguments: split at whitespace outside quotes,
//! escapes and `${...}`, and `=` found the same way.

use super::diagnostic::Error;
use super::text::{Pos, Span, Text};

/// Splits at whitespace outside quotes, escapes and `${...}`, keeping the
/// quotes in the words (substitution removes them later). An unterminated
/// quote is an error pointing at the opening quote.
pub(crate) fn split_words(text: &Text, escape: char) -> Result<Vec<Text>, Error> {
    Ok(word_ranges(text, escape)?
        .into_iter()
        .map(|(a, b)| text.slice(a, b))
        .collect())
}

/// Like [`split_words`], as character index ranges into `text`.
pub(crate) fn word_ranges(text: &Text, escape: char) -> Result<Vec<(usize, usize)>, Error> {
    let mut words = Vec::new();
    let mut start: Option<usize> = None;
    let mut quote: Option<(char, Pos)> = None;
    let mut braces = 0usize;
    let mut i = 0;
    while let Some(&(c, pos)) = text.chars.get(i) {
        if quote.is_none() && braces == 0 && c.is_whitespace() {
            if let Some(s) = start.take() {
                words.push((s, i));
            }
            i += 1;
            continue;
        }
        start.get_or_insert(i);
        match quote {
            Some(('\'', _)) if c == '\'' => quote = None,
            Some(('\'', _)) => {}
            _ if c == escape => i += 1,
            Some((q, _)) if c == q => quote = None,
            None if c == '\'' || c == '"' => quote = Some((c, pos)),
            _ if c == '$' && text.char_at(i + 1) == Some('{') => {
                braces += 1;
                i += 1;
            }
            _ if c == '}' && braces > 0 => braces -= 1,
            _ => {}
        }
        i += 1;
    }
    if let Some((q, pos)) = quote {
        return Err(Error::new(
            Span::at(pos),
            format!("unterminated quote: this `{q}` is never closed"),
        )
        .with_help(format!(
            "close it with a matching `{q}`, or escape it as `{escape}{q}`"
        )));
    }
    if let Some(s) = start {
        words.push((s, text.len().min(i)));
    }
    Ok(words)
}

/// The index of the first `=` outside quotes, escapes and `${...}`.
pub(crate) fn find_unquoted(text: &Text, target: char, escape: char) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut braces = 0usize;
    let mut i = 0;
    while let Some(c) = text.char_at(i) {
        match quote {
            Some('\'') if c == '\'' => quote = None,
            Some('\'') => {}
            _ if c == escape => i += 1,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '$' && text.char_at(i + 1) == Some('{') => {
                braces += 1;
                i += 1;
            }
            None if c == '}' && braces > 0 => braces -= 1,
            None if c == target && braces == 0 => return Some(i),
            None => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Text {
        Text::line_one(s)
    }

    #[test]
    fn words_respect_quotes_and_braces() {
        let t = text(r#"a "b c" ${X:-d e} f\ g 'h"'"#);
        let w: Vec<String> = split_words(&t, '\\')
            .unwrap()
            .iter()
            .map(Text::as_string)
            .collect();
        assert_eq!(w, ["a", "\"b c\"", "${X:-d e}", "f\\ g", "'h\"'"]);
    }

    #[test]
    fn unterminated_quote_points_at_it() {
        let e = split_words(&text("a \"b c"), '\\').unwrap_err();
        assert_eq!(e.span.pos.col, 3);
    }

    #[test]
    fn find_unquoted_skips_quotes() {
        assert_eq!(find_unquoted(&text("\"a=b\"=c"), '=', '\\'), Some(5));
    }
}
