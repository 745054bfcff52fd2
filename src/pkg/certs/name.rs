//! OpenSSL's subject hash (`X509_NAME_hash_ex`, what `openssl x509
//! -hash` prints and what names the links in `/etc/ssl/certs`): the
//! first four bytes, little-endian, of the SHA-1 of the name's canonical
//! encoding. No crate computes that encoding; this is jbuild's own code,
//! written from OpenSSL's `crypto/x509/x_name.c` (`x509_name_canon`,
//! `asn1_string_canon`, `i2d_name_canon`):
//!
//! - each attribute value of a string type OpenSSL canonicalises
//!   (UTF8String, BMPString, UniversalString, PrintableString,
//!   T61String, IA5String, VisibleString) is converted to UTF-8 (T61 and
//!   the one-byte types as Latin-1, BMP as UCS-2, Universal as UCS-4),
//!   leading and trailing ASCII white space dropped, each run of it
//!   inside made one space, ASCII letters lower-cased (other bytes as
//!   they are), and encoded as a UTF8String; any other value is kept as
//!   it was encoded;
//! - each RDN becomes a DER `SET OF` its `SEQUENCE { type, value }`
//!   entries (DER sorts the set's members by their encodings), and the
//!   RDNs' encodings are concatenated, without an outer `SEQUENCE`;
//! - an empty name is the empty string.

use super::der::{self, Tlv};

const UTF8STRING: u8 = 0x0c;

/// The canonical encoding of a DER `Name`, or `None` when it is not one
/// OpenSSL would decode.
pub fn canonical(name: &[u8]) -> Option<Vec<u8>> {
    let (seq, rest) = der::tlv(name)?;
    if seq.tag != der::SEQUENCE || !rest.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for rdn in der::items(seq.content)? {
        if rdn.tag != der::SET {
            return None;
        }
        let mut members = Vec::new();
        for atv in der::items(rdn.content)? {
            members.push(entry(atv)?);
        }
        if members.is_empty() {
            return None;
        }
        members.sort_by(|a, b| a.as_slice().cmp(b.as_slice()));
        let mut set = Vec::new();
        for m in members {
            set.extend(m);
        }
        der::encode(der::SET, &set, &mut out);
    }
    Some(out)
}

/// One `AttributeTypeAndValue`, canonical.
fn entry(atv: Tlv<'_>) -> Option<Vec<u8>> {
    if atv.tag != der::SEQUENCE {
        return None;
    }
    let parts = der::items(atv.content)?;
    if parts.len() != 2 || parts[0].tag != 0x06 {
        return None;
    }
    let mut content = parts[0].whole.to_vec();
    let value = parts[1];
    match to_utf8(value.tag, value.content) {
        Some(Ok(text)) => der::encode(UTF8STRING, &canon(&text), &mut content),
        Some(Err(())) => return None,
        None => content.extend_from_slice(value.whole),
    }
    let mut out = Vec::new();
    der::encode(der::SEQUENCE, &content, &mut out);
    Some(out)
}

/// `ASN1_STRING_to_UTF8` for the types OpenSSL canonicalises; `None` for
/// the others, `Err` for a string that does not convert.
fn to_utf8(tag: u8, bytes: &[u8]) -> Option<Result<Vec<u8>, ()>> {
    let chars: Result<Vec<char>, ()> = match tag {
        // UTF8String: must be valid UTF-8 (OpenSSL checks it).
        0x0c => {
            return Some(
                std::str::from_utf8(bytes)
                    .map(|s| s.as_bytes().to_vec())
                    .map_err(|_| ()),
            )
        }
        // PrintableString, T61String, IA5String, VisibleString: a byte a character.
        0x13 | 0x14 | 0x16 | 0x1a => Ok(bytes.iter().map(|&b| b as char).collect()),
        // BMPString: UCS-2, big-endian; a surrogate does not convert.
        0x1e => {
            if bytes.len() % 2 != 0 {
                return Some(Err(()));
            }
            bytes
                .chunks(2)
                .map(|c| char::from_u32(u32::from(u16::from_be_bytes([c[0], c[1]]))).ok_or(()))
                .collect()
        }
        // UniversalString: UCS-4, big-endian.
        0x1c => {
            if bytes.len() % 4 != 0 {
                return Some(Err(()));
            }
            bytes
                .chunks(4)
                .map(|c| char::from_u32(u32::from_be_bytes([c[0], c[1], c[2], c[3]])).ok_or(()))
                .collect()
        }
        _ => return None,
    };
    Some(chars.map(|c| c.into_iter().collect::<String>().into_bytes()))
}

/// `ossl_isspace`: space, `\t`, `\n`, `\v`, `\f`, `\r`.
fn space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The in-place rewrite of `asn1_string_canon` over UTF-8 bytes.
fn canon(text: &[u8]) -> Vec<u8> {
    let start = text.iter().position(|&b| !space(b)).unwrap_or(text.len());
    let end = text
        .iter()
        .rposition(|&b| !space(b))
        .map_or(start, |i| i + 1);
    let mut out = Vec::with_capacity(end - start);
    let mut i = start;
    while i < end {
        let b = text[i];
        if !b.is_ascii() {
            out.push(b);
            i += 1;
        } else if space(b) {
            out.push(b' ');
            while i < end && space(text[i]) {
                i += 1;
            }
        } else {
            out.push(b.to_ascii_lowercase());
            i += 1;
        }
    }
    out
}

/// `X509_NAME_hash_ex` of a DER `Name`.
pub fn hash(name: &[u8]) -> Option<u32> {
    let canon = canonical(name)?;
    let md = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &canon);
    let b = md.as_ref();
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// The SHA-1 of bytes (a certificate's fingerprint, as `X509_cmp` and
/// `openssl x509 -fingerprint` use it).
pub fn sha1(bytes: &[u8]) -> [u8; 20] {
    let md = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, bytes);
    md.as_ref().try_into().expect("20 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_text_as_openssl_makes_it() {
        assert_eq!(canon(b"  Foo \t\n Bar  "), b"foo bar");
        assert_eq!(canon(b"\xc3\x89COLE"), b"\xc3\x89cole");
        assert_eq!(canon(b"   "), b"");
    }

    #[test]
    fn the_empty_name_hashes_the_empty_string() {
        // SHA-1("") = da39a3ee…: its first four bytes little-endian.
        assert_eq!(hash(&[0x30, 0x00]), Some(0xeea3_39da));
    }
}
