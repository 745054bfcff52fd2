//! The three-way merge pkg tries on upgrade for a configuration file the
//! user changed (`AUTOMERGE`, `attempt_to_merge` in `libpkg/pkg_add.c`,
//! the line merge of `libpkg/merge3.c`): the changes from the old
//! version's content (the database's `config_files`) to the file in the
//! image, and from it to the new version's, applied together line by
//! line. Changes to different lines both apply; the same change on both
//! sides applies once; changes that start on the same line or overlap
//! otherwise are a conflict, and then there is no merge at all (pkg
//! writes the new version beside the file as `.pkgnew`). A text with a
//! NUL byte is not merged either.
//!
//! Written from that description; each side's changes are found with a
//! longest-common-subsequence diff of lines.

/// The most cells of the diff table before a merge is given up (the
/// lines both sides share at the start and the end are set aside first,
/// so only the changed middle counts).
pub const MAX_CELLS: usize = 16 << 20;

/// One change against the base: its lines `start..end` replaced by
/// `lines` (an insertion when `start == end`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hunk<'a> {
    start: usize,
    end: usize,
    lines: Vec<&'a [u8]>,
}

/// `base` changed as `mine` and as `theirs` changed it, or `None` when
/// the two conflict (or a text is binary, or too large to compare).
pub fn merge(base: &[u8], mine: &[u8], theirs: &[u8]) -> Option<Vec<u8>> {
    if [base, mine, theirs].iter().any(|t| t.contains(&0)) {
        return None;
    }
    let b = lines(base);
    let ours = hunks(&b, &lines(mine))?;
    let other = hunks(&b, &lines(theirs))?;
    let mut out = Vec::with_capacity(mine.len().max(theirs.len()));
    let (mut i, mut j, mut at) = (0, 0, 0);
    loop {
        let next = match (ours.get(i), other.get(j)) {
            (None, None) => break,
            (Some(a), None) => {
                i += 1;
                a
            }
            (None, Some(o)) => {
                j += 1;
                o
            }
            (Some(a), Some(o)) => {
                if a == o {
                    i += 1;
                    j += 1;
                    a
                } else if a.start == o.start || (a.start < o.end && o.start < a.end) {
                    return None;
                } else if a.start < o.start {
                    i += 1;
                    a
                } else {
                    j += 1;
                    o
                }
            }
        };
        for l in &b[at..next.start] {
            out.extend_from_slice(l);
        }
        for l in &next.lines {
            out.extend_from_slice(l);
        }
        at = next.end;
    }
    for l in &b[at..] {
        out.extend_from_slice(l);
    }
    Some(out)
}

/// The lines of `text`, each with its `\n` (the last may lack one).
fn lines(text: &[u8]) -> Vec<&[u8]> {
    text.split_inclusive(|&c| c == b'\n').collect()
}

/// The changes that make `new` of `base`, in order, or `None` when the
/// middle that differs is too large to compare.
fn hunks<'a>(base: &[&'a [u8]], new: &[&'a [u8]]) -> Option<Vec<Hunk<'a>>> {
    let head = base.iter().zip(new).take_while(|(a, b)| a == b).count();
    let tail = base[head..]
        .iter()
        .rev()
        .zip(new[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (b, n) = (&base[head..base.len() - tail], &new[head..new.len() - tail]);
    if (b.len() + 1).checked_mul(n.len() + 1)? > MAX_CELLS {
        return None;
    }
    // lcs[x][y]: the longest common subsequence of b[x..] and n[y..].
    let w = n.len() + 1;
    let mut lcs = vec![0u32; (b.len() + 1) * w];
    for x in (0..b.len()).rev() {
        for y in (0..n.len()).rev() {
            lcs[x * w + y] = if b[x] == n[y] {
                lcs[(x + 1) * w + y + 1] + 1
            } else {
                lcs[(x + 1) * w + y].max(lcs[x * w + y + 1])
            };
        }
    }
    let mut out = Vec::new();
    let (mut x, mut y) = (0, 0);
    let mut open: Option<Hunk<'a>> = None;
    while x < b.len() || y < n.len() {
        if x < b.len() && y < n.len() && b[x] == n[y] {
            out.extend(open.take());
            x += 1;
            y += 1;
            continue;
        }
        let h = open.get_or_insert(Hunk {
            start: head + x,
            end: head + x,
            lines: Vec::new(),
        });
        if y < n.len() && (x == b.len() || lcs[x * w + y + 1] >= lcs[(x + 1) * w + y]) {
            h.lines.push(n[y]);
            y += 1;
        } else {
            x += 1;
            h.end = head + x;
        }
    }
    out.extend(open);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::merge;

    fn m(base: &str, mine: &str, theirs: &str) -> Option<String> {
        merge(base.as_bytes(), mine.as_bytes(), theirs.as_bytes())
            .map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn changes_to_different_lines_both_apply() {
        let base = "one = 1\ntwo = 2\nthree = 3\n";
        assert_eq!(
            m(
                base,
                "one = mine\ntwo = 2\nthree = 3\n",
                "one = 1\ntwo = 2\nthree = 33\n"
            )
            .as_deref(),
            Some("one = mine\ntwo = 2\nthree = 33\n")
        );
        // Adjacent lines, an insertion, a deletion.
        assert_eq!(
            m(
                base,
                "one = 1\ntwo = mine\nthree = 3\n",
                "one = 1\ntwo = 2\nthree = 33\nfour = 4\n"
            )
            .as_deref(),
            Some("one = 1\ntwo = mine\nthree = 33\nfour = 4\n")
        );
        assert_eq!(
            m(
                base,
                "two = 2\nthree = 3\n",
                "one = 1\ntwo = 2\nthree = 3\nfour = 4"
            )
            .as_deref(),
            Some("two = 2\nthree = 3\nfour = 4")
        );
        // Nothing changed on one side: the other's text.
        assert_eq!(m(base, base, "x\n").as_deref(), Some("x\n"));
    }

    #[test]
    fn the_same_change_applies_once_and_others_conflict() {
        let base = "a\nb\nc\n";
        assert_eq!(
            m(base, "a\nB\nc\n", "a\nB\nc\n").as_deref(),
            Some("a\nB\nc\n")
        );
        assert_eq!(m(base, "a\nmine\nc\n", "a\ntheirs\nc\n"), None);
        // Two insertions at one place conflict, as in pkg.
        assert_eq!(m(base, "a\nb\nc\nx\n", "a\nb\nc\ny\n"), None);
        assert_eq!(m("a\0\n", "b\n", "a\0\n"), None);
    }
}
