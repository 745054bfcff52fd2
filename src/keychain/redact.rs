//! Secrets kept out of text: every password and token jbuild reads from a
//! credential source is remembered here (for this process only, in
//! memory), and the text jbuild prints — error reports and log lines — is
//! passed through [`scrub`], which replaces each remembered secret with
//! `<redacted>`.
//!
//! [`Secret`](super::Secret) already prints as `<redacted>`; this catches
//! what comes back from outside: a registry or token service that repeats
//! the `Authorization` header in its error body, a credential helper that
//! prints its input to stderr, a library that logs a URL with userinfo. A
//! secret is looked for in the forms it travels in: as it is, JSON-escaped,
//! percent-encoded, and base64 (alone, and as HTTP Basic's `user:secret`).

use std::sync::Mutex;

use base64::Engine;

/// The forms of every remembered secret, longest first.
static KNOWN: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// What a secret is replaced with.
pub const REDACTED: &str = "<redacted>";

/// Shorter forms are not looked for: replacing every `abc` in a log would
/// hide more than it protects (and a 3-character password is not one).
const MIN_FORM: usize = 4;

/// The forms `secret` may take in text (for `user`'s Basic credentials).
pub fn forms(user: Option<&str>, secret: &str) -> Vec<String> {
    let b64 = [
        base64::engine::general_purpose::STANDARD,
        base64::engine::general_purpose::URL_SAFE,
    ];
    let mut out = vec![secret.to_string()];
    if let Ok(json) = serde_json::to_string(secret) {
        out.push(json.trim_matches('"').to_string());
    }
    out.push(url::form_urlencoded::byte_serialize(secret.as_bytes()).collect());
    let mut encoded = vec![secret.to_string()];
    if let Some(u) = user {
        encoded.push(format!("{u}:{secret}"));
    }
    for plain in &encoded {
        for e in &b64 {
            let s = e.encode(plain);
            out.push(s.trim_end_matches('=').to_string());
        }
    }
    out.retain(|f| f.len() >= MIN_FORM);
    out.sort_by_key(|f| std::cmp::Reverse(f.len()));
    out.dedup();
    out
}

/// Remembers `secret` (and `user:secret`) for [`scrub`].
pub fn remember(user: Option<&str>, secret: &str) {
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    for f in forms(user, secret) {
        if !known.contains(&f) {
            known.push(f);
        }
    }
    known.sort_by_key(|f| std::cmp::Reverse(f.len()));
}

/// `text` with every remembered secret replaced by `<redacted>`.
pub fn scrub(text: &str) -> String {
    let known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    replace_all(text, &known)
}

/// `text` with each of `forms` replaced by `<redacted>`.
pub fn replace_all(text: &str, forms: &[String]) -> String {
    let mut out = text.to_string();
    for f in forms {
        if out.contains(f.as_str()) {
            out = out.replace(f.as_str(), REDACTED);
        }
    }
    out
}

/// `text` with every run of at least `min` characters that also occurs in
/// `secret` replaced by `<redacted>`: for text from a program that was
/// given the secret and may have mangled it (unescaped, cut, re-quoted)
/// before printing it.
pub fn replace_fragments(text: &str, secret: &str, min: usize) -> String {
    let t: Vec<char> = text.chars().collect();
    let s: Vec<char> = secret.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < t.len() {
        // The longest run starting at `i` that occurs in the secret.
        let mut best = 0;
        for start in 0..s.len() {
            let mut n = 0;
            while i + n < t.len() && start + n < s.len() && t[i + n] == s[start + n] {
                n += 1;
            }
            best = best.max(n);
        }
        if best >= min {
            out.push_str(REDACTED);
            i += best;
        } else {
            out.push(t[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mangled_fragments_are_replaced() {
        let secret = "CNRY0123456789\"q\\&z";
        let echoed = "cannot store: {\"Secret\":\"CNRY0123456789\\\"q\\&z\"}";
        let s = replace_fragments(echoed, secret, 8);
        assert!(!s.contains("CNRY01234"), "{s}");
        assert!(
            s.starts_with("cannot store: {\"Secret\":\"<redacted>"),
            "{s}"
        );
        assert_eq!(replace_fragments("short", secret, 8), "short");
    }

    #[test]
    fn every_form_is_replaced() {
        let secret = "pa\"ss w/rd+&%";
        let b = base64::engine::general_purpose::STANDARD;
        let texts = [
            format!("x {secret} y"),
            format!("x {} y", serde_json::to_string(secret).unwrap()),
            format!("Basic {}", b.encode(format!("me:{secret}"))),
            format!("t={}", b.encode(secret)),
            format!(
                "q={}",
                url::form_urlencoded::byte_serialize(secret.as_bytes()).collect::<String>()
            ),
        ];
        let f = forms(Some("me"), secret);
        for t in texts {
            let s = replace_all(&t, &f);
            assert!(s.contains(REDACTED), "{t} -> {s}");
            for form in &f {
                assert!(!s.contains(form.as_str()), "{t} -> {s}");
            }
        }
        assert_eq!(replace_all("nothing here", &f), "nothing here");
        // Too short to look for as it is (its base64 is long enough).
        assert!(!forms(None, "abc").contains(&"abc".to_string()));
    }
}
