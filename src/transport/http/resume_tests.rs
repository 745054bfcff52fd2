//! Downloads continued across runs ([`Http::get_to_file_resuming`]):
//! what the server answers to the `Range` of a kept part, against the
//! scripted server of `tests.rs`.

use super::tests::{answer, body, quick, serve, Seen};
use super::*;

/// A kept part of `kept` bytes of `content` at `.partial-k` in `dir`.
fn keep(dir: &Path, content: &[u8]) {
    std::fs::write(dir.join(".partial-k"), content).unwrap();
}

fn range(full: &[u8], from: usize) -> Vec<u8> {
    answer(
        "206 Partial Content",
        &[
            ("content-length", (full.len() - from).to_string()),
            (
                "content-range",
                format!("bytes {from}-{}/{}", full.len() - 1, full.len()),
            ),
        ],
        &full[from..],
    )
}

fn whole(full: &[u8]) -> Vec<u8> {
    answer(
        "200 OK",
        &[("content-length", full.len().to_string())],
        full,
    )
}

/// Runs one resuming download of `full` with `kept` bytes kept (the kept
/// part as given, perhaps wrong) against `script`: what it returned, what
/// the watch saw, the request heads, and what is left of the partial file.
async fn run(
    full: &[u8],
    kept: &[u8],
    script: Vec<Vec<u8>>,
) -> (Result<Fetched, HttpError>, Seen, Vec<String>, Option<u64>) {
    let (base, heads) = serve(script).await;
    let t = tempfile::tempdir().unwrap();
    keep(t.path(), kept);
    let dest = t.path().join("f");
    let mut w = Seen::default();
    let got = quick()
        .get_to_file_resuming(
            &format!("{base}/f"),
            &dest,
            "k",
            Some(&Digest::of(full)),
            Limits::default(),
            &mut w,
        )
        .await;
    if got.is_ok() {
        assert_eq!(std::fs::read(&dest).unwrap(), full);
    } else {
        assert!(!dest.exists());
    }
    let left = std::fs::metadata(t.path().join(".partial-k"))
        .ok()
        .map(|m| m.len());
    let heads = heads.lock().unwrap().clone();
    (got, w, heads, left)
}

#[tokio::test]
async fn a_kept_part_is_continued_with_a_range_and_watched_whole() {
    let full = body();
    let (got, w, heads, left) = run(&full, &full[..60_000], vec![range(&full, 60_000)]).await;
    let got = got.unwrap();
    assert_eq!((got.size, got.resumed), (full.len() as u64, 60_000));
    assert!(w.0 == full, "the watch saw every byte once, in order");
    assert!(heads[0]
        .to_ascii_lowercase()
        .contains("range: bytes=60000-"));
    assert_eq!(left, None, "renamed into place");
}

#[tokio::test]
async fn a_server_without_ranges_starts_the_file_again() {
    let full = body();
    let (got, w, heads, _) = run(&full, &full[..60_000], vec![whole(&full)]).await;
    assert!(heads[0]
        .to_ascii_lowercase()
        .contains("range: bytes=60000-"));
    assert_eq!(got.unwrap().resumed, 0);
    assert!(w.0 == full, "the watch saw every byte once, in order");
}

#[tokio::test]
async fn a_416_or_another_range_asks_again_from_the_first_byte() {
    let full = body();
    let refused = answer(
        "416 Range Not Satisfiable",
        &[("content-length", "0".into())],
        b"",
    );
    let (got, w, heads, _) = run(&full, &full[..60_000], vec![refused, whole(&full)]).await;
    assert_eq!(got.unwrap().resumed, 0);
    assert!(w.0 == full);
    assert!(
        !heads[1].to_ascii_lowercase().contains("range:"),
        "{heads:?}"
    );
    let (got, w, _, _) = run(
        &full,
        &full[..60_000],
        vec![range(&full, 10_000), whole(&full)],
    )
    .await;
    assert_eq!(got.unwrap().resumed, 0);
    assert!(w.0 == full);
}

#[tokio::test]
async fn a_wrong_kept_part_is_found_and_not_kept() {
    let full = body();
    let mut bad = full[..60_000].to_vec();
    bad[100] ^= 0xff;
    let (got, _, _, left) = run(&full, &bad, vec![range(&full, 60_000)]).await;
    assert!(matches!(got, Err(HttpError::Mismatch { .. })), "{got:?}");
    assert_eq!(left, None, "a wrong file is not kept");
}

#[tokio::test]
async fn what_a_failed_download_had_is_kept() {
    let full = body();
    let cut = answer(
        "200 OK",
        &[("content-length", full.len().to_string())],
        &full[..30_000],
    );
    let refused = answer("404 Not Found", &[("content-length", "0".into())], b"");
    let (got, _, _, left) = run(&full, b"", vec![cut, refused]).await;
    assert!(got.is_err());
    assert_eq!(left, Some(30_000));
}
