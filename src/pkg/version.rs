//! Package versions compared as pkg(8) compares them (`pkg_version_cmp`,
//! `libpkg/pkg_version.c`; the rules are those of the ports tree's
//! `pkg_version`), written here from those rules.
//!
//! A version is `PORTVERSION[_PORTREVISION][,PORTEPOCH]`: the epoch counts
//! first, then the port version component by component, then the
//! revision. A component is a number, a letter, a number (`10b2`):
//!
//! - missing components are 0 (`1 = 1.0`), and separators other than
//!   letters, digits, `+` and `*` are all dots (`1..0 = 1.0`);
//! - a component without a number sorts as -1 (`a < 0`, `1.a < 1`);
//! - letters sort by their first letter, without case (`1.dev2 = 1.d2`),
//!   after no letter (`1 < 1a`); `alpha`, `beta`, `pre`, `rc` count as
//!   `a`, `b`, `p`, `r`, `pl` before every letter, and a dot is assumed
//!   before each (`1alpha = 1.a < 1`);
//! - `*` is the smallest component (`2.* < 2pl1`), and `+` begins a
//!   block compared on its own.

use std::cmp::Ordering;

/// Compares two versions (or `name-version` strings) as pkg does.
pub fn cmp(a: &str, b: &str) -> Ordering {
    let (va, ea, ra) = split(a);
    let (vb, eb, rb) = split(b);
    ea.cmp(&eb)
        .then_with(|| {
            let (sa, sb) = (&va.text[..va.end], &vb.text[..vb.end]);
            if sa.eq_ignore_ascii_case(sb) {
                Ordering::Equal
            } else {
                components(&va, &vb)
            }
        })
        .then(ra.cmp(&rb))
}

/// The version part of a string and where its port version ends (the
/// revision and epoch follow, but the component reader may read on into
/// them, as pkg's does).
struct Version<'a> {
    text: &'a [u8],
    end: usize,
}

/// `(version, epoch, revision)`.
fn split(s: &str) -> (Version<'_>, u64, u64) {
    let text = match s.rfind('-') {
        Some(i) => &s[i + 1..],
        None => s,
    };
    let under = text.rfind('_');
    let revision = under.map_or(0, |i| leading_number(&text[i + 1..]));
    let comma = match under {
        Some(u) => text[u + 1..].rfind(',').map(|c| u + 1 + c),
        None => text.rfind(','),
    };
    let epoch = comma.map_or(0, |c| leading_number(&text[c + 1..]));
    let end = under.or(comma).unwrap_or(text.len());
    (
        Version {
            text: text.as_bytes(),
            end,
        },
        epoch,
        revision,
    )
}

fn leading_number(s: &str) -> u64 {
    let digits = s.bytes().take_while(u8::is_ascii_digit);
    digits.fold(0u64, |n, d| {
        n.saturating_mul(10).saturating_add((d - b'0') as u64)
    })
}

#[derive(Default, PartialEq, Eq, PartialOrd, Ord)]
struct Component {
    number: i64,
    letter: i32,
    patch: i64,
}

fn components(a: &Version<'_>, b: &Version<'_>) -> Ordering {
    let (mut pa, mut pb) = (0, 0);
    while pa < a.end || pb < b.end {
        let open_a = pa < a.end && a.text[pa] != b'+';
        let open_b = pb < b.end && b.text[pb] != b'+';
        if !open_a && !open_b {
            // Both at a `+` (or past the end): the next block.
            pa += usize::from(pa < a.end);
            pb += usize::from(pb < b.end);
            continue;
        }
        let ca = if open_a {
            component(a.text, &mut pa)
        } else {
            Component::default()
        };
        let cb = if open_b {
            component(b.text, &mut pb)
        } else {
            Component::default()
        };
        match ca.cmp(&cb) {
            Ordering::Equal => {}
            other => return other,
        }
    }
    Ordering::Equal
}

/// pkg's stage words: `pl` sorts first, the others as their first letter.
const STAGES: [(&[u8], i32); 5] = [
    (b"pl", 0),
    (b"alpha", 1),
    (b"beta", 2),
    (b"pre", 16),
    (b"rc", 18),
];

fn number(s: &[u8], at: &mut usize) -> i64 {
    let mut n: i64 = 0;
    while *at < s.len() && s[*at].is_ascii_digit() {
        n = n.saturating_mul(10).saturating_add((s[*at] - b'0') as i64);
        *at += 1;
    }
    n
}

/// Reads one component at `at` and the separators after it.
fn component(s: &[u8], at: &mut usize) -> Component {
    let alpha = |i: usize| s.get(i).is_some_and(u8::is_ascii_alphabetic);
    let mut c = Component::default();
    let mut no_number = false;
    if s[*at].is_ascii_digit() {
        c.number = number(s, at);
    } else if s[*at] == b'*' {
        c.number = -2;
        while *at < s.len() && s[*at] != b'+' {
            *at += 1;
        }
    } else {
        c.number = -1;
        no_number = true;
    }
    let mut has_patch = false;
    if alpha(*at) {
        has_patch = true;
        let mut letter = Some(s[*at].to_ascii_lowercase());
        if alpha(*at + 1) {
            for (word, value) in STAGES {
                let rest = &s[*at..];
                if rest.len() >= word.len()
                    && rest[..word.len()].eq_ignore_ascii_case(word)
                    && !alpha(*at + word.len())
                {
                    if no_number {
                        c.letter = value;
                        *at += word.len();
                    } else {
                        // A dot is assumed before the word: it is the
                        // next component's.
                        c.letter = 0;
                        has_patch = false;
                    }
                    letter = None;
                    break;
                }
            }
        }
        if let Some(l) = letter {
            c.letter = (l - b'a' + 1) as i32;
            while alpha(*at) {
                *at += 1;
            }
        }
    }
    if has_patch {
        c.patch = if s.get(*at).is_some_and(u8::is_ascii_digit) {
            number(s, at)
        } else {
            -1
        };
    }
    while *at < s.len() && !s[*at].is_ascii_alphanumeric() && s[*at] != b'+' && s[*at] != b'*' {
        *at += 1;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use Ordering::*;

    #[track_caller]
    fn check(a: &str, b: &str, want: Ordering) {
        assert_eq!(cmp(a, b), want, "{a} vs {b}");
        assert_eq!(cmp(b, a), want.reverse(), "{b} vs {a}");
    }

    /// The examples of pkg_version.c's own comments.
    #[test]
    fn pkgs_documented_orderings() {
        check("10", "10a", Less);
        check("10a", "10b", Less);
        check("a", "0", Less);
        check("10.a", "10", Less);
        check("10alpha", "10.a", Equal);
        check("10alpha", "10", Less);
        check("pl11", "alpha3", Less);
        check("alpha3", "0.1beta2", Less);
        check("0.1beta2", "0.1.b2", Equal);
        check("0.1beta2", "0.1", Less);
        check("1.d2", "1.dev2", Equal);
        check("1.dev2", "1.Development2", Equal);
        check("2.*", "2pl1", Less);
        check("2pl1", "2alpha3", Less);
        check("2alpha3", "2.9f7", Less);
        check("2.9f7", "3.*", Less);
        check("10", "10.0.0", Equal);
        check("10..1", "10.1", Equal);
        check("1.0.1:2003.09.16", "1.0:2003.09.16", Less);
    }

    #[test]
    fn epoch_then_version_then_revision() {
        check("1.0,1", "2.0", Greater);
        check("1.0_2", "1.0_1", Greater);
        check("1.0_9", "1.0.1", Less);
        check("nginx-1.26.2_4,3", "nginx-1.26.10,3", Less);
        check("1.2+3", "1.2+4", Less);
        check("1.2", "1.2+1", Less);
        check("5.36.0", "5.36.0", Equal);
        check("1.0rc1", "1.0", Less);
        check("1.0pre1", "1.0rc1", Less);
    }
}
