//! An independent tar writer and reader for the tests, written from the
//! POSIX spec (IEEE Std 1003.1, `pax`: "ustar Interchange Format" and "pax
//! Interchange Format") and GNU tar's `L`/`K` long-name headers. It shares
//! no code with jbuild's own tar code in src/layer/, so each checks the
//! other: tests write fixtures with it and read what jbuild wrote with it
//! (and with GNU tar, the real peer, where a listing says enough).
//!
//! `tests/support/layer.rs`, `tests/support/registry` and
//! `tests/support/hostile` use it as `crate::support::tar`.
#![allow(dead_code)]

use std::io::{self, Read, Write};

/// The fields of one ustar header block.
#[derive(Clone, Copy)]
pub struct Fields<'a> {
    /// Up to 100 bytes, written as they are (no prefix split).
    pub name: &'a [u8],
    pub kind: u8,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub size: u64,
    pub mtime: u64,
    pub link: &'a [u8],
    pub dev: (u32, u32),
}

impl Default for Fields<'_> {
    fn default() -> Self {
        Fields {
            name: b"",
            kind: b'0',
            mode: 0o644,
            uid: 0,
            gid: 0,
            size: 0,
            mtime: 0,
            link: b"",
            dev: (0, 0),
        }
    }
}

/// One 512-byte header block. Its bytes can be changed by hand (a hostile
/// test breaks a field) and the checksum fixed again, or not.
#[derive(Clone)]
pub struct Header(pub [u8; 512]);

/// `v` in octal, zero-padded, NUL-terminated, filling `field`.
fn octal(field: &mut [u8], v: u64) {
    let s = format!("{:0width$o}\0", v, width = field.len() - 1);
    assert_eq!(
        s.len(),
        field.len(),
        "{v} does not fit a {}-byte field",
        field.len()
    );
    field.copy_from_slice(s.as_bytes());
}

/// The header checksum: the sum of the block's bytes, the checksum field
/// itself counted as eight spaces.
fn checksum(b: &[u8; 512]) -> u64 {
    let spaces = 8 * u64::from(b' ');
    b[..148]
        .iter()
        .chain(&b[156..])
        .map(|&c| u64::from(c))
        .sum::<u64>()
        + spaces
}

impl Header {
    pub fn new(f: &Fields<'_>) -> Header {
        let mut b = [0u8; 512];
        b[..f.name.len()].copy_from_slice(f.name);
        octal(&mut b[100..108], u64::from(f.mode));
        octal(&mut b[108..116], f.uid);
        octal(&mut b[116..124], f.gid);
        octal(&mut b[124..136], f.size);
        octal(&mut b[136..148], f.mtime);
        b[156] = f.kind;
        b[157..157 + f.link.len()].copy_from_slice(f.link);
        b[257..263].copy_from_slice(b"ustar\0");
        b[263..265].copy_from_slice(b"00");
        octal(&mut b[329..337], u64::from(f.dev.0));
        octal(&mut b[337..345], u64::from(f.dev.1));
        let mut h = Header(b);
        h.set_cksum();
        h
    }

    pub fn set_cksum(&mut self) {
        let s = format!("{:06o}\0 ", checksum(&self.0));
        self.0[148..156].copy_from_slice(s.as_bytes());
    }

    pub fn as_bytes(&self) -> &[u8; 512] {
        &self.0
    }

    pub fn as_mut_bytes(&mut self) -> &mut [u8; 512] {
        &mut self.0
    }
}

/// Zero bytes that pad `size` bytes of content to a whole block.
pub fn padding(size: u64) -> &'static [u8] {
    &[0u8; 512][..(512 - (size % 512) as usize) % 512]
}

/// The end-of-archive marker: two zero blocks.
pub const END: [u8; 1024] = [0u8; 1024];

/// A plain tar of regular files `(name, mode, content)`, mtime 0, owned by
/// 0:0, as most fixtures want.
pub fn ustar(files: &[(&str, u32, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, mode, content) in files {
        let h = Header::new(&Fields {
            name: name.as_bytes(),
            mode: *mode,
            size: content.len() as u64,
            ..Fields::default()
        });
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(content);
        out.extend_from_slice(padding(content.len() as u64));
    }
    out.extend_from_slice(&END);
    out
}

/// Streams one regular file of `size` bytes read from `content`, and the
/// end marker, to `out` (a fixture too large to hold in memory).
pub fn stream_file(
    out: &mut impl Write,
    name: &str,
    size: u64,
    content: impl Read,
) -> io::Result<()> {
    let h = Header::new(&Fields {
        name: name.as_bytes(),
        size,
        ..Fields::default()
    });
    out.write_all(h.as_bytes())?;
    let copied = io::copy(&mut content.take(size), out)?;
    assert_eq!(copied, size, "{name}: the content ran short");
    out.write_all(padding(size))?;
    out.write_all(&END)
}

/// PAX extended-header records (`LEN key=value\n`, LEN counting itself).
pub fn pax_records(records: &[(&str, &[u8])]) -> Vec<u8> {
    let mut data = Vec::new();
    for (k, v) in records {
        let rest = k.len() + v.len() + 3;
        let mut len = rest + 1;
        while len != rest + len.to_string().len() {
            len = rest + len.to_string().len();
        }
        data.extend_from_slice(format!("{len} {k}=").as_bytes());
        data.extend_from_slice(v);
        data.push(b'\n');
    }
    data
}

/// One entry as [`list`] reads it: the header's own fields, the path and
/// link target after any PAX or GNU long-name header, the PAX records that
/// applied to it (in order) and its content.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: Vec<u8>,
    pub kind: u8,
    pub link: Vec<u8>,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub mtime: u64,
    pub size: u64,
    pub dev: (u32, u32),
    pub pax: Vec<(String, Vec<u8>)>,
    pub content: Vec<u8>,
}

/// A NUL-terminated field's bytes.
fn text(field: &[u8]) -> &[u8] {
    let end = field.iter().position(|&c| c == 0).unwrap_or(field.len());
    &field[..end]
}

/// An octal numeric field (leading spaces or zeros, ended by NUL or space).
fn number(field: &[u8], what: &str) -> u64 {
    assert!(
        field[0] & 0x80 == 0,
        "{what}: base-256 is not expected here"
    );
    let digits = text(field);
    let digits = std::str::from_utf8(digits).unwrap().trim_matches(' ');
    if digits.is_empty() {
        return 0;
    }
    u64::from_str_radix(digits, 8).unwrap_or_else(|e| panic!("{what}: {digits:?}: {e}"))
}

/// The records of a PAX extended header, checking each one's length.
fn parse_pax(mut data: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    while !data.is_empty() {
        let sp = data
            .iter()
            .position(|&c| c == b' ')
            .expect("PAX record length");
        let len: usize = std::str::from_utf8(&data[..sp]).unwrap().parse().unwrap();
        let record = &data[sp + 1..len];
        assert_eq!(data[len - 1], b'\n', "a PAX record ends with a newline");
        let eq = record
            .iter()
            .position(|&c| c == b'=')
            .expect("PAX key=value");
        let key = String::from_utf8(record[..eq].to_vec()).expect("a UTF-8 PAX key");
        out.push((key, record[eq + 1..record.len() - 1].to_vec()));
        data = &data[len..];
    }
    out
}

/// Every entry of a whole tar stream, panicking on anything a strict
/// reader would refuse: a bad checksum, a wrong magic, a truncated entry,
/// a missing end marker.
pub fn list(bytes: &[u8]) -> Vec<Entry> {
    let mut out = Vec::new();
    let (mut pax, mut long_name, mut long_link) = (Vec::new(), None, None);
    let mut at = 0;
    loop {
        let block: &[u8; 512] = bytes
            .get(at..at + 512)
            .unwrap_or_else(|| panic!("truncated at byte {at}: no end marker"))
            .try_into()
            .unwrap();
        if block.iter().all(|&c| c == 0) {
            let second = bytes.get(at + 512..at + 1024).expect("a second zero block");
            assert!(second.iter().all(|&c| c == 0), "a lone zero block at {at}");
            return out;
        }
        assert_eq!(
            number(&block[148..156], "checksum"),
            checksum(block),
            "header checksum at byte {at}"
        );
        assert_eq!(&block[257..265], b"ustar\x0000", "ustar magic at byte {at}");
        let size = number(&block[124..136], "size");
        let kind = block[156];
        let start = at + 512;
        let content = bytes
            .get(start..start + size as usize)
            .unwrap_or_else(|| panic!("entry at byte {at} is truncated"))
            .to_vec();
        at = start + (size as usize).div_ceil(512) * 512;
        match kind {
            b'x' => {
                pax = parse_pax(&content);
                continue;
            }
            b'L' => {
                long_name = Some(text(&content).to_vec());
                continue;
            }
            b'K' => {
                long_link = Some(text(&content).to_vec());
                continue;
            }
            _ => {}
        }
        let (name, prefix) = (text(&block[..100]), text(&block[345..500]));
        let mut path = if prefix.is_empty() {
            name.to_vec()
        } else {
            [prefix, b"/", name].concat()
        };
        let mut link = text(&block[157..257]).to_vec();
        if let Some(p) = long_name.take() {
            path = p;
        }
        if let Some(l) = long_link.take() {
            link = l;
        }
        for (k, v) in &pax {
            match k.as_str() {
                "path" => path = v.clone(),
                "linkpath" => link = v.clone(),
                _ => {}
            }
        }
        out.push(Entry {
            path,
            kind,
            link,
            mode: number(&block[100..108], "mode") as u32,
            uid: number(&block[108..116], "uid"),
            gid: number(&block[116..124], "gid"),
            mtime: number(&block[136..148], "mtime"),
            size,
            dev: (
                number(&block[329..337], "devmajor") as u32,
                number(&block[337..345], "devminor") as u32,
            ),
            pax: std::mem::take(&mut pax),
            content,
        });
    }
}
