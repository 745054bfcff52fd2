//! pkg's checksums of files: the `sum` of a package in a catalogue, and
//! of each file in a package's manifest.
//!
//! A checksum is `<type>$<encoded hash>` (`libpkg/pkg_checksum.c`,
//! `pkg_checksum_validate_fileat`), or, without a `$`, a SHA-256 in hex as
//! pkg before 1.5 wrote it. The types are pkg's `pkg_checksum_type_t`:
//! 0 SHA-256 in pkg's base32, 1 SHA-256 in hex (pkg up to 2.7), 2
//! BLAKE2b-512 in pkg's base32 (pkg 2.8 and later), 5 BLAKE2s-256 in
//! base32 (32-bit hosts). The raw types (3, 4, 6) are never written as
//! text and are refused.
//!
//! pkg's base32 is the z-base-32 alphabet with the bits of each byte taken
//! least significant first (not RFC 4648's order), and a last partial group
//! of five bits written as it is.

use std::fmt;
use std::io::{self, Write};

use blake2::{Blake2b512, Blake2s256};
use sha2::{Digest as _, Sha256};

const ALPHABET: &[u8; 32] = b"ybndrfg8ejkmcpqxot1uwisza345h769";

/// `bytes` in pkg's base32.
pub fn pkgbase32(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 8 / 5 + 1);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in bytes {
        acc |= (b as u32) << bits;
        bits += 8;
        while bits >= 5 {
            out.push(ALPHABET[(acc & 0x1f) as usize] as char);
            acc >>= 5;
            bits -= 5;
        }
    }
    if bits > 0 {
        out.push(ALPHABET[(acc & 0x1f) as usize] as char);
    }
    out
}

/// The hash a checksum names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Sha256Base32,
    Sha256Hex,
    Blake2bBase32,
    Blake2sBase32,
}

/// A checksum as pkg writes it, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checksum {
    pub kind: Kind,
    /// The encoded hash, as written after the `$`.
    pub encoded: String,
}

impl fmt::Display for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = match self.kind {
            Kind::Sha256Base32 => 0,
            Kind::Sha256Hex => 1,
            Kind::Blake2bBase32 => 2,
            Kind::Blake2sBase32 => 5,
        };
        write!(f, "{n}${}", self.encoded)
    }
}

/// A checksum that is not one pkg writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a checksum pkg writes (`<type>$<hash>` or 64 hex digits)")]
pub struct BadChecksum(pub String);

impl crate::blame::Blame for BadChecksum {
    /// A checksum as a catalogue or recipe wrote it.
    fn is_user_error(&self) -> bool {
        true
    }
}

impl Checksum {
    pub fn parse(text: &str) -> Result<Checksum, BadChecksum> {
        let bad = || BadChecksum(text.chars().take(140).collect());
        let (kind, encoded) = match text.split_once('$') {
            None => (Kind::Sha256Hex, text),
            Some((n, rest)) => {
                let kind = match n {
                    "0" => Kind::Sha256Base32,
                    "1" => Kind::Sha256Hex,
                    "2" => Kind::Blake2bBase32,
                    "5" => Kind::Blake2sBase32,
                    _ => return Err(bad()),
                };
                (kind, rest)
            }
        };
        let ok = match kind {
            Kind::Sha256Hex => {
                encoded.len() == 64 && encoded.bytes().all(|b| b.is_ascii_hexdigit())
            }
            _ => {
                let len = match kind {
                    Kind::Blake2bBase32 => 103,
                    _ => 52,
                };
                encoded.len() == len && encoded.bytes().all(|b| ALPHABET.contains(&b))
            }
        };
        if !ok {
            return Err(bad());
        }
        Ok(Checksum {
            kind,
            encoded: if kind == Kind::Sha256Hex {
                encoded.to_ascii_lowercase()
            } else {
                encoded.to_string()
            },
        })
    }

    /// A hasher for this checksum's kind: write the bytes, then
    /// [`Hasher::matches`].
    pub fn hasher(&self) -> Hasher {
        Hasher::new(self.kind)
    }
}

/// A running hash of one kind; a [`Write`] so it can sit in `io::copy`.
pub enum Hasher {
    Sha256(Kind, Sha256),
    Blake2b(Blake2b512),
    Blake2s(Blake2s256),
}

impl Hasher {
    pub fn new(kind: Kind) -> Hasher {
        match kind {
            Kind::Sha256Base32 | Kind::Sha256Hex => Hasher::Sha256(kind, Sha256::new()),
            Kind::Blake2bBase32 => Hasher::Blake2b(Blake2b512::new()),
            Kind::Blake2sBase32 => Hasher::Blake2s(Blake2s256::new()),
        }
    }

    /// The checksum of what was written.
    pub fn finish(self) -> Checksum {
        let (kind, encoded) = match self {
            Hasher::Sha256(Kind::Sha256Hex, h) => (Kind::Sha256Hex, hex::encode(h.finalize())),
            Hasher::Sha256(kind, h) => (kind, pkgbase32(&h.finalize())),
            Hasher::Blake2b(h) => (Kind::Blake2bBase32, pkgbase32(&h.finalize())),
            Hasher::Blake2s(h) => (Kind::Blake2sBase32, pkgbase32(&h.finalize())),
        };
        Checksum { kind, encoded }
    }

    /// Whether what was written has the checksum `want`.
    pub fn matches(self, want: &Checksum) -> bool {
        self.finish() == *want
    }
}

impl Write for Hasher {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Hasher::Sha256(_, h) => h.update(buf),
            Hasher::Blake2b(h) => h.update(buf),
            Hasher::Blake2s(h) => h.update(buf),
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(kind: Kind, data: &[u8]) -> String {
        let mut h = Hasher::new(kind);
        h.write_all(data).unwrap();
        h.finish().encoded
    }

    /// The vectors of `../shared/notes/pkg-anyhost.md` §1.3.
    #[test]
    fn pkgbase32_matches_the_notes_vectors() {
        assert_eq!(
            sum(Kind::Sha256Base32, b""),
            "d8cjcbbuh88ebpq9w81u3zfzr3jh4ythr5g8jgtwicgzbhjkapiy"
        );
        assert_eq!(
            sum(Kind::Sha256Base32, b"abc"),
            "4f6ct96tbaui6yfey1z5fzkrdbc8oopwshfw8q1soa9dg3dyiemb"
        );
        assert_eq!(
            sum(Kind::Blake2bBase32, b"abc"),
            "4fym49yuheu4yi7rzwp9jja6j8un1zoneuseh5qj1aq9sp99npw5zdsa3tks4hifnswkpxzeubumjcc4krkz7am14kq8nds7wgy13ty"
        );
    }

    #[test]
    fn checksums_parse_in_each_form_pkg_writes() {
        let hex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let c = Checksum::parse(&hex.to_uppercase()).unwrap();
        assert_eq!((c.kind, c.encoded.as_str()), (Kind::Sha256Hex, hex));
        let mut h = c.hasher();
        h.write_all(b"abc").unwrap();
        assert!(h.matches(&c));
        assert_eq!(Checksum::parse(&format!("1${hex}")).unwrap(), c);
        let b = format!("2${}", sum(Kind::Blake2bBase32, b"x"));
        assert_eq!(Checksum::parse(&b).unwrap().to_string(), b);
        assert!(Checksum::parse("3$abc").is_err());
        assert!(Checksum::parse("2$tooshort").is_err());
        assert!(Checksum::parse(&hex[1..]).is_err());
    }
}
