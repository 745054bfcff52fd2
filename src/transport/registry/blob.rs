//! Blob bytes between files and HTTP bodies: an upload stream that
//! hashes the file as it goes and refuses one that is not its blob; where
//! a resumed download starts.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sha2::{Digest as _, Sha256};
use tokio::io::AsyncReadExt;

use crate::digest::Digest;

/// Bytes read from the file per chunk of an upload.
pub const CHUNK: usize = 1 << 20;

/// The first byte of a `Content-Range: bytes START-END/TOTAL`.
pub fn range_start(v: &str) -> Option<u64> {
    v.trim()
        .strip_prefix("bytes ")?
        .split('-')
        .next()?
        .trim()
        .parse()
        .ok()
}

/// The whole length of a `Content-Range: bytes START-END/TOTAL` (`None`
/// for `*`, an unknown length).
pub fn range_total(v: &str) -> Option<u64> {
    v.trim()
        .strip_prefix("bytes ")?
        .rsplit_once('/')?
        .1
        .trim()
        .parse()
        .ok()
}

/// The file as a stream of chunks, hashed as they go; at the end, a size
/// or digest that differs from the descriptor's turns into an error (so
/// the upload is not committed) and is recorded in `bad`.
pub fn file_stream(
    path: PathBuf,
    size: u64,
    expected: Digest,
    bad: Arc<Mutex<Option<String>>>,
    sent: Arc<AtomicU64>,
) -> impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static {
    struct State {
        file: Option<tokio::fs::File>,
        path: PathBuf,
        hasher: Sha256,
        read: u64,
        done: bool,
    }
    let state = State {
        file: None,
        path,
        hasher: Sha256::new(),
        read: 0,
        done: false,
    };
    futures_util::stream::unfold(state, move |mut st| {
        let (expected, bad, sent) = (expected.clone(), bad.clone(), sent.clone());
        async move {
            if st.done {
                return None;
            }
            if st.file.is_none() {
                match tokio::fs::File::open(&st.path).await {
                    Ok(f) => st.file = Some(f),
                    Err(e) => {
                        st.done = true;
                        return Some((Err(e), st));
                    }
                }
            }
            let file = st.file.as_mut()?;
            let mut buf = vec![0u8; CHUNK];
            let n = match file.read(&mut buf).await {
                Ok(n) => n,
                Err(e) => {
                    st.done = true;
                    return Some((Err(e), st));
                }
            };
            if n == 0 || st.read + n as u64 > size {
                st.done = true;
                let actual = Digest::from_sha(st.hasher.clone().finalize().into());
                let over = st.read + n as u64 > size;
                if over || st.read != size || actual != expected {
                    let reason = if over {
                        format!("more than {size} bytes")
                    } else if st.read != size {
                        format!("{} bytes", st.read)
                    } else {
                        format!("digest {actual}")
                    };
                    *bad.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.clone());
                    return Some((
                        Err(std::io::Error::other(format!("the file has {reason}"))),
                        st,
                    ));
                }
                return None;
            }
            buf.truncate(n);
            st.hasher.update(&buf);
            st.read += n as u64;
            sent.store(st.read, Ordering::Relaxed);
            Some((Ok(bytes::Bytes::from(buf)), st))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    #[test]
    fn content_range_start() {
        assert_eq!(range_start("bytes 100-199/200"), Some(100));
        assert_eq!(range_start("bytes 0-0/1"), Some(0));
        assert_eq!(range_start("bytes */200"), None);
        assert_eq!(range_start("items 1-2/3"), None);
        assert_eq!(range_total("bytes 100-199/200"), Some(200));
        assert_eq!(range_total("bytes 0-9/*"), None);
    }

    #[tokio::test]
    async fn upload_stream_refuses_a_file_that_is_not_the_blob() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("b");
        std::fs::write(&p, b"hello").unwrap();
        let run = |size: u64, content: &[u8]| {
            let bad: Arc<Mutex<Option<String>>> = Default::default();
            let s = file_stream(
                p.clone(),
                size,
                Digest::of(content),
                bad.clone(),
                Default::default(),
            );
            async move {
                let items: Vec<_> = s.collect().await;
                let ok = items.iter().all(|i| i.is_ok());
                let got = bad.lock().unwrap().clone();
                (ok, got)
            }
        };
        assert_eq!(run(5, b"hello").await, (true, None));
        let (ok, why) = run(5, b"hellx").await;
        assert!(!ok && why.unwrap().starts_with("digest"));
        let (ok, why) = run(4, b"hell").await;
        assert!(!ok && why.unwrap().contains("more than 4"));
        let (ok, why) = run(6, b"hello!").await;
        assert!(!ok && why.unwrap().contains("5 bytes"));
    }
}
