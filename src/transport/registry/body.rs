//! Reading registry answers with bounded memory: an error body is read to
//! at most [`MAX_ERROR_BODY`] and shown shortened; token answers and
//! documents are read with a cap their callers choose.

use futures_util::StreamExt;
use reqwest::Response;

/// The registry's error body (the spec's `{"errors": [...]}`), read to at
/// most [`MAX_ERROR_BODY`] and kept typed: what to do next is decided by
/// its codes ([`ErrorBody::has`]), its text is only for people.
pub(super) async fn error_body(resp: Response) -> ErrorBody {
    let (bytes, stalled) = match read_capped(resp, MAX_ERROR_BODY).await {
        Ok(b) => (b, false),
        Err((b, e)) => (b, e.is_timeout()),
    };
    ErrorBody {
        errors: errors_in(&bytes),
        stalled,
    }
}

/// An error code of the OCI distribution spec (and docker's
/// `TOOMANYREQUESTS`); a code the spec does not list is kept as it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorCode {
    BlobUnknown,
    BlobUploadInvalid,
    BlobUploadUnknown,
    DigestInvalid,
    ManifestBlobUnknown,
    ManifestInvalid,
    ManifestUnknown,
    NameInvalid,
    NameUnknown,
    SizeInvalid,
    Unauthorized,
    Denied,
    Unsupported,
    TooManyRequests,
    Other(String),
}

impl ErrorCode {
    const NAMED: [(&'static str, ErrorCode); 14] = [
        ("BLOB_UNKNOWN", ErrorCode::BlobUnknown),
        ("BLOB_UPLOAD_INVALID", ErrorCode::BlobUploadInvalid),
        ("BLOB_UPLOAD_UNKNOWN", ErrorCode::BlobUploadUnknown),
        ("DIGEST_INVALID", ErrorCode::DigestInvalid),
        ("MANIFEST_BLOB_UNKNOWN", ErrorCode::ManifestBlobUnknown),
        ("MANIFEST_INVALID", ErrorCode::ManifestInvalid),
        ("MANIFEST_UNKNOWN", ErrorCode::ManifestUnknown),
        ("NAME_INVALID", ErrorCode::NameInvalid),
        ("NAME_UNKNOWN", ErrorCode::NameUnknown),
        ("SIZE_INVALID", ErrorCode::SizeInvalid),
        ("UNAUTHORIZED", ErrorCode::Unauthorized),
        ("DENIED", ErrorCode::Denied),
        ("UNSUPPORTED", ErrorCode::Unsupported),
        ("TOOMANYREQUESTS", ErrorCode::TooManyRequests),
    ];

    pub fn parse(code: &str) -> ErrorCode {
        Self::NAMED
            .iter()
            .find(|(name, _)| *name == code)
            .map_or_else(|| ErrorCode::Other(code.to_string()), |(_, c)| c.clone())
    }

    /// The code as the spec writes it.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::Other(code) => code,
            known => Self::NAMED
                .iter()
                .find(|(_, c)| c == known)
                .map_or("?", |(name, _)| name),
        }
    }
}

/// One entry of a registry's `errors`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistryError {
    /// `None`: the entry had no code.
    pub code: Option<ErrorCode>,
    pub message: String,
    /// The spec's `detail` when it is a string (anything else is left out).
    pub detail: Option<String>,
}

/// What a registry said when it refused a request: its `errors` (empty when
/// the body was not the spec's document), and whether the body timed out
/// before its end.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorBody {
    pub errors: Vec<RegistryError>,
    pub stalled: bool,
}

impl ErrorBody {
    /// Whether the registry gave `code` for one of its errors.
    pub fn has(&self, code: &ErrorCode) -> bool {
        self.errors.iter().any(|e| e.code.as_ref() == Some(code))
    }

    /// The registry's words alone: [`ErrorBody::text`], and that the rest
    /// timed out.
    pub fn words(&self) -> String {
        let mut s = self.text();
        if self.stalled {
            s.push_str(" (and the rest of that answer timed out)");
        }
        s.trim_start().to_string()
    }

    /// The errors as `CODE: message (detail)` joined by `; `, scrubbed of
    /// every secret jbuild holds and shortened; empty when there are none.
    pub fn text(&self) -> String {
        let parts: Vec<String> = self
            .errors
            .iter()
            .map(|i| {
                let detail = match &i.detail {
                    Some(d) if !d.is_empty() => format!(" ({d})"),
                    _ => String::new(),
                };
                format!(
                    "{}: {}{detail}",
                    i.code.as_ref().map_or("?", ErrorCode::as_str),
                    i.message
                )
            })
            .collect();
        // The registry's own words may repeat the token or password it was
        // sent: scrubbed here, where they enter jbuild's text, as well as
        // where it is printed.
        short(&crate::keychain::redact::scrub(&parts.join("; ")))
    }
}

/// Shown after a status: `": CODE: message"`, or nothing, and whether the
/// rest of the answer timed out.
impl std::fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.errors.is_empty() {
            write!(f, ": {}", self.text())?;
        }
        if self.stalled {
            f.write_str(" (and the rest of that answer timed out)")?;
        }
        Ok(())
    }
}

/// The spec's `{"errors": [{"code", "message", "detail"}]}`; empty when
/// `body` is not such a document.
pub(super) fn errors_in(body: &[u8]) -> Vec<RegistryError> {
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
    let Ok(b) = serde_json::from_slice::<Body>(body) else {
        return Vec::new();
    };
    b.errors
        .into_iter()
        .map(|i| RegistryError {
            code: i.code.as_deref().map(ErrorCode::parse),
            message: i.message.unwrap_or_default(),
            detail: match i.detail {
                Some(serde_json::Value::String(d)) => Some(d),
                _ => None,
            },
        })
        .collect()
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
        let read = ErrorBody {
            errors: errors_in(body),
            stalled: false,
        };
        assert_eq!(
            read.to_string(),
            ": MANIFEST_BLOB_UNKNOWN: blob unknown to registry (sha256:06); DENIED: no"
        );
        assert!(read.has(&ErrorCode::ManifestBlobUnknown) && read.has(&ErrorCode::Denied));
        assert!(!read.has(&ErrorCode::BlobUnknown));
        assert_eq!(errors_in(b"<html>502</html>"), vec![]);
        assert_eq!(errors_in(br#"{"errors":[]}"#), vec![]);
        assert_eq!(ErrorBody::default().to_string(), "");
    }

    #[test]
    fn codes_the_spec_does_not_list_are_kept() {
        let read = errors_in(br#"{"errors":[{"code":"QUOTA_EXCEEDED","message":"full"}]}"#);
        assert_eq!(
            read[0].code,
            Some(ErrorCode::Other("QUOTA_EXCEEDED".into()))
        );
        assert_eq!(ErrorCode::parse("BLOB_UNKNOWN").as_str(), "BLOB_UNKNOWN");
        assert_eq!(
            ErrorCode::parse("TOOMANYREQUESTS"),
            ErrorCode::TooManyRequests
        );
    }

    #[test]
    fn long_messages_are_shortened() {
        assert_eq!(short(&"x".repeat(300)).chars().count(), 201);
        assert_eq!(short("  ok \n"), "ok");
    }
}
