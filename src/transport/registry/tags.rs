//! The tags of a repository (`GET /v2/<name>/tags/list`), page by page as
//! the distribution spec says: `?n=` asks for a page size, and a registry
//! with more to say answers with a `Link: <…?last=…&n=…>; rel="next"`
//! header, which is followed until there is none.
//!
//! Each page is read to at most [`MAX_DOCUMENT`]; a `Link` may only lead
//! to the same registry (credentials are sent with it), and a page that
//! leads back to one already read ends the listing with an error instead
//! of a loop.

use reqwest::StatusCode;

use super::{body, RegistryOperation, RegistryTransport};
use crate::image::MAX_DOCUMENT;
use crate::transport::TransportError;

/// Pages read at most: 100 000 tags at Distribution's default page size.
pub const MAX_PAGES: usize = 1000;

impl RegistryTransport {
    /// Every tag of the repository, in the registry's order (the spec's:
    /// lexical), following `Link` headers; `page_size` is sent as `?n=`.
    pub async fn list_tags(&self, page_size: Option<u32>) -> Result<Vec<String>, TransportError> {
        let c = self.conn().await?;
        let first = c.url("tags", "list");
        let mut next = match page_size {
            Some(n) => format!("{first}?n={n}"),
            None => first,
        };
        let invalid = |reason: String| TransportError::Invalid {
            location: self.location(),
            what: "the tag list".into(),
            reason,
        };
        let mut tags = Vec::new();
        let mut seen = Vec::new();
        for _ in 0..MAX_PAGES {
            let what = "list tags";
            let url = next.clone();
            let resp = c
                .send(RegistryOperation::Pull, what, |h| h.get(&url))
                .await?;
            match resp.status() {
                s if s.is_success() => {}
                StatusCode::NOT_FOUND => {
                    return Err(TransportError::NotFound {
                        location: self.location(),
                        reference: "(any tag)".into(),
                    })
                }
                _ => return Err(c.status_error(what, resp).await),
            }
            let link = resp
                .headers()
                .get_all(reqwest::header::LINK)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .find_map(next_link);
            let page = body::read_capped(resp, MAX_DOCUMENT as usize + 1)
                .await
                .map_err(|(_, e)| TransportError::Registry {
                    location: self.location(),
                    message: c.network(what, &e),
                    user: false,
                })?;
            if page.len() > MAX_DOCUMENT as usize {
                return Err(TransportError::TooLarge {
                    location: self.location(),
                    what: "a page of the tag list".into(),
                    size: page.len() as u64,
                    max: MAX_DOCUMENT,
                });
            }
            #[derive(serde::Deserialize)]
            struct Page {
                tags: Option<Vec<String>>,
            }
            let page: Page = serde_json::from_slice(&page)
                .map_err(|e| invalid(format!("a page is not the spec's JSON ({e})")))?;
            tags.extend(page.tags.unwrap_or_default());
            let Some(link) = link else {
                return Ok(tags);
            };
            let url = reqwest::Url::parse(&url)
                .and_then(|u| u.join(&link))
                .map_err(|e| invalid(format!("its Link `{link}` is not a URL ({e})")))?;
            if reqwest::Url::parse(&c.base).map(|b| b.origin()) != Ok(url.origin()) {
                return Err(invalid(format!(
                    "its Link `{link}` leads to another server"
                )));
            }
            if seen.contains(&url) {
                return Err(invalid(format!(
                    "its Link `{link}` leads back to a page read"
                )));
            }
            seen.push(url.clone());
            next = url.to_string();
        }
        Err(invalid(format!("it has more than {MAX_PAGES} pages")))
    }
}

/// The target of a `Link` header's `rel="next"` entry.
fn next_link(header: &str) -> Option<String> {
    header.split(',').find_map(|entry| {
        let (target, params) = entry.trim().split_once(';')?;
        let target = target.trim().strip_prefix('<')?.strip_suffix('>')?;
        let next = params.split(';').any(|p| {
            let p = p.trim().to_ascii_lowercase();
            p == "rel=\"next\"" || p == "rel=next"
        });
        next.then(|| target.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_link_is_found() {
        assert_eq!(
            next_link(r#"</v2/a/tags/list?last=b&n=2>; rel="next""#).as_deref(),
            Some("/v2/a/tags/list?last=b&n=2")
        );
        assert_eq!(
            next_link(r#"<https://x/p1>; rel="prev", <https://x/p3>; rel=next"#).as_deref(),
            Some("https://x/p3")
        );
        assert_eq!(next_link(r#"</v2/a/tags/list>; rel="prev""#), None);
        assert_eq!(next_link("garbage"), None);
    }
}
