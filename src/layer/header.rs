//! Tar headers, byte for byte: POSIX ustar blocks, and PAX extended headers
//! only for what ustar cannot hold.
//!
//! Pure functions of their input, so the same entry always gives the same
//! bytes. The writer describes an entry with [`Entry`] and [`encode`] turns
//! it into 512-byte blocks; the reader uses the field parsers.
//!
//! Conventions (those of GNU tar and Go's `archive/tar`, which umoci uses):
//!
//! - numeric fields are zero-padded octal ending in NUL; the checksum is six
//!   digits, NUL, space; owner names are empty;
//! - the mode field holds the permission, setuid, setgid and sticky bits
//!   only, never the file-type bits;
//! - a path goes into `prefix` + `name` when it is ASCII and splits at a `/`
//!   into at most 155 + 100 bytes; otherwise into a PAX `path` record, as GNU
//!   tar (`--format=posix`) and Go do for any non-ASCII name. A name that is
//!   not UTF-8 goes into the record as its raw bytes, as GNU tar writes it
//!   (GNU tar 1.34 warns about `hdrcharset`, so it is not written); every
//!   reader jbuild cares about takes the bytes as they are;
//! - PAX records are sorted by key and never include `atime` or `ctime`.

use std::borrow::Cow;
use std::ffi::OsString;

pub const BLOCK: usize = 512;

pub const REGULAR: u8 = b'0';
pub const HARD_LINK: u8 = b'1';
pub const SYMLINK: u8 = b'2';
pub const CHAR_DEVICE: u8 = b'3';
pub const BLOCK_DEVICE: u8 = b'4';
pub const DIRECTORY: u8 = b'5';
pub const FIFO: u8 = b'6';
pub const CONTIGUOUS: u8 = b'7';
pub const PAX_LOCAL: u8 = b'x';
pub const PAX_GLOBAL: u8 = b'g';
pub const GNU_LONG_NAME: u8 = b'L';
pub const GNU_LONG_LINK: u8 = b'K';

/// The largest value of an 8-byte and a 12-byte octal field.
pub const MAX_OCTAL_8: u64 = 0o7777777;
pub const MAX_OCTAL_12: u64 = 0o77777777777;

/// One entry as the writer describes it.
#[derive(Debug, Default)]
pub struct Entry<'a> {
    /// The full path, ending in `/` for a directory.
    pub path: &'a [u8],
    pub typeflag: u8,
    pub mode: u32,
    pub uid: u64,
    pub gid: u64,
    pub size: u64,
    pub mtime: u64,
    pub linkname: &'a [u8],
    pub devmajor: u64,
    pub devminor: u64,
    /// Extended attributes, sorted by name.
    pub xattrs: &'a [(OsString, Vec<u8>)],
    /// FreeBSD file flags in bsdtar's spelling (`schg,uappnd`).
    pub fflags: Option<&'a str>,
}

/// Appends the header blocks of `e` to `out`: a PAX extended header if one
/// is needed, then the ustar header. The entry's content is not included.
pub fn encode(e: &Entry<'_>, out: &mut Vec<u8>) {
    let mut records: Vec<(Cow<'_, [u8]>, &[u8])> = Vec::new();
    let mut numbers: Vec<(&'static [u8], String)> = Vec::new();

    let split = split_ustar_path(e.path);
    if split.is_none() {
        records.push((Cow::Borrowed(b"path"), e.path));
    }
    let link_fits = e.linkname.len() <= 100 && e.linkname.is_ascii();
    if !link_fits {
        records.push((Cow::Borrowed(b"linkpath"), e.linkname));
    }
    for (key, value, max) in [
        (&b"uid"[..], e.uid, MAX_OCTAL_8),
        (b"gid", e.gid, MAX_OCTAL_8),
        (b"size", e.size, MAX_OCTAL_12),
        (b"mtime", e.mtime, MAX_OCTAL_12),
        (b"SCHILY.devmajor", e.devmajor, MAX_OCTAL_8),
        (b"SCHILY.devminor", e.devminor, MAX_OCTAL_8),
    ] {
        if value > max {
            numbers.push((key, value.to_string()));
        }
    }
    for (key, value) in &numbers {
        records.push((Cow::Borrowed(key), value.as_bytes()));
    }
    if let Some(flags) = e.fflags {
        records.push((Cow::Borrowed(b"SCHILY.fflags"), flags.as_bytes()));
    }
    for (name, value) in e.xattrs {
        let mut key = b"SCHILY.xattr.".to_vec();
        key.extend_from_slice(name.as_encoded_bytes());
        records.push((Cow::Owned(key), value));
    }

    let fit = |v: u64, max: u64| if v > max { 0 } else { v };
    if !records.is_empty() {
        records.sort_by(|a, b| a.0.cmp(&b.0));
        let mut data = Vec::new();
        for (k, v) in &records {
            pax_record(k, v, &mut data);
        }
        let name = pax_header_name(e.path);
        ustar(
            &Entry {
                path: &name,
                typeflag: PAX_LOCAL,
                mode: 0o644,
                size: data.len() as u64,
                mtime: fit(e.mtime, MAX_OCTAL_12),
                ..Entry::default()
            },
            split_ustar_path(&name).unwrap_or((b"", b"PaxHeaders.0")),
            b"",
            out,
        );
        out.extend_from_slice(&data);
        pad(out);
    }

    let fallback_name;
    let (prefix, name) = match split {
        Some(s) => s,
        None => {
            fallback_name = ascii_fallback(e.path, 100);
            (&b""[..], &fallback_name[..])
        }
    };
    let fallback_link;
    let linkname = if link_fits {
        e.linkname
    } else {
        fallback_link = ascii_fallback(e.linkname, 100);
        &fallback_link[..]
    };
    let clamped = Entry {
        uid: fit(e.uid, MAX_OCTAL_8),
        gid: fit(e.gid, MAX_OCTAL_8),
        size: fit(e.size, MAX_OCTAL_12),
        mtime: fit(e.mtime, MAX_OCTAL_12),
        devmajor: fit(e.devmajor, MAX_OCTAL_8),
        devminor: fit(e.devminor, MAX_OCTAL_8),
        ..*e
    };
    ustar(&clamped, (prefix, name), linkname, out);
}

/// Writes one ustar block for `e`, with its path already split.
fn ustar(e: &Entry<'_>, (prefix, name): (&[u8], &[u8]), linkname: &[u8], out: &mut Vec<u8>) {
    let mut b = [0u8; BLOCK];
    b[..name.len()].copy_from_slice(name);
    octal(&mut b[100..108], u64::from(e.mode & 0o7777));
    octal(&mut b[108..116], e.uid);
    octal(&mut b[116..124], e.gid);
    octal(&mut b[124..136], e.size);
    octal(&mut b[136..148], e.mtime);
    b[156] = e.typeflag;
    b[157..157 + linkname.len()].copy_from_slice(linkname);
    b[257..263].copy_from_slice(b"ustar\0");
    b[263..265].copy_from_slice(b"00");
    octal(&mut b[329..337], e.devmajor);
    octal(&mut b[337..345], e.devminor);
    b[345..345 + prefix.len()].copy_from_slice(prefix);
    b[148..156].fill(b' ');
    let sum: u32 = b.iter().map(|&x| u32::from(x)).sum();
    octal(&mut b[148..155], u64::from(sum));
    b[155] = b' ';
    out.extend_from_slice(&b);
}

/// `field.len() - 1` zero-padded octal digits and a NUL. The caller keeps
/// the value within range.
fn octal(field: &mut [u8], mut v: u64) {
    let digits = field.len() - 1;
    for i in (0..digits).rev() {
        field[i] = b'0' + (v & 7) as u8;
        v >>= 3;
    }
    field[digits] = 0;
}

/// Pads `out` with zeros to a whole number of blocks.
pub fn pad(out: &mut Vec<u8>) {
    out.resize(out.len().div_ceil(BLOCK) * BLOCK, 0);
}

/// The zero bytes that follow `size` bytes of content to fill the block.
pub fn padding(size: u64) -> usize {
    (BLOCK - (size % BLOCK as u64) as usize) % BLOCK
}

/// Splits an ASCII path into ustar `prefix` (≤ 155 bytes) and `name`
/// (≤ 100 bytes), taking the longest prefix that fits (as Go does), or
/// `None` if it cannot be done.
pub fn split_ustar_path(path: &[u8]) -> Option<(&[u8], &[u8])> {
    if !path.is_ascii() || path.contains(&0) {
        return None;
    }
    if path.len() <= 100 {
        return Some((b"", path));
    }
    // A trailing `/` (directory) belongs to the name.
    let mut end = path.len().min(156);
    if end == path.len() && path[end - 1] == b'/' {
        end -= 1;
    }
    let i = path[..end].iter().rposition(|&c| c == b'/')?;
    let (prefix, name) = (&path[..i], &path[i + 1..]);
    if i == 0 || name.is_empty() || name.len() > 100 || prefix.len() > 155 {
        return None;
    }
    Some((prefix, name))
}

/// A name for the ustar field of an entry whose real name is in a PAX
/// record: non-ASCII bytes become `_`, cut to `max` bytes.
fn ascii_fallback(path: &[u8], max: usize) -> Vec<u8> {
    path.iter()
        .take(max)
        .map(|&c| if c.is_ascii() && c != 0 { c } else { b'_' })
        .collect()
}

/// `PaxHeaders.0/<base name>`, as Go names extended headers, within 100
/// ASCII bytes.
fn pax_header_name(path: &[u8]) -> Vec<u8> {
    let trimmed = path.strip_suffix(b"/").unwrap_or(path);
    let base = trimmed.rsplit(|&c| c == b'/').next().unwrap_or(trimmed);
    let mut name = b"PaxHeaders.0/".to_vec();
    name.extend(ascii_fallback(base, 100 - name.len()));
    name
}

/// Appends one `"<len> <key>=<value>\n"` record; `<len>` counts itself.
pub fn pax_record(key: &[u8], value: &[u8], out: &mut Vec<u8>) {
    let rest = key.len() + value.len() + 3;
    let mut len = rest + 1;
    while len != rest + len.to_string().len() {
        len = rest + len.to_string().len();
    }
    out.extend_from_slice(len.to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(key);
    out.push(b'=');
    out.extend_from_slice(value);
    out.push(b'\n');
}

/// Parses PAX records; `None` if they are malformed.
pub fn parse_pax(mut data: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    let mut out = Vec::new();
    while !data.is_empty() {
        // Some writers pad the extended header's data with NULs.
        if data.iter().all(|&c| c == 0) {
            break;
        }
        let space = data.iter().position(|&c| c == b' ')?;
        let len: usize = std::str::from_utf8(&data[..space]).ok()?.parse().ok()?;
        if len <= space + 1 || len > data.len() || data[len - 1] != b'\n' {
            return None;
        }
        let record = &data[space + 1..len - 1];
        let eq = record.iter().position(|&c| c == b'=')?;
        out.push((&record[..eq], &record[eq + 1..]));
        data = &data[len..];
    }
    Some(out)
}

/// Parses a numeric header field: octal (space or NUL padded) or GNU
/// base-256. `None` if malformed or out of range.
pub fn parse_numeric(field: &[u8]) -> Option<u64> {
    if let Some(&first) = field.first() {
        if first & 0x80 != 0 {
            if first == 0xff {
                return None; // negative
            }
            let mut v: u64 = u64::from(first & 0x7f);
            for &c in &field[1..] {
                v = v.checked_mul(256)?.checked_add(u64::from(c))?;
            }
            return Some(v);
        }
    }
    let s = field.iter().skip_while(|&&c| c == b' ' || c == 0);
    let digits: Vec<u8> = s.take_while(|&&c| c != b' ' && c != 0).copied().collect();
    let rest_ok = field
        .iter()
        .skip_while(|&&c| c == b' ' || c == 0)
        .skip(digits.len())
        .all(|&c| c == b' ' || c == 0);
    if !rest_ok {
        return None;
    }
    let mut v: u64 = 0;
    for c in digits {
        if !(b'0'..=b'7').contains(&c) {
            return None;
        }
        v = v.checked_mul(8)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(v)
}

/// Whether `block`'s checksum field matches its bytes (unsigned, or the
/// signed sum some old writers used).
pub fn checksum_ok(block: &[u8; BLOCK]) -> bool {
    let Some(stored) = parse_numeric(&block[148..156]) else {
        return false;
    };
    let field = 8 * u64::from(b' ');
    let unsigned: u64 = block[..148]
        .iter()
        .chain(&block[156..])
        .map(|&c| u64::from(c))
        .sum::<u64>()
        + field;
    let signed: i64 = block[..148]
        .iter()
        .chain(&block[156..])
        .map(|&c| i64::from(c as i8))
        .sum::<i64>()
        + field as i64;
    stored == unsigned || stored as i64 == signed
}

/// The bytes of a NUL-terminated header field.
pub fn field_str(field: &[u8]) -> &[u8] {
    let end = field.iter().position(|&c| c == 0).unwrap_or(field.len());
    &field[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pax_record_lengths_count_themselves() {
        for (k, v, want) in [
            (&b"path"[..], &b"a"[..], &b"9 path=a\n"[..]),
            // 90 bytes fit a two-digit length (99); 91 need three (101).
            (
                b"path",
                &[b'x'; 90][..],
                &[&b"99 path="[..], &[b'x'; 90][..], b"\n"].concat()[..],
            ),
            (
                b"path",
                &[b'x'; 91][..],
                &[&b"101 path="[..], &[b'x'; 91][..], b"\n"].concat()[..],
            ),
        ] {
            let mut out = Vec::new();
            pax_record(k, v, &mut out);
            assert_eq!(out, want);
            assert_eq!(parse_pax(&out).unwrap(), vec![(k, v)]);
        }
    }

    #[test]
    fn splits_long_ascii_paths() {
        let long = [&[b'a'; 120][..], b"/", &[b'b'; 50][..]].concat();
        assert_eq!(split_ustar_path(&long), Some((&long[..120], &long[121..])));
        assert_eq!(split_ustar_path(&[b'a'; 101]), None);
        assert_eq!(split_ustar_path("ünï".as_bytes()), None);
        let dir = [&[b'd'; 150][..], b"/x/"].concat();
        assert_eq!(split_ustar_path(&dir), Some((&dir[..150], &b"x/"[..])));
    }

    #[test]
    fn headers_are_valid_and_minimal() {
        let mut out = Vec::new();
        encode(
            &Entry {
                path: b"etc/passwd",
                typeflag: REGULAR,
                mode: 0o4755,
                size: 10,
                mtime: 1,
                ..Entry::default()
            },
            &mut out,
        );
        assert_eq!(out.len(), BLOCK);
        let block: &[u8; BLOCK] = out[..].try_into().unwrap();
        assert!(checksum_ok(block));
        assert_eq!(&out[100..108], b"0004755\0");
        assert_eq!(parse_numeric(&out[124..136]), Some(10));

        out.clear();
        let long = vec![b'x'; 300];
        encode(
            &Entry {
                path: &long,
                typeflag: REGULAR,
                uid: 1 << 40,
                ..Entry::default()
            },
            &mut out,
        );
        assert_eq!(out.len(), 3 * BLOCK);
        assert_eq!(out[156], PAX_LOCAL);
        let size = parse_numeric(&out[124..136]).unwrap() as usize;
        let recs = parse_pax(&out[BLOCK..BLOCK + size]).unwrap();
        let keys: Vec<&[u8]> = recs.iter().map(|r| r.0).collect();
        assert_eq!(keys, [&b"path"[..], b"uid"]);
        assert_eq!(
            parse_numeric(&out[2 * BLOCK + 108..2 * BLOCK + 116]),
            Some(0)
        );
    }

    #[test]
    fn non_ascii_names_go_to_pax_as_raw_bytes() {
        let mut out = Vec::new();
        let e = Entry {
            path: b"bad\xff",
            typeflag: REGULAR,
            ..Entry::default()
        };
        encode(&e, &mut out);
        let size = parse_numeric(&out[124..136]).unwrap() as usize;
        let recs = parse_pax(&out[BLOCK..BLOCK + size]).unwrap();
        assert_eq!(recs, [(&b"path"[..], &b"bad\xff"[..])]);
        assert_eq!(field_str(&out[2 * BLOCK..2 * BLOCK + 100]), b"bad_");
    }

    #[test]
    fn pax_records_are_sorted_and_only_what_is_needed() {
        let xattrs = vec![
            (OsString::from("user.b"), b"2".to_vec()),
            (OsString::from("security.a"), b"1".to_vec()),
        ];
        let link = vec![b'l'; 101];
        let e = Entry {
            path: b"f",
            typeflag: SYMLINK,
            linkname: &link,
            gid: MAX_OCTAL_8 + 1,
            size: MAX_OCTAL_12 + 1,
            xattrs: &xattrs,
            fflags: Some("schg,uappnd"),
            ..Entry::default()
        };
        let mut out = Vec::new();
        encode(&e, &mut out);
        let size = parse_numeric(&out[124..136]).unwrap() as usize;
        let recs = parse_pax(&out[BLOCK..BLOCK + size]).unwrap();
        let keys: Vec<&[u8]> = recs.iter().map(|r| r.0).collect();
        assert_eq!(
            keys,
            [
                &b"SCHILY.fflags"[..],
                b"SCHILY.xattr.security.a",
                b"SCHILY.xattr.user.b",
                b"gid",
                b"linkpath",
                b"size"
            ]
        );
        assert_eq!(recs[0].1, b"schg,uappnd");
        assert_eq!(recs[3].1, b"2097152");
        let ustar = &out[out.len() - BLOCK..];
        assert_eq!(parse_numeric(&ustar[116..124]), Some(0));
        assert_eq!(field_str(&ustar[157..257]), &link[..100]);
    }

    #[test]
    fn numeric_fields() {
        assert_eq!(parse_numeric(b"0000644\0"), Some(0o644));
        assert_eq!(parse_numeric(b"   644 \0"), Some(0o644));
        assert_eq!(parse_numeric(b"\0\0\0\0"), Some(0));
        assert_eq!(parse_numeric(&[0x80, 0, 0, 0, 0, 0, 1, 0]), Some(256));
        assert_eq!(parse_numeric(b"0009"), None);
        assert_eq!(parse_numeric(b"12 34"), None);
        assert_eq!(parse_numeric(&[0xff; 8]), None);
    }
}
