//! `mirror_type: http`: the repository's url serves a list of its mirrors,
//! which are tried in the order listed (pkg-repository(5), "REPOSITORY
//! MIRRORING"; pkg 2.x's `http_getmirrors` in `libpkg/fetch_libcurl.c`).
//!
//! What pkg does, and jbuild with it: the url (which must not be a `pkg+`
//! one: pkg refuses that pairing) is fetched once, at most 1 MiB; each
//! line (split at `\n` or `\r`) that starts with `URL:` gives, after any
//! blanks, one mirror; other lines are left out. A file's path below the
//! repository url is asked below each mirror in turn, the next mirror
//! asked when one fails. No mirror listed (or the list not fetched): the
//! url itself, as pkg falls back to it.
//!
//! Where jbuild differs: a mirror that is not `http://` or `https://` is
//! left out (a list fetched over the network does not send jbuild to a
//! `file://` path of the host), at most [`MAX_MIRRORS`] are kept, and,
//! as with SRV mirrors, the repository's packages come from the mirror
//! that served its catalogue.

use crate::transport::block_on;
use crate::transport::http::Http;

/// The most bytes of the list read (pkg's `CURLOPT_MAXFILESIZE_LARGE`).
pub const MAX_LIST: u64 = 1 << 20;
/// The most mirrors tried.
pub const MAX_MIRRORS: usize = 32;

/// The mirrors of a list's text, in its order (see the module docs).
pub fn parse(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.split(['\n', '\r']) {
        let Some(rest) = line.strip_prefix("URL:") else {
            continue;
        };
        let mirror = rest.trim_start().trim_end();
        if mirror.is_empty() {
            continue;
        }
        let Ok(parsed) = url::Url::parse(mirror) else {
            tracing::warn!("invalid mirror url `{mirror}`: left out");
            continue;
        };
        if !matches!(parsed.scheme(), "http" | "https") {
            tracing::warn!("mirror `{mirror}` is not http:// or https://: left out");
            continue;
        }
        let mirror = mirror.trim_end_matches('/').to_string();
        if !out.contains(&mirror) && out.len() < MAX_MIRRORS {
            out.push(mirror);
        }
    }
    out
}

/// The mirrors the list at `url` names; none when it cannot be fetched
/// or names none (the caller then asks `url` itself, as pkg does).
pub fn fetch(repo: &str, url: &str, http: &Http) -> Vec<String> {
    match block_on(http.get_bytes(url, MAX_LIST)) {
        Ok(bytes) => {
            let mirrors = parse(&String::from_utf8_lossy(&bytes));
            if mirrors.is_empty() {
                tracing::warn!(repo, url, "no HTTP mirrors listed: the url itself is asked");
            }
            mirrors
        }
        Err(e) => {
            tracing::warn!(
                repo,
                url,
                "the mirror list could not be fetched ({e}): the url itself is asked"
            );
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_lines_in_order_others_left_out() {
        let text = "# mirrors\r\nURL: http://a.example/pkg/\nURL:https://b.example/x\n\
                    url: http://c.example\nURL:   \nURL: file:///etc\nURL: http://a.example/pkg\n\
                    junk URL: http://d.example\n";
        assert_eq!(parse(text), ["http://a.example/pkg", "https://b.example/x"]);
    }
}
