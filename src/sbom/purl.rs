//! Package URLs for FreeBSD packages.
//!
//! The purl specification has no registered type for FreeBSD packages
//! (a `bsd` type is proposed); syft and scancode write
//! `pkg:freebsd/NAME@VERSION?arch=ABI&origin=ORIGIN`, and so does jbuild,
//! so that tools matching one match the other.

use super::Package;

/// `pkg:freebsd/NAME@VERSION?arch=…&origin=…` (qualifiers sorted by key,
/// empty ones left out, every component percent-encoded).
pub fn of(p: &Package) -> String {
    let mut out = format!("pkg:freebsd/{}@{}", encode(&p.name), encode(&p.version));
    let qualifiers: Vec<String> = [("arch", &p.arch), ("origin", &p.origin)]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect();
    if !qualifiers.is_empty() {
        out.push('?');
        out.push_str(&qualifiers.join("&"));
    }
    out
}

/// Percent-encoding of everything but letters, digits and `.-_~`.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purls_are_written_as_syft_writes_them() {
        let p = Package {
            version: "8.9.1".into(),
            origin: "www/curl".into(),
            arch: "FreeBSD:14:amd64".into(),
            ..Package::named("curl")
        };
        assert_eq!(
            of(&p),
            "pkg:freebsd/curl@8.9.1?arch=FreeBSD%3A14%3Aamd64&origin=www%2Fcurl"
        );
        let odd = Package {
            name: "gtk+".into(),
            version: "2.24_1,1".into(),
            origin: String::new(),
            arch: String::new(),
            ..p
        };
        assert_eq!(of(&odd), "pkg:freebsd/gtk%2B@2.24_1%2C1");
    }
}
