//! Network faults the registry transport must survive or refuse, from a
//! small HTTP server on 127.0.0.1 that answers each request as the test
//! scripts it: a body cut in the middle (resumed with `Range`), a server
//! that ignores `Range`, 429 with `Retry-After`, 500s, wrong or too many
//! bytes. (The end-to-end fault suite, through a proxy in front of the
//! real Distribution, is in the registry harness.)

use jbuild::blame::Blame;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jbuild::digest::Digest;
use jbuild::keychain::DefaultKeychain;
use jbuild::store::oci_digest;
use jbuild::transport::registry::RetryPolicy;
use jbuild::transport::{RegistryOptions, RegistryRef, RegistryTransport, Transport};
use oci_spec::image::{Descriptor, MediaType};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One scripted answer.
struct Reply {
    status: &'static str,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Send only this many bytes of the body, then close.
    cut: Option<usize>,
}

impl Reply {
    fn ok(body: &[u8]) -> Reply {
        Reply {
            status: "200 OK",
            headers: vec![],
            body: body.to_vec(),
            cut: None,
        }
    }
    fn status(status: &'static str) -> Reply {
        Reply {
            status,
            headers: vec![],
            body: vec![],
            cut: None,
        }
    }
}

/// A request as the server saw it: method, path, `Range` header.
type Seen = Arc<Mutex<Vec<(String, String, Option<String>)>>>;

/// A request, with the headers the tests look at.
#[derive(Debug, Clone)]
struct Req {
    method: String,
    path: String,
    range: Option<String>,
    authorization: Option<String>,
    body: Vec<u8>,
}

/// The data of a chunked body.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(std::str::from_utf8(&raw[..eol]).unwrap().trim(), 16)
            .unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[eol + 2..eol + 2 + size]);
        raw = &raw[eol + 2 + size + 2..];
    }
}

/// Serves `/v2/` (200) and hands every other request to `answer` with its
/// index among them.
async fn serve(
    answer: impl Fn(usize, &str, Option<&str>) -> Reply + Send + Sync + 'static,
) -> (u16, Seen) {
    let seen: Seen = Arc::default();
    let count = std::sync::atomic::AtomicUsize::new(0);
    let seen2 = seen.clone();
    let port = serve_raw(move |r: &Req| {
        if r.path == "/v2/" {
            return Reply::ok(b"{}");
        }
        seen2
            .lock()
            .unwrap()
            .push((r.method.clone(), r.path.clone(), r.range.clone()));
        let i = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        answer(i, &r.path, r.range.as_deref())
    })
    .await;
    (port, seen)
}

/// Answers every request with `answer`, one connection per request.
async fn serve_raw(answer: impl Fn(&Req) -> Reply + Send + Sync + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                if sock.read(&mut byte).await.unwrap_or(0) == 0 {
                    break;
                }
                // A TLS ClientHello (the client tries HTTPS first): this
                // server speaks plain HTTP, so it hangs up, as a real one
                // answers garbage with an error.
                if head.is_empty() && byte[0] == 0x16 {
                    break;
                }
                head.push(byte[0]);
            }
            let text = String::from_utf8_lossy(&head).into_owned();
            let mut lines = text.lines();
            let mut first = lines.next().unwrap_or("").split(' ');
            let (method, path) = (
                first.next().unwrap_or("").to_string(),
                first.next().unwrap_or("").to_string(),
            );
            if !path.starts_with('/') {
                continue;
            }
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            let header = |name: &str| {
                headers
                    .iter()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            };
            // Read the body the client sends (an upload), whole or chunked.
            let mut body = Vec::new();
            if let Some(n) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
                body.resize(n, 0);
                if sock.read_exact(&mut body).await.is_err() {
                    continue;
                }
            } else if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
                let mut raw = Vec::new();
                while !raw.ends_with(b"\r\n0\r\n\r\n") && !raw.starts_with(b"0\r\n\r\n") {
                    if sock.read(&mut byte).await.unwrap_or(0) == 0 {
                        break;
                    }
                    raw.push(byte[0]);
                }
                body = dechunk(&raw);
            }
            let req = Req {
                method: method.clone(),
                path,
                range: header("range"),
                authorization: header("authorization"),
                body,
            };
            let reply = answer(&req);
            let mut out = format!(
                "HTTP/1.1 {}\r\nContent-Length: {}\r\nConnection: close\r\n",
                reply.status,
                reply.body.len()
            );
            for (k, v) in &reply.headers {
                out.push_str(&format!("{k}: {v}\r\n"));
            }
            out.push_str("\r\n");
            let _ = sock.write_all(out.as_bytes()).await;
            if method != "HEAD" {
                let end = reply.cut.unwrap_or(reply.body.len());
                let _ = sock.write_all(&reply.body[..end]).await;
            }
            let _ = sock.flush().await;
            let _ = sock.shutdown().await;
        }
    });
    port
}

fn transport(port: u16) -> RegistryTransport {
    let options = RegistryOptions {
        keychain: Some(Arc::new(DefaultKeychain::from_env().unwrap())),
        retry: RetryPolicy {
            max_attempts: 4,
            base: Duration::from_millis(20),
            max_delay: Duration::from_millis(100),
            total: Duration::from_secs(20),
        },
        ..RegistryOptions::default()
    };
    let r = RegistryRef::parse(&format!("127.0.0.1:{port}/jails/base:1")).unwrap();
    RegistryTransport::new(r, options)
}

fn blob(n: usize) -> (Vec<u8>, Descriptor) {
    let bytes: Vec<u8> = (0..n).map(|i| (i * 7 + i / 251) as u8).collect();
    let desc = Descriptor::new(
        MediaType::ImageLayerGzip,
        n as u64,
        oci_digest(&Digest::of(&bytes)),
    );
    (bytes, desc)
}

fn partial(bytes: &[u8], from: usize) -> Reply {
    Reply {
        status: "206 Partial Content",
        headers: vec![(
            "Content-Range".into(),
            format!("bytes {from}-{}/{}", bytes.len() - 1, bytes.len()),
        )],
        body: bytes[from..].to_vec(),
        cut: None,
    }
}

fn start_of(range: Option<&str>) -> Option<usize> {
    range?
        .strip_prefix("bytes=")?
        .strip_suffix('-')?
        .parse()
        .ok()
}

#[tokio::test]
async fn a_cut_download_resumes_with_range_and_is_verified_whole() {
    let (bytes, desc) = blob(300_000);
    let data = bytes.clone();
    let (port, seen) = serve(move |i, _, range| match (i, start_of(range)) {
        (0, None) => Reply {
            cut: Some(100_000),
            ..Reply::ok(&data)
        },
        (1, Some(from)) => Reply {
            cut: Some(50_000),
            ..partial(&data, from)
        },
        (_, Some(from)) => partial(&data, from),
        _ => Reply::status("400 Bad Request"),
    })
    .await;
    let t = tempfile::tempdir().unwrap();
    let dest = t.path().join("blob");
    let moved = Mutex::new(0u64);
    transport(port)
        .fetch_blob(&desc, &dest, &|n| *moved.lock().unwrap() = n)
        .await
        .unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), bytes);
    assert_eq!(*moved.lock().unwrap(), bytes.len() as u64);
    let ranges: Vec<Option<String>> = seen.lock().unwrap().iter().map(|s| s.2.clone()).collect();
    assert_eq!(
        ranges,
        vec![
            None,
            Some("bytes=100000-".into()),
            Some("bytes=150000-".into())
        ]
    );
}

#[tokio::test]
async fn a_server_that_ignores_range_is_read_again_from_the_start() {
    let (bytes, desc) = blob(200_000);
    let data = bytes.clone();
    let (port, seen) = serve(move |i, _, _| Reply {
        cut: (i == 0).then_some(80_000),
        ..Reply::ok(&data)
    })
    .await;
    let t = tempfile::tempdir().unwrap();
    let dest = t.path().join("blob");
    transport(port)
        .fetch_blob(&desc, &dest, &|_| {})
        .await
        .unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), bytes);
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn wrong_or_too_many_bytes_are_refused() {
    let (bytes, desc) = blob(10_000);
    let mut wrong = bytes.clone();
    wrong[5000] ^= 1;
    let (port, _) = serve(move |_, _, _| Reply::ok(&wrong)).await;
    let t = tempfile::tempdir().unwrap();
    let err = transport(port)
        .fetch_blob(&desc, &t.path().join("b"), &|_| {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("does not match"), "{err}");

    let mut long = bytes.clone();
    long.extend_from_slice(b"extra");
    let (port, _) = serve(move |_, _, _| Reply::ok(&long)).await;
    let err = transport(port)
        .fetch_blob(&desc, &t.path().join("b"), &|_| {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("more than 10000"), "{err}");
}

#[tokio::test]
async fn retry_after_is_waited_and_500s_are_retried() {
    let (bytes, desc) = blob(1000);
    let data = bytes.clone();
    let (port, seen) = serve(move |i, _, _| match i {
        0 => Reply {
            headers: vec![("Retry-After".into(), "1".into())],
            ..Reply::status("429 Too Many Requests")
        },
        1 => Reply::status("500 Internal Server Error"),
        2 => Reply::status("503 Service Unavailable"),
        _ => Reply::ok(&data),
    })
    .await;
    let t = tempfile::tempdir().unwrap();
    let started = Instant::now();
    transport(port)
        .fetch_blob(&desc, &t.path().join("b"), &|_| {})
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "Retry-After: 1 was not waited ({:?})",
        started.elapsed()
    );
    assert_eq!(seen.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn a_server_that_keeps_failing_is_given_up_on_as_a_fault() {
    let (_, desc) = blob(1000);
    let (port, seen) = serve(|_, _, _| Reply::status("502 Bad Gateway")).await;
    let t = tempfile::tempdir().unwrap();
    let err = transport(port)
        .fetch_blob(&desc, &t.path().join("b"), &|_| {})
        .await
        .unwrap_err();
    assert!(!err.is_user_error(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("gave up after 4 attempts") && msg.contains(&format!("127.0.0.1:{port}")),
        "{msg}"
    );
    assert_eq!(seen.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn missing_manifests_and_denied_access_are_the_users() {
    let (port, _) = serve(|_, path, _| {
        if path.contains("/manifests/") && path.ends_with("/gone") {
            Reply::status("404 Not Found")
        } else {
            Reply {
                body: br#"{"errors":[{"code":"DENIED","message":"requested access to the resource is denied"}]}"#
                    .to_vec(),
                ..Reply::status("403 Forbidden")
            }
        }
    })
    .await;
    let t = transport(port);
    let err = t.resolve("gone").await.unwrap_err();
    assert!(err.is_user_error(), "{err}");
    assert!(err.to_string().contains("no image `gone`"), "{err}");
    let err = t.resolve("secret").await.unwrap_err();
    assert!(err.is_user_error(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("403") && msg.contains("DENIED") && msg.contains("jbuild login 127.0.0.1"),
        "{msg}"
    );
}

#[tokio::test]
async fn an_expired_token_is_renewed_in_the_middle_of_a_pull() {
    let (bytes, desc) = blob(5000);
    let data = bytes.clone();
    let issued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen: Arc<Mutex<Vec<Req>>> = Arc::default();
    let (issued2, seen2) = (issued.clone(), seen.clone());
    let port_cell = Arc::new(std::sync::OnceLock::<u16>::new());
    let port_cell2 = port_cell.clone();
    let port = serve_raw(move |r: &Req| {
        seen2.lock().unwrap().push(r.clone());
        let port = port_cell2.get().copied().unwrap_or(0);
        let challenge = || Reply {
            headers: vec![(
                "WWW-Authenticate".into(),
                format!(r#"Bearer realm="http://127.0.0.1:{port}/token",service="test""#),
            )],
            ..Reply::status("401 Unauthorized")
        };
        if r.path.starts_with("/token") {
            let n = issued2.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            return Reply::ok(format!(r#"{{"token":"t{n}"}}"#).as_bytes());
        }
        // Only the second token is good: the first "expired".
        match r.authorization.as_deref() {
            Some("Bearer t2") if r.path.contains("/blobs/") => Reply::ok(&data),
            _ => challenge(),
        }
    })
    .await;
    port_cell.set(port).unwrap();
    let t = tempfile::tempdir().unwrap();
    let dest = t.path().join("b");
    transport(port)
        .fetch_blob(&desc, &dest, &|_| {})
        .await
        .unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), bytes);
    assert_eq!(issued.load(std::sync::atomic::Ordering::SeqCst), 2);
    let blob_auth: Vec<Option<String>> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.path.contains("/blobs/"))
        .map(|r| r.authorization.clone())
        .collect();
    assert_eq!(
        blob_auth,
        vec![Some("Bearer t1".into()), Some("Bearer t2".into())]
    );
}

#[tokio::test]
async fn an_upload_streams_the_file_and_renews_an_expired_token() {
    let (bytes, desc) = blob(3_000_000);
    let issued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen: Arc<Mutex<Vec<Req>>> = Arc::default();
    let (issued2, seen2) = (issued.clone(), seen.clone());
    let port_cell = Arc::new(std::sync::OnceLock::<u16>::new());
    let port_cell2 = port_cell.clone();
    let port = serve_raw(move |r: &Req| {
        seen2.lock().unwrap().push(r.clone());
        let port = port_cell2.get().copied().unwrap_or(0);
        if r.path.starts_with("/token") {
            let n = issued2.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            return Reply::ok(format!(r#"{{"token":"t{n}"}}"#).as_bytes());
        }
        // Every token but the first is good: the first "expired".
        let good = r
            .authorization
            .as_deref()
            .is_some_and(|a| a.starts_with("Bearer t") && a != "Bearer t1");
        match (r.method.as_str(), good) {
            ("POST", true) => Reply {
                headers: vec![(
                    "Location".into(),
                    format!("http://127.0.0.1:{port}/upload/1?state=x"),
                )],
                ..Reply::status("202 Accepted")
            },
            ("PUT", true) => Reply {
                headers: vec![(
                    "Location".into(),
                    format!("http://127.0.0.1:{port}/v2/jails/base/blobs/x"),
                )],
                ..Reply::status("201 Created")
            },
            _ => Reply {
                headers: vec![(
                    "WWW-Authenticate".into(),
                    format!(r#"Bearer realm="http://127.0.0.1:{port}/token",service="test""#),
                )],
                ..Reply::status("401 Unauthorized")
            },
        }
    })
    .await;
    port_cell.set(port).unwrap();
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("blob");
    std::fs::write(&src, &bytes).unwrap();
    let moved = Mutex::new(0u64);
    transport(port)
        .push_blob(&desc, &src, &|n| *moved.lock().unwrap() = n)
        .await
        .unwrap();
    assert_eq!(*moved.lock().unwrap(), bytes.len() as u64);
    let puts: Vec<Req> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.method == "PUT")
        .cloned()
        .collect();
    assert_eq!(puts.len(), 1, "one monolithic PUT");
    assert!(puts[0]
        .path
        .contains(&format!("digest={}", desc.digest()).replace(':', "%3A")));
    assert!(puts[0].body == bytes, "the PUT carried the file");

    // A file that is not what its descriptor says never completes an upload.
    std::fs::write(&src, b"something else").unwrap();
    seen.lock().unwrap().clear();
    let err = transport(port)
        .push_blob(&desc, &src, &|_| {})
        .await
        .unwrap_err();
    assert!(err.to_string().contains("does not match"), "{err}");
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .all(|r| !(r.method == "PUT" && r.body.len() == 14)),
        "a wrong file was sent whole"
    );
}
