//! Why a download came to nothing, as types: the exit code and the advice
//! follow what happened, never the words of a message.

use std::path::PathBuf;
use std::time::Duration;

use crate::digest::Digest;
use crate::transport::registry::ClientError;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// Not an `http://`, `https://` or `file://` URL.
    #[error("{url}: cannot be fetched: {reason}")]
    Url { url: String, reason: String },
    /// The TLS connection failed: a certificate from a CA jbuild does not
    /// trust, made for another name, or a server that does not speak TLS.
    #[error("cannot fetch {url}: the TLS connection to {host} failed; if the server's certificate comes from your own CA, trust it with --cert-dir DIR or /etc/containers/certs.d/{host}/ca.crt")]
    Tls {
        url: String,
        host: String,
        #[source]
        source: reqwest::Error,
    },
    /// No connection: refused, reset, a name that does not resolve.
    #[error("cannot reach {url}; check the address and the network")]
    Unreachable {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// The server stayed silent longer than the configuration's
    /// `[registries] timeout_secs`, on every try.
    #[error("{url} stayed silent for {} s (the configuration's [registries] timeout_secs); check the server, or raise the timeout", after.as_secs())]
    TimedOut {
        url: String,
        after: Duration,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url}: the server has no such file (404)")]
    NotFound { url: String },
    /// Any other answer that is not the file (408, 429 and 5xx only once
    /// the retries are spent).
    #[error("cannot fetch {url}: the server answered {status}")]
    Status { url: String, status: u16 },
    #[error("{url} is larger than {max} bytes, the most jbuild takes for it")]
    TooLarge { url: String, max: u64 },
    /// The whole file's sha256 is not the one the caller expected; nothing
    /// was kept.
    #[error("{url} does not have the expected content: expected {expected}, got {got}; nothing was kept (a broken mirror or a tampered file)")]
    Mismatch {
        url: String,
        expected: Digest,
        got: Digest,
    },
    /// The body stopped and could not be taken up again.
    #[error("cannot fetch {url}: the transfer broke off")]
    BrokeOff {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    /// An answer jbuild cannot work with (a `Content-Range` that does not
    /// start where it asked, a redirect loop).
    #[error("cannot fetch {url}: {reason}")]
    Protocol { url: String, reason: String },
    /// No client could be made for the server (its CA certificates).
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A `file://` source that cannot be read.
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The destination (or its temporary file) cannot be written.
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Runtime(#[from] crate::transport::RuntimeError),
    /// The consumer the bytes were handed to gave up.
    #[error("{url}: {message}")]
    Consumer { url: String, message: String },
}

impl HttpError {
    /// Whether the user can fix it (exit code 1): the URL, the server, the
    /// network, the certificates, a `file://` source that is not there.
    /// A destination that cannot be written and a client that cannot be
    /// set up are the system's or jbuild's fault.
    pub fn is_user_error(&self) -> bool {
        match self {
            HttpError::Client(e) => e.is_user_error(),
            HttpError::Write { .. } | HttpError::Consumer { .. } | HttpError::Runtime(_) => false,
            _ => true,
        }
    }

    /// Whether the server said the file is not there (404, or a missing
    /// `file://` path): a caller trying names in turn goes on to the next.
    pub fn is_not_found(&self) -> bool {
        match self {
            HttpError::NotFound { .. } => true,
            HttpError::Read { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
            _ => false,
        }
    }
}
