//! Just enough DER and PEM to find a certificate's subject: a bounded
//! tag-length-value reader (definite lengths only, as DER has them) and
//! the `CERTIFICATE` blocks of a PEM file, as OpenSSL's `PEM_read_X509`
//! finds them (text around and between blocks passed over, blocks of
//! other types skipped, `X509 CERTIFICATE` accepted as the old name).

use base64::Engine;

/// One TLV: its tag byte, its content, and the whole encoding.
#[derive(Debug, Clone, Copy)]
pub struct Tlv<'a> {
    pub tag: u8,
    pub content: &'a [u8],
    pub whole: &'a [u8],
}

/// Reads the TLV at the start of `input`; returns it and what follows.
pub fn tlv(input: &[u8]) -> Option<(Tlv<'_>, &[u8])> {
    let tag = *input.first()?;
    if tag & 0x1f == 0x1f {
        return None; // high tag numbers: not in a certificate's frame
    }
    let first = *input.get(1)?;
    let (len, head) = if first < 0x80 {
        (first as usize, 2)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 {
            return None;
        }
        let mut len = 0usize;
        for i in 0..n {
            len = (len << 8) | *input.get(2 + i)? as usize;
        }
        (len, 2 + n)
    };
    let end = head.checked_add(len)?;
    let whole = input.get(..end)?;
    Some((
        Tlv {
            tag,
            content: &whole[head..],
            whole,
        },
        &input[end..],
    ))
}

/// The items of a constructed value's content, in order.
pub fn items(mut content: &[u8]) -> Option<Vec<Tlv<'_>>> {
    let mut out = Vec::new();
    while !content.is_empty() {
        let (t, rest) = tlv(content)?;
        out.push(t);
        content = rest;
    }
    Some(out)
}

/// The DER encoding of a TLV with `tag` around `content`.
pub fn encode(tag: u8, content: &[u8], out: &mut Vec<u8>) {
    out.push(tag);
    let n = content.len();
    if n < 0x80 {
        out.push(n as u8);
    } else {
        let bytes = n.to_be_bytes();
        let skip = bytes.iter().take_while(|&&b| b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
}

pub const SEQUENCE: u8 = 0x30;
pub const SET: u8 = 0x31;

/// A certificate's DER and the encoding of its subject `Name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Certificate {
    pub der: Vec<u8>,
    pub subject: Vec<u8>,
}

/// The subject of a DER certificate: `Certificate ::= SEQUENCE {
/// tbsCertificate SEQUENCE { [0] version OPTIONAL, serialNumber,
/// signature, issuer, validity, subject, … }, … }`.
pub fn certificate(der: &[u8]) -> Option<Certificate> {
    let (cert, rest) = tlv(der)?;
    if cert.tag != SEQUENCE || !rest.is_empty() {
        return None;
    }
    let parts = items(cert.content)?;
    if parts.len() != 3 || parts[0].tag != SEQUENCE {
        return None;
    }
    let tbs = items(parts[0].content)?;
    let skip = usize::from(tbs.first()?.tag == 0xa0);
    let subject = tbs.get(skip + 4)?;
    if subject.tag != SEQUENCE || tbs[skip + 1].tag != SEQUENCE || tbs[skip + 3].tag != SEQUENCE {
        return None;
    }
    Some(Certificate {
        der: der.to_vec(),
        subject: subject.whole.to_vec(),
    })
}

/// The certificates of a PEM text, in order, as repeated
/// `PEM_read_X509` calls read them: reading stops at the first block
/// that does not decode to a certificate (OpenSSL's loop ends there).
pub fn pem_certificates(text: &[u8], max: usize) -> Vec<Certificate> {
    let mut out = Vec::new();
    let mut lines = text
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    while out.len() < max {
        let Some(label) = lines.by_ref().find_map(|l| {
            l.strip_prefix(b"-----BEGIN ")
                .and_then(|r| r.strip_suffix(b"-----"))
        }) else {
            break;
        };
        let label = label.to_vec();
        let end = [b"-----END ".as_slice(), &label, b"-----"].concat();
        let mut body = Vec::new();
        let mut closed = false;
        for l in lines.by_ref() {
            if l == end.as_slice() {
                closed = true;
                break;
            }
            if l.contains(&b':') {
                continue; // an RFC 1421 header line; none in a certificate
            }
            body.extend(l.iter().filter(|b| !b.is_ascii_whitespace()));
        }
        if !closed {
            break;
        }
        if label != b"CERTIFICATE" && label != b"X509 CERTIFICATE" {
            continue;
        }
        let Ok(der) = base64::engine::general_purpose::STANDARD.decode(&body) else {
            break;
        };
        match certificate(&der) {
            Some(c) => out.push(c),
            None => break,
        }
    }
    out
}

/// A certificate as `PEM_write_X509` writes it.
pub fn pem(der: &[u8]) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = b"-----BEGIN CERTIFICATE-----\n".to_vec();
    for chunk in b64.as_bytes().chunks(64) {
        out.extend_from_slice(chunk);
        out.push(b'\n');
    }
    out.extend_from_slice(b"-----END CERTIFICATE-----\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_long_and_short() {
        let mut v = Vec::new();
        encode(0x04, &[7; 200], &mut v);
        assert_eq!(&v[..3], &[0x04, 0x81, 200]);
        let (t, rest) = tlv(&v).unwrap();
        assert_eq!(t.content.len(), 200);
        assert!(rest.is_empty());
        let mut v = Vec::new();
        encode(0x04, &[7; 3], &mut v);
        assert_eq!(v, [4, 3, 7, 7, 7]);
        assert!(tlv(&[0x30, 0x85, 1, 1, 1, 1, 1]).is_none());
        assert!(tlv(&[0x30, 0x05, 1]).is_none());
    }
}
