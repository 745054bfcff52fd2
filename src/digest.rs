//! Content digests (`sha256:<64 hex>`) and a writer that hashes what passes
//! through it.
//!
//! Every blob in the store, every layer and every cache key is named by a
//! digest, so this type is the one place that validates them: a `Digest`
//! that exists is well formed, and its `Display` is exactly what the OCI
//! specs put on the wire.

use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    /// 64 lowercase hex characters.
    hex: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DigestError {
    #[error("`{0}` is not a digest: expected `sha256:` followed by 64 lowercase hex characters")]
    Malformed(String),
    #[error("digest algorithm `{0}` is not supported (only sha256 is)")]
    Algorithm(String),
}

impl crate::blame::Blame for DigestError {
    /// A digest someone wrote (a flag, a reference, a document).
    fn is_user_error(&self) -> bool {
        true
    }
}

impl Digest {
    /// The sha256 digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest::from_sha(Sha256::digest(bytes).into())
    }

    pub fn from_sha(raw: [u8; 32]) -> Digest {
        Digest {
            hex: hex::encode(raw),
        }
    }

    /// The 64 hex characters, without the algorithm: the file name under
    /// `blobs/sha256/`.
    pub fn hex(&self) -> &str {
        &self.hex
    }
}

impl FromStr for Digest {
    type Err = DigestError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let Some((alg, hex)) = s.split_once(':') else {
            return Err(DigestError::Malformed(s.to_string()));
        };
        if alg != "sha256" {
            if !alg.is_empty()
                && alg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"+._-".contains(&b))
            {
                return Err(DigestError::Algorithm(alg.to_string()));
            }
            return Err(DigestError::Malformed(s.to_string()));
        }
        if hex.len() != 64
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(DigestError::Malformed(s.to_string()));
        }
        Ok(Digest {
            hex: hex.to_string(),
        })
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Passes bytes to `inner` while hashing them and counting them.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    count: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// The bytes written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The digest and size of everything written, and the inner writer.
    pub fn finish(self) -> (Digest, u64, W) {
        (
            Digest::from_sha(self.hasher.finalize().into()),
            self.count,
            self.inner,
        )
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Hashes what is read through it.
pub struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: io::Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }
    pub fn finish(self) -> (Digest, u64, R) {
        (
            Digest::from_sha(self.hasher.finalize().into()),
            self.count,
            self.inner,
        )
    }
}

impl<R: io::Read> io::Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let d = Digest::of(b"");
        assert_eq!(
            d.to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(d.to_string().parse::<Digest>().unwrap(), d);
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "sha256:",
            "sha256:XYZ",
            "e3b0",
            "sha256:../../etc/passwd",
            &format!("sha256:{}", "A".repeat(64)),
        ] {
            assert!(
                matches!(bad.parse::<Digest>(), Err(DigestError::Malformed(_))),
                "{bad}"
            );
        }
        assert_eq!(
            "sha512:abcd".parse::<Digest>(),
            Err(DigestError::Algorithm("sha512".into()))
        );
    }

    #[test]
    fn hashing_writer_matches_one_shot() {
        let mut w = HashingWriter::new(Vec::new());
        w.write_all(b"hello ").unwrap();
        w.write_all(b"world").unwrap();
        let (d, n, inner) = w.finish();
        assert_eq!(d, Digest::of(b"hello world"));
        assert_eq!(n, 11);
        assert_eq!(inner, b"hello world");
    }
}
