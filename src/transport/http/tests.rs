//! The transfer rules against a scripted HTTP server on 127.0.0.1 (TLS,
//! `--cert-dir` and the timeouts are tested end to end in
//! `tests/it/http`).

use crate::blame::Blame;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::transport::registry::RetryPolicy;

/// What the server does with one request: the raw answer, and whether
/// to close the connection after it (cutting a body short).
type Script = Vec<Vec<u8>>;

/// Serves `script` in order, one answer per connection; returns the base
/// URL and the request heads it got.
pub(super) async fn serve(script: Script) -> (String, Arc<Mutex<Vec<String>>>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        for answer in script {
            let (mut c, _) = l.accept().await.unwrap();
            let mut head = Vec::new();
            let mut b = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                if c.read(&mut b).await.unwrap() == 0 {
                    break;
                }
                head.push(b[0]);
            }
            log.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&head).into_owned());
            let _ = c.write_all(&answer).await;
            let _ = c.shutdown().await;
        }
    });
    (url, seen)
}

pub(super) fn answer(status: &str, headers: &[(&str, String)], body: &[u8]) -> Vec<u8> {
    let mut a = format!("HTTP/1.1 {status}\r\nconnection: close\r\n");
    for (k, v) in headers {
        a.push_str(&format!("{k}: {v}\r\n"));
    }
    a.push_str("\r\n");
    let mut a = a.into_bytes();
    a.extend_from_slice(body);
    a
}

pub(super) fn quick() -> Http {
    Http::new(RegistryOptions {
        retry: RetryPolicy {
            max_attempts: 4,
            base: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            total: Duration::from_secs(10),
        },
        ..RegistryOptions::default()
    })
}

pub(super) fn body() -> Vec<u8> {
    (0..100_000u32).map(|i| (i % 251) as u8).collect()
}

#[derive(Default)]
pub(super) struct Seen(pub Vec<u8>, pub Option<u64>);
impl Watch for Seen {
    fn started(&mut self, length: Option<u64>) {
        self.1 = length;
    }
    fn bytes(&mut self, chunk: &[u8]) {
        self.0.extend_from_slice(chunk);
    }
}

#[tokio::test]
async fn a_cut_body_is_taken_up_with_a_range() {
    let full = body();
    let len = full.len().to_string();
    let (base, seen) = serve(vec![
        answer(
            "200 OK",
            &[("content-length", len.clone())],
            &full[..40_000],
        ),
        answer(
            "206 Partial Content",
            &[
                ("content-length", (full.len() - 40_000).to_string()),
                ("content-range", format!("bytes 40000-99999/{len}")),
            ],
            &full[40_000..],
        ),
    ])
    .await;
    let t = tempfile::tempdir().unwrap();
    let dest = t.path().join("f");
    let mut w = Seen::default();
    let want = Digest::of(&full);
    let got = quick()
        .get_to_file_watched(
            &format!("{base}/f"),
            &dest,
            Some(&want),
            Limits::default(),
            &mut w,
        )
        .await
        .unwrap();
    assert_eq!(got.size, full.len() as u64);
    assert_eq!(got.sha256, want);
    assert_eq!(std::fs::read(&dest).unwrap(), full);
    assert!(w.0 == full, "the watch saw every byte once, in order");
    assert_eq!(w.1, Some(full.len() as u64));
    let heads = seen.lock().unwrap();
    assert!(
        heads[1]
            .to_ascii_lowercase()
            .contains("range: bytes=40000-"),
        "{heads:?}"
    );
}

#[tokio::test]
async fn a_server_that_ignores_the_range_has_the_bytes_already_had_skipped() {
    let full = body();
    let len = full.len().to_string();
    let (base, _) = serve(vec![
        answer(
            "200 OK",
            &[("content-length", len.clone())],
            &full[..30_000],
        ),
        answer(
            "503 Service Unavailable",
            &[("content-length", "0".into())],
            b"",
        ),
        answer("200 OK", &[("content-length", len)], &full),
    ])
    .await;
    let mut w = Seen::default();
    let t = tempfile::tempdir().unwrap();
    let got = quick()
        .get_to_file_watched(
            &format!("{base}/f"),
            &t.path().join("f"),
            None,
            Limits::default(),
            &mut w,
        )
        .await
        .unwrap();
    assert_eq!(got.sha256, Digest::of(&full));
    assert!(w.0 == full);
}

#[tokio::test]
async fn a_mismatch_keeps_nothing() {
    let full = body();
    let (base, _) = serve(vec![answer(
        "200 OK",
        &[("content-length", full.len().to_string())],
        &full,
    )])
    .await;
    let t = tempfile::tempdir().unwrap();
    let dest = t.path().join("f");
    let e = quick()
        .get_to_file(
            &format!("{base}/f"),
            &dest,
            Some(&Digest::of(b"other")),
            Limits::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, HttpError::Mismatch { .. }), "{e:?}");
    assert!(e.is_user_error());
    assert_eq!(
        std::fs::read_dir(t.path()).unwrap().count(),
        0,
        "no file, no temporary"
    );
}

#[tokio::test]
async fn bounds_and_missing_files_are_typed() {
    let (base, _) = serve(vec![
        answer("200 OK", &[("content-length", "5000".into())], &[0; 5000]),
        answer("404 Not Found", &[("content-length", "0".into())], b""),
        answer("403 Forbidden", &[("content-length", "0".into())], b""),
    ])
    .await;
    let h = quick();
    let e = h.get_bytes(&format!("{base}/big"), 4096).await.unwrap_err();
    assert!(matches!(e, HttpError::TooLarge { max: 4096, .. }), "{e:?}");
    let e = h
        .get_bytes(&format!("{base}/gone"), 4096)
        .await
        .unwrap_err();
    assert!(e.is_not_found(), "{e:?}");
    let e = h.get_bytes(&format!("{base}/no"), 4096).await.unwrap_err();
    assert!(matches!(e, HttpError::Status { status: 403, .. }), "{e:?}");
    let e = h.get_bytes("ftp://example.org/x", 1).await.unwrap_err();
    assert!(matches!(e, HttpError::Url { .. }), "{e:?}");
}

#[tokio::test]
async fn file_urls_are_read_the_same_way() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::write(&src, body()).unwrap();
    let url = reqwest::Url::from_file_path(&src).unwrap().to_string();
    let h = quick();
    let got = h
        .get_to_file(&url, &t.path().join("out/dest"), None, Limits::default())
        .await
        .unwrap();
    assert_eq!(got.sha256, Digest::of(&body()));
    assert_eq!(h.get_bytes(&url, 1 << 20).await.unwrap(), body());
    let head = h.head(&url).await.unwrap().unwrap();
    assert_eq!(head.length, Some(body().len() as u64));
    assert!(h.head(&format!("{url}.missing")).await.unwrap().is_none());
    let e = h
        .get_bytes(&format!("{url}.missing"), 10)
        .await
        .unwrap_err();
    assert!(e.is_not_found() && e.is_user_error(), "{e:?}");
}
