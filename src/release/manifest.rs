//! The release's `MANIFEST`: one line per distribution set, tab-separated,
//! as FreeBSD's release tooling writes it (`release/scripts/make-manifest.sh`)
//! and bsdinstall reads it — these six fields, separated by tabs:
//!
//! ```text
//! base.txz <sha256> <number of files> base "Base system (MANDATORY)" on
//! ```

use std::collections::BTreeMap;

use crate::digest::Digest;

/// One distribution set named in a MANIFEST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEntry {
    /// The file, e.g. `base.txz`.
    pub file: String,
    pub sha256: Digest,
    /// How many files the set holds, as the MANIFEST says.
    pub files: u64,
}

/// A parsed MANIFEST, by file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub entries: BTreeMap<String, ManifestEntry>,
}

impl Manifest {
    /// Parses `text`; `what` names it in errors (a URL or a path).
    pub fn parse(text: &str, what: &str) -> Result<Manifest, String> {
        let mut entries = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let bad = |why: &str| {
                format!(
                    "{what}, line {}: {why}; a MANIFEST line is `FILE<TAB>SHA256<TAB>COUNT<TAB>SET<TAB>\"DESCRIPTION\"<TAB>on|off`",
                    n + 1
                )
            };
            let fields: Vec<&str> = line.split('\t').collect();
            if fields.len() < 3 {
                return Err(bad("fewer than three tab-separated fields"));
            }
            let file = fields[0];
            let safe = !file.is_empty()
                && file
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
                && !file.starts_with('.');
            if !safe {
                return Err(bad(&format!("`{file}` is not a plain file name")));
            }
            let hex = fields[1];
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad(&format!("`{hex}` is not a sha256")));
            }
            let sha256: Digest = format!("sha256:{}", hex.to_ascii_lowercase())
                .parse()
                .map_err(|e| bad(&format!("{e}")))?;
            let files = fields[2]
                .parse()
                .map_err(|_| bad(&format!("`{}` is not a file count", fields[2])))?;
            if entries.contains_key(file) {
                return Err(bad(&format!("`{file}` is listed twice")));
            }
            entries.insert(
                file.to_string(),
                ManifestEntry {
                    file: file.to_string(),
                    sha256,
                    files,
                },
            );
        }
        if entries.is_empty() {
            return Err(format!("{what}: the MANIFEST lists no distribution set"));
        }
        Ok(Manifest { entries })
    }

    pub fn get(&self, file: &str) -> Option<&ManifestEntry> {
        self.entries.get(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "base-dbg.txz\t3f9b1e0c4d9e4a8f3b3e3c56b0f6f6c1c9e1d2f5a6b7c8d9e0f1a2b3c4d5e6f7\t1203\tbase_dbg\t\"Base system (Debugging)\"\toff\n\
base.txz\te3971a3d4f36ed1ac67d2e7a5501726de79dd3695aa76bfad2a4ebe91a88a134\t31150\tbase\t\"Base system (MANDATORY)\"\ton\n\
lib32.txz\t0123456789abcdef0123456789abcdef0123456789abcdef0123456789ABCDEF\t1138\tlib32\t\"32-bit compatibility libraries\"\ton\n";

    #[test]
    fn parses_freebsd_manifests() {
        let m = Manifest::parse(SAMPLE, "MANIFEST").unwrap();
        assert_eq!(m.entries.len(), 3);
        let base = m.get("base.txz").unwrap();
        assert_eq!(
            base.sha256.to_string(),
            "sha256:e3971a3d4f36ed1ac67d2e7a5501726de79dd3695aa76bfad2a4ebe91a88a134"
        );
        assert_eq!(base.files, 31150);
        // Upper-case hex is accepted and normalised.
        assert!(m.get("lib32.txz").unwrap().sha256.hex().ends_with("abcdef"));
    }

    #[test]
    fn hostile_or_broken_manifests_are_refused_with_the_line() {
        for (text, needle) in [
            (
                "../etc/passwd\t".to_string() + &"a".repeat(64) + "\t1\n",
                "plain file name",
            ),
            ("base.txz\tnothex\t1\n".to_string(), "not a sha256"),
            (
                "base.txz\t".to_string() + &"a".repeat(64) + "\tmany\n",
                "file count",
            ),
            ("base.txz only\n".to_string(), "fewer than three"),
            ("\n\n".to_string(), "no distribution set"),
            (
                format!("base.txz\t{0}\t1\nbase.txz\t{0}\t1\n", "b".repeat(64)),
                "listed twice",
            ),
        ] {
            let e = Manifest::parse(&text, "http://m/MANIFEST").unwrap_err();
            assert!(e.contains(needle) && e.contains("http://m/MANIFEST"), "{e}");
        }
        let e = Manifest::parse(&format!("x\n{}", "base.txz\tz\t1"), "M").unwrap_err();
        assert!(e.contains("line 1"), "{e}");
    }
}
