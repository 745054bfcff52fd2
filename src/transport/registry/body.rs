//! Reading registry answers with bounded memory: an error body is read to
//! at most [`MAX_ERROR_BODY`] and shown shortened; token answers and
//! documents are read with a cap their callers choose.

use futures_util::StreamExt;
use reqwest::Response;

/// The registry's error body (the spec's `{"errors": [...]}`), shortened,
/// as `": CODE: message"`, or nothing.
pub(super) async fn error_body(resp: Response) -> String {
    let (bytes, stalled) = match read_capped(resp, MAX_ERROR_BODY).await {
        Ok(b) => (b, false),
        Err((b, e)) => (b, e.is_timeout()),
    };
    let mut detail = errors_in(&bytes).map_or_else(String::new, |e| format!(": {e}"));
    if stalled {
        detail.push_str(" (and the rest of that answer timed out)");
    }
    detail
}

/// The spec's `{"errors": [{"code", "message", "detail"}]}` as
/// `CODE: message (detail)` joined by `; `, scrubbed of every secret
/// jbuild holds and shortened; `None` when `body` is not such a document.
pub(super) fn errors_in(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Body {
        errors: Vec<Item>,
    }
    #[derive(serde::Deserialize)]
    struct Item {
        code: Option<String>,
        message: Option<String>,
        detail: Option<serde_json::Value>,
    }
    let b = serde_json::from_slice::<Body>(body).ok()?;
    let parts: Vec<String> = b
        .errors
        .iter()
        .map(|i| {
            let detail = match &i.detail {
                Some(serde_json::Value::String(d)) if !d.is_empty() => format!(" ({d})"),
                _ => String::new(),
            };
            format!(
                "{}: {}{detail}",
                i.code.as_deref().unwrap_or("?"),
                i.message.as_deref().unwrap_or("")
            )
        })
        .collect();
    // The registry's own words may repeat the token or password it was
    // sent: scrubbed here, where they enter jbuild's text, as well as where
    // it is printed.
    (!parts.is_empty()).then(|| short(&crate::keychain::redact::scrub(&parts.join("; "))))
}

/// The most of an error body jbuild reads: a registry's `{"errors": ...}`
/// is a few hundred bytes; a body that does not end is not read to its end.
pub const MAX_ERROR_BODY: usize = 64 * 1024;

/// At most `max` bytes of a response body (the rest is dropped with the
/// connection), so an answer of any size costs bounded memory.
pub async fn head_of_body(resp: Response, max: usize) -> Vec<u8> {
    match read_capped(resp, max).await {
        Ok(b) => b,
        Err((b, _)) => b,
    }
}

/// At most `max` bytes of a response body; a body that breaks off (or
/// times out) is an error, with what came before it.
pub async fn read_capped(resp: Response, max: usize) -> Result<Vec<u8>, (Vec<u8>, reqwest::Error)> {
    let mut out = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => return Err((out, e)),
        };
        let room = max - out.len();
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() >= max {
            break;
        }
    }
    Ok(out)
}

pub(super) fn short(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_errors_read_as_code_message_detail() {
        let body = br#"{"errors":[{"code":"MANIFEST_BLOB_UNKNOWN","message":"blob unknown to registry","detail":"sha256:06"},{"code":"DENIED","message":"no","detail":{"a":1}}]}"#;
        assert_eq!(
            errors_in(body).as_deref(),
            Some("MANIFEST_BLOB_UNKNOWN: blob unknown to registry (sha256:06); DENIED: no")
        );
        assert_eq!(errors_in(b"<html>502</html>"), None);
        assert_eq!(errors_in(br#"{"errors":[]}"#), None);
    }

    #[test]
    fn long_messages_are_shortened() {
        assert_eq!(short(&"x".repeat(300)).chars().count(), 201);
        assert_eq!(short("  ok \n"), "ok");
    }
}
