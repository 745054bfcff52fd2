//! Whether a package is for the ABI being installed, as pkg decides it
//! (`is_valid_abi` in pkg's `libpkg/utils.c`): the package's ABI is a
//! prefix of the target's, or a glob matching it, both without regard to
//! case. So `FreeBSD:14:amd64`, `FreeBSD:14:*`, `FreeBSD:*` and
//! `freebsd:14` all install on `FreeBSD:14:amd64`; `FreeBSD:14:aarch64`
//! and `FreeBSD:15:amd64` do not.

/// Whether a package whose manifest says `pkg_abi` installs on `abi`.
pub fn installs_on(pkg_abi: &str, abi: &str) -> bool {
    let (p, a) = (pkg_abi.to_ascii_lowercase(), abi.to_ascii_lowercase());
    a.starts_with(&p) || glob(p.as_bytes(), a.as_bytes())
}

/// fnmatch(3) without flags for `*`, `?` and plain bytes (pkg's ABIs use
/// no brackets); iterative, with one backtrack point.
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
            }
            Some(&c) if c == b'?' || c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    p = sp + 1;
                    t = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::installs_on;

    #[test]
    fn prefixes_and_globs_match_without_case_as_pkg_does() {
        let abi = "FreeBSD:14:amd64";
        for ok in [
            "FreeBSD:14:amd64",
            "freebsd:14:AMD64",
            "FreeBSD:14:*",
            "FreeBSD:*",
            "FreeBSD",
            "FreeBSD:14",
            "*",
            "FreeBSD:1?:amd64",
        ] {
            assert!(installs_on(ok, abi), "{ok}");
        }
        for no in [
            "FreeBSD:14:aarch64",
            "FreeBSD:15:amd64",
            "FreeBSD:13:*",
            "Linux:*",
            "FreeBSD:14:amd64:extra",
            "freebsd:14:x86:64",
        ] {
            assert!(!installs_on(no, abi), "{no}");
        }
    }
}
